//! Transactional outbox.
//!
//! A state change and its event are written in one transaction ([`enqueue`]).
//! The relay publishes pending rows to JetStream with `Nats-Msg-Id` = event id
//! (the stream's duplicate window drops a re-publish) and deletes them once
//! acknowledged, so the table holds only what is still to send.
//! Handlers whose event must be out before they answer (revocations) call
//! [`Outbox::flush`] after their commit; the background relay is the guarantee.
//!
//! Each service schema has the table (see its first migration):
//! `outbox(id uuid pk, subject text, payload text, traceparent, created_at, attempts, last_error)`.

use anyhow::Context;
use async_nats::{jetstream, HeaderMap};
use event_contracts::{Envelope, Event, Naming};
use sqlx::{PgConnection, PgPool};
use std::{sync::Arc, time::Duration};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Write `event` to the outbox inside the caller's transaction.
pub async fn enqueue<T: Event>(
    conn: &mut PgConnection,
    naming: &Naming,
    event: T,
) -> anyhow::Result<Uuid> {
    let env = Envelope::new(event);
    let payload = serde_json::to_string(&env).context("serializing event")?;
    sqlx::query!(
        "INSERT INTO outbox (id, subject, payload, traceparent) VALUES ($1, $2, $3, $4)",
        env.id,
        naming.subject(T::SUBJECT),
        payload,
        crate::telemetry::current_traceparent(),
    )
    .execute(conn)
    .await
    .context("writing outbox row")?;
    Ok(env.id)
}

/// Write `events` to the outbox inside the caller's transaction, in one
/// statement (a batch of documents, a billing run).
pub async fn enqueue_all<T: Event>(
    conn: &mut PgConnection,
    naming: &Naming,
    events: impl IntoIterator<Item = T>,
) -> anyhow::Result<()> {
    let mut ids = Vec::new();
    let mut payloads = Vec::new();
    for e in events {
        let env = Envelope::new(e);
        payloads.push(serde_json::to_string(&env).context("serializing event")?);
        ids.push(env.id);
    }
    sqlx::query!(
        "INSERT INTO outbox (id, subject, payload, traceparent) \
         SELECT id, $2, payload, $4 FROM unnest($1::uuid[], $3::text[]) AS e(id, payload)",
        &ids,
        naming.subject(T::SUBJECT),
        &payloads,
        crate::telemetry::current_traceparent(),
    )
    .execute(conn)
    .await
    .context("writing outbox rows")?;
    Ok(())
}

/// Write an already serialized message (`id` is its `Nats-Msg-Id`) for
/// `relative_subject` to the outbox, inside the caller's transaction: events
/// whose wire shape is not the core [`Envelope`] (product events).
pub async fn enqueue_raw(
    conn: &mut PgConnection,
    naming: &Naming,
    relative_subject: &str,
    id: Uuid,
    payload: String,
) -> anyhow::Result<()> {
    sqlx::query!(
        "INSERT INTO outbox (id, subject, payload, traceparent) VALUES ($1, $2, $3, $4)",
        id,
        naming.subject(relative_subject),
        payload,
        crate::telemetry::current_traceparent(),
    )
    .execute(conn)
    .await
    .context("writing outbox row")?;
    Ok(())
}

/// An outbox row before it is written: what [`enqueue`] and [`enqueue_raw`]
/// write, made first (in the request, so that it carries the request's trace
/// context) and written with others in one statement by [`enqueue_messages`]
/// (a batch of a group-commit writer or of a job).
#[derive(Debug, Clone)]
pub struct Message {
    /// Also its `Nats-Msg-Id`.
    pub id: Uuid,
    pub subject: String,
    pub payload: String,
    pub traceparent: Option<String>,
}

impl Message {
    /// `event` in its [`Envelope`], as [`enqueue`] writes it.
    pub fn event<T: Event>(naming: &Naming, event: T) -> anyhow::Result<Message> {
        let env = Envelope::new(event);
        Ok(Message {
            id: env.id,
            subject: naming.subject(T::SUBJECT),
            payload: serde_json::to_string(&env).context("serializing event")?,
            traceparent: crate::telemetry::current_traceparent(),
        })
    }

    /// An already serialized message, as [`enqueue_raw`] writes it.
    pub fn raw(naming: &Naming, relative_subject: &str, id: Uuid, payload: String) -> Message {
        Message {
            id,
            subject: naming.subject(relative_subject),
            payload,
            traceparent: crate::telemetry::current_traceparent(),
        }
    }
}

/// Write `messages` to the outbox inside the caller's transaction, in one
/// statement.
pub async fn enqueue_messages<'a>(
    conn: &mut PgConnection,
    messages: impl IntoIterator<Item = &'a Message>,
) -> anyhow::Result<()> {
    let (mut ids, mut subjects, mut payloads, mut traceparents) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for m in messages {
        ids.push(m.id);
        subjects.push(m.subject.as_str());
        payloads.push(m.payload.as_str());
        traceparents.push(m.traceparent.as_deref());
    }
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "INSERT INTO outbox (id, subject, payload, traceparent) \
         SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[])",
        &ids,
        &subjects as &[&str],
        &payloads as &[&str],
        &traceparents as &[Option<&str>],
    )
    .execute(conn)
    .await
    .context("writing outbox rows")?;
    Ok(())
}

#[derive(Clone)]
pub struct Outbox {
    pool: PgPool,
    js: jetstream::Context,
    notify: Arc<Notify>,
    batch: i64,
}

struct Row {
    id: Uuid,
    subject: String,
    payload: String,
    traceparent: Option<String>,
}

impl Outbox {
    pub fn new(pool: PgPool, js: jetstream::Context) -> Outbox {
        Outbox {
            pool,
            js,
            notify: Arc::new(Notify::new()),
            batch: 200,
        }
    }

    /// Wake the background relay now instead of at its next poll.
    pub fn kick(&self) {
        self.notify.notify_one();
    }

    /// Commit a transaction that wrote outbox rows, then wake the relay so
    /// they go out now rather than at its next poll.
    pub async fn commit(&self, tx: sqlx::Transaction<'_, sqlx::Postgres>) -> sqlx::Result<()> {
        tx.commit().await?;
        self.kick();
        Ok(())
    }

    /// Publish everything pending (rows other relays hold are skipped). Returns
    /// how many rows this call published.
    pub async fn flush(&self) -> anyhow::Result<usize> {
        let mut total = 0;
        loop {
            let n = self.publish_batch().await?;
            total += n;
            if (n as i64) < self.batch {
                return Ok(total);
            }
        }
    }

    async fn publish_batch(&self) -> anyhow::Result<usize> {
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query_as!(
            Row,
            "SELECT id, subject, payload, traceparent FROM outbox \
             ORDER BY id \
             LIMIT $1 FOR UPDATE SKIP LOCKED",
            self.batch,
        )
        .fetch_all(&mut *tx)
        .await?;
        if rows.is_empty() {
            return Ok(0);
        }
        // Send the whole batch, then wait for the acks: one round trip, not one per row.
        let mut pending = Vec::with_capacity(rows.len());
        for r in &rows {
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Msg-Id", r.id.to_string().as_str());
            if let Some(tp) = &r.traceparent {
                headers.insert("traceparent", tp.as_str());
            }
            let ack = self
                .js
                .publish_with_headers(r.subject.clone(), headers, r.payload.clone().into())
                .await;
            pending.push((r.id, ack));
        }
        let mut sent = Vec::with_capacity(rows.len());
        let mut failed: Vec<(Uuid, String)> = Vec::new();
        for (id, ack) in pending {
            let res = match ack {
                Ok(fut) => fut.await.map(|_| ()).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match res {
                Ok(()) => sent.push(id),
                Err(e) => failed.push((id, e)),
            }
        }
        sqlx::query!("DELETE FROM outbox WHERE id = ANY($1)", &sent)
            .execute(&mut *tx)
            .await?;
        for (id, err) in &failed {
            sqlx::query!(
                "UPDATE outbox SET attempts = attempts + 1, last_error = $2 WHERE id = $1",
                id,
                err,
            )
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        if let Some((_, e)) = failed.first() {
            anyhow::bail!(
                "{} of {} events not published: {e}",
                failed.len(),
                rows.len()
            );
        }
        Ok(sent.len())
    }

    /// Publish in the background until `cancel` fires: at every kick, and every
    /// `poll` in any case (a kick lost to a crash is picked up by the poll).
    ///
    /// After a kick the relay lingers `linger` before publishing, so that under
    /// load one pass carries many rows instead of one pass per row.
    pub fn spawn_relay(
        self,
        cancel: CancellationToken,
        poll: Duration,
        linger: Duration,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut backoff = poll;
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = self.notify.notified() => {
                        if !linger.is_zero() {
                            tokio::select! {
                                _ = cancel.cancelled() => break,
                                _ = tokio::time::sleep(linger) => {},
                            }
                        }
                    },
                    _ = tokio::time::sleep(backoff) => {},
                }
                match self.flush().await {
                    Ok(_) => backoff = poll,
                    Err(e) => {
                        if !crate::outage::report_background(&e) {
                            tracing::warn!(error = ?e, "outbox relay pass failed");
                        }
                        backoff = (backoff * 2).min(Duration::from_secs(10));
                    }
                }
            }
            // Last pass so that events committed just before shutdown go out now.
            if let Err(e) = self.flush().await {
                tracing::warn!(error = ?e, "final outbox pass failed");
            }
        })
    }
}

/// The audit event of `caller` doing `action` on organization `org_id`
/// (identity stores it and shows it in the actor's `/v1/audit/me`). `detail`
/// holds ids and keys, never personal data or secrets.
pub fn audit_event(
    caller: &crate::assertion::Caller,
    action: event_contracts::AuditAction,
    org_id: hub_domain::OrgId,
    detail: serde_json::Value,
) -> event_contracts::AuditRecorded {
    audit_event_on(caller, action, format!("org:{org_id}"), detail)
}

/// The audit event of `caller` doing `action` on `subject` (`kind:id`, e.g.
/// `sku:vps-small` for what belongs to no organization).
pub fn audit_event_on(
    caller: &crate::assertion::Caller,
    action: event_contracts::AuditAction,
    subject: String,
    detail: serde_json::Value,
) -> event_contracts::AuditRecorded {
    event_contracts::AuditRecorded {
        actor_user_id: Some(caller.user_id()),
        action: action.as_str().to_owned(),
        subject,
        detail,
        ip: caller.ip.clone(),
    }
}

/// The audit event of something the service did on its own (a consumed
/// event, a scheduled job): no actor, no IP.
pub fn system_audit_event(
    action: event_contracts::AuditAction,
    org_id: hub_domain::OrgId,
    detail: serde_json::Value,
) -> event_contracts::AuditRecorded {
    event_contracts::AuditRecorded {
        actor_user_id: None,
        action: action.as_str().to_owned(),
        subject: format!("org:{org_id}"),
        detail,
        ip: String::new(),
    }
}

/// Write [`audit_event`] to the outbox in the caller's transaction.
pub async fn audit(
    conn: &mut PgConnection,
    naming: &Naming,
    caller: &crate::assertion::Caller,
    action: event_contracts::AuditAction,
    org_id: hub_domain::OrgId,
    detail: serde_json::Value,
) -> anyhow::Result<()> {
    enqueue(conn, naming, audit_event(caller, action, org_id, detail)).await?;
    Ok(())
}

/// Write [`audit_event_on`] to the outbox in the caller's transaction.
pub async fn audit_on(
    conn: &mut PgConnection,
    naming: &Naming,
    caller: &crate::assertion::Caller,
    action: event_contracts::AuditAction,
    subject: String,
    detail: serde_json::Value,
) -> anyhow::Result<()> {
    enqueue(
        conn,
        naming,
        audit_event_on(caller, action, subject, detail),
    )
    .await?;
    Ok(())
}
