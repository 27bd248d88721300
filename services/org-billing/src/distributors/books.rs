//! What an entity's staff and observers read of its organizations' business:
//! the organizations routed to it, their invoices and payments, and the
//! monthly report with the entity's share.

use super::{authorize_read, store};
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use hub_domain::{Currency, DistributorId, MinorUnits};
use serde::{Deserialize, Serialize};
use serde_json::json;
use service_kit::{assertion::Caller, page, ApiError, ApiResult};
use time::Date;

/// Organizations per page: by default, at most.
pub const PAGE_DEFAULT: i64 = 50;
pub const PAGE_MAX: i64 = 100;

/// GET /v1/distributors/{id}/organizations?limit=&cursor= (staff, or an
/// observer of the entity): the organizations routed to it, newest first, a
/// page at a time; `x-next-cursor` (and `Link: rel="next"`) when there is more.
#[tracing::instrument(skip_all, fields(distributor_id = %path))]
pub async fn organizations(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<DistributorId>,
    query: web::Query<page::Query>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let q = query.into_inner();
    let limit = page::limit(q.limit, PAGE_DEFAULT, PAGE_MAX)?;
    let after = page::after(q.cursor.as_deref())?;
    authorize_read(&state, &caller, id).await?;
    let mut conn = state.pool.acquire().await?;
    let rows = store::organizations(&mut conn, id, after, limit + 1).await?;
    Ok(page::respond(
        rows,
        limit,
        |o| (o.created_at, o.id.as_uuid()),
        |c| format!("/v1/distributors/{id}/organizations?limit={limit}&cursor={c}"),
    ))
}

/// GET /v1/distributors/{id}/invoices?kind=&status=&limit=&cursor= (staff,
/// the entity's observers): the documents of its organizations.
#[tracing::instrument(skip_all, fields(distributor_id = %path))]
pub async fn invoices(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<DistributorId>,
    q: web::Query<crate::billing::documents::ListQuery>,
) -> ApiResult<actix_web::HttpResponse> {
    let id = path.into_inner();
    authorize_read(&state, &caller, id).await?;
    let base = format!("/v1/distributors/{id}/invoices");
    crate::billing::documents::page_of(
        &state,
        crate::billing::store::Owner::Distributor(id),
        &q,
        &base,
    )
    .await
}

/// GET /v1/distributors/{id}/payments?limit=&cursor= (staff, the entity's
/// observers): the payments of its organizations.
#[tracing::instrument(skip_all, fields(distributor_id = %path))]
pub async fn payments(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<DistributorId>,
    q: web::Query<page::Query>,
) -> ApiResult<actix_web::HttpResponse> {
    let id = path.into_inner();
    authorize_read(&state, &caller, id).await?;
    let base = format!("/v1/distributors/{id}/payments");
    crate::billing::payments::page_of(
        &state,
        crate::billing::store::Owner::Distributor(id),
        &q,
        &base,
    )
    .await
}

#[derive(Deserialize)]
pub struct ReportQuery {
    month: String,
}

/// `YYYY-MM` ([`crate::billing::model::period`]) to the first day of that month.
fn parse_month(s: &str) -> ApiResult<Date> {
    crate::billing::model::period(s)
        .and_then(|(year, month)| Date::from_calendar_date(year, month, 1).ok())
        .ok_or_else(|| ApiError::bad_request("month must be YYYY-MM (e.g. 2026-11)"))
}

#[derive(Serialize)]
struct CurrencyReport {
    currency: Currency,
    paid_invoices: i64,
    paid_total_minor: MinorUnits,
    share_minor: MinorUnits,
}

/// floor(total * hundredths / 10000): the share of `total` at `hundredths`
/// hundredths of a percent.
fn share(total: MinorUnits, hundredths: i64) -> ApiResult<MinorUnits> {
    let s = (i128::from(total.0) * i128::from(hundredths)).div_euclid(10_000);
    i64::try_from(s)
        .map(MinorUnits)
        .map_err(|_| ApiError::internal(anyhow::anyhow!("share overflows: {s}")))
}

/// GET /v1/distributors/{id}/report?month=YYYY-MM (staff, or an observer of
/// the entity): per currency, the entity's invoices (kind `invoice`, not
/// void) paid in that month (UTC), their total and the entity's share
/// `floor(total * profit_pct / 100)`.
#[tracing::instrument(skip_all, fields(distributor_id = %path))]
pub async fn report(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<DistributorId>,
    query: web::Query<ReportQuery>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let month = parse_month(&query.month)?;
    authorize_read(&state, &caller, id).await?;
    let mut conn = state.pool.acquire().await?;
    let hundredths = store::profit_hundredths(&mut conn, id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let mut currencies = Vec::new();
    for p in store::paid_in_month(&mut conn, id, month).await? {
        currencies.push(CurrencyReport {
            share_minor: share(p.total_minor, hundredths)?,
            currency: p.currency,
            paid_invoices: p.invoices,
            paid_total_minor: p.total_minor,
        });
    }
    Ok(HttpResponse::Ok().json(json!({
        "distributor_id": id,
        "month": query.month,
        "profit_pct": hundredths as f64 / 100.0,
        "currencies": currencies,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_are_yyyy_mm() {
        assert_eq!(
            parse_month("2026-02").ok(),
            Date::from_calendar_date(2026, time::Month::February, 1).ok()
        );
        for bad in [
            "2026-13",
            "2026-00",
            "2026-1",
            "26-01",
            "2026/01",
            "2026-011",
            "２０２６-01",
        ] {
            assert!(parse_month(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_share_is_floored() {
        let share = |t, h| share(MinorUnits(t), h).ok().map(|s| s.0);
        assert_eq!(share(999, 1250), Some(124)); // 124.875
        assert_eq!(share(100_000, 3333), Some(33_330));
        assert_eq!(share(i64::MAX, 10000), Some(i64::MAX));
        assert_eq!(share(7, 0), Some(0));
    }
}
