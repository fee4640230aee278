//! End to end with the real `dig`: the EDNS options of replies and the
//! replies issue 27 asked to mend — NSID (RFC 5001), Extended DNS Errors
//! (RFC 8914), TCP keepalive (RFC 7828), an OPT in FORMERR, NOTIMP and
//! REFUSED replies to EDNS queries (RFC 6891 §6.1.1, §7), the NOTIMP reply's
//! flags, and CNAME chains followed whole (RFC 1034 §4.3.2 step 3a) — each
//! compared with NSD serving the same zone where NSD answers the same way.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use authd_tests::{
    AuthdProcess, binary, free_port, load_zone_text, query_tcp, query_udp, require_tool,
    run_with_timeout, tempdir, write_file,
};

/// A 12-link in-zone chain `c1` → … → `c12` → `end`, a 300-link one `l0` →
/// … → `l300`, and a loop `loop1` ⇄ `loop2`.
fn zone() -> String {
    let mut z = String::from(
        "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 900 1209600 300\n\
         @ NS ns1\nns1 A 192.0.2.1\n",
    );
    for i in 1..12 {
        z.push_str(&format!("c{i} CNAME c{}\n", i + 1));
    }
    z.push_str("c12 CNAME end\nend A 192.0.2.99\n");
    for i in 0..300 {
        z.push_str(&format!("l{i} CNAME l{}\n", i + 1));
    }
    z.push_str("l300 A 192.0.2.7\nloop1 CNAME loop2\nloop2 CNAME loop1\n");
    z
}

/// authd serving [`zone`] from memory, with `extra` TOML.
fn start(dir: &Path, extra: &str) -> AuthdProcess {
    write_file(dir, "example.com.zone", &zone());
    let config = write_file(
        dir,
        "authd.toml",
        &format!(
            "{extra}\n[[datasource]]\ntype = \"memory\"\n\
             zones = [{{ origin = \"example.com.\", file = \"example.com.zone\" }}]\n"
        ),
    );
    let mut cmd = Command::new(binary("authd"));
    cmd.arg("--config")
        .arg(&config)
        .args(["--listen", "127.0.0.1:0"]);
    AuthdProcess::start_command(cmd, 1)
}

/// NSD 4 serving [`zone`] on a free port, with NSID "ns1.example"
/// (`apt-get install nsd`), stopped when dropped.
struct Nsd {
    child: std::process::Child,
    port: u16,
}

impl Drop for Nsd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn nsd(dir: &Path) -> Nsd {
    require_tool("nsd", "-v", "nsd");
    let port = free_port();
    write_file(dir, "nsd.zone", &zone());
    let d = dir.display();
    let conf = write_file(
        dir,
        "nsd.conf",
        &format!(
            "server:\n  ip-address: 127.0.0.1@{port}\n  nsid: \"ascii_ns1.example\"\n\
             zonesdir: \"{d}\"\n  database: \"\"\n  pidfile: \"{d}/nsd.pid\"\n\
             xfrdfile: \"{d}/xfrd.state\"\n  zonelistfile: \"{d}/zone.list\"\n  username: \"\"\n\
             logfile: \"{d}/nsd.log\"\n  verbosity: 0\nremote-control:\n  control-enable: no\n\
             zone:\n  name: example.com\n  zonefile: nsd.zone\n"
        ),
    );
    let child = Command::new("nsd")
        .args(["-d", "-c"])
        .arg(&conf)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start nsd");
    let nsd = Nsd { child, port };
    let up = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        dig(port, &["+short", "ns1.example.com", "A"]).contains("192.0.2.1")
    });
    assert!(up, "nsd did not answer on port {port}");
    nsd
}

/// `dig @127.0.0.1 -p PORT ARGS… +norec`, its standard output.
fn dig(port: u16, args: &[&str]) -> String {
    require_tool("dig", "-v", "dnsutils");
    let out = run_with_timeout(
        Command::new("dig")
            .args([
                "@127.0.0.1",
                "-p",
                &port.to_string(),
                "+norec",
                "+tries=2",
                "+time=3",
            ])
            .args(args),
        Duration::from_secs(30),
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The lines of `out` that start with `prefix`.
fn lines<'a>(out: &'a str, prefix: &str) -> Vec<&'a str> {
    out.lines().filter(|l| l.starts_with(prefix)).collect()
}

/// dig's status and EDE lines, and whether an OPT came back.
fn status_ede_opt(out: &str) -> (String, Vec<&str>, bool) {
    let status = out
        .lines()
        .find_map(|l| l.split("status: ").nth(1))
        .and_then(|s| s.split(',').next())
        .unwrap_or("none")
        .to_string();
    (
        status,
        lines(out, "; EDE:"),
        out.contains("OPT PSEUDOSECTION"),
    )
}

fn port(authd: &AuthdProcess) -> u16 {
    authd.addr().port()
}

/// `[server] nsid` is sent as its bytes, exactly as NSD sends the same
/// identifier, and only to a query carrying the NSID option; unset, never.
#[test]
fn nsid_is_sent_when_asked_and_configured() {
    let dir = tempdir();
    let authd = start(dir.path(), "[server]\nnsid = \"ns1.example\"\n");
    let want = "; NSID: 6e 73 31 2e 65 78 61 6d 70 6c 65 (\"ns1.example\")";
    let out = dig(port(&authd), &["+nsid", "example.com", "SOA"]);
    assert_eq!(lines(&out, "; NSID:"), [want], "{out}");
    // Also with an error reply, and over TCP.
    let out = dig(port(&authd), &["+nsid", "+tcp", "nowhere.example.org", "A"]);
    assert_eq!(lines(&out, "; NSID:"), [want], "{out}");
    let out = dig(port(&authd), &["example.com", "SOA"]);
    assert!(lines(&out, "; NSID").is_empty(), "not asked:\n{out}");
    let peer = nsd(dir.path());
    let out = dig(peer.port, &["+nsid", "example.com", "SOA"]);
    assert_eq!(lines(&out, "; NSID:"), [want], "NSD:\n{out}");
    drop(authd);
    let unset = start(dir.path(), "");
    let out = dig(port(&unset), &["+nsid", "example.com", "SOA"]);
    assert!(lines(&out, "; NSID").is_empty(), "unset:\n{out}");
}

/// Extended DNS Errors to EDNS queries: REFUSED for a name in no zone 20
/// (as NSD), a refused NOTIFY and UPDATE 18, NOTAUTH for an UPDATE of a zone
/// not served here 20, NOTIMP 21; none (and no OPT) without EDNS.
#[test]
fn extended_errors_name_the_cause() {
    let dir = tempdir();
    // example.net. in sqlite3 takes UPDATEs, from nobody ([update] unset);
    // example.com. in memory takes none.
    let db = dir.path().join("net.sqlite3");
    load_zone_text(
        &db,
        "example.net.",
        "@ 300 SOA ns1 hm 1 2 3 4 5\n@ 300 NS ns1\n",
    );
    let sqlite = format!(
        "[[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n",
        db.display()
    );
    let authd = start(dir.path(), &sqlite);
    let p = port(&authd);
    const NOT_AUTHORITATIVE: &str = "; EDE: 20 (Not Authoritative)";
    const PROHIBITED: &str = "; EDE: 18 (Prohibited)";
    const NOT_SUPPORTED: &str = "; EDE: 21 (Not Supported)";
    let cases = [
        ("nowhere.example.org A", "REFUSED", NOT_AUTHORITATIVE),
        ("+opcode=notify example.com SOA", "REFUSED", PROHIBITED),
        ("+opcode=update example.net SOA", "REFUSED", PROHIBITED),
        // Nobody may update it either: refused before anything else (an
        // allowed client gets NOTAUTH: tests/tests/update.rs).
        ("+opcode=update example.com SOA", "REFUSED", PROHIBITED),
        (
            "+opcode=update example.org SOA",
            "NOTAUTH",
            NOT_AUTHORITATIVE,
        ),
        ("+opcode=3 example.com SOA", "NOTIMP", NOT_SUPPORTED),
        ("example.com MAILB", "NOTIMP", NOT_SUPPORTED),
    ];
    for (line, status, ede) in cases {
        let args: Vec<&str> = line.split(' ').collect();
        let out = dig(p, &args);
        assert_eq!(
            status_ede_opt(&out),
            (status.to_string(), vec![ede], true),
            "{args:?}:\n{out}"
        );
        let mut plain = args.clone();
        plain.push("+noedns");
        let out = dig(p, &plain);
        assert_eq!(
            status_ede_opt(&out),
            (status.to_string(), vec![], false),
            "{args:?} +noedns:\n{out}"
        );
    }
    // NSD sends the same EDE for the name in no zone.
    let peer = nsd(dir.path());
    let out = dig(peer.port, &["nowhere.example.org", "A"]);
    assert_eq!(lines(&out, "; EDE:"), [NOT_AUTHORITATIVE], "NSD:\n{out}");
    // A refused AXFR (no [transfer] allow): REFUSED with EDE 18, as NSD
    // sends (dig prints no failed transfer: the bytes are compared).
    let axfr = axfr_query();
    let ours = query_tcp(authd.addr(), &axfr);
    let theirs = query_tcp(SocketAddr::from(([127, 0, 0, 1], peer.port)), &axfr);
    for reply in [&ours, &theirs] {
        assert_eq!(reply[3] & 0x0F, 5, "REFUSED: {reply:02x?}");
        assert!(
            reply.ends_with(&[0, 15, 0, 2, 0, 18]),
            "EDE 18: {reply:02x?}"
        );
    }
    assert_eq!(ours, theirs, "authd's refusal is NSD's, byte for byte");
}

/// How a reply's OPT without options ends: type, payload 1232, no extended
/// rcode, version 0, no flags, RDLENGTH 0.
const PLAIN_OPT: [u8; 10] = [0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0];

/// AXFR example.com with an option-less OPT, id 0x1234.
fn axfr_query() -> Vec<u8> {
    query(252, &[])
}

/// A query for example.com of type `qtype`, id 0x1234, with an OPT holding
/// `options`.
fn query(qtype: u8, options: &[u8]) -> Vec<u8> {
    let mut q = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
    q.extend_from_slice(b"\x07example\x03com\x00\x00");
    q.extend_from_slice(&[qtype, 0, 1]);
    q.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0]);
    q.extend_from_slice(&(options.len() as u16).to_be_bytes());
    q.extend_from_slice(options);
    q
}

/// The NOTIMP reply to an unknown opcode keeps RD, not CD (as Knot DNS).
#[test]
fn notimp_keeps_rd_not_cd() {
    let dir = tempdir();
    let authd = start(dir.path(), "");
    let out = dig(
        port(&authd),
        &["+opcode=3", "+rec", "+cd", "example.com", "SOA"],
    );
    assert!(out.contains(";; flags: qr rd;"), "{out}");
}

/// The idle timeout (`[tcp] idle_timeout`, 7 s) in units of 100 ms, to a
/// TCP query with edns-tcp-keepalive; never over UDP.
#[test]
fn tcp_keepalive_tells_the_idle_timeout() {
    let dir = tempdir();
    let authd = start(dir.path(), "[tcp]\nidle_timeout = 7\n");
    let out = dig(port(&authd), &["+tcp", "+keepalive", "example.com", "SOA"]);
    assert_eq!(
        lines(&out, "; TCP KEEPALIVE:"),
        ["; TCP KEEPALIVE: 7.0 secs"],
        "{out}"
    );
    let out = dig(
        port(&authd),
        &["+notcp", "+keepalive", "example.com", "SOA"],
    );
    assert!(lines(&out, "; TCP KEEPALIVE").is_empty(), "UDP:\n{out}");
    assert!(out.contains("status: NOERROR"), "{out}");
    // The bytes: option 11, length 2, 70.
    let q = query(6, &[0, 11, 0, 0]);
    let reply = query_tcp(authd.addr(), &q);
    assert!(reply.ends_with(&[0, 11, 0, 2, 0, 70]), "{reply:02x?}");
    let reply = query_udp(authd.addr(), &q);
    assert!(reply.ends_with(&PLAIN_OPT), "{reply:02x?}");
}

/// The same options as Knot's client reads them: `kdig +nsid` shows the
/// NSID and the EDE of a refused name; the keepalive option (`+ednsopt=11`)
/// is answered with the idle timeout over TCP (70 units of 100 ms) and not
/// over UDP.
#[test]
fn kdig_reads_nsid_ede_and_keepalive() {
    require_tool("kdig", "-V", "knot-dnsutils");
    let dir = tempdir();
    let authd = start(
        dir.path(),
        "[server]\nnsid = \"ns1.example\"\n[tcp]\nidle_timeout = 7\n",
    );
    let kdig = |args: &[&str]| -> String {
        let out = run_with_timeout(
            Command::new("kdig")
                .args([
                    "@127.0.0.1",
                    "-p",
                    &port(&authd).to_string(),
                    "+norec",
                    "+retry=1",
                    "+time=3",
                ])
                .args(args),
            Duration::from_secs(20),
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = kdig(&["+nsid", "nowhere.example.org", "A"]);
    assert!(out.contains("status: REFUSED"), "{out}");
    assert_eq!(
        lines(&out, ";; EDE:"),
        [";; EDE: 20 (Not Authoritative)"],
        "{out}"
    );
    assert_eq!(
        lines(&out, ";; NSID:"),
        [";; NSID: 6E73312E6578616D706C65 \"ns1.example\""],
        "{out}"
    );
    let out = kdig(&["+tcp", "+ednsopt=11", "example.com", "SOA"]);
    assert!(out.contains("status: NOERROR"), "{out}");
    assert_eq!(
        lines(&out, ";; Option (11):"),
        [";; Option (11): 0046"],
        "{out}"
    );
    let out = kdig(&["+notcp", "+ednsopt=11", "example.com", "SOA"]);
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(lines(&out, ";; Option (11)").is_empty(), "UDP:\n{out}");
}

/// FORMERR for a malformed COOKIE (`dig +cookie=0102`: 2 bytes) or Client
/// Subnet option carries an OPT record (RFC 6891 §7), as BIND 9's does.
#[test]
fn formerr_for_a_bad_option_has_an_opt() {
    let dir = tempdir();
    let authd = start(dir.path(), "");
    let out = dig(port(&authd), &["+cookie=0102", "example.com", "SOA"]);
    assert_eq!(
        status_ede_opt(&out),
        ("FORMERR".to_string(), vec![], true),
        "{out}"
    );
    // Client Subnet of family 3.
    let q = query(6, &[0, 8, 0, 4, 0, 3, 0, 0]);
    let reply = query_udp(authd.addr(), &q);
    assert_eq!(reply[3] & 0x0F, 1, "FORMERR: {reply:02x?}");
    assert_eq!(&reply[10..12], &[0, 1], "ARCOUNT 1: {reply:02x?}");
    assert!(reply.ends_with(&PLAIN_OPT), "{reply:02x?}");
}

/// A 12-link chain is answered whole (13 records), as NSD answers it; a
/// 300-link one too over TCP, with TC over UDP where it cannot fit; a loop
/// ends at its first repeat.
#[test]
fn cname_chains_are_followed_whole() {
    let dir = tempdir();
    let authd = start(dir.path(), "");
    let p = port(&authd);
    let peer = nsd(dir.path());
    let short = |port, name: &str, more: &[&str]| {
        let mut args = vec!["+short", name, "A"];
        args.extend_from_slice(more);
        dig(port, &args)
    };
    let ours = short(p, "c1.example.com", &[]);
    assert_eq!(ours.lines().count(), 13, "{ours}");
    assert_eq!(ours.lines().last(), Some("192.0.2.99"), "{ours}");
    assert_eq!(ours, short(peer.port, "c1.example.com", &[]), "NSD");
    let long = short(p, "l0.example.com", &["+tcp"]);
    assert_eq!(long.lines().count(), 301, "{long}");
    assert_eq!(long, short(peer.port, "l0.example.com", &["+tcp"]), "NSD");
    let udp = dig(p, &["+ignore", "+bufsize=1232", "l0.example.com", "A"]);
    assert!(udp.contains(";; flags: qr aa tc;"), "{udp}");
    let out = dig(p, &["loop1.example.com", "A"]);
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(out.contains("ANSWER: 2,"), "{out}");
}
