//! HTTP plumbing shared by every service: JSON extractor limits and errors,
//! request ids and spans, the JSON 404, and the health probes.

use crate::{error::json_error, ApiError};
use actix_web::{
    body::MessageBody,
    dev::{ServiceRequest, ServiceResponse},
    error::{JsonPayloadError, PathError, QueryPayloadError},
    http::{header::HeaderValue, StatusCode},
    middleware::Next,
    web, HttpMessage, HttpRequest, HttpResponse,
};
use opentelemetry::propagation::Extractor;
use std::time::{Duration, Instant};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Response header by which a service tells the gateway that what `user_id`'s
/// bearers resolve to has changed (logout, name, memberships): the forwarding
/// gateway drops that user's cached identities before answering; the other
/// replicas hear it over NATS. Gateways never pass it on to clients.
pub const IDENTITY_CHANGED_HEADER: &str = "x-hub-identity-changed";

/// The [`IDENTITY_CHANGED_HEADER`] for `user_id`, for `insert_header`.
pub fn identity_changed(user_id: hub_domain::UserId) -> (&'static str, String) {
    (IDENTITY_CHANGED_HEADER, user_id.to_string())
}

/// JSON bodies: bounded, and every failure a JSON `{error}` with the right status.
pub fn json_config(limit: usize) -> web::JsonConfig {
    web::JsonConfig::default()
        .limit(limit)
        .error_handler(|err, _req| {
            let api = match &err {
                JsonPayloadError::ContentType => ApiError::UnsupportedMediaType,
                JsonPayloadError::Overflow { .. }
                | JsonPayloadError::OverflowKnownLength { .. } => ApiError::PayloadTooLarge,
                JsonPayloadError::Deserialize(e) if e.is_data() => {
                    ApiError::BadRequest(format!("invalid request body: {e}"))
                }
                _ => ApiError::bad_request("malformed JSON body"),
            };
            api.into()
        })
}

pub fn path_config() -> web::PathConfig {
    web::PathConfig::default().error_handler(|err: PathError, _req| {
        tracing::debug!(error = %err, "bad path parameter");
        ApiError::bad_request("invalid path parameter: expected a uuid").into()
    })
}

pub fn query_config() -> web::QueryConfig {
    web::QueryConfig::default().error_handler(|err: QueryPayloadError, _req| {
        ApiError::BadRequest(format!("invalid query string: {err}")).into()
    })
}

/// Register the extractor configs above on an app or scope.
pub fn configure_extractors(cfg: &mut web::ServiceConfig, max_body_bytes: usize) {
    cfg.app_data(json_config(max_body_bytes))
        .app_data(path_config())
        .app_data(query_config());
}

/// The default service: a path served with other methods answers a JSON 405
/// with `Allow` ([`crate::methods`]), an unknown path a JSON 404.
pub async fn not_found(req: HttpRequest) -> HttpResponse {
    crate::methods::not_allowed(&req)
        .unwrap_or_else(|| json_error(StatusCode::NOT_FOUND, "no such route"))
}

struct HeaderExtractor<'a>(&'a actix_web::http::header::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// The request id of this request (set by [`request_span`]).
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// The request id of the request being served on this task, if any: calls
/// made on its behalf (peers, identity) carry it on, so that one id names
/// the request in every service's log.
pub fn current_request_id() -> Option<String> {
    crate::log_line::with_request_id(str::to_owned)
}

fn valid_request_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// The route label of a request that no route of the app matched but whose
/// handler knows what it served (the gateway: the upstream it forwarded to),
/// set in the request's extensions. Bounded: never a raw path.
#[derive(Clone, Copy, Debug)]
pub struct RouteLabel(pub &'static str);

/// Middleware: a span per request, parented on incoming W3C trace context, with
/// a request id taken from `x-request-id` (when sane) or made fresh, and echoed;
/// the request counted on the app's [`Metrics`](crate::metrics::Metrics) (when
/// it has one) by route template, and written to the access log.
pub async fn request_span(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let request_id = req
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|s| valid_request_id(s))
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    req.extensions_mut().insert(RequestId(request_id.clone()));
    let metrics = req
        .app_data::<web::Data<crate::metrics::Metrics>>()
        .cloned();
    // Exported, the span carries what a trace shows of the request. Not
    // exported, it only gives the lines logged inside it their request id
    // (the access line has the rest): each field of a span is formatted when
    // it is made and again when one is recorded, whether a line is ever
    // logged in it or not, and that was a fifth of the gateway's time.
    //
    // Not exported, there is no span at all: a span costs its slot in the
    // registry, its fields' formatting, and an enter and exit at every poll.
    // The log's lines take the request id from the task instead
    // ([`crate::log_line`]), written as the span would have been.
    let exporting = crate::telemetry::exporting_traces();
    let span = if exporting {
        tracing::info_span!(
            "http",
            service = metrics.as_ref().map_or("", |m| m.service()),
            method = %crate::metrics::method_label(req.method().as_str()),
            path = %req.path(),
            request_id = %request_id,
            status = tracing::field::Empty,
        )
    } else {
        tracing::Span::none()
    };
    // Continued only when the client sent a context: no extraction (and no
    // context to attach) for the many requests that come without one.
    if req.headers().contains_key(crate::telemetry::TRACEPARENT) {
        let parent = opentelemetry::global::get_text_map_propagator(|p| {
            p.extract(&HeaderExtractor(req.headers()))
        });
        let _ = span.set_parent(parent);
    }
    let in_flight = metrics.as_ref().map(|m| m.request_started());
    // Bounded: a made-up method is `other` in metrics and in the access log.
    let method = crate::metrics::method_label(req.method().as_str());
    let started = Instant::now();
    let mut res = crate::log_line::CURRENT_REQUEST_ID
        .scope(request_id.clone(), next.call(req))
        .instrument(span.clone())
        .await?;
    let took = started.elapsed();
    drop(in_flight);
    let status = res.status().as_u16();
    if exporting {
        span.record("status", status);
    }
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        res.headers_mut().insert(
            actix_web::http::header::HeaderName::from_static(REQUEST_ID_HEADER),
            v,
        );
    }
    let route = route_label(res.request());
    if let Some(m) = &metrics {
        m.request_done(method, &route, status, took);
    }
    let ms = took.as_secs_f64() * 1000.0;
    // Probes come every few seconds from the kubelet: counted, not logged.
    // The access line is built once: outside the request's span (whose
    // fields it would repeat), every field a plain value the formatter writes
    // as it is (no Display round trip through a String per field).
    if !matches!(route.as_ref(), "/healthz" | "/readyz") {
        tracing::info!(
            target: crate::telemetry::ACCESS_LOG_TARGET,
            service = metrics.as_ref().map_or("", |m| m.service()),
            method,
            route = route.as_ref(),
            status,
            ms,
            request_id = request_id.as_str(),
            "request"
        );
    }
    // A 503 is an outage or a refusal whose cause is logged where it is
    // known (throttled: see `outage`), not once per request here.
    if status >= 500 && status != 503 {
        let _enter = span.enter();
        tracing::warn!(
            status,
            ms,
            route = route.as_ref(),
            request_id = request_id.as_str(),
            "request failed"
        );
    }
    Ok(res)
}

/// The route template the app matched (`/v1/orgs/{org_id}`), else the
/// handler's [`RouteLabel`], else [`UNMATCHED`](crate::metrics::UNMATCHED).
fn route_label(req: &actix_web::HttpRequest) -> std::borrow::Cow<'static, str> {
    if let Some(p) = req.match_pattern() {
        return p.into();
    }
    req.extensions()
        .get::<RouteLabel>()
        .map_or(crate::metrics::UNMATCHED, |l| l.0)
        .into()
}

/// How long a readiness check waits for Postgres: below the probe's own
/// timeout (the Helm chart's `timeoutSeconds: 2`), so that an unreachable
/// database answers 503 rather than a probe timeout.
pub const READY_CHECK_TIMEOUT: Duration = Duration::from_millis(1000);

/// What readiness checks: Postgres and NATS, when the service has them. It
/// goes false while either cannot be reached and true again by itself (the
/// pool reconnects, the NATS client reconnects); a passing check also ends
/// the dependency's outage in the throttled log ([`crate::outage`]).
#[derive(Clone, Default)]
pub struct Readiness {
    pub db: Option<sqlx::PgPool>,
    pub nats: Option<async_nats::Client>,
}

impl Readiness {
    pub async fn check(&self) -> Result<(), &'static str> {
        use crate::outage::{report_recovered, Dependency};
        if let Some(db) = &self.db {
            let ping = sqlx::query_scalar!(r#"SELECT 1 AS "one!""#).fetch_one(db);
            match tokio::time::timeout(READY_CHECK_TIMEOUT, ping).await {
                Ok(Ok(_)) => report_recovered(Dependency::Postgres),
                _ => return Err("database unreachable"),
            }
        }
        if let Some(n) = &self.nats {
            if n.connection_state() != async_nats::connection::State::Connected {
                return Err("nats unreachable");
            }
            report_recovered(Dependency::Nats);
        }
        Ok(())
    }
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(serde_json::json!({"status": "ok"}))
}

async fn readyz(r: web::Data<Readiness>) -> HttpResponse {
    match r.check().await {
        Ok(()) => HttpResponse::Ok().json(serde_json::json!({"status": "ready"})),
        Err(why) => json_error(StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

/// `/healthz` (liveness: the process answers) and `/readyz` (its dependencies answer).
pub fn health_routes(cfg: &mut web::ServiceConfig, readiness: Readiness) {
    cfg.app_data(web::Data::new(readiness))
        .route("/healthz", crate::methods::get().to(healthz))
        .route("/readyz", crate::methods::get().to(readyz));
}

/// The `healthcheck` subcommand: GET http://127.0.0.1:{port}/healthz, Ok on 200.
pub async fn probe(port: u16) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(3), s.read_to_end(&mut buf)).await??;
    anyhow::ensure!(buf.starts_with(b"HTTP/1.1 200"), "unhealthy");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::valid_request_id;
    use actix_web::{middleware::from_fn, test as web_test, web, App, HttpResponse};

    /// What a subscriber with the kit's filter writes while `f` serves one
    /// request to `/things/42` (route `/things/{id}`) through the middleware.
    async fn logged(access_log: bool) -> String {
        logged_as(access_log, false).await
    }

    /// The same, formatted as production formats it (JSON) when `json`.
    async fn logged_as(access_log: bool, json: bool) -> String {
        let sink = crate::log_line::tests::Sink::default();
        let writer = sink.clone();
        let filter = crate::telemetry::filter("info", access_log).expect("filter");
        let _default = if json {
            use tracing_subscriber::layer::SubscriberExt;
            tracing::subscriber::set_default(
                tracing_subscriber::registry()
                    .with(filter)
                    .with(crate::telemetry::json_layer(move || writer.clone())),
            )
        } else {
            tracing::subscriber::set_default(
                tracing_subscriber::fmt()
                    .with_env_filter(filter)
                    .with_ansi(false)
                    .with_writer(move || writer.clone())
                    .finish(),
            )
        };
        let app = web_test::init_service(App::new().wrap(from_fn(super::request_span)).route(
            "/things/{id}",
            web::get().to(|| async {
                tracing::info!("handled");
                HttpResponse::Ok().finish()
            }),
        ))
        .await;
        let req = web_test::TestRequest::get()
            .uri("/things/42")
            .insert_header((super::REQUEST_ID_HEADER, "req-7"))
            .to_request();
        assert_eq!(web_test::call_service(&app, req).await.status(), 200);
        let out = sink.0.lock().map(|v| v.clone()).unwrap_or_default();
        String::from_utf8_lossy(&out).into_owned()
    }

    #[actix_web::test]
    async fn the_access_log_has_the_route_template_and_is_off_by_configuration() {
        let on = logged(true).await;
        let line = on
            .lines()
            .find_map(|l| l.split_once("hub_access: ").map(|(_, event)| event))
            .unwrap_or_else(|| panic!("no access-log line in {on}"));
        for want in [
            "method=\"GET\"",
            "route=\"/things/{id}\"",
            "status=200",
            "request_id=\"req-7\"",
            "ms=",
        ] {
            assert!(line.contains(want), "{want} in {line}");
        }
        let off = logged(false).await;
        assert!(!off.contains("hub_access"), "{off}");
    }

    #[actix_web::test]
    async fn the_json_access_line_holds_each_field_once_and_no_span() {
        let out = logged_as(true, true).await;
        let line: serde_json::Value = out
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["target"] == "hub_access")
            .unwrap_or_else(|| panic!("no access-log line in {out}"));
        for (field, want) in [
            ("method", serde_json::json!("GET")),
            ("route", serde_json::json!("/things/{id}")),
            ("status", serde_json::json!(200)),
            ("request_id", serde_json::json!("req-7")),
            ("message", serde_json::json!("request")),
        ] {
            assert_eq!(line[field], want, "{field} in {line}");
        }
        assert!(line["ms"].is_f64(), "{line}");
        // Built once: not inside the request's span, whose fields (method,
        // path, request id) it would repeat.
        assert!(
            line.get("span").is_none() && line.get("spans").is_none(),
            "{line}"
        );
        // A line logged inside the request carries its request id, and, with
        // no trace exported, nothing else of the span (issue 33: the span's
        // fields were formatted at every request whether a line used them or not).
        let inside: serde_json::Value = out
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["message"] == "handled")
            .unwrap_or_else(|| panic!("no line from the handler in {out}"));
        assert_eq!(
            inside["span"],
            serde_json::json!({"name": "http", "request_id": "req-7"}),
            "{inside}"
        );
    }

    #[test]
    fn request_ids_are_bounded_and_plain() {
        assert!(valid_request_id("abc-123_x.y"));
        assert!(!valid_request_id(""));
        assert!(!valid_request_id("a b"));
        assert!(!valid_request_id("a\nb"));
        assert!(!valid_request_id(&"a".repeat(129)));
    }
}

/// A request body read from a JSON object only. serde's derive reads a struct
/// from an array as well (`[null, null]` is a patch of two absent fields), so
/// a body whose fields are all optional takes `web::Json<Object<T>>`: anything
/// but an object is the extractor's 400, after the extractors before it (the
/// caller's authority) have answered.
#[derive(Debug)]
pub struct Object<T>(pub T);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Fields<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(Fields(std::marker::PhantomData))
            .map(Object)
    }
}

#[cfg(test)]
mod object_tests {
    use super::Object;

    #[derive(serde::Deserialize, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Patch {
        a: Option<i32>,
        b: Option<i32>,
    }

    #[test]
    fn only_an_object_is_read() {
        let ok: Object<Patch> = serde_json::from_str(r#"{"a": 1}"#).expect("an object");
        assert_eq!(
            ok.0,
            Patch {
                a: Some(1),
                b: None
            }
        );
        assert!(
            serde_json::from_str::<Patch>("[null, null]").is_ok(),
            "serde's own reading"
        );
        for bad in ["[null, null]", "[1, 2]", "null", "3", r#"{"c": 1}"#] {
            assert!(serde_json::from_str::<Object<Patch>>(bad).is_err(), "{bad}");
        }
    }
}
