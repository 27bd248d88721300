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

/// Load settings for `service` from the layers above.
///
/// `list_keys` names the keys whose environment value is a comma-separated list.
pub fn load<T: DeserializeOwned>(
    service: &str,
    defaults: &str,
    dev_overlay: &str,
    list_keys: &[&str],
) -> anyhow::Result<T> {
    let env_prefix = service.to_uppercase().replace('-', "_");
    let dir = std::env::var("CONFIG_DIR").unwrap_or_else(|_| "config".to_owned());
    let mut env = Environment::with_prefix(&env_prefix)
        .prefix_separator("__")
        .separator("__")
        .try_parsing(true);
    if !list_keys.is_empty() {
        env = env.list_separator(",");
        for k in list_keys {
            env = env.with_list_parse_key(k);
        }
    }
    let mut builder = Config::builder().add_source(File::from_str(defaults, FileFormat::Toml));
    if profile_is_dev() {
        builder = builder.add_source(File::from_str(dev_overlay, FileFormat::Toml));
    }
    let cfg = builder
        .add_source(File::with_name(&format!("{dir}/{service}")).required(false))
        .add_source(env)
        .build()?;
    Ok(cfg.try_deserialize()?)
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
}

impl HttpSettings {
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct DatabaseSettings {
    /// `postgres://user:pass@host:port/db`; typed as a secret so it never prints.
    pub url: SecretString,
    pub max_connections: u32,
    pub min_connections: u32,
    pub acquire_timeout_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct NatsSettings {
    pub url: String,
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
}

impl NatsSettings {
    pub fn naming(&self) -> event_contracts::Naming {
        event_contracts::Naming {
            subject_prefix: self.subject_prefix.clone(),
            stream_suffix: self.stream_suffix.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct AssertionSettings {
    /// HMAC keys; the first signs, every one verifies (rotation: prepend the new
    /// key everywhere, then drop the old one).
    pub keys: Vec<SecretString>,
    /// An assertion older than this (or this far in the future) is refused.
    pub max_age_secs: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TelemetrySettings {
    /// `json` (default) or `pretty`.
    pub log_format: String,
    /// An `EnvFilter` directive; `RUST_LOG` wins when set.
    pub log_level: String,
    /// OTLP/HTTP endpoint (e.g. `http://otel-collector:4318/v1/traces`); empty: no export.
    #[serde(default)]
    pub otlp_endpoint: String,
}
