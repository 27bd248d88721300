//! Shared handler state.

use crate::provider::Provider;
use event_contracts::{AuditRecorded, Naming};
use service_kit::{assertion::Caller, outbox, outbox::Outbox, sealed::Sealer, Clock};
use sqlx::{PgConnection, PgPool};
use std::sync::Arc;

pub struct AppState {
    pub pool: PgPool,
    pub outbox: Outbox,
    pub naming: Naming,
    /// Seals access credentials (AES-256-GCM).
    pub sealer: Sealer,
    pub provider: Arc<dyn Provider>,
    pub clock: Clock,
    pub pages: crate::settings::PageSettings,
}

impl AppState {
    /// Record an audit event of `caller` on organization `org` (identity stores it).
    pub async fn audit(
        &self,
        conn: &mut PgConnection,
        caller: &Caller,
        action: &str,
        org: hub_domain::OrgId,
        detail: serde_json::Value,
    ) -> anyhow::Result<()> {
        outbox::enqueue(
            conn,
            &self.naming,
            AuditRecorded {
                actor_user_id: Some(caller.user_id()),
                action: action.to_owned(),
                subject: format!("org:{org}"),
                detail,
                ip: caller.ip.clone(),
            },
        )
        .await?;
        Ok(())
    }
}
