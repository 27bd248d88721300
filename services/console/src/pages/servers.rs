//! An organization's servers, on the product host: the list, ordering one
//! from the catalog, power, termination, and a server's page with its
//! credentials (for the roles the API shows them to; every read is audited
//! there) and their rotation.

use super::{
    org_of,
    sheet::{
        finish, list, money, or_page, posted, s, when, Field, Form, Nav, Row, Section, Sheet, Table,
    },
    trouble,
    webhooks::product,
};
use crate::{i18n::Texts, session::Visit, Console};
use actix_web::{web, HttpResponse};
use reqwest::Method;
use serde_json::json;

type Fields = web::Form<Vec<(String, String)>>;

pub fn server_status(t: &'static Texts, code: &str) -> &'static str {
    match code {
        "provisioning" => t.srv_provisioning,
        "pending_fulfilment" => t.srv_pending_fulfilment,
        "active" => t.srv_active,
        "stopped" => t.srv_stopped,
        "suspended" => t.srv_suspended,
        "failed" => t.srv_failed,
        "terminated" => t.srv_terminated,
        _ => "",
    }
}

/// The power buttons a server in this state can take.
fn power_actions(status: &str) -> &'static [&'static str] {
    match status {
        "active" => &["reboot", "stop"],
        "stopped" => &["start"],
        _ => &[],
    }
}

fn power_label(t: &'static Texts, action: &str) -> &'static str {
    match action {
        "reboot" => t.srv_reboot,
        "stop" => t.srv_stop,
        _ => t.srv_start,
    }
}

async fn list_page(v: Visit, c: &Console, id: &str, error: Option<String>) -> HttpResponse {
    let t = v.lang.texts();
    let (v, org) = or_page!(org_of(v, c, id).await);
    let name = s(&org, "name").to_owned();
    let got = product(
        c,
        &v,
        Method::GET,
        &format!("/v1/servers?org_id={id}&limit=100"),
        None,
    )
    .await;
    let servers = match &got {
        Ok(a) if a.ok() => list(a),
        _ => return trouble(v, c, got.as_ref()),
    };
    let got = product(c, &v, Method::GET, "/v1/skus", None).await;
    let skus = match &got {
        Ok(a) if a.ok() => list(a),
        _ => return trouble(v, c, got.as_ref()),
    };
    let sku_name = |sid: &str| {
        skus.iter()
            .find(|k| s(k, "id") == sid)
            .map(|k| s(k, "name").to_owned())
            .unwrap_or_else(|| sid.to_owned())
    };
    let mut sheet = Sheet::new(
        &v,
        format!("{name} · {}", t.section_servers),
        Nav::Org(id.to_owned(), name),
        "servers",
    );
    let mut table = Table::new(
        vec![t.srv_hostname, t.srv_plan, t.status, t.created_at],
        t.srv_none,
    );
    for x in &servers {
        let sid = s(x, "id");
        let host = s(x, "hostname");
        let status = s(x, "status");
        let mut row = Row::default()
            .link(format!("/orgs/{id}/servers/{sid}"), host)
            .text(sku_name(s(x, "sku_id")))
            .text(server_status(t, status))
            .text(when(&v, x, "created_at"));
        for action in power_actions(status) {
            row = row.action(
                Form::row(
                    format!("/orgs/{id}/servers/{sid}/power"),
                    power_label(t, action),
                    host,
                )
                .field(Field::hidden("action", *action)),
            );
        }
        table.rows.push(row);
    }
    let plans = skus
        .iter()
        .map(|k| {
            (
                s(k, "id").to_owned(),
                format!(
                    "{} · {} {}",
                    s(k, "name"),
                    money(k, "monthly_price_minor", v.lang),
                    t.per_month
                ),
            )
        })
        .collect();
    sheet.error = error;
    sheet.section(
        Section::new(t.section_servers).table(table).form(
            Form::post(format!("/orgs/{id}/servers"), t.srv_order)
                .legend(t.srv_order_title)
                .field(Field::select("sku_id", t.srv_plan, plans))
                .field(Field::text("hostname", t.srv_hostname).required().max(253)),
        ),
    );
    sheet.answer(&v, c)
}

/// GET /orgs/{id}/servers.
pub async fn servers(v: Visit, c: web::Data<Console>, id: web::Path<String>) -> HttpResponse {
    list_page(v, &c, &id, None).await
}

/// POST /orgs/{id}/servers: order one.
pub async fn order(
    v: Visit,
    c: web::Data<Console>,
    id: web::Path<String>,
    f: Fields,
) -> HttpResponse {
    posted!(v, c, f, &id);
    let body = json!({ "org_id": *id, "sku_id": f.one("sku_id"), "hostname": f.one("hostname") });
    let got = product(&c, &v, Method::POST, "/v1/servers", Some(&body)).await;
    let back = format!("/orgs/{id}/servers");
    finish(v, &c, got, &back, |v, e| list_page(v, &c, &id, e)).await
}

async fn server_page(
    v: Visit,
    c: &Console,
    id: &str,
    sid: &str,
    error: Option<String>,
) -> HttpResponse {
    let t = v.lang.texts();
    let (v, org) = or_page!(org_of(v, c, id).await);
    if !super::id_shaped(sid) {
        return super::not_found_page(&v, c);
    }
    let got = product(c, &v, Method::GET, &format!("/v1/servers/{sid}"), None).await;
    let x = match &got {
        // Another organization's server is not this page's.
        Ok(a) if a.ok() && s(&a.body, "org_id") == id => a.body.clone(),
        Ok(a) if a.ok() => return super::not_found_page(&v, c),
        _ => return trouble(v, c, got.as_ref()),
    };
    let name = s(&org, "name").to_owned();
    let host = s(&x, "hostname").to_owned();
    let status = s(&x, "status");
    let mut sheet = Sheet::new(
        &v,
        format!("{host} · {name}"),
        Nav::Org(id.to_owned(), name),
        "servers",
    );
    sheet.error = error;
    sheet.fact(t.srv_hostname, &host);
    sheet.fact(t.status, server_status(t, status));
    sheet.fact(t.created_at, when(&v, &x, "created_at"));
    if !s(&x, "activated_at").is_empty() {
        sheet.fact(t.srv_activated, when(&v, &x, "activated_at"));
    }
    if !s(&x, "due_at").is_empty() {
        sheet.fact(t.due_at, when(&v, &x, "due_at"));
    }
    if !s(&x, "failure").is_empty() {
        sheet.fact(t.srv_failure, s(&x, "failure"));
    }
    let mut access = Section::new(t.srv_credentials);
    match x.get("credentials").filter(|k| k.is_object()) {
        Some(k) => {
            sheet.fact(t.srv_host, s(k, "host"));
            sheet.fact(t.srv_username, s(k, "username"));
            sheet.fact(t.srv_password, s(k, "password"));
            access = access.note(t.srv_credentials_note).form(Form::post(
                format!("/orgs/{id}/servers/{sid}/rotate"),
                t.srv_rotate,
            ));
        }
        None => {
            let why = s(&x, "credentials_withheld");
            access = access.note(if why.is_empty() {
                t.srv_no_credentials.to_owned()
            } else {
                why.to_owned()
            });
        }
    }
    sheet.section(access);
    let mut controls = Section::new(t.srv_controls);
    for action in power_actions(status) {
        controls = controls.form(
            Form::post(
                format!("/orgs/{id}/servers/{sid}/power"),
                power_label(t, action),
            )
            .field(Field::hidden("action", *action)),
        );
    }
    if status != "terminated" {
        let mut end = Form::post(
            format!("/orgs/{id}/servers/{sid}/terminate"),
            t.srv_terminate,
        );
        end.quiet = true;
        controls = controls.note(t.srv_terminate_note).form(end);
    }
    sheet.section(controls);
    sheet.answer(&v, c)
}

/// GET /orgs/{id}/servers/{server}.
pub async fn server(
    v: Visit,
    c: web::Data<Console>,
    ids: web::Path<(String, String)>,
) -> HttpResponse {
    let (id, sid) = ids.into_inner();
    server_page(v, &c, &id, &sid, None).await
}

/// POST /orgs/{id}/servers/{server}/{power|terminate|rotate}.
pub async fn act(
    v: Visit,
    c: web::Data<Console>,
    ids: web::Path<(String, String, String)>,
    f: Fields,
) -> HttpResponse {
    let (id, sid, what) = ids.into_inner();
    posted!(v, c, f, &id, &sid);
    let (path, body) = match what.as_str() {
        "power" => match f.one("action") {
            a @ ("reboot" | "stop" | "start") => (
                format!("/v1/servers/{sid}/power"),
                Some(json!({ "action": a })),
            ),
            _ => return super::form_expired(&v, &c),
        },
        "terminate" => (format!("/v1/servers/{sid}/terminate"), None),
        "rotate" => (format!("/v1/servers/{sid}/credentials/rotate"), None),
        _ => return super::not_found_page(&v, &c),
    };
    // The server must be this organization's: the page's promise.
    let got = product(&c, &v, Method::GET, &format!("/v1/servers/{sid}"), None).await;
    match &got {
        Ok(a) if a.ok() && s(&a.body, "org_id") == id => {}
        Ok(a) if a.ok() => return super::not_found_page(&v, &c),
        _ => return trouble(v, &c, got.as_ref()),
    }
    let got = product(&c, &v, Method::POST, &path, body.as_ref()).await;
    let back = format!("/orgs/{id}/servers/{sid}");
    finish(v, &c, got, &back, |v, e| server_page(v, &c, &id, &sid, e)).await
}
