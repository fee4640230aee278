//! The in-memory backend: zones parsed once into immutable snapshots.
//!
//! A zone is a hash map from owner name (case-insensitive) to its [`Node`] plus
//! the owner names in DNSSEC canonical order (RFC 4034 §6.1), so exact match,
//! the empty-non-terminal test and (later) the previous name for NSEC proofs are
//! a hash probe or a binary search, never a scan. A source holds a table of
//! zone snapshots behind `ArcSwap`: a reload builds a new snapshot off the query
//! path and swaps it in atomically while queries keep reading the old one.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use rayon::prelude::*;

use crate::finder;
use crate::lookup::{DataSourceError, Lookup, LookupOptions, ZoneRef};
use crate::name::Name;
use crate::node::{NodeRef, NodeStore};
use crate::node_map::NodeMap;
use crate::rr::{RRset, RType, Rdata, Record};
use crate::source::DataSource;
use crate::zonefile::{self, SourcedRecord, ZoneFileError};

/// Maps on the query path: foldhash is several times faster than the default
/// SipHash on short keys, and keys here are zone data, not chosen by clients.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// `rdata` copied into a fresh block and the original freed. The parser's
/// blocks sit among its freed scratch blocks; copied here, one record at a
/// time, the snapshot's RDATA is packed and the parser's pages empty out and
/// go back to the system (12 MiB less RSS after loading a 300,000-delegation
/// zone, 301 -> 289 MiB).
fn compact(rdata: Rdata) -> Rdata {
    Rdata::from_wire(rdata.as_wire())
}

/// One zone's content, immutable once built.
#[derive(Debug)]
pub struct MemoryZone {
    origin: Name,
    nodes: NodeMap,
    /// Names with at least one owner name below them (the proper ancestors of
    /// every owner, down from the apex): the empty-non-terminal test in one probe.
    parents: HashSet<Name, foldhash::fast::RandomState>,
    /// Owner names in canonical order, when the zone has NSEC RRsets (the
    /// proofs need the order; nothing else on the query path does).
    ordered: Vec<Name>,
    /// NSEC3 RRsets: kept out of the name tree, since their owners are not
    /// names of the zone (RFC 5155 §7.2.9), as BIND 10 and the sqlite3 backend
    /// (the separate `nsec3` table) keep them.
    /// Sorted by the owner's first label (the hash), lower-cased.
    nsec3: Vec<(Vec<u8>, Arc<RRset>)>,
    serial: u32,
    rrset_count: usize,
    /// The zone's recent differences, oldest first, each leading to the next
    /// and the last to this version (RFC 1995 IXFR out of a zone loaded from
    /// a master file; see [`MemoryZone::with_history`]).
    history: Arc<[crate::write::Difference]>,
}

impl MemoryZone {
    /// Builds a zone from records already checked with [`zonefile::check_zone`].
    /// RRSIGs are attached to the RRset they cover (RFC 4034 §3.1.1).
    pub fn from_records<'a>(
        origin: Name,
        records: impl IntoIterator<Item = &'a Record>,
    ) -> MemoryZone {
        Self::from_owned_records(origin, records.into_iter().cloned())
    }

    /// As [`MemoryZone::from_records`], taking the records: their names move
    /// into the snapshot and each RDATA is copied once as its record is
    /// consumed (see `compact`), so a large zone is never held twice while
    /// it is built.
    ///
    /// Shape: each node's RRsets in type order, each RRset's RDATA in load
    /// order without duplicates and the smallest TTL of its records (as
    /// [`RRset::push`]); an RRSIG whose covered RRset is absent is dropped.
    pub fn from_owned_records(
        origin: Name,
        records: impl IntoIterator<Item = Record>,
    ) -> MemoryZone {
        Self::build(origin, records, 0)
    }

    /// [`MemoryZone::from_owned_records`], the node map made for `owners`
    /// owner names from the start.
    fn build(origin: Name, records: impl IntoIterator<Item = Record>, owners: usize) -> MemoryZone {
        let mut nodes = NodeMap::with_capacity(owners);
        let mut sigs: Vec<Record> = Vec::new();
        // Records of one owner mostly come together: they are grouped here and
        // the node map is probed once per group, not once per record.
        let mut run: Vec<RRset> = Vec::new();
        let flush = |nodes: &mut NodeMap, run: &mut Vec<RRset>| {
            let Some(first) = run.first() else { return };
            let node = nodes.get_or_default(&first.owner);
            for set in run.drain(..) {
                match node.rrsets.iter_mut().find(|s| s.rtype == set.rtype) {
                    // Fresh `Arc`s, not yet shared: `make_mut` never copies.
                    Some(have) => {
                        let have = Arc::make_mut(have);
                        for rdata in set.rdatas {
                            have.push(set.ttl, rdata);
                        }
                    }
                    None => {
                        // Most RRsets are complete here. Trimmed now, while
                        // the freed block is the next set's to take; trimmed
                        // at the end, the freed blocks would be scattered.
                        let mut set = set;
                        set.rdatas.shrink_to_fit();
                        node.rrsets.push(Arc::new(set));
                    }
                }
            }
        };
        for r in records {
            if r.rtype == RType::RRSIG {
                sigs.push(r);
                continue;
            }
            if run.first().is_some_and(|s| s.owner != r.owner) {
                flush(&mut nodes, &mut run);
            }
            match run.iter_mut().find(|s| s.rtype == r.rtype) {
                Some(set) => set.push(r.ttl, compact(r.rdata)),
                None => {
                    let mut set = RRset::new(r.owner, r.rtype, r.class, r.ttl);
                    set.push(r.ttl, compact(r.rdata));
                    run.push(set);
                }
            }
        }
        flush(&mut nodes, &mut run);
        for s in sigs {
            if let Some(covered) = s.rdata.rrsig_type_covered()
                && let Some(node) = nodes.get_mut(&s.owner)
                && let Some(set) = node.rrsets.iter_mut().find(|set| set.rtype == covered)
            {
                Arc::make_mut(set).push_sig(s.ttl, compact(s.rdata));
            }
        }
        let mut nsec3 = Vec::new();
        let mut rrset_count = 0;
        for node in nodes.values_mut() {
            rrset_count += node.rrsets.len();
            // Type order, as RRsets were listed before (zone transfers, ANY).
            node.rrsets.sort_by_key(|s| s.rtype);
            if let Some(i) = node.rrsets.iter().position(|s| s.rtype == RType::NSEC3) {
                nsec3.push(node.rrsets.remove(i));
            }
            node.rrsets.shrink_to_fit();
        }
        // NSEC3 owners are not names of the zone (RFC 5155 §7.2.9).
        nodes.retain(|node| !node.rrsets.is_empty());
        Self::finish(origin, nodes, nsec3, rrset_count)
    }

    /// Builds a zone from whole RRsets (as [`DataSource::zone_rrsets`] returns them).
    pub fn from_rrsets(origin: Name, rrsets: impl IntoIterator<Item = RRset>) -> MemoryZone {
        let mut nodes = NodeMap::default();
        let mut nsec3 = Vec::new();
        let mut rrset_count = 0;
        for set in rrsets {
            rrset_count += 1;
            if set.rtype == RType::NSEC3 {
                nsec3.push(Arc::new(set));
                continue;
            }
            nodes.get_or_default(&set.owner).rrsets.push(Arc::new(set));
        }
        Self::finish(origin, nodes, nsec3, rrset_count)
    }

    /// The rest of a build once the nodes are made: the canonical order, the
    /// empty non-terminals, the NSEC3 chain, the serial and the additional
    /// sections.
    fn finish(
        origin: Name,
        nodes: NodeMap,
        nsec3: Vec<Arc<RRset>>,
        rrset_count: usize,
    ) -> MemoryZone {
        // The canonical order serves NSEC proofs only: a zone without NSEC
        // (unsigned, or NSEC3 as TLDs sign) skips the sort and the second
        // copy of every owner name.
        let mut ordered: Vec<Name> = Vec::new();
        if nodes.values().any(|n| n.get(RType::NSEC).is_some()) {
            ordered = nodes.keys().cloned().collect();
            // Owner names are distinct: an unstable sort orders them the same.
            ordered.par_sort_unstable();
        }
        let mut parents = HashSet::default();
        for owner in nodes.keys() {
            let mut name = owner.clone();
            while name != origin {
                let Some(parent) = name.parent() else { break };
                if !parents.insert(parent.clone()) {
                    break;
                }
                name = parent;
            }
        }
        let mut nsec3: Vec<(Vec<u8>, Arc<RRset>)> = nsec3
            .into_iter()
            .map(|set| {
                let hash = set
                    .owner
                    .labels()
                    .next()
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                (hash, set)
            })
            .collect();
        nsec3.sort_by(|a, b| a.0.cmp(&b.0));
        let serial = nodes
            .get(&origin)
            .and_then(|n| n.get(RType::SOA))
            .and_then(|s| s.rdatas.first())
            .and_then(|r| r.soa_serial())
            .unwrap_or(0);
        let mut zone = MemoryZone {
            origin,
            nodes,
            parents,
            ordered,
            nsec3,
            serial,
            rrset_count,
            history: Arc::new([]),
        };
        zone.attach_additional();
        zone
    }

    /// Stores in each node the additional-section addresses of its NS, MX
    /// and SRV RRsets ([`Node::additional`]).
    fn attach_additional(&mut self) {
        let prepared = self.resolve_additional();
        for node in self.nodes.values_mut() {
            node.additional = node
                .rrsets
                .iter()
                .filter_map(|s| {
                    let list = prepared.get(&(Arc::as_ptr(s) as usize))?;
                    Some((s.rtype, list.clone()))
                })
                .collect();
        }
    }

    /// Resolves the additional-section addresses of every NS, MX and SRV RRset
    /// with the shared lookup algorithm, as the query processor would per query
    /// (NS targets with glue allowed). RRsets with a target answered through a
    /// wildcard are left out: the processor synthesizes those per query.
    fn resolve_additional(&self) -> FastMap<usize, Arc<[Arc<RRset>]>> {
        let sets: Vec<&Arc<RRset>> = self
            .nodes
            .values()
            .flat_map(|node| node.rrsets.iter())
            .filter(|set| matches!(set.rtype, RType::NS | RType::MX | RType::SRV))
            .collect();
        // Lookups on an immutable snapshot: the RRsets are split between
        // threads, each with its own memo of the targets it has resolved.
        type Memo = FastMap<(Name, bool), Option<Vec<Arc<RRset>>>>;
        // Most delegations of a TLD name out-of-zone servers: one empty list
        // for all of them, not a heap block each.
        let empty: Arc<[Arc<RRset>]> = Arc::from(Vec::new());
        let resolved: Vec<(usize, Arc<[Arc<RRset>]>)> = sets
            .par_iter()
            .map_init(Memo::default, |memo, set| {
                let glue_ok = set.rtype == RType::NS;
                let mut list: Vec<Arc<RRset>> = Vec::new();
                for rdata in &set.rdatas {
                    let Some(target) = rdata.additional_target(set.rtype) else {
                        continue;
                    };
                    if !target.is_subdomain_of(&self.origin) {
                        continue;
                    }
                    let found = memo
                        .entry((target.clone(), glue_ok))
                        .or_insert_with(|| self.addresses_of(&target, glue_ok));
                    // A target answered through a wildcard: left to the query.
                    let sets = found.as_ref()?;
                    for s in sets.iter() {
                        if !list.iter().any(|l| Arc::ptr_eq(l, s)) {
                            list.push(s.clone());
                        }
                    }
                }
                let list = if list.is_empty() {
                    empty.clone()
                } else {
                    Arc::from(list)
                };
                Some((Arc::as_ptr(set) as usize, list))
            })
            .flatten()
            .collect();
        resolved.into_iter().collect()
    }

    /// The A and AAAA RRsets at `target`, or `None` when a wildcard produced one.
    fn addresses_of(&self, target: &Name, glue_ok: bool) -> Option<Vec<Arc<RRset>>> {
        let opts = LookupOptions {
            glue_ok,
            ..LookupOptions::default()
        };
        let mut sets = Vec::new();
        for rtype in [RType::A, RType::AAAA] {
            let found = finder::find(self, &self.origin, target, rtype, opts).ok()?;
            if let crate::lookup::Outcome::Answer(set) = found.outcome {
                if found.wildcard {
                    return None;
                }
                sets.push(set);
            }
        }
        Some(sets)
    }

    /// Reads, checks and builds a zone from a master file.
    ///
    /// Errors: syntax and zone-content errors with file and line.
    pub fn from_master_file(origin: &Name, path: &Path) -> Result<MemoryZone, ZoneFileError> {
        let pieces = zonefile::read_master_file_pieces(path, origin)?;
        zonefile::check_pieces(origin, &pieces)?;
        Ok(Self::from_sourced_pieces(origin.clone(), pieces))
    }

    /// Builds a zone from records read with [`zonefile::read_master_file`] and
    /// checked with [`zonefile::check_zone`], taking them (see
    /// [`MemoryZone::from_owned_records`]).
    pub fn from_sourced_records(origin: Name, records: Vec<SourcedRecord>) -> MemoryZone {
        Self::from_sourced_pieces(origin, vec![records])
    }

    /// As [`MemoryZone::from_sourced_records`], the records in pieces
    /// ([`zonefile::read_master_file_pieces`]): each piece's block is freed
    /// as soon as its records are in, so the peak of a large load is the
    /// zone itself, not the zone and all its parsed records (1M delegations:
    /// peak RSS 793 -> 762 MiB, 1.18x the 644 MiB it serves with).
    pub fn from_sourced_pieces(origin: Name, pieces: Vec<Vec<SourcedRecord>>) -> MemoryZone {
        // The owner count, from the runs of equal owners (an upper bound), so
        // the node map is made at its size: growing it would hold the old
        // table and the new one (twice the size) at once, the peak of a load.
        let owners = 1 + pieces
            .iter()
            .flatten()
            .zip(pieces.iter().flatten().skip(1))
            .filter(|(a, b)| a.record.owner != b.record.owner)
            .count();
        // `flatten` drops each piece's iterator, and so its block, once used.
        let records = pieces.into_iter().flatten().map(|r| r.record);
        Self::build(origin, records, owners)
    }

    /// Copies zone `zone` of `source` (e.g. an sqlite3 DB) into a snapshot,
    /// checking what a master file must pass too: an SOA and NS RRset at the apex.
    ///
    /// Errors: storage or bad-data errors of `source`; [`DataSourceError::BadData`]
    /// when the apex has no SOA or no NS.
    pub fn from_source(
        source: &dyn DataSource,
        zone: &ZoneRef,
    ) -> Result<MemoryZone, DataSourceError> {
        let rrsets = source.zone_rrsets(zone)?;
        let built = MemoryZone::from_rrsets(
            zone.origin.clone(),
            rrsets.into_iter().map(Arc::unwrap_or_clone),
        );
        let apex = built.nodes.get(&built.origin);
        for rtype in [RType::SOA, RType::NS] {
            if apex.and_then(|n| n.get(rtype)).is_none() {
                return Err(DataSourceError::BadData {
                    zone: zone.origin.to_string(),
                    name: zone.origin.to_string(),
                    reason: format!("no {rtype} at the zone apex (in {})", source.describe()),
                });
            }
        }
        Ok(built)
    }

    /// The zone apex.
    pub fn origin(&self) -> &Name {
        &self.origin
    }

    /// The SOA serial (RFC 1035 §3.3.13).
    pub fn serial(&self) -> u32 {
        self.serial
    }

    /// Number of RRsets held (RRSIGs counted with the set they cover).
    pub fn rrset_count(&self) -> usize {
        self.rrset_count
    }

    /// Every RR of the zone, RRSIGs and NSEC3 RRs included, each RRset's RRs
    /// with its TTL (the smallest its records had) — the zone as a transfer
    /// sends it, for comparing two versions ([`crate::write::Difference::between`]).
    pub fn records(&self) -> Vec<Record> {
        let mut out = Vec::new();
        let sets = self
            .nodes
            .values()
            .flat_map(|n| n.rrsets.iter())
            .chain(self.nsec3.iter().map(|(_, s)| s));
        for set in sets {
            let rr = |rtype, ttl, rdata: &Rdata| Record {
                owner: set.owner.clone(),
                rtype,
                class: set.class,
                ttl,
                rdata: rdata.clone(),
            };
            out.extend(set.rdatas.iter().map(|r| rr(set.rtype, set.ttl, r)));
            out.extend(set.sigs.iter().map(|r| rr(RType::RRSIG, set.sig_ttl, r)));
        }
        out
    }

    /// The apex SOA RR, if the zone has one (every loaded zone does).
    pub fn soa(&self) -> Option<Record> {
        let set = self.nodes.get(&self.origin)?.get(RType::SOA)?;
        Some(Record {
            owner: set.owner.clone(),
            rtype: RType::SOA,
            class: set.class,
            ttl: set.ttl,
            rdata: set.rdatas.first()?.clone(),
        })
    }

    /// The differences that led to this version (oldest first).
    pub fn history(&self) -> &[crate::write::Difference] {
        &self.history
    }

    /// This version with `history`: the differences that led to it from
    /// earlier versions, oldest first, the last one ending at its serial.
    /// Bounded by the caller (a reload keeps a zone's last few).
    pub fn with_history(self, history: Vec<crate::write::Difference>) -> MemoryZone {
        MemoryZone {
            history: history.into(),
            ..self
        }
    }
}

impl NodeStore for MemoryZone {
    fn node(&self, name: &Name, _dnssec: bool) -> Result<Option<NodeRef<'_>>, DataSourceError> {
        Ok(self.nodes.get(name).map(NodeRef::Borrowed))
    }

    fn has_descendants(&self, name: &Name) -> Result<bool, DataSourceError> {
        Ok(self.parents.contains(name))
    }

    fn covering_nsec(&self, name: &Name) -> Result<Option<Arc<RRset>>, DataSourceError> {
        // The greatest owner <= name that has an NSEC; glue and occluded names
        // (no NSEC) are stepped over; before the apex wraps to the last owner.
        let end = match self.ordered.binary_search(name) {
            Ok(i) => i + 1,
            Err(i) => i,
        };
        let before = self.ordered[..end].iter().rev();
        let wrapped = self.ordered[end..].iter().rev();
        Ok(before.chain(wrapped).find_map(|n| {
            self.nodes
                .get(n)
                .and_then(|node| node.get(RType::NSEC))
                .cloned()
        }))
    }

    fn covering_nsec3(&self, hash: &[u8]) -> Result<Option<(Arc<RRset>, bool)>, DataSourceError> {
        let found = match self.nsec3.binary_search_by(|(h, _)| h.as_slice().cmp(hash)) {
            Ok(i) => Some((i, true)),
            Err(0) => self.nsec3.len().checked_sub(1).map(|i| (i, false)),
            Err(i) => Some((i - 1, false)),
        };
        Ok(found.map(|(i, exact)| (self.nsec3[i].1.clone(), exact)))
    }
}

/// Where a memory zone's content comes from, so it can be reloaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZoneOrigin {
    /// An RFC 1035 master file.
    MasterFile(PathBuf),
    /// A zone of another data source (e.g. an sqlite3 DB), copied in.
    Source(String),
}

/// Source of [`MemorySource`] generations: process-wide, so a source built by a
/// reload never reuses a number an earlier source handed out (a cache keyed by
/// generation cannot confuse the two).
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

fn next_generation() -> u64 {
    NEXT_GENERATION.fetch_add(1, Ordering::Relaxed)
}

/// A data source serving zone snapshots from memory.
pub struct MemorySource {
    label: String,
    zones: ArcSwap<FastMap<Name, Arc<MemoryZone>>>,
    generation: AtomicU64,
    /// The write side of a source whose zones were copied from a DB
    /// ([`MemorySource::backed_by`]); `None` for master files.
    writer: Option<Arc<dyn crate::write::ZoneWriter>>,
}

impl MemorySource {
    /// An empty source; `label` names it in logs.
    pub fn new(label: &str) -> MemorySource {
        Self::with_zones(label, Vec::new())
    }

    /// A source holding `zones` (snapshots may be shared with other sources, e.g.
    /// the previous configuration's, without copying). A later zone with the same
    /// origin replaces an earlier one.
    pub fn with_zones(
        label: &str,
        zones: impl IntoIterator<Item = Arc<MemoryZone>>,
    ) -> MemorySource {
        let table: FastMap<Name, Arc<MemoryZone>> =
            zones.into_iter().map(|z| (z.origin.clone(), z)).collect();
        MemorySource {
            label: label.to_string(),
            zones: ArcSwap::from_pointee(table),
            generation: AtomicU64::new(next_generation()),
            writer: None,
        }
    }

    /// A source holding `zones` whose write side is made by `writer` from a
    /// weak reference to the source itself (the writer swaps rebuilt zones
    /// in; weak, so that a replaced source is dropped). For
    /// [`MemorySource::backed_by`], which keeps the storage out of this file.
    pub fn with_writer(
        label: &str,
        zones: impl IntoIterator<Item = Arc<MemoryZone>>,
        writer: impl FnOnce(std::sync::Weak<MemorySource>) -> Arc<dyn crate::write::ZoneWriter>,
    ) -> Arc<MemorySource> {
        let table: FastMap<Name, Arc<MemoryZone>> =
            zones.into_iter().map(|z| (z.origin.clone(), z)).collect();
        Arc::new_cyclic(|me| MemorySource {
            label: label.to_string(),
            zones: ArcSwap::from_pointee(table),
            generation: AtomicU64::new(next_generation()),
            writer: Some(writer(me.clone())),
        })
    }

    /// Adds or replaces one zone, atomically: each lookup sees the old snapshot
    /// or the new one, never a mix. (A query makes several lookups; to swap
    /// zones under whole queries, build a new source and swap the query
    /// processor, as authd's reload does.)
    pub fn insert_zone(&self, zone: MemoryZone) {
        self.insert_zone_arc(Arc::new(zone));
    }

    /// As [`MemorySource::insert_zone`], for a shared snapshot.
    pub fn insert_zone_arc(&self, zone: Arc<MemoryZone>) {
        self.zones.rcu(|old| {
            let mut map = FastMap::clone(old);
            map.insert(zone.origin.clone(), zone.clone());
            map
        });
        self.generation.store(next_generation(), Ordering::Release);
    }

    /// Removes a zone; returns whether it was there.
    pub fn remove_zone(&self, origin: &Name) -> bool {
        let mut removed = false;
        self.zones.rcu(|old| {
            let mut map = FastMap::clone(old);
            removed = map.remove(origin).is_some();
            map
        });
        self.generation.store(next_generation(), Ordering::Release);
        removed
    }

    /// The current snapshot of a zone.
    pub fn zone(&self, origin: &Name) -> Option<Arc<MemoryZone>> {
        self.zones.load().get(origin).cloned()
    }

    /// Copies every zone of `source` into memory (BIND 10's sqlite3-to-memory
    /// `filetype`). Zones failing the checks are reported, not loaded.
    ///
    /// Errors: storage errors of `source`.
    pub fn load_from_source(&self, source: &dyn DataSource) -> Result<Vec<Name>, DataSourceError> {
        let mut loaded = Vec::new();
        let mut built = Vec::new();
        for zone in source.zones()? {
            let rrsets = source.zone_rrsets(&zone)?;
            built.push(Arc::new(MemoryZone::from_rrsets(
                zone.origin.clone(),
                rrsets.into_iter().map(Arc::unwrap_or_clone),
            )));
            loaded.push(zone.origin);
        }
        // One swap for all of them (not one table copy per zone).
        self.zones.rcu(|old| {
            let mut map = FastMap::clone(old);
            for z in &built {
                map.insert(z.origin.clone(), Arc::clone(z));
            }
            map
        });
        self.generation.store(next_generation(), Ordering::Release);
        Ok(loaded)
    }
}

impl DataSource for MemorySource {
    fn describe(&self) -> String {
        format!("memory:{}", self.label)
    }

    fn find_zone(&self, qname: &Name) -> Result<Option<ZoneRef>, DataSourceError> {
        let zones = self.zones.load();
        // A few zones: compare suffixes, no allocation; many: probe per label.
        if zones.len() <= 16 {
            return Ok(zones
                .values()
                .filter(|z| qname.is_subdomain_of(&z.origin))
                .max_by_key(|z| z.origin.label_count())
                .map(|z| ZoneRef {
                    origin: z.origin.clone(),
                    id: 0,
                }));
        }
        for strip in 0..=qname.label_count() {
            let Some(candidate) = qname.strip_left(strip) else {
                break;
            };
            if let Some(z) = zones.get(&candidate) {
                return Ok(Some(ZoneRef {
                    origin: z.origin.clone(),
                    id: 0,
                }));
            }
        }
        Ok(None)
    }

    fn lookup(
        &self,
        zone: &ZoneRef,
        qname: &Name,
        qtype: RType,
        opts: LookupOptions,
    ) -> Result<Lookup, DataSourceError> {
        let z = self
            .zone(&zone.origin)
            .ok_or_else(|| DataSourceError::NoSuchZone(zone.origin.to_string()))?;
        finder::find(z.as_ref(), &z.origin, qname, qtype, opts)
    }

    fn zones(&self) -> Result<Vec<ZoneRef>, DataSourceError> {
        let mut out: Vec<ZoneRef> = self
            .zones
            .load()
            .values()
            .map(|z| ZoneRef {
                origin: z.origin.clone(),
                id: 0,
            })
            .collect();
        out.sort_by(|a, b| a.origin.cmp(&b.origin));
        Ok(out)
    }

    fn zone_rrsets(&self, zone: &ZoneRef) -> Result<Vec<Arc<RRset>>, DataSourceError> {
        let z = self
            .zone(&zone.origin)
            .ok_or_else(|| DataSourceError::NoSuchZone(zone.origin.to_string()))?;
        let order: Vec<&Name> = if z.ordered.is_empty() {
            let mut sorted: Vec<&Name> = z.nodes.keys().collect();
            sorted.par_sort_unstable();
            sorted
        } else {
            z.ordered.iter().collect()
        };
        Ok(order
            .into_iter()
            .filter_map(|n| z.nodes.get(n))
            .flat_map(|node| node.rrsets.iter().map(Arc::clone))
            .chain(z.nsec3.iter().map(|(_, s)| Arc::clone(s)))
            .collect())
    }

    fn with_query_scope(
        &self,
        _f: &mut dyn FnMut(&dyn DataSource) -> Result<(), DataSourceError>,
    ) -> Option<Result<(), DataSourceError>> {
        // Snapshots need no per-query state: lookups go to the source itself.
        None
    }

    fn begin_batch(&self) {
        // Each lookup loads the current snapshot; nothing to hold per batch.
    }

    fn end_batch(&self) {}

    fn immutable_rrsets(&self) -> bool {
        true
    }

    fn additional_addresses(
        &self,
        zone: &ZoneRef,
        rrset: &Arc<RRset>,
    ) -> Result<Option<Arc<[Arc<RRset>]>>, DataSourceError> {
        let Some(z) = self.zone(&zone.origin) else {
            return Ok(None);
        };
        // Only for this snapshot's own RRset (a caller may hold an RRset of
        // the snapshot a reload replaced).
        let Some(node) = z.nodes.get(&rrset.owner) else {
            return Ok(None);
        };
        if !node.get(rrset.rtype).is_some_and(|s| Arc::ptr_eq(s, rrset)) {
            return Ok(None);
        }
        let Some((_, list)) = node.additional.iter().find(|(t, _)| *t == rrset.rtype) else {
            return Ok(None);
        };
        if list.is_empty() {
            // Most delegations of a TLD (out-of-zone name servers): the
            // length is in the fat pointer, so the list's cold block is not
            // touched; this thread's own empty list is (no line shared
            // between workers).
            thread_local! {
                static EMPTY: crate::node::Additional = Arc::from(Vec::new());
            }
            return Ok(Some(EMPTY.with(Arc::clone)));
        }
        Ok(Some(list.clone()))
    }

    fn with_node_store(
        &self,
        zone: &ZoneRef,
        f: &mut dyn FnMut(&dyn NodeStore) -> Result<Lookup, DataSourceError>,
    ) -> Option<Result<Lookup, DataSourceError>> {
        let z = self.zone(&zone.origin)?;
        Some(f(z.as_ref()))
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
    fn cache_stats(&self) -> Option<crate::source::CacheStats> {
        // Snapshots are the data, not a cache of it.
        None
    }

    fn flush_cache(&self) {
        // Nothing cached: the snapshots are the data.
    }

    fn writer(&self) -> Option<Arc<dyn crate::write::ZoneWriter>> {
        // Zones from master files are replaced whole on reload only; zones
        // copied from a DB are written there and rebuilt.
        self.writer.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lookup::Outcome;

    const ZONE: &str = "\
$ORIGIN example.
$TTL 3600
@ SOA ns.example. admin.example. 1 3600 900 604800 300
@ NS ns.example.
ns A 192.0.2.53
sub NS ns1.sub.example.
sub NS ns.other.
ns1.sub A 192.0.2.1
ns1.sub AAAA 2001:db8::1
away NS ns.other.
";

    /// A delegation's glue is prepared in its node at build time and handed
    /// out for the snapshot's own NS RRset only: an equal copy (an RRset of
    /// another snapshot) gets `None`, so the caller looks the targets up.
    #[test]
    fn glue_is_prepared_for_the_snapshots_own_rrset() {
        let origin: Name = "example.".parse().expect("name");
        let records =
            zonefile::parse_master_text(ZONE, Path::new("example.zone"), &origin).expect("parses");
        let zone = MemoryZone::from_records(origin.clone(), records.iter().map(|r| &r.record));
        let source = MemorySource::with_zones("test", [Arc::new(zone)]);
        let zref = source
            .find_zone(&"www.sub.example.".parse().expect("name"))
            .expect("no error")
            .expect("zone");
        let found = source
            .lookup(
                &zref,
                &"www.sub.example.".parse().expect("name"),
                RType::A,
                LookupOptions::default(),
            )
            .expect("lookup");
        let Outcome::Delegation(ns) = found.outcome else {
            panic!("not a referral: {:?}", found.outcome);
        };
        let glue = source
            .additional_addresses(&zref, &ns)
            .expect("no error")
            .expect("prepared");
        let got: Vec<String> = glue
            .iter()
            .map(|s| format!("{} {}", s.owner, s.rtype))
            .collect();
        assert_eq!(got, ["ns1.sub.example. A", "ns1.sub.example. AAAA"]);
        let copy = Arc::new(RRset::clone(&ns));
        assert_eq!(
            source.additional_addresses(&zref, &copy).expect("no error"),
            None
        );
        // Out-of-zone name servers only: prepared, and empty.
        let away = source
            .lookup(
                &zref,
                &"away.example.".parse().expect("name"),
                RType::A,
                LookupOptions::default(),
            )
            .expect("lookup");
        let Outcome::Delegation(ns) = away.outcome else {
            panic!("not a referral: {:?}", away.outcome);
        };
        let glue = source.additional_addresses(&zref, &ns).expect("no error");
        assert_eq!(glue.as_deref().map(<[_]>::len), Some(0));
    }
}
