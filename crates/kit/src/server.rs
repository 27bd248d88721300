//! The HTTP server every internal service runs: request spans, the assertion
//! check, JSON extractor limits, probes, the service's routes, a JSON 404.

use crate::{assertion, http, metrics::Metrics, settings::HttpSettings};
use actix_web::{dev::Server, middleware::from_fn, web, App, HttpServer};
use std::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// What an internal service hands over to be served (through [`Foundation`]).
struct Service<S> {
    pub name: &'static str,
    pub verifier: assertion::Verifier,
    pub db: sqlx::PgPool,
    pub nats: async_nats::Client,
    pub metrics: Metrics,
    /// Handler state, registered as `web::Data<S>`.
    pub state: web::Data<S>,
    pub routes: fn(&mut web::ServiceConfig),
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
    /// A listener bound for it beforehand (else `settings` is bound).
    pub listener: Option<TcpListener>,
    /// Where its staff reads are audited ([`crate::staff_audit`]).
    pub staff_audit: crate::staff_audit::StaffAudit,
    /// What its part of the staff overview reads ([`crate::overview`]).
    pub overview: crate::overview::Source,
}

/// Serve `svc` on `settings` (port 0 picks one) with readiness on its Postgres
/// and NATS; stop gracefully when `cancel` fires.
fn serve<S: Send + Sync + 'static>(
    settings: &HttpSettings,
    svc: Service<S>,
    cancel: CancellationToken,
) -> anyhow::Result<Running> {
    let readiness = http::Readiness {
        db: Some(svc.db),
        nats: Some(svc.nats),
    };
    let (state, routes) = (svc.state, svc.routes);
    let staff_audit = web::Data::new(svc.staff_audit);
    let audited = web::Data::new(crate::staff_read::Audited);
    let overview = web::Data::new(svc.overview);
    let listener = match svc.listener {
        Some(l) => l,
        None => TcpListener::bind(settings.addr())?,
    };
    let (metrics_port, metrics_server) = crate::metrics::serve(
        TcpListener::bind(settings.metrics_addr())?,
        svc.metrics.clone(),
        cancel.clone(),
    )?;
    let (port, server) = start(
        settings,
        listener,
        svc.verifier,
        readiness,
        svc.metrics,
        cancel,
        move |c| {
            c.app_data(state.clone())
                .app_data(staff_audit.clone())
                .app_data(audited.clone())
                .app_data(overview.clone());
            crate::overview::routes(c);
            routes(c);
        },
    )?;
    tracing::info!(port, metrics_port, "{} listening", svc.name);
    Ok(Running {
        port,
        metrics_port,
        servers: vec![server, metrics_server],
        tasks: svc.tasks,
    })
}

/// Bind `settings` (port 0 picks one), start serving, stop gracefully when
/// `cancel` fires. Returns the bound port and the running server.
fn start<F>(
    settings: &HttpSettings,
    listener: TcpListener,
    verifier: assertion::Verifier,
    readiness: http::Readiness,
    metrics: Metrics,
    cancel: CancellationToken,
    routes: F,
) -> anyhow::Result<(u16, Server)>
where
    F: Fn(&mut web::ServiceConfig) + Send + Clone + 'static,
{
    let verifier = web::Data::new(verifier);
    let max_body = settings.max_body_bytes;
    let body_limit = web::Data::new(assertion::BodyLimit(max_body));
    let metrics = web::Data::new(metrics);
    let port = listener.local_addr()?.port();
    let mut server = HttpServer::new(move || {
        App::new()
            .wrap(from_fn(crate::staff_audit::audit))
            .wrap(from_fn(assertion::require_assertion))
            .wrap(from_fn(http::request_span))
            .app_data(verifier.clone())
            .app_data(body_limit.clone())
            .app_data(metrics.clone())
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

/// A service that is serving: its ports, its servers (the service's and
/// the metrics listener) and its background tasks.
pub struct Running {
    port: u16,
    metrics_port: u16,
    servers: Vec<Server>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port of its metrics listener.
    pub fn metrics_port(&self) -> u16 {
        self.metrics_port
    }

    /// Serve until the cancellation token fires, then wait for background tasks.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        futures::future::try_join_all(self.servers).await?;
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
    /// Its metrics: the kit's, and what the service registers on them.
    pub metrics: Metrics,
    pub cancel: CancellationToken,
    /// Background tasks, the relay first; services push theirs.
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
    verifier: assertion::Verifier,
    listener: Option<TcpListener>,
    counter: Option<crate::overview::Counter>,
}

impl Foundation {
    pub async fn start(p: Parts<'_>, rt: &crate::Runtime) -> anyhow::Result<Foundation> {
        let verifier = assertion::Verifier::new(p.audience, p.assertion)?;
        let pool = if p.database.migrate_at_start {
            crate::db::prepare(p.database, p.schema, p.name, p.migrator).await?
        } else {
            let pool = crate::db::connect(p.database, p.schema, p.name).await?;
            crate::db::check(&pool, p.schema, p.migrator).await?;
            pool
        };
        let nats = crate::nats::connect(p.nats, p.name).await?;
        let js = async_nats::jetstream::new(nats.clone());
        crate::nats::ensure_streams(&js, p.nats).await?;
        let outbox = crate::outbox::Outbox::new(pool.clone(), js.clone());
        let (poll, linger) = p.relay.intervals();
        let relay = outbox.clone().spawn_relay(rt.cancel.clone(), poll, linger);
        let metrics = Metrics::new(p.name);
        metrics.read_foundation(pool.clone(), js.clone(), p.nats.naming());
        Ok(Foundation {
            name: p.name,
            pool,
            nats,
            js,
            naming: p.nats.naming(),
            outbox,
            metrics,
            cancel: rt.cancel.clone(),
            tasks: vec![relay],
            verifier,
            listener: rt.listener.take(),
            counter: None,
        })
    }

    /// Count the service's queues with `counter` in its part of the staff
    /// overview ([`crate::overview`]); without it the part has its dead
    /// letters only.
    pub fn counting(mut self, counter: crate::overview::Counter) -> Foundation {
        self.counter = Some(counter);
        self
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
                db: self.pool.clone(),
                nats: self.nats,
                metrics: self.metrics,
                state,
                routes,
                tasks: self.tasks,
                listener: self.listener,
                staff_audit: crate::staff_audit::StaffAudit {
                    pool: self.pool.clone(),
                    naming: self.naming.clone(),
                    outbox: self.outbox.clone(),
                },
                overview: crate::overview::Source {
                    pool: self.pool.clone(),
                    js: self.js,
                    prefix: format!("{}-", self.name),
                    naming: self.naming,
                    counter: self.counter,
                },
            },
            self.cancel,
        )
    }
}
