//! A server's stored row, its states, its resource shape, what storage
//! refuses, and a product event before it is stored: the values [`super`]
//! and [`super::store`] share.

use crate::skus::Fulfilment;
use hub_domain::{OrgId, ServerId};
use serde::Serialize;
use service_kit::{outbox, ApiError};
use std::fmt;
use time::OffsetDateTime;

/// The unique constraint on (organization, hostname) of live servers.
pub const HOSTNAME_PER_ORG: &str = "servers_hostname_per_org";

/// A server as stored: every query returns these columns (`org_id` typed).
#[derive(Clone)]
pub struct Row {
    pub id: ServerId,
    pub org_id: OrgId,
    pub sku_id: String,
    pub hostname: String,
    pub status: Status,
    pub fulfilment: Fulfilment,
    pub provider_ref: Option<String>,
    pub credentials: Option<Vec<u8>>,
    pub due_at: Option<OffsetDateTime>,
    pub failure: Option<String>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    pub activated_at: Option<OffsetDateTime>,
    pub terminated_at: Option<OffsetDateTime>,
}

/// A server as lists and events show it (never with credentials).
#[derive(Serialize, Clone, Debug)]
pub struct Server {
    pub id: ServerId,
    pub org_id: OrgId,
    pub sku_id: String,
    pub hostname: String,
    pub status: Status,
    pub fulfilment: Fulfilment,
    #[serde(with = "time::serde::rfc3339::option")]
    pub due_at: Option<OffsetDateTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub activated_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub terminated_at: Option<OffsetDateTime>,
}

/// A move of the server lifecycle ([`crate::lifecycle::transition`] applies
/// it): the states it starts from and the state it leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Provisioned,
    Fail,
    Fulfil,
    Stop,
    Start,
    Reboot,
    Suspend,
    Activate,
    Resize,
    Terminate,
    Transfer,
    /// A new root password at the provider (API-backed servers that have
    /// credentials).
    RotateCredentials,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Provisioned => "complete provisioning of",
            Action::Fail => "fail",
            Action::Fulfil => "fulfil",
            Action::Stop => "stop",
            Action::Start => "start",
            Action::Reboot => "reboot",
            Action::Suspend => "suspend",
            Action::Activate => "activate",
            Action::Resize => "resize",
            Action::Terminate => "terminate",
            Action::Transfer => "transfer",
            Action::RotateCredentials => "rotate the credentials of",
        }
    }

    /// The states it may start from.
    pub fn from(self) -> &'static [Status] {
        use Status::*;
        match self {
            Action::Provisioned | Action::Fail => &[Provisioning],
            Action::Fulfil => &[PendingFulfilment],
            Action::Stop | Action::Reboot => &[Active],
            Action::Start => &[Stopped],
            Action::Suspend | Action::Resize => &[Active, Stopped],
            Action::RotateCredentials => &[Active, Stopped, Suspended],
            Action::Activate => &[Suspended],
            Action::Terminate => &[
                Provisioning,
                PendingFulfilment,
                Active,
                Stopped,
                Suspended,
                Failed,
            ],
            Action::Transfer => &[Provisioning, PendingFulfilment, Active, Stopped, Suspended],
        }
    }

    /// The state it leads to (`None`: unchanged).
    pub fn to(self) -> Option<Status> {
        match self {
            Action::Provisioned | Action::Fulfil | Action::Start | Action::Activate => {
                Some(Status::Active)
            }
            Action::Fail => Some(Status::Failed),
            Action::Stop => Some(Status::Stopped),
            Action::Suspend => Some(Status::Suspended),
            Action::Terminate => Some(Status::Terminated),
            Action::Reboot | Action::Resize | Action::Transfer | Action::RotateCredentials => None,
        }
    }
}

hub_domain::text_enum! {
    /// The states of a server ([`crate::lifecycle`] moves it between them); the
    /// wire and the `status` column carry [`Status::as_str`]. Read through sqlx
    /// (`status AS "status: Status"`): a value outside the enum is a decode
    /// error, never a default.
    pub enum Status: "server status" {
        Provisioning = "provisioning",
        PendingFulfilment = "pending_fulfilment",
        Active = "active",
        Stopped = "stopped",
        Suspended = "suspended",
        Failed = "failed",
        Terminated = "terminated",
    }
}

/// Why storage refused a server step: its answer, mapped to the client's
/// error at the edge (`From<Refused> for ApiError`, the same status and
/// message the routes have always given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No such server (in that organization): 404.
    NotFound,
    /// `action` does not start from state `from`: 409.
    InvalidTransition { from: Status, action: Action },
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::NotFound => f.write_str("no such server"),
            Refused::InvalidTransition { from, action } => {
                write!(f, "cannot {} a server that is {from}", action.name())
            }
        }
    }
}

impl std::error::Error for Refused {}

impl From<Refused> for ApiError {
    fn from(r: Refused) -> Self {
        match r {
            Refused::NotFound => ApiError::NotFound,
            Refused::InvalidTransition { .. } => ApiError::Conflict(r.to_string()),
        }
    }
}

impl Row {
    pub fn server(&self) -> Server {
        Server {
            id: self.id,
            org_id: self.org_id,
            sku_id: self.sku_id.clone(),
            hostname: self.hostname.clone(),
            status: self.status,
            fulfilment: self.fulfilment,
            due_at: self.due_at,
            failure: self.failure.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            activated_at: self.activated_at,
            terminated_at: self.terminated_at,
        }
    }
}

/// `t` as Postgres stores it (`timestamptz` keeps microseconds): a row made
/// here before it is stored reads as it will read back.
pub fn stored_time(t: OffsetDateTime) -> OffsetDateTime {
    t.replace_nanosecond(t.nanosecond() / 1_000 * 1_000)
        .unwrap_or(t)
}

/// The AAD a server's credentials are sealed with.
pub fn credentials_aad(id: ServerId) -> Vec<u8> {
    format!("server-credentials:{id}").into_bytes()
}

/// A product event of a server, made before it is stored: its row of the
/// history (`events`) and its outbox message carry the same payload.
pub struct Event {
    pub org_id: OrgId,
    pub server_id: ServerId,
    pub created_at: OffsetDateTime,
    pub message: outbox::Message,
}
