//! The four sensitive operations, prepared and never run here: each checks and
//! resolves what the user gave (names, countries, amounts, sessions) into a
//! [`Staged`] action whose summary shows exactly its arguments; it runs when
//! its owner confirms it ([`crate::staged`]).

use super::{context::Ctx, orgs::resolve_org};
use crate::{
    money,
    ops::{Outcome, Staged, StagedKind, WalletCredit},
};
use event_contracts::views;
use hub_domain::MinorUnits;
use serde_json::json;
use service_kit::ApiError;

type Answered = Result<Outcome, ApiError>;

/// Prepare creating an organization (no service is asked: org-billing checks
/// it when it runs).
pub fn create_org(name: &str, country: &str, legal_type: Option<&str>) -> Outcome {
    let name = super::orgs::clean_name(name);
    if name.is_empty() || name.chars().count() > 200 {
        return Outcome::Answer("An organization needs a name of 1 to 200 characters.".into());
    }
    let Some((code, country_name)) = crate::countries::resolve(country) else {
        return Outcome::Answer(format!(
            "I do not know the country \"{}\"; use its name or ISO code (e.g. DE, TR).",
            country.trim()
        ));
    };
    let legal_type = match legal_type.map(str::trim) {
        None | Some("") | Some("corporate") | Some("company") => "corporate",
        Some("individual") => "individual",
        Some(other) => {
            return Outcome::Answer(format!(
                "The legal type must be corporate or individual, not \"{other}\"."
            ))
        }
    };
    Outcome::Staged(Staged {
        kind: StagedKind::CreateOrg,
        args: json!({"name": name, "legal_type": legal_type, "country": code.to_string()}),
        summary: format!(
            "Create the organization \"{name}\" ({legal_type}) in {country_name} ({code})"
        ),
    })
}

/// Prepare a wallet credit: the amount in the wallet's own currency only.
pub async fn credit_wallet(ctx: &Ctx<'_>, org: &str, amount: &str, currency: &str) -> Answered {
    let asked = currency.trim().to_uppercase();
    let Some(minor) = money::parse_major(amount) else {
        return Ok(Outcome::Answer(format!(
            "\"{}\" is not an amount I can credit: use digits, e.g. 1500 or 1,500.00.",
            amount.trim()
        )));
    };
    let o = resolved!(resolve_org(ctx, Some(org)).await);
    // The lookup's answer carries the wallet's currency as a `Currency`
    // (parsed where it was read); what the user wrote is only compared to it.
    let Some(currency) = o.wallet_currency else {
        return Ok(Outcome::Answer(format!("{} has no wallet.", o.name)));
    };
    if currency.as_str() != asked {
        return Ok(Outcome::Answer(format!(
            "The wallet of {} is in {}, not {asked}.",
            o.name,
            currency.as_str()
        )));
    }
    let amount = MinorUnits(minor);
    let summary = format!(
        "Credit {} to {}'s wallet",
        money::format(amount, currency),
        o.name
    );
    let args = WalletCredit {
        org_id: o.id,
        org_name: o.name,
        amount_minor: amount,
        currency,
    };
    Ok(Outcome::Staged(Staged {
        kind: StagedKind::CreditWallet,
        args: serde_json::to_value(args).map_err(|e| ApiError::internal(e))?,
        summary,
    }))
}

/// Prepare an AI-token grant.
pub async fn grant_tokens(ctx: &Ctx<'_>, org: &str, amount: &str) -> Answered {
    let Some(n) = money::parse_count(amount) else {
        return Ok(Outcome::Answer(format!(
            "\"{}\" is not a number of tokens I can grant.",
            amount.trim()
        )));
    };
    let o = resolved!(resolve_org(ctx, Some(org)).await);
    Ok(Outcome::Staged(Staged {
        kind: StagedKind::GrantTokens,
        args: json!({"org_id": o.id, "org_name": o.name, "amount": n}),
        summary: format!(
            "Grant {} AI tokens to {}",
            money::group(u128::from(n.unsigned_abs())),
            o.name
        ),
    }))
}

/// Prepare revoking one of the caller's active sessions.
pub async fn revoke_session(ctx: &Ctx<'_>, session_id: &str) -> Answered {
    let Ok(id) = session_id.trim().parse::<hub_domain::SessionId>() else {
        return Ok(Outcome::Answer(
            "A session is named by its id (a UUID); \"list my sessions\" shows them.".into(),
        ));
    };
    let sessions = read!(
        ctx,
        &ctx.peers.identity,
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
        kind: StagedKind::RevokeSession,
        args: json!({"session_id": id}),
        summary: format!(
            "Revoke session {id} (from {}, since {}{this})",
            s.ip, s.created_at
        ),
    }))
}
