//! The sqlite3 backend: zones in BIND 10's sqlite3 schema (2.x), served as they
//! are, answered from SQL on every lookup.
//!
//! Statements follow BIND 10's `sqlite3_accessor.cc`: one indexed equality lookup
//! per label to find the zone, all records at one name per node, and a range
//! scan over the reversed-name column (`rname`) for the empty-non-terminal test.
//! Serving opens the file read-only and never changes it. Connections are
//! pooled per thread (`rusqlite::Connection` is not `Sync`), statements prepared once per
//! connection.
//!
//! Files: `pool.rs`, the connection pool and read locking; `rows.rs`, row
//! decoding; `view.rs`, the node view the lookup algorithm ([`crate::finder`])
//! walks; `writer.rs`, the write side ([`SqliteWriter`]); here, the
//! [`DataSource`] implementations and the change watch they share.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use thread_local::ThreadLocal;

use crate::lookup::{DataSourceError, Lookup, LookupOptions, ZoneRef};
use crate::name::Name;
use crate::node::NodeStore;
use crate::rr::{RRset, RType};
use crate::source::DataSource;
use crate::write::ZoneWriter;

mod durable;
#[cfg(test)]
mod fault_vfs;
mod pool;
mod rows;
mod view;
mod writer;

pub use writer::SqliteWriter;

use pool::{LOCK_DEADLINE, data_version, end_read};
use rows::{RowsBuilder, all_rrsets};
pub(crate) use rows::{int, text};
use view::{Memo, ZoneView};

/// Suffixes of qname asked for per zone-table statement in `find_zone`.
const ZONE_CANDIDATES: usize = 8;
/// The zone-table statement: ZONE_CANDIDATES equality searches, longest name
/// first, stopping at the first zone found. (An `IN` list or `ORDER BY` would
/// make SQLite build an ephemeral table per execution, which cost more than
/// the statements saved.)
const FIND_ZONE_SQL: &str = "\
    SELECT id, name FROM zones WHERE name=?1 AND rdclass='IN' UNION ALL \
    SELECT id, name FROM zones WHERE name=?2 AND rdclass='IN' UNION ALL \
    SELECT id, name FROM zones WHERE name=?3 AND rdclass='IN' UNION ALL \
    SELECT id, name FROM zones WHERE name=?4 AND rdclass='IN' UNION ALL \
    SELECT id, name FROM zones WHERE name=?5 AND rdclass='IN' UNION ALL \
    SELECT id, name FROM zones WHERE name=?6 AND rdclass='IN' UNION ALL \
    SELECT id, name FROM zones WHERE name=?7 AND rdclass='IN' UNION ALL \
    SELECT id, name FROM zones WHERE name=?8 AND rdclass='IN' LIMIT 1";
/// How often [`DataSource::generation`] polls `PRAGMA data_version`.
const CHANGE_POLL: Duration = Duration::from_millis(200);

/// A data source over one BIND 10 sqlite3 zone DB.
pub struct SqliteSource {
    path: PathBuf,
    /// Idle connections, per thread: a connection stays with the thread that
    /// opened it, so SQLite's page cache memory is allocated and freed by one
    /// thread (sharing them made UDP workers contend on malloc's arena locks).
    pool: ThreadLocal<RefCell<Vec<Connection>>>,
    /// Each thread's batch of queries ([`DataSource::begin_batch`]).
    batch: ThreadLocal<RefCell<Batch>>,
    /// Commits seen (`PRAGMA data_version`, and this source's own writer).
    change: Arc<ChangeWatch>,
    /// The write side, sharing `change`.
    writer: Arc<SqliteWriter>,
    /// The file opened: (device, inode), to tell a file replaced or deleted
    /// under the same path ([`SqliteSource::file_changed`]).
    file_id: (u64, u64),
    /// Opened immutable ([`SqliteSource::is_immutable`]).
    immutable: bool,
    /// The zone apexes the last successful [`DataSource::zones`] listed
    /// (`None` before one): when the DB cannot be read, a qname under none
    /// of them is not this DB's to answer, so a broken DB fails only its own
    /// zones, not every query of the server.
    known_zones: std::sync::Mutex<Option<Arc<[Name]>>>,
}

/// A batch of queries answered back to back by one thread (a UDP worker's
/// `recvmmsg` batch): they share one read transaction, begun by the first
/// read and ended by the end of the batch.
#[derive(Default)]
struct Batch {
    /// Nesting depth of `begin_batch` calls.
    depth: u32,
    /// The connection inside the batch's read transaction, when one is open
    /// and not lent out, and [`SqliteSource::generation`]'s count when that
    /// transaction began.
    conn: Option<(Connection, u64)>,
    /// The count read before the transaction of the connection lent out began.
    began: u64,
}

struct Watch {
    /// A read-only connection, polled while the writer has none.
    conn: Connection,
    checked: Instant,
    /// The connection last polled (0: `conn`; else the writer connection's
    /// number) and the `data_version` it gave.
    last: Option<(u64, i64)>,
}

/// A writer's kept connection and its number (each connection a writer
/// opens gets a new one), shared by the writer and its source's
/// [`ChangeWatch`].
pub(crate) type WriterSlot = Mutex<Option<(Connection, u64)>>;

/// What a source knows of commits to its file.
///
/// Commits by others (`loadzone`, an sqlite3 shell, another process) move
/// the generation ([`DataSource::generation`]; a cache above empties itself):
/// `PRAGMA data_version` changes on a connection when *another* connection
/// commits, so it is read, at most every [`CHANGE_POLL`], on the writer's
/// own connection (where this source's writes never show) or, while the
/// writer has none, on a read-only one. Commits by this source's writer do
/// not move the generation: the writer says which zone it changed (a cache
/// above drops that zone only, [`crate::ZoneWriter`] wrappers), and counts
/// the commit in [`ChangeWatch::own_commit`], which read snapshots check.
pub(crate) struct ChangeWatch {
    watch: Mutex<Watch>,
    generation: AtomicU64,
    /// Commits by this source's writer.
    own: AtomicU64,
    writer: Arc<WriterSlot>,
}

impl ChangeWatch {
    /// Errors: `data_version` cannot be read on `conn`.
    pub(crate) fn new(conn: Connection, writer: Arc<WriterSlot>) -> rusqlite::Result<ChangeWatch> {
        let last = Some((0, data_version(&conn)?));
        Ok(ChangeWatch {
            watch: Mutex::new(Watch {
                conn,
                checked: Instant::now(),
                last,
            }),
            generation: AtomicU64::new(1),
            own: AtomicU64::new(0),
            writer,
        })
    }

    /// The generation, polling `data_version` when [`CHANGE_POLL`] has
    /// passed (and no other thread is polling).
    fn generation(&self) -> u64 {
        if let Ok(mut w) = self.watch.try_lock()
            && w.checked.elapsed() >= CHANGE_POLL
        {
            self.poll(&mut w);
        }
        self.generation.load(Ordering::Acquire)
    }

    /// A number that moves on every change, own commits included: a read
    /// snapshot taken under another number may predate one.
    pub(crate) fn snapshot_mark(&self) -> u64 {
        self.generation
            .load(Ordering::Acquire)
            .wrapping_add(self.own.load(Ordering::Acquire))
    }

    fn poll(&self, w: &mut Watch) {
        // A write in progress holds the writer's connection: poll next time
        // (the fallback connection would see that write as another's).
        let Ok(slot) = self.writer.try_lock() else {
            return;
        };
        w.checked = Instant::now();
        let reading = match slot.as_ref() {
            Some((conn, id)) => data_version(conn).ok().map(|v| (*id, v)),
            None => data_version(&w.conn).ok().map(|v| (0, v)),
        };
        drop(slot);
        // Another connection polled than last time: its numbers do not
        // compare, so count a change (a cache empties once, needlessly).
        if let Some(r) = reading
            && w.last != Some(r)
        {
            w.last = Some(r);
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    /// Polls `data_version` now, whenever the last poll was: a reader of
    /// the change mark (NOTIFY out) is about to announce what it saw, and a
    /// secondary's SOA query right after must not get the answer from
    /// before another process's commit.
    pub(crate) fn poll_now(&self) {
        if let Ok(mut w) = self.watch.lock() {
            self.poll(&mut w);
        }
    }

    /// This source's writer committed: read snapshots begun before must not
    /// be reused (the generation stays: the writer tells which zone changed).
    pub(crate) fn own_commit(&self) {
        self.own.fetch_add(1, Ordering::AcqRel);
    }
}

fn storage(path: &Path, e: impl std::fmt::Display) -> DataSourceError {
    let text = e.to_string();
    // SQLite's words for SQLITE_CORRUPT and SQLITE_NOTADB: say what it means.
    if text.contains("disk image is malformed") || text.contains("file is not a database") {
        return DataSourceError::Storage(format!(
            "zone DB {} is corrupt ({text}); restore it from a backup (docs/ZONE-ADMIN.md, Backups)",
            path.display()
        ));
    }
    DataSourceError::Storage(format!("zone DB {}: {text}", path.display()))
}

impl SqliteSource {
    /// [`DataSource::find_zone`] by SQL: the longest match among the DB's zones.
    ///
    /// Errors: the DB cannot be read.
    fn find_zone_sql(&self, qname: &Name) -> Result<Option<ZoneRef>, DataSourceError> {
        // BIND 10 asked for each suffix of qname in turn, one statement per label;
        // here one statement asks for up to ZONE_CANDIDATES suffixes at once,
        // longest first; the first found is the longest match (RFC 1034 §4.3.2 step 2).
        self.with_read(|conn| {
            let mut stmt = conn
                .prepare_cached(FIND_ZONE_SQL)
                .map_err(|e| storage(&self.path, e))?;
            let labels = qname.label_count();
            let mut strip = 0;
            while strip <= labels {
                let mut names: [Option<Name>; ZONE_CANDIDATES] = Default::default();
                let mut candidates: [String; ZONE_CANDIDATES] = Default::default();
                for (i, (name, text)) in names.iter_mut().zip(&mut candidates).enumerate() {
                    // Past the root, repeat it: the statement takes a fixed count.
                    *name = qname.strip_left((strip + i).min(labels));
                    if let Some(n) = name {
                        *text = n.to_string();
                    }
                }
                strip += ZONE_CANDIDATES;
                let mut rows = stmt
                    .query(rusqlite::params_from_iter(candidates.iter()))
                    .map_err(|e| storage(&self.path, e))?;
                let Some(row) = rows.next().map_err(|e| storage(&self.path, e))? else {
                    continue;
                };
                let name = row.get_ref(1).ok().and_then(text).unwrap_or_default();
                let id = row
                    .get_ref(0)
                    .ok()
                    .and_then(int)
                    .ok_or_else(|| storage(&self.path, format!("zone {name} has a bad id")))?;
                // The stored spelling may differ in case; the origin is the
                // suffix of qname it matched (as BIND 10, which echoed qname).
                let origin = candidates
                    .iter()
                    .zip(names)
                    .find(|(c, _)| c.eq_ignore_ascii_case(&name))
                    .and_then(|(_, n)| n)
                    .ok_or_else(|| storage(&self.path, format!("zone {name:?} matched no name")))?;
                return Ok(Some(ZoneRef { origin, id }));
            }
            Ok(None)
        })
    }
}

impl DataSource for SqliteSource {
    fn cache_stats(&self) -> Option<crate::source::CacheStats> {
        // Every lookup is SQL; SQLite's page cache is not counted here.
        None
    }

    fn flush_cache(&self) {
        // Nothing of ours is cached; SQLite's page cache follows the file.
    }

    fn describe(&self) -> String {
        format!("sqlite3:{}", self.path.display())
    }

    fn find_zone(&self, qname: &Name) -> Result<Option<ZoneRef>, DataSourceError> {
        self.find_zone_sql(qname).or_else(|e| {
            // Only a failed read comes here, out of the query path.
            let known = self.known_zones.lock().ok().and_then(|k| k.clone());
            match known {
                Some(zones) if !zones.iter().any(|z| qname.is_subdomain_of(z)) => Ok(None),
                _ => Err(e),
            }
        })
    }

    fn lookup(
        &self,
        zone: &ZoneRef,
        qname: &Name,
        qtype: RType,
        opts: LookupOptions,
    ) -> Result<Lookup, DataSourceError> {
        self.with_read(|conn| self.find(conn, &Memo::default(), zone, qname, qtype, opts))
    }

    fn with_query_scope(
        &self,
        f: &mut dyn FnMut(&dyn DataSource) -> Result<(), DataSourceError>,
    ) -> Option<Result<(), DataSourceError>> {
        // One read transaction for the whole query, or the whole batch (see
        // `lease`), leased at the first read: a query a cache above answers
        // whole leases nothing.
        let scope = QueryScope {
            source: self,
            state: Mutex::new(None),
        };
        let result = f(&scope);
        // A poisoned lock (a panic inside `f` that was caught there) leaves the
        // connection in an unknown state: it is dropped, not pooled.
        if let Ok(Some(state)) = scope.state.into_inner() {
            self.release(state.conn, result.is_ok());
        }
        Some(result)
    }

    fn begin_batch(&self) {
        let mut batch = self.batch.get_or_default().borrow_mut();
        if batch.depth == 0 {
            LOCK_DEADLINE.with(|d| d.set(None));
        }
        batch.depth += 1;
    }

    fn end_batch(&self) {
        let Some(batch) = self.batch.get() else {
            return;
        };
        let conn = {
            let mut batch = batch.borrow_mut();
            batch.depth = batch.depth.saturating_sub(1);
            if batch.depth > 0 {
                return;
            }
            batch.conn.take()
        };
        if let Some((conn, _)) = conn {
            end_read(&conn);
            self.return_conn(conn);
        }
    }

    fn zones(&self) -> Result<Vec<ZoneRef>, DataSourceError> {
        self.with_conn(|conn| {
            let mut stmt = conn
                .prepare_cached("SELECT id, name FROM zones WHERE rdclass='IN' ORDER BY id")
                .map_err(|e| storage(&self.path, e))?;
            let mut rows = stmt.query([]).map_err(|e| storage(&self.path, e))?;
            let mut zones = Vec::new();
            while let Some(row) = rows.next().map_err(|e| storage(&self.path, e))? {
                let id = row.get_ref(0).ok().and_then(int);
                let name = row.get_ref(1).ok().and_then(text);
                let (Some(id), Some(name)) = (id, name) else {
                    return Err(storage(&self.path, "zones row with a NULL column"));
                };
                // `find_zone` matches the absolute text BIND 10 stores, so a
                // name written without the final dot is found by neither; and
                // one unreadable row must not take the DB's other zones down.
                let origin = if name.ends_with('.') {
                    name.parse::<Name>()
                        .map_err(|e| format!("is not a domain name ({e})"))
                } else {
                    Err("lacks the final dot".to_string())
                };
                match origin {
                    Ok(origin) => zones.push(ZoneRef { origin, id }),
                    Err(why) => tracing::warn!(
                        "zone DB {}: zones row {id} ({name:?}) {why}; not served",
                        self.path.display()
                    ),
                }
            }
            // Stable: a name with several rows keeps its lowest id first, the
            // row `find_zone` (and BIND 10) serves; the others are left out.
            zones.sort_by(|a, b| a.origin.cmp(&b.origin));
            if let Ok(mut known) = self.known_zones.lock() {
                *known = Some(zones.iter().map(|z| z.origin.clone()).collect());
            }
            let before = zones.len();
            zones.dedup_by(|later, first| later.origin == first.origin);
            if zones.len() != before {
                tracing::warn!(
                    "zone DB {}: {} zone name(s) have more than one zones row; each is \
                     served from its lowest id (zone check names them)",
                    self.path.display(),
                    before - zones.len()
                );
            }
            Ok(zones)
        })
    }

    fn zone_rrsets(&self, zone: &ZoneRef) -> Result<Vec<Arc<RRset>>, DataSourceError> {
        self.with_conn(|conn| {
            let mut out = Vec::new();
            for sql in [
                "SELECT name, rdtype, ttl, rdata FROM records WHERE zone_id=?1 ORDER BY rname, rdtype",
                "SELECT owner, rdtype, ttl, rdata FROM nsec3 WHERE zone_id=?1 ORDER BY hash, rdtype",
            ] {
                let mut stmt = conn.prepare(sql).map_err(|e| storage(&self.path, e))?;
                let mut rows = stmt.query([zone.id]).map_err(|e| storage(&self.path, e))?;
                let mut current: Option<RowsBuilder<'_>> = None;
                while let Some(row) = rows.next().map_err(|e| storage(&self.path, e))? {
                    // A bad TTL is reported with its owner when the RRset is built.
                    let ttl = row.get_ref(2).ok().and_then(int);
                    let (Some(owner), Some(rdtype), Some(rdata)) = (
                        row.get_ref(0).ok().and_then(text),
                        row.get_ref(1).ok().and_then(text),
                        row.get_ref(3).ok().and_then(text),
                    ) else {
                        return Err(storage(&self.path, format!("zone {}: row with a NULL column", zone.origin)));
                    };
                    let owner = Name::parse(&owner, Some(&zone.origin)).map_err(|e| DataSourceError::BadData {
                        zone: zone.origin.to_string(),
                        name: owner.clone(),
                        reason: e.to_string(),
                    })?;
                    if current.as_ref().is_none_or(|b| b.owner != owner) {
                        if let Some(done) = current.take() {
                            out.extend(all_rrsets(done)?);
                        }
                        current = Some(RowsBuilder::new(zone, owner));
                    }
                    if let Some(b) = current.as_mut() {
                        b.add_row(&rdtype, ttl, &rdata)?;
                    }
                }
                if let Some(done) = current.take() {
                    out.extend(all_rrsets(done)?);
                }
            }
            Ok(out.into_iter().map(Arc::new).collect())
        })
    }

    fn immutable_rrsets(&self) -> bool {
        // RRsets are parsed from rows on each read: an address says nothing
        // about content once the DB changes.
        false
    }

    fn additional_addresses(
        &self,
        _zone: &ZoneRef,
        _rrset: &Arc<RRset>,
    ) -> Result<Option<Arc<[Arc<RRset>]>>, DataSourceError> {
        // Nothing prepared: the query processor looks each target up (within
        // the query scope, so each node is read once).
        Ok(None)
    }

    fn with_node_store(
        &self,
        zone: &ZoneRef,
        f: &mut dyn FnMut(&dyn NodeStore) -> Result<Lookup, DataSourceError>,
    ) -> Option<Result<Lookup, DataSourceError>> {
        Some(self.with_read(|conn| {
            f(&ZoneView {
                conn,
                zone,
                path: &self.path,
                memo: &Memo::default(),
            })
        }))
    }

    fn generation(&self) -> u64 {
        self.change.generation()
    }

    fn writer(&self) -> Option<Arc<dyn ZoneWriter>> {
        Some(Arc::clone(&self.writer) as Arc<dyn ZoneWriter>)
    }
}

/// The lookups of one query ([`DataSource::with_query_scope`]): one pooled
/// connection, and a memo of the nodes read, so that a node is read and
/// parsed once per query however many lookups pass through it (the apex for
/// the answer, the negative SOA and each glue target). Nothing outlives the
/// query.
struct QueryScope<'a> {
    source: &'a SqliteSource,
    /// Leased at the first read ([`QueryScope::state`]).
    state: Mutex<Option<ScopeState>>,
}

impl QueryScope<'_> {
    /// Runs `f` over the scope's connection and memo, leased now if this is
    /// the scope's first read.
    ///
    /// Errors: the lease fails (see [`SqliteSource::lease`]), a panic
    /// poisoned the scope, or whatever `f` returns.
    fn with_state<T>(
        &self,
        f: impl FnOnce(&ScopeState) -> Result<T, DataSourceError>,
    ) -> Result<T, DataSourceError> {
        let mut guard = self
            .state
            .lock()
            .map_err(|_| storage(&self.source.path, "query scope lock poisoned"))?;
        let state = match guard.take() {
            Some(state) => state,
            None => ScopeState {
                conn: self.source.lease()?,
                memo: Memo::default(),
            },
        };
        f(guard.insert(state))
    }
}

struct ScopeState {
    conn: Connection,
    memo: Memo,
}

impl DataSource for QueryScope<'_> {
    fn cache_stats(&self) -> Option<crate::source::CacheStats> {
        self.source.cache_stats()
    }

    fn flush_cache(&self) {
        self.source.flush_cache();
    }

    fn describe(&self) -> String {
        self.source.describe()
    }

    fn find_zone(&self, qname: &Name) -> Result<Option<ZoneRef>, DataSourceError> {
        self.source.find_zone(qname)
    }

    fn lookup(
        &self,
        zone: &ZoneRef,
        qname: &Name,
        qtype: RType,
        opts: LookupOptions,
    ) -> Result<Lookup, DataSourceError> {
        self.with_state(|state| {
            self.source
                .find(&state.conn, &state.memo, zone, qname, qtype, opts)
        })
    }

    fn zones(&self) -> Result<Vec<ZoneRef>, DataSourceError> {
        self.source.zones()
    }

    fn zone_rrsets(&self, zone: &ZoneRef) -> Result<Vec<Arc<RRset>>, DataSourceError> {
        self.source.zone_rrsets(zone)
    }

    fn generation(&self) -> u64 {
        self.source.generation()
    }

    fn writer(&self) -> Option<Arc<dyn ZoneWriter>> {
        self.source.writer()
    }

    fn with_query_scope(
        &self,
        _f: &mut dyn FnMut(&dyn DataSource) -> Result<(), DataSourceError>,
    ) -> Option<Result<(), DataSourceError>> {
        // Already the scope of one query: scopes do not nest.
        None
    }

    fn begin_batch(&self) {
        self.source.begin_batch();
    }

    fn end_batch(&self) {
        self.source.end_batch();
    }

    fn immutable_rrsets(&self) -> bool {
        self.source.immutable_rrsets()
    }

    fn additional_addresses(
        &self,
        zone: &ZoneRef,
        rrset: &Arc<RRset>,
    ) -> Result<Option<Arc<[Arc<RRset>]>>, DataSourceError> {
        self.source.additional_addresses(zone, rrset)
    }

    fn with_node_store(
        &self,
        zone: &ZoneRef,
        f: &mut dyn FnMut(&dyn NodeStore) -> Result<Lookup, DataSourceError>,
    ) -> Option<Result<Lookup, DataSourceError>> {
        // The scope's connection and memo: nodes read once per query.
        Some(self.with_state(|state| {
            f(&ZoneView {
                conn: &state.conn,
                zone,
                path: &self.source.path,
                memo: &state.memo,
            })
        }))
    }
}
