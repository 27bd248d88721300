//! TLS wherever the stack speaks it: webhooks to `https://` receivers, the
//! model provider over https, NATS over `tls://`, and Postgres with
//! `sslmode=require` (every service's connection encrypted). Each test makes
//! its own CA (rcgen) and trusts it through the settings that name a CA file,
//! never through process-wide environment variables.

use crate::servers::p_call;
use actix_web::HttpResponse;
use serde_json::{json, Value};
use std::{
    sync::{Arc, Mutex},
    time::Duration,
};
use tests_e2e::Json;
use tests_e2e::{eventually, nats_server::NatsServer, tls::TestCa, StackOptions, TestStack};

/// What a receiver got: (headers, body).
type Got = Arc<Mutex<Vec<(Vec<(String, String)>, Vec<u8>)>>>;

/// A plain recording receiver answering 200; its `http://127.0.0.1:port`.
fn receiver() -> (String, Got) {
    let got: Got = Arc::default();
    let g = got.clone();
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
        HttpResponse::Ok().finish()
    });
    (url, got)
}

fn header<'a>(h: &'a [(String, String)], name: &str) -> &'a str {
    h.iter()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

fn count(g: &Got) -> usize {
    g.lock().map(|g| g.len()).expect("the lock")
}

/// Publish a product event for `org`, as server-product's outbox would.
async fn publish_event(s: &TestStack, org: &str, kind: &str) -> String {
    let id = uuid::Uuid::now_v7();
    let body = json!({"id": id, "type": kind, "created_at": time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339).expect("RFC 3339"),
        "org_id": org, "data": {"id": uuid::Uuid::new_v4(), "hostname": "tls"}});
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

async fn create_endpoint(s: &TestStack, token: &str, org: &str, url: &str) -> (String, String) {
    let r = p_call(
        s,
        "POST",
        "/v1/webhooks",
        Some(token),
        Some(json!({"org_id": org, "url": url})),
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let field = |k: &str| r.text(k).to_owned();
    (field("id"), field("secret"))
}

#[tokio::test]
async fn https_webhooks_arrive_signed_and_an_untrusted_certificate_fails_every_attempt_with_its_reason(
) {
    let ca = TestCa::new("webhooks");
    let rogue = TestCa::new("rogue");
    let (plain, got) = receiver();
    let trusted_port = tests_e2e::tls::tls_front(&ca.localhost(), &plain);
    let (rogue_plain, rogue_got) = receiver();
    let rogue_port = tests_e2e::tls::tls_front(&rogue.localhost(), &rogue_plain);
    let s = TestStack::spawn_with(StackOptions {
        webhook_toml: format!("[tls]\nextra_ca_file = {:?}\n", ca.ca_file()),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("tls-hooks@example.com").await;
    let (_, secret) = create_endpoint(
        &s,
        &owner,
        &org,
        &format!("https://localhost:{trusted_port}/hook"),
    )
    .await;
    let (rogue_ep, _) = create_endpoint(
        &s,
        &owner,
        &org,
        &format!("https://localhost:{rogue_port}/hook"),
    )
    .await;
    let event = publish_event(&s, &org, "server.created").await;

    // The trusted receiver gets the delivery over TLS, both signatures valid.
    let arrived = eventually(Duration::from_secs(15), || async {
        (count(&got) >= 1).then_some(())
    })
    .await;
    assert!(arrived.is_some(), "nothing arrived over https");
    let all = got.lock().map(|g| g.clone()).expect("the lock");
    let (h, body) = &all[0];
    assert_eq!(header(h, "webhook-id"), event);
    let sent: Value = serde_json::from_slice(body).expect("json body");
    assert_eq!(sent["id"], json!(event));
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    hub_webhooks::verify_standard(
        &[&secret],
        header(h, "webhook-id"),
        header(h, "webhook-timestamp"),
        body,
        header(h, "webhook-signature"),
        now,
        300,
    )
    .expect("the Standard Webhooks signature verifies");
    assert!(hub_webhooks::verify_service_signature(
        &secret,
        body,
        header(h, "x-service-sig")
    ));

    // The endpoint whose certificate comes from another CA: every attempt
    // fails at the handshake, and the log says why.
    let log = eventually(Duration::from_secs(20), || async {
        let r = p_call(
            &s,
            "GET",
            &format!("/v1/webhooks/{rogue_ep}/deliveries"),
            Some(&owner),
            None,
        )
        .await;
        (r.body[0]["status"] == "failed").then_some(r)
    })
    .await
    .expect("the untrusted endpoint's delivery fails");
    let d = &log.body[0];
    assert_eq!(d["attempts"], 3, "{d:?}");
    assert_eq!(d["last_status_code"], Value::Null, "{d:?}");
    let reason = d.text("last_error");
    assert!(
        reason.contains("invalid peer certificate") && reason.contains("UnknownIssuer"),
        "{reason}"
    );
    assert_eq!(count(&rogue_got), 0, "no request got past the handshake");
}

#[tokio::test]
async fn the_agent_reaches_an_https_model_provider() {
    let ca = TestCa::new("model");
    let plain = tests_e2e::stand_in(|req, _body| {
        if req.path() != "/v1/chat/completions" {
            return HttpResponse::NotFound().finish();
        }
        HttpResponse::Ok().json(json!({
            "id": "c1", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Hello over TLS"}}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 10, "total_tokens": 40}
        }))
    });
    let port = tests_e2e::tls::tls_front(&ca.localhost(), &plain);
    let s = TestStack::spawn_with(StackOptions {
        agent_toml: format!(
            "[model]\nbase_url = \"https://localhost:{port}/v1\"\ntimeout_ms = 5000\n\
             model = \"test-model\"\n[tls]\nextra_ca_file = {:?}\n",
            ca.ca_file()
        ),
        ..Default::default()
    })
    .await;
    let staff = s.sign_in("staff@example.com").await;
    let (owner, org) = s.org_with_owner("tls-agent@example.com").await;
    assert_eq!(s.grant(&staff, &org, 1000).await.status, 200);
    let r = s
        .call(
            "POST",
            &format!("{}/v1/agent", s.core()),
            Some(&owner),
            Some(json!({"message": "hello there"})),
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["engine"], "model:test-model", "{:?}", r.body);
    assert_eq!(r.body["reply"], "Hello over TLS", "{:?}", r.body);
    // No fallback notice: the rules did not answer.
    assert_eq!(r.text("notice"), "", "{:?}", r.body);
}

/// A `nats-server` of this test only, with JetStream, serving TLS only.
fn nats_server_with_tls(ca: &TestCa) -> NatsServer {
    let leaf = ca.localhost();
    let cert = ca.write("nats-cert.pem", &leaf.cert_pem);
    let key = ca.write("nats-key.pem", &leaf.key_pem);
    NatsServer::start(
        &format!("tls {{ cert_file: {cert:?}\n key_file: {key:?} }}\n"),
        &[],
    )
}

#[tokio::test]
async fn nats_over_tls_connects_with_the_trusted_ca_and_refuses_without_it() {
    let ca = TestCa::new("nats");
    let server = nats_server_with_tls(&ca);
    let port = server.port;
    let settings = |url: String, ca_file: String| service_kit::settings::NatsSettings {
        url,
        tls_required: false,
        tls_ca_file: ca_file,
        user: String::new(),
        password: None,
        stream_replicas: 1,
        subject_prefix: String::new(),
        stream_suffix: "_tls".into(),
        memory_storage: true,
        stream_max_age_secs: 3600,
        consumer_backoff_base_ms: 1000,
        consumer_backoff_max_ms: 1000,
        dead_letter_after: 20,
    };
    let url = format!("tls://localhost:{port}");
    let good = settings(url.clone(), ca.ca_file());
    // The server takes a moment to listen.
    let client = eventually(Duration::from_secs(10), || async {
        service_kit::nats::connect(&good, "tls-test").await.ok()
    })
    .await
    .expect("a TLS connection with the test CA trusted");
    // JetStream works over it: the streams, a publish acknowledged.
    let js = async_nats::jetstream::new(client.clone());
    service_kit::nats::ensure_streams(&js, &good)
        .await
        .expect("streams over TLS");
    js.publish("core.v1.tls.check", "hello".into())
        .await
        .expect("publish")
        .await
        .expect("acknowledged over TLS");

    // Without the CA the certificate is unknown: no connection.
    let untrusted = settings(url, String::new());
    let err = service_kit::nats::connect(&untrusted, "tls-test")
        .await
        .expect_err("an untrusted server certificate is refused");
    assert!(format!("{err:#}").contains("connecting to NATS"), "{err:#}");
}

#[tokio::test]
async fn with_sslmode_require_every_service_connection_is_encrypted() {
    let s = TestStack::spawn_with(StackOptions {
        database_params: "sslmode=require".into(),
        ..Default::default()
    })
    .await;
    // Use the stack: sign in and create an organization (identity, org-billing
    // and the events between them).
    let (owner, org) = s.org_with_owner("tls-db@example.com").await;
    assert!(!owner.is_empty() && !org.is_empty());
    let db = s
        .database_url
        .rsplit_once('/')
        .map(|(_, d)| d.split('?').next().unwrap_or(d).to_owned())
        .expect("a database name");
    let rows: Vec<(String, bool)> = sqlx::query!(
        r#"SELECT usename::text AS "c0!", ssl AS "c1!" FROM pg_stat_ssl JOIN pg_stat_activity USING (pid)
         WHERE datname = $1 AND usename LIKE 'hub\_%'"#,
        &db,
    )
    .fetch_all(&s.db)
    .await.map(|v| v.into_iter().map(|r| (r.c0, r.c1)).collect::<Vec<_>>())
    .expect("pg_stat_ssl");
    for role in [
        "hub_identity",
        "hub_org_billing",
        "hub_kyc",
        "hub_server_product",
        "hub_webhook_dispatcher",
        "hub_agent",
    ] {
        assert!(
            rows.iter().any(|(u, _)| u == role),
            "{role} has no connection: {rows:?}"
        );
    }
    let plain: Vec<_> = rows.iter().filter(|(_, ssl)| !ssl).collect();
    assert!(plain.is_empty(), "unencrypted connections: {plain:?}");
}

#[tokio::test]
async fn verify_full_with_sslrootcert_trusts_only_the_named_ca() {
    use sqlx::{postgres::PgConnectOptions, Connection, PgConnection};
    let admin = tests_e2e::admin_database_url();
    let mut conn = PgConnection::connect(&admin).await.expect("admin");
    let (cert, dir): (String, String) = sqlx::query!(
        r#"SELECT current_setting('ssl_cert_file') AS "c0!", current_setting('data_directory') AS "c1!""#,
    )
    .fetch_one(&mut conn)
    .await.map(|r| (r.c0, r.c1))
    .expect("settings");
    let cert = if cert.starts_with('/') {
        cert
    } else {
        format!("{dir}/{cert}")
    };
    // The server's certificate is self-signed for localhost: it is its own CA.
    let mut url = reqwest::Url::parse(&admin).expect("admin url");
    if url.host_str() == Some("127.0.0.1") {
        url.set_host(Some("localhost")).expect("host");
    }
    let with_root = |root: &str| {
        let mut u = url.clone();
        u.set_query(Some(&format!("sslmode=verify-full&sslrootcert={root}")));
        u.to_string().parse::<PgConnectOptions>().expect("options")
    };
    let mut verified = PgConnection::connect_with(&with_root(&cert))
        .await
        .expect("verify-full with the server's certificate as root");
    let ssl: bool =
        sqlx::query_scalar!(r#"SELECT ssl AS "v!" FROM pg_stat_ssl WHERE pid = pg_backend_pid()"#,)
            .fetch_one(&mut verified)
            .await
            .expect("pg_stat_ssl");
    assert!(ssl);
    // A root that did not sign the certificate: a stand-in server that
    // answers the SSLRequest and then presents a certificate of a test CA
    // (this machine's system store may hold the real server's self-signed
    // certificate, so the refusal is shown against the stand-in).
    let ca = TestCa::new("pg-stand-in");
    let rogue = TestCa::new("pg-rogue");
    let port = postgres_tls_stand_in(&ca.localhost());
    let stand_in = |root: &str| {
        format!("postgres://postgres@localhost:{port}/x?sslmode=verify-full&sslrootcert={root}")
            .parse::<PgConnectOptions>()
            .expect("options")
    };
    let refused = PgConnection::connect_with(&stand_in(&rogue.ca_file()))
        .await
        .expect_err("a certificate the named root did not sign");
    assert!(format!("{refused}").contains("UnknownIssuer"), "{refused}");
    // With its CA named, the handshake passes (the stand-in then hangs up).
    let past = PgConnection::connect_with(&stand_in(&ca.ca_file()))
        .await
        .expect_err("the stand-in speaks no Postgres");
    assert!(!format!("{past}").contains("UnknownIssuer"), "{past}");
}

/// Answers a Postgres SSLRequest with `S`, then TLS with `leaf`, then closes.
fn postgres_tls_stand_in(leaf: &tests_e2e::tls::Leaf) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.cert.clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(leaf.key_der.clone().into()),
        )
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let mut req = [0u8; 8];
                if tcp.read_exact(&mut req).await.is_err() || tcp.write_all(b"S").await.is_err() {
                    return;
                }
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    let _ = tls.shutdown().await;
                }
            });
        }
    });
    port
}
