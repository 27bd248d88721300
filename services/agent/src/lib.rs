//! agent: the assistant. Owns the Postgres schema `agent`.
//!
//! `POST /v1/agent` answers with a model provider when one is configured and
//! reachable, else with the rule-based matcher ([`engine`], [`rules`]); both
//! use the same operations in the same tiers ([`tools`]): reads at once,
//! job-title and bio updates at once and audited, and create_org,
//! credit_wallet, grant_tokens and revoke_session only staged until their
//! owner confirms ([`staged`]). Every action goes through the owning service's
//! public route with the caller's own authority. Conversations
//! ([`conversations`]) and memory documents ([`memory`]) are kept here; the
//! user's activity arrives as audit events on NATS. The service also keeps
//! the knowledge base ([`kb`]: staff write it, anyone reads what is
//! published, the assistant answers from it) and platform proposals
//! ([`proposals`]).

pub mod audit;
pub mod billing;
pub mod conversations;
pub mod countries;
pub mod engine;
pub mod journal;
pub mod kb;
pub mod memory;
pub mod metrics;
pub mod model;
pub mod money;
pub mod ops;
pub mod overview;
pub mod proposals;
mod routes;
pub mod rules;
pub mod settings;
pub mod staged;
pub mod state;
pub mod store;
pub mod tools;

pub use routes::configure;
pub use settings::Settings;

use actix_web::web;
use event_contracts::{AuditRecorded, Event, UserDeleted};
use service_kit::{
    db, nats,
    peer::Peer,
    server::{Foundation, Parts},
};
use sqlx::migrate::Migrator;
use std::time::Duration;

pub const SCHEMA: &str = "agent";
/// This service's name in assertions (their audience and, when it calls, issuer).
pub const SERVICE: &str = hub_domain::ServiceName::Agent.as_str();
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/agent");

/// The running service (port, server, background tasks).
pub use service_kit::server::Running as Application;

/// Apply agent's migrations and return (the `migrate` subcommand).
pub async fn migrate(settings: &Settings) -> anyhow::Result<()> {
    db::prepare(&settings.database, SCHEMA, "agent-migrate", &MIGRATOR).await?;
    Ok(())
}

/// Config in, running server out: migrate, connect, consume activity, run
/// the nightly curation, serve.
pub async fn build(settings: Settings, rt: service_kit::Runtime) -> anyhow::Result<Application> {
    let mut f = Foundation::start(parts(&settings), &rt)
        .await?
        .counting(overview::count);
    let (journal, journal_tasks) = journal::Journal::spawn(
        f.pool.clone(),
        settings.agent.journal_writers,
        settings.agent.journal_batch,
        rt.cancel.clone(),
        f.metrics.commits(),
    );
    f.tasks.extend(journal_tasks);
    let state = web::Data::new(app_state(&settings, &f, &rt, journal)?);
    f.tasks.push(consume_activity(&settings, &f, &rt));
    f.tasks.push(consume_user_deleted(&settings, &f, &rt));
    f.tasks.push(spawn_curation(&settings, &state, &rt));
    f.serve(&settings.http, state, configure)
}

/// What the kit's foundation (database, NATS, relay, assertions) needs.
fn parts(settings: &Settings) -> Parts<'_> {
    Parts {
        name: "agent",
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
    journal: journal::Journal,
) -> anyhow::Result<state::AppState> {
    Ok(state::AppState {
        pool: f.pool.clone(),
        outbox: f.outbox.clone(),
        naming: settings.nats.naming(),
        journal,
        peers: peers(settings)?,
        model: settings.model.clone(),
        agent: settings.agent.clone(),
        curation: settings.curation.clone(),
        lookups: moka::sync::Cache::builder()
            .time_to_live(Duration::from_secs(settings.agent.lookup_cache_secs))
            .max_capacity(100_000)
            .build(),
        http: service_kit::tls::http_client(&settings.tls)?
            .connect_timeout(Duration::from_secs(3))
            .build()?,
        clock: rt.clock.clone(),
        attempt_lease: staged::attempt_lease(settings),
        model_metrics: metrics::ModelMetrics::new(&f.metrics),
    })
}

/// The services the operations call, as the caller.
fn peers(settings: &Settings) -> anyhow::Result<state::Peers> {
    Ok(state::Peers {
        identity: Peer::new(SERVICE, "identity", &settings.identity, &settings.tls)?,
        org_billing: Peer::new(SERVICE, "org_billing", &settings.org_billing, &settings.tls)?,
        kyc: Peer::new(SERVICE, "kyc", &settings.kyc, &settings.tls)?,
        server_product: Peer::new(
            SERVICE,
            "server_product",
            &settings.server_product,
            &settings.tls,
        )?,
    })
}

/// Every service's audit events, kept as the users' activity (memory).
fn consume_activity(
    settings: &Settings,
    f: &Foundation,
    rt: &service_kit::Runtime,
) -> tokio::task::JoinHandle<()> {
    let pool = f.pool.clone();
    nats::spawn_batch_consumer::<AuditRecorded, _, _>(
        f.js.clone(),
        settings.nats.clone(),
        ACTIVITY_CONSUMER,
        256,
        Duration::from_millis(20),
        rt.cancel.clone(),
        move |envs| {
            let pool = pool.clone();
            async move { memory::store_activity(&pool, envs).await }
        },
    )
}

/// Deleted accounts: their memory, activity and conversations are erased.
fn consume_user_deleted(
    settings: &Settings,
    f: &Foundation,
    rt: &service_kit::Runtime,
) -> tokio::task::JoinHandle<()> {
    let pool = f.pool.clone();
    nats::spawn_consumer::<UserDeleted, _, _>(
        f.js.clone(),
        settings.nats.clone(),
        USER_DELETED_CONSUMER,
        rt.cancel.clone(),
        move |env| {
            let pool = pool.clone();
            async move {
                let user = env.data.user_id;
                let conversations = store::personal::erase(&pool, user).await?;
                tracing::info!(%user, conversations, "deleted account's assistant data erased");
                Ok(())
            }
        },
    )
}

/// The memory curation, every `curation.interval_secs`.
fn spawn_curation(
    settings: &Settings,
    state: &web::Data<state::AppState>,
    rt: &service_kit::Runtime,
) -> tokio::task::JoinHandle<()> {
    let nightly = state.clone();
    service_kit::shutdown::spawn_periodic(
        "agent-curation",
        Duration::from_secs(settings.curation.interval_secs),
        rt.cancel.clone(),
        move || {
            let state = nightly.clone();
            async move { memory::scheduled_pass(&state).await }
        },
    )
}

/// The agent, described once: its binary, the one-process stack and the test
/// harness start it from this (see `service_kit::service`).
pub struct Agent;

/// Learns each user's activity (memory) from every service's audit events.
const ACTIVITY_CONSUMER: nats::Durable = nats::Durable::of::<AuditRecorded>("agent-activity");
/// Erases a deleted account's assistant data.
const USER_DELETED_CONSUMER: nats::Durable = nats::Durable::of::<UserDeleted>("agent-user-deleted");

impl service_kit::service::Service for Agent {
    const AUDIENCE: &'static str = SERVICE;
    const TARGET: &'static str = module_path!();
    const SCHEMA: &'static str = SCHEMA;
    const EMITS: &'static [&'static str] = &[AuditRecorded::SUBJECT];
    const CONSUMES: &'static [nats::Durable] = &[ACTIVITY_CONSUMER, USER_DELETED_CONSUMER];
    const CALLS: &'static [(&'static str, &'static str)] = &[
        (hub_domain::ServiceName::Identity.as_str(), "identity"),
        (hub_domain::ServiceName::OrgBilling.as_str(), "org_billing"),
        (hub_domain::ServiceName::Kyc.as_str(), "kyc"),
        (
            hub_domain::ServiceName::ServerProduct.as_str(),
            "server_product",
        ),
    ];
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
