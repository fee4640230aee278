//! Authenticated denial of existence for signed zones: which NSEC (RFC 4035
//! §3.1.3) or NSEC3 (RFC 5155 §7.2) RRsets prove a lookup's outcome, and the
//! NSEC3 owner hash (RFC 5155 §5).
//!
//! The proofs are chosen here, once for every backend, from the storage
//! primitives of [`NodeStore`]: the covering NSEC of a name and the covering
//! NSEC3 of a hash.

use std::sync::Arc;

use data_encoding::BASE32HEX_NOPAD;
use sha1::{Digest, Sha1};

use crate::lookup::{DataSourceError, Lookup, Outcome, Proof as ProofSets};
use crate::name::Name;
use crate::node::NodeStore;
use crate::rr::{RRset, RType};

/// NSEC3 hash parameters from the apex NSEC3PARAM (RFC 5155 §4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nsec3Params {
    /// Hash algorithm (1 = SHA-1, the only one defined).
    pub algorithm: u8,
    /// Additional hash iterations.
    pub iterations: u16,
    /// Salt bytes.
    pub salt: Vec<u8>,
}

impl Nsec3Params {
    /// Reads NSEC3PARAM (or NSEC3) RDATA: algorithm, flags, iterations, salt.
    pub fn from_rdata(rdata: &[u8]) -> Option<Nsec3Params> {
        let salt_len = usize::from(*rdata.get(4)?);
        Some(Nsec3Params {
            algorithm: *rdata.first()?,
            iterations: u16::from_be_bytes([*rdata.get(2)?, *rdata.get(3)?]),
            salt: rdata.get(5..5 + salt_len)?.to_vec(),
        })
    }

    /// The hashed owner label of `name`: base32hex (RFC 4648 §7) of the iterated
    /// SHA-1 of its canonical wire form, lower-case ASCII (RFC 5155 §5).
    pub fn hash(&self, name: &Name) -> Vec<u8> {
        let mut digest = Sha1::new()
            .chain_update(name.to_lowercase().as_wire())
            .chain_update(&self.salt)
            .finalize();
        for _ in 0..self.iterations {
            digest = Sha1::new()
                .chain_update(digest)
                .chain_update(&self.salt)
                .finalize();
        }
        BASE32HEX_NOPAD
            .encode(&digest)
            .to_ascii_lowercase()
            .into_bytes()
    }
}

/// How a zone proves non-existence.
enum Denial {
    Nsec,
    Nsec3(Nsec3Params),
}

/// The NSEC/NSEC3 RRsets (RRSIGs attached) that prove `lookup` for `qname`, in
/// authority-section order; for a referral, the DS RRset or the proof that the
/// cut has none (RFC 4035 §3.1.4). `encloser` is the closest encloser for
/// NXDOMAIN and wildcard outcomes. Unsigned zones get no proof.
///
/// Errors: storage errors.
pub fn prove<S: NodeStore + ?Sized>(
    store: &S,
    origin: &Name,
    qname: &Name,
    lookup: &Lookup,
    encloser: Option<&Name>,
) -> Result<ProofSets, DataSourceError> {
    let Some(apex) = store.node(origin, true)? else {
        return Ok(ProofSets::new());
    };
    let denial = if let Some(p) = apex
        .get(RType::NSEC3PARAM)?
        .and_then(|s| s.rdatas.first())
        .and_then(|r| Nsec3Params::from_rdata(r.as_wire()))
    {
        Denial::Nsec3(p)
    } else if apex.has(RType::NSEC) {
        Denial::Nsec
    } else if let Outcome::Delegation(ns) = &lookup.outcome {
        // Unsigned zone: still hand out a DS if one is stored.
        return Ok(ds_at(store, &ns.owner)?.into_iter().collect());
    } else {
        return Ok(ProofSets::new());
    };
    let mut p = Proof {
        store,
        out: ProofSets::new(),
    };
    let wildcard_of = |ce: &Name| ce.wildcard_child().ok();
    match (&lookup.outcome, &denial) {
        (Outcome::NxDomain, Denial::Nsec) => {
            p.nsec_cover(qname)?;
            if let Some(w) = encloser.and_then(wildcard_of) {
                p.nsec_cover(&w)?;
            }
        }
        (Outcome::NxDomain, Denial::Nsec3(params)) => {
            if let Some(ce) = encloser {
                p.nsec3_encloser_proof(params, qname, ce)?;
                if let Some(w) = wildcard_of(ce) {
                    p.nsec3_cover(params, &w)?;
                }
            }
        }
        (Outcome::NoData, Denial::Nsec) => {
            if lookup.wildcard {
                p.nsec_cover(qname)?;
                if let Some(w) = encloser.and_then(wildcard_of) {
                    p.nsec_cover(&w)?;
                }
            } else if lookup.empty_nonterminal {
                // The NSEC whose span covers the empty non-terminal.
                p.nsec_cover(qname)?;
            } else if let Some(node) = store.node(qname, true)?
                && let Some(nsec) = node.get(RType::NSEC)?
            {
                // The name's own NSEC: its type bitmap lacks qtype. A name
                // without one (unsigned glue, say) gets no proof.
                p.push(nsec.clone());
            }
        }
        (Outcome::NoData, Denial::Nsec3(params)) => {
            if lookup.wildcard {
                if let Some(ce) = encloser {
                    p.nsec3_encloser_proof(params, qname, ce)?;
                    if let Some(w) = wildcard_of(ce) {
                        p.nsec3_match(params, &w)?;
                    }
                }
            } else if !p.nsec3_match(params, qname)? {
                // No NSEC3 for the name (opt-out, RFC 5155 §7.2.4): the closest
                // provable encloser and the opt-out span over the next closer.
                p.nsec3_provable_encloser(params, origin, qname)?;
            }
        }
        (Outcome::Answer(_) | Outcome::AnyAnswer(_) | Outcome::Cname(_), _) if lookup.wildcard => {
            // RFC 4035 §3.1.3.3 / RFC 5155 §7.2.6: qname itself does not exist.
            match &denial {
                Denial::Nsec => p.nsec_cover(qname)?,
                Denial::Nsec3(params) => {
                    if let Some(ce) = encloser
                        && let Some(next) = next_closer(qname, ce)
                    {
                        p.nsec3_cover(params, &next)?;
                    }
                }
            }
        }
        (Outcome::Delegation(ns), _) => {
            if let Some(ds) = ds_at(store, &ns.owner)? {
                p.push(ds);
            } else {
                match &denial {
                    // RFC 4035 §3.1.4.1: the NSEC at the cut shows no DS bit.
                    Denial::Nsec => {
                        if let Some(node) = store.node(&ns.owner, true)?
                            && let Some(nsec) = node.get(RType::NSEC)?
                        {
                            p.push(nsec.clone());
                        }
                    }
                    // RFC 5155 §7.2.7: the matching NSEC3, or the opt-out proof.
                    Denial::Nsec3(params) => {
                        if !p.nsec3_match(params, &ns.owner)? {
                            p.nsec3_provable_encloser(params, origin, &ns.owner)?;
                        }
                    }
                }
            }
        }
        _ => {}
    }
    Ok(p.out)
}

fn ds_at<S: NodeStore + ?Sized>(
    store: &S,
    cut: &Name,
) -> Result<Option<Arc<RRset>>, DataSourceError> {
    match store.node(cut, true)? {
        Some(n) => Ok(n.get(RType::DS)?.cloned()),
        None => Ok(None),
    }
}

/// The ancestor of `qname` one label longer than `encloser` (RFC 5155 §1.3).
fn next_closer(qname: &Name, encloser: &Name) -> Option<Name> {
    let extra = qname
        .label_count()
        .checked_sub(encloser.label_count() + 1)?;
    qname.strip_left(extra)
}

struct Proof<'a, S: ?Sized> {
    store: &'a S,
    out: ProofSets,
}

impl<S: NodeStore + ?Sized> Proof<'_, S> {
    fn push(&mut self, set: Arc<RRset>) {
        if !self
            .out
            .iter()
            .any(|o| o.rtype == set.rtype && o.owner == set.owner)
        {
            self.out.push(set);
        }
    }

    fn nsec_cover(&mut self, name: &Name) -> Result<(), DataSourceError> {
        if let Some(nsec) = self.store.covering_nsec(name)? {
            self.push(nsec);
        }
        Ok(())
    }

    fn nsec3_cover(&mut self, params: &Nsec3Params, name: &Name) -> Result<(), DataSourceError> {
        if let Some((set, _)) = self.store.covering_nsec3(&params.hash(name))? {
            self.push(set);
        }
        Ok(())
    }

    /// Adds the NSEC3 matching `name`; false when there is none.
    fn nsec3_match(&mut self, params: &Nsec3Params, name: &Name) -> Result<bool, DataSourceError> {
        match self.store.covering_nsec3(&params.hash(name))? {
            Some((set, true)) => {
                self.push(set);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// RFC 5155 §7.2.1: the NSEC3 matching the closest encloser and the one
    /// covering the next closer name.
    fn nsec3_encloser_proof(
        &mut self,
        params: &Nsec3Params,
        qname: &Name,
        encloser: &Name,
    ) -> Result<(), DataSourceError> {
        self.nsec3_match(params, encloser)?;
        if let Some(next) = next_closer(qname, encloser) {
            self.nsec3_cover(params, &next)?;
        }
        Ok(())
    }

    /// The closest ancestor of `name` that has a matching NSEC3, then the cover
    /// of the next closer name (the opt-out case of RFC 5155 §7.2.4 and §7.2.7).
    fn nsec3_provable_encloser(
        &mut self,
        params: &Nsec3Params,
        origin: &Name,
        name: &Name,
    ) -> Result<(), DataSourceError> {
        let labels = name.label_count();
        for strip in 1..=labels.saturating_sub(origin.label_count()) {
            let Some(ancestor) = name.strip_left(strip) else {
                break;
            };
            if let Some((set, true)) = self.store.covering_nsec3(&params.hash(&ancestor))? {
                self.push(set);
                if let Some(next) = next_closer(name, &ancestor) {
                    self.nsec3_cover(params, &next)?;
                }
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc5155_appendix_a_hashes() {
        // RFC 5155 Appendix A: salt aabbccdd, 12 iterations.
        let p = Nsec3Params {
            algorithm: 1,
            iterations: 12,
            salt: vec![0xaa, 0xbb, 0xcc, 0xdd],
        };
        let h = |n: &str| String::from_utf8(p.hash(&n.parse().expect("name"))).expect("ascii");
        assert_eq!(h("example."), "0p9mhaveqvm6t7vbl5lop2u3t2rp3tom");
        assert_eq!(h("a.example."), "35mthgpgcu1qg68fab165klnsnk3dpvl");
        assert_eq!(h("ns1.example."), "2t7b4g4vsa5smi47k61mv5bv1a22bojr");
        assert_eq!(h("*.w.example."), "r53bq7cc2uvmubfu5ocmm6pers9tk9en");
    }
}
