//! Ordering and operating servers (product host).
//!
//! Ordering, power and termination need the manager role (owner or manager,
//! sessions and API keys alike); reads any member. A server of an organization
//! the caller is not a member of is a 404, never a 403.

use crate::{
    lifecycle::{self, Action},
    orders::{Order, Placed},
    provider::{Credentials, Power},
    servers::{self, store, Row, Server, Status},
    skus,
    state::AppState,
    usage,
};
use actix_web::{web, HttpResponse};
use event_contracts::{SERVER_CREATED, SERVER_TERMINATED};
use hub_domain::{Capability, OrgId, ServerId};
use serde::{Deserialize, Serialize};
use serde_json::json;
use service_kit::{assertion::Caller, outbox, page, ApiError, ApiResult};
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrderBody {
    org_id: OrgId,
    sku_id: String,
    hostname: String,
}

/// Order a server: the one implementation behind `POST /v1/servers` and the
/// service contract's provision.
pub async fn order(
    state: &AppState,
    caller: &Caller,
    org_id: OrgId,
    sku_id: &str,
    hostname: &str,
) -> ApiResult<Row> {
    caller.require(org_id, Capability::OperateServers)?;
    let hostname = servers::hostname(hostname)?;
    let sku = skus::orderable(&state.pool, sku_id)
        .await?
        .ok_or_else(|| ApiError::bad_request("sku_id is not a SKU of the catalog"))?;
    // As Postgres keeps it (microseconds): the row answered and the event
    // are the row stored.
    let now = servers::stored_time(state.clock.now());
    // A manual SKU waits for staff within its SLA; an API one is provisioned.
    let (status, due_at) = match sku.sla_hours {
        Some(h) => (
            Status::PendingFulfilment,
            Some(now + time::Duration::hours(i64::from(h))),
        ),
        None => (Status::Provisioning, None),
    };
    let row = Row {
        id: Uuid::now_v7(),
        org_id,
        sku_id: sku_id.to_owned(),
        hostname: hostname.clone(),
        status,
        fulfilment: sku.fulfilment,
        provider_ref: None,
        credentials: None,
        due_at,
        failure: None,
        created_at: now,
        updated_at: now,
        activated_at: None,
        terminated_at: None,
    };
    let order = Order {
        job: row.fulfilment == "api",
        created_by: caller.user_id(),
        created: servers::event(&state.naming, &state.clock, SERVER_CREATED, &row)?,
        audit: outbox::Message::event(
            &state.naming,
            outbox::audit_event(
                caller,
                event_contracts::AuditAction::ServerOrdered,
                org_id,
                json!({"server_id": row.id, "sku_id": sku_id, "hostname": hostname}),
            ),
        )?,
        row,
    };
    let row = order.row.clone();
    // Stored by group commit with the orders waiting meanwhile (crate::orders).
    match state.orders.place(order).await? {
        Placed::Stored => {}
        Placed::HostnameTaken => {
            return Err(ApiError::Conflict(format!(
                "hostname {hostname} is already used by a server of this organization"
            )))
        }
    }
    state.outbox.kick();
    Ok(row)
}

/// POST /v1/servers (manager): 201 with the server.
#[tracing::instrument(skip_all)]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    body: web::Json<OrderBody>,
) -> ApiResult<HttpResponse> {
    let row = order(&state, &caller, body.org_id, &body.sku_id, &body.hostname).await?;
    Ok(HttpResponse::Created().json(row.server()))
}

#[derive(Deserialize)]
pub struct ListQuery {
    org_id: OrgId,
    limit: Option<i64>,
    cursor: Option<String>,
}

/// GET /v1/servers?org_id=&limit=&cursor= (any member): newest first, a page
/// at a time; `x-next-cursor` (and a `Link: rel="next"`) when there is more.
#[tracing::instrument(skip_all)]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    query: web::Query<ListQuery>,
) -> ApiResult<HttpResponse> {
    let q = query.into_inner();
    caller.require(q.org_id, Capability::Read)?;
    let limit = page::limit(q.limit, state.pages.default_limit, state.pages.max_limit)?;
    let after = page::after(q.cursor.as_deref())?;
    let rows = store::page_of_org(&state.pool, q.org_id, after, limit + 1).await?;
    let rows: Vec<(Server, (OffsetDateTime, Uuid))> = rows
        .iter()
        .map(|r| (r.server(), (r.created_at, r.id)))
        .collect();
    let org = q.org_id;
    let mut resp = HttpResponse::Ok();
    let page = page::cut(
        rows,
        limit,
        &mut resp,
        |r| r.1,
        |c| format!("/v1/servers?org_id={org}&limit={limit}&cursor={c}"),
    );
    Ok(resp.json(page.into_iter().map(|r| r.0).collect::<Vec<Server>>()))
}

#[derive(Serialize)]
struct Detail {
    #[serde(flatten)]
    server: Server,
    /// Once active: how to reach the server (sealed at rest, read audited).
    credentials: Option<Credentials>,
}

/// GET /v1/servers/{id} (any member of its organization): the server with
/// its access credentials once it has them; every read of credentials is an
/// audit event.
#[tracing::instrument(skip_all, fields(server_id = %path))]
pub async fn detail(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<ServerId>,
) -> ApiResult<HttpResponse> {
    let row = servers::authorized(
        &state.pool,
        &caller,
        path.into_inner().as_uuid(),
        Capability::Read,
    )
    .await?;
    let reachable = matches!(
        row.status,
        Status::Active | Status::Stopped | Status::Suspended
    );
    let credentials = match &row.credentials {
        Some(sealed) if reachable => {
            let credentials = state
                .sealer
                .open_json(sealed, &servers::credentials_aad(row.id))?;
            // One autocommitted statement: the read is recorded before it is answered.
            service_kit::outbox::audit(
                &mut *state.pool.acquire().await?,
                &state.naming,
                &caller,
                event_contracts::AuditAction::ServerCredentialsRead,
                row.org_id,
                json!({"server_id": row.id}),
            )
            .await?;
            state.outbox.kick();
            Some(credentials)
        }
        _ => None,
    };
    Ok(HttpResponse::Ok().json(Detail {
        server: row.server(),
        credentials,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerBody {
    action: String,
}

/// POST /v1/servers/{id}/power (manager): `reboot` (active), `stop` (active),
/// `start` (stopped); synchronous at the provider for API-backed servers.
#[tracing::instrument(skip_all, fields(server_id = %path))]
pub async fn power(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<ServerId>,
    body: web::Json<PowerBody>,
) -> ApiResult<HttpResponse> {
    let power = Power::parse(&body.action)
        .ok_or_else(|| ApiError::bad_request("action must be reboot, stop or start"))?;
    let action = match power {
        Power::Reboot => Action::Reboot,
        Power::Stop => Action::Stop,
        Power::Start => Action::Start,
    };
    let id = path.into_inner().as_uuid();
    let row = servers::authorized(&state.pool, &caller, id, Capability::OperateServers).await?;
    let mut tx = state.pool.begin().await?;
    let moved = lifecycle::transition(&mut tx, row.org_id, id, action, state.clock.now()).await??;
    if let Some(reference) = moved.provider_ref.as_deref() {
        // Synchronous: the answer says what the provider did.
        state.provider.power(reference, power).await.map_err(|e| {
            tracing::warn!(error = ?e, "provider power call failed");
            ApiError::BadGateway("the provider refused the power action".into())
        })?;
    }
    service_kit::outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        event_contracts::AuditAction::ServerPower,
        row.org_id,
        json!({"server_id": id, "action": power.as_str()}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(moved.server()))
}

/// Terminate: the one implementation behind `POST /v1/servers/{id}/terminate`
/// and the service contract's terminate. Usage ends in the same transaction.
pub async fn terminate_server(state: &AppState, caller: &Caller, id: Uuid) -> ApiResult<Row> {
    let row = servers::authorized(&state.pool, caller, id, Capability::OperateServers).await?;
    let now = state.clock.now();
    let mut tx = state.pool.begin().await?;
    let done = lifecycle::transition(&mut tx, row.org_id, id, Action::Terminate, now).await??;
    usage::close(&mut tx, &state.naming, &done, now).await?;
    store::drop_job(&mut tx, id).await?;
    servers::emit(
        &mut tx,
        &state.naming,
        &state.clock,
        SERVER_TERMINATED,
        &done,
    )
    .await?;
    service_kit::outbox::audit(
        &mut tx,
        &state.naming,
        caller,
        event_contracts::AuditAction::ServerTerminated,
        row.org_id,
        json!({"server_id": id}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    if let Some(reference) = done.provider_ref.as_deref() {
        if let Err(e) = state.provider.delete(reference).await {
            tracing::warn!(error = ?e, server_id = %id, "provider delete failed after termination");
        }
    }
    Ok(done)
}

/// POST /v1/servers/{id}/terminate (manager): permanent; usage ends at once.
#[tracing::instrument(skip_all, fields(server_id = %path))]
pub async fn terminate(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<ServerId>,
) -> ApiResult<HttpResponse> {
    let row = terminate_server(&state, &caller, path.into_inner().as_uuid()).await?;
    Ok(HttpResponse::Ok().json(row.server()))
}
