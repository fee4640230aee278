//! The hot-spot cache: a [`DataSource`] wrapping another and remembering what
//! real traffic repeats.
//!
//! BIND 10's `HotCache` kept RRsets keyed by (qname, qtype), which cannot help
//! root-server traffic: most qnames there are unique (random names under real
//! TLDs, junk TLDs). What repeats is one level down: the apex, the zone cuts,
//! the closest enclosers, the wildcard that does not exist. So this cache sits
//! at the node level: it runs the shared lookup algorithm ([`finder::find`])
//! itself over the wrapped source's node view, caching each node (present or
//! absent, and then whether anything exists below it), each empty-non-terminal
//! answer, each denial RRset and the additional-section addresses of each NS,
//! MX and SRV RRset (an NS RRset's in the slot of the node holding it, so a
//! delegation and its glue take one slot; the glue names' own nodes are read
//! to build the list, not cached); and it keeps the zone table, so finding
//! the zone of a unique qname costs no query either. A lookup first walks the
//! cached entries alone, under one read lock and without copying them; only
//! when one is missing does it walk again through the source: inside a query
//! ([`DataSource::with_query_scope`], module `scope`) through the source's
//! own view for that query, so the lookups of one query that miss (the
//! answer, then each glue target) share what they read. Sources without a
//! node view have whole lookup results cached instead.
//!
//! Absent names with nothing below them are also remembered as ranges: the
//! stored names on either side ([`node::AbsentRange`], from the source's
//! `rname` order), so a flood of random names (junk TLDs at the root, random
//! subdomain attacks) costs one lookup in the source per gap between existing
//! names, not one per name — as NSD and Knot answer such names from their
//! sorted trees. At most [`MAX_RANGES`] per cache (the oldest dropped first).
//!
//! Entries share one LRU (`lru` crate) bounded by a slot count. Hits do not
//! reorder it (that would need the write lock): they mark the entry, and an
//! entry due for eviction that was marked since it last came round is moved to
//! the front instead (second chance, as CLOCK does).
//!
//! Once the slots are full, a new entry must earn its place (TinyLFU
//! admission, as Caffeine and moka do: Einziger, Friedman and Manes, ACM
//! Transactions on Storage 13(4), 2017): a count-min sketch (module `sketch`) counts
//! every miss per key, and every second chance as one more sighting of the
//! entry given it, its counters halved every 10 × its width of sightings; the
//! new entry is stored only if its estimate exceeds that of the entry it would
//! evict. So a scan of names never repeated (or repeated less often than the
//! cached ones) passes by without evicting the hot set, where plain LRU would
//! let it flush the cache and pay for storing each name it will never see
//! again. A miss not admitted builds nothing to store: a node stays as the
//! source lazily gives it, no key is copied. Without a bound every entry is
//! admitted and nothing is counted. Everything is keyed by
//! the wrapped source's [`DataSource::generation`]: when that changes (a commit
//! by another process to an sqlite3 file is seen within 200 ms, a reload at
//! once) the cache is emptied, so no answer from before a change outlives it
//! by more than the source's polling interval. Within a batch of queries (a
//! UDP worker's `recvmmsg` batch) the generation is read once, at the first
//! lookup: every query of the batch had arrived by then. A write through the cache's own
//! write side ([`DataSource::writer`]: UPDATE, a transfer in) drops only what
//! it changed, before the write returns: each zone has an epoch, moved by
//! every write, and every entry the epoch of its zone when stored or last
//! found valid. An entry of an older epoch answers only if no change since
//! reached it (module `writer`'s `Changed`: the owner names changed and their
//! ancestors, or the whole zone); the zone keeps its last [`CHANGE_LOG`]
//! changes for that check, and an entry older than those is a miss. So a
//! stream of UPDATEs into the zone queried refetches the names it changes
//! (and the apex), not the zone.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::BuildHasher;
#[cfg(not(test))]
use std::hash::RandomState;
use std::num::NonZeroUsize;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard};

use authd_datasrc::finder;
use authd_datasrc::node::{self, AbsentRange, Node, NodeRef, NodeStore};
use authd_datasrc::{
    DataSource, DataSourceError, Lookup, LookupOptions, Name, Outcome, RRset, RType, ZoneRef,
};
use lru::LruCache;
use thread_local::ThreadLocal;

mod scope;
mod sketch;
mod writer;
use sketch::Sketch;
use writer::{CacheWriter, Changed, Invalidations};

/// Changes kept per zone for checking entries stored before them (see the
/// module docs); an entry older than the oldest kept is a miss.
pub const CHANGE_LOG: usize = 64;

/// Absent-name ranges kept per cache, beside the slots (a range is two names).
pub const MAX_RANGES: usize = 65_536;

/// Absent names per measuring window of [`RangePolicy`].
const RANGE_WINDOW: u64 = 1024;

/// Absent names answered without fetching their range after a window in
/// which the cached ranges were used less than once per two fetched.
const RANGE_BYPASS: u64 = 16 * RANGE_WINDOW;

/// Whether fetching an absent name's whole range (two more statements for
/// sqlite3, and a write to the range store) pays: in a small zone random
/// names fall in a few gaps and a range answers many later names; in a TLD
/// of 300,000 delegations each falls in its own gap, the range is never
/// used again, and NXDOMAIN through the cache ran at 0.53x the uncached
/// speed. Counted over all threads: an atomic add per absent name (which
/// takes the cache's lock anyway) and a plain store per range hit.
#[derive(Default)]
struct RangePolicy {
    /// Absent names seen (each would fetch a range).
    absent: AtomicU64,
    /// Absent names (not wildcards) answered by a cached range, no fetch
    /// needed, in the current window.
    used: AtomicU64,
    /// No range is fetched while `absent` is below this.
    bypass_until: AtomicU64,
}

impl RangePolicy {
    /// Whether to fetch the range of the absent name just met; at the end of
    /// each window, starts a bypass when the ranges were not used enough.
    fn fetch(&self) -> bool {
        let n = self.absent.fetch_add(1, Ordering::Relaxed) + 1;
        let bypassing = n < self.bypass_until.load(Ordering::Relaxed);
        if n.is_multiple_of(RANGE_WINDOW) {
            let used = self.used.swap(0, Ordering::Relaxed);
            if !bypassing && used * 2 < RANGE_WINDOW {
                self.bypass_until.store(n + RANGE_BYPASS, Ordering::Relaxed);
                return false;
            }
        }
        !bypassing
    }

    /// A cached range answered a name. A plain load and store, no locked
    /// add: an increment lost to a race only blurs an estimate.
    fn used(&self) {
        let used = self.used.load(Ordering::Relaxed);
        self.used.store(used + 1, Ordering::Relaxed);
    }
}

/// Hashes keys for the admission sketch: with a random key per cache, so that
/// no one can pick names sharing counters with the hot ones; in unit tests
/// with a fixed one, so that what they count is the same every run.
#[cfg(not(test))]
type KeyHasher = RandomState;
#[cfg(test)]
type KeyHasher = std::hash::BuildHasherDefault<std::hash::DefaultHasher>;

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

impl std::fmt::Display for Slots {
    /// In words: `off`, `65536 slots`, `unlimited slots`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Slots::Disabled => f.write_str("off"),
            Slots::Bounded(n) => write!(f, "{n} slots"),
            Slots::Unlimited => f.write_str("unlimited slots"),
        }
    }
}

impl Slots {
    /// `0` disables the cache, `n` bounds it (BIND 10 used 0 for "unlimited";
    /// here that is [`Slots::Unlimited`]).
    pub fn from_count(n: usize) -> Slots {
        NonZeroUsize::new(n).map_or(Slots::Disabled, Slots::Bounded)
    }
}

/// What one cache entry is about.
#[derive(Clone, Debug)]
enum Key {
    /// A whole lookup result (sources without a node view). Zones are told
    /// apart by their apex: a name can be in two zones (the parent side and
    /// the apex of a child).
    Lookup(Name, Name, RType, LookupOptions),
    /// The node at a name (present or absent).
    Node(Name, Name),
    /// Whether names exist below a name that owns records.
    Descendants(Name, Name),
    /// The NSEC covering a name.
    Nsec(Name, Name),
    /// The NSEC3 covering a hash.
    Nsec3(Name, Vec<u8>),
    /// The additional-section addresses of an NS, MX or SRV RRset, by the
    /// RRset's address: the entry holds the RRset, so while it lives the
    /// address names no other one.
    Additional(Name, usize),
}

/// A [`Key`] made of borrowed parts: probes look entries up through it, so a
/// hit copies no name (`Key` borrows as `dyn AsKey`, hashing and comparing
/// the same parts).
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyRef<'a> {
    Lookup(&'a Name, &'a Name, RType, LookupOptions),
    Node(&'a Name, &'a Name),
    Descendants(&'a Name, &'a Name),
    Nsec(&'a Name, &'a Name),
    Nsec3(&'a Name, &'a [u8]),
    Additional(&'a Name, usize),
}

impl std::hash::Hash for KeyRef<'_> {
    /// Without the zone: a name is below its zone's apex, so the name alone
    /// tells keys apart as well (a name in two zones, parent side and child
    /// apex, collides and is told apart by `eq`), at half the hashing.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            KeyRef::Lookup(_, n, t, o) => (n, t, o).hash(state),
            KeyRef::Node(_, n) | KeyRef::Descendants(_, n) | KeyRef::Nsec(_, n) => n.hash(state),
            KeyRef::Nsec3(_, h) => h.hash(state),
            KeyRef::Additional(_, a) => a.hash(state),
        }
    }
}

trait AsKey {
    fn key(&self) -> KeyRef<'_>;
}

impl AsKey for Key {
    fn key(&self) -> KeyRef<'_> {
        match self {
            Key::Lookup(z, n, t, o) => KeyRef::Lookup(z, n, *t, *o),
            Key::Node(z, n) => KeyRef::Node(z, n),
            Key::Descendants(z, n) => KeyRef::Descendants(z, n),
            Key::Nsec(z, n) => KeyRef::Nsec(z, n),
            Key::Nsec3(z, h) => KeyRef::Nsec3(z, h),
            Key::Additional(z, a) => KeyRef::Additional(z, *a),
        }
    }
}

impl AsKey for KeyRef<'_> {
    fn key(&self) -> KeyRef<'_> {
        *self
    }
}

impl<'a> KeyRef<'a> {
    /// The apex of the zone the entry is about.
    fn zone(self) -> &'a Name {
        match self {
            KeyRef::Lookup(z, ..)
            | KeyRef::Node(z, _)
            | KeyRef::Descendants(z, _)
            | KeyRef::Nsec(z, _)
            | KeyRef::Nsec3(z, _)
            | KeyRef::Additional(z, _) => z,
        }
    }

    fn owned(self) -> Key {
        match self {
            KeyRef::Lookup(z, n, t, o) => Key::Lookup(z.clone(), n.clone(), t, o),
            KeyRef::Node(z, n) => Key::Node(z.clone(), n.clone()),
            KeyRef::Descendants(z, n) => Key::Descendants(z.clone(), n.clone()),
            KeyRef::Nsec(z, n) => Key::Nsec(z.clone(), n.clone()),
            KeyRef::Nsec3(z, h) => Key::Nsec3(z.clone(), h.to_vec()),
            KeyRef::Additional(z, a) => Key::Additional(z.clone(), a),
        }
    }
}

impl<'a> std::borrow::Borrow<dyn AsKey + 'a> for Key {
    fn borrow(&self) -> &(dyn AsKey + 'a) {
        self
    }
}

impl std::hash::Hash for dyn AsKey + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl PartialEq for dyn AsKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for dyn AsKey + '_ {}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Key {}

/// An additional-section address list ([`DataSource::additional_addresses`]):
/// `None` when a wildcard produced one of the addresses (the query processor
/// synthesizes those per query).
type Ready = Option<Arc<[Arc<RRset>]>>;

#[derive(Debug)]
enum Value {
    Lookup(Lookup),
    Node(Arc<Node>),
    /// No records at the name; whether some name below it owns records. When
    /// not, every name below is absent too, which spares a probe per unique
    /// name under a non-existent one (the junk TLDs of root traffic).
    Absent {
        descendants: bool,
    },
    Descendants(bool),
    Nsec(Option<Arc<RRset>>),
    Nsec3(Option<(Arc<RRset>, bool)>),
    Additional {
        /// Keeps the key's address taken.
        rrset: Arc<RRset>,
        ready: Ready,
    },
}

#[derive(Debug)]
struct Entry {
    value: Value,
    /// Hit since eviction last came round to it.
    used: AtomicBool,
    /// Its zone's epoch when stored, or when last found valid after a change
    /// ([`State::epoch_of`], [`ZoneLog`]).
    epoch: AtomicU64,
    /// A node's: the additional-section addresses of its NS RRset, once a
    /// referral or NS answer asked for them. Kept in the node's slot rather
    /// than a slot of their own: a delegation takes one slot, not two, and
    /// the default 65,536 slots hold twice the delegations of a TLD.
    ns_additional: OnceLock<Ready>,
}

/// The last changes written into one zone, for entries stored before them.
#[derive(Default)]
struct ZoneLog {
    /// The epoch of the newest change no longer kept: an entry of this
    /// epoch or older cannot be checked.
    floor: u64,
    /// (epoch, change), oldest first; at most [`CHANGE_LOG`].
    changes: VecDeque<(u64, Changed)>,
}

impl ZoneLog {
    /// True when the value at `key`, valid at epoch `from`, is still valid at
    /// `to`: every change between is kept and none reached it.
    fn unaffected(&self, key: KeyRef<'_>, entry: &Entry, from: u64, to: u64) -> bool {
        from >= self.floor
            && self
                .changes
                .iter()
                .filter(|(e, _)| *e > from && *e <= to)
                .all(|(_, c)| !reaches(c, key, entry))
    }
}

/// True when `changed` may have made `entry` (at `key`) wrong.
fn reaches(changed: &Changed, key: KeyRef<'_>, entry: &Entry) -> bool {
    let Changed::Names(c) = changed else {
        return true;
    };
    // The addresses found for `rrset`'s targets may have changed.
    let addresses = |rrset: &RRset| {
        c.additional
            || rrset.rdatas.iter().any(|r| {
                r.additional_target(rrset.rtype)
                    .is_none_or(|t| c.names.contains(&t))
            })
    };
    match key {
        KeyRef::Node(_, name) => {
            c.names.contains(name)
                || (entry.ns_additional.get().is_some()
                    && match &entry.value {
                        Value::Node(node) => node.get(RType::NS).is_none_or(|ns| addresses(ns)),
                        _ => true,
                    })
        }
        KeyRef::Descendants(_, name) => c.names.contains(name),
        KeyRef::Nsec(..) => c.nsec,
        KeyRef::Nsec3(..) => c.nsec3,
        KeyRef::Additional(..) => match &entry.value {
            Value::Additional { rrset, .. } => addresses(rrset),
            _ => true,
        },
        // A whole lookup's result may come from anywhere in the zone.
        KeyRef::Lookup(..) => true,
    }
}

/// Hit and miss counts since creation (or the last
/// [`HotSpotCache::reset_stats`]), and the entries held.
pub use authd_datasrc::CacheStats;

struct State {
    lru: LruCache<Key, Entry>,
    /// The zone table, asked for by every query: kept beside the slots, not
    /// in them, so it is never evicted and costs no hash probe.
    zones: Option<Arc<Vec<ZoneRef>>>,
    /// Absent-name ranges per zone apex: lower bound (empty: from the start)
    /// → upper bound (`None`: to the end), as [`AbsentRange`].
    ranges: HashMap<Name, BTreeMap<Vec<u8>, Option<Vec<u8>>>>,
    /// Ranges held, over all zones, in the order they came (for the bound).
    range_order: VecDeque<(Name, Vec<u8>)>,
    /// Miss and second-chance counts per key, for admission once the slots
    /// are full (bounded caches only). Kept through flushes: how often names
    /// are asked for is the traffic's, not the data's.
    sketch: Option<Sketch>,
    generation: u64,
    /// Each zone written through this cache's write side, and its epoch
    /// (zones not here are at 0).
    epochs: HashMap<Name, u64>,
    /// Each such zone's last changes.
    logs: HashMap<Name, ZoneLog>,
    /// The last epoch given.
    last_epoch: u64,
    /// Moves with every zone written, for the zone table ([`State::zones`]).
    zones_epoch: u64,
    /// The [`Invalidations`] stamp applied.
    applied: u64,
    /// Zones with entries stored since the last flush (a write into a zone
    /// with none needs no pass over the slots).
    populated: std::collections::HashSet<Name>,
}

/// True when `entry` (at `key`) is of an older epoch of its zone
/// ([`State::epochs`]) and a change since reached it: it never answers again.
fn stale(
    epochs: &HashMap<Name, u64>,
    logs: &HashMap<Name, ZoneLog>,
    key: &Key,
    entry: &Entry,
) -> bool {
    if epochs.is_empty() {
        return false;
    }
    let key = key.key();
    let now = epochs.get(key.zone()).copied().unwrap_or(0);
    let stored = entry.epoch.load(Ordering::Relaxed);
    stored != now
        && !logs
            .get(key.zone())
            .is_some_and(|log| log.unaffected(key, entry, stored, now))
}

impl State {
    /// The epoch of the zone at `zone` (a lookup reads it once).
    fn epoch_of(&self, zone: &Name) -> u64 {
        if self.epochs.is_empty() {
            return 0;
        }
        self.epochs.get(zone).copied().unwrap_or(0)
    }

    /// Zone `zone` was written (`changed`): the entries and absent ranges
    /// the change reached go out of date, and the zone table when the write
    /// may have created the zone.
    fn invalidate_zone(&mut self, zone: &Name, created: bool, changed: Changed) {
        self.last_epoch += 1;
        let epoch = self.last_epoch;
        self.epochs.insert(zone.clone(), epoch);
        match &changed {
            Changed::All => {
                // Dropped now, not left to age out: a zone replaced often
                // would otherwise fill the slots with dead entries, and the
                // cache would run full, where every store has to evict.
                if self.populated.remove(zone) {
                    self.lru.retain(|k, _| k.key().zone() != zone);
                }
                self.ranges.remove(zone);
            }
            Changed::Names(c) => {
                // The nodes changed go now (no probe finds them again; they
                // free their slots), the rest when a probe or eviction meets
                // them (`stale`).
                for name in &c.names {
                    self.lru.pop(&KeyRef::Node(zone, name) as &dyn AsKey);
                    self.lru.pop(&KeyRef::Descendants(zone, name) as &dyn AsKey);
                }
                if let Some(ranges) = self.ranges.get_mut(zone) {
                    for name in &c.names {
                        let key = node::absent_key(name);
                        let covering = ranges
                            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(&key[..])))
                            .next_back()
                            .filter(|(below, above)| {
                                AbsentRange {
                                    below: (!below.is_empty()).then(|| below.to_vec()),
                                    above: (*above).clone(),
                                }
                                .covers(&key)
                            })
                            .map(|(below, _)| below.clone());
                        if let Some(below) = covering {
                            ranges.remove(&below);
                        }
                    }
                }
            }
        }
        let log = self.logs.entry(zone.clone()).or_default();
        log.changes.push_back((epoch, changed));
        if log.changes.len() > CHANGE_LOG
            && let Some((dropped, _)) = log.changes.pop_front()
        {
            log.floor = dropped;
        }
        if created {
            self.zones = None;
            self.zones_epoch += 1;
        }
    }

    /// The value of `key` valid at its zone's `epoch`, marking the entry
    /// used. An entry of an older epoch is checked against the changes since
    /// (and stamped with `epoch` when none reached it); one of a newer epoch
    /// is a miss (the lookup began before the write that it follows).
    #[inline]
    fn get(&self, key: KeyRef<'_>, epoch: u64) -> Option<&Value> {
        self.entry(key, epoch).map(|e| &e.value)
    }

    /// The entry at `key` (as [`Self::get`]) if it is a node holding NS
    /// RRset `rrset` itself (the same allocation).
    fn node_holding(&self, key: KeyRef<'_>, epoch: u64, rrset: &Arc<RRset>) -> Option<&Entry> {
        self.entry(key, epoch).filter(|e| match &e.value {
            Value::Node(node) => node.get(RType::NS).is_some_and(|s| Arc::ptr_eq(s, rrset)),
            _ => false,
        })
    }

    /// The entry of [`Self::get`].
    #[inline]
    fn entry(&self, key: KeyRef<'_>, epoch: u64) -> Option<&Entry> {
        let entry = self.lru.peek(&key as &dyn AsKey)?;
        let stored = entry.epoch.load(Ordering::Relaxed);
        if stored != epoch && !self.still_valid(key, entry, stored, epoch) {
            return None;
        }
        // Written only when it changes: hot entries stay clean in other cores' caches.
        if !entry.used.load(Ordering::Relaxed) {
            entry.used.store(true, Ordering::Relaxed);
        }
        Some(entry)
    }

    /// True when `entry` at `key`, valid at epoch `stored`, is valid at
    /// `epoch` too (no change between reached it); then stamped with it.
    /// Out of line: met once per entry after a write, not per probe.
    #[cold]
    #[inline(never)]
    fn still_valid(&self, key: KeyRef<'_>, entry: &Entry, stored: u64, epoch: u64) -> bool {
        let valid = stored < epoch
            && self
                .logs
                .get(key.zone())
                .is_some_and(|log| log.unaffected(key, entry, stored, epoch));
        if valid {
            entry.epoch.fetch_max(epoch, Ordering::Relaxed);
        }
        valid
    }

    /// True when a cached range says `name` (as [`node::absent_key`]) of
    /// the zone at `zone` owns nothing, at or below it.
    fn in_absent_range(&self, zone: &Name, key: &[u8]) -> bool {
        let Some(ranges) = self.ranges.get(zone) else {
            return false;
        };
        let Some((below, above)) = ranges
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(key)))
            .next_back()
        else {
            return false;
        };
        AbsentRange {
            below: (!below.is_empty()).then(|| below.clone()),
            above: above.clone(),
        }
        .covers(key)
    }
}

/// A [`DataSource`] that caches another one's lookups (see the module docs).
pub struct HotSpotCache {
    inner: Arc<dyn DataSource>,
    slots: Slots,
    state: Option<RwLock<State>>,
    /// Hashes keys for the sketch.
    hasher: KeyHasher,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    rejections: AtomicU64,
    flushes: AtomicU64,
    ranges: RangePolicy,
    /// Zones written through [`DataSource::writer`], not yet dropped.
    invalidations: Arc<Invalidations>,
    /// Each thread's batch of queries ([`DataSource::begin_batch`]).
    batch: ThreadLocal<Cell<BatchCheck>>,
}

/// A thread's batch of queries: the wrapped source's generation is read once
/// per batch (sqlite3's read takes the clock: ~140 instructions, twice per
/// query). Safe: every query of a batch was received before its first
/// lookup, so a change that a client could have seen completed before it
/// sent a query of the batch is counted by that first read.
#[derive(Clone, Copy, Default)]
struct BatchCheck {
    /// Nesting depth of `begin_batch` calls.
    depth: u32,
    /// The generation read by the batch's first lookup.
    generation: Option<u64>,
}

impl HotSpotCache {
    /// Wraps `inner` with a cache of `slots` entries.
    pub fn new(inner: Arc<dyn DataSource>, slots: Slots) -> HotSpotCache {
        let generation = inner.generation();
        // Unbounded underneath, the bound kept by `put`: a bounded `LruCache`
        // allocates its whole table up front, and a large table scattered
        // over mostly untouched pages made every probe a cache miss.
        let state = (slots != Slots::Disabled).then(|| {
            RwLock::new(State {
                lru: LruCache::unbounded(),
                zones: None,
                ranges: HashMap::new(),
                range_order: VecDeque::new(),
                sketch: match slots {
                    Slots::Bounded(n) => Some(Sketch::new(n.get())),
                    Slots::Disabled | Slots::Unlimited => None,
                },
                generation,
                epochs: HashMap::new(),
                logs: HashMap::new(),
                last_epoch: 0,
                zones_epoch: 0,
                applied: 0,
                populated: std::collections::HashSet::new(),
            })
        });
        HotSpotCache {
            inner,
            slots,
            state,
            hasher: KeyHasher::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            rejections: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            ranges: RangePolicy::default(),
            invalidations: Arc::default(),
            batch: ThreadLocal::new(),
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
        self.fresh().map_or(0, |s| s.lru.len())
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
            rejections: self.rejections.load(Ordering::Relaxed),
            flushes: self.flushes.load(Ordering::Relaxed),
            entries: self.len() as u64,
        }
    }

    /// Empties the cache (an operator's `flush-cache`); counted as a flush.
    pub fn flush(&self) {
        let Some(mut state) = self.state.as_ref().and_then(|l| l.write().ok()) else {
            return;
        };
        state.lru.clear();
        state.populated.clear();
        state.zones = None;
        state.ranges.clear();
        state.range_order.clear();
        self.flushes.fetch_add(1, Ordering::Relaxed);
    }

    /// Sets every counter to zero.
    pub fn reset_stats(&self) {
        for c in [
            &self.hits,
            &self.misses,
            &self.evictions,
            &self.rejections,
            &self.flushes,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// The cache state, emptied first if the wrapped source changed. Each
    /// entry point checks once; the probes of one lookup share that check
    /// (sqlite3's check reads the clock, too dear per probe).
    fn fresh(&self) -> Option<RwLockReadGuard<'_, State>> {
        let lock = self.state.as_ref()?;
        let generation = self.batch_generation();
        let written = self.invalidations.stamp();
        let state = lock.read().ok()?;
        if state.generation == generation && state.applied == written {
            return Some(state);
        }
        drop(state);
        let mut state = lock.write().ok()?;
        if state.generation != generation {
            state.lru.clear();
            state.populated.clear();
            state.zones = None;
            state.ranges.clear();
            state.range_order.clear();
            state.generation = generation;
            self.flushes.fetch_add(1, Ordering::Relaxed);
        }
        if state.applied != written {
            // The stamp was read before the list is taken: a zone noted
            // meanwhile is dropped now or at the next call, never missed.
            for noted in self.invalidations.take() {
                state.invalidate_zone(&noted.zone, noted.created, noted.changed);
            }
            state.applied = written;
        }
        drop(state);
        lock.read().ok()
    }

    /// The wrapped source's generation: read once per batch on this thread
    /// ([`BatchCheck`]), or once per call outside one.
    fn batch_generation(&self) -> u64 {
        let Some(cell) = self.batch.get() else {
            return self.inner.generation();
        };
        let batch = cell.get();
        if batch.depth == 0 {
            return self.inner.generation();
        }
        if let Some(generation) = batch.generation {
            return generation;
        }
        let generation = self.inner.generation();
        cell.set(BatchCheck {
            generation: Some(generation),
            ..batch
        });
        generation
    }

    /// The cache state, without the generation check.
    fn held(&self) -> Option<RwLockReadGuard<'_, State>> {
        self.state.as_ref()?.read().ok()
    }

    fn hit(&self, n: u64) {
        self.hits.fetch_add(n, Ordering::Relaxed);
    }

    fn miss(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether to store an entry for `key`, just missed while the cache was
    /// at `generation` (TinyLFU admission, see the module docs): always below
    /// the slot count or without one; once full, only if the sketch has seen
    /// `key` more often than the entry it would evict. Counts the miss in the
    /// sketch either way, and a refusal in [`CacheStats::rejections`]. False
    /// when the cache was flushed since (`put` would drop the entry).
    fn admit(&self, key: KeyRef<'_>, generation: u64) -> bool {
        let Slots::Bounded(n) = self.slots else {
            return true;
        };
        let hash = self.hasher.hash_one(key);
        let Some(mut guard) = self.state.as_ref().and_then(|l| l.write().ok()) else {
            return false;
        };
        let state = &mut *guard;
        if state.generation != generation {
            return false;
        }
        let Some(sketch) = state.sketch.as_mut() else {
            return true;
        };
        sketch.increment(hash);
        // Below the bound; or the key is held already, of an older epoch of
        // its zone (written since): storing it anew evicts nothing.
        if state.lru.len() < n.get() || state.lru.contains(&key as &dyn AsKey) {
            return true;
        }
        // The entry `put` would evict: as there, entries hit since eviction
        // last came round go to the front instead, each hit round counted as
        // a sighting. Ends: each turn clears a mark (hits take the read lock).
        let victim = loop {
            let Some((key, entry)) = state.lru.peek_lru() else {
                return true;
            };
            // An entry a write reached is dead: it goes, no contest.
            if stale(&state.epochs, &state.logs, key, entry) {
                return true;
            }
            let hash = self.hasher.hash_one(key.key());
            if !entry.used.swap(false, Ordering::Relaxed) {
                break hash;
            }
            let key = key.clone();
            state.lru.promote(&key);
            sketch.increment(hash);
        };
        if sketch.estimate(hash) > sketch.estimate(victim) {
            return true;
        }
        self.rejections.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Caches `value`, read from the source while the cache was at
    /// `generation`: if it was flushed since, the value may predate the change.
    /// Callers ask [`Self::admit`] first.
    fn put(&self, key: Key, value: Value, generation: u64, epoch: u64) {
        let Some(mut state) = self.state.as_ref().and_then(|l| l.write().ok()) else {
            return;
        };
        if state.generation != generation || state.epoch_of(key.key().zone()) != epoch {
            return;
        }
        let zone = key.key().zone();
        if !state.populated.contains(zone) {
            state.populated.insert(zone.clone());
        }
        let entry = Entry {
            value,
            used: AtomicBool::new(false),
            epoch: AtomicU64::new(epoch),
            ns_additional: OnceLock::new(),
        };
        state.lru.put(key, entry);
        let Slots::Bounded(n) = self.slots else {
            return;
        };
        // Each turn evicts or clears a mark set by a hit (none can be set
        // meanwhile: hits take the read lock), so this ends.
        while state.lru.len() > n.get() {
            let Some((key, entry)) = state.lru.peek_lru() else {
                break;
            };
            if !stale(&state.epochs, &state.logs, key, entry)
                && entry.used.swap(false, Ordering::Relaxed)
            {
                let key = key.clone();
                state.lru.promote(&key);
            } else {
                state.lru.pop_lru();
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Remembers `range` of the zone at `zone`, read while the cache was at
    /// `generation` (dropped if it was flushed since, as [`Self::put`]).
    fn put_range(&self, zone: &Name, range: AbsentRange, generation: u64, epoch: u64) {
        let Some(mut state) = self.state.as_ref().and_then(|l| l.write().ok()) else {
            return;
        };
        if state.generation != generation || state.epoch_of(zone) != epoch {
            return;
        }
        let below = range.below.unwrap_or_default();
        let state = &mut *state;
        let zone_ranges = state.ranges.entry(zone.clone()).or_default();
        if zone_ranges.insert(below.clone(), range.above).is_none() {
            state.range_order.push_back((zone.clone(), below));
        }
        while state.range_order.len() > MAX_RANGES {
            let Some((z, below)) = state.range_order.pop_front() else {
                break;
            };
            if let Some(r) = state.ranges.get_mut(&z) {
                r.remove(&below);
            }
        }
    }

    /// The additional-section addresses of `rrset` through the cache's own
    /// lookups, as the query processor would find them per query; `None` when
    /// a wildcard produced one (the processor synthesizes those per query).
    /// In-domain glue names are read, not cached: what is kept is the list,
    /// in the slot of the node holding `rrset` or one of its own; a slot per
    /// such glue name besides took a TLD's 65,536 default slots twice as fast.
    fn resolve_additional(
        &self,
        inner: &dyn DataSource,
        zone: &ZoneRef,
        rrset: &RRset,
    ) -> Result<Ready, DataSourceError> {
        // With their RRSIGs, as cached nodes hold them: the targets' nodes
        // are read here without being cached, and a source builds a node's
        // RRSIGs only when asked for DNSSEC (the query's DO decides later
        // whether they are sent).
        let opts = LookupOptions {
            glue_ok: rrset.rtype == RType::NS,
            dnssec: true,
            ..LookupOptions::default()
        };
        let mut list: Vec<Arc<RRset>> = Vec::new();
        for rdata in &rrset.rdatas {
            let Some(target) = rdata.additional_target(rrset.rtype) else {
                continue;
            };
            if !target.is_subdomain_of(&zone.origin) {
                continue;
            }
            // In-domain glue (below the delegation itself) serves that
            // delegation alone: read, not cached. A sibling name in the zone
            // (a host serving many delegations, as at the root) or an MX/SRV
            // target is cached as any lookup is: not caching those made the
            // root zone's first referrals 39% dearer, each re-reading hosts
            // that the lists of hundreds of TLDs share.
            let store = rrset.rtype != RType::NS || !target.is_subdomain_of(&rrset.owner);
            for rtype in [RType::A, RType::AAAA] {
                let found = self.lookup_via(inner, zone, &target, rtype, opts, store)?;
                if let Outcome::Answer(set) = found.outcome {
                    if found.wildcard {
                        return Ok(None);
                    }
                    if !list
                        .iter()
                        .any(|l| l.rtype == set.rtype && l.owner == set.owner)
                    {
                        list.push(set);
                    }
                }
            }
        }
        Ok(Some(list.into()))
    }

    /// [`DataSource::lookup`], misses read through `inner`: the wrapped
    /// source itself, or its view for one query ([`scope::Scoped`]), where
    /// the lookups of a query share what they read. With `store` false,
    /// nothing read is cached (see [`Self::resolve_additional`]).
    fn lookup_via(
        &self,
        inner: &dyn DataSource,
        zone: &ZoneRef,
        qname: &Name,
        qtype: RType,
        opts: LookupOptions,
        store: bool,
    ) -> Result<Lookup, DataSourceError> {
        let Some(state) = self.fresh() else {
            return inner.lookup(zone, qname, qtype, opts);
        };
        let stamp = (state.generation, state.epoch_of(&zone.origin));
        // First pass: cached entries only. Every repeat ends here, and so do
        // most unique qnames (under a cached cut, or a cached absent TLD).
        let view = View::new(self, &zone.origin, stamp, Some(&state), None, store);
        let found = finder::find(&view, &zone.origin, qname, qtype, opts);
        if !view.gave_up.get() {
            self.hit(view.hits.get());
            return found;
        }
        drop(view);
        drop(state);
        let mut run = |source: &dyn NodeStore| {
            let view = View::new(self, &zone.origin, stamp, None, Some(source), store);
            let found = finder::find(&view, &zone.origin, qname, qtype, opts);
            self.hit(view.hits.get());
            found
        };
        if let Some(result) = inner.with_node_store(zone, &mut run) {
            return result;
        }
        // A source without a node view: whole results, keyed by qname.
        let key = KeyRef::Lookup(&zone.origin, qname, qtype, opts);
        let found = self.held().and_then(|s| match s.get(key, stamp.1) {
            Some(Value::Lookup(l)) => Some(l.clone()),
            _ => None,
        });
        if let Some(l) = found {
            self.hit(1);
            return Ok(l);
        }
        self.miss();
        let lookup = inner.lookup(zone, qname, qtype, opts)?;
        // Owners synthesized from a wildcard keep the wildcard owner in the
        // result, so the entry is valid for this qname only: fine, it is keyed by it.
        if store && self.admit(key, stamp.0) {
            self.put(key.owned(), Value::Lookup(lookup.clone()), stamp.0, stamp.1);
        }
        Ok(lookup)
    }

    /// The addresses of NS RRset `rrset` kept in the slot of the cached node
    /// holding it ([`Entry::ns_additional`]), found now if not yet: `None`
    /// when no cached node holds that very RRset (then it takes an
    /// [`KeyRef::Additional`] slot of its own, as MX and SRV do).
    fn node_additional(
        &self,
        inner: &dyn DataSource,
        zone: &ZoneRef,
        rrset: &Arc<RRset>,
    ) -> Result<Option<Ready>, DataSourceError> {
        let key = KeyRef::Node(&zone.origin, &rrset.owner);
        // No generation check: `rrset` comes from a lookup that just made it.
        let Some(state) = self.held() else {
            return Ok(None);
        };
        let epoch = state.epoch_of(&zone.origin);
        let Some(entry) = state.node_holding(key, epoch, rrset) else {
            return Ok(None);
        };
        if let Some(ready) = entry.ns_additional.get() {
            let ready = ready.clone();
            drop(state);
            self.hit(1);
            return Ok(Some(ready));
        }
        drop(state);
        let ready = self.resolve_additional(inner, zone, rrset)?;
        // Kept only if no write came in between (the epoch moves under the
        // write lock): what was read may predate it.
        if let Some(state) = self.held()
            && state.epoch_of(&zone.origin) == epoch
            && let Some(entry) = state.node_holding(key, epoch, rrset)
        {
            let _ = entry.ns_additional.set(ready.clone());
        }
        Ok(Some(ready))
    }

    /// [`DataSource::additional_addresses`], misses read through `inner`
    /// (as [`Self::lookup_via`]).
    fn additional_via(
        &self,
        inner: &dyn DataSource,
        zone: &ZoneRef,
        rrset: &Arc<RRset>,
    ) -> Result<Ready, DataSourceError> {
        if let Some(ready) = inner.additional_addresses(zone, rrset)? {
            return Ok(Some(ready));
        }
        // Held by the caller alone, the RRset is not in the cache (a node not
        // admitted): an entry keyed by its address would never be found again.
        if !matches!(rrset.rtype, RType::NS | RType::MX | RType::SRV)
            || Arc::strong_count(rrset) == 1
        {
            return Ok(None);
        }
        if rrset.rtype == RType::NS
            && let Some(ready) = self.node_additional(inner, zone, rrset)?
        {
            return Ok(ready);
        }
        // No generation check: `rrset` comes from a lookup that just made it.
        let Some(state) = self.held() else {
            return Ok(None);
        };
        let key = KeyRef::Additional(&zone.origin, Arc::as_ptr(rrset) as usize);
        let epoch = state.epoch_of(&zone.origin);
        if let Some(Value::Additional { ready, .. }) = state.get(key, epoch) {
            let ready = ready.clone();
            drop(state);
            self.hit(1);
            return Ok(ready);
        }
        let generation = state.generation;
        drop(state);
        let ready = self.resolve_additional(inner, zone, rrset)?;
        if self.admit(key, generation) {
            let value = Value::Additional {
                rrset: rrset.clone(),
                ready: ready.clone(),
            };
            self.put(key.owned(), value, generation, epoch);
        }
        Ok(ready)
    }
}

/// What a node probe found.
enum Found<'a> {
    Node(NodeRef<'a>),
    Absent { descendants: bool },
}

/// The node view [`finder::find`] walks for the cache. Two passes: first over
/// cached entries only, borrowed under one read lock held throughout, giving
/// up at the first entry not cached; then, only if that gave up, through the
/// wrapped source's view, caching what it returns.
struct View<'a> {
    cache: &'a HotSpotCache,
    zone: &'a Name,
    /// The cache's generation when the lookup began.
    generation: u64,
    /// The zone's epoch when the lookup began.
    epoch: u64,
    /// First pass: the read-locked state. Second: `None`.
    held: Option<&'a State>,
    /// Second pass: the wrapped source's view.
    inner: Option<&'a dyn NodeStore>,
    /// The first pass met an entry not cached.
    gave_up: Cell<bool>,
    /// What the second pass reads is cached (if admitted).
    store: bool,
    hits: Cell<u64>,
    /// A name seen with no records at or below it: names below it need no probe.
    empty: RefCell<Option<Name>>,
    /// The last name probed and found absent, and whether names exist below
    /// it: the lookup asks that next (spares a probe per negative answer).
    absent: RefCell<Option<(Name, bool)>>,
}

impl<'a> View<'a> {
    fn new(
        cache: &'a HotSpotCache,
        zone: &'a Name,
        (generation, epoch): (u64, u64),
        held: Option<&'a State>,
        inner: Option<&'a dyn NodeStore>,
        store: bool,
    ) -> Self {
        View {
            cache,
            zone,
            generation,
            epoch,
            held,
            inner,
            gave_up: Cell::new(false),
            store,
            hits: Cell::new(0),
            empty: RefCell::new(None),
            absent: RefCell::new(None),
        }
    }

    /// What `f` takes from the cached value of `key`.
    fn cached<T>(&self, key: KeyRef<'_>, f: impl FnOnce(&Value) -> Option<T>) -> Option<T> {
        let found = match self.held {
            Some(state) => state.get(key, self.epoch).and_then(f),
            None => self.cache.held()?.get(key, self.epoch).and_then(f),
        };
        if found.is_some() {
            self.hits.set(self.hits.get() + 1);
        }
        found
    }

    /// The cached node at `name`: borrowed in the first pass, shared in the second.
    fn cached_node(&self, key: KeyRef<'_>) -> Option<Found<'a>> {
        let found = match self.held {
            Some(state) => match state.get(key, self.epoch)? {
                Value::Node(n) => Found::Node(NodeRef::Borrowed(n)),
                Value::Absent { descendants } => Found::Absent {
                    descendants: *descendants,
                },
                _ => return None,
            },
            None => match self.cache.held()?.get(key, self.epoch)? {
                Value::Node(n) => Found::Node(NodeRef::Shared(n.clone())),
                Value::Absent { descendants } => Found::Absent {
                    descendants: *descendants,
                },
                _ => return None,
            },
        };
        self.hits.set(self.hits.get() + 1);
        Some(found)
    }

    /// The wrapped source's view; in the first pass, an error that ends it.
    fn source(&self) -> Result<&'a dyn NodeStore, DataSourceError> {
        match self.inner {
            Some(inner) => {
                self.cache.miss();
                Ok(inner)
            }
            None => {
                self.gave_up.set(true);
                Err(DataSourceError::Storage(String::new()))
            }
        }
    }

    /// Caches what `value` builds under `key`, if admitted: a miss not
    /// admitted copies no key and builds no value.
    fn put(&self, key: KeyRef<'_>, value: impl FnOnce() -> Value) {
        if self.store && self.cache.admit(key, self.generation) {
            self.cache
                .put(key.owned(), value(), self.generation, self.epoch);
        }
    }

    /// A cached range says `name` owns nothing at or below it.
    fn in_absent_range(&self, name: &Name) -> bool {
        let key = node::absent_key(name);
        let found = match self.held {
            Some(state) => state.in_absent_range(self.zone, &key),
            None => self
                .cache
                .held()
                .is_some_and(|s| s.in_absent_range(self.zone, &key)),
        };
        if found {
            self.hits.set(self.hits.get() + 1);
        }
        found
    }

    fn in_empty(&self, name: &Name) -> bool {
        self.empty
            .borrow()
            .as_ref()
            .is_some_and(|e| name.is_subdomain_of(e))
    }

    fn mark_empty(&self, name: &Name) {
        let mut empty = self.empty.borrow_mut();
        if empty.is_none() {
            *empty = Some(name.clone());
        }
    }
}

impl NodeStore for View<'_> {
    fn node(&self, name: &Name, dnssec: bool) -> Result<Option<NodeRef<'_>>, DataSourceError> {
        if self.in_empty(name) {
            return Ok(None);
        }
        // Nodes are cached fully built with their RRSIGs (`NodeRef::to_shared`).
        let key = KeyRef::Node(self.zone, name);
        let found = match self.cached_node(key) {
            Some(found) => found,
            None if self.in_absent_range(name) => {
                // A fetch saved; not counted for a wildcard name, which every
                // NXDOMAIN asks for (the same range each time) in any zone.
                if !name.is_wildcard() {
                    self.cache.ranges.used();
                }
                Found::Absent { descendants: false }
            }
            None => {
                let inner = self.source()?;
                match inner.node(name, dnssec)? {
                    // Cached fully built; a node with a row that does not parse
                    // is served as the source gives it, uncached, so that only
                    // the lookups needing that row's type fail. A node not
                    // admitted is served as the source gives it, too: built
                    // only as far as this lookup reads it.
                    Some(n) if self.store && self.cache.admit(key, self.generation) => {
                        match n.to_shared() {
                            Ok(n) => {
                                self.cache.put(
                                    key.owned(),
                                    Value::Node(n.clone()),
                                    self.generation,
                                    self.epoch,
                                );
                                Found::Node(NodeRef::Shared(n))
                            }
                            Err(_) => Found::Node(n),
                        }
                    }
                    Some(n) => Found::Node(n),
                    None => {
                        let descendants = inner.has_descendants(name)?;
                        // Nothing here or below: remember the whole gap, not the name.
                        let fetch = self.store && !descendants && self.cache.ranges.fetch();
                        match fetch.then(|| inner.absent_range(name)) {
                            Some(Ok(Some(range))) => {
                                self.cache
                                    .put_range(self.zone, range, self.generation, self.epoch)
                            }
                            _ => self.put(key, || Value::Absent { descendants }),
                        }
                        Found::Absent { descendants }
                    }
                }
            }
        };
        match found {
            Found::Node(n) => Ok(Some(n)),
            Found::Absent { descendants } => {
                if !descendants {
                    self.mark_empty(name);
                }
                *self.absent.borrow_mut() = Some((name.clone(), descendants));
                Ok(None)
            }
        }
    }

    fn has_descendants(&self, name: &Name) -> Result<bool, DataSourceError> {
        if self.in_empty(name) || self.in_absent_range(name) {
            return Ok(false);
        }
        if let Some((absent, descendants)) = &*self.absent.borrow()
            && absent == name
        {
            return Ok(*descendants);
        }
        // Asked almost only of absent names, whose node entry knows.
        let absent = self.cached(KeyRef::Node(self.zone, name), |v| match v {
            Value::Absent { descendants } => Some(*descendants),
            _ => None,
        });
        if let Some(b) = absent {
            return Ok(b);
        }
        let key = KeyRef::Descendants(self.zone, name);
        let found = self.cached(key, |v| match v {
            Value::Descendants(b) => Some(*b),
            _ => None,
        });
        if let Some(b) = found {
            return Ok(b);
        }
        let b = self.source()?.has_descendants(name)?;
        self.put(key, || Value::Descendants(b));
        Ok(b)
    }

    fn covering_nsec(&self, name: &Name) -> Result<Option<Arc<RRset>>, DataSourceError> {
        let key = KeyRef::Nsec(self.zone, name);
        let found = self.cached(key, |v| match v {
            Value::Nsec(n) => Some(n.clone()),
            _ => None,
        });
        if let Some(n) = found {
            return Ok(n);
        }
        let n = self.source()?.covering_nsec(name)?;
        self.put(key, || Value::Nsec(n.clone()));
        Ok(n)
    }

    fn covering_nsec3(&self, hash: &[u8]) -> Result<Option<(Arc<RRset>, bool)>, DataSourceError> {
        let key = KeyRef::Nsec3(self.zone, hash);
        let found = self.cached(key, |v| match v {
            Value::Nsec3(n) => Some(n.clone()),
            _ => None,
        });
        if let Some(n) = found {
            return Ok(n);
        }
        let n = self.source()?.covering_nsec3(hash)?;
        self.put(key, || Value::Nsec3(n.clone()));
        Ok(n)
    }
}

impl DataSource for HotSpotCache {
    fn begin_batch(&self) {
        let cell = self.batch.get_or_default();
        let batch = cell.get();
        // A new batch (depth 0) reads the generation afresh.
        cell.set(BatchCheck {
            depth: batch.depth + 1,
            generation: batch.generation.filter(|_| batch.depth > 0),
        });
        self.inner.begin_batch();
    }

    fn end_batch(&self) {
        if let Some(cell) = self.batch.get() {
            let batch = cell.get();
            let depth = batch.depth.saturating_sub(1);
            cell.set(BatchCheck {
                depth,
                generation: batch.generation.filter(|_| depth > 0),
            });
        }
        self.inner.end_batch();
    }

    fn describe(&self) -> String {
        format!("cache {} over {}", self.slots, self.inner.describe())
    }

    fn find_zone(&self, qname: &Name) -> Result<Option<ZoneRef>, DataSourceError> {
        let Some(state) = self.fresh() else {
            return self.inner.find_zone(qname);
        };
        // Longest match over the cached zone table (RFC 1034 §4.3.2 step 2).
        let best = |zones: &[ZoneRef]| {
            zones
                .iter()
                .filter(|z| qname.is_subdomain_of(&z.origin))
                .max_by_key(|z| z.origin.label_count())
                .cloned()
        };
        if let Some(zones) = &state.zones {
            let found = best(zones);
            drop(state);
            self.hit(1);
            return Ok(found);
        }
        let (generation, zones_epoch) = (state.generation, state.zones_epoch);
        drop(state);
        self.miss();
        let zones = match self.inner.zones() {
            Ok(zones) => Arc::new(zones),
            // The zone table cannot be read: the source says which qnames
            // are still its own (an sqlite3 DB fails only its zones).
            Err(_) => return self.inner.find_zone(qname),
        };
        let found = best(&zones);
        if let Some(mut state) = self.state.as_ref().and_then(|l| l.write().ok())
            && state.generation == generation
            && state.zones_epoch == zones_epoch
        {
            state.zones = Some(zones);
        }
        Ok(found)
    }

    fn lookup(
        &self,
        zone: &ZoneRef,
        qname: &Name,
        qtype: RType,
        opts: LookupOptions,
    ) -> Result<Lookup, DataSourceError> {
        self.lookup_via(&*self.inner, zone, qname, qtype, opts, true)
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
        self.additional_via(&*self.inner, zone, rrset)
    }

    fn zone_rrsets(&self, zone: &ZoneRef) -> Result<Vec<Arc<RRset>>, DataSourceError> {
        self.inner.zone_rrsets(zone)
    }

    fn generation(&self) -> u64 {
        self.inner.generation()
    }

    fn with_query_scope(
        &self,
        f: &mut dyn FnMut(&dyn DataSource) -> Result<(), DataSourceError>,
    ) -> Option<Result<(), DataSourceError>> {
        if self.state.is_none() {
            return self.inner.with_query_scope(f);
        }
        // The query's lookups go through the cache still; only its misses
        // read through the inner source's scope, so they share what they
        // read (a referral's glue lookups pass the cut read by the answer's).
        let mut run = |inner: &dyn DataSource| f(&scope::Scoped::new(self, inner));
        self.inner.with_query_scope(&mut run)
    }

    fn with_node_store(
        &self,
        _zone: &ZoneRef,
        _f: &mut dyn FnMut(&dyn NodeStore) -> Result<Lookup, DataSourceError>,
    ) -> Option<Result<Lookup, DataSourceError>> {
        // The cache's node view lives for one lookup (it carries the
        // generation it reads under); a wrapper above it uses `lookup`.
        None
    }

    fn cache_stats(&self) -> Option<CacheStats> {
        self.state.is_some().then(|| self.stats())
    }

    fn flush_cache(&self) {
        self.flush();
        self.inner.flush_cache();
    }

    fn writer(&self) -> Option<Arc<dyn authd_datasrc::ZoneWriter>> {
        // Passed through, and each zone written dropped from this cache
        // before the write returns.
        let inner = self.inner.writer()?;
        Some(Arc::new(CacheWriter::new(
            inner,
            Arc::clone(&self.invalidations),
        )))
    }
}

#[cfg(test)]
mod tests {
    /// Ranges are fetched while they are used at least once per two absent
    /// names in a window; below that, the next [`super::RANGE_BYPASS`]
    /// absent names fetch none; the bypass's last window decides again.
    #[test]
    fn ranges_are_fetched_only_while_used() {
        use super::{RANGE_BYPASS, RANGE_WINDOW, RangePolicy};
        let p = RangePolicy::default();
        for i in 0..RANGE_WINDOW {
            if i % 2 == 0 {
                p.used();
            }
            assert!(p.fetch(), "window 1, name {i}");
        }
        // Exactly one use per two fetches: still fetched.
        for i in 0..RANGE_WINDOW - 1 {
            if i % 2 == 0 && i < RANGE_WINDOW - 2 {
                p.used();
            }
            assert!(p.fetch(), "window 2, name {i}");
        }
        // One use fewer: the window's last name starts the bypass.
        assert!(!p.fetch(), "window 2 closes under the bar");
        for i in 0..RANGE_BYPASS - 1 {
            // The ranges still cached answer names in the bypass's last window.
            if i >= RANGE_BYPASS - RANGE_WINDOW / 2 - 1 {
                p.used();
            }
            assert!(!p.fetch(), "bypass, name {i}");
        }
        assert!(p.fetch(), "measured again: used enough, fetched again");
    }

    use std::path::{Path, PathBuf};

    use authd_datasrc::sqlite::SqliteSource;
    use authd_datasrc::zonefile;

    use super::*;

    fn lookup(
        src: &dyn DataSource,
        qname: &Name,
        qtype: RType,
        opts: LookupOptions,
    ) -> Option<(ZoneRef, Lookup)> {
        let zone = src.find_zone(qname).expect("find_zone")?;
        let l = src.lookup(&zone, qname, qtype, opts).expect("lookup");
        Some((zone, l))
    }

    /// A DB of zone `tld.` with `n` delegations `d0.tld.` … (one NS each, the
    /// name server out of zone, so no glue), and its path.
    fn make_tld_db(dir: &Path, n: usize) -> PathBuf {
        let zone = dir.join("tld.zone");
        let mut text = String::from(
            "$ORIGIN tld.\n$TTL 3600\n@ SOA ns.nic.example. host.nic.example. 1 7200 3600 1209600 3600\n\
             @ NS ns.nic.example.\n",
        );
        for i in 0..n {
            text.push_str(&format!("d{i} NS ns.dns{}.example.\n", i % 7));
        }
        std::fs::write(&zone, text).expect("write zone");
        let db = dir.join("tld.sqlite3");
        let origin: Name = "tld.".parse().expect("origin");
        let records = zonefile::read_master_file(&zone, &origin).expect("parses");
        let mut conn = authd_migrations::open_or_create(&db).expect("db");
        authd_datasrc::sqlite_load::load_zone(&mut conn, &origin, &records, |_, _| {})
            .expect("loads");
        db
    }

    fn delegation(i: usize) -> Name {
        format!("d{i}.tld.").parse().expect("name")
    }

    /// What `lookup` of `d<i>.tld. A` found: a referral to the cut.
    fn referral(cached: &HotSpotCache, i: usize) -> Outcome {
        let (_, l) =
            lookup(cached, &delegation(i), RType::A, LookupOptions::default()).expect("zone");
        assert!(matches!(l.outcome, Outcome::Delegation(_)), "d{i}: {l:?}");
        l.outcome
    }

    /// TinyLFU admission: once the slots are full, a scan of names asked for
    /// once evicts none of the names asked for repeatedly (plain LRU would have
    /// replaced them all); a name asked for a second time is let in, evicting the
    /// least recently used entry seen less often.
    #[test]
    fn a_scan_does_not_evict_the_hot_set_and_repeats_are_admitted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = make_tld_db(dir.path(), 200);
        let cached = HotSpotCache::new(
            Arc::new(SqliteSource::open(&db).expect("open")),
            Slots::from_count(10),
        );
        // The hot set: 4 cuts, each asked 3 times. Entries: the apex node and
        // the 4 cut nodes.
        for _ in 0..3 {
            for i in 0..4 {
                referral(&cached, i);
            }
        }
        assert_eq!(cached.len(), 5);
        assert_eq!(cached.stats().misses, 6, "zone table, apex, 4 cuts");
        // A scan of 100 other cuts, each once: the first 5 fill the slots, the
        // other 95 are seen no more often than the entry they would evict.
        for i in 100..200 {
            referral(&cached, i);
        }
        let stats = cached.stats();
        assert_eq!(cached.len(), 10);
        assert_eq!(stats.misses, 106);
        assert_eq!(stats.rejections, 95);
        assert_eq!(stats.evictions, 0);
        // The hot set is all hits still.
        for i in 0..4 {
            referral(&cached, i);
        }
        assert_eq!(cached.stats().misses, 106, "the hot set was evicted");
        // A cut missed twice has been seen more often than the least recently
        // used scan entry (once): the second miss stores it, the third ask hits.
        referral(&cached, 50);
        assert_eq!(
            (cached.stats().misses, cached.stats().rejections),
            (107, 96)
        );
        referral(&cached, 50);
        let stats = cached.stats();
        assert_eq!(
            (stats.misses, stats.rejections, stats.evictions),
            (108, 96, 1)
        );
        let first = referral(&cached, 50);
        assert_eq!(cached.stats().misses, 108, "admitted");
        assert_eq!(cached.len(), 10);
        // What a rejected miss returns is what the source returns.
        let plain = SqliteSource::open(&db).expect("open");
        assert_eq!(
            lookup(&plain, &delegation(150), RType::A, LookupOptions::default())
                .map(|(_, l)| l.outcome),
            Some(referral(&cached, 150))
        );
        assert!(matches!(first, Outcome::Delegation(_)));
    }

    /// Without a bound, nothing is counted or refused.
    #[test]
    fn unlimited_slots_admit_everything() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = make_tld_db(dir.path(), 50);
        let cached = HotSpotCache::new(
            Arc::new(SqliteSource::open(&db).expect("open")),
            Slots::Unlimited,
        );
        for i in 0..50 {
            referral(&cached, i);
        }
        let stats = cached.stats();
        assert_eq!(
            (cached.len(), stats.rejections, stats.evictions),
            (51, 0, 0)
        );
    }
}
