//! Staged actions after they are staged (the journal inserts them): taking one
//! for an attempt, settling it, rejecting it, and its state when it cannot be
//! taken. See [`crate::staged`] for the states.

use crate::ops::{StagedKind, StagedStatus};
use hub_domain::{OrgId, StagedActionId, UserId};
use serde_json::Value;
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;

/// An action taken for an attempt.
pub struct Taken {
    pub kind: StagedKind,
    pub args: Value,
    pub summary: String,
    /// Attempts that may have reached the owning service, this one included.
    pub attempts: i32,
    pub seen_orgs: Option<Vec<OrgId>>,
}

impl Taken {
    pub fn retry(&self) -> bool {
        self.attempts > 1
    }
}

/// Where an action stands (read when it could not be taken).
pub struct Standing {
    pub status: StagedStatus,
    pub expires_at: OffsetDateTime,
    pub attempt_until: Option<OffsetDateTime>,
    pub decided_at: Option<OffsetDateTime>,
}

/// The user's action `id`, if it is theirs.
pub async fn standing(
    pool: &PgPool,
    id: StagedActionId,
    user: UserId,
) -> sqlx::Result<Option<Standing>> {
    sqlx::query_as!(
        Standing,
        r#"SELECT status AS "status: StagedStatus", expires_at, attempt_until, decided_at
           FROM staged_actions WHERE id = $1 AND user_id = $2"#,
        id as StagedActionId,
        user as UserId,
    )
    .fetch_optional(pool)
    .await
}

/// The window an attempt may take an action in.
pub struct Window {
    pub now: OffsetDateTime,
    /// The lease the attempt holds it until.
    pub lease_until: OffsetDateTime,
    /// An `unknown` action first confirmed before this can no longer be taken.
    pub retry_since: OffsetDateTime,
}

/// Take the user's action `id` to `executing`: staged and unexpired, or
/// `unknown` (or `executing` past its lease) and first confirmed within the
/// window. `orgs` are the caller's organizations now (kept for a create_org's
/// later attempts).
pub async fn take(
    pool: &PgPool,
    id: StagedActionId,
    user: UserId,
    w: &Window,
    orgs: &[OrgId],
) -> sqlx::Result<Option<Taken>> {
    sqlx::query_as!(
        Taken,
        r#"UPDATE staged_actions SET status = 'executing', attempts = attempts + 1,
                attempt_until = $4, decided_at = COALESCE(decided_at, $3),
                seen_orgs = CASE WHEN kind = 'create_org' THEN COALESCE(seen_orgs, $6) END
         WHERE id = $1 AND user_id = $2 AND (
               (status = 'staged' AND expires_at > $3)
            OR ((status = 'unknown' OR (status = 'executing' AND (attempt_until IS NULL OR attempt_until <= $3)))
                AND decided_at > $5))
         RETURNING kind AS "kind: StagedKind", args, summary, attempts,
                   seen_orgs AS "seen_orgs: Vec<OrgId>""#,
        id as StagedActionId,
        user as UserId,
        w.now,
        w.lease_until,
        w.retry_since,
        orgs as &[OrgId],
    )
    .fetch_optional(pool)
    .await
}

/// Nothing was sent: put the action back as it was (`status`), the attempt
/// not counted.
pub async fn unsent(
    conn: &mut PgConnection,
    id: StagedActionId,
    status: StagedStatus,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE staged_actions SET status = $2, attempts = attempts - 1, attempt_until = NULL, \
                decided_at = CASE WHEN attempts = 1 THEN NULL ELSE decided_at END, \
                seen_orgs = CASE WHEN attempts = 1 THEN NULL ELSE seen_orgs END \
         WHERE id = $1",
        id as StagedActionId,
        status as StagedStatus,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Record an attempt's outcome and end its lease.
pub async fn settle(
    conn: &mut PgConnection,
    id: StagedActionId,
    status: StagedStatus,
    result: Value,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE staged_actions SET status = $2, result = $3, attempt_until = NULL WHERE id = $1",
        id as StagedActionId,
        status as StagedStatus,
        result,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Cancel the user's action `id` while it is staged and unexpired: its kind
/// and summary, None when it is not.
pub async fn cancel(
    pool: &PgPool,
    id: StagedActionId,
    user: UserId,
    now: OffsetDateTime,
) -> sqlx::Result<Option<(StagedKind, String)>> {
    Ok(sqlx::query!(
        r#"UPDATE staged_actions SET status = 'cancelled', decided_at = $3
         WHERE id = $1 AND user_id = $2 AND status = 'staged' AND expires_at > $3
         RETURNING kind AS "kind: StagedKind", summary"#,
        id as StagedActionId,
        user as UserId,
        now,
    )
    .fetch_optional(pool)
    .await?
    .map(|r| (r.kind, r.summary)))
}
