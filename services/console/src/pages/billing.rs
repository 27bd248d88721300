//! An organization's billing: its invoices and proformas (each with the
//! print-friendly preview the API renders) and its payments (the owner and
//! finance roles: the API says who).

use super::{call, chrome, id_shaped, render, sign_in_first, trouble, Chrome};
use crate::{format, i18n::Texts, pages::orgs::s, session::Visit, Console};
use actix_web::{http::StatusCode, web, HttpResponse};
use askama::Template;
use reqwest::Method;
use serde_json::Value;

/// The preview's own policy: the API's document with its inline styles, no
/// script, no form, no framing, sandboxed (an origin of its own).
pub const PREVIEW_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; sandbox";

/// A preview larger than this is not one.
const PREVIEW_MAX: usize = 2 * 1024 * 1024;

pub struct InvoiceRow {
    pub id: String,
    pub number: String,
    pub kind: &'static str,
    pub status: &'static str,
    pub total: String,
    pub paid: String,
    pub issued: String,
    pub due: String,
}

pub fn invoice_status(t: &'static Texts, code: &str) -> &'static str {
    match code {
        "partially_paid" => t.inv_partially_paid,
        "paid" => t.inv_paid,
        "void" => t.inv_void,
        _ => t.inv_issued,
    }
}

#[derive(Template)]
#[template(path = "billing.html")]
struct Billing {
    c: Chrome,
    title: String,
    org_id: String,
    org_name: String,
    tab: &'static str,
    error: Option<String>,
    invoices: Vec<InvoiceRow>,
    /// (received, amount, method, reference, invoice number)
    payments: Vec<(String, String, String, String, String)>,
}

fn money_of(v: &Value, key: &str, lang: crate::i18n::Lang) -> String {
    format::money(
        v.get(key).and_then(Value::as_i64).unwrap_or(0),
        s(v, "currency"),
        lang,
    )
}

/// GET /orgs/{id}/billing.
pub async fn billing(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    let (v, org) = match super::org_of(v, &c, &id).await {
        Ok(x) => x,
        Err(page) => return page,
    };
    let inv = call(
        &c,
        &v,
        Method::GET,
        &format!("/v1/organizations/{id}/invoices?limit=100"),
        None,
    )
    .await;
    let invoices = match &inv {
        Ok(a) if a.ok() => a.body.as_array().cloned().unwrap_or_default(),
        _ => return trouble(v, &c, inv.as_ref()),
    };
    let pay = call(
        &c,
        &v,
        Method::GET,
        &format!("/v1/organizations/{id}/payments?limit=100"),
        None,
    )
    .await;
    let payments = match &pay {
        Ok(a) if a.ok() => a.body.as_array().cloned().unwrap_or_default(),
        _ => return trouble(v, &c, pay.as_ref()),
    };
    let t = v.lang.texts();
    let tz = v.tz().to_owned();
    let when = |x: &Value, k: &str| {
        x.get(k)
            .and_then(Value::as_str)
            .map(|at| format::datetime(at, &tz, v.lang))
            .unwrap_or_default()
    };
    let page = Billing {
        c: chrome(&v),
        title: format!("{} · {}", s(&org, "name"), t.section_billing),
        org_id: id.to_string(),
        org_name: s(&org, "name").to_owned(),
        tab: "billing",
        error: None,
        invoices: invoices
            .iter()
            .map(|i| InvoiceRow {
                id: s(i, "id").to_owned(),
                number: s(i, "number").to_owned(),
                kind: if s(i, "kind") == "proforma" {
                    t.inv_proforma
                } else {
                    t.inv_invoice
                },
                status: invoice_status(t, s(i, "status")),
                total: money_of(i, "total_minor", v.lang),
                paid: money_of(i, "paid_minor", v.lang),
                issued: when(i, "issued_at"),
                due: when(i, "due_at"),
            })
            .collect(),
        payments: payments
            .iter()
            .map(|p| {
                (
                    s(p, "received_at").to_owned(),
                    money_of(p, "amount_minor", v.lang),
                    s(p, "method").to_owned(),
                    s(p, "reference").to_owned(),
                    s(p, "invoice_number").to_owned(),
                )
            })
            .collect(),
    };
    render(&v, &c, StatusCode::OK, page)
}

/// GET /orgs/{id}/invoices/{invoice}/preview: the API's print-friendly
/// document, served under its own sandboxed policy.
pub async fn preview(
    v: Visit,
    c: web::Data<Console>,
    path: web::Path<(String, String)>,
) -> HttpResponse {
    let (id, invoice) = path.into_inner();
    let Some(token) = v.state.token.clone() else {
        return sign_in_first(v, &c);
    };
    if !id_shaped(&id) || !id_shaped(&invoice) {
        return super::not_found_page(&v, &c);
    }
    let got = c
        .api
        .fetch_raw(
            &format!("/v1/organizations/{id}/invoices/{invoice}/html"),
            &token,
            &v.forwarded_for,
            PREVIEW_MAX,
        )
        .await;
    match got {
        Ok((200, kind, body)) if kind.starts_with("text/html") => HttpResponse::Ok()
            .insert_header(("content-type", "text/html; charset=utf-8"))
            .insert_header(("content-security-policy", PREVIEW_CSP))
            .insert_header(("cache-control", "no-store"))
            .body(body),
        Ok((403 | 404, _, _)) => super::not_found_page(&v, &c),
        Ok((401, _, _)) => {
            let a = crate::api::Answer {
                status: 401,
                body: Value::Null,
                next: None,
            };
            trouble(v, &c, Ok(&a))
        }
        _ => trouble(v, &c, Err(&crate::api::Down)),
    }
}
