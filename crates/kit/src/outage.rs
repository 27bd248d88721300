//! Outages of Postgres and NATS, told apart from bugs: [`classify_sqlx`] and
//! [`classify`] name the cause of an error that means "the dependency cannot
//! be reached right now" (answered 503 with `Retry-After`, see
//! [`crate::error`]), and [`Throttle`] logs such failures once per cause and
//! interval instead of once per request.

use std::{
    collections::HashMap,
    sync::{LazyLock, Mutex},
    time::{Duration, Instant},
};

/// `Retry-After` (seconds) on every 503.
pub const RETRY_AFTER_SECS: u64 = 5;
/// The body of a 503 caused by an outage.
pub const UNAVAILABLE: &str = "service temporarily unavailable";
/// While an outage lasts, failures are summarized at most this often.
pub const SUMMARY_INTERVAL: Duration = Duration::from_secs(10);

/// Which dependency is out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dependency {
    Postgres,
    Nats,
}

/// A failure that means a dependency cannot be reached, with a stable cause
/// (the logging key) and the error's own text (logged, never answered).
#[derive(Debug, Clone)]
pub struct Outage {
    pub dependency: Dependency,
    pub cause: &'static str,
    pub detail: String,
}

/// The outage `e` means, if it means one: pool timeouts, I/O and TLS errors
/// (refused, reset, broken connections), a closed pool or crashed connection
/// worker, protocol errors on the wire, and the Postgres classes 08 (connection exception), 57P01-57P03
/// (administrator or crash shutdown, cannot connect now) and 53300 (too many
/// connections). Anything else (constraint violations, syntax, statement
/// timeouts, decoding) is not an outage.
pub fn classify_sqlx(e: &sqlx::Error) -> Option<Outage> {
    let cause = match e {
        sqlx::Error::PoolTimedOut => "postgres: pool timed out",
        sqlx::Error::PoolClosed => "postgres: pool closed",
        sqlx::Error::WorkerCrashed => "postgres: connection worker crashed",
        sqlx::Error::Io(_) => "postgres: connection failed",
        sqlx::Error::Tls(_) => "postgres: tls failed",
        // The wire said something a Postgres server would not (a proxy or
        // relay between us half up, an answer cut short during the TLS
        // negotiation): the connection, not the request, is at fault.
        sqlx::Error::Protocol(_) => "postgres: protocol error on the connection",
        sqlx::Error::Database(d) => match d.code().as_deref() {
            Some(c) if c.starts_with("08") => "postgres: connection exception",
            Some("57P01" | "57P02") => "postgres: shutting down",
            Some("57P03") => "postgres: cannot connect now",
            Some("53300") => "postgres: too many connections",
            _ => return None,
        },
        _ => return None,
    };
    Some(Outage {
        dependency: Dependency::Postgres,
        cause,
        detail: e.to_string(),
    })
}

fn classify_nats(e: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    use async_nats::jetstream::context as js;
    if let Some(p) = e.downcast_ref::<js::PublishError>() {
        return matches!(
            p.kind(),
            js::PublishErrorKind::TimedOut | js::PublishErrorKind::BrokenPipe
        )
        .then_some("nats: publish failed");
    }
    if let Some(p) = e.downcast_ref::<async_nats::PublishError>() {
        return matches!(p.kind(), async_nats::client::PublishErrorKind::Send)
            .then_some("nats: publish failed");
    }
    if let Some(r) = e.downcast_ref::<async_nats::RequestError>() {
        return matches!(r.kind(), async_nats::client::RequestErrorKind::TimedOut)
            .then_some("nats: request timed out");
    }
    if let Some(r) = e.downcast_ref::<js::RequestError>() {
        return matches!(r.kind(), js::RequestErrorKind::TimedOut)
            .then_some("nats: request timed out");
    }
    e.downcast_ref::<async_nats::ConnectError>()
        .map(|_| "nats: cannot connect")
}

/// The outage anywhere in `e`'s chain of causes (a `sqlx::Error` or a NATS
/// publish, request or connect failure), if any.
pub fn classify(e: &anyhow::Error) -> Option<Outage> {
    for cause in e.chain() {
        if let Some(crate::ApiError::Outage(o)) = cause.downcast_ref::<crate::ApiError>() {
            return Some(o.clone());
        }
        if let Some(s) = cause.downcast_ref::<sqlx::Error>() {
            return classify_sqlx(s);
        }
        if let Some(c) = classify_nats(cause) {
            return Some(Outage {
                dependency: Dependency::Nats,
                cause: c,
                detail: cause.to_string(),
            });
        }
    }
    None
}

/// What to log for one failure.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// The first failure of an outage: log it (at error).
    First,
    /// The interval passed: `suppressed` failures since the last line.
    Summary { suppressed: u64 },
    /// Counted, nothing to log.
    Quiet,
}

struct Episode {
    dependency: Dependency,
    started: Instant,
    last_line: Instant,
    suppressed: u64,
    total: u64,
}

/// One log line per cause and interval: the first failure of a cause is
/// logged, the next ones are counted and summarized at most once per
/// `interval`, and [`Throttle::recovered`] ends the cause's outage (logged
/// once, with its total).
pub struct Throttle {
    interval: Duration,
    open: Mutex<HashMap<&'static str, Episode>>,
}

/// An outage that ended: its cause, failures and length.
#[derive(Debug, PartialEq, Eq)]
pub struct Ended {
    pub cause: &'static str,
    pub failures: u64,
    pub lasted: Duration,
}

impl Throttle {
    pub fn new(interval: Duration) -> Self {
        Throttle {
            interval,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// Count a failure of `cause` at `now`; says what to log.
    pub fn failure(&self, dependency: Dependency, cause: &'static str, now: Instant) -> Line {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        match open.get_mut(cause) {
            None => {
                open.insert(
                    cause,
                    Episode {
                        dependency,
                        started: now,
                        last_line: now,
                        suppressed: 0,
                        total: 1,
                    },
                );
                Line::First
            }
            Some(ep) => {
                ep.total += 1;
                ep.suppressed += 1;
                if now.saturating_duration_since(ep.last_line) >= self.interval {
                    let suppressed = std::mem::take(&mut ep.suppressed);
                    ep.last_line = now;
                    Line::Summary { suppressed }
                } else {
                    Line::Quiet
                }
            }
        }
    }

    /// `dependency` answers again: end its open outages.
    pub fn recovered(&self, dependency: Dependency, now: Instant) -> Vec<Ended> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.is_empty() {
            return Vec::new();
        }
        let ended: Vec<&'static str> = open
            .iter()
            .filter(|(_, ep)| ep.dependency == dependency)
            .map(|(c, _)| *c)
            .collect();
        let mut out: Vec<Ended> = ended
            .into_iter()
            .filter_map(|c| {
                open.remove(c).map(|ep| Ended {
                    cause: c,
                    failures: ep.total,
                    lasted: now.saturating_duration_since(ep.started),
                })
            })
            .collect();
        out.sort_by_key(|e| e.cause);
        out
    }
}

static THROTTLE: LazyLock<Throttle> = LazyLock::new(|| Throttle::new(SUMMARY_INTERVAL));

/// Log `o` (a request failed because of it) through the process's throttle.
pub fn report(o: &Outage) {
    match THROTTLE.failure(o.dependency, o.cause, Instant::now()) {
        Line::First => tracing::error!(
            cause = o.cause,
            error = %o.detail,
            "dependency unavailable; answering 503 until it recovers"
        ),
        Line::Summary { suppressed } => tracing::warn!(
            cause = o.cause,
            failures = suppressed,
            error = %o.detail,
            "dependency still unavailable"
        ),
        Line::Quiet => {}
    }
}

/// A background pass (outbox relay, periodic job, event handler, worker)
/// failed with `e`: an outage goes through the throttle (one line per cause
/// and interval) and `true` is returned; anything else is the caller's to log.
pub fn report_background(e: &anyhow::Error) -> bool {
    match classify(e) {
        Some(o) => {
            report(&o);
            true
        }
        None => false,
    }
}

/// `dependency` answered (a readiness check, a new pool connection): log the
/// end of its outages, once each.
pub fn report_recovered(dependency: Dependency) {
    for e in THROTTLE.recovered(dependency, Instant::now()) {
        tracing::warn!(
            cause = e.cause,
            failures = e.failures,
            lasted_ms = e.lasted.as_millis() as u64,
            "dependency recovered"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_cause_and_interval_then_recovered_once() {
        let t = Throttle::new(Duration::from_secs(10));
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let pg = Dependency::Postgres;
        assert_eq!(t.failure(pg, "a", at(0)), Line::First);
        // Another cause has a line of its own.
        assert_eq!(t.failure(pg, "b", at(1)), Line::First);
        for ms in 1..100 {
            assert_eq!(t.failure(pg, "a", at(ms * 10)), Line::Quiet);
        }
        assert_eq!(
            t.failure(pg, "a", at(10_000)),
            Line::Summary { suppressed: 100 }
        );
        assert_eq!(t.failure(pg, "a", at(10_500)), Line::Quiet);
        assert_eq!(
            t.failure(pg, "a", at(20_000)),
            Line::Summary { suppressed: 2 }
        );
        // NATS answering ends nothing of Postgres.
        assert!(t.recovered(Dependency::Nats, at(20_001)).is_empty());
        let ended = t.recovered(pg, at(21_000));
        assert_eq!(
            ended,
            vec![
                Ended {
                    cause: "a",
                    failures: 103,
                    lasted: Duration::from_secs(21)
                },
                Ended {
                    cause: "b",
                    failures: 1,
                    lasted: Duration::from_millis(20_999)
                },
            ]
        );
        // Recovered once; the next failure starts a new outage.
        assert!(t.recovered(pg, at(22_000)).is_empty());
        assert_eq!(t.failure(pg, "a", at(23_000)), Line::First);
    }

    #[test]
    fn connection_failures_are_outages_and_the_rest_are_not() {
        let io = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        for e in [
            sqlx::Error::PoolTimedOut,
            sqlx::Error::PoolClosed,
            sqlx::Error::WorkerCrashed,
            io,
            sqlx::Error::Protocol("unexpected response from SSLRequest: 0x00".into()),
        ] {
            let o = classify_sqlx(&e).expect("an outage");
            assert_eq!(o.dependency, Dependency::Postgres);
        }
        assert!(classify_sqlx(&sqlx::Error::RowNotFound).is_none());
        assert!(classify_sqlx(&sqlx::Error::ColumnNotFound("x".into())).is_none());
        // Through anyhow's chain, with context on top.
        let wrapped = anyhow::Error::new(sqlx::Error::PoolTimedOut).context("loading the order");
        assert_eq!(
            classify(&wrapped).map(|o| o.cause),
            Some("postgres: pool timed out")
        );
        assert!(classify(&anyhow::anyhow!("a bug")).is_none());
        // An answer already classified, carried back into a background job.
        let api = anyhow::Error::new(crate::ApiError::from(sqlx::Error::PoolTimedOut));
        assert_eq!(
            classify(&api).map(|o| o.cause),
            Some("postgres: pool timed out")
        );
    }
}
