//! RDATA presentation text (RFC 1035 §5.1, RFC 3597 `\#`) read into wire
//! form, [`Rdata::from_text`], and written from it, [`Rdata::to_text`]: used
//! for BIND 10's `records.rdata` text, master files, zone edits, dumps and
//! the command-line tools.
//!
//! Two readers, one answer. The fast path here reads plain text of the
//! common types straight into wire form, for the sqlite3 backend, which
//! parses rows on every lookup. It handles only plain text: printable ASCII
//! without escapes, parentheses, comments or `@`, and for TXT only simple
//! quoted or bare strings. Anything else — and anything it would reject —
//! returns `None`, and the text goes to the reader of `types.rs`, which knows
//! every type's presentation form (and RFC 3597 `\#` for any type) and gives
//! every error. Every value the fast path accepts yields the bytes that
//! reader yields, and for the types NLnet Labs' `domain` scanner knows, the
//! bytes the scanner yields (checked by the tests below). Text is written by
//! `types.rs` as BIND 9 writes it.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use bytes::Bytes;
use domain::base::iana::{DigestAlgorithm, Nsec3HashAlgorithm, SecurityAlgorithm};

use crate::name::{MAX_LABEL_LEN, MAX_NAME_LEN, Name};
use crate::rr::{RType, Rdata, RrError};

pub(crate) mod fields;
pub(crate) mod types;

impl Rdata {
    /// Parses presentation text for `rtype` (RFC 1035 §5.1; RFC 3597 `\#` accepted
    /// for every type, §5). Relative names are completed with `origin`.
    ///
    /// Errors: [`RrError::BadText`] naming the type, the text and the field
    /// that is wrong.
    pub fn from_text(rtype: RType, text: &str, origin: &Name) -> Result<Rdata, RrError> {
        // Plain text of the common types is read directly (the sqlite3 backend
        // parses rows on every lookup); the full reader handles everything else.
        if let Some(wire) = parse(rtype, text, origin) {
            return Ok(Rdata::from_boxed(wire));
        }
        let bad = |reason: String| RrError::BadText {
            rtype,
            text: text.to_string(),
            reason,
        };
        let toks = fields::tokenize(text).map_err(bad)?;
        let wire = types::read(rtype, &toks, origin).map_err(bad)?;
        Ok(Rdata::from_boxed(wire.as_slice().into()))
    }

    /// Presentation text, as BIND 9 writes it on one line (`named-checkzone
    /// -D`) and as BIND 10's `rdata` column holds it: the type's own form, or
    /// RFC 3597 `\# LENGTH HEX` for a type without one (§5).
    ///
    /// Errors: [`RrError::BadWire`] when the bytes are not valid for `rtype`.
    pub fn to_text(&self, rtype: RType) -> Result<String, RrError> {
        types::write(rtype, self.as_wire()).ok_or(RrError::BadWire(rtype))
    }

    /// RFC 3597 §5 text of any RDATA: `\# LENGTH HEX`, hex in upper case
    /// split as BIND 9 splits it.
    pub fn to_generic_text(&self) -> String {
        types::write_generic(self.as_wire())
    }
}

/// `name` as the `domain` scanner's origin (the tests' reference reader).
///
/// Errors: [`RrError::BadText`] with type 0 and reason "bad origin" when
/// `domain` refuses the wire form.
pub(crate) fn to_domain_name(name: &Name) -> Result<domain::base::Name<Bytes>, RrError> {
    domain::base::Name::from_octets(Bytes::copy_from_slice(name.as_wire())).map_err(|_| {
        RrError::BadText {
            rtype: RType(0),
            text: name.to_string(),
            reason: "bad origin".into(),
        }
    })
}

/// Parses one record's RDATA text with the `domain` scanner, as the single
/// record `@ 0 IN <rtype> <text>` of a master file: the reference the tests
/// hold both readers to.
#[cfg(test)]
fn parse_rdata_text(rtype: RType, text: &str, origin: &Name) -> Result<Rdata, RrError> {
    let bad = |reason: String| RrError::BadText {
        rtype,
        text: text.to_string(),
        reason,
    };
    if text.contains(['\n', '\r']) {
        return Err(bad("line break in rdata".into()));
    }
    use domain::base::rdata::ComposeRecordData;
    use domain::zonefile::inplace::{Entry, Zonefile};
    let line = format!("@ 0 IN {rtype} {text}\n");
    let mut zf = Zonefile::with_capacity(line.len()).allow_invalid();
    zf.extend_from_slice(line.as_bytes());
    zf.set_origin(to_domain_name(origin)?);
    match zf.next_entry() {
        Ok(Some(Entry::Record(rec))) => {
            let mut wire = Vec::with_capacity(64);
            rec.data()
                .compose_rdata(&mut wire)
                .map_err(|_| bad("rdata too long".into()))?;
            if !matches!(zf.next_entry(), Ok(None)) {
                return Err(bad("trailing data".into()));
            }
            Ok(Rdata::from_wire(&wire))
        }
        Ok(_) => Err(bad("no record".into())),
        Err(e) => Err(bad(without_position(&e.to_string()).to_string())),
    }
}

/// `message` without the scanner's leading `line:column: `, which points into
/// the one-line text built above, not into anything the user wrote.
#[cfg(test)]
fn without_position(message: &str) -> &str {
    let mut parts = message.splitn(3, ':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(l), Some(c), Some(rest))
            if !l.is_empty()
                && !c.is_empty()
                && l.bytes().all(|b| b.is_ascii_digit())
                && c.bytes().all(|b| b.is_ascii_digit()) =>
        {
            rest.trim_start()
        }
        _ => message,
    }
}

/// Wire form of `text` as RDATA of `rtype`, or `None` when the text is not in
/// the plain form this parser handles (the caller then uses the scanner).
fn parse(rtype: RType, text: &str, origin: &Name) -> Option<Box<[u8]>> {
    let bytes = text.as_bytes();
    if rtype == RType::TXT {
        return txt(bytes);
    }
    // Bytes the scanner gives a meaning beyond "part of a word" end up inside
    // some word here, and every reader of a word rejects them: names check
    // each byte, the rest accept only digits, letters or their own alphabet.
    let mut t = Tokens { rest: text };
    let mut out = Buf::new();
    match rtype {
        RType::A => out.extend_from_slice(&Ipv4Addr::from_str(t.next()?).ok()?.octets()),
        RType::AAAA => out.extend_from_slice(&Ipv6Addr::from_str(t.next()?).ok()?.octets()),
        RType::NS | RType::CNAME | RType::DNAME | RType::PTR => name(t.next()?, origin, &mut out)?,
        RType::MX => {
            out.extend_from_slice(&t.num::<u16>()?.to_be_bytes());
            name(t.next()?, origin, &mut out)?;
        }
        RType::SRV => {
            for _ in 0..3 {
                out.extend_from_slice(&t.num::<u16>()?.to_be_bytes());
            }
            name(t.next()?, origin, &mut out)?;
        }
        RType::SOA => {
            name(t.next()?, origin, &mut out)?;
            name(t.next()?, origin, &mut out)?;
            for _ in 0..5 {
                out.extend_from_slice(&t.num::<u32>()?.to_be_bytes());
            }
        }
        RType::DS | RType::CDS => {
            out.extend_from_slice(&t.num::<u16>()?.to_be_bytes());
            out.push(SecurityAlgorithm::from_str(t.next()?).ok()?.to_int());
            out.push(DigestAlgorithm::from_str(t.next()?).ok()?.to_int());
            let digest: String = t.by_ref().collect();
            if digest.is_empty() {
                return None;
            }
            out.extend(
                data_encoding::HEXLOWER_PERMISSIVE
                    .decode(digest.as_bytes())
                    .ok()?,
            );
        }
        RType::DNSKEY | RType::CDNSKEY => {
            out.extend_from_slice(&t.num::<u16>()?.to_be_bytes());
            out.push(t.num::<u8>()?);
            out.push(SecurityAlgorithm::from_str(t.next()?).ok()?.to_int());
            base64_rest(&mut t, &mut out)?;
        }
        RType::RRSIG => {
            out.extend_from_slice(&RType::from_str(t.next()?).ok()?.0.to_be_bytes());
            out.push(SecurityAlgorithm::from_str(t.next()?).ok()?.to_int());
            out.push(t.num::<u8>()?);
            out.extend_from_slice(&t.num::<u32>()?.to_be_bytes());
            out.extend_from_slice(&sig_time(t.next()?)?.to_be_bytes());
            out.extend_from_slice(&sig_time(t.next()?)?.to_be_bytes());
            out.extend_from_slice(&t.num::<u16>()?.to_be_bytes());
            name(t.next()?, origin, &mut out)?;
            base64_rest(&mut t, &mut out)?;
        }
        RType::NSEC => {
            name(t.next()?, origin, &mut out)?;
            type_bitmap(&mut t, &mut out).ok()?;
        }
        RType::NSEC3 | RType::NSEC3PARAM => {
            out.push(Nsec3HashAlgorithm::from_str(t.next()?).ok()?.to_int());
            out.push(t.num::<u8>()?);
            out.extend_from_slice(&t.num::<u16>()?.to_be_bytes());
            let salt = t.next()?;
            if salt == "-" {
                out.push(0);
            } else {
                let salt = data_encoding::HEXLOWER_PERMISSIVE
                    .decode(salt.as_bytes())
                    .ok()?;
                out.push(u8::try_from(salt.len()).ok()?);
                out.extend(salt);
            }
            if rtype == RType::NSEC3 {
                let hash = base32hex(t.next()?)?;
                out.push(u8::try_from(hash.len()).ok()?);
                out.extend(hash);
                type_bitmap(&mut t, &mut out).ok()?;
            }
        }
        _ => return None,
    }
    // Trailing tokens: the scanner reports the error.
    if t.next().is_some() || out.len() > usize::from(u16::MAX) {
        return None;
    }
    Some(out.as_slice().into())
}

/// Bytes of plain text ([`PLAIN_WORD`]) and of plain TXT text
/// ([`PLAIN_TXT`]): printable ASCII, space and tab, without the bytes the
/// scanner gives a meaning beyond "part of a word" (quotes only for TXT, `@`
/// allowed there).
const PLAIN: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0x21;
    while b < 0x7f {
        t[b] = PLAIN_WORD | PLAIN_TXT;
        b += 1;
    }
    t[b' ' as usize] = PLAIN_WORD | PLAIN_TXT;
    t[b'\t' as usize] = PLAIN_WORD | PLAIN_TXT;
    t[b'"' as usize] = PLAIN_TXT;
    t[b'@' as usize] = PLAIN_TXT;
    t[b'(' as usize] = 0;
    t[b')' as usize] = 0;
    t[b';' as usize] = 0;
    t[b'\\' as usize] = 0;
    t
};
const PLAIN_WORD: u8 = 1;
const PLAIN_TXT: u8 = 2;

/// Wire form under construction: on the stack for all but the largest RDATA.
pub(crate) type Buf = smallvec::SmallVec<[u8; 512]>;

/// The words of plain RDATA text, separated by spaces and tabs.
struct Tokens<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a str;
    fn next(&mut self) -> Option<&'a str> {
        let is_space = |b: &u8| *b == b' ' || *b == b'\t';
        let b = self.rest.as_bytes();
        let start = b.iter().position(|c| !is_space(c))?;
        let len = b[start..]
            .iter()
            .position(is_space)
            .unwrap_or(b.len() - start);
        let word = self.rest.get(start..start + len)?;
        self.rest = self.rest.get(start + len..)?;
        Some(word)
    }
}

impl Tokens<'_> {
    /// The next word as an unsigned decimal number: ASCII digits only, as the
    /// scanner reads integers (no sign, no units).
    fn num<T: FromStr>(&mut self) -> Option<T> {
        let w = self.next()?;
        if !w.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        w.parse().ok()
    }
}

/// Appends the wire form of a plain domain name: absolute with a trailing dot,
/// else completed with `origin`. No escapes (excluded by the caller).
fn name(w: &str, origin: &Name, out: &mut Buf) -> Option<()> {
    let start = out.len();
    if w == "." {
        out.push(0);
        return Some(());
    }
    let (body, absolute) = match w.strip_suffix('.') {
        Some(b) => (b, true),
        None => (w, false),
    };
    if !w.bytes().all(|b| PLAIN[b as usize] & PLAIN_WORD != 0) {
        return None;
    }
    for label in body.split('.') {
        if label.is_empty() || label.len() > MAX_LABEL_LEN {
            return None;
        }
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    if absolute {
        out.push(0);
    } else {
        out.extend_from_slice(origin.as_wire());
    }
    (out.len() - start <= MAX_NAME_LEN).then_some(())
}

/// Appends the base64 (RFC 4648 §4) of all remaining words, which may split it
/// anywhere (RFC 4034 §2.2, §3.2). Canonical data only: padding just at the
/// end and zero bits after the last byte (the scanner accepts more).
fn base64_rest(t: &mut Tokens<'_>, out: &mut Buf) -> Option<()> {
    let b = std::mem::take(&mut t.rest).as_bytes();
    // Decoded through a buffer on the stack, appended a block at a time.
    let mut dst = [0u8; 768];
    let mut w = 0;
    let (mut acc, mut n, mut pad, mut any) = (0u32, 0u32, 0u32, false);
    let mut i = 0;
    while i < b.len() {
        // Whole groups of four plain symbols at a time.
        if n == 0
            && pad == 0
            && let Some(q) = b.get(i..i + 4)
        {
            let v = [
                B64[q[0] as usize],
                B64[q[1] as usize],
                B64[q[2] as usize],
                B64[q[3] as usize],
            ];
            if (v[0] | v[1] | v[2] | v[3]) & 0xc0 == 0 {
                if w + 3 > dst.len() {
                    out.extend_from_slice(&dst[..w]);
                    w = 0;
                }
                let x = (u32::from(v[0]) << 18)
                    | (u32::from(v[1]) << 12)
                    | (u32::from(v[2]) << 6)
                    | u32::from(v[3]);
                let d = dst.get_mut(w..w + 3)?;
                (d[0], d[1], d[2]) = ((x >> 16) as u8, (x >> 8) as u8, x as u8);
                w += 3;
                any = true;
                i += 4;
                continue;
            }
        }
        let c = b[i];
        i += 1;
        if c == b' ' || c == b'\t' {
            continue;
        }
        any = true;
        let v = B64[c as usize];
        if v == PAD {
            pad += 1;
            continue;
        }
        if v == BAD || pad > 0 {
            return None;
        }
        acc = (acc << 6) | u32::from(v);
        n += 1;
        if n == 4 {
            if w + 3 > dst.len() {
                out.extend_from_slice(&dst[..w]);
                w = 0;
            }
            let d = dst.get_mut(w..w + 3)?;
            (d[0], d[1], d[2]) = ((acc >> 16) as u8, (acc >> 8) as u8, acc as u8);
            w += 3;
            (acc, n) = (0, 0);
        }
    }
    out.extend_from_slice(&dst[..w]);
    // A partial group of 2 or 3 symbols needs 2 or 1 padding symbols.
    match (n, pad) {
        (0, 0) => {}
        (2, 2) if acc & 0xf == 0 => out.push((acc >> 4) as u8),
        (3, 1) if acc & 0x3 == 0 => {
            out.extend_from_slice(&((acc >> 2) as u16).to_be_bytes());
        }
        _ => return None,
    }
    any.then_some(())
}

/// Base64 symbol values; [`PAD`] for `=`, [`BAD`] for the rest.
const B64: [u8; 256] = {
    let mut t = [BAD; 256];
    let mut i = 0;
    while i < 26 {
        t[b'A' as usize + i] = i as u8;
        t[b'a' as usize + i] = 26 + i as u8;
        i += 1;
    }
    let mut d = 0;
    while d < 10 {
        t[b'0' as usize + d] = 52 + d as u8;
        d += 1;
    }
    t[b'+' as usize] = 62;
    t[b'/' as usize] = 63;
    t[b'=' as usize] = PAD;
    t
};
const PAD: u8 = 0x40;
const BAD: u8 = 0xff;

/// Base32hex without padding (RFC 4648 §7, RFC 5155 §3.3), either case; a
/// trailing partial group as the scanner decodes it.
fn base32hex(w: &str) -> Option<Vec<u8>> {
    let mut vals = Vec::with_capacity(w.len());
    for b in w.bytes() {
        vals.push(match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'v' => b - b'a' + 10,
            b'A'..=b'V' => b - b'A' + 10,
            _ => return None,
        });
    }
    if matches!(vals.len() % 8, 1 | 3 | 6) {
        return None;
    }
    let mut out = Vec::with_capacity(vals.len() * 5 / 8);
    for chunk in vals.chunks(8) {
        let mut g = [0u8; 8];
        g[..chunk.len()].copy_from_slice(chunk);
        let bytes = [
            (g[0] << 3) | (g[1] >> 2),
            (g[1] << 6) | (g[2] << 1) | (g[3] >> 4),
            (g[3] << 4) | (g[4] >> 1),
            (g[4] << 7) | (g[5] << 2) | (g[6] >> 3),
            (g[6] << 5) | g[7],
        ];
        let n = match chunk.len() {
            8 => 5,
            7 => 4,
            5 => 3,
            4 => 2,
            _ => 1,
        };
        out.extend_from_slice(&bytes[..n]);
    }
    Some(out)
}

/// The type bitmap of NSEC/NSEC3/CSYNC (RFC 4034 §4.1.2) from the remaining
/// type mnemonics; none gives an empty bitmap.
///
/// Errors: the first word that is not a type.
fn type_bitmap<'a>(t: &mut impl Iterator<Item = &'a str>, out: &mut Buf) -> Result<(), &'a str> {
    let mut codes: smallvec::SmallVec<[u16; 16]> = smallvec::SmallVec::new();
    for w in t {
        codes.push(RType::from_str(w).map_err(|_| w)?.0);
    }
    codes.sort_unstable();
    codes.dedup();
    encode_type_bitmap(&codes, out);
    Ok(())
}

/// Appends the RFC 4034 §4.1.2 type bit maps field of `codes` (sorted,
/// unique) to `out`: per window, its number, the length of its bitmap in
/// bytes and the bitmap.
pub(crate) fn encode_type_bitmap(codes: &[u16], out: &mut impl Extend<u8>) {
    let mut i = 0;
    while let Some(&first) = codes.get(i) {
        let win = first >> 8;
        let mut bits = [0u8; 32];
        let mut len = 0;
        while let Some(&c) = codes.get(i).filter(|c| **c >> 8 == win) {
            let low = usize::from(c & 0xff);
            bits[low / 8] |= 0x80 >> (low % 8);
            len = low / 8 + 1;
            i += 1;
        }
        out.extend([win as u8, len as u8]);
        out.extend(bits[..len].iter().copied());
    }
}

/// An RRSIG time (RFC 4034 §3.2): up to ten digits of seconds, or
/// `YYYYMMDDHHmmSS` in UTC taken modulo 2^32 (RFC 4034 §3.1.5). Only dates
/// from 1970 to 2105 with a second below 60 are handled here.
fn sig_time(w: &str) -> Option<u32> {
    let b = w.as_bytes();
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if b.len() <= 10 {
        return w.parse().ok();
    }
    if b.len() != 14 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> i64 {
        b[r].iter()
            .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'))
    };
    let (y, m, d) = (num(0..4), num(4..6), num(6..8));
    let (hh, mm, ss) = (num(8..10), num(10..12), num(12..14));
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if !(1970..=2105).contains(&y) || d < 1 || d > month_days || hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    // Days from 1970-01-01 to y-m-d (proleptic Gregorian calendar).
    let (yy, mm_) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * mm_ + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u32::try_from(days * 86_400 + hh * 3600 + mm * 60 + ss).ok()
}

/// TXT (RFC 1035 §3.3.14): one character-string per word, bare or in quotes;
/// no escapes, at most 255 bytes each.
fn txt(bytes: &[u8]) -> Option<Box<[u8]>> {
    if !bytes.iter().all(|&b| PLAIN[b as usize] & PLAIN_TXT != 0) {
        return None;
    }
    let mut out = Buf::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b' ' | b'\t' => i += 1,
            b'"' => {
                let len = bytes[i + 1..].iter().position(|&b| b == b'"')?;
                let s = &bytes[i + 1..i + 1 + len];
                i += len + 2;
                // A word must end at white space.
                if bytes.get(i).is_some_and(|&b| b != b' ' && b != b'\t') {
                    return None;
                }
                out.push(u8::try_from(s.len()).ok()?);
                out.extend_from_slice(s);
            }
            _ => {
                let len = bytes[i..]
                    .iter()
                    .position(|&b| b == b' ' || b == b'\t')
                    .unwrap_or(bytes.len() - i);
                let s = &bytes[i..i + len];
                if s.contains(&b'"') {
                    return None;
                }
                i += len;
                out.push(u8::try_from(s.len()).ok()?);
                out.extend_from_slice(s);
            }
        }
    }
    (!out.is_empty() && out.len() <= usize::from(u16::MAX)).then(|| out.as_slice().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Name {
        "example.org.".parse().expect("name")
    }

    /// The fast path agrees with the scanner wherever it answers.
    fn same(rtype: RType, text: &str, origin: &Name, expect_fast: bool) {
        let fast = parse(rtype, text, origin);
        let slow = parse_rdata_text(rtype, text, origin);
        match (&fast, &slow) {
            (Some(f), Ok(s)) => assert_eq!(&f[..], s.as_wire(), "{rtype} {text:?}"),
            (Some(f), Err(e)) => panic!("{rtype} {text:?}: fast {f:02x?}, scanner {e}"),
            (None, _) => {}
        }
        assert_eq!(fast.is_some(), expect_fast, "{rtype} {text:?}: {slow:?}");
    }

    #[test]
    fn fast_path_matches_scanner() {
        let org: Name = "example.org.".parse().expect("name");
        let root = Name::root();
        let yes: &[(RType, &str)] = &[
            (RType::A, "192.0.2.1"),
            (RType::A, "  10.0.0.255\t"),
            (RType::AAAA, "2001:db8::1"),
            (RType::AAAA, "::ffff:192.0.2.1"),
            (RType::AAAA, "2001:503:A83E::2:30"),
            (RType::NS, "a.root-servers.net."),
            (RType::NS, "ns1"),
            (RType::NS, "Ns1.Sub"),
            (RType::NS, "."),
            (RType::CNAME, "*.wild.example.com."),
            (RType::CNAME, "_sip._tcp.x-y.example."),
            (RType::DNAME, "target.example."),
            (RType::PTR, "host/a.example."),
            (RType::MX, "10 mail.example.org."),
            (RType::MX, "0 mail"),
            (RType::SRV, "0 5 5060 sip.example.org."),
            (
                RType::SOA,
                "a.root-servers.net. nstld.verisign-grs.com. 2020101902 1800 900 604800 86400",
            ),
            (RType::SOA, "ns hostmaster 4294967295 0 1 2 3"),
            (RType::TXT, "\"No address is here\""),
            (RType::TXT, "\"a\" \"b c\"  \"\""),
            (RType::TXT, "bare words"),
            (RType::TXT, "\"semi\" x \"q\""),
            (
                RType::DS,
                "30909 8 2 E2D3C916F6DEEAC73294E8268FB5885044A833FC5459588F4A9184CFC41A5766",
            ),
            (
                RType::DS,
                "33313 5 1 FDD7A2C11AA7F55D50FBF9B7EDDA2322C541 A8DE",
            ),
            (RType::DNSKEY, "257 3 8 AwEAAcOU NGV7WcTD"),
            (RType::DNSKEY, "257 3 8 AQ== "),
            (RType::DNSKEY, "257 3 8 A Q = ="),
            (RType::DNSKEY, "257 3 8 AAE="),
            (RType::DNSKEY, "257 3 8 +/+/ //8="),
            (
                RType::DNSKEY,
                "256 3 8 AwEAAfC/6HLClwss6h7rPfoG2cliv4/SPJRd2HPEglRsvKZR bPP2RLfiobeAkczcdqaD5q8loEt14lcTgDqwzOISZ3YvSVkM4JRMFwKzcjukKo5C AQ==",
            ),
            (
                RType::RRSIG,
                "SOA 8 0 86400 1604257200 1603130400 26116 . yk1P3BrjyzygqlZUP+ucni04vcXC8jjaVmKAi97DNA+o0bIOnbzZCT9AcGADGmN2xhPHk+dGpNr6 AAA=",
            ),
            (
                RType::RRSIG,
                "A 5 3 3600 20100322084538 20100220084538 33495 example.com. FAKEFAKEFAKEFAKE",
            ),
            (
                RType::RRSIG,
                "NSEC 8 1 86400 20201101190000 19700101000000 1 x AA==",
            ),
            (
                RType::RRSIG,
                "TYPE65534 8 1 0 20000229235959 20991231235959 1 x AA==",
            ),
            (
                RType::RRSIG,
                "dnskey 8 1 0 21051231235959 21051231235959 1 x. AA==",
            ),
            (RType::RRSIG, "A 8 1 0 4294967295 0 65535 x. AA=="),
            (RType::NSEC, "aaa. NS SOA RRSIG NSEC DNSKEY"),
            (RType::NSEC, "comcast. NS DS RRSIG NSEC"),
            (RType::NSEC, "x.example.org. A TYPE1234 CAA TYPE65535 a"),
            (
                RType::NSEC3,
                "1 1 12 aabbccdd 2T7B4G4VSA5SMI47K61MV5BV1A22BOJR A RRSIG",
            ),
            (
                RType::NSEC3,
                "1 0 0 - 2t7b4g4vsa5smi47k61mv5bv1a22bojr NS SOA",
            ),
            (RType::NSEC3, "1 0 0 - 2T7B4G4 NS"),
            (RType::NSEC3PARAM, "1 0 10 AABBCCDD"),
            (RType::NSEC3PARAM, "1 0 0 -"),
            (RType::NSEC, "next."),
            (RType::NSEC3, "1 0 0 - 2T7B4G4"),
        ];
        for (t, text) in yes {
            same(*t, text, &org, true);
            same(*t, text, &root, true);
        }
        let no: &[(RType, &str)] = &[
            (RType::A, "999.1.1.1"),
            (RType::A, "192.0.2.1 extra"),
            (RType::A, "192.0.2.1;x"),
            (RType::A, "( 192.0.2.1 )"),
            (RType::A, "192.0.2.1 ; comment"),
            (RType::AAAA, "2001:db8::1%eth0"),
            (RType::NS, "a(b.example."),
            (RType::NS, "a\"b\".example."),
            (RType::NS, "caf\u{e9}.example."),
            (RType::NS, "a;b.example."),
            (RType::MX, "10 @"),
            (RType::MX, "1(0 x."),
            (RType::DS, "1 8 2 abcd(ef"),
            (RType::DS, "1 8 2 ab\"cd"),
            (RType::DNSKEY, "257 3 8 AwEA;AcOU"),
            (RType::DNSKEY, "257 3 8 ( AwEAAcOU )"),
            (RType::RRSIG, "A;x 8 1 0 1 0 1 x. AA=="),
            (RType::RRSIG, "A 8 1 0 1 0 1 x(y. AA=="),
            (RType::NSEC, "next. A;B"),
            (RType::NSEC, "next. A (NS)"),
            (RType::NSEC3PARAM, "1 0 0 a(b"),
            (RType::A, "\\# 4 c0000202"),
            (RType::NS, "a\\.b.example."),
            (RType::NS, "a\\065b.example."),
            (RType::NS, "@"),
            (RType::NS, "a..b."),
            (RType::MX, "-1 x."),
            (RType::MX, "65536 x."),
            (RType::MX, "+1 x."),
            (RType::SOA, "ns hm 1 1h 2 3 4"),
            (RType::TXT, "\"a\\\"b\""),
            (RType::TXT, "\"x\\065\""),
            (RType::TXT, "a\"b\""),
            (RType::TXT, "\"ab\"c"),
            (RType::TXT, "\"open"),
            (RType::TXT, "\"\u{e9}\""),
            (RType::TXT, ""),
            (RType::DS, "1 8 2"),
            (RType::DS, "1 RSASHA256 2 abcdef01"),
            (RType::DNSKEY, "257 3 ECDSAP256SHA256 AAAA AA=="),
            (RType::DS, "1 8 2 abc"),
            (RType::DNSKEY, "257 3 8 AwEAAcO"),
            (RType::DNSKEY, "257 3 8 AA==AA=="),
            (RType::DNSKEY, "257 3 8 AB=="),
            (RType::DNSKEY, "257 3 8 AAB="),
            (RType::DNSKEY, "257 3 8 AA="),
            (RType::DNSKEY, "257 3 8 AAAAA"),
            (RType::DNSKEY, "257 3 8 AA!A"),
            (RType::DNSKEY, "257 3 8 ===="),
            (
                RType::RRSIG,
                "A 8 1 0 20210229000000 20200101000000 1 x. AA==",
            ),
            (
                RType::RRSIG,
                "A 8 1 0 20200101000060 20200101000000 1 x. AA==",
            ),
            (
                RType::RRSIG,
                "A 8 1 0 202001010000 20200101000000 1 x. AA==",
            ),
            (RType::RRSIG, "A 8 1 0 +1234 20200101000000 1 x. AA=="),
            (RType::NSEC, "next. BOGUS"),
            (RType::NSEC3, "1 0 0 - 2T7B4G NS"),
            (RType::NSEC3, "1 0 0 - 2T7B4G4= NS"),
            (RType::NSEC3PARAM, "1 0 0 abc"),
            (RType(257), "0 issue \"ca.example\""),
            (RType(65534), "\\# 1 00"),
        ];
        for (t, text) in no {
            same(*t, text, &org, false);
        }
        // Long names and labels: exactly at the limits, and one over.
        let l63 = "a".repeat(63);
        let at_limit = format!("{l63}.{l63}.{l63}.{}.", "b".repeat(61));
        same(RType::NS, &at_limit, &root, true);
        same(
            RType::NS,
            &format!("{l63}.{l63}.{l63}.{}.", "b".repeat(62)),
            &root,
            false,
        );
        same(RType::NS, &format!("{}a.", l63), &root, false);
        same(RType::TXT, &format!("\"{}\"", "x".repeat(255)), &root, true);
        same(
            RType::TXT,
            &format!("\"{}\"", "x".repeat(256)),
            &root,
            false,
        );
    }

    #[test]
    fn signature_times_match_scanner_across_dates() {
        let root = Name::root();
        for y in [1970, 1999, 2000, 2020, 2038, 2100, 2105] {
            for (m, d) in [(1, 1), (2, 28), (2, 29), (3, 1), (6, 30), (12, 31)] {
                let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
                let t = format!("{y:04}{m:02}{d:02}235959");
                let text = format!("A 8 1 0 {t} {t} 1 x. AA==");
                same(RType::RRSIG, &text, &root, leap || (m, d) != (2, 29));
            }
        }
    }

    /// Every record of the test zones, as their files spell the RDATA (dates,
    /// split base64) and as `to_text` writes it (what loadzone stores).
    #[test]
    fn fast_path_matches_scanner_on_test_zones() {
        let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data");
        let zones = [
            ("root.zone", "."),
            ("bind10/rfc5155-example.zone.signed", "example."),
            ("bind10/example.org.nsec3-signed", "example.org."),
        ];
        let mut fast_count = 0;
        for (file, origin) in zones {
            let origin: Name = origin.parse().expect("origin");
            let path = data.join(file);
            let text = std::fs::read_to_string(&path).expect("zone file");
            for line in text.lines() {
                let words: Vec<&str> = line.split_whitespace().collect();
                let Some(i) = words.iter().position(|w| *w == "IN") else {
                    continue;
                };
                if line.starts_with(';') || line.contains('(') || words.len() < i + 3 {
                    continue;
                }
                let Ok(rtype) = words[i + 1].parse::<RType>() else {
                    continue;
                };
                let rdata = words[i + 2..].join(" ");
                let fast = parse(rtype, &rdata, &origin).is_some();
                same(rtype, &rdata, &origin, fast);
                fast_count += usize::from(fast);
            }
            let records = crate::zonefile::read_master_file(&path, &origin).expect("zone");
            for r in &records {
                let text = r.record.rdata.to_text(r.record.rtype).expect("to_text");
                let fast = parse(r.record.rtype, &text, &origin);
                let common = matches!(
                    r.record.rtype,
                    RType::A
                        | RType::AAAA
                        | RType::NS
                        | RType::CNAME
                        | RType::MX
                        | RType::SOA
                        | RType::DS
                        | RType::RRSIG
                        | RType::NSEC
                        | RType::DNSKEY
                        | RType::NSEC3
                        | RType::NSEC3PARAM
                );
                if common || fast.is_some() {
                    assert_eq!(
                        fast.as_deref(),
                        Some(r.record.rdata.as_wire()),
                        "{} {text}",
                        r.record.rtype
                    );
                }
            }
        }
        assert!(fast_count > 20_000, "{fast_count}");
    }

    #[test]
    fn rdata_text_round_trip() {
        let o = origin();
        let soa = Rdata::from_text(
            RType::SOA,
            "ns1.example.org. admin.example.org. 1234 3600 1800 2419200 7200",
            &o,
        )
        .expect("soa");
        assert_eq!(soa.soa_serial(), Some(1234));
        assert_eq!(soa.soa_minimum(), Some(7200));
        let ds = Rdata::from_text(
            RType::DS,
            "33313 5 1 FDD7A2C11AA7F55D50FBF9B7EDDA2322C541 A8DE",
            &o,
        )
        .expect("ds with embedded space");
        assert_eq!(ds.as_wire().len(), 4 + 20);
        let txt = Rdata::from_text(RType::TXT, "\"No address is here\"", &o).expect("txt");
        assert_eq!(
            txt.to_text(RType::TXT).expect("text"),
            "\"No address is here\""
        );
        assert!(Rdata::from_text(RType::A, "not-an-address", &o).is_err());
    }

    #[test]
    fn rdata_text_errors_name_no_internal_position() {
        let o = origin();
        let e = Rdata::from_text(RType::MX, "ten mail.example.org.", &o).expect_err("mx");
        let message = e.to_string();
        assert!(message.contains("ten mail.example.org."), "{message}");
        let RrError::BadText { reason, .. } = e else {
            panic!("not BadText: {message}");
        };
        assert!(
            !reason.starts_with(|c: char| c.is_ascii_digit()),
            "reason {reason:?} starts with a position"
        );
        assert_eq!(without_position("2:1: bad"), "bad");
        assert_eq!(without_position("no: position"), "no: position");
    }
}
