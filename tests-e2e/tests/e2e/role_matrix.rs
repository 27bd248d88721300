//! The capability table, cell by cell, through the gateway.

use serde_json::{json, Value};
use tests_e2e::TestStack;

const WHO: [&str; 7] = [
    "owner",
    "manager",
    "finance",
    "developer",
    "visitor",
    "outsider",
    "staff",
];

struct Case {
    method: &'static str,
    path: &'static str,
    body: Option<Value>,
    /// Expected status for each of WHO, in order.
    expect: [u16; 7],
}

#[tokio::test]
async fn every_role_gets_exactly_what_the_table_allows() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("matrix-owner@example.com").await;
    let mut tokens = vec![owner.clone()];
    for role in ["manager", "finance", "developer", "visitor"] {
        tokens.push(s.member(&owner, &org, role).await);
    }
    tokens.push(s.sign_in("outsider@example.com").await);
    tokens.push(s.sign_in("staff@example.com").await);
    let unknown_key = uuid::Uuid::new_v4();

    // Staff read what a visitor reads (audited, tests staff_read.rs); the
    // rest stays the explicit admin routes.
    //                                                   own  man  fin  dev  vis  out  staff
    let cases = [
        Case {
            method: "GET",
            path: "",
            body: None,
            expect: [200, 200, 200, 200, 200, 404, 200],
        },
        Case {
            method: "GET",
            path: "/wallet",
            body: None,
            expect: [200, 403, 200, 403, 403, 404, 200],
        },
        Case {
            method: "GET",
            path: "/wallet/transactions",
            body: None,
            expect: [200, 403, 200, 403, 403, 404, 200],
        },
        Case {
            method: "POST",
            path: "/wallet/credit",
            body: Some(json!({"amount_minor": 100})),
            expect: [403, 403, 403, 403, 403, 403, 200],
        },
        Case {
            method: "GET",
            path: "/tokens",
            body: None,
            expect: [200, 200, 200, 200, 200, 404, 200],
        },
        Case {
            method: "POST",
            path: "/tokens/grant",
            body: Some(json!({"amount": 5})),
            expect: [403, 403, 403, 403, 403, 403, 200],
        },
        Case {
            method: "GET",
            path: "/members",
            body: None,
            expect: [200, 200, 200, 200, 200, 404, 200],
        },
        Case {
            method: "POST",
            path: "/members",
            body: Some(json!({"email": "added@example.com", "role": "visitor"})),
            expect: [200, 200, 403, 403, 403, 404, 404],
        },
        Case {
            method: "GET",
            path: "/api-keys",
            body: None,
            expect: [200, 200, 403, 403, 403, 404, 404],
        },
        Case {
            method: "POST",
            path: "/api-keys",
            body: Some(json!({"name": "k"})),
            expect: [201, 201, 403, 403, 403, 404, 404],
        },
        Case {
            method: "DELETE",
            path: "/api-keys/UNKNOWN",
            body: None,
            expect: [404, 404, 403, 403, 403, 404, 404],
        },
    ];
    let mut failures = Vec::new();
    for c in &cases {
        for (i, who) in WHO.iter().enumerate() {
            let path = format!(
                "/v1/organizations/{org}{}",
                c.path.replace("UNKNOWN", &unknown_key.to_string())
            );
            let r = s
                .call(
                    c.method,
                    &format!("{}{path}", s.core()),
                    Some(&tokens[i]),
                    c.body.clone(),
                    &[],
                )
                .await;
            if r.status != c.expect[i] {
                failures.push(format!(
                    "{who} {} {}: got {} want {} {:?}",
                    c.method, c.path, r.status, c.expect[i], r.body
                ));
            }
            if r.status == 403 {
                let e = r.error();
                assert!(
                    e.starts_with("insufficient role: requires") || e == "staff only",
                    "{e}"
                );
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // A refused write changed nothing: the state is exactly what the allowed
    // writes made (one staff credit, one staff grant, one member added, a
    // key each for owner and manager).
    let read = |path: String| {
        let (s, owner) = (&s, &owner);
        async move {
            let r = s.get(&path, Some(owner)).await;
            assert_eq!(r.status, 200, "{path}: {:?}", r.body);
            r.body
        }
    };
    let base = format!("/v1/organizations/{org}");
    assert_eq!(read(format!("{base}/wallet")).await["balance_minor"], 100);
    let txs = read(format!("{base}/wallet/transactions")).await;
    assert_eq!(txs.as_array().map(Vec::len), Some(1), "{txs:?}");
    assert_eq!(read(format!("{base}/tokens")).await["balance"], 5);
    let keys = read(format!("{base}/api-keys")).await;
    assert_eq!(keys.as_array().map(Vec::len), Some(2), "{keys:?}");
    let members = read(format!("{base}/members")).await;
    let mut emails: Vec<&str> = members
        .as_array()
        .expect("a member list")
        .iter()
        .map(|m| m["email"].as_str().expect("an email"))
        .collect();
    emails.sort_unstable();
    assert_eq!(emails.len(), 6, "{members:?}");
    assert!(emails.contains(&"added@example.com"), "{emails:?}");
}

#[tokio::test]
async fn a_403_names_the_role_needed() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("o@example.com").await;
    let dev = s.member(&owner, &org, "developer").await;
    let r = s
        .get(&format!("/v1/organizations/{org}/wallet"), Some(&dev))
        .await;
    assert_eq!(
        (r.status, r.error()),
        (403, "insufficient role: requires owner or finance")
    );
    let r = s
        .get(&format!("/v1/organizations/{org}/api-keys"), Some(&dev))
        .await;
    assert_eq!(
        (r.status, r.error()),
        (403, "insufficient role: requires owner or manager")
    );
    let r = s.credit(&owner, &org, 1).await;
    assert_eq!((r.status, r.error()), (403, "staff only"));
}
