//! Fan-out: each product event on the PRODUCT stream becomes one delivery per
//! endpoint of its organization that existed when the event was committed (a
//! durable consumer; one INSERT per batch of events; idempotent by
//! (endpoint, event), so a redelivered event adds nothing). Only the webhook
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
    let n = sqlx::query!(
        "INSERT INTO deliveries (endpoint_id, org_id, event_id, event_type, payload, next_attempt_at, created_at, updated_at) \
         SELECT e.id, ev.org_id, ev.id, ev.kind, ev.payload, $6, $6, $6 \
         FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::timestamptz[]) AS ev(id, org_id, kind, payload, at) \
         JOIN endpoints e ON e.org_id = ev.org_id AND e.created_at <= ev.at \
           AND (e.deleted_at IS NULL OR e.deleted_at > ev.at) \
         ON CONFLICT (endpoint_id, event_id, series) DO NOTHING",
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
