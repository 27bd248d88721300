//! org-billing's settings; `defaults.toml` (beside Cargo.toml) documents every key.

use serde::Deserialize;
use service_kit::settings::{
    AssertionSettings, CatalogSettings, DatabaseSettings, HttpSettings, NatsSettings, PeerSettings,
    TelemetrySettings,
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
    /// identity's internal address and org-billing's caller key there.
    pub identity: PeerSettings,
    /// kyc's internal address and org-billing's caller key there.
    pub kyc: PeerSettings,
    /// server-product's internal address and org-billing's caller key there.
    pub server_product: PeerSettings,
    pub orgs: OrgSettings,
    pub seed: SeedSettings,
    /// The declared catalog file (its distributors), applied by `migrate`.
    #[serde(default)]
    pub catalog: CatalogSettings,
    pub jobs: JobSettings,
    pub ledger: LedgerSettings,
    pub billing: BillingSettings,
    /// Seals the verified legal identity of each organization at rest.
    pub sealing: BillingSealingSettings,
    /// Charges made of server-product's usage.
    pub usage: UsageSettings,
}

/// `[sealing]`: the AES-256-GCM keys of the legal identities
/// ([`service_kit::sealed::Sealer`]) and the key of their search hashes.
#[derive(Debug, Clone, Deserialize)]
pub struct BillingSealingSettings {
    pub keys: Vec<secrecy::SecretString>,
    /// HMAC-SHA256 key of `organizations.tax_id_hash` (staff search by tax
    /// id without opening any identity); required (empty: no start).
    pub search_key: secrecy::SecretString,
}

#[derive(Debug, Clone, Deserialize)]
pub struct UsageSettings {
    pub brand: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LedgerSettings {
    pub writers: usize,
    pub token_writers: usize,
    pub max_batch: usize,
    pub ping_if_idle_ms: u64,
    pub queue_timeout_ms: u64,
    pub batch_timeout_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BillingSettings {
    pub payment_terms_days: i64,
    pub max_lines: usize,
    pub page_default: i64,
    pub page_max: i64,
    pub max_pending_claims: i64,
    pub run_batch: i64,
    pub resume_interval_secs: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct OrgSettings {
    pub max_created_per_day: i64,
    pub max_memberships: usize,
    pub max_projects: i64,
    pub max_assets: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SeedSettings {
    pub distributors: bool,
    pub billing_examples: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct JobSettings {
    pub outbox_poll_ms: u64,
    pub outbox_linger_ms: u64,
    pub keep_secs: i64,
    pub sweep_interval_secs: u64,
}

impl JobSettings {
    /// The outbox relay's part of `[jobs]`.
    pub fn relay(&self) -> service_kit::settings::RelaySettings {
        service_kit::settings::RelaySettings {
            outbox_poll_ms: self.outbox_poll_ms,
            outbox_linger_ms: self.outbox_linger_ms,
        }
    }
}

impl Layered for Settings {
    const SERVICE: &'static str = "org-billing";
    const DEFAULTS: &'static str = DEFAULTS;
    const DEV: &'static str = DEV;
    const LIST_KEYS: &'static [&'static str] = &[];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn production_defaults_hold_no_sealing_key() {
        let s = Settings::from_layers(&[]).expect("defaults parse");
        assert!(s.sealing.keys.is_empty());
        assert!(service_kit::sealed::Sealer::new(&s.sealing.keys).is_err());
    }

    #[test]
    fn the_dev_key_is_a_usable_sealing_key() {
        let s = Settings::from_layers(&[DEV]).expect("dev parses");
        assert!(service_kit::sealed::Sealer::new(&s.sealing.keys).is_ok());
        assert!(crate::search_key::SearchKey::new(&s.sealing.search_key).is_ok());
    }

    #[test]
    fn production_defaults_hold_no_search_key() {
        let s = Settings::from_layers(&[]).expect("defaults parse");
        assert!(crate::search_key::SearchKey::new(&s.sealing.search_key).is_err());
    }
}

service_kit::common_settings!(Settings);
