//! Roles and the one capability table every handler consults.
//!
//! The table is rendered in the repository's ARCHITECTURE.md ("Roles and
//! capabilities"), and the test below spells it out row by row: change the
//! three together. proto-docs/decisions.md ("Authorization") records how it is
//! applied. Staff is not a role: it is a flag on the identity, checked
//! separately.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Organization membership roles, highest authority first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Owner,
    Manager,
    Finance,
    Developer,
    Visitor,
}

crate::text::sqlx_text!(Role, "role");

pub const ROLES: [Role; 5] = [
    Role::Owner,
    Role::Manager,
    Role::Finance,
    Role::Developer,
    Role::Visitor,
];

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Manager => "manager",
            Role::Finance => "finance",
            Role::Developer => "developer",
            Role::Visitor => "visitor",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        ROLES.into_iter().find(|r| r.as_str() == s)
    }

    /// Whether an API key may carry this role (never owner).
    pub fn allowed_for_api_key(self) -> bool {
        self != Role::Owner
    }

    pub fn can(self, cap: Capability) -> bool {
        cap.roles().contains(&self)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a member may do inside an organization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Capability {
    /// Read the organization, its members, tokens, servers, webhooks.
    Read,
    /// Wallet and billing reads.
    FinanceRead,
    /// Manage members, API keys, submit KYC.
    Admin,
    /// Order, power and terminate servers.
    OperateServers,
    /// See a server's access credentials (unsealed in its detail): the roles
    /// that may work on servers, never finance or visitor (least privilege;
    /// decisions.md, "Security review 3: server credentials").
    ServerCredentials,
    /// Create and delete webhook endpoints.
    ManageWebhooks,
    /// Move services between organizations.
    TransferServices,
    /// Read the organization's KYC submissions in full (the submitted fields,
    /// address and review notes); other members see each submission's status.
    KycRead,
}

pub const CAPABILITIES: [Capability; 8] = [
    Capability::Read,
    Capability::FinanceRead,
    Capability::Admin,
    Capability::OperateServers,
    Capability::ServerCredentials,
    Capability::ManageWebhooks,
    Capability::TransferServices,
    Capability::KycRead,
];

impl Capability {
    /// The roles holding this capability: the table itself.
    pub fn roles(self) -> &'static [Role] {
        use Role::*;
        match self {
            Capability::Read => &[Owner, Manager, Finance, Developer, Visitor],
            Capability::FinanceRead => &[Owner, Finance],
            Capability::Admin => &[Owner, Manager],
            Capability::OperateServers => &[Owner, Manager],
            Capability::ServerCredentials => &[Owner, Manager, Developer],
            Capability::ManageWebhooks => &[Owner, Manager, Developer],
            Capability::TransferServices => &[Owner],
            Capability::KycRead => &[Owner, Manager, Finance],
        }
    }

    /// The 403 message: names the role(s) needed.
    pub fn denied_message(self) -> String {
        let names: Vec<&str> = self.roles().iter().map(|r| r.as_str()).collect();
        format!("insufficient role: requires {}", names.join(" or "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip_through_their_names() {
        for r in ROLES {
            assert_eq!(Role::parse(r.as_str()), Some(r));
            let json = serde_json::to_string(&r).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", r.as_str()));
        }
        assert_eq!(Role::parse("Owner"), None);
        assert_eq!(Role::parse("staff"), None);
    }

    #[test]
    fn the_capability_table_matches_the_architecture_guide() {
        // (capability, owner, manager, finance, developer, visitor)
        let table = [
            (Capability::Read, [true, true, true, true, true]),
            (Capability::FinanceRead, [true, false, true, false, false]),
            (Capability::Admin, [true, true, false, false, false]),
            (
                Capability::OperateServers,
                [true, true, false, false, false],
            ),
            (
                Capability::ServerCredentials,
                [true, true, false, true, false],
            ),
            (Capability::ManageWebhooks, [true, true, false, true, false]),
            (
                Capability::TransferServices,
                [true, false, false, false, false],
            ),
            (Capability::KycRead, [true, true, true, false, false]),
        ];
        assert_eq!(
            table.len(),
            CAPABILITIES.len(),
            "every capability is in the table"
        );
        for (cap, row) in table {
            for (role, expected) in ROLES.into_iter().zip(row) {
                assert_eq!(role.can(cap), expected, "{role} {cap:?}");
            }
        }
    }

    #[test]
    fn denial_names_the_needed_role() {
        assert_eq!(
            Capability::FinanceRead.denied_message(),
            "insufficient role: requires owner or finance"
        );
    }

    #[test]
    fn api_keys_never_carry_owner() {
        assert!(!Role::Owner.allowed_for_api_key());
        assert!(Role::Visitor.allowed_for_api_key());
    }
}
