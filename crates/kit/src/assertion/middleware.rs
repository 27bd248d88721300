//! The middleware every service runs: the assertion checked, the body bound.

use crate::{error::json_error, ApiError};
use actix_web::{
    body::{EitherBody, MessageBody},
    dev::{Payload, ServiceRequest, ServiceResponse},
    http::StatusCode,
    middleware::Next,
    web, HttpMessage,
};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use std::sync::Arc;

use super::claims::{
    now_unix, Assertion, RequestFacts, VerifyError, ASSERTION_HEADER, GATEWAY, IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
};
use super::verify::Verifier;

/// Paths served without an assertion: the probes only (metrics have a
/// listener of their own).
fn exempt(path: &str) -> bool {
    path == "/healthz" || path == "/readyz"
}

/// The largest body the assertion middleware reads (the service's JSON limit).
#[derive(Clone, Copy)]
pub struct BodyLimit(pub usize);

async fn read_body(payload: Payload, limit: usize) -> Result<Bytes, ApiError> {
    let mut payload = payload;
    let mut buf = BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|_| ApiError::bad_request("unreadable request body"))?;
        if buf.len() + chunk.len() > limit {
            return Err(ApiError::PayloadTooLarge);
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

/// Middleware: verify the assertion of every request (but the probes) and put
/// it in the request extensions for the extractors below. The body is read
/// here (bounded by [`BodyLimit`]) to check its digest, then handed on.
pub async fn require_assertion(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    // Before anything reads the path: one spelling, so that what actix routes
    // on is what the assertion names and what the route lists match.
    if let Err(e) = crate::path::check(req.path()) {
        let resp = json_error(StatusCode::BAD_REQUEST, e.message());
        return Ok(req.into_response(resp).map_into_right_body());
    }
    if exempt(req.path()) {
        return Ok(next.call(req).await?.map_into_left_body());
    }
    let limit = req
        .app_data::<web::Data<BodyLimit>>()
        .map_or(1 << 20, |l| l.0);
    let body = match read_body(req.take_payload(), limit).await {
        Ok(b) => b,
        Err(e) => {
            let resp = actix_web::ResponseError::error_response(&e);
            return Ok(req.into_response(resp).map_into_right_body());
        }
    };
    let verdict = match req.app_data::<web::Data<Verifier>>() {
        None => Err(VerifyError::Missing),
        Some(verifier) => {
            let h = req.headers();
            let idem = match h.get(IDEMPOTENCY_HEADER).map(|v| v.to_str()) {
                None => Ok(None),
                Some(Ok(v)) => Ok(Some(v)),
                Some(Err(_)) => Err(VerifyError::WrongTarget),
            };
            let path_and_query = req
                .uri()
                .path_and_query()
                .map_or(req.path(), |pq| pq.as_str());
            match (
                h.get(ASSERTION_HEADER).and_then(|v| v.to_str().ok()),
                h.get(SIGNATURE_HEADER).and_then(|v| v.to_str().ok()),
                idem,
            ) {
                (Some(p), Some(s), Ok(idempotency_key)) => verifier.verify(
                    p,
                    s,
                    &RequestFacts {
                        method: req.method().as_str(),
                        path_and_query,
                        body: &body,
                        idempotency_key,
                        ip: "",
                        request_id: "",
                        deadline_ms: None,
                    },
                    now_unix(),
                ),
                (_, _, Err(e)) => Err(e),
                _ => Err(VerifyError::Missing),
            }
        }
    };
    match verdict {
        Ok(a) => {
            req.extensions_mut().insert(Arc::new(a));
            req.set_payload(Payload::from(body));
            Ok(next.call(req).await?.map_into_left_body())
        }
        Err(e) => {
            tracing::warn!(
                reason = e.message(),
                path = req.path(),
                "refused request without a valid assertion"
            );
            let resp = if e == VerifyError::Busy {
                let mut r = json_error(StatusCode::SERVICE_UNAVAILABLE, e.message());
                r.headers_mut().insert(
                    actix_web::http::header::RETRY_AFTER,
                    actix_web::http::header::HeaderValue::from(crate::outage::RETRY_AFTER_SECS),
                );
                r
            } else {
                json_error(StatusCode::UNAUTHORIZED, e.message())
            };
            Ok(req.into_response(resp).map_into_right_body())
        }
    }
}

/// Serve `routes` under `/internal`, for calling services only. The scope's
/// own middleware refuses the gateway's assertions on whatever request actix
/// routed into it, so no spelling of a path reaches an internal handler with
/// the gateway's key (the verifier's check on the path is the first line).
pub fn internal(cfg: &mut web::ServiceConfig, routes: impl FnOnce(&mut web::ServiceConfig)) {
    cfg.service(
        web::scope("/internal")
            .wrap(actix_web::middleware::from_fn(peers_only))
            .configure(routes),
    );
}

async fn peers_only(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let issuer = req
        .extensions()
        .get::<Arc<Assertion>>()
        .map(|a| a.iss.clone());
    match issuer {
        Some(iss) if iss != GATEWAY => Ok(next.call(req).await?.map_into_left_body()),
        _ => {
            tracing::warn!(
                path = req.path(),
                "refused an internal route to the gateway's assertion"
            );
            let resp = json_error(
                StatusCode::UNAUTHORIZED,
                VerifyError::RouteNotAllowed.message(),
            );
            Ok(req.into_response(resp).map_into_right_body())
        }
    }
}
