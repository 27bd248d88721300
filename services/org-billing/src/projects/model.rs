//! A project as the API shows it.

use hub_domain::{OrgId, ProjectId};
use serde::Serialize;
use time::OffsetDateTime;

/// The spec's Project.
#[derive(Debug, Serialize)]
pub struct Project {
    pub id: ProjectId,
    pub org_id: OrgId,
    pub name: String,
    pub description: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}
