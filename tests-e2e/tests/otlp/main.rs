//! OTLP export, end to end: its own test binary, because the exporter is part of
//! the process-wide subscriber. A stand-in collector receives what the stack
//! exports over OTLP/HTTP; the trace a client started must arrive there,
//! continued through the gateway into the services. The collector speaks
//! https (the exporter's client is the kit's, with rustls).

use actix_web::HttpResponse;
use service_kit::settings::TelemetrySettings;
use std::sync::{Arc, Mutex};
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
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
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
            log_format: "json".into(),
            // Spans of our crates pass the filter (it applies to export too);
            // the libraries' info logs stay out of the test output.
            log_level: "warn,service_kit=info,identity=info,core_api_gateway=info".into(),
            otlp_endpoint: endpoint,
            otlp_ca_file: ca_file,
            access_log: false,
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
    // Shutting the provider down flushes the batch exporter (a blocking call).
    tokio::task::spawn_blocking(move || drop(guard))
        .await
        .expect("flush");

    let got = received.lock().map(|r| r.clone()).unwrap_or_default();
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
}
