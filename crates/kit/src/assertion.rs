//! The signed identity assertion every internal request carries.
//!
//! The gateway resolves the bearer, then forwards every request with two headers:
//! `x-hub-assertion`, the base64url JSON of an [`Assertion`], and
//! `x-hub-signature`, the lower-case hex HMAC-SHA256 of that header value.
//!
//! An assertion is bound to the whole request it travels with: issuer and
//! receiving service, method, path with query, the SHA-256 of the body, the
//! `Idempotency-Key`, a unique id (`jti`) and the issue time. A receiver refuses
//! it unless all of them match what it received, it is at most
//! `assertion.max_age_secs` old, and its `jti` was not seen before within that
//! window (a bounded per-replica cache: with the body bound, a replay could only
//! repeat the very same request). Anything else is a 401 before a handler runs.
//!
//! Keys are per receiver: the key that signs identity's assertions is held only
//! by the gateway and identity, so no service can mint an identity that another
//! service believes. A service that calls another service signs with its own
//! caller key (issuer = its name); the receiver lists, per calling service, the
//! keys it accepts and the internal routes that service may call. The gateway's
//! assertions are refused on `/internal/` routes, twice: by the verifier on the
//! path, and by the `/internal` scope itself ([`internal`]) on the route actix
//! matched, whatever the spelling. Every path is canonical first
//! ([`crate::path`]), so both see the same route. An internal handler names the
//! services it serves in its [`Peer`] extractor. Rotation: a receiver accepts
//! every key in its lists; the signer uses one.
//!
//! HMAC-SHA256 per receiver rather than Ed25519: both meet the goal (a key good
//! for one receiver only), and on this path every request takes, HMAC costs
//! 1.2 µs per request (sign + verify) against 79 µs for Ed25519 (30 µs sign,
//! 49 µs verify), 65 times more, measured with `cargo run --release -p
//! service-kit --example assertion_cost`.

use crate::{error::json_error, settings::AssertionSettings, ApiError};
use actix_web::{
    body::{EitherBody, MessageBody},
    dev::{Payload, ServiceRequest, ServiceResponse},
    http::StatusCode,
    middleware::Next,
    web, FromRequest, HttpMessage, HttpRequest,
};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use hub_domain::{
    Capability, Credential, CredentialKind, Identity, OrgId, Role, ServiceName, UserId,
};
use ring::{digest, hmac};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use std::{future::Future, marker::PhantomData, pin::Pin, sync::Arc, time::Duration};
use uuid::Uuid;

pub const ASSERTION_HEADER: &str = "x-hub-assertion";
pub const SIGNATURE_HEADER: &str = "x-hub-signature";
pub const IDEMPOTENCY_HEADER: &str = "idempotency-key";
/// The issuer name of the gateway's assertions.
pub const GATEWAY: &str = "gateway";

/// Headers a client must never set: the gateway strips every header that starts
/// with one of these prefixes before it adds its own.
pub const RESERVED_HEADER_PREFIXES: [&str; 4] =
    ["x-hub-", "x-identity", "x-user", "x-forwarded-user"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assertion {
    /// Who signed: [`GATEWAY`] or the calling service's name.
    pub iss: String,
    /// The receiving service's name.
    pub aud: String,
    /// The resolved caller; `None` on public endpoints.
    pub identity: Option<Identity>,
    pub credential: Option<Credential>,
    /// The gateway put only some of the caller's memberships in `identity`
    /// (the organization the request names first): a service that needs the
    /// whole list looks it up.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub memberships_truncated: bool,
    /// The client IP as the gateway determined it.
    pub ip: String,
    pub request_id: String,
    /// Unique per assertion: a receiver accepts each one once.
    pub jti: Uuid,
    pub method: String,
    /// Path and query exactly as sent (`/v1/servers?org_id=...`).
    pub path: String,
    /// Lower-case hex SHA-256 of the request body.
    pub body_sha256: String,
    pub idempotency_key: Option<String>,
    /// Issued at, unix seconds.
    pub iat: i64,
    /// When the sender stops waiting for the answer (unix milliseconds): work
    /// that could still be running then must not start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<i64>,
}

/// What a signer knows of the request it signs for.
pub struct RequestFacts<'a> {
    pub method: &'a str,
    pub path_and_query: &'a str,
    pub body: &'a [u8],
    pub idempotency_key: Option<&'a str>,
    pub ip: &'a str,
    pub request_id: &'a str,
    /// When the signer stops waiting (unix milliseconds), if it will.
    pub deadline_ms: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyError {
    Missing,
    BadSignature,
    Malformed,
    WrongTarget,
    Stale,
    Replayed,
    RouteNotAllowed,
}

impl VerifyError {
    pub fn message(self) -> &'static str {
        match self {
            VerifyError::Missing => "requests must come through the gateway",
            VerifyError::BadSignature => "invalid gateway assertion signature",
            VerifyError::Malformed => "malformed gateway assertion",
            VerifyError::WrongTarget => "gateway assertion does not match this request",
            VerifyError::Stale => "gateway assertion expired",
            VerifyError::Replayed => "gateway assertion already used",
            VerifyError::RouteNotAllowed => "this caller may not call this route",
        }
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(digest::digest(&digest::SHA256, bytes).as_ref())
}

fn hmac_key(k: &SecretString, what: &str) -> anyhow::Result<hmac::Key> {
    let k = k.expose_secret();
    anyhow::ensure!(k.len() >= 16, "{what}: a key must be at least 16 bytes");
    Ok(hmac::Key::new(hmac::HMAC_SHA256, k.as_bytes()))
}

/// Signs assertions for one receiver with one key.
#[derive(Clone)]
pub struct Minter {
    iss: String,
    aud: String,
    key: hmac::Key,
}

impl Minter {
    pub fn new(iss: &str, aud: &str, key: &SecretString) -> anyhow::Result<Minter> {
        Ok(Minter {
            iss: iss.to_owned(),
            aud: aud.to_owned(),
            key: hmac_key(key, &format!("the key for {aud}"))?,
        })
    }

    /// Sign an assertion for `facts`; returns (assertion header, signature header).
    pub fn sign(
        &self,
        identity: Option<Identity>,
        credential: Option<Credential>,
        memberships_truncated: bool,
        facts: &RequestFacts<'_>,
    ) -> (String, String) {
        self.sign_assertion(&Assertion {
            iss: self.iss.clone(),
            aud: self.aud.clone(),
            identity,
            credential,
            memberships_truncated,
            ip: facts.ip.to_owned(),
            request_id: facts.request_id.to_owned(),
            jti: Uuid::new_v4(),
            method: facts.method.to_owned(),
            path: facts.path_and_query.to_owned(),
            body_sha256: sha256_hex(facts.body),
            idempotency_key: facts.idempotency_key.map(str::to_owned),
            iat: now_unix(),
            deadline_ms: facts.deadline_ms,
        })
    }

    /// Sign a fully built assertion (tests forge odd ones with this).
    pub fn sign_assertion(&self, a: &Assertion) -> (String, String) {
        let json = serde_json::to_vec(a).unwrap_or_default();
        let payload = URL_SAFE_NO_PAD.encode(json);
        let tag = hmac::sign(&self.key, payload.as_bytes());
        (payload, hex::encode(tag.as_ref()))
    }
}

/// A route pattern `METHOD /path/*/x` (`*` is one segment).
#[derive(Debug, Clone)]
struct RoutePattern {
    method: String,
    segments: Vec<String>,
}

impl RoutePattern {
    fn parse(s: &str) -> anyhow::Result<RoutePattern> {
        let (m, p) = s
            .split_once(' ')
            .ok_or_else(|| anyhow::anyhow!("routes are \"METHOD /path\": {s:?}"))?;
        Ok(RoutePattern {
            method: m.to_uppercase(),
            segments: p.trim().split('/').map(str::to_owned).collect(),
        })
    }

    fn matches(&self, method: &str, path: &str) -> bool {
        let mut got = path.split('/');
        self.method == method
            && self
                .segments
                .iter()
                .all(|want| got.next().is_some_and(|g| want == "*" || want == g))
            && got.next().is_none()
    }
}

struct Principal {
    keys: Vec<hmac::Key>,
    /// `None` for the gateway (every route but `/internal/`).
    routes: Option<Vec<RoutePattern>>,
}

/// Verifies the assertions a service receives.
#[derive(Clone)]
pub struct Verifier {
    aud: String,
    /// The gateway first, then the calling services.
    principals: Arc<Vec<(String, Principal)>>,
    max_age_secs: i64,
    seen: moka::sync::Cache<Uuid, ()>,
}

impl Verifier {
    /// The verifier of service `aud` from its `assertion` settings.
    pub fn new(aud: &str, s: &AssertionSettings) -> anyhow::Result<Verifier> {
        anyhow::ensure!(
            !s.keys.is_empty(),
            "assertion.keys must hold at least one key"
        );
        let mut principals = vec![(
            GATEWAY.to_owned(),
            Principal {
                keys: s
                    .keys
                    .iter()
                    .map(|k| hmac_key(k, "assertion.keys"))
                    .collect::<anyhow::Result<_>>()?,
                routes: None,
            },
        )];
        for (name, c) in &s.callers {
            if c.keys.is_empty() {
                continue;
            }
            principals.push((
                name.clone(),
                Principal {
                    keys: c
                        .keys
                        .iter()
                        .map(|k| hmac_key(k, &format!("assertion.callers.{name}.keys")))
                        .collect::<anyhow::Result<_>>()?,
                    routes: Some(
                        c.routes
                            .iter()
                            .map(|r| RoutePattern::parse(r))
                            .collect::<anyhow::Result<_>>()?,
                    ),
                },
            ));
        }
        let window = Duration::from_secs(2 * s.max_age_secs.max(1) as u64);
        Ok(Verifier {
            aud: aud.to_owned(),
            principals: Arc::new(principals),
            max_age_secs: s.max_age_secs,
            seen: moka::sync::Cache::builder()
                .time_to_live(window)
                .max_capacity(s.replay_cache_entries)
                .build(),
        })
    }

    /// Verify `payload`/`signature_hex` against the request it arrived with.
    pub fn verify(
        &self,
        payload: &str,
        signature_hex: &str,
        facts: &RequestFacts<'_>,
        now_unix: i64,
    ) -> Result<Assertion, VerifyError> {
        let sig = hex::decode(signature_hex).map_err(|_| VerifyError::BadSignature)?;
        // ring's verify compares in constant time.
        let (issuer, principal) = self
            .principals
            .iter()
            .find(|(_, p)| {
                p.keys
                    .iter()
                    .any(|k| hmac::verify(k, payload.as_bytes(), &sig).is_ok())
            })
            .ok_or(VerifyError::BadSignature)?;
        let json = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| VerifyError::Malformed)?;
        let a: Assertion = serde_json::from_slice(&json).map_err(|_| VerifyError::Malformed)?;
        if &a.iss != issuer || a.aud != self.aud {
            return Err(VerifyError::BadSignature);
        }
        if a.method != facts.method
            || a.path != facts.path_and_query
            || a.idempotency_key.as_deref() != facts.idempotency_key
            || a.body_sha256 != sha256_hex(facts.body)
        {
            return Err(VerifyError::WrongTarget);
        }
        if (now_unix - a.iat).abs() > self.max_age_secs {
            return Err(VerifyError::Stale);
        }
        let path = facts
            .path_and_query
            .split_once('?')
            .map_or(facts.path_and_query, |(p, _)| p);
        let allowed = match &principal.routes {
            _ if crate::path::check(path).is_err() => false,
            None => !path.starts_with("/internal/"),
            Some(routes) => routes.iter().any(|r| r.matches(facts.method, path)),
        };
        if !allowed {
            return Err(VerifyError::RouteNotAllowed);
        }
        // Last, so that only a fully valid assertion takes its id.
        if !self.seen.entry(a.jti).or_insert(()).is_fresh() {
            return Err(VerifyError::Replayed);
        }
        Ok(a)
    }
}

pub fn now_unix() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Paths served without an assertion: probes and metrics only.
fn exempt(path: &str) -> bool {
    path == "/healthz" || path == "/readyz" || path == "/metrics"
}

/// The largest body the assertion middleware reads (the service's JSON limit).
#[derive(Clone, Copy)]
pub struct BodyLimit(pub usize);

async fn read_body(payload: Payload, limit: usize) -> Result<Bytes, ApiError> {
    let mut payload = payload;
    let mut buf = BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|_| ApiError::bad_request("unreadable request body"))?;
        if buf.len() + chunk.len() > limit {
            return Err(ApiError::PayloadTooLarge);
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

/// Middleware: verify the assertion of every request (but the probes) and put
/// it in the request extensions for the extractors below. The body is read
/// here (bounded by [`BodyLimit`]) to check its digest, then handed on.
pub async fn require_assertion(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    // Before anything reads the path: one spelling, so that what actix routes
    // on is what the assertion names and what the route lists match.
    if let Err(e) = crate::path::check(req.path()) {
        let resp = json_error(StatusCode::BAD_REQUEST, e.message());
        return Ok(req.into_response(resp).map_into_right_body());
    }
    if exempt(req.path()) {
        return Ok(next.call(req).await?.map_into_left_body());
    }
    let limit = req
        .app_data::<web::Data<BodyLimit>>()
        .map_or(1 << 20, |l| l.0);
    let body = match read_body(req.take_payload(), limit).await {
        Ok(b) => b,
        Err(e) => {
            let resp = actix_web::ResponseError::error_response(&e);
            return Ok(req.into_response(resp).map_into_right_body());
        }
    };
    let verdict = match req.app_data::<web::Data<Verifier>>() {
        None => Err(VerifyError::Missing),
        Some(verifier) => {
            let h = req.headers();
            let idem = match h.get(IDEMPOTENCY_HEADER).map(|v| v.to_str()) {
                None => Ok(None),
                Some(Ok(v)) => Ok(Some(v)),
                Some(Err(_)) => Err(VerifyError::WrongTarget),
            };
            let path_and_query = req
                .uri()
                .path_and_query()
                .map_or(req.path(), |pq| pq.as_str());
            match (
                h.get(ASSERTION_HEADER).and_then(|v| v.to_str().ok()),
                h.get(SIGNATURE_HEADER).and_then(|v| v.to_str().ok()),
                idem,
            ) {
                (Some(p), Some(s), Ok(idempotency_key)) => verifier.verify(
                    p,
                    s,
                    &RequestFacts {
                        method: req.method().as_str(),
                        path_and_query,
                        body: &body,
                        idempotency_key,
                        ip: "",
                        request_id: "",
                        deadline_ms: None,
                    },
                    now_unix(),
                ),
                (_, _, Err(e)) => Err(e),
                _ => Err(VerifyError::Missing),
            }
        }
    };
    match verdict {
        Ok(a) => {
            req.extensions_mut().insert(Arc::new(a));
            req.set_payload(Payload::from(body));
            Ok(next.call(req).await?.map_into_left_body())
        }
        Err(e) => {
            tracing::warn!(
                reason = e.message(),
                path = req.path(),
                "refused request without a valid assertion"
            );
            let resp = json_error(StatusCode::UNAUTHORIZED, e.message());
            Ok(req.into_response(resp).map_into_right_body())
        }
    }
}

fn assertion_of(req: &HttpRequest) -> Result<Arc<Assertion>, ApiError> {
    req.extensions()
        .get::<Arc<Assertion>>()
        .cloned()
        .ok_or_else(|| ApiError::unauthorized(VerifyError::Missing.message()))
}

type Ready<T> = Pin<Box<dyn Future<Output = Result<T, ApiError>>>>;

/// Serve `routes` under `/internal`, for calling services only. The scope's
/// own middleware refuses the gateway's assertions on whatever request actix
/// routed into it, so no spelling of a path reaches an internal handler with
/// the gateway's key (the verifier's check on the path is the first line).
pub fn internal(cfg: &mut web::ServiceConfig, routes: impl FnOnce(&mut web::ServiceConfig)) {
    cfg.service(
        web::scope("/internal")
            .wrap(actix_web::middleware::from_fn(peers_only))
            .configure(routes),
    );
}

async fn peers_only(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let issuer = req
        .extensions()
        .get::<Arc<Assertion>>()
        .map(|a| a.iss.clone());
    match issuer {
        Some(iss) if iss != GATEWAY => Ok(next.call(req).await?.map_into_left_body()),
        _ => {
            tracing::warn!(
                path = req.path(),
                "refused an internal route to the gateway's assertion"
            );
            let resp = json_error(
                StatusCode::UNAUTHORIZED,
                VerifyError::RouteNotAllowed.message(),
            );
            Ok(req.into_response(resp).map_into_right_body())
        }
    }
}

/// The services an internal route serves: a marker type names them, so that
/// a handler cannot take an internal request without saying from whom.
pub trait Callers {
    const ALLOWED: &'static [ServiceName];
}

/// Marker types for [`Peer`]: `Peer<from::Kyc>` serves kyc and nobody else.
pub mod from {
    use super::Callers;
    use hub_domain::ServiceName;

    macro_rules! callers {
        ($($name:ident),*) => {$(
            #[doc = concat!("Served to ", stringify!($name), " only.")]
            pub struct $name;
            impl Callers for $name {
                const ALLOWED: &'static [ServiceName] = &[ServiceName::$name];
            }
        )*};
    }
    callers!(
        Identity,
        OrgBilling,
        Kyc,
        ServerProduct,
        WebhookDispatcher,
        Agent
    );
}

/// The caller of an internal route: one of the services `C` names, never the
/// gateway and never some other service holding a valid key; 403 otherwise.
pub struct Peer<C: Callers> {
    pub service: ServiceName,
    _callers: PhantomData<C>,
}

impl<C: Callers> Peer<C> {
    fn of(a: Arc<Assertion>) -> Result<Peer<C>, ApiError> {
        match ServiceName::parse(&a.iss) {
            Some(service) if C::ALLOWED.contains(&service) => Ok(Peer {
                service,
                _callers: PhantomData,
            }),
            _ => Err(ApiError::forbidden(format!(
                "this internal route does not serve {}",
                a.iss
            ))),
        }
    }
}

impl<C: Callers + 'static> FromRequest for Peer<C> {
    type Error = ApiError;
    type Future = Ready<Self>;
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let r = assertion_of(req).and_then(Peer::of);
        Box::pin(async move { r })
    }
}

/// The verified request context: always present behind [`require_assertion`],
/// with or without an identity.
#[derive(Debug, Clone)]
pub struct RequestCtx(pub Arc<Assertion>);

impl RequestCtx {
    pub fn ip(&self) -> &str {
        &self.0.ip
    }
}

impl FromRequest for RequestCtx {
    type Error = ApiError;
    type Future = Ready<Self>;
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let r = assertion_of(req).map(RequestCtx);
        Box::pin(async move { r })
    }
}

/// An authenticated caller (session or API key).
#[derive(Debug, Clone)]
pub struct Caller {
    pub identity: Identity,
    pub credential: Credential,
    pub ip: String,
    /// `identity.memberships` is not the whole list (see [`Assertion`]).
    pub memberships_truncated: bool,
    /// When the sender stops waiting (unix milliseconds), if it will.
    pub deadline_ms: Option<i64>,
}

impl Caller {
    fn from_assertion(a: &Assertion) -> Result<Caller, ApiError> {
        match (&a.identity, a.credential) {
            (Some(identity), Some(credential)) => Ok(Caller {
                identity: identity.clone(),
                credential,
                ip: a.ip.clone(),
                memberships_truncated: a.memberships_truncated,
                deadline_ms: a.deadline_ms,
            }),
            _ => Err(ApiError::unauthorized("authentication required")),
        }
    }

    pub fn user_id(&self) -> UserId {
        self.identity.user_id
    }

    pub fn is_session(&self) -> bool {
        self.credential.kind == CredentialKind::Session
    }

    /// How long until the sender stops waiting, if it said (zero when past).
    pub fn time_left(&self) -> Option<Duration> {
        self.deadline_ms.map(|d| {
            let now = time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
            Duration::from_millis(u64::try_from(i128::from(d) - now).unwrap_or(0))
        })
    }

    /// The caller's role in `org_id` if it grants `cap`. Not a member: 404, the
    /// same answer as for an organization that does not exist.
    pub fn require(&self, org_id: OrgId, cap: Capability) -> Result<Role, ApiError> {
        let role = self.identity.role_in(org_id).ok_or(ApiError::NotFound)?;
        if role.can(cap) {
            Ok(role)
        } else {
            Err(ApiError::forbidden(cap.denied_message()))
        }
    }

    /// [`require`](Self::require), for sessions only: a key (even a manager's)
    /// gets 403 naming "session" once it passed the role check.
    pub fn require_session(&self, org_id: OrgId, cap: Capability) -> Result<Role, ApiError> {
        let role = self.require(org_id, cap)?;
        if self.is_session() {
            Ok(role)
        } else {
            Err(ApiError::forbidden(
                "this operation needs a session: API keys cannot manage members or keys",
            ))
        }
    }

    pub fn require_staff(&self) -> Result<(), ApiError> {
        if self.identity.staff {
            Ok(())
        } else {
            Err(ApiError::forbidden("staff only"))
        }
    }
}

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Ready<Self>;
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let r = assertion_of(req).and_then(|a| Caller::from_assertion(&a));
        Box::pin(async move { r })
    }
}

/// A caller authenticated with a session token: endpoints marked "session" in
/// the spec refuse API keys with a 401 that says so.
#[derive(Debug, Clone)]
pub struct SessionCaller(pub Caller);

impl SessionCaller {
    pub fn session_id(&self) -> Uuid {
        self.0.credential.id
    }
}

impl std::ops::Deref for SessionCaller {
    type Target = Caller;
    fn deref(&self) -> &Caller {
        &self.0
    }
}

impl FromRequest for SessionCaller {
    type Error = ApiError;
    type Future = Ready<Self>;
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let r = assertion_of(req)
            .and_then(|a| Caller::from_assertion(&a))
            .and_then(|c| {
                if c.is_session() {
                    Ok(SessionCaller(c))
                } else {
                    Err(ApiError::unauthorized(
                        "this endpoint needs a session token; API keys are not accepted",
                    ))
                }
            });
        Box::pin(async move { r })
    }
}

/// A staff caller. Put it before the body extractor: a caller who is not staff
/// gets 403 whatever the body (extractors run in parameter order and the
/// first failure answers).
#[derive(Debug, Clone)]
pub struct StaffCaller(pub Caller);

impl std::ops::Deref for StaffCaller {
    type Target = Caller;
    fn deref(&self) -> &Caller {
        &self.0
    }
}

impl FromRequest for StaffCaller {
    type Error = ApiError;
    type Future = Ready<Self>;
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let r = assertion_of(req)
            .and_then(|a| Caller::from_assertion(&a))
            .and_then(|c| c.require_staff().map(|_| StaffCaller(c)));
        Box::pin(async move { r })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::CallerSettings;
    use std::collections::BTreeMap;

    const GW_KEY: &str = "gateway-to-svc-key-0123";

    fn settings(keys: &[&str], callers: &[(&str, &str, &[&str])]) -> AssertionSettings {
        AssertionSettings {
            keys: keys
                .iter()
                .map(|k| SecretString::from(k.to_string()))
                .collect(),
            max_age_secs: 30,
            replay_cache_entries: 1000,
            callers: callers
                .iter()
                .map(|(name, key, routes)| {
                    (
                        name.to_string(),
                        CallerSettings {
                            keys: vec![SecretString::from(key.to_string())],
                            routes: routes.iter().map(|r| r.to_string()).collect(),
                        },
                    )
                })
                .collect::<BTreeMap<_, _>>(),
        }
    }

    fn minter(iss: &str, aud: &str, key: &str) -> Minter {
        Minter::new(iss, aud, &SecretString::from(key.to_string())).expect("minter")
    }

    fn facts<'a>(method: &'a str, path: &'a str, body: &'a [u8]) -> RequestFacts<'a> {
        RequestFacts {
            method,
            path_and_query: path,
            body,
            idempotency_key: None,
            ip: "127.0.0.1",
            request_id: "r1",
            deadline_ms: None,
        }
    }

    fn identity() -> Identity {
        Identity {
            user_id: UserId::from_uuid(Uuid::nil()),
            email: "a@example.com".into(),
            name: String::new(),
            staff: true,
            memberships: vec![],
        }
    }

    #[test]
    fn a_signed_assertion_verifies_once() {
        let v = Verifier::new("svc", &settings(&[GW_KEY], &[])).expect("verifier");
        let m = minter(GATEWAY, "svc", GW_KEY);
        let f = facts("POST", "/v1/x?y=1", b"{\"a\":1}");
        let (p, sig) = m.sign(Some(identity()), None, false, &f);
        let a = v.verify(&p, &sig, &f, now_unix()).expect("valid");
        assert_eq!(a.identity, Some(identity()));
        assert_eq!(
            v.verify(&p, &sig, &f, now_unix()),
            Err(VerifyError::Replayed)
        );
    }

    #[test]
    fn the_assertion_is_bound_to_body_query_method_and_idempotency_key() {
        let v = Verifier::new("svc", &settings(&[GW_KEY], &[])).expect("verifier");
        let m = minter(GATEWAY, "svc", GW_KEY);
        let f = facts("POST", "/v1/x?y=1", b"{\"amount_minor\":1}");
        let (p, sig) = m.sign(Some(identity()), None, false, &f);
        let now = now_unix();
        for other in [
            facts("POST", "/v1/x?y=1", b"{\"amount_minor\":1000000}"),
            facts("POST", "/v1/x?y=2", b"{\"amount_minor\":1}"),
            facts("POST", "/v1/x", b"{\"amount_minor\":1}"),
            facts("PUT", "/v1/x?y=1", b"{\"amount_minor\":1}"),
            RequestFacts {
                idempotency_key: Some("k"),
                ..facts("POST", "/v1/x?y=1", b"{\"amount_minor\":1}")
            },
        ] {
            assert_eq!(
                v.verify(&p, &sig, &other, now),
                Err(VerifyError::WrongTarget)
            );
        }
        assert!(v.verify(&p, &sig, &f, now).is_ok(), "refusals take no id");
    }

    #[test]
    fn tampering_wrong_keys_and_age_are_refused() {
        let v = Verifier::new("svc", &settings(&[GW_KEY], &[])).expect("verifier");
        let f = facts("GET", "/v1/profile", b"");
        let (p, sig) = minter(GATEWAY, "svc", GW_KEY).sign(None, None, false, &f);
        let (_, other_sig) =
            minter(GATEWAY, "svc", "fedcba9876543210fedc").sign(None, None, false, &f);
        let now = now_unix();
        assert_eq!(
            v.verify(&p, &other_sig, &f, now),
            Err(VerifyError::BadSignature)
        );
        assert_eq!(v.verify(&p, "zz", &f, now), Err(VerifyError::BadSignature));
        let mut forged = p.clone();
        forged.push('A');
        assert_eq!(
            v.verify(&forged, &sig, &f, now),
            Err(VerifyError::BadSignature)
        );
        assert_eq!(v.verify(&p, &sig, &f, now + 31), Err(VerifyError::Stale));
        assert_eq!(v.verify(&p, &sig, &f, now - 31), Err(VerifyError::Stale));
    }

    #[test]
    fn a_key_is_good_for_its_receiver_only() {
        // The same key material configured at two services cannot happen with
        // per-receiver keys; the audience check refuses it even if it did.
        let v = Verifier::new("org_billing", &settings(&[GW_KEY], &[])).expect("verifier");
        let f = facts("GET", "/v1/x", b"");
        let (p, sig) = minter(GATEWAY, "identity", GW_KEY).sign(None, None, false, &f);
        assert_eq!(
            v.verify(&p, &sig, &f, now_unix()),
            Err(VerifyError::BadSignature)
        );
    }

    #[test]
    fn a_calling_service_is_accepted_on_its_listed_routes_only() {
        let caller_key = "billing-to-identity-key-0123";
        let v = Verifier::new(
            "identity",
            &settings(
                &[GW_KEY],
                &[(
                    "org_billing",
                    caller_key,
                    &["POST /internal/v1/organizations/*/owner"],
                )],
            ),
        )
        .expect("verifier");
        let billing = minter("org_billing", "identity", caller_key);
        let now = now_unix();
        let ok = facts("POST", "/internal/v1/organizations/abc/owner", b"{}");
        let (p, sig) = billing.sign(Some(identity()), None, false, &ok);
        assert!(v.verify(&p, &sig, &ok, now).is_ok());
        for bad in [
            facts("POST", "/v1/organizations/abc/members", b"{}"),
            facts("POST", "/internal/v1/organizations/abc/owner/x", b"{}"),
            facts("GET", "/internal/v1/organizations/abc/owner", b"{}"),
        ] {
            let (p, sig) = billing.sign(Some(identity()), None, false, &bad);
            assert_eq!(
                v.verify(&p, &sig, &bad, now),
                Err(VerifyError::RouteNotAllowed)
            );
        }
        // A service cannot pass itself off as the gateway, nor the gateway call internal routes.
        let mut forged = billing.sign_assertion(&Assertion {
            iss: GATEWAY.into(),
            aud: "identity".into(),
            identity: None,
            credential: None,
            memberships_truncated: false,
            ip: String::new(),
            request_id: String::new(),
            jti: Uuid::new_v4(),
            method: "GET".into(),
            path: "/v1/profile".into(),
            body_sha256: sha256_hex(b""),
            idempotency_key: None,
            iat: now,
            deadline_ms: None,
        });
        assert_eq!(
            v.verify(&forged.0, &forged.1, &facts("GET", "/v1/profile", b""), now),
            Err(VerifyError::BadSignature)
        );
        forged = minter(GATEWAY, "identity", GW_KEY).sign(None, None, false, &ok);
        assert_eq!(
            v.verify(&forged.0, &forged.1, &ok, now),
            Err(VerifyError::RouteNotAllowed)
        );
    }

    #[test]
    fn every_configured_key_verifies() {
        let v = Verifier::new(
            "svc",
            &settings(&["new-key-0123456789", "old-key-0123456789"], &[]),
        )
        .expect("verifier");
        let f = facts("GET", "/v1/profile", b"");
        for k in ["new-key-0123456789", "old-key-0123456789"] {
            let (p, sig) = minter(GATEWAY, "svc", k).sign(None, None, false, &f);
            assert!(v.verify(&p, &sig, &f, now_unix()).is_ok());
        }
    }

    fn assertion_from(iss: &str) -> Assertion {
        Assertion {
            iss: iss.into(),
            aud: "svc".into(),
            identity: Some(identity()),
            credential: None,
            memberships_truncated: false,
            ip: String::new(),
            request_id: String::new(),
            jti: Uuid::new_v4(),
            method: "GET".into(),
            path: String::new(),
            body_sha256: String::new(),
            idempotency_key: None,
            iat: 0,
            deadline_ms: None,
        }
    }

    /// The `/internal` scope and the `Peer` extractor on their own: the
    /// request already carries a verified assertion of `iss` (as behind
    /// `require_assertion`), whatever path checks ran before.
    async fn internal_status(iss: &'static str, path: &str) -> u16 {
        use actix_web::{middleware::from_fn, test, App, HttpResponse};
        async fn served(_peer: Peer<from::Kyc>) -> HttpResponse {
            HttpResponse::Ok().finish()
        }
        let app = test::init_service(
            App::new()
                .configure(|c| {
                    internal(c, |c| {
                        c.route("/v1/x", web::get().to(served));
                    })
                })
                .route("/v1/x", web::get().to(served))
                .wrap(from_fn(move |req: ServiceRequest, next: Next<_>| {
                    req.extensions_mut().insert(Arc::new(assertion_from(iss)));
                    next.call(req)
                })),
        )
        .await;
        let req = test::TestRequest::get().uri(path).to_request();
        test::call_service(&app, req).await.status().as_u16()
    }

    #[actix_web::test]
    async fn the_internal_scope_refuses_the_gateway_on_the_matched_route() {
        assert_eq!(internal_status("kyc", "/internal/v1/x").await, 200);
        // actix decodes %69 before it routes: the scope still matches, and refuses.
        for path in ["/internal/v1/x", "/%69nternal/v1/x", "/%69%6E%74ernal/v1/x"] {
            assert_eq!(internal_status(GATEWAY, path).await, 401, "{path}");
        }
        assert_eq!(internal_status("kyc", "/%69nternal/v1/x").await, 200);
    }

    #[actix_web::test]
    async fn a_peer_extractor_serves_the_service_it_names_only() {
        assert_eq!(internal_status("kyc", "/internal/v1/x").await, 200);
        for other in ["agent", "org_billing", "someone"] {
            assert_eq!(
                internal_status(other, "/internal/v1/x").await,
                403,
                "{other}"
            );
        }
        // Outside the scope, the extractor alone refuses the gateway too.
        assert_eq!(internal_status(GATEWAY, "/v1/x").await, 403);
    }

    #[test]
    fn short_keys_are_refused() {
        assert!(Verifier::new("svc", &settings(&["short"], &[])).is_err());
        assert!(Minter::new("a", "b", &SecretString::from("short".to_string())).is_err());
    }
}
