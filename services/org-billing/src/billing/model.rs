//! The billing resources as the API shows them (the spec's tables, plus the
//! currency of a charge and what a payment was applied to), and the values a
//! request names: document kinds, statuses, payment methods, periods.

use hub_domain::{
    ChargeId, ClaimId, Currency, DistributorId, InvoiceId, MinorUnits, OrgId, PaymentId, RunId,
    TextEnum,
};
use serde::Serialize;
use service_kit::{ApiError, ApiResult};
use time::OffsetDateTime;

/// Something an organization owes: `pending`, `quoted` (on a proforma),
/// `invoiced` (final) or `waived` (final).
#[derive(Debug, Clone, Serialize)]
pub struct Charge {
    pub id: ChargeId,
    pub org_id: OrgId,
    pub description: String,
    pub brand: String,
    pub qty: i32,
    pub unit_minor: MinorUnits,
    pub amount_minor: MinorUnits,
    pub currency: Currency,
    pub status: ChargeStatus,
    pub source: Source,
    /// Usage charges: the month a billing run invoices them in.
    pub period: Option<String>,
    /// The proforma or invoice holding it.
    pub invoice_id: Option<InvoiceId>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// An issued invoice or proforma; `status` is derived by Postgres.
#[derive(Debug, Clone, Serialize)]
pub struct Invoice {
    pub id: InvoiceId,
    pub org_id: OrgId,
    pub distributor_id: DistributorId,
    pub number: String,
    pub kind: Kind,
    pub status: InvoiceStatus,
    pub currency: Currency,
    pub subtotal_minor: MinorUnits,
    pub tax_minor: MinorUnits,
    pub total_minor: MinorUnits,
    pub paid_minor: MinorUnits,
    #[serde(with = "time::serde::rfc3339")]
    pub issued_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub due_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub paid_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub voided_at: Option<OffsetDateTime>,
    pub legal_document_url: Option<String>,
    /// A converted proforma: the invoice made from it.
    pub converted_to: Option<InvoiceId>,
    /// The billing run that issued it, if one did.
    pub run_id: Option<RunId>,
}

#[derive(Debug, Clone, Serialize)]
pub struct InvoiceLine {
    pub position: i32,
    pub charge_id: Option<ChargeId>,
    pub description: String,
    pub brand: String,
    pub qty: i32,
    pub unit_minor: MinorUnits,
    pub amount_minor: MinorUnits,
}

/// Money received. `applied_minor` paid the invoice; the rest
/// (`amount_minor - applied_minor`) was credited to the wallet.
#[derive(Debug, Clone, Serialize)]
pub struct Payment {
    pub id: PaymentId,
    pub org_id: OrgId,
    pub invoice_id: Option<InvoiceId>,
    pub invoice_number: Option<String>,
    pub amount_minor: MinorUnits,
    pub currency: Currency,
    pub method: Method,
    pub reference: String,
    /// `YYYY-MM-DD`.
    pub received_at: String,
    pub note: String,
    pub applied_minor: MinorUnits,
    pub wallet_transaction_id: Option<i64>,
    pub claim_id: Option<ClaimId>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

#[derive(Debug, Clone, Serialize)]
pub struct PaymentClaim {
    pub id: ClaimId,
    pub org_id: OrgId,
    /// Only in the staff queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub org_name: Option<String>,
    pub invoice_id: Option<InvoiceId>,
    pub amount_minor: MinorUnits,
    pub currency: Currency,
    pub reference: String,
    pub note: String,
    pub status: ClaimStatus,
    pub review_notes: String,
    pub payment_id: Option<PaymentId>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub reviewed_at: Option<OffsetDateTime>,
    /// Only in the staff queue, when there is one: another claim of the
    /// organization with the same reference, amount and currency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<ClaimId>,
}

/// A request field holding a [`TextEnum`]'s name: 400 naming the values
/// when it is none of them.
pub trait Param: TextEnum {
    /// The value of request field `field`, if given.
    fn param(field: &str, s: Option<&str>) -> ApiResult<Option<Self>> {
        s.map(|s| {
            Self::from_name(s).ok_or_else(|| {
                ApiError::BadRequest(format!("{field} must be one of {}", Self::names()))
            })
        })
        .transpose()
    }
}

impl<T: TextEnum> Param for T {}

hub_domain::text_enum! {
    /// A document kind.
    pub enum Kind: "document kind" { Invoice = "invoice", Proforma = "proforma" }
}
hub_domain::text_enum! {
    /// `pending`, `quoted` (on a proforma), `invoiced` (final), `waived` (final).
    pub enum ChargeStatus: "charge status" {
        Pending = "pending", Quoted = "quoted", Invoiced = "invoiced", Waived = "waived",
    }
}
hub_domain::text_enum! {
    /// Where a charge came from.
    pub enum Source: "charge source" { Usage = "usage", Staff = "staff" }
}
hub_domain::text_enum! {
    /// Derived by Postgres from paid_minor and voided_at (`draft` is never stored).
    pub enum InvoiceStatus: "invoice status" {
        Draft = "draft", Issued = "issued", PartiallyPaid = "partially_paid", Paid = "paid",
        Void = "void",
    }
}
hub_domain::text_enum! {
    /// A payment claim's review state.
    pub enum ClaimStatus: "claim status" {
        Pending = "pending", Approved = "approved", Rejected = "rejected",
    }
}
hub_domain::text_enum! {
    /// How staff learned of a payment (payments are bank transfers).
    pub enum Method: "payment method" {
        BankTransfer = "bank_transfer", Manual = "manual", Other = "other",
    }
}

impl Kind {
    /// The number's prefix: `INV-<year>-NNNNNN`, `PF-<year>-NNNNNN`.
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Invoice => "INV",
            Kind::Proforma => "PF",
        }
    }

    /// The status its charges take.
    pub fn charge_status(self) -> ChargeStatus {
        match self {
            Kind::Invoice => ChargeStatus::Invoiced,
            Kind::Proforma => ChargeStatus::Quoted,
        }
    }
}

/// A document number: sequential per distributor entity, kind and year.
pub fn number(kind: Kind, year: i32, n: i64) -> String {
    format!("{}-{year}-{n:06}", kind.prefix())
}

/// A month `YYYY-MM` (billing runs, reports), or None.
pub fn period(s: &str) -> Option<(i32, time::Month)> {
    let (y, m) = s.split_once('-')?;
    if y.len() != 4 || m.len() != 2 || !y.bytes().chain(m.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let month = time::Month::try_from(m.parse::<u8>().ok()?).ok()?;
    Some((y.parse().ok()?, month))
}

/// A date `YYYY-MM-DD`, or None.
pub fn date(s: &str) -> Option<time::Date> {
    let mut parts = s.splitn(3, '-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if !(digits(y) && digits(m) && digits(d)) {
        return None;
    }
    let month = time::Month::try_from(m.parse::<u8>().ok()?).ok()?;
    time::Date::from_calendar_date(y.parse().ok()?, month, d.parse().ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_zero_padded_per_kind_and_year() {
        assert_eq!(number(Kind::Invoice, 2026, 1), "INV-2026-000001");
        assert_eq!(number(Kind::Proforma, 2027, 123_456), "PF-2027-123456");
        assert_eq!(number(Kind::Invoice, 2026, 1_234_567), "INV-2026-1234567");
    }

    #[test]
    fn text_enums_round_trip_and_refuse_other_values() {
        for s in InvoiceStatus::ALL {
            assert_eq!(InvoiceStatus::parse(s.as_str()), Some(*s));
        }
        assert_eq!(
            Method::param("method", Some("cash"))
                .map_err(|e| e.to_string())
                .err(),
            Some("method must be one of bank_transfer, manual, other".into())
        );
        assert_eq!(ChargeStatus::param("status", None).ok(), Some(None));
        // serde, Display and the stored text are the same names.
        for s in InvoiceStatus::ALL {
            let wire = serde_json::to_string(s).expect("serializes");
            assert_eq!(wire, format!("\"{}\"", s.as_str()));
            assert_eq!(s.to_string(), s.as_str());
            assert_eq!(serde_json::from_str::<InvoiceStatus>(&wire).ok(), Some(*s));
        }
        assert_eq!(InvoiceStatus::PartiallyPaid.as_str(), "partially_paid");
        assert!(serde_json::from_str::<InvoiceStatus>("\"Paid\"").is_err());
        assert_eq!(<Method as TextEnum>::WHAT, "payment method");
    }

    #[test]
    fn periods_and_dates_are_strict() {
        assert_eq!(period("2026-11"), Some((2026, time::Month::November)));
        for bad in [
            "2026-13",
            "2026-00",
            "26-11",
            "2026-1",
            "2026/11",
            "2026-11-01",
            "",
            "２０２６-11",
        ] {
            assert_eq!(period(bad), None, "{bad}");
        }
        assert_eq!(
            date("2026-02-28"),
            time::Date::from_calendar_date(2026, time::Month::February, 28).ok()
        );
        for bad in [
            "2026-02-30",
            "2026-2-01",
            "2026-02-01T00:00",
            "x",
            "2026-02",
        ] {
            assert_eq!(date(bad), None, "{bad}");
        }
    }
}
