//! Dead letters: events a durable consumer could not handle after
//! `nats.dead_letter_after` deliveries (with exponential backoff between them).
//!
//! Nothing is dropped: the event moves to the `DLQ` stream (subject
//! `dlq.<consumer>`, the original subject and the last error in headers), and
//! is acknowledged on its own stream only once the DLQ holds it. An operator
//! lists and replays them with the service binary, as the NATS user that may
//! (`hub-admin`: a service's own user can neither read the DLQ nor publish
//! another service's events), e.g. `IDENTITY__NATS__USER=hub-admin
//! IDENTITY__NATS__PASSWORD=...`:
//!
//! ```text
//! identity dlq list
//! identity dlq replay <sequence>...   # or: identity dlq replay --all
//! ```
//!
//! A replay publishes the event again on its original subject (consumers are
//! idempotent) and deletes it from the DLQ. Each service reports how many of
//! its consumers' events wait there as `hub_dead_letter_events` on `/metrics`.

use anyhow::Context;
use async_nats::{jetstream, HeaderMap};
use event_contracts::Naming;
use futures::TryStreamExt;

pub const STREAM: &str = "DLQ";
pub const SUBJECT_ROOT: &str = "dlq";
const ORIGINAL_SUBJECT: &str = "Hub-Original-Subject";
const CONSUMER: &str = "Hub-Consumer";
const ERROR: &str = "Hub-Error";
const DELIVERIES: &str = "Hub-Deliveries";

/// The DLQ subject of `durable` (without the deployment's prefix and suffix).
fn subject(naming: &Naming, durable_base: &str) -> String {
    naming.subject(&format!("{SUBJECT_ROOT}.{durable_base}"))
}

/// Copy a message that failed `deliveries` times into the DLQ; Ok once the
/// DLQ stream acknowledged it (only then may the original be acknowledged).
pub async fn dead_letter(
    js: &jetstream::Context,
    naming: &Naming,
    durable_base: &str,
    msg: &jetstream::Message,
    deliveries: i64,
    error: &str,
) -> anyhow::Result<()> {
    let mut headers = HeaderMap::new();
    headers.insert(ORIGINAL_SUBJECT, msg.subject.as_str());
    headers.insert(CONSUMER, durable_base);
    headers.insert(DELIVERIES, deliveries.to_string().as_str());
    // Header values are one line.
    let error: String = error
        .chars()
        .filter(|c| !c.is_control())
        .take(500)
        .collect();
    headers.insert(ERROR, error.as_str());
    if let Some(h) = &msg.headers {
        if let Some(tp) = h.get("traceparent") {
            headers.insert("traceparent", tp.as_str());
        }
        if let Some(id) = h.get("Nats-Msg-Id") {
            // One copy in the DLQ, however often this is retried.
            headers.insert("Nats-Msg-Id", format!("dlq-{durable_base}-{id}").as_str());
        }
    }
    js.publish_with_headers(subject(naming, durable_base), headers, msg.payload.clone())
        .await?
        .await
        .context("the DLQ stream did not acknowledge")?;
    Ok(())
}

/// One dead-lettered event.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    pub sequence: u64,
    pub consumer: String,
    pub original_subject: String,
    pub deliveries: String,
    pub error: String,
    pub payload: bytes::Bytes,
}

async fn stream(
    js: &jetstream::Context,
    naming: &Naming,
) -> anyhow::Result<jetstream::stream::Stream> {
    js.get_stream(naming.stream(STREAM))
        .await
        .context("looking up the DLQ stream")
}

/// Every event in the DLQ, oldest first.
pub async fn list(js: &jetstream::Context, naming: &Naming) -> anyhow::Result<Vec<DeadLetter>> {
    let mut s = stream(js, naming).await?;
    let state = s.info().await?.state.clone();
    let mut out = Vec::new();
    if state.messages == 0 {
        return Ok(out);
    }
    for seq in state.first_sequence..=state.last_sequence {
        // Replayed (deleted) sequences leave gaps.
        let Ok(m) = s.get_raw_message(seq).await else {
            continue;
        };
        let h = |k: &str| {
            m.headers
                .get(k)
                .map(|v| v.as_str().to_owned())
                .unwrap_or_default()
        };
        out.push(DeadLetter {
            sequence: seq,
            consumer: h(CONSUMER),
            original_subject: h(ORIGINAL_SUBJECT),
            deliveries: h(DELIVERIES),
            error: h(ERROR),
            payload: m.payload.clone(),
        });
    }
    Ok(out)
}

/// Publish the event at `sequence` again on its original subject, then delete
/// it from the DLQ.
pub async fn replay(js: &jetstream::Context, naming: &Naming, sequence: u64) -> anyhow::Result<()> {
    let s = stream(js, naming).await?;
    let m = s
        .get_raw_message(sequence)
        .await
        .with_context(|| format!("no dead letter at sequence {sequence}"))?;
    let original = m
        .headers
        .get(ORIGINAL_SUBJECT)
        .map(|v| v.as_str().to_owned())
        .context("dead letter without its original subject")?;
    let mut headers = HeaderMap::new();
    // A fresh message id: the original one may still be in the duplicate window.
    headers.insert(
        "Nats-Msg-Id",
        format!("replay-{}-{sequence}", s.cached_info().config.name).as_str(),
    );
    if let Some(tp) = m.headers.get("traceparent") {
        headers.insert("traceparent", tp.as_str());
    }
    js.publish_with_headers(original, headers, m.payload.clone())
        .await?
        .await
        .context("the original stream did not acknowledge the replay")?;
    s.delete_message(sequence).await?;
    Ok(())
}

/// How many dead letters belong to consumers whose names start with `prefix`
/// (a service's consumers are named after it).
pub async fn count(js: &jetstream::Context, naming: &Naming, prefix: &str) -> anyhow::Result<u64> {
    Ok(by_consumer(js, naming, prefix).await?.values().sum())
}

/// The dead letters of each consumer whose name starts with `prefix` (only
/// consumers that have some), by the consumer's name.
pub async fn by_consumer(
    js: &jetstream::Context,
    naming: &Naming,
    prefix: &str,
) -> anyhow::Result<std::collections::BTreeMap<String, u64>> {
    let s = stream(js, naming).await?;
    let root = naming.subject(&format!("{SUBJECT_ROOT}."));
    let mut subjects = s.info_with_subjects(format!("{root}>")).await?;
    let mut out = std::collections::BTreeMap::new();
    while let Some((subject, c)) = subjects.try_next().await? {
        if let Some(durable) = subject
            .strip_prefix(&root)
            .filter(|durable| durable.starts_with(prefix))
        {
            *out.entry(durable.to_owned()).or_insert(0) += c as u64;
        }
    }
    Ok(out)
}
