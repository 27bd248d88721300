//! Which service owns a path, and which endpoints are public.

use crate::settings::{RouteRule, Settings};
use actix_web::http::Method;
use service_kit::path::PathError;
use std::collections::HashMap;

/// The methods a route forwards, and the `Allow` header that names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Methods {
    list: Vec<Method>,
    allow: String,
}

impl Methods {
    /// From names of the closed set ([`service_kit::metrics::METHOD_LABELS`]);
    /// anything else is a settings error (`what` names the key).
    pub fn parse(names: &[String], what: &str) -> anyhow::Result<Methods> {
        let mut list: Vec<Method> = Vec::with_capacity(names.len());
        for n in names.iter().map(|n| n.trim().to_uppercase()) {
            if !service_kit::metrics::METHOD_LABELS.contains(&n.as_str()) {
                anyhow::bail!(
                    "{what}: {n:?} is not one of {:?}",
                    service_kit::metrics::METHOD_LABELS
                );
            }
            let m = Method::from_bytes(n.as_bytes())?;
            if !list.contains(&m) {
                list.push(m);
            }
        }
        anyhow::ensure!(!list.is_empty(), "{what}: no method");
        let allow = list
            .iter()
            .map(Method::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        Ok(Methods { list, allow })
    }

    pub fn serves(&self, m: &Method) -> bool {
        self.list.contains(m)
    }

    /// `GET, POST, ...`: the `Allow` header of a 405.
    pub fn allow(&self) -> &str {
        &self.allow
    }
}

#[derive(Debug, Clone)]
struct Rule {
    segments: Vec<String>,
    service: String,
    methods: Methods,
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
    /// `methods`: what a rule without its own `methods` forwards.
    pub fn new(rules: &[RouteRule], methods: &Methods) -> anyhow::Result<RouteTable> {
        let rules = rules
            .iter()
            .map(|r| -> anyhow::Result<Rule> {
                Ok(Rule {
                    segments: segments(&r.prefix).map(str::to_owned).collect(),
                    service: r.service.clone(),
                    methods: match &r.methods {
                        Some(own) => Methods::parse(own, &format!("routes {} methods", r.prefix))?,
                        None => methods.clone(),
                    },
                })
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(RouteTable { rules })
    }

    fn rule_for(&self, path: &str) -> Option<&Rule> {
        let segs: Vec<&str> = segments(path).collect();
        self.rules.iter().find(|r| {
            r.segments.len() <= segs.len()
                && r.segments
                    .iter()
                    .zip(&segs)
                    .all(|(want, got)| want == "*" || want == got)
        })
    }

    #[cfg(test)]
    pub fn service_for(&self, path: &str) -> Option<&str> {
        self.rule_for(path).map(|r| r.service.as_str())
    }

    fn target<'a>(&'a self, path: &'a str) -> Option<Target<'a>> {
        self.rule_for(path).map(|r| Target {
            service: &r.service,
            path,
            methods: &r.methods,
        })
    }
}

/// Routing for both hosts plus the public-endpoint list.
#[derive(Debug, Clone)]
pub struct Router {
    pub core: RouteTable,
    pub product: RouteTable,
    /// Public endpoints with exact paths.
    /// path -> the methods public on it (looked up without a copy of either).
    public: HashMap<String, Vec<String>>,
    /// Public endpoints whose paths have `{name}` segments (each matches any
    /// one non-empty segment): method and the path's segments, None for a
    /// `{name}` one.
    public_patterns: Vec<(String, Vec<Option<String>>)>,
}

/// A public path's segments (split on every `/`), None for a `{name}` one;
/// None for an exact path.
fn pattern(path: &str) -> Option<Vec<Option<String>>> {
    let segs: Vec<Option<String>> = path
        .split('/')
        .map(|s| {
            if s.len() > 2 && s.starts_with('{') && s.ends_with('}') {
                None
            } else {
                Some(s.to_owned())
            }
        })
        .collect();
    segs.iter().any(Option::is_none).then_some(segs)
}

/// Where a request goes.
#[derive(Debug, PartialEq, Eq)]
pub struct Target<'a> {
    pub service: &'a str,
    /// The path to forward (the product host's `/core-api` prefix removed).
    pub path: &'a str,
    /// The methods forwarded there (any other: 405 with their `Allow`).
    pub methods: &'a Methods,
}

pub const CORE_API_PREFIX: &str = "/core-api";

impl Router {
    pub fn new(s: &Settings) -> anyhow::Result<Router> {
        let methods = Methods::parse(&s.proxy.methods, "proxy.methods")?;
        let router = Router {
            core: RouteTable::new(&s.routes.core, &methods)?,
            product: RouteTable::new(&s.routes.product, &methods)?,
            public: HashMap::new(),
            public_patterns: Vec::new(),
        };
        let mut public: HashMap<String, Vec<String>> = HashMap::new();
        let mut public_patterns = Vec::new();
        for p in &s.proxy.public {
            let (m, path) = p
                .split_once(' ')
                .ok_or_else(|| anyhow::anyhow!("proxy.public entries are \"METHOD /path\": {p}"))?;
            let (m, path) = (m.to_uppercase(), path.trim().to_owned());
            // A public endpoint whose method its route does not forward
            // would never be reached: a settings mistake.
            let forwarded = [false, true].iter().any(|&product| {
                router.route(product, &path).is_some_and(|t| {
                    Method::from_bytes(m.as_bytes()).is_ok_and(|m| t.methods.serves(&m))
                })
            });
            anyhow::ensure!(
                forwarded,
                "proxy.public {p:?}: no route forwards {m} on that path"
            );
            match pattern(&path) {
                Some(segs) => public_patterns.push((m, segs)),
                None => {
                    public.entry(path).or_default().push(m);
                }
            }
        }
        Ok(Router {
            public,
            public_patterns,
            ..router
        })
    }

    pub fn route<'a>(&'a self, product_host: bool, path: &'a str) -> Option<Target<'a>> {
        if product_host {
            if let Some(rest) = path.strip_prefix(CORE_API_PREFIX) {
                if rest.starts_with('/') {
                    return self.core.target(rest);
                }
                return None;
            }
            return self.product.target(path);
        }
        self.core.target(path)
    }

    pub fn is_public(&self, method: &str, path: &str) -> bool {
        if self
            .public
            .get(path)
            .is_some_and(|methods| methods.iter().any(|m| m == method))
        {
            return true;
        }
        let segments = path.split('/').count();
        self.public_patterns.iter().any(|(m, segs)| {
            m == method
                && segments == segs.len()
                && path.split('/').zip(segs).all(|(got, want)| match want {
                    Some(exact) => got == exact,
                    None => !got.is_empty(),
                })
        })
    }
}

/// Why a request target cannot be forwarded as it is.
#[derive(Debug, PartialEq, Eq)]
pub enum TargetError {
    /// The path is not canonical ([`service_kit::path`]).
    Path(PathError),
    /// The URL parser would send another path than the one routed.
    Rewritten,
}

impl TargetError {
    pub fn message(&self) -> &'static str {
        match self {
            TargetError::Path(e) => e.message(),
            TargetError::Rewritten => "malformed request target",
        }
    }
}

/// The URL to forward `path` (already routed) and `query` to on `base`. The
/// path it carries is exactly `path`, or the request is refused: the route
/// choice, the public-route check, the assertion and the request the service
/// receives all read the same bytes.
pub fn forward_url(base: &str, path: &str, query: &str) -> Result<reqwest::Url, TargetError> {
    service_kit::path::check(path).map_err(TargetError::Path)?;
    let url = match query {
        "" => format!("{base}{path}"),
        q => format!("{base}{path}?{q}"),
    };
    let url = reqwest::Url::parse(&url).map_err(|_| TargetError::Rewritten)?;
    if url.path() != path {
        return Err(TargetError::Rewritten);
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Layered;
    use proptest::prelude::*;

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
            (
                &*format!("/v1/admin/organizations/{id}/invoices"),
                Some("org_billing"),
            ),
            ("/v1/admin/invoices/x/void", Some("org_billing")),
            ("/v1/admin/charges/x/waive", Some("org_billing")),
            ("/v1/admin/payment-claims", Some("org_billing")),
            ("/v1/admin/billing-runs/x", Some("org_billing")),
            ("/v1/organizations", Some("org_billing")),
            (&*format!("/v1/organizations/{id}"), Some("org_billing")),
            (
                &*format!("/v1/organizations/{id}/wallet"),
                Some("org_billing"),
            ),
            (
                &*format!("/v1/organizations/{id}/invites"),
                Some("identity"),
            ),
            (
                &*format!("/v1/organizations/{id}/invites/{id}"),
                Some("identity"),
            ),
            ("/v1/invites/accept", Some("identity")),
            ("/v1/auth/mfa/verify", Some("identity")),
            ("/v1/agent", Some("agent")),
            ("/v1/agent/confirm", Some("agent")),
            ("/v1/memory/soul", Some("agent")),
            ("/v1/kb/articles/x", Some("agent")),
            ("/v1/admin/kb/articles", Some("agent")),
            ("/v1/proposals", Some("agent")),
            ("/v1/admin/proposals/x", Some("agent")),
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
        let t = r.route(true, "/core-api/v1/auth/me").expect("routed");
        assert_eq!((t.service, t.path), ("identity", "/v1/auth/me"));
        assert_eq!(
            r.route(true, "/v1/servers/x").map(|t| t.service),
            Some("server_product")
        );
        assert_eq!(
            r.route(true, "/v1/webhooks").map(|t| t.service),
            Some("webhook_dispatcher")
        );
        let t = r
            .route(true, "/core-api/v1/invites/accept")
            .expect("routed");
        assert_eq!((t.service, t.path), ("identity", "/v1/invites/accept"));
        assert_eq!(r.route(true, "/v1/auth/me"), None);
        assert_eq!(r.route(true, "/core-apix/v1/auth/me"), None);
        assert_eq!(r.route(false, "/v1/skus"), None);
        for staff in ["/v1/admin/skus", "/v1/admin/skus/vps-small"] {
            assert_eq!(
                r.route(true, staff).map(|t| t.service),
                Some("server_product"),
                "{staff}"
            );
            assert_eq!(r.route(false, staff), None, "{staff}");
        }
    }

    #[test]
    fn routes_forward_the_closed_set_of_methods_and_name_them_in_allow() {
        let r = router();
        let t = r.route(false, "/v1/auth/request-link").expect("routed");
        assert_eq!(
            t.methods.allow(),
            "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
        );
        assert!(t.methods.serves(&Method::POST));
        assert!(t.methods.serves(&Method::OPTIONS));
        for m in ["TRACE", "CONNECT", "PROPFIND", &"X".repeat(3000)] {
            let m = Method::from_bytes(m.as_bytes()).expect("a token");
            assert!(!t.methods.serves(&m), "{m}");
        }
        // A rule of its own narrows it; a method outside the closed set or a
        // public endpoint no route forwards stops the start.
        let own = Settings::from_layers(&[
            "[[routes.core]]\nprefix = \"/v1/auth\"\nservice = \"identity\"\nmethods = [\"post\", \"GET\"]\n\
             [[routes.core]]\nprefix = \"/v1/kb\"\nservice = \"agent\"\n\
             [[routes.core]]\nprefix = \"/.well-known\"\nservice = \"identity\"\n\
             [[routes.core]]\nprefix = \"/oauth\"\nservice = \"identity\"\n",
        ]);
        let own = Router::new(&own.expect("settings")).expect("router");
        let t = own.route(false, "/v1/auth/verify").expect("routed");
        assert_eq!(t.methods.allow(), "POST, GET");
        for bad in [
            "[proxy]\nmethods = [\"GET\", \"TRACE\"]\n",
            "[proxy]\nmethods = []\n",
            "[proxy]\nmethods = [\"GET\"]\n",
        ] {
            let s = Settings::from_layers(&[bad]).expect("settings");
            assert!(Router::new(&s).is_err(), "{bad}");
        }
    }

    /// Percent-decode every escape, as actix does before it routes.
    fn decoded(p: &str) -> String {
        let b = p.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            let hex = |j: usize| {
                b.get(j)
                    .and_then(|c| char::from(*c).to_digit(16))
                    .map(|d| d as u8)
            };
            if b[i] == b'%' {
                if let (Some(h), Some(l)) = (hex(i + 1), hex(i + 2)) {
                    out.push(h << 4 | l);
                    i += 3;
                    continue;
                }
            }
            out.push(b[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// A path as segments a client might chain: route names, an id,
    /// traversal spellings and encodings, joined by `/` or an odd separator.
    fn client_path() -> impl Strategy<Value = String> {
        let segment = prop::sample::select(vec![
            "v1",
            "organizations",
            "auth",
            "me",
            "core-api",
            "servers",
            "webhooks",
            "agent",
            "kyc",
            "wallet",
            "internal",
            "%69nternal",
            "lookup",
            "profile",
            "3f2a0000-0000-0000-0000-000000000000",
            ".",
            "..",
            "%2e%2e",
            "%2E%2E",
            ".%2e",
            "%2e",
            "..%2f",
            "..%2F",
            "..\\",
            "..%5c",
            "",
            "%20",
            "%",
            "%4",
            "%7e",
            "%00",
            "%C3%A7",
            "%25",
            "a;b",
            "x?y=1",
            "x#f",
        ]);
        let sep = prop::sample::select(vec!["/", "/", "/", "/", "/", "//", "\\", "%2f"]);
        // Mostly from a routed prefix, so that traversals start somewhere real.
        let prefix = prop::sample::select(vec![
            "",
            "/v1/organizations/3f2a0000-0000-0000-0000-000000000000",
            "/v1/organizations",
            "/v1/agent",
            "/v1/profile",
            "/v1/auth/me",
            "/core-api/v1/organizations",
            "/core-api",
            "/v1/servers",
            "/v1/webhooks",
        ]);
        (prefix, prop::collection::vec((sep, segment), 0..7)).prop_map(|(prefix, parts)| {
            let mut p = prefix.to_owned();
            for (sep, seg) in parts {
                p.push_str(sep);
                p.push_str(seg);
            }
            if p.starts_with('/') {
                p
            } else {
                format!("/{p}")
            }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]
        /// Whatever path a client sends, the owner the gateway chooses and the
        /// path it forwards never disagree: a path it accepts is forwarded byte
        /// for byte, names the same owner when the service decodes it, and is
        /// never an internal route.
        #[test]
        fn the_owner_and_the_forwarded_path_never_disagree(
            path in client_path(),
            product in any::<bool>(),
        ) {
            let r = router();
            // The request line's path ends at `?` or `#`.
            let path = path.split(['?', '#']).next().unwrap_or("/").to_owned();
            let canonical = service_kit::path::check(&path).is_ok();
            if let (true, Some(target)) = (canonical, r.route(product, &path)) {
                let url = forward_url("http://upstream:8080", target.path, "x=1");
                let url = url.expect("a canonical path is forwarded");
                prop_assert_eq!(url.path(), target.path);
                let seen = decoded(url.path());
                // The service reads the same owner's route, never an internal one.
                prop_assert!(!seen.starts_with("/internal"), "{} -> {}", path, seen);
                prop_assert_eq!(
                    r.core.service_for(&seen).or_else(|| r.product.service_for(&seen)),
                    r.core.service_for(target.path).or_else(|| r.product.service_for(target.path)),
                    "{} -> {}", path, seen
                );
                prop_assert_eq!(
                    seen.split('/').count(),
                    target.path.split('/').count(),
                    "{} -> {}", path, seen
                );
            }
            // And what it refuses is refused before anything routes it.
            if !canonical {
                prop_assert!(forward_url("http://upstream:8080", &path, "").is_err());
            }
        }
    }

    #[test]
    fn forward_url_refuses_what_a_parser_would_rewrite() {
        let base = "http://upstream:8080";
        for p in [
            "/v1/organizations/../../internal/v1/x",
            "/v1/organizations/%2e%2e/internal",
            "/v1/a\\b",
            "/v1//x",
        ] {
            assert!(forward_url(base, p, "").is_err(), "{p}");
        }
        let ok = forward_url(base, "/v1/organizations", "q=a b").expect("forwarded");
        assert_eq!(ok.path(), "/v1/organizations");
    }

    #[test]
    fn public_endpoints_are_exact_method_and_path() {
        let r = router();
        assert!(r.is_public("POST", "/v1/auth/request-link"));
        assert!(r.is_public("POST", "/v1/auth/verify"));
        assert!(!r.is_public("GET", "/v1/auth/verify"));
        assert!(!r.is_public("POST", "/v1/auth/verify/x"));
        assert!(r.is_public("POST", "/v1/auth/mfa/verify"));
        assert!(!r.is_public("POST", "/v1/auth/mfa/enroll"));
        assert!(!r.is_public("GET", "/v1/auth/me"));
    }

    #[test]
    fn a_public_name_segment_matches_any_one_segment_and_nothing_else() {
        let r = router();
        assert!(r.is_public("GET", "/v1/kb/articles"));
        assert!(r.is_public("GET", "/v1/kb/articles/paying-by-transfer"));
        assert!(r.is_public("GET", "/v1/kb/categories"));
        for (m, p) in [
            ("POST", "/v1/kb/articles"),
            ("PATCH", "/v1/kb/articles/x"),
            ("GET", "/v1/kb/articles/"),
            ("GET", "/v1/kb/articles/x/y"),
            ("GET", "/v1/kb/articles/x/"),
            ("GET", "/v1/kb/categories/x"),
            ("GET", "/v1/admin/kb/articles"),
            ("GET", "/v1/admin/kb/articles/x"),
            ("GET", "/v1/kb/x/articles"),
        ] {
            assert!(!r.is_public(m, p), "{m} {p}");
        }
        // `{` alone, or `{}`, is an exact segment.
        assert_eq!(pattern("/v1/a/{}"), None);
        assert_eq!(pattern("/v1/a/{"), None);
    }
}
