//! Signing in: the mailed link, its landing, the second factor, signing out.

use super::{call, chrome, form_expired, message, plausible_token, render, trouble, Chrome};
use crate::{api::Host, session::Visit, Console};
use actix_web::{http::StatusCode, web, HttpResponse};
use askama::Template;
use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

#[derive(Template)]
#[template(path = "sign_in.html")]
struct SignIn {
    c: Chrome,
    title: &'static str,
    error: Option<String>,
}

#[derive(Template)]
#[template(path = "landing.html")]
struct Landing {
    c: Chrome,
    title: &'static str,
    token: String,
}

#[derive(Template)]
#[template(path = "mfa.html")]
struct Mfa {
    c: Chrome,
    title: &'static str,
    wrong: bool,
    /// A passkey may be the second step (identity's `methods`).
    passkey: bool,
}

#[derive(Deserialize)]
pub struct LinkQuery {
    token: Option<String>,
}

/// GET /sign-in: the form; with `token` (the mailed link) the landing, whose
/// button spends the link: a mail scanner that fetches the link spends
/// nothing.
pub async fn page(v: Visit, c: web::Data<Console>, q: web::Query<LinkQuery>) -> HttpResponse {
    let t = v.lang.texts();
    if let Some(token) = q.token.as_deref() {
        if v.signed_in() {
            // A link while signed in: never swap the account with one click
            // (someone else's link would sign this browser into theirs).
            return message(
                &v,
                &c,
                StatusCode::CONFLICT,
                t.landing_title,
                t.link_while_signed_in,
                None,
            );
        }
        if !plausible_token(token) {
            return message(
                &v,
                &c,
                StatusCode::BAD_REQUEST,
                t.error_title,
                t.link_invalid,
                Some(("/sign-in", t.request_new)),
            );
        }
        let page = Landing {
            c: chrome(&v),
            title: t.landing_title,
            token: token.to_owned(),
        };
        return render(&v, &c, StatusCode::OK, page);
    }
    if v.signed_in() {
        return v.redirect(&c, "/orgs");
    }
    let page = SignIn {
        c: chrome(&v),
        title: t.sign_in_title,
        error: None,
    };
    render(&v, &c, StatusCode::OK, page)
}

#[derive(Deserialize)]
pub struct RequestLink {
    #[serde(default)]
    csrf: String,
    email: String,
}

/// POST /sign-in: mail a link (the answer is the same whether or not the
/// address has an account).
pub async fn request_link(
    v: Visit,
    c: web::Data<Console>,
    f: web::Form<RequestLink>,
) -> HttpResponse {
    if !v.csrf_ok(&f.csrf) {
        return form_expired(&v, &c);
    }
    let t = v.lang.texts();
    let body = json!({ "email": f.email.trim() });
    let got = c
        .api
        .call(
            Host::Core,
            Method::POST,
            "/v1/auth/request-link",
            None,
            Some(&body),
            &v.forwarded_for,
        )
        .await;
    match &got {
        Ok(a) if a.ok() => message(
            &v,
            &c,
            StatusCode::OK,
            t.check_mail_title,
            t.check_mail_body,
            None,
        ),
        Ok(a) if a.status == 400 || a.status == 422 => {
            let page = SignIn {
                c: chrome(&v),
                title: t.sign_in_title,
                error: Some(a.error().to_owned()),
            };
            render(&v, &c, StatusCode::UNPROCESSABLE_ENTITY, page)
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

#[derive(Deserialize)]
pub struct VerifyForm {
    #[serde(default)]
    csrf: String,
    token: String,
}

/// POST /sign-in/verify: spend the link; a session, or the second factor.
pub async fn verify(mut v: Visit, c: web::Data<Console>, f: web::Form<VerifyForm>) -> HttpResponse {
    if !v.csrf_ok(&f.csrf) {
        return form_expired(&v, &c);
    }
    let t = v.lang.texts();
    let body = json!({ "token": f.token });
    let got = c
        .api
        .call(
            Host::Core,
            Method::POST,
            "/v1/auth/verify",
            None,
            Some(&body),
            &v.forwarded_for,
        )
        .await;
    match &got {
        Ok(a) if a.ok() && a.body.get("mfa_required").and_then(|m| m.as_bool()) == Some(true) => {
            v.state.mfa = Some(a.text("mfa_token").to_owned());
            v.state.mfa_passkey = a
                .body
                .get("methods")
                .and_then(|m| m.as_array())
                .is_some_and(|m| m.iter().any(|x| x.as_str() == Some("passkey")));
            v.redirect(&c, "/sign-in/mfa")
        }
        Ok(a) if a.ok() && !a.text("session_token").is_empty() => {
            let token = a.text("session_token").to_owned();
            signed_in(v, &c, token).await
        }
        Ok(a) if a.status == 401 || a.status == 400 || a.status == 422 => message(
            &v,
            &c,
            StatusCode::UNAUTHORIZED,
            t.error_title,
            t.link_invalid,
            Some(("/sign-in", t.request_new)),
        ),
        _ => trouble(v, &c, got.as_ref()),
    }
}

/// A new session: keep it, read the person's language and time zone, and go
/// where the sign-in started (or to the organizations).
async fn signed_in(v: Visit, c: &Console, token: String) -> HttpResponse {
    let (v, to) = open_session(v, c, token).await;
    v.redirect(c, &to)
}

/// What [`signed_in`] does before it redirects (the passkey's sign-in tells
/// its script where to go instead): the visit as it is now, and where to.
pub(super) async fn open_session(mut v: Visit, c: &Console, token: String) -> (Visit, String) {
    if v.signed_in() {
        // A session this one replaces (a landing left open in another tab)
        // ends, rather than live on unseen.
        let _ = call(c, &v, Method::POST, "/v1/auth/logout", None).await;
    }
    let next = v.state.next.take();
    // A new form token for the signed-in person (the old one was seen
    // before sign-in); the language chosen before carries over.
    v.sign_out();
    v.state.token = Some(token);
    if let Ok(p) = call(c, &v, Method::GET, "/v1/profile", None).await {
        if p.ok() {
            if v.state.lang.is_none() {
                v.state.lang = crate::i18n::Lang::parse(p.text("locale"));
            }
            let tz = p.text("timezone");
            v.state.tz = (!tz.is_empty()).then(|| tz.to_owned());
            v.state.email = Some(p.text("email").to_owned()).filter(|e| !e.is_empty());
        }
    }
    if let Ok(me) = call(c, &v, Method::GET, "/v1/auth/me", None).await {
        v.state.staff = me.ok() && me.body.get("staff").and_then(|s| s.as_bool()) == Some(true);
    }
    if !v.state.staff {
        // A distributor's observer gets their entity's read-only view.
        if let Ok(d) = call(c, &v, Method::GET, "/v1/distributors", None).await {
            v.state.observer = d.ok() && d.body.as_array().is_some_and(|l| !l.is_empty());
        }
    }
    let to = next
        .as_deref()
        .and_then(crate::session::local_path)
        .unwrap_or("/orgs")
        .to_owned();
    (v, to)
}

/// GET /sign-in/mfa.
pub async fn mfa_page(v: Visit, c: web::Data<Console>) -> HttpResponse {
    if v.state.mfa.is_none() {
        return v.redirect(&c, "/sign-in");
    }
    let page = Mfa {
        c: chrome(&v),
        title: v.lang.texts().mfa_title,
        wrong: false,
        passkey: v.state.mfa_passkey,
    };
    render(&v, &c, StatusCode::OK, page)
}

#[derive(Deserialize)]
pub struct MfaForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    code: String,
    #[serde(default)]
    recovery_code: String,
}

/// POST /sign-in/mfa: the code (or a recovery code) opens the session.
pub async fn mfa_verify(
    mut v: Visit,
    c: web::Data<Console>,
    f: web::Form<MfaForm>,
) -> HttpResponse {
    if !v.csrf_ok(&f.csrf) {
        return form_expired(&v, &c);
    }
    let Some(mfa_token) = v.state.mfa.clone() else {
        return v.redirect(&c, "/sign-in");
    };
    let body = if f.recovery_code.trim().is_empty() {
        json!({ "mfa_token": mfa_token, "code": f.code.trim() })
    } else {
        json!({ "mfa_token": mfa_token, "recovery_code": f.recovery_code.trim() })
    };
    let got = c
        .api
        .call(
            Host::Core,
            Method::POST,
            "/v1/auth/mfa/verify",
            None,
            Some(&body),
            &v.forwarded_for,
        )
        .await;
    match &got {
        Ok(a) if a.ok() && !a.text("session_token").is_empty() => {
            let token = a.text("session_token").to_owned();
            v.state.mfa = None;
            v.state.mfa_passkey = false;
            signed_in(v, &c, token).await
        }
        Ok(a) if a.status == 401 || a.status == 400 || a.status == 422 => {
            let page = Mfa {
                c: chrome(&v),
                title: v.lang.texts().mfa_title,
                wrong: true,
                passkey: v.state.mfa_passkey,
            };
            render(&v, &c, StatusCode::UNAUTHORIZED, page)
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

#[derive(Deserialize)]
pub struct SignOutForm {
    #[serde(default)]
    csrf: String,
    /// Where to come back after signing in again (a path of ours): the
    /// security page's "sign in again" when adding a passkey needs a recent
    /// sign-in.
    #[serde(default)]
    next: Option<String>,
}

/// POST /sign-out: the hub session ends (every product's grant with it).
pub async fn sign_out(
    mut v: Visit,
    c: web::Data<Console>,
    f: web::Form<SignOutForm>,
) -> HttpResponse {
    if !v.csrf_ok(&f.csrf) {
        return form_expired(&v, &c);
    }
    // Signed out here whatever the answer: the cookie forgets the token. The
    // hub's session ended too unless the call failed; then the person is
    // told so, and where to end it (it is no longer in this browser).
    let ended = !v.signed_in()
        || match call(&c, &v, Method::POST, "/v1/auth/logout", None).await {
            Ok(a) => a.ok() || a.status == 401,
            Err(_) => false,
        };
    v.sign_out();
    v.state.next = f
        .next
        .as_deref()
        .and_then(crate::session::local_path)
        .map(str::to_owned);
    if ended {
        return v.redirect(&c, "/sign-in");
    }
    let t = v.lang.texts();
    message(
        &v,
        &c,
        StatusCode::SERVICE_UNAVAILABLE,
        t.signed_out_here,
        t.signed_out_here_body,
        Some(("/sign-in", t.sign_in_title)),
    )
}

#[cfg(test)]
mod tests {
    use super::{Mfa, SignIn};
    use crate::{i18n::Lang, pages::offers_passkeys, pages::test_chrome};
    use askama::Template;

    #[test]
    fn the_sign_in_page_offers_a_passkey_and_the_autofill() {
        for lang in [Lang::En, Lang::Tr] {
            let html = SignIn {
                c: test_chrome(lang, "tok"),
                title: lang.texts().sign_in_title,
                error: None,
            }
            .render()
            .expect("renders");
            offers_passkeys(&html, "tok");
            assert!(html.contains(r#"autocomplete="email webauthn""#));
            assert!(html.contains(lang.texts().passkey_sign_in));
            assert!(html.contains(&format!(
                r#"data-msg-cancelled="{}""#,
                lang.texts().passkey_cancelled
            )));
        }
    }

    #[test]
    fn the_second_step_offers_a_passkey_only_when_identity_does() {
        let page = |passkey| {
            Mfa {
                c: test_chrome(Lang::En, "tok"),
                title: "t",
                wrong: false,
                passkey,
            }
            .render()
            .expect("renders")
        };
        let with = page(true);
        offers_passkeys(&with, "tok");
        assert!(with.contains("Use a passkey"));
        let without = page(false);
        assert!(!without.contains("passkeys.js") && !without.contains("Use a passkey"));
    }
}
