//! Projects: a core-level grouping every product shares. Products store a
//! project id as a bare uuid and validate it with `GET /v1/projects/{id}`,
//! server to server with the caller's bearer: 200 for any member of the
//! project's organization (its API keys included), 404 for everyone else,
//! never 403 (proto-docs/accounts.md). Members read, the admin roles
//! (owner, manager) write. The SQL is in [`store`].

mod model;
pub mod store;

pub use model::Project;

use crate::state::AppState;
use actix_web::{web, HttpResponse};
use event_contracts::AuditAction;
use hub_domain::{Capability, OrgId, ProjectId};
use serde::Deserialize;
use serde_json::json;
use service_kit::{assertion::Caller, http::Object, outbox, page, ApiError, ApiResult};

pub const NAME_MAX: usize = 200;
pub const DESCRIPTION_MAX: usize = 1000;

/// GET /v1/organizations/{id}/projects?limit=&cursor= (any member): newest
/// first, a page at a time.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    q: web::Query<page::Query>,
) -> ApiResult<HttpResponse> {
    let org = path.into_inner();
    caller.require(org, Capability::Read)?;
    let (limit, after) = crate::billing::page_of(&state, q.limit, q.cursor.as_deref())?;
    let rows = store::of_org(&state.pool, org, after, limit + 1).await?;
    Ok(page::respond(
        rows,
        limit,
        |p| (p.created_at, p.id.as_uuid()),
        |c| format!("/v1/organizations/{org}/projects?limit={limit}&cursor={c}"),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewProject {
    name: String,
    #[serde(default)]
    description: String,
}

/// POST /v1/organizations/{id}/projects (owner, manager): 201 Project; 409
/// past `orgs.max_projects`.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    body: web::Json<NewProject>,
) -> ApiResult<HttpResponse> {
    let org = path.into_inner();
    caller.require(org, Capability::Admin)?;
    let name = crate::billing::text("name", &body.name, NAME_MAX, true)?;
    let description =
        crate::billing::text("description", &body.description, DESCRIPTION_MAX, false)?;
    let mut tx = state.pool.begin().await?;
    crate::orgs::store::lock_writable(&mut tx, org).await?;
    let max = state.orgs.max_projects;
    if store::count_locked(&mut tx, org).await? >= max {
        return Err(ApiError::Conflict(format!(
            "an organization holds at most {max} projects"
        )));
    }
    let p = store::insert(&mut tx, ProjectId::new(), org, &name, &description).await?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        AuditAction::ProjectCreated,
        org,
        json!({"project_id": p.id}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Created().json(p))
}

/// The project `id` and the caller's right to it: 404 unless the caller is
/// a member of its organization (whatever the reason), 403 when a member
/// lacks `cap` (they can see it exists).
async fn authorized(
    state: &AppState,
    caller: &Caller,
    id: ProjectId,
    cap: Capability,
) -> ApiResult<Project> {
    let p = store::one(&state.pool, id)
        .await?
        .ok_or(ApiError::NotFound)?;
    caller.require(p.org_id, cap)?;
    Ok(p)
}

/// GET /v1/projects/{id}: the contract products validate a project id with.
#[tracing::instrument(skip_all, fields(project_id = %path))]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<ProjectId>,
) -> ApiResult<HttpResponse> {
    let p = authorized(&state, &caller, path.into_inner(), Capability::Read).await?;
    Ok(HttpResponse::Ok().json(p))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectPatch {
    name: Option<String>,
    description: Option<String>,
}

/// PATCH /v1/projects/{id} (owner, manager): `name` and/or `description`
/// (absent or null: unchanged); 200 the project as it is now.
#[tracing::instrument(skip_all, fields(project_id = %path))]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<ProjectId>,
    body: web::Json<Object<ProjectPatch>>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let body = body.into_inner().0;
    let p = authorized(&state, &caller, id, Capability::Admin).await?;
    if body.name.is_none() && body.description.is_none() {
        // A patch that names nothing changes nothing (merge-patch semantics).
        return Ok(HttpResponse::Ok().json(p));
    }
    let name = body
        .name
        .as_deref()
        .map(|n| crate::billing::text("name", n, NAME_MAX, true))
        .transpose()?;
    let description = body
        .description
        .as_deref()
        .map(|d| crate::billing::text("description", d, DESCRIPTION_MAX, false))
        .transpose()?;
    let mut tx = state.pool.begin().await?;
    crate::orgs::store::lock_writable(&mut tx, p.org_id).await?;
    let now = store::update(&mut tx, id, name.as_deref(), description.as_deref())
        .await?
        .ok_or(ApiError::NotFound)?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        AuditAction::ProjectUpdated,
        p.org_id,
        json!({"project_id": id, "fields": changed(&name, &description)}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(now))
}

/// Which fields a patch set (their names only: values stay out of audit).
fn changed(name: &Option<String>, description: &Option<String>) -> Vec<&'static str> {
    [
        ("name", name.is_some()),
        ("description", description.is_some()),
    ]
    .into_iter()
    .filter_map(|(f, set)| set.then_some(f))
    .collect()
}

/// DELETE /v1/projects/{id} (owner, manager): 200 with the project as it was.
/// Products holding its id get 404 from `GET /v1/projects/{id}` from then on.
#[tracing::instrument(skip_all, fields(project_id = %path))]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<ProjectId>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let p = authorized(&state, &caller, id, Capability::Admin).await?;
    let mut tx = state.pool.begin().await?;
    crate::orgs::store::lock_writable(&mut tx, p.org_id).await?;
    let gone = store::delete(&mut tx, id)
        .await?
        .ok_or(ApiError::NotFound)?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        AuditAction::ProjectDeleted,
        p.org_id,
        json!({"project_id": id}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(gone))
}
