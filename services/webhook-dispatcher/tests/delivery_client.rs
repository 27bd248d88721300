//! The delivery client connects only to addresses the SSRF guard allows: a
//! name is resolved through the guard, which drops refused addresses before
//! any connection (DNS rebinding cannot reach an internal address).

mod common;

use common::{chain, Stub};
use std::{io, net::IpAddr};
use webhook_dispatcher::{settings::Layered, ssrf, worker, Settings};

/// A resolver answering `rowN.test` with the N-th row's example, and
/// `mixed.test` with every refused example plus 127.0.0.1.
fn lookup() -> ssrf::Lookup {
    ssrf::Lookup::new(|host| {
        Box::pin(async move {
            let ip = |s: &str| s.parse::<IpAddr>().map_err(io::Error::other);
            if host == "mixed.test" {
                let mut all = Vec::new();
                for r in ssrf::TABLE
                    .iter()
                    .filter(|r| r.reachable != ssrf::Reachable::Yes)
                {
                    if r.rule != ssrf::Rule::Loopback {
                        all.push(ip(r.example)?);
                    }
                }
                all.push(ip("127.0.0.1")?);
                return Ok(all);
            }
            let n: usize = host
                .strip_prefix("row")
                .and_then(|h| h.strip_suffix(".test"))
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such name"))?;
            let r = ssrf::TABLE
                .get(n)
                .ok_or_else(|| io::Error::other("no row"))?;
            Ok(vec![ip(r.example)?])
        })
    })
}

#[tokio::test]
async fn only_allowed_addresses_are_connected_to() {
    let receiver = Stub::start().await;
    let s = Settings::from_layers(&["[ssrf]\nallow_loopback = true\n"]).expect("settings");
    let client = worker::client(&s.delivery, &s.tls, s.ssrf, lookup()).expect("client");
    // Every row that is not globally reachable (loopback aside, allowed here):
    // refused before connecting, on the port where a receiver listens.
    for (n, r) in ssrf::TABLE.iter().enumerate() {
        if r.reachable == ssrf::Reachable::Yes || r.rule == ssrf::Rule::Loopback {
            continue;
        }
        let url = format!("http://row{n}.test:{}/hook", receiver.port);
        let e = client
            .post(&url)
            .body("{}")
            .send()
            .await
            .expect_err(&format!("{} ({}) was connected to", r.example, r.net));
        assert!(
            chain(&e).contains("resolves only to blocked addresses"),
            "{} ({}): {}",
            r.example,
            r.net,
            chain(&e)
        );
    }
    assert!(receiver.heads().is_empty());
    // A name with refused addresses and one allowed: only the allowed one.
    let r = client
        .post(format!("http://mixed.test:{}/hook", receiver.port))
        .body("{}")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(r.status(), 200);
    assert_eq!(receiver.heads().len(), 1);
    // Loopback itself is refused without `allow_loopback`.
    let strict = Settings::from_layers(&[]).expect("settings");
    let client =
        worker::client(&strict.delivery, &strict.tls, strict.ssrf, lookup()).expect("client");
    let e = client
        .post(format!("http://mixed.test:{}/hook", receiver.port))
        .send()
        .await
        .expect_err("refused");
    assert!(chain(&e).contains("blocked"), "{}", chain(&e));
    assert_eq!(receiver.heads().len(), 1);
}
