//! The organization's KYC state, as kyc decides it. kyc pushes each new state
//! (`PUT /internal/v1/organizations/{id}/kyc-state`, the read-your-writes fast
//! path) and announces it (`core.v1.kyc.changed {org_id, version}`, the
//! guarantee: this consumer then pulls the state from kyc). A state applies
//! only when its version is newer than the one shown, so both paths, in any
//! order and any number of times, converge. Once verified, the legal identity
//! (legal_name, tax_id, registration_number, registered_address) is locked:
//! nothing in org-billing writes it but an approved KYC state.

use crate::state::AppState;
use event_contracts::{Envelope, KycChanged};
use hub_domain::OrgId;

pub use event_contracts::internal::KycState;

/// Apply `s` to `org_id` if newer; returns whether it applied (false: older or
/// equal, or no such organization).
pub async fn apply(state: &AppState, org_id: OrgId, s: &KycState) -> anyhow::Result<bool> {
    anyhow::ensure!(
        matches!(
            s.kyc_status.as_str(),
            "unverified" | "pending" | "verified" | "rejected"
        ),
        "unknown kyc_status {:?}",
        s.kyc_status
    );
    let identity = s.legal_identity.as_ref();
    let applied = sqlx::query(
        "UPDATE organizations SET kyc_version = $2, kyc_status = $3, kyc_tier = $4, \
           kyc_verified_at = $5, kyc_locked = $6, \
           legal_name = COALESCE($7, legal_name), tax_id = COALESCE($8, tax_id), \
           registration_number = COALESCE($9, registration_number), \
           registered_address = COALESCE($10, registered_address) \
         WHERE id = $1 AND kyc_version < $2",
    )
    .bind(org_id)
    .bind(s.version)
    .bind(&s.kyc_status)
    .bind(s.kyc_tier)
    .bind(s.kyc_verified_at)
    .bind(identity.is_some())
    .bind(identity.map(|i| &i.legal_name))
    .bind(identity.map(|i| &i.tax_id))
    .bind(identity.map(|i| &i.registration_number))
    .bind(identity.map(|i| sqlx::types::Json(&i.registered_address)))
    .execute(&state.pool)
    .await?
    .rows_affected()
        == 1;
    Ok(applied)
}

/// The guarantee: on `core.v1.kyc.changed`, pull the state from kyc and apply it.
pub async fn on_changed(state: &AppState, env: Envelope<KycChanged>) -> anyhow::Result<()> {
    let org_id = env.data.org_id;
    let shown: Option<i64> =
        sqlx::query_scalar("SELECT kyc_version FROM organizations WHERE id = $1")
            .bind(org_id)
            .fetch_optional(&state.pool)
            .await?;
    match shown {
        // Already there (the push won), or not an organization of ours.
        Some(v) if v >= env.data.version => return Ok(()),
        None => return Ok(()),
        Some(_) => {}
    }
    let path = format!("/internal/v1/organizations/{org_id}/kyc-state");
    let resp = state
        .kyc
        .send(reqwest::Method::GET, &path, None, None)
        .await?;
    anyhow::ensure!(resp.status().is_success(), "kyc answered {}", resp.status());
    let current: KycState = resp.json().await?;
    apply(state, org_id, &current).await?;
    Ok(())
}
