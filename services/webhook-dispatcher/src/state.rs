//! Shared state.

use crate::settings::{DeliverySettings, SsrfSettings, WebhookSettings};
use event_contracts::Naming;
use service_kit::{outbox::Outbox, sealed::Sealer, Clock};
use sqlx::PgPool;
use std::sync::Arc;
use tokio::sync::Notify;

pub struct AppState {
    pub pool: PgPool,
    pub outbox: Outbox,
    pub naming: Naming,
    /// Seals endpoint secrets (AES-256-GCM).
    pub sealer: Sealer,
    pub ssrf: SsrfSettings,
    pub webhooks: WebhookSettings,
    pub delivery: DeliverySettings,
    /// Trust for `https://` endpoints.
    pub tls: service_kit::tls::TlsSettings,
    pub clock: Clock,
    /// Wakes the delivery worker when deliveries become due now.
    pub wake: Arc<Notify>,
    /// Endpoints with delivery attempts taken in this process (the worker's;
    /// a DELETE marks its endpoint there before it answers).
    pub inflight: crate::attempts::InFlight,
    pub metrics: crate::attempts::AttemptMetrics,
}

/// The AAD an endpoint's secrets are sealed with.
pub fn secret_aad(endpoint: hub_domain::EndpointId) -> Vec<u8> {
    format!("webhook-secret:{endpoint}").into_bytes()
}
