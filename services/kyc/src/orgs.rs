//! kyc's view of organizations (org-billing owns them) and the organization's
//! KYC state, which kyc decides and org-billing shows.
//!
//! Every change of an organization's KYC state bumps its `version` in the
//! change's transaction and writes `core.v1.kyc.changed {org_id, version}` to
//! the outbox. After the commit, kyc pushes the state to org-billing (the
//! read-your-writes fast path: the organization shows it the moment the call
//! returns); org-billing also pulls it when the event arrives (the guarantee).
//! org-billing applies a state only when its version is newer, so the two
//! paths, in any order and any number of times, end in the same place. The
//! event carries no personal data: the legal identity travels only over the
//! signed internal calls.

use crate::{payload::LegalIdentity, state::AppState};
use event_contracts::KycChanged;
use hub_domain::{KycStatus, LegalType, OrgId};
use serde::Deserialize;
use service_kit::{assertion::Caller, outbox, ApiError};
use sqlx::PgConnection;
use time::OffsetDateTime;

/// What org-billing knows of an organization that KYC needs. Parsed at the
/// boundary: a legal type outside [`LegalType`] fails the read (a 500 naming
/// the profile lookup), it never reaches the form's rules.
#[derive(Debug, Deserialize)]
pub struct OrgProfile {
    pub name: String,
    pub legal_type: LegalType,
}

/// The organization's name and legal type, from org-billing (404 when it does
/// not exist).
pub async fn profile(
    state: &AppState,
    caller: &Caller,
    org_id: OrgId,
) -> Result<OrgProfile, ApiError> {
    let path = format!("/internal/v1/organizations/{org_id}/profile");
    let resp = state
        .org_billing
        .send(reqwest::Method::GET, &path, Some(caller), None)
        .await
        .map_err(|e| {
            tracing::warn!(error = ?e, "org-billing unreachable");
            ApiError::Unavailable("organizations are unavailable, try again".into())
        })?;
    match resp.status().as_u16() {
        200 => resp
            .json::<OrgProfile>()
            .await
            .map_err(|e| ApiError::internal(anyhow::anyhow!("org-billing's profile answer: {e}"))),
        404 => Err(ApiError::NotFound),
        s => Err(ApiError::internal(anyhow::anyhow!(
            "org-billing answered {s} to a profile lookup"
        ))),
    }
}

pub use event_contracts::internal::KycState;

struct Row {
    version: i64,
    kyc_status: KycStatus,
    kyc_tier: i32,
    legal_identity: Option<Vec<u8>>,
    verified_at: Option<OffsetDateTime>,
}

fn identity_aad(org_id: OrgId) -> Vec<u8> {
    format!("kyc-legal-identity:{org_id}").into_bytes()
}

/// The current state (version 0, unverified, for an organization kyc never saw).
pub async fn load(
    conn: &mut PgConnection,
    state: &AppState,
    org_id: OrgId,
) -> anyhow::Result<KycState> {
    let row = sqlx::query_as!(
        Row,
        r#"SELECT version, kyc_status AS "kyc_status: KycStatus", kyc_tier, legal_identity, verified_at
             FROM org_state WHERE org_id = $1"#,
        org_id as OrgId,
    )
    .fetch_optional(conn)
    .await?;
    let Some(r) = row else {
        return Ok(KycState {
            version: 0,
            kyc_status: KycStatus::Unverified,
            kyc_tier: 0,
            kyc_verified_at: None,
            legal_identity: None,
        });
    };
    let legal_identity = match r.legal_identity {
        Some(sealed) => Some(state.sealer.open_json(&sealed, &identity_aad(org_id))?),
        None => None,
    };
    Ok(KycState {
        version: r.version,
        kyc_status: r.kyc_status,
        kyc_tier: r.kyc_tier,
        kyc_verified_at: r.verified_at,
        legal_identity,
    })
}

/// The current status only (version 0, unverified, for an organization kyc
/// never saw): the legal identity is neither read nor opened.
pub async fn status(
    conn: &mut PgConnection,
    org_id: OrgId,
) -> sqlx::Result<event_contracts::internal::KycStatusOnly> {
    let row = sqlx::query_as!(
        event_contracts::internal::KycStatusOnly,
        r#"SELECT version, kyc_status AS "kyc_status: KycStatus", kyc_tier
             FROM org_state WHERE org_id = $1"#,
        org_id as OrgId,
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.unwrap_or(event_contracts::internal::KycStatusOnly {
        version: 0,
        kyc_status: KycStatus::Unverified,
        kyc_tier: 0,
    }))
}

/// How a change moves the organization's state.
pub enum Change<'a> {
    /// A new submission: review (re-)opens.
    Submitted,
    /// Approved: verified, tier + 1, this legal identity, locked.
    Approved(&'a LegalIdentity, OffsetDateTime),
    /// Rejected: rejected, unless the organization was verified before (then
    /// it stays verified with its tier and identity).
    Rejected,
    /// More information requested: review stays open (pending).
    MoreInfoRequested,
}

/// Apply `change` to the organization's state in the caller's transaction
/// (locking it), bump the version and write the event. Returns the new version.
pub async fn change(
    conn: &mut PgConnection,
    state: &AppState,
    org_id: OrgId,
    change: Change<'_>,
) -> anyhow::Result<i64> {
    sqlx::query!(
        "INSERT INTO org_state (org_id, version, kyc_status) VALUES ($1, 0, 'unverified') \
         ON CONFLICT (org_id) DO NOTHING",
        org_id as OrgId,
    )
    .execute(&mut *conn)
    .await?;
    let verified_at = sqlx::query_scalar!(
        "SELECT verified_at FROM org_state WHERE org_id = $1 FOR UPDATE",
        org_id as OrgId,
    )
    .fetch_one(&mut *conn)
    .await?;
    let version: i64 = match change {
        Change::Submitted | Change::MoreInfoRequested => {
            sqlx::query_scalar!(
                "UPDATE org_state SET version = version + 1, kyc_status = 'pending' \
                 WHERE org_id = $1 RETURNING version",
                org_id as OrgId,
            )
            .fetch_one(&mut *conn)
            .await?
        }
        Change::Rejected => {
            let status = if verified_at.is_some() {
                KycStatus::Verified
            } else {
                KycStatus::Rejected
            };
            sqlx::query_scalar!(
                "UPDATE org_state SET version = version + 1, kyc_status = $2 \
                 WHERE org_id = $1 RETURNING version",
                org_id as OrgId,
                status as KycStatus,
            )
            .fetch_one(&mut *conn)
            .await?
        }
        Change::Approved(identity, at) => {
            let sealed = state.sealer.seal_json(identity, &identity_aad(org_id))?;
            sqlx::query_scalar!(
                "UPDATE org_state SET version = version + 1, kyc_status = 'verified', \
                   kyc_tier = kyc_tier + 1, legal_identity = $2, verified_at = $3 \
                 WHERE org_id = $1 RETURNING version",
                org_id as OrgId,
                sealed,
                at,
            )
            .fetch_one(&mut *conn)
            .await?
        }
    };
    outbox::enqueue(&mut *conn, &state.naming, KycChanged { org_id, version }).await?;
    Ok(version)
}

/// The fast path: push the organization's current state to org-billing now.
/// Failure only logs: org-billing pulls it when the event arrives.
pub async fn push(state: &AppState, org_id: OrgId) {
    let result = async {
        let mut conn = state.pool.acquire().await?;
        let current = load(&mut conn, state, org_id).await?;
        drop(conn);
        let path = format!("/internal/v1/organizations/{org_id}/kyc-state");
        let resp = state
            .org_billing
            .send(
                reqwest::Method::PUT,
                &path,
                None,
                Some(&serde_json::to_value(&current)?),
            )
            .await?;
        anyhow::ensure!(
            resp.status().is_success(),
            "org-billing answered {}",
            resp.status()
        );
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = result {
        tracing::warn!(error = ?e, %org_id, "KYC state push failed; the event will deliver it");
    }
    state.outbox.kick();
}

#[cfg(test)]
mod tests {
    use super::OrgProfile;
    use hub_domain::LegalType;

    #[test]
    fn a_profile_with_an_unknown_legal_type_is_refused() {
        let profile = |legal_type: &str| {
            serde_json::from_value::<OrgProfile>(
                serde_json::json!({"name": "Acme", "legal_type": legal_type, "country": "TR"}),
            )
        };
        assert_eq!(
            profile("individual").map(|p| p.legal_type).ok(),
            Some(LegalType::Individual)
        );
        for bad in ["partnership", "Corporate", ""] {
            assert!(profile(bad).is_err(), "{bad}");
        }
    }
}
