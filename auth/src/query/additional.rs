//! Additional-section processing (RFC 1034 §3.7, RFC 2782, RFC 9471): the
//! addresses of NS, MX and SRV targets inside the zone, glue for referrals,
//! and the placement of what a source prepared ahead.

use std::sync::Arc;

use authd_datasrc::{DataSource, LookupOptions, Name, Outcome, RRset, RType, ZoneRef};

use super::{Answer, Placed, QueryProcessor};
use crate::log_limit::LogLimit;

/// Storage failures while looking up additional data (logged, never per query).
static ADDITIONAL_LOG: LogLimit = LogLimit::new();

impl QueryProcessor {
    /// Additional-section addresses for NS, MX and SRV targets inside the zone
    /// (RFC 1034 §3.7, RFC 2782); only names that exist as plain answers.
    /// `any`: a qtype ANY answer, which may hold address RRsets itself.
    /// Additional data is optional: a target whose lookup fails is left out.
    pub(super) fn additional_for(
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
    pub(super) fn glue_for(
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
}

/// The additional-section RRsets `source` has ready for `rrset`, if any. A
/// storage error is taken as "not prepared": the caller then looks each target
/// up, so only the failing ones are left out (and warned about, by name).
pub(super) fn prepared_additional(
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
pub(super) fn place_additional(
    ans: &mut Answer,
    ready: &[Arc<RRset>],
    cut: Option<&Name>,
    by_name: bool,
) {
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
