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
//! proxy_allow = ["127.0.0.1"]  # proxies that must send a PROXY v2 header; default []
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
//! [tls]                    # DNS over TLS (RFC 7858) and XoT (RFC 9103); off when unset
//! certificate = "authd.crt"      # PEM chain, the server's certificate first
//! key = "authd.key"              # PEM private key
//! listen = ["127.0.0.1:853"]     # ALPN "dot": queries, UPDATE, AXFR/IXFR
//! ca = "ca.pem"                  # trust anchors for primaries "ADDR:PORT tls NAME"
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
//! Unknown keys anywhere are an error that names the key; a value of the
//! wrong TOML type (`idle_timeout = "30"`) one that names the key, the type
//! and the line. A key taking a list of strings also takes one string of
//! comma-separated items. A zone may be served
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
//! | `AUTHD_SERVER__PROXY_ALLOW` | `server.proxy_allow` (comma-separated) | `AUTHD_SERVER__PROXY_ALLOW=10.0.0.1,10.0.0.2` |
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
//! Each feature owns its section: the typed settings, the raw (serde) shape
//! and the checks live in the feature's file (`[rrl]` in `rrl.rs`, `[tcp]`
//! in `server/limits.rs`, `[[secondary]]` in `secondary.rs`, …), written in
//! the vocabulary of [`crate::settings`] ([`Section`]). This module composes
//! them: the `sections!` list below (one line a section) makes [`Config`],
//! the file's serde shape and the schema walked for unknown keys and types.
//! Also here: the entry points ([`Config::load`], [`Config::from_env`],
//! [`Config::from_parts`]), the error type and who is blamed (the file and
//! line, or the variable); `raw` reads the file and the environment;
//! `validate` holds `listen`, `[server]`, `[control]`, `[[datasource]]` and
//! the checks across sections (a zone claimed twice).

mod raw;
mod validate;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
// Named by tests.rs (`use super::*`), as before the sections moved out.
#[cfg(test)]
use std::time::Duration;

use authd_datasrc::{DataSource, Name};
use serde::Deserialize;

#[cfg(test)]
use crate::acl::Acl;
use crate::chaos::RawChaos;
use crate::cookies::RawCookies;
use crate::dnstap::RawDnstap;
use crate::keys::{Key, KeyRing, RawKey};
use crate::metrics::RawMetrics;
use crate::notify::RawNotify;
use crate::rrl::RawRrl;
use crate::secondary::RawSecondary;
use crate::server::limits::RawTcp;
use crate::settings::{Context, Invalid, Schema, Section, string_or_list};
use crate::update::RawUpdate;
use crate::xfr::RawTransfer;
use raw::{RawControl, RawDataSource, RawServer};

// The sections' types, where the rest of authd has always found them.
pub use crate::chaos::{ChaosConfig, default_version};
pub use crate::cookies::CookiesConfig;
pub use crate::notify::{NotifyConfig, NotifyTarget};
pub use crate::rrl::RrlConfig;
pub use crate::secondary::{DEFAULT_MAX_REFRESH, DEFAULT_MIN_REFRESH, SecondaryZone};
pub use crate::server::limits::{
    DEFAULT_TCP_FIRST_QUERY_TIMEOUT_SECS, DEFAULT_TCP_IDLE_TIMEOUT_SECS,
    DEFAULT_TCP_MAX_CONNECTIONS, DEFAULT_TCP_MAX_CONNECTIONS_PER_CLIENT, TcpConfig,
};
pub use crate::settings::{parse_listen, parse_origin};
pub use crate::update::UpdateConfig;
pub use crate::xfr::{TransferConfig, TransferZone};

/// The prefix of environment variables that override configuration keys.
pub const ENV_PREFIX: &str = "AUTHD";

/// The listen address used when none is configured.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:5300";

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
    /// A value of the wrong type in the file (`idle_timeout = "30"`), found
    /// before anything is read from it.
    #[error("config {origin}: line {line}: {key}: expected {expected}, found {found}")]
    Type {
        /// The file.
        origin: String,
        /// The value's line (from 1).
        line: usize,
        /// The key, e.g. `tcp.idle_timeout` or `datasource[0].zones`.
        key: String,
        /// What the key takes: "a whole number".
        expected: String,
        /// What it was given: "the string \"30\" (write it without quotes)".
        found: String,
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
            // The key is quoted (`rrl.enabled`) and may be followed by
            // "in the environment".
            let key = reason
                .rsplit_once("for key ")
                .and_then(|(_, k)| k.trim().trim_start_matches('`').split(['`', ' ']).next());
            ConfigError::Parse {
                origin: key.and_then(var_of).unwrap_or(origin),
                reason,
            }
        }
        other => other,
    }
}

/// Server threads, identity and framing (`[server]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// UDP workers per listen address, each a thread with its own
    /// `SO_REUSEPORT` socket (1..=[`MAX_UDP_WORKERS`]).
    pub udp_workers: usize,
    /// The name server identifier sent, as its bytes, to queries carrying
    /// the NSID option (RFC 5001); `None` (unset or ""): no NSID option.
    /// Applied by a reload, unlike the threads.
    pub nsid: Option<String>,
    /// Sources that must start every UDP datagram and TCP connection with a
    /// PROXY protocol v2 header naming the client (load balancers); empty:
    /// none. Applied at start only.
    pub proxy_allow: Vec<crate::acl::Cidr>,
}

impl Default for ServerConfig {
    /// One UDP worker per CPU available to the process.
    fn default() -> Self {
        ServerConfig {
            udp_workers: crate::sys::default_udp_workers(),
            nsid: None,
            proxy_allow: Vec::new(),
        }
    }
}

/// The sections of the file: `field: Value = "name" Raw,` for each, where
/// `Raw` is the section as written (a [`Section`] whose value is `Value`)
/// and `name` its key in the file. Makes [`Config`] (`listen`, the `[[key]]`s
/// and one field a section), its [`Default`], the file's serde shape
/// `RawConfig`, the list of the sections' schemas (`SCHEMAS`, for the walk
/// in `raw`) and `RawConfig::check`, which checks `listen`, then the keys
/// (which the other sections may name), then the sections in this order.
macro_rules! sections {
    ($($(#[$doc:meta])* $field:ident: $value:ty = $name:literal $raw:ty,)*) => {
        /// The validated configuration.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct Config {
            /// Addresses to serve UDP and TCP on (never empty). Port 0 picks a free port.
            pub listen: Vec<SocketAddr>,
            /// TSIG keys (`[[key]]`), names unique. Their secrets never print
            /// ([`crate::keys::Secret`]).
            pub keys: Vec<Key>,
            $($(#[$doc])* pub $field: $value,)*
        }

        impl Default for Config {
            /// No data source, `listen = ["127.0.0.1:5300"]`, the default limits and
            /// `version.bind` = `"authd <version>"`: every section's default.
            fn default() -> Self {
                Config {
                    listen: default_listen(),
                    keys: Vec::new(),
                    $($field: <$value>::default(),)*
                }
            }
        }

        /// The configuration file as written: every key optional, unknown keys rejected.
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct RawConfig {
            #[serde(default, deserialize_with = "string_or_list")]
            listen: Option<Vec<String>>,
            #[serde(default)]
            key: Vec<RawKey>,
            $(#[serde(default, rename = $name)] $field: $raw,)*
        }

        /// Every section's schema, `[[key]]` first.
        const SCHEMAS: &[Schema] = &[
            <Vec<RawKey> as Section>::SCHEMA,
            $(<$raw as Section>::SCHEMA,)*
        ];

        impl RawConfig {
            /// Every section checked, relative paths resolved against
            /// `base`. Errors: the first bad value.
            fn check(self, base: Option<&Path>) -> Result<Config, Invalid> {
                let listen = validate::listen(self.listen)?;
                let keys = self.key.check(&Context { base, keys: &[] })?;
                let names: Vec<Name> = keys.iter().map(|k| k.name.clone()).collect();
                let cx = Context { base, keys: &names };
                $(let $field = self.$field.check(&cx)?;)*
                Ok(Config { listen, keys, $($field,)* })
            }
        }
    };
}

sections! {
    /// Server threads (`[server]`).
    server: ServerConfig = "server" RawServer,
    /// TCP limits.
    tcp: TcpConfig = "tcp" RawTcp,
    /// Answers to CH TXT `version.bind` / `hostname.bind`.
    chaos: ChaosConfig = "chaos" RawChaos,
    /// Data sources, in search order (may be empty: every query is then REFUSED).
    datasources: Vec<DataSourceConfig> = "datasource" Vec<RawDataSource>,
    /// Zones followed from primaries (`[[secondary]]`), origins unique.
    secondary: Vec<SecondaryZone> = "secondary" Vec<RawSecondary>,
    /// Outgoing zone transfers (`[transfer]`).
    transfer: TransferConfig = "transfer" RawTransfer,
    /// NOTIFY to secondaries (`[notify]`).
    notify: NotifyConfig = "notify" RawNotify,
    /// Dynamic updates (`[update]`, RFC 2136).
    update: UpdateConfig = "update" RawUpdate,
    /// UDP response rate limiting (`[rrl]`).
    rrl: RrlConfig = "rrl" RawRrl,
    /// The control socket for `authc` (`[control] socket`); `None`: off.
    control_socket: Option<PathBuf> = "control" RawControl,
    /// Where auth queries and responses are logged in dnstap format
    /// (`[dnstap]`); `None`: off. Applied at start only.
    dnstap: Option<crate::dnstap::Settings> = "dnstap" RawDnstap,
    /// Where `/metrics` is served (`[metrics] listen`); `None`: metrics off.
    metrics_listen: Option<SocketAddr> = "metrics" RawMetrics,
    /// DNS cookies (`[cookies]`).
    cookies: CookiesConfig = "cookies" RawCookies,
    /// DNS over TLS and zone transfers over TLS (`[tls]`).
    tls: crate::tls::TlsConfig = "tls" crate::tls::RawTls,
    /// Catalog zones produced (`[[catalog]]`) and consumer groups
    /// (`[[catalog.group]]`), RFC 9432.
    catalog: crate::catalog::config::CatalogConfig = "catalog" crate::catalog::config::RawCatalogs,
    /// Zones signed online (`[signing]`, `[[signing.zone]]`).
    signing: crate::signing::SigningConfig = "signing" crate::signing::RawSigning,
}

/// `listen` when unset: [`DEFAULT_LISTEN`].
fn default_listen() -> Vec<SocketAddr> {
    vec![SocketAddr::from(([127, 0, 0, 1], 5300))]
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

impl Config {
    /// Reads the TOML file at `path` and overrides it with the process's
    /// `AUTHD_*` environment variables.
    ///
    /// Errors: [`ConfigError::Unreadable`] (missing file, permissions),
    /// [`ConfigError::Parse`] (bad TOML, bad variable value),
    /// [`ConfigError::Type`] (a value of the wrong type, with its line),
    /// [`ConfigError::Unknown`] (unknown keys), [`ConfigError::Invalid`]
    /// (e.g. a bad listen address), [`ConfigError::DuplicateZone`].
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
        self.transfer.policy()
    }

    /// Who may update which zones (RFC 2136). A zone signed online
    /// (`[[signing.zone]]`) takes updates of its data however `[update]
    /// dnssec` is set: authd signs them in the update's transaction.
    pub fn update_policy(&self) -> crate::update::UpdatePolicy {
        let mut policy = self.update.clone();
        for z in &self.signing.zones {
            match policy.zones.iter_mut().find(|u| u.origin == z.origin) {
                Some(u) => u.dnssec = Some(true),
                None => policy.zones.push(crate::update::ZoneUpdate {
                    origin: z.origin.clone(),
                    allow: None,
                    dnssec: Some(true),
                    serial: None,
                }),
            }
        }
        policy
    }

    /// The TSIG keys, for verifying requests and signing what is sent.
    pub fn key_ring(&self) -> KeyRing {
        KeyRing::new(self.keys.clone())
    }

    /// The error for `zone`, claimed by data sources `first` and `second`
    /// (indexes into [`Self::datasources`]): each named by its section, a
    /// `[[datasource]]` (`datasource[0] (sqlite3:/etc/authd/a.sqlite3)`) or,
    /// for the sources [`Self::secondary_datasources`] added, the
    /// `[[secondary]]` of the zone (`secondary[0] (sqlite3:/etc/authd/b)`).
    pub fn duplicate_zone(&self, zone: &Name, first: usize, second: usize) -> ConfigError {
        let explicit = self.explicit_datasources().len();
        let label = |i: usize| {
            let ds = &self.datasources[i];
            match self.secondary.iter().position(|z| z.origin == *zone) {
                Some(j) if i >= explicit => format!("secondary[{j}] ({ds})"),
                _ => source_label(i, ds),
            }
        };
        ConfigError::DuplicateZone {
            zone: zone.to_string(),
            first: label(first),
            second: label(second),
        }
    }
}

/// A label for data source `index` in messages: `datasource[1] (memory:a.zone)`.
pub fn source_label(index: usize, ds: &DataSourceConfig) -> String {
    format!("datasource[{index}] ({ds})")
}

impl Config {
    /// The `[[datasource]]`s of the file: [`Self::datasources`] without the
    /// ones [`Self::secondary_datasources`] appended.
    fn explicit_datasources(&self) -> &[DataSourceConfig] {
        let n = self
            .datasources
            .len()
            .saturating_sub(self.secondary_datasources().len());
        &self.datasources[..n]
    }

    /// This configuration with catalog `members` (RFC 9432) served as
    /// secondary zones too: in `secondary`, and in the data sources
    /// [`Self::secondary_datasources`] makes for them.
    pub fn with_catalog_members(&self, members: Vec<SecondaryZone>) -> Config {
        let mut c = self.clone();
        c.datasources.truncate(self.explicit_datasources().len());
        c.secondary.extend(members);
        c.datasources.extend(c.secondary_datasources());
        c
    }

    /// The zones this configuration names itself (a `[[secondary]]`, a
    /// `[[datasource]]`'s `zones`): a catalog member that is one of them is
    /// ignored (RFC 9432 §5.4).
    pub fn configured_zones(&self) -> Vec<Name> {
        let mut out: Vec<Name> = self.secondary.iter().map(|z| z.origin.clone()).collect();
        for ds in self.explicit_datasources() {
            match &ds.kind {
                DataSourceKind::Sqlite3 {
                    zones: Some(list), ..
                } => out.extend(list.iter().cloned()),
                DataSourceKind::Memory { zones, .. } => {
                    out.extend(zones.iter().map(|z| z.origin.clone()))
                }
                _ => {}
            }
        }
        out
    }

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
