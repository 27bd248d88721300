//! What an assertion says, and what a signer knows of the request it signs for.

use hub_domain::{Credential, Identity};
use ring::digest;
use serde::{Deserialize, Serialize};
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
    /// The replica holds `replay_cache_entries` ids already: it cannot
    /// remember this one's use, so it does not serve it (503).
    Busy,
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
            VerifyError::Busy => "too many requests in flight here; retry shortly",
        }
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(digest::digest(&digest::SHA256, bytes).as_ref())
}

pub fn now_unix() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}
