//! kyc: identity verification submissions, staff review, the legal identity
//! lock and data minimization. Owns the Postgres schema `kyc`.
//!
//! kyc decides each organization's KYC state; org-billing shows it (pushed
//! after every change, pulled on `core.v1.kyc.changed`, see [`orgs`]). Raw
//! payloads are sealed with AES-256-GCM and redacted 180 days after their
//! decision ([`sweep`]).

pub mod orgs;
pub mod payload;
mod routes;
pub mod settings;
mod state;
mod store;
mod submission;
pub mod sweep;

pub use routes::configure;
pub use settings::Settings;

use actix_web::web;
use service_kit::{
    db,
    peer::Peer,
    sealed::Sealer,
    server::{Foundation, Parts},
};
use sqlx::{migrate::Migrator, PgPool};
use std::time::Duration;

pub const SCHEMA: &str = "kyc";
/// This service's name in assertions (their audience and, when it calls, issuer).
pub const SERVICE: &str = hub_domain::ServiceName::Kyc.as_str();
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/kyc");

/// The running service (port, server, background tasks).
pub use service_kit::server::Running as Application;

/// Apply kyc's migrations and return (the `migrate` subcommand).
pub async fn migrate(settings: &Settings) -> anyhow::Result<()> {
    db::prepare(&settings.database, SCHEMA, "kyc-migrate", &MIGRATOR).await?;
    Ok(())
}

/// Config in, running server out: migrate, connect, start the relay and the
/// sweep, serve.
pub async fn build(settings: Settings, rt: service_kit::Runtime) -> anyhow::Result<Application> {
    let sealer = Sealer::new(&settings.sealing.keys)?;
    let mut f = Foundation::start(parts(&settings), &rt)
        .await?
        .counting(store::overview);
    let state = web::Data::new(app_state(&settings, &f, &rt, sealer)?);
    f.tasks.push(spawn_sweep(&settings, &f.pool, &rt));
    f.serve(&settings.http, state, configure)
}

/// What the kit's foundation (database, NATS, relay, assertions) needs.
fn parts(settings: &Settings) -> Parts<'_> {
    Parts {
        name: "kyc",
        audience: SERVICE,
        schema: SCHEMA,
        migrator: &MIGRATOR,
        database: &settings.database,
        nats: &settings.nats,
        assertion: &settings.assertion,
        relay: settings.jobs.clone(),
    }
}

fn app_state(
    settings: &Settings,
    f: &Foundation,
    rt: &service_kit::Runtime,
    sealer: Sealer,
) -> anyhow::Result<state::AppState> {
    Ok(state::AppState {
        pool: f.pool.clone(),
        outbox: f.outbox.clone(),
        naming: settings.nats.naming(),
        sealer,
        org_billing: Peer::new(SERVICE, "org_billing", &settings.org_billing, &settings.tls)?,
        clock: rt.clock.clone(),
    })
}

/// The retention sweep: payloads redacted `retention.purge_after_days`
/// after their decision, every `retention.sweep_interval_secs`.
fn spawn_sweep(
    settings: &Settings,
    pool: &PgPool,
    rt: &service_kit::Runtime,
) -> tokio::task::JoinHandle<()> {
    let (pool, clock, days) = (
        pool.clone(),
        rt.clock.clone(),
        settings.retention.purge_after_days,
    );
    service_kit::shutdown::spawn_periodic(
        "kyc-sweep",
        Duration::from_secs(settings.retention.sweep_interval_secs),
        rt.cancel.clone(),
        move || {
            let (pool, clock) = (pool.clone(), clock.clone());
            async move {
                sweep::run_once(&pool, &clock, days)
                    .await
                    .map(|ids| ids.len() as u64)
            }
        },
    )
}

/// kyc, described once: its binary, the one-process stack and the test
/// harness start it from this (see `service_kit::service`).
pub struct Kyc;

impl service_kit::service::Service for Kyc {
    const AUDIENCE: &'static str = SERVICE;
    const TARGET: &'static str = module_path!();
    const SCHEMA: &'static str = SCHEMA;
    const EMITS: &'static [&'static str] = &[
        <event_contracts::AuditRecorded as event_contracts::Event>::SUBJECT,
        <event_contracts::KycChanged as event_contracts::Event>::SUBJECT,
    ];
    const CALLS: &'static [(&'static str, &'static str)] =
        &[(hub_domain::ServiceName::OrgBilling.as_str(), "org_billing")];
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
