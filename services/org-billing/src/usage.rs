//! Usage becomes charges: server-product's priced usage
//! (`product.v1.usage.recorded`, one event per piece of a usage period, each
//! within one calendar month) is consumed from the PRODUCT stream (durable
//! `org-billing-usage`) and each event becomes a pending usage charge of the
//! organization, for the month it lies in (`period`), which a billing run
//! invoices later. Idempotent: the charge's `source_ref` is
//! `usage:<usage_period_id>` (unique), so a redelivered or replayed event
//! finds it taken and changes nothing. The charge and its audit event
//! (`charge.created`, no user actor) commit together, only when the charge was
//! made. An event for an organization org-billing does not have is logged and
//! acknowledged without a charge: it must not hold the stream up.

use crate::billing::{
    model::{Charge, Source},
    store,
};
use event_contracts::{billable_hours, AuditAction, ProductEvent, UsageRecorded, USAGE_SUBJECT};
use hub_domain::{ChargeId, OrgId};
use serde_json::json;
use service_kit::{
    nats::{self, Durable, RawMessage},
    outbox::{self, Outbox},
    settings::NatsSettings,
};
use sqlx::PgPool;
use std::time::Duration;
use time::{format_description::FormatItem, macros::format_description, OffsetDateTime};
use tokio_util::sync::CancellationToken;

/// Turns server-product's usage into charges.
pub const CONSUMER: Durable = Durable::raw("org-billing-usage", USAGE_SUBJECT);

/// What the consumer needs.
#[derive(Clone)]
pub struct Usage {
    pub pool: PgPool,
    pub outbox: Outbox,
    pub naming: event_contracts::Naming,
    /// The brand usage charges (and their invoice lines) carry: `usage.brand`.
    pub brand: String,
}

/// Run the consumer until `cancel` fires.
pub fn spawn(
    js: async_nats::jetstream::Context,
    nats: NatsSettings,
    usage: Usage,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    // One event per call: an unparseable one is retried and dead-lettered on
    // its own, never holding others back.
    nats::spawn_raw_batch_consumer(js, nats, CONSUMER, 1, Duration::ZERO, cancel, move |msgs| {
        let usage = usage.clone();
        async move {
            for m in msgs {
                on_recorded(&usage, &m).await?;
            }
            Ok(())
        }
    })
}

/// What became of one usage event.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Charged(ChargeId),
    /// Its charge exists already (a redelivery, a replay).
    AlreadyCharged,
    /// No such organization here: logged, no charge.
    UnknownOrganization,
}

/// Make the pending charge of one `usage.recorded` event (idempotently).
pub async fn on_recorded(usage: &Usage, m: &RawMessage) -> anyhow::Result<Outcome> {
    let event: ProductEvent<UsageRecorded> = serde_json::from_slice(&m.payload)
        .map_err(|e| anyhow::anyhow!("not a usage event on {}: {e}", m.subject))?;
    let (org_id, u) = (event.org_id, &event.data);
    // Checked: a product that wraps would match a wrapped amount.
    anyhow::ensure!(
        u.amount_minor.0 > 0
            && u.amount_minor.0 <= crate::billing::MAX_AMOUNT
            && u.qty > 0
            && i64::from(u.qty).checked_mul(u.unit_minor.0) == Some(u.amount_minor.0),
        "usage event {} is not priced as qty × unit > 0 of at most {}",
        event.id,
        crate::billing::MAX_AMOUNT
    );
    let source_ref = format!("usage:{}", u.usage_period_id);
    let mut tx = usage.pool.begin().await?;
    if !sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM organizations WHERE id = $1) AS "known!""#,
        org_id as OrgId,
    )
    .fetch_one(&mut *tx)
    .await?
    {
        tracing::warn!(%org_id, usage_period_id = u.usage_period_id, event_id = %event.id,
            "usage of an organization org-billing does not have; no charge");
        return Ok(Outcome::UnknownOrganization);
    }
    let description = description(u);
    let charge = store::NewCharge {
        org_id,
        description: &description,
        brand: &usage.brand,
        qty: u.qty,
        unit_minor: u.unit_minor,
        amount_minor: u.amount_minor,
        currency: u.currency,
        source: Source::Usage,
        source_ref: Some(&source_ref),
        period: Some(&u.period),
        created_by: None,
    };
    let Some(Charge { id, .. }) = store::insert_charge(&mut tx, &charge).await? else {
        return Ok(Outcome::AlreadyCharged);
    };
    outbox::enqueue(
        &mut tx,
        &usage.naming,
        outbox::system_audit_event(
            AuditAction::ChargeCreated,
            org_id,
            json!({
                "charge_id": id,
                "source": "usage",
                "source_ref": source_ref,
                "period": u.period,
                "amount_minor": u.amount_minor,
                "currency": u.currency,
                "server_id": u.server_id,
            }),
        ),
    )
    .await?;
    usage.outbox.commit(tx).await?;
    Ok(Outcome::Charged(id))
}

const WHEN: &[FormatItem<'static>] = format_description!("[year]-[month]-[day] [hour]:[minute]");

/// The charge's line: `Server web-1 (vps-small), 2026-11-01 00:00 –
/// 2026-11-15 13:00 UTC, 325 h` (hours begun).
pub fn description(u: &UsageRecorded) -> String {
    let at = |t: OffsetDateTime| {
        t.to_offset(time::UtcOffset::UTC)
            .format(WHEN)
            .unwrap_or_default()
    };
    format!(
        "Server {} ({}), {} – {} UTC, {} h",
        u.hostname,
        u.sku_id,
        at(u.started_at),
        at(u.ended_at),
        billable_hours(u.started_at, u.ended_at)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use hub_domain::{Currency, MinorUnits};
    use time::macros::datetime;
    use uuid::Uuid;

    #[test]
    fn the_description_names_server_plan_span_and_hours() {
        let u = UsageRecorded {
            usage_period_id: 7,
            server_id: hub_domain::ServerId::from_uuid(Uuid::nil()),
            hostname: "web-1".into(),
            sku_id: "vps-small".into(),
            sku_name: "VPS Small".into(),
            started_at: datetime!(2026-11-01 0:00 UTC),
            ended_at: datetime!(2026-11-14 12:20 +00:00),
            period: "2026-11".into(),
            qty: 325,
            unit_minor: MinorUnits(69),
            amount_minor: MinorUnits(325 * 69),
            currency: Currency::TRY,
        };
        assert_eq!(
            description(&u),
            "Server web-1 (vps-small), 2026-11-01 00:00 – 2026-11-14 12:20 UTC, 325 h"
        );
    }
}
