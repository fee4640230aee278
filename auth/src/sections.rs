//! Reading what others send us, section by section: the RRs of a section
//! (UPDATE's prerequisite and update sections, RFC 2136 §2.4–2.5; the answers
//! of a transfer, RFC 5936 §2.2) and the header of a reply to one of our own
//! requests (transfers, SOA queries, NOTIFY). One reader for update.rs,
//! xfrin.rs and notify.rs. Kept apart from `wire.rs`, the query path's
//! module: with it there, the renderer's code was laid out worse (callgrind:
//! +1.7% instructions per query).

use authd_datasrc::{Class, Name, RType, Rdata};

use crate::wire::{Flags, HEADER_LEN, Opcode, Rcode, read_name, read_rdata, u16_at};

/// One resource record of a message section, its owner (and the names of
/// its RDATA, RFC 3597 §4) decompressed. For UPDATE (RFC 2136 §2.4, §2.5),
/// incoming transfers and replies to our own requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionRr {
    /// The owner name.
    pub owner: Name,
    /// TYPE.
    pub rtype: RType,
    /// CLASS (UPDATE gives ANY and NONE meanings of their own).
    pub class: Class,
    /// TTL as sent, seconds.
    pub ttl: u32,
    /// The RDATA; `None` when RDLENGTH is 0 (UPDATE's "delete" forms).
    pub rdata: Option<Rdata>,
}

/// Reads `count` records from `msg` at `pos` (a section): the records and the
/// position after them. `None` for a record cut short, a malformed name, or
/// RDATA that does not read as its type ([`read_rdata`]).
pub fn read_section(msg: &[u8], mut pos: usize, count: u16) -> Option<(Vec<SectionRr>, usize)> {
    let mut rrs = Vec::with_capacity(usize::from(count).min(1024));
    for _ in 0..count {
        let (owner, at) = read_name(msg, pos)?;
        let rtype = RType(u16_at(msg, at)?);
        let class = Class(u16_at(msg, at + 2)?);
        let ttl = u32::from(u16_at(msg, at + 4)?) << 16 | u32::from(u16_at(msg, at + 6)?);
        let rdlen = usize::from(u16_at(msg, at + 8)?);
        let start = at + 10;
        let rdata = if rdlen == 0 {
            None
        } else {
            Some(read_rdata(msg, start, rdlen, rtype)?)
        };
        pos = start + rdlen;
        if pos > msg.len() {
            return None;
        }
        rrs.push(SectionRr {
            owner,
            rtype,
            class,
            ttl,
            rdata,
        });
    }
    Some((rrs, pos))
}

/// The header of a reply to one of our own requests (a transfer, an SOA
/// query, a NOTIFY), checked to answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHead {
    /// The flags (QR is set).
    pub flags: Flags,
    /// The header's response code (the low four bits: our requests carry no OPT).
    pub rcode: Rcode,
    /// QDCOUNT, ANCOUNT, NSCOUNT, ARCOUNT.
    pub counts: [u16; 4],
}

/// Why a message is not a reply to our request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotOurReply {
    /// Shorter than a header.
    Short,
    /// Another message id.
    Id,
    /// QR not set, or another opcode.
    Kind,
}

impl std::fmt::Display for NotOurReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NotOurReply::Short => "not a reply to our request (too short)",
            NotOurReply::Id => "not a reply to our request (id)",
            NotOurReply::Kind => "not a reply to our request (QR, opcode)",
        })
    }
}

/// Reads the header of `msg` as a reply to our request `id` of `opcode`.
///
/// Errors: [`NotOurReply`].
pub fn read_reply_head(msg: &[u8], id: u16, opcode: Opcode) -> Result<ReplyHead, NotOurReply> {
    if msg.len() < HEADER_LEN {
        return Err(NotOurReply::Short);
    }
    if u16_at(msg, 0) != Some(id) {
        return Err(NotOurReply::Id);
    }
    let word = u16_at(msg, 2).unwrap_or(0);
    let flags = Flags::from_word(word);
    if !flags.contains(Flags::QR) || Opcode::from_word(word) != opcode {
        return Err(NotOurReply::Kind);
    }
    let count = |at| u16_at(msg, at).unwrap_or(0);
    Ok(ReplyHead {
        flags,
        rcode: Rcode(word & 0x000F),
        counts: [count(4), count(6), count(8), count(10)],
    })
}
