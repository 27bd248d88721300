//! An organization as the API shows it, and with its status as staff see it.

use hub_domain::{DistributorId, KycStatus, LegalType, OrgId, OrgStatus};
use serde::Serialize;
use time::OffsetDateTime;

/// The spec's Organization.
#[derive(Serialize)]
pub struct Organization {
    pub id: OrgId,
    pub name: String,
    pub legal_type: LegalType,
    pub country: String,
    pub distributor_entity_id: DistributorId,
    pub distributor_entity: String,
    pub kyc_status: KycStatus,
    pub kyc_tier: i32,
}

/// The organization with its status, as staff see it after a change.
#[derive(Serialize)]
pub struct WithStatus {
    #[serde(flatten)]
    pub org: Organization,
    pub status: OrgStatus,
    /// Why staff suspended it (null while active).
    pub status_reason: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub status_changed_at: Option<OffsetDateTime>,
}
