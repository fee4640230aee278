//! DNS wire format: query parsing and reply rendering (RFC 1035 §4, RFC 6891).
//!
//! Parsing reads only what an authoritative server needs (header, the one
//! question, the OPT record) and reports every malformation as a value, so the
//! caller can answer FORMERR or drop; it never panics on input. Rendering writes
//! into a caller-owned buffer with name compression (RFC 1035 §4.1.4) and stops
//! at a size limit, leaving the caller to set TC.

use authd_datasrc::name::MAX_NAME_LEN;
use authd_datasrc::{Class, Name, RType, Rdata};

/// Size of the DNS header, bytes.
pub const HEADER_LEN: usize = 12;
/// Largest message over TCP, bytes (RFC 1035 §4.2.2).
pub const MAX_TCP_MESSAGE: usize = 65535;
/// UDP payload limit without EDNS, bytes (RFC 1035 §2.3.4).
pub const MIN_UDP_PAYLOAD: usize = 512;
/// Bytes the OPT record takes with no options (RFC 6891 §6.1.2).
pub const OPT_LEN: usize = 11;
/// The TSIG meta type (RFC 8945 §4.2).
pub const TSIG: RType = RType(250);

/// The flag bits of a header word (RFC 1035 §4.1.1: QR, AA, TC, RD, RA; RFC
/// 4035 §3.2: AD, CD), without the opcode and rcode that share the word.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags(u16);

impl Flags {
    /// A response.
    pub const QR: Flags = Flags(0x8000);
    /// Authoritative answer.
    pub const AA: Flags = Flags(0x0400);
    /// Truncated.
    pub const TC: Flags = Flags(0x0200);
    /// Recursion desired.
    pub const RD: Flags = Flags(0x0100);
    /// Recursion available.
    pub const RA: Flags = Flags(0x0080);
    /// Authentic data.
    pub const AD: Flags = Flags(0x0020);
    /// Checking disabled.
    pub const CD: Flags = Flags(0x0010);
    /// Every flag bit of the header word (QR, AA, TC, RD, RA, Z, AD, CD).
    const MASK: u16 = 0x87F0;

    /// No flag set.
    pub const fn empty() -> Flags {
        Flags(0)
    }

    /// The flags of header word `word` (bytes 2–3 of a message).
    pub const fn from_word(word: u16) -> Flags {
        Flags(word & Flags::MASK)
    }

    /// The bits, in their header-word positions.
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// True when every flag of `other` is set here.
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The flags a reply copies from its query: RD (RFC 1035 §4.1.1) and CD
    /// (RFC 4035 §3.1.6).
    pub const fn echoed(self) -> Flags {
        Flags(self.0 & (Flags::RD.0 | Flags::CD.0))
    }

    /// The flags a NOTIMP reply to an opcode not known here keeps: RD
    /// alone. RFC 1035 §4.1.1 copies RD into every response; CD is
    /// DNSSEC's, defined for queries (RFC 4035 §3.2.2), and a message of an
    /// unknown opcode is none. Knot DNS answers so; BIND 9 clears both
    /// (and the question), NSD echoes both.
    pub const fn rd_only(self) -> Flags {
        Flags(self.0 & Flags::RD.0)
    }
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for Flags {
    fn bitor_assign(&mut self, rhs: Flags) {
        self.0 |= rhs.0;
    }
}

/// The kind of a message (RFC 1035 §4.1.1, RFC 6895 §2.2): four bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Opcode(pub u8);

impl Opcode {
    /// A standard query (RFC 1035).
    pub const QUERY: Opcode = Opcode(0);
    /// An inverse query (RFC 3425: obsolete).
    pub const IQUERY: Opcode = Opcode(1);
    /// A server status request (RFC 1035; never defined further).
    pub const STATUS: Opcode = Opcode(2);
    /// A zone change notification (RFC 1996).
    pub const NOTIFY: Opcode = Opcode(4);
    /// A dynamic update (RFC 2136).
    pub const UPDATE: Opcode = Opcode(5);

    /// The opcode of header word `word`.
    pub const fn from_word(word: u16) -> Opcode {
        Opcode(((word >> 11) & 0xF) as u8)
    }
}

impl std::fmt::Display for Opcode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Opcode::QUERY => f.write_str("QUERY"),
            Opcode::IQUERY => f.write_str("IQUERY"),
            Opcode::STATUS => f.write_str("STATUS"),
            Opcode::NOTIFY => f.write_str("NOTIFY"),
            Opcode::UPDATE => f.write_str("UPDATE"),
            Opcode(n) => write!(f, "OPCODE{n}"),
        }
    }
}

/// A response code (RFC 1035 §4.1.1, RFC 2136 §2.2, RFC 6891 §9): up to 12
/// bits, the low four in the header and the upper eight in the OPT record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Rcode(pub u16);

impl Rcode {
    /// No error.
    pub const NOERROR: Rcode = Rcode(0);
    /// The message could not be interpreted.
    pub const FORMERR: Rcode = Rcode(1);
    /// The server failed (here: a data source failed).
    pub const SERVFAIL: Rcode = Rcode(2);
    /// The name does not exist.
    pub const NXDOMAIN: Rcode = Rcode(3);
    /// The kind of request is not implemented.
    pub const NOTIMP: Rcode = Rcode(4);
    /// Refused by policy (or no zone served here).
    pub const REFUSED: Rcode = Rcode(5);
    /// A name exists that should not (RFC 2136; RFC 6672 §2.2: DNAME overflow).
    pub const YXDOMAIN: Rcode = Rcode(6);
    /// Not authoritative for the zone (RFC 2136 §2.2).
    pub const NOTAUTH: Rcode = Rcode(9);
    /// An RRset that should not exist does (RFC 2136 §2.2).
    pub const YXRRSET: Rcode = Rcode(7);
    /// An RRset that should exist does not (RFC 2136 §2.2).
    pub const NXRRSET: Rcode = Rcode(8);
    /// A name of the prerequisite or update section is outside the zone
    /// (RFC 2136 §2.2).
    pub const NOTZONE: Rcode = Rcode(10);
    /// Unsupported EDNS version (RFC 6891 §9): an extended code.
    pub const BADVERS: Rcode = Rcode(16);
    /// Bad or missing server cookie (RFC 7873 §8): an extended code.
    pub const BADCOOKIE: Rcode = Rcode(23);

    /// The four bits carried in the header.
    pub const fn header_bits(self) -> u16 {
        self.0 & 0xF
    }

    /// The upper eight bits, carried in the OPT record (RFC 6891 §6.1.3).
    pub const fn extended_bits(self) -> u8 {
        (self.0 >> 4) as u8
    }
}

/// The fixed fields a reply header starts with (RFC 1035 §4.1.1); the section
/// counts are written by [`MessageWriter`] as it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Message id (copied from the query).
    pub id: u16,
    /// Opcode (copied from the query).
    pub opcode: Opcode,
    /// Flags (QR set for a reply).
    pub flags: Flags,
    /// Response code (its header bits; an extended code also needs an OPT).
    pub rcode: Rcode,
}

impl Header {
    /// The header of a reply to `req` with `rcode` and `flags` besides QR and
    /// the echoed RD and CD.
    pub fn reply_to(req: &Request<'_>, flags: Flags, rcode: Rcode) -> Header {
        Header::reply(req.id, req.opcode, req.flags, flags, rcode)
    }

    /// The header of a reply to a message with `id`, `opcode` and flags
    /// `received`: QR, the echoed RD and CD, `flags` and `rcode`.
    pub fn reply(id: u16, opcode: Opcode, received: Flags, flags: Flags, rcode: Rcode) -> Header {
        Header {
            id,
            opcode,
            flags: Flags::QR | received.echoed() | flags,
            rcode,
        }
    }

    /// Bytes 2–3 of the message: flags, opcode and the rcode's header bits.
    pub const fn word(&self) -> u16 {
        self.flags.bits() | ((self.opcode.0 as u16 & 0xF) << 11) | self.rcode.header_bits()
    }
}

/// The EDNS facts of a query (RFC 6891 §6.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edns<'a> {
    /// Requestor's UDP payload size, bytes (raised to 512 when smaller).
    pub udp_payload: u16,
    /// EDNS version.
    pub version: u8,
    /// The DO bit (RFC 3225).
    pub dnssec_ok: bool,
    /// The DNS COOKIE option, if sent (RFC 7873 §4).
    pub cookie: Option<Cookie<'a>>,
    /// The query asked for the server's NSID (RFC 5001 §2.1).
    pub nsid: bool,
    /// The query carried edns-tcp-keepalive (RFC 7828 §3.2.1; its value,
    /// which a client must not send, is ignored).
    pub keepalive: bool,
    /// Bytes of options the dispatcher appends to the reply's OPT after
    /// rendering ([`crate::edns::append`]: NSID, keepalive), which
    /// rendering leaves free ([`crate::query::reply_limit`]); 0 as parsed.
    /// The COOKIE's room is counted from `cookie`.
    pub option_room: u16,
}

/// The DNS COOKIE option of a request (RFC 7873 §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cookie<'a> {
    /// The client cookie (8 bytes).
    pub client: [u8; 8],
    /// The server cookie the client sent back: empty, or 8 to 32 bytes.
    pub server: &'a [u8],
}

/// EDNS option code of DNS COOKIE (RFC 7873 §4).
pub const OPTION_COOKIE: u16 = 10;
/// Bytes a reply's COOKIE option takes: code, length, an 8-byte client and a
/// 16-byte server cookie.
pub const COOKIE_OPTION_LEN: usize = 4 + 24;

/// Our EDNS UDP payload size, bytes: the DNS Flag Day 2020 value, which avoids
/// IP fragmentation; replies to larger client sizes are capped to it.
pub const EDNS_UDP_PAYLOAD: u16 = 1232;

/// EDNS option code of NSID (RFC 5001 §2.3).
pub const OPTION_NSID: u16 = 3;
/// EDNS option code of edns-tcp-keepalive (RFC 7828 §3.1).
pub const OPTION_TCP_KEEPALIVE: u16 = 11;
/// EDNS option code of Extended DNS Error (RFC 8914 §2).
pub const OPTION_EDE: u16 = 15;

/// Longest NSID sent, bytes (`[server] nsid`): RFC 5001 sets none; this
/// keeps a reply's options small beside the answer.
pub const MAX_NSID_LEN: usize = 128;

/// Bytes the edns-tcp-keepalive option of a reply takes: code, length, the
/// 16-bit timeout.
pub const KEEPALIVE_OPTION_LEN: usize = 6;

/// Most bytes of options the OPT record ending a reply here carries: an EDE
/// with its text, a COOKIE, an NSID and a keepalive (bounds [`find_opt`]'s
/// search).
const MAX_OPTIONS_LEN: usize =
    4 + 2 + MAX_EDE_TEXT + COOKIE_OPTION_LEN + 4 + MAX_NSID_LEN + KEEPALIVE_OPTION_LEN;

/// Longest EXTRA-TEXT of the EDEs sent here (RFC 8914 §2: SHOULD be short).
const MAX_EDE_TEXT: usize = 32;

/// An Extended DNS Error (RFC 8914 §4): an INFO-CODE and an EXTRA-TEXT
/// (empty: none). Sent only to queries with EDNS, in the OPT record of the
/// error reply; which error gets which code is the handler's choice, each
/// documented where it is made, following what NSD 4.6 and Knot DNS 3.2
/// send for the same cases (checked by running them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ede {
    /// The INFO-CODE (IANA "Extended DNS Error Codes").
    pub code: u16,
    /// The EXTRA-TEXT, UTF-8, at most 32 bytes (RFC 8914 §2: short).
    pub text: &'static str,
}

impl Ede {
    /// 18 Prohibited: a transfer, UPDATE or NOTIFY this client may not send
    /// (NSD and BIND 9 send it with a refused AXFR).
    pub const PROHIBITED: Ede = Ede::new(18);
    /// 20 Not Authoritative: a name in no zone served here, REFUSED (NSD
    /// and Knot DNS send it).
    pub const NOT_AUTHORITATIVE: Ede = Ede::new(20);
    /// 21 Not Supported: NOTIMP (an opcode or meta type not answered here).
    pub const NOT_SUPPORTED: Ede = Ede::new(21);
    /// 24 Invalid Data with "Zone has expired": the SERVFAIL of an expired
    /// secondary zone. NSD 4.6 sends exactly this (EDE 24, that text); Knot
    /// DNS frees an expired zone's contents and answers SERVFAIL with 24
    /// too (its `NS_NEED_ZONE_CONTENTS`); BIND 9.18 sends no EDE. Not 22 No
    /// Reachable Authority: RFC 8914 §4.23 defines it for a resolver that
    /// could not reach the authorities, and the client asked no resolver.
    pub const ZONE_EXPIRED: Ede = Ede {
        code: 24,
        text: "Zone has expired",
    };

    const fn new(code: u16) -> Ede {
        Ede { code, text: "" }
    }

    /// Bytes its option takes: code, length, INFO-CODE, text.
    pub const fn option_len(&self) -> usize {
        4 + 2 + self.text.len()
    }

    /// Writes the option (code, length, INFO-CODE, EXTRA-TEXT) onto `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&OPTION_EDE.to_be_bytes());
        out.extend_from_slice(&((2 + self.text.len()) as u16).to_be_bytes());
        out.extend_from_slice(&self.code.to_be_bytes());
        out.extend_from_slice(self.text.as_bytes());
    }
}

/// Where the OPT record ending `msg` starts, if one does: the record whose
/// RDLENGTH covers exactly the rest of the message, owned by the root, of
/// type OPT, with no more than the options sent here. Cheap for the common
/// reply, an OPT without options (one comparison).
pub fn find_opt(msg: &[u8]) -> Option<usize> {
    let len = msg.len();
    let last = len.checked_sub(OPT_LEN)?;
    let first = last.saturating_sub(MAX_OPTIONS_LEN).max(HEADER_LEN);
    (first..=last).rev().find(|&at| {
        msg[at..at + 3] == [0, 0, 41]
            && usize::from(u16::from_be_bytes([msg[at + 9], msg[at + 10]])) == last - at
    })
}
/// EDNS option code of Client Subnet (RFC 7871 §6).
pub const OPTION_CLIENT_SUBNET: u16 = 8;

/// The parts of a query message an authoritative server uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    /// Message id.
    pub id: u16,
    /// Opcode (RFC 1035 §4.1.1).
    pub opcode: Opcode,
    /// Header flags as received.
    pub flags: Flags,
    /// The question section's wire bytes, echoed as received (case preserved).
    pub question: &'a [u8],
    /// Query name.
    pub qname: Name,
    /// Query type.
    pub qtype: RType,
    /// Query class.
    pub qclass: Class,
    /// The OPT record, if any.
    pub edns: Option<Edns<'a>>,
    /// Where the TSIG record starts (the offset of its owner name), if the
    /// message is signed (RFC 8945); [`crate::tsig::verify`] checks it.
    pub tsig: Option<usize>,
}

/// Why a message could not be taken as a query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Send nothing: shorter than a header, or a response (QR=1).
    Drop,
    /// Answer with `rcode` (FORMERR), echoing the question when it parsed.
    Reject {
        /// Message id.
        id: u16,
        /// Opcode.
        opcode: Opcode,
        /// Received flags (RD and CD are copied).
        flags: Flags,
        /// Response code to send.
        rcode: Rcode,
        /// The question bytes, when they could be read.
        question: Option<(usize, usize)>,
        /// The request's OPT record was whole, and only an option in it
        /// malformed: the reply carries an OPT (RFC 6891 §7), as BIND 9's.
        edns: bool,
    },
}

/// The big-endian 16-bit value at `at`, if the message is long enough.
pub(crate) fn u16_at(msg: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*msg.get(at)?, *msg.get(at + 1)?]))
}

/// Reads an uncompressed name at `at`; returns the name and the offset after it.
fn read_plain_name(msg: &[u8], at: usize) -> Option<(Name, usize)> {
    let mut pos = at;
    loop {
        let len = *msg.get(pos)? as usize;
        if len & 0xC0 != 0 {
            return None;
        }
        pos += 1 + len;
        if pos - at > MAX_NAME_LEN || pos > msg.len() {
            return None;
        }
        if len == 0 {
            break;
        }
    }
    Some((Name::from_wire(&msg[at..pos]).ok()?, pos))
}

/// Skips a possibly compressed name at `at`; returns the offset after it.
pub(crate) fn skip_name(msg: &[u8], at: usize) -> Option<usize> {
    let mut pos = at;
    loop {
        let len = *msg.get(pos)?;
        match len & 0xC0 {
            0x00 if len == 0 => return Some(pos + 1),
            0x00 => pos += 1 + len as usize,
            0xC0 => {
                msg.get(pos + 1)?;
                return Some(pos + 2);
            }
            _ => return None,
        }
    }
}

/// The first four bytes of a message: all the dispatcher needs to decide
/// which handler parses the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// Message id.
    pub id: u16,
    /// Opcode.
    pub opcode: Opcode,
    /// Flags as received.
    pub flags: Flags,
}

/// The head of `msg`, or `None` when nothing must be sent back: shorter than
/// a header, or a response (QR=1; answering it could start a loop).
pub fn peek_head(msg: &[u8]) -> Option<Head> {
    if msg.len() < HEADER_LEN {
        return None;
    }
    let word = u16_at(msg, 2)?;
    let flags = Flags::from_word(word);
    if flags.contains(Flags::QR) {
        return None;
    }
    Some(Head {
        id: u16_at(msg, 0)?,
        opcode: Opcode::from_word(word),
        flags,
    })
}

/// The full rcode of a reply rendered here: the header's four bits and, when
/// the message ends with an OPT, its upper eight (RFC 6891 §6.1.3). An
/// extended rcode (BADVERS, BADCOOKIE) goes only with a reply of no answer
/// or authority records, so only such a reply's OPT is looked for behind
/// its options ([`find_opt`]); any other is read when it has
/// no options, as most have (metrics read every reply: no scan for them).
pub fn reply_rcode(msg: &[u8]) -> Rcode {
    let low = msg.get(3).map_or(0, |b| u16::from(b & 0x0F));
    let len = msg.len();
    let plain = len.checked_sub(OPT_LEN).filter(|&at| {
        at >= HEADER_LEN && msg[at..at + 3] == [0, 0, 41] && msg[len - 2..] == [0, 0]
    });
    let records = msg.get(6..10).is_some_and(|c| c != [0, 0, 0, 0]);
    let at = match plain {
        Some(at) => Some(at),
        None if records => None,
        None => find_opt(msg),
    };
    match at {
        Some(at) => Rcode(u16::from(msg[at + 5]) << 4 | low),
        None => Rcode(low),
    }
}

/// The OPT record of an error reply ([`write_error`]): the DO bit echoed
/// (RFC 3225 §3) and the Extended DNS Error, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorOpt {
    /// The request's DO bit.
    pub dnssec_ok: bool,
    /// The EDE (RFC 8914).
    pub ede: Option<Ede>,
}

impl ErrorOpt {
    /// The OPT of an error reply to `req` with `ede`: one when the request
    /// had EDNS (RFC 6891 §6.1.1), else none (and no EDE: RFC 8914 §3).
    pub fn to(req: &Request<'_>, ede: Option<Ede>) -> Option<ErrorOpt> {
        req.edns.map(|e| ErrorOpt {
            dnssec_ok: e.dnssec_ok,
            ede,
        })
    }
}

/// Writes an error reply into `out` (cleared first): `header` and, when
/// given, the question section as received; every other section empty but
/// for the OPT record `opt` (none when the request had no EDNS, or its
/// OPT record is what was wrong).
pub fn write_error(
    out: &mut Vec<u8>,
    header: Header,
    question: Option<&[u8]>,
    opt: Option<ErrorOpt>,
) {
    let mut w = MessageWriter::new(out, header, MAX_TCP_MESSAGE);
    if let Some(q) = question {
        w.push_question(q);
    }
    if let Some(o) = opt {
        w.push_opt(EDNS_UDP_PAYLOAD, header.rcode, o.dnssec_ok, o.ede);
    }
    w.finish();
}

/// Parses a query message (RFC 1035 §4.1, RFC 6891 §6.1).
///
/// Any opcode parses (QUERY, and NOTIFY and UPDATE, whose zone section has
/// the question's shape, RFC 1996 §3.7 and RFC 2136 §2.3); which opcodes are
/// answered is [`crate::dispatch`]'s decision.
///
/// Errors: [`ParseError::Drop`] for short messages and responses;
/// [`ParseError::Reject`] with FORMERR for QDCOUNT ≠ 1, a bad question, a record cut short, bytes after the last
/// counted record, an OPT not owned by the root, two OPT records, or a TSIG
/// record that is not the last record of the additional section (so also
/// two TSIG records, RFC 8945 §5.1).
pub fn parse_query(msg: &[u8]) -> Result<Request<'_>, ParseError> {
    if msg.len() < HEADER_LEN {
        return Err(ParseError::Drop);
    }
    let id = u16_at(msg, 0).ok_or(ParseError::Drop)?;
    let word = u16_at(msg, 2).ok_or(ParseError::Drop)?;
    let flags = Flags::from_word(word);
    if flags.contains(Flags::QR) {
        return Err(ParseError::Drop);
    }
    let opcode = Opcode::from_word(word);
    let reject = |rcode, question| ParseError::Reject {
        id,
        opcode,
        flags,
        rcode,
        question,
        edns: false,
    };
    let counts = [
        u16_at(msg, 4).unwrap_or(0),
        u16_at(msg, 6).unwrap_or(0),
        u16_at(msg, 8).unwrap_or(0),
        u16_at(msg, 10).unwrap_or(0),
    ];
    if counts[0] != 1 {
        return Err(reject(Rcode::FORMERR, None));
    }
    let (qname, after_name) =
        read_plain_name(msg, HEADER_LEN).ok_or_else(|| reject(Rcode::FORMERR, None))?;
    let (Some(qtype), Some(qclass)) = (u16_at(msg, after_name), u16_at(msg, after_name + 2)) else {
        return Err(reject(Rcode::FORMERR, None));
    };
    let question_end = after_name + 4;
    let question = Some((HEADER_LEN, question_end));
    let formerr = || reject(Rcode::FORMERR, question);
    let mut pos = question_end;
    let mut edns = None;
    let mut tsig = None;
    let rr_total = counts[1] as usize + counts[2] as usize + counts[3] as usize;
    for index in 0..rr_total {
        let owner_at = pos;
        pos = skip_name(msg, pos).ok_or_else(formerr)?;
        let rtype = u16_at(msg, pos).ok_or_else(formerr)?;
        let class = u16_at(msg, pos + 2).ok_or_else(formerr)?;
        let ttl_hi = u16_at(msg, pos + 4).ok_or_else(formerr)?;
        let rdlen = u16_at(msg, pos + 8).ok_or_else(formerr)? as usize;
        let rdata_end = pos + 10 + rdlen;
        if rdata_end > msg.len() {
            return Err(formerr());
        }
        let in_additional = index >= counts[1] as usize + counts[2] as usize;
        if rtype == RType::OPT.0 {
            // RFC 6891 §6.1.1: one OPT, owned by the root, in the additional section.
            if !in_additional || edns.is_some() || msg[owner_at] != 0 {
                return Err(formerr());
            }
            let options = parse_options(&msg[pos + 10..rdata_end]).ok_or(ParseError::Reject {
                id,
                opcode,
                flags,
                rcode: Rcode::FORMERR,
                question,
                edns: true,
            })?;
            edns = Some(Edns {
                udp_payload: class.max(MIN_UDP_PAYLOAD as u16),
                version: (ttl_hi & 0xFF) as u8,
                dnssec_ok: u16_at(msg, pos + 6).unwrap_or(0) & 0x8000 != 0,
                cookie: options.cookie,
                nsid: options.nsid,
                keepalive: options.keepalive,
                option_room: 0,
            });
        } else if rtype == TSIG.0 {
            // RFC 8945 §5.1: the last record of the additional section, once.
            if !in_additional || index + 1 != rr_total {
                return Err(formerr());
            }
            tsig = Some(owner_at);
        } else if edns.is_some() {
            // Only a TSIG may follow the OPT (RFC 8945 §5.1: it is last).
            return Err(formerr());
        }
        pos = rdata_end;
    }
    // Bytes past the counted records: a miscounted or corrupted message. Knot
    // DNS and BIND 9 answer FORMERR too (NSD ignores them).
    if pos != msg.len() {
        return Err(formerr());
    }
    Ok(Request {
        id,
        opcode,
        flags,
        question: &msg[HEADER_LEN..question_end],
        qname,
        qtype: RType(qtype),
        qclass: Class(qclass),
        edns,
        tsig,
    })
}

/// The options of a query's OPT record that matter here.
#[derive(Clone, Copy, Debug, Default)]
struct Options<'a> {
    cookie: Option<Cookie<'a>>,
    nsid: bool,
    keepalive: bool,
}

/// The options of an OPT record's RDATA (RFC 6891 §6.1.2: code, length,
/// data), checked: `None` when they are not whole options, or one is
/// malformed for its code, and the request gets FORMERR. Else the COOKIE
/// option, if there is one, and whether NSID and edns-tcp-keepalive were
/// sent.
///
/// Checked codes: COOKIE (RFC 7873 §5.2.2: a client cookie of 8 bytes and a
/// server cookie of 8 to 32, so 8 or 16 to 40 bytes; at most one) and Client
/// Subnet (RFC 7871 §6 and §7.1.1: family 1 or 2, a source prefix no longer
/// than the address, exactly the address bytes that prefix needs with no bit
/// set past it, scope prefix 0). Other options are skipped.
fn parse_options(mut rdata: &[u8]) -> Option<Options<'_>> {
    let mut options = Options::default();
    while !rdata.is_empty() {
        let (code, len) = (u16_at(rdata, 0)?, usize::from(u16_at(rdata, 2)?));
        let data = rdata.get(4..4 + len)?;
        match code {
            OPTION_COOKIE => {
                if options.cookie.is_some() || (len != 8 && !(16..=40).contains(&len)) {
                    return None;
                }
                let (client, server) = data.split_at(8);
                options.cookie = Some(Cookie {
                    client: client.try_into().ok()?,
                    server,
                });
            }
            OPTION_CLIENT_SUBNET if !client_subnet_well_formed(data) => return None,
            OPTION_NSID => options.nsid = true,
            OPTION_TCP_KEEPALIVE => options.keepalive = true,
            _ => {}
        }
        rdata = &rdata[4 + len..];
    }
    Some(options)
}

/// True when Client Subnet option data is well formed for a query (see
/// [`parse_options`]).
fn client_subnet_well_formed(data: &[u8]) -> bool {
    let (Some(family), Some(&source), Some(&scope)) = (u16_at(data, 0), data.get(2), data.get(3))
    else {
        return false;
    };
    let max = match family {
        1 => 32,
        2 => 128,
        _ => return false,
    };
    let address = &data[4..];
    if source > max || scope != 0 || address.len() != usize::from(source).div_ceil(8) {
        return false;
    }
    // Bits past the source prefix in the last byte must be zero.
    let spare = (8 - source % 8) % 8;
    address.last().is_none_or(|b| b & ((1u8 << spare) - 1) == 0)
}

/// Most name positions remembered for compression; later names are written
/// in full, which only costs bytes.
const MAX_COMPRESSION_TARGETS: usize = 96;

/// A reply under construction in a caller-owned buffer.
///
/// Shape: header (12 bytes), then sections appended in order. Each `push_*`
/// either writes a whole record or nothing, reporting whether it fit within the
/// size limit given at creation.
pub struct MessageWriter<'a> {
    buf: &'a mut Vec<u8>,
    limit: usize,
    /// Offsets of names (or name suffixes) already written, for compression,
    /// and the hash of the name at each ([`suffix_hashes`]), compared first.
    targets: [u16; MAX_COMPRESSION_TARGETS],
    target_hash: [u32; MAX_COMPRESSION_TARGETS],
    target_count: usize,
    /// Open-addressing index over `target_hash` (slot = hash mod 256; value =
    /// target index + 1, 0 = empty). Entries left by a rollback point past
    /// `target_count` or at another hash and are skipped.
    index: [u8; 256],
    counts: [u16; 4],
    /// When set, the offset of every compression pointer written (for
    /// response templates that are later re-based onto another question).
    pointers: Option<Vec<u16>>,
    /// The last owner name written: the address and length of the bytes it
    /// was written from, and the offset a pointer to it takes. The records
    /// of an RRset (and a glue name's A and AAAA) repeat their owner: it is
    /// then one pointer, with no suffix hashing.
    last_owner: Option<(usize, usize, u16)>,
}

/// The fixed fields of a record after its owner name (RFC 1035 §4.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordMeta {
    /// Record type.
    pub rtype: RType,
    /// Record class.
    pub class: Class,
    /// TTL, seconds.
    pub ttl: u32,
}

/// The sections of a message after the question (RFC 1035 §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// Answer section.
    Answer = 1,
    /// Authority section.
    Authority = 2,
    /// Additional section.
    Additional = 3,
}

impl<'a> MessageWriter<'a> {
    /// Starts a message in `buf` (cleared) with `header` as given (a reply's
    /// has QR, see [`Header::reply_to`]; an extended rcode also needs
    /// [`Self::push_opt`]), limited to `limit` bytes in total.
    pub fn new(buf: &'a mut Vec<u8>, header: Header, limit: usize) -> Self {
        buf.clear();
        let word = header.word();
        buf.extend_from_slice(&header.id.to_be_bytes());
        buf.extend_from_slice(&word.to_be_bytes());
        buf.extend_from_slice(&[0; 8]);
        MessageWriter {
            buf,
            limit,
            targets: [0; MAX_COMPRESSION_TARGETS],
            target_hash: [0; MAX_COMPRESSION_TARGETS],
            target_count: 0,
            index: [0; 256],
            pointers: None,
            counts: [0; 4],
            last_owner: None,
        }
    }

    /// Copies a question section (as received) and remembers its name for
    /// compression. Returns false if it does not fit.
    pub fn push_question(&mut self, question: &[u8]) -> bool {
        if self.buf.len() + question.len() > self.limit {
            return false;
        }
        let at = self.buf.len();
        self.buf.extend_from_slice(question);
        self.remember_name(at);
        self.counts[0] += 1;
        true
    }

    /// Current length of the message, bytes.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when nothing but the header has been written.
    pub fn is_empty(&self) -> bool {
        self.buf.len() == HEADER_LEN
    }

    /// Lowers the size limit (to reserve room for an OPT record, say).
    pub fn reserve(&mut self, bytes: usize) {
        self.limit = self.limit.saturating_sub(bytes);
    }

    /// Raises the size limit by `bytes` (returning reserved room).
    pub fn unreserve(&mut self, bytes: usize) {
        self.limit += bytes;
    }

    /// A savepoint to roll back to with [`Self::rollback`].
    pub fn mark(&self) -> (usize, usize, [u16; 4]) {
        (self.buf.len(), self.target_count, self.counts)
    }

    /// Records the offset of every compression pointer from now on; see
    /// [`Self::pointers`].
    pub fn record_pointers(&mut self) {
        self.pointers = Some(Vec::new());
    }

    /// Offsets of the compression pointers written since
    /// [`Self::record_pointers`] (rolled-back ones excluded).
    pub fn pointers(&self) -> &[u16] {
        self.pointers.as_deref().unwrap_or(&[])
    }

    /// Drops everything written since `mark`.
    pub fn rollback(&mut self, mark: (usize, usize, [u16; 4])) {
        if let Some(p) = self.pointers.as_mut() {
            p.retain(|&o| usize::from(o) < mark.0);
        }
        self.buf.truncate(mark.0);
        if self
            .last_owner
            .is_some_and(|(_, _, at)| usize::from(at) >= mark.0)
        {
            self.last_owner = None;
        }
        self.target_count = mark.1;
        self.counts = mark.2;
    }

    /// Appends one record; `compress` lists the (offset, len) ranges of names in
    /// `rdata` that may be compressed. Returns false (writing nothing) if it does
    /// not fit.
    pub fn push_record(
        &mut self,
        section: Section,
        owner: &Name,
        meta: RecordMeta,
        rdata: &[u8],
        compress: impl Iterator<Item = (usize, usize)>,
    ) -> bool {
        let RecordMeta { rtype, class, ttl } = meta;
        let mark = self.mark();
        self.write_owner(owner.as_wire());
        self.buf.extend_from_slice(&rtype.0.to_be_bytes());
        self.buf.extend_from_slice(&class.0.to_be_bytes());
        self.buf.extend_from_slice(&ttl.to_be_bytes());
        let rdlen_at = self.buf.len();
        self.buf.extend_from_slice(&[0, 0]);
        let mut copied = 0usize;
        for (off, len) in compress {
            if off < copied || off + len > rdata.len() {
                continue;
            }
            self.buf.extend_from_slice(&rdata[copied..off]);
            self.write_name(&rdata[off..off + len], true);
            copied = off + len;
        }
        self.buf.extend_from_slice(&rdata[copied..]);
        let rdlen = self.buf.len() - rdlen_at - 2;
        if self.buf.len() > self.limit || rdlen > u16::MAX as usize {
            self.rollback(mark);
            return false;
        }
        self.buf[rdlen_at..rdlen_at + 2].copy_from_slice(&(rdlen as u16).to_be_bytes());
        self.counts[section as usize] += 1;
        true
    }

    /// Appends an OPT record (RFC 6891 §6.1.2) with our payload size, the upper
    /// 8 bits of an extended `rcode`, the DO bit and, if given, an Extended
    /// DNS Error option (RFC 8914). Ignores the size limit (the caller
    /// reserved [`OPT_LEN`]; an EDE goes only with an error reply, which
    /// holds no more than the question).
    pub fn push_opt(&mut self, udp_payload: u16, rcode: Rcode, dnssec_ok: bool, ede: Option<Ede>) {
        self.buf.push(0);
        self.buf.extend_from_slice(&RType::OPT.0.to_be_bytes());
        self.buf.extend_from_slice(&udp_payload.to_be_bytes());
        self.buf.push(rcode.extended_bits());
        self.buf.push(0);
        self.buf
            .extend_from_slice(&(if dnssec_ok { 0x8000u16 } else { 0 }).to_be_bytes());
        match ede {
            None => self.buf.extend_from_slice(&[0, 0]),
            Some(ede) => {
                self.buf
                    .extend_from_slice(&(ede.option_len() as u16).to_be_bytes());
                ede.write(self.buf);
            }
        }
        self.counts[Section::Additional as usize] += 1;
    }

    /// Sets header flags.
    pub fn set_flags(&mut self, flags: Flags) {
        let f = u16::from_be_bytes([self.buf[2], self.buf[3]]) | flags.bits();
        self.buf[2..4].copy_from_slice(&f.to_be_bytes());
    }

    /// Replaces the 4-bit header rcode.
    pub fn set_rcode(&mut self, rcode: Rcode) {
        let f = (u16::from_be_bytes([self.buf[2], self.buf[3]]) & !0xF) | rcode.header_bits();
        self.buf[2..4].copy_from_slice(&f.to_be_bytes());
    }

    /// Number of records written to `section`.
    pub fn count(&self, section: Section) -> u16 {
        self.counts[section as usize]
    }

    /// Writes the section counts into the header and hands back the recorded
    /// pointer offsets.
    pub fn finish_with_pointers(mut self) -> Vec<u16> {
        let pointers = self.pointers.take().unwrap_or_default();
        self.finish();
        pointers
    }

    /// Writes the section counts into the header.
    pub fn finish(self) {
        for (i, c) in self.counts.iter().enumerate() {
            self.buf[4 + 2 * i..6 + 2 * i].copy_from_slice(&c.to_be_bytes());
        }
    }

    fn remember_name(&mut self, at: usize) {
        // The question's name: uncompressed, every suffix a target.
        let Some(len) = authd_datasrc::name::wire_len(&self.buf[at..]) else {
            return;
        };
        let mut starts = [0u8; MAX_LABELS];
        let mut hashes = [0u32; MAX_LABELS + 1];
        let n = suffix_hashes(&self.buf[at..at + len], &mut starts, &mut hashes);
        for j in 0..n {
            self.add_target(at + usize::from(starts[j]), hashes[j]);
        }
    }

    fn add_target(&mut self, offset: usize, hash: u32) {
        if offset > 0x3FFF || self.target_count >= MAX_COMPRESSION_TARGETS {
            return;
        }
        let t = self.target_count;
        self.targets[t] = offset as u16;
        self.target_hash[t] = hash;
        self.target_count += 1;
        let mut slot = hash as usize & 0xFF;
        for _ in 0..256 {
            let e = self.index[slot] as usize;
            if e == 0 || e > t {
                self.index[slot] = (t + 1) as u8;
                return;
            }
            slot = (slot + 1) & 0xFF;
        }
    }

    /// The offset of a written name equal to `suffix` (whose hash is `hash`),
    /// byte for byte when `exact`, else ignoring ASCII case.
    fn find_target(&self, hash: u32, suffix: &[u8], exact: bool) -> Option<u16> {
        let mut slot = hash as usize & 0xFF;
        for _ in 0..256 {
            let e = self.index[slot] as usize;
            if e == 0 {
                return None;
            }
            let t = e - 1;
            if t < self.target_count
                && self.target_hash[t] == hash
                && self.name_matches(self.targets[t] as usize, suffix, exact)
            {
                return Some(self.targets[t]);
            }
            slot = (slot + 1) & 0xFF;
        }
        None
    }

    /// Compares the uncompressed `name` with the (possibly compressed) name at
    /// `at` in the buffer: byte for byte when `exact`, else ignoring ASCII
    /// case.
    fn name_matches(&self, mut at: usize, name: &[u8], exact: bool) -> bool {
        let buf = &self.buf[..];
        let mut i = 0usize;
        let mut hops = 0;
        loop {
            let Some(&len) = buf.get(at) else {
                return false;
            };
            if len & 0xC0 == 0xC0 {
                let Some(&lo) = buf.get(at + 1) else {
                    return false;
                };
                at = (((len & 0x3F) as usize) << 8) | lo as usize;
                hops += 1;
                if hops > 32 {
                    return false;
                }
                continue;
            }
            let l = len as usize;
            if name.get(i) != Some(&len) {
                return false;
            }
            if l == 0 {
                return true;
            }
            match (buf.get(at + 1..at + 1 + l), name.get(i + 1..i + 1 + l)) {
                (Some(a), Some(b)) if a == b || !exact && a.eq_ignore_ascii_case(b) => {}
                _ => return false,
            }
            at += 1 + l;
            i += 1 + l;
        }
    }

    /// Writes `name` (uncompressed wire form) compressing its longest suffix
    /// already in the message: each suffix's hash is compared with the
    /// targets' before any byte comparison. An owner (`exact` false) may point
    /// to the same name in another case, the question's, as BIND 9 answers
    /// with the question's spelling; a name in RDATA (`exact`) only to the
    /// same bytes, so that it keeps its case (RFC 4343 §4.1), as BIND 9
    /// compresses.
    ///
    /// Returns the offset a later pointer to the whole name can take: the
    /// target it points to, or where its first label was written; `None` for
    /// the root or past the 14-bit pointer range.
    fn write_name(&mut self, name: &[u8], exact: bool) -> Option<u16> {
        let mut starts = [0u8; MAX_LABELS];
        let mut hashes = [0u32; MAX_LABELS + 1];
        let n = suffix_hashes(name, &mut starts, &mut hashes);
        let mut found: Option<(usize, u16)> = None;
        for i in 0..n {
            let start = usize::from(starts[i]);
            if let Some(t) = self.find_target(hashes[i], &name[start..], exact) {
                found = Some((i, t));
                break;
            }
        }
        let upto = found.map_or(n, |(i, _)| i);
        let first = self.buf.len();
        for j in 0..upto {
            let offset = self.buf.len();
            let start = usize::from(starts[j]);
            let len = usize::from(name[start]);
            self.buf.extend_from_slice(&name[start..start + 1 + len]);
            self.add_target(offset, hashes[j]);
        }
        match found {
            Some((_, t)) => {
                self.write_pointer(t);
                if upto == 0 {
                    return Some(t);
                }
            }
            None => self.buf.push(0),
        }
        (upto > 0 && first <= 0x3FFF).then_some(first as u16)
    }

    /// A compression pointer to offset `to` (recorded for templates).
    fn write_pointer(&mut self, to: u16) {
        if let Some(p) = self.pointers.as_mut() {
            p.push(self.buf.len() as u16);
        }
        self.buf.extend_from_slice(&(0xC000u16 | to).to_be_bytes());
    }

    /// Writes a record's owner name: a pointer to the previous owner when it
    /// is the same name (the same bytes, or equal ignoring ASCII case, as
    /// [`Self::write_name`] compresses owners), else compressed as any name.
    fn write_owner(&mut self, name: &[u8]) {
        if let Some((addr, len, at)) = self.last_owner
            && len == name.len()
            && (addr == name.as_ptr() as usize || self.name_matches(usize::from(at), name, false))
        {
            self.write_pointer(at);
            return;
        }
        self.last_owner = self
            .write_name(name, false)
            .map(|at| (name.as_ptr() as usize, name.len(), at));
    }
}

/// Most labels in a name (each at least 2 bytes of 255).
const MAX_LABELS: usize = 128;

/// Splits an uncompressed name into its label offsets (`starts`) and computes,
/// right to left, a case-insensitive hash of every suffix (`hashes[i]` for the
/// suffix starting at label `i`; `hashes[n]` is the root). Returns the label
/// count `n`.
fn suffix_hashes(
    name: &[u8],
    starts: &mut [u8; MAX_LABELS],
    hashes: &mut [u32; MAX_LABELS + 1],
) -> usize {
    let mut n = 0;
    let mut p = 0;
    while let Some(&len) = name.get(p) {
        if len == 0 || n == MAX_LABELS || p > MAX_NAME_LEN || p + 1 + len as usize > name.len() {
            break;
        }
        // A name is at most 255 bytes, so every label starts below 255.
        starts[n] = p as u8;
        n += 1;
        p += 1 + len as usize;
    }
    hashes[n] = 0x9e37_79b9;
    for i in (0..n).rev() {
        let start = usize::from(starts[i]);
        let len = name[start] as usize;
        let mut h = u64::from(hashes[i + 1] ^ len as u32);
        // Eight bytes a step, each with bit 0x20 set: the two cases of a
        // letter hash alike (other bytes may collide: matches are compared
        // byte for byte afterwards).
        let mut chunks = name[start + 1..start + 1 + len].chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            h = mix(h, u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            h = mix(h, u64::from_le_bytes(word));
        }
        // The high half: the product's best-mixed bits.
        hashes[i] = (h >> 32) as u32;
    }
    n
}

/// One step of [`suffix_hashes`]: folds eight name bytes, case folded, into `h`.
#[inline(always)]
fn mix(h: u64, word: u64) -> u64 {
    (h.rotate_left(23) ^ (word | 0x2020_2020_2020_2020)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The RDATA of `len` bytes at `at` with the names RFC 3597 §4 lets senders
/// compress (the RFC 1035 types) decompressed; `None` when malformed (a
/// name running past the RDATA, or bytes left after the names where the type
/// has none, or not the 20 of an SOA). For UPDATE and incoming transfers.
pub(crate) fn read_rdata(msg: &[u8], at: usize, len: usize, rtype: RType) -> Option<Rdata> {
    let end = at.checked_add(len)?;
    let raw = msg.get(at..end)?;
    // (bytes before the names, names, bytes after them)
    let (prefix, names, suffix) = match rtype.0 {
        2..=5 | 7..=9 | 12 => (0, 1, 0),
        15 => (2, 1, 0),
        6 => (0, 2, 20),
        14 => (0, 2, 0),
        _ => return Some(Rdata::from_wire(raw)),
    };
    let mut out = raw.get(..prefix)?.to_vec();
    let mut pos = at + prefix;
    for _ in 0..names {
        let (name, next) = read_name(msg, pos)?;
        if next > end {
            return None;
        }
        out.extend_from_slice(name.as_wire());
        pos = next;
    }
    let rest = msg.get(pos..end)?;
    if rest.len() != suffix {
        return None;
    }
    out.extend_from_slice(rest);
    Some(Rdata::from_wire(&out))
}

/// Reads a possibly compressed name at `at`: the name and the offset after it
/// (after the first pointer, if any). `None` for a malformed name, a pointer
/// loop or a name over 255 bytes.
pub fn read_name(msg: &[u8], at: usize) -> Option<(Name, usize)> {
    let mut wire = [0u8; MAX_NAME_LEN];
    let mut len = 0;
    let mut pos = at;
    let mut end = None;
    let mut hops = 0;
    loop {
        let b = *msg.get(pos)?;
        match b & 0xC0 {
            0xC0 => {
                let lo = *msg.get(pos + 1)?;
                end.get_or_insert(pos + 2);
                hops += 1;
                let target = (usize::from(b & 0x3F) << 8) | usize::from(lo);
                // Pointers go backwards (RFC 1035 §4.1.4); a bound stops loops.
                if hops > 127 || target >= pos {
                    return None;
                }
                pos = target;
            }
            0x00 => {
                let l = usize::from(b);
                let label = msg.get(pos..pos + 1 + l)?;
                wire.get_mut(len..len + 1 + l)?.copy_from_slice(label);
                len += 1 + l;
                pos += 1 + l;
                if l == 0 {
                    let name = Name::from_wire(&wire[..len]).ok()?;
                    return Some((name, end.unwrap_or(pos)));
                }
            }
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(qname: &[u8], qtype: u16, extra: &[u8], arcount: u16) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0];
        m.extend_from_slice(&arcount.to_be_bytes());
        m.extend_from_slice(qname);
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&1u16.to_be_bytes());
        m.extend_from_slice(extra);
        m
    }

    #[test]
    fn parses_query_with_edns() {
        let opt = [0, 0, 41, 0x10, 0, 0, 0, 0x80, 0, 0, 0];
        let m = query(b"\x03WwW\x07example\x00", 1, &opt, 1);
        let r = parse_query(&m).expect("parses");
        assert_eq!(r.id, 0x1234);
        assert_eq!(r.qname.to_string(), "WwW.example.");
        assert_eq!(r.qtype, RType::A);
        assert_eq!(
            r.edns,
            Some(Edns {
                udp_payload: 4096,
                version: 0,
                dnssec_ok: true,
                cookie: None,
                nsid: false,
                keepalive: false,
                option_room: 0,
            })
        );
    }

    /// An OPT record (payload 4096) holding `options`.
    fn opt_with(options: &[u8]) -> Vec<u8> {
        let mut opt = vec![0, 0, 41, 0x10, 0, 0, 0, 0, 0];
        opt.extend_from_slice(&(options.len() as u16).to_be_bytes());
        opt.extend_from_slice(options);
        opt
    }

    /// OPT RDATA that is not whole options, or a COOKIE of a length RFC 7873
    /// §5.2.2 rules out, is FORMERR; whole options of any other kind are fine.
    #[test]
    fn malformed_edns_options_are_formerr() {
        let with_options =
            |options: &[u8]| parse_query(&query(b"\x00", 6, &opt_with(options), 1)).map(|_| ());
        let cookie = |len: usize| {
            let mut o = vec![0, 10];
            o.extend_from_slice(&(len as u16).to_be_bytes());
            o.extend(std::iter::repeat_n(0xAB, len));
            o
        };
        for ok in [vec![], cookie(8), cookie(16), cookie(40), vec![0, 3, 0, 0]] {
            assert!(with_options(&ok).is_ok(), "{ok:?}");
        }
        let ecs = |family: u16, source: u8, scope: u8, address: &[u8]| {
            let mut o = vec![0, 8];
            o.extend_from_slice(&(4 + address.len() as u16).to_be_bytes());
            o.extend_from_slice(&family.to_be_bytes());
            o.extend_from_slice(&[source, scope]);
            o.extend_from_slice(address);
            o
        };
        for ok in [
            ecs(1, 24, 0, &[192, 0, 2]),
            ecs(1, 0, 0, &[]),
            ecs(1, 32, 0, &[192, 0, 2, 1]),
            ecs(2, 56, 0, &[0x20, 1, 0xd, 0xb8, 0, 0, 0]),
            ecs(1, 23, 0, &[192, 0, 2]),
        ] {
            assert!(with_options(&ok).is_ok(), "{ok:?}");
        }
        for bad in [
            vec![0, 8, 0, 5, 1, 2],
            vec![0, 8, 0],
            cookie(5),
            cookie(12),
            cookie(41),
            [cookie(8), cookie(8)].concat(),
            // Client Subnet (RFC 7871 §6): too short, unknown family, prefix
            // longer than the address, address bytes not matching the prefix,
            // bits past the prefix, a scope prefix in a query.
            vec![0, 8, 0, 0],
            vec![0, 8, 0, 3, 0, 1, 24],
            ecs(3, 0, 0, &[]),
            ecs(1, 33, 0, &[192, 0, 2, 1, 0]),
            ecs(2, 129, 0, &[0; 17]),
            ecs(1, 24, 0, &[192, 0, 2, 1]),
            ecs(1, 24, 0, &[192, 0]),
            ecs(1, 23, 0, &[192, 0, 3]),
            ecs(1, 24, 24, &[192, 0, 2]),
        ] {
            assert!(
                matches!(
                    with_options(&bad),
                    Err(ParseError::Reject {
                        rcode: Rcode::FORMERR,
                        ..
                    })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn rejects_bad_queries() {
        assert_eq!(parse_query(&[0; 5]), Err(ParseError::Drop));
        let mut resp = query(b"\x00", 1, &[], 0);
        resp[2] |= 0x80;
        assert_eq!(parse_query(&resp), Err(ParseError::Drop));
        let mut two = query(b"\x00", 1, &[], 0);
        two[5] = 2;
        assert!(matches!(
            parse_query(&two),
            Err(ParseError::Reject {
                rcode: Rcode::FORMERR,
                ..
            })
        ));
        let truncated = query(b"\x03www\x00", 1, &[], 0);
        assert!(matches!(
            parse_query(&truncated[..truncated.len() - 1]),
            Err(ParseError::Reject {
                rcode: Rcode::FORMERR,
                ..
            })
        ));
        let opt = [0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0];
        let mut twice = opt.to_vec();
        twice.extend_from_slice(&opt);
        assert!(matches!(
            parse_query(&query(b"\x00", 1, &twice, 2)),
            Err(ParseError::Reject {
                rcode: Rcode::FORMERR,
                ..
            })
        ));
        // Bytes after the question with no record counted, or after the OPT.
        let mut trailing = query(b"\x03www\x00", 1, &[], 0);
        trailing.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        assert!(matches!(
            parse_query(&trailing),
            Err(ParseError::Reject {
                rcode: Rcode::FORMERR,
                question: Some(_),
                ..
            })
        ));
        let mut after_opt = query(b"\x00", 1, &opt, 1);
        after_opt.push(0);
        assert!(matches!(
            parse_query(&after_opt),
            Err(ParseError::Reject {
                rcode: Rcode::FORMERR,
                ..
            })
        ));
        assert!(parse_query(&query(b"\x00", 1, &opt, 1)).is_ok());
        // Any opcode parses (NOTIFY here): the dispatcher decides what to answer.
        let mut notify = query(b"\x00", 6, &[], 0);
        notify[2] = 0x20;
        assert_eq!(parse_query(&notify).map(|r| r.opcode), Ok(Opcode::NOTIFY));
    }

    /// The COOKIE option is handed over as client and server cookie.
    #[test]
    fn cookie_option_is_extracted() {
        let mut opt = vec![0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 28, 0, 10, 0, 24];
        opt.extend(1..=24u8);
        let m = query(b"\x00", 6, &opt, 1);
        let cookie = parse_query(&m)
            .expect("parses")
            .edns
            .and_then(|e| e.cookie)
            .expect("cookie");
        assert_eq!(cookie.client, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(cookie.server, (9..=24u8).collect::<Vec<_>>());
    }

    /// NSID and edns-tcp-keepalive are noted (a keepalive's value ignored);
    /// a malformed COOKIE rejects with `edns` set, so the FORMERR has an OPT.
    #[test]
    fn nsid_keepalive_and_bad_options() {
        let opt = |options: &[u8]| query(b"\x00", 6, &opt_with(options), 1);
        let flags = |m: &[u8]| {
            let e = parse_query(m).expect("parses").edns.expect("edns");
            (e.nsid, e.keepalive, e.option_room)
        };
        assert_eq!(
            flags(&opt(&[0, 3, 0, 0, 0, 11, 0, 2, 0, 9])),
            (true, true, 0)
        );
        assert_eq!(flags(&opt(&[])), (false, false, 0));
        assert!(matches!(
            parse_query(&opt(&[0, 10, 0, 2, 1, 2])),
            Err(ParseError::Reject {
                rcode: Rcode::FORMERR,
                edns: true,
                question: Some(_),
                ..
            })
        ));
    }

    /// After the OPT only a TSIG may follow (it is the last record, RFC 8945
    /// §5.1); anything else is FORMERR.
    #[test]
    fn only_tsig_follows_the_opt() {
        let opt = [0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0];
        let a = [0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 192, 0, 2, 1];
        let tsig = [0, 0, 250, 0, 255, 0, 0, 0, 0, 0, 0];
        let after = |record: &[u8]| {
            parse_query(&query(b"\x00", 6, &[&opt[..], record].concat(), 2)).map(|_| ())
        };
        assert!(matches!(
            after(&a),
            Err(ParseError::Reject {
                rcode: Rcode::FORMERR,
                ..
            })
        ));
        assert!(after(&tsig).is_ok());
        // Before the OPT any record is fine.
        assert!(parse_query(&query(b"\x00", 6, &[&a[..], &opt].concat(), 2)).is_ok());
    }

    /// A TSIG record is located when it is the last record of the
    /// additional section; anywhere else, or twice, the message is FORMERR
    /// (RFC 8945 §5.1). Its content is the verifier's business.
    #[test]
    fn tsig_must_be_last_and_single() {
        let tsig = |owner: u8| [owner, 0, 250, 0, 255, 0, 0, 0, 0, 0, 0];
        let opt = [0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0];
        let formerr = |m: &[u8]| {
            matches!(
                parse_query(m),
                Err(ParseError::Reject {
                    rcode: Rcode::FORMERR,
                    question: Some(_),
                    ..
                })
            )
        };
        let base = query(b"\x03www\x00", 1, &[], 0).len();
        let last = query(b"\x03www\x00", 1, &[opt, tsig(0)].concat(), 2);
        assert_eq!(
            parse_query(&last).map(|r| r.tsig),
            Ok(Some(base + opt.len()))
        );
        assert_eq!(
            parse_query(&query(b"\x00", 1, &opt, 1)).map(|r| r.tsig),
            Ok(None)
        );
        // Not last: before the OPT.
        assert!(formerr(&query(
            b"\x03www\x00",
            1,
            &[tsig(0), opt].concat(),
            2
        )));
        // Two TSIGs.
        assert!(formerr(&query(
            b"\x03www\x00",
            1,
            &[tsig(0), tsig(0)].concat(),
            2
        )));
        // In the answer or authority section, even as the last record.
        for section in [6, 8] {
            let mut m = query(b"\x03www\x00", 1, &tsig(0), 0);
            m[section + 1] = 1;
            assert!(formerr(&m), "section at {section}");
        }
    }

    #[test]
    fn peeks_at_the_head() {
        let mut q = query(b"\x03www\x00", 252, &[], 0);
        q[0..2].copy_from_slice(&0xbeefu16.to_be_bytes());
        q[2] = 0x29; // opcode 5 (UPDATE), RD
        assert_eq!(
            peek_head(&q),
            Some(Head {
                id: 0xbeef,
                opcode: Opcode::UPDATE,
                flags: Flags::RD,
            })
        );
        assert_eq!(peek_head(&q[..11]), None);
        q[2] |= 0x80;
        assert_eq!(peek_head(&q), None, "a response is never answered");
    }

    #[test]
    fn header_word_and_extended_rcode() {
        let header = Header {
            id: 7,
            opcode: Opcode::NOTIFY,
            flags: Flags::QR | Flags::AA | Flags::CD,
            rcode: Rcode::BADVERS,
        };
        // QR, opcode 4, AA, CD; rcode 16 leaves 0 in the header, 1 for the OPT.
        assert_eq!(header.word(), 0x8000 | 0x2000 | 0x0400 | 0x0010);
        assert_eq!(Rcode::BADVERS.extended_bits(), 1);
        assert_eq!(Flags::from_word(0xFFFF).echoed(), Flags::RD | Flags::CD);
        assert_eq!(Opcode::from_word(0x2800), Opcode::UPDATE);
        assert_eq!(Opcode(3).to_string(), "OPCODE3");
    }

    #[test]
    fn compresses_names() {
        let mut buf = Vec::new();
        let header = Header {
            id: 1,
            opcode: Opcode::QUERY,
            flags: Flags::empty(),
            rcode: Rcode::NOERROR,
        };
        let mut w = MessageWriter::new(&mut buf, header, 512);
        assert!(w.push_question(b"\x03www\x07example\x00\x00\x01\x00\x01"));
        let owner: Name = "WWW.example.".parse().expect("name");
        let target: Name = "mail.example.".parse().expect("name");
        assert!(w.push_record(
            Section::Answer,
            &owner,
            RecordMeta {
                rtype: RType::CNAME,
                class: Class::IN,
                ttl: 60
            },
            target.as_wire(),
            [(0, target.as_wire().len())].into_iter()
        ));
        w.finish();
        // owner → pointer to 12; target "mail" + pointer to "example" at 16.
        assert_eq!(&buf[29..31], &[0xC0, 12]);
        assert_eq!(&buf[41..48], b"\x04mail\xC0\x10");
        assert_eq!(u16::from_be_bytes([buf[39], buf[40]]), 7);
        assert_eq!(&buf[6..8], &[0, 1]);
    }

    /// A repeated owner (the same `Name`, or an equal one in another case)
    /// is a pointer to where the previous owner was written, not to the
    /// question; a rolled-back owner is never pointed at.
    #[test]
    fn repeated_owners_point_at_the_previous_one() {
        let mut buf = Vec::new();
        let header = Header {
            id: 1,
            opcode: Opcode::QUERY,
            flags: Flags::empty(),
            rcode: Rcode::NOERROR,
        };
        let mut w = MessageWriter::new(&mut buf, header, 512);
        // Question "example." at 12..21, then QTYPE/QCLASS: 25.
        assert!(w.push_question(b"\x07example\x00\x00\x01\x00\x01"));
        let meta = RecordMeta {
            rtype: RType::A,
            class: Class::IN,
            ttl: 60,
        };
        let ns1: Name = "ns1.example.".parse().expect("name");
        let ns1_upper: Name = "NS1.example.".parse().expect("name");
        let ns2: Name = "ns2.example.".parse().expect("name");
        let rdata = [192, 0, 2, 1];
        // 25: "\x03ns1" + pointer to 12, then 10 bytes of fixed fields + 4 of RDATA.
        assert!(w.push_record(Section::Additional, &ns1, meta, &rdata, std::iter::empty()));
        assert_eq!(w.len(), 25 + 6 + 10 + 4);
        // The same Name, then an equal one in another case: pointers to 25.
        assert!(w.push_record(Section::Additional, &ns1, meta, &rdata, std::iter::empty()));
        assert!(w.push_record(
            Section::Additional,
            &ns1_upper,
            meta,
            &rdata,
            std::iter::empty()
        ));
        let mark = w.mark();
        // ns2 is new: written at 77, then rolled back.
        assert!(w.push_record(Section::Additional, &ns2, meta, &rdata, std::iter::empty()));
        w.rollback(mark);
        // Written again after the rollback: its labels again, not a pointer
        // into the dropped bytes.
        assert!(w.push_record(Section::Additional, &ns2, meta, &rdata, std::iter::empty()));
        w.finish();
        assert_eq!(&buf[25..31], b"\x03ns1\xC0\x0C");
        assert_eq!(&buf[45..47], &[0xC0, 25]);
        assert_eq!(&buf[61..63], &[0xC0, 25]);
        assert_eq!(&buf[77..83], b"\x03ns2\xC0\x0C");
        assert_eq!(buf.len(), 83 + 14);
        assert_eq!(&buf[10..12], &[0, 4]);
    }
}
