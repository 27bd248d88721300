//! The catalog: the public list, and staff's SKU management.
//!
//! Staff create SKUs and change their name, price, SLA, badges, position and
//! listing. A SKU is never deleted: `listed: false` retires it (gone from the
//! list, not orderable, not a resize target; servers on it keep working).
//! Fulfilment and currency are fixed once created: servers copy the
//! fulfilment at ordering and usage is priced in the SKU's currency, so a
//! change is a new SKU (and the old one retired). Every change is an audit
//! event of the staff member (`sku.created`, `sku.updated`, subject
//! `sku:<id>`), in the same transaction.

use crate::state::AppState;
use actix_web::{web, HttpResponse};
use hub_domain::catalog::{self, Sku as Declared};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::json;
use service_kit::{
    assertion::{RequestCtx, StaffCaller},
    ApiError, ApiResult,
};

#[derive(Serialize)]
struct Sku {
    id: String,
    name: String,
    fulfilment: String,
    sla_hours: Option<i32>,
    badges: Vec<String>,
    monthly_price_minor: i64,
    currency: String,
}

/// GET /v1/skus (public): listed SKUs in catalog order.
pub async fn list(state: web::Data<AppState>, _ctx: RequestCtx) -> ApiResult<HttpResponse> {
    let skus: Vec<Sku> = sqlx::query_as!(
        Sku,
        "SELECT id, name, fulfilment, sla_hours, badges, monthly_price_minor, currency \
         FROM skus WHERE listed ORDER BY position, id",
    )
    .fetch_all(&state.pool)
    .await?;
    Ok(HttpResponse::Ok().json(skus))
}

/// A SKU as staff see it: with its position and whether it is listed.
#[derive(Serialize)]
struct AdminSku {
    id: String,
    name: String,
    fulfilment: String,
    sla_hours: Option<i32>,
    badges: Vec<String>,
    monthly_price_minor: i64,
    currency: String,
    position: i32,
    listed: bool,
}

/// GET /v1/admin/skus (staff): every SKU, retired ones too, in catalog order.
#[tracing::instrument(skip_all)]
pub async fn all(_staff: StaffCaller, state: web::Data<AppState>) -> ApiResult<HttpResponse> {
    let skus: Vec<AdminSku> = sqlx::query_as!(
        AdminSku,
        r#"SELECT id, name, fulfilment, sla_hours, badges, monthly_price_minor, currency, position, listed FROM skus ORDER BY position, id LIMIT 5000"#,
    )
    .fetch_all(&state.pool)
    .await?;
    Ok(HttpResponse::Ok().json(skus))
}

/// POST /v1/admin/skus (staff): 201 with the SKU; 409 when the id exists.
/// The body is a catalog entry (the catalog file's format and rules).
#[tracing::instrument(skip_all)]
pub async fn create(
    staff: StaffCaller,
    state: web::Data<AppState>,
    body: web::Json<Declared>,
) -> ApiResult<HttpResponse> {
    let s = body.into_inner();
    s.validate().map_err(ApiError::BadRequest)?;
    let mut tx = state.pool.begin().await?;
    let created: Option<AdminSku> = sqlx::query_as!(
        AdminSku,
        r#"INSERT INTO skus (id, name, fulfilment, sla_hours, badges, monthly_price_minor, currency, position, listed)
           VALUES ($1, $2, $3, $4, COALESCE($5, '{}'::text[]), $6, $7, COALESCE($8, 0), COALESCE($9, true))
           ON CONFLICT (id) DO NOTHING RETURNING id, name, fulfilment, sla_hours, badges, monthly_price_minor, currency, position, listed"#,
        &s.id,
        s.name.trim(),
        &s.fulfilment,
        s.sla_hours,
        s.badges.as_deref(),
        s.monthly_price_minor,
        &s.currency,
        s.position,
        s.listed,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(created) = created else {
        return Err(ApiError::Conflict(format!(
            "SKU {} exists: change it with PATCH /v1/admin/skus/{}",
            s.id, s.id
        )));
    };
    service_kit::outbox::audit_on(
        &mut tx,
        &state.naming,
        &staff,
        event_contracts::AuditAction::SkuCreated,
        format!("sku:{}", created.id),
        json!({"sku_id": created.id, "fulfilment": created.fulfilment,
               "currency": created.currency, "monthly_price_minor": created.monthly_price_minor,
               "sla_hours": created.sla_hours, "listed": created.listed}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Created().json(created))
}

/// Absent stays None; a present value (null included) is Some.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Patch {
    name: Option<String>,
    monthly_price_minor: Option<i64>,
    /// Absent: unchanged; null or a number: the new SLA (null for API-backed
    /// SKUs, hours for manual ones).
    #[serde(default, deserialize_with = "present")]
    sla_hours: Option<Option<i32>>,
    badges: Option<Vec<String>>,
    position: Option<i32>,
    listed: Option<bool>,
    /// Fixed once created: accepted only when equal to the SKU's.
    fulfilment: Option<String>,
    currency: Option<String>,
}

/// PATCH /v1/admin/skus/{id} (staff): change name, monthly_price_minor,
/// sla_hours, badges, position, listed (false retires it). 404 unknown id;
/// 422 for a fulfilment or currency change, or an SLA its fulfilment forbids.
#[tracing::instrument(skip_all, fields(sku_id = %path))]
pub async fn update(
    staff: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<Patch>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let p = body.into_inner();
    if p.name.is_none()
        && p.monthly_price_minor.is_none()
        && p.sla_hours.is_none()
        && p.badges.is_none()
        && p.position.is_none()
        && p.listed.is_none()
        && p.fulfilment.is_none()
        && p.currency.is_none()
    {
        return Err(ApiError::bad_request(
            "nothing to change: give name, monthly_price_minor, sla_hours, badges, position or listed",
        ));
    }
    let bad = ApiError::BadRequest;
    if let Some(n) = &p.name {
        catalog::check_name("name", n).map_err(bad)?;
    }
    if let Some(m) = p.monthly_price_minor {
        catalog::check_price(m).map_err(bad)?;
    }
    if let Some(Some(h)) = p.sla_hours {
        catalog::check_sla_hours(h).map_err(bad)?;
    }
    if let Some(b) = &p.badges {
        catalog::check_badges(b).map_err(bad)?;
    }
    if let Some(pos) = p.position {
        catalog::check_position(pos).map_err(bad)?;
    }
    // Ids outside the pattern exist nowhere.
    if catalog::check_sku_id(&id).is_err() {
        return Err(ApiError::NotFound);
    }
    let mut tx = state.pool.begin().await?;
    let current: AdminSku = sqlx::query_as!(
        AdminSku,
        r#"SELECT id, name, fulfilment, sla_hours, badges, monthly_price_minor, currency, position, listed FROM skus WHERE id = $1 FOR UPDATE"#,
        &id,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(ApiError::NotFound)?;
    for (field, given, fixed) in [
        ("fulfilment", &p.fulfilment, &current.fulfilment),
        ("currency", &p.currency, &current.currency),
    ] {
        if given.as_ref().is_some_and(|g| g != fixed) {
            return Err(ApiError::Unprocessable(format!(
                "{field} is fixed once a SKU is created (it is {fixed}): create a new SKU and \
                 retire this one with listed: false"
            )));
        }
    }
    let sla_hours = p.sla_hours.unwrap_or(current.sla_hours);
    catalog::check_fulfilment(&current.fulfilment, sla_hours).map_err(ApiError::Unprocessable)?;
    let updated: AdminSku = sqlx::query_as!(
        AdminSku,
        r#"UPDATE skus SET name = COALESCE($2, name), monthly_price_minor = COALESCE($3, monthly_price_minor),
           sla_hours = $4, badges = COALESCE($5, badges), position = COALESCE($6, position),
           listed = COALESCE($7, listed)
           WHERE id = $1 RETURNING id, name, fulfilment, sla_hours, badges, monthly_price_minor, currency, position, listed"#,
        &id,
        p.name.as_deref().map(str::trim),
        p.monthly_price_minor,
        sla_hours,
        p.badges.as_deref(),
        p.position,
        p.listed,
    )
    .fetch_one(&mut *tx)
    .await?;
    let mut changed = serde_json::Map::new();
    if current.name != updated.name {
        changed.insert("name".into(), json!(updated.name));
    }
    if current.monthly_price_minor != updated.monthly_price_minor {
        changed.insert(
            "monthly_price_minor".into(),
            json!({"from": current.monthly_price_minor, "to": updated.monthly_price_minor}),
        );
    }
    if current.sla_hours != updated.sla_hours {
        changed.insert(
            "sla_hours".into(),
            json!({"from": current.sla_hours, "to": updated.sla_hours}),
        );
    }
    if current.badges != updated.badges {
        changed.insert("badges".into(), json!(updated.badges));
    }
    if current.position != updated.position {
        changed.insert("position".into(), json!(updated.position));
    }
    if current.listed != updated.listed {
        changed.insert("listed".into(), json!(updated.listed));
    }
    if !changed.is_empty() {
        service_kit::outbox::audit_on(
            &mut tx,
            &state.naming,
            &staff,
            event_contracts::AuditAction::SkuUpdated,
            format!("sku:{id}"),
            json!({"sku_id": id, "changed": changed}),
        )
        .await?;
    }
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(updated))
}
