//! What a KYC submission holds and the rules it must meet, by legal type.
//! Values are parsed here, at the edge, into a [`Payload`]: once one exists it
//! is valid. Messages name the field (`fields.tax_id`, `address.country`).

use hub_domain::CountryCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use service_kit::ApiError;
use std::collections::BTreeMap;

pub use hub_domain::LegalType;

/// What KYC asks of each legal type (the type itself is the domain's, parsed
/// in one place: [`LegalType::parse`]).
trait Rules: Sized {
    /// "an individual", "a corporate".
    fn with_article(self) -> &'static str;
    /// (required, optional) field keys.
    fn fields(self) -> (&'static [&'static str], &'static [&'static str]);
    fn other(self) -> Self;
}

impl Rules for LegalType {
    fn with_article(self) -> &'static str {
        match self {
            LegalType::Individual => "an individual",
            LegalType::Corporate => "a corporate",
        }
    }

    fn fields(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            LegalType::Individual => (&["full_name", "national_id"], &[]),
            LegalType::Corporate => (&["company_name", "tax_id"], &["registration_number"]),
        }
    }

    fn other(self) -> LegalType {
        match self {
            LegalType::Individual => LegalType::Corporate,
            LegalType::Corporate => LegalType::Individual,
        }
    }
}

const ADDRESS_REQUIRED: [&str; 4] = ["line1", "city", "postal_code", "country"];
const ADDRESS_OPTIONAL: [&str; 2] = ["line2", "region"];
/// Longest value of any field, in characters.
pub const MAX_VALUE: usize = 200;

/// A valid submission payload: the raw personal data, sealed at rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    pub fields: BTreeMap<String, String>,
    pub address: BTreeMap<String, String>,
}

pub use event_contracts::internal::LegalIdentity;

fn bad(msg: String) -> ApiError {
    ApiError::BadRequest(msg)
}

fn string_value(path: &str, v: &Value) -> Result<String, ApiError> {
    let s = v
        .as_str()
        .ok_or_else(|| bad(format!("{path} must be a string")))?
        .trim();
    if s.is_empty() {
        return Err(bad(format!("{path} must not be empty")));
    }
    if s.chars().count() > MAX_VALUE || s.chars().any(char::is_control) {
        return Err(bad(format!(
            "{path} must be at most {MAX_VALUE} characters, without control characters"
        )));
    }
    Ok(s.to_owned())
}

fn object<'a>(body: &'a Map<String, Value>, key: &str) -> Result<&'a Map<String, Value>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Err(bad(format!("{key} is required"))),
        Some(Value::Object(m)) => Ok(m),
        Some(_) => Err(bad(format!("{key} must be an object"))),
    }
}

impl Payload {
    /// Parse a request body `{fields, address, notice_acked}` for `legal_type`.
    pub fn parse(legal_type: LegalType, body: &Value) -> Result<Payload, ApiError> {
        let body = body
            .as_object()
            .ok_or_else(|| bad("the body must be a JSON object".into()))?;
        if let Some(k) = body
            .keys()
            .find(|k| !matches!(k.as_str(), "fields" | "address" | "notice_acked"))
        {
            return Err(bad(format!("unknown field {k}")));
        }
        match body.get("notice_acked") {
            Some(Value::Bool(true)) => {}
            None | Some(Value::Null) => return Err(bad("notice_acked is required".into())),
            Some(Value::Bool(false)) => {
                return Err(bad(
                    "notice_acked must be true: acknowledge the privacy notice".into(),
                ))
            }
            Some(_) => return Err(bad("notice_acked must be a boolean".into())),
        }

        let given = object(body, "fields")?;
        let (required, optional) = legal_type.fields();
        let (other_required, other_optional) = legal_type.other().fields();
        let mut fields = BTreeMap::new();
        for (k, v) in given {
            let path = format!("fields.{k}");
            if other_required.contains(&k.as_str()) || other_optional.contains(&k.as_str()) {
                return Err(bad(format!(
                    "{path} is not a field of {} organization",
                    legal_type.with_article()
                )));
            }
            if !required.contains(&k.as_str()) && !optional.contains(&k.as_str()) {
                return Err(bad(format!("{path} is not a KYC field")));
            }
            fields.insert(k.clone(), string_value(&path, v)?);
        }
        if let Some(missing) = required.iter().find(|k| !fields.contains_key(**k)) {
            return Err(bad(format!(
                "fields.{missing} is required for {} organization",
                legal_type.with_article()
            )));
        }

        let given = object(body, "address")?;
        let mut address = BTreeMap::new();
        for (k, v) in given {
            let path = format!("address.{k}");
            if !ADDRESS_REQUIRED.contains(&k.as_str()) && !ADDRESS_OPTIONAL.contains(&k.as_str()) {
                return Err(bad(format!("{path} is not an address field")));
            }
            let mut value = string_value(&path, v)?;
            if k == "country" {
                value = CountryCode::parse(&value.to_ascii_uppercase())
                    .map_err(|_| bad(format!("{path} must be an ISO 3166-1 alpha-2 code")))?
                    .as_str()
                    .to_owned();
            }
            address.insert(k.clone(), value);
        }
        if let Some(missing) = ADDRESS_REQUIRED.iter().find(|k| !address.contains_key(**k)) {
            return Err(bad(format!("address.{missing} is required")));
        }
        Ok(Payload { fields, address })
    }

    /// The keys a reviewer may ask to correct: `fields.<key>` and `address.<key>`.
    pub fn keys(&self) -> Vec<String> {
        self.fields
            .keys()
            .map(|k| format!("fields.{k}"))
            .chain(self.address.keys().map(|k| format!("address.{k}")))
            .collect()
    }

    pub fn legal_identity(&self, legal_type: LegalType) -> LegalIdentity {
        let f = |k: &str| self.fields.get(k).cloned().unwrap_or_default();
        let (name, tax) = match legal_type {
            LegalType::Individual => (f("full_name"), f("national_id")),
            LegalType::Corporate => (f("company_name"), f("tax_id")),
        };
        LegalIdentity {
            legal_name: name,
            tax_id: tax,
            registration_number: f("registration_number"),
            registered_address: ADDRESS_REQUIRED
                .iter()
                .chain(ADDRESS_OPTIONAL.iter())
                .map(|k| {
                    (
                        k.to_string(),
                        self.address.get(*k).cloned().unwrap_or_default(),
                    )
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn address() -> Value {
        json!({"line1": "Main St 1", "city": "Ankara", "postal_code": "06000", "country": "tr"})
    }

    fn err(t: LegalType, body: Value) -> String {
        match Payload::parse(t, &body) {
            Err(ApiError::BadRequest(m)) => m,
            other => panic!("expected a 400, got {other:?}"),
        }
    }

    #[test]
    fn each_legal_type_has_its_fields() {
        let p = Payload::parse(
            LegalType::Corporate,
            &json!({"fields": {"company_name": " Acme ", "tax_id": "123"}, "address": address(), "notice_acked": true}),
        )
        .expect("valid");
        assert_eq!(p.fields["company_name"], "Acme");
        assert_eq!(p.address["country"], "TR");
        let id = p.legal_identity(LegalType::Corporate);
        assert_eq!(
            (id.legal_name.as_str(), id.registration_number.as_str()),
            ("Acme", "")
        );
        assert_eq!(id.registered_address["line2"], "");
        assert_eq!(
            err(
                LegalType::Individual,
                json!({"fields": {"full_name": "A", "national_id": "1", "tax_id": "9"}, "address": address(), "notice_acked": true})
            ),
            "fields.tax_id is not a field of an individual organization"
        );
        assert_eq!(
            err(
                LegalType::Corporate,
                json!({"fields": {"company_name": "A"}, "address": address(), "notice_acked": true})
            ),
            "fields.tax_id is required for a corporate organization"
        );
    }

    #[test]
    fn bad_values_name_their_field() {
        let t = LegalType::Individual;
        let ok_fields = json!({"full_name": "A", "national_id": "1"});
        let cases = [
            (
                json!({"fields": {"full_name": 5, "national_id": "1"}, "address": address(), "notice_acked": true}),
                "fields.full_name must be a string",
            ),
            (
                json!({"fields": {"full_name": "  ", "national_id": "1"}, "address": address(), "notice_acked": true}),
                "fields.full_name must not be empty",
            ),
            (
                json!({"fields": {"full_name": "x".repeat(201), "national_id": "1"}, "address": address(), "notice_acked": true}),
                "fields.full_name must be at most 200 characters, without control characters",
            ),
            (
                json!({"fields": {"nick": "x", "full_name": "A", "national_id": "1"}, "address": address(), "notice_acked": true}),
                "fields.nick is not a KYC field",
            ),
            (
                json!({"fields": ok_fields, "address": {"line1": "x", "city": "y", "postal_code": "z", "country": "XX"}, "notice_acked": true}),
                "address.country must be an ISO 3166-1 alpha-2 code",
            ),
            (
                json!({"fields": ok_fields, "address": {"line1": "x", "city": "y", "country": "TR"}, "notice_acked": true}),
                "address.postal_code is required",
            ),
            (
                json!({"fields": ok_fields, "address": "Main St", "notice_acked": true}),
                "address must be an object",
            ),
            (
                json!({"fields": ok_fields, "address": address(), "notice_acked": false}),
                "notice_acked must be true: acknowledge the privacy notice",
            ),
            (
                json!({"fields": ok_fields, "address": address()}),
                "notice_acked is required",
            ),
            (
                json!({"fields": ok_fields, "address": address(), "notice_acked": "yes"}),
                "notice_acked must be a boolean",
            ),
            (
                json!({"fields": ok_fields, "address": address(), "notice_acked": true, "x": 1}),
                "unknown field x",
            ),
            (json!([1]), "the body must be a JSON object"),
        ];
        for (body, want) in cases {
            assert_eq!(err(t, body), want);
        }
    }
}
