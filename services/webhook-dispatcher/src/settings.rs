//! webhook-dispatcher's settings; `defaults.toml` documents every key.

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use service_kit::settings::{
    AssertionSettings, DatabaseSettings, HttpSettings, NatsSettings, RelaySettings,
    SealingSettings, TelemetrySettings,
};

pub use service_kit::settings::Layered;

pub const DEFAULTS: &str = include_str!("../defaults.toml");
pub const DEV: &str = include_str!("../dev.toml");

#[derive(Debug, Clone, Deserialize)]
pub struct Settings {
    /// Trust for outgoing HTTPS (`[tls]`): the platform's roots plus
    /// `extra_ca_file`.
    #[serde(default)]
    pub tls: service_kit::tls::TlsSettings,
    pub http: HttpSettings,
    pub database: DatabaseSettings,
    pub nats: NatsSettings,
    pub assertion: AssertionSettings,
    pub telemetry: TelemetrySettings,
    pub sealing: SealingSettings,
    pub delivery: DeliverySettings,
    pub ssrf: SsrfSettings,
    pub webhooks: WebhookSettings,
    pub jobs: RelaySettings,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DeliverySettings {
    pub attempts: i32,
    pub backoff_ms: Vec<u64>,
    pub timeout_ms: u64,
    pub concurrency: usize,
    pub per_endpoint: usize,
    pub batch: i64,
    pub lease_ms: u64,
    pub rotation_overlap_secs: i64,
    /// Run the delivery worker in this process (every replica may).
    pub worker: bool,
    /// An explicit HTTP(S) proxy for deliveries (empty: none, and the
    /// `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY` variables are ignored). A secret:
    /// it may carry credentials.
    #[serde(default)]
    pub proxy: Option<SecretString>,
}

impl DeliverySettings {
    /// The configured proxy URL, if any.
    pub fn proxy_url(&self) -> Option<&str> {
        self.proxy
            .as_ref()
            .map(|p| p.expose_secret().trim())
            .filter(|p| !p.is_empty())
    }
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct WebhookSettings {
    /// Live endpoints an organization may have (409 beyond).
    pub max_endpoints_per_org: i64,
    /// Manual retries of one delivery (an event at an endpoint), 409 beyond.
    pub max_manual_retries: i32,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct SsrfSettings {
    pub allow_loopback: bool,
    pub allow_private: bool,
}

impl Layered for Settings {
    const SERVICE: &'static str = "webhook-dispatcher";
    const DEFAULTS: &'static str = DEFAULTS;
    const DEV: &'static str = DEV;
    const LIST_KEYS: &'static [&'static str] = &["delivery.backoff_ms"];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn production_refuses_loopback_and_dev_finishes_three_attempts_within_30s() {
        let s = Settings::from_layers(&[]).expect("defaults");
        assert!(!s.ssrf.allow_loopback && !s.ssrf.allow_private);
        assert_eq!(s.delivery.attempts, 3);
        assert_eq!(s.delivery.proxy_url(), None);
        assert_eq!(
            (
                s.webhooks.max_endpoints_per_org,
                s.webhooks.max_manual_retries
            ),
            (20, 10)
        );
        let dev = Settings::from_layers(&[DEV]).expect("dev");
        let worst: u64 = dev.delivery.backoff_ms.iter().sum::<u64>() + 3 * dev.delivery.timeout_ms;
        assert!(worst <= 30_000, "{worst}");
    }
}

service_kit::common_settings!(Settings);
