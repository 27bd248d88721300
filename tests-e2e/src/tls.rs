//! TLS for tests: a certificate authority made per test (rcgen), leaf
//! certificates for `localhost` / `127.0.0.1`, PEM files for the settings that
//! name CA files, and a TLS front (tokio-rustls) that terminates TLS and relays
//! the plain bytes to a local plain server, so any stand-in or receiver of the
//! harness can be served over `https://` or `tls://`.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::{path::PathBuf, sync::Arc};

/// A certificate authority of one test.
pub struct TestCa {
    issuer: rcgen::CertifiedIssuer<'static, KeyPair>,
    dir: PathBuf,
}

/// A leaf certificate and its key, signed by a [`TestCa`].
#[derive(Clone)]
pub struct Leaf {
    pub cert: CertificateDer<'static>,
    pub key_der: Vec<u8>,
    pub cert_pem: String,
    pub key_pem: String,
}

impl TestCa {
    /// A new CA named `name`; its files live in a fresh temporary directory.
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params
            .distinguished_name
            .push(DnType::CommonName, format!("hub test CA {name}"));
        let issuer = rcgen::CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key"))
            .expect("self-signed CA");
        let dir = std::env::temp_dir().join(format!("hub-tls-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TestCa { issuer, dir }
    }

    /// The CA certificate as PEM.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// Write the CA certificate to a file; its path (for `*_ca_file` settings).
    pub fn ca_file(&self) -> String {
        self.write("ca.pem", &self.pem())
    }

    /// Write `contents` to `name` in this CA's directory; its path.
    pub fn write(&self, name: &str, contents: &str) -> String {
        let p = self.dir.join(name);
        std::fs::write(&p, contents).expect("write a TLS file");
        p.to_string_lossy().into_owned()
    }

    /// A server certificate for `localhost` and `127.0.0.1`.
    pub fn localhost(&self) -> Leaf {
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
                .expect("leaf params");
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("signed leaf");
        Leaf {
            cert: cert.der().clone(),
            key_der: key.serialize_der(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Serve `leaf` on a free local port: each TLS connection is relayed to the
/// plain server at `upstream` (`127.0.0.1:port` or `http://127.0.0.1:port/...`:
/// the path is ignored).
/// Returns the port. Handshake failures (a client that does not trust the
/// certificate) just close that connection.
pub fn tls_front(leaf: &Leaf, upstream: &str) -> u16 {
    service_kit::tls::install_provider();
    let upstream = upstream
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.cert.clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key_der.clone())),
        )
        .expect("server TLS config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut plain) = tokio::net::TcpStream::connect(&upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    port
}
