//! The declared catalog: the distributor entities (org-billing) and the SKUs
//! (server-product) a deployment sells with, as one JSON document
//! (`catalog.file`, rendered by Helm with `toJson`):
//!
//! ```json
//! {"distributors": [{"id": "<uuid>", "name": "...", "country": "TR", "legal_name": "...",
//!                    "currency": "TRY", "covers": ["TR"], "tax_id": "", ...}],
//!  "skus": [{"id": "vps-small", "name": "...", "fulfilment": "api", "sla_hours": null,
//!            "badges": ["nvme"], "monthly_price_minor": 49000, "currency": "TRY",
//!            "position": 1, "listed": true}]}
//! ```
//!
//! Each service applies its own part and ignores the other. Unknown fields
//! are refused, so a typo fails the deploy instead of being dropped. Optional
//! fields that are absent leave an existing row's value alone (a new row gets
//! the column's default); the fields given are authoritative.
//!
//! The validation here is the one place of the rules: the catalog file, the
//! compiled-in demo catalog (the dev seed) and the staff SKU endpoints all use
//! it. Errors name the entry (`skus[2] "vps-small": ...`).

use crate::{CountryCode, Currency, MinorUnits};
use serde::{Deserialize, Deserializer};
use std::collections::{HashMap, HashSet};
use uuid::Uuid;

/// A catalog file is at most this large.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
pub const MAX_DISTRIBUTORS: usize = 500;
pub const MAX_SKUS: usize = 1000;
/// Names (of entities and SKUs), in characters.
pub const NAME_MAX: usize = 200;
/// The other text columns of a distributor, in characters.
pub const TEXT_MAX: usize = 500;
pub const NOTES_MAX: usize = 2000;
pub const MAX_BADGES: usize = 16;
pub const BADGE_MAX: usize = 32;
/// A manual SKU's SLA is at most a year.
pub const SLA_HOURS_MAX: i32 = 8760;
pub const POSITION_MAX: i32 = 1_000_000;

/// The demo catalog (two entities, four SKUs): what `seed.distributors` and
/// `seed.skus` insert for dev and tests, and an example of the format.
pub const DEMO_JSON: &str = include_str!("../demo-catalog.json");

/// Why a catalog (or one SKU) is refused; the message names the entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CatalogError(pub String);

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    #[serde(default)]
    pub distributors: Vec<Distributor>,
    #[serde(default)]
    pub skus: Vec<Sku>,
}

/// A distributor entity (`org_billing.distributors`) and the countries whose
/// organizations it serves (`distributor_coverage`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Distributor {
    pub id: Uuid,
    pub name: String,
    /// Where the entity is established (ISO 3166-1 alpha-2).
    #[serde(deserialize_with = "country")]
    pub country: CountryCode,
    pub legal_name: String,
    /// The wallet currency of the organizations it serves.
    pub currency: Currency,
    /// Countries routed to it; each country at most once in a catalog.
    #[serde(deserialize_with = "covers")]
    pub covers: Vec<CountryCode>,
    #[serde(default)]
    pub tax_id: Option<String>,
    #[serde(default)]
    pub address: Option<String>,
    #[serde(default)]
    pub bank_name: Option<String>,
    #[serde(default)]
    pub bank_iban: Option<String>,
    #[serde(default)]
    pub bank_swift: Option<String>,
    #[serde(default)]
    pub contact_phone: Option<String>,
    #[serde(default)]
    pub contact_email: Option<String>,
    #[serde(default)]
    pub notes: Option<String>,
    /// 0 to 100, two decimals kept.
    #[serde(default)]
    pub profit_pct: Option<f64>,
}

/// A SKU (`server_product.skus`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sku {
    pub id: String,
    pub name: String,
    /// `api` (the provider driver) or `manual` (staff, within `sla_hours`).
    pub fulfilment: Fulfilment,
    /// Required for `manual`, null (or absent) for `api`.
    #[serde(default, deserialize_with = "crate::integer::option")]
    pub sla_hours: Option<i32>,
    #[serde(deserialize_with = "crate::integer::exact")]
    pub monthly_price_minor: MinorUnits,
    pub currency: Currency,
    #[serde(default)]
    pub badges: Option<Vec<String>>,
    #[serde(default, deserialize_with = "crate::integer::option")]
    pub position: Option<i32>,
    /// False retires the SKU: gone from the public list, not orderable;
    /// servers on it keep working.
    #[serde(default)]
    pub listed: Option<bool>,
}

impl Catalog {
    /// Parse and validate a catalog document.
    pub fn parse(json: &[u8]) -> Result<Catalog, CatalogError> {
        if json.len() as u64 > MAX_FILE_BYTES {
            return Err(CatalogError(format!(
                "the catalog is larger than {MAX_FILE_BYTES} bytes"
            )));
        }
        // The document's shape first, then each entry on its own, so that a
        // value serde refuses (an unknown currency, a country that is not a
        // code) is named by its entry like the rules of `validate`.
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Entries {
            #[serde(default)]
            distributors: Vec<serde_json::Value>,
            #[serde(default)]
            skus: Vec<serde_json::Value>,
        }
        let raw: Entries = serde_json::from_slice(json)
            .map_err(|e| CatalogError(format!("the catalog is not valid: {e}")))?;
        let text = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_str()).map(shown);
        let distributors = raw
            .distributors
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                Distributor::deserialize(&v).map_err(|e| {
                    let id = v.get("id").and_then(|x| x.as_str()).unwrap_or("?");
                    let name = text(&v, "name").unwrap_or_default();
                    CatalogError(format!("distributors[{i}] {id} ({name}): {e}"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let skus = raw
            .skus
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                Sku::deserialize(&v).map_err(|e| {
                    let id = text(&v, "id").unwrap_or_else(|| "?".into());
                    CatalogError(format!("skus[{i}] {id}: {e}"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let c = Catalog { distributors, skus };
        c.validate()?;
        Ok(c)
    }

    /// The compiled-in demo catalog.
    pub fn demo() -> Catalog {
        // Checked by a unit test; an empty catalog if it ever failed to parse.
        Catalog::parse(DEMO_JSON.as_bytes()).unwrap_or_default()
    }

    /// Every rule, for every entry; the first failure names its entry.
    pub fn validate(&self) -> Result<(), CatalogError> {
        if self.distributors.len() > MAX_DISTRIBUTORS {
            return Err(CatalogError(format!(
                "the catalog lists more than {MAX_DISTRIBUTORS} distributors"
            )));
        }
        if self.skus.len() > MAX_SKUS {
            return Err(CatalogError(format!(
                "the catalog lists more than {MAX_SKUS} SKUs"
            )));
        }
        let mut ids = HashSet::new();
        // country -> the entry that covers it first
        let mut covered: HashMap<CountryCode, String> = HashMap::new();
        for (i, d) in self.distributors.iter().enumerate() {
            let entry = format!("distributors[{i}] {} ({})", d.id, shown(&d.name));
            let fail = |m: String| CatalogError(format!("{entry}: {m}"));
            d.validate().map_err(fail)?;
            if !ids.insert(d.id) {
                return Err(fail("the id is listed twice".into()));
            }
            for c in &d.covers {
                if let Some(other) = covered.insert(*c, entry.clone()) {
                    return Err(fail(if other == entry {
                        format!("covers lists {c} twice")
                    } else {
                        format!("{c} is already covered by {other}: a country has one distributor")
                    }));
                }
            }
        }
        let mut sku_ids = HashSet::new();
        for (i, s) in self.skus.iter().enumerate() {
            let fail = |m: String| CatalogError(format!("skus[{i}] {}: {m}", shown(&s.id)));
            s.validate().map_err(fail)?;
            if !sku_ids.insert(s.id.as_str()) {
                return Err(fail("the id is listed twice".into()));
            }
        }
        Ok(())
    }
}

/// A value quoted for an error message, cut to 64 characters.
fn shown(v: &str) -> String {
    let cut: String = v.chars().take(64).collect();
    format!("{cut:?}")
}

impl Distributor {
    /// The entry's own rules (not those across entries).
    pub fn validate(&self) -> Result<(), String> {
        check_name("name", &self.name)?;
        check_name("legal_name", &self.legal_name)?;
        if self.covers.is_empty() {
            return Err("covers must list at least one country".into());
        }
        for (field, v, max) in [
            ("tax_id", &self.tax_id, TEXT_MAX),
            ("address", &self.address, TEXT_MAX),
            ("bank_name", &self.bank_name, TEXT_MAX),
            ("bank_iban", &self.bank_iban, TEXT_MAX),
            ("bank_swift", &self.bank_swift, TEXT_MAX),
            ("contact_phone", &self.contact_phone, TEXT_MAX),
            ("contact_email", &self.contact_email, TEXT_MAX),
            ("notes", &self.notes, NOTES_MAX),
        ] {
            if let Some(v) = v {
                check_text(field, v, max)?;
            }
        }
        if let Some(p) = self.profit_pct {
            if !(0.0..=100.0).contains(&p) {
                return Err("profit_pct must be between 0 and 100".into());
            }
        }
        Ok(())
    }
}

impl Sku {
    pub fn validate(&self) -> Result<(), String> {
        check_sku_id(&self.id)?;
        check_name("name", &self.name)?;
        check_fulfilment(self.fulfilment, self.sla_hours)?;
        check_price(self.monthly_price_minor.0)?;
        if let Some(b) = &self.badges {
            check_badges(b)?;
        }
        if let Some(p) = self.position {
            check_position(p)?;
        }
        Ok(())
    }
}

/// `^[a-z0-9][a-z0-9-]{0,62}$` (the column's own check).
pub fn check_sku_id(id: &str) -> Result<(), String> {
    let b = id.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
    if ok {
        Ok(())
    } else {
        Err(
            "id must be 1 to 63 characters of a-z, 0-9 and '-', starting with a letter or digit"
                .into(),
        )
    }
}

/// 1 to [`NAME_MAX`] characters, not blank, no control characters.
pub fn check_name(field: &str, v: &str) -> Result<(), String> {
    if v.trim().is_empty() || v.chars().count() > NAME_MAX || v.chars().any(char::is_control) {
        return Err(format!(
            "{field} must be 1 to {NAME_MAX} characters without control characters"
        ));
    }
    Ok(())
}

/// At most `max` characters; line breaks are the only control characters.
pub fn check_text(field: &str, v: &str, max: usize) -> Result<(), String> {
    if v.chars().count() > max || v.chars().any(|c| c.is_control() && c != '\n') {
        return Err(format!(
            "{field} must be at most {max} characters without control characters"
        ));
    }
    Ok(())
}

pub fn check_country(field: &str, v: &str) -> Result<(), String> {
    CountryCode::parse(v)
        .map(|_| ())
        .map_err(|_| country_error(field, v))
}

/// A `country` field: an ISO 3166-1 alpha-2 code, or an error naming it.
fn country<'de, D: Deserializer<'de>>(d: D) -> Result<CountryCode, D::Error> {
    let v = String::deserialize(d)?;
    CountryCode::parse(&v).map_err(|_| serde::de::Error::custom(country_error("country", &v)))
}

/// A `covers` field: ISO 3166-1 alpha-2 codes, or an error naming the field.
fn covers<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<CountryCode>, D::Error> {
    Vec::<String>::deserialize(d)?
        .iter()
        .map(|v| {
            CountryCode::parse(v).map_err(|_| serde::de::Error::custom(country_error("covers", v)))
        })
        .collect()
}

fn country_error(field: &str, v: &str) -> String {
    format!(
        "{field}: {} is not an ISO 3166-1 alpha-2 code (two upper-case letters)",
        shown(v)
    )
}

crate::text_enum!(@enum
    /// How a SKU's servers are fulfilled (`skus.fulfilment`, copied to
    /// `servers.fulfilment` at ordering): `api`, provisioned at the provider by
    /// the worker; `manual`, set up by staff within the SKU's SLA.
    pub enum Fulfilment: "fulfilment" {
        Api = "api",
        Manual = "manual",
    }
);
crate::text::sqlx_text!(Fulfilment, "fulfilment");

/// `api` without an SLA, or `manual` with 1 to [`SLA_HOURS_MAX`] hours.
pub fn check_fulfilment(fulfilment: Fulfilment, sla_hours: Option<i32>) -> Result<(), String> {
    match (fulfilment, sla_hours) {
        (Fulfilment::Api, None) => Ok(()),
        (Fulfilment::Api, Some(_)) => {
            Err("sla_hours must be null for an API-backed (api) SKU".into())
        }
        (Fulfilment::Manual, None) => Err("a manually fulfilled SKU needs sla_hours".into()),
        (Fulfilment::Manual, Some(h)) => check_sla_hours(h),
    }
}

pub fn check_sla_hours(h: i32) -> Result<(), String> {
    if (1..=SLA_HOURS_MAX).contains(&h) {
        Ok(())
    } else {
        Err(format!("sla_hours must be between 1 and {SLA_HOURS_MAX}"))
    }
}

/// 0 to [`crate::MAX_MINOR`]: a price beyond it could not be billed
/// without overflowing a total.
pub fn check_price(minor: i64) -> Result<(), String> {
    if !(0..=crate::MAX_MINOR).contains(&minor) {
        return Err(format!(
            "monthly_price_minor must be 0 or more and at most {}",
            crate::MAX_MINOR
        ));
    }
    Ok(())
}

pub fn check_position(p: i32) -> Result<(), String> {
    if !(0..=POSITION_MAX).contains(&p) {
        return Err(format!("position must be between 0 and {POSITION_MAX}"));
    }
    Ok(())
}

/// At most [`MAX_BADGES`] distinct badges, each like a SKU id of at most
/// [`BADGE_MAX`] characters.
pub fn check_badges(badges: &[String]) -> Result<(), String> {
    if badges.len() > MAX_BADGES {
        return Err(format!("badges must list at most {MAX_BADGES}"));
    }
    let mut seen = HashSet::new();
    for b in badges {
        if b.len() > BADGE_MAX || check_sku_id(b).is_err() {
            return Err(format!(
                "badges: {} must be 1 to {BADGE_MAX} characters of a-z, 0-9 and '-'",
                shown(b)
            ));
        }
        if !seen.insert(b.as_str()) {
            return Err(format!("badges lists {} twice", shown(b)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tr() -> serde_json::Value {
        json!({"id": "01930000-0000-7000-8000-00000000000a", "name": "Hub TR", "country": "TR",
               "legal_name": "Hub A.Ş.", "currency": "TRY", "covers": ["TR"]})
    }

    fn sku() -> serde_json::Value {
        json!({"id": "vps-small", "name": "VPS", "fulfilment": "api", "sla_hours": null,
               "badges": ["nvme"], "monthly_price_minor": 49000, "currency": "TRY",
               "position": 1, "listed": true})
    }

    fn parse(v: serde_json::Value) -> Result<Catalog, CatalogError> {
        Catalog::parse(v.to_string().as_bytes())
    }

    fn refused(v: serde_json::Value) -> String {
        match parse(v) {
            Ok(c) => panic!("accepted {c:?}"),
            Err(e) => e.0,
        }
    }

    #[test]
    fn the_demo_catalog_is_valid() {
        let c = Catalog::parse(DEMO_JSON.as_bytes()).expect("demo parses");
        assert_eq!(c.distributors.len(), 2);
        assert_eq!(c.distributors[1].covers.len(), 27);
        assert_eq!(c.skus.len(), 4);
        assert_eq!(Catalog::demo(), c);
    }

    #[test]
    fn the_helm_chart_example_passes_the_services_validation() {
        // JSON is YAML: the chart's example values, less their comment lines.
        let values: String = include_str!("../../../deploy/helm/hub/ci/catalog-values.yaml")
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        let values: serde_json::Value = serde_json::from_str(&values).expect("JSON values");
        let c = Catalog::parse(values["catalog"].to_string().as_bytes()).expect("valid");
        assert_eq!(c.distributors.len(), 2);
        assert_eq!(c.distributors[1].covers.len(), 27);
        assert!(c.skus.iter().any(|s| s.fulfilment == Fulfilment::Api));
    }

    #[test]
    fn the_compose_example_catalog_passes_the_services_validation() {
        let c = Catalog::parse(include_bytes!("../../../deploy/catalog.example.json"))
            .expect("deploy/catalog.example.json is valid");
        assert_eq!(c.distributors.len(), 2);
        assert!(c
            .distributors
            .iter()
            .any(|d| d.covers.iter().any(|k| k.as_str() == "DE")));
        assert!(c.skus.iter().any(|s| s.fulfilment == Fulfilment::Api));
    }

    #[test]
    fn a_minimal_entry_of_each_kind_parses_and_absent_options_stay_absent() {
        let c = parse(json!({"distributors": [tr()],
                              "skus": [{"id": "gpu", "name": "GPU", "fulfilment": "manual",
                                        "sla_hours": 48, "monthly_price_minor": 0, "currency": "EUR"}]}))
        .expect("valid");
        assert_eq!(c.distributors[0].tax_id, None);
        assert_eq!(c.skus[0].badges, None);
        assert_eq!(c.skus[0].listed, None);
        assert_eq!(parse(json!({})).expect("empty"), Catalog::default());
    }

    #[test]
    fn unknown_fields_are_refused_at_every_level() {
        assert!(refused(json!({"distributor": []})).contains("unknown field"));
        let mut d = tr();
        d["covrs"] = json!(["TR"]);
        assert!(refused(json!({"distributors": [d]})).contains("unknown field `covrs`"));
        let mut s = sku();
        s["price"] = json!(1);
        assert!(refused(json!({"skus": [s]})).contains("unknown field `price`"));
    }

    #[test]
    fn distributor_rules_name_the_entry() {
        for (field, value, says) in [
            ("country", json!("tr"), "country"),
            ("country", json!("XX"), "country"),
            ("currency", json!("GBP"), "currency must be one of"),
            ("covers", json!([]), "covers must list at least one"),
            ("covers", json!(["TR", "Germany"]), "covers"),
            ("name", json!(" "), "name must be"),
            ("legal_name", json!("a\u{7}b"), "legal_name must be"),
            ("notes", json!("x".repeat(NOTES_MAX + 1)), "notes must be"),
            ("profit_pct", json!(101), "profit_pct"),
        ] {
            let mut d = tr();
            d[field] = value;
            let e = refused(json!({"distributors": [d]}));
            assert!(
                e.starts_with("distributors[0] 01930000-0000-7000-8000-00000000000a (\"")
                    && e.contains("): "),
                "{e}"
            );
            assert!(e.contains(says), "{field}: {e}");
        }
    }

    #[test]
    fn a_country_is_covered_by_one_distributor_of_the_file() {
        let mut de = tr();
        de["id"] = json!("01930000-0000-7000-8000-00000000000b");
        de["name"] = json!("Hub EU");
        de["covers"] = json!(["DE", "TR"]);
        let e = refused(json!({"distributors": [tr(), de]}));
        assert!(
            e.starts_with("distributors[1] 01930000-0000-7000-8000-00000000000b (\"Hub EU\")"),
            "{e}"
        );
        assert!(
            e.contains("TR is already covered by distributors[0]"),
            "{e}"
        );
        let mut twice = tr();
        twice["covers"] = json!(["TR", "TR"]);
        assert!(refused(json!({"distributors": [twice]})).contains("covers lists TR twice"));
        let e = refused(json!({"distributors": [tr(), tr()]}));
        assert!(
            e.contains("distributors[1]") && e.contains("listed twice"),
            "{e}"
        );
    }

    #[test]
    fn sku_rules_name_the_entry() {
        for (field, value, says) in [
            ("id", json!("VPS_small"), "id must be"),
            ("id", json!("-vps"), "id must be"),
            ("id", json!("a".repeat(64)), "id must be"),
            (
                "fulfilment",
                json!("robot"),
                "fulfilment must be one of api, manual (not \"robot\")",
            ),
            ("sla_hours", json!(24), "sla_hours must be null"),
            (
                "monthly_price_minor",
                json!(-1),
                "monthly_price_minor must be 0 or more",
            ),
            (
                "monthly_price_minor",
                json!(crate::MAX_MINOR + 1),
                "monthly_price_minor must be 0 or more and at most 1000000000000",
            ),
            ("currency", json!("try"), "currency must be one of"),
            ("badges", json!(["NVMe"]), "badges"),
            ("badges", json!(["a", "a"]), "badges lists \"a\" twice"),
            ("position", json!(-1), "position must be"),
            ("name", json!(""), "name must be"),
        ] {
            let mut s = sku();
            s[field] = value;
            let e = refused(json!({"skus": [sku(), s]}));
            assert!(e.starts_with("skus[1] "), "{field}: {e}");
            assert!(e.contains(says), "{field}: {e}");
        }
        let mut manual = sku();
        manual["fulfilment"] = json!("manual");
        assert!(refused(json!({"skus": [manual.clone()]})).contains("needs sla_hours"));
        manual["sla_hours"] = json!(0);
        assert!(refused(json!({"skus": [manual.clone()]})).contains("sla_hours must be between"));
        manual["sla_hours"] = json!(48);
        assert!(parse(json!({"skus": [manual]})).is_ok());
        assert!(refused(json!({"skus": [sku(), sku()]}))
            .contains("skus[1] \"vps-small\": the id is listed twice"));
    }

    #[test]
    fn sizes_are_bounded() {
        let big = vec![b' '; MAX_FILE_BYTES as usize + 1];
        assert!(Catalog::parse(&big).is_err());
        let skus: Vec<_> = (0..=MAX_SKUS)
            .map(|i| {
                let mut s = sku();
                s["id"] = json!(format!("s{i}"));
                s
            })
            .collect();
        assert!(refused(json!({"skus": skus})).contains("more than"));
        assert!(refused(json!("not an object")).contains("not valid"));
    }
}
