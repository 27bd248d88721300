//! The pages: each handler reads the visitor ([`Visit`]), calls the gateway's
//! public API with the person's session, and renders a template.

pub mod account;
pub mod assistant;
pub mod auth;
pub mod billing;
pub mod distributors;
pub mod invites;
pub mod oauth;
pub mod org_admin;
pub mod org_sheets;
pub mod orgs;
pub mod passkeys;
pub mod servers;
pub mod sheet;
pub mod staff;
pub mod tower;
pub mod webhooks;

use crate::{
    api::{Answer, Down, Host},
    i18n::Texts,
    session::Visit,
    Console,
};
use actix_web::{http::StatusCode, web, HttpResponse};
use askama::Template;
use reqwest::Method;
use serde_json::Value;

/// What every page's frame needs (base.html).
pub struct Chrome {
    pub t: &'static Texts,
    pub lang: &'static str,
    pub other_lang: &'static str,
    pub csrf: String,
    pub signed_in: bool,
    pub email: Option<String>,
    pub staff: bool,
    pub observer: bool,
    /// This page's path, for the language switch to come back to.
    pub here: String,
}

/// An inline event handler (` onclick=`...), as the browser tests look.
#[cfg(test)]
pub(crate) fn inline_handler(html: &str) -> bool {
    html.match_indices(" on").any(|(at, _)| {
        let rest = &html[at + 3..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect();
        !name.is_empty() && rest[name.len()..].starts_with('=')
    })
}

/// What a page that offers passkeys must be: the script from our
/// origin, deferred; nothing inline; the form token for the script.
#[cfg(test)]
pub(crate) fn offers_passkeys(html: &str, csrf: &str) {
    assert!(
        html.contains(r#"<script src="/assets/passkeys.js" defer></script>"#),
        "{html}"
    );
    assert!(!html.contains("<script>"), "inline script: {html}");
    assert!(!inline_handler(html), "inline handler: {html}");
    assert!(html.contains(&format!(r#"data-csrf="{csrf}""#)), "{html}");
    // Shown by the script only where WebAuthn is.
    assert!(html.contains("hidden"), "{html}");
    assert!(html.contains(r#"role="alert""#), "{html}");
    assert!(html.contains(r#"role="status""#), "{html}");
}

/// A frame for a template's test (a signed-in visitor with this form token).
#[cfg(test)]
pub fn test_chrome(lang: crate::i18n::Lang, csrf: &str) -> Chrome {
    Chrome {
        t: lang.texts(),
        lang: lang.code(),
        other_lang: "en",
        csrf: csrf.to_owned(),
        signed_in: true,
        email: None,
        staff: false,
        observer: false,
        here: "/".into(),
    }
}

pub fn chrome(v: &Visit) -> Chrome {
    let other = match v.lang {
        crate::i18n::Lang::En => "tr",
        crate::i18n::Lang::Tr => "en",
    };
    Chrome {
        t: v.lang.texts(),
        lang: v.lang.code(),
        other_lang: other,
        csrf: v.state.csrf.clone(),
        signed_in: v.signed_in(),
        email: v.state.email.clone(),
        staff: v.state.staff,
        observer: v.state.observer,
        here: v.path.clone(),
    }
}

#[derive(Template)]
#[template(path = "message.html")]
pub struct Message {
    pub c: Chrome,
    pub title: &'static str,
    pub body: &'static str,
    pub alert: bool,
    /// What the API said (its `error`), under the message.
    pub detail: Option<String>,
    pub link: Option<(&'static str, &'static str)>,
}

/// A rendered template as a page (500 if it does not render).
pub fn render(v: &Visit, c: &Console, status: StatusCode, t: impl Template) -> HttpResponse {
    match t.render() {
        Ok(html) => v.page(c, status, html),
        Err(e) => {
            tracing::error!(error = %e, "a template did not render");
            HttpResponse::InternalServerError()
                .content_type("text/plain; charset=utf-8")
                .body("500")
        }
    }
}

/// A page of one message.
pub fn message(
    v: &Visit,
    c: &Console,
    status: StatusCode,
    title: &'static str,
    body: &'static str,
    link: Option<(&'static str, &'static str)>,
) -> HttpResponse {
    let alert = !status.is_success();
    render(
        v,
        c,
        status,
        Message {
            c: chrome(v),
            title,
            body,
            alert,
            detail: None,
            link,
        },
    )
}

/// A refusal of the API (400, 409, 422) as a page with its `error`, under
/// its own status: the request was understood and said no; retrying the
/// same will not help.
fn refused(v: &Visit, c: &Console, a: &Answer) -> HttpResponse {
    let t = v.lang.texts();
    let status = StatusCode::from_u16(a.status).unwrap_or(StatusCode::BAD_REQUEST);
    let detail = match a.error() {
        "" => None,
        e => Some(e.to_owned()),
    };
    render(
        v,
        c,
        status,
        Message {
            c: chrome(v),
            title: t.error_title,
            body: t.not_done,
            alert: true,
            detail,
            link: Some(("/", t.home)),
        },
    )
}

/// Where to come back after signing in: this page if it is one (a GET of
/// ours), else nowhere in particular.
pub fn comeback(v: &Visit) -> Option<String> {
    if v.get {
        crate::session::local_path(&v.path).map(str::to_owned)
    } else {
        None
    }
}

/// The page for an answer the page cannot use: 401 (the session ended) signs
/// the visitor out and sends them to sign in, coming back here; 404 and 403
/// say so (a 403 of someone else's organization is a 404, as the API's);
/// 429, and the gateway down, say to wait.
pub fn trouble(mut v: Visit, c: &Console, got: Result<&Answer, &Down>) -> HttpResponse {
    let t = v.lang.texts();
    match got.map(|a| a.status) {
        Ok(401) => {
            let back = comeback(&v);
            v.sign_out();
            v.state.next = back;
            v.redirect(c, "/sign-in")
        }
        Ok(400 | 409 | 422) => match got {
            Ok(a) => refused(&v, c, a),
            Err(_) => unreachable_page(&v, c),
        },
        Ok(404) => message(
            &v,
            c,
            StatusCode::NOT_FOUND,
            t.error_title,
            t.not_found,
            Some(("/", t.home)),
        ),
        Ok(403) => message(
            &v,
            c,
            StatusCode::FORBIDDEN,
            t.error_title,
            t.forbidden,
            Some(("/", t.home)),
        ),
        Ok(429) => message(
            &v,
            c,
            StatusCode::TOO_MANY_REQUESTS,
            t.error_title,
            t.rate_limited,
            None,
        ),
        _ => unreachable_page(&v, c),
    }
}

/// The gateway did not answer (or answered what no page expects): 503.
fn unreachable_page(v: &Visit, c: &Console) -> HttpResponse {
    let t = v.lang.texts();
    message(
        v,
        c,
        StatusCode::SERVICE_UNAVAILABLE,
        t.error_title,
        t.unavailable,
        None,
    )
}

/// A form whose token is not the visitor's: 403, nothing done.
pub fn form_expired(v: &Visit, c: &Console) -> HttpResponse {
    let t = v.lang.texts();
    message(
        v,
        c,
        StatusCode::FORBIDDEN,
        t.error_title,
        t.form_expired,
        Some(("/", t.home)),
    )
}

/// Not signed in: to the sign-in page, coming back to this page after (a
/// GET; a form's POST comes back nowhere in particular).
pub fn sign_in_first(v: Visit, c: &Console) -> HttpResponse {
    let back = comeback(&v);
    sign_in_then(v, c, back)
}

/// Not signed in: to the sign-in page, then to `back` (a path of ours).
pub fn sign_in_then(mut v: Visit, c: &Console, back: Option<String>) -> HttpResponse {
    v.state.next = back
        .as_deref()
        .and_then(crate::session::local_path)
        .map(str::to_owned);
    v.redirect(c, "/sign-in")
}

/// A token as a mail carries it (a sign-in link's, an invite's): short,
/// URL-safe characters only.
pub fn plausible_token(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 256
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// An id as the API makes them (a UUID's shape); anything else is a 404
/// without asking.
pub fn id_shaped(id: &str) -> bool {
    id.len() == 36 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// The organization a page is about (its summary: name, legal type, KYC
/// status), or the page to answer instead (sign in, 404 for anything not
/// the person's).
pub async fn org_of(v: Visit, c: &Console, id: &str) -> Result<(Visit, Value), HttpResponse> {
    if !v.signed_in() {
        return Err(sign_in_first(v, c));
    }
    if !id_shaped(id) {
        return Err(not_found_page(&v, c));
    }
    let got = call(c, &v, Method::GET, &format!("/v1/organizations/{id}"), None).await;
    match &got {
        Ok(a) if a.ok() => Ok((v, a.body.clone())),
        Ok(a) if a.status == 403 => Err(not_found_page(&v, c)),
        _ => Err(trouble(v, c, got.as_ref())),
    }
}

/// A form that carries only its token.
#[derive(serde::Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    pub csrf: String,
}

/// A call with the visitor's session.
pub async fn call(
    c: &Console,
    v: &Visit,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Result<Answer, Down> {
    c.api
        .call(
            Host::Core,
            method,
            path,
            v.state.token.as_deref(),
            body,
            &v.forwarded_for,
        )
        .await
}

/// GET /: the organizations when signed in, else the sign-in page.
pub async fn home(v: Visit, c: web::Data<Console>) -> HttpResponse {
    let to = if v.signed_in() { "/orgs" } else { "/sign-in" };
    v.redirect(&c, to)
}

#[derive(serde::Deserialize)]
pub struct Back {
    back: Option<String>,
}

/// GET /lang/{code}?back=: the pages in that language from now on, in this
/// browser, then back where the person was.
pub async fn language(
    mut v: Visit,
    c: web::Data<Console>,
    code: web::Path<String>,
    q: web::Query<Back>,
) -> HttpResponse {
    let Some(lang) = crate::i18n::Lang::parse(&code) else {
        let t = v.lang.texts();
        return message(
            &v,
            &c,
            StatusCode::NOT_FOUND,
            t.error_title,
            t.not_found,
            Some(("/", t.home)),
        );
    };
    // This browser only: a GET changes nothing of the account (the
    // profile's language is saved with its form).
    v.state.lang = Some(lang);
    v.lang = lang;
    let back = q
        .back
        .as_deref()
        .and_then(crate::session::local_path)
        .unwrap_or("/")
        .to_owned();
    v.redirect(&c, &back)
}

/// GET /assets/console.css.
pub async fn stylesheet() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header(("cache-control", "public, max-age=3600"))
        .body(crate::CSS)
}

/// GET /assets/passkeys.js: the passkey ceremonies' script (the only
/// script; the pages that use it load it with `defer`).
pub async fn passkeys_script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header(("cache-control", "public, max-age=3600"))
        .body(crate::PASSKEYS_JS)
}

/// Any other path: a 404 page.
pub async fn not_found(v: Visit, c: web::Data<Console>) -> HttpResponse {
    not_found_page(&v, &c)
}

/// The 404 page (also for what is someone else's: the same answer).
pub fn not_found_page(v: &Visit, c: &Console) -> HttpResponse {
    let t = v.lang.texts();
    message(
        v,
        c,
        StatusCode::NOT_FOUND,
        t.error_title,
        t.not_found,
        Some(("/", t.home)),
    )
}
