//! Record types, classes, RDATA and RRsets.
//!
//! RDATA is kept in uncompressed wire form (RFC 1035 §3.3, RFC 3597 §4), parsed
//! once when a zone is loaded or a row is read, never per query. Presentation
//! text is written here through NLnet Labs' `domain` formatter, which knows
//! every common type including the DNSSEC ones and RFC 3597 `\#` data; it is
//! read by [`Rdata::from_text`], defined with the text readers in `rdata_text`
//! (so that this module depends on no reader).

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
}

impl fmt::Display for RType {
    /// The IANA mnemonic, or `TYPEnnn` (RFC 3597 §5).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&domain::base::iana::Rtype::from_int(self.0), f)
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
        // The types every zone row has, before domain's linear table walk.
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
        domain::base::iana::Rtype::from_str(s)
            .map(|t| RType(t.to_int()))
            .map_err(|_| RrError::UnknownType(s.to_string()))
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

    /// Presentation text, as a master file or BIND 10's `rdata` column holds it.
    ///
    /// Errors: [`RrError::BadWire`] when the bytes do not parse as `rtype`.
    pub fn to_text(&self, rtype: RType) -> Result<String, RrError> {
        use domain::base::ParsedName;
        use domain::base::rdata::ParseRecordData;
        use domain::base::zonefile_fmt::{DisplayKind, ZonefileFmt};
        use domain::rdata::ZoneRecordData;
        let mut parser = octseq::Parser::from_ref(&self.0[..]);
        let data: Option<ZoneRecordData<&[u8], ParsedName<&[u8]>>> =
            ZoneRecordData::parse_rdata(domain::base::iana::Rtype::from_int(rtype.0), &mut parser)
                .map_err(|_| RrError::BadWire(rtype))?;
        if parser.remaining() != 0 {
            return Err(RrError::BadWire(rtype));
        }
        // The zonefile formatter, not `Display`: domain's `Display` for SRV (and a
        // few other types) writes the target without its trailing dot, which
        // would read back as a relative name.
        match data {
            Some(d) => Ok(d.display_zonefile(DisplayKind::Simple).to_string()),
            None => Err(RrError::BadWire(rtype)),
        }
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
        match rtype {
            RType::NS | RType::CNAME | RType::PTR => {
                at(0, &mut out, &mut n);
            }
            RType::MX => {
                at(2, &mut out, &mut n);
            }
            RType::SOA => {
                if let Some(next) = at(0, &mut out, &mut n) {
                    at(next, &mut out, &mut n);
                }
            }
            _ => {}
        }
        out.into_iter().take(n)
    }

    /// The name whose addresses additional-section processing looks up: the NS
    /// host, MX exchange or SRV target (RFC 1035 §3.3.9/§3.3.11, RFC 2782).
    pub fn additional_target(&self, rtype: RType) -> Option<Name> {
        let off = match rtype {
            RType::NS => 0,
            RType::MX => 2,
            RType::SRV => 6,
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
    /// The RDATA of each record.
    pub rdatas: Vec<Rdata>,
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
            rdatas: Vec::new(),
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
