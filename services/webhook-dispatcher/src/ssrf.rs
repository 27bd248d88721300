//! The SSRF guard: webhook URLs are http(s), at most 2,048 bytes, and every
//! address they lead to must be public. Checked at creation (every resolved
//! address) and at every delivery on the address actually connected to: the
//! delivery client resolves through [`GuardedResolver`], which drops blocked
//! addresses, so a name that re-resolves to an internal address later (DNS
//! rebinding) cannot reach it. IP-literal hosts are checked before sending.
//! Redirects are never followed.

use crate::settings::SsrfSettings;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub const MAX_URL: usize = 2048;

fn v4_blocked(ip: Ipv4Addr, s: SsrfSettings) -> Option<&'static str> {
    let o = ip.octets();
    if ip.is_loopback() {
        return (!s.allow_loopback).then_some("loopback");
    }
    let private = ip.is_private();
    if private {
        return (!s.allow_private).then_some("private");
    }
    if ip.is_link_local() {
        return Some("link-local (cloud metadata)");
    }
    if o[0] == 100 && (o[1] & 0xc0) == 64 {
        return Some("carrier-grade NAT");
    }
    if ip.is_multicast() {
        return Some("multicast");
    }
    if ip.is_unspecified() || o[0] == 0 {
        return Some("unspecified");
    }
    if ip.is_broadcast() || o[0] >= 240 {
        return Some("reserved");
    }
    None
}

/// Why `ip` may not be a webhook target, or None.
pub fn blocked(ip: IpAddr, s: SsrfSettings) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_blocked(v4, s),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return v4_blocked(v4, s);
            }
            let seg = v6.segments();
            // NAT64 (64:ff9b::/96) carries an IPv4 address too.
            if seg[0] == 0x64 && seg[1] == 0xff9b && seg[2..6] == [0, 0, 0, 0] {
                let v4 = Ipv4Addr::new(
                    (seg[6] >> 8) as u8,
                    seg[6] as u8,
                    (seg[7] >> 8) as u8,
                    seg[7] as u8,
                );
                return v4_blocked(v4, s);
            }
            if v6.is_loopback() {
                return (!s.allow_loopback).then_some("loopback");
            }
            if v6.is_unspecified() {
                return Some("unspecified");
            }
            if (seg[0] & 0xfe00) == 0xfc00 {
                return (!s.allow_private).then_some("private (unique local)");
            }
            if (seg[0] & 0xffc0) == 0xfe80 {
                return Some("link-local");
            }
            if (seg[0] & 0xff00) == 0xff00 {
                return Some("multicast");
            }
            if v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
                return Some("cloud metadata");
            }
            None
        }
    }
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

/// Check every address `url` leads to now (creation time).
pub async fn check(url: &reqwest::Url, s: SsrfSettings) -> Result<(), String> {
    if let Some(ip) = literal_ip(url) {
        return match blocked(ip, s) {
            Some(why) => Err(format!("url points to a {why} address")),
            None => Ok(()),
        };
    }
    let host = url.host_str().unwrap_or_default().to_owned();
    let port = url.port_or_known_default().unwrap_or(443);
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|_| format!("url host {host} does not resolve"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("url host {host} does not resolve"));
    }
    for a in addrs {
        if let Some(why) = blocked(a.ip(), s) {
            return Err(format!("url host {host} resolves to a {why} address"));
        }
    }
    Ok(())
}

/// The delivery client's resolver: only addresses the guard allows are
/// offered for connecting.
pub struct GuardedResolver(pub SsrfSettings);

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let s = self.0;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = all
                .into_iter()
                .filter(|a| blocked(a.ip(), s).is_none())
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

    #[test]
    fn internal_ranges_are_blocked_in_both_families() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "224.0.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "240.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd00:ec2::254",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(blocked(ip.parse().expect("ip"), STRICT).is_some(), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "2606:2800:220:1:248:1893:25c8:1946",
            "100.128.0.1",
            "::ffff:8.8.8.8",
        ] {
            assert!(blocked(ip.parse().expect("ip"), STRICT).is_none(), "{ip}");
        }
        let dev = SsrfSettings {
            allow_loopback: true,
            allow_private: false,
        };
        assert!(blocked("127.0.0.1".parse().expect("ip"), dev).is_none());
        assert!(blocked("169.254.169.254".parse().expect("ip"), dev).is_some());
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
    }
}
