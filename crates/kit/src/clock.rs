//! Time as services see it: the system clock, moved forward in tests.
//!
//! Jobs and windows that depend on time (rate limits, sweeps, schedules) take
//! `now` from a [`Clock`] instead of `now()` in SQL, so tests can jump an hour
//! instead of waiting for one. Every clone shares one offset.

use std::sync::{
    atomic::{AtomicI64, Ordering},
    Arc,
};
use time::OffsetDateTime;

#[derive(Clone, Debug, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicI64>,
}

impl Clock {
    /// The system clock (no offset).
    pub fn system() -> Clock {
        Clock::default()
    }

    pub fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
            + time::Duration::milliseconds(self.offset_ms.load(Ordering::Relaxed))
    }

    /// Move this clock (and every clone) forward by `d`.
    pub fn advance(&self, d: time::Duration) {
        self.offset_ms
            .fetch_add(d.whole_milliseconds() as i64, Ordering::Relaxed);
    }
}

/// A listener bound before the service starts (the one-process stack binds
/// every service's port first, so that each knows the others' addresses).
#[derive(Clone, Default)]
pub struct Listener(Arc<std::sync::Mutex<Option<std::net::TcpListener>>>);

impl Listener {
    pub fn new(l: std::net::TcpListener) -> Listener {
        Listener(Arc::new(std::sync::Mutex::new(Some(l))))
    }

    /// The listener, once; None afterwards or when there is none.
    pub fn take(&self) -> Option<std::net::TcpListener> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Listener")
    }
}

/// What every service's constructor gets besides its settings.
#[derive(Clone, Debug, Default)]
pub struct Runtime {
    /// Fires on shutdown: servers stop, background tasks finish.
    pub cancel: tokio_util::sync::CancellationToken,
    pub clock: Clock,
    /// Serve on this instead of binding `http` from the settings.
    pub listener: Listener,
    /// The dev profile ([`profile_is_dev`](crate::settings::profile_is_dev)
    /// at start): dev-only settings (`auth.echo_dev_token`) are refused
    /// without it. The test stack runs as dev.
    pub dev: bool,
}

impl Runtime {
    pub fn new(cancel: tokio_util::sync::CancellationToken) -> Runtime {
        Runtime {
            cancel,
            clock: Clock::system(),
            listener: Listener::default(),
            dev: crate::settings::profile_is_dev(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_offset() {
        let c = Clock::system();
        let twin = c.clone();
        let before = twin.now();
        c.advance(time::Duration::hours(2));
        let gap = twin.now() - before;
        assert!(
            gap >= time::Duration::hours(2)
                && gap < time::Duration::hours(2) + time::Duration::seconds(5)
        );
    }
}
