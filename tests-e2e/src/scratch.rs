//! Scratch databases for migration tests: an empty database of the run's
//! (dropped by the caller, or by the next clean step if the test fails), and
//! an earlier version's list of migrations to build a schema as it was.

use crate::admin_database_url;
use sqlx::{migrate::Migration, Connection, Executor, PgConnection};

/// A new empty database: its URL and an admin connection to it.
pub async fn database() -> (String, PgConnection) {
    let admin = admin_database_url();
    let name = crate::runs::database_name();
    let mut conn = PgConnection::connect(&admin).await.expect("admin");
    conn.execute(format!("CREATE DATABASE \"{name}\"").as_str())
        .await
        .expect("create database");
    let (base, _) = admin.rsplit_once('/').expect("a database part");
    let url = format!("{base}/{name}");
    let conn = PgConnection::connect(&url).await.expect("admin on it");
    (url, conn)
}

/// Drop the database at `url`.
pub async fn drop_database(url: &str) {
    let mut conn = PgConnection::connect(&admin_database_url())
        .await
        .expect("admin");
    let name = url.rsplit('/').next().unwrap_or_default();
    conn.execute(format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)").as_str())
        .await
        .ok();
}

/// A fixed list of migrations (an earlier version's).
#[derive(Debug)]
pub struct Only(pub Vec<Migration>);

impl Only {
    /// `migrator`'s migrations older than `version`.
    pub fn before(migrator: &sqlx::migrate::Migrator, version: i64) -> Only {
        Only(
            migrator
                .iter()
                .filter(|m| m.version < version)
                .cloned()
                .collect(),
        )
    }
}

impl sqlx::migrate::MigrationSource<'static> for Only {
    fn resolve(
        self,
    ) -> futures::future::BoxFuture<'static, Result<Vec<Migration>, sqlx::error::BoxDynError>> {
        Box::pin(async move { Ok(self.0) })
    }
}
