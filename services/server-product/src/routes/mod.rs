//! server-product's HTTP surface (product host).

mod admin;
mod contract;
mod internal;
mod servers;
mod skus;

use actix_web::web;
use service_kit::methods;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/skus", methods::get().to(skus::list))
        .route("/v1/servers", methods::post().to(servers::create))
        .route("/v1/servers", methods::get().to(servers::list))
        .route("/v1/servers/{id}", methods::get().to(servers::detail))
        .route("/v1/servers/{id}/power", methods::post().to(servers::power))
        .route(
            "/v1/servers/{id}/credentials/rotate",
            methods::post().to(servers::rotate),
        )
        .route(
            "/v1/servers/{id}/terminate",
            methods::post().to(servers::terminate),
        )
        .route("/v1/admin/fulfilment", methods::get().to(admin::queue))
        .route(
            "/v1/admin/fulfilment/{id}/complete",
            methods::post().to(admin::complete),
        )
        .route(
            "/v1/admin/maintenance",
            methods::post().to(admin::add_window),
        )
        .route("/v1/admin/skus", methods::get().to(skus::all))
        .route("/v1/admin/skus", methods::post().to(skus::create))
        .route("/v1/admin/skus/{id}", methods::patch().to(skus::update))
        .route(
            "/v1/service-contract/maintenance",
            methods::get().to(admin::upcoming),
        )
        .route(
            "/v1/service-contract/services",
            methods::get().to(contract::services),
        )
        .route(
            "/v1/service-contract/services",
            methods::post().to(contract::provision),
        )
        .route(
            "/v1/service-contract/services/{id}/activate",
            methods::post().to(contract::activate),
        )
        .route(
            "/v1/service-contract/services/{id}/suspend",
            methods::post().to(contract::suspend),
        )
        .route(
            "/v1/service-contract/services/{id}/resize",
            methods::post().to(contract::resize),
        )
        .route(
            "/v1/service-contract/services/{id}/terminate",
            methods::post().to(contract::terminate),
        )
        .route(
            "/v1/service-contract/services/{id}/transfer",
            methods::post().to(contract::transfer),
        )
        .route(
            "/v1/service-contract/usage",
            methods::get().to(contract::usage),
        )
        .route(
            "/v1/service-contract/export",
            methods::get().to(contract::export),
        );
    // Calling services only (`/internal/...`).
    service_kit::assertion::internal(cfg, |c| {
        c.route(
            "/v1/organizations/{id}/servers/live",
            methods::get().to(internal::live_servers),
        );
    });
}
