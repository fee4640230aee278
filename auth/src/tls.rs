//! `[tls]`: DNS over TLS (RFC 7858) and zone transfers over TLS (XoT,
//! RFC 9103), both ways.
//!
//! ```toml
//! [tls]
//! certificate = "authd.crt"     # PEM chain, the server's certificate first
//! key = "authd.key"             # PEM private key (PKCS#8, PKCS#1 or SEC1)
//! listen = ["127.0.0.1:853"]    # ALPN "dot": queries, UPDATE, AXFR/IXFR
//! ca = "ca.pem"                 # trust anchors for primaries written "ADDR:PORT tls NAME"
//! ```
//!
//! Server side: every `listen` address takes TLS connections, which carry
//! what a TCP connection carries (RFC 7766 framing, several queries per
//! connection, zone transfers) and count in the TCP connection table
//! (`[tcp]` limits; the handshake and the first query share
//! `first_query_timeout`). A transfer ACL entry ending in `tls` admits only
//! requests that came over TLS ([`crate::acl`]).
//!
//! Client side: a `[[secondary]]` primary written `"ADDR:PORT tls"` is
//! reached over TLS with its certificate not checked (RFC 9103 §9.3.2,
//! opportunistic TLS: private from passive observers, not authenticated);
//! `"ADDR:PORT tls NAME"` has its certificate verified for `NAME` against
//! `ca` (strict TLS, §9.3.3), and a primary whose certificate fails is not
//! used.
//!
//! TLS 1.3 only, both ways (RFC 9103 §9.1 requires it for XoT; every DoT
//! client of today speaks it), ALPN `dot` offered and, when the peer offers
//! ALPN at all, required. Sessions resume: the server issues tickets, and
//! the client keeps the sessions of its primaries (in memory, 256).
//! `listen` is applied at start only; `certificate`, `key` and `ca` at every
//! reload too: each new TLS connection takes the server side of the
//! dispatcher in force (sessions open keep theirs; tickets issued before a
//! reload no longer resume).

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use serde::Deserialize;

use crate::settings::{Context, Invalid, Kind, Schema, Section, parse_listen, string_or_list};

/// The ALPN protocol of DNS over TLS and XoT (RFC 9103 §7.1).
pub const ALPN_DOT: &[u8] = b"dot";

/// The crypto provider: ring's.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// `[tls]`, checked: what to listen on, and the TLS configurations built
/// from the files (loaded at check time, so a bad file is a configuration
/// error naming it).
#[derive(Clone, Default)]
pub struct TlsConfig {
    /// Addresses to take TLS connections on (empty: no TLS listener).
    pub listen: Vec<SocketAddr>,
    /// The certificate chain file, resolved.
    pub certificate: Option<PathBuf>,
    /// The private key file, resolved.
    pub key: Option<PathBuf>,
    /// The trust anchors file, resolved.
    pub ca: Option<PathBuf>,
    /// The server side (certificate and key loaded); `None` without them.
    pub server: Option<Arc<ServerConfig>>,
    /// The client side, for primaries over TLS.
    pub clients: TlsClients,
}

impl PartialEq for TlsConfig {
    /// Equal when the same files and addresses are named (the files' contents
    /// are not compared: a reload reads them again).
    fn eq(&self, other: &TlsConfig) -> bool {
        self.listen == other.listen
            && self.certificate == other.certificate
            && self.key == other.key
            && self.ca == other.ca
    }
}

impl Eq for TlsConfig {}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("listen", &self.listen)
            .field("certificate", &self.certificate)
            .field("key", &self.key)
            .field("ca", &self.ca)
            .finish_non_exhaustive()
    }
}

/// How a primary's certificate is checked (`"ADDR:PORT tls [NAME]"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrimaryTls {
    /// Not checked (RFC 9103 §9.3.2, opportunistic).
    Opportunistic,
    /// Verified for this name against `[tls] ca` (§9.3.3, strict).
    Strict(ServerName<'static>),
}

impl fmt::Display for PrimaryTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrimaryTls::Opportunistic => f.write_str("tls"),
            PrimaryTls::Strict(name) => write!(f, "tls {}", name.to_str()),
        }
    }
}

/// The client configurations for primaries over TLS: for strict TLS, the
/// one built from `[tls] ca` (when set); for opportunistic TLS, one per
/// process (it depends on no setting, so its sessions outlive reloads).
/// Each is shared by every transfer, so its session cache resumes sessions
/// with each primary.
#[derive(Clone, Default)]
pub struct TlsClients {
    strict: Option<Arc<ClientConfig>>,
}

/// The opportunistic client configuration, built on first use.
fn opportunistic() -> Arc<ClientConfig> {
    static CONFIG: std::sync::OnceLock<Arc<ClientConfig>> = std::sync::OnceLock::new();
    Arc::clone(CONFIG.get_or_init(|| Arc::new(client_config(Arc::new(AnyCertificate(provider()))))))
}

impl fmt::Debug for TlsClients {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsClients")
            .field("strict", &self.strict.is_some())
            .finish()
    }
}

impl TlsClients {
    /// True when both are the same configurations (not read again since):
    /// a reload that reads `[tls] ca` anew makes them differ.
    pub fn same(&self, other: &TlsClients) -> bool {
        match (&self.strict, &other.strict) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }

    /// The configuration to reach a primary with, as `how` says; `None` for
    /// strict TLS without `[tls] ca` (which the configuration refuses).
    pub fn for_primary(&self, how: &PrimaryTls) -> Option<Arc<ClientConfig>> {
        match how {
            PrimaryTls::Opportunistic => Some(opportunistic()),
            PrimaryTls::Strict(_) => self.strict.clone(),
        }
    }
}

/// A client configuration: TLS 1.3, ALPN `dot`, certificates checked by
/// `verifier`, sessions kept for resumption (the default in-memory store).
fn client_config(verifier: Arc<dyn ServerCertVerifier>) -> ClientConfig {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("ring's provider supports TLS 1.3")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN_DOT.to_vec()];
    config
}

/// Accepts any certificate, for opportunistic TLS (RFC 9103 §9.3.2), but
/// still checks the handshake's signature with the certificate's key, so
/// the session is with whoever holds that key.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `[tls]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    certificate: Option<PathBuf>,
    key: Option<PathBuf>,
    #[serde(default, deserialize_with = "string_or_list")]
    listen: Option<Vec<String>>,
    ca: Option<PathBuf>,
}

impl Section for RawTls {
    type Value = TlsConfig;

    const SCHEMA: Schema = &[(
        "tls",
        &[
            ("certificate", Kind::Text),
            ("key", Kind::Text),
            ("listen", Kind::List),
            ("ca", Kind::Text),
        ],
    )];

    /// `certificate` and `key` together, readable and matching; `listen`
    /// only with them; `ca` readable and holding at least one certificate.
    fn check(self, cx: &Context<'_>) -> Result<TlsConfig, Invalid> {
        let certificate = cx.optional_path(self.certificate);
        let key = cx.optional_path(self.key);
        let ca = cx.optional_path(self.ca);
        let mut listen: Vec<SocketAddr> = Vec::new();
        for (i, a) in self.listen.unwrap_or_default().iter().enumerate() {
            let addr = parse_listen(a).map_err(|r| Invalid::new(format!("tls.listen[{i}]"), r))?;
            if !listen.contains(&addr) {
                listen.push(addr);
            }
        }
        let server = match (&certificate, &key) {
            (Some(c), Some(k)) => Some(Arc::new(server_config(c, k)?)),
            (Some(_), None) => return Err(Invalid::new("tls.key", "missing (certificate is set)")),
            (None, Some(_)) => {
                return Err(Invalid::new("tls.certificate", "missing (key is set)"));
            }
            (None, None) => None,
        };
        if server.is_none() && !listen.is_empty() {
            return Err(Invalid::new(
                "tls.listen",
                "needs tls.certificate and tls.key (the server's certificate chain and key)",
            ));
        }
        if server.is_some() && listen.is_empty() {
            return Err(Invalid::new(
                "tls.listen",
                "missing: certificate and key are set but no address to serve TLS on \
                 (e.g. [\"127.0.0.1:853\"])",
            ));
        }
        let strict = match &ca {
            Some(ca) => {
                let roots = Arc::new(roots(ca)?);
                let verifier =
                    rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider())
                        .build()
                        .map_err(|e| Invalid::new("tls.ca", format!("{}: {e}", ca.display())))?;
                Some(Arc::new(client_config(verifier)))
            }
            None => None,
        };
        Ok(TlsConfig {
            listen,
            certificate,
            key,
            ca,
            server,
            clients: TlsClients { strict },
        })
    }
}

/// The server configuration from certificate chain file `cert` and key
/// file `key`: TLS 1.3, ALPN `dot`, session tickets.
///
/// Errors: an unreadable file, one without the PEM item expected, a key
/// that does not belong to the certificate, each naming the file.
fn server_config(cert: &Path, key: &Path) -> Result<ServerConfig, Invalid> {
    let chain = certificates(cert).map_err(|r| Invalid::new("tls.certificate", r))?;
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        Invalid::new(
            "tls.key",
            format!("{}: {}", key.display(), pem_error(&e, "private key")),
        )
    })?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| Invalid::new("tls", e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| {
            Invalid::new(
                "tls.key",
                format!(
                    "{} does not go with the certificate in {}: {e}",
                    key.display(),
                    cert.display()
                ),
            )
        })?;
    config.alpn_protocols = vec![ALPN_DOT.to_vec()];
    config.ticketer = rustls::crypto::ring::Ticketer::new()
        .map_err(|e| Invalid::new("tls", format!("session tickets: {e}")))?;
    Ok(config)
}

/// Every certificate in PEM file `path`, in order.
///
/// Errors: the file unreadable, malformed or without a certificate, as a
/// message naming it.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let bad = |e: &rustls::pki_types::pem::Error| {
        format!("{}: {}", path.display(), pem_error(e, "certificate"))
    };
    let mut out = Vec::new();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| bad(&e))? {
        out.push(cert.map_err(|e| bad(&e))?);
    }
    if out.is_empty() {
        return Err(format!(
            "{}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
            path.display()
        ));
    }
    Ok(out)
}

/// The trust anchors in PEM file `path` (`[tls] ca`).
///
/// Errors: as [`certificates`], and a certificate that is not a usable
/// trust anchor.
fn roots(path: &Path) -> Result<RootCertStore, Invalid> {
    let mut store = RootCertStore::empty();
    for cert in certificates(path).map_err(|r| Invalid::new("tls.ca", r))? {
        store
            .add(cert)
            .map_err(|e| Invalid::new("tls.ca", format!("{}: {e}", path.display())))?;
    }
    Ok(store)
}

/// A PEM reading error in words; `what` names the item looked for.
fn pem_error(e: &rustls::pki_types::pem::Error, what: &str) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::Io(io) => crate::sys::io_reason(io),
        Error::NoItemsFound => format!("no PEM {what} in it"),
        other => format!("not a PEM file: {other:?}"),
    }
}

/// Parses the TLS words of a primary after its address: `tls` alone
/// (opportunistic) or `tls NAME` (strict), as `words` gives them; returns
/// the mode and how many words it took (0 when the first is not `tls`).
///
/// Errors: a `NAME` that is not a DNS name or IP address.
pub fn parse_primary_tls(words: &[&str]) -> Result<(Option<PrimaryTls>, usize), String> {
    match words {
        [t, ..] if !t.eq_ignore_ascii_case("tls") => Ok((None, 0)),
        [_, k, ..] if k.eq_ignore_ascii_case("key") => Ok((Some(PrimaryTls::Opportunistic), 1)),
        [_, name, ..] => {
            let name = name.trim_end_matches('.');
            let server = ServerName::try_from(name.to_string())
                .map_err(|_| format!("{name:?} is not a name to verify a certificate for"))?;
            Ok((Some(PrimaryTls::Strict(server)), 2))
        }
        [_] => Ok((Some(PrimaryTls::Opportunistic), 1)),
        [] => Ok((None, 0)),
    }
}
