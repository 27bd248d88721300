//! Usage becomes billing data: whenever a usage period closes (termination,
//! resize, transfer) the closing transaction writes a priced
//! `usage.recorded` product event ([`event_contracts::UsageRecorded`]) to the
//! outbox, and org-billing makes a charge of it. Every piece billed lies
//! within one calendar month (UTC): a period that crossed a month's first
//! instant is closed there and continued by a new period from it, one event
//! per piece, both at close time ([`close`]) and by the month job
//! ([`split_months`], every `usage.month_split_interval_secs`) for periods
//! still open. Each piece is its own `usage_periods` row, so its id names
//! its charge. Pricing: [`price`]; proto-docs/decisions.md, "Usage charges".

pub mod store;

use crate::servers::Row;
use event_contracts::{
    billable_hours, Naming, ProductEvent, UsageRecorded, USAGE_RECORDED, USAGE_SUBJECT,
};
use hub_domain::MinorUnits;
use service_kit::outbox;
use sqlx::{PgConnection, PgPool};
use store::Open;
use time::{Date, Month, OffsetDateTime, UtcOffset};
use uuid::Uuid;

/// Hours in the month a monthly price is spread over (30 days).
pub const HOURS_PER_MONTH: i64 = 720;

/// A piece of usage, priced: `amount_minor` is always `qty * unit_minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    pub qty: i64,
    pub unit_minor: i64,
    pub amount_minor: i64,
}

/// The price of `[started_at, ended_at)` (within one calendar month) on a SKU
/// of `monthly` a month: the whole calendar month is 1 × the monthly price;
/// anything shorter is its billable hours (every hour begun) × the hourly
/// price, ceil(monthly / 720), unless that comes to more than the monthly
/// price, which is then 1 × the monthly price. Zero (a free SKU, an empty
/// piece) is billed by nobody.
pub fn price(started_at: OffsetDateTime, ended_at: OffsetDateTime, monthly: MinorUnits) -> Price {
    let monthly = monthly.0.max(0);
    let whole = Price {
        qty: 1,
        unit_minor: monthly,
        amount_minor: monthly,
    };
    if started_at == month_start(started_at) && ended_at == next_month_start(started_at) {
        return whole;
    }
    let hours = billable_hours(started_at, ended_at);
    // ceil(monthly / 720) without `monthly + 719`, which could overflow.
    let unit_minor = monthly / HOURS_PER_MONTH + i64::from(monthly % HOURS_PER_MONTH != 0);
    match hours.checked_mul(unit_minor) {
        Some(amount_minor) if amount_minor <= monthly => Price {
            qty: hours,
            unit_minor,
            amount_minor,
        },
        _ => whole,
    }
}

/// The first instant (UTC) of `t`'s calendar month.
pub fn month_start(t: OffsetDateTime) -> OffsetDateTime {
    let t = t.to_offset(UtcOffset::UTC);
    first_of(t.year(), t.month())
}

/// The first instant (UTC) of the calendar month after `t`'s.
pub fn next_month_start(t: OffsetDateTime) -> OffsetDateTime {
    let t = t.to_offset(UtcOffset::UTC);
    match t.month() {
        Month::December => first_of(t.year() + 1, Month::January),
        m => first_of(t.year(), m.next()),
    }
}

/// `t`'s calendar month (UTC), `YYYY-MM`.
pub fn period_of(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    format!("{:04}-{:02}", t.year(), u8::from(t.month()))
}

fn first_of(year: i32, month: Month) -> OffsetDateTime {
    Date::from_calendar_date(year, month, 1)
        .expect("every month has a first day")
        .midnight()
        .assume_utc()
}

/// Close `server`'s open usage period at `at`, if it has one, in the caller's
/// transaction (which already holds the server's row: a lifecycle change),
/// with one `usage.recorded` event per calendar month it covers.
pub async fn close(
    conn: &mut PgConnection,
    naming: &Naming,
    server: &Row,
    at: OffsetDateTime,
) -> anyhow::Result<()> {
    let Some(open) = store::lock_open(conn, server.id).await? else {
        return Ok(());
    };
    let (open, _) = split(conn, naming, open, &server.hostname, at, at).await?;
    end_piece(conn, naming, &open, &server.hostname, at, at).await
}

/// Close `open` at every first of a month strictly before `until`, each time
/// continuing it with a new period from there; returns the period left open
/// and how many pieces were closed.
async fn split(
    conn: &mut PgConnection,
    naming: &Naming,
    mut open: Open,
    hostname: &str,
    until: OffsetDateTime,
    now: OffsetDateTime,
) -> anyhow::Result<(Open, u64)> {
    let mut pieces = 0;
    loop {
        let boundary = next_month_start(open.started_at);
        if boundary >= until {
            return Ok((open, pieces));
        }
        end_piece(conn, naming, &open, hostname, boundary, now).await?;
        open = store::continue_from(conn, &open, boundary).await?;
        pieces += 1;
    }
}

/// End `open` at `ended_at` (within its month) and record its usage.
async fn end_piece(
    conn: &mut PgConnection,
    naming: &Naming,
    open: &Open,
    hostname: &str,
    ended_at: OffsetDateTime,
    now: OffsetDateTime,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        store::end(conn, open.id, ended_at).await?,
        "usage period {} is closed already",
        open.id
    );
    let sku = store::price(conn, &open.sku_id).await?;
    let p = price(open.started_at, ended_at, sku.monthly_price_minor);
    if p.amount_minor <= 0 {
        return Ok(());
    }
    let event = ProductEvent {
        id: Uuid::now_v7(),
        kind: USAGE_RECORDED.to_owned(),
        created_at: now,
        org_id: open.org_id,
        data: UsageRecorded {
            usage_period_id: open.id,
            server_id: open.server_id,
            hostname: hostname.to_owned(),
            sku_id: open.sku_id.clone(),
            sku_name: sku.name,
            started_at: open.started_at,
            ended_at,
            period: period_of(open.started_at),
            qty: i32::try_from(p.qty)?,
            unit_minor: MinorUnits(p.unit_minor),
            amount_minor: MinorUnits(p.amount_minor),
            currency: sku.currency,
        },
    };
    let payload = serde_json::to_string(&event)?;
    outbox::enqueue_raw(conn, naming, USAGE_SUBJECT, event.id, payload).await
}

/// The month job: every usage period still open that started before the
/// first instant (UTC) of `now`'s month is closed at each first of a month
/// up to `now` and continued from there, one server per transaction, with
/// its events. Safe on any number of replicas (servers locked `SKIP
/// LOCKED`; a period is closed once) and idempotent. Returns the pieces
/// closed.
pub async fn split_months(
    pool: &PgPool,
    naming: &Naming,
    now: OffsetDateTime,
) -> anyhow::Result<u64> {
    let boundary = month_start(now);
    let (mut after, mut pieces) = (None, 0u64);
    loop {
        let mut tx = pool.begin().await?;
        let Some((server, hostname)) = store::next_to_split(&mut tx, boundary, after).await? else {
            return Ok(pieces);
        };
        after = Some(server);
        if let Some(open) = store::lock_open(&mut tx, server).await? {
            if open.started_at < boundary {
                pieces += split(&mut tx, naming, open, &hostname, now, now).await?.1;
            }
        }
        tx.commit().await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const SMALL: MinorUnits = MinorUnits(49_000);

    #[test]
    fn a_whole_calendar_month_is_one_monthly_price() {
        for (a, b) in [
            (
                datetime!(2026-11-01 0:00 UTC),
                datetime!(2026-12-01 0:00 UTC),
            ),
            (
                datetime!(2026-12-01 0:00 UTC),
                datetime!(2027-01-01 0:00 UTC),
            ),
            (
                datetime!(2027-02-01 0:00 UTC),
                datetime!(2027-03-01 0:00 UTC),
            ),
        ] {
            assert_eq!(
                price(a, b, SMALL),
                Price {
                    qty: 1,
                    unit_minor: 49_000,
                    amount_minor: 49_000
                },
                "{a}"
            );
        }
    }

    #[test]
    fn part_of_a_month_is_every_hour_begun_at_the_hourly_price() {
        // ceil(49000 / 720) = 69 a hour.
        let p = price(
            datetime!(2026-11-01 0:00 UTC),
            datetime!(2026-11-14 12:00:01 UTC),
            SMALL,
        );
        assert_eq!(
            p,
            Price {
                qty: 325,
                unit_minor: 69,
                amount_minor: 325 * 69
            }
        );
        let p = price(
            datetime!(2026-11-10 8:30 UTC),
            datetime!(2026-11-10 9:00 UTC),
            SMALL,
        );
        assert_eq!((p.qty, p.unit_minor, p.amount_minor), (1, 69, 69));
        // The hourly price rounds up: 1200 / 720 = 1.67, so 2.
        let p = price(
            datetime!(2026-11-10 8:00 UTC),
            datetime!(2026-11-10 11:00 UTC),
            MinorUnits(1200),
        );
        assert_eq!((p.qty, p.unit_minor, p.amount_minor), (3, 2, 6));
    }

    #[test]
    fn never_more_than_the_monthly_price() {
        // 710 h × 69 = 48,990: still by the hour.
        let p = price(
            datetime!(2026-12-01 0:00 UTC),
            datetime!(2026-12-30 14:00 UTC),
            SMALL,
        );
        assert_eq!((p.qty, p.amount_minor), (710, 48_990));
        // 711 h × 69 = 49,059 > 49,000: one monthly price.
        for end in [
            datetime!(2026-12-30 15:00 UTC),
            datetime!(2026-12-31 23:59:59 UTC),
        ] {
            let p = price(datetime!(2026-12-01 0:00 UTC), end, SMALL);
            assert_eq!(
                p,
                Price {
                    qty: 1,
                    unit_minor: 49_000,
                    amount_minor: 49_000
                },
                "{end}"
            );
        }
        // 31 days from the 1st of a 31-day month's second hour: capped too.
        let p = price(
            datetime!(2026-12-01 1:00 UTC),
            datetime!(2027-01-01 0:00 UTC),
            SMALL,
        );
        assert_eq!(p.amount_minor, 49_000);
    }

    #[test]
    fn the_amount_is_always_qty_times_unit_and_at_most_the_monthly_price() {
        let start = datetime!(2026-02-01 0:00 UTC);
        for monthly in [0, 1, 719, 720, 721, 1200, 49_000, 1_890_000] {
            for minutes in (0..=28 * 24 * 60).step_by(97) {
                let p = price(
                    start,
                    start + time::Duration::minutes(minutes),
                    MinorUnits(monthly),
                );
                assert_eq!(p.amount_minor, p.qty * p.unit_minor, "{monthly} {minutes}");
                assert!(p.amount_minor <= monthly, "{monthly} {minutes}");
                assert!(p.qty >= 0 && p.unit_minor >= 0);
            }
        }
    }

    #[test]
    fn nothing_to_bill_is_zero() {
        let t = datetime!(2026-11-10 8:00 UTC);
        assert_eq!(price(t, t, SMALL).amount_minor, 0);
        assert_eq!(
            price(t, t + time::Duration::DAY, MinorUnits(0)).amount_minor,
            0
        );
        assert_eq!(
            price(
                datetime!(2026-11-01 0:00 UTC),
                datetime!(2026-12-01 0:00 UTC),
                MinorUnits(0)
            )
            .amount_minor,
            0
        );
    }

    #[test]
    fn months_begin_at_midnight_utc_on_the_first() {
        let t = datetime!(2026-12-31 23:30 -02:00); // 2027-01-01 01:30 UTC
        assert_eq!(month_start(t), datetime!(2027-01-01 0:00 UTC));
        assert_eq!(next_month_start(t), datetime!(2027-02-01 0:00 UTC));
        assert_eq!(period_of(t), "2027-01");
        let t = datetime!(2026-12-15 10:00 UTC);
        assert_eq!(next_month_start(t), datetime!(2027-01-01 0:00 UTC));
        assert_eq!(period_of(t), "2026-12");
        assert_eq!(
            month_start(datetime!(2026-03-01 0:00 UTC)),
            datetime!(2026-03-01 0:00 UTC)
        );
    }
}
