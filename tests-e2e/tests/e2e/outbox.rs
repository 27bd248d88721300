//! The service kit's outbox relay and durable consumers against real Postgres
//! and NATS (the services' event paths rest on these guarantees).

use event_contracts::{AuditRecorded, Envelope, Event, IdentityChanged};
use service_kit::{nats, outbox::Outbox, settings::NatsSettings};
use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};
use tests_e2e::{eventually, TestStack};
use tokio_util::sync::CancellationToken;

async fn stream_messages(s: &TestStack) -> u64 {
    let js = async_nats::jetstream::new(s.nats.clone());
    let mut stream = js
        .get_stream(s.naming.stream("CORE"))
        .await
        .expect("stream");
    let info = stream.info().await.expect("info");
    info.state.messages
}

#[tokio::test]
async fn a_republished_outbox_row_is_dropped_by_jetstream_deduplication() {
    let s = TestStack::spawn().await;
    let js = async_nats::jetstream::new(s.nats.clone());
    let outbox = Outbox::new(s.db.clone(), js);
    let before = stream_messages(&s).await;
    let env = Envelope::new(IdentityChanged {
        user_id: uuid::Uuid::new_v4().into(),
    });
    let payload = serde_json::to_string(&env).expect("json");
    let subject = s.naming.subject(IdentityChanged::SUBJECT);
    let insert = || async {
        sqlx::query!(
            "INSERT INTO identity.outbox (id, subject, payload) VALUES ($1, $2, $3)",
            env.id,
            &subject,
            &payload,
        )
        .execute(&s.db)
        .await
        .expect("insert");
    };
    let gone = || async {
        let left: i64 = sqlx::query_scalar!(
            r#"SELECT count(*) AS "v!" FROM identity.outbox WHERE id = $1"#,
            env.id,
        )
        .fetch_one(&s.db)
        .await
        .expect("count");
        (left == 0).then_some(())
    };
    insert().await;
    // Our flush or the service's own relay sends it; either way it leaves the outbox.
    outbox.flush().await.expect("flush");
    assert!(
        eventually(Duration::from_secs(5), gone).await.is_some(),
        "a sent row leaves the outbox"
    );
    assert_eq!(stream_messages(&s).await, before + 1);
    // A crash after publishing but before deleting: the same row goes out again.
    insert().await;
    outbox.flush().await.expect("flush again");
    assert!(eventually(Duration::from_secs(5), gone).await.is_some());
    assert_eq!(
        stream_messages(&s).await,
        before + 1,
        "JetStream kept one copy"
    );
}

#[tokio::test]
async fn a_consumer_gets_a_failed_batch_again_and_acks_only_after_success() {
    let s = TestStack::spawn().await;
    let settings = NatsSettings {
        url: tests_e2e::nats_url(),
        tls_required: false,
        tls_ca_file: String::new(),
        user: String::new(),
        password: None,
        stream_replicas: 1,
        subject_prefix: s.naming.subject_prefix.clone(),
        stream_suffix: s.naming.stream_suffix.clone(),
        memory_storage: true,
        stream_max_age_secs: 3600,
        consumer_backoff_base_ms: 200,
        consumer_backoff_max_ms: 1000,
        dead_letter_after: 20,
    };
    let js = async_nats::jetstream::new(s.nats.clone());
    nats::ensure_streams(&js, &settings).await.expect("streams");
    let attempts = Arc::new(AtomicUsize::new(0));
    let delivered = Arc::new(AtomicUsize::new(0));
    let cancel = CancellationToken::new();
    let (a, d) = (attempts.clone(), delivered.clone());
    let task = nats::spawn_batch_consumer::<AuditRecorded, _, _>(
        js.clone(),
        settings.clone(),
        nats::Durable::of::<AuditRecorded>("kit-test"),
        16,
        Duration::from_millis(20),
        cancel.clone(),
        move |envs: Vec<Envelope<AuditRecorded>>| {
            let (a, d) = (a.clone(), d.clone());
            async move {
                // The first attempt fails: the batch must come back.
                if a.fetch_add(1, Ordering::SeqCst) == 0 {
                    anyhow::bail!("simulated failure");
                }
                d.fetch_add(envs.len(), Ordering::SeqCst);
                Ok(())
            }
        },
    );
    s.publish(AuditRecorded {
        actor_user_id: None,
        action: "kit.test".into(),
        subject: "x".into(),
        detail: serde_json::json!({}),
        ip: String::new(),
    })
    .await;
    // A payload that never parses goes to the DLQ, not retried forever.
    js.publish(s.naming.subject(AuditRecorded::SUBJECT), "not json".into())
        .await
        .expect("publish")
        .await
        .expect("ack");
    let done = eventually(Duration::from_secs(10), || async {
        (delivered.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    assert!(
        done.is_some(),
        "the event was not redelivered after the failure"
    );
    assert!(attempts.load(Ordering::SeqCst) >= 2);
    // Nothing left pending on the durable consumer (the event acknowledged,
    // the bad payload moved to the DLQ) while it still runs: then no
    // further delivery can come.
    s.consumer_caught_up("CORE", "kit-test").await;
    assert_eq!(
        delivered.load(Ordering::SeqCst),
        1,
        "acked once, not delivered again"
    );
    cancel.cancel();
    let _ = task.await;
    let dead: Vec<_> = service_kit::deadletter::list(&js, &s.naming)
        .await
        .expect("dlq")
        .into_iter()
        .filter(|d| d.consumer == "kit-test")
        .collect();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].payload.as_ref(), b"not json");
    assert_eq!(dead[0].consumer, "kit-test");
}

#[tokio::test]
async fn events_carry_the_trace_of_the_request_that_wrote_them() {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    let s = TestStack::spawn().await;
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    // This test's task runs on this thread (current-thread runtime).
    let _default = tracing::subscriber::set_default(subscriber);
    let incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let span = service_kit::telemetry::event_span("http", Some(incoming));
    let js = async_nats::jetstream::new(s.nats.clone());
    let subject = s.naming.subject(IdentityChanged::SUBJECT);
    let mut sub = s.nats.subscribe(subject).await.expect("subscribe");
    {
        use tracing::Instrument;
        async {
            let mut conn = s.db.acquire().await.expect("conn");
            service_kit::outbox::enqueue(
                &mut conn,
                &s.naming,
                IdentityChanged {
                    user_id: uuid::Uuid::new_v4().into(),
                },
            )
            .await
            .expect("enqueue");
        }
        .instrument(span)
        .await;
    }
    Outbox::new(s.db.clone(), js).flush().await.expect("flush");
    let msg = tokio::time::timeout(Duration::from_secs(5), futures::StreamExt::next(&mut sub))
        .await
        .expect("a message")
        .expect("a message");
    let tp = msg
        .headers
        .as_ref()
        .and_then(|h| h.get("traceparent"))
        .map(|v| v.as_str().to_owned())
        .expect("a traceparent header");
    assert!(
        tp.starts_with("00-0af7651916cd43dd8448eb211c80319c-"),
        "traceparent header: {tp:?}"
    );
}
