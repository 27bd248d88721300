//! The hub, as the console reaches it: the gateway's public API, with the
//! person's session token as the bearer, like any product.

use reqwest::Method;
use serde_json::Value;
use std::time::Duration;

pub struct Api {
    client: reqwest::Client,
    core: String,
    product: String,
}

/// What the gateway answered.
pub struct Answer {
    pub status: u16,
    pub body: Value,
    /// A list's `x-next-cursor`: there is more, from there.
    pub next: Option<String>,
}

impl Answer {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The `error` of an error answer.
    pub fn error(&self) -> &str {
        self.body.get("error").and_then(Value::as_str).unwrap_or("")
    }

    pub fn text(&self, key: &str) -> &str {
        self.body.get(key).and_then(Value::as_str).unwrap_or("")
    }
}

/// The gateway did not answer (down, timed out, not JSON).
#[derive(Debug)]
pub struct Down;

/// Which host of the gateway.
#[derive(Clone, Copy)]
pub enum Host {
    Core,
    Product,
}

impl Api {
    pub fn new(s: &crate::settings::Settings) -> anyhow::Result<Api> {
        let client = service_kit::tls::http_client(&s.tls)?
            .timeout(Duration::from_millis(s.console.timeout_ms))
            // A redirect is an answer to show, never one to follow.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Api {
            client,
            core: s.console.gateway_url.trim_end_matches('/').to_owned(),
            product: s
                .console
                .product_gateway_url
                .trim_end_matches('/')
                .to_owned(),
        })
    }

    /// A GET whose answer is not JSON (an invoice's HTML preview): status,
    /// content type and body, at most `limit` bytes.
    pub async fn fetch_raw(
        &self,
        path: &str,
        token: &str,
        forwarded_for: &str,
        limit: usize,
    ) -> Result<(u16, String, Vec<u8>), Down> {
        let req = self
            .client
            .get(format!("{}{path}", self.core))
            .bearer_auth(token)
            .header("x-forwarded-for", forwarded_for);
        // The API's time: from sending until the whole answer is in.
        let timed = crate::timing::api_call();
        let resp = req.send().await.map_err(|e| {
            tracing::warn!(error = %e.without_url(), "gateway call failed");
            Down
        })?;
        let status = resp.status().as_u16();
        let kind = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let bytes = resp.bytes().await.map_err(|_| Down)?;
        drop(timed);
        if bytes.len() > limit {
            return Err(Down);
        }
        Ok((status, kind, bytes.to_vec()))
    }

    /// One call: `token` as the bearer, the browser's address chain as
    /// `X-Forwarded-For` (the gateway's per-IP limits see the person, not
    /// the console), the request id carried on.
    pub async fn call(
        &self,
        host: Host,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
        forwarded_for: &str,
    ) -> Result<Answer, Down> {
        let base = match host {
            Host::Core => &self.core,
            Host::Product => &self.product,
        };
        let mut req = self
            .client
            .request(method, format!("{base}{path}"))
            .header("x-forwarded-for", forwarded_for);
        if let Some(id) = service_kit::http::current_request_id() {
            req = req.header("x-request-id", id);
        }
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        // The API's time: from sending until the whole answer is in (not
        // the reading of it, which is the console's).
        let timed = crate::timing::api_call();
        let resp = req.send().await.map_err(|e| {
            tracing::warn!(error = %e.without_url(), "gateway call failed");
            Down
        })?;
        let status = resp.status().as_u16();
        let next = resp
            .headers()
            .get("x-next-cursor")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let bytes = resp.bytes().await.map_err(|_| Down)?;
        drop(timed);
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).map_err(|_| {
                tracing::warn!(status, "gateway answered something other than JSON");
                Down
            })?
        };
        Ok(Answer { status, body, next })
    }
}
