//! Shared handler state and the audit helper.

use event_contracts::Naming;
use hub_domain::OrgId;
use service_kit::{assertion::Caller, outbox::Outbox, peer::Peer, sealed::Sealer};
use sqlx::PgPool;

pub struct AppState {
    pub pool: PgPool,
    /// Group commit for wallet moves without an Idempotency-Key.
    pub wallets: crate::ledger::Writer<crate::ledger::Wallet>,
    /// The same group commit for token grants and spends.
    pub tokens: crate::ledger::Writer<crate::ledger::Tokens>,
    /// A queued move not in a batch this long after its request arrived is dropped.
    pub queue_timeout: std::time::Duration,
    /// The longest a batch can take, abandoned connections included.
    pub batch_limit: std::time::Duration,
    pub outbox: Outbox,
    pub naming: Naming,
    pub orgs: crate::settings::OrgSettings,
    pub billing: crate::settings::BillingSettings,
    /// identity's internal routes, called with org-billing's own caller key.
    pub identity: Peer,
    /// kyc's internal routes (the KYC state of an organization).
    pub kyc: Peer,
    /// server-product's internal routes (an organization's live servers).
    pub server_product: Peer,
    /// Seals each organization's verified legal identity (AES-256-GCM).
    pub sealer: Sealer,
    /// The key of the tax id search hashes.
    pub search_key: crate::search_key::SearchKey,
}

impl AppState {
    /// The last moment a move of `caller` may enter a batch: its queue
    /// timeout, and early enough that the batch ends (commit or cancel) before
    /// the sender stops waiting, so that a 504 at the gateway means "not applied".
    pub fn move_deadline(&self, caller: &Caller) -> std::time::Instant {
        let mut wait = self.queue_timeout;
        if let Some(left) = caller.time_left() {
            wait = wait.min(left.saturating_sub(self.batch_limit));
        }
        std::time::Instant::now() + wait
    }

    /// Read-your-writes for suspension: have identity apply the status change
    /// staff just committed (version `version`) before the change is answered,
    /// so that identity refuses the organization's writes (and its bearer
    /// lookups carry the status) from the moment staff hear 200. A few tries;
    /// Err when identity never confirmed (the event still applies it later).
    pub async fn tell_identity_status(
        &self,
        org_id: OrgId,
        status: hub_domain::OrgStatus,
        version: i64,
    ) -> anyhow::Result<()> {
        let path = format!("/internal/v1/organizations/{org_id}/status");
        let body = serde_json::json!({"status": status, "version": version});
        let mut last = anyhow::anyhow!("not sent");
        for pause_ms in [0u64, 100, 400] {
            tokio::time::sleep(std::time::Duration::from_millis(pause_ms)).await;
            match self
                .identity
                .send(reqwest::Method::POST, &path, None, Some(&body))
                .await
            {
                Ok(r) if r.status().is_success() => return Ok(()),
                Ok(r) => last = anyhow::anyhow!("identity answered {}", r.status()),
                Err(e) => last = e,
            }
            tracing::warn!(error = %last, %org_id, "identity did not confirm the status change");
        }
        Err(last)
    }

    /// The read-your-writes fast path: ask identity to make the caller the first
    /// owner of `org_id` now, so that their very next `/v1/auth/me` lists it.
    /// Failure only logs: identity applies `core.v1.org.created` anyway.
    pub async fn make_creator_owner(&self, caller: &Caller, org_id: OrgId) {
        let path = format!("/internal/v1/organizations/{org_id}/owner");
        let sent = self
            .identity
            .call(reqwest::Method::POST, &path, caller, &serde_json::json!({}))
            .await;
        match sent {
            Ok(r) if r.status().is_success() => {}
            Ok(r) => {
                tracing::warn!(status = r.status().as_u16(), %org_id, "owner fast path refused; the event will apply it")
            }
            Err(e) => {
                tracing::warn!(error = %e, %org_id, "owner fast path failed; the event will apply it")
            }
        }
    }
}
