//! The assistant's operations. Both engines use these and only these: the
//! rule-based matcher turns a phrasing into an [`Op`], the model names one as a
//! tool call, and [`run`] does the same thing for either, in the same tier.
//!
//! Reads ([`reads`]) and job-title/bio updates ([`profile`]) run at once,
//! through the owning service's public route with the caller's own authority
//! (their assertion, signed with agent's caller key): the same handlers and
//! checks as a direct call. The four sensitive operations never run here:
//! [`run`] only prepares them ([`staging`]: resolving names, formatting money)
//! into a [`Staged`](crate::ops::Staged) action that runs when its owner
//! confirms (see [`crate::staged`]). Organizations named by the user are
//! resolved in [`orgs`].

use crate::{
    audit::Trail,
    ops::{Op, Outcome},
    state::{AppState, Lookups, Peers},
};
use hub_domain::OrgId;
use reqwest::Method;
use serde_json::Value;
use service_kit::{assertion::Caller, peer::Peer, ApiError};

/// A read's body, or return its refusal from the handler: `read!(ctx, peer,
/// path)`; with a type, the body as its contract type (event_contracts::views):
/// a body without the fields is a 502, never a default.
macro_rules! read {
    ($ctx:expr, $peer:expr, $path:expr) => {
        match $crate::tools::read($ctx, $peer, $path).await? {
            Ok(body) => body,
            Err(refused) => return Ok(refused),
        }
    };
    ($ctx:expr, $peer:expr, $path:expr, $ty:ty) => {
        $crate::tools::view::<$ty>($path, read!($ctx, $peer, $path))?
    };
}

/// The resolved organization, or return the reply (or error) instead.
macro_rules! resolved {
    ($e:expr) => {
        match $e {
            Ok(o) => o,
            Err(Ok(reply)) => return Ok($crate::ops::Outcome::Answer(reply)),
            Err(Err(e)) => return Err(e),
        }
    };
}

pub mod orgs;
pub mod profile;
pub mod reads;
pub mod staging;

pub use orgs::{encode_query, resolve_org};
pub use profile::JOB_TITLE_MAX;

/// Who asks, the organization `org_id` scoped the request to, and what the
/// operations use: the services they call, the lookup cache, the audit trail.
pub struct Ctx<'a> {
    pub peers: &'a Peers,
    pub lookups: &'a Lookups,
    pub audit: Trail<'a>,
    pub caller: &'a Caller,
    pub scope: Option<OrgId>,
}

impl<'a> Ctx<'a> {
    pub fn new(state: &'a AppState, caller: &'a Caller, scope: Option<OrgId>) -> Ctx<'a> {
        Ctx {
            peers: &state.peers,
            lookups: &state.lookups,
            audit: Trail::of(state),
            caller,
            scope,
        }
    }
}

/// A public route's answer: status and JSON body (null when it has none).
pub struct Reply {
    pub status: u16,
    pub body: Value,
    /// The route asked (named when its answer is not what it should be).
    path: String,
}

impl Reply {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// A refusal's message: the `error` of the service's error body; a 502
    /// naming the route when the refusal has none.
    pub fn error(&self) -> Result<&str, ApiError> {
        self.body["error"].as_str().ok_or_else(|| {
            ApiError::BadGateway(format!(
                "unexpected answer from {}: a refusal ({}) without its error",
                self.path, self.status
            ))
        })
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
    // An answer cut off is no answer; one that is not JSON is not the
    // service's (no body at all is null: nothing to read).
    let bytes = resp.bytes().await.map_err(|e| {
        tracing::warn!(error = %e, path, "a service's answer was cut off");
        ApiError::Unavailable("a service the assistant needs is unavailable, try again".into())
    })?;
    let body = if bytes.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).map_err(|e| {
            ApiError::BadGateway(format!(
                "unexpected answer from {path}: not JSON ({status}): {e}"
            ))
        })?
    };
    Ok(Reply {
        status,
        body,
        path: path.to_owned(),
    })
}

/// A user-facing refusal for a public route's non-2xx answer.
fn refusal(r: &Reply) -> Result<Outcome, ApiError> {
    Ok(match r.status {
        404 => Outcome::Answer("I could not find that among your organizations.".into()),
        403 => Outcome::Answer(format!("You are not allowed to do that: {}.", r.error()?)),
        _ => Outcome::Answer(format!("That did not work: {}.", r.error()?)),
    })
}

/// GET `path` at `peer` as the caller: the body, or the refusal to answer
/// with.
async fn read(ctx: &Ctx<'_>, peer: &Peer, path: &str) -> Result<Result<Value, Outcome>, ApiError> {
    let r = call(peer, ctx.caller, Method::GET, path, None, None).await?;
    Ok(if r.ok() {
        Ok(r.body)
    } else {
        Err(refusal(&r)?)
    })
}

/// A peer's answer as its contract type; 502 naming the route otherwise.
fn view<T: serde::de::DeserializeOwned>(path: &str, body: Value) -> Result<T, ApiError> {
    serde_json::from_value(body)
        .map_err(|e| ApiError::BadGateway(format!("unexpected answer from {path}: {e}")))
}

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

    #[test]
    fn a_wallet_in_an_unknown_currency_is_a_bad_gateway_naming_the_route() {
        use event_contracts::views::Wallet;
        use hub_domain::{Currency, MinorUnits};
        use service_kit::ApiError;
        let path = "/v1/organizations/x/wallet";
        let w: Wallet = super::view(path, json!({"currency": "EUR", "balance_minor": 150000}))
            .expect("a wallet");
        assert_eq!(
            crate::money::format(w.balance_minor, w.currency),
            "1,500.00 EUR"
        );
        assert_eq!(
            (w.currency, w.balance_minor),
            (Currency::EUR, MinorUnits(150000))
        );
        for currency in ["GBP", "eur", ""] {
            match super::view::<Wallet>(path, json!({"currency": currency, "balance_minor": 5})) {
                Err(ApiError::BadGateway(m)) => assert!(m.contains(path), "{m}"),
                other => panic!("{currency}: {:?}", other.map(|w| w.currency)),
            }
        }
    }
}
