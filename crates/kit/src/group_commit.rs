//! Group commit: many requests, one transaction.
//!
//! When every request ends in a commit of its own, the commit is the cost of
//! every request, and a hot row admits one commit at a time however many
//! requests wait for it. A [`GroupCommit`] runs `writers` tasks; each takes
//! the items waiting for it at that moment (up to `max_batch`) and hands them
//! to its [`Batch`] in one call, which applies them in one transaction and
//! answers one output per item, in order. A submitter is answered only after
//! the batch that holds its item finished, so "answered" means "committed"
//! (or refused, or failed, as the output says).
//!
//! Items are routed to a writer by a key (an organization, a user), so items
//! of one key keep their order and meet in the same batches. The wallet and
//! the AI-token book of org-billing and the agent's journal of exchanges are
//! batches of this one writer.

use crate::metrics::CommitMetrics;
use std::{future::Future, sync::Arc, time::Duration};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// What a writer does with the items of one batch.
pub trait Batch: Send + 'static {
    type Item: Send + 'static;
    type Output: Send + 'static;

    /// Drop, unapplied, items whose submitter stopped waiting before the batch
    /// started (a money move applied after its caller gave up would be applied
    /// again by the retry). When false, such items are applied all the same.
    const DROP_ABANDONED: bool;

    /// For logs: which writer this is.
    fn name(&self) -> &'static str;

    /// The answer for an item that must not enter a batch any more (its
    /// deadline passed), or None to admit it.
    fn refuse_late(&self, _item: &Self::Item) -> Option<Self::Output> {
        None
    }

    /// Apply `items` (never empty) in one transaction: exactly one output per
    /// item, in order. A failure of the whole batch is an output per item.
    fn apply(&mut self, items: &[Self::Item]) -> impl Future<Output = Vec<Self::Output>> + Send;
}

/// The submitter's side was closed before an answer: the writers stopped
/// (shutdown), so the item may or may not have been applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the writer stopped before answering (shutting down)")]
pub struct Stopped;

impl From<Stopped> for crate::error::ApiError {
    /// Answered as the service shutting down (503).
    fn from(_: Stopped) -> Self {
        crate::error::ApiError::Unavailable("the service is shutting down".into())
    }
}

type Job<B> = (<B as Batch>::Item, oneshot::Sender<<B as Batch>::Output>);

/// The submitting side of a set of writers (cheap to clone).
pub struct GroupCommit<B: Batch> {
    shards: Arc<[mpsc::Sender<Job<B>>]>,
}

impl<B: Batch> Clone for GroupCommit<B> {
    fn clone(&self) -> Self {
        GroupCommit {
            shards: self.shards.clone(),
        }
    }
}

/// How the writers run.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Writer tasks (at least one).
    pub writers: usize,
    /// Most items in one batch (at least one).
    pub max_batch: usize,
    /// After `cancel` fires, how long writers go on with what is queued.
    pub grace: Duration,
}

impl<B: Batch> GroupCommit<B> {
    /// Start `shape.writers` tasks, each with the batch `make` gives it. They
    /// stop when every `GroupCommit` clone is gone (after applying what was
    /// queued), or `shape.grace` after `cancel` fires.
    pub fn spawn(
        shape: Shape,
        cancel: CancellationToken,
        metrics: CommitMetrics,
        mut make: impl FnMut() -> B,
    ) -> (GroupCommit<B>, Vec<tokio::task::JoinHandle<()>>) {
        let max_batch = shape.max_batch.max(1);
        let (senders, tasks): (Vec<_>, Vec<_>) = (0..shape.writers.max(1))
            .map(|_| {
                let (tx, rx) = mpsc::channel::<Job<B>>(max_batch * 4);
                let task = tokio::spawn(run(
                    make(),
                    rx,
                    max_batch,
                    (cancel.clone(), shape.grace),
                    metrics.clone(),
                ));
                (tx, task)
            })
            .unzip();
        (
            GroupCommit {
                shards: senders.into(),
            },
            tasks,
        )
    }

    /// Submit `item` to the writer of `key`; answers once its batch finished.
    pub async fn submit(&self, key: u128, item: B::Item) -> Result<B::Output, Stopped> {
        let shard = (key % self.shards.len() as u128) as usize;
        let (reply, answer) = oneshot::channel();
        self.shards[shard]
            .send((item, reply))
            .await
            .map_err(|_| Stopped)?;
        answer.await.map_err(|_| Stopped)
    }
}

async fn run<B: Batch>(
    mut batch: B,
    mut rx: mpsc::Receiver<Job<B>>,
    max_batch: usize,
    (cancel, grace): (CancellationToken, Duration),
    metrics: CommitMetrics,
) {
    let deadline = async {
        cancel.cancelled().await;
        tokio::time::sleep(grace).await;
    };
    tokio::pin!(deadline);
    let mut jobs: Vec<Job<B>> = Vec::with_capacity(max_batch);
    loop {
        tokio::select! {
            n = rx.recv_many(&mut jobs, max_batch) => if n == 0 { return },
            _ = &mut deadline => return,
        }
        let (items, replies): (Vec<B::Item>, Vec<_>) = jobs
            .drain(..)
            .filter(|(_, reply)| {
                let gone = B::DROP_ABANDONED && reply.is_closed();
                if gone {
                    tracing::info!(
                        writer = batch.name(),
                        "submitter gone; item dropped unapplied"
                    );
                }
                !gone
            })
            .filter_map(|(item, reply)| match batch.refuse_late(&item) {
                Some(refused) => {
                    let _ = reply.send(refused);
                    None
                }
                None => Some((item, reply)),
            })
            .unzip();
        if items.is_empty() {
            continue;
        }
        let started = std::time::Instant::now();
        let outputs = batch.apply(&items).await;
        metrics.observe(batch.name(), items.len(), started.elapsed());
        debug_assert_eq!(outputs.len(), items.len(), "one output per item");
        // The submitter may have gone meanwhile; the item stands either way.
        for (reply, output) in replies.into_iter().zip(outputs) {
            let _ = reply.send(output);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Records the batches it sees; answers each item doubled, or refuses
    /// items above 100 as late.
    struct Recorder {
        seen: Seen,
        gate: Arc<tokio::sync::Semaphore>,
    }

    impl Batch for Recorder {
        type Item = u32;
        type Output = Result<u32, &'static str>;
        const DROP_ABANDONED: bool = true;

        fn name(&self) -> &'static str {
            "recorder"
        }

        fn refuse_late(&self, item: &u32) -> Option<Self::Output> {
            (*item > 100).then_some(Err("late"))
        }

        async fn apply(&mut self, items: &[u32]) -> Vec<Self::Output> {
            // Wait until the test lets a batch through.
            if let Ok(p) = self.gate.acquire().await {
                p.forget();
            }
            self.seen.lock().map(|mut s| s.push(items.to_vec())).ok();
            items.iter().map(|i| Ok(i * 2)).collect()
        }
    }

    type Seen = Arc<Mutex<Vec<Vec<u32>>>>;

    fn writer(writers: usize) -> (GroupCommit<Recorder>, Seen, Arc<tokio::sync::Semaphore>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let (w, _) = GroupCommit::spawn(
            Shape {
                writers,
                max_batch: 64,
                grace: Duration::ZERO,
            },
            CancellationToken::new(),
            crate::metrics::Metrics::new("test").commits(),
            || Recorder {
                seen: seen.clone(),
                gate: gate.clone(),
            },
        );
        (w, seen, gate)
    }

    // Paused time: a sleep returns only once every other task is idle (the
    // submitters have queued their items), so the batches are deterministic.
    #[tokio::test(start_paused = true)]
    async fn waiting_items_share_one_batch_and_each_gets_its_own_answer() {
        let (w, seen, gate) = writer(1);
        // The first item holds the writer in its batch; ten more queue meanwhile.
        let first = tokio::spawn({
            let w = w.clone();
            async move { w.submit(0, 1).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let rest: Vec<_> = (2..=11)
            .map(|i| {
                let w = w.clone();
                tokio::spawn(async move { w.submit(0, i).await })
            })
            .collect();
        // Let the items reach the queue, then release both batches.
        tokio::time::sleep(Duration::from_millis(20)).await;
        gate.add_permits(2);
        assert_eq!(first.await.ok(), Some(Ok(Ok(2))));
        for (i, r) in (2..=11).zip(rest) {
            assert_eq!(r.await.ok(), Some(Ok(Ok(i * 2))), "item {i}");
        }
        let batches = seen.lock().map(|s| s.clone()).unwrap_or_default();
        assert_eq!(batches, vec![vec![1], (2..=11).collect::<Vec<_>>()]);
    }

    #[tokio::test]
    async fn late_items_are_refused_without_entering_a_batch() {
        let (w, seen, gate) = writer(1);
        gate.add_permits(1);
        assert_eq!(w.submit(0, 101).await, Ok(Err("late")));
        assert_eq!(w.submit(0, 7).await, Ok(Ok(14)));
        assert_eq!(
            seen.lock().map(|s| s.clone()).unwrap_or_default(),
            vec![vec![7]]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn abandoned_items_are_dropped_unapplied() {
        let (w, seen, gate) = writer(1);
        // Hold the writer in a first batch, queue an item and abandon it.
        let first = tokio::spawn({
            let w = w.clone();
            async move { w.submit(0, 1).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let abandoned = tokio::spawn({
            let w = w.clone();
            async move { w.submit(0, 2).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        abandoned.abort();
        let _ = abandoned.await;
        gate.add_permits(2);
        assert_eq!(first.await.ok(), Some(Ok(Ok(2))));
        gate.add_permits(10);
        // A later item is the marker that the queue was drained.
        assert_eq!(w.submit(0, 3).await, Ok(Ok(6)));
        assert_eq!(
            seen.lock().map(|s| s.clone()).unwrap_or_default(),
            vec![vec![1], vec![3]]
        );
    }

    #[tokio::test]
    async fn keys_route_to_writers_and_stopped_writers_say_so() {
        let (w, seen, gate) = writer(3);
        gate.add_permits(3);
        for k in 0..3u128 {
            assert_eq!(w.submit(k, k as u32).await, Ok(Ok(2 * k as u32)));
        }
        assert_eq!(seen.lock().map(|s| s.len()).unwrap_or_default(), 3);
        let cancel = CancellationToken::new();
        let (w2, tasks) = GroupCommit::spawn(
            Shape {
                writers: 1,
                max_batch: 1,
                grace: Duration::ZERO,
            },
            cancel.clone(),
            crate::metrics::Metrics::new("test").commits(),
            || Recorder {
                seen: seen.clone(),
                gate: gate.clone(),
            },
        );
        cancel.cancel();
        for t in tasks {
            let _ = t.await;
        }
        assert_eq!(w2.submit(0, 1).await, Err(Stopped));
    }
}
