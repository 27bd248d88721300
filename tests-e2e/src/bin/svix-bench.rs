//! Drives a Svix server (svix-server, Svix's open-source webhook server, given
//! by path to scripts/lib/bench-svix.sh) through its authenticated HTTP API,
//! so that the webhook benchmark can set its delivery throughput beside ours.
//! Nothing of Svix is built or linked here: this talks HTTP to a running one.
//!
//! `svix-bench setup <svix url> <auth token> <endpoints> <receiver base url>
//! <first index> <secrets file> [app name]`: creates an application with that many
//! endpoints pointing at `<receiver base>/r/<first index>`,
//! `<receiver base>/r/<first index + 1>`, ..., appends each endpoint's signing
//! secret to the secrets file (one a line, so line n is `/r/<n>`'s, as
//! `webhook-bench receive` reads it) and prints the application's id.
//!
//! `svix-bench send <svix url> <auth token> <app id> <messages> <clients>`:
//! creates that many messages (`POST /api/v1/app/{app}/msg/`, event type
//! `server.active`, a payload shaped like our product events) from `clients`
//! concurrent HTTP clients, each on its own keep-alive connection, and prints
//! how long it took and the API's request latency. Any answer other than 2xx
//! stops it with an error.

use anyhow::{bail, ensure, Context};
use std::{
    io::Write,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

/// POST or GET `path` with the token and return the JSON answer; anything
/// but 2xx is an error carrying the status and body.
async fn call(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> anyhow::Result<serde_json::Value> {
    let url = format!("{}{path}", base.trim_end_matches('/'));
    let req = match body {
        Some(b) => http.post(&url).json(b),
        None => http.get(&url),
    };
    let resp = req
        .bearer_auth(token)
        .send()
        .await
        .with_context(|| url.clone())?;
    let status = resp.status();
    let text = resp.text().await.with_context(|| url.clone())?;
    if !status.is_success() {
        bail!("{url}: {status}: {text}");
    }
    serde_json::from_str(&text).with_context(|| format!("{url}: not JSON: {text}"))
}

fn str_field(v: &serde_json::Value, key: &str) -> anyhow::Result<String> {
    v[key]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("no \"{key}\" in {v}"))
}

async fn setup(
    svix: &str,
    token: &str,
    endpoints: usize,
    receiver: &str,
    first: usize,
    secrets_file: &str,
    name: Option<&str>,
) -> anyhow::Result<()> {
    // Line n of the file is /r/<n>'s secret: the indices must continue it.
    let lines = match std::fs::read_to_string(secrets_file) {
        Ok(s) => s.lines().count(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e).context(secrets_file.to_owned()),
    };
    ensure!(
        lines == first,
        "{secrets_file} has {lines} lines: the first index must be {lines}, not {first}"
    );
    let http = reqwest::Client::new();
    let app = call(
        &http,
        svix,
        token,
        "/api/v1/app/",
        Some(&serde_json::json!({"name": name.map_or_else(
            || format!("bench {endpoints} endpoints from /r/{first}"),
            str::to_owned,
        )})),
    )
    .await?;
    let app = str_field(&app, "id")?;
    let mut secrets = String::new();
    for i in first..first + endpoints {
        let ep = call(
            &http,
            svix,
            token,
            &format!("/api/v1/app/{app}/endpoint/"),
            Some(&serde_json::json!({
                "url": format!("{}/r/{i}", receiver.trim_end_matches('/')),
                "description": format!("bench receiver {i}"),
            })),
        )
        .await?;
        let ep = str_field(&ep, "id")?;
        let secret = call(
            &http,
            svix,
            token,
            &format!("/api/v1/app/{app}/endpoint/{ep}/secret/"),
            None,
        )
        .await?;
        secrets.push_str(&str_field(&secret, "key")?);
        secrets.push('\n');
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(secrets_file)
        .and_then(|mut f| f.write_all(secrets.as_bytes()))
        .context(secrets_file.to_owned())?;
    println!("{app}");
    Ok(())
}

fn event(i: usize, org: &uuid::Uuid) -> anyhow::Result<serde_json::Value> {
    Ok(serde_json::json!({
        "eventType": "server.active",
        "payload": {
            "id": uuid::Uuid::now_v7(), "type": "server.active",
            "created_at": time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339)?,
            "org_id": org,
            "data": {"id": uuid::Uuid::new_v4(), "org_id": org, "hostname": format!("bench-{i}"), "status": "active"},
        },
    }))
}

async fn send(
    svix: &str,
    token: &str,
    app: &str,
    messages: usize,
    clients: usize,
) -> anyhow::Result<()> {
    ensure!(clients > 0, "clients must be at least 1");
    let url = format!("{}/api/v1/app/{app}/msg/", svix.trim_end_matches('/'));
    let auth = format!("Bearer {token}");
    // One organization per run, as the application stands for one.
    let org = uuid::Uuid::new_v4();
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(clients);
    for _ in 0..clients {
        let (url, auth, next) = (url.clone(), auth.clone(), next.clone());
        // A client of its own each: one keep-alive connection per client.
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .timeout(Duration::from_secs(60))
            .build()?;
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= messages {
                    return anyhow::Ok(latencies);
                }
                let body = event(i, &org)?;
                let t = Instant::now();
                let resp = http
                    .post(&url)
                    .header("authorization", &auth)
                    .json(&body)
                    .send()
                    .await
                    .with_context(|| format!("message {i}"))?;
                let status = resp.status();
                let text = resp.text().await.with_context(|| format!("message {i}"))?;
                if !status.is_success() {
                    bail!("message {i}: {url}: {status}: {text}");
                }
                latencies.push(t.elapsed().as_secs_f64() * 1000.0);
            }
        }));
    }
    let mut latencies = Vec::with_capacity(messages);
    for t in tasks {
        latencies.extend(t.await??);
    }
    let secs = started.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        latencies
            .get(((latencies.len().max(1) - 1) as f64 * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    println!(
        "sent {messages} messages in {secs:.3} s by {clients} clients = {:.0} messages/s, API p50 {:.1} ms p99 {:.1} ms",
        messages as f64 / secs,
        pct(0.50),
        pct(0.99)
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    service_kit::tls::install_provider();
    let args: Vec<String> = std::env::args().collect();
    let a = |i: usize| args.get(i).cloned().unwrap_or_default();
    match args.get(1).map(String::as_str) {
        Some("setup") if args.len() == 8 || args.len() == 9 => {
            let name = args.get(8).map(String::as_str);
            setup(&a(2), &a(3), a(4).parse()?, &a(5), a(6).parse()?, &a(7), name).await
        }
        Some("send") if args.len() == 7 => {
            send(&a(2), &a(3), &a(4), a(5).parse()?, a(6).parse()?).await
        }
        _ => bail!(
            "usage: svix-bench setup <svix url> <token> <endpoints> <receiver base url> <first index> <secrets file> [app name]\n       svix-bench send <svix url> <token> <app id> <messages> <clients>"
        ),
    }
}
