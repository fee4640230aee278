//! Record types, classes, RDATA and RRsets.
//!
//! RDATA is kept in uncompressed wire form (RFC 1035 §3.3, RFC 3597 §4), parsed
//! once when a zone is loaded or a row is read, never per query. Presentation
//! text is read by [`Rdata::from_text`] and written by [`Rdata::to_text`],
//! both defined with the text readers and writers in `rdata_text` (so that
//! this module depends on none of them).

use std::fmt;
use std::str::FromStr;

use crate::name::{Name, wire_name_len};

/// A record type (RFC 1035 §3.2.2 and the IANA registry), as its 16-bit code.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RType(pub u16);

#[allow(missing_docs)]
impl RType {
    pub const A: RType = RType(1);
    pub const NS: RType = RType(2);
    pub const CNAME: RType = RType(5);
    pub const SOA: RType = RType(6);
    pub const PTR: RType = RType(12);
    pub const MX: RType = RType(15);
    pub const TXT: RType = RType(16);
    pub const AAAA: RType = RType(28);
    pub const SRV: RType = RType(33);
    pub const DNAME: RType = RType(39);
    pub const OPT: RType = RType(41);
    pub const DS: RType = RType(43);
    pub const RRSIG: RType = RType(46);
    pub const NSEC: RType = RType(47);
    pub const DNSKEY: RType = RType(48);
    pub const NSEC3: RType = RType(50);
    pub const NSEC3PARAM: RType = RType(51);
    /// Child DS (RFC 7344 §3.1).
    pub const CDS: RType = RType(59);
    /// Child DNSKEY (RFC 7344 §3.2).
    pub const CDNSKEY: RType = RType(60);
    pub const IXFR: RType = RType(251);
    pub const AXFR: RType = RType(252);
    pub const ANY: RType = RType(255);
}

impl RType {
    /// True for types that only make sense in a question (RFC 6895 §3.1 meta types
    /// and QTYPEs: OPT, TKEY..ANY).
    pub fn is_meta(self) -> bool {
        self == RType::OPT || (128..=255).contains(&self.0)
    }

    /// Every mnemonic read and written, as the IANA registry and BIND 9 spell
    /// them (code, mnemonic); any other type is `TYPEnnn` (RFC 3597 §5).
    pub const MNEMONICS: &'static [(u16, &'static str)] = &[
        (1, "A"),
        (2, "NS"),
        (3, "MD"),
        (4, "MF"),
        (5, "CNAME"),
        (6, "SOA"),
        (7, "MB"),
        (8, "MG"),
        (9, "MR"),
        (10, "NULL"),
        (11, "WKS"),
        (12, "PTR"),
        (13, "HINFO"),
        (14, "MINFO"),
        (15, "MX"),
        (16, "TXT"),
        (17, "RP"),
        (18, "AFSDB"),
        (19, "X25"),
        (20, "ISDN"),
        (21, "RT"),
        (22, "NSAP"),
        (23, "NSAP-PTR"),
        (24, "SIG"),
        (25, "KEY"),
        (26, "PX"),
        (27, "GPOS"),
        (28, "AAAA"),
        (29, "LOC"),
        (30, "NXT"),
        (31, "EID"),
        (32, "NIMLOC"),
        (33, "SRV"),
        (34, "ATMA"),
        (35, "NAPTR"),
        (36, "KX"),
        (37, "CERT"),
        (38, "A6"),
        (39, "DNAME"),
        (40, "SINK"),
        (41, "OPT"),
        (42, "APL"),
        (43, "DS"),
        (44, "SSHFP"),
        (45, "IPSECKEY"),
        (46, "RRSIG"),
        (47, "NSEC"),
        (48, "DNSKEY"),
        (49, "DHCID"),
        (50, "NSEC3"),
        (51, "NSEC3PARAM"),
        (52, "TLSA"),
        (53, "SMIMEA"),
        (55, "HIP"),
        (56, "NINFO"),
        (57, "RKEY"),
        (58, "TALINK"),
        (59, "CDS"),
        (60, "CDNSKEY"),
        (61, "OPENPGPKEY"),
        (62, "CSYNC"),
        (63, "ZONEMD"),
        (64, "SVCB"),
        (65, "HTTPS"),
        (99, "SPF"),
        (100, "UINFO"),
        (101, "UID"),
        (102, "GID"),
        (103, "UNSPEC"),
        (104, "NID"),
        (105, "L32"),
        (106, "L64"),
        (107, "LP"),
        (108, "EUI48"),
        (109, "EUI64"),
        (249, "TKEY"),
        (250, "TSIG"),
        (251, "IXFR"),
        (252, "AXFR"),
        (253, "MAILB"),
        (254, "MAILA"),
        (255, "ANY"),
        (256, "URI"),
        (257, "CAA"),
        (258, "AVC"),
        (259, "DOA"),
        (260, "AMTRELAY"),
        (261, "RESINFO"),
        (262, "WALLET"),
        (32768, "TA"),
        (32769, "DLV"),
    ];

    /// True for the types whose presentation form both BIND 9 and Knot DNS
    /// 3.2 read (checked with `named-checkzone` and `kzonecheck` in
    /// tests/tests/rrtypes.rs); the rest are best written in RFC 3597 form
    /// for other servers ([`Rdata::to_generic_text`]).
    pub fn is_widely_read(self) -> bool {
        matches!(
            self.0,
            1 | 2 | 5 | 6 | 12..=18 | 21 | 28 | 29 | 33 | 35..=37 | 39 | 42..=53 | 59..=65
                | 99 | 104..=109 | 256 | 257
        )
    }

    /// The mnemonic of this type, if it has one.
    pub fn mnemonic(self) -> Option<&'static str> {
        RType::MNEMONICS
            .binary_search_by_key(&self.0, |(c, _)| *c)
            .ok()
            .map(|i| RType::MNEMONICS[i].1)
    }
}

impl fmt::Display for RType {
    /// The mnemonic BIND 9 writes ([`RType::MNEMONICS`]), or `TYPEnnn`
    /// (RFC 3597 §5).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mnemonic() {
            Some(m) => f.write_str(m),
            None => write!(f, "TYPE{}", self.0),
        }
    }
}
impl fmt::Debug for RType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for RType {
    type Err = RrError;
    /// Accepts mnemonics in any case and `TYPEnnn`.
    fn from_str(s: &str) -> Result<RType, RrError> {
        // The types every zone row has, before the walk of the whole table.
        const COMMON: [(&str, RType); 16] = [
            ("A", RType::A),
            ("NS", RType::NS),
            ("RRSIG", RType::RRSIG),
            ("NSEC", RType::NSEC),
            ("DS", RType::DS),
            ("AAAA", RType::AAAA),
            ("SOA", RType::SOA),
            ("DNSKEY", RType::DNSKEY),
            ("CNAME", RType::CNAME),
            ("MX", RType::MX),
            ("TXT", RType::TXT),
            ("PTR", RType::PTR),
            ("SRV", RType::SRV),
            ("DNAME", RType::DNAME),
            ("NSEC3", RType::NSEC3),
            ("NSEC3PARAM", RType::NSEC3PARAM),
        ];
        if let Some((_, t)) = COMMON.iter().find(|(m, _)| m.eq_ignore_ascii_case(s)) {
            return Ok(*t);
        }
        if let Some((code, _)) = RType::MNEMONICS
            .iter()
            .find(|(_, m)| m.eq_ignore_ascii_case(s))
        {
            return Ok(RType(*code));
        }
        s.get(..4)
            .filter(|p| p.eq_ignore_ascii_case("TYPE"))
            .and_then(|_| s.get(4..))
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse().ok())
            .map(RType)
            .ok_or_else(|| RrError::UnknownType(s.to_string()))
    }
}

/// A record class; only IN and CH are served.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Class(pub u16);

#[allow(missing_docs)]
impl Class {
    pub const IN: Class = Class(1);
    pub const CH: Class = Class(3);
    pub const ANY: Class = Class(255);
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&domain::base::iana::Class::from_int(self.0), f)
    }
}

/// Why record data could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RrError {
    /// A type mnemonic that is neither known nor `TYPEnnn`.
    #[error("unknown record type {0:?}")]
    UnknownType(String),
    /// RDATA text that does not parse for its type.
    #[error("bad {rtype} rdata {text:?}: {reason}")]
    BadText {
        /// The record type.
        rtype: RType,
        /// The text given.
        text: String,
        /// What the scanner said.
        reason: String,
    },
    /// RDATA wire bytes that do not parse for their type.
    #[error("malformed {0} rdata in wire form")]
    BadWire(RType),
}

/// RDATA in uncompressed wire form.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rdata(Box<[u8]>);

impl Rdata {
    /// Wraps wire bytes as they are.
    pub fn from_wire(bytes: &[u8]) -> Rdata {
        Rdata(bytes.into())
    }

    /// The wire bytes.
    pub fn as_wire(&self) -> &[u8] {
        &self.0
    }

    /// Takes wire bytes already boxed, without copying them (the text readers).
    pub(crate) fn from_boxed(wire: Box<[u8]>) -> Rdata {
        Rdata(wire)
    }

    /// The domain names this RDATA carries that RFC 3597 §4 allows to be
    /// compressed, as (offset, length) ranges into the wire bytes. Used by the
    /// renderer for compression and by additional-section processing.
    pub fn compressible_names(&self, rtype: RType) -> impl Iterator<Item = (usize, usize)> + '_ {
        let d = &self.0[..];
        let mut out: [(usize, usize); 2] = [(0, 0); 2];
        let mut n = 0;
        let at = |off: usize, out: &mut [(usize, usize); 2], n: &mut usize| {
            if let Some(len) = d.get(off..).and_then(wire_name_len) {
                out[*n] = (off, len);
                *n += 1;
                Some(off + len)
            } else {
                None
            }
        };
        // The RFC 1035 types with names: NS, MD, MF, CNAME, MB, MG, MR, PTR;
        // MX; SOA and MINFO with two. No other type's names are compressed
        // (RFC 3597 §4).
        match rtype.0 {
            2..=5 | 7..=9 | 12 => {
                at(0, &mut out, &mut n);
            }
            15 => {
                at(2, &mut out, &mut n);
            }
            6 | 14 => {
                if let Some(next) = at(0, &mut out, &mut n) {
                    at(next, &mut out, &mut n);
                }
            }
            _ => {}
        }
        out.into_iter().take(n)
    }

    /// The name whose addresses additional-section processing looks up: the NS
    /// host, MB mailbox host, MX exchange (RFC 1035 §3.3.3, §3.3.9, §3.3.11),
    /// AFSDB or RT host (RFC 1183 §1, §3.3), SRV target (RFC 2782) or KX
    /// exchanger (RFC 2230 §5).
    pub fn additional_target(&self, rtype: RType) -> Option<Name> {
        let off = match rtype.0 {
            2 | 7 => 0,
            15 | 18 | 21 | 36 => 2,
            33 => 6,
            _ => return None,
        };
        let d = self.0.get(off..)?;
        let len = wire_name_len(d)?;
        Name::from_wire(&d[..len]).ok()
    }

    /// The single name making up CNAME or DNAME RDATA (RFC 1034 §3.6.2, RFC 6672).
    pub fn target_name(&self) -> Option<Name> {
        Name::from_wire(&self.0).ok()
    }

    /// SOA MINIMUM (RFC 2308 §4: the negative-caching TTL), or `None` if not a SOA.
    pub fn soa_minimum(&self) -> Option<u32> {
        self.soa_u32(4)
    }

    /// SOA REFRESH, RETRY and EXPIRE, seconds (RFC 1035 §3.3.13), or `None`
    /// if the bytes are not a SOA.
    pub fn soa_timers(&self) -> Option<(u32, u32, u32)> {
        Some((self.soa_u32(1)?, self.soa_u32(2)?, self.soa_u32(3)?))
    }

    /// SOA SERIAL, or `None` if the bytes are not a SOA.
    pub fn soa_serial(&self) -> Option<u32> {
        self.soa_u32(0)
    }

    fn soa_u32(&self, index: usize) -> Option<u32> {
        let d = &self.0[..];
        let m = wire_name_len(d)?;
        let r = wire_name_len(d.get(m..)?)?;
        let fixed = d.get(m + r..)?;
        if fixed.len() != 20 {
            return None;
        }
        let b = &fixed[index * 4..index * 4 + 4];
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// For RRSIG RDATA, the type covered (RFC 4034 §3.1.1).
    pub fn rrsig_type_covered(&self) -> Option<RType> {
        let b = self.0.get(0..2)?;
        Some(RType(u16::from_be_bytes([b[0], b[1]])))
    }
}

impl fmt::Debug for Rdata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Rdata({:02x?})", &self.0)
    }
}

/// One resource record as read from a master file or a database row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Owner name, case as loaded.
    pub owner: Name,
    /// Record type.
    pub rtype: RType,
    /// Record class.
    pub class: Class,
    /// Time to live, seconds.
    pub ttl: u32,
    /// RDATA in wire form.
    pub rdata: Rdata,
}

/// The RDATA list of an [`RRset`].
pub type Rdatas = smallvec::SmallVec<[Rdata; 1]>;

/// An RRset (RFC 2181 §5) with the RRSIGs that cover it (RFC 4034 §3).
///
/// Shape: one owner, type and class; `rdatas` in load order without duplicates;
/// one TTL in seconds (the smallest of its records, as BIND 10 did, RFC 2181 §5.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RRset {
    /// Owner name, case as loaded.
    pub owner: Name,
    /// Record type (never RRSIG for a set that carries `sigs`).
    pub rtype: RType,
    /// Record class.
    pub class: Class,
    /// TTL in seconds.
    pub ttl: u32,
    /// The RDATA of each record. One inline (the size of a `Vec`): most
    /// RRsets of a large zone (glue, DS) hold one record and need no heap
    /// block for the list.
    pub rdatas: Rdatas,
    /// RRSIG RDATA covering this set.
    pub sigs: Vec<Rdata>,
    /// TTL of the RRSIGs, seconds.
    pub sig_ttl: u32,
}

impl RRset {
    /// An empty set for `owner`/`rtype` with TTL `ttl`.
    pub fn new(owner: Name, rtype: RType, class: Class, ttl: u32) -> RRset {
        RRset {
            owner,
            rtype,
            class,
            ttl,
            rdatas: Rdatas::new(),
            sigs: Vec::new(),
            sig_ttl: 0,
        }
    }

    /// Adds one record's RDATA, keeping the smallest TTL and dropping exact duplicates
    /// (RFC 2181 §5).
    pub fn push(&mut self, ttl: u32, rdata: Rdata) {
        if self.rdatas.is_empty() || ttl < self.ttl {
            self.ttl = ttl;
        }
        if !self.rdatas.contains(&rdata) {
            self.rdatas.push(rdata);
        }
    }

    /// Adds an RRSIG covering this set.
    pub fn push_sig(&mut self, ttl: u32, rdata: Rdata) {
        if self.sigs.is_empty() || ttl < self.sig_ttl {
            self.sig_ttl = ttl;
        }
        if !self.sigs.contains(&rdata) {
            self.sigs.push(rdata);
        }
    }
}
