//! Shared handler state.

use crate::settings::AuthSettings;
use event_contracts::Naming;
use service_kit::outbox::Outbox;
use sqlx::PgPool;
use std::collections::HashSet;

pub struct AppState {
    pub pool: PgPool,
    pub outbox: Outbox,
    pub naming: Naming,
    pub auth: AuthSettings,
    pub staff: HashSet<String>,
    /// Rate-limit windows are measured on this clock (tests move it).
    pub clock: service_kit::Clock,
    /// Sends sign-in links; `None` when no SMTP server is configured.
    pub mailer: Option<crate::mail::Mailer>,
}

impl AppState {
    pub fn is_staff(&self, email: &str) -> bool {
        self.staff.contains(email)
    }

    /// Publish what the handler just committed before answering; on failure the
    /// background relay retries, so this only logs.
    pub async fn publish_now(&self) {
        if let Err(e) = self.outbox.flush().await {
            tracing::warn!(error = ?e, "immediate outbox flush failed; the relay will retry");
            self.outbox.kick();
        }
    }
}
