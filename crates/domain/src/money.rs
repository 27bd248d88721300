//! Money in minor units, currencies and country codes.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A currency of the API. On the wire and in Postgres its ISO 4217 code;
/// deserializing anything else fails with [`CurrencyError`]'s message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub enum Currency {
    TRY,
    EUR,
    USD,
}

impl Currency {
    pub fn as_str(self) -> &'static str {
        match self {
            Currency::TRY => "TRY",
            Currency::EUR => "EUR",
            Currency::USD => "USD",
        }
    }

    pub fn parse(s: &str) -> Option<Currency> {
        match s {
            "TRY" => Some(Currency::TRY),
            "EUR" => Some(Currency::EUR),
            "USD" => Some(Currency::USD),
            _ => None,
        }
    }

    /// The interface's rule for an organization's wallet, and so the default
    /// currency of a distributor entity established in `country` (ISO 3166-1
    /// alpha-2): TRY for Turkey, EUR otherwise.
    pub fn default_for_country(country: &str) -> Currency {
        if country == "TR" {
            Currency::TRY
        } else {
            Currency::EUR
        }
    }
}

/// Why a currency code was refused: it names the codes and the value given.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("currency must be one of TRY, EUR, USD (not {0:?})")]
pub struct CurrencyError(pub String);

impl TryFrom<String> for Currency {
    type Error = CurrencyError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Currency::parse(&s).ok_or_else(|| {
            let shown: String = s.chars().take(64).collect();
            CurrencyError(shown)
        })
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

crate::text::sqlx_text!(Currency, "currency");

/// The largest price, charge, payment or claim, in minor units (10^12: ten
/// billion of a currency's major unit). A document of `billing.max_lines`
/// such lines, and any sum of them an organization could reach, stays far
/// inside int64; anything larger is refused with 400 where it enters.
pub const MAX_MINOR: i64 = 1_000_000_000_000;

/// A signed count of minor currency units (int64), with checked arithmetic only.
/// On the wire a JSON integer, in Postgres a `bigint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(transparent))]
#[serde(transparent)]
pub struct MinorUnits(pub i64);

impl MinorUnits {
    pub const ZERO: MinorUnits = MinorUnits(0);

    pub fn checked_add(self, other: MinorUnits) -> Option<MinorUnits> {
        self.0.checked_add(other.0).map(MinorUnits)
    }
    pub fn checked_sub(self, other: MinorUnits) -> Option<MinorUnits> {
        self.0.checked_sub(other.0).map(MinorUnits)
    }
    pub fn checked_neg(self) -> Option<MinorUnits> {
        self.0.checked_neg().map(MinorUnits)
    }
    pub fn is_negative(self) -> bool {
        self.0 < 0
    }
    pub fn is_positive(self) -> bool {
        self.0 > 0
    }
}

impl From<i64> for MinorUnits {
    fn from(v: i64) -> Self {
        MinorUnits(v)
    }
}

/// The integer count, as on the wire (`12345`), not a decimal amount.
impl fmt::Display for MinorUnits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The legal form of an organization's holder, chosen at creation and fixed
/// once KYC is approved: what the KYC form asks for depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LegalType {
    Individual,
    Corporate,
}

impl LegalType {
    pub fn as_str(self) -> &'static str {
        match self {
            LegalType::Individual => "individual",
            LegalType::Corporate => "corporate",
        }
    }

    pub fn parse(s: &str) -> Option<LegalType> {
        [LegalType::Individual, LegalType::Corporate]
            .into_iter()
            .find(|t| t.as_str() == s)
    }
}

impl fmt::Display for LegalType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

crate::text::sqlx_text!(LegalType, "legal type");

/// An organization's KYC status: kyc decides it, org-billing shows it. On the
/// wire and in Postgres its lowercase name (the schemas' CHECK constraints
/// allow exactly these four).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KycStatus {
    /// Never submitted.
    Unverified,
    /// A submission is under review (or more information was requested).
    Pending,
    Verified,
    Rejected,
}

impl KycStatus {
    pub const ALL: [KycStatus; 4] = [
        KycStatus::Unverified,
        KycStatus::Pending,
        KycStatus::Verified,
        KycStatus::Rejected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            KycStatus::Unverified => "unverified",
            KycStatus::Pending => "pending",
            KycStatus::Verified => "verified",
            KycStatus::Rejected => "rejected",
        }
    }

    pub fn parse(s: &str) -> Option<KycStatus> {
        KycStatus::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl fmt::Display for KycStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

crate::text::sqlx_text!(KycStatus, "KYC status");

/// ISO 3166-1 alpha-2 code, upper case, from the officially assigned list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CountryCode([u8; 2]);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("country must be an ISO 3166-1 alpha-2 code")]
pub struct CountryError;

/// Officially assigned ISO 3166-1 alpha-2 codes, concatenated.
const ASSIGNED: &str = "ADAEAFAGAIALAMAOAQARASATAUAWAXAZBABBBDBEBFBGBHBIBJBLBMBNBOBQBRBSBTBVBWBYBZ\
CACCCDCFCGCHCICKCLCMCNCOCRCUCVCWCXCYCZDEDJDKDMDODZECEEEGEHERESETFIFJFKFMFOFRGAGBGDGEGFGGGHGIGLGM\
GNGPGQGRGSGTGUGWGYHKHMHNHRHTHUIDIEILIMINIOIQIRISITJEJMJOJPKEKGKHKIKMKNKPKRKWKYKZLALBLCLILKLRLSLT\
LULVLYMAMCMDMEMFMGMHMKMLMMMNMOMPMQMRMSMTMUMVMWMXMYMZNANCNENFNGNINLNONPNRNUNZOMPAPEPFPGPHPKPLPMPN\
PRPSPTPWPYQARERORSRURWSASBSCSDSESGSHSISJSKSLSMSNSOSRSSSTSVSXSYSZTCTDTFTGTHTJTKTLTMTNTOTRTTTVTWTZ\
UAUGUMUSUYUZVAVCVEVGVIVNVUWFWSYEYTZAZMZW";

impl CountryCode {
    pub fn parse(raw: &str) -> Result<CountryCode, CountryError> {
        let b = raw.as_bytes();
        if b.len() != 2 || !b.iter().all(|c| c.is_ascii_uppercase()) {
            return Err(CountryError);
        }
        let assigned = ASSIGNED.as_bytes().chunks_exact(2).any(|pair| pair == b);
        if !assigned {
            return Err(CountryError);
        }
        Ok(CountryCode([b[0], b[1]]))
    }

    pub fn as_str(&self) -> &str {
        // Both bytes are ASCII upper-case letters by construction.
        std::str::from_utf8(&self.0).unwrap_or("??")
    }
}

impl TryFrom<String> for CountryCode {
    type Error = CountryError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        CountryCode::parse(&s)
    }
}

impl From<CountryCode> for String {
    fn from(c: CountryCode) -> String {
        c.as_str().to_owned()
    }
}

impl fmt::Display for CountryCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn country_codes_are_checked_against_the_assigned_list() {
        for ok in ["TR", "DE", "FR", "US", "GB", "ZW", "AD"] {
            assert_eq!(
                CountryCode::parse(ok).map(|c| c.to_string()),
                Ok(ok.to_owned())
            );
        }
        for bad in ["tr", "T", "TUR", "XX", "ZZ", "", "1A", "Tr"] {
            assert!(CountryCode::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn money_arithmetic_is_checked() {
        assert_eq!(MinorUnits(i64::MAX).checked_add(MinorUnits(1)), None);
        assert_eq!(
            MinorUnits(5).checked_add(MinorUnits(-7)),
            Some(MinorUnits(-2))
        );
        assert!(MinorUnits(-1).is_negative());
        assert_eq!(MinorUnits(i64::MIN).checked_sub(MinorUnits(1)), None);
        assert_eq!(
            MinorUnits(5).checked_sub(MinorUnits(7)),
            Some(MinorUnits(-2))
        );
        assert_eq!(MinorUnits(i64::MIN).checked_neg(), None);
        assert_eq!(MinorUnits(7).checked_neg(), Some(MinorUnits(-7)));
        assert!(MinorUnits(1).is_positive());
        assert!(!MinorUnits::ZERO.is_positive() && !MinorUnits::ZERO.is_negative());
        assert_eq!(MinorUnits::from(42), MinorUnits(42));
        assert_eq!(MinorUnits(-1234).to_string(), "-1234");
        assert_eq!(serde_json::to_string(&MinorUnits(9)).ok(), Some("9".into()));
    }

    #[test]
    fn currencies_round_trip() {
        for c in [Currency::TRY, Currency::EUR, Currency::USD] {
            assert_eq!(Currency::parse(c.as_str()), Some(c));
        }
        assert_eq!(Currency::parse("try"), None);
    }

    #[test]
    fn currencies_are_their_codes_on_the_wire_and_others_are_refused_by_name() {
        for c in [Currency::TRY, Currency::EUR, Currency::USD] {
            let wire = serde_json::to_string(&c).expect("serializes");
            assert_eq!(wire, format!("\"{c}\""));
            assert_eq!(serde_json::from_str::<Currency>(&wire).ok(), Some(c));
        }
        for bad in ["GBP", "try", "", "EUR "] {
            let wire = serde_json::to_string(bad).expect("serializes");
            let e = serde_json::from_str::<Currency>(&wire)
                .expect_err(bad)
                .to_string();
            assert_eq!(
                e,
                format!("currency must be one of TRY, EUR, USD (not {bad:?})"),
                "{bad}"
            );
        }
        assert!(serde_json::from_str::<Currency>("7").is_err());
    }
}

#[cfg(test)]
mod legal_type_tests {
    use super::LegalType;

    #[test]
    fn legal_types_are_their_lowercase_names_everywhere() {
        for t in [LegalType::Individual, LegalType::Corporate] {
            assert_eq!(LegalType::parse(t.as_str()), Some(t));
            let wire = serde_json::to_string(&t).expect("serializes");
            assert_eq!(wire, format!("\"{t}\""));
            assert_eq!(serde_json::from_str::<LegalType>(&wire).ok(), Some(t));
        }
        assert_eq!(LegalType::parse("Corporate"), None);
        assert!(serde_json::from_str::<LegalType>("\"partnership\"").is_err());
    }
}

#[cfg(test)]
mod kyc_status_tests {
    use super::KycStatus;

    #[test]
    fn kyc_statuses_are_their_lowercase_names_everywhere() {
        for t in KycStatus::ALL {
            assert_eq!(KycStatus::parse(t.as_str()), Some(t));
            let wire = serde_json::to_string(&t).expect("serializes");
            assert_eq!(wire, format!("\"{t}\""));
            assert_eq!(serde_json::from_str::<KycStatus>(&wire).ok(), Some(t));
        }
        for bad in ["Verified", "approved", "", "unknown"] {
            assert_eq!(KycStatus::parse(bad), None, "{bad}");
            let wire = serde_json::to_string(bad).expect("serializes");
            assert!(serde_json::from_str::<KycStatus>(&wire).is_err(), "{bad}");
        }
    }
}
