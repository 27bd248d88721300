//! identity: users, magic links, sessions, memberships, profile, audit history
//! and rate limits. Owns the Postgres schema `identity`.
//!
//! One constructor, [`Application::build`], takes settings and returns a bound,
//! running server: the binary, the one-process dev stack and tests-e2e all use it.

mod audit;
mod fields;
mod ratelimit;
mod resolve;
mod routes;
pub mod settings;
mod state;
pub mod sweep;
pub mod tokens;

pub use routes::{
    configure, CREDENTIAL_EXPIRES_HEADER, CREDENTIAL_ID_HEADER, CREDENTIAL_KIND_HEADER,
};
pub use settings::Settings;

use actix_web::{dev::Server, middleware::from_fn, web, App, HttpServer};
use event_contracts::AuditRecorded;
use service_kit::{assertion, db, http, nats, outbox::Outbox};
use sqlx::migrate::Migrator;
use std::{collections::HashSet, net::TcpListener, time::Duration};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const SCHEMA: &str = "identity";
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/identity");

pub struct Application {
    port: u16,
    server: Server,
    tasks: Vec<JoinHandle<()>>,
}

/// Apply identity's migrations and return (the `migrate` subcommand).
pub async fn migrate(settings: &Settings) -> anyhow::Result<()> {
    let pool = db::connect(&settings.database, SCHEMA, "identity-migrate").await?;
    db::migrate(&pool, SCHEMA, &MIGRATOR).await
}

impl Application {
    pub async fn build(
        settings: Settings,
        cancel: CancellationToken,
    ) -> anyhow::Result<Application> {
        let pool = db::connect(&settings.database, SCHEMA, "identity").await?;
        db::migrate(&pool, SCHEMA, &MIGRATOR).await?;
        let nats_client = nats::connect(&settings.nats, "identity").await?;
        let js = async_nats::jetstream::new(nats_client.clone());
        nats::ensure_streams(&js, &settings.nats).await?;
        let naming = settings.nats.naming();
        let outbox = Outbox::new(pool.clone(), js.clone());
        let signer = assertion::Signer::new(&settings.assertion)?;

        let mut tasks = vec![outbox.clone().spawn_relay(
            cancel.clone(),
            Duration::from_millis(settings.jobs.outbox_poll_ms),
        )];
        {
            let (js, naming, cancel, pool) =
                (js.clone(), naming.clone(), cancel.clone(), pool.clone());
            tasks.push(tokio::spawn(async move {
                let run = nats::run_consumer::<AuditRecorded, _, _>(
                    js,
                    naming,
                    "identity-audit",
                    cancel,
                    |env| audit::store_event(&pool, env),
                );
                if let Err(e) = run.await {
                    tracing::error!(error = ?e, "audit consumer stopped");
                }
            }));
        }
        tasks.push(sweep::spawn(
            pool.clone(),
            settings.jobs.clone(),
            cancel.clone(),
        ));

        let staff: HashSet<String> = settings
            .auth
            .staff_emails
            .iter()
            .map(|e| e.trim().to_lowercase())
            .collect();
        let state = web::Data::new(state::AppState {
            pool: pool.clone(),
            outbox,
            naming,
            auth: settings.auth.clone(),
            staff,
        });
        let signer = web::Data::new(signer);
        let readiness = http::Readiness {
            db: Some(pool),
            nats: Some(nats_client),
        };
        let max_body = settings.http.max_body_bytes;
        let listener = TcpListener::bind(settings.http.addr())?;
        let port = listener.local_addr()?.port();
        let mut server = HttpServer::new(move || {
            App::new()
                .wrap(from_fn(assertion::require_assertion))
                .wrap(from_fn(http::request_span))
                .app_data(state.clone())
                .app_data(signer.clone())
                .configure(|c| http::configure_extractors(c, max_body))
                .configure(|c| http::health_routes(c, readiness.clone()))
                .configure(configure)
                .default_service(web::to(http::not_found))
        })
        .listen(listener)?
        .disable_signals()
        .shutdown_timeout(10);
        if settings.http.workers > 0 {
            server = server.workers(settings.http.workers);
        }
        let server = server.run();
        service_kit::shutdown::stop_server_on(cancel, server.handle());
        tracing::info!(port, "identity listening");
        Ok(Application {
            port,
            server,
            tasks,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Serve until the cancellation token fires, then wait for background tasks.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        self.server.await?;
        for t in self.tasks {
            let _ = t.await;
        }
        Ok(())
    }
}
