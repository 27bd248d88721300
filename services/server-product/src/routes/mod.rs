//! server-product's HTTP surface (product host).

mod admin;
mod contract;
mod servers;
mod skus;

use actix_web::web;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/skus", web::get().to(skus::list))
        .route("/v1/servers", web::post().to(servers::create))
        .route("/v1/servers", web::get().to(servers::list))
        .route("/v1/servers/{id}", web::get().to(servers::detail))
        .route("/v1/servers/{id}/power", web::post().to(servers::power))
        .route(
            "/v1/servers/{id}/terminate",
            web::post().to(servers::terminate),
        )
        .route("/v1/admin/fulfilment", web::get().to(admin::queue))
        .route(
            "/v1/admin/fulfilment/{id}/complete",
            web::post().to(admin::complete),
        )
        .route("/v1/admin/maintenance", web::post().to(admin::add_window))
        .route("/v1/admin/skus", web::get().to(skus::all))
        .route("/v1/admin/skus", web::post().to(skus::create))
        .route("/v1/admin/skus/{id}", web::patch().to(skus::update))
        .route(
            "/v1/service-contract/maintenance",
            web::get().to(admin::upcoming),
        )
        .route(
            "/v1/service-contract/services",
            web::get().to(contract::services),
        )
        .route(
            "/v1/service-contract/services",
            web::post().to(contract::provision),
        )
        .route(
            "/v1/service-contract/services/{id}/activate",
            web::post().to(contract::activate),
        )
        .route(
            "/v1/service-contract/services/{id}/suspend",
            web::post().to(contract::suspend),
        )
        .route(
            "/v1/service-contract/services/{id}/resize",
            web::post().to(contract::resize),
        )
        .route(
            "/v1/service-contract/services/{id}/terminate",
            web::post().to(contract::terminate),
        )
        .route(
            "/v1/service-contract/services/{id}/transfer",
            web::post().to(contract::transfer),
        )
        .route("/v1/service-contract/usage", web::get().to(contract::usage))
        .route(
            "/v1/service-contract/export",
            web::get().to(contract::export),
        );
}
