//! Shared handler state.

use crate::settings::{AuthSettings, InviteSettings, MfaSettings};
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
    /// Sends sign-in links and invites; `None` when no SMTP server is configured.
    pub mailer: Option<crate::mail::Mailer>,
    pub invites: InviteSettings,
    pub mfa: MfaSettings,
    /// The OpenID Provider's settings.
    pub oidc: crate::oidc_keys::KeySettings,
    /// Its keys, opened once and kept for a while.
    pub oidc_keys: crate::oidc_keys::KeyCache,
    /// Seals TOTP secrets; `None` without `sealing.keys` (MFA unavailable).
    pub sealer: Option<service_kit::sealed::Sealer>,
    /// Clients as the refresh grant's hot path authenticates them.
    pub clients: crate::oauth_clients::ClientCache,
    /// The token endpoint's refreshes, by group commit.
    pub refreshes: crate::refreshes::Refreshes,
    /// Passkeys' relying party.
    pub passkeys: crate::passkeys::RelyingParty,
}

impl AppState {
    pub fn is_staff(&self, email: &str) -> bool {
        self.staff.contains(email)
    }

    /// The configured staff addresses (`auth.staff_emails`), the bootstrap.
    pub fn configured_staff(&self) -> Vec<String> {
        self.staff.iter().cloned().collect()
    }

    /// Whether a session of `email` is staff: a configured staff email or a
    /// user with a staff grant (`granted`), and, when `mfa.staff_required`, a
    /// session opened through MFA (`mfa`).
    pub fn is_staff_session(&self, email: &str, granted: bool, mfa: bool) -> bool {
        (granted || self.is_staff(email)) && (mfa || !self.mfa.staff_required)
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
