//! Webhook benchmark tools (scripts/bench-webhooks.sh runs them):
//!
//! `webhook-bench receive <port> <secrets file> [--standard-only]`: a
//! receiver answering 200 at once. For each endpoint (`/r/<n>`, secret on line
//! n of the file) it checks both signatures, counts deliveries, duplicates
//! (same endpoint and message id) and bad signatures, and the latency from the
//! event's `created_at` to arrival. `GET /stats` returns the counts (`GET /count` only the deliveries); `POST
//! /reset` clears them. With `--standard-only` (a server other than ours, such
//! as Svix: scripts/lib/bench-svix.sh) only the Standard Webhooks signature is
//! checked, under `webhook-id`/`webhook-timestamp`/`webhook-signature` or, when
//! those are absent, Svix's default `svix-id`/`svix-timestamp`/`svix-signature`.
//!
//! `webhook-bench publish <nats url> <subject prefix> <org ids file> <events>
//! <rate/s, 0 = as fast as possible>`: commits product events for those
//! organizations (round robin) to the PRODUCT stream, as server-product's
//! outbox would, and prints how long it took.

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

#[derive(Default)]
struct Stats {
    delivered: u64,
    duplicates: u64,
    bad_signatures: u64,
    seen: HashSet<(usize, String)>,
    latencies_ms: Vec<f64>,
    first: Option<Instant>,
    last: Option<Instant>,
    last_unix_ms: i128,
}

struct Recv {
    secrets: Vec<String>,
    /// Check the Standard Webhooks signature only (no `x-service-sig`).
    standard_only: bool,
    stats: Mutex<Stats>,
}

async fn receive(
    req: HttpRequest,
    body: web::Bytes,
    path: web::Path<usize>,
    r: web::Data<Arc<Recv>>,
) -> HttpResponse {
    let n = path.into_inner();
    let h = |k: &str| {
        req.headers()
            .get(k)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let secret = r.secrets.get(n).cloned().unwrap_or_default();
    let now = time::OffsetDateTime::now_utc();
    // Svix sends the Standard Webhooks headers under `svix-` unless its
    // `whitelabel_headers` is set; ours always under `webhook-`.
    let prefix = if r.standard_only && !req.headers().contains_key("webhook-signature") {
        "svix-"
    } else {
        "webhook-"
    };
    let id = h(&format!("{prefix}id"));
    let standard = hub_webhooks::verify_standard(
        &[&secret],
        &id,
        &h(&format!("{prefix}timestamp")),
        &body,
        &h(&format!("{prefix}signature")),
        now.unix_timestamp(),
        300,
    )
    .is_ok();
    let ok = standard
        && (r.standard_only
            || hub_webhooks::verify_service_signature(&secret, &body, &h("x-service-sig")));
    let created = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| {
            time::OffsetDateTime::parse(
                v["created_at"].as_str()?,
                &time::format_description::well_known::Rfc3339,
            )
            .ok()
        });
    let mut s = r
        .stats
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let t = Instant::now();
    s.first.get_or_insert(t);
    s.last = Some(t);
    s.last_unix_ms = now.unix_timestamp_nanos() / 1_000_000;
    if !ok {
        s.bad_signatures += 1;
    }
    if s.seen.insert((n, id)) {
        s.delivered += 1;
        if let Some(c) = created {
            s.latencies_ms.push((now - c).as_seconds_f64() * 1000.0);
        }
    } else {
        s.duplicates += 1;
    }
    HttpResponse::Ok().finish()
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn stats(r: web::Data<Arc<Recv>>) -> HttpResponse {
    let s = r
        .stats
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut l = s.latencies_ms.clone();
    l.sort_by(f64::total_cmp);
    let span = match (s.first, s.last) {
        (Some(a), Some(b)) => (b - a).as_secs_f64(),
        _ => 0.0,
    };
    HttpResponse::Ok().json(serde_json::json!({
        "delivered": s.delivered, "duplicates": s.duplicates, "bad_signatures": s.bad_signatures,
        "p50_ms": pct(&l, 0.50), "p99_ms": pct(&l, 0.99), "max_ms": pct(&l, 1.0), "span_secs": span,
        "last_unix_ms": s.last_unix_ms as i64,
    }))
}

/// Deliveries received so far, as plain text: what the benchmark polls
/// (`/stats` sorts every latency, too dear to ask ten times a second).
async fn count(r: web::Data<Arc<Recv>>) -> HttpResponse {
    let n = r
        .stats
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .delivered;
    HttpResponse::Ok().body(n.to_string())
}

async fn reset(r: web::Data<Arc<Recv>>) -> HttpResponse {
    *r.stats
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Stats::default();
    HttpResponse::Ok().finish()
}

async fn publish(
    nats: &str,
    prefix: &str,
    orgs_file: &str,
    events: usize,
    rate: u64,
) -> anyhow::Result<()> {
    let orgs: Vec<String> = std::fs::read_to_string(orgs_file)?
        .lines()
        .map(str::to_owned)
        .filter(|l| !l.is_empty())
        .collect();
    anyhow::ensure!(!orgs.is_empty(), "no organizations");
    let js = async_nats::jetstream::new(async_nats::connect(nats).await?);
    let started = Instant::now();
    let mut acks = Vec::with_capacity(1024);
    for i in 0..events {
        if rate > 0 {
            let due = started + Duration::from_secs_f64(i as f64 / rate as f64);
            tokio::time::sleep_until(due.into()).await;
        }
        let id = uuid::Uuid::now_v7();
        let org = &orgs[i % orgs.len()];
        let body = serde_json::json!({"id": id, "type": "server.active",
            "created_at": time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339)?,
            "org_id": org, "data": {"id": uuid::Uuid::new_v4(), "org_id": org, "hostname": format!("bench-{i}"), "status": "active"}});
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", id.to_string().as_str());
        acks.push(
            js.publish_with_headers(
                format!("{prefix}product.v1.server.active"),
                headers,
                body.to_string().into(),
            )
            .await?,
        );
        if acks.len() >= 512 {
            for a in acks.drain(..) {
                a.await?;
            }
        }
    }
    for a in acks {
        a.await?;
    }
    println!(
        "published {events} events in {:.3} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("receive") => {
            let port: u16 = args.get(2).map_or(Ok(9900), |p| p.parse())?;
            let secrets: Vec<String> = std::fs::read_to_string(args.get(3).map_or("/tmp/secrets", String::as_str))?
                .lines().map(str::to_owned).collect();
            let standard_only = args.iter().skip(4).any(|a| a == "--standard-only");
            let r = web::Data::new(Arc::new(Recv { secrets, standard_only, stats: Mutex::default() }));
            HttpServer::new(move || {
                App::new()
                    .app_data(r.clone())
                    .route("/r/{n}", web::post().to(receive))
                    .route("/stats", web::get().to(stats))
                    .route("/count", web::get().to(count))
                    .route("/reset", web::post().to(reset))
            })
            .workers(1)
            .bind(("127.0.0.1", port))?
            .run()
            .await?;
            Ok(())
        }
        Some("publish") => {
            let a = |i: usize| args.get(i).cloned().unwrap_or_default();
            publish(&a(2), &a(3), &a(4), a(5).parse()?, a(6).parse()?).await
        }
        _ => anyhow::bail!("usage: webhook-bench receive <port> <secrets> [--standard-only] | publish <nats> <prefix> <orgs> <events> <rate>"),
    }
}
