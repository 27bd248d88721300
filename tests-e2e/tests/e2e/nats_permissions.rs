//! NATS as production runs it: a nats-server of the test's own with the
//! authorization the chart ships (every service its own user, allowed only
//! its own subjects; hub-admin manages the streams), each password given to
//! the server through its environment. A service publishes and consumes its
//! own events; server-product cannot forge another service's event (through
//! JetStream or plain NATS), read another service's consumer or delete a
//! stream; and the whole stack works under those permissions.

use async_nats::jetstream;
use event_contracts::{
    product_subject, CredentialRevoked, Event, IdentityChanged, Naming, SERVER_CREATED,
};
use serde_json::json;
use service_kit::{
    nats::{self, Durable},
    nats_access::ADMIN_USER,
    settings::NatsSettings,
};
use std::{sync::Arc, time::Duration};
use tests_e2e::Json;
use tests_e2e::{eventually, nats_server::AuthorizedNats, StackOptions, TestStack};
use tokio_util::sync::CancellationToken;

/// `user`'s JetStream context (short request timeout: a refused request is
/// never answered).
async fn js_of(n: &AuthorizedNats, user: &str) -> (async_nats::Client, jetstream::Context) {
    let client = nats::connect(&n.settings(user), "nats-permissions-test")
        .await
        .unwrap_or_else(|e| panic!("{user} connects: {e:#}"));
    let mut js = jetstream::new(client.clone());
    js.set_timeout(Duration::from_secs(2));
    (client, js)
}

/// How many messages the stream `base` holds (asked as the admin).
async fn messages(admin: &jetstream::Context, naming: &Naming, base: &str) -> u64 {
    let mut s = admin
        .get_stream(naming.stream(base))
        .await
        .unwrap_or_else(|e| panic!("stream {base}: {e}"));
    s.info().await.expect("stream info").state.messages
}

/// A service's declared consumers (its description in crates/stack).
fn consumer_of(user: &str) -> Durable {
    hub_stack::SERVICES
        .iter()
        .find(|e| e.nats.user == user)
        .and_then(|e| e.nats.consumes.first().copied())
        .unwrap_or_else(|| panic!("{user} has no consumer"))
}

/// Try a JetStream publish; true when the stream acknowledged it.
async fn acked(js: &jetstream::Context, subject: String, payload: &'static str) -> bool {
    match js.publish(subject, payload.into()).await {
        Ok(ack) => ack.await.is_ok(),
        Err(_) => false,
    }
}

#[tokio::test]
async fn each_service_publishes_and_consumes_its_own_events_and_nothing_else() {
    let n = AuthorizedNats::start();
    let naming = n.naming.clone();
    let admin_settings = n.settings(ADMIN_USER);
    let (_admin_client, admin) = js_of(&n, ADMIN_USER).await;
    nats::manage_streams(&admin, &admin_settings)
        .await
        .expect("hub-admin creates the streams");

    // Without a password, or with another user's, nobody gets in.
    let mut nobody: NatsSettings = n.settings("server-product");
    nobody.password = None;
    assert!(nats::connect(&nobody, "t").await.is_err(), "no password");

    // server-product publishes its own product event: acknowledged.
    let (sp_client, sp) = js_of(&n, "server-product").await;
    let created = naming.subject(&product_subject(SERVER_CREATED));
    assert!(
        acked(&sp, created.clone(), "{\"id\":\"e1\"}").await,
        "server-product publishes its own event"
    );
    // ... and the dispatcher consumes it with its declared durable consumer.
    let (_wd_client, wd) = js_of(&n, "webhook-dispatcher").await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let fanout = consumer_of("webhook-dispatcher");
    let task = nats::spawn_raw_batch_consumer(
        wd,
        n.settings("webhook-dispatcher"),
        fanout,
        16,
        Duration::from_millis(5),
        cancel.clone(),
        move |msgs| {
            let tx = tx.clone();
            async move {
                for m in msgs {
                    let _ = tx.send(m.subject);
                }
                Ok(())
            }
        },
    );
    let got = tokio::time::timeout(Duration::from_secs(15), rx.recv())
        .await
        .ok()
        .flatten();
    assert_eq!(
        got.as_deref(),
        Some(product_subject(SERVER_CREATED).as_str()),
        "the dispatcher's consumer got the event"
    );

    // server-product cannot forge what identity or the dispatcher emit...
    let core_before = messages(&admin, &naming, "CORE").await;
    for forged in [
        IdentityChanged::SUBJECT,
        CredentialRevoked::SUBJECT,
        "core.v1.audit.recorded.extra",
        "product.v1.webhook.delivered",
    ] {
        assert!(
            !acked(&sp, naming.subject(forged), "{\"forged\":true}").await,
            "server-product published {forged}"
        );
    }
    assert_eq!(
        messages(&admin, &naming, "CORE").await,
        core_before,
        "a forged event reached CORE"
    );
    assert_eq!(
        messages(&admin, &naming, "PRODUCT").await,
        1,
        "a forged event reached PRODUCT"
    );
    // ... nor a dead letter of another service's consumer.
    assert!(
        !acked(&sp, naming.subject("dlq.identity-audit"), "{}").await,
        "server-product wrote identity's dead letters"
    );
    // ... nor through plain NATS to the gateways' invalidation listeners:
    // the gateway's first message is identity's, published after the forgery
    // (which the server had handled by the end of server-product's flush).
    let (gw, _) = js_of(&n, "core-api-gateway").await;
    let mut revoked = gw
        .subscribe(naming.subject(CredentialRevoked::SUBJECT))
        .await
        .expect("the gateway listens to revocations");
    gw.flush().await.expect("flush");
    sp_client
        .publish(naming.subject(CredentialRevoked::SUBJECT), "forged".into())
        .await
        .expect("sent (the server refuses it)");
    sp_client.flush().await.expect("flush");
    let (id_client, _) = js_of(&n, "identity").await;
    id_client
        .publish(naming.subject(CredentialRevoked::SUBJECT), "genuine".into())
        .await
        .expect("identity publishes a revocation");
    id_client.flush().await.expect("flush");
    let first = tokio::time::timeout(
        Duration::from_secs(10),
        futures::StreamExt::next(&mut revoked),
    )
    .await
    .ok()
    .flatten()
    .expect("the gateway got a revocation");
    assert_eq!(&first.payload[..], b"genuine");

    // server-product cannot read another service's events: no consumer on
    // CORE (every audit event), none under the dispatcher's name.
    let core = sp
        .get_stream(naming.stream("CORE"))
        .await
        .expect("stream info is allowed");
    let spy = core
        .create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some(naming.durable("server-product-spy")),
            filter_subject: naming.subject("core.v1.>"),
            ..Default::default()
        })
        .await;
    assert!(spy.is_err(), "server-product made a consumer on CORE");
    let product = sp
        .get_stream(naming.stream("PRODUCT"))
        .await
        .expect("stream info");
    let stolen = product
        .get_consumer::<jetstream::consumer::pull::Config>(&naming.durable(fanout.name))
        .await;
    assert!(
        stolen.is_err(),
        "server-product read the dispatcher's consumer"
    );

    // ... and cannot delete, purge or create a stream.
    assert!(sp.delete_stream(naming.stream("CORE")).await.is_err());
    assert!(sp.delete_stream(naming.stream("PRODUCT")).await.is_err());
    let mut sp_settings = n.settings("server-product");
    sp_settings.stream_max_age_secs = 60;
    assert!(nats::manage_streams(&sp, &sp_settings).await.is_err());
    for base in ["CORE", "PRODUCT", "DLQ"] {
        assert!(
            admin.get_stream(naming.stream(base)).await.is_ok(),
            "{base} is gone"
        );
    }
    assert_eq!(messages(&admin, &naming, "PRODUCT").await, 1);

    cancel.cancel();
    let _ = task.await;
}

#[tokio::test]
async fn the_whole_stack_works_with_every_service_as_its_own_nats_user() {
    let n = Arc::new(AuthorizedNats::start());
    let s = TestStack::spawn_with(StackOptions {
        gateways: 2,
        nats: Some(n.clone()),
        ..Default::default()
    })
    .await;
    // A webhook receiver (the dispatcher's consumer and deliveries).
    let delivered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let d = delivered.clone();
    let receiver = tests_e2e::stand_in(move |_, _| {
        d.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        actix_web::HttpResponse::Ok().finish()
    });
    // identity (sign-in, audit), org-billing (org.created), identity's
    // consumers (the owner, the audit), org-billing's (memberships).
    let (owner, org) = s.org_with_owner("nats-users@example.com").await;
    // webhook-dispatcher (its audit event), server-product (product events,
    // audit), the dispatcher's consumer (the deliveries).
    let ep = crate::servers::p_call(
        &s,
        "POST",
        "/v1/webhooks",
        Some(&owner),
        Some(json!({"org_id": org, "url": format!("{receiver}/hook")})),
    )
    .await;
    assert_eq!(ep.status, 201, "{:?}", ep.body);
    let r = crate::servers::order(&s, &owner, &org, "vps-small", "nats-users").await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let server = crate::servers::sid(&r);
    crate::servers::wait_for(&s, &owner, &server, "active").await;
    let arrived = eventually(Duration::from_secs(20), || async {
        (delivered.load(std::sync::atomic::Ordering::SeqCst) >= 2).then_some(())
    })
    .await;
    assert!(
        arrived.is_some(),
        "server.created and server.active were delivered"
    );
    // kyc (kyc.changed, audit) and org-billing's consumer of it.
    let kyc = s
        .post(
            &format!("/v1/organizations/{org}/kyc"),
            Some(&owner),
            json!({"fields": {"company_name": "Acme", "tax_id": "TX-1"},
                   "address": {"line1": "Main 1", "city": "Ankara", "postal_code": "06000",
                               "country": "TR"}, "notice_acked": true}),
        )
        .await;
    assert_eq!(kyc.status, 201, "{:?}", kyc.body);
    // server-product's usage event and org-billing's consumer of it (a charge).
    let ended = crate::servers::p_call(
        &s,
        "POST",
        &format!("/v1/servers/{server}/terminate"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(ended.status, 200, "{:?}", ended.body);
    let charged = eventually(Duration::from_secs(20), || async {
        let n: i64 = sqlx::query_scalar!(
            r#"SELECT count(*) AS "n!" FROM org_billing.charges WHERE org_id = $1 AND source = 'usage'"#,
            uuid::Uuid::parse_str(&org).ok()?,
        )
        .fetch_one(&s.db)
        .await
        .ok()?;
        (n == 1).then_some(())
    })
    .await;
    assert!(charged.is_some(), "the usage was not charged");

    // Every consumer handled everything, every outbox was published.
    for e in hub_stack::SERVICES {
        for c in e.nats.consumes {
            s.consumer_caught_up(nats::stream_for(c.subject), c.name)
                .await;
        }
    }
    let pending = eventually(Duration::from_secs(20), || async {
        let rows: Vec<(String, i64)> = sqlx::query!(
            r#"SELECT 'identity' AS "schema!", count(*) AS "n!" FROM identity.outbox
             UNION ALL SELECT 'org_billing', count(*) FROM org_billing.outbox
             UNION ALL SELECT 'kyc', count(*) FROM kyc.outbox
             UNION ALL SELECT 'server_product', count(*) FROM server_product.outbox
             UNION ALL SELECT 'webhook_dispatcher', count(*) FROM webhook_dispatcher.outbox
             UNION ALL SELECT 'agent', count(*) FROM agent.outbox"#,
        )
        .fetch_all(&s.db)
        .await
        .ok()?
        .into_iter()
        .map(|r| (r.schema, r.n))
        .collect();
        rows.iter().all(|(_, n)| *n == 0).then_some(rows)
    })
    .await;
    assert!(pending.is_some(), "an outbox was not published");
    // The owner's audit (identity's consumer of every service's events).
    let audit = s.get("/v1/audit/me", Some(&owner)).await;
    let rows = audit.array("");
    let actions: Vec<&str> = rows.iter().map(|e| e.text("action")).collect();
    for want in [
        "org.created",
        "webhook.created",
        "server.ordered",
        "kyc.submitted",
    ] {
        assert!(actions.contains(&want), "{want} not in {actions:?}");
    }

    // The gateways' listeners: a logout through the first gateway reaches
    // the second one's cache over NATS.
    let second = s.gateways[1].core.clone();
    let me = |base: String| {
        let s = &s;
        let owner = owner.clone();
        async move {
            s.call(
                "GET",
                &format!("{base}/v1/auth/me"),
                Some(&owner),
                None,
                &[],
            )
            .await
            .status
        }
    };
    assert_eq!(
        me(second.clone()).await,
        200,
        "cached at the second gateway"
    );
    let out = s.post("/v1/auth/logout", Some(&owner), json!({})).await;
    assert_eq!(out.status, 200, "{:?}", out.body);
    let refused = eventually(Duration::from_secs(10), || async {
        (me(second.clone()).await == 401).then_some(())
    })
    .await;
    assert!(
        refused.is_some(),
        "the second gateway still believes the session"
    );
}
