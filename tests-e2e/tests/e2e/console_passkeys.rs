//! Passkeys in the console, as people use them: Chromium (through
//! ChromeDriver, as console.rs) with a virtual authenticator of WebDriver's
//! WebAuthn extension (a platform authenticator that holds discoverable
//! credentials and verifies the user without asking), against a stack whose
//! identity takes the console's origin as its relying party.
//!
//! Browsers refuse an IP address as a WebAuthn relying party id: the console
//! here is reached as `http://localhost:PORT` (a secure context, like any
//! loopback origin), and identity's `[passkeys]` says so.

use crate::console::{browser, browser_sign_in_with, enter, Browser, Env};
use crate::mail::{arrived, messages};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use fantoccini::{wd::WebDriverCompatibleCommand, Client, Locator};
use secrecy::SecretString;
use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::eventually;

const WAIT: Duration = Duration::from_secs(30);

/// A stack whose passkeys are the console's at `http://localhost:PORT`.
async fn env() -> Env {
    crate::console::env_at("localhost").await
}

/// The sign-in links mailed to `email` so far (other mails, such as the
/// notice of a passkey added, left out).
fn links(e: &Env, email: &str) -> Vec<String> {
    let base = format!("{}/sign-in?token=", e.url);
    messages(&e.out)
        .iter()
        .filter(|m| m["rcpt_tos"] == json!([email]))
        .filter_map(|m| {
            m["text"]
                .as_str()?
                .lines()
                .find(|l| l.starts_with(&base))
                .map(|l| l.trim().to_owned())
        })
        .collect()
}

/// The link of the `n`th sign-in mail to `email`.
async fn mailed_link(e: &Env, email: &str, n: usize) -> String {
    eventually(WAIT, || async {
        let all = links(e, email);
        (all.len() >= n).then(|| all[n - 1].clone())
    })
    .await
    .unwrap_or_else(|| panic!("{n} sign-in mail(s) to {email} did not arrive"))
}

/// Sign `b` in as `email` with the `n`th mailed sign-in link, the keyboard
/// only.
async fn sign_in_by_mail(b: &Browser, e: &Env, email: &str, n: usize) {
    browser_sign_in_with(b, e, email, mailed_link(e, email, n)).await
}

/// A command of the session the WebDriver standard's core lacks (fantoccini
/// sends it as given): `session/<id>/<path>` with a JSON body or none.
#[derive(Debug)]
struct Command {
    path: String,
    method: http::Method,
    body: Option<Value>,
}

impl WebDriverCompatibleCommand for Command {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/{}",
            session_id.unwrap_or_default(),
            self.path
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (
            self.method.clone(),
            self.body.as_ref().map(Value::to_string),
        )
    }
}

/// A DevTools command, through ChromeDriver's `goog/cdp/execute`.
fn cdp(cmd: &str, params: Value) -> Command {
    Command {
        path: "goog/cdp/execute".into(),
        method: http::Method::POST,
        body: Some(json!({ "cmd": cmd, "params": params })),
    }
}

/// From the next page on, the browser says it has no passkey autofill
/// (`isConditionalMediationAvailable()` false), as a browser without it.
///
/// Chromium's virtual authenticator answers the email field's background
/// request (conditional mediation) at once, as if the person had picked
/// the passkey in the autofill: good to test that path, but then the
/// sign-in page never waits for its button.
async fn no_autofill(c: &Client) {
    c.issue_cmd(cdp(
        "Page.addScriptToEvaluateOnNewDocument",
        json!({ "source": "Object.defineProperty(PublicKeyCredential, \
            'isConditionalMediationAvailable', { value: () => Promise.resolve(false) });" }),
    ))
    .await
    .expect("DevTools adds the script");
}

/// A virtual authenticator in `c`'s browser (WebDriver's "Add Virtual
/// Authenticator", WebAuthn Level 2 §11.3): a platform authenticator (CTAP2,
/// internal) that keeps discoverable credentials, verifies the user and
/// consents without asking. Its id.
async fn virtual_authenticator(c: &Client) -> String {
    let added = c
        .issue_cmd(Command {
            path: "webauthn/authenticator".into(),
            method: http::Method::POST,
            body: Some(json!({
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": true,
                "hasUserVerification": true,
                "isUserVerified": true,
                "isUserConsenting": true,
            })),
        })
        .await
        .expect("ChromeDriver adds a virtual authenticator");
    added.as_str().expect("the authenticator's id").to_owned()
}

/// The credentials the virtual authenticator holds.
async fn held(c: &Client, authenticator: &str) -> Vec<Value> {
    let list = c
        .issue_cmd(Command {
            path: format!("webauthn/authenticator/{authenticator}/credentials"),
            method: http::Method::GET,
            body: None,
        })
        .await
        .expect("the authenticator's credentials");
    list.as_array().cloned().expect("a list")
}

/// The hub session the browser's console cookie holds (sealed: opened with
/// the console's key, as the console does).
async fn session_of(b: &Browser, e: &Env) -> String {
    let cookie =
        b.c.get_named_cookie(console::session::PLAIN_COOKIE)
            .await
            .expect("the console's cookie");
    let sealed = URL_SAFE_NO_PAD.decode(cookie.value()).expect("base64url");
    let sealer = service_kit::sealed::Sealer::new(&[SecretString::from(e.key.clone())])
        .expect("the console's key");
    let state: console::session::State = sealer
        .open_json(&sealed, b"hub-console-cookie-v1")
        .expect("the cookie opens");
    state.token.expect("a session in the cookie")
}

/// Wait until the element at `css` is shown (the script shows what needs
/// WebAuthn once it has checked the browser has it).
async fn shown(b: &Browser, css: &str) -> fantoccini::elements::Element {
    eventually(WAIT, || async {
        let el = b.c.find(Locator::Css(css)).await.ok()?;
        el.is_displayed().await.ok()?.then_some(el)
    })
    .await
    .unwrap_or_else(|| panic!("{css} never showed"))
}

/// Wait until the passkey `name` is listed on the security page (or fail
/// with what the page's alert says instead).
async fn listed(b: &Browser, name: &str) {
    let got = eventually(WAIT, || async {
        if let Ok(list) = b.c.find(Locator::Css("#passkey-list")).await {
            if list.text().await.ok()?.contains(name) {
                return Some(Ok(()));
            }
        }
        let alert =
            b.c.find(Locator::Css("[data-passkey-alert]"))
                .await
                .ok()?
                .text()
                .await
                .ok()?;
        (!alert.is_empty()).then_some(Err(alert))
    })
    .await;
    match got {
        Some(Ok(())) => {}
        Some(Err(alert)) => panic!("{name:?} was not added: {alert}"),
        None => panic!("{name:?} never listed: {}", b.source().await),
    }
}

/// The person's passkeys, over the API with `session`.
async fn passkeys(e: &Env, session: &str) -> Vec<Value> {
    let r = e.s.get("/v1/auth/passkeys", Some(session)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body.as_array().cloned().expect("a list")
}

#[tokio::test]
async fn a_person_adds_a_passkey_on_the_security_page_and_signs_in_with_it_without_mail() {
    let e = env().await;
    let mut b = browser("passkeys").await;
    let authenticator = virtual_authenticator(&b.c).await;
    sign_in_by_mail(&b, &e, "ada@example.com", 1).await;

    // The security page: no passkey yet; the script shows the form to add
    // one (WebAuthn is there) and hides the note that it is not.
    b.c.goto(&format!("{}/account/security", e.url))
        .await
        .expect("security");
    b.heading("Your account").await;
    b.wait_text("#passkeys", "No passkeys yet.").await;
    let name = shown(&b, "#passkey-name").await;
    let note =
        b.c.find(Locator::Css("[data-passkey-unsupported]"))
            .await
            .expect("the note");
    assert!(!note.is_displayed().await.expect("displayed"));
    b.check("security-no-passkey").await;

    // The keyboard only: the name, then Enter submits; the browser's
    // ceremony (the virtual authenticator answers); the page comes back
    // with the passkey listed and says so.
    name.click().await.expect("focus the name");
    b.type_here(&format!("Work laptop{}", enter())).await;
    listed(&b, "Work laptop").await;
    assert_eq!(b.path().await, "/account/security");
    b.wait_text("[role=status]", "The passkey was added.").await;
    let row = b.text("#passkey-list tbody tr").await;
    assert!(row.contains("Not yet"), "never used yet: {row}");
    assert_eq!(held(&b.c, &authenticator).await.len(), 1);
    b.check("security-passkey").await;

    // The API agrees: exactly one passkey, under the name typed.
    let session = session_of(&b, &e).await;
    let list = passkeys(&e, &session).await;
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["name"], "Work laptop");
    assert!(list[0]["last_used_at"].is_null(), "{list:?}");

    // Türkçe: the same section in Turkish.
    b.c.find(Locator::Css("a[hreflang=tr]"))
        .await
        .expect("the language switch")
        .click()
        .await
        .expect("switch");
    b.heading("Hesabınız").await;
    b.wait_text("#passkeys h2", "Geçiş anahtarları").await;
    let row = b.text("#passkey-list tbody tr").await;
    assert!(
        row.contains("Work laptop") && row.contains("Henüz kullanılmadı"),
        "{row}"
    );
    shown(&b, "#passkey-name").await;
    b.check("security-passkey-tr").await;
    b.c.find(Locator::Css("a[hreflang=en]"))
        .await
        .expect("the language switch")
        .click()
        .await
        .expect("switch");
    b.heading("Your account").await;

    // Identity tells the person by mail that a passkey was added (once it
    // is here, nothing else is on its way).
    let notice = arrived(&e.out, "ada@example.com", 2).await;
    let text = notice[1]["text"].as_str().expect("a text part");
    assert!(text.contains("Work laptop"), "{text}");

    // Signed out, back with the passkey: no mail this time. First the
    // email field's autofill (the background request, which the virtual
    // authenticator answers as if the person picked the passkey there).
    let mails = messages(&e.out).len();
    let sign_out = || async {
        b.c.find(Locator::Css("header form[action='/sign-out'] button"))
            .await
            .expect("sign out")
            .click()
            .await
            .expect("click");
    };
    sign_out().await;
    b.heading("Organizations").await;
    assert_eq!(b.path().await, "/orgs");
    let autofilled = session_of(&b, &e).await;
    assert_ne!(autofilled, session, "a new session");
    assert_eq!(
        e.s.get("/v1/auth/me", Some(&autofilled)).await.body["email"],
        "ada@example.com"
    );

    // Then the button, in a browser without the autofill.
    no_autofill(&b.c).await;
    sign_out().await;
    b.heading("Sign in").await;
    let email =
        b.c.find(Locator::Id("email"))
            .await
            .expect("the email field");
    assert_eq!(
        email.attr("autocomplete").await.expect("attr").as_deref(),
        Some("email webauthn"),
        "the field offers passkeys as autofill"
    );
    let button = shown(&b, "#passkey-start").await;
    assert_eq!(button.text().await.expect("text"), "Sign in with a passkey");
    b.check("sign-in-passkey").await;
    button.click().await.expect("press the passkey button");
    b.heading("Organizations").await;
    assert_eq!(b.path().await, "/orgs");
    assert_eq!(
        messages(&e.out).len(),
        mails,
        "a passkey sign-in sends no mail"
    );
    assert_eq!(links(&e, "ada@example.com").len(), 1, "one link, the first");

    // A session of its own, of the same person; the passkey now used.
    let fresh = session_of(&b, &e).await;
    assert!(fresh != session && fresh != autofilled, "a new session");
    let me = e.s.get("/v1/auth/me", Some(&fresh)).await;
    assert_eq!(me.status, 200, "{:?}", me.body);
    assert_eq!(me.body["email"], "ada@example.com", "{:?}", me.body);
    let list = passkeys(&e, &fresh).await;
    assert_eq!(list.len(), 1, "{list:?}");
    assert!(list[0]["last_used_at"].is_string(), "{list:?}");

    // Renamed and deleted with plain forms.
    b.c.goto(&format!("{}/account/security", e.url))
        .await
        .expect("security");
    let id = list[0]["id"].as_str().expect("an id").to_owned();
    let field =
        b.c.find(Locator::Id(&format!("pk-{id}")))
            .await
            .expect("the rename field");
    field.clear().await.expect("clear");
    field
        .send_keys(&format!("Home laptop{}", enter()))
        .await
        .expect("type");
    b.wait_text("[role=status]", "Saved.").await;
    b.wait_text("#passkey-list", "Home laptop").await;
    assert!(
        !b.text("#passkey-list").await.contains("Not yet"),
        "it was used"
    );
    assert_eq!(passkeys(&e, &fresh).await[0]["name"], "Home laptop");
    b.c.find(Locator::Css(&format!(
        "form[action='/account/passkeys/{id}/delete'] button"
    )))
    .await
    .expect("delete")
    .click()
    .await
    .expect("click");
    b.wait_text("[role=status]", "The passkey was deleted.")
        .await;
    b.wait_text("#passkeys", "No passkeys yet.").await;
    assert!(passkeys(&e, &fresh).await.is_empty());
    b.c.clone().close().await.expect("close");
}

#[tokio::test]
async fn a_person_with_two_step_verification_confirms_the_mailed_link_with_a_passkey() {
    let e = env().await;
    // Two-step verification on first (over the API: the account has no
    // factor yet, so a mailed link's session may add one).
    let session = crate::console::mailed_session(&e, "grace@example.com", 1).await;
    let enrol =
        e.s.post("/v1/auth/mfa/enroll", Some(&session), json!({}))
            .await;
    assert_eq!(enrol.status, 200, "{:?}", enrol.body);
    let uri = url::Url::parse(enrol.text("otpauth_uri")).expect("an otpauth URI");
    let secret = uri
        .query_pairs()
        .find(|(k, _)| k == "secret")
        .map(|(_, v)| v.into_owned())
        .expect("a secret");
    let on =
        e.s.post(
            "/v1/auth/mfa/confirm",
            Some(&session),
            json!({ "code": crate::mfa::code(&e.s, &secret) }),
        )
        .await;
    assert_eq!(on.status, 200, "{:?}", on.body);

    // A passkey is added from a session opened with the code (a mailed link
    // alone adds no factor to an account that has one).
    let mut b = browser("passkeys-mfa").await;
    virtual_authenticator(&b.c).await;
    sign_in_by_mail(&b, &e, "grace@example.com", 2).await;
    b.heading("Two-step verification").await;
    crate::mfa::next_step(&e.s);
    b.type_here(&format!("{}{}", crate::mfa::code(&e.s, &secret), enter()))
        .await;
    b.heading("Organizations").await;
    b.c.goto(&format!("{}/account/security", e.url))
        .await
        .expect("security");
    shown(&b, "#passkey-name")
        .await
        .click()
        .await
        .expect("focus");
    b.type_here(&format!("Phone{}", enter())).await;
    listed(&b, "Phone").await;

    // The next mailed link asks for the second step: the code, or the
    // passkey. (No autofill: it would sign in with the passkey at once.)
    no_autofill(&b.c).await;
    b.c.find(Locator::Css("header form[action='/sign-out'] button"))
        .await
        .expect("sign out")
        .click()
        .await
        .expect("click");
    b.heading("Sign in").await;
    b.type_here(&format!("grace@example.com{}", enter())).await;
    b.heading("Check your mail").await;
    let link = mailed_link(&e, "grace@example.com", 3).await;
    b.c.goto(&link).await.expect("link");
    b.heading("Finish signing in").await;
    b.type_here(&enter()).await;
    b.heading("Two-step verification").await;
    let button = shown(&b, "#passkey-start").await;
    assert_eq!(button.text().await.expect("text"), "Use a passkey");
    b.check("mfa-passkey").await;
    button.click().await.expect("press");
    b.heading("Organizations").await;
    let fresh = session_of(&b, &e).await;
    let me = e.s.get("/v1/auth/me", Some(&fresh)).await;
    assert_eq!(me.status, 200, "{:?}", me.body);
    assert_eq!(me.body["email"], "grace@example.com");
    b.c.clone().close().await.expect("close");
}

#[tokio::test]
async fn a_session_no_longer_recent_is_told_to_sign_in_again_before_adding_a_passkey() {
    let e = env().await;
    let mut b = browser("passkeys-reauthenticate").await;
    virtual_authenticator(&b.c).await;
    no_autofill(&b.c).await;
    sign_in_by_mail(&b, &e, "lin@example.com", 1).await;
    b.c.goto(&format!("{}/account/security", e.url))
        .await
        .expect("security");
    let name = shown(&b, "#passkey-name").await;
    // The session an hour old (identity reads its age from the database).
    e.s.age_session(&session_of(&b, &e).await).await;

    // The page says to sign in again, with the button that does (the focus
    // on it: Enter presses it); nothing was added.
    name.click().await.expect("focus");
    b.type_here(&format!("Old session{}", enter())).await;
    b.wait_text("[data-passkey-alert]", "needs a recent sign-in")
        .await;
    shown(&b, "[data-passkey-reauth] button").await;
    b.check("security-reauthenticate").await;
    let session = session_of(&b, &e).await;
    assert!(passkeys(&e, &session).await.is_empty());
    // (axe's run kept the focus where it was: on the button.)
    let focused = b.c.active_element().await.expect("focus");
    assert_eq!(
        focused.text().await.expect("text"),
        "Sign in again",
        "the focus is on the way out"
    );
    b.type_here(&enter()).await;

    // Signed out; the mailed link brings the person back to the page.
    b.heading("Sign in").await;
    assert_eq!(
        e.s.get("/v1/auth/me", Some(&session)).await.status,
        401,
        "the old session ended"
    );
    b.type_here(&format!("lin@example.com{}", enter())).await;
    b.heading("Check your mail").await;
    let link = mailed_link(&e, "lin@example.com", 2).await;
    b.c.goto(&link).await.expect("open the link");
    b.heading("Finish signing in").await;
    b.type_here(&enter()).await;
    b.heading("Your account").await;
    assert_eq!(b.path().await, "/account/security");
    shown(&b, "#passkey-name").await;
    b.c.clone().close().await.expect("close");
}
