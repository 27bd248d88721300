//! Audit history: identity's own actions are written in the transaction that
//! makes them; other services' actions arrive as `core.v1.audit.recorded`
//! events and are stored once each (by event id).

use event_contracts::{AuditRecorded, Envelope};
use serde_json::Value;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

pub async fn record(
    conn: &mut PgConnection,
    actor: Option<Uuid>,
    action: &str,
    subject: &str,
    detail: Value,
    ip: &str,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO audit_log (actor_user_id, action, subject, detail, ip) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(actor)
    .bind(action)
    .bind(subject)
    .bind(detail)
    .bind(ip)
    .execute(conn)
    .await?;
    Ok(())
}

/// Store an audit event from another service; a redelivery is a no-op.
pub async fn store_event(pool: &PgPool, env: Envelope<AuditRecorded>) -> anyhow::Result<()> {
    let e = env.data;
    let action: String = e.action.chars().take(200).collect();
    let subject: String = e.subject.chars().take(500).collect();
    let ip: String = e.ip.chars().take(64).collect();
    sqlx::query(
        "INSERT INTO audit_log (event_id, actor_user_id, action, subject, detail, ip, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (event_id) DO NOTHING",
    )
    .bind(env.id)
    .bind(e.actor_user_id)
    .bind(action)
    .bind(subject)
    .bind(e.detail)
    .bind(ip)
    .bind(env.occurred_at)
    .execute(pool)
    .await?;
    Ok(())
}
