//! Webhook signatures, for the dispatcher that signs and for receivers that
//! verify (constant time, through ring).
//!
//! Every delivery carries two signatures of the raw body:
//! - the spec's `X-Service-Sig`: lower-case hex HMAC-SHA256 of the body, keyed
//!   with the secret string exactly as the customer received it (`whsec_...`,
//!   as UTF-8 bytes);
//! - Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`):
//!   `v1,` + base64 HMAC-SHA256 of `id.timestamp.body`, keyed with the
//!   base64-decoded part of the secret; several signatures may be listed,
//!   space-separated (during a secret rotation). Any Standard Webhooks library
//!   verifies these.
//!
//! A receiver that verifies with [`verify_standard`] also refuses stale
//! deliveries (the timestamp must be within `tolerance` of now: replays of an
//! old capture fail) and can drop duplicates by `webhook-id`, which is the
//! event id: the same event redelivered carries the same id.
//!
//! ```
//! let secret = hub_webhooks::generate_secret().unwrap();
//! let body = br#"{"id":"01J...","type":"server.active"}"#;
//! let sig = hub_webhooks::standard_signature(&secret, "01J...", 1_700_000_000, body).unwrap();
//! assert!(hub_webhooks::verify_standard(&[&secret], "01J...", "1700000000", body, &sig,
//!     1_700_000_010, 300).is_ok());
//! let hex = hub_webhooks::service_signature(&secret, body);
//! assert!(hub_webhooks::verify_service_signature(&secret, body, &hex));
//! ```

use base64::{engine::general_purpose::STANDARD, Engine};
use ring::{
    hmac,
    rand::{SecureRandom, SystemRandom},
};

pub const SECRET_PREFIX: &str = "whsec_";

/// A new endpoint secret: `whsec_` + base64 of 32 random bytes.
pub fn generate_secret() -> Result<String, Error> {
    let mut b = [0u8; 32];
    SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| Error::Random)?;
    Ok(format!("{SECRET_PREFIX}{}", STANDARD.encode(b)))
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("no randomness available")]
    Random,
    #[error("the secret is not whsec_ followed by base64")]
    BadSecret,
    #[error("no valid signature")]
    NoValidSignature,
    #[error("the timestamp is not a number")]
    BadTimestamp,
    #[error("the delivery is too old or too far in the future")]
    Stale,
}

/// `X-Service-Sig`: hex HMAC-SHA256 of `body` keyed with the whole secret string.
pub fn service_signature(secret: &str, body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    hex::encode(hmac::sign(&key, body).as_ref())
}

/// Check an `X-Service-Sig` header in constant time.
pub fn verify_service_signature(secret: &str, body: &[u8], header_hex: &str) -> bool {
    let Ok(tag) = hex::decode(header_hex.trim()) else {
        return false;
    };
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    hmac::verify(&key, body, &tag).is_ok()
}

fn standard_key(secret: &str) -> Result<hmac::Key, Error> {
    let b64 = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
    let raw = STANDARD.decode(b64).map_err(|_| Error::BadSecret)?;
    Ok(hmac::Key::new(hmac::HMAC_SHA256, &raw))
}

fn signed_content(msg_id: &str, timestamp: &str, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(msg_id.len() + timestamp.len() + body.len() + 2);
    m.extend_from_slice(msg_id.as_bytes());
    m.push(b'.');
    m.extend_from_slice(timestamp.as_bytes());
    m.push(b'.');
    m.extend_from_slice(body);
    m
}

/// One Standard Webhooks signature: `v1,<base64>`.
pub fn standard_signature(
    secret: &str,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<String, Error> {
    let key = standard_key(secret)?;
    let tag = hmac::sign(&key, &signed_content(msg_id, &timestamp.to_string(), body));
    Ok(format!("v1,{}", STANDARD.encode(tag.as_ref())))
}

/// Verify a `webhook-signature` header (space-separated `v1,...` entries)
/// against any of `secrets`, and that `timestamp` is within `tolerance_secs`
/// of `now_unix`.
pub fn verify_standard(
    secrets: &[&str],
    msg_id: &str,
    timestamp: &str,
    body: &[u8],
    header: &str,
    now_unix: i64,
    tolerance_secs: i64,
) -> Result<(), Error> {
    let ts: i64 = timestamp.trim().parse().map_err(|_| Error::BadTimestamp)?;
    if (now_unix - ts).abs() > tolerance_secs {
        return Err(Error::Stale);
    }
    let content = signed_content(msg_id, timestamp.trim(), body);
    for secret in secrets {
        let key = standard_key(secret)?;
        for entry in header.split_whitespace() {
            let Some(b64) = entry.strip_prefix("v1,") else {
                continue;
            };
            let Ok(tag) = STANDARD.decode(b64) else {
                continue;
            };
            if hmac::verify(&key, &content, &tag).is_ok() {
                return Ok(());
            }
        }
    }
    Err(Error::NoValidSignature)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The test vector published with the Standard Webhooks specification.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TS: i64 = 1614265330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const EXPECTED: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn the_published_standard_webhooks_vector_matches() {
        assert_eq!(
            standard_signature(SECRET, MSG_ID, TS, BODY).expect("sign"),
            EXPECTED
        );
        assert_eq!(
            verify_standard(
                &[SECRET],
                MSG_ID,
                "1614265330",
                BODY,
                EXPECTED,
                TS + 10,
                300
            ),
            Ok(())
        );
    }

    #[test]
    fn tampering_staleness_and_rotation() {
        assert_eq!(
            verify_standard(&[SECRET], MSG_ID, "1614265330", b"{}", EXPECTED, TS, 300),
            Err(Error::NoValidSignature)
        );
        assert_eq!(
            verify_standard(
                &[SECRET],
                MSG_ID,
                "1614265330",
                BODY,
                EXPECTED,
                TS + 301,
                300
            ),
            Err(Error::Stale)
        );
        let new = generate_secret().expect("secret");
        let both = format!(
            "{} {EXPECTED}",
            standard_signature(&new, MSG_ID, TS, BODY).expect("sign")
        );
        assert!(verify_standard(&[SECRET], MSG_ID, "1614265330", BODY, &both, TS, 300).is_ok());
        assert!(verify_standard(&[&new], MSG_ID, "1614265330", BODY, &both, TS, 300).is_ok());
    }

    #[test]
    fn service_signatures_key_with_the_whole_secret_string() {
        let sig = service_signature("whsec_abc", b"body");
        let key = hmac::Key::new(hmac::HMAC_SHA256, b"whsec_abc");
        assert_eq!(sig, hex::encode(hmac::sign(&key, b"body").as_ref()));
        assert!(verify_service_signature("whsec_abc", b"body", &sig));
        assert!(!verify_service_signature("whsec_abd", b"body", &sig));
        assert!(!verify_service_signature("whsec_abc", b"body", "zz"));
        let s = generate_secret().expect("secret");
        assert!(s.starts_with("whsec_"));
        assert_eq!(STANDARD.decode(&s[6..]).expect("b64").len(), 32);
    }
}
