//! Signing: a [`Minter`] per receiver and key.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use hub_domain::{Credential, Identity};
use ring::hmac;
use secrecy::{ExposeSecret, SecretString};
use uuid::Uuid;

use super::claims::{now_unix, sha256_hex, Assertion, RequestFacts};

pub(super) fn hmac_key(k: &SecretString, what: &str) -> anyhow::Result<hmac::Key> {
    let k = k.expose_secret();
    anyhow::ensure!(k.len() >= 16, "{what}: a key must be at least 16 bytes");
    Ok(hmac::Key::new(hmac::HMAC_SHA256, k.as_bytes()))
}

/// Signs assertions for one receiver with one key.
#[derive(Clone)]
pub struct Minter {
    iss: String,
    aud: String,
    key: hmac::Key,
}

impl Minter {
    pub fn new(iss: &str, aud: &str, key: &SecretString) -> anyhow::Result<Minter> {
        Ok(Minter {
            iss: iss.to_owned(),
            aud: aud.to_owned(),
            key: hmac_key(key, &format!("the key for {aud}"))?,
        })
    }

    /// Sign an assertion for `facts`; returns (assertion header, signature header).
    pub fn sign(
        &self,
        identity: Option<Identity>,
        credential: Option<Credential>,
        memberships_truncated: bool,
        facts: &RequestFacts<'_>,
    ) -> (String, String) {
        self.sign_assertion(&Assertion {
            iss: self.iss.clone(),
            aud: self.aud.clone(),
            identity,
            credential,
            memberships_truncated,
            ip: facts.ip.to_owned(),
            request_id: facts.request_id.to_owned(),
            jti: Uuid::new_v4(),
            method: facts.method.to_owned(),
            path: facts.path_and_query.to_owned(),
            body_sha256: sha256_hex(facts.body),
            idempotency_key: facts.idempotency_key.map(str::to_owned),
            iat: now_unix(),
            deadline_ms: facts.deadline_ms,
        })
    }

    /// Sign a fully built assertion (tests forge odd ones with this).
    pub fn sign_assertion(&self, a: &Assertion) -> (String, String) {
        let json = serde_json::to_vec(a).unwrap_or_default();
        let payload = URL_SAFE_NO_PAD.encode(json);
        let tag = hmac::sign(&self.key, payload.as_bytes());
        (payload, hex::encode(tag.as_ref()))
    }
}
