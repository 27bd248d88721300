//! Signed webhooks against real HTTP receivers started by the tests.

use crate::servers::{order, p_call, sid, wait_for};
use base64::{engine::general_purpose::STANDARD, Engine};
use futures::future::join_all;
use serde_json::{json, Value};
use std::{
    sync::{
        atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};
use tests_e2e::Json;
use tests_e2e::{eventually, StackOptions, TestStack};
use webhook_dispatcher::ssrf;

/// One request a receiver got: (headers, body).
type Got = (Vec<(String, String)>, Vec<u8>);

/// A receiver answering `status` (changeable); while `held` is set it answers
/// nothing (the request waits until the test lets it go).
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<Got>>>,
    status: Arc<AtomicU16>,
    held: Arc<AtomicBool>,
    /// Requests answered so far.
    answered: Arc<AtomicUsize>,
}

impl Receiver {
    fn start(status: u16) -> Receiver {
        let got: Arc<Mutex<Vec<Got>>> = Arc::default();
        let status = Arc::new(AtomicU16::new(status));
        let held = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicUsize::new(0));
        let (g, st, h, a) = (got.clone(), status.clone(), held.clone(), answered.clone());
        let url = tests_e2e::stand_in(move |req, body| {
            let headers = req
                .headers()
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            if let Ok(mut g) = g.lock() {
                g.push((headers, body.to_vec()));
            }
            while h.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
            }
            a.fetch_add(1, Ordering::SeqCst);
            let code = st.load(Ordering::SeqCst);
            actix_web::HttpResponse::build(
                actix_web::http::StatusCode::from_u16(code)
                    .unwrap_or(actix_web::http::StatusCode::OK),
            )
            .insert_header(("location", "http://127.0.0.1:9/elsewhere"))
            .finish()
        });
        Receiver {
            url,
            got,
            status,
            held,
            answered,
        }
    }

    fn count(&self) -> usize {
        self.got.lock().map(|g| g.len()).expect("the lock")
    }

    fn all(&self) -> Vec<Got> {
        self.got.lock().map(|g| g.clone()).expect("the lock")
    }
}

fn header<'a>(h: &'a [(String, String)], name: &str) -> &'a str {
    h.iter()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

/// The `webhook-id` (the event's id) a stand-in receiver was sent.
fn webhook_id(req: &actix_web::HttpRequest) -> String {
    req.headers()
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .expect("a webhook-id header")
        .to_owned()
}

/// A stand-in receiver that records the `webhook-id` of every request and
/// holds the first one until `release` is set (the others are answered 200
/// at once): its URL, the ids, and `release`.
fn holds_first() -> (String, Arc<Mutex<Vec<String>>>, Arc<AtomicBool>) {
    let release = Arc::new(AtomicBool::new(false));
    let ids: Arc<Mutex<Vec<String>>> = Arc::default();
    let (r, i) = (release.clone(), ids.clone());
    let url = tests_e2e::stand_in(move |req, _| {
        let first = i
            .lock()
            .map(|mut i| {
                i.push(webhook_id(req));
                i.len() == 1
            })
            .expect("the lock");
        while first && !r.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
        actix_web::HttpResponse::Ok().finish()
    });
    (url, ids, release)
}

/// One slot in all, attempts of up to 4 s and leases of 6.5 s: attempts wait
/// for the slot in memory, and their lease is renewed when it would run out.
const ONE_SLOT: &str =
    "[delivery]\nconcurrency = 1\nper_endpoint = 1\ntimeout_ms = 4000\nlease_ms = 6500\n";

async fn endpoint(s: &TestStack, token: &str, org: &str, url: &str) -> tests_e2e::Resp {
    p_call(
        s,
        "POST",
        "/v1/webhooks",
        Some(token),
        Some(json!({"org_id": org, "url": url})),
    )
    .await
}

/// A new endpoint's id.
async fn endpoint_id(s: &TestStack, token: &str, org: &str, url: &str) -> String {
    let r = endpoint(s, token, org, url).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    r.text("id").to_owned()
}

/// `GET /v1/webhooks/{ep}/deliveries` as `token`.
async fn delivery_log(s: &TestStack, token: &str, ep: &str) -> tests_e2e::Resp {
    p_call(
        s,
        "GET",
        &format!("/v1/webhooks/{ep}/deliveries"),
        Some(token),
        None,
    )
    .await
}

/// `DELETE /v1/webhooks/{ep}` as `token`; its status.
async fn delete_endpoint(s: &TestStack, token: &str, ep: &str) -> u16 {
    p_call(
        s,
        "DELETE",
        &format!("/v1/webhooks/{ep}"),
        Some(token),
        None,
    )
    .await
    .status
}

/// Publish a product event for `org` on the stack's PRODUCT stream, as
/// server-product's outbox would; returns its id.
async fn publish_event(s: &TestStack, org: &str, kind: &str) -> String {
    publish_event_at(s, org, kind, time::OffsetDateTime::now_utc()).await
}

/// [`publish_event`], committed at `at` (an outbox relays it later).
async fn publish_event_at(
    s: &TestStack,
    org: &str,
    kind: &str,
    at: time::OffsetDateTime,
) -> String {
    let id = uuid::Uuid::now_v7();
    let body = json!({"id": id, "type": kind, "created_at": at
        .format(&time::format_description::well_known::Rfc3339).expect("RFC 3339"),
        "org_id": org, "data": {"id": uuid::Uuid::new_v4(), "hostname": "x"}});
    let js = async_nats::jetstream::new(s.nats.clone());
    js.publish(
        s.naming.subject(&event_contracts::product_subject(kind)),
        body.to_string().into(),
    )
    .await
    .expect("publish")
    .await
    .expect("ack");
    id.to_string()
}

/// An endpoint written straight into the table, past the creation check (as
/// if its name had resolved elsewhere then): only the check at delivery stands.
async fn insert_endpoint(s: &TestStack, org: &str, url: &str) -> uuid::Uuid {
    let id = uuid::Uuid::now_v7();
    let created = time::OffsetDateTime::now_utc() - time::Duration::seconds(1);
    let sealed = service_kit::sealed::Sealer::new(
        &s.settings::<webhook_dispatcher::WebhookDispatcher>("")
            .sealing
            .keys,
    )
    .expect("sealer")
    .seal(b"whsec_AAAA", format!("webhook-secret:{id}").as_bytes())
    .expect("seal");
    sqlx::query!(
        "INSERT INTO webhook_dispatcher.endpoints (id, org_id, url, secret, created_by, created_at) VALUES ($1, $2::uuid, $3, $4, $5, $6)",
        id,
        uuid::Uuid::parse_str(org).expect("a uuid"),
        url,
        sealed,
        uuid::Uuid::new_v4(),
        created,
    )
        .execute(&s.db).await.expect("endpoint");
    id
}

/// Wait (at most `secs`) until `ep`'s delivery log, as `token` reads it,
/// satisfies `done`; returns the log. A delivery's row changes only after its
/// receiver answered, and a row `delivered` or `failed` is never sent again:
/// the positive marker before asserting how many requests a receiver got.
async fn until_log(
    s: &TestStack,
    token: &str,
    ep: &str,
    secs: u64,
    done: impl Fn(&[Value]) -> bool,
) -> Option<Vec<Value>> {
    eventually(Duration::from_secs(secs), || async {
        let log = delivery_log(s, token, ep).await;
        let rows = log.array("");
        done(&rows).then_some(rows)
    })
    .await
}

async fn until_count(r: &Receiver, n: usize, secs: u64) -> bool {
    eventually(Duration::from_secs(secs), || async {
        (r.count() >= n).then_some(())
    })
    .await
    .is_some()
}

#[tokio::test]
async fn developers_create_endpoints_the_secret_is_shown_once_and_outsiders_see_nothing() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("hooks-roles@example.com").await;
    let rx = Receiver::start(200);
    for role in ["visitor", "finance"] {
        let t = s.member(&owner, &org, role).await;
        let r = endpoint(&s, &t, &org, &rx.url).await;
        assert_eq!(r.status, 403, "{role}");
        assert!(r.error().contains("developer"), "{}", r.error());
    }
    let dev = s.member(&owner, &org, "developer").await;
    let r = endpoint(&s, &dev, &org, &rx.url).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let secret = r.text("secret").to_owned();
    assert!(secret.starts_with("whsec_"));
    assert_eq!(STANDARD.decode(&secret[6..]).expect("base64").len(), 32);
    let id = r.text("id").to_owned();
    let list = p_call(
        &s,
        "GET",
        &format!("/v1/webhooks?org_id={org}"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(list.body.as_array().map(Vec::len), Some(1));
    assert!(!list.body.to_string().contains(&secret) && list.body[0].get("secret").is_none());
    // Sealed at rest: the raw bytes of the secret column (bytea) hold neither
    // the secret string nor the key it encodes.
    let sealed: Vec<u8> = sqlx::query_scalar!(
        "SELECT secret FROM webhook_dispatcher.endpoints WHERE id = $1::uuid",
        uuid::Uuid::parse_str(r.text("id")).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("sealed secret");
    let key = STANDARD.decode(&secret[6..]).expect("base64");
    for plain in [secret.as_bytes(), &secret.as_bytes()[6..], &key] {
        assert!(
            !sealed.windows(plain.len()).any(|w| w == plain),
            "the secret is stored in clear"
        );
    }
    let outsider = s.sign_in("hooks-outsider@example.com").await;
    for (m, p) in [
        ("GET", format!("/v1/webhooks?org_id={org}")),
        ("DELETE", format!("/v1/webhooks/{id}")),
        ("GET", format!("/v1/webhooks/{id}/deliveries")),
        ("POST", format!("/v1/webhooks/{id}/rotate-secret")),
    ] {
        assert_eq!(
            p_call(&s, m, &p, Some(&outsider), None).await.status,
            404,
            "{m} {p}"
        );
    }
    assert_eq!(endpoint(&s, &outsider, &org, &rx.url).await.status, 404);
}

#[tokio::test]
async fn every_server_event_arrives_with_both_signatures_valid() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("hooks-sig@example.com").await;
    let rx = Receiver::start(200);
    let secret = endpoint(&s, &owner, &org, &rx.url)
        .await
        .text("secret")
        .to_owned();
    let id = sid(&order(&s, &owner, &org, "vps-small", "hooked").await);
    wait_for(&s, &owner, &id, "active").await;
    assert_eq!(
        p_call(
            &s,
            "POST",
            &format!("/v1/servers/{id}/terminate"),
            Some(&owner),
            None
        )
        .await
        .status,
        200
    );
    assert!(
        until_count(&rx, 3, 15).await,
        "three deliveries, got {}",
        rx.count()
    );
    let ep = p_call(
        &s,
        "GET",
        &format!("/v1/webhooks?org_id={org}"),
        Some(&owner),
        None,
    )
    .await
    .text("/0/id")
    .to_owned();
    // Every event fanned out, and each delivery recorded delivered (after its
    // answer): nothing more can come, so what the receiver got is final.
    s.consumer_caught_up("PRODUCT", "webhook-dispatcher-fanout")
        .await;
    let log = until_log(&s, &owner, &ep, 15, |rows| {
        rows.len() == 3 && rows.iter().all(|d| d["status"] == "delivered")
    })
    .await
    .expect("three deliveries recorded delivered");
    let got = rx.all();
    assert_eq!(got.len(), 3, "one per event");
    let mut kinds = Vec::new();
    for (h, body) in &got {
        let event: Value = serde_json::from_slice(body).expect("json body");
        kinds.push(event.text("type").to_owned());
        assert_eq!(header(h, "x-service-event"), event.text("type"));
        assert_eq!(event["data"]["id"], json!(id));
        assert_eq!(header(h, "webhook-id"), event.text("id"));
        // X-Service-Sig, computed independently with ring: key = the secret string.
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
        assert_eq!(
            header(h, "x-service-sig"),
            hex::encode(ring::hmac::sign(&key, body).as_ref())
        );
        // Standard Webhooks, independently: key = base64-decoded secret, id.ts.body.
        let raw = STANDARD.decode(&secret[6..]).expect("b64");
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &raw);
        let signed = [
            header(h, "webhook-id").as_bytes(),
            b".",
            header(h, "webhook-timestamp").as_bytes(),
            b".",
            body,
        ]
        .concat();
        let want = format!(
            "v1,{}",
            STANDARD.encode(ring::hmac::sign(&key, &signed).as_ref())
        );
        assert_eq!(header(h, "webhook-signature"), want);
        // And through the shared helper, with its replay window.
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        assert!(hub_webhooks::verify_standard(
            &[&secret],
            header(h, "webhook-id"),
            header(h, "webhook-timestamp"),
            body,
            header(h, "webhook-signature"),
            now,
            300
        )
        .is_ok());
        assert!(hub_webhooks::verify_service_signature(
            &secret,
            body,
            header(h, "x-service-sig")
        ));
    }
    kinds.sort();
    assert_eq!(
        kinds,
        ["server.active", "server.created", "server.terminated"]
    );
    assert!(
        log.iter().all(|d| d["status"] == "delivered"
            && d["attempts"] == 1
            && d["last_status_code"] == 200),
        "{log:?}"
    );
}

#[tokio::test]
async fn a_failing_receiver_gets_exactly_three_attempts() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("hooks-fail@example.com").await;
    let rx = Receiver::start(500);
    let ep = endpoint_id(&s, &owner, &org, &rx.url).await;
    let event = publish_event(&s, &org, "server.created").await;
    // The series is over once the delivery is recorded failed (after the last
    // answer): then count what the receiver got.
    let log = until_log(&s, &owner, &ep, 20, |rows| {
        rows.first().is_some_and(|d| d["status"] == "failed")
    })
    .await
    .expect("the delivery failed");
    assert_eq!(rx.count(), 3, "three attempts in all");
    let metrics = s.scrape("webhook_dispatcher").await;
    assert_eq!(
        tests_e2e::sample(&metrics, "hub_webhook_attempts_total{result=\"rejected\"}"),
        Some(3.0),
        "{metrics}"
    );
    assert!(
        metrics.contains("hub_webhook_attempt_duration_seconds_count{result=\"rejected\"} 3"),
        "{metrics}"
    );
    let ids: Vec<String> = rx
        .all()
        .iter()
        .map(|(h, _)| header(h, "webhook-id").to_owned())
        .collect();
    assert!(
        ids.iter().all(|i| *i == event),
        "the same event id on each attempt"
    );
    let d = &log[0];
    assert_eq!(
        (
            d["status"].as_str(),
            d["attempts"].as_i64(),
            d["last_status_code"].as_i64()
        ),
        (Some("failed"), Some(3), Some(500))
    );
    assert_eq!(d["event"], "server.created");
    assert_eq!(d["event_id"], json!(event));
    // A manual retry starts a new series, and this time it lands.
    rx.status.store(200, Ordering::SeqCst);
    let did = d.text("id");
    let r = p_call(
        &s,
        "POST",
        &format!("/v1/webhooks/{ep}/deliveries/{did}/retry"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(
        (r.status, r.body["series"].as_i64()),
        (201, Some(1)),
        "{:?}",
        r.body
    );
    assert!(until_count(&rx, 4, 10).await);
    let delivered = eventually(Duration::from_secs(5), || async {
        let log = delivery_log(&s, &owner, &ep).await;
        (log.body[0]["status"] == "delivered").then_some(log.body)
    })
    .await
    .expect("the retry was delivered");
    assert_eq!(delivered.as_array().map(Vec::len), Some(2));
    let visitor = s.member(&owner, &org, "visitor").await;
    assert_eq!(
        p_call(
            &s,
            "POST",
            &format!("/v1/webhooks/{ep}/deliveries/{did}/retry"),
            Some(&visitor),
            None
        )
        .await
        .status,
        403
    );
}

#[tokio::test]
async fn a_hanging_receiver_does_not_delay_another_endpoint() {
    // An attempt may take a minute here, so the hanging receiver's attempts
    // stay in flight until the test lets them go: the fast endpoint's
    // deliveries can only arrive beside them, not after them.
    let s = TestStack::spawn_with(StackOptions {
        webhook_toml: "[delivery]\ntimeout_ms = 60000\nlease_ms = 120000\n".into(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("hooks-hang@example.com").await;
    let slow = Receiver::start(200);
    slow.held.store(true, Ordering::SeqCst);
    let fast = Receiver::start(200);
    endpoint(&s, &owner, &org, &slow.url).await;
    endpoint(&s, &owner, &org, &fast.url).await;
    // Keep the slow one busy first, then send events both get.
    publish_event(&s, &org, "server.created").await;
    assert!(until_count(&slow, 1, 10).await);
    for _ in 0..5 {
        publish_event(&s, &org, "server.active").await;
    }
    let fast_got_all = until_count(&fast, 6, 30).await;
    // Read before the slow receiver is let go: still hanging.
    let slow_answered = slow.answered.load(Ordering::SeqCst);
    slow.held.store(false, Ordering::SeqCst);
    assert!(
        fast_got_all,
        "the fast endpoint got {} while the slow one hung",
        fast.count()
    );
    assert_eq!(slow_answered, 0, "the slow receiver was still hanging");
}

#[tokio::test]
async fn the_log_holds_the_last_fifty_newest_first() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("hooks-log@example.com").await;
    let rx = Receiver::start(200);
    let ep = endpoint_id(&s, &owner, &org, &rx.url).await;
    let mut ids = Vec::new();
    for _ in 0..55 {
        ids.push(publish_event(&s, &org, "server.created").await);
    }
    assert!(until_count(&rx, 55, 20).await, "{}", rx.count());
    let log = delivery_log(&s, &owner, &ep).await;
    let rows = log.array("");
    assert_eq!(rows.len(), 50);
    let times: Vec<&str> = rows
        .iter()
        .filter_map(|r| r["created_at"].as_str())
        .collect();
    let mut sorted = times.clone();
    sorted.sort();
    sorted.reverse();
    assert_eq!(times, sorted, "newest first");
}

#[tokio::test]
async fn rotation_signs_with_both_secrets_for_the_overlap() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("hooks-rotate@example.com").await;
    let rx = Receiver::start(200);
    let created = endpoint(&s, &owner, &org, &rx.url).await;
    let old = created.text("secret").to_owned();
    let ep = created.text("id").to_owned();
    let r = p_call(
        &s,
        "POST",
        &format!("/v1/webhooks/{ep}/rotate-secret"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    let new = r.text("secret").to_owned();
    assert!(new.starts_with("whsec_") && new != old);
    // Both secrets sealed at rest (raw bytes of both bytea columns).
    let (current, previous): (Vec<u8>, Option<Vec<u8>>) = sqlx::query!(
        r#"SELECT secret AS "c0!", previous_secret AS "c1?" FROM webhook_dispatcher.endpoints WHERE id = $1::uuid"#,
        uuid::Uuid::parse_str(&ep).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await.map(|r| (r.c0, r.c1))
    .expect("sealed secrets");
    let previous = previous.expect("the previous secret is kept");
    for column in [&current, &previous] {
        for plain in [&old, &new] {
            assert!(
                !column
                    .windows(plain.len() - 6)
                    .any(|w| w == &plain.as_bytes()[6..]),
                "a secret is stored in clear"
            );
        }
    }
    publish_event(&s, &org, "server.created").await;
    assert!(until_count(&rx, 1, 10).await);
    let (h, body) = rx.all().remove(0);
    let sig = header(&h, "webhook-signature");
    assert_eq!(sig.split(' ').count(), 2, "{sig}");
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    for secret in [&old, &new] {
        assert!(hub_webhooks::verify_standard(
            &[secret],
            header(&h, "webhook-id"),
            header(&h, "webhook-timestamp"),
            &body,
            sig,
            now,
            300
        )
        .is_ok());
    }
    assert!(hub_webhooks::verify_service_signature(
        &new,
        &body,
        header(&h, "x-service-sig")
    ));
    assert!(!hub_webhooks::verify_service_signature(
        &old,
        &body,
        header(&h, "x-service-sig")
    ));
    // After the overlap only the new secret signs.
    s.clock.advance(time::Duration::hours(25));
    publish_event(&s, &org, "server.active").await;
    assert!(until_count(&rx, 2, 10).await);
    let (h, _) = rx.all().remove(1);
    assert_eq!(header(&h, "webhook-signature").split(' ').count(), 1);
}

#[tokio::test]
async fn deleting_an_endpoint_stops_its_deliveries() {
    let s = TestStack::spawn_with(StackOptions {
        webhook_toml: "[delivery]\nbackoff_ms = [1500, 1500]\n".into(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("hooks-delete@example.com").await;
    let rx = Receiver::start(500);
    let ep = endpoint_id(&s, &owner, &org, &rx.url).await;
    // Another endpoint of the organization failing the same way: its later
    // attempts are the markers that the deleted endpoint's would have come by.
    let witness = Receiver::start(500);
    let wep = endpoint_id(&s, &owner, &org, &witness.url).await;
    publish_event(&s, &org, "server.created").await;
    assert!(until_count(&rx, 1, 10).await);
    assert_eq!(delete_endpoint(&s, &owner, &ep).await, 200);
    // The witness's series is over (three attempts, 1.5 s apart, the last
    // recorded failed): the deleted endpoint's retries, due at the same
    // times, would have come by then.
    until_log(&s, &owner, &wep, 20, |rows| {
        rows.first()
            .is_some_and(|d| d["status"] == "failed" && d["attempts"] == 3)
    })
    .await
    .expect("the witness's series ended");
    assert_eq!(witness.count(), 3);
    assert_eq!(rx.count(), 1, "no attempt after the delete");
    // A later event: once the witness has it, its fan-out is done (one
    // INSERT for every endpoint), and the deleted endpoint got no delivery.
    witness.status.store(200, Ordering::SeqCst);
    publish_event(&s, &org, "server.active").await;
    assert!(until_count(&witness, 4, 10).await);
    assert_eq!(rx.count(), 1, "no delivery for later events");
    let rows: Vec<(String, Option<String>)> = sqlx::query!(
        r#"SELECT status AS "c0!", last_error AS "c1?" FROM webhook_dispatcher.delivery_log WHERE endpoint_id = $1::uuid"#,
        uuid::Uuid::parse_str(&ep).expect("a uuid"),
    )
    .fetch_all(&s.db)
    .await.map(|v| v.into_iter().map(|r| (r.c0, r.c1)).collect::<Vec<_>>())
    .expect("rows");
    assert_eq!(
        rows,
        [("failed".to_owned(), Some("endpoint deleted".to_owned()))]
    );
    assert_eq!(delete_endpoint(&s, &owner, &ep).await, 404);
}

/// The outcomes recorded for `ep`'s deliveries: (seq, attempts, status, error).
async fn outcomes(s: &TestStack, ep: &str) -> Vec<(i32, i32, String, Option<String>)> {
    sqlx::query!(
        "SELECT o.seq, o.attempts, o.status, o.error FROM webhook_dispatcher.outcomes o \
         JOIN webhook_dispatcher.deliveries d ON d.id = o.delivery_id \
         WHERE d.endpoint_id = $1::uuid ORDER BY o.delivery_id, o.seq",
        uuid::Uuid::parse_str(ep).expect("a uuid"),
    )
    .fetch_all(&s.db)
    .await
    .expect("outcomes")
    .into_iter()
    .map(|r| (r.seq, r.attempts, r.status, r.error))
    .collect()
}

#[tokio::test]
async fn an_attempt_in_flight_when_its_endpoint_is_deleted_records_nothing() {
    let s = TestStack::spawn_with(StackOptions {
        webhook_toml: "[delivery]\ntimeout_ms = 60000\nlease_ms = 120000\n".into(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("hooks-delete-inflight@example.com").await;
    let rx = Receiver::start(200);
    rx.held.store(true, Ordering::SeqCst);
    let ep = endpoint_id(&s, &owner, &org, &rx.url).await;
    publish_event(&s, &org, "server.created").await;
    assert!(until_count(&rx, 1, 10).await, "the attempt is in flight");
    assert_eq!(delete_endpoint(&s, &owner, &ep).await, 200);
    // The attempt lands after the deletion.
    rx.held.store(false, Ordering::SeqCst);
    let delivered = "hub_webhook_attempts_total{result=\"delivered\"}";
    eventually(Duration::from_secs(10), || async {
        let m = s.scrape("webhook_dispatcher").await;
        (tests_e2e::sample(&m, delivered) == Some(1.0)).then_some(())
    })
    .await
    .expect("the attempt came back delivered");
    // Its outcome went to the recorder as it was counted. A later delivery,
    // sent after that, is recorded after it (one recorder, in order).
    let witness = Receiver::start(200);
    let wep = endpoint_id(&s, &owner, &org, &witness.url).await;
    publish_event(&s, &org, "server.active").await;
    until_log(&s, &owner, &wep, 10, |rows| {
        rows.first().is_some_and(|d| d["status"] == "delivered")
    })
    .await
    .expect("the later delivery was recorded");
    assert_eq!(
        outcomes(&s, &ep).await,
        [(
            1,
            0,
            "failed".to_owned(),
            Some("endpoint deleted".to_owned())
        )],
        "the deletion's outcome stands; the late answer is not recorded"
    );
    assert_eq!(rx.count(), 1);
}

#[tokio::test]
async fn an_answer_that_comes_after_its_lease_was_taken_over_changes_nothing() {
    // The first attempt hangs past its lease, so a claim (of this replica or
    // any other: the fence is in Postgres) sends the delivery again. That one
    // fails and is recorded (a retry is due); then the first answers 200, too
    // late: recording it would end the series and drop the retry.
    let s = TestStack::spawn_with(StackOptions {
        webhook_toml:
            "[delivery]\ntimeout_ms = 60000\nlease_ms = 3000\nbackoff_ms = [1500, 1500]\n".into(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("hooks-lease@example.com").await;
    // Request 1 waits for `first` and answers 200; request 2 waits for
    // `second` and answers 500; later ones answer 200 at once.
    let (first, second) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let seen = Arc::new(AtomicUsize::new(0));
    let ids: Arc<Mutex<Vec<String>>> = Arc::default();
    let (f, sc, n, i) = (first.clone(), second.clone(), seen.clone(), ids.clone());
    let url = tests_e2e::stand_in(move |req, _| {
        if let Ok(mut i) = i.lock() {
            i.push(webhook_id(req));
        }
        let (gate, code) = match n.fetch_add(1, Ordering::SeqCst) {
            0 => (Some(&f), 200),
            1 => (Some(&sc), 500),
            _ => (None, 200),
        };
        while gate.is_some_and(|g| !g.load(Ordering::SeqCst)) {
            std::thread::sleep(Duration::from_millis(10));
        }
        actix_web::HttpResponse::build(
            actix_web::http::StatusCode::from_u16(code).expect("a status code"),
        )
        .finish()
    });
    let ep = endpoint_id(&s, &owner, &org, &url).await;
    let event = publish_event(&s, &org, "server.created").await;
    let count = |k: usize| {
        let seen = seen.clone();
        async move {
            eventually(Duration::from_secs(15), || async {
                (seen.load(Ordering::SeqCst) >= k).then_some(())
            })
            .await
            .is_some()
        }
    };
    assert!(count(2).await, "sent again once the lease ran out");
    second.store(true, Ordering::SeqCst);
    until_log(&s, &owner, &ep, 10, |rows| {
        rows.first()
            .is_some_and(|d| d["status"] == "pending" && d["attempts"] == 1)
    })
    .await
    .expect("the failure was recorded, a retry is due");
    first.store(true, Ordering::SeqCst);
    // The retry still comes, and its answer ends the series.
    assert!(count(3).await, "the retry was sent");
    let log = until_log(&s, &owner, &ep, 10, |rows| {
        rows.first().is_some_and(|d| d["status"] == "delivered")
    })
    .await
    .expect("the retry was recorded");
    assert_eq!(log[0]["attempts"], 2, "{log:?}");
    assert_eq!(
        outcomes(&s, &ep)
            .await
            .into_iter()
            .map(|(seq, attempts, status, _)| (seq, attempts, status))
            .collect::<Vec<_>>(),
        [(1, 1, "pending".to_owned()), (2, 2, "delivered".to_owned())]
    );
    let ids = ids.lock().map(|i| i.clone()).expect("the lock");
    assert!(ids.len() >= 3 && ids.iter().all(|i| *i == event), "{ids:?}");
}

#[tokio::test]
async fn an_attempt_that_waited_for_a_slot_renews_its_lease_and_is_sent_once() {
    // One slot, and attempts that take 3.5 s: the second event's attempt waits
    // 3.5 s for the slot, leased for 6.5 s from its fan-out, and would still be
    // in flight when that lease ran out (a claim would then send it again).
    let s = TestStack::spawn_with(StackOptions {
        webhook_toml: ONE_SLOT.into(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("hooks-renew@example.com").await;
    let ids: Arc<Mutex<Vec<String>>> = Arc::default();
    let i = ids.clone();
    let url = tests_e2e::stand_in(move |req, _| {
        let id = webhook_id(req);
        let first = i.lock().map(|mut i| {
            let first = !i.contains(&id);
            i.push(id);
            first
        });
        if first.unwrap_or(true) {
            std::thread::sleep(Duration::from_millis(3500));
        }
        actix_web::HttpResponse::Ok().finish()
    });
    let ep = endpoint_id(&s, &owner, &org, &url).await;
    let a = publish_event(&s, &org, "server.created").await;
    let b = publish_event(&s, &org, "server.active").await;
    until_log(&s, &owner, &ep, 20, |rows| {
        rows.len() == 2 && rows.iter().all(|d| d["status"] == "delivered")
    })
    .await
    .expect("both delivered");
    // Past the second attempt's first lease: a later event, sent after anything
    // a claim of it would have sent, is the marker.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let c = publish_event(&s, &org, "server.terminated").await;
    until_log(&s, &owner, &ep, 20, |rows| {
        rows.len() == 3 && rows.iter().all(|d| d["status"] == "delivered")
    })
    .await
    .expect("the marker delivered");
    let mut got = ids.lock().map(|i| i.clone()).expect("the lock");
    // The first two in either order (one fan-out may take both), then the marker.
    let first_two = 2.min(got.len());
    got[..first_two].sort();
    let mut want = vec![a, b];
    want.sort();
    want.push(c);
    assert_eq!(got, want, "each sent once");
}

#[tokio::test]
async fn an_attempt_whose_lease_was_taken_while_it_waited_is_not_sent() {
    // One slot, held by the first event's attempt until the test lets it go.
    // The other event's attempt waits for the slot, leased; meanwhile its
    // queue row takes another lease (as a claim of another replica does once
    // a lease has run out). When the slot frees, its lease must be renewed to
    // cover an attempt, and the renewal finds the row no longer this
    // process's: the attempt is dropped, not sent. Attempts time out after
    // 10 s (the held one must not fail before the takeover is arranged),
    // leases run 12.5 s.
    let s = TestStack::spawn_with(StackOptions {
        webhook_toml:
            "[delivery]\nconcurrency = 1\nper_endpoint = 1\ntimeout_ms = 10000\nlease_ms = 12500\n"
                .into(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("hooks-taken@example.com").await;
    let (url, ids, release) = holds_first();
    let ep = endpoint_id(&s, &owner, &org, &url).await;
    let a = publish_event(&s, &org, "server.created").await;
    let b = publish_event(&s, &org, "server.active").await;
    // One attempt is at the receiver; the other's row is leased (due later).
    let (sending, waiting, lease) = eventually(Duration::from_secs(15), || async {
        let sending = ids.lock().ok()?.first().cloned()?;
        let waiting = if sending == a { b.clone() } else { a.clone() };
        let lease = sqlx::query_scalar!(
            "SELECT due_at FROM webhook_dispatcher.queue WHERE event_id = $1::uuid AND due_at > now()",
            uuid::Uuid::parse_str(&waiting).ok()?,
        )
        .fetch_optional(&s.db)
        .await
        .ok()??;
        Some((sending, waiting, lease))
    })
    .await
    .expect("one attempt sending, the other waiting, leased");
    let taken = sqlx::query!(
        "UPDATE webhook_dispatcher.queue SET due_at = now() + interval '1 hour' \
         WHERE event_id = $1::uuid",
        uuid::Uuid::parse_str(&waiting).expect("a uuid"),
    )
    .execute(&s.db)
    .await
    .expect("take the lease over")
    .rows_affected();
    assert_eq!(taken, 1);
    // Free the slot once the waiting attempt's lease no longer covers an
    // attempt (timeout 10 s, plus a second's margin), so it must be renewed:
    // about 2 s after its fan-out (at once, if arranging took longer).
    let renew_from = lease - time::Duration::milliseconds(10_500);
    let wait = renew_from - time::OffsetDateTime::now_utc();
    tokio::time::sleep(Duration::try_from(wait).unwrap_or_default()).await;
    release.store(true, Ordering::SeqCst);
    // A later event waits behind it for the slot: once it is delivered, the
    // waiting attempt has had its turn.
    let c = publish_event(&s, &org, "server.terminated").await;
    let log = until_log(&s, &owner, &ep, 20, |rows| {
        rows.iter()
            .any(|d| d["event_id"] == json!(c) && d["status"] == "delivered")
    })
    .await
    .expect("the marker delivered");
    assert_eq!(
        ids.lock().map(|i| i.clone()).expect("the lock"),
        [sending, c],
        "the attempt whose lease was taken is not sent"
    );
    // Its delivery stays pending, for the claim that holds it now.
    let left: Vec<_> = log.iter().filter(|d| d["status"] == "pending").collect();
    assert_eq!(left.len(), 1, "{log:?}");
    assert_eq!(left[0]["attempts"], 0, "{log:?}");
}

#[tokio::test]
async fn a_stopping_replica_gives_back_the_attempts_waiting_for_a_slot() {
    // The stack's dispatcher queues deliveries but sends none (no worker). A
    // replica with one slot and hour-long leases takes them: one sending,
    // held by the receiver, the others waiting for the slot. It stops: those
    // go back to the queue due now, not an hour later, and another replica
    // sends each once.
    let s = TestStack::spawn_with(StackOptions {
        webhook_toml: "[delivery]\nworker = false\n".into(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("hooks-stop@example.com").await;
    let (url, ids, release) = holds_first();
    let ep = endpoint_id(&s, &owner, &org, &url).await;
    let replica = |toml: &str, cancel: &tokio_util::sync::CancellationToken| {
        webhook_dispatcher::build(
            s.settings::<webhook_dispatcher::WebhookDispatcher>(toml),
            service_kit::Runtime::new(cancel.clone()),
        )
    };
    let stopping = tokio_util::sync::CancellationToken::new();
    let one_slot = replica(
        "[delivery]\nworker = true\nconcurrency = 1\nper_endpoint = 1\ntimeout_ms = 30000\n\
         lease_ms = 3600000\n",
        &stopping,
    )
    .await
    .expect("a replica with one slot");
    let one_slot = tokio::spawn(one_slot.run_until_stopped());
    let mut events = vec![];
    for kind in ["server.created", "server.active", "server.terminated"] {
        events.push(publish_event(&s, &org, kind).await);
    }
    let ep_id = uuid::Uuid::parse_str(&ep).expect("a uuid");
    let leased = || async {
        sqlx::query_scalar!(
            r#"SELECT count(*) AS "n!" FROM webhook_dispatcher.queue
               WHERE endpoint_id = $1 AND due_at > now() + interval '30 minutes'"#,
            ep_id,
        )
        .fetch_one(&s.db)
        .await
        .expect("the query")
    };
    eventually(Duration::from_secs(15), || async {
        (ids.lock().map(|i| i.len()).expect("the lock") == 1 && leased().await == 3).then_some(())
    })
    .await
    .expect("one attempt sending, two waiting, all three leased for the hour");
    stopping.cancel();
    // While the first is still at the receiver, the two waiting are due again.
    let due = eventually(Duration::from_secs(15), || async {
        let n = leased().await;
        (n == 1).then_some(n)
    })
    .await;
    release.store(true, Ordering::SeqCst);
    assert_eq!(due, Some(1), "the waiting attempts were given back");
    let stopped = tokio::time::timeout(Duration::from_secs(20), one_slot).await;
    assert!(
        matches!(stopped, Ok(Ok(Ok(())))),
        "the replica stopped: {stopped:?}"
    );
    let other = tokio_util::sync::CancellationToken::new();
    let _stop_other = other.clone().drop_guard();
    let second = replica("[delivery]\nworker = true\n", &other)
        .await
        .expect("another replica");
    tokio::spawn(second.run_until_stopped());
    until_log(&s, &owner, &ep, 20, |rows| {
        rows.len() == 3 && rows.iter().all(|d| d["status"] == "delivered")
    })
    .await
    .expect("all three delivered");
    let mut got = ids.lock().map(|i| i.clone()).expect("the lock");
    got.sort();
    events.sort();
    assert_eq!(got, events, "each sent once");
}

#[tokio::test]
async fn internal_addresses_are_refused_at_creation_and_at_delivery() {
    let s = TestStack::spawn_with(StackOptions {
        webhook_toml: "[ssrf]\nallow_loopback = false\n".into(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("hooks-ssrf@example.com").await;
    let rx = Receiver::start(200);
    let port = rx
        .url
        .rsplit(':')
        .next()
        .expect("rsplit yields one part")
        .to_owned();
    for url in [
        rx.url.clone(),
        format!("http://localhost:{port}/"),
        "http://10.0.0.5/".into(),
        "http://172.16.3.4/".into(),
        "http://192.168.0.10/".into(),
        "http://169.254.169.254/latest/meta-data".into(),
        "http://100.64.1.1/".into(),
        "http://[::1]/".into(),
        "http://[::ffff:127.0.0.1]/".into(),
        "http://[fd00:ec2::254]/".into(),
        "http://0.0.0.0/".into(),
        "http://224.0.0.1/".into(),
        "ftp://example.com/".into(),
        format!("https://example.com/{}", "a".repeat(2050)),
    ] {
        let r = endpoint(&s, &owner, &org, &url).await;
        assert_eq!(r.status, 400, "{url}: {:?}", r.body);
        assert!(r.body["error"].is_string());
    }
    // An endpoint whose address turned internal after creation (DNS changed):
    // refused at delivery, on the address it would connect to.
    for url in [format!("http://localhost:{port}/hook"), rx.url.clone()] {
        insert_endpoint(&s, &org, &url).await;
    }
    publish_event(&s, &org, "server.created").await;
    let refused = eventually(Duration::from_secs(10), || async {
        let errs: Vec<Option<String>> =
            sqlx::query_scalar!("SELECT last_error FROM webhook_dispatcher.delivery_log")
                .fetch_all(&s.db)
                .await
                .expect("the query");
        (errs.len() == 2 && errs.iter().all(Option::is_some)).then_some(errs)
    })
    .await
    .expect("both attempts refused");
    assert!(
        refused
            .iter()
            .flatten()
            .any(|e| e.to_lowercase().contains("loopback")),
        "{refused:?}"
    );
    assert!(
        refused.iter().flatten().any(|e| e.contains("blocked")),
        "{refused:?}"
    );
    assert_eq!(rx.count(), 0, "the internal receiver got nothing");
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("hooks-redirect@example.com").await;
    // Every receiver's answer carries `Location: http://127.0.0.1:9/elsewhere`:
    // followed, the attempt would fail to connect (no status) instead of 302.
    let redirecting = Receiver::start(302);
    let ep = endpoint_id(&s, &owner, &org, &redirecting.url).await;
    publish_event(&s, &org, "server.created").await;
    assert!(until_count(&redirecting, 3, 10).await);
    // The third answer is recorded after the receiver saw the request.
    let log = until_log(&s, &owner, &ep, 10, |rows| {
        rows.first().is_some_and(|d| d["status"] != "pending")
    })
    .await
    .expect("the last attempt was recorded");
    assert_eq!(
        (
            log[0]["status"].as_str(),
            log[0]["last_status_code"].as_i64()
        ),
        (Some("failed"), Some(302))
    );
}

#[tokio::test]
async fn a_restart_between_attempts_loses_nothing_and_sends_nothing_twice() {
    // The stack's dispatcher fans out but sends nothing; two instances in turn
    // are "the dispatcher before and after its restart".
    let s = TestStack::spawn_with(StackOptions {
        webhook_toml: "[delivery]\nworker = false\n".into(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("hooks-restart@example.com").await;
    let rx = Receiver::start(500);
    let ep = endpoint_id(&s, &owner, &org, &rx.url).await;
    let settings = s.settings::<webhook_dispatcher::WebhookDispatcher>(
        "[delivery]\nbackoff_ms = [2500, 2500]\n",
    );
    let first = tokio_util::sync::CancellationToken::new();
    let app = webhook_dispatcher::build(settings.clone(), service_kit::Runtime::new(first.clone()))
        .await
        .expect("first");
    let run = tokio::spawn(app.run_until_stopped());
    publish_event(&s, &org, "server.created").await;
    assert!(until_count(&rx, 1, 10).await);
    let row = || async {
        sqlx::query!(
            r#"SELECT attempts AS "attempts!", status AS "status!"
               FROM webhook_dispatcher.delivery_log WHERE endpoint_id = $1"#,
            uuid::Uuid::parse_str(&ep).expect("a uuid"),
        )
        .fetch_optional(&s.db)
        .await
        .expect("row")
        .map(|r| (r.attempts, r.status))
    };
    // The first attempt's outcome recorded before the stop.
    let recorded = eventually(Duration::from_secs(10), || async {
        row().await.filter(|(attempts, _)| *attempts == 1)
    })
    .await;
    first.cancel();
    let _ = run.await;
    assert_eq!(
        recorded.as_ref().map(|(a, st)| (*a, st.as_str())),
        Some((1, "pending")),
        "the retry is scheduled in Postgres"
    );
    rx.status.store(200, Ordering::SeqCst);
    let second = tokio_util::sync::CancellationToken::new();
    let app = webhook_dispatcher::build(settings, service_kit::Runtime::new(second.clone()))
        .await
        .expect("second");
    tokio::spawn(app.run_until_stopped());
    assert!(
        until_count(&rx, 2, 10).await,
        "the second attempt came after the restart"
    );
    // Recorded delivered (after the answer): no attempt can follow.
    let delivered = eventually(Duration::from_secs(10), || async {
        row().await.filter(|(_, status)| status == "delivered")
    })
    .await;
    assert_eq!(rx.count(), 2, "nothing sent twice");
    assert_eq!(
        delivered.as_ref().map(|(a, st)| (*a, st.as_str())),
        Some((2, "delivered"))
    );
    second.cancel();
}

/// `http://<ip>/hook`, bracketed for IPv6.
fn literal_url(ip: &str) -> String {
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(v6)) => format!("http://[{v6}]/hook"),
        _ => format!("http://{ip}/hook"),
    }
}

/// IANA's verdict on a row's example: refused unless globally reachable. The
/// examples of the two rows judged by the IPv4 address inside (IPv4-mapped,
/// NAT64) carry 169.254.169.254, so they are refused too.
fn refused_by_iana(r: &ssrf::Row) -> bool {
    r.reachable != ssrf::Reachable::Yes
        || matches!(r.rule, ssrf::Rule::MappedV4 | ssrf::Rule::TranslatedV4)
}

/// Every row of the guard's table, at creation (through the API) and at
/// delivery (endpoints written past the creation check, then one event):
/// refused unless globally reachable, or loopback with `allow_loopback`.
async fn each_row_at_creation_and_at_delivery(s: &TestStack, allow_loopback: bool) {
    let (owner, org) = s.org_with_owner("hooks-iana@example.com").await;
    // Accepted endpoints go to another organization, which gets no events
    // (nothing is sent to the internet).
    let (other_owner, other) = s.org_with_owner("hooks-iana-other@example.com").await;
    let mut refused = Vec::new();
    for r in ssrf::TABLE {
        let url = literal_url(r.example);
        let refuse = refused_by_iana(r) && !(allow_loopback && r.rule == ssrf::Rule::Loopback);
        if refuse {
            let c = endpoint(s, &owner, &org, &url).await;
            assert_eq!(c.status, 400, "{url} ({} {}): {:?}", r.net, r.name, c.body);
            assert!(
                c.error().contains("not globally reachable"),
                "{}",
                c.error()
            );
            refused.push(url);
        } else {
            let c = endpoint(s, &other_owner, &other, &url).await;
            assert_eq!(c.status, 201, "{url} ({} {}): {:?}", r.net, r.name, c.body);
        }
    }
    // The review's cases by name, and plain public addresses.
    for url in [
        "http://[::127.0.0.1]/",
        "http://[::ffff:0:10.0.0.1]/",
        "http://[2002:a00:1::1]/",
        "http://[2002:7f00:1::1]/",
        "http://[fec0::1]/",
        "http://[64:ff9b:1::a00:1]/",
        "http://[64:ff9b::7f00:1]/",
        "http://192.0.0.1/",
        "http://198.18.0.1/",
        "http://100.64.0.1/",
        "http://0.0.0.0/",
        "http://[::]/",
    ] {
        let c = endpoint(s, &owner, &org, url).await;
        assert_eq!(c.status, 400, "{url}: {:?}", c.body);
    }
    for url in [
        "http://93.184.216.34/",
        "http://[2606:2800:220:1:248:1893:25c8:1946]/",
        "http://[::ffff:8.8.8.8]/",
        "http://[64:ff9b::808:808]/",
    ] {
        let c = endpoint(s, &other_owner, &other, url).await;
        assert_eq!(c.status, 201, "{url}: {:?}", c.body);
    }
    // At delivery: each refused address, as the URL's host, is refused before
    // sending; the loopback receiver (when allowed) gets the event.
    let rx = Receiver::start(200);
    let mut ids = Vec::new();
    if allow_loopback {
        endpoint_id(s, &owner, &org, &rx.url).await;
    } else {
        // A live receiver behind a refused address: its attempt is recorded
        // refused below, and it must have received nothing.
        ids.push(insert_endpoint(s, &org, &rx.url).await);
    }
    for url in &refused {
        ids.push(insert_endpoint(s, &org, url).await);
    }
    publish_event(s, &org, "server.created").await;
    let errors = eventually(Duration::from_secs(15), || async {
        let rows: Vec<(uuid::Uuid, Option<String>)> = sqlx::query!(
            r#"SELECT endpoint_id AS "c0!", last_error AS "c1?" FROM webhook_dispatcher.delivery_log
         WHERE endpoint_id = ANY($1) AND attempts > 0"#,
            &ids,
        )
        .fetch_all(&s.db)
        .await
        .map(|v| v.into_iter().map(|r| (r.c0, r.c1)).collect::<Vec<_>>())
        .expect("the query");
        (rows.len() == ids.len()).then_some(rows)
    })
    .await
    .expect("an attempt for every endpoint");
    for (id, e) in errors {
        let e = e.expect("a last_error");
        assert!(
            e.starts_with("refused:") && e.contains("not globally reachable"),
            "{id}: {e}"
        );
    }
    if allow_loopback {
        assert!(until_count(&rx, 1, 10).await, "loopback is delivered");
    } else {
        assert_eq!(rx.count(), 0);
    }
}

#[tokio::test]
async fn every_range_that_is_not_globally_reachable_is_refused_at_creation_and_at_delivery() {
    let s = TestStack::spawn_with(StackOptions {
        webhook_toml: "[ssrf]\nallow_loopback = false\n[webhooks]\nmax_endpoints_per_org = 200\n"
            .into(),
        ..Default::default()
    })
    .await;
    each_row_at_creation_and_at_delivery(&s, false).await;
}

#[tokio::test]
async fn allowing_loopback_allows_loopback_and_nothing_else() {
    // The test stack's own settings: `allow_loopback = true`.
    let s = TestStack::spawn_with(StackOptions {
        webhook_toml: "[webhooks]\nmax_endpoints_per_org = 200\n".into(),
        ..Default::default()
    })
    .await;
    each_row_at_creation_and_at_delivery(&s, true).await;
}

#[tokio::test]
async fn an_organization_has_at_most_twenty_endpoints_even_under_concurrent_creations() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("hooks-cap@example.com").await;
    let rx = Receiver::start(200);
    for _ in 0..19 {
        endpoint_id(&s, &owner, &org, &rx.url).await;
    }
    // 30 at once with room for one: exactly one is created. A lock the test
    // holds on the table lines them up: no insert proceeds until several
    // requests are waiting inside their transactions, so requests that
    // counted without taking turns would all insert once it is released.
    let mut hold = s.db.begin().await.expect("tx");
    sqlx::query!("LOCK TABLE webhook_dispatcher.endpoints IN SHARE MODE")
        .execute(&mut *hold)
        .await
        .expect("lock");
    let (answers, ()) = tokio::join!(
        join_all((0..30).map(|_| endpoint(&s, &owner, &org, &rx.url))),
        async {
            let waiting = eventually(Duration::from_secs(10), || async {
                let n: i64 = sqlx::query_scalar!(
                    r#"SELECT count(*) AS "v!" FROM pg_stat_activity WHERE datname = current_database()
         AND usename = 'hub_webhook_dispatcher' AND wait_event_type = 'Lock'"#,
                )
                .fetch_one(&s.db)
                .await
.expect("the query");
                (n >= 3).then_some(())
            })
            .await;
            assert!(waiting.is_some(), "the creations never queued up");
            hold.rollback().await.expect("release");
        }
    );
    let created = answers.iter().filter(|r| r.status == 201).count();
    let refused: Vec<_> = answers.iter().filter(|r| r.status == 409).collect();
    assert_eq!(
        (created, refused.len()),
        (1, 29),
        "{:?}",
        answers.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    for r in refused {
        assert!(r.error().contains("maximum of 20"), "{:?}", r.body);
    }
    let live: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "v!" FROM webhook_dispatcher.endpoints WHERE org_id = $1::uuid AND deleted_at IS NULL"#,
        uuid::Uuid::parse_str(&org).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("count");
    assert_eq!(live, 20);
    let list = p_call(
        &s,
        "GET",
        &format!("/v1/webhooks?org_id={org}"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(list.body.as_array().map(Vec::len), Some(20));
    // Deleting one makes room for one; another organization has its own count.
    let first = list.text("/0/id").to_owned();
    assert_eq!(delete_endpoint(&s, &owner, &first).await, 200);
    assert_eq!(endpoint(&s, &owner, &org, &rx.url).await.status, 201);
    assert_eq!(endpoint(&s, &owner, &org, &rx.url).await.status, 409);
    let (other_owner, other) = s.org_with_owner("hooks-cap-other@example.com").await;
    assert_eq!(
        endpoint(&s, &other_owner, &other, &rx.url).await.status,
        201
    );
}

#[tokio::test]
async fn a_delivery_is_retried_by_hand_at_most_ten_times_even_under_concurrent_requests() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("hooks-retry-cap@example.com").await;
    let rx = Receiver::start(200);
    let ep = endpoint_id(&s, &owner, &org, &rx.url).await;
    let event = publish_event(&s, &org, "server.created").await;
    let other_event = publish_event(&s, &org, "server.active").await;
    assert!(until_count(&rx, 2, 10).await);
    let log = delivery_log(&s, &owner, &ep).await;
    let id_of = |event: &str| {
        log.array("")
            .iter()
            .find(|d| d["event_id"] == json!(event))
            .map(|d| d.text("id").to_owned())
            .expect("a delivery of the event")
    };
    let (did, other_did) = (id_of(&event), id_of(&other_event));
    let retry = |d: String| {
        let (s, owner, ep) = (&s, &owner, &ep);
        async move {
            p_call(
                s,
                "POST",
                &format!("/v1/webhooks/{ep}/deliveries/{d}/retry"),
                Some(owner),
                None,
            )
            .await
        }
    };
    // 30 at once: exactly ten are made, series 1 to 10.
    let answers = join_all((0..30).map(|_| retry(did.clone()))).await;
    let mut series: Vec<i64> = answers
        .iter()
        .filter(|r| r.status == 201)
        .filter_map(|r| r.body["series"].as_i64())
        .collect();
    series.sort_unstable();
    assert_eq!(
        series,
        (1..=10).collect::<Vec<_>>(),
        "{:?}",
        answers.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    let refused: Vec<_> = answers.iter().filter(|r| r.status == 409).collect();
    assert_eq!(refused.len(), 20);
    assert!(
        refused.iter().all(|r| r.error().contains("10 times")),
        "{:?}",
        refused[0].body
    );
    let rows: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "v!" FROM webhook_dispatcher.deliveries WHERE endpoint_id = $1::uuid AND event_id = $2::uuid"#,
        uuid::Uuid::parse_str(&ep).expect("a uuid"),
        uuid::Uuid::parse_str(&event).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("count");
    assert_eq!(rows, 11, "the first series and ten retries");
    // Retrying one of the retries counts against the same delivery.
    let a_retry = answers
        .iter()
        .find(|r| r.status == 201)
        .map(|r| r.text("id").to_owned())
        .expect("an accepted retry");
    assert_eq!(retry(a_retry).await.status, 409);
    // Another event's delivery has its own count.
    let r = retry(other_did).await;
    assert_eq!(
        (r.status, r.body["series"].as_i64()),
        (201, Some(1)),
        "{:?}",
        r.body
    );
    // Every retry was delivered.
    assert!(until_count(&rx, 2 + 10 + 1, 15).await, "{}", rx.count());
}

/// The queue leaving the log (migration 20261127000001): every delivery an
/// earlier version stored reads the same through the log afterwards, and
/// exactly the pending ones are queued, with their attempts and due time.
#[tokio::test]
async fn the_queue_migration_keeps_every_delivery_as_it_was() {
    use service_kit::settings::Layered;
    use sqlx::Connection;
    use tests_e2e::scratch::{self, Only};
    type Row = (
        uuid::Uuid,
        String,
        i32,
        i32,
        String,
        Option<i32>,
        Option<String>,
        time::OffsetDateTime,
        Option<time::OffsetDateTime>,
    );
    let (url, mut admin) = scratch::database().await;
    let role = hub_stack::role_url(&url, "hub_webhook_dispatcher").expect("role url");
    let settings = webhook_dispatcher::Settings::from_layers(&[&format!(
        "[database]\nurl = {role:?}\nadmin_url = {url:?}\nmax_connections = 2\n"
    )])
    .expect("settings");
    let legacy =
        sqlx::migrate::Migrator::new(Only::before(&webhook_dispatcher::MIGRATOR, 20261127000001))
            .await
            .expect("legacy");
    let pool = service_kit::db::prepare(
        &settings.database,
        webhook_dispatcher::SCHEMA,
        "legacy",
        &legacy,
    )
    .await
    .expect("legacy schema");
    let t = |s: i64| time::OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(1_800_000_000 + s);
    let (org, ep) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    let (a, b, c, d) = (
        uuid::Uuid::new_v4(),
        uuid::Uuid::new_v4(),
        uuid::Uuid::new_v4(),
        uuid::Uuid::new_v4(),
    );
    // The earlier schema, written as that version wrote it: the two inserts
    // stay runtime strings, as the checked queries know only the schema of
    // today (its `deliveries` has none of these columns).
    sqlx::query(
        "INSERT INTO endpoints (id, org_id, url, secret, created_by, created_at) VALUES ($1, $2, 'https://example.com/h', '\\x00', $2, $3)",
    )
    .bind(ep)
    .bind(org)
    .bind(t(0))
    .execute(&pool)
    .await
    .expect("endpoint");
    // (id, event, type, series, status, attempts, due, code, error, updated, delivered)
    #[allow(clippy::type_complexity)]
    let old: [(
        uuid::Uuid,
        uuid::Uuid,
        &str,
        i32,
        &str,
        i32,
        i64,
        Option<i32>,
        Option<&str>,
        i64,
        Option<i64>,
    ); 5] = [
        (
            uuid::Uuid::new_v4(),
            a,
            "server.created",
            0,
            "delivered",
            2,
            12,
            Some(200),
            None,
            12,
            Some(12),
        ),
        (
            uuid::Uuid::new_v4(),
            b,
            "server.active",
            0,
            "pending",
            1,
            40,
            Some(500),
            Some("the endpoint answered 500"),
            20,
            None,
        ),
        (
            uuid::Uuid::new_v4(),
            b,
            "server.active",
            1,
            "pending",
            0,
            30,
            None,
            None,
            2,
            None,
        ),
        (
            uuid::Uuid::new_v4(),
            c,
            "server.stopped",
            0,
            "failed",
            3,
            50,
            None,
            Some("timed out"),
            50,
            None,
        ),
        (
            uuid::Uuid::new_v4(),
            d,
            "server.terminated",
            0,
            "failed",
            1,
            60,
            Some(503),
            Some("endpoint deleted"),
            60,
            None,
        ),
    ];
    for (i, (id, event, kind, series, status, attempts, due, code, error, updated, delivered)) in
        old.iter().enumerate()
    {
        sqlx::query(
            "INSERT INTO deliveries (id, endpoint_id, org_id, event_id, event_type, payload, series, status, attempts, \
               next_attempt_at, last_status_code, last_error, created_at, updated_at, delivered_at) \
             VALUES ($1, $2, $3, $4, $5, '{\"id\":\"' || $4 || '\"}', $6, $7, $8, $9, $10, $11, $12, $13, $14)",
        )
        .bind(id)
        .bind(ep)
        .bind(org)
        .bind(event)
        .bind(kind)
        .bind(series)
        .bind(status)
        .bind(attempts)
        .bind(t(*due))
        .bind(code)
        .bind(error)
        .bind(t(i as i64))
        .bind(t(*updated))
        .bind(delivered.map(t))
        .execute(&pool)
        .await
        .expect("old delivery");
    }
    pool.close().await;

    webhook_dispatcher::migrate(&settings)
        .await
        .expect("migrate");
    let log: Vec<Row> = sqlx::query!(
        r#"SELECT id AS "id!", event_type AS "event_type!", series AS "series!", attempts AS "attempts!",
             status AS "status!", last_status_code, last_error, updated_at AS "updated_at!", delivered_at
           FROM webhook_dispatcher.delivery_log ORDER BY created_at"#
    )
    .fetch_all(&mut admin)
    .await
    .expect("log")
    .into_iter()
    .map(|r| {
        (
            r.id,
            r.event_type,
            r.series,
            r.attempts,
            r.status,
            r.last_status_code,
            r.last_error,
            r.updated_at,
            r.delivered_at,
        )
    })
    .collect();
    let want: Vec<Row> = old
        .iter()
        .map(
            |(id, _, kind, series, status, attempts, _, code, error, updated, delivered)| {
                (
                    *id,
                    (*kind).to_owned(),
                    *series,
                    *attempts,
                    (*status).to_owned(),
                    *code,
                    error.map(str::to_owned),
                    t(*updated),
                    delivered.map(t),
                )
            },
        )
        .collect();
    assert_eq!(log, want);
    let queued: Vec<(uuid::Uuid, uuid::Uuid, i32, time::OffsetDateTime)> = sqlx::query!(
        "SELECT delivery_id, event_id, attempts, due_at FROM webhook_dispatcher.queue ORDER BY due_at"
    )
    .fetch_all(&mut admin)
    .await
    .expect("queue")
    .into_iter()
    .map(|r| (r.delivery_id, r.event_id, r.attempts, r.due_at))
    .collect();
    assert_eq!(
        queued,
        [(old[2].0, b, 0, t(30)), (old[1].0, b, 1, t(40))],
        "the pending ones, as they were due"
    );
    let payloads: Vec<(uuid::Uuid, String)> =
        sqlx::query!("SELECT id, payload FROM webhook_dispatcher.events ORDER BY created_at")
            .fetch_all(&mut admin)
            .await
            .expect("events")
            .into_iter()
            .map(|r| (r.id, r.payload))
            .collect();
    assert_eq!(
        payloads,
        [a, b, c, d].map(|e| (e, format!("{{\"id\":\"{e}\"}}"))),
        "each event's payload once"
    );
    admin.close().await.ok();
    scratch::drop_database(&url).await;
}

/// Attempts at `ep` leased for more than 30 s (held in some process's
/// memory, sending or waiting for a slot).
async fn leased(s: &TestStack, ep: &str) -> i64 {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM webhook_dispatcher.queue
           WHERE endpoint_id = $1::uuid AND due_at > now() + interval '30 seconds'"#,
        uuid::Uuid::parse_str(ep).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("the query")
}

/// Three events for one endpoint, whose receiver holds the first request:
/// one attempt sending, two waiting for the one slot in memory (leases of a
/// minute: never renewed meanwhile). The endpoint is deleted; once the
/// DELETE answered, the held request is let go. A later event for another,
/// live endpoint waits for the slot behind the two (one slot, taken in
/// turn): once it arrives they have had their turn, and neither was sent.
/// `replica`: the attempts are held by a second dispatcher (the stack's
/// sends nothing), which the DELETE (served by the stack's) cannot reach in
/// memory: only the fence in Postgres stops them.
async fn attempts_waiting_when_deleted(replica: bool) {
    let slot = "[delivery]\nworker = true\nconcurrency = 1\nper_endpoint = 4\ntimeout_ms = 10000\n\
                lease_ms = 60000\n";
    let s = TestStack::spawn_with(StackOptions {
        webhook_toml: if replica {
            "[delivery]\nworker = false\n".into()
        } else {
            slot.into()
        },
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("hooks-delete-waiting@example.com").await;
    let (url, ids, release) = holds_first();
    let ep = endpoint_id(&s, &owner, &org, &url).await;
    let other = tokio_util::sync::CancellationToken::new();
    let _stop_other = other.clone().drop_guard();
    if replica {
        let r = webhook_dispatcher::build(
            s.settings::<webhook_dispatcher::WebhookDispatcher>(slot),
            service_kit::Runtime::new(other.clone()),
        )
        .await
        .expect("a replica with one slot");
        tokio::spawn(r.run_until_stopped());
    }
    let mut events = vec![];
    for kind in ["server.created", "server.active", "server.terminated"] {
        events.push(publish_event(&s, &org, kind).await);
    }
    eventually(Duration::from_secs(15), || async {
        (ids.lock().map(|i| i.len()).expect("the lock") == 1 && leased(&s, &ep).await == 3)
            .then_some(())
    })
    .await
    .expect("one attempt sending, two waiting for the slot, all three leased");
    assert_eq!(delete_endpoint(&s, &owner, &ep).await, 200);
    release.store(true, Ordering::SeqCst);
    let witness = Receiver::start(200);
    let _wep = endpoint_id(&s, &owner, &org, &witness.url).await;
    let marker = publish_event(&s, &org, "server.created").await;
    assert!(until_count(&witness, 1, 30).await, "the marker arrived");
    assert_eq!(
        header(&witness.all()[0].0, "webhook-id"),
        marker,
        "the marker is the later event"
    );
    let sent = ids.lock().map(|i| i.clone()).expect("the lock");
    assert_eq!(sent.len(), 1, "nothing after the DELETE answered: {sent:?}");
    assert!(events.contains(&sent[0]));
    let stopped: Vec<_> = outcomes(&s, &ep)
        .await
        .into_iter()
        .filter(|o| o.3.as_deref() == Some("endpoint deleted"))
        .collect();
    assert_eq!(stopped.len(), 3, "every delivery stopped by the deletion");
}

#[tokio::test]
async fn attempts_waiting_for_a_slot_when_their_endpoint_is_deleted_are_not_sent() {
    attempts_waiting_when_deleted(false).await;
}

#[tokio::test]
async fn another_replicas_attempts_waiting_when_their_endpoint_is_deleted_are_not_sent() {
    attempts_waiting_when_deleted(true).await;
}

#[tokio::test]
async fn an_event_committed_before_its_endpoint_was_deleted_but_fanned_out_after_goes_nowhere() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("hooks-delete-late@example.com").await;
    let rx = Receiver::start(200);
    let ep = endpoint_id(&s, &owner, &org, &rx.url).await;
    let witness = Receiver::start(200);
    let _wep = endpoint_id(&s, &owner, &org, &witness.url).await;
    // Committed now, while both endpoints are live; relayed after the delete.
    let committed = time::OffsetDateTime::now_utc();
    assert_eq!(delete_endpoint(&s, &owner, &ep).await, 200);
    let event = publish_event_at(&s, &org, "server.created", committed).await;
    // The witness's delivery comes from the same fan-out statement.
    assert!(
        until_count(&witness, 1, 15).await,
        "the live endpoint got it"
    );
    let queued = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM webhook_dispatcher.deliveries
           WHERE endpoint_id = $1::uuid AND event_id = $2::uuid"#,
        uuid::Uuid::parse_str(&ep).expect("a uuid"),
        uuid::Uuid::parse_str(&event).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("count");
    assert_eq!(queued, 0, "no delivery for the deleted endpoint");
    assert_eq!(rx.count(), 0);
}

/// Suspend `org` as `staff`, and wait until `member` resolves with the
/// suspension (its writes are refused from then on).
async fn suspend(s: &TestStack, staff: &str, org: &str, member: &str) {
    let r = s
        .post(
            &format!("/v1/admin/organizations/{org}/suspend"),
            Some(staff),
            json!({"reason": "abuse report"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    eventually(Duration::from_secs(15), || async {
        let me = s.get("/v1/auth/me", Some(member)).await;
        me.body["memberships"]
            .as_array()?
            .iter()
            .any(|m| m["org_id"] == org && m["status"] == "suspended")
            .then_some(())
    })
    .await
    .expect("the suspension reached the member's identity");
}

/// The audit events `webhook.deleted` on `org`: (actor, detail).
async fn deletions_audited(s: &TestStack, org: &str, n: usize) -> Vec<(String, Value)> {
    let subject = format!("org:{org}");
    eventually(Duration::from_secs(10), || async {
        let rows: Vec<(String, Value)> = sqlx::query!(
            r#"SELECT actor_user_id::text AS "actor!", detail AS "detail!" FROM identity.audit_log
               WHERE subject = $1 AND action = 'webhook.deleted' ORDER BY id"#,
            subject,
        )
        .fetch_all(&s.db)
        .await
        .ok()?
        .into_iter()
        .map(|r| (r.actor, r.detail))
        .collect();
        (rows.len() == n).then_some(rows)
    })
    .await
    .expect("the deletions were audited")
}

#[tokio::test]
async fn a_suspended_organization_deletes_its_endpoints_and_staff_delete_any() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let staff_id = s
        .get("/v1/auth/me", Some(&staff))
        .await
        .text("user_id")
        .to_owned();
    let (owner, org) = s.org_with_owner("hooks-suspended@example.com").await;
    let visitor = s.member(&owner, &org, "visitor").await;
    let rx = Receiver::start(200);
    let url = rx.url.as_str();
    let (ep1, ep2) = (
        endpoint_id(&s, &owner, &org, url).await,
        endpoint_id(&s, &owner, &org, url).await,
    );
    let (other_owner, other) = s.org_with_owner("hooks-active@example.com").await;
    let ep3 = endpoint_id(&s, &other_owner, &other, url).await;
    suspend(&s, &staff, &org, &owner).await;
    // Writes that add are refused; deleting, which only takes away, is not.
    assert_eq!(endpoint(&s, &owner, &org, url).await.status, 403);
    assert_eq!(
        delete_endpoint(&s, &visitor, &ep1).await,
        403,
        "the role still counts"
    );
    assert_eq!(delete_endpoint(&s, &other_owner, &ep1).await, 404);
    assert_eq!(delete_endpoint(&s, &owner, &ep1).await, 200);
    // Staff, members of neither organization: the suspended one and an active one.
    let listed = p_call(
        &s,
        "GET",
        &format!("/v1/webhooks?org_id={other}"),
        Some(&staff),
        None,
    )
    .await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    assert_eq!(listed.body[0]["id"], json!(ep3));
    assert_eq!(delete_endpoint(&s, &staff, &ep2).await, 200);
    assert_eq!(delete_endpoint(&s, &staff, &ep3).await, 200);
    assert_eq!(delete_endpoint(&s, &staff, &ep3).await, 404, "gone");
    let live = p_call(
        &s,
        "GET",
        &format!("/v1/webhooks?org_id={org}"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(live.body, json!([]));
    // Audited: the owner as a member; staff as staff.
    let owner_id = s
        .get("/v1/auth/me", Some(&owner))
        .await
        .text("user_id")
        .to_owned();
    let audited = deletions_audited(&s, &org, 2).await;
    assert_eq!(audited[0].0, owner_id);
    assert_eq!(audited[0].1.get("as"), None);
    assert_eq!(audited[1].0, staff_id);
    assert_eq!(audited[1].1["as"], "staff");
    assert_eq!(audited[1].1["endpoint_id"], json!(ep2));
    let audited = deletions_audited(&s, &other, 1).await;
    assert_eq!(
        (audited[0].0.as_str(), &audited[0].1["as"]),
        (staff_id.as_str(), &json!("staff"))
    );
}

#[tokio::test]
async fn a_suspended_organizations_deliveries_wait_and_go_out_once_after_reactivation() {
    // Retries a minute apart: the test makes the retry due itself, once the
    // suspension is in place.
    let s = TestStack::spawn_with(StackOptions {
        webhook_toml: "[delivery]\nbackoff_ms = [60000, 60000]\n".into(),
        ..Default::default()
    })
    .await;
    let staff = s.sign_in("staff@example.com").await;
    let (owner, org) = s.org_with_owner("hooks-paused@example.com").await;
    let rx = Receiver::start(500);
    let ep = endpoint_id(&s, &owner, &org, &rx.url).await;
    let ep_id = uuid::Uuid::parse_str(&ep).expect("a uuid");
    // A delivery failing once before the suspension; its retry comes due
    // while the organization is suspended.
    let first = publish_event(&s, &org, "server.created").await;
    until_log(&s, &owner, &ep, 10, |rows| {
        rows.first().is_some_and(|d| d["attempts"] == 1)
    })
    .await
    .expect("the first attempt was recorded");
    suspend(&s, &staff, &org, &owner).await;
    let org_id = uuid::Uuid::parse_str(&org).expect("a uuid");
    eventually(Duration::from_secs(10), || async {
        sqlx::query_scalar!(
            "SELECT suspended FROM webhook_dispatcher.org_states WHERE org_id = $1",
            org_id,
        )
        .fetch_optional(&s.db)
        .await
        .ok()??
        .then_some(())
    })
    .await
    .expect("the dispatcher heard of the suspension");
    rx.status.store(200, Ordering::SeqCst);
    sqlx::query!(
        "UPDATE webhook_dispatcher.queue SET due_at = now() WHERE endpoint_id = $1",
        ep_id,
    )
    .execute(&s.db)
    .await
    .expect("the retry is due");
    let second = publish_event(&s, &org, "server.active").await;
    // The marker: both deliveries parked (the new one by its fan-out, the
    // retry by the claim that found it due), so neither is in flight.
    eventually(Duration::from_secs(10), || async {
        let parked = sqlx::query_scalar!(
            r#"SELECT count(*) AS "n!" FROM webhook_dispatcher.queue
               WHERE endpoint_id = $1 AND due_at > now() + interval '100 years'"#,
            ep_id,
        )
        .fetch_one(&s.db)
        .await
        .ok()?;
        (parked == 2).then_some(())
    })
    .await
    .expect("both deliveries wait, parked");
    assert_eq!(rx.count(), 1, "nothing sent while suspended");
    let rows = delivery_log(&s, &owner, &ep).await.array("");
    assert!(
        rows.len() == 2 && rows.iter().all(|d| d["status"] == "pending"),
        "{rows:?}"
    );
    let r = s
        .post(
            &format!("/v1/admin/organizations/{org}/reactivate"),
            Some(&staff),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let log = until_log(&s, &owner, &ep, 20, |rows| {
        rows.len() == 2 && rows.iter().all(|d| d["status"] == "delivered")
    })
    .await
    .expect("both delivered after the reactivation");
    let attempts = |event: &str| {
        log.iter()
            .find(|d| d["event_id"] == json!(event))
            .map(|d| d["attempts"].clone())
    };
    assert_eq!(
        attempts(&first),
        Some(json!(2)),
        "the pause is not an attempt"
    );
    assert_eq!(attempts(&second), Some(json!(1)));
    let mut got: Vec<String> = rx
        .all()
        .iter()
        .map(|(h, _)| header(h, "webhook-id").to_owned())
        .collect();
    got.sort();
    let mut want = vec![first.clone(), first, second];
    want.sort();
    assert_eq!(got, want, "each sent once after the reactivation");
}

#[tokio::test]
async fn attempts_waiting_in_memory_when_their_organization_is_suspended_wait_for_its_reactivation()
{
    // One slot, held by the receiver's first request; the other two events'
    // attempts wait for it in memory, leased for a minute (never renewed
    // meanwhile). The organization is suspended; once the dispatcher has it,
    // the test waits past `FRESH` (an attempt goes out only within it of a
    // read that found its organization active), then lets the first go: the
    // two go back to the queue and are parked, and after the reactivation
    // each is delivered once.
    let s = TestStack::spawn_with(StackOptions {
        webhook_toml: "[delivery]\nconcurrency = 1\nper_endpoint = 4\ntimeout_ms = 30000\n\
                       lease_ms = 60000\n"
            .into(),
        ..Default::default()
    })
    .await;
    let staff = s.sign_in("staff@example.com").await;
    let (owner, org) = s.org_with_owner("hooks-paused-waiting@example.com").await;
    let (url, ids, release) = holds_first();
    let ep = endpoint_id(&s, &owner, &org, &url).await;
    let ep_id = uuid::Uuid::parse_str(&ep).expect("a uuid");
    let mut events = vec![];
    for kind in ["server.created", "server.active", "server.terminated"] {
        events.push(publish_event(&s, &org, kind).await);
    }
    eventually(Duration::from_secs(15), || async {
        (ids.lock().map(|i| i.len()).expect("the lock") == 1 && leased(&s, &ep).await == 3)
            .then_some(())
    })
    .await
    .expect("one attempt sending, two waiting for the slot, all three leased");
    suspend(&s, &staff, &org, &owner).await;
    let org_id = uuid::Uuid::parse_str(&org).expect("a uuid");
    eventually(Duration::from_secs(10), || async {
        sqlx::query_scalar!(
            "SELECT suspended FROM webhook_dispatcher.org_states WHERE org_id = $1",
            org_id,
        )
        .fetch_optional(&s.db)
        .await
        .ok()??
        .then_some(())
    })
    .await
    .expect("the dispatcher heard of the suspension");
    tokio::time::sleep(webhook_dispatcher::worker::FRESH + Duration::from_millis(100)).await;
    release.store(true, Ordering::SeqCst);
    // The marker: the two are back in the queue, parked.
    eventually(Duration::from_secs(15), || async {
        let parked = sqlx::query_scalar!(
            r#"SELECT count(*) AS "n!" FROM webhook_dispatcher.queue
               WHERE endpoint_id = $1 AND due_at > now() + interval '100 years'"#,
            ep_id,
        )
        .fetch_one(&s.db)
        .await
        .ok()?;
        (parked == 2).then_some(())
    })
    .await
    .expect("the two waiting attempts went back to the queue, parked");
    assert_eq!(
        ids.lock().map(|i| i.len()).expect("the lock"),
        1,
        "nothing sent while suspended"
    );
    let r = s
        .post(
            &format!("/v1/admin/organizations/{org}/reactivate"),
            Some(&staff),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let log = until_log(&s, &owner, &ep, 20, |rows| {
        rows.len() == 3 && rows.iter().all(|d| d["status"] == "delivered")
    })
    .await
    .expect("all three delivered");
    assert!(log.iter().all(|d| d["attempts"] == 1), "{log:?}");
    let mut got = ids.lock().map(|i| i.clone()).expect("the lock");
    got.sort();
    events.sort();
    assert_eq!(got, events, "each sent once");
}
