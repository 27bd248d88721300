//! AI-token usage for the organization's finance readers: the token ledger
//! page by page, and a usage summary grouped by member, model or day.
//!
//! - `GET /v1/organizations/{id}/tokens/transactions?limit=&cursor=`: owner,
//!   manager or finance (or staff), newest first, 100 by default and at
//!   most, paged by the ledger's sequence (`x-next-cursor`, `Link`).
//! - `GET /v1/organizations/{id}/tokens/usage?by=member|model|day&since=&until=`:
//!   the spends of a period (default the last 30 days, at most 366 days),
//!   grouped.
//!
//! The ledger stores each row's delta, kind, reason, the member it is
//! attributed to (`actor_user_id`) and its time; it stores no model, product
//! or conversation, so those are null in every entry (and `by=model` has a
//! single group whose model is null).

use crate::state::AppState;
use actix_web::{web, HttpResponse};
use hub_domain::{Capability, OrgId, Role};
use serde::{Deserialize, Serialize};
use serde_json::json;
use service_kit::{assertion::Caller, page, ApiError, ApiResult};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

/// Token transactions per page: by default and at most.
pub const PAGE_MAX: i64 = 100;
/// The longest usage period.
pub const PERIOD_MAX_DAYS: i64 = 366;
/// The default usage period.
pub const PERIOD_DEFAULT_DAYS: i64 = 30;

const READERS: [Role; 3] = [Role::Owner, Role::Manager, Role::Finance];

/// Owner, manager or finance (403 naming them), staff, or 404 for a
/// non-member.
pub fn authorize(caller: &Caller, org: OrgId) -> ApiResult<()> {
    if caller.identity.staff {
        return Ok(());
    }
    let role = caller.require(org, Capability::Read)?;
    if READERS.contains(&role) {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "insufficient role: requires owner or manager or finance",
        ))
    }
}

/// One row of the token ledger.
#[derive(Serialize)]
pub struct TokenTransaction {
    pub id: i64,
    pub delta: i64,
    pub balance_after: i64,
    pub kind: String,
    pub reason: String,
    pub member: Option<Uuid>,
    /// Not stored by the ledger: always null.
    pub model: Option<String>,
    /// Not stored by the ledger: always null.
    pub product: Option<String>,
    /// Not stored by the ledger: always null.
    pub conversation: Option<Uuid>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// GET /v1/organizations/{id}/tokens/transactions?limit=&cursor=
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn transactions(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    q: web::Query<page::Query>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    authorize(&caller, org_id)?;
    let limit = page::limit(q.limit, PAGE_MAX, PAGE_MAX)?;
    let before = page::seq::after(q.cursor.as_deref())?;
    let rows = sqlx::query!(
        "SELECT id, delta, balance_after, kind, reason, actor_user_id, created_at \
         FROM token_transactions WHERE org_id = $1 AND ($2::bigint IS NULL OR id < $2) \
         ORDER BY id DESC LIMIT $3",
        org_id as OrgId,
        before,
        limit + 1,
    )
    .fetch_all(&state.pool)
    .await?;
    if rows.is_empty() {
        crate::orgs::store::require(&mut *state.pool.acquire().await?, org_id).await?;
    }
    let rows: Vec<TokenTransaction> = rows
        .into_iter()
        .map(|r| TokenTransaction {
            id: r.id,
            delta: r.delta,
            balance_after: r.balance_after,
            kind: r.kind,
            reason: r.reason,
            member: r.actor_user_id.filter(|_| r.delta < 0),
            model: None,
            product: None,
            conversation: None,
            created_at: r.created_at,
        })
        .collect();
    Ok(page::seq::respond(
        rows,
        limit,
        |t| t.id,
        |c| format!("/v1/organizations/{org_id}/tokens/transactions?limit={limit}&cursor={c}"),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageQuery {
    by: Option<String>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    since: Option<OffsetDateTime>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    until: Option<OffsetDateTime>,
}

/// GET /v1/organizations/{id}/tokens/usage?by=member|model|day&since=&until=:
/// `{org_id, by, since, until, total, groups: [{member|model|day, tokens, spends}]}`,
/// spends only (grants are not usage), largest first (by day: oldest first).
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn usage(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    q: web::Query<UsageQuery>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    authorize(&caller, org_id)?;
    let q = q.into_inner();
    let by = q.by.as_deref().unwrap_or("member");
    if !matches!(by, "member" | "model" | "day") {
        return Err(ApiError::bad_request("by must be member, model or day"));
    }
    let until = q.until.unwrap_or_else(OffsetDateTime::now_utc);
    let since = q
        .since
        .unwrap_or(until - Duration::days(PERIOD_DEFAULT_DAYS));
    if since >= until || until - since > Duration::days(PERIOD_MAX_DAYS) {
        return Err(ApiError::BadRequest(format!(
            "since must be before until, at most {PERIOD_MAX_DAYS} days apart"
        )));
    }
    crate::orgs::store::require(&mut *state.pool.acquire().await?, org_id).await?;
    let rows = sqlx::query!(
        r#"SELECT CASE WHEN $4 = 'member' THEN actor_user_id::text
                       WHEN $4 = 'day' THEN to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')
                  END AS key,
                  SUM(-delta)::bigint AS "tokens!", COUNT(*) AS "spends!"
           FROM token_transactions
           WHERE org_id = $1 AND kind = 'spend' AND created_at >= $2 AND created_at < $3
           GROUP BY 1 ORDER BY CASE WHEN $4 = 'day' THEN 0 ELSE -SUM(-delta) END, 1"#,
        org_id as OrgId,
        since,
        until,
        by,
    )
    .fetch_all(&state.pool)
    .await?;
    let total: i64 = rows.iter().map(|r| r.tokens).sum();
    let groups: Vec<_> = rows
        .into_iter()
        .map(|r| json!({by: r.key, "tokens": r.tokens, "spends": r.spends}))
        .collect();
    let fmt = |t: OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default()
    };
    Ok(HttpResponse::Ok().json(json!({
        "org_id": org_id,
        "by": by,
        "since": fmt(since),
        "until": fmt(until),
        "total": total,
        "groups": groups,
    })))
}
