//! Reading what others send us, section by section: the RRs of a section
//! (UPDATE's prerequisite and update sections, RFC 2136 §2.4–2.5; the answers
//! of a transfer, RFC 5936 §2.2) and the header of a reply to one of our own
//! requests (transfers, SOA queries, NOTIFY). One reader for update.rs,
//! xfrin.rs, notify.rs, tsig.rs (finding and reading the TSIG record) and
//! xfr.rs (an IXFR query's SOA): [`read_section`] decodes, [`rr_at`] and
//! [`each_rr`] read the fixed fields in place, allocating nothing. Kept apart from `wire.rs`, the query path's
//! module: with it there, the renderer's code was laid out worse (callgrind:
//! +1.7% instructions per query).

use authd_datasrc::{Class, Name, RType, Rdata};

use crate::wire::{Flags, HEADER_LEN, Opcode, Rcode, read_name, read_rdata, skip_name, u16_at};

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

/// Where one RR of a message is and its fixed fields (RFC 1035 §4.1.3), read
/// in place: the owner name is skipped, not decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RrAt {
    /// Offset of the owner name (the record's first byte).
    pub start: usize,
    /// TYPE.
    pub rtype: RType,
    /// CLASS.
    pub class: Class,
    /// TTL, seconds.
    pub ttl: u32,
    /// Offset of the RDATA.
    pub rdata: usize,
    /// Offset after the RDATA (never past the message's end).
    pub end: usize,
}

/// The fixed fields of the RR starting at `start` whose owner name ends at
/// `at`. `None` when the record is cut short.
fn fields(msg: &[u8], start: usize, at: usize) -> Option<RrAt> {
    let rdlen = usize::from(u16_at(msg, at + 8)?);
    let rdata = at + 10;
    let end = rdata + rdlen;
    if end > msg.len() {
        return None;
    }
    Some(RrAt {
        start,
        rtype: RType(u16_at(msg, at)?),
        class: Class(u16_at(msg, at + 2)?),
        ttl: u32::from(u16_at(msg, at + 4)?) << 16 | u32::from(u16_at(msg, at + 6)?),
        rdata,
        end,
    })
}

/// The RR at `pos`, read in place. `None` for a malformed owner name or a
/// record cut short.
pub fn rr_at(msg: &[u8], pos: usize) -> Option<RrAt> {
    fields(msg, pos, skip_name(msg, pos)?)
}

/// The offset after the question section (`qdcount` entries from the header's
/// end), or `None` when it is malformed.
pub fn skip_questions(msg: &[u8], qdcount: u16) -> Option<usize> {
    let mut pos = HEADER_LEN;
    for _ in 0..qdcount {
        pos = skip_name(msg, pos)? + 4;
    }
    Some(pos)
}

/// Calls `each` with the index and place of each of `count` records from
/// `pos`, in order; the offset after them, or `None` at the first record
/// that does not read ([`rr_at`]).
pub fn each_rr(
    msg: &[u8],
    mut pos: usize,
    count: usize,
    mut each: impl FnMut(usize, &RrAt),
) -> Option<usize> {
    for i in 0..count {
        let rr = rr_at(msg, pos)?;
        each(i, &rr);
        pos = rr.end;
    }
    Some(pos)
}

/// Reads `count` records from `msg` at `pos` (a section): the records and the
/// position after them. `None` for a record cut short, a malformed name, or
/// RDATA that does not read as its type ([`read_rdata`]).
pub fn read_section(msg: &[u8], mut pos: usize, count: u16) -> Option<(Vec<SectionRr>, usize)> {
    let mut rrs = Vec::with_capacity(usize::from(count).min(1024));
    for _ in 0..count {
        let (owner, at) = read_name(msg, pos)?;
        let rr = fields(msg, pos, at)?;
        let rdata = if rr.rdata == rr.end {
            None
        } else {
            Some(read_rdata(msg, rr.rdata, rr.end - rr.rdata, rr.rtype)?)
        };
        pos = rr.end;
        rrs.push(SectionRr {
            owner,
            rtype: rr.rtype,
            class: rr.class,
            ttl: rr.ttl,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A header with one question (`a.` A IN) and, in the answer section, `a.`
    /// A IN 300 192.0.2.1 then the same owner by pointer with TXT "hi".
    fn message() -> Vec<u8> {
        let mut m = vec![0, 1, 0x84, 0, 0, 1, 0, 2, 0, 0, 0, 0];
        m.extend_from_slice(&[1, b'a', 0, 0, 1, 0, 1]);
        m.extend_from_slice(&[1, b'a', 0, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 1]);
        m.extend_from_slice(&[0xC0, 12, 0, 16, 0, 1, 0, 0, 0, 60, 0, 3, 2, b'h', b'i']);
        m
    }

    #[test]
    fn records_read_in_place_and_decoded_agree() {
        let m = message();
        let pos = skip_questions(&m, 1).expect("question");
        assert_eq!(pos, 19);
        let mut seen = Vec::new();
        let end = each_rr(&m, pos, 2, |i, rr| seen.push((i, *rr))).expect("two records");
        assert_eq!(end, m.len());
        assert_eq!(
            seen,
            [
                (
                    0,
                    RrAt {
                        start: 19,
                        rtype: RType::A,
                        class: Class::IN,
                        ttl: 300,
                        rdata: 32,
                        end: 36
                    }
                ),
                (
                    1,
                    RrAt {
                        start: 36,
                        rtype: RType::TXT,
                        class: Class::IN,
                        ttl: 60,
                        rdata: 48,
                        end: 51
                    }
                ),
            ]
        );
        let (rrs, after) = read_section(&m, pos, 2).expect("decoded");
        assert_eq!(after, end);
        assert_eq!(
            (rrs[1].owner.to_string().as_str(), rrs[1].rtype, rrs[1].ttl),
            ("a.", RType::TXT, 60)
        );
    }

    #[test]
    fn records_cut_short_do_not_read() {
        let m = message();
        // Every cut inside the second record: its RDATA or fixed fields missing.
        for len in 37..m.len() {
            assert_eq!(each_rr(&m[..len], 19, 2, |_, _| {}), None, "cut at {len}");
            assert_eq!(read_section(&m[..len], 19, 2), None, "cut at {len}");
        }
        // A count beyond the records present.
        assert_eq!(each_rr(&m, 19, 3, |_, _| {}), None);
        // A name pointer to itself.
        assert_eq!(rr_at(&[0xC0, 0], 0), None);
    }
}
