//! webhook-dispatcher's settings; `defaults.toml` documents every key.

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
    pub http: HttpSettings,
    pub database: DatabaseSettings,
    pub nats: NatsSettings,
    pub assertion: AssertionSettings,
    pub telemetry: TelemetrySettings,
    pub sealing: SealingSettings,
    pub delivery: DeliverySettings,
    pub ssrf: SsrfSettings,
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
    const LIST_KEYS: &'static [&'static str] =
        &["assertion.keys", "sealing.keys", "delivery.backoff_ms"];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn production_refuses_loopback_and_dev_finishes_three_attempts_within_30s() {
        let s = Settings::from_layers(&[]).expect("defaults");
        assert!(!s.ssrf.allow_loopback && !s.ssrf.allow_private);
        assert_eq!(s.delivery.attempts, 3);
        let dev = Settings::from_layers(&[DEV]).expect("dev");
        let worst: u64 = dev.delivery.backoff_ms.iter().sum::<u64>() + 3 * dev.delivery.timeout_ms;
        assert!(worst <= 30_000, "{worst}");
    }
}
