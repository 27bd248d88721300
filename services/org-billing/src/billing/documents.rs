//! Invoices and proformas: issued from charges with the next number of their
//! entity, kind and year, immutable once issued, paid through payments and
//! wallet settlements ([`super::payments`]), converted (proforma to invoice)
//! or voided while nothing is paid.

use super::{
    model::{Charge, ChargeStatus, Invoice, InvoiceStatus, Kind, Param},
    store::{self, NewDocument, Owner},
};
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use event_contracts::{AuditAction, AuditRecorded};
use hub_domain::{ChargeId, DistributorId, InvoiceId, MinorUnits, OrgId, RunId, UserId};
use serde::{Deserialize, Serialize};
use serde_json::json;
use service_kit::{
    assertion::{Caller, StaffCaller},
    outbox, page, ApiError, ApiResult,
};
use sqlx::PgConnection;
use time::OffsetDateTime;

pub const URL_MAX: usize = 2048;

/// Group `charges` (ordered so that each organization's and currency's are
/// together) into documents of `kind`, each at most `max_lines` long.
/// Err when a document's total would pass int64.
pub fn documents(
    charges: Vec<Charge>,
    kind: Kind,
    distributor_of: impl Fn(OrgId) -> Option<DistributorId>,
    max_lines: usize,
    run_id: Option<RunId>,
    created_by: Option<UserId>,
) -> Result<Vec<NewDocument>, ApiError> {
    let mut docs: Vec<NewDocument> = Vec::new();
    for c in charges {
        let same = docs.last().is_some_and(|d| {
            d.org_id == c.org_id && d.currency == c.currency && d.charges.len() < max_lines
        });
        if !same {
            let distributor_id = distributor_of(c.org_id).ok_or(ApiError::NotFound)?;
            docs.push(NewDocument {
                id: InvoiceId::new(),
                org_id: c.org_id,
                distributor_id,
                kind,
                currency: c.currency,
                charges: Vec::new(),
                subtotal_minor: MinorUnits::ZERO,
                run_id,
                created_by,
            });
        }
        let d = docs.last_mut().expect("pushed above");
        d.subtotal_minor = d
            .subtotal_minor
            .checked_add(c.amount_minor)
            .ok_or_else(|| {
                ApiError::Unprocessable("the document's total would pass the largest amount".into())
            })?;
        d.charges.push(c);
    }
    Ok(docs)
}

/// The audit events of issued documents (`actor` None: the system).
pub fn issued_events(
    docs: &[NewDocument],
    numbers: &[String],
    actor: Option<&Caller>,
    action: AuditAction,
) -> Vec<AuditRecorded> {
    docs.iter()
        .zip(numbers)
        .map(|(d, n)| {
            let detail = json!({"invoice_id": d.id, "number": n, "kind": d.kind.as_str(),
                                "total_minor": d.subtotal_minor, "currency": d.currency,
                                "charges": d.charges.len(), "run_id": d.run_id});
            match actor {
                Some(c) => outbox::audit_event(c, action, d.org_id, detail),
                None => outbox::system_audit_event(action, d.org_id, detail),
            }
        })
        .collect()
}

#[derive(Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct IssueBody {
    /// Exactly these charges (pending, of this organization); absent: all
    /// the organization's pending charges (the oldest `billing.max_lines`).
    charge_ids: Option<Vec<ChargeId>>,
}

/// POST /v1/admin/organizations/{id}/proformas (staff): 201 Invoice kind
/// proforma; its charges become quoted.
pub async fn issue_proforma(
    caller: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<OrgId>,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    issue(&state, &caller, path.into_inner(), &body, Kind::Proforma).await
}

/// POST /v1/admin/organizations/{id}/invoices (staff): 201 Invoice kind
/// invoice; its charges become invoiced.
pub async fn issue_invoice(
    caller: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<OrgId>,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    issue(&state, &caller, path.into_inner(), &body, Kind::Invoice).await
}

/// A JSON body that may be empty (then `T::default()`).
pub fn optional_body<T: serde::de::DeserializeOwned + Default>(body: &[u8]) -> ApiResult<T> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("invalid body: {e}")))
}

#[tracing::instrument(skip_all, fields(org_id = %org, kind = kind.as_str()))]
async fn issue(
    state: &AppState,
    caller: &Caller,
    org: OrgId,
    body: &[u8],
    kind: Kind,
) -> ApiResult<HttpResponse> {
    let body: IssueBody = optional_body(body)?;
    let max = state.billing.max_lines;
    if let Some(ids) = &body.charge_ids {
        if ids.is_empty() || ids.len() > max {
            return Err(ApiError::BadRequest(format!(
                "charge_ids must list 1 to {max} charges"
            )));
        }
    }
    let mut tx = state.pool.begin().await?;
    let billed = store::lock_org(&mut tx, org)
        .await?
        .ok_or(ApiError::NotFound)?;
    let charges = store::lock_charges(&mut tx, org, body.charge_ids.as_deref(), max as i64).await?;
    if let Some(ids) = &body.charge_ids {
        let mut wanted = ids.clone();
        wanted.sort();
        wanted.dedup();
        if charges.len() != wanted.len() {
            return Err(ApiError::Unprocessable(
                "charge_ids must name charges of this organization".into(),
            ));
        }
        if let Some(c) = charges.iter().find(|c| c.status != ChargeStatus::Pending) {
            return Err(ApiError::Conflict(format!(
                "charge {} is {}, not pending",
                c.id, c.status
            )));
        }
    }
    if charges.is_empty() {
        return Err(ApiError::conflict(
            "the organization has no pending charges",
        ));
    }
    if charges.iter().any(|c| c.currency != charges[0].currency) {
        return Err(ApiError::Unprocessable(
            "the charges are in more than one currency: issue one document per currency with charge_ids"
                .into(),
        ));
    }
    let docs = documents(
        charges,
        kind,
        |_| Some(billed.distributor_id),
        max,
        None,
        Some(caller.user_id()),
    )?;
    let numbers = store::issue(
        &mut tx,
        &docs,
        OffsetDateTime::now_utc(),
        state.billing.payment_terms_days,
    )
    .await?;
    let events = issued_events(&docs, &numbers, Some(caller), AuditAction::InvoiceIssued);
    outbox::enqueue_all(&mut tx, &state.naming, events).await?;
    let invoice = store::invoice(&mut tx, docs[0].id, None)
        .await?
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("an issued document vanished")))?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Created().json(invoice))
}

/// Lock the organization of document `id`, then the document: None when
/// there is no such document.
pub async fn lock(conn: &mut PgConnection, id: InvoiceId) -> ApiResult<Invoice> {
    let org = store::invoice_org(&mut *conn, id)
        .await?
        .ok_or(ApiError::NotFound)?;
    store::lock_org(&mut *conn, org).await?;
    store::lock_invoice(&mut *conn, id)
        .await?
        .ok_or(ApiError::NotFound)
}

/// An invoice and what it was converted from.
#[derive(Serialize)]
struct Converted {
    #[serde(flatten)]
    invoice: Invoice,
    converted_from: InvoiceId,
}

/// POST /v1/admin/invoices/{invoice_id}/convert (staff): a proforma becomes a
/// new invoice with the same lines (next INV number); the proforma is void and
/// points to it, its charges invoiced. 200 with the new invoice
/// (`converted_from` names the proforma).
#[tracing::instrument(skip_all, fields(invoice_id = %path))]
pub async fn convert(
    caller: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<InvoiceId>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let mut tx = state.pool.begin().await?;
    let proforma = lock(&mut tx, id).await?;
    if proforma.kind != Kind::Proforma {
        return Err(ApiError::conflict("only a proforma can be converted"));
    }
    if proforma.voided_at.is_some() {
        return Err(ApiError::conflict(if proforma.converted_to.is_some() {
            "the proforma was already converted"
        } else {
            "the proforma is void"
        }));
    }
    let charges = store::lock_charges_of(&mut tx, id).await?;
    if charges.is_empty() {
        return Err(ApiError::conflict("the proforma has no charges to invoice"));
    }
    let docs = documents(
        charges,
        Kind::Invoice,
        |_| Some(proforma.distributor_id),
        usize::MAX,
        None,
        Some(caller.user_id()),
    )?;
    if docs.len() != 1 {
        return Err(ApiError::internal(anyhow::anyhow!(
            "proforma {id} holds charges of several organizations or currencies"
        )));
    }
    let numbers = store::issue(
        &mut tx,
        &docs,
        OffsetDateTime::now_utc(),
        state.billing.payment_terms_days,
    )
    .await?;
    store::void(&mut tx, id, Some(docs[0].id)).await?;
    let mut events = issued_events(
        &docs,
        &numbers,
        Some(&caller),
        AuditAction::InvoiceConverted,
    );
    for e in &mut events {
        e.detail["proforma_id"] = json!(id);
        e.detail["proforma_number"] = json!(proforma.number);
    }
    outbox::enqueue_all(&mut tx, &state.naming, events).await?;
    let invoice = store::invoice(&mut tx, docs[0].id, None)
        .await?
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("a converted invoice vanished")))?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(Converted {
        invoice,
        converted_from: id,
    }))
}

/// POST /v1/admin/invoices/{invoice_id}/void (staff): only while nothing is
/// paid (else 409); a voided proforma's charges return to pending, an
/// invoice's stay invoiced (final).
#[tracing::instrument(skip_all, fields(invoice_id = %path))]
pub async fn void(
    caller: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<InvoiceId>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let mut tx = state.pool.begin().await?;
    let doc = lock(&mut tx, id).await?;
    if doc.voided_at.is_some() {
        return Err(ApiError::conflict("the document is already void"));
    }
    if doc.paid_minor.is_positive() {
        return Err(ApiError::conflict(
            "a document with payments applied cannot be voided",
        ));
    }
    store::void(&mut tx, id, None).await?;
    let released = if doc.kind == Kind::Proforma {
        store::release_quoted(&mut tx, id).await?
    } else {
        0
    };
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        AuditAction::InvoiceVoided,
        doc.org_id,
        json!({"invoice_id": id, "number": doc.number, "kind": doc.kind,
               "charges_released": released}),
    )
    .await?;
    let doc = store::invoice(&mut tx, id, None)
        .await?
        .ok_or(ApiError::NotFound)?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(doc))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Update {
    /// https only; null removes it.
    legal_document_url: Option<String>,
}

/// PATCH /v1/admin/invoices/{invoice_id} (staff): attach (or remove) the
/// externally issued legal document. The document as it is now.
#[tracing::instrument(skip_all, fields(invoice_id = %path))]
pub async fn update(
    caller: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<InvoiceId>,
    body: web::Json<Update>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let url = body
        .into_inner()
        .legal_document_url
        .map(|u| legal_url(&u))
        .transpose()?;
    let mut tx = state.pool.begin().await?;
    let doc = lock(&mut tx, id).await?;
    if doc.voided_at.is_some() {
        return Err(ApiError::conflict("a void document does not change"));
    }
    store::set_legal_document(&mut tx, id, url.as_deref()).await?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        AuditAction::InvoiceUpdated,
        doc.org_id,
        json!({"invoice_id": id, "number": doc.number, "legal_document_url": url}),
    )
    .await?;
    let doc = store::invoice(&mut tx, id, None)
        .await?
        .ok_or(ApiError::NotFound)?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(doc))
}

/// An absolute https URL of a DNS host, at most [`URL_MAX`] characters, as
/// [`url_shape`] spells it (the pattern of the OpenAPI description).
fn legal_url(raw: &str) -> ApiResult<String> {
    let bad = || ApiError::bad_request("legal_document_url must be an https URL");
    if raw.len() > URL_MAX || !url_shape(raw) {
        return Err(bad());
    }
    let u = reqwest::Url::parse(raw).map_err(|_| bad())?;
    if u.scheme() != "https" || u.host_str().is_none_or(str::is_empty) {
        return Err(bad());
    }
    Ok(u.to_string())
}

/// `https://` then a host of dot-separated labels (letters and digits, single
/// hyphens inside; the last label starts with a letter, so that it is never
/// read as an IP address), an optional port of 1 to 4 digits, and an optional
/// path, query or fragment of URL characters (`[A-Za-z0-9._~!$&'()*+,;=:@%/?#-]`).
/// The OpenAPI pattern of `legal_document_url` is this rule, so the URL parser
/// sees only what the description admits.
fn url_shape(raw: &str) -> bool {
    let Some(rest) = raw.strip_prefix("https://") else {
        return false;
    };
    let end = rest.find([':', '/', '?', '#']).unwrap_or(rest.len());
    let (host, rest) = rest.split_at(end);
    let label = |l: &str| {
        !l.is_empty()
            && l.split('-')
                .all(|run| !run.is_empty() && run.bytes().all(|b| b.is_ascii_alphanumeric()))
    };
    let labels: Vec<&str> = host.split('.').collect();
    if !labels.iter().all(|l| label(l))
        || !labels
            .last()
            .is_some_and(|l| l.starts_with(|c: char| c.is_ascii_alphabetic()))
    {
        return false;
    }
    let rest = match rest.strip_prefix(':') {
        Some(port) => {
            let digits = port.find(['/', '?', '#']).unwrap_or(port.len());
            if !(1..=4).contains(&digits) || !port[..digits].bytes().all(|b| b.is_ascii_digit()) {
                return false;
            }
            &port[digits..]
        }
        None => rest,
    };
    rest.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._~!$&'()*+,;=:@%/?#-".contains(&b))
}

#[derive(Deserialize)]
pub struct ListQuery {
    kind: Option<String>,
    status: Option<String>,
    limit: Option<i64>,
    cursor: Option<String>,
}

/// Documents of `owner`, newest first, with the `kind` and `status` filters
/// and cursor pages; `base` is the list's path (for the next page's link).
pub async fn page_of(
    state: &AppState,
    owner: Owner,
    q: &ListQuery,
    base: &str,
) -> ApiResult<HttpResponse> {
    let kind = Kind::param("kind", q.kind.as_deref())?;
    let status = InvoiceStatus::param("status", q.status.as_deref())?;
    let (limit, after) = super::page_of(state, q.limit, q.cursor.as_deref())?;
    let rows = store::invoices(&state.pool, owner, kind, status, after, limit + 1).await?;
    let filters: String = [
        ("kind", kind.map(Kind::as_str)),
        ("status", status.map(InvoiceStatus::as_str)),
    ]
    .iter()
    .filter_map(|(k, v)| v.map(|v| format!("&{k}={v}")))
    .collect();
    Ok(page::respond(
        rows,
        limit,
        |i| (i.issued_at, i.id.as_uuid()),
        |c| format!("{base}?limit={limit}{filters}&cursor={c}"),
    ))
}

/// GET /v1/organizations/{id}/invoices?kind=&status=&limit=&cursor= (finance).
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    q: web::Query<ListQuery>,
) -> ApiResult<HttpResponse> {
    let org = path.into_inner();
    super::readable(&state, &caller, org).await?;
    page_of(
        &state,
        Owner::Org(org),
        &q,
        &format!("/v1/organizations/{org}/invoices"),
    )
    .await
}

#[derive(Serialize)]
struct Detail {
    #[serde(flatten)]
    invoice: Invoice,
    lines: Vec<super::model::InvoiceLine>,
}

/// The organization's document `id` (404 for another organization's).
async fn of_org(
    state: &AppState,
    caller: &Caller,
    org: OrgId,
    id: InvoiceId,
) -> ApiResult<(Invoice, Vec<super::model::InvoiceLine>)> {
    super::authorize_reader(caller, org)?;
    let doc = store::invoice(&mut *state.pool.acquire().await?, id, Some(org))
        .await?
        .ok_or(ApiError::NotFound)?;
    let lines = store::lines(&state.pool, id).await?;
    Ok((doc, lines))
}

/// GET /v1/organizations/{id}/invoices/{invoice_id} (finance): the document
/// with its lines.
#[tracing::instrument(skip_all)]
pub async fn detail(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(OrgId, InvoiceId)>,
) -> ApiResult<HttpResponse> {
    let (org, id) = path.into_inner();
    let (invoice, lines) = of_org(&state, &caller, org, id).await?;
    Ok(HttpResponse::Ok().json(Detail { invoice, lines }))
}

/// GET /v1/organizations/{id}/invoices/{invoice_id}/html (finance): a
/// print-friendly preview (the legal document is `legal_document_url`).
#[tracing::instrument(skip_all)]
pub async fn html(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(OrgId, InvoiceId)>,
) -> ApiResult<HttpResponse> {
    let (org, id) = path.into_inner();
    let (invoice, lines) = of_org(&state, &caller, org, id).await?;
    let parties = store::parties(&state.pool, id).await?;
    Ok(HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header((
            "content-security-policy",
            "default-src 'none'; style-src 'unsafe-inline'",
        ))
        .insert_header(("x-content-type-options", "nosniff"))
        .body(super::html::render(&invoice, &lines, &parties)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legal_document_url_is_an_https_url_of_a_dns_host() {
        for good in [
            "https://e-fatura.example/a.pdf",
            "https://A.b2.Example:8443/x/y?z=1&w=%20#top",
            "https://x",
            "https://1.2.3.a/",
        ] {
            assert!(url_shape(good), "{good}");
            assert!(legal_url(good).is_ok(), "{good}");
        }
        for bad in [
            "http://x.example/a.pdf",
            "https://",
            "https://t.x.z*",
            "https://1.2.3.4/",
            "https://a..b/",
            "https://-a.b/",
            "https://a--b.c/",
            "https://a.b:/",
            "https://a.b:12345/",
            "https://a.b/ c",
            "https://user@a.b/",
            "https://a.b/\\c",
            " https://a.b/",
            "https://a.b/\u{e9}",
        ] {
            assert!(!url_shape(bad), "{bad}");
            assert!(legal_url(bad).is_err(), "{bad}");
        }
    }
}
