//! BIND 10's sqlite3 zone database schema as versioned migrations.
//!
//! authd serves zone DBs written by BIND 10 (and by its own `loadzone`). BIND 10 1.2
//! wrote schema 2.2; older files exist at 1.0 ("old V1" without the `diffs` table and
//! "new V1" with it), 2.0 and 2.1. This crate
//!
//! - holds the 2.2 DDL ([`CREATE_LATEST_SQL`]) and the upgrade steps 1.0→2.0, 2.0→2.1 and
//!   2.1→2.2 as SQL files (`migrations/sql/`), compiled into the binary;
//! - detects a file's schema version ([`detect`], [`check`]);
//! - opens a file for serving without ever writing to it ([`open_for_serving`]);
//! - opens or creates a file for writing ([`open_or_create`]);
//! - upgrades a file in place, after a byte-for-byte backup, in one transaction ([`upgrade`]).
//!
//! Version policy, as BIND 10's `SQLite3Accessor`: any 2.x file is served (a newer minor
//! only adds indexes), 1.x must be upgraded first, a major above 2 is refused.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

/// A zone DB schema version: `schema_version.version` (major) and `schema_version.minor`.
///
/// Ordering is by major, then minor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SchemaVersion {
    /// Major version, stored in the column named `version`.
    pub major: u32,
    /// Minor version, stored in the column `minor` (absent in 1.0 files, where it is 0).
    pub minor: u32,
}

impl SchemaVersion {
    /// Makes a version from its two parts.
    pub const fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }
}

impl fmt::Display for SchemaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The newest schema this build knows, and the one new files are created at: 2.2.
pub const LATEST: SchemaVersion = SchemaVersion::new(2, 2);

/// The full DDL of schema 2.2 (tables, indexes and the version row), as BIND 10 1.2 creates it.
pub const CREATE_LATEST_SQL: &str = include_str!("../sql/create_2_2.sql");

/// One upgrade step: SQL that turns a file at `from` into a file at `to`, including the
/// update of the `schema_version` row.
struct Step {
    from: SchemaVersion,
    to: SchemaVersion,
    sql: &'static str,
}

/// Every upgrade step, in order.
const STEPS: [Step; 3] = [
    Step {
        from: SchemaVersion::new(1, 0),
        to: SchemaVersion::new(2, 0),
        sql: include_str!("../sql/v1_0_to_v2_0.sql"),
    },
    Step {
        from: SchemaVersion::new(2, 0),
        to: SchemaVersion::new(2, 1),
        sql: include_str!("../sql/v2_0_to_v2_1.sql"),
    },
    Step {
        from: SchemaVersion::new(2, 1),
        to: SchemaVersion::new(2, 2),
        sql: include_str!("../sql/v2_1_to_v2_2.sql"),
    },
];

/// How long a connection opened here waits for another process's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// What [`upgrade`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeReport {
    /// The version the file had before.
    pub from: SchemaVersion,
    /// The version the file has now (always [`LATEST`]).
    pub to: SchemaVersion,
    /// Where the byte-for-byte copy of the original was written; `None` when nothing was
    /// done because the file was already at [`LATEST`].
    pub backup: Option<PathBuf>,
}

impl UpgradeReport {
    /// True when the file was changed (it was older than [`LATEST`]).
    pub fn upgraded(&self) -> bool {
        self.from != self.to
    }
}

/// Errors from detecting, opening, creating and upgrading zone DBs.
///
/// Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file does not exist.
    #[error("zone DB {} does not exist", path.display())]
    Missing {
        /// The zone DB file.
        path: PathBuf,
    },
    /// The file's metadata could not be read (permissions, not a regular path, ...).
    #[error("cannot access zone DB {}: {source}", path.display())]
    Io {
        /// The zone DB file.
        path: PathBuf,
        /// The underlying I/O error.
        source: io::Error,
    },
    /// SQLite could not open or read the file: I/O error, locked, … (not
    /// corruption: [`Error::Corrupt`]).
    #[error("cannot read zone DB {}: {source}", path.display())]
    Unreadable {
        /// The zone DB file.
        path: PathBuf,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// The file is damaged (truncated, overwritten): SQLite's SQLITE_CORRUPT,
    /// or problems found by `PRAGMA integrity_check`.
    #[error(
        "zone DB {} is corrupt ({reason}); restore it from a backup (docs/ZONE-ADMIN.md, Backups)",
        path.display()
    )]
    Corrupt {
        /// The zone DB file.
        path: PathBuf,
        /// What SQLite said, or a summary of what `integrity_check` found.
        reason: String,
    },
    /// The file is not an SQLite database at all (SQLite's SQLITE_NOTADB: a
    /// text file, say, or a DB whose header was overwritten).
    #[error(
        "{} is not an SQLite database (SQLITE_NOTADB), so not a zone DB; make one in a new file \
         with `loadzone --db FILE ORIGIN MASTERFILE` or `zone create --db FILE ORIGIN`, or, if it \
         was a zone DB, restore it from a backup (docs/ZONE-ADMIN.md, Backups)",
        path.display()
    )]
    NotSqlite {
        /// The file.
        path: PathBuf,
    },
    /// A readable SQLite file, but not a zone DB: no `schema_version`, `zones` or `records` table.
    #[error(
        "{} is not a zone DB: {reason} (an SQLite database without the zone schema); make one in \
         a new file with `loadzone --db FILE ORIGIN MASTERFILE` or `zone create --db FILE ORIGIN`",
        path.display()
    )]
    NotZoneDb {
        /// The zone DB file.
        path: PathBuf,
        /// What is missing, e.g. "no schema_version table".
        reason: String,
    },
    /// The `schema_version` table has no row.
    #[error("zone DB {} has no schema version: the schema_version table is empty", path.display())]
    NoVersion {
        /// The zone DB file.
        path: PathBuf,
    },
    /// The `schema_version` table has more than one row, so the version is ambiguous.
    #[error("zone DB {} has {rows} rows in schema_version, expected exactly one", path.display())]
    TooManyVersions {
        /// The zone DB file.
        path: PathBuf,
        /// How many rows there are.
        rows: u64,
    },
    /// The `schema_version` row holds something that is not a version number.
    #[error("zone DB {} has an invalid schema version: {detail}", path.display())]
    BadVersion {
        /// The zone DB file.
        path: PathBuf,
        /// The offending value.
        detail: String,
    },
    /// The file has a major version below 2 and must be upgraded before it can be used.
    #[error(
        "zone DB {p} has schema version {found}; upgrade it with 'dbutil --upgrade {p}' \
         (this build serves {major}.x, newest {latest})",
        p = path.display(),
        major = LATEST.major,
        latest = LATEST
    )]
    NeedsUpgrade {
        /// The zone DB file.
        path: PathBuf,
        /// The version the file has.
        found: SchemaVersion,
    },
    /// The file has a major version above 2: written by a newer program, refused.
    #[error(
        "zone DB {} has schema version {found}, newer than this build supports ({latest})",
        path.display(),
        latest = LATEST
    )]
    TooNew {
        /// The zone DB file.
        path: PathBuf,
        /// The version the file has.
        found: SchemaVersion,
    },
    /// [`upgrade`] was asked to upgrade a file with the current major version but a newer
    /// minor (e.g. 2.100). Such a file is served as it is; it cannot be upgraded.
    #[error(
        "zone DB {} has schema version {found}, newer than the newest this build can upgrade to \
         ({latest}); it can be served as it is",
        path.display(),
        latest = LATEST
    )]
    NewerMinor {
        /// The zone DB file.
        path: PathBuf,
        /// The version the file has.
        found: SchemaVersion,
    },
    /// No sequence of upgrade steps leads from the file's version to [`LATEST`].
    #[error(
        "zone DB {} has schema version {found}, which no upgrade step starts from \
         (known: 1.0, 2.0, 2.1)",
        path.display()
    )]
    NoUpgradePath {
        /// The zone DB file.
        path: PathBuf,
        /// The version the file has.
        found: SchemaVersion,
    },
    /// A WAL-mode DB without its `-shm` file (the wal-index SQLite needs to
    /// read the log), in a folder where none can be created, whose `-wal`
    /// file holds changes: read as immutable, the DB would lack them.
    #[error(
        "zone DB {} is in WAL mode and its write-ahead log ({}-wal) holds changes, but it has \
         no -shm file and none can be created (read-only folder or file): SQLite cannot read \
         the log; let authd write in the folder once, or restore the -shm file",
        path.display(), path.display()
    )]
    WalWithoutShm {
        /// The zone DB file.
        path: PathBuf,
    },
    /// The file (or its directory) is not writable, so it cannot be created or upgraded.
    #[error("zone DB {} is not writable", path.display())]
    NotWritable {
        /// The zone DB file.
        path: PathBuf,
    },
    /// Creating the schema in a new file failed.
    #[error("cannot create zone DB {}: {source}", path.display())]
    Create {
        /// The zone DB file.
        path: PathBuf,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// Writing the backup copy failed; the zone DB was not changed.
    #[error("cannot back up zone DB {} to {}: {source}; the zone DB was not changed",
        path.display(), backup.display())]
    Backup {
        /// The zone DB file.
        path: PathBuf,
        /// The backup file that could not be written.
        backup: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// An upgrade step failed; the transaction was rolled back, so the file is unchanged.
    #[error(
        "upgrading zone DB {} from {from} to {to} failed, the file is unchanged{}: {source}",
        path.display(),
        backup_note(backup.as_deref())
    )]
    Upgrade {
        /// The zone DB file.
        path: PathBuf,
        /// The version the file had (and still has).
        from: SchemaVersion,
        /// The version the failing step was to produce.
        to: SchemaVersion,
        /// The backup written before the upgrade, if it got that far.
        backup: Option<PathBuf>,
        /// What failed.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// SQLite refused to switch the file to WAL mode (e.g. a file system without shared memory).
    #[error("zone DB {} could not be switched to WAL mode (journal mode is {mode})", path.display())]
    NoWal {
        /// The zone DB file.
        path: PathBuf,
        /// The journal mode SQLite reported instead.
        mode: String,
    },
    /// Another SQLite operation on an already checked file failed (setting the journal mode,
    /// checkpointing, committing).
    #[error("zone DB {}: {action} failed: {source}", path.display())]
    Sqlite {
        /// The zone DB file.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The SQLite error.
        source: rusqlite::Error,
    },
}

fn backup_note(backup: Option<&Path>) -> String {
    match backup {
        Some(b) => format!(" (backup at {})", b.display()),
        None => String::new(),
    }
}

impl Error {
    /// The zone DB file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Error::Missing { path }
            | Error::Io { path, .. }
            | Error::Unreadable { path, .. }
            | Error::Corrupt { path, .. }
            | Error::NotSqlite { path }
            | Error::NotZoneDb { path, .. }
            | Error::NoVersion { path }
            | Error::TooManyVersions { path, .. }
            | Error::BadVersion { path, .. }
            | Error::NeedsUpgrade { path, .. }
            | Error::TooNew { path, .. }
            | Error::NewerMinor { path, .. }
            | Error::NoUpgradePath { path, .. }
            | Error::NotWritable { path }
            | Error::WalWithoutShm { path }
            | Error::Create { path, .. }
            | Error::Backup { path, .. }
            | Error::Upgrade { path, .. }
            | Error::NoWal { path, .. }
            | Error::Sqlite { path, .. } => path,
        }
    }

    /// True for errors that mean the file could not be read as a zone DB at all: missing,
    /// inaccessible, not SQLite, corrupt, not a zone DB, no usable version row.
    /// (b10-dbutil's "read error", exit code 4.)
    pub fn is_read_error(&self) -> bool {
        matches!(
            self,
            Error::Missing { .. }
                | Error::Io { .. }
                | Error::Unreadable { .. }
                | Error::Corrupt { .. }
                | Error::NotSqlite { .. }
                | Error::NotZoneDb { .. }
                | Error::NoVersion { .. }
                | Error::TooManyVersions { .. }
                | Error::BadVersion { .. }
                | Error::WalWithoutShm { .. }
        )
    }
}

/// Reads the schema version of an open zone DB.
///
/// A `schema_version` table with only the `version` column is a 1.x file and reads as
/// (version, 0); with a `minor` column it reads as (version, minor) — except that major 1
/// always has minor 0, as in b10-dbutil. A file at a version up to [`LATEST`] must also have
/// the `zones` and `records` tables; newer versions are not checked further, since their
/// layout is unknown. Nothing is written.
///
/// Errors: [`Error::NotZoneDb`], [`Error::NoVersion`] (no row), [`Error::TooManyVersions`],
/// [`Error::BadVersion`], [`Error::Unreadable`] (not SQLite, corrupt, I/O, locked).
pub fn detect(conn: &Connection) -> Result<SchemaVersion, Error> {
    let path = match conn.path() {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(":memory:"),
    };
    detect_at(conn, &path)
}

/// Opens a zone DB for serving: read-only (`SQLITE_OPEN_READ_ONLY`, so files without write
/// permission work), never changing the file; see [`open_to_serve`].
///
/// Errors: as [`open_to_serve`].
pub fn open_for_serving(path: &Path) -> Result<(Connection, SchemaVersion), Error> {
    open_to_serve(path).map(|s| (s.conn, s.version))
}

/// A zone DB opened for serving ([`open_to_serve`]).
pub struct Serving {
    /// The read-only connection.
    pub conn: Connection,
    /// The DB's schema version.
    pub version: SchemaVersion,
    /// Opened immutable (`?immutable=1`): no locks, no `-wal` or `-shm`
    /// read or made, changes by others never seen; a server refuses writes.
    pub immutable: bool,
}

/// Opens a zone DB for serving: read-only (`SQLITE_OPEN_READ_ONLY`, so files without write
/// permission work), never changing the file.
///
/// A WAL-mode DB needs its `-shm` file (the wal-index), which SQLite creates when it is
/// missing; where it cannot (a read-only folder: `SQLITE_CANTOPEN` or
/// `SQLITE_READONLY_DIRECTORY`), the DB is opened immutable when no `-shm` nor hot `-journal`
/// is beside it and its `-wal` is absent or empty, so the main file is the whole DB. Only
/// `stat` looks at the files beside it: opening and closing the DB file with a descriptor of
/// our own would drop the POSIX locks SQLite's connections in this process hold on it.
///
/// Any 2.x version is accepted (2.0, 2.1, 2.2, and newer minors such as 2.100). Major 1 gives
/// [`Error::NeedsUpgrade`], a major above 2 [`Error::TooNew`], a missing file
/// [`Error::Missing`], a `-wal` holding changes that cannot be read for want of a `-shm`
/// [`Error::WalWithoutShm`]; see [`detect`] for the rest.
pub fn open_to_serve(path: &Path) -> Result<Serving, Error> {
    let conn = open_read_only(path)?;
    let (conn, version, immutable) = match detect_at(&conn, path) {
        Ok(version) => (conn, version, false),
        Err(Error::Unreadable { source, .. })
            if matches!(
                source.sqlite_error_code(),
                Some(rusqlite::ErrorCode::CannotOpen)
            ) || extended_code(&source) == Some(SQLITE_READONLY_DIRECTORY) =>
        {
            if beside(path, "-shm").exists() || beside(path, "-journal").exists() {
                return Err(unreadable(path, source));
            }
            drop(conn);
            let conn = open_immutable(path)?;
            let version = detect_at(&conn, path)?;
            (conn, version, true)
        }
        Err(e) => return Err(e),
    };
    require_servable(path, version)?;
    Ok(Serving {
        conn,
        version,
        immutable,
    })
}

/// SQLite's `SQLITE_READONLY_DIRECTORY`: a file cannot be created beside the DB.
const SQLITE_READONLY_DIRECTORY: i32 = 8 | (6 << 8);

fn extended_code(e: &rusqlite::Error) -> Option<i32> {
    match e {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.extended_code),
        _ => None,
    }
}

/// `path` with `suffix` appended (`zones.sqlite3` → `zones.sqlite3-wal`).
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Opens `path` read-only as immutable (see [`open_for_serving`]).
///
/// Errors: [`Error::WalWithoutShm`] when its `-wal` holds anything;
/// [`Error::Unreadable`].
fn open_immutable(path: &Path) -> Result<Connection, Error> {
    if fs::metadata(beside(path, "-wal")).is_ok_and(|m| m.len() > 0) {
        return Err(Error::WalWithoutShm {
            path: path.to_path_buf(),
        });
    }
    let conn = Connection::open_with_flags(
        format!("file:{}?immutable=1", uri_path(path)),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|source| unreadable(path, source))?;
    set_busy_timeout(&conn, path)?;
    Ok(conn)
}

/// `path` as the path of a `file:` URI (RFC 3986 percent-encoding of every
/// byte but unreserved ones and `/`), as SQLite decodes it.
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Opens a zone DB read-write, creating it at [`LATEST`] if needed (used by `loadzone`).
///
/// A missing file, or an existing SQLite file with no schema at all (e.g. an empty file), is
/// given the full 2.2 schema inside one exclusive transaction and switched to WAL mode
/// (`PRAGMA journal_mode=WAL`). An existing zone DB gets the same version checks as
/// [`open_for_serving`] (any 2.x is accepted) and is otherwise left as it is.
pub fn open_or_create(path: &Path) -> Result<Connection, Error> {
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|source| Error::Create {
        path: path.to_path_buf(),
        source,
    })?;
    set_busy_timeout(&conn, path)?;
    // SQLite silently falls back to read-only when the file is not writable.
    if conn.is_readonly("main").unwrap_or(true) {
        return Err(Error::NotWritable {
            path: path.to_path_buf(),
        });
    }
    if is_empty_db(&conn, path)? {
        let create = |source| Error::Create {
            path: path.to_path_buf(),
            source,
        };
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(create)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::NoWal {
                path: path.to_path_buf(),
                mode,
            });
        }
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Exclusive)
            .map_err(create)?;
        // Another process may have created the schema between our check and the lock.
        if is_empty_db(&tx, path)? {
            tx.execute_batch(CREATE_LATEST_SQL).map_err(create)?;
        }
        tx.commit().map_err(create)?;
    }
    let version = detect_at(&conn, path)?;
    require_servable(path, version)?;
    Ok(conn)
}

/// authd's own tables, kept beside BIND 10's schema in the same file (so a
/// zone DB stays one self-contained file and `dbutil --backup` carries them),
/// each `CREATE TABLE IF NOT EXISTS` and created when first written, so a DB
/// authd only serves is never changed. Each is (table, DDL); a later column
/// is added by [`ensure_authd_table`] from [`AUTHD_COLUMNS`].
pub const AUTHD_TABLES: [(&str, &str); 3] = [
    (
        "authd_secondary",
        include_str!("../sql/authd_secondary.sql"),
    ),
    (
        "authd_catalog_member",
        include_str!("../sql/authd_catalog_member.sql"),
    ),
    // With authd_dnssec_key, authd_signing_log and the triggers on records.
    ("authd_signing", include_str!("../sql/authd_signing.sql")),
];

/// Indexes authd adds to BIND 10's tables when it first writes a DB (a DB
/// authd only serves is never changed): BIND 10's schema has none on
/// `zone_id`, so replacing or deleting one zone of a DB holding many (a
/// catalog consumer's) scanned every row of the table. Each is (index,
/// DDL); BIND 10 and authd's schema checks ignore them.
pub const AUTHD_INDEXES: [(&str, &str); 3] = [
    (
        "authd_records_byzone",
        "CREATE INDEX IF NOT EXISTS authd_records_byzone ON records (zone_id)",
    ),
    (
        "authd_nsec3_byzone",
        "CREATE INDEX IF NOT EXISTS authd_nsec3_byzone ON nsec3 (zone_id)",
    ),
    (
        "authd_diffs_byzone",
        "CREATE INDEX IF NOT EXISTS authd_diffs_byzone ON diffs (zone_id)",
    ),
];

/// Creates [`AUTHD_INDEXES`] in the DB behind `conn` where missing.
///
/// Errors: the SQL fails (read-only or locked DB, a table missing).
pub fn ensure_authd_indexes(conn: &Connection) -> Result<(), rusqlite::Error> {
    for (_, ddl) in AUTHD_INDEXES {
        conn.execute_batch(ddl)?;
    }
    Ok(())
}

/// Indexes a DB gets when one of its zones is put under a signing policy
/// (not before: each costs every insert, a third more time in a large
/// zone's load), each (index, DDL).
pub const SIGNING_INDEXES: [(&str, &str); 2] = [
    // The NSEC neighbours of a signed UPDATE's names in canonical order
    // (RFC 4034 §6.1): `rname` with its label separator below every byte a
    // label's text holds (authd_datasrc::sqlite_signing's CANON, the same
    // expression, so the planner uses it).
    (
        "authd_records_canonical",
        "CREATE INDEX IF NOT EXISTS authd_records_canonical ON records \
         (zone_id, replace(lower(rname), '.', char(1)))",
    ),
    // The rows whose names hold an escape (`\`), which that order does not
    // sort canonically: a partial index, empty in almost every zone.
    (
        "authd_records_escaped",
        "CREATE INDEX IF NOT EXISTS authd_records_escaped ON records (zone_id) \
         WHERE instr(rname, '\\') > 0",
    ),
];

/// Creates [`SIGNING_INDEXES`] in the DB behind `conn` where missing (on a
/// large zone the first time: a few seconds a million rows).
///
/// Errors: the SQL fails (read-only or locked DB).
pub fn ensure_signing_indexes(conn: &Connection) -> Result<(), rusqlite::Error> {
    for (_, ddl) in SIGNING_INDEXES {
        conn.execute_batch(ddl)?;
    }
    Ok(())
}

/// Columns added to authd's tables after their first version: (table,
/// column, its definition). Older files get them when the table is next
/// written.
pub const AUTHD_COLUMNS: [(&str, &str, &str); 2] = [
    ("authd_secondary", "pending", "INTEGER NOT NULL DEFAULT 0"),
    ("authd_signing", "input_serial", "INTEGER"),
];

/// Creates authd's table `table` ([`AUTHD_TABLES`]) in the DB behind `conn`
/// if missing, and adds any of its [`AUTHD_COLUMNS`] an older file lacks.
///
/// Errors: `table` is not one of [`AUTHD_TABLES`] ([`rusqlite::Error::InvalidParameterName`]),
/// or the SQL fails (read-only or locked DB).
pub fn ensure_authd_table(conn: &Connection, table: &str) -> Result<(), rusqlite::Error> {
    let Some((_, ddl)) = AUTHD_TABLES.iter().find(|(t, _)| *t == table) else {
        return Err(rusqlite::Error::InvalidParameterName(table.to_string()));
    };
    conn.execute_batch(ddl)?;
    for (_, column, def) in AUTHD_COLUMNS.iter().filter(|(t, _, _)| *t == table) {
        let mut stmt = conn.prepare(&format!(
            "SELECT 1 FROM pragma_table_info('{table}') WHERE name=?1"
        ))?;
        if !stmt.exists([column])? {
            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {def}"))?;
        }
    }
    Ok(())
}

/// Opens an existing zone DB read-write for a served source's writer: never
/// creating a file (a DB deleted while served must not come back empty),
/// waiting at most `lock_wait` for another writer's lock from the first
/// statement on, with the version checks of [`open_for_serving`].
///
/// Errors: [`Error::Missing`], [`Error::NotWritable`] (no write permission:
/// tried again at the next write, so a DB made writable later is written),
/// and those of [`detect`].
pub fn open_for_writing(path: &Path, lock_wait: Duration) -> Result<Connection, Error> {
    require_exists(path)?;
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|source| unreadable(path, source))?;
    conn.busy_timeout(lock_wait)
        .map_err(|source| unreadable(path, source))?;
    if conn.is_readonly("main").unwrap_or(true) {
        return Err(Error::NotWritable {
            path: path.to_path_buf(),
        });
    }
    let version = detect_at(&conn, path)?;
    require_servable(path, version)?;
    Ok(conn)
}

/// Reads a zone DB's schema version without modifying the file (for `dbutil --check`).
///
/// Unlike [`open_for_serving`] no version policy is applied: 1.0 and 1000.0 are returned as
/// they are. Errors are those of [`detect`], plus [`Error::Missing`].
pub fn check(path: &Path) -> Result<SchemaVersion, Error> {
    let conn = open_read_only(path)?;
    detect_at(&conn, path)
}

/// Upgrades a zone DB in place to [`LATEST`].
///
/// Under an exclusive lock, the file is first copied byte for byte to `PATH.backup` (or
/// `PATH.backup-1`, `PATH.backup-2`, … if taken); then every needed step (1.0→2.0, 2.0→2.1,
/// 2.1→2.2) runs in ONE transaction, so the file ends at [`LATEST`] or is left unchanged.
/// After the commit the file is switched to WAL mode. A file already at [`LATEST`] is left
/// alone (no backup). If a step fails the backup is kept and named in the error.
///
/// Errors: those of [`detect`]; [`Error::Missing`]; [`Error::TooNew`] (major above 2);
/// [`Error::NewerMinor`] (e.g. 2.100); [`Error::NoUpgradePath`]; [`Error::NotWritable`];
/// [`Error::Backup`]; [`Error::Upgrade`]; [`Error::Sqlite`].
pub fn upgrade(path: &Path) -> Result<UpgradeReport, Error> {
    require_exists(path)?;
    // Keep one descriptor open for the whole upgrade and read the backup through it: closing
    // any descriptor of the file would release SQLite's POSIX locks on it.
    let mut original = File::open(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let result = upgrade_with(path, &mut original);
    drop(original);
    result
}

fn upgrade_with(path: &Path, original: &mut File) -> Result<UpgradeReport, Error> {
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|source| unreadable(path, source))?;
    set_busy_timeout(&conn, path)?;

    let first = detect_at(&conn, path)?;
    if upgrade_plan(path, first)?.is_empty() {
        return Ok(UpgradeReport {
            from: first,
            to: first,
            backup: None,
        });
    }
    if conn.is_readonly("main").unwrap_or(true) {
        return Err(Error::NotWritable {
            path: path.to_path_buf(),
        });
    }
    let sqlite = |action: &'static str| {
        move |source: rusqlite::Error| Error::Sqlite {
            path: path.to_path_buf(),
            action,
            source,
        }
    };
    // A 2.0/2.1 file in WAL mode: move every committed page into the main file first, so
    // that the byte copy below is complete.
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |row| row.get(0))
        .map_err(sqlite("reading the journal mode"))?;
    if mode.eq_ignore_ascii_case("wal") {
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(sqlite("checkpointing the WAL"))?;
    }

    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Exclusive)
        .map_err(sqlite("locking the file"))?;
    // Read the version again under the lock: another process may have changed the file.
    let from = detect_at(&tx, path)?;
    let plan = upgrade_plan(path, from)?;
    if plan.is_empty() {
        return Ok(UpgradeReport {
            from,
            to: from,
            backup: None,
        });
    }
    let backup = write_backup(path, original)?;
    for step in &plan {
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| Error::Upgrade {
            path: path.to_path_buf(),
            from,
            to: step.to,
            backup: Some(backup.clone()),
            source,
        };
        tx.execute_batch(step.sql)
            .map_err(|e| failed(Box::new(e)))?;
        let now = detect_at(&tx, path).map_err(|e| failed(Box::new(e)))?;
        if now != step.to {
            return Err(failed(
                format!("step {} -> {} left version {now}", step.from, step.to).into(),
            ));
        }
    }
    tx.commit().map_err(|e| Error::Upgrade {
        path: path.to_path_buf(),
        from,
        to: LATEST,
        backup: Some(backup.clone()),
        source: Box::new(e),
    })?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .map_err(sqlite("switching to WAL mode"))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::NoWal {
            path: path.to_path_buf(),
            mode,
        });
    }
    conn.close().map_err(|(_, source)| Error::Sqlite {
        path: path.to_path_buf(),
        action: "closing",
        source,
    })?;
    Ok(UpgradeReport {
        from,
        to: LATEST,
        backup: Some(backup),
    })
}

/// The steps leading from `from` to [`LATEST`] (empty when `from` is [`LATEST`]).
fn upgrade_plan(path: &Path, from: SchemaVersion) -> Result<Vec<&'static Step>, Error> {
    if from.major > LATEST.major {
        return Err(Error::TooNew {
            path: path.to_path_buf(),
            found: from,
        });
    }
    if from > LATEST {
        return Err(Error::NewerMinor {
            path: path.to_path_buf(),
            found: from,
        });
    }
    let mut plan = Vec::new();
    let mut at = from;
    while at < LATEST {
        let step = STEPS
            .iter()
            .find(|s| s.from == at)
            .ok_or_else(|| Error::NoUpgradePath {
                path: path.to_path_buf(),
                found: from,
            })?;
        plan.push(step);
        at = step.to;
    }
    Ok(plan)
}

/// Copies the file (through `original`) to the first free name among `PATH.backup`,
/// `PATH.backup-1`, …, creating it exclusively, and syncs it to disk.
fn write_backup(path: &Path, original: &mut File) -> Result<PathBuf, Error> {
    let mut n: u64 = 0;
    loop {
        let mut name = path.as_os_str().to_owned();
        if n == 0 {
            name.push(".backup");
        } else {
            name.push(format!(".backup-{n}"));
        }
        let backup = PathBuf::from(name);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&backup)
        {
            Ok(mut out) => {
                let copied = (|| -> io::Result<()> {
                    original.seek(SeekFrom::Start(0))?;
                    io::copy(original, &mut out)?;
                    if let Ok(meta) = original.metadata() {
                        // Best effort: keep the original's permission bits.
                        let _ = out.set_permissions(meta.permissions());
                    }
                    out.sync_all()
                })();
                return match copied {
                    Ok(()) => Ok(backup),
                    Err(source) => {
                        drop(out);
                        let _ = fs::remove_file(&backup);
                        Err(Error::Backup {
                            path: path.to_path_buf(),
                            backup,
                            source,
                        })
                    }
                };
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => n += 1,
            Err(source) => {
                return Err(Error::Backup {
                    path: path.to_path_buf(),
                    backup,
                    source,
                });
            }
        }
    }
}

fn require_exists(path: &Path) -> Result<(), Error> {
    match fs::metadata(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Error::Missing {
            path: path.to_path_buf(),
        }),
        Err(source) => Err(Error::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn open_read_only(path: &Path) -> Result<Connection, Error> {
    require_exists(path)?;
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|source| unreadable(path, source))?;
    set_busy_timeout(&conn, path)?;
    Ok(conn)
}

/// The error for an SQLite failure on `path`: [`Error::Corrupt`] when SQLite
/// says the file is damaged, [`Error::NotSqlite`] when it says it is not a
/// database, else [`Error::Unreadable`].
pub fn unreadable(path: &Path, source: rusqlite::Error) -> Error {
    use rusqlite::ErrorCode;
    match source.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt) => Error::Corrupt {
            path: path.to_path_buf(),
            reason: source.to_string(),
        },
        Some(ErrorCode::NotADatabase) => Error::NotSqlite {
            path: path.to_path_buf(),
        },
        _ => Error::Unreadable {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// Runs SQLite's `PRAGMA integrity_check` on the zone DB at `path` (read
/// only; the whole file is read, so it takes time on a large DB).
///
/// Errors: [`Error::Corrupt`] with a one-line summary of the problems
/// ([`integrity_summary`]); what opening the file gives ([`Error::Missing`],
/// [`Error::Unreadable`]).
pub fn integrity_check(path: &Path) -> Result<(), Error> {
    let conn = open_read_only(path)?;
    let mut stmt = conn
        .prepare("PRAGMA integrity_check")
        .map_err(|source| unreadable(path, source))?;
    let rows: Vec<String> = stmt
        .query_map([], |row| row.get::<_, String>(0))
        .and_then(|rows| rows.collect())
        .map_err(|source| unreadable(path, source))?;
    // Tables and indexes by root page, to name what "Tree N" lines are about
    // (the schema page may be damaged too: then they go unnamed).
    let objects: Vec<(i64, String, String)> = conn
        .prepare("SELECT rootpage, type, name FROM sqlite_master")
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect()
        })
        .unwrap_or_default();
    match integrity_summary(&rows, &objects) {
        None => Ok(()),
        Some(reason) => Err(Error::Corrupt {
            path: path.to_path_buf(),
            reason,
        }),
    }
}

/// Most problems `PRAGMA integrity_check` reports (its default limit).
const INTEGRITY_LIMIT: usize = 100;

/// What `PRAGMA integrity_check` returned (`rows`; a row may hold several
/// lines), as one line: how many problems, the tables and indexes named
/// (`objects`: root page, type, name from `sqlite_master`), and the first
/// problem; `None` when it found none.
fn integrity_summary(rows: &[String], objects: &[(i64, String, String)]) -> Option<String> {
    let problems: Vec<&str> = rows
        .iter()
        .flat_map(|r| r.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != "ok" && !l.starts_with("*** in database"))
        .collect();
    let first = problems.first()?;
    let mut named: Vec<String> = Vec::new();
    for line in &problems {
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2) {
            let object = match pair {
                ["Tree", n] => n
                    .parse::<i64>()
                    .ok()
                    .and_then(|n| objects.iter().find(|o| o.0 == n))
                    .map(|(_, kind, name)| format!("{kind} {name}")),
                ["index", name] => Some(format!("index {}", name.trim_end_matches(':'))),
                ["in", column] if line.starts_with("NULL value") => column
                    .split_once('.')
                    .map(|(table, _)| format!("table {table}")),
                _ => None,
            };
            if let Some(o) = object
                && !named.contains(&o)
            {
                named.push(o);
            }
        }
    }
    let count = if problems.len() >= INTEGRITY_LIMIT {
        format!("{INTEGRITY_LIMIT} or more problems")
    } else if problems.len() == 1 {
        "1 problem".to_string()
    } else {
        format!("{} problems", problems.len())
    };
    let place = if named.is_empty() {
        String::new()
    } else {
        format!(" in {}", named.join(", "))
    };
    Some(format!(
        "integrity_check found {count}{place}; the first: {first}"
    ))
}

/// Moves a WAL-mode DB's log into the main file and empties it, so that a
/// plain copy of the quiet file (`cp`) is complete; a no-op for a DB not in
/// WAL mode. Called by the writing tools when they are done.
///
/// Errors: the checkpoint failed (the data is safe in the log all the same).
pub fn checkpoint(conn: &Connection) -> Result<(), rusqlite::Error> {
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
}

/// Copies the zone DB at `src` to `dst` with SQLite's online backup (a
/// consistent snapshot even while authd serves it and others write).
///
/// Errors: `src` cannot be read ([`Error::Missing`], [`Error::Corrupt`],
/// [`Error::Unreadable`]) or `dst` cannot be written ([`Error::Unreadable`]
/// naming `dst`).
pub fn backup(src: &Path, dst: &Path) -> Result<(), Error> {
    let from = open_read_only(src)?;
    // A failure at DST is about making the copy, not reading a zone DB.
    let create = |source| Error::Create {
        path: dst.to_path_buf(),
        source,
    };
    let mut to = Connection::open(dst).map_err(create)?;
    let backup = rusqlite::backup::Backup::new(&from, &mut to).map_err(create)?;
    backup
        .run_to_completion(256, std::time::Duration::from_millis(10), None)
        .map_err(|source| unreadable(src, source))
}

fn set_busy_timeout(conn: &Connection, path: &Path) -> Result<(), Error> {
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|source| unreadable(path, source))
}

fn require_servable(path: &Path, version: SchemaVersion) -> Result<(), Error> {
    match version.major.cmp(&LATEST.major) {
        std::cmp::Ordering::Less => Err(Error::NeedsUpgrade {
            path: path.to_path_buf(),
            found: version,
        }),
        std::cmp::Ordering::Greater => Err(Error::TooNew {
            path: path.to_path_buf(),
            found: version,
        }),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

/// True when the file has no schema objects at all (a new or zero-length file).
fn is_empty_db(conn: &Connection, path: &Path) -> Result<bool, Error> {
    let count: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get(0))
        .map_err(|source| unreadable(path, source))?;
    Ok(count == 0)
}

fn detect_at(conn: &Connection, path: &Path) -> Result<SchemaVersion, Error> {
    let unreadable = |source| unreadable(path, source);
    let not_zone_db = |reason: String| Error::NotZoneDb {
        path: path.to_path_buf(),
        reason,
    };

    let tables = names(
        conn,
        "SELECT lower(name) FROM sqlite_master WHERE type = 'table'",
    )
    .map_err(unreadable)?;
    let has_table = |table: &str| tables.iter().any(|t| t == table);
    if !has_table("schema_version") {
        return Err(not_zone_db("no schema_version table".to_string()));
    }
    let columns = names(
        conn,
        "SELECT lower(name) FROM pragma_table_info('schema_version')",
    )
    .map_err(unreadable)?;
    if !columns.iter().any(|c| c == "version") {
        return Err(not_zone_db(
            "the schema_version table has no version column".to_string(),
        ));
    }
    let has_minor = columns.iter().any(|c| c == "minor");

    let rows: i64 = conn
        .query_row("SELECT count(*) FROM schema_version", [], |row| row.get(0))
        .map_err(unreadable)?;
    match rows {
        0 => {
            return Err(Error::NoVersion {
                path: path.to_path_buf(),
            });
        }
        1 => {}
        n => {
            return Err(Error::TooManyVersions {
                path: path.to_path_buf(),
                rows: u64::try_from(n).unwrap_or(0),
            });
        }
    }
    let sql = if has_minor {
        "SELECT version, minor FROM schema_version"
    } else {
        "SELECT version, 0 FROM schema_version"
    };
    let (major, minor): (Value, Value) = conn
        .query_row(sql, [], |row| Ok((row.get(0)?, row.get(1)?)))
        .map_err(unreadable)?;
    let bad = |what: &str, v: &Value| Error::BadVersion {
        path: path.to_path_buf(),
        detail: format!("{what} is {v:?}"),
    };
    let major_n = version_number(&major).ok_or_else(|| bad("version", &major))?;
    let minor_n = if major_n == 1 {
        // 1.x files have no minor column; b10-dbutil ignores it for major 1 in any case.
        0
    } else {
        version_number(&minor).ok_or_else(|| bad("minor", &minor))?
    };
    let version = SchemaVersion::new(major_n, minor_n);
    // The tables of the schemas this build knows (1.0 to 2.2) must be there. A newer schema
    // is not checked: its layout is unknown here (BIND's own newschema / new_minor_schema
    // test files hold only the schema_version table).
    if version <= LATEST {
        for table in ["zones", "records"] {
            if !has_table(table) {
                return Err(not_zone_db(format!(
                    "no {table} table (schema version {version})"
                )));
            }
        }
    }
    Ok(version)
}

fn names(conn: &Connection, sql: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map([], |row| row.get::<_, String>(0))?;
    rows.collect()
}

/// A version part as stored: an integer, or text / a real holding a non-negative integer.
fn version_number(v: &Value) -> Option<u32> {
    match v {
        Value::Integer(i) => u32::try_from(*i).ok(),
        Value::Text(s) => s.trim().parse().ok(),
        Value::Real(f) if f.fract() == 0.0 && *f >= 0.0 && *f <= f64::from(u32::MAX) => {
            // Exact: checked to be integral and in range above.
            Some(*f as u32)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// integrity_check's report (its first row holds a header line and the
    /// first problem) as one line: the count, what it is in, the first.
    #[test]
    fn integrity_check_report_in_one_line() {
        let objects = vec![
            (5, "table".to_string(), "records".to_string()),
            (6, "index".to_string(), "records_byname".to_string()),
        ];
        let rows = vec![
            "*** in database main ***\nTree 5 page 5 cell 2: Offset 13107 out of range 3908..4092"
                .to_string(),
            "Tree 5 page 5 cell 1: Offset 13107 out of range 3908..4092".to_string(),
            "NULL value in records.rdata".to_string(),
            "row 3 missing from index records_byname".to_string(),
            "wrong # of entries in index records_byrname".to_string(),
        ];
        assert_eq!(
            integrity_summary(&rows, &objects).as_deref(),
            Some(
                "integrity_check found 5 problems in table records, index records_byname, index \
                 records_byrname; the first: Tree 5 page 5 cell 2: Offset 13107 out of range \
                 3908..4092"
            )
        );
        assert_eq!(integrity_summary(&["ok".to_string()], &objects), None);
        assert_eq!(integrity_summary(&[], &objects), None);
        let many: Vec<String> = (0..100).map(|i| format!("Page {i}: never used")).collect();
        assert_eq!(
            integrity_summary(&many, &[]).as_deref(),
            Some("integrity_check found 100 or more problems; the first: Page 0: never used")
        );
    }

    #[test]
    fn display_and_order() {
        assert_eq!(LATEST.to_string(), "2.2");
        assert!(SchemaVersion::new(1, 0) < SchemaVersion::new(2, 0));
        assert!(SchemaVersion::new(2, 100) > LATEST);
        assert!(SchemaVersion::new(1000, 0) > SchemaVersion::new(2, 100));
    }

    #[test]
    fn steps_chain_to_latest() {
        let path = Path::new("x.sqlite3");
        for from in [
            SchemaVersion::new(1, 0),
            SchemaVersion::new(2, 0),
            SchemaVersion::new(2, 1),
        ] {
            let plan = upgrade_plan(path, from).expect("plan");
            assert_eq!(plan.first().map(|s| s.from), Some(from));
            assert_eq!(plan.last().map(|s| s.to), Some(LATEST));
        }
        assert!(upgrade_plan(path, LATEST).expect("plan").is_empty());
        assert!(matches!(
            upgrade_plan(path, SchemaVersion::new(1, 5)),
            Err(Error::NoUpgradePath { .. })
        ));
        assert!(matches!(
            upgrade_plan(path, SchemaVersion::new(3, 0)),
            Err(Error::TooNew { .. })
        ));
        assert!(matches!(
            upgrade_plan(path, SchemaVersion::new(2, 3)),
            Err(Error::NewerMinor { .. })
        ));
    }

    #[test]
    fn in_memory_create_and_detect() {
        let conn = Connection::open_in_memory().expect("open");
        assert!(matches!(detect(&conn), Err(Error::NotZoneDb { .. })));
        conn.execute_batch(CREATE_LATEST_SQL).expect("create");
        assert_eq!(detect(&conn).expect("detect"), LATEST);
    }

    #[test]
    fn version_values() {
        assert_eq!(version_number(&Value::Integer(2)), Some(2));
        assert_eq!(version_number(&Value::Text(" 3 ".into())), Some(3));
        assert_eq!(version_number(&Value::Real(2.0)), Some(2));
        assert_eq!(version_number(&Value::Real(2.5)), None);
        assert_eq!(version_number(&Value::Integer(-1)), None);
        assert_eq!(version_number(&Value::Null), None);
    }
}
