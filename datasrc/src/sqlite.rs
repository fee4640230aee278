//! The sqlite3 backend: zones in BIND 10's sqlite3 schema (2.x), served as they
//! are, answered from SQL on every lookup.
//!
//! Statements follow BIND 10's `sqlite3_accessor.cc`: one indexed equality lookup
//! per label to find the zone, all records at one name per node, and a range
//! scan over the reversed-name column (`rname`) for the empty-non-terminal test.
//! Serving opens the file read-only and never changes it. Connections are
//! pooled per thread (`rusqlite::Connection` is not `Sync`), statements prepared once per
//! connection.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use rusqlite::types::ValueRef;
use thread_local::ThreadLocal;

use crate::finder::{self, AbsentRange, LazyNode, NodeRef, NodeStore};
use crate::name::Name;
use crate::rr::{Class, RRset, RType, Rdata};
use crate::source::{DataSource, DataSourceError, Lookup, LookupOptions, ZoneRef};

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
/// How long a thread's reads wait in all on writers' locks, per batch of
/// queries (or per query outside a batch), before failing with SERVFAIL
/// (rollback-journal DBs: a writer's transaction locks readers out; WAL
/// readers never wait). Shared by the batch so that a long write stalls a UDP
/// worker this long once, not once per query of its batch.
const LOCK_WAIT: Duration = Duration::from_millis(250);

thread_local! {
    /// When this thread's current wait budget ([`LOCK_WAIT`]) runs out: set
    /// by the first lock wait of a batch, cleared when a batch or an unbatched
    /// read starts.
    static LOCK_DEADLINE: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// SQLite's busy handler for serving connections: true (retry, after a
/// short sleep) until this thread's [`LOCK_DEADLINE`].
fn wait_for_lock(_retries: i32) -> bool {
    let now = Instant::now();
    let deadline = LOCK_DEADLINE.with(|d| match d.get() {
        Some(t) => t,
        None => {
            d.set(Some(now + LOCK_WAIT));
            now + LOCK_WAIT
        }
    });
    if now >= deadline {
        return false;
    }
    std::thread::sleep(Duration::from_millis(2).min(deadline - now));
    true
}
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
    watch: Mutex<Watch>,
    generation: AtomicU64,
    /// The file opened: (device, inode), to tell a file replaced or deleted
    /// under the same path ([`SqliteSource::file_changed`]).
    file_id: (u64, u64),
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
    conn: Connection,
    data_version: i64,
    checked: Instant,
}

fn storage(path: &Path, e: impl std::fmt::Display) -> DataSourceError {
    DataSourceError::Storage(format!("zone DB {}: {e}", path.display()))
}

impl SqliteSource {
    /// Opens the DB at `path` for serving: read-only, schema 2.x required.
    ///
    /// Errors: a missing file, a file that is not a zone DB, or an unsupported
    /// schema version; the message names the file and the versions.
    pub fn open(path: &Path) -> Result<SqliteSource, DataSourceError> {
        let (conn, _version) = Self::connect(path)?;
        let (watch_conn, _) = Self::connect(path)?;
        let data_version = data_version(&watch_conn).map_err(|e| storage(path, e))?;
        let file_id = file_id(path)?;
        let pool = ThreadLocal::new();
        pool.get_or(|| RefCell::new(vec![conn]));
        Ok(SqliteSource {
            path: path.to_path_buf(),
            pool,
            batch: ThreadLocal::new(),
            watch: Mutex::new(Watch {
                conn: watch_conn,
                data_version,
                checked: Instant::now(),
            }),
            generation: AtomicU64::new(1),
            file_id,
        })
    }

    /// True when the path no longer names the file opened: another file was
    /// moved into its place (which open connections do not see; reopen it).
    ///
    /// Errors: the path no longer exists or cannot be examined (deleted while
    /// served).
    pub fn file_changed(&self) -> Result<bool, DataSourceError> {
        Ok(file_id(&self.path)? != self.file_id)
    }

    fn connect(
        path: &Path,
    ) -> Result<(Connection, authd_migrations::SchemaVersion), DataSourceError> {
        let (mut conn, version) = authd_migrations::open_for_serving(path)
            .map_err(|e| DataSourceError::Storage(e.to_string()))?;
        conn.busy_handler(Some(wait_for_lock))
            .map_err(|e| storage(path, e))?;
        Ok((conn, version))
    }

    /// The DB file served.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A connection from the pool, or a new one when all are in use.
    fn take_conn(&self) -> Result<Connection, DataSourceError> {
        let pooled = self.pool.get_or_default().borrow_mut().pop();
        match pooled {
            Some(c) => Ok(c),
            None => Ok(Self::connect(&self.path)?.0),
        }
    }

    /// Puts `conn` back in the pool, unless it was left inside a transaction.
    fn return_conn(&self, conn: Connection) {
        if conn.is_autocommit() {
            self.pool.get_or_default().borrow_mut().push(conn);
        }
    }

    /// A pooled connection inside a read transaction: one snapshot, and the
    /// file locking and change checks SQLite does per transaction (several
    /// system calls) once instead of once per statement. Inside a batch
    /// ([`DataSource::begin_batch`]) it is the batch's connection, whose
    /// transaction stays open until the batch ends.
    fn lease(&self) -> Result<Connection, DataSourceError> {
        if let Some(batch) = self.batch.get() {
            let mut batch = batch.borrow_mut();
            if batch.depth > 0
                && let Some((conn, generation)) = batch.conn.take()
            {
                // A commit seen since the transaction began (a cache flushed
                // for it fills again from here): a new snapshot, which has it.
                // Rollback-journal writers wait for readers; WAL writers do not.
                if generation == self.generation.load(Ordering::Acquire) {
                    return Ok(conn);
                }
                end_read(&conn);
                self.return_conn(conn);
            }
        }
        if self.batch.get().is_none_or(|b| b.borrow().depth == 0) {
            LOCK_DEADLINE.with(|d| d.set(None));
        }
        // Read before the snapshot starts (at the first statement), so that a
        // change it misses shows as a later count.
        let generation = self.generation.load(Ordering::Acquire);
        if let Some(batch) = self.batch.get() {
            batch.borrow_mut().began = generation;
        }
        let conn = self.take_conn()?;
        if let Err(e) = self.begin_read(&conn) {
            self.return_conn(conn);
            return Err(e);
        }
        Ok(conn)
    }

    /// Gives back a connection from [`Self::lease`]: kept, transaction open,
    /// for the rest of this thread's batch; otherwise (or after a failure,
    /// which may have left the transaction in any state) its transaction ends.
    fn release(&self, conn: Connection, ok: bool) {
        if ok
            && !conn.is_autocommit()
            && let Some(batch) = self.batch.get()
        {
            let mut batch = batch.borrow_mut();
            if batch.depth > 0 && batch.conn.is_none() {
                let began = batch.began;
                batch.conn = Some((conn, began));
                return;
            }
        }
        end_read(&conn);
        self.return_conn(conn);
    }

    /// Runs `f` over a connection from [`Self::lease`].
    fn with_read<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, DataSourceError>,
    ) -> Result<T, DataSourceError> {
        let conn = self.lease()?;
        let result = f(&conn);
        self.release(conn, result.is_ok());
        result
    }

    /// Starts a read transaction on `conn` (prepared once per connection:
    /// parsing `BEGIN` anew cost more than running it).
    fn begin_read(&self, conn: &Connection) -> Result<(), DataSourceError> {
        conn.prepare_cached("BEGIN")
            .and_then(|mut stmt| stmt.execute([]))
            .map(drop)
            .map_err(|e| storage(&self.path, e))
    }

    /// Runs `f` with a pooled connection, outside any transaction.
    fn with_conn<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, DataSourceError>,
    ) -> Result<T, DataSourceError> {
        let conn = self.take_conn()?;
        let result = f(&conn);
        self.return_conn(conn);
        result
    }

    /// Runs [`finder::find`] over `conn`, reading nodes through `memo`.
    fn find(
        &self,
        conn: &Connection,
        memo: &Memo,
        zone: &ZoneRef,
        qname: &Name,
        qtype: RType,
        opts: LookupOptions,
    ) -> Result<Lookup, DataSourceError> {
        let view = ZoneView {
            conn,
            zone,
            path: &self.path,
            memo,
        };
        finder::find(&view, &zone.origin, qname, qtype, opts)
    }
}

/// Ends a read transaction, if one is open. Nothing was written: ending it only
/// releases the snapshot, so a failed COMMIT is rolled back and forgotten.
fn end_read(conn: &Connection) {
    if !conn.is_autocommit()
        && conn
            .prepare_cached("COMMIT")
            .and_then(|mut stmt| stmt.execute([]))
            .is_err()
    {
        let _ = conn.execute_batch("ROLLBACK");
    }
}

/// (device, inode) of the file at `path`.
fn file_id(path: &Path) -> Result<(u64, u64), DataSourceError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|e| storage(path, e))?;
    Ok((meta.dev(), meta.ino()))
}

fn data_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA data_version", [], |r| r.get(0))
}

/// Reads a column as text whatever its storage class (V1 DBs declared `STRING`,
/// which has NUMERIC affinity).
pub(crate) fn text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(match std::str::from_utf8(t) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(t).into_owned(),
        }),
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Null => None,
    }
}

/// [`text`], borrowing the column when it holds valid UTF-8.
fn text_cow(v: ValueRef<'_>) -> Option<std::borrow::Cow<'_, str>> {
    match v {
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(match std::str::from_utf8(t) {
            Ok(s) => std::borrow::Cow::Borrowed(s),
            Err(_) => String::from_utf8_lossy(t),
        }),
        other => text(other).map(std::borrow::Cow::Owned),
    }
}

/// A text column's bytes as stored.
fn bytes(v: ValueRef<'_>) -> Option<Vec<u8>> {
    match v {
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(t.to_vec()),
        _ => None,
    }
}

/// Reads a column as an integer whatever its storage class; a REAL with a
/// fraction (a TTL of 1.5, say) is not one.
pub(crate) fn int(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(i) => Some(i),
        ValueRef::Text(t) => std::str::from_utf8(t).ok()?.trim().parse().ok(),
        ValueRef::Real(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => Some(f as i64),
        _ => None,
    }
}

/// One row of a node: its type and TTL checked, its rdata text kept unparsed.
struct Row {
    rtype: RType,
    /// As stored; checked when the row's type is built ([`RowNode::ttl`]).
    ttl: Option<i64>,
    /// The rdata text: a range of [`RowNode::text`].
    text: std::ops::Range<usize>,
    /// For an RRSIG row, the type covered as its text names it (the first
    /// field); `None` when that does not read as a type (`\#` data, say).
    covers: Option<RType>,
}

/// The RRset of one type at a node, each form built on first use.
struct Slot {
    rtype: RType,
    /// The set without RRSIGs.
    plain: OnceLock<Result<Arc<RRset>, DataSourceError>>,
    /// The set with its RRSIGs attached.
    signed: OnceLock<Result<Arc<RRset>, DataSourceError>>,
}

/// Collects the rows at one owner for a [`RowNode`], checking the cheap
/// columns (type, TTL) as they come.
struct RowsBuilder<'a> {
    zone: &'a ZoneRef,
    owner: Name,
    text: String,
    rows: Vec<Row>,
}

impl<'a> RowsBuilder<'a> {
    fn new(zone: &'a ZoneRef, owner: Name) -> Self {
        RowsBuilder {
            zone,
            owner,
            text: String::new(),
            rows: Vec::new(),
        }
    }

    fn bad(&self, reason: String) -> DataSourceError {
        bad_data(&self.zone.origin, &self.owner, reason)
    }

    /// Adds one row; `ttl` is `None` when the column is NULL or not a whole number.
    /// A bad type fails the node (its rows cannot be told apart); a bad TTL,
    /// like bad rdata, only the lookups that need its type (as BIND 10's
    /// database.cc, which read the TTL of the wanted types only).
    fn add_row(
        &mut self,
        rdtype: &str,
        ttl: Option<i64>,
        rdata: &str,
    ) -> Result<(), DataSourceError> {
        let rtype: RType = rdtype.parse().map_err(|e| self.bad(format!("{e}")))?;
        let covers = if rtype == RType::RRSIG {
            rdata
                .split_ascii_whitespace()
                .next()
                .and_then(|t| t.parse::<RType>().ok())
        } else {
            None
        };
        if self.rows.is_empty() {
            // Room for a typical node at once instead of growing by doubling.
            self.rows.reserve(16);
            self.text.reserve(512);
        }
        let start = self.text.len();
        self.text.push_str(rdata);
        self.rows.push(Row {
            rtype,
            ttl,
            text: start..self.text.len(),
            covers,
        });
        Ok(())
    }

    /// The node, after BIND 10's per-node rules (one CNAME, nothing beside it
    /// but RRSIG/NSEC; one DNAME). A type with several CNAME or DNAME rows is
    /// built here to count its distinct records.
    fn finish(self) -> Result<RowNode, DataSourceError> {
        let mut types: Vec<RType> = self
            .rows
            .iter()
            .map(|r| r.rtype)
            .filter(|t| *t != RType::RRSIG)
            .collect();
        types.sort_unstable();
        types.dedup();
        let node = RowNode {
            origin: self.zone.origin.clone(),
            owner: self.owner,
            text: self.text,
            rows: self.rows,
            slots: types
                .into_iter()
                .map(|rtype| Slot {
                    rtype,
                    plain: OnceLock::new(),
                    signed: OnceLock::new(),
                })
                .collect(),
        };
        let several = |t: RType| node.rows.iter().filter(|r| r.rtype == t).count() > 1;
        if several(RType::CNAME)
            && node
                .get(RType::CNAME, false)?
                .is_some_and(|c| c.rdatas.len() > 1)
        {
            return Err(node.bad("more than one CNAME".into()));
        }
        if node.has(RType::CNAME)
            && node
                .slots
                .iter()
                .any(|s| s.rtype != RType::CNAME && s.rtype != RType::NSEC)
        {
            return Err(node.bad("CNAME and other data".into()));
        }
        if several(RType::DNAME)
            && node
                .get(RType::DNAME, false)?
                .is_some_and(|d| d.rdatas.len() > 1)
        {
            return Err(node.bad("more than one DNAME".into()));
        }
        // Two SOAs would both be served as the zone's (RFC 1035 §5.2: exactly
        // one per zone); loadzone, memory zones and transfers refuse them too.
        if several(RType::SOA)
            && node
                .get(RType::SOA, false)?
                .is_some_and(|d| d.rdatas.len() > 1)
        {
            return Err(node.bad("more than one SOA".into()));
        }
        Ok(node)
    }
}

fn bad_data(origin: &Name, owner: &Name, reason: String) -> DataSourceError {
    DataSourceError::BadData {
        zone: origin.to_string(),
        name: owner.to_string(),
        reason,
    }
}

/// The records at one owner as stored, each type parsed on first use
/// ([`LazyNode`]): a lookup at the apex that wants the SOA parses neither the
/// NS nor the DNSKEY rows, and RRSIG rows are parsed only for a lookup that
/// wants DNSSEC records, and then only those covering the type asked for.
struct RowNode {
    origin: Name,
    owner: Name,
    text: String,
    /// In the order read.
    rows: Vec<Row>,
    /// One per type other than RRSIG, in type order.
    slots: Vec<Slot>,
}

impl RowNode {
    fn bad(&self, reason: String) -> DataSourceError {
        bad_data(&self.origin, &self.owner, reason)
    }

    fn ttl(&self, row: &Row) -> Result<u32, DataSourceError> {
        // RFC 2181 §8: 0..=2^31-1, as loadzone enforces.
        row.ttl
            .and_then(|t| u32::try_from(t).ok())
            .filter(|t| *t <= i32::MAX as u32)
            .ok_or_else(|| match row.ttl {
                Some(t) => self.bad(format!(
                    "{} row: bad TTL {t} (RFC 2181 §8: 0 to 2147483647)",
                    row.rtype
                )),
                None => self.bad(format!("{} row: TTL not a whole number", row.rtype)),
            })
    }

    fn parse(&self, row: &Row) -> Result<Rdata, DataSourceError> {
        let text = self.text.get(row.text.clone()).unwrap_or_default();
        Rdata::from_text(row.rtype, text, &self.origin).map_err(|e| self.bad(e.to_string()))
    }

    fn plain<'a>(&'a self, slot: &'a Slot) -> Result<&'a Arc<RRset>, DataSourceError> {
        let built = slot.plain.get_or_init(|| {
            let mut set: Option<RRset> = None;
            for row in self.rows.iter().filter(|r| r.rtype == slot.rtype) {
                let ttl = self.ttl(row)?;
                let rdata = self.parse(row)?;
                set.get_or_insert_with(|| {
                    RRset::new(self.owner.clone(), slot.rtype, Class::IN, ttl)
                })
                .push(ttl, rdata);
            }
            set.map(Arc::new)
                .ok_or_else(|| self.bad(format!("no {} rows", slot.rtype)))
        });
        built.as_ref().map_err(Clone::clone)
    }

    fn signed<'a>(&'a self, slot: &'a Slot) -> Result<&'a Arc<RRset>, DataSourceError> {
        let built = slot.signed.get_or_init(|| {
            let plain = self.plain(slot)?;
            let mut set: Option<RRset> = None;
            // In row order, as they were always attached; an RRSIG whose text
            // does not name its covered type up front is parsed to find it.
            for row in self
                .rows
                .iter()
                .filter(|r| r.rtype == RType::RRSIG && r.covers.is_none_or(|t| t == slot.rtype))
            {
                let sig = self.parse(row)?;
                if sig.rrsig_type_covered() == Some(slot.rtype) {
                    let ttl = self.ttl(row)?;
                    set.get_or_insert_with(|| RRset::clone(plain))
                        .push_sig(ttl, sig);
                }
            }
            Ok(set.map_or_else(|| plain.clone(), Arc::new))
        });
        built.as_ref().map_err(Clone::clone)
    }
}

impl LazyNode for RowNode {
    fn has(&self, rtype: RType) -> bool {
        self.slots.iter().any(|s| s.rtype == rtype)
    }

    fn get(&self, rtype: RType, dnssec: bool) -> Result<Option<&Arc<RRset>>, DataSourceError> {
        let Some(slot) = self.slots.iter().find(|s| s.rtype == rtype) else {
            return Ok(None);
        };
        if dnssec {
            return self.signed(slot).map(Some);
        }
        // Built with its RRSIGs already by an earlier lookup of the query.
        if let Some(Ok(set)) = slot.signed.get() {
            return Ok(Some(set));
        }
        self.plain(slot).map(Some)
    }

    fn all(&self) -> Result<Vec<Arc<RRset>>, DataSourceError> {
        self.slots.iter().map(|s| self.signed(s).cloned()).collect()
    }
}

/// The node handed to [`finder::find`].
fn lazy(node: Arc<RowNode>, dnssec: bool) -> NodeRef<'static> {
    NodeRef::Lazy { node, dnssec }
}

/// Every RRset of a node, all rows parsed (transfers, loading into memory).
fn all_rrsets(rows: RowsBuilder<'_>) -> Result<Vec<RRset>, DataSourceError> {
    let node = rows.finish()?;
    let sets = node.all()?;
    drop(node);
    Ok(sets.into_iter().map(Arc::unwrap_or_clone).collect())
}

/// Nodes already read by the lookups of one query, with the zone id: a
/// referral's glue lookups all pass through the apex and the same few cuts,
/// which are then read once instead of once per target. Keyed by the exact
/// name (case too), since RRsets take their owner from the name asked for.
type Memo = RefCell<Vec<(i64, Name, Option<Arc<RowNode>>)>>;

/// The zone-scoped view [`finder::find`] walks.
struct ZoneView<'a> {
    conn: &'a Connection,
    zone: &'a ZoneRef,
    path: &'a Path,
    memo: &'a Memo,
}

impl NodeStore for ZoneView<'_> {
    fn node(&self, name: &Name, dnssec: bool) -> Result<Option<NodeRef<'_>>, DataSourceError> {
        if let Some((_, _, node)) = self
            .memo
            .borrow()
            .iter()
            .find(|(z, n, _)| *z == self.zone.id && n.eq_case(name))
        {
            return Ok(node.clone().map(|node| lazy(node, dnssec)));
        }
        let mut stmt = self
            .conn
            .prepare_cached("SELECT rdtype, ttl, rdata FROM records WHERE zone_id=?1 AND name=?2")
            .map_err(|e| storage(self.path, e))?;
        let mut rows = stmt
            .query(rusqlite::params![self.zone.id, name.to_string()])
            .map_err(|e| storage(self.path, e))?;
        let mut builder = RowsBuilder::new(self.zone, name.clone());
        let mut any = false;
        while let Some(row) = rows.next().map_err(|e| storage(self.path, e))? {
            any = true;
            let (Some(rdtype), Some(rdata)) = (
                row.get_ref(0).ok().and_then(text_cow),
                row.get_ref(2).ok().and_then(text_cow),
            ) else {
                return Err(builder.bad("row with a NULL or unreadable column".into()));
            };
            let ttl = row.get_ref(1).ok().and_then(int);
            builder.add_row(&rdtype, ttl, &rdata)?;
        }
        let node = if any {
            Some(Arc::new(builder.finish()?))
        } else {
            None
        };
        self.memo
            .borrow_mut()
            .push((self.zone.id, name.clone(), node.clone()));
        Ok(node.map(|node| lazy(node, dnssec)))
    }

    fn has_descendants(&self, name: &Name) -> Result<bool, DataSourceError> {
        // Names below X have an rname that starts with X's rname ("com.example.");
        // a range scan on the NOCASE index finds them without LIKE's `_`/`%` quirks.
        let (sql, lower, upper) = if name.is_root() {
            (
                "SELECT 1 FROM records WHERE zone_id=?1 AND rname <> ?2 AND ?3 <> '' LIMIT 1",
                ".".to_string(),
                "x".to_string(),
            )
        } else {
            let r = name.reversed_text();
            let upper = format!("{}/", &r[..r.len() - 1]);
            (
                "SELECT 1 FROM records WHERE zone_id=?1 AND rname > ?2 AND rname < ?3 LIMIT 1",
                r,
                upper,
            )
        };
        let mut stmt = self
            .conn
            .prepare_cached(sql)
            .map_err(|e| storage(self.path, e))?;
        stmt.exists(rusqlite::params![self.zone.id, lower, upper])
            .map_err(|e| storage(self.path, e))
    }

    fn absent_range(&self, name: &Name) -> Result<Option<AbsentRange>, DataSourceError> {
        if name.is_root() {
            return Ok(None);
        }
        let r = name.reversed_text();
        let neighbour = |sql: &str| -> Result<Option<Vec<u8>>, DataSourceError> {
            let mut stmt = self
                .conn
                .prepare_cached(sql)
                .map_err(|e| storage(self.path, e))?;
            let mut rows = stmt
                .query(rusqlite::params![self.zone.id, r])
                .map_err(|e| storage(self.path, e))?;
            let Some(row) = rows.next().map_err(|e| storage(self.path, e))? else {
                return Ok(None);
            };
            let Some(mut key) = row.get_ref(0).ok().and_then(bytes) else {
                return Err(storage(self.path, "rname NULL or unreadable"));
            };
            key.make_ascii_lowercase();
            Ok(Some(key))
        };
        let below = neighbour(
            "SELECT rname FROM records WHERE zone_id=?1 AND rname < ?2 ORDER BY rname DESC LIMIT 1",
        )?;
        let above = neighbour(
            "SELECT rname FROM records WHERE zone_id=?1 AND rname > ?2 ORDER BY rname LIMIT 1",
        )?;
        let range = AbsentRange { below, above };
        // The name itself, or a name below it, is stored after all (an rname
        // spelled unlike ours): no range.
        Ok(range.covers(&finder::absent_key(name)).then_some(range))
    }

    fn covering_nsec(&self, name: &Name) -> Result<Option<Arc<RRset>>, DataSourceError> {
        // BIND 10's FIND_PREVIOUS over the reversed names is only an
        // approximation of canonical order: bytes below `.` (`*`, `-`, `!`)
        // sort before the label separator, and in the root zone "." sorts
        // after "*." (regression: `root_wildcard_nsec_sqlite`). So the NSEC
        // found that way is checked against its next-name field and, when it
        // does not cover `name`, the exact one is found in canonical order.
        if let Some(nsec) = self.nsec_by_rname(name)?
            && nsec_covers(&nsec, name)
        {
            return Ok(Some(nsec));
        }
        let mut stmt = self
            .conn
            .prepare_cached("SELECT name FROM records WHERE zone_id=?1 AND rdtype='NSEC'")
            .map_err(|e| storage(self.path, e))?;
        let mut rows = stmt
            .query(rusqlite::params![self.zone.id])
            .map_err(|e| storage(self.path, e))?;
        let (mut below, mut last): (Option<Name>, Option<Name>) = (None, None);
        while let Some(row) = rows.next().map_err(|e| storage(self.path, e))? {
            let Some(owner) = row
                .get_ref(0)
                .ok()
                .and_then(text)
                .and_then(|t| Name::parse(&t, Some(&self.zone.origin)).ok())
            else {
                continue;
            };
            if owner <= *name && below.as_ref().is_none_or(|b| owner > *b) {
                below = Some(owner.clone());
            }
            if last.as_ref().is_none_or(|l| owner > *l) {
                last = Some(owner);
            }
        }
        let Some(owner) = below.or(last) else {
            return Ok(None);
        };
        match self.node(&owner, true)? {
            Some(n) => Ok(n.get(RType::NSEC)?.cloned()),
            None => Ok(None),
        }
    }

    fn covering_nsec3(&self, hash: &[u8]) -> Result<Option<(Arc<RRset>, bool)>, DataSourceError> {
        self.covering_nsec3_impl(hash)
    }
}

/// True when `nsec` matches or covers `name` (RFC 4035 §3.1.3): owner ≤ name <
/// next name, or the last NSEC of the chain (next ≤ owner) and owner ≤ name.
/// An unreadable next name counts as covering (nothing better to check with).
fn nsec_covers(nsec: &RRset, name: &Name) -> bool {
    let Some(next) = nsec.rdatas.first().and_then(|r| {
        let wire = r.as_wire();
        let len = crate::name::wire_name_len(wire)?;
        Name::from_wire(wire.get(..len)?).ok()
    }) else {
        return true;
    };
    let owner = &nsec.owner;
    if owner > name {
        return false;
    }
    next <= *owner || *name < next
}

impl ZoneView<'_> {
    /// The first column of the first row of the first of `statements` that
    /// returns a row (`?1` = zone id, `?2` = `key`): a "previous" lookup and its
    /// wrap-round fallback.
    fn first_text(
        &self,
        statements: [&str; 2],
        key: &str,
    ) -> Result<Option<String>, DataSourceError> {
        for sql in statements {
            let mut stmt = self
                .conn
                .prepare_cached(sql)
                .map_err(|e| storage(self.path, e))?;
            let mut rows = stmt
                .query(rusqlite::params![self.zone.id, key])
                .map_err(|e| storage(self.path, e))?;
            if let Some(row) = rows.next().map_err(|e| storage(self.path, e))? {
                return Ok(row.get_ref(0).ok().and_then(text));
            }
        }
        Ok(None)
    }

    /// The NSEC of the greatest owner ≤ `name` in `rname` (text) order, wrapping round.
    fn nsec_by_rname(&self, name: &Name) -> Result<Option<Arc<RRset>>, DataSourceError> {
        let owner = self.first_text(
            [
                "SELECT name FROM records WHERE zone_id=?1 AND rdtype='NSEC' AND rname <= ?2 \
                 ORDER BY rname DESC LIMIT 1",
                "SELECT name FROM records WHERE zone_id=?1 AND rdtype='NSEC' AND ?2 <> '' \
                 ORDER BY rname DESC LIMIT 1",
            ],
            &name.reversed_text(),
        )?;
        let Some(owner) = owner else {
            return Ok(None);
        };
        let owner =
            Name::parse(&owner, Some(&self.zone.origin)).map_err(|e| DataSourceError::BadData {
                zone: self.zone.origin.to_string(),
                name: owner.clone(),
                reason: e.to_string(),
            })?;
        match self.node(&owner, true)? {
            Some(n) => Ok(n.get(RType::NSEC)?.cloned()),
            None => Ok(None),
        }
    }

    fn covering_nsec3_impl(
        &self,
        hash: &[u8],
    ) -> Result<Option<(Arc<RRset>, bool)>, DataSourceError> {
        let hash = String::from_utf8_lossy(hash).into_owned();
        let found = self.first_text(
            [
                "SELECT DISTINCT hash FROM nsec3 WHERE zone_id=?1 AND hash <= ?2 ORDER BY hash DESC LIMIT 1",
                "SELECT DISTINCT hash FROM nsec3 WHERE zone_id=?1 AND ?2 <> '' ORDER BY hash DESC LIMIT 1",
            ],
            &hash,
        )?;
        let Some(found) = found else {
            return Ok(None);
        };
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT rdtype, ttl, rdata, owner FROM nsec3 WHERE zone_id=?1 AND hash=?2",
            )
            .map_err(|e| storage(self.path, e))?;
        let mut rows = stmt
            .query(rusqlite::params![self.zone.id, found])
            .map_err(|e| storage(self.path, e))?;
        let mut builder: Option<RowsBuilder<'_>> = None;
        while let Some(row) = rows.next().map_err(|e| storage(self.path, e))? {
            let (Some(rdtype), Some(ttl), Some(rdata), Some(owner)) = (
                row.get_ref(0).ok().and_then(text),
                row.get_ref(1).ok().and_then(int),
                row.get_ref(2).ok().and_then(text),
                row.get_ref(3).ok().and_then(text),
            ) else {
                return Err(storage(self.path, "nsec3 row with a NULL column"));
            };
            if builder.is_none() {
                let owner = Name::parse(&owner, Some(&self.zone.origin)).map_err(|e| {
                    DataSourceError::BadData {
                        zone: self.zone.origin.to_string(),
                        name: owner.clone(),
                        reason: e.to_string(),
                    }
                })?;
                builder = Some(RowsBuilder::new(self.zone, owner));
            }
            if let Some(b) = builder.as_mut() {
                b.add_row(&rdtype, Some(ttl), &rdata)?;
            }
        }
        let Some(builder) = builder else {
            return Ok(None);
        };
        let exact = found.eq_ignore_ascii_case(&hash);
        Ok(builder
            .finish()?
            .get(RType::NSEC3, true)?
            .map(|s| (s.clone(), exact)))
    }
}

impl DataSource for SqliteSource {
    fn describe(&self) -> String {
        format!("sqlite3:{}", self.path.display())
    }

    fn find_zone(&self, qname: &Name) -> Result<Option<ZoneRef>, DataSourceError> {
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
        // One read transaction for the whole query, or the whole batch (see `lease`).
        let conn = match self.lease() {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        let scope = QueryScope {
            source: self,
            state: Mutex::new(ScopeState {
                conn,
                memo: Memo::default(),
            }),
        };
        let result = f(&scope);
        // A poisoned lock (a panic inside `f` that was caught there) leaves the
        // connection in an unknown state: it is dropped, not pooled.
        if let Ok(state) = scope.state.into_inner() {
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

    fn zone_rrsets(&self, zone: &ZoneRef) -> Result<Vec<RRset>, DataSourceError> {
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
            Ok(out)
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
        // Poll PRAGMA data_version at most every CHANGE_POLL: it changes when any
        // other connection (loadzone, an sqlite3 shell) commits to the file.
        if let Ok(mut w) = self.watch.try_lock()
            && w.checked.elapsed() >= CHANGE_POLL
        {
            w.checked = Instant::now();
            if let Ok(v) = data_version(&w.conn)
                && v != w.data_version
            {
                w.data_version = v;
                self.generation.fetch_add(1, Ordering::Release);
            }
        }
        self.generation.load(Ordering::Acquire)
    }
}

/// The lookups of one query ([`DataSource::with_query_scope`]): one pooled
/// connection, and a memo of the nodes read, so that a node is read and
/// parsed once per query however many lookups pass through it (the apex for
/// the answer, the negative SOA and each glue target). Nothing outlives the
/// query.
struct QueryScope<'a> {
    source: &'a SqliteSource,
    state: Mutex<ScopeState>,
}

struct ScopeState {
    conn: Connection,
    memo: Memo,
}

impl DataSource for QueryScope<'_> {
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
        let state = self
            .state
            .lock()
            .map_err(|_| storage(&self.source.path, "query scope lock poisoned"))?;
        self.source
            .find(&state.conn, &state.memo, zone, qname, qtype, opts)
    }

    fn zones(&self) -> Result<Vec<ZoneRef>, DataSourceError> {
        self.source.zones()
    }

    fn zone_rrsets(&self, zone: &ZoneRef) -> Result<Vec<RRset>, DataSourceError> {
        self.source.zone_rrsets(zone)
    }

    fn generation(&self) -> u64 {
        self.source.generation()
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
        let state = match self.state.lock() {
            Ok(s) => s,
            Err(_) => return Some(Err(storage(&self.source.path, "query scope lock poisoned"))),
        };
        Some(f(&ZoneView {
            conn: &state.conn,
            zone,
            path: &self.source.path,
            memo: &state.memo,
        }))
    }
}
