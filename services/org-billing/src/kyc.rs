//! The organization's KYC state, as kyc decides it. kyc pushes each new state
//! (`PUT /internal/v1/organizations/{id}/kyc-state`, the read-your-writes fast
//! path) and announces it (`core.v1.kyc.changed {org_id, version}`, the
//! guarantee: this consumer then pulls the state from kyc). A state applies
//! only when its version is newer than the one shown, so both paths, in any
//! order and any number of times, converge. Once verified, the legal identity
//! (legal_name, tax_id, registration_number, registered_address) is locked:
//! nothing in org-billing writes it but an approved KYC state.
//!
//! The legal identity is personal data (an individual's name and national
//! id): it is stored sealed (AES-256-GCM, `sealing.keys`) in
//! `organizations.legal_identity`, bound to the organization's id, and opened
//! only to answer the organization's detail. Versions before it kept four
//! plaintext columns; [`finish_migrations`] seals what they hold, then the
//! remaining migrations drop them and rewrite the table.

use crate::state::AppState;
use event_contracts::{Envelope, KycChanged};
use hub_domain::{KycStatus, OrgId};
use service_kit::sealed::Sealer;
use sqlx::{migrate::Migrator, PgPool};
use std::collections::BTreeMap;

pub use event_contracts::internal::{KycState, LegalIdentity};

/// The migration that adds the sealed column (plaintext still present).
pub const SEALED_COLUMN_MIGRATION: i64 = 20261124200001;
/// The migration that drops the plaintext columns (it refuses to run while
/// any plaintext is left: [`finish_migrations`] seals it first).
pub const PLAINTEXT_DROPPED_MIGRATION: i64 = 20261124200002;

/// The address keys a registered address always has ("" when absent).
const ADDRESS_KEYS: [&str; 6] = ["line1", "line2", "city", "region", "postal_code", "country"];

/// The AAD an organization's legal identity is sealed with: a sealed value
/// moved to another organization's row does not open.
pub fn identity_aad(org_id: OrgId) -> Vec<u8> {
    format!("org-billing-legal-identity:{org_id}").into_bytes()
}

/// The legal identity of an organization that has none (never verified):
/// empty strings and an address with its six keys empty.
pub fn empty_identity() -> LegalIdentity {
    LegalIdentity {
        legal_name: String::new(),
        tax_id: String::new(),
        registration_number: String::new(),
        registered_address: ADDRESS_KEYS
            .iter()
            .map(|k| (k.to_string(), String::new()))
            .collect(),
    }
}

/// Seal `identity` for `org_id`.
pub fn seal_identity(
    sealer: &Sealer,
    org_id: OrgId,
    identity: &LegalIdentity,
) -> anyhow::Result<Vec<u8>> {
    sealer.seal_json(identity, &identity_aad(org_id))
}

/// Open the stored `legal_identity` of `org_id` (NULL: the empty identity).
pub fn open_identity(
    sealer: &Sealer,
    org_id: OrgId,
    sealed: Option<&[u8]>,
) -> anyhow::Result<LegalIdentity> {
    match sealed {
        None => Ok(empty_identity()),
        Some(bytes) => sealer.open_json(bytes, &identity_aad(org_id)),
    }
}

pub use crate::search_key::SearchKey;

/// A source of org-billing's migrations older than `before`.
/// org-billing's migrations older than `version` (a database already past
/// them is fine). Start-up applies those up to the sealed column, then
/// [`finish_migrations`] the rest.
pub async fn migrations_before(version: i64) -> anyhow::Result<Migrator> {
    service_kit::db::tolerant(
        crate::MIGRATOR
            .iter()
            .filter(|m| m.version < version)
            .cloned()
            .collect(),
    )
    .await
}

#[derive(sqlx::FromRow)]
struct Plain {
    id: OrgId,
    legal_name: String,
    tax_id: String,
    registration_number: String,
    registered_address: serde_json::Value,
}

/// Rows sealed per transaction.
const SEAL_BATCH: i64 = 200;

/// After [`migrations_before`]`(`[`PLAINTEXT_DROPPED_MIGRATION`]`)`: seal every
/// legal identity the plaintext columns still hold (blanking them in the same
/// statement), then apply the remaining migrations (which drop those columns
/// and rewrite the table, so that no copy of the plaintext stays in it).
/// Replicas starting together take turns (an advisory lock); once the columns
/// are gone this only applies the migrations. Returns how many rows it sealed.
pub async fn finish_migrations(
    pool: &PgPool,
    sealer: &Sealer,
    search: &SearchKey,
) -> anyhow::Result<u64> {
    let mut lock = pool.acquire().await?;
    sqlx::query!("SELECT pg_advisory_lock(hashtext('org-billing-seal-legal-identity'))")
        .execute(&mut *lock)
        .await?;
    let result = seal_plaintext(pool, sealer).await;
    let result = match result {
        Ok(n) => service_kit::db::migrate(pool, crate::SCHEMA, &crate::MIGRATOR)
            .await
            .map(|_| n),
        Err(e) => Err(e),
    };
    let result = match result {
        Ok(n) => backfill_tax_id_hashes(pool, sealer, search)
            .await
            .map(|_| n),
        Err(e) => Err(e),
    };
    sqlx::query_scalar!("SELECT pg_advisory_unlock(hashtext('org-billing-seal-legal-identity'))")
        .fetch_one(&mut *lock)
        .await?;
    let n = result?;
    if n > 0 {
        tracing::info!(
            sealed = n,
            "legal identities stored in clear are now sealed"
        );
    }
    Ok(n)
}

/// The tax id hash of every sealed identity stored before the column (one
/// identity opened at a time, once, in batches): where it can, since an
/// identity that does not open with the current keys is left without one
/// (and logged by count only).
async fn backfill_tax_id_hashes(
    pool: &PgPool,
    sealer: &Sealer,
    search: &SearchKey,
) -> anyhow::Result<()> {
    let mut after: Option<OrgId> = None;
    let (mut hashed, mut failed) = (0u64, 0u64);
    loop {
        let rows = sqlx::query!(
            r#"SELECT id AS "id: OrgId", legal_identity AS "legal_identity!" FROM organizations
               WHERE legal_identity IS NOT NULL AND tax_id_hash IS NULL
                 AND ($1::uuid IS NULL OR id > $1)
               ORDER BY id LIMIT $2"#,
            after as Option<OrgId>,
            SEAL_BATCH,
        )
        .fetch_all(pool)
        .await?;
        let n = rows.len();
        for r in rows {
            after = Some(r.id);
            let Ok(identity) = open_identity(sealer, r.id, Some(&r.legal_identity)) else {
                failed += 1;
                continue;
            };
            if let Some(h) = search.tax_id_hash(&identity.tax_id) {
                sqlx::query!(
                    "UPDATE organizations SET tax_id_hash = $2 WHERE id = $1 AND tax_id_hash IS NULL",
                    r.id as OrgId,
                    h,
                )
                .execute(pool)
                .await?;
                hashed += 1;
            }
        }
        if (n as i64) < SEAL_BATCH {
            break;
        }
    }
    if hashed > 0 || failed > 0 {
        tracing::info!(hashed, failed, "tax id search hashes backfilled");
    }
    Ok(())
}

async fn seal_plaintext(pool: &PgPool, sealer: &Sealer) -> anyhow::Result<u64> {
    let has_plaintext: bool = sqlx::query_scalar!(
        "SELECT EXISTS (SELECT 1 FROM information_schema.columns \
           WHERE table_schema = current_schema() AND table_name = 'organizations' \
             AND column_name = 'tax_id') AS \"exists!\"",
    )
    .fetch_one(pool)
    .await?;
    if !has_plaintext {
        return Ok(0);
    }
    let mut sealed = 0;
    loop {
        let mut tx = pool.begin().await?;
        // Anything the plaintext columns hold, verified or not: nothing in
        // clear may survive them.
        // A runtime string, not a checked macro: these columns exist only
        // between migrations 20261124200001 and 20261124200002, which this
        // step runs between; the schema the macros check against (every
        // migration applied) no longer has them.
        let rows: Vec<Plain> = sqlx::query_as(
            "SELECT id, legal_name, tax_id, registration_number, registered_address \
             FROM organizations \
             WHERE legal_identity IS NULL AND (kyc_locked OR legal_name <> '' OR tax_id <> '' \
               OR registration_number <> '' \
               OR EXISTS (SELECT 1 FROM jsonb_each(registered_address) a \
                          WHERE a.value NOT IN ('\"\"'::jsonb, 'null'::jsonb))) \
             ORDER BY id LIMIT $1 FOR UPDATE",
        )
        .bind(SEAL_BATCH)
        .fetch_all(&mut *tx)
        .await?;
        let n = rows.len();
        for r in rows {
            let mut address: BTreeMap<String, String> = empty_identity().registered_address;
            if let serde_json::Value::Object(m) = r.registered_address {
                for (k, v) in m {
                    let v = match v {
                        serde_json::Value::String(s) => s,
                        serde_json::Value::Null => String::new(),
                        other => other.to_string(),
                    };
                    address.insert(k, v);
                }
            }
            let identity = LegalIdentity {
                legal_name: r.legal_name,
                tax_id: r.tax_id,
                registration_number: r.registration_number,
                registered_address: address,
            };
            sqlx::query(
                "UPDATE organizations SET legal_identity = $2, legal_name = '', tax_id = '', \
                   registration_number = '', registered_address = DEFAULT WHERE id = $1",
            )
            .bind(r.id)
            .bind(seal_identity(sealer, r.id, &identity)?)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        sealed += n as u64;
        if (n as i64) < SEAL_BATCH {
            break;
        }
    }
    Ok(sealed)
}

/// Apply `s` to `org_id` if newer; returns whether it applied (false: older or
/// equal, or no such organization). Its status is a [`KycStatus`]: one kyc
/// could not name fails the body's parse before it gets here.
pub async fn apply(state: &AppState, org_id: OrgId, s: &KycState) -> anyhow::Result<bool> {
    let sealed = s
        .legal_identity
        .as_ref()
        .map(|i| seal_identity(&state.sealer, org_id, i))
        .transpose()?;
    let tax_id_hash = s
        .legal_identity
        .as_ref()
        .and_then(|i| state.search_key.tax_id_hash(&i.tax_id));
    let applied = sqlx::query!(
        "UPDATE organizations SET kyc_version = $2, kyc_status = $3, kyc_tier = $4, \
           kyc_verified_at = $5, kyc_locked = $6, \
           legal_identity = COALESCE($7, legal_identity), \
           tax_id_hash = CASE WHEN $7::bytea IS NULL THEN tax_id_hash ELSE $8 END \
         WHERE id = $1 AND kyc_version < $2",
        org_id as OrgId,
        s.version,
        s.kyc_status as KycStatus,
        s.kyc_tier,
        s.kyc_verified_at,
        sealed.is_some(),
        sealed,
        tax_id_hash,
    )
    .execute(&state.pool)
    .await?
    .rows_affected()
        == 1;
    Ok(applied)
}

/// The guarantee: on `core.v1.kyc.changed`, pull the state from kyc and apply it.
pub async fn on_changed(state: &AppState, env: Envelope<KycChanged>) -> anyhow::Result<()> {
    let org_id = env.data.org_id;
    let shown: Option<i64> = sqlx::query_scalar!(
        "SELECT kyc_version FROM organizations WHERE id = $1",
        org_id as OrgId,
    )
    .fetch_optional(&state.pool)
    .await?;
    match shown {
        // Already there (the push won), or not an organization of ours.
        Some(v) if v >= env.data.version => return Ok(()),
        None => return Ok(()),
        Some(_) => {}
    }
    let path = format!("/internal/v1/organizations/{org_id}/kyc-state");
    let resp = state
        .kyc
        .send(reqwest::Method::GET, &path, None, None)
        .await?;
    anyhow::ensure!(resp.status().is_success(), "kyc answered {}", resp.status());
    let current: KycState = resp.json().await?;
    apply(state, org_id, &current).await?;
    Ok(())
}

/// PUT /internal/v1/organizations/{id}/kyc-state (kyc): apply a KYC state
/// (the fast path; `applied` is false when it was not newer).
pub async fn put_state(
    state: actix_web::web::Data<AppState>,
    _peer: service_kit::assertion::Peer<service_kit::assertion::from::Kyc>,
    path: actix_web::web::Path<OrgId>,
    body: actix_web::web::Json<KycState>,
) -> service_kit::ApiResult<actix_web::HttpResponse> {
    let applied = apply(&state, path.into_inner(), &body).await?;
    Ok(actix_web::HttpResponse::Ok().json(serde_json::json!({"applied": applied})))
}
