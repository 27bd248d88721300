//! Layered configuration.
//!
//! Order, later wins: the service's built-in defaults (a commented TOML file
//! compiled into the binary), the dev overlay when `HUB_PROFILE=dev`, an optional
//! `$CONFIG_DIR/<service>.toml` (default `config/`), then environment variables
//! `<SERVICE>__SECTION__KEY` (for example `IDENTITY__DATABASE__URL`).

use config::{Config, Environment, File, FileFormat};
use secrecy::SecretString;
use serde::{de::DeserializeOwned, Deserialize};

/// The deployment profile. Production is the default: anything convenient but
/// unsafe (echoing magic-link tokens, loopback webhook targets) is dev-only.
pub fn profile_is_dev() -> bool {
    std::env::var("HUB_PROFILE")
        .map(|p| p == "dev")
        .unwrap_or(false)
}

/// Refuse a setting that is only safe in the dev profile when the process is
/// not in it (`dev`: [`Runtime::dev`](crate::Runtime::dev), the profile as
/// the process started: [`profile_is_dev`]). `on` is the setting's value.
pub fn dev_only(dev: bool, key: &str, on: bool) -> anyhow::Result<()> {
    if on && !dev {
        anyhow::bail!(
            "{key} is a dev-only setting and this is not the dev profile (HUB_PROFILE=dev): \
             refusing to start; set it to false"
        );
    }
    Ok(())
}

/// Load settings for `service` from the layers above.
///
/// `list_keys` names the keys whose environment value is a comma-separated list.
pub fn load<T: DeserializeOwned>(
    service: &str,
    defaults: &str,
    dev_overlay: &str,
    list_keys: &[&str],
) -> anyhow::Result<T> {
    load_with(service, defaults, dev_overlay, list_keys, &[])
}

/// [`load`] with `extra` TOML layers between the config file and the
/// environment (the one-process stack passes addresses it computed this way).
pub fn load_with<T: DeserializeOwned>(
    service: &str,
    defaults: &str,
    dev_overlay: &str,
    list_keys: &[&str],
    extra: &[String],
) -> anyhow::Result<T> {
    let env_prefix = service.to_uppercase().replace('-', "_");
    let dir = std::env::var("CONFIG_DIR").unwrap_or_else(|_| "config".to_owned());
    let mut env = Environment::with_prefix(&env_prefix)
        .prefix_separator("__")
        .separator("__")
        .try_parsing(true);
    env = env.list_separator(",");
    for k in list_keys
        .iter()
        .map(|k| k.to_string())
        .chain(kit_list_keys())
    {
        env = env.with_list_parse_key(&k);
    }
    let mut builder = Config::builder().add_source(File::from_str(defaults, FileFormat::Toml));
    if profile_is_dev() {
        builder = builder.add_source(File::from_str(dev_overlay, FileFormat::Toml));
    }
    builder = builder.add_source(File::with_name(&format!("{dir}/{service}")).required(false));
    for layer in extra {
        builder = builder.add_source(File::from_str(layer, FileFormat::Toml));
    }
    let cfg = builder.add_source(env).build()?;
    Ok(cfg.try_deserialize()?)
}

/// The list keys of the kit's own settings, for every service: its
/// assertion keys, its sealing keys and the keys it accepts from each calling
/// service (every service the hub has: a service that no one calls simply has
/// no such variable). A service's [`Layered::LIST_KEYS`] names only its own.
fn kit_list_keys() -> impl Iterator<Item = String> {
    ["assertion.keys".to_owned(), "sealing.keys".to_owned()]
        .into_iter()
        .chain(
            hub_domain::ServiceName::ALL
                .into_iter()
                .map(|s| format!("assertion.callers.{s}.keys")),
        )
}

/// A service's settings type: its name, its commented defaults, its dev
/// overlay and its list keys give it [`load`](Layered::load) (the layers
/// above), [`load_with`](Layered::load_with) (extra layers before the
/// environment: the one-process stack) and [`from_layers`](Layered::from_layers)
/// (defaults plus TOML only: tests).
pub trait Layered: DeserializeOwned {
    /// The name in `<SERVICE>__...` variables and `config/<service>.toml`.
    const SERVICE: &'static str;
    const DEFAULTS: &'static str;
    const DEV: &'static str;
    /// The service's own keys whose environment value is a comma-separated
    /// list (the kit's are added: `assertion.keys`, `sealing.keys`,
    /// `assertion.callers.<service>.keys`).
    const LIST_KEYS: &'static [&'static str];

    fn load() -> anyhow::Result<Self> {
        Self::load_with(&[])
    }

    fn load_with(extra: &[String]) -> anyhow::Result<Self> {
        load_with(
            Self::SERVICE,
            Self::DEFAULTS,
            Self::DEV,
            Self::LIST_KEYS,
            extra,
        )
    }

    fn from_layers(layers: &[&str]) -> anyhow::Result<Self> {
        let mut all = vec![Self::DEFAULTS];
        all.extend_from_slice(layers);
        from_toml(&all)
    }
}

/// AES-256-GCM keys for secrets a service must read again
/// ([`crate::sealed::Sealer`]): `"<key id>:<base64 of 32 bytes>"`, newest first.
#[derive(Debug, Clone, Deserialize)]
pub struct SealingSettings {
    pub keys: Vec<SecretString>,
}

/// `[catalog]`: the declared catalog file (org-billing and server-product),
/// applied by the `migrate` subcommand only (see [`crate::catalog`]).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CatalogSettings {
    /// Path of the catalog JSON; empty: nothing is declared.
    #[serde(default)]
    pub file: String,
}

/// Parse settings from TOML text alone (tests build settings this way).
pub fn from_toml<T: DeserializeOwned>(layers: &[&str]) -> anyhow::Result<T> {
    let mut builder = Config::builder();
    for l in layers {
        builder = builder.add_source(File::from_str(l, FileFormat::Toml));
    }
    Ok(builder.build()?.try_deserialize()?)
}

#[derive(Debug, Clone, Deserialize)]
pub struct HttpSettings {
    pub host: String,
    pub port: u16,
    /// Largest JSON body accepted, in bytes.
    pub max_body_bytes: usize,
    /// actix worker threads; 0 means one per core.
    #[serde(default)]
    pub workers: usize,
    /// Port of the metrics listener (`GET /metrics`, Prometheus text format)
    /// on `metrics_host`: a port of its own, never routed to the public. 0
    /// picks one.
    #[serde(default = "default_metrics_port")]
    pub metrics_port: u16,
    /// The address the metrics listener binds, apart from `host`: loopback
    /// in dev; in production the pod's addresses ("0.0.0.0", so that
    /// Prometheus reaches it; the chart's NetworkPolicy opens the port to
    /// `metrics.from` only).
    #[serde(default = "default_metrics_host")]
    pub metrics_host: String,
}

fn default_metrics_host() -> String {
    "0.0.0.0".to_owned()
}

fn default_metrics_port() -> u16 {
    9090
}

impl HttpSettings {
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// `metrics_host:metrics_port`, never `host`'s.
    pub fn metrics_addr(&self) -> String {
        format!("{}:{}", self.metrics_host, self.metrics_port)
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct DatabaseSettings {
    /// `postgres://user:pass@host:port/db`, the service's own role; typed as a
    /// secret so it never prints.
    pub url: SecretString,
    /// An administrator connection that creates the role and schema (empty: none).
    #[serde(default)]
    pub admin_url: Option<SecretString>,
    pub max_connections: u32,
    pub min_connections: u32,
    pub acquire_timeout_ms: u64,
    /// A connection idle in the pool at least this long is pinged before it
    /// is handed out (0: every time, sqlx's own default); see [`crate::db::connect`].
    #[serde(default = "default_ping_if_idle_ms")]
    pub ping_if_idle_ms: u64,
    /// Apply the migrations at start (dev, tests). False (production): only
    /// check that the schema has every migration of this binary; the
    /// `migrate` subcommand (the chart's migration Job) applies them.
    #[serde(default)]
    pub migrate_at_start: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct NatsSettings {
    /// `nats://host:4222`, or `tls://host:4222` to require TLS.
    pub url: String,
    /// The NATS user this process connects as: each service its own
    /// (`identity`, `org-billing`, ..., `core-api-gateway`), whose
    /// permissions allow only its own subjects; `hub-admin` manages the
    /// streams (`migrate`) and replays dead letters. Empty: no user (a server
    /// without authorization). See [`crate::nats_access`].
    #[serde(default)]
    pub user: String,
    /// Secret: the user's password (empty: none).
    #[serde(default)]
    pub password: Option<SecretString>,
    /// JetStream replicas of each stream (1, 3 or 5: how many servers of a
    /// NATS cluster keep a copy), applied when the streams are created or
    /// updated.
    #[serde(default = "default_stream_replicas")]
    pub stream_replicas: usize,
    /// Require TLS even with a `nats://` URL (a `tls://` URL always does). A
    /// server that asks for TLS gets it either way.
    #[serde(default)]
    pub tls_required: bool,
    /// A PEM file of CA certificates trusted for the NATS server in addition
    /// to the platform's roots (empty: none).
    #[serde(default)]
    pub tls_ca_file: String,
    /// Put in front of every subject; empty in production.
    #[serde(default)]
    pub subject_prefix: String,
    /// Appended to stream and durable names; empty in production.
    #[serde(default)]
    pub stream_suffix: String,
    /// Keep streams in memory (tests); production uses file storage.
    #[serde(default)]
    pub memory_storage: bool,
    /// How long a stream keeps messages, in seconds.
    pub stream_max_age_secs: u64,
    /// A failed event is redelivered after `consumer_backoff_base_ms`, doubling
    /// per delivery up to `consumer_backoff_max_ms`.
    #[serde(default = "default_backoff_base_ms")]
    pub consumer_backoff_base_ms: u64,
    #[serde(default = "default_backoff_max_ms")]
    pub consumer_backoff_max_ms: u64,
    /// After this many failed deliveries an event moves to the DLQ stream
    /// (never dropped; `<service> dlq replay` sends it again).
    #[serde(default = "default_dead_letter_after")]
    pub dead_letter_after: i64,
}

fn default_stream_replicas() -> usize {
    1
}
fn default_backoff_base_ms() -> u64 {
    1_000
}
fn default_backoff_max_ms() -> u64 {
    300_000
}
fn default_dead_letter_after() -> i64 {
    20
}

impl NatsSettings {
    pub fn naming(&self) -> event_contracts::Naming {
        event_contracts::Naming {
            subject_prefix: self.subject_prefix.clone(),
            stream_suffix: self.stream_suffix.clone(),
        }
    }
}

/// What a service accepts: the gateway's assertions for it, and calls from the
/// services listed in `callers`.
#[derive(Debug, Clone, Deserialize)]
pub struct AssertionSettings {
    /// The HMAC keys the gateway signs this service's assertions with (held by
    /// the gateway and this service only). Every one verifies (rotation: add the
    /// new key here, switch the gateway to it, then drop the old one).
    pub keys: Vec<SecretString>,
    /// An assertion older than this (or this far in the future) is refused.
    pub max_age_secs: i64,
    /// How many assertion ids each replica remembers at most (each for two to
    /// four times `max_age_secs`) to refuse a second use; past it, a request is
    /// refused (503) rather than an id forgotten.
    #[serde(default = "default_replay_cache_entries")]
    pub replay_cache_entries: u64,
    /// Calling services by name: the keys they sign with and the routes
    /// (`"METHOD /path/*/x"`) they may call.
    #[serde(default)]
    pub callers: std::collections::BTreeMap<String, CallerSettings>,
}

fn default_ping_if_idle_ms() -> u64 {
    1000
}

fn default_replay_cache_entries() -> u64 {
    4_000_000
}

#[derive(Debug, Clone, Deserialize)]
pub struct CallerSettings {
    #[serde(default)]
    pub keys: Vec<SecretString>,
    #[serde(default)]
    pub routes: Vec<String>,
}

/// The outbox relay of a service (`[jobs]` in its settings).
#[derive(Debug, Clone, Deserialize)]
pub struct RelaySettings {
    /// How often the relay looks for unpublished rows without a kick.
    pub outbox_poll_ms: u64,
    /// After a kick, how long it waits so that one pass carries many rows.
    pub outbox_linger_ms: u64,
}

impl RelaySettings {
    /// (poll interval, linger after a kick).
    pub fn intervals(&self) -> (std::time::Duration, std::time::Duration) {
        (
            std::time::Duration::from_millis(self.outbox_poll_ms),
            std::time::Duration::from_millis(self.outbox_linger_ms),
        )
    }
}

/// Another service this one calls: its address and the caller key this
/// service signs with (the receiver lists it under `assertion.callers`).
#[derive(Debug, Clone, Deserialize)]
pub struct PeerSettings {
    pub url: String,
    pub timeout_ms: u64,
    /// Secret; empty disables the calls (the event path still applies).
    #[serde(default)]
    pub key: Option<SecretString>,
}

/// How log lines are written: JSON (production) or pretty (a person at a
/// terminal). Any other value refuses to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Json,
    Pretty,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TelemetrySettings {
    /// `json` (default) or `pretty`; anything else refuses to start.
    pub log_format: LogFormat,
    /// `EnvFilter` directives (a level, or `target=level`, comma separated);
    /// `RUST_LOG` wins when set. One that does not parse refuses to start.
    pub log_level: String,
    /// OTLP/HTTP endpoint (e.g. `http://otel-collector:4318/v1/traces`); empty: no export.
    #[serde(default)]
    pub otlp_endpoint: String,
    /// A PEM file of CA certificates trusted for an `https://` collector in
    /// addition to the platform's roots (empty: none).
    #[serde(default)]
    pub otlp_ca_file: String,
    /// One line per request at info (method, route template, status,
    /// latency, request id), target `hub_access`; false turns it off.
    #[serde(default = "yes")]
    pub access_log: bool,
    /// Log lines waiting for the writer thread at most; past it a line is
    /// dropped (and counted in `hub_log_lines_dropped_total`) rather than
    /// making a request wait for stdout.
    #[serde(default = "log_buffer_lines")]
    pub log_buffer_lines: usize,
}

fn log_buffer_lines() -> usize {
    16_384
}

fn yes() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn telemetry(format: &str) -> Result<TelemetrySettings, serde_json::Error> {
        serde_json::from_value(serde_json::json!({
            "log_format": format, "log_level": "info"
        }))
    }

    #[test]
    fn a_log_format_other_than_json_or_pretty_refuses_to_start() {
        assert_eq!(telemetry("json").expect("json").log_format, LogFormat::Json);
        assert_eq!(
            telemetry("pretty").expect("pretty").log_format,
            LogFormat::Pretty
        );
        for bad in ["xml", "JSON", ""] {
            assert!(telemetry(bad).is_err(), "{bad}");
        }
        let t = telemetry("json").expect("json");
        assert!(t.access_log, "the access log is on unless turned off");
        assert_eq!(t.log_buffer_lines, 16_384);
    }

    #[test]
    fn the_metrics_listener_binds_metrics_host_not_host() {
        let s: HttpSettings = from_toml(&["host = \"127.0.0.1\"\nport = 0\nmax_body_bytes = 1\n\
             metrics_port = 0\nmetrics_host = \"127.0.0.2\"\n"])
        .expect("settings");
        let l = std::net::TcpListener::bind(s.metrics_addr()).expect("bind");
        assert_eq!(
            l.local_addr().expect("addr").ip(),
            "127.0.0.2".parse::<std::net::IpAddr>().expect("ip")
        );
        let default: HttpSettings =
            from_toml(&["host = \"127.0.0.1\"\nport = 0\nmax_body_bytes = 1\n"]).expect("s");
        assert_eq!(default.metrics_addr(), "0.0.0.0:9090");
    }

    #[test]
    fn dev_only_settings_stop_a_start_outside_the_dev_profile() {
        let e = dev_only(false, "auth.echo_dev_token", true).expect_err("refused");
        assert!(e.to_string().contains("auth.echo_dev_token"), "{e}");
        assert!(dev_only(true, "auth.echo_dev_token", true).is_ok());
        assert!(dev_only(false, "auth.echo_dev_token", false).is_ok());
    }
}
