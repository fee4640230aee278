//! authd's configuration: one TOML file, overridable by `AUTHD_*` environment
//! variables, validated once at start-up into typed values ([`Config`]).
//!
//! # File format
//!
//! ```toml
//! listen = ["127.0.0.1:5300", "[::1]:5300"]   # default ["127.0.0.1:5300"]
//!
//! [tcp]
//! idle_timeout = 10        # seconds a TCP connection may wait for its next query (1..=86400)
//! max_connections = 512    # concurrent TCP connections; more are closed at once (1..=1000000)
//!
//! [chaos]
//! version = "authd 0.1.0"  # CH TXT version.bind; default "authd <version>"; "" = REFUSED
//! hostname = "ns1"         # CH TXT hostname.bind; default unset = REFUSED
//!
//! [[datasource]]           # searched in this order, the longest zone match wins
//! type = "sqlite3"         # a BIND 10 sqlite3 zone DB (schema 2.x), every zone in it
//! file = "zone.sqlite3"    # relative paths are relative to the config file's folder
//! ```
//!
//! Unknown keys anywhere are an error that names the key.
//!
//! # Environment variables
//!
//! A variable `AUTHD_<KEY>` overrides key `<KEY>` of the file (case-insensitive);
//! a double underscore separates a section from its key:
//!
//! | variable | key | example |
//! |---|---|---|
//! | `AUTHD_LISTEN` | `listen` (comma-separated) | `AUTHD_LISTEN=127.0.0.1:53,[::1]:53` |
//! | `AUTHD_TCP__IDLE_TIMEOUT` | `tcp.idle_timeout` | `AUTHD_TCP__IDLE_TIMEOUT=30` |
//! | `AUTHD_TCP__MAX_CONNECTIONS` | `tcp.max_connections` | `AUTHD_TCP__MAX_CONNECTIONS=100` |
//! | `AUTHD_CHAOS__VERSION` | `chaos.version` | `AUTHD_CHAOS__VERSION=` (refuse) |
//! | `AUTHD_CHAOS__HOSTNAME` | `chaos.hostname` | `AUTHD_CHAOS__HOSTNAME=ns1` |
//!
//! `[[datasource]]` entries can only come from the file. Any other `AUTHD_*`
//! variable is an unknown key, hence an error (so a typo is not silently ignored).

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use authd_datasrc::sqlite::SqliteSource;
use authd_datasrc::{DataSource, SourceList};
use serde::Deserialize;

use crate::query::ChaosOptions;
use crate::server::ServerSettings;

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
}

/// The configuration file as written: every key optional, unknown keys rejected.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default, deserialize_with = "string_or_list")]
    listen: Option<Vec<String>>,
    #[serde(default)]
    tcp: RawTcp,
    #[serde(default)]
    chaos: RawChaos,
    #[serde(default)]
    datasource: Vec<RawDataSource>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTcp {
    idle_timeout: Option<u64>,
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
}

/// `listen` as a TOML list, or (from `AUTHD_LISTEN`) one comma-separated string.
fn string_or_list<'de, D>(d: D) -> Result<Option<Vec<String>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
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
    /// `type = "sqlite3"`: a BIND 10 sqlite3 zone DB, every zone in it served.
    Sqlite3 {
        /// The DB file (absolute, or relative to the working directory when it
        /// came from the command line).
        file: PathBuf,
    },
}

/// One configured data source (`[[datasource]]`). Settings shared by every kind
/// (such as a later per-source cache) are fields here, beside [`Self::kind`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DataSourceConfig {
    /// The backend and its settings.
    pub kind: DataSourceKind,
}

impl DataSourceConfig {
    /// An sqlite3 source over `file`.
    pub fn sqlite3(file: impl Into<PathBuf>) -> DataSourceConfig {
        DataSourceConfig {
            kind: DataSourceKind::Sqlite3 { file: file.into() },
        }
    }

    /// Opens the source.
    ///
    /// Errors: the backend's (a missing DB, not a zone DB, an unsupported schema
    /// version); the message names the file.
    pub fn open(&self) -> Result<Arc<dyn DataSource>, authd_datasrc::DataSourceError> {
        match &self.kind {
            DataSourceKind::Sqlite3 { file } => Ok(Arc::new(SqliteSource::open(file)?)),
        }
    }
}

impl fmt::Display for DataSourceConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            DataSourceKind::Sqlite3 { file } => write!(f, "sqlite3:{}", file.display()),
        }
    }
}

/// The validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Addresses to serve UDP and TCP on (never empty). Port 0 picks a free port.
    pub listen: Vec<SocketAddr>,
    /// TCP limits.
    pub tcp: TcpConfig,
    /// Answers to CH TXT `version.bind` / `hostname.bind`.
    pub chaos: ChaosConfig,
    /// Data sources, in search order (may be empty: every query is then REFUSED).
    pub datasources: Vec<DataSourceConfig>,
}

impl Default for Config {
    /// No data source, `listen = ["127.0.0.1:5300"]`, the default limits and
    /// `version.bind` = `"authd <version>"`.
    fn default() -> Self {
        Config {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 5300))],
            tcp: TcpConfig::default(),
            chaos: ChaosConfig {
                version: Some(default_version()),
                hostname: None,
            },
            datasources: Vec::new(),
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
            reason: crate::server::io_reason(&e),
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
            reason: one_line(&e.to_string()),
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
            let Some(kind) = ds.kind else {
                return Err(invalid(
                    &key("type"),
                    "missing (known types: sqlite3)".into(),
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
                    if file.as_os_str().is_empty() {
                        return Err(invalid(&key("file"), "is empty".into()));
                    }
                    let file = match base {
                        Some(base) if file.is_relative() => base.join(file),
                        _ => file,
                    };
                    DataSourceKind::Sqlite3 { file }
                }
                other => {
                    return Err(invalid(
                        &key("type"),
                        format!("unknown type {other:?} (known types: sqlite3)"),
                    ));
                }
            };
            datasources.push(DataSourceConfig { kind });
        }

        Ok(Config {
            listen,
            tcp: TcpConfig {
                idle_timeout: Duration::from_secs(idle),
                max_connections: max_conn,
            },
            chaos,
            datasources,
        })
    }

    /// Opens every data source, in order, into the list the query processor searches.
    ///
    /// Errors: the first source that fails to open; the message names its file.
    pub fn open_sources(&self) -> Result<SourceList, authd_datasrc::DataSourceError> {
        let mut sources = Vec::with_capacity(self.datasources.len());
        for ds in &self.datasources {
            sources.push(ds.open()?);
        }
        Ok(SourceList::new(sources))
    }

    /// The socket-level settings for [`crate::server`].
    pub fn server_settings(&self) -> ServerSettings {
        ServerSettings {
            listen: self.listen.clone(),
            tcp_idle_timeout: self.tcp.idle_timeout,
            tcp_max_connections: self.tcp.max_connections,
            ..ServerSettings::default()
        }
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

/// Folds a possibly multi-line parser message into one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
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
        let s = c.server_settings();
        assert_eq!(s.listen, c.listen);
        assert_eq!(s.tcp_idle_timeout, Duration::from_secs(3));
        assert_eq!(s.tcp_max_connections, 7);
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
            ("[[datasource]]\nfile = \"a\"", "datasource[0].type"),
            ("[[datasource]]\ntype = \"sqlite3\"", "datasource[0].file"),
            (
                "[[datasource]]\ntype = \"bdb\"\nfile = \"a\"",
                "datasource[0].type",
            ),
            ("listen = 53", "listen"),
            ("this is not toml", "authd.toml"),
        ] {
            let e = from_toml(text).expect_err(text).to_string();
            assert!(e.contains(key), "{text:?}: {e}");
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
        assert_eq!(c.datasources.len(), 1);
        let DataSourceKind::Sqlite3 { file } = &c.datasources[0].kind;
        assert!(file.is_absolute(), "{}", file.display());
        assert!(!c.listen.is_empty());
    }
}
