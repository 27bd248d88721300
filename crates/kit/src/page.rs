//! Cursor pages of lists ordered newest first by `(timestamp, id)`, or by a
//! bigint sequence (ledger and audit rows, [`seq`]): the opaque cursor a page
//! hands out, the `limit` check, and the `x-next-cursor` and `Link:
//! rel="next"` headers of a page that has more.

use crate::{ApiError, ApiResult};
use actix_web::HttpResponseBuilder;
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use time::OffsetDateTime;
use uuid::Uuid;

/// A list's page parameters, `?limit=&cursor=` (checked by [`limit`] and
/// [`decode`]).
#[derive(Debug, Default, serde::Deserialize)]
pub struct Query {
    pub limit: Option<i64>,
    pub cursor: Option<String>,
}

/// Where the previous page ended: its last row's `(timestamp, id)`.
pub type After = (OffsetDateTime, Uuid);

/// The cursor after a row.
pub fn encode(at: OffsetDateTime, id: Uuid) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}|{id}", at.unix_timestamp_nanos()))
}

/// A cursor this API handed out, or 400.
pub fn decode(c: &str) -> ApiResult<After> {
    let bad = || ApiError::bad_request("cursor is not one this API returned");
    let raw = URL_SAFE_NO_PAD.decode(c).map_err(|_| bad())?;
    let s = String::from_utf8(raw).map_err(|_| bad())?;
    let (ts, id) = s.split_once('|').ok_or_else(bad)?;
    let ts = OffsetDateTime::from_unix_timestamp_nanos(ts.parse().map_err(|_| bad())?)
        .map_err(|_| bad())?;
    Ok((ts, id.parse().map_err(|_| bad())?))
}

/// The `cursor` parameter: absent or empty (`?cursor=`) is the first page,
/// anything else must be a cursor this API handed out ([`decode`]).
pub fn after(cursor: Option<&str>) -> ApiResult<Option<After>> {
    cursor.filter(|c| !c.is_empty()).map(decode).transpose()
}

/// `limit` (or `default`) when within 1..=`max`, else 400.
pub fn limit(asked: Option<i64>, default: i64, max: i64) -> ApiResult<i64> {
    let limit = asked.unwrap_or(default);
    if !(1..=max).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "limit must be between 1 and {max}"
        )));
    }
    Ok(limit)
}

/// Cut `rows` (fetched with `limit + 1`) to the page and, when there was more,
/// add the next page's cursor (`x-next-cursor`) and its link (`next(cursor)`
/// is the next page's path and query) to `resp`.
pub fn cut<T>(
    rows: Vec<T>,
    limit: i64,
    resp: &mut HttpResponseBuilder,
    key: impl Fn(&T) -> After,
    next: impl Fn(&str) -> String,
) -> Vec<T> {
    cut_by(
        rows,
        limit,
        resp,
        |r| {
            let (at, id) = key(r);
            encode(at, id)
        },
        next,
    )
}

/// [`cut`] with the cursor after a row made by `cursor`.
fn cut_by<T>(
    mut rows: Vec<T>,
    limit: i64,
    resp: &mut HttpResponseBuilder,
    cursor: impl Fn(&T) -> String,
    next: impl Fn(&str) -> String,
) -> Vec<T> {
    let limit = usize::try_from(limit).unwrap_or(0);
    if rows.len() > limit {
        rows.truncate(limit);
        if let Some(last) = rows.last() {
            let c = cursor(last);
            resp.insert_header(("link", format!("<{}>; rel=\"next\"", next(&c))));
            resp.insert_header(("x-next-cursor", c));
        }
    }
    rows
}

/// A page of `rows` (fetched with `limit + 1`) as the 200 answer, with the
/// next page's cursor and link when there is more ([`cut`]).
pub fn respond<T: serde::Serialize>(
    rows: Vec<T>,
    limit: i64,
    key: impl Fn(&T) -> After,
    next: impl Fn(&str) -> String,
) -> actix_web::HttpResponse {
    let mut resp = actix_web::HttpResponse::Ok();
    let page = cut(rows, limit, &mut resp, key, next);
    resp.json(page)
}

/// The filters a list was asked with, as the next page's link keeps them:
/// `k=v&` for each given one (URL-encoded, in order), "" for none; the link
/// is then `{path}?{kept}limit=..&cursor=..`.
pub fn kept(filters: &[(&str, Option<&str>)]) -> String {
    let mut out = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in filters {
        if let Some(v) = v {
            out.append_pair(k, v);
        }
    }
    let mut out = out.finish();
    if !out.is_empty() {
        out.push('&');
    }
    out
}

/// Lists ordered newest first by a bigint sequence (a ledger's or the audit
/// log's `id`): the cursor names the last row seen, and the next page holds
/// the rows before it.
pub mod seq {
    use super::*;

    const TAG: &str = "seq|";

    /// The cursor after row `id`.
    pub fn encode(id: i64) -> String {
        URL_SAFE_NO_PAD.encode(format!("{TAG}{id}"))
    }

    /// The `cursor` parameter: absent or empty is the first page (None),
    /// anything else a cursor [`encode`] made, or 400.
    pub fn after(cursor: Option<&str>) -> ApiResult<Option<i64>> {
        let bad = || ApiError::bad_request("cursor is not one this API returned");
        let Some(c) = cursor.filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        let raw = URL_SAFE_NO_PAD.decode(c).map_err(|_| bad())?;
        let s = String::from_utf8(raw).map_err(|_| bad())?;
        let id = s.strip_prefix(TAG).ok_or_else(bad)?;
        id.parse().map(Some).map_err(|_| bad())
    }

    /// A page of `rows` (fetched with `limit + 1`) as the 200 answer, with
    /// the next page's cursor and link when there is more.
    pub fn respond<T: serde::Serialize>(
        rows: Vec<T>,
        limit: i64,
        key: impl Fn(&T) -> i64,
        next: impl Fn(&str) -> String,
    ) -> actix_web::HttpResponse {
        let mut resp = actix_web::HttpResponse::Ok();
        let page = cut_by(rows, limit, &mut resp, |r| encode(key(r)), next);
        resp.json(page)
    }
}

#[cfg(test)]
mod kept_tests {
    #[test]
    fn only_the_given_filters_are_kept_encoded() {
        assert_eq!(super::kept(&[("q", None), ("status", None)]), "");
        assert_eq!(
            super::kept(&[("q", Some("a b&c")), ("status", None), ("x", Some("1"))]),
            "q=a+b%26c&x=1&"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_decodes_to_what_it_encoded_and_garbage_is_a_400() {
        let at =
            OffsetDateTime::from_unix_timestamp_nanos(1_700_000_000_123_456_789).expect("present");
        let id = Uuid::new_v4();
        assert_eq!(decode(&encode(at, id)).expect("present"), (at, id));
        for bad in [
            "",
            "x",
            "bm8tcGlwZQ",
            &URL_SAFE_NO_PAD.encode("1|not-a-uuid"),
        ] {
            assert!(matches!(decode(bad), Err(ApiError::BadRequest(_))), "{bad}");
        }
    }

    #[test]
    fn an_absent_or_empty_cursor_is_the_first_page() {
        assert_eq!(after(None).expect("first page"), None);
        assert_eq!(after(Some("")).expect("first page"), None);
        let at = OffsetDateTime::from_unix_timestamp_nanos(1_700_000_000).expect("present");
        let id = Uuid::new_v4();
        assert_eq!(
            after(Some(&encode(at, id))).expect("a page"),
            Some((at, id))
        );
        assert!(matches!(after(Some("x")), Err(ApiError::BadRequest(_))));
    }

    #[test]
    fn a_sequence_cursor_decodes_to_its_id_and_nothing_else_does() {
        for id in [1, 42, i64::MAX] {
            assert_eq!(
                seq::after(Some(&seq::encode(id))).expect("a page"),
                Some(id)
            );
        }
        assert_eq!(seq::after(None).expect("first page"), None);
        assert_eq!(seq::after(Some("")).expect("first page"), None);
        let at = OffsetDateTime::from_unix_timestamp_nanos(1_700_000_000).expect("present");
        for bad in [
            "x".to_owned(),
            encode(at, Uuid::new_v4()),
            URL_SAFE_NO_PAD.encode("seq|x"),
        ] {
            assert!(
                matches!(seq::after(Some(&bad)), Err(ApiError::BadRequest(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn limits_outside_the_range_are_refused() {
        assert_eq!(limit(None, 50, 200).expect("present"), 50);
        assert_eq!(limit(Some(200), 50, 200).expect("present"), 200);
        assert!(limit(Some(0), 50, 200).is_err());
        assert!(limit(Some(201), 50, 200).is_err());
    }

    #[test]
    fn a_full_page_carries_the_cursor_of_its_last_row() {
        let at = OffsetDateTime::UNIX_EPOCH;
        let rows: Vec<(OffsetDateTime, Uuid)> = (0..3).map(|_| (at, Uuid::new_v4())).collect();
        let mut resp = actix_web::HttpResponse::Ok();
        let page = cut(
            rows.clone(),
            2,
            &mut resp,
            |r| *r,
            |c| format!("/x?cursor={c}"),
        );
        assert_eq!(page, rows[..2]);
        let resp = resp.finish();
        let c = resp
            .headers()
            .get("x-next-cursor")
            .expect("present")
            .to_str()
            .expect("present");
        assert_eq!(decode(c).expect("present"), rows[1]);
        let mut last = actix_web::HttpResponse::Ok();
        assert_eq!(
            cut(rows.clone(), 3, &mut last, |r| *r, |c| c.into()).len(),
            3
        );
        assert!(last.finish().headers().get("x-next-cursor").is_none());
    }
}
