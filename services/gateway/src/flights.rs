//! One resolution per bearer at a time. When a cached identity expires under
//! load, every client using that token misses at once; without this each would
//! ask identity, a burst of identical calls (one per waiting client) that was
//! measured to stall `/me` for up to seconds under load. Concurrent misses for the
//! same key wait for the first one's answer instead. Nothing is kept once a
//! resolution finished or every caller waiting on it went away (a client that
//! disconnects drops its request future): a later request starts a new one.

use crate::cache::Key;
use std::{
    collections::HashMap,
    future::Future,
    sync::{Arc, Mutex, PoisonError},
};
use tokio::sync::OnceCell;

pub struct Flights<V> {
    map: Mutex<HashMap<Key, Arc<OnceCell<V>>>>,
}

impl<V> Default for Flights<V> {
    fn default() -> Self {
        Flights {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl<V: Clone> Flights<V> {
    /// `fetch`'s answer for `key`, shared with every concurrent caller for the
    /// same key. If the caller running `fetch` goes away, a waiting one takes over.
    pub async fn run<F, Fut>(&self, key: Key, fetch: F) -> V
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = V>,
    {
        let cell = {
            let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
            match map.get(&key) {
                // A finished flight whose callers all left is not joined: its
                // answer may predate a revocation.
                Some(c) if !c.initialized() => c.clone(),
                _ => {
                    let c = Arc::new(OnceCell::new());
                    map.insert(key, c.clone());
                    c
                }
            }
        };
        let guard = Leave {
            flights: self,
            key,
            cell,
        };
        guard.cell.get_or_init(fetch).await.clone()
    }

    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Removes the flight when its last caller leaves, finished or not.
struct Leave<'a, V> {
    flights: &'a Flights<V>,
    key: Key,
    cell: Arc<OnceCell<V>>,
}

impl<V> Drop for Leave<'_, V> {
    fn drop(&mut self) {
        let mut map = self
            .flights
            .map
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let ours = map
            .get(&self.key)
            .is_some_and(|c| Arc::ptr_eq(c, &self.cell));
        // Two references (the map's and this guard's): nobody else waits.
        if ours && (self.cell.initialized() || Arc::strong_count(&self.cell) <= 2) {
            map.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    // Paused time: the fetches' sleeps and the callers' timeouts end in the
    // order of their deadlines, not in the order a loaded machine gets to
    // them (with real time, a stall past 50 ms makes the 5 ms caller's
    // timeout and the fetch due at once, and `timeout` polls the fetch first).
    #[tokio::test(start_paused = true)]
    async fn concurrent_callers_share_one_fetch_and_nothing_is_kept() {
        let flights: Flights<u32> = Flights::default();
        let calls = AtomicUsize::new(0);
        let fetch = || async {
            calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            7
        };
        let answers = futures::future::join_all((0..20).map(|_| flights.run([1; 32], fetch))).await;
        assert_eq!(answers, vec![7; 20]);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(flights.in_flight(), 0);
        // The next miss fetches again.
        assert_eq!(flights.run([1; 32], fetch).await, 7);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        // Other keys do not wait for each other.
        let (a, b) = tokio::join!(flights.run([2; 32], fetch), flights.run([3; 32], fetch));
        assert_eq!((a, b), (7, 7));
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn callers_that_give_up_leave_nothing_behind() {
        let flights: Flights<u32> = Flights::default();
        let slow = || async {
            tokio::time::sleep(std::time::Duration::from_secs(60)).await;
            7
        };
        // A flood of unique keys whose only caller disconnects early.
        let gave_up = futures::future::join_all((0..500u32).map(|i| {
            let mut key = [0u8; 32];
            key[..4].copy_from_slice(&i.to_be_bytes());
            tokio::time::timeout(std::time::Duration::from_millis(10), flights.run(key, slow))
        }))
        .await;
        assert!(gave_up.iter().all(Result::is_err));
        assert_eq!(flights.in_flight(), 0);
        // One caller of two leaving keeps the flight for the other.
        let shared = [9u8; 32];
        let quick = || async {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            3
        };
        let (left, stayed) = tokio::join!(
            tokio::time::timeout(
                std::time::Duration::from_millis(5),
                flights.run(shared, quick)
            ),
            flights.run(shared, quick)
        );
        assert!(left.is_err());
        assert_eq!(stayed, 3);
        assert_eq!(flights.in_flight(), 0);
    }
}
