//! What test runs leave behind (`tests_e2e::runs`): a stack whose test passed
//! drops its database and streams, a failed one keeps them; the cleaner drops
//! what ended runs left and nothing of a run still going. The cleaner is
//! tried on databases and streams of this test's own (a prefix and a stream
//! base nobody else uses), never on other runs' `hubtest_*`.

use async_nats::jetstream;
use sqlx::{Connection, PgPool};
use std::time::Duration;
use tests_e2e::{
    admin_database_url, eventually,
    runs::{self, Scope, RUN_LOCK_SPACE},
    TestStack,
};
use uuid::Uuid;

async fn database_exists(admin: &PgPool, name: &str) -> bool {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1) AS "v!""#,
        name,
    )
    .fetch_one(admin)
    .await
    .expect("pg_database")
}

async fn stream_exists(js: &jetstream::Context, name: &str) -> bool {
    js.get_stream(name).await.is_ok()
}

fn hex(n: usize) -> String {
    Uuid::new_v4().simple().to_string()[..n].to_owned()
}

#[tokio::test]
async fn a_passed_stack_drops_its_database_and_streams_and_a_failed_one_keeps_them() {
    let admin = PgPool::connect(&admin_database_url()).await.expect("admin");
    let js = jetstream::new(
        async_nats::connect(tests_e2e::nats_url())
            .await
            .expect("nats"),
    );

    let s = TestStack::spawn().await;
    let name = s.database_name().to_owned();
    assert!(
        name.starts_with(&format!("hubtest_{}_", runs::run_id())),
        "{name}"
    );
    let streams = [s.naming.stream("CORE"), s.naming.stream("PRODUCT")];
    for st in &streams {
        assert!(stream_exists(&js, st).await, "{st}");
    }
    assert!(database_exists(&admin, &name).await);
    // Dropped after a pass (not panicking): both gone.
    drop(s);
    assert!(!database_exists(&admin, &name).await, "{name} is left");
    for st in &streams {
        assert!(!stream_exists(&js, st).await, "{st} is left");
    }

    // A test that fails: its stack is dropped while the panic unwinds.
    let (tx, rx) = std::sync::mpsc::channel();
    let failed = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let s = TestStack::spawn().await;
            tx.send((s.database_name().to_owned(), s.naming.stream_suffix.clone()))
                .expect("send");
            panic!("a failing test (this panic is on purpose)");
        })
    })
    .join();
    assert!(failed.is_err(), "the test failed");
    let (name, suffix) = rx.recv().expect("its names");
    let core = format!("CORE{suffix}");
    assert!(
        database_exists(&admin, &name).await,
        "a failed test keeps its database"
    );
    assert!(stream_exists(&js, &core).await, "and its streams");
    runs::discard(&name, &suffix).await.expect("discard");
    assert!(!database_exists(&admin, &name).await);
    assert!(!stream_exists(&js, &core).await);
}

#[tokio::test]
async fn the_cleaner_drops_what_ended_runs_left_and_nothing_of_a_run_still_going() {
    let admin = PgPool::connect(&admin_database_url()).await.expect("admin");
    let js = jetstream::new(
        async_nats::connect(tests_e2e::nats_url())
            .await
            .expect("nats"),
    );
    // Names of this test's own: nothing else matches them, and the real
    // cleaner (prefix `hubtest_`) never looks at them.
    let own = hex(8);
    let scope = Scope {
        db_prefix: format!("hubclean{own}_"),
        stream_bases: vec![format!("CLEAN{own}")],
    };
    let (ended, going) = (hex(8), hex(8));
    let this_run = runs::run_id().to_owned();
    let db = |run: Option<&str>| match run {
        Some(run) => format!("{}{run}_{}", scope.db_prefix, hex(32)),
        None => format!("{}{}", scope.db_prefix, hex(32)),
    };
    // (name, kept by the first pass)
    let databases = [
        (db(None), false),
        (db(Some(&ended)), false),
        (db(Some(&ended)), false),
        (db(Some(&going)), true),
        (db(Some(&this_run)), true),
    ];
    for (name, _) in &databases {
        sqlx::query(&format!("CREATE DATABASE \"{name}\""))
            .execute(&admin)
            .await
            .expect("create database");
    }
    let base = &scope.stream_bases[0];
    let streams = [
        (format!("{base}_t{}", hex(12)), false),
        (format!("{base}_t{ended}{}", hex(12)), false),
        (format!("{base}_t{going}{}", hex(12)), true),
        // Not a test stream's name: never touched.
        (format!("{base}_x{going}"), true),
    ];
    for (i, (name, _)) in streams.iter().enumerate() {
        js.create_stream(jetstream::stream::Config {
            name: name.clone(),
            subjects: vec![format!("clean{own}.{i}")],
            storage: jetstream::stream::StorageType::Memory,
            ..Default::default()
        })
        .await
        .expect("create stream");
    }
    // The run still going holds its lock on a connection of its own.
    let mut holder = sqlx::PgConnection::connect(&admin_database_url())
        .await
        .expect("holder");
    let held: bool = sqlx::query_scalar!(
        r#"SELECT pg_try_advisory_lock($1, $2) AS "v!""#,
        RUN_LOCK_SPACE,
        runs::lock_key(&going).expect("a key"),
    )
    .fetch_one(&mut holder)
    .await
    .expect("lock");
    assert!(held);

    // A dry run names what would go and drops nothing.
    let dry = runs::clean(&scope, true).await.expect("dry run");
    let mut would: Vec<String> = dry.databases.clone();
    would.sort();
    let mut want: Vec<String> = databases
        .iter()
        .filter(|(_, kept)| !kept)
        .map(|(n, _)| n.clone())
        .collect();
    want.sort();
    assert_eq!(would, want);
    assert_eq!(dry.streams.len(), 2, "{:?}", dry.streams);
    for (name, _) in &databases {
        assert!(
            database_exists(&admin, name).await,
            "dry run dropped {name}"
        );
    }

    let done = runs::clean(&scope, false).await.expect("clean");
    for (name, kept) in &databases {
        assert_eq!(database_exists(&admin, name).await, *kept, "{name}");
    }
    for (name, kept) in &streams {
        assert_eq!(stream_exists(&js, name).await, *kept, "{name}");
    }
    assert_eq!(done.ended_runs, vec![ended]);
    let mut live = done.live_runs.clone();
    live.sort();
    let mut want = vec![going.clone(), this_run.clone()];
    want.sort();
    assert_eq!(live, want);

    // The run still going ends (its process, so its connection, is gone):
    // the next pass takes what it left, and still nothing of this run.
    holder.close().await.expect("close");
    let gone = eventually(Duration::from_secs(10), || async {
        runs::clean(&scope, false).await.expect("clean");
        (!database_exists(&admin, &databases[3].0).await).then_some(())
    })
    .await;
    assert!(gone.is_some(), "the ended run's database is dropped");
    assert!(!stream_exists(&js, &streams[2].0).await);
    assert!(database_exists(&admin, &databases[4].0).await);
    assert!(stream_exists(&js, &streams[3].0).await);

    // This test's own leftovers.
    sqlx::query(&format!(
        "DROP DATABASE \"{}\" WITH (FORCE)",
        databases[4].0
    ))
    .execute(&admin)
    .await
    .expect("drop");
    js.delete_stream(&streams[3].0).await.expect("delete");
}
