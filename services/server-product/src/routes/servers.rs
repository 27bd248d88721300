//! Ordering and operating servers (product host).
//!
//! Ordering, power, termination and credential rotation need the manager
//! role (owner or manager, sessions and API keys alike); reads any member,
//! credentials owner, manager or developer. A server of an organization the
//! caller is not a member of is a 404, never a 403.

use crate::{
    lifecycle::{self, Action},
    orders::{Order, Placed},
    provider::{Credentials, Power},
    servers::{self, store, Row, Server, Status},
    skus::{self, Fulfilment},
    state::AppState,
    usage,
};
use actix_web::{web, HttpResponse};
use event_contracts::internal::KycStatusOnly;
use event_contracts::{SERVER_CREATED, SERVER_TERMINATED};
use hub_domain::{Capability, KycStatus, OrgId, ServerId};
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
    // This replica's bucket of the organization (crate::rate): members only,
    // so an outsider cannot spend an organization's orders.
    state.order_rate.take(org_id).map_err(|wait| {
        ApiError::QuotaExceeded(format!(
            "too many orders for this organization: try again in {wait} s"
        ))
    })?;
    let sku = skus::orderable(&state.pool, sku_id)
        .await?
        .ok_or_else(|| ApiError::bad_request("sku_id is not a SKU of the catalog"))?;
    if state.require_kyc_for_paid && sku.monthly_price_minor.0 > 0 {
        require_kyc_verified(state, org_id).await?;
    }
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
        id: ServerId::new(),
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
        job: row.fulfilment == Fulfilment::Api,
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
        Placed::CapReached => return Err(cap_reached(state.max_servers_per_org)),
    }
    state.outbox.kick();
    Ok(row)
}

/// `orders.require_kyc_for_paid`: the organization's KYC status, asked of kyc
/// now (never a copy that could be stale), must be `verified`; 422 otherwise,
/// 503 when kyc does not answer (fail closed).
async fn require_kyc_verified(state: &AppState, org_id: OrgId) -> ApiResult<()> {
    let path = format!("/internal/v1/organizations/{org_id}/kyc-status");
    let unavailable = |e: &dyn std::fmt::Display| {
        tracing::warn!(error = %e, "kyc status unavailable for a paid order");
        ApiError::Unavailable("KYC status unavailable, try again".into())
    };
    let resp = state
        .kyc
        .send(reqwest::Method::GET, &path, None, None)
        .await
        .map_err(|e| unavailable(&e))?;
    if !resp.status().is_success() {
        return Err(unavailable(&format!("kyc answered {}", resp.status())));
    }
    let current: KycStatusOnly = resp.json().await.map_err(|e| unavailable(&e))?;
    if current.kyc_status != KycStatus::Verified {
        return Err(ApiError::Unprocessable(format!(
            "this SKU needs a verified organization (KYC status: {})",
            current.kyc_status.as_str()
        )));
    }
    Ok(())
}

/// The 409 of an organization at its server cap.
pub fn cap_reached(cap: i64) -> ApiError {
    ApiError::Conflict(format!(
        "the organization has {cap} servers, its limit: terminate one first"
    ))
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
    // The kit's cursor names the row by its plain id.
    let after = page::after(q.cursor.as_deref())?.map(|(at, id)| (at, ServerId::from_uuid(id)));
    let rows = store::page_of_org(&state.pool, q.org_id, after, limit + 1).await?;
    let rows: Vec<(Server, (OffsetDateTime, Uuid))> = rows
        .iter()
        .map(|r| (r.server(), (r.created_at, r.id.as_uuid())))
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
    /// Once active (also stopped or suspended): how to reach the server
    /// (sealed at rest, each read audited), for the roles that may see them.
    credentials: Option<Credentials>,
    /// Why `credentials` is null although the server has them: the caller's
    /// role may not see them. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    credentials_withheld: Option<String>,
}

/// Whether a server in `status` shows its credentials.
fn reachable(status: Status) -> bool {
    matches!(status, Status::Active | Status::Stopped | Status::Suspended)
}

/// GET /v1/servers/{id} (any member of its organization): the server; with
/// its access credentials once it has them, for owner, manager and developer
/// only (finance and visitor, sessions and keys alike, get `credentials:
/// null` and `credentials_withheld` naming the roles). Every read of
/// credentials is an audit event; nothing is unsealed for the others.
#[tracing::instrument(skip_all, fields(server_id = %path))]
pub async fn detail(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<ServerId>,
) -> ApiResult<HttpResponse> {
    let row =
        servers::authorized(&state.pool, &caller, path.into_inner(), Capability::Read).await?;
    let mut withheld = None;
    let credentials = match &row.credentials {
        Some(_) if reachable(row.status) && !may_see_credentials(&caller, row.org_id) => {
            withheld = Some(Capability::ServerCredentials.denied_message());
            None
        }
        Some(sealed) if reachable(row.status) => {
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
                credentials_audit(&caller, row.id),
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
        credentials_withheld: withheld,
    }))
}

/// Whether the caller's role in `org_id` may see server credentials.
fn may_see_credentials(caller: &Caller, org_id: OrgId) -> bool {
    caller
        .identity
        .role_in(org_id)
        .is_some_and(|r| r.can(Capability::ServerCredentials))
}

/// The audit detail of a credentials read or rotation: which server and with
/// which credential (the actor and the time are the entry's own); never the
/// credentials.
fn credentials_audit(caller: &Caller, server_id: ServerId) -> serde_json::Value {
    json!({
        "server_id": server_id,
        "credential": caller.credential.kind.as_str(),
        "credential_id": caller.credential.id,
    })
}

/// New credentials for `row` from its provider, sealed and stored in `tx`
/// (which holds the server's row lock): rotation and transfer. `None` for a
/// server the provider does not run (manual fulfilment). A provider refusal
/// is a 502 and the caller's transaction rolls back; a failure after the
/// provider's answer leaves the old sealed credentials stored, mended by
/// rotating again (rotation never needs the old password).
pub async fn rotate_at_provider(
    state: &AppState,
    tx: &mut sqlx::PgConnection,
    row: &Row,
) -> ApiResult<Option<Credentials>> {
    let Some(reference) = row.provider_ref.as_deref() else {
        return Ok(None);
    };
    let fresh = state.provider.rotate(reference).await.map_err(|e| {
        tracing::warn!(error = ?e, server_id = %row.id, "provider credential rotation failed");
        ApiError::BadGateway("the provider refused to rotate the credentials".into())
    })?;
    let sealed = state
        .sealer
        .seal_json(&fresh, &servers::credentials_aad(row.id))?;
    store::set_credentials(tx, row.id, sealed).await?;
    Ok(Some(fresh))
}

/// POST /v1/servers/{id}/credentials/rotate (manager): a new root password
/// at the provider, stored sealed and answered once in the server's detail;
/// the old password stops working. Active, stopped or suspended API-backed
/// servers; a manual server's credentials are staff's (409).
#[tracing::instrument(skip_all, fields(server_id = %path))]
pub async fn rotate(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<ServerId>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let row = servers::authorized(&state.pool, &caller, id, Capability::OperateServers).await?;
    let mut tx = state.pool.begin().await?;
    // The conditional UPDATE takes the row lock: two rotations of one
    // server run one after the other.
    let moved = lifecycle::transition(
        &mut tx,
        row.org_id,
        id,
        Action::RotateCredentials,
        state.clock.now(),
    )
    .await??;
    if moved.credentials.is_none() || moved.provider_ref.is_none() {
        return Err(ApiError::Conflict(
            "this server's credentials are set by staff (manual fulfilment): ask support to rotate them"
                .into(),
        ));
    }
    let fresh = rotate_at_provider(&state, &mut tx, &moved).await?;
    service_kit::outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        event_contracts::AuditAction::ServerCredentialsRotated,
        row.org_id,
        credentials_audit(&caller, id),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(Detail {
        server: moved.server(),
        credentials: fresh,
        credentials_withheld: None,
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
    let id = path.into_inner();
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
pub async fn terminate_server(state: &AppState, caller: &Caller, id: ServerId) -> ApiResult<Row> {
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
    let row = terminate_server(&state, &caller, path.into_inner()).await?;
    Ok(HttpResponse::Ok().json(row.server()))
}
