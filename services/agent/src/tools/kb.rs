//! Full autonomy: answers from the published knowledge base, searched by the
//! user's words (the same search as `GET /v1/kb/articles?q=`, read from this
//! service's own schema: the articles are public, so no authority is needed).

use super::context::Ctx;
use crate::{kb::QUERY_MAX, ops::Outcome, store::kb as store};
use service_kit::ApiError;

/// Articles in one answer, at most.
pub const HITS: i64 = 3;
/// Characters of an article's Markdown quoted in an answer, at most.
pub const EXCERPT_CHARS: usize = 300;

/// The best published articles for `query`: title, where to read it, and
/// its opening.
pub async fn search(ctx: &Ctx<'_>, query: &str) -> Result<Outcome, ApiError> {
    let q = query.replace('\0', " ");
    let q = q.trim();
    if q.is_empty() {
        return Ok(Outcome::Answer(
            "What should I look for in the knowledge base?".into(),
        ));
    }
    if q.chars().count() > QUERY_MAX {
        return Ok(Outcome::Answer(format!(
            "Ask the knowledge base with fewer words (at most {QUERY_MAX} characters)."
        )));
    }
    let hits = store::search(ctx.pool, q, None, None, HITS).await?;
    if hits.is_empty() {
        return Ok(Outcome::Answer(format!(
            "The knowledge base has no published article about \"{q}\"."
        )));
    }
    let mut reply = String::from("From the knowledge base:");
    for (n, h) in hits.iter().enumerate() {
        let a = &h.article;
        reply.push_str(&format!(
            "\n\n{}. {} (/v1/kb/articles/{})\n{}",
            n + 1,
            a.title,
            a.slug,
            excerpt(&a.body_md)
        ));
    }
    Ok(Outcome::Answer(reply))
}

/// The opening of `body`, whitespace collapsed, at most [`EXCERPT_CHARS`]
/// characters (and "..." when cut).
fn excerpt(body: &str) -> String {
    let flat = body.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= EXCERPT_CHARS {
        return flat;
    }
    let cut: String = flat.chars().take(EXCERPT_CHARS).collect();
    format!("{}...", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_excerpt_is_the_flattened_opening() {
        assert_eq!(excerpt("# Title\n\nSome  text.\n"), "# Title Some text.");
        let long = "ş ".repeat(400);
        let e = excerpt(&long);
        assert!(e.ends_with("..."), "{e}");
        assert!(e.chars().count() <= EXCERPT_CHARS + 3, "{e}");
    }
}
