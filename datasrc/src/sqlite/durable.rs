//! What a commit leaves on disk: a write is acknowledged only when it is
//! kept, and refused only when it is not kept, after a crash too.
//!
//! - [`check_not_shortened`]: a DB file shortened by something else
//!   (another process truncating it while authd serves it) still takes
//!   writes when the pages they touch are in the write-ahead log, while
//!   every other read reports it corrupt, and nothing written is readable
//!   after a restart. So before each write the main file's length (`stat`)
//!   is compared with its length after the last write; only when it is
//!   shorter is the DB checked (`PRAGMA quick_check`), and the write refused
//!   when that fails. (The file is never opened here: closing a descriptor
//!   of our own on it would drop the POSIX locks SQLite's connections in
//!   this process hold on it.)
//! - [`seal`]: in WAL mode a COMMIT whose fsync fails (`SQLITE_IOERR_FSYNC`)
//!   may already have written its frames, commit frame included, to the
//!   `-wal` file; the live wal-index does not count them (SQLite appends to
//!   it only after the sync succeeded), so nobody sees the change, but WAL
//!   recovery after a crash reads the log itself and brings it back. The next
//!   commit writes its frames where the failed ones begin, which breaks their
//!   checksum chain (recovery stops at the first frame that does not match),
//!   so a small commit made at once voids them. In rollback-journal mode the
//!   journal of a failed commit stays hot and is rolled back by the next
//!   transaction, which the same small commit starts.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

/// The length in bytes of the file at `path` (`stat`), 0 when it cannot be
/// read.
pub(crate) fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Before a write on `conn` to the DB at `path`, whose main file was
/// `last` bytes long after the last write seen (0: not known): when it is
/// shorter now, `PRAGMA quick_check(1)` decides (cost: the whole DB read,
/// only then).
///
/// Errors: the DB is damaged (`SQLITE_CORRUPT`, naming the first problem
/// found), or the check itself failed.
pub(crate) fn check_not_shortened(
    conn: &Connection,
    path: &Path,
    last: u64,
) -> rusqlite::Result<()> {
    let now = file_len(path);
    if now >= last {
        return Ok(());
    }
    let verdict: String = conn.query_row("PRAGMA quick_check(1)", [], |r| r.get(0))?;
    if verdict == "ok" {
        return Ok(());
    }
    Err(rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
        Some(format!(
            "database disk image is malformed: the file is {now} bytes long, {last} after the \
             last write (truncated?); quick_check: {verdict}"
        )),
    ))
}

/// A commit that changes nothing anyone reads (`PRAGMA user_version` set to
/// its own value, which rewrites page 1), on `conn`, a fresh connection: see
/// the module's notes on a failed commit.
///
/// Errors: storage (the disk still fails; what the failed commit left may
/// then come back after a crash).
pub(crate) fn seal(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    tx.pragma_update(None, "user_version", version)?;
    tx.commit()
}
