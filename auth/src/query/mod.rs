//! Query processing: RFC 1034 §4.3.2 over the configured data sources, with
//! RFC 2308 negative answers, RFC 4592 wildcards, RFC 6672 DNAME and the
//! additional-section rules of RFC 1034 §3.7 / RFC 9471.
//!
//! Data flows one way: parsed [`Request`] → zone and lookups → an [`Answer`]
//! (sections as RRset references) → [`render`] into the caller's buffer. Only
//! standard queries for class-IN data get here: which handler answers a
//! message is decided by [`crate::dispatch`].
//!
//! - `mod.rs` (this file): the semantics — zone, lookups, CNAME/DNAME chains,
//!   negative SOA, RRSIG queries;
//! - `answer.rs`: the [`Answer`] and [`Placed`] shapes;
//! - `additional.rs`: additional-section placement (addresses, glue);
//! - `render.rs`: rendering, size limits and truncation;
//! - `templates.rs`: per-thread reply templates.

mod additional;
mod answer;
mod render;
mod templates;

pub use answer::{Answer, Placed, Response, ResponseKind};
pub use render::{EDNS_UDP_PAYLOAD, message_limit, render, reply_limit};

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use authd_datasrc::{
    Class, DataSource, DataSourceError, Lookup, LookupOptions, Name, Outcome, RRset, RType, Rdata,
    SourceList, ZoneRef,
};

use crate::edns::Ede;
use crate::log_limit::LogLimit;

/// The proofs of one lookup (RFC 4035 §3.1.3).
type Proof = authd_datasrc::lookup::Proof;
use crate::wire::{Rcode, Request};
use templates::render_templated;

/// How the query arrived; decides the reply size limit (RFC 1035 §4.2.1, RFC 6891 §6.2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// UDP: 512 bytes without EDNS, else the client's payload size (capped).
    Udp,
    /// TCP: up to 65535 bytes.
    Tcp,
    /// TLS over TCP (DNS over TLS, RFC 7858; zone transfers, RFC 9103):
    /// framed and sized as TCP; ACL entries may require it.
    Tls,
}

impl Transport {
    /// True for the stream transports (TCP, TLS): length-prefixed
    /// messages of up to 65535 bytes, several per connection (RFC 7766).
    #[inline(always)]
    pub fn is_stream(self) -> bool {
        self != Transport::Udp
    }
}

/// Bytes the smallest link of a CNAME chain adds to a reply: its owner a
/// compression pointer to the previous target (2), type, class, TTL and
/// RDLENGTH (10), its target at least a pointer (2). A chain is followed
/// (RFC 1034 §4.3.2 step 3a) for at most as many links as the reply could
/// hold at this size, and then answered with what was found (in practice it
/// ends long before: NSD follows a 300-link chain whole over TCP).
const MIN_LINK_LEN: usize = 14;

/// Links of a chain checked for a loop by comparing names one by one; a
/// longer chain's owners are kept in a set of their hashes, so the check
/// stays linear in the chain's length.
const LINEAR_LOOP_CHECK: usize = 16;

/// A chain to follow, left by placing one lookup: the CNAME's (or the
/// synthesized CNAME's) target, and the lookup's proofs, placed after
/// those of the rest of the chain (as a recursive descent places them).
struct Link {
    target: Name,
    proof: Proof,
}

/// SERVFAILs logged (never per query: any client can make every query fail
/// the same way).
static SERVFAIL_LOG: LogLimit = LogLimit::new();

/// Answers standard queries for class-IN data from a list of data sources.
pub struct QueryProcessor {
    sources: SourceList,
    /// Unique per processor, so per-thread reply templates of a replaced
    /// processor (after a reload) are never used by its successor.
    id: u64,
    /// Each answer carries the name key of its zone ([`Response::zone`]).
    zone_keys: bool,
}

impl QueryProcessor {
    /// A processor over `sources` (searched in order, longest zone match wins).
    pub fn new(sources: SourceList) -> QueryProcessor {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        QueryProcessor {
            sources,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            zone_keys: false,
        }
    }

    /// The same, with each response's zone named by its key
    /// ([`Response::zone`], for per-zone counters), or not: hashing the apex
    /// costs every query a little, so only when something counts.
    pub fn counting_zones(self, on: bool) -> QueryProcessor {
        QueryProcessor {
            zone_keys: on,
            ..self
        }
    }

    /// The data sources answered from.
    pub fn sources(&self) -> &SourceList {
        &self.sources
    }

    /// Answers `req`, a standard query for data of class IN (the dispatcher
    /// has routed every other kind of message), into `out` (cleared first):
    /// from a reply template when one applies, else rendered anew. Over UDP
    /// a qtype ANY is answered with one RRset (RFC 8482 §4.1). With `keyed`,
    /// the summary carries the response's name key (see [`Response`]).
    pub fn respond(
        &self,
        req: &Request<'_>,
        transport: Transport,
        keyed: bool,
        out: &mut Vec<u8>,
    ) -> Response {
        let minimal_any = transport == Transport::Udp && req.qtype == RType::ANY;
        // One Answer per thread, cleared and refilled: its section vectors keep
        // their capacity, so steady-state queries allocate nothing for them.
        thread_local! {
            static SCRATCH: std::cell::RefCell<Answer> = std::cell::RefCell::new(Answer::default());
        }
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut ans) => {
                self.answer_into(req, minimal_any, transport, &mut ans);
                if !render_templated(self.id, req, &mut ans, transport, out) {
                    ans.place_deferred();
                    render(req, &ans, transport, out);
                }
                let response = ans.summary(req, keyed);
                ans.clear();
                response
            }
            Err(_) => {
                let mut ans = Answer::default();
                self.answer_into(req, minimal_any, transport, &mut ans);
                ans.place_deferred();
                render(req, &ans, transport, out);
                ans.summary(req, keyed)
            }
        })
    }

    /// Processes a parsed query into an [`Answer`] (no rendering), with
    /// every RRset for qtype ANY (as over TCP).
    pub fn answer(&self, req: &Request<'_>) -> Answer {
        let mut ans = Answer::default();
        self.answer_into(req, false, Transport::Tcp, &mut ans);
        ans.place_deferred();
        ans
    }

    /// Processes a parsed query into `ans` (cleared first) for a reply over
    /// `transport`; with `minimal_any`, an ANY answer keeps one RRset.
    fn answer_into(
        &self,
        req: &Request<'_>,
        minimal_any: bool,
        transport: Transport,
        ans: &mut Answer,
    ) {
        ans.reset(Rcode::NOERROR, true);
        if let Err(e) = self.answer_in(req, minimal_any, transport, ans) {
            if let Some(suppressed) = SERVFAIL_LOG.allow() {
                tracing::error!(
                    qname = %req.qname,
                    qtype = %req.qtype,
                    suppressed,
                    "SERVFAIL: {e}"
                );
            }
            ans.reset(Rcode::SERVFAIL, false);
        }
    }

    fn answer_in(
        &self,
        req: &Request<'_>,
        minimal_any: bool,
        transport: Transport,
        ans: &mut Answer,
    ) -> Result<(), DataSourceError> {
        let (qname, qtype) = (&req.qname, req.qtype);
        let dnssec = req.edns.is_some_and(|e| e.dnssec_ok);
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
            // No zone served here holds the name: REFUSED, EDE 20 Not
            // Authoritative (as NSD and Knot DNS answer).
            ans.reset(Rcode::REFUSED, false);
            ans.ede = Some(Ede::NOT_AUTHORITATIVE);
            return Ok(());
        };
        if self.zone_keys {
            ans.zone_key = crate::name_hash::name_key(zone.origin.as_wire(), 0);
        }
        let source = source.as_ref();
        let opts = LookupOptions {
            dnssec,
            ..LookupOptions::default()
        };
        let mut run = |source: &dyn DataSource| {
            let budget = Budget { req, transport };
            if qtype == RType::RRSIG {
                *ans = self.rrsig_query(source, &zone, qname, opts, budget)?;
                return Ok(());
            }
            let mut lookup = source.lookup(&zone, qname, qtype, opts)?;
            if minimal_any && let Outcome::AnyAnswer(sets) = &mut lookup.outcome {
                keep_one(sets);
            }
            // A chain is followed out of line: a query without one pays
            // nothing for it.
            if let Some(link) = self.place(source, &zone, qname, lookup, opts, ans, 0)? {
                let chain = Chain {
                    source,
                    zone: &zone,
                    qtype,
                    opts,
                    budget,
                };
                self.follow_chain(&chain, link, ans)?;
            }
            ans.templatable = source.immutable_rrsets();
            Ok(())
        };
        match source.with_query_scope(&mut run) {
            Some(result) => result,
            None => run(source),
        }
    }

    /// Places the lookups of the CNAME chain that placing a lookup started
    /// with `link` ([`Self::place`]), while the chain stays in the zone, has
    /// no loop and could fit the reply ([`MIN_LINK_LEN`]): one link after
    /// another, never recursing (a chain may be thousands of links long).
    #[inline(never)]
    fn follow_chain(
        &self,
        chain: &Chain<'_>,
        link: Link,
        ans: &mut Answer,
    ) -> Result<(), DataSourceError> {
        let Chain {
            source,
            zone,
            qtype,
            opts,
            budget,
        } = *chain;
        let max_links = budget.max_links();
        let mut next = Some(link);
        // Proofs of the links followed, outermost first; placed innermost
        // first, after the chain (allocated only for a chain with proofs).
        let mut proofs: Vec<Proof> = Vec::new();
        let mut owners = LoopCheck::default();
        let mut links = 0;
        while let Some(Link { target, proof }) = next {
            links += 1;
            if qtype == RType::CNAME
                || links >= max_links
                || !target.is_subdomain_of(&zone.origin)
                || owners.seen(ans, &target)
            {
                place_proof(ans, proof);
                break;
            }
            if !proof.is_empty() {
                proofs.push(proof);
            }
            let lookup = source.lookup(zone, &target, qtype, opts)?;
            next = self.place(source, zone, &target, lookup, opts, ans, links)?;
        }
        for proof in proofs.into_iter().rev() {
            place_proof(ans, proof);
        }
        Ok(())
    }

    /// Places the outcome of one lookup at link `depth` of a chain (0: the
    /// qname's); returns the chain to follow, if it goes on (its proofs not
    /// placed yet).
    #[allow(clippy::too_many_arguments)]
    fn place(
        &self,
        source: &dyn DataSource,
        zone: &ZoneRef,
        qname: &Name,
        mut lookup: Lookup,
        opts: LookupOptions,
        ans: &mut Answer,
        depth: usize,
    ) -> Result<Option<Link>, DataSourceError> {
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
                    return Ok(Some(Link { target, proof }));
                }
            }
            Outcome::Dname(dname) => {
                ans.answer.push(Placed::plain(dname.clone()));
                let Some(dtarget) = dname.rdatas.first().and_then(Rdata::target_name) else {
                    return Ok(None);
                };
                match qname.replace_suffix(&dname.owner, &dtarget) {
                    Some(Ok(target)) => {
                        // RFC 6672 §3.1: synthesize CNAME qname → substituted name, TTL of the DNAME.
                        let mut cname =
                            RRset::new(qname.clone(), RType::CNAME, Class::IN, dname.ttl);
                        cname.rdatas.push(Rdata::from_wire(target.as_wire()));
                        ans.answer.push(Placed::plain(Arc::new(cname)));
                        ans.synthesized = true;
                        return Ok(Some(Link { target, proof }));
                    }
                    // RFC 6672 §2.2: the substituted name is too long.
                    Some(Err(_)) => ans.rcode = Rcode::YXDOMAIN,
                    None => {}
                }
            }
            Outcome::Delegation(ns) => {
                if depth > 0 {
                    // A chain leading below a cut: the answer so far, no referral.
                    return Ok(None);
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
                ans.rcode = Rcode::NXDOMAIN;
                self.negative_soa(source, zone, opts, ans)?;
            }
            Outcome::NoData => self.negative_soa(source, zone, opts, ans)?,
        }
        place_proof(ans, proof);
        Ok(None)
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
    /// qtype RRSIG: every RRSIG at qname as the answer (RFC 4035 §3.1.5 leaves the
    /// form open; NSD and Knot DNS answer this way), NODATA when there is none.
    fn rrsig_query(
        &self,
        source: &dyn DataSource,
        zone: &ZoneRef,
        qname: &Name,
        opts: LookupOptions,
        budget: Budget<'_>,
    ) -> Result<Answer, DataSourceError> {
        let mut ans = Answer::new(Rcode::NOERROR, true);
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
                if let Some(link) = self.place(source, zone, qname, l, opts, &mut ans, 0)? {
                    let chain = Chain {
                        source,
                        zone,
                        qtype: RType::RRSIG,
                        opts,
                        budget,
                    };
                    self.follow_chain(&chain, link, &mut ans)?;
                }
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
}

/// What every link of one query's chain is looked up with.
struct Chain<'a> {
    source: &'a dyn DataSource,
    zone: &'a ZoneRef,
    qtype: RType,
    opts: LookupOptions,
    budget: Budget<'a>,
}

/// The reply a chain must fit: to `req` over `transport`.
#[derive(Clone, Copy)]
struct Budget<'a> {
    req: &'a Request<'a>,
    transport: Transport,
}

impl Budget<'_> {
    /// Most links of a chain followed: as many as the reply could hold
    /// ([`MIN_LINK_LEN`]).
    fn max_links(self) -> usize {
        reply_limit(self.req, self.transport) / MIN_LINK_LEN
    }
}

/// RFC 4035 §3.1.3 / RFC 5155 §7.2 proofs, and DS or its denial at a cut:
/// each RRset of `proof` not placed yet, into the authority section.
#[inline(always)]
fn place_proof(ans: &mut Answer, proof: Proof) {
    for set in proof {
        if !ans.contains(&set.owner, set.rtype) {
            ans.authority.push(Placed::plain(set));
        }
    }
}

/// Finds a chain's loop: a target already an owner in the answer. The
/// first [`LINEAR_LOOP_CHECK`] owners are compared one by one (no
/// allocation); past them, each owner's case-insensitive hash goes into a
/// set once, and a target is compared by name only when its hash is there.
#[derive(Default)]
struct LoopCheck {
    hashes: Option<std::collections::HashSet<u64>>,
    /// Answer RRsets whose owners are in `hashes`.
    hashed: usize,
}

impl LoopCheck {
    /// True when `target` owns an RRset of the answer already.
    fn seen(&mut self, ans: &Answer, target: &Name) -> bool {
        let owned = |ans: &Answer| ans.answer.iter().any(|p| p.owner() == target);
        if ans.answer.len() <= LINEAR_LOOP_CHECK {
            return owned(ans);
        }
        let key = |name: &Name| crate::name_hash::name_key(name.as_wire(), 0);
        let hashes = self.hashes.get_or_insert_with(Default::default);
        for p in &ans.answer[self.hashed..] {
            hashes.insert(key(p.owner()));
        }
        self.hashed = ans.answer.len();
        hashes.contains(&key(target)) && owned(ans)
    }
}

/// Keeps one RRset of an ANY answer (RFC 8482 §4.1): the one of the lowest
/// type, so every backend picks the same (the SOA's NS at an apex, A at a host).
fn keep_one(sets: &mut Vec<Arc<RRset>>) {
    if let Some(first) = sets.iter().min_by_key(|s| s.rtype.0).cloned() {
        sets.clear();
        sets.push(first);
    }
}
