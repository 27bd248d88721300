//! The staff control tower: what needs a person (the overview), the KYC
//! queue with its decisions, finding an organization. The API decides who
//! is staff: anyone else gets its 403, as a page.

use super::{call, chrome, form_expired, id_shaped, render, sign_in_first, trouble, Chrome};
use crate::{
    format,
    i18n::Texts,
    pages::{
        org_admin::field_label,
        orgs::{row, s, OrgRow},
    },
    session::Visit,
    Console,
};
use actix_web::{http::StatusCode, web, HttpResponse};
use askama::Template;
use reqwest::Method;
use serde::Deserialize;
use serde_json::{json, Value};

fn queue_name(t: &'static Texts, key: &str) -> String {
    match key {
        "kyc_submissions_pending" => t.queue_kyc_submissions_pending,
        "payment_claims_pending" => t.queue_payment_claims_pending,
        "fulfilment_queue" => t.queue_fulfilment_queue,
        "billing_runs_running" => t.queue_billing_runs_running,
        "organizations_suspended" => t.queue_organizations_suspended,
        "webhook_endpoints_failing" => t.queue_webhook_endpoints_failing,
        "proposals_draft" => t.queue_proposals_draft,
        other => other,
    }
    .to_owned()
}

#[derive(Template)]
#[template(path = "staff_home.html")]
struct Home {
    c: Chrome,
    title: &'static str,
    tab: &'static str,
    queues: Vec<(String, i64)>,
    dead_letters: String,
    down: Vec<String>,
}

/// GET /staff: the overview.
pub async fn home(v: Visit, c: web::Data<Console>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    let got = call(&c, &v, Method::GET, "/v1/admin/overview", None).await;
    let o = match &got {
        Ok(a) if a.ok() => a.body.clone(),
        _ => return trouble(v, &c, got.as_ref()),
    };
    let t = v.lang.texts();
    let queues = o
        .get("queues")
        .and_then(Value::as_object)
        .map(|q| {
            q.iter()
                .map(|(k, q)| {
                    (
                        queue_name(t, k),
                        q.get("count").and_then(Value::as_i64).unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let down = o
        .get("services")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(_, s)| s.get("ready").and_then(Value::as_bool) != Some(true))
                .map(|(name, s)| {
                    format!(
                        "{name}: {}",
                        s.get("error").and_then(Value::as_str).unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let page = Home {
        c: chrome(&v),
        title: t.staff_title,
        tab: "home",
        queues,
        dead_letters: o
            .get("dead_letters_total")
            .and_then(Value::as_i64)
            .map(|n| n.to_string())
            .unwrap_or_else(|| "?".into()),
        down,
    };
    render(&v, &c, StatusCode::OK, page)
}

pub struct QueueItem {
    pub id: String,
    pub org_name: String,
    pub created: String,
    /// (key as the API names it, label, value)
    pub fields: Vec<(String, String, String)>,
}

#[derive(Template)]
#[template(path = "staff_kyc.html")]
struct KycQueue {
    c: Chrome,
    title: &'static str,
    tab: &'static str,
    error: Option<String>,
    items: Vec<QueueItem>,
}

async fn queue_page(
    v: Visit,
    c: &Console,
    status: StatusCode,
    error: Option<String>,
) -> HttpResponse {
    let got = call(c, &v, Method::GET, "/v1/admin/kyc", None).await;
    let list = match &got {
        Ok(a) if a.ok() => a.body.as_array().cloned().unwrap_or_default(),
        _ => return trouble(v, c, got.as_ref()),
    };
    let t = v.lang.texts();
    let tz = v.tz().to_owned();
    let items = list
        .iter()
        .map(|x| {
            let mut fields = Vec::new();
            for part in ["fields", "address"] {
                if let Some(m) = x.get(part).and_then(Value::as_object) {
                    for (k, val) in m {
                        let key = format!("{part}.{k}");
                        fields.push((
                            key.clone(),
                            field_label(t, &key),
                            val.as_str().unwrap_or("").to_owned(),
                        ));
                    }
                }
            }
            QueueItem {
                id: s(x, "id").to_owned(),
                org_name: s(x, "org_name").to_owned(),
                created: format::datetime(s(x, "created_at"), &tz, v.lang),
                fields,
            }
        })
        .collect();
    let page = KycQueue {
        c: chrome(&v),
        title: t.staff_kyc,
        tab: "kyc",
        error,
        items,
    };
    render(&v, c, status, page)
}

/// GET /staff/kyc: pending submissions, their fields opened for review.
pub async fn kyc_queue(v: Visit, c: web::Data<Console>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    queue_page(v, &c, StatusCode::OK, None).await
}

/// POST /staff/kyc/{id}: approve, reject, or ask for corrections of the
/// checked fields.
pub async fn kyc_decide(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: web::Form<Vec<(String, String)>>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    let one = |k: &str| {
        f.iter()
            .find(|(n, _)| n == k)
            .map(|(_, val)| val.as_str())
            .unwrap_or("")
    };
    if !v.csrf_ok(one("csrf")) || !id_shaped(&id) {
        return form_expired(&v, &c);
    }
    let notes = one("notes").trim();
    let notes = (!notes.is_empty()).then_some(notes);
    let (path, body) = match one("decision") {
        "approve" => ("approve", json!({ "notes": notes })),
        "reject" => ("reject", json!({ "notes": notes })),
        _ => {
            let requested: Vec<&str> = f
                .iter()
                .filter(|(n, _)| n == "field")
                .map(|(_, val)| val.as_str())
                .collect();
            (
                "request-info",
                json!({ "requested_fields": requested, "notes": notes }),
            )
        }
    };
    let got = call(
        &c,
        &v,
        Method::POST,
        &format!("/v1/admin/kyc/{id}/{path}"),
        Some(&body),
    )
    .await;
    match &got {
        Ok(a) if a.ok() => v.redirect(&c, "/staff/kyc"),
        Ok(a) if matches!(a.status, 400 | 409 | 422) => {
            let e = a.error().to_owned();
            queue_page(v, &c, StatusCode::UNPROCESSABLE_ENTITY, Some(e)).await
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

#[derive(Template)]
#[template(path = "staff_orgs.html")]
struct Orgs {
    c: Chrome,
    title: &'static str,
    tab: &'static str,
    q: String,
    /// (the row, its status: active, suspended, closed)
    orgs: Vec<(OrgRow, String)>,
}

#[derive(Deserialize)]
pub struct Search {
    q: Option<String>,
}

/// GET /staff/orgs?q=: find an organization by name, id or tax number.
pub async fn orgs(v: Visit, c: web::Data<Console>, q: web::Query<Search>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    let q: String =
        q.q.as_deref()
            .unwrap_or("")
            .trim()
            .chars()
            .take(200)
            .collect();
    let mut path = String::from("/v1/admin/organizations?limit=50");
    if !q.is_empty() {
        path.push_str("&q=");
        path.push_str(&url::form_urlencoded::byte_serialize(q.as_bytes()).collect::<String>());
    }
    let got = call(&c, &v, Method::GET, &path, None).await;
    let list = match &got {
        Ok(a) if a.ok() => a.body.as_array().cloned().unwrap_or_default(),
        // A search the API refuses (a control character) finds nothing.
        Ok(a) if a.status == 400 => Vec::new(),
        _ => return trouble(v, &c, got.as_ref()),
    };
    let t = v.lang.texts();
    let page = Orgs {
        c: chrome(&v),
        title: t.staff_orgs,
        tab: "orgs",
        q,
        orgs: list
            .iter()
            .map(|o| (row(t, o), s(o, "status").to_owned()))
            .collect(),
    };
    render(&v, &c, StatusCode::OK, page)
}

/// `/staff/...?q=` to come back to after an action on a search's result.
fn back_to(page: &str, q: &str) -> String {
    let q: String = url::form_urlencoded::byte_serialize(q.as_bytes()).collect();
    format!("{page}?q={q}")
}

#[derive(Deserialize)]
pub struct Act {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    q: String,
    #[serde(default)]
    reason: String,
}

/// One staff action on a thing found by a search: POST `path` (with the
/// reason when it takes one), then back to the search.
async fn act(v: Visit, c: &Console, f: &Act, id: &str, path: String, page: &str) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, c);
    }
    if !v.csrf_ok(&f.csrf) || !id_shaped(id) {
        return form_expired(&v, c);
    }
    let body = (!f.reason.trim().is_empty()).then(|| json!({ "reason": f.reason.trim() }));
    let got = call(c, &v, Method::POST, &path, body.as_ref()).await;
    match &got {
        Ok(a) if a.ok() => v.redirect(c, &back_to(page, &f.q)),
        _ => trouble(v, c, got.as_ref()),
    }
}

/// POST /staff/orgs/{id}/suspend (with a reason).
pub async fn suspend(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: web::Form<Act>,
) -> HttpResponse {
    let path = format!("/v1/admin/organizations/{id}/suspend");
    act(v, &c, &f, &id, path, "/staff/orgs").await
}

/// POST /staff/orgs/{id}/reactivate.
pub async fn reactivate(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: web::Form<Act>,
) -> HttpResponse {
    let path = format!("/v1/admin/organizations/{id}/reactivate");
    act(v, &c, &f, &id, path, "/staff/orgs").await
}

/// POST /staff/users/{id}/disable (with a reason): every session and API key
/// of theirs ends.
pub async fn disable_user(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: web::Form<Act>,
) -> HttpResponse {
    let path = format!("/v1/admin/users/{id}/disable");
    act(v, &c, &f, &id, path, "/staff/users").await
}

/// POST /staff/users/{id}/enable.
pub async fn enable_user(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: web::Form<Act>,
) -> HttpResponse {
    let path = format!("/v1/admin/users/{id}/enable");
    act(v, &c, &f, &id, path, "/staff/users").await
}

/// POST /staff/users/{id}/sessions: end every live session of theirs.
pub async fn end_sessions(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: web::Form<Act>,
) -> HttpResponse {
    let path = format!("/v1/admin/users/{id}/sessions/revoke");
    act(v, &c, &f, &id, path, "/staff/users").await
}

pub struct UserRow {
    pub id: String,
    pub email: String,
    pub name: String,
    pub disabled: bool,
    pub mfa: bool,
    pub last: String,
}

#[derive(Template)]
#[template(path = "staff_users.html")]
struct Users {
    c: Chrome,
    title: &'static str,
    tab: &'static str,
    error: Option<String>,
    notice: Option<&'static str>,
    q: String,
    users: Vec<UserRow>,
}

/// GET /staff/users?q=: find a person (id, or the start of an email or name).
pub async fn users(v: Visit, c: web::Data<Console>, q: web::Query<Search>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    let q: String =
        q.q.as_deref()
            .unwrap_or("")
            .trim()
            .chars()
            .take(254)
            .collect();
    let mut path = String::from("/v1/admin/users?limit=50");
    if !q.is_empty() {
        path.push_str("&q=");
        path.push_str(&url::form_urlencoded::byte_serialize(q.as_bytes()).collect::<String>());
    }
    let got = call(&c, &v, Method::GET, &path, None).await;
    let list = match &got {
        Ok(a) if a.ok() => a.body.as_array().cloned().unwrap_or_default(),
        Ok(a) if a.status == 400 => Vec::new(),
        _ => return trouble(v, &c, got.as_ref()),
    };
    let tz = v.tz().to_owned();
    let page = Users {
        c: chrome(&v),
        title: v.lang.texts().staff_users,
        tab: "users",
        error: None,
        notice: None,
        q,
        users: list
            .iter()
            .map(|u| UserRow {
                id: s(u, "id").to_owned(),
                email: s(u, "email").to_owned(),
                name: s(u, "name").to_owned(),
                disabled: s(u, "status") == "disabled",
                mfa: u.get("mfa_enabled").and_then(Value::as_bool) == Some(true),
                last: u
                    .get("last_sign_in_at")
                    .and_then(Value::as_str)
                    .map(|at| format::datetime(at, &tz, v.lang))
                    .unwrap_or_default(),
            })
            .collect(),
    };
    render(&v, &c, StatusCode::OK, page)
}

pub struct ClientRow {
    pub id: String,
    pub name: String,
    pub kind: String,
    pub first_party: bool,
    pub scopes: String,
    pub retired: bool,
}

#[derive(Template)]
#[template(path = "staff_clients.html")]
struct Clients {
    c: Chrome,
    title: &'static str,
    tab: &'static str,
    error: Option<String>,
    /// A client just registered: (its id, its secret if confidential).
    created: Option<(String, Option<String>)>,
    clients: Vec<ClientRow>,
}

async fn clients_page(
    v: Visit,
    c: &Console,
    status: StatusCode,
    error: Option<String>,
    created: Option<(String, Option<String>)>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, c);
    }
    let got = call(c, &v, Method::GET, "/v1/admin/oauth-clients", None).await;
    let list = match &got {
        Ok(a) if a.ok() => a.body.as_array().cloned().unwrap_or_default(),
        // A secret just made is shown whatever else fails.
        _ if created.is_some() => Vec::new(),
        _ => return trouble(v, c, got.as_ref()),
    };
    let page = Clients {
        c: chrome(&v),
        title: v.lang.texts().staff_clients,
        tab: "clients",
        error,
        created,
        clients: list
            .iter()
            .map(|k| ClientRow {
                id: s(k, "id").to_owned(),
                name: s(k, "name").to_owned(),
                kind: s(k, "kind").to_owned(),
                first_party: k.get("first_party").and_then(Value::as_bool) == Some(true),
                scopes: k
                    .get("scopes")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_default(),
                retired: k.get("retired_at").is_some_and(|r| !r.is_null()),
            })
            .collect(),
    };
    render(&v, c, status, page)
}

/// GET /staff/clients: the OpenID Provider's clients.
pub async fn clients(v: Visit, c: web::Data<Console>) -> HttpResponse {
    clients_page(v, &c, StatusCode::OK, None, None).await
}

/// Lines of a textarea, trimmed, the empty ones left out.
pub(super) fn lines(text: Option<&str>) -> Vec<String> {
    text.unwrap_or("")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// POST /staff/clients: register one; a confidential client's secret is
/// shown on this answer only.
pub async fn register_client(
    v: Visit,
    c: web::Data<Console>,
    f: web::Form<Vec<(String, String)>>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    let one = |k: &str| f.iter().find(|(n, _)| n == k).map(|(_, val)| val.as_str());
    if !v.csrf_ok(one("csrf").unwrap_or("")) {
        return form_expired(&v, &c);
    }
    let scopes: Vec<&str> = f
        .iter()
        .filter(|(n, _)| n == "scope")
        .map(|(_, val)| val.as_str())
        .collect();
    let body = json!({
        "name": one("name").unwrap_or("").trim(),
        "kind": one("kind").unwrap_or("confidential"),
        "first_party": one("first_party") == Some("true"),
        "redirect_uris": lines(one("redirect_uris")),
        "post_logout_redirect_uris": lines(one("post_logout_redirect_uris")),
        "scopes": scopes,
        "allowed_org_ids": lines(one("allowed_org_ids")),
    });
    let got = call(&c, &v, Method::POST, "/v1/admin/oauth-clients", Some(&body)).await;
    match &got {
        Ok(a) if a.ok() => {
            let secret = Some(a.text("client_secret").to_owned()).filter(|s| !s.is_empty());
            let made = Some((a.text("id").to_owned(), secret));
            clients_page(v, &c, StatusCode::CREATED, None, made).await
        }
        Ok(a) if matches!(a.status, 400 | 409 | 422) => {
            let e = a.error().to_owned();
            clients_page(v, &c, StatusCode::UNPROCESSABLE_ENTITY, Some(e), None).await
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

/// POST /staff/clients/{id}/retire: its grants end; it signs no one in again.
pub async fn retire_client(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: web::Form<Act>,
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
        &format!("/v1/admin/oauth-clients/{id}"),
        None,
    )
    .await;
    match &got {
        Ok(a) if a.ok() => v.redirect(&c, "/staff/clients"),
        _ => trouble(v, &c, got.as_ref()),
    }
}
