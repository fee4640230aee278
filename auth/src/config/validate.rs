//! The composer's own checks: `listen`, `[server]`, `[control]`, which keys
//! each data-source `type` takes, and the cross-section ones (zones claimed
//! twice, by two `[[datasource]]`s or by one and a `[[secondary]]`). Every
//! message names the offending key (`datasource[0].file`) and fits one line.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use authd_datasrc::Name;

use super::raw::{RawControl, RawDataSource, RawServer, RawSlots};
use super::{
    CacheConfig, Config, ConfigError, DataSourceConfig, DataSourceKind, MAX_UDP_WORKERS,
    MemoryZoneConfig, RawConfig, ServerConfig,
};
use crate::acl::Cidr;
use crate::settings::{Context, Invalid, Kind, Schema, Section, parse_listen, zone_origin};

/// The typed configuration of `raw`. `origin` names the file (or
/// "environment") in errors; relative paths are resolved against `base`, the
/// file's folder.
///
/// Errors: [`ConfigError::Invalid`] for the first bad value,
/// [`ConfigError::DuplicateZone`] for a zone listed by two sources.
pub(super) fn config(
    raw: RawConfig,
    origin: &str,
    base: Option<&Path>,
) -> Result<Config, ConfigError> {
    let mut config = raw.check(base).map_err(|e| ConfigError::Invalid {
        origin: origin.to_string(),
        key: e.key,
        reason: e.reason,
    })?;
    config.datasources.extend(config.secondary_datasources());
    check_explicit_duplicates(&config)?;
    check_strict_tls(&config).map_err(|e| ConfigError::Invalid {
        origin: origin.to_string(),
        key: e.key,
        reason: e.reason,
    })?;
    check_catalogs(&config).map_err(|e| ConfigError::Invalid {
        origin: origin.to_string(),
        key: e.key,
        reason: e.reason,
    })?;
    check_signing(&config).map_err(|e| ConfigError::Invalid {
        origin: origin.to_string(),
        key: e.key,
        reason: e.reason,
    })?;
    Ok(config)
}

/// True when `a` and `b` name one file: the same path, or (both existing)
/// the same file by two paths.
fn same_file(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(x), Ok(y)) if x == y
        )
}

/// Each `[[catalog]]` keeps its zone in (and lists the zones of) a DB a
/// `[[datasource]] type = "sqlite3"` serves whole, so consumers can transfer
/// it; its origin is not a `[[secondary]]` zone.
fn check_catalogs(config: &Config) -> Result<(), Invalid> {
    for (i, p) in config.catalog.producers.iter().enumerate() {
        if let Some(j) = config.secondary.iter().position(|z| z.origin == p.origin) {
            return Err(Invalid::new(
                format!("catalog[{i}].origin"),
                format!(
                    "{} is a [[secondary]] zone (secondary[{j}]): a catalog zone authd produces \
                     cannot also be transferred from primaries",
                    p.origin
                ),
            ));
        }
        let mut restricted = None;
        let served = config
            .datasources
            .iter()
            .enumerate()
            .any(|(k, ds)| match &ds.kind {
                DataSourceKind::Sqlite3 { file, zones } if same_file(file, &p.file) => {
                    if zones.is_some() && restricted.is_none() {
                        restricted = Some(k);
                    }
                    zones.is_none()
                }
                _ => false,
            });
        if !served {
            let why = match restricted {
                Some(k) if k < config.datasources.len() - config.secondary_datasources().len() => {
                    format!(", and datasource[{k}] serves only the zones it lists (zones = [...])")
                }
                _ => String::new(),
            };
            return Err(Invalid::new(
                format!("catalog[{i}].file"),
                format!(
                    "{} is not the file of a [[datasource]] type = \"sqlite3\" serving every zone \
                     of it{why}; the catalog zone is kept in that DB and must be served for \
                     consumers to transfer it",
                    p.file.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Each `[[signing.zone]]` is a zone an sqlite3 DB keeps: served by a
/// `[[datasource]]` of type sqlite3 (or memory loaded from one) or a
/// `[[secondary]]` zone (signed as it comes in), not a master file.
fn check_signing(config: &Config) -> Result<(), Invalid> {
    for (i, z) in config.signing.zones.iter().enumerate() {
        let at = format!("signing.zone[{i}].origin");
        let from_file = config
            .explicit_datasources()
            .iter()
            .enumerate()
            .find_map(|(k, ds)| match &ds.kind {
                DataSourceKind::Memory { zones, .. } => zones
                    .iter()
                    .any(|m| m.origin == z.origin && m.file.is_some())
                    .then_some(k),
                _ => None,
            });
        if let Some(k) = from_file {
            return Err(Invalid::new(
                at,
                format!(
                    "{} is loaded from a master file by datasource[{k}]: a zone signed \
                     online must be kept in an sqlite3 DB (loadzone it into one)",
                    z.origin
                ),
            ));
        }
    }
    Ok(())
}

/// A primary written `"ADDR:PORT tls NAME"` needs `[tls] ca` to verify its
/// certificate against.
fn check_strict_tls(config: &Config) -> Result<(), Invalid> {
    if config.tls.ca.is_some() {
        return Ok(());
    }
    for (i, z) in config.secondary.iter().enumerate() {
        for (j, p) in z.primaries.iter().enumerate() {
            if let Some(crate::tls::PrimaryTls::Strict(name)) = &p.tls {
                return Err(Invalid::new(
                    format!("secondary[{i}].primaries[{j}]"),
                    format!(
                        "\"tls {}\" verifies the primary's certificate against [tls] ca, \
                         which is not set (write \"tls\" alone for opportunistic TLS)",
                        name.to_str()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `listen`: at least one address, duplicates dropped; the default when unset.
pub(super) fn listen(list: Option<Vec<String>>) -> Result<Vec<SocketAddr>, Invalid> {
    let Some(list) = list else {
        return Ok(Config::default().listen);
    };
    if list.is_empty() {
        return Err(Invalid::new("listen", "must name at least one address"));
    }
    let mut addrs = Vec::with_capacity(list.len());
    for (i, s) in list.iter().enumerate() {
        let addr = parse_listen(s).map_err(|r| Invalid::new(format!("listen[{i}]"), r))?;
        if !addrs.contains(&addr) {
            addrs.push(addr);
        }
    }
    Ok(addrs)
}

impl Section for RawServer {
    type Value = ServerConfig;

    const SCHEMA: Schema = &[(
        "server",
        &[
            ("udp_workers", Kind::Whole),
            ("nsid", Kind::Text),
            ("proxy_allow", Kind::List),
        ],
    )];

    fn check(self, _: &Context<'_>) -> Result<ServerConfig, Invalid> {
        let udp_workers = self
            .udp_workers
            .unwrap_or_else(|| ServerConfig::default().udp_workers);
        if !(1..=MAX_UDP_WORKERS).contains(&udp_workers) {
            return Err(Invalid::new(
                "server.udp_workers",
                format!("{udp_workers} is out of range (1..={MAX_UDP_WORKERS})"),
            ));
        }
        let nsid = match self.nsid {
            Some(n) if n.len() > crate::edns::MAX_NSID_LEN => {
                return Err(Invalid::new(
                    "server.nsid",
                    format!(
                        "{} bytes is too long (at most {})",
                        n.len(),
                        crate::edns::MAX_NSID_LEN
                    ),
                ));
            }
            Some(n) if !n.is_empty() => Some(n),
            _ => None,
        };
        let mut proxy_allow = Vec::new();
        for (i, a) in self.proxy_allow.iter().flatten().enumerate() {
            proxy_allow.push(
                a.parse::<Cidr>()
                    .map_err(|r| Invalid::new(format!("server.proxy_allow[{i}]"), r))?,
            );
        }
        Ok(ServerConfig {
            udp_workers,
            nsid,
            proxy_allow,
        })
    }
}

impl Section for RawControl {
    /// The control socket; `None`: off.
    type Value = Option<PathBuf>;

    const SCHEMA: Schema = &[("control", &[("socket", Kind::Text)])];

    fn check(self, cx: &Context<'_>) -> Result<Option<PathBuf>, Invalid> {
        Ok(cx.optional_path(self.socket))
    }
}

impl Section for Vec<RawDataSource> {
    type Value = Vec<DataSourceConfig>;

    const SCHEMA: Schema = &[
        (
            "datasource[]",
            &[
                ("type", Kind::Text),
                ("file", Kind::Text),
                ("zones", Kind::Zones),
                ("db", Kind::Text),
                ("cache", Kind::Table),
            ],
        ),
        (
            "datasource[].cache",
            &[("enabled", Kind::Bool), ("slots", Kind::Slots)],
        ),
        (
            "datasource[].zones[]",
            &[("origin", Kind::Text), ("file", Kind::Text)],
        ),
    ];

    fn check(self, cx: &Context<'_>) -> Result<Vec<DataSourceConfig>, Invalid> {
        self.into_iter()
            .enumerate()
            .map(|(i, ds)| datasource(i, ds, cx))
            .collect()
    }
}

/// The typed form of `[[datasource]]` number `i`.
fn datasource(i: usize, ds: RawDataSource, cx: &Context<'_>) -> Result<DataSourceConfig, Invalid> {
    let invalid = |k: &str, reason: String| Invalid::new(k, reason);
    let key = |k: &str| format!("datasource[{i}].{k}");
    let resolve = |k: &str, file: PathBuf| -> Result<PathBuf, Invalid> {
        if file.as_os_str().is_empty() {
            return Err(invalid(k, "is empty".into()));
        }
        Ok(cx.resolve(file))
    };
    let Some(kind) = ds.kind else {
        return Err(invalid(
            &key("type"),
            "missing (known types: sqlite3, memory)".into(),
        ));
    };
    let kind = match kind.as_str() {
        "sqlite3" => {
            let Some(file) = ds.file else {
                return Err(invalid(
                    &key("file"),
                    "missing (type sqlite3 needs it)".into(),
                ));
            };
            if ds.db.is_some() {
                return Err(invalid(
                    &key("db"),
                    "not a key of type sqlite3 (use file)".into(),
                ));
            }
            let zones = match ds.zones {
                None => None,
                Some(list) if list.is_empty() => {
                    return Err(invalid(
                        &key("zones"),
                        "is empty (leave it out to serve every zone of the DB)".into(),
                    ));
                }
                Some(list) => {
                    let mut zones = Vec::with_capacity(list.len());
                    for (j, z) in list.into_iter().enumerate() {
                        let zkey = format!("datasource[{i}].zones[{j}]");
                        if z.file.is_some() {
                            return Err(invalid(
                                    &format!("{zkey}.file"),
                                    "an sqlite3 source serves zones of its DB; master files need type memory".into(),
                                ));
                        }
                        zones.push(zone_origin(&zkey, z.origin)?);
                    }
                    Some(zones)
                }
            };
            DataSourceKind::Sqlite3 {
                file: resolve(&key("file"), file)?,
                zones,
            }
        }
        "memory" => {
            if ds.file.is_some() {
                return Err(invalid(
                    &key("file"),
                    "not a key of type memory (use zones = [{ origin = ..., file = ... }] or db)"
                        .into(),
                ));
            }
            let db = match ds.db {
                Some(db) => Some(resolve(&key("db"), db)?),
                None => None,
            };
            let list = ds.zones.unwrap_or_default();
            if list.is_empty() && db.is_none() {
                return Err(invalid(
                    &key("zones"),
                    "missing (type memory needs zones, db, or both)".into(),
                ));
            }
            let mut zones = Vec::with_capacity(list.len());
            for (j, z) in list.into_iter().enumerate() {
                let zkey = format!("datasource[{i}].zones[{j}]");
                let origin = zone_origin(&zkey, z.origin)?;
                let file = match z.file {
                    Some(f) => Some(resolve(&format!("{zkey}.file"), f)?),
                    None if db.is_none() => {
                        return Err(invalid(
                            &format!("{zkey}.file"),
                            format!(
                                "missing: zone {origin} needs a master file, or a db on its source to copy it from"
                            ),
                        ));
                    }
                    None => None,
                };
                zones.push(MemoryZoneConfig { origin, file });
            }
            DataSourceKind::Memory {
                zones,
                db,
                secondary: false,
            }
        }
        other => {
            return Err(invalid(
                &key("type"),
                format!("unknown type {other:?} (known types: sqlite3, memory)"),
            ));
        }
    };
    let mut cache = CacheConfig::default_for(&kind);
    if let Some(raw) = &ds.cache {
        if let Some(enabled) = raw.enabled {
            cache.enabled = enabled;
        }
        match &raw.slots {
            None => {}
            Some(RawSlots::Count(n)) => {
                let n = usize::try_from(*n)
                    .map_err(|_| invalid(&key("cache.slots"), format!("{n} is negative")))?;
                cache.slots = authd_cache::Slots::from_count(n);
            }
            Some(RawSlots::Word(w)) if w == "unlimited" => {
                cache.slots = authd_cache::Slots::Unlimited;
            }
            Some(RawSlots::Word(w)) => {
                return Err(invalid(
                    &key("cache.slots"),
                    format!("{w:?} is neither a count nor \"unlimited\""),
                ));
            }
        }
    }
    Ok(DataSourceConfig { kind, cache })
}

/// Rejects a zone named twice in the configuration itself (before any DB is
/// opened): in two `zones` lists, twice in one, or by a `[[datasource]]` and
/// a `[[secondary]]`.
fn check_explicit_duplicates(config: &Config) -> Result<(), ConfigError> {
    let mut claims: HashMap<&Name, usize> = HashMap::new();
    for (i, ds) in config.datasources.iter().enumerate() {
        let listed: Vec<&Name> = match &ds.kind {
            DataSourceKind::Sqlite3 { zones, .. } => zones.iter().flatten().collect(),
            DataSourceKind::Memory { zones, .. } => zones.iter().map(|z| &z.origin).collect(),
        };
        for origin in listed {
            if let Some(&first) = claims.get(origin) {
                return Err(config.duplicate_zone(origin, first, i));
            }
            claims.insert(origin, i);
        }
    }
    Ok(())
}
