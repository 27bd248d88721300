//! Bearer -> identity: the hottest query of the platform (one indexed lookup,
//! memberships folded in as JSON). Session tokens and API keys (`svc_live_`)
//! resolve through the same path; a key's lookup is its module's
//! ([`crate::api_keys::live_by_hash`]).

use hub_domain::{Credential, CredentialKind, Identity, Membership, Role, UserId};
use sqlx::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

pub const API_KEY_PREFIX: &str = "svc_live_";

struct SessionRow {
    credential_id: Uuid,
    user_id: UserId,
    email: String,
    name: String,
    memberships: sqlx::types::Json<Vec<Membership>>,
    expires_at: OffsetDateTime,
}

/// A resolved bearer: who, with which credential, valid until when.
pub struct Resolved {
    pub identity: Identity,
    pub credential: Credential,
    pub expires_at: OffsetDateTime,
}

pub async fn bearer(
    pool: &PgPool,
    token: &str,
    is_staff: impl Fn(&str) -> bool,
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
    is_staff: impl Fn(&str) -> bool,
) -> sqlx::Result<Option<Resolved>> {
    let hash = crate::tokens::hash(token);
    let row: Option<SessionRow> = sqlx::query_as!(
        SessionRow,
        r#"SELECT s.id AS credential_id, s.expires_at, u.id AS user_id, u.email, u.name,
           COALESCE((SELECT json_agg(json_build_object('org_id', m.org_id, 'role', m.role)
                                     ORDER BY m.created_at, m.org_id)
                     FROM memberships m WHERE m.user_id = u.id), '[]'::json)
             AS "memberships!: sqlx::types::Json<Vec<Membership>>"
         FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE s.token_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now()"#,
        hash,
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| {
        let staff = is_staff(&r.email);
        Resolved {
            identity: Identity {
                user_id: r.user_id,
                email: r.email,
                name: r.name,
                staff,
                memberships: r.memberships.0,
            },
            credential: Credential {
                kind: CredentialKind::Session,
                id: r.credential_id,
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
