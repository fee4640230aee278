//! TEMPORARY stub of the key module (replaced by the real one on merge).
#![allow(missing_docs)]
use ring::rand::SystemRandom;
use ring::signature::{self, KeyPair as _};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    RsaSha256,
    EcdsaP256Sha256,
    Ed25519,
}
impl Algorithm {
    pub fn number(self) -> u8 {
        match self {
            Algorithm::RsaSha256 => 8,
            Algorithm::EcdsaP256Sha256 => 13,
            Algorithm::Ed25519 => 15,
        }
    }
    pub fn from_number(n: u8) -> Option<Algorithm> {
        match n {
            8 => Some(Algorithm::RsaSha256),
            13 => Some(Algorithm::EcdsaP256Sha256),
            15 => Some(Algorithm::Ed25519),
            _ => None,
        }
    }
    pub fn from_name(s: &str) -> Option<Algorithm> {
        match s.to_ascii_lowercase().as_str() {
            "rsasha256" => Some(Algorithm::RsaSha256),
            "ecdsap256sha256" => Some(Algorithm::EcdsaP256Sha256),
            "ed25519" => Some(Algorithm::Ed25519),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::RsaSha256 => "rsasha256",
            Algorithm::EcdsaP256Sha256 => "ecdsap256sha256",
            Algorithm::Ed25519 => "ed25519",
        }
    }
}
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{0}")]
    Crypto(String),
}
enum Inner {
    Ec(signature::EcdsaKeyPair),
    Ed(signature::Ed25519KeyPair),
}
pub struct KeyPair {
    alg: Algorithm,
    flags: u16,
    inner: Inner,
    public: Vec<u8>,
    pkcs8: Vec<u8>,
}
impl std::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "KeyPair({:?}, {}, {})",
            self.alg,
            self.flags,
            self.key_tag()
        )
    }
}
impl KeyPair {
    pub fn generate(alg: Algorithm, flags: u16) -> Result<KeyPair, KeyError> {
        let rng = SystemRandom::new();
        let e = |e: ring::error::Unspecified| KeyError::Crypto(e.to_string());
        let pkcs8 = match alg {
            Algorithm::EcdsaP256Sha256 => signature::EcdsaKeyPair::generate_pkcs8(
                &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                &rng,
            )
            .map_err(e)?,
            Algorithm::Ed25519 => signature::Ed25519KeyPair::generate_pkcs8(&rng).map_err(e)?,
            Algorithm::RsaSha256 => return Err(KeyError::Crypto("stub".into())),
        };
        Self::from_private_text(
            flags,
            &format!(
                "{}:{}",
                alg.number(),
                data_encoding::BASE64.encode(pkcs8.as_ref())
            ),
        )
    }
    pub fn from_private_text(flags: u16, text: &str) -> Result<KeyPair, KeyError> {
        let (a, b) = text
            .split_once(':')
            .ok_or_else(|| KeyError::Crypto("form".into()))?;
        let alg = a
            .parse()
            .ok()
            .and_then(Algorithm::from_number)
            .ok_or_else(|| KeyError::Crypto("alg".into()))?;
        let pkcs8 = data_encoding::BASE64
            .decode(b.trim().as_bytes())
            .map_err(|e| KeyError::Crypto(e.to_string()))?;
        let k = |e: ring::error::KeyRejected| KeyError::Crypto(e.to_string());
        let (inner, public) = match alg {
            Algorithm::EcdsaP256Sha256 => {
                let p = signature::EcdsaKeyPair::from_pkcs8(
                    &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                    &pkcs8,
                    &SystemRandom::new(),
                )
                .map_err(k)?;
                let pub_ = p.public_key().as_ref()[1..].to_vec();
                (Inner::Ec(p), pub_)
            }
            Algorithm::Ed25519 => {
                let p = signature::Ed25519KeyPair::from_pkcs8(&pkcs8).map_err(k)?;
                let pub_ = p.public_key().as_ref().to_vec();
                (Inner::Ed(p), pub_)
            }
            Algorithm::RsaSha256 => return Err(KeyError::Crypto("stub".into())),
        };
        Ok(KeyPair {
            alg,
            flags,
            inner,
            public,
            pkcs8,
        })
    }
    pub fn from_bind(_k: &str, _p: &str) -> Result<(KeyPair, String), KeyError> {
        Err(KeyError::Crypto("stub".into()))
    }
    pub fn private_text(&self) -> String {
        format!(
            "{}:{}",
            self.alg.number(),
            data_encoding::BASE64.encode(&self.pkcs8)
        )
    }
    pub fn algorithm(&self) -> Algorithm {
        self.alg
    }
    pub fn flags(&self) -> u16 {
        self.flags
    }
    pub fn public_key(&self) -> &[u8] {
        &self.public
    }
    pub fn dnskey_rdata(&self) -> Vec<u8> {
        let mut v = self.flags.to_be_bytes().to_vec();
        v.push(3);
        v.push(self.alg.number());
        v.extend_from_slice(&self.public);
        v
    }
    pub fn key_tag(&self) -> u16 {
        key_tag_of(&self.dnskey_rdata())
    }
    pub fn sign(&self, data: &[u8]) -> Result<Vec<u8>, KeyError> {
        match &self.inner {
            Inner::Ec(p) => p
                .sign(&SystemRandom::new(), data)
                .map(|s| s.as_ref().to_vec())
                .map_err(|e| KeyError::Crypto(e.to_string())),
            Inner::Ed(p) => Ok(p.sign(data).as_ref().to_vec()),
        }
    }
}
pub fn verify(alg: Algorithm, public_key: &[u8], data: &[u8], sig: &[u8]) -> bool {
    match alg {
        Algorithm::EcdsaP256Sha256 => {
            let mut k = vec![4u8];
            k.extend_from_slice(public_key);
            signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, k)
                .verify(data, sig)
                .is_ok()
        }
        Algorithm::Ed25519 => signature::UnparsedPublicKey::new(&signature::ED25519, public_key)
            .verify(data, sig)
            .is_ok(),
        Algorithm::RsaSha256 => false,
    }
}
pub fn key_tag_of(rdata: &[u8]) -> u16 {
    let mut ac: u32 = 0;
    for (i, b) in rdata.iter().enumerate() {
        ac += if i & 1 == 1 {
            u32::from(*b)
        } else {
            u32::from(*b) << 8
        };
    }
    ac += (ac >> 16) & 0xffff;
    (ac & 0xffff) as u16
}
pub fn ds_sha256(owner: &[u8], dnskey: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, &[owner, dnskey].concat());
    let mut o = [0u8; 32];
    o.copy_from_slice(d.as_ref());
    o
}
