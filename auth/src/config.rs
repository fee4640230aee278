//! authd's configuration: one TOML file, overridable by `AUTHD_*` environment
//! variables, validated once at start-up into typed values ([`Config`]).
//!
//! # File format
//!
//! ```toml
//! listen = ["127.0.0.1:5300", "[::1]:5300"]   # default ["127.0.0.1:5300"]
//!
//! [server]
//! udp_workers = 2          # UDP worker threads per address (1..=1024); default one per CPU
//!
//! [tcp]
//! idle_timeout = 10        # seconds a TCP connection may wait for its next query (1..=86400)
//! max_connections = 512    # concurrent TCP connections; more are closed at once (1..=1000000)
//!
//! [chaos]
//! version = "authd 0.1.0"  # CH TXT version.bind; default "authd <version>"; "" = REFUSED
//! hostname = "ns1"         # CH TXT hostname.bind; default unset = REFUSED
//!
//! [transfer]               # AXFR/IXFR over TCP (docs/ZONE-ADMIN.md)
//! allow = ["127.0.0.1", "::1", "192.0.2.0/24"]  # default [] = every transfer REFUSED
//!
//! [notify]                 # NOTIFY when an sqlite3 zone's serial changes (RFC 1996)
//! targets = ["127.0.0.1:5353"]   # every zone; ADDR without a port = 53
//! [[notify.zone]]
//! origin = "example.org."
//! targets = ["192.0.2.53"]       # this zone, in addition to the global targets
//!
//! [[datasource]]           # searched in this order, the longest zone match wins
//! type = "sqlite3"         # a BIND 10 sqlite3 zone DB (schema 2.x), served live
//! file = "zone.sqlite3"    # relative paths are relative to the config file's folder
//! zones = ["example.org."] # optional: serve only these zones of the DB
//!
//! [[datasource]]
//! type = "memory"          # zones parsed once into immutable in-memory snapshots
//! zones = [
//!   { origin = "example.com.", file = "example.com.zone" },  # a master file
//!   "example.net.",        # (needs `db`) copied from the DB
//! ]
//! db = "zones.sqlite3"     # optional: copy this DB's zones (those listed without a
//!                          # file, or all of them when none is) into memory
//! ```
//!
//! Unknown keys anywhere are an error that names the key. A zone may be served
//! by one data source only: two sources claiming the same zone are an error
//! naming the zone and both sources (found at start-up and on reload, after
//! the sqlite3 DBs are opened). The full reference is `docs/CONFIG.md`.
//!
//! # Environment variables
//!
//! A variable `AUTHD_<KEY>` overrides key `<KEY>` of the file (case-insensitive);
//! a double underscore separates a section from its key:
//!
//! | variable | key | example |
//! |---|---|---|
//! | `AUTHD_LISTEN` | `listen` (comma-separated) | `AUTHD_LISTEN=127.0.0.1:53,[::1]:53` |
//! | `AUTHD_SERVER__UDP_WORKERS` | `server.udp_workers` | `AUTHD_SERVER__UDP_WORKERS=4` |
//! | `AUTHD_TCP__IDLE_TIMEOUT` | `tcp.idle_timeout` | `AUTHD_TCP__IDLE_TIMEOUT=30` |
//! | `AUTHD_TCP__MAX_CONNECTIONS` | `tcp.max_connections` | `AUTHD_TCP__MAX_CONNECTIONS=100` |
//! | `AUTHD_CHAOS__VERSION` | `chaos.version` | `AUTHD_CHAOS__VERSION=` (refuse) |
//! | `AUTHD_CHAOS__HOSTNAME` | `chaos.hostname` | `AUTHD_CHAOS__HOSTNAME=ns1` |
//! | `AUTHD_TRANSFER__ALLOW` | `transfer.allow` (comma-separated) | `AUTHD_TRANSFER__ALLOW=127.0.0.1,::1` |
//! | `AUTHD_NOTIFY__TARGETS` | `notify.targets` (comma-separated) | `AUTHD_NOTIFY__TARGETS=127.0.0.1:5353` |
//!
//! `[[datasource]]` entries can only come from the file. Any other `AUTHD_*`
//! variable is an unknown key, hence an error (so a typo is not silently ignored).

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use authd_datasrc::{DataSource, Name};
use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};

use crate::chaos::ChaosOptions;

/// The prefix of environment variables that override configuration keys.
pub const ENV_PREFIX: &str = "AUTHD";

/// The listen address used when none is configured.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:5300";

/// Default `[tcp] idle_timeout`, in seconds.
pub const DEFAULT_TCP_IDLE_TIMEOUT_SECS: u64 = 10;

/// Default `[tcp] max_connections`.
pub const DEFAULT_TCP_MAX_CONNECTIONS: usize = 512;

/// Largest accepted `[tcp] idle_timeout`, in seconds (one day).
const MAX_TCP_IDLE_TIMEOUT_SECS: u64 = 86_400;

/// Largest accepted `[tcp] max_connections`.
const MAX_TCP_MAX_CONNECTIONS: usize = 1_000_000;

/// Largest accepted `[server] udp_workers`.
pub const MAX_UDP_WORKERS: usize = 1024;

/// A configuration that could not be read or is invalid. The message is one line
/// and names the file and the offending key where there is one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The configuration file could not be read.
    #[error("cannot read config {}: {reason}", path.display())]
    Unreadable {
        /// The configuration file.
        path: PathBuf,
        /// The I/O error, without the OS error number.
        reason: String,
    },
    /// The file is not valid TOML, has an unknown key, or a value of the wrong type.
    #[error("config {origin}: {reason}")]
    Parse {
        /// The file, or "environment" when only variables were read.
        origin: String,
        /// The parser's message (it names the key).
        reason: String,
    },
    /// A value has the right type but is not acceptable.
    #[error("config {origin}: {key}: {reason}")]
    Invalid {
        /// The file, or "environment" when only variables were read.
        origin: String,
        /// The key, e.g. `tcp.idle_timeout` or `datasource[0].file`.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Two data sources (or one source twice) claim the same zone.
    #[error(
        "zone {zone} is claimed by both {first} and {second}; a zone may be served by one data source only"
    )]
    DuplicateZone {
        /// The zone apex.
        zone: String,
        /// The first claimant, e.g. `datasource[0] (sqlite3:/etc/authd/zones.sqlite3)`.
        first: String,
        /// The second claimant.
        second: String,
    },
}

/// The configuration file as written: every key optional, unknown keys rejected.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default, deserialize_with = "string_or_list")]
    listen: Option<Vec<String>>,
    #[serde(default)]
    server: RawServer,
    #[serde(default)]
    tcp: RawTcp,
    #[serde(default)]
    chaos: RawChaos,
    #[serde(default)]
    datasource: Vec<RawDataSource>,
    #[serde(default)]
    transfer: RawTransfer,
    #[serde(default)]
    notify: RawNotify,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    #[serde(default, deserialize_with = "whole")]
    udp_workers: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTcp {
    #[serde(default, deserialize_with = "whole")]
    idle_timeout: Option<u64>,
    #[serde(default, deserialize_with = "whole")]
    max_connections: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChaos {
    version: Option<String>,
    hostname: Option<String>,
}

/// One `[[datasource]]` table. Flat on purpose (a serde-tagged enum cannot
/// combine with `deny_unknown_fields` and shared keys such as a later `cache`);
/// [`Config::validate`] checks which keys each `type` needs.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDataSource {
    #[serde(rename = "type")]
    kind: Option<String>,
    file: Option<PathBuf>,
    zones: Option<Vec<RawZone>>,
    db: Option<PathBuf>,
    cache: Option<RawCache>,
}

/// `cache = { enabled, slots }`; `slots` is a count or `"unlimited"`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCache {
    enabled: Option<bool>,
    slots: Option<RawSlots>,
}

#[derive(Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "a slot count (a whole number, 0 = off) or \"unlimited\""
)]
enum RawSlots {
    Count(i64),
    Word(String),
}

/// One `zones` item: an origin string, or a table `{ origin, file }`.
#[derive(Debug, Default)]
struct RawZone {
    origin: Option<String>,
    file: Option<PathBuf>,
}

impl<'de> Deserialize<'de> for RawZone {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RawZone, D::Error> {
        raw_zone(d)
    }
}

/// Deserializes a [`RawZone`] from a string or a table (keeping the table's
/// unknown-key messages, which `#[serde(untagged)]` would lose).
fn raw_zone<'de, D>(d: D) -> Result<RawZone, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = RawZone;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a zone origin or a table { origin = ..., file = ... }")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<RawZone, E> {
            Ok(RawZone {
                origin: Some(v.to_string()),
                file: None,
            })
        }
        fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<RawZone, A::Error> {
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Table {
                origin: Option<String>,
                file: Option<PathBuf>,
            }
            let t = Table::deserialize(de::value::MapAccessDeserializer::new(m))?;
            Ok(RawZone {
                origin: t.origin,
                file: t.file,
            })
        }
    }
    d.deserialize_any(V)
}

/// `listen` as a TOML list, or (from `AUTHD_LISTEN`) one comma-separated string.
fn string_or_list<'de, D>(d: D) -> Result<Option<Vec<String>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged, expecting = "a string or a list of strings")]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(Some(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => s
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        OneOrMany::Many(v) => v,
    }))
}

/// The line number and text where `text` stops being valid TOML, or `None`
/// when it is valid. `config` reports some errors (an integer over 2^63 - 1,
/// say) without saying where.
fn toml_error_line(text: &str) -> Option<(usize, &str)> {
    let e = text.parse::<toml::Table>().err()?;
    let at = e.span().map_or(0, |s| s.start).min(text.len());
    let line = text[..at].matches('\n').count() + 1;
    Some((line, text.lines().nth(line - 1).unwrap_or("").trim()))
}

/// A whole number of type `T`: an integer, or (from the environment) its
/// decimal text. A fraction (`1.5`) is an error, not rounded.
fn whole<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    #[derive(Deserialize)]
    #[serde(untagged, expecting = "a whole number")]
    enum Number {
        Int(u64),
        Negative(i64),
        Float(f64),
        Text(String),
    }
    use serde::de::Error;
    let n = match Number::deserialize(d)? {
        Number::Int(n) => n,
        Number::Negative(n) => return Err(D::Error::custom(format!("{n} is negative"))),
        Number::Float(f) => {
            return Err(D::Error::custom(format!("{f} is not a whole number")));
        }
        Number::Text(t) => t
            .trim()
            .parse()
            .map_err(|_| D::Error::custom(format!("{t:?} is not a whole number")))?,
    };
    T::try_from(n)
        .map(Some)
        .map_err(|_| D::Error::custom(format!("{n} is too large")))
}

/// Server threads (`[server]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerConfig {
    /// UDP workers per listen address, each a thread with its own
    /// `SO_REUSEPORT` socket (1..=[`MAX_UDP_WORKERS`]).
    pub udp_workers: usize,
}

impl Default for ServerConfig {
    /// One UDP worker per CPU available to the process.
    fn default() -> Self {
        ServerConfig {
            udp_workers: crate::sys::default_udp_workers(),
        }
    }
}

/// TCP limits (`[tcp]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpConfig {
    /// How long a connection may stay without a complete query before it is closed.
    pub idle_timeout: Duration,
    /// Most concurrent connections; further ones are closed at once.
    pub max_connections: usize,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            idle_timeout: Duration::from_secs(DEFAULT_TCP_IDLE_TIMEOUT_SECS),
            max_connections: DEFAULT_TCP_MAX_CONNECTIONS,
        }
    }
}

/// Answers to CH-class TXT queries (`[chaos]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChaosConfig {
    /// Text for `version.bind`, or `None` to refuse it.
    pub version: Option<String>,
    /// Text for `hostname.bind`, or `None` to refuse it.
    pub hostname: Option<String>,
}

impl ChaosConfig {
    /// The query processor's form of these settings.
    pub fn options(&self) -> ChaosOptions {
        ChaosOptions {
            version: self.version.clone(),
            hostname: self.hostname.clone(),
        }
    }
}

/// What kind of backend a data source is, with its kind-specific settings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DataSourceKind {
    /// `type = "sqlite3"`: a BIND 10 sqlite3 zone DB, served live (every SQL
    /// commit is visible at once).
    Sqlite3 {
        /// The DB file (absolute, or relative to the working directory when it
        /// came from the command line).
        file: PathBuf,
        /// Serve only these zones of the DB (`None`: every zone in it). A listed
        /// zone missing from the DB is logged and served once it appears.
        zones: Option<Vec<Name>>,
    },
    /// `type = "memory"`: zones parsed once into immutable snapshots, rebuilt on
    /// reload (SIGHUP).
    Memory {
        /// Zones from master files, and zones picked from `db` (no file).
        zones: Vec<MemoryZoneConfig>,
        /// A zone DB to copy zones from: those of `zones` without a file, or
        /// every zone of the DB when no entry lacks a file.
        db: Option<PathBuf>,
    },
}

/// One zone of a memory data source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryZoneConfig {
    /// The zone apex.
    pub origin: Name,
    /// Its master file (RFC 1035 §5), or `None` to copy the zone from the
    /// source's `db`.
    pub file: Option<PathBuf>,
}

/// One configured data source (`[[datasource]]`). Settings shared by every kind
/// (such as a later per-source cache) are fields here, beside [`Self::kind`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DataSourceConfig {
    /// The backend and its settings.
    pub kind: DataSourceKind,
    /// The hot-spot cache in front of this source (`cache = { enabled, slots }`).
    pub cache: CacheConfig,
}

/// Default slot count of the hot-spot cache.
pub const DEFAULT_CACHE_SLOTS: usize = 65_536;

/// `cache = { enabled = true, slots = 65536 }` on a `[[datasource]]`: the
/// hot-spot cache (`authd-cache`) in front of the source. On by default for
/// sqlite3 (every lookup is SQL otherwise), off for memory (nothing to gain).
/// `slots = 0` disables it; `slots = "unlimited"` removes the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Whether the cache is used.
    pub enabled: bool,
    /// Its size.
    pub slots: authd_cache::Slots,
}

impl CacheConfig {
    /// The default for a source kind: on with [`DEFAULT_CACHE_SLOTS`] for sqlite3, off for memory.
    pub fn default_for(kind: &DataSourceKind) -> CacheConfig {
        CacheConfig {
            enabled: matches!(kind, DataSourceKind::Sqlite3 { .. }),
            slots: authd_cache::Slots::from_count(DEFAULT_CACHE_SLOTS),
        }
    }

    /// Wraps `source` in a cache when enabled with a non-zero size.
    pub fn wrap(&self, source: Arc<dyn DataSource>) -> Arc<dyn DataSource> {
        if !self.enabled || self.slots == authd_cache::Slots::Disabled {
            return source;
        }
        Arc::new(authd_cache::HotSpotCache::new(source, self.slots))
    }
}

impl DataSourceConfig {
    /// An sqlite3 source serving every zone of `file`.
    pub fn sqlite3(file: impl Into<PathBuf>) -> DataSourceConfig {
        let kind = DataSourceKind::Sqlite3 {
            file: file.into(),
            zones: None,
        };
        DataSourceConfig {
            cache: CacheConfig::default_for(&kind),
            kind,
        }
    }

    /// A memory source with `zones` (master files, or copies from `db`) and
    /// optionally every zone of `db`.
    pub fn memory(zones: Vec<MemoryZoneConfig>, db: Option<PathBuf>) -> DataSourceConfig {
        let kind = DataSourceKind::Memory { zones, db };
        DataSourceConfig {
            cache: CacheConfig::default_for(&kind),
            kind,
        }
    }
}

impl fmt::Display for DataSourceConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            DataSourceKind::Sqlite3 { file, .. } => write!(f, "sqlite3:{}", file.display()),
            DataSourceKind::Memory { zones, db } => {
                f.write_str("memory:")?;
                let mut items: Vec<String> = zones
                    .iter()
                    .filter_map(|z| z.file.as_ref().map(|p| p.display().to_string()))
                    .collect();
                if let Some(db) = db {
                    items.push(format!("db={}", db.display()));
                }
                if items.len() > 3 {
                    let more = items.len() - 3;
                    items.truncate(3);
                    items.push(format!("{more} more"));
                }
                f.write_str(&items.join(","))
            }
        }
    }
}

/// The validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Addresses to serve UDP and TCP on (never empty). Port 0 picks a free port.
    pub listen: Vec<SocketAddr>,
    /// Server threads (`[server]`).
    pub server: ServerConfig,
    /// TCP limits.
    pub tcp: TcpConfig,
    /// Answers to CH TXT `version.bind` / `hostname.bind`.
    pub chaos: ChaosConfig,
    /// Data sources, in search order (may be empty: every query is then REFUSED).
    pub datasources: Vec<DataSourceConfig>,
    /// Outgoing zone transfers (`[transfer]`).
    pub transfer: TransferConfig,
    /// NOTIFY to secondaries (`[notify]`).
    pub notify: NotifyConfig,
}

impl Default for Config {
    /// No data source, `listen = ["127.0.0.1:5300"]`, the default limits and
    /// `version.bind` = `"authd <version>"`.
    fn default() -> Self {
        Config {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 5300))],
            server: ServerConfig::default(),
            tcp: TcpConfig::default(),
            chaos: ChaosConfig {
                version: Some(default_version()),
                hostname: None,
            },
            datasources: Vec::new(),
            transfer: TransferConfig::default(),
            notify: NotifyConfig::default(),
        }
    }
}

/// The default `version.bind` text: `authd <crate version>`.
pub fn default_version() -> String {
    format!("authd {}", env!("CARGO_PKG_VERSION"))
}

impl Config {
    /// Reads the TOML file at `path` and overrides it with the process's
    /// `AUTHD_*` environment variables.
    ///
    /// Errors: [`ConfigError::Unreadable`] (missing file, permissions),
    /// [`ConfigError::Parse`] (bad TOML, unknown key, wrong type),
    /// [`ConfigError::Invalid`] (e.g. a bad listen address).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Unreadable {
            path: path.to_path_buf(),
            reason: crate::sys::io_reason(&e),
        })?;
        Config::from_parts(Some((&text, path)), None)
    }

    /// The configuration from the process's `AUTHD_*` environment variables alone
    /// (used when no file is given).
    ///
    /// Errors: as [`Config::load`], without `Unreadable`.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_parts(None, None)
    }

    /// The configuration from TOML `text` (if any; the path is the file it came
    /// from: it names the file in errors and relative paths are resolved against
    /// its folder) overridden by `env` (variable name → value; `None` reads the
    /// process environment).
    ///
    /// Errors: as [`Config::load`], without `Unreadable`.
    pub fn from_parts(
        file: Option<(&str, &Path)>,
        env: Option<HashMap<String, String>>,
    ) -> Result<Config, ConfigError> {
        let origin = match file {
            Some((_, path)) => path.display().to_string(),
            None => "environment".to_string(),
        };
        let parse = |e: config::ConfigError| ConfigError::Parse {
            origin: origin.clone(),
            reason: {
                let message = one_line(&e.to_string());
                match file.and_then(|(text, _)| toml_error_line(text)) {
                    Some((line, text)) if !message.contains("at line") => {
                        format!("line {line}: {message} (`{text}`)")
                    }
                    _ => message,
                }
            },
        };
        let mut builder = config::Config::builder();
        if let Some((text, _)) = file {
            builder = builder.add_source(config::File::from_str(text, config::FileFormat::Toml));
        }
        builder = builder.add_source(
            config::Environment::with_prefix(ENV_PREFIX)
                .prefix_separator("_")
                .separator("__")
                .source(env),
        );
        let raw: RawConfig = builder
            .build()
            .map_err(parse)?
            .try_deserialize()
            .map_err(parse)?;
        let base = file.and_then(|(_, p)| p.parent()).map(Path::to_path_buf);
        Config::validate(raw, &origin, base.as_deref())
    }

    fn validate(raw: RawConfig, origin: &str, base: Option<&Path>) -> Result<Config, ConfigError> {
        let invalid = |key: &str, reason: String| ConfigError::Invalid {
            origin: origin.to_string(),
            key: key.to_string(),
            reason,
        };
        let defaults = Config::default();

        let listen = match raw.listen {
            None => defaults.listen,
            Some(list) => {
                if list.is_empty() {
                    return Err(invalid("listen", "must name at least one address".into()));
                }
                let mut addrs = Vec::with_capacity(list.len());
                for (i, s) in list.iter().enumerate() {
                    let addr = parse_listen(s).map_err(|r| invalid(&format!("listen[{i}]"), r))?;
                    if !addrs.contains(&addr) {
                        addrs.push(addr);
                    }
                }
                addrs
            }
        };

        let udp_workers = raw
            .server
            .udp_workers
            .unwrap_or(defaults.server.udp_workers);
        if !(1..=MAX_UDP_WORKERS).contains(&udp_workers) {
            return Err(invalid(
                "server.udp_workers",
                format!("{udp_workers} is out of range (1..={MAX_UDP_WORKERS})"),
            ));
        }

        let idle = raw
            .tcp
            .idle_timeout
            .unwrap_or(DEFAULT_TCP_IDLE_TIMEOUT_SECS);
        if !(1..=MAX_TCP_IDLE_TIMEOUT_SECS).contains(&idle) {
            return Err(invalid(
                "tcp.idle_timeout",
                format!("{idle} is out of range (1..={MAX_TCP_IDLE_TIMEOUT_SECS} seconds)"),
            ));
        }
        let max_conn = raw
            .tcp
            .max_connections
            .unwrap_or(DEFAULT_TCP_MAX_CONNECTIONS);
        if !(1..=MAX_TCP_MAX_CONNECTIONS).contains(&max_conn) {
            return Err(invalid(
                "tcp.max_connections",
                format!("{max_conn} is out of range (1..={MAX_TCP_MAX_CONNECTIONS})"),
            ));
        }

        let chaos = ChaosConfig {
            version: match raw.chaos.version {
                None => defaults.chaos.version,
                Some(v) if v.is_empty() => None,
                Some(v) => Some(check_txt("chaos.version", v, &invalid)?),
            },
            hostname: match raw.chaos.hostname {
                Some(h) if !h.is_empty() => Some(check_txt("chaos.hostname", h, &invalid)?),
                _ => None,
            },
        };

        let mut datasources = Vec::with_capacity(raw.datasource.len());
        for (i, ds) in raw.datasource.into_iter().enumerate() {
            let key = |k: &str| format!("datasource[{i}].{k}");
            let resolve = |k: &str, file: PathBuf| -> Result<PathBuf, ConfigError> {
                if file.as_os_str().is_empty() {
                    return Err(invalid(k, "is empty".into()));
                }
                Ok(match base {
                    Some(base) if file.is_relative() => base.join(file),
                    _ => file,
                })
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
                                zones.push(zone_origin(&zkey, z.origin, &invalid)?);
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
                            "not a key of type memory (use zones = [{ origin = ..., file = ... }] or db)".into(),
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
                        let origin = zone_origin(&zkey, z.origin, &invalid)?;
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
                    DataSourceKind::Memory { zones, db }
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
                        let n = usize::try_from(*n).map_err(|_| {
                            invalid(&key("cache.slots"), format!("{n} is negative"))
                        })?;
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
            datasources.push(DataSourceConfig { kind, cache });
        }
        check_explicit_duplicates(&datasources)?;

        Ok(Config {
            listen,
            server: ServerConfig { udp_workers },
            tcp: TcpConfig {
                idle_timeout: Duration::from_secs(idle),
                max_connections: max_conn,
            },
            chaos,
            datasources,
            transfer: transfer_config(raw.transfer, &invalid)?,
            notify: notify_config(raw.notify, &invalid)?,
        })
    }

    /// Who may transfer zones, and the sqlite3 DBs whose `diffs` journals answer
    /// IXFR (every `sqlite3` data source, in order).
    pub fn transfer_policy(&self) -> crate::xfr::TransferPolicy {
        crate::xfr::TransferPolicy {
            allow: self.transfer.allow.clone(),
            journal_dbs: self.sqlite_dbs(),
        }
    }

    /// The files of the `sqlite3` data sources, in order (the DBs whose zones
    /// are polled for serial changes to NOTIFY, and whose journals answer IXFR).
    pub fn sqlite_dbs(&self) -> Vec<PathBuf> {
        self.datasources
            .iter()
            .filter_map(|ds| match &ds.kind {
                DataSourceKind::Sqlite3 { file, .. } => Some(file.clone()),
                _ => None,
            })
            .collect()
    }
}

/// Parses `ADDR:PORT` (`127.0.0.1:53`, `[::1]:53`).
///
/// Errors: a text that is not an IP address with a port (host names are not
/// resolved), as a message for [`ConfigError::Invalid`].
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    s.trim()
        .parse::<SocketAddr>()
        .map_err(|_| format!("{s:?} is not ADDR:PORT (e.g. 127.0.0.1:53 or [::1]:53)"))
}

/// A CH TXT string must fit one character-string (RFC 1035 §3.3: 255 octets).
fn check_txt(
    key: &str,
    value: String,
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<String, ConfigError> {
    if value.len() > 255 {
        return Err(invalid(
            key,
            format!(
                "{} bytes, longer than a TXT string may be (255)",
                value.len()
            ),
        ));
    }
    Ok(value)
}

/// Parses a zone origin (`example.com.`; a missing final dot is added).
fn zone_origin(
    key: &str,
    origin: Option<String>,
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<Name, ConfigError> {
    let Some(text) = origin else {
        return Err(invalid(&format!("{key}.origin"), "missing".into()));
    };
    parse_origin(&text).map_err(|r| invalid(&format!("{key}.origin"), r))
}

/// Parses a zone origin given as text: `example.com.`, `example.com` (made
/// absolute) or `.` for the root.
///
/// Errors: an empty or malformed name, as a message.
pub fn parse_origin(text: &str) -> Result<Name, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty zone origin".into());
    }
    Name::parse(t, Some(&Name::root())).map_err(|e| format!("bad origin {text:?}: {e}"))
}

/// A label for data source `index` in messages: `datasource[1] (memory:a.zone)`.
pub fn source_label(index: usize, ds: &DataSourceConfig) -> String {
    format!("datasource[{index}] ({ds})")
}

/// Rejects a zone named twice in the configuration itself (before any DB is
/// opened): in two `zones` lists, or twice in one.
fn check_explicit_duplicates(datasources: &[DataSourceConfig]) -> Result<(), ConfigError> {
    let mut claims: HashMap<Name, usize> = HashMap::new();
    for (i, ds) in datasources.iter().enumerate() {
        let listed: Vec<&Name> = match &ds.kind {
            DataSourceKind::Sqlite3 { zones, .. } => zones.iter().flatten().collect(),
            DataSourceKind::Memory { zones, .. } => zones.iter().map(|z| &z.origin).collect(),
        };
        for origin in listed {
            if let Some(&first) = claims.get(origin) {
                return Err(ConfigError::DuplicateZone {
                    zone: origin.to_string(),
                    first: source_label(first, &datasources[first]),
                    second: source_label(i, ds),
                });
            }
            claims.insert(origin.clone(), i);
        }
    }
    Ok(())
}

/// Folds a possibly multi-line parser message into one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

// ---- [transfer] and [notify] ------------------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTransfer {
    #[serde(default, deserialize_with = "string_or_list")]
    allow: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNotify {
    #[serde(default, deserialize_with = "string_or_list")]
    targets: Option<Vec<String>>,
    #[serde(default)]
    zone: Vec<RawNotifyZone>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNotifyZone {
    origin: Option<String>,
    #[serde(default, deserialize_with = "string_or_list")]
    targets: Option<Vec<String>>,
}

/// Outgoing zone transfers (`[transfer]`, RFC 5936 §6: access must be controlled).
///
/// ```toml
/// [transfer]
/// allow = ["127.0.0.1", "::1", "192.0.2.0/24"]   # default [] = every AXFR/IXFR is REFUSED
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransferConfig {
    /// Client addresses (single addresses or CIDR blocks) allowed to AXFR/IXFR
    /// over TCP; empty: nobody.
    pub allow: Vec<crate::acl::Cidr>,
}

/// NOTIFY to secondaries when a zone's SOA serial changes (`[notify]`, RFC 1996).
///
/// ```toml
/// [notify]
/// targets = ["127.0.0.1:5353"]      # every zone; a missing port is 53
/// [[notify.zone]]
/// origin = "example.com."
/// targets = ["[::1]:5354"]          # this zone, in addition to the global targets
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotifyConfig {
    /// Targets notified for every zone.
    pub targets: Vec<SocketAddr>,
    /// Extra targets for single zones (apex, targets).
    pub zones: Vec<(Name, Vec<SocketAddr>)>,
}

impl NotifyConfig {
    /// The targets for zone `origin`: the global ones, then the zone's own,
    /// without duplicates.
    pub fn targets_for(&self, origin: &Name) -> Vec<SocketAddr> {
        let mut out = self.targets.clone();
        for (zone, targets) in &self.zones {
            if zone == origin {
                for t in targets {
                    if !out.contains(t) {
                        out.push(*t);
                    }
                }
            }
        }
        out
    }

    /// True when no target is configured at all (NOTIFY is off).
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty() && self.zones.iter().all(|(_, t)| t.is_empty())
    }
}

fn transfer_config(
    raw: RawTransfer,
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<TransferConfig, ConfigError> {
    let mut allow = Vec::new();
    for (i, a) in raw.allow.unwrap_or_default().iter().enumerate() {
        allow.push(
            a.parse::<crate::acl::Cidr>()
                .map_err(|r| invalid(&format!("transfer.allow[{i}]"), r))?,
        );
    }
    Ok(TransferConfig { allow })
}

/// Parses a NOTIFY target: `ADDR:PORT`, or a bare address (port 53).
fn parse_target(s: &str) -> Result<SocketAddr, String> {
    let t = s.trim();
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(a);
    }
    t.parse::<std::net::IpAddr>()
        .map(|ip| SocketAddr::new(ip, 53))
        .map_err(|_| format!("{s:?} is not ADDR:PORT or ADDR (e.g. 127.0.0.1:5353, [::1]:53)"))
}

fn notify_config(
    raw: RawNotify,
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<NotifyConfig, ConfigError> {
    let list = |key: &str, v: Option<Vec<String>>| -> Result<Vec<SocketAddr>, ConfigError> {
        let mut out = Vec::new();
        for (i, t) in v.unwrap_or_default().iter().enumerate() {
            let a = parse_target(t).map_err(|r| invalid(&format!("{key}[{i}]"), r))?;
            if !out.contains(&a) {
                out.push(a);
            }
        }
        Ok(out)
    };
    let targets = list("notify.targets", raw.targets)?;
    let mut zones = Vec::new();
    for (i, z) in raw.zone.into_iter().enumerate() {
        let key = format!("notify.zone[{i}]");
        let origin = zone_origin(&key, z.origin, invalid)?;
        zones.push((origin, list(&format!("{key}.targets"), z.targets)?));
    }
    Ok(NotifyConfig { targets, zones })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Option<HashMap<String, String>> {
        Some(
            vars.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    fn from_toml(text: &str) -> Result<Config, ConfigError> {
        Config::from_parts(Some((text, Path::new("/etc/authd/authd.toml"))), env(&[]))
    }

    #[test]
    fn empty_file_gives_defaults() {
        let c = from_toml("").expect("valid");
        assert_eq!(c, Config::default());
        assert_eq!(c.listen, vec!["127.0.0.1:5300".parse().expect("addr")]);
        assert_eq!(c.tcp.idle_timeout, Duration::from_secs(10));
        assert_eq!(c.tcp.max_connections, 512);
        assert_eq!(
            c.chaos.version.as_deref(),
            Some(concat!("authd ", env!("CARGO_PKG_VERSION")))
        );
        assert_eq!(c.chaos.hostname, None);
        assert!(c.datasources.is_empty());
    }

    #[test]
    fn full_file() {
        let c = from_toml(
            r#"
            listen = ["127.0.0.1:53", "[::1]:5353"]
            [tcp]
            idle_timeout = 3
            max_connections = 7
            [chaos]
            version = "secret"
            hostname = "ns1"
            [[datasource]]
            type = "sqlite3"
            file = "zones/a.sqlite3"
            [[datasource]]
            type = "sqlite3"
            file = "/var/b.sqlite3"
            "#,
        )
        .expect("valid");
        assert_eq!(
            c.listen,
            vec![
                "127.0.0.1:53".parse().expect("addr"),
                "[::1]:5353".parse().expect("addr")
            ]
        );
        assert_eq!(c.tcp.idle_timeout, Duration::from_secs(3));
        assert_eq!(c.tcp.max_connections, 7);
        assert_eq!(c.chaos.version.as_deref(), Some("secret"));
        assert_eq!(c.chaos.hostname.as_deref(), Some("ns1"));
        assert_eq!(
            c.datasources,
            vec![
                DataSourceConfig::sqlite3("/etc/authd/zones/a.sqlite3"),
                DataSourceConfig::sqlite3("/var/b.sqlite3"),
            ]
        );
        assert_eq!(
            c.datasources[0].to_string(),
            "sqlite3:/etc/authd/zones/a.sqlite3"
        );
        let s = crate::server::ServerSettings::from(&c);
        assert_eq!(s.listen, c.listen);
        assert_eq!(s.tcp_idle_timeout, Duration::from_secs(3));
        assert_eq!(s.tcp_max_connections, 7);
    }

    #[test]
    fn cache_settings_per_source() {
        let c = from_toml(
            r#"
            [[datasource]]
            type = "sqlite3"
            file = "/a.sqlite3"
            [[datasource]]
            type = "sqlite3"
            file = "/b.sqlite3"
            cache = { slots = "unlimited" }
            [[datasource]]
            type = "sqlite3"
            file = "/c.sqlite3"
            cache = { enabled = false }
            [[datasource]]
            type = "memory"
            zones = [{ origin = "example.", file = "/e.zone" }]
            cache = { enabled = true, slots = 10 }
            "#,
        )
        .expect("valid");
        let caches: Vec<CacheConfig> = c.datasources.iter().map(|d| d.cache).collect();
        use authd_cache::Slots;
        assert_eq!(
            caches,
            [
                CacheConfig {
                    enabled: true,
                    slots: Slots::from_count(DEFAULT_CACHE_SLOTS)
                },
                CacheConfig {
                    enabled: true,
                    slots: Slots::Unlimited
                },
                CacheConfig {
                    enabled: false,
                    slots: Slots::from_count(DEFAULT_CACHE_SLOTS)
                },
                CacheConfig {
                    enabled: true,
                    slots: Slots::from_count(10)
                },
            ]
        );
        for (text, want) in [
            ("cache = { slots = -1 }", "datasource[0].cache.slots"),
            ("cache = { slots = \"lots\" }", "datasource[0].cache.slots"),
            ("cache = { size = 3 }", "size"),
        ] {
            let e = from_toml(&format!(
                "[[datasource]]\ntype = \"sqlite3\"\nfile = \"/a\"\n{text}"
            ))
            .expect_err(text)
            .to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn unknown_keys_are_named() {
        for (text, key) in [
            ("lisen = [\"127.0.0.1:53\"]", "lisen"),
            ("[tcp]\nidle = 3", "idle"),
            ("[chaos]\nversoin = \"x\"", "versoin"),
            (
                "[[datasource]]\ntype = \"sqlite3\"\nfile = \"a\"\ncolor = 1",
                "color",
            ),
            ("[log]\nlevel = \"info\"", "log"),
        ] {
            let e = from_toml(text).expect_err(text).to_string();
            assert!(e.contains(key), "{text:?}: {e}");
            assert!(e.contains("/etc/authd/authd.toml"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn invalid_values_are_named() {
        for (text, key) in [
            ("listen = [\"localhost:53\"]", "listen[0]"),
            ("listen = [\"127.0.0.1\"]", "listen[0]"),
            ("listen = []", "listen"),
            ("[tcp]\nidle_timeout = 0", "tcp.idle_timeout"),
            ("[tcp]\nmax_connections = 0", "tcp.max_connections"),
            ("[tcp]\nidle_timeout = \"soon\"", "idle_timeout"),
            ("[tcp]\nidle_timeout = 1.5", "idle_timeout"),
            ("[tcp]\nidle_timeout = -3", "idle_timeout"),
            ("[server]\nudp_workers = 3.9", "udp_workers"),
            ("[[datasource]]\nfile = \"a\"", "datasource[0].type"),
            ("[[datasource]]\ntype = \"sqlite3\"", "datasource[0].file"),
            (
                "[[datasource]]\ntype = \"bdb\"\nfile = \"a\"",
                "datasource[0].type",
            ),
            ("listen = 53", "listen"),
            ("this is not toml", "authd.toml"),
            (
                "[tcp]\nidle_timeout = 99999999999999999999",
                "line 2: number too large to fit in target type (`idle_timeout = 99999999999999999999`)",
            ),
            ("[server]\nudp_workers = true", "a whole number"),
            ("listen = [5300]", "a string or a list of strings"),
            (
                "[[datasource]]\ntype = \"sqlite3\"\nfile = \"a\"\ncache = { slots = 2.5 }",
                "a slot count",
            ),
        ] {
            let e = from_toml(text).expect_err(text).to_string();
            assert!(e.contains(key), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
            assert!(!e.contains("untagged"), "{e}");
        }
    }

    #[test]
    fn server_udp_workers() {
        let c = from_toml("").expect("valid");
        assert_eq!(c.server.udp_workers, crate::sys::default_udp_workers());
        assert!(c.server.udp_workers >= 1);
        assert_eq!(
            crate::server::ServerSettings::from(&c).udp_workers,
            c.server.udp_workers
        );
        let c = from_toml("[server]\nudp_workers = 3").expect("valid");
        assert_eq!(c.server.udp_workers, 3);
        assert_eq!(crate::server::ServerSettings::from(&c).udp_workers, 3);
        let c = Config::from_parts(
            Some(("[server]\nudp_workers = 3", Path::new("/x/a.toml"))),
            env(&[("AUTHD_SERVER__UDP_WORKERS", "5")]),
        )
        .expect("valid");
        assert_eq!(c.server.udp_workers, 5);
        for (text, want) in [
            (
                "[server]\nudp_workers = 0",
                "server.udp_workers: 0 is out of range",
            ),
            (
                "[server]\nudp_workers = 1025",
                "server.udp_workers: 1025 is out of range",
            ),
            ("[server]\nudp_workers = -1", "udp_workers"),
            ("[server]\nudp_worker = 2", "udp_worker"),
        ] {
            let e = from_toml(text).expect_err(text).to_string();
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn env_overrides_file() {
        let c = Config::from_parts(
            Some((
                "listen = [\"127.0.0.1:53\"]\n[tcp]\nidle_timeout = 3",
                Path::new("/x/a.toml"),
            )),
            env(&[
                ("AUTHD_LISTEN", "127.0.0.2:5301, [::1]:5302"),
                ("AUTHD_TCP__IDLE_TIMEOUT", "30"),
                ("AUTHD_TCP__MAX_CONNECTIONS", "9"),
                ("AUTHD_CHAOS__VERSION", "1.0"),
                ("AUTHD_CHAOS__HOSTNAME", "ns9"),
                ("OTHER_VARIABLE", "ignored"),
            ]),
        )
        .expect("valid");
        assert_eq!(
            c.listen,
            vec![
                "127.0.0.2:5301".parse().expect("addr"),
                "[::1]:5302".parse().expect("addr")
            ]
        );
        assert_eq!(c.tcp.idle_timeout, Duration::from_secs(30));
        assert_eq!(c.tcp.max_connections, 9);
        assert_eq!(c.chaos.version.as_deref(), Some("1.0"));
        assert_eq!(c.chaos.hostname.as_deref(), Some("ns9"));
    }

    #[test]
    fn env_alone_and_unknown_env_key() {
        let c = Config::from_parts(None, env(&[("AUTHD_LISTEN", "[::1]:0")])).expect("valid");
        assert_eq!(c.listen, vec!["[::1]:0".parse().expect("addr")]);
        let e = Config::from_parts(None, env(&[("AUTHD_LISTN", "[::1]:0")]))
            .expect_err("unknown")
            .to_string();
        assert!(e.contains("listn"), "{e}");
        let c = Config::from_parts(None, env(&[("AUTHD_CHAOS__VERSION", "")])).expect("valid");
        assert_eq!(c.chaos.version, None);
    }

    #[test]
    fn missing_file_is_one_line() {
        let e = Config::load(Path::new("/nonexistent/authd.toml"))
            .expect_err("missing")
            .to_string();
        assert_eq!(
            e,
            "cannot read config /nonexistent/authd.toml: No such file or directory"
        );
    }

    #[test]
    fn example_config_is_valid() {
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/authd.toml"
        ));
        let text = std::fs::read_to_string(path).expect("examples/authd.toml");
        let c = Config::from_parts(Some((&text, path)), env(&[])).expect("valid example");
        assert_eq!(c.datasources.len(), 2);
        let DataSourceKind::Sqlite3 { file, .. } = &c.datasources[0].kind else {
            panic!("first example source is sqlite3: {:?}", c.datasources[0]);
        };
        assert!(file.is_absolute(), "{}", file.display());
        let DataSourceKind::Memory { zones, .. } = &c.datasources[1].kind else {
            panic!("second example source is memory: {:?}", c.datasources[1]);
        };
        assert!(!zones.is_empty());
        for z in zones {
            let f = z.file.as_ref().expect("example memory zones have files");
            assert!(f.is_absolute() && f.is_file(), "{}", f.display());
        }
        assert!(!c.listen.is_empty());
    }

    #[test]
    fn memory_and_sqlite3_sources() {
        let c = from_toml(
            r#"
            [[datasource]]
            type = "sqlite3"
            file = "a.sqlite3"
            zones = ["example.org", "Example.NET."]
            [[datasource]]
            type = "memory"
            db = "/var/b.sqlite3"
            zones = [{ origin = "example.com.", file = "zones/example.com.zone" }, "example.info."]
            [[datasource]]
            type = "memory"
            zones = [{ origin = ".", file = "/srv/root.zone" }]
            "#,
        )
        .expect("valid");
        let name = |s: &str| -> Name { s.parse().expect("name") };
        assert_eq!(
            c.datasources[0].kind,
            DataSourceKind::Sqlite3 {
                file: "/etc/authd/a.sqlite3".into(),
                zones: Some(vec![name("example.org."), name("example.net.")]),
            }
        );
        assert_eq!(
            c.datasources[1],
            DataSourceConfig::memory(
                vec![
                    MemoryZoneConfig {
                        origin: name("example.com."),
                        file: Some("/etc/authd/zones/example.com.zone".into()),
                    },
                    MemoryZoneConfig {
                        origin: name("example.info."),
                        file: None,
                    },
                ],
                Some("/var/b.sqlite3".into()),
            )
        );
        assert_eq!(
            c.datasources[1].to_string(),
            "memory:/etc/authd/zones/example.com.zone,db=/var/b.sqlite3"
        );
        let DataSourceKind::Memory { zones, db: None } = &c.datasources[2].kind else {
            panic!("{:?}", c.datasources[2]);
        };
        assert!(zones[0].origin.is_root());
    }

    #[test]
    fn invalid_datasources_are_named() {
        for (text, key) in [
            ("[[datasource]]\ntype = \"memory\"", "datasource[0].zones"),
            (
                "[[datasource]]\ntype = \"memory\"\nfile = \"x.zone\"",
                "datasource[0].file",
            ),
            (
                "[[datasource]]\ntype = \"memory\"\nzones = [\"example.com.\"]",
                "datasource[0].zones[0].file",
            ),
            (
                "[[datasource]]\ntype = \"memory\"\nzones = [{ file = \"x\" }]",
                "datasource[0].zones[0].origin",
            ),
            (
                "[[datasource]]\ntype = \"memory\"\nzones = [{ origin = \"a..b\", file = \"x\" }]",
                "datasource[0].zones[0].origin",
            ),
            (
                "[[datasource]]\ntype = \"memory\"\nzones = [{ origin = \"a.\", file = \"x\", colour = 1 }]",
                "colour",
            ),
            (
                "[[datasource]]\ntype = \"sqlite3\"\nfile = \"a\"\nzones = []",
                "datasource[0].zones",
            ),
            (
                "[[datasource]]\ntype = \"sqlite3\"\nfile = \"a\"\nzones = [{ origin = \"a.\", file = \"x\" }]",
                "datasource[0].zones[0].file",
            ),
            (
                "[[datasource]]\ntype = \"sqlite3\"\nfile = \"a\"\ndb = \"b\"",
                "datasource[0].db",
            ),
        ] {
            let e = from_toml(text).expect_err(text).to_string();
            assert!(e.contains(key), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn zone_listed_by_two_sources_is_an_error() {
        let e = from_toml(
            r#"
            [[datasource]]
            type = "sqlite3"
            file = "a.sqlite3"
            zones = ["example.com."]
            [[datasource]]
            type = "memory"
            zones = [{ origin = "EXAMPLE.com", file = "example.com.zone" }]
            "#,
        )
        .expect_err("duplicate")
        .to_string();
        assert!(e.contains("zone EXAMPLE.com. is claimed by both"), "{e}");
        assert!(
            e.contains("datasource[0] (sqlite3:/etc/authd/a.sqlite3)"),
            "{e}"
        );
        assert!(
            e.contains("datasource[1] (memory:/etc/authd/example.com.zone)"),
            "{e}"
        );
        let e = from_toml(
            "[[datasource]]\ntype = \"memory\"\nzones = [{ origin = \"a.\", file = \"x\" }, { origin = \"a.\", file = \"y\" }]",
        )
        .expect_err("twice in one source")
        .to_string();
        assert!(
            e.contains("zone a. is claimed by both datasource[0]"),
            "{e}"
        );
    }
}
