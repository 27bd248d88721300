//! Bearer -> identity: the hottest query of the platform (one indexed lookup,
//! memberships folded in as JSON). Session tokens and API keys (`svc_live_`)
//! resolve through the same path; each lookup is its store's
//! ([`crate::sessions::live_by_hash`], [`crate::api_keys::live_by_hash`]).

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
