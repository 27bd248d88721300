//! The dev/test seed (`seed.distributors`): the distributors of the
//! compiled-in demo catalog ([`hub_domain::catalog::DEMO_JSON`]), a domestic
//! entity for Turkey and one EU entity (VAT OSS) covering all 27 member
//! states, applied like a declared catalog ([`crate::catalog`]) but inserting
//! only what is missing. Idempotent (fixed ids).

use crate::catalog::{self, Mode};
use sqlx::PgPool;

pub async fn distributors(pool: &PgPool) -> anyhow::Result<()> {
    let demo = hub_domain::catalog::Catalog::demo();
    anyhow::ensure!(
        !demo.distributors.is_empty(),
        "the demo catalog has no distributors"
    );
    catalog::apply(pool, &demo.distributors, Mode::Missing).await?;
    Ok(())
}

/// The demo organization of the billing examples (`seed.billing_examples`).
pub const DEMO_ORG: hub_domain::OrgId = hub_domain::OrgId::from_uuid(uuid::Uuid::from_u128(
    0x0de0_0000_0000_4000_8000_0000_0000_0b11,
));
/// Who "created" the examples (no such user signs in).
const SEED_USER: hub_domain::UserId = hub_domain::UserId::from_uuid(uuid::Uuid::from_u128(
    0x0de0_0000_0000_4000_8000_0000_0000_5eed,
));

/// Billing examples for `make run` (`seed.billing_examples`, dev only): a
/// demo organization (Turkey's entity, readable by staff) with a paid-in-part
/// invoice, a proforma, a pending charge and a pending payment claim, made
/// through the same store functions as the API (numbers from the counters).
/// Once: nothing happens when the demo organization exists.
pub async fn billing_examples(pool: &PgPool) -> anyhow::Result<()> {
    use crate::billing::{documents::documents, model::Kind, store as b};
    use hub_domain::{CountryCode, LegalType, MinorUnits};
    let (org, user) = (DEMO_ORG, SEED_USER);
    let mut tx = pool.begin().await?;
    if b::lock_org(&mut tx, org).await?.is_some() {
        return Ok(());
    }
    let country = CountryCode::parse("TR").map_err(|e| anyhow::anyhow!("{e}"))?;
    let Some((distributor, currency)) = crate::orgs::store::route(&mut tx, country).await? else {
        anyhow::bail!("billing examples: no distributor entity covers TR (seed.distributors)");
    };
    crate::orgs::store::insert(
        &mut tx,
        &crate::orgs::store::NewOrg {
            id: org,
            name: "Demo Billing Ltd",
            legal_type: LegalType::Corporate,
            country,
            distributor_id: distributor,
            currency,
            creator: user,
        },
    )
    .await?;
    let mut charges = Vec::new();
    for (description, amount) in [
        ("Server web-1 (vps-small), October", 45_000),
        ("Server db-1 (vps-large), October", 120_000),
        ("Setup fee", 25_000),
        ("Server web-2 (vps-small), November", 45_000),
    ] {
        let c = b::NewCharge {
            org_id: org,
            description,
            brand: "Servers",
            qty: 1,
            unit_minor: MinorUnits(amount),
            amount_minor: MinorUnits(amount),
            currency,
            source: crate::billing::model::Source::Staff,
            source_ref: None,
            period: None,
            created_by: Some(user),
        };
        charges.extend(b::insert_charge(&mut tx, &c).await?);
    }
    let pending = charges.pop();
    let quoted = charges.pop().into_iter().collect();
    let now = time::OffsetDateTime::now_utc();
    let to_doc = |cs, kind| documents(cs, kind, |_| Some(distributor), 500, None, Some(user));
    let invoice = to_doc(charges, Kind::Invoice).map_err(|e| anyhow::anyhow!("{e}"))?;
    let proforma = to_doc(quoted, Kind::Proforma).map_err(|e| anyhow::anyhow!("{e}"))?;
    b::issue(&mut tx, &invoice, now, 14).await?;
    b::issue(&mut tx, &proforma, now, 14).await?;
    let inv = &invoice[0];
    let paid = MinorUnits(100_000);
    b::add_paid(&mut tx, inv.id, paid).await?;
    b::insert_payment(
        &mut tx,
        &b::NewPayment {
            id: hub_domain::PaymentId::new(),
            org_id: org,
            invoice_id: Some(inv.id),
            amount_minor: paid,
            currency,
            method: crate::billing::model::Method::BankTransfer,
            reference: "EFT demo 0001",
            received_at: now.date(),
            note: "seeded example",
            applied_minor: paid,
            wallet_transaction_id: None,
            claim_id: None,
            duplicate_confirmed: false,
            created_by: user,
        },
    )
    .await?;
    b::insert_claim(
        &mut tx,
        &b::NewClaim {
            org_id: org,
            invoice_id: Some(inv.id),
            amount_minor: inv.subtotal_minor.checked_sub(paid).ok_or_else(|| {
                anyhow::anyhow!("billing examples: the invoice is below the payment")
            })?,
            currency,
            reference: "EFT demo 0002",
            note: "the rest of the October invoice",
            created_by: user,
        },
    )
    .await?;
    tx.commit().await?;
    tracing::info!(org = %DEMO_ORG, pending = pending.is_some(), "billing examples seeded");
    Ok(())
}
