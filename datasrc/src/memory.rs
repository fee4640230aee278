//! The in-memory backend: zones parsed once into immutable snapshots.
//!
//! A zone is a hash map from owner name (case-insensitive) to its [`Node`] plus
//! the owner names in DNSSEC canonical order (RFC 4034 §6.1), so exact match,
//! the empty-non-terminal test and (later) the previous name for NSEC proofs are
//! a hash probe or a binary search, never a scan. A source holds a table of
//! zone snapshots behind `ArcSwap`: a reload builds a new snapshot off the query
//! path and swaps it in atomically while queries keep reading the old one.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;

use crate::finder::{self, Node, NodeStore};
use crate::name::Name;
use crate::rr::{RRset, RType, Record};
use crate::source::{DataSource, DataSourceError, Lookup, LookupOptions, ZoneRef};
use crate::zonefile::{self, SourcedRecord, ZoneFileError};

/// One zone's content, immutable once built.
#[derive(Debug)]
pub struct MemoryZone {
    origin: Name,
    nodes: HashMap<Name, Node>,
    /// Owner names in canonical order.
    ordered: Vec<Name>,
    /// NSEC3 RRsets: kept out of the name tree, since their owners are not
    /// names of the zone (RFC 5155 §7.2.9), as BIND 10 and the sqlite3 backend
    /// (the separate `nsec3` table) keep them.
    nsec3: Vec<RRset>,
    serial: u32,
    rrset_count: usize,
}

impl MemoryZone {
    /// Builds a zone from records already checked with [`zonefile::check_zone`].
    /// RRSIGs are attached to the RRset they cover (RFC 4034 §3.1.1).
    pub fn from_records<'a>(
        origin: Name,
        records: impl IntoIterator<Item = &'a Record>,
    ) -> MemoryZone {
        let mut sets: BTreeMap<(Name, RType), RRset> = BTreeMap::new();
        let mut sigs: Vec<&Record> = Vec::new();
        for r in records {
            if r.rtype == RType::RRSIG {
                sigs.push(r);
                continue;
            }
            sets.entry((r.owner.clone(), r.rtype))
                .or_insert_with(|| RRset::new(r.owner.clone(), r.rtype, r.class, r.ttl))
                .push(r.ttl, r.rdata.clone());
        }
        for s in sigs {
            if let Some(covered) = s.rdata.rrsig_type_covered()
                && let Some(set) = sets.get_mut(&(s.owner.clone(), covered))
            {
                set.push_sig(s.ttl, s.rdata.clone());
            }
        }
        Self::from_rrsets(origin, sets.into_values())
    }

    /// Builds a zone from whole RRsets (as [`DataSource::zone_rrsets`] returns them).
    pub fn from_rrsets(origin: Name, rrsets: impl IntoIterator<Item = RRset>) -> MemoryZone {
        let mut nodes: HashMap<Name, Node> = HashMap::new();
        let mut nsec3 = Vec::new();
        let mut rrset_count = 0;
        for set in rrsets {
            rrset_count += 1;
            if set.rtype == RType::NSEC3 {
                nsec3.push(set);
                continue;
            }
            nodes
                .entry(set.owner.clone())
                .or_default()
                .rrsets
                .push(Arc::new(set));
        }
        let mut ordered: Vec<Name> = nodes.keys().cloned().collect();
        ordered.sort();
        let serial = nodes
            .get(&origin)
            .and_then(|n| n.get(RType::SOA))
            .and_then(|s| s.rdatas.first())
            .and_then(|r| r.soa_serial())
            .unwrap_or(0);
        MemoryZone {
            origin,
            nodes,
            ordered,
            nsec3,
            serial,
            rrset_count,
        }
    }

    /// Reads, checks and builds a zone from a master file.
    ///
    /// Errors: syntax and zone-content errors with file and line.
    pub fn from_master_file(origin: &Name, path: &Path) -> Result<MemoryZone, ZoneFileError> {
        let records = zonefile::read_master_file(path, origin)?;
        zonefile::check_zone(origin, &records)?;
        Ok(Self::from_records(
            origin.clone(),
            records.iter().map(|r: &SourcedRecord| &r.record),
        ))
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
}

impl NodeStore for MemoryZone {
    fn node(&self, name: &Name, _dnssec: bool) -> Result<Option<Cow<'_, Node>>, DataSourceError> {
        Ok(self.nodes.get(name).map(Cow::Borrowed))
    }

    fn has_descendants(&self, name: &Name) -> Result<bool, DataSourceError> {
        // In canonical order every name below X sorts right after X.
        let next = match self.ordered.binary_search(name) {
            Ok(i) => i + 1,
            Err(i) => i,
        };
        Ok(self
            .ordered
            .get(next)
            .is_some_and(|n| n.is_subdomain_of(name)))
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

/// A data source serving zone snapshots from memory.
pub struct MemorySource {
    label: String,
    zones: ArcSwap<HashMap<Name, Arc<MemoryZone>>>,
    generation: AtomicU64,
}

impl MemorySource {
    /// An empty source; `label` names it in logs.
    pub fn new(label: &str) -> MemorySource {
        MemorySource {
            label: label.to_string(),
            zones: ArcSwap::from_pointee(HashMap::new()),
            generation: AtomicU64::new(1),
        }
    }

    /// Adds or replaces one zone, atomically: queries see the old snapshot or the
    /// new one, never a mix.
    pub fn insert_zone(&self, zone: MemoryZone) {
        let zone = Arc::new(zone);
        self.zones.rcu(|old| {
            let mut map = HashMap::clone(old);
            map.insert(zone.origin.clone(), zone.clone());
            map
        });
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Removes a zone; returns whether it was there.
    pub fn remove_zone(&self, origin: &Name) -> bool {
        let mut removed = false;
        self.zones.rcu(|old| {
            let mut map = HashMap::clone(old);
            removed = map.remove(origin).is_some();
            map
        });
        self.generation.fetch_add(1, Ordering::AcqRel);
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
        for zone in source.zones()? {
            let rrsets = source.zone_rrsets(&zone)?;
            self.insert_zone(MemoryZone::from_rrsets(zone.origin.clone(), rrsets));
            loaded.push(zone.origin);
        }
        Ok(loaded)
    }
}

impl DataSource for MemorySource {
    fn describe(&self) -> String {
        format!("memory:{}", self.label)
    }

    fn find_zone(&self, qname: &Name) -> Result<Option<ZoneRef>, DataSourceError> {
        let zones = self.zones.load();
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

    fn zone_rrsets(&self, zone: &ZoneRef) -> Result<Vec<RRset>, DataSourceError> {
        let z = self
            .zone(&zone.origin)
            .ok_or_else(|| DataSourceError::NoSuchZone(zone.origin.to_string()))?;
        Ok(z.ordered
            .iter()
            .filter_map(|n| z.nodes.get(n))
            .flat_map(|node| node.rrsets.iter().map(|s| RRset::clone(s)))
            .chain(z.nsec3.iter().cloned())
            .collect())
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}
