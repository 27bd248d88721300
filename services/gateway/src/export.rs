//! `GET /v1/auth/me/export` (a session only): a user's personal data in one
//! JSON object. The gateway asks each service of
//! [`service_kit::export::PARTS`] for its part on the user's behalf, at once,
//! and merges the objects. The export is whole or not at all: a part that
//! cannot be read makes the answer 503 (identity's own refusal, a 401 or
//! 403, is passed on as it is).

use crate::{cache::Resolved, overview::Upstreams};
use actix_web::{http::StatusCode, HttpResponse};
use hub_domain::CredentialKind;
use serde_json::{Map, Value};
use service_kit::{
    error::json_error,
    export::{PARTS, PATH},
};
use std::time::Duration;

/// The answer to `resolved` (any caller the gateway resolved).
pub async fn answer(
    gw: Upstreams<'_>,
    client: &reqwest::Client,
    resolved: &Resolved,
    ip: &str,
    request_id: &str,
    timeout: Duration,
) -> HttpResponse {
    if resolved.credential.kind != CredentialKind::Session {
        return json_error(
            StatusCode::UNAUTHORIZED,
            "this endpoint needs a session token; API keys and access tokens are not accepted",
        );
    }
    let asked = PARTS
        .iter()
        .map(|service| part(gw, client, service, resolved, ip, request_id, timeout));
    let mut merged = Map::new();
    for (service, answer) in PARTS.iter().zip(futures::future::join_all(asked).await) {
        match answer {
            Ok(Value::Object(o)) => {
                for (k, v) in o {
                    merged.entry(k).or_insert(v);
                }
            }
            Ok(_) => {
                tracing::warn!(service, "export: a part that is not an object");
                return unavailable();
            }
            // identity decides who may export; its refusal stands.
            Err(Some((status, body))) if *service == "identity" && status.is_client_error() => {
                return HttpResponse::build(status)
                    .content_type("application/json")
                    .body(body);
            }
            Err(_) => return unavailable(),
        }
    }
    HttpResponse::Ok()
        .content_type("application/json")
        .insert_header(("cache-control", "no-store"))
        .insert_header((
            "content-disposition",
            "attachment; filename=\"hub-export.json\"",
        ))
        .json(Value::Object(merged))
}

fn unavailable() -> HttpResponse {
    json_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "the export could not be gathered from every service; try again",
    )
}

/// `service`'s part, asked on behalf of the caller: Err(Some(status, body))
/// when it refused, Err(None) when it could not be asked or read.
async fn part(
    gw: Upstreams<'_>,
    client: &reqwest::Client,
    service: &str,
    caller: &Resolved,
    ip: &str,
    request_id: &str,
    timeout: Duration,
) -> Result<Value, Option<(StatusCode, bytes::Bytes)>> {
    let Some(sent) = gw.get(client, service, PATH, caller, ip, request_id, timeout) else {
        tracing::warn!(service, "export: service not deployed");
        return Err(None);
    };
    let resp = sent.await.map_err(|e| {
        tracing::warn!(service, error = %e, "export: service unreachable");
        None
    })?;
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let body = resp.bytes().await.map_err(|e| {
        tracing::warn!(service, error = %e, "export: unreadable part");
        None
    })?;
    if !status.is_success() {
        tracing::warn!(service, status = status.as_u16(), "export: service refused");
        return Err(Some((status, body)));
    }
    serde_json::from_slice(&body).map_err(|e| {
        tracing::warn!(service, error = %e, "export: unreadable part");
        None
    })
}
