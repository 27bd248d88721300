//! org-billing's HTTP surface: each area's routes, public and internal.

use crate::{billing, kyc, ledger, members_ai, orgs};
use actix_web::web;
use service_kit::methods;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/organizations", methods::get().to(orgs::list))
        .route("/v1/organizations", methods::post().to(orgs::create))
        .route("/v1/organizations/{id}", methods::get().to(orgs::detail))
        .route(
            "/v1/organizations/{id}/wallet",
            methods::get().to(ledger::wallet::get),
        )
        .route(
            "/v1/organizations/{id}/wallet/transactions",
            methods::get().to(ledger::wallet::transactions),
        )
        .route(
            "/v1/organizations/{id}/wallet/credit",
            methods::post().to(ledger::wallet::credit),
        )
        .route(
            "/v1/organizations/{id}/tokens",
            methods::get().to(ledger::tokens::get),
        )
        .route(
            "/v1/organizations/{id}/tokens/grant",
            methods::post().to(ledger::tokens::grant),
        )
        .route(
            "/v1/organizations/{id}/members/{user_id}/ai",
            methods::get().to(members_ai::get),
        )
        .route(
            "/v1/organizations/{id}/members/{user_id}/ai",
            methods::patch().to(members_ai::update),
        );
    billing::configure(cfg);
    // Calling services only (`/internal/...`).
    service_kit::assertion::internal(cfg, |c| {
        c.route(
            "/v1/organizations/{id}/tokens/spend",
            methods::post().to(ledger::tokens::spend),
        )
        .route(
            "/v1/organizations/{id}/ai-allowance",
            methods::get().to(members_ai::allowance),
        )
        .route("/v1/organizations/lookup", methods::get().to(orgs::lookup))
        .route(
            "/v1/organizations/{id}/profile",
            methods::get().to(orgs::profile),
        )
        .route(
            "/v1/organizations/{id}/kyc-state",
            methods::put().to(kyc::put_state),
        );
    });
}
