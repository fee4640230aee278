//! End to end: the catalog producer (auth/src/catalog/producer.rs, RFC 9432
//! §4) over real sockets on 127.0.0.1.
//!
//! authd serves one sqlite3 DB with a `[[catalog]]` over it and NOTIFYs a
//! UDP socket of the test's own. Checked:
//! - at start the catalog zone is created with the DB's zone as member,
//!   under its stable label;
//! - `zone create` of a member: within a second the catalog (dig AXFR)
//!   lists it with its stable label, the serial moved by one, IXFR from the
//!   old serial gives exactly that PTR, a NOTIFY for the catalog arrives,
//!   and the change is logged in one line;
//! - `group` and `coo` properties added by nsupdate, a `group` by `zone
//!   update`, and a label changed by nsupdate, survive the next member added;
//! - `zone delete` and an SQL DELETE of a member remove it with its
//!   properties;
//! - a restart keeps every label and the serial;
//! - a `[[catalog]]` over a DB no `[[datasource]]` serves is a start-up
//!   error naming `catalog[0].file`.
//!
//! Needs `dig`, `nsupdate` (bind9-dnsutils) and `sqlite3`.

use std::io::Write;
use std::net::UdpSocket;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use authd_tests::{AuthdProcess, binary, eventually, require_tool, run_authd, tempdir, write_file};

const CATALOG: &str = "catalog.example.";

/// One RR of dig's output: owner, type, RDATA (lower case owner).
type Rr = (String, String, String);

/// The stable label of `zone` (`authd::catalog::stable_label`).
fn label(zone: &str) -> String {
    authd::catalog::stable_label(&zone.parse().expect("name"))
}

/// The config: the DB served, the catalog over it, transfers and unsigned
/// updates from loopback, NOTIFY to `notify_port`.
fn config(dir: &Path, notify_port: u16) -> std::path::PathBuf {
    write_file(
        dir,
        "authd.toml",
        &format!(
            "[[datasource]]\ntype = \"sqlite3\"\nfile = \"zones.sqlite3\"\n\
             [[catalog]]\norigin = \"{CATALOG}\"\nfile = \"zones.sqlite3\"\n\
             [transfer]\nallow = [\"127.0.0.1\"]\n\
             [update]\nallow = [\"127.0.0.1\"]\n\
             [notify]\ntargets = [\"127.0.0.1:{notify_port}\"]\n"
        ),
    )
}

fn start(config: &Path) -> AuthdProcess {
    AuthdProcess::start([std::ffi::OsStr::new("--config"), config.as_os_str()])
}

/// Runs the `zone` tool with `args`, asserting success.
fn zone(args: &[&str]) {
    let out = Command::new(binary("zone"))
        .args(args)
        .output()
        .expect("zone");
    assert!(
        out.status.success(),
        "zone {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `zone create` of `origin` in `db`.
fn create(db: &Path, origin: &str) {
    let db = db.to_str().expect("utf-8 path");
    zone(&["create", "--db", db, origin, "--ns", "ns1.example.com."]);
}

/// The RRs of dig `qtype` for the catalog at `port` (over TCP), in order.
fn dig(port: u16, qtype: &str) -> Vec<Rr> {
    let out = Command::new("dig")
        .args(["+tcp", "+time=5", "+tries=1", "+nocmd", "+nostats"])
        .args(["-p", &port.to_string(), "@127.0.0.1", CATALOG, qtype])
        .output()
        .expect("dig");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() >= 5).then(|| (w[0].to_lowercase(), w[3].to_string(), w[4..].join(" ")))
        })
        .collect()
}

/// The catalog's members as served (AXFR): (label, zone), by label.
fn members(port: u16) -> Vec<(String, String)> {
    let zones = format!(".zones.{CATALOG}");
    let mut v: Vec<(String, String)> = dig(port, "AXFR")
        .into_iter()
        .filter(|(owner, t, _)| t == "PTR" && owner.ends_with(&zones))
        .filter_map(|(owner, _, rdata)| {
            let l = owner.strip_suffix(&zones)?;
            (!l.contains('.')).then(|| (l.to_string(), rdata))
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The catalog's SOA serial as served (0: none).
fn serial(port: u16) -> u32 {
    dig(port, "SOA")
        .iter()
        .find(|(_, t, _)| t == "SOA")
        .and_then(|(_, _, rdata)| rdata.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(0)
}

/// Every RR of the catalog (AXFR, the closing SOA left out), sorted.
fn content(port: u16) -> Vec<Rr> {
    let mut v = dig(port, "AXFR");
    v.pop();
    v.sort();
    v
}

/// A NOTIFY listener on 127.0.0.1: each NOTIFY's question name and when it
/// came, on the channel; each is answered, so authd does not retry.
fn notify_listener() -> (u16, mpsc::Receiver<(String, Instant)>) {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let port = sock.local_addr().expect("addr").port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            let at = Instant::now();
            let msg = &buf[..n];
            // Opcode 4 (NOTIFY), a query.
            if n < 12 || msg[2] & 0x80 != 0 || (msg[2] >> 3) & 0xF != 4 {
                continue;
            }
            let mut name = String::new();
            let mut i = 12;
            while i < n && msg[i] != 0 {
                let len = usize::from(msg[i]);
                let label = msg.get(i + 1..i + 1 + len).unwrap_or_default();
                name.push_str(&String::from_utf8_lossy(label).to_lowercase());
                name.push('.');
                i += 1 + len;
            }
            let mut reply = msg.to_vec();
            reply[2] |= 0x80;
            let _ = sock.send_to(&reply, from);
            if tx.send((name, at)).is_err() {
                return;
            }
        }
    });
    (port, rx)
}

/// Waits up to `within` for a NOTIFY of the catalog; when it came.
fn catalog_notify(rx: &mpsc::Receiver<(String, Instant)>, within: Duration) -> Option<Instant> {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((name, at)) if name == CATALOG => return Some(at),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
}

/// Runs nsupdate with `script` against 127.0.0.1:`port` for the catalog.
fn nsupdate(port: u16, script: &str) {
    let mut child = Command::new("nsupdate")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nsupdate");
    let text = format!("server 127.0.0.1 {port}\nzone {CATALOG}\n{script}\nsend\n");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("nsupdate");
    assert!(
        out.status.success(),
        "nsupdate: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether the catalog served at `port` has an RR at `owner` (relative to
/// the catalog) of type `rtype`.
fn has(port: u16, owner: &str, rtype: &str) -> bool {
    let owner = format!("{owner}.{CATALOG}");
    dig(port, "AXFR")
        .iter()
        .any(|(o, t, _)| *o == owner && t == rtype)
}

#[test]
fn the_catalog_follows_the_zones_of_its_db() {
    require_tool("dig", "-v", "bind9-dnsutils");
    require_tool("nsupdate", "-V", "bind9-dnsutils");
    require_tool("sqlite3", "-version", "sqlite3");
    let dir = tempdir();
    let db = dir.path().join("zones.sqlite3");
    create(&db, "example.com.");
    let (notify_port, notifies) = notify_listener();
    let config = config(dir.path(), notify_port);
    let mut authd = start(&config);
    let port = authd.addr().port();
    let (com, org, net) = (
        label("example.com."),
        label("example.org."),
        label("example.net."),
    );

    // Created at start with the DB's zone.
    assert!(
        eventually(5, || members(port)
            == vec![(com.clone(), "example.com.".into())]),
        "{:?}\n{}",
        members(port),
        authd.stderr()
    );
    assert!(authd.wait_for_log(
        "catalog catalog.example.: created in",
        Duration::from_secs(1)
    ));
    let version = dig(port, "AXFR");
    assert!(
        version
            .iter()
            .any(|(o, t, r)| o == "version.catalog.example." && t == "TXT" && r == "\"2\""),
        "{version:?}"
    );
    assert!(
        version
            .iter()
            .any(|(o, t, r)| o == CATALOG && t == "NS" && r == "invalid."),
        "{version:?}"
    );
    let s0 = serial(port);
    assert_ne!(s0, 0);
    while notifies.try_recv().is_ok() {}

    // A zone created: listed within a second, serial + 1, IXFR, NOTIFY.
    create(&db, "example.org.");
    let committed = Instant::now();
    let notified = catalog_notify(&notifies, Duration::from_secs(5));
    let notified =
        notified.unwrap_or_else(|| panic!("no NOTIFY of the catalog:\n{}", authd.stderr()));
    let delay = notified.saturating_duration_since(committed);
    eprintln!("zone create -> NOTIFY of the catalog: {delay:?}");
    assert!(
        delay < Duration::from_millis(1500),
        "NOTIFY after {delay:?}"
    );
    let mut expected = vec![
        (com.clone(), "example.com.".to_string()),
        (org.clone(), "example.org.".to_string()),
    ];
    expected.sort();
    assert_eq!(members(port), expected);
    let s1 = serial(port);
    assert_eq!(s1, s0.wrapping_add(1));
    let line =
        format!("catalog catalog.example.: serial {s0} -> {s1}, added example.org. (label {org})");
    assert!(
        authd.wait_for_log(&line, Duration::from_secs(1)),
        "{}",
        authd.stderr()
    );
    let ixfr = dig(port, &format!("IXFR={s0}"));
    let shape: Vec<(String, String)> = ixfr
        .iter()
        .map(|(o, t, r)| match t.as_str() {
            "SOA" => (
                t.clone(),
                r.split_whitespace().nth(2).unwrap_or("").to_string(),
            ),
            _ => (format!("{o} {t}"), r.clone()),
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            ("SOA".to_string(), s1.to_string()),
            ("SOA".to_string(), s0.to_string()),
            ("SOA".to_string(), s1.to_string()),
            (
                format!("{org}.zones.{CATALOG} PTR"),
                "example.org.".to_string()
            ),
            ("SOA".to_string(), s1.to_string()),
        ],
        "{ixfr:?}"
    );

    // The operator's properties and labels: a group by nsupdate, one by
    // `zone update`, example.com.'s label changed (a reset, §5.5).
    nsupdate(
        port,
        &format!(
            "update add group.{org}.zones.{CATALOG} 0 TXT \"signed\"\n\
             update add coo.{org}.zones.{CATALOG} 0 PTR other.catalog."
        ),
    );
    nsupdate(
        port,
        &format!(
            "update delete {com}.zones.{CATALOG} PTR example.com.\n\
             update add reset1.zones.{CATALOG} 0 PTR example.com."
        ),
    );
    zone(&[
        "update",
        "--db",
        db.to_str().expect("utf-8 path"),
        CATALOG,
        "--add",
        "group.reset1.zones 0 TXT \"unsigned\"",
    ]);
    let s2 = serial(port);
    assert_eq!(s2, s1.wrapping_add(3), "three updates, no producer change");
    // A member added: the others keep their labels and groups.
    create(&db, "example.net.");
    assert!(
        eventually(3, || members(port).len() == 3),
        "{:?}\n{}",
        members(port),
        authd.stderr()
    );
    let mut expected = vec![
        (net.clone(), "example.net.".to_string()),
        (org.clone(), "example.org.".to_string()),
        ("reset1".to_string(), "example.com.".to_string()),
    ];
    expected.sort();
    assert_eq!(members(port), expected);
    assert!(has(port, &format!("group.{org}.zones"), "TXT"));
    assert!(has(port, &format!("coo.{org}.zones"), "PTR"));
    assert!(has(port, "group.reset1.zones", "TXT"));
    assert_eq!(serial(port), s2.wrapping_add(1));

    // `zone delete`: the member goes with its group.
    zone(&[
        "delete",
        "--db",
        db.to_str().expect("utf-8 path"),
        "example.org.",
    ]);
    assert!(
        eventually(3, || members(port).len() == 2),
        "{:?}\n{}",
        members(port),
        authd.stderr()
    );
    assert!(!has(port, &format!("group.{org}.zones"), "TXT"));
    assert!(!has(port, &format!("coo.{org}.zones"), "PTR"));
    assert!(authd.wait_for_log("removed example.org.", Duration::from_secs(1)));
    // An SQL DELETE: the same.
    let out = Command::new("sqlite3")
        .arg(&db)
        .arg(
            "DELETE FROM records WHERE zone_id = (SELECT id FROM zones WHERE name = 'example.net.');\
             DELETE FROM zones WHERE name = 'example.net.';",
        )
        .output()
        .expect("sqlite3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        eventually(3, || members(port)
            == vec![("reset1".to_string(), "example.com.".to_string())]),
        "{:?}\n{}",
        members(port),
        authd.stderr()
    );
    assert!(has(port, "group.reset1.zones", "TXT"));

    // A restart: labels, properties and serial as they were.
    std::thread::sleep(Duration::from_millis(500));
    let before = content(port);
    let serial_before = serial(port);
    authd.terminate();
    let authd = start(&config);
    let port = authd.addr().port();
    // Several producer polls.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(content(port), before, "{}", authd.stderr());
    assert_eq!(serial(port), serial_before);
    assert!(
        !authd.stderr().contains("catalog catalog.example.: serial"),
        "{}",
        authd.stderr()
    );
}

#[test]
fn a_catalog_over_a_db_not_served_is_a_start_up_error() {
    let dir = tempdir();
    let config = write_file(
        dir.path(),
        "authd.toml",
        "[[datasource]]\ntype = \"sqlite3\"\nfile = \"other.sqlite3\"\n\
         [[catalog]]\norigin = \"catalog.example.\"\nfile = \"zones.sqlite3\"\n",
    );
    let out = run_authd([std::ffi::OsStr::new("--config"), config.as_os_str()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim_end(),
        format!(
            "authd: config {}: catalog[0].file: {} is not the file of a [[datasource]] type = \
             \"sqlite3\" serving every zone of it; the catalog zone is kept in that DB and must \
             be served for consumers to transfer it",
            config.display(),
            dir.path().join("zones.sqlite3").display()
        )
    );
}
