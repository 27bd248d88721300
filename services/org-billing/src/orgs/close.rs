//! `POST /v1/organizations/{id}/close` (the owner, with a session): the
//! organization closes for good. Refused with 409 while anything is open:
//! money owed (an unpaid invoice, a charge not yet invoiced or quoted on a
//! proforma), a payment claim awaiting review, money held (a wallet balance:
//! staff refund it first), or a live server (server-product counts them).
//! Closing is a status change like a suspension (`core.v1.org.status_changed`,
//! identity confirms before the answer): from then on every write of its
//! members is refused, identity revokes its API keys, the dispatcher parks
//! its webhooks; its records (invoices, ledgers, audit) stay readable.
//! What happens to each kind of data: decisions.md, "Closing an organization".

use super::store;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use event_contracts::{AuditAction, OrgStatusChanged};
use hub_domain::{Capability, OrgId, OrgStatus, Role};
use serde_json::json;
use service_kit::{assertion::SessionCaller, outbox, ApiError, ApiResult};

/// Why a closing is refused, if it is (each open item, in words).
async fn open_items(conn: &mut sqlx::PgConnection, org_id: OrgId) -> sqlx::Result<Vec<String>> {
    let r = sqlx::query!(
        r#"SELECT
             (SELECT count(*) FROM invoices
               WHERE org_id = $1 AND kind = 'invoice' AND status IN ('issued', 'partially_paid'))
               AS "unpaid_invoices!",
             (SELECT count(*) FROM charges WHERE org_id = $1 AND status IN ('pending', 'quoted'))
               AS "open_charges!",
             (SELECT count(*) FROM payment_claims WHERE org_id = $1 AND status = 'pending')
               AS "pending_claims!",
             (SELECT balance_minor FROM wallets WHERE org_id = $1) AS "balance_minor!",
             (SELECT currency FROM wallets WHERE org_id = $1) AS "currency!""#,
        org_id as OrgId,
    )
    .fetch_one(conn)
    .await?;
    let mut open = Vec::new();
    if r.unpaid_invoices > 0 {
        open.push(format!("{} unpaid invoice(s)", r.unpaid_invoices));
    }
    if r.open_charges > 0 {
        open.push(format!("{} charge(s) not yet invoiced", r.open_charges));
    }
    if r.pending_claims > 0 {
        open.push(format!(
            "{} payment claim(s) awaiting review",
            r.pending_claims
        ));
    }
    if r.balance_minor > 0 {
        open.push(format!(
            "a wallet balance of {} {} (minor units): ask support to refund it",
            r.balance_minor, r.currency
        ));
    }
    Ok(open)
}

/// How many servers of `org_id` are live, as server-product counts them.
async fn live_servers(state: &AppState, org_id: OrgId) -> ApiResult<i64> {
    let path = format!("/internal/v1/organizations/{org_id}/servers/live");
    let unavailable = |e: String| {
        tracing::warn!(error = %e, %org_id, "server-product did not count the servers");
        ApiError::Unavailable("the organization's servers could not be counted; try again".into())
    };
    let r = state
        .server_product
        .send(reqwest::Method::GET, &path, None, None)
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    if !r.status().is_success() {
        return Err(unavailable(format!("answered {}", r.status())));
    }
    let body: serde_json::Value = r.json().await.map_err(|e| unavailable(e.to_string()))?;
    body["live"]
        .as_i64()
        .ok_or_else(|| unavailable("no count".into()))
}

/// POST /v1/organizations/{id}/close (owner, session): 200 the organization,
/// now closed.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn close(
    caller: SessionCaller,
    state: web::Data<AppState>,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    if caller.require_session(org_id, Capability::Admin)? != Role::Owner {
        return Err(ApiError::forbidden("insufficient role: requires owner"));
    }
    // Servers first, outside the transaction (a call); their writes stop
    // once the status is applied (see decisions.md for the moment between).
    let servers = live_servers(&state, org_id).await?;
    let mut tx = state.pool.begin().await?;
    let status = sqlx::query_scalar!(
        r#"SELECT status AS "status: OrgStatus" FROM organizations WHERE id = $1 FOR UPDATE"#,
        org_id as OrgId,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(ApiError::NotFound)?;
    match status {
        OrgStatus::Active => {}
        OrgStatus::Closed => {
            return Err(ApiError::Conflict(
                "the organization is already closed".into(),
            ))
        }
        OrgStatus::Suspended => return Err(ApiError::forbidden(OrgStatus::SUSPENDED_WRITE)),
    }
    let mut open = open_items(&mut tx, org_id).await?;
    if servers > 0 {
        open.insert(0, format!("{servers} live server(s): terminate them first"));
    }
    if !open.is_empty() {
        return Err(ApiError::Conflict(format!(
            "the organization cannot close while it has {}",
            open.join("; ")
        )));
    }
    let version = store::set_status(
        &mut tx,
        org_id,
        OrgStatus::Closed,
        Some("closed by its owner"),
    )
    .await?
    .ok_or_else(|| ApiError::Conflict("the organization is already closed".into()))?;
    outbox::enqueue(
        &mut tx,
        &state.naming,
        OrgStatusChanged {
            org_id,
            status: OrgStatus::Closed,
            version,
        },
    )
    .await?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        AuditAction::OrgClosed,
        org_id,
        json!({"org_id": org_id}),
    )
    .await?;
    let now = store::with_status(&mut tx, org_id).await?;
    state.outbox.commit(tx).await?;
    if let Err(e) = state
        .tell_identity_status(org_id, OrgStatus::Closed, version)
        .await
    {
        tracing::error!(error = %e, %org_id, "closing not confirmed by identity");
        return Err(ApiError::Unavailable(
            "the organization is now closed, but identity did not confirm it yet: its \
             members' writes outside org-billing stop once it has (read the organization \
             to check)"
                .into(),
        ));
    }
    Ok(HttpResponse::Ok().json(now))
}
