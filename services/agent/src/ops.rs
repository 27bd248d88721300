//! The assistant's vocabulary, as plain data: the operations ([`Op`]), what
//! one gives ([`Outcome`], [`Staged`] of a [`StagedKind`]), its autonomy
//! [`Tier`] and the organizations a caller may name ([`OrgRef`]). A leaf: it imports nothing of
//! the crate, so the engines, the journal, the state and the tools all depend
//! on it and not on each other.

use event_contracts::views;
use hub_domain::{Currency, MinorUnits, OrgId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An operation with its arguments as the user (or the model) gave them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    WalletBalance {
        org: Option<String>,
    },
    TokenBalance {
        org: Option<String>,
    },
    ListOrgs,
    KycStatus {
        org: Option<String>,
    },
    ListSessions,
    Profile,
    SetJobTitle {
        text: String,
    },
    SetBio {
        text: String,
    },
    CreateOrg {
        name: String,
        country: String,
        legal_type: Option<String>,
    },
    CreditWallet {
        org: String,
        amount: String,
        currency: String,
    },
    GrantTokens {
        org: String,
        amount: String,
    },
    RevokeSession {
        session_id: String,
    },
    /// Staff: the pending KYC queue.
    KycQueue,
    /// Staff: any organization by name or id.
    FindOrg {
        query: String,
    },
    /// Staff: the manual fulfilment queue.
    FulfilmentQueue,
    /// The published knowledge base, searched by the user's words.
    SearchKb {
        query: String,
    },
}

/// The autonomy tier of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    FullOrLoggedAutonomy,
    ConfirmationRequired,
}

impl Tier {
    /// The tier's name (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::FullOrLoggedAutonomy => "full_or_logged_autonomy",
            Tier::ConfirmationRequired => "confirmation_required",
        }
    }
}

hub_domain::text_enum! {
    /// What a staged action does. Stored as text in `staged_actions.kind` (its
    /// [`as_str`](StagedKind::as_str)); a value outside the enum read back is a
    /// decode error, never a default.
    pub enum StagedKind: "staged action kind" {
        CreateOrg = "create_org",
        CreditWallet = "credit_wallet",
        GrantTokens = "grant_tokens",
        RevokeSession = "revoke_session",
    }
}

hub_domain::text_enum! {
    /// Where a staged action stands (`staged_actions.status`; see
    /// [`crate::staged`] for the states). Stored as its
    /// [`as_str`](StagedStatus::as_str); a value outside the enum read back is a
    /// decode error, never a default.
    pub enum StagedStatus: "staged action status" {
        Staged = "staged",
        Executing = "executing",
        Unknown = "unknown",
        Executed = "executed",
        Failed = "failed",
        Cancelled = "cancelled",
    }
}

/// A staged wallet credit's arguments (its `args`): the organization, and the
/// amount in minor units of the wallet's currency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalletCredit {
    pub org_id: OrgId,
    pub org_name: String,
    pub amount_minor: MinorUnits,
    pub currency: Currency,
}

/// A sensitive action, prepared: exactly the arguments its summary shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Staged {
    pub kind: StagedKind,
    pub args: Value,
    pub summary: String,
}

/// What an operation gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A read, a logged update, or a refusal explained to the user.
    Answer(String),
    /// A logged update that ran (audited).
    Logged(String),
    Staged(Staged),
}

impl Op {
    /// Staff-only tools.
    pub fn staff_only(&self) -> bool {
        matches!(
            self,
            Op::KycQueue | Op::FindOrg { .. } | Op::FulfilmentQueue
        )
    }
}

/// An organization the caller may name: org-billing's lookup answer.
pub type OrgRef = views::FoundOrganization;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_kinds_are_their_serialized_names() {
        for &k in StagedKind::ALL {
            assert_eq!(
                serde_json::to_value(k).ok(),
                Some(Value::String(k.as_str().into()))
            );
            assert_eq!(StagedKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(StagedKind::parse("drop_tables"), None);
        assert_eq!(StagedKind::parse("Create_Org"), None);
    }

    #[test]
    fn staged_statuses_are_their_serialized_names() {
        for &s in StagedStatus::ALL {
            assert_eq!(
                serde_json::to_value(s).ok(),
                Some(Value::String(s.as_str().into()))
            );
            assert_eq!(StagedStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(StagedStatus::parse("done"), None);
        assert_eq!(StagedStatus::parse("Staged"), None);
    }
}
