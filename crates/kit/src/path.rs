//! One spelling of a request path.
//!
//! The gateway chooses the upstream, checks the public list, signs the
//! assertion and forwards the request on one path; each service routes on
//! that same path. That only holds if nothing between them rewrites it: a URL
//! parser resolves `..` and `%2e%2e`, turns `\` into `/`, and actix decodes
//! `%69` to `i` before it routes. So the gateway and every service refuse,
//! before anything else, a path that any of them could read two ways:
//!
//! - not starting with `/`;
//! - a dot segment (`.` or `..`), an empty segment (`//`, a trailing `/`);
//! - a backslash, raw or encoded;
//! - an encoded slash (`%2F`), an encoded unreserved character
//!   (`%69` for `i`, `%2e` for `.`, RFC 3986 2.3: these have one spelling),
//!   an encoded control character, or a `%` not followed by two hex digits.
//!
//! What is left decodes to the same segments everywhere: the percent escapes
//! that remain (`%20`, `%C3%A7`) stand for characters no route is spelled with.

/// Why a path is not canonical.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathError {
    NotAbsolute,
    DotSegment,
    EmptySegment,
    Backslash,
    EncodedSlash,
    EncodedUnreserved,
    EncodedControl,
    BadEscape,
}

impl PathError {
    pub fn message(self) -> &'static str {
        match self {
            PathError::NotAbsolute => "the request path must start with /",
            PathError::DotSegment => "the request path must not contain . or .. segments",
            PathError::EmptySegment => "the request path must not contain empty segments",
            PathError::Backslash => "the request path must not contain backslashes",
            PathError::EncodedSlash => "the request path must not contain encoded slashes",
            PathError::EncodedUnreserved => {
                "the request path must not percent-encode letters, digits or -._~"
            }
            PathError::EncodedControl => {
                "the request path must not contain encoded control characters"
            }
            PathError::BadEscape => "the request path has a malformed percent escape",
        }
    }
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for PathError {}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Ok when `path` (without its query) is canonical; see the module docs.
pub fn check(path: &str) -> Result<(), PathError> {
    let bytes = path.as_bytes();
    if bytes.first() != Some(&b'/') {
        return Err(PathError::NotAbsolute);
    }
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => return Err(PathError::Backslash),
            b'%' => {
                let decoded = match (bytes.get(i + 1), bytes.get(i + 2)) {
                    (Some(&h), Some(&l)) => match (hex(h), hex(l)) {
                        (Some(h), Some(l)) => h << 4 | l,
                        _ => return Err(PathError::BadEscape),
                    },
                    _ => return Err(PathError::BadEscape),
                };
                match decoded {
                    b'/' => return Err(PathError::EncodedSlash),
                    b'\\' => return Err(PathError::Backslash),
                    b if unreserved(b) => return Err(PathError::EncodedUnreserved),
                    b if b < 0x20 || b == 0x7f => return Err(PathError::EncodedControl),
                    _ => {}
                }
                i += 3;
            }
            _ => i += 1,
        }
    }
    if path == "/" {
        return Ok(());
    }
    for segment in path[1..].split('/') {
        match segment {
            "" => return Err(PathError::EmptySegment),
            "." | ".." => return Err(PathError::DotSegment),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn canonical_paths_pass() {
        for p in [
            "/",
            "/v1/auth/me",
            "/v1/organizations/3f2a0000-0000-0000-0000-000000000000/wallet",
            "/internal/v1/organizations/lookup",
            "/v1/x/a%20b",
            "/v1/x/%C3%A7",
            "/v1/x/%25",
            "/v1/x/...",
            "/v1/x/.hidden",
            "/v1/x/a..b",
        ] {
            assert_eq!(check(p), Ok(()), "{p}");
        }
    }

    #[test]
    fn every_traversal_spelling_is_refused() {
        use PathError::*;
        for (p, want) in [
            ("", NotAbsolute),
            ("v1/auth/me", NotAbsolute),
            ("/v1/organizations/../../internal/v1/x", DotSegment),
            ("/v1/organizations/./x", DotSegment),
            ("/v1/organizations/..", DotSegment),
            (
                "/v1/organizations/%2e%2e/%2e%2e/internal",
                EncodedUnreserved,
            ),
            ("/v1/organizations/%2E%2E/internal", EncodedUnreserved),
            ("/v1/organizations/.%2e/internal", EncodedUnreserved),
            ("/v1/organizations/..%2f..%2finternal", EncodedSlash),
            ("/v1/organizations/..%2F..%2Finternal", EncodedSlash),
            ("/v1/organizations/../../%69nternal/v1/x", EncodedUnreserved),
            ("/%69nternal/v1/x", EncodedUnreserved),
            ("/v1/organizations/..\\..\\internal", Backslash),
            ("/v1/organizations/%5c..%5cinternal", Backslash),
            ("//internal/v1/x", EmptySegment),
            ("/v1//organizations", EmptySegment),
            ("/v1/organizations/", EmptySegment),
            ("/v1/x/%00", EncodedControl),
            ("/v1/x/%7F", EncodedControl),
            ("/v1/x/%", BadEscape),
            ("/v1/x/%2", BadEscape),
            ("/v1/x/%zz", BadEscape),
        ] {
            assert_eq!(check(p), Err(want), "{p}");
        }
    }

    /// Percent-decode as a router does (every escape).
    fn decode(p: &str) -> Vec<u8> {
        let b = p.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%' {
                if let (Some(h), Some(l)) = (
                    b.get(i + 1).copied().and_then(hex),
                    b.get(i + 2).copied().and_then(hex),
                ) {
                    out.push(h << 4 | l);
                    i += 3;
                    continue;
                }
            }
            out.push(b[i]);
            i += 1;
        }
        out
    }

    fn piece() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "/",
            "//",
            ".",
            "..",
            "%2e",
            "%2E",
            "%2f",
            "%2F",
            "%5c",
            "\\",
            "%69",
            "i",
            "internal",
            "v1",
            "organizations",
            "%20",
            "%",
            "%4",
            "a",
            "-",
            "~",
            "%7e",
            "%00",
            "%C3%A7",
            "%25",
        ])
        .prop_map(str::to_owned)
    }

    proptest! {
        /// Whatever a canonical path decodes to, it has the same segments as
        /// its raw bytes: no decoding reveals a `/`, a `\`, a dot segment or a
        /// letter that spells a route differently.
        #[test]
        fn a_canonical_path_decodes_to_the_same_route(pieces in prop::collection::vec(piece(), 0..12)) {
            let path = format!("/{}", pieces.concat());
            if check(&path).is_ok() {
                let decoded = decode(&path);
                let raw_segments: Vec<&[u8]> = path.as_bytes().split(|b| *b == b'/').collect();
                let decoded_segments: Vec<&[u8]> = decoded.split(|b| *b == b'/').collect();
                prop_assert_eq!(raw_segments.len(), decoded_segments.len());
                prop_assert!(!decoded.contains(&b'\\'));
                for (raw, dec) in raw_segments.iter().zip(&decoded_segments) {
                    prop_assert!(*dec != b".." && *dec != b".");
                    // A segment made of route characters reads the same decoded.
                    if dec.iter().all(|b| unreserved(*b)) {
                        prop_assert_eq!(raw, dec);
                    }
                }
            }
        }
    }
}
