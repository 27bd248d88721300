//! Delivery attempts taken in this process, as the rest of the process sees
//! them: which endpoints have attempts here (a DELETE marks its endpoint, see
//! [`tombstone`]) and the attempt metrics. The worker ([`crate::worker`])
//! takes, checks and counts them.

use hub_domain::EndpointId;
use service_kit::metrics::{HistogramVec, IntCounterVec, Metrics};
use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};
use tokio::sync::Semaphore;
use uuid::Uuid;

/// An endpoint's attempts taken in this process: `taken` (sending, or
/// waiting for a slot) and its slots (`delivery.per_endpoint` sending at once),
/// with what the last check of the endpoint found ([`Dispatch::check`]).
pub struct Taken {
    pub(crate) taken: usize,
    pub(crate) sending: Arc<Semaphore>,
    /// When the last check that found the endpoint live was issued.
    pub(crate) checked: Option<Instant>,
    /// Deleted (by a DELETE in this process, or as a check found it): its
    /// attempts are not sent (their queue rows went with the deletion).
    pub(crate) deleted: bool,
    /// Its organization is suspended (as the last check found it): its
    /// attempts go back to the queue, where the claim parks them.
    pub(crate) suspended: bool,
}

/// Endpoints with attempts taken in this process (see [`Taken`]).
pub type InFlight = Arc<Mutex<HashMap<Uuid, Taken>>>;

/// Endpoint `id` was just deleted by this process: its attempts waiting
/// here are not sent (the DELETE sets this before it answers).
pub fn tombstone(inflight: &InFlight, id: EndpointId) {
    if let Some(t) = inflight
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_mut(&id.as_uuid())
    {
        t.deleted = true;
    }
}

/// Delivery attempts by result (`delivered`; `rejected`: the endpoint
/// answered non-2xx; `timeout`; `unreachable`: connection or TLS failed;
/// `not_sent`: refused before sending, by the SSRF guard, an unreadable
/// secret or signing) and how long those that were sent took.
#[derive(Clone)]
pub struct AttemptMetrics {
    attempts: IntCounterVec,
    seconds: HistogramVec,
}

impl AttemptMetrics {
    pub fn new(m: &Metrics) -> AttemptMetrics {
        AttemptMetrics {
            attempts: m.counter(
                "hub_webhook_attempts_total",
                "Webhook delivery attempts by result.",
                &["result"],
            ),
            seconds: m.histogram(
                "hub_webhook_attempt_duration_seconds",
                "Time from sending a webhook to the endpoint's answer (or the failure), by result.",
                &["result"],
            ),
        }
    }

    pub(crate) fn sent(&self, result: &str, took: Duration) {
        self.attempts.with_label_values(&[result]).inc();
        self.seconds
            .with_label_values(&[result])
            .observe(took.as_secs_f64());
    }

    pub(crate) fn not_sent(&self) {
        self.attempts.with_label_values(&["not_sent"]).inc();
    }
}
