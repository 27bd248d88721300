//! The one lifecycle of a server, which is also the service-contract state
//! machine every product exposes. Every change of state goes through
//! [`transition`]: a conditional UPDATE (`WHERE status = ANY(from)`) in the
//! caller's transaction, so of two concurrent transitions of one server at
//! most one finds the state it needs; the other is refused naming the state
//! it found (a 409 at the edge).
//!
//! ```text
//!  (order, API SKU) ──> provisioning ──provisioned──> active <──start── stopped
//!                            └──failed──> failed        │ ──stop──────────^
//!  (order, manual SKU) ─> pending_fulfilment ─fulfil─> active   reboot: active -> active
//!  active | stopped ──suspend──> suspended ──activate──> active
//!  active | stopped ──resize (plan)──> same state
//!  anything but terminated ──terminate──> terminated (final)
//!  anything but failed/terminated ──transfer (owner of both)──> same state
//!  active | stopped | suspended ──rotate credentials──> same state
//! ```

pub use crate::servers::Action;
use crate::servers::{store, Refused, Row};
use hub_domain::{OrgId, ServerId};
use sqlx::PgConnection;
use time::OffsetDateTime;

/// Move server `id` of `org_id` by `action` at `now`, in the caller's
/// transaction; returns the row after it. [`Refused::NotFound`] if there is
/// no such server in that organization, [`Refused::InvalidTransition`] naming
/// the state it is in when the action does not start from there.
pub async fn transition(
    conn: &mut PgConnection,
    org_id: OrgId,
    id: ServerId,
    action: Action,
    now: OffsetDateTime,
) -> sqlx::Result<Result<Row, Refused>> {
    let moved = store::move_status(conn, org_id, id, action.from(), action.to(), now).await?;
    if let Some(row) = moved {
        return Ok(Ok(row));
    }
    Ok(Err(match store::status_in_org(conn, org_id, id).await? {
        None => Refused::NotFound,
        Some(from) => Refused::InvalidTransition { from, action },
    }))
}

/// [`transition`] of many servers by [`Action::Provisioned`] at `now`, each
/// storing its sealed credentials (`sealed[i]` for `ids[i]`) in the same
/// conditional UPDATE: the provisioning worker's batch. Returns the rows that
/// moved; a server that is not provisioning any more is not among them.
pub async fn provisioned_all(
    conn: &mut PgConnection,
    ids: &[ServerId],
    sealed: &[Vec<u8>],
    now: OffsetDateTime,
) -> sqlx::Result<Vec<Row>> {
    let action = Action::Provisioned;
    let Some(to) = action.to() else {
        return Ok(Vec::new());
    };
    store::move_status_with_credentials(conn, ids, sealed, action.from(), to, now).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::Status;

    #[test]
    fn terminated_is_final_and_every_action_has_a_source() {
        let all = [
            Action::Provisioned,
            Action::Fail,
            Action::Fulfil,
            Action::Stop,
            Action::Start,
            Action::Reboot,
            Action::Suspend,
            Action::Activate,
            Action::Resize,
            Action::Terminate,
            Action::Transfer,
            Action::RotateCredentials,
        ];
        for a in all {
            assert!(!a.from().is_empty(), "{a:?}");
            assert!(
                !a.from().contains(&Status::Terminated),
                "{a:?} leaves terminated"
            );
        }
        assert_eq!(Action::Terminate.to(), Some(Status::Terminated));
        assert!(!Action::Transfer.from().contains(&Status::Failed));
    }
}
