//! NOTIFY in (RFC 1996): the handler of the table's NOTIFY row, and of the
//! one other message a secondary zone is answered here for, an UPDATE
//! (refused). Who may NOTIFY which zone, and what an accepted NOTIFY wakes,
//! is the secondary role's policy ([`SecondaryPolicy::notify`]); this file
//! writes the answer and logs the refusals.
//!
//! | message | answer |
//! |---|---|
//! | NOTIFY, IN SOA, a secondary zone, from one of its primaries or `[notify] allow` | NOERROR, AA, the question echoed (§4.7); the zone's refresh woken (§3.11) |
//! | NOTIFY, other zones, senders, classes or types | REFUSED, the question echoed |
//! | UPDATE of a secondary zone | REFUSED, the zone section echoed (as BIND 9 without update forwarding) |
//!
//! Refusals are logged within one per-second budget (`REFUSED_LOG`): any
//! client can send many.

use std::net::IpAddr;

use authd_datasrc::{Class, Name, RType};

use crate::edns::Ede;
use crate::log_limit::LogLimit;
use crate::metrics::{Metrics, UpdateResult};
use crate::secondary::{NotifyVerdict, SecondaryPolicy};
use crate::wire::{self, ErrorOpt, Flags, Header, Rcode, Request};

/// NOTIFYs (and UPDATEs of secondary zones) refused, logged.
static REFUSED_LOG: LogLimit = LogLimit::new();

/// Answers the NOTIFY `req` from `peer`, signed with `key` (verified;
/// `None`: unsigned), into `out`: accepted for a secondary zone from one of
/// its primaries (or `[notify] allow`), answered NOERROR with AA and the
/// question echoed (§4.7), waking the zone's refresh (§3.11); REFUSED
/// otherwise, logged within the refusals' budget.
#[inline(never)]
pub fn notify(
    policy: &SecondaryPolicy,
    req: &Request<'_>,
    peer: IpAddr,
    key: Option<&Name>,
    out: &mut Vec<u8>,
) {
    let verdict = if req.qclass == Class::IN && req.qtype == RType::SOA {
        policy.notify(&req.qname, peer, key)
    } else {
        NotifyVerdict::NotSecondary
    };
    let rcode = match verdict {
        NotifyVerdict::Accepted => Rcode::NOERROR,
        NotifyVerdict::NotSecondary | NotifyVerdict::NotAllowed => {
            if let Some(suppressed) = REFUSED_LOG.allow() {
                tracing::warn!(
                    suppressed,
                    "NOTIFY for {} from {peer} refused: {}",
                    req.qname,
                    if verdict == NotifyVerdict::NotAllowed {
                        "not a primary of the zone nor allowed by [notify] allow"
                    } else {
                        "not a secondary zone here"
                    }
                );
            }
            Rcode::REFUSED
        }
    };
    let flags = if rcode == Rcode::NOERROR {
        Flags::AA
    } else {
        Flags::empty()
    };
    // EDE 18 Prohibited with every refusal: this server takes a NOTIFY for
    // that zone from nobody, or not from this sender.
    let ede = (rcode == Rcode::REFUSED).then_some(Ede::PROHIBITED);
    let header = Header::reply_to(req, flags, rcode);
    wire::write_error(out, header, Some(req.question), ErrorOpt::to(req, ede));
}

/// Answers the UPDATE `req` of a secondary zone from `peer` into `out`:
/// REFUSED, the zone section echoed, as BIND 9 answers without update
/// forwarding (a change here would be lost at the next transfer and could
/// set the serial back); logged within the refusals' budget, counted in
/// `metrics`.
#[inline(never)]
pub fn refuse_update(
    req: &Request<'_>,
    peer: IpAddr,
    metrics: Option<&Metrics>,
    out: &mut Vec<u8>,
) {
    if let Some(suppressed) = REFUSED_LOG.allow() {
        tracing::warn!(
            suppressed,
            "UPDATE of {} from {peer} refused: a secondary zone here; send it to the primary",
            req.qname
        );
    }
    if let Some(m) = metrics {
        m.count_update(UpdateResult::of(Rcode::REFUSED));
    }
    let header = Header::reply_to(req, Flags::empty(), Rcode::REFUSED);
    let opt = ErrorOpt::to(req, Some(Ede::PROHIBITED));
    wire::write_error(out, header, Some(req.question), opt);
}
