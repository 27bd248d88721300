//! The documented schema and the server agree on the edge values where they
//! once disagreed (issue 32): for each value, the schema in
//! proto-docs/openapi.yaml (read by `scripts/openapi_check.sh --validate`,
//! JSON Schema 2020-12 as OpenAPI 3.1 reads it) and the server's answer to the
//! same value must say the same thing: valid and 2xx, or invalid and 400.

use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};
use tests_e2e::TestStack;

/// Whether `value` (JSON text) is valid against the schema at `pointer` in
/// proto-docs/openapi.yaml.
fn schema_says_valid(pointer: &str, value: &str) -> bool {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/openapi_check.sh");
    let mut child = Command::new(script)
        .args(["--validate", pointer])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("scripts/openapi_check.sh starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(value.as_bytes())
        .expect("the value written");
    let out = child.wait_with_output().expect("openapi_check.sh ends");
    let verdict = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        out.status.success(),
        "openapi_check.sh --validate {pointer}: {verdict}"
    );
    match verdict.as_str() {
        "valid" => true,
        "invalid" => false,
        other => panic!("openapi_check.sh --validate {pointer} said {other:?}"),
    }
}

/// One value, sent as the body (`body` JSON text) of `method path` on the core
/// host.
async fn server_status(s: &TestStack, token: &str, method: &str, path: &str, body: &str) -> u16 {
    let mut req = s
        .http
        .request(
            method.parse().expect("a method"),
            format!("{}{path}", s.core()),
        )
        .bearer_auth(token);
    if !body.is_empty() {
        req = req
            .header("content-type", "application/json")
            .body(body.to_owned());
    }
    req.send().await.expect("send").status().as_u16()
}

fn agree(what: &str, valid: bool, status: u16) {
    let server_valid = match status {
        200..=299 => true,
        400 => false,
        other => panic!("{what}: the server answered {other}, neither 2xx nor 400"),
    };
    assert_eq!(
        valid,
        server_valid,
        "{what}: the schema says {}, the server answered {status}",
        if valid { "valid" } else { "invalid" }
    );
}

#[tokio::test]
async fn the_schema_and_the_server_agree_on_the_edge_values() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let org = s.create_org(&staff, "Agreement", "TR").await;
    assert_eq!(org.status, 201, "{:?}", org.body);
    let org = org.body["id"].as_str().expect("an org id").to_owned();

    // An empty cursor (`?cursor=`): the first page.
    let projects = format!("/v1/organizations/{org}/projects?cursor=");
    agree(
        "GET projects?cursor=",
        schema_says_valid("/components/parameters/BillingCursor/schema", "\"\""),
        server_status(&s, &staff, "GET", &projects, "").await,
    );

    // A timezone of "": never a zone.
    for body in [
        json!({"timezone": ""}),
        json!({"timezone": "Europe/Istanbul"}),
    ] {
        let text = body.to_string();
        agree(
            &format!("PATCH /v1/profile {text}"),
            schema_says_valid("/components/schemas/ProfilePatch", &text),
            server_status(&s, &staff, "PATCH", "/v1/profile", &text).await,
        );
    }

    // soul_md one character too long, written as JSON escapes (12 bytes a
    // character): the rule's 400, not the body limit's 413.
    let soul = "/paths/~1v1~1memory~1soul/patch/requestBody/content/application~1json/schema";
    for n in [20_001, 20_000] {
        let text = format!("{{\"soul_md\":\"{}\"}}", "\\ud83d\\ude00".repeat(n));
        agree(
            &format!("PATCH /v1/memory/soul with {n} escaped characters"),
            schema_says_valid(soul, &text),
            server_status(&s, &staff, "PATCH", "/v1/memory/soul", &text).await,
        );
    }

    // Staff KYC decisions: a body that is JSON but not an object. The wrongly
    // typed ones go first: each would decide the pending submission if the
    // server took it.
    let submission = s
        .post(
            &format!("/v1/organizations/{org}/kyc"),
            Some(&staff),
            json!({"fields": {"company_name": "Agreement AS", "tax_id": "123"},
                   "address": {"line1": "Main 1", "city": "Ankara", "postal_code": "06000", "country": "TR"},
                   "notice_acked": true}),
        )
        .await;
    assert_eq!(submission.status, 201, "{:?}", submission.body);
    let id = submission.body["id"].as_str().expect("a submission id");
    for action in ["approve", "reject"] {
        for text in ["null", "[]", "\"approve\"", "{\"notes\": 5}"] {
            agree(
                &format!("POST /v1/admin/kyc/{{id}}/{action} {text}"),
                schema_says_valid("/components/schemas/KycDecision", text),
                server_status(
                    &s,
                    &staff,
                    "POST",
                    &format!("/v1/admin/kyc/{id}/{action}"),
                    text,
                )
                .await,
            );
        }
    }
    let text = Value::Object(Default::default()).to_string();
    agree(
        "POST /v1/admin/kyc/{id}/approve {}",
        schema_says_valid("/components/schemas/KycDecision", &text),
        server_status(
            &s,
            &staff,
            "POST",
            &format!("/v1/admin/kyc/{id}/approve"),
            &text,
        )
        .await,
    );
}
