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

use crate::{
    skus::{self, AdminSku, Change, Error},
    state::AppState,
};
use actix_web::{web, HttpResponse};
use hub_domain::{
    catalog::{self, Fulfilment, Sku as Declared},
    Currency, MinorUnits,
};
use serde::{Deserialize, Deserializer};
use serde_json::json;
use service_kit::{
    assertion::{RequestCtx, StaffCaller},
    ApiError, ApiResult,
};

impl From<Error> for ApiError {
    #[track_caller]
    fn from(e: Error) -> Self {
        match e {
            Error::Exists(id) => ApiError::Conflict(format!(
                "SKU {id} exists: change it with PATCH /v1/admin/skus/{id}"
            )),
            Error::NotFound => ApiError::NotFound,
            Error::Db(e) => ApiError::from(e),
        }
    }
}

/// GET /v1/skus (public): listed SKUs in catalog order.
pub async fn list(state: web::Data<AppState>, _ctx: RequestCtx) -> ApiResult<HttpResponse> {
    Ok(HttpResponse::Ok().json(skus::listed(&state.pool).await?))
}

/// GET /v1/admin/skus (staff): every SKU, retired ones too, in catalog order.
#[tracing::instrument(skip_all)]
pub async fn all(_staff: StaffCaller, state: web::Data<AppState>) -> ApiResult<HttpResponse> {
    Ok(HttpResponse::Ok().json(skus::all(&state.pool).await?))
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
    let created = skus::create(&mut tx, &s).await?;
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
    T: TryFrom<i64>,
{
    hub_domain::integer::option(d).map(Some)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Patch {
    name: Option<String>,
    #[serde(default, deserialize_with = "hub_domain::integer::option")]
    monthly_price_minor: Option<i64>,
    /// Absent: unchanged; null or a number: the new SLA (null for API-backed
    /// SKUs, hours for manual ones).
    #[serde(default, deserialize_with = "present")]
    sla_hours: Option<Option<i32>>,
    badges: Option<Vec<String>>,
    #[serde(default, deserialize_with = "hub_domain::integer::option")]
    position: Option<i32>,
    listed: Option<bool>,
    /// Fixed once created: accepted only when equal to the SKU's.
    fulfilment: Option<Fulfilment>,
    currency: Option<Currency>,
}

impl Patch {
    /// Something to change, each given field within the catalog's rules; an
    /// `id` outside the SKU id pattern exists nowhere (404).
    fn validate(&self, id: &str) -> ApiResult<()> {
        if self.name.is_none()
            && self.monthly_price_minor.is_none()
            && self.sla_hours.is_none()
            && self.badges.is_none()
            && self.position.is_none()
            && self.listed.is_none()
            && self.fulfilment.is_none()
            && self.currency.is_none()
        {
            return Err(ApiError::bad_request(
                "nothing to change: give name, monthly_price_minor, sla_hours, badges, position or listed",
            ));
        }
        let bad = ApiError::BadRequest;
        if let Some(n) = &self.name {
            catalog::check_name("name", n).map_err(bad)?;
        }
        if let Some(m) = self.monthly_price_minor {
            catalog::check_price(m).map_err(bad)?;
        }
        if let Some(Some(h)) = self.sla_hours {
            catalog::check_sla_hours(h).map_err(bad)?;
        }
        if let Some(b) = &self.badges {
            catalog::check_badges(b).map_err(bad)?;
        }
        if let Some(pos) = self.position {
            catalog::check_position(pos).map_err(bad)?;
        }
        // Ids outside the pattern exist nowhere.
        if catalog::check_sku_id(id).is_err() {
            return Err(ApiError::NotFound);
        }
        Ok(())
    }

    /// The change to store for `current`: fulfilment and currency may only be
    /// restated, and the resulting SLA must suit the fulfilment (422).
    fn change_of(&self, current: &AdminSku) -> ApiResult<Change<'_>> {
        for (field, given, fixed) in [
            (
                "fulfilment",
                self.fulfilment.map(Fulfilment::as_str),
                current.fulfilment.as_str(),
            ),
            (
                "currency",
                self.currency.map(Currency::as_str),
                current.currency.as_str(),
            ),
        ] {
            if given.is_some_and(|g| g != fixed) {
                return Err(ApiError::Unprocessable(format!(
                    "{field} is fixed once a SKU is created (it is {fixed}): create a new SKU and \
                     retire this one with listed: false"
                )));
            }
        }
        let sla_hours = self.sla_hours.unwrap_or(current.sla_hours);
        catalog::check_fulfilment(current.fulfilment, sla_hours)
            .map_err(ApiError::Unprocessable)?;
        Ok(Change {
            name: self.name.as_deref().map(str::trim),
            monthly_price_minor: self.monthly_price_minor.map(MinorUnits),
            sla_hours,
            badges: self.badges.as_deref(),
            position: self.position,
            listed: self.listed,
        })
    }
}

/// What changed from `before` to `after`, as the audit event names it.
fn changes(before: &AdminSku, after: &AdminSku) -> serde_json::Map<String, serde_json::Value> {
    let mut changed = serde_json::Map::new();
    if before.name != after.name {
        changed.insert("name".into(), json!(after.name));
    }
    if before.monthly_price_minor != after.monthly_price_minor {
        changed.insert(
            "monthly_price_minor".into(),
            json!({"from": before.monthly_price_minor, "to": after.monthly_price_minor}),
        );
    }
    if before.sla_hours != after.sla_hours {
        changed.insert(
            "sla_hours".into(),
            json!({"from": before.sla_hours, "to": after.sla_hours}),
        );
    }
    if before.badges != after.badges {
        changed.insert("badges".into(), json!(after.badges));
    }
    if before.position != after.position {
        changed.insert("position".into(), json!(after.position));
    }
    if before.listed != after.listed {
        changed.insert("listed".into(), json!(after.listed));
    }
    changed
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
    p.validate(&id)?;
    let mut tx = state.pool.begin().await?;
    let current = skus::lock(&mut tx, &id).await?;
    let change = p.change_of(&current)?;
    let updated = skus::update(&mut tx, &id, change).await?;
    let changed = changes(&current, &updated);
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
