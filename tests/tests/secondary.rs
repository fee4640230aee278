//! End to end: authd as a secondary of another authd (auth/src/secondary.rs,
//! auth/src/xfrin.rs), over real sockets on 127.0.0.1.
//!
//! - the first start transfers the zone by AXFR and serves it from the
//!   secondary DB; a change on the primary arrives by NOTIFY (the SOA REFRESH
//!   is an hour), by an AXFR-style IXFR reply, then a journaled change by
//!   incremental IXFR; the secondary re-serves the zone by AXFR and by IXFR
//!   from its own journal; a restart does not transfer a fresh zone again;
//! - with no NOTIFY, the refresh timer catches up; with the primary stopped
//!   the zone expires (SERVFAIL, also after a restart), and recovers when
//!   the primary returns;
//! - a broken primary never replaces good data; TSIG per primary; SIGHUP
//!   adds and removes secondary zones.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use authd_tests::hickory_proto::op::{Message, ResponseCode};
use authd_tests::hickory_proto::rr::RData;
use authd_tests::{
    AuthdProcess, QueryBuilder, SmallDisk, binary, eventually, free_port, load_zone_text,
    load_zone_text_with, parse_reply, tempdir, try_query_udp, write_file,
};

/// The zone at `serial` (www's address ends in the serial), with SOA
/// REFRESH `refresh`, RETRY 1 and EXPIRE `expire` seconds.
fn zone(serial: u32, refresh: u32, expire: u32) -> String {
    format!(
        "$TTL 300\n@ SOA ns1 hostmaster {serial} {refresh} 1 {expire} 60\n@ NS ns1\n\
         ns1 A 192.0.2.1\nwww A 192.0.2.{serial}\nmail MX 10 ns1\n"
    )
}

/// Starts authd with config `text` (written to `dir/name`) on 127.0.0.1:`port`.
fn start(dir: &Path, name: &str, text: &str, port: u16) -> AuthdProcess {
    start_at(dir, name, text, "127.0.0.1", port)
}

/// `start`, listening on `ip` (another loopback address: another host).
fn start_at(dir: &Path, name: &str, text: &str, ip: &str, port: u16) -> AuthdProcess {
    let config = write_file(dir, name, text);
    let mut cmd = Command::new(binary("authd"));
    cmd.arg("--config")
        .arg(&config)
        .args(["--listen", &format!("{ip}:{port}")]);
    AuthdProcess::start_command(cmd, 1)
}

/// A primary serving `db` with transfers allowed from loopback, notifying
/// `notify` (if any).
fn primary(dir: &Path, db: &Path, port: u16, notify: Option<u16>) -> AuthdProcess {
    let mut text = format!(
        "[[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n[transfer]\nallow = [\"127.0.0.1\"]\n",
        db.display()
    );
    if let Some(n) = notify {
        text.push_str(&format!("[notify]\ntargets = [\"127.0.0.1:{n}\"]\n"));
    }
    start(dir, "primary.toml", &text, port)
}

/// A secondary of example.com. from the primary at `primary_port`, into `db`.
fn secondary(dir: &Path, db: &Path, primary_port: u16, port: u16) -> AuthdProcess {
    secondary_in(dir, db, primary_port, port, false)
}

/// [`secondary`], served from memory (kept in `db`) when `memory`.
fn secondary_in(dir: &Path, db: &Path, primary_port: u16, port: u16, memory: bool) -> AuthdProcess {
    let text = format!(
        "[[secondary]]\nzone = \"example.com.\"\nprimaries = [\"127.0.0.1:{primary_port}\"]\n\
         file = \"{}\"\nmemory = {memory}\nmin_refresh = 1\n[transfer]\nallow = [\"127.0.0.1\"]\n",
        db.display()
    );
    start(dir, "secondary.toml", &text, port)
}

fn ask(addr: SocketAddr, qname: &str, qtype: &str) -> Option<Message> {
    let wire = QueryBuilder::new(qname, qtype).wire();
    try_query_udp(addr, &wire, 3).map(|r| parse_reply(&r))
}

/// www.example.com.'s address as served at `addr` (`None`: no answer).
fn www(addr: SocketAddr) -> Option<String> {
    let reply = ask(addr, "www.example.com.", "A")?;
    reply.answers.iter().find_map(|r| match &r.data {
        RData::A(a) => Some(a.to_string()),
        _ => None,
    })
}

/// Whether `authd` has logged `needle` (waiting up to 5 s: the log is read
/// by another thread).
fn logged(authd: &AuthdProcess, needle: &str) -> bool {
    authd.wait_for_log(needle, Duration::from_secs(5))
}

/// `zone update` of example.com. in `db`: `delete` out, `add` in.
fn zone_update(db: &Path, delete: &str, add: &str) {
    let out = Command::new(binary("zone"))
        .args(["update", "--db"])
        .arg(db)
        .args(["example.com", "--delete", delete, "--add", add])
        .output()
        .expect("zone update");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// dig's output for `example.com. QTYPE` over TCP to 127.0.0.1:`port`,
/// after checking it holds `n` SOA records.
fn assert_soas(port: u16, qtype: &str, n: usize) -> String {
    let text = dig_tcp(port, qtype);
    assert_eq!(
        text.lines().filter(|l| l.contains("\tSOA\t")).count(),
        n,
        "{qtype}: {text}"
    );
    text
}

/// Waits up to 15 s for `s` to answer www.example.com. A with `address`.
fn serves(s: &AuthdProcess, address: &str) {
    assert!(
        eventually(15, || www(s.addr()).as_deref() == Some(address)),
        "www is not {address}:\n{}",
        s.stderr()
    );
}

/// dig's output for `example.com. QTYPE` over TCP to 127.0.0.1:`port`.
fn dig_tcp(port: u16, qtype: &str) -> String {
    let out = Command::new("dig")
        .args(["+tcp", "+time=5", "-p", &port.to_string(), "@127.0.0.1"])
        .args(["example.com.", qtype])
        .output()
        .expect("dig");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn dbs(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join("primary.sqlite3"), dir.join("secondary.sqlite3"))
}

#[test]
fn follows_an_authd_primary_by_axfr_and_notify() {
    follows_an_authd_primary(false);
}

/// The same, the secondary zone served from memory (`memory = true`) and
/// kept in its DB: every transfer rebuilds the snapshot, downstream IXFR
/// comes from the DB's journal, and a restart serves the zone from the DB
/// before any transfer (the primary is stopped by then).
#[test]
fn follows_an_authd_primary_from_memory() {
    follows_an_authd_primary(true);
}

fn follows_an_authd_primary(memory: bool) {
    let dir = tempdir();
    let (pdb, sdb) = dbs(dir.path());
    load_zone_text(&pdb, "example.com.", &zone(1, 3600, 86400));
    let sport = free_port();
    let mut p = primary(dir.path(), &pdb, free_port(), Some(sport));
    let secondary = |dir: &Path, db: &Path, primary_port: u16, port: u16| {
        secondary_in(dir, db, primary_port, port, memory)
    };
    let mut s = secondary(dir.path(), &sdb, p.addr().port(), sport);
    if memory {
        assert!(logged(&s, "serving 0 zones from memory:"), "{}", s.stderr());
    }
    assert!(
        eventually(10, || www(s.addr()).as_deref() == Some("192.0.2.1")),
        "secondary never served the zone:\n{}",
        s.stderr()
    );
    assert!(logged(&s, "AXFR from 127.0.0.1"), "{}", s.stderr());
    // MX target (compressed on the wire) survives the transfer.
    let mx = ask(s.addr(), "mail.example.com.", "MX").expect("MX reply");
    assert_eq!(mx.answers.len(), 1, "{mx:?}");

    // A change on the primary: NOTIFY (the REFRESH is an hour) brings it.
    // Loaded without journaling its difference, so the primary has none.
    load_zone_text_with(
        &pdb,
        "example.com.",
        &zone(2, 3600, 86400),
        &["--keep-journal"],
    );
    assert!(
        eventually(15, || www(s.addr()).as_deref() == Some("192.0.2.2")),
        "the change never arrived:\nsecondary:\n{}\nprimary:\n{}",
        s.stderr(),
        p.stderr()
    );
    assert!(logged(&s, "NOTIFY received"), "{}", s.stderr());
    // The primary has no journal for that change: an AXFR-style IXFR reply.
    assert!(logged(&s, "IXFR (AXFR-style) from"), "{}", s.stderr());

    // An incremental change on the primary (journaled by `zone update`):
    // IXFR brings the difference, appended to the secondary's journal.
    zone_update(&pdb, "www A 192.0.2.2", "www A 192.0.2.3");
    assert!(
        eventually(15, || www(s.addr()).as_deref() == Some("192.0.2.3")),
        "the difference never arrived:\n{}",
        s.stderr()
    );
    assert!(
        logged(&s, "serial 2 -> 3, 1 difference(s)"),
        "{}",
        s.stderr()
    );
    // Downstream: IXFR from the secondary answers the difference from its
    // own journal (SOA 3, SOA 2, the deletion, SOA 3, the addition, SOA 3).
    assert_soas(sport, "IXFR=2", 4);

    // A whole-zone change (serial 4, loaded without journaling its
    // difference: no journal on the primary) clears the secondary's journal;
    // a journaled change 4 -> 5 follows. IXFR from 2 cannot be bridged any
    // more: the whole zone, not 2 -> 3 then 4 -> 5.
    load_zone_text_with(
        &pdb,
        "example.com.",
        &zone(4, 3600, 86400),
        &["--keep-journal"],
    );
    serves(&s, "192.0.2.4");
    zone_update(&pdb, "www A 192.0.2.4", "www A 192.0.2.5");
    serves(&s, "192.0.2.5");
    assert_soas(sport, "IXFR=2", 2);
    assert_soas(sport, "IXFR=4", 4);

    // Re-serving: the secondary answers AXFR from its own DB.
    let text = assert_soas(sport, "AXFR", 2);
    assert!(text.contains("192.0.2.5"), "{text}");

    // A restart neither re-transfers the fresh zone nor stops serving it.
    s.terminate();
    let primary_port = p.addr().port();
    if memory {
        // From the DB alone: no primary to transfer from.
        p.terminate();
    }
    let s = secondary(dir.path(), &sdb, primary_port, sport);
    assert_eq!(www(s.addr()).as_deref(), Some("192.0.2.5"));
    std::thread::sleep(Duration::from_secs(2));
    assert!(!s.stderr().contains("XFR"), "{}", s.stderr());
    assert!(logged(&s, "serial 5, not expired"), "{}", s.stderr());
    if memory {
        assert!(logged(&s, "serving 1 zone from memory:"), "{}", s.stderr());
    }
}

/// The log line of `authd` holding `head`, waiting up to 15 s for it.
fn log_line(authd: &AuthdProcess, head: &str) -> String {
    assert!(
        authd.wait_for_log(head, Duration::from_secs(15)),
        "no {head:?}:\n{}",
        authd.stderr()
    );
    let log = authd.stderr();
    log.lines()
        .find(|l| l.contains(head))
        .unwrap_or_default()
        .to_string()
}

/// A transfer in that cannot be stored: a secondary DB another writer
/// holds is a warning (busy, retried: the change arrives once released);
/// a full disk (the DB on a tiny tmpfs: root only, else that case is
/// skipped, saying so) is an ERROR naming the DB, not hidden among the
/// warnings about primaries that do not answer.
#[test]
fn storage_failures_of_transfers_in_are_errors_and_busy_is_a_warning() {
    let dir = tempdir();
    let disk = SmallDisk::mount(2048);
    let sdb = match &disk {
        Ok(d) => d.path().join("secondary.sqlite3"),
        Err(why) => {
            eprintln!("full-disk case skipped: {why}");
            dir.path().join("secondary.sqlite3")
        }
    };
    let pdb = dir.path().join("primary.sqlite3");
    load_zone_text(&pdb, "example.com.", &zone(1, 3600, 86400));
    let sport = free_port();
    let p = primary(dir.path(), &pdb, free_port(), Some(sport));
    let pport = p.addr().port();
    let s = secondary(dir.path(), &sdb, pport, sport);
    serves(&s, "192.0.2.1");

    let conn = rusqlite::Connection::open(&sdb).expect("open");
    conn.execute_batch("BEGIN IMMEDIATE; UPDATE zones SET dnssec = dnssec;")
        .expect("lock");
    load_zone_text(&pdb, "example.com.", &zone(2, 3600, 86400));
    let line = log_line(
        &s,
        &format!(
            "WARN authd::secondary: secondary zone example.com.: refresh from 127.0.0.1:{pport} \
             failed: busy: zone DB {}: ",
            sdb.display()
        ),
    );
    assert!(line.ends_with("failed: database is locked"), "{line}");
    assert!(!s.stderr().contains("ERROR"), "{}", s.stderr());
    conn.execute_batch("ROLLBACK").expect("unlock");
    drop(conn);
    serves(&s, "192.0.2.2");

    let Ok(disk) = disk else { return };
    disk.fill();
    load_zone_text(&pdb, "example.com.", &zone(3, 3600, 86400));
    let line = log_line(
        &s,
        &format!(
            "ERROR authd::secondary: secondary zone example.com.: refresh from \
             127.0.0.1:{pport} failed: storage: zone DB {}: ",
            sdb.display()
        ),
    );
    assert!(line.ends_with("failed: database or disk is full"), "{line}");
    assert_eq!(www(s.addr()).as_deref(), Some("192.0.2.2"));
    drop(s);
    drop(p);
}

#[test]
fn refresh_timer_expire_and_recovery() {
    let dir = tempdir();
    let (pdb, sdb) = dbs(dir.path());
    load_zone_text(&pdb, "example.com.", &zone(1, 1, 4));
    let pport = free_port();
    let mut p = primary(dir.path(), &pdb, pport, None);
    let s = secondary(dir.path(), &sdb, pport, free_port());
    assert!(
        eventually(10, || www(s.addr()).as_deref() == Some("192.0.2.1")),
        "{}",
        s.stderr()
    );
    // No NOTIFY: the refresh timer (1 s) finds the new serial.
    load_zone_text(&pdb, "example.com.", &zone(2, 1, 4));
    assert!(
        eventually(10, || www(s.addr()).as_deref() == Some("192.0.2.2")),
        "{}",
        s.stderr()
    );
    // The primary goes away: served until EXPIRE (4 s), then SERVFAIL.
    p.terminate();
    let servfail = |addr| {
        ask(addr, "www.example.com.", "A")
            .is_some_and(|m| m.metadata.response_code == ResponseCode::ServFail)
    };
    assert!(eventually(20, || servfail(s.addr())), "{}", s.stderr());
    assert!(logged(&s, "has expired"), "{}", s.stderr());
    // Expired survives a restart: not served from the first query on.
    drop(s);
    let s = secondary(dir.path(), &sdb, pport, free_port());
    assert!(servfail(s.addr()), "{}", s.stderr());
    // With EDNS, the SERVFAIL says why: EDE 24 and NSD's text.
    let out = dig_tcp(s.addr().port(), "SOA");
    assert!(out.contains("status: SERVFAIL"), "{out}");
    assert!(
        out.contains("; EDE: 24 (Invalid Data): (Zone has expired)"),
        "{out}"
    );
    assert!(
        eventually(5, || logged(&s, "serial 2, expired")),
        "{}",
        s.stderr()
    );
    // It comes back: served again.
    let _p = primary(dir.path(), &pdb, pport, None);
    serves(&s, "192.0.2.2");
    assert!(logged(&s, "serving it again"), "{}", s.stderr());
}

/// What the broken test primary sends for AXFR.
#[derive(Clone, Copy, Debug)]
enum Feed {
    /// The zone at this serial, whole.
    Good(u32),
    /// Serial 2, the connection closed before the closing SOA.
    Truncated,
    /// Serial 2, closed by a SOA of serial 3.
    BadClosing,
    /// Serial 2 with a record outside the zone.
    Outside,
}

impl Feed {
    fn serial(self) -> u32 {
        match self {
            Feed::Good(s) => s,
            _ => 2,
        }
    }
}

fn wire_name(name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for label in name.trim_end_matches('.').split('.') {
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out
}

fn rr(owner: &str, rtype: u16, rdata: &[u8]) -> Vec<u8> {
    let mut out = wire_name(owner);
    out.extend_from_slice(&rtype.to_be_bytes());
    out.extend_from_slice(&[0, 1, 0, 0, 1, 44]);
    out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    out.extend_from_slice(rdata);
    out
}

fn soa_rr(serial: u32) -> Vec<u8> {
    let mut rd = wire_name("ns1.example.com.");
    rd.extend(wire_name("hostmaster.example.com."));
    for v in [serial, 1, 1, 3600, 60] {
        rd.extend_from_slice(&v.to_be_bytes());
    }
    rr("example.com.", 6, &rd)
}

/// A reply to `query` (rcode `rcode`) carrying `records` in the answer.
fn reply_to(query: &[u8], rcode: u8, records: &[Vec<u8>]) -> Vec<u8> {
    let mut end = 12;
    while query[end] != 0 {
        end += 1 + usize::from(query[end]);
    }
    end += 5;
    let mut out = vec![query[0], query[1], 0x84, rcode, 0, 1];
    out.extend_from_slice(&(records.len() as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&query[12..end]);
    for r in records {
        out.extend_from_slice(r);
    }
    out
}

/// A test primary on 127.0.0.1 answering SOA with the feed's serial, IXFR
/// with NOTIMP and AXFR per the current feed.
fn broken_primary(feed: std::sync::Arc<std::sync::Mutex<Feed>>) -> SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut len = [0u8; 2];
            if stream.read_exact(&mut len).is_err() {
                continue;
            }
            let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
            if stream.read_exact(&mut query).is_err() {
                continue;
            }
            let mut end = 12;
            while query[end] != 0 {
                end += 1 + usize::from(query[end]);
            }
            let qtype = u16::from_be_bytes([query[end + 1], query[end + 2]]);
            let f = *feed.lock().expect("feed");
            let s = f.serial();
            let ns = rr("example.com.", 2, &wire_name("ns1.example.com."));
            let ns1 = rr("ns1.example.com.", 1, &[192, 0, 2, 1]);
            let www = rr("www.example.com.", 1, &[192, 0, 2, s as u8]);
            let msg = match (qtype, f) {
                (6, _) => reply_to(&query, 0, &[soa_rr(s)]),
                (251, _) => reply_to(&query, 4, &[]),
                (_, Feed::Good(_)) => reply_to(&query, 0, &[soa_rr(s), ns, ns1, www, soa_rr(s)]),
                (_, Feed::Truncated) => reply_to(&query, 0, &[soa_rr(s), ns, ns1, www]),
                (_, Feed::BadClosing) => reply_to(&query, 0, &[soa_rr(s), ns, ns1, www, soa_rr(3)]),
                (_, Feed::Outside) => {
                    let evil = rr("www.example.net.", 1, &[192, 0, 2, 66]);
                    reply_to(&query, 0, &[soa_rr(s), ns, ns1, www, evil, soa_rr(s)])
                }
            };
            let mut framed = (msg.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(&msg);
            let _ = stream.write_all(&framed);
        }
    });
    addr
}

/// A broken primary (truncated stream, mismatched closing SOA, a record
/// outside the zone) never replaces the good copy; a good transfer then does.
#[test]
fn a_broken_transfer_never_replaces_good_data() {
    let dir = tempdir();
    let (_, sdb) = dbs(dir.path());
    let feed = std::sync::Arc::new(std::sync::Mutex::new(Feed::Good(1)));
    let primary = broken_primary(std::sync::Arc::clone(&feed));
    let s = secondary(dir.path(), &sdb, primary.port(), free_port());
    assert!(
        eventually(10, || www(s.addr()).as_deref() == Some("192.0.2.1")),
        "{}",
        s.stderr()
    );
    for (f, log) in [
        (Feed::Truncated, "reading the reply"),
        (Feed::BadClosing, "the closing SOA (serial 3) differs"),
        (Feed::Outside, "www.example.net."),
    ] {
        *feed.lock().expect("feed") = f;
        assert!(
            eventually(10, || logged(&s, log)),
            "{f:?}: no {log:?} in the log:\n{}",
            s.stderr()
        );
        assert_eq!(www(s.addr()).as_deref(), Some("192.0.2.1"), "{f:?}");
        let soa = ask(s.addr(), "example.com.", "SOA").expect("SOA");
        assert!(format!("{soa:?}").contains("serial: 1"), "{f:?}: {soa:?}");
    }
    *feed.lock().expect("feed") = Feed::Good(3);
    assert!(
        eventually(10, || www(s.addr()).as_deref() == Some("192.0.2.3")),
        "{}",
        s.stderr()
    );
}

const KEY: &str = "[[key]]\nname = \"tk.\"\nalgorithm = \"hmac-sha256\"\n";

/// TSIG per primary (RFC 8945): with the primary's key, the SOA query, the
/// transfers and the primary's NOTIFY are signed and verified; with a wrong
/// secret, nothing is stored and the failure is logged.
#[test]
fn transfers_and_notify_signed_with_the_primarys_key() {
    let dir = tempdir();
    let (pdb, sdb) = dbs(dir.path());
    load_zone_text(&pdb, "example.com.", &zone(1, 3600, 86400));
    let sport = free_port();
    // The primary listens on 127.0.0.2 but its NOTIFY to 127.0.0.1 leaves
    // from 127.0.0.1: the key, not the address, says it is the primary.
    let p = start_at(
        dir.path(),
        "primary.toml",
        &format!(
            "{KEY}secret = \"c2VjcmV0c2VjcmV0c2VjcmV0\"\n\
             [[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n\
             [transfer]\nallow = [\"key tk.\"]\n\
             [notify]\ntargets = [\"127.0.0.1:{sport} key tk.\"]\n",
            pdb.display()
        ),
        "127.0.0.2",
        free_port(),
    );
    let secondary_with = |secret: &str, db: &Path, port: u16| {
        start(
            dir.path(),
            "secondary.toml",
            &format!(
                "{KEY}secret = \"{secret}\"\n[[secondary]]\nzone = \"example.com.\"\n\
                 primaries = [\"{} key tk.\"]\nfile = \"{}\"\nmin_refresh = 1\n",
                p.addr(),
                db.display()
            ),
            port,
        )
    };
    // A wrong secret: the primary answers NOTAUTH/BADSIG, nothing is stored.
    let bad = secondary_with(
        "d3JvbmdzZWNyZXQ=",
        &dir.path().join("bad.sqlite3"),
        free_port(),
    );
    assert!(eventually(10, || logged(&bad, "TSIG")), "{}", bad.stderr());
    let reply = ask(bad.addr(), "www.example.com.", "A").expect("reply");
    assert_eq!(
        reply.metadata.response_code,
        ResponseCode::Refused,
        "{reply:?}"
    );
    drop(bad);
    // The right one: transferred, and a change arrives by a signed NOTIFY.
    let s = secondary_with("c2VjcmV0c2VjcmV0c2VjcmV0", &sdb, sport);
    assert!(
        eventually(10, || www(s.addr()).as_deref() == Some("192.0.2.1")),
        "{}",
        s.stderr()
    );
    assert!(logged(&s, "key tk.: serial none -> 1"), "{}", s.stderr());
    load_zone_text(&pdb, "example.com.", &zone(2, 3600, 86400));
    assert!(
        eventually(15, || www(s.addr()).as_deref() == Some("192.0.2.2")),
        "{}\nprimary:\n{}",
        s.stderr(),
        p.stderr()
    );
    assert!(logged(&s, "NOTIFY received"), "{}", s.stderr());
    assert!(
        logged(&p, "signed with key tk."),
        "the NOTIFY reply was not signed:\n{}",
        p.stderr()
    );
}

/// SIGHUP applies `[[secondary]]` changes: a zone added is transferred and
/// served (its DB created), a zone removed stops being served.
#[test]
fn sighup_adds_and_removes_secondary_zones() {
    let dir = tempdir();
    let (pdb, sdb) = dbs(dir.path());
    load_zone_text(&pdb, "example.com.", &zone(1, 3600, 86400));
    load_zone_text(
        &pdb,
        "example.org.",
        "$TTL 300\n@ SOA ns1 hostmaster 7 3600 1 86400 60\n@ NS ns1\nns1 A 192.0.2.7\n",
    );
    let p = primary(dir.path(), &pdb, free_port(), None);
    let s = secondary(dir.path(), &sdb, p.addr().port(), free_port());
    assert!(
        eventually(10, || www(s.addr()).as_deref() == Some("192.0.2.1")),
        "{}",
        s.stderr()
    );
    let org = |addr| {
        ask(addr, "ns1.example.org.", "A").map(|m| (m.metadata.response_code, m.answers.len()))
    };
    assert_eq!(org(s.addr()), Some((ResponseCode::Refused, 0)));
    // Add example.org. in another DB.
    let text = format!(
        "[[secondary]]\nzone = \"example.com.\"\nprimaries = [\"127.0.0.1:{0}\"]\nfile = \"{1}\"\n\
         [[secondary]]\nzone = \"example.org.\"\nprimaries = [\"127.0.0.1:{0}\"]\nfile = \"{2}\"\n",
        p.addr().port(),
        sdb.display(),
        dir.path().join("org.sqlite3").display()
    );
    let tmp = write_file(dir.path(), "secondary.toml.new", &text);
    std::fs::rename(tmp, dir.path().join("secondary.toml")).expect("replace config");
    s.signal("HUP");
    assert!(
        eventually(15, || org(s.addr()) == Some((ResponseCode::NoError, 1))),
        "{}",
        s.stderr()
    );
    assert_eq!(www(s.addr()).as_deref(), Some("192.0.2.1"));
    // Remove example.com.
    let text = format!(
        "[[secondary]]\nzone = \"example.org.\"\nprimaries = [\"127.0.0.1:{}\"]\nfile = \"{}\"\n",
        p.addr().port(),
        dir.path().join("org.sqlite3").display()
    );
    let tmp = write_file(dir.path(), "secondary.toml.new", &text);
    std::fs::rename(tmp, dir.path().join("secondary.toml")).expect("replace config");
    s.signal("HUP");
    assert!(eventually(15, || www(s.addr()).is_none()), "{}", s.stderr());
    assert_eq!(org(s.addr()), Some((ResponseCode::NoError, 1)));
}
