//! Usage becomes charges (issue 19): server-product prices each closed piece
//! of a usage period (`product.v1.usage.recorded`, every piece within one
//! calendar month) and org-billing's consumer (`org-billing-usage`) makes one
//! pending usage charge of it, once: a redelivered event makes no second
//! charge. Usage events are billing data and never reach a webhook endpoint.
//!
//! The expected prices are computed here, independently of server-product's
//! code, from the periods as stored: the whole calendar month is 1 × the
//! monthly price; less is every hour begun × ceil(monthly / 720), at most the
//! monthly price (then 1 × the monthly price).

use crate::servers::{active_server, p_call, product_events};
use serde_json::Value;
use std::{
    sync::{Arc, Mutex},
    time::Duration,
};
use tests_e2e::Json;
use tests_e2e::{eventually, TestStack};
use time::OffsetDateTime;
use uuid::Uuid;

/// vps-small's monthly price (TRY) in the demo catalog.
const MONTHLY: i64 = 49_000;

/// A charge as org-billing stored it.
#[derive(Debug, Clone, PartialEq)]
struct Charge {
    description: String,
    brand: String,
    qty: i32,
    unit_minor: i64,
    amount_minor: i64,
    currency: String,
    status: String,
    source: String,
    source_ref: Option<String>,
    period: Option<String>,
}

/// A usage period as server-product stored it.
#[derive(Debug, Clone)]
struct Period {
    id: i64,
    started_at: OffsetDateTime,
    ended_at: Option<OffsetDateTime>,
}

fn uuid(s: &str) -> Uuid {
    Uuid::parse_str(s).expect("a uuid")
}

/// `org`'s charges, by source_ref.
async fn charges(s: &TestStack, org: &str) -> Vec<Charge> {
    sqlx::query_as!(
        Charge,
        "SELECT description, brand, qty, unit_minor, amount_minor, currency, status, source, source_ref, period \
           FROM org_billing.charges WHERE org_id = $1 ORDER BY period, source_ref",
        uuid(org),
    )
    .fetch_all(&s.db)
    .await
    .expect("charges")
}

/// `org`'s charges once everything server-product committed so far is
/// handled: its outbox is empty (every usage event is on the stream), then
/// org-billing's consumer has handled everything on it.
async fn settled(s: &TestStack, org: &str) -> Vec<Charge> {
    let published = eventually(Duration::from_secs(20), || async {
        let n: i64 = sqlx::query_scalar!(r#"SELECT count(*) AS "v!" FROM server_product.outbox"#,)
            .fetch_one(&s.db)
            .await
            .ok()?;
        (n == 0).then_some(())
    })
    .await;
    assert!(
        published.is_some(),
        "server-product's outbox was not published"
    );
    s.consumer_caught_up("PRODUCT", "org-billing-usage").await;
    charges(s, org).await
}

/// Server `server`'s usage periods, oldest first.
async fn periods(s: &TestStack, server: &str) -> Vec<Period> {
    sqlx::query_as!(
        Period,
        "SELECT id, started_at, ended_at FROM server_product.usage_periods \
          WHERE server_id = $1 ORDER BY started_at, id",
        uuid(server),
    )
    .fetch_all(&s.db)
    .await
    .expect("periods")
}

/// Where to move an open usage period's start: an interval before now (but
/// not before this month's first instant, UTC), or an interval (negative:
/// back) from this month's first instant.
enum Start {
    Ago(&'static str),
    FromMonth(&'static str),
}

/// Move server `server`'s open usage period's start to `start`.
async fn start_open_period_at(s: &TestStack, server: &str, start: Start) {
    let (ago, offset) = match start {
        Start::Ago(i) => (true, i),
        Start::FromMonth(i) => (false, i),
    };
    sqlx::query!(
        "WITH m AS (SELECT date_trunc('month', now(), 'UTC') AS m) \
         UPDATE server_product.usage_periods SET started_at = \
             CASE WHEN $2 THEN greatest(m, now() - $3::text::interval) \
                  ELSE m + $3::text::interval END \
           FROM m WHERE server_id = $1 AND ended_at IS NULL",
        uuid(server),
        ago,
        offset,
    )
    .execute(&s.db)
    .await
    .expect("the period's start moved");
}

async fn terminate(s: &TestStack, token: &str, server: &str) {
    let r = p_call(
        s,
        "POST",
        &format!("/v1/servers/{server}/terminate"),
        Some(token),
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}

fn first_of_month(t: OffsetDateTime) -> OffsetDateTime {
    let t = t.to_offset(time::UtcOffset::UTC);
    t.replace_time(time::Time::MIDNIGHT)
        .replace_day(1)
        .expect("the first")
}

fn first_of_next_month(t: OffsetDateTime) -> OffsetDateTime {
    first_of_month(first_of_month(t) + time::Duration::days(32))
}

/// The rule, computed here: (qty, unit_minor, amount_minor).
fn expected(started: OffsetDateTime, ended: OffsetDateTime, monthly: i64) -> (i32, i64, i64) {
    if started == first_of_month(started) && ended == first_of_next_month(started) {
        return (1, monthly, monthly);
    }
    let nanos = (ended - started).whole_nanoseconds();
    let hours = ((nanos + 3_600_000_000_000 - 1) / 3_600_000_000_000) as i64;
    let unit = (monthly + 719) / 720;
    if hours * unit > monthly {
        (1, monthly, monthly)
    } else {
        (hours as i32, unit, hours * unit)
    }
}

fn month(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!("{:04}-{:02}", t.year(), u8::from(t.month()))
}

/// Each of `periods` (all closed) is billed by exactly one of `got` (its
/// source_ref), as the rule prices it, in the month it lies in.
fn each_period_charged(periods: &[Period], got: &[Charge], hostname: &str) {
    for p in periods {
        let ended = p.ended_at.expect("closed");
        assert_eq!(
            first_of_month(p.started_at),
            first_of_month(ended - time::Duration::nanoseconds(1)),
            "period {} lies in one calendar month",
            p.id
        );
        let source_ref = format!("usage:{}", p.id);
        let mine: Vec<&Charge> = got
            .iter()
            .filter(|c| c.source_ref.as_deref() == Some(&source_ref))
            .collect();
        assert_eq!(mine.len(), 1, "one charge for period {}: {got:?}", p.id);
        let c = mine[0];
        assert_eq!(
            (c.qty, c.unit_minor, c.amount_minor),
            expected(p.started_at, ended, MONTHLY),
            "period {} ({} – {ended})",
            p.id,
            p.started_at
        );
        assert_eq!(c.period.as_deref(), Some(month(p.started_at).as_str()));
        assert_eq!(
            (c.status.as_str(), c.source.as_str(), c.currency.as_str()),
            ("pending", "usage", "TRY")
        );
        assert_eq!(c.brand, "Servers");
        assert!(
            c.description
                .starts_with(&format!("Server {hostname} (vps-small), ")),
            "{}",
            c.description
        );
    }
}

#[tokio::test]
async fn a_terminated_server_makes_one_pending_usage_charge() {
    let s = TestStack::spawn().await;
    let (owner, org, id) = active_server(&s, "usage-one@example.com", "billed-1").await;
    // 26.5 hours of use (27 begun), unless that would start before this
    // month: then from the month's first instant.
    start_open_period_at(&s, &id, Start::Ago("26 hours 30 minutes")).await;
    terminate(&s, &owner, &id).await;
    let got = settled(&s, &org).await;
    let ps = periods(&s, &id).await;
    assert_eq!(ps.len(), 1, "{ps:?}");
    assert_eq!(got.len(), 1, "{got:?}");
    each_period_charged(&ps, &got, "billed-1");
    let (qty, unit, amount) = (got[0].qty, got[0].unit_minor, got[0].amount_minor);
    assert_eq!((unit, amount), (69, i64::from(qty) * 69));
    assert!((1..=27).contains(&qty), "{qty}");
    // Its audit event: charge.created on the organization, no user actor.
    let audited = eventually(Duration::from_secs(20), || async {
        let n: i64 = sqlx::query_scalar!(
            r#"SELECT count(*) AS "n!" FROM identity.audit_log
                WHERE action = 'charge.created' AND subject = $1 AND actor_user_id IS NULL"#,
            format!("org:{org}"),
        )
        .fetch_one(&s.db)
        .await
        .ok()?;
        (n == 1).then_some(())
    })
    .await;
    assert!(audited.is_some(), "charge.created was not audited once");
}

#[tokio::test]
async fn a_redelivered_usage_event_makes_no_second_charge() {
    let s = TestStack::spawn().await;
    let (owner, org, id) = active_server(&s, "usage-twice@example.com", "billed-2").await;
    terminate(&s, &owner, &id).await;
    // The termination's usage event, as published (and consumed once).
    let usage = eventually(Duration::from_secs(20), || async {
        product_events(&s)
            .await
            .into_iter()
            .find(|e| e["type"] == "usage.recorded" && e["data"]["server_id"] == id.as_str())
    })
    .await
    .expect("a usage event");
    assert_eq!(usage["org_id"], org.as_str());
    let first = settled(&s, &org).await;
    assert_eq!(first.len(), 1, "{first:?}");
    let period_id = usage["data"]["usage_period_id"].as_i64().expect("an id");
    // The same event again (a redelivery, a DLQ replay): published without
    // its Nats-Msg-Id, so the stream keeps it as a second message. And an
    // event of an organization org-billing does not know, which must not
    // hold the stream up.
    let js = async_nats::jetstream::new(s.nats.clone());
    let subject = s.naming.subject("product.v1.usage.recorded");
    let mut stranger = usage.clone();
    stranger["id"] = Value::from(Uuid::now_v7().to_string());
    stranger["org_id"] = Value::from(Uuid::now_v7().to_string());
    stranger["data"]["usage_period_id"] = Value::from(period_id + 1_000_000);
    for body in [&stranger, &usage] {
        js.publish(
            subject.clone(),
            serde_json::to_vec(body).expect("json").into(),
        )
        .await
        .expect("publish")
        .await
        .expect("acknowledged");
    }
    let copies = product_events(&s)
        .await
        .into_iter()
        .filter(|e| e["id"] == usage["id"])
        .count();
    assert_eq!(copies, 2, "the stream holds the event twice");
    // The positive marker: the consumer handled both (acknowledged them).
    s.consumer_caught_up("PRODUCT", "org-billing-usage").await;
    assert_eq!(charges(&s, &org).await, first, "no second charge");
    assert_eq!(
        first[0].source_ref.as_deref(),
        Some(format!("usage:{period_id}").as_str())
    );
    let stranger_charges: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM org_billing.charges WHERE source_ref = $1"#,
        format!("usage:{}", period_id + 1_000_000),
    )
    .fetch_one(&s.db)
    .await
    .expect("count");
    assert_eq!(stranger_charges, 0, "no charge for an unknown organization");
    // One audit event: org-billing's outbox published, identity stored all.
    let published = eventually(Duration::from_secs(20), || async {
        let n: i64 = sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM org_billing.outbox"#)
            .fetch_one(&s.db)
            .await
            .ok()?;
        (n == 0).then_some(())
    })
    .await;
    assert!(
        published.is_some(),
        "org-billing's outbox was not published"
    );
    s.consumer_caught_up("CORE", "identity-audit").await;
    let audited: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM identity.audit_log
            WHERE action = 'charge.created' AND subject = $1"#,
        format!("org:{org}"),
    )
    .fetch_one(&s.db)
    .await
    .expect("audit");
    assert_eq!(audited, 1, "one charge, one audit event");
}

#[tokio::test]
async fn usage_across_month_boundaries_is_charged_per_month() {
    let s = TestStack::spawn().await;
    // A: started last month; the month job closes it at this month's first
    // instant and continues it; termination closes the rest.
    let (owner, org, a) = active_server(&s, "usage-months@example.com", "month-a").await;
    start_open_period_at(
        &s,
        &a,
        Start::FromMonth("-1 month 9 days 5 hours 10 minutes"),
    )
    .await;
    let options = (*s.db.connect_options())
        .clone()
        .options([("search_path", "server_product")]);
    let pool = sqlx::PgPool::connect_with(options).await.expect("pool");
    let now = s.clock.now();
    server_product::usage::split_months(&pool, &s.naming, now)
        .await
        .expect("the month job");
    let ps = periods(&s, &a).await;
    assert_eq!(ps.len(), 2, "{ps:?}");
    assert_eq!(ps[0].ended_at, Some(first_of_month(now)));
    assert_eq!(
        (ps[1].started_at, ps[1].ended_at),
        (first_of_month(now), None)
    );
    // Run again: nothing is closed twice.
    assert_eq!(
        server_product::usage::split_months(&pool, &s.naming, now)
            .await
            .expect("the month job again"),
        0
    );
    assert_eq!(periods(&s, &a).await.len(), 2);
    let got = settled(&s, &org).await;
    assert_eq!(got.len(), 1, "last month's piece: {got:?}");
    each_period_charged(&ps[..1], &got, "month-a");
    terminate(&s, &owner, &a).await;

    // B: started two months ago and closed before any job ran: split at
    // close time, the whole month between at the monthly price.
    let r = crate::servers::order(&s, &owner, &org, "vps-small", "month-b").await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let b = crate::servers::sid(&r);
    crate::servers::wait_for(&s, &owner, &b, "active").await;
    start_open_period_at(&s, &b, Start::FromMonth("-2 months 20 days")).await;
    terminate(&s, &owner, &b).await;

    let got = settled(&s, &org).await;
    assert_eq!(got.len(), 5, "{got:?}");
    let pa = periods(&s, &a).await;
    assert_eq!(pa.len(), 2, "{pa:?}");
    each_period_charged(&pa, &got, "month-a");
    let pb = periods(&s, &b).await;
    assert_eq!(pb.len(), 3, "{pb:?}");
    each_period_charged(&pb, &got, "month-b");
    let months: Vec<String> = pb.iter().map(|p| month(p.started_at)).collect();
    let this = first_of_month(now);
    assert_eq!(
        months,
        [
            month(this - time::Duration::days(40)),
            month(this - time::Duration::days(1)),
            month(this)
        ]
    );
    let whole = got
        .iter()
        .find(|c| c.source_ref == Some(format!("usage:{}", pb[1].id)))
        .expect("the middle month's charge");
    assert_eq!(
        (whole.qty, whole.unit_minor, whole.amount_minor),
        (1, MONTHLY, MONTHLY)
    );

    // Last month's billing run invoices last month's usage (A's first piece
    // and B's middle one), and nothing of this month's.
    let staff = s.sign_in("staff@example.com").await;
    let last = month(this - time::Duration::days(1));
    let run = s
        .post(
            "/v1/admin/billing-runs",
            Some(&staff),
            serde_json::json!({"period": last}),
        )
        .await;
    assert_eq!(run.status, 201, "{:?}", run.body);
    assert_eq!(
        run.body["totals"]["TRY"].as_i64(),
        Some(
            got.iter()
                .filter(|c| c.period.as_deref() == Some(last.as_str()))
                .map(|c| c.amount_minor)
                .sum::<i64>()
        ),
        "{:?}",
        run.body
    );
    for c in charges(&s, &org).await {
        let want = if c.period.as_deref() == Some(last.as_str()) {
            "invoiced"
        } else {
            "pending"
        };
        assert_eq!(c.status, want, "{c:?}");
    }
}

#[tokio::test]
async fn usage_events_never_reach_a_webhook_endpoint() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("usage-hooks@example.com").await;
    let got: Arc<Mutex<Vec<String>>> = Arc::default();
    let g = got.clone();
    let receiver = tests_e2e::stand_in(move |_, body| {
        let kind = serde_json::from_slice::<Value>(&body)
            .ok()
            .map(|e| e.text("type").to_owned())
            .expect("a JSON event with a type");
        if let Ok(mut g) = g.lock() {
            g.push(kind);
        }
        actix_web::HttpResponse::Ok().finish()
    });
    // An endpoint of the organization: endpoints take every event there is.
    let ep = p_call(
        &s,
        "POST",
        "/v1/webhooks",
        Some(&owner),
        Some(serde_json::json!({"org_id": org, "url": format!("{receiver}/hook")})),
    )
    .await;
    assert_eq!(ep.status, 201, "{:?}", ep.body);
    let r = crate::servers::order(&s, &owner, &org, "vps-small", "hooked-usage").await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let id = crate::servers::sid(&r);
    crate::servers::wait_for(&s, &owner, &id, "active").await;
    terminate(&s, &owner, &id).await;
    // The usage event exists (org-billing charged it) ...
    assert_eq!(settled(&s, &org).await.len(), 1);
    // ... the dispatcher handled every product event, and every delivery it
    // made is done: server.terminated (the positive marker) arrived.
    s.consumer_caught_up("PRODUCT", "webhook-dispatcher-fanout")
        .await;
    let done = eventually(Duration::from_secs(20), || async {
        let pending: i64 = sqlx::query_scalar!(
            r#"SELECT count(*) AS "n!" FROM webhook_dispatcher.delivery_log
                WHERE org_id = $1 AND status <> 'delivered'"#,
            uuid(&org),
        )
        .fetch_one(&s.db)
        .await
        .ok()?;
        let kinds = got.lock().ok()?.clone();
        (pending == 0 && kinds.iter().any(|k| k == "server.terminated")).then_some(kinds)
    })
    .await
    .expect("server.terminated delivered, nothing pending");
    let mut kinds = done;
    kinds.sort();
    assert_eq!(
        kinds,
        ["server.active", "server.created", "server.terminated"],
        "only webhook kinds reach the endpoint"
    );
    let stored: Vec<String> = sqlx::query_scalar!(
        r#"SELECT event_type AS "event_type!" FROM webhook_dispatcher.delivery_log WHERE org_id = $1 ORDER BY event_type"#,
        uuid(&org),
    )
    .fetch_all(&s.db)
    .await
    .expect("deliveries");
    assert_eq!(
        stored,
        ["server.active", "server.created", "server.terminated"]
    );
}

#[tokio::test]
async fn the_month_job_run_by_two_replicas_at_once_splits_each_period_once() {
    let s = TestStack::spawn().await;
    let mut servers = Vec::new();
    for i in 0..4 {
        let (_, org, id) = active_server(
            &s,
            &format!("usage-race{i}@example.com"),
            &format!("race-{i}"),
        )
        .await;
        start_open_period_at(&s, &id, Start::FromMonth("-1 month 3 days")).await;
        servers.push((org, id));
    }
    let options = (*s.db.connect_options())
        .clone()
        .options([("search_path", "server_product")]);
    let (a, b) = (
        sqlx::PgPool::connect_with(options.clone())
            .await
            .expect("pool a"),
        sqlx::PgPool::connect_with(options).await.expect("pool b"),
    );
    let now = s.clock.now();
    let (x, y) = tokio::join!(
        server_product::usage::split_months(&a, &s.naming, now),
        server_product::usage::split_months(&b, &s.naming, now),
    );
    // Between them, one piece per server: none closed twice, none left.
    assert_eq!(x.expect("replica a") + y.expect("replica b"), 4);
    for (org, id) in &servers {
        let ps = periods(&s, id).await;
        assert_eq!(ps.len(), 2, "{ps:?}");
        assert_eq!(ps[0].ended_at, Some(first_of_month(now)));
        let got = settled(&s, org).await;
        assert_eq!(got.len(), 1, "one charge for last month's piece: {got:?}");
    }
}
