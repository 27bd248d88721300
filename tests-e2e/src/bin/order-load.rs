//! Order load generator (scripts/bench-orders.sh runs it):
//!
//! `order-load <gateway base url> <bearer token> <org ids file> <orders>
//! <clients> [rate/s, 0 = as fast as possible] [sku id]`
//!
//! `clients` concurrent clients, each with a keep-alive connection of its
//! own, POST `/v1/servers` with `{"org_id", "sku_id", "hostname"}`: the
//! organizations of the file (one id a line) round robin, a hostname unique to
//! this run and order. The SKU is the seventh argument, else `ORDER_SKU`, else
//! `vps-small` (API-fulfilled in the demo catalog: every order gets a
//! provisioning job). Any answer but 201 stops the run with its status and
//! body (exit status 1). Prints one line: orders, seconds, orders/s, latency
//! p50/p99/max, and the wall-clock of the first and last answer (unix ms) so
//! that the caller can time what follows the orders.

use anyhow::Context;
use std::{
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

struct Plan {
    base: String,
    token: String,
    orgs: Vec<String>,
    sku: String,
    run: String,
    orders: usize,
    rate: f64,
    next: AtomicUsize,
    failed: AtomicBool,
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn unix_ms() -> i128 {
    time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000
}

/// One client: its own connection; takes the next order until none is left.
async fn client(plan: Arc<Plan>, started: Instant) -> anyhow::Result<Vec<f64>> {
    let http = service_kit::tls::http_client(&Default::default())?
        .pool_max_idle_per_host(1)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(60))
        .build()?;
    let url = format!("{}/v1/servers", plan.base.trim_end_matches('/'));
    let mut latencies = Vec::with_capacity(plan.orders / 8 + 1);
    loop {
        let i = plan.next.fetch_add(1, Ordering::Relaxed);
        if i >= plan.orders || plan.failed.load(Ordering::Relaxed) {
            return Ok(latencies);
        }
        if plan.rate > 0.0 {
            let due = started + Duration::from_secs_f64(i as f64 / plan.rate);
            tokio::time::sleep_until(due.into()).await;
        }
        let body = serde_json::json!({
            "org_id": plan.orgs[i % plan.orgs.len()],
            "sku_id": plan.sku,
            "hostname": format!("ol-{}-{i}", plan.run),
        });
        let t = Instant::now();
        let resp = http
            .post(&url)
            .bearer_auth(&plan.token)
            .json(&body)
            .send()
            .await
            .with_context(|| format!("order {i}: no answer"))?;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        latencies.push(t.elapsed().as_secs_f64() * 1000.0);
        if status.as_u16() != 201 {
            plan.failed.store(true, Ordering::Relaxed);
            anyhow::bail!("order {i}: {status} (want 201 Created): {text}");
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        anyhow::bail!(
            "usage: order-load <gateway base url> <bearer token> <org ids file> <orders> <clients> \
             [rate/s, 0 = as fast as possible] [sku id, else $ORDER_SKU, else vps-small]"
        );
    }
    let orgs: Vec<String> = std::fs::read_to_string(&args[3])
        .with_context(|| format!("reading {}", args[3]))?
        .lines()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect();
    anyhow::ensure!(!orgs.is_empty(), "no organization ids in {}", args[3]);
    let orders: usize = args[4].parse().context("orders")?;
    let clients: usize = args[5].parse().context("clients")?;
    anyhow::ensure!(clients > 0, "clients must be at least 1");
    let rate: f64 = args.get(6).map_or(Ok(0.0), |r| r.parse()).context("rate")?;
    let sku = args
        .get(7)
        .cloned()
        .or_else(|| std::env::var("ORDER_SKU").ok())
        .unwrap_or_else(|| "vps-small".to_owned());
    // Hostnames unique to this run: a later run on the same organizations
    // never meets the per-organization uniqueness of an earlier one.
    let run = uuid::Uuid::new_v4().simple().to_string()[..10].to_owned();
    let plan = Arc::new(Plan {
        base: args[1].clone(),
        token: args[2].clone(),
        orgs,
        sku,
        run,
        orders,
        rate,
        next: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
    });
    let first_ms = unix_ms();
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| tokio::spawn(client(plan.clone(), started)))
        .collect();
    let mut latencies = Vec::with_capacity(orders);
    let mut errors = Vec::new();
    for t in tasks {
        match t.await {
            Ok(Ok(l)) => latencies.extend(l),
            Ok(Err(e)) => errors.push(e),
            Err(e) => errors.push(anyhow::anyhow!("client task: {e}")),
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let last_ms = unix_ms();
    if let Some(e) = errors.into_iter().next() {
        return Err(e.context(format!(
            "order-load failed after {} answers",
            latencies.len()
        )));
    }
    latencies.sort_by(f64::total_cmp);
    println!(
        "orders {} clients {clients} seconds {secs:.3} orders/s {:.0} p50_ms {:.1} p99_ms {:.1} max_ms {:.1} first_unix_ms {first_ms} last_unix_ms {last_ms} run {}",
        latencies.len(),
        latencies.len() as f64 / secs,
        pct(&latencies, 0.50),
        pct(&latencies, 0.99),
        pct(&latencies, 1.0),
        plan.run,
    );
    Ok(())
}
