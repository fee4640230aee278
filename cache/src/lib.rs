//! The hot-spot cache: a [`DataSource`] wrapping another and remembering what
//! real traffic repeats.
//!
//! BIND 10's `HotCache` kept RRsets keyed by (qname, qtype), which cannot help
//! root-server traffic: most qnames there are unique (random names under real
//! TLDs, junk TLDs). What repeats is one level down: the apex, the zone cuts,
//! the closest enclosers, the wildcard that does not exist. So this cache sits
//! at the node level: it runs the shared lookup algorithm ([`finder::find`])
//! itself over the wrapped source's node view, caching each node (present or
//! absent), each empty-non-terminal answer and each denial RRset; and it keeps
//! the zone table, so finding the zone of a unique qname costs no query either.
//! Whole lookup results are cached too, for names that do repeat.
//!
//! Entries share one LRU (`lru` crate) bounded by a slot count. Everything is
//! keyed by the wrapped source's [`DataSource::generation`]: when that changes
//! (a commit to an sqlite3 file is seen within 200 ms, a reload at once) the
//! cache is emptied, so no answer from before a change outlives it by more
//! than the source's polling interval.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use authd_datasrc::finder::{self, Node, NodeRef, NodeStore};
use authd_datasrc::{
    DataSource, DataSourceError, Lookup, LookupOptions, Name, RRset, RType, ZoneRef,
};
use lru::LruCache;

/// How many entries the cache may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slots {
    /// No caching at all: every call goes to the wrapped source.
    Disabled,
    /// At most this many entries; the least recently used is evicted.
    Bounded(NonZeroUsize),
    /// No bound.
    Unlimited,
}

impl Slots {
    /// `0` disables the cache, `n` bounds it (BIND 10 used 0 for "unlimited";
    /// here that is [`Slots::Unlimited`]).
    pub fn from_count(n: usize) -> Slots {
        NonZeroUsize::new(n).map_or(Slots::Disabled, Slots::Bounded)
    }
}

/// What one cache entry is about.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum Key {
    /// The zone table: which zone apexes the source holds.
    Zones,
    /// A whole lookup result. Zones are told apart by their apex: a name can be
    /// in two zones (the parent side and the apex of a child).
    Lookup(Name, Name, RType, LookupOptions),
    /// The node at a name (present or absent).
    Node(Name, Name),
    /// Whether names exist below a name.
    Descendants(Name, Name),
    /// The NSEC covering a name.
    Nsec(Name, Name),
    /// The NSEC3 covering a hash.
    Nsec3(Name, Vec<u8>),
}

#[derive(Clone, Debug)]
enum Value {
    Zones(Arc<Vec<ZoneRef>>),
    Lookup(Lookup),
    Node(Option<Arc<Node>>),
    Descendants(bool),
    Nsec(Option<Arc<RRset>>),
    Nsec3(Option<(Arc<RRset>, bool)>),
}

/// Hit and miss counts since creation (or the last [`HotSpotCache::reset_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Probes answered from the cache.
    pub hits: u64,
    /// Probes that went to the wrapped source.
    pub misses: u64,
    /// Entries evicted to respect the slot count.
    pub evictions: u64,
    /// Times the cache was emptied because the source changed.
    pub flushes: u64,
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

struct State {
    lru: LruCache<Key, Value>,
    generation: u64,
}

/// A [`DataSource`] that caches another one's lookups (see the module docs).
pub struct HotSpotCache {
    inner: Arc<dyn DataSource>,
    slots: Slots,
    state: Option<Mutex<State>>,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    flushes: AtomicU64,
}

impl HotSpotCache {
    /// Wraps `inner` with a cache of `slots` entries.
    pub fn new(inner: Arc<dyn DataSource>, slots: Slots) -> HotSpotCache {
        let lru = match slots {
            Slots::Disabled => None,
            Slots::Bounded(n) => Some(LruCache::new(n)),
            Slots::Unlimited => Some(LruCache::unbounded()),
        };
        let generation = inner.generation();
        HotSpotCache {
            inner,
            slots,
            state: lru.map(|lru| Mutex::new(State { lru, generation })),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
        }
    }

    /// The configured slot count.
    pub fn slots(&self) -> Slots {
        self.slots
    }

    /// The wrapped source.
    pub fn inner(&self) -> &Arc<dyn DataSource> {
        &self.inner
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.lock().map_or(0, |s| s.lru.len())
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counters since creation or the last reset.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            flushes: self.flushes.load(Ordering::Relaxed),
        }
    }

    /// Sets every counter to zero.
    pub fn reset_stats(&self) {
        for c in [&self.hits, &self.misses, &self.evictions, &self.flushes] {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// The cache state, emptied first if the wrapped source changed.
    fn lock(&self) -> Option<MutexGuard<'_, State>> {
        let mut state = self.state.as_ref()?.lock().ok()?;
        let generation = self.inner.generation();
        if generation != state.generation {
            state.lru.clear();
            state.generation = generation;
            self.flushes.fetch_add(1, Ordering::Relaxed);
        }
        Some(state)
    }

    fn get(&self, key: &Key) -> Option<Value> {
        let mut state = self.lock()?;
        let found = state.lru.get(key).cloned();
        drop(state);
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    fn put(&self, key: Key, value: Value) {
        let Some(mut state) = self.lock() else {
            return;
        };
        // `push` hands back either the entry it evicted or the old value of
        // this same key; only the first is an eviction.
        if let Some((old, _)) = state.lru.push(key.clone(), value)
            && old != key
        {
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn zones(&self) -> Result<Arc<Vec<ZoneRef>>, DataSourceError> {
        if let Some(Value::Zones(z)) = self.get(&Key::Zones) {
            return Ok(z);
        }
        let zones = Arc::new(self.inner.zones()?);
        self.put(Key::Zones, Value::Zones(zones.clone()));
        Ok(zones)
    }
}

/// The node view of the wrapped source, with every probe cached.
struct CachingStore<'a> {
    cache: &'a HotSpotCache,
    inner: &'a dyn NodeStore,
    zone: &'a Name,
}

impl NodeStore for CachingStore<'_> {
    fn node(&self, name: &Name, dnssec: bool) -> Result<Option<NodeRef<'_>>, DataSourceError> {
        // Nodes are cached with their RRSIGs: the sqlite3 and memory views always attach them.
        let key = Key::Node(self.zone.clone(), name.clone());
        if let Some(Value::Node(n)) = self.cache.get(&key) {
            return Ok(n.map(NodeRef::Shared));
        }
        let node = self.inner.node(name, dnssec)?.map(NodeRef::into_shared);
        self.cache.put(key, Value::Node(node.clone()));
        Ok(node.map(NodeRef::Shared))
    }

    fn has_descendants(&self, name: &Name) -> Result<bool, DataSourceError> {
        let key = Key::Descendants(self.zone.clone(), name.clone());
        if let Some(Value::Descendants(b)) = self.cache.get(&key) {
            return Ok(b);
        }
        let b = self.inner.has_descendants(name)?;
        self.cache.put(key, Value::Descendants(b));
        Ok(b)
    }

    fn covering_nsec(&self, name: &Name) -> Result<Option<Arc<RRset>>, DataSourceError> {
        let key = Key::Nsec(self.zone.clone(), name.clone());
        if let Some(Value::Nsec(n)) = self.cache.get(&key) {
            return Ok(n);
        }
        let n = self.inner.covering_nsec(name)?;
        self.cache.put(key, Value::Nsec(n.clone()));
        Ok(n)
    }

    fn covering_nsec3(&self, hash: &[u8]) -> Result<Option<(Arc<RRset>, bool)>, DataSourceError> {
        let key = Key::Nsec3(self.zone.clone(), hash.to_vec());
        if let Some(Value::Nsec3(n)) = self.cache.get(&key) {
            return Ok(n);
        }
        let n = self.inner.covering_nsec3(hash)?;
        self.cache.put(key, Value::Nsec3(n.clone()));
        Ok(n)
    }
}

impl DataSource for HotSpotCache {
    fn describe(&self) -> String {
        format!("cache({:?}) over {}", self.slots, self.inner.describe())
    }

    fn find_zone(&self, qname: &Name) -> Result<Option<ZoneRef>, DataSourceError> {
        if self.state.is_none() {
            return self.inner.find_zone(qname);
        }
        // Longest match over the cached zone table (RFC 1034 §4.3.2 step 2).
        let zones = self.zones()?;
        Ok(zones
            .iter()
            .filter(|z| qname.is_subdomain_of(&z.origin))
            .max_by_key(|z| z.origin.label_count())
            .cloned())
    }

    fn lookup(
        &self,
        zone: &ZoneRef,
        qname: &Name,
        qtype: RType,
        opts: LookupOptions,
    ) -> Result<Lookup, DataSourceError> {
        if self.state.is_none() {
            return self.inner.lookup(zone, qname, qtype, opts);
        }
        let key = Key::Lookup(zone.origin.clone(), qname.clone(), qtype, opts);
        if let Some(Value::Lookup(l)) = self.get(&key) {
            return Ok(l);
        }
        let mut run = |store: &dyn NodeStore| {
            let caching = CachingStore {
                cache: self,
                inner: store,
                zone: &zone.origin,
            };
            finder::find(&caching, &zone.origin, qname, qtype, opts)
        };
        let lookup = match self.inner.with_node_store(zone, &mut run) {
            Some(result) => result?,
            None => self.inner.lookup(zone, qname, qtype, opts)?,
        };
        // Owners synthesized from a wildcard keep the wildcard owner in the
        // result, so the entry is valid for this qname only: fine, it is keyed by it.
        self.put(key, Value::Lookup(lookup.clone()));
        Ok(lookup)
    }

    fn zones(&self) -> Result<Vec<ZoneRef>, DataSourceError> {
        self.inner.zones()
    }

    fn immutable_rrsets(&self) -> bool {
        // Cached RRsets are shared, never modified, and replaced by new ones
        // (new addresses) when the source changes: within one generation a
        // lookup yields the same RRsets, so replies keyed by them may be reused.
        self.state.is_some() || self.inner.immutable_rrsets()
    }

    fn additional_addresses(
        &self,
        zone: &ZoneRef,
        rrset: &Arc<RRset>,
    ) -> Result<Option<Arc<[Arc<RRset>]>>, DataSourceError> {
        self.inner.additional_addresses(zone, rrset)
    }

    fn zone_rrsets(&self, zone: &ZoneRef) -> Result<Vec<RRset>, DataSourceError> {
        self.inner.zone_rrsets(zone)
    }

    fn generation(&self) -> u64 {
        self.inner.generation()
    }
}
