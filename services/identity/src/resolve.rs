//! Bearer -> identity: the hottest query of the platform (one indexed lookup,
//! memberships folded in as JSON).

use hub_domain::{Credential, CredentialKind, Identity, Membership};
use sqlx::PgPool;
use uuid::Uuid;

#[derive(sqlx::FromRow)]
struct Row {
    credential_id: Uuid,
    user_id: Uuid,
    email: String,
    name: String,
    memberships: sqlx::types::Json<Vec<Membership>>,
    expires_at: time::OffsetDateTime,
}

/// A resolved bearer: who, with which credential, valid until when.
pub struct Resolved {
    pub identity: Identity,
    pub credential: Credential,
    pub expires_at: time::OffsetDateTime,
}

pub async fn by_session_token(
    pool: &PgPool,
    token: &str,
    is_staff: impl Fn(&str) -> bool,
) -> sqlx::Result<Option<Resolved>> {
    let hash = crate::tokens::hash(token);
    let row: Option<Row> = sqlx::query_as(
        "SELECT s.id AS credential_id, s.expires_at, u.id AS user_id, u.email, u.name, \
           COALESCE((SELECT json_agg(json_build_object('org_id', m.org_id, 'role', m.role) \
                                     ORDER BY m.created_at, m.org_id) \
                     FROM memberships m WHERE m.user_id = u.id), '[]'::json) AS memberships \
         FROM sessions s JOIN users u ON u.id = s.user_id \
         WHERE s.token_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now()",
    )
    .bind(hash)
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
