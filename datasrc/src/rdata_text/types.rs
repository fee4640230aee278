//! Presentation text ↔ wire form of every record type authd knows, each as
//! its RFC defines it and BIND 9 reads and writes it; RFC 3597 `\#` for any
//! type. [`read`] is the reader behind the fast path of `mod.rs`; [`write`]
//! is [`Rdata::to_text`](crate::Rdata::to_text).

use std::net::{Ipv4Addr, Ipv6Addr};

use super::Buf;
use super::fields::{
    Reader, Tok, Wire, decode_hex, parse_num, push_string, put_base64, put_base64_whole,
    put_bitmap, put_escaped, put_hex, put_hex_whole, put_string, unescape,
};
use crate::name::Name;
use crate::rr::RType;

// Type codes (IANA registry) used below.
const A: u16 = 1;
const NS: u16 = 2;
const MD: u16 = 3;
const MF: u16 = 4;
const CNAME: u16 = 5;
const SOA: u16 = 6;
const MB: u16 = 7;
const MG: u16 = 8;
const MR: u16 = 9;
const NULL: u16 = 10;
const WKS: u16 = 11;
const PTR: u16 = 12;
const HINFO: u16 = 13;
const MINFO: u16 = 14;
const MX: u16 = 15;
const TXT: u16 = 16;
const RP: u16 = 17;
const AFSDB: u16 = 18;
const X25: u16 = 19;
const ISDN: u16 = 20;
const RT: u16 = 21;
const NSAP: u16 = 22;
const NSAP_PTR: u16 = 23;
const SIG: u16 = 24;
const KEY: u16 = 25;
const PX: u16 = 26;
const GPOS: u16 = 27;
const AAAA: u16 = 28;
const LOC: u16 = 29;
const NXT: u16 = 30;
const EID: u16 = 31;
const NIMLOC: u16 = 32;
const SRV: u16 = 33;
const NAPTR: u16 = 35;
const KX: u16 = 36;
const CERT: u16 = 37;
const A6: u16 = 38;
const DNAME: u16 = 39;
const SINK: u16 = 40;
const OPT: u16 = 41;
const APL: u16 = 42;
const DS: u16 = 43;
const SSHFP: u16 = 44;
const IPSECKEY: u16 = 45;
const RRSIG: u16 = 46;
const NSEC: u16 = 47;
const DNSKEY: u16 = 48;
const DHCID: u16 = 49;
const NSEC3: u16 = 50;
const NSEC3PARAM: u16 = 51;
const TLSA: u16 = 52;
const SMIMEA: u16 = 53;
const HIP: u16 = 55;
const NINFO: u16 = 56;
const RKEY: u16 = 57;
const TALINK: u16 = 58;
const CDS: u16 = 59;
const CDNSKEY: u16 = 60;
const OPENPGPKEY: u16 = 61;
const CSYNC: u16 = 62;
const ZONEMD: u16 = 63;
const SVCB: u16 = 64;
const HTTPS: u16 = 65;
const SPF: u16 = 99;
const NID: u16 = 104;
const L32: u16 = 105;
const L64: u16 = 106;
const LP: u16 = 107;
const EUI48: u16 = 108;
const EUI64: u16 = 109;
const URI: u16 = 256;
const CAA: u16 = 257;
const DOA: u16 = 259;
const AMTRELAY: u16 = 260;
const RESINFO: u16 = 261;
const WALLET: u16 = 262;
const TA: u16 = 32768;
const DLV: u16 = 32769;

/// True for the types whose RDATA has a presentation form of its own here;
/// the rest are read and written only as RFC 3597 `\#` data.
pub(crate) fn has_text_form(rtype: RType) -> bool {
    matches!(
        rtype.0,
        A..=NSAP_PTR
            | SIG..=NIMLOC
            | SRV
            | NAPTR..=SINK
            | APL..=SMIMEA
            | HIP..=HTTPS
            | SPF
            | NID..=EUI64
            | URI
            | CAA
            | DOA..=WALLET
            | TA
            | DLV
    ) && rtype.0 != NULL
        && rtype.0 != OPT
}

/// Why a type may not appear in zone data at all, if it may not.
pub(crate) fn refused(rtype: RType) -> Option<&'static str> {
    match rtype.0 {
        MD | MF => Some("is obsolete (RFC 973 §5.2.1): use MX"),
        OPT => Some("is a pseudo-record of a message (RFC 6891 §6.1.1), not zone data"),
        0 => Some("is reserved (RFC 6895 §3.1)"),
        _ if rtype.is_meta() => Some("is a meta type (RFC 6895 §3.1), not zone data"),
        _ => None,
    }
}

/// Reads the RDATA words `toks` of `rtype` into wire form: the type's own
/// presentation form, or RFC 3597 `\# LENGTH HEX` for any type (§5; for a
/// type with a form of its own, the data must be valid for it).
///
/// Errors: a message naming the field that is wrong (the caller adds the
/// type and where).
pub(crate) fn read(rtype: RType, toks: &[Tok<'_>], origin: &Name) -> Result<Buf, String> {
    if let Some(why) = refused(rtype) {
        return Err(format!("type {rtype} {why}"));
    }
    let mut out = Buf::new();
    if toks.first().is_some_and(|t| !t.quoted && t.raw == "\\#") {
        generic(&toks[1..], &mut out)?;
        if has_text_form(rtype) && write(rtype, &out).is_none() {
            return Err(format!(
                "the RFC 3597 data is not valid {rtype} rdata (RFC 3597 §5)"
            ));
        }
    } else if has_text_form(rtype) {
        let mut r = Reader::new(toks, origin);
        fields(rtype, &mut r, &mut out)?;
        r.end()?;
    } else if rtype.0 == NULL {
        return Err("NULL rdata can only be written as RFC 3597 data: \\# LENGTH HEX".into());
    } else {
        return Err(format!(
            "{rtype} has no presentation form here: write it as RFC 3597 data, \\# LENGTH HEX"
        ));
    }
    if out.len() > usize::from(u16::MAX) {
        return Err(format!("rdata is {} bytes long, over 65535", out.len()));
    }
    Ok(out)
}

/// RFC 3597 §5: `LENGTH HEX…` after the `\#`.
fn generic(toks: &[Tok<'_>], out: &mut Buf) -> Result<(), String> {
    let mut r = Reader::new(toks, &ROOT);
    let len: u16 = r.num("RFC 3597 length")?;
    let start = out.len();
    if len > 0 || !r.at_end() {
        r.hex_rest("RFC 3597 data", 0, out)?;
    }
    let got = out.len() - start;
    if got != usize::from(len) {
        return Err(format!(
            "RFC 3597 length {len} but {got} bytes of data (RFC 3597 §5)"
        ));
    }
    Ok(())
}

/// A name no relative name is completed with (RFC 3597 data has none).
static ROOT: std::sync::LazyLock<Name> = std::sync::LazyLock::new(Name::root);

/// The fields of each type with a presentation form (see [`has_text_form`]).
fn fields(rtype: RType, r: &mut Reader<'_, '_>, out: &mut Buf) -> Result<(), String> {
    match rtype.0 {
        A => r.ipv4("address", out)?,
        AAAA => r.ipv6("address", out)?,
        NS | CNAME | MB | MG | MR | PTR | NSAP_PTR | DNAME => r.name("target name", out)?,
        SOA => {
            r.name("MNAME", out)?;
            r.name("RNAME", out)?;
            r.u32("SERIAL", out)?;
            for field in ["REFRESH", "RETRY", "EXPIRE", "MINIMUM"] {
                let w = r.word(field)?;
                let secs = ttl_value(w).ok_or_else(|| {
                    format!("bad {field} {w:?}: expected seconds (or units, 1h30m) below 2^32")
                })?;
                out.extend_from_slice(&secs.to_be_bytes());
            }
        }
        WKS => wks(r, out)?,
        HINFO => {
            r.string("CPU", out)?;
            r.string("OS", out)?;
        }
        MINFO => {
            r.name("RMAILBX", out)?;
            r.name("EMAILBX", out)?;
        }
        MX | AFSDB | RT | KX | LP => {
            r.u16("preference", out)?;
            r.name("host name", out)?;
        }
        TXT | SPF | NINFO | RESINFO | WALLET => r.strings("text", out)?,
        RP => {
            r.name("mailbox", out)?;
            r.name("TXT name", out)?;
        }
        X25 => {
            let t = r.peek();
            r.string("PSDN address", out)?;
            if t.is_some_and(|t| !t.raw.bytes().all(|b| b.is_ascii_digit())) {
                return Err("bad PSDN address: digits only (RFC 1183 §3.1)".into());
            }
        }
        ISDN => {
            r.string("ISDN address", out)?;
            if !r.at_end() {
                r.string("subaddress", out)?;
            }
        }
        NSAP => {
            let w = r.word("NSAP address")?;
            let hex = w
                .strip_prefix("0x")
                .or_else(|| w.strip_prefix("0X"))
                .ok_or_else(|| format!("bad NSAP address {w:?}: must start with 0x"))?;
            let digits: String = hex.chars().filter(|&c| c != '.').collect();
            let bytes = decode_hex(&digits)
                .filter(|b| !b.is_empty())
                .ok_or_else(|| format!("bad NSAP address {w:?}: not hex"))?;
            out.extend_from_slice(&bytes);
        }
        SIG | RRSIG => {
            let w = r.word("type covered")?;
            let covered: RType = w
                .parse()
                .map_err(|_| format!("bad type covered {w:?}: not a type"))?;
            out.extend_from_slice(&covered.0.to_be_bytes());
            algorithm(r, out)?;
            r.u8("labels", out)?;
            r.u32("original TTL", out)?;
            for field in ["signature expiration", "signature inception"] {
                let w = r.word(field)?;
                let t = super::sig_time(w).ok_or_else(|| {
                    format!("bad {field} {w:?}: expected YYYYMMDDHHmmSS or seconds")
                })?;
                out.extend_from_slice(&t.to_be_bytes());
            }
            r.u16("key tag", out)?;
            r.name("signer's name", out)?;
            r.base64_rest("signature", 1, out)?;
        }
        KEY | DNSKEY | CDNSKEY | RKEY => {
            r.u16("flags", out)?;
            r.u8("protocol", out)?;
            algorithm(r, out)?;
            // A KEY with the no-key flags has no key (RFC 2535 §3.1.2).
            let min = usize::from(rtype.0 != KEY);
            r.base64_rest("public key", min, out)?;
        }
        PX => {
            r.u16("preference", out)?;
            r.name("MAP822", out)?;
            r.name("MAPX400", out)?;
        }
        GPOS => {
            for field in ["longitude", "latitude", "altitude"] {
                let t = r.peek();
                r.string(field, out)?;
                if t.is_some_and(|t| !is_decimal(t.raw)) {
                    return Err(format!("bad {field} {:?}: not a number", t.map(|t| t.raw)));
                }
            }
        }
        LOC => loc(r, out)?,
        NXT => {
            r.name("next domain name", out)?;
            let mut bits = [0u8; 16];
            let mut len = 0;
            for t in r.rest() {
                let code = t
                    .raw
                    .parse::<RType>()
                    .ok()
                    .filter(|c| c.0 < 128)
                    .ok_or_else(|| format!("bad type {:?} in the NXT bitmap: 1-127 only", t.raw))?
                    .0;
                let i = usize::from(code / 8);
                bits[i] |= 0x80 >> (code % 8);
                len = len.max(i + 1);
            }
            r.skip_rest();
            out.extend_from_slice(&bits[..len]);
        }
        EID | NIMLOC => r.hex_rest("data", 1, out)?,
        SRV => {
            r.u16("priority", out)?;
            r.u16("weight", out)?;
            r.u16("port", out)?;
            r.name("target", out)?;
        }
        NAPTR => {
            r.u16("order", out)?;
            r.u16("preference", out)?;
            r.string("flags", out)?;
            r.string("services", out)?;
            r.string("regexp", out)?;
            r.name("replacement", out)?;
        }
        CERT => {
            let w = r.word("certificate type")?;
            let t = CERT_TYPES
                .iter()
                .find(|(_, m)| m.eq_ignore_ascii_case(w))
                .map(|(c, _)| *c)
                .or_else(|| parse_num(w))
                .ok_or_else(|| format!("bad certificate type {w:?}"))?;
            out.extend_from_slice(&t.to_be_bytes());
            r.u16("key tag", out)?;
            algorithm(r, out)?;
            r.base64_rest("certificate", 1, out)?;
        }
        A6 => a6(r, out)?,
        SINK => {
            r.u8("meaning", out)?;
            r.u8("coding", out)?;
            r.u8("subcoding", out)?;
            r.base64_rest("data", 0, out)?;
        }
        APL => {
            while !r.at_end() {
                apl_item(r.word("address prefix")?, out)?;
            }
        }
        DS | CDS | TA | DLV => {
            r.u16("key tag", out)?;
            algorithm(r, out)?;
            let w = r.word("digest type")?;
            let d = DIGEST_TYPES
                .iter()
                .find(|(_, m)| m.eq_ignore_ascii_case(w))
                .map(|(c, _)| *c)
                .or_else(|| parse_num(w))
                .ok_or_else(|| format!("bad digest type {w:?}: expected 0 to 255"))?;
            out.push(d);
            r.hex_rest("digest", 1, out)?;
        }
        SSHFP => {
            r.u8("algorithm", out)?;
            r.u8("fingerprint type", out)?;
            r.hex_rest("fingerprint", 1, out)?;
        }
        IPSECKEY => {
            r.u8("precedence", out)?;
            let gw = r.u8("gateway type", out)?;
            r.u8("algorithm", out)?;
            gateway(r, gw, "gateway", out)?;
            r.base64_rest("public key", 0, out)?;
        }
        NSEC => {
            r.name("next domain name", out)?;
            r.bitmap_rest(out)?;
        }
        DHCID | OPENPGPKEY => r.base64_rest("data", 1, out)?,
        NSEC3 | NSEC3PARAM => {
            r.u8("hash algorithm", out)?;
            r.u8("flags", out)?;
            r.u16("iterations", out)?;
            let w = r.word("salt")?;
            let salt = if w == "-" {
                Vec::new()
            } else {
                decode_hex(w).ok_or_else(|| format!("bad salt {w:?}: not hex or -"))?
            };
            push_string("salt", &salt, out)?;
            if rtype.0 == NSEC3 {
                let w = r.word("next hashed owner name")?;
                let hash = super::base32hex(w)
                    .filter(|h| !h.is_empty())
                    .ok_or_else(|| format!("bad next hashed owner name {w:?}: not base32hex"))?;
                push_string("next hashed owner name", &hash, out)?;
                r.bitmap_rest(out)?;
            }
        }
        TLSA | SMIMEA => {
            r.u8("certificate usage", out)?;
            r.u8("selector", out)?;
            r.u8("matching type", out)?;
            r.hex_rest("certificate association data", 1, out)?;
        }
        HIP => {
            let alg: u8 = r.num("PK algorithm")?;
            let w = r.word("HIT")?;
            let hit = decode_hex(w)
                .filter(|h| !h.is_empty())
                .ok_or_else(|| format!("bad HIT {w:?}: not hex"))?;
            let w = r.word("public key")?;
            let pk = super::fields::decode_base64(w)
                .filter(|k| !k.is_empty())
                .ok_or_else(|| format!("bad public key {w:?}: not base64"))?;
            let hit_len =
                u8::try_from(hit.len()).map_err(|_| "HIT is over 255 bytes".to_string())?;
            let pk_len =
                u16::try_from(pk.len()).map_err(|_| "public key is too long".to_string())?;
            out.push(hit_len);
            out.push(alg);
            out.extend_from_slice(&pk_len.to_be_bytes());
            out.extend_from_slice(&hit);
            out.extend_from_slice(&pk);
            while !r.at_end() {
                r.name("rendezvous server", out)?;
            }
        }
        TALINK => {
            r.name("previous name", out)?;
            r.name("next name", out)?;
        }
        CSYNC => {
            r.u32("SOA serial", out)?;
            r.u16("flags", out)?;
            r.bitmap_rest(out)?;
        }
        ZONEMD => {
            r.u32("serial", out)?;
            r.u8("scheme", out)?;
            r.u8("hash algorithm", out)?;
            r.hex_rest("digest", 12, out)?;
        }
        SVCB | HTTPS => svcb(r, out)?,
        NID | L64 => {
            r.u16("preference", out)?;
            let field = if rtype.0 == NID { "node ID" } else { "locator" };
            let w = r.word(field)?;
            let groups: Vec<&str> = w.split(':').collect();
            if groups.len() != 4 {
                return Err(format!("bad {field} {w:?}: expected four groups x:x:x:x"));
            }
            for g in groups {
                let v = (1..=4)
                    .contains(&g.len())
                    .then(|| u16::from_str_radix(g, 16).ok())
                    .flatten()
                    .ok_or_else(|| format!("bad {field} {w:?}: {g:?} is not 1-4 hex digits"))?;
                out.extend_from_slice(&v.to_be_bytes());
            }
        }
        L32 => {
            r.u16("preference", out)?;
            r.ipv4("locator", out)?;
        }
        EUI48 | EUI64 => {
            let n = if rtype.0 == EUI48 { 6 } else { 8 };
            let w = r.word("address")?;
            let parts: Vec<&str> = w.split('-').collect();
            if parts.len() != n || parts.iter().any(|p| p.len() != 2) {
                return Err(format!("bad address {w:?}: expected {n} hex pairs xx-xx-…"));
            }
            for p in parts {
                let v = u8::from_str_radix(p, 16)
                    .map_err(|_| format!("bad address {w:?}: {p:?} is not hex"))?;
                out.push(v);
            }
        }
        URI => {
            r.u16("priority", out)?;
            r.u16("weight", out)?;
            let t = r.tok("target")?;
            let bytes = unescape(t.raw).map_err(|e| format!("bad target: {e}"))?;
            if bytes.is_empty() {
                return Err("empty target (RFC 7553 §4.3)".into());
            }
            out.extend_from_slice(&bytes);
        }
        CAA => {
            r.u8("flags", out)?;
            let tag = r.word("tag")?;
            if tag.is_empty() || !tag.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(format!(
                    "bad tag {tag:?}: letters and digits only (RFC 8659 §4.1)"
                ));
            }
            push_string("tag", tag.as_bytes(), out)?;
            let t = r.tok("value")?;
            out.extend_from_slice(&unescape(t.raw).map_err(|e| format!("bad value: {e}"))?);
        }
        DOA => {
            r.u32("enterprise", out)?;
            r.u32("type", out)?;
            r.u8("location", out)?;
            r.string("media type", out)?;
            if r.peek().is_some_and(|t| !t.quoted && t.raw == "-") {
                r.skip_rest();
            } else {
                r.base64_rest("data", 0, out)?;
            }
        }
        AMTRELAY => {
            r.u8("precedence", out)?;
            let d: u8 = r.num("discovery optional")?;
            if d > 1 {
                return Err(format!("bad discovery optional {d}: 0 or 1"));
            }
            let t: u8 = r.num("relay type")?;
            if t > 0x7f {
                return Err(format!("bad relay type {t}: 0 to 127"));
            }
            out.push(d << 7 | t);
            gateway(r, t, "relay", out)?;
        }
        _ => return Err(format!("{rtype} has no presentation form here")),
    }
    Ok(())
}

/// A DNSSEC algorithm: a number or its mnemonic (RFC 4034 Appendix A.1).
fn algorithm(r: &mut Reader<'_, '_>, out: &mut Buf) -> Result<(), String> {
    let w = r.word("algorithm")?;
    let v = ALGORITHMS
        .iter()
        .find(|(_, m)| m.eq_ignore_ascii_case(w))
        .map(|(c, _)| *c)
        .or_else(|| parse_num(w))
        .ok_or_else(|| format!("bad algorithm {w:?}: expected 0 to 255 or a mnemonic"))?;
    out.push(v);
    Ok(())
}

/// DNSSEC algorithm mnemonics (IANA "DNS Security Algorithm Numbers").
const ALGORITHMS: [(u8, &str); 15] = [
    (1, "RSAMD5"),
    (2, "DH"),
    (3, "DSA"),
    (5, "RSASHA1"),
    (6, "DSA-NSEC3-SHA1"),
    (7, "NSEC3RSASHA1"),
    (8, "RSASHA256"),
    (10, "RSASHA512"),
    (12, "ECC-GOST"),
    (13, "ECDSAP256SHA256"),
    (14, "ECDSAP384SHA384"),
    (15, "ED25519"),
    (16, "ED448"),
    (253, "PRIVATEDNS"),
    (254, "PRIVATEOID"),
];

/// DS digest type mnemonics (IANA "Delegation Signer Digest Algorithms").
const DIGEST_TYPES: [(u8, &str); 4] = [(1, "SHA-1"), (2, "SHA-256"), (3, "GOST"), (4, "SHA-384")];

/// CERT type mnemonics (RFC 4398 §2.1).
const CERT_TYPES: [(u16, &str); 10] = [
    (1, "PKIX"),
    (2, "SPKI"),
    (3, "PGP"),
    (4, "IPKIX"),
    (5, "ISPKI"),
    (6, "IPGP"),
    (7, "ACPKIX"),
    (8, "IACPKIX"),
    (253, "URI"),
    (254, "OID"),
];

/// A TTL-like value: seconds, or with units (`1h30m`), below 2^32.
fn ttl_value(w: &str) -> Option<u32> {
    parse_num(w).or_else(|| ttl_with_units(w.as_bytes()))
}

/// An optionally signed decimal number with an optional fraction.
fn is_decimal(w: &str) -> bool {
    let w = w.strip_prefix('-').unwrap_or(w);
    let (int, frac) = w.split_once('.').unwrap_or((w, ""));
    !(int.is_empty() && frac.is_empty())
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
}

/// WKS (RFC 1035 §3.4.2): address, protocol, services as a port bitmap.
fn wks(r: &mut Reader<'_, '_>, out: &mut Buf) -> Result<(), String> {
    r.ipv4("address", out)?;
    let w = r.word("protocol")?;
    let proto: u8 = match w.to_ascii_lowercase().as_str() {
        "tcp" => 6,
        "udp" => 17,
        _ => parse_num(w).ok_or_else(|| format!("bad protocol {w:?}: tcp, udp or 0 to 255"))?,
    };
    out.push(proto);
    let mut bits = vec![0u8; 0];
    while !r.at_end() {
        let w = r.word("service")?;
        let port: u16 = SERVICES
            .iter()
            .find(|(_, m)| m.eq_ignore_ascii_case(w))
            .map(|(p, _)| *p)
            .or_else(|| parse_num(w))
            .ok_or_else(|| format!("bad service {w:?}: a port number or a known service"))?;
        let i = usize::from(port / 8);
        if bits.len() <= i {
            bits.resize(i + 1, 0);
        }
        bits[i] |= 0x80 >> (port % 8);
    }
    out.extend_from_slice(&bits);
    Ok(())
}

/// Service names WKS accepts besides port numbers.
const SERVICES: [(u16, &str); 11] = [
    (21, "ftp"),
    (22, "ssh"),
    (23, "telnet"),
    (25, "smtp"),
    (53, "domain"),
    (80, "http"),
    (110, "pop3"),
    (123, "ntp"),
    (143, "imap"),
    (443, "https"),
    (119, "nntp"),
];

/// A decimal number with at most `places` fraction digits, scaled by
/// 10^`places`; `None` otherwise.
fn scaled(w: &str, places: u32) -> Option<i64> {
    let (neg, w) = match w.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, w),
    };
    let (int, frac) = w.split_once('.').unwrap_or((w, ""));
    if int.is_empty()
        || int.len() > 10
        || frac.len() > places as usize
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut v: i64 = int.parse().ok()?;
    let mut f: i64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    for _ in frac.len()..places as usize {
        f *= 10;
    }
    v = v * 10i64.pow(places) + f;
    Some(if neg { -v } else { v })
}

/// LOC (RFC 1876 §3): latitude, longitude, altitude, then optional size and
/// precisions in meters.
fn loc(r: &mut Reader<'_, '_>, out: &mut Buf) -> Result<(), String> {
    let mut angle = |axis: &str, max_deg: i64, pos: u8, neg: u8| -> Result<u32, String> {
        let w = r.word(&format!("{axis} degrees"))?;
        let deg = scaled(w, 0)
            .filter(|d| (0..=max_deg).contains(d))
            .ok_or_else(|| format!("bad {axis} degrees {w:?}: 0 to {max_deg}"))?;
        let mut parts = [0i64; 2];
        let mut hemi = None;
        for (i, (what, max, places)) in [("minutes", 59, 0), ("seconds", 59_999, 3)]
            .into_iter()
            .enumerate()
        {
            let w = r.word(&format!("{axis} {what} or hemisphere"))?;
            if w.len() == 1
                && (w.as_bytes()[0].eq_ignore_ascii_case(&pos)
                    || w.as_bytes()[0].eq_ignore_ascii_case(&neg))
            {
                hemi = Some(w.as_bytes()[0].to_ascii_uppercase());
                break;
            }
            parts[i] = scaled(w, places)
                .filter(|v| (0..=max).contains(v))
                .ok_or_else(|| format!("bad {axis} {what} {w:?}"))?;
        }
        let hemi = match hemi {
            Some(h) => h,
            None => {
                let w = r.word(&format!("{axis} hemisphere"))?;
                match w.as_bytes() {
                    [h] if h.eq_ignore_ascii_case(&pos) || h.eq_ignore_ascii_case(&neg) => {
                        h.to_ascii_uppercase()
                    }
                    _ => {
                        return Err(format!(
                            "bad {axis} hemisphere {w:?}: {} or {}",
                            pos as char, neg as char
                        ));
                    }
                }
            }
        };
        let ms = deg * 3_600_000 + parts[0] * 60_000 + parts[1];
        if ms > max_deg * 3_600_000 {
            return Err(format!("{axis} over {max_deg} degrees"));
        }
        let signed = if hemi == pos { ms } else { -ms };
        Ok((i64::from(1u32 << 31) + signed) as u32)
    };
    let lat = angle("latitude", 90, b'N', b'S')?;
    let lon = angle("longitude", 180, b'E', b'W')?;
    let meters = |w: &str| scaled(w.strip_suffix(['m', 'M']).unwrap_or(w), 2);
    let w = r.word("altitude")?;
    let alt = meters(w)
        .filter(|a| (-10_000_000..=4_284_967_295).contains(a))
        .ok_or_else(|| format!("bad altitude {w:?}: -100000.00 to 42849672.95 meters"))?;
    let mut prec = [0x12, 0x16, 0x13]; // 1m, 10000m, 10m (RFC 1876 §3)
    for (i, field) in ["size", "horizontal precision", "vertical precision"]
        .into_iter()
        .enumerate()
    {
        if r.at_end() {
            break;
        }
        let w = r.word(field)?;
        let cm = meters(w)
            .filter(|v| (0..=9_000_000_000).contains(v))
            .ok_or_else(|| format!("bad {field} {w:?}: 0 to 90000000.00 meters"))?;
        let (mut m, mut e) = (cm, 0u8);
        while m >= 10 {
            m /= 10;
            e += 1;
        }
        prec[i] = (m as u8) << 4 | e;
    }
    out.push(0);
    out.extend_from_slice(&prec);
    out.extend_from_slice(&lat.to_be_bytes());
    out.extend_from_slice(&lon.to_be_bytes());
    out.extend_from_slice(&((alt + 10_000_000) as u32).to_be_bytes());
    Ok(())
}

/// A6 (RFC 2874 §3.1): prefix length, address suffix, prefix name.
fn a6(r: &mut Reader<'_, '_>, out: &mut Buf) -> Result<(), String> {
    let plen: u8 = r.num("prefix length")?;
    if plen > 128 {
        return Err(format!("bad prefix length {plen}: 0 to 128"));
    }
    out.push(plen);
    if plen < 128 {
        let w = r.word("address suffix")?;
        let a: Ipv6Addr = w
            .parse()
            .map_err(|_| format!("bad address suffix {w:?}: not an IPv6 address"))?;
        let octets = a.octets();
        let skip = usize::from(plen / 8);
        let mut suffix = octets[skip..].to_vec();
        if !plen.is_multiple_of(8) {
            suffix[0] &= 0xff >> (plen % 8);
        }
        out.extend_from_slice(&suffix);
    }
    if plen > 0 {
        r.name("prefix name", out)?;
    }
    Ok(())
}

/// One APL item (RFC 3123 §4): `[!]AFI:ADDRESS/PREFIX`.
fn apl_item(w: &str, out: &mut Buf) -> Result<(), String> {
    let bad = |why: &str| format!("bad address prefix {w:?}: {why}");
    let (neg, rest) = match w.strip_prefix('!') {
        Some(r) => (true, r),
        None => (false, w),
    };
    let (afi, rest) = rest
        .split_once(':')
        .ok_or_else(|| bad("expected AFI:ADDRESS/PREFIX"))?;
    let (addr, prefix) = rest.rsplit_once('/').ok_or_else(|| bad("no /PREFIX"))?;
    let afi: u16 = parse_num(afi).ok_or_else(|| bad("AFI is not a number"))?;
    let prefix: u8 = parse_num(prefix).ok_or_else(|| bad("PREFIX is not a number"))?;
    let bytes: Vec<u8> = match afi {
        1 if prefix <= 32 => addr
            .parse::<Ipv4Addr>()
            .map_err(|_| bad("not an IPv4 address"))?
            .octets()
            .to_vec(),
        2 if prefix <= 128 => addr
            .parse::<Ipv6Addr>()
            .map_err(|_| bad("not an IPv6 address"))?
            .octets()
            .to_vec(),
        1 | 2 => return Err(bad("PREFIX too long for the address family")),
        _ => return Err(bad("AFI must be 1 (IPv4) or 2 (IPv6)")),
    };
    let len = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    out.extend_from_slice(&afi.to_be_bytes());
    out.push(prefix);
    out.push(u8::from(neg) << 7 | len as u8);
    out.extend_from_slice(&bytes[..len]);
    Ok(())
}

/// The gateway of IPSECKEY (RFC 4025 §2.3) or relay of AMTRELAY (RFC 8777
/// §4.2) by its type: 0 none (`.`), 1 IPv4, 2 IPv6, 3 a domain name.
fn gateway(r: &mut Reader<'_, '_>, kind: u8, field: &str, out: &mut Buf) -> Result<(), String> {
    match kind {
        0 => {
            let w = r.word(field)?;
            if w != "." {
                return Err(format!("bad {field} {w:?}: type 0 has none, written ."));
            }
        }
        1 => r.ipv4(field, out)?,
        2 => r.ipv6(field, out)?,
        3 => r.name(field, out)?,
        _ => return Err(format!("bad {field} type {kind}: 0 to 3")),
    }
    Ok(())
}

/// SvcParamKey mnemonics (RFC 9460 §14.3.2 and its successors).
const SVC_KEYS: [(u16, &str); 10] = [
    (0, "mandatory"),
    (1, "alpn"),
    (2, "no-default-alpn"),
    (3, "port"),
    (4, "ipv4hint"),
    (5, "ech"),
    (6, "ipv6hint"),
    (7, "dohpath"),
    (8, "ohttp"),
    (9, "tls-supported-groups"),
];

/// A SvcParamKey: a mnemonic or `keyNNNNN` (RFC 9460 §2.1).
fn svc_key(w: &str) -> Option<u16> {
    SVC_KEYS
        .iter()
        .find(|(_, m)| m.eq_ignore_ascii_case(w))
        .map(|(k, _)| *k)
        .or_else(|| {
            let n = w.strip_prefix("key")?;
            (n.len() <= 5 && !n.starts_with('0') || n == "0")
                .then(|| parse_num(n))
                .flatten()
        })
}

/// SVCB and HTTPS (RFC 9460 §2.1): priority, target, then `key[=value]`
/// parameters, written to the wire in increasing key order.
fn svcb(r: &mut Reader<'_, '_>, out: &mut Buf) -> Result<(), String> {
    let prio = r.u16("priority", out)?;
    r.name("target", out)?;
    let mut params: Vec<(u16, Vec<u8>)> = Vec::new();
    while let Some(t) = r.peek() {
        r.skip_one();
        if t.quoted {
            return Err(format!(
                "bad SvcParam \"{}\": the key must not be quoted",
                t.raw
            ));
        }
        let (k, mut value) = match t.raw.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (t.raw, None),
        };
        let key = svc_key(k).ok_or_else(|| format!("bad SvcParamKey {k:?}"))?;
        // `key="value"` is cut by the tokenizer into `key=` and `"value"`.
        if value.as_deref() == Some("") {
            match r.peek() {
                Some(v) if v.quoted => {
                    r.skip_one();
                    value = Some(v.raw.to_string());
                }
                _ => return Err(format!("SvcParam {k} has an empty value")),
            }
        }
        let raw = match &value {
            Some(v) => unescape(v).map_err(|e| format!("bad {k} value: {e}"))?,
            None => Vec::new(),
        };
        let bad = |why: &str| format!("bad {k} value {:?}: {why}", value.as_deref().unwrap_or(""));
        let mut v = Vec::new();
        match key {
            0 => {
                for item in raw.split(|&b| b == b',') {
                    let name = std::str::from_utf8(item).map_err(|_| bad("not a key list"))?;
                    let k = svc_key(name).ok_or_else(|| bad("not a key list"))?;
                    v.extend_from_slice(&k.to_be_bytes());
                }
            }
            1 => {
                // Commas separate ids; `\,` in the (once unescaped) value is a comma.
                let mut id = Vec::new();
                let mut i = 0;
                while i <= raw.len() {
                    match raw.get(i) {
                        Some(b'\\') if i + 1 < raw.len() => {
                            id.push(raw[i + 1]);
                            i += 2;
                            continue;
                        }
                        Some(b',') | None => {
                            if id.is_empty() {
                                return Err(bad("empty protocol id"));
                            }
                            push_string_vec(&id, &mut v).map_err(|_| bad("id over 255 bytes"))?;
                            id.clear();
                        }
                        Some(&b) => id.push(b),
                    }
                    i += 1;
                }
            }
            2 | 8 => {
                if value.is_some() {
                    return Err(bad("takes no value"));
                }
            }
            3 => {
                let s = std::str::from_utf8(&raw).map_err(|_| bad("not a port"))?;
                let p: u16 = parse_num(s).ok_or_else(|| bad("not a port"))?;
                v.extend_from_slice(&p.to_be_bytes());
            }
            4 | 6 => {
                let s = std::str::from_utf8(&raw).map_err(|_| bad("not an address list"))?;
                for a in s.split(',') {
                    if key == 4 {
                        let a: Ipv4Addr = a.parse().map_err(|_| bad("not IPv4 addresses"))?;
                        v.extend_from_slice(&a.octets());
                    } else {
                        let a: Ipv6Addr = a.parse().map_err(|_| bad("not IPv6 addresses"))?;
                        v.extend_from_slice(&a.octets());
                    }
                }
            }
            5 => {
                let s = std::str::from_utf8(&raw).map_err(|_| bad("not base64"))?;
                v = super::fields::decode_base64(s).ok_or_else(|| bad("not base64"))?;
            }
            _ => v = raw,
        }
        if params.iter().any(|(k2, _)| *k2 == key) {
            return Err(format!("SvcParamKey {k} given twice (RFC 9460 §2.2)"));
        }
        params.push((key, v));
    }
    if prio == 0 && !params.is_empty() {
        return Err("AliasMode (priority 0) takes no SvcParams (RFC 9460 §2.4.2)".into());
    }
    params.sort_by_key(|(k, _)| *k);
    for (k, v) in params {
        out.extend_from_slice(&k.to_be_bytes());
        let len = u16::try_from(v.len()).map_err(|_| "SvcParam value too long".to_string())?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&v);
    }
    Ok(())
}

/// Appends a length byte and `bytes` to a `Vec`.
fn push_string_vec(bytes: &[u8], out: &mut Vec<u8>) -> Result<(), ()> {
    out.push(u8::try_from(bytes.len()).map_err(|_| ())?);
    out.extend_from_slice(bytes);
    Ok(())
}

/// Presentation text of `wire` as RDATA of `rtype`, as BIND 9 writes it;
/// RFC 3597 `\#` for types with no form of their own. `None` when the
/// bytes are not valid for the type.
pub(crate) fn write(rtype: RType, wire: &[u8]) -> Option<String> {
    if !has_text_form(rtype) {
        return Some(write_generic(wire));
    }
    let mut w = Wire::new(wire);
    let mut s = String::with_capacity(wire.len() * 2);
    write_fields(rtype, &mut w, &mut s)?;
    w.at_end().then_some(s)
}

/// RFC 3597 §5 text of any RDATA.
pub(crate) fn write_generic(wire: &[u8]) -> String {
    let mut s = format!("\\# {}", wire.len());
    if !wire.is_empty() {
        s.push(' ');
        put_hex(&mut s, wire);
    }
    s
}

/// `write!` to a `String`, which cannot fail.
macro_rules! put {
    ($s:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = write!($s, $($arg)*);
    }};
}

fn write_fields(rtype: RType, w: &mut Wire<'_>, s: &mut String) -> Option<()> {
    match rtype.0 {
        A => put!(
            s,
            "{}",
            Ipv4Addr::from(<[u8; 4]>::try_from(w.take(4)?).ok()?)
        ),
        AAAA => put!(
            s,
            "{}",
            Ipv6Addr::from(<[u8; 16]>::try_from(w.take(16)?).ok()?)
        ),
        NS | MD | MF | CNAME | MB | MG | MR | PTR | NSAP_PTR | DNAME => put!(s, "{}", w.name()?),
        SOA => put!(
            s,
            "{} {} {} {} {} {} {}",
            w.name()?,
            w.name()?,
            w.u32()?,
            w.u32()?,
            w.u32()?,
            w.u32()?,
            w.u32()?
        ),
        WKS => {
            put!(
                s,
                "{} {}",
                Ipv4Addr::from(<[u8; 4]>::try_from(w.take(4)?).ok()?),
                w.u8()?
            );
            for (i, &b) in w.rest().iter().enumerate() {
                for bit in 0..8 {
                    if b & (0x80 >> bit) != 0 {
                        put!(s, " {}", i * 8 + bit);
                    }
                }
            }
        }
        HINFO => {
            put_string(s, w.string()?);
            s.push(' ');
            put_string(s, w.string()?);
        }
        MINFO | RP | TALINK => put!(s, "{} {}", w.name()?, w.name()?),
        MX | AFSDB | RT | KX | LP => put!(s, "{} {}", w.u16()?, w.name()?),
        TXT | SPF | NINFO | RESINFO | WALLET => {
            put_string(s, w.string()?);
            while !w.at_end() {
                s.push(' ');
                put_string(s, w.string()?);
            }
        }
        X25 => put_string(s, w.string()?),
        ISDN => {
            put_string(s, w.string()?);
            if !w.at_end() {
                s.push(' ');
                put_string(s, w.string()?);
            }
        }
        NSAP => {
            let d = w.rest();
            if d.is_empty() {
                return None;
            }
            s.push_str("0x");
            s.push_str(&data_encoding::HEXLOWER.encode(d));
        }
        SIG | RRSIG => {
            put!(
                s,
                "{} {} {} {} {} {} {} {} ",
                RType(w.u16()?),
                w.u8()?,
                w.u8()?,
                w.u32()?,
                time_text(w.u32()?),
                time_text(w.u32()?),
                w.u16()?,
                w.name()?
            );
            let sig = w.rest();
            if sig.is_empty() {
                return None;
            }
            put_base64(s, sig);
        }
        KEY | DNSKEY | CDNSKEY | RKEY => {
            put!(s, "{} {} {}", w.u16()?, w.u8()?, w.u8()?);
            let key = w.rest();
            if !key.is_empty() {
                s.push(' ');
                put_base64(s, key);
            } else if rtype.0 != KEY {
                return None;
            }
        }
        PX => put!(s, "{} {} {}", w.u16()?, w.name()?, w.name()?),
        GPOS => {
            for i in 0..3 {
                if i > 0 {
                    s.push(' ');
                }
                put_string(s, w.string()?);
            }
        }
        LOC => write_loc(w, s)?,
        NXT => {
            put!(s, "{}", w.name()?);
            for (i, &b) in w.rest().iter().enumerate() {
                for bit in 0..8 {
                    if b & (0x80 >> bit) != 0 {
                        put!(s, " {}", RType((i * 8 + bit) as u16));
                    }
                }
            }
        }
        EID | NIMLOC => {
            let d = w.rest();
            if d.is_empty() {
                return None;
            }
            put_hex(s, d);
        }
        SRV => put!(s, "{} {} {} {}", w.u16()?, w.u16()?, w.u16()?, w.name()?),
        NAPTR => {
            put!(s, "{} {} ", w.u16()?, w.u16()?);
            for _ in 0..3 {
                put_string(s, w.string()?);
                s.push(' ');
            }
            put!(s, "{}", w.name()?);
        }
        CERT => {
            let t = w.u16()?;
            match CERT_TYPES.iter().find(|(c, _)| *c == t) {
                Some((_, m)) => s.push_str(m),
                None => put!(s, "{t}"),
            }
            put!(s, " {} ", w.u16()?);
            put_algorithm(s, w.u8()?);
            s.push(' ');
            let d = w.rest();
            if d.is_empty() {
                return None;
            }
            put_base64(s, d);
        }
        A6 => {
            let plen = w.u8()?;
            if plen > 128 {
                return None;
            }
            put!(s, "{plen} ");
            if plen < 128 {
                let n = usize::from(16 - plen / 8);
                let mut octets = [0u8; 16];
                octets[16 - n..].copy_from_slice(w.take(n)?);
                put!(s, "{}", Ipv6Addr::from(octets));
            }
            if plen > 0 {
                put!(s, " {}", w.name()?);
            }
        }
        SINK => {
            put!(s, "{} {} {}", w.u8()?, w.u8()?, w.u8()?);
            let d = w.rest();
            if !d.is_empty() {
                s.push(' ');
                put_base64(s, d);
            }
        }
        APL => {
            let mut first = true;
            while !w.at_end() {
                let afi = w.u16()?;
                let prefix = w.u8()?;
                let nlen = w.u8()?;
                let d = w.take(usize::from(nlen & 0x7f))?;
                if !first {
                    s.push(' ');
                }
                first = false;
                if nlen & 0x80 != 0 {
                    s.push('!');
                }
                match afi {
                    1 if d.len() <= 4 && prefix <= 32 => {
                        let mut o = [0u8; 4];
                        o[..d.len()].copy_from_slice(d);
                        put!(s, "1:{}/{prefix}", Ipv4Addr::from(o));
                    }
                    2 if d.len() <= 16 && prefix <= 128 => {
                        let mut o = [0u8; 16];
                        o[..d.len()].copy_from_slice(d);
                        put!(s, "2:{}/{prefix}", Ipv6Addr::from(o));
                    }
                    _ => return None,
                }
            }
        }
        DS | CDS | TA | DLV => {
            put!(s, "{} {} {} ", w.u16()?, w.u8()?, w.u8()?);
            let d = w.rest();
            if d.is_empty() {
                return None;
            }
            put_hex(s, d);
        }
        SSHFP => {
            put!(s, "{} {} ", w.u8()?, w.u8()?);
            let d = w.rest();
            if d.is_empty() {
                return None;
            }
            put_hex(s, d);
        }
        IPSECKEY => {
            let prec = w.u8()?;
            let gw = w.u8()?;
            put!(s, "{prec} {gw} {} ", w.u8()?);
            write_gateway(w, gw, s)?;
            let key = w.rest();
            if !key.is_empty() {
                s.push(' ');
                put_base64(s, key);
            }
        }
        NSEC => {
            put!(s, "{}", w.name()?);
            put_bitmap(s, w.rest())?;
        }
        DHCID | OPENPGPKEY => {
            let d = w.rest();
            if d.is_empty() {
                return None;
            }
            put_base64(s, d);
        }
        NSEC3 | NSEC3PARAM => {
            put!(s, "{} {} {} ", w.u8()?, w.u8()?, w.u16()?);
            let salt = w.string()?;
            if salt.is_empty() {
                s.push('-');
            } else {
                put_hex_whole(s, salt);
            }
            if rtype.0 == NSEC3 {
                let hash = w.string()?;
                if hash.is_empty() {
                    return None;
                }
                s.push(' ');
                s.push_str(&data_encoding::BASE32HEX_NOPAD.encode(hash));
                put_bitmap(s, w.rest())?;
            }
        }
        TLSA | SMIMEA => {
            put!(s, "{} {} {} ", w.u8()?, w.u8()?, w.u8()?);
            let d = w.rest();
            if d.is_empty() {
                return None;
            }
            put_hex(s, d);
        }
        HIP => {
            let hit_len = usize::from(w.u8()?);
            let alg = w.u8()?;
            let pk_len = usize::from(w.u16()?);
            if hit_len == 0 || pk_len == 0 {
                return None;
            }
            put!(s, "{alg} ");
            put_hex_whole(s, w.take(hit_len)?);
            s.push(' ');
            put_base64_whole(s, w.take(pk_len)?);
            while !w.at_end() {
                put!(s, " {}", w.name()?);
            }
        }
        CSYNC => {
            put!(s, "{} {}", w.u32()?, w.u16()?);
            put_bitmap(s, w.rest())?;
        }
        ZONEMD => {
            put!(s, "{} {} {} ", w.u32()?, w.u8()?, w.u8()?);
            let d = w.rest();
            if d.len() < 12 {
                return None;
            }
            put_hex(s, d);
        }
        SVCB | HTTPS => write_svcb(w, s)?,
        // Four digits a group, as RFC 6742 writes them and Knot DNS reads
        // them (BIND 9 drops leading zeros, which Knot DNS 3.2 refuses).
        NID | L64 => put!(
            s,
            "{} {:04x}:{:04x}:{:04x}:{:04x}",
            w.u16()?,
            w.u16()?,
            w.u16()?,
            w.u16()?,
            w.u16()?
        ),
        L32 => put!(
            s,
            "{} {}",
            w.u16()?,
            Ipv4Addr::from(<[u8; 4]>::try_from(w.take(4)?).ok()?)
        ),
        EUI48 | EUI64 => {
            let n = if rtype.0 == EUI48 { 6 } else { 8 };
            for (i, b) in w.take(n)?.iter().enumerate() {
                if i > 0 {
                    s.push('-');
                }
                put!(s, "{b:02x}");
            }
        }
        URI => {
            put!(s, "{} {} ", w.u16()?, w.u16()?);
            let t = w.rest();
            if t.is_empty() {
                return None;
            }
            put_string(s, t);
        }
        CAA => {
            put!(s, "{} ", w.u8()?);
            let tag = w.string()?;
            if tag.is_empty() {
                return None;
            }
            put_escaped(s, tag, b"\"\\");
            s.push(' ');
            put_string(s, w.rest());
        }
        DOA => {
            put!(s, "{} {} {} ", w.u32()?, w.u32()?, w.u8()?);
            put_string(s, w.string()?);
            s.push(' ');
            let d = w.rest();
            if d.is_empty() {
                s.push('-');
            } else {
                put_base64_whole(s, d);
            }
        }
        AMTRELAY => {
            let prec = w.u8()?;
            let dt = w.u8()?;
            put!(s, "{prec} {} {} ", dt >> 7, dt & 0x7f);
            write_gateway(w, dt & 0x7f, s)?;
        }
        _ => return None,
    }
    Some(())
}

/// A DNSSEC algorithm as BIND 9 writes it in CERT: its mnemonic, else the
/// number.
fn put_algorithm(s: &mut String, alg: u8) {
    match ALGORITHMS.iter().find(|(c, _)| *c == alg) {
        Some((_, m)) => s.push_str(m),
        None => put!(s, "{alg}"),
    }
}

/// An IPSECKEY gateway or AMTRELAY relay of type `kind`.
fn write_gateway(w: &mut Wire<'_>, kind: u8, s: &mut String) -> Option<()> {
    match kind {
        0 => s.push('.'),
        1 => put!(
            s,
            "{}",
            Ipv4Addr::from(<[u8; 4]>::try_from(w.take(4)?).ok()?)
        ),
        2 => put!(
            s,
            "{}",
            Ipv6Addr::from(<[u8; 16]>::try_from(w.take(16)?).ok()?)
        ),
        3 => put!(s, "{}", w.name()?),
        _ => return None,
    }
    Some(())
}

/// (year, month 1-12, day 1-31) of day `days` since 1970-01-01, proleptic
/// Gregorian calendar (H. Hinnant's `civil_from_days`).
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A signature time as `YYYYMMDDHHmmSS` (RFC 4034 §3.2).
fn time_text(t: u32) -> String {
    let secs = i64::from(t);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    format!(
        "{y:04}{m:02}{d:02}{:02}{:02}{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// LOC as BIND 9 writes it (RFC 1876 Appendix A).
fn write_loc(w: &mut Wire<'_>, s: &mut String) -> Option<()> {
    if w.u8()? != 0 {
        return None;
    }
    let mut prec = [0u8; 3];
    for p in &mut prec {
        *p = w.u8()?;
        if *p >> 4 > 9 || *p & 0xf > 9 {
            return None;
        }
    }
    let lat = i64::from(w.u32()?) - (1i64 << 31);
    let lon = i64::from(w.u32()?) - (1i64 << 31);
    let alt = i64::from(w.u32()?) - 10_000_000;
    if lat.abs() > 90 * 3_600_000 || lon.abs() > 180 * 3_600_000 {
        return None;
    }
    let mut angle = |v: i64, pos: char, neg: char| {
        let a = v.abs();
        put!(
            s,
            "{} {} {}.{:03} {} ",
            a / 3_600_000,
            a / 60_000 % 60,
            a / 1000 % 60,
            a % 1000,
            if v >= 0 { pos } else { neg }
        );
    };
    angle(lat, 'N', 'S');
    angle(lon, 'E', 'W');
    put!(
        s,
        "{}{}.{:02}m",
        if alt < 0 { "-" } else { "" },
        alt.abs() / 100,
        alt.abs() % 100
    );
    for p in prec {
        let (m, e) = (u64::from(p >> 4), u32::from(p & 0xf));
        if e >= 2 {
            put!(s, " {}m", m * 10u64.pow(e - 2));
        } else {
            put!(s, " 0.{:02}m", m * 10u64.pow(e));
        }
    }
    Some(())
}

/// SVCB and HTTPS as BIND 9 writes them: names for the RFC 9460 keys,
/// `keyNNNNN="…"` for the rest.
fn write_svcb(w: &mut Wire<'_>, s: &mut String) -> Option<()> {
    put!(s, "{} {}", w.u16()?, w.name()?);
    let mut last: Option<u16> = None;
    while !w.at_end() {
        let key = w.u16()?;
        if last.is_some_and(|l| l >= key) {
            return None;
        }
        last = Some(key);
        let len = usize::from(w.u16()?);
        let v = w.take(len)?;
        let mut vw = Wire::new(v);
        s.push(' ');
        match key {
            0..=6 => s.push_str(SVC_KEYS[usize::from(key)].1),
            _ => put!(s, "key{key}"),
        }
        match key {
            0 => {
                if v.is_empty() || !v.len().is_multiple_of(2) {
                    return None;
                }
                s.push('=');
                for (i, k) in v.chunks(2).enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    let k = u16::from_be_bytes([k[0], k[1]]);
                    match SVC_KEYS.get(usize::from(k)).filter(|_| k <= 6) {
                        Some((_, m)) => s.push_str(m),
                        None => put!(s, "key{k}"),
                    }
                }
            }
            1 => {
                if v.is_empty() {
                    return None;
                }
                s.push_str("=\"");
                let mut first = true;
                while !vw.at_end() {
                    let id = vw.string()?;
                    if id.is_empty() {
                        return None;
                    }
                    if !first {
                        s.push(',');
                    }
                    first = false;
                    for &b in id {
                        match b {
                            b',' => s.push_str("\\\\,"),
                            b'\\' => s.push_str("\\\\\\\\"),
                            _ => put_escaped(s, &[b], b"\"\\"),
                        }
                    }
                }
                s.push('"');
            }
            2 => {
                if !v.is_empty() {
                    return None;
                }
            }
            3 => put!(s, "={}", vw.u16()?),
            4 | 6 => {
                let n = if key == 4 { 4 } else { 16 };
                if v.is_empty() || !v.len().is_multiple_of(n) {
                    return None;
                }
                s.push('=');
                for (i, a) in v.chunks(n).enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    if n == 4 {
                        put!(s, "{}", Ipv4Addr::from(<[u8; 4]>::try_from(a).ok()?));
                    } else {
                        put!(s, "{}", Ipv6Addr::from(<[u8; 16]>::try_from(a).ok()?));
                    }
                }
            }
            5 => {
                s.push('=');
                put_base64_whole(s, v);
            }
            _ => {
                if !v.is_empty() {
                    s.push('=');
                    put_string(s, v);
                }
            }
        }
        if key == 3 && v.len() != 2 {
            return None;
        }
    }
    Some(())
}

/// `1h30m` → 5400; `None` for plain numbers, anything else, or over 32 bits.
pub(crate) fn ttl_with_units(token: &[u8]) -> Option<u32> {
    units_total(token).and_then(|total| u32::try_from(total).ok())
}

/// The seconds a TTL with units stands for, as BIND 9 reads it (`ttl.c`):
/// numbers each followed by a unit, s, m, h, d or w in any case, summed;
/// a last number without a unit only when all before it add up to 0 (`0h30`
/// is 30, `1h30` is not a TTL). `None` for plain numbers and anything else;
/// saturates rather than overflow.
pub(crate) fn units_total(token: &[u8]) -> Option<u64> {
    let (mut total, mut number, mut digits, mut units) = (0u64, 0u64, 0usize, 0usize);
    for &c in token {
        if c.is_ascii_digit() {
            number = number
                .saturating_mul(10)
                .saturating_add(u64::from(c - b'0'));
            digits += 1;
            continue;
        }
        let unit = match c.to_ascii_lowercase() {
            b's' => 1,
            b'm' => 60,
            b'h' => 3600,
            b'd' => 86_400,
            b'w' => 604_800,
            _ => return None,
        };
        if digits == 0 {
            return None;
        }
        total = total.saturating_add(number.saturating_mul(unit));
        (number, digits, units) = (0, 0, units + 1);
    }
    if units == 0 {
        return None;
    }
    if digits != 0 {
        if total != 0 {
            return None;
        }
        total = number;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rr::{RType, Rdata};

    fn origin() -> Name {
        "example.org.".parse().expect("origin")
    }

    fn wire(rtype: &str, text: &str) -> Vec<u8> {
        let rtype: RType = rtype.parse().expect("type");
        Rdata::from_text(rtype, text, &origin())
            .unwrap_or_else(|e| panic!("{e}"))
            .as_wire()
            .to_vec()
    }

    fn hex(s: &str) -> Vec<u8> {
        decode_hex(&s.replace(' ', "")).expect("hex")
    }

    /// Wire forms given in the RFCs (RFC 9460 Appendix D, RFC 1876 §3's
    /// example as RFC 1876 Appendix A encodes it, RFC 3123 §4, RFC 1035 §3.4.2).
    #[test]
    fn rfc_examples_give_their_wire_form() {
        assert_eq!(
            wire("HTTPS", "0 foo.example.com."),
            hex("0000 03666f6f 076578616d706c65 03636f6d 00")
        );
        assert_eq!(wire("SVCB", "1 . port=53"), hex("0001 00 0003 0002 0035"));
        assert_eq!(
            wire("SVCB", "1 example.net. ipv6hint=2001:db8::1,2001:db8::53:1"),
            hex("0001 076578616d706c65 036e6574 00 0006 0020 \
                 20010db8000000000000000000000001 20010db8000000000000000000530001")
        );
        // Escaped alpn: "f\\oo,bar" and "h2".
        assert_eq!(
            wire("SVCB", r#"16 foo.example.org. alpn="f\\\\oo\\,bar,h2""#),
            hex("0010 03666f6f 076578616d706c65 036f7267 00 0001 000c 08665c6f6f2c626172 026832")
        );
        // Keys sorted on the wire whatever the text order (RFC 9460 §2.2).
        assert_eq!(
            wire(
                "SVCB",
                "1 . alpn=h2 mandatory=alpn,ipv4hint ipv4hint=192.0.2.1"
            ),
            hex("0001 00 0000 0004 00010004 0001 0003 026832 0004 0004 c0000201")
        );
        assert_eq!(
            wire("LOC", "42 21 54 N 71 06 18 W -24m 30m"),
            hex("00 33 16 13 89172dd0 70be15f0 00988d20")
        );
        assert_eq!(
            wire("APL", "1:192.168.32.0/21 !1:192.168.38.0/28"),
            hex("0001 15 03 c0a820 0001 1c 83 c0a826")
        );
        assert_eq!(wire("APL", ""), Vec::<u8>::new());
        assert_eq!(
            wire("WKS", "192.0.2.25 tcp 21 25 smtp"),
            hex("c0000219 06 0000 04 40")
        );
        assert_eq!(
            wire("CAA", "0 issue \"ca.example.net\""),
            hex("00 05 6973737565 63612e6578616d706c652e6e6574")
        );
        assert_eq!(
            wire("URI", "10 1 \"ftp://ftp1.example.com/public\""),
            [&hex("000a 0001")[..], b"ftp://ftp1.example.com/public"].concat()
        );
        assert_eq!(wire("EUI48", "00-00-5e-00-53-2a"), hex("00005e00532a"));
        assert_eq!(
            wire("NID", "10 0014:4fff:ff20:ee64"),
            hex("000a 00144fffff20ee64")
        );
        assert_eq!(wire("L32", "10 10.1.2.0"), hex("000a 0a010200"));
        assert_eq!(
            wire("AMTRELAY", "128 1 3 amtrelays.example.com."),
            [
                &hex("80 83")[..],
                &hex("09616d7472656c617973 076578616d706c65 03636f6d 00")
            ]
            .concat()
        );
        assert_eq!(
            wire("A6", "64 ::1:2:3:4 prefix.example."),
            [
                &hex("40 0001000200030004")[..],
                &hex("06707265666978 076578616d706c65 00")
            ]
            .concat()
        );
        assert_eq!(
            wire("CSYNC", "66 3 A NS AAAA"),
            hex("00000042 0003 00 04 60000008")
        );
        assert_eq!(wire("NXT", "next. A MX NXT"), hex("046e65787400 40010002"));
        assert_eq!(wire("TYPE65534", "\\# 5 0846480001"), hex("0846480001"));
        assert_eq!(
            wire("LOC", "\\# 16 00 33 16 13 89172dd0 70be15f0 00988d20"),
            wire("LOC", "42 21 54 N 71 06 18 W -24m 30m")
        );
        assert_eq!(wire("TYPE65280", "\\# 0"), Vec::<u8>::new());
    }

    /// Text read and written back is BIND 9's text (as `named-checkzone -D`
    /// writes it; every type is compared with BIND 9 in tests/tests/rrtypes.rs).
    #[test]
    fn text_is_written_as_bind9_writes_it() {
        for (rtype, input, output) in [
            (
                "LOC",
                "42 21 54 N 71 06 18 W -24m 30m",
                "42 21 54.000 N 71 6 18.000 W -24.00m 30m 10000m 10m",
            ),
            (
                "LOC",
                "60 9 N 24 39 E 10 20 2000 20",
                "60 9 0.000 N 24 39 0.000 E 10.00m 20m 2000m 20m",
            ),
            (
                "TXT",
                "\"a\\\"b;c\\\\d\" \"\\001x\" bare",
                "\"a\\\"b;c\\\\d\" \"\\001x\" \"bare\"",
            ),
            (
                "SVCB",
                "1 . alpn=h2,h3 port=8443 key7=\"/q{?dns}\" mandatory=alpn,port",
                "1 . mandatory=alpn,port alpn=\"h2,h3\" port=8443 key7=\"/q{?dns}\"",
            ),
            (
                "SVCB",
                r#"16 foo.example.org. alpn="f\\\\oo\\,bar,h2""#,
                r#"16 foo.example.org. alpn="f\\\\oo\\,bar,h2""#,
            ),
            ("HTTPS", "1 . key8 key65000=x", "1 . key8 key65000=\"x\""),
            ("A6", "128 prefix.example.", "128  prefix.example."),
            (
                "A6",
                "0 2345:00C1:CA11:0001:1234:5678:9ABC:DEF0",
                "0 2345:c1:ca11:1:1234:5678:9abc:def0",
            ),
            (
                "NSAP",
                "0x47.0005.80.005a00.0000.0001.e133.ffffff000161.00",
                "0x47000580005a0000000001e133ffffff00016100",
            ),
            (
                "GPOS",
                "-32.6882 116.8652 10.0",
                "\"-32.6882\" \"116.8652\" \"10.0\"",
            ),
            ("CERT", "1 0 8 AQID", "PKIX 0 RSASHA256 AQID"),
            (
                "DS",
                "1 RSASHA256 SHA-256 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "1 8 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF01234567 89ABCDEF",
            ),
            ("NSEC3PARAM", "1 0 0 -", "1 0 0 -"),
            ("KEY", "49152 3 8", "49152 3 8"),
            ("AMTRELAY", "0 0 0 .", "0 0 0 ."),
            ("DOA", "0 1 2 \"\" -", "0 1 2 \"\" -"),
            ("NULL", "\\# 4 deadbeef", "\\# 4 DEADBEEF"),
            ("TYPE31", "00ab", "00AB"),
            ("TYPE1", "\\# 4 C0000201", "192.0.2.1"),
            (
                "RESINFO",
                "qnamemin exterr=15-17",
                "\"qnamemin\" \"exterr=15-17\"",
            ),
            ("ISDN", "\"150862028003217\"", "\"150862028003217\""),
            ("WKS", "192.0.2.53 udp 53", "192.0.2.53 17 53"),
            (
                "EUI64",
                "00-00-5E-EF-10-00-00-2A",
                "00-00-5e-ef-10-00-00-2a",
            ),
            (
                "MINFO",
                "admin errors",
                "admin.example.org. errors.example.org.",
            ),
        ] {
            let rtype: RType = rtype.parse().expect("type");
            let rdata = Rdata::from_text(rtype, input, &origin()).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                rdata.to_text(rtype).expect("text"),
                output,
                "{rtype} {input}"
            );
            // And the text written reads back to the same bytes.
            let again = Rdata::from_text(rtype, output, &origin()).expect("reads back");
            assert_eq!(again, rdata, "{rtype} {output}");
        }
        assert_eq!(RType(38).to_string(), "A6");
        assert_eq!(RType(23).to_string(), "NSAP-PTR");
        assert_eq!(RType(64_000).to_string(), "TYPE64000");
        assert_eq!("type64000".parse::<RType>(), Ok(RType(64_000)));
        assert_eq!("nsap-ptr".parse::<RType>(), Ok(RType(23)));
    }

    /// Each bad input is an error naming the field, never a panic.
    #[test]
    fn bad_text_names_type_and_field() {
        for (rtype, input, message) in [
            (
                "LOC",
                "91 0 0 N 0 0 0 E 0",
                "bad latitude degrees \"91\": 0 to 90",
            ),
            (
                "LOC",
                "42 21 54 X 71 06 18 W -24m",
                "bad latitude hemisphere \"X\": N or S",
            ),
            ("LOC", "42 21 54 N 71 06 18 W", "missing altitude"),
            ("URI", "10 1 \"\"", "empty target (RFC 7553 §4.3)"),
            (
                "CAA",
                "0 is-sue \"x\"",
                "bad tag \"is-sue\": letters and digits only (RFC 8659 §4.1)",
            ),
            (
                "SVCB",
                "1 . port=99999",
                "bad port value \"99999\": not a port",
            ),
            (
                "SVCB",
                "1 . alpn=h2 alpn=h3",
                "SvcParamKey alpn given twice (RFC 9460 §2.2)",
            ),
            ("SVCB", "1 . bogus=1", "bad SvcParamKey \"bogus\""),
            (
                "HTTPS",
                "0 . alpn=h2",
                "AliasMode (priority 0) takes no SvcParams (RFC 9460 §2.4.2)",
            ),
            (
                "APL",
                "3:1.2.3.4/8",
                "bad address prefix \"3:1.2.3.4/8\": AFI must be 1 (IPv4) or 2 (IPv6)",
            ),
            (
                "APL",
                "1:1.2.3.4/33",
                "bad address prefix \"1:1.2.3.4/33\": PREFIX too long for the address family",
            ),
            (
                "EUI48",
                "00-00-5e-00-53",
                "bad address \"00-00-5e-00-53\": expected 6 hex pairs xx-xx-…",
            ),
            (
                "MD",
                "host.example.",
                "type MD is obsolete (RFC 973 §5.2.1): use MX",
            ),
            (
                "OPT",
                "\\# 0",
                "type OPT is a pseudo-record of a message (RFC 6891 §6.1.1), not zone data",
            ),
            (
                "NULL",
                "abc",
                "NULL rdata can only be written as RFC 3597 data: \\# LENGTH HEX",
            ),
            (
                "TYPE999",
                "abc",
                "TYPE999 has no presentation form here: write it as RFC 3597 data, \\# LENGTH HEX",
            ),
            (
                "A",
                "\\# 3 c00002",
                "the RFC 3597 data is not valid A rdata (RFC 3597 §5)",
            ),
            (
                "TYPE999",
                "\\# 3 c0000201",
                "RFC 3597 length 3 but 4 bytes of data (RFC 3597 §5)",
            ),
            (
                "TYPE999",
                "\\# x",
                "bad RFC 3597 length \"x\": expected 0 to 65535",
            ),
            ("SSHFP", "1 1 xyz", "bad fingerprint: not hex"),
            ("DNSKEY", "257 3 8", "missing public key"),
            ("HINFO", "\"PC\"", "missing OS"),
            ("TXT", "\"open", "quoted string not closed"),
            ("MX", "10 a..b.", "bad host name: empty label in \"a..b.\""),
            (
                "NSEC",
                "next. A BOGUS",
                "bad type \"BOGUS\" in the type bitmap",
            ),
            (
                "A",
                "192.0.2.1 192.0.2.2",
                "unexpected \"192.0.2.2\" after the last field",
            ),
            (
                "X25",
                "\"31106a\"",
                "bad PSDN address: digits only (RFC 1183 §3.1)",
            ),
            ("ZONEMD", "1 1 1 abcd", "missing digest"),
        ] {
            let t: RType = rtype.parse().expect("type");
            let e = Rdata::from_text(t, input, &origin()).expect_err(input);
            let crate::rr::RrError::BadText {
                rtype: got,
                text,
                reason,
            } = &e
            else {
                panic!("{e}");
            };
            assert_eq!((got, text.as_str()), (&t, input));
            assert_eq!(reason, message, "{rtype} {input}");
        }
        // A character-string over 255 bytes (escapes counted as the byte
        // they stand for) is refused, as BIND 9 refuses it (`named-checkzone`:
        // "syntax error"), the same in master files, SQL rows and `zone update`.
        let long = "a".repeat(300);
        let split = "write it as several quoted strings of at most 255 bytes each";
        for (rtype, input, message) in [
            (
                RType::TXT,
                format!("\"{long}\""),
                format!(
                    "text is 300 bytes long, over the 255 of a character-string (RFC 1035 §3.3): \
                     {split}"
                ),
            ),
            (
                RType(99),
                format!("ok {}", "\\065".repeat(256)),
                format!(
                    "text is 256 bytes long, over the 255 of a character-string (RFC 1035 §3.3): \
                     {split}"
                ),
            ),
            (
                RType(13),
                format!("\"{long}\" os"),
                "CPU is 300 bytes long, over the 255 of a character-string (RFC 1035 §3.3)".into(),
            ),
        ] {
            let e = Rdata::from_text(rtype, &input, &origin()).expect_err(&input);
            let crate::rr::RrError::BadText { reason, .. } = &e else {
                panic!("{e}");
            };
            assert_eq!(*reason, message, "{rtype}");
        }
        let max = Rdata::from_text(RType::TXT, &format!("\"{}\"", "a".repeat(255)), &origin())
            .expect("255 bytes");
        assert_eq!(max.as_wire().len(), 256);
        // Malformed wire data of a known type has no text.
        assert!(Rdata::from_wire(&[1, 2, 3]).to_text(RType::A).is_err());
        assert!(
            Rdata::from_wire(&[0, 1, 0, 3, 0, 3])
                .to_text(RType(64))
                .is_err()
        );
    }
}
