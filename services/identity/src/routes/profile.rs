//! The caller's profile.

use crate::{
    audit, fields,
    state::AppState,
    users::{self, Profile},
};
use actix_web::{web, HttpResponse};
use event_contracts::IdentityChanged;
use serde::Deserialize;
use serde_json::json;
use service_kit::{assertion::PersonCaller, outbox, ApiResult};

/// GET /v1/profile
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn get(state: web::Data<AppState>, caller: PersonCaller) -> ApiResult<HttpResponse> {
    Ok(HttpResponse::Ok().json(users::profile(&state.pool, caller.user_id()).await?))
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

impl ProfilePatch {
    /// Every given field validated (and normalized), before anything is written.
    fn validate(self) -> ApiResult<ProfilePatch> {
        Ok(ProfilePatch {
            name: self.name.as_deref().map(fields::name).transpose()?,
            phone: self.phone.as_deref().map(fields::phone).transpose()?,
            job_title: self
                .job_title
                .as_deref()
                .map(fields::job_title)
                .transpose()?,
            timezone: self.timezone.as_deref().map(fields::timezone).transpose()?,
            locale: self.locale.as_deref().map(fields::locale).transpose()?,
            bio: self.bio.as_deref().map(fields::bio).transpose()?,
        })
    }

    /// `old` with the given fields replaced.
    fn applied_to(self, old: &Profile) -> Profile {
        Profile {
            email: old.email.clone(),
            name: self.name.unwrap_or_else(|| old.name.clone()),
            phone: self.phone.unwrap_or_else(|| old.phone.clone()),
            job_title: self.job_title.unwrap_or_else(|| old.job_title.clone()),
            timezone: self.timezone.unwrap_or_else(|| old.timezone.clone()),
            locale: self.locale.unwrap_or_else(|| old.locale.clone()),
            bio: self.bio.unwrap_or_else(|| old.bio.clone()),
        }
    }
}

/// The names of the fields that differ between `old` and `new`.
fn changed_fields(old: &Profile, new: &Profile) -> Vec<&'static str> {
    [
        ("name", old.name != new.name),
        ("phone", old.phone != new.phone),
        ("job_title", old.job_title != new.job_title),
        ("timezone", old.timezone != new.timezone),
        ("locale", old.locale != new.locale),
        ("bio", old.bio != new.bio),
    ]
    .into_iter()
    .filter_map(|(f, c)| c.then_some(f))
    .collect()
}

/// PATCH /v1/profile: only the provided fields change; all are validated
/// before anything is written.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn patch(
    state: web::Data<AppState>,
    caller: PersonCaller,
    body: web::Json<ProfilePatch>,
) -> ApiResult<HttpResponse> {
    let valid = body.into_inner().validate()?;
    let mut tx = state.pool.begin().await?;
    let old = users::lock_profile(&mut tx, caller.user_id()).await?;
    let new = valid.applied_to(&old);
    if new != old {
        let changed = changed_fields(&old, &new);
        users::set_profile(&mut tx, caller.user_id(), &new).await?;
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
