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
//! ```

use crate::servers::{store, Refused, Row, Status};
use hub_domain::OrgId;
use sqlx::PgConnection;
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Provisioned,
    Fail,
    Fulfil,
    Stop,
    Start,
    Reboot,
    Suspend,
    Activate,
    Resize,
    Terminate,
    Transfer,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Provisioned => "complete provisioning of",
            Action::Fail => "fail",
            Action::Fulfil => "fulfil",
            Action::Stop => "stop",
            Action::Start => "start",
            Action::Reboot => "reboot",
            Action::Suspend => "suspend",
            Action::Activate => "activate",
            Action::Resize => "resize",
            Action::Terminate => "terminate",
            Action::Transfer => "transfer",
        }
    }

    /// The states it may start from.
    pub fn from(self) -> &'static [Status] {
        use Status::*;
        match self {
            Action::Provisioned | Action::Fail => &[Provisioning],
            Action::Fulfil => &[PendingFulfilment],
            Action::Stop | Action::Reboot => &[Active],
            Action::Start => &[Stopped],
            Action::Suspend | Action::Resize => &[Active, Stopped],
            Action::Activate => &[Suspended],
            Action::Terminate => &[
                Provisioning,
                PendingFulfilment,
                Active,
                Stopped,
                Suspended,
                Failed,
            ],
            Action::Transfer => &[Provisioning, PendingFulfilment, Active, Stopped, Suspended],
        }
    }

    /// The state it leads to (`None`: unchanged).
    pub fn to(self) -> Option<Status> {
        match self {
            Action::Provisioned | Action::Fulfil | Action::Start | Action::Activate => {
                Some(Status::Active)
            }
            Action::Fail => Some(Status::Failed),
            Action::Stop => Some(Status::Stopped),
            Action::Suspend => Some(Status::Suspended),
            Action::Terminate => Some(Status::Terminated),
            Action::Reboot | Action::Resize | Action::Transfer => None,
        }
    }
}

/// Move server `id` of `org_id` by `action` at `now`, in the caller's
/// transaction; returns the row after it. [`Refused::NotFound`] if there is
/// no such server in that organization, [`Refused::InvalidTransition`] naming
/// the state it is in when the action does not start from there.
pub async fn transition(
    conn: &mut PgConnection,
    org_id: OrgId,
    id: Uuid,
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

#[cfg(test)]
mod tests {
    use super::*;

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
