//! The audit of staff reads ([`crate::staff_read`]): after a handler answered
//! a staff request with a success, one `staff.org_read` event per organization
//! it read as a non-member goes to the service's outbox (identity stores it in
//! the staff member's `/v1/audit/me`), before the answer leaves. A read whose
//! audit cannot be written is answered 503 instead: staff never read
//! unrecorded. Requests of anyone else pass untouched.

use crate::{error::json_error, staff_read::StaffReads};
use actix_web::{
    body::{EitherBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    http::StatusCode,
    middleware::Next,
    web, HttpMessage,
};
use event_contracts::{AuditAction, AuditRecorded, Naming};
use serde_json::json;

/// Where a service's staff-read audit events go (app data of every service
/// with a database; without it, staff reads are not let through).
#[derive(Clone)]
pub struct StaffAudit {
    pub pool: sqlx::PgPool,
    pub naming: Naming,
    pub outbox: crate::outbox::Outbox,
}

/// The middleware (innermost: it sees the matched route).
pub async fn audit(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let res = next.call(req).await?;
    // Only a staff caller's request carries reads: everyone else's answer
    // passes with one lookup.
    let reads = res.request().extensions().get::<StaffReads>().cloned();
    let sink = res.request().app_data::<web::Data<StaffAudit>>().cloned();
    let (Some(reads), Some(sink)) = (reads, sink) else {
        return Ok(res.map_into_left_body());
    };
    let orgs = reads.take();
    if orgs.is_empty() || !res.status().is_success() {
        return Ok(res.map_into_left_body());
    }
    let route = res.request().match_pattern().unwrap_or_default();
    let events = orgs.iter().map(|org| AuditRecorded {
        actor_user_id: Some(reads.actor),
        action: AuditAction::StaffOrgRead.as_str().to_owned(),
        subject: format!("org:{org}"),
        detail: json!({"org_id": org, "route": route}),
        ip: reads.ip.clone(),
    });
    match record(&sink, events).await {
        Ok(()) => Ok(res.map_into_left_body()),
        Err(e) => {
            tracing::error!(error = %e, "staff read not audited: answered 503");
            let (req, _) = res.into_parts();
            let resp = json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the read could not be audited; retry",
            );
            Ok(ServiceResponse::new(req, resp).map_into_right_body())
        }
    }
}

async fn record(
    sink: &StaffAudit,
    events: impl IntoIterator<Item = AuditRecorded>,
) -> anyhow::Result<()> {
    let mut tx = sink.pool.begin().await?;
    for e in events {
        crate::outbox::enqueue(&mut tx, &sink.naming, e).await?;
    }
    sink.outbox.commit(tx).await?;
    Ok(())
}
