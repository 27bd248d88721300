//! Sign-in mail against a real SMTP server (aiosmtpd, `tests-e2e/smtp_sink.py`)
//! started by each test: the link arrives in both parts and signs in, STARTTLS
//! with a test CA and credentials, the rate limits still hold, and a dead
//! server loses nothing and sends nothing twice once it is back.

use serde_json::Value;
use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};
use tests_e2e::Json;
use tests_e2e::{eventually, random_ip, StackOptions, TestStack};
use uuid::Uuid;

pub(crate) const WAIT: Duration = Duration::from_secs(60);
const LINK_BASE: &str = "https://app.test/sign-in?lang=en";

/// The SMTP sink: a child process, killed on drop.
pub(crate) struct Sink {
    child: Child,
    pub(crate) port: u16,
    out: PathBuf,
}

pub(crate) struct SinkOptions {
    pub(crate) port: u16,
    pub(crate) starttls: Option<PathBuf>,
    pub(crate) auth: Option<(&'static str, &'static str)>,
}

fn python() -> String {
    std::env::var("SMTP_SINK_PYTHON").unwrap_or_else(|_| {
        if Path::new("/usr/bin/python3").exists() {
            "/usr/bin/python3".into()
        } else {
            "python3".into()
        }
    })
}

impl Sink {
    /// A sink on a free port without TLS or authentication, and the
    /// `mail.smtp_url` that reaches it.
    pub(crate) async fn plain(out: &Path) -> (Sink, String) {
        let sink = Sink::start(
            out,
            SinkOptions {
                port: 0,
                starttls: None,
                auth: None,
            },
        )
        .await;
        let url = format!("smtp://127.0.0.1:{}?tls=none", sink.port);
        (sink, url)
    }

    pub(crate) async fn start(out: &Path, o: SinkOptions) -> Sink {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("smtp_sink.py");
        // Its own log beside the messages (TLS refusals print tracebacks).
        let log = std::fs::File::create(out.with_extension("log")).expect("sink log");
        let mut cmd = Command::new(python());
        cmd.arg(script)
            .arg("--out")
            .arg(out)
            .arg("--port")
            .arg(o.port.to_string())
            .stdout(Stdio::piped())
            .stderr(log);
        if let Some(ca) = &o.starttls {
            cmd.arg("--starttls").arg(ca);
        }
        if let Some((u, p)) = o.auth {
            // `--x=value`: a generated password may begin with '-'.
            cmd.arg(format!("--user={u}"))
                .arg(format!("--password={p}"));
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting the SMTP sink ({}): {e}", python()));
        let stdout = child.stdout.take().expect("sink stdout");
        let port = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).ok()?;
            line.trim().strip_prefix("PORT ")?.parse::<u16>().ok()
        })
        .await
        .ok()
        .flatten()
        .expect("the SMTP sink did not start (python3-aiosmtpd, python3-trustme: scripts/deps.sh)");
        Sink {
            child,
            port,
            out: out.to_owned(),
        }
    }

    /// Every message accepted so far, oldest first.
    fn messages(&self) -> Vec<Value> {
        messages(&self.out)
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn messages(out: &Path) -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(out)
        .map(|d| d.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "json"));
    files.sort();
    files
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).expect("read message");
            serde_json::from_str(&text).expect("message json")
        })
        .collect()
}

pub(crate) fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hub-mail-{name}-{}", Uuid::new_v4().simple()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// identity's settings for mail through `smtp_url` (echo off: production-like).
pub(crate) fn mail_toml(smtp_url: &str, ca_file: Option<&Path>) -> String {
    mail_toml_linking(smtp_url, ca_file, LINK_BASE)
}

/// The same, with the mailed links built from `link_base` (the console's
/// sign-in page).
pub(crate) fn mail_toml_linking(smtp_url: &str, ca_file: Option<&Path>, link_base: &str) -> String {
    let key = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        [Uuid::new_v4().into_bytes(), Uuid::new_v4().into_bytes()].concat(),
    );
    format!(
        "[auth]\necho_dev_token = false\n\
         [mail]\nsmtp_url = {smtp_url:?}\nfrom = \"Hub <no-reply@hub.test>\"\n\
         link_base_url = {link_base:?}\nca_file = {ca:?}\ntimeout_ms = 5000\nlease_ms = 15000\n\
         poll_ms = 100\nretry_base_ms = 100\nretry_max_ms = 400\n\
         [sealing]\nkeys = [\"m1:{key}\"]\n",
        ca = ca_file.map(|p| p.display().to_string()).unwrap_or_default()
    )
}

async fn stack(identity_toml: String) -> TestStack {
    TestStack::spawn_with(StackOptions {
        identity_toml,
        ..Default::default()
    })
    .await
}

/// The token in a mailed link (the text part's line that starts with the base).
fn token_in(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.starts_with(LINK_BASE))
        .unwrap_or_else(|| panic!("no link in {text:?}"));
    line.strip_prefix(&format!("{LINK_BASE}&token="))
        .unwrap_or_else(|| panic!("the link is not built from link_base_url: {line}"))
        .trim()
        .to_owned()
}

fn addressed_to<'a>(msgs: &'a [Value], email: &str) -> Vec<&'a Value> {
    msgs.iter()
        .filter(|m| {
            m["rcpt_tos"]
                .as_array()
                .is_some_and(|r| r.len() == 1 && r[0] == email)
        })
        .collect()
}

/// Wait until `n` messages to `email` arrived; return them.
pub(crate) async fn arrived(sink_out: &Path, email: &str, n: usize) -> Vec<Value> {
    let out = sink_out.to_owned();
    eventually(WAIT, || {
        let out = out.clone();
        async move {
            let all = messages(&out);
            let mine: Vec<Value> = addressed_to(&all, email).into_iter().cloned().collect();
            (mine.len() >= n).then_some(mine)
        }
    })
    .await
    .unwrap_or_else(|| panic!("{n} mail(s) to {email} did not arrive"))
}

#[tokio::test]
async fn a_mailed_link_arrives_over_starttls_in_both_parts_and_signs_in() {
    let out = temp_dir("tls-out");
    let ca_dir = temp_dir("tls-ca");
    let sink = Sink::start(
        &out,
        SinkOptions {
            port: 0,
            starttls: Some(ca_dir.clone()),
            auth: Some(("mailer", "s3cr%et")),
        },
    )
    .await;
    // The password is percent-encoded in the URL.
    let url = format!(
        "smtp://mailer:s3cr%25et@127.0.0.1:{}?tls=required",
        sink.port
    );
    let s = stack(mail_toml(&url, Some(&ca_dir.join("ca.pem")))).await;

    let ip = random_ip();
    let r = s.request_link_from("Reader@Example.com", &ip).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        r.body,
        serde_json::json!({"status": "sent"}),
        "no token echoed"
    );

    let mail = arrived(&out, "reader@example.com", 1).await.remove(0);
    assert_eq!(mail["tls"], true, "sent after STARTTLS");
    assert_eq!(mail["authenticated"], true, "with the URL's credentials");
    assert_eq!(mail["content_type"], "multipart/alternative");
    assert_eq!(mail["from"], "Hub <no-reply@hub.test>");
    assert_eq!(mail["to"], "reader@example.com");
    let text = mail["text"].as_str().expect("a text/plain part");
    let html = mail["html"].as_str().expect("a text/html part");
    let token = token_in(text);
    assert!(token.starts_with("mlt_"), "{token}");
    let href = format!(
        "href=\"{}\"",
        format!("{LINK_BASE}&token={token}").replace('&', "&amp;")
    );
    assert!(html.contains(&href), "the HTML part links to it: {html}");

    // The mailed token signs in, once.
    let v = s.verify_from(&token, &ip).await;
    assert_eq!(v.status, 200, "{:?}", v.body);
    let session = v.body["session_token"]
        .as_str()
        .expect("session")
        .to_owned();
    let me = s.get("/v1/auth/me", Some(&session)).await;
    assert_eq!(me.body["email"], "reader@example.com");
    assert_eq!(s.verify_from(&token, &ip).await.status, 401);

    // Sent: the queue row keeps no token, sealed or not. The sink has the
    // mail before the sender records it, so wait for the record first.
    let (sealed, dump) = eventually(WAIT, || async {
        let row = sqlx::query!(
            r#"SELECT sent_at IS NOT NULL AS "sent!", sealed IS NOT NULL AS "sealed!", q::text AS "dump!"
                 FROM identity.mail_queue q"#
        )
        .fetch_one(&s.db)
        .await
        .ok()?;
        row.sent.then_some((row.sealed, row.dump))
    })
    .await
    .expect("the mail row marked sent");
    assert!(!sealed, "sent, the sealed token cleared");
    assert!(!dump.contains(&token), "no plaintext token in the queue");
}

#[tokio::test]
async fn an_untrusted_certificate_is_not_sent_to() {
    // Same STARTTLS sink, but identity does not trust its CA: nothing is
    // delivered, the row waits with the TLS error.
    let out = temp_dir("untrusted-out");
    let sink = Sink::start(
        &out,
        SinkOptions {
            port: 0,
            starttls: Some(temp_dir("untrusted-ca")),
            auth: None,
        },
    )
    .await;
    let url = format!("smtp://127.0.0.1:{}?tls=required", sink.port);
    let s = stack(mail_toml(&url, None)).await;
    let r = s
        .request_link_from("careful@example.com", &random_ip())
        .await;
    assert_eq!(r.status, 200);
    let err = eventually(WAIT, || async {
        sqlx::query_scalar!("SELECT last_error FROM identity.mail_queue WHERE attempts >= 2")
            .fetch_optional(&s.db)
            .await
            .ok()
            .flatten()
            .flatten()
    })
    .await
    .expect("tried twice and failed");
    assert!(err.contains("smtp"), "{err}");
    assert!(sink.messages().is_empty(), "nothing delivered");
}

#[tokio::test]
async fn mailed_links_keep_the_five_per_email_and_twenty_per_ip_limits() {
    let out = temp_dir("limits-out");
    let (sink, url) = Sink::plain(&out).await;
    let s = stack(mail_toml(&url, None)).await;

    for i in 0..5 {
        let r = s.request_link_from("five@example.com", &random_ip()).await;
        assert_eq!(r.status, 200, "request {i}");
    }
    let r = s.request_link_from("five@example.com", &random_ip()).await;
    assert_eq!(r.status, 429);

    let ip = random_ip();
    for i in 0..20 {
        let r = s
            .request_link_from(&format!("ip{i}@example.com"), &ip)
            .await;
        assert_eq!(r.status, 200, "request {i}");
    }
    assert_eq!(
        s.request_link_from("ip20@example.com", &ip).await.status,
        429
    );

    // Every allowed link arrives; then a marker mailed after all of them, and
    // only then the count: nothing for the refused requests.
    let five = arrived(&out, "five@example.com", 5).await;
    for i in 0..20 {
        arrived(&out, &format!("ip{i}@example.com"), 1).await;
    }
    assert_eq!(
        s.request_link_from("marker@example.com", &random_ip())
            .await
            .status,
        200
    );
    arrived(&out, "marker@example.com", 1).await;
    let all = sink.messages();
    assert_eq!(addressed_to(&all, "five@example.com").len(), 5);
    assert!(addressed_to(&all, "ip20@example.com").is_empty());
    assert_eq!(all.len(), 5 + 20 + 1, "one mail per allowed request");
    let tokens: std::collections::BTreeSet<String> =
        five.iter().map(|m| token_in(m.text("text"))).collect();
    assert_eq!(tokens.len(), 5, "five distinct links");
}

#[tokio::test]
async fn a_dead_smtp_server_loses_nothing_and_sends_each_link_once() {
    // A port with nothing listening on it (yet).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("smtp://127.0.0.1:{port}?tls=none");
    // The token echoed too here, to look for it in the queue's raw bytes.
    let toml = mail_toml(&url, None).replace("echo_dev_token = false", "echo_dev_token = true");
    let s = stack(toml).await;

    // request-link answers while the server is down.
    let emails: Vec<String> = (0..3).map(|i| format!("patient{i}@example.com")).collect();
    let mut echoed = BTreeMap::new();
    for e in &emails {
        let r = s.request_link_from(e, &random_ip()).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.body["status"], "sent");
        echoed.insert(
            e.clone(),
            r.body["dev_token"].as_str().expect("echo").to_owned(),
        );
    }
    // Waiting rows hold the token sealed: not in the raw bytes of any column.
    let rows: Vec<(Option<Vec<u8>>, Vec<u8>, String)> = sqlx::query!(
        r#"SELECT sealed, token_hash AS "token_hash!", recipient FROM identity.mail_queue"#
    )
    .fetch_all(&s.db)
    .await
    .expect("queue rows")
    .into_iter()
    .map(|r| (r.sealed, r.token_hash, r.recipient))
    .collect();
    assert_eq!(rows.len(), 3);
    for (sealed, hash, recipient) in &rows {
        let token = echoed[recipient].as_bytes();
        let secret = &token[4..];
        let sealed = sealed.as_ref().expect("the token waits, sealed");
        assert!(sealed.len() > secret.len(), "a sealed token is stored");
        for bytes in [sealed, hash] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret),
                "plaintext token"
            );
        }
    }
    // The worker tried every one and failed (a positive marker), none sent.
    eventually(WAIT, || async {
        let (failed, sent): (i64, i64) = sqlx::query!(
        r#"SELECT count(*) FILTER (WHERE attempts >= 1 AND last_error IS NOT NULL) AS "c0!", count(*) FILTER (WHERE sent_at IS NOT NULL) AS "c1!" FROM identity.mail_queue"#,
    )
        .fetch_one(&s.db)
        .await.map(|r| (r.c0, r.c1))
        .ok()?;
        assert_eq!(sent, 0, "nothing can have been sent");
        (failed == 3).then_some(())
    })
    .await
    .expect("every mail tried while the server was down");

    // The server comes up on that port: every queued link arrives.
    let out = temp_dir("dead-out");
    let sink = Sink::start(
        &out,
        SinkOptions {
            port,
            starttls: None,
            auth: None,
        },
    )
    .await;
    let mut tokens = BTreeMap::new();
    for e in &emails {
        let m = arrived(&out, e, 1).await.remove(0);
        tokens.insert(e.clone(), token_in(m.text("text")));
    }
    // All marked sent, then a marker mailed after them: still one mail each.
    eventually(WAIT, || async {
        let unsent: i64 = sqlx::query_scalar!(
            r#"SELECT count(*) AS "v!" FROM identity.mail_queue WHERE sent_at IS NULL"#,
        )
        .fetch_one(&s.db)
        .await
        .ok()?;
        (unsent == 0).then_some(())
    })
    .await
    .expect("all marked sent");
    assert_eq!(
        s.request_link_from("marker@example.com", &random_ip())
            .await
            .status,
        200
    );
    arrived(&out, "marker@example.com", 1).await;
    let all = sink.messages();
    for e in &emails {
        assert_eq!(addressed_to(&all, e).len(), 1, "{e}: exactly once");
    }
    assert_eq!(all.len(), emails.len() + 1);
    // Each late link is the one issued, and still signs in.
    assert_eq!(tokens, echoed);
    for (e, t) in &tokens {
        let v = s.verify_from(t, &random_ip()).await;
        assert_eq!(v.status, 200, "{e}: {:?}", v.body);
    }
}

#[tokio::test]
async fn an_invite_is_mailed_with_its_accept_link_and_an_accepted_one_is_not() {
    let out = temp_dir("invite-out");
    let (sink, url) = Sink::plain(&out).await;
    // Tokens echoed here (the owner signs in through the helper); the accept
    // page of the deployment's own.
    let toml = mail_toml(&url, None).replace("echo_dev_token = false", "echo_dev_token = true")
        + "[invites]\naccept_base_url = \"https://app.test/join?lang=en\"\n";
    let s = stack(toml).await;
    let (owner, org) = s.org_with_owner("mail-inviter@example.com").await;
    let r = s
        .post(
            &format!("/v1/organizations/{org}/invites"),
            Some(&owner),
            serde_json::json!({"email": "Guest@Example.com", "role": "developer"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let accept_url = r.body["accept_url"]
        .as_str()
        .expect("accept_url")
        .to_owned();
    assert!(
        accept_url.starts_with("https://app.test/join?lang=en&token=inv_"),
        "{accept_url}"
    );

    let mail = arrived(&out, "guest@example.com", 1).await.remove(0);
    assert_eq!(mail["from"], "Hub <no-reply@hub.test>");
    let text = mail["text"].as_str().expect("a text/plain part");
    let html = mail["html"].as_str().expect("a text/html part");
    assert!(
        text.lines().any(|l| l.trim() == accept_url),
        "the accept link in the text: {text}"
    );
    assert!(
        html.contains(&accept_url.replace('&', "&amp;")),
        "and in the HTML: {html}"
    );
    // Sent: the queue keeps no token. The sink has the mail before the
    // sender records it, so wait for the record first.
    let sealed = eventually(WAIT, || async {
        let row = sqlx::query!(
            r#"SELECT sent_at IS NOT NULL AS "sent!", sealed IS NOT NULL AS "sealed!"
                 FROM identity.mail_queue WHERE kind = 'invite'"#
        )
        .fetch_one(&s.db)
        .await
        .ok()?;
        row.sent.then_some(row.sealed)
    })
    .await
    .expect("the invite's mail row marked sent");
    assert!(!sealed, "sent, the sealed token cleared");

    // An invite settled before its mail went out is dropped, not sent late.
    drop(sink);
    let second = s
        .post(
            &format!("/v1/organizations/{org}/invites"),
            Some(&owner),
            serde_json::json!({"email": "late@example.com", "role": "visitor"}),
        )
        .await;
    assert_eq!(second.status, 201, "{:?}", second.body);
    let id = second.body["id"].as_str().expect("id");
    let revoked = s
        .delete(
            &format!("/v1/organizations/{org}/invites/{id}"),
            Some(&owner),
        )
        .await;
    assert_eq!(revoked.status, 200, "{:?}", revoked.body);
    let dropped = eventually(WAIT, || async {
        let n = sqlx::query_scalar!(
            r#"SELECT count(*) AS "n!" FROM identity.mail_queue
                 WHERE kind = 'invite' AND recipient = 'late@example.com' AND dropped_at IS NOT NULL"#
        )
        .fetch_one(&s.db)
        .await
        .ok()?;
        (n == 1).then_some(())
    })
    .await;
    assert!(dropped.is_some(), "the revoked invite's mail was dropped");
}
