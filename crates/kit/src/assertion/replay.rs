//! The assertion ids a replica has taken, so that each is used once.
//!
//! Two generations of a plain set: an id goes into the current one; when the
//! current one is `window` old it becomes the previous one, and the previous
//! one is emptied and becomes the current one, its table kept up to the size
//! the window that just ended needed (an eighth more) and given back beyond
//! it. An id is so remembered for at least `window` (twice an assertion's
//! lifetime) after its use, and at most twice that. Memory follows the request
//! rate (about 20 bytes an id), up and down, and stays flat under steady load.
//!
//! It replaced a `moka` cache bounded by `replay_cache_entries`. Full, that
//! cache evicted ids, or did not admit new ones (its TinyLFU admission), so a
//! replica serving more than `replay_cache_entries` requests in a window
//! forgot ids it had taken, and a replay of one was taken again. Here a full
//! set refuses instead (`Busy`, a 503): the guarantee holds or the request is
//! not served.

use std::{
    collections::HashSet,
    sync::Mutex,
    time::{Duration, Instant},
};
use uuid::Uuid;

/// Whether an id was taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// First use: taken now.
    Fresh,
    /// Taken before, within the window.
    Again,
    /// Both generations hold `capacity` ids: not taken, refused.
    Full,
}

pub(crate) struct ReplayGuard {
    window: Duration,
    capacity: usize,
    inner: Mutex<Generations>,
}

struct Generations {
    current: HashSet<u128>,
    previous: HashSet<u128>,
    /// When `current` began.
    started: Instant,
}

impl ReplayGuard {
    pub(crate) fn new(window: Duration, capacity: usize, now: Instant) -> ReplayGuard {
        ReplayGuard {
            window,
            capacity,
            inner: Mutex::new(Generations {
                current: HashSet::new(),
                previous: HashSet::new(),
                started: now,
            }),
        }
    }

    /// Take `id` at `now` (`Instant::now()` but in tests).
    pub(crate) fn take(&self, id: Uuid, now: Instant) -> Taken {
        let id = id.as_u128();
        // A panic elsewhere while the lock was held leaves sets that are
        // still whole (each operation on them is), so go on with them.
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let age = now.saturating_duration_since(g.started);
        if age >= self.window {
            let g = &mut *g;
            // The window that just ended says how many ids the next one
            // will hold at this rate: the emptied generation is sized for
            // that (an eighth more), so a busier spell's table is given back
            // once the rate falls instead of being kept for good.
            let expected = g.current.len();
            g.previous.clear();
            if age < 2 * self.window {
                std::mem::swap(&mut g.current, &mut g.previous);
                g.current.shrink_to(expected + expected / 8);
            } else {
                // Nothing in `current` is within the window any more: both
                // generations start afresh, holding no memory.
                g.current = HashSet::new();
                g.previous = HashSet::new();
            }
            g.started = now;
        }
        if g.previous.contains(&id) || g.current.contains(&id) {
            return Taken::Again;
        }
        if g.current.len() + g.previous.len() >= self.capacity {
            return Taken::Full;
        }
        g.current.insert(id);
        Taken::Fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(60);

    #[test]
    fn an_id_is_refused_again_for_at_least_the_window_and_forgotten_after_two() {
        let t0 = Instant::now();
        let g = ReplayGuard::new(WINDOW, 1000, t0);
        let early = Uuid::new_v4();
        let late = Uuid::new_v4();
        assert_eq!(g.take(early, t0), Taken::Fresh);
        assert_eq!(
            g.take(late, t0 + WINDOW - Duration::from_secs(1)),
            Taken::Fresh
        );
        // A rotation at WINDOW: both still refused.
        assert_eq!(g.take(early, t0 + WINDOW), Taken::Again);
        // `late` is remembered a whole window after its use, past the next
        // rotation's start...
        assert_eq!(
            g.take(late, t0 + 2 * WINDOW - Duration::from_secs(2)),
            Taken::Again
        );
        // ...and forgotten after the one after (its assertion long expired).
        assert_eq!(g.take(late, t0 + 3 * WINDOW), Taken::Fresh);
    }

    #[test]
    fn a_busy_window_s_table_is_given_back_when_the_rate_falls() {
        // It used to be cleared and kept: a replica held its busiest spell's
        // memory for good.
        let t0 = Instant::now();
        let g = ReplayGuard::new(WINDOW, 1_000_000, t0);
        for _ in 0..100_000 {
            assert_eq!(g.take(Uuid::new_v4(), t0), Taken::Fresh);
        }
        let busy = g.inner.lock().expect("not poisoned").current.capacity();
        assert!(busy >= 100_000);
        // Two quiet windows of 100 ids each: both generations come back to
        // the quiet rate's size.
        for turn in 1..=3 {
            let at = t0 + turn * WINDOW;
            for _ in 0..100 {
                assert_eq!(g.take(Uuid::new_v4(), at), Taken::Fresh);
            }
        }
        let inner = g.inner.lock().expect("not poisoned");
        let held = inner.current.capacity() + inner.previous.capacity();
        assert!(
            held < 1_000,
            "{held} slots held after the rate fell (busy: {busy})"
        );
    }

    #[test]
    fn a_long_quiet_spell_gives_back_all_the_memory() {
        let t0 = Instant::now();
        let g = ReplayGuard::new(WINDOW, 1_000_000, t0);
        for _ in 0..10_000 {
            assert_eq!(g.take(Uuid::new_v4(), t0), Taken::Fresh);
        }
        assert_eq!(g.take(Uuid::new_v4(), t0 + 5 * WINDOW), Taken::Fresh);
        let inner = g.inner.lock().expect("not poisoned");
        let held = inner.current.capacity() + inner.previous.capacity();
        assert!(held < 100, "{held} slots held after a quiet spell");
    }

    #[test]
    fn a_long_quiet_spell_forgets_everything_at_once() {
        let t0 = Instant::now();
        let g = ReplayGuard::new(WINDOW, 1000, t0);
        let id = Uuid::new_v4();
        assert_eq!(g.take(id, t0), Taken::Fresh);
        assert_eq!(g.take(id, t0 + 5 * WINDOW), Taken::Fresh);
        assert_eq!(g.take(id, t0 + 5 * WINDOW), Taken::Again);
    }

    #[test]
    fn a_full_guard_refuses_new_ids_and_never_forgets_a_taken_one() {
        // The old cache, full, dropped ids it had taken: a replay of one of
        // the first was taken again.
        let t0 = Instant::now();
        let g = ReplayGuard::new(WINDOW, 100, t0);
        let ids: Vec<Uuid> = (0..100).map(|_| Uuid::new_v4()).collect();
        for id in &ids {
            assert_eq!(g.take(*id, t0), Taken::Fresh);
        }
        assert_eq!(g.take(Uuid::new_v4(), t0), Taken::Full);
        for id in &ids {
            assert_eq!(g.take(*id, t0 + Duration::from_secs(1)), Taken::Again);
        }
        // The window passes: room again, and the first ids still refused
        // until their generation goes.
        assert_eq!(g.take(Uuid::new_v4(), t0 + WINDOW), Taken::Full);
        assert_eq!(g.take(ids[0], t0 + WINDOW), Taken::Again);
        assert_eq!(g.take(Uuid::new_v4(), t0 + 2 * WINDOW), Taken::Fresh);
    }
}
