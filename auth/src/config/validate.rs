//! Turning the raw shapes ([`super::raw`]) into typed values: ranges,
//! which keys each data-source `type` takes, zone origins, addresses, and
//! zones claimed twice. Every message names the offending key
//! (`datasource[0].file`) and fits one line.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use authd_datasrc::sqlite_admin::SerialPolicy;
use authd_datasrc::{Name, RType};

use crate::acl::{Acl, AclEntry, Cidr};
use crate::keys::{Algorithm, Key, Secret};
use crate::update::{Grant, GrantMatch, ZoneUpdate};

use super::raw::{
    RawConfig, RawCookies, RawDataSource, RawDnstap, RawKey, RawNotify, RawRrl, RawSecondary,
    RawSlots, RawTcp, RawTransfer, RawUpdate,
};
use super::{
    CacheConfig, ChaosConfig, Config, ConfigError, CookiesConfig, DEFAULT_MAX_REFRESH,
    DEFAULT_MIN_REFRESH, DEFAULT_TCP_IDLE_TIMEOUT_SECS, DEFAULT_TCP_MAX_CONNECTIONS,
    DataSourceConfig, DataSourceKind, MAX_TCP_IDLE_TIMEOUT_SECS, MAX_TCP_MAX_CONNECTIONS,
    MAX_UDP_WORKERS, MemoryZoneConfig, NotifyConfig, NotifyTarget, RrlConfig, SecondaryZone,
    ServerConfig, TcpConfig, TransferConfig, TransferZone, UpdateConfig, parse_listen,
    parse_origin, source_label,
};

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

    let nsid = match raw.server.nsid {
        Some(n) if n.len() > crate::edns::MAX_NSID_LEN => {
            return Err(invalid(
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

    let tcp = tcp_config(&raw.tcp, &invalid)?;

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
        datasources.push(datasource(i, ds, base, &invalid)?);
    }
    let keys = keys(raw.key, base, &invalid)?;

    let secondary = secondary_config(raw.secondary, &keys, base, &invalid)?;
    let mut config = Config {
        listen,
        server: ServerConfig { udp_workers, nsid },
        tcp,
        chaos,
        datasources,
        transfer: transfer_config(raw.transfer, &keys, &invalid)?,
        notify: notify_config(raw.notify, &keys, &invalid)?,
        update: update_config(raw.update, &keys, &invalid)?,
        keys,
        rrl: rrl_config(raw.rrl, &invalid)?,
        control_socket: match raw.control.socket {
            Some(p) if p.as_os_str().is_empty() => None,
            Some(p) => Some(match base {
                Some(base) if p.is_relative() => base.join(p),
                _ => p,
            }),
            None => None,
        },
        dnstap: dnstap_config(raw.dnstap, base, &invalid)?,
        metrics_listen: match raw.metrics.listen.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(a) => Some(parse_listen(a).map_err(|r| invalid("metrics.listen", r))?),
        },
        cookies: cookies_config(raw.cookies, &invalid)?,
        secondary,
    };
    config.datasources.extend(config.secondary_datasources());
    check_explicit_duplicates(&config.datasources)?;
    Ok(config)
}

/// `[[secondary]]`: each zone once, at least one primary (parsed as NOTIFY
/// targets are: `ADDR[:PORT] [key NAME]`), a DB file (relative to `base`),
/// refresh bounds with `min_refresh <= max_refresh`.
fn secondary_config(
    raw: Vec<RawSecondary>,
    keys: &[Key],
    base: Option<&Path>,
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<Vec<SecondaryZone>, ConfigError> {
    let mut out: Vec<SecondaryZone> = Vec::new();
    for (i, z) in raw.into_iter().enumerate() {
        let at = |k: &str| format!("secondary[{i}].{k}");
        let Some(text) = z.zone else {
            return Err(invalid(&at("zone"), "missing".into()));
        };
        let origin = parse_origin(&text).map_err(|r| invalid(&at("zone"), r))?;
        if out.iter().any(|s| s.origin == origin) {
            return Err(invalid(
                &at("zone"),
                format!("zone {origin} is listed twice in [[secondary]]"),
            ));
        }
        let list = z.primaries.unwrap_or_default();
        if list.is_empty() {
            return Err(invalid(
                &at("primaries"),
                "must name at least one primary (\"ADDR[:PORT] [key NAME]\")".into(),
            ));
        }
        let mut primaries = Vec::with_capacity(list.len());
        for (j, p) in list.iter().enumerate() {
            let key = at(&format!("primaries[{j}]"));
            let primary = parse_target(p).map_err(|r| invalid(&key, r))?;
            if let Some(name) = &primary.key {
                known_key(&key, name, keys, invalid)?;
            }
            primaries.push(primary);
        }
        let file = match z.file {
            None => return Err(invalid(&at("file"), "missing".into())),
            Some(f) if f.as_os_str().is_empty() => {
                return Err(invalid(&at("file"), "is empty".into()));
            }
            Some(f) => match base {
                Some(base) if f.is_relative() => base.join(f),
                _ => f,
            },
        };
        let min_refresh = z.min_refresh.unwrap_or(DEFAULT_MIN_REFRESH);
        let max_refresh = z.max_refresh.unwrap_or(DEFAULT_MAX_REFRESH);
        if min_refresh == 0 || min_refresh > max_refresh {
            return Err(invalid(
                &at("min_refresh"),
                format!("{min_refresh} must be at least 1 and at most max_refresh ({max_refresh})"),
            ));
        }
        out.push(SecondaryZone {
            origin,
            primaries,
            file,
            memory: z.memory.unwrap_or(false),
            min_refresh,
            max_refresh,
        });
    }
    Ok(out)
}

/// A whole number of key `key` in `range`, or `default` when unset.
fn in_range<T>(
    key: &str,
    value: Option<T>,
    default: T,
    range: std::ops::RangeInclusive<T>,
    unit: &str,
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<T, ConfigError>
where
    T: PartialOrd + std::fmt::Display + Copy,
{
    let v = value.unwrap_or(default);
    if !range.contains(&v) {
        return Err(invalid(
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

/// The typed form of `[tcp]`.
fn tcp_config(
    raw: &RawTcp,
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<TcpConfig, ConfigError> {
    let defaults = TcpConfig::default();
    let idle = in_range(
        "tcp.idle_timeout",
        raw.idle_timeout,
        DEFAULT_TCP_IDLE_TIMEOUT_SECS,
        1..=MAX_TCP_IDLE_TIMEOUT_SECS,
        " seconds",
        invalid,
    )?;
    let max_connections = in_range(
        "tcp.max_connections",
        raw.max_connections,
        DEFAULT_TCP_MAX_CONNECTIONS,
        1..=MAX_TCP_MAX_CONNECTIONS,
        "",
        invalid,
    )?;
    let max_connections_per_client = in_range(
        "tcp.max_connections_per_client",
        raw.max_connections_per_client,
        defaults.max_connections_per_client,
        1..=MAX_TCP_MAX_CONNECTIONS,
        "",
        invalid,
    )?;
    let first = in_range(
        "tcp.first_query_timeout",
        raw.first_query_timeout,
        defaults.first_query_timeout.as_secs(),
        1..=MAX_TCP_IDLE_TIMEOUT_SECS,
        " seconds",
        invalid,
    )?;
    Ok(TcpConfig {
        idle_timeout: Duration::from_secs(idle),
        max_connections,
        max_connections_per_client,
        first_query_timeout: Duration::from_secs(first),
    })
}

/// The typed form of `[dnstap]`: off unless `file` or `socket` is set (not
/// both); relative paths resolved against `base`; empty strings mean unset.
fn dnstap_config(
    raw: RawDnstap,
    base: Option<&Path>,
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<Option<crate::dnstap::Settings>, ConfigError> {
    use crate::dnstap::{Output, Settings};
    let path = |p: Option<PathBuf>| match p {
        Some(p) if p.as_os_str().is_empty() => None,
        Some(p) => Some(match base {
            Some(base) if p.is_relative() => base.join(p),
            _ => p,
        }),
        None => None,
    };
    let output = match (path(raw.file), path(raw.socket)) {
        (None, None) => {
            if raw.identity.is_some() || raw.version.is_some() {
                return Err(invalid(
                    "dnstap",
                    "identity or version set without file or socket".to_string(),
                ));
            }
            return Ok(None);
        }
        (Some(f), None) => Output::File(f),
        (None, Some(s)) => Output::Socket(s),
        (Some(_), Some(_)) => {
            return Err(invalid(
                "dnstap",
                "set file or socket, not both".to_string(),
            ));
        }
    };
    let text = |t: Option<String>| t.filter(|t| !t.is_empty());
    Ok(Some(Settings {
        output,
        identity: text(raw.identity),
        version: text(raw.version),
    }))
}

/// The typed form of `[rrl]`.
fn rrl_config(
    raw: RawRrl,
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<RrlConfig, ConfigError> {
    let d = RrlConfig::default();
    let s = d.settings;
    let mut exempt = Vec::new();
    for (i, a) in raw.exempt.unwrap_or_default().iter().enumerate() {
        exempt.push(
            a.parse::<Cidr>()
                .map_err(|r| invalid(&format!("rrl.exempt[{i}]"), r))?,
        );
    }
    let settings = crate::rrl::RrlSettings {
        responses_per_second: in_range(
            "rrl.responses_per_second",
            raw.responses_per_second,
            s.responses_per_second,
            1..=1_000_000,
            "",
            invalid,
        )?,
        slip: in_range("rrl.slip", raw.slip, s.slip, 0..=10, "", invalid)?,
        window: in_range(
            "rrl.window",
            raw.window,
            s.window,
            1..=3600,
            " seconds",
            invalid,
        )?,
        ipv4_prefix: in_range(
            "rrl.ipv4_prefix",
            raw.ipv4_prefix,
            s.ipv4_prefix,
            1..=32,
            " bits",
            invalid,
        )?,
        ipv6_prefix: in_range(
            "rrl.ipv6_prefix",
            raw.ipv6_prefix,
            s.ipv6_prefix,
            1..=128,
            " bits",
            invalid,
        )?,
        exempt,
        log_only: raw.log_only.unwrap_or(s.log_only),
        table_size: in_range(
            "rrl.table_size",
            raw.table_size,
            s.table_size,
            1..=64 << 20,
            " buckets",
            invalid,
        )?,
    };
    Ok(RrlConfig {
        enabled: raw.enabled.unwrap_or(d.enabled),
        settings,
    })
}

/// The typed form of `[cookies]`; the secret never appears in a message.
fn cookies_config(
    raw: RawCookies,
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<CookiesConfig, ConfigError> {
    let secret = match raw.secret.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(text) => {
            Some(crate::cookies::parse_secret(text).map_err(|r| invalid("cookies.secret", r))?)
        }
    };
    Ok(CookiesConfig {
        enabled: raw.enabled.unwrap_or(CookiesConfig::default().enabled),
        secret,
    })
}

/// The typed form of `[[datasource]]` number `i`.
fn datasource(
    i: usize,
    ds: RawDataSource,
    base: Option<&Path>,
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<DataSourceConfig, ConfigError> {
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
                        zones.push(zone_origin(&zkey, z.origin, invalid)?);
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
                let origin = zone_origin(&zkey, z.origin, invalid)?;
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

/// `[[key]]`: each key's name (unique), algorithm and secret, read from
/// `secret` or from the file `secret_file` (relative to `base`). No message
/// contains a secret.
fn keys(
    raw: Vec<RawKey>,
    base: Option<&Path>,
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<Vec<Key>, ConfigError> {
    let mut keys: Vec<Key> = Vec::with_capacity(raw.len());
    for (i, k) in raw.into_iter().enumerate() {
        let key = |field: &str| format!("key[{i}].{field}");
        let Some(text) = k.name else {
            return Err(invalid(&key("name"), "missing".into()));
        };
        let name = Name::parse(text.trim(), Some(&Name::root()))
            .map_err(|e| invalid(&key("name"), format!("bad key name {text:?}: {e}")))?;
        if let Some(j) = keys.iter().position(|k| k.name == name) {
            return Err(invalid(
                &key("name"),
                format!("key {name} is already defined by key[{j}]"),
            ));
        }
        let Some(algorithm) = k.algorithm else {
            return Err(invalid(
                &key("algorithm"),
                "missing (e.g. algorithm = \"hmac-sha256\")".into(),
            ));
        };
        let algorithm: Algorithm = algorithm
            .parse()
            .map_err(|r| invalid(&key("algorithm"), r))?;
        let secret = match (k.secret, k.secret_file) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    &key("secret"),
                    "give secret or secret_file, not both".into(),
                ));
            }
            (None, None) => {
                return Err(invalid(
                    &key("secret"),
                    "missing (give secret = \"base64\" or secret_file = \"path\")".into(),
                ));
            }
            (Some(text), None) => {
                Secret::from_base64(&text).map_err(|r| invalid(&key("secret"), r))?
            }
            (None, Some(file)) => {
                let path = match base {
                    Some(base) if file.is_relative() => base.join(file),
                    _ => file,
                };
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    invalid(
                        &key("secret_file"),
                        format!(
                            "cannot read {}: {}",
                            path.display(),
                            crate::sys::io_reason(&e)
                        ),
                    )
                })?;
                Secret::from_base64(&text)
                    .map_err(|r| invalid(&key("secret_file"), format!("{}: {r}", path.display())))?
            }
        };
        keys.push(Key {
            name,
            algorithm,
            secret,
        });
    }
    Ok(keys)
}

/// The ACL `list` of key `key` (`transfer.allow`): every entry parsed
/// ([`AclEntry`]), every key it names defined in `keys`.
fn acl(
    key: &str,
    list: Option<Vec<String>>,
    keys: &[Key],
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<Acl, ConfigError> {
    let mut entries = Vec::new();
    for (i, text) in list.unwrap_or_default().iter().enumerate() {
        let entry: AclEntry = text
            .parse()
            .map_err(|r| invalid(&format!("{key}[{i}]"), r))?;
        if let Some(name) = &entry.key {
            known_key(&format!("{key}[{i}]"), name, keys, invalid)?;
        }
        entries.push(entry);
    }
    Ok(Acl::new(entries))
}

/// Checks that `name` (used at `key`) is a defined `[[key]]`.
fn known_key(
    key: &str,
    name: &Name,
    keys: &[Key],
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    if keys.iter().any(|k| k.name == *name) {
        return Ok(());
    }
    Err(invalid(key, format!("no [[key]] named {name} is defined")))
}

/// `[transfer]`: the global `allow` list and the per-zone ones.
fn transfer_config(
    raw: RawTransfer,
    keys: &[Key],
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<TransferConfig, ConfigError> {
    let allow = acl("transfer.allow", raw.allow, keys, invalid)?;
    let mut zones: Vec<TransferZone> = Vec::new();
    for (i, z) in raw.zone.into_iter().enumerate() {
        let key = format!("transfer.zone[{i}]");
        let origin = zone_origin(&key, z.origin, invalid)?;
        if zones.iter().any(|t| t.origin == origin) {
            return Err(invalid(
                &format!("{key}.origin"),
                format!("zone {origin} is listed twice in [[transfer.zone]]"),
            ));
        }
        let Some(list) = z.allow else {
            return Err(invalid(
                &format!("{key}.allow"),
                "missing (an empty list [] refuses every transfer of the zone)".into(),
            ));
        };
        let allow = acl(&format!("{key}.allow"), Some(list), keys, invalid)?;
        zones.push(TransferZone { origin, allow });
    }
    Ok(TransferConfig { allow, zones })
}

/// The serial policy `text` of key `key` (`None` when unset).
fn serial_policy(
    key: &str,
    text: Option<String>,
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<Option<SerialPolicy>, ConfigError> {
    match text.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None => Ok(None),
        Some("increment") => Ok(Some(SerialPolicy::Increment)),
        Some("unixtime") => Ok(Some(SerialPolicy::UnixTime)),
        Some("dateserial") => Ok(Some(SerialPolicy::DateSerial)),
        Some(other) => Err(invalid(
            key,
            format!("{other:?} is not \"increment\", \"unixtime\" or \"dateserial\""),
        )),
    }
}

/// `[update]`: the global `allow` list, the serial policy, the grants and
/// the per-zone settings.
fn update_config(
    raw: RawUpdate,
    keys: &[Key],
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<UpdateConfig, ConfigError> {
    let allow = acl("update.allow", raw.allow, keys, invalid)?;
    let serial = serial_policy("update.serial", raw.serial, invalid)?.unwrap_or_default();
    let mut grants = Vec::new();
    for (i, g) in raw.grant.into_iter().enumerate() {
        let at = format!("update.grant[{i}]");
        let Some(key_text) = g.key else {
            return Err(invalid(&format!("{at}.key"), "missing".into()));
        };
        let key = Name::parse(&key_text, Some(&Name::root())).map_err(|e| {
            invalid(
                &format!("{at}.key"),
                format!("bad key name {key_text:?}: {e}"),
            )
        })?;
        known_key(&format!("{at}.key"), &key, keys, invalid)?;
        let kind = match g.kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
            Some("name") => GrantMatch::Name,
            Some("subdomain") => GrantMatch::Subdomain,
            Some("wildcard") => GrantMatch::Wildcard,
            None => return Err(invalid(&format!("{at}.match"), "missing".into())),
            Some(other) => {
                return Err(invalid(
                    &format!("{at}.match"),
                    format!("{other:?} is not \"name\", \"subdomain\" or \"wildcard\""),
                ));
            }
        };
        let Some(name_text) = g.name else {
            return Err(invalid(&format!("{at}.name"), "missing".into()));
        };
        let name = parse_origin(&name_text).map_err(|r| invalid(&format!("{at}.name"), r))?;
        if kind == GrantMatch::Wildcard && !name.is_wildcard() {
            return Err(invalid(
                &format!("{at}.name"),
                format!("{name} is not a wildcard (*.NAME) as match = \"wildcard\" needs"),
            ));
        }
        let mut types = Vec::new();
        for (j, t) in g.types.unwrap_or_default().iter().enumerate() {
            let rtype: RType = t
                .parse()
                .map_err(|e| invalid(&format!("{at}.types[{j}]"), format!("{t:?}: {e}")))?;
            if rtype.is_meta() {
                return Err(invalid(
                    &format!("{at}.types[{j}]"),
                    format!("{t:?} is not a data type"),
                ));
            }
            types.push(rtype);
        }
        grants.push(Grant {
            key,
            kind,
            name,
            types,
        });
    }
    let mut zones: Vec<ZoneUpdate> = Vec::new();
    for (i, z) in raw.zone.into_iter().enumerate() {
        let at = format!("update.zone[{i}]");
        let origin = zone_origin(&at, z.origin, invalid)?;
        if zones.iter().any(|u| u.origin == origin) {
            return Err(invalid(
                &format!("{at}.origin"),
                format!("zone {origin} is listed twice in [[update.zone]]"),
            ));
        }
        let allow = match z.allow {
            Some(list) => Some(acl(&format!("{at}.allow"), Some(list), keys, invalid)?),
            None => None,
        };
        zones.push(ZoneUpdate {
            origin,
            allow,
            dnssec: z.dnssec,
            serial: serial_policy(&format!("{at}.serial"), z.serial, invalid)?,
        });
    }
    Ok(UpdateConfig {
        allow,
        grants,
        zones,
        serial,
        dnssec: raw.dnssec.unwrap_or(false),
    })
}

/// Parses a NOTIFY target: `ADDR:PORT` or a bare address (port 53),
/// optionally followed by `key NAME`.
fn parse_target(s: &str) -> Result<NotifyTarget, String> {
    let words: Vec<&str> = s.split_whitespace().collect();
    let (addr, key) = match words[..] {
        [addr] => (addr, None),
        [addr, k, name] if k.eq_ignore_ascii_case("key") => (addr, Some(name)),
        _ => {
            return Err(format!(
                "{s:?} is not ADDR[:PORT] or \"ADDR[:PORT] key NAME\" (e.g. 127.0.0.1:5353, \"192.0.2.2 key transfer-key.\")"
            ));
        }
    };
    let addr = match addr.parse::<SocketAddr>() {
        Ok(a) => a,
        Err(_) => addr
            .parse::<std::net::IpAddr>()
            .map(|ip| SocketAddr::new(ip, 53))
            .map_err(|_| {
                format!("{s:?} is not ADDR:PORT or ADDR (e.g. 127.0.0.1:5353, [::1]:53)")
            })?,
    };
    let key = match key {
        Some(k) => Some(
            Name::parse(k, Some(&Name::root()))
                .map_err(|e| format!("{s:?}: bad key name {k:?}: {e}"))?,
        ),
        None => None,
    };
    Ok(NotifyTarget { addr, key })
}

/// `[notify]`: the global targets and the per-zone ones, each list without
/// duplicates, every key named defined.
fn notify_config(
    raw: RawNotify,
    keys: &[Key],
    invalid: &impl Fn(&str, String) -> ConfigError,
) -> Result<NotifyConfig, ConfigError> {
    let list = |key: &str, v: Option<Vec<String>>| -> Result<Vec<NotifyTarget>, ConfigError> {
        let mut out = Vec::new();
        for (i, t) in v.unwrap_or_default().iter().enumerate() {
            let at = format!("{key}[{i}]");
            let target = parse_target(t).map_err(|r| invalid(&at, r))?;
            if let Some(name) = &target.key {
                known_key(&at, name, keys, invalid)?;
            }
            if !out.contains(&target) {
                out.push(target);
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
    let allow = acl("notify.allow", raw.allow, keys, invalid)?;
    Ok(NotifyConfig {
        targets,
        zones,
        allow,
    })
}
