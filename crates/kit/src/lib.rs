//! The service kit: everything each service needs and nothing domain-specific.
//!
//! - [`settings`]: layered configuration (built-in defaults < `config/<service>.toml`
//!   < `<SERVICE>__SECTION__KEY` environment variables).
//! - [`telemetry`]: `tracing` with JSON or pretty logs, OTLP traces when configured.
//! - [`error`]: the one `{error}` JSON error type and its status mapping.
//! - [`http`]: JSON body limits, JSON errors for malformed input, request spans,
//!   `/healthz` and `/readyz`.
//! - [`assertion`]: the gateway's signed identity assertion, its middleware and
//!   the verified-identity extractors.
//! - [`methods`]: route method guards, and 405 with `Allow` for the other methods.
//! - [`path`]: the one canonical spelling of a request path (gateway and services).
//! - [`db`], [`nats`], [`outbox`]: Postgres pool and migrations, NATS and
//!   JetStream streams, the transactional outbox and its relay, durable consumers.
//! - [`nats_access`]: each service's NATS user and permissions, from its description.
//! - [`tls`]: rustls (ring) and the one trust store of every client.
//! - [`catalog`]: reading the declared catalog file (`catalog.file`).
//! - [`idempotency`]: `Idempotency-Key` replays, stored with the operation.
//! - [`jwt`]: verifying the OpenID Provider's ES256 tokens (identity, gateway).
//! - [`overview`]: each service's part of the staff overview (queues, dead letters).
//! - [`page`]: cursor pages (newest first) and their `limit`.
//! - [`group_commit`]: many requests applied in one transaction (ledgers, journals).
//! - [`metrics`]: Prometheus metrics, a registry per service on a listener of its own.
//! - [`shutdown`]: SIGTERM / Ctrl-C into a `CancellationToken`.
//! - [`service`]: the one description of an internal service ([`service::main`],
//!   the one-process stack and the test harness start it from it).

pub mod assertion;
pub mod catalog;
pub mod clock;
pub mod db;
pub mod deadletter;
pub mod error;
pub mod export;
pub mod group_commit;
pub mod http;
pub mod idempotency;
pub mod jwt;
mod log_line;
pub mod methods;
pub mod metrics;
pub mod nats;
pub mod nats_access;
pub mod outage;
pub mod outbox;
pub mod overview;
pub mod page;
pub mod path;
pub mod peer;
pub mod sealed;
pub mod server;
pub mod service;
pub mod settings;
pub mod shutdown;
pub mod staff_audit;
pub mod staff_read;
pub mod telemetry;
pub mod tls;

pub use clock::{Clock, Runtime};
pub use error::{ApiError, ApiResult, OnConstraint};

/// Whether two secrets (or their hashes) are equal, in constant time: both
/// are signed with a one-off HMAC key and ring's verify compares the tags.
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    use ring::{hmac, rand::SystemRandom};
    let Ok(key) = hmac::Key::generate(hmac::HMAC_SHA256, &SystemRandom::new()) else {
        return false;
    };
    let tag = hmac::sign(&key, a);
    hmac::verify(&key, b, tag.as_ref()).is_ok()
}
