//! `Server-Timing` (W3C) on every answer: how long the request waited on the
//! hub's API (`api`: the wall time during which at least one call was in
//! flight) and the rest of the console's time handling it (`console`). The
//! browser's developer tools show both; `scripts/bench-console.sh` reads
//! them to tell what the console adds from what the API takes.

use actix_web::{
    body::MessageBody,
    dev::{ServiceRequest, ServiceResponse},
    http::header::{HeaderName, HeaderValue},
    middleware::Next,
};
use std::{cell::RefCell, time::Duration};
// Tokio's clock: the same as the system's, and one tests can pause.
use tokio::time::Instant;

tokio::task_local! {
    static SPENT: RefCell<Spent>;
}

#[derive(Default)]
struct Spent {
    in_flight: u32,
    since: Option<Instant>,
    api: Duration,
}

/// One API call in flight, from its making until it is dropped. Outside a
/// timed request (a background task) it counts nothing.
pub struct ApiCall(bool);

/// Count the API's time from now until the returned guard is dropped.
pub fn api_call() -> ApiCall {
    ApiCall(
        SPENT
            .try_with(|s| {
                let mut s = s.borrow_mut();
                if s.in_flight == 0 {
                    s.since = Some(Instant::now());
                }
                s.in_flight += 1;
            })
            .is_ok(),
    )
}

impl Drop for ApiCall {
    fn drop(&mut self) {
        if !self.0 {
            return;
        }
        let _ = SPENT.try_with(|s| {
            let mut s = s.borrow_mut();
            s.in_flight -= 1;
            if s.in_flight == 0 {
                if let Some(since) = s.since.take() {
                    s.api += since.elapsed();
                }
            }
        });
    }
}

static SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");

/// The middleware: times the request and writes `Server-Timing`.
pub async fn server_timing(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let started = Instant::now();
    let (res, api) = SPENT
        .scope(RefCell::new(Spent::default()), async {
            let res = next.call(req).await;
            (res, SPENT.with(|s| s.borrow().api))
        })
        .await;
    let mut res = res?;
    let own = started.elapsed().saturating_sub(api);
    let value = header_value(api, own);
    if let Ok(v) = HeaderValue::from_str(&value) {
        res.headers_mut().insert(SERVER_TIMING.clone(), v);
    }
    Ok(res)
}

fn header_value(api: Duration, own: Duration) -> String {
    format!(
        "api;dur={:.3};desc=\"hub API\", console;dur={:.3}",
        api.as_secs_f64() * 1000.0,
        own.as_secs_f64() * 1000.0
    )
}

/// The durations (ms) a `Server-Timing` value names: `(api, console)`.
pub fn parse(value: &str) -> Option<(f64, f64)> {
    let dur = |name: &str| {
        value.split(',').find_map(|m| {
            let mut parts = m.trim().split(';');
            (parts.next()? == name).then_some(())?;
            parts.find_map(|p| p.trim().strip_prefix("dur=")?.parse::<f64>().ok())
        })
    };
    Some((dur("api")?, dur("console")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_reads_back() {
        let v = header_value(Duration::from_micros(4_250), Duration::from_micros(310));
        assert_eq!(v, "api;dur=4.250;desc=\"hub API\", console;dur=0.310");
        assert_eq!(parse(&v), Some((4.25, 0.31)));
        assert_eq!(parse("console;dur=1"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn overlapping_calls_count_once_and_outside_counts_nothing() {
        let outside = api_call();
        assert!(!outside.0);
        let api = SPENT
            .scope(RefCell::new(Spent::default()), async {
                let a = api_call();
                let b = api_call();
                tokio::time::sleep(Duration::from_millis(20)).await;
                drop(a);
                tokio::time::sleep(Duration::from_millis(20)).await;
                drop(b);
                tokio::time::sleep(Duration::from_millis(30)).await;
                SPENT.with(|s| s.borrow().api)
            })
            .await;
        // Both calls' span once (40 ms), not their sum (60) nor the time
        // after them (70 in all). The clock is paused: it moves only by the
        // sleeps.
        assert_eq!(api, Duration::from_millis(40));
    }
}
