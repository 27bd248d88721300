//! Test runs and what they leave behind.
//!
//! Every test process is one *run*: a random id of 8 hex digits that names
//! everything its stacks create (databases `hubtest_<run>_<uuid>`, streams
//! `<BASE>_t<run><12 hex>`), and a Postgres session-level advisory lock
//! `(RUN_LOCK_SPACE, <run>)` in the administrator's database, taken before the
//! first of those is created and held by a connection of the process for as
//! long as the process lives. However the process ends (passed, failed,
//! killed), its socket closes and Postgres releases the lock.
//!
//! The cleaner ([`clean`], `make test` runs it before the tests) tells the runs
//! that ended from those still running by trying each run's lock: getting it
//! means nobody holds it, so the run's databases and streams are dropped; a run
//! whose lock is held is left alone, so two `make test` on one Postgres and
//! NATS no longer destroy each other. Names from before runs had ids
//! (`hubtest_<uuid>`, `<BASE>_t<12 hex>`) are dropped as before.
//!
//! A stack whose test passed drops its database and streams itself when it is
//! dropped ([`discard_on_pass`]); a failed test's are kept for a look until
//! the next cleaner finds its run ended.

use anyhow::Context;
use futures::TryStreamExt;
use sqlx::{Connection, Executor, PgConnection};
use std::{collections::BTreeMap, sync::OnceLock, time::Duration};
use uuid::Uuid;

use crate::{admin_database_url, nats_url, TEST_DB_PREFIX};

/// The first key of every run lock (`pg_try_advisory_lock(int, int)`, a key
/// space apart from the one-bigint locks the services take): "hubt".
pub const RUN_LOCK_SPACE: i32 = 0x6875_6274;

/// Hex digits of a run id.
const RUN_LEN: usize = 8;
/// Hex digits of a stack's own part of its stream suffix.
const TAG_LEN: usize = 12;

static RUN: OnceLock<Result<String, String>> = OnceLock::new();

/// This process's run id (8 hex digits). The first call takes the run's lock
/// on a connection of its own (a thread that keeps it until the process ends).
pub fn run_id() -> &'static str {
    match RUN.get_or_init(start_run) {
        Ok(id) => id,
        Err(e) => panic!("cannot start the test run: {e}"),
    }
}

/// The second key of `run`'s lock.
pub fn lock_key(run: &str) -> Option<i32> {
    (run.len() == RUN_LEN && run.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| u32::from_str_radix(run, 16).ok())
        .flatten()
        .map(|k| k as i32)
}

/// A new database name of this run: `hubtest_<run>_<uuid>`.
pub fn database_name() -> String {
    format!("{TEST_DB_PREFIX}{}_{}", run_id(), Uuid::new_v4().simple())
}

/// A new stack tag of this run (`<run><12 hex>`): the subject prefix is
/// `t<tag>.`, the stream suffix `_t<tag>`.
pub fn stack_tag() -> String {
    format!(
        "{}{}",
        run_id(),
        &Uuid::new_v4().simple().to_string()[..TAG_LEN]
    )
}

fn start_run() -> Result<String, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("test-run-lock".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(format!("a runtime for the run lock: {e}")));
                    return;
                }
            };
            rt.block_on(hold_run_lock(tx));
        })
        .map_err(|e| format!("a thread for the run lock: {e}"))?;
    rx.recv_timeout(Duration::from_secs(60))
        .map_err(|_| "the run lock was not taken within 60 s".to_owned())?
}

/// Take a free run id's lock and keep it: the connection stays open until the
/// process ends. Should the connection break (Postgres restarted), the same
/// lock is taken again on a new one.
async fn hold_run_lock(started: std::sync::mpsc::Sender<Result<String, String>>) {
    let admin = admin_database_url();
    let mut conn = match PgConnection::connect(&admin).await {
        Ok(c) => c,
        Err(e) => {
            let _ = started.send(Err(format!("connecting to {admin}: {e}")));
            return;
        }
    };
    let id = loop {
        let id = hex(Uuid::new_v4().as_bytes())[..RUN_LEN].to_owned();
        match try_lock(&mut conn, &id).await {
            Ok(true) => break id,
            // Another live run drew the same id: draw again.
            Ok(false) => continue,
            Err(e) => {
                let _ = started.send(Err(format!("taking the run lock: {e}")));
                return;
            }
        }
    };
    let _ = started.send(Ok(id.clone()));
    loop {
        tokio::time::sleep(Duration::from_secs(10)).await;
        if conn.ping().await.is_ok() {
            continue;
        }
        conn = loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if let Ok(mut c) = PgConnection::connect(&admin).await {
                if try_lock(&mut c, &id).await.unwrap_or(false) {
                    break c;
                }
            }
        };
    }
}

async fn try_lock(conn: &mut PgConnection, run: &str) -> sqlx::Result<bool> {
    let key = lock_key(run).ok_or_else(|| sqlx::Error::Protocol(format!("bad run id {run}")))?;
    sqlx::query_scalar!(
        r#"SELECT pg_try_advisory_lock($1, $2) AS "locked!""#,
        RUN_LOCK_SPACE,
        key
    )
    .fetch_one(conn)
    .await
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Drop a test database (its connections ended first).
pub async fn drop_database(admin: &mut PgConnection, name: &str) -> sqlx::Result<()> {
    admin
        .execute(format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)").as_str())
        .await
        .map(|_| ())
}

/// Delete a stream; one that does not exist is no error.
async fn delete_stream(js: &async_nats::jetstream::Context, name: &str) -> anyhow::Result<()> {
    use async_nats::jetstream::{context::DeleteStreamErrorKind, ErrorCode};
    match js.delete_stream(name).await {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(e.kind(), DeleteStreamErrorKind::JetStream(j)
                if j.error_code() == ErrorCode::STREAM_NOT_FOUND) =>
        {
            Ok(())
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("deleting stream {name}"))),
    }
}

/// The test streams' bases: every event stream and the dead-letter stream.
pub fn stream_bases() -> Vec<String> {
    event_contracts::STREAMS
        .iter()
        .map(|(base, _)| (*base).to_owned())
        .chain([service_kit::deadletter::STREAM.to_owned()])
        .collect()
}

/// After a passed test (not while a panic unwinds), [`discard`] its database
/// and streams. Runs on a thread of its own (callers are in `Drop`, inside the
/// test's runtime) and waits for it.
pub fn discard_on_pass(database: String, stream_suffix: String) {
    if std::thread::panicking() {
        return;
    }
    let work = move || -> anyhow::Result<()> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(async {
                tokio::time::timeout(Duration::from_secs(60), discard(&database, &stream_suffix))
                    .await
                    .context("within 60 s")?
            })
    };
    let outcome = std::thread::spawn(work)
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the cleanup thread panicked")));
    if let Err(e) = outcome {
        // Not the test's failure: the cleaner removes what is left once this
        // run has ended.
        eprintln!("cleaning up after the test: {e:#}");
    }
}

/// Drop the database `database` and delete the streams `<base><stream_suffix>`
/// of every [`stream_bases`] base.
pub async fn discard(database: &str, stream_suffix: &str) -> anyhow::Result<()> {
    let mut admin = PgConnection::connect(&admin_database_url()).await?;
    drop_database(&mut admin, database).await?;
    admin.close().await?;
    let js = async_nats::jetstream::new(async_nats::connect(nats_url()).await?);
    for base in stream_bases() {
        delete_stream(&js, &format!("{base}{stream_suffix}")).await?;
    }
    Ok(())
}

/// What the cleaner looks at.
#[derive(Clone, Debug)]
pub struct Scope {
    /// Databases whose name starts with this (`hubtest_` for the tests).
    pub db_prefix: String,
    /// Streams named `<base>_t<hex>` for these bases.
    pub stream_bases: Vec<String>,
}

impl Default for Scope {
    fn default() -> Self {
        Scope {
            db_prefix: TEST_DB_PREFIX.to_owned(),
            stream_bases: stream_bases(),
        }
    }
}

/// Whose a name is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// A run's (its id).
    Run(String),
    /// From before runs had ids: always dropped.
    Unnamed,
}

/// The owner of a database under `prefix`: `<prefix><run>_<32 hex>` is the
/// run's, anything else under the prefix is unnamed; None outside it.
pub fn database_owner(prefix: &str, name: &str) -> Option<Owner> {
    let rest = name.strip_prefix(prefix)?;
    Some(match rest.split_once('_') {
        Some((run, uuid))
            if lock_key(run).is_some()
                && uuid.len() == 32
                && uuid.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            Owner::Run(run.to_owned())
        }
        _ => Owner::Unnamed,
    })
}

/// The owner of a stream of one of `bases`: `<base>_t<8 hex run><12 hex>` is
/// the run's, `<base>_t<12 hex>` unnamed; None for any other name.
pub fn stream_owner(bases: &[String], name: &str) -> Option<Owner> {
    bases.iter().find_map(|base| {
        let tag = name.strip_prefix(base.as_str())?.strip_prefix("_t")?;
        if !tag.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        match tag.len() {
            TAG_LEN => Some(Owner::Unnamed),
            n if n == RUN_LEN + TAG_LEN => Some(Owner::Run(tag[..RUN_LEN].to_owned())),
            _ => None,
        }
    })
}

/// What a cleaner pass did (or, dry, would do).
#[derive(Debug, Default)]
pub struct Cleaned {
    pub databases: Vec<String>,
    pub streams: Vec<String>,
    /// Runs found ended (their lock was free).
    pub ended_runs: Vec<String>,
    /// Runs still alive (their lock is held): nothing of theirs touched.
    pub live_runs: Vec<String>,
}

/// Drop the databases and delete the streams in `scope` that belong to no
/// live run. `dry`: only say what would go.
pub async fn clean(scope: &Scope, dry: bool) -> anyhow::Result<Cleaned> {
    let mut admin = PgConnection::connect(&admin_database_url())
        .await
        .context("connecting to the admin database")?;
    let js = async_nats::jetstream::new(
        async_nats::connect(nats_url())
            .await
            .context("connecting to NATS")?,
    );
    let pattern = format!("{}%", scope.db_prefix.replace('_', "\\_"));
    let databases: Vec<String> = sqlx::query_scalar!(
        r#"SELECT datname::text AS "datname!" FROM pg_database WHERE datname LIKE $1"#,
        pattern,
    )
    .fetch_all(&mut admin)
    .await?;
    let streams: Vec<String> = js.stream_names().try_collect().await?;
    let owned = databases
        .into_iter()
        .filter_map(|d| Some((database_owner(&scope.db_prefix, &d)?, Item::Database(d))))
        .chain(
            streams
                .into_iter()
                .filter_map(|s| Some((stream_owner(&scope.stream_bases, &s)?, Item::Stream(s)))),
        );
    let mut by_run: BTreeMap<String, Vec<Item>> = BTreeMap::new();
    let mut unnamed = Vec::new();
    for (owner, item) in owned {
        match owner {
            Owner::Run(run) => by_run.entry(run).or_default().push(item),
            Owner::Unnamed => unnamed.push(item),
        }
    }
    let mut out = Cleaned::default();
    for item in unnamed {
        remove(&mut admin, &js, item, dry, &mut out).await?;
    }
    for (run, items) in by_run {
        // Free: the run ended. Held (by the run, or by another cleaner at
        // work on it): leave it.
        if !try_lock(&mut admin, &run).await? {
            out.live_runs.push(run);
            continue;
        }
        let mut done = Ok(());
        for item in items {
            done = remove(&mut admin, &js, item, dry, &mut out).await;
            if done.is_err() {
                break;
            }
        }
        let key = lock_key(&run).unwrap_or_default();
        sqlx::query_scalar!("SELECT pg_advisory_unlock($1, $2)", RUN_LOCK_SPACE, key)
            .fetch_one(&mut admin)
            .await?;
        done?;
        out.ended_runs.push(run);
    }
    admin.close().await?;
    Ok(out)
}

enum Item {
    Database(String),
    Stream(String),
}

async fn remove(
    admin: &mut PgConnection,
    js: &async_nats::jetstream::Context,
    item: Item,
    dry: bool,
    out: &mut Cleaned,
) -> anyhow::Result<()> {
    match item {
        Item::Database(d) => {
            if !dry {
                drop_database(admin, &d)
                    .await
                    .with_context(|| format!("dropping {d}"))?;
            }
            out.databases.push(d);
        }
        Item::Stream(s) => {
            if !dry {
                delete_stream(js, &s).await?;
            }
            out.streams.push(s);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_say_their_run() {
        let p = "hubtest_";
        let uuid = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            database_owner(p, &format!("hubtest_89abcdef_{uuid}")),
            Some(Owner::Run("89abcdef".into()))
        );
        // From before run ids, and anything else under the prefix.
        assert_eq!(
            database_owner(p, &format!("hubtest_{uuid}")),
            Some(Owner::Unnamed)
        );
        assert_eq!(database_owner(p, "hubtest_x"), Some(Owner::Unnamed));
        assert_eq!(
            database_owner(p, &format!("hubtest_89abcdeg_{uuid}")),
            Some(Owner::Unnamed)
        );
        assert_eq!(database_owner(p, "hub"), None);
        assert_eq!(database_owner(p, &format!("other_89abcdef_{uuid}")), None);
    }

    #[test]
    fn stream_names_say_their_run() {
        let bases = stream_bases();
        assert_eq!(
            stream_owner(&bases, "CORE_t0123456789ab"),
            Some(Owner::Unnamed)
        );
        assert_eq!(
            stream_owner(&bases, "DLQ_t89abcdef0123456789ab"),
            Some(Owner::Run("89abcdef".into()))
        );
        assert_eq!(
            stream_owner(&bases, "PRODUCT_tabcdefabcdef"),
            Some(Owner::Unnamed)
        );
        for other in [
            "CORE",
            "CORE_bench",
            "CORE_t0123",
            "CORE_t0123456789abx",
            "OTHER_t0123456789ab",
        ] {
            assert_eq!(stream_owner(&bases, other), None, "{other}");
        }
    }

    #[test]
    fn run_ids_are_lock_keys() {
        assert_eq!(lock_key("00000001"), Some(1));
        assert_eq!(lock_key("ffffffff"), Some(-1));
        assert_eq!(lock_key("fffffff"), None);
        assert_eq!(lock_key("gfffffff"), None);
    }
}
