//! The SSRF guard: webhook URLs are http(s), at most 2,048 bytes, and every
//! address they lead to must be globally reachable. Checked at creation (every
//! resolved address) and at every delivery on the address actually connected
//! to: the delivery client resolves through [`GuardedResolver`], which drops
//! refused addresses, so a name that re-resolves to an internal address later
//! (DNS rebinding) cannot reach it. IP-literal hosts are checked before
//! sending ([`for_delivery`]). Redirects are never followed.
//!
//! One table ([`TABLE`]) decides: every row of the IANA IPv4 and IPv6
//! Special-Purpose Address Registries with its "Globally Reachable" verdict,
//! plus the ranges those registries do not list (multicast, deprecated
//! site-local, the deprecated IPv4-compatible and IPv4-translated forms, cloud
//! metadata, and the IPv6 space outside global unicast 2000::/3). An address is
//! judged by the most specific row that holds it; an address in no row is
//! ordinary public unicast.

use crate::settings::SsrfSettings;
use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::{
    future::Future,
    io,
    net::{IpAddr, Ipv4Addr, SocketAddr},
    pin::Pin,
    sync::{Arc, LazyLock},
};

pub const MAX_URL: usize = 2048;

/// IANA's "Globally Reachable" column for a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reachable {
    /// `True` in the registry.
    Yes,
    /// `False` in the registry.
    No,
    /// `N/A` in the registry (6to4, Teredo, the deprecated 6to4 relay anycast).
    NotApplicable,
    /// Not a row of the special-purpose registries (multicast, site-local,
    /// address-space reservations, cloud metadata): not globally reachable.
    NotListed,
}

/// What the guard does with an address whose most specific row this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Globally reachable: allowed.
    Allow,
    /// Refused always.
    Refuse,
    /// Refused unless `ssrf.allow_loopback` (the dev profile, the tests).
    Loopback,
    /// Refused unless `ssrf.allow_private`.
    Private,
    /// IPv4-mapped: the socket connects to the IPv4 address in the last 32
    /// bits, so that address is judged.
    MappedV4,
    /// NAT64: a translator connects to the IPv4 address in the last 32 bits,
    /// so that address is judged, except that its loopback is refused even
    /// with `allow_loopback` (it is the translator's loopback, not this host's).
    TranslatedV4,
}

/// One row of the guard's table.
#[derive(Debug)]
pub struct Row {
    /// The address block.
    pub net: &'static str,
    /// The registry's name for it.
    pub name: &'static str,
    /// Where it is defined.
    pub rfc: &'static str,
    pub reachable: Reachable,
    pub rule: Rule,
    /// An address whose most specific row this is (the tests use one per row).
    pub example: &'static str,
}

const fn row(
    net: &'static str,
    name: &'static str,
    rfc: &'static str,
    reachable: Reachable,
    rule: Rule,
    example: &'static str,
) -> Row {
    Row {
        net,
        name,
        rfc,
        reachable,
        rule,
        example,
    }
}

use Reachable::{No, NotApplicable as NA, NotListed, Yes};
use Rule::{Allow, Loopback, MappedV4, Private, Refuse, TranslatedV4};

/// Every special-purpose range, IPv4 then IPv6. The IANA rows are those of
/// the IPv4 and IPv6 Special-Purpose Address Registries (RFC 6890 and its
/// updates, as published in 2025); `NotListed` rows come from elsewhere (named
/// in `rfc`). The most specific row holding an address decides.
#[rustfmt::skip]
pub static TABLE: &[Row] = &[
    // IANA IPv4 Special-Purpose Address Registry.
    row("0.0.0.0/8", "\"This network\"", "RFC 791", No, Refuse, "0.1.2.3"),
    row("0.0.0.0/32", "\"This host on this network\"", "RFC 1122", No, Refuse, "0.0.0.0"),
    row("10.0.0.0/8", "Private-Use", "RFC 1918", No, Private, "10.1.2.3"),
    row("100.64.0.0/10", "Shared Address Space", "RFC 6598", No, Refuse, "100.64.1.1"),
    row("127.0.0.0/8", "Loopback", "RFC 1122", No, Loopback, "127.0.0.1"),
    row("169.254.0.0/16", "Link Local", "RFC 3927", No, Refuse, "169.254.169.254"),
    row("172.16.0.0/12", "Private-Use", "RFC 1918", No, Private, "172.16.3.4"),
    row("192.0.0.0/24", "IETF Protocol Assignments", "RFC 6890", No, Refuse, "192.0.0.192"),
    row("192.0.0.0/29", "IPv4 Service Continuity Prefix", "RFC 7335", No, Refuse, "192.0.0.1"),
    row("192.0.0.8/32", "IPv4 dummy address", "RFC 7600", No, Refuse, "192.0.0.8"),
    row("192.0.0.9/32", "Port Control Protocol Anycast", "RFC 7723", Yes, Allow, "192.0.0.9"),
    row("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", "RFC 8155", Yes, Allow, "192.0.0.10"),
    row("192.0.0.170/32", "NAT64/DNS64 Discovery", "RFC 8880", No, Refuse, "192.0.0.170"),
    row("192.0.0.171/32", "NAT64/DNS64 Discovery", "RFC 8880", No, Refuse, "192.0.0.171"),
    row("192.0.2.0/24", "Documentation (TEST-NET-1)", "RFC 5737", No, Refuse, "192.0.2.10"),
    row("192.31.196.0/24", "AS112-v4", "RFC 7535", Yes, Allow, "192.31.196.1"),
    row("192.52.193.0/24", "AMT", "RFC 7450", Yes, Allow, "192.52.193.1"),
    row("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", "RFC 7526", NA, Refuse, "192.88.99.1"),
    row("192.88.99.2/32", "6a44-relay anycast address", "RFC 6751", No, Refuse, "192.88.99.2"),
    row("192.168.0.0/16", "Private-Use", "RFC 1918", No, Private, "192.168.1.1"),
    row("192.175.48.0/24", "Direct Delegation AS112 Service", "RFC 7534", Yes, Allow, "192.175.48.1"),
    row("198.18.0.0/15", "Benchmarking", "RFC 2544", No, Refuse, "198.19.0.1"),
    row("198.51.100.0/24", "Documentation (TEST-NET-2)", "RFC 5737", No, Refuse, "198.51.100.7"),
    row("203.0.113.0/24", "Documentation (TEST-NET-3)", "RFC 5737", No, Refuse, "203.0.113.7"),
    row("240.0.0.0/4", "Reserved", "RFC 1112", No, Refuse, "240.0.0.1"),
    row("255.255.255.255/32", "Limited Broadcast", "RFC 919", No, Refuse, "255.255.255.255"),
    // Not in that registry.
    row("224.0.0.0/4", "Multicast", "RFC 5771", NotListed, Refuse, "224.0.0.1"),
    // IANA IPv6 Special-Purpose Address Registry.
    row("::1/128", "Loopback Address", "RFC 4291", No, Loopback, "::1"),
    row("::/128", "Unspecified Address", "RFC 4291", No, Refuse, "::"),
    row("::ffff:0:0/96", "IPv4-mapped Address", "RFC 4291", No, MappedV4, "::ffff:169.254.169.254"),
    row("64:ff9b::/96", "IPv4-IPv6 Translat. (NAT64)", "RFC 6052", Yes, TranslatedV4, "64:ff9b::a9fe:a9fe"),
    row("64:ff9b:1::/48", "IPv4-IPv6 Translat. (local-use NAT64)", "RFC 8215", No, Refuse, "64:ff9b:1::a00:1"),
    row("100::/64", "Discard-Only Address Block", "RFC 6666", No, Refuse, "100::1"),
    row("100:0:0:1::/64", "Dummy IPv6 Prefix", "RFC 9780", No, Refuse, "100:0:0:1::1"),
    row("2001::/23", "IETF Protocol Assignments", "RFC 2928", No, Refuse, "2001:100::1"),
    row("2001::/32", "TEREDO", "RFC 4380", NA, Refuse, "2001:0:4136:e378:8000:63bf:3fff:fdd2"),
    row("2001:1::1/128", "Port Control Protocol Anycast", "RFC 7723", Yes, Allow, "2001:1::1"),
    row("2001:1::2/128", "Traversal Using Relays around NAT Anycast", "RFC 8155", Yes, Allow, "2001:1::2"),
    row("2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", "RFC 9665", Yes, Allow, "2001:1::3"),
    row("2001:2::/48", "Benchmarking", "RFC 5180", No, Refuse, "2001:2::1"),
    row("2001:3::/32", "AMT", "RFC 7450", Yes, Allow, "2001:3::1"),
    row("2001:4:112::/48", "AS112-v6", "RFC 7535", Yes, Allow, "2001:4:112::1"),
    row("2001:10::/28", "Deprecated (previously ORCHID)", "RFC 4843", No, Refuse, "2001:10::1"),
    row("2001:20::/28", "ORCHIDv2", "RFC 7343", Yes, Allow, "2001:20::1"),
    row("2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "RFC 9374", Yes, Allow, "2001:30::1"),
    row("2001:db8::/32", "Documentation", "RFC 3849", No, Refuse, "2001:db8::1"),
    row("2002::/16", "6to4", "RFC 3056", NA, Refuse, "2002:a00:1::1"),
    row("2620:4f:8000::/48", "Direct Delegation AS112 Service", "RFC 7534", Yes, Allow, "2620:4f:8000::1"),
    row("3fff::/20", "Documentation", "RFC 9637", No, Refuse, "3fff::1"),
    row("5f00::/16", "Segment Routing (SRv6) SIDs", "RFC 9602", No, Refuse, "5f00::1"),
    row("fc00::/7", "Unique-Local", "RFC 4193", No, Private, "fd12:3456::1"),
    row("fe80::/10", "Link-Local Unicast", "RFC 4291", No, Refuse, "fe80::1"),
    // Not in that registry.
    row("::/96", "IPv4-compatible (deprecated)", "RFC 4291 2.5.5.1", NotListed, Refuse, "::7f00:1"),
    row("::ffff:0:0:0/96", "IPv4-translated", "RFC 2765", NotListed, Refuse, "::ffff:0:a00:1"),
    row("fec0::/10", "Site-Local (deprecated)", "RFC 3879", NotListed, Refuse, "fec0::1"),
    row("ff00::/8", "Multicast", "RFC 4291", NotListed, Refuse, "ff02::1"),
    row("fd00:ec2::254/128", "cloud metadata (AWS IPv6)", "AWS IMDS", NotListed, Refuse, "fd00:ec2::254"),
    // The IPv6 Address Space registry: only 2000::/3 is global unicast; the
    // rest is reserved by the IETF, unassigned, or one of the rows above.
    row("::/3", "Reserved by IETF (outside global unicast)", "RFC 4291 2.4", NotListed, Refuse, "1::1"),
    row("4000::/2", "Unassigned (outside global unicast)", "RFC 4291 2.4", NotListed, Refuse, "4000::1"),
    row("8000::/1", "Unassigned (outside global unicast)", "RFC 4291 2.4", NotListed, Refuse, "8000::1"),
];

/// The table's blocks, parsed once.
static NETS: LazyLock<Vec<(IpNet, &'static Row)>> = LazyLock::new(|| {
    TABLE
        .iter()
        .map(|r| {
            let net: IpNet = r.net.parse().expect("the SSRF table holds CIDR blocks");
            (net, r)
        })
        .collect()
});

/// Parse the table (at start-up, so a bad row stops the service rather than
/// a request).
pub fn init() {
    LazyLock::force(&NETS);
}

/// The most specific row holding `ip`, if any.
pub fn row_of(ip: IpAddr) -> Option<&'static Row> {
    NETS.iter()
        .filter(|(net, _)| net.contains(&ip))
        .max_by_key(|(net, _)| net.prefix_len())
        .map(|(_, r)| *r)
}

fn last_32_bits(ip: IpAddr) -> Option<Ipv4Addr> {
    match ip {
        IpAddr::V6(v6) => {
            let o = v6.octets();
            Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]))
        }
        IpAddr::V4(_) => None,
    }
}

/// The row that refuses `ip` under `s`, or None when it may be a target.
pub fn blocked(ip: IpAddr, s: SsrfSettings) -> Option<&'static Row> {
    let r = row_of(ip)?;
    match r.rule {
        Allow => None,
        Refuse => Some(r),
        Loopback => (!s.allow_loopback).then_some(r),
        Private => (!s.allow_private).then_some(r),
        MappedV4 => blocked(IpAddr::V4(last_32_bits(ip)?), s),
        TranslatedV4 => {
            let v4 = IpAddr::V4(last_32_bits(ip)?);
            match row_of(v4) {
                // The translator's own loopback is not this host's.
                Some(inner) if inner.rule == Loopback => Some(inner),
                _ => blocked(v4, s),
            }
        }
    }
}

/// Why `ip` is refused, for messages: `Loopback (127.0.0.0/8)`.
pub fn why(r: &Row) -> String {
    format!("{} ({})", r.name, r.net)
}

/// Check a URL's shape (scheme, length, host) and return it parsed.
pub fn parse(raw: &str) -> Result<reqwest::Url, String> {
    if raw.len() > MAX_URL {
        return Err(format!("url must be at most {MAX_URL} bytes"));
    }
    let url = reqwest::Url::parse(raw).map_err(|_| "url is not a valid URL".to_owned())?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("url must be http or https".into());
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("url must name a host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("url must not carry credentials".into());
    }
    Ok(url)
}

/// The host as an IP address when the URL names one.
pub fn literal_ip(url: &reqwest::Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// The URL a delivery is sent to, checked: its shape, and its address when
/// it names one (the HTTP client does not resolve IP literals, so
/// [`GuardedResolver`] never sees them).
pub fn for_delivery(raw: &str, s: SsrfSettings) -> Result<reqwest::Url, String> {
    let url = parse(raw)?;
    if let Some(r) = literal_ip(&url).and_then(|ip| blocked(ip, s)) {
        return Err(format!(
            "refused: the endpoint is a {} address (not globally reachable)",
            why(r)
        ));
    }
    Ok(url)
}

type LookupFuture = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>>;

/// How host names become addresses: the system resolver in service; tests
/// give names the addresses they need.
#[derive(Clone)]
pub struct Lookup(Arc<dyn Fn(String) -> LookupFuture + Send + Sync>);

impl Lookup {
    pub fn new<F>(f: F) -> Lookup
    where
        F: Fn(String) -> LookupFuture + Send + Sync + 'static,
    {
        Lookup(Arc::new(f))
    }

    /// The operating system's resolver.
    pub fn system() -> Lookup {
        Lookup::new(|host| {
            Box::pin(async move {
                Ok(tokio::net::lookup_host((host.as_str(), 0))
                    .await?
                    .map(|a| a.ip())
                    .collect())
            })
        })
    }

    pub async fn ips(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        (self.0)(host.to_owned()).await
    }
}

/// Check every address `url` leads to now (creation time), with the system
/// resolver.
pub async fn check(url: &reqwest::Url, s: SsrfSettings) -> Result<(), String> {
    check_with(url, s, &Lookup::system()).await
}

/// [`check`] with a given resolver.
pub async fn check_with(
    url: &reqwest::Url,
    s: SsrfSettings,
    lookup: &Lookup,
) -> Result<(), String> {
    if let Some(ip) = literal_ip(url) {
        return match blocked(ip, s) {
            Some(r) => Err(format!(
                "url points to a {} address (not globally reachable)",
                why(r)
            )),
            None => Ok(()),
        };
    }
    let host = url.host_str().unwrap_or_default().to_owned();
    let ips = lookup
        .ips(&host)
        .await
        .map_err(|_| format!("url host {host} does not resolve"))?;
    if ips.is_empty() {
        return Err(format!("url host {host} does not resolve"));
    }
    for ip in ips {
        if let Some(r) = blocked(ip, s) {
            return Err(format!(
                "url host {host} resolves to a {} address (not globally reachable)",
                why(r)
            ));
        }
    }
    Ok(())
}

/// The delivery client's resolver: only addresses the guard allows are
/// offered for connecting.
pub struct GuardedResolver {
    settings: SsrfSettings,
    lookup: Lookup,
}

impl GuardedResolver {
    pub fn new(settings: SsrfSettings, lookup: Lookup) -> GuardedResolver {
        GuardedResolver { settings, lookup }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let (s, lookup) = (self.settings, self.lookup.clone());
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let allowed: Vec<SocketAddr> = lookup
                .ips(&host)
                .await?
                .into_iter()
                .filter(|ip| blocked(*ip, s).is_none())
                .map(|ip| SocketAddr::new(ip, 0))
                .collect();
            if allowed.is_empty() {
                let e: Box<dyn std::error::Error + Send + Sync> =
                    format!("{host} resolves only to blocked addresses").into();
                return Err(e);
            }
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: SsrfSettings = SsrfSettings {
        allow_loopback: false,
        allow_private: false,
    };
    const LOOPBACK: SsrfSettings = SsrfSettings {
        allow_loopback: true,
        allow_private: false,
    };
    const PRIVATE: SsrfSettings = SsrfSettings {
        allow_loopback: false,
        allow_private: true,
    };

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|_| panic!("{s} is an address"))
    }

    /// Whether the row's example is refused under strict settings, by IANA's
    /// verdict alone: not globally reachable (False, N/A, not listed) is
    /// refused; globally reachable is allowed (the embedded-IPv4 rows'
    /// examples carry 169.254.169.254, so they are refused too).
    fn iana_refuses(r: &Row) -> bool {
        r.reachable != Yes || matches!(r.rule, MappedV4 | TranslatedV4)
    }

    #[test]
    fn every_row_is_a_normalized_block_and_its_example_is_its_own() {
        for r in TABLE {
            let net: IpNet = r.net.parse().unwrap_or_else(|_| panic!("{}", r.net));
            assert_eq!(net, net.trunc(), "{} is not normalized", r.net);
            let e = ip(r.example);
            assert!(net.contains(&e), "{} outside {}", r.example, r.net);
            assert!(
                std::ptr::eq(row_of(e).expect("a row"), r),
                "{}: its most specific row is {}",
                r.example,
                row_of(e).map_or("none", |x| x.net)
            );
        }
        assert_eq!(
            TABLE
                .iter()
                .map(|r| r.net)
                .collect::<std::collections::HashSet<_>>()
                .len(),
            TABLE.len(),
            "one row per block"
        );
    }

    #[test]
    fn only_globally_reachable_rows_are_allowed() {
        for r in TABLE {
            if r.rule == Allow {
                assert_eq!(r.reachable, Yes, "{}", r.net);
            }
            if r.reachable != Yes {
                assert_ne!(r.rule, Allow, "{} is not globally reachable", r.net);
            }
        }
    }

    #[test]
    fn each_rows_example_is_refused_unless_globally_reachable() {
        for r in TABLE {
            let got = blocked(ip(r.example), STRICT);
            assert_eq!(
                got.is_some(),
                iana_refuses(r),
                "{} ({}): {got:?}",
                r.example,
                r.net
            );
        }
    }

    #[test]
    fn the_reviews_addresses_are_refused() {
        for a in [
            "::127.0.0.1",
            "::7f00:1",
            "::169.254.169.254",
            "::ffff:0:10.0.0.1",
            "::ffff:0:127.0.0.1",
            "2002:a00:1::1",
            "2002:7f00:1::1",
            "2002:808:808::1",
            "fec0::1",
            "64:ff9b:1::a9fe:a9fe",
            "64:ff9b:1::808:808",
            "192.0.0.1",
            "192.0.0.192",
            "198.18.0.1",
            "198.19.255.254",
            "100.64.0.1",
            "100.127.255.254",
            "2001::1",
            "2001:db8::1",
            "3fff::1",
            "5f00::1",
            "100::1",
            "fd00:ec2::254",
            "64:ff9b::7f00:1",
            "64:ff9b::a00:1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
        ] {
            assert!(blocked(ip(a), STRICT).is_some(), "{a}");
        }
    }

    #[test]
    fn what_the_standard_library_calls_local_is_refused() {
        // An oracle independent of the table.
        let mut probes: Vec<IpAddr> = TABLE.iter().map(|r| ip(r.example)).collect();
        probes.extend(
            [
                "0.0.0.0",
                "10.255.255.255",
                "127.255.255.254",
                "169.254.0.1",
                "172.31.255.255",
                "192.168.255.255",
                "224.0.0.251",
                "239.255.255.250",
                "255.255.255.255",
                "192.0.2.255",
                "198.51.100.1",
                "203.0.113.255",
                "::",
                "::1",
                "fe80::abcd",
                "febf::1",
                "fc00::1",
                "fdff:ffff::1",
                "ff05::2",
                "ff0e::1",
                "2001:db8:ffff::1",
            ]
            .map(ip),
        );
        for a in probes {
            let local = match a {
                IpAddr::V4(v) => {
                    v.is_loopback()
                        || v.is_private()
                        || v.is_link_local()
                        || v.is_multicast()
                        || v.is_unspecified()
                        || v.is_broadcast()
                        || v.is_documentation()
                }
                IpAddr::V6(v) => {
                    v.is_loopback()
                        || v.is_unspecified()
                        || v.is_multicast()
                        || v.is_unique_local()
                        || v.is_unicast_link_local()
                }
            };
            if local {
                assert!(blocked(a, STRICT).is_some(), "{a}");
            }
        }
    }

    #[test]
    fn globally_reachable_addresses_are_allowed() {
        for a in [
            "93.184.216.34",
            "8.8.8.8",
            "1.1.1.1",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "198.17.255.255",
            "198.20.0.1",
            "223.255.255.254",
            "2606:2800:220:1:248:1893:25c8:1946",
            "2001:4860:4860::8888",
            "2001:200::1",
            "2c0f:fb50:4003::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "::ffff:192.0.0.9",
        ] {
            assert_eq!(blocked(ip(a), STRICT).map(|r| r.net), None, "{a}");
        }
    }

    #[test]
    fn allowing_loopback_allows_loopback_and_nothing_else() {
        for r in TABLE {
            let got = blocked(ip(r.example), LOOPBACK);
            let want = r.rule != Loopback && iana_refuses(r);
            assert_eq!(got.is_some(), want, "{} ({})", r.example, r.net);
        }
        for a in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] {
            assert!(blocked(ip(a), LOOPBACK).is_none(), "{a}");
            assert!(blocked(ip(a), STRICT).is_some(), "{a}");
        }
        // Loopback in any other spelling is not this host's loopback.
        for a in [
            "::7f00:1",
            "64:ff9b::7f00:1",
            "::ffff:0:7f00:1",
            "2002:7f00:1::1",
            "0.0.0.0",
            "::",
        ] {
            assert!(blocked(ip(a), LOOPBACK).is_some(), "{a}");
        }
    }

    #[test]
    fn allowing_private_allows_private_use_and_nothing_else() {
        for r in TABLE {
            let got = blocked(ip(r.example), PRIVATE);
            let want = r.rule != Private && iana_refuses(r);
            assert_eq!(got.is_some(), want, "{} ({})", r.example, r.net);
        }
        assert!(blocked(ip("::ffff:10.0.0.1"), PRIVATE).is_none());
        // Cloud metadata stays refused inside the unique-local block.
        assert!(blocked(ip("fd00:ec2::254"), PRIVATE).is_some());
    }

    /// A resolver answering `rowN.test` with the N-th row's example.
    fn row_names() -> Lookup {
        Lookup::new(|host| {
            Box::pin(async move {
                let n: usize = host
                    .strip_prefix("row")
                    .and_then(|h| h.strip_suffix(".test"))
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such name"))?;
                let r = TABLE.get(n).ok_or_else(|| io::Error::other("no row"))?;
                Ok(vec![ip(r.example), ip("93.184.216.34")])
            })
        })
    }

    #[tokio::test]
    async fn at_creation_each_row_is_judged_by_literal_and_by_name() {
        let lookup = row_names();
        for (n, r) in TABLE.iter().enumerate() {
            let literal = match ip(r.example) {
                IpAddr::V4(v) => format!("http://{v}/hook"),
                IpAddr::V6(v) => format!("http://[{v}]/hook"),
            };
            let named = format!("https://row{n}.test/hook");
            for url in [literal, named] {
                let got = check_with(&parse(&url).expect("url"), STRICT, &lookup).await;
                assert_eq!(got.is_err(), iana_refuses(r), "{url} ({}): {got:?}", r.net);
                if let Err(e) = got {
                    assert!(e.contains(r.net) || e.contains("169.254.0.0/16"), "{e}");
                }
            }
        }
        assert!(check_with(
            &parse("http://nowhere.test/").expect("url"),
            STRICT,
            &lookup
        )
        .await
        .is_err());
    }

    #[tokio::test]
    async fn at_connection_each_row_is_judged_on_the_address_connected_to() {
        let lookup = Lookup::new(|host| {
            Box::pin(async move {
                let n: usize = host.parse().map_err(|_| io::Error::other("not a row"))?;
                let r = TABLE.get(n).ok_or_else(|| io::Error::other("no row"))?;
                Ok(vec![ip(r.example)])
            })
        });
        let resolver = GuardedResolver::new(STRICT, lookup);
        for (n, r) in TABLE.iter().enumerate() {
            // A name resolving to the row's example only.
            let name: Name = n.to_string().parse().expect("name");
            let offered = resolver.resolve(name).await;
            match offered {
                Ok(addrs) => {
                    assert!(!iana_refuses(r), "{} ({}) was offered", r.example, r.net);
                    assert_eq!(
                        addrs.map(|a| a.ip()).collect::<Vec<_>>(),
                        vec![ip(r.example)]
                    );
                }
                Err(e) => assert!(iana_refuses(r), "{} ({}): {e}", r.example, r.net),
            }
            // The same address as the URL's host.
            let literal = match ip(r.example) {
                IpAddr::V4(v) => format!("http://{v}:8080/hook"),
                IpAddr::V6(v) => format!("http://[{v}]:8080/hook"),
            };
            let got = for_delivery(&literal, STRICT);
            assert_eq!(got.is_err(), iana_refuses(r), "{literal}: {got:?}");
        }
    }

    #[tokio::test]
    async fn the_resolver_offers_only_the_allowed_addresses_of_a_name() {
        let lookup = Lookup::new(|_| {
            Box::pin(async {
                Ok(vec![
                    "10.0.0.1".parse().expect("ip"),
                    "93.184.216.34".parse().expect("ip"),
                    "::1".parse().expect("ip"),
                    "2606:2800:220:1::1".parse().expect("ip"),
                ])
            })
        });
        let addrs: Vec<IpAddr> = GuardedResolver::new(STRICT, lookup)
            .resolve("mixed.test".parse().expect("name"))
            .await
            .expect("some allowed")
            .map(|a| a.ip())
            .collect();
        assert_eq!(addrs, vec![ip("93.184.216.34"), ip("2606:2800:220:1::1")]);
    }

    #[test]
    fn urls_are_http_bounded_and_without_credentials() {
        assert!(parse("https://example.com/hook").is_ok());
        for bad in [
            "ftp://example.com/",
            "file:///etc/passwd",
            "https://user:pw@example.com/",
            "not a url",
            &format!("https://example.com/{}", "a".repeat(2048)),
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        // Other spellings of an IPv4 address are normalized before the check.
        for odd in [
            "http://2130706433/",
            "http://0x7f.1/",
            "http://127.1/",
            "http://[::ffff:7f00:1]/",
        ] {
            assert!(for_delivery(odd, STRICT).is_err(), "{odd}");
        }
    }
}
