//! Servers: the stored row, its states, its resource shape, what storage
//! refuses ([`Refused`], mapped to the client's error at the edge), and what
//! every change records with it in the same transaction (usage periods,
//! product events). The statements live in [`store`].

mod model;
pub mod store;

pub use model::{
    credentials_aad, stored_time, Action, Event, Refused, Row, Server, Status, HOSTNAME_PER_ORG,
};
pub use store::{open_usage, open_usage_all};

use event_contracts::{product_subject, Naming, ProductEvent};
use hub_domain::ServerId;
use service_kit::{outbox, ApiError, Clock};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

/// Load server `id` (no lock); [`Refused::NotFound`] when there is none.
pub async fn load(conn: &mut PgConnection, id: ServerId) -> sqlx::Result<Result<Row, Refused>> {
    Ok(store::find(conn, id).await?.ok_or(Refused::NotFound))
}

/// Server `id` if the caller may act on it with `cap`: 404 when there is no
/// such server or the caller is not a member of its organization (never
/// saying which), 403 naming the role when the member's role falls short.
pub async fn authorized(
    pool: &PgPool,
    caller: &service_kit::assertion::Caller,
    id: ServerId,
    cap: hub_domain::Capability,
) -> Result<Row, ApiError> {
    let row = load(&mut *pool.acquire().await?, id).await??;
    caller.require(row.org_id, cap)?;
    Ok(row)
}

/// Record product event `kind` for `row` (history for exports, outbox for the
/// PRODUCT stream), in the caller's transaction.
pub async fn emit(
    conn: &mut PgConnection,
    naming: &Naming,
    clock: &Clock,
    kind: &str,
    row: &Row,
) -> anyhow::Result<()> {
    emit_all(conn, naming, clock, kind, std::slice::from_ref(row)).await
}

/// [`emit`] of `kind` for each of `rows` (a batch of the provisioning
/// worker), in one statement for the history and one for the outbox.
pub async fn emit_all(
    conn: &mut PgConnection,
    naming: &Naming,
    clock: &Clock,
    kind: &str,
    rows: &[Row],
) -> anyhow::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let events = rows
        .iter()
        .map(|row| event(naming, clock, kind, row))
        .collect::<anyhow::Result<Vec<_>>>()?;
    store::insert_events(&mut *conn, kind, &events).await?;
    outbox::enqueue_messages(conn, events.iter().map(|e| &e.message)).await
}

/// Product event `kind` for `row`, now (not stored yet).
pub fn event(naming: &Naming, clock: &Clock, kind: &str, row: &Row) -> anyhow::Result<Event> {
    let event = ProductEvent {
        id: Uuid::now_v7(),
        kind: kind.to_owned(),
        created_at: clock.now(),
        org_id: row.org_id,
        data: row.server(),
    };
    let payload = serde_json::to_string(&event)?;
    Ok(Event {
        org_id: row.org_id,
        server_id: row.id,
        created_at: event.created_at,
        message: outbox::Message::raw(naming, &product_subject(kind), event.id, payload),
    })
}

/// A hostname: one DNS label (1 to 63 of a-z, 0-9 and '-', not starting or
/// ending with '-'), lower case.
pub fn hostname(raw: &str) -> Result<String, ApiError> {
    let h = raw.trim().to_ascii_lowercase();
    let ok = !h.is_empty()
        && h.len() <= 63
        && h.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !h.starts_with('-')
        && !h.ends_with('-');
    if ok {
        Ok(h)
    } else {
        Err(ApiError::bad_request(
            "hostname must be a DNS label: 1 to 63 letters, digits or '-', not starting or ending with '-'",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::Action;
    use super::{hostname, Refused, Status};
    use actix_web::{http::StatusCode, ResponseError};
    use service_kit::ApiError;

    #[test]
    fn refusals_answer_404_and_409_naming_the_state() {
        let e = ApiError::from(Refused::NotFound);
        assert_eq!(e.status_code(), StatusCode::NOT_FOUND);
        let e = ApiError::from(Refused::InvalidTransition {
            from: Status::PendingFulfilment,
            action: Action::Provisioned,
        });
        assert_eq!(e.status_code(), StatusCode::CONFLICT);
        assert_eq!(
            e.to_string(),
            "cannot complete provisioning of a server that is pending_fulfilment"
        );
    }

    #[test]
    fn statuses_read_back_and_serialize_as_stored() {
        for &s in Status::ALL {
            assert_eq!(Status::parse(s.as_str()), Some(s));
            assert_eq!(
                serde_json::to_value(s).expect("serialize"),
                serde_json::Value::from(s.as_str())
            );
        }
        assert_eq!(Status::parse("deleted"), None);
    }

    #[test]
    fn hostnames_are_dns_labels() {
        assert_eq!(hostname(" Web-01 ").ok().as_deref(), Some("web-01"));
        for bad in ["", "-web", "web-", "web_1", "a.b", &"a".repeat(64), "wéb"] {
            assert!(hostname(bad).is_err(), "{bad}");
        }
        assert!(hostname(&"a".repeat(63)).is_ok());
    }
}
