//! Billing records: usage and staff charges become proformas and numbered
//! invoices, staff record the bank transfers that pay them (or a finance
//! member claims one and staff approve it), invoices are paid from the wallet,
//! and billing runs invoice a month of usage for every organization. The
//! state machines and the numbering rule are in proto-docs/billing.md.
//!
//! Money: every amount is in minor units of one currency, and an amount never
//! meets another currency (422). Every movement is on an invoice
//! (`paid_minor`, from payments and wallet settlements) or in the wallet's
//! ledger (the unapplied part of each payment, and each settlement's debit),
//! written in the same transaction as the record that explains it.

pub mod charges;
pub mod claims;
pub mod documents;
mod html;
pub mod model;
pub mod payments;
pub mod runs;
pub mod store;

use crate::state::AppState;
use hub_domain::{Capability, MinorUnits, OrgId};
use service_kit::{assertion::Caller, page, ApiError, ApiResult};

/// The largest single charge, payment or claim, in minor units
/// ([`hub_domain::MAX_MINOR`], 10^12): a document of `billing.max_lines` of
/// them, and any organization's totals, stay far inside int64.
pub const MAX_AMOUNT: i64 = hub_domain::MAX_MINOR;

/// Billing reads of an organization: its owner and finance members, and
/// staff. Other members get 403 naming the roles; anyone else 404.
pub fn authorize_reader(caller: &Caller, org: OrgId) -> ApiResult<()> {
    if caller.identity.staff {
        return Ok(());
    }
    caller.require(org, Capability::FinanceRead).map(|_| ())
}

/// [`authorize_reader`], then 404 when the organization does not exist
/// (staff pass the role check for any id).
pub async fn readable(state: &AppState, caller: &Caller, org: OrgId) -> ApiResult<()> {
    authorize_reader(caller, org)?;
    if !store::org_exists(&state.pool, org).await? {
        return Err(ApiError::NotFound);
    }
    Ok(())
}

/// A text field: trimmed, at most `max` characters, no control characters;
/// empty only when not `required`.
pub fn text(field: &str, value: &str, max: usize, required: bool) -> ApiResult<String> {
    let v = value.trim();
    if (required && v.is_empty())
        || v.chars().count() > max
        || v.chars().any(|c| c.is_control() && c != '\n')
    {
        let need = if required {
            "is required, "
        } else {
            "must be "
        };
        return Err(ApiError::BadRequest(format!(
            "{field} {need}at most {max} characters, without control characters"
        )));
    }
    Ok(v.to_owned())
}

/// A positive amount of at most [`MAX_AMOUNT`] minor units.
pub fn amount(field: &str, v: MinorUnits) -> ApiResult<MinorUnits> {
    if !v.is_positive() || v > MinorUnits(MAX_AMOUNT) {
        return Err(ApiError::BadRequest(format!(
            "{field} must be a positive integer of at most {MAX_AMOUNT}"
        )));
    }
    Ok(v)
}

/// A list's `limit` (default and maximum from `[billing]`) and `cursor`.
pub fn page_of(
    state: &AppState,
    limit: Option<i64>,
    cursor: Option<&str>,
) -> ApiResult<(i64, Option<page::After>)> {
    let limit = page::limit(limit, state.billing.page_default, state.billing.page_max)?;
    Ok((limit, page::after(cursor)?))
}
