//! Event contracts: NATS subjects and versioned payloads.
//!
//! Subjects are `core.v1.<aggregate>.<event>` (stream CORE) and
//! `product.v1.<aggregate>.<event>` (stream PRODUCT). A deployment may put a
//! prefix in front of every subject and a suffix behind every stream name (tests
//! use both so that parallel runs never see each other's messages). Each payload
//! travels inside an [`Envelope`] whose `id` is also the JetStream `Nats-Msg-Id`,
//! so a re-published outbox row is dropped by the server's de-duplication.
//! proto-docs/events.md is the catalogue.

use hub_domain::{Currency, MinorUnits, OrgId, ServerId, UserId};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

/// A payload with a fixed subject (relative to the deployment's prefix).
pub trait Event: Serialize + DeserializeOwned {
    const SUBJECT: &'static str;
}

/// What goes on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Envelope<T> {
    pub id: Uuid,
    #[serde(with = "time::serde::rfc3339")]
    pub occurred_at: OffsetDateTime,
    pub data: T,
}

impl<T: Event> Envelope<T> {
    pub fn new(data: T) -> Self {
        Envelope {
            id: Uuid::now_v7(),
            occurred_at: OffsetDateTime::now_utc(),
            data,
        }
    }
}

/// The streams and the subjects they capture (relative to the prefix).
pub const STREAMS: [(&str, &str); 2] = [("CORE", "core.v1.>"), ("PRODUCT", "product.v1.>")];

/// Subject and stream naming for one deployment.
#[derive(Debug, Clone, Default)]
pub struct Naming {
    /// Put in front of every subject, e.g. `t5f3a.`; empty in production.
    pub subject_prefix: String,
    /// Appended to every stream and durable consumer name; empty in production.
    pub stream_suffix: String,
}

impl Naming {
    pub fn subject(&self, relative: &str) -> String {
        format!("{}{}", self.subject_prefix, relative)
    }
    pub fn stream(&self, base: &str) -> String {
        format!("{}{}", base, self.stream_suffix)
    }
    pub fn durable(&self, base: &str) -> String {
        format!("{}{}", base, self.stream_suffix)
    }
}

/// A session or API key stopped being valid (logout, revoke, expiry sweep does not
/// emit). Gateways drop the cached identity for `token_hash` at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CredentialRevoked {
    pub user_id: UserId,
    pub credential_kind: String,
    pub credential_id: Uuid,
    /// Lower-case hex SHA-256 of the token: the gateways' cache key. A hash of a
    /// 256-bit random token cannot be turned back into the token.
    pub token_hash: String,
}
impl Event for CredentialRevoked {
    const SUBJECT: &'static str = "core.v1.auth.credential_revoked";
}

/// Something in a user's identity (name, memberships) changed: gateways drop
/// every cached identity of `user_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdentityChanged {
    pub user_id: UserId,
}
impl Event for IdentityChanged {
    const SUBJECT: &'static str = "core.v1.identity.changed";
}

/// A user deleted their account (`DELETE /v1/auth/me`): identity has erased or
/// pseudonymized what it holds; every service erases the user's own personal
/// data (the agent: memory, activity, conversations, staged actions). Carries
/// only the (now pseudonymous) id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserDeleted {
    pub user_id: UserId,
}
impl Event for UserDeleted {
    const SUBJECT: &'static str = "core.v1.identity.user_deleted";
}

/// Every auditable action, one variant each: producers name actions through
/// this enum only (a misspelt action does not compile). On the wire the action
/// stays a string ([`AuditRecorded::action`]), so identity stores actions of a
/// newer producer it does not know yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AuditAction {
    #[serde(rename = "auth.sign_in")]
    SignIn,
    #[serde(rename = "auth.logout")]
    Logout,
    #[serde(rename = "auth.session_revoked")]
    SessionRevoked,
    #[serde(rename = "user.name_changed")]
    NameChanged,
    #[serde(rename = "profile.updated")]
    ProfileUpdated,
    #[serde(rename = "org.created")]
    OrgCreated,
    #[serde(rename = "org.member_added")]
    MemberAdded,
    #[serde(rename = "org.member_role_changed")]
    MemberRoleChanged,
    #[serde(rename = "org.member_left")]
    MemberLeft,
    #[serde(rename = "org.member_removed")]
    MemberRemoved,
    #[serde(rename = "org.api_key_created")]
    ApiKeyCreated,
    #[serde(rename = "org.api_key_revoked")]
    ApiKeyRevoked,
    #[serde(rename = "org.api_keys_revoked")]
    ApiKeysRevoked,
    #[serde(rename = "member.ai_updated")]
    MemberAiUpdated,
    #[serde(rename = "wallet.credited")]
    WalletCredited,
    #[serde(rename = "tokens.granted")]
    TokensGranted,
    #[serde(rename = "tokens.spent")]
    TokensSpent,
    #[serde(rename = "kyc.submitted")]
    KycSubmitted,
    #[serde(rename = "kyc.approved")]
    KycApproved,
    #[serde(rename = "kyc.rejected")]
    KycRejected,
    #[serde(rename = "kyc.more_info_requested")]
    KycMoreInfoRequested,
    #[serde(rename = "server.ordered")]
    ServerOrdered,
    #[serde(rename = "server.fulfilled")]
    ServerFulfilled,
    #[serde(rename = "server.credentials_read")]
    ServerCredentialsRead,
    #[serde(rename = "server.credentials_rotated")]
    ServerCredentialsRotated,
    #[serde(rename = "server.power")]
    ServerPower,
    #[serde(rename = "server.terminated")]
    ServerTerminated,
    #[serde(rename = "service.activate")]
    ServiceActivated,
    #[serde(rename = "service.suspend")]
    ServiceSuspended,
    #[serde(rename = "service.resize")]
    ServiceResized,
    #[serde(rename = "service.transfer")]
    ServiceTransferred,
    #[serde(rename = "sku.created")]
    SkuCreated,
    #[serde(rename = "sku.updated")]
    SkuUpdated,
    #[serde(rename = "webhook.created")]
    WebhookCreated,
    #[serde(rename = "webhook.deleted")]
    WebhookDeleted,
    #[serde(rename = "webhook.secret_rotated")]
    WebhookSecretRotated,
    #[serde(rename = "agent.action_confirmed")]
    AgentActionConfirmed,
    #[serde(rename = "agent.action_rejected")]
    AgentActionRejected,
    #[serde(rename = "agent.profile_updated")]
    AgentProfileUpdated,
    #[serde(rename = "agent.model_set")]
    AgentModelSet,
    #[serde(rename = "charge.created")]
    ChargeCreated,
    #[serde(rename = "charge.waived")]
    ChargeWaived,
    #[serde(rename = "invoice.issued")]
    InvoiceIssued,
    #[serde(rename = "invoice.converted")]
    InvoiceConverted,
    #[serde(rename = "invoice.voided")]
    InvoiceVoided,
    #[serde(rename = "invoice.updated")]
    InvoiceUpdated,
    #[serde(rename = "payment.recorded")]
    PaymentRecorded,
    #[serde(rename = "invoice.paid_from_wallet")]
    InvoicePaidFromWallet,
    #[serde(rename = "payment_claim.submitted")]
    ClaimSubmitted,
    #[serde(rename = "payment_claim.approved")]
    ClaimApproved,
    #[serde(rename = "payment_claim.rejected")]
    ClaimRejected,
    #[serde(rename = "billing_run.started")]
    BillingRunStarted,
    #[serde(rename = "distributor.created")]
    DistributorCreated,
    #[serde(rename = "distributor.updated")]
    DistributorUpdated,
    #[serde(rename = "distributor.staff_added")]
    DistributorStaffAdded,
    #[serde(rename = "distributor.staff_removed")]
    DistributorStaffRemoved,
    #[serde(rename = "org.suspended")]
    OrgSuspended,
    /// Staff read an organization they are not a member of (its visitor view).
    #[serde(rename = "staff.org_read")]
    StaffOrgRead,
    #[serde(rename = "org.reactivated")]
    OrgReactivated,
    /// Staff disabled a user: their sessions and the API keys they created revoked.
    #[serde(rename = "user.disabled")]
    UserDisabled,
    #[serde(rename = "user.enabled")]
    UserEnabled,
    /// Staff ended every session of a user.
    #[serde(rename = "user.sessions_revoked")]
    UserSessionsRevoked,
    /// An organization's name (owner, manager) or country and legal type
    /// (staff, before KYC is verified) changed.
    #[serde(rename = "org.updated")]
    OrgUpdated,
    /// A staff member (through MFA) made a user staff.
    #[serde(rename = "staff.granted")]
    StaffGranted,
    /// A staff member (through MFA) took a user's staff grant back.
    #[serde(rename = "staff.revoked")]
    StaffRevoked,
    /// A user downloaded their personal data.
    #[serde(rename = "user.data_exported")]
    UserDataExported,
    /// A user deleted their account (personal fields erased or pseudonymized).
    #[serde(rename = "user.deleted")]
    UserDeleted,
    /// The owner closed an organization (nothing running, nothing owed).
    #[serde(rename = "org.closed")]
    OrgClosed,
    /// Staff registered an OAuth client of the OpenID Provider.
    #[serde(rename = "oauth_client.created")]
    OAuthClientCreated,
    /// Staff changed an OAuth client (fields named, or its secret replaced).
    #[serde(rename = "oauth_client.updated")]
    OAuthClientUpdated,
    /// Staff retired an OAuth client.
    #[serde(rename = "oauth_client.retired")]
    OAuthClientRetired,
    #[serde(rename = "project.created")]
    ProjectCreated,
    #[serde(rename = "project.updated")]
    ProjectUpdated,
    #[serde(rename = "project.deleted")]
    ProjectDeleted,
    #[serde(rename = "asset.created")]
    AssetCreated,
    #[serde(rename = "asset.updated")]
    AssetUpdated,
    #[serde(rename = "asset.deleted")]
    AssetDeleted,
    #[serde(rename = "org.invite_created")]
    InviteCreated,
    #[serde(rename = "org.invite_revoked")]
    InviteRevoked,
    #[serde(rename = "org.invite_accepted")]
    InviteAccepted,
    #[serde(rename = "auth.mfa_enrolled")]
    MfaEnrolled,
    #[serde(rename = "auth.mfa_enabled")]
    MfaEnabled,
    #[serde(rename = "auth.mfa_disabled")]
    MfaDisabled,
    #[serde(rename = "auth.mfa_failed")]
    MfaFailed,
    #[serde(rename = "auth.passkey_added")]
    PasskeyAdded,
    #[serde(rename = "auth.passkey_renamed")]
    PasskeyRenamed,
    #[serde(rename = "auth.passkey_deleted")]
    PasskeyDeleted,
    /// A passkey assertion that verified but was refused: its signature
    /// counter went back (a cloned authenticator, WebAuthn §6.1.1).
    #[serde(rename = "auth.passkey_refused")]
    PasskeyRefused,
    #[serde(rename = "kb.category_created")]
    KbCategoryCreated,
    #[serde(rename = "kb.article_created")]
    KbArticleCreated,
    #[serde(rename = "kb.article_updated")]
    KbArticleUpdated,
    #[serde(rename = "kb.article_deleted")]
    KbArticleDeleted,
    #[serde(rename = "proposal.filed")]
    ProposalFiled,
    #[serde(rename = "proposal.status_changed")]
    ProposalStatusChanged,
}

impl AuditAction {
    /// Every action, for documentation and tests.
    pub const ALL: [AuditAction; 94] = [
        AuditAction::SignIn,
        AuditAction::Logout,
        AuditAction::SessionRevoked,
        AuditAction::NameChanged,
        AuditAction::ProfileUpdated,
        AuditAction::OrgCreated,
        AuditAction::MemberAdded,
        AuditAction::MemberRoleChanged,
        AuditAction::MemberLeft,
        AuditAction::MemberRemoved,
        AuditAction::ApiKeyCreated,
        AuditAction::ApiKeyRevoked,
        AuditAction::ApiKeysRevoked,
        AuditAction::MemberAiUpdated,
        AuditAction::WalletCredited,
        AuditAction::TokensGranted,
        AuditAction::TokensSpent,
        AuditAction::KycSubmitted,
        AuditAction::KycApproved,
        AuditAction::KycRejected,
        AuditAction::KycMoreInfoRequested,
        AuditAction::ServerOrdered,
        AuditAction::ServerFulfilled,
        AuditAction::ServerCredentialsRead,
        AuditAction::ServerCredentialsRotated,
        AuditAction::ServerPower,
        AuditAction::ServerTerminated,
        AuditAction::ServiceActivated,
        AuditAction::ServiceSuspended,
        AuditAction::ServiceResized,
        AuditAction::ServiceTransferred,
        AuditAction::SkuCreated,
        AuditAction::SkuUpdated,
        AuditAction::WebhookCreated,
        AuditAction::WebhookDeleted,
        AuditAction::WebhookSecretRotated,
        AuditAction::AgentActionConfirmed,
        AuditAction::AgentActionRejected,
        AuditAction::AgentProfileUpdated,
        AuditAction::AgentModelSet,
        AuditAction::ChargeCreated,
        AuditAction::ChargeWaived,
        AuditAction::InvoiceIssued,
        AuditAction::InvoiceConverted,
        AuditAction::InvoiceVoided,
        AuditAction::InvoiceUpdated,
        AuditAction::PaymentRecorded,
        AuditAction::InvoicePaidFromWallet,
        AuditAction::ClaimSubmitted,
        AuditAction::ClaimApproved,
        AuditAction::ClaimRejected,
        AuditAction::BillingRunStarted,
        AuditAction::DistributorCreated,
        AuditAction::DistributorUpdated,
        AuditAction::DistributorStaffAdded,
        AuditAction::DistributorStaffRemoved,
        AuditAction::OrgSuspended,
        AuditAction::StaffOrgRead,
        AuditAction::UserDisabled,
        AuditAction::UserEnabled,
        AuditAction::UserSessionsRevoked,
        AuditAction::OrgReactivated,
        AuditAction::OrgUpdated,
        AuditAction::StaffGranted,
        AuditAction::StaffRevoked,
        AuditAction::UserDataExported,
        AuditAction::UserDeleted,
        AuditAction::OrgClosed,
        AuditAction::OAuthClientCreated,
        AuditAction::OAuthClientUpdated,
        AuditAction::OAuthClientRetired,
        AuditAction::ProjectCreated,
        AuditAction::ProjectUpdated,
        AuditAction::ProjectDeleted,
        AuditAction::AssetCreated,
        AuditAction::AssetUpdated,
        AuditAction::AssetDeleted,
        AuditAction::InviteCreated,
        AuditAction::InviteRevoked,
        AuditAction::InviteAccepted,
        AuditAction::MfaEnrolled,
        AuditAction::MfaEnabled,
        AuditAction::MfaDisabled,
        AuditAction::MfaFailed,
        AuditAction::PasskeyAdded,
        AuditAction::PasskeyRenamed,
        AuditAction::PasskeyDeleted,
        AuditAction::PasskeyRefused,
        AuditAction::KbCategoryCreated,
        AuditAction::KbArticleCreated,
        AuditAction::KbArticleUpdated,
        AuditAction::KbArticleDeleted,
        AuditAction::ProposalFiled,
        AuditAction::ProposalStatusChanged,
    ];

    /// The action's name on the wire and in `audit_log.action`.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::SignIn => "auth.sign_in",
            AuditAction::Logout => "auth.logout",
            AuditAction::SessionRevoked => "auth.session_revoked",
            AuditAction::NameChanged => "user.name_changed",
            AuditAction::ProfileUpdated => "profile.updated",
            AuditAction::OrgCreated => "org.created",
            AuditAction::MemberAdded => "org.member_added",
            AuditAction::MemberRoleChanged => "org.member_role_changed",
            AuditAction::MemberLeft => "org.member_left",
            AuditAction::MemberRemoved => "org.member_removed",
            AuditAction::ApiKeyCreated => "org.api_key_created",
            AuditAction::ApiKeyRevoked => "org.api_key_revoked",
            AuditAction::ApiKeysRevoked => "org.api_keys_revoked",
            AuditAction::MemberAiUpdated => "member.ai_updated",
            AuditAction::WalletCredited => "wallet.credited",
            AuditAction::TokensGranted => "tokens.granted",
            AuditAction::TokensSpent => "tokens.spent",
            AuditAction::KycSubmitted => "kyc.submitted",
            AuditAction::KycApproved => "kyc.approved",
            AuditAction::KycRejected => "kyc.rejected",
            AuditAction::KycMoreInfoRequested => "kyc.more_info_requested",
            AuditAction::ServerOrdered => "server.ordered",
            AuditAction::ServerFulfilled => "server.fulfilled",
            AuditAction::ServerCredentialsRead => "server.credentials_read",
            AuditAction::ServerCredentialsRotated => "server.credentials_rotated",
            AuditAction::ServerPower => "server.power",
            AuditAction::ServerTerminated => "server.terminated",
            AuditAction::ServiceActivated => "service.activate",
            AuditAction::ServiceSuspended => "service.suspend",
            AuditAction::ServiceResized => "service.resize",
            AuditAction::ServiceTransferred => "service.transfer",
            AuditAction::SkuCreated => "sku.created",
            AuditAction::SkuUpdated => "sku.updated",
            AuditAction::WebhookCreated => "webhook.created",
            AuditAction::WebhookDeleted => "webhook.deleted",
            AuditAction::WebhookSecretRotated => "webhook.secret_rotated",
            AuditAction::AgentActionConfirmed => "agent.action_confirmed",
            AuditAction::AgentActionRejected => "agent.action_rejected",
            AuditAction::AgentProfileUpdated => "agent.profile_updated",
            AuditAction::AgentModelSet => "agent.model_set",
            AuditAction::ChargeCreated => "charge.created",
            AuditAction::ChargeWaived => "charge.waived",
            AuditAction::InvoiceIssued => "invoice.issued",
            AuditAction::InvoiceConverted => "invoice.converted",
            AuditAction::InvoiceVoided => "invoice.voided",
            AuditAction::InvoiceUpdated => "invoice.updated",
            AuditAction::PaymentRecorded => "payment.recorded",
            AuditAction::InvoicePaidFromWallet => "invoice.paid_from_wallet",
            AuditAction::ClaimSubmitted => "payment_claim.submitted",
            AuditAction::ClaimApproved => "payment_claim.approved",
            AuditAction::ClaimRejected => "payment_claim.rejected",
            AuditAction::BillingRunStarted => "billing_run.started",
            AuditAction::DistributorCreated => "distributor.created",
            AuditAction::DistributorUpdated => "distributor.updated",
            AuditAction::DistributorStaffAdded => "distributor.staff_added",
            AuditAction::DistributorStaffRemoved => "distributor.staff_removed",
            AuditAction::OrgSuspended => "org.suspended",
            AuditAction::StaffOrgRead => "staff.org_read",
            AuditAction::UserDisabled => "user.disabled",
            AuditAction::UserEnabled => "user.enabled",
            AuditAction::UserSessionsRevoked => "user.sessions_revoked",
            AuditAction::OrgReactivated => "org.reactivated",
            AuditAction::OrgUpdated => "org.updated",
            AuditAction::StaffGranted => "staff.granted",
            AuditAction::StaffRevoked => "staff.revoked",
            AuditAction::UserDataExported => "user.data_exported",
            AuditAction::UserDeleted => "user.deleted",
            AuditAction::OrgClosed => "org.closed",
            AuditAction::OAuthClientCreated => "oauth_client.created",
            AuditAction::OAuthClientUpdated => "oauth_client.updated",
            AuditAction::OAuthClientRetired => "oauth_client.retired",
            AuditAction::ProjectCreated => "project.created",
            AuditAction::ProjectUpdated => "project.updated",
            AuditAction::ProjectDeleted => "project.deleted",
            AuditAction::AssetCreated => "asset.created",
            AuditAction::AssetUpdated => "asset.updated",
            AuditAction::AssetDeleted => "asset.deleted",
            AuditAction::InviteCreated => "org.invite_created",
            AuditAction::InviteRevoked => "org.invite_revoked",
            AuditAction::InviteAccepted => "org.invite_accepted",
            AuditAction::MfaEnrolled => "auth.mfa_enrolled",
            AuditAction::MfaEnabled => "auth.mfa_enabled",
            AuditAction::MfaDisabled => "auth.mfa_disabled",
            AuditAction::MfaFailed => "auth.mfa_failed",
            AuditAction::PasskeyAdded => "auth.passkey_added",
            AuditAction::PasskeyRenamed => "auth.passkey_renamed",
            AuditAction::PasskeyDeleted => "auth.passkey_deleted",
            AuditAction::PasskeyRefused => "auth.passkey_refused",
            AuditAction::KbCategoryCreated => "kb.category_created",
            AuditAction::KbArticleCreated => "kb.article_created",
            AuditAction::KbArticleUpdated => "kb.article_updated",
            AuditAction::KbArticleDeleted => "kb.article_deleted",
            AuditAction::ProposalFiled => "proposal.filed",
            AuditAction::ProposalStatusChanged => "proposal.status_changed",
        }
    }
}

impl std::fmt::Display for AuditAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An auditable action by a user. Every service publishes these; identity
/// stores them and serves `GET /v1/audit/me`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecorded {
    pub actor_user_id: Option<UserId>,
    pub action: String,
    pub subject: String,
    pub detail: serde_json::Value,
    pub ip: String,
}
impl Event for AuditRecorded {
    const SUBJECT: &'static str = "core.v1.audit.recorded";
}

/// An organization's KYC state changed (a submission, a decision). It names
/// the organization and the state's version only, never personal data:
/// org-billing asks kyc for the state itself (signed internal call) and
/// applies it when newer than what it has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KycChanged {
    pub org_id: OrgId,
    pub version: i64,
}
impl Event for KycChanged {
    const SUBJECT: &'static str = "core.v1.kyc.changed";
}

/// A product event, shaped as webhooks deliver it (stream PRODUCT, subject
/// `product.v1.<kind>`): the JSON body is exactly this, so the dispatcher can
/// sign and send it as it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProductEvent<T> {
    /// Unique; also the `Nats-Msg-Id` and the Standard Webhooks `webhook-id`.
    pub id: Uuid,
    /// The kind, e.g. `server.created`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub org_id: OrgId,
    pub data: T,
}

/// Server lifecycle event kinds (the spec's Events table).
pub const SERVER_CREATED: &str = "server.created";
pub const SERVER_ACTIVE: &str = "server.active";
pub const SERVER_TERMINATED: &str = "server.terminated";

/// Every server lifecycle event's subject (server-product emits them).
pub const SERVER_EVENTS: &str = "product.v1.server.>";

/// The subject (relative to the deployment's prefix) of a product event kind.
pub fn product_subject(kind: &str) -> String {
    format!("product.v1.{kind}")
}

/// The product event kinds webhook endpoints receive (the spec's Events
/// table). Every other kind on the PRODUCT stream is internal (usage for
/// billing) and never leaves the hub.
pub const WEBHOOK_KINDS: [&str; 3] = [SERVER_CREATED, SERVER_ACTIVE, SERVER_TERMINATED];

/// Whether product events of `kind` are delivered to webhook endpoints.
pub fn is_webhook_kind(kind: &str) -> bool {
    WEBHOOK_KINDS.contains(&kind)
}

/// A server's billable usage over one piece of a usage period, priced:
/// kind [`USAGE_RECORDED`], subject [`USAGE_SUBJECT`], in a
/// [`ProductEvent`] whose `org_id` is the organization that used it.
/// server-product writes one whenever a usage period closes (termination,
/// resize, transfer, and at each calendar month's first instant, UTC), in the
/// closing transaction; `[started_at, ended_at)` always lies within one
/// calendar month (UTC), `period`. org-billing turns it into a pending charge,
/// once per `usage_period_id`. A piece that costs nothing (a free SKU, no
/// time) has no event. Pricing: proto-docs/decisions.md, "Usage charges".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageRecorded {
    /// server-product's `usage_periods.id`: one event, and one charge, per piece.
    pub usage_period_id: i64,
    pub server_id: ServerId,
    pub hostname: String,
    pub sku_id: String,
    pub sku_name: String,
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub ended_at: OffsetDateTime,
    /// The calendar month (UTC) of the piece, `YYYY-MM`.
    pub period: String,
    /// Billable hours, or 1 for a whole month (or a piece capped at the
    /// monthly price).
    pub qty: i32,
    pub unit_minor: MinorUnits,
    /// Always `qty * unit_minor`, more than zero.
    pub amount_minor: MinorUnits,
    pub currency: Currency,
}

/// Usage of a server, for billing (internal: never a webhook).
pub const USAGE_RECORDED: &str = "usage.recorded";
/// The subject of [`UsageRecorded`] (relative to the deployment's prefix).
pub const USAGE_SUBJECT: &str = "product.v1.usage.recorded";

/// Hours billed for `[started_at, ended_at)`: every hour begun counts
/// (ceil of the length over 3,600 s); none for an empty or negative span.
pub fn billable_hours(started_at: OffsetDateTime, ended_at: OffsetDateTime) -> i64 {
    let nanos = (ended_at - started_at).whole_nanoseconds();
    if nanos <= 0 {
        return 0;
    }
    let hour = 3_600_000_000_000i128;
    i64::try_from((nanos + hour - 1) / hour).unwrap_or(i64::MAX)
}

/// Bodies of internal (service-to-service) calls, shared by both sides.
pub mod internal {
    use hub_domain::KycStatus;
    use serde::{Deserialize, Serialize};
    use std::collections::BTreeMap;
    use time::OffsetDateTime;

    /// The legal identity an approved KYC submission fixes for its organization.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct LegalIdentity {
        pub legal_name: String,
        pub tax_id: String,
        pub registration_number: String,
        /// line1, line2, city, region, postal_code, country (absent ones "").
        pub registered_address: BTreeMap<String, String>,
    }

    /// An organization's KYC state, as kyc decides it and org-billing shows it
    /// (`PUT`/`GET /internal/v1/organizations/{id}/kyc-state`). Applied only
    /// when `version` is newer than the one shown.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct KycState {
        pub version: i64,
        /// A status outside [`KycStatus`] fails the body's parse.
        pub kyc_status: KycStatus,
        pub kyc_tier: i32,
        #[serde(with = "time::serde::rfc3339::option")]
        pub kyc_verified_at: Option<OffsetDateTime>,
        /// Set once verified; stays when later submissions re-open review.
        pub legal_identity: Option<LegalIdentity>,
    }

    /// An organization's KYC status without its legal identity (`GET
    /// /internal/v1/organizations/{id}/kyc-status`, kyc to server-product,
    /// which may require `verified` before a paid order): nothing sealed is
    /// opened for it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub struct KycStatusOnly {
        pub version: i64,
        /// A status outside [`KycStatus`] fails the body's parse.
        pub kyc_status: KycStatus,
        pub kyc_tier: i32,
    }

    /// A user found (or created) by email (`POST /internal/v1/users`,
    /// identity to org-billing, for distributor observers).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct UserByEmail {
        pub user_id: hub_domain::UserId,
        /// Normalized (trimmed, lower case).
        pub email: String,
    }
}

/// The bodies of public routes that one service reads from another (the agent
/// answering as the caller): the fields it uses, each required. A peer that
/// renames or drops one fails the read with a clear error (the agent answers
/// 502), never a silent zero or empty string. Extra fields are ignored, so a
/// peer may add fields freely.
pub mod views {
    use hub_domain::{
        Currency, KycStatus, LegalType, MinorUnits, OrgId, ServerId, SessionId, SubmissionId,
    };
    use serde::Deserialize;

    /// `GET /v1/organizations/{id}/wallet` (org-billing).
    #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
    pub struct Wallet {
        /// A currency outside [`Currency`] fails the read.
        pub currency: Currency,
        pub balance_minor: MinorUnits,
    }

    /// `GET /v1/organizations/{id}/tokens` (org-billing).
    #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
    pub struct TokenBalance {
        pub balance: i64,
    }

    /// An Organization, as listed (`GET /v1/organizations`) or in detail
    /// (`GET /v1/organizations/{id}`) by org-billing.
    #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
    pub struct Organization {
        pub id: OrgId,
        pub name: String,
        pub country: String,
        pub kyc_status: String,
        pub kyc_tier: i32,
    }

    /// One of the caller's sessions (`GET /v1/auth/sessions`, identity).
    #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
    pub struct Session {
        pub id: SessionId,
        pub ip: String,
        /// RFC 3339, shown as given.
        pub created_at: String,
        pub current: bool,
    }

    /// The caller's profile (`GET /v1/profile`, identity).
    #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
    pub struct Profile {
        pub email: String,
        pub name: String,
        pub phone: String,
        pub job_title: String,
        pub timezone: String,
        pub locale: String,
        pub bio: String,
    }

    /// A submission in the staff queue (`GET /v1/admin/kyc`, kyc).
    #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
    pub struct KycQueued {
        pub id: SubmissionId,
        pub org_name: String,
        pub legal_type: String,
        pub created_at: String,
    }

    /// A manual order waiting (`GET /v1/admin/fulfilment`, server-product).
    #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
    pub struct FulfilmentQueued {
        pub id: ServerId,
        pub hostname: String,
        pub sku_id: String,
        pub org_id: OrgId,
        /// RFC 3339; null for none.
        pub due_at: Option<String>,
    }

    /// An organization a lookup found
    /// (`GET /internal/v1/organizations/lookup?q=`, org-billing for the
    /// agent): org-billing writes this type and the agent reads it.
    #[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
    pub struct FoundOrganization {
        pub id: OrgId,
        pub name: String,
        pub legal_type: LegalType,
        pub country: String,
        pub kyc_status: KycStatus,
        pub wallet_currency: Option<Currency>,
    }

    /// What the member may spend on AI now
    /// (`GET /internal/v1/organizations/{id}/ai-allowance`, org-billing).
    #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
    pub struct AiAllowance {
        pub ai_enabled: bool,
        pub org_balance: i64,
        pub available: i64,
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_renamed_or_missing_field_is_an_error_not_a_zero() {
            let ok: Wallet =
                serde_json::from_str(r#"{"org_id":"x","currency":"TRY","balance_minor":5}"#)
                    .expect("a wallet");
            assert_eq!(ok.balance_minor, MinorUnits(5));
            assert_eq!(ok.currency, Currency::TRY);
            assert!(serde_json::from_str::<Wallet>(r#"{"currency":"TRY","balance":5}"#).is_err());
            assert!(
                serde_json::from_str::<AiAllowance>(r#"{"ai_enabled":true,"org_balance":3}"#)
                    .is_err()
            );
            assert!(serde_json::from_str::<Session>(
                r#"{"id":"not-a-uuid","ip":"","created_at":"","current":true}"#
            )
            .is_err());
        }

        #[test]
        fn a_value_outside_its_enum_is_an_error_not_a_string() {
            let wallet = |currency: &str| {
                serde_json::from_value::<Wallet>(
                    serde_json::json!({"currency": currency, "balance_minor": 5}),
                )
            };
            assert!(wallet("EUR").is_ok());
            for bad in ["GBP", "eur", ""] {
                assert!(wallet(bad).is_err(), "{bad}");
            }
            let found = |legal_type: &str, kyc_status: &str, currency: Option<&str>| {
                serde_json::from_value::<FoundOrganization>(serde_json::json!({
                    "id": "00000000-0000-0000-0000-000000000001", "name": "Acme",
                    "legal_type": legal_type, "country": "TR", "kyc_status": kyc_status,
                    "wallet_currency": currency,
                }))
            };
            let ok = found("corporate", "pending", Some("TRY")).expect("a found organization");
            assert_eq!(
                (ok.legal_type, ok.kyc_status, ok.wallet_currency),
                (
                    LegalType::Corporate,
                    KycStatus::Pending,
                    Some(Currency::TRY)
                )
            );
            assert!(found("individual", "verified", None).is_ok());
            assert!(found("partnership", "pending", Some("TRY")).is_err());
            assert!(found("corporate", "approved", Some("TRY")).is_err());
            assert!(found("corporate", "pending", Some("GBP")).is_err());
            let state = |kyc_status: &str| {
                serde_json::from_value::<crate::internal::KycState>(serde_json::json!({
                    "version": 1, "kyc_status": kyc_status, "kyc_tier": 0,
                    "kyc_verified_at": null, "legal_identity": null,
                }))
            };
            assert_eq!(
                state("rejected").map(|s| s.kyc_status).ok(),
                Some(KycStatus::Rejected)
            );
            assert!(state("approved").is_err());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naming_applies_prefix_and_suffix() {
        let n = Naming {
            subject_prefix: "t1.".into(),
            stream_suffix: "_t1".into(),
        };
        assert_eq!(
            n.subject(AuditRecorded::SUBJECT),
            "t1.core.v1.audit.recorded"
        );
        assert_eq!(n.stream("CORE"), "CORE_t1");
    }

    #[test]
    fn envelopes_round_trip() {
        let e = Envelope::new(IdentityChanged {
            user_id: UserId::from_uuid(Uuid::nil()),
        });
        let s = serde_json::to_string(&e).unwrap_or_default();
        let back: Envelope<IdentityChanged> = serde_json::from_str(&s).expect("round trip");
        assert_eq!(back.id, e.id);
        assert_eq!(back.data, e.data);
    }

    #[test]
    fn audit_actions_name_themselves_as_serde_does() {
        let mut seen = std::collections::HashSet::new();
        for a in AuditAction::ALL {
            let wire = serde_json::to_value(a).unwrap_or_default();
            assert_eq!(
                wire,
                serde_json::Value::String(a.as_str().to_owned()),
                "{a:?}"
            );
            assert!(seen.insert(a.as_str()), "{a:?} named twice");
            let back: AuditAction = serde_json::from_value(wire).expect("round trip");
            assert_eq!(back, a);
        }
    }

    #[test]
    fn server_events_are_the_server_kinds() {
        for k in [SERVER_CREATED, SERVER_ACTIVE, SERVER_TERMINATED] {
            assert!(product_subject(k).starts_with(SERVER_EVENTS.trim_end_matches('>')));
        }
    }

    #[test]
    fn usage_is_a_product_event_but_no_webhook_kind() {
        assert_eq!(product_subject(USAGE_RECORDED), USAGE_SUBJECT);
        assert!(!is_webhook_kind(USAGE_RECORDED));
        for k in [SERVER_CREATED, SERVER_ACTIVE, SERVER_TERMINATED] {
            assert!(is_webhook_kind(k), "{k}");
        }
        assert!(STREAMS
            .iter()
            .any(|(_, pat)| USAGE_SUBJECT.starts_with(pat.trim_end_matches('>'))));
    }

    #[test]
    fn every_hour_begun_is_billed() {
        let t = OffsetDateTime::UNIX_EPOCH;
        let h = |secs: i64| billable_hours(t, t + time::Duration::seconds(secs));
        assert_eq!((h(0), h(1), h(3600), h(3601), h(7200)), (0, 1, 1, 2, 2));
        assert_eq!(billable_hours(t + time::Duration::SECOND, t), 0);
        assert_eq!(
            billable_hours(t, t + time::Duration::milliseconds(1)),
            1,
            "a part of a second is a part of an hour"
        );
    }

    #[test]
    fn every_subject_falls_in_a_stream() {
        for s in [
            CredentialRevoked::SUBJECT,
            IdentityChanged::SUBJECT,
            UserDeleted::SUBJECT,
            AuditRecorded::SUBJECT,
            OrgCreated::SUBJECT,
            MembershipChanged::SUBJECT,
            KycChanged::SUBJECT,
            OrgStatusChanged::SUBJECT,
            OrgAccessChanged::SUBJECT,
        ] {
            assert!(STREAMS
                .iter()
                .any(|(_, pat)| s.starts_with(pat.trim_end_matches('>'))));
        }
    }
}

/// An organization was created; its creator is the first owner. identity makes
/// the membership (the fast path calls it synchronously; this event guarantees it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrgCreated {
    pub org_id: OrgId,
    pub owner_user_id: UserId,
    pub name: String,
}
impl Event for OrgCreated {
    const SUBJECT: &'static str = "core.v1.org.created";
}

/// A membership was added, changed (`role` set) or removed (`role` null).
/// org-billing keeps a replica for member counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MembershipChanged {
    pub org_id: OrgId,
    pub user_id: UserId,
    pub role: Option<hub_domain::Role>,
}
impl Event for MembershipChanged {
    const SUBJECT: &'static str = "core.v1.membership.changed";
}

/// Staff suspended or reactivated an organization (org-billing owns the
/// status). identity applies it to the memberships it resolves; `version`
/// grows with every change, so a late or redelivered event never undoes a
/// newer one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrgStatusChanged {
    pub org_id: OrgId,
    pub status: hub_domain::OrgStatus,
    pub version: i64,
}
impl Event for OrgStatusChanged {
    const SUBJECT: &'static str = "core.v1.org.status_changed";
}

/// Something every member of `org_id` resolves with changed (its status):
/// gateways drop every cached identity holding a membership of it. identity
/// sends it after the change is committed, so the next resolution sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrgAccessChanged {
    pub org_id: OrgId,
}
impl Event for OrgAccessChanged {
    const SUBJECT: &'static str = "core.v1.identity.org_changed";
}
