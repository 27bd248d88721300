//! Which service owns a path, and which endpoints are public.

use crate::settings::{RouteRule, Settings};
use std::collections::HashSet;

#[derive(Debug, Clone)]
struct Rule {
    segments: Vec<String>,
    service: String,
}

/// An ordered rule list; the first rule whose segments prefix the path wins.
#[derive(Debug, Clone)]
pub struct RouteTable {
    rules: Vec<Rule>,
}

fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|s| !s.is_empty())
}

impl RouteTable {
    pub fn new(rules: &[RouteRule]) -> RouteTable {
        RouteTable {
            rules: rules
                .iter()
                .map(|r| Rule {
                    segments: segments(&r.prefix).map(str::to_owned).collect(),
                    service: r.service.clone(),
                })
                .collect(),
        }
    }

    pub fn service_for(&self, path: &str) -> Option<&str> {
        let segs: Vec<&str> = segments(path).collect();
        self.rules
            .iter()
            .find(|r| {
                r.segments.len() <= segs.len()
                    && r.segments
                        .iter()
                        .zip(&segs)
                        .all(|(want, got)| want == "*" || want == got)
            })
            .map(|r| r.service.as_str())
    }
}

/// Routing for both hosts plus the public-endpoint list.
#[derive(Debug, Clone)]
pub struct Router {
    pub core: RouteTable,
    pub product: RouteTable,
    public: HashSet<(String, String)>,
}

/// Where a request goes.
#[derive(Debug, PartialEq, Eq)]
pub struct Target<'a> {
    pub service: &'a str,
    /// The path to forward (the product host's `/core-api` prefix removed).
    pub path: &'a str,
}

pub const CORE_API_PREFIX: &str = "/core-api";

impl Router {
    pub fn new(s: &Settings) -> anyhow::Result<Router> {
        let mut public = HashSet::new();
        for p in &s.proxy.public {
            let (m, path) = p
                .split_once(' ')
                .ok_or_else(|| anyhow::anyhow!("proxy.public entries are \"METHOD /path\": {p}"))?;
            public.insert((m.to_uppercase(), path.trim().to_owned()));
        }
        Ok(Router {
            core: RouteTable::new(&s.routes.core),
            product: RouteTable::new(&s.routes.product),
            public,
        })
    }

    pub fn route<'a>(&'a self, product_host: bool, path: &'a str) -> Option<Target<'a>> {
        if product_host {
            if let Some(rest) = path.strip_prefix(CORE_API_PREFIX) {
                if rest.starts_with('/') {
                    return self.core.service_for(rest).map(|service| Target {
                        service,
                        path: rest,
                    });
                }
                return None;
            }
            return self
                .product
                .service_for(path)
                .map(|service| Target { service, path });
        }
        self.core
            .service_for(path)
            .map(|service| Target { service, path })
    }

    pub fn is_public(&self, method: &str, path: &str) -> bool {
        self.public.contains(&(method.to_owned(), path.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Layered;

    fn router() -> Router {
        let s = Settings::from_layers(&[]).expect("defaults parse");
        Router::new(&s).expect("router")
    }

    #[test]
    fn the_core_table_follows_the_architecture_guide() {
        let r = router();
        let id = "3f2a0000-0000-0000-0000-000000000000";
        let cases = [
            ("/v1/auth/me", Some("identity")),
            ("/v1/auth/sessions/abc", Some("identity")),
            ("/v1/profile", Some("identity")),
            ("/v1/audit/me", Some("identity")),
            (
                &*format!("/v1/organizations/{id}/members"),
                Some("identity"),
            ),
            (
                &*format!("/v1/organizations/{id}/api-keys/x"),
                Some("identity"),
            ),
            (&*format!("/v1/organizations/{id}/kyc"), Some("kyc")),
            ("/v1/admin/kyc/x/approve", Some("kyc")),
            ("/v1/organizations", Some("org_billing")),
            (&*format!("/v1/organizations/{id}"), Some("org_billing")),
            (
                &*format!("/v1/organizations/{id}/wallet"),
                Some("org_billing"),
            ),
            ("/v1/agent", Some("agent")),
            ("/v1/agent/confirm", Some("agent")),
            ("/v1/memory/soul", Some("agent")),
            ("/v1/authx", None),
            ("/v1/servers", None),
            ("/", None),
        ];
        for (path, want) in cases {
            assert_eq!(r.route(false, path).map(|t| t.service), want, "{path}");
        }
    }

    #[test]
    fn the_product_host_serves_products_and_core_under_core_api() {
        let r = router();
        assert_eq!(
            r.route(true, "/core-api/v1/auth/me"),
            Some(Target {
                service: "identity",
                path: "/v1/auth/me"
            })
        );
        assert_eq!(
            r.route(true, "/v1/servers/x").map(|t| t.service),
            Some("server_product")
        );
        assert_eq!(
            r.route(true, "/v1/webhooks").map(|t| t.service),
            Some("webhook_dispatcher")
        );
        assert_eq!(r.route(true, "/v1/auth/me"), None);
        assert_eq!(r.route(true, "/core-apix/v1/auth/me"), None);
        assert_eq!(r.route(false, "/v1/skus"), None);
    }

    #[test]
    fn public_endpoints_are_exact_method_and_path() {
        let r = router();
        assert!(r.is_public("POST", "/v1/auth/request-link"));
        assert!(r.is_public("POST", "/v1/auth/verify"));
        assert!(!r.is_public("GET", "/v1/auth/verify"));
        assert!(!r.is_public("POST", "/v1/auth/verify/x"));
        assert!(!r.is_public("GET", "/v1/auth/me"));
    }
}
