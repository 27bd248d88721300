//! Bearer secrets: 256 bits from the OS CSPRNG, stored only as SHA-256.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use ring::{
    digest,
    rand::{SecureRandom, SystemRandom},
};

/// A fresh secret: 32 random bytes, base64url without padding, behind `prefix`.
pub fn generate(prefix: &str) -> anyhow::Result<String> {
    Ok(format!(
        "{prefix}{}",
        URL_SAFE_NO_PAD.encode(random_bytes(32)?)
    ))
}

/// `n` bytes from the OS CSPRNG (tokens, TOTP secrets, recovery codes).
pub fn random_bytes(n: usize) -> anyhow::Result<Vec<u8>> {
    let mut bytes = vec![0u8; n];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| anyhow::anyhow!("the OS random source failed"))?;
    Ok(bytes)
}

/// SHA-256 of the token as stored and looked up.
pub fn hash(token: &str) -> Vec<u8> {
    digest::digest(&digest::SHA256, token.as_bytes())
        .as_ref()
        .to_vec()
}

/// Tokens longer than this are refused before hashing (bounded input).
pub const MAX_TOKEN_LEN: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_distinct_and_url_safe() {
        let a = generate("mlt_").expect("token");
        let b = generate("mlt_").expect("token");
        assert_ne!(a, b);
        assert!(a.starts_with("mlt_"));
        // 32 bytes -> 43 base64url characters: 256 bits.
        assert_eq!(a.len(), 4 + 43);
        assert!(a[4..]
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
    }

    #[test]
    fn hashes_are_sha256() {
        assert_eq!(
            hex::encode(hash("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
