//! The `DataSource` seam: what every backend answers, and in what shape.
//!
//! Lookups are synchronous (an in-memory lookup is far cheaper than a boxed
//! future). A DNS outcome (NXDOMAIN, NODATA, a referral, …) is never an `Err`:
//! `Err` means the source itself failed and becomes SERVFAIL.

use std::collections::HashSet;
use std::sync::Arc;

use crate::lookup::{DataSourceError, Lookup, LookupOptions, ZoneRef};
use crate::name::Name;
use crate::node::NodeStore;
use crate::rr::{RRset, RType};
use crate::write::ZoneWriter;

/// A backend that holds zones and answers lookups in them.
///
/// Implementations must be cheap to share across worker threads (`Send + Sync`).
///
/// No method has a default: a wrapper (the hot-spot cache, a query scope)
/// must say for each capability whether it passes it through, answers it
/// itself or declines it, so none is lost by omission. (A zone filter that
/// forgot `with_node_store`, `immutable_rrsets` and `additional_addresses`
/// once halved the throughput of a restricted DB; restriction now lives in
/// [`SourceList`], not in a wrapper.)
pub trait DataSource: Send + Sync {
    /// A short label for logs (`sqlite3:/path/zone.sqlite3`).
    fn describe(&self) -> String;

    /// The zone whose apex is the longest match for `qname` (RFC 1034 §4.3.2
    /// step 2), or `None` if no zone held here contains it.
    ///
    /// Errors: storage failure.
    fn find_zone(&self, qname: &Name) -> Result<Option<ZoneRef>, DataSourceError>;

    /// Looks up (`qname`, `qtype`) in `zone`; `qname` must be at or below the apex.
    ///
    /// Errors: storage failure or invalid stored data.
    fn lookup(
        &self,
        zone: &ZoneRef,
        qname: &Name,
        qtype: RType,
        opts: LookupOptions,
    ) -> Result<Lookup, DataSourceError>;

    /// Runs `f` over a view of this source for the lookups of one query, which
    /// may share what they read (sqlite3 reads and parses each node once per
    /// query instead of once per lookup). `None` when the source has no such
    /// view; callers then run `f` over the source itself.
    ///
    /// Errors: failing to set the view up, or whatever `f` returns.
    fn with_query_scope(
        &self,
        f: &mut dyn FnMut(&dyn DataSource) -> Result<(), DataSourceError>,
    ) -> Option<Result<(), DataSourceError>>;

    /// Marks the start of a batch of queries that this thread answers back to
    /// back (a UDP worker's `recvmmsg` batch), until [`DataSource::end_batch`]
    /// on the same thread. The source may serve the whole batch from one read
    /// snapshot: sqlite3 then pays its per-transaction file locking and change
    /// checks once per batch instead of once per query. Calls nest.
    fn begin_batch(&self);

    /// Ends the batch begun by [`DataSource::begin_batch`] on this thread;
    /// later queries see changes committed since.
    fn end_batch(&self);

    /// Every zone held, in apex order.
    ///
    /// Errors: storage failure.
    fn zones(&self) -> Result<Vec<ZoneRef>, DataSourceError>;

    /// The whole content of a zone as RRsets (RRSIGs attached to the sets they
    /// cover), for loading into memory and for zone transfers.
    ///
    /// Errors: storage failure or invalid stored data.
    ///
    /// Shared: a memory zone hands out its own RRsets (a transfer of a large
    /// zone holds pointers, not a copy of the zone, for as long as it runs).
    fn zone_rrsets(&self, zone: &ZoneRef) -> Result<Vec<Arc<RRset>>, DataSourceError>;

    /// A number that changes whenever data visible through this source may have
    /// changed; caches key their entries by it. Sources that never change return 0.
    fn generation(&self) -> u64;

    /// True when every RRset this source hands out belongs to an immutable
    /// snapshot, so the RRset's address identifies its content for as long as
    /// anyone holds it (the memory backend). The query processor then reuses
    /// rendered replies keyed by those addresses.
    fn immutable_rrsets(&self) -> bool;

    /// The address RRsets (A, AAAA, RRSIGs attached; each once) for additional-section
    /// processing of `rrset` (NS, MX or SRV, RFC 1034 §3.7), when the source
    /// has them ready: for NS the targets' addresses found below zone cuts too
    /// (glue), for MX and SRV only authoritative ones; in-zone targets only.
    /// `None`: not prepared; the caller looks each target up instead.
    ///
    /// Errors: storage failure.
    fn additional_addresses(
        &self,
        zone: &ZoneRef,
        rrset: &Arc<RRset>,
    ) -> Result<Option<Arc<[Arc<RRset>]>>, DataSourceError>;

    /// Runs `f` over the node-level view of `zone` (the storage primitives the
    /// shared lookup algorithm walks), for wrappers such as the hot-spot cache
    /// that run [`crate::finder::find`] themselves and cache what repeats: zone
    /// cuts, closest enclosers, the apex. `None` when the source offers no such
    /// view; callers then use [`DataSource::lookup`].
    ///
    /// Errors: storage failure, or whatever `f` returns.
    fn with_node_store(
        &self,
        zone: &ZoneRef,
        f: &mut dyn FnMut(&dyn NodeStore) -> Result<Lookup, DataSourceError>,
    ) -> Option<Result<Lookup, DataSourceError>>;

    /// The counters of a caching source (for metrics); `None` for a source
    /// that caches nothing.
    fn cache_stats(&self) -> Option<CacheStats>;

    /// Empties every cache in this source (and in the sources it wraps), as
    /// an operator asks (`authc flush-cache`); the data served is unchanged.
    fn flush_cache(&self);

    /// The write side of this source ([`crate::write`]): UPDATE, incoming
    /// transfers, the secondary timers, `zone` and `loadzone` change zones
    /// through it; IXFR out reads its journal and NOTIFY out its serials. A
    /// commit through it is visible to this source's next lookup.
    /// `None`: the source takes no writes (memory zones from master files).
    fn writer(&self) -> Option<Arc<dyn ZoneWriter>>;
}

/// Counters of a caching source (the hot-spot cache), since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Probes answered from the cache.
    pub hits: u64,
    /// Probes that went to the wrapped source.
    pub misses: u64,
    /// Entries evicted to respect the slot count.
    pub evictions: u64,
    /// Misses not stored: the slots were full and the admission filter had
    /// seen the key no more often than the entry it would have evicted.
    pub rejections: u64,
    /// Times the cache was emptied because the source changed.
    pub flushes: u64,
    /// Entries held now.
    pub entries: u64,
}

impl CacheStats {
    /// hits / (hits + misses), 0 when nothing was probed.
    pub fn hit_rate(&self) -> f64 {
        let total = self.hits + self.misses;
        if total == 0 {
            0.0
        } else {
            self.hits as f64 / total as f64
        }
    }
}

/// A zone found by [`SourceList::find_zone`] and the source holding it.
pub type ZoneMatch<'a> = (&'a Arc<dyn DataSource>, ZoneRef);

/// A source of a [`SourceList`] and the zones served from it (or why they
/// could not be listed); see [`SourceList::zones`].
pub type ServedZones<'a> = (
    &'a Arc<dyn DataSource>,
    Result<Vec<ZoneRef>, DataSourceError>,
);

/// Which of a source's zones a [`SourceList`] serves from it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ZoneSelection {
    /// Every zone the source holds, including zones added to it later.
    #[default]
    All,
    /// Only these zones (`zones = [...]` of a `[[datasource]]`).
    Only(HashSet<Name>),
    /// Every zone but these (zones another source of the list serves).
    Except(HashSet<Name>),
}

impl ZoneSelection {
    /// True when the zone with apex `origin` is served from the source.
    pub fn allows(&self, origin: &Name) -> bool {
        match self {
            ZoneSelection::All => true,
            ZoneSelection::Only(zones) => zones.contains(origin),
            ZoneSelection::Except(zones) => !zones.contains(origin),
        }
    }
}

/// One source of a [`SourceList`] and the zones it serves there.
#[derive(Clone)]
struct Entry {
    source: Arc<dyn DataSource>,
    selection: ZoneSelection,
}

/// An ordered list of data sources; the zone for a qname is the longest match
/// across all of them, the earlier source winning a tie (BIND 10's
/// `ConfigurableClientList::find`). Each source may be restricted to some of
/// its zones ([`ZoneSelection`]); the restriction is applied here, around the
/// source, so the source keeps every capability it has.
#[derive(Clone, Default)]
pub struct SourceList {
    entries: Vec<Entry>,
    /// The sources of `entries`, in order (handed out by [`SourceList::sources`]).
    sources: Vec<Arc<dyn DataSource>>,
}

impl SourceList {
    /// A list of `sources` in priority order, each serving all of its zones.
    pub fn new(sources: Vec<Arc<dyn DataSource>>) -> SourceList {
        SourceList::with_selections(
            sources
                .into_iter()
                .map(|s| (s, ZoneSelection::All))
                .collect(),
        )
    }

    /// A list of sources in priority order, each serving the zones its
    /// [`ZoneSelection`] allows.
    pub fn with_selections(sources: Vec<(Arc<dyn DataSource>, ZoneSelection)>) -> SourceList {
        let entries: Vec<Entry> = sources
            .into_iter()
            .map(|(source, selection)| Entry { source, selection })
            .collect();
        let sources = entries.iter().map(|e| Arc::clone(&e.source)).collect();
        SourceList { entries, sources }
    }

    /// The sources, in priority order (unrestricted: use
    /// [`SourceList::zones`] for what each one serves).
    pub fn sources(&self) -> &[Arc<dyn DataSource>] {
        &self.sources
    }

    /// The zones served from each source, in priority order: the source's
    /// zones that its [`ZoneSelection`] allows.
    ///
    /// A source whose zones cannot be listed (storage failure) has its error
    /// in place of its list.
    pub fn zones(&self) -> Vec<ServedZones<'_>> {
        self.entries
            .iter()
            .map(|e| {
                let zones = e.source.zones().map(|zs| {
                    zs.into_iter()
                        .filter(|z| e.selection.allows(&z.origin))
                        .collect()
                });
                (&e.source, zones)
            })
            .collect()
    }

    /// Begins a batch ([`DataSource::begin_batch`]) on every source; the batch
    /// ends when the guard is dropped.
    pub fn batch(&self) -> Batch<'_> {
        for source in &self.sources {
            source.begin_batch();
        }
        Batch { list: self }
    }

    /// The write side of the source serving zone `origin` (by origin, never
    /// by position): the first source whose [`ZoneSelection`] names it
    /// (`zones = [...]`, a `[[secondary]]` zone's DB, where the zone may not
    /// exist yet), else the source whose zone `origin` is (as an exact match).
    /// `None`: no source serves it, or its source takes no writes.
    ///
    /// Errors: a storage failure finding the zone.
    pub fn writer(&self, origin: &Name) -> Result<Option<Arc<dyn ZoneWriter>>, DataSourceError> {
        for entry in &self.entries {
            if let ZoneSelection::Only(zones) = &entry.selection
                && zones.contains(origin)
            {
                return Ok(entry.source.writer());
            }
        }
        match self.find_zone(origin)? {
            Some((source, zone)) if zone.origin == *origin => Ok(source.writer()),
            _ => Ok(None),
        }
    }

    /// The write sides of the sources (each once, in priority order), for
    /// readers of every zone's serial (NOTIFY out).
    pub fn writers(&self) -> Vec<Arc<dyn ZoneWriter>> {
        let mut out: Vec<Arc<dyn ZoneWriter>> = Vec::new();
        for source in &self.sources {
            if let Some(w) = source.writer()
                && !out.iter().any(|o| Arc::ptr_eq(o, &w))
            {
                out.push(w);
            }
        }
        out
    }

    /// True when both lists hold the same sources (the same objects) with
    /// the same selections, in the same order.
    pub fn same_sources(&self, other: &SourceList) -> bool {
        self.entries.len() == other.entries.len()
            && self
                .entries
                .iter()
                .zip(&other.entries)
                .all(|(a, b)| Arc::ptr_eq(&a.source, &b.source) && a.selection == b.selection)
    }

    /// The best zone for `qname` and the source holding it.
    ///
    /// Errors: the first storage failure met.
    pub fn find_zone(&self, qname: &Name) -> Result<Option<ZoneMatch<'_>>, DataSourceError> {
        let mut best: Option<ZoneMatch<'_>> = None;
        let qlabels = qname.label_count();
        for entry in &self.entries {
            if let Some(zone) = entry.find_zone(qname)? {
                let labels = zone.origin.label_count();
                if labels == qlabels {
                    return Ok(Some((&entry.source, zone)));
                }
                if best
                    .as_ref()
                    .is_none_or(|(_, b)| b.origin.label_count() < labels)
                {
                    best = Some((&entry.source, zone));
                }
            }
        }
        Ok(best)
    }
}

impl Entry {
    /// The source's longest match for `qname` among the zones selected.
    fn find_zone(&self, qname: &Name) -> Result<Option<ZoneRef>, DataSourceError> {
        let mut zone = self.source.find_zone(qname)?;
        if matches!(self.selection, ZoneSelection::All) {
            return Ok(zone);
        }
        // A match left out may hide a selected parent zone: try its parents.
        while let Some(z) = &zone
            && !self.selection.allows(&z.origin)
        {
            zone = match z.origin.parent() {
                Some(parent) => self.source.find_zone(&parent)?,
                None => None,
            };
        }
        Ok(zone)
    }
}

/// A batch of queries over a [`SourceList`]; see [`SourceList::batch`].
pub struct Batch<'a> {
    list: &'a SourceList,
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        for source in &self.list.sources {
            source.end_batch();
        }
    }
}
