//! Service-to-service endpoints (never routed by the gateway; they still need a
//! signed assertion, which only holders of the internal key can make).

use crate::{memberships, state::AppState};
use actix_web::{web, HttpResponse};
use hub_domain::OrgId;
use serde_json::json;
use service_kit::{
    assertion::{from, Caller, Peer},
    ApiResult,
};

/// POST /internal/v1/organizations/{id}/owner: org-billing's read-your-writes
/// fast path after creating an organization: the asserted caller becomes its
/// first owner (a no-op once the organization has members).
pub async fn creator_owner(
    state: web::Data<AppState>,
    _peer: Peer<from::OrgBilling>,
    caller: Caller,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let inserted =
        memberships::ensure_creator_owner(&state, path.into_inner(), caller.user_id()).await?;
    Ok(HttpResponse::Ok().json(json!({ "created": inserted })))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusChange {
    status: hub_domain::OrgStatus,
    version: i64,
}

/// POST /internal/v1/organizations/{id}/status (org-billing): `{status,
/// version}`, the change staff just made, applied now (as its event would be,
/// only if newer) so that org-billing answers the suspension once identity
/// refuses the organization's writes; 200 `{applied}` (false: this version or
/// a newer one was already applied). `core.v1.org.status_changed` stays the
/// backstop.
pub async fn org_status(
    state: web::Data<AppState>,
    _peer: Peer<from::OrgBilling>,
    path: web::Path<OrgId>,
    body: web::Json<StatusChange>,
) -> ApiResult<HttpResponse> {
    let applied = crate::org_states::apply(
        &state,
        event_contracts::OrgStatusChanged {
            org_id: path.into_inner(),
            status: body.status,
            version: body.version,
        },
    )
    .await?;
    Ok(HttpResponse::Ok().json(json!({ "applied": applied })))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserLookup {
    email: String,
}

/// POST /internal/v1/users (org-billing): `{email}` to `{user_id, email}`,
/// the user with that email, created (as a sign-in or a member invitation
/// would) when there is none yet; for staff adding a distributor observer.
/// 400 for an address identity would not sign in with.
pub async fn user_by_email(
    state: web::Data<AppState>,
    _peer: Peer<from::OrgBilling>,
    body: web::Json<UserLookup>,
) -> ApiResult<HttpResponse> {
    let email = hub_domain::Email::parse(&body.email)
        .map_err(|e| service_kit::ApiError::BadRequest(e.to_string()))?;
    let mut conn = state.pool.acquire().await?;
    let user_id = crate::users::upsert_by_email(&mut conn, &email).await?;
    Ok(
        HttpResponse::Ok().json(event_contracts::internal::UserByEmail {
            user_id,
            email: email.as_str().to_owned(),
        }),
    )
}

/// The most users one timezone lookup names.
pub const MAX_TIMEZONE_LOOKUP: usize = 1000;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimezoneLookup {
    user_ids: Vec<hub_domain::UserId>,
}

/// POST /internal/v1/users/timezones (agent): `{user_ids}` (at most 1000) to
/// `{timezones: {user_id: IANA name}}`, for memory curation in each user's
/// local night. Unknown ids are left out.
pub async fn timezones(
    state: web::Data<AppState>,
    _peer: Peer<from::Agent>,
    body: web::Json<TimezoneLookup>,
) -> ApiResult<HttpResponse> {
    if body.user_ids.len() > MAX_TIMEZONE_LOOKUP {
        return Err(service_kit::ApiError::BadRequest(format!(
            "at most {MAX_TIMEZONE_LOOKUP} user_ids"
        )));
    }
    let map: serde_json::Map<String, serde_json::Value> =
        crate::users::timezones(&state.pool, &body.user_ids)
            .await?
            .into_iter()
            .map(|(id, tz)| (id.to_string(), serde_json::Value::String(tz)))
            .collect();
    Ok(HttpResponse::Ok().json(json!({ "timezones": map })))
}
