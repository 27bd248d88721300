//! An organization's pages past its summary: members and invitations, API
//! keys (the token shown once), KYC (the submission form per legal type,
//! its status and the corrections staff asked for), wallet transactions.

use super::{
    call, chrome, form_expired, id_shaped, org_of, render, sign_in_first, trouble, Chrome, CsrfForm,
};
use crate::{
    format,
    i18n::Texts,
    pages::orgs::{kyc, role, s},
    session::Visit,
    Console,
};
use actix_web::{http::StatusCode, web, HttpResponse};
use askama::Template;
use reqwest::Method;
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// What a failed call says, for the page's alert (the API's `error`).
fn why(a: &crate::api::Answer) -> String {
    let e = a.error();
    if e.is_empty() {
        format!("HTTP {}", a.status)
    } else {
        e.to_owned()
    }
}

// --- members and invitations ----------------------------------------------

pub struct InviteRow {
    pub id: String,
    pub email: String,
    pub role: &'static str,
    pub status: &'static str,
    pub pending: bool,
}

fn invite_status(t: &'static Texts, code: &str) -> &'static str {
    match code {
        "accepted" => t.invite_status_accepted,
        "revoked" => t.invite_status_revoked,
        "expired" => t.invite_status_expired,
        _ => t.invite_status_pending,
    }
}

#[derive(Template)]
#[template(path = "members.html")]
struct Members {
    c: Chrome,
    title: String,
    org_id: String,
    org_name: String,
    tab: &'static str,
    error: Option<String>,
    members: Vec<(String, &'static str)>,
    can_invite: bool,
    invites: Vec<InviteRow>,
}

async fn members_page(
    v: Visit,
    c: &Console,
    id: &str,
    status: StatusCode,
    error: Option<String>,
) -> HttpResponse {
    let (v, org) = match org_of(v, c, id).await {
        Ok(x) => x,
        Err(page) => return page,
    };
    let got = call(
        c,
        &v,
        Method::GET,
        &format!("/v1/organizations/{id}/members"),
        None,
    )
    .await;
    let list = match &got {
        Ok(a) if a.ok() => a.body.as_array().cloned().unwrap_or_default(),
        _ => return trouble(v, c, got.as_ref()),
    };
    let t = v.lang.texts();
    // Only owners and managers see (and send) invitations: the API says.
    let inv = call(
        c,
        &v,
        Method::GET,
        &format!("/v1/organizations/{id}/invites"),
        None,
    )
    .await;
    let (can_invite, invites) = match &inv {
        Ok(a) if a.ok() => (
            true,
            a.body
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|i| InviteRow {
                    id: s(i, "id").to_owned(),
                    email: s(i, "email").to_owned(),
                    role: role(t, s(i, "role")),
                    status: invite_status(t, s(i, "status")),
                    pending: s(i, "status") == "pending",
                })
                .collect(),
        ),
        Ok(a) if a.status == 403 => (false, Vec::new()),
        _ => return trouble(v, c, inv.as_ref()),
    };
    let page = Members {
        c: chrome(&v),
        title: format!("{} · {}", s(&org, "name"), t.section_members),
        org_id: id.to_owned(),
        org_name: s(&org, "name").to_owned(),
        tab: "members",
        error,
        members: list
            .iter()
            .map(|m| (s(m, "email").to_owned(), role(t, s(m, "role"))))
            .collect(),
        can_invite,
        invites,
    };
    render(&v, c, status, page)
}

/// GET /orgs/{id}/members.
pub async fn members(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    members_page(v, &c, &id, StatusCode::OK, None).await
}

#[derive(Deserialize)]
pub struct InviteForm {
    #[serde(default)]
    csrf: String,
    email: String,
    role: String,
}

/// POST /orgs/{id}/invites: mail an invitation.
pub async fn invite(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: web::Form<InviteForm>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) || !id_shaped(&id) {
        return form_expired(&v, &c);
    }
    let body = json!({ "email": f.email.trim(), "role": f.role });
    let got = call(
        &c,
        &v,
        Method::POST,
        &format!("/v1/organizations/{id}/invites"),
        Some(&body),
    )
    .await;
    match &got {
        Ok(a) if a.ok() => v.redirect(&c, &format!("/orgs/{id}/members")),
        Ok(a) if matches!(a.status, 400 | 409 | 422 | 429) => {
            let e = why(a);
            members_page(v, &c, &id, StatusCode::UNPROCESSABLE_ENTITY, Some(e)).await
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

/// POST /orgs/{id}/invites/{invite}/revoke.
pub async fn revoke_invite(
    v: Visit,
    c: web::Data<Console>,
    path: web::Path<(String, String)>,
    f: web::Form<CsrfForm>,
) -> HttpResponse {
    let (id, invite) = path.into_inner();
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) || !id_shaped(&id) || !id_shaped(&invite) {
        return form_expired(&v, &c);
    }
    let got = call(
        &c,
        &v,
        Method::DELETE,
        &format!("/v1/organizations/{id}/invites/{invite}"),
        None,
    )
    .await;
    match &got {
        Ok(a) if a.ok() => v.redirect(&c, &format!("/orgs/{id}/members")),
        Ok(a) if a.status == 409 => {
            let e = why(a);
            members_page(v, &c, &id, StatusCode::CONFLICT, Some(e)).await
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

// --- API keys --------------------------------------------------------------

pub struct KeyRow {
    pub id: String,
    pub name: String,
    pub role: &'static str,
    pub created: String,
    pub revoked: Option<String>,
}

#[derive(Template)]
#[template(path = "keys.html")]
struct Keys {
    c: Chrome,
    title: String,
    org_id: String,
    org_name: String,
    tab: &'static str,
    error: Option<String>,
    keys: Vec<KeyRow>,
    new_token: Option<String>,
}

async fn keys_page(
    v: Visit,
    c: &Console,
    id: &str,
    status: StatusCode,
    error: Option<String>,
    new_token: Option<String>,
) -> HttpResponse {
    // A new key's token is shown whatever else fails: it exists nowhere
    // else, and the key is live.
    let fresh = new_token.is_some();
    let (v, org) = if fresh {
        let o = call(c, &v, Method::GET, &format!("/v1/organizations/{id}"), None).await;
        let o = o
            .ok()
            .filter(|a| a.ok())
            .map(|a| a.body)
            .unwrap_or(Value::Null);
        (v, o)
    } else {
        match org_of(v, c, id).await {
            Ok(x) => x,
            Err(page) => return page,
        }
    };
    let got = call(
        c,
        &v,
        Method::GET,
        &format!("/v1/organizations/{id}/api-keys"),
        None,
    )
    .await;
    let list = match &got {
        Ok(a) if a.ok() => a.body.as_array().cloned().unwrap_or_default(),
        _ if fresh => Vec::new(),
        _ => return trouble(v, c, got.as_ref()),
    };
    let t = v.lang.texts();
    let tz = v.tz().to_owned();
    let page = Keys {
        c: chrome(&v),
        title: format!("{} · {}", s(&org, "name"), t.section_keys),
        org_id: id.to_owned(),
        org_name: s(&org, "name").to_owned(),
        tab: "keys",
        error,
        keys: list
            .iter()
            .map(|k| KeyRow {
                id: s(k, "id").to_owned(),
                name: s(k, "name").to_owned(),
                role: role(t, s(k, "role")),
                created: format::datetime(s(k, "created_at"), &tz, v.lang),
                revoked: k
                    .get("revoked_at")
                    .and_then(Value::as_str)
                    .map(|at| format::datetime(at, &tz, v.lang)),
            })
            .collect(),
        new_token,
    };
    render(&v, c, status, page)
}

/// GET /orgs/{id}/api-keys.
pub async fn keys(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    keys_page(v, &c, &id, StatusCode::OK, None, None).await
}

#[derive(Deserialize)]
pub struct KeyForm {
    #[serde(default)]
    csrf: String,
    name: String,
    role: String,
}

/// POST /orgs/{id}/api-keys: the new key's token, on this answer only.
pub async fn create_key(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: web::Form<KeyForm>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) || !id_shaped(&id) {
        return form_expired(&v, &c);
    }
    let body = json!({ "name": f.name.trim(), "role": f.role });
    let got = call(
        &c,
        &v,
        Method::POST,
        &format!("/v1/organizations/{id}/api-keys"),
        Some(&body),
    )
    .await;
    match &got {
        Ok(a) if a.ok() => {
            let token = a.text("token").to_owned();
            keys_page(v, &c, &id, StatusCode::CREATED, None, Some(token)).await
        }
        Ok(a) if matches!(a.status, 400 | 409 | 422) => {
            let e = why(a);
            keys_page(v, &c, &id, StatusCode::UNPROCESSABLE_ENTITY, Some(e), None).await
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

/// POST /orgs/{id}/api-keys/{key}/revoke.
pub async fn revoke_key(
    v: Visit,
    c: web::Data<Console>,
    path: web::Path<(String, String)>,
    f: web::Form<CsrfForm>,
) -> HttpResponse {
    let (id, key) = path.into_inner();
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) || !id_shaped(&id) || !id_shaped(&key) {
        return form_expired(&v, &c);
    }
    let got = call(
        &c,
        &v,
        Method::DELETE,
        &format!("/v1/organizations/{id}/api-keys/{key}"),
        None,
    )
    .await;
    match &got {
        Ok(a) if a.ok() => v.redirect(&c, &format!("/orgs/{id}/api-keys")),
        _ => trouble(v, &c, got.as_ref()),
    }
}

// --- KYC -------------------------------------------------------------------

pub struct SubmissionRow {
    pub created: String,
    pub status: &'static str,
    pub notes: String,
    pub requested: Vec<String>,
}

fn submission_status(t: &'static Texts, code: &str) -> &'static str {
    match code {
        "approved" => t.kyc_sub_approved,
        "rejected" => t.kyc_sub_rejected,
        "more_info_requested" => t.kyc_sub_more_info,
        _ => t.kyc_sub_pending,
    }
}

/// A submission's field key (`fields.full_name`, `address.city`) as the
/// form labels it.
pub fn field_label(t: &'static Texts, key: &str) -> String {
    let name = key.rsplit('.').next().unwrap_or(key);
    match name {
        "full_name" => t.field_full_name,
        "national_id" => t.field_national_id,
        "company_name" => t.field_company_name,
        "tax_id" => t.field_tax_id,
        "registration_number" => t.field_registration_number,
        "line1" => t.field_line1,
        "line2" => t.field_line2,
        "city" => t.field_city,
        "region" => t.field_region,
        "postal_code" => t.field_postal_code,
        "country" => t.country_short,
        other => other,
    }
    .to_owned()
}

#[derive(Template)]
#[template(path = "kyc.html")]
struct Kyc {
    c: Chrome,
    title: String,
    org_id: String,
    org_name: String,
    tab: &'static str,
    error: Option<String>,
    kyc_code: &'static str,
    kyc: &'static str,
    submissions: Vec<SubmissionRow>,
    can_submit: bool,
    corporate: bool,
    country: String,
    /// The form as it was sent (a refused submission keeps what was typed).
    typed: std::collections::HashMap<String, String>,
}

impl Kyc {
    /// The typed value of a field (empty the first time).
    fn val(&self, key: &str) -> &str {
        self.typed.get(key).map(String::as_str).unwrap_or("")
    }
}

async fn kyc_page(
    v: Visit,
    c: &Console,
    id: &str,
    status: StatusCode,
    error: Option<String>,
    typed: std::collections::HashMap<String, String>,
) -> HttpResponse {
    let (v, org) = match org_of(v, c, id).await {
        Ok(x) => x,
        Err(page) => return page,
    };
    let got = call(
        c,
        &v,
        Method::GET,
        &format!("/v1/organizations/{id}/kyc"),
        None,
    )
    .await;
    let list = match &got {
        Ok(a) if a.ok() => a.body.as_array().cloned().unwrap_or_default(),
        _ => return trouble(v, c, got.as_ref()),
    };
    let t = v.lang.texts();
    let tz = v.tz().to_owned();
    let (kyc_code, kyc_text) = kyc(t, s(&org, "kyc_status"));
    let waiting = list.iter().any(|x| s(x, "status") == "pending");
    let admin = matches!(s(&org, "your_role"), "owner" | "manager");
    let page = Kyc {
        c: chrome(&v),
        title: format!("{} · {}", s(&org, "name"), t.section_kyc),
        org_id: id.to_owned(),
        org_name: s(&org, "name").to_owned(),
        tab: "kyc",
        error,
        kyc_code,
        kyc: kyc_text,
        submissions: list
            .iter()
            .map(|x| SubmissionRow {
                created: format::datetime(s(x, "created_at"), &tz, v.lang),
                status: submission_status(t, s(x, "status")),
                notes: s(x, "review_notes").to_owned(),
                requested: x
                    .get("requested_fields")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(|k| field_label(t, k))
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect(),
        can_submit: admin && !waiting && kyc_code != "verified",
        corporate: s(&org, "legal_type") == "corporate",
        country: s(&org, "country").to_owned(),
        typed,
    };
    render(&v, c, status, page)
}

/// GET /orgs/{id}/kyc.
pub async fn kyc_view(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    kyc_page(v, &c, &id, StatusCode::OK, None, Default::default()).await
}

/// POST /orgs/{id}/kyc: the form's fields for the organization's legal type
/// (the API checks which are required) and the address.
pub async fn kyc_submit(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: web::Form<std::collections::HashMap<String, String>>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    let csrf = f.get("csrf").map(String::as_str).unwrap_or("");
    if !v.csrf_ok(csrf) || !id_shaped(&id) {
        return form_expired(&v, &c);
    }
    let pick = |keys: &[&str]| -> Map<String, Value> {
        keys.iter()
            .filter_map(|k| {
                let val = f.get(*k)?.trim();
                (!val.is_empty()).then(|| ((*k).to_owned(), Value::String(val.to_owned())))
            })
            .collect()
    };
    let fields = pick(&[
        "full_name",
        "national_id",
        "company_name",
        "tax_id",
        "registration_number",
    ]);
    let mut address = pick(&["line1", "line2", "city", "region", "postal_code", "country"]);
    if let Some(Value::String(cc)) = address.get_mut("country") {
        *cc = cc.to_ascii_uppercase();
    }
    let body = json!({
        "fields": fields,
        "address": address,
        "notice_acked": f.get("notice_acked").map(String::as_str) == Some("true"),
    });
    let got = call(
        &c,
        &v,
        Method::POST,
        &format!("/v1/organizations/{id}/kyc"),
        Some(&body),
    )
    .await;
    match &got {
        Ok(a) if a.ok() => v.redirect(&c, &format!("/orgs/{id}/kyc")),
        Ok(a) if matches!(a.status, 400 | 409 | 422) => {
            let e = why(a);
            let mut typed = f.into_inner();
            typed.remove("csrf");
            kyc_page(v, &c, &id, StatusCode::UNPROCESSABLE_ENTITY, Some(e), typed).await
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

// --- wallet ----------------------------------------------------------------

#[derive(Template)]
#[template(path = "wallet.html")]
struct Wallet {
    c: Chrome,
    title: String,
    org_id: String,
    org_name: String,
    tab: &'static str,
    error: Option<String>,
    rows: Vec<(String, String, String, String)>,
}

/// GET /orgs/{id}/wallet: the last transactions (the finance role and up).
pub async fn wallet(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    let (v, org) = match org_of(v, &c, &id).await {
        Ok(x) => x,
        Err(page) => return page,
    };
    let got = call(
        &c,
        &v,
        Method::GET,
        &format!("/v1/organizations/{id}/wallet/transactions"),
        None,
    )
    .await;
    let list = match &got {
        Ok(a) if a.ok() => a.body.as_array().cloned().unwrap_or_default(),
        _ => return trouble(v, &c, got.as_ref()),
    };
    let t = v.lang.texts();
    let currency = org
        .get("wallet_currency")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let tz = v.tz().to_owned();
    let page = Wallet {
        c: chrome(&v),
        title: format!("{} · {}", s(&org, "name"), t.section_wallet),
        org_id: id.to_string(),
        org_name: s(&org, "name").to_owned(),
        tab: "wallet",
        error: None,
        rows: list
            .iter()
            .map(|r| {
                (
                    format::datetime(s(r, "created_at"), &tz, v.lang),
                    s(r, "kind").to_owned(),
                    format::money(
                        r.get("delta_minor").and_then(Value::as_i64).unwrap_or(0),
                        &currency,
                        v.lang,
                    ),
                    s(r, "note").to_owned(),
                )
            })
            .collect(),
    };
    render(&v, &c, StatusCode::OK, page)
}
