//! The invitee's page: the mailed invite link, accepted by a person signed
//! in with the invited address.

use super::{
    call, chrome, form_expired, message, plausible_token, render, sign_in_first, sign_in_then,
    trouble, Chrome,
};
use crate::{session::Visit, Console};
use actix_web::{http::StatusCode, web, HttpResponse};
use askama::Template;
use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

#[derive(Template)]
#[template(path = "invite.html")]
struct Invite {
    c: Chrome,
    title: &'static str,
    token: String,
}

#[derive(Deserialize)]
pub struct InviteQuery {
    token: Option<String>,
}

/// GET /invites/accept?token=: sign in first (coming back here), then a
/// button that accepts (a mail scanner's fetch accepts nothing).
pub async fn page(v: Visit, c: web::Data<Console>, q: web::Query<InviteQuery>) -> HttpResponse {
    let t = v.lang.texts();
    let Some(token) = q
        .token
        .as_deref()
        .filter(|t| plausible_token(t))
        .map(str::to_owned)
    else {
        return message(
            &v,
            &c,
            StatusCode::NOT_FOUND,
            t.error_title,
            t.not_found,
            Some(("/", t.home)),
        );
    };
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    let page = Invite {
        c: chrome(&v),
        title: t.invite_title,
        token,
    };
    render(&v, &c, StatusCode::OK, page)
}

#[derive(Deserialize)]
pub struct AcceptForm {
    #[serde(default)]
    csrf: String,
    token: String,
}

/// POST /invites/accept: a member now; to the organization's page.
pub async fn accept(v: Visit, c: web::Data<Console>, f: web::Form<AcceptForm>) -> HttpResponse {
    if !v.signed_in() {
        let back = plausible_token(&f.token).then(|| format!("/invites/accept?token={}", f.token));
        return sign_in_then(v, &c, back);
    }
    if !v.csrf_ok(&f.csrf) || !plausible_token(&f.token) {
        return form_expired(&v, &c);
    }
    let got = call(
        &c,
        &v,
        Method::POST,
        "/v1/invites/accept",
        Some(&json!({ "token": f.token })),
    )
    .await;
    let t = v.lang.texts();
    match &got {
        Ok(a) if a.ok() => {
            let org = a.text("org_id").to_owned();
            v.redirect(&c, &format!("/orgs/{org}"))
        }
        Ok(a) if a.status == 403 => message(
            &v,
            &c,
            StatusCode::FORBIDDEN,
            t.invite_title,
            t.invite_other_email,
            None,
        ),
        Ok(a) if a.status == 409 => message(
            &v,
            &c,
            StatusCode::CONFLICT,
            t.invite_title,
            t.invite_closed,
            Some(("/orgs", t.nav_orgs)),
        ),
        _ => trouble(v, &c, got.as_ref()),
    }
}
