//! The identity shape `GET /v1/auth/me` answers with, and the credential
//! that produced it (carried in the gateway's signed assertion).

use crate::{OrgId, Role, UserId};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    pub org_id: OrgId,
    pub role: Role,
}

/// Exactly the spec's Identity resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub user_id: UserId,
    pub email: String,
    pub name: String,
    pub staff: bool,
    pub memberships: Vec<Membership>,
}

impl Identity {
    /// The caller's role in `org_id`, if a member.
    pub fn role_in(&self, org_id: OrgId) -> Option<Role> {
        self.memberships
            .iter()
            .find(|m| m.org_id == org_id)
            .map(|m| m.role)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialKind {
    Session,
    ApiKey,
}

impl CredentialKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::Session => "session",
            CredentialKind::ApiKey => "api_key",
        }
    }

    pub fn parse(s: &str) -> Option<CredentialKind> {
        match s {
            "session" => Some(CredentialKind::Session),
            "api_key" => Some(CredentialKind::ApiKey),
            _ => None,
        }
    }
}

/// Which credential a request was made with: a session (by id) or an API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    pub kind: CredentialKind,
    pub id: Uuid,
}
