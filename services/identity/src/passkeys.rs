//! Passkeys (WebAuthn discoverable credentials): the relying party built
//! from settings, and their storage (`passkeys`, `passkey_challenges`),
//! checked at compile time. The ceremonies themselves (challenges,
//! signatures, counters, origins) are webauthn-rs's; this module keeps what
//! it hands back. Rules: proto-docs/accounts.md, "Passkeys".

use hub_domain::UserId;
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;
use uuid::Uuid;
use webauthn_rs::prelude::{Passkey, Url, Webauthn, WebauthnBuilder};

/// `[passkeys]`: the relying party (see `defaults.toml`).
#[derive(Debug, Clone, Deserialize)]
pub struct PasskeySettings {
    /// The domain passkeys are bound to.
    pub rp_id: String,
    /// The name authenticators show beside the account.
    pub rp_name: String,
    /// Every origin (scheme://host[:port]) whose pages run the ceremonies.
    pub origins: Vec<String>,
    /// How long a ceremony's challenge lives.
    pub challenge_ttl_secs: i64,
    /// Adding a passkey needs a session at most this old (or a code).
    pub recent_sign_in_secs: i64,
    /// Passkeys one account holds at most.
    pub max_per_user: i64,
}

/// The relying party: webauthn-rs configured from [`PasskeySettings`].
pub struct RelyingParty {
    pub webauthn: Webauthn,
    pub challenge_ttl_secs: i64,
    pub recent_sign_in_secs: i64,
    pub max_per_user: i64,
}

impl RelyingParty {
    /// Refuses (at start) an rp_id that is not the domain or a parent domain
    /// of every origin, an origin that is not a URL, and no origin at all.
    pub fn new(s: &PasskeySettings) -> anyhow::Result<Self> {
        anyhow::ensure!(
            !s.origins.is_empty(),
            "passkeys.origins: at least one origin (the console's)"
        );
        anyhow::ensure!(
            s.challenge_ttl_secs > 0 && s.recent_sign_in_secs > 0 && s.max_per_user > 0,
            "passkeys.challenge_ttl_secs, recent_sign_in_secs and max_per_user must be positive"
        );
        let origins = s
            .origins
            .iter()
            .map(|o| Url::parse(o).map_err(|e| anyhow::anyhow!("passkeys.origins: {o:?}: {e}")))
            .collect::<anyhow::Result<Vec<Url>>>()?;
        for o in &origins {
            let host = o.domain().unwrap_or_default();
            anyhow::ensure!(
                host == s.rp_id || host.ends_with(&format!(".{}", s.rp_id)),
                "passkeys.origins: {o} is not on passkeys.rp_id {:?} or a subdomain of it \
                 (browsers refuse IP addresses as the relying party)",
                s.rp_id
            );
        }
        let mut b = WebauthnBuilder::new(&s.rp_id, &origins[0])
            .map_err(|e| anyhow::anyhow!("passkeys: {e}"))?
            .rp_name(&s.rp_name)
            .timeout(std::time::Duration::from_secs(s.challenge_ttl_secs as u64));
        for o in &origins[1..] {
            b = b.append_allowed_origin(o);
        }
        Ok(RelyingParty {
            webauthn: b.build().map_err(|e| anyhow::anyhow!("passkeys: {e}"))?,
            challenge_ttl_secs: s.challenge_ttl_secs,
            recent_sign_in_secs: s.recent_sign_in_secs,
            max_per_user: s.max_per_user,
        })
    }
}

/// What kind of key signed, as RFC 8176 names it: `hwk` for a passkey that
/// cannot leave its device (not backup eligible), `swk` for one that may be
/// synced to other devices (its private key exists outside one piece of
/// hardware).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    DeviceBound,
    Synced,
}

impl KeyKind {
    pub fn of(p: &Passkey) -> KeyKind {
        if flags(p).0 {
            KeyKind::Synced
        } else {
            KeyKind::DeviceBound
        }
    }

    pub fn amr(self) -> &'static str {
        match self {
            KeyKind::DeviceBound => "hwk",
            KeyKind::Synced => "swk",
        }
    }
}

/// Whether `p` is backup eligible and backed up: the flags webauthn-rs keeps
/// in the credential it serializes (its storage form, stable by design; it
/// has no getter for them). Unreadable: eligible (the weaker claim, `swk`).
fn flags(p: &Passkey) -> (bool, bool) {
    let v = serde_json::to_value(p).unwrap_or_default();
    (
        v["cred"]["backup_eligible"].as_bool().unwrap_or(true),
        v["cred"]["backup_state"].as_bool().unwrap_or(false),
    )
}

/// A passkey as its owner sees it (no key material).
#[derive(Serialize)]
pub struct View {
    pub id: Uuid,
    pub name: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_used_at: Option<OffsetDateTime>,
    pub backup_eligible: bool,
    pub backed_up: bool,
}

/// `user_id`'s passkeys, newest first.
pub async fn list(conn: &mut PgConnection, user_id: UserId) -> sqlx::Result<Vec<View>> {
    sqlx::query_as!(
        View,
        "SELECT id, name, created_at, last_used_at, backup_eligible, backed_up \
         FROM passkeys WHERE user_id = $1 ORDER BY created_at DESC, id",
        user_id as UserId,
    )
    .fetch_all(conn)
    .await
}

/// `user_id`'s passkeys as webauthn-rs reads them (excluded from a new
/// registration, allowed at the second factor).
pub async fn credentials(conn: &mut PgConnection, user_id: UserId) -> sqlx::Result<Vec<Passkey>> {
    let rows = sqlx::query_scalar!(
        "SELECT credential FROM passkeys WHERE user_id = $1 ORDER BY created_at",
        user_id as UserId,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect())
}

/// How many passkeys `user_id` holds.
pub async fn count(conn: &mut PgConnection, user_id: UserId) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM passkeys WHERE user_id = $1"#,
        user_id as UserId,
    )
    .fetch_one(conn)
    .await
}

/// Store a new passkey; `None` when its credential id is registered already
/// (to this account or another).
pub async fn insert(
    conn: &mut PgConnection,
    user_id: UserId,
    name: &str,
    p: &Passkey,
) -> anyhow::Result<Option<View>> {
    let (backup_eligible, backed_up) = flags(p);
    let row = sqlx::query_as!(
        View,
        "INSERT INTO passkeys (id, user_id, credential_id, name, credential, backup_eligible, \
                               backed_up) VALUES ($1, $2, $3, $4, $5, $6, $7) \
         ON CONFLICT (credential_id) DO NOTHING \
         RETURNING id, name, created_at, last_used_at, backup_eligible, backed_up",
        Uuid::now_v7(),
        user_id as UserId,
        p.cred_id().as_slice(),
        name,
        serde_json::to_value(p)?,
        backup_eligible,
        backed_up,
    )
    .fetch_optional(conn)
    .await?;
    Ok(row)
}

/// Rename passkey `id` of `user_id`; `None` if it is not theirs.
pub async fn rename(
    conn: &mut PgConnection,
    user_id: UserId,
    id: Uuid,
    name: &str,
) -> sqlx::Result<Option<View>> {
    sqlx::query_as!(
        View,
        "UPDATE passkeys SET name = $3 WHERE id = $1 AND user_id = $2 \
         RETURNING id, name, created_at, last_used_at, backup_eligible, backed_up",
        id,
        user_id as UserId,
        name,
    )
    .fetch_optional(conn)
    .await
}

/// Delete passkey `id` of `user_id`; its name if it was theirs.
pub async fn delete(
    conn: &mut PgConnection,
    user_id: UserId,
    id: Uuid,
) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar!(
        "DELETE FROM passkeys WHERE id = $1 AND user_id = $2 RETURNING name",
        id,
        user_id as UserId,
    )
    .fetch_optional(conn)
    .await
}

/// A stored passkey found by its credential id.
pub struct Stored {
    pub id: Uuid,
    pub user_id: UserId,
    pub passkey: Passkey,
}

/// The passkey of credential id `cred_id`, its row locked until the
/// transaction ends (two sign-ins with one key update its counter in turn).
pub async fn lock_by_credential(
    conn: &mut PgConnection,
    cred_id: &[u8],
) -> anyhow::Result<Option<Stored>> {
    let row = sqlx::query!(
        r#"SELECT id, user_id AS "user_id: UserId", credential FROM passkeys
           WHERE credential_id = $1 FOR UPDATE"#,
        cred_id,
    )
    .fetch_optional(conn)
    .await?;
    match row {
        None => Ok(None),
        Some(r) => Ok(Some(Stored {
            id: r.id,
            user_id: r.user_id,
            passkey: serde_json::from_value(r.credential)?,
        })),
    }
}

/// Record a use of passkey `id`: its credential as updated by the sign-in
/// (counter, backup state) and the time.
pub async fn used(conn: &mut PgConnection, id: Uuid, p: &Passkey) -> anyhow::Result<()> {
    let (backup_eligible, backed_up) = flags(p);
    sqlx::query!(
        "UPDATE passkeys SET credential = $2, backup_eligible = $3, backed_up = $4, \
                             last_used_at = now() WHERE id = $1",
        id,
        serde_json::to_value(p)?,
        backup_eligible,
        backed_up,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Whether `user_id` holds a staff grant (staff who must have MFA keep a
/// factor: see the delete route).
pub async fn staff_granted(conn: &mut PgConnection, user_id: UserId) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM staff_grants WHERE user_id = $1) AS "granted!""#,
        user_id as UserId,
    )
    .fetch_one(conn)
    .await
}

/// Session `session_id` as adding a factor reads it: whether it was opened
/// at most `secs` ago, and whether through MFA.
pub struct Opened {
    pub recent: bool,
    pub mfa: bool,
}

pub async fn session_opened(
    conn: &mut PgConnection,
    session_id: Uuid,
    secs: i64,
) -> sqlx::Result<Opened> {
    let row = sqlx::query!(
        r#"SELECT created_at > now() - make_interval(secs => $2) AS "recent!", mfa
           FROM sessions WHERE id = $1"#,
        session_id,
        secs as f64,
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map_or(
        Opened {
            recent: false,
            mfa: false,
        },
        |r| Opened {
            recent: r.recent,
            mfa: r.mfa,
        },
    ))
}

/// Which ceremony a challenge belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Register,
    Login,
    Mfa,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Register => "register",
            Kind::Login => "login",
            Kind::Mfa => "mfa",
        }
    }
}

/// A ceremony halfway, as [`take`] returns it.
pub struct Challenge {
    pub user_id: Option<UserId>,
    pub mfa_token_hash: Option<Vec<u8>>,
    pub state: serde_json::Value,
}

/// Keep a ceremony's state for `ttl_secs`; its id.
pub async fn open(
    conn: &mut PgConnection,
    kind: Kind,
    user_id: Option<UserId>,
    mfa_token_hash: Option<&[u8]>,
    state: serde_json::Value,
    ttl_secs: i64,
) -> sqlx::Result<Uuid> {
    let id = Uuid::new_v4();
    sqlx::query!(
        "INSERT INTO passkey_challenges (id, kind, user_id, mfa_token_hash, state, expires_at) \
         VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6))",
        id,
        kind.as_str(),
        user_id.map(|u| u.as_uuid()),
        mfa_token_hash,
        state,
        ttl_secs as f64,
    )
    .execute(conn)
    .await?;
    Ok(id)
}

/// Take (delete) live challenge `id` of `kind`: a challenge answers once,
/// whatever the answer's fate. `None`: unknown, expired, used or another
/// kind's.
pub async fn take(
    conn: &mut PgConnection,
    id: Uuid,
    kind: Kind,
) -> sqlx::Result<Option<Challenge>> {
    let row = sqlx::query!(
        r#"DELETE FROM passkey_challenges WHERE id = $1 AND kind = $2
           RETURNING user_id AS "user_id: UserId", mfa_token_hash, state,
                     expires_at > now() AS "live!""#,
        id,
        kind.as_str(),
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.filter(|r| r.live).map(|r| Challenge {
        user_id: r.user_id,
        mfa_token_hash: r.mfa_token_hash,
        state: r.state,
    }))
}

/// Delete challenges dead for longer than `keep_secs` (the sweep).
pub async fn sweep(pool: &PgPool, keep_secs: i64) -> sqlx::Result<u64> {
    Ok(sqlx::query!(
        "DELETE FROM passkey_challenges WHERE expires_at < now() - make_interval(secs => $1)",
        keep_secs as f64,
    )
    .execute(pool)
    .await?
    .rows_affected())
}
