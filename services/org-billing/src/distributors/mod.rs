//! Distributor entities: staff create and change them and name their
//! observers; an observer (`distributor_staff`, role `observer`) reads their
//! own entity only: its detail, staff, organizations and monthly report (and,
//! through [`authorize_read`], its invoices and payments). Anyone else gets 404
//! for an entity (403 for the list): no existence leak.
//!
//! Observers are not members of the organizations routed to their entity:
//! nothing outside this module (and [`authorize_read`]'s callers) reads
//! `distributor_staff`, and organization routes authorize by membership only.
//!
//! A new entity covers its own country when no entity covers it yet; existing
//! coverage is never moved here (the declared catalog, `catalog.file`, is the
//! one place that routes countries to existing entities). Country and
//! currency are fixed once created: organizations were routed by the one and
//! hold wallets in the other (409 for a different value, the same one is
//! accepted). Every write is an audit event of the staff member in its
//! transaction (`distributor.created`, `distributor.updated`,
//! `distributor.staff_added`, `distributor.staff_removed`; subject
//! `distributor:<id>`). The SQL is in [`store`].

pub mod books;
mod model;
pub mod staff;
pub mod store;

pub use model::Distributor;

use crate::state::AppState;
use actix_web::{web, HttpResponse};
use event_contracts::AuditAction;
use hub_domain::{catalog, Currency, DistributorId, Email};
use serde::Deserialize;
use serde_json::json;
use service_kit::{
    assertion::{Caller, StaffCaller},
    outbox, ApiError, ApiResult,
};

/// Whether `caller` may read the entity `distributor_id` (its organizations,
/// invoices, payments, report): staff, or an observer of that entity signed
/// in with a session. Anyone else, and an entity that does not exist:
/// [`ApiError::NotFound`].
pub async fn authorize_read(
    state: &AppState,
    caller: &Caller,
    distributor_id: DistributorId,
) -> ApiResult<()> {
    let mut conn = state.pool.acquire().await?;
    let (exists, observer) = store::access(&mut conn, distributor_id, caller.user_id()).await?;
    let allowed = caller.identity.staff || (observer && caller.is_session());
    if exists && allowed {
        Ok(())
    } else {
        Err(ApiError::NotFound)
    }
}

/// GET /v1/distributors: staff see every entity, an observer the entities
/// they observe; anyone else 403.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn list(state: web::Data<AppState>, caller: Caller) -> ApiResult<HttpResponse> {
    let mut conn = state.pool.acquire().await?;
    if caller.identity.staff {
        return Ok(HttpResponse::Ok().json(store::select(&mut conn, None, None).await?));
    }
    let forbidden = || ApiError::forbidden("staff or a distributor observer only");
    if !caller.is_session() {
        return Err(forbidden());
    }
    let observed = store::select(&mut conn, None, Some(caller.user_id())).await?;
    if observed.is_empty() {
        return Err(forbidden());
    }
    Ok(HttpResponse::Ok().json(observed))
}

/// GET /v1/distributors/{id}: staff, or an observer of the entity; else 404.
#[tracing::instrument(skip_all, fields(distributor_id = %path))]
pub async fn detail(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<DistributorId>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    authorize_read(&state, &caller, id).await?;
    let mut conn = state.pool.acquire().await?;
    let d = store::one(&mut conn, id).await?.ok_or(ApiError::NotFound)?;
    Ok(HttpResponse::Ok().json(d))
}

/// A name (trimmed): 1 to 200 characters, not blank, no control characters.
fn name(field: &str, v: &str) -> ApiResult<String> {
    catalog::check_name(field, v).map_err(ApiError::BadRequest)?;
    Ok(v.trim().to_owned())
}

/// Another text field (trimmed): at most `max` characters, line breaks the
/// only control characters.
fn text(field: &str, v: &str, max: usize) -> ApiResult<String> {
    catalog::check_text(field, v, max).map_err(ApiError::BadRequest)?;
    Ok(v.trim().to_owned())
}

/// A contact email: empty, or an address identity would sign in with (stored
/// normalized).
fn contact_email(v: &str) -> ApiResult<String> {
    if v.is_empty() {
        return Ok(String::new());
    }
    Email::parse(v)
        .map(|e| e.as_str().to_owned())
        .map_err(|e| ApiError::BadRequest(format!("contact_email: {e}")))
}

/// profit_pct in hundredths: 0 to 100 with at most two decimals.
fn profit_hundredths(p: f64) -> ApiResult<i64> {
    let bad = || {
        ApiError::bad_request("profit_pct must be a number from 0 to 100 with at most two decimals")
    };
    if !p.is_finite() || !(0.0..=100.0).contains(&p) {
        return Err(bad());
    }
    let h = (p * 100.0).round();
    if (p * 100.0 - h).abs() > 1e-6 {
        return Err(bad());
    }
    // 0 to 10000 by the checks above.
    Ok(h as i64)
}

fn country(v: &str) -> ApiResult<String> {
    catalog::check_country("country", v).map_err(ApiError::BadRequest)?;
    Ok(v.to_owned())
}

/// 409 when `given` is not the entity's `fixed` value of `field`.
fn restated<T: PartialEq + std::fmt::Display>(
    field: &str,
    given: Option<&T>,
    fixed: &T,
) -> ApiResult<()> {
    if given.is_some_and(|g| g != fixed) {
        return Err(ApiError::Conflict(format!(
            "{field} is fixed once a distributor entity is created (it is {fixed})"
        )));
    }
    Ok(())
}

/// The optional text fields of an entity, with their limits.
const TEXT_FIELDS: [(&str, usize); 7] = [
    ("tax_id", catalog::TEXT_MAX),
    ("address", catalog::TEXT_MAX),
    ("bank_name", catalog::TEXT_MAX),
    ("bank_iban", catalog::TEXT_MAX),
    ("bank_swift", catalog::TEXT_MAX),
    ("contact_phone", catalog::TEXT_MAX),
    ("notes", catalog::NOTES_MAX),
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Create {
    name: String,
    country: String,
    legal_name: String,
    /// Absent or null: the interface's rule for the country (TRY for TR, EUR
    /// otherwise).
    #[serde(default)]
    currency: Option<Currency>,
    #[serde(default)]
    tax_id: Option<String>,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    bank_name: Option<String>,
    #[serde(default)]
    bank_iban: Option<String>,
    #[serde(default)]
    bank_swift: Option<String>,
    #[serde(default)]
    contact_phone: Option<String>,
    #[serde(default)]
    contact_email: Option<String>,
    #[serde(default)]
    notes: Option<String>,
    #[serde(default)]
    profit_pct: Option<f64>,
}

/// The validated fields of a creation or a change, owned.
#[derive(Default)]
struct Fields {
    name: Option<String>,
    legal_name: Option<String>,
    /// In [`TEXT_FIELDS`] order.
    texts: [Option<String>; 7],
    contact_email: Option<String>,
    profit_hundredths: Option<i64>,
}

impl Fields {
    fn text(&self, i: usize) -> Option<&str> {
        self.texts[i].as_deref()
    }

    fn change(&self) -> store::Change<'_> {
        store::Change {
            name: self.name.as_deref(),
            legal_name: self.legal_name.as_deref(),
            tax_id: self.text(0),
            address: self.text(1),
            bank_name: self.text(2),
            bank_iban: self.text(3),
            bank_swift: self.text(4),
            contact_phone: self.text(5),
            notes: self.text(6),
            contact_email: self.contact_email.as_deref(),
            profit_hundredths: self.profit_hundredths,
        }
    }
}

/// Validate what is given (None: absent or null).
fn fields(
    name_v: Option<&str>,
    legal_name: Option<&str>,
    texts: [Option<&str>; 7],
    email: Option<&str>,
    profit_pct: Option<f64>,
) -> ApiResult<Fields> {
    let mut f = Fields {
        name: name_v.map(|v| name("name", v)).transpose()?,
        legal_name: legal_name.map(|v| name("legal_name", v)).transpose()?,
        contact_email: email.map(contact_email).transpose()?,
        profit_hundredths: profit_pct.map(profit_hundredths).transpose()?,
        ..Fields::default()
    };
    for (i, ((field, max), v)) in TEXT_FIELDS.iter().zip(texts).enumerate() {
        f.texts[i] = v.map(|v| text(field, v, *max)).transpose()?;
    }
    Ok(f)
}

/// POST /v1/distributors (staff): 201 Distributor. The entity covers its own
/// country when no entity covers it yet.
#[tracing::instrument(skip_all)]
pub async fn create(
    staff: StaffCaller,
    state: web::Data<AppState>,
    body: web::Json<Create>,
) -> ApiResult<HttpResponse> {
    let b = body.into_inner();
    let country = country(&b.country)?;
    let currency = b
        .currency
        .unwrap_or_else(|| Currency::default_for_country(&country));
    let f = fields(
        Some(b.name.as_str()),
        Some(b.legal_name.as_str()),
        [
            b.tax_id.as_deref(),
            b.address.as_deref(),
            b.bank_name.as_deref(),
            b.bank_iban.as_deref(),
            b.bank_swift.as_deref(),
            b.contact_phone.as_deref(),
            b.notes.as_deref(),
        ],
        b.contact_email.as_deref(),
        b.profit_pct,
    )?;
    let id = DistributorId::new();
    let new = store::NewDistributor {
        id,
        name: f.name.as_deref().unwrap_or_default(),
        country: &country,
        legal_name: f.legal_name.as_deref().unwrap_or_default(),
        currency,
        tax_id: f.text(0).unwrap_or_default(),
        address: f.text(1).unwrap_or_default(),
        bank_name: f.text(2).unwrap_or_default(),
        bank_iban: f.text(3).unwrap_or_default(),
        bank_swift: f.text(4).unwrap_or_default(),
        contact_phone: f.text(5).unwrap_or_default(),
        notes: f.text(6).unwrap_or_default(),
        contact_email: f.contact_email.as_deref().unwrap_or_default(),
        profit_hundredths: f.profit_hundredths.unwrap_or(0),
    };
    let mut tx = state.pool.begin().await?;
    store::insert(&mut tx, &new).await?;
    let covers = store::cover_if_uncovered(&mut tx, &country, id).await?;
    let created = store::one(&mut tx, id)
        .await?
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("distributor {id} not read back")))?;
    outbox::audit_on(
        &mut tx,
        &state.naming,
        &staff,
        AuditAction::DistributorCreated,
        format!("distributor:{id}"),
        json!({"distributor_id": id, "name": created.name, "country": country,
               "currency": currency, "profit_pct": created.profit_pct,
               "covers_own_country": covers}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Created().json(created))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Patch {
    name: Option<String>,
    legal_name: Option<String>,
    tax_id: Option<String>,
    address: Option<String>,
    bank_name: Option<String>,
    bank_iban: Option<String>,
    bank_swift: Option<String>,
    contact_phone: Option<String>,
    contact_email: Option<String>,
    notes: Option<String>,
    profit_pct: Option<f64>,
    /// Fixed once created: accepted only when equal to the entity's.
    country: Option<String>,
    currency: Option<Currency>,
}

/// What changed from `before` to `after`: the fields' names, and profit_pct's
/// values (no contact data in the audit trail).
fn changes(before: &Distributor, after: &Distributor) -> serde_json::Value {
    let pairs = [
        ("name", &before.name, &after.name),
        ("legal_name", &before.legal_name, &after.legal_name),
        ("tax_id", &before.tax_id, &after.tax_id),
        ("address", &before.address, &after.address),
        ("bank_name", &before.bank_name, &after.bank_name),
        ("bank_iban", &before.bank_iban, &after.bank_iban),
        ("bank_swift", &before.bank_swift, &after.bank_swift),
        ("contact_phone", &before.contact_phone, &after.contact_phone),
        ("contact_email", &before.contact_email, &after.contact_email),
        ("notes", &before.notes, &after.notes),
    ];
    let mut changed: Vec<&str> = pairs
        .iter()
        .filter(|(_, b, a)| b != a)
        .map(|(f, _, _)| *f)
        .collect();
    let mut detail = serde_json::Map::new();
    if before.profit_pct != after.profit_pct {
        changed.push("profit_pct");
        detail.insert(
            "profit_pct".into(),
            json!({"from": before.profit_pct, "to": after.profit_pct}),
        );
    }
    if !changed.is_empty() {
        detail.insert("changed".into(), json!(changed));
    }
    serde_json::Value::Object(detail)
}

/// PATCH /v1/distributors/{id} (staff): the fields given (null: unchanged);
/// country and currency only restated (409 for another value); `{}` 400.
#[tracing::instrument(skip_all, fields(distributor_id = %path))]
pub async fn update(
    staff: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<DistributorId>,
    body: web::Json<serde_json::Map<String, serde_json::Value>>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let body = body.into_inner();
    if body.is_empty() {
        return Err(ApiError::bad_request(
            "nothing to change: give name, legal_name, tax_id, address, bank_name, bank_iban, \
             bank_swift, contact_phone, contact_email, notes or profit_pct",
        ));
    }
    let p: Patch = serde_json::from_value(serde_json::Value::Object(body))
        .map_err(|e| ApiError::BadRequest(format!("invalid request body: {e}")))?;
    let given_country = p.country.as_deref().map(country).transpose()?;
    let f = fields(
        p.name.as_deref(),
        p.legal_name.as_deref(),
        [
            p.tax_id.as_deref(),
            p.address.as_deref(),
            p.bank_name.as_deref(),
            p.bank_iban.as_deref(),
            p.bank_swift.as_deref(),
            p.contact_phone.as_deref(),
            p.notes.as_deref(),
        ],
        p.contact_email.as_deref(),
        p.profit_pct,
    )?;
    let mut tx = state.pool.begin().await?;
    let (fixed_country, fixed_currency) = store::lock(&mut tx, id).await?;
    restated("country", given_country.as_ref(), &fixed_country)?;
    restated("currency", p.currency.as_ref(), &fixed_currency)?;
    let before = store::one(&mut tx, id).await?.ok_or(ApiError::NotFound)?;
    store::update(&mut tx, id, &f.change()).await?;
    let after = store::one(&mut tx, id).await?.ok_or(ApiError::NotFound)?;
    let detail = changes(&before, &after);
    if detail.get("changed").is_some() {
        let mut detail = detail;
        detail["distributor_id"] = json!(id);
        outbox::audit_on(
            &mut tx,
            &state.naming,
            &staff,
            AuditAction::DistributorUpdated,
            format!("distributor:{id}"),
            detail,
        )
        .await?;
    }
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(after))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profit_pct_takes_at_most_two_decimals_within_0_and_100() {
        for (p, h) in [
            (0.0, 0),
            (12.5, 1250),
            (0.07, 7),
            (33.33, 3333),
            (100.0, 10000),
        ] {
            assert_eq!(profit_hundredths(p).ok(), Some(h), "{p}");
        }
        for p in [-0.01, 100.01, 12.345, 0.001, f64::NAN, f64::INFINITY] {
            assert!(profit_hundredths(p).is_err(), "{p}");
        }
    }
}
