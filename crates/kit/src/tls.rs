//! TLS for every client a service opens: HTTP (peers, webhooks, the model
//! provider, OTLP), NATS (`tls://`) and Postgres (`sslmode=` in the URL).
//!
//! One crypto provider, ring, installed process-wide ([`install_provider`]);
//! reqwest is built without its own (its `rustls` feature would bring
//! aws-lc-rs). One trust store: the platform's roots as
//! `rustls-native-certs` finds them (`SSL_CERT_FILE` / `SSL_CERT_DIR` when set,
//! otherwise the system store, e.g. `/etc/ssl/certs` on Debian), plus the
//! PEM certificates of an optional extra CA file (`tls.extra_ca_file`,
//! `nats.tls_ca_file`, `telemetry.otlp_ca_file`). Postgres verifies with
//! sqlx's own rustls (same provider, native roots) and libpq's
//! `sslrootcert`.

use anyhow::Context;
use rustls::pki_types::{pem::PemObject, CertificateDer};
use serde::Deserialize;
use std::sync::{Arc, OnceLock};

/// `[tls]` of a service: trust for its outgoing HTTP calls.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TlsSettings {
    /// A PEM file of CA certificates trusted in addition to the platform's
    /// roots (empty: none). For a private CA of peers, model provider or
    /// webhook receivers; tests trust their own CA this way.
    #[serde(default)]
    pub extra_ca_file: String,
}

/// Make ring the process's rustls provider (idempotent). Every client builder
/// here calls it; services call it at start too.
pub fn install_provider() {
    // Err means a provider is installed already (ours, or the embedder's).
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The platform's roots, read once per process. Certificates that do not
/// parse are skipped (and logged); no roots at all is not an error here: the
/// extra CA file may be the only trust wanted.
fn native_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        for e in &found.errors {
            tracing::warn!(error = %e, "some platform root certificates could not be read");
        }
        if found.certs.is_empty() {
            tracing::warn!("no platform root certificates found (SSL_CERT_FILE / SSL_CERT_DIR / the system store)");
        }
        found.certs
    })
}

/// The certificates of a PEM file (at least one).
pub fn read_pem_certs(path: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .with_context(|| format!("reading CA file {path}"))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing CA file {path}"))?;
    anyhow::ensure!(!certs.is_empty(), "CA file {path} holds no certificate");
    Ok(certs)
}

/// The trusted roots: the platform's plus those of `extra_ca_file` (if not
/// empty).
pub fn roots(extra_ca_file: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let mut all = native_roots().to_vec();
    if !extra_ca_file.trim().is_empty() {
        all.extend(read_pem_certs(extra_ca_file.trim())?);
    }
    Ok(all)
}

/// A rustls root store of [`roots`].
pub fn root_store(extra_ca_file: &str) -> anyhow::Result<rustls::RootCertStore> {
    let mut store = rustls::RootCertStore::empty();
    let (added, skipped) = store.add_parsable_certificates(roots(extra_ca_file)?);
    if skipped > 0 {
        tracing::debug!(
            added,
            skipped,
            "root certificates rustls cannot use were skipped"
        );
    }
    Ok(store)
}

/// A rustls client configuration over [`root_store`] (ring; TLS 1.2 and 1.3).
pub fn client_config(extra_ca_file: &str) -> anyhow::Result<rustls::ClientConfig> {
    install_provider();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_root_certificates(root_store(extra_ca_file)?)
        .with_no_client_auth())
}

fn reqwest_certs(extra_ca_file: &str) -> anyhow::Result<Vec<reqwest::Certificate>> {
    roots(extra_ca_file)?
        .iter()
        .map(|c| reqwest::Certificate::from_der(c).map_err(anyhow::Error::from))
        .collect()
}

/// The one way an HTTP client is made in this workspace: rustls (ring) over
/// exactly [`roots`]. Callers add their timeouts, proxies and resolvers.
pub fn http_client(s: &TlsSettings) -> anyhow::Result<reqwest::ClientBuilder> {
    install_provider();
    Ok(reqwest::Client::builder().tls_certs_only(reqwest_certs(&s.extra_ca_file)?))
}

/// [`http_client`] for reqwest's blocking client (the OTLP exporter's).
pub fn blocking_http_client(
    extra_ca_file: &str,
) -> anyhow::Result<reqwest::blocking::ClientBuilder> {
    install_provider();
    Ok(reqwest::blocking::Client::builder().tls_certs_only(reqwest_certs(extra_ca_file)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extra_ca_file_adds_its_certificates_and_a_bad_one_is_an_error() {
        let ca = rcgen::CertifiedIssuer::self_signed(
            rcgen::CertificateParams::new(Vec::<String>::new()).expect("params"),
            rcgen::KeyPair::generate().expect("key"),
        )
        .expect("ca");
        let dir = std::env::temp_dir().join(format!("kit-tls-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("ca.pem");
        std::fs::write(&file, ca.pem()).expect("write");
        let path = file.to_string_lossy().into_owned();
        let base = roots("").expect("native").len();
        let with = roots(&path).expect("with the file");
        assert_eq!(with.len(), base + 1);
        assert_eq!(with.last().map(|c| c.as_ref()), Some(ca.der().as_ref()));

        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").expect("write");
        let err = roots(&empty.to_string_lossy()).expect_err("no certificate");
        assert!(err.to_string().contains("holds no certificate"), "{err}");
        assert!(roots("/nonexistent/ca.pem").is_err());
        assert!(http_client(&TlsSettings {
            extra_ca_file: path
        })
        .and_then(|b| Ok(b.build()?))
        .is_ok());
        let _ = std::fs::remove_dir_all(dir);
    }
}
