//! webhook-dispatcher's HTTP surface (product host).

mod deliveries;
mod endpoints;

use actix_web::web;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/webhooks", web::post().to(endpoints::create))
        .route("/v1/webhooks", web::get().to(endpoints::list))
        .route("/v1/webhooks/{id}", web::delete().to(endpoints::delete))
        .route(
            "/v1/webhooks/{id}/rotate-secret",
            web::post().to(endpoints::rotate),
        )
        .route(
            "/v1/webhooks/{id}/deliveries",
            web::get().to(deliveries::log),
        )
        .route(
            "/v1/webhooks/{id}/deliveries/{delivery_id}/retry",
            web::post().to(deliveries::retry),
        );
}
