//! webhook-dispatcher: customers' webhook endpoints and the signed delivery
//! of every product event to them ([`fanout`], [`worker`]), with retries kept
//! in Postgres, a delivery log, secret rotation, manual redelivery and the
//! SSRF guard ([`ssrf`]). Owns the Postgres schema `webhook_dispatcher`.

mod attempts;
pub mod fanout;
mod orgs;
mod overview;
mod routes;
pub mod settings;
pub mod ssrf;
mod state;
mod store;
pub mod worker;

pub use routes::configure;
pub use settings::Settings;

use actix_web::web;
use service_kit::{
    db, nats,
    sealed::Sealer,
    server::{Foundation, Parts},
};
use sqlx::migrate::Migrator;
use std::{sync::Arc, time::Duration};

pub const SCHEMA: &str = "webhook_dispatcher";
/// This service's name in assertions (their audience).
pub const SERVICE: &str = hub_domain::ServiceName::WebhookDispatcher.as_str();
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/webhook_dispatcher");

pub use service_kit::server::Running as Application;

pub async fn migrate(settings: &Settings) -> anyhow::Result<()> {
    db::prepare(
        &settings.database,
        SCHEMA,
        "webhook-dispatcher-migrate",
        &MIGRATOR,
    )
    .await?;
    Ok(())
}

/// Config in, running server out: migrate, connect, start the fan-out
/// consumer and the delivery worker, serve.
pub async fn build(settings: Settings, rt: service_kit::Runtime) -> anyhow::Result<Application> {
    let sealer = Sealer::new(&settings.sealing.keys)?;
    ssrf::init();
    let mut f = Foundation::start(parts(&settings), &rt)
        .await?
        .counting(overview::count);
    let state = web::Data::new(app_state(&settings, &f, &rt, sealer));
    let dispatch = if settings.delivery.worker {
        let (d, worker_tasks) = start_worker(&settings, &state, &rt).await?;
        f.tasks.extend(worker_tasks);
        Some(d)
    } else {
        None
    };
    f.tasks
        .push(consume_fanout(&settings, &f, &state, dispatch, &rt));
    f.tasks.push(consume_org_status(&settings, &f, &state, &rt));
    f.serve(&settings.http, state, configure)
}

/// What the kit's foundation (database, NATS, relay, assertions) needs.
fn parts(settings: &Settings) -> Parts<'_> {
    Parts {
        name: "webhook-dispatcher",
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
) -> state::AppState {
    state::AppState {
        pool: f.pool.clone(),
        outbox: f.outbox.clone(),
        naming: settings.nats.naming(),
        sealer,
        ssrf: settings.ssrf,
        webhooks: settings.webhooks,
        delivery: settings.delivery.clone(),
        tls: settings.tls.clone(),
        clock: rt.clock.clone(),
        wake: Arc::default(),
        inflight: Arc::default(),
        metrics: worker::AttemptMetrics::new(&f.metrics),
    }
}

/// The delivery worker, on connections of its own.
async fn start_worker(
    settings: &Settings,
    state: &web::Data<state::AppState>,
    rt: &service_kit::Runtime,
) -> anyhow::Result<(Arc<worker::Dispatch>, Vec<tokio::task::JoinHandle<()>>)> {
    // The worker's own connections, planning its claims as ordered index
    // scans: those stop at the claim's limit and mark the dead index
    // entries a busy queue leaves behind, so later claims skip them (a
    // bitmap scan visits every one of them, on every claim).
    let worker_pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_millis(settings.database.acquire_timeout_ms))
        .connect_with(
            db::options(&settings.database, SCHEMA, "webhook-dispatcher-worker")?
                .options([("enable_bitmapscan", "off")]),
        )
        .await?;
    worker::spawn(state.clone(), worker_pool, rt.cancel.clone())
}

/// Every product event, fanned out to its organization's endpoints (and
/// handed to the worker, when this process runs one).
fn consume_fanout(
    settings: &Settings,
    f: &Foundation,
    state: &web::Data<state::AppState>,
    dispatch: Option<Arc<worker::Dispatch>>,
    rt: &service_kit::Runtime,
) -> tokio::task::JoinHandle<()> {
    let fan = state.clone();
    nats::spawn_raw_batch_consumer(
        f.js.clone(),
        settings.nats.clone(),
        FANOUT_CONSUMER,
        256,
        Duration::from_millis(2),
        rt.cancel.clone(),
        move |msgs| {
            let (state, dispatch) = (fan.clone(), dispatch.clone());
            async move { fanout::store(&state, dispatch.as_ref(), msgs).await }
        },
    )
}

/// Organizations suspended and reactivated: their deliveries pause and resume.
fn consume_org_status(
    settings: &Settings,
    f: &Foundation,
    state: &web::Data<state::AppState>,
    rt: &service_kit::Runtime,
) -> tokio::task::JoinHandle<()> {
    let orgs = state.clone();
    nats::spawn_consumer::<event_contracts::OrgStatusChanged, _, _>(
        f.js.clone(),
        settings.nats.clone(),
        ORG_STATUS_CONSUMER,
        rt.cancel.clone(),
        move |env| {
            let state = orgs.clone();
            async move { orgs::on_status_changed(&state, env).await }
        },
    )
}

/// webhook-dispatcher, described once: its binary, the one-process stack and the test
/// harness start it from this (see `service_kit::service`).
pub struct WebhookDispatcher;

/// Every product event, fanned out to the organization's endpoints.
const FANOUT_CONSUMER: nats::Durable =
    nats::Durable::raw("webhook-dispatcher-fanout", "product.v1.>");
/// Organizations suspended and reactivated: their deliveries pause and resume.
const ORG_STATUS_CONSUMER: nats::Durable =
    nats::Durable::of::<event_contracts::OrgStatusChanged>("webhook-dispatcher-org-status");

impl service_kit::service::Service for WebhookDispatcher {
    const AUDIENCE: &'static str = SERVICE;
    const TARGET: &'static str = module_path!();
    const SCHEMA: &'static str = SCHEMA;
    const EMITS: &'static [&'static str] =
        &[<event_contracts::AuditRecorded as event_contracts::Event>::SUBJECT];
    const CONSUMES: &'static [nats::Durable] = &[FANOUT_CONSUMER, ORG_STATUS_CONSUMER];
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
