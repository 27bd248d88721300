//! `GET /v1/admin/overview` (staff): what needs a person now, across every
//! service, in one answer. The gateway asks each deployed service for its
//! part ([`service_kit::overview`]: its queues and its consumers' dead
//! letters) and for its readiness, all at once, and keeps the whole for
//! `overview.cache_secs`: however many staff look, each service counts at
//! most once per period. Concurrent requests while it gathers wait for that
//! one gathering. A service that does not answer in `overview.timeout_ms`
//! is shown not ready, its part missing; the others are still shown.

use crate::cache::Resolved;
use actix_web::{http::StatusCode, HttpResponse};
use bytes::Bytes;
use hub_domain::Identity;
use serde::Serialize;
use service_kit::{
    assertion::{self, RequestFacts},
    error::json_error,
    overview::{Part, Queue, PATH},
};
use std::{
    collections::{BTreeMap, HashMap},
    time::{Duration, Instant},
};
use time::OffsetDateTime;

/// Whom the gateway asks: service -> base URL (empty: not deployed), and the
/// minter of each deployed service's assertions.
#[derive(Clone, Copy)]
pub struct Upstreams<'a> {
    pub urls: &'a HashMap<String, String>,
    pub minters: &'a HashMap<String, service_kit::assertion::Minter>,
}

impl Upstreams<'_> {
    fn url(&self, service: &str) -> Option<&str> {
        self.urls
            .get(service)
            .map(String::as_str)
            .filter(|u| !u.is_empty())
    }

    /// `GET path` of `service` on behalf of `caller` (who asks, not their
    /// organizations: none travel), signed like any forwarded request; None
    /// when the service is not deployed.
    #[allow(clippy::too_many_arguments)]
    pub fn get<'a>(
        &self,
        client: &'a reqwest::Client,
        service: &str,
        path: &'static str,
        caller: &Resolved,
        ip: &str,
        request_id: &str,
        timeout: Duration,
    ) -> Option<impl std::future::Future<Output = reqwest::Result<reqwest::Response>> + 'a> {
        let (base, minter) = (self.url(service)?, self.minters.get(service)?);
        let identity = Identity {
            memberships: Vec::new(),
            ..caller.identity.clone()
        };
        let (a, sig) = minter.sign(
            Some(identity),
            Some(caller.credential),
            !caller.identity.memberships.is_empty(),
            &RequestFacts {
                method: "GET",
                path_and_query: path,
                body: b"",
                idempotency_key: None,
                ip,
                request_id,
                deadline_ms: None,
            },
        );
        Some(
            client
                .get(format!("{base}{path}"))
                .header(assertion::ASSERTION_HEADER, a)
                .header(assertion::SIGNATURE_HEADER, sig)
                .header(service_kit::http::REQUEST_ID_HEADER, request_id)
                .headers(service_kit::telemetry::trace_headers())
                .timeout(timeout)
                .send(),
        )
    }
}

/// The overview as last gathered, and how long it is served.
pub struct Overview {
    ttl: Duration,
    timeout: Duration,
    last: tokio::sync::Mutex<Option<(Instant, Bytes)>>,
}

/// One service as the overview shows it.
#[derive(Serialize)]
struct ServiceState {
    /// Its `/readyz` answered 200.
    ready: bool,
    /// Its part could not be read (not deployed, unreachable, an error):
    /// why, with its queues left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Dead letters per consumer of this service; None when NATS could not
    /// say (or the part is missing).
    dead_letters: Option<BTreeMap<String, u64>>,
}

#[derive(Serialize)]
struct Body {
    #[serde(with = "time::serde::rfc3339")]
    generated_at: OffsetDateTime,
    /// How long this answer is served before the services are asked again.
    cache_secs: u64,
    /// Every service's queues, by queue name.
    queues: BTreeMap<String, Queue>,
    /// Dead letters summed over every service's consumers; None when some
    /// service could not say.
    dead_letters_total: Option<u64>,
    services: BTreeMap<String, ServiceState>,
}

impl Overview {
    pub fn new(ttl: Duration, timeout: Duration) -> Overview {
        Overview {
            ttl,
            timeout,
            last: tokio::sync::Mutex::new(None),
        }
    }

    /// The answer to a staff member (`resolved`); 403 for anyone else.
    pub async fn answer(
        &self,
        gw: Upstreams<'_>,
        client: &reqwest::Client,
        resolved: &Resolved,
        request_id: &str,
    ) -> HttpResponse {
        if !resolved.identity.staff {
            return json_error(StatusCode::FORBIDDEN, "staff only");
        }
        let mut last = self.last.lock().await;
        let body = match &*last {
            Some((at, body)) if at.elapsed() < self.ttl => body.clone(),
            _ => {
                let body = self.gather(gw, client, resolved, request_id).await;
                *last = Some((Instant::now(), body.clone()));
                body
            }
        };
        HttpResponse::Ok()
            .content_type("application/json")
            .insert_header(("cache-control", "no-store"))
            .body(body)
    }

    /// Ask every deployed service at once.
    async fn gather(
        &self,
        gw: Upstreams<'_>,
        client: &reqwest::Client,
        staff: &Resolved,
        request_id: &str,
    ) -> Bytes {
        let asked = gw.urls.keys().map(|service| async move {
            let (ready, part) = futures::join!(
                self.ready(gw, client, service),
                self.part(gw, client, service, staff, request_id)
            );
            (service.clone(), ready, part)
        });
        let answers = futures::future::join_all(asked).await;
        let mut body = Body {
            generated_at: OffsetDateTime::now_utc(),
            cache_secs: self.ttl.as_secs(),
            queues: BTreeMap::new(),
            dead_letters_total: Some(0),
            services: BTreeMap::new(),
        };
        for (service, ready, part) in answers {
            let state = match part {
                Ok(p) => {
                    body.queues.extend(p.queues);
                    body.dead_letters_total = body
                        .dead_letters_total
                        .zip(p.dead_letters.as_ref())
                        .map(|(t, d)| t + d.values().sum::<u64>());
                    ServiceState {
                        ready,
                        error: None,
                        dead_letters: p.dead_letters,
                    }
                }
                Err(e) => {
                    body.dead_letters_total = None;
                    ServiceState {
                        ready,
                        error: Some(e),
                        dead_letters: None,
                    }
                }
            };
            body.services.insert(service, state);
        }
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
    }

    /// Whether `service` answers its readiness probe with 200.
    async fn ready(&self, gw: Upstreams<'_>, client: &reqwest::Client, service: &str) -> bool {
        let Some(base) = gw.url(service) else {
            return false;
        };
        client
            .get(format!("{base}/readyz"))
            .timeout(self.timeout)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    }

    /// `service`'s part, asked on behalf of `staff`.
    async fn part(
        &self,
        gw: Upstreams<'_>,
        client: &reqwest::Client,
        service: &str,
        staff: &Resolved,
        request_id: &str,
    ) -> Result<Part, String> {
        let resp = match gw.get(client, service, PATH, staff, "", request_id, self.timeout) {
            None => return Err("not deployed".into()),
            Some(sent) => sent.await.map_err(|e| {
                tracing::warn!(service, error = %e, "overview: service unreachable");
                if e.is_timeout() {
                    "timed out".to_owned()
                } else {
                    "unreachable".to_owned()
                }
            })?,
        };
        if !resp.status().is_success() {
            tracing::warn!(
                service,
                status = resp.status().as_u16(),
                "overview: service refused"
            );
            return Err(format!("answered {}", resp.status().as_u16()));
        }
        resp.json::<Part>().await.map_err(|e| {
            tracing::warn!(service, error = %e, "overview: unreadable part");
            "unreadable answer".to_owned()
        })
    }
}
