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
    q: String,
    orgs: Vec<OrgRow>,
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
        q,
        orgs: list.iter().map(|o| row(t, o)).collect(),
    };
    render(&v, &c, StatusCode::OK, page)
}
