//! Organizations: the list, creating one, an organization's page.

use super::{call, chrome, form_expired, render, sign_in_first, trouble, Chrome};
use crate::{format, i18n::Texts, session::Visit, Console};
use actix_web::{http::StatusCode, web, HttpResponse};
use askama::Template;
use reqwest::Method;
use serde::Deserialize;
use serde_json::{json, Value};

/// An organization as the pages show it.
pub struct OrgRow {
    pub id: String,
    pub name: String,
    pub country: String,
    pub legal_type: &'static str,
    /// `unverified`, `pending`, `verified`, `rejected` (the badge's class).
    pub kyc_code: &'static str,
    pub kyc: &'static str,
}

pub fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

pub fn legal(t: &'static Texts, code: &str) -> &'static str {
    match code {
        "corporate" => t.legal_corporate,
        _ => t.legal_individual,
    }
}

pub fn kyc(t: &'static Texts, code: &str) -> (&'static str, &'static str) {
    match code {
        "pending" => ("pending", t.kyc_pending),
        "verified" => ("verified", t.kyc_verified),
        "rejected" => ("rejected", t.kyc_rejected),
        _ => ("unverified", t.kyc_unverified),
    }
}

pub fn role(t: &'static Texts, code: &str) -> &'static str {
    match code {
        "owner" => t.role_owner,
        "manager" => t.role_manager,
        "finance" => t.role_finance,
        "developer" => t.role_developer,
        _ => t.role_visitor,
    }
}

pub fn row(t: &'static Texts, o: &Value) -> OrgRow {
    let (kyc_code, kyc) = kyc(t, s(o, "kyc_status"));
    OrgRow {
        id: s(o, "id").to_owned(),
        name: s(o, "name").to_owned(),
        country: s(o, "country").to_owned(),
        legal_type: legal(t, s(o, "legal_type")),
        kyc_code,
        kyc,
    }
}

#[derive(Template)]
#[template(path = "orgs.html")]
struct Orgs {
    c: Chrome,
    title: &'static str,
    orgs: Vec<OrgRow>,
    error: Option<String>,
    form_name: String,
    form_legal: String,
    form_country: String,
}

/// The list page, with the creation form (and what went wrong with it).
async fn list_page(
    v: Visit,
    c: &Console,
    status: StatusCode,
    error: Option<String>,
    form: Option<&CreateForm>,
) -> HttpResponse {
    let got = call(c, &v, Method::GET, "/v1/organizations", None).await;
    let list = match &got {
        Ok(a) if a.ok() => a.body.as_array().cloned().unwrap_or_default(),
        _ => return trouble(v, c, got.as_ref()),
    };
    let t = v.lang.texts();
    let page = Orgs {
        c: chrome(&v),
        title: t.orgs_title,
        orgs: list.iter().map(|o| row(t, o)).collect(),
        error,
        form_name: form.map(|f| f.name.clone()).unwrap_or_default(),
        form_legal: form.map(|f| f.legal_type.clone()).unwrap_or_default(),
        form_country: form.map(|f| f.country.clone()).unwrap_or_default(),
    };
    render(&v, c, status, page)
}

/// GET /orgs.
pub async fn list(v: Visit, c: web::Data<Console>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    list_page(v, &c, StatusCode::OK, None, None).await
}

#[derive(Deserialize)]
pub struct CreateForm {
    #[serde(default)]
    csrf: String,
    name: String,
    legal_type: String,
    country: String,
}

/// POST /orgs: create one; the API's refusal (a country no entity serves,
/// a bad name) is shown on the list page with the form as it was.
pub async fn create(v: Visit, c: web::Data<Console>, f: web::Form<CreateForm>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) {
        return form_expired(&v, &c);
    }
    let body = json!({
        "name": f.name.trim(),
        "legal_type": f.legal_type,
        "country": f.country.trim().to_ascii_uppercase(),
    });
    let got = call(&c, &v, Method::POST, "/v1/organizations", Some(&body)).await;
    match &got {
        Ok(a) if a.ok() => {
            let to = format!("/orgs/{}", a.text("id"));
            v.redirect(&c, &to)
        }
        Ok(a) if a.status == 400 || a.status == 422 || a.status == 409 => {
            let why = a.error().to_owned();
            list_page(v, &c, StatusCode::UNPROCESSABLE_ENTITY, Some(why), Some(&f)).await
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

#[derive(Template)]
#[template(path = "org.html")]
struct Org {
    c: Chrome,
    title: String,
    org_id: String,
    org_name: String,
    tab: &'static str,
    error: Option<String>,
    org: OrgRow,
    verified_at: Option<String>,
    role: &'static str,
    status: &'static str,
    entity: String,
    members: i64,
    wallet: String,
    tokens: i64,
}

/// GET /orgs/{id}: the organization's page (404 for anything not the
/// person's, as the API answers).
pub async fn detail(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    let id = id.into_inner();
    if !super::id_shaped(&id) {
        return super::not_found(v, c).await;
    }
    let got = call(
        &c,
        &v,
        Method::GET,
        &format!("/v1/organizations/{id}"),
        None,
    )
    .await;
    let o = match &got {
        Ok(a) if a.ok() => a.body.clone(),
        Ok(a) if a.status == 403 => return super::not_found(v, c).await,
        _ => return trouble(v, &c, got.as_ref()),
    };
    let t = v.lang.texts();
    let wallet = match (
        o.get("wallet_balance_minor").and_then(Value::as_i64),
        o.get("wallet_currency").and_then(Value::as_str),
    ) {
        (Some(minor), Some(cur)) => format::money(minor, cur, v.lang),
        _ => t.no_wallet.to_owned(),
    };
    let verified_at = o
        .get("kyc_verified_at")
        .and_then(Value::as_str)
        .map(|at| format::datetime(at, v.tz(), v.lang));
    let page = Org {
        c: chrome(&v),
        title: s(&o, "name").to_owned(),
        org_id: id.clone(),
        org_name: s(&o, "name").to_owned(),
        tab: "home",
        error: None,
        org: row(t, &o),
        verified_at,
        role: role(t, s(&o, "your_role")),
        status: if s(&o, "status") == "suspended" {
            t.status_suspended
        } else {
            t.status_active
        },
        entity: s(&o, "distributor_entity").to_owned(),
        members: o.get("members").and_then(Value::as_i64).unwrap_or(0),
        wallet,
        tokens: o.get("tokens").and_then(Value::as_i64).unwrap_or(0),
    };
    render(&v, &c, StatusCode::OK, page)
}
