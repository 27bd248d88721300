//! Distributor entities: staff manage them (create, edit, observers); an
//! entity's observers get its read-only view (its organizations, its
//! invoices and payments, its monthly report). The API says who sees what:
//! the forms are shown to staff only, and refused by the API to anyone else.

use super::{
    call,
    sheet::{
        currencies, fetch, finish, money, n, or_page, posted, s, when, Field, Form, Kind, Nav,
        Posted, Row, Section, Sheet, Table,
    },
    sign_in_first, trouble,
};
use crate::{format, session::Visit, Console};
use actix_web::{web, HttpResponse};
use reqwest::Method;
use serde::Deserialize;
use serde_json::{json, Map, Value};

type Fields = web::Form<Vec<(String, String)>>;

/// The text fields of an entity a form edits, in the API's names.
const TEXT_FIELDS: &[&str] = &[
    "name",
    "legal_name",
    "country",
    "tax_id",
    "address",
    "bank_name",
    "bank_iban",
    "bank_swift",
    "contact_email",
    "contact_phone",
    "notes",
];

fn label(t: &'static crate::i18n::Texts, k: &str) -> &'static str {
    match k {
        "name" => t.name,
        "legal_name" => t.legal_name,
        "country" => t.country,
        "tax_id" => t.tax_id,
        "address" => t.address_line,
        "bank_name" => t.bank_name,
        "bank_iban" => t.bank_iban,
        "bank_swift" => t.bank_swift,
        "contact_email" => t.contact_email,
        "contact_phone" => t.contact_phone,
        _ => t.notes,
    }
}

fn entity_form(action: String, t: &'static crate::i18n::Texts, d: Option<&Value>) -> Form {
    let mut f = Form::post(action, t.save);
    for k in TEXT_FIELDS {
        let kind = if *k == "notes" || *k == "address" {
            Kind::Textarea
        } else {
            Kind::Text
        };
        let mut field = Field::new(k, label(t, k), kind)
            .value(d.map(|d| s(d, k)).unwrap_or(""))
            .max(500);
        if matches!(*k, "name" | "legal_name" | "country") {
            field = field.required();
        }
        f = f.field(field);
    }
    f.field(
        Field::select("currency", t.currency, currencies())
            .value(d.map(|d| s(d, "currency")).unwrap_or("TRY")),
    )
    .field(
        Field::text("profit_pct", t.profit_pct)
            .value(d.map(pct).unwrap_or_else(|| "0".into()))
            .max(10),
    )
}

fn pct(d: &Value) -> String {
    d.get("profit_pct")
        .map(|p| p.to_string())
        .unwrap_or_default()
}

fn entity_body(f: &Posted, creating: bool) -> Result<Value, ()> {
    let mut m = Map::new();
    for k in TEXT_FIELDS {
        let v = f.one(k);
        if creating && v.is_empty() && !matches!(*k, "name" | "legal_name" | "country") {
            continue;
        }
        m.insert((*k).to_owned(), json!(v));
    }
    m.insert("currency".into(), json!(f.one("currency")));
    if let Some(p) = f.opt("profit_pct") {
        let p: f64 = p.replace(',', ".").parse().map_err(|_| ())?;
        m.insert("profit_pct".into(), json!(p));
    }
    Ok(Value::Object(m))
}

// ---- the list ----

async fn list_page(v: Visit, c: &Console, error: Option<String>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, c);
    }
    let t = v.lang.texts();
    let (v, all) = or_page!(fetch(v, c, "/v1/distributors").await);
    let staff = v.state.staff;
    let nav = if staff { Nav::Staff } else { Nav::None };
    let mut sheet = Sheet::new(&v, t.staff_distributors, nav, "distributors");
    sheet.error = error;
    let mut table = Table::new(
        vec![
            t.name,
            t.country_short,
            t.currency,
            t.profit_pct,
            t.dist_covers,
        ],
        t.no_distributors,
    );
    for d in all.as_array().into_iter().flatten() {
        let covers = d
            .get("covers")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        table.rows.push(
            Row::default()
                .link(format!("/distributors/{}", s(d, "id")), s(d, "name"))
                .text(s(d, "country"))
                .text(s(d, "currency"))
                .num(pct(d))
                .text(covers),
        );
    }
    let mut section = Section::new(t.staff_distributors).table(table);
    if staff {
        section = section.form(entity_form("/distributors".into(), t, None).legend(t.dist_add));
    }
    sheet.section(section);
    sheet.answer(&v, c)
}

/// GET /distributors: the entities the person may see.
pub async fn entities(v: Visit, c: web::Data<Console>) -> HttpResponse {
    list_page(v, &c, None).await
}

/// POST /distributors: a new entity (staff).
pub async fn create(v: Visit, c: web::Data<Console>, f: Fields) -> HttpResponse {
    posted!(v, c, f);
    let Ok(body) = entity_body(&f, true) else {
        let e = Some(v.lang.texts().pct_typed.to_owned());
        return list_page(v, &c, e).await;
    };
    let got = call(&c, &v, Method::POST, "/v1/distributors", Some(&body)).await;
    finish(v, &c, got, "/distributors", |v, e| list_page(v, &c, e)).await
}

// ---- an entity ----

#[derive(Deserialize, Default)]
pub struct Month {
    month: Option<String>,
}

async fn entity_page(
    v: Visit,
    c: &Console,
    id: &str,
    month: Option<String>,
    error: Option<String>,
) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, c);
    }
    if !super::id_shaped(id) {
        return super::not_found_page(&v, c);
    }
    let t = v.lang.texts();
    let (v, d) = or_page!(fetch(v, c, &format!("/v1/distributors/{id}")).await);
    let (v, orgs) = or_page!(
        fetch(
            v,
            c,
            &format!("/v1/distributors/{id}/organizations?limit=100"),
        )
        .await
    );
    let month = month
        .filter(|m| m.len() == 7)
        .unwrap_or_else(crate::format::this_month);
    let got = call(
        c,
        &v,
        Method::GET,
        &format!("/v1/distributors/{id}/report?month={month}"),
        None,
    )
    .await;
    let mut report_error = None;
    let report = match &got {
        Ok(a) if a.ok() => a.body.clone(),
        Ok(a) if a.status == 400 => {
            report_error = Some(a.error().to_owned());
            Value::Null
        }
        _ => return trouble(v, c, got.as_ref()),
    };
    let staff = v.state.staff;
    let mut sheet = Sheet::new(&v, s(&d, "name"), Nav::Distributor(id.to_owned()), "home");
    sheet.error = error.or(report_error);
    sheet.fact(t.legal_name, s(&d, "legal_name"));
    sheet.fact(t.country_short, s(&d, "country"));
    sheet.fact(t.currency, s(&d, "currency"));
    sheet.fact(t.profit_pct, pct(&d));
    sheet.fact(t.contact_email, s(&d, "contact_email"));

    let mut table = Table::new(
        vec![
            t.name,
            t.country_short,
            t.legal_type,
            t.kyc_status,
            t.status,
        ],
        t.no_orgs_here,
    );
    for o in orgs.as_array().into_iter().flatten() {
        let (kyc, _) = super::orgs::kyc(t, s(o, "kyc_status"));
        let name = s(o, "name");
        let row = if staff {
            Row::default().link(format!("/staff/orgs/{}", s(o, "id")), name)
        } else {
            Row::default().text(name)
        };
        table.rows.push(
            row.text(s(o, "country"))
                .text(super::orgs::legal(t, s(o, "legal_type")))
                .text(kyc)
                .text(if s(o, "status") == "suspended" {
                    t.status_suspended
                } else {
                    t.status_active
                }),
        );
    }
    sheet.section(Section::new(t.staff_orgs).table(table));

    let mut table = Table::new(
        vec![
            t.currency,
            t.dist_paid_invoices,
            t.dist_paid_total,
            t.dist_share,
        ],
        t.dist_no_report,
    );
    for r in report
        .get("currencies")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let cur = s(r, "currency");
        table.rows.push(
            Row::default()
                .text(cur)
                .num(n(r, "paid_invoices").to_string())
                .num(format::money(n(r, "paid_total_minor"), cur, v.lang))
                .num(format::money(n(r, "share_minor"), cur, v.lang)),
        );
    }
    sheet.section(
        Section::new(t.dist_report).table(table).form(
            Form::get(format!("/distributors/{id}"), t.show)
                .field(Field::new("month", t.period, Kind::Month).value(month)),
        ),
    );

    if staff {
        let (v2, observers) = or_page!(fetch(v, c, &format!("/v1/distributors/{id}/staff")).await);
        let mut table = Table::new(vec![t.email, t.since], t.dist_no_observers);
        for o in observers.as_array().into_iter().flatten() {
            let email = s(o, "email");
            table.rows.push(
                Row::default()
                    .text(email)
                    .text(when(&v2, o, "since"))
                    .action(Form::row(
                        format!("/distributors/{id}/observers/{}/remove", s(o, "user_id")),
                        t.remove,
                        email,
                    )),
            );
        }
        sheet.section(
            Section::new(t.dist_observers)
                .note(t.dist_observers_note)
                .table(table)
                .form(
                    Form::post(format!("/distributors/{id}/observers"), t.add).field(
                        Field::new("email", t.email, Kind::Email)
                            .required()
                            .max(254),
                    ),
                ),
        );
        sheet.section(Section::new(t.dist_edit).form(entity_form(
            format!("/distributors/{id}/edit"),
            t,
            Some(&d),
        )));
        return sheet.answer(&v2, c);
    }
    sheet.answer(&v, c)
}

/// GET /distributors/{id}?month=: an entity, its organizations and its
/// month's report.
pub async fn entity(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    q: web::Query<Month>,
) -> HttpResponse {
    entity_page(v, &c, &id, q.into_inner().month, None).await
}

/// POST /distributors/{id}/edit, /observers, /observers/{user}/remove (staff).
pub async fn entity_act(
    v: Visit,
    c: web::Data<Console>,
    path: web::Path<(String, String)>,
    f: Fields,
) -> HttpResponse {
    let (id, what) = path.into_inner();
    posted!(v, c, f, &id);
    let (method, api, body) = match what.split('/').collect::<Vec<_>>().as_slice() {
        ["edit"] => {
            let Ok(body) = entity_body(&f, false) else {
                let e = Some(v.lang.texts().pct_typed.to_owned());
                return entity_page(v, &c, &id, None, e).await;
            };
            (Method::PATCH, format!("/v1/distributors/{id}"), Some(body))
        }
        ["observers"] => (
            Method::POST,
            format!("/v1/distributors/{id}/staff"),
            Some(json!({ "email": f.one("email"), "role": "observer" })),
        ),
        ["observers", user, "remove"] if super::id_shaped(user) => (
            Method::DELETE,
            format!("/v1/distributors/{id}/staff/{user}"),
            None,
        ),
        _ => return super::not_found_page(&v, &c),
    };
    let got = call(&c, &v, method, &api, body.as_ref()).await;
    let back = format!("/distributors/{id}");
    finish(v, &c, got, &back, |v, e| entity_page(v, &c, &id, None, e)).await
}

/// GET /distributors/{id}/billing: the entity's invoices and payments.
pub async fn billing(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !super::id_shaped(&id) {
        return super::not_found_page(&v, &c);
    }
    let t = v.lang.texts();
    let (v, d) = or_page!(fetch(v, &c, &format!("/v1/distributors/{id}")).await);
    let (v, invoices) = or_page!(fetch(v, &c, &format!("/v1/distributors/{id}/invoices")).await);
    let (v, payments) = or_page!(fetch(v, &c, &format!("/v1/distributors/{id}/payments")).await);
    let mut sheet = Sheet::new(
        &v,
        s(&d, "name"),
        Nav::Distributor(id.to_string()),
        "billing",
    );
    let mut table = Table::new(
        vec![t.number, t.kind, t.status, t.total, t.paid, t.issued_at],
        t.no_invoices,
    );
    for i in list_of(&invoices) {
        table.rows.push(
            Row::default()
                .text(s(i, "number"))
                .text(if s(i, "kind") == "proforma" {
                    t.inv_proforma
                } else {
                    t.inv_invoice
                })
                .text(super::billing::invoice_status(t, s(i, "status")))
                .num(money(i, "total_minor", v.lang))
                .num(money(i, "paid_minor", v.lang))
                .text(when(&v, i, "issued_at")),
        );
    }
    sheet.section(Section::new(t.invoices).table(table));
    let mut table = Table::new(
        vec![t.received_at, t.amount, t.method, t.reference, t.number],
        t.no_payments,
    );
    for p in list_of(&payments) {
        table.rows.push(
            Row::default()
                .text(when(&v, p, "received_at"))
                .num(money(p, "amount_minor", v.lang))
                .text(s(p, "method"))
                .text(s(p, "reference"))
                .text(s(p, "invoice_number")),
        );
    }
    sheet.section(Section::new(t.payments).table(table));
    sheet.answer(&v, &c)
}

fn list_of(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}
