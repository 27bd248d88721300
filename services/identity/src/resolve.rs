//! Bearer -> identity: the hottest query of the platform (one indexed lookup,
//! memberships folded in as JSON). Session tokens and API keys (`svc_live_`)
//! resolve through the same path; each lookup is its store's
//! ([`crate::sessions::live_by_hash`], [`crate::api_keys::live_by_hash`]).
//! The OpenID Provider's access tokens resolve by their session
//! ([`access_token`]).

use hub_domain::{Credential, CredentialKind, Identity, Membership, Role};
use sqlx::PgPool;
use time::OffsetDateTime;

pub const API_KEY_PREFIX: &str = "svc_live_";

/// A resolved bearer: who, with which credential, valid until when.
pub struct Resolved {
    pub identity: Identity,
    pub credential: Credential,
    pub expires_at: OffsetDateTime,
}

/// `is_staff(email, granted, mfa)`: whether a session of `email` (whose user
/// holds a staff grant or not, opened through a second factor or not) carries
/// `staff: true`.
pub async fn bearer(
    pool: &PgPool,
    token: &str,
    is_staff: impl Fn(&str, bool, bool) -> bool,
) -> sqlx::Result<Option<Resolved>> {
    if token.starts_with(API_KEY_PREFIX) {
        api_key(pool, token).await
    } else {
        session(pool, token, is_staff).await
    }
}

async fn session(
    pool: &PgPool,
    token: &str,
    is_staff: impl Fn(&str, bool, bool) -> bool,
) -> sqlx::Result<Option<Resolved>> {
    let row = crate::sessions::live_by_hash(pool, &crate::tokens::hash(token)).await?;
    Ok(row.map(|r| {
        // Staff by email or grant, and (mfa.staff_required) only through MFA.
        let staff = is_staff(&r.email, r.staff_granted, r.mfa);
        Resolved {
            identity: Identity {
                user_id: r.user_id,
                email: r.email,
                name: r.name,
                staff,
                memberships: r.memberships,
            },
            credential: Credential {
                kind: CredentialKind::Session,
                id: r.id.as_uuid(),
            },
            expires_at: r.expires_at,
        }
    }))
}

/// An API key is its own principal: user_id is the key's id, exactly one
/// membership at the key's role, never staff, never owner.
async fn api_key(pool: &PgPool, token: &str) -> sqlx::Result<Option<Resolved>> {
    let row = crate::api_keys::live_by_hash(pool, &crate::tokens::hash(token)).await?;
    Ok(row.and_then(|k| {
        let role = Role::parse(&k.role).filter(|r| r.allowed_for_api_key())?;
        Some(Resolved {
            identity: Identity {
                user_id: k.id.as_principal(),
                email: String::new(),
                name: k.name,
                staff: false,
                memberships: vec![Membership {
                    org_id: k.org_id,
                    role,
                    status: k.org_status,
                }],
            },
            credential: Credential {
                kind: CredentialKind::ApiKey,
                id: k.id.as_uuid(),
            },
            // Keys live until revoked; caches are bounded by their own TTL.
            expires_at: OffsetDateTime::now_utc() + time::Duration::days(365),
        })
    }))
}

/// Whether a bearer has the shape of a JWT (three base64url parts).
pub fn looks_like_jwt(token: &str) -> bool {
    token.starts_with("eyJ") && token.bytes().filter(|b| *b == b'.').count() == 2
}

/// An access token of the OpenID Provider (already verified: `claims`) as a
/// bearer: its person, while the session it names (`sid`) is live, the
/// person enabled and the grant (`gid`) not revoked; only the memberships the token lists (`orgs`: the
/// organizations the client may see, and none without that scope); staff
/// only if the token says so and the session still is. Valid until the
/// token or the session expires, whichever is first. A client's own token
/// (no `sid`) is no one: None.
pub async fn access_token(
    pool: &PgPool,
    claims: &serde_json::Value,
    is_staff: impl Fn(&str, bool, bool) -> bool,
) -> sqlx::Result<Option<Resolved>> {
    let Some(sid) = claims["sid"]
        .as_str()
        .and_then(|s| uuid::Uuid::parse_str(s).ok())
    else {
        return Ok(None);
    };
    let (Some(exp), Some(sub)) = (claims["exp"].as_i64(), claims["sub"].as_str()) else {
        return Ok(None);
    };
    // Its grant still stands (not revoked by its client, a reused refresh
    // token or a replayed code).
    if let Some(gid) = claims["gid"].as_str() {
        let Ok(gid) = uuid::Uuid::parse_str(gid) else {
            return Ok(None);
        };
        if !crate::oauth::grant_live(&mut *pool.acquire().await?, gid).await? {
            return Ok(None);
        }
    }
    let Some(r) = crate::sessions::live_by_id(pool, hub_domain::SessionId::from_uuid(sid)).await?
    else {
        return Ok(None);
    };
    if r.user_id.to_string() != sub {
        return Ok(None);
    }
    let listed: Vec<&str> = claims["orgs"]
        .as_array()
        .map(|a| a.iter().filter_map(|m| m["org_id"].as_str()).collect())
        .unwrap_or_default();
    let memberships = r
        .memberships
        .into_iter()
        .filter(|m| listed.contains(&m.org_id.to_string().as_str()))
        .collect();
    let staff = claims["staff"] == true && is_staff(&r.email, r.staff_granted, r.mfa);
    let token_exp = OffsetDateTime::from_unix_timestamp(exp).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    Ok(Some(Resolved {
        identity: Identity {
            user_id: r.user_id,
            email: r.email,
            name: r.name,
            staff,
            memberships,
        },
        credential: Credential {
            kind: CredentialKind::AccessToken,
            id: sid,
        },
        expires_at: r.expires_at.min(token_exp),
    }))
}
