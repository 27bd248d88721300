//! JSON integers as JSON Schema reads them: a number with no fractional part,
//! however it is spelled (`5`, `5.0`, `5e0`). serde's integer types refuse
//! `5.0`; request fields the spec declares `type: integer` deserialize with
//! these instead (`#[serde(deserialize_with = "hub_domain::integer::exact")]`,
//! `option` for an `Option`).

use serde::de::{self, Deserializer, Unexpected, Visitor};
use std::{fmt, marker::PhantomData};

struct Exact<T>(PhantomData<T>);

impl<T: TryFrom<i64>> Visitor<'_> for Exact<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        let i = i64::try_from(v).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))?;
        self.visit_i64(i)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        // Integral and within i64 (2^63 is the first f64 past it).
        if v.fract() == 0.0
            && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&v)
        {
            return self.visit_i64(v as i64);
        }
        Err(E::invalid_type(Unexpected::Float(v), &self))
    }
}

/// An integer field.
pub fn exact<'de, D: Deserializer<'de>, T: TryFrom<i64>>(d: D) -> Result<T, D::Error> {
    d.deserialize_any(Exact(PhantomData))
}

struct Maybe<T>(PhantomData<T>);

impl<'de, T: TryFrom<i64>> Visitor<'de> for Maybe<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        exact(d).map(Some)
    }
}

/// An optional integer field (null or absent: `None`; give it `#[serde(default)]`).
pub fn option<'de, D: Deserializer<'de>, T: TryFrom<i64>>(d: D) -> Result<Option<T>, D::Error> {
    d.deserialize_option(Maybe(PhantomData))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize, Debug, PartialEq)]
    struct Body {
        #[serde(deserialize_with = "super::exact")]
        n: i32,
        #[serde(default, deserialize_with = "super::option")]
        m: Option<i64>,
    }

    fn parse(s: &str) -> Result<Body, String> {
        serde_json::from_str(s).map_err(|e| e.to_string())
    }

    #[test]
    fn integral_numbers_are_integers_whatever_their_spelling() {
        assert_eq!(parse(r#"{"n": 5, "m": 7}"#), Ok(Body { n: 5, m: Some(7) }));
        assert_eq!(
            parse(r#"{"n": 5.0, "m": 7e0}"#),
            Ok(Body { n: 5, m: Some(7) })
        );
        assert_eq!(
            parse(r#"{"n": -3, "m": null}"#),
            Ok(Body { n: -3, m: None })
        );
        assert_eq!(parse(r#"{"n": 1}"#), Ok(Body { n: 1, m: None }));
        assert!(parse(r#"{"n": 5.5}"#).is_err());
        assert!(parse(r#"{"n": 3000000000}"#).is_err(), "beyond i32");
        assert!(parse(r#"{"n": "5"}"#).is_err());
        assert!(parse(r#"{"n": 1e300}"#).is_err());
    }
}
