//! identity's settings: the kit's common sections plus `auth` and `jobs`.
//! `defaults.toml` (beside Cargo.toml) documents every key.

use secrecy::SecretString;
use serde::Deserialize;
use service_kit::settings::{
    AssertionSettings, DatabaseSettings, HttpSettings, NatsSettings, SealingSettings,
    TelemetrySettings,
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
    pub auth: AuthSettings,
    pub jobs: JobSettings,
    pub mail: MailSettings,
    /// Seals the tokens in the mail queue until they are sent, and the TOTP
    /// secrets.
    pub sealing: SealingSettings,
    pub invites: InviteSettings,
    pub mfa: MfaSettings,
    /// Passkeys (WebAuthn): the relying party and its ceremonies.
    pub passkeys: crate::passkeys::PasskeySettings,
    /// The OpenID Provider's signing keys.
    pub oidc: crate::oidc_keys::KeySettings,
}

/// `[invites]`: invitations to an organization (see `invites.rs`).
#[derive(Debug, Clone, Deserialize)]
pub struct InviteSettings {
    /// A pending invite expires this long after it was made.
    pub ttl_secs: i64,
    /// Pending invites one organization holds at most (409 beyond).
    pub max_pending_per_org: i64,
    /// Invites one organization sends per hour (429 beyond).
    pub per_org_per_hour: i64,
    /// Invites one address receives per hour, from every organization (429
    /// beyond).
    pub per_email_per_hour: i64,
    /// The accept page; the accept URL is this URL with `token=<token>` added.
    pub accept_base_url: String,
}

impl InviteSettings {
    /// Refuse settings the service cannot work with (at start).
    pub fn check(&self) -> anyhow::Result<()> {
        let base = url::Url::parse(&self.accept_base_url)
            .map_err(|_| anyhow::anyhow!("invites.accept_base_url is not a URL"))?;
        anyhow::ensure!(
            matches!(base.scheme(), "https" | "http"),
            "invites.accept_base_url must be an http(s) URL"
        );
        anyhow::ensure!(self.ttl_secs > 0, "invites.ttl_secs must be positive");
        anyhow::ensure!(
            self.max_pending_per_org > 0,
            "invites.max_pending_per_org must be positive"
        );
        Ok(())
    }
}

/// `[mfa]`: TOTP second factor (see `mfa.rs`).
#[derive(Debug, Clone, Deserialize)]
pub struct MfaSettings {
    /// A staff email's session is staff only if it was opened through MFA.
    pub staff_required: bool,
    /// The issuer authenticator apps show (the otpauth URI's).
    pub issuer: String,
    /// How long an `mfa_token` lives.
    pub challenge_ttl_secs: i64,
    /// Failed codes one `mfa_token` takes before it is dead.
    pub max_attempts: i32,
    /// Code attempts (confirm, disable) per user per hour, failures included.
    pub attempts_per_user_per_hour: i64,
    /// Wrong codes in a row (confirm, disable, verify) before a lockout.
    pub lockout_after_failures: i32,
    /// The first lockout's length; each further one (without a right code
    /// between) doubles it, up to `lockout_max_secs`.
    pub lockout_base_secs: i64,
    pub lockout_max_secs: i64,
}

impl MfaSettings {
    /// The lockout after wrong codes in a row.
    pub fn lockout(&self) -> crate::mfa::Lockout {
        crate::mfa::Lockout {
            after: self.lockout_after_failures,
            base_secs: self.lockout_base_secs,
            max_secs: self.lockout_max_secs,
        }
    }

    /// Refuse settings the service cannot work with (at start).
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.issuer.contains(':') && self.issuer.len() <= 100,
            "mfa.issuer: at most 100 characters, no colon"
        );
        anyhow::ensure!(
            self.challenge_ttl_secs > 0 && self.max_attempts > 0,
            "mfa.challenge_ttl_secs and mfa.max_attempts must be positive"
        );
        anyhow::ensure!(
            self.lockout_after_failures > 0
                && self.lockout_base_secs > 0
                && self.lockout_max_secs >= self.lockout_base_secs,
            "mfa.lockout_after_failures and mfa.lockout_base_secs must be positive, \
             mfa.lockout_max_secs at least lockout_base_secs"
        );
        Ok(())
    }
}

/// `[mail]`: outbound sign-in mail over SMTP (see `mail.rs`).
#[derive(Debug, Clone, Deserialize)]
pub struct MailSettings {
    /// `smtps://user:pass@host:465`, `smtp://user:pass@host:587?tls=required`
    /// (STARTTLS), or `smtp://127.0.0.1:2525?tls=none` (loopback only, dev).
    /// Empty: no mail is sent.
    pub smtp_url: SecretString,
    pub from: String,
    /// The sign-in page; the link is this URL with `token=<token>` added.
    pub link_base_url: String,
    /// Optional PEM file of extra root certificates the SMTP server may chain to.
    pub ca_file: String,
    pub timeout_ms: u64,
    pub lease_ms: u64,
    pub poll_ms: u64,
    pub retry_base_ms: u64,
    pub retry_max_ms: u64,
    pub concurrency: usize,
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
    pub max_memberships_per_user: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct JobSettings {
    pub sweep_interval_secs: u64,
    pub keep_dead_credentials_secs: i64,
    pub outbox_poll_ms: u64,
    pub outbox_linger_ms: u64,
}

impl AuthSettings {
    /// `echo_dev_token` (the magic-link token in request-link's answer)
    /// hands a session to whoever asks for anyone's link: refused at start
    /// outside the dev profile (`dev`: [`service_kit::Runtime::dev`]).
    pub fn check(&self, dev: bool) -> anyhow::Result<()> {
        service_kit::settings::dev_only(dev, "identity auth.echo_dev_token", self.echo_dev_token)
    }
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
    const SERVICE: &'static str = "identity";
    const DEFAULTS: &'static str = DEFAULTS;
    const DEV: &'static str = DEV;
    const LIST_KEYS: &'static [&'static str] = &["auth.staff_emails", "passkeys.origins"];

    /// The layers, then `STAFF_EMAILS` (comma-separated) replaces
    /// `auth.staff_emails` when set.
    fn load_with(extra: &[String]) -> anyhow::Result<Settings> {
        let mut s: Settings =
            service_kit::settings::load_with(Self::SERVICE, DEFAULTS, DEV, Self::LIST_KEYS, extra)?;
        if let Ok(list) = std::env::var("STAFF_EMAILS") {
            s.auth.staff_emails = list
                .split(',')
                .map(|e| e.trim().to_lowercase())
                .filter(|e| !e.is_empty())
                .collect();
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    // The only test in this crate that touches the environment.
    #[test]
    fn layers_apply_in_order_defaults_dev_file_then_environment() {
        let dir = std::env::temp_dir().join(format!("identity-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(
            dir.join("identity.toml"),
            "[http]\nport = 9100\nmax_body_bytes = 1234\n[auth]\nsession_ttl_secs = 60\n",
        )
        .expect("file");
        std::env::set_var("CONFIG_DIR", &dir);
        std::env::set_var("HUB_PROFILE", "dev");
        std::env::set_var("IDENTITY__HTTP__PORT", "9200");
        std::env::set_var(
            "IDENTITY__ASSERTION__KEYS",
            "first-key-0123456789,second-key-0123456789",
        );
        std::env::set_var("STAFF_EMAILS", " Boss@Example.com ,ops@example.com,");
        // A list from one variable, as the chart sets it.
        std::env::set_var(
            "IDENTITY__PASSKEYS__ORIGINS",
            "https://console.example.com,https://app.example.com",
        );
        let s = Settings::load().expect("settings load");
        for k in [
            "CONFIG_DIR",
            "HUB_PROFILE",
            "IDENTITY__HTTP__PORT",
            "IDENTITY__ASSERTION__KEYS",
            "STAFF_EMAILS",
            "IDENTITY__PASSKEYS__ORIGINS",
        ] {
            std::env::remove_var(k);
        }
        let _ = std::fs::remove_dir_all(&dir);

        assert_eq!(s.http.port, 9200, "environment beats the file");
        assert_eq!(s.http.max_body_bytes, 1234, "the file beats the defaults");
        assert_eq!(s.auth.session_ttl_secs, 60);
        assert_eq!(s.http.host, "127.0.0.1", "the dev overlay applied");
        assert!(s.auth.echo_dev_token, "the dev overlay applied");
        assert_eq!(s.auth.magic_link_ttl_secs, 900, "defaults fill the rest");
        let keys: Vec<&str> = s.assertion.keys.iter().map(|k| k.expose_secret()).collect();
        assert_eq!(keys, ["first-key-0123456789", "second-key-0123456789"]);
        assert_eq!(s.auth.staff_emails, ["boss@example.com", "ops@example.com"]);
        assert_eq!(
            s.passkeys.origins,
            ["https://console.example.com", "https://app.example.com"]
        );
        // Secrets never print.
        assert!(!format!("{:?}", s.database).contains("postgres://"));
    }

    #[test]
    fn echo_dev_token_is_refused_outside_the_dev_profile() {
        let dev = Settings::from_layers(&[DEV]).expect("dev parses");
        assert!(dev.auth.echo_dev_token);
        assert!(dev.auth.check(true).is_ok());
        let e = dev.auth.check(false).expect_err("refused in production");
        assert!(e.to_string().contains("auth.echo_dev_token"), "{e}");
        let prod = Settings::from_layers(&[]).expect("defaults parse");
        assert!(prod.auth.check(false).is_ok());
    }

    #[test]
    fn production_defaults_are_safe() {
        let s = Settings::from_layers(&[]).expect("defaults parse");
        assert!(!s.auth.echo_dev_token);
        assert!(s.assertion.keys.is_empty(), "no built-in production key");
        assert!(s.auth.staff_emails.is_empty());
        assert_eq!(s.auth.request_link_per_email_per_hour, 5);
        assert_eq!(s.auth.request_link_per_ip_per_hour, 20);
        assert_eq!(s.auth.verify_per_ip_per_minute, 15);
        assert_eq!(s.auth.session_ttl_secs, 30 * 86400);
        assert!(
            s.mail.smtp_url.expose_secret().is_empty(),
            "no mail server built in"
        );
        assert!(
            s.sealing.keys.is_empty(),
            "no built-in production sealing key"
        );
        assert!(s.mail.lease_ms > s.mail.timeout_ms);
        assert!(!s.mfa.staff_required, "MFA for staff is opt-in");
        assert_eq!(s.mfa.max_attempts, 5);
        assert_eq!(s.mfa.challenge_ttl_secs, 300);
        assert_eq!(s.invites.ttl_secs, 7 * 86400);
        assert!(s.invites.check().is_ok());
        assert!(s.mfa.check().is_ok());
    }

    #[test]
    fn the_dev_key_is_a_usable_sealing_key() {
        let s = Settings::from_layers(&[DEV]).expect("dev parses");
        assert!(service_kit::sealed::Sealer::new(&s.sealing.keys).is_ok());
    }
}

service_kit::common_settings!(Settings);
