//! NATS: the connection, the JetStream streams, and durable consumers that ack
//! only after their handler committed.

use crate::settings::NatsSettings;
use anyhow::Context;
use async_nats::jetstream::{self, consumer, stream, AckKind};
use event_contracts::{Envelope, Event, Naming, STREAMS};
use futures::StreamExt;
use std::{future::Future, time::Duration};
use tokio_util::sync::CancellationToken;

pub async fn connect(s: &NatsSettings, name: &str) -> anyhow::Result<async_nats::Client> {
    async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(5))
        .connect(&s.url)
        .await
        .with_context(|| format!("connecting to NATS at {}", s.url))
}

/// Create the CORE and PRODUCT streams when missing.
pub async fn ensure_streams(js: &jetstream::Context, s: &NatsSettings) -> anyhow::Result<()> {
    let naming = s.naming();
    for (base, pattern) in STREAMS {
        let cfg = stream::Config {
            name: naming.stream(base),
            subjects: vec![naming.subject(pattern)],
            storage: if s.memory_storage {
                stream::StorageType::Memory
            } else {
                stream::StorageType::File
            },
            max_age: Duration::from_secs(s.stream_max_age_secs),
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        };
        js.get_or_create_stream(cfg)
            .await
            .with_context(|| format!("creating stream {}", naming.stream(base)))?;
    }
    Ok(())
}

/// The stream (base name) that captures a relative subject.
pub fn stream_for(relative_subject: &str) -> &'static str {
    if relative_subject.starts_with("product.") {
        "PRODUCT"
    } else {
        "CORE"
    }
}

/// Run a durable pull consumer for one event type until `cancel` fires.
///
/// One filter subject per consumer (NATS 2.9 ignores `filter_subjects`). The
/// handler must be idempotent: a message is acked only after it returns `Ok`,
/// so a crash between commit and ack redelivers it. A payload that does not
/// parse is terminated (it would never parse).
pub async fn run_consumer<T, F, Fut>(
    js: jetstream::Context,
    naming: Naming,
    durable_base: &str,
    cancel: CancellationToken,
    handler: F,
) -> anyhow::Result<()>
where
    T: Event,
    F: Fn(Envelope<T>) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let stream = js
        .get_stream(naming.stream(stream_for(T::SUBJECT)))
        .await
        .context("looking up stream")?;
    let durable = naming.durable(durable_base);
    let consumer = stream
        .get_or_create_consumer(
            &durable,
            consumer::pull::Config {
                durable_name: Some(durable.clone()),
                filter_subject: naming.subject(T::SUBJECT),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: Duration::from_secs(30),
                max_deliver: 20,
                ..Default::default()
            },
        )
        .await
        .with_context(|| format!("creating consumer {durable}"))?;
    let mut messages = consumer.messages().await?;
    loop {
        let next = tokio::select! {
            _ = cancel.cancelled() => break,
            m = messages.next() => m,
        };
        let msg = match next {
            Some(Ok(m)) => m,
            Some(Err(e)) => {
                tracing::warn!(error = %e, consumer = %durable, "consumer stream error");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            None => break,
        };
        let env: Envelope<T> = match serde_json::from_slice(&msg.payload) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!(error = %e, subject = %msg.subject, "unparseable event, terminating it");
                let _ = msg.ack_with(AckKind::Term).await;
                continue;
            }
        };
        let id = env.id;
        match handler(env).await {
            Ok(()) => {
                if let Err(e) = msg.ack().await {
                    tracing::warn!(error = %e, event_id = %id, "ack failed; the event will be redelivered");
                }
            }
            Err(e) => {
                tracing::warn!(error = ?e, event_id = %id, "event handler failed; retrying later");
                let _ = msg
                    .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                    .await;
            }
        }
    }
    Ok(())
}

/// [`run_consumer`] on a task of its own; logs if it ever stops with an error.
pub fn spawn_consumer<T, F, Fut>(
    js: jetstream::Context,
    naming: Naming,
    durable_base: &'static str,
    cancel: CancellationToken,
    handler: F,
) -> tokio::task::JoinHandle<()>
where
    T: Event + Send + 'static,
    F: Fn(Envelope<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send,
{
    tokio::spawn(async move {
        if let Err(e) = run_consumer::<T, F, Fut>(js, naming, durable_base, cancel, handler).await {
            tracing::error!(error = ?e, consumer = durable_base, "consumer stopped");
        }
    })
}
