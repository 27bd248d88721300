//! identity's HTTP surface.

mod account;
mod admin_users;
mod api_keys;
mod audit;
pub mod auth;
mod authorize;
mod internal;
mod invites;
mod members;
mod mfa;
mod oauth;
mod oauth_clients;
mod oidc;
mod org_audit;
mod passkeys;
mod profile;
mod staff;

use actix_web::web;
use service_kit::methods;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route(
        "/v1/auth/request-link",
        methods::post().to(auth::request_link),
    )
    .route("/v1/auth/verify", methods::post().to(auth::verify))
    .route("/.well-known/jwks.json", methods::get().to(oidc::jwks))
    .route(
        "/.well-known/openid-configuration",
        methods::get().to(oidc::discovery),
    )
    .route("/oauth/token", methods::post().to(oauth::token))
    .route("/oauth/introspect", methods::post().to(oauth::introspect))
    .route("/oauth/revoke", methods::post().to(oauth::revoke))
    .route(
        "/oauth/device_authorization",
        methods::post().to(oauth::device_authorization),
    )
    .route("/oauth/authorize", methods::get().to(authorize::authorize))
    .route("/oauth/authorize", methods::post().to(authorize::authorize))
    .route("/oauth/userinfo", methods::get().to(authorize::userinfo))
    .route("/oauth/userinfo", methods::post().to(authorize::userinfo))
    .route("/oauth/logout", methods::get().to(authorize::logout))
    .route("/oauth/logout", methods::post().to(authorize::logout))
    .route(
        "/v1/oauth/authorization",
        methods::post().to(authorize::show),
    )
    .route(
        "/v1/oauth/authorization/accept",
        methods::post().to(authorize::accept),
    )
    .route(
        "/v1/oauth/authorization/reject",
        methods::post().to(authorize::reject),
    )
    .route(
        "/v1/oauth/device",
        methods::post().to(authorize::show_device),
    )
    .route(
        "/v1/oauth/device/accept",
        methods::post().to(authorize::accept_device),
    )
    .route(
        "/v1/oauth/device/reject",
        methods::post().to(authorize::reject_device),
    )
    .route("/v1/auth/me", methods::get().to(auth::me))
    .route("/v1/auth/me", methods::patch().to(auth::patch_me))
    .route("/v1/auth/me", methods::delete().to(account::delete))
    .route(
        service_kit::export::PATH,
        methods::get().to(account::export),
    )
    .route("/v1/auth/logout", methods::post().to(auth::logout))
    .route("/v1/auth/sessions", methods::get().to(auth::list_sessions))
    .route(
        "/v1/auth/sessions/{id}",
        methods::delete().to(auth::revoke_session),
    )
    .route("/v1/auth/mfa", methods::get().to(mfa::status))
    .route("/v1/auth/mfa/enroll", methods::post().to(mfa::enroll))
    .route("/v1/auth/mfa/confirm", methods::post().to(mfa::confirm))
    .route("/v1/auth/mfa/disable", methods::post().to(mfa::disable))
    .route("/v1/auth/mfa/verify", methods::post().to(mfa::verify))
    .route(
        "/v1/auth/passkeys/register/options",
        methods::post().to(passkeys::register_options),
    )
    .route(
        "/v1/auth/passkeys/register",
        methods::post().to(passkeys::register),
    )
    .route("/v1/auth/passkeys", methods::get().to(passkeys::list))
    // `{id}` is hex and dashes (a uuid): `login` and `register` are not ids,
    // so their other methods answer 405, not a path error.
    .route(
        "/v1/auth/passkeys/{id:[0-9a-fA-F-]+}",
        methods::patch().to(passkeys::rename),
    )
    .route(
        "/v1/auth/passkeys/{id:[0-9a-fA-F-]+}",
        methods::delete().to(passkeys::delete),
    )
    .route(
        "/v1/auth/passkeys/login/options",
        methods::post().to(passkeys::login_options),
    )
    .route(
        "/v1/auth/passkeys/login",
        methods::post().to(passkeys::login),
    )
    .route("/v1/profile", methods::get().to(profile::get))
    .route("/v1/profile", methods::patch().to(profile::patch))
    .route("/v1/audit/me", methods::get().to(audit::mine))
    .route("/v1/admin/users", methods::get().to(admin_users::search))
    .route("/v1/admin/users/{id}", methods::get().to(admin_users::get))
    .route(
        "/v1/admin/users/{id}/disable",
        methods::post().to(admin_users::disable),
    )
    .route(
        "/v1/admin/users/{id}/enable",
        methods::post().to(admin_users::enable),
    )
    .route(
        "/v1/admin/users/{id}/sessions/revoke",
        methods::post().to(admin_users::revoke_sessions),
    )
    .route(
        "/v1/admin/oauth-clients",
        methods::get().to(oauth_clients::list),
    )
    .route(
        "/v1/admin/oauth-clients",
        methods::post().to(oauth_clients::create),
    )
    .route(
        "/v1/admin/oauth-clients/{id}",
        methods::patch().to(oauth_clients::update),
    )
    .route(
        "/v1/admin/oauth-clients/{id}",
        methods::delete().to(oauth_clients::retire),
    )
    .route("/v1/admin/staff", methods::get().to(staff::list))
    .route("/v1/admin/staff/{user_id}", methods::put().to(staff::grant))
    .route(
        "/v1/admin/staff/{user_id}",
        methods::delete().to(staff::revoke),
    )
    .route(
        "/v1/organizations/{id}/audit",
        methods::get().to(org_audit::list),
    )
    .route(
        "/v1/organizations/{id}/audit/export",
        methods::get().to(org_audit::export),
    )
    .route(
        "/v1/organizations/{id}/members",
        methods::get().to(members::list),
    )
    .route(
        "/v1/organizations/{id}/members",
        methods::post().to(members::add),
    )
    .route(
        "/v1/organizations/{id}/members/{user_id}",
        methods::delete().to(members::remove),
    )
    .route(
        "/v1/organizations/{id}/invites",
        methods::get().to(invites::list),
    )
    .route(
        "/v1/organizations/{id}/invites",
        methods::post().to(invites::create),
    )
    .route(
        "/v1/organizations/{id}/invites/{invite_id}",
        methods::delete().to(invites::revoke),
    )
    .route("/v1/invites/accept", methods::post().to(invites::accept))
    .route(
        "/v1/organizations/{id}/api-keys",
        methods::get().to(api_keys::list),
    )
    .route(
        "/v1/organizations/{id}/api-keys",
        methods::post().to(api_keys::create),
    )
    .route(
        "/v1/organizations/{id}/api-keys/{key_id}",
        methods::delete().to(api_keys::revoke),
    );
    // Calling services only (`/internal/...`).
    service_kit::assertion::internal(cfg, |c| {
        c.route(
            "/v1/organizations/{id}/owner",
            methods::post().to(internal::creator_owner),
        )
        .route(
            "/v1/organizations/{id}/status",
            methods::post().to(internal::org_status),
        )
        .route("/v1/users", methods::post().to(internal::user_by_email))
        .route(
            "/v1/users/timezones",
            methods::post().to(internal::timezones),
        );
    });
}

pub use auth::{CREDENTIAL_EXPIRES_HEADER, CREDENTIAL_ID_HEADER, CREDENTIAL_KIND_HEADER};
