//! Staff reading an organization they are not a member of: [`Caller::require`]
//! lets a staff caller's read through with the visitor's view and notes the
//! organization here; [`crate::staff_audit::audit`] (a middleware of every
//! service) then writes one `staff.org_read` audit event per organization
//! read, in the service's outbox, before the answer leaves.
//!
//! [`Caller::require`]: crate::assertion::Caller::require

use hub_domain::{OrgId, UserId};
use std::sync::{Arc, Mutex};

/// App data of a service that audits staff reads (it serves
/// [`crate::staff_audit::audit`]): only there do staff read organizations they
/// are not a member of.
#[derive(Debug, Clone, Copy)]
pub struct Audited;

/// The organizations one staff request read without being a member: shared
/// by the request's callers (its extractors) and the [`audit`] middleware.
/// Only a staff caller's request carries one.
#[derive(Debug, Clone)]
pub struct StaffReads {
    pub actor: UserId,
    pub ip: String,
    orgs: Arc<Mutex<Vec<OrgId>>>,
}

impl StaffReads {
    pub fn new(actor: UserId, ip: String) -> StaffReads {
        StaffReads {
            actor,
            ip,
            orgs: Arc::default(),
        }
    }

    /// Note a read of `org` (once per request).
    pub fn note(&self, org: OrgId) {
        let mut orgs = self.orgs.lock().unwrap_or_else(|e| e.into_inner());
        if !orgs.contains(&org) {
            orgs.push(org);
        }
    }

    /// What was read, emptied.
    pub fn take(&self) -> Vec<OrgId> {
        std::mem::take(&mut *self.orgs.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
