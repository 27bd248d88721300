//! org-billing: organizations, distributor routing, wallets with an append-only
//! ledger, AI-token balances. Owns the Postgres schema `org_billing`.

mod assets;
mod billing;
pub mod catalog;
mod distributors;
pub mod kyc;
mod ledger;
mod members_ai;
mod orgs;
mod overview;
mod projects;
mod replica;
mod routes;
pub mod search_key;
pub mod seed;
pub mod settings;
mod state;
mod usage;

pub use routes::configure;
pub use settings::Settings;

use actix_web::web;
use event_contracts::{AuditRecorded, Event, KycChanged, MembershipChanged, OrgCreated};
use service_kit::{
    db,
    group_commit::Shape,
    nats,
    peer::Peer,
    sealed::Sealer,
    server::{Foundation, Parts},
};
use sqlx::{migrate::Migrator, PgPool};
use std::time::Duration;

pub const SCHEMA: &str = "org_billing";
/// This service's name in assertions (their audience and, when it calls, issuer).
pub const SERVICE: &str = hub_domain::ServiceName::OrgBilling.as_str();
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/org_billing");

/// The running service (port, server, background tasks).
pub use service_kit::server::Running as Application;

/// Apply org-billing's migrations (and the seed when configured), then the
/// distributors of the declared catalog (`catalog.file`) in one transaction,
/// then return. The file is read and validated before anything is migrated:
/// a refused file changes nothing. Only here, never at service start: the
/// migration Job runs once per release, pods would race.
/// Legal identities stored in clear by earlier versions are sealed on the way
/// ([`kyc::finish_migrations`]), so the sealing keys are required here too.
pub async fn migrate(settings: &Settings) -> anyhow::Result<()> {
    let declared = service_kit::catalog::read(&settings.catalog)?;
    let sealer = Sealer::new(&settings.sealing.keys)?;
    let search_key = search_key::SearchKey::new(&settings.sealing.search_key)?;
    let before = kyc::migrations_before(kyc::PLAINTEXT_DROPPED_MIGRATION).await?;
    let pool = db::prepare(&settings.database, SCHEMA, "org-billing-migrate", &before).await?;
    kyc::finish_migrations(&pool, &sealer, &search_key).await?;
    if settings.seed.distributors {
        seed::distributors(&pool).await?;
    }
    if settings.seed.billing_examples {
        seed::billing_examples(&pool).await?;
    }
    if let Some(declared) = declared {
        catalog::apply_declared(&pool, &declared).await?;
    }
    Ok(())
}

/// Delete old idempotency keys.
pub async fn sweep_once(pool: &PgPool, keep_secs: i64) -> anyhow::Result<u64> {
    Ok(service_kit::idempotency::sweep(pool, keep_secs).await?)
}

/// Config in, running server out: migrate, connect, start consumers and jobs, serve.
pub async fn build(settings: Settings, rt: service_kit::Runtime) -> anyhow::Result<Application> {
    // No key, no start: the legal identities are stored sealed.
    let sealer = Sealer::new(&settings.sealing.keys)?;
    let search_key = search_key::SearchKey::new(&settings.sealing.search_key)?;
    // Migrations up to the sealed column here, the rest once the plaintext
    // columns are sealed (kyc::finish_migrations).
    let before = kyc::migrations_before(kyc::PLAINTEXT_DROPPED_MIGRATION).await?;
    let mut f = Foundation::start(parts(&settings, &before), &rt)
        .await?
        .counting(overview::count);
    kyc::finish_migrations(&f.pool, &sealer, &search_key).await?;
    seed(&settings, &f.pool).await?;
    let (wallets, tokens, mut tasks) = spawn_ledger_writers(&settings, &f, &rt)?;
    let state = web::Data::new(state::AppState {
        pool: f.pool.clone(),
        wallets,
        tokens,
        queue_timeout: Duration::from_millis(settings.ledger.queue_timeout_ms),
        batch_limit: ledger::batch_limit(Duration::from_millis(settings.ledger.batch_timeout_ms)),
        outbox: f.outbox.clone(),
        naming: f.naming.clone(),
        identity: Peer::new(SERVICE, "identity", &settings.identity, &settings.tls)?,
        kyc: Peer::new(SERVICE, "kyc", &settings.kyc, &settings.tls)?,
        server_product: Peer::new(
            SERVICE,
            "server_product",
            &settings.server_product,
            &settings.tls,
        )?,
        orgs: settings.orgs.clone(),
        billing: settings.billing.clone(),
        sealer,
        search_key,
    });
    tasks.extend(spawn_consumers(&settings, &f, &rt, &state));
    tasks.extend(spawn_jobs(&settings, &f, &rt, &state));
    f.tasks.extend(tasks);
    f.serve(&settings.http, state, configure)
}

fn parts<'a>(settings: &'a Settings, migrator: &'a Migrator) -> Parts<'a> {
    Parts {
        name: "org-billing",
        audience: SERVICE,
        schema: SCHEMA,
        migrator,
        database: &settings.database,
        nats: &settings.nats,
        assertion: &settings.assertion,
        relay: settings.jobs.relay(),
    }
}

/// The dev profile's distributors and example billing records, when set.
async fn seed(settings: &Settings, pool: &PgPool) -> anyhow::Result<()> {
    if settings.seed.distributors {
        seed::distributors(pool).await?;
    }
    if settings.seed.billing_examples {
        seed::billing_examples(pool).await?;
    }
    Ok(())
}

type Tasks = Vec<tokio::task::JoinHandle<()>>;

/// The wallet's and the AI tokens' batching writers, each on connections of
/// its own.
fn spawn_ledger_writers(
    settings: &Settings,
    f: &Foundation,
    rt: &service_kit::Runtime,
) -> anyhow::Result<(
    ledger::Writer<ledger::Wallet>,
    ledger::Writer<ledger::Tokens>,
    Tasks,
)> {
    let writer_db = ledger::WriterDb {
        // Postgres cancels (and rolls back) a batch that runs too long, lock
        // waits included.
        options: db::options(&settings.database, SCHEMA, "org-billing-ledger")?.options([(
            "statement_timeout",
            settings.ledger.batch_timeout_ms.to_string(),
        )]),
        connect_timeout: Duration::from_millis(settings.database.acquire_timeout_ms),
        ping_if_idle: Duration::from_millis(settings.ledger.ping_if_idle_ms),
        batch_timeout: Duration::from_millis(settings.ledger.batch_timeout_ms),
    };
    let shape = |writers| Shape {
        writers,
        max_batch: settings.ledger.max_batch,
        grace: Duration::from_secs(15),
    };
    let (wallets, mut tasks) = ledger::Writer::spawn(
        writer_db.clone(),
        f.outbox.clone(),
        shape(settings.ledger.writers),
        rt.cancel.clone(),
        f.metrics.commits(),
    );
    let (tokens, token_tasks) = ledger::Writer::spawn(
        writer_db,
        f.outbox.clone(),
        shape(settings.ledger.token_writers),
        rt.cancel.clone(),
        f.metrics.commits(),
    );
    tasks.extend(token_tasks);
    Ok((wallets, tokens, tasks))
}

/// The consumers: KYC changes, usage to charge, the membership replica.
fn spawn_consumers(
    settings: &Settings,
    f: &Foundation,
    rt: &service_kit::Runtime,
    state: &web::Data<state::AppState>,
) -> Tasks {
    let kyc_state = state.clone();
    let replica_pool = f.pool.clone();
    vec![
        nats::spawn_consumer::<KycChanged, _, _>(
            f.js.clone(),
            settings.nats.clone(),
            KYC_CONSUMER,
            rt.cancel.clone(),
            move |env| {
                let state = kyc_state.clone();
                async move { kyc::on_changed(&state, env).await }
            },
        ),
        usage::spawn(
            f.js.clone(),
            settings.nats.clone(),
            usage::Usage {
                pool: f.pool.clone(),
                outbox: f.outbox.clone(),
                naming: f.naming.clone(),
                brand: settings.usage.brand.clone(),
            },
            rt.cancel.clone(),
        ),
        nats::spawn_consumer::<MembershipChanged, _, _>(
            f.js.clone(),
            settings.nats.clone(),
            MEMBERSHIPS_CONSUMER,
            rt.cancel.clone(),
            move |env| {
                let pool = replica_pool.clone();
                async move { replica::apply(&pool, env).await }
            },
        ),
    ]
}

/// The periodic jobs: the idempotency-key sweep and resuming billing runs.
fn spawn_jobs(
    settings: &Settings,
    f: &Foundation,
    rt: &service_kit::Runtime,
    state: &web::Data<state::AppState>,
) -> Tasks {
    let (sweep_pool, keep_secs) = (f.pool.clone(), settings.jobs.keep_secs);
    let runs_state = state.clone();
    vec![
        service_kit::shutdown::spawn_periodic(
            "org-billing-sweep",
            Duration::from_secs(settings.jobs.sweep_interval_secs),
            rt.cancel.clone(),
            move || {
                let pool = sweep_pool.clone();
                async move { sweep_once(&pool, keep_secs).await }
            },
        ),
        service_kit::shutdown::spawn_periodic(
            "org-billing-runs",
            Duration::from_secs(settings.billing.resume_interval_secs),
            rt.cancel.clone(),
            move || {
                let state = runs_state.clone();
                async move { billing::runs::resume(&state).await }
            },
        ),
    ]
}

/// org-billing, described once: its binary, the one-process stack and the test
/// harness start it from this (see `service_kit::service`).
pub struct OrgBilling;

/// Pulls an organization's KYC state from kyc when it changed.
const KYC_CONSUMER: nats::Durable = nats::Durable::of::<KycChanged>("org-billing-kyc");
/// Keeps the membership replica.
const MEMBERSHIPS_CONSUMER: nats::Durable =
    nats::Durable::of::<MembershipChanged>("org-billing-memberships");

impl service_kit::service::Service for OrgBilling {
    const AUDIENCE: &'static str = SERVICE;
    const TARGET: &'static str = module_path!();
    const SCHEMA: &'static str = SCHEMA;
    const CALLS: &'static [(&'static str, &'static str)] = &[
        (hub_domain::ServiceName::Identity.as_str(), "identity"),
        (hub_domain::ServiceName::Kyc.as_str(), "kyc"),
        (
            hub_domain::ServiceName::ServerProduct.as_str(),
            "server_product",
        ),
    ];
    const EMITS: &'static [&'static str] = &[
        AuditRecorded::SUBJECT,
        OrgCreated::SUBJECT,
        event_contracts::OrgStatusChanged::SUBJECT,
    ];
    const CONSUMES: &'static [nats::Durable] =
        &[KYC_CONSUMER, MEMBERSHIPS_CONSUMER, usage::CONSUMER];
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
