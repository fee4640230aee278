//! The connection pool and read locking of [`SqliteSource`]: per-thread idle
//! connections, read transactions leased per query or per batch of queries,
//! and the bounded wait on writers' locks.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use thread_local::ThreadLocal;

use super::{ChangeWatch, SqliteSource, SqliteWriter, storage};
use crate::lookup::DataSourceError;
use std::sync::Arc;

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
    pub(super) static LOCK_DEADLINE: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
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

impl SqliteSource {
    /// Opens the DB at `path` for serving: read-only, schema 2.x required.
    /// A WAL-mode DB without its `-shm` file in a folder where SQLite cannot
    /// make one is opened immutable ([`authd_migrations::open_for_serving`]):
    /// it is served as it is, and its writer refuses every write (logged
    /// once here, naming the file) until a reload opens it afresh.
    ///
    /// Errors: a missing file, a file that is not a zone DB, or an unsupported
    /// schema version; the message names the file and the versions.
    pub fn open(path: &Path) -> Result<SqliteSource, DataSourceError> {
        let (conn, immutable) = Self::connect(path)?;
        let (watch_conn, _) = Self::connect(path)?;
        let file_id = file_id(path)?;
        let pool = ThreadLocal::new();
        pool.get_or(|| RefCell::new(vec![conn]));
        let slot = Arc::new(Mutex::new(None));
        // The DB is readable now (a watch that cannot read says nothing later).
        let change = Arc::new(
            ChangeWatch::new(watch_conn, Arc::clone(&slot)).map_err(|e| storage(path, e))?,
        );
        // Opened immutable (a WAL-mode file without its -shm in a folder
        // where none can be made): its readers would never see a write.
        let refused = immutable.then(|| {
            let why = format!(
                "zone DB {} is served read-only: it is in WAL mode without its -shm file and \
                 none can be created beside it (read-only folder), so it was opened immutable; \
                 writes are refused until the folder is writable and authd reloads (SIGHUP) or restarts",
                path.display()
            );
            tracing::warn!("{why}");
            why
        });
        let writer = Arc::new(SqliteWriter::for_source(
            path,
            file_id,
            Arc::clone(&change),
            slot,
            refused,
        ));
        Ok(SqliteSource {
            path: path.to_path_buf(),
            pool,
            batch: ThreadLocal::new(),
            change,
            writer,
            file_id,
            immutable,
            known_zones: std::sync::Mutex::new(None),
        })
    }

    /// True when the DB was opened immutable (see [`SqliteSource::open`]):
    /// a reload opens it afresh, so that once its folder is writable it is
    /// served normally and takes writes.
    pub fn is_immutable(&self) -> bool {
        self.immutable
    }

    /// True when the path no longer names the file opened: another file was
    /// moved into its place (which open connections do not see; reopen it).
    ///
    /// Errors: the path no longer exists or cannot be examined (deleted while
    /// served).
    pub fn file_changed(&self) -> Result<bool, DataSourceError> {
        Ok(file_id(&self.path)? != self.file_id)
    }

    /// A serving connection, and whether it was opened immutable.
    fn connect(path: &Path) -> Result<(Connection, bool), DataSourceError> {
        let mut serving = authd_migrations::open_to_serve(path)
            .map_err(|e| DataSourceError::Storage(e.to_string()))?;
        serving
            .conn
            .busy_handler(Some(wait_for_lock))
            .map_err(|e| storage(path, e))?;
        Ok((serving.conn, serving.immutable))
    }

    /// The DB file served.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// This source's write side, as its concrete type.
    pub(crate) fn sqlite_writer(&self) -> Arc<SqliteWriter> {
        Arc::clone(&self.writer)
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
    pub(super) fn return_conn(&self, conn: Connection) {
        if conn.is_autocommit() {
            self.pool.get_or_default().borrow_mut().push(conn);
        }
    }

    /// A pooled connection inside a read transaction: one snapshot, and the
    /// file locking and change checks SQLite does per transaction (several
    /// system calls) once instead of once per statement. Inside a batch
    /// ([`DataSource::begin_batch`](crate::DataSource::begin_batch)) it is the batch's connection, whose
    /// transaction stays open until the batch ends.
    pub(super) fn lease(&self) -> Result<Connection, DataSourceError> {
        if let Some(batch) = self.batch.get() {
            let mut batch = batch.borrow_mut();
            if batch.depth > 0
                && let Some((conn, generation)) = batch.conn.take()
            {
                // A commit seen since the transaction began (a cache flushed
                // for it fills again from here): a new snapshot, which has it.
                // Rollback-journal writers wait for readers; WAL writers do not.
                if generation == self.change.snapshot_mark() {
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
        let generation = self.change.snapshot_mark();
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
    pub(super) fn release(&self, conn: Connection, ok: bool) {
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
    pub(super) fn with_read<T>(
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
    pub(super) fn with_conn<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, DataSourceError>,
    ) -> Result<T, DataSourceError> {
        let conn = self.take_conn()?;
        let result = f(&conn);
        self.return_conn(conn);
        result
    }
}

/// Ends a read transaction, if one is open. Nothing was written: ending it only
/// releases the snapshot, so a failed COMMIT is rolled back and forgotten.
pub(super) fn end_read(conn: &Connection) {
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

pub(super) fn data_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA data_version", [], |r| r.get(0))
}
