//! org-billing's HTTP surface.

mod internal;
pub mod member_ai;
mod orgs;
mod tokens;
mod wallet;

use actix_web::web;
use hub_domain::OrgId;
use service_kit::{ApiError, ApiResult};
use sqlx::PgConnection;

/// 404 unless the organization exists (its wallet and token balance exist with it).
async fn require_org(conn: &mut PgConnection, org_id: OrgId) -> ApiResult<()> {
    let found: Option<i32> = sqlx::query_scalar!(
        r#"SELECT 1 AS "one!" FROM organizations WHERE id = $1"#,
        org_id as OrgId
    )
    .fetch_optional(conn)
    .await?;
    found.map(|_| ()).ok_or(ApiError::NotFound)
}

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/organizations", web::get().to(orgs::list))
        .route("/v1/organizations", web::post().to(orgs::create))
        .route("/v1/organizations/{id}", web::get().to(orgs::detail))
        .route("/v1/organizations/{id}/wallet", web::get().to(wallet::get))
        .route(
            "/v1/organizations/{id}/wallet/transactions",
            web::get().to(wallet::transactions),
        )
        .route(
            "/v1/organizations/{id}/wallet/credit",
            web::post().to(wallet::credit),
        )
        .route("/v1/organizations/{id}/tokens", web::get().to(tokens::get))
        .route(
            "/v1/organizations/{id}/tokens/grant",
            web::post().to(tokens::grant),
        )
        .route(
            "/v1/organizations/{id}/members/{user_id}/ai",
            web::get().to(member_ai::get),
        )
        .route(
            "/v1/organizations/{id}/members/{user_id}/ai",
            web::patch().to(member_ai::update),
        );
    // Calling services only (`/internal/...`).
    service_kit::assertion::internal(cfg, |c| {
        c.route(
            "/v1/organizations/{id}/tokens/spend",
            web::post().to(tokens::spend),
        )
        .route(
            "/v1/organizations/{id}/ai-allowance",
            web::get().to(member_ai::allowance),
        )
        .route("/v1/organizations/lookup", web::get().to(internal::lookup))
        .route(
            "/v1/organizations/{id}/profile",
            web::get().to(internal::profile),
        )
        .route(
            "/v1/organizations/{id}/kyc-state",
            web::put().to(internal::kyc_state),
        );
    });
}
