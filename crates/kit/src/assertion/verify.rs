//! Verifying: the keys and routes a receiver accepts, per issuer.

use crate::settings::AssertionSettings;
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use ring::hmac;
use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use super::claims::{sha256_hex, Assertion, RequestFacts, VerifyError, GATEWAY};
use super::mint::hmac_key;
use super::replay::{ReplayGuard, Taken};

/// A route pattern `METHOD /path/*/x` (`*` is one segment).
#[derive(Debug, Clone)]
struct RoutePattern {
    method: String,
    segments: Vec<String>,
}

impl RoutePattern {
    fn parse(s: &str) -> anyhow::Result<RoutePattern> {
        let (m, p) = s
            .split_once(' ')
            .ok_or_else(|| anyhow::anyhow!("routes are \"METHOD /path\": {s:?}"))?;
        Ok(RoutePattern {
            method: m.to_uppercase(),
            segments: p.trim().split('/').map(str::to_owned).collect(),
        })
    }

    fn matches(&self, method: &str, path: &str) -> bool {
        let mut got = path.split('/');
        self.method == method
            && self
                .segments
                .iter()
                .all(|want| got.next().is_some_and(|g| want == "*" || want == g))
            && got.next().is_none()
    }
}

struct Principal {
    keys: Vec<hmac::Key>,
    /// `None` for the gateway (every route but `/internal/`).
    routes: Option<Vec<RoutePattern>>,
}

/// Verifies the assertions a service receives.
#[derive(Clone)]
pub struct Verifier {
    aud: String,
    /// The gateway first, then the calling services.
    principals: Arc<Vec<(String, Principal)>>,
    max_age_secs: i64,
    seen: Arc<ReplayGuard>,
}

impl Verifier {
    /// The verifier of service `aud` from its `assertion` settings.
    pub fn new(aud: &str, s: &AssertionSettings) -> anyhow::Result<Verifier> {
        anyhow::ensure!(
            !s.keys.is_empty(),
            "assertion.keys must hold at least one key"
        );
        let mut principals = vec![(
            GATEWAY.to_owned(),
            Principal {
                keys: s
                    .keys
                    .iter()
                    .map(|k| hmac_key(k, "assertion.keys"))
                    .collect::<anyhow::Result<_>>()?,
                routes: None,
            },
        )];
        for (name, c) in &s.callers {
            if c.keys.is_empty() {
                continue;
            }
            principals.push((
                name.clone(),
                Principal {
                    keys: c
                        .keys
                        .iter()
                        .map(|k| hmac_key(k, &format!("assertion.callers.{name}.keys")))
                        .collect::<anyhow::Result<_>>()?,
                    routes: Some(
                        c.routes
                            .iter()
                            .map(|r| RoutePattern::parse(r))
                            .collect::<anyhow::Result<_>>()?,
                    ),
                },
            ));
        }
        let window = Duration::from_secs(2 * s.max_age_secs.max(1) as u64);
        Ok(Verifier {
            aud: aud.to_owned(),
            principals: Arc::new(principals),
            max_age_secs: s.max_age_secs,
            seen: Arc::new(ReplayGuard::new(
                window,
                usize::try_from(s.replay_cache_entries).unwrap_or(usize::MAX),
                Instant::now(),
            )),
        })
    }

    /// Verify `payload`/`signature_hex` against the request it arrived with.
    pub fn verify(
        &self,
        payload: &str,
        signature_hex: &str,
        facts: &RequestFacts<'_>,
        now_unix: i64,
    ) -> Result<Assertion, VerifyError> {
        let sig = hex::decode(signature_hex).map_err(|_| VerifyError::BadSignature)?;
        // ring's verify compares in constant time.
        let (issuer, principal) = self
            .principals
            .iter()
            .find(|(_, p)| {
                p.keys
                    .iter()
                    .any(|k| hmac::verify(k, payload.as_bytes(), &sig).is_ok())
            })
            .ok_or(VerifyError::BadSignature)?;
        let json = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| VerifyError::Malformed)?;
        let a: Assertion = serde_json::from_slice(&json).map_err(|_| VerifyError::Malformed)?;
        if &a.iss != issuer || a.aud != self.aud {
            return Err(VerifyError::BadSignature);
        }
        if a.method != facts.method
            || a.path != facts.path_and_query
            || a.idempotency_key.as_deref() != facts.idempotency_key
            || a.body_sha256 != sha256_hex(facts.body)
        {
            return Err(VerifyError::WrongTarget);
        }
        if (now_unix - a.iat).abs() > self.max_age_secs {
            return Err(VerifyError::Stale);
        }
        let path = facts
            .path_and_query
            .split_once('?')
            .map_or(facts.path_and_query, |(p, _)| p);
        let allowed = match &principal.routes {
            _ if crate::path::check(path).is_err() => false,
            None => !path.starts_with("/internal/"),
            Some(routes) => routes.iter().any(|r| r.matches(facts.method, path)),
        };
        if !allowed {
            return Err(VerifyError::RouteNotAllowed);
        }
        // Last, so that only a fully valid assertion takes its id.
        match self.seen.take(a.jti, Instant::now()) {
            Taken::Fresh => Ok(a),
            Taken::Again => Err(VerifyError::Replayed),
            Taken::Full => Err(VerifyError::Busy),
        }
    }
}
