//! Secrets that must be readable again (KYC payloads, webhook signing secrets,
//! server credentials), sealed with AES-256-GCM (ring) under a key id from
//! configuration.
//!
//! Keys are `"<key id>:<base64 of 32 bytes>"`, newest first: the first seals,
//! every one opens (rotation: prepend a new key, re-seal at leisure, drop the
//! old one once nothing references it). A sealed value is
//! `1 | len(key id) | key id | 12-byte random nonce | ciphertext and tag`, and
//! is bound to its context (`aad`, for example the row id), so a ciphertext
//! moved to another row does not open.

use base64::{engine::general_purpose::STANDARD, Engine};
use ring::{
    aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN},
    rand::{SecureRandom, SystemRandom},
};
use secrecy::{ExposeSecret, SecretString};
use std::sync::Arc;

const VERSION: u8 = 1;

#[derive(Clone)]
pub struct Sealer {
    /// (id, key), newest first.
    keys: Arc<Vec<(String, LessSafeKey)>>,
    rng: SystemRandom,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OpenError {
    #[error("sealed value is malformed")]
    Malformed,
    #[error("sealed with key {0:?}, which is not configured")]
    UnknownKey(String),
    #[error("sealed value does not open (tampered, or another context)")]
    Tampered,
}

impl Sealer {
    pub fn new(keys: &[SecretString]) -> anyhow::Result<Sealer> {
        anyhow::ensure!(!keys.is_empty(), "at least one sealing key is required");
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            let (id, b64) = k.expose_secret().split_once(':').ok_or_else(|| {
                anyhow::anyhow!("sealing keys are \"<key id>:<base64 of 32 bytes>\"")
            })?;
            anyhow::ensure!(
                !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_graphic()),
                "a sealing key id is 1 to 64 visible characters"
            );
            let raw = STANDARD
                .decode(b64.trim())
                .map_err(|_| anyhow::anyhow!("sealing key {id}: not base64"))?;
            anyhow::ensure!(raw.len() == 32, "sealing key {id}: must be 32 bytes");
            let key = UnboundKey::new(&AES_256_GCM, &raw)
                .map_err(|_| anyhow::anyhow!("sealing key {id}: rejected"))?;
            out.push((id.to_owned(), LessSafeKey::new(key)));
        }
        Ok(Sealer {
            keys: Arc::new(out),
            rng: SystemRandom::new(),
        })
    }

    /// Seal `plaintext` for the context `aad` with the newest key.
    pub fn seal(&self, plaintext: &[u8], aad: &[u8]) -> anyhow::Result<Vec<u8>> {
        let (id, key) = &self.keys[0];
        let mut nonce = [0u8; NONCE_LEN];
        self.rng
            .fill(&mut nonce)
            .map_err(|_| anyhow::anyhow!("no randomness for a nonce"))?;
        let mut body = plaintext.to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad),
            &mut body,
        )
        .map_err(|_| anyhow::anyhow!("sealing failed"))?;
        let mut out = Vec::with_capacity(2 + id.len() + NONCE_LEN + body.len());
        out.push(VERSION);
        out.push(id.len() as u8);
        out.extend_from_slice(id.as_bytes());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// Open a value sealed for `aad` with any configured key.
    pub fn open(&self, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, OpenError> {
        let (&version, rest) = sealed.split_first().ok_or(OpenError::Malformed)?;
        let (&id_len, rest) = rest.split_first().ok_or(OpenError::Malformed)?;
        if version != VERSION || rest.len() < id_len as usize + NONCE_LEN {
            return Err(OpenError::Malformed);
        }
        let (id, rest) = rest.split_at(id_len as usize);
        let (nonce, body) = rest.split_at(NONCE_LEN);
        let id = std::str::from_utf8(id).map_err(|_| OpenError::Malformed)?;
        let key = self
            .keys
            .iter()
            .find(|(k, _)| k == id)
            .map(|(_, k)| k)
            .ok_or_else(|| OpenError::UnknownKey(id.to_owned()))?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| OpenError::Malformed)?;
        let mut body = body.to_vec();
        let plain = key
            .open_in_place(nonce, Aad::from(aad), &mut body)
            .map_err(|_| OpenError::Tampered)?;
        Ok(plain.to_vec())
    }

    /// Seal `value` as JSON for the context `aad`.
    pub fn seal_json<T: serde::Serialize>(&self, value: &T, aad: &[u8]) -> anyhow::Result<Vec<u8>> {
        self.seal(&serde_json::to_vec(value)?, aad)
    }

    /// Open a value [`seal_json`](Self::seal_json) sealed for `aad`.
    pub fn open_json<T: serde::de::DeserializeOwned>(
        &self,
        sealed: &[u8],
        aad: &[u8],
    ) -> anyhow::Result<T> {
        Ok(serde_json::from_slice(&self.open(sealed, aad)?)?)
    }

    /// The id of the key that seals now.
    pub fn current_key_id(&self) -> &str {
        &self.keys[0].0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str, byte: u8) -> SecretString {
        SecretString::from(format!("{id}:{}", STANDARD.encode([byte; 32])))
    }

    #[test]
    fn a_sealed_value_opens_in_its_context_only() {
        let s = Sealer::new(&[key("k1", 1)]).expect("sealer");
        let sealed = s.seal(b"national id 123", b"row-1").expect("seal");
        assert!(!sealed.windows(15).any(|w| w == b"national id 123"));
        assert_eq!(s.open(&sealed, b"row-1").expect("open"), b"national id 123");
        assert_eq!(s.open(&sealed, b"row-2"), Err(OpenError::Tampered));
        let mut flipped = sealed.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(s.open(&flipped, b"row-1"), Err(OpenError::Tampered));
        assert_eq!(s.open(&sealed[..5], b"row-1"), Err(OpenError::Malformed));
        // Two seals of one value differ (fresh nonces).
        assert_ne!(sealed, s.seal(b"national id 123", b"row-1").expect("seal"));
    }

    #[test]
    fn rotation_new_key_seals_old_keys_still_open() {
        let old = Sealer::new(&[key("k1", 1)]).expect("old");
        let sealed_old = old.seal(b"x", b"a").expect("seal");
        let rotated = Sealer::new(&[key("k2", 2), key("k1", 1)]).expect("rotated");
        assert_eq!(rotated.current_key_id(), "k2");
        assert_eq!(rotated.open(&sealed_old, b"a").expect("open"), b"x");
        let sealed_new = rotated.seal(b"y", b"a").expect("seal");
        assert_eq!(
            old.open(&sealed_new, b"a"),
            Err(OpenError::UnknownKey("k2".into()))
        );
    }

    #[test]
    fn keys_must_be_well_formed() {
        assert!(Sealer::new(&[]).is_err());
        assert!(Sealer::new(&[SecretString::from("nokeyid".to_string())]).is_err());
        assert!(Sealer::new(&[SecretString::from(format!(
            "k:{}",
            STANDARD.encode([0u8; 16])
        ))])
        .is_err());
    }
}
