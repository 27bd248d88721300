//! identity's storage of org-scoped API keys (`api_keys`): create, list,
//! revoke, and the bearer lookup ([`live_by_hash`], for
//! [`crate::resolve`]), checked at compile time. Keys come back as domain
//! values (the role a [`Role`]); only a token's SHA-256 is ever stored.

use hub_domain::{ApiKeyId, OrgId, OrgStatus, Role, UserId};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;

/// What a key step may refuse, apart from database errors.
#[derive(Debug)]
pub enum Error {
    /// No such live key in this organization (unknown, another
    /// organization's, or already revoked).
    NotFound,
    Db(sqlx::Error),
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Db(e)
    }
}

/// An API key as its organization's admins see it (never its token).
#[derive(Serialize)]
pub struct ApiKey {
    pub id: ApiKeyId,
    pub name: String,
    pub role: Role,
    /// The user who created the key (it is revoked when they lose admin authority).
    pub created_by: UserId,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub revoked_at: Option<OffsetDateTime>,
}

/// The stored columns, the role as text.
struct Row {
    id: ApiKeyId,
    name: String,
    role: String,
    created_by: UserId,
    created_at: OffsetDateTime,
    revoked_at: Option<OffsetDateTime>,
}

impl TryFrom<Row> for ApiKey {
    type Error = sqlx::Error;
    fn try_from(r: Row) -> sqlx::Result<ApiKey> {
        let role = Role::parse(&r.role)
            .ok_or_else(|| sqlx::Error::Decode(format!("not a role: {:?}", r.role).into()))?;
        Ok(ApiKey {
            id: r.id,
            name: r.name,
            role,
            created_by: r.created_by,
            created_at: r.created_at,
            revoked_at: r.revoked_at,
        })
    }
}

/// A key to create.
pub struct NewKey<'a> {
    pub org_id: OrgId,
    pub name: &'a str,
    pub role: Role,
    pub token_hash: Vec<u8>,
    pub created_by: UserId,
}

/// Store key `k` under a new id.
pub async fn create(conn: &mut PgConnection, k: NewKey<'_>) -> sqlx::Result<ApiKey> {
    sqlx::query_as!(
        Row,
        "INSERT INTO api_keys (id, org_id, name, role, token_hash, created_by) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id, name, role, created_by, created_at, revoked_at",
        ApiKeyId::new() as ApiKeyId,
        k.org_id as OrgId,
        k.name,
        k.role.as_str(),
        k.token_hash,
        k.created_by as UserId,
    )
    .fetch_one(conn)
    .await?
    .try_into()
}

/// Every key of `org_id` (revoked ones too), newest first, at most 500.
pub async fn of_org(pool: &PgPool, org_id: OrgId) -> sqlx::Result<Vec<ApiKey>> {
    sqlx::query_as!(
        Row,
        "SELECT id, name, role, created_by, created_at, revoked_at FROM api_keys \
         WHERE org_id = $1 ORDER BY created_at DESC LIMIT 500",
        org_id as OrgId,
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(ApiKey::try_from)
    .collect()
}

/// Revoke live key `key_id` of `org_id`; returns its token hash (for the
/// revocation event).
pub async fn revoke(
    conn: &mut PgConnection,
    org_id: OrgId,
    key_id: ApiKeyId,
) -> Result<Vec<u8>, Error> {
    sqlx::query_scalar!(
        "UPDATE api_keys SET revoked_at = now() \
         WHERE id = $1 AND org_id = $2 AND revoked_at IS NULL RETURNING token_hash",
        key_id as ApiKeyId,
        org_id as OrgId,
    )
    .fetch_optional(conn)
    .await?
    .ok_or(Error::NotFound)
}

/// A live key as the bearer lookup reads it: the role as stored (the caller
/// decides what an unknown role means).
pub struct Live {
    pub id: ApiKeyId,
    pub org_id: OrgId,
    pub role: String,
    pub name: String,
    /// Its organization's status (suspended organizations refuse its writes).
    pub org_status: OrgStatus,
}

/// The live key whose token hashes to `token_hash`, if any (one indexed
/// lookup: the hot path of every request with an API key).
pub async fn live_by_hash(pool: &PgPool, token_hash: &[u8]) -> sqlx::Result<Option<Live>> {
    sqlx::query_as!(
        Live,
        r#"SELECT k.id, k.org_id, k.role, k.name,
                  COALESCE(o.status, 'active') AS "org_status!: OrgStatus"
             FROM api_keys k LEFT JOIN org_states o ON o.org_id = k.org_id
            WHERE k.token_hash = $1 AND k.revoked_at IS NULL"#,
        token_hash,
    )
    .fetch_optional(pool)
    .await
}

/// Revoke every live key of `org_id` (it was closed); returns each revoked
/// key with its token hash (for the revocation events).
pub async fn revoke_all_of(
    conn: &mut PgConnection,
    org_id: OrgId,
) -> sqlx::Result<Vec<(ApiKeyId, Vec<u8>)>> {
    Ok(sqlx::query!(
        r#"UPDATE api_keys SET revoked_at = now()
           WHERE org_id = $1 AND revoked_at IS NULL
           RETURNING id AS "id: ApiKeyId", token_hash"#,
        org_id as OrgId,
    )
    .fetch_all(conn)
    .await?
    .into_iter()
    .map(|r| (r.id, r.token_hash))
    .collect())
}

/// Revoke every live key of `org_id` that `user_id` created; returns each
/// revoked key with its token hash (for the revocation events).
pub async fn revoke_created_by(
    conn: &mut PgConnection,
    org_id: OrgId,
    user_id: UserId,
) -> sqlx::Result<Vec<(ApiKeyId, Vec<u8>)>> {
    Ok(sqlx::query!(
        r#"UPDATE api_keys SET revoked_at = now()
           WHERE org_id = $1 AND created_by = $2 AND revoked_at IS NULL
           RETURNING id AS "id: ApiKeyId", token_hash"#,
        org_id as OrgId,
        user_id as UserId,
    )
    .fetch_all(conn)
    .await?
    .into_iter()
    .map(|r| (r.id, r.token_hash))
    .collect())
}

/// Queue one `CredentialRevoked` per revoked key (caller's transaction), so
/// every gateway drops them; a key is its own principal.
pub async fn enqueue_revoked(
    conn: &mut PgConnection,
    naming: &event_contracts::Naming,
    revoked: &[(ApiKeyId, Vec<u8>)],
) -> anyhow::Result<()> {
    for (id, hash) in revoked {
        service_kit::outbox::enqueue(
            &mut *conn,
            naming,
            event_contracts::CredentialRevoked {
                user_id: id.as_principal(),
                credential_kind: hub_domain::CredentialKind::ApiKey.as_str().into(),
                credential_id: id.as_uuid(),
                token_hash: hex::encode(hash),
            },
        )
        .await?;
    }
    Ok(())
}
