//! The visitor's state, in one sealed cookie: the hub session token (never
//! seen by a script: HttpOnly, and sealed with AES-256-GCM so that the
//! browser holds only ciphertext), the form token (CSRF), the sign-in in
//! progress and the person's language and time zone.

use crate::{i18n::Lang, Console};
use actix_web::{
    cookie::{time::Duration as CookieDuration, Cookie, SameSite},
    dev::Payload,
    http::header,
    web, FromRequest, HttpRequest, HttpResponse,
};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use std::future::{ready, Ready};

/// The cookie's name over HTTPS: `__Host-` makes the browser refuse it
/// unless Secure, host-only and for path `/`.
pub const SECURE_COOKIE: &str = "__Host-hub-console";
/// Its name on a loopback dev setup over plain HTTP.
pub const PLAIN_COOKIE: &str = "hub-console";
/// What the seal is bound to (a value sealed for something else does not open).
const AAD: &[u8] = b"hub-console-cookie-v1";
/// A sealed cookie longer than this is refused unread.
const MAX_COOKIE: usize = 3072;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// The form token: every form carries it; a POST without it is refused.
    pub csrf: String,
    /// The hub session token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The second factor's challenge between the mailed link and the code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mfa: Option<String>,
    /// Whether that second step may be a passkey (the verify answer's
    /// `methods` said "passkey").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mfa_passkey: bool,
    /// Where to go once signed in (a path of the console's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lang: Option<Lang>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// Whether the session resolved as staff at sign-in (only the menu
    /// reads it: the API decides every staff call).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub staff: bool,
    /// Whether the person observed a distributor entity at sign-in (only
    /// the menu reads it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub observer: bool,
    /// An MFA enrolment waiting for its first code: the otpauth URI (sealed
    /// like the rest), so that a mistyped code can be tried again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mfa_setup: Option<String>,
}

fn random_token() -> String {
    let mut b = [0u8; 32];
    // The system generator does not fail on the platforms we run on; if it
    // did, an empty token would make every form fail (never pass).
    if SystemRandom::new().fill(&mut b).is_err() {
        return String::new();
    }
    URL_SAFE_NO_PAD.encode(b)
}

/// Equal secrets, in constant time (the kit's comparison).
pub fn same_secret(a: &str, b: &str) -> bool {
    service_kit::same_secret(a.as_bytes(), b.as_bytes())
}

/// One request's visitor: the opened cookie (or a fresh state) and the
/// language of the pages.
pub struct Visit {
    pub state: State,
    /// The state as the cookie brought it (None: no cookie that opened):
    /// an answer re-seals the cookie only when the state differs.
    opened: Option<State>,
    pub lang: Lang,
    /// The client's address chain for the gateway (X-Forwarded-For).
    pub forwarded_for: String,
    pub path: String,
    /// A GET: a page to come back to after signing in (a form's POST is not).
    pub get: bool,
}

impl Visit {
    pub fn signed_in(&self) -> bool {
        self.state.token.is_some()
    }

    /// Whether the form's token is this visitor's (constant time). A visitor
    /// with no token yet never passes.
    pub fn csrf_ok(&self, sent: &str) -> bool {
        !self.state.csrf.is_empty() && same_secret(&self.state.csrf, sent)
    }

    /// The person's time zone (UTC until the profile says).
    pub fn tz(&self) -> &str {
        self.state.tz.as_deref().unwrap_or("UTC")
    }

    /// Forget who is signed in (the form token changes too).
    pub fn sign_out(&mut self) {
        let lang = self.state.lang;
        self.state = State {
            csrf: random_token(),
            lang,
            ..State::default()
        };
    }

    /// The sealed cookie with the state as it is now, when it changed (or
    /// is new): an unchanged visit sets no cookie and seals nothing.
    pub fn cookie(&self, c: &Console) -> Option<Cookie<'static>> {
        if self.opened.as_ref() == Some(&self.state) {
            return None;
        }
        let sealed = match c.sealer.seal_json(&self.state, AAD) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "cannot seal the console cookie");
                return None;
            }
        };
        let name = if c.secure_cookies {
            SECURE_COOKIE
        } else {
            PLAIN_COOKIE
        };
        Some(
            Cookie::build(name, URL_SAFE_NO_PAD.encode(sealed))
                .path("/")
                .http_only(true)
                .secure(c.secure_cookies)
                .same_site(SameSite::Lax)
                .max_age(CookieDuration::seconds(c.cookie_max_age_secs))
                .finish(),
        )
    }

    /// An HTML page, with the cookie.
    pub fn page(
        &self,
        c: &Console,
        status: actix_web::http::StatusCode,
        html: String,
    ) -> HttpResponse {
        let mut r = HttpResponse::build(status);
        r.insert_header((header::CONTENT_TYPE, "text/html; charset=utf-8"))
            .insert_header((header::CACHE_CONTROL, "no-store"));
        if let Some(cookie) = self.cookie(c) {
            r.cookie(cookie);
        }
        r.body(html)
    }

    /// A JSON answer (the passkey ceremonies' calls from the page's script),
    /// with the cookie; never cached.
    pub fn json(
        &self,
        c: &Console,
        status: actix_web::http::StatusCode,
        body: &serde_json::Value,
    ) -> HttpResponse {
        let mut r = HttpResponse::build(status);
        r.insert_header((header::CACHE_CONTROL, "no-store"));
        if let Some(cookie) = self.cookie(c) {
            r.cookie(cookie);
        }
        r.json(body)
    }

    /// 303 See Other to `to`, with the cookie.
    pub fn redirect(&self, c: &Console, to: &str) -> HttpResponse {
        let mut r = HttpResponse::SeeOther();
        r.insert_header((header::LOCATION, to))
            .insert_header((header::CACHE_CONTROL, "no-store"));
        if let Some(cookie) = self.cookie(c) {
            r.cookie(cookie);
        }
        r.finish()
    }
}

/// The state in the request's cookie, if it opens with our keys.
fn opened(req: &HttpRequest, c: &Console) -> Option<State> {
    let name = if c.secure_cookies {
        SECURE_COOKIE
    } else {
        PLAIN_COOKIE
    };
    let raw = req.cookie(name)?;
    if raw.value().len() > MAX_COOKIE {
        return None;
    }
    let sealed = URL_SAFE_NO_PAD.decode(raw.value()).ok()?;
    let state: State = c.sealer.open_json(&sealed, AAD).ok()?;
    (!state.csrf.is_empty()).then_some(state)
}

/// Our path `p` if it is one (`/...`, not `//host` or `/\host`), for `next`
/// and the language switch: never an open redirect.
pub fn local_path(p: &str) -> Option<&str> {
    let ok = p.starts_with('/')
        && !p.starts_with("//")
        && !p.starts_with("/\\")
        && p.len() <= 2048
        && !p.chars().any(|c| c.is_control());
    ok.then_some(p)
}

/// The chain for the gateway: every `X-Forwarded-For` line the request
/// carries, joined, then the peer. Past [`MAX_CHAIN`] entries the leftmost
/// go (a client can write anything there; the rightmost are the proxies'),
/// never the whole chain.
fn forwarded_for(req: &HttpRequest, peer: &str) -> String {
    let mut hops: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|h| !h.is_empty() && h.len() <= 64)
        .collect();
    if hops.len() > MAX_CHAIN {
        hops.drain(..hops.len() - MAX_CHAIN);
    }
    hops.push(peer);
    hops.join(", ")
}

/// Addresses of `X-Forwarded-For` carried on at most (with the peer's).
const MAX_CHAIN: usize = 16;

impl FromRequest for Visit {
    type Error = actix_web::Error;
    type Future = Ready<Result<Visit, actix_web::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let Some(c) = req.app_data::<web::Data<Console>>() else {
            return ready(Err(actix_web::error::ErrorInternalServerError(
                "console state missing",
            )));
        };
        let opened = opened(req, c);
        let state = opened.clone().unwrap_or_else(|| State {
            csrf: random_token(),
            ..State::default()
        });
        let lang = state
            .lang
            .or_else(|| {
                req.headers()
                    .get(header::ACCEPT_LANGUAGE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(Lang::negotiate)
            })
            .unwrap_or(c.default_lang);
        let peer = req
            .peer_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_default();
        let forwarded_for = forwarded_for(req, &peer);
        let path = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_else(|| "/".into());
        ready(Ok(Visit {
            state,
            opened,
            lang,
            forwarded_for,
            path,
            get: req.method() == actix_web::http::Method::GET,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_own_paths_are_followed() {
        assert_eq!(local_path("/orgs/1"), Some("/orgs/1"));
        assert_eq!(
            local_path("/oauth/continue?request=x"),
            Some("/oauth/continue?request=x")
        );
        for bad in [
            "//evil.example",
            "/\\evil.example",
            "https://evil.example",
            "",
            "orgs",
            "/a\nb",
        ] {
            assert_eq!(local_path(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn secrets_compare_equal_only_when_equal() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", ""));
    }
}
