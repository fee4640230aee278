//! DNSSEC key pairs (RFC 4034, RFC 5702, RFC 6605, RFC 8080): generation,
//! BIND 9 key files, DNSKEY RDATA, key tags, DS digests, signing and
//! verification.

use data_encoding::BASE64;
use ring::rand::SystemRandom;
use ring::signature::{self, KeyPair as _};
use sha2::{Digest, Sha256};

/// DNSSEC algorithm numbers authd signs with (RFC 8624 §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// RSA/SHA-256, number 8 (RFC 5702).
    RsaSha256,
    /// ECDSA P-256 with SHA-256, number 13 (RFC 6605).
    EcdsaP256Sha256,
    /// Ed25519, number 15 (RFC 8080).
    Ed25519,
}

impl Algorithm {
    /// The DNSSEC algorithm number: 8, 13 or 15.
    pub fn number(self) -> u8 {
        match self {
            Algorithm::RsaSha256 => 8,
            Algorithm::EcdsaP256Sha256 => 13,
            Algorithm::Ed25519 => 15,
        }
    }

    /// The algorithm for a DNSSEC algorithm number; `None` for any number
    /// other than 8, 13 and 15.
    pub fn from_number(n: u8) -> Option<Algorithm> {
        match n {
            8 => Some(Algorithm::RsaSha256),
            13 => Some(Algorithm::EcdsaP256Sha256),
            15 => Some(Algorithm::Ed25519),
            _ => None,
        }
    }

    /// Config names: "rsasha256", "ecdsap256sha256", "ed25519"
    /// (case-insensitive); `None` for anything else.
    pub fn from_name(s: &str) -> Option<Algorithm> {
        [
            Algorithm::RsaSha256,
            Algorithm::EcdsaP256Sha256,
            Algorithm::Ed25519,
        ]
        .into_iter()
        .find(|a| a.name().eq_ignore_ascii_case(s))
    }

    /// The config name: "rsasha256", "ecdsap256sha256" or "ed25519".
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::RsaSha256 => "rsasha256",
            Algorithm::EcdsaP256Sha256 => "ecdsap256sha256",
            Algorithm::Ed25519 => "ed25519",
        }
    }

    /// BIND's mnemonic in K-files: "RSASHA256", "ECDSAP256SHA256", "ED25519".
    pub fn mnemonic(self) -> &'static str {
        match self {
            Algorithm::RsaSha256 => "RSASHA256",
            Algorithm::EcdsaP256Sha256 => "ECDSAP256SHA256",
            Algorithm::Ed25519 => "ED25519",
        }
    }
}

/// Why a key could not be made, read or used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// A DNSSEC algorithm number authd does not sign with (anything but 8, 13, 15).
    #[error("unsupported DNSSEC algorithm {0}")]
    Unsupported(u8),
    /// Key text that cannot be parsed: names the field and why.
    #[error("malformed key: {0}")]
    Malformed(String),
    /// The crypto library refused the key or the operation.
    #[error("crypto error: {0}")]
    Crypto(String),
}

/// RSA private components, big-endian unsigned, no leading zero bytes.
struct RsaParts {
    n: Vec<u8>,
    e: Vec<u8>,
    d: Vec<u8>,
    p: Vec<u8>,
    q: Vec<u8>,
    dp: Vec<u8>,
    dq: Vec<u8>,
    qinv: Vec<u8>,
}

enum Inner {
    Rsa(Box<signature::RsaKeyPair>, Box<RsaParts>),
    Ecdsa(signature::EcdsaKeyPair, [u8; 32]),
    Ed25519(signature::Ed25519KeyPair, [u8; 32]),
}

/// One DNSKEY with its private key. `Debug` prints only the algorithm, the
/// flags and the key tag, never private material. `Send + Sync`.
pub struct KeyPair {
    algorithm: Algorithm,
    flags: u16,
    public: Vec<u8>,
    inner: Inner,
}

impl std::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPair")
            .field("algorithm", &self.algorithm)
            .field("flags", &self.flags)
            .field("key_tag", &self.key_tag())
            .finish()
    }
}

fn crypto<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> KeyError + '_ {
    move |e| KeyError::Crypto(format!("{what}: {e}"))
}

fn strip_zeros(b: &[u8]) -> Vec<u8> {
    let i = b.iter().position(|&x| x != 0).unwrap_or(b.len());
    b[i..].to_vec()
}

/// RFC 3110 §2 public key field: exponent length (1 byte, or 0 then 2 bytes),
/// exponent, modulus.
fn rfc3110(e: &[u8], n: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(3 + e.len() + n.len());
    if e.len() <= 255 {
        v.push(e.len() as u8);
    } else {
        v.push(0);
        v.extend_from_slice(&(e.len() as u16).to_be_bytes());
    }
    v.extend_from_slice(e);
    v.extend_from_slice(n);
    v
}

/// Splits an RFC 3110 public key field into (exponent, modulus).
fn split_rfc3110(k: &[u8]) -> Option<(&[u8], &[u8])> {
    let (&first, rest) = k.split_first()?;
    let (len, rest) = if first == 0 {
        if rest.len() < 2 {
            return None;
        }
        (u16::from_be_bytes([rest[0], rest[1]]) as usize, &rest[2..])
    } else {
        (first as usize, rest)
    };
    if len == 0 || rest.len() <= len {
        return None;
    }
    Some(rest.split_at(len))
}

/// Minimal DER reader for PKCS#1 RSAPrivateKey: SEQUENCE of INTEGERs.
fn der_integers(der: &[u8]) -> Option<Vec<Vec<u8>>> {
    fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let tag = *b.first()?;
        let l0 = *b.get(1)? as usize;
        let (len, hdr) = if l0 < 0x80 {
            (l0, 2)
        } else {
            let nb = l0 & 0x7f;
            if nb == 0 || nb > 4 {
                return None;
            }
            let mut len = 0usize;
            for i in 0..nb {
                len = (len << 8) | *b.get(2 + i)? as usize;
            }
            (len, 2 + nb)
        };
        let body = b.get(hdr..hdr + len)?;
        Some((tag, body, &b[hdr + len..]))
    }
    let (tag, mut body, _) = tlv(der)?;
    if tag != 0x30 {
        return None;
    }
    let mut out = Vec::new();
    while !body.is_empty() {
        let (t, v, rest) = tlv(body)?;
        if t != 0x02 {
            return None;
        }
        out.push(strip_zeros(v));
        body = rest;
    }
    Some(out)
}

impl KeyPair {
    fn from_rsa(flags: u16, parts: RsaParts) -> Result<KeyPair, KeyError> {
        let comps = ring::rsa::KeyPairComponents {
            public_key: ring::rsa::PublicKeyComponents {
                n: &parts.n[..],
                e: &parts.e[..],
            },
            d: &parts.d[..],
            p: &parts.p[..],
            q: &parts.q[..],
            dP: &parts.dp[..],
            dQ: &parts.dq[..],
            qInv: &parts.qinv[..],
        };
        let kp =
            signature::RsaKeyPair::from_components(&comps).map_err(crypto("RSA private key"))?;
        let public = rfc3110(&parts.e, &parts.n);
        Ok(KeyPair {
            algorithm: Algorithm::RsaSha256,
            flags,
            public,
            inner: Inner::Rsa(Box::new(kp), Box::new(parts)),
        })
    }

    fn from_ecdsa_scalar(flags: u16, scalar: [u8; 32]) -> Result<KeyPair, KeyError> {
        use p256::elliptic_curve::sec1::ToSec1Point;
        let sk = p256::SecretKey::from_slice(&scalar)
            .map_err(|_| KeyError::Malformed("PrivateKey: not a P-256 scalar".into()))?;
        let point = sk.public_key().to_sec1_point(false);
        let point = point.as_bytes();
        let kp = signature::EcdsaKeyPair::from_private_key_and_public_key(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &scalar,
            point,
            &SystemRandom::new(),
        )
        .map_err(crypto("ECDSA private key"))?;
        let public = point.get(1..).unwrap_or_default().to_vec();
        if public.len() != 64 {
            return Err(KeyError::Crypto("ECDSA public point not 65 bytes".into()));
        }
        Ok(KeyPair {
            algorithm: Algorithm::EcdsaP256Sha256,
            flags,
            public,
            inner: Inner::Ecdsa(kp, scalar),
        })
    }

    fn from_ed25519_seed(flags: u16, seed: [u8; 32]) -> Result<KeyPair, KeyError> {
        let kp = signature::Ed25519KeyPair::from_seed_unchecked(&seed)
            .map_err(crypto("Ed25519 private key"))?;
        let public = kp.public_key().as_ref().to_vec();
        Ok(KeyPair {
            algorithm: Algorithm::Ed25519,
            flags,
            public,
            inner: Inner::Ed25519(kp, seed),
        })
    }

    /// New random key; `flags` is 257 (KSK/CSK: SEP bit) or 256 (ZSK), and
    /// is stored as given. RSA: 2048 bits, e = 65537 (generated with the
    /// `rsa` crate from the OS RNG); ECDSA P-256 and Ed25519: 32 random bytes
    /// from the OS RNG. Errors: `Crypto` if the RNG or key construction fails.
    pub fn generate(algorithm: Algorithm, flags: u16) -> Result<KeyPair, KeyError> {
        use ring::rand::SecureRandom;
        let rng = SystemRandom::new();
        match algorithm {
            Algorithm::RsaSha256 => {
                use rsa::pkcs1::EncodeRsaPrivateKey;
                let key = rsa::PrivateKey::new(&mut getrandom::SysRng, 2048)
                    .map_err(crypto("RSA key generation"))?;
                let der = key.to_pkcs1_der().map_err(crypto("RSA PKCS#1 encoding"))?;
                let ints = der_integers(der.as_bytes())
                    .filter(|v| v.len() >= 9)
                    .ok_or_else(|| KeyError::Crypto("RSA PKCS#1 DER".into()))?;
                let mut it = ints.into_iter().skip(1);
                let mut next = || it.next().unwrap_or_default();
                let parts = RsaParts {
                    n: next(),
                    e: next(),
                    d: next(),
                    p: next(),
                    q: next(),
                    dp: next(),
                    dq: next(),
                    qinv: next(),
                };
                KeyPair::from_rsa(flags, parts)
            }
            Algorithm::EcdsaP256Sha256 => {
                // A random 256-bit value is >= the group order with
                // probability ~2^-32: retry then.
                for _ in 0..16 {
                    let mut s = [0u8; 32];
                    rng.fill(&mut s).map_err(crypto("RNG"))?;
                    if let Ok(k) = KeyPair::from_ecdsa_scalar(flags, s) {
                        return Ok(k);
                    }
                }
                Err(KeyError::Crypto("ECDSA key generation".into()))
            }
            Algorithm::Ed25519 => {
                let mut s = [0u8; 32];
                rng.fill(&mut s).map_err(crypto("RNG"))?;
                KeyPair::from_ed25519_seed(flags, s)
            }
        }
    }

    /// From BIND 9's key files: `key_text` is the K*.key text (one DNSKEY
    /// RR in master-file form: ';' comments, owner name, optional TTL and
    /// class, then `DNSKEY flags 3 alg base64...`), `private_text` the
    /// K*.private text (Private-key-format v1.2/v1.3). Returns the key and
    /// the owner name text from the .key file. Errors: `Malformed` naming the
    /// missing or malformed field, or a private key that does not match the
    /// public key (checked by comparing public keys and by signing and
    /// verifying); `Unsupported` for algorithms other than 8, 13, 15.
    pub fn from_bind(key_text: &str, private_text: &str) -> Result<(KeyPair, String), KeyError> {
        let mut tokens = Vec::new();
        for line in key_text.lines() {
            let line = line.split(';').next().unwrap_or("");
            tokens.extend(line.split_whitespace().filter(|t| *t != "(" && *t != ")"));
        }
        let owner = tokens
            .first()
            .ok_or_else(|| KeyError::Malformed(".key: no DNSKEY record".into()))?
            .to_string();
        let pos = tokens
            .iter()
            .position(|t| t.eq_ignore_ascii_case("DNSKEY"))
            .ok_or_else(|| KeyError::Malformed(".key: no DNSKEY record".into()))?;
        let field = |i: usize, name: &str| {
            tokens
                .get(pos + i)
                .ok_or_else(|| KeyError::Malformed(format!(".key: DNSKEY {name} missing")))
        };
        let flags: u16 = field(1, "flags")?
            .parse()
            .map_err(|_| KeyError::Malformed(".key: DNSKEY flags not a number".into()))?;
        let protocol: u8 = field(2, "protocol")?
            .parse()
            .map_err(|_| KeyError::Malformed(".key: DNSKEY protocol not a number".into()))?;
        if protocol != 3 {
            return Err(KeyError::Malformed(format!(
                ".key: DNSKEY protocol {protocol}, not 3"
            )));
        }
        let alg: u8 = field(3, "algorithm")?
            .parse()
            .map_err(|_| KeyError::Malformed(".key: DNSKEY algorithm not a number".into()))?;
        let algorithm = Algorithm::from_number(alg).ok_or(KeyError::Unsupported(alg))?;
        let b64: String = tokens.get(pos + 4..).unwrap_or_default().concat();
        if b64.is_empty() {
            return Err(KeyError::Malformed(
                ".key: DNSKEY public key missing".into(),
            ));
        }
        let public = BASE64
            .decode(b64.as_bytes())
            .map_err(|e| KeyError::Malformed(format!(".key: DNSKEY public key base64: {e}")))?;
        let key = KeyPair::from_private_text(flags, private_text)?;
        if key.algorithm != algorithm {
            return Err(KeyError::Malformed(format!(
                "private key algorithm {} does not match the .key algorithm {}",
                key.algorithm.number(),
                alg
            )));
        }
        if key.public != public {
            return Err(KeyError::Malformed(
                "private key does not match the .key public key".into(),
            ));
        }
        let probe = b"authd key pair consistency check";
        let sig = key.sign(probe)?;
        if !verify(algorithm, &public, probe, &sig) {
            return Err(KeyError::Malformed(
                "private key does not match the .key public key (signature check)".into(),
            ));
        }
        Ok((key, owner))
    }

    /// The stored form: `flags` plus BIND Private-key-format text as produced
    /// by [`KeyPair::private_text`] (v1.2 and v1.3 accepted; Created,
    /// Publish, Activate and other unknown lines ignored). Errors:
    /// `Malformed` naming the missing or malformed field; `Unsupported` for
    /// algorithms other than 8, 13, 15; `Crypto` if the key is inconsistent.
    pub fn from_private_text(flags: u16, private_text: &str) -> Result<KeyPair, KeyError> {
        let mut fields: Vec<(&str, &str)> = Vec::new();
        for line in private_text.lines() {
            if let Some((k, v)) = line.split_once(':') {
                fields.push((k.trim(), v.trim()));
            }
        }
        let get = |name: &str| {
            fields
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| *v)
                .ok_or_else(|| KeyError::Malformed(format!(".private: {name} field missing")))
        };
        let format = get("Private-key-format")?;
        if !format.starts_with("v1.") {
            return Err(KeyError::Malformed(format!(
                ".private: Private-key-format {format} not v1.x"
            )));
        }
        let alg: u8 = get("Algorithm")?
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| KeyError::Malformed(".private: Algorithm not a number".into()))?;
        let algorithm = Algorithm::from_number(alg).ok_or(KeyError::Unsupported(alg))?;
        let b64 = |name: &str| -> Result<Vec<u8>, KeyError> {
            BASE64
                .decode(get(name)?.as_bytes())
                .map_err(|e| KeyError::Malformed(format!(".private: {name} base64: {e}")))
        };
        let b32 = |name: &str| -> Result<[u8; 32], KeyError> {
            let v = b64(name)?;
            v.as_slice().try_into().map_err(|_| {
                KeyError::Malformed(format!(".private: {name} is {} bytes, not 32", v.len()))
            })
        };
        match algorithm {
            Algorithm::RsaSha256 => {
                let f = |name: &str| b64(name).map(|v| strip_zeros(&v));
                let parts = RsaParts {
                    n: f("Modulus")?,
                    e: f("PublicExponent")?,
                    d: f("PrivateExponent")?,
                    p: f("Prime1")?,
                    q: f("Prime2")?,
                    dp: f("Exponent1")?,
                    dq: f("Exponent2")?,
                    qinv: f("Coefficient")?,
                };
                KeyPair::from_rsa(flags, parts)
            }
            Algorithm::EcdsaP256Sha256 => KeyPair::from_ecdsa_scalar(flags, b32("PrivateKey")?),
            Algorithm::Ed25519 => KeyPair::from_ed25519_seed(flags, b32("PrivateKey")?),
        }
    }

    /// BIND Private-key-format v1.3 text of this key (what `dnssec-keygen`
    /// writes, without timing lines): the explicit export and DB storage
    /// form. Contains the private key: handle as a secret.
    pub fn private_text(&self) -> String {
        let mut s = format!(
            "Private-key-format: v1.3\nAlgorithm: {} ({})\n",
            self.algorithm.number(),
            self.algorithm.mnemonic()
        );
        match &self.inner {
            Inner::Rsa(_, p) => {
                for (name, v) in [
                    ("Modulus", &p.n),
                    ("PublicExponent", &p.e),
                    ("PrivateExponent", &p.d),
                    ("Prime1", &p.p),
                    ("Prime2", &p.q),
                    ("Exponent1", &p.dp),
                    ("Exponent2", &p.dq),
                    ("Coefficient", &p.qinv),
                ] {
                    s.push_str(&format!("{name}: {}\n", BASE64.encode(v)));
                }
            }
            Inner::Ecdsa(_, k) | Inner::Ed25519(_, k) => {
                s.push_str(&format!("PrivateKey: {}\n", BASE64.encode(k)));
            }
        }
        s
    }

    /// The BIND K*.key text of this key: one line
    /// `<owner> IN DNSKEY <flags> 3 <alg> <base64>`; `owner` is used as given
    /// (an absolute name such as "example.com.").
    pub fn bind_key_text(&self, owner: &str) -> String {
        format!(
            "{owner} IN DNSKEY {} 3 {} {}\n",
            self.flags,
            self.algorithm.number(),
            BASE64.encode(&self.public)
        )
    }

    /// The DNSSEC algorithm of this key.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The DNSKEY flags (256 ZSK, 257 KSK/CSK).
    pub fn flags(&self) -> u16 {
        self.flags
    }

    /// The public key field of the DNSKEY RDATA (RFC 3110 format for RSA:
    /// exponent length byte + exponent + modulus; ECDSA: 64 bytes x||y;
    /// Ed25519: 32 bytes).
    pub fn public_key(&self) -> &[u8] {
        &self.public
    }

    /// DNSKEY RDATA wire (RFC 4034 §2.1): flags (2 bytes BE), protocol 3,
    /// algorithm, public key.
    pub fn dnskey_rdata(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(4 + self.public.len());
        v.extend_from_slice(&self.flags.to_be_bytes());
        v.push(3);
        v.push(self.algorithm.number());
        v.extend_from_slice(&self.public);
        v
    }

    /// DS RDATA wire (RFC 4034 §5.1) with digest type 2 (SHA-256, RFC 4509)
    /// for this key at `owner_wire_lowercase` (the zone apex in canonical
    /// wire form): key tag, algorithm, 2, the 32-byte digest. The same RDATA
    /// is the key's CDS (RFC 7344 §3.1).
    pub fn ds_rdata(&self, owner_wire_lowercase: &[u8]) -> Vec<u8> {
        let dnskey = self.dnskey_rdata();
        let mut v = key_tag_of(&dnskey).to_be_bytes().to_vec();
        v.extend_from_slice(&[self.algorithm.number(), 2]);
        v.extend_from_slice(&ds_sha256(owner_wire_lowercase, &dnskey));
        v
    }

    /// RFC 4034 Appendix B key tag of [`KeyPair::dnskey_rdata`].
    pub fn key_tag(&self) -> u16 {
        key_tag_of(&self.dnskey_rdata())
    }

    /// DNSSEC signature of `data` in the DNSSEC wire format: RSA PKCS#1 v1.5
    /// SHA-256 (RFC 5702 §3, modulus-length bytes), ECDSA P-256 r||s 64 bytes
    /// (RFC 6605 §4), Ed25519 64 bytes (RFC 8080 §4). Errors: `Crypto` if
    /// the crypto library fails.
    pub fn sign(&self, data: &[u8]) -> Result<Vec<u8>, KeyError> {
        let rng = SystemRandom::new();
        match &self.inner {
            Inner::Rsa(kp, _) => {
                let mut sig = vec![0u8; kp.public().modulus_len()];
                kp.sign(&signature::RSA_PKCS1_SHA256, &rng, data, &mut sig)
                    .map_err(crypto("RSA sign"))?;
                Ok(sig)
            }
            Inner::Ecdsa(kp, _) => Ok(kp
                .sign(&rng, data)
                .map_err(crypto("ECDSA sign"))?
                .as_ref()
                .to_vec()),
            Inner::Ed25519(kp, _) => Ok(kp.sign(data).as_ref().to_vec()),
        }
    }
}

/// Verifies a DNSSEC signature against a DNSKEY public key field (formats as
/// in [`KeyPair::public_key`] and [`KeyPair::sign`]; RSA moduli of 1024 to
/// 8192 bits accepted). `false` on any mismatch or malformed key.
pub fn verify(algorithm: Algorithm, public_key: &[u8], data: &[u8], signature: &[u8]) -> bool {
    match algorithm {
        Algorithm::RsaSha256 => {
            let Some((e, n)) = split_rfc3110(public_key) else {
                return false;
            };
            signature::RsaPublicKeyComponents {
                n: strip_zeros(n),
                e: strip_zeros(e),
            }
            .verify(
                &signature::RSA_PKCS1_1024_8192_SHA256_FOR_LEGACY_USE_ONLY,
                data,
                signature,
            )
            .is_ok()
        }
        Algorithm::EcdsaP256Sha256 => {
            if public_key.len() != 64 {
                return false;
            }
            let mut point = Vec::with_capacity(65);
            point.push(4);
            point.extend_from_slice(public_key);
            signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                .verify(data, signature)
                .is_ok()
        }
        Algorithm::Ed25519 => {
            public_key.len() == 32
                && signature::UnparsedPublicKey::new(&signature::ED25519, public_key)
                    .verify(data, signature)
                    .is_ok()
        }
    }
}

/// RFC 4034 Appendix B key tag of any DNSKEY RDATA wire (flags, protocol,
/// algorithm, public key). Algorithm 1 (RSA/MD5) tags are not special-cased.
pub fn key_tag_of(dnskey_rdata: &[u8]) -> u16 {
    let mut ac: u32 = 0;
    for (i, &b) in dnskey_rdata.iter().enumerate() {
        ac += if i & 1 == 1 {
            b as u32
        } else {
            (b as u32) << 8
        };
    }
    ac += (ac >> 16) & 0xffff;
    (ac & 0xffff) as u16
}

/// DS digest type 2 (SHA-256, RFC 4509 §2.1): SHA-256(owner name in
/// canonical lowercase wire form || DNSKEY RDATA), 32 bytes.
pub fn ds_sha256(owner_wire_lowercase: &[u8], dnskey_rdata: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(owner_wire_lowercase);
    h.update(dnskey_rdata);
    h.finalize().into()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const ALGS: [Algorithm; 3] = [
        Algorithm::RsaSha256,
        Algorithm::EcdsaP256Sha256,
        Algorithm::Ed25519,
    ];

    #[test]
    fn algorithm_names() {
        for a in ALGS {
            assert_eq!(Algorithm::from_number(a.number()), Some(a));
            assert_eq!(Algorithm::from_name(a.name()), Some(a));
            assert_eq!(Algorithm::from_name(a.mnemonic()), Some(a));
        }
        assert_eq!(Algorithm::EcdsaP256Sha256.number(), 13);
        assert_eq!(Algorithm::from_number(5), None);
        assert_eq!(Algorithm::from_name("dsa"), None);
    }

    #[test]
    fn sign_verify_round_trip() {
        for a in ALGS {
            let k = KeyPair::generate(a, 256).unwrap();
            let other = KeyPair::generate(a, 256).unwrap();
            let sig = k.sign(b"hello").unwrap();
            let want = match a {
                Algorithm::RsaSha256 => 256,
                _ => 64,
            };
            assert_eq!(sig.len(), want);
            assert!(verify(a, k.public_key(), b"hello", &sig));
            let mut bad = sig.clone();
            bad[10] ^= 1;
            assert!(!verify(a, k.public_key(), b"hello", &bad));
            assert!(!verify(a, k.public_key(), b"hellp", &sig));
            assert!(!verify(a, other.public_key(), b"hello", &sig));
            assert!(!verify(a, &k.public_key()[1..], b"hello", &sig));
            // RSA: exponent length 1 byte, exponent 01 00 01, 256-byte modulus.
            let pklen = match a {
                Algorithm::RsaSha256 => 1 + 3 + 256,
                Algorithm::EcdsaP256Sha256 => 64,
                Algorithm::Ed25519 => 32,
            };
            assert_eq!(k.public_key().len(), pklen);
        }
    }

    #[test]
    fn private_text_round_trip() {
        for a in ALGS {
            let k = KeyPair::generate(a, 257).unwrap();
            let text = k.private_text();
            assert!(text.starts_with("Private-key-format: v1.3\n"));
            let k2 = KeyPair::from_private_text(257, &text).unwrap();
            assert_eq!(k2.public_key(), k.public_key());
            assert_eq!(k2.key_tag(), k.key_tag());
            assert_eq!(k2.algorithm(), a);
            assert_eq!(k2.private_text(), text);
            let dbg = format!("{k:?}");
            assert!(!dbg.contains(text.lines().nth(2).unwrap()));
        }
    }

    const ROOT_KSK: &str = "AwEAAaz/tAm8yTn4Mfeh5eyI96WSVexTBAvkMgJzkKTOiW1vkIbzxeF3+/4RgWOq7HrxRixHlFlExOLAJr5emLvN7SWXgnLh4+B5xQlNVz8Og8kvArMtNROxVQuCaSnIDdD5LKyWbRd2n9WGe2R8PzgCmr3EgVLrjyBxWezF0jLHwVN8efS3rCj/EWgvIWgb9tarpVUDK/b58Da+sqqls3eNbuv7pr+eoZG+SrDK6nWeL3c6H5Apxz7LjVc1uTIdsIXxuOLYA4/ilBmSVIzuDWfdRUfhHdY6+cn8HFRm+2hM8AnXGXws9555KrUB5qihylGa8subX2Nn6UwNR1AkUTV74bU=";

    #[test]
    fn root_ksk_tag_and_ds() {
        let mut rdata = vec![1, 1, 3, 8];
        rdata.extend(BASE64.decode(ROOT_KSK.as_bytes()).unwrap());
        assert_eq!(key_tag_of(&rdata), 20326);
        let ds = ds_sha256(&[0], &rdata);
        assert_eq!(
            data_encoding::HEXUPPER.encode(&ds),
            "E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D"
        );
    }

    macro_rules! kfile {
        ($base:literal) => {
            (
                $base,
                include_str!(concat!("../../tests/data/dnssec-keys/", $base, ".key")),
                include_str!(concat!("../../tests/data/dnssec-keys/", $base, ".private")),
            )
        };
    }

    const KFILES: [(&str, &str, &str); 4] = [
        kfile!("Kexample.com.+013+46664"),
        kfile!("Kexample.com.+015+21195"),
        kfile!("Kexample.com.+008+10059"),
        kfile!("Kexample.com.+013+40835"),
    ];

    #[test]
    fn from_bind_files() {
        let want = [
            (Algorithm::EcdsaP256Sha256, 256, 46664),
            (Algorithm::Ed25519, 256, 21195),
            (Algorithm::RsaSha256, 256, 10059),
            (Algorithm::EcdsaP256Sha256, 257, 40835),
        ];
        for ((base, key, private), (alg, flags, tag)) in KFILES.iter().zip(want) {
            let (k, owner) = KeyPair::from_bind(key, private).unwrap();
            assert_eq!(owner, "example.com.", "{base}");
            assert_eq!(k.algorithm(), alg, "{base}");
            assert_eq!(k.flags(), flags, "{base}");
            assert_eq!(k.key_tag(), tag, "{base}");
            let name_tag: u16 = base.rsplit('+').next().unwrap().parse().unwrap();
            assert_eq!(k.key_tag(), name_tag, "{base}");
            let k2 = KeyPair::from_private_text(flags, &k.private_text()).unwrap();
            assert_eq!(k2.dnskey_rdata(), k.dnskey_rdata(), "{base}");
            let sig = k2.sign(b"x").unwrap();
            assert!(verify(alg, k.public_key(), b"x", &sig));
        }
    }

    #[test]
    fn from_bind_errors() {
        let (_, key_a, _) = KFILES[0];
        let (_, _, priv_b) = KFILES[3];
        let e = KeyPair::from_bind(key_a, priv_b).unwrap_err();
        assert!(e.to_string().contains("does not match"), "{e}");
        let (_, key_ed, _) = KFILES[1];
        let e = KeyPair::from_bind(key_ed, priv_b).unwrap_err();
        assert!(e.to_string().contains("algorithm"), "{e}");

        let (_, key, private) = KFILES[0];
        let no_pk: String = private
            .lines()
            .filter(|l| !l.starts_with("PrivateKey"))
            .map(|l| format!("{l}\n"))
            .collect();
        let e = KeyPair::from_bind(key, &no_pk).unwrap_err();
        assert!(e.to_string().contains("PrivateKey"), "{e}");

        let alg5 = private.replace("Algorithm: 13 (ECDSAP256SHA256)", "Algorithm: 5 (RSASHA1)");
        assert!(matches!(
            KeyPair::from_bind(key, &alg5),
            Err(KeyError::Unsupported(5))
        ));
        let key5 = key.replace("DNSKEY 256 3 13", "DNSKEY 256 3 5");
        assert!(matches!(
            KeyPair::from_bind(&key5, private),
            Err(KeyError::Unsupported(5))
        ));
        assert!(matches!(
            KeyPair::from_bind("; nothing\n", private),
            Err(KeyError::Malformed(_))
        ));
    }

    #[test]
    fn send_sync() {
        fn check<T: Send + Sync>() {}
        check::<KeyPair>();
    }

    fn find_tool(name: &str) -> Option<std::path::PathBuf> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .chain(["/usr/bin".into(), "/usr/sbin".into()])
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    }

    #[test]
    fn bind_signs_with_generated_keys() {
        let (Some(signzone), Some(verify_tool)) =
            (find_tool("dnssec-signzone"), find_tool("dnssec-verify"))
        else {
            eprintln!("dnssec-signzone/dnssec-verify not on PATH: skipping the BIND cross-check");
            return;
        };
        for a in ALGS {
            let dir = tempfile::tempdir().unwrap();
            let ksk = KeyPair::generate(a, 257).unwrap();
            let zsk = KeyPair::generate(a, 256).unwrap();
            let mut zone = String::from(
                "$TTL 300\nexample.com. IN SOA ns.example.com. h.example.com. 1 7200 3600 1209600 300\n\
                 example.com. IN NS ns.example.com.\nns.example.com. IN A 192.0.2.1\n\
                 www.example.com. IN A 192.0.2.2\n",
            );
            let mut names = Vec::new();
            for k in [&ksk, &zsk] {
                let base = format!("Kexample.com.+{:03}+{:05}", a.number(), k.key_tag());
                std::fs::write(
                    dir.path().join(format!("{base}.key")),
                    k.bind_key_text("example.com."),
                )
                .unwrap();
                std::fs::write(dir.path().join(format!("{base}.private")), k.private_text())
                    .unwrap();
                zone.push_str(&k.bind_key_text("example.com."));
                names.push(base);
            }
            let zf = dir.path().join("example.com.zone");
            std::fs::write(&zf, zone).unwrap();
            let out = std::process::Command::new(&signzone)
                .current_dir(dir.path())
                .args(["-K", ".", "-o", "example.com.", "-f", "signed.zone"])
                .arg("example.com.zone")
                .args(&names)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{a:?} dnssec-signzone: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let out = std::process::Command::new(&verify_tool)
                .current_dir(dir.path())
                .args(["-o", "example.com.", "signed.zone"])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{a:?} dnssec-verify: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let signed = std::fs::read_to_string(dir.path().join("signed.zone")).unwrap();
            assert!(signed.contains("RRSIG"));
        }
    }
}
