//! Platform proposals: a customer with a session files one (`draft`); staff
//! accept or reject it, and mark an accepted one done. Any other move is a
//! 409 that names the allowed ones. The filer sees their own, staff see all
//! (with the filer's user id). Filing and every move are audit events of the
//! caller (subject `proposal:<id>`; the detail names the status, never the
//! text).

use crate::{
    audit,
    state::AppState,
    store::proposals::{self as store, NewProposal as Row},
};
use event_contracts::AuditAction;
use hub_domain::ProposalId;
use serde::Deserialize;
use serde_json::json;
use service_kit::{assertion::Caller, ApiError, ApiResult};

pub use crate::store::proposals::{Proposal, ProposalStatus};

pub const TITLE_MAX: usize = 200;
pub const TEXT_MAX: usize = 10_000;

/// The moves staff may make.
pub const TRANSITIONS: &[(ProposalStatus, ProposalStatus)] = &[
    (ProposalStatus::Draft, ProposalStatus::Accepted),
    (ProposalStatus::Draft, ProposalStatus::Rejected),
    (ProposalStatus::Accepted, ProposalStatus::Done),
];

/// The status a proposal must be in to move to `to`, if any may.
fn source_of(to: ProposalStatus) -> Option<ProposalStatus> {
    TRANSITIONS
        .iter()
        .find(|(_, t)| *t == to)
        .map(|(from, _)| *from)
}

fn not_allowed(from: ProposalStatus, to: ProposalStatus) -> ApiError {
    ApiError::Conflict(format!(
        "a proposal cannot move from {from} to {to}: the allowed moves are \
         draft -> accepted, draft -> rejected and accepted -> done"
    ))
}

/// `text`, trimmed, or a 400 naming `field`: at most `max` characters as
/// given, not blank, no control characters but tabs and line breaks
/// (`lines`) or none at all.
fn check_text<'a>(field: &str, text: &'a str, max: usize, lines: bool) -> ApiResult<&'a str> {
    let t = text.trim();
    let control = |c: char| c.is_control() && !(lines && matches!(c, '\t' | '\n' | '\r'));
    if t.is_empty() || text.chars().count() > max || text.chars().any(control) {
        let allowed = if lines {
            "no control characters but tabs and line breaks"
        } else {
            "no control characters"
        };
        return Err(ApiError::BadRequest(format!(
            "{field} must be 1 to {max} characters, not blank, {allowed}"
        )));
    }
    Ok(t)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewProposal {
    pub title: String,
    pub problem: String,
    pub proposal: String,
}

/// POST /v1/proposals (session): 201 with the proposal, `draft`.
pub async fn file(state: &AppState, caller: &Caller, p: &NewProposal) -> ApiResult<Proposal> {
    let title = check_text("title", &p.title, TITLE_MAX, false)?;
    let problem = check_text("problem", &p.problem, TEXT_MAX, true)?;
    let proposal = check_text("proposal", &p.proposal, TEXT_MAX, true)?;
    let mut tx = state.pool.begin().await?;
    let mut filed = store::insert(
        &mut tx,
        &Row {
            by: caller.user_id(),
            title,
            problem,
            proposal,
            at: state.clock.now(),
        },
    )
    .await?;
    audit::record_on(
        &mut tx,
        &state.naming,
        caller,
        AuditAction::ProposalFiled,
        format!("proposal:{}", filed.id),
        json!({"proposal_id": filed.id}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    if !caller.identity.staff {
        filed.user_id = None;
    }
    Ok(filed)
}

/// PATCH /v1/admin/proposals/{id} (staff): one of [`TRANSITIONS`], else 409.
pub async fn set_status(
    state: &AppState,
    staff: &Caller,
    id: ProposalId,
    to: ProposalStatus,
) -> ApiResult<Proposal> {
    let mut tx = state.pool.begin().await?;
    let moved = match source_of(to) {
        Some(from) => store::transition(&mut tx, id, from, to, state.clock.now()).await?,
        None => None,
    };
    let Some(moved) = moved else {
        // Not moved: say why (no such proposal, or not from where it is).
        return match store::status(&mut tx, id).await? {
            None => Err(ApiError::NotFound),
            Some(from) => Err(not_allowed(from, to)),
        };
    };
    audit::record_on(
        &mut tx,
        &state.naming,
        staff,
        AuditAction::ProposalStatusChanged,
        format!("proposal:{id}"),
        json!({"proposal_id": id, "status": {"from": source_of(to), "to": to}}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(moved)
}

/// Proposals for `caller`: their own, or everyone's for staff (with the
/// filer's id); newest first.
pub async fn list(
    state: &AppState,
    caller: &Caller,
    after: Option<service_kit::page::After>,
    fetch: i64,
) -> ApiResult<Vec<Proposal>> {
    let staff = caller.identity.staff;
    let by = (!staff).then(|| caller.user_id());
    let mut rows = store::list(&state.pool, by, after, fetch).await?;
    if !staff {
        for r in &mut rows {
            r.user_id = None;
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_bounded_as_given_and_trimmed() {
        assert_eq!(check_text("t", "  a b ", 10, false).expect("fine"), "a b");
        assert!(check_text("t", " \n ", 10, true).is_err());
        assert!(check_text("t", "a\nb", 10, false).is_err());
        assert_eq!(check_text("t", "a\nb\t", 10, true).expect("fine"), "a\nb");
        assert!(check_text("t", "a\u{0}b", 10, true).is_err());
        assert!(check_text("t", "a\u{7}b", 10, true).is_err());
        assert!(check_text("t", &"ş".repeat(10), 10, true).is_ok());
        assert!(check_text("t", &format!("{} ", "ş".repeat(10)), 10, true).is_err());
    }

    #[test]
    fn only_the_three_moves_have_a_source() {
        assert_eq!(
            source_of(ProposalStatus::Accepted),
            Some(ProposalStatus::Draft)
        );
        assert_eq!(
            source_of(ProposalStatus::Rejected),
            Some(ProposalStatus::Draft)
        );
        assert_eq!(
            source_of(ProposalStatus::Done),
            Some(ProposalStatus::Accepted)
        );
        assert_eq!(source_of(ProposalStatus::Draft), None);
    }
}
