//! Pooled connections (issue 33): a connection is not pinged before every
//! use, only after `database.ping_if_idle_ms` idle in the pool, and one that
//! died while it waited there is found and replaced before it serves.

use tests_e2e::{StackOptions, TestStack};

#[tokio::test]
async fn connections_ended_while_idle_in_the_pool_are_replaced_before_they_serve() {
    // 0: every connection handed out has been idle long enough to be pinged
    // (the default, 1 s, would need this test to wait that long).
    let s = TestStack::spawn_with(StackOptions {
        identity_toml: "[database]\nping_if_idle_ms = 0\n".into(),
        ..Default::default()
    })
    .await;
    let token = s.sign_in("pool@example.com").await;
    let profile = || s.get("/v1/profile", Some(&token));
    assert_eq!(profile().await.status, 200);
    let killed = s.end_connections("identity").await;
    assert!(killed >= 1, "identity's pool held a connection");
    // Each read takes a connection from the pool: every one that was ended
    // is found dead by its ping and replaced, never handed to a request.
    for _ in 0..10 {
        let again = profile().await;
        assert_eq!(again.status, 200, "{:?}", again.body);
    }
}
