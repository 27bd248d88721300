//! Passkeys (issue 38) through the gateway, with a software authenticator
//! (webauthn-authenticator-rs's SoftPasskey: real P-256 keys, CBOR and
//! signatures made by a second implementation, never by the server's):
//! registration, usernameless sign-in, the second factor after a magic link,
//! a wrong origin, a replayed challenge, a counter gone back, a deleted
//! passkey, renaming, another person's passkey, the recent-sign-in rule, the
//! staff rule on the last factor, the mail, the audit and the `amr` of the
//! session and of the OpenID Provider's tokens.
//!
//! SoftPasskey makes no resident keys, keeps no user handle and answers only
//! for credentials the request allows: the test plays the part of a
//! discoverable authenticator's storage, creating the key as non-resident,
//! naming the credential it holds (`allowCredentials`) at a usernameless
//! sign-in and returning the user handle it was made with (the handle is not
//! signed, as in WebAuthn). The browser test (console_passkeys.rs) uses
//! Chromium's virtual authenticator with real resident keys.

use crate::mfa::{code, email, enable, mfa_token, next_step, wrong_code};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use serde_json::{json, Value};
use tests_e2e::{random_ip, Json, Resp, StackOptions, TestStack};
use webauthn_authenticator_rs::{
    prelude::{CreationChallengeResponse, RequestChallengeResponse, Url, WebauthnAuthenticator},
    softpasskey::SoftPasskey,
};

/// The console's origin in identity's default settings.
const ORIGIN: &str = "http://localhost:8070";

/// A person's authenticator holding one passkey.
struct Key {
    auth: WebauthnAuthenticator<SoftPasskey>,
    /// The credential id (base64url), once registered.
    id: String,
    /// The user handle it was made with (base64url).
    user_handle: String,
}

impl Key {
    fn new() -> Key {
        Key {
            // `true`: the soft key reports user verification (a PIN or a
            // fingerprint on a real one), which passkeys require.
            auth: WebauthnAuthenticator::new(SoftPasskey::new(true)),
            id: String::new(),
            user_handle: String::new(),
        }
    }

    /// The browser's `create()` for `options` (the `options` member of
    /// register/options) at `origin`.
    fn create(&mut self, options: &Value, origin: &str) -> Value {
        // SoftPasskey refuses to make resident keys; the test keeps what a
        // resident key would (the credential id, the user handle) itself.
        let mut options = options.clone();
        let sel = &mut options["publicKey"]["authenticatorSelection"];
        sel["residentKey"] = json!("discouraged");
        sel["requireResidentKey"] = json!(false);
        let ccr: CreationChallengeResponse =
            serde_json::from_value(options.clone()).expect("creation options");
        let cred = self
            .auth
            .do_registration(Url::parse(origin).expect("origin"), ccr)
            .unwrap_or_else(|e| panic!("the authenticator makes no credential: {e:?}"));
        let v = serde_json::to_value(&cred).expect("JSON");
        self.id = v["id"].as_str().expect("credential id").to_owned();
        self.user_handle = options["publicKey"]["user"]["id"]
            .as_str()
            .expect("user id")
            .to_owned();
        v
    }

    /// The browser's `get()` for `options` (the `options` member of
    /// login/options) at `origin`.
    fn get(&mut self, options: &Value, origin: &str) -> Value {
        let mut options = options.clone();
        if options["publicKey"]["allowCredentials"]
            .as_array()
            .is_none_or(|a| a.is_empty())
        {
            // Discoverable: the authenticator knows which credential it holds.
            options["publicKey"]["allowCredentials"] =
                json!([{"type": "public-key", "id": self.id}]);
        }
        let rcr: RequestChallengeResponse =
            serde_json::from_value(options).expect("request options");
        let cred = self
            .auth
            .do_authentication(Url::parse(origin).expect("origin"), rcr)
            .unwrap_or_else(|e| panic!("the authenticator does not sign: {e:?}"));
        let mut v = serde_json::to_value(&cred).expect("JSON");
        v["response"]["userHandle"] = json!(self.user_handle);
        v
    }
}

async fn public(s: &TestStack, path: &str, body: Value) -> Resp {
    s.call(
        "POST",
        &format!("{}{path}", s.core()),
        None,
        Some(body),
        &[("x-forwarded-for", &random_ip())],
    )
    .await
}

/// Register a passkey named `name` for `session` at `origin`: the answer.
async fn register(s: &TestStack, session: &str, key: &mut Key, name: &str, origin: &str) -> Resp {
    register_with(s, session, key, name, origin, json!({})).await
}

/// [`register`], with the options asked for with `body` (a code).
async fn register_with(
    s: &TestStack,
    session: &str,
    key: &mut Key,
    name: &str,
    origin: &str,
    body: Value,
) -> Resp {
    let o = s
        .post("/v1/auth/passkeys/register/options", Some(session), body)
        .await;
    assert_eq!(o.status, 200, "{:?}", o.body);
    let credential = key.create(&o.body["options"], origin);
    s.post(
        "/v1/auth/passkeys/register",
        Some(session),
        json!({"challenge_id": o.body["challenge_id"], "name": name, "credential": credential}),
    )
    .await
}

/// Usernameless options: (challenge_id, options).
async fn login_options(s: &TestStack, body: Value) -> (Value, Value) {
    let o = public(s, "/v1/auth/passkeys/login/options", body).await;
    assert_eq!(o.status, 200, "{:?}", o.body);
    (o.body["challenge_id"].clone(), o.body["options"].clone())
}

/// A whole usernameless sign-in at `origin`: the login answer.
async fn sign_in_with(s: &TestStack, key: &mut Key, origin: &str) -> Resp {
    let (challenge_id, options) = login_options(s, json!({})).await;
    let credential = key.get(&options, origin);
    public(
        s,
        "/v1/auth/passkeys/login",
        json!({"challenge_id": challenge_id, "credential": credential}),
    )
    .await
}

async fn amr_of(s: &TestStack, session: &str) -> Vec<String> {
    sqlx::query_scalar!(
        "SELECT amr FROM identity.sessions WHERE token_hash = $1",
        identity::tokens::hash(session),
    )
    .fetch_one(&s.db)
    .await
    .expect("the session's amr")
}

async fn my_actions(s: &TestStack, session: &str) -> Vec<(String, Value)> {
    let log = s.get("/v1/audit/me", Some(session)).await;
    assert_eq!(log.status, 200, "{:?}", log.body);
    log.body
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| (e.text("action").to_owned(), e["detail"].clone()))
        .collect()
}

#[tokio::test]
async fn a_person_adds_a_passkey_and_signs_in_with_it_alone() {
    use crate::mail::{mail_toml, messages, temp_dir, Sink, WAIT};
    let out = temp_dir("passkeys");
    let (_sink, url) = Sink::plain(&out).await;
    let s = TestStack::spawn_with(StackOptions {
        identity_toml: mail_toml(&url, None)
            .replace("echo_dev_token = false", "echo_dev_token = true"),
        ..Default::default()
    })
    .await;
    let user = email("passkey");
    let session = s.sign_in(&user).await;
    let me = s.get("/v1/auth/me", Some(&session)).await;
    let user_id = me.text("user_id").to_owned();

    // The options: this relying party, a discoverable key, the person
    // verified, no attestation asked.
    let o = s
        .post(
            "/v1/auth/passkeys/register/options",
            Some(&session),
            json!({}),
        )
        .await;
    assert_eq!(o.status, 200, "{:?}", o.body);
    let pk = &o.body["options"]["publicKey"];
    assert_eq!(pk["rp"]["id"], "localhost", "{pk:?}");
    assert_eq!(pk["authenticatorSelection"]["residentKey"], "required");
    assert_eq!(pk["authenticatorSelection"]["userVerification"], "required");
    assert_eq!(pk["attestation"], "none");
    assert_eq!(
        URL_SAFE_NO_PAD
            .decode(pk["user"]["id"].as_str().expect("user id"))
            .expect("base64url"),
        uuid::Uuid::parse_str(&user_id).expect("uuid").as_bytes(),
        "the user handle is the user's id"
    );
    let mut key = Key::new();
    let credential = key.create(&o.body["options"], ORIGIN);
    let body = json!({"challenge_id": o.body["challenge_id"], "name": "Work laptop",
                      "credential": credential});
    let r = s
        .post("/v1/auth/passkeys/register", Some(&session), body.clone())
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["name"], "Work laptop");
    assert!(r.body["last_used_at"].is_null(), "{:?}", r.body);
    let passkey_id = r.text("id").to_owned();
    // The same challenge again: it answered once already.
    let again = s
        .post("/v1/auth/passkeys/register", Some(&session), body)
        .await;
    assert_eq!(again.status, 400, "{:?}", again.body);
    let list = s.get("/v1/auth/passkeys", Some(&session)).await;
    assert_eq!(list.status, 200, "{:?}", list.body);
    assert_eq!(
        list.body.as_array().map(Vec::len),
        Some(1),
        "{:?}",
        list.body
    );

    // The account is told, with the passkey's name and no key material.
    let notice = tests_e2e::eventually(WAIT, || {
        let out = out.clone();
        let user = user.clone();
        async move {
            messages(&out)
                .into_iter()
                .find(|m| m.text("to").contains(&user) && m.text("subject").contains("passkey"))
        }
    })
    .await
    .expect("the passkey-added mail");
    assert!(notice.text("text").contains("Work laptop"), "{notice:?}");

    // Signed out, the person signs in with the passkey alone: no mail.
    let mails_before = messages(&out).len();
    let r = sign_in_with(&s, &mut key, ORIGIN).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let second = r.text("session_token").to_owned();
    let me = s.get("/v1/auth/me", Some(&second)).await;
    assert_eq!(me.status, 200, "{:?}", me.body);
    assert_eq!(me.text("user_id"), user_id);
    assert_eq!(
        messages(&out).len(),
        mails_before,
        "no mail for a passkey sign-in"
    );
    // A soft key is not backup eligible: bound to its device.
    assert_eq!(amr_of(&s, &second).await, ["hwk", "user", "mfa"]);
    let list = s.get("/v1/auth/passkeys", Some(&second)).await;
    assert!(list.body[0]["last_used_at"].is_string(), "{:?}", list.body);

    // Renaming: the owner only; another person's passkey is not found.
    let stranger = s.sign_in(&email("stranger")).await;
    let path = format!("/v1/auth/passkeys/{passkey_id}");
    let r = s
        .patch(&path, Some(&stranger), json!({"name": "mine now"}))
        .await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    assert_eq!(s.delete(&path, Some(&stranger)).await.status, 404);
    for bad in [
        json!({"name": ""}),
        json!({"name": "x".repeat(65)}),
        json!({"name": "a\u{7}b"}),
    ] {
        let r = s.patch(&path, Some(&second), bad.clone()).await;
        assert_eq!(r.status, 400, "{bad}: {:?}", r.body);
    }
    let r = s
        .patch(&path, Some(&second), json!({"name": "Old laptop"}))
        .await;
    assert_eq!(
        (r.status, r.text("name")),
        (200, "Old laptop"),
        "{:?}",
        r.body
    );

    let actions = my_actions(&s, &second).await;
    let names: Vec<&str> = actions.iter().map(|(a, _)| a.as_str()).collect();
    for want in ["auth.passkey_added", "auth.passkey_renamed"] {
        assert!(names.contains(&want), "{want}: {names:?}");
    }
    assert!(
        actions
            .iter()
            .any(|(a, d)| a == "auth.sign_in" && d["method"] == "passkey"),
        "{actions:?}"
    );
    assert!(
        !actions
            .iter()
            .any(|(_, d)| d.to_string().contains("laptop")),
        "no passkey name in the audit: {actions:?}"
    );

    // A mailed link alone adds no second passkey to an account that has one
    // (a stolen mailbox would make itself a lasting factor), nor codes.
    let r = s
        .post(
            "/v1/auth/passkeys/register/options",
            Some(&session),
            json!({}),
        )
        .await;
    assert_eq!(
        (r.status, &r.body["reauthenticate"]),
        (403, &json!(true)),
        "{:?}",
        r.body
    );
    let r = s
        .post("/v1/auth/mfa/enroll", Some(&session), json!({}))
        .await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    // The passkey's own session may.
    let r = s
        .post(
            "/v1/auth/passkeys/register/options",
            Some(&second),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);

    // Deleted (from the mailed link's session), the passkey opens nothing,
    // and the session it opened ends.
    let r = s.delete(&path, Some(&session)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["sessions_revoked"], 1, "{:?}", r.body);
    assert_eq!(s.get("/v1/auth/me", Some(&second)).await.status, 401);
    assert_eq!(s.get("/v1/auth/me", Some(&session)).await.status, 200);
    let r = sign_in_with(&s, &mut key, ORIGIN).await;
    assert_eq!(r.status, 401, "{:?}", r.body);
    assert!(my_actions(&s, &session)
        .await
        .iter()
        .any(|(a, _)| a == "auth.passkey_deleted"));
    tests_e2e::eventually(WAIT, || {
        let out = out.clone();
        let user = user.clone();
        async move {
            messages(&out).into_iter().find(|m| {
                m.text("to").contains(&user) && m.text("subject").contains("passkey was removed")
            })
        }
    })
    .await
    .expect("the passkey-removed mail");
}

#[tokio::test]
async fn a_wrong_origin_a_replayed_assertion_and_a_counter_gone_back_are_refused() {
    let s = TestStack::spawn().await;
    let user = email("refused");
    let session = s.sign_in(&user).await;
    let mut key = Key::new();
    // Made on another site's page: refused.
    let r = register(&s, &session, &mut key, "evil", "http://localhost:9999").await;
    assert_eq!(r.status, 422, "{:?}", r.body);
    // Another person's challenge: not this session's to answer.
    let stranger = s.sign_in(&email("other")).await;
    let o = s
        .post(
            "/v1/auth/passkeys/register/options",
            Some(&stranger),
            json!({}),
        )
        .await;
    let credential = key.create(&o.body["options"], ORIGIN);
    let r = s
        .post(
            "/v1/auth/passkeys/register",
            Some(&session),
            json!({"challenge_id": o.body["challenge_id"], "name": "x", "credential": credential}),
        )
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    let r = register(&s, &session, &mut key, "Phone", ORIGIN).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let passkey_id = r.text("id").to_owned();

    // Signed on another origin (a phishing page relaying the challenge).
    let r = sign_in_with(&s, &mut key, "http://localhost:9999").await;
    assert_eq!(r.status, 401, "{:?}", r.body);

    // A good assertion works once; replayed, its challenge is gone.
    let (challenge_id, options) = login_options(&s, json!({})).await;
    let credential = key.get(&options, ORIGIN);
    let body = json!({"challenge_id": challenge_id, "credential": credential});
    let r = public(&s, "/v1/auth/passkeys/login", body.clone()).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = public(&s, "/v1/auth/passkeys/login", body).await;
    assert_eq!(r.status, 401, "{:?}", r.body);
    // Nor does an assertion for one challenge answer another.
    let (other_challenge, _) = login_options(&s, json!({})).await;
    let (_, options) = login_options(&s, json!({})).await;
    let credential = key.get(&options, ORIGIN);
    let r = public(
        &s,
        "/v1/auth/passkeys/login",
        json!({"challenge_id": other_challenge, "credential": credential}),
    )
    .await;
    assert_eq!(r.status, 401, "{:?}", r.body);

    // The stored counter ahead of the key's (a clone of this key signed
    // more often): the key's next signature is refused and audited.
    let passkey_id = uuid::Uuid::parse_str(&passkey_id).expect("uuid");
    let stored = sqlx::query_scalar!(
        r#"SELECT (credential->'cred'->>'counter')::bigint AS "counter!"
           FROM identity.passkeys WHERE id = $1"#,
        passkey_id,
    )
    .fetch_one(&s.db)
    .await
    .expect("the stored counter");
    assert!(stored >= 1, "the counter was kept: {stored}");
    sqlx::query!(
        "UPDATE identity.passkeys SET credential = jsonb_set(credential, '{cred,counter}', '1000') \
         WHERE id = $1",
        passkey_id,
    )
    .execute(&s.db)
    .await
    .expect("counter moved");
    let r = sign_in_with(&s, &mut key, ORIGIN).await;
    assert_eq!(r.status, 401, "{:?}", r.body);
    let refused = my_actions(&s, &session).await;
    assert!(
        refused
            .iter()
            .any(|(a, d)| a == "auth.passkey_refused" && d["reason"] == "counter_regressed"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_passkey_is_the_second_factor_after_a_link_and_the_provider_says_so() {
    let s = TestStack::spawn().await;
    let user = email("two-step");
    let (session, secret, _) = enable(&s, &user).await;
    let mut key = Key::new();
    // Codes on, the mailed link's session adds a passkey with a code only.
    let r = s
        .post(
            "/v1/auth/passkeys/register/options",
            Some(&session),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    next_step(&s);
    let with_code = json!({"code": code(&s, &secret)});
    let r = register_with(&s, &session, &mut key, "Key", ORIGIN, with_code).await;
    assert_eq!(r.status, 201, "{:?}", r.body);

    let token = mfa_token(&s, &user).await;
    let v = {
        // The methods offered with the token.
        let ip = random_ip();
        let link = s.request_link_from(&user, &ip).await;
        s.verify_from(link.text("dev_token"), &ip).await
    };
    assert_eq!(
        v.body["methods"],
        json!(["totp", "passkey"]),
        "{:?}",
        v.body
    );

    // The options name this person's key only.
    let (challenge_id, options) = login_options(&s, json!({"mfa_token": token})).await;
    let allowed = options["publicKey"]["allowCredentials"]
        .as_array()
        .expect("allowCredentials");
    assert_eq!(allowed.len(), 1, "{options:?}");
    assert_eq!(allowed[0]["id"], json!(key.id));
    let credential = key.get(&options, ORIGIN);
    // Without the token the challenge is not a usernameless one.
    let r = public(
        &s,
        "/v1/auth/passkeys/login",
        json!({"challenge_id": challenge_id, "credential": credential}),
    )
    .await;
    assert_eq!(r.status, 401, "{:?}", r.body);
    let (challenge_id, options) = login_options(&s, json!({"mfa_token": token})).await;
    let credential = key.get(&options, ORIGIN);
    let r = public(
        &s,
        "/v1/auth/passkeys/login",
        json!({"challenge_id": challenge_id, "credential": credential, "mfa_token": token}),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let strong = r.text("session_token").to_owned();
    assert_eq!(amr_of(&s, &strong).await, ["email", "hwk", "user", "mfa"]);
    // The token is spent.
    let r = public(
        &s,
        "/v1/auth/passkeys/login/options",
        json!({"mfa_token": token}),
    )
    .await;
    assert_eq!(r.status, 401, "{:?}", r.body);
    // A code still works as the other way.
    next_step(&s);
    next_step(&s);
    let token = mfa_token(&s, &user).await;
    let r =
        crate::mfa::mfa_verify(&s, json!({"mfa_token": token, "code": code(&s, &secret)})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let coded = r.text("session_token").to_owned();
    assert_eq!(amr_of(&s, &coded).await, ["email", "otp", "mfa"]);

    // The OpenID Provider's ID token carries the session's amr.
    use crate::oidc_flow::{decode, exchange_code, query, sign_in_through, CB};
    let staff = s.sign_in("staff@example.com").await;
    let c = s
        .post(
            "/v1/admin/oauth-clients",
            Some(&staff),
            json!({"name": "Wiki", "kind": "public", "first_party": true,
                   "redirect_uris": [CB], "scopes": ["openid"]}),
        )
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    let client = c.text("id").to_owned();
    let verifier = "p".repeat(43);
    let acc = sign_in_through(&s, &client, &strong, &verifier, "openid", true).await;
    assert_eq!(acc.status, 200, "{:?}", acc.body);
    let code = query(acc.text("redirect_to"))["code"].clone();
    let t = exchange_code(&s, &client, None, &code, &verifier).await;
    assert_eq!(t.status, 200, "{:?}", t.body);
    let claims = decode(t.text("id_token").split('.').nth(1).expect("payload"));
    assert_eq!(
        claims["amr"],
        json!(["email", "hwk", "user", "mfa"]),
        "{claims:?}"
    );
    assert_eq!(claims["acr"], "urn:hub:acr:mfa");
}

#[tokio::test]
async fn adding_a_passkey_needs_a_recent_sign_in_or_a_code() {
    let s = TestStack::spawn().await;
    let user = email("stale");
    let (session, secret, _) = enable(&s, &user).await;
    s.age_session(&session).await;
    let r = s
        .post(
            "/v1/auth/passkeys/register/options",
            Some(&session),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    assert_eq!(r.body["reauthenticate"], true, "{:?}", r.body);
    let r = s
        .post(
            "/v1/auth/passkeys/register/options",
            Some(&session),
            json!({"code": wrong_code(&code(&s, &secret))}),
        )
        .await;
    assert_eq!(r.status, 422, "{:?}", r.body);
    next_step(&s);
    let r = s
        .post(
            "/v1/auth/passkeys/register/options",
            Some(&session),
            json!({"code": code(&s, &secret)}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert!(r.body["challenge_id"].is_string(), "{:?}", r.body);
}

#[tokio::test]
async fn staff_who_must_have_mfa_cannot_delete_their_last_factor() {
    let s = TestStack::spawn_with(StackOptions {
        identity_toml: "[mfa]\nstaff_required = true\n".to_owned(),
        ..Default::default()
    })
    .await;
    let plain = s.sign_in("staff@example.com").await;
    let mut key = Key::new();
    let r = register(&s, &plain, &mut key, "Staff key", ORIGIN).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let first = r.text("id").to_owned();
    // The passkey makes a staff session (it is a second factor).
    let r = sign_in_with(&s, &mut key, ORIGIN).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let strong = r.text("session_token").to_owned();
    assert_eq!(
        s.get("/v1/auth/me", Some(&strong)).await.body["staff"],
        true
    );
    assert_eq!(
        s.get("/v1/auth/me", Some(&plain)).await.body["staff"],
        false
    );

    let r = s
        .delete(&format!("/v1/auth/passkeys/{first}"), Some(&strong))
        .await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert_eq!(
        s.get("/v1/auth/passkeys", Some(&strong))
            .await
            .body
            .as_array()
            .map(Vec::len),
        Some(1),
        "the refused delete kept it"
    );
    // With a second one, the first may go.
    let mut other = Key::new();
    let r = register(&s, &strong, &mut other, "Spare", ORIGIN).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let r = s
        .delete(&format!("/v1/auth/passkeys/{first}"), Some(&strong))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);

    // Anyone else deletes their last passkey freely.
    let user = email("plain");
    let session = s.sign_in(&user).await;
    let mut k = Key::new();
    let r = register(&s, &session, &mut k, "Only", ORIGIN).await;
    let id = r.text("id").to_owned();
    let r = s
        .delete(&format!("/v1/auth/passkeys/{id}"), Some(&session))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}

/// Turn `email`'s codes on, then try to turn them off with a later code: the
/// answer's status.
async fn codes_on_then_off(s: &TestStack, email: &str) -> (u16, String) {
    let (session, secret, _) = enable(s, email).await;
    next_step(s);
    let body = json!({"code": code(s, &secret)});
    let r = s.post("/v1/auth/mfa/disable", Some(&session), body).await;
    (r.status, session)
}

#[tokio::test]
async fn staff_who_must_have_mfa_cannot_turn_off_their_only_codes() {
    let s = TestStack::spawn_with(StackOptions {
        identity_toml: "[mfa]\nstaff_required = true\n".to_owned(),
        ..Default::default()
    })
    .await;
    let (status, session) = codes_on_then_off(&s, "staff@example.com").await;
    assert_eq!(status, 409);
    let on = s.get("/v1/auth/mfa", Some(&session)).await;
    assert_eq!(on.body["enabled"], true, "{:?}", on.body);
    // Anyone else turns them off.
    assert_eq!(codes_on_then_off(&s, &email("codes")).await.0, 200);
}
