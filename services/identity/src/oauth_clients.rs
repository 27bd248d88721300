//! OAuth clients of the OpenID Provider (`oauth_clients`), registered by
//! staff through `/v1/admin/oauth-clients`: what a client may ask for, where
//! it may be sent back, and (confidential clients) the SHA-256 of its secret.
//! The redirect URIs are matched exactly, so they are checked here once:
//! https with a host, http only to the loopback host (native apps, RFC 8252
//! 7.3), or a private-use scheme with a dot (RFC 8252 7.1); never a fragment,
//! credentials or a wildcard.

use hub_domain::{OrgId, UserId};
use serde::Serialize;
use service_kit::{ApiError, ApiResult};
use sqlx::{PgConnection, PgPool};
use std::{collections::HashMap, sync::Arc};
use time::OffsetDateTime;
use uuid::Uuid;

/// The scopes a client may be allowed; `openid` is always among them.
pub const SCOPES: [&str; 5] = ["openid", "profile", "email", "orgs", "offline_access"];
/// Most redirect URIs (and post-logout URIs) per client.
pub const URIS_MAX: usize = 10;
/// Longest redirect URI, in bytes.
pub const URI_MAX: usize = 2000;
/// Most organizations a client may be limited to.
pub const ORGS_MAX: usize = 100;
/// Longest client name, in characters.
pub const NAME_MAX: usize = 100;
/// Most clients listed.
pub const LIST_MAX: i64 = 500;

/// A client as staff see it (never its secret).
#[derive(Serialize)]
pub struct Client {
    pub id: Uuid,
    pub name: String,
    /// `public` (no secret; PKCE only) or `confidential`.
    pub kind: String,
    pub first_party: bool,
    pub redirect_uris: Vec<String>,
    pub post_logout_redirect_uris: Vec<String>,
    pub scopes: Vec<String>,
    /// The organizations whose members may use it; empty: any.
    pub allowed_org_ids: Vec<OrgId>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub retired_at: Option<OffsetDateTime>,
}

/// A client's name: trimmed, 1 to [`NAME_MAX`] characters, no control characters.
pub fn name(raw: &str) -> ApiResult<String> {
    let n = raw.trim();
    if n.is_empty() || n.chars().count() > NAME_MAX || n.chars().any(char::is_control) {
        return Err(ApiError::BadRequest(format!(
            "name must be 1 to {NAME_MAX} characters, without control characters"
        )));
    }
    Ok(n.to_owned())
}

/// One redirect URI, checked (see the module's rules); the error names it.
pub fn redirect_uri(field: &str, raw: &str) -> ApiResult<String> {
    let bad = |why: &str| ApiError::BadRequest(format!("{field}: {raw:?} {why}"));
    if raw.len() > URI_MAX {
        return Err(ApiError::BadRequest(format!(
            "{field}: at most {URI_MAX} bytes each"
        )));
    }
    if raw.contains('*') || raw.chars().any(char::is_whitespace) {
        return Err(bad("has a wildcard or white space"));
    }
    let url = url::Url::parse(raw).map_err(|_| bad("is not an absolute URI"))?;
    if url.fragment().is_some() {
        return Err(bad("has a fragment"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("has credentials"));
    }
    match url.scheme() {
        "https" if url.host_str().is_some_and(|h| !h.is_empty()) => {}
        "http" => {
            let loopback = match url.host() {
                Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
                None => false,
            };
            if !loopback {
                return Err(bad("is http to a host that is not the loopback (https only)"));
            }
        }
        "https" => return Err(bad("has no host")),
        s if s.contains('.') => {}
        _ => {
            return Err(bad(
                "must be https, http to the loopback, or a private-use scheme with a dot (com.example.app:/cb)",
            ))
        }
    }
    Ok(raw.to_owned())
}

/// A list of redirect URIs: `min` to [`URIS_MAX`], each checked, no repeats.
pub fn redirect_uris(field: &str, raw: &[String], min: usize) -> ApiResult<Vec<String>> {
    if raw.len() < min || raw.len() > URIS_MAX {
        return Err(ApiError::BadRequest(format!(
            "{field}: {min} to {URIS_MAX} URIs"
        )));
    }
    let mut out: Vec<String> = Vec::with_capacity(raw.len());
    for r in raw {
        let u = redirect_uri(field, r)?;
        if out.contains(&u) {
            return Err(ApiError::BadRequest(format!("{field}: {u:?} twice")));
        }
        out.push(u);
    }
    Ok(out)
}

/// The scopes: known ones only, `openid` among them, each once (sorted).
pub fn scopes(raw: &[String]) -> ApiResult<Vec<String>> {
    let mut out: Vec<String> = Vec::with_capacity(raw.len());
    for s in raw {
        if !SCOPES.contains(&s.as_str()) {
            return Err(ApiError::BadRequest(format!(
                "scopes: {s:?} is not one of {}",
                SCOPES.join(", ")
            )));
        }
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    if !out.iter().any(|s| s == "openid") {
        return Err(ApiError::bad_request("scopes must include openid"));
    }
    out.sort();
    Ok(out)
}

/// The organizations a client is limited to: at most [`ORGS_MAX`], each once.
pub fn orgs(raw: &[OrgId]) -> ApiResult<Vec<OrgId>> {
    if raw.len() > ORGS_MAX {
        return Err(ApiError::BadRequest(format!(
            "allowed_org_ids: at most {ORGS_MAX}"
        )));
    }
    let mut out = raw.to_vec();
    out.sort();
    out.dedup();
    Ok(out)
}

/// A client to register, checked.
pub struct New {
    pub name: String,
    pub confidential: bool,
    pub first_party: bool,
    pub redirect_uris: Vec<String>,
    pub post_logout_redirect_uris: Vec<String>,
    pub scopes: Vec<String>,
    pub allowed_org_ids: Vec<OrgId>,
}

/// Register `c` (with `secret_hash` when confidential).
pub async fn insert(
    conn: &mut PgConnection,
    c: &New,
    secret_hash: Option<Vec<u8>>,
    by: UserId,
) -> sqlx::Result<Client> {
    sqlx::query_as!(
        Client,
        r#"INSERT INTO oauth_clients (id, name, kind, secret_hash, first_party, redirect_uris,
                                      post_logout_redirect_uris, scopes, allowed_org_ids, created_by)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
           RETURNING id, name, kind, first_party, redirect_uris, post_logout_redirect_uris, scopes,
                     allowed_org_ids AS "allowed_org_ids: Vec<OrgId>", created_at, updated_at,
                     retired_at"#,
        Uuid::now_v7(),
        c.name,
        if c.confidential { "confidential" } else { "public" },
        secret_hash,
        c.first_party,
        &c.redirect_uris,
        &c.post_logout_redirect_uris,
        &c.scopes,
        &c.allowed_org_ids as &[OrgId],
        by as UserId,
    )
    .fetch_one(conn)
    .await
}

/// Every client, newest first (at most [`LIST_MAX`]).
pub async fn list(pool: &PgPool) -> sqlx::Result<Vec<Client>> {
    sqlx::query_as!(
        Client,
        r#"SELECT id, name, kind, first_party, redirect_uris, post_logout_redirect_uris, scopes,
                  allowed_org_ids AS "allowed_org_ids: Vec<OrgId>", created_at, updated_at,
                  retired_at
             FROM oauth_clients ORDER BY created_at DESC, id DESC LIMIT $1"#,
        LIST_MAX,
    )
    .fetch_all(pool)
    .await
}

/// Client `id`, locked until the transaction ends.
pub async fn lock(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<Option<Client>> {
    sqlx::query_as!(
        Client,
        r#"SELECT id, name, kind, first_party, redirect_uris, post_logout_redirect_uris, scopes,
                  allowed_org_ids AS "allowed_org_ids: Vec<OrgId>", created_at, updated_at,
                  retired_at
             FROM oauth_clients WHERE id = $1 FOR UPDATE"#,
        id,
    )
    .fetch_optional(conn)
    .await
}

/// A live client as the token endpoint authenticates it.
pub struct Authenticating {
    pub id: Uuid,
    /// None: a public client.
    pub secret_hash: Option<Vec<u8>>,
    pub scopes: Vec<String>,
    pub redirect_uris: Vec<String>,
    pub post_logout_redirect_uris: Vec<String>,
    pub allowed_org_ids: Vec<Uuid>,
    pub first_party: bool,
    /// Every change of the client (a rotated secret, an update, its
    /// retirement) moves it: a copy with the stored `updated_at` is current.
    pub updated_at: OffsetDateTime,
}

/// Client `id` unless retired (None: unknown or retired).
pub async fn authenticating(pool: &PgPool, id: Uuid) -> sqlx::Result<Option<Authenticating>> {
    sqlx::query_as!(
        Authenticating,
        "SELECT id, secret_hash, scopes, redirect_uris, post_logout_redirect_uris, \
                allowed_org_ids, first_party, updated_at \
           FROM oauth_clients WHERE id = $1 AND retired_at IS NULL",
        id,
    )
    .fetch_optional(pool)
    .await
}

/// Clients as the refresh grant's hot path authenticates them: copies kept
/// for [`CACHED_SECS`], used only where the statement that acts checks the
/// copy is current (`updated_at`, not retired: [`crate::oauth::refresh_batch`]),
/// so a rotated secret, an update or a retirement is seen at once. A copy
/// that does not authenticate or is found stale is dropped and the client
/// looked up again. Only clients that exist are kept, at most
/// [`CACHED_CLIENTS`].
#[derive(Default)]
pub struct ClientCache(std::sync::Mutex<HashMap<Uuid, (std::time::Instant, Arc<Authenticating>)>>);

pub const CACHED_SECS: u64 = 60;
pub const CACHED_CLIENTS: usize = 10_000;

impl ClientCache {
    pub fn get(&self, id: Uuid) -> Option<Arc<Authenticating>> {
        let map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(&id)
            .filter(|(at, _)| at.elapsed().as_secs() < CACHED_SECS)
            .map(|(_, c)| c.clone())
    }

    pub fn put(&self, c: Arc<Authenticating>) {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= CACHED_CLIENTS {
            map.clear();
        }
        map.insert(c.id, (std::time::Instant::now(), c));
    }

    pub fn forget(&self, id: Uuid) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&id);
    }
}

/// Write `c`'s changeable fields back (and a new `secret_hash` when given).
pub async fn update(
    conn: &mut PgConnection,
    c: &Client,
    secret_hash: Option<Vec<u8>>,
) -> sqlx::Result<Client> {
    sqlx::query_as!(
        Client,
        r#"UPDATE oauth_clients
              SET name = $2, first_party = $3, redirect_uris = $4, post_logout_redirect_uris = $5,
                  scopes = $6, allowed_org_ids = $7, secret_hash = COALESCE($8, secret_hash),
                  updated_at = now()
            WHERE id = $1
           RETURNING id, name, kind, first_party, redirect_uris, post_logout_redirect_uris, scopes,
                     allowed_org_ids AS "allowed_org_ids: Vec<OrgId>", created_at, updated_at,
                     retired_at"#,
        c.id,
        c.name,
        c.first_party,
        &c.redirect_uris,
        &c.post_logout_redirect_uris,
        &c.scopes,
        &c.allowed_org_ids as &[OrgId],
        secret_hash,
    )
    .fetch_one(conn)
    .await
}

/// Retire client `id` (it keeps its row, for the audit; nothing accepts it).
pub async fn retire(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE oauth_clients SET retired_at = now(), updated_at = now() WHERE id = $1",
        id,
    )
    .execute(conn)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_are_https_loopback_http_or_private_use_schemes() {
        for ok in [
            "https://app.example.com/callback",
            "https://app.example.com:8443/cb?x=1",
            "http://127.0.0.1:5173/cb",
            "http://[::1]/cb",
            "http://localhost:8080/cb",
            "com.example.app:/oauth2redirect",
        ] {
            assert!(redirect_uri("redirect_uris", ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://app.example.com/cb",
            "https://app.example.com/cb#frag",
            "https://user:pw@app.example.com/cb",
            "https://*.example.com/cb",
            "/relative/cb",
            "javascript:alert(1)",
            "ftp://example.com/cb",
            "https://app.example.com/c b",
        ] {
            assert!(redirect_uri("redirect_uris", bad).is_err(), "{bad}");
        }
        assert!(redirect_uri("r", &format!("https://a.example/{}", "x".repeat(URI_MAX))).is_err());
    }

    #[test]
    fn scopes_are_known_include_openid_and_come_sorted_once() {
        let s = |v: &[&str]| scopes(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            s(&["email", "openid", "email"]).expect("ok"),
            ["email", "openid"]
        );
        assert!(s(&["email"]).is_err(), "no openid");
        assert!(s(&["openid", "admin"]).is_err(), "unknown");
    }
}
