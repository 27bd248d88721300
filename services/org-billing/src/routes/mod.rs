//! org-billing's HTTP surface.

mod orgs;
mod tokens;
mod wallet;

use actix_web::web;

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
            "/internal/v1/organizations/{id}/tokens/spend",
            web::post().to(tokens::spend),
        );
}
