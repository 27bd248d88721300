//! The agent's audit events (identity stores them in the actor's
//! `/v1/audit/me`; curation reads them back as activity).

use crate::state::AppState;
use event_contracts::{AuditAction, AuditRecorded};
use serde_json::{json, Value};
use service_kit::{assertion::Caller, outbox};
use sqlx::PgConnection;

fn event(caller: &Caller, action: AuditAction, detail: Value) -> AuditRecorded {
    AuditRecorded {
        actor_user_id: Some(caller.user_id()),
        action: action.as_str().to_owned(),
        subject: format!("user:{}", caller.user_id()),
        detail,
        ip: caller.ip.clone(),
    }
}

/// Write an audit event in the caller's transaction.
pub async fn record(
    conn: &mut PgConnection,
    state: &AppState,
    caller: &Caller,
    action: AuditAction,
    detail: Value,
) -> anyhow::Result<()> {
    outbox::enqueue(conn, &state.naming, event(caller, action, detail)).await?;
    Ok(())
}

/// Logged autonomy: the assistant changed a profile field for the caller.
/// The detail names the field, never its value (audit rows outlive edits).
pub async fn profile_updated(
    state: &AppState,
    caller: &Caller,
    field: &str,
) -> Result<(), service_kit::ApiError> {
    let mut conn = state.pool.acquire().await?;
    record(
        &mut conn,
        state,
        caller,
        event_contracts::AuditAction::AgentProfileUpdated,
        json!({ "fields": [field] }),
    )
    .await?;
    state.outbox.kick();
    Ok(())
}
