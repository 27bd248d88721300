//! The order rate limit per organization (`orders.rate_per_minute`,
//! `orders.burst`): a token bucket per organization in this process's
//! memory, so that the order hot path pays a map lookup, not a round trip.
//! Per replica: with N replicas an organization may place up to N times the
//! rate (documented in defaults.toml and decisions.md). Time is the
//! service's [`Clock`], so tests move past a refusal. The map is bounded:
//! past [`MAX_TRACKED`] organizations, the buckets that have refilled (which
//! hold nothing a fresh one would not) are dropped.

use hub_domain::OrgId;
use service_kit::Clock;
use std::{collections::HashMap, sync::Mutex};
use time::OffsetDateTime;

/// Buckets kept before the full ones are swept.
pub const MAX_TRACKED: usize = 100_000;

pub struct OrgRate {
    per_minute: u32,
    burst: u32,
    clock: Clock,
    buckets: Mutex<HashMap<OrgId, Bucket>>,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: OffsetDateTime,
}

impl OrgRate {
    pub fn new(per_minute: u32, burst: u32, clock: Clock) -> OrgRate {
        OrgRate {
            per_minute,
            burst: burst.max(1),
            clock,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Take one order of `org`: `Ok` when within the limit, else `Err` with
    /// the whole seconds until one more is allowed (at least 1).
    pub fn take(&self, org: OrgId) -> Result<(), u64> {
        if self.per_minute == 0 {
            return Ok(());
        }
        let now = self.clock.now();
        let per_sec = f64::from(self.per_minute) / 60.0;
        let burst = f64::from(self.burst);
        // A poisoned lock only means another request panicked while holding
        // it; the buckets stay usable.
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() >= MAX_TRACKED && !buckets.contains_key(&org) {
            buckets.retain(|_, b| refilled(*b, now, per_sec, burst) < burst);
        }
        let b = buckets.entry(org).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let tokens = refilled(*b, now, per_sec, burst);
        if tokens >= 1.0 {
            *b = Bucket {
                tokens: tokens - 1.0,
                at: now,
            };
            Ok(())
        } else {
            *b = Bucket { tokens, at: now };
            Err(((1.0 - tokens) / per_sec).ceil().max(1.0) as u64)
        }
    }
}

/// `b`'s tokens at `now` (never above `burst`).
fn refilled(b: Bucket, now: OffsetDateTime, per_sec: f64, burst: f64) -> f64 {
    let secs = (now - b.at).as_seconds_f64().max(0.0);
    (b.tokens + secs * per_sec).min(burst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate_per_organization() {
        let clock = Clock::system();
        let r = OrgRate::new(60, 3, clock.clone());
        let (a, b) = (OrgId::new(), OrgId::new());
        for _ in 0..3 {
            assert_eq!(r.take(a), Ok(()));
        }
        assert_eq!(r.take(a), Err(1));
        // Another organization has its own bucket.
        assert_eq!(r.take(b), Ok(()));
        clock.advance(time::Duration::seconds(1));
        assert_eq!(r.take(a), Ok(()));
        assert!(r.take(a).is_err());
        // Off: never refuses.
        let off = OrgRate::new(0, 1, clock);
        for _ in 0..100 {
            assert_eq!(off.take(a), Ok(()));
        }
    }
}
