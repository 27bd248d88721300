//! Sliding-window rate limits kept in Postgres, so that every replica sees the
//! same counts. Each bucket is checked under a transaction-scoped advisory lock,
//! which makes check-then-record atomic across concurrent requests.

use sqlx::PgConnection;

pub struct Limit<'a> {
    pub bucket: &'a str,
    pub max: i64,
    pub window_secs: i64,
}

/// Within the caller's transaction: if every limit has room, record one hit in
/// each and return true; otherwise record nothing and return false.
pub async fn check_and_record(conn: &mut PgConnection, limits: &[Limit<'_>]) -> sqlx::Result<bool> {
    // Lock in a fixed order so two requests sharing buckets cannot deadlock.
    let mut ordered: Vec<&Limit> = limits.iter().collect();
    ordered.sort_by(|a, b| a.bucket.cmp(b.bucket));
    for l in &ordered {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(l.bucket)
            .execute(&mut *conn)
            .await?;
    }
    for l in &ordered {
        let used: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM rate_limit_hits \
             WHERE bucket = $1 AND at > now() - make_interval(secs => $2)",
        )
        .bind(l.bucket)
        .bind(l.window_secs as f64)
        .fetch_one(&mut *conn)
        .await?;
        if used >= l.max {
            return Ok(false);
        }
    }
    for l in &ordered {
        sqlx::query("INSERT INTO rate_limit_hits (bucket) VALUES ($1)")
            .bind(l.bucket)
            .execute(&mut *conn)
            .await?;
    }
    Ok(true)
}
