//! A distributor entity, its observers and its organizations as the API shows
//! them (the store reads them, the handlers answer with them).

use hub_domain::{Currency, DistributorId, KycStatus, LegalType, OrgId, UserId};
use serde::Serialize;
use time::OffsetDateTime;

hub_domain::text_enum! {
    /// What a member of an entity's staff is (`distributor_staff.role`): an
    /// observer reads the entity's books and changes nothing.
    pub enum StaffRole: "distributor staff role" { Observer = "observer" }
}

/// A distributor entity, with the countries routed to it.
#[derive(Debug, Serialize)]
pub struct Distributor {
    pub id: DistributorId,
    pub name: String,
    pub country: String,
    pub legal_name: String,
    pub tax_id: String,
    pub address: String,
    pub bank_name: String,
    pub bank_iban: String,
    pub bank_swift: String,
    pub contact_phone: String,
    pub contact_email: String,
    pub notes: String,
    /// The entity's share of its collected (paid) invoice totals, in percent.
    pub profit_pct: f64,
    /// The wallet currency of the organizations routed to it.
    pub currency: Currency,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub covers: Vec<String>,
}

/// An observer of an entity.
#[derive(Debug, Serialize)]
pub struct StaffMember {
    pub user_id: UserId,
    pub email: String,
    pub role: StaffRole,
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
}

/// An organization routed to an entity.
#[derive(Debug, Serialize)]
pub struct OrgRow {
    pub id: OrgId,
    pub name: String,
    pub country: String,
    pub legal_type: LegalType,
    pub status: String,
    pub kyc_status: KycStatus,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}
