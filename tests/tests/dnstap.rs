//! End to end: `[dnstap] file` and `[dnstap] socket` log every query and its
//! response (AUTH_QUERY, AUTH_RESPONSE) in Frame Streams, as BIND's
//! `dnstap-read` (Debian package bind9-dnsutils) and `fstrm_capture` (Debian
//! package fstrm-bin) read them.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use authd_tests::{
    AuthdProcess, QueryBuilder, load_zone_text, query_tcp, query_udp, run_with_timeout, tempdir,
    write_file,
};

const ZONE: &str = "$TTL 300
@    IN SOA ns1 hostmaster 7 3600 900 604800 300
     IN NS  ns1
ns1  IN A   192.0.2.53
www  IN A   192.0.2.80
";

/// Queries sent per test.
const N: usize = 5;

/// authd serving example.org with `dnstap` (TOML lines) as its `[dnstap]` section.
fn start(dir: &Path, dnstap: &str) -> AuthdProcess {
    let db = dir.join("zone.sqlite3");
    load_zone_text(&db, "example.org.", ZONE);
    let config = write_file(
        dir,
        "authd.toml",
        &format!(
            "[dnstap]\n{dnstap}\nidentity = \"ns1\"\nversion = \"authd-test\"\n\
             [[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n",
            db.display()
        ),
    );
    AuthdProcess::start(["--config".as_ref(), config.as_os_str()])
}

/// Sends N UDP queries q0…q{N-1}.example.org A and one TCP query for
/// www.example.org A; each is answered.
fn send_queries(authd: &AuthdProcess) {
    for i in 0..N {
        let q = QueryBuilder::new(&format!("q{i}.example.org."), "A").id(i as u16);
        assert!(!query_udp(authd.addr(), &q.wire()).is_empty());
    }
    let q = QueryBuilder::new("www.example.org.", "A");
    assert!(!query_tcp(authd.addr(), &q.wire()).is_empty());
}

/// `dnstap-read FILE`'s lines, without the leading date and time.
fn dnstap_read(file: &Path) -> Vec<String> {
    let out = run_with_timeout(
        Command::new("dnstap-read").arg(file),
        Duration::from_secs(10),
    );
    assert!(
        out.status.success(),
        "dnstap-read (apt-get install bind9-dnsutils): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.splitn(3, ' ').nth(2).unwrap_or(l).to_string())
        .collect()
}

/// The lines expected for [`send_queries`] to `server` (client ports
/// replaced by PORT).
fn expected(server: SocketAddr) -> Vec<String> {
    let mut want = Vec::new();
    for i in 0..N {
        // NXDOMAIN with the SOA: 32 bytes in, 83 out.
        want.push(format!(
            "AQ 127.0.0.1:PORT -> {server} UDP 32b q{i}.example.org/IN/A"
        ));
        want.push(format!(
            "AR 127.0.0.1:PORT <- {server} UDP 83b q{i}.example.org/IN/A"
        ));
    }
    want.push(format!(
        "AQ 127.0.0.1:PORT -> {server} TCP 33b www.example.org/IN/A"
    ));
    want.push(format!(
        "AR 127.0.0.1:PORT <- {server} TCP 49b www.example.org/IN/A"
    ));
    want
}

/// Replaces the client port of `127.0.0.1:NNNNN` by PORT.
fn without_ports(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            let mut words: Vec<String> = l.split(' ').map(str::to_string).collect();
            if let Some(w) = words.get_mut(1)
                && let Some((ip, _)) = w.rsplit_once(':')
            {
                *w = format!("{ip}:PORT");
            }
            words.join(" ")
        })
        .collect()
}

#[test]
fn file_read_by_dnstap_read() {
    let dir = tempdir();
    let file = dir.path().join("authd.dnstap");
    let mut authd = start(dir.path(), &format!("file = \"{}\"", file.display()));
    send_queries(&authd);
    // A reload keeps the log going.
    authd.signal("HUP");
    assert!(
        authd.wait_for_log("reload: ", Duration::from_secs(10)),
        "{}",
        authd.stderr()
    );
    let q = QueryBuilder::new("after.example.org.", "A");
    assert!(!query_udp(authd.addr(), &q.wire()).is_empty());
    assert!(authd.terminate().success(), "{}", authd.stderr());
    let lines = dnstap_read(&file);
    let server = authd.addr();
    let mut want = expected(server);
    want.push(format!(
        "AQ 127.0.0.1:PORT -> {server} UDP 35b after.example.org/IN/A"
    ));
    want.push(format!(
        "AR 127.0.0.1:PORT <- {server} UDP 86b after.example.org/IN/A"
    ));
    assert_eq!(without_ports(&lines), want, "{lines:#?}");
}

/// Waits (up to 5 s) for `path` to exist.
fn wait_for_path(path: &Path) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !path.exists() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Kills (by PID) a child left running by a failed test.
struct Reader(Child);

impl Drop for Reader {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn socket_read_by_fstrm_capture() {
    let dir = tempdir();
    let sock = dir.path().join("dnstap.sock");
    let captured = dir.path().join("captured.dnstap");
    let mut reader = Reader(
        Command::new("fstrm_capture")
            .args(["-t", "protobuf:dnstap.Dnstap", "-u"])
            .arg(&sock)
            .arg("-w")
            .arg(&captured)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("fstrm_capture is required: apt-get install fstrm-bin"),
    );
    assert!(wait_for_path(&sock), "fstrm_capture did not listen");
    let mut authd = start(dir.path(), &format!("socket = \"{}\"", sock.display()));
    send_queries(&authd);
    assert!(authd.terminate().success(), "{}", authd.stderr());
    // authd's STOP ends the stream; fstrm_capture writes its file on SIGTERM.
    let status = Command::new("kill")
        .args(["-s", "TERM", &reader.0.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let _ = reader.0.wait();
    let lines = dnstap_read(&captured);
    assert_eq!(without_ports(&lines), expected(authd.addr()), "{lines:#?}");
}
