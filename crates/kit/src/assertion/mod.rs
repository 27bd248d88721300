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

mod claims;
mod extract;
mod middleware;
mod mint;
mod replay;
mod verify;

pub use claims::{
    now_unix, sha256_hex, Assertion, RequestFacts, VerifyError, ASSERTION_HEADER, GATEWAY,
    IDEMPOTENCY_HEADER, RESERVED_HEADER_PREFIXES, SIGNATURE_HEADER,
};
pub use extract::{
    from, Authority, Caller, Callers, Peer, PersonCaller, RequestCtx, SessionCaller, StaffCaller,
    SUSPENDED,
};
pub use middleware::{internal, require_assertion, BodyLimit};
pub use mint::Minter;
pub use verify::Verifier;

#[cfg(test)]
mod tests;
