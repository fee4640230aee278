//! Domain names in uncompressed wire form (RFC 1035 §3.1), case preserved.
//!
//! Comparison, hashing and ordering are case-insensitive and follow the DNSSEC
//! canonical order of RFC 4034 §6.1, so a [`Name`] can key maps directly while
//! still rendering in the case it was loaded with.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use smallvec::SmallVec;

/// Longest name in wire form, in bytes (RFC 1035 §2.3.4).
pub const MAX_NAME_LEN: usize = 255;
/// Longest label, in bytes (RFC 1035 §2.3.4).
pub const MAX_LABEL_LEN: usize = 63;

/// Why a name could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// A label longer than 63 bytes.
    #[error("label longer than 63 bytes in {0:?}")]
    LabelTooLong(String),
    /// A name longer than 255 bytes in wire form.
    #[error("name longer than 255 bytes: {0:?}")]
    NameTooLong(String),
    /// An empty label (two dots in a row, or a leading dot).
    #[error("empty label in {0:?}")]
    EmptyLabel(String),
    /// A bad `\` escape.
    #[error("bad escape in {0:?}")]
    BadEscape(String),
    /// A relative name with no origin to complete it.
    #[error("relative name {0:?} without an origin")]
    Relative(String),
    /// Wire bytes that do not form an uncompressed name.
    #[error("malformed name in wire form")]
    BadWire,
}

/// An absolute domain name in uncompressed wire form, case preserved.
///
/// Shape: length-prefixed labels ending in the zero-length root label; at most
/// 255 bytes. Equality, hashing and ordering ignore ASCII case.
#[derive(Clone)]
pub struct Name {
    /// Inline up to 32 bytes (most names), so cloning or taking a suffix
    /// rarely allocates.
    wire: SmallVec<[u8; 32]>,
}

impl Name {
    /// The root name `.`.
    pub fn root() -> Name {
        Name {
            wire: SmallVec::from_slice(&[0u8]),
        }
    }

    /// Builds a name from uncompressed wire bytes, checking label and name lengths.
    ///
    /// Errors: [`NameError::BadWire`] if the bytes are not exactly one name.
    pub fn from_wire(wire: &[u8]) -> Result<Name, NameError> {
        let len = wire_name_len(wire).ok_or(NameError::BadWire)?;
        if len != wire.len() {
            return Err(NameError::BadWire);
        }
        Ok(Name {
            wire: SmallVec::from_slice(wire),
        })
    }

    /// Parses presentation format (RFC 1035 §5.1): `\X` and decimal `\DDD` escapes,
    /// `@` for the origin, relative names completed with `origin`.
    ///
    /// Errors: bad escapes, empty or long labels, a too long name, or a relative
    /// name when `origin` is `None`.
    pub fn parse(text: &str, origin: Option<&Name>) -> Result<Name, NameError> {
        let err_text = || text.to_string();
        if text == "@" {
            return origin
                .cloned()
                .ok_or_else(|| NameError::Relative(err_text()));
        }
        if text == "." {
            return Ok(Name::root());
        }
        let bytes = text.as_bytes();
        let mut wire: Vec<u8> = Vec::with_capacity(bytes.len() + 2);
        let mut label_start = 0usize;
        wire.push(0);
        let mut i = 0;
        let mut absolute = false;
        while i < bytes.len() {
            let c = bytes[i];
            match c {
                b'.' => {
                    let label_len = wire.len() - label_start - 1;
                    if label_len == 0 {
                        return Err(NameError::EmptyLabel(err_text()));
                    }
                    if i + 1 == bytes.len() {
                        absolute = true;
                    } else {
                        label_start = wire.len();
                        wire.push(0);
                    }
                    i += 1;
                    continue;
                }
                b'\\' => {
                    let rest = &bytes[i + 1..];
                    if rest.len() >= 3 && rest[..3].iter().all(u8::is_ascii_digit) {
                        let v = (rest[0] - b'0') as u32 * 100
                            + (rest[1] - b'0') as u32 * 10
                            + (rest[2] - b'0') as u32;
                        if v > 255 {
                            return Err(NameError::BadEscape(err_text()));
                        }
                        wire.push(v as u8);
                        i += 4;
                    } else if let Some(&next) = rest.first() {
                        if next.is_ascii_digit() {
                            return Err(NameError::BadEscape(err_text()));
                        }
                        wire.push(next);
                        i += 2;
                    } else {
                        return Err(NameError::BadEscape(err_text()));
                    }
                }
                _ => {
                    wire.push(c);
                    i += 1;
                }
            }
            let label_len = wire.len() - label_start - 1;
            if label_len > MAX_LABEL_LEN {
                return Err(NameError::LabelTooLong(err_text()));
            }
            wire[label_start] = label_len as u8;
        }
        if wire.len() - label_start - 1 == 0 {
            return Err(NameError::EmptyLabel(err_text()));
        }
        if !absolute {
            let origin = origin.ok_or_else(|| NameError::Relative(err_text()))?;
            wire.extend_from_slice(&origin.wire);
        } else {
            wire.push(0);
        }
        if wire.len() > MAX_NAME_LEN {
            return Err(NameError::NameTooLong(err_text()));
        }
        Ok(Name {
            wire: SmallVec::from_slice(&wire),
        })
    }

    /// The uncompressed wire form, in the case it was built with.
    pub fn as_wire(&self) -> &[u8] {
        &self.wire
    }

    /// Number of labels, not counting the root label (`.` has 0, `com.` has 1).
    pub fn label_count(&self) -> usize {
        self.labels().count()
    }

    /// The labels from the leftmost to the rightmost, without the root label.
    pub fn labels(&self) -> Labels<'_> {
        Labels { wire: &self.wire }
    }

    /// True for the root name.
    pub fn is_root(&self) -> bool {
        self.wire.len() == 1
    }

    /// True when the leftmost label is `*` (RFC 4592 §2.1.1).
    pub fn is_wildcard(&self) -> bool {
        self.wire.len() >= 2 && self.wire[0] == 1 && self.wire[1] == b'*'
    }

    /// The name with its `n` leftmost labels removed, or `None` if it has fewer.
    pub fn strip_left(&self, n: usize) -> Option<Name> {
        let mut pos = 0usize;
        for _ in 0..n {
            let len = self.wire[pos] as usize;
            if len == 0 {
                return None;
            }
            pos += len + 1;
        }
        Some(Name {
            wire: SmallVec::from_slice(&self.wire[pos..]),
        })
    }

    /// The parent name, or `None` for the root.
    pub fn parent(&self) -> Option<Name> {
        self.strip_left(1)
    }

    /// `*.` followed by this name (RFC 4592 source of synthesis).
    pub fn wildcard_child(&self) -> Result<Name, NameError> {
        self.prepend_label(b"*")
    }

    /// A name made of `label` followed by this name.
    pub fn prepend_label(&self, label: &[u8]) -> Result<Name, NameError> {
        if label.is_empty() || label.len() > MAX_LABEL_LEN {
            return Err(NameError::LabelTooLong(
                String::from_utf8_lossy(label).into(),
            ));
        }
        if self.wire.len() + label.len() + 1 > MAX_NAME_LEN {
            return Err(NameError::NameTooLong(self.to_string()));
        }
        let mut wire: SmallVec<[u8; 32]> = SmallVec::new();
        wire.push(label.len() as u8);
        wire.extend_from_slice(label);
        wire.extend_from_slice(&self.wire);
        Ok(Name { wire })
    }

    /// Replaces the suffix `old_suffix` of this name by `new_suffix` (RFC 6672 §2.2
    /// DNAME substitution). `None` if this name is not at or below `old_suffix`.
    ///
    /// Errors: [`NameError::NameTooLong`] when the result exceeds 255 bytes, which
    /// the query processor answers with YXDOMAIN.
    pub fn replace_suffix(
        &self,
        old_suffix: &Name,
        new_suffix: &Name,
    ) -> Option<Result<Name, NameError>> {
        if !self.is_subdomain_of(old_suffix) {
            return None;
        }
        let keep = self.wire.len() - old_suffix.wire.len();
        let total = keep + new_suffix.wire.len();
        if total > MAX_NAME_LEN {
            return Some(Err(NameError::NameTooLong(self.to_string())));
        }
        let mut wire: SmallVec<[u8; 32]> = SmallVec::new();
        wire.extend_from_slice(&self.wire[..keep]);
        wire.extend_from_slice(&new_suffix.wire);
        Some(Ok(Name { wire }))
    }

    /// True if this name equals `other` or lies below it (case-insensitive).
    pub fn is_subdomain_of(&self, other: &Name) -> bool {
        let (a, b) = (&self.wire[..], &other.wire[..]);
        if b.len() > a.len() {
            return false;
        }
        // Walk labels of `a` until the remaining length equals b's length: only a
        // label boundary may start the suffix.
        let mut pos = 0usize;
        while a.len() - pos > b.len() {
            pos += a[pos] as usize + 1;
        }
        a.len() - pos == b.len() && a[pos..].eq_ignore_ascii_case(b)
    }

    /// Case-sensitive equality (the `==` operator ignores case).
    pub fn eq_case(&self, other: &Name) -> bool {
        self.wire == other.wire
    }

    /// A copy with ASCII letters lower-cased (the canonical form of RFC 4034 §6.2).
    pub fn to_lowercase(&self) -> Name {
        Name {
            wire: self.wire.iter().map(u8::to_ascii_lowercase).collect(),
        }
    }

    /// The labels in reverse order as presentation text with a trailing dot, the
    /// form of BIND 10's `records.rname` column (`www.example.org.` →
    /// `org.example.www.`, `.` → `.`).
    pub fn reversed_text(&self) -> String {
        let labels: Vec<&[u8]> = self.labels().collect();
        if labels.is_empty() {
            return ".".to_string();
        }
        let mut out = String::with_capacity(self.wire.len() + 1);
        for label in labels.iter().rev() {
            write_label(&mut out, label);
            out.push('.');
        }
        out
    }
}

/// Length in bytes of the uncompressed name at the start of `wire`, or `None`
/// if it is malformed (a pointer, a long label, over 255 bytes).
pub fn wire_len(wire: &[u8]) -> Option<usize> {
    wire_name_len(wire)
}

/// Length of the uncompressed name at the start of `wire`, or `None` if malformed.
pub(crate) fn wire_name_len(wire: &[u8]) -> Option<usize> {
    let mut pos = 0usize;
    loop {
        let len = *wire.get(pos)? as usize;
        if len > MAX_LABEL_LEN {
            return None;
        }
        pos += len + 1;
        if pos > MAX_NAME_LEN {
            return None;
        }
        if len == 0 {
            return Some(pos);
        }
    }
}

/// Iterator over the labels of a [`Name`], leftmost first.
pub struct Labels<'a> {
    wire: &'a [u8],
}

impl<'a> Iterator for Labels<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let len = *self.wire.first()? as usize;
        if len == 0 {
            return None;
        }
        let label = &self.wire[1..1 + len];
        self.wire = &self.wire[1 + len..];
        Some(label)
    }
}

/// One label in presentation form (RFC 1035 §5.1: special bytes as `\X`
/// or `\DDD`), without a dot.
pub fn label_text(label: &[u8]) -> String {
    let mut out = String::with_capacity(label.len());
    write_label(&mut out, label);
    out
}

fn write_label(out: &mut String, label: &[u8]) {
    for &b in label {
        match b {
            b'.' | b'\\' | b'"' | b'(' | b')' | b';' | b'@' | b'$' => {
                out.push('\\');
                out.push(b as char);
            }
            0x21..=0x7e => out.push(b as char),
            _ => {
                out.push('\\');
                out.push_str(&format!("{b:03}"));
            }
        }
    }
}

impl fmt::Display for Name {
    /// Presentation form with a trailing dot; special bytes as `\X` or `\DDD`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_root() {
            return f.write_str(".");
        }
        let mut out = String::with_capacity(self.wire.len());
        for label in self.labels() {
            write_label(&mut out, label);
            out.push('.');
        }
        f.write_str(&out)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Name({self})")
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        // Names compared are mostly spelled alike: a plain compare first.
        self.wire == other.wire || self.wire.eq_ignore_ascii_case(&other.wire)
    }
}
impl Eq for Name {}

impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // One write of the lower-cased bytes: hashers are far faster on a slice
        // than byte by byte. (Eight-byte `write_u64`s of case-folded words ran
        // fewer instructions but made the memory backend 9-15% slower on the
        // root zone: foldhash mixes a slice better, so the node map probed more.)
        // Most names are lower case already: hashed as they are, the same
        // bytes, without zeroing and filling a copy.
        if !self.wire.iter().any(u8::is_ascii_uppercase) {
            state.write(&self.wire);
            return;
        }
        let mut buf = [0u8; MAX_NAME_LEN];
        let n = self.wire.len().min(MAX_NAME_LEN);
        for (d, s) in buf[..n].iter_mut().zip(self.wire.iter()) {
            *d = s.to_ascii_lowercase();
        }
        state.write(&buf[..n]);
    }
}

impl Ord for Name {
    /// RFC 4034 §6.1 canonical order: labels compared right to left, each as
    /// lower-cased octet strings.
    fn cmp(&self, other: &Name) -> Ordering {
        // Label offsets on the stack: no allocation (zone loads sort every name).
        fn offsets(wire: &[u8], out: &mut [u8; 128]) -> usize {
            let mut n = 0;
            let mut p = 0usize;
            while let Some(&len) = wire.get(p) {
                if len == 0 || n == out.len() {
                    break;
                }
                out[n] = p as u8;
                n += 1;
                p += 1 + len as usize;
            }
            n
        }
        let (mut oa, mut ob) = ([0u8; 128], [0u8; 128]);
        let (na, nb) = (offsets(&self.wire, &mut oa), offsets(&other.wire, &mut ob));
        for (&pa, &pb) in oa[..na].iter().rev().zip(ob[..nb].iter().rev()) {
            let (pa, pb) = (pa as usize, pb as usize);
            let x = &self.wire[pa + 1..pa + 1 + self.wire[pa] as usize];
            let y = &other.wire[pb + 1..pb + 1 + other.wire[pb] as usize];
            let ord = x
                .iter()
                .map(u8::to_ascii_lowercase)
                .cmp(y.iter().map(u8::to_ascii_lowercase));
            if ord != Ordering::Equal {
                return ord;
            }
        }
        na.cmp(&nb)
    }
}
impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl std::str::FromStr for Name {
    type Err = NameError;
    /// Parses an absolute name; a name without a trailing dot is taken as absolute too.
    fn from_str(s: &str) -> Result<Name, NameError> {
        Name::parse(s, Some(&Name::root()))
    }
}

#[cfg(test)]
mod tests {
    /// Hashing agrees with `eq`: a name found in a set in any case, at
    /// every length around the eight-byte words hashed.
    #[test]
    fn hash_ignores_case_as_eq_does() {
        use std::collections::HashSet;
        let mut set = HashSet::new();
        for n in 1..=20 {
            let label = "aBcDeFgHiJkLmNoPqRsT"[..n].to_string();
            set.insert(Name::parse(&format!("{label}.ex."), None).expect("name"));
        }
        for n in 1..=20 {
            let label = "AbCdEfGhIjKlMnOpQrSt"[..n].to_string();
            let name = Name::parse(&format!("{label}.EX."), None).expect("name");
            assert!(set.contains(&name), "{name}");
        }
        assert!(!set.contains(&Name::parse("abcdefghijklmnopqrstu.ex.", None).expect("name")));
        assert_eq!(set.len(), 20);
    }

    use super::*;

    fn n(s: &str) -> Name {
        s.parse().expect("valid name")
    }

    #[test]
    fn parse_and_display_preserve_case_and_escapes() {
        assert_eq!(n("Mixed.Example.COM.").to_string(), "Mixed.Example.COM.");
        let esc = n("a\\065b.\\046x.");
        assert_eq!(esc.as_wire(), b"\x03aAb\x02.x\x00");
        assert_eq!(esc.to_string(), "aAb.\\.x.");
        assert_eq!(n("a_b.example.").to_string(), "a_b.example.");
        assert_eq!(n(".").as_wire(), b"\x00");
        assert_eq!(
            Name::parse("www", Some(&n("example.org."))).map(|x| x.to_string()),
            Ok("www.example.org.".into())
        );
        assert!(Name::parse("www", None).is_err());
        assert!(Name::parse("a..b.", None).is_err());
        assert!(Name::parse("\\256.", None).is_err());
        assert!(Name::parse(&format!("{}.", "x".repeat(64)), None).is_err());
    }

    #[test]
    fn case_insensitive_eq_and_canonical_order() {
        assert_eq!(n("WWW.example.org."), n("www.EXAMPLE.org."));
        assert!(!n("WWW.example.org.").eq_case(&n("www.example.org.")));
        // RFC 4034 §6.1 example order.
        let ordered = [
            "example.",
            "a.example.",
            "yljkjljk.a.example.",
            "Z.a.example.",
            "zABC.a.EXAMPLE.",
            "z.example.",
            "\\001.z.example.",
            "*.z.example.",
            "\\200.z.example.",
        ];
        for w in ordered.windows(2) {
            assert_eq!(n(w[0]).cmp(&n(w[1])), Ordering::Less, "{} < {}", w[0], w[1]);
        }
    }

    #[test]
    fn subdomain_strip_reverse() {
        assert!(n("a.b.example.").is_subdomain_of(&n("EXAMPLE.")));
        assert!(!n("a.bexample.").is_subdomain_of(&n("example.")));
        assert!(n("x.").is_subdomain_of(&Name::root()));
        assert_eq!(n("a.b.c.").strip_left(2), Some(n("c.")));
        assert_eq!(n("a.b.c.").strip_left(4), None);
        assert_eq!(n("www.example.org.").reversed_text(), "org.example.www.");
        assert_eq!(Name::root().reversed_text(), ".");
        assert_eq!(
            n("www.dname.example.").replace_suffix(&n("dname.example."), &n("t.org.")),
            Some(Ok(n("www.t.org.")))
        );
        assert!(n("*.x.").is_wildcard());
    }
}
