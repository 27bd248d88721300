//! What the gateway reports beyond the kit's request metrics: how bearers
//! were resolved (cache hit, remembered refusal, miss that asked identity,
//! miss that joined another's lookup) and how long identity took to answer.

use service_kit::metrics::{HistogramVec, IntCounter, Metrics};
use std::time::Duration;

/// How one bearer was resolved.
#[derive(Debug, Clone, Copy)]
pub enum Lookup {
    /// Served from the cache.
    Hit,
    /// A bearer identity refused moments ago, refused again without asking.
    Refused,
    /// Not cached: this request asked identity.
    Miss,
    /// Not cached: another request was asking identity already; this one
    /// waited for its answer (single flight).
    Joined,
}

impl Lookup {
    /// Every lookup, in declaration order: `how as usize` indexes into it.
    const ALL: [Lookup; 4] = [Lookup::Hit, Lookup::Refused, Lookup::Miss, Lookup::Joined];

    fn as_str(self) -> &'static str {
        match self {
            Lookup::Hit => "hit",
            Lookup::Refused => "refused",
            Lookup::Miss => "miss",
            Lookup::Joined => "joined",
        }
    }
}

#[derive(Clone)]
pub struct GatewayMetrics {
    /// One counter per [`Lookup`], in its order: found once at the start
    /// rather than by label on every request.
    bearers: [IntCounter; 4],
    identity: HistogramVec,
}

impl GatewayMetrics {
    pub fn new(m: &Metrics) -> GatewayMetrics {
        let bearers = m.counter(
            "hub_gateway_bearer_lookups_total",
            "Bearer resolutions by result: hit, refused (remembered), miss, joined (single flight).",
            &["result"],
        );
        GatewayMetrics {
            bearers: Lookup::ALL.map(|l| bearers.with_label_values(&[l.as_str()])),
            identity: m.histogram(
                "hub_gateway_identity_duration_seconds",
                "Time identity took to answer a bearer resolution, by outcome.",
                &["outcome"],
            ),
        }
    }

    pub fn bearer(&self, how: Lookup) {
        self.bearers[how as usize].inc();
    }

    pub fn identity(&self, outcome: &str, took: Duration) {
        self.identity
            .with_label_values(&[outcome])
            .observe(took.as_secs_f64());
    }
}

/// The outcome label of identity's answer.
pub fn status_class(status: u16) -> &'static str {
    match status {
        200 => "ok",
        401 => "refused",
        _ => "error",
    }
}
