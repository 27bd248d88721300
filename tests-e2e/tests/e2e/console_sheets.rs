//! The console's list pages (services/console/src/pages/sheet.rs) as people
//! use them, over plain HTTP against a stack of their own: an organization's
//! projects, assets, members' AI settings, payment claims and servers; the
//! control tower's claims queue, an organization's billing, billing runs,
//! the catalog and maintenance, the knowledge base, proposals, the model, a
//! person's page, an OpenID client's page; distributors and their
//! observers' read-only view. Then axe-core in Chromium on every one of
//! them. Each action is checked through the API, not only on the page.

use crate::console::{
    assert_guarded, browser, browser_sign_in, console_on, cookie_key, csrf_in, enter, env,
    mailed_session, visitor_signed_in, Browser, Env, Page, Visitor,
};
use crate::servers::{p_call, wait_for};
use serde_json::{json, Value};
use tests_e2e::Json;

/// POST a form of the page at `page` (its token) to `to`.
async fn submit(v: &mut Visitor, page: &str, to: &str, fields: &[(&str, &str)]) -> Page {
    let p = v.get(page).await;
    assert_eq!(p.status, 200, "{page}: {}", p.body);
    let csrf = csrf_in(&p.body);
    let mut form = vec![("csrf", csrf.as_str())];
    form.extend_from_slice(fields);
    v.post(to, &form).await
}

/// What a page says went wrong (its alert), for a failure's message.
fn alert(p: &Page) -> &str {
    p.body
        .find("role=\"alert\"")
        .map(|at| &p.body[at..(at + 300).min(p.body.len())])
        .unwrap_or(&p.body)
}

/// A form that worked: 303 back to `back`.
fn done(p: &Page, back: &str) {
    assert_eq!(p.status, 303, "{back}: {}", alert(p));
    assert_eq!(p.headers["location"], back, "{}", p.body);
}

/// A form the API refused: the page again, 422, saying why.
fn refused(p: &Page, why: &str) {
    assert_eq!(p.status, 422, "{}", p.body);
    assert!(p.body.contains("That did not work:"), "{}", p.body);
    assert!(p.body.contains(why), "{why} not in {}", p.body);
    assert_guarded(p, "a refusal");
}

fn find<'a>(list: &'a Value, key: &str, value: &str) -> Option<&'a Value> {
    list.as_array()?.iter().find(|x| x[key] == value)
}

async fn invoices_of(e: &Env, org: &str, token: &str) -> Value {
    e.s.get(&format!("/v1/organizations/{org}/invoices"), Some(token))
        .await
        .body
}

async fn charges_of(e: &Env, org: &str, token: &str) -> Value {
    e.s.get(&format!("/v1/organizations/{org}/charges"), Some(token))
        .await
        .body
}

async fn user_id(e: &Env, token: &str) -> String {
    e.s.get("/v1/auth/me", Some(token))
        .await
        .text("user_id")
        .to_owned()
}

#[tokio::test]
async fn a_customer_keeps_projects_and_assets_sets_ai_and_claims_a_payment_that_staff_approve() {
    let e = env().await;
    let ada_token = mailed_session(&e, "ada@example.com", 1).await;
    let org = e.s.create_org(&ada_token, "Ada Works", "TR").await;
    let org = org.text("id").to_owned();
    let mut ada = visitor_signed_in(&e, "ada@example.com", 2).await;

    // Projects: add, rename, a refused rename, delete.
    let projects = format!("/orgs/{org}/projects");
    let page = ada.get(&projects).await;
    assert!(page.body.contains("No projects yet."), "{}", page.body);
    assert_guarded(&page, "projects");
    let r = submit(
        &mut ada,
        &projects,
        &projects,
        &[("name", "Website"), ("description", "The public site")],
    )
    .await;
    done(&r, &projects);
    let list =
        e.s.get(
            &format!("/v1/organizations/{org}/projects"),
            Some(&ada_token),
        )
        .await;
    let pid = find(&list.body, "name", "Website")
        .expect("made")
        .text("id")
        .to_owned();
    let page = ada.get(&projects).await;
    assert!(page.body.contains("The public site") && page.body.contains(&pid));
    let r = submit(
        &mut ada,
        &projects,
        &format!("{projects}/{pid}"),
        &[("name", "Web site")],
    )
    .await;
    done(&r, &projects);
    let one =
        e.s.get(&format!("/v1/projects/{pid}"), Some(&ada_token))
            .await;
    assert_eq!(one.text("name"), "Web site");
    let r = submit(
        &mut ada,
        &projects,
        &format!("{projects}/{pid}"),
        &[("name", " ")],
    )
    .await;
    refused(&r, "name");
    assert_eq!(
        e.s.get(&format!("/v1/projects/{pid}"), Some(&ada_token))
            .await
            .text("name"),
        "Web site"
    );
    let r = submit(
        &mut ada,
        &projects,
        &format!("{projects}/{pid}/delete"),
        &[],
    )
    .await;
    done(&r, &projects);
    let list =
        e.s.get(
            &format!("/v1/organizations/{org}/projects"),
            Some(&ada_token),
        )
        .await;
    assert!(find(&list.body, "id", &pid).is_none(), "{:?}", list.body);

    // Assets: an http address refused, an https one kept as a link.
    let assets = format!("/orgs/{org}/assets");
    let r = submit(
        &mut ada,
        &assets,
        &assets,
        &[
            ("kind", "link"),
            ("name", "Docs"),
            ("url", "http://docs.example.com/"),
        ],
    )
    .await;
    refused(&r, "https");
    let r = submit(
        &mut ada,
        &assets,
        &assets,
        &[
            ("kind", "link"),
            ("name", "Docs"),
            ("url", "https://docs.example.com/"),
        ],
    )
    .await;
    done(&r, &assets);
    let page = ada.get(&assets).await;
    assert!(
        page.body.contains("href=\"https://docs.example.com/\""),
        "{}",
        page.body
    );
    let list =
        e.s.get(&format!("/v1/organizations/{org}/assets"), Some(&ada_token))
            .await;
    assert_eq!(
        list.body.as_array().map(Vec::len),
        Some(1),
        "{:?}",
        list.body
    );

    // Members' AI: off with a personal limit (an unchecked box is off).
    let uid = user_id(&e, &ada_token).await;
    let ai = format!("/orgs/{org}/ai");
    let r = submit(
        &mut ada,
        &ai,
        &format!("{ai}/{uid}"),
        &[("token_limit", "lots")],
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.body);
    let r = submit(
        &mut ada,
        &ai,
        &format!("{ai}/{uid}"),
        &[("token_limit", "5000")],
    )
    .await;
    done(&r, &ai);
    let s =
        e.s.get(
            &format!("/v1/organizations/{org}/members/{uid}/ai"),
            Some(&ada_token),
        )
        .await;
    assert_eq!(
        (s.body["ai_enabled"].clone(), s.body["token_limit"].clone()),
        (json!(false), json!(5000)),
        "{:?}",
        s.body
    );
    let page = ada.get(&format!("{ai}?by=day&since=2026-01-01")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Token usage") && page.body.contains("5000"));

    // A payment claim, typed the Turkish way; a bad amount refused first.
    let claims = format!("/orgs/{org}/claims");
    let r = submit(
        &mut ada,
        &claims,
        &claims,
        &[
            ("amount", "twelve"),
            ("currency", "TRY"),
            ("reference", "EFT 991"),
        ],
    )
    .await;
    assert_eq!(r.status, 422);
    assert!(r.body.contains("Type the amount as digits"));
    let r = submit(
        &mut ada,
        &claims,
        &claims,
        &[
            ("amount", "12,50"),
            ("currency", "TRY"),
            ("reference", "EFT 991"),
            ("invoice_id", ""),
        ],
    )
    .await;
    done(&r, &claims);
    let page = ada.get(&claims).await;
    assert!(page.body.contains("₺12.50") && page.body.contains("Waiting for review"));
    assert_eq!(ada.get("/staff/claims").await.status, 403);

    // Staff approve it in the queue: a payment is recorded.
    let mut staff = visitor_signed_in(&e, "staff@example.com", 1).await;
    let queue = staff.get("/staff/claims").await;
    assert!(
        queue.body.contains("Ada Works") && queue.body.contains("EFT 991"),
        "{}",
        queue.body
    );
    let list =
        e.s.get(
            &format!("/v1/organizations/{org}/payment-claims"),
            Some(&ada_token),
        )
        .await;
    let claim = list.body[0]["id"].as_str().expect("a claim").to_owned();
    let r = submit(
        &mut staff,
        "/staff/claims",
        &format!("/staff/claims/{claim}/approve"),
        &[
            ("review_notes", "matched on the statement"),
            ("received_at", ""),
        ],
    )
    .await;
    done(&r, "/staff/claims");
    let pays =
        e.s.get(
            &format!("/v1/organizations/{org}/payments"),
            Some(&ada_token),
        )
        .await;
    assert_eq!(pays.body[0]["amount_minor"], 1250, "{:?}", pays.body);
    let page = ada.get(&claims).await;
    assert!(page.body.contains("Approved") && page.body.contains("matched on the statement"));

    // Someone else sees none of it, and their forms do nothing.
    let mut bob = visitor_signed_in(&e, "bob@example.com", 1).await;
    for path in [&projects, &assets, &ai, &claims] {
        assert_eq!(bob.get(path).await.status, 404, "{path}");
    }
    let csrf = csrf_in(&bob.get("/orgs").await.body);
    let r = bob
        .post(&projects, &[("csrf", &csrf), ("name", "Intruder")])
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
    let list =
        e.s.get(
            &format!("/v1/organizations/{org}/projects"),
            Some(&ada_token),
        )
        .await;
    assert_eq!(list.body, json!([]));
}

#[tokio::test]
async fn a_customer_orders_a_server_reads_its_credentials_stops_and_terminates_it() {
    let e = env().await;
    let ada_token = mailed_session(&e, "ada@example.com", 1).await;
    let org = e.s.create_org(&ada_token, "Ada Hosting", "TR").await;
    let org = org.text("id").to_owned();
    let mut ada = visitor_signed_in(&e, "ada@example.com", 2).await;
    let servers = format!("/orgs/{org}/servers");
    let page = ada.get(&servers).await;
    assert!(page.body.contains("No servers yet.") && page.body.contains("value=\"vps-small\""));
    let r = submit(
        &mut ada,
        &servers,
        &servers,
        &[("sku_id", "vps-small"), ("hostname", "web-1")],
    )
    .await;
    done(&r, &servers);
    let list = p_call(
        &e.s,
        "GET",
        &format!("/v1/servers?org_id={org}"),
        Some(&ada_token),
        None,
    )
    .await;
    let sid = list.body[0]["id"].as_str().expect("ordered").to_owned();
    wait_for(&e.s, &ada_token, &sid, "active").await;
    let page = ada.get(&servers).await;
    assert!(
        page.body.contains("web-1") && page.body.contains("Running"),
        "{}",
        page.body
    );

    let one = format!("{servers}/{sid}");
    let page = ada.get(&one).await;
    let d = p_call(
        &e.s,
        "GET",
        &format!("/v1/servers/{sid}"),
        Some(&ada_token),
        None,
    )
    .await;
    let password = d.text("/credentials/password").to_owned();
    assert!(page.body.contains(&password), "the owner sees the password");
    let r = submit(&mut ada, &one, &format!("{one}/rotate"), &[]).await;
    done(&r, &one);
    let d = p_call(
        &e.s,
        "GET",
        &format!("/v1/servers/{sid}"),
        Some(&ada_token),
        None,
    )
    .await;
    assert_ne!(d.text("/credentials/password"), password, "rotated");

    let r = submit(
        &mut ada,
        &one,
        &format!("{one}/power"),
        &[("action", "stop")],
    )
    .await;
    done(&r, &one);
    wait_for(&e.s, &ada_token, &sid, "stopped").await;
    // An action the state does not allow: the API's refusal on the page.
    let r = submit(
        &mut ada,
        &one,
        &format!("{one}/power"),
        &[("action", "stop")],
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.body);
    let r = submit(&mut ada, &one, &format!("{one}/terminate"), &[]).await;
    done(&r, &one);
    wait_for(&e.s, &ada_token, &sid, "terminated").await;
    assert!(ada.get(&one).await.body.contains("Terminated"));

    // A finance member sees why the credentials are withheld; someone else
    // gets a 404, and cannot reach the server through their own org's path.
    let bob_token = mailed_session(&e, "bob@example.com", 1).await;
    let bob_org = e.s.create_org(&bob_token, "Bob Ltd", "TR").await;
    let bob_org = bob_org.text("id").to_owned();
    let mut bob = visitor_signed_in(&e, "bob@example.com", 2).await;
    assert_eq!(bob.get(&one).await.status, 404);
    assert_eq!(
        bob.get(&format!("/orgs/{bob_org}/servers/{sid}"))
            .await
            .status,
        404
    );
    let csrf = csrf_in(&bob.get("/orgs").await.body);
    let r = bob
        .post(
            &format!("/orgs/{bob_org}/servers/{sid}/power"),
            &[("csrf", &csrf), ("action", "start")],
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
}

#[tokio::test]
async fn staff_bill_an_organization_run_a_month_and_keep_the_catalog_kb_proposals_and_model() {
    let e = env().await;
    let ada_token = mailed_session(&e, "ada@example.com", 1).await;
    let org = e.s.create_org(&ada_token, "Zed Billing", "TR").await;
    let org = org.text("id").to_owned();
    let mut staff = visitor_signed_in(&e, "staff@example.com", 1).await;
    let mut ada = visitor_signed_in(&e, "ada@example.com", 2).await;
    let page_of = format!("/staff/orgs/{org}");
    assert_eq!(
        ada.get(&page_of).await.status,
        403,
        "customers are not staff"
    );
    assert_eq!(ada.get("/staff/proposals").await.status, 403);
    assert_eq!(ada.get("/staff/billing-runs").await.status, 403);

    // A charge, a proforma of it, converted; a payment against the invoice.
    let page = staff.get(&page_of).await;
    assert!(
        page.body.contains("Zed Billing") && page.body.contains("No charges."),
        "{}",
        page.body
    );
    let r = submit(
        &mut staff,
        &page_of,
        &format!("{page_of}/charges"),
        &[
            ("description", "Setup"),
            ("brand", "Servers"),
            ("amount", "100"),
        ],
    )
    .await;
    done(&r, &page_of);
    assert!(staff.get(&page_of).await.body.contains("₺100.00"));
    let r = submit(
        &mut staff,
        &page_of,
        &format!("{page_of}/issue/proforma"),
        &[],
    )
    .await;
    done(&r, &page_of);
    let list = invoices_of(&e, &org, &ada_token).await;
    let pf = find(&list, "kind", "proforma")
        .expect("a proforma")
        .text("id")
        .to_owned();
    let r = submit(
        &mut staff,
        &page_of,
        &format!("{page_of}/invoices/{pf}/convert"),
        &[],
    )
    .await;
    done(&r, &page_of);
    let list = invoices_of(&e, &org, &ada_token).await;
    let invoice = find(&list, "kind", "invoice").expect("an invoice");
    let inv = invoice.text("id").to_owned();
    let number = invoice.text("number").to_owned();
    // Staff open its print preview from the organization's page.
    let preview = format!("/orgs/{org}/invoices/{inv}/preview");
    assert!(staff.get(&page_of).await.body.contains(&preview));
    let p = staff.get(&preview).await;
    assert_eq!(p.status, 200, "{}", p.body);
    assert!(
        p.headers["content-type"]
            .to_str()
            .expect("ascii")
            .starts_with("text/html")
            && p.body.contains(&number),
        "{}",
        p.body
    );
    let r = submit(
        &mut staff,
        &page_of,
        &format!("{page_of}/payments"),
        &[
            ("amount", "40"),
            ("currency", "TRY"),
            ("method", "bank_transfer"),
            ("reference", "EFT 5"),
            ("received_at", ""),
            ("invoice_id", &inv),
        ],
    )
    .await;
    assert_eq!(r.status, 422, "no time: {}", r.body);
    let r = submit(
        &mut staff,
        &page_of,
        &format!("{page_of}/payments"),
        &[
            ("amount", "40"),
            ("currency", "TRY"),
            ("method", "bank_transfer"),
            ("reference", "EFT 5"),
            ("received_at", "2026-11-20"),
            ("invoice_id", &inv),
        ],
    )
    .await;
    done(&r, &page_of);
    let list = invoices_of(&e, &org, &ada_token).await;
    let paid = find(&list, "id", &inv).expect("the invoice");
    assert_eq!(
        (paid["paid_minor"].clone(), paid["status"].clone()),
        (json!(4000), json!("partially_paid"))
    );
    assert!(staff.get(&page_of).await.body.contains("EFT 5"));

    // Another organization's charge or invoice through this organization's
    // page is a 404 and nothing is done to it.
    let other = e.s.create_org(&ada_token, "Zed Other", "TR").await;
    let other = other.text("id").to_owned();
    let other_page = format!("/staff/orgs/{other}");
    let r = submit(
        &mut staff,
        &other_page,
        &format!("{other_page}/charges"),
        &[
            ("description", "Elsewhere"),
            ("brand", "Servers"),
            ("amount", "7"),
        ],
    )
    .await;
    done(&r, &other_page);
    let charges = charges_of(&e, &other, &ada_token).await;
    let theirs = find(&charges, "description", "Elsewhere")
        .expect("the other organization's charge")
        .text("id")
        .to_owned();
    let r = submit(
        &mut staff,
        &page_of,
        &format!("{page_of}/charges/{theirs}/waive"),
        &[],
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.body);
    let r = submit(
        &mut staff,
        &other_page,
        &format!("{other_page}/invoices/{inv}/void"),
        &[],
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.body);
    let charges = charges_of(&e, &other, &ada_token).await;
    assert_eq!(
        find(&charges, "id", &theirs).expect("still there")["status"],
        "pending"
    );
    let list = invoices_of(&e, &org, &ada_token).await;
    assert_eq!(
        find(&list, "id", &inv).expect("the invoice")["status"],
        "partially_paid"
    );
    // Its own charge, from its own page, is waived.
    let r = submit(
        &mut staff,
        &other_page,
        &format!("{other_page}/charges/{theirs}/waive"),
        &[],
    )
    .await;
    done(&r, &other_page);
    let charges = charges_of(&e, &other, &ada_token).await;
    assert_eq!(
        find(&charges, "id", &theirs).expect("still listed")["status"],
        "waived"
    );

    // A month's billing run and its page.
    let r = submit(
        &mut staff,
        "/staff/billing-runs",
        "/staff/billing-runs",
        &[("period", "2026-10")],
    )
    .await;
    assert_eq!(r.status, 303, "{}", r.body);
    let to = r.headers["location"].to_str().expect("ascii").to_owned();
    assert!(to.starts_with("/staff/billing-runs/"), "{to}");
    let run = staff.get(&to).await;
    assert!(
        run.body.contains("2026-10") && run.body.contains("Done"),
        "{}",
        run.body
    );
    // The run's page asks nothing more to know its visitor is staff: the
    // run is read from a staff-only route, which refuses a customer.
    assert_eq!(ada.get(&to).await.status, 403, "customers are not staff");

    // The catalog: a SKU added, repriced and retired; a maintenance window.
    let r = submit(
        &mut staff,
        "/staff/catalog",
        "/staff/catalog/skus",
        &[
            ("id", "vps-tiny"),
            ("name", "VPS Tiny"),
            ("fulfilment", "api"),
            ("sla_hours", ""),
            ("price", "9.90"),
            ("currency", "EUR"),
            ("listed", "true"),
        ],
    )
    .await;
    done(&r, "/staff/catalog");
    let skus = p_call(&e.s, "GET", "/v1/skus", None, None).await;
    assert_eq!(
        find(&skus.body, "id", "vps-tiny").expect("listed")["monthly_price_minor"],
        990
    );
    let r = submit(
        &mut staff,
        "/staff/catalog",
        "/staff/catalog/skus/vps-tiny",
        &[("price", "12"), ("position", "3")],
    )
    .await;
    done(&r, "/staff/catalog");
    let skus = p_call(&e.s, "GET", "/v1/skus", None, None).await;
    assert!(
        find(&skus.body, "id", "vps-tiny").is_none(),
        "retired: {:?}",
        skus.body
    );
    let r = submit(
        &mut staff,
        "/staff/catalog",
        "/staff/catalog/maintenance",
        &[
            ("title", "DB upgrade"),
            ("description", ""),
            ("starts_at", "2030-01-01T01:00"),
            ("ends_at", "2030-01-01T03:00"),
        ],
    )
    .await;
    done(&r, "/staff/catalog");
    let windows = p_call(&e.s, "GET", "/v1/service-contract/maintenance", None, None).await;
    assert_eq!(
        find(&windows.body, "title", "DB upgrade").expect("announced")["starts_at"],
        "2030-01-01T01:00:00Z"
    );

    // The knowledge base: a category, an article published then unpublished, deleted.
    let r = submit(
        &mut staff,
        "/staff/kb",
        "/staff/kb-new/categories",
        &[("slug", "billing"), ("title", "Billing")],
    )
    .await;
    done(&r, "/staff/kb");
    let r = submit(
        &mut staff,
        "/staff/kb",
        "/staff/kb-new/articles",
        &[
            ("title", "Paying by transfer"),
            ("slug", "paying-by-transfer"),
            ("category", "billing"),
            ("status", "published"),
            ("body_md", "Use the IBAN on the invoice."),
        ],
    )
    .await;
    done(&r, "/staff/kb");
    assert_eq!(
        e.s.get("/v1/kb/articles/paying-by-transfer", None)
            .await
            .status,
        200
    );
    let staff_token = mailed_session(&e, "staff@example.com", 2).await;
    let all = e.s.get("/v1/admin/kb/articles", Some(&staff_token)).await;
    let aid = find(&all.body, "slug", "paying-by-transfer")
        .expect("written")
        .text("id")
        .to_owned();
    let edit = format!("/staff/kb/{aid}");
    assert!(staff
        .get(&edit)
        .await
        .body
        .contains("Use the IBAN on the invoice."));
    let r = submit(
        &mut staff,
        &edit,
        &format!("{edit}/save"),
        &[
            ("title", "Paying by transfer"),
            ("slug", "paying-by-transfer"),
            ("category", "billing"),
            ("status", "draft"),
            ("body_md", "Use the IBAN."),
        ],
    )
    .await;
    done(&r, &edit);
    assert_eq!(
        e.s.get("/v1/kb/articles/paying-by-transfer", None)
            .await
            .status,
        404
    );
    let r = submit(&mut staff, "/staff/kb", &format!("{edit}/delete"), &[]).await;
    done(&r, "/staff/kb");
    assert!(!staff
        .get("/staff/kb")
        .await
        .body
        .contains("Paying by transfer"));

    // More articles than a page: the list pages on, and the editor finds an
    // article beyond the first page.
    let mut first = String::new();
    for i in 0..51 {
        let a =
            e.s.post(
                "/v1/admin/kb/articles",
                Some(&staff_token),
                json!({"title": format!("Article #{i:02}"), "slug": format!("article-{i:02}"),
                       "status": "draft", "body_md": format!("Body {i:02}.")}),
            )
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
        if i == 0 {
            first = a.text("id").to_owned();
        }
    }
    let list = staff.get("/staff/kb").await;
    assert!(
        list.body.contains("Article #50") && !list.body.contains("Article #00"),
        "{}",
        list.body
    );
    let at = list.body.find("Next page").expect("a next page link");
    let href = list.body[..at]
        .rsplit("href=\"")
        .next()
        .and_then(|h| h.split('"').next())
        .expect("the link")
        .replace("&amp;", "&")
        .replace("&#x2f;", "/")
        .replace("&#47;", "/");
    assert!(href.starts_with("/staff/kb?cursor="), "{href}");
    let more = staff.get(&href).await;
    assert_eq!(more.status, 200, "{}", more.body);
    assert!(
        more.body.contains("Article #00") && !more.body.contains("Article #50"),
        "{}",
        more.body
    );
    let page = staff.get(&format!("/staff/kb/{first}")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Body 00."), "{}", page.body);

    // A proposal accepted.
    let p =
        e.s.post(
            "/v1/proposals",
            Some(&ada_token),
            json!({"title": "Dark mode", "problem": "Bright at night", "proposal": "A dark theme"}),
        )
        .await;
    assert_eq!(p.status, 201, "{:?}", p.body);
    let pid = p.text("id").to_owned();
    assert!(staff
        .get("/staff/proposals")
        .await
        .body
        .contains("Bright at night"));
    let r = submit(
        &mut staff,
        "/staff/proposals",
        &format!("/staff/proposals/{pid}"),
        &[("status", "accepted")],
    )
    .await;
    done(&r, "/staff/proposals");
    let mine = e.s.get("/v1/proposals", Some(&ada_token)).await;
    assert_eq!(
        find(&mine.body, "id", &pid).expect("mine")["status"],
        "accepted"
    );

    // The model, and a refused one.
    let r = submit(
        &mut staff,
        "/staff/model",
        "/staff/model",
        &[("model", "claude-test-1")],
    )
    .await;
    done(&r, "/staff/model");
    assert!(staff
        .get("/staff/model")
        .await
        .body
        .contains("claude-test-1"));
    let r = submit(
        &mut staff,
        "/staff/model",
        "/staff/model",
        &[("model", "two words")],
    )
    .await;
    refused(&r, "model must be");

    // A person's page: their membership, their sessions.
    let uid = user_id(&e, &ada_token).await;
    let page = staff.get(&format!("/staff/users/{uid}")).await;
    assert!(
        page.body.contains("ada@example.com") && page.body.contains(&org),
        "{}",
        page.body
    );
    assert_eq!(ada.get(&format!("/staff/users/{uid}")).await.status, 403);
}

#[tokio::test]
async fn staff_edit_an_openid_client_and_rotate_its_secret_shown_once() {
    let e = env().await;
    let staff_token = mailed_session(&e, "staff@example.com", 1).await;
    let made =
        e.s.post(
            "/v1/admin/oauth-clients",
            Some(&staff_token),
            json!({"name": "Wiki", "kind": "confidential", "redirect_uris": ["https://wiki.example.com/cb"],
                   "scopes": ["openid", "email"]}),
        )
        .await;
    assert_eq!(made.status, 201, "{:?}", made.body);
    let (id, old) = (
        made.text("id").to_owned(),
        made.text("client_secret").to_owned(),
    );
    let mut staff = visitor_signed_in(&e, "staff@example.com", 2).await;
    let page_of = format!("/staff/clients/{id}");
    let page = staff.get(&page_of).await;
    assert!(page.body.contains("https://wiki.example.com/cb") && !page.body.contains(&old));
    let r = submit(
        &mut staff,
        &page_of,
        &format!("{page_of}/save"),
        &[
            ("name", "Wiki 2"),
            ("scopes", "openid email profile"),
            (
                "redirect_uris",
                "https://wiki.example.com/cb\nhttps://wiki.example.com/cb2",
            ),
            ("post_logout_redirect_uris", ""),
            ("allowed_org_ids", ""),
        ],
    )
    .await;
    done(&r, &page_of);
    let list = e.s.get("/v1/admin/oauth-clients", Some(&staff_token)).await;
    let k = find(&list.body, "id", &id).expect("the client");
    assert_eq!(k["name"], "Wiki 2");
    let mut scopes: Vec<&str> = k["scopes"]
        .as_array()
        .expect("scopes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    scopes.sort_unstable();
    assert_eq!(scopes, ["email", "openid", "profile"]);
    assert_eq!(k["redirect_uris"].as_array().map(Vec::len), Some(2));
    let r = submit(&mut staff, &page_of, &format!("{page_of}/rotate"), &[]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let at = r.body.find("<code>hub_cs_").expect("the new secret") + 6;
    let secret = r.body[at..].split('<').next().expect("secret").to_owned();
    assert_ne!(secret, old);
    assert!(
        !staff.get(&page_of).await.body.contains(&secret),
        "shown once"
    );
    // The new secret works at the token endpoint; the old one does not.
    let http = reqwest::Client::new();
    for (s, want) in [(&old, 401), (&secret, 400)] {
        let r = http
            .post(format!("{}/oauth/token", e.s.core()))
            .basic_auth(&id, Some(s))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(
                "grant_type=authorization_code&code=nope&redirect_uri=https%3A%2F%2Fwiki.example.com%2Fcb",
            )
            .send()
            .await
            .expect("the token endpoint answers");
        assert_eq!(r.status().as_u16(), want, "{:?}", r.text().await);
    }
}

#[tokio::test]
async fn staff_keep_a_distributor_whose_observer_reads_it_and_changes_nothing() {
    let e = env().await;
    let mut staff = visitor_signed_in(&e, "staff@example.com", 1).await;
    let r = submit(
        &mut staff,
        "/distributors",
        "/distributors",
        &[
            ("name", "Hub Island"),
            ("legal_name", "Hub Island ehf"),
            ("country", "IS"),
            ("currency", "EUR"),
            ("profit_pct", "12.5"),
            ("tax_id", ""),
            ("notes", ""),
        ],
    )
    .await;
    done(&r, "/distributors");
    let staff_token = mailed_session(&e, "staff@example.com", 2).await;
    let all = e.s.get("/v1/distributors", Some(&staff_token)).await;
    let d = find(&all.body, "name", "Hub Island").expect("made");
    assert_eq!(d["profit_pct"], 12.5);
    let id = d.text("id").to_owned();
    let page_of = format!("/distributors/{id}");
    let r = submit(
        &mut staff,
        &page_of,
        &format!("{page_of}/observers"),
        &[("email", "watcher@example.com")],
    )
    .await;
    done(&r, &page_of);
    let r = submit(
        &mut staff,
        &page_of,
        &format!("{page_of}/edit"),
        &[
            ("name", "Hub Island"),
            ("legal_name", "Hub Island ehf"),
            ("country", "IS"),
            ("currency", "EUR"),
            ("profit_pct", "15"),
            ("contact_email", "ops@hub.is"),
        ],
    )
    .await;
    done(&r, &page_of);
    let one =
        e.s.get(&format!("/v1/distributors/{id}"), Some(&staff_token))
            .await;
    assert_eq!(
        (
            one.body["profit_pct"].clone(),
            one.body["contact_email"].clone()
        ),
        (json!(15.0), json!("ops@hub.is"))
    );

    // The observer: the menu names the entity's view; no form on it.
    let mut watcher = visitor_signed_in(&e, "watcher@example.com", 1).await;
    let home = watcher.get("/orgs").await;
    assert!(
        home.body.contains("href=\"/distributors\""),
        "{}",
        home.body
    );
    let list = watcher.get("/distributors").await;
    assert!(
        list.body.contains("Hub Island")
            && !list
                .body
                .contains("<form method=\"post\" action=\"/distributors\"")
    );
    let page = watcher.get(&page_of).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("Monthly report") && !page.body.contains("/edit\""),
        "{}",
        page.body
    );
    assert_eq!(watcher.get(&format!("{page_of}/billing")).await.status, 200);
    let csrf = csrf_in(&page.body);
    let r = watcher
        .post(
            &format!("{page_of}/edit"),
            &[
                ("csrf", &csrf),
                ("name", "Mine"),
                ("legal_name", "x"),
                ("country", "IS"),
                ("currency", "EUR"),
            ],
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    let one =
        e.s.get(&format!("/v1/distributors/{id}"), Some(&staff_token))
            .await;
    assert_eq!(one.body["name"], "Hub Island");
    // Anyone else: the API's 403.
    let mut bob = visitor_signed_in(&e, "bob@example.com", 1).await;
    assert!(!bob
        .get("/orgs")
        .await
        .body
        .contains("href=\"/distributors\""));
    assert_eq!(bob.get("/distributors").await.status, 403);
    assert_eq!(bob.get(&page_of).await.status, 404);
}

/// axe-core and a screenshot on every list page, as the customer and as staff.
#[tokio::test]
async fn every_list_page_passes_axe_in_the_browser() {
    let e = env().await;
    let ada_token = mailed_session(&e, "ada@example.com", 1).await;
    let org = e.s.create_org(&ada_token, "Ada Axe", "TR").await;
    let org = org.text("id").to_owned();
    let staff_token = mailed_session(&e, "staff@example.com", 1).await;
    let d =
        e.s.post(
            "/v1/distributors",
            Some(&staff_token),
            json!({"name": "Axe Entity", "legal_name": "Axe", "country": "IS", "currency": "EUR"}),
        )
        .await;
    assert_eq!(d.status, 201, "{:?}", d.body);
    let dist = d.text("id").to_owned();
    let uid = user_id(&e, &ada_token).await;
    e.s.post(
        &format!("/v1/organizations/{org}/projects"),
        Some(&ada_token),
        json!({"name": "Site"}),
    )
    .await;
    let mut b = browser("list-pages").await;
    browser_sign_in(&b, &e, "ada@example.com", 2).await;
    for (name, path) in [
        ("projects", format!("/orgs/{org}/projects")),
        ("assets", format!("/orgs/{org}/assets")),
        ("ai", format!("/orgs/{org}/ai")),
        ("claims", format!("/orgs/{org}/claims")),
        ("servers", format!("/orgs/{org}/servers")),
    ] {
        b.c.goto(&format!("{}{path}", e.url)).await.expect(name);
        b.wait_text("main", "Ada Axe").await;
        b.check(name).await;
    }
    b.c.clone().close().await.expect("close");
    let mut b = browser("tower-pages").await;
    browser_sign_in(&b, &e, "staff@example.com", 2).await;
    for (name, path) in [
        ("claims-queue", "/staff/claims".to_owned()),
        ("org-billing", format!("/staff/orgs/{org}")),
        ("runs", "/staff/billing-runs".into()),
        ("catalog", "/staff/catalog".into()),
        ("kb", "/staff/kb".into()),
        ("proposals", "/staff/proposals".into()),
        ("model", "/staff/model".into()),
        ("user", format!("/staff/users/{uid}")),
        ("distributors", "/distributors".into()),
        ("distributor", format!("/distributors/{dist}")),
        (
            "distributor-billing",
            format!("/distributors/{dist}/billing"),
        ),
    ] {
        b.c.goto(&format!("{}{path}", e.url)).await.expect(name);
        b.wait_text("main", "").await;
        let src = b.source().await;
        assert!(!src.contains("That did not work"), "{name}: {src}");
        assert_eq!(
            b.path().await,
            path.split('?').next().unwrap_or(""),
            "{name}"
        );
        b.check(name).await;
    }
    b.c.clone().close().await.expect("close");
}

/// A port nothing listens on.
fn closed_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    format!("http://127.0.0.1:{}", l.local_addr().expect("port").port())
}

#[tokio::test]
async fn in_production_the_console_sends_hsts_and_a_host_only_secure_cookie() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let url = format!(
        "http://127.0.0.1:{}",
        listener.local_addr().expect("port").port()
    );
    let down = closed_port();
    let _stop = console_on(
        listener,
        &down,
        &down,
        &cookie_key(),
        "secure_cookies = true\nhsts = true\n",
    )
    .await
    .drop_guard();
    let mut v = Visitor::new(&url);
    let page = v.get("/sign-in").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert_guarded(&page, "sign-in");
    assert_eq!(
        page.headers["strict-transport-security"],
        "max-age=63072000; includeSubDomains"
    );
    let cookie = page.headers["set-cookie"].to_str().expect("ascii");
    assert!(cookie.starts_with("__Host-hub-console="), "{cookie}");
    for part in ["Secure", "HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(cookie.contains(part), "{part} not in {cookie}");
    }
    assert!(!cookie.contains("Domain="), "host-only: {cookie}");
}

#[tokio::test]
async fn signing_out_when_the_hub_does_not_answer_says_where_to_end_the_session() {
    let e = env().await;
    let mut ada = visitor_signed_in(&e, "ada@example.com", 1).await;
    let csrf = csrf_in(&ada.get("/orgs").await.body);
    // The same cookie, on a console (the same key) whose gateway is down.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let url = format!(
        "http://127.0.0.1:{}",
        listener.local_addr().expect("port").port()
    );
    let down = closed_port();
    let _stop = console_on(listener, &down, &down, &e.key, "secure_cookies = false\n")
        .await
        .drop_guard();
    let mut cut_off = Visitor::new(&url);
    cut_off.cookie = ada.cookie.clone();
    let r = cut_off.post("/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.body.contains("Signed out in this browser") && r.body.contains("Sessions"));
    // Signed out here all the same: the cookie no longer holds the session.
    let after = cut_off.get("/orgs").await;
    assert_eq!(
        (after.status, after.headers["location"].to_str().ok()),
        (303, Some("/sign-in"))
    );
    // Where the hub answers, signing out ends the session and says nothing.
    let csrf = csrf_in(&ada.get("/orgs").await.body);
    let r = ada.post("/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(
        (r.status, r.headers["location"].to_str().ok()),
        (303, Some("/sign-in"))
    );
}

/// Tab (the keyboard only) until the focus is on `css`; at most 80 presses.
async fn tab_to(b: &Browser, css: &str) {
    let tab = char::from(fantoccini::key::Key::Tab).to_string();
    for _ in 0..80 {
        let here =
            b.c.execute(
                "return document.activeElement.matches(arguments[0])",
                vec![json!(css)],
            )
            .await
            .expect("js");
        if here == json!(true) {
            return;
        }
        b.type_here(&tab).await;
    }
    panic!("Tab never reached {css}");
}

#[tokio::test]
async fn the_main_customer_flow_works_by_keyboard_alone() {
    let e = env().await;
    let mut b = browser("keyboard").await;
    browser_sign_in(&b, &e, "ada@example.com", 1).await;
    b.heading("Organizations").await;
    tab_to(&b, "#name").await;
    b.type_here("Ada Keys").await;
    tab_to(&b, "#country").await;
    b.type_here(&format!("TR{}", enter())).await;
    b.heading("Ada Keys").await;

    // KYC, every field reached with Tab; the notice ticked with Space.
    tab_to(&b, "nav.tabs a[href$='/kyc']").await;
    b.type_here(&enter()).await;
    b.wait_text("main", "Full name").await;
    for (id, text) in [
        ("#full_name", "Ada Lovelace"),
        ("#national_id", "10000000146"),
        ("#line1", "Istiklal Cd. 1"),
        ("#city", "Istanbul"),
        ("#postal_code", "34430"),
    ] {
        tab_to(&b, id).await;
        b.type_here(text).await;
    }
    tab_to(&b, "input[name=notice_acked]").await;
    b.type_here(" ").await;
    tab_to(&b, "form[action$='/kyc'] button[type=submit]").await;
    b.type_here(&enter()).await;
    b.wait_text("table", "Under review").await;

    // A project, and a payment claim.
    tab_to(&b, "nav.tabs a[href$='/projects']").await;
    b.type_here(&enter()).await;
    b.wait_text("main", "No projects yet.").await;
    tab_to(&b, "form.stack input[name=name]").await;
    b.type_here(&format!("Site{}", enter())).await;
    b.wait_text("table", "Site").await;
    tab_to(&b, "nav.tabs a[href$='/claims']").await;
    b.type_here(&enter()).await;
    b.wait_text("main", "No claims yet.").await;
    tab_to(&b, "form.stack input[name=amount]").await;
    b.type_here("250").await;
    tab_to(&b, "form.stack input[name=reference]").await;
    b.type_here(&format!("EFT 12{}", enter())).await;
    b.wait_text("table", "Waiting for review").await;
    b.check("keyboard-claim").await;
    b.c.clone().close().await.expect("close");
}
