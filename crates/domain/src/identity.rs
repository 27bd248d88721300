//! The identity shape `GET /v1/auth/me` answers with, and the credential
//! that produced it (carried in the gateway's signed assertion).

use crate::{OrgId, Role, UserId};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    pub org_id: OrgId,
    pub role: Role,
    /// The organization's status: on the wire only while it is suspended or
    /// closed (`"status": "suspended"`), so an active membership is exactly
    /// the spec's `{org_id, role}`. Services refuse members' writes to a
    /// suspended or closed organization from this, without a call
    /// (`service_kit::assertion::Caller::require`).
    #[serde(default, skip_serializing_if = "OrgStatus::is_active")]
    pub status: OrgStatus,
}

/// An organization's status (OrganizationDetail's `status`): staff suspend
/// and reactivate it; its owner closes it, for good. A suspended or closed
/// organization reads normally; its members' and keys' writes are refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrgStatus {
    #[default]
    Active,
    Suspended,
    Closed,
}

crate::text::sqlx_text!(OrgStatus, "organization status");

impl OrgStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OrgStatus::Active => "active",
            OrgStatus::Suspended => "suspended",
            OrgStatus::Closed => "closed",
        }
    }

    pub fn parse(s: &str) -> Option<OrgStatus> {
        match s {
            "active" => Some(OrgStatus::Active),
            "suspended" => Some(OrgStatus::Suspended),
            "closed" => Some(OrgStatus::Closed),
            _ => None,
        }
    }

    pub fn is_active(&self) -> bool {
        *self == OrgStatus::Active
    }

    /// The 403 of a write in a suspended organization.
    pub const SUSPENDED_WRITE: &'static str =
        "organization suspended: its members and API keys cannot change anything until staff reactivate it";
    /// The 403 of a write in a closed organization.
    pub const CLOSED_WRITE: &'static str =
        "organization closed: its records stay readable, nothing in it can change";

    /// The 403 of a member's or key's write while the organization has this
    /// status (None while active).
    pub fn write_refusal(self) -> Option<&'static str> {
        match self {
            OrgStatus::Active => None,
            OrgStatus::Suspended => Some(Self::SUSPENDED_WRITE),
            OrgStatus::Closed => Some(Self::CLOSED_WRITE),
        }
    }
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
        self.membership_in(org_id).map(|m| m.role)
    }

    /// The caller's membership of `org_id`, if any.
    pub fn membership_in(&self, org_id: OrgId) -> Option<&Membership> {
        self.memberships.iter().find(|m| m.org_id == org_id)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialKind {
    Session,
    ApiKey,
    /// An access token of the OpenID Provider (a JWT): acts as its person,
    /// within the organizations it lists; its id is the session it came from.
    /// Not a session: what needs one (account, MFA, sign-in) refuses it.
    AccessToken,
}

impl CredentialKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::Session => "session",
            CredentialKind::ApiKey => "api_key",
            CredentialKind::AccessToken => "access_token",
        }
    }

    pub fn parse(s: &str) -> Option<CredentialKind> {
        match s {
            "session" => Some(CredentialKind::Session),
            "api_key" => Some(CredentialKind::ApiKey),
            "access_token" => Some(CredentialKind::AccessToken),
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
