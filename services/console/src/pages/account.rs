//! The person's own pages: the profile, their sessions (revoke the others),
//! two-step verification (enrol with the QR code rendered here as SVG, the
//! recovery codes shown once; turn it off), their passkeys' rename and delete
//! forms (the ceremonies: passkeys.rs).

use super::{
    call, chrome, form_expired, id_shaped, passkeys::PasskeyRow, render, sign_in_first, trouble,
    Chrome,
};
use crate::{format, pages::orgs::s, session::Visit, Console};
use actix_web::{http::StatusCode, web, HttpResponse};
use askama::Template;
use base64::{engine::general_purpose::STANDARD, Engine};
use reqwest::Method;
use serde::Deserialize;
use serde_json::{json, Map, Value};

#[derive(Template)]
#[template(path = "profile.html")]
struct Profile {
    c: Chrome,
    title: &'static str,
    tab: &'static str,
    error: Option<String>,
    notice: Option<&'static str>,
    email: String,
    name: String,
    phone: String,
    job_title: String,
    timezone: String,
    locale: String,
    bio: String,
}

async fn profile_page(
    v: Visit,
    c: &Console,
    status: StatusCode,
    error: Option<String>,
    notice: Option<&'static str>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, c);
    }
    let got = call(c, &v, Method::GET, "/v1/profile", None).await;
    let p = match &got {
        Ok(a) if a.ok() => a.body.clone(),
        _ => return trouble(v, c, got.as_ref()),
    };
    let t = v.lang.texts();
    let page = Profile {
        c: chrome(&v),
        title: t.nav_account,
        tab: "profile",
        error,
        notice,
        email: s(&p, "email").to_owned(),
        name: s(&p, "name").to_owned(),
        phone: s(&p, "phone").to_owned(),
        job_title: s(&p, "job_title").to_owned(),
        timezone: s(&p, "timezone").to_owned(),
        locale: s(&p, "locale").to_owned(),
        bio: s(&p, "bio").to_owned(),
    };
    render(&v, c, status, page)
}

/// GET /account.
pub async fn profile(v: Visit, c: web::Data<Console>) -> HttpResponse {
    profile_page(v, &c, StatusCode::OK, None, None).await
}

/// POST /account: the profile's fields as typed; the pages follow the
/// language and time zone saved.
pub async fn save_profile(
    mut v: Visit,
    c: web::Data<Console>,
    f: web::Form<std::collections::HashMap<String, String>>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(f.get("csrf").map(String::as_str).unwrap_or("")) {
        return form_expired(&v, &c);
    }
    let mut body = Map::new();
    for k in ["name", "phone", "job_title", "timezone", "locale", "bio"] {
        if let Some(val) = f.get(k) {
            body.insert(k.to_owned(), Value::String(val.trim().to_owned()));
        }
    }
    let got = call(
        &c,
        &v,
        Method::PATCH,
        "/v1/profile",
        Some(&Value::Object(body)),
    )
    .await;
    match &got {
        Ok(a) if a.ok() => {
            v.state.lang = crate::i18n::Lang::parse(a.text("locale")).or(v.state.lang);
            if let Some(l) = v.state.lang {
                v.lang = l;
            }
            let tz = a.text("timezone");
            v.state.tz = (!tz.is_empty()).then(|| tz.to_owned());
            let saved = v.lang.texts().saved;
            profile_page(v, &c, StatusCode::OK, None, Some(saved)).await
        }
        Ok(a) if matches!(a.status, 400 | 422) => {
            let e = a.error().to_owned();
            profile_page(v, &c, StatusCode::UNPROCESSABLE_ENTITY, Some(e), None).await
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

pub struct SessionRow {
    pub id: String,
    pub ip: String,
    pub created: String,
    pub expires: String,
    pub current: bool,
}

#[derive(Template)]
#[template(path = "sessions.html")]
struct Sessions {
    c: Chrome,
    title: &'static str,
    tab: &'static str,
    error: Option<String>,
    notice: Option<&'static str>,
    sessions: Vec<SessionRow>,
}

/// GET /account/sessions.
pub async fn sessions(v: Visit, c: web::Data<Console>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    let got = call(&c, &v, Method::GET, "/v1/auth/sessions", None).await;
    let list = match &got {
        Ok(a) if a.ok() => a.body.as_array().cloned().unwrap_or_default(),
        _ => return trouble(v, &c, got.as_ref()),
    };
    let tz = v.tz().to_owned();
    let page = Sessions {
        c: chrome(&v),
        title: v.lang.texts().section_sessions,
        tab: "sessions",
        error: None,
        notice: None,
        sessions: list
            .iter()
            .map(|x| SessionRow {
                id: s(x, "id").to_owned(),
                ip: s(x, "ip").to_owned(),
                created: format::datetime(s(x, "created_at"), &tz, v.lang),
                expires: format::datetime(s(x, "expires_at"), &tz, v.lang),
                current: x.get("current").and_then(Value::as_bool) == Some(true),
            })
            .collect(),
    };
    render(&v, &c, StatusCode::OK, page)
}

#[derive(Deserialize)]
pub struct CodeForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    code: String,
    #[serde(default)]
    recovery_code: String,
}

/// POST /account/sessions/{id}/revoke: sign another device out.
pub async fn revoke_session(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: web::Form<CodeForm>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) || !id_shaped(&id) {
        return form_expired(&v, &c);
    }
    let got = call(
        &c,
        &v,
        Method::DELETE,
        &format!("/v1/auth/sessions/{id}"),
        None,
    )
    .await;
    match &got {
        Ok(a) if a.ok() => v.redirect(&c, "/account/sessions"),
        _ => trouble(v, &c, got.as_ref()),
    }
}

#[derive(Template)]
#[template(path = "security.html")]
struct Security {
    c: Chrome,
    title: &'static str,
    tab: &'static str,
    error: Option<String>,
    notice: Option<&'static str>,
    enabled: bool,
    /// (the QR code as an SVG data URI, the secret to type)
    setup: Option<(String, String)>,
    recovery: Vec<String>,
    /// The person's passkeys (None: the API could not list them now).
    passkeys: Option<Vec<PasskeyRow>>,
}

/// The otpauth URI as a QR code (an SVG data URI for an `img`: no inline
/// markup for the policy to allow) and the secret it carries.
fn qr(uri: &str) -> Option<(String, String)> {
    let code = qrcode::QrCode::new(uri.as_bytes()).ok()?;
    let svg = code
        .render::<qrcode::render::svg::Color>()
        .min_dimensions(220, 220)
        .quiet_zone(true)
        .build();
    let secret = url::Url::parse(uri)
        .ok()?
        .query_pairs()
        .find(|(k, _)| k == "secret")
        .map(|(_, v)| v.into_owned())?;
    Some((
        format!("data:image/svg+xml;base64,{}", STANDARD.encode(svg)),
        secret,
    ))
}

async fn security_page(
    mut v: Visit,
    c: &Console,
    status: StatusCode,
    error: Option<String>,
    notice: Option<&'static str>,
    recovery: Vec<String>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, c);
    }
    let got = call(c, &v, Method::GET, "/v1/auth/mfa", None).await;
    let enabled = match &got {
        Ok(a) if a.ok() => a.body.get("enabled").and_then(Value::as_bool) == Some(true),
        _ => return trouble(v, c, got.as_ref()),
    };
    if enabled {
        // A pending key is dead once MFA is on (here or elsewhere).
        v.state.mfa_setup = None;
    }
    let setup = v.state.mfa_setup.as_deref().and_then(qr);
    let Ok(passkeys) = super::passkeys::list(c, &v).await else {
        return sign_in_first(v, c);
    };
    let page = Security {
        c: chrome(&v),
        title: v.lang.texts().section_security,
        tab: "security",
        error,
        notice,
        enabled,
        setup,
        recovery,
        passkeys,
    };
    render(&v, c, status, page)
}

/// The security page with an error or a notice (the passkey forms' answers).
pub(super) async fn security_with(
    v: Visit,
    c: &Console,
    status: StatusCode,
    error: Option<String>,
    notice: Option<&'static str>,
) -> HttpResponse {
    security_page(v, c, status, error, notice, Vec::new()).await
}

#[derive(Deserialize)]
pub struct SecurityQuery {
    /// A passkey was just added (the script comes back here).
    #[serde(default)]
    added: Option<String>,
}

/// GET /account/security.
pub async fn security(
    v: Visit,
    c: web::Data<Console>,
    q: web::Query<SecurityQuery>,
) -> HttpResponse {
    let notice = q
        .added
        .is_some()
        .then_some(v.lang.texts().passkey_added_notice);
    security_page(v, &c, StatusCode::OK, None, notice, Vec::new()).await
}

/// POST /account/security/enroll: a new secret, kept sealed in the cookie
/// until its first code confirms it.
pub async fn enroll(mut v: Visit, c: web::Data<Console>, f: web::Form<CodeForm>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) {
        return form_expired(&v, &c);
    }
    let got = call(&c, &v, Method::POST, "/v1/auth/mfa/enroll", None).await;
    match &got {
        Ok(a) if a.ok() => {
            v.state.mfa_setup = Some(a.text("otpauth_uri").to_owned());
            v.redirect(&c, "/account/security")
        }
        Ok(a) if matches!(a.status, 409 | 503) => {
            let e = a.error().to_owned();
            security_page(v, &c, StatusCode::CONFLICT, Some(e), None, Vec::new()).await
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

/// POST /account/security/confirm: the first code turns it on; the
/// recovery codes are shown on this answer only.
pub async fn confirm(mut v: Visit, c: web::Data<Console>, f: web::Form<CodeForm>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) {
        return form_expired(&v, &c);
    }
    let body = json!({ "code": f.code.trim() });
    let got = call(&c, &v, Method::POST, "/v1/auth/mfa/confirm", Some(&body)).await;
    match &got {
        Ok(a) if a.ok() => {
            v.state.mfa_setup = None;
            let codes = a
                .body
                .get("recovery_codes")
                .and_then(Value::as_array)
                .map(|c| {
                    c.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            security_page(v, &c, StatusCode::OK, None, None, codes).await
        }
        Ok(a) if a.status == 409 => {
            // No enrolment waits (replaced or finished elsewhere): start over.
            v.state.mfa_setup = None;
            let e = a.error().to_owned();
            security_page(v, &c, StatusCode::CONFLICT, Some(e), None, Vec::new()).await
        }
        Ok(a) if matches!(a.status, 400 | 422) => {
            let wrong = v.lang.texts().mfa_wrong.to_owned();
            security_page(
                v,
                &c,
                StatusCode::UNPROCESSABLE_ENTITY,
                Some(wrong),
                None,
                Vec::new(),
            )
            .await
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

/// POST /account/security/disable: a code or a recovery code turns it off.
pub async fn disable(mut v: Visit, c: web::Data<Console>, f: web::Form<CodeForm>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) {
        return form_expired(&v, &c);
    }
    let body = if f.recovery_code.trim().is_empty() {
        json!({ "code": f.code.trim() })
    } else {
        json!({ "recovery_code": f.recovery_code.trim() })
    };
    let got = call(&c, &v, Method::POST, "/v1/auth/mfa/disable", Some(&body)).await;
    let t = v.lang.texts();
    match &got {
        Ok(a) if a.ok() => {
            v.state.mfa_setup = None;
            security_page(
                v,
                &c,
                StatusCode::OK,
                None,
                Some(t.mfa_off_done),
                Vec::new(),
            )
            .await
        }
        Ok(a) if matches!(a.status, 400 | 409 | 422) => {
            security_page(
                v,
                &c,
                StatusCode::UNPROCESSABLE_ENTITY,
                Some(t.mfa_wrong.to_owned()),
                None,
                Vec::new(),
            )
            .await
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

#[derive(Template)]
#[template(path = "memory.html")]
struct Memory {
    c: Chrome,
    title: &'static str,
    tab: &'static str,
    error: Option<String>,
    notice: Option<&'static str>,
    soul: String,
    memory: String,
}

async fn memory_page(
    v: Visit,
    c: &Console,
    status: StatusCode,
    error: Option<String>,
    notice: Option<&'static str>,
    typed: Option<String>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, c);
    }
    let got = call(c, &v, Method::GET, "/v1/memory", None).await;
    let m = match &got {
        Ok(a) if a.ok() => a.body.clone(),
        _ => return trouble(v, c, got.as_ref()),
    };
    let page = Memory {
        c: chrome(&v),
        title: v.lang.texts().section_memory,
        tab: "memory",
        error,
        notice,
        soul: typed.unwrap_or_else(|| s(&m, "soul_md").to_owned()),
        memory: s(&m, "memory_md").to_owned(),
    };
    render(&v, c, status, page)
}

/// GET /account/memory: what the assistant keeps about the person.
pub async fn memory(v: Visit, c: web::Data<Console>) -> HttpResponse {
    memory_page(v, &c, StatusCode::OK, None, None, None).await
}

#[derive(Deserialize)]
pub struct SoulForm {
    #[serde(default)]
    csrf: String,
    soul_md: String,
}

/// POST /account/memory: the person's own part (soul_md).
pub async fn save_memory(v: Visit, c: web::Data<Console>, f: web::Form<SoulForm>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) {
        return form_expired(&v, &c);
    }
    let body = json!({ "soul_md": f.soul_md });
    let got = call(&c, &v, Method::PATCH, "/v1/memory/soul", Some(&body)).await;
    match &got {
        Ok(a) if a.ok() => {
            let saved = v.lang.texts().saved;
            memory_page(v, &c, StatusCode::OK, None, Some(saved), None).await
        }
        Ok(a) if matches!(a.status, 400 | 413 | 422) => {
            let e = a.error().to_owned();
            let typed = Some(f.soul_md.clone());
            memory_page(
                v,
                &c,
                StatusCode::UNPROCESSABLE_ENTITY,
                Some(e),
                None,
                typed,
            )
            .await
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

#[derive(Deserialize)]
pub struct NameForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
}

/// POST /account/passkeys/{id}: a new name.
pub async fn rename_passkey(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: web::Form<NameForm>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) || !id_shaped(&id) {
        return form_expired(&v, &c);
    }
    let body = json!({ "name": f.name.trim() });
    let got = call(
        &c,
        &v,
        Method::PATCH,
        &format!("/v1/auth/passkeys/{id}"),
        Some(&body),
    )
    .await;
    let t = v.lang.texts();
    match &got {
        Ok(a) if a.ok() => security_with(v, &c, StatusCode::OK, None, Some(t.saved)).await,
        Ok(a) if matches!(a.status, 400 | 422) => {
            let e = a.error().to_owned();
            security_with(v, &c, StatusCode::UNPROCESSABLE_ENTITY, Some(e), None).await
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

/// POST /account/passkeys/{id}/delete: the passkey no longer signs in (a
/// staff member's last second factor stays: identity's 409, shown).
pub async fn delete_passkey(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: web::Form<super::CsrfForm>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) || !id_shaped(&id) {
        return form_expired(&v, &c);
    }
    let got = call(
        &c,
        &v,
        Method::DELETE,
        &format!("/v1/auth/passkeys/{id}"),
        None,
    )
    .await;
    let t = v.lang.texts();
    match &got {
        Ok(a) if a.ok() => {
            security_with(v, &c, StatusCode::OK, None, Some(t.passkey_deleted)).await
        }
        Ok(a) if a.status == 409 => {
            let e = a.error().to_owned();
            security_with(v, &c, StatusCode::CONFLICT, Some(e), None).await
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

#[cfg(test)]
mod tests {
    use super::{PasskeyRow, Security};
    use crate::{i18n::Lang, pages::offers_passkeys, pages::test_chrome};
    use askama::Template;

    fn security(lang: Lang, passkeys: Option<Vec<PasskeyRow>>) -> String {
        Security {
            c: test_chrome(lang, "tok"),
            title: "t",
            tab: "security",
            error: None,
            notice: None,
            enabled: false,
            setup: None,
            recovery: Vec::new(),
            passkeys,
        }
        .render()
        .expect("renders")
    }

    #[test]
    fn the_security_page_lists_passkeys_with_their_forms() {
        let id = "0b6c6f5e-6c39-4d3a-9d55-6f3c1c1f8c11";
        let html = security(
            Lang::En,
            Some(vec![PasskeyRow {
                id: id.into(),
                name: "Ada's <laptop>".into(),
                added: "2026-11-29 14:05 UTC".into(),
                last_used: None,
            }]),
        );
        offers_passkeys(&html, "tok");
        assert!(!html.contains("<laptop>"), "escaped: {html}");
        assert!(html.contains("Ada&#39;s &#60;laptop&#62;"), "{html}");
        assert!(html.contains(&format!(r#"action="/account/passkeys/{id}""#)));
        assert!(html.contains(&format!(r#"action="/account/passkeys/{id}/delete""#)));
        assert!(html.contains("Not yet"));
        // Adding needs a recent sign-in: the way back is there, hidden.
        assert!(html.contains(r#"name="next" value="/account/security""#));
        let none = security(Lang::Tr, Some(Vec::new()));
        assert!(none.contains("Henüz geçiş anahtarı yok."));
        let unknown = security(Lang::En, None);
        assert!(unknown.contains("cannot be listed right now"));
    }

    #[test]
    fn the_qr_code_is_an_svg_image_and_the_secret_is_read_from_the_uri() {
        let (img, secret) =
            super::qr("otpauth://totp/Hub:ada%40example.com?secret=JBSWY3DPEHPK3PXP&issuer=Hub")
                .expect("a code");
        assert!(img.starts_with("data:image/svg+xml;base64,"));
        assert_eq!(secret, "JBSWY3DPEHPK3PXP");
        assert!(super::qr("not a uri").is_none());
    }
}
