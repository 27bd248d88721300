//! A stored submission and its resource shapes: KYCSubmission (in full) and
//! KYCSubmissionStatus (what other members see). The raw payload is sealed
//! with AES-256-GCM, bound to the submission id; it is opened only to answer
//! the organization's members with KYC reads (owner, manager, finance) and
//! staff, never logged, never in events.

use crate::{payload::Payload, state::AppState};
use hub_domain::{LegalType, OrgId, SubmissionId};
use serde::Serialize;
use serde_json::{Map, Value};
use time::OffsetDateTime;

hub_domain::text_enum! {
    /// Where a submission is in review: the `status` column and the wire carry
    /// [`ReviewStatus::as_str`]. Read through sqlx (`status AS "status:
    /// ReviewStatus"`): a value outside the enum is a decode error, never a
    /// default.
    pub enum ReviewStatus: "submission status" {
        Pending = "pending",
        Approved = "approved",
        Rejected = "rejected",
        MoreInfoRequested = "more_info_requested",
    }
}

/// A submission as stored (every query of [`crate::store`] returns these columns).
pub struct Row {
    pub id: SubmissionId,
    pub org_id: OrgId,
    pub org_name: String,
    pub legal_type: LegalType,
    pub status: ReviewStatus,
    pub payload: Option<Vec<u8>>,
    pub field_keys: Vec<String>,
    pub review_notes: String,
    pub requested_fields: Vec<String>,
    pub reviewed_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
    pub purged_at: Option<OffsetDateTime>,
}

/// The AAD a submission's payload is sealed with.
pub fn aad(id: SubmissionId) -> Vec<u8> {
    format!("kyc-payload:{id}").into_bytes()
}

/// KYCSubmission, plus `address` beside `fields` (both empty once purged)
/// and, in the staff queue, `org_name`.
#[derive(Serialize)]
pub struct Resource {
    pub id: SubmissionId,
    pub org_id: OrgId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub org_name: Option<String>,
    pub legal_type: LegalType,
    pub fields: Map<String, Value>,
    pub address: Map<String, Value>,
    pub status: ReviewStatus,
    pub review_notes: String,
    #[serde(with = "time::serde::rfc3339::option")]
    pub reviewed_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub requested_fields: Vec<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub purged_at: Option<OffsetDateTime>,
}

/// KYCSubmissionStatus: a submission as members without KYC reads see it (the
/// payload is not even opened): no fields, address, notes or requested keys.
#[derive(Serialize)]
pub struct Status {
    pub id: SubmissionId,
    pub org_id: OrgId,
    pub legal_type: LegalType,
    pub status: ReviewStatus,
    #[serde(with = "time::serde::rfc3339::option")]
    pub reviewed_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub purged_at: Option<OffsetDateTime>,
}

impl Row {
    pub fn status_only(self) -> Status {
        Status {
            id: self.id,
            org_id: self.org_id,
            legal_type: self.legal_type,
            status: self.status,
            reviewed_at: self.reviewed_at,
            created_at: self.created_at,
            purged_at: self.purged_at,
        }
    }

    pub fn payload(&self, state: &AppState) -> anyhow::Result<Option<Payload>> {
        match &self.payload {
            None => Ok(None),
            Some(sealed) => Ok(Some(state.sealer.open_json(sealed, &aad(self.id))?)),
        }
    }

    pub fn resource(self, state: &AppState, with_org_name: bool) -> anyhow::Result<Resource> {
        let payload = self.payload(state)?;
        let to_map = |m: &std::collections::BTreeMap<String, String>| {
            m.iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect::<Map<_, _>>()
        };
        let (fields, address) = payload
            .as_ref()
            .map(|p| (to_map(&p.fields), to_map(&p.address)))
            .unwrap_or_default();
        Ok(Resource {
            id: self.id,
            org_id: self.org_id,
            org_name: with_org_name.then_some(self.org_name),
            legal_type: self.legal_type,
            fields,
            address,
            status: self.status,
            review_notes: self.review_notes,
            reviewed_at: self.reviewed_at,
            created_at: self.created_at,
            requested_fields: self.requested_fields,
            purged_at: self.purged_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::ReviewStatus;

    #[test]
    fn statuses_read_back_and_serialize_as_stored() {
        for &s in ReviewStatus::ALL {
            assert_eq!(ReviewStatus::parse(s.as_str()), Some(s));
            assert_eq!(
                serde_json::to_value(s).expect("serialize"),
                serde_json::Value::from(s.as_str())
            );
        }
        assert_eq!(ReviewStatus::parse("withdrawn"), None);
    }
}
