//! The HTTP server every internal service runs: request spans, the assertion
//! check, JSON extractor limits, probes, the service's routes, a JSON 404.

use crate::{assertion, http, settings::HttpSettings};
use actix_web::{dev::Server, middleware::from_fn, web, App, HttpServer};
use std::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// What an internal service hands over to be served (through [`Foundation`]).
struct Service<S> {
    pub name: &'static str,
    pub verifier: assertion::Verifier,
    pub db: sqlx::PgPool,
    pub nats: async_nats::Client,
    /// Subject and stream naming (for the dead-letter count on `/metrics`).
    pub naming: event_contracts::Naming,
    /// Handler state, registered as `web::Data<S>`.
    pub state: web::Data<S>,
    pub routes: fn(&mut web::ServiceConfig),
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
    /// A listener bound for it beforehand (else `settings` is bound).
    pub listener: Option<TcpListener>,
}

/// Serve `svc` on `settings` (port 0 picks one) with readiness on its Postgres
/// and NATS; stop gracefully when `cancel` fires.
fn serve<S: Send + Sync + 'static>(
    settings: &HttpSettings,
    svc: Service<S>,
    cancel: CancellationToken,
) -> anyhow::Result<Running> {
    let metrics = web::Data::new(http::Metrics {
        js: async_nats::jetstream::new(svc.nats.clone()),
        naming: svc.naming,
        consumer_prefix: format!("{}-", svc.name),
    });
    let readiness = http::Readiness {
        db: Some(svc.db),
        nats: Some(svc.nats),
    };
    let (state, routes) = (svc.state, svc.routes);
    let listener = match svc.listener {
        Some(l) => l,
        None => TcpListener::bind(settings.addr())?,
    };
    let (port, server) = start(
        settings,
        listener,
        svc.verifier,
        readiness,
        cancel,
        move |c| {
            c.app_data(state.clone())
                .app_data(metrics.clone())
                .route("/metrics", web::get().to(http::metrics));
            routes(c);
        },
    )?;
    tracing::info!(port, "{} listening", svc.name);
    Ok(Running::new(port, server, svc.tasks))
}

/// Bind `settings` (port 0 picks one), start serving, stop gracefully when
/// `cancel` fires. Returns the bound port and the running server.
fn start<F>(
    settings: &HttpSettings,
    listener: TcpListener,
    verifier: assertion::Verifier,
    readiness: http::Readiness,
    cancel: CancellationToken,
    routes: F,
) -> anyhow::Result<(u16, Server)>
where
    F: Fn(&mut web::ServiceConfig) + Send + Clone + 'static,
{
    let verifier = web::Data::new(verifier);
    let max_body = settings.max_body_bytes;
    let body_limit = web::Data::new(assertion::BodyLimit(max_body));
    let port = listener.local_addr()?.port();
    let mut server = HttpServer::new(move || {
        App::new()
            .wrap(from_fn(assertion::require_assertion))
            .wrap(from_fn(http::request_span))
            .app_data(verifier.clone())
            .app_data(body_limit.clone())
            .configure(|c| http::configure_extractors(c, max_body))
            .configure(|c| http::health_routes(c, readiness.clone()))
            .configure(routes.clone())
            .default_service(web::to(http::not_found))
    })
    .listen(listener)?
    .disable_signals()
    .shutdown_timeout(10);
    if settings.workers > 0 {
        server = server.workers(settings.workers);
    }
    let server = server.run();
    crate::shutdown::stop_server_on(cancel, server.handle());
    Ok((port, server))
}

/// A service that is serving: its port, its server and its background tasks.
pub struct Running {
    port: u16,
    server: Server,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    fn new(port: u16, server: Server, tasks: Vec<tokio::task::JoinHandle<()>>) -> Running {
        Running {
            port,
            server,
            tasks,
        }
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

/// What a service is, for [`Foundation::start`].
pub struct Parts<'a> {
    /// For logs and connection names (`org-billing`).
    pub name: &'static str,
    /// Its name in assertions (`org_billing`).
    pub audience: &'a str,
    pub schema: &'a str,
    pub migrator: &'a sqlx::migrate::Migrator,
    pub database: &'a crate::settings::DatabaseSettings,
    pub nats: &'a crate::settings::NatsSettings,
    pub assertion: &'a crate::settings::AssertionSettings,
    /// The outbox relay's poll interval and linger after a kick.
    pub relay: crate::settings::RelaySettings,
}

/// What every internal service starts from: its database (provisioned and
/// migrated), NATS with the streams, the outbox with its relay running, and
/// the assertion verifier. A service adds its state, routes and tasks, then
/// [`serve`](Foundation::serve)s.
pub struct Foundation {
    pub name: &'static str,
    pub pool: sqlx::PgPool,
    pub nats: async_nats::Client,
    pub js: async_nats::jetstream::Context,
    pub naming: event_contracts::Naming,
    pub outbox: crate::outbox::Outbox,
    pub cancel: CancellationToken,
    /// Background tasks, the relay first; services push theirs.
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
    verifier: assertion::Verifier,
    listener: Option<TcpListener>,
}

impl Foundation {
    pub async fn start(p: Parts<'_>, rt: &crate::Runtime) -> anyhow::Result<Foundation> {
        let verifier = assertion::Verifier::new(p.audience, p.assertion)?;
        let pool = crate::db::prepare(p.database, p.schema, p.name, p.migrator).await?;
        let nats = crate::nats::connect(p.nats, p.name).await?;
        let js = async_nats::jetstream::new(nats.clone());
        crate::nats::ensure_streams(&js, p.nats).await?;
        let outbox = crate::outbox::Outbox::new(pool.clone(), js.clone());
        let (poll, linger) = p.relay.intervals();
        let relay = outbox.clone().spawn_relay(rt.cancel.clone(), poll, linger);
        Ok(Foundation {
            name: p.name,
            pool,
            nats,
            js,
            naming: p.nats.naming(),
            outbox,
            cancel: rt.cancel.clone(),
            tasks: vec![relay],
            verifier,
            listener: rt.listener.take(),
        })
    }

    /// Serve `routes` with `state` on `http` (or the listener bound for it).
    pub fn serve<S: Send + Sync + 'static>(
        self,
        http: &HttpSettings,
        state: web::Data<S>,
        routes: fn(&mut web::ServiceConfig),
    ) -> anyhow::Result<Running> {
        serve(
            http,
            Service {
                name: self.name,
                verifier: self.verifier,
                db: self.pool,
                nats: self.nats,
                naming: self.naming,
                state,
                routes,
                tasks: self.tasks,
                listener: self.listener,
            },
            self.cancel,
        )
    }
}
