//! Charges: what an organization owes before it is on a document. Usage
//! charges arrive from server-product ([`crate::usage`]); staff add others and
//! waive pending ones.

use super::{
    model::{ChargeStatus, Param, Source},
    store,
};
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use event_contracts::AuditAction;
use hub_domain::{ChargeId, MinorUnits, OrgId};
use serde::Deserialize;
use serde_json::json;
use service_kit::{
    assertion::{Caller, StaffCaller},
    outbox, page, ApiError, ApiResult,
};

pub const DESCRIPTION_MAX: usize = 500;
pub const BRAND_MAX: usize = 100;

#[derive(Deserialize)]
pub struct ListQuery {
    status: Option<String>,
    limit: Option<i64>,
    cursor: Option<String>,
}

/// GET /v1/organizations/{id}/charges?status=&limit=&cursor= (finance):
/// newest first.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    q: web::Query<ListQuery>,
) -> ApiResult<HttpResponse> {
    let org = path.into_inner();
    super::readable(&state, &caller, org).await?;
    let status = ChargeStatus::param("status", q.status.as_deref())?;
    let (limit, after) = super::page_of(&state, q.limit, q.cursor.as_deref())?;
    let rows = store::charges_of(&state.pool, org, status, after, limit + 1).await?;
    let s = status.map(|s| format!("&status={s}")).unwrap_or_default();
    Ok(page::respond(
        rows,
        limit,
        |c| (c.created_at, c.id.as_uuid()),
        |c| format!("/v1/organizations/{org}/charges?limit={limit}{s}&cursor={c}"),
    ))
}

#[derive(Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct NewCharge {
    description: String,
    brand: String,
    #[serde(deserialize_with = "hub_domain::integer::exact")]
    amount_minor: MinorUnits,
}

/// POST /v1/admin/organizations/{id}/charges (staff): a pending charge in the
/// organization's currency. 201 Charge.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn create(
    caller: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<OrgId>,
    body: web::Json<NewCharge>,
) -> ApiResult<HttpResponse> {
    let org = path.into_inner();
    let description = super::text("description", &body.description, DESCRIPTION_MAX, true)?;
    let brand = super::text("brand", &body.brand, BRAND_MAX, true)?;
    let amount = super::amount("amount_minor", body.amount_minor)?;
    let mut tx = state.pool.begin().await?;
    let billed = store::lock_org(&mut tx, org)
        .await?
        .ok_or(ApiError::NotFound)?;
    let charge = store::insert_charge(
        &mut tx,
        &store::NewCharge {
            org_id: org,
            description: &description,
            brand: &brand,
            qty: 1,
            unit_minor: amount,
            amount_minor: amount,
            currency: billed.currency,
            source: Source::Staff,
            source_ref: None,
            period: None,
            created_by: Some(caller.user_id()),
        },
    )
    .await?
    .ok_or_else(|| {
        ApiError::internal(anyhow::anyhow!(
            "a staff charge without reference conflicted"
        ))
    })?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        AuditAction::ChargeCreated,
        org,
        json!({"charge_id": charge.id, "amount_minor": amount, "currency": charge.currency,
               "source": "staff"}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Created().json(charge))
}

/// POST /v1/admin/charges/{charge_id}/waive (staff): pending only, else 409.
#[tracing::instrument(skip_all, fields(charge_id = %path))]
pub async fn waive(
    caller: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<ChargeId>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let mut tx = state.pool.begin().await?;
    let org = store::charge_org(&mut tx, id)
        .await?
        .ok_or(ApiError::NotFound)?;
    store::lock_org(&mut tx, org).await?;
    let charge = store::waive(&mut tx, id)
        .await?
        .ok_or_else(|| ApiError::conflict("only a pending charge can be waived"))?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        AuditAction::ChargeWaived,
        org,
        json!({"charge_id": id, "amount_minor": charge.amount_minor}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(charge))
}
