//! Typed identifiers. An `OrgId` cannot be passed where a `UserId` is expected,
//! so the organization a query is scoped to is checked by the compiler. On the
//! wire and in Postgres each is its plain UUID (serde and sqlx transparent).

use serde::{Deserialize, Serialize};
use std::{fmt, str::FromStr};
use uuid::Uuid;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(transparent))]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A new time-ordered id (UUIDv7), as the services create rows.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }

            pub const fn from_uuid(id: Uuid) -> Self {
                Self(id)
            }

            pub const fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl From<Uuid> for $name {
            fn from(id: Uuid) -> Self {
                Self(id)
            }
        }

        impl From<$name> for Uuid {
            fn from(id: $name) -> Uuid {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }
    };
}

id_type!(
    /// An organization (tenant).
    OrgId
);
id_type!(
    /// A person (or, for a request made with an API key, the key acting as one).
    UserId
);
id_type!(
    /// An API key of an organization.
    ApiKeyId
);

id_type!(
    /// A browser session (identity).
    SessionId
);
id_type!(
    /// A server ordered through the product API (server-product).
    ServerId
);
id_type!(
    /// A KYC submission (kyc).
    SubmissionId
);
id_type!(
    /// A webhook endpoint (webhook-dispatcher).
    EndpointId
);
id_type!(
    /// A webhook delivery (webhook-dispatcher).
    DeliveryId
);
id_type!(
    /// A conversation with the assistant (agent).
    ConversationId
);
id_type!(
    /// A sensitive action the assistant staged for confirmation (agent).
    StagedActionId
);
id_type!(
    /// A maintenance window (server-product).
    MaintenanceId
);
id_type!(
    /// An invitation to an organization (identity).
    InviteId
);

id_type!(
    /// A project of an organization (org-billing).
    ProjectId
);
id_type!(
    /// An asset of an organization (org-billing).
    AssetId
);
id_type!(
    /// A billing document: proforma or invoice (org-billing).
    InvoiceId
);
id_type!(
    /// A payment recorded against an organization (org-billing).
    PaymentId
);
id_type!(
    /// A payment claim an organization filed for staff to review (org-billing).
    ClaimId
);
id_type!(
    /// A billing run (org-billing).
    RunId
);
id_type!(
    /// A charge of an organization (org-billing).
    ChargeId
);
id_type!(
    /// A distributor entity (org-billing).
    DistributorId
);
id_type!(
    /// A knowledge-base category (agent).
    KbCategoryId
);
id_type!(
    /// A knowledge-base article (agent).
    KbArticleId
);
id_type!(
    /// A platform proposal a customer filed (agent).
    ProposalId
);

impl ApiKeyId {
    /// A request made with an API key acts as the key itself: its principal's
    /// user id is the key's id (no person's id is ever borrowed).
    pub const fn as_principal(self) -> UserId {
        UserId(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn ids_are_their_uuid_on_the_wire(bytes in any::<u128>()) {
            let raw = Uuid::from_u128(bytes);
            let id = OrgId::from_uuid(raw);
            let wire = serde_json::to_string(&raw).expect("uuid serializes");
            prop_assert_eq!(serde_json::to_string(&id).expect("id serializes"), wire.clone());
            let back: OrgId = serde_json::from_str(&wire).expect("id deserializes");
            prop_assert_eq!(back, id);
            prop_assert_eq!(id.to_string().parse::<OrgId>().expect("id parses"), id);
            prop_assert_eq!(ApiKeyId::from_uuid(raw).as_principal().as_uuid(), raw);
        }
    }

    #[test]
    fn garbage_is_not_an_id() {
        assert!("not-a-uuid".parse::<UserId>().is_err());
        assert!(serde_json::from_str::<OrgId>("\"1234\"").is_err());
    }
}
