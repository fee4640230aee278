//! [`SqliteWriter`]: the write side ([`ZoneWriter`]) of a BIND 10 sqlite3
//! zone DB, for the served source ([`SqliteSource::writer`](crate::DataSource::writer))
//! and for the tools (`loadzone`, `zone`).
//!
//! One writer connection is kept between writes (opening one, checking its
//! schema and preparing statements cost about as much as a small update);
//! outside a write it holds no transaction and no snapshot, so each write's
//! `BEGIN IMMEDIATE` sees every commit made before it, by anyone. A write
//! that finds the kept connection in use opens one of its own. The
//! connection is dropped after a storage error and reopened at the next
//! write, so a DB that was read-only (or locked) when authd started is
//! written once that is mended, without a restart: a write refused as
//! read-only (`SQLITE_READONLY`: a `-wal` created read-only beside a file
//! that was) is tried once more at once on a new connection, which opens
//! the log afresh.
//!
//! What a commit leaves on disk is checked ([`super::durable`]): no write
//! into a file shorter than after the last write unless `quick_check`
//! passes, and after an I/O error at commit a small commit on a fresh connection
//! voids what the failed one may have left in the `-wal` (else WAL recovery
//! after a crash would bring back a change that was answered as failed).
//! Storage errors name the file.
//!
//! A served source's writer never creates a file and writes only the file
//! the source opened: a DB deleted or replaced while served gives
//! [`WriteError::Gone`] until a reload opens the new one. After each commit
//! it tells the source ([`ChangeWatch::commit_seen`]), which moves its
//! generation at once: the next query sees the change.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};

use rusqlite::{Connection, ErrorCode, OptionalExtension, params};

use super::{ChangeWatch, WriterSlot};

/// Writer connections opened in this process (each one's number).
static CONNECTIONS: AtomicU64 = AtomicU64::new(0);
use crate::name::Name;
use crate::rr::{Rdata, Record};
use crate::sqlite_admin::{self, DumpStyle, ZoneSummary};
use crate::sqlite_load::{self, LoadError, LoadReport};
use crate::write::{
    CatalogMember, Change, DiffRow, Difference, JournalPolicy, Scope, SecondaryState, SerialPolicy,
    UpdateReport, WRITE_LOCK_WAIT, WriteError, ZoneWriter,
};
use crate::zonefile::SourcedRecord;

/// The write side of one sqlite3 zone DB.
pub struct SqliteWriter {
    path: PathBuf,
    /// A served source's writer: the (device, inode) the source opened and
    /// the source's change watch. `None`: a tool's writer.
    served: Option<((u64, u64), Arc<ChangeWatch>)>,
    /// The kept writer connection and its number (shared with a served
    /// source's change watch, which reads `data_version` on it).
    conn: Arc<WriterSlot>,
    /// A connection that only reads `PRAGMA data_version`
    /// ([`ZoneWriter::change_mark`]): it changes for commits made on other
    /// connections, the writer's own included.
    mark: Mutex<Option<Connection>>,
    /// Why every write is refused (a served source that could open its
    /// file only as immutable): the message names the file.
    refused: Option<String>,
    /// The main file's length after the last write seen (when the writer
    /// was made, then after each write): a shorter file is checked before
    /// the next write ([`super::durable::check_not_shortened`]).
    seen_len: AtomicU64,
    /// [`authd_migrations::AUTHD_INDEXES`] are known to exist (made before
    /// this writer's first write).
    indexed: std::sync::atomic::AtomicBool,
}

/// Whether the DB behind `conn` has table `name` (authd's own tables are
/// created when first written).
fn has_table(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?1")
        .and_then(|mut s| s.exists([name]))
}

fn sql(action: &'static str) -> impl Fn(rusqlite::Error) -> WriteError {
    move |source| WriteError::Sqlite { action, source }
}

/// A DB that cannot be opened for writing (the message names the file).
fn opening(e: authd_migrations::Error) -> WriteError {
    WriteError::Open(e.to_string())
}

/// The SQLite error code behind a storage error, if it is one.
fn sqlite_code(e: &WriteError) -> Option<ErrorCode> {
    match e {
        WriteError::Sqlite { source, .. } | WriteError::Load(LoadError::Sqlite { source, .. }) => {
            source.sqlite_error_code()
        }
        _ => None,
    }
}

/// A storage error of the DB at `path` in words that name the file and say
/// what it means ([`WriteError::Storage`]); other errors as they are.
fn named(path: &Path, e: WriteError) -> WriteError {
    let (action, source) = match &e {
        WriteError::Sqlite { action, source }
        | WriteError::Load(LoadError::Sqlite { action, source, .. }) => (*action, source),
        _ => return e,
    };
    let file = path.display();
    if let Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) = source.sqlite_error_code() {
        return WriteError::Busy(format!("zone DB {file}: {action} failed: {source}"));
    }
    WriteError::Storage(match source.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => format!(
            "zone DB {file} is corrupt ({action} failed: {source}); restore it from a \
             backup (docs/ZONE-ADMIN.md, Backups)"
        ),
        Some(ErrorCode::ReadOnly) => format!(
            "zone DB {file} cannot be written ({action} failed: {source}); check the \
             permissions of the file, of its -wal and -shm files and of its folder"
        ),
        _ => format!("zone DB {file}: {action} failed: {source}"),
    })
}

/// How long a tool's writer (`zone`, `loadzone`) waits for another
/// writer's lock: an operator at a terminal can wait longer than a query.
const TOOL_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// True when `e` says the storage failed (the kept connection is then
/// dropped), not that the change was refused.
fn is_storage(e: &WriteError) -> bool {
    matches!(
        e,
        WriteError::Sqlite { .. }
            | WriteError::Load(LoadError::Sqlite { .. })
            | WriteError::Storage(_)
            | WriteError::Busy(_)
            | WriteError::Gone(_)
            | WriteError::Open(_)
    )
}

impl SqliteWriter {
    /// A tool's writer for the DB at `path`, created at the newest schema if
    /// missing (`loadzone`, `zone create`, a secondary zone's DB).
    ///
    /// Errors: the file cannot be created or opened read-write, or is not a
    /// servable zone DB; the message names the file.
    pub fn create(path: &Path) -> Result<SqliteWriter, WriteError> {
        let conn = authd_migrations::open_or_create(path).map_err(opening)?;
        Ok(SqliteWriter {
            path: path.to_path_buf(),
            served: None,
            conn: Arc::new(Mutex::new(Some((conn, 0)))),
            mark: Mutex::new(None),
            refused: None,
            seen_len: AtomicU64::new(super::durable::file_len(path)),
            indexed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// A tool's writer for the existing DB at `path` (never created).
    ///
    /// Errors: a missing file (`no such file`), one that cannot be opened
    /// read-write, or is not a servable zone DB.
    pub fn open(path: &Path) -> Result<SqliteWriter, WriteError> {
        let conn = authd_migrations::open_for_writing(path, TOOL_LOCK_WAIT).map_err(opening)?;
        Ok(SqliteWriter {
            path: path.to_path_buf(),
            served: None,
            conn: Arc::new(Mutex::new(Some((conn, 0)))),
            mark: Mutex::new(None),
            refused: None,
            seen_len: AtomicU64::new(super::durable::file_len(path)),
            indexed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// A tool's handle on the existing DB at `path`, opened read-only (so a
    /// file without write permission works) for the commands that only read
    /// (`zone list`, `dump`, `check`); every write through it fails.
    ///
    /// Errors: a missing file, or one that is not a servable zone DB.
    pub fn open_read_only(path: &Path) -> Result<SqliteWriter, WriteError> {
        let (conn, _) = authd_migrations::open_for_serving(path)
            .map_err(|e| WriteError::Open(e.to_string()))?;
        Ok(SqliteWriter {
            path: path.to_path_buf(),
            served: None,
            conn: Arc::new(Mutex::new(Some((conn, 0)))),
            mark: Mutex::new(None),
            refused: Some(format!(
                "zone DB {} was opened read-only: no write goes through this handle",
                path.display()
            )),
            seen_len: AtomicU64::new(super::durable::file_len(path)),
            indexed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The writer of a served source (connected at its first write).
    /// `refused`: why every write is refused (see [`SqliteSource::open`]).
    pub(super) fn for_source(
        path: &Path,
        file: (u64, u64),
        watch: Arc<ChangeWatch>,
        slot: Arc<WriterSlot>,
        refused: Option<String>,
    ) -> SqliteWriter {
        SqliteWriter {
            path: path.to_path_buf(),
            served: Some((file, watch)),
            conn: slot,
            mark: Mutex::new(None),
            refused,
            seen_len: AtomicU64::new(super::durable::file_len(path)),
            indexed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The DB file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn connect(&self) -> Result<Connection, WriteError> {
        authd_migrations::open_for_writing(&self.path, WRITE_LOCK_WAIT).map_err(opening)
    }

    /// A served writer writes only the file its source opened.
    fn check_file(&self) -> Result<(), WriteError> {
        let Some((opened, _)) = &self.served else {
            return Ok(());
        };
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(&self.path) {
            Ok(m) if (m.dev(), m.ino()) == *opened => Ok(()),
            Ok(_) => Err(WriteError::Gone(format!(
                "zone DB {} was replaced since it was opened; nothing is written until a \
                 reload (SIGHUP) serves the new file",
                self.path.display()
            ))),
            Err(e) => Err(WriteError::Gone(format!(
                "zone DB {} is gone ({e}); nothing is written (restore it and reload)",
                self.path.display()
            ))),
        }
    }

    /// Runs `f` (which only reads) as [`Self::run`] does; a storage error
    /// names the file.
    fn with_conn<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, WriteError>,
    ) -> Result<T, WriteError> {
        self.run(f).map_err(|e| named(&self.path, e))
    }

    /// Runs `f`, a write transaction, as [`Self::run`] does: first, when
    /// the main file is shorter than after the last write, only if
    /// `quick_check` passes ([`super::durable::check_not_shortened`]); once
    /// more on a new connection when it was refused as read-only; and when
    /// an I/O error ended it, voiding what it may have left in the
    /// write-ahead log ([`super::durable::seal`]). A storage error names the
    /// file.
    fn write<T>(
        &self,
        mut f: impl FnMut(&mut Connection) -> Result<T, WriteError>,
    ) -> Result<T, WriteError> {
        if let Some(why) = &self.refused {
            return Err(WriteError::Open(why.clone()));
        }
        let mut checked = |conn: &mut Connection| {
            let last = self.seen_len.load(Ordering::Relaxed);
            super::durable::check_not_shortened(conn, &self.path, last)
                .map_err(sql("checking the file before writing"))?;
            // Once per writer; a failure (a locked DB) is tried again at
            // the next write, and the write goes on without them.
            if !self.indexed.load(Ordering::Relaxed)
                && authd_migrations::ensure_authd_indexes(conn).is_ok()
            {
                self.indexed.store(true, Ordering::Relaxed);
            }
            f(conn)
        };
        let mut result = self.run(&mut checked);
        if result.as_ref().err().and_then(sqlite_code) == Some(ErrorCode::ReadOnly) {
            result = self.run(&mut checked);
        }
        if result.is_ok() {
            self.seen_len
                .store(super::durable::file_len(&self.path), Ordering::Relaxed);
        }
        if let Err(e) = &result
            && matches!(
                sqlite_code(e),
                Some(ErrorCode::SystemIoFailure | ErrorCode::DiskFull)
            )
        {
            self.seal(e);
        }
        result.map_err(|e| named(&self.path, e))
    }

    /// After `failed`, an I/O error in a write transaction: a small commit
    /// on a fresh connection, so that nothing of the failed one can be
    /// recovered from the `-wal` after a crash; logged either way.
    fn seal(&self, failed: &WriteError) {
        let sealed = self.check_file().and_then(|()| {
            let mut conn = self.connect()?;
            super::durable::seal(&mut conn).map_err(sql("voiding the failed commit"))
        });
        let file = self.path.display();
        match sealed {
            Ok(()) => tracing::warn!(
                "zone DB {file}: a write failed ({failed}); nothing of it is kept, after a crash \
                 too (a new commit voided what it may have left in the write-ahead log)"
            ),
            Err(e) => tracing::error!(
                "zone DB {file}: a write failed ({failed}), and so did the commit that voids \
                 what it may have left in the write-ahead log ({e}): if authd stops abruptly \
                 before a later write succeeds, the failed change may come back"
            ),
        }
    }

    /// Runs `f` on the kept connection (connected if need be), or on a
    /// connection of its own when the kept one is in use. A storage failure
    /// or a transaction left open drops the kept connection.
    fn run<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, WriteError>,
    ) -> Result<T, WriteError> {
        self.check_file()?;
        let mut kept = match self.conn.try_lock() {
            Ok(kept) => kept,
            Err(TryLockError::Poisoned(p)) => {
                let mut kept = p.into_inner();
                *kept = None;
                kept
            }
            Err(TryLockError::WouldBlock) => return f(&mut self.connect()?),
        };
        if kept.is_none() {
            *kept = Some((
                self.connect()?,
                CONNECTIONS.fetch_add(1, Ordering::Relaxed) + 1,
            ));
        }
        let Some((conn, _)) = kept.as_mut() else {
            return Err(WriteError::Gone("no writer connection".into()));
        };
        let result = f(conn);
        if result.as_ref().err().is_some_and(is_storage) || !conn.is_autocommit() {
            *kept = None;
        }
        result
    }

    /// After a commit: the served source's read snapshots are renewed.
    fn committed(&self) {
        if let Some((_, watch)) = &self.served {
            watch.own_commit();
        }
    }

    /// Every class-IN zone of the DB, ordered by name (`zone list`).
    ///
    /// Errors: storage.
    pub fn list_zones(&self) -> Result<Vec<ZoneSummary>, WriteError> {
        self.with_conn(|conn| sqlite_admin::list_zones(conn))
    }

    /// Creates zone `origin` with `records` (`zone create`).
    ///
    /// Errors: [`WriteError::ZoneExists`], [`WriteError::Load`].
    pub fn create_zone(
        &self,
        origin: &Name,
        records: &[SourcedRecord],
    ) -> Result<LoadReport, WriteError> {
        let r = self.write(|conn| sqlite_admin::create_zone(conn, origin, records))?;
        self.committed();
        Ok(r)
    }

    /// Deletes zone `origin` with its journal (`zone delete`). Returns the
    /// rows deleted.
    ///
    /// Errors: [`WriteError::NoZone`], storage.
    pub fn delete_zone(&self, origin: &Name) -> Result<usize, WriteError> {
        let n = self.write(|conn| sqlite_admin::delete_zone(conn, origin))?;
        self.committed();
        Ok(n)
    }

    /// Writes zone `origin` as a master file (`zone dump`); see
    /// [`sqlite_admin::dump_zone`]. Returns the RRs written.
    ///
    /// Errors: as [`sqlite_admin::dump_zone`].
    pub fn dump_zone(
        &self,
        origin: &Name,
        out: &mut dyn std::io::Write,
        style: DumpStyle,
    ) -> Result<usize, WriteError> {
        self.with_conn(|conn| sqlite_admin::dump_zone(conn, origin, out, style))
    }

    /// Checks zone `origin` as stored (`zone check`); see
    /// [`sqlite_admin::check_stored_zone`]. Returns the RRs checked.
    ///
    /// Errors: as [`sqlite_admin::check_stored_zone`].
    pub fn check_zone(&self, origin: &Name) -> Result<usize, WriteError> {
        self.with_conn(|conn| sqlite_admin::check_stored_zone(conn, origin))
    }

    /// Deletes `delete` and adds `add` in zone `origin`, the serial moved by
    /// one (`zone update`); see [`sqlite_admin::update_zone`].
    ///
    /// Errors: as [`sqlite_admin::update_zone`].
    pub fn update_records(
        &self,
        origin: &Name,
        add: &[Record],
        delete: &[Record],
    ) -> Result<UpdateReport, WriteError> {
        let r = self.write(|conn| sqlite_admin::update_zone(conn, origin, add, delete))?;
        self.committed();
        Ok(r)
    }

    /// Imports a key of zone `origin` from BIND 9's key files (`zone
    /// key-import`); see [`crate::sqlite_signing::import_bind_key`].
    /// Returns the key tag.
    ///
    /// Errors: as [`crate::sqlite_signing::import_bind_key`].
    pub fn import_key(
        &self,
        origin: &Name,
        key_text: &str,
        private_text: &str,
        role: Option<crate::sqlite_signing::KeyRole>,
    ) -> Result<u16, WriteError> {
        let tag = self.write(|conn| {
            crate::sqlite_signing::import_bind_key(conn, origin, key_text, private_text, role)
        })?;
        self.committed();
        Ok(tag)
    }

    /// The DS RRs (SHA-256) of zone `origin`'s KSKs or CSKs with TTL `ttl`
    /// (`zone ds`).
    ///
    /// Errors: storage, a corrupt key row.
    pub fn ds_records(&self, origin: &Name, ttl: u32) -> Result<Vec<String>, WriteError> {
        self.with_conn(|conn| crate::sqlite_signing::ds_records(conn, origin, ttl))
    }

    /// Folds the write-ahead log into the main file, so a plain `cp` of the
    /// quiet DB is whole (the tools call it before they exit).
    ///
    /// Errors: storage.
    pub fn checkpoint(&self) -> Result<(), WriteError> {
        self.with_conn(|conn| authd_migrations::checkpoint(conn).map_err(sql("checkpoint")))
    }
}

impl ZoneWriter for SqliteWriter {
    fn describe(&self) -> String {
        format!("sqlite3:{}", self.path.display())
    }

    fn replace_zone(
        &self,
        origin: &Name,
        records: &[SourcedRecord],
        journal: JournalPolicy,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<LoadReport, WriteError> {
        let r = self.write(|conn| match journal {
            // A zone signed online keeps its journal across whole writes
            // (a transfer in): its serial never goes back.
            JournalPolicy::Clear if crate::sqlite_signing::policy_of(conn, origin)?.is_some() => {
                sqlite_admin::replace_zone_journaled(conn, origin, records, &mut *progress)
            }
            JournalPolicy::Difference => {
                sqlite_admin::replace_zone_journaled(conn, origin, records, &mut *progress)
            }
            JournalPolicy::Keep | JournalPolicy::Clear => {
                let clear = journal == JournalPolicy::Clear;
                sqlite_load::load_zone_with(conn, origin, records, clear, &mut *progress)
                    .map_err(WriteError::from)
            }
        })?;
        self.committed();
        Ok(r)
    }

    fn apply_differences(&self, origin: &Name, diffs: &[Difference]) -> Result<usize, WriteError> {
        let n = self.write(|conn| sqlite_admin::apply_differences(conn, origin, diffs))?;
        self.committed();
        Ok(n)
    }

    fn update(
        &self,
        origin: &Name,
        scope: Scope<'_>,
        serial: SerialPolicy,
        now: u64,
        plan: &mut dyn FnMut(&[Record]) -> Option<Change>,
    ) -> Result<Option<UpdateReport>, WriteError> {
        let r = self.write(|conn| {
            sqlite_admin::update_zone_with(conn, origin, scope, serial, now, |records| {
                plan(records).ok_or(())
            })
        })?;
        match r {
            Ok(report) => {
                if report.journal_rows > 0 {
                    self.committed();
                }
                Ok(Some(report))
            }
            Err(()) => Ok(None),
        }
    }

    fn journal(
        &self,
        origin: &Name,
        begin: u32,
        end: u32,
    ) -> Result<Option<Vec<DiffRow>>, WriteError> {
        self.with_conn(|conn| {
            let Some(id) = sqlite_admin::find_zone_id(conn, origin)? else {
                return Ok(None);
            };
            let Some(rows) = sqlite_admin::read_journal(conn, id, origin, begin, end)? else {
                return Ok(None);
            };
            let first_ok = rows.first().is_some_and(|d| {
                !d.add
                    && d.record.rtype == crate::RType::SOA
                    && d.record.rdata.soa_serial() == Some(begin)
            });
            let last_ok = rows
                .iter()
                .rev()
                .find(|d| d.record.rtype == crate::RType::SOA)
                .is_some_and(|d| d.add && d.record.rdata.soa_serial() == Some(end));
            if !(first_ok && last_ok) {
                tracing::warn!(
                    "journal of {origin} in {} from {begin} to {end} is malformed",
                    self.path.display()
                );
                return Ok(None);
            }
            Ok(Some(rows))
        })
    }

    fn change_mark(&self) -> Result<u64, WriteError> {
        self.check_file()?;
        let mut mark = self.mark.lock().unwrap_or_else(PoisonError::into_inner);
        if mark.is_none() {
            let (conn, _) = authd_migrations::open_for_serving(&self.path).map_err(opening)?;
            *mark = Some(conn);
        }
        let Some(conn) = mark.as_ref() else {
            return Err(WriteError::Gone("no change-mark connection".into()));
        };
        match super::pool::data_version(conn) {
            Ok(v) => {
                // What the mark shows, the served source must show too
                // before anyone announces it (NOTIFY out).
                if let Some((_, watch)) = &self.served {
                    watch.poll_now();
                }
                Ok(v.cast_unsigned())
            }
            Err(e) => {
                *mark = None;
                Err(sql("reading data_version")(e))
            }
        }
    }

    fn apex_soas(&self) -> Result<Vec<(Name, u32, Rdata)>, WriteError> {
        self.with_conn(|conn| {
            let action = "reading the zones' SOA";
            let mut stmt = conn
                .prepare_cached(
                    "SELECT z.name, r.ttl, r.rdata FROM zones z JOIN records r ON r.zone_id = z.id \
                     WHERE z.rdclass = 'IN' AND r.rdtype = 'SOA' AND r.name = z.name",
                )
                .map_err(sql(action))?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, String>(2)?,
                    ))
                })
                .map_err(sql(action))?;
            let mut out = Vec::new();
            for row in rows {
                let (name, ttl, text) = row.map_err(sql(action))?;
                let Ok(origin) = Name::parse(&name, Some(&Name::root())) else {
                    continue;
                };
                let Ok(rdata) = Rdata::from_text(crate::RType::SOA, &text, &origin) else {
                    continue;
                };
                out.push((origin, u32::try_from(ttl).unwrap_or(0), rdata));
            }
            Ok(out)
        })
    }

    fn soa(&self, origin: &Name) -> Result<Option<Record>, WriteError> {
        self.with_conn(|conn| {
            let row: Option<(i64, String)> = conn
                .query_row(
                    "SELECT r.ttl, r.rdata FROM records r JOIN zones z ON r.zone_id = z.id \
                     WHERE z.name = ?1 AND z.rdclass = 'IN' AND r.rdtype = 'SOA' AND r.rname = ?2 \
                     ORDER BY z.id LIMIT 1",
                    params![origin.to_string(), origin.reversed_text()],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()
                .map_err(sql("reading the SOA"))?;
            Ok(row.and_then(|(ttl, text)| {
                let rdata = Rdata::from_text(crate::RType::SOA, &text, origin).ok()?;
                Some(Record {
                    owner: origin.clone(),
                    rtype: crate::RType::SOA,
                    class: crate::Class::IN,
                    ttl: u32::try_from(ttl).ok()?,
                    rdata,
                })
            }))
        })
    }

    fn input_serial(&self, origin: &Name) -> Result<Option<u32>, WriteError> {
        self.with_conn(|conn| {
            if crate::sqlite_signing::policy_of(conn, origin)?.is_none() {
                return Ok(None);
            }
            crate::sqlite_signing::input_serial(conn, origin)
        })
    }

    fn secondary_state(&self, origin: &Name) -> Result<Option<SecondaryState>, WriteError> {
        self.with_conn(|conn| {
            let action = "reading the secondary state";
            let exists = has_table(conn, "authd_secondary").map_err(sql(action))?;
            if !exists {
                return Ok(None);
            }
            let has_pending: bool = conn
                .prepare_cached(
                    "SELECT 1 FROM pragma_table_info('authd_secondary') WHERE name='pending'",
                )
                .and_then(|mut s| s.exists([]))
                .map_err(sql(action))?;
            let query = if has_pending {
                "SELECT last_ok, expired, pending FROM authd_secondary WHERE zone = ?1"
            } else {
                "SELECT last_ok, expired, 0 FROM authd_secondary WHERE zone = ?1"
            };
            conn.query_row(query, [origin.to_string()], |r| {
                Ok(SecondaryState {
                    last_ok: r
                        .get::<_, Option<i64>>(0)?
                        .and_then(|l| u64::try_from(l).ok()),
                    expired: r.get::<_, i64>(1)? != 0,
                    pending: r.get::<_, i64>(2)? != 0,
                })
            })
            .optional()
            .map_err(sql(action))
        })
    }

    fn save_secondary_state(
        &self,
        origin: &Name,
        state: &SecondaryState,
    ) -> Result<(), WriteError> {
        self.write(|conn| {
            let action = "writing the secondary state";
            authd_migrations::ensure_authd_table(conn, "authd_secondary").map_err(sql(action))?;
            conn.execute(
                "INSERT INTO authd_secondary (zone, last_ok, expired, pending) \
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT(zone) DO UPDATE SET \
                 last_ok = excluded.last_ok, expired = excluded.expired, pending = excluded.pending",
                params![
                    origin.to_string(),
                    state.last_ok.and_then(|l| i64::try_from(l).ok()),
                    i64::from(state.expired),
                    i64::from(state.pending)
                ],
            )
            .map_err(sql(action))?;
            Ok(())
        })
    }

    fn delete_zone(&self, origin: &Name) -> Result<bool, WriteError> {
        let gone = self.write(|conn| {
            let action = "deleting the zone";
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(sql(action))?;
            let Some(id) = sqlite_admin::find_zone_id(&tx, origin)? else {
                return Ok(false);
            };
            for stmt in [
                "DELETE FROM records WHERE zone_id=?1",
                "DELETE FROM nsec3 WHERE zone_id=?1",
                "DELETE FROM diffs WHERE zone_id=?1",
                "DELETE FROM zones WHERE id=?1",
            ] {
                tx.execute(stmt, [id]).map_err(sql(action))?;
            }
            let has_state = has_table(&tx, "authd_secondary").map_err(sql(action))?;
            if has_state {
                tx.execute(
                    "DELETE FROM authd_secondary WHERE zone=?1",
                    [origin.to_string()],
                )
                .map_err(sql(action))?;
            }
            tx.commit().map_err(sql(action))?;
            Ok(true)
        })?;
        if gone {
            self.committed();
        }
        Ok(gone)
    }

    fn catalog_members(&self, catalog: &Name) -> Result<Vec<CatalogMember>, WriteError> {
        self.with_conn(|conn| {
            let action = "reading the catalog members";
            let exists = has_table(conn, "authd_catalog_member").map_err(sql(action))?;
            if !exists {
                return Ok(Vec::new());
            }
            let mut stmt = conn
                .prepare_cached(
                    "SELECT zone, label, groups FROM authd_catalog_member WHERE catalog = ?1 \
                     ORDER BY zone",
                )
                .map_err(sql(action))?;
            let rows = stmt
                .query_map([catalog.to_string()], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                    ))
                })
                .map_err(sql(action))?;
            let mut out = Vec::new();
            for row in rows {
                let (zone, label, groups) = row.map_err(sql(action))?;
                // A row that does not parse is not ours to act on.
                if let Ok(zone) = Name::parse(&zone, None) {
                    out.push(CatalogMember {
                        zone,
                        label,
                        groups: groups
                            .split('\n')
                            .filter(|g| !g.is_empty())
                            .map(str::to_string)
                            .collect(),
                    });
                }
            }
            Ok(out)
        })
    }

    fn save_catalog_members(
        &self,
        catalog: &Name,
        members: &[CatalogMember],
    ) -> Result<(), WriteError> {
        self.write(|conn| {
            let action = "writing the catalog members";
            authd_migrations::ensure_authd_table(conn, "authd_catalog_member")
                .map_err(sql(action))?;
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(sql(action))?;
            tx.execute(
                "DELETE FROM authd_catalog_member WHERE catalog = ?1",
                [catalog.to_string()],
            )
            .map_err(sql(action))?;
            for m in members {
                tx.execute(
                    "INSERT INTO authd_catalog_member (zone, catalog, label, groups) \
                     VALUES (?1, ?2, ?3, ?4) ON CONFLICT(zone) DO UPDATE SET \
                     catalog = excluded.catalog, label = excluded.label, groups = excluded.groups",
                    params![
                        m.zone.to_string(),
                        catalog.to_string(),
                        m.label,
                        m.groups.join("\n")
                    ],
                )
                .map_err(sql(action))?;
            }
            tx.commit().map_err(sql(action))?;
            Ok(())
        })
    }

    fn set_signing(
        &self,
        origin: &Name,
        policy: Option<&crate::signer::policy::Policy>,
    ) -> Result<bool, WriteError> {
        let changed = self.write(|conn| match policy {
            Some(p) => crate::sqlite_signing::set_policy(conn, origin, p),
            None => crate::sqlite_signing::clear_policy(conn, origin),
        })?;
        if changed {
            self.committed();
        }
        Ok(changed)
    }

    fn sign_pending(
        &self,
        origin: &Name,
        serial: SerialPolicy,
        now: u64,
    ) -> Result<Option<UpdateReport>, WriteError> {
        let r =
            self.write(|conn| crate::sqlite_signing::sign_pending(conn, origin, serial, now))?;
        if r.is_some() {
            self.committed();
        }
        Ok(r)
    }

    fn key_event(
        &self,
        origin: &Name,
        event: crate::write::KeyEvent,
        serial: SerialPolicy,
        now: u64,
    ) -> Result<String, WriteError> {
        let r =
            self.write(|conn| crate::sqlite_rollover::key_event(conn, origin, event, serial, now))?;
        self.committed();
        Ok(r)
    }

    // Both read on a read-only connection of their own: the signer scans
    // every DB at start, and must not open the writer's read-write
    // connection before the first write (a DB made read-only meanwhile
    // must still refuse that write).
    fn signed_zones(&self) -> Result<Vec<crate::write::SignedZone>, WriteError> {
        let (conn, _) = authd_migrations::open_for_serving(&self.path).map_err(opening)?;
        crate::sqlite_signing::zone_states(&conn).map_err(|e| named(&self.path, e))
    }

    fn signing_keys(&self, origin: &Name) -> Result<Vec<crate::write::KeyStatus>, WriteError> {
        let (conn, _) = authd_migrations::open_for_serving(&self.path).map_err(opening)?;
        crate::sqlite_signing::key_statuses(&conn, origin).map_err(|e| named(&self.path, e))
    }
}

impl Drop for SqliteWriter {
    /// A tool's writer folds the write-ahead log into the main file.
    fn drop(&mut self) {
        if self.served.is_none()
            && let Ok(mut kept) = self.conn.lock()
            && let Some((conn, _)) = kept.take()
            && !conn.is_readonly("main").unwrap_or(true)
            && let Err(e) = authd_migrations::checkpoint(&conn)
        {
            tracing::warn!("{}: checkpoint: {e}", self.path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DataSource;
    use crate::sqlite::SqliteSource;
    use crate::zonefile::parse_master_text;
    use std::time::{Duration, Instant};

    fn origin() -> Name {
        "example.org.".parse().expect("origin")
    }

    /// A zone DB at `path` holding example.org. (serial 1).
    fn make_db(path: &Path) {
        let records = parse_master_text(
            "$TTL 300\n@ SOA ns1 hostmaster 1 3600 900 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\n",
            Path::new("test"),
            &origin(),
        )
        .expect("parses");
        SqliteWriter::create(path)
            .expect("create")
            .replace_zone(&origin(), &records, JournalPolicy::Keep, &mut |_, _| {})
            .expect("load");
    }

    fn add_one(writer: &dyn ZoneWriter, owner: &str) -> Result<Option<UpdateReport>, WriteError> {
        let rec = parse_master_text(
            &format!("$TTL 300\n{owner} A 192.0.2.7\n"),
            Path::new("test"),
            &origin(),
        )
        .expect("parses")[0]
            .record
            .clone();
        let mut plan = |_: &[Record]| {
            Some(Change {
                add: vec![rec.clone()],
                delete: vec![],
                soa: None,
            })
        };
        writer.update(
            &origin(),
            Scope::Zone,
            SerialPolicy::Increment,
            0,
            &mut plan,
        )
    }

    /// Another process's commit is seen by the served source by the time
    /// the served writer's change mark shows it (NOTIFY out reads the mark
    /// and then announces the serial: a secondary's SOA query that follows
    /// must get the new one), without waiting for the source's own poll.
    #[test]
    fn the_change_mark_makes_the_served_source_see_another_writers_commit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("zones.sqlite3");
        make_db(&path);
        let source = SqliteSource::open(&path).expect("open");
        let served = source.writer().expect("a write side");
        let before_mark = served.change_mark().expect("mark");
        let before = source.generation();
        // Another writer: as `zone update` or the sqlite3 shell would.
        let other = SqliteWriter::open(&path).expect("another writer");
        add_one(&other, "b").expect("writes");
        // Read at once: well within the source's own 200 ms poll.
        let after_mark = served.change_mark().expect("mark");
        assert_ne!(after_mark, before_mark);
        assert_ne!(
            source.generation(),
            before,
            "the served source has not seen it"
        );
    }

    /// A DB deleted while served: a write is refused and creates no empty DB
    /// at the path (which a reload would then serve, refusing every zone).
    #[test]
    fn a_served_db_deleted_is_not_recreated_by_a_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("zones.sqlite3");
        make_db(&path);
        let source = SqliteSource::open(&path).expect("open");
        let writer = source.writer().expect("a write side");
        assert_eq!(
            add_one(writer.as_ref(), "a")
                .expect("writes")
                .map(|r| r.new_serial),
            Some(2)
        );
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        let e = add_one(writer.as_ref(), "b").expect_err("refused");
        assert!(matches!(e, WriteError::Gone(_)), "{e:?}");
        assert!(e.to_string().contains("is gone"), "{e}");
        assert!(!path.exists(), "no DB created at the path");
    }

    /// A DB replaced under the path while served: the new file is not
    /// written (a reload opens it; until then the old one is served).
    #[test]
    fn a_served_db_replaced_is_not_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("zones.sqlite3");
        make_db(&path);
        let source = SqliteSource::open(&path).expect("open");
        let other = dir.path().join("other.sqlite3");
        make_db(&other);
        std::fs::rename(&other, &path).expect("replace");
        let writer = source.writer().expect("a write side");
        let e = add_one(writer.as_ref(), "a").expect_err("refused");
        assert!(e.to_string().contains("was replaced"), "{e}");
        let fresh = SqliteWriter::open(&path).expect("open the new file");
        let soa = fresh.soa(&origin()).expect("soa").expect("a SOA");
        assert_eq!(soa.rdata.soa_serial(), Some(1), "the new file is untouched");
    }

    /// A rollback-journal DB locked by another process: the write fails
    /// after about WRITE_LOCK_WAIT (2 s; opening the connection waits no
    /// longer than that either), nothing written, and the next write after
    /// the lock is released succeeds on a new connection.
    #[test]
    fn a_locked_db_fails_after_the_write_lock_wait_and_recovers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("zones.sqlite3");
        make_db(&path);
        let other = rusqlite::Connection::open(&path).expect("other writer");
        let mode: String = other
            .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))
            .expect("journal mode");
        assert_eq!(mode, "delete");
        let source = SqliteSource::open(&path).expect("open");
        let writer = source.writer().expect("a write side");
        other.execute_batch("BEGIN EXCLUSIVE").expect("lock");
        let started = Instant::now();
        let e = add_one(writer.as_ref(), "a").expect_err("locked");
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(1900) && waited < Duration::from_millis(4500),
            "waited {waited:?}: {e}"
        );
        other.execute_batch("ROLLBACK").expect("unlock");
        let report = add_one(writer.as_ref(), "a")
            .expect("writes")
            .expect("applied");
        assert_eq!((report.old_serial, report.new_serial), (1, 2));
    }

    /// The SOA serial of example.org. and whether `owner` has an A RR, in
    /// the DB at `path` opened afresh.
    fn stored(path: &Path, owner: &str) -> (u32, bool) {
        let conn = rusqlite::Connection::open(path).expect("open");
        let serial = SqliteWriter::open_read_only(path)
            .expect("open")
            .soa(&origin())
            .expect("soa")
            .and_then(|s| s.rdata.soa_serial())
            .expect("a serial");
        let name = format!("{owner}.example.org.");
        let found: bool = conn
            .prepare("SELECT 1 FROM records WHERE name = ?1 AND rdtype = 'A'")
            .and_then(|mut s| s.exists([name]))
            .expect("query");
        (serial, found)
    }

    /// What a `kill -9` leaves on disk: the DB and its write-ahead log as
    /// they are now (the `-shm` index is rebuilt from the log when the copy is
    /// opened, as after a crash), copied to `dir`.
    fn crash_image(path: &Path, dir: &Path) -> PathBuf {
        let copy = dir.join("crashed.sqlite3");
        std::fs::copy(path, &copy).expect("copy the DB");
        let wal = PathBuf::from(format!("{}-wal", path.display()));
        if wal.exists() {
            std::fs::copy(&wal, format!("{}-wal", copy.display())).expect("copy the -wal");
        }
        copy
    }

    /// An fsync that fails (EIO) at the commit of an update: the write is
    /// refused, and it stays refused after a crash: the copy of the DB and
    /// its `-wal` taken right after the failure, opened afresh (WAL recovery),
    /// has the earlier update and not the failed one.
    #[test]
    fn an_update_failing_at_fsync_is_absent_after_a_crash() {
        super::super::fault_vfs::install();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("zones.sqlite3");
        make_db(&path);
        let source = SqliteSource::open(&path).expect("open");
        let writer = source.writer().expect("a write side");
        add_one(writer.as_ref(), "a")
            .expect("writes")
            .expect("applied");
        super::super::fault_vfs::fail_syncs(dir.path(), 1);
        let e = add_one(writer.as_ref(), "b").expect_err("the commit's fsync failed");
        super::super::fault_vfs::heal();
        let other = tempfile::tempdir().expect("tempdir");
        let copy = crash_image(&path, other.path());
        assert_eq!(
            stored(&copy, "b"),
            (2, false),
            "WAL recovery brings the refused update back"
        );
        assert_eq!(
            stored(&copy, "a"),
            (2, true),
            "the acknowledged one is kept"
        );
        assert_eq!(stored(&path, "b"), (2, false));
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        let report = add_one(writer.as_ref(), "c")
            .expect("writes")
            .expect("applied");
        assert_eq!((report.old_serial, report.new_serial), (2, 3));
    }

    /// A DB truncated by another process while served: the reads report it
    /// corrupt, and a write is refused as corrupt (naming the file), not
    /// acknowledged into a file nothing can be read from after a restart.
    #[test]
    fn a_db_truncated_while_served_takes_no_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("zones.sqlite3");
        let mut text = String::from(
            "$TTL 300\n@ SOA ns1 hostmaster 1 3600 900 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\n",
        );
        for i in 0..2000 {
            text.push_str(&format!("host{i} A 192.0.2.{}\n", i % 250));
        }
        let records = parse_master_text(&text, Path::new("test"), &origin()).expect("parses");
        SqliteWriter::create(&path)
            .expect("create")
            .replace_zone(&origin(), &records, JournalPolicy::Keep, &mut |_, _| {})
            .expect("load");
        let source = SqliteSource::open(&path).expect("open");
        let writer = source.writer().expect("a write side");
        add_one(writer.as_ref(), "a")
            .expect("writes")
            .expect("applied");
        let len = std::fs::metadata(&path).expect("metadata").len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(len / 2))
            .expect("truncate");
        let zone = source.zones().expect("zones").remove(0);
        let read = source.zone_rrsets(&zone).map(|r| r.len());
        assert!(read.is_err(), "reads see the damage: {read:?}");
        for owner in ["b", "c"] {
            let e = add_one(writer.as_ref(), owner).expect_err("a corrupt DB takes no write");
            assert!(matches!(e, WriteError::Storage(_)), "{e:?}");
            let text = e.to_string();
            assert!(text.contains("is corrupt"), "{text}");
            assert!(text.contains(&path.display().to_string()), "{text}");
        }
    }

    /// True when this process runs as root (the owner of `/proc/self`).
    fn running_as_root() -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
    }

    /// File permissions do not stop root: when the tests run as root, runs
    /// this module's test `name` again as user nobody (`setpriv`, util-linux)
    /// and returns true (the caller returns: it passed there); otherwise
    /// false (the caller runs the test itself).
    fn ran_unprivileged(name: &str) -> bool {
        if std::env::var_os("AUTHD_TEST_UNPRIVILEGED").is_some() || !running_as_root() {
            return false;
        }
        let exe = std::env::current_exe().expect("the test binary");
        let out = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&exe)
            .args(["--exact", &format!("sqlite::writer::tests::{name}")])
            .args(["--test-threads=1", "--nocapture"])
            .env("AUTHD_TEST_UNPRIVILEGED", "1")
            .env("TMPDIR", std::env::temp_dir())
            .output()
            .expect("run setpriv (util-linux): the tests run as root, this one needs nobody");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{name} as nobody: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        true
    }

    fn set_mode(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    /// A DB without write permission when its source opened: a write is
    /// refused naming the file; once the file is made writable (chmod) the
    /// next write succeeds, without a restart. (The `-wal` and `-shm` the
    /// read-only source created are read-only too: the first connection that
    /// writes finds its log read-only, SQLITE_READONLY, and is retried.)
    #[test]
    fn a_db_read_only_at_start_is_written_once_writable() {
        if ran_unprivileged("a_db_read_only_at_start_is_written_once_writable") {
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("zones.sqlite3");
        make_db(&path);
        set_mode(&path, 0o444);
        let source = SqliteSource::open(&path).expect("serves a read-only file");
        let writer = source.writer().expect("a write side");
        let e = add_one(writer.as_ref(), "a").expect_err("read-only");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        set_mode(&path, 0o644);
        let report = add_one(writer.as_ref(), "b")
            .expect("the first write after chmod succeeds")
            .expect("applied");
        assert_eq!((report.old_serial, report.new_serial), (1, 2));
    }

    /// Puts a folder's permissions back (so that it can be removed).
    struct Writable<'a>(&'a Path);

    impl Drop for Writable<'_> {
        fn drop(&mut self) {
            set_mode(self.0, 0o755);
        }
    }

    /// A WAL-mode DB without its `-shm`, read-only in a read-only folder
    /// (SQLite cannot make the `-shm`): served read-only and unchanged (opened
    /// immutable), a write refused naming the file. With changes in its `-wal`
    /// (which immutable would ignore) it is refused at open, naming the file.
    #[test]
    fn a_read_only_wal_db_without_shm_is_served_read_only() {
        if ran_unprivileged("a_read_only_wal_db_without_shm_is_served_read_only") {
            return;
        }
        let top = tempfile::tempdir().expect("tempdir");
        let dir = top.path().join("ro");
        std::fs::create_dir(&dir).expect("mkdir");
        let path = dir.join("zones.sqlite3");
        make_db(&path);
        let beside = |suffix: &str| PathBuf::from(format!("{}{suffix}", path.display()));
        assert!(!beside("-shm").exists() && !beside("-wal").exists());
        let before = std::fs::read(&path).expect("read");
        // A second DB with a change left in its log, and no -shm.
        let logged = dir.join("logged.sqlite3");
        make_db(&logged);
        let conn = rusqlite::Connection::open(&logged).expect("open");
        conn.execute_batch("PRAGMA wal_autocheckpoint=0; UPDATE records SET ttl = ttl + 1")
            .expect("write");
        let crashed = crash_image(&logged, top.path());
        drop(conn);
        std::fs::rename(&crashed, &logged).expect("move");
        let log = format!("{}-wal", logged.display());
        std::fs::rename(format!("{}-wal", crashed.display()), &log).expect("move the log");
        assert!(std::fs::metadata(&log).expect("the log").len() > 0);
        for f in [&path, &logged] {
            set_mode(f, 0o444);
        }
        set_mode(&dir, 0o555);
        let _restore = Writable(&dir);

        let source = SqliteSource::open(&path).expect("served");
        let zone = source.zones().expect("zones").remove(0);
        assert_eq!(source.zone_rrsets(&zone).expect("rrsets").len(), 3);
        let writer = source.writer().expect("a write side");
        let e = add_one(writer.as_ref(), "a").expect_err("read-only");
        let text = e.to_string();
        assert!(text.contains("served read-only"), "{text}");
        assert!(text.contains(&path.display().to_string()), "{text}");
        drop(writer);
        drop(source);
        assert_eq!(
            std::fs::read(&path).expect("read"),
            before,
            "the file is unchanged"
        );
        assert!(!beside("-shm").exists() && !beside("-wal").exists());

        let e = SqliteSource::open(&logged)
            .map(|_| ())
            .expect_err("its log cannot be read");
        assert!(
            e.to_string().contains(&format!("{}-wal", logged.display())),
            "{e}"
        );
    }
}
