//! The catch-all handler: route, resolve the bearer, sign, forward.

use crate::{
    cache::{self, IdentityCache, Resolved},
    clientip::TrustedProxies,
    flights::Flights,
    metrics::{status_class, GatewayMetrics, Lookup},
    routing::{self, Router},
};
use actix_web::{
    http::{header, StatusCode},
    web, HttpMessage, HttpRequest, HttpResponse,
};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use hub_domain::{Credential, CredentialKind, Identity, OrgId, UserId};
use service_kit::{
    assertion::{self, Minter, RequestFacts, RESERVED_HEADER_PREFIXES},
    error::json_error,
    http::RequestId,
    telemetry::TRACEPARENT,
};
use std::{collections::HashMap, net::IpAddr, sync::Arc, time::Duration};
use uuid::Uuid;

/// Which host a listener serves.
#[derive(Clone, Copy)]
pub struct HostKind {
    pub product: bool,
}

pub struct Gateway {
    pub router: Router,
    /// One per receiving service, each with that service's own key.
    pub minters: HashMap<String, Minter>,
    /// Memberships carried in an assertion at most.
    pub assertion_memberships: usize,
    pub cache: IdentityCache,
    /// Resolutions in progress, shared by concurrent misses for the same bearer.
    pub flights: Flights<Result<Arc<Resolved>, ResolveError>>,
    /// service -> base URL; absent or empty = not deployed.
    pub upstreams: HashMap<String, String>,
    pub trusted: TrustedProxies,
    pub resolve_timeout: Duration,
    pub upstream_timeout: Duration,
    pub max_body_bytes: usize,
    /// Trust for `https://` upstreams.
    pub tls: service_kit::tls::TlsSettings,
    pub metrics: GatewayMetrics,
}

/// The HTTP client for calls to services (one per worker), over TLS for
/// `https://` upstreams (the platform's roots plus `tls.extra_ca_file`).
pub fn upstream_client(tls: &service_kit::tls::TlsSettings) -> anyhow::Result<reqwest::Client> {
    Ok(service_kit::tls::http_client(tls)?
        .pool_max_idle_per_host(256)
        .pool_idle_timeout(Duration::from_secs(60))
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(2))
        .build()?)
}

/// Hop-by-hop headers (RFC 9110 7.6.1), ones the gateway sets itself, and the
/// caller's credential: only identity's bearer resolution sees the bearer
/// (`fetch`); services act on the signed assertion, so none of them (the
/// webhook-dispatcher talks to the internet) ever holds a live token it could
/// replay.
const DROP_REQUEST: [&str; 14] = [
    "authorization",
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "x-forwarded-for",
    "forwarded",
];
const DROP_RESPONSE: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
];

fn reserved(name: &str) -> bool {
    RESERVED_HEADER_PREFIXES.iter().any(|p| name.starts_with(p))
}

#[derive(Clone)]
pub enum ResolveError {
    Unauthorized(&'static str),
    Unavailable,
}

fn bearer(req: &HttpRequest) -> Result<&str, &'static str> {
    const MALFORMED: &str = "malformed authorization header";
    let v = req
        .headers()
        .get(header::AUTHORIZATION)
        .ok_or("missing bearer token")?
        .to_str()
        .map_err(|_| MALFORMED)?;
    let (scheme, token) = v.split_once(' ').ok_or(MALFORMED)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() || token.len() > 512 {
        return Err(MALFORMED);
    }
    Ok(token)
}

/// The organization a request names: `/v1/organizations/{id}/...` or `org_id=`.
fn named_org(path: &str, query: &str) -> Option<OrgId> {
    let mut segs = path.split('/').filter(|s| !s.is_empty());
    if let Some(id) = segs
        .by_ref()
        .skip_while(|s| *s != "organizations")
        .nth(1)
        .and_then(|s| s.parse().ok())
    {
        return Some(id);
    }
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("org_id="))
        .and_then(|v| v.parse().ok())
}

/// The identity to assert: every membership when they fit, else the named
/// organization's first and the rest up to `max` (and the truncation flagged).
fn bounded_identity(identity: &Identity, max: usize, path: &str, query: &str) -> (Identity, bool) {
    if identity.memberships.len() <= max {
        return (identity.clone(), false);
    }
    let named = named_org(path, query);
    let mut memberships = Vec::with_capacity(max);
    memberships.extend(
        identity
            .memberships
            .iter()
            .filter(|m| Some(m.org_id) == named)
            .cloned(),
    );
    memberships.extend(
        identity
            .memberships
            .iter()
            .filter(|m| Some(m.org_id) != named)
            .take(max.saturating_sub(memberships.len()))
            .cloned(),
    );
    (
        Identity {
            user_id: identity.user_id,
            email: identity.email.clone(),
            name: identity.name.clone(),
            staff: identity.staff,
            memberships,
        },
        true,
    )
}

impl Gateway {
    fn upstream(&self, service: &str) -> Option<&str> {
        self.upstreams
            .get(service)
            .map(String::as_str)
            .filter(|u| !u.is_empty())
    }

    /// The bearer's identity: from the cache, else from identity's `/v1/auth/me`.
    async fn resolve(
        &self,
        client: &reqwest::Client,
        token: &str,
        ip: Option<IpAddr>,
        request_id: &str,
    ) -> Result<Arc<Resolved>, ResolveError> {
        let k = cache::key(token);
        if let Some(hit) = self.cache.get(&k) {
            self.metrics.bearer(Lookup::Hit);
            return Ok(hit);
        }
        if self.cache.was_refused(&k) {
            self.metrics.bearer(Lookup::Refused);
            return Err(ResolveError::Unauthorized("invalid or expired credential"));
        }
        let mut led = false;
        let answer = self
            .flights
            .run(k, || {
                led = true;
                self.fetch(client, token, k, ip, request_id)
            })
            .await;
        self.metrics
            .bearer(if led { Lookup::Miss } else { Lookup::Joined });
        answer
    }

    /// Ask identity's `/v1/auth/me`; cache what it answers.
    async fn fetch(
        &self,
        client: &reqwest::Client,
        token: &str,
        k: cache::Key,
        ip: Option<IpAddr>,
        request_id: &str,
    ) -> Result<Arc<Resolved>, ResolveError> {
        let epoch = self.cache.epoch();
        let ip = ip.map(|i| i.to_string()).unwrap_or_default();
        let base = self.upstream("identity").ok_or(ResolveError::Unavailable)?;
        let minter = self
            .minters
            .get("identity")
            .ok_or(ResolveError::Unavailable)?;
        let (a, sig) = minter.sign(
            None,
            None,
            false,
            &RequestFacts {
                method: "GET",
                path_and_query: "/v1/auth/me",
                body: b"",
                idempotency_key: None,
                ip: &ip,
                request_id,
                deadline_ms: None,
            },
        );
        let asked = std::time::Instant::now();
        let resp = client
            .get(format!("{base}/v1/auth/me"))
            .bearer_auth(token)
            .header(assertion::ASSERTION_HEADER, a)
            .header(assertion::SIGNATURE_HEADER, sig)
            .header(service_kit::http::REQUEST_ID_HEADER, request_id)
            .headers(service_kit::telemetry::trace_headers())
            .timeout(self.resolve_timeout)
            .send()
            .await
            .map_err(|e| {
                self.metrics.identity("unreachable", asked.elapsed());
                tracing::warn!(error = %e, "identity unreachable");
                ResolveError::Unavailable
            })?;
        self.metrics
            .identity(status_class(resp.status().as_u16()), asked.elapsed());
        match resp.status().as_u16() {
            200 => {}
            // Only a credential identity looked up and refused is remembered;
            // any other 401 (identity refusing our own assertion: clock skew,
            // a key rotation) is our fault, not the client's.
            401 if resp.headers().contains_key(identity_headers::REFUSED) => {
                self.cache.remember_refused(k);
                return Err(ResolveError::Unauthorized("invalid or expired credential"));
            }
            401 => {
                tracing::error!("identity refused the gateway's own assertion (keys or clocks?)");
                return Err(ResolveError::Unavailable);
            }
            s => {
                tracing::warn!(status = s, "identity answered a resolution with an error");
                return Err(ResolveError::Unavailable);
            }
        }
        let h = resp.headers();
        let kind = h
            .get(identity_headers::KIND)
            .and_then(|v| v.to_str().ok())
            .and_then(CredentialKind::parse);
        let id = h
            .get(identity_headers::ID)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| Uuid::parse_str(v).ok());
        let expires_at = h
            .get(identity_headers::EXPIRES)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<i64>().ok());
        let (Some(kind), Some(id), Some(expires_at)) = (kind, id, expires_at) else {
            tracing::warn!("identity resolution without credential headers");
            return Err(ResolveError::Unavailable);
        };
        let body = resp.bytes().await.map_err(|_| ResolveError::Unavailable)?;
        let identity: Identity = serde_json::from_slice(&body).map_err(|e| {
            tracing::warn!(error = %e, "identity resolution body did not parse");
            ResolveError::Unavailable
        })?;
        // Re-serialize so that the body served from the cache is exactly the Identity shape.
        let body = Bytes::from(serde_json::to_vec(&identity).unwrap_or_default());
        let resolved = Arc::new(Resolved {
            identity,
            credential: Credential { kind, id },
            body,
            expires_at,
        });
        self.cache.insert(k, resolved.clone(), epoch);
        Ok(resolved)
    }
}

/// Header names identity uses to tell which credential a bearer is.
pub mod identity_headers {
    pub const KIND: &str = "x-hub-credential-kind";
    pub const ID: &str = "x-hub-credential-id";
    pub const EXPIRES: &str = "x-hub-credential-expires";
    /// On a 401: the bearer itself was looked up and refused.
    pub const REFUSED: &str = "x-hub-credential-refused";
}

async fn read_body(mut payload: web::Payload, limit: usize) -> Result<Bytes, HttpResponse> {
    let mut buf = BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk =
            chunk.map_err(|_| json_error(StatusCode::BAD_REQUEST, "unreadable request body"))?;
        if buf.len() + chunk.len() > limit {
            return Err(json_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request body too large",
            ));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

pub async fn handle(
    req: HttpRequest,
    payload: web::Payload,
    gw: web::Data<Gateway>,
    host: web::Data<HostKind>,
    client: web::Data<reqwest::Client>,
) -> HttpResponse {
    let method = req.method().clone();
    // A path the gateway serves itself (the probes), with another method.
    if let Some(resp) = service_kit::methods::not_allowed(&req) {
        return resp;
    }
    // One spelling of the path before anything reads it (routing included).
    if let Err(e) = service_kit::path::check(req.path()) {
        return json_error(StatusCode::BAD_REQUEST, e.message());
    }
    let Some(target) = gw.router.route(host.product, req.path()) else {
        return json_error(StatusCode::NOT_FOUND, "no such route");
    };
    let (service, path) = (target.service, target.path);
    if let Some(name) = hub_domain::ServiceName::parse(service) {
        req.extensions_mut()
            .insert(service_kit::http::RouteLabel(name.as_str()));
    }
    // Only the methods the route forwards, before anything else reads the
    // request (the credential check included: public paths too).
    if !target.methods.serves(&method) {
        return method_not_allowed(target.methods);
    }
    let request_id = req
        .extensions()
        .get::<RequestId>()
        .map(|r| r.0.clone())
        .unwrap_or_else(|| Uuid::new_v4().to_string());
    let forwarded: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|v| v.to_str().ok())
        .collect();
    let client_addr = gw
        .trusted
        .client_addr(req.peer_addr().map(|a| a.ip()), &forwarded);

    if let Some(len) = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
    {
        if len > gw.max_body_bytes {
            return json_error(StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
        }
    }

    // Public endpoints pass without a token; everything else needs one.
    let resolved = if gw.router.is_public(method.as_str(), path) {
        None
    } else {
        let token = match bearer(&req) {
            Ok(t) => t,
            Err(m) => return json_error(StatusCode::UNAUTHORIZED, m),
        };
        match gw.resolve(&client, token, client_addr, &request_id).await {
            Ok(r) => Some(r),
            Err(ResolveError::Unauthorized(m)) => return json_error(StatusCode::UNAUTHORIZED, m),
            Err(ResolveError::Unavailable) => return unreachable_identity(),
        }
    };

    // The hottest path of the platform is answered here, from the cache.
    if method == actix_web::http::Method::GET && path == "/v1/auth/me" {
        if let Some(r) = &resolved {
            req.extensions_mut()
                .insert(service_kit::http::RouteLabel("/v1/auth/me"));
            return HttpResponse::Ok()
                .content_type("application/json")
                .body(r.body.clone());
        }
    }

    let (Some(base), Some(minter)) = (gw.upstream(service), gw.minters.get(service)) else {
        return json_error(StatusCode::SERVICE_UNAVAILABLE, "service not available");
    };
    let body = match read_body(payload, gw.max_body_bytes).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };

    let mut headers = reqwest::header::HeaderMap::with_capacity(req.headers().len() + 4);
    // With tracing on, the service's span is a child of the gateway's (itself
    // the client's child when one came): the client's own context stays here.
    let context = service_kit::telemetry::trace_headers();
    for (name, value) in req.headers() {
        let n = name.as_str();
        if DROP_REQUEST.contains(&n) || reserved(n) || n == "x-real-ip" || n == "x-request-id" {
            continue;
        }
        if !context.is_empty() && (n == TRACEPARENT || n == "tracestate") {
            continue;
        }
        if let (Ok(n), Ok(v)) = (
            reqwest::header::HeaderName::from_bytes(n.as_bytes()),
            reqwest::header::HeaderValue::from_bytes(value.as_bytes()),
        ) {
            headers.append(n, v);
        }
    }
    headers.extend(context);
    // The URL as it will be sent: its path is the routed path byte for byte
    // (else 400), its query as the parser normalized it; the assertion binds
    // exactly what the service will receive.
    let url = match routing::forward_url(base, path, req.query_string()) {
        Ok(url) => url,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, e.message()),
    };
    let path_and_query = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };
    let idempotency_key = match req.headers().get(assertion::IDEMPOTENCY_HEADER) {
        None => None,
        Some(v) => match v.to_str() {
            Ok(v) => Some(v),
            Err(_) => {
                return json_error(
                    StatusCode::BAD_REQUEST,
                    "Idempotency-Key must be visible ASCII",
                )
            }
        },
    };
    let (identity, truncated) = match &resolved {
        Some(r) => {
            let (i, t) = bounded_identity(
                &r.identity,
                gw.assertion_memberships,
                url.path(),
                url.query().unwrap_or(""),
            );
            (Some(i), t)
        }
        None => (None, false),
    };
    let (a, sig) = minter.sign(
        identity,
        resolved.as_ref().map(|r| r.credential),
        truncated,
        &RequestFacts {
            method: method.as_str(),
            path_and_query: &path_and_query,
            body: &body,
            idempotency_key,
            ip: &client_addr.map(|i| i.to_string()).unwrap_or_default(),
            request_id: &request_id,
            // The gateway answers 504 then: services start nothing they could
            // not finish before it (the wallet writer, for one).
            deadline_ms: Some(
                (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
                    + gw.upstream_timeout.as_millis() as i64,
            ),
        },
    );
    for (n, v) in [
        (assertion::ASSERTION_HEADER, a.as_str()),
        (assertion::SIGNATURE_HEADER, sig.as_str()),
        (service_kit::http::REQUEST_ID_HEADER, request_id.as_str()),
    ] {
        if let Ok(v) = reqwest::header::HeaderValue::from_str(v) {
            headers.insert(n, v);
        }
    }
    let Ok(m) = reqwest::Method::from_bytes(method.as_str().as_bytes()) else {
        return json_error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    };
    let sent = client
        .request(m, url)
        .headers(headers)
        .body(body)
        .timeout(gw.upstream_timeout)
        .send()
        .await;
    let resp = match sent {
        Ok(r) => r,
        Err(e) if e.is_timeout() => {
            tracing::warn!(service, error = %e, "upstream timed out");
            return json_error(StatusCode::GATEWAY_TIMEOUT, "upstream timed out");
        }
        Err(e) => {
            tracing::warn!(service, error = %e, "upstream unreachable");
            return json_error(StatusCode::SERVICE_UNAVAILABLE, "service not available");
        }
    };
    let status = resp.status().as_u16();

    // The service says whose identity it changed: drop it here before answering.
    for v in resp
        .headers()
        .get_all(service_kit::http::IDENTITY_CHANGED_HEADER)
    {
        if let Some(user_id) = v.to_str().ok().and_then(|v| v.parse::<UserId>().ok()) {
            gw.cache.invalidate_user(user_id);
        }
    }

    let mut out =
        HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY));
    for (name, value) in resp.headers() {
        let n = name.as_str();
        if DROP_RESPONSE.contains(&n) || reserved(n) {
            continue;
        }
        if let (Ok(n), Ok(v)) = (
            header::HeaderName::from_bytes(n.as_bytes()),
            header::HeaderValue::from_bytes(value.as_bytes()),
        ) {
            out.append_header((n, v));
        }
    }
    match resp.bytes().await {
        Ok(b) => out.body(b),
        Err(e) => {
            tracing::warn!(service, error = %e, "upstream body failed");
            json_error(StatusCode::BAD_GATEWAY, "upstream failed")
        }
    }
}

/// 405 `{"error"}` with the route's methods in `Allow`.
fn method_not_allowed(methods: &routing::Methods) -> HttpResponse {
    let mut resp = json_error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    if let Ok(v) = header::HeaderValue::from_str(methods.allow()) {
        resp.headers_mut().insert(header::ALLOW, v);
    }
    resp
}

fn unreachable_identity() -> HttpResponse {
    // Fail closed: never forward a request whose caller we could not establish.
    json_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "identity service unavailable",
    )
}
