//! Extractors: who is calling, as handlers take it.

use crate::ApiError;
use actix_web::{dev::Payload, FromRequest, HttpMessage, HttpRequest};
use hub_domain::{
    Capability, Credential, CredentialKind, Identity, Membership, OrgId, OrgStatus, Role,
    ServiceName, UserId,
};
use std::{future::Future, marker::PhantomData, pin::Pin, sync::Arc, time::Duration};
use uuid::Uuid;

use super::claims::{Assertion, VerifyError};
use crate::staff_read::{Audited, StaffReads};
use actix_web::web;

fn assertion_of(req: &HttpRequest) -> Result<Arc<Assertion>, ApiError> {
    req.extensions()
        .get::<Arc<Assertion>>()
        .cloned()
        .ok_or_else(|| ApiError::unauthorized(VerifyError::Missing.message()))
}

type Ready<T> = Pin<Box<dyn Future<Output = Result<T, ApiError>>>>;

/// The services an internal route serves: a marker type names them, so that
/// a handler cannot take an internal request without saying from whom.
pub trait Callers {
    const ALLOWED: &'static [ServiceName];
}

/// Marker types for [`Peer`]: `Peer<from::Kyc>` serves kyc and nobody else.
pub mod from {
    use super::Callers;
    use hub_domain::ServiceName;

    macro_rules! callers {
        ($($name:ident),*) => {$(
            #[doc = concat!("Served to ", stringify!($name), " only.")]
            pub struct $name;
            impl Callers for $name {
                const ALLOWED: &'static [ServiceName] = &[ServiceName::$name];
            }
        )*};
    }
    callers!(
        Identity,
        OrgBilling,
        Kyc,
        ServerProduct,
        WebhookDispatcher,
        Agent
    );
}

/// The caller of an internal route: one of the services `C` names, never the
/// gateway and never some other service holding a valid key; 403 otherwise.
pub struct Peer<C: Callers> {
    pub service: ServiceName,
    _callers: PhantomData<C>,
}

impl<C: Callers> Peer<C> {
    fn of(a: Arc<Assertion>) -> Result<Peer<C>, ApiError> {
        match ServiceName::parse(&a.iss) {
            Some(service) if C::ALLOWED.contains(&service) => Ok(Peer {
                service,
                _callers: PhantomData,
            }),
            _ => Err(ApiError::forbidden(format!(
                "this internal route does not serve {}",
                a.iss
            ))),
        }
    }
}

impl<C: Callers + 'static> FromRequest for Peer<C> {
    type Error = ApiError;
    type Future = Ready<Self>;
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let r = assertion_of(req).and_then(Peer::of);
        Box::pin(async move { r })
    }
}

/// The verified request context: always present behind [`require_assertion`],
/// with or without an identity.
#[derive(Debug, Clone)]
pub struct RequestCtx(pub Arc<Assertion>);

impl RequestCtx {
    pub fn ip(&self) -> &str {
        &self.0.ip
    }
}

impl FromRequest for RequestCtx {
    type Error = ApiError;
    type Future = Ready<Self>;
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let r = assertion_of(req).map(RequestCtx);
        Box::pin(async move { r })
    }
}

/// An authenticated caller (session or API key).
#[derive(Debug, Clone)]
pub struct Caller {
    pub identity: Identity,
    pub credential: Credential,
    pub ip: String,
    /// `identity.memberships` is not the whole list (see [`Assertion`]).
    pub memberships_truncated: bool,
    /// When the sender stops waiting (unix milliseconds), if it will.
    pub deadline_ms: Option<i64>,
    /// The request may change something (any method but GET, HEAD and
    /// OPTIONS): [`require`](Self::require) refuses it in a suspended
    /// organization.
    pub writes: bool,
    /// A staff caller's reads of organizations they are not a member of
    /// (audited after the answer, [`crate::staff_audit`]); None for anyone
    /// else, and for staff outside a served request.
    pub staff_reads: Option<StaffReads>,
}

/// Who takes access away ([`Caller::require_to_reduce`]): a member with their
/// role, or staff acting on an organization (audited as staff).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authority {
    Member(Role),
    Staff,
}

impl Authority {
    pub fn is_staff(self) -> bool {
        self == Authority::Staff
    }
}

/// The 403 of a write in a suspended organization.
pub const SUSPENDED: &str = OrgStatus::SUSPENDED_WRITE;

/// Whether a request with this method may change something.
fn is_write(method: &str) -> bool {
    !matches!(method, "GET" | "HEAD" | "OPTIONS")
}

impl Caller {
    fn from_assertion(a: &Assertion) -> Result<Caller, ApiError> {
        match (&a.identity, a.credential) {
            (Some(identity), Some(credential)) => Ok(Caller {
                identity: identity.clone(),
                credential,
                ip: a.ip.clone(),
                memberships_truncated: a.memberships_truncated,
                deadline_ms: a.deadline_ms,
                writes: is_write(&a.method),
                staff_reads: None,
            }),
            _ => Err(ApiError::unauthorized("authentication required")),
        }
    }

    /// The caller of `req`. A staff caller of a service that audits staff
    /// reads ([`Audited`] in its app data) may read organizations they are
    /// not a member of ([`require`](Self::require)): the request carries
    /// their [`StaffReads`].
    fn of(req: &HttpRequest) -> Result<Caller, ApiError> {
        let mut caller = Caller::from_assertion(&*assertion_of(req)?)?;
        if caller.identity.staff && req.app_data::<web::Data<Audited>>().is_some() {
            let mut ext = req.extensions_mut();
            let reads = ext
                .get::<StaffReads>()
                .cloned()
                .unwrap_or_else(|| StaffReads::new(caller.user_id(), caller.ip.clone()));
            ext.insert(reads.clone());
            caller.staff_reads = Some(reads);
        }
        Ok(caller)
    }

    pub fn user_id(&self) -> UserId {
        self.identity.user_id
    }

    pub fn is_session(&self) -> bool {
        self.credential.kind == CredentialKind::Session
    }

    /// How long until the sender stops waiting, if it said (zero when past).
    pub fn time_left(&self) -> Option<Duration> {
        self.deadline_ms.map(|d| {
            let now = time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
            Duration::from_millis(u64::try_from(i128::from(d) - now).unwrap_or(0))
        })
    }

    /// The caller's role in `org_id` if it grants `cap`. Not a member: 404, the
    /// same answer as for an organization that does not exist, except for
    /// staff reading (not writing) what a visitor may: they read as a
    /// [`Role::Visitor`], audited as a staff read ([`crate::staff_read`]). A
    /// write ([`writes`](Self::writes)) in a suspended organization: 403 naming
    /// the suspension, whatever the role (the status travels in the membership,
    /// so every service refuses it without a call).
    pub fn require(&self, org_id: OrgId, cap: Capability) -> Result<Role, ApiError> {
        let Some(m) = self.identity.membership_in(org_id) else {
            return match &self.staff_reads {
                Some(reads) if !self.writes && Role::Visitor.can(cap) => {
                    reads.note(org_id);
                    Ok(Role::Visitor)
                }
                _ => Err(ApiError::NotFound),
            };
        };
        // The suspension first: every member's write names it, whatever the
        // role (both are 403, so the order reveals nothing).
        self.refuse_suspended_write(m)?;
        if !m.role.can(cap) {
            return Err(ApiError::forbidden(cap.denied_message()));
        }
        Ok(m.role)
    }

    /// [`require`](Self::require) for a read that staff may make of any
    /// organization although a visitor may not (an organization's audit
    /// history): a member whose role holds `cap` passes; else staff reading
    /// pass, audited as a staff read ([`crate::staff_read`]); anyone else gets
    /// what `require` answers (403 naming the roles, or 404).
    pub fn require_or_staff_read(&self, org_id: OrgId, cap: Capability) -> Result<(), ApiError> {
        let refused = match self.require(org_id, cap) {
            Ok(_) => return Ok(()),
            Err(e) => e,
        };
        match &self.staff_reads {
            Some(reads) if !self.writes => {
                reads.note(org_id);
                Ok(())
            }
            _ => Err(refused),
        }
    }

    /// 403 when `org_id` is suspended and this request writes: for writes
    /// whose role check is done elsewhere (a resource's own rules).
    pub fn require_writable(&self, org_id: OrgId) -> Result<(), ApiError> {
        match self.identity.membership_in(org_id) {
            Some(m) => self.refuse_suspended_write(m),
            None => Ok(()),
        }
    }

    /// 403 naming the suspension when this request writes into `m`'s
    /// suspended organization.
    fn refuse_suspended_write(&self, m: &Membership) -> Result<(), ApiError> {
        match m.status.write_refusal() {
            Some(refusal) if self.writes => Err(ApiError::forbidden(refusal)),
            _ => Ok(()),
        }
    }

    /// [`require`](Self::require), for sessions only: a key (even a manager's)
    /// gets 403 naming "session" once it passed the role check.
    pub fn require_session(&self, org_id: OrgId, cap: Capability) -> Result<Role, ApiError> {
        let role = self.require(org_id, cap)?;
        if self.is_session() {
            Ok(role)
        } else {
            Err(ApiError::forbidden(
                "this operation needs a session: API keys cannot manage members or keys",
            ))
        }
    }

    /// The authority for an action that only takes access away in `org_id`
    /// (revoke a key or an invite, remove a member or leave, by session):
    /// [`require_session`](Self::require_session) without the suspension
    /// check, since a suspended organization must still be able to contain a
    /// leak; and staff (not members, or members whose role lacks `cap`) act
    /// on any organization, as [`Authority::Staff`], which the action audits
    /// as staff. Neither a member nor staff: 404.
    pub fn require_to_reduce(&self, org_id: OrgId, cap: Capability) -> Result<Authority, ApiError> {
        let authority = match self.identity.membership_in(org_id) {
            Some(m) if m.role.can(cap) => Authority::Member(m.role),
            _ if self.identity.staff => Authority::Staff,
            Some(_) => return Err(ApiError::forbidden(cap.denied_message())),
            None => return Err(ApiError::NotFound),
        };
        if self.is_session() {
            Ok(authority)
        } else {
            Err(ApiError::forbidden(
                "this operation needs a session: API keys cannot manage members or keys",
            ))
        }
    }

    pub fn require_staff(&self) -> Result<(), ApiError> {
        if self.identity.staff {
            Ok(())
        } else {
            Err(ApiError::forbidden("staff only"))
        }
    }
}

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Ready<Self>;
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let r = Caller::of(req);
        Box::pin(async move { r })
    }
}

/// A caller authenticated with a session token: endpoints marked "session" in
/// the spec refuse API keys with a 401 that says so.
#[derive(Debug, Clone)]
pub struct SessionCaller(pub Caller);

impl SessionCaller {
    pub fn session_id(&self) -> Uuid {
        self.0.credential.id
    }
}

impl std::ops::Deref for SessionCaller {
    type Target = Caller;
    fn deref(&self) -> &Caller {
        &self.0
    }
}

impl FromRequest for SessionCaller {
    type Error = ApiError;
    type Future = Ready<Self>;
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let r = Caller::of(req).and_then(|c| {
            if c.is_session() {
                Ok(SessionCaller(c))
            } else {
                Err(ApiError::unauthorized(
                    "this endpoint needs a session token; API keys and access tokens are not accepted",
                ))
            }
        });
        Box::pin(async move { r })
    }
}

/// A person: a session, or an access token of the OpenID Provider acting
/// for the person who signed in (never an API key). For what a product may
/// do with a person's token (read and edit the profile); what needs the
/// sign-in itself (account, MFA, sessions, authorizing clients) takes a
/// [`SessionCaller`].
#[derive(Debug, Clone)]
pub struct PersonCaller(pub Caller);

impl std::ops::Deref for PersonCaller {
    type Target = Caller;
    fn deref(&self) -> &Caller {
        &self.0
    }
}

impl FromRequest for PersonCaller {
    type Error = ApiError;
    type Future = Ready<Self>;
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let r = Caller::of(req).and_then(|c| {
            if matches!(
                c.credential.kind,
                CredentialKind::Session | CredentialKind::AccessToken
            ) {
                Ok(PersonCaller(c))
            } else {
                Err(ApiError::unauthorized(
                    "this endpoint needs a person's credential; API keys are not accepted",
                ))
            }
        });
        Box::pin(async move { r })
    }
}

/// A staff caller. Put it before the body extractor: a caller who is not staff
/// gets 403 whatever the body (extractors run in parameter order and the
/// first failure answers).
#[derive(Debug, Clone)]
pub struct StaffCaller(pub Caller);

impl std::ops::Deref for StaffCaller {
    type Target = Caller;
    fn deref(&self) -> &Caller {
        &self.0
    }
}

impl FromRequest for StaffCaller {
    type Error = ApiError;
    type Future = Ready<Self>;
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let r = Caller::of(req).and_then(|c| c.require_staff().map(|_| StaffCaller(c)));
        Box::pin(async move { r })
    }
}
