//! Reading the configuration as written: the TOML text and the `AUTHD_*`
//! variables, walked against every section's schema (unknown keys, values
//! of the wrong type, both with where they were set) before the `config`
//! crate deserializes them into [`RawConfig`]; and the raw shapes of the
//! sections the composer owns (`[server]`, `[[datasource]]`, `[control]`).
//!
//! Only types are checked here; [`super::validate`] checks values.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::{ConfigError, ENV_PREFIX, RawConfig, SCHEMAS};
use crate::settings::{Kind, string_or_list, whole};

/// Reads TOML `text` (if any) overridden by `env` (variable name → value;
/// `None` reads the process environment). `origin` names the file (or
/// "environment") in errors.
///
/// Errors: [`ConfigError::Unknown`] (keys no table takes),
/// [`ConfigError::Type`] (a value of the wrong type in the file, with its
/// line), [`ConfigError::Parse`] (bad TOML, a bad variable value), on one
/// line that names the key, or the line of a TOML error.
pub(super) fn read(
    text: Option<&str>,
    env: Option<HashMap<String, String>>,
    origin: &str,
) -> Result<RawConfig, ConfigError> {
    let env = match env {
        Some(env) => env,
        None => std::env::vars().collect(),
    };
    let walk = text.map(Walk::of).unwrap_or_default();
    let mut unknown = walk.unknown;
    unknown.extend(unknown_variables(&env));
    // The hint for a top-level key that TOML put into the table above it.
    let misplaced = walk.misplaced.map(|m| format!("; {m}")).unwrap_or_default();
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
            let hint = did_you_mean(var)
                .map(|v| {
                    format!(
                        "; did you mean {v}? (a double underscore separates a section from its key)"
                    )
                })
                .unwrap_or_default();
            return Err(ConfigError::Unknown(format!(
                "unknown setting {var} (from the environment): {table} has no key {leaf}{hint}"
            )));
        }
        _ => {
            let list = unknown
                .iter()
                .map(|(key, source)| match source {
                    Source::File => format!("{key} (file {origin})"),
                    Source::Env(var) => match did_you_mean(var) {
                        Some(v) => format!("{key} ({var}; did you mean {v}?)"),
                        None => format!("{key} ({var})"),
                    },
                })
                .collect::<Vec<_>>()
                .join(", ");
            return Err(ConfigError::Unknown(format!(
                "unknown keys: {list}{misplaced}"
            )));
        }
    }
    if let Some(wrong) = walk.wrong {
        return Err(ConfigError::Type {
            origin: origin.to_string(),
            line: wrong.line,
            key: wrong.key,
            expected: wrong.expected.to_string(),
            found: wrong.found,
        });
    }
    let parse = |e: config::ConfigError| ConfigError::Parse {
        origin: origin.to_string(),
        reason: {
            let message = dotted_paths(&one_line(&e.to_string()));
            let message = match text.and_then(toml_error_line) {
                Some((line, text)) if !message.contains("at line") => {
                    format!("line {line}: {message} (`{text}`)")
                }
                _ => format!("{message}{misplaced}"),
            };
            // A TOML error quotes its line, which may hold a TSIG secret.
            text.map_or_else(|| message.clone(), |t| redact_secrets(t, &message))
        },
    };
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

/// The kind of value key `key` of the table at schema path `path` takes
/// (`""` is the top level; an array of tables is written `name[]`), or
/// `None` when that table has no such key. Every section's
/// [`crate::settings::Section::SCHEMA`] is searched; the top level takes
/// `listen` and each section's name.
fn kind_of(path: &str, key: &str) -> Option<Kind> {
    if path.is_empty() {
        if key == "listen" {
            return Some(Kind::List);
        }
        return SCHEMAS.iter().find_map(|schema| {
            let (own, _) = schema.first()?;
            match own.strip_suffix("[]") {
                Some(name) => (name == key).then_some(Kind::Tables),
                None => (*own == key).then_some(Kind::Table),
            }
        });
    }
    SCHEMAS
        .iter()
        .flat_map(|schema| schema.iter())
        .find(|(p, _)| *p == path)
        .and_then(|(_, keys)| keys.iter().find(|(k, _)| *k == key))
        .map(|(_, kind)| *kind)
}

/// True when some section's schema has a table at path `path`.
fn has_table(path: &str) -> bool {
    SCHEMAS
        .iter()
        .flat_map(|schema| schema.iter())
        .any(|(p, _)| *p == path)
}

/// Joins a table path and a key: `tcp` + `idle_timeout`.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The keys of the `AUTHD_*` variables in `env` that no table takes, as the
/// key's path (`tcp.idle_timout`) and the variable, by variable name.
fn unknown_variables(env: &HashMap<String, String>) -> Vec<(String, Source)> {
    let mut out = Vec::new();
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
            match kind_of(&schema, part) {
                None => {
                    out.push((join(&schema, part), Source::Env(var.clone())));
                    break;
                }
                Some(Kind::Table) => schema = join(&schema, part),
                // A value or an array of tables: serde's to judge.
                Some(_) => break,
            }
        }
    }
    out
}

/// For a variable with one underscore where two separate a section from its
/// key (`AUTHD_TCP_IDLE_TIMEOUT`), the variable meant
/// (`AUTHD_TCP__IDLE_TIMEOUT`).
fn did_you_mean(var: &str) -> Option<String> {
    let rest = var.get(ENV_PREFIX.len() + 1..)?.to_ascii_lowercase();
    rest.match_indices('_').find_map(|(i, _)| {
        let (section, key) = (&rest[..i], &rest[i + 1..]);
        (kind_of("", section) == Some(Kind::Table) && kind_of(section, key).is_some())
            .then(|| format!("{ENV_PREFIX}_{section}__{key}").to_ascii_uppercase())
    })
}

/// A value of the wrong type in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct WrongType {
    /// Its line (from 1).
    line: usize,
    /// Its key's path (`tcp.idle_timeout`, `datasource[0].zones`).
    key: String,
    /// What the key takes.
    expected: &'static str,
    /// What it was given.
    found: String,
}

/// What the walk of a file against the schema found.
#[derive(Debug, Default)]
struct Walk<'t> {
    /// The text walked.
    text: &'t str,
    /// Keys no table takes (`tcp.idle_timout`, `datasource[1].fil`), in key order.
    unknown: Vec<(String, Source)>,
    /// The first top-level key found inside a table, as a hint.
    misplaced: Option<String>,
    /// The value of the wrong type on the first line.
    wrong: Option<WrongType>,
}

impl<'t> Walk<'t> {
    /// Walks the file `text`; nothing when it is not valid TOML (the
    /// `config` crate then says where it stops).
    fn of(text: &'t str) -> Walk<'t> {
        let mut walk = Walk {
            text,
            ..Walk::default()
        };
        if let Ok(table) = DeTable::parse(text) {
            walk.table(table.get_ref(), "", "");
        }
        walk
    }

    /// The keys of `table` (schema path `schema`, shown as `shown`) and
    /// what is in them.
    fn table(&mut self, table: &DeTable<'_>, schema: &str, shown: &str) {
        for (key, value) in table {
            let key = key.get_ref().as_ref();
            match kind_of(schema, key) {
                Some(kind) => self.value(value, kind, &join(schema, key), &join(shown, key)),
                None => {
                    self.unknown.push((join(shown, key), Source::File));
                    if !schema.is_empty() && self.misplaced.is_none() && kind_of("", key).is_some()
                    {
                        let header = match schema.strip_suffix("[]") {
                            Some(name) => format!("[[{name}]]"),
                            None => format!("[{schema}]"),
                        };
                        self.misplaced = Some(format!(
                            "{key} is a top-level key, but TOML puts a key written after a \
                             {header} header into that table: move it above the first table"
                        ));
                    }
                }
            }
        }
    }

    /// Checks `value` (of a key of `kind`, at schema path `schema`, shown
    /// as `shown`) and walks the tables in it.
    fn value(&mut self, value: &Spanned<DeValue<'_>>, kind: Kind, schema: &str, shown: &str) {
        let tables = format!("{schema}[]");
        match (kind, value.get_ref()) {
            (Kind::Whole, DeValue::Integer(_))
            | (Kind::Bool, DeValue::Boolean(_))
            | (Kind::Text, DeValue::String(_))
            | (Kind::List, DeValue::String(_))
            | (Kind::Slots, DeValue::Integer(_) | DeValue::String(_)) => {}
            (Kind::List, DeValue::Array(items))
                if items
                    .iter()
                    .all(|i| matches!(i.get_ref(), DeValue::String(_))) => {}
            (Kind::Table, DeValue::Table(t)) => self.table(t, schema, shown),
            // A section that is an array of tables or one table (`catalog`:
            // `[[catalog.group]]` alone makes it a table).
            (Kind::Tables, DeValue::Table(t)) if has_table(schema) => self.table(t, schema, shown),
            (Kind::Tables, DeValue::Array(items))
                if items
                    .iter()
                    .all(|i| matches!(i.get_ref(), DeValue::Table(_))) =>
            {
                for (i, item) in items.iter().enumerate() {
                    if let DeValue::Table(t) = item.get_ref() {
                        self.table(t, &tables, &format!("{shown}[{i}]"));
                    }
                }
            }
            (Kind::Zones, DeValue::Array(items))
                if items
                    .iter()
                    .all(|i| matches!(i.get_ref(), DeValue::String(_) | DeValue::Table(_))) =>
            {
                for (i, item) in items.iter().enumerate() {
                    if let DeValue::Table(t) = item.get_ref() {
                        self.table(t, &tables, &format!("{shown}[{i}]"));
                    }
                }
            }
            (kind, found) => {
                let line = self.text[..value.span().start.min(self.text.len())]
                    .matches('\n')
                    .count()
                    + 1;
                if self.wrong.as_ref().is_none_or(|w| line < w.line) {
                    self.wrong = Some(WrongType {
                        line,
                        key: shown.to_string(),
                        expected: kind.expected(),
                        found: describe(kind, found),
                    });
                }
            }
        }
    }
}

/// What a message calls `value`, given to a key of `kind`: "an integer",
/// "a list holding an integer"; a string given for a number or a boolean
/// is quoted (it cannot be a secret), with how to write it.
fn describe(kind: Kind, value: &DeValue<'_>) -> String {
    match value {
        DeValue::String(s) if matches!(kind, Kind::Whole | Kind::Bool) => {
            let unquoted = match kind {
                Kind::Whole => s.trim().parse::<u64>().is_ok(),
                _ => matches!(s.as_ref(), "true" | "false"),
            };
            if unquoted {
                format!("the string {s:?} (write it without quotes)")
            } else {
                format!("the string {s:?}")
            }
        }
        DeValue::String(_) => "a string".into(),
        DeValue::Integer(_) => "an integer".into(),
        DeValue::Float(_) => "a fraction".into(),
        DeValue::Boolean(_) => "a boolean".into(),
        DeValue::Datetime(_) => "a date-time".into(),
        DeValue::Table(_) => "a table".into(),
        DeValue::Array(items) => {
            let odd = items.iter().map(|i| i.get_ref()).find(|i| match kind {
                Kind::Tables => !matches!(i, DeValue::Table(_)),
                Kind::Zones => !matches!(i, DeValue::String(_) | DeValue::Table(_)),
                _ => !matches!(i, DeValue::String(_)),
            });
            match odd {
                Some(item) => format!("a list holding {}", describe(Kind::Text, item)),
                None => "a list".into(),
            }
        }
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

/// `message` with the key path `config` names at its end written with
/// dots: ``for key `datasource[0].zones` `` where it says
/// ``datasource[0]zones``.
fn dotted_paths(message: &str) -> String {
    let Some((head, path)) = message.rsplit_once("for key `") else {
        return message.to_string();
    };
    let mut out = String::with_capacity(message.len() + 4);
    out.push_str(head);
    out.push_str("for key `");
    let mut after_index = false;
    for c in path.chars() {
        if after_index && (c.is_ascii_alphanumeric() || c == '_') {
            out.push('.');
        }
        after_index = c == ']';
        out.push(c);
    }
    out
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

/// `[server]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    #[serde(default, deserialize_with = "whole")]
    pub(super) udp_workers: Option<usize>,
    pub(super) nsid: Option<String>,
    #[serde(default, deserialize_with = "string_or_list")]
    pub(super) proxy_allow: Option<Vec<String>>,
}

/// `[control]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawControl {
    pub(super) socket: Option<PathBuf>,
}

/// One `[[datasource]]` table. Flat on purpose: an internally tagged enum
/// (`#[serde(tag = "type", deny_unknown_fields)]`) works with `config` 0.15
/// but gives less clear messages. A missing or unknown `type` no longer names
/// the known types, a key of the other type loses its hint, and keys inside
/// the table lose their path (`datasource[0]`, not `datasource[0].cache.slots`).
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every table of the configuration (schema path, its keys), the top
    /// level first.
    fn tables() -> Vec<(String, Vec<&'static str>)> {
        let mut top = vec!["listen"];
        top.extend(SCHEMAS.iter().filter_map(|s| {
            let (own, _) = s.first()?;
            Some(own.strip_suffix("[]").unwrap_or(own))
        }));
        let mut out = vec![(String::new(), top)];
        for (path, keys) in SCHEMAS.iter().flat_map(|s| s.iter()) {
            out.push((path.to_string(), keys.iter().map(|(k, _)| *k).collect()));
        }
        out
    }

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
        for (path, keys) in tables() {
            let text = with_stray_key(&path);
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
            let mut ours = keys.clone();
            serde_keys.sort_unstable();
            ours.sort_unstable();
            assert_eq!(ours, serde_keys, "{path}: {e}");
            // And the walk finds the stray key.
            let found = Walk::of(&text).unknown;
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
        let mut found = Walk::of(text).unknown;
        found.extend(unknown_variables(&env));
        let found: Vec<String> = found
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
    fn config_paths_get_their_dots() {
        assert_eq!(
            dotted_paths(
                "invalid type: string \"x.\", expected a sequence for key `datasource[0]zones`"
            ),
            "invalid type: string \"x.\", expected a sequence for key `datasource[0].zones`"
        );
        assert_eq!(
            dotted_paths("x for key `datasource[0]zones[1]`"),
            "x for key `datasource[0].zones[1]`"
        );
        assert_eq!(dotted_paths("no key here"), "no key here");
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
