//! Sliding-window rate limits kept in Postgres, so that every replica sees the
//! same counts. Each bucket is checked under a transaction-scoped advisory lock,
//! which makes check-then-record atomic across concurrent requests. Windows are
//! measured on the service's [`Clock`](service_kit::Clock), so tests can move
//! past them. IPv6 clients are counted per /64 ([`ip_key`]): one host usually
//! has a whole /64 to rotate through.

use sqlx::PgConnection;
use std::net::IpAddr;
use time::OffsetDateTime;

/// The rate-limit key of a client IP: the address for IPv4, its /64 for IPv6.
pub fn ip_key(ip: &str) -> String {
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => {
            let s = v6.segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
        Ok(IpAddr::V6(v6)) => v6
            .to_ipv4_mapped()
            .map_or_else(String::new, |v4| v4.to_string()),
        Ok(IpAddr::V4(v4)) => v4.to_string(),
        Err(_) => ip.to_owned(),
    }
}

pub struct Limit<'a> {
    pub bucket: &'a str,
    pub max: i64,
    pub window_secs: i64,
}

/// One address's hits of `kind` per minute, counted in a transaction of its
/// own committed at once (refused attempts count too): whether this one is
/// still under `max`.
pub async fn allow_ip_per_minute(
    pool: &sqlx::PgPool,
    now: OffsetDateTime,
    kind: &str,
    ip: &str,
    max: i64,
) -> sqlx::Result<bool> {
    let bucket = format!("{kind}:ip:{}", ip_key(ip));
    let mut tx = pool.begin().await?;
    let allowed = check_and_record(
        &mut tx,
        now,
        &[Limit {
            bucket: &bucket,
            max,
            window_secs: 60,
        }],
    )
    .await?;
    tx.commit().await?;
    Ok(allowed)
}

/// Within the caller's transaction: if every limit has room, record one hit in
/// each and return true; otherwise record nothing and return false.
pub async fn check_and_record(
    conn: &mut PgConnection,
    now: OffsetDateTime,
    limits: &[Limit<'_>],
) -> sqlx::Result<bool> {
    // Lock in a fixed order so two requests sharing buckets cannot deadlock.
    let mut ordered: Vec<&Limit> = limits.iter().collect();
    ordered.sort_by(|a, b| a.bucket.cmp(b.bucket));
    for l in &ordered {
        sqlx::query!(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            l.bucket,
        )
        .execute(&mut *conn)
        .await?;
    }
    for l in &ordered {
        let used: i64 = sqlx::query_scalar!(
            r#"SELECT count(*) AS "n!" FROM rate_limit_hits
             WHERE bucket = $1 AND at > $3::timestamptz - make_interval(secs => $2)"#,
            l.bucket,
            l.window_secs as f64,
            now,
        )
        .fetch_one(&mut *conn)
        .await?;
        if used >= l.max {
            return Ok(false);
        }
    }
    for l in &ordered {
        sqlx::query!(
            "INSERT INTO rate_limit_hits (bucket, at) VALUES ($1, $2)",
            l.bucket,
            now,
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::ip_key;

    #[test]
    fn ipv6_clients_share_their_64_and_ipv4_stay_exact() {
        assert_eq!(ip_key("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
        assert_eq!(ip_key("2001:db8:1:2:bbbb::9"), ip_key("2001:db8:1:2::77"));
        assert_ne!(ip_key("2001:db8:1:3::1"), ip_key("2001:db8:1:2::1"));
        assert_eq!(ip_key("203.0.113.7"), "203.0.113.7");
        assert_eq!(ip_key("::ffff:203.0.113.7"), "203.0.113.7");
        assert_eq!(ip_key(""), "");
    }
}
