//! The pieces every type's presentation text is made of (RFC 1035 §5.1,
//! RFC 3597 §5), read from tokens into wire form ([`Reader`]) and written
//! from wire form as BIND 9 writes them ([`Wire`] and the `put_*` writers).

use std::net::{Ipv4Addr, Ipv6Addr};

use super::Buf;
use crate::name::{Name, wire_name_len};

/// One word of RDATA text: a bare word with its backslash escapes still in
/// it, or the inside of a quoted string (quotes removed, escapes kept).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tok<'a> {
    /// The text, escapes not yet decoded.
    pub(crate) raw: &'a str,
    /// Written in double quotes.
    pub(crate) quoted: bool,
}

/// Cuts RDATA text into words: white space and parentheses separate words,
/// `;` starts a comment to the end, `"…"` is one word (RFC 1035 §5.1).
///
/// Errors: an unterminated quoted string or a backslash at the very end.
pub(crate) fn tokenize(text: &str) -> Result<Vec<Tok<'_>>, String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' | b'\r' | b'\n' | b'(' | b')' => i += 1,
            b';' => break,
            b'"' => {
                let start = i + 1;
                i = start;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                if i >= b.len() {
                    return Err("quoted string not closed".into());
                }
                out.push(Tok {
                    raw: text.get(start..i).ok_or("bad quoted string")?,
                    quoted: true,
                });
                i += 1;
            }
            _ => {
                let start = i;
                while i < b.len()
                    && !matches!(
                        b[i],
                        b' ' | b'\t' | b'\r' | b'\n' | b'(' | b')' | b';' | b'"'
                    )
                {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                if i > b.len() {
                    return Err("backslash at the end of the text".into());
                }
                out.push(Tok {
                    raw: text.get(start..i).ok_or("bad word")?,
                    quoted: false,
                });
            }
        }
    }
    Ok(out)
}

/// The bytes a word stands for: `\DDD` (decimal, at most 255) and `\X`
/// decoded (RFC 1035 §5.1).
///
/// Errors: a `\DDD` over 255, fewer than three digits, or a trailing `\`.
pub(crate) fn unescape(raw: &str) -> Result<Vec<u8>, String> {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        match b.get(i + 1..i + 4) {
            Some(d) if d.iter().all(u8::is_ascii_digit) => {
                let v = d.iter().fold(0u32, |acc, c| acc * 10 + u32::from(c - b'0'));
                out.push(u8::try_from(v).map_err(|_| format!("escape \\{v} is over 255"))?);
                i += 4;
            }
            _ => match b.get(i + 1) {
                Some(c) if c.is_ascii_digit() => {
                    return Err("a \\DDD escape needs three digits".into());
                }
                Some(&c) => {
                    out.push(c);
                    i += 2;
                }
                None => return Err("backslash at the end of a word".into()),
            },
        }
    }
    Ok(out)
}

/// Reads the fields of one RDATA from its words, in order.
pub(crate) struct Reader<'a, 't> {
    toks: &'t [Tok<'a>],
    pos: usize,
    origin: &'t Name,
}

impl<'a, 't> Reader<'a, 't> {
    /// A reader over `toks`; relative names are completed with `origin`.
    pub(crate) fn new(toks: &'t [Tok<'a>], origin: &'t Name) -> Self {
        Reader {
            toks,
            pos: 0,
            origin,
        }
    }

    /// True when every word has been read.
    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }

    /// The next word, not consumed.
    pub(crate) fn peek(&self) -> Option<Tok<'a>> {
        self.toks.get(self.pos).copied()
    }

    /// Errors unless every word has been read.
    pub(crate) fn end(&self) -> Result<(), String> {
        match self.peek() {
            None => Ok(()),
            Some(t) => Err(format!("unexpected {:?} after the last field", t.raw)),
        }
    }

    /// The next word as written, quoted or not.
    pub(crate) fn tok(&mut self, field: &str) -> Result<Tok<'a>, String> {
        let t = self.peek().ok_or_else(|| format!("missing {field}"))?;
        self.pos += 1;
        Ok(t)
    }

    /// The next word, which must not be quoted.
    pub(crate) fn word(&mut self, field: &str) -> Result<&'a str, String> {
        let t = self.tok(field)?;
        if t.quoted {
            return Err(format!("{field} \"{}\" must not be quoted", t.raw));
        }
        Ok(t.raw)
    }

    /// The remaining words, not consumed.
    pub(crate) fn rest(&self) -> &'t [Tok<'a>] {
        self.toks.get(self.pos..).unwrap_or(&[])
    }

    /// Consumes the next word.
    pub(crate) fn skip_one(&mut self) {
        self.pos = (self.pos + 1).min(self.toks.len());
    }

    /// Consumes every remaining word.
    pub(crate) fn skip_rest(&mut self) {
        self.pos = self.toks.len();
    }

    /// An unsigned decimal number of `T` (digits only).
    pub(crate) fn num<T: TryFrom<u64> + Bounded>(&mut self, field: &str) -> Result<T, String> {
        let w = self.word(field)?;
        parse_num(w).ok_or_else(|| format!("bad {field} {w:?}: expected 0 to {}", T::MAX))
    }

    /// Appends a big-endian `u8`.
    pub(crate) fn u8(&mut self, field: &str, out: &mut Buf) -> Result<u8, String> {
        let v: u8 = self.num(field)?;
        out.push(v);
        Ok(v)
    }

    /// Appends a big-endian `u16`.
    pub(crate) fn u16(&mut self, field: &str, out: &mut Buf) -> Result<u16, String> {
        let v: u16 = self.num(field)?;
        out.extend_from_slice(&v.to_be_bytes());
        Ok(v)
    }

    /// Appends a big-endian `u32`.
    pub(crate) fn u32(&mut self, field: &str, out: &mut Buf) -> Result<(), String> {
        let v: u32 = self.num(field)?;
        out.extend_from_slice(&v.to_be_bytes());
        Ok(())
    }

    /// Appends a domain name in uncompressed wire form (`@` is the origin).
    pub(crate) fn name(&mut self, field: &str, out: &mut Buf) -> Result<(), String> {
        let w = self.word(field)?;
        let n = Name::parse(w, Some(self.origin)).map_err(|e| format!("bad {field}: {e}"))?;
        out.extend_from_slice(n.as_wire());
        Ok(())
    }

    /// Appends an IPv4 address (dotted quad).
    pub(crate) fn ipv4(&mut self, field: &str, out: &mut Buf) -> Result<(), String> {
        let a: Ipv4Addr = self.address(field, "IPv4")?;
        out.extend_from_slice(&a.octets());
        Ok(())
    }

    /// Appends an IPv6 address (RFC 4291 §2.2).
    pub(crate) fn ipv6(&mut self, field: &str, out: &mut Buf) -> Result<(), String> {
        let a: Ipv6Addr = self.address(field, "IPv6")?;
        out.extend_from_slice(&a.octets());
        Ok(())
    }

    /// The next word as an address of `family` ("IPv4", "IPv6").
    fn address<A: std::str::FromStr>(&mut self, field: &str, family: &str) -> Result<A, String> {
        let w = self.word(field)?;
        w.parse()
            .map_err(|_| format!("bad {field} {w:?}: not an {family} address"))
    }

    /// Appends one character-string (RFC 1035 §3.3): a length byte and at
    /// most 255 bytes, quoted or not.
    pub(crate) fn string(&mut self, field: &str, out: &mut Buf) -> Result<(), String> {
        let t = self.tok(field)?;
        let bytes = unescape(t.raw).map_err(|e| format!("bad {field}: {e}"))?;
        push_string(field, &bytes, out)
    }

    /// Appends every remaining word as a character-string (TXT, SPF); at
    /// least one. One over 255 bytes is refused, as BIND 9 refuses it, not
    /// split: the error says how to write it.
    pub(crate) fn strings(&mut self, field: &str, out: &mut Buf) -> Result<(), String> {
        loop {
            self.string(field, out).map_err(|e| {
                if e.ends_with(STRING_TOO_LONG) {
                    format!("{e}: write it as several quoted strings of at most 255 bytes each")
                } else {
                    e
                }
            })?;
            if self.at_end() {
                return Ok(());
            }
        }
    }

    /// The remaining words joined, for base64 or hex split by white space.
    fn joined(&mut self, field: &str) -> Result<String, String> {
        let mut s = String::new();
        while let Some(t) = self.peek() {
            if t.quoted {
                return Err(format!("{field} \"{}\" must not be quoted", t.raw));
            }
            s.push_str(t.raw);
            self.pos += 1;
        }
        Ok(s)
    }

    /// Appends the base64 (RFC 4648 §4) of the remaining words; at least
    /// `min` bytes.
    pub(crate) fn base64_rest(
        &mut self,
        field: &str,
        min: usize,
        out: &mut Buf,
    ) -> Result<(), String> {
        self.decoded_rest(field, min, out, "base64", decode_base64)
    }

    /// Appends the hex of the remaining words; at least `min` bytes.
    pub(crate) fn hex_rest(
        &mut self,
        field: &str,
        min: usize,
        out: &mut Buf,
    ) -> Result<(), String> {
        self.decoded_rest(field, min, out, "hex", decode_hex)
    }

    /// Appends the remaining words joined and decoded from `encoding` by
    /// `decode`; at least `min` bytes.
    fn decoded_rest(
        &mut self,
        field: &str,
        min: usize,
        out: &mut Buf,
        encoding: &str,
        decode: fn(&str) -> Option<Vec<u8>>,
    ) -> Result<(), String> {
        let s = self.joined(field)?;
        let bytes = decode(&s).ok_or_else(|| format!("bad {field}: not {encoding}"))?;
        if bytes.len() < min {
            return Err(format!("missing {field}"));
        }
        out.extend_from_slice(&bytes);
        Ok(())
    }

    /// Appends a type bitmap (RFC 4034 §4.1.2) of the remaining type
    /// mnemonics.
    pub(crate) fn bitmap_rest(&mut self, out: &mut Buf) -> Result<(), String> {
        let words = self.rest();
        self.skip_rest();
        super::type_bitmap(&mut words.iter().map(|t| t.raw), out)
            .map_err(|w| format!("bad type {w:?} in the type bitmap"))
    }
}

/// The largest value of an unsigned integer type, for messages.
pub(crate) trait Bounded {
    /// The largest value.
    const MAX: u64;
}
impl Bounded for u8 {
    const MAX: u64 = u8::MAX as u64;
}
impl Bounded for u16 {
    const MAX: u64 = u16::MAX as u64;
}
impl Bounded for u32 {
    const MAX: u64 = u32::MAX as u64;
}

/// An unsigned decimal number (digits only) that fits `T`.
pub(crate) fn parse_num<T: TryFrom<u64>>(w: &str) -> Option<T> {
    if w.is_empty() || w.len() > 20 || !w.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    T::try_from(w.parse::<u64>().ok()?).ok()
}

/// The end of the error of a character-string over 255 bytes.
const STRING_TOO_LONG: &str = "over the 255 of a character-string (RFC 1035 §3.3)";

/// Appends `bytes` as a character-string, or errors naming `field` when
/// longer than 255 bytes.
pub(crate) fn push_string(field: &str, bytes: &[u8], out: &mut Buf) -> Result<(), String> {
    let len = u8::try_from(bytes.len())
        .map_err(|_| format!("{field} is {} bytes long, {STRING_TOO_LONG}", bytes.len()))?;
    out.push(len);
    out.extend_from_slice(bytes);
    Ok(())
}

/// Base64 with padding, as BIND 9 reads it (bits after the last byte are
/// not checked); `None` if not base64.
pub(crate) fn decode_base64(s: &str) -> Option<Vec<u8>> {
    static BASE64: std::sync::LazyLock<Option<data_encoding::Encoding>> =
        std::sync::LazyLock::new(|| {
            let mut spec = data_encoding::BASE64.specification();
            spec.check_trailing_bits = false;
            spec.encoding().ok()
        });
    BASE64.as_ref()?.decode(s.as_bytes()).ok()
}

/// Hex of either case, even length; `None` otherwise.
pub(crate) fn decode_hex(s: &str) -> Option<Vec<u8>> {
    data_encoding::HEXLOWER_PERMISSIVE.decode(s.as_bytes()).ok()
}

/// A cursor over wire-form RDATA; every read is `None` past the end.
pub(crate) struct Wire<'a> {
    d: &'a [u8],
    pos: usize,
}

impl<'a> Wire<'a> {
    /// A cursor at the start of `d`.
    pub(crate) fn new(d: &'a [u8]) -> Self {
        Wire { d, pos: 0 }
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.d.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }

    /// The bytes left.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = self.d.get(self.pos..).unwrap_or(&[]);
        self.pos = self.d.len();
        s
    }

    /// True when no byte is left.
    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.d.len()
    }

    /// A `u8`.
    pub(crate) fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    /// A big-endian `u16`.
    pub(crate) fn u16(&mut self) -> Option<u16> {
        let b = self.take(2)?;
        Some(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A big-endian `u32`.
    pub(crate) fn u32(&mut self) -> Option<u32> {
        let b = self.take(4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An uncompressed domain name.
    pub(crate) fn name(&mut self) -> Option<Name> {
        let len = wire_name_len(self.d.get(self.pos..)?)?;
        Name::from_wire(self.take(len)?).ok()
    }

    /// A character-string's bytes.
    pub(crate) fn string(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(usize::from(n))
    }
}

/// Writes `bytes` as BIND 9 writes a character-string: in double quotes,
/// `"` and `\` escaped, bytes outside printable ASCII as `\DDD`.
pub(crate) fn put_string(out: &mut String, bytes: &[u8]) {
    out.push('"');
    put_escaped(out, bytes, b"\"\\");
    out.push('"');
}

/// Writes `bytes` with the bytes in `special` as `\X` and bytes outside
/// printable ASCII as `\DDD`.
pub(crate) fn put_escaped(out: &mut String, bytes: &[u8], special: &[u8]) {
    for &b in bytes {
        if special.contains(&b) {
            out.push('\\');
            out.push(b as char);
        } else if (0x20..0x7f).contains(&b) {
            out.push(b as char);
        } else {
            out.push('\\');
            out.push(char::from(b'0' + b / 100));
            out.push(char::from(b'0' + b / 10 % 10));
            out.push(char::from(b'0' + b % 10));
        }
    }
}

/// Width of the pieces BIND 9 splits long base64 and hex into, on one line.
const SPLIT: usize = 56;

/// Writes `text` in pieces of [`SPLIT`] characters separated by spaces.
fn put_split(out: &mut String, text: &str) {
    for (i, chunk) in text.as_bytes().chunks(SPLIT).enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.extend(chunk.iter().map(|&b| b as char));
    }
}

/// Base64 of `bytes`, split as BIND 9 splits it.
pub(crate) fn put_base64(out: &mut String, bytes: &[u8]) {
    put_split(out, &data_encoding::BASE64.encode(bytes));
}

/// Base64 of `bytes` on one piece.
pub(crate) fn put_base64_whole(out: &mut String, bytes: &[u8]) {
    out.push_str(&data_encoding::BASE64.encode(bytes));
}

/// Upper-case hex of `bytes`, split as BIND 9 splits it.
pub(crate) fn put_hex(out: &mut String, bytes: &[u8]) {
    put_split(out, &data_encoding::HEXUPPER.encode(bytes));
}

/// Upper-case hex of `bytes` in one piece.
pub(crate) fn put_hex_whole(out: &mut String, bytes: &[u8]) {
    out.push_str(&data_encoding::HEXUPPER.encode(bytes));
}

/// The types of a type bitmap (RFC 4034 §4.1.2), space-separated after a
/// space each; `None` if the bitmap is malformed.
pub(crate) fn put_bitmap(out: &mut String, bitmap: &[u8]) -> Option<()> {
    let mut w = Wire::new(bitmap);
    let mut last_window: Option<u8> = None;
    while !w.at_end() {
        let window = w.u8()?;
        let len = w.u8()?;
        if !(1..=32).contains(&len) || last_window.is_some_and(|l| l >= window) {
            return None;
        }
        last_window = Some(window);
        for (i, &byte) in w.take(usize::from(len))?.iter().enumerate() {
            for bit in 0..8 {
                if byte & (0x80 >> bit) != 0 {
                    let code = u16::from(window) << 8 | (i * 8 + bit) as u16;
                    out.push(' ');
                    out.push_str(&crate::rr::RType(code).to_string());
                }
            }
        }
    }
    Some(())
}
