//! Organizations as the user names them: a name or an id, resolved through
//! org-billing's lookup (cached in [`crate::state::Lookups`]) to one the caller
//! may see, without revealing whether one they cannot see exists.

use super::context::{call, Ctx};
use crate::ops::OrgRef;
use hub_domain::OrgId;
use reqwest::Method;
use service_kit::ApiError;
use std::sync::Arc;

/// What the user called an organization, without the words around it
/// ("org ...", quotes, "'s wallet").
pub(crate) fn clean_name(raw: &str) -> String {
    let mut s = raw.trim().trim_end_matches(['?', '.', '!']).trim();
    for p in ["organization ", "organisation ", "org "] {
        if s.len() > p.len() && s[..p.len()].eq_ignore_ascii_case(p) {
            s = &s[p.len()..];
        }
    }
    let s = s.trim_matches(|c| c == '"' || c == '\'' || c == '“' || c == '”');
    let s = s
        .strip_suffix("'s wallet")
        .or_else(|| s.strip_suffix("'s"))
        .unwrap_or(s);
    s.trim().to_owned()
}

/// Resolve what the user called an organization (a name or an id; none: the
/// request's scope, or their only organization) to one they belong to (or any,
/// for staff). `Err` is the reply to give instead; it never reveals whether an
/// organization the caller cannot see exists.
pub async fn resolve_org(
    ctx: &Ctx<'_>,
    named: Option<&str>,
) -> Result<OrgRef, Result<String, ApiError>> {
    let named = named.map(clean_name).filter(|s| !s.is_empty());
    let query = query_for(ctx, named.as_deref()).map_err(Ok)?;
    let chosen = find(ctx, &query).await?;
    if let (Some(scope), Some(_)) = (ctx.scope, &named) {
        if chosen.id != scope {
            return Err(Ok(format!(
                "This request is scoped to organization {scope}; {} is another one.",
                chosen.name
            )));
        }
    }
    Ok(chosen)
}

/// What to look up: the name given, else the request's scope, else the
/// caller's only organization; `Err` is the reply when there is none to pick.
fn query_for(ctx: &Ctx<'_>, named: Option<&str>) -> Result<String, String> {
    match (named, ctx.scope) {
        (Some(n), _) => Ok(n.to_owned()),
        (None, Some(scope)) => Ok(scope.to_string()),
        (None, None) => match ctx.caller.identity.memberships.as_slice() {
            [only] => Ok(only.org_id.to_string()),
            [] => Err("You do not belong to any organization yet.".into()),
            _ => Err("Which organization? Name it, or pass org_id with the message.".into()),
        },
    }
}

/// The organization `query` names. A cached answer is used only when it names
/// the organization: ids, names and wallet currencies never change, so it can
/// only lack organizations created since, and then it is asked again.
async fn find(ctx: &Ctx<'_>, query: &str) -> Result<OrgRef, Result<String, ApiError>> {
    if let Some(found) = ctx.lookups.get(&query.to_lowercase()) {
        if let Ok(o) = pick(ctx, query, &found).await {
            return Ok(o);
        }
    }
    pick(ctx, query, &lookup(ctx, query).await?).await
}

/// Ask org-billing for the organizations `query` names (and cache the answer).
async fn lookup(ctx: &Ctx<'_>, query: &str) -> Result<Arc<Vec<OrgRef>>, Result<String, ApiError>> {
    let path = format!(
        "/internal/v1/organizations/lookup?q={}",
        encode_query(query)
    );
    let r = call(
        &ctx.peers.org_billing,
        ctx.caller,
        Method::GET,
        &path,
        None,
        None,
    )
    .await
    .map_err(Err)?;
    if !r.ok() {
        return Err(Err(ApiError::internal(anyhow::anyhow!(
            "organization lookup answered {}",
            r.status
        ))));
    }
    let found: Vec<OrgRef> = serde_json::from_value(r.body).map_err(|e| {
        Err(ApiError::internal(anyhow::anyhow!(
            "organization lookup: {e}"
        )))
    })?;
    let found = Arc::new(found);
    ctx.lookups.insert(query.to_lowercase(), found.clone());
    Ok(found)
}

/// The one organization among `found` that `query` names exactly and the
/// caller may see.
async fn pick(
    ctx: &Ctx<'_>,
    query: &str,
    found: &[OrgRef],
) -> Result<OrgRef, Result<String, ApiError>> {
    let visible = visible(ctx, found).await;
    let by_id = query.parse::<OrgId>().ok();
    let exact: Vec<&OrgRef> = visible
        .iter()
        .filter(|o| Some(o.id) == by_id || o.name.eq_ignore_ascii_case(query))
        .collect();
    match exact.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(Ok(format!(
            "I could not find an organization called \"{query}\" among yours."
        ))),
        many => {
            let ids: Vec<String> = many.iter().map(|o| o.id.to_string()).collect();
            Err(Ok(format!(
                "Several of your organizations are called \"{query}\"; name one by id: {}.",
                ids.join(", ")
            )))
        }
    }
}

/// The organizations among `found` the caller may see: all for staff, else
/// those they belong to.
async fn visible(ctx: &Ctx<'_>, found: &[OrgRef]) -> Vec<OrgRef> {
    let staff = ctx.caller.identity.staff;
    let mut visible: Vec<OrgRef> = Vec::new();
    for o in found {
        let mine = ctx.caller.identity.role_in(o.id).is_some()
            || (ctx.caller.memberships_truncated && member_by_api(ctx, o.id).await);
        if staff || mine {
            visible.push(o.clone());
        }
    }
    visible
}

/// For a caller whose assertion holds only some memberships: does the public
/// organization route show them `org_id`?
async fn member_by_api(ctx: &Ctx<'_>, org_id: OrgId) -> bool {
    let path = format!("/v1/organizations/{org_id}");
    matches!(
        call(&ctx.peers.org_billing, ctx.caller, Method::GET, &path, None, None).await,
        Ok(r) if r.ok()
    )
}

/// Percent-encode a query value (RFC 3986 unreserved characters kept).
pub fn encode_query(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_their_wrapping() {
        assert_eq!(clean_name("org \"Acme GmbH\"?"), "Acme GmbH");
        assert_eq!(clean_name("Acme GmbH's wallet"), "Acme GmbH");
        assert_eq!(clean_name("organization Acme"), "Acme");
        assert_eq!(clean_name("Org"), "Org");
    }

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(encode_query("Acme & Co"), "Acme%20%26%20Co");
        assert_eq!(encode_query("ş"), "%C5%9F");
    }
}
