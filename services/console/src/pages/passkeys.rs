//! Passkeys (WebAuthn): the ceremonies' JSON calls from the page's script
//! (assets/passkeys.js), and the list the security page shows.
//!
//! The browser does the ceremony; identity checks it (through the gateway,
//! like everything else): the console only carries the options to the page
//! and the credential back, with the person's session from the sealed
//! cookie. Every call here is a POST with the visitor's form token in the
//! `x-csrf-token` header (JSON from a script: a cross-site form cannot send
//! it). The sign-in calls end like the mailed link's: the session kept in
//! the cookie and `{"redirect": "<where to>"}` for the script to follow.
//!
//! - `POST /account/passkeys/options`, `POST /account/passkeys` (signed in):
//!   register a passkey with the name the person typed.
//! - (The rename and delete forms are the security page's: account.rs.)
//! - `POST /sign-in/passkey/options`, `POST /sign-in/passkey`: sign in with
//!   a passkey (the button, or the email field's autofill).
//! - `POST /sign-in/mfa/passkey/options`, `POST /sign-in/mfa/passkey`: the
//!   second step after a mailed link, with the step's token kept in the
//!   cookie.

use super::{call, id_shaped};
use crate::{
    api::{Answer, Down, Host},
    format,
    pages::{auth, orgs::s},
    session::Visit,
    Console,
};
use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use reqwest::Method;
use serde::Deserialize;
use serde_json::{json, Value};

/// The header that carries the form token on the script's calls.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// Where a passkey added goes back to (the list shows it, with a notice).
const ADDED: &str = "/account/security?added=1";

/// One passkey as the security page lists it.
pub struct PasskeyRow {
    pub id: String,
    pub name: String,
    pub added: String,
    pub last_used: Option<String>,
}

/// The person's passkeys (newest first, as the API lists them), or None
/// when the API cannot say now (the page shows the rest); Err: the session
/// ended.
pub async fn list(c: &Console, v: &Visit) -> Result<Option<Vec<PasskeyRow>>, ()> {
    let got = call(c, v, Method::GET, "/v1/auth/passkeys", None).await;
    let list = match &got {
        Ok(a) if a.ok() => a.body.as_array().cloned().unwrap_or_default(),
        Ok(a) if a.status == 401 => return Err(()),
        _ => return Ok(None),
    };
    let tz = v.tz();
    Ok(Some(
        list.iter()
            .map(|p| PasskeyRow {
                id: s(p, "id").to_owned(),
                name: s(p, "name").to_owned(),
                added: format::datetime(s(p, "created_at"), tz, v.lang),
                last_used: Some(s(p, "last_used_at"))
                    .filter(|t| !t.is_empty())
                    .map(|t| format::datetime(t, tz, v.lang)),
            })
            .collect(),
    ))
}

/// Whether the script's call carries the visitor's form token.
fn csrf_ok(v: &Visit, req: &HttpRequest) -> bool {
    let sent = req
        .headers()
        .get(CSRF_HEADER)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    v.csrf_ok(sent)
}

/// `{"error": text}` under `status`: the script shows the text.
fn say(v: &Visit, c: &Console, status: StatusCode, text: &str) -> HttpResponse {
    v.json(c, status, &json!({ "error": text }))
}

/// The form token did not match: the page is stale.
fn expired(v: &Visit, c: &Console) -> HttpResponse {
    say(v, c, StatusCode::FORBIDDEN, v.lang.texts().form_expired)
}

/// The session ended (or never was): signed out here, and the script goes
/// to the sign-in page, which comes back to the security page.
fn session_ended(mut v: Visit, c: &Console) -> HttpResponse {
    v.sign_out();
    v.state.next = Some("/account/security".into());
    v.json(
        c,
        StatusCode::UNAUTHORIZED,
        &json!({ "redirect": "/sign-in" }),
    )
}

/// A recent sign-in is needed (identity's 403 with `reauthenticate`).
fn reauthenticate(v: &Visit, c: &Console) -> HttpResponse {
    let t = v.lang.texts();
    v.json(
        c,
        StatusCode::FORBIDDEN,
        &json!({ "error": t.passkey_reauth, "reauthenticate": true }),
    )
}

fn wants_reauthentication(a: &Answer) -> bool {
    a.status == 403 && a.body.get("reauthenticate").and_then(Value::as_bool) == Some(true)
}

/// What the script is told for any other answer: `what` (and the API's
/// reason, when it gave one) for a refusal; to wait for limits and outages.
fn other(v: &Visit, c: &Console, got: Result<&Answer, &Down>, what: &str) -> HttpResponse {
    let t = v.lang.texts();
    match got {
        Ok(a) if matches!(a.status, 400 | 404 | 409 | 422) => {
            let text = match a.error() {
                "" => what.to_owned(),
                e => format!("{what} {e}"),
            };
            say(v, c, StatusCode::UNPROCESSABLE_ENTITY, &text)
        }
        Ok(a) if a.status == 403 => say(v, c, StatusCode::FORBIDDEN, t.forbidden),
        Ok(a) if a.status == 429 => say(v, c, StatusCode::TOO_MANY_REQUESTS, t.rate_limited),
        _ => say(v, c, StatusCode::SERVICE_UNAVAILABLE, t.unavailable),
    }
}

/// A ceremony's end, as the script sends it: the challenge's id, the
/// credential as `PublicKeyCredential.toJSON()` writes it (carried to
/// identity as it is: identity checks every byte), and a new passkey's name.
#[derive(Deserialize)]
pub struct Finish {
    #[serde(default)]
    challenge_id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    credential: Value,
}

impl Finish {
    /// Whether it has the shape identity expects at all.
    fn plausible(&self) -> bool {
        id_shaped(&self.challenge_id) && self.credential.is_object()
    }
}

/// POST /account/passkeys/options: the options of a new passkey.
pub async fn register_options(v: Visit, c: web::Data<Console>, req: HttpRequest) -> HttpResponse {
    // The form token first: a cross-site call ends nothing (not even a
    // sign-in halfway).
    if !csrf_ok(&v, &req) {
        return expired(&v, &c);
    }
    if !v.signed_in() {
        return session_ended(v, &c);
    }
    let got = call(
        &c,
        &v,
        Method::POST,
        "/v1/auth/passkeys/register/options",
        Some(&json!({})),
    )
    .await;
    match &got {
        Ok(a) if a.ok() => v.json(&c, StatusCode::OK, &a.body),
        Ok(a) if wants_reauthentication(a) => reauthenticate(&v, &c),
        Ok(a) if a.status == 401 => session_ended(v, &c),
        _ => other(&v, &c, got.as_ref(), v.lang.texts().passkey_not_added),
    }
}

/// POST /account/passkeys: the new passkey, under the name typed.
pub async fn register(
    v: Visit,
    c: web::Data<Console>,
    req: HttpRequest,
    f: web::Json<Finish>,
) -> HttpResponse {
    // The form token first: a cross-site call ends nothing (not even a
    // sign-in halfway).
    if !csrf_ok(&v, &req) {
        return expired(&v, &c);
    }
    if !v.signed_in() {
        return session_ended(v, &c);
    }
    let t = v.lang.texts();
    let name = f.name.trim();
    if name.is_empty() {
        return say(
            &v,
            &c,
            StatusCode::UNPROCESSABLE_ENTITY,
            t.passkey_name_needed,
        );
    }
    if !f.plausible() {
        return say(&v, &c, StatusCode::UNPROCESSABLE_ENTITY, t.passkey_failed);
    }
    let body = json!({
        "challenge_id": f.challenge_id,
        "name": name,
        "credential": f.credential,
    });
    let got = call(
        &c,
        &v,
        Method::POST,
        "/v1/auth/passkeys/register",
        Some(&body),
    )
    .await;
    match &got {
        Ok(a) if a.ok() => v.json(&c, StatusCode::OK, &json!({ "redirect": ADDED })),
        Ok(a) if wants_reauthentication(a) => reauthenticate(&v, &c),
        Ok(a) if a.status == 401 => session_ended(v, &c),
        _ => other(&v, &c, got.as_ref(), t.passkey_not_added),
    }
}

/// A public call of the sign-in (no session: the browser's address chain
/// counts for identity's limits).
async fn public(c: &Console, v: &Visit, path: &str, body: &Value) -> Result<Answer, Down> {
    c.api
        .call(
            Host::Core,
            Method::POST,
            path,
            None,
            Some(body),
            &v.forwarded_for,
        )
        .await
}

/// The second step is over (or never began): the script goes back to the sign-in page.
fn step_over(v: &Visit, c: &Console) -> HttpResponse {
    let t = v.lang.texts();
    v.json(
        c,
        StatusCode::CONFLICT,
        &json!({ "error": t.passkey_step_expired, "redirect": "/sign-in" }),
    )
}

async fn login_options(mut v: Visit, c: &Console, req: &HttpRequest, mfa: bool) -> HttpResponse {
    if !csrf_ok(&v, req) {
        return expired(&v, c);
    }
    let body = if mfa {
        match v.state.mfa.clone() {
            Some(token) => json!({ "mfa_token": token }),
            None => return step_over(&v, c),
        }
    } else {
        json!({})
    };
    let got = public(c, &v, "/v1/auth/passkeys/login/options", &body).await;
    match &got {
        Ok(a) if a.ok() => v.json(c, StatusCode::OK, &a.body),
        Ok(a) if mfa && a.status == 401 => {
            // The step's token expired: the mailed link again.
            v.state.mfa = None;
            v.state.mfa_passkey = false;
            step_over(&v, c)
        }
        _ => other(&v, c, got.as_ref(), v.lang.texts().passkey_failed),
    }
}

async fn login(
    mut v: Visit,
    c: &Console,
    req: &HttpRequest,
    f: &Finish,
    mfa: bool,
) -> HttpResponse {
    if !csrf_ok(&v, req) {
        return expired(&v, c);
    }
    let t = v.lang.texts();
    if !f.plausible() {
        return say(&v, c, StatusCode::UNPROCESSABLE_ENTITY, t.passkey_failed);
    }
    let mut body = json!({ "challenge_id": f.challenge_id, "credential": f.credential });
    if mfa {
        match v.state.mfa.clone() {
            Some(token) => body["mfa_token"] = Value::String(token),
            None => return step_over(&v, c),
        }
    }
    let got = public(c, &v, "/v1/auth/passkeys/login", &body).await;
    match &got {
        Ok(a) if a.ok() && !a.text("session_token").is_empty() => {
            let token = a.text("session_token").to_owned();
            v.state.mfa = None;
            v.state.mfa_passkey = false;
            let (v, to) = auth::open_session(v, c, token).await;
            v.json(c, StatusCode::OK, &json!({ "redirect": to }))
        }
        Ok(a) if matches!(a.status, 400 | 401 | 422) => {
            say(&v, c, StatusCode::UNAUTHORIZED, t.passkey_refused)
        }
        _ => other(&v, c, got.as_ref(), t.passkey_failed),
    }
}

/// POST /sign-in/passkey/options: a challenge for any passkey of this site
/// (the person is known by the passkey they pick).
pub async fn sign_in_options(v: Visit, c: web::Data<Console>, req: HttpRequest) -> HttpResponse {
    login_options(v, &c, &req, false).await
}

/// POST /sign-in/passkey: the passkey's answer opens a session.
pub async fn sign_in(
    v: Visit,
    c: web::Data<Console>,
    req: HttpRequest,
    f: web::Json<Finish>,
) -> HttpResponse {
    login(v, &c, &req, &f, false).await
}

/// POST /sign-in/mfa/passkey/options: a challenge for the passkeys of the
/// person whose mailed link asked for a second step.
pub async fn mfa_options(v: Visit, c: web::Data<Console>, req: HttpRequest) -> HttpResponse {
    login_options(v, &c, &req, true).await
}

/// POST /sign-in/mfa/passkey: the passkey as the second step.
pub async fn mfa(
    v: Visit,
    c: web::Data<Console>,
    req: HttpRequest,
    f: web::Json<Finish>,
) -> HttpResponse {
    login(v, &c, &req, &f, true).await
}

#[cfg(test)]
mod tests {
    use super::Finish;
    use serde_json::json;

    #[test]
    fn a_finish_needs_a_challenge_id_and_a_credential_object() {
        let ok: Finish = serde_json::from_value(json!({
            "challenge_id": "0b6c6f5e-6c39-4d3a-9d55-6f3c1c1f8c11",
            "credential": {"id": "x"},
        }))
        .expect("parses");
        assert!(ok.plausible());
        for bad in [
            json!({"challenge_id": "nope", "credential": {"id": "x"}}),
            json!({"challenge_id": "0b6c6f5e-6c39-4d3a-9d55-6f3c1c1f8c11"}),
            json!({"challenge_id": "0b6c6f5e-6c39-4d3a-9d55-6f3c1c1f8c11", "credential": "x"}),
            json!({}),
        ] {
            let f: Finish = serde_json::from_value(bad.clone()).expect("parses");
            assert!(!f.plausible(), "{bad}");
        }
    }

    #[test]
    fn the_script_is_ours_and_converts_by_hand() {
        let js = crate::PASSKEYS_JS;
        // No reliance on the newer JSON helpers of the browser.
        assert!(!js.contains("parseCreationOptionsFromJSON("));
        assert!(!js.contains("parseRequestOptionsFromJSON("));
        // Nothing from elsewhere, no eval.
        assert!(!js.contains("http://") && !js.contains("https://"));
        assert!(!js.contains("eval(") && !js.contains("new Function"));
        // The form token travels in the header the console reads.
        assert!(js.contains(super::CSRF_HEADER));
    }
}
