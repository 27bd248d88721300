//! console: the customer panel and the staff control tower, rendered on the
//! server. It talks to the hub only through the gateway's public API, with
//! the person's session as the bearer, as any product does: it has no
//! database and calls no internal route, so everything a page does can be
//! done through the API.
//!
//! Every answer carries a strict Content-Security-Policy (no inline script,
//! no framing); the hub session lives in a sealed HttpOnly cookie
//! ([`session`]); every form carries the visitor's form token.
//!
//! Passkeys (WebAuthn): the one script, [`PASSKEYS_JS`] (served from here,
//! so `script-src 'self'` holds), runs the browser's ceremonies on the
//! security page, the sign-in page (a button, and the email field's
//! autofill) and the second step; the console carries the options and the
//! credentials between the page and identity (`pages::passkeys`).

pub mod api;
pub mod format;
pub mod i18n;
mod pages;
pub mod session;
pub mod settings;
pub mod timing;

pub use settings::Settings;

use actix_web::{
    dev::Server,
    middleware::{from_fn, DefaultHeaders},
    web, App, HttpServer,
};
use service_kit::{http, sealed::Sealer};
use std::net::TcpListener;

/// The stylesheet, served at /assets/console.css.
pub const CSS: &str = include_str!("../assets/console.css");

/// The passkey ceremonies' script (WebAuthn in the browser), served at
/// /assets/passkeys.js to the pages that offer passkeys: the security page,
/// the sign-in page and the second step. Without it (or without WebAuthn in
/// the browser) those pages work as before, without passkeys.
pub const PASSKEYS_JS: &str = include_str!("../assets/passkeys.js");

/// The Content-Security-Policy of every answer: nothing inline, nothing from
/// elsewhere, never in a frame. (No `form-action`: Chrome applies it to the
/// redirects after a form, and signing in to a product ends in a redirect to
/// the product.)
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The invoice preview's policy (sandboxed, its inline styles only).
pub fn pages_preview_csp() -> &'static str {
    pages::billing::PREVIEW_CSP
}

/// What the pages share.
pub struct Console {
    pub api: api::Api,
    pub sealer: Sealer,
    pub secure_cookies: bool,
    pub cookie_max_age_secs: i64,
    pub default_lang: i18n::Lang,
}

pub struct Application {
    port: u16,
    metrics_port: u16,
    servers: Vec<Server>,
}

fn routes(cfg: &mut web::ServiceConfig) {
    use pages::{
        account, assistant, auth, billing, distributors, invites, oauth, org_admin, org_sheets,
        orgs, passkeys, servers, staff, tower, webhooks,
    };
    use service_kit::methods::{get, post};
    cfg.route("/", get().to(pages::home))
        .route("/assets/console.css", get().to(pages::stylesheet))
        .route("/assets/passkeys.js", get().to(pages::passkeys_script))
        .route("/lang/{code}", get().to(pages::language))
        .route("/sign-in", get().to(auth::page))
        .route("/sign-in", post().to(auth::request_link))
        .route("/sign-in/verify", post().to(auth::verify))
        .route("/sign-in/mfa", get().to(auth::mfa_page))
        .route("/sign-in/mfa", post().to(auth::mfa_verify))
        .route(
            "/sign-in/passkey/options",
            post().to(passkeys::sign_in_options),
        )
        .route("/sign-in/passkey", post().to(passkeys::sign_in))
        .route(
            "/sign-in/mfa/passkey/options",
            post().to(passkeys::mfa_options),
        )
        .route("/sign-in/mfa/passkey", post().to(passkeys::mfa))
        .route("/sign-out", post().to(auth::sign_out))
        .route("/orgs", get().to(orgs::list))
        .route("/orgs", post().to(orgs::create))
        .route("/orgs/{id}", get().to(orgs::detail))
        .route("/orgs/{id}/members", get().to(org_admin::members))
        .route("/orgs/{id}/invites", post().to(org_admin::invite))
        .route(
            "/orgs/{id}/invites/{invite}/revoke",
            post().to(org_admin::revoke_invite),
        )
        .route("/orgs/{id}/api-keys", get().to(org_admin::keys))
        .route("/orgs/{id}/api-keys", post().to(org_admin::create_key))
        .route(
            "/orgs/{id}/api-keys/{key}/revoke",
            post().to(org_admin::revoke_key),
        )
        .route("/orgs/{id}/kyc", get().to(org_admin::kyc_view))
        .route("/orgs/{id}/kyc", post().to(org_admin::kyc_submit))
        .route("/orgs/{id}/wallet", get().to(org_admin::wallet))
        .route("/orgs/{id}/billing", get().to(billing::billing))
        .route("/orgs/{id}/projects", get().to(org_sheets::projects))
        .route("/orgs/{id}/projects", post().to(org_sheets::add_project))
        .route(
            "/orgs/{id}/projects/{project}",
            post().to(org_sheets::rename_project),
        )
        .route(
            "/orgs/{id}/projects/{project}/delete",
            post().to(org_sheets::delete_project),
        )
        .route("/orgs/{id}/assets", get().to(org_sheets::assets))
        .route("/orgs/{id}/assets", post().to(org_sheets::add_asset))
        .route(
            "/orgs/{id}/assets/{asset}/delete",
            post().to(org_sheets::delete_asset),
        )
        .route("/orgs/{id}/ai", get().to(org_sheets::ai))
        .route("/orgs/{id}/ai/{user}", post().to(org_sheets::save_ai))
        .route("/orgs/{id}/claims", get().to(org_sheets::claims))
        .route("/orgs/{id}/claims", post().to(org_sheets::add_claim))
        .route("/orgs/{id}/servers", get().to(servers::servers))
        .route("/orgs/{id}/servers", post().to(servers::order))
        .route("/orgs/{id}/servers/{server}", get().to(servers::server))
        .route(
            "/orgs/{id}/servers/{server}/{action}",
            post().to(servers::act),
        )
        .route("/orgs/{id}/webhooks", get().to(webhooks::list))
        .route("/orgs/{id}/webhooks", post().to(webhooks::add))
        .route(
            "/orgs/{id}/webhooks/{endpoint}",
            get().to(webhooks::deliveries),
        )
        .route(
            "/orgs/{id}/webhooks/{endpoint}/remove",
            post().to(webhooks::remove),
        )
        .route(
            "/orgs/{id}/webhooks/{endpoint}/deliveries/{delivery}/retry",
            post().to(webhooks::retry),
        )
        .route(
            "/orgs/{id}/invoices/{invoice}/preview",
            get().to(billing::preview),
        )
        .route("/account", get().to(account::profile))
        .route("/account", post().to(account::save_profile))
        .route("/account/sessions", get().to(account::sessions))
        .route(
            "/account/sessions/{id}/revoke",
            post().to(account::revoke_session),
        )
        .route("/account/memory", get().to(account::memory))
        .route("/account/memory", post().to(account::save_memory))
        .route("/account/security", get().to(account::security))
        .route("/account/security/enroll", post().to(account::enroll))
        .route("/account/security/confirm", post().to(account::confirm))
        .route("/account/security/disable", post().to(account::disable))
        .route(
            "/account/passkeys/options",
            post().to(passkeys::register_options),
        )
        .route("/account/passkeys", post().to(passkeys::register))
        .route("/account/passkeys/{id}", post().to(account::rename_passkey))
        .route(
            "/account/passkeys/{id}/delete",
            post().to(account::delete_passkey),
        )
        .route("/assistant", get().to(assistant::view))
        .route("/assistant", post().to(assistant::ask))
        .route("/assistant/confirm", post().to(assistant::answer))
        .route("/staff", get().to(staff::home))
        .route("/staff/kyc", get().to(staff::kyc_queue))
        .route("/staff/kyc/{id}", post().to(staff::kyc_decide))
        .route("/staff/claims", get().to(tower::claims))
        .route(
            "/staff/claims/{id}/{what:approve|reject}",
            post().to(tower::decide_claim),
        )
        .route("/staff/orgs/{id}", get().to(tower::org))
        .route(
            "/staff/orgs/{id}/{what:charges|payments|issue/proforma|issue/invoice}",
            post().to(tower::org_act),
        )
        .route(
            "/staff/orgs/{id}/{kind:charges|invoices}/{item}/{what}",
            post().to(tower::org_item_act),
        )
        .route("/staff/billing-runs", get().to(tower::runs))
        .route("/staff/billing-runs", post().to(tower::start_run))
        .route("/staff/billing-runs/{id}", get().to(tower::run))
        .route("/staff/catalog", get().to(tower::catalog))
        .route(
            "/staff/catalog/{what:skus|maintenance|skus/[^/]+}",
            post().to(tower::catalog_act),
        )
        .route("/staff/kb", get().to(tower::kb))
        .route(
            "/staff/kb-new/{what:articles|categories}",
            post().to(tower::kb_add),
        )
        .route("/staff/kb/{id}", get().to(tower::article))
        .route(
            "/staff/kb/{id}/{what:save|delete}",
            post().to(tower::article_act),
        )
        .route("/staff/proposals", get().to(tower::proposals))
        .route("/staff/proposals/{id}", post().to(tower::proposal_set))
        .route("/staff/model", get().to(tower::model))
        .route("/staff/model", post().to(tower::set_model))
        .route("/staff/users/{id}", get().to(tower::user))
        .route("/staff/clients/{id}", get().to(tower::client))
        .route(
            "/staff/clients/{id}/{what:save|rotate}",
            post().to(tower::client_act),
        )
        .route("/distributors", get().to(distributors::entities))
        .route("/distributors", post().to(distributors::create))
        .route("/distributors/{id}", get().to(distributors::entity))
        .route(
            "/distributors/{id}/billing",
            get().to(distributors::billing),
        )
        .route(
            "/distributors/{id}/{what:edit|observers|observers/[^/]+/remove}",
            post().to(distributors::entity_act),
        )
        .route("/staff/orgs", get().to(staff::orgs))
        .route("/staff/orgs/{id}/suspend", post().to(staff::suspend))
        .route("/staff/orgs/{id}/reactivate", post().to(staff::reactivate))
        .route("/staff/users", get().to(staff::users))
        .route("/staff/users/{id}/disable", post().to(staff::disable_user))
        .route("/staff/users/{id}/enable", post().to(staff::enable_user))
        .route("/staff/users/{id}/sessions", post().to(staff::end_sessions))
        .route("/staff/clients", get().to(staff::clients))
        .route("/staff/clients", post().to(staff::register_client))
        .route(
            "/staff/clients/{id}/retire",
            post().to(staff::retire_client),
        )
        .route("/oauth/continue", get().to(oauth::continue_page))
        .route("/oauth/continue", post().to(oauth::decide))
        .route("/device", get().to(oauth::device))
        .route("/device", post().to(oauth::device_lookup))
        .route("/device/answer", post().to(oauth::device_answer))
        .route("/invites/accept", get().to(invites::page))
        .route("/invites/accept", post().to(invites::accept));
}

/// The headers of every answer.
fn security_headers(hsts: bool) -> DefaultHeaders {
    let mut h = DefaultHeaders::new()
        .add(("content-security-policy", CSP))
        .add(("x-content-type-options", "nosniff"))
        .add(("x-frame-options", "DENY"))
        // A mailed link's token never leaves in a Referer.
        .add(("referrer-policy", "no-referrer"))
        .add(("cross-origin-opener-policy", "same-origin"))
        .add((
            "permissions-policy",
            "camera=(), microphone=(), geolocation=()",
        ));
    if hsts {
        h = h.add((
            "strict-transport-security",
            "max-age=63072000; includeSubDomains",
        ));
    }
    h
}

impl Application {
    pub async fn build(
        settings: Settings,
        rt: service_kit::Runtime,
    ) -> anyhow::Result<Application> {
        anyhow::ensure!(
            !settings.console.cookie_keys.is_empty(),
            "console.cookie_keys is required (CONSOLE__CONSOLE__COOKIE_KEYS: \"<id>:<base64 of 32 bytes>\")"
        );
        service_kit::tls::install_provider();
        let console = web::Data::new(Console {
            api: api::Api::new(&settings)?,
            sealer: Sealer::new(&settings.console.cookie_keys)?,
            secure_cookies: settings.console.secure_cookies,
            cookie_max_age_secs: settings.console.cookie_max_age_secs,
            default_lang: settings.console.default_locale,
        });
        if !settings.console.secure_cookies && !rt.dev {
            tracing::warn!(
                "console.secure_cookies is off: the session cookie may travel over plain HTTP"
            );
        }
        let metrics = service_kit::metrics::Metrics::new("console");
        let (metrics_port, metrics_server) = service_kit::metrics::serve(
            TcpListener::bind(settings.http.metrics_addr())?,
            metrics.clone(),
            rt.cancel.clone(),
        )?;
        let metrics = web::Data::new(metrics);
        let listener = match rt.listener.take() {
            Some(l) => l,
            None => TcpListener::bind(settings.http.addr())?,
        };
        let port = listener.local_addr()?.port();
        let hsts = settings.console.hsts;
        let max_body = settings.http.max_body_bytes;
        let mut server = HttpServer::new(move || {
            App::new()
                .wrap(from_fn(timing::server_timing))
                .wrap(security_headers(hsts))
                .wrap(from_fn(http::request_span))
                .app_data(console.clone())
                .app_data(metrics.clone())
                .app_data(web::FormConfig::default().limit(max_body))
                // The passkey ceremonies' JSON (a credential is a few KB).
                .app_data(http::json_config(max_body))
                .configure(|c| http::health_routes(c, http::Readiness::default()))
                .configure(routes)
                .default_service(web::to(pages::not_found))
        })
        .listen(listener)?
        .disable_signals()
        .shutdown_timeout(10);
        if settings.http.workers > 0 {
            server = server.workers(settings.http.workers);
        }
        let server = server.run();
        service_kit::shutdown::stop_server_on(rt.cancel.clone(), server.handle());
        tracing::info!(port, metrics_port, "console listening");
        Ok(Application {
            port,
            metrics_port,
            servers: vec![server, metrics_server],
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn metrics_port(&self) -> u16 {
        self.metrics_port
    }

    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        futures::future::try_join_all(self.servers).await?;
        Ok(())
    }
}
