//! Staff: the manual fulfilment queue and maintenance windows.

use crate::{
    lifecycle::{self, Action},
    provider::Credentials,
    servers::{self, Row, Server},
    state::AppState,
};
use actix_web::{web, HttpResponse};
use event_contracts::SERVER_ACTIVE;
use hub_domain::{OrgId, ServerId, UserId};
use serde::{Deserialize, Serialize};
use serde_json::json;
use service_kit::{assertion::StaffCaller, ApiError, ApiResult};
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(Serialize)]
struct Queued {
    #[serde(flatten)]
    server: Server,
    /// Past its SLA.
    overdue: bool,
}

/// GET /v1/admin/fulfilment (staff): manual orders waiting, oldest due first.
#[tracing::instrument(skip_all)]
pub async fn queue(state: web::Data<AppState>, _staff: StaffCaller) -> ApiResult<HttpResponse> {
    let rows: Vec<Row> = sqlx::query_as!(
        Row,
        r#"SELECT id, org_id AS "org_id: OrgId", sku_id, hostname, status, fulfilment, provider_ref, credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at FROM servers WHERE status = 'pending_fulfilment' ORDER BY due_at, id LIMIT 500"#,
    )
    .fetch_all(&state.pool)
    .await?;
    let now = state.clock.now();
    let out: Vec<Queued> = rows
        .iter()
        .map(|r| Queued {
            server: r.server(),
            overdue: r.due_at.is_some_and(|d| d < now),
        })
        .collect();
    Ok(HttpResponse::Ok().json(out))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Complete {
    username: String,
    password: String,
    host: String,
}

fn bounded(name: &str, v: &str) -> ApiResult<()> {
    if v.trim().is_empty() || v.chars().count() > 255 || v.chars().any(char::is_control) {
        return Err(ApiError::BadRequest(format!(
            "{name} must be 1 to 255 characters without control characters"
        )));
    }
    Ok(())
}

/// POST /v1/admin/fulfilment/{id}/complete (staff): the server is set up by
/// hand; its access credentials (sealed) make it active.
#[tracing::instrument(skip_all, fields(server_id = %path))]
pub async fn complete(
    staff: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<ServerId>,
    body: web::Json<Complete>,
) -> ApiResult<HttpResponse> {
    bounded("username", &body.username)?;
    bounded("password", &body.password)?;
    bounded("host", &body.host)?;
    let id = path.into_inner().as_uuid();
    let row = servers::load(&mut *state.pool.acquire().await?, id).await?;
    let now = state.clock.now();
    let creds = Credentials {
        username: body.username.trim().to_owned(),
        password: body.password.clone(),
        host: body.host.trim().to_owned(),
    };
    let sealed = state
        .sealer
        .seal_json(&creds, &servers::credentials_aad(id))?;
    let mut tx = state.pool.begin().await?;
    let active = lifecycle::transition(&mut tx, row.org_id, id, Action::Fulfil, now).await?;
    sqlx::query!(
        "UPDATE servers SET credentials = $2 WHERE id = $1",
        id,
        sealed,
    )
    .execute(&mut *tx)
    .await?;
    servers::open_usage(&mut tx, &active, now).await?;
    servers::emit(&mut tx, &state, SERVER_ACTIVE, &active).await?;
    service_kit::outbox::audit(
        &mut tx,
        &state.naming,
        &staff,
        event_contracts::AuditAction::ServerFulfilled,
        row.org_id,
        json!({"server_id": id}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(active.server()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewWindow {
    title: String,
    #[serde(default)]
    description: String,
    #[serde(with = "time::serde::rfc3339")]
    starts_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    ends_at: OffsetDateTime,
}

#[derive(Serialize)]
pub struct Window {
    id: Uuid,
    title: String,
    description: String,
    #[serde(with = "time::serde::rfc3339")]
    starts_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    ends_at: OffsetDateTime,
}

/// POST /v1/admin/maintenance (staff): 201 with the window.
#[tracing::instrument(skip_all)]
pub async fn add_window(
    staff: StaffCaller,
    state: web::Data<AppState>,
    body: web::Json<NewWindow>,
) -> ApiResult<HttpResponse> {
    bounded("title", &body.title)?;
    if body.description.chars().count() > 2000 {
        return Err(ApiError::bad_request(
            "description must be at most 2000 characters",
        ));
    }
    if body.ends_at <= body.starts_at {
        return Err(ApiError::bad_request("ends_at must be after starts_at"));
    }
    let w: Window = sqlx::query_as!(
        Window,
        "INSERT INTO maintenance_windows (id, title, description, starts_at, ends_at, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id, title, description, starts_at, ends_at",
        Uuid::now_v7(),
        body.title.trim(),
        &body.description,
        body.starts_at,
        body.ends_at,
        staff.user_id() as UserId,
        state.clock.now(),
    )
    .fetch_one(&state.pool)
    .await?;
    Ok(HttpResponse::Created().json(w))
}

/// GET /v1/service-contract/maintenance (public): windows not yet over,
/// soonest first.
pub async fn upcoming(
    state: web::Data<AppState>,
    _ctx: service_kit::assertion::RequestCtx,
) -> ApiResult<HttpResponse> {
    let ws: Vec<Window> = sqlx::query_as!(
        Window,
        "SELECT id, title, description, starts_at, ends_at FROM maintenance_windows \
         WHERE ends_at > $1 ORDER BY starts_at, id LIMIT 200",
        state.clock.now(),
    )
    .fetch_all(&state.pool)
    .await?;
    Ok(HttpResponse::Ok().json(ws))
}
