//! Gateway settings; `defaults.toml` (beside Cargo.toml) documents every key.

use secrecy::SecretString;
use serde::Deserialize;
use service_kit::settings::{HttpSettings, NatsSettings, TelemetrySettings};
use std::collections::BTreeMap;

pub use service_kit::settings::Layered;

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
    /// Trust for outgoing HTTPS (`[tls]`): the platform's roots plus
    /// `extra_ca_file`.
    #[serde(default)]
    pub tls: service_kit::tls::TlsSettings,
    pub serve: Serve,
    pub http: HttpSettings,
    pub product_http: HttpSettings,
    pub nats: NatsSettings,
    pub assertion: GatewayAssertionSettings,
    pub telemetry: TelemetrySettings,
    pub cache: CacheSettings,
    pub proxy: ProxySettings,
    pub overview: OverviewSettings,
    /// Service name -> base URL ("" = not deployed).
    pub upstreams: BTreeMap<String, String>,
    pub routes: Routes,
}

/// The key the gateway signs each service's assertions with (that service
/// holds it in its own `assertion.keys`; no other service does).
#[derive(Debug, Clone, Deserialize)]
pub struct GatewayAssertionSettings {
    pub keys: BTreeMap<String, SecretString>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CacheSettings {
    pub ttl_secs: u64,
    pub max_entries: u64,
    pub refused_ttl_secs: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ProxySettings {
    pub trusted_proxies: Vec<String>,
    pub resolve_timeout_ms: u64,
    pub upstream_timeout_ms: u64,
    pub public: Vec<String>,
    /// At most this many memberships travel in an assertion (the organization
    /// the request names first); beyond it the assertion says it is truncated.
    pub assertion_memberships: usize,
    /// The methods forwarded on a route that does not name its own
    /// (`routes.*.methods`); any other answers 405 with `Allow`.
    pub methods: Vec<String>,
}

/// `GET /v1/admin/overview`: how long one gathering is served, and how long
/// each service may take to give its part.
#[derive(Debug, Clone, Deserialize)]
pub struct OverviewSettings {
    pub cache_secs: u64,
    pub timeout_ms: u64,
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
    /// The methods forwarded under this prefix; absent: `proxy.methods`.
    #[serde(default)]
    pub methods: Option<Vec<String>>,
}

impl Layered for Settings {
    const SERVICE: &'static str = "core-api-gateway";
    const DEFAULTS: &'static str = DEFAULTS;
    const DEV: &'static str = DEV;
    const LIST_KEYS: &'static [&'static str] =
        &["proxy.trusted_proxies", "proxy.public", "proxy.methods"];
}

#[cfg(test)]
mod tests {
    use super::*;

    // The only test in this crate that touches the environment.
    #[test]
    fn environment_lists_and_upstreams_override_the_defaults() {
        std::env::set_var(
            "CORE_API_GATEWAY__PROXY__TRUSTED_PROXIES",
            "10.0.0.0/8,192.0.2.7",
        );
        std::env::set_var(
            "CORE_API_GATEWAY__UPSTREAMS__ORG_BILLING",
            "http://billing:9",
        );
        std::env::set_var("CORE_API_GATEWAY__SERVE", "product");
        let s = Settings::load().expect("settings load");
        for k in [
            "CORE_API_GATEWAY__PROXY__TRUSTED_PROXIES",
            "CORE_API_GATEWAY__UPSTREAMS__ORG_BILLING",
            "CORE_API_GATEWAY__SERVE",
        ] {
            std::env::remove_var(k);
        }
        assert_eq!(s.proxy.trusted_proxies, ["10.0.0.0/8", "192.0.2.7"]);
        assert_eq!(
            s.upstreams.get("org_billing").map(String::as_str),
            Some("http://billing:9")
        );
        assert_eq!(
            s.upstreams.get("identity").map(String::as_str),
            Some("http://identity:8081")
        );
        assert_eq!(s.serve, Serve::Product);
        assert_eq!(s.proxy.public.len(), 22, "defaults kept");
    }

    #[test]
    fn production_defaults_trust_no_proxy_and_carry_no_key() {
        let s = Settings::from_layers(&[]).expect("defaults parse");
        assert!(s.proxy.trusted_proxies.is_empty());
        assert!(s.assertion.keys.is_empty());
        assert!(
            !crate::clientip::TrustedProxies::parse(&s.proxy.trusted_proxies)
                .expect("parse")
                .any()
        );
        assert_eq!(s.serve, Serve::Both);
    }
}
