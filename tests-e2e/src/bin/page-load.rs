//! Console page load generator (scripts/bench-console.sh runs it):
//!
//! `page-load <console base url> <gateway base url> <users> <seconds>`
//!
//! Signs `users` people in through the console (a dev stack: the link's token
//! is echoed; each person from an address of their own in X-Forwarded-For,
//! which the dev gateway believes from loopback, so the per-IP sign-in limits
//! see different people), each creates an organization through the console's
//! form, and a bearer of their own is made over the API for the reference.
//! Then, for `seconds` each, in two halves alternated (page, API, API, page,
//! after two seconds of each as a warm-up, discarded), so that drift over the
//! run and the sign-ins' background work weigh on both alike:
//!
//! 1. every person loads their organization's page (`GET /orgs/{id}`: one API
//!    call behind it) as fast as they can, one keep-alive connection each;
//! 2. the same people make that API call themselves (`GET
//!    /v1/organizations/{id}` through the gateway with their bearer).
//!
//! Prints both (requests, requests/s, latency p50/p99/max), what the console
//! adds at p50 and p99 as the people see it (at saturation this includes the
//! queue its own work makes longer), and the console's own time per page from
//! its `Server-Timing` (the time not spent waiting on the API). Any answer but
//! 200 stops the run (exit 1).

use anyhow::Context;
use std::time::{Duration, Instant};

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

struct Person {
    cookie: String,
    bearer: String,
    org: String,
}

fn client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(1)
        .build()?)
}

fn cookie_of(r: &reqwest::Response) -> Option<String> {
    r.headers()
        .get("set-cookie")?
        .to_str()
        .ok()?
        .split(';')
        .next()
        .map(str::to_owned)
}

/// A urlencoded form body.
fn form(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

fn csrf_in(html: &str) -> anyhow::Result<String> {
    let at = html
        .find("name=\"csrf\" value=\"")
        .context("no form token in the page")?
        + 19;
    Ok(html[at..].split('"').next().unwrap_or("").to_owned())
}

async fn dev_token(
    http: &reqwest::Client,
    gw: &str,
    email: &str,
    ip: &str,
) -> anyhow::Result<String> {
    let r: serde_json::Value = http
        .post(format!("{gw}/v1/auth/request-link"))
        .header("x-forwarded-for", ip)
        .json(&serde_json::json!({ "email": email }))
        .send()
        .await?
        .json()
        .await?;
    r["dev_token"]
        .as_str()
        .map(str::to_owned)
        .context("no dev_token: run against the dev profile (auth.echo_dev_token)")
}

async fn person(console: &str, gw: &str, i: usize) -> anyhow::Result<Person> {
    let http = client()?;
    let email = format!(
        "page-load-{i}-{}@example.com",
        uuid::Uuid::new_v4().simple()
    );
    let ip = format!("10.77.{}.{}", i / 250, i % 250 + 1);
    // Through the console: the landing, its button.
    let token = dev_token(&http, gw, &email, &ip).await?;
    let landing = http
        .get(format!("{console}/sign-in?token={token}"))
        .header("x-forwarded-for", &ip)
        .send()
        .await?;
    let mut cookie = cookie_of(&landing).context("no cookie")?;
    let csrf = csrf_in(&landing.text().await?)?;
    let done = http
        .post(format!("{console}/sign-in/verify"))
        .header("cookie", &cookie)
        .header("x-forwarded-for", &ip)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("csrf", csrf.as_str()), ("token", token.as_str())]))
        .send()
        .await?;
    anyhow::ensure!(
        done.status() == 303,
        "verify through the console: {}",
        done.status()
    );
    cookie = cookie_of(&done).context("no session cookie")?;
    let list = http
        .get(format!("{console}/orgs"))
        .header("cookie", &cookie)
        .send()
        .await?;
    let csrf = csrf_in(&list.text().await?)?;
    let made = http
        .post(format!("{console}/orgs"))
        .header("cookie", &cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[
            ("csrf", csrf.as_str()),
            ("name", &format!("Load {i}")),
            ("legal_type", "corporate"),
            ("country", "DE"),
        ]))
        .send()
        .await?;
    anyhow::ensure!(
        made.status() == 303,
        "create through the console: {}",
        made.status()
    );
    let org = made
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .and_then(|l| l.strip_prefix("/orgs/"))
        .context("no organization page")?
        .to_owned();
    // The reference's bearer, over the API.
    let token = dev_token(&http, gw, &email, &ip).await?;
    let v: serde_json::Value = http
        .post(format!("{gw}/v1/auth/verify"))
        .header("x-forwarded-for", &ip)
        .json(&serde_json::json!({ "token": token }))
        .send()
        .await?
        .json()
        .await?;
    let bearer = v["session_token"]
        .as_str()
        .context("no session")?
        .to_owned();
    Ok(Person {
        cookie,
        bearer,
        org,
    })
}

/// What one phase measured: latencies seen by the people (ms, sorted), the
/// phase's length (s), and the answers' `Server-Timing` where there was one
/// (the console's: the API's time and its own, ms, each sorted).
struct Phase {
    lat: Vec<f64>,
    took: f64,
    api: Vec<f64>,
    own: Vec<f64>,
}

impl Phase {
    fn extend(&mut self, more: Phase) {
        for (a, b) in [
            (&mut self.lat, more.lat),
            (&mut self.api, more.api),
            (&mut self.own, more.own),
        ] {
            a.extend(b);
            a.sort_by(f64::total_cmp);
        }
        self.took += more.took;
    }
}

/// Every person loops on their URL for `secs`.
async fn run(urls: Vec<(String, (&'static str, String))>, secs: u64) -> anyhow::Result<Phase> {
    let start = Instant::now();
    let end = start + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for (url, (header, value)) in urls {
        tasks.push(tokio::spawn(async move {
            let http = client()?;
            let (mut lat, mut timed) = (Vec::new(), Vec::new());
            while Instant::now() < end {
                let t = Instant::now();
                let r = http.get(&url).header(header, &value).send().await?;
                let status = r.status();
                let timing = r
                    .headers()
                    .get("server-timing")
                    .and_then(|v| v.to_str().ok())
                    .and_then(console::timing::parse);
                let _ = r.bytes().await?;
                anyhow::ensure!(status == 200, "{url} answered {status}");
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
                timed.extend(timing);
            }
            anyhow::Ok((lat, timed))
        }));
    }
    let mut phase = Phase {
        lat: Vec::new(),
        took: 0.0,
        api: Vec::new(),
        own: Vec::new(),
    };
    for t in tasks {
        let (lat, timed) = t.await??;
        phase.lat.extend(lat);
        for (api, own) in timed {
            phase.api.push(api);
            phase.own.push(own);
        }
    }
    phase.took = start.elapsed().as_secs_f64();
    for l in [&mut phase.lat, &mut phase.api, &mut phase.own] {
        l.sort_by(f64::total_cmp);
    }
    Ok(phase)
}

fn report(what: &str, lat: &[f64], took: f64) {
    println!(
        "{what}: {} requests in {took:.1}s = {:.0}/s; latency ms p50 {:.2} p99 {:.2} max {:.2}",
        lat.len(),
        lat.len() as f64 / took,
        pct(lat, 0.5),
        pct(lat, 0.99),
        lat.last().copied().unwrap_or(0.0)
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    service_kit::tls::install_provider();
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(
        args.len() == 5,
        "usage: page-load <console url> <gateway url> <users> <seconds>"
    );
    let (console, gw) = (args[1].trim_end_matches('/'), args[2].trim_end_matches('/'));
    let users: usize = args[3].parse()?;
    let secs: u64 = args[4].parse()?;
    let mut people = Vec::new();
    for i in 0..users {
        people.push(
            person(console, gw, i)
                .await
                .with_context(|| format!("person {i}"))?,
        );
    }
    let pages: Vec<_> = people
        .iter()
        .map(|p| {
            (
                format!("{console}/orgs/{}", p.org),
                ("cookie", p.cookie.clone()),
            )
        })
        .collect();
    let api_urls: Vec<_> = people
        .iter()
        .map(|p| {
            (
                format!("{gw}/v1/organizations/{}", p.org),
                ("authorization", format!("Bearer {}", p.bearer)),
            )
        })
        .collect();
    // A warm-up of each, discarded (the sign-ins' background work settles,
    // connections are made); then page, API, API, page, so that drift over
    // the run weighs on both alike.
    run(pages.clone(), 2).await?;
    run(api_urls.clone(), 2).await?;
    let half = secs.div_ceil(2);
    let mut page = run(pages.clone(), half).await?;
    let mut api = run(api_urls.clone(), half).await?;
    api.extend(run(api_urls.clone(), half).await?);
    page.extend(run(pages.clone(), half).await?);
    report(
        &format!("console GET /orgs/{{id}} ({users} signed-in users)"),
        &page.lat,
        page.took,
    );
    report(
        &format!("API GET /v1/organizations/{{id}} ({users} users, the page's one call)"),
        &api.lat,
        api.took,
    );
    println!(
        "the console adds, seen by the people: p50 {:+.2} ms, p99 {:+.2} ms",
        pct(&page.lat, 0.5) - pct(&api.lat, 0.5),
        pct(&page.lat, 0.99) - pct(&api.lat, 0.99)
    );
    anyhow::ensure!(
        page.own.len() == page.lat.len(),
        "{} of {} pages came without Server-Timing",
        page.lat.len() - page.own.len(),
        page.lat.len()
    );
    println!(
        "the console's own time per page (Server-Timing console): p50 {:.3} ms, p99 {:.3} ms; \
         waiting on the API (api): p50 {:.2} ms, p99 {:.2} ms",
        pct(&page.own, 0.5),
        pct(&page.own, 0.99),
        pct(&page.api, 0.5),
        pct(&page.api, 0.99)
    );
    Ok(())
}
