//! The reads: balances, organizations, KYC, sessions, the profile, and the
//! staff queues. Each asks the owning service's public route as the caller and
//! words its answer; a refusal is explained, not an error.

use super::{
    context::Ctx,
    orgs::{self, resolve_org},
};
use crate::{
    money,
    ops::{OrgRef, Outcome},
};
use event_contracts::views;
use hub_domain::Currency;
use service_kit::ApiError;

type Answered = Result<Outcome, ApiError>;

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

/// "thing" or "things".
fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

pub async fn wallet_balance(ctx: &Ctx<'_>, org: Option<&str>) -> Answered {
    let o = resolved!(resolve_org(ctx, org).await);
    let path = format!("/v1/organizations/{}/wallet", o.id);
    let w = read!(ctx, &ctx.peers.org_billing, &path, views::Wallet);
    Ok(Outcome::Answer(format!(
        "The wallet of {} holds {}.",
        o.name,
        money::format(w.balance_minor, w.currency)
    )))
}

pub async fn token_balance(ctx: &Ctx<'_>, org: Option<&str>) -> Answered {
    let o = resolved!(resolve_org(ctx, org).await);
    let path = format!("/v1/organizations/{}/tokens", o.id);
    let n = read!(ctx, &ctx.peers.org_billing, &path, views::TokenBalance).balance;
    Ok(Outcome::Answer(format!(
        "{} has {} AI tokens.",
        o.name,
        money::group(u128::from(n.unsigned_abs()))
    )))
}

pub async fn list_orgs(ctx: &Ctx<'_>) -> Answered {
    let mut orgs = read!(
        ctx,
        &ctx.peers.org_billing,
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
            let role = ctx
                .caller
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

pub async fn kyc_status(ctx: &Ctx<'_>, org: Option<&str>) -> Answered {
    let o = resolved!(resolve_org(ctx, org).await);
    let path = format!("/v1/organizations/{}", o.id);
    let detail = read!(ctx, &ctx.peers.org_billing, &path, views::Organization);
    Ok(Outcome::Answer(format!(
        "The KYC status of {} is {} (tier {}).",
        o.name, detail.kyc_status, detail.kyc_tier
    )))
}

pub async fn list_sessions(ctx: &Ctx<'_>) -> Answered {
    let sessions = read!(
        ctx,
        &ctx.peers.identity,
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
        plural(sessions.len(), "", "s"),
        lines.join("\n")
    )))
}

pub async fn profile(ctx: &Ctx<'_>) -> Answered {
    let p = read!(ctx, &ctx.peers.identity, "/v1/profile", views::Profile);
    Ok(Outcome::Answer(format!(
        "Your profile:\n- email: {}\n- name: {}\n- job title: {}\n- phone: {}\n- timezone: {}\n- locale: {}\n- bio: {}",
        p.email, p.name, p.job_title, p.phone, p.timezone, p.locale, p.bio
    )))
}

/// Staff: the pending KYC queue.
pub async fn kyc_queue(ctx: &Ctx<'_>) -> Answered {
    let items = read!(ctx, &ctx.peers.kyc, "/v1/admin/kyc", Vec<views::KycQueued>);
    let what = plural(
        items.len(),
        "KYC submission pending review",
        "KYC submissions pending review",
    );
    Ok(Outcome::Answer(listing(&items, what, |k| {
        format!(
            "- {} ({}), submitted {}; submission {}",
            k.org_name, k.legal_type, k.created_at, k.id
        )
    })))
}

/// Staff: any organization by name or id.
pub async fn find_org(ctx: &Ctx<'_>, query: &str) -> Answered {
    let q = orgs::clean_name(query);
    let path = format!(
        "/internal/v1/organizations/lookup?q={}",
        orgs::encode_query(&q)
    );
    let found = read!(ctx, &ctx.peers.org_billing, &path, Vec<OrgRef>);
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
                o.wallet_currency.map_or("none", Currency::as_str),
                o.id
            )
        })
        .collect();
    Ok(Outcome::Answer(format!(
        "Organizations matching \"{q}\":\n{}",
        lines.join("\n")
    )))
}

/// Staff: the manual fulfilment queue.
pub async fn fulfilment_queue(ctx: &Ctx<'_>) -> Answered {
    let items = read!(
        ctx,
        &ctx.peers.server_product,
        "/v1/admin/fulfilment",
        Vec<views::FulfilmentQueued>
    );
    let what = plural(
        items.len(),
        "manual order waiting for fulfilment",
        "manual orders waiting for fulfilment",
    );
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
