//! One error type for every service: client errors as `{"error": "..."}` with a
//! stable message, anything unexpected logged in full and answered with an
//! opaque 500. Outages (Postgres or NATS cannot be reached: see
//! [`crate::outage`]) answer 503 `{"error": "service temporarily unavailable"}`
//! with `Retry-After`, logged once per cause and interval; every 503 carries
//! `Retry-After: 5`.
//!
//! Every unexpected error carries the step it came from: the conversions
//! behind `?` are `#[track_caller]`, so a `sqlx::Error` or `anyhow::Error`
//! that becomes a 500 is logged as `at services/…/routes/x.rs:42: …` (the
//! line of the `?` in the handler or store), once, when the response is made.

use actix_web::{http::StatusCode, HttpResponse, ResponseError};
use serde::Serialize;
use std::fmt;

use crate::outage::{self, Outage, RETRY_AFTER_SECS, UNAVAILABLE};

pub type ApiResult<T> = Result<T, ApiError>;

#[derive(Debug)]
pub enum ApiError {
    /// 400: the input failed validation; the message says which field and why.
    BadRequest(String),
    /// 401: no usable credential.
    Unauthorized(String),
    /// 402: a prepaid balance (AI tokens, a personal token limit) is exhausted.
    PaymentRequired(String),
    /// 403: a role or the staff flag is missing; the message names it.
    Forbidden(String),
    /// 404: not found, or not the caller's (never says which).
    NotFound,
    /// 409: the state does not allow this transition.
    Conflict(String),
    /// 413: the body is larger than the configured limit.
    PayloadTooLarge,
    /// 415: the body is not JSON.
    UnsupportedMediaType,
    /// 422: understood but refused by a business rule.
    Unprocessable(String),
    /// 429: rate limited; the same body whichever limit tripped.
    TooManyRequests,
    /// 429 with a message saying which quota and when it frees up.
    QuotaExceeded(String),
    /// 502: an upstream answered with garbage.
    BadGateway(String),
    /// 503: a dependency is unreachable; fail closed.
    Unavailable(String),
    /// 503: Postgres or NATS cannot be reached right now (see
    /// [`crate::outage::classify`]); logged throttled, answered opaquely.
    Outage(Outage),
    /// 500: logged with its whole chain, answered opaquely.
    Internal(anyhow::Error),
}

#[derive(Serialize)]
struct Body<'a> {
    error: &'a str,
}

impl ApiError {
    pub fn bad_request(msg: impl Into<String>) -> Self {
        ApiError::BadRequest(msg.into())
    }
    pub fn unauthorized(msg: impl Into<String>) -> Self {
        ApiError::Unauthorized(msg.into())
    }
    pub fn forbidden(msg: impl Into<String>) -> Self {
        ApiError::Forbidden(msg.into())
    }
    pub fn conflict(msg: impl Into<String>) -> Self {
        ApiError::Conflict(msg.into())
    }

    fn message(&self) -> &str {
        match self {
            ApiError::BadRequest(m)
            | ApiError::Unauthorized(m)
            | ApiError::Forbidden(m)
            | ApiError::PaymentRequired(m)
            | ApiError::Conflict(m)
            | ApiError::Unprocessable(m)
            | ApiError::BadGateway(m)
            | ApiError::Unavailable(m)
            | ApiError::QuotaExceeded(m) => m,
            ApiError::NotFound => "not found",
            ApiError::PayloadTooLarge => "request body too large",
            ApiError::UnsupportedMediaType => "content type must be application/json",
            ApiError::TooManyRequests => "too many requests, try again later",
            ApiError::Outage(_) => UNAVAILABLE,
            ApiError::Internal(_) => "internal error",
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Internal(e) => write!(f, "internal error: {e:#}"),
            ApiError::Outage(o) => write!(f, "{UNAVAILABLE} ({}: {})", o.cause, o.detail),
            other => f.write_str(other.message()),
        }
    }
}

impl std::error::Error for ApiError {}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::PaymentRequired(_) => StatusCode::PAYMENT_REQUIRED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::TooManyRequests | ApiError::QuotaExceeded(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::BadGateway(_) => StatusCode::BAD_GATEWAY,
            ApiError::Unavailable(_) | ApiError::Outage(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        match self {
            ApiError::Internal(e) => tracing::error!(error = ?e, "request failed"),
            ApiError::Outage(o) => outage::report(o),
            _ => {}
        }
        json_error(self.status_code(), self.message())
    }
}

/// Where an unexpected error surfaced, as the first line of its chain.
#[track_caller]
fn located(e: anyhow::Error) -> anyhow::Error {
    let at = std::panic::Location::caller();
    e.context(format!("at {}:{}", at.file(), at.line()))
}

impl ApiError {
    /// A 500 for an error the caller found itself (not through `?`), with the
    /// caller's location.
    #[track_caller]
    pub fn internal(e: impl Into<anyhow::Error>) -> Self {
        ApiError::Internal(located(e.into()))
    }
}

impl From<anyhow::Error> for ApiError {
    /// An outage anywhere in the chain is a 503; anything else a 500 that
    /// names the line of the `?` that raised it.
    #[track_caller]
    fn from(e: anyhow::Error) -> Self {
        match outage::classify(&e) {
            Some(o) => ApiError::Outage(o),
            None => ApiError::Internal(located(e)),
        }
    }
}

impl From<sqlx::Error> for ApiError {
    #[track_caller]
    fn from(e: sqlx::Error) -> Self {
        match outage::classify_sqlx(&e) {
            Some(o) => ApiError::Outage(o),
            None => ApiError::Internal(located(anyhow::Error::new(e))),
        }
    }
}

/// Client errors for named constraints, in one place: storage code maps a
/// violation of a unique, check, exclusion or foreign-key constraint it
/// expects to the answer the client gets, and every other database error
/// becomes an `ApiError` exactly as `?` would make it (an outage a 503,
/// anything else a 500 naming the caller's line).
///
/// ```ignore
/// insert(...).await.on_constraint("servers_hostname_per_org", || {
///     ApiError::conflict("a server with this hostname already exists")
/// })?;
/// ```
pub trait OnConstraint<T> {
    /// A violation of `name` becomes `f()`.
    fn on_constraint(self, name: &str, f: impl FnOnce() -> ApiError) -> ApiResult<T>;
    /// A violation of any constraint `table` knows becomes its answer.
    fn on_constraints(self, table: impl FnOnce(&str) -> Option<ApiError>) -> ApiResult<T>;
}

impl<T> OnConstraint<T> for Result<T, sqlx::Error> {
    #[track_caller]
    fn on_constraint(self, name: &str, f: impl FnOnce() -> ApiError) -> ApiResult<T> {
        self.on_constraints(|c| (c == name).then(f))
    }

    #[track_caller]
    fn on_constraints(self, table: impl FnOnce(&str) -> Option<ApiError>) -> ApiResult<T> {
        match self {
            Ok(v) => Ok(v),
            Err(e) => {
                let mapped = e
                    .as_database_error()
                    .and_then(|d| d.constraint())
                    .and_then(table);
                // Not a closure: `from` must see this function's caller.
                Err(match mapped {
                    Some(client) => client,
                    None => ApiError::from(e),
                })
            }
        }
    }
}

/// A JSON `{error}` response with any status, for places that build responses
/// by hand (middleware, the gateway). A 503 carries `Retry-After`.
pub fn json_error(status: StatusCode, message: &str) -> HttpResponse {
    let mut b = HttpResponse::build(status);
    if status == StatusCode::SERVICE_UNAVAILABLE {
        b.insert_header((
            actix_web::http::header::RETRY_AFTER,
            RETRY_AFTER_SECS.to_string(),
        ));
    }
    b.json(Body { error: message })
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::body::MessageBody;

    fn body_of(e: ApiError) -> (u16, String) {
        let resp = e.error_response();
        let status = resp.status().as_u16();
        let bytes = resp.into_body().try_into_bytes().unwrap_or_default();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    #[test]
    fn outages_are_503_with_retry_after_and_bugs_stay_500() {
        for e in [
            ApiError::from(sqlx::Error::PoolTimedOut),
            ApiError::from(sqlx::Error::Io(std::io::Error::from(
                std::io::ErrorKind::BrokenPipe,
            ))),
            ApiError::from(anyhow::Error::new(sqlx::Error::PoolClosed).context("saving")),
        ] {
            let resp = e.error_response();
            assert_eq!(resp.status().as_u16(), 503);
            assert_eq!(
                resp.headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok()),
                Some("5")
            );
            let bytes = resp.into_body().try_into_bytes().unwrap_or_default();
            assert_eq!(
                &bytes[..],
                br#"{"error":"service temporarily unavailable"}"#
            );
        }
        let (status, body) = body_of(ApiError::from(sqlx::Error::RowNotFound));
        assert_eq!(
            (status, body.as_str()),
            (500, r#"{"error":"internal error"}"#)
        );
        // Every 503, outage or not, says when to retry.
        let resp = ApiError::Unavailable("busy".into()).error_response();
        assert!(resp.headers().contains_key("retry-after"));
    }

    #[test]
    fn client_errors_carry_their_message() {
        assert_eq!(
            body_of(ApiError::bad_request("bio is too long")),
            (400, r#"{"error":"bio is too long"}"#.to_owned())
        );
        assert_eq!(
            body_of(ApiError::NotFound),
            (404, r#"{"error":"not found"}"#.to_owned())
        );
        assert_eq!(body_of(ApiError::TooManyRequests).0, 429);
    }

    /// A step failing through `?`, and the line of that `?` (kept on one line).
    #[rustfmt::skip]
    fn failing_step() -> (u32, ApiResult<()>) {
        let line = line!() + 1;
        let r = (|| -> ApiResult<()> { Err::<(), _>(sqlx::Error::RowNotFound)?; Ok(()) })();
        (line, r)
    }

    #[test]
    fn internal_errors_name_the_line_of_their_question_mark() {
        let (line, r) = failing_step();
        let Err(ApiError::Internal(e)) = r else {
            panic!("expected an internal error");
        };
        let chain = format!("{e:#}");
        assert!(
            chain.starts_with(&format!("at {}:{line}: ", file!())),
            "{chain}"
        );
        assert!(chain.contains("no rows returned"), "{chain}");
        let e = ApiError::from(anyhow::anyhow!("read-back lost"));
        let ApiError::Internal(e) = e else {
            panic!("expected an internal error")
        };
        assert!(format!("{e:#}").contains(&format!("{}:{}", file!(), line!() - 4)));
        let e = ApiError::internal(anyhow::anyhow!("impossible row"));
        assert!(e.to_string().contains(file!()), "{e}");
    }

    #[test]
    fn internal_errors_are_opaque() {
        let e = ApiError::from(anyhow::anyhow!("password=hunter2 in connection string"));
        let (status, body) = body_of(e);
        assert_eq!(status, 500);
        assert_eq!(body, r#"{"error":"internal error"}"#);
    }
}
