//! The caller's own audit history.

use crate::state::AppState;
use actix_web::{web, HttpResponse};
use hub_domain::UserId;
use serde::Serialize;
use service_kit::{assertion::SessionCaller, ApiResult};
use time::OffsetDateTime;

#[derive(Serialize)]
struct AuditEntry {
    id: i64,
    actor_user_id: Option<UserId>,
    action: String,
    subject: String,
    detail: serde_json::Value,
    ip: String,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
}

/// GET /v1/audit/me: newest first, at most `auth.audit_page` entries.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn mine(state: web::Data<AppState>, caller: SessionCaller) -> ApiResult<HttpResponse> {
    let rows: Vec<AuditEntry> = sqlx::query_as!(
        AuditEntry,
        r#"SELECT id, actor_user_id AS "actor_user_id: UserId", action, subject, detail, ip, created_at
         FROM audit_log WHERE actor_user_id = $1 ORDER BY id DESC LIMIT $2"#,
        caller.user_id() as UserId,
        state.auth.audit_page,
    )
    .fetch_all(&state.pool)
    .await?;
    Ok(HttpResponse::Ok().json(rows))
}
