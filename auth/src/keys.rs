//! TSIG key material (RFC 8945 §6): the HMAC algorithms, secrets, named keys
//! and the key ring a server looks keys up in.
//!
//! A leaf module (the hash crates, `authd-datasrc`'s [`Name`] and the
//! settings vocabulary, [`crate::settings`], only): it owns the `[[key]]`
//! section ([`RawKey`]), so the configuration builds keys without depending
//! on the protocol code ([`crate::tsig`]) that uses them. A [`Secret`] never prints: its `Debug`
//! shows only its length, so a key can be logged or put in an error without
//! leaking it.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use authd_datasrc::Name;
use hmac::{Hmac, KeyInit, Mac};
use serde::Deserialize;

use crate::settings::{Context, Invalid, Kind, Schema, Section};

/// Longest MAC any algorithm here produces, bytes (HMAC-SHA512).
pub const MAX_MAC_LEN: usize = 64;

/// A TSIG algorithm (RFC 8945 §6, RFC 4635): an HMAC over one hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// `hmac-md5.sig-alg.reg.int.`: for old peers only (RFC 8945 §6: MUST
    /// implement, NOT RECOMMENDED to use).
    HmacMd5,
    /// `hmac-sha1.`
    HmacSha1,
    /// `hmac-sha224.`
    HmacSha224,
    /// `hmac-sha256.` (RFC 8945 §6: mandatory to implement, RECOMMENDED).
    HmacSha256,
    /// `hmac-sha384.`
    HmacSha384,
    /// `hmac-sha512.`
    HmacSha512,
}

impl Algorithm {
    /// Every algorithm, in the order they are listed in messages.
    pub const ALL: [Algorithm; 6] = [
        Algorithm::HmacSha256,
        Algorithm::HmacSha224,
        Algorithm::HmacSha384,
        Algorithm::HmacSha512,
        Algorithm::HmacSha1,
        Algorithm::HmacMd5,
    ];

    /// The configuration name: `hmac-sha256`, `hmac-md5`, …
    pub const fn as_str(self) -> &'static str {
        match self {
            Algorithm::HmacMd5 => "hmac-md5",
            Algorithm::HmacSha1 => "hmac-sha1",
            Algorithm::HmacSha224 => "hmac-sha224",
            Algorithm::HmacSha256 => "hmac-sha256",
            Algorithm::HmacSha384 => "hmac-sha384",
            Algorithm::HmacSha512 => "hmac-sha512",
        }
    }

    /// The algorithm name in TSIG records, in lower-case uncompressed wire
    /// form (RFC 8945 §6 table): `hmac-md5.sig-alg.reg.int.`, `hmac-sha256.`, …
    pub const fn wire_name(self) -> &'static [u8] {
        match self {
            Algorithm::HmacMd5 => b"\x08hmac-md5\x07sig-alg\x03reg\x03int\x00",
            Algorithm::HmacSha1 => b"\x09hmac-sha1\x00",
            Algorithm::HmacSha224 => b"\x0bhmac-sha224\x00",
            Algorithm::HmacSha256 => b"\x0bhmac-sha256\x00",
            Algorithm::HmacSha384 => b"\x0bhmac-sha384\x00",
            Algorithm::HmacSha512 => b"\x0bhmac-sha512\x00",
        }
    }

    /// The algorithm whose wire name is `wire` (uncompressed, any case).
    pub fn from_wire_name(wire: &[u8]) -> Option<Algorithm> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.wire_name().eq_ignore_ascii_case(wire))
    }

    /// The MAC length, bytes: the hash's output length.
    pub const fn mac_len(self) -> usize {
        match self {
            Algorithm::HmacMd5 => 16,
            Algorithm::HmacSha1 => 20,
            Algorithm::HmacSha224 => 28,
            Algorithm::HmacSha256 => 32,
            Algorithm::HmacSha384 => 48,
            Algorithm::HmacSha512 => 64,
        }
    }

    /// The shortest truncated MAC accepted, bytes: the larger of 10 and half
    /// the MAC length (RFC 8945 §5.2.2.1, case 3).
    pub const fn min_mac_len(self) -> usize {
        let half = self.mac_len().div_ceil(2);
        if half > 10 { half } else { 10 }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Algorithm {
    type Err = String;

    /// Parses a configuration name (`hmac-sha256`, any case) or a TSIG
    /// algorithm name (`hmac-md5.sig-alg.reg.int`, final dot optional).
    ///
    /// Errors: any other text, as a message listing the known names.
    fn from_str(s: &str) -> Result<Algorithm, String> {
        let t = s.trim().trim_end_matches('.');
        Algorithm::ALL
            .into_iter()
            .find(|a| {
                a.as_str().eq_ignore_ascii_case(t)
                    || (*a == Algorithm::HmacMd5
                        && t.eq_ignore_ascii_case("hmac-md5.sig-alg.reg.int"))
            })
            .ok_or_else(|| {
                let known: Vec<&str> = Algorithm::ALL.iter().map(|a| a.as_str()).collect();
                format!("unknown algorithm {s:?} (known: {})", known.join(", "))
            })
    }
}

/// A shared secret: raw bytes, decoded from base64. Its `Debug` shows the
/// length only, never the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// The secret whose base64 text (RFC 4648 §4, padding required; spaces
    /// and line breaks ignored, as in BIND's key files) is `text`.
    ///
    /// Errors: empty text or text that is not base64. The message never
    /// contains the text.
    pub fn from_base64(text: &str) -> Result<Secret, String> {
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if compact.is_empty() {
            return Err("the secret is empty".into());
        }
        data_encoding::BASE64
            .decode(compact.as_bytes())
            .map(Secret)
            .map_err(|e| format!("the secret is not base64 (at character {})", e.position))
    }

    /// `len` fresh random bytes from the operating system.
    ///
    /// Errors: the system's random source failed (its message).
    pub fn generate(len: usize) -> Result<Secret, String> {
        let mut bytes = vec![0u8; len];
        getrandom::fill(&mut bytes).map_err(|e| format!("no random bytes: {e}"))?;
        Ok(Secret(bytes))
    }

    /// The secret as base64 (for `authd keygen`).
    pub fn to_base64(&self) -> String {
        data_encoding::BASE64.encode(&self.0)
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are no bytes (never, for a parsed or generated secret).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret(<{} bytes, not shown>)", self.0.len())
    }
}

/// A named TSIG key (`[[key]]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    /// The key name (a domain name; compared ignoring case).
    pub name: Name,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// The shared secret.
    pub secret: Secret,
}

/// One `[[key]]` table as written; the section is the list of them. Its
/// `Debug` leaves the secret out.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKey {
    name: Option<String>,
    algorithm: Option<String>,
    secret: Option<String>,
    secret_file: Option<PathBuf>,
}

impl fmt::Debug for RawKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawKey")
            .field("name", &self.name)
            .field("algorithm", &self.algorithm)
            .field("secret", &self.secret.as_ref().map(|_| "<not shown>"))
            .field("secret_file", &self.secret_file)
            .finish()
    }
}

impl Section for Vec<RawKey> {
    type Value = Vec<Key>;

    const SCHEMA: Schema = &[(
        "key[]",
        &[
            ("name", Kind::Text),
            ("algorithm", Kind::Text),
            ("secret", Kind::Text),
            ("secret_file", Kind::Text),
        ],
    )];

    /// Each key's name (unique), algorithm and secret, read from `secret` or
    /// from the file `secret_file` (relative to the file's folder). No
    /// message contains a secret.
    fn check(self, cx: &Context<'_>) -> Result<Vec<Key>, Invalid> {
        let mut keys: Vec<Key> = Vec::with_capacity(self.len());
        for (i, k) in self.into_iter().enumerate() {
            let key = |field: &str| format!("key[{i}].{field}");
            let Some(text) = k.name else {
                return Err(Invalid::new(key("name"), "missing"));
            };
            let name = Name::parse(text.trim(), Some(&Name::root()))
                .map_err(|e| Invalid::new(key("name"), format!("bad key name {text:?}: {e}")))?;
            if let Some(j) = keys.iter().position(|k| k.name == name) {
                return Err(Invalid::new(
                    key("name"),
                    format!("key {name} is already defined by key[{j}]"),
                ));
            }
            let Some(algorithm) = k.algorithm else {
                return Err(Invalid::new(
                    key("algorithm"),
                    "missing (e.g. algorithm = \"hmac-sha256\")",
                ));
            };
            let algorithm: Algorithm = algorithm
                .parse()
                .map_err(|r| Invalid::new(key("algorithm"), r))?;
            let secret = match (k.secret, k.secret_file) {
                (Some(_), Some(_)) => {
                    return Err(Invalid::new(
                        key("secret"),
                        "give secret or secret_file, not both",
                    ));
                }
                (None, None) => {
                    return Err(Invalid::new(
                        key("secret"),
                        "missing (give secret = \"base64\" or secret_file = \"path\")",
                    ));
                }
                (Some(text), None) => {
                    Secret::from_base64(&text).map_err(|r| Invalid::new(key("secret"), r))?
                }
                (None, Some(file)) => {
                    let path = cx.resolve(file);
                    let text = std::fs::read_to_string(&path).map_err(|e| {
                        Invalid::new(
                            key("secret_file"),
                            format!(
                                "cannot read {}: {}",
                                path.display(),
                                crate::sys::io_reason(&e)
                            ),
                        )
                    })?;
                    Secret::from_base64(&text).map_err(|r| {
                        Invalid::new(key("secret_file"), format!("{}: {r}", path.display()))
                    })?
                }
            };
            keys.push(Key {
                name,
                algorithm,
                secret,
            });
        }
        Ok(keys)
    }
}

impl Key {
    /// A MAC computation keyed with this key.
    pub fn mac(&self) -> MacState {
        MacState::new(self.algorithm, &self.secret.0)
    }
}

/// An HMAC in progress under one of the [`Algorithm`]s.
#[derive(Clone)]
pub enum MacState {
    /// HMAC-MD5.
    Md5(Hmac<md5::Md5>),
    /// HMAC-SHA1.
    Sha1(Hmac<sha1::Sha1>),
    /// HMAC-SHA224.
    Sha224(Hmac<sha2::Sha224>),
    /// HMAC-SHA256.
    Sha256(Hmac<sha2::Sha256>),
    /// HMAC-SHA384.
    Sha384(Hmac<sha2::Sha384>),
    /// HMAC-SHA512.
    Sha512(Hmac<sha2::Sha512>),
}

/// Applies `$body` to the inner HMAC of a [`MacState`], whatever its hash.
macro_rules! each_mac {
    ($state:expr, $m:ident => $body:expr) => {
        match $state {
            MacState::Md5($m) => $body,
            MacState::Sha1($m) => $body,
            MacState::Sha224($m) => $body,
            MacState::Sha256($m) => $body,
            MacState::Sha384($m) => $body,
            MacState::Sha512($m) => $body,
        }
    };
}

impl MacState {
    fn new(algorithm: Algorithm, secret: &[u8]) -> MacState {
        // HMAC takes keys of any length (RFC 2104 §2), so these cannot fail.
        fn keyed<M: KeyInit>(secret: &[u8]) -> M {
            match M::new_from_slice(secret) {
                Ok(m) => m,
                Err(_) => unreachable!("HMAC accepts keys of every length"),
            }
        }
        match algorithm {
            Algorithm::HmacMd5 => MacState::Md5(keyed(secret)),
            Algorithm::HmacSha1 => MacState::Sha1(keyed(secret)),
            Algorithm::HmacSha224 => MacState::Sha224(keyed(secret)),
            Algorithm::HmacSha256 => MacState::Sha256(keyed(secret)),
            Algorithm::HmacSha384 => MacState::Sha384(keyed(secret)),
            Algorithm::HmacSha512 => MacState::Sha512(keyed(secret)),
        }
    }

    /// Feeds `data` into the MAC.
    pub fn update(&mut self, data: &[u8]) {
        each_mac!(self, m => Mac::update(m, data))
    }

    /// The full MAC, written into `out`; returns its length.
    pub fn finalize_into(self, out: &mut [u8; MAX_MAC_LEN]) -> usize {
        each_mac!(self, m => {
            let tag = m.finalize().into_bytes();
            out[..tag.len()].copy_from_slice(&tag);
            tag.len()
        })
    }

    /// True when `mac` equals the leftmost `mac.len()` bytes of the MAC
    /// (a full MAC, or one truncated per RFC 8945 §5.2.2.1), compared in
    /// constant time. An empty `mac` or one longer than the MAC is false.
    pub fn verify_truncated(self, mac: &[u8]) -> bool {
        each_mac!(self, m => m.verify_truncated_left(mac).is_ok())
    }
}

/// The keys a server knows, looked up by name (`[[key]]`, in file order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyRing {
    keys: Vec<Key>,
}

impl KeyRing {
    /// A ring holding `keys` (names should be unique; the first one wins).
    pub fn new(keys: Vec<Key>) -> KeyRing {
        KeyRing { keys }
    }

    /// The key named `name` (ignoring case).
    pub fn get(&self, name: &Name) -> Option<&Key> {
        self.keys.iter().find(|k| k.name == *name)
    }

    /// The key whose name is `wire` (uncompressed wire form, any case).
    pub fn get_wire(&self, wire: &[u8]) -> Option<&Key> {
        self.keys
            .iter()
            .find(|k| k.name.as_wire().eq_ignore_ascii_case(wire))
    }

    /// True when no key is configured.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The keys, in configuration order.
    pub fn keys(&self) -> &[Key] {
        &self.keys
    }
}

/// A `[[key]]` block for a fresh key `name` of `algorithm`, ready to paste
/// into the configuration file (`authd keygen`): the secret is as long as
/// the algorithm's MAC, as BIND's `tsig-keygen` makes it.
///
/// Errors: the system's random source failed.
pub fn key_block(name: &Name, algorithm: Algorithm) -> Result<String, String> {
    let secret = Secret::generate(algorithm.mac_len())?;
    Ok(format!(
        "[[key]]\nname = \"{name}\"\nalgorithm = \"{algorithm}\"\nsecret = \"{}\"\n",
        secret.to_base64()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 §4.2, test case 1: HMAC-SHA224/256/384/512 of "Hi There"
    /// under twenty 0x0b bytes; RFC 2202 §2/§3 for MD5 and SHA-1.
    #[test]
    fn known_answers() {
        let hex = |s: &str| data_encoding::HEXLOWER.decode(s.as_bytes()).expect("hex");
        let cases = [
            (Algorithm::HmacMd5, 16, "9294727a3638bb1c13f48ef8158bfc9d"),
            (
                Algorithm::HmacSha1,
                20,
                "b617318655057264e28bc0b6fb378c8ef146be00",
            ),
            (
                Algorithm::HmacSha224,
                20,
                "896fb1128abbdf196832107cd49df33f47b4b1169912ba4f53684b22",
            ),
            (
                Algorithm::HmacSha256,
                20,
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            ),
            (
                Algorithm::HmacSha384,
                20,
                "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59cfaea9ea9076ede7f4af152e8b2fa9cb6",
            ),
            (
                Algorithm::HmacSha512,
                20,
                "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cdedaa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854",
            ),
        ];
        for (algorithm, key_len, want) in cases {
            let key = Key {
                name: Name::root(),
                algorithm,
                secret: Secret(vec![0x0b; key_len]),
            };
            let mut m = key.mac();
            m.update(b"Hi ");
            m.update(b"There");
            let mut out = [0u8; MAX_MAC_LEN];
            let n = m.clone().finalize_into(&mut out);
            assert_eq!(n, algorithm.mac_len(), "{algorithm}");
            assert_eq!(out[..n], hex(want)[..], "{algorithm}");
            assert!(m.clone().verify_truncated(&out[..n]));
            assert!(m.clone().verify_truncated(&out[..10]), "truncated");
            let mut wrong = out;
            wrong[0] ^= 1;
            assert!(!m.clone().verify_truncated(&wrong[..n]));
            assert!(!m.clone().verify_truncated(&[]));
        }
    }

    #[test]
    fn algorithm_names() {
        assert_eq!("HMAC-SHA256".parse(), Ok(Algorithm::HmacSha256));
        assert_eq!("hmac-md5".parse(), Ok(Algorithm::HmacMd5));
        assert_eq!("hmac-md5.sig-alg.reg.int.".parse(), Ok(Algorithm::HmacMd5));
        assert_eq!(
            "hmac-sha3".parse::<Algorithm>(),
            Err("unknown algorithm \"hmac-sha3\" (known: hmac-sha256, hmac-sha224, hmac-sha384, hmac-sha512, hmac-sha1, hmac-md5)".into())
        );
        assert_eq!(
            Algorithm::from_wire_name(b"\x0bHMAC-SHA256\x00"),
            Some(Algorithm::HmacSha256)
        );
        assert_eq!(Algorithm::from_wire_name(b"\x0bhmac-sha999\x00"), None);
        // RFC 8945 §5.2.2.1: max(10, half the output).
        assert_eq!(Algorithm::HmacMd5.min_mac_len(), 10);
        assert_eq!(Algorithm::HmacSha1.min_mac_len(), 10);
        assert_eq!(Algorithm::HmacSha224.min_mac_len(), 14);
        assert_eq!(Algorithm::HmacSha256.min_mac_len(), 16);
        assert_eq!(Algorithm::HmacSha512.min_mac_len(), 32);
    }

    #[test]
    fn secrets_never_print() {
        let s = Secret::from_base64("c2VjcmV0IQ==").expect("base64");
        assert_eq!(s.len(), 7);
        assert_eq!(format!("{s:?}"), "Secret(<7 bytes, not shown>)");
        let e = Secret::from_base64("c2VjcmV0I*==").expect_err("bad");
        assert_eq!(e, "the secret is not base64 (at character 9)");
        assert!(!e.contains("c2Vj"));
        assert_eq!(
            Secret::from_base64("  \n"),
            Err("the secret is empty".into())
        );
        // Whitespace inside (a secret wrapped over lines) is ignored.
        assert_eq!(Secret::from_base64("c2Vj cmV0\nIQ=="), Ok(s));
    }

    /// A key block is one TOML `[[key]]` table whose secret decodes to the
    /// MAC length; two blocks never share a secret.
    #[test]
    fn key_blocks_parse_back() {
        let name: Name = "transfer-key.".parse().expect("name");
        let secret_of = |block: &str| -> String {
            let table: toml::Table = block.parse().expect("TOML");
            let keys = table["key"].as_array().expect("[[key]]");
            assert_eq!(keys.len(), 1);
            assert_eq!(keys[0]["name"].as_str(), Some("transfer-key."));
            assert_eq!(keys[0]["algorithm"].as_str(), Some("hmac-sha512"));
            keys[0]["secret"].as_str().expect("secret").to_string()
        };
        let first = secret_of(&key_block(&name, Algorithm::HmacSha512).expect("keygen"));
        let second = secret_of(&key_block(&name, Algorithm::HmacSha512).expect("keygen"));
        assert_eq!(Secret::from_base64(&first).map(|s| s.len()), Ok(64));
        assert_ne!(first, second, "fresh secrets");
    }
}
