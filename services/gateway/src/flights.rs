//! One resolution per bearer at a time. When a cached identity expires under
//! load, every client using that token misses at once; without this each would
//! ask identity, a burst of identical calls (one per waiting client) that was
//! measured to stall `/me` for up to seconds under load. Concurrent misses for the
//! same key wait for the first one's answer instead. Nothing is kept once a
//! resolution finished: a later request starts a new one.

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
        let v = cell.get_or_init(fetch).await.clone();
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if map.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            map.remove(&key);
        }
        v
    }

    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
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
}
