//! Staff: the manual fulfilment queue and maintenance windows.

use crate::{
    lifecycle::{self, Action},
    maintenance::{self, NewWindow as Stored},
    provider::Credentials,
    servers::{self, store, Server},
    state::AppState,
};
use actix_web::{web, HttpResponse};
use event_contracts::SERVER_ACTIVE;
use hub_domain::ServerId;
use serde::{Deserialize, Serialize};
use serde_json::json;
use service_kit::{assertion::StaffCaller, ApiError, ApiResult};
use time::OffsetDateTime;

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
    let rows = store::pending_fulfilment(&state.pool).await?;
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
    let id = path.into_inner();
    let row = servers::load(&mut *state.pool.acquire().await?, id).await??;
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
    let active = lifecycle::transition(&mut tx, row.org_id, id, Action::Fulfil, now).await??;
    store::set_credentials(&mut tx, id, sealed).await?;
    servers::open_usage(&mut tx, &active, now).await?;
    servers::emit(&mut tx, &state.naming, &state.clock, SERVER_ACTIVE, &active).await?;
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
    let w = maintenance::add(
        &state.pool,
        Stored {
            title: body.title.trim(),
            description: &body.description,
            starts_at: body.starts_at,
            ends_at: body.ends_at,
            created_by: staff.user_id(),
            at: state.clock.now(),
        },
    )
    .await?;
    Ok(HttpResponse::Created().json(w))
}

/// GET /v1/service-contract/maintenance (public): windows not yet over,
/// soonest first.
pub async fn upcoming(
    state: web::Data<AppState>,
    _ctx: service_kit::assertion::RequestCtx,
) -> ApiResult<HttpResponse> {
    let ws = maintenance::upcoming(&state.pool, state.clock.now()).await?;
    Ok(HttpResponse::Ok().json(ws))
}
