//! The assistant's vocabulary, as plain data: the operations ([`Op`]), what
//! one gives ([`Outcome`], [`Staged`]), its autonomy [`Tier`] and the
//! organizations a caller may name ([`OrgRef`]). A leaf: it imports nothing of
//! the crate, so the engines, the journal, the state and the tools all depend
//! on it and not on each other.

use event_contracts::views;
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

/// A sensitive action, prepared: exactly the arguments its summary shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Staged {
    pub kind: String,
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
