//! Postgres: one pool per service, its `search_path` pinned to the service's own
//! schema, and that schema's migrations.

use crate::settings::DatabaseSettings;
use anyhow::Context;
use secrecy::ExposeSecret;
use sqlx::{
    migrate::Migrator,
    postgres::{PgConnectOptions, PgPoolOptions},
    PgPool,
};
use std::{str::FromStr, time::Duration};

/// Connection settings for `schema`: its `search_path`, the application name.
pub fn options(
    s: &DatabaseSettings,
    schema: &str,
    app_name: &str,
) -> anyhow::Result<PgConnectOptions> {
    Ok(PgConnectOptions::from_str(s.url.expose_secret())
        .context("parsing database.url")?
        .application_name(app_name)
        .options([("search_path", schema)]))
}

/// A pool whose connections see only `schema` (and `public` for extensions).
pub async fn connect(s: &DatabaseSettings, schema: &str, app_name: &str) -> anyhow::Result<PgPool> {
    PgPoolOptions::new()
        .max_connections(s.max_connections)
        .min_connections(s.min_connections)
        .acquire_timeout(Duration::from_millis(s.acquire_timeout_ms))
        .connect_with(options(s, schema, app_name)?)
        .await
        .with_context(|| format!("connecting to Postgres for schema {schema}"))
}

/// Create `schema` if needed and apply its migrations. Safe to run from several
/// replicas at once: schema creation and sqlx's migrator both take advisory locks.
pub async fn migrate(pool: &PgPool, schema: &str, migrator: &Migrator) -> anyhow::Result<()> {
    anyhow::ensure!(
        !schema.is_empty() && schema.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
        "schema names are snake_case"
    );
    let mut conn = pool.acquire().await?;
    sqlx::query("SELECT pg_advisory_lock(hashtext('hub-schema-create'))")
        .execute(&mut *conn)
        .await?;
    let created = sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\""))
        .execute(&mut *conn)
        .await;
    sqlx::query("SELECT pg_advisory_unlock(hashtext('hub-schema-create'))")
        .execute(&mut *conn)
        .await?;
    created.with_context(|| format!("creating schema {schema}"))?;
    drop(conn);
    migrator
        .run(pool)
        .await
        .with_context(|| format!("migrating schema {schema}"))?;
    Ok(())
}
