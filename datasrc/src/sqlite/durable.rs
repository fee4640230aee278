//! What a commit leaves on disk: a write is acknowledged only when it is
//! kept, and refused only when it is not kept, after a crash too.
//!
//! - [`check_before_commit`]: a DB file shortened by something else (another
//!   process truncating it while authd serves it) still takes writes when
//!   the pages they touch are in the write-ahead log, while every other read
//!   reports it corrupt, and nothing written is readable after a restart. So
//!   before each commit the main file is compared with its own header (an
//!   open, a stat and a 100-byte read); only when it is shorter than the
//!   header says is the DB checked (`PRAGMA quick_check`), and the commit
//!   refused when it fails.
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

use std::io::Read;
use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

/// The 16 bytes every SQLite 3 database file begins with.
const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// True when the main file at `path` is not as long as its header says
/// (or has no readable header): then some page the DB needs is not there,
/// unless another process is checkpointing into it right now.
fn shorter_than_its_header(path: &Path) -> bool {
    let Ok(mut file) = std::fs::File::open(path) else {
        return true;
    };
    let Ok(len) = file.metadata().map(|m| m.len()) else {
        return true;
    };
    let mut header = [0u8; 100];
    if file.read_exact(&mut header).is_err() || &header[..16] != MAGIC {
        return true;
    }
    let page_size = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65_536,
        n => u64::from(n),
    };
    let be32 = |at: usize| {
        u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    // The in-header size is valid only when "version-valid-for" (offset
    // 92) equals the change counter (offset 24); older writers left it 0.
    let pages = u64::from(be32(28));
    pages > 0 && be32(92) == be32(24) && len < pages * page_size
}

/// The error a commit refused for a damaged file gives (`SQLITE_CORRUPT`).
fn corrupt(detail: String) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
        Some(detail),
    )
}

/// Commits `tx` after [`check_before_commit`] (every write transaction of
/// the sqlite3 backend ends here).
///
/// Errors: those of [`check_before_commit`] (the transaction is then rolled
/// back), and of COMMIT.
pub(crate) fn commit(tx: rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    check_before_commit(&tx)?;
    tx.commit()
}

/// Run inside a write transaction on `conn`, just before its COMMIT: when
/// the main file is shorter than its header says, `PRAGMA quick_check(1)`
/// over the transaction's view decides (cost: the whole DB read, only then).
/// An in-memory DB is not checked.
///
/// Errors: the DB is damaged (`SQLITE_CORRUPT`, naming the first problem
/// found), or the check itself failed; the caller rolls back.
fn check_before_commit(conn: &Connection) -> rusqlite::Result<()> {
    let Some(path) = conn.path().filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    if !shorter_than_its_header(Path::new(path)) {
        return Ok(());
    }
    let verdict: String = conn.query_row("PRAGMA quick_check(1)", [], |r| r.get(0))?;
    if verdict == "ok" {
        return Ok(());
    }
    Err(corrupt(format!(
        "database disk image is malformed: the file is shorter than its header says \
         (truncated?); quick_check: {verdict}"
    )))
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
