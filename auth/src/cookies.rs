//! DNS cookies (RFC 7873) with interoperable server cookies (RFC 9018).
//!
//! A server cookie is 16 bytes: version 1, three reserved zero bytes, a
//! timestamp (seconds since the Unix epoch, serial-number arithmetic) and the
//! first 8 bytes of SipHash-2-4 over client cookie | version | reserved |
//! timestamp | client address, keyed with a 16-byte secret (RFC 9018 §4.2).
//! Servers sharing the secret (an anycast set) accept each other's cookies.
//!
//! A server cookie is valid when its hash matches and its timestamp is at
//! most one hour old and at most five minutes ahead (§4.3). A valid cookie
//! less than half an hour old is echoed; otherwise a new one is made.
//!
//! Secrets: a configured secret (`[cookies] secret`, 32 hex digits), whose
//! predecessor stays accepted for [`PREVIOUS_SECRET_GRACE`] after a reload
//! changes it; or, when none is configured, secrets derived from a random key
//! drawn at start, a new one every [`RANDOM_SECRET_LIFETIME`] (as Knot DNS
//! rotates its own): a cookie is checked with the secret of the period its
//! timestamp falls in, so the previous secret is accepted for as long as its
//! cookies are.

use std::fmt;
use std::hash::Hasher;
use std::net::IpAddr;

use serde::Deserialize;
use siphasher::sip::SipHasher24;

use crate::metrics::{CookieSeen, Seen};
use crate::settings::{Context, Invalid, Kind, Schema, Section};
use crate::wire::{self, Cookie, Request};

/// Length of a server cookie made here, bytes.
pub const SERVER_COOKIE_LEN: usize = 16;

/// The data of a reply's COOKIE option: the client cookie, then the server
/// cookie (RFC 7873 §4).
pub type ReplyCookie = [u8; 8 + SERVER_COOKIE_LEN];

/// How long a server cookie stays valid, seconds (RFC 9018 §4.3).
pub const MAX_AGE: u32 = 3600;

/// How far ahead of our clock a server cookie may be, seconds (RFC 9018 §4.3).
pub const MAX_AHEAD: u32 = 300;

/// Age from which a valid server cookie is replaced rather than echoed, seconds.
pub const RENEW_AFTER: u32 = 1800;

/// How long a replaced configured secret is still accepted, seconds: as long
/// as the cookies it made stay valid.
pub const PREVIOUS_SECRET_GRACE: u64 = MAX_AGE as u64;

/// How long one random secret is used, seconds (26 hours, Knot DNS's default).
pub const RANDOM_SECRET_LIFETIME: u32 = 26 * 3600;

/// DNS cookies (`[cookies]`): on by default, as in BIND 9.
#[derive(Clone, PartialEq, Eq)]
pub struct CookiesConfig {
    /// Whether cookies are answered and checked.
    pub enabled: bool,
    /// The server secret; `None`: random at start.
    pub secret: Option<[u8; 16]>,
}

impl Default for CookiesConfig {
    fn default() -> Self {
        CookiesConfig {
            enabled: true,
            secret: None,
        }
    }
}

impl fmt::Debug for CookiesConfig {
    /// Never shows the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CookiesConfig")
            .field("enabled", &self.enabled)
            .field("secret", &self.secret.map(|_| "(set)"))
            .finish()
    }
}

/// `[cookies]` as written. Its `Debug` never shows the secret.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCookies {
    enabled: Option<bool>,
    secret: Option<String>,
}

impl fmt::Debug for RawCookies {
    /// Never shows the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawCookies")
            .field("enabled", &self.enabled)
            .field("secret", &self.secret.as_ref().map(|_| "(set)"))
            .finish()
    }
}

impl Section for RawCookies {
    type Value = CookiesConfig;

    const SCHEMA: Schema = &[(
        "cookies",
        &[("enabled", Kind::Bool), ("secret", Kind::Text)],
    )];

    /// The secret never appears in a message.
    fn check(self, _: &Context<'_>) -> Result<CookiesConfig, Invalid> {
        let secret = match self.secret.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => Some(parse_secret(text).map_err(|r| Invalid::new("cookies.secret", r))?),
        };
        Ok(CookiesConfig {
            enabled: self.enabled.unwrap_or(CookiesConfig::default().enabled),
            secret,
        })
    }
}

/// Where server secrets come from.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Source {
    /// `[cookies] secret`, and the one it replaced with the Unix time (seconds)
    /// until which that one is still accepted.
    Configured {
        secret: [u8; 16],
        previous: Option<([u8; 16], u64)>,
    },
    /// Derived per [`RANDOM_SECRET_LIFETIME`] period from a key drawn at start.
    Random { key: [u8; 16] },
}

/// The server side of DNS cookies: checks the server cookie a request
/// brings back and makes the one its reply carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cookies {
    source: Source,
}

/// What [`Cookies::answer`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checked {
    /// The request brought a server cookie made here, still valid.
    pub valid: bool,
    /// The COOKIE option data for the reply.
    pub reply: ReplyCookie,
}

impl Checked {
    /// The cookie guard, after the table: appends the reply's COOKIE option
    /// to the OPT record ending the reply in `out` (nothing when it has none).
    #[inline]
    pub fn append_to(&self, out: &mut Vec<u8>) {
        let cookie = crate::edns::Appended {
            cookie: Some(&self.reply),
            ..Default::default()
        };
        crate::edns::append(out, &cookie, wire::MAX_TCP_MESSAGE);
    }
}

/// Why cookie secrets could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CookieError {
    /// The operating system gave no random bytes.
    #[error("no random bytes for the cookie secret: {0}")]
    Random(String),
}

impl Cookies {
    /// Cookies with the configured 16-byte `secret`.
    pub fn with_secret(secret: [u8; 16]) -> Cookies {
        Cookies {
            source: Source::Configured {
                secret,
                previous: None,
            },
        }
    }

    /// Cookies with secrets derived from a key drawn from the operating
    /// system's random source, a new secret every [`RANDOM_SECRET_LIFETIME`].
    ///
    /// Errors: [`CookieError::Random`] when no random bytes can be had.
    pub fn random() -> Result<Cookies, CookieError> {
        let mut key = [0u8; 16];
        getrandom::fill(&mut key).map_err(|e| CookieError::Random(e.to_string()))?;
        Ok(Cookies {
            source: Source::Random { key },
        })
    }

    /// True when the secrets come from a random key drawn at start (no
    /// `[cookies] secret`).
    pub fn is_random(&self) -> bool {
        matches!(self.source, Source::Random { .. })
    }

    /// The cookies a reload builds from `new`, given the ones in force
    /// (`self`) at Unix time `now` (seconds): a changed configured secret
    /// keeps the old one accepted for [`PREVIOUS_SECRET_GRACE`]; random
    /// secrets stay as they are (their key is not configuration).
    pub fn reloaded(&self, new: Cookies, now: u64) -> Cookies {
        match (&self.source, new.source) {
            (Source::Random { .. }, Source::Random { .. }) => self.clone(),
            (
                Source::Configured {
                    secret: old,
                    previous,
                },
                Source::Configured { secret, .. },
            ) => {
                let previous = if *old != secret {
                    Some((*old, now + PREVIOUS_SECRET_GRACE))
                } else {
                    *previous
                };
                Cookies {
                    source: Source::Configured { secret, previous },
                }
            }
            (_, source) => Cookies { source },
        }
    }

    /// The cookie guard, before the table (RFC 7873 §5.2: the server cookie
    /// is checked, and a new one made, whatever the query is): checks the
    /// COOKIE option of request `req` from `client` at Unix time `now`
    /// (seconds), noting what it was in `seen`. `None` when the request has
    /// no COOKIE option.
    #[inline]
    pub fn check(
        &self,
        req: &Request<'_>,
        client: IpAddr,
        now: u64,
        seen: &mut Seen,
    ) -> Option<Checked> {
        let checked = req
            .edns
            .and_then(|e| e.cookie)
            .map(|cookie| self.answer(&cookie, client, now))?;
        seen.cookie = Some(if checked.valid {
            CookieSeen::Valid
        } else {
            CookieSeen::New
        });
        Some(checked)
    }

    /// Checks `cookie` from `client` at Unix time `now` (seconds) and makes
    /// the COOKIE option data of the reply (RFC 7873 §5.2, RFC 9018 §4.3).
    pub fn answer(&self, cookie: &Cookie<'_>, client: IpAddr, now: u64) -> Checked {
        let ts_now = now as u32;
        let mut reply = [0u8; 8 + SERVER_COOKIE_LEN];
        reply[..8].copy_from_slice(&cookie.client);
        if let Some(secret) = self.valid_secret(cookie, client, now) {
            let ts = timestamp(cookie.server);
            // Echo a fresh one made with the secret in use now.
            if ts_now.wrapping_sub(ts) < RENEW_AFTER && secret == self.secret_at(ts_now) {
                reply[8..].copy_from_slice(cookie.server);
                return Checked { valid: true, reply };
            }
            reply[8..].copy_from_slice(&self.make(&cookie.client, ts_now, client));
            return Checked { valid: true, reply };
        }
        reply[8..].copy_from_slice(&self.make(&cookie.client, ts_now, client));
        Checked {
            valid: false,
            reply,
        }
    }

    /// The secret `cookie`'s server cookie was made with, when it is a valid
    /// version-1 cookie made here.
    fn valid_secret(&self, cookie: &Cookie<'_>, client: IpAddr, now: u64) -> Option<[u8; 16]> {
        let server = cookie.server;
        if server.len() != SERVER_COOKIE_LEN || server[0] != 1 {
            return None;
        }
        let ts = timestamp(server);
        let age = (now as u32).wrapping_sub(ts);
        let ahead = ts.wrapping_sub(now as u32);
        if age > MAX_AGE && ahead > MAX_AHEAD {
            return None;
        }
        let header: [u8; 8] = server[..8].try_into().ok()?;
        let matches = |secret: &[u8; 16]| {
            constant_time_eq(&hash(secret, &cookie.client, &header, client), &server[8..])
        };
        let mut candidates = [None, None];
        match &self.source {
            Source::Configured { secret, previous } => {
                candidates[0] = Some(*secret);
                candidates[1] = previous.filter(|(_, until)| now <= *until).map(|(s, _)| s);
            }
            Source::Random { .. } => candidates[0] = Some(self.secret_at(ts)),
        }
        candidates.into_iter().flatten().find(|s| matches(s))
    }

    /// The secret that makes cookies stamped `ts`.
    fn secret_at(&self, ts: u32) -> [u8; 16] {
        match &self.source {
            Source::Configured { secret, .. } => *secret,
            Source::Random { key } => {
                let period = ts / RANDOM_SECRET_LIFETIME;
                // Derived once per thread and period, not per query.
                thread_local! {
                    static DERIVED: std::cell::Cell<([u8; 16], u32, [u8; 16])> =
                        const { std::cell::Cell::new(([0; 16], u32::MAX, [0; 16])) };
                }
                let (for_key, for_period, secret) = DERIVED.get();
                if for_key == *key && for_period == period {
                    return secret;
                }
                let secret = derive(key, period);
                DERIVED.set((*key, period, secret));
                secret
            }
        }
    }

    /// A new server cookie for `client_cookie` from `client`, stamped `ts`.
    fn make(&self, client_cookie: &[u8; 8], ts: u32, client: IpAddr) -> [u8; SERVER_COOKIE_LEN] {
        let mut header = [1u8, 0, 0, 0, 0, 0, 0, 0];
        header[4..].copy_from_slice(&ts.to_be_bytes());
        let mut cookie = [0u8; SERVER_COOKIE_LEN];
        cookie[..8].copy_from_slice(&header);
        cookie[8..].copy_from_slice(&hash(&self.secret_at(ts), client_cookie, &header, client));
        cookie
    }
}

/// The secret of `period` derived from a random `key`: two SipHash-2-4
/// outputs of (period, half).
fn derive(key: &[u8; 16], period: u32) -> [u8; 16] {
    let mut secret = [0u8; 16];
    for (half, chunk) in secret.chunks_exact_mut(8).enumerate() {
        let mut h = SipHasher24::new_with_key(key);
        h.write_u32(period);
        h.write_u8(half as u8);
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    secret
}

/// The timestamp of a server cookie (bytes 4–7).
fn timestamp(server: &[u8]) -> u32 {
    match server.get(4..8) {
        Some(b) => u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        None => 0,
    }
}

/// The hash of a version-1 server cookie (RFC 9018 §4.2): SipHash-2-4 over
/// client cookie | version | reserved | timestamp | client address.
fn hash(secret: &[u8; 16], client_cookie: &[u8; 8], header: &[u8; 8], client: IpAddr) -> [u8; 8] {
    let mut h = SipHasher24::new_with_key(secret);
    h.write(client_cookie);
    h.write(header);
    match client {
        IpAddr::V4(a) => h.write(&a.octets()),
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => h.write(&v4.octets()),
            None => h.write(&a.octets()),
        },
    }
    h.finish().to_le_bytes()
}

/// Compares without an early exit, so the time taken tells nothing about
/// where a forged hash first differs.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Parses a secret written as 32 hexadecimal digits.
///
/// Errors: a message saying what the text should be (never echoing it: it is
/// a secret).
pub fn parse_secret(text: &str) -> Result<[u8; 16], String> {
    let text = text.trim();
    let bad =
        || "must be 32 hexadecimal digits (16 bytes), e.g. from `openssl rand -hex 16`".to_string();
    if text.len() != 32 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
            .map_err(|_| bad())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    fn secret(s: &str) -> [u8; 16] {
        parse_secret(s).expect("secret")
    }

    fn cookie(bytes: &[u8]) -> Cookie<'_> {
        Cookie {
            client: bytes[..8].try_into().expect("client"),
            server: &bytes[8..],
        }
    }

    const CLIENT_1: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 100));
    const CLIENT_2: IpAddr = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 203));
    const CLIENT_6: IpAddr = IpAddr::V6(Ipv6Addr::new(
        0x2001, 0xdb8, 0x220, 0x1, 0x59de, 0xd0f4, 0x8769, 0x82b8,
    ));

    /// RFC 9018 Appendix A.1–A.3: a new client, a renewal, another client
    /// whose old cookie came from another implementation.
    #[test]
    fn rfc9018_appendix_a_ipv4() {
        let c = Cookies::with_secret(secret("e5e973e5a6b2a43f48e7dc849e37bfcf"));
        // A.1: only a client cookie.
        let req = hex("2464c4abcf10c957");
        let got = c.answer(&cookie(&req), CLIENT_1, 1_559_731_985);
        assert!(!got.valid);
        assert_eq!(
            got.reply.to_vec(),
            hex("2464c4abcf10c957010000005cf79f111f8130c3eee29480")
        );
        // A.2: that cookie 40 minutes later: valid, renewed (older than 30 min).
        let req = hex("2464c4abcf10c957010000005cf79f111f8130c3eee29480");
        let got = c.answer(&cookie(&req), CLIENT_1, 1_559_734_385);
        assert!(got.valid);
        assert_eq!(
            got.reply.to_vec(),
            hex("2464c4abcf10c957010000005cf7a871d4a564a1442aca77")
        );
        // A.3: a cookie this server did not make: a new one.
        let req = hex("fc93fc62807ddb8601abcdef5cf78f71a314227b6679ebf5");
        let got = c.answer(&cookie(&req), CLIENT_2, 1_559_734_700);
        assert!(!got.valid);
        assert_eq!(
            got.reply.to_vec(),
            hex("fc93fc62807ddb86010000005cf7a9acf73a7810aca2381e")
        );
    }

    /// RFC 9018 Appendix A.4: IPv6, and a secret rolled over by a reload:
    /// the old one is still accepted and the new cookie uses the new one.
    #[test]
    fn rfc9018_appendix_a_ipv6_and_rollover() {
        let old = Cookies::with_secret(secret("dd3bdf9344b678b185a6f5cb60fca715"));
        let new = old.reloaded(
            Cookies::with_secret(secret("445536bcd2513298075a5d379663c962")),
            1_559_741_900,
        );
        let req = hex("22681ab97d52c298010000005cf7c57926556bd0934c72f8");
        assert!(old.answer(&cookie(&req), CLIENT_6, 1_559_741_817).valid);
        let got = new.answer(&cookie(&req), CLIENT_6, 1_559_741_961);
        assert!(got.valid, "the previous secret is still accepted");
        assert_eq!(
            got.reply.to_vec(),
            hex("22681ab97d52c298010000005cf7c609a6bb79d16625507a")
        );
        // An hour after the change the previous secret is no longer accepted.
        let later = 1_559_741_900 + PREVIOUS_SECRET_GRACE + 1;
        let req = hex("22681ab97d52c298010000005cf7c57926556bd0934c72f8");
        assert!(!new.answer(&cookie(&req), CLIENT_6, later).valid);
    }

    /// A valid cookie under half an hour old is echoed; one from another
    /// address, a tampered one, one over an hour old or over five minutes
    /// ahead is not valid.
    #[test]
    fn validity_rules() {
        let c = Cookies::with_secret(secret("000102030405060708090a0b0c0d0e0f"));
        let t = 1_700_000_000;
        let first = c
            .answer(&cookie(&hex("0102030405060708")), CLIENT_1, t)
            .reply;
        let again = c.answer(&cookie(&first), CLIENT_1, t + 600);
        assert!(again.valid);
        assert_eq!(again.reply, first, "echoed while fresh");
        assert!(!c.answer(&cookie(&first), CLIENT_2, t + 1).valid);
        let mut tampered = first;
        tampered[23] ^= 1;
        assert!(!c.answer(&cookie(&tampered), CLIENT_1, t + 1).valid);
        assert!(c.answer(&cookie(&first), CLIENT_1, t + 3600).valid);
        assert!(!c.answer(&cookie(&first), CLIENT_1, t + 3601).valid);
        assert!(c.answer(&cookie(&first), CLIENT_1, t - 300).valid);
        assert!(!c.answer(&cookie(&first), CLIENT_1, t - 301).valid);
    }

    /// Random secrets: a cookie made just before the secret changes stays
    /// valid after it (checked with the secret of its own period).
    #[test]
    fn random_secrets_rotate_and_keep_cookies_valid() {
        let c = Cookies::random().expect("random");
        let change = 2 * RANDOM_SECRET_LIFETIME as u64;
        let made = c
            .answer(&cookie(&hex("0102030405060708")), CLIENT_1, change - 10)
            .reply;
        let after = c.answer(&cookie(&made), CLIENT_1, change + 100);
        assert!(after.valid);
        assert_ne!(after.reply, made, "renewed with the new period's secret");
        assert!(
            c.answer(&cookie(&after.reply), CLIENT_1, change + 200)
                .valid
        );
        assert_ne!(c.secret_at(change as u32 - 1), c.secret_at(change as u32));
        // A reload keeps the random key.
        assert_eq!(c.reloaded(Cookies::random().expect("random"), change), c);
        assert!(c.is_random());
        // A configured secret taken out: a random one, the old not accepted.
        let configured = Cookies::with_secret(secret("000102030405060708090a0b0c0d0e0f"));
        let made = configured
            .answer(&cookie(&hex("0102030405060708")), CLIENT_1, change)
            .reply;
        let after = configured.reloaded(Cookies::random().expect("random"), change);
        assert!(after.is_random());
        assert!(!after.answer(&cookie(&made), CLIENT_1, change + 1).valid);
    }

    #[test]
    fn signs_are_not_hex_digits() {
        assert!(parse_secret("+1+2+3+4+5+6+7+8+9+a+b+c+d+e+f+f").is_err());
    }

    #[test]
    fn secrets_are_parsed_without_echoing_them() {
        assert_eq!(secret("000102030405060708090A0B0C0D0E0F")[15], 15);
        for bad in [
            "",
            "00",
            "zz0102030405060708090a0b0c0d0e0f",
            "000102030405060708090a0b0c0d0e0f00",
        ] {
            let e = parse_secret(bad).expect_err(bad);
            assert!(!bad.is_empty() && !e.contains(bad) || bad.is_empty(), "{e}");
        }
    }
}
