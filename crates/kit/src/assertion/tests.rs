use super::*;
use crate::settings::{AssertionSettings, CallerSettings};
use crate::ApiError;
use actix_web::{dev::ServiceRequest, middleware::Next, web, HttpMessage};
use hub_domain::{
    Capability, Credential, CredentialKind, Identity, Membership, OrgId, OrgStatus, Role, UserId,
};
use secrecy::SecretString;
use std::collections::BTreeMap;
use std::sync::Arc;
use uuid::Uuid;

const GW_KEY: &str = "gateway-to-svc-key-0123";

fn settings(keys: &[&str], callers: &[(&str, &str, &[&str])]) -> AssertionSettings {
    AssertionSettings {
        keys: keys
            .iter()
            .map(|k| SecretString::from(k.to_string()))
            .collect(),
        max_age_secs: 30,
        replay_cache_entries: 1000,
        callers: callers
            .iter()
            .map(|(name, key, routes)| {
                (
                    name.to_string(),
                    CallerSettings {
                        keys: vec![SecretString::from(key.to_string())],
                        routes: routes.iter().map(|r| r.to_string()).collect(),
                    },
                )
            })
            .collect::<BTreeMap<_, _>>(),
    }
}

fn minter(iss: &str, aud: &str, key: &str) -> Minter {
    Minter::new(iss, aud, &SecretString::from(key.to_string())).expect("minter")
}

fn facts<'a>(method: &'a str, path: &'a str, body: &'a [u8]) -> RequestFacts<'a> {
    RequestFacts {
        method,
        path_and_query: path,
        body,
        idempotency_key: None,
        ip: "127.0.0.1",
        request_id: "r1",
        deadline_ms: None,
    }
}

fn identity() -> Identity {
    Identity {
        user_id: UserId::from_uuid(Uuid::nil()),
        email: "a@example.com".into(),
        name: String::new(),
        staff: true,
        memberships: vec![],
    }
}

#[test]
fn a_signed_assertion_verifies_once() {
    let v = Verifier::new("svc", &settings(&[GW_KEY], &[])).expect("verifier");
    let m = minter(GATEWAY, "svc", GW_KEY);
    let f = facts("POST", "/v1/x?y=1", b"{\"a\":1}");
    let (p, sig) = m.sign(Some(identity()), None, false, &f);
    let a = v.verify(&p, &sig, &f, now_unix()).expect("valid");
    assert_eq!(a.identity, Some(identity()));
    assert_eq!(
        v.verify(&p, &sig, &f, now_unix()),
        Err(VerifyError::Replayed)
    );
}

#[test]
fn a_replica_that_remembers_as_many_ids_as_it_may_refuses_new_ones_and_never_a_replay() {
    // With the old cache, full, an assertion taken earlier could be taken again.
    let mut s = settings(&[GW_KEY], &[]);
    s.replay_cache_entries = 3;
    let v = Verifier::new("svc", &s).expect("verifier");
    let m = minter(GATEWAY, "svc", GW_KEY);
    let f = facts("GET", "/v1/x", b"");
    let signed: Vec<_> = (0..4).map(|_| m.sign(None, None, false, &f)).collect();
    for (p, sig) in &signed[..3] {
        assert!(v.verify(p, sig, &f, now_unix()).is_ok());
    }
    let (p, sig) = &signed[3];
    assert_eq!(v.verify(p, sig, &f, now_unix()), Err(VerifyError::Busy));
    for (p, sig) in &signed[..3] {
        assert_eq!(v.verify(p, sig, &f, now_unix()), Err(VerifyError::Replayed));
    }
}

#[actix_web::test]
async fn a_busy_replica_answers_503_with_retry_after() {
    let mut s = settings(&[GW_KEY], &[]);
    s.replay_cache_entries = 1;
    let v = web::Data::new(Verifier::new("svc", &s).expect("verifier"));
    let app = actix_web::test::init_service(
        actix_web::App::new()
            .app_data(v)
            .wrap(actix_web::middleware::from_fn(require_assertion))
            .route("/v1/x", web::get().to(|| async { "ok" })),
    )
    .await;
    let m = minter(GATEWAY, "svc", GW_KEY);
    let f = facts("GET", "/v1/x", b"");
    let mut statuses = Vec::new();
    for _ in 0..2 {
        let (p, sig) = m.sign(None, None, false, &f);
        let req = actix_web::test::TestRequest::get()
            .uri("/v1/x")
            .insert_header((ASSERTION_HEADER, p))
            .insert_header((SIGNATURE_HEADER, sig))
            .to_request();
        let resp = actix_web::test::call_service(&app, req).await;
        statuses.push((
            resp.status().as_u16(),
            resp.headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap_or_default().to_owned()),
        ));
    }
    assert_eq!(
        statuses,
        vec![
            (200, None),
            (503, Some(crate::outage::RETRY_AFTER_SECS.to_string()))
        ]
    );
}

#[test]
fn the_assertion_is_bound_to_body_query_method_and_idempotency_key() {
    let v = Verifier::new("svc", &settings(&[GW_KEY], &[])).expect("verifier");
    let m = minter(GATEWAY, "svc", GW_KEY);
    let f = facts("POST", "/v1/x?y=1", b"{\"amount_minor\":1}");
    let (p, sig) = m.sign(Some(identity()), None, false, &f);
    let now = now_unix();
    for other in [
        facts("POST", "/v1/x?y=1", b"{\"amount_minor\":1000000}"),
        facts("POST", "/v1/x?y=2", b"{\"amount_minor\":1}"),
        facts("POST", "/v1/x", b"{\"amount_minor\":1}"),
        facts("PUT", "/v1/x?y=1", b"{\"amount_minor\":1}"),
        RequestFacts {
            idempotency_key: Some("k"),
            ..facts("POST", "/v1/x?y=1", b"{\"amount_minor\":1}")
        },
    ] {
        assert_eq!(
            v.verify(&p, &sig, &other, now),
            Err(VerifyError::WrongTarget)
        );
    }
    assert!(v.verify(&p, &sig, &f, now).is_ok(), "refusals take no id");
}

#[test]
fn tampering_wrong_keys_and_age_are_refused() {
    let v = Verifier::new("svc", &settings(&[GW_KEY], &[])).expect("verifier");
    let f = facts("GET", "/v1/profile", b"");
    let (p, sig) = minter(GATEWAY, "svc", GW_KEY).sign(None, None, false, &f);
    let (_, other_sig) = minter(GATEWAY, "svc", "fedcba9876543210fedc").sign(None, None, false, &f);
    let now = now_unix();
    assert_eq!(
        v.verify(&p, &other_sig, &f, now),
        Err(VerifyError::BadSignature)
    );
    assert_eq!(v.verify(&p, "zz", &f, now), Err(VerifyError::BadSignature));
    let mut forged = p.clone();
    forged.push('A');
    assert_eq!(
        v.verify(&forged, &sig, &f, now),
        Err(VerifyError::BadSignature)
    );
    assert_eq!(v.verify(&p, &sig, &f, now + 31), Err(VerifyError::Stale));
    assert_eq!(v.verify(&p, &sig, &f, now - 31), Err(VerifyError::Stale));
}

#[test]
fn a_key_is_good_for_its_receiver_only() {
    // The same key material configured at two services cannot happen with
    // per-receiver keys; the audience check refuses it even if it did.
    let v = Verifier::new("org_billing", &settings(&[GW_KEY], &[])).expect("verifier");
    let f = facts("GET", "/v1/x", b"");
    let (p, sig) = minter(GATEWAY, "identity", GW_KEY).sign(None, None, false, &f);
    assert_eq!(
        v.verify(&p, &sig, &f, now_unix()),
        Err(VerifyError::BadSignature)
    );
}

#[test]
fn a_calling_service_is_accepted_on_its_listed_routes_only() {
    let caller_key = "billing-to-identity-key-0123";
    let v = Verifier::new(
        "identity",
        &settings(
            &[GW_KEY],
            &[(
                "org_billing",
                caller_key,
                &["POST /internal/v1/organizations/*/owner"],
            )],
        ),
    )
    .expect("verifier");
    let billing = minter("org_billing", "identity", caller_key);
    let now = now_unix();
    let ok = facts("POST", "/internal/v1/organizations/abc/owner", b"{}");
    let (p, sig) = billing.sign(Some(identity()), None, false, &ok);
    assert!(v.verify(&p, &sig, &ok, now).is_ok());
    for bad in [
        facts("POST", "/v1/organizations/abc/members", b"{}"),
        facts("POST", "/internal/v1/organizations/abc/owner/x", b"{}"),
        facts("GET", "/internal/v1/organizations/abc/owner", b"{}"),
    ] {
        let (p, sig) = billing.sign(Some(identity()), None, false, &bad);
        assert_eq!(
            v.verify(&p, &sig, &bad, now),
            Err(VerifyError::RouteNotAllowed)
        );
    }
    // A service cannot pass itself off as the gateway, nor the gateway call internal routes.
    let mut forged = billing.sign_assertion(&Assertion {
        iss: GATEWAY.into(),
        aud: "identity".into(),
        identity: None,
        credential: None,
        memberships_truncated: false,
        ip: String::new(),
        request_id: String::new(),
        jti: Uuid::new_v4(),
        method: "GET".into(),
        path: "/v1/profile".into(),
        body_sha256: sha256_hex(b""),
        idempotency_key: None,
        iat: now,
        deadline_ms: None,
    });
    assert_eq!(
        v.verify(&forged.0, &forged.1, &facts("GET", "/v1/profile", b""), now),
        Err(VerifyError::BadSignature)
    );
    forged = minter(GATEWAY, "identity", GW_KEY).sign(None, None, false, &ok);
    assert_eq!(
        v.verify(&forged.0, &forged.1, &ok, now),
        Err(VerifyError::RouteNotAllowed)
    );
}

#[test]
fn every_configured_key_verifies() {
    let v = Verifier::new(
        "svc",
        &settings(&["new-key-0123456789", "old-key-0123456789"], &[]),
    )
    .expect("verifier");
    let f = facts("GET", "/v1/profile", b"");
    for k in ["new-key-0123456789", "old-key-0123456789"] {
        let (p, sig) = minter(GATEWAY, "svc", k).sign(None, None, false, &f);
        assert!(v.verify(&p, &sig, &f, now_unix()).is_ok());
    }
}

fn assertion_from(iss: &str) -> Assertion {
    Assertion {
        iss: iss.into(),
        aud: "svc".into(),
        identity: Some(identity()),
        credential: None,
        memberships_truncated: false,
        ip: String::new(),
        request_id: String::new(),
        jti: Uuid::new_v4(),
        method: "GET".into(),
        path: String::new(),
        body_sha256: String::new(),
        idempotency_key: None,
        iat: 0,
        deadline_ms: None,
    }
}

/// The `/internal` scope and the `Peer` extractor on their own: the
/// request already carries a verified assertion of `iss` (as behind
/// `require_assertion`), whatever path checks ran before.
async fn internal_status(iss: &'static str, path: &str) -> u16 {
    use actix_web::{middleware::from_fn, test, App, HttpResponse};
    async fn served(_peer: Peer<from::Kyc>) -> HttpResponse {
        HttpResponse::Ok().finish()
    }
    let app = test::init_service(
        App::new()
            .configure(|c| {
                internal(c, |c| {
                    c.route("/v1/x", web::get().to(served));
                })
            })
            .route("/v1/x", web::get().to(served))
            .wrap(from_fn(move |req: ServiceRequest, next: Next<_>| {
                req.extensions_mut().insert(Arc::new(assertion_from(iss)));
                next.call(req)
            })),
    )
    .await;
    let req = test::TestRequest::get().uri(path).to_request();
    test::call_service(&app, req).await.status().as_u16()
}

#[actix_web::test]
async fn the_internal_scope_refuses_the_gateway_on_the_matched_route() {
    assert_eq!(internal_status("kyc", "/internal/v1/x").await, 200);
    // actix decodes %69 before it routes: the scope still matches, and refuses.
    for path in ["/internal/v1/x", "/%69nternal/v1/x", "/%69%6E%74ernal/v1/x"] {
        assert_eq!(internal_status(GATEWAY, path).await, 401, "{path}");
    }
    assert_eq!(internal_status("kyc", "/%69nternal/v1/x").await, 200);
}

#[actix_web::test]
async fn a_peer_extractor_serves_the_service_it_names_only() {
    assert_eq!(internal_status("kyc", "/internal/v1/x").await, 200);
    for other in ["agent", "org_billing", "someone"] {
        assert_eq!(
            internal_status(other, "/internal/v1/x").await,
            403,
            "{other}"
        );
    }
    // Outside the scope, the extractor alone refuses the gateway too.
    assert_eq!(internal_status(GATEWAY, "/v1/x").await, 403);
}

#[test]
fn short_keys_are_refused() {
    assert!(Verifier::new("svc", &settings(&["short"], &[])).is_err());
    assert!(Minter::new("a", "b", &SecretString::from("short".to_string())).is_err());
}

/// A session (or key) caller writing, with `staff` and one membership.
fn writer(staff: bool, membership: Option<(OrgId, Role)>, kind: CredentialKind) -> Caller {
    Caller {
        identity: Identity {
            staff,
            memberships: membership
                .map(|(org_id, role)| Membership {
                    org_id,
                    role,
                    status: OrgStatus::Suspended,
                })
                .into_iter()
                .collect(),
            ..identity()
        },
        credential: Credential {
            kind,
            id: Uuid::nil(),
        },
        ip: String::new(),
        memberships_truncated: false,
        deadline_ms: None,
        writes: true,
        staff_reads: None,
    }
}

#[test]
fn taking_access_away_passes_the_suspension_and_serves_staff_anywhere() {
    let org = OrgId::new();
    let session = CredentialKind::Session;
    let owner = writer(false, Some((org, Role::Owner)), session);
    // A write that gives access is refused while suspended; one that takes it away is not.
    assert!(matches!(
        owner.require_session(org, Capability::Admin),
        Err(ApiError::Forbidden(m)) if m == SUSPENDED
    ));
    assert!(matches!(
        owner.require_to_reduce(org, Capability::Admin),
        Ok(Authority::Member(Role::Owner))
    ));
    // The role still counts; outsiders learn nothing; keys need a session.
    let visitor = writer(false, Some((org, Role::Visitor)), session);
    assert!(matches!(
        visitor.require_to_reduce(org, Capability::Admin),
        Err(ApiError::Forbidden(_))
    ));
    assert!(matches!(
        visitor.require_to_reduce(org, Capability::Read),
        Ok(Authority::Member(Role::Visitor))
    ));
    let outsider = writer(false, None, session);
    assert!(matches!(
        outsider.require_to_reduce(org, Capability::Admin),
        Err(ApiError::NotFound)
    ));
    let key = writer(false, Some((org, Role::Manager)), CredentialKind::ApiKey);
    assert!(matches!(
        key.require_to_reduce(org, Capability::Admin),
        Err(ApiError::Forbidden(_))
    ));
    // Staff act on any organization, members or not, as staff.
    for staff in [
        writer(true, None, session),
        writer(true, Some((org, Role::Visitor)), session),
    ] {
        assert!(matches!(
            staff.require_to_reduce(org, Capability::Admin),
            Ok(Authority::Staff)
        ));
    }
}
