//! Organizations: create (routed to a distributor by country, wallet and token
//! balance in the same transaction), list the caller's, detail.

use crate::state::AppState;
use actix_web::{web, HttpResponse};
use event_contracts::OrgCreated;
use hub_domain::{Capability, CountryCode, LegalType, OrgId, UserId};
use serde::{Deserialize, Serialize};
use serde_json::json;
use service_kit::{
    assertion::{Caller, SessionCaller},
    outbox, ApiError, ApiResult,
};
use time::OffsetDateTime;
use uuid::Uuid;

pub const NAME_MAX: usize = 200;

#[derive(Serialize)]
pub struct Organization {
    id: OrgId,
    name: String,
    legal_type: String,
    country: String,
    distributor_entity_id: Uuid,
    distributor_entity: String,
    kyc_status: String,
    kyc_tier: i32,
}

// The Organization columns are written out in each query (`o` organizations,
// `d` its distributor): `o.id AS "id: OrgId", o.name, o.legal_type,
// o.country::text AS "country!", o.distributor_id AS distributor_entity_id,
// d.name AS distributor_entity, o.kyc_status, o.kyc_tier`.

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
    let cap = state.orgs.max_memberships;
    if caller.memberships_truncated || caller.identity.memberships.len() >= cap {
        return Err(ApiError::Conflict(format!(
            "you already belong to the maximum of {cap} organizations"
        )));
    }

    let mut tx = state.pool.begin().await?;
    // One creation at a time per user, so that the daily quota holds under
    // concurrent requests.
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 3))",
        caller.user_id().to_string(),
    )
    .execute(&mut *tx)
    .await?;
    let today: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM organizations WHERE created_by = $1 AND created_at > now() - interval '1 day'"#,
        caller.user_id() as UserId,
    )
    .fetch_one(&mut *tx)
    .await?;
    let quota = state.orgs.max_created_per_day;
    if today >= quota {
        return Err(ApiError::QuotaExceeded(format!(
            "you can create at most {quota} organizations per 24 hours"
        )));
    }
    let route: Option<(Uuid, String)> = sqlx::query!(
        "SELECT d.id, d.currency FROM distributor_coverage c JOIN distributors d ON d.id = c.distributor_id \
         WHERE c.country = $1",
        country.as_str(),
    )
    .fetch_optional(&mut *tx)
    .await?
    .map(|r| (r.id, r.currency));
    let Some((distributor_id, currency)) = route else {
        return Err(ApiError::Unprocessable(format!(
            "no distributor entity covers country {country}"
        )));
    };
    let org_id = OrgId::new();
    sqlx::query!(
        "INSERT INTO organizations (id, name, legal_type, country, distributor_id, created_by) \
         VALUES ($1, $2, $3, $4, $5, $6)",
        org_id as OrgId,
        name,
        legal_type as LegalType,
        country.as_str(),
        distributor_id,
        caller.user_id() as UserId,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "INSERT INTO wallets (org_id, currency) VALUES ($1, $2)",
        org_id as OrgId,
        &currency,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "INSERT INTO token_balances (org_id) VALUES ($1)",
        org_id as OrgId,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "INSERT INTO org_members (org_id, user_id, role, changed_at) VALUES ($1, $2, 'owner', now())",
        org_id as OrgId,
        caller.user_id() as UserId,
    )
        .execute(&mut *tx)
        .await?;
    outbox::enqueue(
        &mut tx,
        &state.naming,
        OrgCreated {
            org_id,
            owner_user_id: caller.user_id(),
            name: name.to_owned(),
        },
    )
    .await?;
    service_kit::outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        event_contracts::AuditAction::OrgCreated,
        org_id,
        json!({"org_id": org_id, "name": name, "country": country, "currency": currency}),
    )
    .await?;
    let org = sqlx::query_as!(
        Organization,
        r#"SELECT o.id AS "id: OrgId", o.name, o.legal_type, o.country::text AS "country!",
                  o.distributor_id AS distributor_entity_id, d.name AS distributor_entity,
                  o.kyc_status, o.kyc_tier
             FROM organizations o JOIN distributors d ON d.id = o.distributor_id
            WHERE o.id = $1"#,
        org_id as OrgId,
    )
    .fetch_one(&mut *tx)
    .await?;
    state.outbox.commit(tx).await?;
    state.make_creator_owner(&caller, org_id).await;
    Ok(HttpResponse::Created()
        .insert_header(service_kit::http::identity_changed(caller.user_id()))
        .json(org))
}

/// GET /v1/organizations (session): the caller's organizations. When the
/// gateway carried only some of the caller's memberships (a user in more
/// organizations than an assertion holds), the membership replica has the rest.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn list(state: web::Data<AppState>, caller: SessionCaller) -> ApiResult<HttpResponse> {
    if caller.memberships_truncated {
        let orgs = sqlx::query_as!(
            Organization,
            r#"SELECT o.id AS "id: OrgId", o.name, o.legal_type, o.country::text AS "country!",
                      o.distributor_id AS distributor_entity_id, d.name AS distributor_entity,
                      o.kyc_status, o.kyc_tier
                 FROM organizations o JOIN distributors d ON d.id = o.distributor_id
                WHERE o.id IN (SELECT org_id FROM org_members WHERE user_id = $1)
                ORDER BY o.created_at, o.id"#,
            caller.user_id() as UserId,
        )
        .fetch_all(&state.pool)
        .await?;
        return Ok(HttpResponse::Ok().json(orgs));
    }
    let ids: Vec<OrgId> = caller
        .identity
        .memberships
        .iter()
        .map(|m| m.org_id)
        .collect();
    let orgs = sqlx::query_as!(
        Organization,
        r#"SELECT o.id AS "id: OrgId", o.name, o.legal_type, o.country::text AS "country!",
                  o.distributor_id AS distributor_entity_id, d.name AS distributor_entity,
                  o.kyc_status, o.kyc_tier
             FROM organizations o JOIN distributors d ON d.id = o.distributor_id
            WHERE o.id = ANY($1) ORDER BY o.created_at, o.id"#,
        &ids as &[OrgId],
    )
    .fetch_all(&state.pool)
    .await?;
    Ok(HttpResponse::Ok().json(orgs))
}

struct DetailRow {
    id: OrgId,
    name: String,
    legal_type: String,
    country: String,
    distributor_entity_id: Uuid,
    distributor_entity: String,
    kyc_status: String,
    kyc_tier: i32,
    status: String,
    members: i64,
    wallet_currency: String,
    wallet_balance_minor: i64,
    tokens: i64,
    /// Sealed (crate::kyc); NULL until verified.
    legal_identity: Option<Vec<u8>>,
    kyc_locked: bool,
    kyc_verified_at: Option<OffsetDateTime>,
}

#[derive(Serialize)]
struct Detail {
    #[serde(flatten)]
    org: Organization,
    your_role: String,
    status: String,
    members: i64,
    assets: i64,
    wallet_currency: Option<String>,
    wallet_balance_minor: Option<i64>,
    tokens: i64,
    legal_name: String,
    tax_id: String,
    registration_number: String,
    registered_address: std::collections::BTreeMap<String, String>,
    kyc_locked: bool,
    #[serde(with = "time::serde::rfc3339::option")]
    kyc_verified_at: Option<OffsetDateTime>,
    kyc_retention_until: Option<String>,
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
    let row = sqlx::query_as!(
        DetailRow,
        r#"SELECT o.id AS "id: OrgId", o.name, o.legal_type, o.country::text AS "country!",
                  o.distributor_id AS distributor_entity_id, d.name AS distributor_entity,
                  o.kyc_status, o.kyc_tier,
                  o.status, o.legal_identity, o.kyc_locked, o.kyc_verified_at,
                  w.currency AS wallet_currency, w.balance_minor AS wallet_balance_minor,
                  t.balance AS tokens,
                  (SELECT count(*) FROM org_members m WHERE m.org_id = o.id) AS "members!"
             FROM organizations o JOIN distributors d ON d.id = o.distributor_id
             JOIN wallets w ON w.org_id = o.id
             JOIN token_balances t ON t.org_id = o.id WHERE o.id = $1"#,
        org_id as OrgId,
    )
    .fetch_optional(&state.pool)
    .await?;
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
        assets: 0,
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
    }))
}
