//! MFA (TOTP) through the gateway: enrollment and confirmation, sign-in in two
//! steps, codes used once, single-use recovery codes, the attempt limit and
//! expiry of the mfa_token, disabling with a code, and staff_required.
//!
//! The codes are computed by the TOTP below, written here from RFC 6238 on
//! ring's HMAC-SHA-1 and checked against the RFC's own test vectors, not by the
//! crate identity uses (totp-rs): a mistake in either implementation (the
//! dynamic truncation, the counter's encoding, the base32 secret, the step)
//! fails these tests instead of passing on both sides.

use serde_json::{json, Value};
use tests_e2e::Json;
use tests_e2e::{random_ip, Resp, StackOptions, TestStack};
use uuid::Uuid;

/// RFC 4648 base32 (upper case, no padding), as the otpauth URI carries it.
fn base32_decode(s: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let (mut out, mut buffer, mut bits) = (Vec::new(), 0u64, 0u32);
    for c in s.trim_end_matches('=').bytes() {
        let v = ALPHABET
            .iter()
            .position(|&a| a == c.to_ascii_uppercase())
            .unwrap_or_else(|| panic!("not base32: {s}")) as u64;
        buffer = (buffer << 5) | v;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    out
}

/// HOTP (RFC 4226) of `counter` with `digits` digits.
fn hotp(secret: &[u8], counter: u64, digits: u32) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, secret);
    let mac = ring::hmac::sign(&key, &counter.to_be_bytes());
    let h = mac.as_ref();
    let offset = (h[h.len() - 1] & 0x0f) as usize;
    let binary =
        u32::from_be_bytes([h[offset], h[offset + 1], h[offset + 2], h[offset + 3]]) & 0x7fff_ffff;
    format!(
        "{:0width$}",
        binary % 10u32.pow(digits),
        width = digits as usize
    )
}

/// TOTP (RFC 6238): HOTP of the 30-second step of `unix`.
fn totp(secret: &[u8], unix: i64, digits: u32) -> String {
    hotp(secret, (unix / 30) as u64, digits)
}

#[test]
fn the_tests_totp_follows_rfc_6238() {
    // RFC 6238 appendix B, SHA-1, seed "12345678901234567890", 8 digits.
    let seed = b"12345678901234567890";
    for (t, want) in [
        (59, "94287082"),
        (1111111109, "07081804"),
        (1111111111, "14050471"),
        (1234567890, "89005924"),
        (2000000000, "69279037"),
        (20000000000, "65353130"),
    ] {
        assert_eq!(totp(seed, t, 8), want, "t={t}");
    }
    // RFC 4226 appendix D, 6 digits.
    assert_eq!(hotp(seed, 0, 6), "755224");
    assert_eq!(hotp(seed, 9, 6), "520489");
    assert_eq!(base32_decode("GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"), seed);
}

/// The code of `secret` (base32) at the stack's now.
pub(crate) fn code(s: &TestStack, secret: &str) -> String {
    totp(&base32_decode(secret), s.clock.now().unix_timestamp(), 6)
}

/// A well-formed code that is not `right`.
pub(crate) fn wrong_code(right: &str) -> &'static str {
    if right == "000000" {
        "111111"
    } else {
        "000000"
    }
}

/// Move the stack's clock to the next 30-second step (codes already used are
/// refused until then).
pub(crate) fn next_step(s: &TestStack) {
    s.clock.advance(time::Duration::seconds(30));
}

pub(crate) fn email(what: &str) -> String {
    format!("{what}-{}@example.com", Uuid::new_v4().simple())
}

/// Request a link and verify it (from a fresh IP): verify's answer.
async fn verify_link(s: &TestStack, email: &str) -> Resp {
    let ip = random_ip();
    let link = s.request_link_from(email, &ip).await;
    assert_eq!(link.status, 200, "{:?}", link.body);
    let dev = link.text("dev_token").to_owned();
    s.verify_from(&dev, &ip).await
}

/// The first step of a sign-in with MFA on: the mfa_token.
pub(crate) async fn mfa_token(s: &TestStack, email: &str) -> String {
    let v = verify_link(s, email).await;
    assert_eq!(v.status, 200, "{:?}", v.body);
    assert_eq!(v.body["mfa_required"], true, "{:?}", v.body);
    assert!(v.body.get("session_token").is_none(), "{:?}", v.body);
    v.body["mfa_token"]
        .as_str()
        .expect("an mfa_token")
        .to_owned()
}

pub(crate) async fn mfa_verify(s: &TestStack, body: Value) -> Resp {
    s.call(
        "POST",
        &format!("{}/v1/auth/mfa/verify", s.core()),
        None,
        Some(body),
        &[("x-forwarded-for", &random_ip())],
    )
    .await
}

/// Enroll and confirm MFA for a new user of `email`; returns (session,
/// secret, recovery codes).
pub(crate) async fn enable(s: &TestStack, email: &str) -> (String, String, Vec<String>) {
    let session = s.sign_in(email).await;
    let e = s
        .post("/v1/auth/mfa/enroll", Some(&session), json!({}))
        .await;
    assert_eq!(e.status, 200, "{:?}", e.body);
    let secret = e.body["secret"].as_str().expect("secret").to_owned();
    let c = s
        .post(
            "/v1/auth/mfa/confirm",
            Some(&session),
            json!({"code": code(s, &secret)}),
        )
        .await;
    assert_eq!(c.status, 200, "{:?}", c.body);
    let codes = c.body["recovery_codes"]
        .as_array()
        .expect("recovery codes")
        .iter()
        .map(|v| v.text("").to_owned())
        .collect();
    (session, secret, codes)
}

fn actions(log: &Resp) -> Vec<String> {
    log.body
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| e.text("action").to_owned())
        .collect()
}

#[tokio::test]
async fn enrollment_confirmation_and_a_sign_in_with_a_code() {
    let s = TestStack::spawn().await;
    let user = email("mfa");
    let session = s.sign_in(&user).await;
    let status = s.get("/v1/auth/mfa", Some(&session)).await;
    assert_eq!(status.status, 200);
    assert_eq!(status.body, json!({"enabled": false, "enabled_at": null}));

    // Enrolling twice before confirming replaces the pending secret.
    let first = s
        .post("/v1/auth/mfa/enroll", Some(&session), json!({}))
        .await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    let second = s
        .post("/v1/auth/mfa/enroll", Some(&session), json!({}))
        .await;
    let (old, secret) = (
        first.body["secret"].as_str().expect("secret").to_owned(),
        second.body["secret"].as_str().expect("secret").to_owned(),
    );
    assert_ne!(old, secret);
    assert_eq!(base32_decode(&secret).len(), 20, "160 bits");
    let uri = second.body["otpauth_uri"].as_str().expect("uri");
    assert!(
        uri.starts_with(&format!("otpauth://totp/Hub:{}?", user.replace('@', "%40"))),
        "{uri}"
    );
    assert!(uri.contains(&format!("secret={secret}")), "{uri}");
    assert!(uri.contains("issuer=Hub"), "{uri}");
    let stale = s
        .post(
            "/v1/auth/mfa/confirm",
            Some(&session),
            json!({"code": code(&s, &old)}),
        )
        .await;
    assert_eq!(stale.status, 422, "the replaced secret: {:?}", stale.body);
    for bad in ["12345", "abcdef", "1234567"] {
        let r = s
            .post("/v1/auth/mfa/confirm", Some(&session), json!({"code": bad}))
            .await;
        assert_eq!(r.status, 400, "{bad}: {:?}", r.body);
    }
    // Still off until confirmed: sign-in needs no code yet.
    assert!(verify_link(&s, &user).await.body["session_token"].is_string());

    let confirm_code = code(&s, &secret);
    let c = s
        .post(
            "/v1/auth/mfa/confirm",
            Some(&session),
            json!({ "code": confirm_code }),
        )
        .await;
    assert_eq!(c.status, 200, "{:?}", c.body);
    let codes: Vec<&str> = c.body["recovery_codes"]
        .as_array()
        .expect("codes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(codes.len(), 10);
    let distinct: std::collections::HashSet<&&str> = codes.iter().collect();
    assert_eq!(distinct.len(), 10);
    let status = s.get("/v1/auth/mfa", Some(&session)).await;
    assert_eq!(status.body["enabled"], true);
    assert!(status.body["enabled_at"].is_string(), "{:?}", status.body);
    // On: no new enrollment, no second confirmation.
    assert_eq!(
        s.post("/v1/auth/mfa/enroll", Some(&session), json!({}))
            .await
            .status,
        409
    );
    assert_eq!(
        s.post(
            "/v1/auth/mfa/confirm",
            Some(&session),
            json!({"code": code(&s, &secret)})
        )
        .await
        .status,
        409
    );

    // Sign-in: verify asks for a code; the code used to confirm is spent.
    let token = mfa_token(&s, &user).await;
    let replay = mfa_verify(&s, json!({"mfa_token": token, "code": confirm_code})).await;
    assert_eq!(replay.status, 401, "a code works once: {:?}", replay.body);
    next_step(&s);
    let fresh = code(&s, &secret);
    let ok = mfa_verify(&s, json!({"mfa_token": token, "code": fresh})).await;
    assert_eq!(ok.status, 200, "{:?}", ok.body);
    let signed_in = ok.body["session_token"].as_str().expect("a session");
    let me = s.get("/v1/auth/me", Some(signed_in)).await;
    assert_eq!(me.body["email"], user.as_str());
    assert_eq!(me.body["staff"], false);
    // The mfa_token is used up; the same code on a new sign-in is a replay.
    let used = mfa_verify(&s, json!({"mfa_token": token, "code": fresh})).await;
    assert_eq!(used.status, 401);
    let token = mfa_token(&s, &user).await;
    let again = mfa_verify(&s, json!({"mfa_token": token, "code": fresh})).await;
    assert_eq!(again.status, 401, "replayed: {:?}", again.body);
    next_step(&s);
    let later = mfa_verify(&s, json!({"mfa_token": token, "code": code(&s, &secret)})).await;
    assert_eq!(later.status, 200, "{:?}", later.body);

    // Audited, never with the secret; the secret is sealed at rest.
    let log = s.get("/v1/audit/me", Some(&session)).await;
    let names = actions(&log);
    for want in ["auth.mfa_enrolled", "auth.mfa_enabled", "auth.mfa_failed"] {
        assert!(names.iter().any(|a| a == want), "{want} in {names:?}");
    }
    assert!(!log.body.to_string().contains(&secret));
    let raw = base32_decode(&secret);
    let row = sqlx::query_scalar!(
        r#"SELECT m.secret_sealed AS "sealed!" FROM identity.mfa m
             JOIN identity.users u ON u.id = m.user_id WHERE u.email = $1"#,
        user,
    )
    .fetch_one(&s.db)
    .await
    .expect("the mfa row");
    assert!(
        !row.windows(raw.len()).any(|w| w == raw.as_slice()),
        "sealed"
    );
    // Session-only: an API key cannot read or change MFA.
    let (owner, org) = s.org_with_owner(&email("key-owner")).await;
    let key = s.create_key(&owner, &org, Some("manager")).await;
    let key = key.text("token").to_owned();
    assert_eq!(s.get("/v1/auth/mfa", Some(&key)).await.status, 401);
    assert_eq!(
        s.post("/v1/auth/mfa/enroll", Some(&key), json!({}))
            .await
            .status,
        401
    );
}

#[tokio::test]
async fn recovery_codes_work_once_and_a_token_takes_five_wrong_codes() {
    let s = TestStack::spawn().await;
    let user = email("recover");
    let (_, secret, codes) = enable(&s, &user).await;

    // A recovery code, typed loosely, signs in once.
    let token = mfa_token(&s, &user).await;
    let loose = codes[0].to_uppercase().replace('-', " ");
    let r = mfa_verify(&s, json!({"mfa_token": token, "recovery_code": loose})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert!(r.body["session_token"].is_string());
    let token = mfa_token(&s, &user).await;
    let spent = mfa_verify(&s, json!({"mfa_token": token, "recovery_code": codes[0]})).await;
    assert_eq!(spent.status, 401, "single use: {:?}", spent.body);
    let other = mfa_verify(&s, json!({"mfa_token": token, "recovery_code": codes[1]})).await;
    assert_eq!(other.status, 200, "{:?}", other.body);

    // Malformed bodies are 400 and do not count.
    let token = mfa_token(&s, &user).await;
    for body in [
        json!({"mfa_token": token}),
        json!({"mfa_token": token, "code": "123456", "recovery_code": codes[2]}),
        json!({"mfa_token": token, "code": "12 456"}),
        json!({"mfa_token": token, "recovery_code": "x".repeat(65)}),
    ] {
        assert_eq!(mfa_verify(&s, body.clone()).await.status, 400, "{body}");
    }
    // Five wrong codes kill the token: the right one is refused after them.
    next_step(&s);
    let right = code(&s, &secret);
    let wrong = wrong_code(&right);
    for i in 0..5 {
        let r = mfa_verify(&s, json!({"mfa_token": token, "code": wrong})).await;
        assert_eq!(r.status, 401, "attempt {i}: {:?}", r.body);
    }
    let dead = mfa_verify(&s, json!({"mfa_token": token, "code": right})).await;
    assert_eq!(
        dead.status, 401,
        "dead after five failures: {:?}",
        dead.body
    );
    // The code itself was not spent: a new sign-in takes it.
    let token = mfa_token(&s, &user).await;
    let ok = mfa_verify(&s, json!({"mfa_token": token, "code": right})).await;
    assert_eq!(ok.status, 200, "{:?}", ok.body);
    let session = ok.text("session_token");
    let log = s.get("/v1/audit/me", Some(session)).await;
    let failed = actions(&log)
        .iter()
        .filter(|a| *a == "auth.mfa_failed")
        .count();
    assert!(failed >= 6, "each failure audited: {failed}");

    // An mfa_token lives five minutes. (An hour later: request-link allows
    // five links per email and hour.)
    s.clock.advance(time::Duration::hours(1));
    let right = code(&s, &secret);
    let token = mfa_token(&s, &user).await;
    let n = sqlx::query!(
        "UPDATE identity.mfa_challenges SET expires_at = now() - interval '1 second' \
         WHERE token_hash = sha256(convert_to($1, 'UTF8'))",
        token,
    )
    .execute(&s.db)
    .await
    .expect("expire the challenge")
    .rows_affected();
    assert_eq!(n, 1);
    let expired = mfa_verify(&s, json!({"mfa_token": token, "code": right})).await;
    assert_eq!(expired.status, 401, "{:?}", expired.body);
    let token = mfa_token(&s, &user).await;
    assert_eq!(
        mfa_verify(&s, json!({"mfa_token": token, "code": right}))
            .await
            .status,
        200
    );
    assert_eq!(
        mfa_verify(&s, json!({"mfa_token": "mfa_unknown", "code": right}))
            .await
            .status,
        401
    );
}

#[tokio::test]
async fn disabling_needs_a_code_or_a_recovery_code() {
    let s = TestStack::spawn().await;
    let user = email("disable");
    let (session, secret, codes) = enable(&s, &user).await;
    next_step(&s);
    for (body, want) in [
        (json!({}), 400),
        (json!({"code": "12345"}), 400),
        (json!({"code": wrong_code(&code(&s, &secret))}), 422),
        (json!({"recovery_code": "0000-0000"}), 422),
    ] {
        let r = s
            .post("/v1/auth/mfa/disable", Some(&session), body.clone())
            .await;
        assert_eq!(r.status, want, "{body}: {:?}", r.body);
    }
    assert_eq!(
        s.get("/v1/auth/mfa", Some(&session)).await.body["enabled"],
        true
    );
    let off = s
        .post(
            "/v1/auth/mfa/disable",
            Some(&session),
            json!({"code": code(&s, &secret)}),
        )
        .await;
    assert_eq!(off.status, 200, "{:?}", off.body);
    assert_eq!(off.body, json!({"enabled": false, "enabled_at": null}));
    assert_eq!(
        s.post(
            "/v1/auth/mfa/disable",
            Some(&session),
            json!({"code": code(&s, &secret)})
        )
        .await
        .status,
        409
    );
    // Off: sign-in needs no code; the old recovery codes are gone.
    assert!(verify_link(&s, &user).await.body["session_token"].is_string());
    let log = s.get("/v1/audit/me", Some(&session)).await;
    assert!(actions(&log).iter().any(|a| a == "auth.mfa_disabled"));
    let left = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM identity.mfa_recovery_codes r
             JOIN identity.users u ON u.id = r.user_id WHERE u.email = $1"#,
        user,
    )
    .fetch_one(&s.db)
    .await
    .expect("count");
    assert_eq!(left, 0);

    // On again (new codes), off with a recovery code; an old one does not work.
    next_step(&s);
    let e = s
        .post("/v1/auth/mfa/enroll", Some(&session), json!({}))
        .await;
    let secret = e.body["secret"].as_str().expect("secret").to_owned();
    let c = s
        .post(
            "/v1/auth/mfa/confirm",
            Some(&session),
            json!({"code": code(&s, &secret)}),
        )
        .await;
    assert_eq!(c.status, 200, "{:?}", c.body);
    let old = s
        .post(
            "/v1/auth/mfa/disable",
            Some(&session),
            json!({"recovery_code": codes[0]}),
        )
        .await;
    assert_eq!(old.status, 422, "{:?}", old.body);
    let new_code = c.body["recovery_codes"][3].as_str().expect("a code");
    let off = s
        .post(
            "/v1/auth/mfa/disable",
            Some(&session),
            json!({ "recovery_code": new_code }),
        )
        .await;
    assert_eq!(off.status, 200, "{:?}", off.body);
}

#[tokio::test]
async fn with_staff_required_staff_is_only_a_session_opened_through_mfa() {
    let s = TestStack::spawn_with(StackOptions {
        identity_toml: "[mfa]\nstaff_required = true\n".to_owned(),
        ..Default::default()
    })
    .await;
    let plain = s.sign_in("staff@example.com").await;
    let me = s.get("/v1/auth/me", Some(&plain)).await;
    assert_eq!(me.body["staff"], false, "{:?}", me.body);
    assert_eq!(s.get("/v1/admin/kyc", Some(&plain)).await.status, 403);

    let (_, secret, _) = enable(&s, "staff@example.com").await;
    next_step(&s);
    let token = mfa_token(&s, "staff@example.com").await;
    let r = mfa_verify(&s, json!({"mfa_token": token, "code": code(&s, &secret)})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let strong = r.body["session_token"]
        .as_str()
        .expect("session")
        .to_owned();
    let me = s.get("/v1/auth/me", Some(&strong)).await;
    assert_eq!(me.body["staff"], true, "{:?}", me.body);
    assert_eq!(s.get("/v1/admin/kyc", Some(&strong)).await.status, 200);
    // The session opened without MFA stays non-staff.
    assert_eq!(
        s.get("/v1/auth/me", Some(&plain)).await.body["staff"],
        false
    );
    // MFA never makes anyone else staff.
    let user = email("not-staff");
    let (_, secret, _) = enable(&s, &user).await;
    next_step(&s);
    let token = mfa_token(&s, &user).await;
    let r = mfa_verify(&s, json!({"mfa_token": token, "code": code(&s, &secret)})).await;
    let session = r.body["session_token"]
        .as_str()
        .expect("session")
        .to_owned();
    assert_eq!(
        s.get("/v1/auth/me", Some(&session)).await.body["staff"],
        false
    );
}

#[tokio::test]
async fn without_staff_required_staff_sign_in_as_before() {
    let s = TestStack::spawn().await;
    let plain = s.sign_in("staff@example.com").await;
    assert_eq!(s.get("/v1/auth/me", Some(&plain)).await.body["staff"], true);
}

#[tokio::test]
async fn a_users_code_attempts_are_bounded_per_hour_whatever_the_link_or_ip() {
    let s = TestStack::spawn_with(StackOptions {
        identity_toml: "[mfa]\nattempts_per_user_per_hour = 4\n".to_owned(),
        ..Default::default()
    })
    .await;
    let user = email("guessed");
    // Confirming took one attempt of the four.
    let (_, secret, _) = enable(&s, &user).await;
    next_step(&s);
    let right = code(&s, &secret);
    let wrong = wrong_code(&right);
    // Each guess on a fresh link from a fresh IP: the token limit never trips.
    for i in 0..3 {
        let token = mfa_token(&s, &user).await;
        let r = mfa_verify(&s, json!({"mfa_token": token, "code": wrong})).await;
        assert_eq!(r.status, 401, "guess {i}: {:?}", r.body);
    }
    let token = mfa_token(&s, &user).await;
    let r = mfa_verify(&s, json!({"mfa_token": token, "code": right})).await;
    assert_eq!(r.status, 429, "over the user's hourly budget: {:?}", r.body);
    // An hour later the right code opens the session.
    s.clock.advance(time::Duration::seconds(3601));
    let token = mfa_token(&s, &user).await;
    let r = mfa_verify(&s, json!({"mfa_token": token, "code": code(&s, &secret)})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}

/// `Retry-After` of a response, in seconds.
fn retry_after(r: &Resp) -> i64 {
    r.headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After: {:?} {:?}", r.headers, r.body))
}

#[tokio::test]
async fn wrong_codes_in_a_row_lock_the_user_out_longer_each_time_and_mail_the_account() {
    use crate::mail::{mail_toml, messages, temp_dir, Sink, WAIT};
    let out = temp_dir("mfa-lockout");
    let (_sink, url) = Sink::plain(&out).await;
    let toml = mail_toml(&url, None).replace("echo_dev_token = false", "echo_dev_token = true")
        + "[mfa]\nlockout_after_failures = 3\nlockout_base_secs = 60\nlockout_max_secs = 600\n";
    let s = TestStack::spawn_with(StackOptions {
        identity_toml: toml,
        ..Default::default()
    })
    .await;
    let user = email("locked");
    let session = s.sign_in(&user).await;
    let e = s
        .post("/v1/auth/mfa/enroll", Some(&session), json!({}))
        .await;
    assert_eq!(e.status, 200, "{:?}", e.body);
    let secret = e.body["secret"].as_str().expect("secret").to_owned();
    let confirm = |c: String| {
        let (s, session) = (&s, session.clone());
        async move {
            s.post("/v1/auth/mfa/confirm", Some(&session), json!({ "code": c }))
                .await
        }
    };
    let wrong = || wrong_code(&code(&s, &secret)).to_owned();

    // Two wrong codes are only wrong; the third (the budget) locks for 60 s.
    for i in 0..2 {
        let r = confirm(wrong()).await;
        assert_eq!(r.status, 422, "wrong code {i}: {:?}", r.body);
    }
    let r = confirm(wrong()).await;
    assert_eq!(r.status, 429, "{:?}", r.body);
    assert_eq!(retry_after(&r), 60);
    assert!(r.error().contains("locked"), "{:?}", r.body);
    // Locked: even the right code is refused, unchecked.
    let r = confirm(code(&s, &secret)).await;
    assert_eq!(r.status, 429, "{:?}", r.body);
    assert!((1..=60).contains(&retry_after(&r)), "{:?}", r.headers);

    // The lockout over, the next three wrong codes lock for twice as long.
    s.clock.advance(time::Duration::seconds(61));
    for i in 0..2 {
        let r = confirm(wrong()).await;
        assert_eq!(
            r.status, 422,
            "wrong code {i} after the lockout: {:?}",
            r.body
        );
    }
    let r = confirm(wrong()).await;
    assert_eq!(r.status, 429, "{:?}", r.body);
    assert_eq!(retry_after(&r), 120, "doubled");

    // Each lockout mailed the account's address, with no code in it. (The
    // sign-in link's own mail may or may not have gone out before it was used.)
    let notices: Vec<Value> = tests_e2e::eventually(WAIT, || {
        let (out, user) = (out.clone(), user.clone());
        async move {
            let notices: Vec<Value> = messages(&out)
                .into_iter()
                .filter(|m| {
                    m["subject"] == "Two-factor codes locked" && m["rcpt_tos"] == json!([user])
                })
                .collect();
            (notices.len() >= 2).then_some(notices)
        }
    })
    .await
    .expect("two lockout notices mailed");
    assert_eq!(notices.len(), 2, "{notices:?}");
    for m in &notices {
        let text = m["text"].as_str().expect("a text part");
        assert!(text.contains("locked"), "{text}");
        assert!(!text.contains(&secret), "no secret: {text}");
        let six_digits = text
            .as_bytes()
            .windows(6)
            .any(|w| w.iter().all(u8::is_ascii_digit));
        assert!(!six_digits, "no code: {text}");
    }
    // One notice per lockout, in whatever order the sink's files list them.
    let said: Vec<&str> = notices
        .iter()
        .map(|m| m["text"].as_str().expect("a text part"))
        .collect();
    for lockout in ["for 1 minute.", "for 2 minutes."] {
        assert_eq!(
            said.iter().filter(|t| t.contains(lockout)).count(),
            1,
            "one notice {lockout:?} in {said:?}"
        );
    }

    // Over, the right code turns MFA on (and starts the count over).
    s.clock.advance(time::Duration::seconds(121));
    let r = confirm(code(&s, &secret)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}

#[tokio::test]
async fn confirming_with_sign_out_other_sessions_revokes_the_others_and_keeps_this_one() {
    let s = TestStack::spawn().await;
    let user = email("signout");
    let current = s.sign_in(&user).await;
    let others = [s.sign_in(&user).await, s.sign_in(&user).await];
    // Cached at the gateway before the change.
    for t in others.iter().chain([&current]) {
        assert_eq!(s.get("/v1/auth/me", Some(t)).await.status, 200);
    }
    let e = s
        .post("/v1/auth/mfa/enroll", Some(&current), json!({}))
        .await;
    let secret = e.body["secret"].as_str().expect("secret").to_owned();
    let c = s
        .post(
            "/v1/auth/mfa/confirm",
            Some(&current),
            json!({"code": code(&s, &secret), "sign_out_other_sessions": true}),
        )
        .await;
    assert_eq!(c.status, 200, "{:?}", c.body);
    assert_eq!(c.body["other_sessions_revoked"], 2, "{:?}", c.body);
    assert_eq!(c.body["recovery_codes"].as_array().map(Vec::len), Some(10));
    for t in &others {
        let r = s.get("/v1/auth/me", Some(t)).await;
        assert_eq!(r.status, 401, "another session survived: {:?}", r.body);
    }
    assert_eq!(s.get("/v1/auth/me", Some(&current)).await.status, 200);
    let sessions = s.get("/v1/auth/sessions", Some(&current)).await;
    let live = sessions.body.as_array().expect("sessions");
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!(live[0]["current"], true);

    // Without the flag the other sessions stay.
    let user = email("keeps");
    let current = s.sign_in(&user).await;
    let other = s.sign_in(&user).await;
    let e = s
        .post("/v1/auth/mfa/enroll", Some(&current), json!({}))
        .await;
    let secret = e.body["secret"].as_str().expect("secret").to_owned();
    let c = s
        .post(
            "/v1/auth/mfa/confirm",
            Some(&current),
            json!({"code": code(&s, &secret)}),
        )
        .await;
    assert_eq!(c.status, 200, "{:?}", c.body);
    assert_eq!(c.body["other_sessions_revoked"], 0);
    assert_eq!(s.get("/v1/auth/me", Some(&other)).await.status, 200);
}

#[tokio::test]
async fn identity_refuses_to_start_with_echo_dev_token_outside_the_dev_profile() {
    use service_kit::service::Service;
    let s = TestStack::spawn().await;
    // The harness's identity layer echoes tokens (it is a dev profile).
    let settings = s.settings::<identity::Identity>("");
    assert!(settings.auth.echo_dev_token);
    let production = service_kit::Runtime {
        dev: false,
        ..Default::default()
    };
    let err = match identity::Identity::build(settings, production).await {
        Ok(_) => panic!("identity started with echo_dev_token in production"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("auth.echo_dev_token"), "{err}");
    assert!(err.contains("dev profile"), "{err}");
}
