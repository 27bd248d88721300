//! core-api-gateway: the only public entry.
//!
//! Two listeners (or one, per `serve`): the core host and the product host,
//! whose `/core-api/v1/...` equals the core host's `/v1/...`. Every request is
//! routed by the table in settings, its bearer resolved through identity's
//! `GET /v1/auth/me` (cached, invalidated over NATS), client identity headers
//! stripped, and a signed assertion added. Identity unreachable: 503, never a
//! pass-through.

mod cache;
mod clientip;
mod export;
mod flights;
mod metrics;
mod overview;
mod proxy;
mod routing;
pub mod settings;

pub use settings::Settings;

use actix_web::{dev::Server, middleware::from_fn, web, App, HttpServer};
use service_kit::{assertion::Minter, http, settings::HttpSettings};
use std::{collections::HashMap, net::TcpListener, sync::Arc, time::Duration};
use tokio::task::JoinHandle;

pub struct Application {
    core_port: Option<u16>,
    product_port: Option<u16>,
    metrics_port: u16,
    servers: Vec<Server>,
    tasks: Vec<JoinHandle<()>>,
}

fn listener_server(
    s: &HttpSettings,
    gw: web::Data<proxy::Gateway>,
    product: bool,
    readiness: http::Readiness,
    metrics: web::Data<service_kit::metrics::Metrics>,
) -> anyhow::Result<(u16, Server)> {
    proxy::upstream_client(&gw.tls)?;
    let listener = TcpListener::bind(s.addr())?;
    let port = listener.local_addr()?.port();
    let host = web::Data::new(proxy::HostKind { product });
    let mut server = HttpServer::new(move || {
        // One client per worker: its pooled connections then live on the
        // worker's own runtime, with no cross-thread wake-ups per request.
        // Built once before (a bad `tls.extra_ca_file` stops the start), so
        // this cannot fail for a reason the first build did not.
        let client = web::Data::new(proxy::upstream_client(&gw.tls).unwrap_or_else(|e| {
            tracing::error!(error = %e, "cannot build the upstream HTTP client");
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default()
        }));
        App::new()
            .wrap(from_fn(http::request_span))
            .app_data(gw.clone())
            .app_data(client)
            .app_data(host.clone())
            .app_data(metrics.clone())
            .configure(|c| http::health_routes(c, readiness.clone()))
            .default_service(web::to(proxy::handle))
    })
    .listen(listener)?
    .disable_signals()
    .shutdown_timeout(10);
    if s.workers > 0 {
        server = server.workers(s.workers);
    }
    Ok((port, server.run()))
}

/// What the gateways do on NATS: listen to the invalidations (core NATS,
/// no JetStream), publish nothing. The source of their NATS user's
/// permissions ([`service_kit::nats_access`]).
pub const NATS_ACCESS: service_kit::nats_access::Access = service_kit::nats_access::Access {
    user: <settings::Settings as service_kit::settings::Layered>::SERVICE,
    emits: &[],
    consumes: &[],
    listens: cache::LISTENS,
    jetstream: false,
};

/// The bearer cache, with its NATS connection (its own NATS user,
/// credentials and TLS, as every service connects): a reconnect may have
/// missed revocations, so it forgets everything cached.
async fn identity_cache(
    settings: &Settings,
) -> anyhow::Result<(cache::IdentityCache, async_nats::Client)> {
    let cache_for_events: Arc<std::sync::OnceLock<cache::IdentityCache>> = Arc::default();
    let hook = cache_for_events.clone();
    let nats_client = service_kit::nats::options(&settings.nats, "core-api-gateway")?
        .event_callback(move |ev| {
            let hook = hook.clone();
            async move {
                if let async_nats::Event::Connected = ev {
                    if let Some(c) = hook.get() {
                        c.clear();
                    }
                }
            }
        })
        .connect(&settings.nats.url)
        .await?;
    let cache = cache::IdentityCache::new(
        Duration::from_secs(settings.cache.ttl_secs),
        settings.cache.max_entries,
        Duration::from_secs(settings.cache.refused_ttl_secs),
        Some(nats_client.clone()),
    );
    let _ = cache_for_events.set(cache.clone());
    Ok((cache, nats_client))
}

/// The invalidations listener: drops what identity says changed.
fn spawn_invalidations(
    cache: &cache::IdentityCache,
    client: &async_nats::Client,
    settings: &Settings,
    cancel: &tokio_util::sync::CancellationToken,
) -> JoinHandle<()> {
    let (cache, client, naming, cancel) = (
        cache.clone(),
        client.clone(),
        settings.nats.naming(),
        cancel.clone(),
    );
    tokio::spawn(async move {
        if let Err(e) = cache.listen(client, naming, cancel).await {
            tracing::error!(error = ?e, "invalidation listener stopped");
        }
    })
}

/// The proxy's state: routes, per-service minters and upstreams, the bearer
/// cache, client-IP trust, timeouts and limits.
fn gateway(
    settings: &Settings,
    dev: bool,
    cache: cache::IdentityCache,
    metrics: &service_kit::metrics::Metrics,
) -> anyhow::Result<proxy::Gateway> {
    let upstreams = upstreams(settings);
    let minters = minters(settings, &upstreams)?;
    let trusted = trusted_proxies(settings, dev)?;
    Ok(proxy::Gateway {
        router: routing::Router::new(settings)?,
        minters,
        assertion_memberships: settings.proxy.assertion_memberships,
        cache,
        flights: Default::default(),
        upstreams,
        trusted,
        resolve_timeout: Duration::from_millis(settings.proxy.resolve_timeout_ms),
        upstream_timeout: Duration::from_millis(settings.proxy.upstream_timeout_ms),
        max_body_bytes: settings
            .http
            .max_body_bytes
            .max(settings.product_http.max_body_bytes),
        tls: settings.tls.clone(),
        metrics: metrics::GatewayMetrics::new(metrics),
        overview: overview::Overview::new(
            Duration::from_secs(settings.overview.cache_secs),
            Duration::from_millis(settings.overview.timeout_ms),
        ),
    })
}

/// service -> base URL without its trailing `/` (empty: not deployed).
fn upstreams(settings: &Settings) -> HashMap<String, String> {
    settings
        .upstreams
        .iter()
        .map(|(k, v)| (k.clone(), v.trim_end_matches('/').to_owned()))
        .collect()
}

/// A minter per deployed service, with that service's key (required).
fn minters(
    settings: &Settings,
    upstreams: &HashMap<String, String>,
) -> anyhow::Result<HashMap<String, Minter>> {
    let mut minters = HashMap::new();
    for (service, url) in upstreams {
        if url.is_empty() {
            continue;
        }
        let key = settings.assertion.keys.get(service).ok_or_else(|| {
            anyhow::anyhow!("assertion.keys.{service} is required: {service} is deployed")
        })?;
        minters.insert(
            service.clone(),
            Minter::new(service_kit::assertion::GATEWAY, service, key)?,
        );
    }
    Ok(minters)
}

/// The proxies whose `X-Forwarded-For` is believed (a warning outside dev
/// when there are none).
fn trusted_proxies(settings: &Settings, dev: bool) -> anyhow::Result<clientip::TrustedProxies> {
    let trusted = clientip::TrustedProxies::parse(&settings.proxy.trusted_proxies)?;
    if !trusted.any() && !dev {
        tracing::warn!(
            "proxy.trusted_proxies is empty: X-Forwarded-For is ignored, so behind a load \
             balancer every client has the balancer's IP and shares its per-IP rate limits"
        );
    }
    Ok(trusted)
}

impl Application {
    pub async fn build(
        settings: Settings,
        rt: service_kit::Runtime,
    ) -> anyhow::Result<Application> {
        let cancel = rt.cancel;
        let (cache, nats_client) = identity_cache(&settings).await?;
        let tasks = vec![spawn_invalidations(
            &cache,
            &nats_client,
            &settings,
            &cancel,
        )];
        let metrics = service_kit::metrics::Metrics::new("gateway");
        let gw = web::Data::new(gateway(&settings, rt.dev, cache, &metrics)?);
        // Ready without NATS: it only carries cache invalidations, and while
        // it is down the cache is bypassed (every bearer asks identity).
        metrics.read_nats(nats_client);
        let (metrics_port, metrics_server) = service_kit::metrics::serve(
            TcpListener::bind(settings.http.metrics_addr())?,
            metrics.clone(),
            cancel.clone(),
        )?;
        tracing::info!(port = metrics_port, "gateway metrics listening");
        let mut app = Application {
            core_port: None,
            product_port: None,
            metrics_port,
            servers: Vec::new(),
            tasks,
        };
        app.listen(&settings, gw, web::Data::new(metrics))?;
        for s in &app.servers {
            service_kit::shutdown::stop_server_on(cancel.clone(), s.handle());
        }
        app.servers.push(metrics_server);
        Ok(app)
    }

    /// The core and product listeners, as `serve` says.
    fn listen(
        &mut self,
        settings: &Settings,
        gw: web::Data<proxy::Gateway>,
        metrics: web::Data<service_kit::metrics::Metrics>,
    ) -> anyhow::Result<()> {
        let readiness = http::Readiness {
            db: None,
            nats: None,
        };
        use settings::Serve;
        if matches!(settings.serve, Serve::Both | Serve::Core) {
            let (port, server) = listener_server(
                &settings.http,
                gw.clone(),
                false,
                readiness.clone(),
                metrics.clone(),
            )?;
            tracing::info!(port, "core gateway listening");
            self.core_port = Some(port);
            self.servers.push(server);
        }
        if matches!(settings.serve, Serve::Both | Serve::Product) {
            let (port, server) =
                listener_server(&settings.product_http, gw, true, readiness, metrics)?;
            tracing::info!(port, "product gateway listening");
            self.product_port = Some(port);
            self.servers.push(server);
        }
        Ok(())
    }

    pub fn core_port(&self) -> Option<u16> {
        self.core_port
    }

    pub fn product_port(&self) -> Option<u16> {
        self.product_port
    }

    /// The port of its metrics listener (`http.metrics_port` on
    /// `http.metrics_host`).
    pub fn metrics_port(&self) -> u16 {
        self.metrics_port
    }

    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        futures::future::try_join_all(self.servers).await?;
        for t in self.tasks {
            let _ = t.await;
        }
        Ok(())
    }
}
