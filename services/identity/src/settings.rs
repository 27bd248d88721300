//! identity's settings: the kit's common sections plus `auth` and `jobs`.
//! `defaults.toml` (beside Cargo.toml) documents every key.

use serde::Deserialize;
use service_kit::settings::{
    AssertionSettings, DatabaseSettings, HttpSettings, NatsSettings, TelemetrySettings,
};

pub const DEFAULTS: &str = include_str!("../defaults.toml");
pub const DEV: &str = include_str!("../dev.toml");

#[derive(Debug, Clone, Deserialize)]
pub struct Settings {
    pub http: HttpSettings,
    pub database: DatabaseSettings,
    pub nats: NatsSettings,
    pub assertion: AssertionSettings,
    pub telemetry: TelemetrySettings,
    pub auth: AuthSettings,
    pub jobs: JobSettings,
}

#[derive(Debug, Clone, Deserialize)]
pub struct AuthSettings {
    pub echo_dev_token: bool,
    pub staff_emails: Vec<String>,
    pub magic_link_ttl_secs: i64,
    pub session_ttl_secs: i64,
    pub request_link_per_email_per_hour: i64,
    pub request_link_per_ip_per_hour: i64,
    pub verify_per_ip_per_minute: i64,
    pub audit_page: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct JobSettings {
    pub sweep_interval_secs: u64,
    pub keep_dead_credentials_secs: i64,
    pub outbox_poll_ms: u64,
    pub outbox_linger_ms: u64,
}

impl Settings {
    /// Defaults < dev overlay (HUB_PROFILE=dev) < config/identity.toml < IDENTITY__* env;
    /// `STAFF_EMAILS` (comma-separated) replaces `auth.staff_emails` when set.
    pub fn load() -> anyhow::Result<Settings> {
        let mut s: Settings = service_kit::settings::load(
            "identity",
            DEFAULTS,
            DEV,
            &["assertion.keys", "auth.staff_emails"],
        )?;
        if let Ok(list) = std::env::var("STAFF_EMAILS") {
            s.auth.staff_emails = list
                .split(',')
                .map(|e| e.trim().to_lowercase())
                .filter(|e| !e.is_empty())
                .collect();
        }
        Ok(s)
    }

    /// Defaults plus the given TOML layers, no files or environment (tests).
    pub fn from_layers(layers: &[&str]) -> anyhow::Result<Settings> {
        let mut all = vec![DEFAULTS];
        all.extend_from_slice(layers);
        service_kit::settings::from_toml(&all)
    }
}
