//! Memory documents (`memory_docs`) and the user's activity (`activity`).

use event_contracts::{AuditRecorded, Envelope};
use hub_domain::UserId;
use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(Debug, Serialize)]
pub struct MemoryDoc {
    pub soul_md: String,
    pub memory_md: String,
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_curated_at: Option<OffsetDateTime>,
    pub curation_count: i32,
}

/// The user's memory document, if they have one.
pub async fn doc(pool: &PgPool, user: UserId) -> sqlx::Result<Option<MemoryDoc>> {
    sqlx::query_as!(
        MemoryDoc,
        "SELECT soul_md, memory_md, last_curated_at, curation_count FROM memory_docs WHERE user_id = $1",
        user as UserId,
    )
    .fetch_optional(pool)
    .await
}

/// (soul_md, memory_md), empty when the user has no document.
pub async fn texts(pool: &PgPool, user: UserId) -> sqlx::Result<(String, String)> {
    let row: Option<(String, String)> = sqlx::query!(
        "SELECT soul_md, memory_md FROM memory_docs WHERE user_id = $1",
        user as UserId,
    )
    .fetch_optional(pool)
    .await?
    .map(|r| (r.soul_md, r.memory_md));
    Ok(row.unwrap_or_default())
}

pub async fn set_soul(pool: &PgPool, user: UserId, soul: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO memory_docs (user_id, soul_md) VALUES ($1, $2) \
         ON CONFLICT (user_id) DO UPDATE SET soul_md = EXCLUDED.soul_md",
        user as UserId,
        soul,
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Store audit events as activity (idempotent by event id). Events without
/// an actor are nobody's activity.
pub async fn store_activity(
    pool: &sqlx::PgPool,
    envs: Vec<Envelope<AuditRecorded>>,
) -> anyhow::Result<()> {
    let envs: Vec<_> = envs
        .into_iter()
        .filter(|e| e.data.actor_user_id.is_some())
        .collect();
    if envs.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = envs.iter().map(|e| e.id).collect();
    let users: Vec<UserId> = envs.iter().filter_map(|e| e.data.actor_user_id).collect();
    let actions: Vec<String> = envs.iter().map(|e| e.data.action.clone()).collect();
    let subjects: Vec<String> = envs.iter().map(|e| e.data.subject.clone()).collect();
    let ats: Vec<OffsetDateTime> = envs.iter().map(|e| e.occurred_at).collect();
    let mut tx = pool.begin().await?;
    super::erasure::hold_erasures(&mut tx).await?;
    sqlx::query!(
        "INSERT INTO activity (event_id, user_id, action, subject, at) \
         SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::timestamptz[]) \
                AS a (event_id, user_id, action, subject, at) \
          WHERE NOT EXISTS (SELECT 1 FROM erased_users e WHERE e.user_id = a.user_id) \
         ON CONFLICT (event_id) DO NOTHING",
        &ids,
        &users as &[UserId],
        &actions,
        &subjects,
        &ats,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Lock the user's document for a curation (made if missing, unless the
/// account was erased), serializing curations of one user: when the model
/// last wrote it (`None`: the account was erased, there is nothing to curate;
/// `Some(None)`: the model never wrote it).
pub async fn lock_for_curation(
    conn: &mut PgConnection,
    user: UserId,
) -> sqlx::Result<Option<Option<OffsetDateTime>>> {
    super::erasure::hold_erasures(&mut *conn).await?;
    sqlx::query!(
        "INSERT INTO memory_docs (user_id) SELECT $1 \
          WHERE NOT EXISTS (SELECT 1 FROM erased_users WHERE user_id = $1) \
         ON CONFLICT (user_id) DO NOTHING",
        user as UserId,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query_scalar!(
        "SELECT model_curated_at FROM memory_docs WHERE user_id = $1 FOR UPDATE",
        user as UserId,
    )
    .fetch_optional(&mut *conn)
    .await
}

/// Mark the user's uncurated activity curated at `now`: how many entries.
pub async fn mark_curated(
    conn: &mut PgConnection,
    user: UserId,
    now: OffsetDateTime,
) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"WITH done AS (UPDATE activity SET curated_at = $2 WHERE user_id = $1 AND curated_at IS NULL RETURNING 1)
         SELECT count(*) AS "n!" FROM done"#,
        user as UserId,
        now,
    )
    .fetch_one(conn)
    .await
}

/// The user's activity counted by action, most frequent first.
pub async fn counts(conn: &mut PgConnection, user: UserId) -> sqlx::Result<Vec<(String, i64)>> {
    Ok(sqlx::query!(
        r#"SELECT action, count(*) AS "n!" FROM activity WHERE user_id = $1
            GROUP BY action ORDER BY count(*) DESC, action"#,
        user as UserId,
    )
    .fetch_all(conn)
    .await?
    .into_iter()
    .map(|r| (r.action, r.n))
    .collect())
}

/// One curation's bookkeeping: curated at `now`, counted once more; the
/// memory is `rules` unless a provider keeps the model's; `model_turn` claims
/// the model's turn. Returns the model's turn as it now stands.
pub async fn advance(
    conn: &mut PgConnection,
    user: UserId,
    now: OffsetDateTime,
    provider: bool,
    rules: &str,
    model_turn: bool,
) -> sqlx::Result<Option<OffsetDateTime>> {
    sqlx::query_scalar!(
        "UPDATE memory_docs SET last_curated_at = $2, curation_count = curation_count + 1, \
                memory_md = CASE WHEN $3 THEN memory_md ELSE $4 END, \
                model_curated_at = CASE WHEN $5 THEN $2 ELSE model_curated_at END \
         WHERE user_id = $1 RETURNING model_curated_at",
        user as UserId,
        now,
        provider,
        rules,
        model_turn,
    )
    .fetch_one(conn)
    .await
}

/// Store the model's memory unless a later turn was claimed since `turn`.
pub async fn set_model_memory(
    pool: &PgPool,
    user: UserId,
    memory: &str,
    turn: Option<OffsetDateTime>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE memory_docs SET memory_md = $2 WHERE user_id = $1 AND model_curated_at = $3",
        user as UserId,
        memory,
        turn,
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Users to consider for the nightly curation (with a document or uncurated
/// activity), at most `limit`.
pub async fn curation_candidates(pool: &PgPool, limit: i64) -> sqlx::Result<Vec<UserId>> {
    sqlx::query_scalar!(
        r#"SELECT user_id AS "user_id!: UserId" FROM (SELECT user_id FROM memory_docs
           UNION SELECT DISTINCT user_id FROM activity WHERE curated_at IS NULL) u
         ORDER BY user_id LIMIT $1"#,
        limit,
    )
    .fetch_all(pool)
    .await
}

/// Remember the user's timezone (made if missing).
pub async fn set_timezone(pool: &PgPool, user: UserId, tz: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO memory_docs (user_id, timezone) VALUES ($1, $2) \
         ON CONFLICT (user_id) DO UPDATE SET timezone = EXCLUDED.timezone",
        user as UserId,
        tz,
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Claim the user's local night `night`: true for the one claim that wins it.
pub async fn claim_night(pool: &PgPool, user: UserId, night: time::Date) -> sqlx::Result<bool> {
    let claimed = sqlx::query!(
        "UPDATE memory_docs SET last_night = $2 WHERE user_id = $1 AND last_night IS DISTINCT FROM $2",
        user as UserId,
        night,
    )
    .execute(pool)
    .await?
    .rows_affected();
    Ok(claimed == 1)
}
