//! Shared handler state: the pool, the sealer, org-billing, the clock.

use event_contracts::Naming;
use service_kit::{outbox::Outbox, peer::Peer, sealed::Sealer, Clock};
use sqlx::PgPool;

pub struct AppState {
    pub pool: PgPool,
    pub outbox: Outbox,
    pub naming: Naming,
    /// Seals raw payloads and legal identities (AES-256-GCM).
    pub sealer: Sealer,
    /// org-billing's internal routes, called with kyc's own caller key.
    pub org_billing: Peer,
    /// Decisions and the sweep take "now" from here (tests move it).
    pub clock: Clock,
}
