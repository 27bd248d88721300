//! Each member's AI settings in an organization (MemberDetail's `ai_enabled`,
//! `token_limit`, `tokens_spent`), kept beside the token ledger so that a
//! spend, the member's limit and their usage move in one transaction.
//!
//! - `GET /v1/organizations/{id}/members/{user_id}/ai`: the member themself,
//!   the organization's admin roles (owner, manager) or staff.
//! - `PATCH` the same path (session, admin role or staff): `ai_enabled`
//!   (boolean) and/or `token_limit` (a non-negative integer, or null for no
//!   personal limit); only provided fields change. Audited `member.ai_updated`.
//! - A member without settings has the defaults: AI enabled, no personal limit.
//!   Lowering a limit below what was spent stops further spending; it never
//!   touches tokens_spent (the live cumulative spend).

use crate::state::AppState;
use actix_web::{web, HttpResponse};
use hub_domain::{Capability, OrgId, UserId};
use serde::Serialize;
use serde_json::{json, Map, Value};
use service_kit::{assertion::Caller, ApiError, ApiResult};
use sqlx::PgConnection;

pub mod store;

/// The largest personal limit (the largest token grant's order of magnitude).
pub const MAX_LIMIT: i64 = 1_000_000_000_000_000;

#[derive(Serialize)]
pub struct MemberAi {
    org_id: OrgId,
    user_id: UserId,
    role: String,
    ai_enabled: bool,
    token_limit: Option<i64>,
    tokens_spent: i64,
}

/// The member's role (the caller's own from their assertion, another's from
/// the membership replica); 404 when not a member.
async fn role_of(
    conn: &mut PgConnection,
    caller: &Caller,
    org_id: OrgId,
    user_id: UserId,
) -> ApiResult<String> {
    if user_id == caller.user_id() {
        if let Some(r) = caller.identity.role_in(org_id) {
            return Ok(r.as_str().to_owned());
        }
    }
    store::role(conn, org_id, user_id)
        .await?
        .map(|r| r.as_str().to_owned())
        .ok_or(ApiError::NotFound)
}

/// Read access: the caller must belong to the organization (404), and be the
/// member, an admin role (403 naming it) or staff.
fn authorize_read(caller: &Caller, org_id: OrgId, user_id: UserId) -> ApiResult<()> {
    if caller.identity.staff {
        return Ok(());
    }
    caller.require(org_id, Capability::Read)?;
    if user_id != caller.user_id() {
        caller.require(org_id, Capability::Admin)?;
    }
    Ok(())
}

async fn load(
    conn: &mut PgConnection,
    org_id: OrgId,
    user_id: UserId,
    role: String,
) -> ApiResult<MemberAi> {
    let (ai_enabled, token_limit, tokens_spent) = store::settings(conn, org_id, user_id)
        .await?
        .unwrap_or((true, None, 0));
    Ok(MemberAi {
        org_id,
        user_id,
        role,
        ai_enabled,
        token_limit,
        tokens_spent,
    })
}

/// GET /v1/organizations/{id}/members/{user_id}/ai
#[tracing::instrument(skip_all)]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(OrgId, UserId)>,
) -> ApiResult<HttpResponse> {
    let (org_id, user_id) = path.into_inner();
    authorize_read(&caller, org_id, user_id)?;
    let mut conn = state.pool.acquire().await?;
    crate::orgs::store::require(&mut conn, org_id).await?;
    let role = role_of(&mut conn, &caller, org_id, user_id).await?;
    Ok(HttpResponse::Ok().json(load(&mut conn, org_id, user_id, role).await?))
}

fn parse_change(body: &[u8]) -> ApiResult<store::Change> {
    let map: Map<String, Value> = serde_json::from_slice(body)
        .map_err(|_| ApiError::bad_request("the body must be a JSON object"))?;
    let mut change = store::Change {
        ai_enabled: None,
        token_limit: None,
    };
    for (k, v) in map {
        match (k.as_str(), v) {
            ("ai_enabled", Value::Bool(b)) => change.ai_enabled = Some(b),
            ("ai_enabled", _) => return Err(ApiError::bad_request("ai_enabled must be a boolean")),
            ("token_limit", Value::Null) => change.token_limit = Some(None),
            // An integral number however spelled (`5`, `5.0`), as JSON
            // Schema reads `type: integer`.
            ("token_limit", v) => match hub_domain::integer::exact::<_, i64>(&v).ok() {
                Some(n) if (0..=MAX_LIMIT).contains(&n) => change.token_limit = Some(Some(n)),
                _ => {
                    return Err(ApiError::BadRequest(format!(
                        "token_limit must be null or an integer from 0 to {MAX_LIMIT}"
                    )))
                }
            },
            (other, _) => {
                return Err(ApiError::BadRequest(format!(
                    "unknown field {other:?}: only ai_enabled and token_limit change"
                )))
            }
        }
    }
    Ok(change)
}

/// PATCH /v1/organizations/{id}/members/{user_id}/ai (session; admin role or
/// staff). The role check comes before the body is read.
#[tracing::instrument(skip_all)]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(OrgId, UserId)>,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    let (org_id, user_id) = path.into_inner();
    if !caller.identity.staff {
        caller.require_session(org_id, Capability::Admin)?;
    }
    let change = parse_change(&body)?;
    let mut tx = state.pool.begin().await?;
    if caller.identity.staff {
        crate::orgs::store::require(&mut tx, org_id).await?;
    } else {
        // A member's write: refused while suspended, as of this transaction.
        crate::orgs::store::lock_writable(&mut tx, org_id).await?;
    }
    let role = role_of(&mut tx, &caller, org_id, user_id).await?;
    store::change(&mut tx, org_id, user_id, &change).await?;
    let after = load(&mut tx, org_id, user_id, role).await?;
    service_kit::outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        event_contracts::AuditAction::MemberAiUpdated,
        org_id,
        json!({"org_id": org_id, "user_id": user_id, "ai_enabled": after.ai_enabled,
               "token_limit": after.token_limit}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(after))
}

/// GET /internal/v1/organizations/{id}/ai-allowance (agent): what the asserted
/// caller may still spend in the organization, checked before a model runs:
/// `{org_id, ai_enabled, org_balance, token_limit, tokens_spent, available}`.
#[tracing::instrument(skip_all)]
pub async fn allowance(
    state: web::Data<AppState>,
    _peer: service_kit::assertion::Peer<service_kit::assertion::from::Agent>,
    caller: Caller,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    caller.require(org_id, Capability::Read)?;
    // One read: the balance with the member's settings (defaults without a row).
    let (balance, ai_enabled, token_limit, tokens_spent) =
        store::allowance(&state.pool, org_id, caller.user_id())
            .await?
            .ok_or(ApiError::NotFound)?;
    let personal = token_limit.map_or(i64::MAX, |l| l.saturating_sub(tokens_spent).max(0));
    let available = if ai_enabled { balance.min(personal) } else { 0 };
    Ok(HttpResponse::Ok().json(json!({
        "org_id": org_id, "ai_enabled": ai_enabled, "org_balance": balance,
        "token_limit": token_limit, "tokens_spent": tokens_spent, "available": available,
    })))
}

/// GET /v1/organizations/{id}/members/ai: every member's AI settings and
/// spend in one answer (the admin roles, owner and manager, or staff), in
/// the order members joined; members without settings have the defaults.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    if !caller.identity.staff {
        caller.require(org_id, Capability::Admin)?;
    }
    let mut conn = state.pool.acquire().await?;
    crate::orgs::store::require(&mut conn, org_id).await?;
    let rows = store::all(&mut conn, org_id).await?;
    let members: Vec<MemberAi> = rows
        .into_iter()
        .map(|r| MemberAi {
            org_id,
            user_id: r.0,
            role: r.1,
            ai_enabled: r.2,
            token_limit: r.3,
            tokens_spent: r.4,
        })
        .collect();
    Ok(HttpResponse::Ok().json(members))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_takes_only_known_well_typed_fields() {
        let c = parse_change(br#"{"ai_enabled": false, "token_limit": null}"#).expect("valid");
        assert_eq!((c.ai_enabled, c.token_limit), (Some(false), Some(None)));
        let c = parse_change(br#"{"token_limit": 500}"#).expect("valid");
        assert_eq!((c.ai_enabled, c.token_limit), (None, Some(Some(500))));
        for bad in [
            &br#"{"token_limit": -1}"#[..],
            br#"{"token_limit": 1.5}"#,
            br#"{"token_limit": "5"}"#,
            br#"{"ai_enabled": "yes"}"#,
            br#"{"tokens_spent": 0}"#,
            br#"[]"#,
            br#"nope"#,
        ] {
            assert!(
                parse_change(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
