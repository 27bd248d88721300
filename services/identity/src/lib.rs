//! identity: users, magic links, sessions, memberships, profile, audit history
//! and rate limits. Owns the Postgres schema `identity`.
//!
//! One constructor, [`build`], takes settings and returns a bound,
//! running server: the binary, the one-process dev stack and tests-e2e all use it.

mod account;
mod admin_users;
mod api_keys;
mod audit;
mod fields;
mod invites;
pub mod mail;
mod memberships;
mod mfa;
mod oauth;
mod oauth_clients;
mod oidc_keys;
mod org_states;
mod passkeys;
mod ratelimit;
mod refreshes;
mod resolve;
mod routes;
mod sessions;
pub mod settings;
mod staff;
mod state;
pub mod sweep;
pub mod tokens;
mod users;

pub use routes::{
    configure, CREDENTIAL_EXPIRES_HEADER, CREDENTIAL_ID_HEADER, CREDENTIAL_KIND_HEADER,
};
pub use settings::Settings;

use actix_web::web;
use event_contracts::{
    AuditRecorded, CredentialRevoked, Event, IdentityChanged, MembershipChanged, OrgAccessChanged,
    OrgCreated, OrgStatusChanged, UserDeleted,
};
use service_kit::{
    db, nats,
    server::{Foundation, Parts},
};
use sqlx::migrate::Migrator;
use std::{collections::HashSet, time::Duration};

pub const SCHEMA: &str = "identity";
/// This service's name in assertions (their audience).
pub const SERVICE: &str = hub_domain::ServiceName::Identity.as_str();
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/identity");

/// The running service (port, server, background tasks).
pub use service_kit::server::Running as Application;

/// Apply identity's migrations and return (the `migrate` subcommand).
pub async fn migrate(settings: &Settings) -> anyhow::Result<()> {
    db::prepare(&settings.database, SCHEMA, "identity-migrate", &MIGRATOR).await?;
    Ok(())
}

/// Config in, running server out: migrate, connect, start consumers and jobs, serve.
pub async fn build(settings: Settings, rt: service_kit::Runtime) -> anyhow::Result<Application> {
    // Before anything connects: a dev-only setting in production stops here.
    settings.auth.check(rt.dev)?;
    let mut f = Foundation::start(parts(&settings), &rt).await?;
    settings.invites.check()?;
    settings.mfa.check()?;
    settings.oidc.check()?;
    let passkeys = passkeys::RelyingParty::new(&settings.passkeys)?;
    let mailer = mail::Mailer::from_settings(
        &settings.mail,
        &settings.sealing,
        settings.auth.magic_link_ttl_secs,
        &settings.invites,
    )?;
    let sealer = mfa_sealer(&settings)?;
    if mailer.is_none() && !settings.auth.echo_dev_token {
        tracing::error!(
            "identity.mail.smtp_url is not set: sign-in links are not mailed and no one can \
             sign in (request-link still answers 200)"
        );
    }
    let (refreshes, refresh_tasks) = refreshes::Refreshes::spawn(
        f.pool.clone(),
        settings.oidc.refresh_writers,
        settings.oidc.refresh_batch,
        rt.cancel.clone(),
        f.metrics.commits(),
    );
    f.tasks.extend(refresh_tasks);
    let state = web::Data::new(app_state(
        &settings,
        &f,
        &rt,
        mailer.clone(),
        sealer,
        refreshes,
        passkeys,
    ));
    f.tasks.push(consume_audit(&settings, &f, &rt));
    f.tasks
        .push(consume_org_created(&settings, &f, &state, &rt));
    f.tasks.push(consume_org_status(&settings, &f, &state, &rt));
    if let Some(m) = mailer {
        f.tasks
            .push(mail::spawn(m, f.pool.clone(), rt.cancel.clone()));
    }
    if let Some(sealer) = &state.sealer {
        f.tasks.push(oidc_keys::spawn(
            f.pool.clone(),
            sealer.clone(),
            rt.clock.clone(),
            settings.oidc.clone(),
            rt.cancel.clone(),
        ));
    }
    f.tasks.push(sweep::spawn(
        f.pool.clone(),
        settings.jobs.clone(),
        rt.cancel.clone(),
    ));
    f.serve(&settings.http, state, configure)
}

/// What the kit's foundation (database, NATS, relay, assertions) needs.
fn parts(settings: &Settings) -> Parts<'_> {
    Parts {
        name: "identity",
        audience: SERVICE,
        schema: SCHEMA,
        migrator: &MIGRATOR,
        database: &settings.database,
        nats: &settings.nats,
        assertion: &settings.assertion,
        relay: settings.jobs.relay(),
    }
}

/// TOTP secrets are sealed: without a key MFA cannot be enrolled (503).
fn mfa_sealer(settings: &Settings) -> anyhow::Result<Option<service_kit::sealed::Sealer>> {
    if settings.sealing.keys.is_empty() {
        tracing::warn!("identity.sealing.keys is not set: MFA cannot be enrolled");
        return Ok(None);
    }
    Ok(Some(service_kit::sealed::Sealer::new(
        &settings.sealing.keys,
    )?))
}

fn app_state(
    settings: &Settings,
    f: &Foundation,
    rt: &service_kit::Runtime,
    mailer: Option<mail::Mailer>,
    sealer: Option<service_kit::sealed::Sealer>,
    refreshes: refreshes::Refreshes,
    passkeys: passkeys::RelyingParty,
) -> state::AppState {
    let staff: HashSet<String> = settings
        .auth
        .staff_emails
        .iter()
        .map(|e| e.trim().to_lowercase())
        .collect();
    state::AppState {
        pool: f.pool.clone(),
        outbox: f.outbox.clone(),
        naming: f.naming.clone(),
        auth: settings.auth.clone(),
        staff,
        clock: rt.clock.clone(),
        mailer,
        invites: settings.invites.clone(),
        mfa: settings.mfa.clone(),
        oidc: settings.oidc.clone(),
        oidc_keys: Default::default(),
        sealer,
        clients: Default::default(),
        refreshes,
        passkeys,
    }
}

/// Every service's audit events, stored.
fn consume_audit(
    settings: &Settings,
    f: &Foundation,
    rt: &service_kit::Runtime,
) -> tokio::task::JoinHandle<()> {
    let pool = f.pool.clone();
    nats::spawn_batch_consumer::<AuditRecorded, _, _>(
        f.js.clone(),
        settings.nats.clone(),
        AUDIT_CONSUMER,
        256,
        Duration::from_millis(20),
        rt.cancel.clone(),
        move |envs| {
            let pool = pool.clone();
            async move { audit::store_events(&pool, envs).await }
        },
    )
}

/// New organizations: their first owner.
fn consume_org_created(
    settings: &Settings,
    f: &Foundation,
    state: &web::Data<state::AppState>,
    rt: &service_kit::Runtime,
) -> tokio::task::JoinHandle<()> {
    let state = state.clone();
    nats::spawn_consumer::<OrgCreated, _, _>(
        f.js.clone(),
        settings.nats.clone(),
        ORG_CREATED_CONSUMER,
        rt.cancel.clone(),
        move |env| {
            let state = state.clone();
            async move { memberships::on_org_created(&state, env).await }
        },
    )
}

/// Organizations' statuses, for the identities it resolves.
fn consume_org_status(
    settings: &Settings,
    f: &Foundation,
    state: &web::Data<state::AppState>,
    rt: &service_kit::Runtime,
) -> tokio::task::JoinHandle<()> {
    let state = state.clone();
    nats::spawn_consumer::<OrgStatusChanged, _, _>(
        f.js.clone(),
        settings.nats.clone(),
        ORG_STATUS_CONSUMER,
        rt.cancel.clone(),
        move |env| {
            let state = state.clone();
            async move { org_states::on_status_changed(&state, env).await.map(drop) }
        },
    )
}

/// Stores every service's audit events.
const AUDIT_CONSUMER: nats::Durable = nats::Durable::of::<AuditRecorded>("identity-audit");
/// Makes the first owner of a new organization (the guarantee behind
/// org-billing's direct call).
const ORG_CREATED_CONSUMER: nats::Durable = nats::Durable::of::<OrgCreated>("identity-org-created");
/// Puts organizations' statuses (suspension) in the identities it resolves.
const ORG_STATUS_CONSUMER: nats::Durable =
    nats::Durable::of::<OrgStatusChanged>("identity-org-status");

/// identity, described once: its binary, the one-process stack and the test
/// harness start it from this (see `service_kit::service`).
pub struct Identity;

impl service_kit::service::Service for Identity {
    const AUDIENCE: &'static str = SERVICE;
    const TARGET: &'static str = module_path!();
    const SCHEMA: &'static str = SCHEMA;
    const EMITS: &'static [&'static str] = &[
        AuditRecorded::SUBJECT,
        IdentityChanged::SUBJECT,
        UserDeleted::SUBJECT,
        CredentialRevoked::SUBJECT,
        MembershipChanged::SUBJECT,
        OrgAccessChanged::SUBJECT,
    ];
    const CONSUMES: &'static [nats::Durable] =
        &[AUDIT_CONSUMER, ORG_CREATED_CONSUMER, ORG_STATUS_CONSUMER];
    type Settings = Settings;

    async fn migrate(s: &Settings) -> anyhow::Result<()> {
        migrate(s).await
    }

    async fn build(
        s: Settings,
        rt: service_kit::Runtime,
    ) -> anyhow::Result<service_kit::server::Running> {
        build(s, rt).await
    }
}
