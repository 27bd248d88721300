//! Country names the assistant understands for "create an organization named
//! X in <country>": every EU member, Turkey, and common others; any assigned
//! ISO 3166-1 alpha-2 code works too.

use hub_domain::CountryCode;

const NAMES: &[(&str, &str)] = &[
    ("austria", "AT"),
    ("belgium", "BE"),
    ("bulgaria", "BG"),
    ("croatia", "HR"),
    ("cyprus", "CY"),
    ("czechia", "CZ"),
    ("czech republic", "CZ"),
    ("denmark", "DK"),
    ("estonia", "EE"),
    ("finland", "FI"),
    ("france", "FR"),
    ("germany", "DE"),
    ("greece", "GR"),
    ("hungary", "HU"),
    ("ireland", "IE"),
    ("italy", "IT"),
    ("latvia", "LV"),
    ("lithuania", "LT"),
    ("luxembourg", "LU"),
    ("malta", "MT"),
    ("netherlands", "NL"),
    ("the netherlands", "NL"),
    ("poland", "PL"),
    ("portugal", "PT"),
    ("romania", "RO"),
    ("slovakia", "SK"),
    ("slovenia", "SI"),
    ("spain", "ES"),
    ("sweden", "SE"),
    ("turkey", "TR"),
    ("türkiye", "TR"),
    ("turkiye", "TR"),
    ("united kingdom", "GB"),
    ("the united kingdom", "GB"),
    ("uk", "GB"),
    ("great britain", "GB"),
    ("united states", "US"),
    ("the united states", "US"),
    ("usa", "US"),
    ("switzerland", "CH"),
    ("norway", "NO"),
    ("iceland", "IS"),
    ("canada", "CA"),
    ("japan", "JP"),
];

/// The code and a display name for a country name or code.
pub fn resolve(input: &str) -> Option<(CountryCode, String)> {
    let t = input.trim().trim_end_matches(['.', '?', '!']).trim();
    let lower = t.to_lowercase();
    if let Some((name, code)) = NAMES.iter().find(|(n, _)| *n == lower) {
        let code = CountryCode::try_from((*code).to_owned()).ok()?;
        return Some((code, title(name)));
    }
    if t.len() == 2 {
        let code = CountryCode::try_from(t.to_uppercase()).ok()?;
        let name = NAMES
            .iter()
            .find(|(_, c)| *c == code.to_string())
            .map_or_else(|| code.to_string(), |(n, _)| title(n));
        return Some((code, name));
    }
    None
}

fn title(name: &str) -> String {
    name.split(' ')
        .map(|w| {
            if w == "uk" || w == "usa" {
                return w.to_uppercase();
            }
            if w == "the" {
                return w.to_owned();
            }
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_resolve() {
        let (c, n) = resolve("Germany").expect("germany");
        assert_eq!((c.to_string().as_str(), n.as_str()), ("DE", "Germany"));
        let (c, n) = resolve("tr").expect("tr");
        assert_eq!((c.to_string().as_str(), n.as_str()), ("TR", "Turkey"));
        assert_eq!(
            resolve("Türkiye").map(|x| x.0.to_string()),
            Some("TR".into())
        );
        assert_eq!(resolve("BR").map(|x| x.1), Some("BR".into()));
        assert!(resolve("Atlantis").is_none());
        assert!(resolve("XX").is_none());
    }
}
