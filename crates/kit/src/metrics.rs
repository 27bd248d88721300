//! Prometheus metrics: one registry per service, served in the text format on
//! a listener of its own (`http.metrics_port`), which no gateway routes to and
//! the chart's NetworkPolicy opens to the monitoring namespace only.
//!
//! What every service reports is registered here ([`Metrics::new`]): requests
//! by route template, method and status with their latency, requests in
//! flight, group-commit batches; and, read when scraped ([`Metrics::on_scrape`]),
//! the outbox backlog, the database pool, its NATS consumers and its dead
//! letters. A service registers its own beside them ([`Metrics::counter`],
//! [`Metrics::histogram`]).
//!
//! A registry of its own per service (not the process-wide default) keeps the
//! services of the one-process stack and of each test apart.

use actix_web::{dev::Server, web, App, HttpResponse, HttpServer};
use futures::{future::BoxFuture, FutureExt, TryStreamExt};
use prometheus::{core::Collector, HistogramOpts, Opts, Registry, TextEncoder};
use std::{
    net::TcpListener,
    sync::{Arc, Mutex},
    time::Duration,
};

/// Latency buckets, in seconds: 1 ms to 10 s.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Batch-size buckets (items per group commit).
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];
/// The route label of a request no route matched (bounded: never the path).
pub const UNMATCHED: &str = "unmatched";
/// The method label of a method outside [`METHOD_LABELS`] (bounded: never
/// the client's token, which may be any length and any spelling).
pub const OTHER_METHOD: &str = "other";
/// The methods labelled by name; any other is [`OTHER_METHOD`].
pub const METHOD_LABELS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// The label of a request method: its name when it is one of
/// [`METHOD_LABELS`], else [`OTHER_METHOD`]. Metrics and the access log use
/// it, so that a client cannot make a new series (or a 3 kB log field) per
/// made-up method.
pub fn method_label(method: &str) -> &'static str {
    METHOD_LABELS
        .into_iter()
        .find(|m| *m == method)
        .unwrap_or(OTHER_METHOD)
}
/// How long one scrape-time reading may take before it is skipped.
const SCRAPE_STEP_TIMEOUT: Duration = Duration::from_secs(2);

/// The metric types a service registers ([`Metrics::counter`] ...).
pub use prometheus::{Histogram, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec};

type Scraper = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

/// A service's metrics (cheap to clone: every field is shared).
#[derive(Clone)]
pub struct Metrics {
    /// The service's name (`org-billing`), also on its request spans.
    service: &'static str,
    registry: Registry,
    http: HttpMetrics,
    commits: CommitMetrics,
    scrapers: Arc<Mutex<Vec<Scraper>>>,
}

#[derive(Clone)]
struct HttpMetrics {
    requests: IntCounterVec,
    duration: HistogramVec,
    in_flight: IntGauge,
}

/// Group-commit batches by writer (its [`Batch::name`](crate::group_commit::Batch::name):
/// `apply_wallet_moves`, `apply_token_moves`, `agent-journal`).
#[derive(Clone)]
pub struct CommitMetrics {
    size: HistogramVec,
    seconds: HistogramVec,
}

impl CommitMetrics {
    /// One batch of `items` by `writer`, applied in `took`.
    pub fn observe(&self, writer: &str, items: usize, took: Duration) {
        self.size.with_label_values(&[writer]).observe(items as f64);
        self.seconds
            .with_label_values(&[writer])
            .observe(took.as_secs_f64());
    }
}

impl Metrics {
    pub fn new(service: &'static str) -> Metrics {
        let registry = Registry::new();
        let m = Metrics {
            service,
            http: HttpMetrics {
                requests: register(
                    &registry,
                    IntCounterVec::new(
                        Opts::new("hub_http_requests_total", "HTTP requests answered."),
                        &["method", "route", "status"],
                    ),
                ),
                duration: register(
                    &registry,
                    HistogramVec::new(
                        HistogramOpts::new(
                            "hub_http_request_duration_seconds",
                            "Time to answer an HTTP request.",
                        )
                        .buckets(LATENCY_BUCKETS.to_vec()),
                        &["method", "route"],
                    ),
                ),
                in_flight: register(
                    &registry,
                    IntGauge::new("hub_http_requests_in_flight", "HTTP requests being served."),
                ),
            },
            commits: CommitMetrics {
                size: register(
                    &registry,
                    HistogramVec::new(
                        HistogramOpts::new(
                            "hub_group_commit_batch_items",
                            "Items applied in one group-commit transaction.",
                        )
                        .buckets(BATCH_BUCKETS.to_vec()),
                        &["writer"],
                    ),
                ),
                seconds: register(
                    &registry,
                    HistogramVec::new(
                        HistogramOpts::new(
                            "hub_group_commit_duration_seconds",
                            "Time to apply and commit one group-commit batch.",
                        )
                        .buckets(LATENCY_BUCKETS.to_vec()),
                        &["writer"],
                    ),
                ),
            },
            registry,
            scrapers: Arc::default(),
        };
        // The process's log writer: lines it dropped rather than block.
        let dropped = m.counter_one(
            "hub_log_lines_dropped_total",
            "Log lines dropped because the log writer's buffer was full.",
        );
        m.on_scrape(move || {
            let dropped = dropped.clone();
            async move {
                let now = crate::telemetry::log_lines_dropped();
                dropped.inc_by(now.saturating_sub(dropped.get()));
            }
        });
        m
    }

    /// One counter of the kit's own, without labels.
    fn counter_one(&self, name: &str, help: &str) -> IntCounter {
        register(&self.registry, IntCounter::new(name, help))
    }

    /// The service's name.
    pub fn service(&self) -> &'static str {
        self.service
    }

    /// A counter family of the service's own.
    pub fn counter(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        register(
            &self.registry,
            IntCounterVec::new(Opts::new(name, help), labels),
        )
    }

    /// A gauge family of the service's own.
    pub fn gauge(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        register(
            &self.registry,
            IntGaugeVec::new(Opts::new(name, help), labels),
        )
    }

    /// A latency histogram family of the service's own ([`LATENCY_BUCKETS`]).
    pub fn histogram(&self, name: &str, help: &str, labels: &[&str]) -> HistogramVec {
        register(
            &self.registry,
            HistogramVec::new(
                HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec()),
                labels,
            ),
        )
    }

    /// The group-commit batch metrics.
    pub fn commits(&self) -> CommitMetrics {
        self.commits.clone()
    }

    /// Run `read` before every scrape (readings that are asked for, not
    /// counted: a backlog, a pool, a consumer). A reading that takes longer
    /// than two seconds is skipped for that scrape.
    pub fn on_scrape<F, Fut>(&self, read: F)
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        if let Ok(mut s) = self.scrapers.lock() {
            s.push(Arc::new(move || read().boxed()));
        }
    }

    /// The text exposition, after the scrape-time readings.
    pub async fn render(&self) -> String {
        let scrapers: Vec<Scraper> = self.scrapers.lock().map(|s| s.clone()).unwrap_or_default();
        futures::future::join_all(scrapers.iter().map(|read| async move {
            if tokio::time::timeout(SCRAPE_STEP_TIMEOUT, read())
                .await
                .is_err()
            {
                tracing::debug!("a metrics reading timed out");
            }
        }))
        .await;
        TextEncoder::new()
            .encode_to_string(&self.registry.gather())
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot encode metrics");
                String::new()
            })
    }

    /// One request entered: the guard counts it in flight until dropped.
    pub(crate) fn request_started(&self) -> InFlight {
        self.http.in_flight.inc();
        InFlight(self.http.in_flight.clone())
    }

    /// One request answered.
    pub(crate) fn request_done(&self, method: &str, route: &str, status: u16, took: Duration) {
        let method = method_label(method);
        let code = status_label(status);
        self.http
            .requests
            .with_label_values(&[method, route, code.as_ref()])
            .inc();
        self.http
            .duration
            .with_label_values(&[method, route])
            .observe(took.as_secs_f64());
    }

    /// The kit's scrape-time readings of a service with a database and
    /// NATS: outbox backlog, pool, consumers and dead letters.
    pub(crate) fn read_foundation(
        &self,
        pool: sqlx::PgPool,
        js: async_nats::jetstream::Context,
        naming: event_contracts::Naming,
    ) {
        // Published events leave the outbox: every row waits.
        let pending = self.gauge_one(
            "hub_outbox_pending_events",
            "Events written to the outbox and not yet published.",
        );
        let oldest = self.gauge_one(
            "hub_outbox_oldest_pending_age_seconds",
            "Age of the oldest unpublished outbox event (0 when none waits).",
        );
        let outbox_pool = pool.clone();
        self.on_scrape(move || {
            let (pool, pending, oldest) = (outbox_pool.clone(), pending.clone(), oldest.clone());
            async move {
                match sqlx::query!(
                    r#"SELECT count(*) AS "n!",
                              COALESCE(extract(epoch FROM clock_timestamp() - min(created_at)), 0)::float8 AS "age!"
                       FROM outbox"#
                )
                .fetch_one(&pool)
                .await
                {
                    Ok(r) => {
                        pending.set(r.n);
                        oldest.set(r.age as i64);
                    }
                    Err(e) => tracing::debug!(error = %e, "cannot read the outbox backlog"),
                }
            }
        });

        let connections = self.gauge(
            "hub_db_pool_connections",
            "Database connections of the pool, by state (in_use, idle).",
            &["state"],
        );
        let max = self.gauge_one(
            "hub_db_pool_max_connections",
            "Most connections the pool opens; requests wait when all are in use.",
        );
        let waits = self.gauge_one(
            "hub_db_pool_waiting",
            "1 while every connection is in use (requests wait for one), else 0.",
        );
        self.on_scrape(move || {
            let size = pool.size() as i64;
            let idle = pool.num_idle() as i64;
            let most = pool.options().get_max_connections() as i64;
            connections.with_label_values(&["in_use"]).set(size - idle);
            connections.with_label_values(&["idle"]).set(idle);
            max.set(most);
            waits.set(i64::from(idle == 0 && size >= most));
            futures::future::ready(())
        });

        let consumer = |name: &str, help: &str| self.gauge(name, help, &["consumer"]);
        let gauges = ConsumerGauges {
            pending: consumer(
                "hub_nats_consumer_pending",
                "Events of the stream not yet delivered to this consumer.",
            ),
            ack_pending: consumer(
                "hub_nats_consumer_ack_pending",
                "Events delivered to this consumer and not yet acknowledged.",
            ),
            redelivered: consumer(
                "hub_nats_consumer_redelivered",
                "Events delivered to this consumer more than once and not yet acknowledged.",
            ),
        };
        let dead = self.gauge_one(
            "hub_dead_letter_events",
            "Events of this service's consumers waiting in the DLQ (-1 when NATS cannot say).",
        );
        self.read_nats(js.client());
        // This service's consumers are named `<service>-...`.
        let prefix = format!("{}-", self.service);
        self.on_scrape(move || {
            let (js, naming, prefix, gauges, dead) = (
                js.clone(),
                naming.clone(),
                prefix.clone(),
                gauges.clone(),
                dead.clone(),
            );
            async move {
                let n = crate::deadletter::count(&js, &naming, &prefix).await;
                dead.set(n.map_or(-1, |n| n as i64));
                if let Err(e) = gauges.read(&js, &naming, &prefix).await {
                    tracing::debug!(error = %e, "cannot read the consumers");
                }
            }
        });
    }

    /// `hub_nats_connected`: 1 while `client` is connected to NATS, else 0.
    pub fn read_nats(&self, client: async_nats::Client) {
        let connected = self.gauge_one(
            "hub_nats_connected",
            "1 while the NATS connection is up, else 0.",
        );
        self.on_scrape(move || {
            connected.set(i64::from(
                client.connection_state() == async_nats::connection::State::Connected,
            ));
            futures::future::ready(())
        });
    }

    fn gauge_one(&self, name: &str, help: &str) -> IntGauge {
        register(&self.registry, IntGauge::new(name, help))
    }
}

/// The status label: the codes the services answer without an allocation.
fn status_label(status: u16) -> std::borrow::Cow<'static, str> {
    let common = match status {
        200 => "200",
        201 => "201",
        202 => "202",
        204 => "204",
        304 => "304",
        400 => "400",
        401 => "401",
        402 => "402",
        403 => "403",
        404 => "404",
        405 => "405",
        409 => "409",
        413 => "413",
        415 => "415",
        422 => "422",
        429 => "429",
        500 => "500",
        502 => "502",
        503 => "503",
        504 => "504",
        other => return other.to_string().into(),
    };
    common.into()
}

/// Decrements the in-flight gauge when the request ends (or is dropped).
pub(crate) struct InFlight(IntGauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[derive(Clone)]
struct ConsumerGauges {
    pending: IntGaugeVec,
    ack_pending: IntGaugeVec,
    redelivered: IntGaugeVec,
}

impl ConsumerGauges {
    /// Every durable consumer of this service (named `<service>-...`) on the
    /// event streams.
    async fn read(
        &self,
        js: &async_nats::jetstream::Context,
        naming: &event_contracts::Naming,
        prefix: &str,
    ) -> anyhow::Result<()> {
        let suffix = naming.durable("");
        for (base, _) in event_contracts::STREAMS {
            let stream = js.get_stream(naming.stream(base)).await?;
            let mut consumers = stream.consumers();
            while let Some(info) = consumers.try_next().await? {
                let name = info.name.as_str();
                let Some(base) = name
                    .strip_suffix(suffix.as_str())
                    .filter(|b| b.starts_with(prefix))
                else {
                    continue;
                };
                self.pending
                    .with_label_values(&[base])
                    .set(info.num_pending as i64);
                self.ack_pending
                    .with_label_values(&[base])
                    .set(info.num_ack_pending as i64);
                self.redelivered
                    .with_label_values(&[base])
                    .set(info.num_redelivered as i64);
            }
        }
        Ok(())
    }
}

/// Register `c`. Metric names and labels are constants of the code: an
/// invalid or twice-registered one is a bug that fails the service's start
/// (and so every test that starts it), not something a request can cause.
fn register<C: Collector + Clone + 'static>(
    registry: &Registry,
    c: Result<C, prometheus::Error>,
) -> C {
    let c = c.expect("a valid metric definition");
    registry
        .register(Box::new(c.clone()))
        .expect("each metric registered once");
    c
}

/// `GET /metrics`.
async fn scrape(m: web::Data<Metrics>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(prometheus::TEXT_FORMAT)
        .body(m.render().await)
}

/// Serve `metrics` on `listener` (`GET /metrics` only, one worker), until
/// `cancel` fires.
pub fn serve(
    listener: TcpListener,
    metrics: Metrics,
    cancel: tokio_util::sync::CancellationToken,
) -> anyhow::Result<(u16, Server)> {
    let port = listener.local_addr()?.port();
    let data = web::Data::new(metrics);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .route("/metrics", crate::methods::get().to(scrape))
            .default_service(web::to(|| async {
                crate::error::json_error(actix_web::http::StatusCode::NOT_FOUND, "no such route")
            }))
    })
    .listen(listener)?
    .workers(1)
    .disable_signals()
    .shutdown_timeout(5)
    .run();
    crate::shutdown::stop_server_on(cancel, server.handle());
    Ok((port, server))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line<'a>(text: &'a str, series: &str) -> Option<&'a str> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
    }

    #[tokio::test]
    async fn requests_are_counted_by_route_and_in_flight_until_they_end() {
        let m = Metrics::new("test");
        let a = m.request_started();
        let b = m.request_started();
        assert_eq!(
            line(&m.render().await, "hub_http_requests_in_flight"),
            Some("2")
        );
        drop(a);
        m.request_done("GET", "/v1/things/{id}", 200, Duration::from_millis(3));
        drop(b);
        m.request_done("GET", "/v1/things/{id}", 200, Duration::from_millis(30));
        let text = m.render().await;
        assert_eq!(line(&text, "hub_http_requests_in_flight"), Some("0"));
        assert_eq!(
            line(
                &text,
                r#"hub_http_requests_total{method="GET",route="/v1/things/{id}",status="200"}"#
            ),
            Some("2")
        );
        assert_eq!(
            line(
                &text,
                r#"hub_http_request_duration_seconds_bucket{method="GET",route="/v1/things/{id}",le="0.005"}"#
            ),
            Some("1")
        );
    }

    #[tokio::test]
    async fn made_up_methods_share_one_label() {
        let m = Metrics::new("test");
        for method in ["GET", "DELETE", "TRACE", "get", &"X".repeat(3000)] {
            m.request_done(method, UNMATCHED, 405, Duration::from_millis(1));
        }
        let text = m.render().await;
        assert_eq!(
            line(
                &text,
                r#"hub_http_requests_total{method="other",route="unmatched",status="405"}"#
            ),
            Some("3")
        );
        assert!(text.contains(r#"method="GET""#) && text.contains(r#"method="DELETE""#));
        assert!(!text.contains("TRACE") && !text.contains("XXX"));
        assert_eq!(method_label("OPTIONS"), "OPTIONS");
        assert_eq!(method_label("PROPFIND"), OTHER_METHOD);
    }

    #[test]
    fn status_labels_are_the_codes() {
        for code in 100..=599u16 {
            assert_eq!(status_label(code), code.to_string());
        }
    }

    #[tokio::test]
    async fn scrape_readings_run_before_each_render_and_registries_stay_apart() {
        let (one, other) = (Metrics::new("one"), Metrics::new("other"));
        let g = one.gauge("hub_test_readings", "Readings taken.", &[]);
        let g2 = g.clone();
        one.on_scrape(move || {
            g2.with_label_values(&[] as &[&str]).inc();
            futures::future::ready(())
        });
        one.render().await;
        assert_eq!(line(&one.render().await, "hub_test_readings"), Some("2"));
        assert!(!other.render().await.contains("hub_test_readings"));
        one.commits().observe("w", 3, Duration::from_millis(1));
        assert!(one
            .render()
            .await
            .contains(r#"hub_group_commit_batch_items_sum{writer="w"} 3"#));
    }
}
