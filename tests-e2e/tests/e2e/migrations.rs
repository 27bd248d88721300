//! Pods check, the Job migrates: a service started with
//! `database.migrate_at_start = false` (the chart's pods) applies nothing; it
//! starts on a schema that has every migration it knows, tolerates those of a
//! newer release (a rollback, old pods mid-rollout), and refuses a schema
//! behind it, naming the migration Job. The `migrate` subcommand tolerates a
//! newer release's migrations too.

use kyc::Kyc;
use service_kit::service::Service;
use sqlx::migrate::{Migrate, Migration, MigrationType};
use tests_e2e::TestStack;

/// A version no release of this binary has: a newer release's migration.
const NEWER: i64 = 99_990_101_000_001;

async fn start(s: &TestStack) -> anyhow::Result<()> {
    let cancel = tokio_util::sync::CancellationToken::new();
    let started = Kyc::build(
        s.settings::<Kyc>("[database]\nmigrate_at_start = false\n"),
        service_kit::Runtime::new(cancel.clone()),
    )
    .await;
    cancel.cancel();
    if let Ok(app) = started {
        app.run_until_stopped().await?;
        return Ok(());
    }
    started.map(|_| ())
}

/// A connection to the stack's database with `search_path` kyc, where kyc's
/// `_sqlx_migrations` is.
async fn kyc_conn(s: &TestStack) -> sqlx::PgConnection {
    use sqlx::Connection;
    let opts: sqlx::postgres::PgConnectOptions = s.database_url.parse().expect("database url");
    sqlx::PgConnection::connect_with(&opts.options([("search_path", "kyc")]))
        .await
        .expect("connect")
}

/// A migration whose SQL does nothing: sqlx's own migrator records or
/// forgets its version (no hand-written SQL on sqlx's table).
fn no_op(version: i64, kind: MigrationType) -> Migration {
    Migration::new(version, "a test's".into(), kind, "SELECT 1".into(), false)
}

#[tokio::test]
async fn pods_check_the_schema_and_tolerate_a_newer_release() {
    let s = TestStack::spawn().await;
    start(&s).await.expect("a migrated schema: it starts");

    let mut conn = kyc_conn(&s).await;
    conn.apply(&no_op(NEWER, MigrationType::Simple))
        .await
        .expect("a newer release's migration recorded");
    start(&s)
        .await
        .expect("a newer release's migration is tolerated at start");
    kyc::migrate(&s.settings::<Kyc>(""))
        .await
        .expect("and by the migration Job");

    let latest = kyc::MIGRATOR
        .iter()
        .map(|m| m.version)
        .max()
        .expect("kyc has migrations");
    conn.revert(&no_op(latest, MigrationType::ReversibleDown))
        .await
        .expect("the latest migration forgotten");
    let err = format!(
        "{:#}",
        start(&s).await.expect_err("a schema behind the binary")
    );
    assert!(
        err.contains(&latest.to_string()) && err.contains("migration Job"),
        "{err}"
    );
}
