//! The rest of the control tower, as sheets: the payment claims queue; an
//! organization's page for staff (its charges, proformas, invoices and
//! payments, with what staff do to them); billing runs; the catalog (SKUs)
//! and maintenance windows; the knowledge base and proposals; the
//! assistant's model; a person's page; editing an OpenID client. The API
//! decides who is staff: anyone else gets its 403, as a page.

use super::{
    call,
    sheet::{
        currencies, fetch, fetch_list, fetch_page, finish, list, money, n, options, or_page,
        posted, s, when, yes_no, Field, Form, Kind, Nav, Posted, Row, Section, Sheet, Table,
    },
    sign_in_first, trouble,
    webhooks::product,
};
use crate::{format, i18n::Texts, pages::orgs::role, session::Visit, Console};
use actix_web::{web, HttpResponse};
use reqwest::Method;
use serde_json::{json, Value};

type Fields = web::Form<Vec<(String, String)>>;

/// A control tower sheet.
fn staff_sheet(v: &Visit, title: &str, tab: &'static str, error: Option<String>) -> Sheet {
    let mut sheet = Sheet::new(v, title, Nav::Staff, tab);
    sheet.error = error;
    sheet
}

/// Only staff go on (a page whose own calls a customer could also make:
/// the API's staff-only search says who is staff); else its 403 as a page.
async fn staff_only(v: Visit, c: &Console) -> Result<Visit, HttpResponse> {
    if !v.signed_in() {
        return Err(sign_in_first(v, c));
    }
    fetch(v, c, "/v1/admin/organizations?limit=1")
        .await
        .map(|(v, _)| v)
}

/// A `datetime-local` field in the visitor's zone as RFC 3339, or None.
fn instant(v: &Visit, typed: &str) -> Option<String> {
    format::local_to_rfc3339(typed, v.tz())
}

// ---- the payment claims queue ----

async fn claims_page(v: Visit, c: &Console, error: Option<String>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, c);
    }
    let t = v.lang.texts();
    let (v, claims) = or_page!(fetch_list(v, c, "/v1/admin/payment-claims?limit=200").await);
    let mut sheet = staff_sheet(&v, t.staff_claims, "claims", error);
    let mut table = Table::new(
        vec![
            t.org,
            t.created_at,
            t.amount,
            t.reference,
            t.note,
            t.duplicate_of,
        ],
        t.queue_empty,
    );
    for k in &claims {
        let id = s(k, "id");
        let who = format!("{} {}", s(k, "org_name"), s(k, "reference"));
        table.rows.push(
            Row::default()
                .link(format!("/staff/orgs/{}", s(k, "org_id")), s(k, "org_name"))
                .text(when(&v, k, "created_at"))
                .num(money(k, "amount_minor", v.lang))
                .text(s(k, "reference"))
                .text(s(k, "note"))
                .code(s(k, "duplicate_of"))
                .action(
                    Form::row(format!("/staff/claims/{id}/approve"), t.approve, &who)
                        .field(Field::new("received_at", t.received_at, Kind::Date))
                        .field(Field::text("review_notes", t.review_notes).max(1000))
                        .field(Field::new(
                            "confirm_duplicate",
                            t.confirm_duplicate,
                            Kind::Check,
                        ))
                        .field(Field::new(
                            "credit_remainder",
                            t.credit_remainder,
                            Kind::Check,
                        )),
                )
                .action(
                    Form::row(format!("/staff/claims/{id}/reject"), t.reject, &who).field(
                        Field::text("review_notes", t.review_notes)
                            .max(1000)
                            .required(),
                    ),
                ),
        );
    }
    sheet.section(
        Section::new(t.staff_claims)
            .note(t.claims_queue_note)
            .table(table),
    );
    sheet.answer(&v, c)
}

/// GET /staff/claims: pending payment claims, oldest first.
pub async fn claims(v: Visit, c: web::Data<Console>) -> HttpResponse {
    claims_page(v, &c, None).await
}

/// POST /staff/claims/{id}/{approve|reject}.
pub async fn decide_claim(
    v: Visit,
    c: web::Data<Console>,
    ids: web::Path<(String, String)>,
    f: Fields,
) -> HttpResponse {
    let (id, what) = ids.into_inner();
    posted!(v, c, f, &id);
    let body = match what.as_str() {
        "approve" => json!({
            "received_at": f.opt("received_at"),
            "review_notes": f.one("review_notes"),
            "confirm_duplicate": f.checked("confirm_duplicate"),
            "credit_remainder": f.checked("credit_remainder"),
        }),
        "reject" => json!({ "review_notes": f.one("review_notes") }),
        _ => return super::not_found_page(&v, &c),
    };
    let path = format!("/v1/admin/payment-claims/{id}/{what}");
    let got = call(&c, &v, Method::POST, &path, Some(&body)).await;
    finish(v, &c, got, "/staff/claims", |v, e| claims_page(v, &c, e)).await
}

// ---- an organization, for staff ----

fn charge_status(t: &'static Texts, code: &str) -> &'static str {
    match code {
        "quoted" => t.charge_quoted,
        "invoiced" => t.charge_invoiced,
        "waived" => t.charge_waived,
        _ => t.charge_pending,
    }
}

async fn org_page(v: Visit, c: &Console, id: &str, error: Option<String>) -> HttpResponse {
    let t = v.lang.texts();
    let v = or_page!(staff_only(v, c).await);
    let (v, o) = or_page!(super::org_of(v, c, id).await);
    let (v, charges) =
        or_page!(fetch_list(v, c, &format!("/v1/organizations/{id}/charges?limit=200")).await);
    let (v, invoices) =
        or_page!(fetch_list(v, c, &format!("/v1/organizations/{id}/invoices?limit=100")).await);
    let (v, payments) =
        or_page!(fetch_list(v, c, &format!("/v1/organizations/{id}/payments?limit=100")).await);
    let name = s(&o, "name");
    let mut sheet = staff_sheet(&v, name, "orgs", error);
    let (kyc, _) = super::orgs::kyc(t, s(&o, "kyc_status"));
    sheet.fact(t.country_short, s(&o, "country"));
    sheet.fact(t.kyc_status, kyc);
    sheet.fact(
        t.status,
        if s(&o, "status") == "suspended" {
            t.status_suspended
        } else {
            t.status_active
        },
    );
    sheet.fact(t.entity, s(&o, "distributor_entity"));
    if let (Some(minor), Some(cur)) = (
        o.get("wallet_balance_minor").and_then(Value::as_i64),
        o.get("wallet_currency").and_then(Value::as_str),
    ) {
        sheet.fact(t.section_wallet, format::money(minor, cur, v.lang));
    }
    sheet.fact(t.tokens, n(&o, "tokens").to_string());

    let mut table = Table::new(
        vec![t.created_at, t.description, t.brand, t.amount, t.status],
        t.no_charges,
    );
    for x in &charges {
        let mut row = Row::default()
            .text(when(&v, x, "created_at"))
            .text(s(x, "description"))
            .text(s(x, "brand"))
            .num(money(x, "amount_minor", v.lang))
            .text(charge_status(t, s(x, "status")));
        if s(x, "status") == "pending" {
            row = row.action(Form::row(
                format!("/staff/orgs/{id}/charges/{}/waive", s(x, "id")),
                t.waive,
                s(x, "description"),
            ));
        }
        table.rows.push(row);
    }
    sheet.section(
        Section::new(t.charges)
            .table(table)
            .form(
                Form::post(format!("/staff/orgs/{id}/charges"), t.add)
                    .legend(t.charge_add)
                    .field(
                        Field::text("description", t.description)
                            .required()
                            .max(500),
                    )
                    .field(Field::text("brand", t.brand).required().max(100))
                    .field(
                        Field::new("amount", t.amount, Kind::Amount)
                            .required()
                            .max(20),
                    ),
            )
            .form(Form::post(
                format!("/staff/orgs/{id}/issue/proforma"),
                t.issue_proforma,
            ))
            .form(Form::post(
                format!("/staff/orgs/{id}/issue/invoice"),
                t.issue_invoice,
            )),
    );

    let mut table = Table::new(
        vec![t.number, t.kind, t.status, t.total, t.paid, t.issued_at],
        t.no_invoices,
    );
    for i in &invoices {
        let iid = s(i, "id");
        let number = s(i, "number");
        let status = s(i, "status");
        let proforma = s(i, "kind") == "proforma";
        let mut row = Row::default()
            .link(format!("/orgs/{id}/invoices/{iid}/preview"), number)
            .text(if proforma {
                t.inv_proforma
            } else {
                t.inv_invoice
            })
            .text(super::billing::invoice_status(t, status))
            .num(money(i, "total_minor", v.lang))
            .num(money(i, "paid_minor", v.lang))
            .text(when(&v, i, "issued_at"));
        let base = format!("/staff/orgs/{id}/invoices/{iid}");
        if proforma && status != "void" {
            row = row.action(Form::row(format!("{base}/convert"), t.convert, number));
        }
        if matches!(status, "issued" | "partially_paid") {
            row = row.action(
                Form::row(format!("{base}/pay-from-wallet"), t.pay_from_wallet, number).field(
                    Field::new("amount", t.amount, Kind::Amount)
                        .required()
                        .max(20),
                ),
            );
        }
        if status != "void" && n(i, "paid_minor") == 0 {
            row = row.action(Form::row(format!("{base}/void"), t.void, number));
        }
        if !proforma && status != "void" {
            row = row.action(
                Form::row(format!("{base}/legal"), t.save, number).field(
                    Field::new("legal_document_url", t.legal_document_url, Kind::Url)
                        .value(s(i, "legal_document_url"))
                        .max(2000),
                ),
            );
        }
        table.rows.push(row);
    }
    sheet.section(Section::new(t.invoices).table(table));

    let mut table = Table::new(
        vec![t.received_at, t.amount, t.method, t.reference, t.number],
        t.no_payments,
    );
    for p in &payments {
        table.rows.push(
            Row::default()
                .text(when(&v, p, "received_at"))
                .num(money(p, "amount_minor", v.lang))
                .text(s(p, "method"))
                .text(s(p, "reference"))
                .text(s(p, "invoice_number")),
        );
    }
    let mut open = vec![(String::new(), t.none_option.to_owned())];
    open.extend(
        invoices
            .iter()
            .filter(|i| matches!(s(i, "status"), "issued" | "partially_paid"))
            .map(|i| (s(i, "id").to_owned(), s(i, "number").to_owned())),
    );
    sheet.section(
        Section::new(t.payments).table(table).form(
            Form::post(format!("/staff/orgs/{id}/payments"), t.record)
                .legend(t.payment_add)
                .field(
                    Field::new("amount", t.amount, Kind::Amount)
                        .required()
                        .max(20),
                )
                .field(Field::select("currency", t.currency, currencies()))
                .field(Field::select(
                    "method",
                    t.method,
                    options(&[
                        ("bank_transfer", t.method_bank_transfer),
                        ("manual", t.method_manual),
                        ("other", t.method_other),
                    ]),
                ))
                .field(Field::text("reference", t.reference))
                .field(Field::new("received_at", t.received_at, Kind::Date).required())
                .field(Field::select("invoice_id", t.invoice, open))
                .field(Field::new("note", t.note, Kind::Textarea))
                .field(Field::new(
                    "confirm_duplicate",
                    t.confirm_duplicate,
                    Kind::Check,
                ))
                .field(Field::new(
                    "credit_remainder",
                    t.credit_remainder,
                    Kind::Check,
                )),
        ),
    );
    sheet.answer(&v, c)
}

/// GET /staff/orgs/{id}: any organization, with its billing.
pub async fn org(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    org_page(v, &c, &id, None).await
}

/// POST /staff/orgs/{id}/...: what staff do to an organization's billing.
pub async fn org_act(
    v: Visit,
    c: web::Data<Console>,
    path: web::Path<(String, String)>,
    f: Fields,
) -> HttpResponse {
    let (id, what) = path.into_inner();
    posted!(v, c, f, &id);
    let t = v.lang.texts();
    let amount = f.minor("amount");
    let (api, body) = match what.as_str() {
        "charges" => {
            let Some(a) = amount else {
                return org_page(v, &c, &id, Some(t.amount_typed.into())).await;
            };
            (
                format!("/v1/admin/organizations/{id}/charges"),
                json!({ "description": f.one("description"), "brand": f.one("brand"), "amount_minor": a }),
            )
        }
        "issue/proforma" => (format!("/v1/admin/organizations/{id}/proformas"), json!({})),
        "issue/invoice" => (format!("/v1/admin/organizations/{id}/invoices"), json!({})),
        "payments" => {
            let Some(a) = amount else {
                return org_page(v, &c, &id, Some(t.amount_typed.into())).await;
            };
            let Some(at) = f.opt("received_at") else {
                return org_page(v, &c, &id, Some(t.date_typed.into())).await;
            };
            (
                format!("/v1/admin/organizations/{id}/payments"),
                json!({
                    "amount_minor": a,
                    "currency": f.one("currency"),
                    "method": f.one("method"),
                    "reference": f.one("reference"),
                    "received_at": at,
                    "note": f.one("note"),
                    "invoice_id": f.opt("invoice_id"),
                    "confirm_duplicate": f.checked("confirm_duplicate"),
                    "credit_remainder": f.checked("credit_remainder"),
                }),
            )
        }
        _ => return super::not_found_page(&v, &c),
    };
    let got = call(&c, &v, Method::POST, &api, Some(&body)).await;
    let back = format!("/staff/orgs/{id}");
    finish(v, &c, got, &back, |v, e| org_page(v, &c, &id, e)).await
}

/// POST /staff/orgs/{id}/{charges|invoices}/{thing}/{action}.
pub async fn org_item_act(
    v: Visit,
    c: web::Data<Console>,
    path: web::Path<(String, String, String, String)>,
    f: Fields,
) -> HttpResponse {
    let (id, kind, item, what) = path.into_inner();
    posted!(v, c, f, &id, &item);
    let t = v.lang.texts();
    let (method, api, body) = match (kind.as_str(), what.as_str()) {
        ("charges", "waive") => (
            Method::POST,
            format!("/v1/admin/charges/{item}/waive"),
            None,
        ),
        ("invoices", "convert" | "void") => (
            Method::POST,
            format!("/v1/admin/invoices/{item}/{what}"),
            None,
        ),
        ("invoices", "pay-from-wallet") => {
            let Some(a) = f.minor("amount") else {
                return org_page(v, &c, &id, Some(t.amount_typed.into())).await;
            };
            (
                Method::POST,
                format!("/v1/admin/invoices/{item}/pay-from-wallet"),
                Some(json!({ "amount_minor": a })),
            )
        }
        ("invoices", "legal") => (
            Method::PATCH,
            format!("/v1/admin/invoices/{item}"),
            Some(json!({ "legal_document_url": f.opt("legal_document_url") })),
        ),
        _ => return super::not_found_page(&v, &c),
    };
    // The charge or invoice must be this organization's: the admin routes act
    // by id alone, and the answer returns to this organization's page, so a
    // path naming another organization's item is a 404 and acts on nothing.
    // An invoice is read through the organization (the API's 404 otherwise);
    // a waivable charge is pending, and the page lists the newest 200.
    let v = if kind == "charges" {
        let pending = format!("/v1/organizations/{id}/charges?status=pending&limit=200");
        let (v, pending) = or_page!(fetch_list(v, &c, &pending).await);
        if !pending.iter().any(|x| s(x, "id") == item) {
            return super::not_found_page(&v, &c);
        }
        v
    } else {
        let invoice = format!("/v1/organizations/{id}/invoices/{item}");
        or_page!(fetch(v, &c, &invoice).await).0
    };
    let got = call(&c, &v, method, &api, body.as_ref()).await;
    let back = format!("/staff/orgs/{id}");
    finish(v, &c, got, &back, |v, e| org_page(v, &c, &id, e)).await
}

// ---- billing runs ----

async fn run_page(
    v: Visit,
    c: &Console,
    run: Option<Value>,
    error: Option<String>,
) -> HttpResponse {
    // A run came from the staff-only `/v1/admin/billing-runs`: the caller is
    // staff already, no second call to find out.
    let v = match run {
        Some(_) => v,
        None => or_page!(staff_only(v, c).await),
    };
    let t = v.lang.texts();
    let mut sheet = staff_sheet(&v, t.staff_runs, "runs", error);
    if let Some(r) = &run {
        sheet.fact(t.period, s(r, "period"));
        sheet.fact(
            t.status,
            if s(r, "status") == "done" {
                t.run_done
            } else {
                t.run_running
            },
        );
        sheet.fact(t.run_organizations, n(r, "organizations").to_string());
        sheet.fact(t.invoices, n(r, "invoices").to_string());
        sheet.fact(t.charges, n(r, "charges").to_string());
        if let Some(totals) = r.get("totals").and_then(Value::as_object) {
            for (cur, minor) in totals {
                sheet.fact(
                    t.total,
                    format::money(minor.as_i64().unwrap_or(0), cur, v.lang),
                );
            }
        }
        sheet.fact(t.run_started, when(&v, r, "started_at"));
        sheet.fact(t.run_finished, when(&v, r, "finished_at"));
        let mut failed = Table::new(vec![t.org], t.run_no_failures);
        for x in r
            .get("failed")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let org = x.as_str().map(str::to_owned).unwrap_or_else(|| {
                x.get("org_id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            });
            failed
                .rows
                .push(Row::default().link(format!("/staff/orgs/{org}"), org));
        }
        sheet.section(Section::new(t.run_failed).table(failed).form(Form::get(
            format!("/staff/billing-runs/{}", s(r, "id")),
            t.refresh,
        )));
    }
    let this_month = crate::format::this_month();
    sheet.section(
        Section::new(t.run_start).note(t.run_note).form(
            Form::post("/staff/billing-runs", t.run_start).field(
                Field::new("period", t.period, Kind::Month)
                    .value(this_month)
                    .required(),
            ),
        ),
    );
    sheet.answer(&v, c)
}

/// GET /staff/billing-runs: start (or re-work) a month's run.
pub async fn runs(v: Visit, c: web::Data<Console>) -> HttpResponse {
    run_page(v, &c, None, None).await
}

/// GET /staff/billing-runs/{id}: a run's progress.
pub async fn run(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !super::id_shaped(&id) {
        return super::not_found_page(&v, &c);
    }
    match fetch(v, &c, &format!("/v1/admin/billing-runs/{id}")).await {
        Ok((v, r)) => run_page(v, &c, Some(r), None).await,
        Err(p) => p,
    }
}

/// POST /staff/billing-runs: the run of a month, then its page.
pub async fn start_run(v: Visit, c: web::Data<Console>, f: Fields) -> HttpResponse {
    posted!(v, c, f);
    let body = json!({ "period": f.one("period") });
    let got = call(&c, &v, Method::POST, "/v1/admin/billing-runs", Some(&body)).await;
    let back = match &got {
        Ok(a) if a.ok() => format!("/staff/billing-runs/{}", a.text("id")),
        _ => "/staff/billing-runs".to_owned(),
    };
    finish(v, &c, got, &back, |v, e| run_page(v, &c, None, e)).await
}

// ---- the catalog and maintenance windows (product host) ----

async fn catalog_page(v: Visit, c: &Console, error: Option<String>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, c);
    }
    let t = v.lang.texts();
    let got = product(c, &v, Method::GET, "/v1/admin/skus", None).await;
    let skus = match &got {
        Ok(a) if a.ok() => list(a),
        _ => return trouble(v, c, got.as_ref()),
    };
    let got = product(c, &v, Method::GET, "/v1/service-contract/maintenance", None).await;
    let windows = match &got {
        Ok(a) if a.ok() => list(a),
        _ => return trouble(v, c, got.as_ref()),
    };
    let mut sheet = staff_sheet(&v, t.staff_catalog, "catalog", error);
    let fulfilments = || options(&[("api", t.fulfil_api), ("manual", t.fulfil_manual)]);
    let mut table = Table::new(
        vec![
            "id",
            t.name,
            t.fulfilment,
            t.sla_hours,
            t.price,
            t.position,
            t.listed,
        ],
        t.no_skus,
    );
    for k in &skus {
        let id = s(k, "id");
        let listed = k.get("listed").and_then(Value::as_bool) == Some(true);
        let price = format::plain_minor(n(k, "monthly_price_minor"));
        table.rows.push(
            Row::default()
                .code(id)
                .text(s(k, "name"))
                .text(if s(k, "fulfilment") == "manual" {
                    t.fulfil_manual
                } else {
                    t.fulfil_api
                })
                .num(
                    k.get("sla_hours")
                        .and_then(Value::as_i64)
                        .map(|h| h.to_string())
                        .unwrap_or_default(),
                )
                .num(money(k, "monthly_price_minor", v.lang))
                .num(n(k, "position").to_string())
                .text(yes_no(t, listed))
                .action(
                    Form::row(format!("/staff/catalog/skus/{id}"), t.save, s(k, "name"))
                        .field(
                            Field::new("price", t.price, Kind::Amount)
                                .value(price)
                                .max(20),
                        )
                        .field(
                            Field::new("position", t.position, Kind::Number)
                                .value(n(k, "position").to_string()),
                        )
                        .field(
                            Field::new("listed", t.listed, Kind::Check).value(if listed {
                                "true"
                            } else {
                                "false"
                            }),
                        ),
                ),
        );
    }
    sheet.section(
        Section::new(t.skus).table(table).form(
            Form::post("/staff/catalog/skus", t.add)
                .legend(t.sku_add)
                .field(Field::text("id", "id").required().max(64))
                .field(Field::text("name", t.name).required())
                .field(Field::select("fulfilment", t.fulfilment, fulfilments()))
                .field(Field::new("sla_hours", t.sla_hours, Kind::Number))
                .field(
                    Field::new("price", t.price, Kind::Amount)
                        .required()
                        .max(20),
                )
                .field(Field::select("currency", t.currency, currencies()))
                .field(Field::new("listed", t.listed, Kind::Check).value("true")),
        ),
    );
    let mut table = Table::new(
        vec![t.title_field, t.description, t.starts, t.ends],
        t.no_windows,
    );
    for w in &windows {
        table.rows.push(
            Row::default()
                .text(s(w, "title"))
                .text(s(w, "description"))
                .text(when(&v, w, "starts_at"))
                .text(when(&v, w, "ends_at")),
        );
    }
    sheet.section(
        Section::new(t.maintenance).table(table).form(
            Form::post("/staff/catalog/maintenance", t.add)
                .legend(t.maintenance_add)
                .field(Field::text("title", t.title_field).required().max(255))
                .field(Field::new("description", t.description, Kind::Textarea))
                .field(Field::new("starts_at", t.starts, Kind::DateTime).required())
                .field(Field::new("ends_at", t.ends, Kind::DateTime).required()),
        ),
    );
    sheet.answer(&v, c)
}

/// GET /staff/catalog: SKUs and maintenance windows.
pub async fn catalog(v: Visit, c: web::Data<Console>) -> HttpResponse {
    catalog_page(v, &c, None).await
}

/// POST /staff/catalog/skus, /staff/catalog/skus/{id}, /staff/catalog/maintenance.
pub async fn catalog_act(
    v: Visit,
    c: web::Data<Console>,
    path: web::Path<String>,
    f: Fields,
) -> HttpResponse {
    posted!(v, c, f);
    let t = v.lang.texts();
    let what = path.into_inner();
    let price = f.minor("price");
    let (method, api, body) = match what.split_once('/') {
        None if what == "skus" => {
            let Some(p) = price else {
                return catalog_page(v, &c, Some(t.amount_typed.into())).await;
            };
            let body = json!({
                "id": f.one("id"),
                "name": f.one("name"),
                "fulfilment": f.one("fulfilment"),
                "sla_hours": f.int("sla_hours"),
                "monthly_price_minor": p,
                "currency": f.one("currency"),
                "listed": f.checked("listed"),
            });
            (Method::POST, "/v1/admin/skus".to_owned(), body)
        }
        None if what == "maintenance" => {
            let (Some(from), Some(to)) = (
                instant(&v, f.one("starts_at")),
                instant(&v, f.one("ends_at")),
            ) else {
                return catalog_page(v, &c, Some(t.time_typed.into())).await;
            };
            let body = json!({
                "title": f.one("title"),
                "description": f.one("description"),
                "starts_at": from,
                "ends_at": to,
            });
            (Method::POST, "/v1/admin/maintenance".to_owned(), body)
        }
        Some(("skus", id))
            if !id.is_empty()
                && id.len() <= 64
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')) =>
        {
            let Some(p) = price else {
                return catalog_page(v, &c, Some(t.amount_typed.into())).await;
            };
            let mut body = json!({ "monthly_price_minor": p, "listed": f.checked("listed") });
            if let Some(pos) = f.int("position") {
                body["position"] = json!(pos);
            }
            (Method::PATCH, format!("/v1/admin/skus/{id}"), body)
        }
        _ => return super::not_found_page(&v, &c),
    };
    let got = product(&c, &v, method, &api, Some(&body)).await;
    finish(v, &c, got, "/staff/catalog", |v, e| catalog_page(v, &c, e)).await
}

// ---- the knowledge base and proposals ----

/// The admin article list, 50 a page.
const ARTICLES: &str = "/v1/admin/kb/articles?limit=50";

async fn kb_page(
    v: Visit,
    c: &Console,
    cursor: Option<&str>,
    error: Option<String>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, c);
    }
    let t = v.lang.texts();
    let (v, cats) = or_page!(fetch_list(v, c, "/v1/kb/categories").await);
    let (v, articles, next) = or_page!(fetch_page(v, c, ARTICLES, cursor).await);
    let mut sheet = staff_sheet(&v, t.staff_kb, "kb", error);
    let mut table = Table::new(
        vec![t.title_field, "slug", t.category, t.status, t.updated],
        t.no_articles,
    );
    for a in &articles {
        let id = s(a, "id");
        table.rows.push(
            Row::default()
                .link(format!("/staff/kb/{id}"), s(a, "title"))
                .code(s(a, "slug"))
                .text(s(a, "category"))
                .text(if s(a, "status") == "published" {
                    t.published
                } else {
                    t.draft
                })
                .text(when(&v, a, "updated_at"))
                .action(Form::row(
                    format!("/staff/kb/{id}/delete"),
                    t.delete,
                    s(a, "title"),
                )),
        );
    }
    let table = table.more("/staff/kb", next.as_deref());
    let mut cat_opts = vec![(String::new(), t.none_option.to_owned())];
    cat_opts.extend(
        cats.iter()
            .map(|k| (s(k, "slug").to_owned(), s(k, "title").to_owned())),
    );
    sheet.section(
        Section::new(t.articles).table(table).form(
            article_form(
                "/staff/kb-new/articles".to_owned(),
                t,
                None,
                cat_opts.clone(),
            )
            .legend(t.article_add),
        ),
    );
    let mut table = Table::new(vec![t.title_field, "slug", t.articles], t.no_categories);
    for k in &cats {
        table.rows.push(
            Row::default()
                .text(s(k, "title"))
                .code(s(k, "slug"))
                .num(n(k, "article_count").to_string()),
        );
    }
    sheet.section(
        Section::new(t.categories).table(table).form(
            Form::post("/staff/kb-new/categories", t.add)
                .legend(t.category_add)
                .field(Field::text("slug", "slug").required().max(100))
                .field(Field::text("title", t.title_field).required()),
        ),
    );
    sheet.answer(&v, c)
}

fn article_form(
    action: String,
    t: &'static Texts,
    a: Option<&Value>,
    cats: Vec<(String, String)>,
) -> Form {
    let get = |k: &str| a.map(|a| s(a, k).to_owned()).unwrap_or_default();
    Form::post(action, t.save)
        .field(
            Field::text("title", t.title_field)
                .value(get("title"))
                .required(),
        )
        .field(
            Field::text("slug", "slug")
                .value(get("slug"))
                .required()
                .max(100),
        )
        .field(Field::select("category", t.category, cats).value(get("category")))
        .field(
            Field::select(
                "status",
                t.status,
                options(&[("draft", t.draft), ("published", t.published)]),
            )
            .value(get("status")),
        )
        .field(
            Field::new("body_md", t.body_md, Kind::Textarea)
                .value(get("body_md"))
                .required()
                .max(100_000),
        )
}

#[derive(serde::Deserialize)]
pub struct Cursor {
    cursor: Option<String>,
}

/// GET /staff/kb[?cursor=]: articles (a page of them) and categories.
pub async fn kb(v: Visit, c: web::Data<Console>, q: web::Query<Cursor>) -> HttpResponse {
    kb_page(v, &c, q.cursor.as_deref(), None).await
}

/// How many pages of 50 the article editor looks through for an article.
const ARTICLE_PAGES: usize = 40;

async fn article_page(v: Visit, c: &Console, id: &str, error: Option<String>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, c);
    }
    if !super::id_shaped(id) {
        return super::not_found_page(&v, c);
    }
    let t = v.lang.texts();
    let (v, cats) = or_page!(fetch_list(v, c, "/v1/kb/categories").await);
    // No read of one article by id: its page of the list (at most
    // `ARTICLE_PAGES` of them, 50 each, are looked through).
    let (mut v, mut cursor, mut found) = (v, None::<String>, None);
    for _ in 0..ARTICLE_PAGES {
        let (v2, articles, next) = or_page!(fetch_page(v, c, ARTICLES, cursor.as_deref()).await);
        v = v2;
        found = articles.into_iter().find(|a| s(a, "id") == id);
        if found.is_some() || next.is_none() {
            break;
        }
        cursor = next;
    }
    let Some(a) = found.as_ref() else {
        return super::not_found_page(&v, c);
    };
    let mut sheet = staff_sheet(&v, s(a, "title"), "kb", error);
    let mut cat_opts = vec![(String::new(), t.none_option.to_owned())];
    cat_opts.extend(
        cats.iter()
            .map(|k| (s(k, "slug").to_owned(), s(k, "title").to_owned())),
    );
    sheet.fact(t.updated, when(&v, a, "updated_at"));
    sheet.section(Section::new(t.article_edit).form(article_form(
        format!("/staff/kb/{id}/save"),
        t,
        Some(a),
        cat_opts,
    )));
    sheet.answer(&v, c)
}

/// GET /staff/kb/{id}: edit an article.
pub async fn article(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    article_page(v, &c, &id, None).await
}

fn article_body(f: &Posted) -> Value {
    json!({
        "title": f.one("title"),
        "slug": f.one("slug"),
        "status": f.one("status"),
        "category": f.opt("category"),
        "body_md": f.one("body_md"),
    })
}

/// POST /staff/kb (a new article) and /staff/kb/categories.
pub async fn kb_add(
    v: Visit,
    c: web::Data<Console>,
    path: web::Path<String>,
    f: Fields,
) -> HttpResponse {
    posted!(v, c, f);
    let (api, body) = match path.as_str() {
        "articles" => ("/v1/admin/kb/articles", article_body(&f)),
        "categories" => (
            "/v1/admin/kb/categories",
            json!({ "slug": f.one("slug"), "title": f.one("title") }),
        ),
        _ => return super::not_found_page(&v, &c),
    };
    let got = call(&c, &v, Method::POST, api, Some(&body)).await;
    finish(v, &c, got, "/staff/kb", |v, e| kb_page(v, &c, None, e)).await
}

/// POST /staff/kb/{id} (save) and /staff/kb/{id}/delete.
pub async fn article_act(
    v: Visit,
    c: web::Data<Console>,
    path: web::Path<(String, String)>,
    f: Fields,
) -> HttpResponse {
    let (id, what) = path.into_inner();
    posted!(v, c, f, &id);
    let api = format!("/v1/admin/kb/articles/{id}");
    match what.as_str() {
        "save" => {
            let got = call(&c, &v, Method::PATCH, &api, Some(&article_body(&f))).await;
            let back = format!("/staff/kb/{id}");
            finish(v, &c, got, &back, |v, e| article_page(v, &c, &id, e)).await
        }
        "delete" => {
            let got = call(&c, &v, Method::DELETE, &api, None).await;
            finish(v, &c, got, "/staff/kb", |v, e| kb_page(v, &c, None, e)).await
        }
        _ => super::not_found_page(&v, &c),
    }
}

fn proposal_status(t: &'static Texts, code: &str) -> &'static str {
    match code {
        "accepted" => t.prop_accepted,
        "rejected" => t.prop_rejected,
        "done" => t.prop_done,
        _ => t.draft,
    }
}

async fn proposals_page(v: Visit, c: &Console, error: Option<String>) -> HttpResponse {
    // A customer's GET /v1/proposals is their own: the gate first.
    let v = or_page!(staff_only(v, c).await);
    let t = v.lang.texts();
    let (v, props) = or_page!(fetch_list(v, c, "/v1/proposals?limit=100").await);
    let mut sheet = staff_sheet(&v, t.staff_proposals, "proposals", error);
    let statuses = options(&[
        ("draft", t.draft),
        ("accepted", t.prop_accepted),
        ("rejected", t.prop_rejected),
        ("done", t.prop_done),
    ]);
    let mut table = Table::new(
        vec![
            t.title_field,
            t.prop_problem,
            t.prop_proposal,
            t.status,
            t.created_at,
        ],
        t.no_proposals,
    );
    for p in &props {
        table.rows.push(
            Row::default()
                .text(s(p, "title"))
                .text(s(p, "problem"))
                .text(s(p, "proposal"))
                .text(proposal_status(t, s(p, "status")))
                .text(when(&v, p, "created_at"))
                .action(
                    Form::row(
                        format!("/staff/proposals/{}", s(p, "id")),
                        t.save,
                        s(p, "title"),
                    )
                    .field(
                        Field::select("status", t.status, statuses.clone()).value(s(p, "status")),
                    ),
                ),
        );
    }
    sheet.section(Section::new(t.staff_proposals).table(table));
    sheet.answer(&v, c)
}

/// GET /staff/proposals: what the assistant and people proposed.
pub async fn proposals(v: Visit, c: web::Data<Console>) -> HttpResponse {
    proposals_page(v, &c, None).await
}

/// POST /staff/proposals/{id}: its status.
pub async fn proposal_set(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: Fields,
) -> HttpResponse {
    posted!(v, c, f, &id);
    let body = json!({ "status": f.one("status") });
    let got = call(
        &c,
        &v,
        Method::PATCH,
        &format!("/v1/admin/proposals/{id}"),
        Some(&body),
    )
    .await;
    finish(v, &c, got, "/staff/proposals", |v, e| {
        proposals_page(v, &c, e)
    })
    .await
}

// ---- the assistant's model ----

async fn model_page(v: Visit, c: &Console, error: Option<String>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, c);
    }
    let t = v.lang.texts();
    let (v, m) = or_page!(fetch(v, c, "/v1/agent/model").await);
    let mut sheet = staff_sheet(&v, t.staff_model, "model", error);
    sheet.fact(t.model_now, s(&m, "model"));
    sheet.fact(
        t.provider_configured,
        yes_no(
            t,
            m.get("provider_configured").and_then(Value::as_bool) == Some(true),
        ),
    );
    sheet.section(
        Section::new(t.model_change).note(t.model_note).form(
            Form::post("/staff/model", t.save).field(
                Field::text("model", t.by_model)
                    .value(s(&m, "model"))
                    .required(),
            ),
        ),
    );
    sheet.answer(&v, c)
}

/// GET /staff/model.
pub async fn model(v: Visit, c: web::Data<Console>) -> HttpResponse {
    model_page(v, &c, None).await
}

/// POST /staff/model.
pub async fn set_model(v: Visit, c: web::Data<Console>, f: Fields) -> HttpResponse {
    posted!(v, c, f);
    let body = json!({ "model": f.one("model") });
    let got = call(&c, &v, Method::PUT, "/v1/agent/model", Some(&body)).await;
    finish(v, &c, got, "/staff/model", |v, e| model_page(v, &c, e)).await
}

// ---- a person ----

/// GET /staff/users/{id}: a person, their memberships and sessions.
pub async fn user(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !super::id_shaped(&id) {
        return super::not_found_page(&v, &c);
    }
    let t = v.lang.texts();
    let (v, u) = or_page!(fetch(v, &c, &format!("/v1/admin/users/{id}")).await);
    let mut sheet = staff_sheet(&v, s(&u, "email"), "users", None);
    sheet.fact(t.name, s(&u, "name"));
    sheet.fact(t.email, s(&u, "email"));
    sheet.fact(
        t.status,
        if s(&u, "status") == "disabled" {
            t.user_disabled
        } else {
            t.status_active
        },
    );
    if !s(&u, "disabled_reason").is_empty() {
        sheet.fact(t.reason, s(&u, "disabled_reason"));
    }
    sheet.fact(
        t.mfa,
        yes_no(
            t,
            u.get("mfa_enabled").and_then(Value::as_bool) == Some(true),
        ),
    );
    sheet.fact(t.passkeys, n(&u, "passkeys").to_string());
    let mut table = Table::new(vec![t.org, t.role, t.since], t.no_memberships);
    for m in u
        .get("memberships")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let org = s(m, "org_id");
        table.rows.push(
            Row::default()
                .link(format!("/staff/orgs/{org}"), org)
                .text(role(t, s(m, "role")))
                .text(when(&v, m, "created_at")),
        );
    }
    sheet.section(Section::new(t.memberships).table(table));
    let mut table = Table::new(vec![t.created_at, "IP", t.mfa, t.expires], t.no_sessions);
    for x in u
        .get("sessions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        table.rows.push(
            Row::default()
                .text(when(&v, x, "created_at"))
                .code(s(x, "ip"))
                .text(yes_no(
                    t,
                    x.get("mfa").and_then(Value::as_bool) == Some(true),
                ))
                .text(when(&v, x, "expires_at")),
        );
    }
    let q = s(&u, "email").to_owned();
    let mut section = Section::new(t.sessions).table(table);
    if !table_empty(&section) {
        section = section.form(
            Form::post(format!("/staff/users/{id}/sessions"), t.end_sessions)
                .field(Field::hidden("q", q.clone())),
        );
    }
    sheet.section(section);
    let mut access = Section::new(t.access);
    access = if s(&u, "status") == "disabled" {
        access.form(
            Form::post(format!("/staff/users/{id}/enable"), t.enable).field(Field::hidden("q", q)),
        )
    } else {
        access.form(
            Form::post(format!("/staff/users/{id}/disable"), t.disable)
                .field(Field::text("reason", t.reason).required().max(500))
                .field(Field::hidden("q", q)),
        )
    };
    sheet.section(access);
    sheet.answer(&v, &c)
}

fn table_empty(s: &Section) -> bool {
    s.table.as_ref().is_none_or(|t| t.rows.is_empty())
}

// ---- an OpenID client ----

async fn client_page(
    v: Visit,
    c: &Console,
    id: &str,
    error: Option<String>,
    secret: Option<String>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, c);
    }
    if !super::id_shaped(id) {
        return super::not_found_page(&v, c);
    }
    let t = v.lang.texts();
    let (v, clients) = or_page!(fetch_list(v, c, "/v1/admin/oauth-clients").await);
    let Some(k) = clients.iter().find(|k| s(k, "id") == id) else {
        return super::not_found_page(&v, c);
    };
    let lines = |key: &str| {
        k.get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    };
    let mut sheet = staff_sheet(&v, s(k, "name"), "clients", error);
    if let Some(secret) = secret {
        sheet.once = Some((t.client_secret_new.to_owned(), secret));
    }
    sheet.fact("client_id", id);
    sheet.fact(t.kind, s(k, "kind"));
    sheet.fact(t.created_at, when(&v, k, "created_at"));
    sheet.fact(t.updated, when(&v, k, "updated_at"));
    let scopes = lines("scopes").replace('\n', " ");
    sheet.section(
        Section::new(t.client_edit).form(
            Form::post(format!("/staff/clients/{id}/save"), t.save)
                .field(Field::text("name", t.name).value(s(k, "name")).required())
                .field(Field::new("first_party", t.first_party, Kind::Check).value(
                    if k.get("first_party").and_then(Value::as_bool) == Some(true) {
                        "true"
                    } else {
                        "false"
                    },
                ))
                .field(Field::text("scopes", t.scopes).value(scopes).max(500))
                .field(
                    Field::new("redirect_uris", t.redirect_uris, Kind::Textarea)
                        .value(lines("redirect_uris"))
                        .max(20_000),
                )
                .field(
                    Field::new(
                        "post_logout_redirect_uris",
                        t.post_logout_uris,
                        Kind::Textarea,
                    )
                    .value(lines("post_logout_redirect_uris"))
                    .max(20_000),
                )
                .field(
                    Field::new("allowed_org_ids", t.allowed_orgs, Kind::Textarea)
                        .value(lines("allowed_org_ids"))
                        .max(20_000),
                ),
        ),
    );
    if s(k, "kind") == "confidential" {
        sheet.section(
            Section::new(t.client_secret)
                .note(t.rotate_note)
                .form(Form::post(
                    format!("/staff/clients/{id}/rotate"),
                    t.rotate_secret,
                )),
        );
    }
    sheet.answer(&v, c)
}

/// GET /staff/clients/{id}: edit a client.
pub async fn client(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    client_page(v, &c, &id, None, None).await
}

/// POST /staff/clients/{id} (save) and /staff/clients/{id}/rotate (a new
/// secret, shown once).
pub async fn client_act(
    v: Visit,
    c: web::Data<Console>,
    path: web::Path<(String, String)>,
    f: Fields,
) -> HttpResponse {
    let (id, what) = path.into_inner();
    posted!(v, c, f, &id);
    let body = match what.as_str() {
        "save" => json!({
            "name": f.one("name"),
            "first_party": f.checked("first_party"),
            "scopes": f.one("scopes").split_whitespace().collect::<Vec<_>>(),
            "redirect_uris": super::staff::lines(Some(f.one("redirect_uris"))),
            "post_logout_redirect_uris": super::staff::lines(Some(f.one("post_logout_redirect_uris"))),
            "allowed_org_ids": super::staff::lines(Some(f.one("allowed_org_ids"))),
        }),
        "rotate" => json!({ "rotate_secret": true }),
        _ => return super::not_found_page(&v, &c),
    };
    let path = format!("/v1/admin/oauth-clients/{id}");
    let got = call(&c, &v, Method::PATCH, &path, Some(&body)).await;
    match got {
        Ok(a) if a.ok() && what == "rotate" => {
            let secret = Some(a.text("client_secret").to_owned()).filter(|s| !s.is_empty());
            client_page(v, &c, &id, None, secret).await
        }
        got => {
            let back = format!("/staff/clients/{id}");
            finish(v, &c, got, &back, |v, e| client_page(v, &c, &id, e, None)).await
        }
    }
}
