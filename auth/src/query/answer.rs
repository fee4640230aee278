//! What query processing produces before rendering: the rcode, the AA bit and
//! the sections as references to RRsets ([`Placed`]).

use std::sync::Arc;

use authd_datasrc::{Name, RRset, RType};

use super::additional::place_additional;
use crate::edns::Ede;
use crate::wire::{Rcode, Request};

/// One RRset placed in a reply section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The RRset (its RRSIGs travel with it when the query had DO).
    pub rrset: Arc<RRset>,
    /// Owner written instead of the RRset's (wildcard synthesis, RFC 4592 §3.4.3).
    pub owner: Option<Name>,
    /// TTL written instead of the RRset's (negative SOA, RFC 2308 §3).
    pub ttl: Option<u32>,
}

impl Placed {
    /// `rrset` as it is: its own owner and TTL.
    pub fn plain(rrset: Arc<RRset>) -> Placed {
        Placed {
            rrset,
            owner: None,
            ttl: None,
        }
    }
    /// The owner written: the override, else the RRset's.
    pub fn owner(&self) -> &Name {
        self.owner.as_ref().unwrap_or(&self.rrset.owner)
    }
}

/// The result of query processing, before rendering.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// Response code (may be extended, e.g. BADVERS).
    pub rcode: Rcode,
    /// Authoritative answer bit.
    pub aa: bool,
    /// Answer section.
    pub answer: Vec<Placed>,
    /// Authority section.
    pub authority: Vec<Placed>,
    /// Additional section (without OPT).
    pub additional: Vec<Placed>,
    /// Additional RRsets whose omission must set TC (in-domain glue, RFC 9471).
    pub required_glue: usize,
    /// Every RRset placed comes from an immutable snapshot (see
    /// `DataSource::immutable_rrsets`), so the reply may be rendered from a
    /// template keyed by their addresses.
    pub templatable: bool,
    /// An RRset was made for this query only (a DNAME's CNAME, RFC 6672 §3.1).
    pub synthesized: bool,
    /// The Extended DNS Error of an error answer (RFC 8914), written with
    /// its OPT record when the query had EDNS.
    pub ede: Option<Ede>,
    /// Prepared additional-section RRsets not placed yet (and the zone cut of
    /// a referral, for in-domain glue): a reply rendered from a template needs
    /// none of them, so they are placed only when the reply is rendered anew.
    pub(super) deferred: Option<Deferred>,
    /// The name key ([`crate::name_hash::name_key`], extra 0) of the zone
    /// answering, when the processor counts zones; 0 otherwise.
    pub zone_key: u64,
}

/// Prepared additional-section RRsets, and the zone cut when they are glue.
type Deferred = (Arc<[Arc<RRset>]>, Option<Name>);

impl Answer {
    /// Empties the sections (keeping their capacity) and sets rcode and AA.
    pub(super) fn reset(&mut self, rcode: Rcode, aa: bool) {
        self.clear();
        self.rcode = rcode;
        self.aa = aa;
    }

    pub(super) fn clear(&mut self) {
        self.answer.clear();
        self.authority.clear();
        self.additional.clear();
        self.required_glue = 0;
        self.templatable = false;
        self.synthesized = false;
        self.ede = None;
        self.deferred = None;
        self.zone_key = 0;
    }

    /// Places the deferred additional-section RRsets, if any.
    pub(super) fn place_deferred(&mut self) {
        if let Some((ready, cut)) = self.deferred.take() {
            place_additional(self, &ready, cut.as_ref(), false);
        }
    }

    /// Places `ready` later (see `deferred`) when nothing else is deferred, at
    /// once otherwise (after what was deferred, so the section keeps its order).
    pub(super) fn defer_additional(&mut self, ready: Arc<[Arc<RRset>]>, cut: Option<&Name>) {
        if self.deferred.is_none() {
            self.deferred = Some((ready, cut.cloned()));
        } else {
            self.place_deferred();
            place_additional(self, &ready, cut, false);
        }
    }

    /// An answer with `rcode` and the AA bit `aa`, its sections empty (an
    /// error, or a reply filled in afterwards).
    pub fn new(rcode: Rcode, aa: bool) -> Answer {
        Answer {
            rcode,
            aa,
            ..Answer::default()
        }
    }

    /// An error answer with `rcode` and the Extended DNS Error `ede`.
    pub fn error(rcode: Rcode, ede: Option<Ede>) -> Answer {
        Answer {
            rcode,
            ede,
            ..Answer::default()
        }
    }
    /// True when an RRset with this owner and type is already placed (BIND 10
    /// keeps each RRset in the first section it is due in).
    pub(super) fn contains(&self, owner: &Name, rtype: RType) -> bool {
        self.answer
            .iter()
            .chain(&self.authority)
            .chain(&self.additional)
            .any(|p| p.rrset.rtype == rtype && p.owner() == owner)
    }
}

/// The kind of a response, for rate limiting and statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResponseKind {
    /// Records of the asked type, or a CNAME/DNAME chain (NOERROR with an answer).
    Answer,
    /// A referral to a delegated zone.
    Referral,
    /// NXDOMAIN.
    NxDomain,
    /// NODATA (NOERROR, no answer, authoritative).
    NoData,
    /// Any other rcode: SERVFAIL, REFUSED, FORMERR, NOTIMP, …
    Error,
}

/// What a response was, as a rate limiter and the metrics account it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    /// Its kind.
    pub kind: ResponseKind,
    /// A case-insensitive hash ([`crate::name_hash::name_key`]) of what the
    /// response is about: qname and qtype for answers, the zone cut for
    /// referrals, the zone apex for NXDOMAIN and NODATA; 0 for errors, or
    /// when it was not asked for.
    pub key: u64,
    /// The name key of the zone that answered (`authd_zone_queries_total`),
    /// when the processor counts zones ([`super::QueryProcessor::counting_zones`]);
    /// 0 for none.
    pub zone: u64,
}

impl Answer {
    /// The kind of this answer to `req`; with `keyed`, its name key.
    pub fn summary(&self, req: &Request<'_>, keyed: bool) -> Response {
        let kind = match self.rcode {
            Rcode::NXDOMAIN => ResponseKind::NxDomain,
            Rcode::NOERROR if !self.answer.is_empty() => ResponseKind::Answer,
            Rcode::NOERROR
                if !self.aa
                    && self
                        .authority
                        .first()
                        .is_some_and(|p| p.rrset.rtype == RType::NS) =>
            {
                ResponseKind::Referral
            }
            Rcode::NOERROR => ResponseKind::NoData,
            _ => ResponseKind::Error,
        };
        let zone = self.zone_key;
        if !keyed {
            return Response { kind, key: 0, zone };
        }
        let key = match kind {
            ResponseKind::Answer => crate::name_hash::name_key(req.qname.as_wire(), req.qtype.0),
            ResponseKind::Error => 0,
            // The cut, or the apex (the negative SOA's owner).
            _ => match self.authority.first() {
                Some(p) => crate::name_hash::name_key(p.rrset.owner.as_wire(), 0),
                None => crate::name_hash::name_key(req.qname.as_wire(), 0),
            },
        };
        Response { kind, key, zone }
    }
}
