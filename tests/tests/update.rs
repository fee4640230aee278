//! End to end: dynamic updates (RFC 2136) into an sqlite3 zone, with real
//! clients over 127.0.0.1.
//!
//! - `nsupdate -y` (BIND 9) and `knsupdate -y` (Knot): add, replace, delete
//!   an RR, an RRset and a name, each prerequisite failing with its rcode,
//!   unsigned and out-of-policy updates REFUSED, NOTZONE, the result served
//!   at once (the serial bumped by one per update);
//! - an ACME DNS-01 flow with a key granted only `_acme-challenge` TXT;
//! - IXFR from the `diffs` journal the update wrote;
//! - a memory zone NOTAUTH, an address-only `allow` entry, a busy DB SERVFAIL
//!   with nothing half-applied, apex rules (last NS, SOA kept);
//! - a DB truncated while served: SERVFAIL, the file named as corrupt;
//! - an fsync that fails (EIO, an `LD_PRELOAD` shim built with `gcc`) at an
//!   update's commit: SERVFAIL, and after `kill -9` and a restart the update
//!   is still not there.
//!
//! Needs `nsupdate` (bind9-dnsutils) and `knsupdate` (knot-dnsutils).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use authd_tests::hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use authd_tests::hickory_proto::rr::rdata::SOA;
use authd_tests::hickory_proto::rr::{Name, RData, Record, RecordType};
use authd_tests::{
    AuthdProcess, QueryBuilder, ReadOnlyFile, SmallDisk, load_zone_text, parse_reply, parse_rtype,
    query_tcp, query_udp, require_tool, run_with_timeout, tempdir, write_file,
};

/// `ddns.`: full control of every zone.
const DDNS: &str = "hmac-sha256:ddns.:8SAbJ0JpR9OwJgRTLHX8YMi1jUUT/gzPPRd6Wp44Dg4=";
/// `acme.`: only `_acme-challenge.www.example.com.` TXT.
const ACME: &str = "hmac-sha256:acme.:c2VjcmV0LXNoYTM4NC1rZXk=";
/// `other.`: a known key with no rights.
const OTHER: &str = "hmac-sha256:other.:c2VjcmV0LXNoYTUxMi1rZXk=";

const ZONE: &str = "$TTL 3600
@ SOA ns1 hostmaster 100 7200 3600 1209600 300
@ NS ns1
@ NS ns2
ns1 A 192.0.2.1
ns2 A 192.0.2.2
www A 192.0.2.10
www A 192.0.2.11
mail A 192.0.2.25
smtp CNAME mail
";

/// The `[[key]]` blocks for the keys above.
fn key_blocks() -> String {
    [DDNS, ACME, OTHER]
        .iter()
        .map(|k| {
            let mut parts = k.splitn(3, ':');
            let (alg, name, secret) = (parts.next(), parts.next(), parts.next());
            format!(
                "[[key]]\nname = \"{}\"\nalgorithm = \"{}\"\nsecret = \"{}\"\n",
                name.unwrap_or_default(),
                alg.unwrap_or_default(),
                secret.unwrap_or_default()
            )
        })
        .collect()
}

/// A test's authd (stopped first), over its DB of example.com., in its
/// folder (removed last).
struct Served {
    authd: AuthdProcess,
    db: PathBuf,
    dir: tempfile::TempDir,
}

/// Starts authd over a fresh DB holding example.com. from master-file text
/// `zone`, with `update` as its policy ([`start`]).
fn serve(zone: &str, update: &str) -> Served {
    let dir = tempdir();
    let db = dir.path().join("zones.sqlite3");
    load_zone_text(&db, "example.com.", zone);
    let authd = start(dir.path(), &db, update);
    Served { authd, db, dir }
}

/// Starts authd serving `db` (and mem.test. from memory) with `update`
/// (the `[update]` section and what follows it).
fn start(dir: &Path, db: &Path, update: &str) -> AuthdProcess {
    AuthdProcess::start(["--config".as_ref(), config(dir, db, update).as_os_str()])
}

/// Writes the configuration [`start`] runs authd with; returns its path.
fn config(dir: &Path, db: &Path, update: &str) -> PathBuf {
    let mem = write_file(
        dir,
        "mem.test.zone",
        "$TTL 300\n@ SOA ns hm 1 2 3 4 5\n@ NS ns\nns A 192.0.2.9\n",
    );
    let config = format!(
        "{}[[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n\
         [[datasource]]\ntype = \"memory\"\nzones = [{{ origin = \"mem.test.\", file = \"{}\" }}]\n\
         [transfer]\nallow = [\"127.0.0.1\"]\n{update}",
        key_blocks(),
        db.display(),
        mem.display()
    );
    write_file(dir, "authd.toml", &config)
}

/// The default policy of these tests: `ddns.` has full control, `acme.` the
/// ACME grant.
const POLICY: &str = "[update]\nallow = [\"key ddns.\"]\n\
    [[update.grant]]\nkey = \"acme.\"\nmatch = \"name\"\n\
    name = \"_acme-challenge.www.example.com.\"\ntypes = [\"TXT\"]\n";

/// Runs `tool` (`nsupdate` or `knsupdate`, maybe with arguments), signed with `key` when given, on
/// `commands` for zone `zone`; returns the rcode it reports (NOERROR when it
/// reports none) and its output.
fn send(
    tool: &str,
    addr: SocketAddr,
    key: Option<&str>,
    zone: &str,
    commands: &str,
) -> (String, String) {
    let script = format!(
        "server {} {}\nzone {zone}\n{commands}\nsend\n",
        addr.ip(),
        addr.port()
    );
    let script_file = std::env::temp_dir().join(format!(
        "authd-update-{}-{:?}.txt",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&script_file, script).expect("write script");
    // "nsupdate -v": the program and its own arguments (-v: over TCP).
    let mut words = tool.split_whitespace();
    let mut cmd = Command::new(words.next().unwrap_or(tool));
    cmd.args(words);
    if let Some(k) = key {
        cmd.args(["-y", k]);
    }
    cmd.arg(&script_file).stdin(Stdio::null());
    let out = run_with_timeout(&mut cmd, Duration::from_secs(60));
    let _ = std::fs::remove_file(&script_file);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // nsupdate: "update failed: NXDOMAIN"; knsupdate: "status: NXDOMAIN".
    let rcode = ["update failed: ", "status: "]
        .iter()
        .find_map(|p| {
            text.split(p).nth(1).map(|rest| {
                rest.chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect::<String>()
            })
        })
        .unwrap_or_else(|| "NOERROR".to_string());
    (rcode, text)
}

/// The RRset `name` (absolute) `rtype` as served now, "TTL RDATA" sorted;
/// empty for NXDOMAIN or NODATA (or a CNAME instead).
fn rrset(addr: SocketAddr, name: &str, rtype: &str) -> Vec<String> {
    let reply = parse_reply(&query_udp(addr, &QueryBuilder::new(name, rtype).wire()));
    let t = parse_rtype(rtype);
    let mut out: Vec<String> = reply
        .answers
        .iter()
        .filter(|r| r.record_type() == t && r.name.to_ascii().eq_ignore_ascii_case(name))
        .map(|r| format!("{} {}", r.ttl, r.data))
        .collect();
    out.sort();
    out
}

/// The rcode of a query for `name` `rtype`.
fn rcode(addr: SocketAddr, name: &str, rtype: &str) -> ResponseCode {
    parse_reply(&query_udp(addr, &QueryBuilder::new(name, rtype).wire()))
        .metadata
        .response_code
}

fn serial(addr: SocketAddr) -> u32 {
    let reply = parse_reply(&query_udp(
        addr,
        &QueryBuilder::new("example.com.", "SOA").wire(),
    ));
    match reply.answers.first().map(|r| &r.data) {
        Some(RData::SOA(s)) => s.serial,
        other => panic!("no SOA: {other:?}"),
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// nsupdate and knsupdate, signed: add, replace, delete an RR, an RRset and
/// a name, each visible at once, the serial one higher per update; every
/// prerequisite failing with its rcode and changing nothing; NOTZONE.
#[test]
fn nsupdate_and_knsupdate_add_replace_delete_and_prerequisites() {
    require_tool("nsupdate", "-V", "bind9-dnsutils");
    require_tool("knsupdate", "-V", "knot-dnsutils");
    let s = serve(ZONE, POLICY);
    let a = s.authd.addr();
    let z = "example.com.";
    for (i, tool) in ["nsupdate", "knsupdate"].into_iter().enumerate() {
        let host = format!("h{i}.example.com.");
        let before = serial(a);
        // Add two RRs: one update, serial + 1.
        let (rc, out) = send(
            tool,
            a,
            Some(DDNS),
            z,
            &format!("update add {host} 300 A 192.0.2.50\nupdate add {host} 300 A 192.0.2.51"),
        );
        assert_eq!(rc, "NOERROR", "{tool}: {out}");
        assert_eq!(
            rrset(a, &host, "A"),
            strings(&["300 192.0.2.50", "300 192.0.2.51"]),
            "{tool}"
        );
        assert_eq!(serial(a), before + 1, "{tool}");
        // A duplicate with another TTL: no second RR, the RRset's TTL follows.
        let (rc, _) = send(
            tool,
            a,
            Some(DDNS),
            z,
            &format!("update add {host} 600 A 192.0.2.50"),
        );
        assert_eq!(rc, "NOERROR");
        assert_eq!(
            rrset(a, &host, "A"),
            strings(&["600 192.0.2.50", "600 192.0.2.51"]),
            "{tool}"
        );
        // Replace: delete the RRset, add one RR.
        let (rc, _) = send(
            tool,
            a,
            Some(DDNS),
            z,
            &format!("update delete {host} A\nupdate add {host} 300 A 192.0.2.60"),
        );
        assert_eq!(rc, "NOERROR");
        assert_eq!(rrset(a, &host, "A"), strings(&["300 192.0.2.60"]), "{tool}");
        // Add a TXT, delete one RR of www's A RRset.
        let (rc, _) = send(
            tool,
            a,
            Some(DDNS),
            z,
            &format!("update add {host} 300 TXT \"hello\""),
        );
        assert_eq!(rc, "NOERROR");
        assert_eq!(rrset(a, &host, "TXT"), strings(&["300 hello"]));
        // Each prerequisite failing: its rcode, nothing changed.
        let s = serial(a);
        let failing = [
            ("prereq yxdomain nothere.example.com.", "NXDOMAIN"),
            ("prereq nxdomain www.example.com.", "YXDOMAIN"),
            ("prereq yxrrset www.example.com. TXT", "NXRRSET"),
            ("prereq nxrrset www.example.com. A", "YXRRSET"),
            ("prereq yxrrset www.example.com. A 192.0.2.10", "NXRRSET"),
        ];
        for (prereq, want) in failing {
            let (rc, out) = send(
                tool,
                a,
                Some(DDNS),
                z,
                &format!("{prereq}\nupdate delete {host} TXT"),
            );
            assert_eq!(rc, want, "{tool} {prereq}: {out}");
        }
        assert_eq!(serial(a), s, "{tool}: failed prerequisites change nothing");
        assert_eq!(rrset(a, &host, "TXT"), strings(&["300 hello"]));
        // The prerequisites holding: the update applies.
        let (rc, out) = send(
            tool,
            a,
            Some(DDNS),
            z,
            &format!(
                "prereq yxdomain {host}\nprereq nxdomain nothere.example.com.\n\
                 prereq yxrrset {host} TXT\nprereq nxrrset {host} MX\n\
                 prereq yxrrset {host} A 192.0.2.60\nupdate delete {host} TXT \"hello\""
            ),
        );
        assert_eq!(rc, "NOERROR", "{tool}: {out}");
        assert!(rrset(a, &host, "TXT").is_empty());
        assert_eq!(rrset(a, &host, "A"), strings(&["300 192.0.2.60"]));
        // Delete the name.
        let (rc, _) = send(tool, a, Some(DDNS), z, &format!("update delete {host}"));
        assert_eq!(rc, "NOERROR");
        assert_eq!(rcode(a, &host, "A"), ResponseCode::NXDomain, "{tool}");
        // A name outside the zone: NOTZONE.
        let (rc, _) = send(
            tool,
            a,
            Some(DDNS),
            z,
            "update add x.example.org. 300 A 192.0.2.1",
        );
        assert_eq!(rc, "NOTZONE", "{tool}");
        // Unsigned, and signed with a key that has no rights: REFUSED.
        for key in [None, Some(OTHER)] {
            let (rc, out) = send(
                tool,
                a,
                key,
                z,
                &format!("update add {host} 300 A 192.0.2.99"),
            );
            assert_eq!(rc, "REFUSED", "{tool} {key:?}: {out}");
        }
        assert_eq!(rcode(a, &host, "A"), ResponseCode::NXDomain);
    }
    // www's A RRset is untouched by all this.
    assert_eq!(
        rrset(a, "www.example.com.", "A"),
        strings(&["3600 192.0.2.10", "3600 192.0.2.11"])
    );
}

/// The apex rules (RFC 2136 §3.4.2): deleting the name or the NS RRset at
/// the apex keeps SOA and NS, the last NS is never deleted, a SOA with an
/// older serial is ignored and one with a newer serial replaces it; a CNAME
/// is not added beside other data, nor data beside a CNAME; a CNAME
/// replaces a CNAME.
#[test]
fn apex_and_cname_rules() {
    require_tool("nsupdate", "-V", "bind9-dnsutils");
    let s = serve(ZONE, POLICY);
    let a = s.authd.addr();
    let z = "example.com.";
    let ns = || rrset(a, z, "NS");
    let both = strings(&["3600 ns1.example.com.", "3600 ns2.example.com."]);
    let ok = |cmds: &str| {
        let (rc, out) = send("nsupdate", a, Some(DDNS), z, cmds);
        assert_eq!(rc, "NOERROR", "{cmds}: {out}");
    };
    ok("update delete example.com. NS");
    assert_eq!(ns(), both);
    ok("update delete example.com. SOA");
    ok("update delete example.com.");
    assert_eq!(ns(), both);
    assert_eq!(serial(a), 100, "nothing changed, serial kept");
    ok(
        "update delete example.com. NS ns1.example.com.\nupdate delete example.com. NS ns2.example.com.",
    );
    assert_eq!(ns(), strings(&["3600 ns2.example.com."]), "last NS kept");
    assert_eq!(serial(a), 101);
    // SOA: an older serial is ignored, a newer one replaces it.
    ok("update add example.com. 3600 SOA ns1.example.com. hostmaster.example.com. 50 1 2 3 4");
    assert_eq!(serial(a), 101);
    ok(
        "update add example.com. 3600 SOA ns1.example.com. hostmaster.example.com. 500 7200 3600 1209600 300",
    );
    assert_eq!(serial(a), 500);
    // CNAME exclusivity.
    ok("update add www.example.com. 300 CNAME mail.example.com.");
    assert!(rrset(a, "www.example.com.", "CNAME").is_empty());
    ok("update add smtp.example.com. 300 A 192.0.2.1");
    assert!(rrset(a, "smtp.example.com.", "A").is_empty());
    ok("update add smtp.example.com. 300 CNAME www.example.com.");
    assert_eq!(
        rrset(a, "smtp.example.com.", "CNAME"),
        strings(&["300 www.example.com."])
    );
    assert_eq!(serial(a), 501);
}

/// ACME DNS-01 as certbot's rfc2136 plugin does it: a key granted only
/// `_acme-challenge.www.example.com.` TXT adds the token, it is served at
/// once, the key can change nothing else, and the token is deleted; a
/// secondary following by IXFR from serial 100 sees both changes.
#[test]
fn acme_challenge_with_a_restricted_key_and_ixfr_after() {
    require_tool("nsupdate", "-V", "bind9-dnsutils");
    let s = serve(ZONE, POLICY);
    let a = s.authd.addr();
    let z = "example.com.";
    let name = "_acme-challenge.www.example.com.";
    let (rc, out) = send(
        "nsupdate",
        a,
        Some(ACME),
        z,
        &format!("update add {name} 60 TXT \"tok-123\""),
    );
    assert_eq!(rc, "NOERROR", "{out}");
    assert_eq!(rrset(a, name, "TXT"), strings(&["60 tok-123"]));
    // Elsewhere, or another type: REFUSED, nothing changed.
    for cmd in [
        format!("update add {name} 60 CNAME www.example.com."),
        "update add www.example.com. 60 TXT \"x\"".to_string(),
        "update delete www.example.com. A".to_string(),
        format!("update add {name} 60 TXT \"two\"\nupdate delete www.example.com."),
    ] {
        let (rc, out) = send("nsupdate", a, Some(ACME), z, &cmd);
        assert_eq!(rc, "REFUSED", "{cmd}: {out}");
    }
    assert_eq!(rrset(a, name, "TXT"), strings(&["60 tok-123"]));
    assert_eq!(rrset(a, "www.example.com.", "A").len(), 2);
    // The deletion over TCP (nsupdate -v).
    let (rc, _) = send(
        "nsupdate -v",
        a,
        Some(ACME),
        z,
        &format!("update delete {name} TXT"),
    );
    assert_eq!(rc, "NOERROR");
    assert_eq!(rcode(a, name, "TXT"), ResponseCode::NXDomain);
    assert_eq!(serial(a), 102);
    // IXFR from 100: SOA 102, (SOA 100, SOA 101, add TXT), (SOA 101, delete
    // TXT, SOA 102), SOA 102.
    let ixfr = ixfr(a, z, 100);
    assert_eq!(ixfr.metadata.response_code, ResponseCode::NoError);
    let got: Vec<String> = ixfr
        .answers
        .iter()
        .map(|r| match &r.data {
            RData::SOA(s) => format!("SOA {}", s.serial),
            d => format!("{} {} {d}", r.name, r.record_type()),
        })
        .collect();
    let txt = format!("{name} TXT tok-123");
    assert_eq!(
        got,
        strings(&[
            "SOA 102", "SOA 100", "SOA 101", &txt, "SOA 101", &txt, "SOA 102", "SOA 102"
        ])
    );
}

/// An IXFR for `zone` from `serial` over TCP (a small difference fits one
/// message).
fn ixfr(addr: SocketAddr, zone: &str, serial: u32) -> Message {
    let name = Name::from_ascii(zone).expect("zone");
    let mut msg = Message::new(77, MessageType::Query, OpCode::Query);
    msg.add_query(Query::query(name.clone(), RecordType::IXFR));
    let ns = Name::from_ascii("ns.invalid.").expect("name");
    let soa = SOA::new(ns.clone(), ns, serial, 1, 1, 1, 1);
    msg.add_authority(Record::from_rdata(name, 0, RData::SOA(soa)));
    parse_reply(&query_tcp(addr, &msg.to_vec().expect("encode")))
}

/// A zone served from memory, and a zone not served: NOTAUTH, logged with
/// why. An address-only `allow` entry, written out, lets unsigned updates
/// from that address in.
#[test]
fn memory_zone_notauth_and_address_only_allow() {
    require_tool("nsupdate", "-V", "bind9-dnsutils");
    let s = serve(
        ZONE,
        "[update]\nallow = [\"key ddns.\", \"127.0.0.1/32\"]\n",
    );
    let a = s.authd.addr();
    let (rc, _) = send(
        "nsupdate",
        a,
        Some(DDNS),
        "mem.test.",
        "update add x.mem.test. 300 A 192.0.2.1",
    );
    assert_eq!(rc, "NOTAUTH");
    assert!(
        s.authd
            .wait_for_log("only sqlite3 zones take updates", Duration::from_secs(5))
    );
    let (rc, _) = send(
        "nsupdate",
        a,
        Some(DDNS),
        "other.test.",
        "update add x.other.test. 300 A 192.0.2.1",
    );
    assert_eq!(rc, "NOTAUTH");
    let (rc, out) = send(
        "nsupdate",
        a,
        None,
        "example.com.",
        "update add u.example.com. 300 A 192.0.2.7",
    );
    assert_eq!(rc, "NOERROR", "{out}");
    assert_eq!(rrset(a, "u.example.com.", "A"), strings(&["300 192.0.2.7"]));
}

/// A DB another writer holds: SERVFAIL after the bounded wait, nothing
/// applied, logged as a warning (the storage is fine, only busy); once
/// released, the same update applies.
#[test]
fn busy_db_is_servfail_with_nothing_applied() {
    require_tool("nsupdate", "-V", "bind9-dnsutils");
    let s = serve(ZONE, POLICY);
    let a = s.authd.addr();
    let cmd = "update add busy.example.com. 300 A 192.0.2.5";
    let conn = rusqlite::Connection::open(&s.db).expect("open");
    conn.execute_batch("BEGIN IMMEDIATE; UPDATE zones SET dnssec = dnssec;")
        .expect("lock");
    let (rc, out) = send("nsupdate", a, Some(DDNS), "example.com.", cmd);
    assert_eq!(rc, "SERVFAIL", "{out}");
    let want = format!(
        "WARN authd::update: UPDATE of example.com. from 127.0.0.1 key ddns.: busy: \
         zone DB {}: starting the transaction failed: database is locked; nothing was changed \
         (rcode 2)",
        s.db.display()
    );
    assert!(
        s.authd.wait_for_log(&want, Duration::from_secs(5)),
        "{}",
        s.authd.stderr()
    );
    conn.execute_batch("ROLLBACK").expect("unlock");
    assert_eq!(rcode(a, "busy.example.com.", "A"), ResponseCode::NXDomain);
    assert_eq!(serial(a), 100);
    let (rc, _) = send("nsupdate", a, Some(DDNS), "example.com.", cmd);
    assert_eq!(rc, "NOERROR");
    assert_eq!(serial(a), 101);
}

/// Storage failures of an UPDATE are logged at ERROR, not among the
/// client refusals at INFO (a warning-level log filter must show a full
/// disk): a DB made read-only (`chattr +i` as root, mode 0444 otherwise)
/// before the first write, and a DB on a full disk (a tiny tmpfs: root
/// only, else that case is skipped, saying so). Each is SERVFAIL with
/// nothing applied.
#[test]
fn storage_failures_are_logged_at_error() {
    require_tool("nsupdate", "-V", "bind9-dnsutils");
    let s = serve(ZONE, POLICY);
    let a = s.authd.addr();
    match ReadOnlyFile::make(&s.db) {
        Err(why) => eprintln!("read-only case skipped: {why}"),
        Ok(read_only) => {
            let cmd = "update add ro.example.com. 300 A 192.0.2.5";
            let (rc, out) = send("nsupdate", a, Some(DDNS), "example.com.", cmd);
            assert_eq!(rc, "SERVFAIL", "{out}");
            let want = format!(
                "ERROR authd::update: UPDATE of example.com. from 127.0.0.1 key ddns.: storage \
                 failed: zone DB {} is not writable; nothing was changed (rcode 2)",
                s.db.display()
            );
            assert!(
                s.authd.wait_for_log(&want, Duration::from_secs(5)),
                "{}",
                s.authd.stderr()
            );
            drop(read_only);
            assert_eq!(rcode(a, "ro.example.com.", "A"), ResponseCode::NXDomain);
        }
    }
    drop(s);

    let disk = match SmallDisk::mount(1024) {
        Ok(d) => d,
        Err(why) => {
            eprintln!("full-disk case skipped: {why}");
            return;
        }
    };
    let db = disk.path().join("zones.sqlite3");
    load_zone_text(&db, "example.com.", ZONE);
    let dir = tempdir();
    let authd = start(dir.path(), &db, POLICY);
    let a = authd.addr();
    // A first update opens the writer; then the disk fills up.
    let (rc, out) = send(
        "nsupdate",
        a,
        Some(DDNS),
        "example.com.",
        "update add first.example.com. 300 A 192.0.2.6",
    );
    assert_eq!(rc, "NOERROR", "{out}");
    disk.fill();
    let big = format!("\"{}\"", "x".repeat(250));
    let cmd = (0..8)
        .map(|i| format!("update add full{i}.example.com. 300 TXT {big}"))
        .collect::<Vec<_>>()
        .join("\n");
    let (rc, out) = send("nsupdate", a, Some(DDNS), "example.com.", &cmd);
    assert_eq!(rc, "SERVFAIL", "{out}");
    let want = format!(
        "ERROR authd::update: UPDATE of example.com. from 127.0.0.1 key ddns.: storage failed: \
         zone DB {}: committing failed: database or disk is full; nothing was changed (rcode 2)",
        db.display()
    );
    assert!(
        authd.wait_for_log(&want, Duration::from_secs(5)),
        "{}",
        authd.stderr()
    );
    assert_eq!(
        rcode(a, "full0.example.com.", "TXT"),
        ResponseCode::NXDomain
    );
    assert_eq!(serial(a), 101);
    drop(authd);
}

/// The writer connection kept between updates holds no lock, transaction
/// or snapshot: between two updates another process takes the write lock at
/// once and `zone update` commits; the next update sees that commit (a
/// prerequisite on the RR it added holds) and moves the serial on from it.
#[test]
fn kept_writer_sees_writes_made_between_updates() {
    let s = serve(ZONE, "[update]\nallow = [\"127.0.0.1/32\"]\n");
    let a = s.authd.addr();
    let add = |name: &str, last: u8, prereqs: &[Vec<u8>]| {
        let owner = wire_name(name);
        let msg = raw_update(
            6,
            prereqs,
            &[rr(&owner, 1, 1, 300, &[192, 0, 2, last])],
            None,
        );
        parse_reply(&query_udp(a, &msg)).metadata.response_code
    };
    assert_eq!(add("k1.example.com.", 1, &[]), ResponseCode::NoError);
    assert_eq!(serial(a), 101);
    // No wait at all: the write lock is free between updates.
    let conn = rusqlite::Connection::open(&s.db).expect("open");
    conn.busy_timeout(Duration::ZERO).expect("busy timeout");
    conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK;")
        .expect("the write lock is free between updates");
    drop(conn);
    let out = Command::new(authd_tests::binary("zone"))
        .arg("update")
        .arg("--db")
        .arg(&s.db)
        .args(["example.com.", "--add", "outside 300 IN A 192.0.2.77"])
        .output()
        .expect("run zone update");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // "RRset exists" (value-independent) on the RR zone update added.
    let outside = rr(&wire_name("outside.example.com."), 1, 255, 0, &[]);
    assert_eq!(add("k2.example.com.", 2, &[outside]), ResponseCode::NoError);
    assert_eq!(serial(a), 103);
    assert_eq!(
        rrset(a, "outside.example.com.", "A"),
        strings(&["300 192.0.2.77"])
    );
    assert_eq!(
        rrset(a, "k2.example.com.", "A"),
        strings(&["300 192.0.2.2"])
    );
}

/// `name` (absolute, dotted) in wire form, uncompressed.
fn wire_name(name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for label in name.trim_end_matches('.').split('.') {
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out
}

/// One RR in wire form: owner bytes as given, then type, class, TTL, RDATA.
fn rr(owner: &[u8], rtype: u16, class: u16, ttl: u32, rdata: &[u8]) -> Vec<u8> {
    let mut out = owner.to_vec();
    out.extend_from_slice(&rtype.to_be_bytes());
    out.extend_from_slice(&class.to_be_bytes());
    out.extend_from_slice(&ttl.to_be_bytes());
    out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    out.extend_from_slice(rdata);
    out
}

/// An UPDATE for example.com. (zone type `ztype`) with these prerequisite
/// and update RRs; `upcount` overrides the update count when given.
fn raw_update(
    ztype: u16,
    prereqs: &[Vec<u8>],
    updates: &[Vec<u8>],
    upcount: Option<u16>,
) -> Vec<u8> {
    let mut m = vec![0x12, 0x34, 5 << 3, 0, 0, 1];
    m.extend_from_slice(&(prereqs.len() as u16).to_be_bytes());
    m.extend_from_slice(&upcount.unwrap_or(updates.len() as u16).to_be_bytes());
    m.extend_from_slice(&[0, 0]);
    m.extend_from_slice(&wire_name("example.com."));
    m.extend_from_slice(&ztype.to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes());
    for r in prereqs.iter().chain(updates) {
        m.extend_from_slice(r);
    }
    m
}

/// Malformed updates, as an attacker could send them over a real socket:
/// each gets FORMERR (never a panic, nothing changed), and a well-formed one
/// with a compressed owner and compressed RDATA (MX) then applies.
#[test]
fn malformed_updates_get_formerr() {
    let s = serve(ZONE, "[update]\nallow = [\"127.0.0.1/32\"]\n");
    let a = s.authd.addr();
    let www = wire_name("www.example.com.");
    let a_rdata = [192, 0, 2, 1];
    // A pointer to the zone name at offset 12.
    let ptr = [0xC0, 12];
    let forward = [3, b'f', b'o', b'o', 0xC0, 0xFF];
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "zone type A",
            raw_update(1, &[], &[rr(&www, 1, 1, 300, &a_rdata)], None),
        ),
        (
            "prerequisite TTL",
            raw_update(6, &[rr(&www, 255, 255, 1, &[])], &[], None),
        ),
        (
            "prerequisite ANY with RDATA",
            raw_update(6, &[rr(&www, 1, 255, 0, &a_rdata)], &[], None),
        ),
        (
            "prerequisite class CH",
            raw_update(6, &[rr(&www, 1, 3, 0, &[])], &[], None),
        ),
        (
            "deletion with a TTL",
            raw_update(6, &[], &[rr(&www, 1, 255, 300, &[])], None),
        ),
        (
            "AXFR added",
            raw_update(6, &[], &[rr(&www, 252, 1, 300, &a_rdata)], None),
        ),
        (
            "A of 3 bytes",
            raw_update(6, &[], &[rr(&www, 1, 1, 300, &a_rdata[..3])], None),
        ),
        (
            "forward pointer",
            raw_update(6, &[], &[rr(&forward, 1, 1, 300, &a_rdata)], None),
        ),
        (
            "count past the end",
            raw_update(6, &[], &[rr(&www, 1, 1, 300, &a_rdata)], Some(2)),
        ),
        ("cut short", {
            let mut m = raw_update(6, &[], &[rr(&www, 1, 1, 300, &a_rdata)], None);
            m.truncate(m.len() - 2);
            m
        }),
    ];
    for (what, msg) in &cases {
        let reply = parse_reply(&query_udp(a, msg));
        assert_eq!(
            reply.metadata.response_code,
            ResponseCode::FormErr,
            "{what}"
        );
        assert_eq!(reply.metadata.op_code, OpCode::Update, "{what}");
    }
    assert_eq!(serial(a), 100);
    // mx.example.com. (owner: "mx" + pointer to the zone) MX 10 mail + pointer.
    let owner = [&[2, b'm', b'x'][..], &ptr].concat();
    let rdata = [&[0, 10, 4, b'm', b'a', b'i', b'l'][..], &ptr].concat();
    let msg = raw_update(6, &[], &[rr(&owner, 15, 1, 300, &rdata)], None);
    let reply = parse_reply(&query_udp(a, &msg));
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert_eq!(
        rrset(a, "mx.example.com.", "MX"),
        strings(&["300 10 mail.example.com."])
    );
    // A TTL with the top bit set is read as 0 (RFC 2181 §8), not stored as
    // a bad TTL (that was SERVFAIL, naming a DB row).
    let t = wire_name("t.example.com.");
    let msg = raw_update(6, &[], &[rr(&t, 1, 1, 0x8000_0000, &a_rdata)], None);
    let reply = parse_reply(&query_udp(a, &msg));
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert_eq!(rrset(a, "t.example.com.", "A"), strings(&["0 192.0.2.1"]));
}

/// Response rate limiting (on, 2 responses a second, no slip) never drops a
/// successful UPDATE's reply: 12 updates in a row over UDP from one address
/// each get NOERROR at the first try (a dropped reply costs nsupdate 3 s).
/// A failed UPDATE's reply is an error and is still limited.
#[test]
fn rate_limiting_spares_successful_updates() {
    let dir = tempdir();
    let db = dir.path().join("zones.sqlite3");
    load_zone_text(&db, "example.com.", ZONE);
    let config = format!(
        "[[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n\
         [update]\nallow = [\"127.0.0.1/32\"]\n",
        db.display()
    );
    let path = write_file(dir.path(), "authd.toml", &config);
    let mut cmd = Command::new(authd_tests::binary("authd"));
    cmd.args(["--config".as_ref(), path.as_os_str()])
        .args(["--listen", "127.0.0.1:0"])
        .env("AUTHD_RRL__ENABLED", "true")
        .env("AUTHD_RRL__RESPONSES_PER_SECOND", "2")
        .env("AUTHD_RRL__SLIP", "0");
    let authd = AuthdProcess::start_command(cmd, 1);
    let a = authd.addr();
    let owner = wire_name("rrl.example.com.");
    for i in 0..12u8 {
        let msg = raw_update(6, &[], &[rr(&owner, 1, 1, 300, &[192, 0, 2, i])], None);
        let reply = authd_tests::try_query_udp(a, &msg, 1)
            .unwrap_or_else(|| panic!("update {i}: no reply (rate limited)"));
        assert_eq!(
            parse_reply(&reply).metadata.response_code,
            ResponseCode::NoError,
            "update {i}"
        );
    }
    // FORMERR (zone type A): errors, limited; some get no reply.
    let bad = raw_update(1, &[], &[rr(&owner, 1, 1, 300, &[192, 0, 2, 99])], None);
    let unanswered = (0..4)
        .filter(|_| authd_tests::try_query_udp(a, &bad, 1).is_none())
        .count();
    assert!(unanswered > 0, "failed updates were not rate limited");
    drop(authd);
}

/// Concurrent updates from several clients: each applies once, in some
/// order, and the serial moves by exactly one per update.
#[test]
fn concurrent_updates_serialise() {
    require_tool("nsupdate", "-V", "bind9-dnsutils");
    let s = serve(ZONE, POLICY);
    let a = s.authd.addr();
    std::thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || {
                for i in 0..5 {
                    let (rc, out) = send(
                        "nsupdate",
                        a,
                        Some(DDNS),
                        "example.com.",
                        &format!(
                            "update add c{t}-{i}.example.com. 300 A 192.0.2.{}",
                            t * 10 + i
                        ),
                    );
                    assert_eq!(rc, "NOERROR", "{out}");
                }
            });
        }
    });
    assert_eq!(serial(a), 120);
    for t in 0..4 {
        for i in 0..5 {
            assert_eq!(
                rrset(a, &format!("c{t}-{i}.example.com."), "A"),
                vec![format!("300 192.0.2.{}", t * 10 + i)]
            );
        }
    }
}

/// A pre-signed zone (DNSKEY at the apex) is REFUSED unless the operator
/// opts in for it (`[[update.zone]] dnssec = true`), which SIGHUP applies;
/// SIGHUP applies a changed `allow` list too.
#[test]
fn signed_zone_refused_unless_opted_in_and_sighup_applies_policy() {
    require_tool("nsupdate", "-V", "bind9-dnsutils");
    let s = serve(
        &format!(
            "{ZONE}@ DNSKEY 257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==\n"
        ),
        POLICY,
    );
    let (authd, dir) = (&s.authd, s.dir.path());
    let a = authd.addr();
    let cmd = "update add s.example.com. 300 A 192.0.2.3";
    let (rc, _) = send("nsupdate", a, Some(DDNS), "example.com.", cmd);
    assert_eq!(rc, "REFUSED");
    assert!(authd.wait_for_log("the zone is signed", Duration::from_secs(5)));
    // Opted in, and `ddns.` replaced by `other.` for this zone.
    let text = std::fs::read_to_string(dir.join("authd.toml")).expect("config");
    let text = format!(
        "{text}[[update.zone]]\norigin = \"example.com.\"\nallow = [\"key other.\"]\ndnssec = true\n"
    );
    let tmp = write_file(dir, "authd.toml.new", &text);
    std::fs::rename(tmp, dir.join("authd.toml")).expect("replace config");
    authd.signal("HUP");
    assert!(authd.wait_for_log("zones reloaded, ", Duration::from_secs(30)));
    let (rc, _) = send("nsupdate", a, Some(DDNS), "example.com.", cmd);
    assert_eq!(rc, "REFUSED", "ddns. no longer has control of example.com.");
    let (rc, out) = send("nsupdate", a, Some(OTHER), "example.com.", cmd);
    assert_eq!(rc, "NOERROR", "{out}");
    assert_eq!(rrset(a, "s.example.com.", "A"), strings(&["300 192.0.2.3"]));
}

/// A UDP UPDATE that waits for a DB lock another process holds is answered
/// off the query worker: with one UDP worker, a query sent right after it
/// is answered first (before, it waited in the worker behind the UPDATE's
/// 2 s lock wait), then the UPDATE gets SERVFAIL with nothing written.
#[test]
fn udp_update_waiting_on_a_lock_delays_no_query() {
    let s = serve(
        ZONE,
        "[update]\nallow = [\"127.0.0.1/32\"]\n[server]\nudp_workers = 1\n",
    );
    let a = s.authd.addr();
    let conn = rusqlite::Connection::open(&s.db).expect("open");
    conn.execute_batch("BEGIN IMMEDIATE; UPDATE zones SET dnssec = dnssec;")
        .expect("lock");
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut update = raw_update(
        6,
        &[],
        &[rr(
            &wire_name("locked.example.com."),
            1,
            1,
            300,
            &[192, 0, 2, 8],
        )],
        None,
    );
    update[0..2].copy_from_slice(&0x0001u16.to_be_bytes());
    let mut query = QueryBuilder::new("ns1.example.com.", "A").wire();
    query[0..2].copy_from_slice(&0x0002u16.to_be_bytes());
    sock.send_to(&update, a).expect("send update");
    sock.send_to(&query, a).expect("send query");
    let mut buf = [0u8; 512];
    let mut ids = Vec::new();
    let mut rcodes = Vec::new();
    for _ in 0..2 {
        let n = sock.recv(&mut buf).expect("a reply");
        let reply = parse_reply(&buf[..n]);
        ids.push(reply.metadata.id);
        rcodes.push(reply.metadata.response_code);
    }
    assert_eq!(
        ids,
        [2, 1],
        "the query is answered before the waiting UPDATE"
    );
    assert_eq!(rcodes, [ResponseCode::NoError, ResponseCode::ServFail]);
    conn.execute_batch("ROLLBACK").expect("unlock");
    assert_eq!(rcode(a, "locked.example.com.", "A"), ResponseCode::NXDomain);
    assert_eq!(serial(a), 100);
}

/// A DB truncated by another process while served (issue 24: 629 updates
/// acknowledged, none readable after a restart): the update before is
/// applied, the one after gets SERVFAIL with a log line naming the file as
/// corrupt, not NOERROR.
#[test]
fn a_db_truncated_while_served_takes_no_update() {
    let mut zone = String::from(ZONE);
    for i in 0..2000 {
        zone.push_str(&format!("host{i} A 192.0.2.{}\n", i % 250));
    }
    let s = serve(&zone, "[update]\nallow = [\"127.0.0.1/32\"]\n");
    let a = s.authd.addr();
    let add = |name: &str| {
        let msg = raw_update(
            6,
            &[],
            &[rr(&wire_name(name), 1, 1, 300, &[192, 0, 2, 1])],
            None,
        );
        parse_reply(&query_udp(a, &msg)).metadata.response_code
    };
    assert_eq!(add("t1.example.com."), ResponseCode::NoError);
    let len = std::fs::metadata(&s.db).expect("metadata").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&s.db)
        .and_then(|f| f.set_len(len / 2))
        .expect("truncate");
    assert_eq!(add("t2.example.com."), ResponseCode::ServFail);
    let line = format!("zone DB {} is corrupt", s.db.display());
    assert!(
        s.authd.wait_for_log(&line, Duration::from_secs(5)),
        "{}",
        s.authd.stderr()
    );
    // Down to two pages (the zone table unreadable): the broken DB fails its
    // own zone only; the memory zone beside it is answered, a name in no
    // zone is REFUSED as before (not SERVFAIL for every query).
    std::fs::OpenOptions::new()
        .write(true)
        .open(&s.db)
        .and_then(|f| f.set_len(8192))
        .expect("truncate");
    std::thread::sleep(Duration::from_millis(1200));
    let ask = |name: &str| {
        let q = QueryBuilder::new(name, "A").wire();
        parse_reply(&query_udp(a, &q)).metadata.response_code
    };
    assert_eq!(
        ask("ns.mem.test."),
        ResponseCode::NoError,
        "{}",
        s.authd.stderr()
    );
    assert_eq!(ask("www.example.net."), ResponseCode::Refused);
    assert_eq!(ask("host7.example.com."), ResponseCode::ServFail);
}

/// An `LD_PRELOAD` shim: `fsync` and `fdatasync` of a file under
/// `$FSYNC_FAIL_DIR` fail once with EIO while `$FSYNC_FAIL_TRIGGER` exists
/// (the shim removes it: a transient disk error).
const FSYNC_SHIM: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static int failing(int fd) {
    const char *dir = getenv("FSYNC_FAIL_DIR"), *trigger = getenv("FSYNC_FAIL_TRIGGER");
    char link[64], path[4096];
    ssize_t n;
    if (!dir || !trigger || access(trigger, F_OK) != 0) return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    n = readlink(link, path, sizeof path - 1);
    if (n < 0) return 0;
    path[n] = 0;
    if (strncmp(path, dir, strlen(dir)) != 0) return 0;
    return unlink(trigger) == 0;
}
int fsync(int fd) {
    static int (*real)(int);
    if (failing(fd)) { errno = EIO; return -1; }
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    return real(fd);
}
int fdatasync(int fd) {
    static int (*real)(int);
    if (failing(fd)) { errno = EIO; return -1; }
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    return real(fd);
}
"#;

/// "A reply that says nothing was changed must be true after a crash too"
/// (issue 24): the commit of an update hits an fsync error (EIO), the
/// update gets SERVFAIL, authd is killed with SIGKILL at once and started
/// again on the same files (WAL recovery reads the `-wal` as it was left):
/// the update before is there, the refused one is not.
#[test]
fn an_update_refused_at_fsync_stays_refused_after_kill_9() {
    require_tool("gcc", "--version", "gcc");
    let dir = tempdir();
    let shim_c = write_file(dir.path(), "fsync_shim.c", FSYNC_SHIM);
    let shim = dir.path().join("fsync_shim.so");
    let out = Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&shim)
        .arg(&shim_c)
        .arg("-ldl")
        .output()
        .expect("run gcc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("mkdir");
    let db = data.join("zones.sqlite3");
    load_zone_text(&db, "example.com.", ZONE);
    let policy = "[update]\nallow = [\"127.0.0.1/32\"]\n";
    let trigger = dir.path().join("fail-next-fsync");
    let mut cmd = Command::new(authd_tests::binary("authd"));
    cmd.arg("--config")
        .arg(config(dir.path(), &db, policy))
        .args(["--listen", "127.0.0.1:0"])
        .env("LD_PRELOAD", &shim)
        .env("FSYNC_FAIL_DIR", &data)
        .env("FSYNC_FAIL_TRIGGER", &trigger);
    let mut authd = AuthdProcess::start_command(cmd, 1);
    let add = |a: SocketAddr, name: &str| {
        let msg = raw_update(
            6,
            &[],
            &[rr(&wire_name(name), 1, 1, 300, &[192, 0, 2, 1])],
            None,
        );
        parse_reply(&query_udp(a, &msg)).metadata.response_code
    };
    assert_eq!(
        add(authd.addr(), "kept.example.com."),
        ResponseCode::NoError
    );
    write_file(dir.path(), "fail-next-fsync", "");
    assert_eq!(
        add(authd.addr(), "refused.example.com."),
        ResponseCode::ServFail
    );
    assert!(!trigger.exists(), "the shim failed an fsync");
    authd.signal("KILL");
    assert!(
        authd.wait_timeout(Duration::from_secs(5)).is_some(),
        "killed"
    );
    drop(authd);
    let authd = start(dir.path(), &db, policy);
    let a = authd.addr();
    assert_eq!(serial(a), 101, "{}", authd.stderr());
    assert_eq!(
        rrset(a, "kept.example.com.", "A"),
        strings(&["300 192.0.2.1"])
    );
    assert_eq!(
        rcode(a, "refused.example.com.", "A"),
        ResponseCode::NXDomain
    );
}
