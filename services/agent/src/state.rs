//! Shared handler state: the pool, the services the assistant acts through,
//! the model provider, the clock.

use crate::settings::{AgentSettings, CurationSettings, ModelSettings};
use event_contracts::Naming;
use service_kit::{outbox::Outbox, peer::Peer, Clock};
use sqlx::PgPool;

/// The services the assistant calls, each with agent's own caller key.
pub struct Peers {
    pub identity: Peer,
    pub org_billing: Peer,
    pub kyc: Peer,
    pub server_product: Peer,
}

/// Organization lookups by what the user called them (lower-cased).
pub type Lookups = moka::sync::Cache<String, std::sync::Arc<Vec<crate::ops::OrgRef>>>;

pub struct AppState {
    pub pool: PgPool,
    pub outbox: Outbox,
    pub naming: Naming,
    pub peers: Peers,
    /// Group commit of exchanges (messages, replies, staged actions).
    pub journal: crate::journal::Journal,
    pub model: ModelSettings,
    pub agent: AgentSettings,
    pub curation: CurationSettings,
    /// Organization lookups by what the user called them (see
    /// [`crate::tools::resolve_org`]), kept `agent.lookup_cache_secs`.
    pub lookups: Lookups,
    /// The provider's HTTP client (its own timeouts per call).
    pub http: reqwest::Client,
    /// Expiry, conversations and curation take "now" from here (tests move it).
    pub clock: Clock,
    /// How long a confirmation attempt may run before another confirmation
    /// of the same action may take over (longer than the peer call and the
    /// bookkeeping after it; see [`crate::staged`]).
    pub attempt_lease: time::Duration,
    pub model_metrics: crate::metrics::ModelMetrics,
}

impl AppState {
    /// Is a model provider configured?
    pub fn provider(&self) -> bool {
        !self.model.base_url.trim().is_empty()
    }
}
