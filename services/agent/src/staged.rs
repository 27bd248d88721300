//! Staged actions (stored with their exchange, see [`crate::journal`]):
//! create_org, credit_wallet, grant_tokens and revoke_session
//! are prepared by `POST /v1/agent` and run only when their owner confirms.
//!
//! - A staged action belongs to its caller (404 to anyone else) and expires
//!   `agent.confirm_ttl_secs` (15 minutes) after it was prepared.
//! - It runs with the caller's authority at the moment of confirmation (their
//!   assertion now, not when it was staged), through the owning service's
//!   public route: a caller the route refuses gets that route's answer (a
//!   non-staff credit_wallet: its 403). It runs exactly the stored arguments.
//!
//! Exactly once. The states:
//!
//! ```text
//! staged --confirm--> executing --2xx--------------------------> executed
//!    |                    |     --4xx (a definite refusal)-----> failed
//!    |                    |     --timeout, lost connection, 5xx-> unknown
//!    |                    |     --no connection at all---------> back where it was
//!    +--reject--> cancelled        unknown --confirm--> executing (again)
//! ```
//!
//! - Taking it is one conditional UPDATE to `executing` (staged and
//!   unexpired, or `unknown`), with a lease (`attempt_until`): of concurrent
//!   confirmations exactly one runs; the others get 409 while it runs. An
//!   `executing` action whose lease has passed (its confirmer stopped) is
//!   taken like an `unknown` one.
//! - credit_wallet and grant_tokens carry `Idempotency-Key: agent-<id>`,
//!   bound to the action: an attempt whose outcome is not known leaves it
//!   `unknown` (answered 202: not known yet, confirm again), and confirming it
//!   again sends the very same request with the very same key, so org-billing
//!   replays the first outcome or applies it once. Never "failed" for
//!   something that may have happened; confirming again is possible for
//!   `agent.unknown_retry_secs` after the first confirmation (below
//!   org-billing's key retention).
//! - On a later attempt, only an answer that proves the outcome settles it:
//!   2xx; for the keyed kinds 409 (org-billing's stored refusal); for
//!   revoke_session 404 (the session is not active any more). Anything else
//!   (e.g. the caller lost the authority meanwhile) leaves it `unknown`.
//! - create_org carries no key (org-billing's creation takes none): a later
//!   attempt first looks among the caller's organizations for one that was
//!   not theirs when it was first sent, with its name, country and legal
//!   type, and sends it again only when there is none.

use crate::{
    audit,
    ops::{StagedKind, StagedStatus},
    settings::Settings,
    state::{AppState, Peers},
    store::staged::{self as store, Standing, Taken, Window},
};
use actix_web::{http::StatusCode, HttpResponse};
use hub_domain::{OrgId, StagedActionId};
use reqwest::Method;
use serde_json::{json, Value};
use service_kit::{assertion::Caller, peer::Peer, ApiError, ApiResult};

/// How long an attempt may hold an action: the slowest peer call, a pool
/// checkout and five seconds for the bookkeeping.
pub fn attempt_lease(s: &Settings) -> time::Duration {
    let call = s.identity.timeout_ms.max(s.org_billing.timeout_ms);
    time::Duration::milliseconds((call + s.database.acquire_timeout_ms + 5_000) as i64)
}

const RUNNING: &str =
    "this action is being carried out now; confirm it again in a moment to learn its outcome";

/// Why a staged action cannot be taken (after the conditional update missed).
async fn refusal(
    state: &AppState,
    caller: &Caller,
    id: StagedActionId,
    rejecting: bool,
) -> ApiError {
    match store::standing(&state.pool, id, caller.user_id()).await {
        Err(e) => e.into(),
        Ok(None) => ApiError::NotFound,
        Ok(Some(standing)) => ApiError::conflict(why_not(state, &standing, rejecting)),
    }
}

/// The 409's message for an action standing as `s`.
fn why_not(state: &AppState, s: &Standing, rejecting: bool) -> &'static str {
    let now = state.clock.now();
    let leased = s.status == StagedStatus::Executing && s.attempt_until.is_some_and(|t| t > now);
    let retryable = s
        .decided_at
        .is_some_and(|d| d > now - time::Duration::seconds(state.agent.unknown_retry_secs));
    match s.status {
        StagedStatus::Staged if s.expires_at <= now => "this action expired; ask again",
        StagedStatus::Cancelled => "this action was rejected",
        StagedStatus::Executed | StagedStatus::Failed => "this action was already confirmed",
        _ if rejecting => "this action may already have happened (its outcome is not known yet), so it cannot be rejected; confirm it again to learn its outcome",
        // Taken by another confirmation (or it was free a moment ago).
        StagedStatus::Staged => RUNNING,
        _ if leased || retryable => RUNNING,
        _ => "the outcome of this action was not settled in time and can no longer be checked here; look at the organization before asking again",
    }
}

/// Take the action for an attempt: staged and unexpired now, or `unknown`
/// (or `executing` past its lease) within the retry window.
async fn take(state: &AppState, caller: &Caller, id: StagedActionId) -> ApiResult<Taken> {
    let now = state.clock.now();
    let window = Window {
        now,
        lease_until: now + state.attempt_lease,
        retry_since: now - time::Duration::seconds(state.agent.unknown_retry_secs),
    };
    let orgs: Vec<OrgId> = caller
        .identity
        .memberships
        .iter()
        .map(|m| m.org_id)
        .collect();
    match store::take(&state.pool, id, caller.user_id(), &window, &orgs).await? {
        Some(t) => Ok(t),
        None => Err(refusal(state, caller, id, false).await),
    }
}

/// The public call that carries out a staged action.
fn request(
    kind: StagedKind,
    args: &Value,
    id: StagedActionId,
) -> (Method, String, Option<Value>, Option<String>) {
    let s = |k: &str| args[k].as_str().unwrap_or_default().to_owned();
    let key = Some(idempotency_key(id));
    match kind {
        StagedKind::CreateOrg => (
            Method::POST,
            "/v1/organizations".into(),
            Some(
                json!({"name": s("name"), "legal_type": s("legal_type"), "country": s("country")}),
            ),
            None,
        ),
        StagedKind::CreditWallet => (
            Method::POST,
            format!("/v1/organizations/{}/wallet/credit", s("org_id")),
            Some(
                json!({"amount_minor": args["amount_minor"], "note": "credited through the assistant"}),
            ),
            key,
        ),
        StagedKind::GrantTokens => (
            Method::POST,
            format!("/v1/organizations/{}/tokens/grant", s("org_id")),
            Some(json!({"amount": args["amount"], "reason": "granted through the assistant"})),
            key,
        ),
        StagedKind::RevokeSession => (
            Method::DELETE,
            format!("/v1/auth/sessions/{}", s("session_id")),
            None,
            None,
        ),
    }
}

/// The key every attempt of action `id` carries: bound to the action, so a
/// new staging is a new key and a repeated confirmation is the same one.
pub fn idempotency_key(id: StagedActionId) -> String {
    format!("agent-{id}")
}

/// What one attempt established.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    /// It happened: the route's answer.
    Executed(Value),
    /// The route refused it for certain: nothing happened.
    Failed(u16, Value),
    /// No connection to the owning service could be made: nothing was sent.
    NotSent,
    /// It may or may not have happened (the route's answer, if any, and why).
    Unknown(Option<(u16, Value)>, String),
}

impl Settled {
    fn status(&self, retry: bool) -> StagedStatus {
        match self {
            Settled::Executed(_) => StagedStatus::Executed,
            Settled::Failed(..) => StagedStatus::Failed,
            Settled::NotSent if !retry => StagedStatus::Staged,
            Settled::NotSent | Settled::Unknown(..) => StagedStatus::Unknown,
        }
    }

    fn result(&self) -> Value {
        match self {
            Settled::Executed(body) => json!({"status": 200, "body": body}),
            Settled::Failed(status, body) => json!({"status": status, "body": body}),
            Settled::NotSent => json!({"status": null, "body": {"error": "not sent"}}),
            Settled::Unknown(answer, why) => json!({
                "status": answer.as_ref().map(|a| a.0),
                "body": answer.as_ref().map(|a| a.1.clone()),
                "why": why,
            }),
        }
    }
}

/// What the route's answer `status` proves about a `kind` action, on its
/// first attempt or a later one (`retry`).
pub fn classify(kind: StagedKind, retry: bool, status: u16, body: Value) -> Settled {
    let keyed = matches!(kind, StagedKind::CreditWallet | StagedKind::GrantTokens);
    match status {
        200..=299 => Settled::Executed(body),
        // A second revocation: the session is not active any more.
        404 if retry && kind == StagedKind::RevokeSession => {
            Settled::Executed(json!({"status": "revoked"}))
        }
        // org-billing's stored refusal under the key (or a fresh one: the key
        // was never committed, so nothing happened).
        409 if retry && keyed => Settled::Failed(status, body),
        408 | 429 | 500..=599 => Settled::Unknown(
            Some((status, body)),
            format!("the service answered {status}"),
        ),
        // A refusal now does not undo what an earlier attempt may have done.
        _ if retry => Settled::Unknown(
            Some((status, body)),
            format!("the service refused the check ({status})"),
        ),
        _ => Settled::Failed(status, body),
    }
}

/// Send the action's request (or, for a create_org sent before, first look
/// for what it made).
async fn attempt(peers: &Peers, caller: &Caller, t: &Taken, id: StagedActionId) -> Settled {
    if t.retry() && t.kind == StagedKind::CreateOrg {
        match created_before(&peers.org_billing, caller, t).await {
            Ok(Some(org)) => return Settled::Executed(org),
            Ok(None) => {}
            Err(why) => return Settled::Unknown(None, why),
        }
    }
    let (method, path, body, key) = request(t.kind, &t.args, id);
    let (peer, service) = peer_of(peers, t.kind);
    let sent = peer
        .request(method, &path, Some(caller), body.as_ref(), key.as_deref())
        .await;
    let resp = match sent {
        Ok(resp) => resp,
        Err(e) => {
            let never_connected = e
                .downcast_ref::<reqwest::Error>()
                .is_some_and(reqwest::Error::is_connect);
            tracing::warn!(error = %e, %service, attempt = t.attempts, "a confirmation got no answer");
            return if never_connected {
                Settled::NotSent
            } else {
                Settled::Unknown(None, format!("{service} did not answer in time"))
            };
        }
    };
    let status = resp.status().as_u16();
    let body = match resp.bytes().await {
        Ok(b) => serde_json::from_slice(&b).unwrap_or(Value::Null),
        // The status is known; a 2xx happened whatever its body.
        Err(_) if (200..300).contains(&status) => Value::Null,
        Err(_) => {
            return Settled::Unknown(
                Some((status, Value::Null)),
                format!("{service}'s answer was cut off"),
            )
        }
    };
    classify(t.kind, t.retry(), status, body)
}

/// The service that carries out a `kind` action, and its name in the log.
fn peer_of(peers: &Peers, kind: StagedKind) -> (&Peer, &'static str) {
    match kind {
        StagedKind::RevokeSession => (&peers.identity, "identity"),
        StagedKind::CreateOrg | StagedKind::CreditWallet | StagedKind::GrantTokens => {
            (&peers.org_billing, "org-billing")
        }
    }
}

/// The organization an earlier create_org attempt made, if the caller now has
/// one they did not have when it was first sent, with its name, legal type
/// and country.
async fn created_before(
    org_billing: &Peer,
    caller: &Caller,
    t: &Taken,
) -> Result<Option<Value>, String> {
    let seen = t.seen_orgs.clone().unwrap_or_default();
    let resp = org_billing
        .request(Method::GET, "/v1/organizations", Some(caller), None, None)
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "cannot list the caller's organizations");
            "org-billing did not answer the check".to_owned()
        })?;
    if !resp.status().is_success() {
        return Err(format!(
            "org-billing answered {} to the check",
            resp.status()
        ));
    }
    let bytes = resp
        .bytes()
        .await
        .map_err(|_| "org-billing's answer to the check was cut off".to_owned())?;
    made_since(&bytes, &seen, &t.args)
}

/// In org-billing's list of the caller's organizations (`answer`), the one
/// not among `seen` with the name, legal type and country of `args`. A list
/// whose organizations lack any of these (or an id) proves nothing: `Err`
/// naming the field, and the outcome stays unknown.
fn made_since(answer: &[u8], seen: &[OrgId], args: &Value) -> Result<Option<Value>, String> {
    let malformed =
        |what: String| format!("org-billing's answer to the check is malformed: {what}");
    let orgs: Value =
        serde_json::from_slice(answer).map_err(|e| malformed(format!("not JSON ({e})")))?;
    let all = orgs
        .as_array()
        .ok_or_else(|| malformed("not a list".into()))?;
    for (i, o) in all.iter().enumerate() {
        let field = |k: &str| {
            o[k].as_str()
                .ok_or_else(|| malformed(format!("[{i}].{k} is missing or not a string")))
        };
        let id: OrgId = field("id")?
            .parse()
            .map_err(|_| malformed(format!("[{i}].id is not an id")))?;
        let mut same = true;
        for k in ["name", "legal_type", "country"] {
            same &= Some(field(k)?) == args[k].as_str();
        }
        if same && !seen.contains(&id) {
            return Ok(Some(o.clone()));
        }
    }
    Ok(None)
}

/// The user-facing sentence for an action whose outcome is not known.
pub const NOT_KNOWN_YET: &str = "The outcome is not known yet: it may still happen. Confirm this same action again (the same confirmation_id) to learn it; confirming again does not repeat what already happened. Do not ask for it again: a new request would be a second action.";

/// POST /v1/agent/confirm: run the action once. 200 with the route's answer
/// when it happened; the route's own status and error when it refused; 202
/// when its outcome is not known yet (confirm the same id again); 503 when
/// the owning service could not be reached at all (nothing was sent).
pub async fn confirm(
    state: &AppState,
    caller: &Caller,
    id: StagedActionId,
) -> ApiResult<HttpResponse> {
    let t = take(state, caller, id).await?;
    let settled = attempt(&state.peers, caller, &t, id).await;
    let status = settled.status(t.retry());
    let booked = book(state, caller, id, &t, &settled, status).await;
    if let Err(e) = booked {
        tracing::error!(error = %e, %id, %status, "the outcome of a confirmation was not recorded");
        // The action stays `executing` until its lease passes; confirming it
        // again then settles it without running it twice.
        return Err(ApiError::Unavailable(
            "the outcome of this action could not be recorded; confirm it again in a minute to learn it (it will not run twice)".into(),
        ));
    }
    match settled {
        Settled::Executed(body) => Ok(HttpResponse::Ok().json(json!({
            "status": "executed", "confirmation_id": id, "kind": t.kind,
            "action_summary": t.summary, "result": body,
        }))),
        Settled::Failed(code, body) => {
            let code = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY);
            Ok(HttpResponse::build(code).json(body))
        }
        Settled::NotSent if !t.retry() => Err(ApiError::Unavailable(
            "a service the assistant needs is unavailable: nothing was done; confirm this action again later".into(),
        )),
        Settled::NotSent | Settled::Unknown(..) => Ok(HttpResponse::Accepted().json(json!({
            "status": "unknown", "confirmation_id": id, "kind": t.kind,
            "action_summary": t.summary, "message": NOT_KNOWN_YET,
        }))),
    }
}

/// Record the attempt's outcome and its audit event, and end its lease.
async fn book(
    state: &AppState,
    caller: &Caller,
    id: StagedActionId,
    t: &Taken,
    settled: &Settled,
    status: StagedStatus,
) -> ApiResult<()> {
    let mut tx = state.pool.begin().await?;
    if *settled == Settled::NotSent {
        // Nothing was sent: the attempt does not count.
        store::unsent(&mut tx, id, status).await?;
    } else {
        store::settle(&mut tx, id, status, settled.result()).await?;
        audit::record(
            &mut tx,
            &state.naming,
            caller,
            event_contracts::AuditAction::AgentActionConfirmed,
            json!({"confirmation_id": id, "kind": t.kind, "outcome": status, "attempt": t.attempts}),
        )
        .await?;
    }
    state.outbox.commit(tx).await?;
    Ok(())
}

/// POST /v1/agent/reject: cancel the action (only while it is staged).
pub async fn reject(
    state: &AppState,
    caller: &Caller,
    id: StagedActionId,
) -> ApiResult<HttpResponse> {
    let cancelled = store::cancel(&state.pool, id, caller.user_id(), state.clock.now()).await?;
    let Some((kind, summary)) = cancelled else {
        return Err(refusal(state, caller, id, true).await);
    };
    let mut tx = state.pool.begin().await?;
    audit::record(
        &mut tx,
        &state.naming,
        caller,
        event_contracts::AuditAction::AgentActionRejected,
        json!({"confirmation_id": id, "kind": kind}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(json!({
        "status": "cancelled", "confirmation_id": id, "kind": kind, "action_summary": summary,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_answer_that_proves_it_settles_an_action() {
        let body = json!({"error": "x"});
        let first = |kind, status| classify(kind, false, status, body.clone());
        let again = |kind, status| classify(kind, true, status, body.clone());
        assert_eq!(
            first(StagedKind::CreditWallet, 200),
            Settled::Executed(body.clone())
        );
        assert_eq!(
            first(StagedKind::CreditWallet, 403),
            Settled::Failed(403, body.clone())
        );
        for status in [408, 429, 500, 502, 503, 504] {
            assert!(matches!(
                first(StagedKind::CreditWallet, status),
                Settled::Unknown(..)
            ));
            assert!(matches!(
                first(StagedKind::CreateOrg, status),
                Settled::Unknown(..)
            ));
        }
        // Later attempts: a refusal does not undo an earlier attempt ...
        assert!(matches!(
            again(StagedKind::CreditWallet, 403),
            Settled::Unknown(..)
        ));
        assert!(matches!(
            again(StagedKind::CreateOrg, 409),
            Settled::Unknown(..)
        ));
        // ... but the key's stored refusal, a done revocation and a 2xx do.
        assert_eq!(
            again(StagedKind::GrantTokens, 409),
            Settled::Failed(409, body.clone())
        );
        assert!(matches!(
            again(StagedKind::RevokeSession, 404),
            Settled::Executed(_)
        ));
        assert_eq!(
            first(StagedKind::RevokeSession, 404),
            Settled::Failed(404, body.clone())
        );
        assert_eq!(
            again(StagedKind::CreditWallet, 200),
            Settled::Executed(body.clone())
        );
    }

    #[test]
    fn the_key_is_the_actions() {
        let id = StagedActionId::new();
        let (_, _, _, key) = request(StagedKind::CreditWallet, &json!({"org_id": "o"}), id);
        assert_eq!(key, Some(format!("agent-{id}")));
        assert_eq!(
            Settled::NotSent.status(false),
            StagedStatus::Staged,
            "nothing sent: as it was"
        );
        assert_eq!(Settled::NotSent.status(true), StagedStatus::Unknown);
    }

    #[test]
    fn only_a_well_formed_list_shows_an_organization_made_since() {
        let (old, new) = (OrgId::new(), OrgId::new());
        let args = json!({"name": "Acme", "legal_type": "corporate", "country": "DE"});
        let org = |id: OrgId| json!({"id": id, "name": "Acme", "legal_type": "corporate", "country": "DE"});
        let list = |orgs: Value| made_since(orgs.to_string().as_bytes(), &[old], &args);
        assert_eq!(list(json!([org(old)])), Ok(None));
        assert_eq!(list(json!([org(old), org(new)])), Ok(Some(org(new))));
        let mut other = org(new);
        other["country"] = json!("TR");
        assert_eq!(list(json!([other])), Ok(None));
        for (bad, why) in [
            (json!({"orgs": []}), "not a list"),
            (
                json!([{"id": new, "name": "Acme", "country": "DE"}]),
                "[0].legal_type is missing",
            ),
            (json!([org(old), {"name": "Acme"}]), "[1].id is missing"),
            (
                json!([{"id": "x", "name": "Acme", "legal_type": "corporate", "country": "DE"}]),
                "[0].id is not an id",
            ),
        ] {
            match list(bad.clone()) {
                Err(m) => assert!(m.contains(why), "{bad}: {m}"),
                Ok(found) => panic!("{bad}: {found:?}"),
            }
        }
        assert!(made_since(b"<html>", &[], &args).is_err());
    }
}
