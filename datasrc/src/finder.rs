//! The lookup algorithm of RFC 1034 §4.3.2 step 3 with RFC 4592 wildcards and
//! RFC 6672 DNAME, written once over a minimal storage interface so that every
//! backend reports the same outcome for the same data (after BIND 10's
//! `DatabaseClient::Finder::findInternal`).

use std::sync::Arc;

use crate::name::Name;
use crate::rr::{RRset, RType};
use crate::source::{DataSourceError, Lookup, LookupOptions, Outcome};

/// All RRsets at one owner name, each with its RRSIGs attached.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    /// The RRsets; at most one per type. Never contains a bare RRSIG set.
    pub rrsets: Vec<Arc<RRset>>,
}

impl Node {
    /// The RRset of type `rtype`, if any.
    pub fn get(&self, rtype: RType) -> Option<&Arc<RRset>> {
        self.rrsets.iter().find(|r| r.rtype == rtype)
    }
}

/// A node whose RRsets are built from stored rows on first use, each type on
/// its own (the sqlite3 backend): a lookup parses only the types it needs, and
/// a row that does not parse fails only the lookups that need its type (as
/// BIND 10's `DatabaseClient` did, converting only the types a find wanted).
pub trait LazyNode: Send + Sync {
    /// True when the node owns records of `rtype` (never RRSIG); parses nothing.
    fn has(&self, rtype: RType) -> bool;

    /// The RRset of `rtype` (never RRSIG); its RRSIGs are attached when
    /// `dnssec` is true (they may be anyway).
    ///
    /// Errors: [`DataSourceError::BadData`] naming the owner when a row of
    /// that type (or, with `dnssec`, an RRSIG row) does not parse.
    fn get(&self, rtype: RType, dnssec: bool) -> Result<Option<&Arc<RRset>>, DataSourceError>;

    /// Every RRset, RRSIGs attached, in type order.
    ///
    /// Errors: as [`LazyNode::get`], for any row of the node.
    fn all(&self) -> Result<Vec<Arc<RRset>>, DataSourceError>;
}

/// A node handed out by a [`NodeStore`]: borrowed from a snapshot, shared
/// (held by a cache) without copying it, or built type by type on first use.
pub enum NodeRef<'a> {
    /// Borrowed from the store.
    Borrowed(&'a Node),
    /// Owned jointly with the store.
    Shared(Arc<Node>),
    /// Parsed per type on first use.
    Lazy {
        /// The node.
        node: Arc<dyn LazyNode>,
        /// Whether the lookup wants RRSIGs attached.
        dnssec: bool,
    },
}

impl NodeRef<'_> {
    /// True when the node owns records of `rtype` (never RRSIG), without
    /// building the RRset.
    pub fn has(&self, rtype: RType) -> bool {
        match self {
            NodeRef::Borrowed(n) => n.get(rtype).is_some(),
            NodeRef::Shared(n) => n.get(rtype).is_some(),
            NodeRef::Lazy { node, .. } => node.has(rtype),
        }
    }

    /// The RRset of type `rtype`, if any.
    ///
    /// Errors: a lazy node's rows of that type do not parse ([`LazyNode::get`]).
    pub fn get(&self, rtype: RType) -> Result<Option<&Arc<RRset>>, DataSourceError> {
        match self {
            NodeRef::Borrowed(n) => Ok(n.get(rtype)),
            NodeRef::Shared(n) => Ok(n.get(rtype)),
            NodeRef::Lazy { node, dnssec } => node.get(rtype, *dnssec),
        }
    }

    /// Every RRset of the node, RRSIGs attached, in the node's order.
    ///
    /// Errors: a lazy node has a row that does not parse.
    pub fn all(&self) -> Result<Vec<Arc<RRset>>, DataSourceError> {
        match self {
            NodeRef::Borrowed(n) => Ok(n.rrsets.clone()),
            NodeRef::Shared(n) => Ok(n.rrsets.clone()),
            NodeRef::Lazy { node, .. } => node.all(),
        }
    }

    /// A shared, fully built handle to the node (a copy only when borrowed).
    ///
    /// Errors: a lazy node has a row that does not parse.
    pub fn to_shared(&self) -> Result<Arc<Node>, DataSourceError> {
        match self {
            NodeRef::Borrowed(n) => Ok(Arc::new((*n).clone())),
            NodeRef::Shared(n) => Ok(n.clone()),
            NodeRef::Lazy { node, .. } => Ok(Arc::new(Node {
                rrsets: node.all()?,
            })),
        }
    }
}

/// The two stored names around an absent one, as reversed names in lower case
/// (`com.example.` for `Example.COM.`, [`Name::reversed_text`]) compared as bytes,
/// which is the order of BIND 10's `rname` index (NOCASE folds ASCII only).
/// No name of the zone lies strictly between `below` and `above`; `None` is
/// past that end of the zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbsentRange {
    /// The greatest stored reversed name below the absent one.
    pub below: Option<Vec<u8>>,
    /// The least stored reversed name above it.
    pub above: Option<Vec<u8>>,
}

impl AbsentRange {
    /// True when `name` owns no records and none below it, by this range:
    /// its reversed name lies strictly inside, and `above` is not below it.
    pub fn covers(&self, reversed: &[u8]) -> bool {
        self.below.as_deref().is_none_or(|b| b < reversed)
            && self
                .above
                .as_deref()
                .is_none_or(|a| reversed < a && !a.starts_with(reversed))
    }
}

/// The key [`AbsentRange`]s compare: the reversed name in ASCII lower case.
pub fn absent_key(name: &Name) -> Vec<u8> {
    let mut key = name.reversed_text().into_bytes();
    key.make_ascii_lowercase();
    key
}

/// What a backend must provide for [`find`].
pub trait NodeStore {
    /// The data at exactly `name` in the zone, or `None` when it owns no records.
    /// RRSIGs must be attached when `dnssec` is true (they may always be).
    fn node(&self, name: &Name, dnssec: bool) -> Result<Option<NodeRef<'_>>, DataSourceError>;

    /// True when some name strictly below `name` owns records.
    fn has_descendants(&self, name: &Name) -> Result<bool, DataSourceError>;

    /// For a name that owns no records and has none below it, the stored
    /// names next to it in the order of reversed names ([`AbsentRange`]).
    /// `None` when the backend keeps no such order (or the name exists).
    /// Caches use it to remember one range instead of one entry per absent
    /// name (a flood of random names under one parent hits the same few).
    ///
    /// Errors: storage failure.
    fn absent_range(&self, name: &Name) -> Result<Option<AbsentRange>, DataSourceError> {
        let _ = name;
        Ok(None)
    }

    /// The NSEC RRset (RRSIGs attached) of the greatest owner name ≤ `name` in
    /// canonical order (RFC 4034 §6.1) that owns an NSEC, wrapping round to the
    /// last one: the NSEC that matches or covers `name` (RFC 4035 §3.1.3).
    /// `None` when the zone has no NSEC.
    fn covering_nsec(&self, name: &Name) -> Result<Option<Arc<RRset>>, DataSourceError>;

    /// The NSEC3 RRset (RRSIGs attached) whose owner hash is the greatest ≤
    /// `hash` (base32hex, lower-case ASCII, RFC 5155 §3.3), wrapping round to the
    /// last one, and whether it matches `hash` exactly. `None` without NSEC3.
    fn covering_nsec3(&self, hash: &[u8]) -> Result<Option<(Arc<RRset>, bool)>, DataSourceError>;
}

/// Looks up (`qname`, `qtype`) in the zone at `origin`. `qname` must be at or
/// below `origin`.
///
/// Steps: (1) walk the ancestors from the apex down, stopping at a zone cut
/// (NS below the apex, unless `glue_ok`) or a DNAME; (2) at qname: referral for a
/// cut (except qtype DS, answered from the parent side, RFC 4035 §3.1.4.1),
/// CNAME, the type, or NODATA; (3) no data at qname: empty non-terminal, a
/// wildcard at the closest encloser, or NXDOMAIN.
///
/// Errors: storage errors from `store`.
pub fn find<S: NodeStore + ?Sized>(
    store: &S,
    origin: &Name,
    qname: &Name,
    qtype: RType,
    opts: LookupOptions,
) -> Result<Lookup, DataSourceError> {
    let (mut lookup, encloser) = find_outcome(store, origin, qname, qtype, opts)?;
    if opts.dnssec {
        lookup.proof = crate::dnssec::prove(store, origin, qname, &lookup, encloser.as_ref())?;
    }
    Ok(lookup)
}

/// The closest encloser (RFC 5155 §1.3) where the proof needs it: for NXDOMAIN
/// and wildcard outcomes.
type Encloser = Option<Name>;

fn find_outcome<S: NodeStore + ?Sized>(
    store: &S,
    origin: &Name,
    qname: &Name,
    qtype: RType,
    opts: LookupOptions,
) -> Result<(Lookup, Encloser), DataSourceError> {
    let qlabels = qname.label_count();
    let olabels = origin.label_count();
    let mut first_ns: Option<Arc<RRset>> = None;
    let mut last_known = olabels;

    // (1) Proper ancestors, apex first.
    for labels in olabels..qlabels {
        let Some(ancestor) = qname.strip_left(qlabels - labels) else {
            break;
        };
        let Some(node) = store.node(&ancestor, opts.dnssec)? else {
            continue;
        };
        last_known = labels;
        if labels != olabels
            && let Some(ns) = node.get(RType::NS)?
        {
            if !opts.glue_ok {
                return Ok((Lookup::plain(Outcome::Delegation(ns.clone())), None));
            }
            first_ns.get_or_insert_with(|| ns.clone());
        }
        if let Some(dname) = node.get(RType::DNAME)? {
            return Ok((Lookup::plain(Outcome::Dname(dname.clone())), None));
        }
    }

    // (2) The name itself.
    if let Some(node) = store.node(qname, opts.dnssec)? {
        let at_apex = qlabels == olabels;
        return Ok((Lookup::plain(at_node(&node, qtype, at_apex, opts)?), None));
    }

    // (3) No data at qname.
    if store.has_descendants(qname)? {
        let mut l = Lookup::plain(Outcome::NoData);
        l.empty_nonterminal = true;
        return Ok((l, None));
    }
    let mut encloser: Option<Name> = None;
    if !opts.no_wildcard {
        for i in 1..=(qlabels - last_known) {
            // A closer encloser that exists only as an empty non-terminal cancels
            // wildcards further up (RFC 4592 §3.3.1: the wildcard must be a child
            // of the closest encloser).
            if i >= 2
                && let Some(closer) = qname.strip_left(i - 1)
                && store.has_descendants(&closer)?
            {
                encloser = Some(closer);
                break;
            }
            let Some(parent) = qname.strip_left(i) else {
                break;
            };
            let Ok(wild) = parent.wildcard_child() else {
                break;
            };
            if let Some(node) = store.node(&wild, opts.dnssec)? {
                if let Some(ns) = first_ns {
                    // A glue lookup below a cut never matches through a wildcard.
                    return Ok((Lookup::plain(Outcome::Delegation(ns)), None));
                }
                let outcome = match at_node(&node, qtype, false, opts)? {
                    // RFC 6672 §3.3: a wildcard DNAME does not redirect.
                    Outcome::Answer(r) if r.rtype == RType::DNAME && qtype != RType::DNAME => {
                        Outcome::NoData
                    }
                    other => other,
                };
                let mut l = Lookup::plain(outcome);
                l.wildcard = true;
                return Ok((l, Some(parent)));
            }
            if store.has_descendants(&wild)? {
                let mut l = Lookup::plain(Outcome::NoData);
                l.wildcard = true;
                return Ok((l, Some(parent)));
            }
        }
    }
    if let Some(ns) = first_ns {
        return Ok((Lookup::plain(Outcome::Delegation(ns)), None));
    }
    if encloser.is_none() && opts.dnssec {
        encloser = Some(closest_encloser(store, qname, last_known)?);
    }
    Ok((Lookup::plain(Outcome::NxDomain), encloser))
}

/// The deepest existing ancestor of a non-existent `qname`: an empty
/// non-terminal below the deepest ancestor with data (`last_known` labels), or
/// that ancestor.
fn closest_encloser<S: NodeStore + ?Sized>(
    store: &S,
    qname: &Name,
    last_known: usize,
) -> Result<Name, DataSourceError> {
    let qlabels = qname.label_count();
    for labels in ((last_known + 1)..qlabels).rev() {
        if let Some(ancestor) = qname.strip_left(qlabels - labels)
            && store.has_descendants(&ancestor)?
        {
            return Ok(ancestor);
        }
    }
    Ok(qname
        .strip_left(qlabels - last_known)
        .unwrap_or_else(Name::root))
}

fn at_node(
    node: &NodeRef<'_>,
    qtype: RType,
    at_apex: bool,
    opts: LookupOptions,
) -> Result<Outcome, DataSourceError> {
    if !at_apex
        && !opts.glue_ok
        && qtype != RType::DS
        && let Some(ns) = node.get(RType::NS)?
    {
        return Ok(Outcome::Delegation(ns.clone()));
    }
    if qtype != RType::CNAME
        && let Some(cname) = node.get(RType::CNAME)?
    {
        return Ok(Outcome::Cname(cname.clone()));
    }
    if qtype == RType::ANY {
        // A node with rows but no RRset to give (only RRSIGs, say) has no
        // data of any type: NODATA, with the SOA, not an empty answer.
        let all = node.all()?;
        return Ok(if all.is_empty() {
            Outcome::NoData
        } else {
            Outcome::AnyAnswer(all)
        });
    }
    Ok(match node.get(qtype)? {
        Some(rrset) => Outcome::Answer(rrset.clone()),
        None => Outcome::NoData,
    })
}
