//! Shared handler state.

use crate::provider::Provider;
use event_contracts::Naming;
use service_kit::{outbox::Outbox, sealed::Sealer, Clock};
use sqlx::PgPool;
use std::sync::Arc;

pub struct AppState {
    pub pool: PgPool,
    pub outbox: Outbox,
    pub naming: Naming,
    /// Seals access credentials (AES-256-GCM).
    pub sealer: Sealer,
    pub provider: Arc<dyn Provider>,
    pub clock: Clock,
    pub pages: crate::settings::PageSettings,
    /// The orders' group-commit writers.
    pub orders: crate::orders::Orders,
    /// Orders per organization per minute, this replica's buckets.
    pub order_rate: crate::rate::OrgRate,
    /// Live servers per organization (0: no cap).
    pub max_servers_per_org: i64,
    /// kyc's internal routes (an organization's KYC status).
    pub kyc: service_kit::peer::Peer,
    /// Paid SKUs only for KYC-verified organizations.
    pub require_kyc_for_paid: bool,
}
