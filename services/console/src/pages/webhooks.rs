//! An organization's webhook endpoints, on the product host: adding one (its
//! signing secret shown once), removing one, its delivery log and a retry.

use super::{chrome, form_expired, id_shaped, render, sign_in_first, trouble, Chrome, CsrfForm};
use crate::{
    api::{Answer, Down, Host},
    format,
    pages::orgs::s,
    session::Visit,
    Console,
};
use actix_web::{http::StatusCode, web, HttpResponse};
use askama::Template;
use reqwest::Method;
use serde::Deserialize;
use serde_json::{json, Value};

/// A call to the product host with the visitor's session.
pub async fn product(
    c: &Console,
    v: &Visit,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Result<Answer, Down> {
    c.api
        .call(
            Host::Product,
            method,
            path,
            v.state.token.as_deref(),
            body,
            &v.forwarded_for,
        )
        .await
}

#[derive(Template)]
#[template(path = "webhooks.html")]
struct Webhooks {
    c: Chrome,
    title: String,
    org_id: String,
    org_name: String,
    tab: &'static str,
    error: Option<String>,
    /// (id, url, created)
    endpoints: Vec<(String, String, String)>,
    new_secret: Option<String>,
    typed_url: String,
}

async fn page(
    v: Visit,
    c: &Console,
    id: &str,
    status: StatusCode,
    error: Option<String>,
    new_secret: Option<String>,
    typed_url: String,
) -> HttpResponse {
    let (v, org) = match super::org_of(v, c, id).await {
        Ok(x) => x,
        Err(page) => return page,
    };
    let name = s(&org, "name").to_owned();
    let got = product(
        c,
        &v,
        Method::GET,
        &format!("/v1/webhooks?org_id={id}"),
        None,
    )
    .await;
    let list = match &got {
        Ok(a) if a.ok() => a.body.as_array().cloned().unwrap_or_default(),
        // A secret just made is shown whatever else fails.
        _ if new_secret.is_some() => Vec::new(),
        _ => return trouble(v, c, got.as_ref()),
    };
    let tz = v.tz().to_owned();
    let page = Webhooks {
        c: chrome(&v),
        title: format!("{name} · {}", v.lang.texts().section_webhooks),
        org_id: id.to_owned(),
        org_name: name,
        tab: "webhooks",
        error,
        endpoints: list
            .iter()
            .map(|w| {
                (
                    s(w, "id").to_owned(),
                    s(w, "url").to_owned(),
                    format::datetime(s(w, "created_at"), &tz, v.lang),
                )
            })
            .collect(),
        new_secret,
        typed_url,
    };
    render(&v, c, status, page)
}

/// GET /orgs/{id}/webhooks.
pub async fn list(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    page(v, &c, &id, StatusCode::OK, None, None, String::new()).await
}

#[derive(Deserialize)]
pub struct AddForm {
    #[serde(default)]
    csrf: String,
    url: String,
}

/// POST /orgs/{id}/webhooks: the endpoint and, on this answer only, its secret.
pub async fn add(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: web::Form<AddForm>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) || !id_shaped(&id) {
        return form_expired(&v, &c);
    }
    let body = json!({ "org_id": id.as_str(), "url": f.url.trim() });
    let got = product(&c, &v, Method::POST, "/v1/webhooks", Some(&body)).await;
    match &got {
        Ok(a) if a.ok() => {
            let secret = a.text("secret").to_owned();
            page(
                v,
                &c,
                &id,
                StatusCode::CREATED,
                None,
                Some(secret),
                String::new(),
            )
            .await
        }
        Ok(a) if matches!(a.status, 400 | 409 | 422) => {
            let e = a.error().to_owned();
            let typed = f.url.clone();
            page(
                v,
                &c,
                &id,
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

/// POST /orgs/{id}/webhooks/{endpoint}/remove.
pub async fn remove(
    v: Visit,
    c: web::Data<Console>,
    path: web::Path<(String, String)>,
    f: web::Form<CsrfForm>,
) -> HttpResponse {
    let (id, endpoint) = path.into_inner();
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) || !id_shaped(&id) || !id_shaped(&endpoint) {
        return form_expired(&v, &c);
    }
    let got = product(
        &c,
        &v,
        Method::DELETE,
        &format!("/v1/webhooks/{endpoint}"),
        None,
    )
    .await;
    match &got {
        Ok(a) if a.ok() => v.redirect(&c, &format!("/orgs/{id}/webhooks")),
        _ => trouble(v, &c, got.as_ref()),
    }
}

#[derive(Template)]
#[template(path = "deliveries.html")]
struct Deliveries {
    c: Chrome,
    title: String,
    org_id: String,
    org_name: String,
    tab: &'static str,
    error: Option<String>,
    endpoint: String,
    url: String,
    /// (id, when, event, status, attempts)
    rows: Vec<(String, String, String, String, i64)>,
}

/// GET /orgs/{id}/webhooks/{endpoint}: the delivery log.
pub async fn deliveries(
    v: Visit,
    c: web::Data<Console>,
    path: web::Path<(String, String)>,
) -> HttpResponse {
    let (id, endpoint) = path.into_inner();
    let (v, org) = match super::org_of(v, &c, &id).await {
        Ok(x) => x,
        Err(page) => return page,
    };
    let name = s(&org, "name").to_owned();
    if !id_shaped(&endpoint) {
        return super::not_found_page(&v, &c);
    }
    let eps = product(
        &c,
        &v,
        Method::GET,
        &format!("/v1/webhooks?org_id={id}"),
        None,
    )
    .await;
    let url = match &eps {
        Ok(a) if a.ok() => a
            .body
            .as_array()
            .and_then(|l| l.iter().find(|w| s(w, "id") == endpoint))
            .map(|w| s(w, "url").to_owned()),
        _ => return trouble(v, &c, eps.as_ref()),
    };
    // An endpoint of another organization is not this page's.
    let Some(url) = url else {
        return super::not_found_page(&v, &c);
    };
    let got = product(
        &c,
        &v,
        Method::GET,
        &format!("/v1/webhooks/{endpoint}/deliveries"),
        None,
    )
    .await;
    let list = match &got {
        Ok(a) if a.ok() => a.body.as_array().cloned().unwrap_or_default(),
        _ => return trouble(v, &c, got.as_ref()),
    };
    let tz = v.tz().to_owned();
    let page = Deliveries {
        c: chrome(&v),
        title: format!("{name} · {}", v.lang.texts().deliveries),
        org_id: id.clone(),
        org_name: name,
        tab: "webhooks",
        error: None,
        endpoint,
        url,
        rows: list
            .iter()
            .map(|d| {
                (
                    s(d, "id").to_owned(),
                    format::datetime(s(d, "created_at"), &tz, v.lang),
                    s(d, "event").to_owned(),
                    s(d, "status").to_owned(),
                    d.get("attempts").and_then(Value::as_i64).unwrap_or(0),
                )
            })
            .collect(),
    };
    render(&v, &c, StatusCode::OK, page)
}

/// POST /orgs/{id}/webhooks/{endpoint}/deliveries/{delivery}/retry.
pub async fn retry(
    v: Visit,
    c: web::Data<Console>,
    path: web::Path<(String, String, String)>,
    f: web::Form<CsrfForm>,
) -> HttpResponse {
    let (id, endpoint, delivery) = path.into_inner();
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) || ![&id, &endpoint, &delivery].iter().all(|x| id_shaped(x)) {
        return form_expired(&v, &c);
    }
    let got = product(
        &c,
        &v,
        Method::POST,
        &format!("/v1/webhooks/{endpoint}/deliveries/{delivery}/retry"),
        None,
    )
    .await;
    match &got {
        Ok(a) if a.ok() => v.redirect(&c, &format!("/orgs/{id}/webhooks/{endpoint}")),
        _ => trouble(v, &c, got.as_ref()),
    }
}
