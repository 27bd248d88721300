//! Internal routes for kyc (never routed by the gateway; open only to the
//! callers org-billing lists in `assertion.callers`).

use crate::{kyc, state::AppState};
use actix_web::{web, HttpResponse};
use hub_domain::OrgId;
use serde_json::json;
use service_kit::{
    assertion::{from, Peer},
    ApiError, ApiResult,
};

/// GET /internal/v1/organizations/{id}/profile (kyc): name and legal type.
pub async fn profile(
    state: web::Data<AppState>,
    _peer: Peer<from::Kyc>,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let row = sqlx::query!(
        r#"SELECT name, legal_type, country::text AS "country!" FROM organizations WHERE id = $1"#,
        path.into_inner() as OrgId,
    )
    .fetch_optional(&state.pool)
    .await?
    .ok_or(ApiError::NotFound)?;
    let (name, legal_type, country) = (row.name, row.legal_type, row.country);
    Ok(
        HttpResponse::Ok()
            .json(json!({"name": name, "legal_type": legal_type, "country": country})),
    )
}

/// PUT /internal/v1/organizations/{id}/kyc-state (kyc): apply a KYC state
/// (the fast path; `applied` is false when it was not newer).
pub async fn kyc_state(
    state: web::Data<AppState>,
    _peer: Peer<from::Kyc>,
    path: web::Path<OrgId>,
    body: web::Json<kyc::KycState>,
) -> ApiResult<HttpResponse> {
    let applied = kyc::apply(&state, path.into_inner(), &body).await?;
    Ok(HttpResponse::Ok().json(json!({"applied": applied})))
}

#[derive(serde::Deserialize)]
pub struct LookupQuery {
    q: String,
}

// The lookup's answer: the shared contract type the agent reads.
use event_contracts::views::FoundOrganization as Found;

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
    let id = uuid::Uuid::parse_str(q).ok();
    let pattern = format!(
        "{}%",
        q.to_lowercase()
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_")
    );
    // By id, or by name (exact matches first): each on its own index.
    let rows: Vec<Found> =
        match id {
            Some(id) => sqlx::query_as!(
                Found,
                r#"SELECT o.id AS "id: OrgId", o.name, o.legal_type, o.country::text AS "country!",
                          o.kyc_status, w.currency AS "wallet_currency?"
                     FROM organizations o LEFT JOIN wallets w ON w.org_id = o.id
                    WHERE o.id = $1"#,
                id,
            )
            .fetch_all(&state.pool)
            .await?,
            None => sqlx::query_as!(
                Found,
                r#"SELECT o.id AS "id: OrgId", o.name, o.legal_type, o.country::text AS "country!",
                          o.kyc_status, w.currency AS "wallet_currency?"
                     FROM organizations o LEFT JOIN wallets w ON w.org_id = o.id
                    WHERE lower(o.name) LIKE $1
                    ORDER BY (lower(o.name) = $2) DESC, o.name, o.id LIMIT 10"#,
                pattern,
                q.to_lowercase(),
            )
            .fetch_all(&state.pool)
            .await?,
        };
    Ok(HttpResponse::Ok().json(rows))
}
