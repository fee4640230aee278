//! The `[[catalog]]` section: catalog zones authd produces, and the groups
//! a consumer maps members to.
//!
//! ```toml
//! [[catalog]]
//! origin = "catalog.example."   # the catalog zone authd keeps (RFC 9432 version 2)
//! file = "zones.sqlite3"        # its members: every other zone of this DB, which serves it
//!
//! [[catalog.group]]             # a consumer's members with `group` "signed" (RFC 9432 §4.4.2)
//! name = "signed"
//! primaries = ["192.0.2.7:853 tls ns1.example.net"]   # any [[secondary]] key but zone/catalog
//! file = "signed.sqlite3"
//! ```
//! TOML puts a `[[catalog.group]]` written after a `[[catalog]]` into that
//! table, and makes `catalog` one table when there is no `[[catalog]]`: both
//! forms are read, and every group applies to the members of every catalog
//! consumed.

use std::path::PathBuf;

use authd_datasrc::Name;
use serde::Deserialize;

use crate::secondary::PrimaryConfig;
use crate::settings::{
    Context, Invalid, Kind, Schema, Section, parse_origin, string_or_list, whole,
};

/// One `[[catalog]]`: a catalog zone authd produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerConfig {
    /// The catalog zone's apex.
    pub origin: Name,
    /// The DB whose other zones are its members, and that keeps it.
    pub file: PathBuf,
}

/// One `[[catalog.group]]`: settings for the members of consumed catalogs
/// whose `group` property (RFC 9432 §4.4.2) is `name`; each `None` key is
/// the catalog's `[[secondary]]` setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// The group name.
    pub name: String,
    /// The members' primaries.
    pub primaries: Option<Vec<PrimaryConfig>>,
    /// The DB the members are written to and served from.
    pub file: Option<PathBuf>,
    /// Served from memory.
    pub memory: Option<bool>,
    /// Refresh bounds, seconds.
    pub min_refresh: Option<u32>,
    /// Refresh bounds, seconds.
    pub max_refresh: Option<u32>,
}

/// The `catalog` section: producers and consumer groups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatalogConfig {
    /// `[[catalog]]`: the catalog zones produced.
    pub producers: Vec<ProducerConfig>,
    /// `[[catalog.group]]`: member settings by group name.
    pub groups: Vec<GroupConfig>,
}

impl CatalogConfig {
    /// The group named `name`.
    pub fn group(&self, name: &str) -> Option<&GroupConfig> {
        self.groups.iter().find(|g| g.name == name)
    }
}

/// One `[[catalog.group]]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGroup {
    name: Option<String>,
    #[serde(default, deserialize_with = "string_or_list")]
    primaries: Option<Vec<String>>,
    file: Option<PathBuf>,
    memory: Option<bool>,
    #[serde(default, deserialize_with = "whole")]
    min_refresh: Option<u32>,
    #[serde(default, deserialize_with = "whole")]
    max_refresh: Option<u32>,
}

/// One `[[catalog]]` table as written (or the one `[catalog]` table).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCatalog {
    origin: Option<String>,
    file: Option<PathBuf>,
    group: Option<Vec<RawGroup>>,
}

/// The `catalog` key as written: `[[catalog]]` tables, or one table (only
/// `[[catalog.group]]`s written).
#[derive(Debug)]
pub enum RawCatalogs {
    /// `[[catalog]]`.
    Many(Vec<RawCatalog>),
    /// `[catalog]` (or `[[catalog.group]]` alone).
    One(RawCatalog),
}

// By hand, not `untagged`: serde's own error for a table then names the
// unknown key and the keys it takes.
impl<'de> Deserialize<'de> for RawCatalogs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RawCatalogs, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = RawCatalogs;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("[[catalog]] tables or one [catalog] table")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> Result<RawCatalogs, A::Error> {
                Vec::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
                    .map(RawCatalogs::Many)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RawCatalogs, A::Error> {
                RawCatalog::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RawCatalogs::One)
            }
        }
        d.deserialize_any(Visit)
    }
}

impl Default for RawCatalogs {
    fn default() -> RawCatalogs {
        RawCatalogs::Many(Vec::new())
    }
}

const GROUP_KEYS: &[(&str, Kind)] = &[
    ("name", Kind::Text),
    ("primaries", Kind::List),
    ("file", Kind::Text),
    ("memory", Kind::Bool),
    ("min_refresh", Kind::Whole),
    ("max_refresh", Kind::Whole),
];

impl Section for RawCatalogs {
    type Value = CatalogConfig;

    const SCHEMA: Schema = &[
        (
            "catalog[]",
            &[
                ("origin", Kind::Text),
                ("file", Kind::Text),
                ("group", Kind::Tables),
            ],
        ),
        ("catalog[].group[]", GROUP_KEYS),
        (
            "catalog",
            &[
                ("origin", Kind::Text),
                ("file", Kind::Text),
                ("group", Kind::Tables),
            ],
        ),
        ("catalog.group[]", GROUP_KEYS),
    ];

    /// Each producer with an origin and a file (relative to the file's
    /// folder), origins unique; each group with a unique name, primaries
    /// parsed as `[[secondary]]`'s, refresh bounds ordered.
    fn check(self, cx: &Context<'_>) -> Result<CatalogConfig, Invalid> {
        let tables = match self {
            RawCatalogs::Many(v) => v,
            RawCatalogs::One(t) => vec![t],
        };
        let mut out = CatalogConfig::default();
        for (i, t) in tables.into_iter().enumerate() {
            let at = |k: &str| format!("catalog[{i}].{k}");
            match (t.origin, t.file) {
                (None, None) => {}
                (None, Some(_)) => return Err(Invalid::new(at("origin"), "missing")),
                (Some(_), None) => return Err(Invalid::new(at("file"), "missing")),
                (Some(origin), Some(file)) => {
                    let origin =
                        parse_origin(&origin).map_err(|r| Invalid::new(at("origin"), r))?;
                    if out.producers.iter().any(|p| p.origin == origin) {
                        return Err(Invalid::new(
                            at("origin"),
                            format!("catalog zone {origin} is listed twice in [[catalog]]"),
                        ));
                    }
                    if file.as_os_str().is_empty() {
                        return Err(Invalid::new(at("file"), "is empty"));
                    }
                    out.producers.push(ProducerConfig {
                        origin,
                        file: cx.resolve(file),
                    });
                }
            }
            for g in t.group.unwrap_or_default() {
                let gi = out.groups.len();
                let at = |k: &str| format!("catalog.group[{gi}].{k}");
                let name = match g.name {
                    Some(n) if !n.is_empty() => n,
                    _ => return Err(Invalid::new(at("name"), "missing")),
                };
                if out.group(&name).is_some() {
                    return Err(Invalid::new(
                        at("name"),
                        format!("group {name:?} is listed twice in [[catalog.group]]"),
                    ));
                }
                let primaries = match g.primaries {
                    None => None,
                    Some(list) if list.is_empty() => {
                        return Err(Invalid::new(
                            at("primaries"),
                            "must name at least one primary, or be left out",
                        ));
                    }
                    Some(list) => Some(
                        list.iter()
                            .enumerate()
                            .map(|(k, p)| {
                                PrimaryConfig::parse(&at(&format!("primaries[{k}]")), p, cx)
                            })
                            .collect::<Result<Vec<_>, _>>()?,
                    ),
                };
                let file = match g.file {
                    Some(f) if f.as_os_str().is_empty() => {
                        return Err(Invalid::new(at("file"), "is empty"));
                    }
                    f => f.map(|f| cx.resolve(f)),
                };
                if let (Some(lo), Some(hi)) = (g.min_refresh, g.max_refresh)
                    && (lo == 0 || lo > hi)
                {
                    return Err(Invalid::new(
                        at("min_refresh"),
                        format!("{lo} must be at least 1 and at most max_refresh ({hi})"),
                    ));
                }
                out.groups.push(GroupConfig {
                    name,
                    primaries,
                    file,
                    memory: g.memory,
                    min_refresh: g.min_refresh,
                    max_refresh: g.max_refresh,
                });
            }
        }
        Ok(out)
    }
}
