//! Billing runs: every organization's pending usage charges of a month become
//! issued invoices (one per organization and currency). A run is one row per
//! period; working it is batches of organizations, each batch one transaction
//! that locks its organizations (`SKIP LOCKED`: replicas working the same run
//! take different ones), issues their invoices with consecutive numbers and
//! commits. Whatever is interrupted is picked up by the next request for the
//! period or by [`resume`]; a period with nothing pending creates nothing.
//! An organization whose documents cannot be made (a total that would
//! overflow) is isolated: recorded in `billing_run_failures` in the batch's
//! transaction and skipped by the run, the rest of its batch invoiced; the
//! run shows it under `failed`, and starting the period's run again retries
//! it.

use super::{
    documents::{documents, issued_events},
    model::Kind,
    store,
};
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use event_contracts::AuditAction;
use hub_domain::RunId;
use serde::Deserialize;
use serde_json::json;
use service_kit::{
    assertion::{Caller, StaffCaller},
    outbox, ApiError, ApiResult,
};
use std::collections::HashMap;
use time::OffsetDateTime;

/// Work run `id` (of `period`) until nothing of it is left that no other
/// replica holds; returns how many invoices this call issued.
pub async fn work(
    state: &AppState,
    id: RunId,
    period: &str,
    actor: Option<&Caller>,
) -> anyhow::Result<usize> {
    let mut issued = 0;
    loop {
        let mut tx = state.pool.begin().await?;
        let orgs = store::lock_run_orgs(&mut tx, id, period, state.billing.run_batch).await?;
        if orgs.is_empty() {
            break;
        }
        let distributors: HashMap<_, _> = orgs.iter().copied().collect();
        let ids: Vec<_> = orgs.iter().map(|(o, _)| *o).collect();
        let charges = store::lock_run_charges(&mut tx, period, &ids).await?;
        // Each organization's documents on their own: one that cannot be
        // invoiced fails alone, not the batch (which would fail on every
        // retry).
        let (mut docs, mut failed) = (Vec::new(), Vec::new());
        for group in charges.chunk_by(|a, b| a.org_id == b.org_id) {
            let org = group[0].org_id;
            match documents(
                group.to_vec(),
                Kind::Invoice,
                |o| distributors.get(&o).copied(),
                state.billing.max_lines,
                Some(id),
                actor.map(Caller::user_id),
            ) {
                Ok(d) => docs.extend(d),
                Err(e) => {
                    tracing::warn!(run_id = %id, period, org_id = %org, error = %e,
                        "billing run: organization not invoiced");
                    failed.push((org, e.to_string()));
                }
            }
        }
        if !failed.is_empty() {
            store::fail_run_orgs(&mut tx, id, &failed).await?;
        }
        if docs.is_empty() {
            tx.commit().await?;
            continue;
        }
        let numbers = store::issue(
            &mut tx,
            &docs,
            OffsetDateTime::now_utc(),
            state.billing.payment_terms_days,
        )
        .await?;
        let events = issued_events(&docs, &numbers, actor, AuditAction::InvoiceIssued);
        outbox::enqueue_all(&mut tx, &state.naming, events).await?;
        state.outbox.commit(tx).await?;
        issued += docs.len();
    }
    store::finish_run(&state.pool, id, period).await?;
    Ok(issued)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Start {
    period: String,
}

/// POST /v1/admin/billing-runs (staff) `{period: "YYYY-MM"}`: the run with
/// its counts once worked; 201 when this request created it, 200 when the
/// period already had one (worked again: it issues only what is still
/// pending, normally nothing, and retries the organizations it failed on).
#[tracing::instrument(skip_all)]
pub async fn start(
    caller: StaffCaller,
    state: web::Data<AppState>,
    body: web::Json<Start>,
) -> ApiResult<HttpResponse> {
    if super::model::period(&body.period).is_none() {
        return Err(ApiError::bad_request("period must be a month YYYY-MM"));
    }
    let period = body.period.as_str();
    let (id, created) = store::start_run(&state.pool, period, caller.user_id()).await?;
    if !created {
        store::clear_run_failures(&state.pool, id).await?;
    }
    if created {
        let mut tx = state.pool.begin().await?;
        outbox::audit_on(
            &mut tx,
            &state.naming,
            &caller,
            AuditAction::BillingRunStarted,
            format!("billing_run:{id}"),
            json!({"run_id": id, "period": period}),
        )
        .await?;
        state.outbox.commit(tx).await?;
    }
    let issued = work(&state, id, period, Some(&caller)).await?;
    tracing::info!(%id, period, issued, "billing run worked");
    let run = store::run(&state.pool, id)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(if created {
        HttpResponse::Created().json(run)
    } else {
        HttpResponse::Ok().json(run)
    })
}

/// GET /v1/admin/billing-runs/{run_id} (staff).
#[tracing::instrument(skip_all, fields(run_id = %path))]
pub async fn get(
    _caller: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<RunId>,
) -> ApiResult<HttpResponse> {
    let run = store::run(&state.pool, path.into_inner())
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(HttpResponse::Ok().json(run))
}

/// Work every run left running (a replica stopped mid-run), as the system.
pub async fn resume(state: &AppState) -> anyhow::Result<u64> {
    let mut issued = 0;
    for (id, period) in store::running_runs(&state.pool).await? {
        issued += work(state, id, &period, None).await? as u64;
    }
    Ok(issued)
}
