//! Token endpoint load generator (scripts/bench-oidc.sh runs it):
//!
//! `refresh-load <gateway base url> <session token> <client id> <redirect uri>
//! <clients> <seconds>`
//!
//! Each of `clients` concurrent clients (a keep-alive connection of its own)
//! first signs the person in through the code flow with PKCE, as a public
//! client (GET /oauth/authorize, the console's accept with the session, the
//! code exchanged at POST /oauth/token), then refreshes its own grant as fast
//! as it can for `seconds`, each time with the refresh token the last answer
//! gave (a family per client: no reuse). Any answer but 200 stops the run
//! with its status and body (exit status 1). Prints one line: refreshes,
//! seconds, refreshes/s, latency p50/p99/max.

use anyhow::Context;
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use std::time::{Duration, Instant};

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

struct Plan {
    base: String,
    session: String,
    client_id: String,
    redirect_uri: String,
    secs: u64,
}

async fn post_form(
    http: &reqwest::Client,
    url: &str,
    body: String,
) -> anyhow::Result<serde_json::Value> {
    let resp = http
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .context("no answer from the token endpoint")?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    anyhow::ensure!(status == 200, "token endpoint answered {status}: {text}");
    Ok(serde_json::from_str(&text)?)
}

/// The first refresh token of a new grant, through the code flow.
async fn sign_in(http: &reqwest::Client, plan: &Plan, n: usize) -> anyhow::Result<String> {
    let verifier = format!("{:0>64}", n);
    let challenge = URL_SAFE_NO_PAD
        .encode(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref());
    let url = format!(
        "{}/oauth/authorize?client_id={}&redirect_uri={}&response_type=code&scope=openid%20offline_access&state=s{n}&code_challenge={challenge}&code_challenge_method=S256",
        plan.base,
        plan.client_id,
        enc(&plan.redirect_uri)
    );
    // Each client from an address of its own, as people are: the
    // authorization endpoint counts requests per address
    // (`oidc.authorize_per_ip_per_minute`); the dev gateway trusts loopback's
    // X-Forwarded-For.
    let r = http
        .get(&url)
        .header(
            "x-forwarded-for",
            format!("10.78.{}.{}", n / 250, n % 250 + 1),
        )
        .send()
        .await
        .context("authorize")?;
    let location = r
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .with_context(|| format!("authorize answered {} without a Location", r.status()))?;
    let handle = reqwest::Url::parse(&location)?
        .query_pairs()
        .find(|(k, _)| k == "request")
        .map(|(_, v)| v.into_owned())
        .context("no request handle")?;
    let r = http
        .post(format!("{}/v1/oauth/authorization/accept", plan.base))
        .bearer_auth(&plan.session)
        .json(&serde_json::json!({ "request": handle }))
        .send()
        .await?;
    anyhow::ensure!(r.status() == 200, "accept answered {}", r.status());
    let to: serde_json::Value = r.json().await?;
    let code = reqwest::Url::parse(to["redirect_to"].as_str().context("redirect_to")?)?
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .context("no code")?;
    let t = post_form(
        http,
        &format!("{}/oauth/token", plan.base),
        format!(
            "grant_type=authorization_code&client_id={}&code={}&redirect_uri={}&code_verifier={verifier}",
            plan.client_id,
            enc(&code),
            enc(&plan.redirect_uri)
        ),
    )
    .await?;
    Ok(t["refresh_token"]
        .as_str()
        .context("no refresh token")?
        .to_owned())
}

async fn client(
    plan: std::sync::Arc<Plan>,
    n: usize,
    start: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Vec<f64>> {
    let http = service_kit::tls::http_client(&Default::default())?
        .pool_max_idle_per_host(1)
        .tcp_nodelay(true)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()?;
    let mut rt = sign_in(&http, &plan, n).await?;
    let mut start = start;
    start.wait_for(|s| *s).await?;
    let url = format!("{}/oauth/token", plan.base);
    let until = Instant::now() + Duration::from_secs(plan.secs);
    let mut lat = Vec::new();
    while Instant::now() < until {
        let t = Instant::now();
        let r = post_form(
            &http,
            &url,
            format!(
                "grant_type=refresh_token&client_id={}&refresh_token={rt}",
                plan.client_id
            ),
        )
        .await?;
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
        rt = r["refresh_token"]
            .as_str()
            .context("no refresh token")?
            .to_owned();
    }
    Ok(lat)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    anyhow::ensure!(
        a.len() == 7,
        "usage: refresh-load <base url> <session token> <client id> <redirect uri> <clients> <seconds>"
    );
    let plan = std::sync::Arc::new(Plan {
        base: a[1].trim_end_matches('/').to_owned(),
        session: a[2].clone(),
        client_id: a[3].clone(),
        redirect_uri: a[4].clone(),
        secs: a[6].parse()?,
    });
    let clients: usize = a[5].parse()?;
    let (go, ready) = tokio::sync::watch::channel(false);
    let tasks: Vec<_> = (0..clients)
        .map(|n| tokio::spawn(client(plan.clone(), n, ready.clone())))
        .collect();
    // Every client signs in first; the clock starts when all have.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t0 = Instant::now();
    go.send(true)?;
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    let secs = t0.elapsed().as_secs_f64();
    all.sort_by(f64::total_cmp);
    println!(
        "refreshes {} in {:.1} s: {:.0}/s, latency p50 {:.2} ms p99 {:.2} ms max {:.2} ms",
        all.len(),
        secs,
        all.len() as f64 / secs,
        pct(&all, 0.5),
        pct(&all, 0.99),
        all.last().copied().unwrap_or(0.0)
    );
    Ok(())
}
