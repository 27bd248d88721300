//! Provider drivers for API-backed SKUs. A driver creates a server and is
//! then asked for its status until it is ready (cloud APIs complete
//! asynchronously); power and deletion are synchronous.
//!
//! A pending server may come with the provider's estimate of when it will be
//! ready (as cloud APIs give one, e.g. in `Retry-After`): the worker asks
//! again then instead of at every poll.
//!
//! The sandbox driver behaves like such an API without a network: the
//! reference it returns encodes when the server was created, and the server is
//! ready `sandbox_delay_ms` later (its estimate), so its state survives a
//! restart of this service like a real provider's would.
//!
//! Rotation ([`Provider::rotate`]) sets a fresh root password at the provider
//! and answers the new credentials; it never needs the old ones, so a
//! rotation whose result was not stored (the transaction failed after the
//! call) is mended by rotating again.

use futures::future::BoxFuture;
use service_kit::Clock;
use time::OffsetDateTime;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Not ready yet; `eta`: when the provider expects it to be, if it says.
    Pending {
        eta: Option<OffsetDateTime>,
    },
    /// Ready, with access credentials.
    Ready(Credentials),
    Failed(String),
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Credentials {
    pub username: String,
    pub password: String,
    pub host: String,
}

/// A power action on a running server; the wire and the provider call carry
/// [`Power::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    Reboot,
    Stop,
    Start,
}

impl Power {
    pub fn as_str(self) -> &'static str {
        match self {
            Power::Reboot => "reboot",
            Power::Stop => "stop",
            Power::Start => "start",
        }
    }

    pub fn parse(s: &str) -> Option<Power> {
        [Power::Reboot, Power::Stop, Power::Start]
            .into_iter()
            .find(|p| p.as_str() == s)
    }
}

pub trait Provider: Send + Sync {
    /// Start creating `hostname`; returns the provider's reference.
    fn create<'a>(&'a self, hostname: &'a str) -> BoxFuture<'a, anyhow::Result<String>>;
    fn status<'a>(&'a self, reference: &'a str) -> BoxFuture<'a, anyhow::Result<Status>>;
    /// Apply `action`, synchronously.
    fn power<'a>(&'a self, reference: &'a str, action: Power) -> BoxFuture<'a, anyhow::Result<()>>;
    fn delete<'a>(&'a self, reference: &'a str) -> BoxFuture<'a, anyhow::Result<()>>;
    /// Replace the server's root password with a fresh one, synchronously;
    /// returns the credentials that work from now on (the old ones do not).
    fn rotate<'a>(&'a self, reference: &'a str) -> BoxFuture<'a, anyhow::Result<Credentials>>;
}

pub struct Sandbox {
    pub delay_ms: i64,
    pub fail: bool,
    pub clock: Clock,
}

fn now_ms(clock: &Clock) -> i64 {
    (clock.now().unix_timestamp_nanos() / 1_000_000) as i64
}

impl Provider for Sandbox {
    fn create<'a>(&'a self, hostname: &'a str) -> BoxFuture<'a, anyhow::Result<String>> {
        Box::pin(async move {
            anyhow::ensure!(
                !self.fail,
                "sandbox provider: creation refused (sandbox_fail is on)"
            );
            Ok(format!("sbx:{}:{hostname}", now_ms(&self.clock)))
        })
    }

    fn status<'a>(&'a self, reference: &'a str) -> BoxFuture<'a, anyhow::Result<Status>> {
        Box::pin(async move {
            let Some((created, hostname)) = sandbox_reference(reference) else {
                return Ok(Status::Failed(format!(
                    "unknown sandbox reference {reference:?}"
                )));
            };
            let created: i64 = created.parse()?;
            let ready_ms = created + self.delay_ms;
            if now_ms(&self.clock) < ready_ms {
                return Ok(Status::Pending {
                    eta: OffsetDateTime::from_unix_timestamp_nanos(
                        i128::from(ready_ms) * 1_000_000,
                    )
                    .ok(),
                });
            }
            Ok(Status::Ready(sandbox_credentials(hostname)?))
        })
    }

    fn power<'a>(
        &'a self,
        _reference: &'a str,
        _action: Power,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }

    fn delete<'a>(&'a self, _reference: &'a str) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }

    fn rotate<'a>(&'a self, reference: &'a str) -> BoxFuture<'a, anyhow::Result<Credentials>> {
        Box::pin(async move {
            let (_, hostname) = sandbox_reference(reference)
                .ok_or_else(|| anyhow::anyhow!("unknown sandbox reference {reference:?}"))?;
            sandbox_credentials(hostname)
        })
    }
}

/// A sandbox reference's (creation time, hostname).
fn sandbox_reference(reference: &str) -> Option<(&str, &str)> {
    let mut parts = reference.splitn(3, ':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("sbx"), Some(created), Some(hostname)) => Some((created, hostname)),
        _ => None,
    }
}

/// A sandbox server's credentials, with a fresh password.
fn sandbox_credentials(hostname: &str) -> anyhow::Result<Credentials> {
    Ok(Credentials {
        username: "root".into(),
        password: service_kit_token()?,
        host: format!("{hostname}.sandbox.example.net"),
    })
}

/// A random root password: 24 bytes from the OS CSPRNG, base64url.
fn service_kit_token() -> anyhow::Result<String> {
    use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
    use ring::rand::{SecureRandom, SystemRandom};
    let mut b = [0u8; 24];
    SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| anyhow::anyhow!("no randomness"))?;
    Ok(URL_SAFE_NO_PAD.encode(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_sandbox_is_ready_after_its_delay_and_fails_when_told() {
        let clock = Clock::system();
        let p = Sandbox {
            delay_ms: 60_000,
            fail: false,
            clock: clock.clone(),
        };
        let r = p.create("web-1").await.expect("create");
        // Pending, with its estimate: the delay after creation.
        match p.status(&r).await.expect("status") {
            Status::Pending { eta: Some(eta) } => {
                let wait = eta - clock.now();
                assert!(
                    wait > time::Duration::seconds(59) && wait <= time::Duration::seconds(60),
                    "{wait}"
                );
            }
            other => panic!("{other:?}"),
        }
        clock.advance(time::Duration::seconds(61));
        match p.status(&r).await.expect("status") {
            Status::Ready(c) => {
                assert_eq!(c.host, "web-1.sandbox.example.net");
                assert!(c.password.len() >= 32);
            }
            other => panic!("{other:?}"),
        }
        let failing = Sandbox {
            delay_ms: 0,
            fail: true,
            clock,
        };
        assert!(failing.create("web-2").await.is_err());
    }

    #[tokio::test]
    async fn sandbox_rotation_answers_a_fresh_password_for_the_same_host() {
        let clock = Clock::system();
        let p = Sandbox {
            delay_ms: 0,
            fail: false,
            clock,
        };
        let r = p.create("web-3").await.expect("create");
        let Status::Ready(first) = p.status(&r).await.expect("status") else {
            panic!("not ready");
        };
        let rotated = p.rotate(&r).await.expect("rotate");
        assert_eq!(
            (rotated.username.as_str(), rotated.host.as_str()),
            ("root", first.host.as_str())
        );
        assert_ne!(rotated.password, first.password);
        assert!(p.rotate("nonsense").await.is_err());
    }
}
