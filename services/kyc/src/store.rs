//! kyc's storage of submissions: every statement on `submissions`, checked at
//! compile time. Handlers call these as named steps; errors are sqlx's (the
//! route maps the one constraint a client can hit, `submissions_one_pending`).
//! Rows come back typed (the status a [`ReviewStatus`], the legal type a
//! [`LegalType`]); the statements write a submission awaiting review as the
//! literal `'pending'`.

use crate::submission::{ReviewStatus, Row};
use hub_domain::{LegalType, OrgId, SubmissionId, UserId};
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;

/// A submission to insert as pending.
pub struct NewSubmission<'a> {
    pub id: SubmissionId,
    pub org_id: OrgId,
    pub org_name: &'a str,
    pub legal_type: LegalType,
    pub sealed: &'a [u8],
    pub field_keys: &'a [String],
    pub submitted_by: UserId,
    pub at: OffsetDateTime,
}

/// Insert `s` as pending; a second pending one of the organization violates
/// `submissions_one_pending`.
pub async fn insert_pending(conn: &mut PgConnection, s: NewSubmission<'_>) -> sqlx::Result<Row> {
    sqlx::query_as!(
        Row,
        r#"INSERT INTO submissions (id, org_id, org_name, legal_type, status, payload, field_keys,
                                   submitted_by, created_at)
           VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8)
           RETURNING id AS "id: SubmissionId", org_id AS "org_id: OrgId", org_name, legal_type AS "legal_type: LegalType",
                     status AS "status: ReviewStatus", payload,
                     field_keys, review_notes, requested_fields, reviewed_at, created_at, purged_at"#,
        s.id as SubmissionId,
        s.org_id as OrgId,
        s.org_name,
        s.legal_type as LegalType,
        s.sealed,
        s.field_keys,
        s.submitted_by as UserId,
        s.at,
    )
    .fetch_one(conn)
    .await
}

/// The organization's latest 100 submissions, newest first.
pub async fn of_org(pool: &PgPool, org_id: OrgId) -> sqlx::Result<Vec<Row>> {
    sqlx::query_as!(
        Row,
        r#"SELECT id AS "id: SubmissionId", org_id AS "org_id: OrgId", org_name, legal_type AS "legal_type: LegalType",
                  status AS "status: ReviewStatus", payload,
                  field_keys, review_notes, requested_fields, reviewed_at, created_at, purged_at
             FROM submissions WHERE org_id = $1
            ORDER BY created_at DESC, id DESC LIMIT 100"#,
        org_id as OrgId,
    )
    .fetch_all(pool)
    .await
}

/// The staff queue: the oldest 500 pending submissions.
pub async fn pending(pool: &PgPool) -> sqlx::Result<Vec<Row>> {
    sqlx::query_as!(
        Row,
        r#"SELECT id AS "id: SubmissionId", org_id AS "org_id: OrgId", org_name, legal_type AS "legal_type: LegalType",
                  status AS "status: ReviewStatus", payload,
                  field_keys, review_notes, requested_fields, reviewed_at, created_at, purged_at
             FROM submissions WHERE status = 'pending'
            ORDER BY created_at, id LIMIT 500"#,
    )
    .fetch_all(pool)
    .await
}

/// kyc's part of the staff overview: the submissions waiting for review.
pub fn overview(
    pool: PgPool,
    now: time::OffsetDateTime,
) -> service_kit::overview::BoxFuture<'static, sqlx::Result<service_kit::overview::Queues>> {
    Box::pin(async move {
        let r = sqlx::query!(
            r#"SELECT count(*) AS "count!", min(created_at) AS oldest
                 FROM submissions WHERE status = 'pending'"#
        )
        .fetch_one(&pool)
        .await?;
        Ok([(
            "kyc_submissions_pending".to_owned(),
            service_kit::overview::Queue::of(r.count, r.oldest, now),
        )]
        .into())
    })
}

/// Submission `id`, locked until the transaction ends.
pub async fn lock(conn: &mut PgConnection, id: SubmissionId) -> sqlx::Result<Option<Row>> {
    sqlx::query_as!(
        Row,
        r#"SELECT id AS "id: SubmissionId", org_id AS "org_id: OrgId", org_name, legal_type AS "legal_type: LegalType",
                  status AS "status: ReviewStatus", payload,
                  field_keys, review_notes, requested_fields, reviewed_at, created_at, purged_at
             FROM submissions WHERE id = $1 FOR UPDATE"#,
        id as SubmissionId,
    )
    .fetch_optional(conn)
    .await
}

/// Record a staff decision on submission `id`.
pub async fn decide(
    conn: &mut PgConnection,
    id: SubmissionId,
    status: ReviewStatus,
    notes: &str,
    requested: &[String],
    by: UserId,
    at: OffsetDateTime,
) -> sqlx::Result<Row> {
    sqlx::query_as!(
        Row,
        r#"UPDATE submissions SET status = $2, review_notes = $3, requested_fields = $4,
                  reviewed_by = $5, reviewed_at = $6
            WHERE id = $1
            RETURNING id AS "id: SubmissionId", org_id AS "org_id: OrgId", org_name, legal_type AS "legal_type: LegalType",
                     status AS "status: ReviewStatus", payload,
                      field_keys, review_notes, requested_fields, reviewed_at, created_at, purged_at"#,
        id as SubmissionId,
        status as ReviewStatus,
        notes,
        requested,
        by as UserId,
        at,
    )
    .fetch_one(conn)
    .await
}

/// Purge up to `batch` submissions decided at least `after_days` before `now`
/// (rows other replicas hold are skipped); returns their ids.
pub async fn purge_decided(
    pool: &PgPool,
    now: OffsetDateTime,
    after_days: i32,
    batch: i64,
) -> sqlx::Result<Vec<SubmissionId>> {
    sqlx::query_scalar!(
        "UPDATE submissions SET payload = NULL, field_keys = '{}', review_notes = '', purged_at = $1
          WHERE id IN (SELECT id FROM submissions
                        WHERE purged_at IS NULL AND reviewed_at IS NOT NULL
                          AND reviewed_at <= $1::timestamptz - make_interval(days => $2)
                        ORDER BY reviewed_at LIMIT $3 FOR UPDATE SKIP LOCKED)
          RETURNING id AS \"id: SubmissionId\"",
        now,
        after_days,
        batch,
    )
    .fetch_all(pool)
    .await
}
