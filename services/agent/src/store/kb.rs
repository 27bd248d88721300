//! The knowledge base (`kb_categories`, `kb_articles`): categories, articles
//! and the full-text search over published ones (the `search` column, kept by
//! the database in the english and turkish configurations).

use hub_domain::{KbArticleId, KbCategoryId, UserId};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;

hub_domain::text_enum! {
    /// Whether the public sees an article (`kb_articles.status`).
    pub enum ArticleStatus: "article status" {
        Draft = "draft",
        Published = "published",
    }
}

/// KBCategory: `article_count` counts its published articles.
#[derive(Debug, Serialize)]
pub struct Category {
    pub id: KbCategoryId,
    pub slug: String,
    pub title: String,
    pub article_count: i64,
}

/// KBArticle: `category` is its category's slug.
#[derive(Debug, Serialize)]
pub struct Article {
    pub id: KbArticleId,
    pub slug: String,
    pub title: String,
    pub body_md: String,
    pub status: ArticleStatus,
    pub category: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

/// A search hit: the article and its rank (the order of the hits, and the
/// next page's cursor).
pub struct Hit {
    pub article: Article,
    pub rank: f32,
}

/// Where a list's page starts and how long it is.
pub struct Page {
    /// The last row of the previous page: `(updated_at, id)`.
    pub after: Option<(OffsetDateTime, uuid::Uuid)>,
    /// Rows to fetch (the page's limit and one more).
    pub fetch: i64,
}

pub async fn insert_category(
    conn: &mut PgConnection,
    slug: &str,
    title: &str,
    at: OffsetDateTime,
) -> sqlx::Result<Category> {
    sqlx::query_as!(
        Category,
        r#"INSERT INTO kb_categories (id, slug, title, created_at) VALUES ($1, $2, $3, $4)
           RETURNING id AS "id: KbCategoryId", slug, title, 0::bigint AS "article_count!""#,
        KbCategoryId::new() as KbCategoryId,
        slug,
        title,
        at,
    )
    .fetch_one(conn)
    .await
}

/// Every category, by title, with its published articles counted.
pub async fn categories(pool: &PgPool) -> sqlx::Result<Vec<Category>> {
    sqlx::query_as!(
        Category,
        r#"SELECT c.id AS "id: KbCategoryId", c.slug, c.title, count(a.id) AS "article_count!"
           FROM kb_categories c
           LEFT JOIN kb_articles a ON a.category_id = c.id AND a.status = 'published'
           GROUP BY c.id ORDER BY c.title, c.id"#,
    )
    .fetch_all(pool)
    .await
}

/// The category named `slug`, if there is one.
pub async fn category_by_slug(
    conn: &mut PgConnection,
    slug: &str,
) -> sqlx::Result<Option<KbCategoryId>> {
    sqlx::query_scalar!(
        r#"SELECT id AS "id: KbCategoryId" FROM kb_categories WHERE slug = $1"#,
        slug,
    )
    .fetch_optional(conn)
    .await
}

/// A new article, as written.
pub struct NewArticle<'a> {
    pub slug: &'a str,
    pub title: &'a str,
    pub body_md: &'a str,
    pub status: ArticleStatus,
    pub category: Option<KbCategoryId>,
    pub by: UserId,
    pub at: OffsetDateTime,
}

pub async fn insert_article(
    conn: &mut PgConnection,
    a: &NewArticle<'_>,
) -> sqlx::Result<KbArticleId> {
    sqlx::query_scalar!(
        r#"INSERT INTO kb_articles
             (id, slug, title, body_md, status, category_id, created_by, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
           RETURNING id AS "id: KbArticleId""#,
        KbArticleId::new() as KbArticleId,
        a.slug,
        a.title,
        a.body_md,
        a.status as ArticleStatus,
        a.category as Option<KbCategoryId>,
        a.by as UserId,
        a.at,
    )
    .fetch_one(conn)
    .await
}

/// Article `id` (drafts too), locked for the rest of the transaction.
pub async fn article_for_update(
    conn: &mut PgConnection,
    id: KbArticleId,
) -> sqlx::Result<Option<Article>> {
    sqlx::query_as!(
        Article,
        r#"SELECT a.id AS "id: KbArticleId", a.slug, a.title, a.body_md,
                  a.status AS "status: ArticleStatus", c.slug AS "category?", a.updated_at
           FROM kb_articles a LEFT JOIN kb_categories c ON c.id = a.category_id
           WHERE a.id = $1
           FOR UPDATE OF a"#,
        id as KbArticleId,
    )
    .fetch_optional(conn)
    .await
}

/// Article `id` (drafts too).
pub async fn article(conn: &mut PgConnection, id: KbArticleId) -> sqlx::Result<Option<Article>> {
    sqlx::query_as!(
        Article,
        r#"SELECT a.id AS "id: KbArticleId", a.slug, a.title, a.body_md,
                  a.status AS "status: ArticleStatus", c.slug AS "category?", a.updated_at
           FROM kb_articles a LEFT JOIN kb_categories c ON c.id = a.category_id
           WHERE a.id = $1"#,
        id as KbArticleId,
    )
    .fetch_optional(conn)
    .await
}

/// The published article named `slug`.
pub async fn published(pool: &PgPool, slug: &str) -> sqlx::Result<Option<Article>> {
    sqlx::query_as!(
        Article,
        r#"SELECT a.id AS "id: KbArticleId", a.slug, a.title, a.body_md,
                  a.status AS "status: ArticleStatus", c.slug AS "category?", a.updated_at
           FROM kb_articles a LEFT JOIN kb_categories c ON c.id = a.category_id
           WHERE a.slug = $1 AND a.status = 'published'"#,
        slug,
    )
    .fetch_optional(pool)
    .await
}

/// The article's new values (each the old one when not changed).
pub struct ArticleChange<'a> {
    pub slug: &'a str,
    pub title: &'a str,
    pub body_md: &'a str,
    pub status: ArticleStatus,
    /// None: unchanged; Some(None): no category.
    pub category: Option<Option<KbCategoryId>>,
    pub at: OffsetDateTime,
}

pub async fn update_article(
    conn: &mut PgConnection,
    id: KbArticleId,
    c: &ArticleChange<'_>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE kb_articles SET slug = $2, title = $3, body_md = $4, status = $5,
                category_id = CASE WHEN $6 THEN $7 ELSE category_id END, updated_at = $8
         WHERE id = $1",
        id as KbArticleId,
        c.slug,
        c.title,
        c.body_md,
        c.status as ArticleStatus,
        c.category.is_some(),
        c.category.flatten() as Option<KbCategoryId>,
        c.at,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Delete article `id`: its slug and status, None when there is none.
pub async fn delete_article(
    conn: &mut PgConnection,
    id: KbArticleId,
) -> sqlx::Result<Option<(String, ArticleStatus)>> {
    let row = sqlx::query!(
        r#"DELETE FROM kb_articles WHERE id = $1 RETURNING slug, status AS "status: ArticleStatus""#,
        id as KbArticleId,
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| (r.slug, r.status)))
}

/// Articles by latest change, newest first: the published ones (`all`
/// false), or every one; only category `category`'s when given.
pub async fn list(
    pool: &PgPool,
    all: bool,
    category: Option<&str>,
    page: &Page,
) -> sqlx::Result<Vec<Article>> {
    let (at, id) = page.after.unzip();
    sqlx::query_as!(
        Article,
        r#"SELECT a.id AS "id: KbArticleId", a.slug, a.title, a.body_md,
                  a.status AS "status: ArticleStatus", c.slug AS "category?", a.updated_at
           FROM kb_articles a LEFT JOIN kb_categories c ON c.id = a.category_id
           WHERE ($1 OR a.status = 'published')
             AND ($2::text IS NULL OR c.slug = $2)
             AND ($3::timestamptz IS NULL OR (a.updated_at, a.id) < ($3, $4::uuid))
           ORDER BY a.updated_at DESC, a.id DESC
           LIMIT $5"#,
        all,
        category,
        at,
        id,
        page.fetch,
    )
    .fetch_all(pool)
    .await
}

/// Published articles matching `q` (web-search syntax: words, "quoted
/// phrases", `or`, `-word`) in english or turkish, best first; after `after`
/// (the previous page's last `(rank, id)`), at most `fetch`.
pub async fn search(
    pool: &PgPool,
    q: &str,
    category: Option<&str>,
    after: Option<(f32, uuid::Uuid)>,
    fetch: i64,
) -> sqlx::Result<Vec<Hit>> {
    let (rank, id) = after.unzip();
    let rows = sqlx::query!(
        r#"SELECT a.id AS "id: KbArticleId", a.slug, a.title, a.body_md,
                  a.status AS "status: ArticleStatus", c.slug AS "category?", a.updated_at,
                  m.rank AS "rank!"
           FROM (SELECT websearch_to_tsquery('english', $1) || websearch_to_tsquery('turkish', $1) AS query) q
           JOIN kb_articles a ON a.search @@ q.query
           CROSS JOIN LATERAL (SELECT ts_rank(a.search, q.query) AS rank) m
           LEFT JOIN kb_categories c ON c.id = a.category_id
           WHERE a.status = 'published'
             AND ($2::text IS NULL OR c.slug = $2)
             AND ($3::real IS NULL OR (m.rank, a.id) < ($3, $4::uuid))
           ORDER BY m.rank DESC, a.id DESC
           LIMIT $5"#,
        q,
        category,
        rank,
        id,
        fetch,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Hit {
            article: Article {
                id: r.id,
                slug: r.slug,
                title: r.title,
                body_md: r.body_md,
                status: r.status,
                category: r.category,
                updated_at: r.updated_at,
            },
            rank: r.rank,
        })
        .collect())
}
