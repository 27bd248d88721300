//! Money and dates as a person reads them: money from integer minor units
//! (never a float), per language and currency; times in the person's time
//! zone.

use crate::i18n::Lang;

/// (symbol, digits after the decimal point) of a currency of the interface.
fn currency(code: &str) -> (&str, u32) {
    match code {
        "TRY" => ("₺", 2),
        "EUR" => ("€", 2),
        "USD" => ("$", 2),
        other => (other, 2),
    }
}

/// Groups of three digits joined by `sep`.
fn grouped(mut n: u128, sep: char) -> String {
    let mut groups = Vec::new();
    loop {
        groups.push(n % 1000);
        n /= 1000;
        if n == 0 {
            break;
        }
    }
    let mut out = groups.pop().map(|g| g.to_string()).unwrap_or_default();
    while let Some(g) = groups.pop() {
        out.push(sep);
        out.push_str(&format!("{g:03}"));
    }
    out
}

/// `€1,234.56` in English, `1.234,56 ₺` in Turkish.
pub fn money(minor: i64, code: &str, lang: Lang) -> String {
    let (symbol, digits) = currency(code);
    let scale = 10u128.pow(digits);
    let abs = u128::from(minor.unsigned_abs());
    let (whole, frac) = (abs / scale, abs % scale);
    let sign = if minor < 0 { "-" } else { "" };
    let width = digits as usize;
    match lang {
        Lang::En => format!("{sign}{symbol}{}.{frac:0width$}", grouped(whole, ',')),
        Lang::Tr => format!("{sign}{},{frac:0width$} {symbol}", grouped(whole, '.')),
    }
}

/// An RFC 3339 instant in the person's time zone (an IANA name; UTC when
/// unknown): `2026-11-29 14:05` in English, `29.11.2026 14:05` in Turkish,
/// with the zone's abbreviation. The input as it came when it does not parse.
pub fn datetime(rfc3339: &str, zone: &str, lang: Lang) -> String {
    let Ok(at) = chrono::DateTime::parse_from_rfc3339(rfc3339) else {
        return rfc3339.to_owned();
    };
    let tz: chrono_tz::Tz = zone.parse().unwrap_or(chrono_tz::UTC);
    let local = at.with_timezone(&tz);
    match lang {
        Lang::En => local.format("%Y-%m-%d %H:%M %Z").to_string(),
        Lang::Tr => local.format("%d.%m.%Y %H:%M %Z").to_string(),
    }
}

/// The current month, `YYYY-MM` (UTC).
pub fn this_month() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!("{:04}-{:02}", now.year(), u8::from(now.month()))
}

/// Minor units as a form shows them to be typed again (`1234.56`).
pub fn plain_minor(minor: i64) -> String {
    let sign = if minor < 0 { "-" } else { "" };
    let abs = minor.unsigned_abs();
    format!("{sign}{}.{:02}", abs / 100, abs % 100)
}

/// An amount as a person types it in major units (`1234`, `1234.56`,
/// `1234,56`, `0.5`) as minor units, without a float: digits, then at most
/// one decimal separator with one or two digits. None for anything else
/// (grouping, a sign, more than 13 whole digits).
pub fn parse_minor(typed: &str) -> Option<i64> {
    let typed = typed.trim();
    let (whole, frac) = match typed.find(['.', ',']) {
        Some(i) => (&typed[..i], &typed[i + 1..]),
        None => (typed, ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || whole.len() > 13 || !digits(whole) || frac.len() > 2 || !digits(frac) {
        return None;
    }
    if typed.len() > whole.len() && frac.is_empty() {
        return None;
    }
    let cents: i64 = format!("{frac:0<2}").parse().ok()?;
    whole
        .parse::<i64>()
        .ok()?
        .checked_mul(100)?
        .checked_add(cents)
}

/// A `datetime-local` field's value (`2026-11-29T14:05`) read in the
/// person's time zone, as RFC 3339 in UTC; None when it is not one (or
/// names a time the zone skips).
pub fn local_to_rfc3339(typed: &str, zone: &str) -> Option<String> {
    use chrono::TimeZone;
    let naive = chrono::NaiveDateTime::parse_from_str(typed.trim(), "%Y-%m-%dT%H:%M")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(typed.trim(), "%Y-%m-%dT%H:%M:%S"))
        .ok()?;
    let tz: chrono_tz::Tz = zone.parse().unwrap_or(chrono_tz::UTC);
    let at = tz.from_local_datetime(&naive).earliest()?;
    Some(
        at.with_timezone(&chrono::Utc)
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_per_language_and_currency_from_minor_units() {
        assert_eq!(money(123_456, "TRY", Lang::Tr), "1.234,56 ₺");
        assert_eq!(money(123_456, "EUR", Lang::En), "€1,234.56");
        assert_eq!(money(123_456, "EUR", Lang::Tr), "1.234,56 €");
        assert_eq!(money(5, "USD", Lang::En), "$0.05");
        assert_eq!(money(0, "TRY", Lang::En), "₺0.00");
        assert_eq!(money(-100_000_000, "TRY", Lang::Tr), "-1.000.000,00 ₺");
        assert_eq!(money(100_000, "EUR", Lang::En), "€1,000.00");
        assert_eq!(
            money(i64::MIN, "USD", Lang::En),
            "-$92,233,720,368,547,758.08"
        );
        assert_eq!(money(99, "XYZ", Lang::En), "XYZ0.99");
    }

    #[test]
    fn times_in_the_persons_zone() {
        let t = "2026-11-29T11:05:00Z";
        assert_eq!(
            datetime(t, "Europe/Istanbul", Lang::En),
            "2026-11-29 14:05 +03"
        );
        assert_eq!(
            datetime(t, "Europe/Istanbul", Lang::Tr),
            "29.11.2026 14:05 +03"
        );
        assert_eq!(
            datetime(t, "Europe/Berlin", Lang::En),
            "2026-11-29 12:05 CET"
        );
        assert_eq!(datetime(t, "Not/AZone", Lang::En), "2026-11-29 11:05 UTC");
        assert_eq!(datetime("yesterday", "UTC", Lang::En), "yesterday");
    }

    #[test]
    fn amounts_typed_in_major_units() {
        assert_eq!(parse_minor("1234.56"), Some(123_456));
        assert_eq!(parse_minor("1234,5"), Some(123_450));
        assert_eq!(parse_minor(" 12 "), Some(1_200));
        assert_eq!(parse_minor("0.05"), Some(5));
        for bad in [
            "",
            "1.",
            ".5",
            "1.234,56",
            "-1",
            "1e3",
            "1.234",
            "12345678901234",
            "abc",
        ] {
            assert_eq!(parse_minor(bad), None, "{bad}");
        }
    }

    #[test]
    fn local_times_in_the_persons_zone() {
        assert_eq!(
            local_to_rfc3339("2026-11-29T14:05", "Europe/Istanbul").as_deref(),
            Some("2026-11-29T11:05:00Z")
        );
        assert_eq!(
            local_to_rfc3339("2026-11-29T14:05", "UTC").as_deref(),
            Some("2026-11-29T14:05:00Z")
        );
        assert_eq!(local_to_rfc3339("tomorrow", "UTC"), None);
    }
}
