//! webhook-dispatcher: customers' webhook endpoints and the signed delivery
//! of every product event to them ([`fanout`], [`worker`]), with retries kept
//! in Postgres, a delivery log, secret rotation, manual redelivery and the
//! SSRF guard ([`ssrf`]). Owns the Postgres schema `webhook_dispatcher`.

pub mod fanout;
mod routes;
pub mod settings;
pub mod ssrf;
mod state;
pub mod worker;

pub use routes::configure;
pub use settings::Settings;

use actix_web::web;
use service_kit::{assertion, db, nats, outbox::Outbox, sealed::Sealer};
use sqlx::migrate::Migrator;
use std::{sync::Arc, time::Duration};

pub const SCHEMA: &str = "webhook_dispatcher";
/// This service's name in assertions (their audience).
pub const SERVICE: &str = "webhook_dispatcher";
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
    let cancel = rt.cancel.clone();
    let sealer = Sealer::new(&settings.sealing.keys)?;
    let pool = db::prepare(&settings.database, SCHEMA, "webhook-dispatcher", &MIGRATOR).await?;
    let nats_client = nats::connect(&settings.nats, "webhook-dispatcher").await?;
    let js = async_nats::jetstream::new(nats_client.clone());
    nats::ensure_streams(&js, &settings.nats).await?;
    let outbox = Outbox::new(pool.clone(), js.clone());
    let verifier = assertion::Verifier::new(SERVICE, &settings.assertion)?;
    let state = web::Data::new(state::AppState {
        pool: pool.clone(),
        outbox: outbox.clone(),
        naming: settings.nats.naming(),
        sealer,
        ssrf: settings.ssrf,
        delivery: settings.delivery.clone(),
        clock: rt.clock.clone(),
        wake: Arc::default(),
    });
    let mut tasks = vec![outbox.spawn_relay(
        cancel.clone(),
        Duration::from_millis(settings.jobs.outbox_poll_ms),
        Duration::from_millis(settings.jobs.outbox_linger_ms),
    )];
    let fan = state.clone();
    tasks.push(nats::spawn_raw_batch_consumer(
        js,
        settings.nats.clone(),
        "webhook-dispatcher-fanout",
        "product.v1.>",
        256,
        Duration::from_millis(2),
        cancel.clone(),
        move |msgs| {
            let state = fan.clone();
            async move { fanout::store(&state, msgs).await }
        },
    ));
    if settings.delivery.worker {
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
        tasks.extend(worker::spawn(state.clone(), worker_pool, cancel.clone())?);
    }
    service_kit::server::serve(
        &settings.http,
        service_kit::server::Service {
            name: "webhook-dispatcher",
            verifier,
            db: pool,
            nats: nats_client,
            naming: settings.nats.naming(),
            state,
            routes: configure,
            tasks,
            listener: rt.listener.take(),
        },
        cancel,
    )
}
