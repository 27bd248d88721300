//! org-billing's HTTP surface: each area's routes, public and internal.

use crate::{assets, billing, distributors, kyc, ledger, members_ai, orgs, projects};
use actix_web::web;
use service_kit::methods;

/// Every route of the service, area by area.
pub fn configure(cfg: &mut web::ServiceConfig) {
    organizations(cfg);
    projects_and_assets(cfg);
    distributors(cfg);
    billing(cfg);
    billing_for_staff(cfg);
    internal(cfg);
}

/// Organizations, their wallet and AI tokens, and members' AI settings.
fn organizations(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/organizations", methods::get().to(orgs::list))
        .route(
            "/v1/admin/organizations",
            methods::get().to(orgs::search::search),
        )
        .route("/v1/organizations", methods::post().to(orgs::create))
        .route("/v1/organizations/{id}", methods::get().to(orgs::detail))
        .route(
            "/v1/organizations/{id}",
            methods::patch().to(orgs::update::update),
        )
        .route(
            "/v1/organizations/{id}/close",
            methods::post().to(orgs::close::close),
        )
        .route(
            "/v1/organizations/{id}/wallet",
            methods::get().to(ledger::wallet::get),
        )
        .route(
            "/v1/organizations/{id}/wallet/transactions",
            methods::get().to(ledger::wallet::transactions),
        )
        .route(
            "/v1/organizations/{id}/wallet/credit",
            methods::post().to(ledger::wallet::credit),
        )
        .route(
            "/v1/organizations/{id}/tokens",
            methods::get().to(ledger::tokens::get),
        )
        .route(
            "/v1/organizations/{id}/tokens/grant",
            methods::post().to(ledger::tokens::grant),
        )
        .route(
            "/v1/organizations/{id}/tokens/transactions",
            methods::get().to(ledger::usage_routes::transactions),
        )
        .route(
            "/v1/organizations/{id}/tokens/usage",
            methods::get().to(ledger::usage_routes::usage),
        )
        .route(
            "/v1/organizations/{id}/members/ai",
            methods::get().to(members_ai::list),
        )
        .route(
            "/v1/organizations/{id}/members/{user_id}/ai",
            methods::get().to(members_ai::get),
        )
        .route(
            "/v1/organizations/{id}/members/{user_id}/ai",
            methods::patch().to(members_ai::update),
        );
}

/// Projects and assets: members read, the admin roles write; staff suspend and reactivate organizations.
fn projects_and_assets(cfg: &mut web::ServiceConfig) {
    cfg.route(
        "/v1/organizations/{id}/projects",
        methods::get().to(projects::list),
    )
    .route(
        "/v1/organizations/{id}/projects",
        methods::post().to(projects::create),
    )
    .route("/v1/projects/{id}", methods::get().to(projects::get))
    .route("/v1/projects/{id}", methods::patch().to(projects::update))
    .route("/v1/projects/{id}", methods::delete().to(projects::delete))
    .route(
        "/v1/organizations/{id}/assets",
        methods::get().to(assets::list),
    )
    .route(
        "/v1/organizations/{id}/assets",
        methods::post().to(assets::create),
    )
    .route(
        "/v1/organizations/{id}/assets/{asset_id}",
        methods::patch().to(assets::update),
    )
    .route(
        "/v1/organizations/{id}/assets/{asset_id}",
        methods::delete().to(assets::delete),
    )
    .route(
        "/v1/admin/organizations/{id}/suspend",
        methods::post().to(orgs::status::suspend),
    )
    .route(
        "/v1/admin/organizations/{id}/reactivate",
        methods::post().to(orgs::status::reactivate),
    );
}

/// Distributor entities: staff writes, observers read their own.
fn distributors(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/distributors", methods::get().to(distributors::list))
        .route("/v1/distributors", methods::post().to(distributors::create))
        .route(
            "/v1/distributors/{id}",
            methods::get().to(distributors::detail),
        )
        .route(
            "/v1/distributors/{id}",
            methods::patch().to(distributors::update),
        )
        .route(
            "/v1/distributors/{id}/staff",
            methods::get().to(distributors::staff::staff_list),
        )
        .route(
            "/v1/distributors/{id}/staff",
            methods::post().to(distributors::staff::staff_add),
        )
        .route(
            "/v1/distributors/{id}/staff/{user_id}",
            methods::delete().to(distributors::staff::staff_remove),
        )
        .route(
            "/v1/distributors/{id}/organizations",
            methods::get().to(distributors::books::organizations),
        )
        .route(
            "/v1/distributors/{id}/report",
            methods::get().to(distributors::books::report),
        );
}

/// Billing records as members see them: finance reads and claims (billing/).
fn billing(cfg: &mut web::ServiceConfig) {
    cfg.route(
        "/v1/organizations/{id}/charges",
        methods::get().to(billing::charges::list),
    )
    .route(
        "/v1/organizations/{id}/invoices",
        methods::get().to(billing::documents::list),
    )
    .route(
        "/v1/organizations/{id}/invoices/{invoice_id}",
        methods::get().to(billing::documents::detail),
    )
    .route(
        "/v1/organizations/{id}/invoices/{invoice_id}/html",
        methods::get().to(billing::documents::html),
    )
    .route(
        "/v1/organizations/{id}/payments",
        methods::get().to(billing::payments::list),
    )
    .route(
        "/v1/organizations/{id}/payment-claims",
        methods::get().to(billing::claims::list),
    )
    .route(
        "/v1/organizations/{id}/payment-claims",
        methods::post().to(billing::claims::create),
    );
    // The distributor's view of its organizations' billing.
    cfg.route(
        "/v1/distributors/{id}/invoices",
        methods::get().to(distributors::books::invoices),
    )
    .route(
        "/v1/distributors/{id}/payments",
        methods::get().to(distributors::books::payments),
    );
}

/// Billing: what staff do (charges, documents, payments, claims, runs).
fn billing_for_staff(cfg: &mut web::ServiceConfig) {
    cfg.route(
        "/v1/admin/organizations/{id}/charges",
        methods::post().to(billing::charges::create),
    )
    .route(
        "/v1/admin/charges/{charge_id}/waive",
        methods::post().to(billing::charges::waive),
    )
    .route(
        "/v1/admin/organizations/{id}/proformas",
        methods::post().to(billing::documents::issue_proforma),
    )
    .route(
        "/v1/admin/organizations/{id}/invoices",
        methods::post().to(billing::documents::issue_invoice),
    )
    .route(
        "/v1/admin/invoices/{invoice_id}",
        methods::patch().to(billing::documents::update),
    )
    .route(
        "/v1/admin/invoices/{invoice_id}/convert",
        methods::post().to(billing::documents::convert),
    )
    .route(
        "/v1/admin/invoices/{invoice_id}/void",
        methods::post().to(billing::documents::void),
    )
    .route(
        "/v1/admin/invoices/{invoice_id}/pay-from-wallet",
        methods::post().to(billing::payments::pay_from_wallet),
    )
    .route(
        "/v1/admin/organizations/{id}/payments",
        methods::post().to(billing::payments::record),
    )
    .route(
        "/v1/admin/payment-claims",
        methods::get().to(billing::claims::queue),
    )
    .route(
        "/v1/admin/payment-claims/{claim_id}/approve",
        methods::post().to(billing::claims::approve),
    )
    .route(
        "/v1/admin/payment-claims/{claim_id}/reject",
        methods::post().to(billing::claims::reject),
    )
    .route(
        "/v1/admin/billing-runs",
        methods::post().to(billing::runs::start),
    )
    .route(
        "/v1/admin/billing-runs/{run_id}",
        methods::get().to(billing::runs::get),
    );
}

/// Calling services only (`/internal/...`).
fn internal(cfg: &mut web::ServiceConfig) {
    service_kit::assertion::internal(cfg, |c| {
        c.route(
            "/v1/organizations/{id}/tokens/spend",
            methods::post().to(ledger::tokens::spend),
        )
        .route(
            "/v1/organizations/{id}/ai-allowance",
            methods::get().to(members_ai::allowance),
        )
        .route("/v1/organizations/lookup", methods::get().to(orgs::lookup))
        .route(
            "/v1/organizations/{id}/profile",
            methods::get().to(orgs::profile),
        )
        .route(
            "/v1/organizations/{id}/kyc-state",
            methods::put().to(kyc::put_state),
        );
    });
}
