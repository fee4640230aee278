//! Signing a zone's content: the DNSKEY RRset, the NSEC (RFC 4034 §4, RFC
//! 4035 §2.3) or NSEC3 (RFC 5155 §7.1) chain and the RRSIGs (RFC 4035
//! §2.2), worked out from the stored zone as the set of signer records it
//! should carry, and returned as the difference from what it carries.
//!
//! Only what changed is signed: an RRSIG is kept while its RRset is not in
//! the caller's dirty set, its key still signs, its original TTL matches and
//! more than `signature_refresh` of validity is left; NSEC/NSEC3 records are
//! rebuilt only around changed names (the rest compare equal and keep their
//! RRSIGs). Signing itself runs on every core (rayon).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use data_encoding::BASE32HEX_NOPAD;
use rayon::prelude::*;

use super::keys::{KeyError, KeyPair};
use super::policy::{Denial, Policy};
use super::rrsig::{INCEPTION_BACKDATE, SigFields, rrsig_labels, sign_rrset};
use crate::dnssec::Nsec3Params;
use crate::name::Name;
use crate::rr::{Class, RType, Rdata, Record};

/// True for the types the signer owns: a zone under a policy gets them from
/// the signer only (RFC 4035 §2).
pub fn is_signer_type(rtype: RType) -> bool {
    matches!(
        rtype,
        RType::RRSIG
            | RType::NSEC
            | RType::NSEC3
            | RType::NSEC3PARAM
            | RType::DNSKEY
            | RType::CDS
            | RType::CDNSKEY
    )
}

/// One key of a zone as the signer uses it.
#[derive(Debug, Clone)]
pub struct SigningKey {
    /// The key.
    pub pair: Arc<KeyPair>,
    /// Its DNSKEY is in the zone's DNSKEY RRset.
    pub published: bool,
    /// It signs the DNSKEY RRset (a KSK or CSK in use).
    pub signs_keys: bool,
    /// It signs every other RRset (a ZSK or CSK in use).
    pub signs_zone: bool,
    /// The CDS and CDNSKEY RRsets name it (RFC 7344 §3: the DS set the
    /// parent should hold).
    pub cds: bool,
}

/// Which data RRsets changed since the zone was last signed.
#[derive(Debug, Clone)]
pub enum Dirty {
    /// Every RRset (a first signing, a key change): every RRSIG is made anew.
    All,
    /// These (owner, type) pairs; owners compare without case.
    Rrsets(HashSet<(Name, RType)>),
}

impl Dirty {
    fn contains(&self, owner: &Name, rtype: RType) -> bool {
        match self {
            Dirty::All => true,
            Dirty::Rrsets(s) => s.contains(&(owner.clone(), rtype)),
        }
    }

    /// The (owner, type) pairs `records` touch, with their owners.
    pub fn of<'a>(records: impl IntoIterator<Item = &'a Record>) -> Dirty {
        Dirty::Rrsets(
            records
                .into_iter()
                .map(|r| (r.owner.clone(), r.rtype))
                .collect(),
        )
    }
}

/// The signer records to write: delete these, add those.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignedChange {
    /// Signer records to add.
    pub add: Vec<Record>,
    /// Stored signer records to delete.
    pub delete: Vec<Record>,
    /// New signatures made (a subset of `add`).
    pub signatures: usize,
    /// Signatures due for refresh left for a later pass (over the budget).
    pub deferred: usize,
}

impl SignedChange {
    /// True when nothing is to be written.
    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.delete.is_empty()
    }
}

/// Why a zone cannot be signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The zone has no SOA at its apex.
    #[error("zone {0} has no SOA")]
    NoSoa(String),
    /// No key signs the zone's data or its DNSKEY RRset.
    #[error("zone {0}: no active key {1}")]
    NoKey(String, &'static str),
    /// The key failed to sign.
    #[error("signing {owner} {rtype}: {source}")]
    Key {
        /// The RRset's owner.
        owner: String,
        /// The RRset's type.
        rtype: RType,
        /// The key's error.
        source: KeyError,
    },
}

/// The RRsets at one owner name, by type (ascending).
#[derive(Default)]
struct Sets(Vec<(RType, Set)>);

impl Sets {
    fn contains_key(&self, t: &RType) -> bool {
        self.0.iter().any(|(x, _)| x == t)
    }

    fn keys(&self) -> impl Iterator<Item = &RType> {
        self.0.iter().map(|(t, _)| t)
    }
}

/// One RRset of the zone being built.
struct Set {
    owner: Name,
    ttl: u32,
    rdatas: Vec<Rdata>,
}

/// The RFC 4034 §4.1.2 type bit maps field for `types` (sorted, unique).
pub fn type_bitmap(types: &[RType]) -> Vec<u8> {
    let codes: Vec<u16> = types.iter().map(|t| t.0).collect();
    let mut out = Vec::new();
    crate::rdata_text::encode_type_bitmap(&codes, &mut out);
    out
}

/// The types the NSEC3 of an authoritative name lists (RFC 5155 §7.1,
/// RFC 4035 §2.3) given the `types` of its data and whether it is a
/// delegation (NS, not at the apex): there only NS and DS; RRSIG but at an
/// insecure delegation (no DS). Sorted, unique.
pub fn nsec3_types(mut types: Vec<RType>, delegation: bool) -> Vec<RType> {
    if delegation {
        types.retain(|t| *t == RType::NS || *t == RType::DS);
    }
    if !delegation || types.contains(&RType::DS) {
        types.push(RType::RRSIG);
    }
    types.sort();
    types.dedup();
    types
}

/// The RDATA of an NSEC3 RR (RFC 5155 §3.2) of the policy's parameters
/// (SHA-1, no extra iterations, no salt: RFC 9276) pointing at the hashed
/// owner label `next` (base32hex text, any case) and listing `types`
/// (sorted, unique); `None` when `next` is not base32hex.
pub fn nsec3_rdata(opt_out: bool, next: &[u8], types: &[RType]) -> Option<Vec<u8>> {
    let next_raw = BASE32HEX_NOPAD.decode(&next.to_ascii_uppercase()).ok()?;
    let mut rdata = vec![1, u8::from(opt_out), 0, 0, 0, next_raw.len() as u8];
    rdata.extend_from_slice(&next_raw);
    rdata.extend_from_slice(&type_bitmap(types));
    Some(rdata)
}

/// RRSIGs by the zone's keys (those that sign the zone) over `records`,
/// each its own RRset (NSEC or NSEC3 records), valid from an hour before
/// `now` for the policy's validity less the owner's jitter, as [`resign`]
/// makes them.
///
/// Errors: [`SignError`].
pub fn sign_singletons(
    origin: &Name,
    records: &[Record],
    keys: &[SigningKey],
    policy: &Policy,
    now: u64,
) -> Result<Vec<Record>, SignError> {
    let now32 = now as u32;
    let validity = policy.signature_validity;
    let window = (validity - policy.signature_refresh.min(validity)) / 4;
    let inception = now32.wrapping_sub(INCEPTION_BACKDATE);
    let mut out = Vec::new();
    for r in records {
        for key in keys.iter().filter(|k| k.signs_zone) {
            let expiration = now32
                .wrapping_add(validity)
                .wrapping_sub(jitter(&r.owner, r.rtype, window));
            let rdata = sign_rrset(
                &key.pair,
                origin,
                &r.owner,
                r.rtype,
                r.ttl,
                &[&r.rdata],
                (inception, expiration),
            )
            .map_err(|source| SignError::Key {
                owner: r.owner.to_string(),
                rtype: r.rtype,
                source,
            })?;
            out.push(Record {
                owner: r.owner.clone(),
                rtype: RType::RRSIG,
                class: Class::IN,
                ttl: r.ttl,
                rdata,
            });
        }
    }
    Ok(out)
}

/// The fewest signatures worth spreading over the cores (rayon).
const PARALLEL_FROM: usize = 64;

/// A cheap spread of expirations over part of the refresh window, so a zone
/// signed at once is not due for refresh at once (seconds to subtract).
fn jitter(owner: &Name, rtype: RType, window: u32) -> u32 {
    if window == 0 {
        return 0;
    }
    let mut h: u32 = 0x811c_9dc5;
    for b in owner
        .as_wire()
        .iter()
        .map(u8::to_ascii_lowercase)
        .chain(rtype.0.to_be_bytes())
    {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    h % window
}

/// The signer records zone `origin` should carry given its `stored` records
/// (data and signer records, as stored), the `dirty` data RRsets, the zone's
/// `keys` and `policy` at Unix time `now` (seconds), returned as the change
/// from the stored signer records. At most `refresh_budget` signatures that
/// are only due for refresh (not changed, not expiring within half the
/// refresh window) are re-made; the rest are counted in
/// [`SignedChange::deferred`].
///
/// Errors: [`SignError`]; nothing is changed then.
pub fn resign(
    origin: &Name,
    stored: &[&Record],
    dirty: &Dirty,
    keys: &[SigningKey],
    policy: &Policy,
    now: u64,
    refresh_budget: usize,
) -> Result<SignedChange, SignError> {
    let now32 = now as u32; // RFC 4034 §3.1.5: serial arithmetic on 32 bits
    let soa = stored
        .iter()
        .find(|r| r.rtype == RType::SOA && r.owner == *origin)
        .ok_or_else(|| SignError::NoSoa(origin.to_string()))?;
    let neg_ttl = soa.rdata.soa_minimum().unwrap_or(soa.ttl).min(soa.ttl);
    let zone_keys: Vec<&SigningKey> = keys.iter().filter(|k| k.signs_zone).collect();
    let key_keys: Vec<&SigningKey> = keys.iter().filter(|k| k.signs_keys).collect();
    if zone_keys.is_empty() {
        return Err(SignError::NoKey(origin.to_string(), "signs the zone"));
    }
    if key_keys.is_empty() {
        return Err(SignError::NoKey(
            origin.to_string(),
            "signs the DNSKEY RRset",
        ));
    }

    // The zone's data with the DNSKEY and NSEC3PARAM RRsets the policy
    // gives, grouped by owner (in canonical order) then type. The rows come
    // nearly in that order (by `rname`), which a stable sort finishes in
    // about one pass.
    let mut signer_stored: Vec<&Record> = Vec::new();
    let mut data: Vec<&Record> = Vec::with_capacity(stored.len());
    for &r in stored {
        if is_signer_type(r.rtype) {
            signer_stored.push(r);
        } else if r.owner.is_subdomain_of(origin) {
            data.push(r);
        }
    }
    let mut generated: Vec<Record> = Vec::new();
    for k in keys.iter().filter(|k| k.published) {
        generated.push(Record {
            owner: origin.clone(),
            rtype: RType::DNSKEY,
            class: Class::IN,
            ttl: policy.dnskey_ttl,
            rdata: Rdata::from_wire(&k.pair.dnskey_rdata()),
        });
    }
    let apex = origin.to_lowercase();
    for k in keys.iter().filter(|k| k.cds) {
        let cds = k.pair.ds_rdata(apex.as_wire());
        for (rtype, rdata) in [(RType::CDS, cds), (RType::CDNSKEY, k.pair.dnskey_rdata())] {
            generated.push(Record {
                owner: origin.clone(),
                rtype,
                class: Class::IN,
                ttl: policy.dnskey_ttl,
                rdata: Rdata::from_wire(&rdata),
            });
        }
    }
    let nsec3 = match policy.denial {
        Denial::Nsec => None,
        Denial::Nsec3 { opt_out } => {
            generated.push(Record {
                owner: origin.clone(),
                rtype: RType::NSEC3PARAM,
                class: Class::IN,
                ttl: 0,
                rdata: Rdata::from_wire(&[1, 0, 0, 0, 0]),
            });
            Some(opt_out)
        }
    };
    data.extend(generated.iter());
    data.sort_by(|a, b| a.owner.cmp(&b.owner).then(a.rtype.cmp(&b.rtype)));
    let mut names: Vec<(Name, Sets)> = Vec::new();
    for r in data {
        let same_owner = names.last().is_some_and(|(n, _)| *n == r.owner);
        if !same_owner {
            names.push((r.owner.clone(), Sets::default()));
        }
        let Some((_, sets)) = names.last_mut() else {
            continue;
        };
        match sets.0.last_mut() {
            Some((t, set)) if *t == r.rtype => {
                set.ttl = set.ttl.min(r.ttl);
                if !set.rdatas.contains(&r.rdata) {
                    set.rdatas.push(r.rdata.clone());
                }
            }
            _ => sets.0.push((
                r.rtype,
                Set {
                    owner: r.owner.clone(),
                    ttl: r.ttl,
                    rdatas: vec![r.rdata.clone()],
                },
            )),
        }
    }
    let existing: HashSet<&Name> = names.iter().map(|(n, _)| n).collect();

    // Authoritative names (RFC 4035 §2.2): not below a zone cut or a DNAME;
    // at a delegation only the DS (and the denial record) are signed.
    struct Owner<'a> {
        name: &'a Name,
        delegation: bool,
        sets: &'a Sets,
    }
    impl Owner<'_> {
        /// The types the denial record lists (RFC 4035 §2.3): at a
        /// delegation only NS and DS, the rest being glue or occluded.
        fn types(&self) -> Vec<RType> {
            self.sets
                .keys()
                .copied()
                .filter(|t| !self.delegation || *t == RType::NS || *t == RType::DS)
                .collect()
        }
    }
    let mut auth: Vec<Owner<'_>> = Vec::with_capacity(names.len());
    let mut cut: Option<&Name> = None;
    for (name, sets) in &names {
        if let Some(c) = cut {
            if name.is_subdomain_of(c) && name != c {
                continue;
            }
            cut = None;
        }
        let delegation = name != origin && sets.contains_key(&RType::NS);
        if delegation || sets.contains_key(&RType::DNAME) {
            cut = Some(name);
        }
        auth.push(Owner {
            name,
            delegation,
            sets,
        });
    }

    // The denial chain.
    let mut chain: Vec<Record> = Vec::new();
    match nsec3 {
        None => {
            for (i, o) in auth.iter().enumerate() {
                let next = auth[(i + 1) % auth.len()].name.to_lowercase();
                let mut types = o.types();
                types.push(RType::NSEC);
                types.push(RType::RRSIG);
                types.sort();
                types.dedup();
                let mut rdata = next.as_wire().to_vec();
                rdata.extend_from_slice(&type_bitmap(&types));
                chain.push(Record {
                    owner: o.name.clone(),
                    rtype: RType::NSEC,
                    class: Class::IN,
                    ttl: neg_ttl,
                    rdata: Rdata::from_wire(&rdata),
                });
            }
        }
        Some(opt_out) => {
            let params = Nsec3Params {
                algorithm: 1,
                iterations: 0,
                salt: Vec::new(),
            };
            // Hashed names: every authoritative name but, with opt-out, the
            // insecure delegations; and the empty non-terminals above them
            // (RFC 5155 §7.1).
            let mut hashed: HashMap<Name, Vec<RType>> = HashMap::new();
            for o in &auth {
                let insecure = o.delegation && !o.sets.contains_key(&RType::DS);
                if insecure && opt_out {
                    continue;
                }
                hashed.insert(o.name.clone(), nsec3_types(o.types(), o.delegation));
                let mut up = o.name.parent();
                while let Some(p) = up {
                    if !p.is_subdomain_of(origin) || p == *origin || hashed.contains_key(&p) {
                        break;
                    }
                    if !existing.contains(&p) {
                        hashed.insert(p.clone(), Vec::new());
                    }
                    up = p.parent();
                }
            }
            let mut by_hash: Vec<(Vec<u8>, Vec<RType>)> = hashed
                .into_iter()
                .map(|(n, t)| (params.hash(&n), t))
                .collect();
            by_hash.sort_by(|a, b| a.0.cmp(&b.0));
            by_hash.dedup_by(|a, b| a.0 == b.0);
            for (i, (label, types)) in by_hash.iter().enumerate() {
                let next = &by_hash[(i + 1) % by_hash.len()].0;
                let Some(rdata) = nsec3_rdata(opt_out, next, types) else {
                    continue;
                };
                let Ok(owner) = origin.prepend_label(label) else {
                    continue;
                };
                chain.push(Record {
                    owner,
                    rtype: RType::NSEC3,
                    class: Class::IN,
                    ttl: neg_ttl,
                    rdata: Rdata::from_wire(&rdata),
                });
            }
        }
    }

    // What is to be signed: authoritative RRsets and the chain's.
    let chain_sets: Vec<Set> = chain
        .iter()
        .map(|r| Set {
            owner: r.owner.clone(),
            ttl: r.ttl,
            rdatas: vec![r.rdata.clone()],
        })
        .collect();
    let chain_type = if nsec3.is_some() {
        RType::NSEC3
    } else {
        RType::NSEC
    };
    let mut to_sign: Vec<(&Set, RType)> = Vec::new();
    for o in &auth {
        for (t, set) in &o.sets.0 {
            if o.delegation && *t != RType::DS {
                continue;
            }
            to_sign.push((set, *t));
        }
    }
    for s in &chain_sets {
        to_sign.push((s, chain_type));
    }

    // Stored signatures by (owner, covered type); stored signer records as
    // a set, to keep what is unchanged.
    let mut sigs_at: HashMap<(Name, RType), Vec<&Record>> = HashMap::new();
    let mut stored_chain: HashSet<(Name, RType, &Rdata, u32)> = HashSet::new();
    for r in &signer_stored {
        if r.rtype == RType::RRSIG {
            if let Some(t) = r.rdata.rrsig_type_covered() {
                sigs_at.entry((r.owner.clone(), t)).or_default().push(r);
            }
        } else {
            stored_chain.insert((r.owner.clone(), r.rtype, &r.rdata, r.ttl));
        }
    }
    // A generated RRset that differs from the stored one is dirty.
    let mut generated_changed: HashSet<(Name, RType)> = HashSet::new();
    for r in generated.iter().chain(&chain) {
        if !stored_chain.contains(&(r.owner.clone(), r.rtype, &r.rdata, r.ttl)) {
            generated_changed.insert((r.owner.clone(), r.rtype));
        }
    }
    let generated_now: HashSet<(Name, RType, &Rdata, u32)> = generated
        .iter()
        .chain(&chain)
        .map(|r| (r.owner.clone(), r.rtype, &r.rdata, r.ttl))
        .collect();
    for r in &signer_stored {
        if r.rtype != RType::RRSIG
            && !generated_now.contains(&(r.owner.clone(), r.rtype, &r.rdata, r.ttl))
        {
            generated_changed.insert((r.owner.clone(), r.rtype));
        }
    }

    let validity = policy.signature_validity;
    let refresh = policy.signature_refresh;
    let window = (validity - refresh.min(validity)) / 4;
    let urgent = refresh / 2;
    let mut keep: Vec<&Record> = Vec::new();
    // (set, type, key, due-only) jobs: due-only ones are under the budget.
    let mut jobs: Vec<(&Set, RType, &SigningKey)> = Vec::new();
    let mut due: Vec<(u32, &Set, RType, &SigningKey)> = Vec::new();
    for (set, t) in &to_sign {
        let t = *t;
        // The key sets are signed by the keys the parent's DS names.
        let signers = if matches!(t, RType::DNSKEY | RType::CDS | RType::CDNSKEY) {
            &key_keys
        } else {
            &zone_keys
        };
        let changed = if is_signer_type(t) {
            generated_changed.contains(&(set.owner.clone(), t))
        } else {
            dirty.contains(&set.owner, t)
        };
        let existing = sigs_at.get(&(set.owner.clone(), t));
        for key in signers {
            let tag = key.pair.key_tag();
            let alg = key.pair.algorithm().number();
            let found = existing.and_then(|v| {
                v.iter().find_map(|r| {
                    let (f, _) = SigFields::parse(r.rdata.as_wire())?;
                    (f.key_tag == tag
                        && f.algorithm == alg
                        && f.signer == *origin
                        && f.labels == rrsig_labels(&set.owner)
                        && f.original_ttl == set.ttl
                        && r.ttl == set.ttl)
                        .then_some((*r, f))
                })
            });
            match found {
                Some((r, f)) if !changed => {
                    let left = f.expiration.wrapping_sub(now32) as i32;
                    let started = now32.wrapping_sub(f.inception) as i32 >= 0;
                    if left > refresh as i32 && started {
                        keep.push(r);
                    } else if left > urgent as i32 && started {
                        due.push((f.expiration, set, t, key));
                    } else {
                        jobs.push((set, t, key));
                    }
                }
                _ => jobs.push((set, t, key)),
            }
        }
    }
    due.sort_by_key(|d| d.0.wrapping_sub(now32));
    let deferred = due.len().saturating_sub(refresh_budget);
    for (i, (_, set, t, key)) in due.iter().enumerate() {
        if i < refresh_budget {
            jobs.push((set, *t, key));
        } else if let Some(v) = sigs_at.get(&(set.owner.clone(), *t)) {
            // Keep the old signature until its turn comes.
            let tag = key.pair.key_tag();
            if let Some(r) = v.iter().find(|r| {
                SigFields::parse(r.rdata.as_wire()).is_some_and(|(f, _)| f.key_tag == tag)
            }) {
                keep.push(r);
            }
        }
    }

    let inception = now32.wrapping_sub(INCEPTION_BACKDATE);
    let sign = |(set, t, key): &(&Set, RType, &SigningKey)| {
        let expiration = now32
            .wrapping_add(validity)
            .wrapping_sub(jitter(&set.owner, *t, window));
        let rdatas: Vec<&Rdata> = set.rdatas.iter().collect();
        sign_rrset(
            &key.pair,
            origin,
            &set.owner,
            *t,
            set.ttl,
            &rdatas,
            (inception, expiration),
        )
        .map(|rdata| Record {
            owner: set.owner.clone(),
            rtype: RType::RRSIG,
            class: Class::IN,
            ttl: set.ttl,
            rdata,
        })
        .map_err(|source| SignError::Key {
            owner: set.owner.to_string(),
            rtype: *t,
            source,
        })
    };
    // An UPDATE's few signatures are made here: waking the pool's threads
    // costs more than they do.
    let made: Vec<Record> = if jobs.len() < PARALLEL_FROM {
        jobs.iter().map(sign).collect::<Result<_, _>>()?
    } else {
        jobs.par_iter().map(sign).collect::<Result<_, _>>()?
    };

    // The difference from what is stored.
    let kept: HashSet<*const Record> = keep.iter().map(|r| *r as *const Record).collect();
    let mut change = SignedChange {
        signatures: made.len(),
        deferred,
        ..SignedChange::default()
    };
    for r in &signer_stored {
        let stays = if r.rtype == RType::RRSIG {
            kept.contains(&(*r as *const Record))
        } else {
            generated_now.contains(&(r.owner.clone(), r.rtype, &r.rdata, r.ttl))
        };
        if !stays {
            change.delete.push((*r).clone());
        }
    }
    for r in generated.iter().chain(&chain) {
        if !stored_chain.contains(&(r.owner.clone(), r.rtype, &r.rdata, r.ttl)) {
            change.add.push(r.clone());
        }
    }
    change.add.extend(made);
    Ok(change)
}

/// [`resign`] over part of a zone: `stored` holds every record (data and
/// signer records) at some of its names — the owners of the `dirty`
/// RRsets, the apex, their neighbours in the NSEC chain and every ancestor
/// of these — and `chain_owners` names those whose NSEC is known to follow
/// from that part (the zone's real next name is in it). Only their NSEC
/// records (and the RRSIGs over them) change; other RRSIGs of the part are
/// kept or made as [`resign`] does, with no refresh of signatures merely due
/// (the signer's refresh pass makes those). An NSEC3 zone's chain (ordered
/// by hash) is left out here (`chain_owners` empty): its caller splices it.
///
/// Errors: those of [`resign`].
pub fn resign_around(
    origin: &Name,
    stored: &[&Record],
    dirty: &Dirty,
    chain_owners: &HashSet<Name>,
    keys: &[SigningKey],
    policy: &Policy,
    now: u64,
) -> Result<SignedChange, SignError> {
    let mut change = resign(origin, stored, dirty, keys, policy, now, 0)?;
    let of_chain = |r: &Record| {
        let t = if r.rtype == RType::RRSIG {
            r.rdata.rrsig_type_covered()
        } else {
            Some(r.rtype)
        };
        matches!(t, Some(RType::NSEC | RType::NSEC3))
    };
    let applies = |r: &Record| !of_chain(r) || chain_owners.contains(&r.owner);
    change.add.retain(applies);
    change.delete.retain(applies);
    change.signatures = change
        .add
        .iter()
        .filter(|r| r.rtype == RType::RRSIG)
        .count();
    change.deferred = 0;
    Ok(change)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signer::keys::Algorithm;
    use crate::signer::rrsig::verify_rrset;

    fn zone(text: &str) -> (Name, Vec<Record>) {
        let origin: Name = "example.org.".parse().expect("origin");
        let recs = crate::zonefile::parse_master_text(
            &format!("$TTL 300\n{text}"),
            std::path::Path::new("t"),
            &origin,
        )
        .expect("parses")
        .into_iter()
        .map(|s| s.record)
        .collect();
        (origin, recs)
    }

    const ZONE: &str = "@ SOA ns hm 1 3600 600 86400 60\n@ NS ns\nns A 192.0.2.1\n\
        www A 192.0.2.2\na.b.c TXT x\nsub NS ns.sub\nns.sub A 192.0.2.3\n\
        sec NS ns.other.\nsec DS 1 13 2 0000000000000000000000000000000000000000000000000000000000000000\n";

    fn csk() -> Vec<SigningKey> {
        let pair = Arc::new(KeyPair::generate(Algorithm::EcdsaP256Sha256, 257).expect("key"));
        vec![SigningKey {
            pair,
            published: true,
            signs_keys: true,
            signs_zone: true,
            cds: true,
        }]
    }

    fn all(recs: &[Record]) -> Vec<&Record> {
        recs.iter().collect()
    }

    fn apply(stored: &mut Vec<Record>, c: &SignedChange) {
        for d in &c.delete {
            let i = stored
                .iter()
                .position(|r| r == d)
                .expect("deleted is stored");
            stored.remove(i);
        }
        stored.extend(c.add.iter().cloned());
    }

    fn owners(recs: &[Record], t: RType) -> Vec<String> {
        let mut v: Vec<String> = recs
            .iter()
            .filter(|r| r.rtype == t)
            .map(|r| r.owner.to_string())
            .collect();
        v.sort();
        v
    }

    /// ZONE signed whole with a new CSK under `denial`, at time T0.
    fn signed(denial: Denial) -> (Name, Vec<Record>, Vec<SigningKey>, Policy, SignedChange) {
        let (origin, mut recs) = zone(ZONE);
        let keys = csk();
        let p = Policy {
            denial,
            ..Policy::default()
        };
        let c = resign(&origin, &all(&recs), &Dirty::All, &keys, &p, T0, 100).expect("signs");
        apply(&mut recs, &c);
        (origin, recs, keys, p, c)
    }

    /// A pass with nothing changed.
    fn unchanged(
        origin: &Name,
        recs: &[Record],
        keys: &[SigningKey],
        p: &Policy,
        now: u64,
    ) -> SignedChange {
        resign(
            origin,
            &all(recs),
            &Dirty::Rrsets(HashSet::new()),
            keys,
            p,
            now,
            100,
        )
        .expect("again")
    }

    const T0: u64 = 1_800_000_000;

    #[test]
    fn nsec_chain_skips_glue_and_signs_only_authoritative_sets() {
        let (origin, mut recs, keys, p, c) = signed(Denial::Nsec);
        assert!(c.delete.is_empty());
        assert_eq!(
            owners(&recs, RType::NSEC),
            [
                "a.b.c.example.org.",
                "example.org.",
                "ns.example.org.",
                "sec.example.org.",
                "sub.example.org.",
                "www.example.org."
            ]
        );
        // Signed: apex SOA, NS, DNSKEY, CDS, CDNSKEY; ns A; www A; a.b.c
        // TXT; sec DS; and 6 NSEC.
        let covered: Vec<(String, RType)> = {
            let mut v: Vec<_> = recs
                .iter()
                .filter(|r| r.rtype == RType::RRSIG)
                .map(|r| {
                    (
                        r.owner.to_string(),
                        r.rdata.rrsig_type_covered().expect("t"),
                    )
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(covered.len(), 9 + 6, "{covered:?}");
        // The CDS names the CSK as its DS would (RFC 7344 §3.1), the
        // CDNSKEY is its DNSKEY.
        let apex = |t: RType| -> Vec<&[u8]> {
            recs.iter()
                .filter(|r| r.owner == origin && r.rtype == t)
                .map(|r| r.rdata.as_wire())
                .collect()
        };
        let dnskey = keys[0].pair.dnskey_rdata();
        let mut ds = keys[0].pair.key_tag().to_be_bytes().to_vec();
        ds.extend_from_slice(&[13, 2]);
        ds.extend_from_slice(&crate::signer::keys::ds_sha256(origin.as_wire(), &dnskey));
        assert_eq!(keys[0].pair.ds_rdata(origin.as_wire()), ds);
        assert_eq!(apex(RType::CDS), [ds.as_slice()]);
        assert_eq!(apex(RType::CDNSKEY), [dnskey.as_slice()]);
        assert!(!covered.iter().any(|(o, _)| o == "ns.sub.example.org."));
        assert!(!covered.contains(&("sub.example.org.".into(), RType::NS)));
        assert!(covered.contains(&("sec.example.org.".into(), RType::DS)));
        // Every signature verifies.
        let dnskey = keys[0].pair.dnskey_rdata();
        for sig in recs.iter().filter(|r| r.rtype == RType::RRSIG) {
            let t = sig.rdata.rrsig_type_covered().expect("t");
            let set: Vec<&Rdata> = recs
                .iter()
                .filter(|r| r.owner == sig.owner && r.rtype == t)
                .map(|r| &r.rdata)
                .collect();
            assert!(
                verify_rrset(sig.rdata.as_wire(), &dnskey, &sig.owner, &set),
                "{} {t}",
                sig.owner
            );
        }
        // A second pass changes nothing.
        let again = unchanged(&origin, &recs, &keys, &p, T0 + 100);
        assert!(again.is_empty(), "{again:?}");
        // A new name: its NSEC, the previous name's NSEC and their RRSIGs change.
        let (_, extra) = zone("x A 192.0.2.9\n");
        recs.extend(extra.iter().cloned());
        let c = resign(
            &origin,
            &all(&recs),
            &Dirty::of(&extra),
            &keys,
            &p,
            1_800_000_200,
            100,
        )
        .expect("x");
        assert_eq!(owners(&c.delete, RType::NSEC), ["www.example.org."]);
        assert_eq!(
            owners(&c.add, RType::NSEC),
            ["www.example.org.", "x.example.org."]
        );
        assert_eq!(c.signatures, 3, "x A, x NSEC, www NSEC");
    }

    #[test]
    fn nsec3_opt_out_leaves_insecure_delegations_out() {
        let (origin, recs, keys, p, _) = signed(Denial::Nsec3 { opt_out: true });
        let params = Nsec3Params {
            algorithm: 1,
            iterations: 0,
            salt: vec![],
        };
        let hashed: HashSet<String> = recs
            .iter()
            .filter(|r| r.rtype == RType::NSEC3)
            .map(|r| r.owner.to_string())
            .collect();
        let h = |n: &str| {
            let name: Name = n.parse().expect("name");
            format!(
                "{}.example.org.",
                String::from_utf8(params.hash(&name)).expect("ascii")
            )
        };
        // apex, ns, www, a.b.c and its ENTs b.c and c, sec (secure): 7; not sub.
        assert_eq!(hashed.len(), 7, "{hashed:?}");
        for n in [
            "example.org.",
            "c.example.org.",
            "b.c.example.org.",
            "sec.example.org.",
        ] {
            assert!(hashed.contains(&h(n)), "{n}");
        }
        assert!(!hashed.contains(&h("sub.example.org.")));
        assert!(recs.iter().any(|r| r.rtype == RType::NSEC3PARAM));
        let again = unchanged(&origin, &recs, &keys, &p, T0 + 100);
        assert!(again.is_empty(), "{again:?}");
    }

    #[test]
    fn refresh_is_bounded_by_the_budget() {
        let (origin, recs, keys, p, _) = signed(Denial::Nsec);
        let t0 = T0;
        let total = recs.iter().filter(|r| r.rtype == RType::RRSIG).count();
        // Past the refresh point but not yet urgent: 5 per pass.
        let later = t0 + u64::from(p.signature_validity - p.signature_refresh) + 3600;
        let c = resign(
            &origin,
            &all(&recs),
            &Dirty::Rrsets(HashSet::new()),
            &keys,
            &p,
            later,
            5,
        )
        .expect("refresh");
        assert_eq!((c.signatures, c.deferred), (5, total - 5));
        assert_eq!(c.delete.len(), 5);
    }
}
