//! Gateway settings; `defaults.toml` (beside Cargo.toml) documents every key.

use serde::Deserialize;
use service_kit::settings::{AssertionSettings, HttpSettings, NatsSettings, TelemetrySettings};
use std::collections::BTreeMap;

pub const DEFAULTS: &str = include_str!("../defaults.toml");
pub const DEV: &str = include_str!("../dev.toml");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Serve {
    Both,
    Core,
    Product,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Settings {
    pub serve: Serve,
    pub http: HttpSettings,
    pub product_http: HttpSettings,
    pub nats: NatsSettings,
    pub assertion: AssertionSettings,
    pub telemetry: TelemetrySettings,
    pub cache: CacheSettings,
    pub proxy: ProxySettings,
    /// Service name -> base URL ("" = not deployed).
    pub upstreams: BTreeMap<String, String>,
    pub routes: Routes,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CacheSettings {
    pub ttl_secs: u64,
    pub max_entries: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ProxySettings {
    pub trusted_proxies: Vec<String>,
    pub resolve_timeout_ms: u64,
    pub upstream_timeout_ms: u64,
    pub public: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Routes {
    pub core: Vec<RouteRule>,
    pub product: Vec<RouteRule>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RouteRule {
    pub prefix: String,
    pub service: String,
}

impl Settings {
    pub fn load() -> anyhow::Result<Settings> {
        service_kit::settings::load(
            "core-api-gateway",
            DEFAULTS,
            DEV,
            &["assertion.keys", "proxy.trusted_proxies", "proxy.public"],
        )
    }

    pub fn from_layers(layers: &[&str]) -> anyhow::Result<Settings> {
        let mut all = vec![DEFAULTS];
        all.extend_from_slice(layers);
        service_kit::settings::from_toml(&all)
    }
}
