//! The order between an account's erasure ([`super::personal::erase`]) and
//! the writers of a person's data that do not come through their session.

/// The advisory lock that orders erasures against writers of a person's data
/// that do not come through their (revoked) session: the activity learned
/// from audit events and the curation's memory document. Writers hold it
/// shared for their transaction ([`hold_erasures`]); an erasure takes it
/// exclusively, so it waits for every writer in flight, and every writer
/// after it sees its tombstone (a statement's snapshot in READ COMMITTED is
/// taken after the lock is granted). Without it a batch that checked
/// `erased_users` before the erasure committed could commit rows after it.
pub const ERASURE_LOCK: i64 = 0x6167_656e_7445_7261; // "agentEra"

/// Hold off erasures until this transaction ends (see [`ERASURE_LOCK`]).
pub async fn hold_erasures(conn: &mut sqlx::PgConnection) -> sqlx::Result<()> {
    sqlx::query!("SELECT pg_advisory_xact_lock_shared($1)", ERASURE_LOCK)
        .execute(conn)
        .await?;
    Ok(())
}
