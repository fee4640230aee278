//! The vocabulary a configuration section is written in: the [`Section`]
//! trait a feature implements for its table of the file, the [`Kind`]s its
//! keys take, the [`Context`] its checks are given and the [`Invalid`] they
//! return, and the serde helpers its raw shape uses.
//!
//! A leaf (std, serde, `authd-datasrc`'s [`Name`] and [`crate::acl`] only): each feature file (`rrl.rs`, `xfr.rs`, …) owns its
//! section by implementing [`Section`] here, and [`crate::config`] composes
//! the sections, so no feature imports the configuration.

use std::fmt;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use authd_datasrc::Name;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::acl::{Acl, AclEntry};

/// One section of the configuration file (`[rrl]`, `[[secondary]]`),
/// implemented by its raw shape: what serde reads (every key optional,
/// unknown keys rejected), and how it becomes the typed value.
pub trait Section: DeserializeOwned + Default {
    /// The typed, checked settings ([`crate::rrl::RrlConfig`]). Its
    /// `Default` is what an absent section means.
    type Value;

    /// The section's tables, each with its keys and the kind of value each
    /// takes, by full path: `transfer`, then `transfer.zone[]` for the
    /// `[[transfer.zone]]` tables in it (`[]` marks an array of tables).
    /// The first path is the section's own.
    const SCHEMA: Schema;

    /// The typed value of the section as written. Messages name the key
    /// (`rrl.slip`, `secondary[0].zone`) and fit one line.
    ///
    /// Errors: the first value that is not acceptable.
    fn check(self, cx: &Context<'_>) -> Result<Self::Value, Invalid>;
}

/// Tables of a section and their keys: see [`Section::SCHEMA`].
pub type Schema = &'static [(&'static str, &'static [(&'static str, Kind)])];

/// The kind of value a key takes, checked against the file's TOML before
/// serde reads it (values from `AUTHD_*` variables are text, converted by
/// the raw shapes' helpers: [`whole`], [`string_or_list`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An integer ([`whole`]).
    Whole,
    /// `true` or `false`.
    Bool,
    /// A string.
    Text,
    /// A list of strings, or one string of comma-separated items ([`string_or_list`]).
    List,
    /// A table: its keys are in the schema, under the key's path.
    Table,
    /// An array of tables (`[[name]]`): under the key's path with `[]`.
    Tables,
    /// Data-source `zones`: a list of origins or `{ origin, file }` tables.
    Zones,
    /// `cache.slots`: a count or `"unlimited"`.
    Slots,
}

impl Kind {
    /// What the kind is called in a message: "a whole number".
    pub fn expected(self) -> &'static str {
        match self {
            Kind::Whole => "a whole number",
            Kind::Bool => "true or false",
            Kind::Text => "a string",
            Kind::List => "a string or a list of strings",
            Kind::Table => "a table",
            Kind::Tables => "a list of tables",
            Kind::Zones => "a list of zone origins or { origin = ..., file = ... } tables",
            Kind::Slots => "a slot count (a whole number, 0 = off) or \"unlimited\"",
        }
    }
}

/// A value of the right type that is not acceptable: the key it was given
/// to and why. The configuration adds the file (or variable) to blame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The key, e.g. `tcp.idle_timeout` or `secondary[0].primaries[1]`.
    pub key: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Invalid {
    /// `key`'s value is wrong because of `reason`.
    pub fn new(key: impl Into<String>, reason: impl Into<String>) -> Invalid {
        Invalid {
            key: key.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.reason)
    }
}

/// What a section's check may look at besides its own keys.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context<'a> {
    /// The configuration file's folder, against which relative paths are
    /// resolved (`None`: the working directory).
    pub base: Option<&'a Path>,
    /// The names of the `[[key]]`s, which ACL entries and targets may name.
    pub keys: &'a [Name],
}

impl Context<'_> {
    /// `path` made relative to the configuration file's folder.
    pub fn resolve(&self, path: PathBuf) -> PathBuf {
        match self.base {
            Some(base) if path.is_relative() => base.join(path),
            _ => path,
        }
    }

    /// `path` resolved, or `None` when unset or empty (the feature is off).
    pub fn optional_path(&self, path: Option<PathBuf>) -> Option<PathBuf> {
        path.filter(|p| !p.as_os_str().is_empty())
            .map(|p| self.resolve(p))
    }

    /// Checks that `name` (given at `key`) is a defined `[[key]]`.
    ///
    /// Errors: no `[[key]]` has that name.
    pub fn known_key(&self, key: &str, name: &Name) -> Result<(), Invalid> {
        if self.keys.contains(name) {
            return Ok(());
        }
        Err(Invalid::new(
            key,
            format!("no [[key]] named {name} is defined"),
        ))
    }

    /// The ACL `list` given at `key` (`transfer.allow`): every entry parsed
    /// ([`AclEntry`]), every key it names defined.
    ///
    /// Errors: the first entry that does not parse or names an unknown key.
    pub fn acl(&self, key: &str, list: Option<Vec<String>>) -> Result<Acl, Invalid> {
        let mut entries = Vec::new();
        for (i, text) in list.unwrap_or_default().iter().enumerate() {
            let at = format!("{key}[{i}]");
            let entry: AclEntry = text.parse().map_err(|r| Invalid::new(&at, r))?;
            if let Some(name) = &entry.key {
                self.known_key(&at, name)?;
            }
            entries.push(entry);
        }
        Ok(Acl::new(entries))
    }
}

/// `value` (or `default` when unset) of key `key`, which must lie in
/// `range`; `unit` follows the range in the message (`" seconds"`).
///
/// Errors: a value outside the range.
pub fn in_range<T>(
    key: &str,
    value: Option<T>,
    default: T,
    range: RangeInclusive<T>,
    unit: &str,
) -> Result<T, Invalid>
where
    T: PartialOrd + fmt::Display + Copy,
{
    let v = value.unwrap_or(default);
    if !range.contains(&v) {
        return Err(Invalid::new(
            key,
            format!(
                "{v} is out of range ({}..={}{unit})",
                range.start(),
                range.end()
            ),
        ));
    }
    Ok(v)
}

/// Parses `ADDR:PORT` (`127.0.0.1:53`, `[::1]:53`).
///
/// Errors: a text that is not an IP address with a port (host names are not
/// resolved), as a message.
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

/// The zone origin of the table at `table` (`transfer.zone[0]`), its key
/// `origin`.
///
/// Errors: missing or malformed, naming `TABLE.origin`.
pub fn zone_origin(table: &str, origin: Option<String>) -> Result<Name, Invalid> {
    let key = format!("{table}.origin");
    let Some(text) = origin else {
        return Err(Invalid::new(key, "missing"));
    };
    parse_origin(&text).map_err(|r| Invalid::new(key, r))
}

/// Serde helper for a [`Kind::List`] key: a TOML list of strings, or one
/// comma-separated string (what an `AUTHD_*` variable gives).
///
/// Errors: any other value.
pub fn string_or_list<'de, D>(d: D) -> Result<Option<Vec<String>>, D::Error>
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

/// Serde helper for a [`Kind::Whole`] key of type `T`: an integer, or (from
/// the environment) its decimal text. A fraction (`1.5`) is an error, not
/// rounded.
///
/// Errors: a negative, fractional, too large or non-numeric value.
pub fn whole<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
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
