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
//! nsid = "ns1.example"     # NSID (RFC 5001) sent, as these bytes (at most 128), to queries
//!                          # asking for it; default unset = none
//!
//! [tcp]
//! idle_timeout = 10        # seconds a TCP connection may wait for its next query (1..=86400)
//! max_connections = 512    # concurrent TCP connections (1..=1000000); when all are taken,
//!                          # the longest idle one is closed for a newcomer
//! max_connections_per_client = 32  # per client prefix (the [rrl] prefix lengths)
//! first_query_timeout = 3  # seconds a new connection has to send its first query
//!
//! [rrl]                    # UDP response rate limiting (on by default)
//! enabled = true
//! responses_per_second = 200   # per client prefix and kind of response
//! slip = 2                 # every 2nd limited response is sent truncated (TC=1); 0 = drop all
//! window = 15              # seconds a limited client's excess is remembered
//! ipv4_prefix = 24         # client prefix lengths
//! ipv6_prefix = 56
//! exempt = ["192.0.2.0/24"]    # never limited
//! log_only = false         # log what would be limited, limit nothing
//!
//! [control]                # the socket authc talks to (mode 0600; off when unset)
//! socket = "/run/authd/control.sock"
//!
//! [dnstap]                 # auth queries and responses in dnstap (off when unset)
//! file = "/var/log/authd/dnstap.fstrm"   # or socket = "/run/dnstap.sock" (one of the two)
//! identity = "ns1"         # Dnstap.identity; default none
//! version = "authd"        # Dnstap.version; default none
//!
//! [metrics]                # Prometheus text format at http://LISTEN/metrics (off when unset)
//! listen = "127.0.0.1:9100"
//!
//! [cookies]                # DNS cookies, RFC 7873 / RFC 9018 (on by default)
//! enabled = true
//! secret = "…32 hex digits…"   # default: random at start, renewed every 26 h
//!
//! [chaos]
//! version = "authd 0.1.0"  # CH TXT version.bind; default "authd <version>"; "" = REFUSED
//! hostname = "ns1"         # CH TXT hostname.bind; default unset = REFUSED
//!
//! [[key]]                  # a TSIG key (RFC 8945); `authd keygen NAME` makes one
//! name = "transfer-key."
//! algorithm = "hmac-sha256"      # also hmac-sha224/384/512, hmac-sha1, hmac-md5
//! secret = "base64…"             # or secret_file = "path" (a file holding it)
//!
//! [transfer]               # AXFR/IXFR (docs/ZONE-ADMIN.md)
//! allow = ["127.0.0.1", "key transfer-key.", "192.0.2.0/24 key transfer-key."]
//!                                # default [] = every transfer REFUSED
//! [[transfer.zone]]
//! origin = "example.org."
//! allow = ["key transfer-key."]  # this zone: replaces the global allow
//!
//! [update]                 # dynamic updates of sqlite3 zones (RFC 2136)
//! allow = ["key ddns-key."]      # full control; default [] = nobody
//! serial = "increment"           # or "unixtime", "dateserial"
//! dnssec = false                 # refuse zones with a DNSKEY at the apex
//! [[update.grant]]
//! key = "acme-key."
//! match = "name"                 # "name", "subdomain" or "wildcard"
//! name = "_acme-challenge.www.example.com."
//! types = ["TXT"]                # default: all but SOA, NS and DNSSEC types
//! [[update.zone]]
//! origin = "example.org."
//! allow = ["key other-key."]     # this zone: replaces the global allow
//!
//! [notify]                 # NOTIFY when an sqlite3 zone's serial changes (RFC 1996)
//! targets = ["127.0.0.1:5353"]   # every zone; ADDR without a port = 53
//! [[notify.zone]]
//! origin = "example.org."
//! targets = ["192.0.2.53 key transfer-key."]  # this zone, in addition; signed
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
//! | `AUTHD_RRL__ENABLED` | `rrl.enabled` | `AUTHD_RRL__ENABLED=false` |
//! | `AUTHD_RRL__RESPONSES_PER_SECOND` | `rrl.responses_per_second` | `AUTHD_RRL__RESPONSES_PER_SECOND=50` |
//! | `AUTHD_COOKIES__ENABLED` | `cookies.enabled` | `AUTHD_COOKIES__ENABLED=false` |
//! | `AUTHD_COOKIES__SECRET` | `cookies.secret` | (32 hex digits) |
//!
//! `[[datasource]]` entries can only come from the file. Any other `AUTHD_*`
//! variable is an unknown key, hence an error (so a typo is not silently ignored).
//!
//! # Layout
//!
//! This module holds the typed configuration and its entry points
//! ([`Config::load`], [`Config::from_env`], [`Config::from_parts`]); `raw`
//! the serde shapes of the file as written; `validate` the checks that turn
//! those into typed values (and every "invalid value" message).

mod raw;
mod validate;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use authd_datasrc::{DataSource, Name};

use crate::acl::Acl;
use crate::chaos::ChaosOptions;
use crate::keys::{Key, KeyRing};

/// The prefix of environment variables that override configuration keys.
pub const ENV_PREFIX: &str = "AUTHD";

/// The listen address used when none is configured.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:5300";

/// Default `[tcp] idle_timeout`, in seconds.
pub const DEFAULT_TCP_IDLE_TIMEOUT_SECS: u64 = 10;

/// Default `[tcp] max_connections`.
pub const DEFAULT_TCP_MAX_CONNECTIONS: usize = 512;

/// Default most concurrent TCP connections per client prefix.
pub const DEFAULT_TCP_MAX_CONNECTIONS_PER_CLIENT: usize = 32;

/// Default time for a new TCP connection's first query, seconds.
pub const DEFAULT_TCP_FIRST_QUERY_TIMEOUT_SECS: u64 = 3;

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
    /// Keys no table takes: one set by a variable (`unknown setting
    /// AUTHD_TCP__IDLE_TIMOUT (from the environment): tcp has no key
    /// idle_timout`), or several, all listed with where each was set.
    #[error("{0}")]
    Unknown(String),
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

/// `e` with its origin replaced by the environment variable that set the
/// offending key, when one did (`vars`: key path such as `tcp.idle_timeout`,
/// and the variable): the file is not to blame for a variable's value.
fn blame_variable(e: ConfigError, vars: &[(String, String)]) -> ConfigError {
    // `listen[0]` was set by AUTHD_LISTEN: a list element names its list.
    let var_of = |key: &str| {
        let key = key.split('[').next().unwrap_or(key);
        vars.iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| format!("environment variable {v}"))
    };
    match e {
        ConfigError::Invalid {
            origin,
            key,
            reason,
        } => ConfigError::Invalid {
            origin: var_of(&key).unwrap_or(origin),
            key,
            reason,
        },
        // A type error names its key at the end: "... for key tcp.idle_timeout".
        ConfigError::Parse { origin, reason } => {
            let key = reason
                .rsplit_once("for key ")
                .map(|(_, k)| k.trim().trim_matches('`'));
            ConfigError::Parse {
                origin: key.and_then(var_of).unwrap_or(origin),
                reason,
            }
        }
        other => other,
    }
}

/// Server threads and identity (`[server]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// UDP workers per listen address, each a thread with its own
    /// `SO_REUSEPORT` socket (1..=[`MAX_UDP_WORKERS`]).
    pub udp_workers: usize,
    /// The name server identifier sent, as its bytes, to queries carrying
    /// the NSID option (RFC 5001); `None` (unset or ""): no NSID option.
    /// Applied by a reload, unlike the threads.
    pub nsid: Option<String>,
}

impl Default for ServerConfig {
    /// One UDP worker per CPU available to the process.
    fn default() -> Self {
        ServerConfig {
            udp_workers: crate::sys::default_udp_workers(),
            nsid: None,
        }
    }
}

/// TCP limits (`[tcp]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpConfig {
    /// How long a connection may stay without a complete query (counted from
    /// its last one) before it is closed.
    pub idle_timeout: Duration,
    /// Most concurrent connections; when all are taken, the connection idle
    /// longest is closed to make room.
    pub max_connections: usize,
    /// Most concurrent connections from one client prefix (the `[rrl]`
    /// prefix lengths); further ones from it are closed at once.
    pub max_connections_per_client: usize,
    /// How long a new connection has to deliver its first complete query.
    pub first_query_timeout: Duration,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            idle_timeout: Duration::from_secs(DEFAULT_TCP_IDLE_TIMEOUT_SECS),
            max_connections: DEFAULT_TCP_MAX_CONNECTIONS,
            max_connections_per_client: DEFAULT_TCP_MAX_CONNECTIONS_PER_CLIENT,
            first_query_timeout: Duration::from_secs(DEFAULT_TCP_FIRST_QUERY_TIMEOUT_SECS),
        }
    }
}

/// Response rate limiting (`[rrl]`): on by default, as in NSD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RrlConfig {
    /// Whether UDP responses are rate limited.
    pub enabled: bool,
    /// The limits.
    pub settings: crate::rrl::RrlSettings,
}

impl Default for RrlConfig {
    fn default() -> Self {
        RrlConfig {
            enabled: true,
            settings: crate::rrl::RrlSettings::default(),
        }
    }
}

/// DNS cookies (`[cookies]`): on by default, as in BIND 9.
#[derive(Clone, PartialEq, Eq)]
pub struct CookiesConfig {
    /// Whether cookies are answered and checked.
    pub enabled: bool,
    /// The server secret; `None`: random at start.
    pub secret: Option<[u8; 16]>,
}

impl Default for CookiesConfig {
    fn default() -> Self {
        CookiesConfig {
            enabled: true,
            secret: None,
        }
    }
}

impl fmt::Debug for CookiesConfig {
    /// Never shows the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CookiesConfig")
            .field("enabled", &self.enabled)
            .field("secret", &self.secret.map(|_| "(set)"))
            .finish()
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
        /// The zones are `[[secondary]]` zones (`memory = true`): written into
        /// `db` by transfers and rebuilt in memory; one not in `db` yet is
        /// served once transferred (not an error).
        secondary: bool,
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
        let kind = DataSourceKind::Memory {
            zones,
            db,
            secondary: false,
        };
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
            DataSourceKind::Memory { zones, db, .. } => {
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
    /// Dynamic updates (`[update]`, RFC 2136).
    pub update: UpdateConfig,
    /// UDP response rate limiting (`[rrl]`).
    pub rrl: RrlConfig,
    /// DNS cookies (`[cookies]`).
    pub cookies: CookiesConfig,
    /// Where `/metrics` is served (`[metrics] listen`); `None`: metrics off.
    pub metrics_listen: Option<SocketAddr>,
    /// The control socket for `authc` (`[control] socket`); `None`: off.
    pub control_socket: Option<PathBuf>,
    /// Where auth queries and responses are logged in dnstap format
    /// (`[dnstap]`); `None`: off. Applied at start only.
    pub dnstap: Option<crate::dnstap::Settings>,
    /// TSIG keys (`[[key]]`), names unique. Their secrets never print
    /// ([`crate::keys::Secret`]).
    pub keys: Vec<Key>,
    /// Zones followed from primaries (`[[secondary]]`), origins unique.
    pub secondary: Vec<SecondaryZone>,
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
            update: UpdateConfig::default(),
            rrl: RrlConfig::default(),
            cookies: CookiesConfig::default(),
            metrics_listen: None,
            control_socket: None,
            dnstap: None,
            keys: Vec::new(),
            secondary: Vec::new(),
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
        let env = env.unwrap_or_else(|| std::env::vars().collect());
        // The variable that set each key, to name it when its value is bad.
        let vars: Vec<(String, String)> = env
            .keys()
            .filter_map(|v| {
                let key = v.strip_prefix("AUTHD_")?.to_lowercase().replace("__", ".");
                Some((key, v.clone()))
            })
            .collect();
        let blame = |e: ConfigError| blame_variable(e, &vars);
        let raw = raw::read(file.map(|(text, _)| text), Some(env), &origin).map_err(blame)?;
        validate::config(raw, &origin, file.and_then(|(_, path)| path.parent())).map_err(blame)
    }

    /// Who may transfer zones.
    pub fn transfer_policy(&self) -> crate::xfr::TransferPolicy {
        crate::xfr::TransferPolicy {
            allow: self.transfer.allow.clone(),
            zones: self
                .transfer
                .zones
                .iter()
                .map(|z| (z.origin.clone(), z.allow.clone()))
                .collect(),
        }
    }

    /// Who may update which zones (RFC 2136).
    pub fn update_policy(&self) -> crate::update::UpdatePolicy {
        crate::update::UpdatePolicy {
            allow: self.update.allow.clone(),
            grants: self.update.grants.clone(),
            zones: self.update.zones.clone(),
            serial: self.update.serial,
            dnssec: self.update.dnssec,
        }
    }

    /// The TSIG keys, for verifying requests and signing what is sent.
    pub fn key_ring(&self) -> KeyRing {
        KeyRing::new(self.keys.clone())
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

/// Outgoing zone transfers (`[transfer]`, RFC 5936 §6: access must be controlled).
///
/// ```toml
/// [transfer]
/// allow = ["127.0.0.1", "key transfer-key.", "192.0.2.0/24 key transfer-key."]
/// [[transfer.zone]]
/// origin = "example.org."
/// allow = ["key other-key."]      # replaces the global list for this zone
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransferConfig {
    /// Who may AXFR/IXFR (address blocks, TSIG keys, or both: see
    /// [`crate::acl`]); empty: nobody.
    pub allow: Acl,
    /// Per-zone lists, each replacing [`Self::allow`] for its zone.
    pub zones: Vec<TransferZone>,
}

/// Dynamic updates (`[update]`, RFC 2136) of zones in sqlite3 sources.
///
/// ```toml
/// [update]
/// allow = ["key ddns-key."]      # full control; an address-only entry must be written out
/// serial = "increment"           # or "unixtime", "dateserial"
/// dnssec = false                 # refuse zones with a DNSKEY at the apex
/// [[update.grant]]
/// key = "acme-key."
/// match = "name"                 # "name", "subdomain" or "wildcard"
/// name = "_acme-challenge.www.example.com."
/// types = ["TXT"]                # default: all but SOA, NS and DNSSEC types
/// [[update.zone]]
/// origin = "example.org."
/// allow = ["key other-key."]     # replaces the global list for this zone
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdateConfig {
    /// Who has full control of every zone without its own list; empty: nobody.
    pub allow: Acl,
    /// Finer grants by key.
    pub grants: Vec<crate::update::Grant>,
    /// Per-zone settings.
    pub zones: Vec<crate::update::ZoneUpdate>,
    /// How the SOA serial moves.
    pub serial: authd_datasrc::sqlite_admin::SerialPolicy,
    /// Updates of signed zones (DNSKEY at the apex) allowed.
    pub dnssec: bool,
}

/// One `[[transfer.zone]]`: who may transfer one zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferZone {
    /// The zone apex.
    pub origin: Name,
    /// Who may transfer it (instead of `[transfer] allow`).
    pub allow: Acl,
}

/// A NOTIFY target: an address, and the TSIG key to sign with, if any
/// (`"192.0.2.2"`, `"192.0.2.2:5353 key transfer-key."`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyTarget {
    /// Where to send (port 53 when the entry gave none).
    pub addr: SocketAddr,
    /// Sign with this `[[key]]` (RFC 8945 §5.1); `None`: unsigned.
    pub key: Option<Name>,
}

impl fmt::Display for NotifyTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(k) => write!(f, "{} key {k}", self.addr),
            None => write!(f, "{}", self.addr),
        }
    }
}

/// NOTIFY to secondaries when a zone's SOA serial changes (`[notify]`, RFC 1996).
///
/// ```toml
/// [notify]
/// targets = ["127.0.0.1:5353"]      # every zone; a missing port is 53
/// [[notify.zone]]
/// origin = "example.com."
/// targets = ["[::1]:5354 key transfer-key."]   # this zone, in addition; signed
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotifyConfig {
    /// Targets notified for every zone.
    pub targets: Vec<NotifyTarget>,
    /// Extra targets for single zones (apex, targets).
    pub zones: Vec<(Name, Vec<NotifyTarget>)>,
    /// Who else may send NOTIFY for a secondary zone, besides its primaries
    /// (`allow`, an [`Acl`]: addresses, keys or both).
    pub allow: Acl,
}

impl NotifyConfig {
    /// The targets for zone `origin`: the global ones, then the zone's own,
    /// without duplicates.
    pub fn targets_for(&self, origin: &Name) -> Vec<NotifyTarget> {
        let mut out = self.targets.clone();
        for (zone, targets) in &self.zones {
            if zone == origin {
                for t in targets {
                    if !out.contains(t) {
                        out.push(t.clone());
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

/// Default lower bound of the SOA refresh and retry intervals, seconds.
pub const DEFAULT_MIN_REFRESH: u32 = 60;
/// Default upper bound of the SOA refresh and retry intervals, seconds.
pub const DEFAULT_MAX_REFRESH: u32 = 86_400;

/// One `[[secondary]]`: a zone authd follows from its primaries by zone
/// transfer (RFC 5936, RFC 1995) and serves from a BIND 10 sqlite3 DB.
///
/// ```toml
/// [[secondary]]
/// zone = "example.com."
/// primaries = ["192.0.2.1:53 key transfer-key.", "192.0.2.2"]   # in order
/// file = "secondary.sqlite3"   # created if missing; may hold several zones
/// min_refresh = 60             # bounds on the SOA refresh/retry, seconds
/// max_refresh = 86400
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondaryZone {
    /// The zone apex.
    pub origin: Name,
    /// The primaries, tried in order; the address a NOTIFY may come from
    /// and the `[[key]]` to sign requests with (same form as a NOTIFY target).
    pub primaries: Vec<NotifyTarget>,
    /// The zone DB the transferred zone is written to and served from (or,
    /// with `memory`, kept in for restarts).
    pub file: PathBuf,
    /// Served from memory (`memory = true`): each transfer is written to
    /// `file` and the zone's snapshot rebuilt from it.
    pub memory: bool,
    /// Lower bound of the refresh and retry intervals taken from the SOA, seconds.
    pub min_refresh: u32,
    /// Upper bound of the refresh and retry intervals taken from the SOA, seconds.
    pub max_refresh: u32,
}

impl Config {
    /// The data sources serving the secondary zones: per DB file, one
    /// sqlite3 source restricted to that file's secondary zones and one
    /// memory source (kept in the file) for its `memory = true` zones, in
    /// first-mention order.
    pub fn secondary_datasources(&self) -> Vec<DataSourceConfig> {
        let mut out: Vec<DataSourceConfig> = Vec::new();
        for z in self.secondary.iter().filter(|z| z.memory) {
            let zone = MemoryZoneConfig {
                origin: z.origin.clone(),
                file: None,
            };
            let existing = out.iter_mut().find_map(|ds| match &mut ds.kind {
                DataSourceKind::Memory {
                    zones,
                    db: Some(db),
                    secondary: true,
                } if *db == z.file => Some(zones),
                _ => None,
            });
            match existing {
                Some(zones) => zones.push(zone),
                None => {
                    let mut ds = DataSourceConfig::memory(vec![zone], Some(z.file.clone()));
                    if let DataSourceKind::Memory { secondary, .. } = &mut ds.kind {
                        *secondary = true;
                    }
                    out.push(ds);
                }
            }
        }
        for z in self.secondary.iter().filter(|z| !z.memory) {
            let existing = out.iter_mut().find_map(|ds| match &mut ds.kind {
                DataSourceKind::Sqlite3 {
                    file,
                    zones: Some(zones),
                } if *file == z.file => Some(zones),
                _ => None,
            });
            match existing {
                Some(zones) => zones.push(z.origin.clone()),
                None => {
                    let mut ds = DataSourceConfig::sqlite3(z.file.clone());
                    ds.kind = DataSourceKind::Sqlite3 {
                        file: z.file.clone(),
                        zones: Some(vec![z.origin.clone()]),
                    };
                    out.push(ds);
                }
            }
        }
        out
    }
}
