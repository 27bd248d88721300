//! The documented contract against the real stack: schemathesis
//! (`scripts/schemathesis.sh`, every check) over proto-docs/openapi.yaml, on
//! a stack of this test's own, with a signed-in staff bearer and ids made
//! beforehand so that the operations on a resource reach one that exists.
//! Which operation gets which id, and what is left out and why:
//! tests-e2e/schemathesis.toml and proto-docs/decisions.md ("A contract that
//! cannot drift").

use crate::servers::{order, p_call, sid};
use serde_json::json;
use tests_e2e::Json;
use tests_e2e::TestStack;

fn id(v: &serde_json::Value, key: &str) -> String {
    let s = v.text(key).to_owned();
    assert!(!s.is_empty(), "no {key} in {v}");
    s
}

/// A pending staff charge of `org`: its id.
async fn charge(s: &TestStack, staff: &str, org: &str) -> String {
    let c = s
        .post(
            &format!("/v1/admin/organizations/{org}/charges"),
            Some(staff),
            json!({"description": "Contract setup", "brand": "Hub", "amount_minor": 10000}),
        )
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    id(&c.body, "id")
}

/// A document (`proformas` or `invoices`) of `org` holding `charge`: its id.
async fn document(s: &TestStack, staff: &str, org: &str, kind: &str, charge: &str) -> String {
    let d = s
        .post(
            &format!("/v1/admin/organizations/{org}/{kind}"),
            Some(staff),
            json!({"charge_ids": [charge]}),
        )
        .await;
    assert_eq!(d.status, 201, "{:?}", d.body);
    id(&d.body, "id")
}

#[tokio::test]
async fn the_api_answers_as_documented() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    // A second session of the same user: the one revokeSession revokes.
    let other = s.sign_in("staff@example.com").await;
    let me = s.get("/v1/auth/me", Some(&staff)).await;
    let sessions = s.get("/v1/auth/sessions", Some(&other)).await;
    let other_session = sessions
        .body
        .as_array()
        .into_iter()
        .flatten()
        .find(|x| x["current"] == json!(true))
        .map(|x| id(x, "id"))
        .expect("the second session");
    let org = s.create_org(&staff, "Contract", "TR").await;
    assert_eq!(org.status, 201, "{:?}", org.body);
    let distributor = id(&org.body, "distributor_entity_id");
    let org = id(&org.body, "id");
    let member = s
        .add_member(&staff, &org, "contract-member@example.com", "developer")
        .await;
    assert_eq!(member.status, 200, "{:?}", member.body);
    let key = s.create_key(&staff, &org, None).await;
    assert_eq!(key.status, 201, "{:?}", key.body);
    let invite = s
        .post(
            &format!("/v1/organizations/{org}/invites"),
            Some(&staff),
            json!({"email": "contract-invitee@example.com", "role": "visitor"}),
        )
        .await;
    assert_eq!(invite.status, 201, "{:?}", invite.body);
    let submission = s
        .post(
            &format!("/v1/organizations/{org}/kyc"),
            Some(&staff),
            json!({"fields": {"company_name": "Contract AS", "tax_id": "123"},
                   "address": {"line1": "Main 1", "city": "Ankara", "postal_code": "06000", "country": "TR"},
                   "notice_acked": true}),
        )
        .await;
    assert_eq!(submission.status, 201, "{:?}", submission.body);
    let server = order(&s, &staff, &org, "vps-small", "contract-api").await;
    assert_eq!(server.status, 201, "{:?}", server.body);
    let manual = order(&s, &staff, &org, "dedicated-gpu", "contract-manual").await;
    assert_eq!(manual.status, 201, "{:?}", manual.body);
    let webhook = p_call(
        &s,
        "POST",
        "/v1/webhooks",
        Some(&staff),
        Some(json!({"org_id": org, "url": "http://127.0.0.1:9/contract"})),
    )
    .await;
    assert_eq!(webhook.status, 201, "{:?}", webhook.body);
    let conversation = s
        .post(
            "/v1/agent",
            Some(&staff),
            json!({"message": "show my organizations"}),
        )
        .await;
    assert_eq!(conversation.status, 200, "{:?}", conversation.body);
    let sku = p_call(
        &s,
        "POST",
        "/v1/admin/skus",
        Some(&staff),
        Some(
            json!({"id": "contract-sku", "name": "Contract", "fulfilment": "api",
                    "monthly_price_minor": 100, "currency": "TRY"}),
        ),
    )
    .await;
    assert_eq!(sku.status, 201, "{:?}", sku.body);
    // Billing records: a pending charge (waived by the run), a proforma (converted),
    // an invoice (paid, claimed, updated) and another (voided), each from a charge
    // of its own, two pending payment claims (one approved, one rejected), a wallet
    // with money to pay from, and a billing run.
    let pending_charge = charge(&s, &staff, &org).await;
    let proforma = charge(&s, &staff, &org).await;
    let proforma = document(&s, &staff, &org, "proformas", &proforma).await;
    let invoice = charge(&s, &staff, &org).await;
    let invoice = document(&s, &staff, &org, "invoices", &invoice).await;
    let void_invoice = charge(&s, &staff, &org).await;
    let void_invoice = document(&s, &staff, &org, "invoices", &void_invoice).await;
    let mut claims = Vec::new();
    for reference in ["contract-approve", "contract-reject"] {
        let claim = s
            .post(
                &format!("/v1/organizations/{org}/payment-claims"),
                Some(&staff),
                json!({"amount_minor": 500, "currency": "TRY", "reference": reference,
                       "invoice_id": invoice}),
            )
            .await;
        assert_eq!(claim.status, 201, "{:?}", claim.body);
        claims.push(id(&claim.body, "id"));
    }
    let credit = s
        .post(
            &format!("/v1/organizations/{org}/wallet/credit"),
            Some(&staff),
            json!({"amount_minor": 1_000_000}),
        )
        .await;
    assert_eq!(credit.status, 200, "{:?}", credit.body);
    let run = s
        .post(
            "/v1/admin/billing-runs",
            Some(&staff),
            json!({"period": "2020-01"}),
        )
        .await;
    assert_eq!(run.status, 201, "{:?}", run.body);
    // Accounts: a project, an asset, and an organization of its own for
    // suspendOrganization and reactivateOrganization (so that the others'
    // writes are not refused meanwhile).
    let project = s
        .post(
            &format!("/v1/organizations/{org}/projects"),
            Some(&staff),
            json!({"name": "Contract project"}),
        )
        .await;
    assert_eq!(project.status, 201, "{:?}", project.body);
    let asset = s
        .post(
            &format!("/v1/organizations/{org}/assets"),
            Some(&staff),
            json!({"kind": "link", "name": "Site", "url": "https://example.com/"}),
        )
        .await;
    assert_eq!(asset.status, 201, "{:?}", asset.body);
    let suspended = s.create_org(&staff, "Contract suspension", "TR").await;
    assert_eq!(suspended.status, 201, "{:?}", suspended.body);
    // The knowledge base: a category and an article in it; a proposal.
    let category = s
        .post(
            "/v1/admin/kb/categories",
            Some(&staff),
            json!({"slug": "contract", "title": "Contract"}),
        )
        .await;
    assert_eq!(category.status, 201, "{:?}", category.body);
    let article = s
        .post(
            "/v1/admin/kb/articles",
            Some(&staff),
            json!({"slug": "contract-article", "title": "Contract", "body_md": "# Contract",
                   "status": "published", "category": "contract"}),
        )
        .await;
    assert_eq!(article.status, 201, "{:?}", article.body);
    let proposal = s
        .post(
            "/v1/proposals",
            Some(&staff),
            json!({"title": "Contract", "problem": "A problem.", "proposal": "A proposal."}),
        )
        .await;
    assert_eq!(proposal.status, 201, "{:?}", proposal.body);

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/schemathesis.sh");
    let mut command = std::process::Command::new(script);
    command
        .env("HUB_BASE_URL", s.core())
        .env("HUB_BRAND_BASE_URL", s.product())
        .env("HUB_TOKEN", &staff)
        .env("HUB_ORG_ID", &org)
        .env("HUB_USER_ID", id(&me.body, "user_id"))
        .env("HUB_MEMBER_ID", id(&member.body, "user_id"))
        .env("HUB_KEY_ID", id(&key.body["key"], "id"))
        .env("HUB_INVITE_ID", id(&invite.body, "id"))
        .env("HUB_SESSION_ID", &other_session)
        .env("HUB_SUBMISSION_ID", id(&submission.body, "id"))
        .env("HUB_SERVER_ID", sid(&server))
        .env("HUB_MANUAL_SERVER_ID", sid(&manual))
        .env("HUB_WEBHOOK_ID", id(&webhook.body, "id"))
        .env(
            "HUB_CONVERSATION_ID",
            id(&conversation.body, "conversation_id"),
        )
        .env("HUB_SKU_ID", id(&sku.body, "id"))
        .env("HUB_CHARGE_ID", &pending_charge)
        .env("HUB_PROFORMA_ID", &proforma)
        .env("HUB_INVOICE_ID", &invoice)
        .env("HUB_VOID_INVOICE_ID", &void_invoice)
        .env("HUB_CLAIM_ID", &claims[0])
        .env("HUB_REJECT_CLAIM_ID", &claims[1])
        .env("HUB_RUN_ID", id(&run.body, "id"))
        .env("HUB_DISTRIBUTOR_ID", &distributor)
        .env("HUB_PROJECT_ID", id(&project.body, "id"))
        .env("HUB_ASSET_ID", id(&asset.body, "id"))
        .env("HUB_SUSPEND_ORG_ID", id(&suspended.body, "id"))
        .env("HUB_KB_ARTICLE_ID", id(&article.body, "id"))
        .env("HUB_PROPOSAL_ID", id(&proposal.body, "id"));
    // The stack serves on this runtime meanwhile.
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("the schemathesis thread")
        .expect("running scripts/schemathesis.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "schemathesis found the API answering otherwise than documented (above)"
    );
}
