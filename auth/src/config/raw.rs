//! The configuration as written: serde shapes that mirror the file (every
//! key optional, unknown keys rejected), read from the TOML text and the
//! `AUTHD_*` variables by the `config` crate.
//!
//! Only types are checked here; [`super::validate`] checks values and turns
//! these shapes into the typed configuration.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};

use super::{ConfigError, ENV_PREFIX};

/// Reads TOML `text` (if any) overridden by `env` (variable name → value;
/// `None` reads the process environment). `origin` names the file (or
/// "environment") in errors.
///
/// Errors: [`ConfigError::Parse`] (bad TOML, unknown key, wrong type), on one
/// line that names the key, or the line of a TOML error.
pub(super) fn read(
    text: Option<&str>,
    env: Option<HashMap<String, String>>,
    origin: &str,
) -> Result<RawConfig, ConfigError> {
    let parse = |e: config::ConfigError| ConfigError::Parse {
        origin: origin.to_string(),
        reason: {
            let message = one_line(&e.to_string());
            let message = match text.and_then(toml_error_line) {
                Some((line, text)) if !message.contains("at line") => {
                    format!("line {line}: {message} (`{text}`)")
                }
                _ => message,
            };
            // A TOML error quotes its line, which may hold a TSIG secret.
            text.map_or_else(|| message.clone(), |t| redact_secrets(t, &message))
        },
    };
    let env = match env {
        Some(env) => env,
        None => std::env::vars().collect(),
    };
    let unknown = unknown_keys(text, &env);
    // One unknown key in the file: serde's message, which lists the keys
    // the table takes, says it best. Anything more is listed here, all at once.
    match unknown.as_slice() {
        [] => {}
        [(_, Source::File)] => {}
        [(key, Source::Env(var))] => {
            let (table, leaf) = match key.rsplit_once('.') {
                Some((table, leaf)) => (table.to_string(), leaf),
                None => ("the configuration".to_string(), key.as_str()),
            };
            return Err(ConfigError::Unknown(format!(
                "unknown setting {var} (from the environment): {table} has no key {leaf}"
            )));
        }
        _ => {
            let list = unknown
                .iter()
                .map(|(key, source)| match source {
                    Source::File => format!("{key} (file {origin})"),
                    Source::Env(var) => format!("{key} ({var})"),
                })
                .collect::<Vec<_>>()
                .join(", ");
            return Err(ConfigError::Unknown(format!("unknown keys: {list}")));
        }
    }
    let mut builder = config::Config::builder();
    if let Some(text) = text {
        builder = builder.add_source(config::File::from_str(text, config::FileFormat::Toml));
    }
    builder = builder.add_source(
        config::Environment::with_prefix(ENV_PREFIX)
            .prefix_separator("_")
            .separator("__")
            .source(Some(env)),
    );
    builder
        .build()
        .map_err(parse)?
        .try_deserialize()
        .map_err(parse)
}

/// Where an unknown key was set.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// The configuration file.
    File,
    /// This `AUTHD_*` variable.
    Env(String),
}

/// The tables of the configuration and the keys each takes (an array of
/// tables is written `name[]`). Must match the `Raw*` shapes below
/// (`schema_matches_the_serde_shapes` checks it).
const SCHEMA: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "listen",
            "server",
            "tcp",
            "chaos",
            "datasource",
            "transfer",
            "update",
            "notify",
            "rrl",
            "cookies",
            "key",
            "metrics",
            "control",
            "secondary",
            "dnstap",
        ],
    ),
    ("server", &["udp_workers", "nsid"]),
    ("dnstap", &["file", "socket", "identity", "version"]),
    (
        "tcp",
        &[
            "idle_timeout",
            "max_connections",
            "max_connections_per_client",
            "first_query_timeout",
        ],
    ),
    ("chaos", &["version", "hostname"]),
    ("datasource[]", &["type", "file", "zones", "db", "cache"]),
    ("datasource[].cache", &["enabled", "slots"]),
    ("datasource[].zones[]", &["origin", "file"]),
    ("transfer", &["allow", "zone"]),
    ("transfer.zone[]", &["origin", "allow"]),
    ("update", &["allow", "serial", "dnssec", "grant", "zone"]),
    ("update.grant[]", &["key", "match", "name", "types"]),
    ("update.zone[]", &["origin", "allow", "dnssec", "serial"]),
    ("notify", &["targets", "allow", "zone"]),
    ("notify.zone[]", &["origin", "targets"]),
    (
        "rrl",
        &[
            "enabled",
            "responses_per_second",
            "slip",
            "window",
            "ipv4_prefix",
            "ipv6_prefix",
            "exempt",
            "log_only",
            "table_size",
        ],
    ),
    ("cookies", &["enabled", "secret"]),
    ("key[]", &["name", "algorithm", "secret", "secret_file"]),
    ("metrics", &["listen"]),
    ("control", &["socket"]),
    (
        "secondary[]",
        &[
            "zone",
            "primaries",
            "file",
            "memory",
            "min_refresh",
            "max_refresh",
        ],
    ),
];

/// The keys table `path` (as in [`SCHEMA`]) takes, or `None` when it is
/// not a table of the configuration.
fn keys_of(path: &str) -> Option<&'static [&'static str]> {
    SCHEMA.iter().find(|(p, _)| *p == path).map(|(_, k)| *k)
}

/// Joins a table path and a key: `tcp` + `idle_timeout`.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Every key of the file `text` and of the `AUTHD_*` variables in `env`
/// that no table takes, as the key's path (`tcp.idle_timout`,
/// `datasource[1].fil`) and where it was set: the file's first (in key
/// order), then the variables' (by name). Values of the wrong type are left to serde.
fn unknown_keys(text: Option<&str>, env: &HashMap<String, String>) -> Vec<(String, Source)> {
    let mut out = Vec::new();
    if let Some(table) = text.and_then(|t| t.parse::<toml::Table>().ok()) {
        walk_table(&table, "", "", &mut out);
    }
    let prefix = format!("{ENV_PREFIX}_");
    let mut vars: Vec<&String> = env
        .keys()
        .filter(|k| k.to_ascii_uppercase().starts_with(&prefix))
        .collect();
    vars.sort();
    for var in vars {
        let rest = var[prefix.len()..].to_ascii_lowercase();
        let mut schema = String::new();
        for part in rest.split("__") {
            let Some(keys) = keys_of(&schema) else {
                break; // a value or an array of tables: serde's to judge
            };
            if !keys.contains(&part) {
                out.push((join(&schema, part), Source::Env(var.clone())));
                break;
            }
            schema = join(&schema, part);
        }
    }
    out
}

/// Adds the unknown keys of `table` (schema path `schema`, shown as `shown`)
/// and of the tables in it to `out`.
fn walk_table(table: &toml::Table, schema: &str, shown: &str, out: &mut Vec<(String, Source)>) {
    let Some(keys) = keys_of(schema) else {
        return;
    };
    for (key, value) in table {
        if !keys.contains(&key.as_str()) {
            out.push((join(shown, key), Source::File));
            continue;
        }
        walk_value(value, &join(schema, key), &join(shown, key), out);
    }
}

/// [`walk_table`] for any value: tables and the tables in arrays.
fn walk_value(value: &toml::Value, schema: &str, shown: &str, out: &mut Vec<(String, Source)>) {
    match value {
        toml::Value::Table(t) => walk_table(t, schema, shown, out),
        toml::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk_value(item, &format!("{schema}[]"), &format!("{shown}[{i}]"), out);
            }
        }
        _ => {}
    }
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

/// What a message shows instead of a secret.
const NOT_SHOWN: &str = "<secret not shown>";

/// `message` with every value given to a `secret` key in `text` (`secret =
/// "…"`, quoted or not, closed or not) replaced by [`NOT_SHOWN`], so no
/// error quoting a line of the file shows a TSIG secret.
fn redact_secrets(text: &str, message: &str) -> String {
    let mut out = message.to_string();
    for line in text.lines() {
        let mut rest = line;
        while let Some(i) = rest.find("secret") {
            rest = &rest[i + "secret".len()..];
            let Some(value) = rest.trim_start().strip_prefix('=') else {
                continue;
            };
            let value = value.trim_start();
            let end = match value.chars().next() {
                Some(q @ ('"' | '\'')) => value[1..].find(q).map_or(value.len(), |j| j + 2),
                _ => value
                    .find(|c: char| c.is_whitespace() || c == ',' || c == '}')
                    .unwrap_or(value.len()),
            };
            let value = &value[..end];
            let inner = value.trim_matches(|c| c == '"' || c == '\'');
            // Shorter texts are no secret (4 base64 characters make 1 byte)
            // and would blank out unrelated words.
            for v in [value, inner] {
                if v.len() >= 4 {
                    out = out.replace(v, NOT_SHOWN);
                }
            }
        }
    }
    out
}

/// Folds a possibly multi-line parser message into one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The configuration file as written: every key optional, unknown keys rejected.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default, deserialize_with = "string_or_list")]
    pub(super) listen: Option<Vec<String>>,
    #[serde(default)]
    pub(super) server: RawServer,
    #[serde(default)]
    pub(super) tcp: RawTcp,
    #[serde(default)]
    pub(super) chaos: RawChaos,
    #[serde(default)]
    pub(super) datasource: Vec<RawDataSource>,
    #[serde(default)]
    pub(super) transfer: RawTransfer,
    #[serde(default)]
    pub(super) update: RawUpdate,
    #[serde(default)]
    pub(super) notify: RawNotify,
    #[serde(default)]
    pub(super) rrl: RawRrl,
    #[serde(default)]
    pub(super) cookies: RawCookies,
    #[serde(default)]
    pub(super) key: Vec<RawKey>,
    #[serde(default)]
    pub(super) metrics: RawMetrics,
    #[serde(default)]
    pub(super) control: RawControl,
    #[serde(default)]
    pub(super) dnstap: RawDnstap,
    #[serde(default)]
    pub(super) secondary: Vec<RawSecondary>,
}

/// One `[[secondary]]` table: a zone followed from its primaries.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSecondary {
    pub(super) zone: Option<String>,
    #[serde(default, deserialize_with = "string_or_list")]
    pub(super) primaries: Option<Vec<String>>,
    pub(super) file: Option<PathBuf>,
    pub(super) memory: Option<bool>,
    #[serde(default, deserialize_with = "whole")]
    pub(super) min_refresh: Option<u32>,
    #[serde(default, deserialize_with = "whole")]
    pub(super) max_refresh: Option<u32>,
}

/// `[server]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    #[serde(default, deserialize_with = "whole")]
    pub(super) udp_workers: Option<usize>,
    pub(super) nsid: Option<String>,
}

/// `[tcp]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTcp {
    #[serde(default, deserialize_with = "whole")]
    pub(super) idle_timeout: Option<u64>,
    #[serde(default, deserialize_with = "whole")]
    pub(super) max_connections: Option<usize>,
    #[serde(default, deserialize_with = "whole")]
    pub(super) max_connections_per_client: Option<usize>,
    #[serde(default, deserialize_with = "whole")]
    pub(super) first_query_timeout: Option<u64>,
}

/// `[chaos]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawChaos {
    pub(super) version: Option<String>,
    pub(super) hostname: Option<String>,
}

/// One `[[datasource]]` table. Flat on purpose: an internally tagged enum
/// (`#[serde(tag = "type", deny_unknown_fields)]`) works with `config` 0.15
/// but gives less clear messages. A missing or unknown `type` no longer names
/// the known types, a key of the other type loses its hint, and keys inside
/// the table lose their path (`datasource[0]`, not `datasource[0]cache.slots`).
/// [`super::validate`] checks which keys each `type` takes instead.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDataSource {
    #[serde(rename = "type")]
    pub(super) kind: Option<String>,
    pub(super) file: Option<PathBuf>,
    pub(super) zones: Option<Vec<RawZone>>,
    pub(super) db: Option<PathBuf>,
    pub(super) cache: Option<RawCache>,
}

/// `cache = { enabled, slots }`; `slots` is a count or `"unlimited"`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCache {
    pub(super) enabled: Option<bool>,
    pub(super) slots: Option<RawSlots>,
}

/// A `cache.slots` value, checked in [`super::validate`].
#[derive(Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "a slot count (a whole number, 0 = off) or \"unlimited\""
)]
pub(super) enum RawSlots {
    Count(i64),
    Word(String),
}

/// One `zones` item: an origin string, or a table `{ origin, file }`.
#[derive(Debug, Default)]
pub(super) struct RawZone {
    pub(super) origin: Option<String>,
    pub(super) file: Option<PathBuf>,
}

impl<'de> Deserialize<'de> for RawZone {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RawZone, D::Error> {
        raw_zone(d)
    }
}

/// `[control]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawControl {
    pub(super) socket: Option<PathBuf>,
}

/// `[dnstap]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDnstap {
    pub(super) file: Option<PathBuf>,
    pub(super) socket: Option<PathBuf>,
    pub(super) identity: Option<String>,
    pub(super) version: Option<String>,
}

/// `[metrics]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetrics {
    pub(super) listen: Option<String>,
}

/// `[transfer]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTransfer {
    #[serde(default, deserialize_with = "string_or_list")]
    pub(super) allow: Option<Vec<String>>,
    #[serde(default)]
    pub(super) zone: Vec<RawTransferZone>,
}

/// One `[[transfer.zone]]` table: an `allow` list replacing the global one
/// for one zone.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTransferZone {
    pub(super) origin: Option<String>,
    #[serde(default, deserialize_with = "string_or_list")]
    pub(super) allow: Option<Vec<String>>,
}

/// `[update]` (dynamic updates, RFC 2136).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpdate {
    #[serde(default, deserialize_with = "string_or_list")]
    pub(super) allow: Option<Vec<String>>,
    pub(super) serial: Option<String>,
    pub(super) dnssec: Option<bool>,
    #[serde(default)]
    pub(super) grant: Vec<RawGrant>,
    #[serde(default)]
    pub(super) zone: Vec<RawUpdateZone>,
}

/// One `[[update.grant]]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGrant {
    pub(super) key: Option<String>,
    #[serde(rename = "match")]
    pub(super) kind: Option<String>,
    pub(super) name: Option<String>,
    #[serde(default, deserialize_with = "string_or_list")]
    pub(super) types: Option<Vec<String>>,
}

/// One `[[update.zone]]` table: settings replacing the global ones for one
/// zone.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpdateZone {
    pub(super) origin: Option<String>,
    #[serde(default, deserialize_with = "string_or_list")]
    pub(super) allow: Option<Vec<String>>,
    pub(super) dnssec: Option<bool>,
    pub(super) serial: Option<String>,
}

/// One `[[key]]` table (a TSIG key). Its `Debug` leaves the secret out.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKey {
    pub(super) name: Option<String>,
    pub(super) algorithm: Option<String>,
    pub(super) secret: Option<String>,
    pub(super) secret_file: Option<PathBuf>,
}

impl fmt::Debug for RawKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawKey")
            .field("name", &self.name)
            .field("algorithm", &self.algorithm)
            .field("secret", &self.secret.as_ref().map(|_| "<not shown>"))
            .field("secret_file", &self.secret_file)
            .finish()
    }
}

/// `[notify]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNotify {
    #[serde(default, deserialize_with = "string_or_list")]
    pub(super) targets: Option<Vec<String>>,
    #[serde(default, deserialize_with = "string_or_list")]
    pub(super) allow: Option<Vec<String>>,
    #[serde(default)]
    pub(super) zone: Vec<RawNotifyZone>,
}

/// `[rrl]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRrl {
    pub(super) enabled: Option<bool>,
    #[serde(default, deserialize_with = "whole")]
    pub(super) responses_per_second: Option<u32>,
    #[serde(default, deserialize_with = "whole")]
    pub(super) slip: Option<u32>,
    #[serde(default, deserialize_with = "whole")]
    pub(super) window: Option<u32>,
    #[serde(default, deserialize_with = "whole")]
    pub(super) ipv4_prefix: Option<u8>,
    #[serde(default, deserialize_with = "whole")]
    pub(super) ipv6_prefix: Option<u8>,
    #[serde(default, deserialize_with = "string_or_list")]
    pub(super) exempt: Option<Vec<String>>,
    pub(super) log_only: Option<bool>,
    #[serde(default, deserialize_with = "whole")]
    pub(super) table_size: Option<usize>,
}

/// `[cookies]`.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCookies {
    pub(super) enabled: Option<bool>,
    pub(super) secret: Option<String>,
}

impl fmt::Debug for RawCookies {
    /// Never shows the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawCookies")
            .field("enabled", &self.enabled)
            .field("secret", &self.secret.as_ref().map(|_| "(set)"))
            .finish()
    }
}

/// One `[[notify.zone]]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNotifyZone {
    pub(super) origin: Option<String>,
    #[serde(default, deserialize_with = "string_or_list")]
    pub(super) targets: Option<Vec<String>>,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A TOML document with `zzz = 1` in the table at schema path `path`.
    fn with_stray_key(path: &str) -> String {
        let mut value = toml::Value::Table(toml::Table::from_iter([(
            "zzz".to_string(),
            toml::Value::Integer(1),
        )]));
        for part in path.split('.').filter(|p| !p.is_empty()).rev() {
            let (name, array) = match part.strip_suffix("[]") {
                Some(name) => (name, true),
                None => (part, false),
            };
            if array {
                value = toml::Value::Array(vec![value]);
            }
            value = toml::Value::Table(toml::Table::from_iter([(name.to_string(), value)]));
        }
        toml::to_string(&value).expect("serializable")
    }

    #[test]
    fn schema_matches_the_serde_shapes() {
        for (path, keys) in SCHEMA {
            let text = with_stray_key(path);
            let e = config::Config::builder()
                .add_source(config::File::from_str(&text, config::FileFormat::Toml))
                .build()
                .expect("toml")
                .try_deserialize::<RawConfig>()
                .expect_err("zzz is unknown")
                .to_string();
            let expected = e
                .split_once("expected one of ")
                .or_else(|| e.split_once("expected "))
                .map(|(_, rest)| rest.split(" for key").next().unwrap_or(rest))
                .unwrap_or_else(|| panic!("{path}: {e}"));
            // `a`, `b`, or `c` / `a` or `b` / `a`: every other piece.
            let mut serde_keys: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
            let mut ours = keys.to_vec();
            serde_keys.sort_unstable();
            ours.sort_unstable();
            assert_eq!(ours, serde_keys, "{path}: {e}");
            // And the walk finds the stray key.
            let found = unknown_keys(Some(&text), &HashMap::new());
            assert_eq!(found.len(), 1, "{path}: {found:?}");
            assert!(found[0].0.ends_with("zzz"), "{path}: {found:?}");
        }
    }

    #[test]
    fn unknown_keys_are_all_found() {
        let text = "[server]\nlistne = 1\n[[datasource]]\ntype = \"memory\"\n\
                    [[datasource]]\nfil = \"x\"\nzones = [\"a.\", { origin = \"b.\", flie = \"b\" }]\n";
        let env = HashMap::from([
            ("AUTHD_TCP__IDLE_TIMOUT".to_string(), "5".to_string()),
            ("AUTHD_TCP__IDLE_TIMEOUT".to_string(), "5".to_string()),
            ("AUTHD_LISTN".to_string(), "x".to_string()),
            ("PATH".to_string(), "/bin".to_string()),
        ]);
        let found: Vec<String> = unknown_keys(Some(text), &env)
            .into_iter()
            .map(|(k, s)| match s {
                Source::File => format!("{k} file"),
                Source::Env(v) => format!("{k} {v}"),
            })
            .collect();
        assert_eq!(
            found,
            [
                "datasource[1].fil file",
                "datasource[1].zones[1].flie file",
                "server.listne file",
                "listn AUTHD_LISTN",
                "tcp.idle_timout AUTHD_TCP__IDLE_TIMOUT",
            ]
        );
    }

    #[test]
    fn secrets_are_taken_out_of_messages() {
        let text = "[[key]]\nsecret = \"c2VjcmV0IQ==\" x\nkeys = [{ secret = abcdefgh, n = 1 }]\n\
                    secret='unclosed-secret\n";
        let m = "line 2 | secret = \"c2VjcmV0IQ==\" x | abcdefgh | 'unclosed-secret";
        assert_eq!(
            redact_secrets(text, m),
            "line 2 | secret = <secret not shown> x | <secret not shown> | <secret not shown>"
        );
        assert_eq!(redact_secrets("secret = \"ab\"", "ab cd"), "ab cd");
    }
}
