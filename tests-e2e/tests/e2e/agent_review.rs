//! The assistant under the issue-15 review: a confirmation whose outcome is
//! not known (the wallet row held past the agent's peer timeout) is not
//! reported failed, stays confirmable, and credits exactly once; closing a
//! conversation sends a bounded transcript and pays for the summary in AI
//! tokens; curation uses the model at most once per interval per user; and
//! model calls slower than anything (held at a gate) never hold the agent's
//! database connections, so a small pool keeps answering.

use actix_web::{web, App, HttpResponse, HttpServer};
use serde_json::{json, Value};
use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc, Mutex,
};
use std::time::Duration;
use tests_e2e::Json;
use tests_e2e::{eventually, Resp, StackOptions, TestStack};
use tokio::sync::Semaphore;

async fn ask(s: &TestStack, token: &str, body: Value) -> Resp {
    let r = s.post("/v1/agent", Some(token), body).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r
}

async fn confirm(s: &TestStack, token: &str, id: &str) -> Resp {
    s.post(
        "/v1/agent/confirm",
        Some(token),
        json!({ "confirmation_id": id }),
    )
    .await
}

async fn org_id(s: &TestStack, token: &str, name: &str) -> String {
    let r = s.create_org(token, name, "TR").await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    r.text("id").to_owned()
}

async fn tokens(s: &TestStack, token: &str, org: &str) -> i64 {
    let t = s
        .get(&format!("/v1/organizations/{org}/tokens"), Some(token))
        .await;
    t.body["balance"].as_i64().unwrap_or(-1)
}

fn text(r: &Resp, k: &str) -> String {
    r.text(k).to_owned()
}

#[tokio::test]
async fn a_confirmation_that_times_out_is_not_failed_and_credits_exactly_once() {
    // The agent gives up on org-billing after 3 s (production: 5 s).
    let s = TestStack::spawn_with(StackOptions {
        agent_toml: "[org_billing]\ntimeout_ms = 3000\n".into(),
        ..Default::default()
    })
    .await;
    let staff = s.sign_in("staff@example.com").await;
    let owner = s.sign_in("held-wallet@example.com").await;
    let org = org_id(&s, &owner, "Held Corp").await;
    let staged = ask(
        &s,
        &staff,
        json!({"message": "credit 100 TRY to Held Corp"}),
    )
    .await;
    assert_eq!(
        staged.body["tier"], "confirmation_required",
        "{:?}",
        staged.body
    );
    let id = text(&staged, "confirmation_id");

    // Someone holds the wallet row (as a long transaction would).
    let mut lock = s.db.begin().await.expect("a transaction");
    sqlx::query!(
        r#"SELECT 1 AS "one!" FROM org_billing.wallets WHERE org_id = $1::uuid FOR UPDATE"#,
        uuid::Uuid::parse_str(&org).expect("a uuid"),
    )
    .fetch_optional(&mut *lock)
    .await
    .expect("the wallet row, locked");

    let first = confirm(&s, &staff, &id);
    let meanwhile = async {
        // The credit is at org-billing, waiting for the row ...
        let waiting = eventually(Duration::from_secs(20), || async {
            let n: i64 = sqlx::query_scalar!(
                r#"SELECT count(*) AS "v!" FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock'"#,
            )
            .fetch_one(&s.db)
            .await
            .expect("the query");
            (n > 0).then_some(())
        })
        .await;
        // ... and a second confirmation meanwhile does not run it again.
        (waiting, confirm(&s, &staff, &id).await)
    };
    let (first, (waiting, concurrent)) = tokio::join!(first, meanwhile);
    assert!(waiting.is_some(), "the credit waits for the wallet row");
    assert_eq!(
        (concurrent.status, concurrent.error()),
        (
            409,
            "this action is being carried out now; confirm it again in a moment to learn its outcome"
        )
    );
    // Not "failed", not "stage it again": not known yet, confirm again.
    assert_eq!(first.status, 202, "{:?}", first.body);
    assert_eq!(first.body["status"], "unknown");
    assert_eq!(first.body["confirmation_id"], json!(id));
    let message = text(&first, "message");
    assert!(
        message.contains("not known yet") && message.contains("Confirm this same action again"),
        "{message}"
    );
    let status = sqlx::query_scalar!(
        "SELECT status FROM agent.staged_actions WHERE id = $1",
        uuid::Uuid::parse_str(&id).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("the action");
    assert_eq!(status, "unknown");
    // It may have happened: it cannot be rejected any more.
    let rejected = s
        .post(
            "/v1/agent/reject",
            Some(&staff),
            json!({ "confirmation_id": id }),
        )
        .await;
    assert_eq!(rejected.status, 409, "{:?}", rejected.body);

    // The row is released: the credit may commit now.
    lock.rollback().await.expect("released");
    // Confirming the same id again learns the outcome, with the same key.
    let settled = eventually(Duration::from_secs(20), || async {
        let r = confirm(&s, &staff, &id).await;
        (r.status != 202).then_some(r)
    })
    .await
    .expect("the outcome is learned");
    assert_eq!(settled.status, 200, "{:?}", settled.body);
    assert_eq!(settled.body["status"], "executed");
    assert_eq!(settled.body["result"]["balance_minor"], 10000);
    // Exactly one credit: one ledger row, one key.
    let rows: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "v!" FROM org_billing.wallet_transactions WHERE org_id = $1::uuid"#,
        uuid::Uuid::parse_str(&org).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .unwrap_or(-1);
    assert_eq!(rows, 1);
    let keys: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "v!" FROM org_billing.idempotency_keys WHERE key = $1"#,
        format!("agent-{id}"),
    )
    .fetch_one(&s.db)
    .await
    .unwrap_or(-1);
    assert_eq!(keys, 1);
    let w = s
        .get(&format!("/v1/organizations/{org}/wallet"), Some(&staff))
        .await;
    assert_eq!(w.body["balance_minor"], 10000, "{:?}", w.body);
    // Settled: a later confirmation is the usual 409.
    let again = confirm(&s, &staff, &id).await;
    assert_eq!(
        (again.status, again.error()),
        (409, "this action was already confirmed")
    );
}

/// A local OpenAI-compatible provider whose summaries and memories wait at a
/// gate until the test opens it. Chat answers (with tools) come at once.
#[derive(Clone)]
struct Provider {
    gate: Arc<Semaphore>,
    /// Summary and memory requests waiting at the gate now.
    waiting: Arc<AtomicUsize>,
    /// Every summary and memory request: (kind, the text it was given).
    writes: Arc<Mutex<Vec<(&'static str, String)>>>,
}

impl Provider {
    fn start(open: bool) -> (Provider, String) {
        let p = Provider {
            gate: Arc::new(Semaphore::new(0)),
            waiting: Arc::new(AtomicUsize::new(0)),
            writes: Arc::new(Mutex::new(Vec::new())),
        };
        if open {
            p.open();
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let shared = p.clone();
        let server = HttpServer::new(move || {
            let p = shared.clone();
            App::new()
                .app_data(web::PayloadConfig::new(16 << 20))
                .default_service(web::to(move |body: web::Bytes| {
                    let p = p.clone();
                    async move { p.answer(&body).await }
                }))
        })
        .workers(1)
        .listen(listener)
        .expect("listen")
        .run();
        tokio::spawn(server);
        (p, format!("http://127.0.0.1:{port}/v1"))
    }

    fn open(&self) {
        self.gate.add_permits(Semaphore::MAX_PERMITS / 2);
    }

    fn writes(&self, kind: &str) -> Vec<String> {
        self.writes
            .lock()
            .map(|w| {
                w.iter()
                    .filter(|(k, _)| *k == kind)
                    .map(|(_, t)| t.clone())
                    .collect()
            })
            .expect("the lock")
    }

    async fn answer(&self, body: &[u8]) -> HttpResponse {
        let b: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let messages = b.array("messages");
        let system = messages
            .first()
            .and_then(|m| m["content"].as_str())
            .unwrap_or("");
        let input = messages
            .last()
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
            .to_owned();
        let kind = if system.starts_with("Summarize this conversation") {
            Some(("summary", "Summary by the model"))
        } else if system.starts_with("Write a short Markdown memory") {
            Some(("memory", "Memory by the model"))
        } else {
            None
        };
        let content = match kind {
            Some((kind, content)) => {
                if let Ok(mut w) = self.writes.lock() {
                    w.push((kind, input));
                }
                self.waiting.fetch_add(1, Ordering::SeqCst);
                let passed = self.gate.acquire().await;
                self.waiting.fetch_sub(1, Ordering::SeqCst);
                drop(passed);
                content
            }
            None => "Hello from the model",
        };
        HttpResponse::Ok().json(json!({
            "id": "c1", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 10, "total_tokens": 40}
        }))
    }
}

#[tokio::test]
async fn closing_sends_a_bounded_transcript_and_pays_for_the_summary() {
    let (provider, base) = Provider::start(true);
    let s = TestStack::spawn_with(StackOptions {
        agent_toml: format!("[model]\nbase_url = \"{base}\"\ntimeout_ms = 5000\n"),
        ..Default::default()
    })
    .await;
    let staff = s.sign_in("staff@example.com").await;
    let owner = s.sign_in("long-talker@example.com").await;
    let paying = org_id(&s, &owner, "Paying Org").await;
    org_id(&s, &owner, "Other Org").await;
    assert_eq!(s.grant(&staff, &paying, 1000).await.status, 200);

    // Six messages of almost 4,000 characters, answered by the model and paid
    // by the organization the conversation is scoped to.
    let mut conversation = Value::Null;
    for i in 0..6 {
        let mark = if i == 5 { "LAST-MARK" } else { "" };
        let r = ask(
            &s,
            &owner,
            json!({"message": format!("M{i} {mark} {}", "word ".repeat(780)),
                   "org_id": paying, "conversation_id": conversation}),
        )
        .await;
        assert_eq!(reply_engine(&r), "model:gpt-4o-mini", "{:?}", r.body);
        conversation = r.body["conversation_id"].clone();
    }
    let cid = conversation.as_str().expect("a conversation id").to_owned();
    assert_eq!(tokens(&s, &owner, &paying).await, 1000 - 6 * 40);
    let closed = s
        .post(
            &format!("/v1/agent/conversations/{cid}/close"),
            Some(&owner),
            json!({}),
        )
        .await;
    assert_eq!(closed.status, 200, "{:?}", closed.body);
    assert_eq!(closed.body["summary"], "Summary by the model");
    // Paid like an answer, by the organization that paid for the conversation.
    assert_eq!(tokens(&s, &owner, &paying).await, 1000 - 7 * 40);
    // The model got the latest messages, at most 16,000 characters of them.
    let sent = provider.writes("summary");
    assert_eq!(sent.len(), 1);
    let chars = sent[0].chars().count();
    assert!((12_000..=16_000).contains(&chars), "{chars} characters");
    assert!(sent[0].contains("LAST-MARK"), "the latest message is in it");
    assert!(!sent[0].contains("user: M0 "), "the oldest is left out");

    // No organization to charge (two, and the conversation paid by none):
    // the extractive summary, nothing spent, the model not asked.
    let plain = ask(&s, &owner, json!({"message": "show my profile"})).await;
    assert_eq!(reply_engine(&plain), "rules");
    let cid = text(&plain, "conversation_id");
    let closed = s
        .post(
            &format!("/v1/agent/conversations/{cid}/close"),
            Some(&owner),
            json!({}),
        )
        .await;
    assert_eq!(closed.body["summary"], "1 request: show my profile");
    assert_eq!(provider.writes("summary").len(), 1);
    assert_eq!(tokens(&s, &owner, &paying).await, 1000 - 7 * 40);
}

fn reply_engine(r: &Resp) -> String {
    text(r, "engine")
}

#[tokio::test]
async fn slow_model_calls_do_not_hold_the_agents_database_connections() {
    let (provider, base) = Provider::start(false);
    // Three connections for the agent; six model calls held at once.
    let s = TestStack::spawn_with(StackOptions {
        agent_toml: format!(
            "[model]\nbase_url = \"{base}\"\ntimeout_ms = 25000\n[database]\nmax_connections = 3\n"
        ),
        ..Default::default()
    })
    .await;
    let staff = s.sign_in("staff@example.com").await;
    let owner = s.sign_in("pool-owner@example.com").await;
    let org = org_id(&s, &owner, "Pool Org").await;
    assert_eq!(s.grant(&staff, &org, 1000).await.status, 200);
    let mut conversations = Vec::new();
    for _ in 0..2 {
        let r = ask(&s, &owner, json!({"message": "hello"})).await;
        conversations.push(text(&r, "conversation_id"));
    }
    let mut curators = Vec::new();
    for i in 0..4 {
        curators.push(s.sign_in(&format!("curator{i}@example.com")).await);
    }
    let bystander = s.sign_in("bystander@example.com").await;

    let close_paths: Vec<String> = conversations
        .iter()
        .map(|cid| format!("/v1/agent/conversations/{cid}/close"))
        .collect();
    let closes = futures::future::join_all(
        close_paths
            .iter()
            .map(|path| s.post(path, Some(&owner), json!({}))),
    );
    let curations = futures::future::join_all(
        curators
            .iter()
            .map(|u| s.post("/v1/memory/curate", Some(u), json!({}))),
    );
    let meanwhile = async {
        // All six model calls are in flight at once (twice the pool) ...
        let held = eventually(Duration::from_secs(20), || async {
            (provider.waiting.load(Ordering::SeqCst) == 6).then_some(())
        })
        .await;
        // ... and requests that need the agent's database still answer.
        let listed = s.get("/v1/agent/conversations", Some(&owner)).await;
        let memory = s.get("/v1/memory", Some(&bystander)).await;
        let asked = s
            .post(
                "/v1/agent",
                Some(&bystander),
                json!({"message": "show my profile"}),
            )
            .await;
        let still_held = provider.waiting.load(Ordering::SeqCst);
        provider.open();
        (held, listed, memory, asked, still_held)
    };
    let (closes, curations, (held, listed, memory, asked, still_held)) =
        tokio::join!(closes, curations, meanwhile);
    assert!(held.is_some(), "six model calls held at once");
    assert_eq!(still_held, 6, "the model calls were in flight throughout");
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    assert_eq!(listed.body.as_array().map(Vec::len), Some(2));
    assert_eq!(memory.status, 200, "{:?}", memory.body);
    assert_eq!(asked.status, 200, "{:?}", asked.body);
    for c in &closes {
        assert_eq!(c.status, 200, "{:?}", c.body);
        assert_eq!(c.body["summary"], "Summary by the model");
    }
    for (c, u) in curations.iter().zip(&curators) {
        assert_eq!(c.status, 200, "{:?}", c.body);
        let m = s.get("/v1/memory", Some(u)).await;
        assert_eq!(m.body["memory_md"], "Memory by the model", "{:?}", m.body);
    }

    // Curation is uncharged, so the model writes a user's memory at most once
    // an hour: a curation in between counts, and leaves the model's memory.
    let again = s
        .post("/v1/memory/curate", Some(&curators[0]), json!({}))
        .await;
    assert_eq!(again.status, 200, "{:?}", again.body);
    assert_eq!(provider.writes("memory").len(), 4);
    let m = s.get("/v1/memory", Some(&curators[0])).await;
    assert_eq!(
        (&m.body["memory_md"], &m.body["curation_count"]),
        (&json!("Memory by the model"), &json!(2))
    );
    s.clock.advance(time::Duration::minutes(61));
    let later = s
        .post("/v1/memory/curate", Some(&curators[0]), json!({}))
        .await;
    assert_eq!(later.status, 200, "{:?}", later.body);
    assert_eq!(provider.writes("memory").len(), 5);
}

#[tokio::test]
async fn an_organization_whose_creation_timed_out_is_found_not_made_twice() {
    let s = TestStack::spawn_with(StackOptions {
        agent_toml: "[org_billing]\ntimeout_ms = 3000\n".into(),
        ..Default::default()
    })
    .await;
    let me = s.sign_in("slow-creator@example.com").await;
    let uid = text(&s.get("/v1/auth/me", Some(&me)).await, "user_id");
    let staged = ask(
        &s,
        &me,
        json!({"message": "create an organization named Twice Labs in Turkey"}),
    )
    .await;
    let id = text(&staged, "confirmation_id");
    assert!(!id.is_empty(), "{:?}", staged.body);
    // org-billing creates one organization at a time per user, under this
    // advisory lock: holding it holds the creation.
    let mut lock = s.db.begin().await.expect("a transaction");
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 3))",
        &uid,
    )
    .execute(&mut *lock)
    .await
    .expect("the creation lock");
    let first = confirm(&s, &me, &id).await;
    assert_eq!(first.status, 202, "{:?}", first.body);
    assert_eq!(first.body["status"], "unknown");
    lock.rollback().await.expect("released");
    // The creation goes on at org-billing; once the caller sees it ...
    let named = |body: &Value| {
        body.array("")
            .iter()
            .filter(|o| o["name"] == "Twice Labs")
            .count()
    };
    let seen = eventually(Duration::from_secs(20), || async {
        (named(&s.get("/v1/organizations", Some(&me)).await.body) == 1).then_some(())
    })
    .await;
    assert!(seen.is_some(), "the first creation landed");
    // ... confirming again finds it instead of creating a second one.
    let settled = confirm(&s, &me, &id).await;
    assert_eq!(settled.status, 200, "{:?}", settled.body);
    assert_eq!(settled.body["status"], "executed");
    assert_eq!(settled.body["result"]["name"], "Twice Labs");
    assert_eq!(named(&s.get("/v1/organizations", Some(&me)).await.body), 1);
    let again = confirm(&s, &me, &id).await;
    assert_eq!(
        (again.status, again.error()),
        (409, "this action was already confirmed")
    );
}

#[tokio::test]
async fn an_action_that_could_not_be_sent_stays_staged() {
    // Nothing listens where the agent looks for org-billing.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let s = TestStack::spawn_with(StackOptions {
        agent_toml: format!("[org_billing]\nurl = \"http://127.0.0.1:{closed}\"\n"),
        ..Default::default()
    })
    .await;
    let me = s.sign_in("unsent@example.com").await;
    let staged = ask(
        &s,
        &me,
        json!({"message": "create an organization named Never Sent in Germany"}),
    )
    .await;
    let id = text(&staged, "confirmation_id");
    for _ in 0..2 {
        let r = confirm(&s, &me, &id).await;
        assert_eq!(r.status, 503, "{:?}", r.body);
        assert!(r.error().contains("nothing was done"), "{:?}", r.body);
        let row = sqlx::query!(
            "SELECT status, attempts FROM agent.staged_actions WHERE id = $1",
            uuid::Uuid::parse_str(&id).expect("a uuid"),
        )
        .fetch_one(&s.db)
        .await
        .expect("the action");
        let (status, attempts) = (row.status, row.attempts);
        assert_eq!((status.as_str(), attempts), ("staged", 0));
    }
    // Still the user's to reject.
    let rejected = s
        .post(
            "/v1/agent/reject",
            Some(&me),
            json!({ "confirmation_id": id }),
        )
        .await;
    assert_eq!(rejected.status, 200, "{:?}", rejected.body);
}
