//! The caller's profile.

use crate::{audit, fields, state::AppState};
use actix_web::{web, HttpResponse};
use event_contracts::IdentityChanged;
use hub_domain::UserId;
use serde::{Deserialize, Serialize};
use serde_json::json;
use service_kit::{assertion::SessionCaller, outbox, ApiResult};

#[derive(Serialize, Clone, PartialEq)]
struct Profile {
    email: String,
    name: String,
    phone: String,
    job_title: String,
    timezone: String,
    locale: String,
    bio: String,
}

/// GET /v1/profile
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn get(state: web::Data<AppState>, caller: SessionCaller) -> ApiResult<HttpResponse> {
    let p = sqlx::query_as!(
        Profile,
        "SELECT email, name, phone, job_title, timezone, locale, bio FROM users WHERE id = $1",
        caller.user_id() as UserId,
    )
    .fetch_one(&state.pool)
    .await?;
    Ok(HttpResponse::Ok().json(p))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfilePatch {
    name: Option<String>,
    phone: Option<String>,
    job_title: Option<String>,
    timezone: Option<String>,
    locale: Option<String>,
    bio: Option<String>,
}

/// PATCH /v1/profile: only the provided fields change; all are validated
/// before anything is written.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn patch(
    state: web::Data<AppState>,
    caller: SessionCaller,
    body: web::Json<ProfilePatch>,
) -> ApiResult<HttpResponse> {
    let b = body.into_inner();
    let name = b.name.as_deref().map(fields::name).transpose()?;
    let phone = b.phone.as_deref().map(fields::phone).transpose()?;
    let job_title = b.job_title.as_deref().map(fields::job_title).transpose()?;
    let timezone = b.timezone.as_deref().map(fields::timezone).transpose()?;
    let locale = b.locale.as_deref().map(fields::locale).transpose()?;
    let bio = b.bio.as_deref().map(fields::bio).transpose()?;

    let mut tx = state.pool.begin().await?;
    let old = sqlx::query_as!(
        Profile,
        "SELECT email, name, phone, job_title, timezone, locale, bio FROM users WHERE id = $1 \
         FOR UPDATE",
        caller.user_id() as UserId,
    )
    .fetch_one(&mut *tx)
    .await?;
    let new = Profile {
        email: old.email.clone(),
        name: name.unwrap_or_else(|| old.name.clone()),
        phone: phone.unwrap_or_else(|| old.phone.clone()),
        job_title: job_title.unwrap_or_else(|| old.job_title.clone()),
        timezone: timezone.unwrap_or_else(|| old.timezone.clone()),
        locale: locale.unwrap_or_else(|| old.locale.clone()),
        bio: bio.unwrap_or_else(|| old.bio.clone()),
    };
    if new != old {
        let changed: Vec<&str> = [
            ("name", old.name != new.name),
            ("phone", old.phone != new.phone),
            ("job_title", old.job_title != new.job_title),
            ("timezone", old.timezone != new.timezone),
            ("locale", old.locale != new.locale),
            ("bio", old.bio != new.bio),
        ]
        .into_iter()
        .filter_map(|(f, c)| c.then_some(f))
        .collect();
        sqlx::query!(
            "UPDATE users SET name = $2, phone = $3, job_title = $4, timezone = $5, \
             locale = $6, bio = $7, updated_at = now() WHERE id = $1",
            caller.user_id() as UserId,
            &new.name,
            &new.phone,
            &new.job_title,
            &new.timezone,
            &new.locale,
            &new.bio,
        )
        .execute(&mut *tx)
        .await?;
        // The detail names the fields, not their values: audit rows outlive edits.
        audit::record(
            &mut tx,
            Some(caller.user_id()),
            event_contracts::AuditAction::ProfileUpdated,
            &format!("user:{}", caller.user_id()),
            json!({ "fields": changed }),
            &caller.ip,
        )
        .await?;
        if old.name != new.name {
            outbox::enqueue(
                &mut tx,
                &state.naming,
                IdentityChanged {
                    user_id: caller.user_id(),
                },
            )
            .await?;
        }
        tx.commit().await?;
        if old.name != new.name {
            state.publish_now().await;
        }
    } else {
        tx.rollback().await?;
    }
    Ok(HttpResponse::Ok()
        .insert_header(service_kit::http::identity_changed(caller.user_id()))
        .json(new))
}
