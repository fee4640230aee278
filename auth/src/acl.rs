//! Access-control lists: which clients may do something (today, who may
//! transfer zones: `[transfer] allow` and its per-zone overrides; later
//! NOTIFY in, UPDATE and control take the same entries).
//!
//! A leaf module (std and `authd-datasrc`'s [`Name`] only), so the
//! configuration can parse entries without depending on the protocol code that
//! checks them. An [`AclEntry`] is written as
//!
//! | entry | matches a request |
//! |---|---|
//! | `"192.0.2.0/24"`, `"::1"` | from an address in the block, signed or not |
//! | `"key NAME"` | from anywhere, signed with TSIG key `NAME` (RFC 8945) |
//! | `"192.0.2.0/24 key NAME"` | from the block *and* signed with `NAME` |
//! | any of these, then `tls`; or `"tls"` alone | as without `tls`, and received over TLS (`[tls]`, RFC 9103 §9.3) |
//!
//! An [`Acl`] allows a request when any of its entries matches; an empty
//! list allows nobody. The key a request was signed with is the one the
//! dispatcher verified: a request whose TSIG fails verification is answered
//! before any ACL is consulted.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use authd_datasrc::Name;

/// An address block in CIDR notation (`192.0.2.0/24`, `2001:db8::/32`), or one
/// address (a /32 or /128).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    /// The network address (host bits cleared).
    pub addr: IpAddr,
    /// Prefix length in bits (0..=32 for IPv4, 0..=128 for IPv6).
    pub prefix: u8,
}

impl FromStr for Cidr {
    type Err = String;

    /// Parses `ADDR` or `ADDR/LEN`.
    ///
    /// Errors: a text that is not an IP address, or a prefix longer than the
    /// address, as a message naming the text.
    fn from_str(s: &str) -> Result<Cidr, String> {
        let s = s.trim();
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let bad =
            || format!("{s:?} is not an address or ADDR/LEN (e.g. 127.0.0.1, 10.0.0.0/8, ::1)");
        let addr: IpAddr = a.parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            Some(p) => p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(bad)?,
            None => max,
        };
        Ok(Cidr {
            addr: mask(addr, prefix),
            prefix,
        })
    }
}

/// `ip`, or the IPv4 address an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) carries.
fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn mask(addr: IpAddr, prefix: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

impl Cidr {
    /// The block of `prefix` bits around `addr` (longer prefixes are cut to
    /// the address length).
    pub fn from_prefix(addr: IpAddr, prefix: u8) -> Cidr {
        let prefix = prefix.min(if addr.is_ipv4() { 32 } else { 128 });
        Cidr {
            addr: mask(addr, prefix),
            prefix,
        }
    }

    /// The block a client is accounted in (rate limiting, TCP connection
    /// limits): `ipv4_prefix` bits of an IPv4 address, `ipv6_prefix` of an
    /// IPv6 one. An IPv4-mapped IPv6 address counts as the IPv4 address.
    pub fn client_block(ip: IpAddr, ipv4_prefix: u8, ipv6_prefix: u8) -> Cidr {
        let ip = unmapped(ip);
        let bits = if ip.is_ipv4() {
            ipv4_prefix
        } else {
            ipv6_prefix
        };
        Cidr::from_prefix(ip, bits)
    }

    /// True when `ip` is inside the block. An IPv4-mapped IPv6 address
    /// (`::ffff:192.0.2.1`) is taken as the IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = unmapped(ip);
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.prefix) == self.addr
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// One ACL entry: an address block, a TSIG key, or both (both must hold).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclEntry {
    /// The client address must be in this block (`None`: any address).
    pub addr: Option<Cidr>,
    /// The request must be signed with this key (`None`: signed or not).
    pub key: Option<Name>,
    /// The request must have come over TLS (an entry ending in `tls`).
    pub tls: bool,
}

impl AclEntry {
    /// True when a request from `ip`, signed with `key` (`None`: unsigned),
    /// received over TLS when `tls`, matches this entry.
    pub fn matches(&self, ip: IpAddr, key: Option<&Name>, tls: bool) -> bool {
        self.addr.is_none_or(|c| c.contains(ip))
            && self.key.as_ref().is_none_or(|want| key == Some(want))
            && (tls || !self.tls)
    }
}

impl FromStr for AclEntry {
    type Err = String;

    /// Parses `ADDR[/LEN]`, `key NAME` or `ADDR[/LEN] key NAME`, each
    /// optionally followed by `tls`, or `tls` alone (words separated by
    /// spaces; `NAME` with or without its final dot).
    ///
    /// Errors: any other shape, a bad address block or a bad key name, as a
    /// message naming the text.
    fn from_str(s: &str) -> Result<AclEntry, String> {
        let mut words: Vec<&str> = s.split_whitespace().collect();
        let tls = words.last().is_some_and(|w| w.eq_ignore_ascii_case("tls"));
        if tls {
            words.pop();
            if words.is_empty() {
                return Ok(AclEntry {
                    addr: None,
                    key: None,
                    tls,
                });
            }
        }
        let key = |name: &str| {
            Name::parse(name, Some(&Name::root()))
                .map_err(|e| format!("{s:?}: bad key name {name:?}: {e}"))
        };
        match words[..] {
            [addr] if !addr.eq_ignore_ascii_case("key") => Ok(AclEntry {
                addr: Some(addr.parse()?),
                key: None,
                tls,
            }),
            [k, name] if k.eq_ignore_ascii_case("key") => Ok(AclEntry {
                addr: None,
                key: Some(key(name)?),
                tls,
            }),
            [addr, k, name] if k.eq_ignore_ascii_case("key") => Ok(AclEntry {
                addr: Some(addr.parse()?),
                key: Some(key(name)?),
                tls,
            }),
            _ => Err(format!(
                "{s:?} is not an ACL entry (ADDR/LEN, \"key NAME\" or \"ADDR/LEN key NAME\", \
                 each optionally followed by \"tls\", or \"tls\"; e.g. \"192.0.2.0/24\", \
                 \"key transfer-key.\", \"10.0.0.0/8 key transfer-key. tls\")"
            )),
        }
    }
}

impl fmt::Display for AclEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.addr, &self.key) {
            (Some(a), Some(k)) => write!(f, "{a} key {k}")?,
            (Some(a), None) => write!(f, "{a}")?,
            (None, Some(k)) => write!(f, "key {k}")?,
            (None, None) if self.tls => return f.write_str("tls"),
            (None, None) => f.write_str("any")?,
        }
        if self.tls {
            f.write_str(" tls")?;
        }
        Ok(())
    }
}

/// An access-control list: a request is allowed when any entry matches
/// ([`AclEntry::matches`]); an empty list allows nobody.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acl {
    entries: Vec<AclEntry>,
}

impl Acl {
    /// A list of `entries`, checked in order.
    pub fn new(entries: Vec<AclEntry>) -> Acl {
        Acl { entries }
    }

    /// True when a request from `ip` signed with `key` (`None`: unsigned),
    /// received over TLS when `tls`, is allowed.
    pub fn allows(&self, ip: IpAddr, key: Option<&Name>, tls: bool) -> bool {
        self.entries.iter().any(|e| e.matches(ip, key, tls))
    }

    /// The entries, in order.
    pub fn entries(&self) -> &[AclEntry] {
        &self.entries
    }

    /// True when the list has no entry (nobody is allowed).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

impl FromIterator<AclEntry> for Acl {
    fn from_iter<I: IntoIterator<Item = AclEntry>>(iter: I) -> Acl {
        Acl::new(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    /// A client's block: its prefix for its family, an IPv4-mapped IPv6
    /// address taken as the IPv4 one (rate-limiting logs named `::/24`).
    #[test]
    fn client_blocks_unmap_ipv4_mapped_addresses() {
        let block =
            |ip: &str| super::Cidr::client_block(ip.parse().expect("ip"), 24, 56).to_string();
        assert_eq!(block("192.0.2.77"), "192.0.2.0/24");
        assert_eq!(block("::ffff:192.0.2.77"), "192.0.2.0/24");
        assert_eq!(block("2001:db8:1:2ff:3::4"), "2001:db8:1:200::/56");
    }

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    /// Each form of entry, with and without the key, from inside and outside
    /// the block.
    #[test]
    fn every_entry_form() {
        let tk: Name = "transfer-key.".parse().expect("name");
        let other: Name = "other.".parse().expect("name");
        let addr: AclEntry = "192.0.2.0/24".parse().expect("entry");
        let key: AclEntry = "key Transfer-Key".parse().expect("entry");
        let both: AclEntry = "192.0.2.0/24 key transfer-key.".parse().expect("entry");
        assert_eq!(key.key, Some(tk.clone()), "final dot added, case ignored");
        let cases = [
            // (entry, ip, key, matches)
            (&addr, "192.0.2.9", None, true),
            (&addr, "192.0.2.9", Some(&tk), true),
            (&addr, "198.51.100.1", Some(&tk), false),
            (&key, "198.51.100.1", Some(&tk), true),
            (&key, "198.51.100.1", None, false),
            (&key, "198.51.100.1", Some(&other), false),
            (&both, "192.0.2.9", Some(&tk), true),
            (&both, "192.0.2.9", None, false),
            (&both, "192.0.2.9", Some(&other), false),
            (&both, "198.51.100.1", Some(&tk), false),
        ];
        for (entry, from, signed, want) in cases {
            assert_eq!(
                entry.matches(ip(from), signed, false),
                want,
                "{entry} from {from} signed {signed:?}"
            );
        }
        assert_eq!(both.to_string(), "192.0.2.0/24 key transfer-key.");
        assert_eq!(key.to_string(), "key Transfer-Key.");
        let acl: Acl = [addr, key].into_iter().collect();
        assert!(acl.allows(ip("198.51.100.1"), Some(&tk), false));
        assert!(!acl.allows(ip("198.51.100.1"), None, false));
        assert!(!Acl::default().allows(ip("127.0.0.1"), None, false));
        assert!(!Acl::default().allows(ip("127.0.0.1"), None, true));
    }

    /// An entry ending in `tls` matches only what came over TLS, and
    /// otherwise as without it; an entry without `tls` matches both.
    #[test]
    fn tls_entries_require_tls() {
        let tk: Name = "transfer-key.".parse().expect("name");
        let any_tls: AclEntry = "tls".parse().expect("entry");
        let block_tls: AclEntry = "192.0.2.0/24 TLS".parse().expect("entry");
        let key_tls: AclEntry = "key transfer-key tls".parse().expect("entry");
        let all_tls: AclEntry = "192.0.2.0/24 key transfer-key. tls".parse().expect("entry");
        let plain: AclEntry = "192.0.2.0/24".parse().expect("entry");
        assert_eq!(
            (any_tls.addr, &any_tls.key, any_tls.tls),
            (None, &None, true)
        );
        let cases = [
            // (entry, ip, key, over TLS, matches)
            (&any_tls, "198.51.100.1", None, true, true),
            (&any_tls, "198.51.100.1", Some(&tk), false, false),
            (&block_tls, "192.0.2.9", None, true, true),
            (&block_tls, "192.0.2.9", None, false, false),
            (&block_tls, "198.51.100.1", None, true, false),
            (&key_tls, "198.51.100.1", Some(&tk), true, true),
            (&key_tls, "198.51.100.1", None, true, false),
            (&key_tls, "198.51.100.1", Some(&tk), false, false),
            (&all_tls, "192.0.2.9", Some(&tk), true, true),
            (&all_tls, "192.0.2.9", Some(&tk), false, false),
            (&plain, "192.0.2.9", None, true, true),
            (&plain, "192.0.2.9", None, false, true),
        ];
        for (entry, from, signed, tls, want) in cases {
            assert_eq!(
                entry.matches(ip(from), signed, tls),
                want,
                "{entry} from {from} signed {signed:?} tls {tls}"
            );
        }
        assert_eq!(any_tls.to_string(), "tls");
        assert_eq!(block_tls.to_string(), "192.0.2.0/24 tls");
        assert_eq!(all_tls.to_string(), "192.0.2.0/24 key transfer-key. tls");
        for bad in ["key tls", "tls 192.0.2.1"] {
            let e = bad.parse::<AclEntry>().expect_err(bad);
            assert!(e.contains("is not an ACL entry"), "{bad}: {e}");
        }
        assert_eq!(
            "tls tls".parse::<AclEntry>(),
            Err("\"tls\" is not an address or ADDR/LEN (e.g. 127.0.0.1, 10.0.0.0/8, ::1)".into())
        );
    }

    #[test]
    fn bad_entries_say_what_is_expected() {
        for bad in ["key", "192.0.2.0/24 key", "192.0.2.0/24 tsig k.", "a b c d"] {
            let e = bad.parse::<AclEntry>().expect_err(bad);
            assert!(e.contains("is not an ACL entry"), "{bad}: {e}");
        }
        assert_eq!(
            "10.0.0.0/33 key k.".parse::<AclEntry>(),
            Err(
                "\"10.0.0.0/33\" is not an address or ADDR/LEN (e.g. 127.0.0.1, 10.0.0.0/8, ::1)"
                    .into()
            )
        );
        let e = "key bad..name".parse::<AclEntry>().expect_err("bad name");
        assert!(
            e.starts_with("\"key bad..name\": bad key name \"bad..name\""),
            "{e}"
        );
    }
}
