//! Validation of user-supplied profile fields (bounded, no control characters).

use service_kit::ApiError;

pub const NAME_MAX: usize = 120;
pub const PHONE_MAX: usize = 32;
pub const JOB_TITLE_MAX: usize = 120;
pub const BIO_MAX: usize = 2000;

/// A single-line text field: trimmed, at most `max` characters, no control characters.
pub fn line(field: &str, value: &str, max: usize) -> Result<String, ApiError> {
    let v = value.trim();
    if v.chars().count() > max {
        return Err(ApiError::BadRequest(format!(
            "{field} is too long (at most {max} characters)"
        )));
    }
    if v.chars().any(char::is_control) {
        return Err(ApiError::BadRequest(format!(
            "{field} must not contain control characters"
        )));
    }
    Ok(v.to_owned())
}

pub fn name(value: &str) -> Result<String, ApiError> {
    line("name", value, NAME_MAX)
}

pub fn phone(value: &str) -> Result<String, ApiError> {
    let v = line("phone", value, PHONE_MAX)?;
    let ok = v
        .chars()
        .all(|c| c.is_ascii_digit() || " +-().".contains(c));
    if !ok || (!v.is_empty() && !v.chars().any(|c| c.is_ascii_digit())) {
        return Err(ApiError::bad_request(
            "phone may contain only digits, spaces and + - ( ) .",
        ));
    }
    Ok(v)
}

pub fn job_title(value: &str) -> Result<String, ApiError> {
    line("job_title", value, JOB_TITLE_MAX)
}

/// Multi-line text: newlines and tabs allowed, other control characters not.
pub fn bio(value: &str) -> Result<String, ApiError> {
    if value.chars().count() > BIO_MAX {
        return Err(ApiError::BadRequest(format!(
            "bio is too long (at most {BIO_MAX} characters)"
        )));
    }
    if value
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\r' && c != '\t')
    {
        return Err(ApiError::bad_request(
            "bio must not contain control characters",
        ));
    }
    Ok(value.to_owned())
}

/// An IANA time-zone name known to the bundled tz database.
pub fn timezone(value: &str) -> Result<String, ApiError> {
    if value.len() <= 64 && value.parse::<chrono_tz::Tz>().is_ok() {
        Ok(value.to_owned())
    } else {
        Err(ApiError::bad_request(
            "timezone must be a valid IANA time-zone name",
        ))
    }
}

pub fn locale(value: &str) -> Result<String, ApiError> {
    match value {
        "en" | "tr" => Ok(value.to_owned()),
        _ => Err(ApiError::bad_request("locale must be en or tr")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_bounded_by_characters_not_bytes() {
        assert!(name(&"ş".repeat(120)).is_ok());
        assert!(name(&"ş".repeat(121)).is_err());
        assert!(name("Ada\u{0}").is_err());
        assert_eq!(name("  Ada  ").ok().as_deref(), Some("Ada"));
    }

    #[test]
    fn timezones_must_be_iana_names() {
        assert!(timezone("Europe/Istanbul").is_ok());
        assert!(timezone("UTC").is_ok());
        assert!(timezone("America/Argentina/Buenos_Aires").is_ok());
        assert!(timezone("Mars/Olympus").is_err());
        assert!(timezone("").is_err());
        assert!(timezone("europe/istanbul").is_err());
    }

    #[test]
    fn phones_locales_and_bios() {
        assert!(phone("+90 (212) 555-01.23").is_ok());
        assert!(phone("").is_ok());
        assert!(phone("call me").is_err());
        assert!(phone("+").is_err());
        assert!(phone(&"1".repeat(33)).is_err());
        assert!(locale("tr").is_ok());
        assert!(locale("de").is_err());
        assert!(bio(&"x".repeat(2000)).is_ok());
        assert!(bio(&"x".repeat(2001)).is_err());
        assert!(bio("line one\nline two").is_ok());
        assert!(bio("nul\u{0}").is_err());
    }
}
