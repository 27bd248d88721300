//! Audit history: identity's own actions are written in the transaction that
//! makes them; other services' actions arrive as `core.v1.audit.recorded`
//! events and are stored once each (by event id).

use event_contracts::{AuditAction, AuditRecorded, Envelope};
use hub_domain::{OrgId, UserId};
use serde::Serialize;
use serde_json::Value;
use service_kit::assertion::Authority;
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;

/// One audit entry as its actor reads it.
#[derive(Serialize)]
pub struct Entry {
    pub id: i64,
    pub actor_user_id: Option<UserId>,
    pub action: String,
    pub subject: String,
    pub detail: serde_json::Value,
    pub ip: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// Up to `limit` entries `actor` made before entry `before` (all when None),
/// newest first.
pub async fn of_actor(
    pool: &PgPool,
    actor: UserId,
    before: Option<i64>,
    limit: i64,
) -> sqlx::Result<Vec<Entry>> {
    sqlx::query_as!(
        Entry,
        r#"SELECT id, actor_user_id AS "actor_user_id: UserId", action, subject, detail, ip, created_at
         FROM audit_log WHERE actor_user_id = $1 AND ($2::bigint IS NULL OR id < $2)
         ORDER BY id DESC LIMIT $3"#,
        actor as UserId,
        before,
        limit,
    )
    .fetch_all(pool)
    .await
}

/// Which entries of an organization's history to read.
pub struct OrgFilter {
    pub actor: Option<UserId>,
    pub action: Option<String>,
    pub since: Option<OffsetDateTime>,
    pub until: Option<OffsetDateTime>,
}

/// Up to `limit` entries about `org` matching `f`, before entry `before`
/// (all when None), newest first.
pub async fn of_org(
    pool: &PgPool,
    org: OrgId,
    f: &OrgFilter,
    before: Option<i64>,
    limit: i64,
) -> sqlx::Result<Vec<Entry>> {
    sqlx::query_as!(
        Entry,
        r#"SELECT id, actor_user_id AS "actor_user_id: UserId", action, subject, detail, ip, created_at
         FROM audit_log
         WHERE org_id = $1
           AND ($2::uuid IS NULL OR actor_user_id = $2)
           AND ($3::text IS NULL OR action = $3)
           AND ($4::timestamptz IS NULL OR created_at >= $4)
           AND ($5::timestamptz IS NULL OR created_at < $5)
           AND ($6::bigint IS NULL OR id < $6)
         ORDER BY id DESC LIMIT $7"#,
        org as OrgId,
        f.actor as Option<UserId>,
        f.action.as_deref(),
        f.since,
        f.until,
        before,
        limit,
    )
    .fetch_all(pool)
    .await
}

/// Record `action` of `actor` on `subject` in the caller's transaction.
pub async fn record(
    conn: &mut PgConnection,
    actor: Option<UserId>,
    action: AuditAction,
    subject: &str,
    detail: Value,
    ip: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO audit_log (actor_user_id, action, subject, detail, ip) VALUES ($1, $2, $3, $4, $5)",
        actor as Option<UserId>,
        action.as_str(),
        subject,
        detail,
        ip,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// `detail` of an action taken with `authority`: staff acting on an
/// organization's access ([`Authority::Staff`]) are marked `"by_staff": true`
/// in its audit, so the organization's history tells them from its members.
pub fn by(authority: Authority, mut detail: Value) -> Value {
    if authority.is_staff() {
        if let Value::Object(m) = &mut detail {
            m.insert("by_staff".into(), Value::Bool(true));
        }
    }
    detail
}

/// Store audit events from other services in one statement; a redelivered
/// event is a no-op (unique event id). Entries take their ids in the
/// batch's order (the order the services emitted them). An event of a deleted account that
/// arrives after the deletion is stored without its IP, as the deletion left
/// the others.
pub async fn store_events(pool: &PgPool, envs: Vec<Envelope<AuditRecorded>>) -> anyhow::Result<()> {
    let n = envs.len();
    let (mut ids, mut actors, mut actions, mut subjects, mut details, mut ips, mut ats) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for env in envs {
        let e = env.data;
        ids.push(env.id);
        actors.push(e.actor_user_id);
        actions.push(e.action.chars().take(200).collect::<String>());
        subjects.push(e.subject.chars().take(500).collect::<String>());
        details.push(e.detail);
        ips.push(e.ip.chars().take(64).collect::<String>());
        ats.push(env.occurred_at);
    }
    let mut tx = pool.begin().await?;
    // The actors' rows, shared until the insert commits: an account deletion
    // (which holds its row for update) either finished before, and the insert
    // sees it, or waits, and its IP erasure sees the new entries.
    let mut known: Vec<UserId> = actors.iter().flatten().copied().collect();
    known.sort();
    known.dedup();
    sqlx::query!(
        "SELECT 1 AS one FROM users WHERE id = ANY($1) ORDER BY id FOR SHARE",
        &known as &[UserId],
    )
    .fetch_all(&mut *tx)
    .await?;
    sqlx::query!(
        "INSERT INTO audit_log (event_id, actor_user_id, action, subject, detail, ip, created_at) \
         SELECT e.event_id, e.actor, e.action, e.subject, e.detail, \
                CASE WHEN EXISTS (SELECT 1 FROM users u \
                                   WHERE u.id = e.actor AND u.deleted_at IS NOT NULL) \
                     THEN '' ELSE e.ip END, \
                e.at \
           FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::jsonb[], $6::text[], $7::timestamptz[]) \
                WITH ORDINALITY AS e (event_id, actor, action, subject, detail, ip, at, n) \
          ORDER BY e.n \
         ON CONFLICT (event_id) DO NOTHING",
        &ids,
        &actors as &[Option<UserId>],
        &actions,
        &subjects,
        &details,
        &ips,
        &ats,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}
