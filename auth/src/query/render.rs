//! Rendering an [`Answer`] into a reply message: size limits (RFC 1035
//! §4.2.1, RFC 6891 §6.2.3), truncation (RFC 2181 §9, RFC 9471), OPT.

use authd_datasrc::RType;

use super::{Answer, Placed, Transport};
use crate::wire::{
    COOKIE_OPTION_LEN, Flags, HEADER_LEN, Header, MAX_TCP_MESSAGE, MIN_UDP_PAYLOAD, MessageWriter,
    OPT_LEN, RecordMeta, Request, Section,
};

pub use crate::wire::EDNS_UDP_PAYLOAD;

/// Renders `ans` as the reply to `req` into `out`.
///
/// Size limit: TCP 65535; UDP the client's EDNS payload size capped at
/// [`EDNS_UDP_PAYLOAD`], or 512 without EDNS. When an answer or authority RRset
/// (with its signatures) or required glue does not fit, the reply keeps what fit
/// and sets TC (RFC 2181 §9); other additional data is dropped silently.
pub fn render(req: &Request<'_>, ans: &Answer, transport: Transport, out: &mut Vec<u8>) {
    render_impl(req, ans, transport, out, false, 0);
}

/// The reply size limit for `req` over `transport`, bytes, less the room the
/// options the dispatcher appends to the OPT after rendering take
/// ([`crate::edns::append`]): a COOKIE when the query sent one, and
/// [`crate::wire::Edns::option_room`] (NSID, keepalive).
pub fn reply_limit(req: &Request<'_>, transport: Transport) -> usize {
    let limit = message_limit(req, transport);
    match req.edns {
        Some(e) if e.cookie.is_some() => limit - COOKIE_OPTION_LEN - usize::from(e.option_room),
        Some(e) => limit - usize::from(e.option_room),
        None => limit,
    }
}

/// The largest reply to `req` over `transport`, bytes: TCP 65535; UDP the
/// client's EDNS payload size capped at [`EDNS_UDP_PAYLOAD`], or 512
/// without EDNS.
pub fn message_limit(req: &Request<'_>, transport: Transport) -> usize {
    match (transport, req.edns) {
        (Transport::Tcp | Transport::Tls, _) => MAX_TCP_MESSAGE,
        (Transport::Udp, Some(e)) => {
            usize::from(e.udp_payload.min(EDNS_UDP_PAYLOAD)).max(MIN_UDP_PAYLOAD)
        }
        (Transport::Udp, None) => MIN_UDP_PAYLOAD,
    }
}

/// [`render`]; with `record`, returns the offsets of the compression pointers
/// written (for a referral template).
pub(super) fn render_impl(
    req: &Request<'_>,
    ans: &Answer,
    transport: Transport,
    out: &mut Vec<u8>,
    record: bool,
    shrink: usize,
) -> Vec<u16> {
    let limit = reply_limit(req, transport).saturating_sub(shrink);
    let aa = if ans.aa { Flags::AA } else { Flags::empty() };
    let mut w = MessageWriter::new(out, Header::reply_to(req, aa, ans.rcode), limit);
    if record {
        w.record_pointers();
    }
    let dnssec = req.edns.is_some_and(|e| e.dnssec_ok);
    if req.edns.is_some() {
        w.reserve(OPT_LEN);
    }
    w.push_question(req.question);
    let mut truncated = false;
    'sections: for (section, list) in [
        (Section::Answer, &ans.answer),
        (Section::Authority, &ans.authority),
        (Section::Additional, &ans.additional),
    ] {
        for (i, placed) in list.iter().enumerate() {
            if !push_rrset(&mut w, section, placed, dnssec) {
                if section != Section::Additional || i < ans.required_glue {
                    truncated = true;
                }
                if section != Section::Additional {
                    break 'sections;
                }
            }
        }
    }
    if truncated {
        w.set_flags(Flags::TC);
    }
    if let Some(e) = req.edns {
        w.unreserve(OPT_LEN);
        w.push_opt(EDNS_UDP_PAYLOAD, ans.rcode, e.dnssec_ok, ans.ede);
    }
    debug_assert!(w.len() >= HEADER_LEN);
    w.finish_with_pointers()
}

/// Writes one RRset and, with DO, its RRSIGs: all of it or nothing.
fn push_rrset(w: &mut MessageWriter<'_>, section: Section, placed: &Placed, dnssec: bool) -> bool {
    let mark = w.mark();
    let set = &placed.rrset;
    let owner = placed.owner();
    let ttl = placed.ttl.unwrap_or(set.ttl);
    for rdata in &set.rdatas {
        if !w.push_record(
            section,
            owner,
            RecordMeta {
                rtype: set.rtype,
                class: set.class,
                ttl,
            },
            rdata.as_wire(),
            rdata.compressible_names(set.rtype),
        ) {
            w.rollback(mark);
            return false;
        }
    }
    if dnssec {
        let sig_ttl = placed.ttl.map_or(set.sig_ttl, |t| t.min(set.sig_ttl));
        for sig in &set.sigs {
            if !w.push_record(
                section,
                owner,
                RecordMeta {
                    rtype: RType::RRSIG,
                    class: set.class,
                    ttl: sig_ttl,
                },
                sig.as_wire(),
                std::iter::empty(),
            ) {
                w.rollback(mark);
                return false;
            }
        }
    }
    true
}
