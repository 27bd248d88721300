//! The assistant's operations. Both engines use these and only these: the
//! rule-based matcher turns a phrasing into an [`Op`], the model names one as a
//! tool call, and [`run`] does the same thing for either, in the same tier.
//!
//! Reads and job-title/bio updates run at once, through the owning service's
//! public route with the caller's own authority (their assertion, signed with
//! agent's caller key): the same handlers and checks as a direct call. The four
//! sensitive operations never run here: [`run`] only prepares them (resolving
//! names, formatting money) into a [`Staged`] action that runs when its owner
//! confirms (see [`crate::staged`]).

use crate::{
    money,
    ops::{Op, OrgRef, Outcome, Staged},
    state::AppState,
};
use event_contracts::views;
use hub_domain::OrgId;
use reqwest::Method;
use serde_json::{json, Value};
use service_kit::{assertion::Caller, peer::Peer, ApiError};
use std::sync::Arc;
use uuid::Uuid;

/// Longest job title and bio the assistant sets (identity's own limits apply
/// too; bio: 2000 characters).
pub const JOB_TITLE_MAX: usize = 120;

/// Who asks, and the organization `org_id` scoped the request to.
pub struct Ctx<'a> {
    pub state: &'a AppState,
    pub caller: &'a Caller,
    pub scope: Option<OrgId>,
}

/// A public route's answer: status and JSON body.
pub struct Reply {
    pub status: u16,
    pub body: Value,
}

impl Reply {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
    pub fn error(&self) -> &str {
        self.body["error"].as_str().unwrap_or("refused")
    }
}

/// Call `peer` as the caller (their assertion, agent's key).
pub async fn call(
    peer: &Peer,
    caller: &Caller,
    method: Method,
    path: &str,
    body: Option<&Value>,
    idempotency_key: Option<&str>,
) -> Result<Reply, ApiError> {
    let resp = peer
        .request(method, path, Some(caller), body, idempotency_key)
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, path, "a service the assistant needs is unreachable");
            ApiError::Unavailable("a service the assistant needs is unavailable, try again".into())
        })?;
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.unwrap_or_default();
    Ok(Reply {
        status,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    })
}

/// A user-facing refusal for a public route's non-2xx answer.
fn refusal(r: &Reply) -> Outcome {
    match r.status {
        404 => Outcome::Answer("I could not find that among your organizations.".into()),
        403 => Outcome::Answer(format!("You are not allowed to do that: {}.", r.error())),
        _ => Outcome::Answer(format!("That did not work: {}.", r.error())),
    }
}

fn clean_name(raw: &str) -> String {
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
    let query = match (&named, ctx.scope) {
        (Some(n), _) => n.clone(),
        (None, Some(scope)) => scope.to_string(),
        (None, None) => match ctx.caller.identity.memberships.as_slice() {
            [only] => only.org_id.to_string(),
            [] => return Err(Ok("You do not belong to any organization yet.".into())),
            _ => {
                return Err(Ok(
                    "Which organization? Name it, or pass org_id with the message.".into(),
                ))
            }
        },
    };
    // A cached answer is used only when it names the organization: ids, names
    // and wallet currencies never change, so it can only lack organizations
    // created since, and then it is asked again.
    let cached = ctx.state.lookups.get(&query.to_lowercase());
    let chosen = match cached {
        Some(found) => match pick(ctx, &query, &found).await {
            Ok(o) => Ok(o),
            Err(_) => pick(ctx, &query, &lookup(ctx, &query).await?).await,
        },
        None => pick(ctx, &query, &lookup(ctx, &query).await?).await,
    }?;
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

/// Ask org-billing for the organizations `query` names (and cache the answer).
async fn lookup(ctx: &Ctx<'_>, query: &str) -> Result<Arc<Vec<OrgRef>>, Result<String, ApiError>> {
    let path = format!(
        "/internal/v1/organizations/lookup?q={}",
        encode_query(query)
    );
    let r = call(
        &ctx.state.peers.org_billing,
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
    ctx.state
        .lookups
        .insert(query.to_lowercase(), found.clone());
    Ok(found)
}

/// The one organization among `found` that `query` names exactly and the
/// caller may see.
async fn pick(
    ctx: &Ctx<'_>,
    query: &str,
    found: &[OrgRef],
) -> Result<OrgRef, Result<String, ApiError>> {
    let staff = ctx.caller.identity.staff;
    let mut visible: Vec<OrgRef> = Vec::new();
    for o in found {
        let mine = ctx.caller.identity.role_in(o.id).is_some()
            || (ctx.caller.memberships_truncated && member_by_api(ctx, o.id).await);
        if staff || mine {
            visible.push(o.clone());
        }
    }
    let by_id = Uuid::parse_str(query).ok();
    let exact: Vec<OrgRef> = visible
        .iter()
        .filter(|o| Some(o.id.as_uuid()) == by_id || o.name.eq_ignore_ascii_case(query))
        .cloned()
        .collect();
    let chosen = match exact.as_slice() {
        [one] => one.clone(),
        [] => {
            return Err(Ok(format!(
                "I could not find an organization called \"{query}\" among yours."
            )))
        }
        many => {
            let ids: Vec<String> = many.iter().map(|o| o.id.to_string()).collect();
            return Err(Ok(format!(
                "Several of your organizations are called \"{query}\"; name one by id: {}.",
                ids.join(", ")
            )));
        }
    };
    Ok(chosen)
}

/// For a caller whose assertion holds only some memberships: does the public
/// organization route show them `org_id`?
async fn member_by_api(ctx: &Ctx<'_>, org_id: OrgId) -> bool {
    let path = format!("/v1/organizations/{org_id}");
    matches!(
        call(&ctx.state.peers.org_billing, ctx.caller, Method::GET, &path, None, None).await,
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

/// GET `path` at `peer` as the caller: the body, or the refusal to answer
/// with.
async fn read(ctx: &Ctx<'_>, peer: &Peer, path: &str) -> Result<Result<Value, Outcome>, ApiError> {
    let r = call(peer, ctx.caller, Method::GET, path, None, None).await?;
    Ok(if r.ok() { Ok(r.body) } else { Err(refusal(&r)) })
}

macro_rules! read {
    ($ctx:expr, $peer:expr, $path:expr) => {
        match read($ctx, $peer, $path).await? {
            Ok(body) => body,
            Err(refused) => return Ok(refused),
        }
    };
    // The body as its contract type (event_contracts::views): a body without
    // the fields is a 502, never a default.
    ($ctx:expr, $peer:expr, $path:expr, $ty:ty) => {
        view::<$ty>($path, read!($ctx, $peer, $path))?
    };
}

/// A peer's answer as its contract type; 502 naming the route otherwise.
fn view<T: serde::de::DeserializeOwned>(path: &str, body: Value) -> Result<T, ApiError> {
    serde_json::from_value(body)
        .map_err(|e| ApiError::BadGateway(format!("unexpected answer from {path}: {e}")))
}

/// "3 things waiting:" and one line per item (the first 20).
fn listing<T>(items: &[T], what: &str, line: impl Fn(&T) -> String) -> String {
    let lines: Vec<String> = items.iter().take(20).map(line).collect();
    format!(
        "{} {what}{}\n{}",
        items.len(),
        if items.is_empty() { "." } else { ":" },
        lines.join("\n")
    )
}

macro_rules! resolved {
    ($e:expr) => {
        match $e {
            Ok(o) => o,
            Err(Ok(reply)) => return Ok(Outcome::Answer(reply)),
            Err(Err(e)) => return Err(e),
        }
    };
}

/// Run `op` for the caller: reads and logged updates now, sensitive actions
/// prepared for confirmation.
pub async fn run(ctx: &Ctx<'_>, op: &Op) -> Result<Outcome, ApiError> {
    if op.staff_only() && !ctx.caller.identity.staff {
        return Ok(Outcome::Answer(
            "That is a platform tool for staff only.".into(),
        ));
    }
    let peers = &ctx.state.peers;
    let caller = ctx.caller;
    match op {
        Op::WalletBalance { org } => {
            let o = resolved!(resolve_org(ctx, org.as_deref()).await);
            let w = read!(
                ctx,
                &peers.org_billing,
                &format!("/v1/organizations/{}/wallet", o.id),
                views::Wallet
            );
            Ok(Outcome::Answer(format!(
                "The wallet of {} holds {}.",
                o.name,
                money::format(w.balance_minor, &w.currency)
            )))
        }
        Op::TokenBalance { org } => {
            let o = resolved!(resolve_org(ctx, org.as_deref()).await);
            let n = read!(
                ctx,
                &peers.org_billing,
                &format!("/v1/organizations/{}/tokens", o.id),
                views::TokenBalance
            )
            .balance;
            Ok(Outcome::Answer(format!(
                "{} has {} AI tokens.",
                o.name,
                money::group(u128::from(n.unsigned_abs()))
            )))
        }
        Op::ListOrgs => {
            let mut orgs = read!(
                ctx,
                &peers.org_billing,
                "/v1/organizations",
                Vec<views::Organization>
            );
            if let Some(scope) = ctx.scope {
                orgs.retain(|o| o.id == scope);
            }
            if orgs.is_empty() {
                return Ok(Outcome::Answer(
                    "You do not belong to any organization yet.".into(),
                ));
            }
            let lines: Vec<String> = orgs
                .iter()
                .map(|o| {
                    let role = caller
                        .identity
                        .role_in(o.id)
                        .map_or("member", |r| r.as_str());
                    format!(
                        "- {} ({}, {}, KYC {}; id {})",
                        o.name, role, o.country, o.kyc_status, o.id
                    )
                })
                .collect();
            Ok(Outcome::Answer(format!(
                "Your organizations ({}):\n{}",
                orgs.len(),
                lines.join("\n")
            )))
        }
        Op::KycStatus { org } => {
            let o = resolved!(resolve_org(ctx, org.as_deref()).await);
            let detail = read!(
                ctx,
                &peers.org_billing,
                &format!("/v1/organizations/{}", o.id),
                views::Organization
            );
            Ok(Outcome::Answer(format!(
                "The KYC status of {} is {} (tier {}).",
                o.name, detail.kyc_status, detail.kyc_tier
            )))
        }
        Op::ListSessions => {
            let sessions = read!(
                ctx,
                &peers.identity,
                "/v1/auth/sessions",
                Vec<views::Session>
            );
            let lines: Vec<String> = sessions
                .iter()
                .map(|s| {
                    format!(
                        "- {} from {}, since {}{}",
                        s.id,
                        s.ip,
                        s.created_at,
                        if s.current { " (this one)" } else { "" }
                    )
                })
                .collect();
            Ok(Outcome::Answer(format!(
                "You have {} active session{}:\n{}",
                sessions.len(),
                if sessions.len() == 1 { "" } else { "s" },
                lines.join("\n")
            )))
        }
        Op::Profile => {
            let p = read!(ctx, &peers.identity, "/v1/profile", views::Profile);
            Ok(Outcome::Answer(format!(
                "Your profile:\n- email: {}\n- name: {}\n- job title: {}\n- phone: {}\n- timezone: {}\n- locale: {}\n- bio: {}",
                p.email, p.name, p.job_title, p.phone, p.timezone, p.locale, p.bio
            )))
        }
        Op::SetJobTitle { text } | Op::SetBio { text } => {
            let (field, label) = match op {
                Op::SetJobTitle { .. } => ("job_title", "job title"),
                _ => ("bio", "bio"),
            };
            let value = text.trim().trim_matches('"').trim();
            if field == "job_title" && value.chars().count() > JOB_TITLE_MAX {
                return Ok(Outcome::Answer(format!(
                    "A job title can be at most {JOB_TITLE_MAX} characters."
                )));
            }
            let r = call(
                &peers.identity,
                caller,
                Method::PATCH,
                "/v1/profile",
                Some(&json!({ field: value })),
                None,
            )
            .await?;
            if !r.ok() {
                return Ok(refusal(&r));
            }
            crate::audit::profile_updated(ctx.state, caller, field).await?;
            Ok(Outcome::Logged(format!("Your {label} is now \"{value}\".")))
        }
        Op::CreateOrg {
            name,
            country,
            legal_type,
        } => {
            let name = clean_name(name);
            if name.is_empty() || name.chars().count() > 200 {
                return Ok(Outcome::Answer(
                    "An organization needs a name of 1 to 200 characters.".into(),
                ));
            }
            let Some((code, country_name)) = crate::countries::resolve(country) else {
                return Ok(Outcome::Answer(format!(
                    "I do not know the country \"{}\"; use its name or ISO code (e.g. DE, TR).",
                    country.trim()
                )));
            };
            let legal_type = match legal_type.as_deref().map(str::trim) {
                None | Some("") | Some("corporate") | Some("company") => "corporate",
                Some("individual") => "individual",
                Some(other) => {
                    return Ok(Outcome::Answer(format!(
                        "The legal type must be corporate or individual, not \"{other}\"."
                    )))
                }
            };
            Ok(Outcome::Staged(Staged {
                kind: "create_org".into(),
                args: json!({"name": name, "legal_type": legal_type, "country": code.to_string()}),
                summary: format!(
                    "Create the organization \"{name}\" ({legal_type}) in {country_name} ({code})"
                ),
            }))
        }
        Op::CreditWallet {
            org,
            amount,
            currency,
        } => {
            let currency = currency.trim().to_uppercase();
            let Some(minor) = money::parse_major(amount) else {
                return Ok(Outcome::Answer(format!(
                    "\"{}\" is not an amount I can credit: use digits, e.g. 1500 or 1,500.00.",
                    amount.trim()
                )));
            };
            let o = resolved!(resolve_org(ctx, Some(org)).await);
            let Some(wallet_currency) = o.wallet_currency.clone() else {
                return Ok(Outcome::Answer(format!("{} has no wallet.", o.name)));
            };
            if wallet_currency != currency {
                return Ok(Outcome::Answer(format!(
                    "The wallet of {} is in {wallet_currency}, not {currency}.",
                    o.name
                )));
            }
            Ok(Outcome::Staged(Staged {
                kind: "credit_wallet".into(),
                args: json!({"org_id": o.id, "org_name": o.name, "amount_minor": minor,
                             "currency": wallet_currency}),
                summary: format!(
                    "Credit {} to {}'s wallet",
                    money::format(minor, &wallet_currency),
                    o.name
                ),
            }))
        }
        Op::GrantTokens { org, amount } => {
            let Some(n) = money::parse_count(amount) else {
                return Ok(Outcome::Answer(format!(
                    "\"{}\" is not a number of tokens I can grant.",
                    amount.trim()
                )));
            };
            let o = resolved!(resolve_org(ctx, Some(org)).await);
            Ok(Outcome::Staged(Staged {
                kind: "grant_tokens".into(),
                args: json!({"org_id": o.id, "org_name": o.name, "amount": n}),
                summary: format!(
                    "Grant {} AI tokens to {}",
                    money::group(u128::from(n.unsigned_abs())),
                    o.name
                ),
            }))
        }
        Op::RevokeSession { session_id } => {
            let Ok(id) = Uuid::parse_str(session_id.trim()) else {
                return Ok(Outcome::Answer(
                    "A session is named by its id (a UUID); \"list my sessions\" shows them."
                        .into(),
                ));
            };
            let sessions = read!(
                ctx,
                &peers.identity,
                "/v1/auth/sessions",
                Vec<views::Session>
            );
            let Some(s) = sessions.into_iter().find(|s| s.id == id) else {
                return Ok(Outcome::Answer(format!("You have no active session {id}.")));
            };
            let this = if s.current {
                ", the one you are using now"
            } else {
                ""
            };
            Ok(Outcome::Staged(Staged {
                kind: "revoke_session".into(),
                args: json!({"session_id": id}),
                summary: format!(
                    "Revoke session {id} (from {}, since {}{this})",
                    s.ip, s.created_at
                ),
            }))
        }
        Op::KycQueue => {
            let items = read!(ctx, &peers.kyc, "/v1/admin/kyc", Vec<views::KycQueued>);
            let what = if items.len() == 1 {
                "KYC submission pending review"
            } else {
                "KYC submissions pending review"
            };
            Ok(Outcome::Answer(listing(&items, what, |k| {
                format!(
                    "- {} ({}), submitted {}; submission {}",
                    k.org_name, k.legal_type, k.created_at, k.id
                )
            })))
        }
        Op::FindOrg { query } => {
            let q = clean_name(query);
            let path = format!("/internal/v1/organizations/lookup?q={}", encode_query(&q));
            let found = read!(ctx, &peers.org_billing, &path, Vec<OrgRef>);
            if found.is_empty() {
                return Ok(Outcome::Answer(format!("No organization matches \"{q}\".")));
            }
            let lines: Vec<String> = found
                .iter()
                .map(|o| {
                    format!(
                        "- {} ({}, KYC {}, wallet {}; id {})",
                        o.name,
                        o.country,
                        o.kyc_status,
                        o.wallet_currency.as_deref().unwrap_or("none"),
                        o.id
                    )
                })
                .collect();
            Ok(Outcome::Answer(format!(
                "Organizations matching \"{q}\":\n{}",
                lines.join("\n")
            )))
        }
        Op::FulfilmentQueue => {
            let items = read!(
                ctx,
                &peers.server_product,
                "/v1/admin/fulfilment",
                Vec<views::FulfilmentQueued>
            );
            let what = if items.len() == 1 {
                "manual order waiting for fulfilment"
            } else {
                "manual orders waiting for fulfilment"
            };
            Ok(Outcome::Answer(listing(&items, what, |s| {
                format!(
                    "- server {} ({}, {}) for organization {}, due {}",
                    s.id,
                    s.hostname,
                    s.sku_id,
                    s.org_id,
                    s.due_at.as_deref().unwrap_or("")
                )
            })))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Tier;

    #[test]
    fn names_lose_their_wrapping() {
        assert_eq!(clean_name("org \"Acme GmbH\"?"), "Acme GmbH");
        assert_eq!(clean_name("Acme GmbH's wallet"), "Acme GmbH");
        assert_eq!(clean_name("organization Acme"), "Acme");
        assert_eq!(clean_name("Org"), "Org");
    }

    #[test]
    fn tier_names_are_their_serialized_names() {
        for t in [Tier::FullOrLoggedAutonomy, Tier::ConfirmationRequired] {
            assert_eq!(serde_json::to_value(t).ok(), Some(json!(t.as_str())));
        }
    }

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(encode_query("Acme & Co"), "Acme%20%26%20Co");
        assert_eq!(encode_query("ş"), "%C5%9F");
    }
}
