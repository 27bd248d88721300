//! OAuth clients of the OpenID Provider (issue 37): staff register, list,
//! change and retire them; a confidential client's secret is shown once and
//! kept only as a hash; redirect URIs are checked once, for exact matching.

use serde_json::{json, Value};
use tests_e2e::TestStack;
use uuid::Uuid;

fn client(name: &str) -> Value {
    json!({
        "name": name,
        "kind": "confidential",
        "first_party": true,
        "redirect_uris": ["https://grafana.example.com/login/generic_oauth", "http://127.0.0.1:3000/cb"],
        "post_logout_redirect_uris": ["https://grafana.example.com/"],
        "scopes": ["openid", "email", "profile", "email"],
    })
}

#[tokio::test]
async fn staff_register_change_and_retire_oauth_clients_and_see_a_secret_once() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let (owner, org) = s.org_with_owner("oauth-owner@example.com").await;
    let key = s.create_key(&owner, &org, Some("manager")).await;
    let key = key.text("token").to_owned();
    let path = "/v1/admin/oauth-clients";

    // Staff only.
    for (token, want) in [(Some(&owner), 403), (Some(&key), 403), (None, 401)] {
        let t = token.map(String::as_str);
        assert_eq!(s.post(path, t, client("x")).await.status, want);
        assert_eq!(s.get(path, t).await.status, want);
        let id = Uuid::new_v4();
        assert_eq!(s.delete(&format!("{path}/{id}"), t).await.status, want);
    }

    // Registered: the secret once, the scopes sorted and each once.
    let r = s.post(path, Some(&staff), client("Grafana")).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let id = r.text("id").to_owned();
    let secret = r.text("client_secret").to_owned();
    assert!(
        secret.starts_with("hub_cs_") && secret.len() > 40,
        "{secret}"
    );
    assert_eq!(r.body["scopes"], json!(["email", "openid", "profile"]));
    assert_eq!(r.body["kind"], "confidential");
    assert_eq!(r.body["retired_at"], Value::Null);
    // Kept as its hash only.
    let row = sqlx::query!(
        r#"SELECT secret_hash AS "hash!", kind FROM identity.oauth_clients WHERE id = $1"#,
        Uuid::parse_str(&id).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("the row");
    let (hash, kind) = (row.hash, row.kind);
    assert_eq!(kind, "confidential");
    assert_eq!(hash.len(), 32);
    assert_ne!(hash, secret.as_bytes());
    // Listed, never with its secret.
    let l = s.get(path, Some(&staff)).await;
    assert_eq!(l.status, 200, "{:?}", l.body);
    assert_eq!(l.body[0]["id"], id.as_str());
    assert!(!l.body.to_string().contains(&secret));
    assert!(l.body[0].get("client_secret").is_none());

    // A public client has no secret.
    let mut public = client("CLI");
    public["kind"] = json!("public");
    let p = s.post(path, Some(&staff), public).await;
    assert_eq!(p.status, 201, "{:?}", p.body);
    assert!(p.body.get("client_secret").is_none(), "{:?}", p.body);

    // Bad input: each a 400 naming what is wrong.
    let with = |k: &str, v: Value| {
        let mut c = client("Bad");
        c[k] = v;
        c
    };
    for (body, names) in [
        (
            with("redirect_uris", json!(["http://grafana.example.com/cb"])),
            "loopback",
        ),
        (
            with("redirect_uris", json!(["https://grafana.example.com/cb#x"])),
            "fragment",
        ),
        (
            with("redirect_uris", json!(["https://*.example.com/cb"])),
            "wildcard",
        ),
        (with("redirect_uris", json!(["/cb"])), "absolute"),
        (with("redirect_uris", json!([])), "redirect_uris"),
        (
            with("redirect_uris", json!(vec!["https://a.example.com/cb"; 2])),
            "twice",
        ),
        (with("scopes", json!(["email"])), "openid"),
        (with("scopes", json!(["openid", "admin"])), "admin"),
        (with("kind", json!("trusted")), "kind"),
        (with("name", json!("  ")), "name"),
        (with("secret", json!("mine")), "unknown field"),
    ] {
        let r = s.post(path, Some(&staff), body).await;
        assert_eq!(r.status, 400, "{names}: {:?}", r.body);
        assert!(r.error().contains(names), "{names}: {:?}", r.body);
    }

    // Changed: fields, and a new secret that replaces the old one.
    let one = format!("{path}/{id}");
    let r = s
        .patch(
            &one,
            Some(&staff),
            json!({"name": "Grafana (ops)", "rotate_secret": true}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["name"], "Grafana (ops)");
    let rotated = r.text("client_secret").to_owned();
    assert_ne!(rotated, secret);
    let r = s
        .patch(
            &format!("{path}/{}", p.text("id")),
            Some(&staff),
            json!({"rotate_secret": true}),
        )
        .await;
    assert_eq!(r.status, 400, "a public client: {:?}", r.body);
    assert_eq!(s.patch(&one, Some(&staff), json!({})).await.status, 400);
    let unknown = format!("{path}/{}", Uuid::new_v4());
    assert_eq!(
        s.patch(&unknown, Some(&staff), json!({"name": "x"}))
            .await
            .status,
        404
    );

    // Retired: no more changes; listed with its time.
    assert_eq!(s.delete(&one, Some(&staff)).await.status, 204);
    assert_eq!(s.delete(&one, Some(&staff)).await.status, 404);
    assert_eq!(
        s.patch(&one, Some(&staff), json!({"name": "x"}))
            .await
            .status,
        409
    );
    let l = s.get(path, Some(&staff)).await;
    let listed = l
        .body
        .as_array()
        .expect("a list")
        .iter()
        .find(|c| c["id"] == id.as_str())
        .cloned()
        .expect("still listed");
    assert!(listed["retired_at"].is_string(), "{listed:?}");

    // Audited, never with a secret.
    let log = s.get("/v1/audit/me", Some(&staff)).await;
    let text = log.body.to_string();
    assert!(!text.contains(&secret) && !text.contains(&rotated));
    let subject = format!("oauth_client:{id}");
    let actions: Vec<&str> = log
        .body
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["subject"] == subject.as_str())
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(
        actions,
        [
            "oauth_client.retired",
            "oauth_client.updated",
            "oauth_client.created"
        ]
    );
}
