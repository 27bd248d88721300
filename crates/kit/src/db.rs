//! Postgres: one pool per service, its `search_path` pinned to the service's own
//! schema, and that schema's migrations.
//!
//! Queries here use sqlx's checked macros, except the DDL of [`provision`] and
//! [`migrate`]: a role or schema name is an identifier, which Postgres cannot
//! take as a bind parameter, so those statements are formatted from names
//! checked first (`check_schema_name`, the role's character set). They are
//! the kit's only runtime-string queries.

use crate::settings::DatabaseSettings;
use anyhow::Context;
use secrecy::ExposeSecret;
use sqlx::{
    migrate::{Migrate, Migration, MigrationSource, Migrator},
    postgres::{PgConnectOptions, PgPoolOptions},
    Connection, PgConnection, PgPool,
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
    let ping_if_idle = Duration::from_millis(s.ping_if_idle_ms);
    PgPoolOptions::new()
        .max_connections(s.max_connections)
        .min_connections(s.min_connections)
        .acquire_timeout(Duration::from_millis(s.acquire_timeout_ms))
        // sqlx pings every connection it hands out and every one given back:
        // two round trips beside each query's own (the most of a one-read
        // route's work in perf, issue 33). The ping at release stays (sqlx
        // cannot skip it): a connection handed out again within
        // `ping_if_idle_ms` was checked that recently. One idle longer
        // (where a restart or a network cut would have found it) is pinged
        // first, and a dead one replaced, as before.
        .test_before_acquire(false)
        .before_acquire(move |conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= ping_if_idle {
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
        // A new connection means Postgres answers again: end an outage in the
        // throttled log (a no-op when there is none).
        .after_connect(|_, _| {
            Box::pin(async {
                crate::outage::report_recovered(crate::outage::Dependency::Postgres);
                Ok(())
            })
        })
        .connect_with(options(s, schema, app_name)?)
        .await
        .with_context(|| format!("connecting to Postgres for schema {schema}"))
}

/// With `database.admin_url` set: make the role named in `database.url` (with
/// its password, if any) and `schema` owned by it, idempotently, and hand it
/// every object already in the schema (schemas made before roles existed).
/// The role gets nothing on any other schema, so one service's credential
/// cannot read another's tables. Without an admin URL this does nothing: the
/// migration Job has done it.
pub async fn provision(s: &DatabaseSettings, schema: &str) -> anyhow::Result<()> {
    let Some(admin) = s
        .admin_url
        .as_ref()
        .map(|u| u.expose_secret())
        .filter(|u| !u.is_empty())
    else {
        return Ok(());
    };
    check_schema_name(schema)?;
    let url = reqwest::Url::parse(s.url.expose_secret()).context("parsing database.url")?;
    let role = url.username().to_owned();
    let admin_opts = PgConnectOptions::from_str(admin).context("parsing database.admin_url")?;
    anyhow::ensure!(
        !role.is_empty()
            && role
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
        "database.url must name the service's role (lower-case letters, digits, _)"
    );
    if role == admin_opts.get_username() {
        return Ok(());
    }
    let password = url.password().map(percent_decode);
    let mut conn = PgConnection::connect_with(&admin_opts)
        .await
        .context("connecting with database.admin_url")?;
    // Roles are cluster-wide: another database's provisioning may create the
    // same role at the same moment.
    let created = sqlx::query(&format!("CREATE ROLE \"{role}\" LOGIN"))
        .execute(&mut conn)
        .await;
    if let Err(e) = created {
        let code = e
            .as_database_error()
            .and_then(|d| d.code())
            .map(|c| c.into_owned());
        if !matches!(code.as_deref(), Some("42710" | "23505")) {
            return Err(e).context("creating the service role");
        }
    }
    if let Some(pw) = password {
        let stmt = sqlx::query_scalar!(
            r#"SELECT format('ALTER ROLE %I WITH LOGIN PASSWORD %L', $1::text, $2::text) AS "stmt!""#,
            role,
            pw,
        )
        .fetch_one(&mut conn)
        .await?;
        sqlx::query(&stmt).execute(&mut conn).await?;
    }
    sqlx::query!("SELECT pg_advisory_lock(hashtext('hub-schema-create'))")
        .execute(&mut conn)
        .await?;
    let owned: sqlx::Result<()> = async {
        sqlx::query(&format!(
            "CREATE SCHEMA IF NOT EXISTS \"{schema}\" AUTHORIZATION \"{role}\""
        ))
        .execute(&mut conn)
        .await?;
        sqlx::query(&format!("ALTER SCHEMA \"{schema}\" OWNER TO \"{role}\""))
            .execute(&mut conn)
            .await?;
        sqlx::query(&reassign_sql(schema, &role))
            .execute(&mut conn)
            .await?;
        Ok(())
    }
    .await;
    sqlx::query_scalar!("SELECT pg_advisory_unlock(hashtext('hub-schema-create'))")
        .fetch_one(&mut conn)
        .await?;
    owned.with_context(|| format!("handing schema {schema} to role {role}"))?;
    conn.close().await?;
    Ok(())
}

/// Tables first (they carry their serial sequences), then what is left.
fn reassign_sql(schema: &str, role: &str) -> String {
    format!(
        r#"DO $$ DECLARE r record; BEGIN
  FOR r IN SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = '{schema}' AND c.relkind IN ('r', 'p', 'v', 'm')
             AND pg_get_userbyid(c.relowner) <> '{role}' LOOP
    EXECUTE format('ALTER %s %I.%I OWNER TO %I',
      CASE r.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'TABLE' END,
      '{schema}', r.relname, '{role}');
  END LOOP;
  FOR r IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = '{schema}' AND c.relkind = 'S'
             AND pg_get_userbyid(c.relowner) <> '{role}' LOOP
    EXECUTE format('ALTER SEQUENCE %I.%I OWNER TO %I', '{schema}', r.relname, '{role}');
  END LOOP;
  FOR r IN SELECT p.oid::regprocedure AS sig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE n.nspname = '{schema}' AND pg_get_userbyid(p.proowner) <> '{role}' LOOP
    EXECUTE format('ALTER ROUTINE %s OWNER TO %I', r.sig, '{role}');
  END LOOP;
END $$"#
    )
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Some(v) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn check_schema_name(schema: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        !schema.is_empty() && schema.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
        "schema names are snake_case"
    );
    Ok(())
}

/// Create `schema` if needed and apply its migrations. Safe to run from several
/// replicas at once: schema creation and sqlx's migrator both take advisory locks.
pub async fn migrate(pool: &PgPool, schema: &str, migrator: &Migrator) -> anyhow::Result<()> {
    check_schema_name(schema)?;
    let mut conn = pool.acquire().await?;
    sqlx::query!("SELECT pg_advisory_lock(hashtext('hub-schema-create'))")
        .execute(&mut *conn)
        .await?;
    // A service role without CREATE on the database finds its schema made by
    // `provision`: create only what is missing.
    let exists = sqlx::query_scalar!(
        r#"SELECT 1 AS "one!" FROM pg_namespace WHERE nspname = $1"#,
        schema
    )
    .fetch_optional(&mut *conn)
    .await?;
    let created = match exists {
        Some(_) => Ok(Default::default()),
        None => {
            sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\""))
                .execute(&mut *conn)
                .await
        }
    };
    sqlx::query_scalar!("SELECT pg_advisory_unlock(hashtext('hub-schema-create'))")
        .fetch_one(&mut *conn)
        .await?;
    created.with_context(|| format!("creating schema {schema}"))?;
    drop(conn);
    tolerant(migrator.iter().cloned().collect())
        .await?
        .run(pool)
        .await
        .with_context(|| format!("migrating schema {schema}"))?;
    Ok(())
}

/// `migrations` as a migrator that tolerates applied migrations it does not
/// know: those of a newer release, when an older binary runs against the
/// schema it migrated (a rollback, or old pods during a rollout). Migrations
/// are expand/contract (proto-docs/operations.md), so an older binary keeps
/// working on a newer schema.
pub async fn tolerant(migrations: Vec<Migration>) -> anyhow::Result<Migrator> {
    let mut m = Migrator::new(Listed(migrations)).await?;
    m.set_ignore_missing(true);
    Ok(m)
}

/// Migrations given as a list (for [`Migrator::new`]).
#[derive(Debug)]
struct Listed(Vec<Migration>);

impl MigrationSource<'static> for Listed {
    fn resolve(
        self,
    ) -> futures::future::BoxFuture<'static, Result<Vec<Migration>, sqlx::error::BoxDynError>> {
        Box::pin(async move { Ok(self.0) })
    }
}

/// What a service checks at start when it does not migrate (its migration Job
/// does, `database.migrate_at_start = false`): every migration this binary
/// knows is applied, unchanged, and none failed half-way. Migrations it does
/// not know (a newer release's) are tolerated. Errors name what to do.
pub async fn check(pool: &PgPool, schema: &str, migrator: &Migrator) -> anyhow::Result<()> {
    let mut conn = pool.acquire().await?;
    let not_migrated = || {
        format!("reading the applied migrations of schema {schema} (has its migration Job run? `<service> migrate`)")
    };
    if let Some(v) = conn.dirty_version().await.with_context(not_migrated)? {
        anyhow::bail!("migration {v} of schema {schema} failed half-way: repair it, then run the migration Job");
    }
    let applied: std::collections::HashMap<i64, Vec<u8>> = conn
        .list_applied_migrations()
        .await
        .with_context(not_migrated)?
        .into_iter()
        .map(|a| (a.version, a.checksum.into_owned()))
        .collect();
    let mut missing = Vec::new();
    for m in migrator
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
    {
        match applied.get(&m.version) {
            None => missing.push(m.version),
            Some(sum) if sum[..] != m.checksum[..] => anyhow::bail!(
                "migration {} of schema {schema} ({}) was applied with other contents than this binary's",
                m.version,
                m.description
            ),
            Some(_) => {}
        }
    }
    anyhow::ensure!(
        missing.is_empty(),
        "schema {schema} lacks migrations {missing:?} of this binary: run its migration Job \
         (`<service> migrate`) before starting it"
    );
    let newer = applied.len()
        - migrator
            .iter()
            .filter(|m| applied.contains_key(&m.version))
            .count();
    if newer > 0 {
        tracing::info!(
            schema,
            newer,
            "the schema has migrations of a newer release (tolerated)"
        );
    }
    Ok(())
}

/// Provision (when an admin URL is set), connect as the service's role, migrate.
pub async fn prepare(
    s: &DatabaseSettings,
    schema: &str,
    app_name: &str,
    migrator: &Migrator,
) -> anyhow::Result<PgPool> {
    provision(s, schema).await?;
    let pool = connect(s, schema, app_name).await?;
    migrate(&pool, schema, migrator).await?;
    Ok(pool)
}
