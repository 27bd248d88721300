//! The service contract: the uniform lifecycle surface every product exposes
//! under `/v1/service-contract/` (proto-docs/service-contract.md). For this
//! product a service is a server; every transition is the server lifecycle's
//! ([`crate::lifecycle`]), enforced in the transaction.

use super::servers::{cap_reached, order, rotate_at_provider, terminate_server};
use crate::{
    lifecycle::{self, Action},
    servers::{self, store, Row, Status},
    skus,
    state::AppState,
    usage,
};
use actix_web::{web, HttpResponse};
use hub_domain::{Capability, OrgId, ServerId};
use serde::{Deserialize, Serialize};
use serde_json::json;
use service_kit::{assertion::Caller, ApiError, ApiResult, OnConstraint};
use time::OffsetDateTime;

/// A service in the contract's shape.
#[derive(Serialize)]
pub struct Service {
    id: ServerId,
    org_id: OrgId,
    product: &'static str,
    plan: String,
    name: String,
    state: Status,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    activated_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    terminated_at: Option<OffsetDateTime>,
}

impl From<&Row> for Service {
    fn from(r: &Row) -> Service {
        Service {
            id: r.id,
            org_id: r.org_id,
            product: "server",
            plan: r.sku_id.clone(),
            name: r.hostname.clone(),
            state: r.status,
            created_at: r.created_at,
            activated_at: r.activated_at,
            terminated_at: r.terminated_at,
        }
    }
}

#[derive(Deserialize)]
pub struct OrgQuery {
    org_id: OrgId,
}

/// GET /v1/service-contract/services?org_id= (any member).
#[tracing::instrument(skip_all)]
pub async fn services(
    state: web::Data<AppState>,
    caller: Caller,
    q: web::Query<OrgQuery>,
) -> ApiResult<HttpResponse> {
    caller.require(q.org_id, Capability::Read)?;
    let rows = store::latest_of_org(&state.pool, q.org_id).await?;
    Ok(HttpResponse::Ok().json(rows.iter().map(Service::from).collect::<Vec<_>>()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provision {
    org_id: OrgId,
    plan: String,
    name: String,
}

/// POST /v1/service-contract/services (manager): provision; 201.
#[tracing::instrument(skip_all)]
pub async fn provision(
    state: web::Data<AppState>,
    caller: Caller,
    body: web::Json<Provision>,
) -> ApiResult<HttpResponse> {
    let row = order(&state, &caller, body.org_id, &body.plan, &body.name).await?;
    Ok(HttpResponse::Created().json(Service::from(&row)))
}

async fn simple(
    state: &AppState,
    caller: &Caller,
    id: ServerId,
    action: Action,
    audited: event_contracts::AuditAction,
) -> ApiResult<HttpResponse> {
    let row = servers::authorized(&state.pool, caller, id, Capability::OperateServers).await?;
    let mut tx = state.pool.begin().await?;
    let moved = lifecycle::transition(&mut tx, row.org_id, id, action, state.clock.now()).await??;
    service_kit::outbox::audit(
        &mut tx,
        &state.naming,
        caller,
        audited,
        row.org_id,
        json!({"service_id": id, "from": row.status, "to": moved.status}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(Service::from(&moved)))
}

/// POST /v1/service-contract/services/{id}/activate (manager): suspended -> active.
pub async fn activate(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<ServerId>,
) -> ApiResult<HttpResponse> {
    simple(
        &state,
        &caller,
        path.into_inner(),
        Action::Activate,
        event_contracts::AuditAction::ServiceActivated,
    )
    .await
}

/// POST /v1/service-contract/services/{id}/suspend (manager): active|stopped -> suspended.
pub async fn suspend(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<ServerId>,
) -> ApiResult<HttpResponse> {
    simple(
        &state,
        &caller,
        path.into_inner(),
        Action::Suspend,
        event_contracts::AuditAction::ServiceSuspended,
    )
    .await
}

/// POST /v1/service-contract/services/{id}/terminate (manager).
pub async fn terminate(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<ServerId>,
) -> ApiResult<HttpResponse> {
    let row = terminate_server(&state, &caller, path.into_inner()).await?;
    Ok(HttpResponse::Ok().json(Service::from(&row)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resize {
    plan: String,
}

/// POST /v1/service-contract/services/{id}/resize (manager) `{plan}`: another
/// plan of the same fulfilment kind; usage splits at the moment of resizing.
#[tracing::instrument(skip_all, fields(service_id = %path))]
pub async fn resize(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<ServerId>,
    body: web::Json<Resize>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let row = servers::authorized(&state.pool, &caller, id, Capability::OperateServers).await?;
    let plan = skus::listed_fulfilment(&state.pool, &body.plan).await?;
    match plan {
        None => return Err(ApiError::bad_request("plan is not a SKU of the catalog")),
        Some(f) if f != row.fulfilment => {
            return Err(ApiError::bad_request(
                "plan must be fulfilled the same way as the current one",
            ))
        }
        _ if body.plan == row.sku_id => {
            return Err(ApiError::bad_request("the service is already on this plan"))
        }
        _ => {}
    }
    let now = state.clock.now();
    let mut tx = state.pool.begin().await?;
    lifecycle::transition(&mut tx, row.org_id, id, Action::Resize, now).await??;
    // The period closing is on the old plan (it names its SKU).
    usage::close(&mut tx, &state.naming, &row, now).await?;
    let resized = store::set_sku(&mut tx, id, &body.plan).await?;
    servers::open_usage(&mut tx, &resized, now).await?;
    service_kit::outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        event_contracts::AuditAction::ServiceResized,
        row.org_id,
        json!({"service_id": id, "from": row.sku_id, "to": body.plan}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(Service::from(&resized)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transfer {
    to_org_id: OrgId,
}

/// POST /v1/service-contract/services/{id}/transfer (owner of both
/// organizations) `{to_org_id}`: the service keeps its id; the old
/// organization loses access at once (its credentials too: rotated at the
/// provider in the transfer); usage splits at the moment of transfer.
#[tracing::instrument(skip_all, fields(service_id = %path))]
pub async fn transfer(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<ServerId>,
    body: web::Json<Transfer>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let row = servers::authorized(&state.pool, &caller, id, Capability::TransferServices).await?;
    caller.require(body.to_org_id, Capability::TransferServices)?;
    if body.to_org_id == row.org_id {
        return Err(ApiError::bad_request(
            "to_org_id is the service's organization already",
        ));
    }
    let now = state.clock.now();
    let mut tx = state.pool.begin().await?;
    lifecycle::transition(&mut tx, row.org_id, id, Action::Transfer, now).await??;
    let moved = store::set_org(&mut tx, id, body.to_org_id, now)
        .await
        .on_constraint(servers::HOSTNAME_PER_ORG, || {
            ApiError::Conflict(format!(
                "hostname {} is already used by a server of the receiving organization",
                row.hostname
            ))
        })?;
    // The receiving organization's cap: its count (the trigger's, under its
    // row lock) includes this server now.
    if state.max_servers_per_org > 0
        && store::live_servers(&mut tx, &[body.to_org_id])
            .await?
            .first()
            .is_some_and(|(_, live)| *live > state.max_servers_per_org)
    {
        return Err(cap_reached(state.max_servers_per_org));
    }
    if store::has_open_usage(&mut tx, id).await? {
        // The period closing is the giving organization's (it names it).
        usage::close(&mut tx, &state.naming, &moved, now).await?;
        servers::open_usage(&mut tx, &moved, now).await?;
    }
    // The giving organization's members may have read the credentials: the
    // provider sets a new password before the receiving one gets the server
    // (a refusal is a 502 and nothing moves). A server without credentials
    // yet gets fresh ones when it becomes active; a manual server's are
    // staff's to change.
    let rotated = match moved.credentials {
        Some(_) => rotate_at_provider(&state, &mut tx, &moved).await?.is_some(),
        None => false,
    };
    for org in [row.org_id, body.to_org_id] {
        service_kit::outbox::audit(
            &mut tx,
            &state.naming,
            &caller,
            event_contracts::AuditAction::ServiceTransferred,
            org,
            json!({"service_id": id, "from_org_id": row.org_id, "to_org_id": body.to_org_id,
                   "credentials_rotated": rotated}),
        )
        .await?;
    }
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(Service::from(&moved)))
}

#[derive(Serialize)]
struct Period {
    plan: String,
    #[serde(with = "time::serde::rfc3339")]
    started_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    ended_at: Option<OffsetDateTime>,
    seconds: i64,
}

#[derive(Serialize)]
struct Usage {
    service_id: ServerId,
    periods: Vec<Period>,
    total_seconds: i64,
}

async fn usage_of(state: &AppState, org: OrgId) -> ApiResult<Vec<Usage>> {
    let periods = store::usage_of_org(&state.pool, org, state.clock.now()).await?;
    let mut out: Vec<Usage> = Vec::new();
    for p in periods {
        let (server_id, p) = (
            p.server_id,
            Period {
                plan: p.plan,
                started_at: p.started_at,
                ended_at: p.ended_at,
                seconds: p.seconds,
            },
        );
        match out.last_mut() {
            Some(u) if u.service_id == server_id => {
                u.total_seconds += p.seconds;
                u.periods.push(p);
            }
            _ => out.push(Usage {
                service_id: server_id,
                total_seconds: p.seconds,
                periods: vec![p],
            }),
        }
    }
    Ok(out)
}

/// GET /v1/service-contract/usage?org_id= (any member): usage periods and
/// totals per service, the open period counted up to now.
pub async fn usage(
    state: web::Data<AppState>,
    caller: Caller,
    q: web::Query<OrgQuery>,
) -> ApiResult<HttpResponse> {
    caller.require(q.org_id, Capability::Read)?;
    Ok(HttpResponse::Ok().json(usage_of(&state, q.org_id).await?))
}

/// GET /v1/service-contract/export?org_id= (owner or manager): everything of
/// the organization's services, as JSON: services, usage and events.
pub async fn export(
    state: web::Data<AppState>,
    caller: Caller,
    q: web::Query<OrgQuery>,
) -> ApiResult<HttpResponse> {
    caller.require(q.org_id, Capability::Admin)?;
    let rows = store::all_of_org(&state.pool, q.org_id).await?;
    let events = store::events_of_org(&state.pool, q.org_id).await?;
    Ok(HttpResponse::Ok().json(json!({
        "org_id": q.org_id,
        "exported_at": state.clock.now().format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
        "services": rows.iter().map(Row::server).collect::<Vec<_>>(),
        "usage": usage_of(&state, q.org_id).await?,
        "events": events,
    })))
}
