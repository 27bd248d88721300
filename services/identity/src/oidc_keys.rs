//! The OpenID Provider's signing keys (`oidc_keys`): ES256 (P-256, ring),
//! made here, the private half sealed at rest (the kit's sealer, AES-256-GCM,
//! bound to the kid), the public half published as a JWK at
//! `GET /.well-known/jwks.json`.
//!
//! Rotation, on identity's clock, by [`rotate`] (every `oidc.key_check_secs`
//! on every replica, serialized by an advisory lock):
//! - a key signs from `signs_from` to `signs_until` (`oidc.key_rotation_days`);
//! - the next key is made `oidc.key_prepublish_secs` before the current one's
//!   window ends, and published at once: relying parties that cache the JWKS
//!   know it before any token carries its kid;
//! - a key stays published until `oidc.token_max_life_secs` after its window,
//!   so every token it signed verifies until it expires, then it is deleted.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use ring::{
    digest,
    rand::SystemRandom,
    signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING},
};
use serde::{Deserialize, Serialize};
use service_kit::jwt::{self, Expect, PublicKey, Refused};
use service_kit::sealed::Sealer;
use sqlx::PgPool;
use std::sync::Arc;
use time::{Duration, OffsetDateTime};

/// `[oidc]`: who the provider is, what it issues, and when keys are made,
/// used and dropped.
#[derive(Debug, Clone, Deserialize)]
pub struct KeySettings {
    /// The issuer: the core host's public base URL (`iss` of every token).
    pub issuer: String,
    /// An access token's life.
    pub access_token_secs: i64,
    pub key_rotation_days: i64,
    pub key_prepublish_secs: i64,
    pub token_max_life_secs: i64,
    pub key_check_secs: u64,
    /// The console page that signs a person in for an authorization request
    /// (`?request=<handle>` added).
    pub login_url: String,
    /// How long an authorization request waits for the person.
    pub request_secs: i64,
    /// An authorization code's life.
    pub code_secs: i64,
    /// A refresh token's life (each use makes a new one; the grant ends
    /// with its session in any case).
    pub refresh_token_secs: i64,
    /// Group commit of refreshes: writer tasks, and refreshes per statement.
    pub refresh_writers: usize,
    pub refresh_batch: usize,
    /// The console page where a person enters a device's user code (RFC 8628
    /// `verification_uri`).
    pub device_url: String,
    /// How often a device may poll the token endpoint, at first.
    pub device_poll_secs: i32,
    /// Authorization requests (each one stored until it expires) one
    /// address may make per minute.
    pub authorize_per_ip_per_minute: i64,
}

impl KeySettings {
    pub fn check(&self) -> anyhow::Result<()> {
        let iss = url::Url::parse(&self.issuer)
            .map_err(|_| anyhow::anyhow!("oidc.issuer is not a URL"))?;
        anyhow::ensure!(
            matches!(iss.scheme(), "https" | "http")
                && iss.query().is_none()
                && iss.fragment().is_none()
                && !self.issuer.ends_with('/'),
            "oidc.issuer: an http(s) URL without query, fragment or trailing slash"
        );
        anyhow::ensure!(
            (60..=3600).contains(&self.access_token_secs)
                && self.access_token_secs <= self.token_max_life_secs,
            "oidc.access_token_secs: 60 to 3600, at most oidc.token_max_life_secs"
        );
        anyhow::ensure!(
            (1..=365).contains(&self.key_rotation_days),
            "oidc.key_rotation_days: 1 to 365"
        );
        anyhow::ensure!(
            self.key_prepublish_secs > 0
                && self.key_prepublish_secs < self.key_rotation_days * 86_400,
            "oidc.key_prepublish_secs: more than 0, less than the rotation period"
        );
        anyhow::ensure!(
            self.token_max_life_secs > 0,
            "oidc.token_max_life_secs must be positive"
        );
        anyhow::ensure!(
            self.key_check_secs > 0,
            "oidc.key_check_secs must be positive"
        );
        anyhow::ensure!(
            self.access_token_secs > 0 && self.access_token_secs <= self.token_max_life_secs,
            "oidc.access_token_secs: positive, at most oidc.token_max_life_secs"
        );
        anyhow::ensure!(
            self.request_secs > 0 && self.code_secs > 0 && self.code_secs <= 600,
            "oidc.request_secs must be positive; oidc.code_secs 1 to 600 (RFC 6749 4.1.2)"
        );
        anyhow::ensure!(
            self.refresh_token_secs > 0,
            "oidc.refresh_token_secs must be positive"
        );
        anyhow::ensure!(
            (1..=60).contains(&self.device_poll_secs),
            "oidc.device_poll_secs: 1 to 60"
        );
        anyhow::ensure!(
            self.authorize_per_ip_per_minute > 0,
            "oidc.authorize_per_ip_per_minute must be positive"
        );
        anyhow::ensure!(
            (1..=64).contains(&self.refresh_writers) && (1..=10_000).contains(&self.refresh_batch),
            "oidc.refresh_writers: 1 to 64; oidc.refresh_batch: 1 to 10000"
        );
        for (name, u) in [
            ("login_url", &self.login_url),
            ("device_url", &self.device_url),
        ] {
            let parsed =
                url::Url::parse(u).map_err(|_| anyhow::anyhow!("oidc.{name} is not a URL"))?;
            anyhow::ensure!(
                matches!(parsed.scheme(), "http" | "https") && parsed.fragment().is_none(),
                "oidc.{name} must be an http(s) URL without a fragment"
            );
        }
        Ok(())
    }
}

/// A public key as the JWKS publishes it (RFC 7517, 7518).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Jwk {
    pub kty: String,
    pub crv: String,
    pub x: String,
    pub y: String,
    pub kid: String,
    #[serde(rename = "use")]
    pub use_: String,
    pub alg: String,
}

/// The JWK of an uncompressed P-256 public key (`0x04 || X || Y`); its kid is
/// the key's RFC 7638 thumbprint.
pub fn jwk_of(public: &[u8]) -> anyhow::Result<Jwk> {
    anyhow::ensure!(
        public.len() == 65 && public[0] == 4,
        "not an uncompressed P-256 point"
    );
    let x = URL_SAFE_NO_PAD.encode(&public[1..33]);
    let y = URL_SAFE_NO_PAD.encode(&public[33..65]);
    // The required members, in lexicographic order, no white space.
    let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
    let kid = URL_SAFE_NO_PAD.encode(digest::digest(&digest::SHA256, canonical.as_bytes()));
    Ok(Jwk {
        kty: "EC".into(),
        crv: "P-256".into(),
        x,
        y,
        kid,
        use_: "sig".into(),
        alg: "ES256".into(),
    })
}

/// A new key: its JWK and its PKCS#8 document sealed (bound to the kid).
pub fn generate(sealer: &Sealer) -> anyhow::Result<(Jwk, Vec<u8>)> {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .map_err(|_| anyhow::anyhow!("making a P-256 key failed"))?;
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .map_err(|_| anyhow::anyhow!("reading the new key failed"))?;
    let jwk = jwk_of(pair.public_key().as_ref())?;
    let sealed = sealer.seal(pkcs8.as_ref(), jwk.kid.as_bytes())?;
    Ok((jwk, sealed))
}

/// Make the key the schedule needs at `now` (the first one, or the next one
/// once the current window is within `key_prepublish_secs` of its end) and
/// delete keys no token can need any more. Returns how many keys it made
/// and deleted.
pub async fn rotate(
    pool: &PgPool,
    sealer: &Sealer,
    now: OffsetDateTime,
    s: &KeySettings,
) -> anyhow::Result<u64> {
    let mut tx = pool.begin().await?;
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtextextended('oidc_keys', 4))")
        .execute(&mut *tx)
        .await?;
    let latest = sqlx::query_scalar!("SELECT max(signs_until) FROM oidc_keys")
        .fetch_one(&mut *tx)
        .await?;
    let from = match latest {
        None => Some(now),
        Some(until) if until - Duration::seconds(s.key_prepublish_secs) <= now => {
            Some(until.max(now))
        }
        Some(_) => None,
    };
    let mut changed = 0;
    if let Some(from) = from {
        let (jwk, sealed) = generate(sealer)?;
        let until = from + Duration::days(s.key_rotation_days);
        sqlx::query!(
            "INSERT INTO oidc_keys (kid, alg, private_sealed, public_jwk, published_from, \
                                    signs_from, signs_until, published_until) \
             VALUES ($1, 'ES256', $2, $3, $4, $5, $6, $7)",
            jwk.kid,
            sealed,
            serde_json::to_value(&jwk)?,
            now,
            from,
            until,
            until + Duration::seconds(s.token_max_life_secs),
        )
        .execute(&mut *tx)
        .await?;
        tracing::info!(kid = %jwk.kid, %from, %until, "OpenID Provider signing key made");
        changed += 1;
    }
    changed += sqlx::query!("DELETE FROM oidc_keys WHERE published_until <= $1", now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    Ok(changed)
}

/// The keys published at `now`, oldest window first.
pub async fn published(pool: &PgPool, now: OffsetDateTime) -> anyhow::Result<Vec<Jwk>> {
    let rows = sqlx::query_scalar!(
        "SELECT public_jwk FROM oidc_keys WHERE published_from <= $1 AND published_until > $1 \
          ORDER BY signs_from",
        now,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(serde_json::from_value)
        .collect::<Result<_, _>>()?)
}

/// The key that signs at `now` (its kid and pair), opened from its seal;
/// None before the first key is made.
async fn signing_key(
    pool: &PgPool,
    sealer: &Sealer,
    now: OffsetDateTime,
) -> anyhow::Result<Option<(String, EcdsaKeyPair, OffsetDateTime)>> {
    let Some(row) = sqlx::query!(
        "SELECT kid, private_sealed, signs_until FROM oidc_keys WHERE signs_from <= $1 AND signs_until > $1 \
          ORDER BY signs_from DESC LIMIT 1",
        now,
    )
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    let pkcs8 = sealer
        .open(&row.private_sealed, row.kid.as_bytes())
        .map_err(|e| anyhow::anyhow!("opening signing key {}: {e:?}", row.kid))?;
    let pair = EcdsaKeyPair::from_pkcs8(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        &pkcs8,
        &SystemRandom::new(),
    )
    .map_err(|_| anyhow::anyhow!("signing key {} is not a P-256 key", row.kid))?;
    Ok(Some((row.kid, pair, row.signs_until)))
}

/// A compact JWS (ES256) of `claims` with header `typ` and `kid`.
pub fn jwt(
    pair: &EcdsaKeyPair,
    kid: &str,
    typ: &str,
    claims: &serde_json::Value,
) -> anyhow::Result<String> {
    let header = serde_json::json!({"alg": "ES256", "typ": typ, "kid": kid});
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header)?),
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims)?)
    );
    let sig = pair
        .sign(&SystemRandom::new(), input.as_bytes())
        .map_err(|_| anyhow::anyhow!("signing failed"))?;
    Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref())))
}

/// How long a replica reuses a key it opened or the keys it read.
const CACHE_SECS: i64 = 30;

/// The signing key and the verifying keys, kept in memory: the token
/// endpoint does not unseal a key per request. A cached signer is used until
/// its window ends or for [`CACHE_SECS`], whichever comes first.
#[derive(Default)]
pub struct KeyCache {
    signer: std::sync::Mutex<Option<(OffsetDateTime, Signer)>>,
    verifiers: std::sync::Mutex<Option<(OffsetDateTime, Arc<Vec<PublicKey>>)>>,
}

/// The key that signs now.
#[derive(Clone)]
pub struct Signer {
    pub kid: String,
    pub pair: Arc<EcdsaKeyPair>,
}

impl KeyCache {
    /// The key that signs at `now` (None before the first key is made).
    pub async fn signer(
        &self,
        pool: &PgPool,
        sealer: &Sealer,
        now: OffsetDateTime,
    ) -> anyhow::Result<Option<Signer>> {
        if let Some((until, s)) = self.signer.lock().expect("key cache").as_ref() {
            if now < *until {
                return Ok(Some(s.clone()));
            }
        }
        let Some((kid, pair, signs_until)) = signing_key(pool, sealer, now).await? else {
            return Ok(None);
        };
        let s = Signer {
            kid,
            pair: Arc::new(pair),
        };
        let until = signs_until.min(now + Duration::seconds(CACHE_SECS));
        *self.signer.lock().expect("key cache") = Some((until, s.clone()));
        Ok(Some(s))
    }

    /// The keys published at `now`; `fresh` reads them again unless they were
    /// read in the last second (a kid not seen yet).
    pub async fn verifiers(
        &self,
        pool: &PgPool,
        now: OffsetDateTime,
        fresh: bool,
    ) -> anyhow::Result<Arc<Vec<PublicKey>>> {
        if let Some((at, keys)) = self.verifiers.lock().expect("key cache").as_ref() {
            let age = now - *at;
            let limit = if fresh { 1 } else { CACHE_SECS };
            if age >= Duration::ZERO && age < Duration::seconds(limit) {
                return Ok(keys.clone());
            }
        }
        let keys: Vec<PublicKey> = published(pool, now)
            .await?
            .iter()
            .filter_map(|j| PublicKey::from_jwk(&j.kid, &j.crv, &j.x, &j.y))
            .collect();
        let keys = Arc::new(keys);
        *self.verifiers.lock().expect("key cache") = Some((now, keys.clone()));
        Ok(keys)
    }

    /// Verify one of this provider's tokens (ES256, a published kid).
    pub async fn verify(
        &self,
        pool: &PgPool,
        now: OffsetDateTime,
        token: &str,
        expect: &Expect<'_>,
    ) -> anyhow::Result<Result<serde_json::Value, Refused>> {
        let keys = self.verifiers(pool, now, false).await?;
        match jwt::verify(token, &keys, expect) {
            Err(Refused::UnknownKey) => {
                let keys = self.verifiers(pool, now, true).await?;
                Ok(jwt::verify(token, &keys, expect))
            }
            r => Ok(r),
        }
    }
}

/// [`rotate`] now, then every `key_check_secs`, until `cancel`.
pub fn spawn(
    pool: PgPool,
    sealer: Sealer,
    clock: service_kit::Clock,
    s: KeySettings,
    cancel: tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if let Err(e) = rotate(&pool, &sealer, clock.now(), &s).await {
                if !service_kit::outage::report_background(&e) {
                    tracing::warn!(error = ?e, "OpenID Provider key rotation failed; next check retries");
                }
            }
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(std::time::Duration::from_secs(s.key_check_secs)) => {}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};

    #[test]
    fn the_kid_is_the_rfc_7638_thumbprint() {
        // RFC 7638's method on a P-256 key: SHA-256 of the required members in
        // order, base64url; recomputed here from the JWK's own x and y.
        let sealer = Sealer::new(&[secrecy::SecretString::from(format!(
            "t1:{}",
            base64::engine::general_purpose::STANDARD.encode([7u8; 32])
        ))])
        .expect("a sealer");
        let (jwk, sealed) = generate(&sealer).expect("a key");
        let canonical = format!(
            "{{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"{}\",\"y\":\"{}\"}}",
            jwk.x, jwk.y
        );
        assert_eq!(
            jwk.kid,
            URL_SAFE_NO_PAD.encode(digest::digest(&digest::SHA256, canonical.as_bytes()))
        );
        assert_eq!(
            (
                jwk.kty.as_str(),
                jwk.crv.as_str(),
                jwk.alg.as_str(),
                jwk.use_.as_str()
            ),
            ("EC", "P-256", "ES256", "sig")
        );
        // The sealed half opens (bound to its kid only) and signs what the
        // published half verifies.
        assert!(sealer.open(&sealed, b"another kid").is_err());
        let pkcs8 = sealer.open(&sealed, jwk.kid.as_bytes()).expect("opens");
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng)
            .expect("a key pair");
        let sig = pair.sign(&rng, b"header.claims").expect("signs");
        let mut point = vec![4u8];
        point.extend(URL_SAFE_NO_PAD.decode(&jwk.x).expect("x"));
        point.extend(URL_SAFE_NO_PAD.decode(&jwk.y).expect("y"));
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
            .verify(b"header.claims", sig.as_ref())
            .expect("verifies with the JWK");
    }

    #[test]
    fn settings_are_checked() {
        let ok = KeySettings {
            issuer: "https://hub.example.com".into(),
            access_token_secs: 300,
            key_rotation_days: 30,
            key_prepublish_secs: 86_400,
            token_max_life_secs: 86_400,
            key_check_secs: 3600,
            login_url: "https://app.example.com/oauth/continue".into(),
            request_secs: 600,
            code_secs: 60,
            refresh_token_secs: 86_400,
            device_url: "https://app.example.com/device".into(),
            device_poll_secs: 5,
            authorize_per_ip_per_minute: 60,
            refresh_writers: 2,
            refresh_batch: 128,
        };
        assert!(ok.check().is_ok());
        for bad in [
            KeySettings {
                refresh_writers: 0,
                ..ok.clone()
            },
            KeySettings {
                refresh_batch: 0,
                ..ok.clone()
            },
            KeySettings {
                authorize_per_ip_per_minute: 0,
                ..ok.clone()
            },
            KeySettings {
                access_token_secs: 86_401,
                ..ok.clone()
            },
            KeySettings {
                code_secs: 601,
                ..ok.clone()
            },
            KeySettings {
                login_url: "javascript:alert(1)".into(),
                ..ok.clone()
            },
        ] {
            assert!(bad.check().is_err());
        }
        assert!(KeySettings {
            key_prepublish_secs: 30 * 86_400,
            ..ok.clone()
        }
        .check()
        .is_err());
        assert!(KeySettings {
            key_rotation_days: 0,
            ..ok
        }
        .check()
        .is_err());
    }
}
