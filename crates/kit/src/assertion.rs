//! The gateway's signed identity assertion.
//!
//! The gateway resolves the bearer, then forwards every request with two headers:
//! `x-hub-assertion`, the base64url JSON of an [`Assertion`] (identity, the
//! credential that produced it, client IP, request id, method, path, issue time),
//! and `x-hub-signature`, the lower-case hex HMAC-SHA256 of that header value
//! under the internal key. Services verify the signature (ring, constant time),
//! that method and path match the request they received, and that the assertion
//! is fresh; anything else is a 401 before a handler runs. Public endpoints get
//! an assertion too (without identity), so no service route is reachable except
//! through a gateway.

use crate::{error::json_error, settings::AssertionSettings, ApiError};
use actix_web::{
    body::{EitherBody, MessageBody},
    dev::{Payload, ServiceRequest, ServiceResponse},
    http::StatusCode,
    middleware::Next,
    web, FromRequest, HttpMessage, HttpRequest,
};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use hub_domain::{Capability, Credential, CredentialKind, Identity, OrgId, Role, UserId};
use ring::hmac;
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use std::{future::Future, pin::Pin, sync::Arc};
use uuid::Uuid;

pub const ASSERTION_HEADER: &str = "x-hub-assertion";
pub const SIGNATURE_HEADER: &str = "x-hub-signature";

/// Headers a client must never set: the gateway strips every header that starts
/// with one of these prefixes before it adds its own.
pub const RESERVED_HEADER_PREFIXES: [&str; 4] =
    ["x-hub-", "x-identity", "x-user", "x-forwarded-user"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assertion {
    /// The resolved caller; `None` on public endpoints.
    pub identity: Option<Identity>,
    pub credential: Option<Credential>,
    /// The client IP as the gateway determined it.
    pub ip: String,
    pub request_id: String,
    pub method: String,
    /// The path the gateway forwarded to (without the query string).
    pub path: String,
    /// Issued at, unix seconds.
    pub iat: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyError {
    Missing,
    BadSignature,
    Malformed,
    WrongTarget,
    Stale,
}

impl VerifyError {
    pub fn message(self) -> &'static str {
        match self {
            VerifyError::Missing => "requests must come through the gateway",
            VerifyError::BadSignature => "invalid gateway assertion signature",
            VerifyError::Malformed => "malformed gateway assertion",
            VerifyError::WrongTarget => "gateway assertion does not match this request",
            VerifyError::Stale => "gateway assertion expired",
        }
    }
}

/// Signs and verifies assertions with the configured keys.
#[derive(Clone)]
pub struct Signer {
    keys: Arc<Vec<hmac::Key>>,
    max_age_secs: i64,
}

impl Signer {
    pub fn new(s: &AssertionSettings) -> anyhow::Result<Signer> {
        anyhow::ensure!(
            !s.keys.is_empty(),
            "assertion.keys must hold at least one key"
        );
        let mut keys = Vec::with_capacity(s.keys.len());
        for k in &s.keys {
            let k = k.expose_secret();
            anyhow::ensure!(k.len() >= 16, "an assertion key must be at least 16 bytes");
            keys.push(hmac::Key::new(hmac::HMAC_SHA256, k.as_bytes()));
        }
        Ok(Signer {
            keys: Arc::new(keys),
            max_age_secs: s.max_age_secs,
        })
    }

    /// Returns (assertion header value, signature header value).
    pub fn sign(&self, a: &Assertion) -> (String, String) {
        let json = serde_json::to_vec(a).unwrap_or_default();
        let payload = URL_SAFE_NO_PAD.encode(json);
        let tag = hmac::sign(&self.keys[0], payload.as_bytes());
        (payload, hex::encode(tag.as_ref()))
    }

    pub fn verify(
        &self,
        payload: &str,
        signature_hex: &str,
        method: &str,
        path: &str,
        now_unix: i64,
    ) -> Result<Assertion, VerifyError> {
        let sig = hex::decode(signature_hex).map_err(|_| VerifyError::BadSignature)?;
        // ring's verify compares in constant time.
        let signed = self
            .keys
            .iter()
            .any(|k| hmac::verify(k, payload.as_bytes(), &sig).is_ok());
        if !signed {
            return Err(VerifyError::BadSignature);
        }
        let json = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| VerifyError::Malformed)?;
        let a: Assertion = serde_json::from_slice(&json).map_err(|_| VerifyError::Malformed)?;
        if a.method != method || a.path != path {
            return Err(VerifyError::WrongTarget);
        }
        if (now_unix - a.iat).abs() > self.max_age_secs {
            return Err(VerifyError::Stale);
        }
        Ok(a)
    }
}

pub fn now_unix() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Paths served without an assertion: probes only.
fn exempt(path: &str) -> bool {
    path == "/healthz" || path == "/readyz"
}

/// Middleware: verify the assertion of every request (but the probes) and put
/// it in the request extensions for the extractors below.
pub async fn require_assertion(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    if exempt(req.path()) {
        return Ok(next.call(req).await?.map_into_left_body());
    }
    let verdict = match req.app_data::<web::Data<Signer>>() {
        None => Err(VerifyError::Missing),
        Some(signer) => {
            let h = req.headers();
            match (
                h.get(ASSERTION_HEADER).and_then(|v| v.to_str().ok()),
                h.get(SIGNATURE_HEADER).and_then(|v| v.to_str().ok()),
            ) {
                (Some(p), Some(s)) => {
                    signer.verify(p, s, req.method().as_str(), req.path(), now_unix())
                }
                _ => Err(VerifyError::Missing),
            }
        }
    };
    match verdict {
        Ok(a) => {
            req.extensions_mut().insert(Arc::new(a));
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
}

impl Caller {
    fn from_assertion(a: &Assertion) -> Result<Caller, ApiError> {
        match (&a.identity, a.credential) {
            (Some(identity), Some(credential)) => Ok(Caller {
                identity: identity.clone(),
                credential,
                ip: a.ip.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::SecretString;

    fn signer(keys: &[&str]) -> Signer {
        Signer::new(&AssertionSettings {
            keys: keys
                .iter()
                .map(|k| SecretString::from(k.to_string()))
                .collect(),
            max_age_secs: 30,
        })
        .expect("signer")
    }

    fn sample(iat: i64) -> Assertion {
        Assertion {
            identity: Some(Identity {
                user_id: UserId::from_uuid(Uuid::nil()),
                email: "a@example.com".into(),
                name: String::new(),
                staff: false,
                memberships: vec![],
            }),
            credential: Some(Credential {
                kind: CredentialKind::Session,
                id: Uuid::nil(),
            }),
            ip: "127.0.0.1".into(),
            request_id: "r1".into(),
            method: "GET".into(),
            path: "/v1/profile".into(),
            iat,
        }
    }

    #[test]
    fn a_signed_assertion_verifies() {
        let s = signer(&["0123456789abcdef0123"]);
        let a = sample(1000);
        let (p, sig) = s.sign(&a);
        assert_eq!(s.verify(&p, &sig, "GET", "/v1/profile", 1010), Ok(a));
    }

    #[test]
    fn tampering_wrong_keys_targets_and_age_are_refused() {
        let s = signer(&["0123456789abcdef0123"]);
        let other = signer(&["fedcba9876543210fedc"]);
        let (p, sig) = s.sign(&sample(1000));
        let (_, other_sig) = other.sign(&sample(1000));
        assert_eq!(
            s.verify(&p, &other_sig, "GET", "/v1/profile", 1000),
            Err(VerifyError::BadSignature)
        );
        assert_eq!(
            s.verify(&p, "zz", "GET", "/v1/profile", 1000),
            Err(VerifyError::BadSignature)
        );
        let mut forged = p.clone();
        forged.push('A');
        assert_eq!(
            s.verify(&forged, &sig, "GET", "/v1/profile", 1000),
            Err(VerifyError::BadSignature)
        );
        assert_eq!(
            s.verify(&p, &sig, "POST", "/v1/profile", 1000),
            Err(VerifyError::WrongTarget)
        );
        assert_eq!(
            s.verify(&p, &sig, "GET", "/v1/audit/me", 1000),
            Err(VerifyError::WrongTarget)
        );
        assert_eq!(
            s.verify(&p, &sig, "GET", "/v1/profile", 1031),
            Err(VerifyError::Stale)
        );
        assert_eq!(
            s.verify(&p, &sig, "GET", "/v1/profile", 969),
            Err(VerifyError::Stale)
        );
    }

    #[test]
    fn every_configured_key_verifies_but_only_the_first_signs() {
        let old = signer(&["old-key-0123456789"]);
        let rotated = signer(&["new-key-0123456789", "old-key-0123456789"]);
        let (p, sig) = old.sign(&sample(5));
        assert!(rotated.verify(&p, &sig, "GET", "/v1/profile", 5).is_ok());
        let (p2, sig2) = rotated.sign(&sample(5));
        assert_eq!(
            old.verify(&p2, &sig2, "GET", "/v1/profile", 5),
            Err(VerifyError::BadSignature)
        );
    }

    #[test]
    fn short_keys_are_refused() {
        assert!(Signer::new(&AssertionSettings {
            keys: vec![SecretString::from("short".to_string())],
            max_age_secs: 30
        })
        .is_err());
    }
}
