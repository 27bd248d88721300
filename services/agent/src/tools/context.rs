//! What every operation uses: who asks and whom to call ([`Ctx`]), a call to a
//! public route as the caller ([`call`]) and its answer ([`Reply`]), a read's
//! body or its refusal ([`read!`]), and a peer's answer as its contract type.

use crate::{
    audit::Trail,
    ops::Outcome,
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
        match $crate::tools::context::read($ctx, $peer, $path).await? {
            Ok(body) => body,
            Err(refused) => return Ok(refused),
        }
    };
    ($ctx:expr, $peer:expr, $path:expr, $ty:ty) => {
        $crate::tools::context::view::<$ty>($path, read!($ctx, $peer, $path))?
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

/// Who asks, the organization `org_id` scoped the request to, and what the
/// operations use: the services they call, the lookup cache, the audit trail.
pub struct Ctx<'a> {
    /// This service's own schema (the knowledge base).
    pub pool: &'a sqlx::PgPool,
    pub peers: &'a Peers,
    pub lookups: &'a Lookups,
    pub audit: Trail<'a>,
    pub caller: &'a Caller,
    pub scope: Option<OrgId>,
}

impl<'a> Ctx<'a> {
    pub fn new(state: &'a AppState, caller: &'a Caller, scope: Option<OrgId>) -> Ctx<'a> {
        Ctx {
            pool: &state.pool,
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
pub(super) fn refusal(r: &Reply) -> Result<Outcome, ApiError> {
    Ok(match r.status {
        404 => Outcome::Answer("I could not find that among your organizations.".into()),
        403 => Outcome::Answer(format!("You are not allowed to do that: {}.", r.error()?)),
        _ => Outcome::Answer(format!("That did not work: {}.", r.error()?)),
    })
}

/// GET `path` at `peer` as the caller: the body, or the refusal to answer
/// with.
pub(super) async fn read(
    ctx: &Ctx<'_>,
    peer: &Peer,
    path: &str,
) -> Result<Result<Value, Outcome>, ApiError> {
    let r = call(peer, ctx.caller, Method::GET, path, None, None).await?;
    Ok(if r.ok() {
        Ok(r.body)
    } else {
        Err(refusal(&r)?)
    })
}

/// A peer's answer as its contract type; 502 naming the route otherwise.
pub(super) fn view<T: serde::de::DeserializeOwned>(path: &str, body: Value) -> Result<T, ApiError> {
    serde_json::from_value(body)
        .map_err(|e| ApiError::BadGateway(format!("unexpected answer from {path}: {e}")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

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
