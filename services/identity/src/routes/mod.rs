//! identity's HTTP surface.

mod api_keys;
mod audit;
pub mod auth;
mod internal;
mod members;
mod profile;

use actix_web::web;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/auth/request-link", web::post().to(auth::request_link))
        .route("/v1/auth/verify", web::post().to(auth::verify))
        .route("/v1/auth/me", web::get().to(auth::me))
        .route("/v1/auth/me", web::patch().to(auth::patch_me))
        .route("/v1/auth/logout", web::post().to(auth::logout))
        .route("/v1/auth/sessions", web::get().to(auth::list_sessions))
        .route(
            "/v1/auth/sessions/{id}",
            web::delete().to(auth::revoke_session),
        )
        .route("/v1/profile", web::get().to(profile::get))
        .route("/v1/profile", web::patch().to(profile::patch))
        .route("/v1/audit/me", web::get().to(audit::mine))
        .route(
            "/v1/organizations/{id}/members",
            web::get().to(members::list),
        )
        .route(
            "/v1/organizations/{id}/members",
            web::post().to(members::add),
        )
        .route(
            "/v1/organizations/{id}/members/{user_id}",
            web::delete().to(members::remove),
        )
        .route(
            "/v1/organizations/{id}/api-keys",
            web::get().to(api_keys::list),
        )
        .route(
            "/v1/organizations/{id}/api-keys",
            web::post().to(api_keys::create),
        )
        .route(
            "/v1/organizations/{id}/api-keys/{key_id}",
            web::delete().to(api_keys::revoke),
        );
    // Calling services only (`/internal/...`).
    service_kit::assertion::internal(cfg, |c| {
        c.route(
            "/v1/organizations/{id}/owner",
            web::post().to(internal::creator_owner),
        )
        .route("/v1/users/timezones", web::post().to(internal::timezones));
    });
}

pub use auth::{CREDENTIAL_EXPIRES_HEADER, CREDENTIAL_ID_HEADER, CREDENTIAL_KIND_HEADER};
