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

pub mod store;

use crate::state::AppState;
use actix_web::{web, HttpResponse};
use event_contracts::{internal::UserByEmail, AuditAction};
use hub_domain::{
    catalog, Currency, DistributorId, Email, KycStatus, LegalType, MinorUnits, OrgId, UserId,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use service_kit::{
    assertion::{Caller, StaffCaller},
    outbox, page, ApiError, ApiResult,
};
use time::{Date, OffsetDateTime};

/// Organizations per page: by default, at most.
pub const PAGE_DEFAULT: i64 = 50;
pub const PAGE_MAX: i64 = 100;

/// A distributor entity, with the countries routed to it.
#[derive(Debug, Serialize)]
pub struct Distributor {
    pub id: DistributorId,
    pub name: String,
    pub country: String,
    pub legal_name: String,
    pub tax_id: String,
    pub address: String,
    pub bank_name: String,
    pub bank_iban: String,
    pub bank_swift: String,
    pub contact_phone: String,
    pub contact_email: String,
    pub notes: String,
    /// The entity's share of its collected (paid) invoice totals, in percent.
    pub profit_pct: f64,
    /// The wallet currency of the organizations routed to it.
    pub currency: Currency,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub covers: Vec<String>,
}

/// An observer of an entity.
#[derive(Debug, Serialize)]
pub struct StaffMember {
    pub user_id: UserId,
    pub email: String,
    pub role: String,
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
}

/// An organization routed to an entity.
#[derive(Debug, Serialize)]
pub struct OrgRow {
    pub id: OrgId,
    pub name: String,
    pub country: String,
    pub legal_type: LegalType,
    pub status: String,
    pub kyc_status: KycStatus,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

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

/// GET /v1/distributors/{id}/staff: staff, or an observer of the entity.
#[tracing::instrument(skip_all, fields(distributor_id = %path))]
pub async fn staff_list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<DistributorId>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    authorize_read(&state, &caller, id).await?;
    let mut conn = state.pool.acquire().await?;
    Ok(HttpResponse::Ok().json(store::staff_of(&mut conn, id).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddStaff {
    email: String,
    role: String,
}

/// The user with `email` (created when missing), from identity.
async fn user_by_email(state: &AppState, caller: &Caller, email: &Email) -> ApiResult<UserByEmail> {
    let resp = state
        .identity
        .call(
            reqwest::Method::POST,
            "/internal/v1/users",
            caller,
            &json!({"email": email.as_str()}),
        )
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "identity unreachable");
            ApiError::Unavailable("users are unavailable, try again".into())
        })?;
    match resp.status().as_u16() {
        200 => resp
            .json::<UserByEmail>()
            .await
            .map_err(|e| ApiError::internal(anyhow::anyhow!("identity's user answer: {e}"))),
        s => Err(ApiError::internal(anyhow::anyhow!(
            "identity answered {s} to a user lookup"
        ))),
    }
}

/// POST /v1/distributors/{id}/staff (staff): `{email, role: "observer"}`;
/// the user is created by email when missing (they sign in with it). 201
/// DistributorStaffMember; 409 when they are on the staff already.
#[tracing::instrument(skip_all, fields(distributor_id = %path))]
pub async fn staff_add(
    staff: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<DistributorId>,
    body: web::Json<AddStaff>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let email = Email::parse(&body.email).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    if body.role != "observer" {
        return Err(ApiError::bad_request("role must be observer"));
    }
    {
        let mut conn = state.pool.acquire().await?;
        if store::one(&mut conn, id).await?.is_none() {
            return Err(ApiError::NotFound);
        }
    }
    let user = user_by_email(&state, &staff, &email).await?;
    let mut tx = state.pool.begin().await?;
    let member = store::add_staff(&mut tx, id, user.user_id, &user.email).await?;
    outbox::audit_on(
        &mut tx,
        &state.naming,
        &staff,
        AuditAction::DistributorStaffAdded,
        format!("distributor:{id}"),
        json!({"distributor_id": id, "user_id": member.user_id, "email": member.email,
               "role": member.role}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Created().json(member))
}

/// DELETE /v1/distributors/{id}/staff/{user_id} (staff): 200
/// `{"status": "removed"}`; 404 when they are not on the staff.
#[tracing::instrument(skip_all)]
pub async fn staff_remove(
    staff: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<(DistributorId, UserId)>,
) -> ApiResult<HttpResponse> {
    let (id, user_id) = path.into_inner();
    let mut tx = state.pool.begin().await?;
    if !store::remove_staff(&mut tx, id, user_id).await? {
        return Err(ApiError::NotFound);
    }
    outbox::audit_on(
        &mut tx,
        &state.naming,
        &staff,
        AuditAction::DistributorStaffRemoved,
        format!("distributor:{id}"),
        json!({"distributor_id": id, "user_id": user_id}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(json!({"status": "removed"})))
}

/// GET /v1/distributors/{id}/organizations?limit=&cursor= (staff, or an
/// observer of the entity): the organizations routed to it, newest first, a
/// page at a time; `x-next-cursor` (and `Link: rel="next"`) when there is more.
#[tracing::instrument(skip_all, fields(distributor_id = %path))]
pub async fn organizations(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<DistributorId>,
    query: web::Query<page::Query>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let q = query.into_inner();
    let limit = page::limit(q.limit, PAGE_DEFAULT, PAGE_MAX)?;
    let after = page::after(q.cursor.as_deref())?;
    authorize_read(&state, &caller, id).await?;
    let mut conn = state.pool.acquire().await?;
    let rows = store::organizations(&mut conn, id, after, limit + 1).await?;
    Ok(page::respond(
        rows,
        limit,
        |o| (o.created_at, o.id.as_uuid()),
        |c| format!("/v1/distributors/{id}/organizations?limit={limit}&cursor={c}"),
    ))
}

/// GET /v1/distributors/{id}/invoices?kind=&status=&limit=&cursor= (staff,
/// the entity's observers): the documents of its organizations.
#[tracing::instrument(skip_all, fields(distributor_id = %path))]
pub async fn invoices(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<DistributorId>,
    q: web::Query<crate::billing::documents::ListQuery>,
) -> ApiResult<actix_web::HttpResponse> {
    let id = path.into_inner();
    authorize_read(&state, &caller, id).await?;
    let base = format!("/v1/distributors/{id}/invoices");
    crate::billing::documents::page_of(
        &state,
        crate::billing::store::Owner::Distributor(id),
        &q,
        &base,
    )
    .await
}

/// GET /v1/distributors/{id}/payments?limit=&cursor= (staff, the entity's
/// observers): the payments of its organizations.
#[tracing::instrument(skip_all, fields(distributor_id = %path))]
pub async fn payments(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<DistributorId>,
    q: web::Query<page::Query>,
) -> ApiResult<actix_web::HttpResponse> {
    let id = path.into_inner();
    authorize_read(&state, &caller, id).await?;
    let base = format!("/v1/distributors/{id}/payments");
    crate::billing::payments::page_of(
        &state,
        crate::billing::store::Owner::Distributor(id),
        &q,
        &base,
    )
    .await
}

#[derive(Deserialize)]
pub struct ReportQuery {
    month: String,
}

/// `YYYY-MM` ([`crate::billing::model::period`]) to the first day of that month.
fn parse_month(s: &str) -> ApiResult<Date> {
    crate::billing::model::period(s)
        .and_then(|(year, month)| Date::from_calendar_date(year, month, 1).ok())
        .ok_or_else(|| ApiError::bad_request("month must be YYYY-MM (e.g. 2026-11)"))
}

#[derive(Serialize)]
struct CurrencyReport {
    currency: Currency,
    paid_invoices: i64,
    paid_total_minor: MinorUnits,
    share_minor: MinorUnits,
}

/// floor(total * hundredths / 10000): the share of `total` at `hundredths`
/// hundredths of a percent.
fn share(total: MinorUnits, hundredths: i64) -> ApiResult<MinorUnits> {
    let s = (i128::from(total.0) * i128::from(hundredths)).div_euclid(10_000);
    i64::try_from(s)
        .map(MinorUnits)
        .map_err(|_| ApiError::internal(anyhow::anyhow!("share overflows: {s}")))
}

/// GET /v1/distributors/{id}/report?month=YYYY-MM (staff, or an observer of
/// the entity): per currency, the entity's invoices (kind `invoice`, not
/// void) paid in that month (UTC), their total and the entity's share
/// `floor(total * profit_pct / 100)`.
#[tracing::instrument(skip_all, fields(distributor_id = %path))]
pub async fn report(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<DistributorId>,
    query: web::Query<ReportQuery>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let month = parse_month(&query.month)?;
    authorize_read(&state, &caller, id).await?;
    let mut conn = state.pool.acquire().await?;
    let hundredths = store::profit_hundredths(&mut conn, id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let mut currencies = Vec::new();
    for p in store::paid_in_month(&mut conn, id, month).await? {
        currencies.push(CurrencyReport {
            share_minor: share(p.total_minor, hundredths)?,
            currency: p.currency,
            paid_invoices: p.invoices,
            paid_total_minor: p.total_minor,
        });
    }
    Ok(HttpResponse::Ok().json(json!({
        "distributor_id": id,
        "month": query.month,
        "profit_pct": hundredths as f64 / 100.0,
        "currencies": currencies,
    })))
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

    #[test]
    fn months_are_yyyy_mm() {
        assert_eq!(
            parse_month("2026-02").ok(),
            Date::from_calendar_date(2026, time::Month::February, 1).ok()
        );
        for bad in [
            "2026-13",
            "2026-00",
            "2026-1",
            "26-01",
            "2026/01",
            "2026-011",
            "２０２６-01",
        ] {
            assert!(parse_month(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_share_is_floored() {
        let share = |t, h| share(MinorUnits(t), h).ok().map(|s| s.0);
        assert_eq!(share(999, 1250), Some(124)); // 124.875
        assert_eq!(share(100_000, 3333), Some(33_330));
        assert_eq!(share(i64::MAX, 10000), Some(i64::MAX));
        assert_eq!(share(7, 0), Some(0));
    }
}
