//! Access-control entries: which clients may do something (today, who may
//! transfer zones: `[transfer] allow`).
//!
//! A leaf module (std only), so the configuration can parse entries without
//! depending on the protocol code that checks them. Entries are address
//! blocks ([`Cidr`]: `"192.0.2.0/24"`, `"::1"`); TSIG-key entries (`"key NAME"`)
//! are meant to join them here.

use std::net::IpAddr;
use std::str::FromStr;

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

    /// True when `ip` is inside the block. An IPv4-mapped IPv6 address
    /// (`::ffff:192.0.2.1`) is taken as the IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.prefix) == self.addr
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}
