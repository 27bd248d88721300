//! OTLP export, end to end: its own test binary, because the exporter is part of
//! the process-wide subscriber. A stand-in collector receives what the stack
//! exports over OTLP/HTTP; the trace a client started must arrive there,
//! continued through the gateway into the services. The collector speaks
//! https (the exporter's client is the kit's, with rustls).

// A test reports failure by panicking: unwrap and expect are how it reads
// what must be there (the workspace denies unwrap in the services).
#![allow(clippy::unwrap_used)]

use actix_web::HttpResponse;
use service_kit::settings::TelemetrySettings;
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};
use tests_e2e::TestStack;

/// (path, content type, body) of every request the collector received.
type Received = Arc<Mutex<Vec<(String, String, Vec<u8>)>>>;

fn collector() -> (String, Received) {
    let received: Received = Default::default();
    let sink = received.clone();
    let url = tests_e2e::stand_in(move |req, body| {
        let ct = req
            .headers()
            .get("content-type")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .unwrap_or_default();
        if let Ok(mut r) = sink.lock() {
            r.push((req.path().to_owned(), ct, body.to_vec()));
        }
        // An empty ExportTraceServiceResponse: full success.
        HttpResponse::Ok()
            .content_type("application/x-protobuf")
            .finish()
    });
    (format!("{url}/v1/traces"), received)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_of_a_client_trace_reach_the_collector() {
    // The collector is served over https with a certificate of the test's own
    // CA, trusted through `telemetry.otlp_ca_file` (without it: nothing
    // arrives).
    let (plain, received) = collector();
    let ca = tests_e2e::tls::TestCa::new("otlp");
    let port = tests_e2e::tls::tls_front(&ca.localhost(), &plain);
    let endpoint = format!("https://localhost:{port}/v1/traces");
    let ca_file = ca.ca_file();
    let guard = service_kit::telemetry::init(
        "hub-e2e-otlp",
        &TelemetrySettings {
            log_format: service_kit::settings::LogFormat::Json,
            // Spans of our crates pass the filter (it applies to export too);
            // the libraries' info logs stay out of the test output.
            log_level: "warn,service_kit=info,identity=info,core_api_gateway=info".into(),
            otlp_endpoint: endpoint,
            otlp_ca_file: ca_file,
            access_log: false,
            log_buffer_lines: 16_384,
        },
    )
    .expect("telemetry");
    let s = TestStack::spawn().await;
    let t = s.sign_in("otlp@example.com").await;
    let trace_id = "5a8f1b2c3d4e5f60718293a4b5c6d7e8";
    let r = s
        .call(
            "GET",
            &format!("{}/v1/profile", s.core()),
            Some(&t),
            None,
            &[("traceparent", &format!("00-{trace_id}-00f067aa0ba902b7-01"))],
        )
        .await;
    assert_eq!(r.status, 200);

    // An assistant request on a bearer the gateway has not seen: the gateway
    // asks identity, forwards to the agent, which asks org-billing.
    let org = s.create_org(&t, "Traced GmbH", "DE").await;
    assert_eq!(org.status, 201, "{:?}", org.body);
    let org = org.text("id").to_owned();
    let fresh = s.sign_in("otlp@example.com").await;
    let agent_trace = "6b9f2c3d4e5f60718293a4b5c6d7e8f9";
    let client_span = "1122334455667788";
    let r = s
        .call(
            "POST",
            &format!("{}/v1/agent", s.core()),
            Some(&fresh),
            Some(
                serde_json::json!({"message": format!("What is my wallet balance for org {org}?")}),
            ),
            &[("traceparent", &format!("00-{agent_trace}-{client_span}-01"))],
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert!(r.text("reply").contains("wallet"), "{:?}", r.body);
    // Shutting the provider down flushes the batch exporter (a blocking call).
    tokio::task::spawn_blocking(move || drop(guard))
        .await
        .expect("flush");

    let got = received.lock().map(|r| r.clone()).expect("the lock");
    assert!(!got.is_empty(), "the collector received nothing");
    for (path, ct, _) in &got {
        assert_eq!(path, "/v1/traces");
        assert_eq!(ct, "application/x-protobuf");
    }
    // OTLP protobuf carries trace ids as raw bytes and strings verbatim.
    let id = hex::decode(trace_id).expect("hex");
    let with_trace: Vec<&Vec<u8>> = got
        .iter()
        .map(|(_, _, b)| b)
        .filter(|b| contains(b, &id))
        .collect();
    assert!(
        !with_trace.is_empty(),
        "no exported span continues the client's trace"
    );
    assert!(
        with_trace.iter().any(|b| contains(b, b"hub-e2e-otlp")),
        "spans carry the service name"
    );
    assert!(
        with_trace.iter().any(|b| contains(b, b"/v1/profile")),
        "the request span names the route"
    );

    // The assistant request, span by span: one trace, each span a child of
    // the span that called it.
    let spans = decoded(&got, &hex::decode(agent_trace).expect("hex"));
    let by_id: HashMap<&[u8], &Span> = spans.iter().map(|s| (&s.span_id[..], s)).collect();
    let client = hex::decode(client_span).expect("hex");
    let find = |service: &str, path: &str| {
        spans
            .iter()
            .find(|s| s.attr("service") == service && s.attr("path") == path)
            .unwrap_or_else(|| panic!("no {service} span for {path} in {spans:#?}"))
    };
    let gateway = find("gateway", "/v1/agent");
    assert_eq!(
        gateway.parent, client,
        "the gateway's span continues the client's"
    );
    let identity = find("identity", "/v1/auth/me");
    assert_eq!(
        identity.parent, gateway.span_id,
        "identity's lookup is the gateway's child"
    );
    let agent = find("agent", "/v1/agent");
    assert_eq!(
        agent.parent, gateway.span_id,
        "the agent is the gateway's child"
    );
    let billing = spans
        .iter()
        .find(|s| s.attr("service") == "org-billing")
        .unwrap_or_else(|| panic!("no org-billing span in {spans:#?}"));
    let mut up = &billing.parent;
    while up != &agent.span_id {
        up = &by_id
            .get(&up[..])
            .unwrap_or_else(|| {
                panic!("org-billing's span does not lead to the agent's: {spans:#?}")
            })
            .parent;
    }
    for s in &spans {
        assert!(
            s.parent == client || by_id.contains_key(&s.parent[..]),
            "a span whose parent is not in the trace: {s:#?}"
        );
    }
    // One request id across the services.
    let id = gateway.attr("request_id");
    assert!(!id.is_empty());
    for s in [identity, agent, billing] {
        assert_eq!(s.attr("request_id"), id, "{s:#?}");
    }
}

/// An exported span, as the collector decoded it.
#[derive(Debug)]
struct Span {
    span_id: Vec<u8>,
    parent: Vec<u8>,
    attributes: Vec<(String, String)>,
}

impl Span {
    fn attr(&self, key: &str) -> &str {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// Every span of trace `trace_id` in the OTLP requests the collector got.
fn decoded(got: &[(String, String, Vec<u8>)], trace_id: &[u8]) -> Vec<Span> {
    use opentelemetry_proto::tonic::{
        collector::trace::v1::ExportTraceServiceRequest, common::v1::any_value::Value,
    };
    use prost::Message;
    let mut spans = Vec::new();
    for (_, _, body) in got {
        let req = ExportTraceServiceRequest::decode(&body[..]).expect("an OTLP trace export");
        for s in req
            .resource_spans
            .into_iter()
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .filter(|s| s.trace_id == trace_id)
        {
            let attributes = s
                .attributes
                .into_iter()
                .map(|kv| {
                    let v = match kv.value.and_then(|v| v.value) {
                        Some(Value::StringValue(v)) => v,
                        Some(other) => format!("{other:?}"),
                        None => String::new(),
                    };
                    (kv.key, v)
                })
                .collect();
            spans.push(Span {
                span_id: s.span_id,
                parent: s.parent_span_id,
                attributes,
            });
        }
    }
    spans
}
