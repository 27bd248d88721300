//! The billing resources as the API shows them (the spec's tables, plus the
//! currency of a charge and what a payment was applied to), and the values a
//! request names: document kinds, statuses, payment methods, periods.

use hub_domain::{
    ChargeId, ClaimId, Currency, DistributorId, InvoiceId, MinorUnits, OrgId, PaymentId, RunId,
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

/// An enum stored as `text` (with a CHECK) and shown as its `as_str()`:
/// decoded strictly (hub_domain's `sqlx_text_enum!`), and parsed from a
/// request with a 400 that names the values.
macro_rules! text_enum {
    ($(#[$m:meta])* $name:ident, $what:literal { $($v:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        pub enum $name {
            $(#[serde(rename = $s)] $v),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$v),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$v => $s),+
                }
            }

            pub fn parse(s: &str) -> Option<$name> {
                Self::ALL.iter().copied().find(|v| v.as_str() == s)
            }

            /// The value of request field `field`, if given: 400 naming
            /// the values when it is none of them (not every enum is a
            /// request field).
            #[allow(dead_code)]
            pub fn param(field: &str, s: Option<&str>) -> ApiResult<Option<$name>> {
                s.map(|s| {
                    Self::parse(s).ok_or_else(|| {
                        let all: Vec<&str> = Self::ALL.iter().map(|v| v.as_str()).collect();
                        ApiError::BadRequest(format!("{field} must be one of {}", all.join(", ")))
                    })
                })
                .transpose()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        hub_domain::sqlx_text_enum!($name, $what);
    };
}

text_enum!(
    /// A document kind.
    Kind, "document kind" { Invoice = "invoice", Proforma = "proforma" }
);
text_enum!(
    /// `pending`, `quoted` (on a proforma), `invoiced` (final), `waived` (final).
    ChargeStatus, "charge status" {
        Pending = "pending", Quoted = "quoted", Invoiced = "invoiced", Waived = "waived",
    }
);
text_enum!(
    /// Where a charge came from.
    Source, "charge source" { Usage = "usage", Staff = "staff" }
);
text_enum!(
    /// Derived by Postgres from paid_minor and voided_at (`draft` is never stored).
    InvoiceStatus, "invoice status" {
        Draft = "draft", Issued = "issued", PartiallyPaid = "partially_paid", Paid = "paid",
        Void = "void",
    }
);
text_enum!(
    ClaimStatus, "claim status" { Pending = "pending", Approved = "approved", Rejected = "rejected" }
);
text_enum!(
    /// How staff learned of a payment (payments are bank transfers).
    Method, "payment method" { BankTransfer = "bank_transfer", Manual = "manual", Other = "other" }
);

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
