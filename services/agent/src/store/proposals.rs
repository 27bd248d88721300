//! Platform proposals (`proposals`): filed by customers, moved by staff.

use hub_domain::{ProposalId, UserId};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;

hub_domain::text_enum! {
    /// Where a proposal stands (`proposals.status`; the moves are in
    /// [`crate::proposals`]).
    pub enum ProposalStatus: "proposal status" {
        Draft = "draft",
        Accepted = "accepted",
        Rejected = "rejected",
        Done = "done",
    }
}

/// PlatformProposal; `user_id` (who filed it) is shown to staff only.
#[derive(Debug, Serialize)]
pub struct Proposal {
    pub id: ProposalId,
    pub title: String,
    pub problem: String,
    pub proposal: String,
    pub status: ProposalStatus,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_id: Option<UserId>,
}

/// A new proposal, as filed.
pub struct NewProposal<'a> {
    pub by: UserId,
    pub title: &'a str,
    pub problem: &'a str,
    pub proposal: &'a str,
    pub at: OffsetDateTime,
}

pub async fn insert(conn: &mut PgConnection, p: &NewProposal<'_>) -> sqlx::Result<Proposal> {
    sqlx::query_as!(
        Proposal,
        r#"INSERT INTO proposals (id, user_id, title, problem, proposal, status, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, 'draft', $6, $6)
           RETURNING id AS "id: ProposalId", title, problem, proposal,
                     status AS "status: ProposalStatus", created_at,
                     user_id AS "user_id?: UserId""#,
        ProposalId::new() as ProposalId,
        p.by as UserId,
        p.title,
        p.problem,
        p.proposal,
        p.at,
    )
    .fetch_one(conn)
    .await
}

/// Proposals newest first: `by`'s, or everyone's when None; after the
/// previous page's last `(created_at, id)`, at most `fetch`.
pub async fn list(
    pool: &PgPool,
    by: Option<UserId>,
    after: Option<(OffsetDateTime, uuid::Uuid)>,
    fetch: i64,
) -> sqlx::Result<Vec<Proposal>> {
    let (at, id) = after.unzip();
    sqlx::query_as!(
        Proposal,
        r#"SELECT id AS "id: ProposalId", title, problem, proposal,
                  status AS "status: ProposalStatus", created_at,
                  user_id AS "user_id?: UserId"
           FROM proposals
           WHERE ($1::uuid IS NULL OR user_id = $1)
             AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3::uuid))
           ORDER BY created_at DESC, id DESC
           LIMIT $4"#,
        by as Option<UserId>,
        at,
        id,
        fetch,
    )
    .fetch_all(pool)
    .await
}

/// Move proposal `id` from `from` to `to`: the proposal, or None when it is
/// not (or no longer) in `from`.
pub async fn transition(
    conn: &mut PgConnection,
    id: ProposalId,
    from: ProposalStatus,
    to: ProposalStatus,
    at: OffsetDateTime,
) -> sqlx::Result<Option<Proposal>> {
    sqlx::query_as!(
        Proposal,
        r#"UPDATE proposals SET status = $3, updated_at = $4
           WHERE id = $1 AND status = $2
           RETURNING id AS "id: ProposalId", title, problem, proposal,
                     status AS "status: ProposalStatus", created_at,
                     user_id AS "user_id?: UserId""#,
        id as ProposalId,
        from as ProposalStatus,
        to as ProposalStatus,
        at,
    )
    .fetch_optional(conn)
    .await
}

/// Proposal `id`'s status, None when there is none.
pub async fn status(
    conn: &mut PgConnection,
    id: ProposalId,
) -> sqlx::Result<Option<ProposalStatus>> {
    sqlx::query_scalar!(
        r#"SELECT status AS "status: ProposalStatus" FROM proposals WHERE id = $1"#,
        id as ProposalId,
    )
    .fetch_optional(conn)
    .await
}
