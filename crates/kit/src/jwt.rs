//! Verifying the OpenID Provider's tokens: compact JWS, ES256 only (RFC 7515,
//! 7518). identity verifies its own tokens with it (userinfo, introspection,
//! logout hints) and the gateway the JWT bearers it accepts. Anything but
//! `alg: ES256` with a `kid` among the given keys is refused before a
//! signature is looked at: `none`, HMAC with a public key as secret, an
//! embedded `jwk` never get that far.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};
use serde::Deserialize;
use serde_json::Value;

/// Longest token accepted, in bytes (ours are well under 4 KB).
pub const MAX_LEN: usize = 8192;

/// A public key that verifies: its kid and the uncompressed P-256 point
/// (`0x04 || X || Y`).
#[derive(Clone, Debug)]
pub struct PublicKey {
    pub kid: String,
    pub point: Vec<u8>,
}

impl PublicKey {
    /// From a JWK's members (`crv` P-256, `x`, `y` base64url).
    pub fn from_jwk(kid: &str, crv: &str, x: &str, y: &str) -> Option<PublicKey> {
        if crv != "P-256" {
            return None;
        }
        let (x, y) = (
            URL_SAFE_NO_PAD.decode(x).ok()?,
            URL_SAFE_NO_PAD.decode(y).ok()?,
        );
        if x.len() != 32 || y.len() != 32 {
            return None;
        }
        let mut point = Vec::with_capacity(65);
        point.push(4);
        point.extend_from_slice(&x);
        point.extend_from_slice(&y);
        Some(PublicKey {
            kid: kid.to_owned(),
            point,
        })
    }
}

/// Why a token was refused (never shown in detail to a client).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Refused {
    /// Not three base64url parts of JSON, or too long.
    Malformed,
    /// A header other than `alg: ES256`, `typ` as expected, a `kid`.
    Header,
    /// No published key has this kid.
    UnknownKey,
    Signature,
    /// `exp` passed (or missing), `iat` in the future.
    Expired,
    /// `iss` or `aud` not the expected ones.
    Audience,
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    typ: Option<String>,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    crit: Option<Value>,
    #[serde(default)]
    jwk: Option<Value>,
    #[serde(default)]
    jku: Option<Value>,
}

/// What the caller expects of a token.
pub struct Expect<'a> {
    /// The header's `typ` (`at+jwt`, `JWT`); compared case-insensitively.
    pub typ: &'a str,
    pub iss: &'a str,
    /// `aud` equal to this, or an array holding it.
    pub aud: &'a str,
    /// Now, in Unix seconds.
    pub now: i64,
    /// Whether an expired token is still accepted (a logout's `id_token_hint`).
    pub allow_expired: bool,
}

/// The token's claims when its signature is one of `keys`' and it meets
/// `expect`.
pub fn verify(token: &str, keys: &[PublicKey], expect: &Expect<'_>) -> Result<Value, Refused> {
    if token.len() > MAX_LEN {
        return Err(Refused::Malformed);
    }
    let mut parts = token.split('.');
    let (Some(h), Some(c), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refused::Malformed);
    };
    let header: Header = URL_SAFE_NO_PAD
        .decode(h)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or(Refused::Malformed)?;
    let typ_ok = header
        .typ
        .as_deref()
        .is_some_and(|t| t.eq_ignore_ascii_case(expect.typ));
    if header.alg != "ES256"
        || !typ_ok
        || header.crit.is_some()
        || header.jwk.is_some()
        || header.jku.is_some()
    {
        return Err(Refused::Header);
    }
    let kid = header.kid.ok_or(Refused::Header)?;
    let key = keys
        .iter()
        .find(|k| k.kid == kid)
        .ok_or(Refused::UnknownKey)?;
    let sig = URL_SAFE_NO_PAD.decode(s).map_err(|_| Refused::Malformed)?;
    let signed = &token[..h.len() + 1 + c.len()];
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &key.point)
        .verify(signed.as_bytes(), &sig)
        .map_err(|_| Refused::Signature)?;
    let claims: Value = URL_SAFE_NO_PAD
        .decode(c)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .filter(Value::is_object)
        .ok_or(Refused::Malformed)?;
    if claims["iss"].as_str() != Some(expect.iss) {
        return Err(Refused::Audience);
    }
    let aud_ok = match &claims["aud"] {
        Value::String(a) => a == expect.aud,
        Value::Array(a) => a.iter().any(|v| v.as_str() == Some(expect.aud)),
        _ => false,
    };
    if !aud_ok {
        return Err(Refused::Audience);
    }
    let exp = claims["exp"].as_i64().ok_or(Refused::Expired)?;
    if !expect.allow_expired && exp <= expect.now {
        return Err(Refused::Expired);
    }
    // A minute of leeway for the clocks of other replicas.
    if claims["iat"]
        .as_i64()
        .is_some_and(|iat| iat > expect.now + 60)
    {
        return Err(Refused::Expired);
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

    fn pair() -> EcdsaKeyPair {
        let rng = SystemRandom::new();
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("test");
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .expect("test")
    }

    fn sign(pair: &EcdsaKeyPair, header: &Value, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(header).expect("test")),
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).expect("test"))
        );
        let sig = pair
            .sign(&SystemRandom::new(), input.as_bytes())
            .expect("test");
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
    }

    const NOW: i64 = 1_800_000_000;

    fn expect() -> Expect<'static> {
        Expect {
            typ: "at+jwt",
            iss: "https://hub",
            aud: "https://hub",
            now: NOW,
            allow_expired: false,
        }
    }

    fn claims() -> Value {
        serde_json::json!({"iss": "https://hub", "aud": "https://hub", "exp": NOW + 60, "iat": NOW, "sub": "u"})
    }

    #[test]
    fn a_token_verifies_with_its_key_only() {
        let (a, b) = (pair(), pair());
        let keys = vec![PublicKey {
            kid: "a".into(),
            point: a.public_key().as_ref().to_vec(),
        }];
        let h = serde_json::json!({"alg": "ES256", "typ": "at+jwt", "kid": "a"});
        let good = sign(&a, &h, &claims());
        assert_eq!(verify(&good, &keys, &expect()).expect("test")["sub"], "u");
        // Signed by another key under the same kid.
        let forged = sign(&b, &h, &claims());
        assert_eq!(verify(&forged, &keys, &expect()), Err(Refused::Signature));
        // A kid no key has.
        let other = sign(
            &a,
            &serde_json::json!({"alg": "ES256", "typ": "at+jwt", "kid": "z"}),
            &claims(),
        );
        assert_eq!(verify(&other, &keys, &expect()), Err(Refused::UnknownKey));
        // alg none, with the signature dropped.
        let none_h = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"at+jwt","kid":"a"}"#);
        let body = good.split('.').nth(1).expect("test");
        assert_eq!(
            verify(&format!("{none_h}.{body}."), &keys, &expect()),
            Err(Refused::Header)
        );
        // A changed claim.
        let mut parts: Vec<&str> = good.split('.').collect();
        let mut c = claims();
        c["sub"] = "v".into();
        let tampered = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&c).expect("test"));
        parts[1] = &tampered;
        assert_eq!(
            verify(&parts.join("."), &keys, &expect()),
            Err(Refused::Signature)
        );
        // The wrong typ (an ID token offered as an access token).
        let id = sign(
            &a,
            &serde_json::json!({"alg": "ES256", "typ": "JWT", "kid": "a"}),
            &claims(),
        );
        assert_eq!(verify(&id, &keys, &expect()), Err(Refused::Header));
    }

    #[test]
    fn expiry_issuer_and_audience_are_checked() {
        let a = pair();
        let keys = vec![PublicKey {
            kid: "a".into(),
            point: a.public_key().as_ref().to_vec(),
        }];
        let h = serde_json::json!({"alg": "ES256", "typ": "at+jwt", "kid": "a"});
        let mut c = claims();
        c["exp"] = NOW.into();
        let expired = sign(&a, &h, &c);
        assert_eq!(verify(&expired, &keys, &expect()), Err(Refused::Expired));
        let lenient = Expect {
            allow_expired: true,
            ..expect()
        };
        assert!(verify(&expired, &keys, &lenient).is_ok());
        let mut c = claims();
        c["aud"] = serde_json::json!(["other", "https://hub"]);
        assert!(verify(&sign(&a, &h, &c), &keys, &expect()).is_ok());
        c["aud"] = "other".into();
        assert_eq!(
            verify(&sign(&a, &h, &c), &keys, &expect()),
            Err(Refused::Audience)
        );
        let mut c = claims();
        c["iss"] = "https://evil".into();
        assert_eq!(
            verify(&sign(&a, &h, &c), &keys, &expect()),
            Err(Refused::Audience)
        );
    }
}
