//! The assistant's operations. Both engines use these and only these: the
//! rule-based matcher turns a phrasing into an [`Op`], the model names one as a
//! tool call, and [`run`] does the same thing for either, in the same tier.
//!
//! Reads ([`reads`], and the knowledge base's published articles, [`kb`],
//! read from this service's own schema) and job-title/bio updates ([`profile`]) run at once,
//! through the owning service's public route with the caller's own authority
//! (their assertion, signed with agent's caller key): the same handlers and
//! checks as a direct call. The four sensitive operations never run here:
//! [`run`] only prepares them ([`staging`]: resolving names, formatting money)
//! into a [`Staged`](crate::ops::Staged) action that runs when its owner
//! confirms (see [`crate::staged`]). Organizations named by the user are
//! resolved in [`orgs`].

use crate::ops::{Op, Outcome};
use service_kit::ApiError;

#[macro_use]
mod context;
pub mod kb;
pub mod orgs;
pub mod profile;
pub mod reads;
pub mod staging;

pub use context::{call, Ctx, Reply};
pub use orgs::{encode_query, resolve_org};
pub use profile::JOB_TITLE_MAX;

/// Run `op` for the caller: reads and logged updates now, sensitive actions
/// prepared for confirmation.
pub async fn run(ctx: &Ctx<'_>, op: &Op) -> Result<Outcome, ApiError> {
    if op.staff_only() && !ctx.caller.identity.staff {
        return Ok(Outcome::Answer(
            "That is a platform tool for staff only.".into(),
        ));
    }
    match op {
        Op::WalletBalance { org } => reads::wallet_balance(ctx, org.as_deref()).await,
        Op::TokenBalance { org } => reads::token_balance(ctx, org.as_deref()).await,
        Op::ListOrgs => reads::list_orgs(ctx).await,
        Op::KycStatus { org } => reads::kyc_status(ctx, org.as_deref()).await,
        Op::ListSessions => reads::list_sessions(ctx).await,
        Op::Profile => reads::profile(ctx).await,
        Op::SetJobTitle { text } => profile::set(ctx, profile::Field::JobTitle, text).await,
        Op::SetBio { text } => profile::set(ctx, profile::Field::Bio, text).await,
        Op::CreateOrg {
            name,
            country,
            legal_type,
        } => Ok(staging::create_org(name, country, legal_type.as_deref())),
        Op::CreditWallet {
            org,
            amount,
            currency,
        } => staging::credit_wallet(ctx, org, amount, currency).await,
        Op::GrantTokens { org, amount } => staging::grant_tokens(ctx, org, amount).await,
        Op::RevokeSession { session_id } => staging::revoke_session(ctx, session_id).await,
        Op::KycQueue => reads::kyc_queue(ctx).await,
        Op::FindOrg { query } => reads::find_org(ctx, query).await,
        Op::FulfilmentQueue => reads::fulfilment_queue(ctx).await,
        Op::SearchKb { query } => kb::search(ctx, query).await,
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::Tier;
    use serde_json::json;

    #[test]
    fn tier_names_are_their_serialized_names() {
        for t in [Tier::FullOrLoggedAutonomy, Tier::ConfirmationRequired] {
            assert_eq!(serde_json::to_value(t).ok(), Some(json!(t.as_str())));
        }
    }
}
