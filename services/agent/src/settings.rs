//! agent's settings; `defaults.toml` (beside Cargo.toml) documents every key.

use secrecy::SecretString;
use serde::Deserialize;
use service_kit::settings::{
    AssertionSettings, DatabaseSettings, HttpSettings, NatsSettings, PeerSettings, RelaySettings,
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
    /// The services the assistant acts through, each with agent's caller key.
    pub identity: PeerSettings,
    pub org_billing: PeerSettings,
    pub kyc: PeerSettings,
    pub server_product: PeerSettings,
    pub model: ModelSettings,
    pub agent: AgentSettings,
    pub curation: CurationSettings,
    pub jobs: RelaySettings,
}

/// The model provider (OpenAI-compatible chat completions with tool calling).
#[derive(Debug, Clone, Deserialize)]
pub struct ModelSettings {
    /// e.g. `https://api.openai.com/v1`; empty: no provider, rules answer.
    pub base_url: String,
    /// Secret bearer key for the provider.
    #[serde(default)]
    pub api_key: Option<SecretString>,
    /// The model until staff choose one (`PUT /v1/agent/model`).
    pub model: String,
    /// One provider call; past it the rules answer instead.
    pub timeout_ms: u64,
    /// Tool-calling rounds per message before the model must answer.
    pub max_rounds: usize,
    /// Largest answer asked of the model, in tokens.
    pub max_tokens: u32,
}

#[derive(Debug, Clone, Deserialize)]
pub struct AgentSettings {
    /// A staged action expires this long after it was prepared.
    pub confirm_ttl_secs: i64,
    /// Longest accepted message, in characters.
    pub max_message_chars: usize,
    /// Earlier messages of the conversation given to the model.
    pub history_messages: i64,
    /// Group commit of exchanges: writer tasks, and exchanges per transaction.
    pub journal_writers: usize,
    pub journal_batch: usize,
    /// How long an organization lookup is reused.
    pub lookup_cache_secs: u64,
    /// How long after its first confirmation an action whose outcome is not
    /// known may be confirmed again (re-sent with the same Idempotency-Key).
    /// Keep it below org-billing's key retention (7 days).
    pub unknown_retry_secs: i64,
    /// The most of a conversation's transcript (its latest messages) sent to
    /// the model for its summary, in characters.
    pub summary_input_chars: usize,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CurationSettings {
    /// How often each replica looks for users in their local night window.
    pub interval_secs: u64,
    /// The local night window, hours [start, end).
    pub window_start_hour: u32,
    pub window_end_hour: u32,
    /// Users looked at per pass.
    pub batch_users: i64,
    /// The model writes a user's memory at most once in this many seconds
    /// (on demand or scheduled); curations in between leave it as it is.
    pub model_interval_secs: i64,
}

impl Layered for Settings {
    const SERVICE: &'static str = "agent";
    const DEFAULTS: &'static str = DEFAULTS;
    const DEV: &'static str = DEV;
    const LIST_KEYS: &'static [&'static str] = &[];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn production_defaults_hold_no_key_and_no_provider() {
        let s = Settings::from_layers(&[]).expect("defaults parse");
        assert!(s.assertion.keys.is_empty());
        assert!(s.org_billing.key.is_none() && s.identity.key.is_none());
        assert!(s.model.base_url.is_empty() && s.model.api_key.is_none());
        assert_eq!(s.agent.confirm_ttl_secs, 900);
        // An unknown outcome is re-sent only while org-billing keeps its key.
        assert!(s.agent.unknown_retry_secs < 7 * 86_400);
        assert_eq!(
            (s.curation.window_start_hour, s.curation.window_end_hour),
            (2, 5)
        );
    }

    #[test]
    fn the_dev_profile_has_every_peer_key() {
        let s = Settings::from_layers(&[DEV]).expect("dev parses");
        for p in [&s.identity, &s.org_billing, &s.kyc, &s.server_product] {
            assert!(p.key.is_some(), "{}", p.url);
        }
    }
}

service_kit::common_settings!(Settings);
