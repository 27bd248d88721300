//! NATS: the connection, the JetStream streams, and durable consumers that ack
//! only after their handler committed.

use crate::settings::NatsSettings;
use anyhow::Context;
use async_nats::jetstream::{self, consumer, stream, AckKind};
use event_contracts::{Envelope, Event, Naming, STREAMS};
use futures::StreamExt;
use secrecy::ExposeSecret;
use std::{future::Future, time::Duration};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Connect as `name`. TLS when the URL is `tls://`, `nats.tls_required` is on
/// or the server asks for it, verified against the platform's roots and
/// `nats.tls_ca_file` ([`crate::tls`]); as `nats.user` when set.
pub async fn connect(s: &NatsSettings, name: &str) -> anyhow::Result<async_nats::Client> {
    options(s, name)?
        .connect(&s.url)
        .await
        .with_context(|| format!("connecting to NATS at {} as {:?}", s.url, s.user))
}

/// The connection options [`connect`] uses: with `nats.user`, its password
/// and an inbox prefix of its own (`_INBOX_<user>`: its permissions let it
/// read only its own replies, see [`crate::nats_access`]).
pub fn options(s: &NatsSettings, name: &str) -> anyhow::Result<async_nats::ConnectOptions> {
    let tls = crate::tls::client_config(&s.tls_ca_file).context("nats TLS settings")?;
    let mut o = async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(5))
        .require_tls(s.tls_required || s.url.trim_start().starts_with("tls://"))
        .tls_client_config(tls);
    if !s.user.is_empty() {
        let password = s
            .password
            .as_ref()
            .map(|p| p.expose_secret().to_owned())
            .unwrap_or_default();
        o = o
            .user_and_password(s.user.clone(), password)
            .custom_inbox_prefix(inbox_prefix(&s.user));
    }
    Ok(o)
}

/// The inbox prefix of NATS user `user`: the replies to its requests and its
/// consumers' deliveries go there, and its permissions let only it read them.
pub fn inbox_prefix(user: &str) -> String {
    format!("_INBOX_{user}")
}

/// A durable consumer: its name (before the deployment's stream suffix) and
/// the one subject it takes (relative to the subject prefix). Each service
/// lists its own in its description (`Service::CONSUMES`); its NATS
/// permissions are made from that list ([`crate::nats_access`]), and its
/// consumers are started from the same constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durable {
    pub name: &'static str,
    pub subject: &'static str,
}

impl Durable {
    /// A consumer of event type `T`.
    pub const fn of<T: Event>(name: &'static str) -> Durable {
        Durable {
            name,
            subject: T::SUBJECT,
        }
    }

    /// A consumer of raw payloads on `subject` (wildcards allowed).
    pub const fn raw(name: &'static str, subject: &'static str) -> Durable {
        Durable { name, subject }
    }

    /// The base name of the stream that captures its subject.
    pub fn stream(&self) -> &'static str {
        stream_for(self.subject)
    }
}

/// The hub's streams (CORE, PRODUCT and DLQ) as `s` configures them.
pub fn stream_configs(s: &NatsSettings) -> Vec<stream::Config> {
    let naming = s.naming();
    let dlq_pattern = format!("{}.>", crate::deadletter::SUBJECT_ROOT);
    STREAMS
        .iter()
        .map(|(b, p)| (*b, (*p).to_owned()))
        .chain([(crate::deadletter::STREAM, dlq_pattern)])
        .map(|(base, pattern)| stream::Config {
            name: naming.stream(base),
            subjects: vec![naming.subject(&pattern)],
            storage: if s.memory_storage {
                stream::StorageType::Memory
            } else {
                stream::StorageType::File
            },
            // Dead letters wait for an operator: kept until replayed.
            max_age: if base == crate::deadletter::STREAM {
                Duration::ZERO
            } else {
                Duration::from_secs(s.stream_max_age_secs)
            },
            duplicate_window: Duration::from_secs(120),
            num_replicas: s.stream_replicas.max(1),
            ..Default::default()
        })
        .collect()
}

/// Create the CORE, PRODUCT and DLQ streams when missing (a service at
/// start). A service's own NATS user may only look streams up: in
/// production the `migrate` subcommand creates them first ([`manage_streams`]).
pub async fn ensure_streams(js: &jetstream::Context, s: &NatsSettings) -> anyhow::Result<()> {
    for cfg in stream_configs(s) {
        let name = cfg.name.clone();
        js.get_or_create_stream(cfg).await.with_context(|| {
            format!(
                "stream {name} is missing and could not be created: run the `migrate` \
                 subcommand with the NATS user that manages streams (hub-admin) first"
            )
        })?;
    }
    Ok(())
}

/// Create the streams, or update the ones that exist to `s` (replicas, max
/// age): the `migrate` subcommand, with a NATS user that may manage streams.
pub async fn manage_streams(js: &jetstream::Context, s: &NatsSettings) -> anyhow::Result<()> {
    for cfg in stream_configs(s) {
        let (name, replicas) = (cfg.name.clone(), cfg.num_replicas);
        js.create_or_update_stream(cfg)
            .await
            .with_context(|| format!("creating or updating stream {name}"))?;
        tracing::info!(stream = %name, replicas, "stream ready");
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

/// Messages of a durable pull consumer for one event type (created when missing):
/// one filter subject per consumer (NATS 2.9 ignores `filter_subjects`).
async fn durable_messages(
    js: &jetstream::Context,
    naming: &Naming,
    durable_base: &str,
    relative_subject: &str,
) -> anyhow::Result<(String, consumer::pull::Stream)> {
    let stream = js
        .get_stream(naming.stream(stream_for(relative_subject)))
        .await
        .context("looking up stream")?;
    let durable = naming.durable(durable_base);
    let consumer = stream
        .get_or_create_consumer(
            &durable,
            consumer::pull::Config {
                durable_name: Some(durable.clone()),
                filter_subject: naming.subject(relative_subject),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: Duration::from_secs(30),
                // Unlimited: the consumer moves an event it gave up on to the
                // DLQ itself, so the server never drops one.
                max_deliver: -1,
                max_ack_pending: 10_000,
                ..Default::default()
            },
        )
        .await
        .with_context(|| format!("creating consumer {durable}"))?;
    Ok((durable, consumer.messages().await?))
}

/// Run a durable consumer for one event type until `cancel` fires, handing the
/// handler the messages that arrive within `linger` of each other (up to
/// `max_batch`), so that it can store them in one statement.
///
/// The handler must be idempotent: messages are acked only after it returns
/// `Ok`, so a crash between its commit and the acks redelivers them. On `Err`
/// each message of the batch is redelivered after a backoff that doubles per
/// delivery (`nats.consumer_backoff_*`); after `nats.dead_letter_after`
/// deliveries it moves to the DLQ stream ([`crate::deadletter`]) and only then
/// is acknowledged, so a long outage (a database down for minutes) loses
/// nothing. A payload that does not parse goes to the DLQ at once.
///
/// `durable` must be a consumer of `T` ([`Durable::of`]).
pub async fn run_batch_consumer<T, F, Fut>(
    js: jetstream::Context,
    nats: NatsSettings,
    durable: Durable,
    max_batch: usize,
    linger: Duration,
    cancel: CancellationToken,
    handler: F,
) -> anyhow::Result<()>
where
    T: Event,
    F: Fn(Vec<Envelope<T>>) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    anyhow::ensure!(
        durable.subject == T::SUBJECT,
        "consumer {} takes {}, not {}",
        durable.name,
        durable.subject,
        T::SUBJECT
    );
    run_decoded(
        js,
        nats,
        durable.name,
        T::SUBJECT,
        max_batch,
        linger,
        cancel,
        |_, payload| serde_json::from_slice::<Envelope<T>>(payload).map_err(anyhow::Error::from),
        handler,
    )
    .await
}

/// A message as it arrived: for consumers of payloads that are not core
/// envelopes (product events).
#[derive(Debug, Clone)]
pub struct RawMessage {
    /// The subject without the deployment's prefix.
    pub subject: String,
    pub payload: bytes::Bytes,
}

/// [`run_batch_consumer`] for raw payloads on the durable's subject
/// (wildcards allowed, e.g. `product.v1.>`: [`Durable::raw`]).
pub async fn run_raw_batch_consumer<F, Fut>(
    js: jetstream::Context,
    nats: NatsSettings,
    durable: Durable,
    max_batch: usize,
    linger: Duration,
    cancel: CancellationToken,
    handler: F,
) -> anyhow::Result<()>
where
    F: Fn(Vec<RawMessage>) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let prefix = nats.subject_prefix.clone();
    run_decoded(
        js,
        nats,
        durable.name,
        durable.subject,
        max_batch,
        linger,
        cancel,
        move |subject, payload| {
            Ok(RawMessage {
                subject: subject
                    .strip_prefix(prefix.as_str())
                    .unwrap_or(subject)
                    .to_owned(),
                payload: bytes::Bytes::copy_from_slice(payload),
            })
        },
        handler,
    )
    .await
}

/// The one consumer loop: batches, decode, handle, ack / backoff / dead-letter.
#[allow(clippy::too_many_arguments)]
async fn run_decoded<D, Dec, F, Fut>(
    js: jetstream::Context,
    nats: NatsSettings,
    durable_base: &str,
    relative_subject: &str,
    max_batch: usize,
    linger: Duration,
    cancel: CancellationToken,
    decode: Dec,
    handler: F,
) -> anyhow::Result<()>
where
    Dec: Fn(&str, &[u8]) -> anyhow::Result<D>,
    F: Fn(Vec<D>) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let naming = nats.naming();
    let (durable, mut messages) =
        durable_messages(&js, &naming, durable_base, relative_subject).await?;
    let max_batch = max_batch.max(1);
    loop {
        let first = tokio::select! {
            _ = cancel.cancelled() => break,
            m = messages.next() => m,
        };
        let Some(first) = first else { break };
        // Gather what arrives within `linger` of the first message (at most
        // `max_batch`): under load one handler call, one commit, serves many.
        let mut chunk = vec![first];
        let deadline = tokio::time::Instant::now() + linger;
        while chunk.len() < max_batch {
            match tokio::time::timeout_at(deadline, messages.next()).await {
                Ok(Some(m)) => chunk.push(m),
                Ok(None) | Err(_) => break,
            }
        }
        let mut msgs = Vec::with_capacity(chunk.len());
        let mut envs = Vec::with_capacity(chunk.len());
        for m in chunk {
            match m {
                Ok(msg) => match decode(msg.subject.as_str(), &msg.payload) {
                    Ok(env) => {
                        envs.push(env);
                        msgs.push(msg);
                    }
                    Err(e) => {
                        tracing::error!(error = %e, subject = %msg.subject, "unparseable event");
                        give_up(
                            &js,
                            &naming,
                            durable_base,
                            &msg,
                            &format!("unparseable: {e}"),
                            &nats,
                        )
                        .await;
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %e, consumer = %durable, "consumer stream error");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        if envs.is_empty() {
            continue;
        }
        let traceparent = msgs
            .first()
            .and_then(|m| m.headers.as_ref())
            .and_then(|h| h.get("traceparent"))
            .map(|v| v.as_str().to_owned());
        let span = crate::telemetry::event_span(relative_subject, traceparent.as_deref());
        match handler(envs).instrument(span).await {
            Ok(()) => {
                for m in msgs {
                    if let Err(e) = m.ack().await {
                        tracing::warn!(error = %e, "ack failed; the event will be redelivered");
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = ?e, consumer = %durable, "event handler failed; retrying later");
                let why = format!("{e:#}");
                for m in msgs {
                    let delivered = m.info().map(|i| i.delivered).unwrap_or(1);
                    if delivered >= nats.dead_letter_after {
                        give_up(&js, &naming, durable_base, &m, &why, &nats).await;
                    } else {
                        let delay = backoff(&nats, delivered);
                        let _ = m.ack_with(AckKind::Nak(Some(delay))).await;
                    }
                }
            }
        }
    }
    Ok(())
}

/// The redelivery delay after the `delivered`-th failed delivery.
pub fn backoff(nats: &NatsSettings, delivered: i64) -> Duration {
    let doublings = delivered.clamp(1, 32) as u32 - 1;
    let ms = nats
        .consumer_backoff_base_ms
        .saturating_mul(1u64 << doublings.min(31))
        .min(nats.consumer_backoff_max_ms);
    Duration::from_millis(ms)
}

/// Move `m` to the DLQ, then acknowledge it; if the DLQ does not take it,
/// redeliver later (never drop).
async fn give_up(
    js: &jetstream::Context,
    naming: &Naming,
    durable_base: &str,
    m: &jetstream::Message,
    why: &str,
    nats: &NatsSettings,
) {
    let delivered = m.info().map(|i| i.delivered).unwrap_or(1);
    match crate::deadletter::dead_letter(js, naming, durable_base, m, delivered, why).await {
        Ok(()) => {
            tracing::error!(consumer = durable_base, subject = %m.subject, delivered, "event moved to the DLQ");
            let _ = m.ack_with(AckKind::Term).await;
        }
        Err(e) => {
            tracing::error!(error = ?e, consumer = durable_base, "cannot dead-letter; redelivering");
            let _ = m
                .ack_with(AckKind::Nak(Some(backoff(nats, delivered))))
                .await;
        }
    }
}

/// [`run_batch_consumer`] with a handler that takes one event at a time.
pub async fn run_consumer<T, F, Fut>(
    js: jetstream::Context,
    nats: NatsSettings,
    durable: Durable,
    cancel: CancellationToken,
    handler: F,
) -> anyhow::Result<()>
where
    T: Event,
    F: Fn(Envelope<T>) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let handler = &handler;
    run_batch_consumer::<T, _, _>(
        js,
        nats,
        durable,
        1,
        Duration::ZERO,
        cancel,
        move |mut envs| async move {
            match envs.pop() {
                Some(env) => handler(env).await,
                None => Ok(()),
            }
        },
    )
    .await
}

/// [`run_batch_consumer`] on a task of its own; logs if it ever stops with an error.
pub fn spawn_batch_consumer<T, F, Fut>(
    js: jetstream::Context,
    nats: NatsSettings,
    durable: Durable,
    max_batch: usize,
    linger: Duration,
    cancel: CancellationToken,
    handler: F,
) -> tokio::task::JoinHandle<()>
where
    T: Event + Send + 'static,
    F: Fn(Vec<Envelope<T>>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send,
{
    tokio::spawn(async move {
        let run =
            run_batch_consumer::<T, F, Fut>(js, nats, durable, max_batch, linger, cancel, handler);
        if let Err(e) = run.await {
            tracing::error!(error = ?e, consumer = durable.name, "consumer stopped");
        }
    })
}

/// [`run_consumer`] on a task of its own; logs if it ever stops with an error.
pub fn spawn_consumer<T, F, Fut>(
    js: jetstream::Context,
    nats: NatsSettings,
    durable: Durable,
    cancel: CancellationToken,
    handler: F,
) -> tokio::task::JoinHandle<()>
where
    T: Event + Send + 'static,
    F: Fn(Envelope<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send,
{
    tokio::spawn(async move {
        if let Err(e) = run_consumer::<T, F, Fut>(js, nats, durable, cancel, handler).await {
            tracing::error!(error = ?e, consumer = durable.name, "consumer stopped");
        }
    })
}

/// [`run_raw_batch_consumer`] on a task of its own; logs if it ever stops with an error.
pub fn spawn_raw_batch_consumer<F, Fut>(
    js: jetstream::Context,
    nats: NatsSettings,
    durable: Durable,
    max_batch: usize,
    linger: Duration,
    cancel: CancellationToken,
    handler: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn(Vec<RawMessage>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send,
{
    tokio::spawn(async move {
        let run = run_raw_batch_consumer(js, nats, durable, max_batch, linger, cancel, handler);
        if let Err(e) = run.await {
            tracing::error!(error = ?e, consumer = durable.name, "consumer stopped");
        }
    })
}
