//! identity's HTTP surface.

mod audit;
pub mod auth;
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
        .route("/v1/audit/me", web::get().to(audit::mine));
}

pub use auth::{CREDENTIAL_EXPIRES_HEADER, CREDENTIAL_ID_HEADER, CREDENTIAL_KIND_HEADER};
