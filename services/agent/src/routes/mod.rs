//! agent's HTTP surface. The assistant's routes need a session; the
//! knowledge base ([`kb`]) is read without credentials and written by staff;
//! proposals ([`proposals`]) are filed with a session and moved by staff.

mod body;
mod kb;
mod proposals;

use crate::{conversations, engine, memory, model, staged, state::AppState, store};
use actix_web::{web, HttpResponse};
use body::body;
use hub_domain::{ConversationId, OrgId, StagedActionId};
use serde::Deserialize;
use serde_json::json;
use service_kit::methods;
use service_kit::{
    assertion::{SessionCaller, StaffCaller},
    ApiError, ApiResult,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/agent", methods::post().to(ask))
        .route("/v1/agent/confirm", methods::post().to(confirm))
        .route("/v1/agent/reject", methods::post().to(reject))
        .route(
            "/v1/agent/conversations",
            methods::get().to(list_conversations),
        )
        .route(
            "/v1/agent/conversations/{id}/messages",
            methods::get().to(conversation_messages),
        )
        .route(
            "/v1/agent/conversations/{id}/close",
            methods::post().to(close_conversation),
        )
        .route("/v1/agent/model", methods::get().to(get_model))
        .route("/v1/agent/model", methods::put().to(set_model))
        .route(service_kit::export::PATH, methods::get().to(export))
        .route("/v1/memory", methods::get().to(get_memory))
        .route("/v1/memory/soul", methods::patch().to(set_soul))
        .route("/v1/memory/curate", methods::post().to(curate))
        .route("/v1/kb/categories", methods::get().to(kb::categories))
        .route("/v1/kb/articles", methods::get().to(kb::published))
        .route("/v1/kb/articles/{slug}", methods::get().to(kb::article))
        .route(
            "/v1/admin/kb/categories",
            methods::post().to(kb::create_category),
        )
        .route("/v1/admin/kb/articles", methods::get().to(kb::all))
        .route(
            "/v1/admin/kb/articles",
            methods::post().to(kb::create_article),
        )
        .route(
            "/v1/admin/kb/articles/{id}",
            methods::patch().to(kb::update_article),
        )
        .route(
            "/v1/admin/kb/articles/{id}",
            methods::delete().to(kb::delete_article),
        )
        .route("/v1/proposals", methods::get().to(proposals::list))
        .route("/v1/proposals", methods::post().to(proposals::file))
        .route(
            "/v1/admin/proposals/{id}",
            methods::patch().to(proposals::set_status),
        );
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Ask {
    message: String,
    #[serde(default)]
    org_id: Option<OrgId>,
    #[serde(default)]
    conversation_id: Option<ConversationId>,
}

/// POST /v1/agent (session): AgentReply.
#[tracing::instrument(skip_all)]
async fn ask(
    caller: SessionCaller,
    state: web::Data<AppState>,
    bytes: web::Bytes,
) -> ApiResult<HttpResponse> {
    let b: Ask = body(&bytes)?;
    let reply = engine::answer(&state, &caller, &b.message, b.org_id, b.conversation_id).await?;
    Ok(HttpResponse::Ok().json(reply))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Decision {
    confirmation_id: StagedActionId,
}

/// POST /v1/agent/confirm (session): `{confirmation_id}`.
#[tracing::instrument(skip_all)]
async fn confirm(
    caller: SessionCaller,
    state: web::Data<AppState>,
    bytes: web::Bytes,
) -> ApiResult<HttpResponse> {
    let d: Decision = body(&bytes)?;
    staged::confirm(&state, &caller, d.confirmation_id).await
}

/// POST /v1/agent/reject (session): `{confirmation_id}`.
#[tracing::instrument(skip_all)]
async fn reject(
    caller: SessionCaller,
    state: web::Data<AppState>,
    bytes: web::Bytes,
) -> ApiResult<HttpResponse> {
    let d: Decision = body(&bytes)?;
    staged::reject(&state, &caller, d.confirmation_id).await
}

async fn list_conversations(
    caller: SessionCaller,
    state: web::Data<AppState>,
) -> ApiResult<HttpResponse> {
    Ok(HttpResponse::Ok().json(conversations::list(&state, &caller).await?))
}

async fn conversation_messages(
    caller: SessionCaller,
    state: web::Data<AppState>,
    path: web::Path<ConversationId>,
) -> ApiResult<HttpResponse> {
    Ok(HttpResponse::Ok().json(conversations::messages(&state, &caller, path.into_inner()).await?))
}

async fn close_conversation(
    caller: SessionCaller,
    state: web::Data<AppState>,
    path: web::Path<ConversationId>,
) -> ApiResult<HttpResponse> {
    Ok(HttpResponse::Ok().json(conversations::close(&state, &caller, path.into_inner()).await?))
}

/// GET /v1/agent/model (staff): the model in use and whether a provider is set.
async fn get_model(_staff: StaffCaller, state: web::Data<AppState>) -> ApiResult<HttpResponse> {
    let current = model::current(&state).await?;
    Ok(HttpResponse::Ok().json(json!({
        "model": current, "provider_configured": state.provider(),
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelChoice {
    model: String,
}

/// PUT /v1/agent/model (staff): `{model}`, 1 to 100 visible ASCII characters.
async fn set_model(
    staff: StaffCaller,
    state: web::Data<AppState>,
    bytes: web::Bytes,
) -> ApiResult<HttpResponse> {
    let m: ModelChoice = body(&bytes)?;
    let name = m.model.trim();
    if name.is_empty() || name.len() > 100 || !name.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ApiError::bad_request(
            "model must be 1 to 100 visible ASCII characters",
        ));
    }
    let mut tx = state.pool.begin().await?;
    store::model::choose(&mut tx, name, staff.user_id(), state.clock.now()).await?;
    crate::audit::record(
        &mut tx,
        &state.naming,
        &staff,
        event_contracts::AuditAction::AgentModelSet,
        json!({"model": name}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(json!({"model": name, "provider_configured": state.provider()})))
}

async fn get_memory(caller: SessionCaller, state: web::Data<AppState>) -> ApiResult<HttpResponse> {
    Ok(HttpResponse::Ok().json(memory::get(&state, caller.user_id()).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Soul {
    soul_md: String,
}

/// PATCH /v1/memory/soul (session): `{soul_md}`, at most 20,000 characters.
async fn set_soul(
    caller: SessionCaller,
    state: web::Data<AppState>,
    bytes: web::Bytes,
) -> ApiResult<HttpResponse> {
    let s: Soul = body(&bytes)?;
    Ok(HttpResponse::Ok().json(memory::set_soul(&state, caller.user_id(), &s.soul_md).await?))
}

/// POST /v1/memory/curate (session): curate now.
async fn curate(caller: SessionCaller, state: web::Data<AppState>) -> ApiResult<HttpResponse> {
    let n = memory::curate(&state, caller.user_id()).await?;
    Ok(HttpResponse::Ok().json(json!({"status": "curated", "entries_processed": n})))
}

/// GET /v1/auth/me/export (session): the agent's part of the user's
/// personal-data export (the gateway merges it with identity's).
#[tracing::instrument(skip_all)]
async fn export(state: web::Data<AppState>, caller: SessionCaller) -> ApiResult<HttpResponse> {
    let data = store::personal::export(&state.pool, caller.user_id()).await?;
    Ok(HttpResponse::Ok()
        .insert_header(("cache-control", "no-store"))
        .json(data))
}
