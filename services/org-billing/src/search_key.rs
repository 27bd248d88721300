//! The key of the tax id search hashes (`organizations.tax_id_hash`).

/// The key of the tax id search hashes (`organizations.tax_id_hash`):
/// HMAC-SHA256 of the normalized tax id, so staff match a tax id without
/// opening any sealed identity.
#[derive(Clone, Debug)]
pub struct SearchKey(ring::hmac::Key);

impl SearchKey {
    /// The key from `sealing.search_key`: at least 32 characters, or an error
    /// (the service does not start without it).
    pub fn new(key: &secrecy::SecretString) -> anyhow::Result<Self> {
        use secrecy::ExposeSecret;
        let k = key.expose_secret();
        if k.chars().count() < 32 {
            anyhow::bail!(
                "sealing.search_key must be set (ORG_BILLING__SEALING__SEARCH_KEY), at least 32 characters"
            );
        }
        Ok(Self(ring::hmac::Key::new(
            ring::hmac::HMAC_SHA256,
            k.as_bytes(),
        )))
    }

    /// The hash of `tax_id` (upper-cased letters and digits only, so `tr 123
    /// 45` and `TR-12345` match); None for a tax id with neither.
    pub fn tax_id_hash(&self, tax_id: &str) -> Option<Vec<u8>> {
        let n: String = tax_id
            .chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_uppercase)
            .collect();
        (!n.is_empty()).then(|| ring::hmac::sign(&self.0, n.as_bytes()).as_ref().to_vec())
    }
}
