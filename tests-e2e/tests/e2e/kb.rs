//! The knowledge base and platform proposals (agent): staff write articles,
//! anyone reads the published ones without credentials and searches them in
//! English and Turkish; customers file proposals, staff move them.

use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::{eventually, Json, Resp, TestStack};

async fn call(
    s: &TestStack,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> Resp {
    s.call(method, &format!("{}{path}", s.core()), token, body, &[])
        .await
}

/// The slugs of a list of articles, in order.
fn slugs(r: &Resp) -> Vec<String> {
    r.array("")
        .iter()
        .map(|a| a.text("slug").to_owned())
        .collect()
}

/// The actions in `token`'s audit history, once they include every one of `want`.
async fn audited(s: &TestStack, token: &str, want: &[&str]) -> Vec<String> {
    eventually(Duration::from_secs(20), || async {
        let log = s.get("/v1/audit/me", Some(token)).await;
        let actions: Vec<String> = log
            .array("")
            .iter()
            .map(|e| e.text("action").to_owned())
            .collect();
        want.iter()
            .all(|w| actions.iter().any(|a| a == w))
            .then_some(actions)
    })
    .await
    .unwrap_or_else(|| panic!("{want:?} audited"))
}

const ENGLISH: &str = "# Paying by transfer\n\nInvoices are paid by bank transfer. \
                       Restarting your servers never changes an invoice.\n\n<script>alert(1)</script>";
const TURKISH: &str = "Faturalarınızı banka havalesiyle ödeyebilirsiniz. \
                       Sunucularınızı kontrol panelinden yeniden başlatın.";

#[tokio::test]
async fn anyone_reads_and_searches_published_articles_and_only_staff_see_drafts() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let customer = s.sign_in("kb-reader@example.com").await;

    // Staff only; a session or nothing at all is not enough.
    let category = json!({"slug": "billing", "title": "Billing"});
    let article = json!({"slug": "x", "title": "X", "body_md": "x"});
    for (method, path, body) in [
        ("POST", "/v1/admin/kb/categories", Some(category.clone())),
        ("POST", "/v1/admin/kb/articles", Some(article.clone())),
        ("GET", "/v1/admin/kb/articles", None),
        (
            "PATCH",
            "/v1/admin/kb/articles/0190a0a0-0000-7000-8000-000000000000",
            Some(json!({"status": "published"})),
        ),
        (
            "DELETE",
            "/v1/admin/kb/articles/0190a0a0-0000-7000-8000-000000000000",
            None,
        ),
    ] {
        let r = call(&s, method, path, Some(&customer), body.clone()).await;
        assert_eq!(
            (r.status, r.error()),
            (403, "staff only"),
            "{method} {path}"
        );
        let r = call(&s, method, path, None, body).await;
        assert_eq!(r.status, 401, "{method} {path}: {:?}", r.body);
    }

    // Categories: 201, a taken slug 409, a bad one 400.
    let r = s
        .post("/v1/admin/kb/categories", Some(&staff), category.clone())
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(
        (r.text("slug"), r.text("title"), r.int("article_count")),
        ("billing", "Billing", 0)
    );
    let r = s
        .post("/v1/admin/kb/categories", Some(&staff), category)
        .await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(r.error().contains("slug billing exists"), "{}", r.error());
    for (body, says) in [
        (json!({"slug": "Billing", "title": "B"}), "slug must be"),
        (json!({"slug": "a--b", "title": "B"}), "slug must be"),
        (json!({"slug": "ok", "title": " "}), "title must be"),
        (
            json!({"slug": "ok", "title": "B", "x": 1}),
            "unknown field `x`",
        ),
    ] {
        let r = s.post("/v1/admin/kb/categories", Some(&staff), body).await;
        assert_eq!(r.status, 400, "{says}: {:?}", r.body);
        assert!(r.error().contains(says), "{says}: {}", r.error());
    }

    // Articles: an English and a Turkish one published, one draft.
    let r = s
        .post(
            "/v1/admin/kb/articles",
            Some(&staff),
            json!({"slug": "paying-by-transfer", "title": "Paying by transfer", "body_md": ENGLISH,
                   "status": "published", "category": "billing"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(
        (r.text("status"), r.text("category"), r.text("body_md")),
        ("published", "billing", ENGLISH)
    );
    let english_id = r.text("id").to_owned();
    let r = s
        .post(
            "/v1/admin/kb/articles",
            Some(&staff),
            json!({"slug": "fatura-odeme", "title": "Fatura ödeme", "body_md": TURKISH,
                   "status": "published"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["category"], Value::Null);
    let r = s
        .post(
            "/v1/admin/kb/articles",
            Some(&staff),
            json!({"slug": "coming-soon", "title": "Coming soon",
                   "body_md": "Invoices will soon be paid by card.", "category": "billing"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.text("status"), "draft");
    let draft_id = r.text("id").to_owned();

    // A taken slug is 409; bad input 400, nothing created.
    let r = s
        .post(
            "/v1/admin/kb/articles",
            Some(&staff),
            json!({"slug": "coming-soon", "title": "Again", "body_md": ""}),
        )
        .await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(
        r.error().contains("slug coming-soon exists"),
        "{}",
        r.error()
    );
    for (body, says) in [
        (
            json!({"slug": "big", "title": "Big", "body_md": "a".repeat(102_401)}),
            "body_md must be at most 102400 bytes",
        ),
        (
            json!({"slug": "nul", "title": "Nul", "body_md": "a\u{0}b"}),
            "body_md must not contain NUL",
        ),
        (
            json!({"slug": "lost", "title": "Lost", "body_md": "", "category": "nowhere"}),
            "category nowhere does not exist",
        ),
        (
            json!({"slug": "st", "title": "St", "body_md": "", "status": "live"}),
            "article status must be one of draft, published",
        ),
        (
            json!({"slug": "no-body", "title": "T"}),
            "missing field `body_md`",
        ),
        (
            json!({"slug": "Bad Slug", "title": "T", "body_md": ""}),
            "slug must be",
        ),
    ] {
        let r = s.post("/v1/admin/kb/articles", Some(&staff), body).await;
        assert_eq!(r.status, 400, "{says}: {:?}", r.body);
        assert!(r.error().contains(says), "{says}: {}", r.error());
    }

    // Anyone, without credentials: the published articles only.
    let r = s.get("/v1/kb/articles", None).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let mut listed = slugs(&r);
    listed.sort();
    assert_eq!(listed, ["fatura-odeme", "paying-by-transfer"]);
    let r = s.get("/v1/kb/articles/paying-by-transfer", None).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        (r.text("id"), r.text("body_md")),
        (english_id.as_str(), ENGLISH),
        "stored and served as written"
    );
    let r = s.get("/v1/kb/articles/coming-soon", None).await;
    assert_eq!(r.status, 404, "a draft is not there: {:?}", r.body);
    assert_eq!(
        s.get("/v1/kb/articles/no-such-article", None).await.status,
        404
    );
    // A session changes nothing: the public route is public.
    assert_eq!(
        s.get("/v1/kb/articles/coming-soon", Some(&customer))
            .await
            .status,
        404
    );
    let r = s.get("/v1/kb/categories", None).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        (
            r.text("/0/slug"),
            r.int("/0/article_count"),
            r.array("").len()
        ),
        ("billing", 1, 1),
        "the draft is not counted"
    );
    let r = s.get("/v1/kb/articles?category=billing", None).await;
    assert_eq!(slugs(&r), ["paying-by-transfer"]);
    // Through the product host's core API too.
    let r = s
        .call(
            "GET",
            &format!("{}/core-api/v1/kb/articles/fatura-odeme", s.product()),
            None,
            None,
            &[],
        )
        .await;
    assert_eq!((r.status, r.text("slug")), (200, "fatura-odeme"));

    // Search: by a word of the body, stemmed, in either language; drafts never.
    for (q, want) in [
        ("invoice", vec!["paying-by-transfer"]),
        ("restart server", vec!["paying-by-transfer"]),
        ("faturanızı", vec!["fatura-odeme"]),
        ("sunucular", vec!["fatura-odeme"]),
        ("card", vec![]),
    ] {
        let r = s.get(&format!("/v1/kb/articles?q={q}"), None).await;
        assert_eq!(r.status, 200, "{q}: {:?}", r.body);
        assert_eq!(slugs(&r), want, "{q}");
    }
    let r = s
        .get("/v1/kb/articles?q=fatura&category=billing", None)
        .await;
    assert_eq!(
        slugs(&r),
        Vec::<String>::new(),
        "the category narrows a search"
    );

    // The assistant answers from the same published articles (rule engine).
    for (message, finds, never) in [
        (
            "search the knowledge base for invoices",
            "Paying by transfer (/v1/kb/articles/paying-by-transfer)",
            "Coming soon",
        ),
        (
            "search help for faturanızı",
            "Fatura ödeme (/v1/kb/articles/fatura-odeme)",
            "Paying by transfer",
        ),
    ] {
        let r = s
            .post("/v1/agent", Some(&customer), json!({"message": message}))
            .await;
        assert_eq!(r.status, 200, "{message}: {:?}", r.body);
        let reply = r.text("reply");
        assert!(reply.contains(finds), "{message}: {reply}");
        assert!(!reply.contains(never), "{message}: {reply}");
    }
    let r = s
        .post(
            "/v1/agent",
            Some(&customer),
            json!({"message": "search the knowledge base for card"}),
        )
        .await;
    assert!(
        r.text("reply").contains("no published article"),
        "{:?}",
        r.body
    );

    // Bad parameters: 400.
    for (path, says) in [
        ("/v1/kb/articles?limit=0", "limit must be between 1 and 50"),
        ("/v1/kb/articles?limit=51", "limit must be between 1 and 50"),
        (
            "/v1/kb/articles?cursor=nope",
            "cursor is not one this API returned",
        ),
        (
            "/v1/kb/articles?q=invoice&cursor=nope",
            "cursor is not one this API returned",
        ),
        ("/v1/kb/articles?category=Bad_Slug", "category must be"),
        (
            &format!("/v1/kb/articles?q={}", "a".repeat(201)),
            "q must be at most 200",
        ),
    ] {
        let r = s.get(path, None).await;
        assert_eq!(r.status, 400, "{path}: {:?}", r.body);
        assert!(r.error().contains(says), "{path}: {}", r.error());
    }

    // Pages: one article each, the cursor leads to the next; search pages too.
    for first in [
        "/v1/kb/articles?limit=1",
        "/v1/kb/articles?q=bank%20or%20banka&limit=1",
    ] {
        let one = s.get(first, None).await;
        assert_eq!(
            (one.status, one.array("").len()),
            (200, 1),
            "{first}: {:?}",
            one.body
        );
        let cursor = one
            .headers
            .get("x-next-cursor")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("{first}: a next page"))
            .to_owned();
        let two = s.get(&format!("{first}&cursor={cursor}"), None).await;
        assert_eq!(two.status, 200, "{first}: {:?}", two.body);
        let mut both = [slugs(&one), slugs(&two)].concat();
        both.sort();
        assert_eq!(both, ["fatura-odeme", "paying-by-transfer"], "{first}");
        assert!(
            two.headers.get("x-next-cursor").is_none(),
            "{first}: two pages"
        );
    }

    // Staff see drafts in their own list.
    let r = s.get("/v1/admin/kb/articles", Some(&staff)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let mut all = slugs(&r);
    all.sort();
    assert_eq!(all, ["coming-soon", "fatura-odeme", "paying-by-transfer"]);

    // Publish, edit, unpublish.
    let path = format!("/v1/admin/kb/articles/{draft_id}");
    let r = s
        .patch(&path, Some(&staff), json!({"status": "published"}))
        .await;
    assert_eq!(
        (r.status, r.text("status")),
        (200, "published"),
        "{:?}",
        r.body
    );
    let r = s.get("/v1/kb/articles/coming-soon", None).await;
    assert_eq!(r.status, 200, "published: {:?}", r.body);
    let r = s.get("/v1/kb/articles?q=card", None).await;
    assert_eq!(slugs(&r), ["coming-soon"], "search follows publishing");
    let r = s
        .patch(
            &path,
            Some(&staff),
            json!({"title": "Paying by card", "slug": "paying-by-card", "category": null}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        (r.text("slug"), r.text("title"), &r.body["category"]),
        ("paying-by-card", "Paying by card", &Value::Null)
    );
    let r = s
        .patch(&path, Some(&staff), json!({"status": "draft"}))
        .await;
    assert_eq!((r.status, r.text("status")), (200, "draft"));
    assert_eq!(
        s.get("/v1/kb/articles/paying-by-card", None).await.status,
        404
    );
    for (body, status, says) in [
        (json!({}), 400, "nothing to change"),
        (
            json!({"slug": null}),
            400,
            "invalid type: null, expected a string",
        ),
        (
            json!({"slug": "paying-by-transfer"}),
            409,
            "slug paying-by-transfer exists",
        ),
        (
            json!({"status": "hidden"}),
            400,
            "article status must be one of",
        ),
        (
            json!({"category": "nowhere"}),
            400,
            "category nowhere does not exist",
        ),
    ] {
        let r = s.patch(&path, Some(&staff), body).await;
        assert_eq!(r.status, status, "{says}: {:?}", r.body);
        assert!(r.error().contains(says), "{says}: {}", r.error());
    }
    let missing = "/v1/admin/kb/articles/0190a0a0-0000-7000-8000-000000000000";
    let r = s
        .patch(missing, Some(&staff), json!({"status": "published"}))
        .await;
    assert_eq!(r.status, 404, "{:?}", r.body);

    // Delete: gone for everyone; a second delete is 404.
    let r = s
        .delete(&format!("/v1/admin/kb/articles/{english_id}"), Some(&staff))
        .await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    assert_eq!(
        s.get("/v1/kb/articles/paying-by-transfer", None)
            .await
            .status,
        404
    );
    let r = s
        .delete(&format!("/v1/admin/kb/articles/{english_id}"), Some(&staff))
        .await;
    assert_eq!(r.status, 404, "{:?}", r.body);

    // Every staff write is in the staff member's history.
    audited(
        &s,
        &staff,
        &[
            "kb.category_created",
            "kb.article_created",
            "kb.article_updated",
            "kb.article_deleted",
        ],
    )
    .await;
}

#[tokio::test]
async fn proposals_are_filed_with_a_session_seen_by_their_filer_and_moved_by_staff() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let (alice, org) = s.org_with_owner("alice-proposes@example.com").await;
    let bob = s.sign_in("bob-proposes@example.com").await;
    let key = s.create_key(&alice, &org, Some("manager")).await;
    let key = key.text("token").to_owned();
    let new = |title: &str| json!({"title": title, "problem": "It is slow.", "proposal": "Make it fast."});

    // A session is needed: nothing is 401, an API key too.
    assert_eq!(s.post("/v1/proposals", None, new("x")).await.status, 401);
    assert_eq!(s.get("/v1/proposals", None).await.status, 401);
    let r = s.post("/v1/proposals", Some(&key), new("x")).await;
    assert_eq!(r.status, 401, "{:?}", r.body);
    assert!(r.error().contains("needs a session token"), "{}", r.error());

    // Filed: 201, a draft; the filer's id is for staff only.
    let r = s
        .post("/v1/proposals", Some(&alice), new("Faster consoles"))
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(
        (
            r.text("title"),
            r.text("status"),
            r.text("problem"),
            r.text("proposal")
        ),
        ("Faster consoles", "draft", "It is slow.", "Make it fast.")
    );
    assert!(r.body.get("user_id").is_none(), "{:?}", r.body);
    assert!(!r.text("created_at").is_empty());
    let alice_p = r.text("id").to_owned();
    let r = s.post("/v1/proposals", Some(&bob), new("Dark mode")).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let bob_p = r.text("id").to_owned();
    for (body, says) in [
        (
            json!({"title": " ", "problem": "p", "proposal": "q"}),
            "title must be 1 to 200",
        ),
        (
            json!({"title": "t", "problem": "", "proposal": "q"}),
            "problem must be 1 to 10000",
        ),
        (
            json!({"title": "t", "problem": "p", "proposal": "q".repeat(10_001)}),
            "proposal must be 1 to 10000",
        ),
        (
            json!({"title": "t", "problem": "p"}),
            "missing field `proposal`",
        ),
        (
            json!({"title": "t", "problem": "p", "proposal": "q", "status": "done"}),
            "unknown field `status`",
        ),
    ] {
        let r = s.post("/v1/proposals", Some(&bob), body).await;
        assert_eq!(r.status, 400, "{says}: {:?}", r.body);
        assert!(r.error().contains(says), "{says}: {}", r.error());
    }

    // Each filer sees their own; staff see all, with the filer.
    let ids = |r: &Resp| -> Vec<String> {
        r.array("")
            .iter()
            .map(|p| p.text("id").to_owned())
            .collect()
    };
    let r = s.get("/v1/proposals", Some(&alice)).await;
    assert_eq!(
        (r.status, ids(&r)),
        (200, vec![alice_p.clone()]),
        "{:?}",
        r.body
    );
    assert!(r.body[0].get("user_id").is_none(), "{:?}", r.body);
    let r = s.get("/v1/proposals", Some(&bob)).await;
    assert_eq!(ids(&r), vec![bob_p.clone()]);
    let r = s.get("/v1/proposals", Some(&staff)).await;
    assert_eq!(
        ids(&r),
        vec![bob_p.clone(), alice_p.clone()],
        "newest first"
    );
    let alice_id = s
        .get("/v1/auth/me", Some(&alice))
        .await
        .text("user_id")
        .to_owned();
    assert_eq!(r.text("/1/user_id"), alice_id);
    // Paged.
    let one = s.get("/v1/proposals?limit=1", Some(&staff)).await;
    let cursor = one
        .headers
        .get("x-next-cursor")
        .and_then(|v| v.to_str().ok())
        .expect("a next page")
        .to_owned();
    let two = s
        .get(
            &format!("/v1/proposals?limit=1&cursor={cursor}"),
            Some(&staff),
        )
        .await;
    assert_eq!(
        [ids(&one), ids(&two)].concat(),
        vec![bob_p.clone(), alice_p.clone()]
    );
    let r = s.get("/v1/proposals?limit=101", Some(&staff)).await;
    assert_eq!(r.status, 400, "{:?}", r.body);

    // Only staff move them.
    let alice_path = format!("/v1/admin/proposals/{alice_p}");
    let bob_path = format!("/v1/admin/proposals/{bob_p}");
    let r = s
        .patch(&alice_path, Some(&alice), json!({"status": "accepted"}))
        .await;
    assert_eq!((r.status, r.error()), (403, "staff only"));
    let r = s
        .patch(&alice_path, None, json!({"status": "accepted"}))
        .await;
    assert_eq!(r.status, 401);

    // draft -> accepted -> done; draft -> rejected; nothing else (409).
    let allowed = "the allowed moves are draft -> accepted, draft -> rejected and accepted -> done";
    for (path, to, status) in [
        (&alice_path, "done", 409),
        (&alice_path, "draft", 409),
        (&alice_path, "accepted", 200),
        (&alice_path, "accepted", 409),
        (&alice_path, "rejected", 409),
        (&alice_path, "done", 200),
        (&alice_path, "accepted", 409),
        (&bob_path, "rejected", 200),
        (&bob_path, "accepted", 409),
        (&bob_path, "done", 409),
    ] {
        let r = s.patch(path, Some(&staff), json!({"status": to})).await;
        assert_eq!(r.status, status, "{path} -> {to}: {:?}", r.body);
        if status == 200 {
            assert_eq!(r.text("status"), to);
        } else {
            assert!(r.error().contains(allowed), "{}", r.error());
        }
    }
    let r = s
        .patch(&bob_path, Some(&staff), json!({"status": "maybe"}))
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(
        r.error().contains("proposal status must be one of"),
        "{}",
        r.error()
    );
    let r = s
        .patch(
            "/v1/admin/proposals/0190a0a0-0000-7000-8000-000000000000",
            Some(&staff),
            json!({"status": "accepted"}),
        )
        .await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    let r = s.get("/v1/proposals", Some(&alice)).await;
    assert_eq!(r.text("/0/status"), "done");

    audited(&s, &alice, &["proposal.filed"]).await;
    audited(&s, &staff, &["proposal.status_changed"]).await;
}
