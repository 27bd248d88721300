//! The OpenID Provider's pages: signing in to a product (the provider sends
//! the browser to /oauth/continue with a request handle) and connecting a
//! device (RFC 8628's verification page).

use super::{
    call, chrome, form_expired, message, render, sign_in_first, sign_in_then, trouble, Chrome,
};
use crate::{i18n::Texts, session::Visit, Console};
use actix_web::{http::StatusCode, web, HttpResponse};
use askama::Template;
use reqwest::Method;
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Template)]
#[template(path = "consent.html")]
struct Consent {
    c: Chrome,
    title: &'static str,
    client: String,
    scopes: Vec<String>,
    action: &'static str,
    field: &'static str,
    value: String,
}

#[derive(Template)]
#[template(path = "device.html")]
struct Device {
    c: Chrome,
    title: &'static str,
    code: String,
    unknown: bool,
}

/// What a scope lets a product do, in the person's language.
fn scope_text(t: &'static Texts, scope: &str) -> String {
    match scope {
        "openid" => t.scope_openid,
        "email" => t.scope_email,
        "profile" => t.scope_profile,
        "orgs" => t.scope_orgs,
        "offline_access" => t.scope_offline_access,
        other => other,
    }
    .to_owned()
}

fn scopes(t: &'static Texts, v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|s| scope_text(t, s))
                .collect()
        })
        .unwrap_or_default()
}

fn client_name(v: &Value) -> String {
    v.pointer("/client/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// A handle as the provider makes them (and nothing longer).
fn plausible_handle(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 128
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

#[derive(Deserialize)]
pub struct ContinueQuery {
    request: Option<String>,
}

/// The browser to the product: the provider's `redirect_to` (the product's
/// registered URI with the code, or with `error=access_denied`).
fn to_product(v: &Visit, c: &Console, answer: &Value) -> Option<HttpResponse> {
    let to = answer.get("redirect_to").and_then(Value::as_str)?;
    let url = url::Url::parse(to).ok()?;
    // What the provider registered: https, or http on loopback only.
    let loopback = matches!(
        url.host(),
        Some(url::Host::Ipv4(ip)) if ip.is_loopback()
    ) || matches!(url.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback())
        || url.host_str() == Some("localhost");
    let fine = url.scheme() == "https" || (url.scheme() == "http" && loopback);
    fine.then(|| v.redirect(c, to))
}

/// GET /oauth/continue?request=: sign in first; then straight back to a
/// first-party product, or the consent page for a third-party one.
pub async fn continue_page(
    v: Visit,
    c: web::Data<Console>,
    q: web::Query<ContinueQuery>,
) -> HttpResponse {
    let t = v.lang.texts();
    let Some(handle) = q
        .request
        .as_deref()
        .filter(|h| plausible_handle(h))
        .map(str::to_owned)
    else {
        return message(
            &v,
            &c,
            StatusCode::NOT_FOUND,
            t.error_title,
            t.not_found,
            Some(("/", t.home)),
        );
    };
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    let req = json!({ "request": handle });
    let got = call(&c, &v, Method::POST, "/v1/oauth/authorization", Some(&req)).await;
    let shown = match &got {
        Ok(a) if a.ok() => a.body.clone(),
        _ => return trouble(v, &c, got.as_ref()),
    };
    if shown.get("fresh_sign_in_required").and_then(Value::as_bool) == Some(true) {
        return message(
            &v,
            &c,
            StatusCode::CONFLICT,
            t.consent_title,
            t.sign_in_again,
            None,
        );
    }
    if shown.get("consent_required").and_then(Value::as_bool) == Some(true) {
        let page = Consent {
            c: chrome(&v),
            title: t.consent_title,
            client: client_name(&shown),
            scopes: scopes(t, &shown, "scopes_to_consent"),
            action: "/oauth/continue",
            field: "request",
            value: handle,
        };
        return render(&v, &c, StatusCode::OK, page);
    }
    let got = call(
        &c,
        &v,
        Method::POST,
        "/v1/oauth/authorization/accept",
        Some(&req),
    )
    .await;
    match &got {
        Ok(a) if a.ok() => {
            to_product(&v, &c, &a.body).unwrap_or_else(|| trouble(v, &c, Err(&crate::api::Down)))
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

#[derive(Deserialize)]
pub struct Decision {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    request: String,
    #[serde(default)]
    user_code: String,
    decision: String,
}

/// POST /oauth/continue: the person's answer on the consent page.
pub async fn decide(v: Visit, c: web::Data<Console>, f: web::Form<Decision>) -> HttpResponse {
    if !v.signed_in() {
        let back =
            plausible_handle(&f.request).then(|| format!("/oauth/continue?request={}", f.request));
        return sign_in_then(v, &c, back);
    }
    if !v.csrf_ok(&f.csrf) || !plausible_handle(&f.request) {
        return form_expired(&v, &c);
    }
    let (path, body) = if f.decision == "allow" {
        (
            "/v1/oauth/authorization/accept",
            json!({ "request": f.request, "consent": true }),
        )
    } else {
        (
            "/v1/oauth/authorization/reject",
            json!({ "request": f.request }),
        )
    };
    let got = call(&c, &v, Method::POST, path, Some(&body)).await;
    match &got {
        Ok(a) if a.ok() => {
            to_product(&v, &c, &a.body).unwrap_or_else(|| trouble(v, &c, Err(&crate::api::Down)))
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

#[derive(Deserialize)]
pub struct DeviceQuery {
    user_code: Option<String>,
}

fn device_page(
    v: &Visit,
    c: &Console,
    status: StatusCode,
    code: String,
    unknown: bool,
) -> HttpResponse {
    let page = Device {
        c: chrome(v),
        title: v.lang.texts().device_title,
        code,
        unknown,
    };
    render(v, c, status, page)
}

/// The device page with the code typed, to come back to after signing in.
fn device_comeback(code: &str) -> Option<String> {
    let code: String = code.chars().take(16).collect();
    let q: String = url::form_urlencoded::byte_serialize(code.as_bytes()).collect();
    Some(format!("/device?user_code={q}"))
}

/// GET /device (`?user_code=` from `verification_uri_complete`).
pub async fn device(v: Visit, c: web::Data<Console>, q: web::Query<DeviceQuery>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    let code: String = q
        .user_code
        .as_deref()
        .unwrap_or("")
        .chars()
        .take(16)
        .collect();
    device_page(&v, &c, StatusCode::OK, code, false)
}

#[derive(Deserialize)]
pub struct DeviceForm {
    #[serde(default)]
    csrf: String,
    user_code: String,
}

/// POST /device: the code the person typed; what the device asks for, to
/// allow or deny (always asked: a code can be passed on by someone else).
pub async fn device_lookup(
    v: Visit,
    c: web::Data<Console>,
    f: web::Form<DeviceForm>,
) -> HttpResponse {
    if !v.signed_in() {
        let back = device_comeback(&f.user_code);
        return sign_in_then(v, &c, back);
    }
    if !v.csrf_ok(&f.csrf) {
        return form_expired(&v, &c);
    }
    let code: String = f.user_code.chars().take(16).collect();
    let got = call(
        &c,
        &v,
        Method::POST,
        "/v1/oauth/device",
        Some(&json!({ "user_code": code })),
    )
    .await;
    let shown = match &got {
        Ok(a) if a.ok() => a.body.clone(),
        Ok(a) if a.status == 404 || a.status == 400 || a.status == 422 => {
            return device_page(&v, &c, StatusCode::NOT_FOUND, code, true)
        }
        _ => return trouble(v, &c, got.as_ref()),
    };
    let t = v.lang.texts();
    let page = Consent {
        c: chrome(&v),
        title: t.consent_title,
        client: client_name(&shown),
        scopes: scopes(t, &shown, "scopes"),
        action: "/device/answer",
        field: "user_code",
        value: code,
    };
    render(&v, &c, StatusCode::OK, page)
}

/// POST /device/answer: allow or deny; the device hears it at its next poll.
pub async fn device_answer(
    v: Visit,
    c: web::Data<Console>,
    f: web::Form<Decision>,
) -> HttpResponse {
    if !v.signed_in() {
        let back = device_comeback(&f.user_code);
        return sign_in_then(v, &c, back);
    }
    if !v.csrf_ok(&f.csrf) {
        return form_expired(&v, &c);
    }
    let allow = f.decision == "allow";
    let (path, body) = if allow {
        (
            "/v1/oauth/device/accept",
            json!({ "user_code": f.user_code, "consent": true }),
        )
    } else {
        (
            "/v1/oauth/device/reject",
            json!({ "user_code": f.user_code }),
        )
    };
    let got = call(&c, &v, Method::POST, path, Some(&body)).await;
    let t = v.lang.texts();
    match &got {
        Ok(a) if a.ok() && allow => message(
            &v,
            &c,
            StatusCode::OK,
            t.device_title,
            t.device_approved,
            None,
        ),
        Ok(a) if a.ok() => message(
            &v,
            &c,
            StatusCode::OK,
            t.device_title,
            t.device_denied,
            None,
        ),
        Ok(a) if a.status == 404 => device_page(&v, &c, StatusCode::NOT_FOUND, String::new(), true),
        _ => trouble(v, &c, got.as_ref()),
    }
}
