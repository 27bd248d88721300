//! Pure domain types shared by every service.
//!
//! Nothing here does I/O. Values are parsed at the edge (`Email::parse`,
//! `Role::parse`, ...) and, once typed, are valid everywhere.

mod authz;
pub mod catalog;
mod email;
mod identity;
mod ids;
pub mod integer;
mod money;
mod service;
mod text;

pub use authz::{Capability, Role, CAPABILITIES, ROLES};
pub use email::{Email, EmailError};
pub use identity::{Credential, CredentialKind, Identity, Membership, OrgStatus};
pub use ids::{
    ApiKeyId, AssetId, ChargeId, ClaimId, ConversationId, DeliveryId, DistributorId, EndpointId,
    InviteId, InvoiceId, KbArticleId, KbCategoryId, MaintenanceId, OrgId, PaymentId, ProjectId,
    ProposalId, RunId, ServerId, SessionId, StagedActionId, SubmissionId, UserId,
};
pub use money::{
    CountryCode, CountryError, Currency, CurrencyError, KycStatus, LegalType, MinorUnits, MAX_MINOR,
};
pub use service::ServiceName;
pub use text::TextEnum;
