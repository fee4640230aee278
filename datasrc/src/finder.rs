//! The lookup algorithm of RFC 1034 §4.3.2 step 3 with RFC 4592 wildcards and
//! RFC 6672 DNAME, written once over a minimal storage interface so that every
//! backend reports the same outcome for the same data (after BIND 10's
//! `DatabaseClient::Finder::findInternal`).

use std::sync::Arc;

use crate::lookup::{DataSourceError, Lookup, LookupOptions, Outcome};
use crate::name::Name;
use crate::node::{NodeRef, NodeStore};
use crate::rr::{RRset, RType};

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
