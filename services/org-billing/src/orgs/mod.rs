//! Organizations: create (routed to a distributor by country, wallet and token
//! balance in the same transaction), list the caller's, detail; for calling
//! services, an organization's profile (kyc) and lookup by name (agent). The
//! SQL is in [`store`].

pub mod close;
mod model;
pub mod search;
pub mod status;
pub mod store;
pub mod update;

pub use model::Organization;

use crate::state::AppState;
use actix_web::{web, HttpResponse};
use event_contracts::OrgCreated;
use hub_domain::{Capability, CountryCode, Currency, DistributorId, LegalType, MinorUnits, OrgId};
use serde::{Deserialize, Serialize};
use serde_json::json;
use service_kit::{
    assertion::{from, Caller, Peer, SessionCaller},
    outbox, ApiError, ApiResult,
};
use sqlx::PgConnection;
use time::OffsetDateTime;

pub const NAME_MAX: usize = 200;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateOrg {
    name: String,
    legal_type: String,
    country: String,
}

/// POST /v1/organizations (session): 201 Organization; 422 when no distributor
/// entity covers the country; 409 when the caller already belongs to
/// `orgs.max_memberships` organizations; 429 past `orgs.max_created_per_day`.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn create(
    state: web::Data<AppState>,
    caller: SessionCaller,
    body: web::Json<CreateOrg>,
) -> ApiResult<HttpResponse> {
    let (name, legal_type, country) = validate(&body)?;
    let cap = state.orgs.max_memberships;
    if caller.memberships_truncated || caller.identity.memberships.len() >= cap {
        return Err(ApiError::Conflict(format!(
            "you already belong to the maximum of {cap} organizations"
        )));
    }

    let mut tx = state.pool.begin().await?;
    let currency = within_quota_and_routed(&state, &mut tx, &caller, country).await?;
    let org_id = OrgId::new();
    store::insert(
        &mut tx,
        &store::NewOrg {
            id: org_id,
            name,
            legal_type,
            country,
            distributor_id: currency.0,
            currency: currency.1,
            creator: caller.user_id(),
        },
    )
    .await?;
    announce_created(&state, &mut tx, &caller, org_id, name, country, currency.1).await?;
    let org = store::one(&mut tx, org_id).await?;
    state.outbox.commit(tx).await?;
    state.make_creator_owner(&caller, org_id).await;
    Ok(HttpResponse::Created()
        .insert_header(service_kit::http::identity_changed(caller.user_id()))
        .json(org))
}

/// The name (trimmed), legal type and country of a creation, or 400.
fn validate(body: &CreateOrg) -> ApiResult<(&str, LegalType, CountryCode)> {
    let name = body.name.trim();
    if name.is_empty() || name.chars().count() > NAME_MAX || name.chars().any(char::is_control) {
        return Err(ApiError::BadRequest(format!(
            "name is required, at most {NAME_MAX} characters, without control characters"
        )));
    }
    let legal_type = LegalType::parse(&body.legal_type)
        .ok_or_else(|| ApiError::bad_request("legal_type must be individual or corporate"))?;
    let country =
        CountryCode::parse(&body.country).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    Ok((name, legal_type, country))
}

/// In the creation's transaction: one creation at a time per user (so that
/// the daily quota holds under concurrent requests), the quota (429), then the
/// distributor entity covering `country` and its currency (422 when none).
async fn within_quota_and_routed(
    state: &AppState,
    tx: &mut PgConnection,
    caller: &Caller,
    country: CountryCode,
) -> ApiResult<(DistributorId, Currency)> {
    store::lock_creations_of(&mut *tx, caller.user_id()).await?;
    let quota = state.orgs.max_created_per_day;
    if store::created_today(&mut *tx, caller.user_id()).await? >= quota {
        return Err(ApiError::QuotaExceeded(format!(
            "you can create at most {quota} organizations per 24 hours"
        )));
    }
    store::route(&mut *tx, country).await?.ok_or_else(|| {
        ApiError::Unprocessable(format!("no distributor entity covers country {country}"))
    })
}

/// `core.v1.org.created` (identity makes the owner from it) and the audit
/// event, in the creation's transaction.
async fn announce_created(
    state: &AppState,
    tx: &mut PgConnection,
    caller: &Caller,
    org_id: OrgId,
    name: &str,
    country: CountryCode,
    currency: Currency,
) -> ApiResult<()> {
    outbox::enqueue(
        &mut *tx,
        &state.naming,
        OrgCreated {
            org_id,
            owner_user_id: caller.user_id(),
            name: name.to_owned(),
        },
    )
    .await?;
    outbox::audit(
        tx,
        &state.naming,
        caller,
        event_contracts::AuditAction::OrgCreated,
        org_id,
        json!({"org_id": org_id, "name": name, "country": country, "currency": currency}),
    )
    .await?;
    Ok(())
}

/// GET /v1/organizations (session): the caller's organizations. When the
/// gateway carried only some of the caller's memberships (a user in more
/// organizations than an assertion holds), the membership replica has the rest.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn list(state: web::Data<AppState>, caller: SessionCaller) -> ApiResult<HttpResponse> {
    let orgs = if caller.memberships_truncated {
        store::of_member(&state.pool, caller.user_id()).await?
    } else {
        let ids: Vec<OrgId> = caller
            .identity
            .memberships
            .iter()
            .map(|m| m.org_id)
            .collect();
        store::by_ids(&state.pool, &ids).await?
    };
    Ok(HttpResponse::Ok().json(orgs))
}

#[derive(Serialize)]
struct Detail {
    #[serde(flatten)]
    org: Organization,
    your_role: String,
    status: hub_domain::OrgStatus,
    members: i64,
    assets: i64,
    wallet_currency: Option<Currency>,
    wallet_balance_minor: Option<MinorUnits>,
    tokens: i64,
    legal_name: String,
    tax_id: String,
    registration_number: String,
    registered_address: std::collections::BTreeMap<String, String>,
    kyc_locked: bool,
    #[serde(with = "time::serde::rfc3339::option")]
    kyc_verified_at: Option<OffsetDateTime>,
    kyc_retention_until: Option<String>,
    /// Only for staff callers (member or not): what staff need beside the
    /// member's view. The KYC history is `GET /v1/organizations/{id}/kyc`,
    /// which staff read in full.
    #[serde(skip_serializing_if = "Option::is_none")]
    staff: Option<StaffFields>,
}

/// What only staff see on an organization.
#[derive(Serialize)]
struct StaffFields {
    /// Why staff suspended it (null while active).
    status_reason: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    status_changed_at: Option<OffsetDateTime>,
}

/// GET /v1/organizations/{id}: OrganizationDetail for any member. Wallet fields
/// only for roles with finance reads (owner, finance); null otherwise.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn detail(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    let role = caller.require(org_id, Capability::Read)?;
    let row = store::detail(&state.pool, org_id).await?;
    let r = row.ok_or(ApiError::NotFound)?;
    // The verified legal identity (an individual's national id among it) is
    // shown to the roles that read KYC submissions; other members see it
    // empty, as they see the submissions' status only. Not even opened then.
    let identity = if role.can(Capability::KycRead) {
        crate::kyc::open_identity(&state.sealer, org_id, r.legal_identity.as_deref())?
    } else {
        crate::kyc::empty_identity()
    };
    let finance = role.can(Capability::FinanceRead);
    let retention = r.kyc_verified_at.map(|v| {
        let d = v.date();
        d.replace_year(d.year() + 10)
            .unwrap_or_else(|_| {
                d.replace_day(28)
                    .and_then(|d| d.replace_year(d.year() + 10))
                    .unwrap_or(d)
            })
            .to_string()
    });
    Ok(HttpResponse::Ok().json(Detail {
        org: Organization {
            id: r.id,
            name: r.name,
            legal_type: r.legal_type,
            country: r.country,
            distributor_entity_id: r.distributor_entity_id,
            distributor_entity: r.distributor_entity,
            kyc_status: r.kyc_status,
            kyc_tier: r.kyc_tier,
        },
        your_role: role.as_str().to_owned(),
        status: r.status,
        members: r.members,
        assets: r.assets,
        wallet_currency: finance.then_some(r.wallet_currency),
        wallet_balance_minor: finance.then_some(r.wallet_balance_minor),
        tokens: r.tokens,
        legal_name: identity.legal_name,
        tax_id: identity.tax_id,
        registration_number: identity.registration_number,
        registered_address: identity.registered_address,
        kyc_locked: r.kyc_locked,
        kyc_verified_at: r.kyc_verified_at,
        kyc_retention_until: retention,
        staff: caller.identity.staff.then_some(StaffFields {
            status_reason: r.status_reason,
            status_changed_at: r.status_changed_at,
        }),
    }))
}

/// GET /internal/v1/organizations/{id}/profile (kyc): name and legal type.
pub async fn profile(
    state: web::Data<AppState>,
    _peer: Peer<from::Kyc>,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let p = store::profile(&state.pool, path.into_inner())
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(HttpResponse::Ok()
        .json(json!({"name": p.name, "legal_type": p.legal_type, "country": p.country})))
}

#[derive(serde::Deserialize)]
pub struct LookupQuery {
    q: String,
}

/// GET /internal/v1/organizations/lookup?q= (agent): up to 10 organizations
/// whose id is `q`, or whose name is `q` (case-insensitive) or starts with it,
/// exact matches first. The agent filters the answer to the caller's
/// memberships unless the caller is staff; nothing here is shown to users
/// directly.
pub async fn lookup(
    state: web::Data<AppState>,
    _peer: Peer<from::Agent>,
    query: web::Query<LookupQuery>,
) -> ApiResult<HttpResponse> {
    let q = query.q.trim();
    if q.is_empty() || q.chars().count() > 200 {
        return Err(ApiError::bad_request("q must be 1 to 200 characters"));
    }
    let id = q.parse::<OrgId>().ok();
    let pattern = format!(
        "{}%",
        q.to_lowercase()
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_")
    );
    // By id, or by name (exact matches first): each on its own index. The
    // answer is the shared contract type the agent reads.
    let rows = match id {
        Some(id) => store::find_by_id(&state.pool, id).await?,
        None => store::find_by_name(&state.pool, &pattern, &q.to_lowercase()).await?,
    };
    Ok(HttpResponse::Ok().json(rows))
}
