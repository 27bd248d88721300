//! Outages look like outages: with server-product's Postgres cut (a relay the
//! test controls refuses new connections and breaks the open ones) while
//! clients keep ordering servers on the product host, every answer is 201 or
//! 503 with `Retry-After` and a JSON error, `/readyz` goes false and comes
//! back by itself, every server acknowledged exists, and orders succeed again
//! without a restart.

use crate::servers::{p_call, sid};
use serde_json::json;
use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};
use tests_e2e::{eventually, relay::Relay, StackOptions, TestStack};

const CLIENTS: usize = 4;

#[derive(Default)]
struct Seen {
    /// hostname -> server id of every 201.
    created: BTreeMap<String, String>,
    /// Any answer that is neither a 201 nor a proper 503.
    other: Vec<String>,
    unavailable: usize,
    /// Every answer that is not a 201.
    refused: usize,
}

async fn ready(s: &TestStack) -> u16 {
    s.call(
        "GET",
        &format!("{}/readyz", s.service_url("server_product")),
        None,
        None,
        &[],
    )
    .await
    .status
}

#[tokio::test]
async fn a_postgres_outage_answers_503_with_retry_after_and_recovers_without_restart() {
    let relay = Relay::to_postgres().await.expect("relay");
    let s = Arc::new(
        TestStack::spawn_with(StackOptions {
            database_ports: [("server_product".to_owned(), relay.port())].into(),
            // Orders from every client for seconds on end: neither the order
            // rate limit nor the server cap is what this test is about.
            server_product_toml:
                "[database]\nacquire_timeout_ms = 1000\n[orders]\nrate_per_minute = 0\nmax_servers_per_org = 0\n"
                    .into(),
            ..Default::default()
        })
        .await,
    );
    let (owner, org) = s.org_with_owner("outage@example.com").await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    // 201s counted per phase (0: before the cut, 1: during, 2: after).
    let phase = Arc::new(AtomicUsize::new(0));
    let ok_in_phase: Arc<[AtomicUsize; 3]> = Arc::new(Default::default());
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (s, owner, org, seen, stop, phase, ok_in_phase) = (
                s.clone(),
                owner.clone(),
                org.clone(),
                seen.clone(),
                stop.clone(),
                phase.clone(),
                ok_in_phase.clone(),
            );
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    let hostname = format!("c{c}-n{n}");
                    let p = phase.load(Ordering::SeqCst);
                    let r = p_call(
                        &s,
                        "POST",
                        "/v1/servers",
                        Some(&owner),
                        Some(json!({"org_id": org, "sku_id": "vps-small", "hostname": hostname})),
                    )
                    .await;
                    let retry_after = r
                        .headers
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    let mut seen = seen.lock().expect("seen");
                    if r.status != 201 {
                        seen.refused += 1;
                    }
                    match r.status {
                        201 => {
                            seen.created.insert(hostname, sid(&r));
                            // Counted in the phase it was sent in, and only
                            // if that phase still holds (a cut may land meanwhile).
                            if phase.load(Ordering::SeqCst) == p {
                                ok_in_phase[p].fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        503 if retry_after.as_deref() == Some("5")
                            && r.error() == "service temporarily unavailable" =>
                        {
                            seen.unavailable += 1
                        }
                        _ => seen.other.push(format!(
                            "{hostname}: {} retry-after={retry_after:?} {}",
                            r.status, r.body
                        )),
                    }
                }
            })
        })
        .collect();
    let enough = |p: usize, n: usize| {
        let ok = ok_in_phase.clone();
        eventually(Duration::from_secs(30), move || {
            let ok = ok.clone();
            async move { (ok[p].load(Ordering::SeqCst) >= n).then_some(()) }
        })
    };
    enough(0, 8).await.expect("orders succeed before the cut");
    assert_eq!(ready(&s).await, 200);

    relay.cut();
    phase.store(1, Ordering::SeqCst);
    // Positive markers: readiness went false, and clients were told 503.
    eventually(Duration::from_secs(15), || async {
        (ready(&s).await == 503).then_some(())
    })
    .await
    .expect("/readyz goes false while Postgres is cut");
    eventually(Duration::from_secs(30), || async {
        (seen.lock().expect("seen").refused >= 2 * CLIENTS).then_some(())
    })
    .await
    .expect("clients are refused while Postgres is cut");
    // Keep sending for a while, past the pool's acquire timeout (1 s).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(ready(&s).await, 503, "still cut");

    relay.restore();
    phase.store(2, Ordering::SeqCst);
    eventually(Duration::from_secs(30), || async {
        (ready(&s).await == 200).then_some(())
    })
    .await
    .expect("/readyz comes back by itself");
    enough(2, 2 * CLIENTS)
        .await
        .expect("orders succeed again without a restart");
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.await.expect("client");
    }

    let seen = std::mem::take(&mut *seen.lock().expect("seen"));
    assert!(
        seen.other.is_empty(),
        "answers other than 201 and 503 with Retry-After: {:#?}",
        seen.other
    );
    assert!(seen.unavailable >= 2 * CLIENTS);
    // Nothing acknowledged is lost.
    for (hostname, id) in &seen.created {
        let r = p_call(&s, "GET", &format!("/v1/servers/{id}"), Some(&owner), None).await;
        assert_eq!(r.status, 200, "{hostname} ({id}): {:?}", r.body);
        assert_eq!(r.body["hostname"], hostname.as_str(), "{:?}", r.body);
    }
    let stored: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "v!" FROM server_product.servers WHERE org_id = $1::uuid"#,
        uuid::Uuid::parse_str(&org).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("count");
    assert!(stored >= seen.created.len() as i64, "{stored}");
}
