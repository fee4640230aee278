//! Building the data sources of a [`Config`], at start-up and on reload (SIGHUP).
//!
//! [`load`] turns the configured `[[datasource]]` list into the [`SourceList`]
//! a new [`crate::query::QueryProcessor`] answers from. Memory zones are built
//! off the query path into new immutable snapshots; the caller then swaps the
//! whole dispatcher in with [`super::DispatcherHandle::store`], so every query
//! is answered entirely from the old sources or entirely from the new ones.
//!
//! With the state of the previous load:
//! - a memory zone whose files (the master file and every `$INCLUDE`d file,
//!   compared by length and a content hash) are unchanged, or, for a zone
//!   copied from a DB, whose DB files (length, mtime, inode) and SOA serial are
//!   unchanged, keeps its snapshot (shared, not rebuilt; logged at debug);
//! - a memory zone that fails to load (syntax error, missing file, no SOA, …)
//!   keeps its previous snapshot if there was one, and the failure is reported
//!   with file and line ([`LoadReport::failed`]); the other zones still reload;
//! - an sqlite3 source whose settings are unchanged keeps its open DB
//!   (connections and prepared statements).
//!
//! Two sources claiming the same zone make the whole load fail
//! ([`ConfigError::DuplicateZone`]).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use authd_datasrc::memory::{MemorySource, MemoryZone};
use authd_datasrc::sqlite::SqliteSource;
use authd_datasrc::write::Difference;
use authd_datasrc::zonefile;
use authd_datasrc::{
    DataSource, DataSourceError, Lookup, LookupOptions, Name, Outcome, RRset, RType, SourceList,
    ZoneRef, ZoneSelection,
};

use crate::config::{Config, ConfigError, DataSourceConfig, DataSourceKind, source_label};

/// Why a load could not produce a source list at all (zone-level failures are
/// not errors: see [`LoadReport::failed`]).
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// The configuration is inconsistent, e.g. two sources claim one zone.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A zone DB could not be opened or listed (the message is the backend's,
    /// which names the file).
    #[error("{error}")]
    Open {
        /// The data source, e.g. `datasource[0] (sqlite3:/x.sqlite3)`.
        label: String,
        /// The backend's error (it names the file).
        #[source]
        error: DataSourceError,
    },
    /// A memory zone failed to load where that is fatal ([`open_sources`]).
    #[error(transparent)]
    Zone(#[from] ZoneFailure),
}

/// One memory zone that failed to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneFailure {
    /// The zone apex.
    pub zone: Name,
    /// The data source, e.g. `datasource[1] (memory:/etc/authd/a.zone)`.
    pub source: String,
    /// What went wrong, as `FILE:LINE: message` for master files (line 0 when
    /// the error concerns the whole zone or file, e.g. no SOA, missing file).
    pub error: String,
    /// The serial of the previous snapshot that keeps serving, if there was one.
    pub kept_serial: Option<u32>,
}

impl fmt::Display for ZoneFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "zone {} ({}): {}; ", self.zone, self.source, self.error)?;
        match self.kept_serial {
            Some(s) => write!(f, "still serving the previous version (serial {s})"),
            None => f.write_str("not served"),
        }
    }
}

impl std::error::Error for ZoneFailure {}

/// What a load did to the memory zones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Memory zones (re)built from their file or DB.
    pub reloaded: usize,
    /// Memory zones whose source was unchanged, kept without rebuilding.
    pub unchanged: usize,
    /// Memory zones that failed to load.
    pub failed: Vec<ZoneFailure>,
    /// Zones served live from sqlite3 sources (those in their DBs).
    pub sqlite_zones: usize,
}

impl fmt::Display for LoadReport {
    /// `N zones reloaded, M unchanged, K failed, S served from sqlite3`: the
    /// memory zones, then the zones an sqlite3 source serves as its DB holds
    /// them (read live: a reload has nothing to rebuild).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} zones reloaded, {} unchanged, {} failed, {} served from sqlite3",
            self.reloaded,
            self.unchanged,
            self.failed.len(),
            self.sqlite_zones
        )
    }
}

/// What one load built: the sources to answer from, the report, and the state
/// the next reload compares against.
pub struct Loaded {
    /// The sources, in configured order.
    pub sources: SourceList,
    /// What happened to the memory zones.
    pub report: LoadReport,
    /// Input for the next [`load`].
    pub state: LoadState,
}

/// The outcome of one load, kept for the next one: per source its settings,
/// its open DB (sqlite3) and its zone snapshots with their fingerprints (memory).
#[derive(Default)]
pub struct LoadState {
    entries: Vec<EntryState>,
}

struct EntryState {
    config: DataSourceConfig,
    sqlite: Option<Arc<SqliteSource>>,
    zones: Vec<ZoneState>,
}

#[derive(Clone)]
struct ZoneState {
    zone: Arc<MemoryZone>,
    fingerprint: Fingerprint,
}

/// What a snapshot was built from, to tell whether rebuilding would change it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Fingerprint {
    /// A master file: the main file first, then every `$INCLUDE`d file.
    Files(Vec<FileDigest>),
    /// A zone copied from a DB.
    Db {
        path: PathBuf,
        /// The DB file and its `-wal` file.
        stamps: Vec<Option<FileStamp>>,
        serial: u32,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct FileDigest {
    path: PathBuf,
    len: u64,
    hash: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

fn digest(path: &Path) -> Option<FileDigest> {
    let data = std::fs::read(path).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    h.write(&data);
    Some(FileDigest {
        path: path.to_path_buf(),
        len: data.len() as u64,
        hash: h.finish(),
    })
}

fn stamp(path: &Path) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(FileStamp {
        len: m.len(),
        modified: m.modified().ok(),
        inode: m.ino(),
    })
}

fn db_stamps(path: &Path) -> Vec<Option<FileStamp>> {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    vec![stamp(path), stamp(Path::new(&wal))]
}

/// How loading one zone went.
enum ZoneLoad {
    Unchanged(ZoneState),
    Built(ZoneState),
    Failed(String),
}

/// Builds the sources of `config`. With `previous` (a reload), unchanged memory
/// zones and sqlite3 DBs are reused and failed zones keep their previous
/// snapshot; without it (start-up), failed zones are left out and reported.
/// Blocking (file and DB I/O, parsing): call it off the async runtime, e.g. in
/// `tokio::task::spawn_blocking`.
///
/// Errors: [`LoadError::Config`] when two sources claim one zone;
/// [`LoadError::Open`] when an sqlite3 DB cannot be opened or listed (on a
/// reload, a memory source's DB that cannot be opened instead counts its
/// previous zones as failed and keeps them).
pub fn load(config: &Config, previous: Option<&LoadState>) -> Result<Loaded, LoadError> {
    let prev_zones: HashMap<&Name, &ZoneState> = previous
        .into_iter()
        .flat_map(|p| &p.entries)
        .flat_map(|e| &e.zones)
        .map(|z| (z.zone.origin(), z))
        .collect();
    let prev_dbs: HashMap<&Path, &Arc<SqliteSource>> = previous
        .into_iter()
        .flat_map(|p| &p.entries)
        .filter_map(|e| match (&e.config.kind, &e.sqlite) {
            (DataSourceKind::Sqlite3 { file, .. }, Some(db)) => Some((file.as_path(), db)),
            _ => None,
        })
        .collect();
    let mut claims: HashMap<Name, usize> = HashMap::new();
    let mut claim = |origin: &Name, i: usize| -> Result<(), ConfigError> {
        if let Some(&first) = claims.get(origin)
            && first != i
        {
            return Err(config.duplicate_zone(origin, first, i));
        }
        claims.insert(origin.clone(), i);
        Ok(())
    };

    let mut report = LoadReport::default();
    // sqlite3 sources serving every zone of their DB: (index in `sources`, datasource index).
    let mut serve_all: Vec<(usize, usize)> = Vec::new();
    let mut sources: Vec<(Arc<dyn DataSource>, ZoneSelection)> =
        Vec::with_capacity(config.datasources.len());
    let mut entries = Vec::with_capacity(config.datasources.len());
    for (i, ds) in config.datasources.iter().enumerate() {
        let label = source_label(i, ds);
        let open_err = |error: DataSourceError| LoadError::Open {
            label: label.clone(),
            error,
        };
        match &ds.kind {
            DataSourceKind::Sqlite3 { file, zones } => {
                // A DB deleted since it was opened fails the reload; one
                // replaced by another file is opened afresh (the connections
                // still open read the old file), and so is one opened
                // immutable (its folder may be writable now).
                let db = match prev_dbs.get(file.as_path()) {
                    Some(db) if !db.file_changed().map_err(open_err)? && !db.is_immutable() => {
                        Arc::clone(db)
                    }
                    Some(db) => {
                        let why = if db.is_immutable() {
                            "was served immutable (read-only)"
                        } else {
                            "was replaced"
                        };
                        tracing::info!("{label}: {} {why}; reopening it", file.display());
                        Arc::new(SqliteSource::open(file).map_err(open_err)?)
                    }
                    None => Arc::new(SqliteSource::open(file).map_err(open_err)?),
                };
                let in_db: Vec<Name> = db
                    .zones()
                    .map_err(open_err)?
                    .into_iter()
                    .map(|z| z.origin)
                    .collect();
                // A set to look in: a catalog consumer's DB holds thousands.
                let stored: HashSet<&Name> = in_db.iter().collect();
                let present = match zones {
                    Some(list) => list.iter().filter(|z| stored.contains(z)).count(),
                    None => in_db.len(),
                };
                let served: Vec<Name> = match zones {
                    Some(list) => {
                        // One line, not one per zone: a catalog change may
                        // bring a thousand zones not transferred yet.
                        let absent: Vec<&Name> =
                            list.iter().filter(|z| !stored.contains(z)).collect();
                        // Secondary zones (catalog members among them) are
                        // absent until their first transfer: expected.
                        let secondaries: HashSet<&Name> =
                            config.secondary.iter().map(|s| &s.origin).collect();
                        let expected = absent.iter().all(|z| secondaries.contains(z));
                        let absent: Vec<String> = absent.iter().map(ToString::to_string).collect();
                        match absent.as_slice() {
                            [] => {}
                            [z] if expected => tracing::info!(
                                "{label}: secondary zone {z} is not transferred yet; it is \
                                 served once it is"
                            ),
                            more if expected => tracing::info!(
                                "{label}: {} secondary zones are not transferred yet ({}{}); \
                                 each is served once it is",
                                more.len(),
                                more[..more.len().min(5)].join(", "),
                                if more.len() > 5 { ", …" } else { "" }
                            ),
                            [z] => tracing::warn!(
                                "{label}: zone {z} is not in {} (yet); it is served once it is",
                                file.display()
                            ),
                            [first @ .., last] if absent.len() <= 5 => tracing::warn!(
                                "{label}: zones {} and {last} are not in {} (yet); each is \
                                 served once it is",
                                first.join(", "),
                                file.display()
                            ),
                            more => tracing::warn!(
                                "{label}: {} zones are not in {} (yet): {}, …; each is served \
                                 once it is",
                                more.len(),
                                file.display(),
                                more[..5].join(", ")
                            ),
                        }
                        list.clone()
                    }
                    None => in_db,
                };
                for z in &served {
                    claim(z, i)?;
                }
                report.sqlite_zones += present;
                let selection = match zones {
                    Some(list) => ZoneSelection::Only(list.iter().cloned().collect()),
                    None => {
                        serve_all.push((sources.len(), i));
                        ZoneSelection::All
                    }
                };
                sources.push((
                    ds.cache.wrap(Arc::clone(&db) as Arc<dyn DataSource>),
                    selection,
                ));
                entries.push(EntryState {
                    config: ds.clone(),
                    sqlite: Some(db),
                    zones: Vec::new(),
                });
            }
            DataSourceKind::Memory {
                zones,
                db,
                secondary,
            } => {
                let mut states: Vec<ZoneState> = Vec::new();
                let mut record = |origin: &Name, outcome: ZoneLoad, states: &mut Vec<ZoneState>| {
                    let prev = prev_zones.get(origin).copied();
                    match outcome {
                        ZoneLoad::Unchanged(s) => {
                            report.unchanged += 1;
                            states.push(s);
                        }
                        ZoneLoad::Built(s) => {
                            report.reloaded += 1;
                            states.push(s);
                        }
                        ZoneLoad::Failed(error) => {
                            report.failed.push(ZoneFailure {
                                zone: origin.clone(),
                                source: label.clone(),
                                error,
                                kept_serial: prev.map(|p| p.zone.serial()),
                            });
                            if let Some(p) = prev {
                                states.push(p.clone());
                            }
                        }
                    }
                };
                for z in zones {
                    let Some(file) = &z.file else { continue };
                    claim(&z.origin, i)?;
                    let prev = prev_zones.get(&z.origin).copied();
                    let outcome = load_master_file(&z.origin, file, prev);
                    record(&z.origin, outcome, &mut states);
                }
                // The DB the zones were copied from, and the zones written
                // back through it.
                let mut backing: Option<(Arc<SqliteSource>, HashSet<Name>)> = None;
                if let Some(db_path) = db {
                    let with_file: HashSet<&Name> = zones
                        .iter()
                        .filter(|z| z.file.is_some())
                        .map(|z| &z.origin)
                        .collect();
                    let listed: Vec<&Name> = zones
                        .iter()
                        .filter(|z| z.file.is_none())
                        .map(|z| &z.origin)
                        .collect();
                    let opened = SqliteSource::open(db_path).and_then(|s| {
                        let zs = s.zones()?;
                        Ok((s, zs))
                    });
                    match opened {
                        Ok((src, in_db)) => {
                            let wanted: Vec<Name> = if listed.is_empty() {
                                in_db
                                    .iter()
                                    .map(|z| z.origin.clone())
                                    .filter(|o| !with_file.contains(o))
                                    .collect()
                            } else {
                                listed.into_iter().cloned().collect()
                            };
                            for origin in &wanted {
                                claim(origin, i)?;
                                let prev = prev_zones.get(origin).copied();
                                let outcome = match in_db.iter().find(|z| z.origin == *origin) {
                                    None if *secondary => {
                                        tracing::info!(
                                            "{label}: zone {origin} is not in {} yet; it is \
                                             served once transferred",
                                            db_path.display()
                                        );
                                        continue;
                                    }
                                    None => ZoneLoad::Failed(format!(
                                        "zone {origin} is not in {}",
                                        db_path.display()
                                    )),
                                    Some(zref) => load_db_zone(&src, db_path, zref, prev),
                                };
                                record(origin, outcome, &mut states);
                            }
                            backing = Some((Arc::new(src), wanted.into_iter().collect()));
                        }
                        Err(error) if previous.is_none() => return Err(open_err(error)),
                        Err(error) => {
                            // Keep every zone this source copied from the DB last time.
                            let mut known: Vec<Name> =
                                listed.into_iter().cloned().collect::<Vec<_>>();
                            for e in previous.into_iter().flat_map(|p| &p.entries) {
                                for z in &e.zones {
                                    if matches!(&z.fingerprint, Fingerprint::Db { path, .. } if path == db_path)
                                        && !known.contains(z.zone.origin())
                                    {
                                        known.push(z.zone.origin().clone());
                                    }
                                }
                            }
                            for origin in known {
                                claim(&origin, i)?;
                                record(&origin, ZoneLoad::Failed(error.to_string()), &mut states);
                            }
                        }
                    }
                }
                let snapshots = states.iter().map(|s| Arc::clone(&s.zone));
                let (memory, selection) = match backing {
                    Some((db, writable)) => {
                        // Secondary zones are served from here before their
                        // first transfer too (their writer is found by origin).
                        let selection = if *secondary {
                            ZoneSelection::Only(writable.clone())
                        } else {
                            ZoneSelection::All
                        };
                        (
                            MemorySource::backed_by(&label, snapshots, db, writable),
                            selection,
                        )
                    }
                    None => (
                        MemorySource::from_master_files(&label, snapshots),
                        ZoneSelection::All,
                    ),
                };
                sources.push((ds.cache.wrap(memory), selection));
                entries.push(EntryState {
                    config: ds.clone(),
                    sqlite: None,
                    zones: states,
                });
            }
        }
    }
    // A DB served whole may gain a zone another source serves (loadzone runs
    // while authd serves): keep it from shadowing that source until a reload
    // reports the conflict.
    for (at, i) in serve_all {
        let others: HashSet<Name> = claims
            .iter()
            .filter(|&(_, &c)| c != i)
            .map(|(z, _)| z.clone())
            .collect();
        if !others.is_empty() {
            sources[at].1 = ZoneSelection::Except(others);
        }
    }
    Ok(Loaded {
        sources: SourceList::with_selections(sources),
        report,
        state: LoadState { entries },
    })
}

/// Opens every data source of `config`, in order, into the list the query
/// processor searches, loading memory zones (a one-off [`load`]: nothing is
/// kept for a reload, and a zone that fails to load is an error).
///
/// Errors: the first source that fails to open or zone that fails to load,
/// or two sources claiming one zone; the message names the file (and line).
pub fn open_sources(config: &Config) -> Result<SourceList, LoadError> {
    let mut loaded = load(config, None)?;
    if !loaded.report.failed.is_empty() {
        return Err(LoadError::Zone(loaded.report.failed.swap_remove(0)));
    }
    Ok(loaded.sources)
}

fn elapsed_ms(start: Instant) -> u128 {
    start.elapsed().as_millis()
}

/// Loads zone `origin` from the master file `path`, unless `prev` was built
/// from exactly the same file contents.
fn load_master_file(origin: &Name, path: &Path, prev: Option<&ZoneState>) -> ZoneLoad {
    if let Some(p) = prev
        && let Fingerprint::Files(files) = &p.fingerprint
        && files.first().is_some_and(|f| f.path == path)
        && files.iter().all(|f| digest(&f.path).as_ref() == Some(f))
    {
        tracing::debug!(
            "zone {origin}: {} unchanged (serial {}), not rebuilt",
            path.display(),
            p.zone.serial()
        );
        return ZoneLoad::Unchanged(p.clone());
    }
    let start = Instant::now();
    // Digest before parsing: if the file changes in between, the next reload
    // sees a different digest and rebuilds (never the other way round).
    let main = digest(path);
    let pieces = match zonefile::read_master_file_pieces(path, origin)
        .and_then(|r| zonefile::check_pieces(origin, &r).map(|()| r))
    {
        Ok(r) => r,
        Err(e) => return ZoneLoad::Failed(e.to_string()),
    };
    let Some(main) = main else {
        return ZoneLoad::Failed(format!("{}:0: cannot read", path.display()));
    };
    let mut files = vec![main];
    // Records share their file's `Arc`: paths are compared once per run of
    // records from one file, not once per record.
    let mut last: Option<&Arc<PathBuf>> = None;
    for r in pieces.iter().flatten() {
        if last.is_some_and(|l| Arc::ptr_eq(l, &r.file)) {
            continue;
        }
        last = Some(&r.file);
        if !files.iter().any(|f| f.path == *r.file.as_ref()) {
            match digest(&r.file) {
                Some(d) => files.push(d),
                None => {
                    return ZoneLoad::Failed(format!("{}:0: cannot read", r.file.display()));
                }
            }
        }
    }
    let parsed = start.elapsed();
    let zone = MemoryZone::from_sourced_pieces(origin.clone(), pieces);
    let zone = with_history(zone, prev);
    tracing::debug!(
        "zone {origin}: read and checked in {} ms, snapshot built in {} ms",
        parsed.as_millis(),
        (start.elapsed() - parsed).as_millis()
    );
    built(zone, prev, "loaded", path, start, Fingerprint::Files(files))
}

/// A newly built snapshot, logged with how it was made (`loaded` from a file,
/// `copied` from a DB), where from, its serial and size.
fn built(
    zone: MemoryZone,
    prev: Option<&ZoneState>,
    how: &str,
    path: &Path,
    start: Instant,
    fingerprint: Fingerprint,
) -> ZoneLoad {
    let origin = zone.origin().clone();
    warn_same_serial(&origin, prev, &zone);
    tracing::info!(
        "zone {origin}: {how} {} (serial {}, {} RRsets) in {} ms",
        path.display(),
        zone.serial(),
        zone.rrset_count(),
        elapsed_ms(start)
    );
    ZoneLoad::Built(ZoneState {
        zone: Arc::new(zone),
        fingerprint,
    })
}

/// Copies zone `zref` of the DB `src` (at `path`), unless `prev` was copied
/// from the same DB files with the same serial.
fn load_db_zone(
    src: &SqliteSource,
    path: &Path,
    zref: &ZoneRef,
    prev: Option<&ZoneState>,
) -> ZoneLoad {
    let origin = &zref.origin;
    let stamps = db_stamps(path);
    let serial = match src.lookup(zref, origin, RType::SOA, LookupOptions::default()) {
        Ok(Lookup {
            outcome: Outcome::Answer(soa),
            ..
        }) => soa_serial(&soa),
        Ok(_) => None,
        Err(e) => return ZoneLoad::Failed(e.to_string()),
    };
    let Some(serial) = serial else {
        return ZoneLoad::Failed(format!(
            "zone {origin} in {}: no SOA at the zone apex",
            path.display()
        ));
    };
    let fingerprint = Fingerprint::Db {
        path: path.to_path_buf(),
        stamps,
        serial,
    };
    if let Some(p) = prev
        && p.fingerprint == fingerprint
    {
        tracing::debug!(
            "zone {origin}: {} unchanged (serial {serial}), not rebuilt",
            path.display()
        );
        return ZoneLoad::Unchanged(p.clone());
    }
    let start = Instant::now();
    match MemoryZone::from_source(src, zref) {
        Ok(zone) => built(zone, prev, "copied from", path, start, fingerprint),
        Err(e) => ZoneLoad::Failed(e.to_string()),
    }
}

/// Differences a master-file zone keeps for IXFR out (the oldest dropped
/// first); also never more RRs in all than the zone holds (as BIND bounds a
/// journal by the zone's size), or [`HISTORY_MIN_RRS`] for a small zone, so
/// a reload can at most double a large zone's memory.
pub const HISTORY_DIFFERENCES: usize = 64;

/// The RRs a small zone's history may hold whatever its size.
pub const HISTORY_MIN_RRS: usize = 10_000;

/// `zone` (just loaded from its master file) with its history: the previous
/// version's, plus the difference from it, when the serial grew (RFC 1982);
/// none when there was no previous version or the serial did not grow (a
/// secondary at an older serial then gets the whole zone).
fn with_history(zone: MemoryZone, prev: Option<&ZoneState>) -> MemoryZone {
    let Some(prev) = prev else {
        return zone;
    };
    if !authd_datasrc::write::serial_gt(zone.serial(), prev.zone.serial()) {
        return zone;
    }
    let now = zone.records();
    let Some(diff) = Difference::between(&prev.zone.records(), &now) else {
        return zone;
    };
    let mut history = prev.zone.history().to_vec();
    let (deleted, added) = (diff.deleted.len(), diff.added.len());
    history.push(diff);
    let limit = now.len().max(HISTORY_MIN_RRS);
    let mut rows: usize = history.iter().map(Difference::len).sum();
    let mut drop = 0;
    while history.len() - drop > HISTORY_DIFFERENCES || (rows > limit && history.len() - drop > 1) {
        rows -= history[drop].len();
        drop += 1;
    }
    history.drain(..drop);
    let (origin, from, to) = (zone.origin(), prev.zone.serial(), zone.serial());
    if rows > limit {
        // One difference larger than the zone: a full transfer is smaller.
        history.clear();
        tracing::info!(
            "zone {origin}: serial {from} -> {to}: {deleted} RRs deleted, {added} added, more \
             than the zone holds: not kept (secondaries transfer the whole zone)"
        );
    } else {
        tracing::info!(
            "zone {origin}: serial {from} -> {to}: {deleted} RRs deleted, {added} added, kept \
             for IXFR"
        );
    }
    zone.with_history(history)
}

fn soa_serial(soa: &RRset) -> Option<u32> {
    soa.rdatas.first().and_then(|r| r.soa_serial())
}

fn warn_same_serial(origin: &Name, prev: Option<&ZoneState>, zone: &MemoryZone) {
    let Some(p) = prev else {
        return;
    };
    let (old, new) = (p.zone.serial(), zone.serial());
    if old == new {
        tracing::warn!(
            "zone {origin}: content changed but the serial ({new}) did not; secondaries will not notice"
        );
    } else if !authd_datasrc::write::serial_gt(new, old) {
        // RFC 1982: a secondary at `old` sees `new` as older and keeps its copy.
        tracing::warn!(
            "zone {origin}: the serial went back from {old} to {new}; secondaries will not \
             notice (they keep serial {old}), and the differences kept for IXFR are gone"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MemoryZoneConfig;

    fn example_zone(file: &str) -> DataSourceConfig {
        DataSourceConfig::memory(
            vec![MemoryZoneConfig {
                origin: "example.com.".parse().expect("name"),
                file: Some(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)),
            }],
            None,
        )
    }

    fn config(ds: DataSourceConfig) -> Config {
        Config {
            datasources: vec![ds],
            ..Config::default()
        }
    }

    #[test]
    fn open_sources_loads_or_names_the_failing_file() {
        let good = config(example_zone("../examples/example.com.zone"));
        let sources = open_sources(&good).expect("example zone loads");
        let zones: Vec<ZoneRef> = sources
            .zones()
            .into_iter()
            .flat_map(|(_, zones)| zones.expect("zones"))
            .collect();
        assert_eq!(zones.len(), 1);
        assert_eq!(zones[0].origin.to_string(), "example.com.");

        let e = open_sources(&config(example_zone("missing.zone")))
            .err()
            .expect("a missing master file is an error")
            .to_string();
        assert!(e.contains("missing.zone"), "{e}");
    }
}
