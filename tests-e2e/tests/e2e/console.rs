//! The console (services/console) as people use it: Debian's Chromium driven
//! through ChromeDriver (WebDriver), against a stack of its own with a real
//! SMTP server for the mailed links; axe-core (tests-e2e/browser, pinned) run
//! in every page; screenshots written to `$CONSOLE_SCREENSHOTS` (default: a
//! folder under the system's temp dir). And what the pages must refuse,
//! over plain HTTP: forms without their token, framing and inline script,
//! someone else's organization.

use crate::mail::{arrived, mail_toml_linking, temp_dir, Sink};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use fantoccini::{key::Key, Client, ClientBuilder, Locator};
use ring::digest;
use serde_json::{json, Value};
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};
use tests_e2e::{eventually, StackOptions, TestStack};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const WAIT: Duration = Duration::from_secs(30);

/// A stack, its SMTP sink, and a console in front of its gateway.
pub(crate) struct Env {
    pub(crate) s: TestStack,
    pub(crate) url: String,
    pub(crate) out: PathBuf,
    /// The console's cookie key (another console with it reads its cookies).
    pub(crate) key: String,
    _sink: Sink,
    cancel: CancellationToken,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

pub(crate) async fn env() -> Env {
    env_at("127.0.0.1").await
}

/// [`env`] with the console reached as `http://<host>:<port>` (it listens on
/// loopback): every link of identity's points there, and with a host name
/// (`localhost`) identity's passkeys are bound to it (browsers refuse IP
/// addresses as a relying party).
pub(crate) async fn env_at(host: &str) -> Env {
    let out = temp_dir("console");
    let (sink, smtp) = Sink::plain(&out).await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port for the console");
    let url = format!(
        "http://{host}:{}",
        listener.local_addr().expect("port").port()
    );
    let mut identity_toml = mail_toml_linking(&smtp, None, &format!("{url}/sign-in"))
        + &format!(
            "[oidc]\nlogin_url = \"{url}/oauth/continue\"\ndevice_url = \"{url}/device\"\n\
             [invites]\naccept_base_url = \"{url}/invites/accept\"\n"
        );
    if host.parse::<std::net::IpAddr>().is_err() {
        identity_toml += &format!("[passkeys]\nrp_id = \"{host}\"\norigins = [\"{url}\"]\n");
    }
    let s = TestStack::spawn_with(StackOptions {
        identity_toml,
        ..Default::default()
    })
    .await;
    let key = cookie_key();
    let cancel = console_on(
        listener,
        s.core(),
        s.product(),
        &key,
        "secure_cookies = false\n",
    )
    .await;
    Env {
        s,
        url,
        out,
        key,
        _sink: sink,
        cancel,
    }
}

/// A cookie key of the console's settings (`console.cookie_keys`).
pub(crate) fn cookie_key() -> String {
    let key = base64::engine::general_purpose::STANDARD
        .encode([Uuid::new_v4().into_bytes(), Uuid::new_v4().into_bytes()].concat());
    format!("t1:{key}")
}

/// A console on `listener` in front of the gateways at `core` and
/// `product`, with more `[console]` settings; stopped with the token.
pub(crate) async fn console_on(
    listener: std::net::TcpListener,
    core: &str,
    product: &str,
    key: &str,
    console_toml: &str,
) -> CancellationToken {
    let layer = format!(
        "[http]\nhost = \"127.0.0.1\"\nport = 0\nmetrics_port = 0\nmetrics_host = \"127.0.0.1\"\n\
         [console]\ngateway_url = {core:?}\nproduct_gateway_url = {product:?}\n\
         cookie_keys = [\"{key}\"]\n{console_toml}",
    );
    let settings = <console::Settings as service_kit::settings::Layered>::from_layers(&[&layer])
        .expect("console settings");
    let cancel = CancellationToken::new();
    let mut rt = service_kit::Runtime::new(cancel.clone());
    rt.listener = service_kit::clock::Listener::new(listener);
    let app = console::Application::build(settings, rt)
        .await
        .expect("the console starts");
    tokio::spawn(app.run_until_stopped());
    cancel
}

/// The link in the latest sign-in mail to `email` (the console's page).
pub(crate) async fn mailed_link(e: &Env, email: &str, n: usize) -> String {
    let mails = arrived(&e.out, email, n).await;
    let text = mails[n - 1]["text"]
        .as_str()
        .expect("a text part")
        .to_owned();
    let base = format!("{}/sign-in?token=", e.url);
    text.lines()
        .find(|l| l.starts_with(&base))
        .unwrap_or_else(|| panic!("no console link in {text:?}"))
        .trim()
        .to_owned()
}

/// A session through the mailed link, over the API (for set-up).
pub(crate) async fn mailed_session(e: &Env, email: &str, n: usize) -> String {
    let r =
        e.s.post("/v1/auth/request-link", None, json!({ "email": email }))
            .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let link = mailed_link(e, email, n).await;
    let token = link.rsplit("token=").next().expect("token").to_owned();
    let v =
        e.s.post("/v1/auth/verify", None, json!({ "token": token }))
            .await;
    assert_eq!(v.status, 200, "{:?}", v.body);
    v.text("session_token").to_owned()
}

/// Chromium, headless, through a ChromeDriver of this test's own.
pub(crate) struct Browser {
    pub(crate) c: Client,
    driver: Child,
    shots: PathBuf,
    n: usize,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

pub(crate) async fn browser(test: &str) -> Browser {
    let port = tests_e2e::nats_server::free_port();
    let driver = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver (scripts/deps.sh installs chromium-driver)");
    let caps: serde_json::Map<String, Value> = serde_json::from_value(json!({
        "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1280,1000", "--lang=en-US"],
            "prefs": {"intl.accept_languages": "en-US,en"}
        }
    }))
    .expect("caps");
    let url = format!("http://127.0.0.1:{port}");
    let c = eventually(WAIT, || {
        let (caps, url) = (caps.clone(), url.clone());
        async move {
            ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                .capabilities(caps)
                .connect(&url)
                .await
                .ok()
        }
    })
    .await
    .expect("a WebDriver session with Chromium");
    let shots = std::env::var("CONSOLE_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir().join("hub-console-screenshots"))
        .join(test);
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    Browser {
        c,
        driver,
        shots,
        n: 0,
    }
}

impl Browser {
    /// axe-core in the page: no serious or critical violation; and a
    /// screenshot named `name`.
    pub(crate) async fn check(&mut self, name: &str) {
        let axe = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("browser/node_modules/axe-core/axe.min.js"),
        )
        .expect("axe-core (scripts/deps.sh: npm ci in tests-e2e/browser)");
        self.c.execute(&axe, vec![]).await.expect("axe loads");
        let found = self
            .c
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 axe.run(document, {resultTypes: ['violations']})
                   .then(r => done(r.violations
                     .filter(v => v.impact === 'serious' || v.impact === 'critical')
                     .map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).join(' | '))))
                   .catch(e => done(['axe failed: ' + e]));",
                vec![],
            )
            .await
            .expect("axe runs");
        let list: Vec<String> = serde_json::from_value(found).expect("a list");
        assert!(list.is_empty(), "{name}: axe found {list:#?}");
        self.n += 1;
        let png = self.c.screenshot().await.expect("screenshot");
        std::fs::write(self.shots.join(format!("{:02}-{name}.png", self.n)), png)
            .expect("write screenshot");
    }

    pub(crate) async fn text(&self, css: &str) -> String {
        self.c
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"))
            .text()
            .await
            .expect("text")
    }

    /// Wait until the page's h1 reads `want`.
    pub(crate) async fn heading(&self, want: &str) {
        let got = eventually(WAIT, || async {
            let h = self
                .c
                .find(Locator::Css("h1"))
                .await
                .ok()?
                .text()
                .await
                .ok()?;
            (h == want).then_some(h)
        })
        .await;
        let now = self.text("h1").await;
        assert!(got.is_some(), "the heading stayed {now:?}, wanted {want:?}");
    }

    /// Wait until the element at `css` says `needle` (a page that follows a
    /// click may still be the old one for a moment).
    pub(crate) async fn wait_text(&self, css: &str, needle: &str) {
        let found = eventually(WAIT, || async {
            let t = self
                .c
                .find(Locator::Css(css))
                .await
                .ok()?
                .text()
                .await
                .ok()?;
            t.contains(needle).then_some(t)
        })
        .await;
        let now = self.text(css).await;
        assert!(found.is_some(), "{css} never said {needle:?}: {now:?}");
    }

    /// Type into the focused element (the keyboard, no mouse).
    pub(crate) async fn type_here(&self, keys: &str) {
        self.c
            .active_element()
            .await
            .expect("a focused element")
            .send_keys(keys)
            .await
            .expect("typing");
    }

    pub(crate) async fn source(&self) -> String {
        self.c.source().await.expect("page source")
    }

    pub(crate) async fn path(&self) -> String {
        self.c.current_url().await.expect("url").path().to_owned()
    }
}

pub(crate) fn enter() -> String {
    char::from(Key::Enter).to_string()
}

/// An inline event handler (` onclick=`, ` onload=`...) in a page.
fn inline_handler(html: &str) -> bool {
    html.match_indices(" on").any(|(at, _)| {
        let rest = &html[at + 3..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect();
        !name.is_empty() && rest[name.len()..].starts_with('=')
    })
}

#[tokio::test]
async fn a_new_person_signs_in_from_the_mailed_link_and_creates_an_organization_in_both_languages()
{
    let e = env().await;
    let mut b = browser("first-visit").await;

    // The front page sends a stranger to sign in; the address field has the
    // focus, so the keyboard alone signs in.
    b.c.goto(&e.url).await.expect("open the console");
    b.heading("Sign in").await;
    assert_eq!(b.path().await, "/sign-in");
    b.check("sign-in").await;
    b.type_here(&format!("ada@example.com{}", enter())).await;
    b.heading("Check your mail").await;
    b.check("check-mail").await;

    // The mailed link lands on a page whose button spends it (a mail
    // scanner's fetch spends nothing); Enter presses it.
    let link = mailed_link(&e, "ada@example.com", 1).await;
    b.c.goto(&link).await.expect("open the link");
    b.heading("Finish signing in").await;
    b.check("landing").await;
    b.type_here(&enter()).await;
    b.heading("Organizations").await;
    assert!(b
        .source()
        .await
        .contains("not a member of any organization"));
    // The session is nowhere a script or the page could read it.
    let cookie =
        b.c.execute("return document.cookie", vec![])
            .await
            .expect("js");
    assert_eq!(cookie, json!(""), "the session cookie must be HttpOnly");
    assert!(
        !b.source().await.contains("sess_"),
        "a session token in the page"
    );
    b.check("organizations-empty").await;

    // A country no entity serves: the API's refusal, on the page.
    let name = b.c.find(Locator::Id("name")).await.expect("name field");
    name.send_keys("Ada Labs").await.expect("type");
    let country =
        b.c.find(Locator::Id("country"))
            .await
            .expect("country field");
    country
        .send_keys(&format!("US{}", enter()))
        .await
        .expect("type");
    let alert = b.text("[role=alert]").await;
    assert!(
        alert.contains("The organization was not created"),
        "{alert}"
    );
    b.check("organization-refused").await;

    // Turkey: created, with a wallet in lira.
    let country =
        b.c.find(Locator::Id("country"))
            .await
            .expect("country field");
    country.clear().await.expect("clear");
    country
        .send_keys(&format!("TR{}", enter()))
        .await
        .expect("type");
    b.heading("Ada Labs").await;
    let path = b.path().await;
    let org_id = path
        .strip_prefix("/orgs/")
        .expect("the organization's page")
        .to_owned();
    Uuid::parse_str(&org_id).expect("an organization id");
    let facts = b.text("dl.facts").await;
    assert!(facts.contains("₺0.00"), "{facts}");
    assert!(facts.contains("Not verified"), "{facts}");
    assert!(facts.contains("Owner"), "{facts}");
    b.check("organization").await;

    // Türkçe: the same page in Turkish, money as Turkish writes it.
    b.c.find(Locator::Css("a[hreflang=tr]"))
        .await
        .expect("the language switch")
        .click()
        .await
        .expect("switch");
    let turkish = eventually(WAIT, || async {
        b.source()
            .await
            .contains("<html lang=\"tr\">")
            .then_some(())
    })
    .await;
    assert!(turkish.is_some(), "the page is not marked Turkish");
    b.heading("Ada Labs").await;
    let facts = b.text("dl.facts").await;
    assert!(facts.contains("0,00 ₺"), "{facts}");
    assert!(facts.contains("Doğrulanmadı"), "{facts}");
    assert!(facts.contains("Sahip"), "{facts}");
    b.check("organization-tr").await;
    b.c.goto(&format!("{}/orgs", e.url)).await.expect("list");
    b.heading("Organizasyonlar").await;
    assert!(b.source().await.contains("Ada Labs"));
    b.check("organizations-tr").await;

    // Signing out ends the hub session; the language stays.
    b.c.find(Locator::Css("form[action='/sign-out'] button"))
        .await
        .expect("sign out")
        .click()
        .await
        .expect("click");
    b.heading("Giriş yap").await;
    b.c.goto(&format!("{}/orgs/{org_id}", e.url))
        .await
        .expect("back");
    b.heading("Giriş yap").await;
    b.check("sign-in-tr").await;
    b.c.clone().close().await.expect("close the browser");
}

/// Sign `b` in as `email` through the console (its `n`th mail).
pub(crate) async fn browser_sign_in(b: &Browser, e: &Env, email: &str, n: usize) {
    browser_sign_in_with(b, e, email, mailed_link(e, email, n)).await
}

/// Sign `b` in as `email` through the console, by keyboard: ask for a link,
/// then open what `link` finds in the mail.
pub(crate) async fn browser_sign_in_with(
    b: &Browser,
    e: &Env,
    email: &str,
    link: impl std::future::Future<Output = String>,
) {
    b.c.goto(&format!("{}/sign-in", e.url))
        .await
        .expect("sign-in page");
    b.heading("Sign in").await;
    b.type_here(&format!("{email}{}", enter())).await;
    b.heading("Check your mail").await;
    let link = link.await;
    b.c.goto(&link).await.expect("open the link");
    b.heading("Finish signing in").await;
    b.type_here(&enter()).await;
    eventually(WAIT, || async {
        let p = b.path().await;
        (p != "/sign-in").then_some(p)
    })
    .await
    .expect("signed in");
}

pub(crate) async fn fill(b: &Browser, id: &str, text: &str) {
    b.c.find(Locator::Id(id))
        .await
        .unwrap_or_else(|_| panic!("no #{id}"))
        .send_keys(text)
        .await
        .expect("typing");
}

pub(crate) async fn press(b: &Browser, css: &str) {
    b.c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|_| panic!("no {css}"))
        .click()
        .await
        .expect("click");
}

#[tokio::test]
async fn staff_verify_a_customer_who_then_invites_a_colleague_and_makes_an_api_key() {
    let e = env().await;
    let mut ada = browser("customer").await;
    browser_sign_in(&ada, &e, "ada@example.com", 1).await;
    ada.heading("Organizations").await;
    fill(&ada, "name", "Ada Analytics").await;
    fill(&ada, "country", &format!("TR{}", enter())).await;
    ada.heading("Ada Analytics").await;
    let org = ada.path().await.trim_start_matches("/orgs/").to_owned();
    let base = format!("{}/orgs/{org}", e.url);

    // KYC: the individual's fields, the address, the notice.
    ada.c.goto(&format!("{base}/kyc")).await.expect("kyc");
    ada.check("kyc-form").await;
    fill(&ada, "full_name", "Ada Lovelace").await;
    fill(&ada, "national_id", "10000000146").await;
    fill(&ada, "line1", "Istiklal Cd. 1").await;
    fill(&ada, "city", "Istanbul").await;
    fill(&ada, "postal_code", "34430").await;
    press(&ada, "input[name=notice_acked]").await;
    press(&ada, "form[action$='/kyc'] button[type=submit]").await;
    ada.wait_text("table", "Under review").await;
    ada.check("kyc-pending").await;

    // Staff: the tower's overview counts it; the queue shows the opened
    // fields; approving empties it.
    let mut staff = browser("control-tower").await;
    browser_sign_in(&staff, &e, "staff@example.com", 1).await;
    staff
        .c
        .goto(&format!("{}/staff", e.url))
        .await
        .expect("tower");
    staff.heading("Control tower").await;
    let queues = staff.text("ul.queue").await;
    assert!(queues.contains("KYC submissions waiting"), "{queues}");
    staff.check("tower").await;
    staff
        .c
        .goto(&format!("{}/staff/kyc", e.url))
        .await
        .expect("queue");
    staff.heading("KYC queue").await;
    let card = staff.text("section.card").await;
    assert!(
        card.contains("Ada Analytics") && card.contains("Ada Lovelace"),
        "{card}"
    );
    staff.check("kyc-queue").await;
    press(&staff, "button[value=approve]").await;
    staff.wait_text("main", "No submission is waiting.").await;
    staff
        .c
        .goto(&format!("{}/staff/orgs?q=Ada", e.url))
        .await
        .expect("search");
    assert!(staff.text("table").await.contains("Ada Analytics"));
    staff.check("tower-search").await;

    // The customer sees it verified; the tower is not hers (the API's 403).
    ada.c.goto(&base).await.expect("org");
    let facts = ada.text("dl.facts").await;
    assert!(facts.contains("Verified"), "{facts}");
    ada.c
        .goto(&format!("{}/staff", e.url))
        .await
        .expect("tower");
    ada.heading("Something went wrong").await;
    assert!(ada
        .source()
        .await
        .contains("You are not allowed to do this."));

    // An invitation, opened by a second browser from the mail.
    ada.c
        .goto(&format!("{base}/members"))
        .await
        .expect("members");
    fill(&ada, "invite-email", "bob@example.com").await;
    press(&ada, "form[action$='/invites'] button").await;
    ada.wait_text("main", "bob@example.com").await;
    let invites = ada.text("table:nth-of-type(2)").await;
    assert!(
        invites.contains("bob@example.com") && invites.contains("Waiting"),
        "{invites}"
    );
    ada.check("members").await;
    let mails = arrived(&e.out, "bob@example.com", 1).await;
    let text = mails[0]["text"].as_str().expect("text").to_owned();
    let accept = text
        .lines()
        .find(|l| l.starts_with(&format!("{}/invites/accept?token=", e.url)))
        .expect("the invite link")
        .trim()
        .to_owned();
    let mut bob = browser("invitee").await;
    bob.c.goto(&accept).await.expect("invite link");
    // Not signed in: the sign-in comes first, then back to the invitation.
    bob.heading("Sign in").await;
    bob.type_here(&format!("bob@example.com{}", enter())).await;
    bob.heading("Check your mail").await;
    let link = mailed_link(&e, "bob@example.com", 2).await;
    bob.c.goto(&link).await.expect("link");
    bob.heading("Finish signing in").await;
    bob.type_here(&enter()).await;
    bob.heading("Join an organization").await;
    bob.check("invite").await;
    bob.type_here(&enter()).await;
    bob.heading("Ada Analytics").await;
    assert!(bob.text("dl.facts").await.contains("Developer"));

    // An API key: its token once, and it works like curl would use it.
    ada.c.goto(&format!("{base}/api-keys")).await.expect("keys");
    fill(&ada, "key-name", &format!("ci{}", enter())).await;
    let token = ada.text("#new-key").await;
    assert!(token.starts_with("svc_live_"), "{token}");
    ada.check("api-key-created").await;
    let r =
        e.s.http
            .get(format!("{}/v1/organizations/{org}", e.s.core()))
            .bearer_auth(&token)
            .send()
            .await
            .expect("the key at the gateway");
    assert_eq!(r.status(), 200);
    ada.c
        .goto(&format!("{base}/api-keys"))
        .await
        .expect("keys again");
    assert!(
        !ada.source().await.contains(&token),
        "the token is shown once"
    );
    press(&ada, "form[action$='/revoke'] button").await;
    ada.wait_text("table", "Revoked").await;
    let r =
        e.s.http
            .get(format!("{}/v1/organizations/{org}", e.s.core()))
            .bearer_auth(&token)
            .send()
            .await
            .expect("the key at the gateway");
    assert_eq!(r.status(), 401);
    ada.c.goto(&format!("{base}/wallet")).await.expect("wallet");
    ada.heading("Ada Analytics").await;
    ada.check("wallet").await;
    for b in [ada, staff, bob] {
        b.c.clone().close().await.expect("close");
    }
}

#[tokio::test]
async fn a_person_sets_the_profile_ends_another_session_and_signs_in_with_a_second_factor() {
    let e = env().await;
    let mut b = browser("account").await;
    browser_sign_in(&b, &e, "grace@example.com", 1).await;
    // A second session, elsewhere (over the API).
    let other = mailed_session(&e, "grace@example.com", 2).await;

    // The profile: the time zone and language the pages follow.
    b.c.goto(&format!("{}/account", e.url))
        .await
        .expect("account");
    b.heading("Your account").await;
    b.check("profile").await;
    let tz = b.c.find(Locator::Id("p-tz")).await.expect("tz");
    tz.clear().await.expect("clear");
    tz.send_keys("Europe/Istanbul").await.expect("type");
    fill(&b, "p-name", &format!("Grace Hopper{}", enter())).await;
    assert_eq!(b.text("[role=status]").await, "Saved.");

    // Sessions: this one, and the other with its revoke button.
    b.c.goto(&format!("{}/account/sessions", e.url))
        .await
        .expect("sessions");
    let rows = b.text("table").await;
    assert!(rows.contains("This device"), "{rows}");
    assert!(rows.contains("+03"), "times in the person's zone: {rows}");
    b.check("sessions").await;
    press(&b, "form[action$='/revoke'] button").await;
    let gone = eventually(WAIT, || async {
        (!b.source().await.contains("/revoke")).then_some(())
    })
    .await;
    assert!(gone.is_some(), "the other session is gone");
    assert_eq!(e.s.get("/v1/auth/me", Some(&other)).await.status, 401);

    // Two-step verification: the key beside the QR code gives the codes.
    b.c.goto(&format!("{}/account/security", e.url))
        .await
        .expect("security");
    press(&b, "form[action$='/enroll'] button").await;
    let secret = b.text("#mfa-secret").await;
    let img =
        b.c.find(Locator::Css("img[src^='data:image/svg+xml;base64,']"))
            .await
            .expect("the QR code");
    assert!(img.attr("alt").await.expect("alt").is_some());
    b.check("mfa-enrol").await;
    b.type_here(&format!("{}{}", crate::mfa::code(&e.s, &secret), enter()))
        .await;
    let codes = b.text("#recovery-codes").await;
    assert_eq!(codes.lines().count(), 10, "{codes}");
    assert!(b.source().await.contains("Two-step verification is on."));
    b.check("mfa-recovery-codes").await;

    // Next sign-in: the link, then the code.
    press(&b, "form[action='/sign-out'] button").await;
    b.heading("Sign in").await;
    b.type_here(&format!("grace@example.com{}", enter())).await;
    b.heading("Check your mail").await;
    let link = mailed_link(&e, "grace@example.com", 3).await;
    b.c.goto(&link).await.expect("link");
    b.heading("Finish signing in").await;
    b.type_here(&enter()).await;
    b.heading("Two-step verification").await;
    b.check("mfa-step").await;
    crate::mfa::next_step(&e.s);
    b.type_here(&format!("{}{}", crate::mfa::code(&e.s, &secret), enter()))
        .await;
    b.heading("Organizations").await;
    b.c.clone().close().await.expect("close");
}

#[tokio::test]
async fn the_assistant_stages_a_credit_that_staff_confirm_and_one_they_cancel() {
    let e = env().await;
    let ada = mailed_session(&e, "ada@example.com", 1).await;
    let org = e.s.create_org(&ada, "Ada Trading", "TR").await;
    assert_eq!(org.status, 201, "{:?}", org.body);
    let org_id = org.text("id").to_owned();
    let balance = || async {
        let o =
            e.s.get(&format!("/v1/organizations/{org_id}"), Some(&ada))
                .await;
        o.body["wallet_balance_minor"].as_i64().expect("a balance")
    };

    let mut b = browser("assistant").await;
    browser_sign_in(&b, &e, "staff@example.com", 1).await;
    b.c.goto(&format!("{}/assistant", e.url))
        .await
        .expect("assistant");
    b.heading("Assistant").await;
    b.check("assistant").await;
    fill(&b, "a-message", "credit 100.00 TRY to Ada Trading").await;
    press(&b, "form[action='/assistant'] button[type=submit]").await;
    let summary = b.text("#staged-summary").await;
    assert!(summary.contains("Ada Trading"), "{summary}");
    b.check("assistant-staged").await;
    // Nothing runs before the confirmation.
    assert_eq!(balance().await, 0);
    press(&b, "button[value=confirm]").await;
    let done = b.text("[role=status]").await;
    assert!(done.starts_with("Done:"), "{done}");
    assert!(
        b.c.find(Locator::Id("staged-summary")).await.is_err(),
        "the card is gone"
    );
    assert_eq!(balance().await, 10_000);

    // A second one, cancelled: nothing moves.
    fill(&b, "a-message", "credit 5 TRY to Ada Trading").await;
    press(&b, "form[action='/assistant'] button[type=submit]").await;
    b.text("#staged-summary").await;
    press(&b, "button[value=cancel]").await;
    b.wait_text("[role=status]", "Cancelled:").await;
    assert_eq!(balance().await, 10_000);
    b.c.clone().close().await.expect("close");
}

/// Whether `html` shows a text of the other language (of at least four
/// characters, that differs between the two: a key left untranslated or a
/// literal in a template).
fn foreign_texts(html: &str, lang: &str) -> Vec<&'static str> {
    console::i18n::KEYS
        .iter()
        .filter(|(key, en, tr)| en != tr && !matches!(*key, "lang_name" | "other_lang"))
        .map(|(_, en, tr)| if lang == "tr" { *en } else { *tr })
        .filter(|text| text.chars().count() >= 4 && contains_words(html, text))
        .collect()
}

/// `text` in `html` as whole words (not "Profil" inside "Profile").
fn contains_words(html: &str, text: &str) -> bool {
    html.match_indices(text).any(|(at, _)| {
        let before = html[..at].chars().next_back();
        let after = html[at + text.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

#[tokio::test]
async fn every_page_renders_in_both_languages_with_no_text_of_the_other() {
    let e = env().await;
    let mut people = Vec::new();
    for email in ["ada@example.com", "staff@example.com"] {
        let mut v = Visitor::new(&e.url);
        let page = v.get("/sign-in").await;
        let csrf = csrf_in(&page.body);
        let sent = v
            .post("/sign-in", &[("csrf", csrf.as_str()), ("email", email)])
            .await;
        assert_eq!(sent.status, 200, "{}", sent.body);
        let link = mailed_link(&e, email, 1).await;
        let landing = v.get(link.strip_prefix(&e.url).expect("ours")).await;
        let token = link.rsplit("token=").next().expect("token");
        let done = v
            .post(
                "/sign-in/verify",
                &[("csrf", &csrf_in(&landing.body)), ("token", token)],
            )
            .await;
        assert_eq!(done.status, 303);
        people.push(v);
    }
    let mut staff = people.pop().expect("staff");
    let mut ada = people.pop().expect("ada");
    let orgs = ada.get("/orgs").await;
    let made = ada
        .post(
            "/orgs",
            &[
                ("csrf", csrf_in(&orgs.body).as_str()),
                ("name", "Çağ Ltd"),
                ("legal_type", "corporate"),
                ("country", "TR"),
            ],
        )
        .await;
    assert_eq!(made.status, 303);
    let org = made.headers["location"].to_str().expect("ascii").to_owned();
    let customer_pages = [
        "/orgs".to_owned(),
        org.clone(),
        format!("{org}/members"),
        format!("{org}/api-keys"),
        format!("{org}/kyc"),
        format!("{org}/wallet"),
        format!("{org}/billing"),
        format!("{org}/webhooks"),
        format!("{org}/projects"),
        format!("{org}/assets"),
        format!("{org}/ai"),
        format!("{org}/claims"),
        format!("{org}/servers"),
        "/account".into(),
        "/account/sessions".into(),
        "/account/memory".into(),
        "/account/security".into(),
        "/assistant".into(),
        "/device".into(),
        "/no/such/page".into(),
    ];
    let staff_pages = [
        "/staff".to_owned(),
        "/staff/kyc".into(),
        "/staff/orgs?q=a".into(),
        "/staff/users?q=a".into(),
        "/staff/clients".into(),
        "/staff/claims".into(),
        format!("/staff{org}"),
        "/staff/billing-runs".into(),
        "/staff/catalog".into(),
        "/staff/kb".into(),
        "/staff/proposals".into(),
        "/staff/model".into(),
        "/distributors".into(),
    ];
    let mut anonymous = Visitor::new(&e.url);
    for lang in ["tr", "en"] {
        for v in [&mut ada, &mut staff, &mut anonymous] {
            let switched = v.get(&format!("/lang/{lang}?back=/")).await;
            assert_eq!(switched.status, 303);
        }
        let mut seen = Vec::new();
        for path in &customer_pages {
            seen.push((path.clone(), ada.get(path).await));
        }
        for path in &staff_pages {
            seen.push((path.clone(), staff.get(path).await));
        }
        seen.push(("/sign-in".into(), anonymous.get("/sign-in").await));
        for (path, page) in &seen {
            assert!(
                page.status == 200 || (path == "/no/such/page" && page.status == 404),
                "{lang} {path}: {} {}",
                page.status,
                page.body
            );
            assert!(
                page.body.contains(&format!("<html lang=\"{lang}\">")),
                "{lang} {path}"
            );
            let foreign = foreign_texts(&page.body, lang);
            assert!(foreign.is_empty(), "{lang} {path} shows {foreign:?}");
        }
    }
}

/// POST a form to the gateway (no credentials): status and JSON.
async fn gateway_form(e: &Env, path: &str, body: String) -> (u16, Value) {
    let r =
        e.s.http
            .post(format!("{}{path}", e.s.core()))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .expect("the gateway answers");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_command_line_tool_is_connected_on_the_consoles_device_page() {
    let e = env().await;
    let staff = mailed_session(&e, "staff@example.com", 1).await;
    let c =
        e.s.post(
            "/v1/admin/oauth-clients",
            Some(&staff),
            json!({"name": "hub-cli", "kind": "public", "redirect_uris": ["http://127.0.0.1/cb"],
                   "scopes": ["openid", "email"]}),
        )
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    let client = c.text("id").to_owned();
    let (status, d) = gateway_form(
        &e,
        "/oauth/device_authorization",
        format!("client_id={client}&scope=openid%20email"),
    )
    .await;
    assert_eq!(status, 200, "{d}");
    let user_code = d["user_code"].as_str().expect("a user code").to_owned();
    let complete = d["verification_uri_complete"]
        .as_str()
        .expect("a URI")
        .to_owned();
    assert_eq!(complete, format!("{}/device?user_code={user_code}", e.url));

    // The person opens it, signs in, and lands back on the device page.
    let mut fay = Visitor::new(&e.url);
    let page_path = complete.strip_prefix(&e.url).expect("ours").to_owned();
    let first = fay.get(&page_path).await;
    assert_eq!(
        (first.status, first.headers["location"].to_str().expect("a")),
        (303, "/sign-in")
    );
    let csrf = csrf_in(&fay.get("/sign-in").await.body);
    fay.post(
        "/sign-in",
        &[("csrf", csrf.as_str()), ("email", "fay@example.com")],
    )
    .await;
    let link = mailed_link(&e, "fay@example.com", 1).await;
    let landing = fay.get(link.strip_prefix(&e.url).expect("ours")).await;
    let done = fay
        .post(
            "/sign-in/verify",
            &[
                ("csrf", &csrf_in(&landing.body)),
                ("token", link.rsplit("token=").next().expect("t")),
            ],
        )
        .await;
    assert_eq!(done.headers["location"].to_str().expect("a"), page_path);
    let form = fay.get(&page_path).await;
    assert_eq!(form.status, 200);
    assert!(
        form.body.contains(&format!("value=\"{user_code}\"")),
        "the code is filled in"
    );

    // The code shows what asks; allowing connects the device.
    let csrf = csrf_in(&form.body);
    let asked = fay
        .post(
            "/device",
            &[("csrf", csrf.as_str()), ("user_code", &user_code)],
        )
        .await;
    assert_eq!(asked.status, 200, "{}", asked.body);
    assert!(asked.body.contains("hub-cli") && asked.body.contains("See your email address"));
    let wrong = fay
        .post(
            "/device",
            &[("csrf", csrf.as_str()), ("user_code", "BCDF-GHJK")],
        )
        .await;
    assert_eq!(wrong.status, 404);
    assert!(wrong.body.contains("unknown or has expired"));
    let ok = fay
        .post(
            "/device/answer",
            &[
                ("csrf", csrf.as_str()),
                ("user_code", &user_code),
                ("decision", "allow"),
            ],
        )
        .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert!(ok.body.contains("Your device is connected"));
    e.s.clock.advance(time::Duration::seconds(6));
    let (status, tokens) = gateway_form(
        &e,
        "/oauth/token",
        format!(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code&client_id={client}&device_code={}",
            d["device_code"].as_str().expect("a device code")
        ),
    )
    .await;
    assert_eq!(status, 200, "{tokens}");
    assert!(tokens["access_token"].is_string());
}

#[tokio::test]
async fn staff_register_a_client_disable_a_person_and_suspend_an_organization_in_the_tower() {
    let e = env().await;
    let ada = mailed_session(&e, "ada@example.com", 1).await;
    let org = e.s.create_org(&ada, "Zed Corp", "DE").await;
    assert_eq!(org.status, 201, "{:?}", org.body);
    let mut b = browser("tower-admin").await;
    browser_sign_in(&b, &e, "staff@example.com", 1).await;

    // An OAuth client: its secret once.
    b.c.goto(&format!("{}/staff/clients", e.url))
        .await
        .expect("clients");
    b.heading("OAuth clients").await;
    fill(&b, "cl-name", "Wiki").await;
    fill(&b, "cl-redirects", "https://wiki.example.com/cb").await;
    press(&b, "input[name=scope][value=email]").await;
    press(&b, "form[action='/staff/clients'] button[type=submit]").await;
    let secret = b.text("#new-client-secret").await;
    assert!(secret.starts_with("hub_cs_"), "{secret}");
    let client_id = b.text("#new-client-id").await;
    b.check("client-registered").await;
    b.c.goto(&format!("{}/staff/clients", e.url))
        .await
        .expect("clients");
    let page = b.source().await;
    assert!(
        page.contains(&client_id) && !page.contains(&secret),
        "the secret is shown once"
    );
    press(&b, "form[action$='/retire'] button").await;
    b.wait_text("table", "Retired").await;

    // A person disabled: their session ends at once; enabled again.
    b.c.goto(&format!("{}/staff/users?q=ada", e.url))
        .await
        .expect("users");
    b.heading("Users").await;
    b.check("users").await;
    b.c.find(Locator::Css("input[name=reason]"))
        .await
        .expect("a reason")
        .send_keys("test of the tower")
        .await
        .expect("type");
    press(&b, "form[action$='/disable'] button").await;
    b.wait_text("section.card", "Disabled").await;
    assert_eq!(e.s.get("/v1/auth/me", Some(&ada)).await.status, 401);
    press(&b, "form[action$='/enable'] button").await;
    b.wait_text("section.card dl", "Active").await;

    // An organization suspended and reactivated.
    b.c.goto(&format!("{}/staff/orgs?q=Zed", e.url))
        .await
        .expect("orgs");
    b.c.find(Locator::Css("form[action$='/suspend'] input[name=reason]"))
        .await
        .expect("a reason")
        .send_keys("unpaid")
        .await
        .expect("type");
    press(&b, "form[action$='/suspend'] button").await;
    b.wait_text("table", "Suspended").await;
    b.check("org-suspended").await;
    press(&b, "form[action$='/reactivate'] button").await;
    b.wait_text("table", "Active").await;
    b.c.clone().close().await.expect("close");
}

/// A visitor signed in through the console's forms (its `n`th mail).
pub(crate) async fn visitor_signed_in(e: &Env, email: &str, n: usize) -> Visitor {
    let mut v = Visitor::new(&e.url);
    let csrf = csrf_in(&v.get("/sign-in").await.body);
    let sent = v
        .post("/sign-in", &[("csrf", csrf.as_str()), ("email", email)])
        .await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    let link = mailed_link(e, email, n).await;
    let landing = v.get(link.strip_prefix(&e.url).expect("ours")).await;
    let token = link.rsplit("token=").next().expect("token");
    let done = v
        .post(
            "/sign-in/verify",
            &[("csrf", &csrf_in(&landing.body)), ("token", token)],
        )
        .await;
    assert_eq!(done.status, 303);
    v
}

#[tokio::test]
async fn a_customer_reads_invoices_payments_and_the_print_preview_and_no_one_else_does() {
    let e = env().await;
    let ada = mailed_session(&e, "ada@example.com", 1).await;
    let staff = mailed_session(&e, "staff@example.com", 1).await;
    let org = e.s.create_org(&ada, "Ada Billing", "TR").await;
    let org = org.text("id").to_owned();
    let charge =
        e.s.post(
            &format!("/v1/admin/organizations/{org}/charges"),
            Some(&staff),
            json!({"description": "Server rent", "brand": "Servers", "amount_minor": 150_000}),
        )
        .await;
    assert_eq!(charge.status, 201, "{:?}", charge.body);
    let inv =
        e.s.post(
            &format!("/v1/admin/organizations/{org}/invoices"),
            Some(&staff),
            json!({}),
        )
        .await;
    assert_eq!(inv.status, 201, "{:?}", inv.body);
    let (inv_id, number) = (inv.text("id").to_owned(), inv.text("number").to_owned());
    let paid =
        e.s.post(
            &format!("/v1/admin/organizations/{org}/payments"),
            Some(&staff),
            json!({"amount_minor": 50_000, "currency": "TRY", "method": "bank_transfer",
                   "reference": "EFT 77", "received_at": "2026-11-20", "note": "",
                   "invoice_id": inv_id}),
        )
        .await;
    assert_eq!(paid.status, 201, "{:?}", paid.body);

    let mut v = visitor_signed_in(&e, "ada@example.com", 2).await;
    let page = v.get(&format!("/orgs/{org}/billing")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    for want in [
        number.as_str(),
        "Partly paid",
        "₺1,500.00",
        "₺500.00",
        "EFT 77",
    ] {
        assert!(page.body.contains(want), "{want} not on the billing page");
    }
    let preview_path = format!("/orgs/{org}/invoices/{inv_id}/preview");
    assert!(page.body.contains(&preview_path));
    let preview = v.get(&preview_path).await;
    assert_eq!(preview.status, 200);
    assert!(preview.body.contains(&number));
    assert_eq!(
        preview.headers["content-security-policy"],
        console::pages_preview_csp()
    );
    assert!(preview.headers["content-type"]
        .to_str()
        .expect("a")
        .starts_with("text/html"));

    // Someone else: the same 404 as no invoice at all.
    let mut bob = visitor_signed_in(&e, "bob@example.com", 1).await;
    assert_eq!(bob.get(&preview_path).await.status, 404);
    assert_eq!(bob.get(&format!("/orgs/{org}/billing")).await.status, 404);
}

#[tokio::test]
async fn a_customer_adds_a_webhook_with_its_secret_once_reads_its_log_and_removes_it() {
    let e = env().await;
    let ada = mailed_session(&e, "ada@example.com", 1).await;
    let org =
        e.s.create_org(&ada, "Ada Hooks", "DE")
            .await
            .text("id")
            .to_owned();
    let mut v = visitor_signed_in(&e, "ada@example.com", 2).await;
    let base = format!("/orgs/{org}/webhooks");
    let empty = v.get(&base).await;
    assert_eq!(empty.status, 200, "{}", empty.body);
    assert!(empty.body.contains("No endpoints yet."));

    // The SSRF guard's refusal, on the page with the URL as typed.
    let csrf = csrf_in(&empty.body);
    let metadata = "http://169.254.169.254/latest/meta-data";
    let refused = v
        .post(&base, &[("csrf", csrf.as_str()), ("url", metadata)])
        .await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(refused.body.contains(metadata), "the URL as typed");

    let made = v
        .post(
            &base,
            &[("csrf", csrf.as_str()), ("url", "http://127.0.0.1:9/hook")],
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    assert!(made.body.contains("whsec_"), "the secret once");
    let list = v.get(&base).await;
    assert!(list.body.contains("http://127.0.0.1:9/hook") && !list.body.contains("whsec_"));
    let at = list
        .body
        .find(&format!("{base}/"))
        .expect("the endpoint's link")
        + base.len()
        + 1;
    let endpoint = list.body[at..at + 36].to_owned();
    let log = v.get(&format!("{base}/{endpoint}")).await;
    assert_eq!(log.status, 200, "{}", log.body);
    assert!(log.body.contains("Nothing delivered yet."));

    // Not Bob's: his own organization's page does not show Ada's endpoint.
    let bob = mailed_session(&e, "bob@example.com", 1).await;
    let bob_org =
        e.s.create_org(&bob, "Bob Hooks", "DE")
            .await
            .text("id")
            .to_owned();
    let mut b = visitor_signed_in(&e, "bob@example.com", 2).await;
    assert_eq!(b.get(&base).await.status, 404);
    assert_eq!(
        b.get(&format!("/orgs/{bob_org}/webhooks/{endpoint}"))
            .await
            .status,
        404
    );

    let gone = v
        .post(
            &format!("{base}/{endpoint}/remove"),
            &[("csrf", csrf.as_str())],
        )
        .await;
    assert_eq!(gone.status, 303);
    assert!(v.get(&base).await.body.contains("No endpoints yet."));
}

#[tokio::test]
async fn a_person_writes_what_the_assistant_should_always_know() {
    let e = env().await;
    let mut v = visitor_signed_in(&e, "ada@example.com", 1).await;
    let page = v.get("/account/memory").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let note = "I prefer short answers & <b>plain</b> words.";
    let saved = v
        .post(
            "/account/memory",
            &[("csrf", &csrf_in(&page.body)), ("soul_md", note)],
        )
        .await;
    assert_eq!(saved.status, 200, "{}", saved.body);
    assert!(saved.body.contains("Saved."));
    // Shown escaped, as text.
    assert!(
        saved
            .body
            .contains("I prefer short answers &#38; &#60;b&#62;plain"),
        "{}",
        saved.body
    );
    assert!(
        !saved.body.contains("<b>plain"),
        "markup from a person is text"
    );
    let ada = mailed_session(&e, "ada@example.com", 2).await;
    let m = e.s.get("/v1/memory", Some(&ada)).await;
    assert_eq!(m.body["soul_md"], note);
}

fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(digest::digest(&digest::SHA256, verifier.as_bytes()).as_ref())
}

fn query_of(url: &str) -> HashMap<String, String> {
    reqwest::Url::parse(url)
        .expect("a URL")
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

#[tokio::test]
async fn a_product_signs_a_person_in_through_the_consoles_sign_in_and_consent_page() {
    let e = env().await;
    let staff = mailed_session(&e, "staff@example.com", 1).await;
    // A loopback redirect URI nothing listens on: the browser stops there
    // and the test reads the code from the address bar.
    let cb = format!(
        "http://127.0.0.1:{}/cb",
        tests_e2e::nats_server::free_port()
    );
    let c =
        e.s.post(
            "/v1/admin/oauth-clients",
            Some(&staff),
            json!({"name": "Grafana", "kind": "public", "first_party": false,
                   "redirect_uris": [cb], "scopes": ["openid", "email", "profile"]}),
        )
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    let client_id = c.text("id").to_owned();
    let verifier = format!("{}-{}", Uuid::new_v4().simple(), Uuid::new_v4().simple());
    let authorize = reqwest::Url::parse_with_params(
        &format!("{}/oauth/authorize", e.s.core()),
        &[
            ("client_id", client_id.as_str()),
            ("redirect_uri", cb.as_str()),
            ("response_type", "code"),
            ("scope", "openid email"),
            ("state", "st-42"),
            ("nonce", "n-42"),
            ("code_challenge", &challenge(&verifier)),
            ("code_challenge_method", "S256"),
        ],
    )
    .expect("url");

    let mut b = browser("oidc-consent").await;
    b.c.goto(authorize.as_str()).await.expect("authorize");
    // The provider sent the browser to the console, which asks for a sign-in.
    b.heading("Sign in").await;
    b.type_here(&format!("grace@example.com{}", enter())).await;
    b.heading("Check your mail").await;
    let link = mailed_link(&e, "grace@example.com", 1).await;
    b.c.goto(&link).await.expect("open the link");
    b.heading("Finish signing in").await;
    b.type_here(&enter()).await;
    // Back to the request: a third-party client asks once.
    b.heading("Allow access to your account?").await;
    let page = b.source().await;
    assert!(page.contains("Grafana"), "the client's name is shown");
    assert!(
        page.contains("See your email address"),
        "the scopes are shown"
    );
    b.check("consent").await;
    b.c.find(Locator::Css("input[value=allow] ~ button"))
        .await
        .expect("the allow button")
        .send_keys(&enter())
        .await
        .expect("press allow");
    let landed = eventually(WAIT, || async {
        let u = b.c.current_url().await.ok()?;
        u.as_str().starts_with(&cb).then(|| u.to_string())
    })
    .await
    .expect("the browser comes back to the product");
    let back = query_of(&landed);
    assert_eq!(back["state"], "st-42");
    assert_eq!(back["iss"], "http://localhost:8080");
    b.c.clone().close().await.expect("close the browser");

    // The product's back end exchanges the code; the ID token is Grace's.
    let body = format!(
        "grant_type=authorization_code&client_id={client_id}&code={}&redirect_uri={}&code_verifier={verifier}",
        back["code"],
        url_enc(&cb)
    );
    let r =
        e.s.http
            .post(format!("{}/oauth/token", e.s.core()))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .expect("token");
    let status = r.status().as_u16();
    let tokens: Value = r.json().await.expect("json");
    assert_eq!(status, 200, "{tokens}");
    let id_token = tokens["id_token"].as_str().expect("an ID token");
    let claims: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(id_token.split('.').nth(1).expect("claims"))
            .expect("base64"),
    )
    .expect("json");
    assert_eq!(claims["email"], "grace@example.com");
    assert_eq!(claims["nonce"], "n-42");
    assert_eq!(claims["aud"], json!(client_id), "{claims}");
}

fn url_enc(s: &str) -> String {
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

/// A visitor over plain HTTP: its cookie, carried by hand.
pub(crate) struct Visitor {
    http: reqwest::Client,
    pub(crate) base: String,
    pub(crate) cookie: String,
}

pub(crate) struct Page {
    pub(crate) status: u16,
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) body: String,
}

impl Visitor {
    pub(crate) fn new(base: &str) -> Visitor {
        Visitor {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("client"),
            base: base.to_owned(),
            cookie: String::new(),
        }
    }

    async fn send(&mut self, rb: reqwest::RequestBuilder) -> Page {
        let rb = if self.cookie.is_empty() {
            rb
        } else {
            rb.header("cookie", &self.cookie)
        };
        let r = rb.send().await.expect("the console answers");
        if let Some(c) = r.headers().get("set-cookie").and_then(|v| v.to_str().ok()) {
            self.cookie = c.split(';').next().unwrap_or("").to_owned();
        }
        Page {
            status: r.status().as_u16(),
            headers: r.headers().clone(),
            body: r.text().await.unwrap_or_default(),
        }
    }

    pub(crate) async fn get(&mut self, path: &str) -> Page {
        let rb = self.http.get(format!("{}{path}", self.base));
        self.send(rb).await
    }

    pub(crate) async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        let body: String = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let rb = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        self.send(rb).await
    }
}

/// The form token in a page.
pub(crate) fn csrf_in(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("a form token") + 19;
    html[at..].split('"').next().expect("value").to_owned()
}

pub(crate) fn assert_guarded(p: &Page, what: &str) {
    let csp = p
        .headers
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("{what}: no Content-Security-Policy"));
    assert_eq!(csp, console::CSP, "{what}");
    assert!(csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"));
    assert!(!csp.contains("unsafe-inline"), "{what}: {csp}");
    assert_eq!(p.headers["x-frame-options"], "DENY", "{what}");
    assert_eq!(p.headers["referrer-policy"], "no-referrer", "{what}");
    assert!(
        !p.body.contains("<script>") && !inline_handler(&p.body),
        "{what}: inline script"
    );
}

#[tokio::test]
async fn the_console_refuses_forms_without_their_token_and_shows_no_one_elses_organization_until_invited(
) {
    let e = env().await;
    let mut v = Visitor::new(&e.url);

    // Every answer carries the policy: pages, the stylesheet, a 404.
    let first = v.get("/sign-in").await;
    assert_eq!(first.status, 200);
    assert_guarded(&first, "the sign-in page");
    assert!(first.headers["set-cookie"]
        .to_str()
        .expect("ascii")
        .contains("HttpOnly"));
    for path in ["/", "/assets/console.css", "/no/such/page", "/orgs"] {
        let p = v.get(path).await;
        assert_guarded(&p, path);
    }
    assert_eq!(v.get("/no/such/page").await.status, 404);

    // A form without the visitor's token does nothing: no token, a wrong
    // one, another visitor's.
    let token = csrf_in(&v.get("/sign-in").await.body);
    let mut other = Visitor::new(&e.url);
    let others = csrf_in(&other.get("/sign-in").await.body);
    let wrong = "x".repeat(43);
    for (case, sent) in [
        ("none", ""),
        ("wrong", wrong.as_str()),
        ("another visitor's", others.as_str()),
    ] {
        let p = v
            .post(
                "/sign-in",
                &[("csrf", sent), ("email", "mallory@example.com")],
            )
            .await;
        assert_eq!(p.status, 403, "{case}: {}", p.body);
        assert_guarded(&p, case);
    }
    // With its token the same form mails a link: once that mail is here,
    // none went to the refused address.
    let ok = v
        .post(
            "/sign-in",
            &[("csrf", token.as_str()), ("email", "alice@example.com")],
        )
        .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let link = mailed_link(&e, "alice@example.com", 1).await;
    let all = crate::mail::messages(&e.out);
    assert!(
        !all.iter()
            .any(|m| m.to_string().contains("mallory@example.com")),
        "a refused form mailed a link"
    );

    // Alice signs in over HTTP, the way the browser does.
    let landing = v
        .get(link.strip_prefix(&e.url).expect("a console link"))
        .await;
    assert_eq!(landing.status, 200);
    let token_param = link.rsplit("token=").next().expect("token");
    let done = v
        .post(
            "/sign-in/verify",
            &[("csrf", &csrf_in(&landing.body)), ("token", token_param)],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(done.headers["location"], "/orgs");
    let orgs = v.get("/orgs").await;
    assert_eq!(orgs.status, 200);
    assert!(!orgs.body.contains("sess_"), "a session token in the page");
    // Its Server-Timing tells the API's time (the page called it) from the
    // console's own; the sign-in page calls nothing.
    let timing = |p: &Page| {
        p.headers
            .get("server-timing")
            .and_then(|v| v.to_str().ok())
            .and_then(console::timing::parse)
            .expect("a Server-Timing with api and console")
    };
    let (api, own) = timing(&orgs);
    assert!(api > 0.0 && own >= 0.0, "{api} {own}");
    assert_eq!(timing(&v.get("/sign-in").await).0, 0.0);
    assert!(
        !v.cookie.contains("sess_"),
        "a readable session token in the cookie"
    );

    // Bob's organization is not Alice's to see: the same 404 as no page.
    let bob = mailed_session(&e, "bob@example.com", 1).await;
    let b_org = e.s.create_org(&bob, "Bobs Secret Things", "TR").await;
    assert_eq!(b_org.status, 201, "{:?}", b_org.body);
    let theirs = v.get(&format!("/orgs/{}", b_org.text("id"))).await;
    assert_eq!(theirs.status, 404);
    assert!(!theirs.body.contains("Bobs Secret Things"));
    assert_eq!(v.get("/orgs/not-an-id").await.status, 404);

    // Until Bob invites her: the mailed invite opens the console's page,
    // whose button makes her a member.
    let inv =
        e.s.post(
            &format!("/v1/organizations/{}/invites", b_org.text("id")),
            Some(&bob),
            json!({"email": "alice@example.com", "role": "developer"}),
        )
        .await;
    assert_eq!(inv.status, 201, "{:?}", inv.body);
    let mails = arrived(&e.out, "alice@example.com", 2).await;
    let text = mails[1]["text"].as_str().expect("text").to_owned();
    let accept_base = format!("{}/invites/accept?token=", e.url);
    let accept_link = text
        .lines()
        .find(|l| l.starts_with(&accept_base))
        .unwrap_or_else(|| panic!("no console invite link in {text:?}"))
        .trim()
        .to_owned();
    let page = v.get(accept_link.strip_prefix(&e.url).expect("ours")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let invite_token = accept_link.rsplit("token=").next().expect("token");
    // A form posted by a browser whose session is gone comes back to its
    // page after signing in (not to a POST-only path).
    let mut late = Visitor::new(&e.url);
    let fresh = csrf_in(&late.get("/sign-in").await.body);
    let bounced = late
        .post(
            "/invites/accept",
            &[("csrf", fresh.as_str()), ("token", invite_token)],
        )
        .await;
    assert_eq!(bounced.status, 303);
    assert_eq!(bounced.headers["location"], "/sign-in");
    let sent = late
        .post(
            "/sign-in",
            &[("csrf", fresh.as_str()), ("email", "alice@example.com")],
        )
        .await;
    assert_eq!(sent.status, 200);
    let again = mailed_link(&e, "alice@example.com", 3).await;
    let landing = late.get(again.strip_prefix(&e.url).expect("ours")).await;
    let back = late
        .post(
            "/sign-in/verify",
            &[
                ("csrf", &csrf_in(&landing.body)),
                ("token", again.rsplit("token=").next().expect("t")),
            ],
        )
        .await;
    assert_eq!(back.status, 303);
    assert_eq!(
        back.headers["location"].to_str().expect("ascii"),
        format!("/invites/accept?token={invite_token}")
    );
    // A mailed sign-in link opened while signed in never swaps the account.
    let swap = v.get(again.strip_prefix(&e.url).expect("ours")).await;
    assert_eq!(swap.status, 409);
    assert!(swap.body.contains("already signed in"), "{}", swap.body);
    assert!(
        !swap.body.contains("/sign-in/verify"),
        "no button that spends the link"
    );
    let joined = v
        .post(
            "/invites/accept",
            &[("csrf", &csrf_in(&page.body)), ("token", invite_token)],
        )
        .await;
    assert_eq!(joined.status, 303, "{}", joined.body);
    let theirs = v
        .get(joined.headers["location"].to_str().expect("ascii"))
        .await;
    assert_eq!(theirs.status, 200);
    assert!(theirs.body.contains("Bobs Secret Things") && theirs.body.contains("Developer"));

    // Signing out takes the token too; an old form's token no longer works.
    let before = csrf_in(&orgs.body);
    let out = v.post("/sign-out", &[("csrf", before.as_str())]).await;
    assert_eq!(out.status, 303);
    let again = v.post("/sign-out", &[("csrf", before.as_str())]).await;
    assert_eq!(again.status, 403);
    let gone = v.get("/orgs").await;
    assert_eq!(gone.status, 303);
    assert_eq!(gone.headers["location"], "/sign-in");
}
