//! kyc's HTTP surface.

mod admin;
mod body;
mod internal;
mod submissions;

use actix_web::web;
use service_kit::methods;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route(
        "/v1/organizations/{id}/kyc",
        methods::post().to(submissions::submit),
    )
    .route(
        "/v1/organizations/{id}/kyc",
        methods::get().to(submissions::list),
    )
    .route("/v1/admin/kyc", methods::get().to(admin::queue))
    .route(
        "/v1/admin/kyc/{id}/approve",
        methods::post().to(admin::approve),
    )
    .route(
        "/v1/admin/kyc/{id}/reject",
        methods::post().to(admin::reject),
    )
    .route(
        "/v1/admin/kyc/{id}/request-info",
        methods::post().to(admin::request_info),
    );
    // Calling services only (`/internal/...`).
    service_kit::assertion::internal(cfg, |c| {
        c.route(
            "/v1/organizations/{id}/kyc-state",
            methods::get().to(internal::kyc_state),
        )
        .route(
            "/v1/organizations/{id}/kyc-status",
            methods::get().to(internal::kyc_status),
        );
    });
}
