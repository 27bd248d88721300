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

mod extract;
mod middleware;
mod mint;
mod verify;

pub use extract::{
    from, Authority, Caller, Callers, Peer, RequestCtx, SessionCaller, StaffCaller, SUSPENDED,
};
pub use middleware::{internal, require_assertion, BodyLimit};
pub use mint::Minter;
pub use verify::Verifier;

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
    Capability, Credential, CredentialKind, Identity, Membership, OrgId, OrgStatus, Role,
    ServiceName, UserId,
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

pub fn now_unix() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

#[cfg(test)]
mod tests;
