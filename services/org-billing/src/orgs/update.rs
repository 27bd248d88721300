//! `PATCH /v1/organizations/{id}`: the name by the owner or a manager
//! (trimmed, 1 to 200 characters); the country and legal type by staff only
//! (403 for anyone else) and only before KYC is verified (409 after: the
//! verified legal identity is locked by KYC). A country must be covered by
//! the organization's own distributor entity (422 otherwise: moving an
//! organization between entities, with their currencies, is not a PATCH).
//! Audited `org.updated` with the changed fields.

use crate::state::AppState;
use actix_web::{web, HttpResponse};
use hub_domain::{Capability, CountryCode, DistributorId, LegalType, OrgId};
use serde_json::{json, Map, Value};
use service_kit::{assertion::Caller, outbox, ApiError, ApiResult};

#[derive(Default)]
struct Change {
    name: Option<String>,
    country: Option<CountryCode>,
    legal_type: Option<LegalType>,
}

fn parse(body: &[u8]) -> ApiResult<Change> {
    let map: Map<String, Value> = serde_json::from_slice(body)
        .map_err(|_| ApiError::bad_request("the body must be a JSON object"))?;
    let mut c = Change::default();
    for (k, v) in map {
        match (k.as_str(), v) {
            ("name", Value::String(n)) => {
                let n = n.trim();
                if n.is_empty()
                    || n.chars().count() > super::NAME_MAX
                    || n.chars().any(char::is_control)
                {
                    return Err(ApiError::BadRequest(format!(
                        "name must be 1 to {} characters, without control characters",
                        super::NAME_MAX
                    )));
                }
                c.name = Some(n.to_owned());
            }
            ("country", Value::String(s)) => {
                c.country =
                    Some(CountryCode::parse(&s).map_err(|e| ApiError::BadRequest(e.to_string()))?)
            }
            ("legal_type", Value::String(s)) => {
                c.legal_type = Some(LegalType::parse(&s).ok_or_else(|| {
                    ApiError::bad_request("legal_type must be individual or corporate")
                })?)
            }
            ("name" | "country" | "legal_type", _) => {
                return Err(ApiError::BadRequest(format!("{k} must be a string")))
            }
            (other, _) => {
                return Err(ApiError::BadRequest(format!(
                    "unknown field {other:?}: only name, country and legal_type change"
                )))
            }
        }
    }
    if c.name.is_none() && c.country.is_none() && c.legal_type.is_none() {
        return Err(ApiError::bad_request(
            "nothing to change: give name, country or legal_type",
        ));
    }
    Ok(c)
}

/// PATCH /v1/organizations/{id}: 200 the organization as it is now.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    let staff = caller.identity.staff;
    if !staff {
        caller.require(org_id, Capability::Admin)?;
    }
    let c = parse(&body)?;
    if (c.country.is_some() || c.legal_type.is_some()) && !staff {
        return Err(ApiError::forbidden(
            "only staff change the country and legal type",
        ));
    }
    let mut tx = state.pool.begin().await?;
    let row = sqlx::query!(
        r#"SELECT kyc_status::text AS "kyc_status!", distributor_id AS "distributor_id: DistributorId"
             FROM organizations WHERE id = $1 FOR UPDATE"#,
        org_id as OrgId,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(ApiError::NotFound)?;
    if c.country.is_some() || c.legal_type.is_some() {
        if row.kyc_status == "verified" {
            return Err(ApiError::Conflict(
                "the country and legal type are locked once KYC is verified".into(),
            ));
        }
        if let Some(country) = c.country {
            let routed = super::store::route(&mut tx, country).await?;
            if routed.map(|r| r.0) != Some(row.distributor_id) {
                return Err(ApiError::Unprocessable(format!(
                    "the organization's distributor entity does not cover country {country}"
                )));
            }
        }
    }
    sqlx::query!(
        "UPDATE organizations SET name = COALESCE($2, name), \
           country = COALESCE($3, country), legal_type = COALESCE($4, legal_type) \
         WHERE id = $1",
        org_id as OrgId,
        c.name.as_deref(),
        c.country.map(|x| x.to_string()),
        c.legal_type.map(|x| x.as_str().to_owned()),
    )
    .execute(&mut *tx)
    .await?;
    let mut detail = json!({"org_id": org_id});
    if let Some(n) = &c.name {
        detail["name"] = json!(n);
    }
    if let Some(x) = c.country {
        detail["country"] = json!(x.to_string());
    }
    if let Some(x) = c.legal_type {
        detail["legal_type"] = json!(x.as_str());
    }
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        event_contracts::AuditAction::OrgUpdated,
        org_id,
        detail,
    )
    .await?;
    let org = super::store::one(&mut tx, org_id).await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(org))
}
