//! End to end: a zone signed online by a running authd (`[[signing.zone]]`),
//! changed on every write path a server sees, with real clients and
//! validators over 127.0.0.1:
//!
//! - the first signing, then a DNS UPDATE (`nsupdate`), then a plain SQL
//!   edit made with the `sqlite3` shell (signed by the server's signer,
//!   serial moved), then a `loadzone` replace; after each, an AXFR (`dig`)
//!   passes `dnssec-verify`, `ldns-verify-zone` and `kzonecheck -d on`;
//! - a validating Unbound with the zone's KSK as trust anchor resolves
//!   positive answers, NXDOMAIN, NODATA, a wildcard, a secure and an
//!   insecure delegation's DS through authd: no SERVFAIL, AD set;
//! - `authc dnssec ds` gives the DS of the key the zone is signed with, and
//!   BIND's `delv` with that DS as trust anchor validates the same answers
//!   asking authd itself.
//!
//! Needs `dig`, `nsupdate` (bind9-dnsutils), `dnssec-verify` (bind9-utils),
//! `ldns-verify-zone` (ldnsutils), `kzonecheck` (knot), `sqlite3`, `unbound`,
//! `delv` (bind9-dnsutils).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use authd_tests::hickory_proto::op::ResponseCode;
use authd_tests::{
    AuthdProcess, QueryBuilder, binary, load_zone_text, parse_reply, query_tcp, require_tool,
    run_with_timeout, start_unbound, tempdir, write_file,
};

const KEY: &str = "hmac-sha256:ddns.:8SAbJ0JpR9OwJgRTLHX8YMi1jUUT/gzPPRd6Wp44Dg4=";

const ZONE: &str = "$TTL 300
@ SOA ns1 hostmaster 1 3600 900 1209600 300
@ NS ns1
@ MX 10 mail
ns1 A 192.0.2.1
mail A 192.0.2.2
www A 192.0.2.3
*.wild TXT \"wildcard\"
secure NS ns.secure
ns.secure A 192.0.2.53
secure DS 12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
insecure NS ns.insecure
ns.insecure A 192.0.2.54
";

struct Served {
    authd: AuthdProcess,
    db: PathBuf,
    control: PathBuf,
    dir: tempfile::TempDir,
}

fn serve(policy: &str) -> Served {
    let dir = tempdir();
    let db = dir.path().join("zones.sqlite3");
    load_zone_text(&db, "example.com.", ZONE);
    let control = dir.path().join("control.sock");
    let config = format!(
        "[[key]]\nname = \"ddns.\"\nalgorithm = \"hmac-sha256\"\n\
         secret = \"8SAbJ0JpR9OwJgRTLHX8YMi1jUUT/gzPPRd6Wp44Dg4=\"\n\
         [[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n\
         [transfer]\nallow = [\"127.0.0.1\"]\n[update]\nallow = [\"key ddns.\"]\n\
         [control]\nsocket = \"{}\"\n\
         [signing]\n{policy}\n[[signing.zone]]\norigin = \"example.com.\"\n",
        db.display(),
        control.display()
    );
    let path = write_file(dir.path(), "authd.toml", &config);
    let authd = AuthdProcess::start(["--config".as_ref(), path.as_os_str()]);
    Served {
        authd,
        db,
        control,
        dir,
    }
}

fn soa_serial(addr: SocketAddr) -> Option<u32> {
    let r = parse_reply(&query_tcp(
        addr,
        &QueryBuilder::new("example.com.", "SOA").wire(),
    ));
    r.answers.iter().find_map(|rr| match &rr.data {
        authd_tests::hickory_proto::rr::RData::SOA(soa) => Some(soa.serial),
        _ => None,
    })
}

/// RRSIGs in the answer to a DO query.
fn signatures(addr: SocketAddr, qname: &str, qtype: &str) -> usize {
    let q = QueryBuilder::new(qname, qtype).edns(4096, true);
    let r = parse_reply(&query_tcp(addr, &q.wire()));
    r.answers
        .iter()
        .filter(|rr| rr.record_type() == authd_tests::hickory_proto::rr::RecordType::RRSIG)
        .count()
}

/// Waits (bounded) until `cond` holds; returns how long it took.
fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    start.elapsed()
}

/// An AXFR of example.com. from `addr` (dig, one SOA), written to `dir`.
fn axfr(addr: SocketAddr, dir: &Path, step: &str) -> PathBuf {
    let out = run_with_timeout(
        Command::new("dig").args([
            "@127.0.0.1",
            "-p",
            &addr.port().to_string(),
            "example.com.",
            "AXFR",
            "+onesoa",
            "+nocmd",
            "+nostats",
            "+nocomments",
        ]),
        Duration::from_secs(20),
    );
    assert!(
        out.status.success(),
        "dig AXFR: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("RRSIG"),
        "{step}: the transfer is not signed:\n{text}"
    );
    write_file(dir, &format!("{step}.zone"), &text)
}

/// The three validators on the AXFR at `step`.
fn verify(addr: SocketAddr, dir: &Path, step: &str, csk: bool) {
    let file = axfr(addr, dir, step);
    let mut bind = Command::new("dnssec-verify");
    bind.args(["-q", "-o", "example.com."]);
    if csk {
        bind.arg("-z");
    }
    let checks: [(&str, Command); 3] = [
        ("dnssec-verify", {
            bind.arg(&file);
            bind
        }),
        ("ldns-verify-zone", {
            let mut c = Command::new("ldns-verify-zone");
            c.arg(&file);
            c
        }),
        ("kzonecheck", {
            let mut c = Command::new("kzonecheck");
            c.args(["-o", "example.com.", "-d", "on"]).arg(&file);
            c
        }),
    ];
    for (name, mut cmd) in checks {
        let out = run_with_timeout(&mut cmd, Duration::from_secs(60));
        assert!(
            out.status.success(),
            "{step}: {name} fails on the AXFR:\n{}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&file).unwrap_or_default()
        );
    }
}

fn nsupdate(addr: SocketAddr, commands: &str) {
    nsupdate_zone(addr, "example.com.", commands);
}

/// One UPDATE of `zone` (TSIG-signed) at `addr`; panics with nsupdate's
/// output when it fails.
fn nsupdate_zone(addr: SocketAddr, zone: &str, commands: &str) {
    let script = format!(
        "server 127.0.0.1 {}\nzone {zone}\n{commands}\nsend\n",
        addr.port()
    );
    let dir = tempdir();
    let file = write_file(dir.path(), "update.txt", &script);
    let out = run_with_timeout(
        Command::new("nsupdate").args(["-y", KEY]).arg(&file),
        Duration::from_secs(20),
    );
    assert!(
        out.status.success(),
        "nsupdate: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn sqlite3(db: &Path, sql: &str) {
    let out = run_with_timeout(
        Command::new("sqlite3").arg(db).arg(sql),
        Duration::from_secs(20),
    );
    assert!(
        out.status.success(),
        "sqlite3: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn authc(control: &Path, args: &[&str]) -> String {
    let out = run_with_timeout(
        Command::new(binary("authc"))
            .arg("--socket")
            .arg(control)
            .args(args),
        Duration::from_secs(20),
    );
    assert!(
        out.status.success(),
        "authc {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// `ZONE DNSKEY <its first SEP key>` as served on 127.0.0.1:`port` (dig),
/// for a trust anchor.
fn sep_dnskey(port: u16, zone: &str) -> String {
    let out = run_with_timeout(
        Command::new("dig").args([
            "@127.0.0.1",
            "-p",
            &port.to_string(),
            "+short",
            zone,
            "DNSKEY",
        ]),
        Duration::from_secs(20),
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let key = text
        .lines()
        .find(|l| l.starts_with("257 "))
        .unwrap_or_else(|| panic!("no KSK in\n{text}"));
    format!("{zone} DNSKEY {key}").replace('\t', " ")
}

fn require_tools() {
    require_tool("dig", "-v", "bind9-dnsutils");
    require_tool("nsupdate", "-V", "bind9-dnsutils");
    require_tool("dnssec-verify", "-V", "bind9-utils");
    require_tool("ldns-verify-zone", "-v", "ldnsutils");
    require_tool("kzonecheck", "-V", "knot");
    require_tool("sqlite3", "-version", "sqlite3");
    require_tool("delv", "-v", "bind9-dnsutils");
}

fn every_write_path(policy: &str, csk: bool) {
    require_tools();
    let s = serve(policy);
    let addr = s.authd.addr();
    // The first signing, by the signer at start.
    wait_for("the first signing", Duration::from_secs(20), || {
        signatures(addr, "example.com.", "SOA") > 0
    });
    assert_eq!(soa_serial(addr), Some(2));
    verify(addr, s.dir.path(), "first", csk);

    // DNS UPDATE: the reply comes after the signed change is committed.
    nsupdate(
        addr,
        "update add new.example.com. 300 A 192.0.2.99\nupdate delete www.example.com. A",
    );
    assert_eq!(soa_serial(addr), Some(3));
    assert!(signatures(addr, "new.example.com.", "A") > 0);
    verify(addr, s.dir.path(), "update", csk);

    // A plain SQL edit with the sqlite3 shell: signed by the server.
    sqlite3(
        &s.db,
        "INSERT INTO records (zone_id, name, rname, ttl, rdtype, sigtype, rdata) \
         SELECT id, 'sql.example.com.', 'com.example.sql.', 300, 'TXT', NULL, '\"by sql\"' \
         FROM zones WHERE name='example.com.'; \
         DELETE FROM records WHERE name='mail.example.com.' AND rdtype='A';",
    );
    let took = wait_for("the SQL edit signed", Duration::from_secs(10), || {
        soa_serial(addr) == Some(4)
    });
    eprintln!("SQL edit signed and served {took:?} after the commit");
    assert!(signatures(addr, "sql.example.com.", "TXT") > 0);
    verify(addr, s.dir.path(), "sql", csk);

    // loadzone replacing the whole zone (serial 10), through the same DB.
    let file = write_file(
        s.dir.path(),
        "v10.zone",
        &(ZONE.replace(" 1 3600 900", " 10 3600 900") + "extra A 192.0.2.100\n"),
    );
    let out = run_with_timeout(
        Command::new(binary("loadzone"))
            .arg("--db")
            .arg(&s.db)
            .arg("example.com.")
            .arg(&file),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "loadzone: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for("the replace served", Duration::from_secs(10), || {
        soa_serial(addr) == Some(10)
    });
    assert!(signatures(addr, "extra.example.com.", "A") > 0);
    verify(addr, s.dir.path(), "replace", csk);

    // The DS for the parent names the key that signs the DNSKEY RRset.
    let ds = authc(&s.control, &["dnssec", "ds", "example.com."]);
    let line = ds.lines().next().expect("a DS line");
    assert!(line.starts_with("example.com. 3600 IN DS "), "{ds}");

    // A validating resolver with that key as trust anchor.
    let anchor = sep_dnskey(addr.port(), "example.com.");
    let ub = start_unbound(addr, &[("example.com.", anchor.as_str())], None);
    let cases: &[(&str, &str, ResponseCode)] = &[
        ("ns1.example.com.", "A", ResponseCode::NoError),
        // The replace at serial 10 brought back www and mail and added extra.
        ("www.example.com.", "A", ResponseCode::NoError),
        ("extra.example.com.", "A", ResponseCode::NoError),
        ("example.com.", "MX", ResponseCode::NoError),
        ("sql.example.com.", "TXT", ResponseCode::NXDomain),
        ("ns1.example.com.", "TXT", ResponseCode::NoError),
        ("nx.example.com.", "A", ResponseCode::NXDomain),
        ("foo.wild.example.com.", "TXT", ResponseCode::NoError),
        ("secure.example.com.", "DS", ResponseCode::NoError),
        ("insecure.example.com.", "DS", ResponseCode::NoError),
        ("example.com.", "DNSKEY", ResponseCode::NoError),
    ];
    let mut failures = Vec::new();
    for &(qname, qtype, rcode) in cases {
        let q = QueryBuilder::new(qname, qtype).rd(true).edns(4096, true);
        let r = parse_reply(&query_tcp(ub.addr, &q.wire()));
        let (got, ad) = (r.metadata.response_code, r.metadata.authentic_data);
        if got != rcode || !ad {
            failures.push(format!(
                "{qname} {qtype}: {got:?} ad={ad} (want {rcode:?} ad=1)"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "through unbound:\n{}\n\nunbound log:\n{}",
        failures.join("\n"),
        ub.log()
    );

    // BIND's delv, asking authd itself, with the DS from authc as its
    // trust anchor.
    let fields: Vec<&str> = line.split_whitespace().collect();
    let anchor = write_file(
        s.dir.path(),
        "anchor.conf",
        &format!(
            "trust-anchors {{ example.com. static-ds {} {} {} \"{}\"; }};\n",
            fields[4], fields[5], fields[6], fields[7]
        ),
    );
    let delv_cases: &[(&str, &str, &str)] = &[
        ("www.example.com.", "A", "; fully validated"),
        ("example.com.", "MX", "; fully validated"),
        ("foo.wild.example.com.", "TXT", "; fully validated"),
        ("secure.example.com.", "DS", "; fully validated"),
        (
            "nx.example.com.",
            "A",
            "; negative response, fully validated",
        ),
        (
            "ns1.example.com.",
            "TXT",
            "; negative response, fully validated",
        ),
        (
            "insecure.example.com.",
            "DS",
            "; negative response, fully validated",
        ),
    ];
    let mut failures = Vec::new();
    for &(qname, qtype, want) in delv_cases {
        let out = run_with_timeout(
            Command::new("delv")
                .arg("@127.0.0.1")
                .args(["-p", &addr.port().to_string(), "-a"])
                .arg(&anchor)
                .args(["+root=example.com.", qname, qtype]),
            Duration::from_secs(30),
        );
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !text.lines().any(|l| l.trim() == want) {
            failures.push(format!("delv {qname} {qtype}: want {want:?}, got:\n{text}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_csk_zone_with_nsec3_is_signed_on_every_write_path() {
    every_write_path("", true);
}

#[test]
fn a_ksk_zsk_zone_with_nsec_is_signed_on_every_write_path() {
    every_write_path(
        "keys = \"ksk+zsk\"\ndenial = \"nsec\"\nalgorithm = \"ed25519\"",
        false,
    );
}

/// 1,000 dynamic updates picked at random (a fixed seed): names added and
/// deleted, RRsets added to and removed from existing names, names below
/// empty non-terminals, a delegation added and removed; every one signed
/// before its reply, and the zone after them valid to all three validators.
#[test]
fn a_thousand_random_updates_leave_a_valid_zone() {
    require_tools();
    let s = serve("");
    let addr = s.authd.addr();
    wait_for("the first signing", Duration::from_secs(20), || {
        signatures(addr, "example.com.", "SOA") > 0
    });
    let mut seed: u64 = 0x5eed_1234;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    let mut live: Vec<String> = Vec::new();
    let mut script = String::new();
    for i in 0..1000u32 {
        let line = match next(6) {
            0 | 1 => {
                let name = format!("h{i}.example.com.");
                live.push(name.clone());
                format!("update add {name} 300 A 192.0.2.{}", i % 250 + 1)
            }
            2 if !live.is_empty() => {
                let k = next(live.len() as u64) as usize;
                format!("update delete {}", live.swap_remove(k))
            }
            3 => format!(
                "update add x{}.deep.{}.example.com. 300 TXT \"t{i}\"",
                next(50),
                next(5)
            ),
            4 if !live.is_empty() => {
                let k = next(live.len() as u64) as usize;
                format!("update add {} 300 TXT \"added {i}\"", live[k])
            }
            _ if i % 2 == 0 => {
                format!("update add d{}.example.com. 300 NS ns.other.net.", next(20))
            }
            _ => format!("update delete d{}.example.com. NS", next(20)),
        };
        script.push_str(&line);
        script.push_str("\nsend\n");
    }
    let before = soa_serial(addr).expect("serial");
    let body = format!(
        "server 127.0.0.1 {}\nzone example.com.\n{script}",
        addr.port()
    );
    let file = write_file(s.dir.path(), "random.txt", &body);
    // Over TCP with a long timeout: each signed UPDATE of a debug build on a
    // loaded CI machine may take longer than nsupdate's 3 s UDP retry, and a
    // retransmitted UPDATE would only measure the machine's load.
    let out = run_with_timeout(
        Command::new("nsupdate")
            .args(["-v", "-t", "120", "-y", KEY])
            .arg(&file),
        Duration::from_secs(900),
    );
    assert!(
        out.status.success(),
        "nsupdate: {}\n\nauthd:\n{}",
        String::from_utf8_lossy(&out.stderr),
        s.authd.stderr()
    );
    let after = soa_serial(addr).expect("serial");
    // Every update that changed something moved the serial by one.
    assert!(after > before + 500, "serial {before} -> {after}");
    verify(addr, s.dir.path(), "random", true);
}

/// A zone taken out of `[[signing.zone]]` is no longer signed after a
/// restart: the policy kept in its DB is removed, so no writer of the file
/// signs it (its signatures stay until they expire).
#[test]
fn a_zone_left_out_of_the_configuration_is_no_longer_signed() {
    require_tools();
    let mut s = serve("");
    let addr = s.authd.addr();
    wait_for("the first signing", Duration::from_secs(20), || {
        signatures(addr, "example.com.", "SOA") > 0
    });
    assert!(authc(&s.control, &["dnssec", "status"]).starts_with("example.com. signed: "));
    s.authd.terminate();
    let path = s.dir.path().join("authd.toml");
    let text = std::fs::read_to_string(&path).expect("config");
    let without = text.replace("[[signing.zone]]\norigin = \"example.com.\"\n", "");
    assert_ne!(text, without);
    std::fs::write(&path, without).expect("config");
    s.authd = AuthdProcess::start(["--config".as_ref(), path.as_os_str()]);
    assert!(
        s.authd
            .wait_for_log("no longer signed", Duration::from_secs(20)),
        "{}",
        s.authd.stderr()
    );
    let out = run_with_timeout(
        Command::new(binary("authc"))
            .arg("--socket")
            .arg(&s.control)
            .args(["dnssec", "status"]),
        Duration::from_secs(20),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "authc: no zone is signed online"
    );
}

const PARENT: &str = "$TTL 2
@ SOA ns1.example.com. hostmaster.example.com. 1 3600 900 1209600 2
@ NS ns1.example.com.
example.com. NS ns1.example.com.
ns1.example.com. A 127.0.0.1
";

const CHILD: &str = "$TTL 2
@ SOA ns1 hostmaster 1 3600 900 1209600 2
@ NS ns1
ns1 A 127.0.0.1
www A 192.0.2.3
";

/// (tag, role, state) of one key.
type KeyLine = (u16, String, String);

/// The (tag, role, state) of each key of `zone` from `authc dnssec status`.
fn key_states(control: &Path, zone: &str) -> Vec<KeyLine> {
    authc(control, &["dnssec", "status", zone])
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w[..] {
                ["key", tag, role, state, ..] => {
                    Some((tag.parse().ok()?, role.to_string(), state.to_string()))
                }
                _ => None,
            }
        })
        .collect()
}

fn has_key(keys: &[KeyLine], role: &str, state: &str) -> bool {
    keys.iter().any(|(_, r, s)| r == role && s == state)
}

/// Time-compressed rollovers (TTLs of 2 s, propagation delay 1 s): the ZSK
/// of example.com. rolls by its lifetime (8 s) and its KSK on `authc dnssec
/// rollover`, the KSK's DS changed in the parent zone com. (signed online
/// by the same authd, asked as `parent_agents`); authd is restarted in the
/// middle of each. Unbound, with only com.'s key as trust anchor, resolves
/// a query every 0.5 s throughout: no SERVFAIL, AD always set.
#[test]
fn zsk_and_ksk_rollovers_keep_the_zone_valid_across_restarts() {
    require_tools();
    let dir = tempdir();
    let db = dir.path().join("zones.sqlite3");
    load_zone_text(&db, "com.", PARENT);
    load_zone_text(&db, "example.com.", CHILD);
    let control = dir.path().join("control.sock");
    let port = authd_tests::free_port();
    let config = format!(
        "[[key]]\nname = \"ddns.\"\nalgorithm = \"hmac-sha256\"\n\
         secret = \"8SAbJ0JpR9OwJgRTLHX8YMi1jUUT/gzPPRd6Wp44Dg4=\"\n\
         [[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n\
         [transfer]\nallow = [\"127.0.0.1\"]\n[update]\nallow = [\"key ddns.\"]\n\
         [control]\nsocket = \"{}\"\n\
         [signing]\ndnskey_ttl = 2\npropagation_delay = 1\nzsk_lifetime = 0\n\
         [[signing.zone]]\norigin = \"com.\"\n\
         [[signing.zone]]\norigin = \"example.com.\"\nkeys = \"ksk+zsk\"\nzsk_lifetime = 8\n\
         parent_agents = [\"127.0.0.1:{port}\"]\n",
        db.display(),
        control.display()
    );
    let conf = write_file(dir.path(), "authd.toml", &config);
    let start = || {
        let mut cmd = Command::new(binary("authd"));
        cmd.arg("--config")
            .arg(&conf)
            .args(["--listen", &format!("127.0.0.1:{port}")]);
        AuthdProcess::start_command(cmd, 1)
    };
    let mut authd = start();
    let addr = authd.addr();
    for zone in ["com.", "example.com."] {
        wait_for("the first signing", Duration::from_secs(20), || {
            signatures(addr, zone, "SOA") > 0
        });
    }
    // The parent gets the child's DS.
    let ds = |control: &Path| -> Vec<String> {
        authc(control, &["dnssec", "ds", "example.com."])
            .lines()
            .map(|l| l.replace("example.com. 2 IN DS", "update add example.com. 2 DS"))
            .collect()
    };
    let first_ds = ds(&control);
    assert_eq!(first_ds.len(), 1, "{first_ds:?}");
    let parent_update = |commands: &str| {
        nsupdate_zone(SocketAddr::from(([127, 0, 0, 1], port)), "com.", commands);
    };
    parent_update(&first_ds[0]);
    let com_ksk = sep_dnskey(port, "com.");
    let ub = start_unbound(
        addr,
        &[("com.", com_ksk.as_str()), ("example.com.", "")],
        None,
    );

    // A query every 0.5 s; paused while authd restarts.
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let paused = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let checker = {
        let (paused, done, failures, asked) = (
            Arc::clone(&paused),
            Arc::clone(&done),
            Arc::clone(&failures),
            Arc::clone(&asked),
        );
        let ub_addr = ub.addr;
        std::thread::spawn(move || {
            let started = Instant::now();
            while !done.load(Ordering::Relaxed) {
                if !paused.load(Ordering::Relaxed) {
                    let q = QueryBuilder::new("www.example.com.", "A")
                        .rd(true)
                        .edns(4096, true);
                    let r = parse_reply(&query_tcp(ub_addr, &q.wire()));
                    let (rcode, ad) = (r.metadata.response_code, r.metadata.authentic_data);
                    asked.fetch_add(1, Ordering::Relaxed);
                    if rcode != ResponseCode::NoError || !ad {
                        failures.lock().expect("lock").push(format!(
                            "at {:.1} s: {rcode:?} ad={ad}",
                            started.elapsed().as_secs_f64()
                        ));
                    }
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };
    let restart = |authd: &mut AuthdProcess| {
        paused.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(600));
        authd.terminate();
        *authd = start();
        // The control socket opens after the listeners.
        wait_for("the control socket", Duration::from_secs(20), || {
            std::os::unix::net::UnixStream::connect(&control).is_ok()
        });
        paused.store(false, Ordering::Relaxed);
    };
    let wait_keys = |what: &str, secs: u64, cond: &dyn Fn(&[KeyLine]) -> bool| {
        wait_for(what, Duration::from_secs(secs), || {
            cond(&key_states(&control, "example.com."))
        });
    };

    // The ZSK rolls by its lifetime: published, restart, active, removed.
    wait_keys("a new ZSK published", 30, &|k| {
        has_key(k, "zsk", "published")
    });
    restart(&mut authd);
    wait_keys("the old ZSK retired", 30, &|k| has_key(k, "zsk", "retired"));
    wait_keys("the old ZSK removed", 30, &|k| has_key(k, "zsk", "removed"));
    verify(authd.addr(), dir.path(), "zsk-rolled", false);

    // The KSK on request: the new one signs beside the old, waiting for its
    // DS at the parent, across a restart.
    let out = authc(&control, &["dnssec", "rollover", "example.com.", "ksk"]);
    assert!(out.contains("new ksk"), "{out}");
    let again = run_with_timeout(
        Command::new(binary("authc"))
            .arg("--socket")
            .arg(&control)
            .args(["dnssec", "rollover", "example.com.", "ksk"]),
        Duration::from_secs(20),
    );
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("KSK rollover is under way"),
        "{}{}",
        String::from_utf8_lossy(&again.stdout),
        String::from_utf8_lossy(&again.stderr)
    );
    let status = authc(&control, &["dnssec", "status", "example.com."]);
    assert!(status.contains("awaiting-ds: yes"), "{status}");
    restart(&mut authd);
    // Not retired while the parent lacks the DS (two checks of the agent).
    std::thread::sleep(Duration::from_secs(6));
    let keys = key_states(&control, "example.com.");
    assert_eq!(
        keys.iter()
            .filter(|(_, r, s)| r == "ksk" && s == "active")
            .count(),
        2,
        "{keys:?}"
    );
    // The parent takes both DS (as it would from the CDS); the signer sees
    // the new one at the agent and retires the old KSK, then removes it.
    let both = ds(&control);
    assert_eq!(both.len(), 2, "{both:?}");
    parent_update(&both.join("\n"));
    wait_keys("the old KSK retired", 30, &|k| has_key(k, "ksk", "retired"));
    assert!(authd.stderr().contains("seen at every parent agent"));
    wait_keys("the old KSK removed", 30, &|k| has_key(k, "ksk", "removed"));
    // The parent drops the old DS.
    parent_update(&first_ds[0].replace("update add", "update delete"));
    std::thread::sleep(Duration::from_secs(4));
    verify(authd.addr(), dir.path(), "ksk-rolled", false);

    done.store(true, Ordering::Relaxed);
    checker.join().expect("checker");
    let failures = failures.lock().expect("lock");
    let asked = asked.load(Ordering::Relaxed);
    assert!(asked > 40, "only {asked} queries");
    assert!(
        failures.is_empty(),
        "{} of {asked} queries failed through unbound:\n{}\n\nunbound log:\n{}\n\nauthd:\n{}",
        failures.len(),
        failures.join("\n"),
        ub.log(),
        authd.stderr()
    );
}
