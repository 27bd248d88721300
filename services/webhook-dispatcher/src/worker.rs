//! The delivery worker.
//!
//! A first attempt normally never waits in the queue: the fan-out queues the
//! deliveries it has room for already leased (their `due_at` `delivery.lease_ms`
//! ahead) and hands them straight to this worker, which sends them at once
//! ([`Dispatch::admit`]). Everything else (retries, what the fan-out had no room
//! for, attempts whose lease ran out because their dispatcher died) is
//! claimed from the queue table in batches with `FOR UPDATE SKIP LOCKED` and a
//! lease, so any number of replicas share it. Attempts run concurrently
//! (`delivery.concurrency` in all), at most `delivery.per_endpoint` per
//! endpoint: a receiver that hangs holds only its own slots until the
//! attempt's timeout, and every other endpoint's deliveries go on. Outcomes are
//! recorded in batches, one statement each: every attempt adds a row to the
//! `outcomes` log, and a settled delivery leaves the queue. A 2xx is
//! delivered; anything else (timeout, connection error, blocked address, any
//! other status, a redirect) counts as a failed attempt, retried after
//! `delivery.backoff_ms` until `delivery.attempts`. When the process stops,
//! attempts in flight finish and are recorded; those still waiting for a
//! slot give their delivery back to the queue, due now, for any replica.
//!
//! Guarantee: every delivery is sent at least once. It is sent exactly once
//! unless the dispatcher stops between sending and recording the outcome, or
//! an attempt outlasts its lease (`lease_ms` is above `timeout_ms` by
//! default): then the lease runs out and it is sent again with the same
//! `webhook-id`, which receivers use to drop the duplicate. Of two answers to
//! one attempt only the first is recorded (outcomes are fenced by the attempt
//! count).

pub use crate::attempts::{tombstone, AttemptMetrics, InFlight};

use crate::{
    attempts::Taken,
    settings::{DeliverySettings, SsrfSettings},
    ssrf,
    state::{secret_aad, AppState},
};
use bytes::Bytes;
use hub_domain::EndpointId;
use service_kit::tls::TlsSettings;
use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, PoisonError,
    },
    time::{Duration, Instant},
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
    /// The event's body, shared by its deliveries handed off together.
    payload: Bytes,
    attempts: i32,
    url: String,
    secret: Vec<u8>,
    previous_secret: Option<Vec<u8>>,
    previous_until: Option<OffsetDateTime>,
    /// The `due_at` this process holds the delivery with: its lease.
    lease: OffsetDateTime,
    /// When the last statement that found its queue row (the fan-out's, the
    /// claim's, a renewal's) was issued: its endpoint was live then (see
    /// [`Dispatch::cleared`]).
    seen: Instant,
}

struct Outcome {
    id: Uuid,
    attempts_before: i32,
    code: Option<i32>,
    error: Option<String>,
}

/// An attempt is sent only if a statement that found its endpoint live (its
/// queue row present, or the endpoint not deleted) was issued at most this
/// long before: the fetch that gave it, a renewal, or a check.
pub const FRESH: Duration = Duration::from_millis(500);
/// How long a DELETE that removed leased queue rows waits after its commit
/// before it answers: past [`FRESH`] (and the few microseconds between the
/// last look at it and the send), so no replica begins an attempt at the
/// endpoint afterwards.
pub const FENCE_WAIT: Duration = Duration::from_millis(750);
/// How often endpoints with attempts taken are checked (deleted? suspended?).
const CHECK_EVERY: Duration = Duration::from_millis(100);

/// Where a suspended organization's deliveries wait: due never, until its
/// reactivation makes them due now (see [`crate::orgs`]).
pub const PARKED: OffsetDateTime = time::macros::datetime!(9999-12-31 0:00 UTC);

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

/// What the worker admits at one moment: how many attempts in all, at most
/// `cap` per endpoint, given each endpoint's attempts taken already (those at
/// `cap`, `busy`, are left out).
pub struct Room {
    pub total: usize,
    pub cap: usize,
    pub busy: Vec<Uuid>,
    pub endpoints: Vec<Uuid>,
    pub in_flight: Vec<i32>,
}

/// The delivery worker's admission and launch, shared by its claimer and the
/// fan-out's hand-off (see [`Dispatch::admit`]).
pub struct Dispatch {
    state: actix_web::web::Data<AppState>,
    client: reqwest::Client,
    /// Slots: `delivery.concurrency` attempts sending at once.
    sem: Arc<Semaphore>,
    /// Attempts taken in all (sending, or waiting for a slot).
    taken: Arc<AtomicUsize>,
    /// Attempts taken per slot, in all ([`DEPTH`]) and per endpoint
    /// ([`DEPTH_PER_ENDPOINT`]), when a lease outlasts an attempt (the
    /// default: 30 s over 10 s), so that attempts wait for a slot in memory,
    /// leased (a lease about to run out is renewed before sending, see
    /// [`Dispatch::still_ours`]), and claims come in batches; else 1 and 1.
    depth: usize,
    depth_per_endpoint: usize,
    tx: mpsc::Sender<Outcome>,
    /// Held from reading the [`Room`] to launching what was claimed with it:
    /// slots are only taken under it, so a claim never finds fewer than it
    /// was sized for, and no endpoint gets more than its share.
    admission: tokio::sync::Mutex<()>,
    /// Due deliveries may be waiting in the queue (the last claim took some,
    /// or left an endpoint at its share out, or the fan-out queued some it
    /// had no room to lease): a finished attempt then wakes the claimer.
    backlog: AtomicBool,
    /// Fires when the process stops: attempts still waiting for a slot give
    /// their delivery back to the queue ([`Dispatch::give_back`]).
    cancel: CancellationToken,
    /// Notified after each check of the endpoints with attempts taken.
    checked: tokio::sync::Notify,
}

/// What the fan-out queued under [`Dispatch::admit`]: the deliveries it
/// leased as it queued them, and how many it queued unleased (no room).
pub struct Handoff {
    pub leased: Vec<Leased>,
    pub waiting: usize,
}

/// A first attempt that the fan-out leased as it queued it.
pub struct Leased {
    pub id: Uuid,
    pub endpoint_id: Uuid,
    pub event_id: Uuid,
    pub event_type: String,
    pub payload: Bytes,
    pub url: String,
    pub secret: Vec<u8>,
    pub previous_secret: Option<Vec<u8>>,
    pub previous_until: Option<OffsetDateTime>,
    /// Its queue row's `due_at`, as stored: the lease.
    pub lease: OffsetDateTime,
    /// When the fan-out's statement was issued.
    pub seen: Instant,
}

/// Attempts taken per slot when leases can be renewed (see `Dispatch::depth`),
/// in all: a fan-out as wide as 100 endpoints times a batch of 200 events
/// mostly fits (16,384 with the default 512 slots), so it is handed off
/// rather than queued for claims; an attempt waiting costs its queue row's
/// few fields (the body is shared with its event's other deliveries).
const DEPTH: usize = 32;
/// The same per endpoint (512 with the default 64 slots), so a slow
/// endpoint's backlog stays mostly in the queue, where any replica can take it.
const DEPTH_PER_ENDPOINT: usize = 8;

/// Start the worker: its claimer and its recorder run until `cancel` fires.
/// The returned [`Dispatch`] also takes the fan-out's hand-offs.
pub fn spawn(
    state: actix_web::web::Data<AppState>,
    pool: sqlx::PgPool,
    cancel: CancellationToken,
) -> anyhow::Result<(Arc<Dispatch>, Vec<tokio::task::JoinHandle<()>>)> {
    let client = client(
        &state.delivery,
        &state.tls,
        state.ssrf,
        ssrf::Lookup::system(),
    )?;
    let (tx, rx) = mpsc::channel::<Outcome>(state.delivery.concurrency * 2);
    let recorder = tokio::spawn(record(state.clone(), pool.clone(), rx));
    let dispatch = Arc::new(Dispatch {
        state: state.clone(),
        client,
        sem: Arc::new(Semaphore::new(state.delivery.concurrency.max(1))),
        taken: Arc::default(),
        depth: if renewable(&state.delivery) { DEPTH } else { 1 },
        depth_per_endpoint: if renewable(&state.delivery) {
            DEPTH_PER_ENDPOINT
        } else {
            1
        },
        tx,
        admission: tokio::sync::Mutex::new(()),
        backlog: AtomicBool::new(true),
        cancel: cancel.clone(),
        checked: tokio::sync::Notify::new(),
    });
    let (d, checker_pool, stop) = (dispatch.clone(), pool.clone(), cancel.clone());
    let checker = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(CHECK_EVERY) => {},
            }
            if let Err(e) = d.check(&checker_pool).await {
                tracing::warn!(error = ?e, "checking the endpoints of attempts taken failed");
            }
        }
    });
    let d = dispatch.clone();
    let claimer = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = d.state.wake.notified() => {},
                _ = tokio::time::sleep(Duration::from_millis(100)) => {},
            }
            if let Err(e) = d.claim_and_send(&pool).await {
                tracing::warn!(error = ?e, "delivery pass failed");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        // Let attempts in flight finish (bounded by their timeout), and
        // those that were waiting give their deliveries back.
        let _ = d
            .sem
            .acquire_many(d.state.delivery.concurrency.max(1) as u32)
            .await;
        while d.taken.load(Ordering::Relaxed) > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    Ok((dispatch, vec![claimer, recorder, checker]))
}

impl Dispatch {
    /// What may be taken now, at most `limit`: `depth` attempts per slot in
    /// all, `depth_per_endpoint` per endpoint's slot, counting those taken
    /// already (sending or waiting for a slot).
    fn room(&self, limit: usize) -> Room {
        let cap = self.state.delivery.per_endpoint.max(1) * self.depth_per_endpoint;
        let (endpoints, in_flight): (Vec<Uuid>, Vec<i32>) = self
            .state
            .inflight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(id, t)| (*id, t.taken as i32))
            .unzip();
        let busy = endpoints
            .iter()
            .zip(&in_flight)
            .filter(|(_, n)| **n as usize >= cap)
            .map(|(id, _)| *id)
            .collect();
        let total = (self.state.delivery.concurrency.max(1) * self.depth)
            .saturating_sub(self.taken.load(Ordering::Relaxed));
        Room {
            total: total.min(limit),
            cap,
            busy,
            endpoints,
            in_flight,
        }
    }

    /// Lease and launch first attempts straight from the fan-out: `queue` is
    /// given the [`Room`] there is now and queues its deliveries, leasing
    /// those the room admits; they are sent without a claim, at once or as
    /// soon as a slot (and their endpoint's share) is free. What it queued
    /// unleased waits for the claimer, as do the leased ones this process
    /// dies before recording (their lease runs out). Once the process is
    /// stopping, nothing is leased: all is queued for other replicas.
    pub async fn admit<F, Fut>(self: &Arc<Self>, queue: F) -> anyhow::Result<()>
    where
        F: FnOnce(Room) -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<Handoff>>,
    {
        let _turn = self.admission.lock().await;
        let room = if self.cancel.is_cancelled() {
            self.room(0)
        } else {
            self.room(usize::MAX)
        };
        let handoff = queue(room).await?;
        if handoff.waiting > 0 {
            self.backlog.store(true, Ordering::Relaxed);
            self.state.wake.notify_one();
        }
        let claimed = handoff
            .leased
            .into_iter()
            .map(|l| Claimed {
                id: l.id,
                endpoint_id: l.endpoint_id,
                event_id: l.event_id,
                event_type: l.event_type,
                payload: l.payload,
                attempts: 0,
                url: l.url,
                secret: l.secret,
                previous_secret: l.previous_secret,
                previous_until: l.previous_until,
                lease: l.lease,
                seen: l.seen,
            })
            .collect();
        self.launch(claimed).await
    }

    async fn claim_and_send(self: &Arc<Self>, pool: &sqlx::PgPool) -> anyhow::Result<()> {
        loop {
            let _turn = self.admission.lock().await;
            if self.cancel.is_cancelled() {
                return Ok(());
            }
            let batch = self.state.delivery.batch.max(1) as usize;
            let room = self.room(batch);
            // Claim in batches: with most of the room taken, wait (for the
            // attempts that finish to wake the claimer) until a batch's worth
            // is free, rather than claim a few rows each time one finishes.
            if room.total < (batch / 2).min(self.state.delivery.concurrency / 4).max(1) {
                self.backlog.store(true, Ordering::Relaxed);
                return Ok(());
            }
            let now = self.state.clock.now();
            let lease = now + time::Duration::milliseconds(self.state.delivery.lease_ms as i64);
            // Candidates come from the head of the due index (bounded), so
            // ranking them per endpoint costs the same however long the queue
            // is; an endpoint is offered no more than its remaining share.
            // Each candidate is then locked through its primary key (the
            // LATERAL makes it a nested loop, in due order, stopping at the
            // batch): joined instead, the planner hashed the whole due range
            // of the queue for every claim, 35 ms per 256 rows at 20k rows.
            // A suspended organization's rows are parked instead of leased
            // (due never, until its reactivation): its status rows are locked
            // (FOR SHARE), so a reactivation's unparking, which waits for
            // them, sees what this parks.
            let seen = Instant::now();
            let claimed = sqlx::query!(
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
                   SELECT l.delivery_id
                   FROM (SELECT delivery_id, due_at FROM ranked WHERE rn <= room
                         ORDER BY due_at, delivery_id) r,
                   LATERAL (SELECT q.delivery_id FROM queue q
                            WHERE q.delivery_id = r.delivery_id AND q.due_at <= $1
                            FOR UPDATE SKIP LOCKED) l
                   LIMIT $3),
                 susp AS (SELECT org_id FROM org_states WHERE suspended FOR SHARE)
                 UPDATE queue q SET due_at = CASE WHEN s.org_id IS NULL THEN $4::timestamptz ELSE $8::timestamptz END
                 FROM due, events ev, endpoints e LEFT JOIN susp s ON s.org_id = e.org_id
                 WHERE q.delivery_id = due.delivery_id AND ev.id = q.event_id AND e.id = q.endpoint_id
                 RETURNING q.delivery_id AS "id!", q.endpoint_id AS "endpoint_id!", q.event_id AS "event_id!",
                           ev.event_type AS "event_type!", ev.payload AS "payload!", q.attempts AS "attempts!",
                           e.url AS "url!", e.secret AS "secret!", e.previous_secret, e.previous_until,
                           q.due_at AS "lease!""#,
                now,
                &room.busy,
                room.total as i64,
                lease,
                room.cap as i32,
                &room.endpoints,
                &room.in_flight,
                PARKED,
            )
            .fetch_all(pool)
            .await?;
            // A suspended organization's deliveries were parked, not taken;
            // the room they were counted in stays free for the next claim.
            let parked = claimed.iter().filter(|r| r.lease == PARKED).count();
            let claimed: Vec<_> = claimed.into_iter().filter(|r| r.lease != PARKED).collect();
            // One body per event, shared by its deliveries in this claim.
            let mut bodies: HashMap<Uuid, Bytes> = HashMap::new();
            let claimed: Vec<Claimed> = claimed
                .into_iter()
                .map(|r| Claimed {
                    id: r.id,
                    endpoint_id: r.endpoint_id,
                    event_id: r.event_id,
                    event_type: r.event_type,
                    payload: bodies
                        .entry(r.event_id)
                        .or_insert_with(|| Bytes::from(r.payload))
                        .clone(),
                    attempts: r.attempts,
                    url: r.url,
                    secret: r.secret,
                    previous_secret: r.previous_secret,
                    previous_until: r.previous_until,
                    lease: r.lease,
                    seen,
                })
                .collect();
            // Due deliveries may be left behind a claim that took some, and
            // behind an endpoint at its share (left out of the claim): take
            // them as slots free up. An empty claim with no endpoint left out
            // found nothing due.
            self.backlog.store(
                !claimed.is_empty() || parked > 0 || !room.busy.is_empty(),
                Ordering::Relaxed,
            );
            if claimed.is_empty() {
                if parked > 0 {
                    continue;
                }
                return Ok(());
            }
            self.launch(claimed).await?;
        }
    }

    /// `c`, about to be sent, if its lease still covers the attempt; else
    /// renewed first, as long as the queue row still holds this process's
    /// lease. `None`: the lease ran out and another claim took the delivery
    /// (or it was settled or stopped): not this process's to send.
    async fn still_ours(&self, mut c: Claimed) -> Option<Claimed> {
        let d = &self.state.delivery;
        let now = self.state.clock.now();
        let attempt_needs = time::Duration::milliseconds(d.timeout_ms as i64 + RENEW_MARGIN_MS);
        if !renewable(d) || c.lease - now > attempt_needs {
            return Some(c);
        }
        let lease = now + time::Duration::milliseconds(d.lease_ms as i64);
        let seen = Instant::now();
        match self.move_lease(&c, lease).await {
            Ok(Some(lease)) => {
                c.lease = lease;
                c.seen = seen;
                Some(c)
            }
            Ok(None) => None,
            Err(e) => {
                // Not sent now: its lease runs out and a claim sends it.
                tracing::warn!(error = ?e, "renewing a delivery's lease failed");
                None
            }
        }
    }

    /// Whether `c`, which holds a slot, may be sent now: not if its endpoint
    /// was deleted or its organization is suspended (as this process knows);
    /// else only if a statement that found it live was issued within
    /// [`FRESH`] (the fetch or renewal that gave it, or a check of its
    /// endpoint), or after the next check. Nothing awaits between a
    /// [`Cleared::Send`] and the request going out (signing is synchronous),
    /// so an attempt begins within [`FRESH`] of a read that found its
    /// endpoint live, and a DELETE answers [`FENCE_WAIT`] after its commit.
    async fn cleared(&self, c: Claimed) -> Cleared {
        loop {
            let checked = self.checked.notified();
            {
                let map = self
                    .state
                    .inflight
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let t = map.get(&c.endpoint_id);
                match t {
                    Some(t) if t.deleted => return Cleared::Deleted,
                    Some(t) if t.suspended => return Cleared::Paused(c),
                    _ => {}
                }
                let seen = t.and_then(|t| t.checked).map_or(c.seen, |k| k.max(c.seen));
                if seen.elapsed() < FRESH {
                    return Cleared::Send(c);
                }
            }
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Cleared::Stopping(c),
                _ = checked => {}
            }
        }
    }

    /// Check the endpoints with attempts taken here: deleted (by any replica),
    /// or their organization suspended; else mark them found live as of this
    /// statement's issue. One statement for all of them, every [`CHECK_EVERY`]:
    /// no query per delivery.
    async fn check(&self, pool: &sqlx::PgPool) -> sqlx::Result<()> {
        let ids: Vec<Uuid> = self
            .state
            .inflight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .copied()
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        let issued = Instant::now();
        let rows = sqlx::query!(
            r#"SELECT e.id, e.deleted_at IS NOT NULL AS "deleted!",
                      COALESCE(s.suspended, false) AS "suspended!"
               FROM endpoints e LEFT JOIN org_states s ON s.org_id = e.org_id
               WHERE e.id = ANY($1)"#,
            &ids,
        )
        .fetch_all(pool)
        .await?;
        {
            let mut map = self
                .state
                .inflight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            for r in rows {
                if let Some(t) = map.get_mut(&r.id) {
                    t.deleted |= r.deleted;
                    t.suspended = r.suspended;
                    if !r.deleted && !r.suspended {
                        t.checked = Some(issued);
                    }
                }
            }
        }
        self.checked.notify_waiters();
        Ok(())
    }

    /// Give `c`, which never got a slot, back to the queue as the process
    /// stops: due now, so any replica claims it at once rather than when its
    /// lease runs out; only while the row still holds this process's lease.
    /// If this fails the lease runs out, and it is claimed then.
    async fn give_back(&self, c: &Claimed) {
        if let Err(e) = self.move_lease(c, self.state.clock.now()).await {
            tracing::warn!(error = ?e, "giving a delivery back to the queue failed");
        }
    }

    /// Move `c`'s queue row to be due at `to` (a renewed lease, or now to
    /// give it back), only while the row still holds this process's lease
    /// (`due_at` as stored, and its attempt count). `None`: it does not.
    async fn move_lease(
        &self,
        c: &Claimed,
        to: OffsetDateTime,
    ) -> sqlx::Result<Option<OffsetDateTime>> {
        sqlx::query_scalar!(
            "UPDATE queue SET due_at = $4 WHERE delivery_id = $1 AND attempts = $2 AND due_at = $3 \
             RETURNING due_at",
            c.id,
            c.attempts,
            c.lease,
            to,
        )
        .fetch_optional(&self.state.pool)
        .await
    }

    /// Take each attempt and start it in a task that waits for its
    /// endpoint's share and a slot, then sends. The caller holds the
    /// admission turn and sized what it took by the [`Room`] it read under it;
    /// an attempt over its endpoint's limit, which that sizing rules out, is
    /// given back to the queue.
    async fn launch(self: &Arc<Self>, claimed: Vec<Claimed>) -> anyhow::Result<()> {
        let (cap, limit) = {
            let cap = self.state.delivery.per_endpoint.max(1);
            (cap, cap * self.depth_per_endpoint)
        };
        for c in claimed {
            let sending = {
                let mut map = self
                    .state
                    .inflight
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let t = map.entry(c.endpoint_id).or_insert_with(|| Taken {
                    taken: 0,
                    sending: Arc::new(Semaphore::new(cap)),
                    checked: None,
                    deleted: false,
                    suspended: false,
                });
                (t.taken < limit).then(|| {
                    t.taken += 1;
                    t.sending.clone()
                })
            };
            let Some(sending) = sending else {
                self.move_lease(&c, self.state.clock.now()).await?;
                self.backlog.store(true, Ordering::Relaxed);
                continue;
            };
            self.taken.fetch_add(1, Ordering::Relaxed);
            let taken = Release {
                d: self.clone(),
                endpoint: c.endpoint_id,
            };
            let d = self.clone();
            tokio::spawn(async move {
                // Neither semaphore is ever closed. A stop while waiting for
                // them: the delivery goes back to the queue, due now.
                let slots = tokio::select! {
                    biased;
                    _ = d.cancel.cancelled() => None,
                    slots = async {
                        let share = sending.acquire_owned().await;
                        (share, d.sem.clone().acquire_owned().await)
                    } => Some(slots),
                };
                let outcome = match slots {
                    Some(_) => match d.still_ours(c).await {
                        Some(c) => match d.cleared(c).await {
                            Cleared::Send(c) => Some(attempt(&d.state, &d.client, c).await),
                            // Its queue row went with the deletion.
                            Cleared::Deleted => None,
                            // Back to the queue, due now: the claim parks it
                            // while the organization is suspended, or, once
                            // it stops, another replica takes it.
                            Cleared::Paused(c) | Cleared::Stopping(c) => {
                                d.give_back(&c).await;
                                None
                            }
                        },
                        None => None,
                    },
                    None => {
                        d.give_back(&c).await;
                        None
                    }
                };
                drop(taken);
                if let Some(outcome) = outcome {
                    let _ = d.tx.send(outcome).await;
                }
                drop(slots);
                // A slot (and this endpoint's share) is free: when deliveries
                // are waiting in the queue, claim again now rather than at
                // the next poll.
                if d.backlog.load(Ordering::Relaxed) {
                    d.state.wake.notify_one();
                }
            });
        }
        Ok(())
    }
}

/// What [`Dispatch::cleared`] decided for an attempt holding a slot.
enum Cleared {
    Send(Claimed),
    Deleted,
    Paused(Claimed),
    Stopping(Claimed),
}

/// An attempt's place among those taken (in all and for its endpoint),
/// given up when it is dropped: when its task ends, or if it panics (so a
/// stopping process does not wait for it forever).
struct Release {
    d: Arc<Dispatch>,
    endpoint: Uuid,
}

impl Drop for Release {
    fn drop(&mut self) {
        {
            let mut map = self
                .d
                .state
                .inflight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(t) = map.get_mut(&self.endpoint) {
                t.taken = t.taken.saturating_sub(1);
                if t.taken == 0 {
                    map.remove(&self.endpoint);
                }
            }
        }
        self.d.taken.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How much of a lease beyond the attempt's timeout must be left to send
/// without renewing it.
const RENEW_MARGIN_MS: i64 = 1_000;

/// Whether a lease can outlast an attempt, so that attempts may wait for a
/// slot (renewed when needed) rather than be claimed only when one is free.
fn renewable(d: &DeliverySettings) -> bool {
    d.lease_ms as i64 > d.timeout_ms as i64 + 2 * RENEW_MARGIN_MS
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
    let aad = secret_aad(EndpointId::from_uuid(c.endpoint_id));
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
    let body = &c.payload[..];
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
