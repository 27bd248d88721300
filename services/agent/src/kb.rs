//! The knowledge base: staff write categories and articles; anyone reads the
//! published articles, without credentials, and searches them.
//!
//! - A slug is 1 to [`SLUG_MAX`] characters of `a-z`, `0-9` and single inner
//!   hyphens, unique among categories and among articles (409 on a taken one).
//! - A title is 1 to [`TITLE_MAX`] characters (trimmed).
//! - `body_md` is Markdown stored exactly as written, at most [`BODY_MAX_BYTES`]
//!   bytes of UTF-8; it is never rendered here: whoever shows it renders it
//!   safely.
//! - An article is `draft` (staff only) or `published` (everyone); publishing
//!   and unpublishing are `PATCH {"status": ...}`.
//! - Search (`q`) matches published articles in the english and the turkish
//!   configuration at once (the `search` column, kept by the database), best
//!   first ([`RankCursor`] pages it).
//!
//! Every staff write is an audit event of the staff member, subject
//! `kb_category:<id>` or `kb_article:<id>`, written in the same transaction;
//! its detail names the slug, the status and the fields changed, never the
//! text.

use crate::{
    audit,
    state::AppState,
    store::kb::{self as store, ArticleChange, NewArticle as Row},
};
use event_contracts::AuditAction;
use hub_domain::{KbArticleId, KbCategoryId};
use serde::{Deserialize, Deserializer};
use serde_json::json;
use service_kit::{assertion::Caller, ApiError, ApiResult, OnConstraint};

pub use crate::store::kb::{Article, ArticleStatus, Category, Hit};

pub const SLUG_MAX: usize = 100;
pub const TITLE_MAX: usize = 200;
pub const BODY_MAX_BYTES: usize = 102_400;
/// The longest search query, in characters.
pub const QUERY_MAX: usize = 200;

/// `slug` as the knowledge base spells them, or a 400 naming `field`.
pub fn check_slug(field: &str, slug: &str) -> ApiResult<()> {
    let well_formed = !slug.is_empty()
        && slug.len() <= SLUG_MAX
        && slug.split('-').all(|part| {
            !part.is_empty() && part.bytes().all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9'))
        });
    if well_formed {
        Ok(())
    } else {
        Err(ApiError::BadRequest(format!(
            "{field} must be 1 to {SLUG_MAX} characters of a-z, 0-9 and single hyphens between them"
        )))
    }
}

/// A slug that could name something (the public read's 404 otherwise).
pub fn is_slug(slug: &str) -> bool {
    check_slug("slug", slug).is_ok()
}

/// The title, trimmed, or a 400: at most [`TITLE_MAX`] characters as given,
/// not blank, no control characters.
fn check_title(title: &str) -> ApiResult<&str> {
    let t = title.trim();
    if t.is_empty() || title.chars().count() > TITLE_MAX || t.chars().any(char::is_control) {
        return Err(ApiError::BadRequest(format!(
            "title must be 1 to {TITLE_MAX} characters, without control characters"
        )));
    }
    Ok(t)
}

fn check_body(body: &str) -> ApiResult<()> {
    if body.len() > BODY_MAX_BYTES {
        return Err(ApiError::BadRequest(format!(
            "body_md must be at most {BODY_MAX_BYTES} bytes of UTF-8"
        )));
    }
    // Postgres text holds no NUL.
    if body.contains('\0') {
        return Err(ApiError::bad_request(
            "body_md must not contain NUL characters",
        ));
    }
    Ok(())
}

fn taken(what: &'static str, slug: &str) -> ApiError {
    ApiError::Conflict(format!(
        "a {what} with slug {slug} exists; choose another slug"
    ))
}

/// The category named `slug`, or a 400 (a category is named by its slug).
async fn category_id(conn: &mut sqlx::PgConnection, slug: &str) -> ApiResult<KbCategoryId> {
    check_slug("category", slug)?;
    store::category_by_slug(conn, slug).await?.ok_or_else(|| {
        ApiError::BadRequest(format!(
            "category {slug} does not exist; create it with POST /v1/admin/kb/categories"
        ))
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewCategory {
    pub slug: String,
    pub title: String,
}

/// POST /v1/admin/kb/categories (staff).
pub async fn create_category(
    state: &AppState,
    staff: &Caller,
    c: &NewCategory,
) -> ApiResult<Category> {
    check_slug("slug", &c.slug)?;
    let title = check_title(&c.title)?;
    let mut tx = state.pool.begin().await?;
    let created = store::insert_category(&mut tx, &c.slug, title, state.clock.now())
        .await
        .on_constraint("kb_categories_slug_key", || taken("category", &c.slug))?;
    audit::record_on(
        &mut tx,
        &state.naming,
        staff,
        AuditAction::KbCategoryCreated,
        format!("kb_category:{}", created.id),
        json!({"category_id": created.id, "slug": created.slug}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(created)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewArticle {
    pub slug: String,
    pub title: String,
    pub body_md: String,
    /// `draft` when absent.
    #[serde(default, deserialize_with = "not_null")]
    pub status: Option<ArticleStatus>,
    /// A category's slug.
    pub category: Option<String>,
}

/// POST /v1/admin/kb/articles (staff).
pub async fn create_article(
    state: &AppState,
    staff: &Caller,
    a: &NewArticle,
) -> ApiResult<Article> {
    check_slug("slug", &a.slug)?;
    let title = check_title(&a.title)?;
    check_body(&a.body_md)?;
    let mut tx = state.pool.begin().await?;
    let category = match &a.category {
        Some(slug) => Some(category_id(&mut tx, slug).await?),
        None => None,
    };
    let status = a.status.unwrap_or(ArticleStatus::Draft);
    let id = store::insert_article(
        &mut tx,
        &Row {
            slug: &a.slug,
            title,
            body_md: &a.body_md,
            status,
            category,
            by: staff.user_id(),
            at: state.clock.now(),
        },
    )
    .await
    .on_constraint("kb_articles_slug_key", || taken("article", &a.slug))?;
    audit::record_on(
        &mut tx,
        &state.naming,
        staff,
        AuditAction::KbArticleCreated,
        format!("kb_article:{id}"),
        json!({"article_id": id, "slug": a.slug, "status": status, "category": a.category}),
    )
    .await?;
    let created = store::article(&mut tx, id)
        .await?
        .ok_or(ApiError::NotFound)?;
    state.outbox.commit(tx).await?;
    Ok(created)
}

/// Absent stays None; a present value (null included) is Some.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// Absent stays None (with `#[serde(default)]`); null is refused like any
/// other value of the wrong type.
fn not_null<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArticlePatch {
    #[serde(default, deserialize_with = "not_null")]
    pub slug: Option<String>,
    #[serde(default, deserialize_with = "not_null")]
    pub title: Option<String>,
    #[serde(default, deserialize_with = "not_null")]
    pub body_md: Option<String>,
    #[serde(default, deserialize_with = "not_null")]
    pub status: Option<ArticleStatus>,
    /// Absent: unchanged; null: no category; a slug: that category.
    #[serde(default, deserialize_with = "present")]
    pub category: Option<Option<String>>,
}

/// PATCH /v1/admin/kb/articles/{id} (staff): edit, publish, unpublish.
pub async fn update_article(
    state: &AppState,
    staff: &Caller,
    id: KbArticleId,
    p: &ArticlePatch,
) -> ApiResult<Article> {
    if p.slug.is_none()
        && p.title.is_none()
        && p.body_md.is_none()
        && p.status.is_none()
        && p.category.is_none()
    {
        return Err(ApiError::bad_request(
            "nothing to change: give slug, title, body_md, status or category",
        ));
    }
    if let Some(s) = &p.slug {
        check_slug("slug", s)?;
    }
    let title = p.title.as_deref().map(check_title).transpose()?;
    if let Some(b) = &p.body_md {
        check_body(b)?;
    }
    let mut tx = state.pool.begin().await?;
    let Some(before) = store::article_for_update(&mut tx, id).await? else {
        return Err(ApiError::NotFound);
    };
    let category = match &p.category {
        None => None,
        Some(None) => Some(None),
        Some(Some(slug)) => Some(Some(category_id(&mut tx, slug).await?)),
    };
    let change = ArticleChange {
        slug: p.slug.as_deref().unwrap_or(&before.slug),
        title: title.unwrap_or(&before.title),
        body_md: p.body_md.as_deref().unwrap_or(&before.body_md),
        status: p.status.unwrap_or(before.status),
        category,
        at: state.clock.now(),
    };
    store::update_article(&mut tx, id, &change)
        .await
        .on_constraint("kb_articles_slug_key", || taken("article", change.slug))?;
    let mut fields = Vec::new();
    for (name, changed) in [
        ("slug", change.slug != before.slug),
        ("title", change.title != before.title),
        ("body_md", change.body_md != before.body_md),
        ("status", change.status != before.status),
        (
            "category",
            p.category.as_ref().is_some_and(|c| *c != before.category),
        ),
    ] {
        if changed {
            fields.push(name);
        }
    }
    audit::record_on(
        &mut tx,
        &state.naming,
        staff,
        AuditAction::KbArticleUpdated,
        format!("kb_article:{id}"),
        json!({"article_id": id, "slug": change.slug, "fields": fields,
               "status": {"from": before.status, "to": change.status}}),
    )
    .await?;
    let after = store::article(&mut tx, id)
        .await?
        .ok_or(ApiError::NotFound)?;
    state.outbox.commit(tx).await?;
    Ok(after)
}

/// DELETE /v1/admin/kb/articles/{id} (staff).
pub async fn delete_article(state: &AppState, staff: &Caller, id: KbArticleId) -> ApiResult<()> {
    let mut tx = state.pool.begin().await?;
    let Some((slug, status)) = store::delete_article(&mut tx, id).await? else {
        return Err(ApiError::NotFound);
    };
    audit::record_on(
        &mut tx,
        &state.naming,
        staff,
        AuditAction::KbArticleDeleted,
        format!("kb_article:{id}"),
        json!({"article_id": id, "slug": slug, "status": status}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(())
}

/// The cursor of a page of search hits: the last hit's rank and id. Opaque
/// to clients: `r`, the rank's bits in hex (8 digits), the id (32 digits).
pub struct RankCursor;

impl RankCursor {
    pub fn encode(rank: f32, id: KbArticleId) -> String {
        format!("r{:08x}{}", rank.to_bits(), id.as_uuid().simple())
    }

    /// Absent or empty: the first page; else a cursor [`encode`](Self::encode)
    /// made, or 400.
    pub fn after(cursor: Option<&str>) -> ApiResult<Option<(f32, uuid::Uuid)>> {
        let Some(c) = cursor.filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        let bad = || ApiError::bad_request("cursor is not one this API returned");
        let rest = c.strip_prefix('r').ok_or_else(bad)?;
        if rest.len() != 40 || !rest.is_ascii() {
            return Err(bad());
        }
        let (bits, id) = rest.split_at(8);
        let bits = u32::from_str_radix(bits, 16).map_err(|_| bad())?;
        let rank = f32::from_bits(bits);
        if !rank.is_finite() {
            return Err(bad());
        }
        Ok(Some((rank, uuid::Uuid::parse_str(id).map_err(|_| bad())?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_lowercase_words_joined_by_single_hyphens() {
        for good in ["a", "billing", "how-to-pay-2", &"a".repeat(SLUG_MAX)] {
            assert!(is_slug(good), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "a--b",
            "A",
            "a_b",
            "a b",
            "ş",
            "a/b",
            &"a".repeat(SLUG_MAX + 1),
        ] {
            assert!(!is_slug(bad), "{bad}");
        }
    }

    #[test]
    fn a_rank_cursor_decodes_to_what_it_encoded_and_nothing_else_does() {
        let id = KbArticleId::new();
        for rank in [0.0_f32, 0.060_793_53, 1.0e-20, 0.99] {
            let c = RankCursor::encode(rank, id);
            assert_eq!(
                RankCursor::after(Some(&c)).expect("a cursor"),
                Some((rank, id.as_uuid()))
            );
        }
        assert_eq!(RankCursor::after(None).expect("first page"), None);
        assert_eq!(RankCursor::after(Some("")).expect("first page"), None);
        let nan = format!("r{:08x}{}", f32::NAN.to_bits(), id.as_uuid().simple());
        for bad in [
            "x",
            "r",
            "r0000000",
            &nan,
            "rzzzzzzzz00000000000000000000000000000000",
        ] {
            assert!(
                matches!(RankCursor::after(Some(bad)), Err(ApiError::BadRequest(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn titles_and_bodies_are_bounded() {
        assert_eq!(
            check_title("  Paying by transfer ").expect("fine"),
            "Paying by transfer"
        );
        assert!(check_title(" ").is_err());
        assert!(check_title(&"ş".repeat(TITLE_MAX)).is_ok());
        assert!(check_title(&"ş".repeat(TITLE_MAX + 1)).is_err());
        assert!(check_title("a\nb").is_err());
        assert!(check_body(&"a".repeat(BODY_MAX_BYTES)).is_ok());
        assert!(check_body(&"a".repeat(BODY_MAX_BYTES + 1)).is_err());
        assert!(check_body("a\0b").is_err());
        assert!(check_body("").is_ok());
    }
}
