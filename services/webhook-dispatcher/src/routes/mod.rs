//! webhook-dispatcher's HTTP surface (product host).

mod deliveries;
mod endpoints;

use actix_web::web;
use service_kit::methods;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/webhooks", methods::post().to(endpoints::create))
        .route("/v1/webhooks", methods::get().to(endpoints::list))
        .route("/v1/webhooks/{id}", methods::delete().to(endpoints::delete))
        .route(
            "/v1/webhooks/{id}/rotate-secret",
            methods::post().to(endpoints::rotate),
        )
        .route(
            "/v1/webhooks/{id}/deliveries",
            methods::get().to(deliveries::log),
        )
        .route(
            "/v1/webhooks/{id}/deliveries/{delivery_id}/retry",
            methods::post().to(deliveries::retry),
        );
}
