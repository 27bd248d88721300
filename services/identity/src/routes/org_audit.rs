//! An organization's audit history: what its members, its keys, staff and
//! the services did in it (every service's org-scoped actions arrive as
//! `core.v1.audit.recorded` with the subject `org:<id>`). Owners and managers
//! read it, and staff (audited as a staff read); other members get 403 naming
//! the roles, anyone else 404.

use crate::{audit, state::AppState};
use actix_web::{web, web::Bytes, HttpResponse};

use event_contracts::AuditAction;
use hub_domain::{Capability, OrgId, UserId};
use serde::Deserialize;
use service_kit::{assertion::Caller, page, ApiError, ApiResult};
use time::{format_description::well_known::Rfc3339, Duration, OffsetDateTime};

/// Entries per page: default and most.
const PAGE: i64 = 100;
/// Entries read per batch of an export.
const EXPORT_BATCH: i64 = 1000;
/// The longest period one export covers.
const EXPORT_MAX_DAYS: i64 = 366;

#[derive(Deserialize)]
pub struct AuditQuery {
    actor: Option<String>,
    action: Option<String>,
    since: Option<String>,
    until: Option<String>,
    limit: Option<i64>,
    cursor: Option<String>,
}

fn time_param(name: &str, v: Option<&str>) -> ApiResult<Option<OffsetDateTime>> {
    v.filter(|v| !v.is_empty())
        .map(|v| {
            OffsetDateTime::parse(v, &Rfc3339)
                .map_err(|_| ApiError::bad_request(format!("{name} must be an RFC 3339 date-time")))
        })
        .transpose()
}

/// The filter `q` asks for, or 400 naming what is wrong.
fn filter(q: &AuditQuery) -> ApiResult<audit::OrgFilter> {
    let actor = q
        .actor
        .as_deref()
        .filter(|a| !a.is_empty())
        .map(|a| {
            a.parse::<UserId>()
                .map_err(|_| ApiError::bad_request("actor must be a user id"))
        })
        .transpose()?;
    let action = q
        .action
        .as_deref()
        .filter(|a| !a.is_empty())
        .map(|a| {
            AuditAction::ALL
                .iter()
                .find(|k| k.as_str() == a)
                .map(|k| k.as_str().to_owned())
                .ok_or_else(|| {
                    ApiError::bad_request(format!("action {a:?} is not an audit action"))
                })
        })
        .transpose()?;
    let since = time_param("since", q.since.as_deref())?;
    let until = time_param("until", q.until.as_deref())?;
    if let (Some(s), Some(u)) = (since, until) {
        if s >= u {
            return Err(ApiError::bad_request("since must be before until"));
        }
    }
    Ok(audit::OrgFilter {
        actor,
        action,
        since,
        until,
    })
}

/// The organization asked about, if the caller may read its history (owner,
/// manager, or staff audited as a staff read), and the filter asked for.
fn asked(
    caller: &Caller,
    path: web::Path<OrgId>,
    q: &AuditQuery,
) -> ApiResult<(OrgId, audit::OrgFilter)> {
    let org = path.into_inner();
    caller.require_or_staff_read(org, Capability::Admin)?;
    Ok((org, filter(q)?))
}

/// GET /v1/organizations/{id}/audit?actor=&action=&since=&until=&limit=&cursor=:
/// newest first, `limit` (1 to 100, default 100) at a time; a page with more
/// names the next in `x-next-cursor` and `Link: rel="next"`.
#[tracing::instrument(skip_all)]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    q: web::Query<AuditQuery>,
) -> ApiResult<HttpResponse> {
    let (org, f) = asked(&caller, path, &q)?;
    let limit = page::limit(q.limit, PAGE, PAGE)?;
    let before = page::seq::after(q.cursor.as_deref())?;
    let rows = audit::of_org(&state.pool, org, &f, before, limit + 1).await?;
    let keep = page::kept(&[
        ("actor", q.actor.as_deref()),
        ("action", q.action.as_deref()),
        ("since", q.since.as_deref()),
        ("until", q.until.as_deref()),
    ]);
    Ok(page::seq::respond(
        rows,
        limit,
        |e| e.id,
        |c| format!("/v1/organizations/{org}/audit?{keep}limit={limit}&cursor={c}"),
    ))
}

/// GET /v1/organizations/{id}/audit/export?since=&until=[&actor=&action=]:
/// every matching entry of the period (both required, at most 366 days
/// apart), newest first, as NDJSON (one entry a line), read and sent a
/// batch at a time.
#[tracing::instrument(skip_all)]
pub async fn export(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    q: web::Query<AuditQuery>,
) -> ApiResult<HttpResponse> {
    let (org, f) = asked(&caller, path, &q)?;
    let (Some(since), Some(until)) = (f.since, f.until) else {
        return Err(ApiError::bad_request(
            "an export needs a period: since and until",
        ));
    };
    if until - since > Duration::days(EXPORT_MAX_DAYS) {
        return Err(ApiError::bad_request(format!(
            "an export covers at most {EXPORT_MAX_DAYS} days"
        )));
    }
    // Each step reads the batch before the last entry sent (the newest
    // first); a short batch is the last.
    let start = Some((state.pool.clone(), f, None::<i64>));
    let batches = futures::stream::unfold(start, move |next| async move {
        let (pool, f, before) = next?;
        let rows = match audit::of_org(&pool, org, &f, before, EXPORT_BATCH).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::error!(error = %e, "audit export stopped");
                return Some((Err(ApiError::from(e)), None));
            }
        };
        let last = rows.last()?.id;
        let mut out = Vec::with_capacity(rows.len() * 256);
        for e in &rows {
            if serde_json::to_writer(&mut out, e).is_ok() {
                out.push(b'\n');
            }
        }
        let more = rows.len() as i64 == EXPORT_BATCH;
        Some((Ok(Bytes::from(out)), more.then_some((pool, f, Some(last)))))
    });
    let name = format!("audit-{org}-{}-{}.ndjson", since.date(), until.date());
    Ok(HttpResponse::Ok()
        .content_type("application/x-ndjson")
        .insert_header((
            "content-disposition",
            format!("attachment; filename=\"{name}\""),
        ))
        .streaming(batches))
}
