//! Pods check, the Job migrates: a service started with
//! `database.migrate_at_start = false` (the chart's pods) applies nothing; it
//! starts on a schema that has every migration it knows, tolerates those of a
//! newer release (a rollback, old pods mid-rollout), and refuses a schema
//! behind it, naming the migration Job. The `migrate` subcommand tolerates a
//! newer release's migrations too.

use kyc::Kyc;
use service_kit::service::Service;
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

// sqlx's own `_sqlx_migrations` table is not in the schemas the query macros
// are checked against (scripts/sqlx.sh migrates with psql): runtime strings.
async fn exec(s: &TestStack, sql: &str, version: i64) {
    sqlx::query(sql)
        .bind(version)
        .execute(&s.db)
        .await
        .expect(sql);
}

#[tokio::test]
async fn pods_check_the_schema_and_tolerate_a_newer_release() {
    let s = TestStack::spawn().await;
    start(&s).await.expect("a migrated schema: it starts");

    exec(
        &s,
        "INSERT INTO kyc._sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ($1, 'a newer release', true, '\\x00'::bytea, 1)",
        NEWER,
    )
    .await;
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
    exec(
        &s,
        "DELETE FROM kyc._sqlx_migrations WHERE version = $1",
        latest,
    )
    .await;
    let err = format!(
        "{:#}",
        start(&s).await.expect_err("a schema behind the binary")
    );
    assert!(
        err.contains(&latest.to_string()) && err.contains("migration Job"),
        "{err}"
    );
}
