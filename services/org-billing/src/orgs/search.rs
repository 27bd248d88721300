//! `GET /v1/admin/organizations?q=&country=&status=&kyc_status=&limit=&cursor=`
//! (staff): organizations by name (case-insensitive prefix), exact id or tax
//! id (matched by its keyed hash, `organizations.tax_id_hash`: no identity is
//! opened), filtered by country, status and KYC status; newest first, paged
//! by `(created_at, id)`.

use crate::state::AppState;
use actix_web::{web, HttpResponse};
use hub_domain::{KycStatus, OrgStatus};
use serde::{Deserialize, Serialize};
use service_kit::{assertion::StaffCaller, page, ApiError, ApiResult};
use time::OffsetDateTime;
use uuid::Uuid;

pub const PAGE_MAX: i64 = 100;
pub const PAGE_DEFAULT: i64 = 50;
pub const Q_MAX: usize = 200;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchQuery {
    q: Option<String>,
    country: Option<String>,
    status: Option<String>,
    kyc_status: Option<String>,
    limit: Option<i64>,
    cursor: Option<String>,
}

#[derive(Serialize)]
pub struct Found {
    id: Uuid,
    name: String,
    country: String,
    legal_type: String,
    status: String,
    kyc_status: String,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
}

/// GET /v1/admin/organizations (staff; 403 otherwise).
#[tracing::instrument(skip_all)]
pub async fn search(
    _caller: StaffCaller,
    state: web::Data<AppState>,
    q: web::Query<SearchQuery>,
) -> ApiResult<HttpResponse> {
    let q = q.into_inner();
    let limit = page::limit(q.limit, PAGE_DEFAULT, PAGE_MAX)?;
    let after = page::after(q.cursor.as_deref())?;
    let text = q.q.as_deref().map(str::trim).filter(|t| !t.is_empty());
    if text.is_some_and(|t| t.chars().count() > Q_MAX || t.chars().any(char::is_control)) {
        return Err(ApiError::BadRequest(format!(
            "q must be at most {Q_MAX} characters, without control characters"
        )));
    }
    let country = match q.country.as_deref().filter(|c| !c.is_empty()) {
        Some(c) if c.len() == 2 && c.chars().all(|x| x.is_ascii_uppercase()) => Some(c.to_owned()),
        Some(_) => return Err(ApiError::bad_request("country must be two capital letters")),
        None => None,
    };
    let status = match q.status.as_deref().filter(|s| !s.is_empty()) {
        Some(s) => Some(
            OrgStatus::parse(s)
                .ok_or_else(|| ApiError::bad_request("status must be an organization status"))?
                .as_str()
                .to_owned(),
        ),
        None => None,
    };
    let kyc_status = match q.kyc_status.as_deref().filter(|s| !s.is_empty()) {
        Some(s) => Some(
            KycStatus::parse(s)
                .ok_or_else(|| ApiError::bad_request("kyc_status must be a KYC status"))?
                .as_str()
                .to_owned(),
        ),
        None => None,
    };
    let id: Option<Uuid> = text.and_then(|t| t.parse().ok());
    let prefix = text.map(|t| {
        let lower = t.to_lowercase();
        let escaped = lower
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        format!("{escaped}%")
    });
    let hash = text.and_then(|t| state.search_key.tax_id_hash(t));
    let (after_at, after_id) = after.map_or((None, None), |(a, i)| (Some(a), Some(i)));
    let rows = sqlx::query_as!(
        Found,
        r#"SELECT id, name, country::text AS "country!", legal_type::text AS "legal_type!",
                  status::text AS "status!", kyc_status::text AS "kyc_status!", created_at
             FROM organizations
            WHERE ($1::text IS NULL OR id = $2 OR lower(name) LIKE $1
                   OR ($3::bytea IS NOT NULL AND tax_id_hash = $3))
              AND ($4::text IS NULL OR country = $4)
              AND ($5::text IS NULL OR status::text = $5)
              AND ($6::text IS NULL OR kyc_status::text = $6)
              AND ($7::timestamptz IS NULL OR (created_at, id) < ($7, $8))
            ORDER BY created_at DESC, id DESC LIMIT $9"#,
        prefix,
        id,
        hash,
        country,
        status,
        kyc_status,
        after_at,
        after_id,
        limit + 1,
    )
    .fetch_all(&state.pool)
    .await?;
    let query = page::kept(&[
        ("q", text),
        ("country", country.as_deref()),
        ("status", status.as_deref()),
        ("kyc_status", kyc_status.as_deref()),
    ]);
    Ok(page::respond(
        rows,
        limit,
        |r| (r.created_at, r.id),
        |c| format!("/v1/admin/organizations?{query}limit={limit}&cursor={c}"),
    ))
}
