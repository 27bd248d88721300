//! Amounts as people write them and as the assistant shows them. Every
//! currency here (TRY, EUR, USD) has two minor digits. Amounts to show are
//! domain values ([`MinorUnits`] in a [`Currency`]), parsed where a peer's
//! answer is read (`event_contracts::views`), never strings.

use hub_domain::{Currency, MinorUnits};

/// "1,500.00 EUR" for 150000 minor units of EUR.
pub fn format(minor: MinorUnits, currency: Currency) -> String {
    let sign = if minor.is_negative() { "-" } else { "" };
    let abs = minor.0.unsigned_abs();
    format!(
        "{sign}{}.{:02} {}",
        group(u128::from(abs / 100)),
        abs % 100,
        currency.as_str()
    )
}

/// 1500000 as "1,500,000".
pub fn group(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A positive amount in major units ("1500", "1,500", "1500.5", "1,500.00")
/// to minor units; None for anything else (negative, more than two decimals,
/// misplaced separators, too large for a wallet credit).
pub fn parse_major(s: &str) -> Option<i64> {
    let s = s.trim();
    let (whole, frac) = match s.split_once('.') {
        Some((w, f)) => (w, f),
        None => (s, ""),
    };
    if frac.len() > 2 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole = plain_digits(whole)?;
    let frac_minor: i64 = match frac.len() {
        0 => 0,
        1 => frac.parse::<i64>().ok()? * 10,
        _ => frac.parse().ok()?,
    };
    let minor = whole.checked_mul(100)?.checked_add(frac_minor)?;
    (minor > 0 && minor <= 1_000_000_000_000_000).then_some(minor)
}

/// A positive whole count ("5000", "5,000") up to 10^12 (the largest grant).
pub fn parse_count(s: &str) -> Option<i64> {
    let n = plain_digits(s.trim())?;
    (n > 0 && n <= 1_000_000_000_000).then_some(n)
}

/// Digits with optional thousands commas in the right places.
fn plain_digits(s: &str) -> Option<i64> {
    if s.is_empty() {
        return None;
    }
    let groups: Vec<&str> = s.split(',').collect();
    let ok = groups.iter().enumerate().all(|(i, g)| {
        !g.is_empty()
            && g.bytes().all(|b| b.is_ascii_digit())
            && (groups.len() == 1 || if i == 0 { g.len() <= 3 } else { g.len() == 3 })
    });
    if !ok {
        return None;
    }
    groups.concat().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_is_shown_with_groups_and_two_decimals() {
        assert_eq!(format(MinorUnits(150000), Currency::EUR), "1,500.00 EUR");
        assert_eq!(format(MinorUnits(5), Currency::TRY), "0.05 TRY");
        assert_eq!(
            format(MinorUnits(-123456789), Currency::USD),
            "-1,234,567.89 USD"
        );
        assert_eq!(
            format(MinorUnits(i64::MIN), Currency::EUR),
            "-92,233,720,368,547,758.08 EUR"
        );
        assert_eq!(group(0), "0");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(999), "999");
    }

    #[test]
    fn amounts_parse_as_written() {
        assert_eq!(parse_major("1500"), Some(150000));
        assert_eq!(parse_major("1,500.00"), Some(150000));
        assert_eq!(parse_major("1500.5"), Some(150050));
        assert_eq!(parse_major("0.01"), Some(1));
        for bad in [
            "",
            "0",
            "-5",
            "1.234",
            "1,50",
            "12,3456",
            "abc",
            "1.5.0",
            ",100",
            "99999999999999999999",
        ] {
            assert_eq!(parse_major(bad), None, "{bad}");
        }
        assert_eq!(parse_count("5,000"), Some(5000));
        assert_eq!(parse_count("5000.5"), None);
        assert_eq!(parse_count("0"), None);
    }
}
