//! The client IP: the TCP peer, or, when the peer is a trusted proxy, the
//! right-most `X-Forwarded-For` entry that is not itself a trusted proxy, over
//! every `X-Forwarded-For` line in order (a proxy may add a line of its own
//! instead of appending to the last one).

use ipnet::IpNet;
use std::net::IpAddr;

#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn parse(cidrs: &[String]) -> anyhow::Result<TrustedProxies> {
        let mut nets = Vec::with_capacity(cidrs.len());
        // An empty value (a Helm default rendering `""`) means no trusted proxy.
        for c in cidrs.iter().map(|c| c.trim()).filter(|c| !c.is_empty()) {
            let net: IpNet = match c.parse() {
                Ok(n) => n,
                Err(_) => IpNet::from(c.parse::<IpAddr>().map_err(|_| {
                    anyhow::anyhow!("proxy.trusted_proxies: {c:?} is neither a CIDR nor an IP")
                })?),
            };
            nets.push(net);
        }
        Ok(TrustedProxies(nets))
    }

    /// Whether any proxy is trusted at all.
    pub fn any(&self) -> bool {
        !self.0.is_empty()
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.0.iter().any(|n| n.contains(&ip))
    }

    /// `forwarded_for`: the `X-Forwarded-For` lines in the order received.
    /// An address, not a string: formatted only where it is used (an
    /// identity lookup, an assertion). None without a peer.
    pub fn client_addr(&self, peer: Option<IpAddr>, forwarded_for: &[&str]) -> Option<IpAddr> {
        let peer = canonical(peer?);
        if !self.trusts(peer) {
            return Some(peer);
        }
        let mut client = peer;
        for part in forwarded_for.iter().rev().flat_map(|line| line.rsplit(',')) {
            match part.trim().parse::<IpAddr>() {
                Ok(ip) => {
                    client = canonical(ip);
                    if !self.trusts(client) {
                        break;
                    }
                }
                // A garbled entry: stop at the last address we could vouch for.
                Err(_) => break,
            }
        }
        Some(client)
    }
}

/// IPv4-mapped IPv6 addresses count as their IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

#[cfg(test)]
impl TrustedProxies {
    fn ip_of(&self, peer: Option<IpAddr>, forwarded_for: &[&str]) -> String {
        self.client_addr(peer, forwarded_for)
            .map(|ip| ip.to_string())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        s.parse().ok()
    }

    #[test]
    fn untrusted_peers_are_the_client_whatever_they_claim() {
        let t = TrustedProxies::parse(&["127.0.0.0/8".into()]).expect("parse");
        assert_eq!(t.ip_of(ip("203.0.113.9"), &["1.2.3.4"]), "203.0.113.9");
    }

    #[test]
    fn trusted_peers_hand_over_the_rightmost_untrusted_hop() {
        let t = TrustedProxies::parse(&["127.0.0.0/8".into(), "10.0.0.0/8".into()]).expect("parse");
        assert_eq!(t.ip_of(ip("127.0.0.1"), &["1.2.3.4"]), "1.2.3.4");
        assert_eq!(
            t.ip_of(ip("127.0.0.1"), &["9.9.9.9, 1.2.3.4, 10.1.1.1"]),
            "1.2.3.4"
        );
        assert_eq!(t.ip_of(ip("127.0.0.1"), &[]), "127.0.0.1");
        assert_eq!(t.ip_of(ip("127.0.0.1"), &["garbage"]), "127.0.0.1");
        assert_eq!(t.ip_of(ip("::ffff:127.0.0.1"), &["1.2.3.4"]), "1.2.3.4");
    }

    #[test]
    fn every_forwarded_for_line_counts_rightmost_last() {
        let t = TrustedProxies::parse(&["127.0.0.0/8".into(), "10.0.0.0/8".into()]).expect("parse");
        // The client spoofs a first line; the proxy adds its own second line.
        assert_eq!(
            t.ip_of(ip("127.0.0.1"), &["6.6.6.6", "1.2.3.4, 10.0.0.2"]),
            "1.2.3.4"
        );
        // Only trusted hops in the last line: carry on into the line before it.
        assert_eq!(
            t.ip_of(ip("127.0.0.1"), &["1.2.3.4", "10.0.0.3"]),
            "1.2.3.4"
        );
    }

    #[test]
    fn an_empty_list_entry_means_no_trusted_proxy() {
        let t = TrustedProxies::parse(&["".into()]).expect("empty entries are skipped");
        assert!(!t.any());
        assert_eq!(t.ip_of(ip("127.0.0.1"), &["1.2.3.4"]), "127.0.0.1");
        let t = TrustedProxies::parse(&[" ".into(), "10.0.0.0/8".into()]).expect("parse");
        assert!(t.any());
    }

    #[test]
    fn nothing_is_trusted_by_default() {
        let t = TrustedProxies::parse(&[]).expect("parse");
        assert_eq!(t.ip_of(ip("127.0.0.1"), &["1.2.3.4"]), "127.0.0.1");
        assert!(TrustedProxies::parse(&["nonsense".into()]).is_err());
    }
}
