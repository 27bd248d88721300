//! An organization's projects, assets, members' AI settings with the token
//! usage, and payment claims: lists with their forms ([`Sheet`]). What each
//! role may do is the API's to say; a refusal is shown on the page.

use super::{
    call, org_of,
    sheet::{
        currencies, fetch_list, finish, list, money, n, options, or_page, posted, s, when, yes_no,
        Field, Form, Kind, Nav, Row, Section, Sheet, Table,
    },
    trouble,
};
use crate::{i18n::Texts, pages::orgs::role, session::Visit, Console};
use actix_web::{web, HttpResponse};
use reqwest::Method;
use serde::Deserialize;
use serde_json::{json, Value};

type Fields = web::Form<Vec<(String, String)>>;

/// An organization's sheet: its tabs, its name, this tab.
async fn org_sheet(
    v: Visit,
    c: &Console,
    id: &str,
    tab: &'static str,
    title: &str,
) -> Result<(Visit, Sheet), HttpResponse> {
    let (v, org) = org_of(v, c, id).await?;
    let name = s(&org, "name").to_owned();
    let mut sheet = Sheet::new(
        &v,
        format!("{name} · {title}"),
        Nav::Org(id.to_owned(), name),
        tab,
    );
    sheet.heading = title.to_owned();
    Ok((v, sheet))
}

// ---- projects ----

async fn projects_page(v: Visit, c: &Console, id: &str, error: Option<String>) -> HttpResponse {
    let t = v.lang.texts();
    let (v, mut sheet) = or_page!(org_sheet(v, c, id, "projects", t.section_projects).await);
    let (v, projects) =
        or_page!(fetch_list(v, c, &format!("/v1/organizations/{id}/projects")).await);
    let mut table = Table::new(
        vec![t.name, t.description, t.created_at, "id"],
        t.no_projects,
    );
    for p in &projects {
        let pid = s(p, "id");
        let name = s(p, "name");
        table.rows.push(
            Row::default()
                .text(name)
                .text(s(p, "description"))
                .text(when(&v, p, "created_at"))
                .code(pid)
                .action(
                    Form::row(format!("/orgs/{id}/projects/{pid}"), t.rename, name)
                        .field(Field::text("name", t.name).value(name).required()),
                )
                .action(Form::row(
                    format!("/orgs/{id}/projects/{pid}/delete"),
                    t.delete,
                    name,
                )),
        );
    }
    sheet.error = error;
    sheet.section(
        Section::new(t.section_projects).table(table).form(
            Form::post(format!("/orgs/{id}/projects"), t.add)
                .legend(t.project_add)
                .field(Field::text("name", t.name).required())
                .field(Field::new("description", t.description, Kind::Textarea)),
        ),
    );
    sheet.answer(&v, c)
}

/// GET /orgs/{id}/projects.
pub async fn projects(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    projects_page(v, &c, &id, None).await
}

/// POST /orgs/{id}/projects: add one.
pub async fn add_project(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: Fields,
) -> HttpResponse {
    posted!(v, c, f, &id);
    let body = json!({ "name": f.one("name"), "description": f.one("description") });
    let path = format!("/v1/organizations/{id}/projects");
    let got = call(&c, &v, Method::POST, &path, Some(&body)).await;
    let back = format!("/orgs/{id}/projects");
    finish(v, &c, got, &back, |v, e| projects_page(v, &c, &id, e)).await
}

/// POST /orgs/{id}/projects/{project}: rename it.
pub async fn rename_project(
    v: Visit,
    c: web::Data<Console>,
    ids: web::Path<(String, String)>,
    f: Fields,
) -> HttpResponse {
    let (id, pid) = ids.into_inner();
    posted!(v, c, f, &id, &pid);
    let body = json!({ "name": f.one("name") });
    let got = call(
        &c,
        &v,
        Method::PATCH,
        &format!("/v1/projects/{pid}"),
        Some(&body),
    )
    .await;
    let back = format!("/orgs/{id}/projects");
    finish(v, &c, got, &back, |v, e| projects_page(v, &c, &id, e)).await
}

/// POST /orgs/{id}/projects/{project}/delete.
pub async fn delete_project(
    v: Visit,
    c: web::Data<Console>,
    ids: web::Path<(String, String)>,
    f: Fields,
) -> HttpResponse {
    let (id, pid) = ids.into_inner();
    posted!(v, c, f, &id, &pid);
    let got = call(&c, &v, Method::DELETE, &format!("/v1/projects/{pid}"), None).await;
    let back = format!("/orgs/{id}/projects");
    finish(v, &c, got, &back, |v, e| projects_page(v, &c, &id, e)).await
}

// ---- assets ----

fn asset_kinds(t: &'static Texts) -> Vec<(String, String)> {
    options(&[
        ("document", t.asset_document),
        ("logo", t.asset_logo),
        ("link", t.asset_link),
        ("other", t.asset_other),
    ])
}

fn asset_kind(t: &'static Texts, code: &str) -> String {
    asset_kinds(t)
        .into_iter()
        .find(|(c, _)| c == code)
        .map(|(_, l)| l)
        .unwrap_or_else(|| code.to_owned())
}

async fn assets_page(v: Visit, c: &Console, id: &str, error: Option<String>) -> HttpResponse {
    let t = v.lang.texts();
    let (v, mut sheet) = or_page!(org_sheet(v, c, id, "assets", t.section_assets).await);
    let (v, assets) = or_page!(fetch_list(v, c, &format!("/v1/organizations/{id}/assets")).await);
    let mut table = Table::new(vec![t.name, t.kind, t.url, t.note], t.no_assets);
    for a in &assets {
        let aid = s(a, "id");
        let name = s(a, "name");
        let mut row = Row::default().text(name).text(asset_kind(t, s(a, "kind")));
        // Only https addresses are kept (the API refuses others): a link.
        row = if s(a, "url").starts_with("https://") {
            row.link(s(a, "url"), s(a, "url"))
        } else {
            row.text(s(a, "url"))
        };
        table.rows.push(row.text(s(a, "note")).action(Form::row(
            format!("/orgs/{id}/assets/{aid}/delete"),
            t.remove,
            name,
        )));
    }
    sheet.error = error;
    sheet.section(
        Section::new(t.section_assets).table(table).form(
            Form::post(format!("/orgs/{id}/assets"), t.add)
                .legend(t.asset_add)
                .field(Field::select("kind", t.kind, asset_kinds(t)))
                .field(Field::text("name", t.name).required())
                .field(Field::new("url", t.url, Kind::Url).required().max(2000))
                .field(Field::new("note", t.note, Kind::Textarea)),
        ),
    );
    sheet.answer(&v, c)
}

/// GET /orgs/{id}/assets.
pub async fn assets(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    assets_page(v, &c, &id, None).await
}

/// POST /orgs/{id}/assets: add one.
pub async fn add_asset(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: Fields,
) -> HttpResponse {
    posted!(v, c, f, &id);
    let body = json!({
        "kind": f.one("kind"), "name": f.one("name"), "url": f.one("url"), "note": f.one("note"),
    });
    let path = format!("/v1/organizations/{id}/assets");
    let got = call(&c, &v, Method::POST, &path, Some(&body)).await;
    let back = format!("/orgs/{id}/assets");
    finish(v, &c, got, &back, |v, e| assets_page(v, &c, &id, e)).await
}

/// POST /orgs/{id}/assets/{asset}/delete.
pub async fn delete_asset(
    v: Visit,
    c: web::Data<Console>,
    ids: web::Path<(String, String)>,
    f: Fields,
) -> HttpResponse {
    let (id, aid) = ids.into_inner();
    posted!(v, c, f, &id, &aid);
    let path = format!("/v1/organizations/{id}/assets/{aid}");
    let got = call(&c, &v, Method::DELETE, &path, None).await;
    let back = format!("/orgs/{id}/assets");
    finish(v, &c, got, &back, |v, e| assets_page(v, &c, &id, e)).await
}

// ---- members' AI settings and token usage ----

#[derive(Deserialize, Default)]
pub struct UsageQuery {
    by: Option<String>,
    since: Option<String>,
    until: Option<String>,
}

/// A `date` field's value as the start of that day (UTC), RFC 3339.
fn day_start(d: &str) -> Option<String> {
    chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d")
        .ok()
        .map(|d| format!("{d}T00:00:00Z"))
}

async fn ai_page(
    v: Visit,
    c: &Console,
    id: &str,
    q: UsageQuery,
    error: Option<String>,
) -> HttpResponse {
    let t = v.lang.texts();
    let (v, mut sheet) = or_page!(org_sheet(v, c, id, "ai", t.section_ai).await);
    // The settings are for owners and managers (the API says): others see
    // the usage only.
    let got = call(
        c,
        &v,
        Method::GET,
        &format!("/v1/organizations/{id}/members/ai"),
        None,
    )
    .await;
    let settings = match &got {
        Ok(a) if a.ok() => Some(list(a)),
        Ok(a) if a.status == 403 => None,
        _ => return trouble(v, c, got.as_ref()),
    };
    if let Some(settings) = settings {
        let (v2, members) =
            or_page!(fetch_list(v, c, &format!("/v1/organizations/{id}/members")).await);
        let email_of = |uid: &str| {
            members
                .iter()
                .find(|m| s(m, "user_id") == uid)
                .map(|m| s(m, "email").to_owned())
                .unwrap_or_else(|| uid.to_owned())
        };
        let mut table = Table::new(
            vec![t.email, t.role, t.ai_enabled, t.token_limit, t.tokens_spent],
            t.no_members,
        );
        for m in &settings {
            let uid = s(m, "user_id");
            let email = email_of(uid);
            let limit = m.get("token_limit").and_then(Value::as_i64);
            table.rows.push(
                Row::default()
                    .text(&email)
                    .text(role(t, s(m, "role")))
                    .text(yes_no(
                        t,
                        m.get("ai_enabled").and_then(Value::as_bool) == Some(true),
                    ))
                    .num(limit.map_or_else(|| t.no_limit.to_owned(), |l| l.to_string()))
                    .num(n(m, "tokens_spent").to_string())
                    .action(
                        Form::row(format!("/orgs/{id}/ai/{uid}"), t.save, &email)
                            .field(Field::new("ai_enabled", t.ai_enabled, Kind::Check).value(
                                yes_no_code(
                                    m.get("ai_enabled").and_then(Value::as_bool) == Some(true),
                                ),
                            ))
                            .field(
                                Field::new("token_limit", t.token_limit, Kind::Number)
                                    .value(limit.map(|l| l.to_string()).unwrap_or_default()),
                            ),
                    ),
            );
        }
        sheet.section(
            Section::new(t.ai_members)
                .note(t.ai_members_note)
                .table(table),
        );
        return usage_section(v2, c, id, q, sheet, error).await;
    }
    usage_section(v, c, id, q, sheet, error).await
}

fn yes_no_code(b: bool) -> &'static str {
    if b {
        "true"
    } else {
        "false"
    }
}

async fn usage_section(
    v: Visit,
    c: &Console,
    id: &str,
    q: UsageQuery,
    mut sheet: Sheet,
    error: Option<String>,
) -> HttpResponse {
    let t = v.lang.texts();
    let by =
        q.by.as_deref()
            .filter(|b| matches!(*b, "member" | "model" | "day"))
            .unwrap_or("member");
    let mut path = format!("/v1/organizations/{id}/tokens/usage?by={by}");
    let since = q.since.as_deref().unwrap_or("");
    let until = q.until.as_deref().unwrap_or("");
    if let Some(at) = day_start(since) {
        path.push_str(&format!("&since={at}"));
    }
    if let Some(at) = day_start(until) {
        path.push_str(&format!("&until={at}"));
    }
    let got = call(c, &v, Method::GET, &path, None).await;
    let usage = match &got {
        Ok(a) if a.ok() => a.body.clone(),
        Ok(a) if a.status == 400 => {
            sheet.error = Some(a.error().to_owned());
            Value::Null
        }
        _ => return trouble(v, c, got.as_ref()),
    };
    let col = match by {
        "model" => t.by_model,
        "day" => t.by_day,
        _ => t.by_member,
    };
    let mut table = Table::new(vec![col, t.tokens, t.spends], t.no_usage);
    for g in usage
        .get("groups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = g.get(by).and_then(Value::as_str).unwrap_or("—");
        table.rows.push(
            Row::default()
                .text(key)
                .num(n(g, "tokens").to_string())
                .num(n(g, "spends").to_string()),
        );
    }
    let mut section = Section::new(t.usage);
    if usage.is_object() {
        section = section.note(format!(
            "{} {} ({} – {})",
            t.usage_total,
            n(&usage, "total"),
            when(&v, &usage, "since"),
            when(&v, &usage, "until")
        ));
    }
    section = section.table(table).form(
        Form::get(format!("/orgs/{id}/ai"), t.show)
            .field(
                Field::select(
                    "by",
                    t.usage_by,
                    options(&[
                        ("member", t.by_member),
                        ("model", t.by_model),
                        ("day", t.by_day),
                    ]),
                )
                .value(by),
            )
            .field(Field::new("since", t.since, Kind::Date).value(since))
            .field(Field::new("until", t.until, Kind::Date).value(until)),
    );
    sheet.section(section);
    if error.is_some() {
        sheet.error = error;
    }
    sheet.answer(&v, c)
}

/// GET /orgs/{id}/ai?by=&since=&until=: members' AI settings (owners and
/// managers) and the organization's token usage.
pub async fn ai(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    q: web::Query<UsageQuery>,
) -> HttpResponse {
    ai_page(v, &c, &id, q.into_inner(), None).await
}

/// POST /orgs/{id}/ai/{user}: a member's AI switch and personal limit.
pub async fn save_ai(
    v: Visit,
    c: web::Data<Console>,
    ids: web::Path<(String, String)>,
    f: Fields,
) -> HttpResponse {
    let (id, uid) = ids.into_inner();
    posted!(v, c, f, &id, &uid);
    let limit = match f.opt("token_limit") {
        None => Value::Null,
        Some(l) => match l.parse::<i64>() {
            Ok(n) => json!(n),
            Err(_) => {
                let t = v.lang.texts();
                let e = Some(t.whole_number.to_owned());
                return ai_page(v, &c, &id, UsageQuery::default(), e).await;
            }
        },
    };
    let body = json!({ "ai_enabled": f.checked("ai_enabled"), "token_limit": limit });
    let path = format!("/v1/organizations/{id}/members/{uid}/ai");
    let got = call(&c, &v, Method::PATCH, &path, Some(&body)).await;
    let back = format!("/orgs/{id}/ai");
    finish(v, &c, got, &back, |v, e| {
        ai_page(v, &c, &id, UsageQuery::default(), e)
    })
    .await
}

// ---- payment claims ----

fn claim_status(t: &'static Texts, code: &str) -> &'static str {
    match code {
        "approved" => t.claim_approved,
        "rejected" => t.claim_rejected,
        _ => t.claim_pending,
    }
}

async fn claims_page(v: Visit, c: &Console, id: &str, error: Option<String>) -> HttpResponse {
    let t = v.lang.texts();
    let (v, mut sheet) = or_page!(org_sheet(v, c, id, "claims", t.section_claims).await);
    let (v, claims) =
        or_page!(fetch_list(v, c, &format!("/v1/organizations/{id}/payment-claims")).await);
    // Open invoices and proformas, for the claim to name.
    let (v, invoices) =
        or_page!(fetch_list(v, c, &format!("/v1/organizations/{id}/invoices?limit=100")).await);
    let number_of = |iid: &str| {
        invoices
            .iter()
            .find(|i| s(i, "id") == iid)
            .map(|i| s(i, "number").to_owned())
            .unwrap_or_default()
    };
    let mut table = Table::new(
        vec![
            t.created_at,
            t.amount,
            t.reference,
            t.number,
            t.status,
            t.review_notes,
        ],
        t.no_claims,
    );
    for k in &claims {
        table.rows.push(
            Row::default()
                .text(when(&v, k, "created_at"))
                .num(money(k, "amount_minor", v.lang))
                .text(s(k, "reference"))
                .text(number_of(s(k, "invoice_id")))
                .text(claim_status(t, s(k, "status")))
                .text(s(k, "review_notes")),
        );
    }
    let mut open = vec![(String::new(), t.none_option.to_owned())];
    open.extend(
        invoices
            .iter()
            .filter(|i| matches!(s(i, "status"), "issued" | "partially_paid"))
            .map(|i| {
                (
                    s(i, "id").to_owned(),
                    format!("{} · {}", s(i, "number"), money(i, "total_minor", v.lang)),
                )
            }),
    );
    sheet.error = error;
    sheet.section(
        Section::new(t.section_claims)
            .note(t.claims_note)
            .table(table)
            .form(
                Form::post(format!("/orgs/{id}/claims"), t.send)
                    .legend(t.claim_add)
                    .field(
                        Field::new("amount", t.amount, Kind::Amount)
                            .required()
                            .max(20),
                    )
                    .field(Field::select("currency", t.currency, currencies()))
                    .field(Field::text("reference", t.reference).required())
                    .field(Field::select("invoice_id", t.invoice, open))
                    .field(Field::new("note", t.note, Kind::Textarea)),
            ),
    );
    sheet.answer(&v, c)
}

/// GET /orgs/{id}/claims: the organization's payment claims.
pub async fn claims(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    claims_page(v, &c, &id, None).await
}

/// POST /orgs/{id}/claims: "we paid": staff match it against the bank.
pub async fn add_claim(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: Fields,
) -> HttpResponse {
    posted!(v, c, f, &id);
    let Some(amount) = f.minor("amount") else {
        let e = Some(v.lang.texts().amount_typed.to_owned());
        return claims_page(v, &c, &id, e).await;
    };
    let body = json!({
        "amount_minor": amount,
        "currency": f.one("currency"),
        "reference": f.one("reference"),
        "note": f.one("note"),
        "invoice_id": f.opt("invoice_id"),
    });
    let path = format!("/v1/organizations/{id}/payment-claims");
    let got = call(&c, &v, Method::POST, &path, Some(&body)).await;
    let back = format!("/orgs/{id}/claims");
    finish(v, &c, got, &back, |v, e| claims_page(v, &c, &id, e)).await
}
