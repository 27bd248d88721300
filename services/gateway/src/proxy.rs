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
    /// `GET /v1/admin/overview`, answered here from every service's part.
    pub overview: crate::overview::Overview,
}

/// The HTTP client for calls to services (one per worker), over TLS for
/// `https://` upstreams (the platform's roots plus `tls.extra_ca_file`). A
/// service's redirect is the client's to follow (the OpenID Provider's
/// authorization endpoint answers 302): the gateway never follows one.
pub fn upstream_client(tls: &service_kit::tls::TlsSettings) -> anyhow::Result<reqwest::Client> {
    Ok(service_kit::tls::http_client(tls)?
        .redirect(reqwest::redirect::Policy::none())
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
    // Session tokens and API keys are under 100 bytes; the OpenID Provider's
    // access tokens (JWTs listing memberships) are longer.
    if !scheme.eq_ignore_ascii_case("bearer")
        || token.is_empty()
        || token.len() > service_kit::jwt::MAX_LEN
    {
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

/// A step's refusal: the response to answer with instead of going on (boxed:
/// an `HttpResponse` is large and the steps return it only to stop).
type Refusal = Box<HttpResponse>;

/// The catch-all handler: every step below either hands on what the next one
/// needs or is the answer (a refusal, the cached `/v1/auth/me`, or the
/// service's response).
pub async fn handle(
    req: HttpRequest,
    payload: web::Payload,
    gw: web::Data<Gateway>,
    host: web::Data<HostKind>,
    client: web::Data<reqwest::Client>,
) -> HttpResponse {
    proxy(&req, payload, &gw, host.product, &client)
        .await
        .unwrap_or_else(|refused| *refused)
}

/// Route, resolve the caller, sign, forward: [`handle`]'s steps in order.
async fn proxy(
    req: &HttpRequest,
    payload: web::Payload,
    gw: &Gateway,
    product_host: bool,
    client: &reqwest::Client,
) -> Result<HttpResponse, Refusal> {
    let method = req.method().clone();
    let target = route(req, gw, product_host)?;
    let (service, path) = (target.service, target.path);
    let request_id = request_id(req);
    let client_addr = client_addr(req, gw);
    check_content_length(req, gw.max_body_bytes)?;
    let resolved = caller(req, gw, client, path, client_addr, &request_id).await?;
    if let Some(answer) = auth_me_from_cache(req, path, resolved.as_deref()) {
        return Ok(answer);
    }
    if let (service_kit::overview::PATH, Some(r)) = (path, resolved.as_deref()) {
        req.extensions_mut()
            .insert(service_kit::http::RouteLabel(service_kit::overview::PATH));
        let upstreams = crate::overview::Upstreams {
            urls: &gw.upstreams,
            minters: &gw.minters,
        };
        return Ok(gw.overview.answer(upstreams, client, r, &request_id).await);
    }
    if let (service_kit::export::PATH, Some(r)) = (path, resolved.as_deref()) {
        if method == actix_web::http::Method::GET {
            req.extensions_mut()
                .insert(service_kit::http::RouteLabel(service_kit::export::PATH));
            let upstreams = crate::overview::Upstreams {
                urls: &gw.upstreams,
                minters: &gw.minters,
            };
            let ip = client_addr.map(|i| i.to_string()).unwrap_or_default();
            return Ok(crate::export::answer(
                upstreams,
                client,
                r,
                &ip,
                &request_id,
                gw.upstream_timeout,
            )
            .await);
        }
    }
    let (Some(base), Some(minter)) = (gw.upstream(service), gw.minters.get(service)) else {
        return Err(json_error(StatusCode::SERVICE_UNAVAILABLE, "service not available").into());
    };
    let body = read_body(payload, gw.max_body_bytes).await?;
    let mut headers = forwarded_headers(req, path);
    let url = forward_url(base, path, req.query_string())?;
    let idempotency_key = idempotency_key(req)?;
    let facts = RequestFacts {
        method: method.as_str(),
        path_and_query: &path_and_query(&url),
        body: &body,
        idempotency_key,
        ip: &client_addr.map(|i| i.to_string()).unwrap_or_default(),
        request_id: &request_id,
        deadline_ms: Some(deadline_ms(gw.upstream_timeout)),
    };
    sign(gw, minter, resolved.as_deref(), &url, &facts, &mut headers);
    let resp = forward(client, gw, service, &method, url, headers, body).await?;
    Ok(answer(gw, service, resp).await)
}

/// Canonical path, route and method: the target service and the path to
/// forward, or the refusal (400, 404, 405).
fn route<'a>(
    req: &'a HttpRequest,
    gw: &'a Gateway,
    product_host: bool,
) -> Result<routing::Target<'a>, Refusal> {
    // A path the gateway serves itself (the probes), with another method.
    if let Some(resp) = service_kit::methods::not_allowed(req) {
        return Err(resp.into());
    }
    // One spelling of the path before anything reads it (routing included).
    if let Err(e) = service_kit::path::check(req.path()) {
        return Err(json_error(StatusCode::BAD_REQUEST, e.message()).into());
    }
    let Some(target) = gw.router.route(product_host, req.path()) else {
        return Err(json_error(StatusCode::NOT_FOUND, "no such route").into());
    };
    if let Some(name) = hub_domain::ServiceName::parse(target.service) {
        req.extensions_mut()
            .insert(service_kit::http::RouteLabel(name.as_str()));
    }
    // Only the methods the route forwards, before anything else reads the
    // request (the credential check included: public paths too).
    if !target.methods.serves(req.method()) {
        return Err(method_not_allowed(target.methods).into());
    }
    Ok(target)
}

/// The request's id (set by the request-id middleware), or a new one.
fn request_id(req: &HttpRequest) -> String {
    req.extensions()
        .get::<RequestId>()
        .map(|r| r.0.clone())
        .unwrap_or_else(|| Uuid::new_v4().to_string())
}

/// The client's address, through the trusted proxies' `X-Forwarded-For`.
fn client_addr(req: &HttpRequest, gw: &Gateway) -> Option<IpAddr> {
    let forwarded: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|v| v.to_str().ok())
        .collect();
    gw.trusted
        .client_addr(req.peer_addr().map(|a| a.ip()), &forwarded)
}

/// 413 when the declared body is over the limit (before reading any of it).
fn check_content_length(req: &HttpRequest, max: usize) -> Result<(), Refusal> {
    if let Some(len) = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
    {
        if len > max {
            return Err(json_error(StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into());
        }
    }
    Ok(())
}

/// The caller: none on public endpoints; everything else needs a bearer that
/// resolves (401 otherwise, 503 when identity cannot say).
async fn caller(
    req: &HttpRequest,
    gw: &Gateway,
    client: &reqwest::Client,
    path: &str,
    client_addr: Option<IpAddr>,
    request_id: &str,
) -> Result<Option<Arc<Resolved>>, Refusal> {
    if gw.router.is_public(req.method().as_str(), path) {
        return Ok(None);
    }
    let token = bearer(req).map_err(|m| json_error(StatusCode::UNAUTHORIZED, m))?;
    match gw.resolve(client, token, client_addr, request_id).await {
        Ok(r) => Ok(Some(r)),
        Err(ResolveError::Unauthorized(m)) => Err(json_error(StatusCode::UNAUTHORIZED, m).into()),
        Err(ResolveError::Unavailable) => Err(unreachable_identity().into()),
    }
}

/// The hottest path of the platform, answered here from the cache: `GET
/// /v1/auth/me` with a resolved caller.
fn auth_me_from_cache(
    req: &HttpRequest,
    path: &str,
    resolved: Option<&Resolved>,
) -> Option<HttpResponse> {
    if req.method() != actix_web::http::Method::GET || path != "/v1/auth/me" {
        return None;
    }
    let r = resolved?;
    req.extensions_mut()
        .insert(service_kit::http::RouteLabel("/v1/auth/me"));
    Some(
        HttpResponse::Ok()
            .content_type("application/json")
            .body(r.body.clone()),
    )
}

/// The client's headers to forward: hop-by-hop, credential and reserved ones
/// dropped, the trace context the gateway's own.
/// The OpenID Provider's endpoints that get the client's `Authorization`,
/// which identity checks itself: HTTP Basic client authentication (RFC 6749
/// 2.3.1) on the token, introspection, revocation and device authorization
/// endpoints, and a
/// provider's access token on userinfo (OIDC Core 5.3). Every other route
/// drops it: a session bearer never travels past the gateway.
const CLIENT_AUTH_PATHS: [&str; 4] = [
    "/oauth/token",
    "/oauth/introspect",
    "/oauth/revoke",
    "/oauth/device_authorization",
];
const USERINFO_PATH: &str = "/oauth/userinfo";

/// Whether this `Authorization` value goes on to identity on `path`.
fn provider_credential(path: &str, value: &[u8]) -> bool {
    // The scheme is case-insensitive (RFC 9110 11.1).
    let scheme = |s: &[u8]| value.len() > s.len() && value[..s.len()].eq_ignore_ascii_case(s);
    (CLIENT_AUTH_PATHS.contains(&path) && scheme(b"basic "))
        || (path == USERINFO_PATH && scheme(b"bearer "))
}

fn forwarded_headers(req: &HttpRequest, path: &str) -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::with_capacity(req.headers().len() + 4);
    // With tracing on, the service's span is a child of the gateway's (itself
    // the client's child when one came): the client's own context stays here.
    let context = service_kit::telemetry::trace_headers();
    for (name, value) in req.headers() {
        let n = name.as_str();
        let client_auth = n == "authorization" && provider_credential(path, value.as_bytes());
        if !client_auth
            && (DROP_REQUEST.contains(&n) || reserved(n) || n == "x-real-ip" || n == "x-request-id")
        {
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
    headers
}

/// The URL as it will be sent: its path is the routed path byte for byte
/// (else 400), its query as the parser normalized it; the assertion binds
/// exactly what the service will receive.
fn forward_url(base: &str, path: &str, query: &str) -> Result<reqwest::Url, Refusal> {
    routing::forward_url(base, path, query)
        .map_err(|e| json_error(StatusCode::BAD_REQUEST, e.message()).into())
}

/// When the gateway stops waiting (unix milliseconds): it answers 504 then,
/// so services start nothing they could not finish before it (the wallet
/// writer, for one).
fn deadline_ms(upstream_timeout: Duration) -> i64 {
    (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
        + upstream_timeout.as_millis() as i64
}

/// `url`'s path and query, as the assertion names them.
fn path_and_query(url: &reqwest::Url) -> String {
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    }
}

/// The `Idempotency-Key`, if any (400 unless visible ASCII).
fn idempotency_key(req: &HttpRequest) -> Result<Option<&str>, Refusal> {
    match req.headers().get(assertion::IDEMPOTENCY_HEADER) {
        None => Ok(None),
        Some(v) => v.to_str().map(Some).map_err(|_| {
            json_error(
                StatusCode::BAD_REQUEST,
                "Idempotency-Key must be visible ASCII",
            )
            .into()
        }),
    }
}

/// Sign the assertion for the request `facts` describe (the caller's identity
/// bounded to the memberships an assertion carries) and add it, its
/// signature and the request id to `headers`.
fn sign(
    gw: &Gateway,
    minter: &Minter,
    resolved: Option<&Resolved>,
    url: &reqwest::Url,
    facts: &RequestFacts<'_>,
    headers: &mut reqwest::header::HeaderMap,
) {
    let (identity, truncated) = match resolved {
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
    let (a, sig) = minter.sign(identity, resolved.map(|r| r.credential), truncated, facts);
    for (n, v) in [
        (assertion::ASSERTION_HEADER, a.as_str()),
        (assertion::SIGNATURE_HEADER, sig.as_str()),
        (service_kit::http::REQUEST_ID_HEADER, facts.request_id),
    ] {
        if let Ok(v) = reqwest::header::HeaderValue::from_str(v) {
            headers.insert(n, v);
        }
    }
}

/// Send the request to the service: its response, or 504 when it timed out,
/// 503 when it could not be reached.
async fn forward(
    client: &reqwest::Client,
    gw: &Gateway,
    service: &str,
    method: &actix_web::http::Method,
    url: reqwest::Url,
    headers: reqwest::header::HeaderMap,
    body: Bytes,
) -> Result<reqwest::Response, Refusal> {
    let Ok(m) = reqwest::Method::from_bytes(method.as_str().as_bytes()) else {
        return Err(json_error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed").into());
    };
    let sent = client
        .request(m, url)
        .headers(headers)
        .body(body)
        .timeout(gw.upstream_timeout)
        .send()
        .await;
    sent.map_err(|e| {
        if e.is_timeout() {
            tracing::warn!(service, error = %e, "upstream timed out");
            json_error(StatusCode::GATEWAY_TIMEOUT, "upstream timed out").into()
        } else {
            tracing::warn!(service, error = %e, "upstream unreachable");
            json_error(StatusCode::SERVICE_UNAVAILABLE, "service not available").into()
        }
    })
}

/// The service's response to the client: identities it says it changed
/// dropped from the cache first, hop-by-hop and reserved headers left out.
async fn answer(gw: &Gateway, service: &str, resp: reqwest::Response) -> HttpResponse {
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
