//! kyc's settings; `defaults.toml` (beside Cargo.toml) documents every key.

use serde::Deserialize;
use service_kit::settings::{
    AssertionSettings, DatabaseSettings, HttpSettings, NatsSettings, PeerSettings, RelaySettings,
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
    /// org-billing's internal address and kyc's caller key there.
    pub org_billing: PeerSettings,
    pub sealing: SealingSettings,
    pub retention: RetentionSettings,
    pub jobs: RelaySettings,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RetentionSettings {
    pub purge_after_days: i64,
    pub sweep_interval_secs: u64,
}

impl Layered for Settings {
    const SERVICE: &'static str = "kyc";
    const DEFAULTS: &'static str = DEFAULTS;
    const DEV: &'static str = DEV;
    const LIST_KEYS: &'static [&'static str] = &[];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn production_defaults_hold_no_key_and_purge_after_180_days() {
        let s = Settings::from_layers(&[]).expect("defaults parse");
        assert!(s.assertion.keys.is_empty());
        assert!(s.sealing.keys.is_empty());
        assert!(s.org_billing.key.is_none());
        assert_eq!(s.retention.purge_after_days, 180);
    }

    #[test]
    fn the_dev_key_is_a_usable_sealing_key() {
        let s = Settings::from_layers(&[DEV]).expect("dev parses");
        assert!(service_kit::sealed::Sealer::new(&s.sealing.keys).is_ok());
    }
}

service_kit::common_settings!(Settings);
