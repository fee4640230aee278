//! What the query battery (`semantics.rs`) and the write battery
//! (`writes.rs`) share: every composition of sources authd's configuration can
//! build, each built by `reload::load` as authd builds it.

use std::path::Path;

use authd::config::{CacheConfig, Config, DataSourceConfig, DataSourceKind, MemoryZoneConfig};
use authd::server::reload;
use authd_datasrc::write::JournalPolicy;
use authd_datasrc::{Name, SourceList, ZoneWriter, zonefile};

/// How authd's configuration can serve a zone: each backend, with and without
/// the hot-spot cache, and restricted to some zones of a DB (`zones = [...]`)
/// or not. Every composition is built by `reload::load`, as authd builds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `type = "sqlite3"`: the zone served live from a DB.
    Sqlite3,
    /// `type = "memory"` with the zone's master file.
    MemoryFile,
    /// `type = "memory"` copying the zone from a DB (BIND 10's sqlite3-to-memory path).
    MemoryFromDb,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Composition {
    /// Where the zone is kept.
    pub backend: Backend,
    /// Wrapped by the hot-spot cache.
    pub cache: bool,
    /// The DB also holds a zone inside the tested one (`decoy.ORIGIN`) that
    /// the `zones` list leaves out; it must neither be served nor hide the
    /// tested zone.
    pub restricted: bool,
}

impl std::fmt::Display for Composition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match self.backend {
            Backend::Sqlite3 => "sqlite3",
            Backend::MemoryFile => "memory",
            Backend::MemoryFromDb => "memory-from-sqlite3",
        };
        write!(f, "{backend}")?;
        if self.cache {
            f.write_str("+cache")?;
        }
        if self.restricted {
            f.write_str("+zones")?;
        }
        Ok(())
    }
}

/// Every composition the configuration can build (a memory source reading
/// master files has no `zones` restriction).
pub const COMPOSITIONS: &[Composition] = {
    const fn c(backend: Backend, cache: bool, restricted: bool) -> Composition {
        Composition {
            backend,
            cache,
            restricted,
        }
    }
    &[
        c(Backend::Sqlite3, false, false),
        c(Backend::Sqlite3, true, false),
        c(Backend::Sqlite3, false, true),
        c(Backend::Sqlite3, true, true),
        c(Backend::MemoryFile, false, false),
        c(Backend::MemoryFile, true, false),
        c(Backend::MemoryFromDb, false, false),
        c(Backend::MemoryFromDb, true, false),
        c(Backend::MemoryFromDb, false, true),
        c(Backend::MemoryFromDb, true, true),
    ]
};

/// The apex of the zone a restricted composition's DB holds but does not serve.
pub fn decoy(origin: &Name) -> Name {
    Name::parse("decoy", Some(origin)).expect("decoy name")
}

/// Loads master file `file` as zone `origin` into the DB `db` (created if missing).
pub fn load_db(db: &Path, origin: &Name, file: &Path) {
    let records = zonefile::read_master_file(file, origin).expect("zone parses");
    authd_datasrc::sqlite::SqliteWriter::create(db)
        .expect("db")
        .replace_zone(origin, &records, JournalPolicy::Keep, &mut |_, _| {})
        .expect("loads");
}

impl Composition {
    /// The sources serving zone `origin` from master file `file` (DBs go to `dir`).
    pub fn build(&self, dir: &Path, origin: &str, file: &Path) -> SourceList {
        let origin: Name = origin.parse().expect("origin");
        let db = dir.join("zone.sqlite3");
        if self.backend != Backend::MemoryFile {
            load_db(&db, &origin, file);
        }
        if self.restricted {
            let decoy = decoy(&origin);
            let text = "$TTL 60\n@ SOA ns.decoy. admin.decoy. 7 60 60 60 60\n@ NS ns.decoy.\n\
                        * TXT \"decoy\"\n@ TXT \"decoy\"\n";
            let decoy_file = dir.join("decoy.zone");
            std::fs::write(&decoy_file, text).expect("write decoy");
            load_db(&db, &decoy, &decoy_file);
        }
        let mut ds = match self.backend {
            Backend::Sqlite3 => {
                let mut ds = DataSourceConfig::sqlite3(&db);
                if self.restricted {
                    ds.kind = DataSourceKind::Sqlite3 {
                        file: db.clone(),
                        zones: Some(vec![origin.clone()]),
                    };
                }
                ds
            }
            Backend::MemoryFile => DataSourceConfig::memory(
                vec![MemoryZoneConfig {
                    origin: origin.clone(),
                    file: Some(file.to_path_buf()),
                }],
                None,
            ),
            Backend::MemoryFromDb => {
                let listed = if self.restricted {
                    vec![MemoryZoneConfig {
                        origin: origin.clone(),
                        file: None,
                    }]
                } else {
                    Vec::new()
                };
                DataSourceConfig::memory(listed, Some(db.clone()))
            }
        };
        ds.cache = CacheConfig {
            enabled: self.cache,
            slots: authd_cache::Slots::from_count(4096),
        };
        let config = Config {
            datasources: vec![ds],
            ..Config::default()
        };
        let loaded = reload::load(&config, None).expect("sources load");
        assert!(
            loaded.report.failed.is_empty(),
            "{self}: {:?}",
            loaded.report
        );
        loaded.sources
    }
}
