//! Prometheus metrics, read as Prometheus and `promtool` read them: every
//! service and the gateway serve `/metrics` on a listener of their own (not on
//! the routed port), in a text format `promtool check metrics` accepts, with
//! the requests this test made counted by route template.

use std::{
    collections::BTreeMap,
    io::Write,
    process::{Command, Stdio},
};
use tests_e2e::{sample, TestStack};

/// `GET url`: (status, content type, body).
async fn fetch(s: &TestStack, url: &str) -> (u16, String, String) {
    let r = s.http.get(url).send().await.expect("metrics request");
    let status = r.status().as_u16();
    let ct = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .expect("a content type")
        .to_owned();
    (status, ct, r.text().await.expect("a body"))
}

/// `promtool check metrics` on `text`: its verdict and what it printed.
async fn promtool(text: &str) -> (bool, String) {
    let text = text.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("promtool (scripts/deps.sh installs Debian's prometheus package)");
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(text.as_bytes()).expect("write");
        }
        let out = child.wait_with_output().expect("promtool ran");
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    })
    .await
    .expect("promtool task")
}

#[tokio::test]
async fn every_service_serves_metrics_that_promtool_accepts_on_a_port_of_its_own() {
    let s = TestStack::spawn().await;
    // Traffic: a sign-in (identity), an organization (org-billing), a wallet
    // credit (the group commit), two reads of /me (a miss, then a hit), and a
    // path no route matches.
    let (owner, org) = s.org_with_owner("metrics@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let r = s.credit(&staff, &org, 1234).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    for _ in 0..2 {
        assert_eq!(s.get("/v1/auth/me", Some(&owner)).await.status, 200);
    }
    assert_eq!(s.get("/v1/no-such-thing", Some(&owner)).await.status, 404);

    let mut texts = BTreeMap::new();
    for (name, url) in &s.metrics {
        let (status, ct, text) = fetch(&s, url).await;
        assert_eq!(status, 200, "{name}: {url}");
        assert!(ct.starts_with("text/plain; version=0.0.4"), "{name}: {ct}");
        let (ok, said) = promtool(&text).await;
        assert!(
            ok,
            "promtool check metrics refused {name}'s /metrics: {said}\n{text}"
        );
        texts.entry(*name).or_insert(text);
    }
    assert_eq!(
        texts.keys().copied().collect::<Vec<_>>(),
        [
            "agent",
            "gateway",
            "identity",
            "kyc",
            "org_billing",
            "server_product",
            "webhook_dispatcher"
        ],
        "a metrics listener for every service"
    );

    // Requests by route template, never by raw path.
    let billing = &texts["org_billing"];
    let credited = "hub_http_requests_total{method=\"POST\",route=\"/v1/organizations/{id}/wallet/credit\",status=\"200\"}";
    assert_eq!(sample(billing, credited), Some(1.0), "{billing}");
    assert!(!billing.contains(&org), "an id in a label");
    assert_eq!(
        sample(
            billing,
            "hub_group_commit_batch_items_count{writer=\"apply_wallet_moves\"}"
        ),
        Some(1.0),
        "{billing}"
    );
    for (name, text) in &texts {
        if *name == "gateway" {
            continue;
        }
        // Read when scraped: the pool (the harness gives each 8) and the outbox.
        assert_eq!(
            sample(text, "hub_db_pool_max_connections"),
            Some(8.0),
            "{name}"
        );
        assert!(
            sample(text, "hub_outbox_pending_events").is_some(),
            "{name}"
        );
        assert_eq!(sample(text, "hub_dead_letter_events"), Some(0.0), "{name}");
    }
    // identity's consumers, read from JetStream.
    assert!(
        texts["identity"].contains("hub_nats_consumer_pending{consumer=\"identity-"),
        "{}",
        texts["identity"]
    );

    // The gateway: the first /me asked identity, the second was a cache hit;
    // the unknown path is counted without its path.
    let gw = &texts["gateway"];
    assert_eq!(
        sample(gw, "hub_gateway_bearer_lookups_total{result=\"hit\"}").map(|v| v >= 1.0),
        Some(true),
        "{gw}"
    );
    assert_eq!(
        sample(gw, "hub_gateway_bearer_lookups_total{result=\"miss\"}").map(|v| v >= 1.0),
        Some(true),
        "{gw}"
    );
    assert!(gw.contains("hub_gateway_identity_duration_seconds_count{outcome=\"ok\"}"));
    assert_eq!(
        sample(
            gw,
            "hub_http_requests_total{method=\"GET\",route=\"/v1/auth/me\",status=\"200\"}"
        ),
        Some(2.0),
        "{gw}"
    );
    assert!(
        gw.contains("route=\"unmatched\",status=\"404\"") && !gw.contains("no-such-thing"),
        "{gw}"
    );

    // Not on the routed ports: a service's own port wants an assertion, and
    // the gateway forwards nothing called /metrics.
    let own = fetch(&s, &format!("{}/metrics", s.service_url("identity"))).await;
    assert_eq!(own.0, 401, "{}", own.2);
    let public = fetch(&s, &format!("{}/metrics", s.core())).await;
    assert_ne!(public.0, 200, "{}", public.2);
    assert!(!public.2.contains("hub_http_requests_total"));
}

#[tokio::test]
async fn a_made_up_method_makes_no_series_of_its_own() {
    let s = TestStack::spawn().await;
    let made_up = "MADEUPMETHODXYZ";
    // Through the gateway (refused there) and straight at a service (which
    // refuses a request without the gateway's assertion): both count it.
    let r = tests_e2e::raw_request(s.core(), made_up, "/v1/organizations", &[], b"").await;
    assert_eq!(r.status, 405, "{:?}", r.body);
    let identity = s.service_url("identity").to_owned();
    let r = tests_e2e::raw_request(&identity, made_up, "/v1/auth/me", &[], b"").await;
    assert!(r.status >= 400, "{}", r.status);
    for name in ["gateway", "identity"] {
        let text = s.scrape(name).await;
        assert!(
            !text.contains(made_up),
            "{name} labels the raw method:\n{text}"
        );
        let other = text
            .lines()
            .filter(|l| l.starts_with("hub_http_requests_total{method=\"other\""))
            .count();
        assert_eq!(
            other, 1,
            "{name}: one series for the request, as `other`:\n{text}"
        );
    }
}
