//! The console's settings; `defaults.toml` (beside Cargo.toml) documents every key.

use secrecy::SecretString;
use serde::Deserialize;
use service_kit::settings::{HttpSettings, TelemetrySettings};

pub use service_kit::settings::Layered;

pub const DEFAULTS: &str = include_str!("../defaults.toml");
pub const DEV: &str = include_str!("../dev.toml");

#[derive(Debug, Clone, Deserialize)]
pub struct Settings {
    pub http: HttpSettings,
    pub telemetry: TelemetrySettings,
    #[serde(default)]
    pub tls: service_kit::tls::TlsSettings,
    pub console: ConsoleSettings,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ConsoleSettings {
    pub gateway_url: String,
    pub product_gateway_url: String,
    pub cookie_keys: Vec<SecretString>,
    pub secure_cookies: bool,
    pub hsts: bool,
    pub cookie_max_age_secs: i64,
    pub timeout_ms: u64,
    pub default_locale: crate::i18n::Lang,
}

impl Layered for Settings {
    const SERVICE: &'static str = "console";
    const DEFAULTS: &'static str = DEFAULTS;
    const DEV: &'static str = DEV;
    const LIST_KEYS: &'static [&'static str] = &["console.cookie_keys"];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_and_the_dev_overlay_parse() {
        let prod = Settings::from_layers(&[]).expect("defaults");
        assert!(prod.console.secure_cookies && prod.console.hsts);
        assert!(prod.console.cookie_keys.is_empty());
        let dev = Settings::from_layers(&[DEV]).expect("dev");
        assert!(!dev.console.secure_cookies);
        assert_eq!(dev.console.cookie_keys.len(), 1);
    }
}
