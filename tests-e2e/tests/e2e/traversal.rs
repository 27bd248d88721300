//! No spelling of a public path reaches an internal route (issue 15): every
//! traversal spelling against every internal route of every service, through
//! both hosts, sent byte for byte; the gateway's key refused on internal routes
//! whatever the spelling; internal handlers serve their listed caller only.

use futures::future::join_all;
use serde_json::{json, Value};
use service_kit::assertion::{Minter, RequestFacts};
use tests_e2e::{raw_request, Resp, StackOptions, TestStack};

/// One internal route, with an id of a real organization in it.
struct Internal {
    service: &'static str,
    method: &'static str,
    /// `/internal/...`, query included.
    target: String,
    body: Value,
}

fn internal_routes(org: &str, user: &str) -> Vec<Internal> {
    let kyc_state = json!({
        "version": i64::MAX, "kyc_status": "verified", "kyc_tier": 9,
        "kyc_verified_at": "2026-01-01T00:00:00Z", "legal_identity": null
    });
    vec![
        Internal {
            service: "identity",
            method: "POST",
            target: format!("/internal/v1/organizations/{org}/owner"),
            body: json!({}),
        },
        Internal {
            service: "identity",
            method: "POST",
            target: "/internal/v1/users".into(),
            body: json!({ "email": "traversal-made@example.com" }),
        },
        Internal {
            service: "identity",
            method: "POST",
            target: "/internal/v1/users/timezones".into(),
            body: json!({ "user_ids": [user] }),
        },
        Internal {
            service: "kyc",
            method: "GET",
            target: format!("/internal/v1/organizations/{org}/kyc-state"),
            body: Value::Null,
        },
        Internal {
            service: "org_billing",
            method: "POST",
            target: format!("/internal/v1/organizations/{org}/tokens/spend"),
            body: json!({ "amount": 1 }),
        },
        Internal {
            service: "org_billing",
            method: "GET",
            target: format!("/internal/v1/organizations/{org}/ai-allowance"),
            body: Value::Null,
        },
        Internal {
            service: "org_billing",
            method: "GET",
            target: "/internal/v1/organizations/lookup?q=a".into(),
            body: Value::Null,
        },
        Internal {
            service: "org_billing",
            method: "GET",
            target: format!("/internal/v1/organizations/{org}/profile"),
            body: Value::Null,
        },
        Internal {
            service: "org_billing",
            method: "PUT",
            target: format!("/internal/v1/organizations/{org}/kyc-state"),
            body: kyc_state,
        },
    ]
}

/// Every spelling of `internal` (`/internal/...`) reached from `prefix`, a
/// public path of some service, climbing `ups` segments.
fn spellings(prefix: &str, ups: usize, internal: &str) -> Vec<String> {
    let rest = internal.strip_prefix("/internal").unwrap_or(internal);
    let mut out = vec![];
    for up in ["/..", "/%2e%2e", "/%2E%2E", "/.%2e", "/%2e."] {
        out.push(format!("{prefix}{}{internal}", up.repeat(ups)));
        out.push(format!("{prefix}{}/%69nternal{rest}", up.repeat(ups)));
        out.push(format!("{prefix}{}/{internal}", up.repeat(ups)));
    }
    for up in ["..%2f", "..%2F", "..\\", "..%5c", "..%5C"] {
        out.push(format!("{prefix}/{}internal{rest}", up.repeat(ups)));
        out.push(format!("{prefix}/{}%69nternal{rest}", up.repeat(ups)));
    }
    out.push(format!("{prefix}/{internal}"));
    out.push(format!("{prefix}{internal}"));
    out
}

/// Public prefixes by host (`true`: the product host), each routed to some
/// service: those that own an internal route and the rest.
fn prefixes(org: &str) -> Vec<(bool, String)> {
    let core = [
        format!("/v1/organizations/{org}"),
        format!("/v1/organizations/{org}/members"),
        format!("/v1/organizations/{org}/kyc"),
        format!("/v1/organizations/{org}/wallet"),
        "/v1/organizations".to_owned(),
        "/v1/profile".to_owned(),
        "/v1/agent".to_owned(),
        "/v1/auth/me".to_owned(),
    ];
    let mut out: Vec<(bool, String)> = core.iter().map(|p| (false, p.clone())).collect();
    out.extend(core.iter().map(|p| (true, format!("/core-api{p}"))));
    out.extend(
        ["/v1/servers", "/v1/webhooks", "/v1/skus", "/core-api"]
            .iter()
            .map(|p| (true, (*p).to_owned())),
    );
    out
}

fn segments(p: &str) -> usize {
    p.split('/').filter(|s| !s.is_empty()).count()
}

async fn send(base: &str, route: &Internal, target: &str, headers: &[(&str, &str)]) -> Resp {
    let body = match &route.body {
        Value::Null => vec![],
        b => b.to_string().into_bytes(),
    };
    let mut h = headers.to_vec();
    if !body.is_empty() {
        h.push(("content-type", "application/json"));
    }
    raw_request(base, route.method, target, &h, &body).await
}

/// What a successful traversal would have changed, read as its rightful owner.
#[derive(Debug, PartialEq)]
struct Observed {
    org: Value,
    tokens: Value,
    intruder_orgs: Value,
}

async fn observe(s: &TestStack, owner: &str, intruder: &str, org: &str) -> Observed {
    let detail = s
        .get(&format!("/v1/organizations/{org}"), Some(owner))
        .await;
    assert_eq!(detail.status, 200, "{:?}", detail.body);
    let tokens = s
        .get(&format!("/v1/organizations/{org}/tokens"), Some(owner))
        .await;
    assert_eq!(tokens.status, 200, "{:?}", tokens.body);
    let me = s.get("/v1/auth/me", Some(intruder)).await;
    assert_eq!(me.status, 200, "{:?}", me.body);
    Observed {
        org: detail.body,
        tokens: tokens.body["balance"].clone(),
        intruder_orgs: me.body["memberships"].clone(),
    }
}

#[tokio::test]
async fn no_spelling_of_a_public_path_reaches_an_internal_route_on_either_host() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("traversal-owner@example.com").await;
    let intruder = s.sign_in("traversal-intruder@example.com").await;
    let me = s.get("/v1/auth/me", Some(&intruder)).await;
    let user = me.text("user_id").to_owned();
    let before = observe(&s, &owner, &intruder, &org).await;
    assert_eq!(before.org["kyc_status"], "unverified", "{:?}", before.org);

    let auth = format!("Bearer {intruder}");
    let mut cases = vec![];
    for route in internal_routes(&org, &user) {
        for (product, prefix) in prefixes(&org) {
            let n = segments(&prefix);
            for ups in [n.saturating_sub(1), n, n + 1] {
                for target in spellings(&prefix, ups, &route.target) {
                    cases.push((product, target, route.method, route.body.clone()));
                }
            }
        }
        for host in [false, true] {
            let bare = route.target.replacen("/internal", "/%69nternal", 1);
            cases.push((host, route.target.clone(), route.method, route.body.clone()));
            cases.push((host, bare, route.method, route.body.clone()));
            cases.push((
                host,
                format!("/{}", route.target),
                route.method,
                route.body.clone(),
            ));
        }
        for target in [
            format!("/core-api{}", route.target),
            format!("/core-api/{}", route.target),
            format!(
                "/core-api{}",
                route.target.replacen("/internal", "/%69nternal", 1)
            ),
        ] {
            cases.push((true, target, route.method, route.body.clone()));
        }
    }
    assert!(cases.len() > 2000, "{} cases", cases.len());

    let mut reached = vec![];
    for chunk in cases.chunks(64) {
        let answers = join_all(chunk.iter().map(|(product, target, method, body)| {
            let base = if *product { s.product() } else { s.core() };
            let route = Internal {
                service: "",
                method,
                target: target.clone(),
                body: body.clone(),
            };
            let auth = auth.clone();
            async move {
                let r = send(base, &route, target, &[("authorization", &auth)]).await;
                (product, target, r)
            }
        }))
        .await;
        for (product, target, r) in answers {
            // 400 (not canonical) or 404 (no public route): refused at the
            // gateway with a JSON error, never forwarded.
            if !(r.status == 400 || r.status == 404) || r.error().is_empty() {
                reached.push(format!(
                    "{} {target} -> {} {:?}",
                    if *product { "product" } else { "core" },
                    r.status,
                    r.body
                ));
            }
        }
    }
    assert!(
        reached.is_empty(),
        "{} of {} spellings were not refused at the gateway:\n{}",
        reached.len(),
        cases.len(),
        reached.join("\n")
    );
    // Nothing changed: the organization is not verified, the intruder is not
    // its owner, no token was spent.
    assert_eq!(observe(&s, &owner, &intruder, &org).await, before);
}

#[tokio::test]
async fn internal_routes_refuse_the_gateways_key_whatever_the_spelling() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("gw-key-owner@example.com").await;
    let intruder = s.sign_in("gw-key-intruder@example.com").await;
    let me = s.get("/v1/auth/me", Some(&intruder)).await;
    let user = me.text("user_id").to_owned();
    let identity: hub_domain::Identity = serde_json::from_value(me.body).expect("an Identity");
    let before = observe(&s, &owner, &intruder, &org).await;

    let mut reached = vec![];
    let mut tried = 0;
    for route in internal_routes(&org, &user) {
        let base = s.service_url(route.service).to_owned();
        let minter = Minter::new(
            "gateway",
            route.service,
            &secrecy::SecretString::from(s.gateway_key(route.service)),
        )
        .expect("minter");
        let rest = route
            .target
            .strip_prefix("/internal")
            .expect("an internal route");
        for target in [
            route.target.clone(),
            format!("/%69nternal{rest}"),
            format!("/%69%6e%74%65%72%6e%61%6c{rest}"),
            format!("/v1/organizations/x/../..{}", route.target),
            format!("/v1/organizations/%2e%2e{}", route.target),
            format!("/{}", route.target),
            format!("/internal/.{rest}"),
        ] {
            let body = match &route.body {
                Value::Null => vec![],
                b => b.to_string().into_bytes(),
            };
            // Signed for exactly the bytes sent: only the route decides.
            let (a, sig) = minter.sign(
                Some(identity.clone()),
                Some(hub_domain::Credential {
                    kind: hub_domain::CredentialKind::Session,
                    id: uuid::Uuid::new_v4(),
                }),
                false,
                &RequestFacts {
                    method: route.method,
                    path_and_query: &target,
                    body: &body,
                    idempotency_key: None,
                    ip: "127.0.0.1",
                    request_id: "traversal",
                    deadline_ms: None,
                },
            );
            let r = send(
                &base,
                &route,
                &target,
                &[("x-hub-assertion", &a), ("x-hub-signature", &sig)],
            )
            .await;
            tried += 1;
            // 400 (not canonical), 401 (the gateway's key on an internal
            // route) or 404 (no such route): never a handler's answer.
            if !matches!(r.status, 400 | 401 | 404) || r.error().is_empty() {
                reached.push(format!(
                    "{} {} {target} -> {} {:?}",
                    route.service, route.method, r.status, r.body
                ));
            }
        }
    }
    assert!(
        reached.is_empty(),
        "{} of {tried} reached an internal handler with the gateway's key:\n{}",
        reached.len(),
        reached.join("\n")
    );
    assert_eq!(observe(&s, &owner, &intruder, &org).await, before);
}

#[tokio::test]
async fn an_internal_handler_serves_its_listed_caller_only() {
    // Even where a receiver's route list is too wide (here: the agent's key
    // listed on kyc's routes), the handler itself refuses a caller it does not
    // serve.
    let s = TestStack::spawn_with(StackOptions {
        org_billing_toml: "[assertion.callers.agent]\nroutes = [\
            \"GET /internal/v1/organizations/lookup\", \
            \"GET /internal/v1/organizations/*/profile\", \
            \"PUT /internal/v1/organizations/*/kyc-state\"]\n"
            .into(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("peer-owner@example.com").await;
    let state = json!({
        "version": i64::MAX, "kyc_status": "verified", "kyc_tier": 9,
        "kyc_verified_at": "2026-01-01T00:00:00Z", "legal_identity": null
    });
    // The agent's own route answers (the key and the list are right)...
    let lookup = s
        .internal_call(
            s.service_url("org_billing"),
            "GET",
            "/internal/v1/organizations/lookup?q=Acme",
            &owner,
            Value::Null,
        )
        .await;
    assert_eq!(lookup.status, 200, "{:?}", lookup.body);
    // ...kyc's are refused to it by the handlers.
    let profile = s
        .internal_call(
            s.service_url("org_billing"),
            "GET",
            &format!("/internal/v1/organizations/{org}/profile"),
            &owner,
            Value::Null,
        )
        .await;
    assert_eq!(profile.status, 403, "{:?}", profile.body);
    assert!(profile.error().contains("agent"), "{:?}", profile.body);
    let put = s
        .internal_call(
            s.service_url("org_billing"),
            "PUT",
            &format!("/internal/v1/organizations/{org}/kyc-state"),
            &owner,
            state,
        )
        .await;
    assert_eq!(put.status, 403, "{:?}", put.body);
    let detail = s
        .get(&format!("/v1/organizations/{org}"), Some(&owner))
        .await;
    assert_eq!(detail.body["kyc_status"], "unverified", "{:?}", detail.body);
}
