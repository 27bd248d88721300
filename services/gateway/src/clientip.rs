//! The client IP: the TCP peer, or, when the peer is a trusted proxy, the
//! right-most `X-Forwarded-For` entry that is not itself a trusted proxy.

use ipnet::IpNet;
use std::net::IpAddr;

#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn parse(cidrs: &[String]) -> anyhow::Result<TrustedProxies> {
        let mut nets = Vec::with_capacity(cidrs.len());
        for c in cidrs {
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

    fn trusts(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.0.iter().any(|n| n.contains(&ip))
    }

    pub fn client_ip(&self, peer: Option<IpAddr>, forwarded_for: Option<&str>) -> String {
        let Some(peer) = peer.map(canonical) else {
            return String::new();
        };
        if !self.trusts(peer) {
            return peer.to_string();
        }
        let Some(xff) = forwarded_for else {
            return peer.to_string();
        };
        let mut client = peer;
        for part in xff.rsplit(',') {
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
        client.to_string()
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
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        s.parse().ok()
    }

    #[test]
    fn untrusted_peers_are_the_client_whatever_they_claim() {
        let t = TrustedProxies::parse(&["127.0.0.0/8".into()]).expect("parse");
        assert_eq!(
            t.client_ip(ip("203.0.113.9"), Some("1.2.3.4")),
            "203.0.113.9"
        );
    }

    #[test]
    fn trusted_peers_hand_over_the_rightmost_untrusted_hop() {
        let t = TrustedProxies::parse(&["127.0.0.0/8".into(), "10.0.0.0/8".into()]).expect("parse");
        assert_eq!(t.client_ip(ip("127.0.0.1"), Some("1.2.3.4")), "1.2.3.4");
        assert_eq!(
            t.client_ip(ip("127.0.0.1"), Some("9.9.9.9, 1.2.3.4, 10.1.1.1")),
            "1.2.3.4"
        );
        assert_eq!(t.client_ip(ip("127.0.0.1"), None), "127.0.0.1");
        assert_eq!(t.client_ip(ip("127.0.0.1"), Some("garbage")), "127.0.0.1");
        assert_eq!(
            t.client_ip(ip("::ffff:127.0.0.1"), Some("1.2.3.4")),
            "1.2.3.4"
        );
    }

    #[test]
    fn nothing_is_trusted_by_default() {
        let t = TrustedProxies::parse(&[]).expect("parse");
        assert_eq!(t.client_ip(ip("127.0.0.1"), Some("1.2.3.4")), "127.0.0.1");
        assert!(TrustedProxies::parse(&["nonsense".into()]).is_err());
    }
}
