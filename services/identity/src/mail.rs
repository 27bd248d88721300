//! Outbound mail (sign-in links, invites): a mail queue in identity's schema,
//! written in the transaction that makes what the mail carries (request-link,
//! an invite's creation), and a worker that sends it over SMTP after the
//! commit, with retries.
//!
//! - The token is never stored in the clear: the row holds it sealed (kit
//!   sealer, AES-256-GCM, bound to the row id) until the SMTP server accepts
//!   the message, then `sealed` is cleared. It is never logged, audited or
//!   published on NATS.
//! - Sent once: a worker claims due rows with a lease (`lease_until`, longer
//!   than one whole SMTP conversation), sends, and marks the row `sent_at`
//!   once the server accepted the message. A claimed row is invisible to other
//!   workers until its lease runs out. Only a crash (or a lost database)
//!   between the server's acceptance and the `sent_at` update, or a server that
//!   accepted without our seeing its answer, sends a link twice, once the lease
//!   is over (the same Message-ID both times).
//! - Temporary failures (connection refused, 4xx, timeouts) are retried with
//!   backoff; permanent ones (5xx) and links already used or expired are
//!   dropped (`dropped_at`): the user asks for a new link. An invite accepted,
//!   revoked or expired before its mail went out is dropped likewise.

use crate::settings::MailSettings;
use anyhow::Context;
use futures::StreamExt;
use lettre::{
    message::{header::ContentType, Mailbox, MultiPart, SinglePart},
    transport::smtp::{
        authentication::Credentials,
        client::{Certificate, Tls, TlsParameters},
    },
    AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor,
};
use secrecy::ExposeSecret;
use service_kit::sealed::Sealer;
use sqlx::{PgConnection, PgPool};
use std::{net::IpAddr, sync::Arc, time::Duration};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub const KIND_MAGIC_LINK: &str = "magic_link";
/// An invitation to an organization (`invites`), with its accept link.
pub const KIND_INVITE: &str = "invite";
/// A notice that the account's MFA codes are locked out after too many wrong
/// ones: no link, no code, no secret; its sealed payload is only how long.
pub const KIND_MFA_LOCKOUT: &str = "mfa_lockout";
/// A notice to staff that someone was made staff or stopped being staff: who,
/// by whom (sealed: addresses are personal data); no link, no secret.
pub const KIND_STAFF_CHANGE: &str = "staff_change";
/// A notice that a passkey was added to the account (its name, sealed; no
/// link, no key material).
pub const KIND_PASSKEY_ADDED: &str = "passkey_added";
/// A notice that a passkey was removed from the account (its name, sealed).
pub const KIND_PASSKEY_REMOVED: &str = "passkey_removed";

/// Kinds that carry only a sealed notice (no link that could expire).
fn is_notice(kind: &str) -> bool {
    [
        KIND_MFA_LOCKOUT,
        KIND_STAFF_CHANGE,
        KIND_PASSKEY_ADDED,
        KIND_PASSKEY_REMOVED,
    ]
    .contains(&kind)
}

/// What a staff-change notice says.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct StaffChange {
    /// `granted` or `revoked`.
    pub change: String,
    /// The address of the user whose staff status changed.
    pub subject: String,
    /// The address of the staff member who changed it.
    pub by: String,
}

/// How the SMTP connection is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// `smtps://`: TLS from the first byte (port 465 by default).
    Wrapper,
    /// `smtp://...?tls=required`: STARTTLS, refused if the server lacks it (587).
    StartTls,
    /// `smtp://...?tls=none`: plain text, loopback hosts only (dev and tests).
    None,
}

/// An SMTP URL, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpTarget {
    pub mode: TlsMode,
    pub host: String,
    pub port: u16,
    pub user: Option<String>,
    pub password: Option<String>,
}

fn is_loopback(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost") || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Parse `mail.smtp_url`. Errors never contain the URL (it holds a password).
pub fn parse_smtp_url(raw: &str) -> anyhow::Result<SmtpTarget> {
    let url = url::Url::parse(raw).map_err(|_| anyhow::anyhow!("mail.smtp_url is not a URL"))?;
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| anyhow::anyhow!("mail.smtp_url has no host"))?
        .to_owned();
    let mut tls = None;
    for (k, v) in url.query_pairs() {
        match &*k {
            "tls" => tls = Some(v.into_owned()),
            other => anyhow::bail!("mail.smtp_url: unknown parameter {other:?}"),
        }
    }
    let (mode, default_port) = match (url.scheme(), tls.as_deref()) {
        ("smtps", None | Some("wrapper")) => (TlsMode::Wrapper, 465),
        ("smtp", Some("required")) => (TlsMode::StartTls, 587),
        ("smtp", Some("none")) => {
            anyhow::ensure!(
                is_loopback(&host),
                "mail.smtp_url: tls=none (plain text) is allowed to loopback hosts only"
            );
            (TlsMode::None, 25)
        }
        ("smtp", None | Some("opportunistic")) => anyhow::bail!(
            "mail.smtp_url: say tls=required (STARTTLS) or use smtps://; \
             opportunistic TLS can be stripped"
        ),
        (scheme, tls) => {
            anyhow::bail!("mail.smtp_url: unsupported scheme {scheme:?} with tls={tls:?}")
        }
    };
    let decode = |s: &str| {
        percent_decode(s).ok_or_else(|| anyhow::anyhow!("mail.smtp_url: bad percent-encoding"))
    };
    let user = (!url.username().is_empty())
        .then(|| decode(url.username()))
        .transpose()?;
    let password = url.password().map(decode).transpose()?;
    Ok(SmtpTarget {
        mode,
        host,
        port: url.port().unwrap_or(default_port),
        user,
        password,
    })
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The sign-in link: `base` with `token=<token>` added to its query.
pub fn link(base: &str, token: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}token={token}")
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Everything the worker needs; `None` in [`Mailer::from_settings`] when no
/// SMTP server is configured.
#[derive(Clone)]
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    link_base_url: String,
    invite_base_url: String,
    sealer: Sealer,
    settings: MailSettings,
    link_ttl_minutes: i64,
    invite_ttl_days: i64,
    notify: Arc<Notify>,
}

impl Mailer {
    pub fn from_settings(
        s: &MailSettings,
        sealing: &service_kit::settings::SealingSettings,
        link_ttl_secs: i64,
        invites: &crate::settings::InviteSettings,
    ) -> anyhow::Result<Option<Mailer>> {
        let raw = s.smtp_url.expose_secret();
        if raw.trim().is_empty() {
            return Ok(None);
        }
        let target = parse_smtp_url(raw.trim())?;
        let sealer = Sealer::new(&sealing.keys)
            .context("mail.smtp_url is set: identity needs sealing.keys for the mail queue")?;
        let from: Mailbox = s
            .from
            .parse()
            .map_err(|_| anyhow::anyhow!("mail.from is not a mailbox"))?;
        let base = url::Url::parse(&s.link_base_url)
            .map_err(|_| anyhow::anyhow!("mail.link_base_url is not a URL"))?;
        anyhow::ensure!(
            matches!(base.scheme(), "https" | "http"),
            "mail.link_base_url must be an http(s) URL"
        );
        anyhow::ensure!(
            s.lease_ms > s.timeout_ms,
            "mail.lease_ms must exceed mail.timeout_ms"
        );
        let mut b = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(target.host.clone())
            .port(target.port)
            .timeout(Some(Duration::from_millis(s.timeout_ms)));
        if target.mode != TlsMode::None {
            let mut params = TlsParameters::builder(target.host.clone());
            if !s.ca_file.is_empty() {
                let pem = std::fs::read(&s.ca_file)
                    .with_context(|| format!("reading mail.ca_file {}", s.ca_file))?;
                params = params.add_root_certificate(
                    Certificate::from_pem(&pem).context("mail.ca_file is not a PEM certificate")?,
                );
            }
            let params = params.build().context("SMTP TLS parameters")?;
            b = b.tls(match target.mode {
                TlsMode::Wrapper => Tls::Wrapper(params),
                _ => Tls::Required(params),
            });
        }
        if let Some(user) = target.user {
            b = b.credentials(Credentials::new(user, target.password.unwrap_or_default()));
        }
        Ok(Some(Mailer {
            transport: b.build(),
            from,
            link_base_url: s.link_base_url.clone(),
            invite_base_url: invites.accept_base_url.clone(),
            sealer,
            settings: s.clone(),
            link_ttl_minutes: (link_ttl_secs / 60).max(1),
            invite_ttl_days: (invites.ttl_secs / 86400).max(1),
            notify: Arc::new(Notify::new()),
        }))
    }

    /// Queue the sign-in mail for `token` inside the caller's transaction.
    pub async fn enqueue_magic_link(
        &self,
        conn: &mut PgConnection,
        recipient: &str,
        token: &str,
    ) -> anyhow::Result<()> {
        self.enqueue(conn, KIND_MAGIC_LINK, recipient, token).await
    }

    /// Queue the invite mail for `token` inside the caller's transaction.
    pub async fn enqueue_invite(
        &self,
        conn: &mut PgConnection,
        recipient: &str,
        token: &str,
    ) -> anyhow::Result<()> {
        self.enqueue(conn, KIND_INVITE, recipient, token).await
    }

    /// Queue the notice that `recipient`'s codes are locked out for
    /// `lockout_secs` (in the transaction that records the lockout).
    pub async fn enqueue_mfa_lockout(
        &self,
        conn: &mut PgConnection,
        recipient: &str,
        lockout_secs: i64,
    ) -> anyhow::Result<()> {
        self.enqueue_notice(conn, KIND_MFA_LOCKOUT, recipient, &lockout_secs.to_string())
            .await
    }

    /// Queue the notice that a passkey named `name` was added to
    /// `recipient`'s account (in the transaction that adds it).
    pub async fn enqueue_passkey_added(
        &self,
        conn: &mut PgConnection,
        recipient: &str,
        name: &str,
    ) -> anyhow::Result<()> {
        self.enqueue_notice(conn, KIND_PASSKEY_ADDED, recipient, name)
            .await
    }

    /// Queue the notice that a passkey named `name` was removed from
    /// `recipient`'s account (in the transaction that removes it).
    pub async fn enqueue_passkey_removed(
        &self,
        conn: &mut PgConnection,
        recipient: &str,
        name: &str,
    ) -> anyhow::Result<()> {
        self.enqueue_notice(conn, KIND_PASSKEY_REMOVED, recipient, name)
            .await
    }

    /// Queue the notice of `change` to each of `recipients` (in the
    /// transaction that makes the change).
    pub async fn enqueue_staff_change(
        &self,
        conn: &mut PgConnection,
        recipients: &[String],
        change: &StaffChange,
    ) -> anyhow::Result<()> {
        let payload = serde_json::to_string(change)?;
        for r in recipients {
            self.enqueue_notice(&mut *conn, KIND_STAFF_CHANGE, r, &payload)
                .await?;
        }
        Ok(())
    }

    async fn enqueue_notice(
        &self,
        conn: &mut PgConnection,
        kind: &str,
        recipient: &str,
        payload: &str,
    ) -> anyhow::Result<()> {
        let id = Uuid::now_v7();
        let sealed = self.sealer.seal(payload.as_bytes(), id.as_bytes())?;
        sqlx::query!(
            "INSERT INTO mail_queue (id, kind, recipient, sealed) VALUES ($1, $2, $3, $4)",
            id,
            kind,
            recipient,
            sealed,
        )
        .execute(conn)
        .await
        .context("writing the mail queue row")?;
        Ok(())
    }

    async fn enqueue(
        &self,
        conn: &mut PgConnection,
        kind: &str,
        recipient: &str,
        token: &str,
    ) -> anyhow::Result<()> {
        let id = Uuid::now_v7();
        let sealed = self.sealer.seal(token.as_bytes(), id.as_bytes())?;
        sqlx::query!(
            "INSERT INTO mail_queue (id, kind, recipient, token_hash, sealed) \
             VALUES ($1, $2, $3, $4, $5)",
            id,
            kind,
            recipient,
            crate::tokens::hash(token),
            sealed,
        )
        .execute(conn)
        .await
        .context("writing the mail queue row")?;
        Ok(())
    }

    /// Wake the worker (after the commit).
    pub fn kick(&self) {
        self.notify.notify_one();
    }

    fn message(
        &self,
        id: Uuid,
        kind: &str,
        recipient: &str,
        token: &str,
    ) -> anyhow::Result<Message> {
        let to: Mailbox = recipient
            .parse()
            .map_err(|_| anyhow::anyhow!("the recipient is not a mailbox"))?;
        let (subject, text, html) = if kind == KIND_MFA_LOCKOUT {
            // `token` is the lockout's length in seconds here.
            let minutes = (token.parse::<i64>().unwrap_or(0).max(1) + 59) / 60;
            let minutes = match minutes {
                1 => "1 minute".to_owned(),
                n => format!("{n} minutes"),
            };
            let text = format!(
                "Too many wrong two-factor codes were entered for your Hub account, so \
                 code entry is locked for {minutes}. If this was not you, someone \
                 may have a sign-in link of yours: sign out your other sessions once you \
                 are back in. Further wrong codes lock it for longer.\n"
            );
            let html = format!(
                "<!doctype html><html><body><p>Too many wrong two-factor codes were \
                 entered for your Hub account, so code entry is locked for {minutes}.</p><p>If this was not you, someone may have a sign-in link of \
                 yours: sign out your other sessions once you are back in. Further wrong \
                 codes lock it for longer.</p></body></html>"
            );
            ("Two-factor codes locked", text, html)
        } else if kind == KIND_STAFF_CHANGE {
            // `token` is the sealed StaffChange here.
            let c: StaffChange = serde_json::from_str(token).context("the staff change notice")?;
            let what = if c.change == "granted" {
                format!("{} made {} staff on Hub.", c.by, c.subject)
            } else {
                format!("{} took staff away from {} on Hub.", c.by, c.subject)
            };
            let text = format!(
                "{what}\n\nEvery staff member gets this notice. If the change is not \
                 expected, take it back (DELETE /v1/admin/staff/{{user_id}}) and ask who \
                 made it.\n"
            );
            let html = format!(
                "<!doctype html><html><body><p>{}</p><p>Every staff member gets this \
                 notice. If the change is not expected, take it back and ask who made \
                 it.</p></body></html>",
                html_escape(&what)
            );
            ("Hub staff changed", text, html)
        } else if kind == KIND_PASSKEY_ADDED {
            // `token` is the passkey's name here.
            let text = format!(
                "A passkey named \"{token}\" was added to your Hub account: it can now sign \
                 in to it without a mailed link. If this was not you, sign in, remove it \
                 on the security page and sign out your other sessions.\n"
            );
            let html = format!(
                "<!doctype html><html><body><p>A passkey named \"{}\" was added to your Hub \
                 account: it can now sign in to it without a mailed link.</p><p>If this was \
                 not you, sign in, remove it on the security page and sign out your other \
                 sessions.</p></body></html>",
                html_escape(token)
            );
            ("A passkey was added to your Hub account", text, html)
        } else if kind == KIND_PASSKEY_REMOVED {
            // `token` is the passkey's name here.
            let text = format!(
                "The passkey named \"{token}\" was removed from your Hub account: it no \
                 longer signs in, and the sessions it opened were ended. If this was not \
                 you, sign in and sign out your other sessions.\n"
            );
            let html = format!(
                "<!doctype html><html><body><p>The passkey named \"{}\" was removed from \
                 your Hub account: it no longer signs in, and the sessions it opened were \
                 ended.</p><p>If this was not you, sign in and sign out your other \
                 sessions.</p></body></html>",
                html_escape(token)
            );
            ("A passkey was removed from your Hub account", text, html)
        } else if kind == KIND_INVITE {
            let link = link(&self.invite_base_url, token);
            let days = self.invite_ttl_days;
            let text = format!(
                "You are invited to join an organization on Hub. Accept the invitation \
                 (signed in with this address) here:\n\n{link}\n\nIt expires in {days} days. \
                 If you did not expect it, ignore this mail.\n"
            );
            let html = format!(
                "<!doctype html><html><body><p>You are invited to join an organization on \
                 Hub. Accept the invitation (signed in with this address) here:</p>\
                 <p><a href=\"{l}\">Accept the invitation</a></p><p>{l}</p>\
                 <p>It expires in {days} days. If you did not expect it, ignore this \
                 mail.</p></body></html>",
                l = html_escape(&link)
            );
            ("You are invited to an organization", text, html)
        } else {
            let link = link(&self.link_base_url, token);
            let minutes = self.link_ttl_minutes;
            let text = format!(
                "Sign in with this link:\n\n{link}\n\nIt works once, for {minutes} minutes. \
                 If you did not ask for it, ignore this mail.\n"
            );
            let html = format!(
                "<!doctype html><html><body><p>Sign in with this link:</p>\
                 <p><a href=\"{l}\">Sign in</a></p><p>{l}</p>\
                 <p>It works once, for {minutes} minutes. If you did not ask for it, \
                 ignore this mail.</p></body></html>",
                l = html_escape(&link)
            );
            ("Your sign-in link", text, html)
        };
        let domain = self.from.email.domain().to_owned();
        Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            .message_id(Some(format!("<{id}@{domain}>")))
            .multipart(
                MultiPart::alternative()
                    .singlepart(
                        SinglePart::builder()
                            .header(ContentType::TEXT_PLAIN)
                            .body(text),
                    )
                    .singlepart(
                        SinglePart::builder()
                            .header(ContentType::TEXT_HTML)
                            .body(html),
                    ),
            )
            .context("building the message")
    }
}

struct Claimed {
    id: Uuid,
    kind: String,
    recipient: String,
    token_hash: Option<Vec<u8>>,
    sealed: Option<Vec<u8>>,
    attempts: i32,
}

enum Outcome {
    Sent,
    Retry(String),
    Drop(String),
}

/// Backoff after `attempts` failed tries: base doubling, capped.
pub fn backoff_ms(attempts: i32, base: u64, max: u64) -> u64 {
    let shift = attempts.saturating_sub(1).clamp(0, 30) as u32;
    base.saturating_mul(1u64 << shift).min(max)
}

/// One pass: claim due mail and send it; returns how many were sent.
pub async fn run_once(mailer: &Mailer, pool: &PgPool) -> anyhow::Result<u64> {
    let s = &mailer.settings;
    let claimed: Vec<Claimed> = sqlx::query_as!(
        Claimed,
        "UPDATE mail_queue SET lease_until = now() + make_interval(secs => $1), \
                attempts = attempts + 1 \
         WHERE id IN (SELECT id FROM mail_queue \
                      WHERE sent_at IS NULL AND dropped_at IS NULL AND next_attempt_at <= now() \
                        AND (lease_until IS NULL OR lease_until < now()) \
                      ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED) \
         RETURNING id, kind, recipient, token_hash, sealed, attempts",
        s.lease_ms as f64 / 1000.0,
        s.concurrency.max(1) as i64,
    )
    .fetch_all(pool)
    .await?;
    let n = claimed.len();
    let results: Vec<anyhow::Result<bool>> = futures::stream::iter(claimed)
        .map(|row| async move {
            let id = row.id;
            let attempts = row.attempts;
            let outcome = attempt(mailer, pool, row).await;
            settle(mailer, pool, id, attempts, outcome).await
        })
        .buffer_unordered(s.concurrency.max(1))
        .collect()
        .await;
    let mut sent = 0;
    for r in results {
        match r {
            Ok(true) => sent += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!(error = ?e, "mail queue update failed; the lease will expire"),
        }
    }
    if n > 0 {
        tracing::debug!(claimed = n, sent, "mail pass");
    }
    Ok(sent)
}

async fn attempt(mailer: &Mailer, pool: &PgPool, row: Claimed) -> Outcome {
    if is_notice(&row.kind) {
        // A notice: nothing that expires, only its sealed payload.
        let Some(sealed) = row.sealed else {
            return Outcome::Drop("nothing to send".into());
        };
        return match mailer.sealer.open(&sealed, row.id.as_bytes()) {
            Ok(payload) => send(mailer, &row.id, &row.kind, &row.recipient, &payload).await,
            Err(e) => Outcome::Drop(format!("sealed payload: {e}")),
        };
    }
    let (Some(hash), Some(sealed)) = (row.token_hash, row.sealed) else {
        return Outcome::Drop("nothing to send".into());
    };
    // A link used or expired meanwhile (an invite settled or expired) is not
    // worth mailing.
    let live = if row.kind == KIND_INVITE {
        crate::invites::mailable(pool, &hash).await
    } else {
        sqlx::query_scalar!(
            r#"SELECT used_at IS NULL AND expires_at > now() AS "live!" FROM magic_links WHERE token_hash = $1"#,
            &hash,
        )
        .fetch_optional(pool)
        .await
        .map(|live| live.unwrap_or(false))
    };
    match live {
        Ok(true) => {}
        Ok(false) => {
            return Outcome::Drop("the link was used or expired before it was sent".into())
        }
        Err(e) => return Outcome::Retry(format!("database: {e}")),
    }
    let token = match mailer.sealer.open(&sealed, row.id.as_bytes()) {
        Ok(t) => t,
        Err(e) => return Outcome::Drop(format!("sealed token: {e}")),
    };
    send(mailer, &row.id, &row.kind, &row.recipient, &token).await
}

/// Build the message of `kind` around `payload` (sealed in the row) and send it.
async fn send(mailer: &Mailer, id: &Uuid, kind: &str, recipient: &str, payload: &[u8]) -> Outcome {
    let Ok(token) = std::str::from_utf8(payload) else {
        return Outcome::Drop("sealed token: not text".into());
    };
    let msg = match mailer.message(*id, kind, recipient, token) {
        Ok(m) => m,
        Err(e) => return Outcome::Drop(format!("{e:#}")),
    };
    let limit = Duration::from_millis(mailer.settings.timeout_ms);
    match tokio::time::timeout(limit, mailer.transport.send(msg)).await {
        Ok(Ok(_)) => Outcome::Sent,
        Ok(Err(e)) if e.is_permanent() => Outcome::Drop(format!("smtp: {e}")),
        Ok(Err(e)) => Outcome::Retry(format!("smtp: {e}")),
        Err(_) => Outcome::Retry("smtp: timed out".into()),
    }
}

/// Record the outcome; Ok(true) when sent.
async fn settle(
    mailer: &Mailer,
    pool: &PgPool,
    id: Uuid,
    attempts: i32,
    outcome: Outcome,
) -> anyhow::Result<bool> {
    let s = &mailer.settings;
    let (how, err, delay_ms, sent) = match outcome {
        Outcome::Sent => (Settle::Sent, None, 0, true),
        Outcome::Retry(e) => {
            tracing::warn!(mail_id = %id, attempts, error = %e, "mail not sent; will retry");
            (
                Settle::Retry,
                Some(e),
                backoff_ms(attempts, s.retry_base_ms, s.retry_max_ms),
                false,
            )
        }
        Outcome::Drop(e) => {
            tracing::warn!(mail_id = %id, attempts, error = %e, "mail dropped");
            (Settle::Drop, Some(e), 0, false)
        }
    };
    // The server has the message: try hard to record it, so that it is not
    // sent again when the lease runs out.
    let mut tries = 0;
    loop {
        let r = record(pool, how, id, err.as_deref(), delay_ms as f64 / 1000.0).await;
        match r {
            Ok(_) => return Ok(sent),
            Err(e) if tries < 5 => {
                tries += 1;
                tracing::warn!(mail_id = %id, error = %e, "recording the mail outcome failed; retrying");
                tokio::time::sleep(Duration::from_millis(200 * tries)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// How a mail attempt ended, as recorded.
#[derive(Clone, Copy)]
enum Settle {
    /// Sent: the sealed body is dropped.
    Sent,
    /// Not sent: due again after the delay.
    Retry,
    /// Given up: the sealed body is dropped.
    Drop,
}

/// Record an attempt's outcome on mail `id` (not if it was recorded sent).
async fn record(
    pool: &PgPool,
    how: Settle,
    id: Uuid,
    err: Option<&str>,
    delay_secs: f64,
) -> sqlx::Result<()> {
    match how {
        Settle::Sent => {
            sqlx::query!(
                "UPDATE mail_queue SET sent_at = now(), sealed = NULL, lease_until = NULL, \
                    last_error = $2 WHERE id = $1 AND sent_at IS NULL",
                id,
                err,
            )
            .execute(pool)
            .await
        }
        Settle::Retry => {
            sqlx::query!(
                "UPDATE mail_queue SET lease_until = NULL, last_error = $2, \
                    next_attempt_at = now() + make_interval(secs => $3) \
             WHERE id = $1 AND sent_at IS NULL",
                id,
                err,
                delay_secs,
            )
            .execute(pool)
            .await
        }
        Settle::Drop => {
            sqlx::query!(
                "UPDATE mail_queue SET dropped_at = now(), sealed = NULL, lease_until = NULL, \
                    last_error = $2 WHERE id = $1 AND sent_at IS NULL",
                id,
                err,
            )
            .execute(pool)
            .await
        }
    }
    .map(|_| ())
}

/// Delete sent and dropped mail older than `keep_secs` (the sweep).
pub async fn sweep(pool: &PgPool, keep_secs: i64) -> anyhow::Result<u64> {
    Ok(sqlx::query!(
        "DELETE FROM mail_queue WHERE (sent_at IS NOT NULL OR dropped_at IS NOT NULL) \
         AND created_at < now() - make_interval(secs => $1)",
        keep_secs as f64,
    )
    .execute(pool)
    .await?
    .rows_affected())
}

/// Send queued mail until `cancel` fires: when kicked, and every `poll_ms`.
pub fn spawn(
    mailer: Mailer,
    pool: PgPool,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let poll = Duration::from_millis(mailer.settings.poll_ms.max(10));
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = mailer.notify.notified() => {},
                _ = tokio::time::sleep(poll) => {},
            }
            // Drain: a full batch means more may be due.
            loop {
                match run_once(&mailer, &pool).await {
                    Ok(n) if n as usize >= mailer.settings.concurrency.max(1) => continue,
                    Ok(_) => break,
                    Err(e) => {
                        tracing::warn!(error = ?e, "mail pass failed");
                        break;
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smtp_urls_name_their_protection() {
        let t = parse_smtp_url("smtp://user:p%40ss@smtp.example.com:587?tls=required")
            .expect("starttls");
        assert_eq!(t.mode, TlsMode::StartTls);
        assert_eq!(t.host, "smtp.example.com");
        assert_eq!(t.port, 587);
        assert_eq!(t.user.as_deref(), Some("user"));
        assert_eq!(t.password.as_deref(), Some("p@ss"));

        let t = parse_smtp_url("smtp://smtp.example.com?tls=required").expect("default port");
        assert_eq!((t.mode, t.port, t.user), (TlsMode::StartTls, 587, None));

        let t = parse_smtp_url("smtps://u:p@smtp.example.com").expect("smtps");
        assert_eq!((t.mode, t.port), (TlsMode::Wrapper, 465));

        let t = parse_smtp_url("smtp://127.0.0.1:2525?tls=none").expect("loopback");
        assert_eq!((t.mode, t.port), (TlsMode::None, 2525));
        assert!(parse_smtp_url("smtp://localhost:25?tls=none").is_ok());
        assert!(parse_smtp_url("smtp://[::1]:25?tls=none").is_ok());
    }

    #[test]
    fn downgradable_or_unknown_smtp_urls_are_refused_without_leaking_them() {
        for bad in [
            "smtp://u:secretpw@smtp.example.com:587",
            "smtp://u:secretpw@smtp.example.com:587?tls=opportunistic",
            "smtp://u:secretpw@smtp.example.com:25?tls=none",
            "smtp://u:secretpw@10.0.0.5:25?tls=none",
            "smtp://u:secretpw@smtp.example.com:587?tls=required&x=1",
            "http://u:secretpw@smtp.example.com",
            "not a url secretpw",
        ] {
            let e = parse_smtp_url(bad).expect_err(bad).to_string();
            assert!(!e.contains("secretpw"), "{bad}: {e}");
        }
    }

    #[test]
    fn links_carry_the_token_in_the_query() {
        assert_eq!(
            link("https://app.example.com/sign-in", "mlt_x"),
            "https://app.example.com/sign-in?token=mlt_x"
        );
        assert_eq!(
            link("https://app.example.com/in?lang=tr", "mlt_x"),
            "https://app.example.com/in?lang=tr&token=mlt_x"
        );
    }

    fn settings(extra: &str) -> crate::Settings {
        use service_kit::settings::Layered;
        crate::Settings::from_layers(&[extra]).expect("settings")
    }

    const KEY: &str = "[sealing]\nkeys = [\"k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\"]\n";

    #[test]
    fn a_configured_server_needs_a_sealing_key_and_sound_settings() {
        let build = |extra: &str| {
            let s = settings(extra);
            Mailer::from_settings(&s.mail, &s.sealing, 900, &s.invites).map(|m| m.is_some())
        };
        assert!(!build("").expect("no server: no mailer"));
        let tls = "[mail]\nsmtp_url = \"smtps://u:p@smtp.example.com\"\n";
        assert!(build(&format!("{tls}{KEY}")).expect("smtps with a key"));
        let starttls = "[mail]\nsmtp_url = \"smtp://smtp.example.com:587?tls=required\"\n";
        assert!(build(&format!("{starttls}{KEY}")).expect("starttls with a key"));
        assert!(build(tls).is_err(), "no sealing key");
        assert!(build(&format!("{tls}from = \"nobody\"\n{KEY}")).is_err());
        assert!(build(&format!("{tls}link_base_url = \"ftp://x/\"\n{KEY}")).is_err());
        assert!(build(&format!("{tls}ca_file = \"/nonexistent/ca.pem\"\n{KEY}")).is_err());
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        assert_eq!(backoff_ms(1, 100, 1000), 100);
        assert_eq!(backoff_ms(2, 100, 1000), 200);
        assert_eq!(backoff_ms(4, 100, 1000), 800);
        assert_eq!(backoff_ms(5, 100, 1000), 1000);
        assert_eq!(backoff_ms(500, 100, 1000), 1000);
    }
}
