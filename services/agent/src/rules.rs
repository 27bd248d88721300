//! The rule-based matcher: a fixed list of plain phrasings, each an anchored,
//! case-insensitive pattern naming one [`Op`]. It answers when no model
//! provider is configured or reachable. Anything else gets [`HELP`].

use crate::ops::Op;
use regex::Regex;
use std::sync::LazyLock;

/// The reply to a message no rule matches: what the matcher understands.
pub const HELP: &str = "I did not understand that. I understand:\n\
- what is my wallet balance for org <id or name>\n\
- how many AI tokens does <organization> have\n\
- show my organizations\n\
- what is the KYC status of <organization>\n\
- list my sessions\n\
- show my profile\n\
- set my job title to <text>\n\
- set my bio to <text>\n\
- create an organization named <name> in <country name or code>\n\
- credit <amount> <currency> to <organization>\n\
- grant <n> tokens to <organization>\n\
- revoke session <id>\n\
- search the knowledge base for <words>\n\
Staff also: show the KYC queue, find organization <name or id>, show the fulfilment queue.";

type Build = fn(&regex::Captures<'_>) -> Op;

fn cap(c: &regex::Captures<'_>, name: &str) -> String {
    c.name(name).map_or("", |m| m.as_str()).trim().to_owned()
}

fn opt(c: &regex::Captures<'_>, name: &str) -> Option<String> {
    c.name(name)
        .map(|m| m.as_str().trim().to_owned())
        .filter(|s| !s.is_empty())
}

static RULES: LazyLock<Vec<(Regex, Build)>> = LazyLock::new(|| {
    let org = r"(?:org(?:ani[sz]ation)?\s+)?(?P<org>.+?)";
    let rules: Vec<(String, Build)> = vec![
        (
            format!(r"^(?:what(?:'s| is)\s+)?(?:my\s+|the\s+)?wallet\s+balance(?:\s+(?:for|of|in)\s+{org})?$"),
            |c| Op::WalletBalance { org: opt(c, "org") },
        ),
        (
            format!(r"^how\s+many\s+(?:ai\s+)?tokens\s+(?:does|do)\s+{org}\s+have$"),
            |c| Op::TokenBalance { org: opt(c, "org") },
        ),
        (
            format!(r"^(?:what(?:'s| is)\s+)?(?:my\s+|the\s+)?(?:ai\s+)?token\s+balance(?:\s+(?:for|of|in)\s+{org})?$"),
            |c| Op::TokenBalance { org: opt(c, "org") },
        ),
        (
            r"^(?:show|list)\s+(?:me\s+)?(?:all\s+)?my\s+organi[sz]ations$|^which\s+organi[sz]ations\s+(?:am\s+i\s+in|do\s+i\s+belong\s+to)$".into(),
            |_| Op::ListOrgs,
        ),
        (
            format!(r"^what(?:'s| is)\s+the\s+kyc\s+status\s+(?:of|for)\s+{org}$"),
            |c| Op::KycStatus { org: opt(c, "org") },
        ),
        (
            r"^(?:what(?:'s| is)\s+)?(?:my|our|the)\s+kyc\s+status$".into(),
            |_| Op::KycStatus { org: None },
        ),
        (
            r"^(?:list|show)\s+(?:me\s+)?my\s+(?:active\s+)?sessions$".into(),
            |_| Op::ListSessions,
        ),
        (
            r"^(?:show\s+(?:me\s+)?my\s+profile|who\s+am\s+i)$".into(),
            |_| Op::Profile,
        ),
        (
            r"^(?:set|change|update)\s+my\s+job\s+title\s+to\s+(?P<text>.+)$".into(),
            |c| Op::SetJobTitle { text: cap(c, "text") },
        ),
        (
            r"^(?:set|change|update)\s+my\s+bio\s+to\s+(?P<text>.+)$".into(),
            |c| Op::SetBio { text: cap(c, "text") },
        ),
        (
            r"^create\s+(?:an?\s+)?(?:new\s+)?organi[sz]ation\s+(?:named|called)\s+(?P<name>.+?)\s+in\s+(?P<country>.+?)(?:\s+as\s+(?:an?\s+)?(?P<legal>individual|corporate|company))?$".into(),
            |c| Op::CreateOrg {
                name: cap(c, "name"),
                country: cap(c, "country"),
                legal_type: opt(c, "legal").map(|l| l.to_lowercase()),
            },
        ),
        (
            format!(r"^credit\s+(?P<amount>\d[\d.,]*)\s*(?P<currency>[a-z]{{3}})\s+to\s+{org}$"),
            |c| Op::CreditWallet {
                org: cap(c, "org"),
                amount: cap(c, "amount"),
                currency: cap(c, "currency"),
            },
        ),
        (
            format!(r"^grant\s+(?P<amount>\d[\d.,]*)\s+(?:ai\s+)?tokens?\s+to\s+{org}$"),
            |c| Op::GrantTokens {
                org: cap(c, "org"),
                amount: cap(c, "amount"),
            },
        ),
        (
            r"^revoke\s+(?:my\s+)?session\s+(?P<id>\S+)$".into(),
            |c| Op::RevokeSession {
                session_id: cap(c, "id"),
            },
        ),
        (
            r"^(?:show|list)\s+(?:me\s+)?(?:the\s+)?(?:pending\s+)?kyc\s+(?:queue|submissions)$".into(),
            |_| Op::KycQueue,
        ),
        (
            r"^(?:find|look\s*up|lookup)\s+(?:the\s+)?organi[sz]ation\s+(?P<q>.+)$".into(),
            |c| Op::FindOrg { query: cap(c, "q") },
        ),
        (
            r"^(?:show|list)\s+(?:me\s+)?(?:the\s+)?(?:manual\s+)?fulfil?ment\s+queue$".into(),
            |_| Op::FulfilmentQueue,
        ),
        (
            r"^(?:search|look\s+in)\s+(?:the\s+)?(?:knowledge\s*base|kb|help(?:\s+articles)?)\s+(?:for|about)\s+(?P<q>.+)$".into(),
            |c| Op::SearchKb { query: cap(c, "q") },
        ),
    ];
    rules
        .into_iter()
        .map(|(p, b)| {
            #[allow(clippy::expect_used)]
            let re = Regex::new(&format!("(?is){p}")).expect("a valid rule pattern");
            (re, b)
        })
        .collect()
});

/// The operation a message asks for, if a rule matches it.
pub fn parse(message: &str) -> Option<Op> {
    let m = message
        .trim()
        .trim_end_matches(['?', '.', '!'])
        .trim()
        .trim_start_matches("please ")
        .trim_start_matches("Please ");
    RULES
        .iter()
        .find_map(|(re, build)| re.captures(m).map(|c| build(&c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn org(s: &str) -> Option<String> {
        Some(s.to_owned())
    }

    #[test]
    fn every_documented_phrasing_matches() {
        let id = "0b9c8f1e-2a4b-4c5d-8e9f-0a1b2c3d4e5f";
        let cases: Vec<(String, Op)> = vec![
            (
                format!("What is my wallet balance for org {id}?"),
                Op::WalletBalance { org: org(id) },
            ),
            (
                "what is my wallet balance".into(),
                Op::WalletBalance { org: None },
            ),
            (
                "How many AI tokens does Acme GmbH have?".into(),
                Op::TokenBalance {
                    org: org("Acme GmbH"),
                },
            ),
            ("show my organizations".into(), Op::ListOrgs),
            ("List my organisations".into(), Op::ListOrgs),
            (
                "What is the KYC status of Acme?".into(),
                Op::KycStatus { org: org("Acme") },
            ),
            ("list my sessions".into(), Op::ListSessions),
            ("Show my profile".into(), Op::Profile),
            (
                "set my job title to Head of Platform".into(),
                Op::SetJobTitle {
                    text: "Head of Platform".into(),
                },
            ),
            (
                "Set my bio to I build things.\nAnd run them.".into(),
                Op::SetBio {
                    text: "I build things.\nAnd run them".into(),
                },
            ),
            (
                "create an organization named Acme GmbH in Germany".into(),
                Op::CreateOrg {
                    name: "Acme GmbH".into(),
                    country: "Germany".into(),
                    legal_type: None,
                },
            ),
            (
                "Create an organization named Ali Veli in TR as an individual".into(),
                Op::CreateOrg {
                    name: "Ali Veli".into(),
                    country: "TR".into(),
                    legal_type: Some("individual".into()),
                },
            ),
            (
                "credit 1,500.00 EUR to Acme GmbH".into(),
                Op::CreditWallet {
                    org: "Acme GmbH".into(),
                    amount: "1,500.00".into(),
                    currency: "EUR".into(),
                },
            ),
            (
                "grant 5000 tokens to Acme".into(),
                Op::GrantTokens {
                    org: "Acme".into(),
                    amount: "5000".into(),
                },
            ),
            (
                format!("revoke session {id}"),
                Op::RevokeSession {
                    session_id: id.into(),
                },
            ),
            ("show the KYC queue".into(), Op::KycQueue),
            (
                "find organization Acme".into(),
                Op::FindOrg {
                    query: "Acme".into(),
                },
            ),
            ("show the fulfilment queue".into(), Op::FulfilmentQueue),
            (
                "Search the knowledge base for paying by transfer?".into(),
                Op::SearchKb {
                    query: "paying by transfer".into(),
                },
            ),
            (
                "search help for fatura".into(),
                Op::SearchKb {
                    query: "fatura".into(),
                },
            ),
        ];
        for (msg, want) in cases {
            assert_eq!(parse(&msg), Some(want), "{msg:?}");
        }
    }

    #[test]
    fn anything_else_matches_nothing() {
        for msg in [
            "hello",
            "",
            "wallet",
            "credit to Acme",
            "delete everything",
            "grant tokens",
        ] {
            assert_eq!(parse(msg), None, "{msg:?}");
        }
        assert!(HELP.contains("credit <amount> <currency> to <organization>"));
    }
}
