//! The delivery client ignores the proxy environment variables (a proxy
//! would connect in the dispatcher's place, past the connected-address check)
//! and uses a proxy only when `delivery.proxy` names one.
//!
//! Its own test binary, hence its own process: the variables it sets reach no
//! other test.

mod common;

use common::{chain, Stub};
use webhook_dispatcher::{settings::Layered, ssrf, worker, Settings};

const VARS: [&str; 8] = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

fn settings(extra: &str) -> Settings {
    Settings::from_layers(&["[ssrf]\nallow_loopback = true\n", extra]).expect("settings")
}

fn client(s: &Settings) -> reqwest::Client {
    worker::client(&s.delivery, &s.tls, s.ssrf, ssrf::Lookup::system()).expect("client")
}

#[tokio::test]
async fn proxy_variables_are_ignored_and_only_an_explicit_proxy_is_used() {
    let receiver = Stub::start().await;
    let proxy = Stub::start().await;
    let proxy_url = format!("http://127.0.0.1:{}", proxy.port);
    let target = format!("http://127.0.0.1:{}/hook", receiver.port);
    let direct = settings("");
    let mut sent = 0;
    for var in ["HTTP_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"] {
        for v in VARS {
            std::env::remove_var(v);
        }
        std::env::set_var(var, &proxy_url);
        let r = client(&direct)
            .post(&target)
            .body("{}")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{var}: {}", chain(&e)));
        assert_eq!(r.status(), 200, "{var}");
        sent += 1;
        assert_eq!(
            receiver.heads().len(),
            sent,
            "{var}: the receiver got it directly"
        );
        assert!(
            proxy.heads().is_empty(),
            "{var}: the proxy got {:?}",
            proxy.heads()
        );
    }
    // HTTPS_PROXY concerns https URLs: the client does not go to the proxy.
    for v in VARS {
        std::env::remove_var(v);
    }
    std::env::set_var("HTTPS_PROXY", &proxy_url);
    std::env::set_var("https_proxy", &proxy_url);
    // (To a receiver of its own: the client speaks TLS now, so the attempt
    // reaches it directly, and fails there.)
    let https_sink = Stub::start().await;
    let _ = client(&direct)
        .post(format!("https://127.0.0.1:{}/hook", https_sink.port))
        .body("{}")
        .send()
        .await;
    assert!(
        proxy.heads().is_empty(),
        "HTTPS_PROXY: the proxy got {:?}",
        proxy.heads()
    );

    // An explicit proxy is used, whatever the environment says.
    for v in VARS {
        std::env::remove_var(v);
    }
    std::env::set_var("NO_PROXY", "127.0.0.1,localhost");
    let other = Stub::start().await;
    std::env::set_var("HTTP_PROXY", format!("http://127.0.0.1:{}", other.port));
    let proxied = settings(&format!("[delivery]\nproxy = {proxy_url:?}\n"));
    let r = client(&proxied)
        .post(&target)
        .body("{}")
        .send()
        .await
        .unwrap_or_else(|e| panic!("explicit proxy: {}", chain(&e)));
    assert_eq!(r.status(), 200);
    let heads = proxy.heads();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(
        heads[0].starts_with(&format!("POST {target} HTTP/1.1")),
        "{heads:?}"
    );
    assert_eq!(receiver.heads().len(), sent, "nothing went direct");
    assert!(other.heads().is_empty());
}
