//! End to end: the memory data source (`--zone`, `type = "memory"`), reload on
//! SIGHUP while queries are answered, failed and unchanged zones on reload, and
//! zones claimed by two sources. Real sockets on 127.0.0.1.

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use authd_tests::hickory_proto::op::{Message, ResponseCode};
use authd_tests::hickory_proto::rr::RData;
use authd_tests::{
    AuthdProcess, QueryBuilder, load_zone_text, parse_reply, query_udp, run_authd, tcp_connect,
    tcp_recv, tcp_send, tempdir, workspace_dir, write_file,
};

/// Version `v` (1 or 2) of example.com: the serial, the MX preference and the
/// address of its exchange, and whether `new.example.com` exists differ, so a
/// reply mixing versions shows. `filler` names make the build take a while.
fn zone_version(v: u32, filler: usize) -> String {
    let mut z = format!(
        "$ORIGIN example.com.\n$TTL 300\n\
         @ IN SOA ns1 hostmaster {v} 3600 900 604800 300\n\
         @ NS ns1\n\
         ns1 A 192.0.2.53\n\
         @ MX {} mail\n\
         mail A 192.0.2.{v}\n",
        v * 10
    );
    if v == 2 {
        z.push_str("new A 192.0.2.99\n");
    }
    for i in 0..filler {
        z.push_str(&format!("fill{i} A 198.51.100.{}\n", i % 250));
    }
    z
}

/// Writes `text` to `path` through a temporary file and a rename, as editors
/// and deployment tools do.
fn replace_file(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write temp zone");
    std::fs::rename(&tmp, path).expect("rename zone");
}

fn soa_serial(section: &[authd_tests::hickory_proto::rr::Record]) -> Option<u32> {
    section.iter().find_map(|r| match &r.data {
        RData::SOA(s) => Some(s.serial),
        _ => None,
    })
}

/// The version (1 or 2) a reply to `query` comes from, or a description of
/// what is wrong with it (an error rcode, a mix of versions, missing data).
fn version_of(query: usize, reply: &Message) -> Result<u32, String> {
    let rcode = reply.metadata.response_code;
    match query % 3 {
        // example.com SOA: the serial.
        0 => {
            if rcode != ResponseCode::NoError {
                return Err(format!("SOA query: {rcode:?}"));
            }
            match soa_serial(&reply.answers) {
                Some(s @ (1 | 2)) if reply.answers.len() == 1 => Ok(s),
                other => Err(format!("SOA query: serial {other:?} in {reply:?}")),
            }
        }
        // example.com MX: preference in the answer, exchange address in additional.
        1 => {
            if rcode != ResponseCode::NoError {
                return Err(format!("MX query: {rcode:?}"));
            }
            let pref = reply.answers.iter().find_map(|r| match &r.data {
                RData::MX(mx) => Some(mx.preference),
                _ => None,
            });
            let addr = reply.additionals.iter().find_map(|r| match &r.data {
                RData::A(a) => Some(a.0.to_string()),
                _ => None,
            });
            match (pref, addr.as_deref()) {
                (Some(10), Some("192.0.2.1")) => Ok(1),
                (Some(20), Some("192.0.2.2")) => Ok(2),
                other => Err(format!(
                    "MX query: mixed or incomplete {other:?}: {reply:?}"
                )),
            }
        }
        // new.example.com A: NXDOMAIN with serial 1, or the address (version 2).
        _ => match rcode {
            ResponseCode::NXDomain => match soa_serial(&reply.authorities) {
                Some(1) if reply.answers.is_empty() => Ok(1),
                other => Err(format!("NXDOMAIN with serial {other:?}: {reply:?}")),
            },
            ResponseCode::NoError => {
                let a = reply.answers.iter().find_map(|r| match &r.data {
                    RData::A(a) => Some(a.0.to_string()),
                    _ => None,
                });
                if a.as_deref() == Some("192.0.2.99") && reply.authorities.is_empty() {
                    Ok(2)
                } else {
                    Err(format!("new A: {reply:?}"))
                }
            }
            other => Err(format!("new A: {other:?}")),
        },
    }
}

fn query_for(i: usize) -> QueryBuilder {
    match i % 3 {
        0 => QueryBuilder::new("example.com.", "SOA"),
        1 => QueryBuilder::new("example.com.", "MX"),
        _ => QueryBuilder::new("new.example.com.", "A"),
    }
}

/// Number of finished reloads (summary lines) in the log so far.
fn reloads(authd: &AuthdProcess) -> usize {
    authd.stderr().matches("zones reloaded, ").count()
}

/// Sends SIGHUP and waits for the next reload summary line; returns that line.
fn hup_and_wait(authd: &AuthdProcess) -> String {
    let before = reloads(authd);
    authd.signal("HUP");
    let deadline = Instant::now() + Duration::from_secs(60);
    while reloads(authd) <= before {
        assert!(
            Instant::now() < deadline,
            "no reload summary after SIGHUP:\n{}",
            authd.stderr()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    authd
        .stderr()
        .lines()
        .filter(|l| l.contains("zones reloaded, "))
        .nth(before)
        .unwrap_or_default()
        .to_string()
}

fn serial_now(addr: SocketAddr, zone: &str) -> u32 {
    let reply = parse_reply(&query_udp(addr, &QueryBuilder::new(zone, "SOA").wire()));
    assert_eq!(
        reply.metadata.response_code,
        ResponseCode::NoError,
        "{reply:?}"
    );
    soa_serial(&reply.answers).expect("SOA in the answer")
}

fn start_memory(zone: &Path, extra: &[&str]) -> AuthdProcess {
    let mut args: Vec<String> = vec!["--zone".into(), format!("example.com.={}", zone.display())];
    args.extend(extra.iter().map(|s| s.to_string()));
    AuthdProcess::start(args)
}

/// What the query loops saw.
#[derive(Default, Debug)]
struct Seen {
    queries: usize,
    v1: usize,
    v2: usize,
    errors: Vec<String>,
}

/// Queries over UDP until `stop` (at most `max` queries); every reply must be
/// complete and from one version.
fn udp_loop(addr: SocketAddr, stop: &AtomicBool, max: usize) -> Seen {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    sock.connect(addr).expect("connect");
    sock.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    let mut seen = Seen::default();
    let mut buf = vec![0u8; 65_535];
    while !stop.load(Ordering::Relaxed) && seen.queries < max {
        let i = seen.queries;
        let wire = query_for(i).id((i % 65_536) as u16).wire();
        sock.send(&wire).expect("send");
        seen.queries += 1;
        let reply = loop {
            match sock.recv(&mut buf) {
                Ok(n) if buf[..2] == wire[..2] => break Some(buf[..n].to_vec()),
                Ok(_) => continue, // a late reply to an earlier query
                Err(e) => {
                    seen.errors.push(format!("UDP query {i}: no reply ({e})"));
                    break None;
                }
            }
        };
        let Some(reply) = reply else { continue };
        match version_of(i, &parse_reply(&reply)) {
            Ok(1) => seen.v1 += 1,
            Ok(_) => seen.v2 += 1,
            Err(e) => seen.errors.push(format!("UDP query {i}: {e}")),
        }
    }
    seen
}

/// As [`udp_loop`], over one long-lived TCP connection.
fn tcp_loop(addr: SocketAddr, stop: &AtomicBool, max: usize) -> Seen {
    let mut stream = tcp_connect(addr);
    let mut seen = Seen::default();
    while !stop.load(Ordering::Relaxed) && seen.queries < max {
        let i = seen.queries;
        tcp_send(&mut stream, &query_for(i).wire());
        seen.queries += 1;
        match tcp_recv(&mut stream) {
            Ok(reply) => match version_of(i, &parse_reply(&reply)) {
                Ok(1) => seen.v1 += 1,
                Ok(_) => seen.v2 += 1,
                Err(e) => seen.errors.push(format!("TCP query {i}: {e}")),
            },
            Err(e) => {
                seen.errors.push(format!("TCP query {i}: {e}"));
                break;
            }
        }
    }
    seen
}

/// (a) Reloads alternating between two versions while a UDP and a TCP client
/// query in a loop: every reply is complete and from one version.
#[test]
fn reload_under_queries_never_mixes_versions() {
    let dir = tempdir();
    let zone = write_file(dir.path(), "example.com.zone", &zone_version(1, 3000));
    let authd = start_memory(&zone, &[]);
    let addr = authd.addr();
    assert_eq!(serial_now(addr, "example.com."), 1);

    let stop = Arc::new(AtomicBool::new(false));
    let (s1, s2) = (Arc::clone(&stop), Arc::clone(&stop));
    let udp = std::thread::spawn(move || udp_loop(addr, &s1, 200_000));
    let tcp = std::thread::spawn(move || tcp_loop(addr, &s2, 200_000));

    let started = Instant::now();
    let mut summaries = Vec::new();
    let mut n = 0u32;
    while n < 6 || started.elapsed() < Duration::from_secs(2) {
        n += 1;
        let v = if n % 2 == 1 { 2 } else { 1 };
        replace_file(&zone, &zone_version(v, 3000));
        summaries.push(hup_and_wait(&authd));
        assert_eq!(serial_now(addr, "example.com."), v, "after reload {n}");
        std::thread::sleep(Duration::from_millis(50));
        assert!(n < 100, "too many reloads");
    }
    stop.store(true, Ordering::Relaxed);
    let udp = udp.join().expect("UDP client");
    let tcp = tcp.join().expect("TCP client");
    for s in &summaries {
        assert!(
            s.contains("reload: 1 zones reloaded, 0 unchanged, 0 failed"),
            "{s}"
        );
    }
    for (what, seen) in [("UDP", &udp), ("TCP", &tcp)] {
        assert!(
            seen.errors.is_empty(),
            "{what}: {} bad replies of {}, first: {:?}",
            seen.errors.len(),
            seen.queries,
            &seen.errors[..seen.errors.len().min(5)]
        );
        assert!(
            seen.v1 > 0 && seen.v2 > 0,
            "{what}: saw only one version: {seen:?}"
        );
    }
    eprintln!("{n} reloads; UDP {udp:?}; TCP {tcp:?}");
}

/// (b) A broken file on reload (syntax error, no SOA, deleted) keeps the old
/// version serving, the log names file:line, and other zones still reload.
#[test]
fn broken_reload_keeps_the_previous_version() {
    let dir = tempdir();
    let zone = write_file(dir.path(), "example.com.zone", &zone_version(1, 0));
    let other = |serial: u32| {
        format!(
            "$ORIGIN example.org.\n@ 300 IN SOA ns1 hm {serial} 3600 900 604800 300\n@ NS ns1\nns1 A 192.0.2.1\n"
        )
    };
    let org = write_file(dir.path(), "example.org.zone", &other(1));
    let authd = AuthdProcess::start([
        "--zone".to_string(),
        format!("example.com.={}", zone.display()),
        "--zone".to_string(),
        format!("example.org={}", org.display()),
    ]);
    let addr = authd.addr();
    assert_eq!(serial_now(addr, "example.com."), 1);

    // A syntax error on line 6 (after 5 good lines); example.org changes too.
    let mut bad = zone_version(2, 0);
    bad = bad.replacen(
        "mail A 192.0.2.2\n",
        "mail A 192.0.2.2\nbroken A 999.1.1.1\n",
        1,
    );
    assert_eq!(bad.lines().position(|l| l.starts_with("broken")), Some(7));
    replace_file(&zone, &bad);
    replace_file(&org, &other(2));
    let summary = hup_and_wait(&authd);
    assert!(
        summary.contains("reload: 1 zones reloaded, 0 unchanged, 1 failed"),
        "{summary}"
    );
    let log = authd.stderr();
    let located = format!(
        "{}:8: broken.example.com. A: bad address \"999.1.1.1\"",
        zone.display()
    );
    assert!(
        log.lines()
            .any(|l| l.contains(&located)
                && l.contains("still serving the previous version (serial 1)")),
        "no log line with {located}:\n{log}"
    );
    assert_eq!(serial_now(addr, "example.com."), 1);
    assert_eq!(serial_now(addr, "example.org."), 2);

    // No SOA.
    replace_file(
        &zone,
        &zone_version(2, 0).replace("@ IN SOA ns1 hostmaster 2 3600 900 604800 300\n", ""),
    );
    let summary = hup_and_wait(&authd);
    assert!(
        summary.contains("0 zones reloaded, 1 unchanged, 1 failed"),
        "{summary}"
    );
    let log = authd.stderr();
    assert!(
        log.contains(&format!(
            "{}:0: no SOA at the zone apex example.com.",
            zone.display()
        )),
        "{log}"
    );
    assert_eq!(serial_now(addr, "example.com."), 1);

    // Deleted.
    std::fs::remove_file(&zone).expect("remove");
    let summary = hup_and_wait(&authd);
    assert!(
        summary.contains("0 zones reloaded, 1 unchanged, 1 failed"),
        "{summary}"
    );
    let log = authd.stderr();
    assert!(
        log.contains(&format!("{}:0: cannot read", zone.display())),
        "{log}"
    );
    assert_eq!(serial_now(addr, "example.com."), 1);
    let reply = parse_reply(&query_udp(
        addr,
        &QueryBuilder::new("mail.example.com.", "A").wire(),
    ));
    assert_eq!(reply.answers.len(), 1, "old data still served: {reply:?}");

    // Fixed: the new version is served.
    replace_file(&zone, &zone_version(2, 0));
    let summary = hup_and_wait(&authd);
    assert!(
        summary.contains("1 zones reloaded, 1 unchanged, 0 failed"),
        "{summary}"
    );
    assert_eq!(serial_now(addr, "example.com."), 2);
}

/// (c) A reload with unchanged files rebuilds nothing (and says so), even when
/// the file was rewritten with the same content.
#[test]
fn unchanged_zone_is_not_rebuilt() {
    let dir = tempdir();
    let zone = write_file(dir.path(), "example.com.zone", &zone_version(1, 10));
    let authd = start_memory(&zone, &["--log-level", "info,authd=debug"]);
    let summary = hup_and_wait(&authd);
    assert!(
        summary.contains("reload: 0 zones reloaded, 1 unchanged, 0 failed"),
        "{summary}"
    );
    let line = format!(
        "zone example.com.: {} unchanged (serial 1), not rebuilt",
        zone.display()
    );
    assert!(authd.stderr().contains(&line), "{}", authd.stderr());

    std::thread::sleep(Duration::from_millis(20));
    replace_file(&zone, &zone_version(1, 10));
    let summary = hup_and_wait(&authd);
    assert!(
        summary.contains("0 zones reloaded, 1 unchanged, 0 failed"),
        "{summary}"
    );
    assert_eq!(authd.stderr().matches(&line).count(), 2);
    assert_eq!(serial_now(authd.addr(), "example.com."), 1);
}

/// (d) A zone claimed by two sources is a start-up error naming the zone and
/// both sources; found after opening the DB, and again on reload.
#[test]
fn zone_in_two_sources_is_a_config_error() {
    let dir = tempdir();
    let db = dir.path().join("zones.sqlite3");
    load_zone_text(&db, "example.com.", &zone_version(1, 0));
    let zone = write_file(dir.path(), "example.com.zone", &zone_version(2, 0));
    let cfg = write_file(
        dir.path(),
        "authd.toml",
        "[[datasource]]\ntype = \"sqlite3\"\nfile = \"zones.sqlite3\"\n\
         [[datasource]]\ntype = \"memory\"\nzones = [{ origin = \"example.com.\", file = \"example.com.zone\" }]\n",
    );
    let out = run_authd([
        PathBuf::from("--config"),
        cfg.clone(),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("zone example.com. is claimed by both"),
        "{err}"
    );
    assert!(
        err.contains(&format!("datasource[0] (sqlite3:{})", db.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!("datasource[1] (memory:{})", zone.display())),
        "{err}"
    );

    // The same with the command line.
    let out = run_authd([
        "--zone".to_string(),
        format!("example.com.={}", zone.display()),
        "--db".into(),
        db.display().to_string(),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("zone example.com. is claimed by both"),
        "{err}"
    );

    // On reload: the DB gains a zone the memory source serves; the reload is
    // refused and the running configuration keeps serving.
    let db2 = dir.path().join("other.sqlite3");
    load_zone_text(
        &db2,
        "example.org.",
        "$ORIGIN example.org.\n@ 300 IN SOA ns1 hm 1 3600 900 604800 300\n@ NS ns1\nns1 A 192.0.2.1\n",
    );
    let cfg2 = write_file(
        dir.path(),
        "authd2.toml",
        "[[datasource]]\ntype = \"sqlite3\"\nfile = \"other.sqlite3\"\n\
         [[datasource]]\ntype = \"memory\"\nzones = [{ origin = \"example.com.\", file = \"example.com.zone\" }]\n",
    );
    let authd = AuthdProcess::start([PathBuf::from("--config"), cfg2]);
    assert_eq!(serial_now(authd.addr(), "example.com."), 2);
    load_zone_text(&db2, "example.com.", &zone_version(1, 0));
    authd.signal("HUP");
    assert!(
        authd.wait_for_log(
            "reload failed: zone example.com. is claimed by both",
            Duration::from_secs(30)
        ),
        "{}",
        authd.stderr()
    );
    assert!(
        authd
            .stderr()
            .contains("still serving the previous configuration")
    );
    assert_eq!(serial_now(authd.addr(), "example.com."), 2);
    assert_eq!(serial_now(authd.addr(), "example.org."), 1);
}

/// (e) `--zone` serves a master file from memory, alone and beside `--db`; a
/// broken `--zone` file stops start-up with file:line.
#[test]
fn zone_flag_serves_from_memory_with_and_without_db() {
    let dir = tempdir();
    let zone = write_file(dir.path(), "example.com.zone", &zone_version(2, 0));
    let authd = start_memory(&zone, &[]);
    assert_eq!(serial_now(authd.addr(), "example.com."), 2);
    let log = authd.stderr();
    // The start-up summary names the zones of each source.
    assert!(
        log.lines()
            .any(|l| l.contains("serving 1 zone from memory:") && l.ends_with(": example.com.")),
        "{log}"
    );
    drop(authd);

    let db = dir.path().join("zones.sqlite3");
    load_zone_text(
        &db,
        "example.org.",
        "$ORIGIN example.org.\n@ 300 IN SOA ns1 hm 7 3600 900 604800 300\n@ NS ns1\nns1 A 192.0.2.1\n",
    );
    let authd = start_memory(&zone, &["--db", &db.display().to_string()]);
    assert_eq!(serial_now(authd.addr(), "example.com."), 2);
    assert_eq!(serial_now(authd.addr(), "example.org."), 7);
    let reply = parse_reply(&query_udp(
        authd.addr(),
        &QueryBuilder::new("new.example.com.", "A").wire(),
    ));
    assert_eq!(reply.answers.len(), 1, "{reply:?}");
    drop(authd);

    let bad = write_file(
        dir.path(),
        "bad.zone",
        "$ORIGIN example.net.\n@ 300 IN SOA ns1 hm 1 3600 900 604800 300\n@ NS ns1\nx A 1.2.3\n",
    );
    let out = run_authd([
        "--zone".to_string(),
        format!("example.net={}", bad.display()),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "{}:4: x.example.net. A: bad address \"1.2.3\": not an IPv4 address",
            bad.display()
        )),
        "{err}"
    );

    let out = run_authd(["--zone", "example.net", "--listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2), "clap usage error");
}

/// The root zone served from memory with `--zone .=FILE` answers like the
/// sqlite3 backend does (tests/root.rs): the SOA and a referral with glue.
#[test]
fn root_zone_from_memory() {
    let zone = workspace_dir().join("tests/data/root.zone");
    let authd = AuthdProcess::start(["--zone".to_string(), format!(".={}", zone.display())]);
    assert_eq!(serial_now(authd.addr(), "."), 2020101902);
    let reply = parse_reply(&query_udp(
        authd.addr(),
        &QueryBuilder::new("www.example.com.", "A")
            .edns(1232, false)
            .wire(),
    ));
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert!(reply.answers.is_empty());
    assert!(
        reply
            .authorities
            .iter()
            .any(|r| matches!(&r.data, RData::NS(_))),
        "referral: {reply:?}"
    );
    assert!(!reply.additionals.is_empty(), "glue: {reply:?}");
}

/// The example configuration (one sqlite3 and one memory source) starts and
/// serves both, once its DB is created as its comments say.
#[test]
fn example_config_serves_both_sources() {
    let dir = tempdir();
    let examples = workspace_dir().join("examples");
    for f in ["authd.toml", "example.com.zone", "example.org.zone"] {
        std::fs::copy(examples.join(f), dir.path().join(f)).expect("copy example");
    }
    let org = std::fs::read_to_string(examples.join("example.org.zone")).expect("read");
    load_zone_text(&dir.path().join("zone.sqlite3"), "example.org.", &org);
    let authd = AuthdProcess::start([PathBuf::from("--config"), dir.path().join("authd.toml")]);
    let addr = authd.addr();
    for zone in ["example.com.", "example.org."] {
        let reply = parse_reply(&query_udp(addr, &QueryBuilder::new(zone, "SOA").wire()));
        assert_eq!(
            reply.metadata.response_code,
            ResponseCode::NoError,
            "{zone}: {reply:?}"
        );
        assert_eq!(reply.answers.len(), 1, "{zone}");
    }
    let reply = parse_reply(&query_udp(
        addr,
        &QueryBuilder::new("www.example.com.", "A").wire(),
    ));
    assert_eq!(
        reply.metadata.response_code,
        ResponseCode::NoError,
        "{reply:?}"
    );
    assert!(!reply.answers.is_empty());
}

/// A served DB file replaced by another (a new DB moved into place) is opened
/// afresh by SIGHUP, so every worker serves the new file; a DB deleted while
/// served fails the reload, naming the file, and the zones keep serving.
#[test]
fn replaced_db_is_reopened_and_deleted_db_fails_the_reload() {
    let dir = tempdir();
    let db = dir.path().join("zones.sqlite3");
    load_zone_text(&db, "example.com.", &zone_version(1, 0));
    let authd = AuthdProcess::start([
        "--db".to_string(),
        db.display().to_string(),
        "--udp-workers".to_string(),
        "2".to_string(),
    ]);
    assert_eq!(serial_now(authd.addr(), "example.com."), 1);

    let next = dir.path().join("next.sqlite3");
    load_zone_text(&next, "example.com.", &zone_version(2, 0));
    std::fs::rename(&next, &db).expect("move the new DB into place");
    let summary = hup_and_wait(&authd);
    assert!(!summary.contains("failed: 1"), "{summary}");
    assert!(
        authd.stderr().contains("was replaced; reopening it"),
        "{}",
        authd.stderr()
    );
    // Both workers: several queries from different source ports.
    for _ in 0..8 {
        assert_eq!(serial_now(authd.addr(), "example.com."), 2);
    }

    std::fs::remove_file(&db).expect("delete the DB");
    authd.signal("HUP");
    assert!(
        authd.wait_for_log("reload failed", Duration::from_secs(30)),
        "{}",
        authd.stderr()
    );
    let failure = authd
        .stderr()
        .lines()
        .find(|l| l.contains("reload failed"))
        .unwrap_or_default()
        .to_string();
    assert!(failure.contains("zones.sqlite3"), "{failure}");
    assert!(failure.contains("still serving"), "{failure}");
    assert_eq!(serial_now(authd.addr(), "example.com."), 2);
}
