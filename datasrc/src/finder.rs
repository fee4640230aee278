//! The lookup algorithm of RFC 1034 §4.3.2 step 3 with RFC 4592 wildcards and
//! RFC 6672 DNAME, written once over a minimal storage interface so that every
//! backend reports the same outcome for the same data (after BIND 10's
//! `DatabaseClient::Finder::findInternal`).

use std::borrow::Cow;
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

/// What a backend must provide for [`find`].
pub trait NodeStore {
    /// The data at exactly `name` in the zone, or `None` when it owns no records.
    /// RRSIGs must be attached when `dnssec` is true (they may always be).
    fn node(&self, name: &Name, dnssec: bool) -> Result<Option<Cow<'_, Node>>, DataSourceError>;

    /// True when some name strictly below `name` owns records.
    fn has_descendants(&self, name: &Name) -> Result<bool, DataSourceError>;
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
            && let Some(ns) = node.get(RType::NS)
        {
            if !opts.glue_ok {
                return Ok(Lookup::plain(Outcome::Delegation(ns.clone())));
            }
            first_ns.get_or_insert_with(|| ns.clone());
        }
        if let Some(dname) = node.get(RType::DNAME) {
            return Ok(Lookup::plain(Outcome::Dname(dname.clone())));
        }
    }

    // (2) The name itself.
    if let Some(node) = store.node(qname, opts.dnssec)? {
        let at_apex = qlabels == olabels;
        return Ok(Lookup::plain(at_node(&node, qtype, at_apex, opts)));
    }

    // (3) No data at qname.
    if store.has_descendants(qname)? {
        return Ok(Lookup {
            outcome: Outcome::NoData,
            wildcard: false,
            empty_nonterminal: true,
        });
    }
    if !opts.no_wildcard {
        for i in 1..=(qlabels - last_known) {
            // A closer encloser that exists only as an empty non-terminal cancels
            // wildcards further up (RFC 4592 §3.3.1: the wildcard must be a child
            // of the closest encloser).
            if i >= 2
                && let Some(closer) = qname.strip_left(i - 1)
                && store.has_descendants(&closer)?
            {
                break;
            }
            let Some(encloser) = qname.strip_left(i) else {
                break;
            };
            let Ok(wild) = encloser.wildcard_child() else {
                break;
            };
            if let Some(node) = store.node(&wild, opts.dnssec)? {
                if let Some(ns) = first_ns {
                    // A glue lookup below a cut never matches through a wildcard.
                    return Ok(Lookup::plain(Outcome::Delegation(ns)));
                }
                let outcome = match at_node(&node, qtype, false, opts) {
                    // RFC 6672 §3.3: a wildcard DNAME does not redirect.
                    Outcome::Answer(r) if r.rtype == RType::DNAME && qtype != RType::DNAME => {
                        Outcome::NoData
                    }
                    other => other,
                };
                return Ok(Lookup {
                    outcome,
                    wildcard: true,
                    empty_nonterminal: false,
                });
            }
            if store.has_descendants(&wild)? {
                return Ok(Lookup {
                    outcome: Outcome::NoData,
                    wildcard: true,
                    empty_nonterminal: false,
                });
            }
        }
    }
    if let Some(ns) = first_ns {
        return Ok(Lookup::plain(Outcome::Delegation(ns)));
    }
    Ok(Lookup::plain(Outcome::NxDomain))
}

fn at_node(node: &Node, qtype: RType, at_apex: bool, opts: LookupOptions) -> Outcome {
    if !at_apex
        && !opts.glue_ok
        && qtype != RType::DS
        && let Some(ns) = node.get(RType::NS)
    {
        return Outcome::Delegation(ns.clone());
    }
    if qtype != RType::CNAME
        && let Some(cname) = node.get(RType::CNAME)
    {
        return Outcome::Cname(cname.clone());
    }
    if qtype == RType::ANY {
        return Outcome::AnyAnswer(node.rrsets.clone());
    }
    match node.get(qtype) {
        Some(rrset) => Outcome::Answer(rrset.clone()),
        None => Outcome::NoData,
    }
}
