//! The assistant: a conversation, and the action it staged shown with its
//! summary and Confirm / Cancel (nothing sensitive runs without the
//! person's confirmation, which is the API's rule; the page only asks).

use super::{call, chrome, form_expired, id_shaped, render, sign_in_first, trouble, Chrome};
use crate::{pages::orgs::s, session::Visit, Console};
use actix_web::{http::StatusCode, web, HttpResponse};
use askama::Template;
use reqwest::Method;
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Template)]
#[template(path = "assistant.html")]
struct Assistant {
    c: Chrome,
    title: &'static str,
    error: Option<String>,
    outcome: Option<String>,
    /// (role, text), oldest first.
    messages: Vec<(String, String)>,
    /// The last reply's staged action: (confirmation id, summary).
    staged: Option<(String, String)>,
    conversation_id: String,
    orgs: Vec<(String, String)>,
    org_id: String,
}

#[derive(Deserialize)]
pub struct ConversationQuery {
    c: Option<String>,
    org: Option<String>,
}

/// What the page shows of a conversation.
struct Shown {
    error: Option<String>,
    outcome: Option<String>,
    /// A confirmation already answered on this page (its card not shown again).
    answered: Option<String>,
}

async fn page(
    v: Visit,
    c: &Console,
    conversation: Option<String>,
    org_id: String,
    status: StatusCode,
    shown: Shown,
) -> HttpResponse {
    if !v.signed_in() {
        return super::sign_in_first(v, c);
    }
    let conversation = conversation.filter(|id| id_shaped(id));
    let mut messages = Vec::new();
    let mut staged = None;
    if let Some(id) = &conversation {
        let got = call(
            c,
            &v,
            Method::GET,
            &format!("/v1/agent/conversations/{id}/messages"),
            None,
        )
        .await;
        let list = match &got {
            Ok(a) if a.ok() => a.body.as_array().cloned().unwrap_or_default(),
            _ => return trouble(v, c, got.as_ref()),
        };
        for m in &list {
            messages.push((s(m, "role").to_owned(), s(m, "content").to_owned()));
        }
        if let Some(last) = list.last() {
            let pending = last.get("confirmation_id").and_then(Value::as_str);
            if s(last, "role") == "assistant"
                && pending.is_some()
                && pending != shown.answered.as_deref()
            {
                staged = pending.map(|p| (p.to_owned(), s(last, "content").to_owned()));
            }
        }
    }
    let orgs = match call(c, &v, Method::GET, "/v1/organizations", None).await {
        Ok(a) if a.ok() => a
            .body
            .as_array()
            .map(|l| {
                l.iter()
                    .map(|o| (s(o, "id").to_owned(), s(o, "name").to_owned()))
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let page = Assistant {
        c: chrome(&v),
        title: v.lang.texts().assistant_title,
        error: shown.error,
        outcome: shown.outcome,
        messages,
        staged,
        conversation_id: conversation.unwrap_or_default(),
        orgs,
        org_id,
    };
    render(&v, c, status, page)
}

/// GET /assistant?c=<conversation>: the conversation so far.
pub async fn view(
    v: Visit,
    c: web::Data<Console>,
    q: web::Query<ConversationQuery>,
) -> HttpResponse {
    let shown = Shown {
        error: None,
        outcome: None,
        answered: None,
    };
    let org = q.org.clone().filter(|o| id_shaped(o)).unwrap_or_default();
    page(v, &c, q.c.clone(), org, StatusCode::OK, shown).await
}

#[derive(Deserialize)]
pub struct Ask {
    #[serde(default)]
    csrf: String,
    message: String,
    #[serde(default)]
    conversation_id: String,
    #[serde(default)]
    org_id: String,
}

/// POST /assistant: the message; then the conversation (a new one the first
/// time).
pub async fn ask(v: Visit, c: web::Data<Console>, f: web::Form<Ask>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) {
        return form_expired(&v, &c);
    }
    let mut body = json!({ "message": f.message.trim() });
    if id_shaped(&f.conversation_id) {
        body["conversation_id"] = json!(f.conversation_id);
    }
    if id_shaped(&f.org_id) {
        body["org_id"] = json!(f.org_id);
    }
    let got = call(&c, &v, Method::POST, "/v1/agent", Some(&body)).await;
    match &got {
        Ok(a) if a.ok() => {
            let mut to = format!("/assistant?c={}", a.text("conversation_id"));
            if id_shaped(&f.org_id) {
                to.push_str(&format!("&org={}", f.org_id));
            }
            v.redirect(&c, &to)
        }
        Ok(a) if matches!(a.status, 400 | 402 | 403 | 409 | 422) => {
            let shown = Shown {
                error: Some(a.error().to_owned()),
                outcome: None,
                answered: None,
            };
            let conv = Some(f.conversation_id.clone());
            page(
                v,
                &c,
                conv,
                f.org_id.clone(),
                StatusCode::UNPROCESSABLE_ENTITY,
                shown,
            )
            .await
        }
        _ => trouble(v, &c, got.as_ref()),
    }
}

#[derive(Deserialize)]
pub struct Answer {
    #[serde(default)]
    csrf: String,
    confirmation_id: String,
    #[serde(default)]
    conversation_id: String,
    #[serde(default)]
    summary: String,
    decision: String,
}

/// POST /assistant/confirm: Confirm runs the staged action (with the
/// person's authority now: the API's answer is shown, a refusal included);
/// Cancel drops it.
pub async fn answer(v: Visit, c: web::Data<Console>, f: web::Form<Answer>) -> HttpResponse {
    if !v.signed_in() {
        return sign_in_first(v, &c);
    }
    if !v.csrf_ok(&f.csrf) || !id_shaped(&f.confirmation_id) {
        return form_expired(&v, &c);
    }
    let t = v.lang.texts();
    let confirm = f.decision == "confirm";
    let path = if confirm {
        "/v1/agent/confirm"
    } else {
        "/v1/agent/reject"
    };
    let got = call(
        &c,
        &v,
        Method::POST,
        path,
        Some(&json!({ "confirmation_id": f.confirmation_id })),
    )
    .await;
    let summary: String = f.summary.chars().take(500).collect();
    let shown = match &got {
        Ok(a) if a.status == 202 => Shown {
            error: None,
            outcome: Some(t.assistant_unknown.to_owned()),
            answered: None,
        },
        Ok(a) if a.ok() => {
            let done = if confirm {
                t.assistant_done
            } else {
                t.assistant_cancelled
            };
            let what = match a.text("action_summary") {
                "" => summary,
                s => s.to_owned(),
            };
            Shown {
                error: None,
                outcome: Some(format!("{done} {what}")),
                answered: Some(f.confirmation_id.clone()),
            }
        }
        Ok(a) if matches!(a.status, 400 | 402 | 403 | 404 | 409 | 422) => Shown {
            error: Some(a.error().to_owned()),
            outcome: None,
            answered: Some(f.confirmation_id.clone()),
        },
        _ => return trouble(v, &c, got.as_ref()),
    };
    let status = if shown.error.is_some() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    page(
        v,
        &c,
        Some(f.conversation_id.clone()),
        String::new(),
        status,
        shown,
    )
    .await
}
