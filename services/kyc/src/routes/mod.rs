//! kyc's HTTP surface.

mod admin;
mod internal;
mod submissions;

use actix_web::web;
use serde_json::Value;
use service_kit::methods;
use service_kit::ApiError;

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

/// A JSON body read after authorization (so that a caller without the right
/// learns nothing from how a body is refused); an empty body is `null`.
fn json_body(bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(bytes).map_err(|_| ApiError::bad_request("malformed JSON body"))
}
