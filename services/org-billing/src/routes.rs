//! org-billing's HTTP surface: each area's routes, public and internal.

use crate::{kyc, ledger, members_ai, orgs};
use actix_web::web;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/organizations", web::get().to(orgs::list))
        .route("/v1/organizations", web::post().to(orgs::create))
        .route("/v1/organizations/{id}", web::get().to(orgs::detail))
        .route(
            "/v1/organizations/{id}/wallet",
            web::get().to(ledger::wallet::get),
        )
        .route(
            "/v1/organizations/{id}/wallet/transactions",
            web::get().to(ledger::wallet::transactions),
        )
        .route(
            "/v1/organizations/{id}/wallet/credit",
            web::post().to(ledger::wallet::credit),
        )
        .route(
            "/v1/organizations/{id}/tokens",
            web::get().to(ledger::tokens::get),
        )
        .route(
            "/v1/organizations/{id}/tokens/grant",
            web::post().to(ledger::tokens::grant),
        )
        .route(
            "/v1/organizations/{id}/members/{user_id}/ai",
            web::get().to(members_ai::get),
        )
        .route(
            "/v1/organizations/{id}/members/{user_id}/ai",
            web::patch().to(members_ai::update),
        );
    // Calling services only (`/internal/...`).
    service_kit::assertion::internal(cfg, |c| {
        c.route(
            "/v1/organizations/{id}/tokens/spend",
            web::post().to(ledger::tokens::spend),
        )
        .route(
            "/v1/organizations/{id}/ai-allowance",
            web::get().to(members_ai::allowance),
        )
        .route("/v1/organizations/lookup", web::get().to(orgs::lookup))
        .route(
            "/v1/organizations/{id}/profile",
            web::get().to(orgs::profile),
        )
        .route(
            "/v1/organizations/{id}/kyc-state",
            web::put().to(kyc::put_state),
        );
    });
}
