//! Members' AI settings: `member_ai` rows (absent until first changed) and the
//! membership replica's roles, read and written here only.

use hub_domain::{OrgId, Role, UserId};
use sqlx::{PgConnection, PgPool};

/// The fields of a settings change, validated.
pub struct Change {
    pub ai_enabled: Option<bool>,
    /// Some(None): clear the personal limit.
    pub token_limit: Option<Option<i64>>,
}

/// The member's role by the membership replica (None: not a member).
pub async fn role(conn: &mut PgConnection, org: OrgId, user: UserId) -> sqlx::Result<Option<Role>> {
    sqlx::query_scalar!(
        r#"SELECT role AS "role: Role" FROM org_members WHERE org_id = $1 AND user_id = $2"#,
        org as OrgId,
        user as UserId,
    )
    .fetch_optional(conn)
    .await
}

/// `(ai_enabled, token_limit, tokens_spent)` when the member has a row.
pub async fn settings(
    conn: &mut PgConnection,
    org: OrgId,
    user: UserId,
) -> sqlx::Result<Option<(bool, Option<i64>, i64)>> {
    Ok(sqlx::query!(
        "SELECT ai_enabled, token_limit, tokens_spent FROM member_ai WHERE org_id = $1 AND user_id = $2",
        org as OrgId,
        user as UserId,
    )
    .fetch_optional(conn)
    .await?
    .map(|r| (r.ai_enabled, r.token_limit, r.tokens_spent)))
}

/// Apply `change` (only the fields it has), creating the row with the
/// defaults first.
pub async fn change(
    conn: &mut PgConnection,
    org: OrgId,
    user: UserId,
    change: &Change,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO member_ai (org_id, user_id) VALUES ($1, $2) ON CONFLICT (org_id, user_id) DO NOTHING",
        org as OrgId,
        user as UserId,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "UPDATE member_ai SET \
           ai_enabled = COALESCE($3, ai_enabled), \
           token_limit = CASE WHEN $4 THEN $5 ELSE token_limit END, \
           updated_at = now() \
         WHERE org_id = $1 AND user_id = $2",
        org as OrgId,
        user as UserId,
        change.ai_enabled,
        change.token_limit.is_some(),
        change.token_limit.flatten(),
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// In one read: the organization's token balance with the member's settings
/// (defaults without a row): `(balance, ai_enabled, token_limit,
/// tokens_spent)`; None when the organization does not exist.
pub async fn allowance(
    pool: &PgPool,
    org: OrgId,
    user: UserId,
) -> sqlx::Result<Option<(i64, bool, Option<i64>, i64)>> {
    Ok(sqlx::query!(
        r#"SELECT t.balance, COALESCE(a.ai_enabled, true) AS "ai_enabled!", a.token_limit AS "token_limit?",
                  COALESCE(a.tokens_spent, 0) AS "tokens_spent!"
             FROM token_balances t LEFT JOIN member_ai a ON a.org_id = t.org_id AND a.user_id = $2
            WHERE t.org_id = $1"#,
        org as OrgId,
        user as UserId,
    )
    .fetch_optional(pool)
    .await?
    .map(|r| (r.balance, r.ai_enabled, r.token_limit, r.tokens_spent)))
}

/// Every member of `org` with their AI settings (defaults when none):
/// `(user_id, role, ai_enabled, token_limit, tokens_spent)`.
pub async fn all(
    conn: &mut PgConnection,
    org: OrgId,
) -> sqlx::Result<Vec<(UserId, String, bool, Option<i64>, i64)>> {
    let rows = sqlx::query!(
        r#"SELECT m.user_id AS "user_id: UserId", m.role,
                  COALESCE(a.ai_enabled, true) AS "ai_enabled!",
                  a.token_limit AS "token_limit?",
                  COALESCE(a.tokens_spent, 0) AS "tokens_spent!"
           FROM org_members m
           LEFT JOIN member_ai a ON a.org_id = m.org_id AND a.user_id = m.user_id
           WHERE m.org_id = $1 ORDER BY m.changed_at, m.user_id"#,
        org as OrgId,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            (
                r.user_id,
                r.role,
                r.ai_enabled,
                r.token_limit,
                r.tokens_spent,
            )
        })
        .collect())
}
