//! Calls to another service, signed with this service's own caller key (the
//! receiver accepts it only on the routes it lists for this service).

use crate::{
    assertion::{Caller, Minter, RequestFacts, ASSERTION_HEADER, SIGNATURE_HEADER},
    http::REQUEST_ID_HEADER,
    settings::PeerSettings,
    tls::TlsSettings,
};
use std::time::Duration;
use uuid::Uuid;

#[derive(Clone)]
pub struct Peer {
    base: String,
    minter: Option<Minter>,
    timeout: Duration,
    http: reqwest::Client,
}

impl Peer {
    /// `me` calls `peer` as configured by `s`, over TLS when its URL is
    /// `https://` (trusting the platform's roots and `tls.extra_ca_file`).
    pub fn new(me: &str, peer: &str, s: &PeerSettings, tls: &TlsSettings) -> anyhow::Result<Peer> {
        Ok(Peer {
            base: s.url.trim_end_matches('/').to_owned(),
            minter: s
                .key
                .as_ref()
                .map(|k| Minter::new(me, peer, k))
                .transpose()?,
            timeout: Duration::from_millis(s.timeout_ms),
            http: crate::tls::http_client(tls)?
                .connect_timeout(Duration::from_secs(2))
                .build()?,
        })
    }

    /// Send `method path` with a JSON `body` on behalf of `caller`.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        caller: &Caller,
        body: &serde_json::Value,
    ) -> anyhow::Result<reqwest::Response> {
        self.send(method, path, Some(caller), Some(body)).await
    }

    /// Send `method path` as this service itself (no user identity), with an
    /// optional JSON body.
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        caller: Option<&Caller>,
        body: Option<&serde_json::Value>,
    ) -> anyhow::Result<reqwest::Response> {
        self.request(method, path, caller, body, None).await
    }

    /// [`send`](Self::send) with an `Idempotency-Key` (bound in the assertion
    /// like everything else), for calls a retry must not repeat.
    pub async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        caller: Option<&Caller>,
        body: Option<&serde_json::Value>,
        idempotency_key: Option<&str>,
    ) -> anyhow::Result<reqwest::Response> {
        let minter = self
            .minter
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("no caller key configured for {}", self.base))?;
        let body = match body {
            Some(b) => serde_json::to_vec(b)?,
            None => Vec::new(),
        };
        // The request this call serves goes on under its id and in its trace.
        let request_id =
            crate::http::current_request_id().unwrap_or_else(|| Uuid::new_v4().to_string());
        let (a, sig) = minter.sign(
            caller.map(|c| c.identity.clone()),
            caller.map(|c| c.credential),
            caller.is_some_and(|c| c.memberships_truncated),
            &RequestFacts {
                method: method.as_str(),
                path_and_query: path,
                body: &body,
                idempotency_key,
                ip: caller.map_or("", |c| c.ip.as_str()),
                request_id: &request_id,
                deadline_ms: None,
            },
        );
        let mut rb = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header(ASSERTION_HEADER, a)
            .header(SIGNATURE_HEADER, sig)
            .header(REQUEST_ID_HEADER, request_id)
            .headers(crate::telemetry::trace_headers())
            .timeout(self.timeout);
        if let Some(k) = idempotency_key {
            rb = rb.header(crate::assertion::IDEMPOTENCY_HEADER, k);
        }
        if !body.is_empty() {
            rb = rb.header("content-type", "application/json").body(body);
        }
        Ok(rb.send().await?)
    }
}
