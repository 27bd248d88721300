//! The OpenID Provider's grants (issue 37), stored: authorization requests
//! waiting for a person and the codes they become (`oauth_requests`),
//! consents (`oauth_consents`), grants and their refresh tokens
//! (`oauth_grants`, `oauth_refresh_tokens`). Only hashes of handles, codes
//! and refresh tokens are kept. Times are identity's clock (tests move it).
//!
//! A grant lives while the hub session that signed in does: [`subject`]
//! answers only for a live session of an enabled user, so signing out,
//! revoking the session or disabling the account stops refresh, userinfo and
//! introspection at once.

use hub_domain::{Membership, OrgId, SessionId, UserId};
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;
use uuid::Uuid;

/// A request `GET /oauth/authorize` checked, to store.
pub struct NewRequest<'a> {
    pub handle_hash: Vec<u8>,
    pub client_id: Uuid,
    pub redirect_uri: &'a str,
    pub scopes: &'a [String],
    pub state: Option<&'a str>,
    pub nonce: Option<&'a str>,
    pub code_challenge: &'a str,
    /// The sign-in must be no older (`prompt=login`, `max_age`).
    pub fresh_after: Option<OffsetDateTime>,
    /// Ask for consent even if given before (`prompt=consent`).
    pub force_consent: bool,
    pub now: OffsetDateTime,
    pub expires_at: OffsetDateTime,
}

pub async fn insert_request(pool: &PgPool, r: NewRequest<'_>) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO oauth_requests (handle_hash, client_id, redirect_uri, scopes, state, nonce, \
                                     code_challenge, fresh_after, force_consent, created_at, \
                                     expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        r.handle_hash,
        r.client_id,
        r.redirect_uri,
        r.scopes,
        r.state,
        r.nonce,
        r.code_challenge,
        r.fresh_after,
        r.force_consent,
        r.now,
        r.expires_at,
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// A request waiting for its person, with what the console shows of its client.
pub struct Pending {
    pub client_id: Uuid,
    pub client_name: String,
    pub first_party: bool,
    pub allowed_org_ids: Vec<Uuid>,
    pub redirect_uri: String,
    pub scopes: Vec<String>,
    pub state: Option<String>,
    pub expires_at: OffsetDateTime,
    pub fresh_after: Option<OffsetDateTime>,
    pub force_consent: bool,
    /// The session that first read it; only that one may answer.
    pub viewer_session_id: Option<Uuid>,
}

/// The request with this handle, if it still waits (not accepted, not
/// expired, its client not retired), locked (FOR UPDATE of the request).
pub async fn pending(
    conn: &mut PgConnection,
    handle_hash: &[u8],
    now: OffsetDateTime,
) -> sqlx::Result<Option<Pending>> {
    sqlx::query_as!(
        Pending,
        r#"SELECT r.client_id, c.name AS client_name, c.first_party,
                  c.allowed_org_ids, r.redirect_uri, r.scopes, r.state, r.expires_at,
                  r.fresh_after, r.force_consent, r.viewer_session_id
             FROM oauth_requests r JOIN oauth_clients c ON c.id = r.client_id
            WHERE r.handle_hash = $1 AND r.user_id IS NULL AND r.expires_at > $2
              AND c.retired_at IS NULL
            FOR UPDATE OF r"#,
        handle_hash,
        now,
    )
    .fetch_optional(conn)
    .await
}

/// The session `session_id` is the request's only reader from now on.
pub async fn bind_viewer(
    conn: &mut PgConnection,
    handle_hash: &[u8],
    session_id: SessionId,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE oauth_requests SET viewer_session_id = $2 \
          WHERE handle_hash = $1 AND viewer_session_id IS NULL",
        handle_hash,
        session_id as SessionId,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The request's code: the person and session that accepted, the code's hash.
pub async fn accept(
    conn: &mut PgConnection,
    handle_hash: &[u8],
    user_id: UserId,
    session_id: SessionId,
    code_hash: &[u8],
    code_expires_at: OffsetDateTime,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE oauth_requests SET user_id = $2, session_id = $3, code_hash = $4, \
                code_expires_at = $5 WHERE handle_hash = $1",
        handle_hash,
        user_id as UserId,
        session_id as SessionId,
        code_hash,
        code_expires_at,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Forget a request (the person refused it).
pub async fn delete_request(conn: &mut PgConnection, handle_hash: &[u8]) -> sqlx::Result<()> {
    sqlx::query!(
        "DELETE FROM oauth_requests WHERE handle_hash = $1",
        handle_hash
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The scopes `user_id` already agreed to give `client_id`.
pub async fn consented(
    conn: &mut PgConnection,
    user_id: UserId,
    client_id: Uuid,
) -> sqlx::Result<Vec<String>> {
    Ok(sqlx::query_scalar!(
        "SELECT scopes FROM oauth_consents WHERE user_id = $1 AND client_id = $2",
        user_id as UserId,
        client_id,
    )
    .fetch_optional(conn)
    .await?
    .unwrap_or_default())
}

/// Record that `user_id` agreed to `scopes` for `client_id` (added to what
/// they agreed to before).
pub async fn consent(
    conn: &mut PgConnection,
    user_id: UserId,
    client_id: Uuid,
    scopes: &[String],
    now: OffsetDateTime,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO oauth_consents (user_id, client_id, scopes, granted_at) \
         VALUES ($1, $2, $3, $4) \
         ON CONFLICT (user_id, client_id) DO UPDATE SET \
           scopes = ARRAY(SELECT DISTINCT s FROM unnest(oauth_consents.scopes || EXCLUDED.scopes) s \
                          ORDER BY s), \
           granted_at = EXCLUDED.granted_at",
        user_id as UserId,
        client_id,
        scopes,
        now,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// An accepted request as the token endpoint finds it by its code.
pub struct Code {
    pub handle_hash: Vec<u8>,
    pub client_id: Uuid,
    pub redirect_uri: String,
    pub scopes: Vec<String>,
    pub nonce: Option<String>,
    pub code_challenge: String,
    pub user_id: Option<UserId>,
    pub session_id: Option<SessionId>,
    pub code_expires_at: Option<OffsetDateTime>,
    pub code_used_at: Option<OffsetDateTime>,
    pub grant_id: Option<Uuid>,
}

/// The request whose code hashes to `code_hash`, locked (of two concurrent
/// exchanges one waits and then sees the code used).
pub async fn code(conn: &mut PgConnection, code_hash: &[u8]) -> sqlx::Result<Option<Code>> {
    sqlx::query_as!(
        Code,
        r#"SELECT handle_hash, client_id, redirect_uri, scopes, nonce, code_challenge,
                  user_id AS "user_id: UserId", session_id AS "session_id: SessionId",
                  code_expires_at, code_used_at, grant_id
             FROM oauth_requests WHERE code_hash = $1 FOR UPDATE"#,
        code_hash,
    )
    .fetch_optional(conn)
    .await
}

/// Mark the code used, and by which grant.
pub async fn code_used(
    conn: &mut PgConnection,
    handle_hash: &[u8],
    grant_id: Option<Uuid>,
    now: OffsetDateTime,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE oauth_requests SET code_used_at = $2, grant_id = $3 WHERE handle_hash = $1",
        handle_hash,
        now,
        grant_id,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A grant: who, to which client, what, and the sign-in behind it.
#[derive(Clone)]
pub struct Grant {
    pub id: Uuid,
    pub client_id: Uuid,
    pub user_id: UserId,
    pub session_id: SessionId,
    pub scopes: Vec<String>,
    pub auth_time: OffsetDateTime,
    pub mfa: bool,
    /// How the session behind it was opened (RFC 8176 values).
    pub amr: Vec<String>,
}

pub async fn insert_grant(
    conn: &mut PgConnection,
    g: &Grant,
    now: OffsetDateTime,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO oauth_grants (id, client_id, user_id, session_id, scopes, auth_time, mfa, \
                                   amr, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        g.id,
        g.client_id,
        g.user_id as UserId,
        g.session_id as SessionId,
        &g.scopes,
        g.auth_time,
        g.mfa,
        &g.amr,
        now,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Whether grant `id` exists and is not revoked.
pub async fn grant_live(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<bool> {
    Ok(sqlx::query_scalar!(
        "SELECT revoked_at IS NULL AS \"live!\" FROM oauth_grants WHERE id = $1",
        id
    )
    .fetch_optional(conn)
    .await?
    .unwrap_or(false))
}

/// Revoke the live grants client `client_id` holds from session `session_id`.
pub async fn revoke_client_grants(
    conn: &mut PgConnection,
    client_id: Uuid,
    session_id: SessionId,
    now: OffsetDateTime,
) -> sqlx::Result<u64> {
    Ok(sqlx::query!(
        "UPDATE oauth_grants SET revoked_at = $3 \
          WHERE client_id = $1 AND session_id = $2 AND revoked_at IS NULL",
        client_id,
        session_id as SessionId,
        now,
    )
    .execute(conn)
    .await?
    .rows_affected())
}

/// Revoke a grant (every refresh token of its family stops).
pub async fn revoke_grant(
    conn: &mut PgConnection,
    id: Uuid,
    now: OffsetDateTime,
) -> sqlx::Result<bool> {
    Ok(sqlx::query!(
        "UPDATE oauth_grants SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
        id,
        now,
    )
    .execute(conn)
    .await?
    .rows_affected()
        == 1)
}

pub async fn insert_refresh(
    conn: &mut PgConnection,
    token_hash: &[u8],
    grant_id: Uuid,
    now: OffsetDateTime,
    expires_at: OffsetDateTime,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO oauth_refresh_tokens (token_hash, grant_id, created_at, expires_at) \
         VALUES ($1, $2, $3, $4)",
        token_hash,
        grant_id,
        now,
        expires_at,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A refresh token with its grant.
pub struct Refresh {
    pub grant: Grant,
    pub expires_at: OffsetDateTime,
    pub used_at: Option<OffsetDateTime>,
    pub grant_revoked: bool,
}

/// The refresh token hashing to `token_hash` and its grant, their rows
/// locked (FOR UPDATE: of two uses of one token, the second sees the first's
/// mark; a revocation of the grant waits for a refresh in flight, or the
/// refresh sees it). Outside a transaction the locks end with the statement.
pub async fn refresh(conn: &mut PgConnection, token_hash: &[u8]) -> sqlx::Result<Option<Refresh>> {
    let row = sqlx::query!(
        r#"SELECT g.id, g.client_id, g.user_id AS "user_id: UserId",
                  g.session_id AS "session_id: SessionId", g.scopes, g.auth_time, g.mfa,
                  g.amr, g.revoked_at IS NOT NULL AS "grant_revoked!", t.expires_at, t.used_at
             FROM oauth_refresh_tokens t JOIN oauth_grants g ON g.id = t.grant_id
            WHERE t.token_hash = $1 FOR UPDATE OF t, g"#,
        token_hash,
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| Refresh {
        grant: Grant {
            id: r.id,
            client_id: r.client_id,
            user_id: r.user_id,
            session_id: r.session_id,
            scopes: r.scopes,
            auth_time: r.auth_time,
            mfa: r.mfa,
            amr: r.amr,
        },
        expires_at: r.expires_at,
        used_at: r.used_at,
        grant_revoked: r.grant_revoked,
    }))
}

pub async fn refresh_used(
    conn: &mut PgConnection,
    token_hash: &[u8],
    now: OffsetDateTime,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE oauth_refresh_tokens SET used_at = $2 WHERE token_hash = $1",
        token_hash,
        now,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The person behind a live session, as tokens describe them.
pub struct Subject {
    pub user_id: UserId,
    pub email: String,
    pub name: String,
    pub memberships: Vec<Membership>,
    pub staff_granted: bool,
    /// The session was opened through a second factor.
    pub mfa: bool,
    /// How the session was opened (RFC 8176 values).
    pub amr: Vec<String>,
    /// When the session was opened (the ID token's `auth_time`).
    pub auth_time: OffsetDateTime,
}

/// The user of session `session_id` if the session is live and the user
/// enabled: the one check behind every token this provider hands out or
/// vouches for.
pub async fn subject(
    conn: &mut PgConnection,
    session_id: SessionId,
) -> sqlx::Result<Option<Subject>> {
    let row = sqlx::query!(
        r#"SELECT s.created_at, s.mfa, s.amr, u.id AS "user_id: UserId", u.email, u.name,
           COALESCE((SELECT json_agg(json_build_object('org_id', m.org_id, 'role', m.role)
                                     ORDER BY m.created_at, m.org_id)
                     FROM memberships m
                     WHERE m.user_id = u.id AND NOT m.org_closed AND NOT m.org_suspended),
                    '[]'::json) AS "memberships!: sqlx::types::Json<Vec<Membership>>",
           EXISTS (SELECT 1 FROM staff_grants g WHERE g.user_id = u.id) AS "staff_granted!"
         FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE s.id = $1 AND s.revoked_at IS NULL AND s.expires_at > now()
           AND u.disabled_at IS NULL"#,
        session_id as SessionId,
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| Subject {
        user_id: r.user_id,
        email: r.email,
        name: r.name,
        memberships: r.memberships.0,
        staff_granted: r.staff_granted,
        mfa: r.mfa,
        amr: r.amr,
        auth_time: r.created_at,
    }))
}

/// Whether `org` is among a client's allowed organizations (none: any).
pub fn org_allowed(allowed: &[Uuid], org: OrgId) -> bool {
    allowed.is_empty() || allowed.contains(&org.as_uuid())
}

impl Subject {
    /// Whether the person may use a client limited to `allowed` (none: any
    /// client): a member of one of those organizations.
    pub fn may_use(&self, allowed: &[Uuid]) -> bool {
        allowed.is_empty()
            || self
                .memberships
                .iter()
                .any(|m| org_allowed(allowed, m.org_id))
    }
}

/// Delete requests and codes long past their life, and grants revoked or
/// ended long ago with their tokens; returns the rows deleted.
pub async fn sweep(pool: &PgPool, keep_secs: f64) -> sqlx::Result<u64> {
    let mut n = sqlx::query!(
        "DELETE FROM oauth_requests WHERE expires_at < now() - make_interval(secs => $1) \
           AND (code_expires_at IS NULL OR code_expires_at < now() - make_interval(secs => $1))",
        keep_secs,
    )
    .execute(pool)
    .await?
    .rows_affected();
    n += sqlx::query!(
        "DELETE FROM oauth_device_requests WHERE expires_at < now() - make_interval(secs => $1)",
        keep_secs,
    )
    .execute(pool)
    .await?
    .rows_affected();
    n += sqlx::query!(
        "DELETE FROM oauth_refresh_tokens WHERE expires_at < now() - make_interval(secs => $1)",
        keep_secs,
    )
    .execute(pool)
    .await?
    .rows_affected();
    Ok(n)
}

/// A device authorization request to store (RFC 8628 3.1).
pub struct NewDevice<'a> {
    pub device_code_hash: Vec<u8>,
    pub user_code_hash: Vec<u8>,
    pub client_id: Uuid,
    pub scopes: &'a [String],
    pub now: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub interval_secs: i32,
}

/// Store a device request; false when the user code is taken (draw again).
pub async fn insert_device(pool: &PgPool, d: NewDevice<'_>) -> sqlx::Result<bool> {
    Ok(sqlx::query!(
        "INSERT INTO oauth_device_requests (device_code_hash, user_code_hash, client_id, scopes, \
                                            created_at, expires_at, interval_secs) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (user_code_hash) DO NOTHING",
        d.device_code_hash,
        d.user_code_hash,
        d.client_id,
        d.scopes,
        d.now,
        d.expires_at,
        d.interval_secs,
    )
    .execute(pool)
    .await?
    .rows_affected()
        == 1)
}

/// A device request waiting for its person, as the console shows it.
pub struct PendingDevice {
    pub device_code_hash: Vec<u8>,
    pub client_id: Uuid,
    pub client_name: String,
    pub first_party: bool,
    pub allowed_org_ids: Vec<Uuid>,
    pub scopes: Vec<String>,
    pub expires_at: OffsetDateTime,
}

/// The unanswered, unexpired request whose user code hashes to
/// `user_code_hash`, locked.
pub async fn pending_device(
    conn: &mut PgConnection,
    user_code_hash: &[u8],
    now: OffsetDateTime,
) -> sqlx::Result<Option<PendingDevice>> {
    sqlx::query_as!(
        PendingDevice,
        r#"SELECT d.device_code_hash, d.client_id, c.name AS client_name, c.first_party,
                  c.allowed_org_ids, d.scopes, d.expires_at
             FROM oauth_device_requests d JOIN oauth_clients c ON c.id = d.client_id
            WHERE d.user_code_hash = $1 AND d.approved IS NULL AND d.expires_at > $2
              AND c.retired_at IS NULL
            FOR UPDATE OF d"#,
        user_code_hash,
        now,
    )
    .fetch_optional(conn)
    .await
}

/// The person's answer to a device request.
pub async fn answer_device(
    conn: &mut PgConnection,
    device_code_hash: &[u8],
    user_id: UserId,
    session_id: SessionId,
    approved: bool,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE oauth_device_requests SET user_id = $2, session_id = $3, approved = $4 \
          WHERE device_code_hash = $1",
        device_code_hash,
        user_id as UserId,
        session_id as SessionId,
        approved,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A device request as the token endpoint polls it.
pub struct Device {
    pub client_id: Uuid,
    pub scopes: Vec<String>,
    pub expires_at: OffsetDateTime,
    pub interval_secs: i32,
    pub last_poll_at: Option<OffsetDateTime>,
    pub user_id: Option<UserId>,
    pub session_id: Option<SessionId>,
    pub approved: Option<bool>,
    pub used_at: Option<OffsetDateTime>,
}

/// The device request of `device_code_hash`, locked.
pub async fn device(
    conn: &mut PgConnection,
    device_code_hash: &[u8],
) -> sqlx::Result<Option<Device>> {
    sqlx::query_as!(
        Device,
        r#"SELECT client_id, scopes, expires_at, interval_secs, last_poll_at,
                  user_id AS "user_id: UserId", session_id AS "session_id: SessionId",
                  approved, used_at
             FROM oauth_device_requests WHERE device_code_hash = $1 FOR UPDATE"#,
        device_code_hash,
    )
    .fetch_optional(conn)
    .await
}

/// Record a poll: its time, a new interval (slow_down), the tokens handed out.
pub async fn device_polled(
    conn: &mut PgConnection,
    device_code_hash: &[u8],
    now: OffsetDateTime,
    interval_secs: i32,
    used: bool,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE oauth_device_requests SET last_poll_at = $2, interval_secs = $3, \
                used_at = CASE WHEN $4 THEN $2 ELSE used_at END \
          WHERE device_code_hash = $1",
        device_code_hash,
        now,
        interval_secs,
        used,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A refresh the token endpoint asks for (see [`refresh_batch`]).
#[derive(Debug)]
pub struct RefreshAsk {
    pub token_hash: Vec<u8>,
    pub client_id: Uuid,
    /// The client as the caller authenticated it (perhaps a cached copy):
    /// the refresh is made only if the client is still so and not retired.
    pub client_updated_at: OffsetDateTime,
    /// Identity's clock when it was asked.
    pub at: OffsetDateTime,
    pub next_hash: Vec<u8>,
    pub next_expires_at: OffsetDateTime,
}

/// Refreshes in one statement (the token endpoint's hot path, batched by
/// the group commit of [`crate::refreshes`]): for each ask whose token is
/// its client's (the client still as the caller saw it, not retired), unused,
/// unexpired, its grant live and the grant's session
/// live with its user enabled, the token is marked used and `next_hash`
/// stored in its place, and the grant and the person come back. None for
/// the others, with nothing written for them: the caller finds out why the
/// slow way ([`refresh`], which also catches a reuse). The token rows are
/// locked (two uses of one token: the second waits on the first's lock, then
/// no longer matches `used_at`, and takes the slow way); the grant is read,
/// not locked, so a revocation never waits for refreshes: one that commits
/// while a refresh is in flight leaves that refresh's tokens dead on arrival
/// (every use, introspection and the gateway check the grant). The asks'
/// token hashes must be distinct.
pub async fn refresh_batch(
    conn: &mut PgConnection,
    asks: &[&RefreshAsk],
) -> sqlx::Result<Vec<Option<(Grant, Subject)>>> {
    let hashes: Vec<Vec<u8>> = asks.iter().map(|a| a.token_hash.clone()).collect();
    let clients: Vec<Uuid> = asks.iter().map(|a| a.client_id).collect();
    let client_versions: Vec<OffsetDateTime> = asks.iter().map(|a| a.client_updated_at).collect();
    let ats: Vec<OffsetDateTime> = asks.iter().map(|a| a.at).collect();
    let nexts: Vec<Vec<u8>> = asks.iter().map(|a| a.next_hash.clone()).collect();
    let expiries: Vec<OffsetDateTime> = asks.iter().map(|a| a.next_expires_at).collect();
    let rows = sqlx::query!(
        r#"WITH ask AS (
             SELECT * FROM unnest($1::bytea[], $2::uuid[], $3::timestamptz[], $4::bytea[],
                                  $5::timestamptz[], $6::timestamptz[])
                        AS a (token_hash, client_id, at, next_hash, next_expires_at,
                              client_updated_at)
           ), cur AS (
             SELECT t.token_hash, a.at, a.next_hash, a.next_expires_at, g.id, g.client_id,
                    g.user_id, g.session_id, g.scopes, g.auth_time, g.mfa AS grant_mfa, g.amr AS grant_amr
               FROM ask a JOIN oauth_refresh_tokens t ON t.token_hash = a.token_hash
               JOIN oauth_grants g ON g.id = t.grant_id
               JOIN oauth_clients c ON c.id = a.client_id
              WHERE t.used_at IS NULL AND t.expires_at > a.at
                AND g.revoked_at IS NULL AND g.client_id = a.client_id
                AND c.retired_at IS NULL AND c.updated_at = a.client_updated_at
                FOR UPDATE OF t
           ), who AS (
             SELECT cur.*, s.created_at, s.mfa, s.amr, u.email, u.name,
                    COALESCE((SELECT json_agg(json_build_object('org_id', m.org_id, 'role', m.role)
                                              ORDER BY m.created_at, m.org_id)
                              FROM memberships m
                              WHERE m.user_id = u.id AND NOT m.org_closed AND NOT m.org_suspended),
                             '[]'::json) AS memberships,
                    EXISTS (SELECT 1 FROM staff_grants sg WHERE sg.user_id = u.id) AS staff_granted
               FROM cur JOIN sessions s ON s.id = cur.session_id JOIN users u ON u.id = s.user_id
              WHERE s.revoked_at IS NULL AND s.expires_at > now() AND u.disabled_at IS NULL
                AND u.id = cur.user_id
           ), spent AS (
             UPDATE oauth_refresh_tokens t SET used_at = who.at
               FROM who WHERE t.token_hash = who.token_hash
             RETURNING t.token_hash
           ), fresh AS (
             INSERT INTO oauth_refresh_tokens (token_hash, grant_id, created_at, expires_at)
             SELECT who.next_hash, who.id, who.at, who.next_expires_at
               FROM who JOIN spent ON spent.token_hash = who.token_hash
             RETURNING token_hash
           )
           SELECT who.token_hash AS "token_hash!", who.id AS "id!", who.client_id AS "client_id!",
                  who.user_id AS "user_id!: UserId", who.session_id AS "session_id!: SessionId",
                  who.scopes AS "scopes!", who.auth_time AS "auth_time!", who.grant_mfa AS "grant_mfa!",
                  who.grant_amr AS "grant_amr!", who.created_at AS "created_at!", who.mfa AS "mfa!",
                  who.amr AS "amr!", who.email AS "email!",
                  who.name AS "name!",
                  who.memberships AS "memberships!: sqlx::types::Json<Vec<Membership>>",
                  who.staff_granted AS "staff_granted!"
             FROM who JOIN fresh ON fresh.token_hash = who.next_hash"#,
        &hashes,
        &clients,
        &ats,
        &nexts,
        &expiries,
        &client_versions,
    )
    .fetch_all(conn)
    .await?;
    let mut done: std::collections::HashMap<Vec<u8>, (Grant, Subject)> = rows
        .into_iter()
        .map(|r| {
            (
                r.token_hash,
                (
                    Grant {
                        id: r.id,
                        client_id: r.client_id,
                        user_id: r.user_id,
                        session_id: r.session_id,
                        scopes: r.scopes,
                        auth_time: r.auth_time,
                        mfa: r.grant_mfa,
                        amr: r.grant_amr,
                    },
                    Subject {
                        user_id: r.user_id,
                        email: r.email,
                        name: r.name,
                        memberships: r.memberships.0,
                        staff_granted: r.staff_granted,
                        mfa: r.mfa,
                        amr: r.amr,
                        auth_time: r.created_at,
                    },
                ),
            )
        })
        .collect();
    Ok(asks.iter().map(|a| done.remove(&a.token_hash)).collect())
}
