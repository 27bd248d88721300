//! A validated, normalized email address.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Lower-cased, trimmed, syntactically valid, at most 254 characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Email(String);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EmailError {
    #[error("email is required")]
    Empty,
    #[error("email is too long (at most 254 characters)")]
    TooLong,
    #[error("email is not a valid address")]
    Invalid,
}

impl Email {
    pub const MAX_LEN: usize = 254;

    pub fn parse(raw: &str) -> Result<Email, EmailError> {
        let s = raw.trim();
        if s.is_empty() {
            return Err(EmailError::Empty);
        }
        if s.chars().count() > Self::MAX_LEN {
            return Err(EmailError::TooLong);
        }
        let lower = s.to_lowercase();
        // The RFC allows quoted local parts and IP literals; people do not sign in
        // with them, and accepting them widens what later code must handle.
        let (local, domain) = lower.rsplit_once('@').ok_or(EmailError::Invalid)?;
        let simple_local = !local.is_empty()
            && local.len() <= 64
            && local
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~.".contains(c))
            && !local.starts_with('.')
            && !local.ends_with('.')
            && !local.contains("..");
        let simple_domain = domain.contains('.')
            && domain.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            });
        // `.invalid` (RFC 2606) never receives mail; deleted accounts keep a
        // pseudonym there, which no one may sign in or be added as.
        let reserved = domain == "invalid" || domain.ends_with(".invalid");
        if !simple_local
            || !simple_domain
            || reserved
            || !email_address::EmailAddress::is_valid(&lower)
        {
            return Err(EmailError::Invalid);
        }
        Ok(Email(lower))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Email {
    type Error = EmailError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Email::parse(&s)
    }
}

impl From<Email> for String {
    fn from(e: Email) -> String {
        e.0
    }
}

impl AsRef<str> for Email {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_and_normalizes_ordinary_addresses() {
        let e = Email::parse("  Ada.Lovelace+hub@Example.COM ").expect("valid");
        assert_eq!(e.as_str(), "ada.lovelace+hub@example.com");
    }

    #[test]
    fn rejects_what_is_not_an_address() {
        for bad in [
            "",
            "   ",
            "plain",
            "@example.com",
            "a@",
            "a@b",
            "a@@b.com",
            "a b@c.com",
            "a@-b.com",
            ".a@b.com",
            "a..b@c.com",
            "\"q\"@b.com",
            "a@[127.0.0.1]",
            "deleted-1@deleted.invalid",
            "a@invalid",
        ] {
            assert!(Email::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn rejects_overlong_addresses() {
        let long = format!("{}@example.com", "a".repeat(250));
        assert_eq!(Email::parse(&long), Err(EmailError::TooLong));
    }

    proptest! {
        #[test]
        fn parsing_is_idempotent(local in "[a-z0-9]{1,20}", domain in "[a-z]{1,10}\\.[a-z]{2,5}") {
            let first = Email::parse(&format!("{local}@{domain}")).expect("valid");
            let again = Email::parse(first.as_str()).expect("still valid");
            prop_assert_eq!(first, again);
        }

        #[test]
        fn never_panics_on_arbitrary_input(s in "\\PC{0,300}") {
            let _ = Email::parse(&s);
        }
    }
}
