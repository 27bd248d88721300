//! The knowledge base's routes: public reads (the gateway lets them through
//! without credentials; the assertion still proves the gateway sent them) and
//! staff writes (see [`crate::kb`]).

use super::body::body;
use crate::{kb, state::AppState, store::kb as store};
use actix_web::{web, HttpResponse};
use hub_domain::KbArticleId;
use serde::Deserialize;
use service_kit::{
    assertion::{RequestCtx, StaffCaller},
    page, ApiError, ApiResult,
};

/// A page of articles: 20 unless `limit` says otherwise, at most this.
const LIMIT_MAX: i64 = 50;
const LIMIT_DEFAULT: i64 = 20;

#[derive(Deserialize)]
pub struct ListQuery {
    category: Option<String>,
    q: Option<String>,
    limit: Option<i64>,
    cursor: Option<String>,
}

/// The page's next link: the same filters, the next cursor.
fn next_link(base: &str, q: &ListQuery, cursor: &str) -> String {
    let mut params = Vec::new();
    if let Some(c) = q.category.as_deref() {
        params.push(format!("category={c}"));
    }
    if let Some(text) = q.q.as_deref().filter(|t| !t.is_empty()) {
        params.push(format!("q={}", encode(text)));
    }
    if let Some(l) = q.limit {
        params.push(format!("limit={l}"));
    }
    params.push(format!("cursor={cursor}"));
    format!("{base}?{}", params.join("&"))
}

/// Percent-encode a query value (everything but unreserved characters).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A list of articles: published ones only unless `all`.
async fn list(state: &AppState, q: &ListQuery, all: bool, base: &str) -> ApiResult<HttpResponse> {
    let limit = page::limit(q.limit, LIMIT_DEFAULT, LIMIT_MAX)?;
    let category = q.category.as_deref();
    if let Some(c) = category {
        kb::check_slug("category", c)?;
    }
    if q.q
        .as_ref()
        .is_some_and(|t| t.chars().count() > kb::QUERY_MAX)
    {
        return Err(ApiError::BadRequest(format!(
            "q must be at most {} characters",
            kb::QUERY_MAX
        )));
    }
    // A NUL separates words like a space (Postgres text holds none).
    let text = q.q.as_deref().map(|t| t.replace('\0', " "));
    if let Some(text) = text.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        if all {
            return Err(ApiError::bad_request(
                "q searches published articles: use GET /v1/kb/articles",
            ));
        }
        let after = kb::RankCursor::after(q.cursor.as_deref())?;
        let mut hits = store::search(&state.pool, text, category, after, limit + 1).await?;
        let mut resp = HttpResponse::Ok();
        let keep = usize::try_from(limit).unwrap_or(0);
        if hits.len() > keep {
            hits.truncate(keep);
            if let Some(last) = hits.last() {
                let c = kb::RankCursor::encode(last.rank, last.article.id);
                resp.insert_header((
                    "link",
                    format!("<{}>; rel=\"next\"", next_link(base, q, &c)),
                ));
                resp.insert_header(("x-next-cursor", c));
            }
        }
        let articles: Vec<kb::Article> = hits.into_iter().map(|h| h.article).collect();
        return Ok(resp.json(articles));
    }
    let page = store::Page {
        after: page::after(q.cursor.as_deref())?,
        fetch: limit + 1,
    };
    let rows = store::list(&state.pool, all, category, &page).await?;
    Ok(page::respond(
        rows,
        limit,
        |a| (a.updated_at, a.id.as_uuid()),
        |c| next_link(base, q, c),
    ))
}

/// GET /v1/kb/categories (public): every category, with its published
/// articles counted.
#[tracing::instrument(skip_all)]
pub async fn categories(_ctx: RequestCtx, state: web::Data<AppState>) -> ApiResult<HttpResponse> {
    Ok(HttpResponse::Ok().json(store::categories(&state.pool).await?))
}

/// GET /v1/kb/articles (public): published articles, latest change first, or
/// the ones matching `q`, best first; `category` (a slug) narrows either.
#[tracing::instrument(skip_all)]
pub async fn published(
    _ctx: RequestCtx,
    state: web::Data<AppState>,
    q: web::Query<ListQuery>,
) -> ApiResult<HttpResponse> {
    list(&state, &q, false, "/v1/kb/articles").await
}

/// GET /v1/kb/articles/{slug} (public): a published article; a draft, like
/// an article that does not exist, is 404.
#[tracing::instrument(skip_all)]
pub async fn article(
    _ctx: RequestCtx,
    state: web::Data<AppState>,
    slug: web::Path<String>,
) -> ApiResult<HttpResponse> {
    if !kb::is_slug(&slug) {
        return Err(ApiError::NotFound);
    }
    let a = store::published(&state.pool, &slug)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(HttpResponse::Ok().json(a))
}

/// GET /v1/admin/kb/articles (staff): every article, drafts too, latest
/// change first.
#[tracing::instrument(skip_all)]
pub async fn all(
    _staff: StaffCaller,
    state: web::Data<AppState>,
    q: web::Query<ListQuery>,
) -> ApiResult<HttpResponse> {
    list(&state, &q, true, "/v1/admin/kb/articles").await
}

/// POST /v1/admin/kb/categories (staff): 201 with the category.
#[tracing::instrument(skip_all)]
pub async fn create_category(
    staff: StaffCaller,
    state: web::Data<AppState>,
    bytes: web::Bytes,
) -> ApiResult<HttpResponse> {
    let c: kb::NewCategory = body(&bytes)?;
    Ok(HttpResponse::Created().json(kb::create_category(&state, &staff, &c).await?))
}

/// POST /v1/admin/kb/articles (staff): 201 with the article.
#[tracing::instrument(skip_all)]
pub async fn create_article(
    staff: StaffCaller,
    state: web::Data<AppState>,
    bytes: web::Bytes,
) -> ApiResult<HttpResponse> {
    let a: kb::NewArticle = body(&bytes)?;
    Ok(HttpResponse::Created().json(kb::create_article(&state, &staff, &a).await?))
}

/// PATCH /v1/admin/kb/articles/{id} (staff): the article as changed.
#[tracing::instrument(skip_all)]
pub async fn update_article(
    staff: StaffCaller,
    state: web::Data<AppState>,
    id: web::Path<KbArticleId>,
    bytes: web::Bytes,
) -> ApiResult<HttpResponse> {
    let p: kb::ArticlePatch = body(&bytes)?;
    Ok(HttpResponse::Ok().json(kb::update_article(&state, &staff, id.into_inner(), &p).await?))
}

/// DELETE /v1/admin/kb/articles/{id} (staff): 204.
#[tracing::instrument(skip_all)]
pub async fn delete_article(
    staff: StaffCaller,
    state: web::Data<AppState>,
    id: web::Path<KbArticleId>,
) -> ApiResult<HttpResponse> {
    kb::delete_article(&state, &staff, id.into_inner()).await?;
    Ok(HttpResponse::NoContent().finish())
}
