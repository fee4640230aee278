//! PROXY protocol version 2 (haproxy's `proxy-protocol.txt`, §2.2): the
//! binary header a load balancer (dnsdist, haproxy) puts in front of what it
//! forwards, naming the client it forwards for. Framing, not DNS: the header
//! is taken off here and the client it names is handed to the dispatcher as
//! the peer address, so ACLs, rate limiting, the TCP per-client limit,
//! metrics, dnstap and logs all see the client, not the proxy.
//!
//! `[server] proxy_allow` lists the proxies. From a source in it every UDP
//! datagram, and every TCP connection once at its start, must begin with a
//! header; plain DNS from such a source is refused (as NSD, BIND 9 and
//! PowerDNS do: else a client whose query a proxy forwards without a header
//! would be taken for the proxy, with the proxy's privileges). From any other
//! source a header is refused and plain DNS is served. What is refused (UDP:
//! dropped; TCP: the connection closed) is counted in
//! `authd_proxy_rejected_total{reason}` and logged within a budget.
//!
//! What the header may say:
//! - version 2 only; command PROXY (the client's addresses follow) or LOCAL
//!   (the proxy's own query, e.g. a health check: the real endpoints are
//!   used, the address block is ignored);
//! - with PROXY, family IPv4 or IPv6 over the listener's transport (STREAM
//!   for TCP, DGRAM for UDP); UNSPEC and UNIX name no client address and are
//!   refused (the spec lets a receiver refuse them), as is a transport that
//!   does not match;
//! - TLVs after the addresses are skipped (each must fit the header); none
//!   is needed, and the CRC32C one is optional to check, so it is not.
//!
//! Parsing reads the header in place: no allocation.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::acl::Cidr;
use crate::log_limit::LogLimit;
use crate::metrics::{Metrics, ProxyRejected};
use crate::query::Transport;

/// The 12 bytes every v2 header starts with.
pub(super) const SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";

/// The fixed part: signature, version and command, family and transport,
/// the length of the rest.
pub(super) const FIXED_LEN: usize = 16;

/// What the header's command and address block say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Header {
    /// Bytes the header takes, fixed part included: the DNS data follows.
    pub len: usize,
    /// PROXY: the client's address and the address it reached. LOCAL: none
    /// (the connection's own endpoints hold).
    pub addrs: Option<(SocketAddr, SocketAddr)>,
}

/// Why bytes are not a header this server accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Malformed {
    /// They do not start with [`SIGNATURE`] (plain DNS, or noise).
    NoSignature,
    /// Fewer bytes than the fixed part, or than its length field says.
    Truncated,
    /// A version other than 2.
    Version(u8),
    /// A command other than LOCAL (0) and PROXY (1).
    Command(u8),
    /// With PROXY, a family other than IPv4 (1) and IPv6 (2).
    Family(u8),
    /// With PROXY, a transport other than the listener's.
    Transport(u8),
    /// A length too short for the family's addresses.
    ShortAddresses,
    /// A TLV running past the end of the header.
    Tlv,
    /// A UDP datagram holding the header and no DNS message after it.
    NoMessage,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Malformed::NoSignature => write!(f, "no PROXY v2 signature"),
            Malformed::Truncated => write!(f, "the PROXY header is cut short"),
            Malformed::Version(v) => write!(f, "PROXY version {v}, not 2"),
            Malformed::Command(c) => write!(f, "unknown PROXY command {c}"),
            Malformed::Family(a) => write!(f, "PROXY address family {a} (not IPv4 or IPv6)"),
            Malformed::Transport(t) => {
                write!(f, "PROXY transport {t} does not match the listener's")
            }
            Malformed::ShortAddresses => write!(f, "PROXY length too short for its addresses"),
            Malformed::Tlv => write!(f, "a PROXY TLV runs past the header"),
            Malformed::NoMessage => write!(f, "no DNS message after the PROXY header"),
        }
    }
}

/// The length of the whole header whose fixed part starts `buf`, after
/// checking its signature, version and command.
///
/// Errors: [`Malformed::NoSignature`], [`Malformed::Truncated`] (fewer than
/// [`FIXED_LEN`] bytes), [`Malformed::Version`], [`Malformed::Command`].
pub(super) fn header_len(buf: &[u8]) -> Result<usize, Malformed> {
    if !buf.starts_with(&SIGNATURE) {
        // Version 1's text form ("PROXY TCP4 …"): a header, of a version
        // not taken here, rather than a missing one.
        if buf.starts_with(b"PROXY ") {
            return Err(Malformed::Version(1));
        }
        return Err(Malformed::NoSignature);
    }
    let Some(&[ver_cmd, _, hi, lo]) = buf.get(12..FIXED_LEN) else {
        return Err(Malformed::Truncated);
    };
    if ver_cmd >> 4 != 2 {
        return Err(Malformed::Version(ver_cmd >> 4));
    }
    if ver_cmd & 0x0f > 1 {
        return Err(Malformed::Command(ver_cmd & 0x0f));
    }
    Ok(FIXED_LEN + usize::from(u16::from_be_bytes([hi, lo])))
}

/// Parses the header at the start of `buf`, received over `transport`.
///
/// Errors: the [`Malformed`] case that applies.
pub(super) fn parse(buf: &[u8], transport: Transport) -> Result<Header, Malformed> {
    let len = header_len(buf)?;
    let body = buf.get(FIXED_LEN..len).ok_or(Malformed::Truncated)?;
    let (ver_cmd, fam) = (buf[12], buf[13]);
    if ver_cmd & 0x0f == 0 {
        // LOCAL: the address block (and family) is discarded, TLVs too.
        return Ok(Header { len, addrs: None });
    }
    let want = match transport {
        // TLS is carried over TCP, after the header.
        Transport::Tcp | Transport::Tls => 1,
        Transport::Udp => 2,
    };
    if fam & 0x0f != want {
        return Err(Malformed::Transport(fam & 0x0f));
    }
    let (addrs, used) = match fam >> 4 {
        1 => {
            let a: &[u8; 12] = body
                .get(..12)
                .and_then(|a| a.try_into().ok())
                .ok_or(Malformed::ShortAddresses)?;
            let ip = |i: usize| IpAddr::V4(Ipv4Addr::new(a[i], a[i + 1], a[i + 2], a[i + 3]));
            let port = |i: usize| u16::from_be_bytes([a[i], a[i + 1]]);
            (
                (
                    SocketAddr::new(ip(0), port(8)),
                    SocketAddr::new(ip(4), port(10)),
                ),
                12,
            )
        }
        2 => {
            let a: &[u8; 36] = body
                .get(..36)
                .and_then(|a| a.try_into().ok())
                .ok_or(Malformed::ShortAddresses)?;
            let ip = |i: usize| {
                let mut o = [0u8; 16];
                o.copy_from_slice(&a[i..i + 16]);
                IpAddr::V6(Ipv6Addr::from(o))
            };
            let port = |i: usize| u16::from_be_bytes([a[i], a[i + 1]]);
            (
                (
                    SocketAddr::new(ip(0), port(32)),
                    SocketAddr::new(ip(16), port(34)),
                ),
                36,
            )
        }
        other => return Err(Malformed::Family(other)),
    };
    check_tlvs(body.get(used..).unwrap_or_default())?;
    Ok(Header {
        len,
        addrs: Some(addrs),
    })
}

/// Checks that `tlvs` is a run of whole TLVs (type, two-byte length, value).
fn check_tlvs(mut tlvs: &[u8]) -> Result<(), Malformed> {
    while let Some(&[_, hi, lo]) = tlvs.get(..3) {
        let end = 3 + usize::from(u16::from_be_bytes([hi, lo]));
        tlvs = tlvs.get(end..).ok_or(Malformed::Tlv)?;
    }
    if tlvs.is_empty() {
        Ok(())
    } else {
        Err(Malformed::Tlv)
    }
}

/// Which sources must send a header (`[server] proxy_allow`), as masks
/// ready for the query path: a source that is not a proxy costs a masked
/// compare per block and a look at its first bytes.
#[derive(Debug, Default)]
pub(super) struct ProxyPolicy {
    /// No block: PROXY is off.
    off: bool,
    /// IPv4 blocks, (network, mask); IPv4-mapped IPv6 sources are looked
    /// up here too.
    v4: Vec<(u32, u32)>,
    /// IPv6 blocks, (network, mask).
    v6: Vec<(u128, u128)>,
}

/// A message taken from a datagram: its DNS bytes, the client and the
/// server address it was sent to.
pub(super) type Unwrapped<'a> = (&'a [u8], SocketAddr, SocketAddr);

/// Why a datagram is dropped, with the header's fault (for the log).
pub(super) type Dropped = (ProxyRejected, Option<Malformed>);

impl ProxyPolicy {
    /// A policy requiring a header from the sources in `allow`.
    pub(super) fn new(allow: &[Cidr]) -> ProxyPolicy {
        let mut policy = ProxyPolicy {
            off: allow.is_empty(),
            ..ProxyPolicy::default()
        };
        for c in allow {
            let bits = u32::from(c.prefix);
            match c.addr {
                IpAddr::V4(a) => {
                    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
                    policy.v4.push((u32::from(a) & mask, mask));
                }
                IpAddr::V6(a) => {
                    let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
                    policy.v6.push((u128::from(a) & mask, mask));
                }
            }
        }
        policy
    }

    /// No source may send a header: nothing to look at (the query path's
    /// one branch when PROXY is not configured).
    #[inline]
    pub(super) fn is_off(&self) -> bool {
        self.off
    }

    /// Whether `ip` is a proxy, which must send a header.
    #[inline]
    pub(super) fn is_proxy(&self, ip: IpAddr) -> bool {
        let v4 = |a: Ipv4Addr| {
            let a = u32::from(a);
            self.v4.iter().any(|&(net, mask)| a & mask == net)
        };
        match ip {
            IpAddr::V4(a) => v4(a),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(m) => v4(m),
                None => {
                    let a = u128::from(a);
                    self.v6.iter().any(|&(net, mask)| a & mask == net)
                }
            },
        }
    }

    /// Whether a UDP datagram `msg` from `ip` is [`Self::datagram`]'s
    /// business (policy on): it comes from a proxy or starts like a header.
    /// Else it is plain DNS from a client, taken as it is.
    #[inline]
    pub(super) fn is_framed(&self, msg: &[u8], ip: IpAddr) -> bool {
        self.is_proxy(ip) || msg.starts_with(&SIGNATURE)
    }

    /// The DNS message of a UDP datagram `msg` from `peer` to `local`, with
    /// its client and server address (policy on: not [`Self::is_off`]). A
    /// proxy's datagram loses its header (LOCAL: `peer` and `local` stay);
    /// another source's is taken as it is. Out of line: the query path
    /// asks [`Self::is_framed`] first.
    ///
    /// Errors: why it is dropped.
    #[inline(never)]
    pub(super) fn datagram<'a>(
        &self,
        msg: &'a [u8],
        peer: SocketAddr,
        local: SocketAddr,
    ) -> Result<Unwrapped<'a>, Dropped> {
        if !self.is_proxy(peer.ip()) {
            if msg.starts_with(&SIGNATURE) {
                return Err((ProxyRejected::NotAllowed, None));
            }
            return Ok((msg, peer, local));
        }
        let header = parse(msg, Transport::Udp).map_err(|m| (reason(m), Some(m)))?;
        let (client, to) = header.addrs.unwrap_or((peer, local));
        match msg.get(header.len..) {
            Some(dns) if !dns.is_empty() => Ok((dns, client, to)),
            _ => Err((ProxyRejected::Malformed, Some(Malformed::NoMessage))),
        }
    }
}

/// How a proxy's bytes that are not a header it may send are counted: no
/// signature is a missing header, anything else a malformed one.
pub(super) fn reason(fault: Malformed) -> ProxyRejected {
    match fault {
        Malformed::NoSignature => ProxyRejected::Missing,
        _ => ProxyRejected::Malformed,
    }
}

/// Log lines for refused headers (any source can send many).
static REJECT_LOG: LogLimit = LogLimit::new();

/// Counts a datagram dropped or a connection closed from `peer` for `why`
/// (`fault`: what was wrong with the header) and logs it within a budget.
pub(super) fn rejected(
    metrics: Option<&Metrics>,
    transport: Transport,
    peer: SocketAddr,
    why: ProxyRejected,
    fault: Option<Malformed>,
) {
    if let Some(m) = metrics {
        m.count_proxy_rejected(why);
    }
    if let Some(suppressed) = REJECT_LOG.allow() {
        let what = match transport {
            Transport::Udp => "UDP datagram",
            Transport::Tcp => "TCP connection",
            Transport::Tls => "TLS connection",
        };
        let done = match transport {
            Transport::Udp => "dropped",
            Transport::Tcp | Transport::Tls => "closed",
        };
        let why = match (why, fault) {
            (ProxyRejected::NotAllowed, _) => {
                "a PROXY header from a source not in [server] proxy_allow".to_string()
            }
            (ProxyRejected::Missing, _) => "no PROXY header from a proxy_allow source".to_string(),
            (ProxyRejected::Timeout, _) => "no PROXY header in time".to_string(),
            (ProxyRejected::Malformed, Some(f)) => f.to_string(),
            (ProxyRejected::Malformed, None) => "malformed PROXY header".to_string(),
        };
        tracing::info!(suppressed, "{what} from {peer} {done}: {why}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PROXY header: `cmd` (0 LOCAL, 1 PROXY), family/transport byte
    /// `fam`, then `body` (addresses and TLVs).
    fn header(cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
        let mut h = SIGNATURE.to_vec();
        h.push(0x20 | cmd);
        h.push(fam);
        h.extend_from_slice(&u16::try_from(body.len()).expect("fits").to_be_bytes());
        h.extend_from_slice(body);
        h
    }

    fn v4_body() -> Vec<u8> {
        let mut b = vec![192, 0, 2, 7, 198, 51, 100, 1];
        b.extend_from_slice(&4242u16.to_be_bytes());
        b.extend_from_slice(&53u16.to_be_bytes());
        b
    }

    #[test]
    fn ipv4_and_ipv6_addresses() {
        let h = header(1, 0x12, &v4_body());
        assert_eq!(
            parse(&h, Transport::Udp),
            Ok(Header {
                len: 28,
                addrs: Some((
                    "192.0.2.7:4242".parse().expect("addr"),
                    "198.51.100.1:53".parse().expect("addr")
                )),
            })
        );
        let mut b = Vec::new();
        b.extend_from_slice(&"2001:db8::7".parse::<Ipv6Addr>().expect("v6").octets());
        b.extend_from_slice(&"2001:db8::53".parse::<Ipv6Addr>().expect("v6").octets());
        b.extend_from_slice(&[0x10, 0x92, 0, 53]);
        let h = header(1, 0x21, &b);
        let parsed = parse(&h, Transport::Tcp).expect("parses");
        assert_eq!(parsed.len, 52);
        assert_eq!(
            parsed.addrs,
            Some((
                "[2001:db8::7]:4242".parse().expect("addr"),
                "[2001:db8::53]:53".parse().expect("addr")
            ))
        );
    }

    /// TLVs are skipped when whole, refused when one runs past the header.
    #[test]
    fn tlvs() {
        let mut b = v4_body();
        b.extend_from_slice(&[0x04, 0, 2, 0, 0, 0x01, 0, 3, b'd', b'o', b't']);
        let h = header(1, 0x12, &b);
        assert_eq!(parse(&h, Transport::Udp).map(|h| h.len), Ok(16 + 23));
        let mut b = v4_body();
        b.extend_from_slice(&[0x04, 0, 9, 0]);
        assert_eq!(
            parse(&header(1, 0x12, &b), Transport::Udp),
            Err(Malformed::Tlv)
        );
        let mut b = v4_body();
        b.extend_from_slice(&[0x04, 0]);
        assert_eq!(
            parse(&header(1, 0x12, &b), Transport::Udp),
            Err(Malformed::Tlv)
        );
    }

    /// LOCAL: any family, the address block ignored.
    #[test]
    fn local_command_has_no_addresses() {
        for fam in [0x00, 0x12, 0x31] {
            let h = header(0, fam, &[1, 2, 3]);
            assert_eq!(
                parse(&h, Transport::Udp),
                Ok(Header {
                    len: 19,
                    addrs: None
                })
            );
        }
    }

    #[test]
    fn malformed_headers() {
        let good = header(1, 0x12, &v4_body());
        let mut bad_sig = good.clone();
        bad_sig[3] = b'x';
        assert_eq!(parse(&bad_sig, Transport::Udp), Err(Malformed::NoSignature));
        let mut v1 = good.clone();
        v1[12] = 0x11;
        assert_eq!(parse(&v1, Transport::Udp), Err(Malformed::Version(1)));
        // Version 1's text form is a header of another version, not none.
        let text = b"PROXY TCP4 192.0.2.1 192.0.2.2 56324 53\r\n";
        assert_eq!(parse(text, Transport::Tcp), Err(Malformed::Version(1)));
        assert_eq!(reason(Malformed::Version(1)), ProxyRejected::Malformed);
        let mut cmd = good.clone();
        cmd[12] = 0x22;
        assert_eq!(parse(&cmd, Transport::Udp), Err(Malformed::Command(2)));
        assert_eq!(
            parse(&good[..15], Transport::Udp),
            Err(Malformed::Truncated)
        );
        assert_eq!(
            parse(&good[..27], Transport::Udp),
            Err(Malformed::Truncated)
        );
        assert_eq!(parse(&good, Transport::Tcp), Err(Malformed::Transport(2)));
        for fam in [0x02, 0x32] {
            assert_eq!(
                parse(&header(1, fam, &[0; 216]), Transport::Udp),
                Err(Malformed::Family(fam >> 4))
            );
        }
        assert_eq!(
            parse(&header(1, 0x22, &v4_body()), Transport::Udp),
            Err(Malformed::ShortAddresses)
        );
    }

    /// Blocks of both families; IPv4-mapped sources match IPv4 blocks.
    #[test]
    fn proxy_sources() {
        let allow: Vec<Cidr> = ["10.0.0.0/8", "192.0.2.1", "2001:db8::/32", "::/0"]
            .iter()
            .map(|a| a.parse().expect("cidr"))
            .collect();
        let policy = ProxyPolicy::new(&allow[..3]);
        assert!(!policy.is_off());
        for (ip, want) in [
            ("10.255.0.1", true),
            ("11.0.0.1", false),
            ("192.0.2.1", true),
            ("192.0.2.2", false),
            ("::ffff:10.1.2.3", true),
            ("::ffff:192.0.2.2", false),
            ("2001:db8:1::1", true),
            ("2001:db9::1", false),
        ] {
            let ip: IpAddr = ip.parse().expect("ip");
            assert_eq!(policy.is_proxy(ip), want, "{ip}");
            let cidrs = allow[..3].iter().any(|c| c.contains(ip));
            assert_eq!(cidrs, want, "{ip}: as Cidr::contains");
        }
        let any6 = ProxyPolicy::new(&allow[3..]);
        assert!(any6.is_proxy("::1".parse().expect("ip")));
        assert!(!any6.is_proxy("127.0.0.1".parse().expect("ip")));
        assert!(ProxyPolicy::new(&[]).is_off());
    }

    /// A proxy's datagram loses its header; a header from elsewhere, or
    /// none from a proxy, is refused; other sources' DNS passes as it is.
    #[test]
    fn datagram_policy() {
        let allow = ["127.0.0.1".parse().expect("cidr")];
        let policy = ProxyPolicy::new(&allow);
        let proxy: SocketAddr = "127.0.0.1:9999".parse().expect("addr");
        let other: SocketAddr = "127.0.0.2:9999".parse().expect("addr");
        let local: SocketAddr = "127.0.0.1:53".parse().expect("addr");
        let mut d = header(1, 0x12, &v4_body());
        d.extend_from_slice(b"dns");
        let (msg, client, to) = policy.datagram(&d, proxy, local).expect("accepted");
        assert_eq!(msg, b"dns");
        assert_eq!(client, "192.0.2.7:4242".parse().expect("addr"));
        assert_eq!(to, "198.51.100.1:53".parse().expect("addr"));
        assert_eq!(
            policy.datagram(&d, other, local),
            Err((ProxyRejected::NotAllowed, None))
        );
        assert_eq!(
            policy.datagram(b"plain dns", proxy, local),
            Err((ProxyRejected::Missing, Some(Malformed::NoSignature)))
        );
        assert_eq!(
            policy.datagram(b"plain dns", other, local),
            Ok((&b"plain dns"[..], other, local))
        );
        let mut l = header(0, 0, &[]);
        l.extend_from_slice(b"dns");
        assert_eq!(
            policy.datagram(&l, proxy, local),
            Ok((&b"dns"[..], proxy, local))
        );
        // A header and nothing after it: dropped and counted malformed.
        assert_eq!(
            policy.datagram(&header(1, 0x12, &v4_body()), proxy, local),
            Err((ProxyRejected::Malformed, Some(Malformed::NoMessage)))
        );
    }
}
