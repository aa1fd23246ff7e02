//! A certificate authority of the fakes' own, and the TLS a fake serves with: as a vCenter serves a certificate
//! its VMCA issued, which clients trust only through the CA bundle they are given.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// A fresh CA and a server certificate it issued.
pub struct Authority {
    /// The CA's certificate, PEM: what a client must trust (a pool's `caBundle`).
    pub ca_pem: String,
    /// The server's TLS configuration: the issued certificate, its chain and key. A client may present a
    /// certificate the same CA issued ([`Authority::client_certificate`]); one it did not issue fails the handshake.
    pub server: Arc<rustls::ServerConfig>,
    issuer: Arc<CertifiedIssuer<'static, KeyPair>>,
}

impl Authority {
    /// A client certificate for `name` this CA issued, and its key: `(certificate PEM, key PEM)`.
    pub fn client_certificate(&self, name: &str) -> Result<(String, String), String> {
        let fail = |e: &dyn std::fmt::Display| format!("issuing a client certificate: {e}");
        let key = KeyPair::generate().map_err(|e| fail(&e))?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| fail(&e))?;
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.signed_by(&key, &self.issuer).map_err(|e| fail(&e))?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// A CA named `name` and a certificate it issued for `hosts` (names or IP addresses).
pub fn authority(name: &str, hosts: &[&str]) -> Result<Authority, String> {
    let fail = |e: &dyn std::fmt::Display| format!("issuing the fake's certificate: {e}");
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(|e| fail(&e))?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, name);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().map_err(|e| fail(&e))?).map_err(|e| fail(&e))?;
    let key = KeyPair::generate().map_err(|e| fail(&e))?;
    let mut leaf =
        CertificateParams::new(hosts.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>()).map_err(|e| fail(&e))?;
    leaf.distinguished_name.push(DnType::CommonName, hosts.first().copied().unwrap_or("localhost"));
    let cert = leaf.signed_by(&key, &ca).map_err(|e| fail(&e))?;
    let chain = vec![cert.der().clone(), ca.der().clone()];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone()).map_err(|e| fail(&e))?;
    let clients = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| fail(&e))?;
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(&e))?
        .with_client_cert_verifier(clients)
        .with_single_cert(chain, key)
        .map_err(|e| fail(&e))?;
    Ok(Authority { ca_pem: ca.pem(), server: Arc::new(server), issuer: Arc::new(ca) })
}
