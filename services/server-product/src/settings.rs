//! server-product's settings; `defaults.toml` (beside Cargo.toml) documents every key.

use serde::Deserialize;
use service_kit::settings::{
    AssertionSettings, CatalogSettings, DatabaseSettings, HttpSettings, NatsSettings, PeerSettings,
    RelaySettings, SealingSettings, TelemetrySettings,
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
    pub provider: ProviderSettings,
    pub pages: PageSettings,
    pub seed: SeedSettings,
    /// The declared catalog file (its SKUs), applied by `migrate`.
    #[serde(default)]
    pub catalog: CatalogSettings,
    pub jobs: RelaySettings,
    pub usage: UsageSettings,
    pub orders: OrderSettings,
    /// kyc's internal address and server-product's caller key there (the
    /// organization's KYC status, when `orders.require_kyc_for_paid`).
    pub kyc: PeerSettings,
}

#[derive(Debug, Clone, Deserialize)]
pub struct OrderSettings {
    pub writers: usize,
    pub max_batch: usize,
    /// Live servers per organization (0: no cap).
    pub max_servers_per_org: i64,
    /// Orders per organization per minute, per replica (0: no limit).
    pub rate_per_minute: u32,
    pub burst: u32,
    /// A paid SKU (monthly price above zero) is ordered only by an
    /// organization whose KYC status is `verified` (asked of kyc at each
    /// such order). Off by default, as the interface orders without it.
    pub require_kyc_for_paid: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct UsageSettings {
    pub month_split_interval_secs: u64,
}

/// The provisioning drivers this build has; any other `provider.kind`
/// refuses to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    Sandbox,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ProviderSettings {
    pub kind: ProviderKind,
    pub sandbox_delay_ms: u64,
    pub sandbox_fail: bool,
    pub poll_ms: u64,
    pub max_attempts: i32,
    pub worker: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PageSettings {
    pub default_limit: i64,
    pub max_limit: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SeedSettings {
    pub skus: bool,
}

impl Layered for Settings {
    const SERVICE: &'static str = "server-product";
    const DEFAULTS: &'static str = DEFAULTS;
    const DEV: &'static str = DEV;
    const LIST_KEYS: &'static [&'static str] = &[];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_this_build_does_not_have_refuses_to_start() {
        let s = Settings::from_layers(&["[provider]\nkind = \"sandbox\"\n"]).expect("sandbox");
        assert_eq!(s.provider.kind, ProviderKind::Sandbox);
        let e = Settings::from_layers(&["[provider]\nkind = \"hetzner\"\n"])
            .expect_err("no such driver")
            .to_string();
        assert!(e.contains("hetzner") || e.contains("kind"), "{e}");
    }

    #[test]
    fn production_defaults_hold_no_key_and_seed_nothing() {
        let s = Settings::from_layers(&[]).expect("defaults parse");
        assert!(s.assertion.keys.is_empty() && s.sealing.keys.is_empty());
        assert!(!s.seed.skus);
        assert!(s.catalog.file.is_empty());
        assert_eq!(s.provider.kind, ProviderKind::Sandbox);
        assert!(!s.orders.require_kyc_for_paid && s.kyc.key.is_none());
    }

    #[test]
    fn the_dev_profile_activates_api_servers_within_ten_seconds() {
        let s = Settings::from_layers(&[DEV]).expect("dev parses");
        assert!(s.provider.sandbox_delay_ms + 2 * s.provider.poll_ms < 10_000);
        assert!(service_kit::sealed::Sealer::new(&s.sealing.keys).is_ok());
    }
}

service_kit::common_settings!(Settings);
