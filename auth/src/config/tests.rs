use super::*;
// Test-only: config itself never imports server.
use crate::server::ServerSettings;

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
    let s = ServerSettings::from(&c);
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
    assert_eq!(ServerSettings::from(&c).udp_workers, c.server.udp_workers);
    let c = from_toml("[server]\nudp_workers = 3").expect("valid");
    assert_eq!(c.server.udp_workers, 3);
    assert_eq!(ServerSettings::from(&c).udp_workers, 3);
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

/// `[server] nsid`: text sent as its bytes; unset or "" none; at most 128
/// bytes; from the environment too.
#[test]
fn server_nsid() {
    assert_eq!(from_toml("").expect("valid").server.nsid, None);
    assert_eq!(
        from_toml("[server]\nnsid = \"\"")
            .expect("valid")
            .server
            .nsid,
        None
    );
    let c = from_toml("[server]\nnsid = \"ns1.example\"").expect("valid");
    assert_eq!(c.server.nsid.as_deref(), Some("ns1.example"));
    let c = Config::from_parts(None, env(&[("AUTHD_SERVER__NSID", "ns2")])).expect("valid");
    assert_eq!(c.server.nsid.as_deref(), Some("ns2"));
    let long = format!("[server]\nnsid = \"{}\"", "x".repeat(129));
    let e = from_toml(&long).expect_err("too long").to_string();
    assert!(
        e.contains("server.nsid: 129 bytes is too long (at most 128)"),
        "{e}"
    );
    let max = format!("[server]\nnsid = \"{}\"", "x".repeat(128));
    assert_eq!(
        from_toml(&max)
            .expect("128 bytes")
            .server
            .nsid
            .map(|n| n.len()),
        Some(128)
    );
}

/// `[server] proxy_allow`: addresses and blocks, from the file or a
/// comma-separated variable, into the server's settings; a bad entry is
/// named by its index.
#[test]
fn server_proxy_allow() {
    let c = from_toml("").expect("valid");
    assert!(c.server.proxy_allow.is_empty());
    let c = from_toml("[server]\nproxy_allow = [\"127.0.0.1\", \"2001:db8::/32\"]").expect("valid");
    let want: Vec<crate::acl::Cidr> = ["127.0.0.1/32", "2001:db8::/32"]
        .iter()
        .map(|a| a.parse().expect("cidr"))
        .collect();
    assert_eq!(c.server.proxy_allow, want);
    assert_eq!(ServerSettings::from(&c).proxy_allow, want);
    let c = Config::from_parts(
        None,
        env(&[("AUTHD_SERVER__PROXY_ALLOW", "127.0.0.1, 2001:db8::/32")]),
    )
    .expect("valid");
    assert_eq!(c.server.proxy_allow, want);
    let e = from_toml("[server]\nproxy_allow = [\"10.0.0.1\", \"10.0.0.0/33\"]")
        .expect_err("bad block")
        .to_string();
    assert!(
        e.contains("server.proxy_allow[1]: \"10.0.0.0/33\" is not"),
        "{e}"
    );
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
    assert_eq!(
        e,
        "unknown setting AUTHD_LISTN (from the environment): the configuration has no key listn"
    );
    let e = Config::from_parts(None, env(&[("AUTHD_TCP__IDLE_TIMOUT", "5")]))
        .expect_err("unknown")
        .to_string();
    assert_eq!(
        e,
        "unknown setting AUTHD_TCP__IDLE_TIMOUT (from the environment): tcp has no key idle_timout"
    );
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
    let DataSourceKind::Memory {
        zones, db: None, ..
    } = &c.datasources[2].kind
    else {
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

/// The cookie secret never shows in an error, whether the TOML around it is
/// broken or the value is bad.
#[test]
fn cookie_secret_never_shows_in_errors() {
    let secret = "5f3a9c0e1b2d4f6a8c7e9d0b1a2c3e4f";
    for text in [
        format!("[cookies]\nsecret = {secret}\n"),
        format!("[cookies]\nsecret = \"{secret}\n"),
        format!("[cookies]\nsecret = \"{secret}0\"\n"),
        format!("[cookies]\nsecret = \"{}+1\"\n", &secret[..30]),
    ] {
        let e = from_toml(&text).expect_err("invalid").to_string();
        assert!(!e.contains(&secret[..30]), "{e}");
    }
    let c = from_toml(&format!("[cookies]\nsecret = \"{secret}\"\n")).expect("valid");
    assert!(!format!("{c:?}").contains(&secret[..30]));
}

/// `[update]`: the ACL, serial policy, grants and per-zone settings; the
/// policy carries the sqlite3 file of each data source in order.
#[test]
fn update_section() {
    let c = from_toml(
        r#"
        [[key]]
        name = "acme-key."
        algorithm = "hmac-sha256"
        secret = "c2VjcmV0"
        [[datasource]]
        type = "memory"
        zones = [{ origin = "example.net.", file = "n.zone" }]
        [[datasource]]
        type = "sqlite3"
        file = "z.sqlite3"
        [update]
        allow = ["key acme-key.", "127.0.0.1"]
        serial = "dateserial"
        [[update.grant]]
        key = "acme-key."
        match = "wildcard"
        name = "*.dyn.example.com."
        [[update.zone]]
        origin = "example.org."
        allow = []
        dnssec = true
        serial = "unixtime"
        "#,
    )
    .expect("valid");
    let u = &c.update;
    assert_eq!(u.allow.len(), 2);
    assert_eq!(
        u.serial,
        authd_datasrc::sqlite_admin::SerialPolicy::DateSerial
    );
    assert_eq!(u.grants.len(), 1);
    assert_eq!(u.grants[0].kind, crate::update::GrantMatch::Wildcard);
    assert!(u.grants[0].types.is_empty());
    assert_eq!(u.zones[0].allow.as_ref().map(Acl::len), Some(0));
    assert_eq!(u.zones[0].dnssec, Some(true));
    assert_eq!(
        u.zones[0].serial,
        Some(authd_datasrc::sqlite_admin::SerialPolicy::UnixTime)
    );
    let p = c.update_policy();
    assert!(p.acl_for(&"example.org.".parse().expect("name")).is_empty());
    assert_eq!(p.acl_for(&"example.com.".parse().expect("name")).len(), 2);
}

/// Every bad `[update]` value names its key and what is wrong.
#[test]
fn update_section_errors() {
    let key = "[[key]]\nname = \"k.\"\nalgorithm = \"hmac-sha256\"\nsecret = \"c2VjcmV0\"\n";
    let cases = [
        (
            "[update]\nallow = [\"key nokey.\"]",
            "update.allow[0]",
            "no [[key]] named nokey.",
        ),
        (
            "[update]\nserial = \"weekly\"",
            "update.serial",
            "\"weekly\" is not",
        ),
        (
            "[[update.grant]]\nmatch = \"name\"\nname = \"a.\"",
            "update.grant[0].key",
            "missing",
        ),
        (
            "[[update.grant]]\nkey = \"other.\"\nmatch = \"name\"\nname = \"a.\"",
            "update.grant[0].key",
            "no [[key]] named other.",
        ),
        (
            "[[update.grant]]\nkey = \"k.\"\nmatch = \"exact\"\nname = \"a.\"",
            "update.grant[0].match",
            "\"exact\" is not",
        ),
        (
            "[[update.grant]]\nkey = \"k.\"\nmatch = \"wildcard\"\nname = \"a.\"",
            "update.grant[0].name",
            "not a wildcard",
        ),
        (
            "[[update.grant]]\nkey = \"k.\"\nmatch = \"name\"\nname = \"a.\"\ntypes = [\"ANY\"]",
            "update.grant[0].types[0]",
            "not a data type",
        ),
        (
            "[[update.zone]]\norigin = \"a.\"\n[[update.zone]]\norigin = \"a.\"",
            "update.zone[1].origin",
            "listed twice",
        ),
        (
            "[[update.zone]]\norigin = \"a.\"\nserial = \"daily\"",
            "update.zone[0].serial",
            "\"daily\" is not",
        ),
    ];
    for (text, want_key, want) in cases {
        match from_toml(&format!("{key}{text}")) {
            Err(ConfigError::Invalid { key, reason, .. }) => {
                assert_eq!(key, want_key, "{text}");
                assert!(reason.contains(want), "{text}: {reason}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
fn secondary_zones_are_served_from_their_dbs() {
    let c = from_toml(
        r#"
        [[key]]
        name = "tk."
        algorithm = "hmac-sha256"
        secret = "c2VjcmV0"
        [notify]
        allow = ["198.51.100.0/24"]
        [[secondary]]
        zone = "example.com"
        primaries = ["192.0.2.1:5353 key tk.", "192.0.2.2"]
        file = "sec.sqlite3"
        [[secondary]]
        zone = "example.org."
        primaries = "192.0.2.1"
        file = "sec.sqlite3"
        min_refresh = 5
        max_refresh = 600
        "#,
    )
    .expect("valid");
    assert_eq!(c.secondary.len(), 2);
    let com = &c.secondary[0];
    assert_eq!(com.origin.to_string(), "example.com.");
    assert_eq!(com.file, Path::new("/etc/authd/sec.sqlite3"));
    assert_eq!(
        com.primaries[0].addr,
        "192.0.2.1:5353".parse().expect("addr")
    );
    assert_eq!(
        com.primaries[0].key.as_ref().map(|k| k.to_string()),
        Some("tk.".into())
    );
    assert_eq!(com.primaries[1].addr, "192.0.2.2:53".parse().expect("addr"));
    assert_eq!(
        (com.min_refresh, com.max_refresh),
        (DEFAULT_MIN_REFRESH, DEFAULT_MAX_REFRESH)
    );
    assert_eq!(
        (c.secondary[1].min_refresh, c.secondary[1].max_refresh),
        (5, 600)
    );
    assert_eq!(c.notify.allow.len(), 1);
    // One sqlite3 source for the shared DB, restricted to both zones.
    assert_eq!(c.datasources.len(), 1);
    match &c.datasources[0].kind {
        DataSourceKind::Sqlite3 { file, zones } => {
            assert_eq!(file, Path::new("/etc/authd/sec.sqlite3"));
            assert_eq!(zones.as_ref().map(Vec::len), Some(2));
        }
        other => panic!("{other:?}"),
    }
    // `memory = true`: a memory source kept in the DB, beside the sqlite3
    // source of the same DB's other secondary zone.
    let c = from_toml(
        r#"
        [[secondary]]
        zone = "example.com"
        primaries = "192.0.2.1"
        file = "sec.sqlite3"
        memory = true
        [[secondary]]
        zone = "example.org."
        primaries = "192.0.2.1"
        file = "sec.sqlite3"
        "#,
    )
    .expect("valid");
    assert_eq!(
        (c.secondary[0].memory, c.secondary[1].memory),
        (true, false)
    );
    assert_eq!(c.datasources.len(), 2);
    match &c.datasources[0].kind {
        DataSourceKind::Memory {
            zones,
            db,
            secondary,
        } => {
            assert!(*secondary);
            assert_eq!(db.as_deref(), Some(Path::new("/etc/authd/sec.sqlite3")));
            let origins: Vec<String> = zones.iter().map(|z| z.origin.to_string()).collect();
            assert_eq!(origins, ["example.com."]);
            assert!(zones.iter().all(|z| z.file.is_none()));
        }
        other => panic!("{other:?}"),
    }
    match &c.datasources[1].kind {
        DataSourceKind::Sqlite3 { zones, .. } => {
            assert_eq!(
                zones.as_ref().map(|z| z[0].to_string()),
                Some("example.org.".into())
            );
        }
        other => panic!("{other:?}"),
    }
    for (text, key) in [
        (
            "[[secondary]]\nprimaries = [\"192.0.2.1\"]\nfile = \"a\"",
            "secondary[0].zone",
        ),
        (
            "[[secondary]]\nzone = \"a.\"\nfile = \"a\"",
            "secondary[0].primaries",
        ),
        (
            "[[secondary]]\nzone = \"a.\"\nprimaries = [\"x\"]\nfile = \"a\"",
            "secondary[0].primaries[0]",
        ),
        (
            "[[secondary]]\nzone = \"a.\"\nprimaries = [\"192.0.2.1 key nope.\"]\nfile = \"a\"",
            "secondary[0].primaries[0]",
        ),
        (
            "[[secondary]]\nzone = \"a.\"\nprimaries = [\"192.0.2.1\"]",
            "secondary[0].file",
        ),
        (
            "[[secondary]]\nzone = \"a.\"\nprimaries = [\"192.0.2.1\"]\nfile = \"a\"\nmin_refresh = 10\nmax_refresh = 5",
            "secondary[0].min_refresh",
        ),
        (
            "[[secondary]]\nzone = \"a.\"\nprimaries = [\"192.0.2.1\"]\nfile = \"a\"\n[[secondary]]\nzone = \"a\"\nprimaries = [\"192.0.2.1\"]\nfile = \"b\"",
            "secondary[1].zone",
        ),
    ] {
        let e = from_toml(text).expect_err(text).to_string();
        assert!(e.contains(key), "{text}: {e}");
    }
    // A secondary zone also served by a [[datasource]] is a duplicate.
    let e = from_toml(
        "[[datasource]]\ntype = \"sqlite3\"\nfile = \"x\"\nzones = [\"a.\"]\n\
         [[secondary]]\nzone = \"a.\"\nprimaries = [\"192.0.2.1\"]\nfile = \"b\"",
    )
    .expect_err("duplicate");
    assert!(matches!(e, ConfigError::DuplicateZone { .. }), "{e}");
}

#[test]
fn dnstap_section() {
    use crate::dnstap::{Output, Settings};
    assert_eq!(from_toml("").expect("valid").dnstap, None);
    let c = from_toml("[dnstap]\nfile = \"tap.fstrm\"\nidentity = \"ns1\"\nversion = \"v\"\n")
        .expect("valid");
    assert_eq!(
        c.dnstap,
        Some(Settings {
            output: Output::File("/etc/authd/tap.fstrm".into()),
            identity: Some("ns1".to_string()),
            version: Some("v".to_string()),
        })
    );
    let c = from_toml("[dnstap]\nsocket = \"/run/tap.sock\"\n").expect("valid");
    assert_eq!(
        c.dnstap,
        Some(Settings {
            output: Output::Socket("/run/tap.sock".into()),
            identity: None,
            version: None,
        })
    );
    let both = from_toml("[dnstap]\nfile = \"a\"\nsocket = \"b\"\n").expect_err("both");
    assert!(both.to_string().contains("not both"), "{both}");
    let lone = from_toml("[dnstap]\nidentity = \"ns1\"\n").expect_err("no output");
    assert!(
        lone.to_string().contains("without file or socket"),
        "{lone}"
    );
    let typo = from_toml("[dnstap]\nfiel = \"a\"\n").expect_err("unknown key");
    assert!(typo.to_string().contains("fiel"), "{typo}");
}

#[test]
fn unknown_keys_are_reported_at_once() {
    let e = Config::from_parts(
        Some((
            "[server]\nlistne = 1\n[tcp]\nidle = 2\n",
            Path::new("/etc/authd/authd.toml"),
        )),
        env(&[("AUTHD_TCP__IDLE_TIMOUT", "5")]),
    )
    .expect_err("unknown")
    .to_string();
    assert_eq!(
        e,
        "unknown keys: server.listne (file /etc/authd/authd.toml), tcp.idle (file \
         /etc/authd/authd.toml), tcp.idle_timout (AUTHD_TCP__IDLE_TIMOUT)"
    );
}

/// A bad value set by an `AUTHD_*` variable names the variable, not the
/// file beside it (which is fine); a bad value in the file names the file.
#[test]
fn bad_environment_values_name_the_variable() {
    let file = Some((
        "[tcp]\nidle_timeout = 5\n",
        Path::new("/etc/authd/authd.toml"),
    ));
    for (var, value, want) in [
        (
            "AUTHD_TCP__IDLE_TIMEOUT",
            "abc",
            "config environment variable AUTHD_TCP__IDLE_TIMEOUT: \"abc\" is not a whole number",
        ),
        (
            "AUTHD_UPDATE__SERIAL",
            "weekly",
            "config environment variable AUTHD_UPDATE__SERIAL: update.serial: \"weekly\" is not",
        ),
        (
            "AUTHD_LISTEN",
            "localhost:53",
            "config environment variable AUTHD_LISTEN: listen[0]: \"localhost:53\" is not ADDR:PORT",
        ),
        // A type error from the environment names the variable, not the file.
        (
            "AUTHD_RRL__ENABLED",
            "maybe",
            "config environment variable AUTHD_RRL__ENABLED: ",
        ),
    ] {
        let e = Config::from_parts(file, env(&[(var, value)]))
            .expect_err("bad value")
            .to_string();
        assert!(e.starts_with(want), "{e}");
    }
    let e = Config::from_parts(
        Some((
            "[tcp]\nidle_timeout = \"x\"\n",
            Path::new("/etc/authd/authd.toml"),
        )),
        env(&[]),
    )
    .expect_err("bad value")
    .to_string();
    assert!(e.starts_with("config /etc/authd/authd.toml: "), "{e}");
}

/// A value of the wrong TOML type is an error naming the key, the type it
/// takes and the line, instead of being converted (issue 27).
#[test]
fn wrong_types_name_the_key_the_type_and_the_line() {
    for (text, want) in [
        (
            "[tcp]\nidle_timeout = \"30\"",
            "config /etc/authd/authd.toml: line 2: tcp.idle_timeout: expected a whole number, \
             found the string \"30\" (write it without quotes)",
        ),
        (
            "[rrl]\nenabled = \"no\"",
            "config /etc/authd/authd.toml: line 2: rrl.enabled: expected true or false, found \
             the string \"no\"",
        ),
        (
            "[server]\nudp_workers = true",
            "config /etc/authd/authd.toml: line 2: server.udp_workers: expected a whole number, \
             found a boolean",
        ),
        (
            "[chaos]\n\nversion = 3",
            "config /etc/authd/authd.toml: line 3: chaos.version: expected a string, found an \
             integer",
        ),
        (
            "[[datasource]]\ntype = \"sqlite3\"\nfile = \"a\"\nzones = \"example.com.\"",
            "config /etc/authd/authd.toml: line 4: datasource[0].zones: expected a list of zone \
             origins or { origin = ..., file = ... } tables, found a string",
        ),
        (
            "listen = [5300]",
            "config /etc/authd/authd.toml: line 1: listen: expected a string or a list of \
             strings, found a list holding an integer",
        ),
        (
            "tcp = 3",
            "config /etc/authd/authd.toml: line 1: tcp: expected a table, found an integer",
        ),
    ] {
        let e = from_toml(text).expect_err(text);
        assert!(matches!(e, ConfigError::Type { .. }), "{text}: {e:?}");
        assert_eq!(e.to_string(), want, "{text}");
    }
    // The first wrong value in the file is the one named.
    let e = from_toml("[rrl]\nslip = \"2\"\n[tcp]\nidle_timeout = \"3\"").expect_err("two");
    assert!(e.to_string().contains("line 2: rrl.slip"), "{e}");
    // Variables are text: they are still converted.
    let c = Config::from_parts(
        None,
        env(&[
            ("AUTHD_TCP__IDLE_TIMEOUT", "30"),
            ("AUTHD_RRL__ENABLED", "false"),
            ("AUTHD_CHAOS__VERSION", "3"),
        ]),
    )
    .expect("valid");
    assert_eq!(c.tcp.idle_timeout, Duration::from_secs(30));
    assert!(!c.rrl.enabled);
    assert_eq!(c.chaos.version.as_deref(), Some("3"));
    // A list key takes one comma-separated string, in the file as from a
    // variable (`primaries = "192.0.2.1"`, `listen = "127.0.0.1:53"`).
    let c = from_toml("listen = \"127.0.0.1:53, [::1]:53\"").expect("valid");
    assert_eq!(c.listen.len(), 2);
}

/// The key path `config` gives for a key in an array of tables has its dot.
#[test]
fn key_paths_in_arrays_of_tables_have_their_dot() {
    let e = from_toml("[[datasource]]\ntype = \"sqlite3\"\nfile = \"a\"\ncache = { size = 3 }")
        .expect_err("unknown")
        .to_string();
    assert_eq!(
        e,
        "config /etc/authd/authd.toml: unknown field `size`, expected `enabled` or `slots` for \
         key `datasource[0].cache`"
    );
}

/// A top-level key written after a `[[table]]` header is in that table, as
/// TOML reads it: the message says so.
#[test]
fn top_level_key_after_a_table_gets_a_hint() {
    let text = "[[key]]\nname = \"k.\"\nalgorithm = \"hmac-sha256\"\nsecret = \"c2VjcmV0\"\n\
                listen = [\"127.0.0.1:53\"]\n";
    assert_eq!(
        from_toml(text).expect_err("misplaced").to_string(),
        "config /etc/authd/authd.toml: unknown field `listen`, expected one of `name`, \
         `algorithm`, `secret`, `secret_file` for key `key[0]`; listen is a top-level key, but \
         TOML puts a key written after a [[key]] header into that table: move it above the first \
         table"
    );
    assert_eq!(
        from_toml("[tcp]\nidle_timeout = 5\nrrl = 1\nlistne = 2\n")
            .expect_err("misplaced")
            .to_string(),
        "unknown keys: tcp.listne (file /etc/authd/authd.toml), tcp.rrl (file \
         /etc/authd/authd.toml); rrl is a top-level key, but TOML puts a key written after a \
         [tcp] header into that table: move it above the first table"
    );
}

/// `AUTHD_TCP_IDLE_TIMEOUT` (one underscore between section and key)
/// suggests the variable meant.
#[test]
fn env_variable_with_one_underscore_suggests_two() {
    let e = Config::from_parts(None, env(&[("AUTHD_TCP_IDLE_TIMEOUT", "5")]))
        .expect_err("unknown")
        .to_string();
    assert_eq!(
        e,
        "unknown setting AUTHD_TCP_IDLE_TIMEOUT (from the environment): the configuration has \
         no key tcp_idle_timeout; did you mean AUTHD_TCP__IDLE_TIMEOUT? (a double underscore \
         separates a section from its key)"
    );
    let e = Config::from_parts(None, env(&[("AUTHD_RRL_SLIP", "1"), ("AUTHD_LISTN", "x")]))
        .expect_err("unknown")
        .to_string();
    assert_eq!(
        e,
        "unknown keys: listn (AUTHD_LISTN), rrl_slip (AUTHD_RRL_SLIP; did you mean \
         AUTHD_RRL__SLIP?)"
    );
}

/// A zone in a `[[datasource]]` and a `[[secondary]]` names both sections.
#[test]
fn zone_in_a_datasource_and_a_secondary_names_both() {
    let e = from_toml(
        "[[datasource]]\ntype = \"sqlite3\"\nfile = \"x.sqlite3\"\nzones = [\"a.\"]\n\
         [[secondary]]\nzone = \"b.\"\nprimaries = [\"192.0.2.1\"]\nfile = \"b.sqlite3\"\n\
         [[secondary]]\nzone = \"a.\"\nprimaries = [\"192.0.2.1\"]\nfile = \"b.sqlite3\"",
    )
    .expect_err("duplicate")
    .to_string();
    assert_eq!(
        e,
        "zone a. is claimed by both datasource[0] (sqlite3:/etc/authd/x.sqlite3) and \
         secondary[1] (sqlite3:/etc/authd/b.sqlite3); a zone may be served by one data source \
         only"
    );
}

#[test]
fn catalog_section_in_both_toml_forms() {
    let groups_only = from_toml(
        "[[secondary]]\nzone = \"catalog.example.\"\ncatalog = true\nprimaries = [\"192.0.2.1\"]\n\
         file = \"m.sqlite3\"\n[[catalog.group]]\nname = \"signed\"\nfile = \"s.sqlite3\"\n\
         min_refresh = 5\n[[catalog.group]]\nname = \"other\"\nprimaries = [\"192.0.2.9:5300\"]\n",
    )
    .expect("groups alone");
    assert!(groups_only.secondary[0].catalog);
    assert!(groups_only.catalog.producers.is_empty());
    let names: Vec<&str> = groups_only
        .catalog
        .groups
        .iter()
        .map(|g| g.name.as_str())
        .collect();
    assert_eq!(names, ["signed", "other"]);
    assert_eq!(groups_only.catalog.groups[0].min_refresh, Some(5));
    assert_eq!(
        groups_only.catalog.groups[1]
            .primaries
            .as_ref()
            .map(|p| p[0].addr.to_string()),
        Some("192.0.2.9:5300".to_string())
    );
    let both = from_toml(
        "[[datasource]]\ntype = \"sqlite3\"\nfile = \"zones.sqlite3\"\n\
         [[catalog]]\norigin = \"catalog.example.\"\nfile = \"zones.sqlite3\"\n\
         [[catalog.group]]\nname = \"signed\"\n",
    )
    .expect("producer and a group");
    assert_eq!(both.catalog.producers.len(), 1);
    assert_eq!(
        both.catalog.producers[0].origin.to_string(),
        "catalog.example."
    );
    assert_eq!(both.catalog.groups.len(), 1);
    let err = |text: &str| from_toml(text).expect_err("invalid").to_string();
    assert!(
        err("[[catalog.group]]\nname = \"a\"\n[[catalog.group]]\nname = \"a\"\n")
            .contains("catalog.group[1].name: group \"a\" is listed twice in [[catalog.group]]")
    );
    assert!(err("[[catalog.group]]\nfile = \"x\"\n").contains("catalog.group[0].name: missing"));
    assert!(
        err("[[catalog.group]]\nname = \"a\"\nzone = \"x.\"\n").contains("unknown field `zone`")
    );
    assert!(
        err("[[catalog]]\norigin = \"catalog.example.\"\n").contains("catalog[0].file: missing")
    );
}

/// `[[catalog]]` keeps its zone in a DB a `[[datasource]] type = "sqlite3"`
/// serves whole, and its origin is not a `[[secondary]]` zone.
#[test]
fn a_catalog_needs_its_db_served_whole_and_is_no_secondary() {
    let ok = from_toml(
        r#"
        [[datasource]]
        type = "sqlite3"
        file = "zones.sqlite3"
        [[catalog]]
        origin = "catalog.example"
        file = "zones.sqlite3"
        "#,
    )
    .expect("valid");
    assert_eq!(
        ok.catalog.producers,
        vec![crate::catalog::config::ProducerConfig {
            origin: "catalog.example.".parse().expect("name"),
            file: PathBuf::from("/etc/authd/zones.sqlite3"),
        }]
    );
    let err = |text: &str| from_toml(text).expect_err("invalid").to_string();
    assert_eq!(
        err(r#"
        [[datasource]]
        type = "sqlite3"
        file = "other.sqlite3"
        [[catalog]]
        origin = "catalog.example."
        file = "zones.sqlite3"
        "#),
        "config /etc/authd/authd.toml: catalog[0].file: /etc/authd/zones.sqlite3 is not the file \
         of a [[datasource]] type = \"sqlite3\" serving every zone of it; the catalog zone is kept \
         in that DB and must be served for consumers to transfer it"
    );
    assert_eq!(
        err(r#"
        [[datasource]]
        type = "sqlite3"
        file = "zones.sqlite3"
        zones = ["example.com."]
        [[catalog]]
        origin = "catalog.example."
        file = "zones.sqlite3"
        "#),
        "config /etc/authd/authd.toml: catalog[0].file: /etc/authd/zones.sqlite3 is not the file \
         of a [[datasource]] type = \"sqlite3\" serving every zone of it, and datasource[0] serves \
         only the zones it lists (zones = [...]); the catalog zone is kept in that DB and must be \
         served for consumers to transfer it"
    );
    // A memory source copying the DB does not serve the catalog zone live.
    assert!(
        err(r#"
        [[datasource]]
        type = "memory"
        db = "zones.sqlite3"
        [[catalog]]
        origin = "catalog.example."
        file = "zones.sqlite3"
        "#)
        .starts_with("config /etc/authd/authd.toml: catalog[0].file: ")
    );
    assert_eq!(
        err(r#"
        [[datasource]]
        type = "sqlite3"
        file = "zones.sqlite3"
        [[secondary]]
        zone = "catalog.example."
        primaries = ["192.0.2.1"]
        file = "zones.sqlite3"
        [[catalog]]
        origin = "catalog.example."
        file = "zones.sqlite3"
        "#),
        "config /etc/authd/authd.toml: catalog[0].origin: catalog.example. is a [[secondary]] \
         zone (secondary[0]): a catalog zone authd produces cannot also be transferred from \
         primaries"
    );
}

#[test]
fn signing_zones_are_checked_with_the_other_sections() {
    let ok = from_toml(
        r#"
        [[datasource]]
        type = "sqlite3"
        file = "zones.sqlite3"
        [signing]
        denial = "nsec"
        [[signing.zone]]
        origin = "example.com"
        "#,
    )
    .expect("valid");
    assert_eq!(ok.signing.zones.len(), 1);
    // A signed zone takes updates whatever [update] dnssec says.
    let origin: Name = "example.com.".parse().expect("name");
    let z = ok.update_policy();
    let zone = z.zones.iter().find(|u| u.origin == origin).expect("listed");
    assert_eq!(zone.dnssec, Some(true));
    let err = |text: &str| from_toml(text).expect_err("invalid").to_string();
    // A secondary zone is signed as it comes in (bump in the wire).
    let secondary = from_toml(
        r#"
        [[secondary]]
        zone = "example.com."
        primaries = ["192.0.2.1"]
        file = "sec.sqlite3"
        [[signing.zone]]
        origin = "example.com."
        "#,
    )
    .expect("a signed secondary zone is valid");
    assert_eq!(secondary.signing.zones[0].origin, origin);
    assert!(
        err(r#"
        [[datasource]]
        type = "memory"
        zones = [{ origin = "example.com.", file = "example.com.zone" }]
        [[signing.zone]]
        origin = "example.com."
        "#)
        .contains(
            "signing.zone[0].origin: example.com. is loaded from a master file by datasource[0]"
        )
    );
    // origin belongs in [[signing.zone]].
    assert!(err("[signing]\norigin = \"example.com.\"\n").starts_with(
        "config /etc/authd/authd.toml: unknown field `origin`, expected one of `zone`"
    ));
    assert!(
        err("[signing]\nalgorithm = \"rsamd5\"\n").contains("signing.algorithm: unknown algorithm")
    );
}
