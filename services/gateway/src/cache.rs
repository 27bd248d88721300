//! Resolved bearers, cached briefly by the SHA-256 of the token.
//!
//! Identity announces revocations (`core.v1.auth.credential_revoked`, carrying
//! the token hash), identity changes (`core.v1.identity.changed`, by user) and
//! organization status changes (`core.v1.identity.org_changed`, by
//! organization: every member's and key's entry) on NATS; every replica
//! subscribes and drops the matching entries. While the NATS
//! connection is down the cache is bypassed, so a missed revocation cannot be
//! served from it. An epoch counter stops a resolution that was in flight when
//! an invalidation arrived from re-inserting what was just invalidated.

use bytes::Bytes;
use event_contracts::{
    CredentialRevoked, Envelope, Event, IdentityChanged, Naming, OrgAccessChanged,
};
use futures::StreamExt;
use hub_domain::{Credential, CredentialKind, Identity, OrgId, UserId};
use moka::sync::Cache;
use ring::digest;
use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};
use tokio_util::sync::CancellationToken;

pub type Key = [u8; 32];

/// The invalidations the gateway listens to (core NATS subscriptions):
/// revoked credentials, changed identities, then changed organizations.
pub const LISTENS: &[&str; 3] = &[
    CredentialRevoked::SUBJECT,
    IdentityChanged::SUBJECT,
    OrgAccessChanged::SUBJECT,
];

/// A resolved bearer: the identity, the credential and the ready-made JSON body
/// of `GET /v1/auth/me`.
pub struct Resolved {
    pub identity: Identity,
    pub credential: Credential,
    pub body: Bytes,
    /// Unix seconds when the credential itself expires: never served past it.
    pub expires_at: i64,
}

pub fn key(token: &str) -> Key {
    let mut k = [0u8; 32];
    k.copy_from_slice(digest::digest(&digest::SHA256, token.as_bytes()).as_ref());
    k
}

#[derive(Clone)]
pub struct IdentityCache {
    entries: Cache<Key, Arc<Resolved>>,
    /// Bearers identity refused. A refused token never becomes valid (tokens are
    /// fresh random values, revocation is final), so this is safe to keep and
    /// spares identity's database a flood of garbage tokens.
    refused: Cache<Key, ()>,
    epoch: Arc<AtomicU64>,
    nats: Option<async_nats::Client>,
}

impl IdentityCache {
    pub fn new(
        ttl: Duration,
        max_entries: u64,
        refused_ttl: Duration,
        nats: Option<async_nats::Client>,
    ) -> IdentityCache {
        IdentityCache {
            entries: Cache::builder()
                .time_to_live(ttl)
                .max_capacity(max_entries)
                .support_invalidation_closures()
                .build(),
            refused: Cache::builder()
                .time_to_live(refused_ttl)
                .max_capacity(max_entries)
                .build(),
            epoch: Arc::new(AtomicU64::new(0)),
            nats,
        }
    }

    fn usable(&self) -> bool {
        match &self.nats {
            Some(c) => c.connection_state() == async_nats::connection::State::Connected,
            None => false,
        }
    }

    pub fn get(&self, k: &Key) -> Option<Arc<Resolved>> {
        if !self.usable() {
            return None;
        }
        let hit = self.entries.get(k)?;
        if hit.expires_at <= service_kit::assertion::now_unix() {
            self.entries.invalidate(k);
            return None;
        }
        Some(hit)
    }

    pub fn was_refused(&self, k: &Key) -> bool {
        self.refused.contains_key(k)
    }

    pub fn remember_refused(&self, k: Key) {
        self.refused.insert(k, ());
    }

    /// Read before resolving; pass to [`insert`](Self::insert).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    pub fn insert(&self, k: Key, v: Arc<Resolved>, epoch_before: u64) {
        if self.usable() && self.epoch() == epoch_before {
            self.entries.insert(k, v);
        }
    }

    pub fn invalidate_token(&self, k: &Key) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.entries.invalidate(k);
    }

    /// Drop the access tokens resolved from credential `id` (a session).
    pub fn invalidate_credential(&self, id: uuid::Uuid) {
        self.invalidate_if(move |v| {
            v.credential.kind == CredentialKind::AccessToken && v.credential.id == id
        });
    }

    pub fn invalidate_user(&self, user_id: UserId) {
        self.invalidate_if(move |v| v.identity.user_id == user_id);
    }

    /// Drop every entry holding a membership of `org_id` (its members'
    /// sessions and its keys).
    pub fn invalidate_org(&self, org_id: OrgId) {
        self.invalidate_if(move |v| v.identity.memberships.iter().any(|m| m.org_id == org_id));
    }

    /// Drop every entry `drop` picks (everything, if the cache cannot).
    fn invalidate_if(&self, drop: impl Fn(&Resolved) -> bool + Send + Sync + 'static) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        if let Err(e) = self.entries.invalidate_entries_if(move |_, v| drop(v)) {
            tracing::error!(error = %e, "cannot invalidate selectively; clearing the cache");
            self.entries.invalidate_all();
        }
    }

    /// Apply invalidation events ([`LISTENS`]) until `cancel` fires.
    pub async fn listen(
        self,
        client: async_nats::Client,
        naming: Naming,
        cancel: CancellationToken,
    ) -> anyhow::Result<()> {
        let [revoked, changed, org_changed] = *LISTENS;
        let mut revoked = client.subscribe(naming.subject(revoked)).await?;
        let mut changed = client.subscribe(naming.subject(changed)).await?;
        let mut org_changed = client.subscribe(naming.subject(org_changed)).await?;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                Some(m) = revoked.next() => {
                    match serde_json::from_slice::<Envelope<CredentialRevoked>>(&m.payload) {
                        Ok(env) => {
                            match hex::decode(&env.data.token_hash) {
                                Ok(h) if h.len() == 32 => {
                                    let mut k = [0u8; 32];
                                    k.copy_from_slice(&h);
                                    self.invalidate_token(&k);
                                }
                                _ => self.invalidate_user(env.data.user_id),
                            }
                            // The OpenID Provider's access tokens of a revoked
                            // session are cached under their own hashes, with
                            // the session as their credential.
                            if env.data.credential_kind == CredentialKind::Session.as_str() {
                                self.invalidate_credential(env.data.credential_id);
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "bad credential_revoked event"),
                    }
                }
                Some(m) = changed.next() => {
                    match serde_json::from_slice::<Envelope<IdentityChanged>>(&m.payload) {
                        Ok(env) => self.invalidate_user(env.data.user_id),
                        Err(e) => tracing::warn!(error = %e, "bad identity_changed event"),
                    }
                }
                Some(m) = org_changed.next() => {
                    match serde_json::from_slice::<Envelope<OrgAccessChanged>>(&m.payload) {
                        Ok(env) => self.invalidate_org(env.data.org_id),
                        Err(e) => tracing::warn!(error = %e, "bad org_changed event"),
                    }
                }
                else => break,
            }
        }
        Ok(())
    }
}

impl IdentityCache {
    /// Forget everything (after a NATS reconnect: revocations may have been missed).
    pub fn clear(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.entries.invalidate_all();
    }
}
