//! server-product: the product API for ordering servers. SKUs, servers with
//! one lifecycle ([`lifecycle`]), orders stored by group commit (`orders`),
//! provisioning through a provider driver ([`provider`], durable jobs run in
//! batches by [`worker`]) or a staff fulfilment queue,
//! power and termination, usage and its billing data ([`usage`]), and the
//! service-contract surface. Owns the Postgres schema `server_product`; emits
//! `server.created`, `server.active`, `server.terminated` and (internal, for
//! org-billing) `usage.recorded` to the PRODUCT stream through its outbox.

pub mod catalog;
pub mod lifecycle;
mod maintenance;
mod orders;
mod overview;
pub mod provider;
mod rate;
mod routes;
pub mod seed;
mod servers;
pub mod settings;
mod skus;
mod state;
pub mod usage;
pub mod worker;

pub use routes::configure;
use settings::ProviderKind;
pub use settings::Settings;

use actix_web::web;
use service_kit::{
    db,
    peer::Peer,
    sealed::Sealer,
    server::{Foundation, Parts},
};
use sqlx::migrate::Migrator;
use std::{sync::Arc, time::Duration};

pub const SCHEMA: &str = "server_product";
/// This service's name in assertions (their audience).
pub const SERVICE: &str = hub_domain::ServiceName::ServerProduct.as_str();
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/server_product");

/// The running service (port, server, background tasks).
pub use service_kit::server::Running as Application;

/// Apply migrations (and the demo catalog when configured), then the SKUs of
/// the declared catalog (`catalog.file`) in one transaction, then return. The
/// file is read and validated before anything is migrated: a refused file
/// changes nothing. Only here, never at service start: the migration Job runs
/// once per release, pods would race.
pub async fn migrate(settings: &Settings) -> anyhow::Result<()> {
    let declared = service_kit::catalog::read(&settings.catalog)?;
    let pool = db::prepare(
        &settings.database,
        SCHEMA,
        "server-product-migrate",
        &MIGRATOR,
    )
    .await?;
    if settings.seed.skus {
        seed::skus(&pool).await?;
    }
    if let Some(declared) = declared {
        catalog::apply_declared(&pool, &declared).await?;
    }
    Ok(())
}

/// Config in, running server out: migrate, connect, start the relay and the
/// provisioning worker, serve.
pub async fn build(settings: Settings, rt: service_kit::Runtime) -> anyhow::Result<Application> {
    check(&settings)?;
    let sealer = Sealer::new(&settings.sealing.keys)?;
    let mut f = Foundation::start(parts(&settings), &rt)
        .await?
        .counting(overview::count);
    if settings.seed.skus {
        seed::skus(&f.pool).await?;
    }
    let (orders, mut tasks) = spawn_orders(&settings, &f, &rt);
    let state = web::Data::new(app_state(&settings, &f, &rt, sealer, orders)?);
    if settings.provider.worker {
        tasks.push(worker::spawn(
            state.clone(),
            Duration::from_millis(settings.provider.poll_ms),
            settings.provider.max_attempts,
            rt.cancel.clone(),
        ));
    }
    tasks.push(spawn_month_split(&settings, &f, &rt));
    f.tasks.extend(tasks);
    f.serve(&settings.http, state, configure)
}

/// What the settings must agree on before anything starts.
fn check(settings: &Settings) -> anyhow::Result<()> {
    anyhow::ensure!(
        !settings.orders.require_kyc_for_paid || settings.kyc.key.is_some(),
        "orders.require_kyc_for_paid needs kyc.key (server-product's caller key at kyc)"
    );
    Ok(())
}

fn parts(settings: &Settings) -> Parts<'_> {
    Parts {
        name: "server-product",
        audience: SERVICE,
        schema: SCHEMA,
        migrator: &MIGRATOR,
        database: &settings.database,
        nats: &settings.nats,
        assertion: &settings.assertion,
        relay: settings.jobs.clone(),
    }
}

/// The order writers (group commits of orders) and their tasks.
fn spawn_orders(
    settings: &Settings,
    f: &Foundation,
    rt: &service_kit::Runtime,
) -> (orders::Orders, Vec<tokio::task::JoinHandle<()>>) {
    orders::Orders::spawn(
        f.pool.clone(),
        settings.orders.writers,
        settings.orders.max_batch,
        settings.orders.max_servers_per_org,
        rt.cancel.clone(),
        f.metrics.commits(),
    )
}

fn app_state(
    settings: &Settings,
    f: &Foundation,
    rt: &service_kit::Runtime,
    sealer: Sealer,
    orders: orders::Orders,
) -> anyhow::Result<state::AppState> {
    Ok(state::AppState {
        pool: f.pool.clone(),
        outbox: f.outbox.clone(),
        naming: settings.nats.naming(),
        sealer,
        provider: match settings.provider.kind {
            ProviderKind::Sandbox => Arc::new(provider::Sandbox {
                delay_ms: settings.provider.sandbox_delay_ms as i64,
                fail: settings.provider.sandbox_fail,
                clock: rt.clock.clone(),
            }),
        },
        clock: rt.clock.clone(),
        pages: settings.pages.clone(),
        orders,
        order_rate: rate::OrgRate::new(
            settings.orders.rate_per_minute,
            settings.orders.burst,
            rt.clock.clone(),
        ),
        max_servers_per_org: settings.orders.max_servers_per_org,
        kyc: Peer::new(SERVICE, "kyc", &settings.kyc, &settings.tls)?,
        require_kyc_for_paid: settings.orders.require_kyc_for_paid,
    })
}

/// Open usage periods are closed and continued at each month's first instant
/// (UTC), so that every piece billed lies in one month.
fn spawn_month_split(
    settings: &Settings,
    f: &Foundation,
    rt: &service_kit::Runtime,
) -> tokio::task::JoinHandle<()> {
    let (pool, naming, outbox) = (f.pool.clone(), settings.nats.naming(), f.outbox.clone());
    let clock = rt.clock.clone();
    service_kit::shutdown::spawn_periodic(
        "server-product-usage-months",
        Duration::from_secs(settings.usage.month_split_interval_secs),
        rt.cancel.clone(),
        move || {
            let (pool, naming, outbox, now) =
                (pool.clone(), naming.clone(), outbox.clone(), clock.now());
            async move {
                let pieces = usage::split_months(&pool, &naming, now).await?;
                if pieces > 0 {
                    outbox.kick();
                }
                Ok(pieces)
            }
        },
    )
}

/// server-product, described once: its binary, the one-process stack and the test
/// harness start it from this (see `service_kit::service`).
pub struct ServerProduct;

impl service_kit::service::Service for ServerProduct {
    const AUDIENCE: &'static str = SERVICE;
    const TARGET: &'static str = module_path!();
    const SCHEMA: &'static str = SCHEMA;
    /// Its audit events, its product events (`product.v1.server.<kind>`,
    /// `servers::emit`) and usage for billing (`usage::close`).
    /// kyc: the KYC status before a paid order (`orders.require_kyc_for_paid`).
    const CALLS: &'static [(&'static str, &'static str)] =
        &[(hub_domain::ServiceName::Kyc.as_str(), "kyc")];
    const EMITS: &'static [&'static str] = &[
        <event_contracts::AuditRecorded as event_contracts::Event>::SUBJECT,
        event_contracts::SERVER_EVENTS,
        event_contracts::USAGE_SUBJECT,
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
