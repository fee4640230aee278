//! Query processing: RFC 1034 §4.3.2 over the configured data sources, with
//! RFC 2308 negative answers, RFC 4592 wildcards, RFC 6672 DNAME and the
//! additional-section rules of RFC 1034 §3.7 / RFC 9471.
//!
//! Data flows one way: parsed [`Request`] → zone and lookups → an [`Answer`]
//! (sections as RRset references) → [`render`] into the caller's buffer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use authd_datasrc::{
    Class, DataSource, DataSourceError, Lookup, LookupOptions, Name, Outcome, RRset, RType, Rdata,
    SourceList, ZoneRef,
};

use crate::wire::{
    self, HEADER_LEN, MAX_TCP_MESSAGE, MIN_UDP_PAYLOAD, MessageWriter, OPT_LEN, ParseError,
    RecordMeta, Request, Section, flags, rcode,
};

/// How the query arrived; decides the reply size limit (RFC 1035 §4.2.1, RFC 6891 §6.2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// UDP: 512 bytes without EDNS, else the client's payload size (capped).
    Udp,
    /// TCP: up to 65535 bytes.
    Tcp,
}

pub use crate::chaos::ChaosOptions;

/// Our EDNS UDP payload size, bytes: the DNS Flag Day 2020 value, which avoids
/// IP fragmentation; replies to larger client sizes are capped to it.
pub const EDNS_UDP_PAYLOAD: u16 = 1232;

/// Longest CNAME/DNAME chain followed inside a zone before answering with what
/// was found so far.
const MAX_CHAIN: usize = 8;

/// Turns query messages into reply messages using a list of data sources.
pub struct QueryProcessor {
    sources: SourceList,
    chaos: ChaosOptions,
    /// Unique per processor, so per-thread referral templates of a replaced
    /// processor (after a reload) are never used by its successor.
    id: u64,
}

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
    fn plain(rrset: Arc<RRset>) -> Placed {
        Placed {
            rrset,
            owner: None,
            ttl: None,
        }
    }
    fn owner(&self) -> &Name {
        self.owner.as_ref().unwrap_or(&self.rrset.owner)
    }
}

/// The result of query processing, before rendering.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// Response code (may be extended, e.g. BADVERS).
    pub rcode: u16,
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
    /// Prepared additional-section RRsets not placed yet (and the zone cut of
    /// a referral, for in-domain glue): a reply rendered from a template needs
    /// none of them, so they are placed only when the reply is rendered anew.
    deferred: Option<Deferred>,
}

/// Prepared additional-section RRsets, and the zone cut when they are glue.
type Deferred = (Arc<[Arc<RRset>]>, Option<Name>);

impl Answer {
    /// Empties the sections (keeping their capacity) and sets rcode and AA.
    fn reset(&mut self, rcode: u16, aa: bool) {
        self.clear();
        self.rcode = rcode;
        self.aa = aa;
    }

    fn clear(&mut self) {
        self.answer.clear();
        self.authority.clear();
        self.additional.clear();
        self.required_glue = 0;
        self.templatable = false;
        self.synthesized = false;
        self.deferred = None;
    }

    /// Places the deferred additional-section RRsets, if any.
    fn place_deferred(&mut self) {
        if let Some((ready, cut)) = self.deferred.take() {
            place_additional(self, &ready, cut.as_ref(), false);
        }
    }

    /// Places `ready` later (see `deferred`) when nothing else is deferred, at
    /// once otherwise (after what was deferred, so the section keeps its order).
    fn defer_additional(&mut self, ready: Arc<[Arc<RRset>]>, cut: Option<&Name>) {
        if self.deferred.is_none() {
            self.deferred = Some((ready, cut.cloned()));
        } else {
            self.place_deferred();
            place_additional(self, &ready, cut, false);
        }
    }

    fn rcode(rcode: u16, aa: bool) -> Answer {
        Answer {
            rcode,
            aa,
            ..Answer::default()
        }
    }
    /// True when an RRset with this owner and type is already placed (BIND 10
    /// keeps each RRset in the first section it is due in).
    fn contains(&self, owner: &Name, rtype: RType) -> bool {
        self.answer
            .iter()
            .chain(&self.authority)
            .chain(&self.additional)
            .any(|p| p.rrset.rtype == rtype && p.owner() == owner)
    }
}

impl QueryProcessor {
    /// A processor over `sources` (searched in order, longest zone match wins).
    pub fn new(sources: SourceList, chaos: ChaosOptions) -> QueryProcessor {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        QueryProcessor {
            sources,
            chaos,
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// The data sources answered from.
    pub fn sources(&self) -> &SourceList {
        &self.sources
    }

    /// Handles one DNS message `msg` received over `transport` and writes the
    /// reply into `out` (cleared first). Returns `false` when no reply must be
    /// sent (a message shorter than a header, or a response, QR=1).
    pub fn process(&self, msg: &[u8], transport: Transport, out: &mut Vec<u8>) -> bool {
        let req = match wire::parse_query(msg) {
            Ok(r) => r,
            Err(ParseError::Drop) => return false,
            Err(ParseError::Reject {
                id,
                opcode,
                flags: f,
                rcode,
                question,
            }) => {
                let mut w = MessageWriter::new(
                    out,
                    id,
                    (u16::from(opcode) << 11) | (f & (flags::RD | flags::CD)),
                    rcode,
                    MAX_TCP_MESSAGE,
                );
                if let Some((start, end)) = question {
                    w.push_question(&msg[start..end]);
                }
                w.finish();
                return true;
            }
        };
        // One Answer per thread, cleared and refilled: its section vectors keep
        // their capacity, so steady-state queries allocate nothing for them.
        thread_local! {
            static SCRATCH: std::cell::RefCell<Answer> = std::cell::RefCell::new(Answer::default());
        }
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut ans) => {
                self.answer_into(&req, &mut ans);
                if !render_templated(self.id, &req, &mut ans, transport, out) {
                    ans.place_deferred();
                    render(&req, &ans, transport, out);
                }
                ans.clear();
            }
            Err(_) => render(&req, &self.answer(&req), transport, out),
        });
        true
    }

    /// Processes a parsed query into an [`Answer`] (no rendering).
    pub fn answer(&self, req: &Request<'_>) -> Answer {
        let mut ans = Answer::default();
        self.answer_into(req, &mut ans);
        ans.place_deferred();
        ans
    }

    /// Processes a parsed query into `ans` (cleared first).
    fn answer_into(&self, req: &Request<'_>, ans: &mut Answer) {
        ans.reset(rcode::NOERROR, true);
        if let Some(edns) = req.edns
            && edns.version > 0
        {
            return ans.reset(rcode::BADVERS, false);
        }
        match req.qclass {
            Class::IN => {}
            Class::CH => return *ans = self.chaos(req),
            _ => return ans.reset(rcode::REFUSED, false),
        }
        match req.qtype {
            // Zone transfers need an allow-list; none is configured, so refuse.
            RType::AXFR | RType::IXFR => return ans.reset(rcode::REFUSED, false),
            RType::OPT => return ans.reset(rcode::FORMERR, false),
            t if t.is_meta() && t != RType::ANY => return ans.reset(rcode::NOTIMP, false),
            _ => {}
        }
        let dnssec = req.edns.is_some_and(|e| e.dnssec_ok);
        if let Err(e) = self.answer_in(&req.qname, req.qtype, dnssec, ans) {
            if let Some(suppressed) = SERVFAIL_LOG.allow() {
                tracing::error!(
                    qname = %req.qname,
                    qtype = %req.qtype,
                    suppressed,
                    "SERVFAIL: {e}"
                );
            }
            ans.reset(rcode::SERVFAIL, false);
        }
    }

    fn answer_in(
        &self,
        qname: &Name,
        qtype: RType,
        dnssec: bool,
        ans: &mut Answer,
    ) -> Result<(), DataSourceError> {
        // RFC 4035 §3.1.4.1: DS lives on the parent side of a zone cut; answer
        // from the parent zone when we serve it.
        let mut found = self.sources.find_zone(qname)?;
        if qtype == RType::DS
            && !qname.is_root()
            && let Some((_, zone)) = &found
            && zone.origin == *qname
            && let Some(parent) = qname.parent()
            && let Some(p) = self.sources.find_zone(&parent)?
        {
            found = Some(p);
        }
        let Some((source, zone)) = found else {
            ans.reset(rcode::REFUSED, false);
            return Ok(());
        };
        let source = source.as_ref();
        let opts = LookupOptions {
            dnssec,
            ..LookupOptions::default()
        };
        let mut run = |source: &dyn DataSource| {
            if qtype == RType::RRSIG {
                *ans = self.rrsig_query(source, &zone, qname, opts)?;
                return Ok(());
            }
            let lookup = source.lookup(&zone, qname, qtype, opts)?;
            self.place(source, &zone, qname, qtype, lookup, opts, ans, 0)?;
            ans.templatable = source.immutable_rrsets();
            Ok(())
        };
        match source.with_query_scope(&mut run) {
            Some(result) => result,
            None => run(source),
        }
    }

    /// Places the outcome of one lookup; follows CNAME/DNAME inside the zone.
    #[allow(clippy::too_many_arguments)]
    fn place(
        &self,
        source: &dyn DataSource,
        zone: &ZoneRef,
        qname: &Name,
        qtype: RType,
        mut lookup: Lookup,
        opts: LookupOptions,
        ans: &mut Answer,
        depth: usize,
    ) -> Result<(), DataSourceError> {
        let proof = std::mem::take(&mut lookup.proof);
        let synth_owner = |rrset: &Arc<RRset>| {
            (lookup.wildcard && !rrset.owner.eq_case(qname)).then(|| qname.clone())
        };
        match lookup.outcome {
            Outcome::Answer(rrset) => {
                let owner = synth_owner(&rrset);
                ans.answer.push(Placed {
                    rrset: rrset.clone(),
                    owner,
                    ttl: None,
                });
                self.additional_for(source, zone, &rrset, opts, ans, false);
            }
            Outcome::AnyAnswer(sets) => {
                for rrset in sets {
                    let owner = synth_owner(&rrset);
                    ans.answer.push(Placed {
                        rrset: rrset.clone(),
                        owner,
                        ttl: None,
                    });
                }
                let sets: Vec<Arc<RRset>> = ans.answer.iter().map(|p| p.rrset.clone()).collect();
                for rrset in sets {
                    self.additional_for(source, zone, &rrset, opts, ans, true);
                }
            }
            Outcome::Cname(cname) => {
                let owner = synth_owner(&cname);
                ans.answer.push(Placed {
                    rrset: cname.clone(),
                    owner,
                    ttl: None,
                });
                if let Some(target) = cname.rdatas.first().and_then(Rdata::target_name) {
                    self.follow(source, zone, &target, qtype, opts, ans, depth)?;
                }
            }
            Outcome::Dname(dname) => {
                ans.answer.push(Placed::plain(dname.clone()));
                let Some(dtarget) = dname.rdatas.first().and_then(Rdata::target_name) else {
                    return Ok(());
                };
                match qname.replace_suffix(&dname.owner, &dtarget) {
                    Some(Ok(target)) => {
                        // RFC 6672 §3.1: synthesize CNAME qname → substituted name, TTL of the DNAME.
                        let mut cname =
                            RRset::new(qname.clone(), RType::CNAME, Class::IN, dname.ttl);
                        cname.rdatas.push(Rdata::from_wire(target.as_wire()));
                        ans.answer.push(Placed::plain(Arc::new(cname)));
                        ans.synthesized = true;
                        self.follow(source, zone, &target, qtype, opts, ans, depth)?;
                    }
                    // RFC 6672 §2.2: the substituted name is too long.
                    Some(Err(_)) => ans.rcode = rcode::YXDOMAIN,
                    None => {}
                }
            }
            Outcome::Delegation(ns) => {
                if depth > 0 {
                    // A chain leading below a cut: the answer so far, no referral.
                    return Ok(());
                }
                ans.aa = false;
                let owner = synth_owner(&ns);
                ans.authority.push(Placed {
                    rrset: ns.clone(),
                    owner,
                    ttl: None,
                });
                self.glue_for(source, zone, &ns, opts, ans);
            }
            Outcome::NxDomain => {
                ans.rcode = rcode::NXDOMAIN;
                self.negative_soa(source, zone, opts, ans)?;
            }
            Outcome::NoData => self.negative_soa(source, zone, opts, ans)?,
        }
        // RFC 4035 §3.1.3 / RFC 5155 §7.2 proofs, and DS or its denial at a cut.
        for set in proof {
            if !ans.contains(&set.owner, set.rtype) {
                ans.authority.push(Placed::plain(set));
            }
        }
        Ok(())
    }

    /// Follows a CNAME target (RFC 1034 §4.3.2 step 3a) while it stays in the zone.
    #[allow(clippy::too_many_arguments)]
    fn follow(
        &self,
        source: &dyn DataSource,
        zone: &ZoneRef,
        target: &Name,
        qtype: RType,
        opts: LookupOptions,
        ans: &mut Answer,
        depth: usize,
    ) -> Result<(), DataSourceError> {
        if qtype == RType::CNAME || depth + 1 >= MAX_CHAIN || !target.is_subdomain_of(&zone.origin)
        {
            return Ok(());
        }
        if ans.answer.iter().any(|p| p.owner() == target) {
            return Ok(()); // a loop
        }
        let lookup = source.lookup(zone, target, qtype, opts)?;
        self.place(source, zone, target, qtype, lookup, opts, ans, depth + 1)
    }

    /// RFC 2308 §3: the apex SOA in authority, TTL = min(SOA TTL, SOA MINIMUM).
    fn negative_soa(
        &self,
        source: &dyn DataSource,
        zone: &ZoneRef,
        opts: LookupOptions,
        ans: &mut Answer,
    ) -> Result<(), DataSourceError> {
        let soa = source.lookup(zone, &zone.origin, RType::SOA, opts)?;
        let Outcome::Answer(soa) = soa.outcome else {
            return Err(DataSourceError::BadData {
                zone: zone.origin.to_string(),
                name: zone.origin.to_string(),
                reason: "no SOA at the zone apex".into(),
            });
        };
        let minimum = soa
            .rdatas
            .first()
            .and_then(Rdata::soa_minimum)
            .unwrap_or(soa.ttl);
        ans.authority.push(Placed {
            ttl: Some(soa.ttl.min(minimum)),
            rrset: soa,
            owner: None,
        });
        Ok(())
    }

    /// Additional-section addresses for NS, MX and SRV targets inside the zone
    /// (RFC 1034 §3.7, RFC 2782); only names that exist as plain answers.
    /// `any`: a qtype ANY answer, which may hold address RRsets itself.
    /// Additional data is optional: a target whose lookup fails is left out.
    fn additional_for(
        &self,
        source: &dyn DataSource,
        zone: &ZoneRef,
        rrset: &Arc<RRset>,
        opts: LookupOptions,
        ans: &mut Answer,
        any: bool,
    ) {
        if !matches!(rrset.rtype, RType::NS | RType::MX | RType::SRV) {
            return;
        }
        if let Some(ready) = prepared_additional(source, zone, rrset) {
            if any {
                ans.place_deferred();
                place_additional(ans, &ready, None, true);
            } else {
                ans.defer_additional(ready, None);
            }
            return;
        }
        let glue_ok = rrset.rtype == RType::NS;
        for rdata in &rrset.rdatas {
            let Some(target) = rdata.additional_target(rrset.rtype) else {
                continue;
            };
            if !target.is_subdomain_of(&zone.origin) {
                continue;
            }
            let opts = LookupOptions { glue_ok, ..opts };
            self.addresses(source, zone, &target, opts, ans, false);
        }
    }

    /// Glue for a referral: addresses of the NS hosts inside the zone, found below
    /// the cut; those under the cut itself are in-domain glue (RFC 9471). A host
    /// whose lookup fails is left out: the other hosts' glue still serves.
    fn glue_for(
        &self,
        source: &dyn DataSource,
        zone: &ZoneRef,
        ns: &Arc<RRset>,
        opts: LookupOptions,
        ans: &mut Answer,
    ) {
        if let Some(ready) = prepared_additional(source, zone, ns) {
            ans.defer_additional(ready, Some(&ns.owner));
            return;
        }
        for rdata in &ns.rdatas {
            let Some(target) = rdata.additional_target(RType::NS) else {
                continue;
            };
            if !target.is_subdomain_of(&zone.origin) {
                continue;
            }
            let in_domain = target.is_subdomain_of(&ns.owner);
            let opts = LookupOptions {
                glue_ok: true,
                ..opts
            };
            self.addresses(source, zone, &target, opts, ans, in_domain);
        }
    }

    /// The A and AAAA RRsets of `target` into the additional section, unless
    /// placed already; `required` marks glue that must fit (RFC 9471). A failed
    /// lookup (storage error) is logged and its RRset omitted, not the reply.
    fn addresses(
        &self,
        source: &dyn DataSource,
        zone: &ZoneRef,
        target: &Name,
        opts: LookupOptions,
        ans: &mut Answer,
        required: bool,
    ) {
        // What is placed here must come after, and not repeat, what was deferred.
        ans.place_deferred();
        for rtype in [RType::A, RType::AAAA] {
            if ans.contains(target, rtype) {
                continue;
            }
            let found = match source.lookup(zone, target, rtype, opts) {
                Ok(found) => found,
                Err(e) => {
                    if let Some(suppressed) = ADDITIONAL_LOG.allow() {
                        tracing::warn!(
                            suppressed,
                            "zone {}: additional {target} {rtype} omitted: {e}",
                            zone.origin
                        );
                    }
                    continue;
                }
            };
            if let Outcome::Answer(rrset) = found.outcome {
                let owner = (found.wildcard).then(|| target.clone());
                ans.additional.push(Placed {
                    rrset,
                    owner,
                    ttl: None,
                });
                if required {
                    ans.required_glue = ans.additional.len();
                }
            }
        }
    }

    /// qtype RRSIG: every RRSIG at qname as the answer (RFC 4035 §3.1.5 leaves the
    /// form open; NSD and Knot DNS answer this way), NODATA when there is none.
    fn rrsig_query(
        &self,
        source: &dyn DataSource,
        zone: &ZoneRef,
        qname: &Name,
        opts: LookupOptions,
    ) -> Result<Answer, DataSourceError> {
        let mut ans = Answer::rcode(rcode::NOERROR, true);
        let lookup = source.lookup(
            zone,
            qname,
            RType::ANY,
            LookupOptions {
                dnssec: true,
                ..opts
            },
        )?;
        let sets = match lookup.outcome {
            Outcome::AnyAnswer(sets) => sets,
            Outcome::Cname(c) => vec![c],
            other => {
                let l = Lookup {
                    outcome: other,
                    ..lookup
                };
                self.place(source, zone, qname, RType::RRSIG, l, opts, &mut ans, 0)?;
                return Ok(ans);
            }
        };
        // One group per covered RRset: each RRSIG keeps the TTL of the set it
        // covers (RFC 4034 §3, an exception to RFC 2181 §5.2's one TTL per RRset).
        for set in &sets {
            if set.sigs.is_empty() {
                continue;
            }
            let mut sigs = RRset::new(qname.clone(), RType::RRSIG, Class::IN, set.sig_ttl);
            for sig in &set.sigs {
                sigs.push(set.sig_ttl, sig.clone());
            }
            ans.answer.push(Placed::plain(Arc::new(sigs)));
        }
        if ans.answer.is_empty() {
            self.negative_soa(source, zone, opts, &mut ans)?;
        }
        Ok(ans)
    }

    /// CH-class queries: TXT `version.bind`/`version.server` and
    /// `hostname.bind`/`id.server` when configured; REFUSED otherwise.
    fn chaos(&self, req: &Request<'_>) -> Answer {
        let name = req.qname.to_lowercase().to_string();
        let text = match name.as_str() {
            "version.bind." | "version.server." => self.chaos.version.as_deref(),
            "hostname.bind." | "id.server." => self.chaos.hostname.as_deref(),
            _ => None,
        };
        let Some(text) = text else {
            return Answer::rcode(rcode::REFUSED, false);
        };
        let mut ans = Answer::rcode(rcode::NOERROR, true);
        if req.qtype == RType::TXT || req.qtype == RType::ANY {
            let mut rdata = Vec::with_capacity(text.len() + 1);
            for chunk in text.as_bytes().chunks(255) {
                rdata.push(chunk.len() as u8);
                rdata.extend_from_slice(chunk);
            }
            let mut set = RRset::new(req.qname.clone(), RType::TXT, Class::CH, 0);
            set.rdatas.push(Rdata::from_wire(&rdata));
            ans.answer.push(Placed::plain(Arc::new(set)));
        }
        ans
    }
}

/// The additional-section RRsets `source` has ready for `rrset`, if any. A
/// storage error is taken as "not prepared": the caller then looks each target
/// up, so only the failing ones are left out (and warned about, by name).
fn prepared_additional(
    source: &dyn DataSource,
    zone: &ZoneRef,
    rrset: &Arc<RRset>,
) -> Option<Arc<[Arc<RRset>]>> {
    source
        .additional_addresses(zone, rrset)
        .unwrap_or_else(|e| {
            tracing::debug!(
                "zone {}: additional addresses for {} {}: {e}; looking up each target",
                zone.origin,
                rrset.owner,
                rrset.rtype
            );
            None
        })
}

/// Adds prepared additional-section RRsets not placed yet; with `cut`, those at
/// or below it are in-domain glue whose omission must set TC (RFC 9471).
/// `by_name`: also skip a set whose owner and type are placed already (a
/// cache may hand out an older copy of a set placed in an ANY answer).
fn place_additional(ans: &mut Answer, ready: &[Arc<RRset>], cut: Option<&Name>, by_name: bool) {
    // The list holds no duplicates: with no address set placed yet (a
    // referral, a plain NS or MX answer), every set goes in unchecked.
    let fresh = ans.additional.is_empty()
        && !ans
            .answer
            .iter()
            .chain(&ans.authority)
            .any(|p| matches!(p.rrset.rtype, RType::A | RType::AAAA));
    for set in ready {
        if fresh {
            ans.additional.push(Placed::plain(set.clone()));
            if cut.is_some_and(|c| set.owner.is_subdomain_of(c)) {
                ans.required_glue = ans.additional.len();
            }
            continue;
        }
        // Otherwise a duplicate is the very same RRset: the prepared list
        // is the only source of address sets in the reply, so compare addresses.
        let placed = ans
            .answer
            .iter()
            .chain(&ans.authority)
            .chain(&ans.additional)
            .any(|p| {
                Arc::ptr_eq(&p.rrset, set)
                    || (by_name && p.rrset.rtype == set.rtype && p.owner() == &set.owner)
            });
        if placed {
            continue;
        }
        ans.additional.push(Placed::plain(set.clone()));
        if cut.is_some_and(|c| set.owner.is_subdomain_of(c)) {
            ans.required_glue = ans.additional.len();
        }
    }
}

/// Renders `ans` as the reply to `req` into `out`.
///
/// Size limit: TCP 65535; UDP the client's EDNS payload size capped at
/// [`EDNS_UDP_PAYLOAD`], or 512 without EDNS. When an answer or authority RRset
/// (with its signatures) or required glue does not fit, the reply keeps what fit
/// and sets TC (RFC 2181 §9); other additional data is dropped silently.
pub fn render(req: &Request<'_>, ans: &Answer, transport: Transport, out: &mut Vec<u8>) {
    render_impl(req, ans, transport, out, false, 0);
}

/// The reply size limit for `req` over `transport`, bytes.
fn reply_limit(req: &Request<'_>, transport: Transport) -> usize {
    match (transport, req.edns) {
        (Transport::Tcp, _) => MAX_TCP_MESSAGE,
        (Transport::Udp, Some(e)) => {
            usize::from(e.udp_payload.min(EDNS_UDP_PAYLOAD)).max(MIN_UDP_PAYLOAD)
        }
        (Transport::Udp, None) => MIN_UDP_PAYLOAD,
    }
}

/// [`render`]; with `record`, returns the offsets of the compression pointers
/// written (for a referral template).
fn render_impl(
    req: &Request<'_>,
    ans: &Answer,
    transport: Transport,
    out: &mut Vec<u8>,
    record: bool,
    shrink: usize,
) -> Vec<u16> {
    let limit = reply_limit(req, transport).saturating_sub(shrink);
    let mut hdr = (u16::from(req.opcode) << 11) | (req.flags & (flags::RD | flags::CD));
    if ans.aa {
        hdr |= flags::AA;
    }
    let mut w = MessageWriter::new(out, req.id, hdr, ans.rcode, limit);
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
        w.set_flags(flags::TC);
    }
    if let Some(e) = req.edns {
        w.unreserve(OPT_LEN);
        w.push_opt(EDNS_UDP_PAYLOAD, ans.rcode, e.dnssec_ok);
    }
    debug_assert!(w.len() >= HEADER_LEN);
    w.finish_with_pointers()
}

/// A rendered reply (everything after the question), reusable for every query
/// that produces the same placed RRsets: it was rendered with an *anchor* name
/// as the question — the qname itself for answers, the zone cut for referrals,
/// the zone apex for negative answers — which is a suffix of every qname that
/// leads to it. So each compression pointer it holds points at the anchor's
/// labels or later, and moves by the same amount when the real question takes
/// the anchor's place (NSD and Knot DNS pre-compute answers in the same spirit).
struct Template {
    /// Keeps the placed RRsets (and so their addresses, the key) alive.
    _keep: Vec<Arc<RRset>>,
    /// Bytes after the question.
    body: Box<[u8]>,
    /// Offsets in `body` of the compression pointers.
    pointers: Box<[u16]>,
    /// ANCOUNT, NSCOUNT, ARCOUNT as on the wire.
    counts: [u8; 6],
    /// The header's flag byte 2 and 3 bits that depend on the reply (AA, TC, rcode).
    aa: bool,
    truncated: bool,
    rcode: u16,
    /// Length of the question the template was rendered with, bytes.
    question_len: usize,
}

/// Most RRsets in the answer and authority sections of a templated reply.
const TEMPLATE_SETS: usize = 6;

/// (addresses of the answer and authority RRsets, how many of them are in the
/// answer section and in all — the apex SOA is the answer to `SOA` and the
/// authority of a NODATA —, rcode and AA, question length (UDP only: what fits
/// depends on it), size limit, EDNS, DO, processor id). Not the qtype: the body
/// does not depend on it once the placed RRsets are the same (it is in the
/// question only).
type TemplateKey = (
    [usize; TEMPLATE_SETS],
    (usize, usize),
    (u16, bool),
    usize,
    usize,
    bool,
    bool,
    u64,
);

/// Most templates in one generation of a thread's store ([`Templates`]).
const MAX_TEMPLATES: usize = 32_768;

/// Most bytes of templates in one generation of a thread's store (bodies,
/// pointer lists and an estimate of the rest): a thread keeps at most twice
/// this. Without a byte bound, DNSSEC replies to many distinct names (each
/// NSEC span × question length its own ~1 KiB template) grew authd serving
/// the root zone from 21 to 97 MiB RSS. The root real mix needs ~6.7 MB.
const MAX_TEMPLATE_BYTES: usize = 8 << 20;

type TemplateMap =
    std::collections::HashMap<TemplateKey, std::rc::Rc<Template>, foldhash::fast::RandomState>;

/// A thread's templates in two generations: when the current one is full it
/// becomes the old one (the previous old one is dropped), and a template found
/// in the old one moves back to the current one, so the templates in use
/// survive while the rest age out. Emptied when a newer processor renders (a
/// reload: old templates would keep the old zone data alive). foldhash: the
/// key is ~100 bytes hashed per query, several times faster than SipHash.
#[derive(Default)]
struct Templates {
    current: TemplateMap,
    old: TemplateMap,
    /// Estimated bytes in `current`.
    bytes: usize,
    processor: u64,
}

impl Templates {
    fn get(&mut self, key: &TemplateKey) -> Option<std::rc::Rc<Template>> {
        if let Some(t) = self.current.get(key) {
            return Some(t.clone());
        }
        let t = self.old.remove(key)?;
        self.insert(*key, t.clone());
        Some(t)
    }

    fn insert(&mut self, key: TemplateKey, t: std::rc::Rc<Template>) {
        // The key's last field is the processor id. Ids only grow: a newer
        // processor is a reload (an older one, still answering in-flight
        // queries or in a test, just adds its own).
        let processor = key.7;
        if processor > self.processor {
            self.current.clear();
            self.old.clear();
            self.bytes = 0;
            self.processor = processor;
        }
        // The heap blocks (Rc'd template, body, pointers, kept RRset list,
        // each rounded up by the allocator) and the map slot (key and Rc at
        // a load factor of 7/8, plus its control byte).
        let size = t.body.len()
            + 2 * t.pointers.len()
            + 8 * t._keep.len()
            + std::mem::size_of::<Template>()
            + 16
            + 4 * 16
            + (std::mem::size_of::<TemplateKey>() + 8) * 8 / 7
            + 1;
        if self.current.len() >= MAX_TEMPLATES || self.bytes + size > MAX_TEMPLATE_BYTES {
            self.old = std::mem::take(&mut self.current);
            self.bytes = 0;
        }
        self.bytes += size;
        self.current.insert(key, t);
    }
}

thread_local! {
    static TEMPLATES: std::cell::RefCell<Templates> = std::cell::RefCell::new(Templates::default());
}

/// Renders `ans` from a template (building it on first use) when every placed
/// RRset comes from an immutable snapshot. Returns false when it does not
/// apply; the caller renders normally.
fn render_templated(
    processor: u64,
    req: &Request<'_>,
    ans: &mut Answer,
    transport: Transport,
    out: &mut Vec<u8>,
) -> bool {
    if !ans.templatable || ans.synthesized || req.question.len() < 4 {
        return false;
    }
    let placed = ans.answer.iter().chain(&ans.authority);
    let mut sets = [0usize; TEMPLATE_SETS];
    let mut n = 0;
    for p in placed {
        if p.owner.is_some() || n == TEMPLATE_SETS {
            return false; // wildcard synthesis, or too many sets
        }
        sets[n] = Arc::as_ptr(&p.rrset) as usize;
        n += 1;
    }
    // The anchor: a suffix of the qname every reply with these RRsets shares.
    let anchor = match (ans.answer.first(), ans.authority.first()) {
        (Some(a), _) if a.rrset.owner == req.qname => &a.rrset.owner,
        (Some(_), _) => return false,
        (None, Some(ns)) if ns.rrset.rtype == RType::NS && !ans.aa => &ns.rrset.owner,
        (None, Some(soa)) if soa.rrset.rtype == RType::SOA => &soa.rrset.owner,
        _ => return false,
    };
    if !req.qname.is_subdomain_of(anchor) {
        return false;
    }
    let limit = reply_limit(req, transport);
    let dnssec = req.edns.is_some_and(|e| e.dnssec_ok);
    let qlen = match transport {
        Transport::Udp => req.question.len(),
        Transport::Tcp => 0,
    };
    let key: TemplateKey = (
        sets,
        (ans.answer.len(), n),
        (ans.rcode, ans.aa),
        qlen,
        limit,
        req.edns.is_some(),
        dnssec,
        processor,
    );
    let found = TEMPLATES.with(|t| t.borrow_mut().get(&key));
    let template = match found {
        Some(t) => t,
        None => {
            let anchor = anchor.clone();
            ans.place_deferred();
            let mut question = Vec::with_capacity(anchor.as_wire().len() + 4);
            question.extend_from_slice(anchor.as_wire());
            question.extend_from_slice(&req.question[req.question.len() - 4..]);
            let at_anchor = Request {
                question: &question,
                qname: anchor.clone(),
                ..req.clone()
            };
            let mut buf = Vec::with_capacity(1024);
            // Leave room for the real question, as a direct rendering would.
            let shrink = qlen.saturating_sub(question.len());
            let pointers = render_impl(&at_anchor, ans, transport, &mut buf, true, shrink);
            let start = HEADER_LEN + question.len();
            let t = std::rc::Rc::new(Template {
                _keep: ans
                    .answer
                    .iter()
                    .chain(&ans.authority)
                    .map(|p| p.rrset.clone())
                    .collect(),
                body: buf[start..].into(),
                pointers: pointers
                    .iter()
                    .map(|&p| (usize::from(p) - start) as u16)
                    .collect(),
                counts: [buf[6], buf[7], buf[8], buf[9], buf[10], buf[11]],
                aa: buf[2] & (flags::AA >> 8) as u8 != 0,
                truncated: buf[2] & (flags::TC >> 8) as u8 != 0,
                rcode: ans.rcode,
                question_len: question.len(),
            });
            TEMPLATES.with(|m| m.borrow_mut().insert(key, t.clone()));
            t
        }
    };
    let Some(delta) = req.question.len().checked_sub(template.question_len) else {
        return false;
    };
    if HEADER_LEN + req.question.len() + template.body.len() > limit {
        return false;
    }
    let mut hdr = flags::QR
        | (u16::from(req.opcode) << 11)
        | (req.flags & (flags::RD | flags::CD))
        | (template.rcode & 0xF);
    if template.aa {
        hdr |= flags::AA;
    }
    if template.truncated {
        hdr |= flags::TC;
    }
    out.clear();
    out.extend_from_slice(&req.id.to_be_bytes());
    out.extend_from_slice(&hdr.to_be_bytes());
    out.extend_from_slice(&[0, 1]);
    out.extend_from_slice(&template.counts);
    out.extend_from_slice(req.question);
    let base = out.len();
    out.extend_from_slice(&template.body);
    for &p in template.pointers.iter() {
        let at = base + usize::from(p);
        let target = (u16::from_be_bytes([out[at], out[at + 1]]) & 0x3FFF) as usize + delta;
        if target > 0x3FFF {
            return false;
        }
        out[at..at + 2].copy_from_slice(&(0xC000 | target as u16).to_be_bytes());
    }
    true
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

/// Log lines per second allowed for each kind of per-query failure.
const LOG_PER_SECOND: u32 = 10;

/// A per-second budget for log lines written per query: any client can make
/// every query fail the same way (a broken row), and the log must not grow
/// with the query rate. Lines over the budget are counted, and the count is
/// reported (`suppressed`) with the next line allowed.
struct LogLimit {
    /// The second (since the Unix epoch) the budget is for.
    second: AtomicU64,
    /// Lines allowed in that second.
    used: AtomicU32,
    /// Lines dropped since the last one allowed.
    suppressed: AtomicU64,
}

impl LogLimit {
    const fn new() -> LogLimit {
        LogLimit {
            second: AtomicU64::new(0),
            used: AtomicU32::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// `Some(lines dropped before this one)` when a line may be written now.
    fn allow(&self) -> Option<u64> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.allow_at(now)
    }

    /// [`Self::allow`] at second `now`.
    fn allow_at(&self, now: u64) -> Option<u64> {
        if self.second.swap(now, Ordering::Relaxed) != now {
            self.used.store(0, Ordering::Relaxed);
        }
        if self.used.fetch_add(1, Ordering::Relaxed) < LOG_PER_SECOND {
            Some(self.suppressed.swap(0, Ordering::Relaxed))
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

static SERVFAIL_LOG: LogLimit = LogLimit::new();
static ADDITIONAL_LOG: LogLimit = LogLimit::new();

#[cfg(test)]
mod log_limit_tests {
    use super::{LOG_PER_SECOND, LogLimit};

    #[test]
    fn ten_lines_a_second_then_the_count_of_those_dropped() {
        let limit = LogLimit::new();
        for _ in 0..LOG_PER_SECOND {
            assert_eq!(limit.allow_at(100), Some(0));
        }
        for _ in 0..25 {
            assert_eq!(limit.allow_at(100), None);
        }
        assert_eq!(limit.allow_at(101), Some(25));
        assert_eq!(limit.allow_at(101), Some(0));
    }
}

#[cfg(test)]
mod template_store_tests {
    use super::{MAX_TEMPLATE_BYTES, Template, TemplateKey, Templates};
    use std::rc::Rc;

    fn key(n: usize, processor: u64) -> TemplateKey {
        (
            [n, 0, 0, 0, 0, 0],
            (1, 1),
            (0, true),
            40,
            512,
            false,
            false,
            processor,
        )
    }

    fn template(body: usize) -> Rc<Template> {
        Rc::new(Template {
            _keep: Vec::new(),
            body: vec![0; body].into(),
            pointers: Box::new([]),
            counts: [0; 6],
            aa: true,
            truncated: false,
            rcode: 0,
            question_len: 20,
        })
    }

    /// Past the byte bound the current generation becomes the old one; a hit
    /// there moves the template back; the generation before is dropped; a
    /// newer processor empties the store, an older one does not.
    #[test]
    fn generations_bound_the_bytes_and_keep_what_is_used() {
        let mut t = Templates::default();
        let per = 64 * 1024;
        let fit = MAX_TEMPLATE_BYTES / per; // templates of `per` bytes in one generation, at most
        for n in 0..fit {
            t.insert(key(n, 1), template(per));
        }
        // Each costs a little more than `per`: one rotation, nothing dropped yet.
        assert!(!t.old.is_empty());
        assert_eq!(t.old.len() + t.current.len(), fit);
        assert!(t.bytes <= MAX_TEMPLATE_BYTES);
        for n in fit..3 * fit {
            t.insert(key(n, 1), template(per));
        }
        // Never more than two generations' worth.
        assert!(
            t.old.len() + t.current.len() <= 2 * fit,
            "{} + {}",
            t.old.len(),
            t.current.len()
        );
        assert!(
            t.get(&key(0, 1)).is_none(),
            "the first generation was dropped"
        );
        assert!(t.bytes <= MAX_TEMPLATE_BYTES);
        let in_old = *t.old.keys().next().expect("old entry");
        assert!(t.get(&in_old).is_some());
        assert!(t.current.contains_key(&in_old) && !t.old.contains_key(&in_old));
        assert!(t.get(&key(usize::MAX, 1)).is_none());
        // An older processor adds alongside; a newer one empties everything.
        t.insert(key(0, 0), template(10));
        assert!(t.get(&key(0, 0)).is_some());
        t.insert(key(1, 2), template(10));
        assert_eq!((t.current.len(), t.old.len()), (1, 0));
    }
}
