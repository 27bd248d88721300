//! Fan-out: each product event on the PRODUCT stream becomes one delivery per
//! endpoint of its organization created before the event was committed and
//! still live when it is fanned out (a
//! durable consumer; one statement per batch of events storing the event once,
//! a log row and a queue row per delivery; idempotent by (endpoint, event), so
//! a redelivered event adds nothing). Only the webhook
//! kinds ([`event_contracts::WEBHOOK_KINDS`]) go out: the stream also carries
//! internal events (`usage.recorded`, billing data for org-billing), which
//! every endpoint would otherwise receive (endpoints have no event filter), so
//! they are acknowledged and skipped here rather than by narrowing the durable
//! consumer's subject on deployments that have it.

use crate::{
    state::AppState,
    worker::{Dispatch, Handoff, Leased, Room, PARKED},
};
use bytes::Bytes;
use event_contracts::ProductEvent;
use hub_domain::OrgId;
use service_kit::nats::RawMessage;
use std::{collections::HashMap, sync::Arc, time::Instant};
use time::OffsetDateTime;
use uuid::Uuid;

/// The events of one batch that go to webhooks, as arrays for one statement.
#[derive(Default)]
struct Batch {
    ids: Vec<Uuid>,
    orgs: Vec<OrgId>,
    kinds: Vec<String>,
    payloads: Vec<String>,
    /// The same bodies, shared by the deliveries handed off to the worker.
    bodies: Vec<Bytes>,
    at: Vec<OffsetDateTime>,
}

/// Store a batch of product events and queue their deliveries. With the
/// worker in this process (`dispatch`), the deliveries it has room for are
/// queued leased and sent at once (see [`Dispatch::admit`]); the others, and
/// all of them without a worker here, wait in the queue for a claim.
pub async fn store(
    state: &AppState,
    dispatch: Option<&Arc<Dispatch>>,
    msgs: Vec<RawMessage>,
) -> anyhow::Result<()> {
    let mut b = Batch::default();
    for m in msgs {
        match serde_json::from_slice::<ProductEvent<serde_json::Value>>(&m.payload) {
            Ok(e) if !event_contracts::is_webhook_kind(&e.kind) => {
                tracing::debug!(kind = %e.kind, "internal product event; not for webhooks")
            }
            Ok(e) => {
                b.ids.push(e.id);
                b.orgs.push(e.org_id);
                b.kinds.push(e.kind);
                // The raw body exactly as committed: what gets signed and sent.
                let payload = String::from_utf8_lossy(&m.payload).into_owned();
                b.bodies.push(Bytes::from(payload.clone()));
                b.payloads.push(payload);
                b.at.push(e.created_at);
            }
            Err(e) => {
                tracing::error!(error = %e, subject = %m.subject, "not a product event; skipped")
            }
        }
    }
    if b.ids.is_empty() {
        return Ok(());
    }
    match dispatch {
        Some(d) => d.admit(|room| queue(state, &b, Some(room))).await,
        None => queue(state, &b, None).await.map(|_| ()),
    }
}

/// One statement: the events that have an endpoint (their payload once), a
/// log row and a queue row per endpoint, leased (due when the lease runs out)
/// for those `room` admits: no more than its total, and no endpoint beyond
/// its share, taking endpoints in turn. A redelivered event conflicts on its
/// log rows, so it queues nothing twice.
///
/// Only endpoints live now are served (an event committed before its
/// endpoint's deletion but fanned out after it goes nowhere), and they are
/// locked (FOR SHARE) until the statement commits: a DELETE waits for it and
/// then removes what it queued (or came first, and the endpoint is not
/// served). A suspended organization's deliveries are queued parked
/// ([`PARKED`]), never leased; its status row is locked the same way, so a
/// reactivation's unparking sees them.
async fn queue(state: &AppState, b: &Batch, room: Option<Room>) -> anyhow::Result<Handoff> {
    let now = state.clock.now();
    let lease = now + time::Duration::milliseconds(state.delivery.lease_ms.max(1) as i64);
    let room = room.unwrap_or(Room {
        total: 0,
        cap: 0,
        busy: vec![],
        endpoints: vec![],
        in_flight: vec![],
    });
    let seen = Instant::now();
    let rows = sqlx::query!(
        r#"WITH ev AS (
           SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::timestamptz[])
             AS ev(id, org_id, kind, payload, at)),
         live AS (
           SELECT e.id, e.org_id, e.created_at FROM endpoints e
           WHERE e.org_id = ANY($2) AND e.deleted_at IS NULL FOR SHARE),
         susp AS (
           SELECT org_id FROM org_states WHERE org_id = ANY($2) AND suspended FOR SHARE),
         target AS (
           SELECT e.id AS endpoint_id, ev.id AS event_id FROM ev
           JOIN live e ON e.org_id = ev.org_id AND e.created_at <= ev.at),
         stored AS (
           INSERT INTO events (id, org_id, event_type, payload, created_at)
           SELECT ev.id, ev.org_id, ev.kind, ev.payload, ev.at FROM ev
           WHERE ev.id IN (SELECT event_id FROM target)
           ON CONFLICT (id) DO NOTHING),
         logged AS (
           INSERT INTO deliveries (endpoint_id, event_id, created_at)
           SELECT endpoint_id, event_id, $6 FROM target
           ON CONFLICT (endpoint_id, event_id, series) DO NOTHING
           RETURNING id, endpoint_id, event_id),
         turn AS (
           SELECT l.id, l.endpoint_id, l.event_id,
                  row_number() OVER (PARTITION BY l.endpoint_id ORDER BY l.id) AS rn,
                  $9 - COALESCE(f.n, 0) AS room,
                  e.org_id IN (SELECT org_id FROM susp) AS paused
           FROM logged l JOIN live e ON e.id = l.endpoint_id
             LEFT JOIN unnest($10::uuid[], $11::int[]) AS f(endpoint_id, n)
             ON f.endpoint_id = l.endpoint_id),
         taken AS (
           SELECT id, endpoint_id, event_id, paused,
                  NOT paused AND rn <= room
                    AND row_number() OVER (ORDER BY NOT paused AND rn <= room DESC, rn, id) <= $8 AS take
           FROM turn),
         queued AS (
           INSERT INTO queue (delivery_id, endpoint_id, event_id, due_at)
           SELECT id, endpoint_id, event_id, CASE WHEN take THEN $7 WHEN paused THEN $12::timestamptz ELSE $6 END
           FROM taken
           RETURNING delivery_id, endpoint_id, event_id, due_at)
         SELECT q.delivery_id AS "id!", q.endpoint_id AS "endpoint_id!", q.event_id AS "event_id!",
                q.due_at = $7 AS "leased!", q.due_at AS "due_at!", e.url AS "url!", e.secret AS "secret!",
                e.previous_secret, e.previous_until
         FROM queued q JOIN endpoints e ON e.id = q.endpoint_id"#,
        &b.ids as &[Uuid],
        &b.orgs as &[OrgId],
        &b.kinds,
        &b.payloads,
        &b.at,
        now,
        lease,
        room.total.min(i64::MAX as usize) as i64,
        room.cap.min(i32::MAX as usize) as i32,
        &room.endpoints,
        &room.in_flight,
        PARKED,
    )
    .fetch_all(&state.pool)
    .await?;
    let events: HashMap<Uuid, usize> = b.ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut handoff = Handoff {
        leased: Vec::with_capacity(rows.len()),
        waiting: 0,
    };
    for r in rows {
        if r.due_at == PARKED {
            continue;
        }
        let Some(&i) = events.get(&r.event_id).filter(|_| r.leased) else {
            handoff.waiting += 1;
            continue;
        };
        handoff.leased.push(Leased {
            id: r.id,
            endpoint_id: r.endpoint_id,
            event_id: r.event_id,
            event_type: b.kinds[i].clone(),
            payload: b.bodies[i].clone(),
            url: r.url,
            secret: r.secret,
            previous_secret: r.previous_secret,
            previous_until: r.previous_until,
            lease: r.due_at,
            seen,
        });
    }
    Ok(handoff)
}
