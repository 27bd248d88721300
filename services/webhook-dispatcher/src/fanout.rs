//! Fan-out: each product event on the PRODUCT stream becomes one delivery per
//! endpoint of its organization that existed when the event was committed (a
//! durable consumer; one statement per batch of events storing the event once,
//! a log row and a queue row per delivery; idempotent by (endpoint, event), so
//! a redelivered event adds nothing). Only the webhook
//! kinds ([`event_contracts::WEBHOOK_KINDS`]) go out: the stream also carries
//! internal events (`usage.recorded`, billing data for org-billing), which
//! every endpoint would otherwise receive (endpoints have no event filter), so
//! they are acknowledged and skipped here rather than by narrowing the durable
//! consumer's subject on deployments that have it.

use crate::state::AppState;
use event_contracts::ProductEvent;
use hub_domain::OrgId;
use service_kit::nats::RawMessage;
use time::OffsetDateTime;
use uuid::Uuid;

pub async fn store(state: &AppState, msgs: Vec<RawMessage>) -> anyhow::Result<()> {
    let mut ids = Vec::with_capacity(msgs.len());
    let mut orgs: Vec<OrgId> = Vec::with_capacity(msgs.len());
    let mut kinds = Vec::with_capacity(msgs.len());
    let mut payloads = Vec::with_capacity(msgs.len());
    let mut at: Vec<OffsetDateTime> = Vec::with_capacity(msgs.len());
    for m in msgs {
        match serde_json::from_slice::<ProductEvent<serde_json::Value>>(&m.payload) {
            Ok(e) if !event_contracts::is_webhook_kind(&e.kind) => {
                tracing::debug!(kind = %e.kind, "internal product event; not for webhooks")
            }
            Ok(e) => {
                ids.push(e.id);
                orgs.push(e.org_id);
                kinds.push(e.kind);
                // The raw body exactly as committed: what gets signed and sent.
                payloads.push(String::from_utf8_lossy(&m.payload).into_owned());
                at.push(e.created_at);
            }
            Err(e) => {
                tracing::error!(error = %e, subject = %m.subject, "not a product event; skipped")
            }
        }
    }
    if ids.is_empty() {
        return Ok(());
    }
    let now = state.clock.now();
    // One statement: the events that have an endpoint (their payload once),
    // a log row and a queue row per endpoint. A redelivered event conflicts
    // on its log rows, so it queues nothing twice.
    let n = sqlx::query!(
        "WITH ev AS ( \
           SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::timestamptz[]) \
             AS ev(id, org_id, kind, payload, at)), \
         target AS ( \
           SELECT e.id AS endpoint_id, ev.id AS event_id FROM ev \
           JOIN endpoints e ON e.org_id = ev.org_id AND e.created_at <= ev.at \
             AND (e.deleted_at IS NULL OR e.deleted_at > ev.at)), \
         stored AS ( \
           INSERT INTO events (id, org_id, event_type, payload, created_at) \
           SELECT ev.id, ev.org_id, ev.kind, ev.payload, ev.at FROM ev \
           WHERE ev.id IN (SELECT event_id FROM target) \
           ON CONFLICT (id) DO NOTHING), \
         logged AS ( \
           INSERT INTO deliveries (endpoint_id, event_id, created_at) \
           SELECT endpoint_id, event_id, $6 FROM target \
           ON CONFLICT (endpoint_id, event_id, series) DO NOTHING \
           RETURNING id, endpoint_id, event_id) \
         INSERT INTO queue (delivery_id, endpoint_id, event_id, due_at) \
         SELECT id, endpoint_id, event_id, $6 FROM logged",
        &ids as &[Uuid],
        &orgs as &[OrgId],
        &kinds,
        &payloads,
        &at,
        now,
    )
    .execute(&state.pool)
    .await?
    .rows_affected();
    if n > 0 {
        state.wake.notify_one();
    }
    Ok(())
}
