//! The delivery worker.
//!
//! Due deliveries are claimed from the queue table in batches with `FOR UPDATE
//! SKIP LOCKED` and a lease (their `due_at` moves `delivery.lease_ms` ahead),
//! so any number of replicas share them and an attempt a crashed dispatcher
//! held is made again when its lease runs out. Attempts run concurrently
//! (`delivery.concurrency` in all), at most `delivery.per_endpoint` per
//! endpoint: a receiver that hangs holds only its own slots until the
//! attempt's timeout, and every other endpoint's deliveries go on. Outcomes are
//! recorded in batches, one statement each: every attempt adds a row to the
//! `outcomes` log, and a settled delivery leaves the queue. A 2xx is
//! delivered; anything else (timeout, connection error, blocked address, any
//! other status, a redirect) counts as a failed attempt, retried after
//! `delivery.backoff_ms` until `delivery.attempts`.
//!
//! Guarantee: every delivery is sent at least once. It is sent exactly once
//! unless the dispatcher stops between sending and recording the outcome (then
//! the lease runs out and it is sent again with the same `webhook-id`, which
//! receivers use to drop the duplicate).

use crate::{
    settings::{DeliverySettings, SsrfSettings},
    ssrf,
    state::{secret_aad, AppState},
};
use service_kit::{
    metrics::{HistogramVec, IntCounterVec, Metrics},
    tls::TlsSettings,
};
use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};
use time::OffsetDateTime;
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

struct Claimed {
    id: Uuid,
    endpoint_id: Uuid,
    event_id: Uuid,
    event_type: String,
    payload: String,
    attempts: i32,
    url: String,
    secret: Vec<u8>,
    previous_secret: Option<Vec<u8>>,
    previous_until: Option<OffsetDateTime>,
}

struct Outcome {
    id: Uuid,
    attempts_before: i32,
    code: Option<i32>,
    error: Option<String>,
}

type InFlight = Arc<Mutex<HashMap<Uuid, usize>>>;

/// Delivery attempts by result (`delivered`; `rejected`: the endpoint
/// answered non-2xx; `timeout`; `unreachable`: connection or TLS failed;
/// `not_sent`: refused before sending, by the SSRF guard, an unreadable
/// secret or signing) and how long those that were sent took.
#[derive(Clone)]
pub struct AttemptMetrics {
    attempts: IntCounterVec,
    seconds: HistogramVec,
}

impl AttemptMetrics {
    pub fn new(m: &Metrics) -> AttemptMetrics {
        AttemptMetrics {
            attempts: m.counter(
                "hub_webhook_attempts_total",
                "Webhook delivery attempts by result.",
                &["result"],
            ),
            seconds: m.histogram(
                "hub_webhook_attempt_duration_seconds",
                "Time from sending a webhook to the endpoint's answer (or the failure), by result.",
                &["result"],
            ),
        }
    }

    fn sent(&self, result: &str, took: Duration) {
        self.attempts.with_label_values(&[result]).inc();
        self.seconds
            .with_label_values(&[result])
            .observe(took.as_secs_f64());
    }

    fn not_sent(&self) {
        self.attempts.with_label_values(&["not_sent"]).inc();
    }
}

/// The HTTP client deliveries go out with: no redirects; and either direct,
/// resolving through the SSRF guard (the proxy environment variables are
/// ignored: a proxy would connect in our place, past the guard), or through
/// the proxy `delivery.proxy` names, which then resolves and must refuse
/// internal addresses itself.
///
/// `https://` endpoints are verified against the platform's roots
/// (`SSL_CERT_FILE` honoured) and `tls.extra_ca_file`; a certificate that does
/// not verify fails the attempt, and the delivery log records why.
pub fn client(
    delivery: &DeliverySettings,
    tls: &TlsSettings,
    ssrf: SsrfSettings,
    lookup: ssrf::Lookup,
) -> anyhow::Result<reqwest::Client> {
    let builder = service_kit::tls::http_client(tls)?
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_millis(delivery.timeout_ms.min(5_000)))
        .pool_max_idle_per_host(64)
        .tcp_nodelay(true)
        .user_agent("hub-webhooks/1");
    let builder = match delivery.proxy_url() {
        None => builder
            .no_proxy()
            .dns_resolver(Arc::new(ssrf::GuardedResolver::new(ssrf, lookup))),
        Some(p) => builder.proxy(
            reqwest::Proxy::all(p)
                .map_err(|_| anyhow::anyhow!("delivery.proxy is not a proxy URL"))?,
        ),
    };
    Ok(builder.build()?)
}

/// Run until `cancel` fires.
pub fn spawn(
    state: actix_web::web::Data<AppState>,
    pool: sqlx::PgPool,
    cancel: CancellationToken,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let client = client(
        &state.delivery,
        &state.tls,
        state.ssrf,
        ssrf::Lookup::system(),
    )?;
    let (tx, rx) = mpsc::channel::<Outcome>(state.delivery.concurrency * 2);
    let recorder = tokio::spawn(record(state.clone(), pool.clone(), rx));
    let sem = Arc::new(Semaphore::new(state.delivery.concurrency.max(1)));
    let inflight: InFlight = Arc::default();
    let claimer = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = state.wake.notified() => {},
                _ = tokio::time::sleep(Duration::from_millis(100)) => {},
            }
            if let Err(e) = claim_and_send(&state, &pool, &client, &sem, &inflight, &tx).await {
                tracing::warn!(error = ?e, "delivery pass failed");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        // Let attempts in flight finish (bounded by their timeout).
        let _ = sem
            .acquire_many(state.delivery.concurrency.max(1) as u32)
            .await;
    });
    Ok(vec![claimer, recorder])
}

async fn claim_and_send(
    state: &actix_web::web::Data<AppState>,
    pool: &sqlx::PgPool,
    client: &reqwest::Client,
    sem: &Arc<Semaphore>,
    inflight: &InFlight,
    tx: &mpsc::Sender<Outcome>,
) -> anyhow::Result<()> {
    let cap = state.delivery.per_endpoint.max(1);
    loop {
        let room = sem.available_permits().min(state.delivery.batch as usize);
        if room == 0 {
            // Every slot is busy: wait for one.
            drop(sem.acquire().await?);
            continue;
        }
        // Each endpoint's attempts in flight: those at their share are left out
        // of the candidates (a hanging receiver cannot block the queue's head),
        // the others are offered no more than their remaining share.
        let (ids, counts): (Vec<Uuid>, Vec<i32>) = inflight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(id, n)| (*id, *n as i32))
            .unzip();
        let busy: Vec<Uuid> = ids
            .iter()
            .zip(&counts)
            .filter(|(_, n)| **n as usize >= cap)
            .map(|(id, _)| *id)
            .collect();
        let now = state.clock.now();
        let lease = now + time::Duration::milliseconds(state.delivery.lease_ms as i64);
        // Candidates come from the head of the due index (bounded), so ranking
        // them per endpoint costs the same however long the queue is.
        let claimed = sqlx::query_as!(
            Claimed,
            r#"WITH cand AS (
               SELECT delivery_id, endpoint_id, due_at FROM queue
               WHERE due_at <= $1 AND endpoint_id <> ALL($2)
               ORDER BY due_at LIMIT $3 * 4),
             ranked AS (
               SELECT c.delivery_id, c.due_at,
                      row_number() OVER (PARTITION BY c.endpoint_id ORDER BY c.due_at, c.delivery_id) AS rn,
                      $5 - COALESCE(f.n, 0) AS room
               FROM cand c LEFT JOIN unnest($6::uuid[], $7::int[]) AS f(endpoint_id, n)
                 ON f.endpoint_id = c.endpoint_id),
             due AS (
               SELECT q.delivery_id FROM queue q JOIN ranked r ON r.delivery_id = q.delivery_id
               WHERE r.rn <= r.room AND q.due_at <= $1
               ORDER BY r.due_at LIMIT $3 FOR UPDATE OF q SKIP LOCKED)
             UPDATE queue q SET due_at = $4 FROM due, events ev, endpoints e
             WHERE q.delivery_id = due.delivery_id AND ev.id = q.event_id AND e.id = q.endpoint_id
             RETURNING q.delivery_id AS "id!", q.endpoint_id AS "endpoint_id!", q.event_id AS "event_id!",
                       ev.event_type AS "event_type!", ev.payload AS "payload!", q.attempts AS "attempts!",
                       e.url AS "url!", e.secret AS "secret!", e.previous_secret, e.previous_until"#,
            now,
            &busy,
            room as i64,
            lease,
            cap as i32,
            &ids,
            &counts,
        )
        .fetch_all(pool)
        .await?;
        if claimed.is_empty() {
            return Ok(());
        }
        for c in claimed {
            let admitted = {
                let mut map = inflight.lock().unwrap_or_else(PoisonError::into_inner);
                let n = map.entry(c.endpoint_id).or_insert(0);
                let ok = *n < cap;
                if ok {
                    *n += 1;
                }
                ok
            };
            if !admitted {
                // Over this endpoint's share: give the claim back.
                sqlx::query!(
                    "UPDATE queue SET due_at = $2 WHERE delivery_id = $1 AND attempts = $3",
                    c.id,
                    now,
                    c.attempts,
                )
                .execute(pool)
                .await?;
                continue;
            }
            let permit = sem.clone().acquire_owned().await?;
            let (state, client, tx, inflight) =
                (state.clone(), client.clone(), tx.clone(), inflight.clone());
            tokio::spawn(async move {
                let endpoint = c.endpoint_id;
                let outcome = attempt(&state, &client, c).await;
                {
                    let mut map = inflight.lock().unwrap_or_else(PoisonError::into_inner);
                    if let Some(n) = map.get_mut(&endpoint) {
                        *n -= 1;
                        if *n == 0 {
                            map.remove(&endpoint);
                        }
                    }
                }
                let _ = tx.send(outcome).await;
                drop(permit);
                // A slot (and this endpoint's share) is free: claim again now
                // rather than at the next poll.
                state.wake.notify_one();
            });
        }
    }
}

/// One attempt: sign, send, classify.
async fn attempt(state: &AppState, client: &reqwest::Client, c: Claimed) -> Outcome {
    let (id, attempts_before) = (c.id, c.attempts);
    let outcome = send(state, client, c).await;
    match &outcome {
        Attempted::Answered { took, .. } | Attempted::Failed { took, .. } => {
            state.metrics.sent(outcome.result(), *took)
        }
        Attempted::NotSent(_) => state.metrics.not_sent(),
    }
    let (code, error) = match outcome {
        Attempted::Answered { code, .. } if (200..300).contains(&code) => (Some(code), None),
        Attempted::Answered { code, .. } => {
            (Some(code), Some(format!("the endpoint answered {code}")))
        }
        Attempted::Failed { error, .. } | Attempted::NotSent(error) => (None, Some(error)),
    };
    Outcome {
        id,
        attempts_before,
        code: code.map(i32::from),
        error,
    }
}

/// What became of one attempt to send.
enum Attempted {
    /// Refused before sending (the reason).
    NotSent(String),
    /// The endpoint answered with `code`.
    Answered { code: u16, took: Duration },
    /// Timed out or could not connect.
    Failed {
        error: String,
        timeout: bool,
        took: Duration,
    },
}

impl Attempted {
    fn result(&self) -> &'static str {
        match self {
            Attempted::NotSent(_) => "not_sent",
            Attempted::Answered { code, .. } if (200..300).contains(code) => "delivered",
            Attempted::Answered { .. } => "rejected",
            Attempted::Failed { timeout: true, .. } => "timeout",
            Attempted::Failed { .. } => "unreachable",
        }
    }
}

/// Sign and send `c` (its payload goes out as the body, not copied).
async fn send(state: &AppState, client: &reqwest::Client, c: Claimed) -> Attempted {
    let fail = Attempted::NotSent;
    let aad = secret_aad(c.endpoint_id);
    let secret = match state.sealer.open(&c.secret, &aad) {
        Ok(s) => String::from_utf8_lossy(&s).into_owned(),
        Err(e) => return fail(format!("endpoint secret does not open: {e}")),
    };
    let now = state.clock.now();
    let previous = match (&c.previous_secret, c.previous_until) {
        (Some(p), Some(until)) if until > now => state
            .sealer
            .open(p, &aad)
            .ok()
            .map(|s| String::from_utf8_lossy(&s).into_owned()),
        _ => None,
    };
    let url = match ssrf::for_delivery(&c.url, state.ssrf) {
        Ok(u) => u,
        Err(e) => return fail(e),
    };
    let body = c.payload.as_bytes();
    let ts = now.unix_timestamp();
    let msg_id = c.event_id.to_string();
    let mut sigs = Vec::with_capacity(2);
    for s in std::iter::once(&secret).chain(previous.as_ref()) {
        match hub_webhooks::standard_signature(s, &msg_id, ts, body) {
            Ok(sig) => sigs.push(sig),
            Err(e) => return fail(format!("signing failed: {e}")),
        }
    }
    let service_sig = hub_webhooks::service_signature(&secret, body);
    let sent = client
        .post(url)
        .timeout(Duration::from_millis(state.delivery.timeout_ms))
        .header("content-type", "application/json")
        .header("x-service-event", c.event_type.as_str())
        .header("x-service-sig", service_sig)
        .header("webhook-id", msg_id)
        .header("webhook-timestamp", ts.to_string())
        .header("webhook-signature", sigs.join(" "))
        .body(c.payload);
    let started = std::time::Instant::now();
    let sent = sent.send().await;
    let took = started.elapsed();
    match sent {
        Ok(r) => Attempted::Answered {
            code: r.status().as_u16(),
            took,
        },
        Err(e) if e.is_timeout() => Attempted::Failed {
            error: "timed out".into(),
            timeout: true,
            took,
        },
        Err(e) => Attempted::Failed {
            error: format!("could not deliver: {}", error_chain(&e)),
            timeout: false,
            took,
        },
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s.chars().take(300).collect()
}

/// Record outcomes in batches: one statement for everything that finished
/// meanwhile. An outcome counts only while its delivery is still queued with
/// the attempt count the attempt started from (not stopped by its endpoint's
/// deletion, nor recorded already by a replica that took over an expired
/// lease); a settled delivery leaves the queue, one to retry is due again.
async fn record(
    state: actix_web::web::Data<AppState>,
    pool: sqlx::PgPool,
    mut rx: mpsc::Receiver<Outcome>,
) {
    let mut buf = Vec::with_capacity(512);
    while rx.recv_many(&mut buf, 512).await > 0 {
        let now = state.clock.now();
        let max = state.delivery.attempts.max(1);
        let (mut ids, mut befores, mut statuses, mut nexts, mut codes, mut errors) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        for o in buf.drain(..) {
            let attempts = o.attempts_before + 1;
            let (status, next) = match (&o.error, attempts >= max) {
                (None, _) => ("delivered", now),
                (Some(_), true) => ("failed", now),
                (Some(_), false) => {
                    let wait = state
                        .delivery
                        .backoff_ms
                        .get((attempts - 1) as usize)
                        .or(state.delivery.backoff_ms.last())
                        .copied()
                        .unwrap_or(1000);
                    ("pending", now + time::Duration::milliseconds(wait as i64))
                }
            };
            ids.push(o.id);
            befores.push(o.attempts_before);
            statuses.push(status);
            nexts.push(next);
            codes.push(o.code);
            errors.push(o.error);
        }
        let updated = sqlx::query!(
            "WITH u AS ( \
               SELECT DISTINCT ON (id) * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::timestamptz[], $5::int[], $6::text[]) \
                 AS u(id, before, status, next, code, err)), \
             settled AS ( \
               DELETE FROM queue q USING u \
               WHERE q.delivery_id = u.id AND q.attempts = u.before AND u.status <> 'pending' \
               RETURNING q.delivery_id), \
             again AS ( \
               UPDATE queue q SET attempts = u.before + 1, due_at = u.next FROM u \
               WHERE q.delivery_id = u.id AND q.attempts = u.before AND u.status = 'pending' \
               RETURNING q.delivery_id) \
             INSERT INTO outcomes (delivery_id, seq, attempts, status, status_code, error, at) \
             SELECT u.id, u.before + 1, u.before + 1, u.status, u.code, u.err, $7 FROM u \
             WHERE u.id IN (SELECT delivery_id FROM settled UNION ALL SELECT delivery_id FROM again) \
             ON CONFLICT (delivery_id, seq) DO NOTHING",
            &ids,
            &befores,
            &statuses as &[&str],
            &nexts,
            &codes as &[Option<i32>],
            &errors as &[Option<String>],
            now,
        )
        .execute(&pool)
        .await;
        match updated {
            Ok(_) => {
                if statuses.contains(&"pending") {
                    state.wake.notify_one();
                }
            }
            // Not recorded: the leases run out and these are sent again.
            Err(e) => {
                tracing::error!(error = ?e, n = ids.len(), "recording delivery outcomes failed")
            }
        }
    }
}
