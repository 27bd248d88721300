//! The agent's audit events (identity stores them in the actor's
//! `/v1/audit/me`; curation reads them back as activity).

use crate::state::AppState;
use event_contracts::{AuditAction, AuditRecorded, Naming};
use serde_json::{json, Value};
use service_kit::{assertion::Caller, outbox, outbox::Outbox};
use sqlx::{PgConnection, PgPool};

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
    naming: &Naming,
    caller: &Caller,
    action: AuditAction,
    detail: Value,
) -> anyhow::Result<()> {
    outbox::enqueue(conn, naming, event(caller, action, detail)).await?;
    Ok(())
}

/// Write an audit event of the caller's about `subject` (`kb_article:<id>`,
/// `proposal:<id>`) in the caller's transaction.
pub async fn record_on(
    conn: &mut PgConnection,
    naming: &Naming,
    caller: &Caller,
    action: AuditAction,
    subject: String,
    detail: Value,
) -> anyhow::Result<()> {
    outbox::audit_on(conn, naming, caller, action, subject, detail).await
}

/// Where an audit event outside a transaction of the caller's goes: this
/// service's outbox.
#[derive(Clone, Copy)]
pub struct Trail<'a> {
    pub pool: &'a PgPool,
    pub outbox: &'a Outbox,
    pub naming: &'a Naming,
}

impl<'a> Trail<'a> {
    pub fn of(state: &'a AppState) -> Trail<'a> {
        Trail {
            pool: &state.pool,
            outbox: &state.outbox,
            naming: &state.naming,
        }
    }

    /// Logged autonomy: the assistant changed a profile field for the caller.
    /// The detail names the field, never its value (audit rows outlive edits).
    pub async fn profile_updated(
        &self,
        caller: &Caller,
        field: &str,
    ) -> Result<(), service_kit::ApiError> {
        let mut conn = self.pool.acquire().await?;
        record(
            &mut conn,
            self.naming,
            caller,
            AuditAction::AgentProfileUpdated,
            json!({ "fields": [field] }),
        )
        .await?;
        self.outbox.kick();
        Ok(())
    }
}
