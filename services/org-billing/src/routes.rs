//! org-billing's HTTP surface: each area's routes, public and internal.

use crate::{distributors, kyc, ledger, members_ai, orgs};
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
    // Distributor entities: staff writes, observers read their own.
    cfg.route("/v1/distributors", methods::get().to(distributors::list))
        .route("/v1/distributors", methods::post().to(distributors::create))
        .route(
            "/v1/distributors/{id}",
            methods::get().to(distributors::detail),
        )
        .route(
            "/v1/distributors/{id}",
            methods::patch().to(distributors::update),
        )
        .route(
            "/v1/distributors/{id}/staff",
            methods::get().to(distributors::staff_list),
        )
        .route(
            "/v1/distributors/{id}/staff",
            methods::post().to(distributors::staff_add),
        )
        .route(
            "/v1/distributors/{id}/staff/{user_id}",
            methods::delete().to(distributors::staff_remove),
        )
        .route(
            "/v1/distributors/{id}/organizations",
            methods::get().to(distributors::organizations),
        )
        .route(
            "/v1/distributors/{id}/report",
            methods::get().to(distributors::report),
        );
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
