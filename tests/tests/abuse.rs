//! End to end: what keeps authd safe on a public address, tried as an
//! attacker would — response rate limiting (RRL) against a burst from one
//! prefix while other clients keep asking, DNS cookies with `dig` and `kdig`
//! (and as the way past rate limiting), minimal ANY over UDP (RFC 8482), and
//! the log budget against a flood of refused transfers. Distinct
//! 127.x.y.z source addresses stand for distinct clients.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use authd_tests::hickory_proto::op::ResponseCode;
use authd_tests::{
    AuthdProcess, QueryBuilder, binary, load_zone_text, parse_reply, query_tcp, run_with_timeout,
    tcp_connect, tcp_recv, tcp_send, tempdir, write_file,
};

const ZONE: &str = "$TTL 300
@    IN SOA ns1 hostmaster 7 3600 900 604800 300
     IN NS  ns1
     IN NS  ns2
     IN MX  10 mail
     IN TXT \"v=spf1 -all\"
     IN A   192.0.2.1
ns1  IN A   192.0.2.53
ns2  IN A   192.0.2.54
mail IN A   192.0.2.25
www  IN A   192.0.2.80
";

/// Starts authd serving example.org from an sqlite3 DB in `dir`, with
/// `extra` TOML; rate limiting as the config says (on by default).
fn start(dir: &Path, extra: &str) -> AuthdProcess {
    let db = dir.join("zone.sqlite3");
    load_zone_text(&db, "example.org.", ZONE);
    let config = write_file(
        dir,
        "authd.toml",
        &format!(
            "[[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n{extra}",
            db.display()
        ),
    );
    let mut cmd = Command::new(binary("authd"));
    cmd.arg("--config")
        .arg(&config)
        .args(["--listen", "127.0.0.1:0"])
        // The harness turns rate limiting off unless a test sets it.
        .env("AUTHD_RRL__ENABLED", "true");
    AuthdProcess::start_command(cmd, 1)
}

/// A query for `qname` `qtype` (as a type number), id `id`, with an OPT
/// carrying `cookie` (client cookie, then any server cookie) when given.
fn query(id: u16, qname: &str, qtype: u16, cookie: Option<&[u8]>) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, u8::from(cookie.is_some())]);
    for label in qname.trim_end_matches('.').split('.') {
        m.push(label.len() as u8);
        m.extend_from_slice(label.as_bytes());
    }
    m.push(0);
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes());
    if let Some(c) = cookie {
        m.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0]);
        m.extend_from_slice(&(4 + c.len() as u16).to_be_bytes());
        m.extend_from_slice(&[0, 10]);
        m.extend_from_slice(&(c.len() as u16).to_be_bytes());
        m.extend_from_slice(c);
    }
    m
}

/// What came back for one burst.
#[derive(Debug, Default)]
struct Burst {
    /// Replies with an answer (TC clear).
    full: usize,
    /// Minimal truncated replies (TC set, no answer).
    slipped: usize,
    /// BADCOOKIE replies (extended rcode 23).
    badcookie: usize,
    /// Queries without a reply.
    dropped: usize,
    /// The server cookie of the last reply that carried one.
    server_cookie: Option<Vec<u8>>,
    /// Bytes sent and received.
    bytes_out: usize,
    bytes_in: usize,
}

/// The COOKIE option data at the end of a reply (our OPT is its last record).
fn reply_cookie(reply: &[u8]) -> Option<Vec<u8>> {
    let at = reply.len().checked_sub(28)?;
    (reply[at..at + 4] == [0, 10, 0, 24]).then(|| reply[at + 4..].to_vec())
}

/// Sends `n` queries from `from` to `addr` as fast as it can, then collects
/// the replies for up to a second.
fn burst(from: IpAddr, addr: SocketAddr, n: u16, qname: &str, cookie: Option<&[u8]>) -> Burst {
    let sock = UdpSocket::bind(SocketAddr::new(from, 0)).expect("bind client");
    sock.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut seen = vec![false; usize::from(n)];
    let mut b = Burst::default();
    for id in 0..n {
        let q = query(id, qname, 1, cookie);
        b.bytes_out += q.len();
        sock.send_to(&q, addr).expect("send");
    }
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline && seen.iter().any(|s| !s) {
        let Ok((len, _)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let r = &buf[..len];
        let id = usize::from(u16::from_be_bytes([r[0], r[1]]));
        let Some(slot) = seen.get_mut(id) else {
            continue;
        };
        *slot = true;
        b.bytes_in += len;
        let ancount = u16::from_be_bytes([r[6], r[7]]);
        let tc = r[2] & 0x02 != 0;
        let rcode = r[3] & 0x0F;
        if let Some(c) = reply_cookie(r) {
            b.server_cookie = Some(c[8..].to_vec());
        }
        if rcode == 7 && reply_cookie(r).is_some() {
            b.badcookie += 1;
        } else if tc && ancount == 0 {
            b.slipped += 1;
        } else if ancount > 0 && !tc {
            b.full += 1;
        } else {
            panic!("unexpected reply {r:?}");
        }
    }
    b.dropped = seen.iter().filter(|s| !**s).count();
    b
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

/// A burst of 400 queries from one /24 gets the rate (20/s) answered in
/// full, every second limited response slipped as TC=1, the rest dropped;
/// meanwhile a client in another /24 gets every answer, TCP from the limited
/// prefix is never limited, and the limited prefix is logged once.
#[test]
fn rrl_limits_a_burst_from_one_prefix_only() {
    let dir = tempdir();
    let authd = start(dir.path(), "[rrl]\nresponses_per_second = 20\nwindow = 2\n");
    let started = Instant::now();
    let attacker = burst(ip("127.0.0.1"), authd.addr(), 400, "www.example.org.", None);
    let elapsed = started.elapsed().as_secs_f64();
    let other = burst(ip("127.1.0.1"), authd.addr(), 20, "www.example.org.", None);
    // 20 at once, plus what the bucket refilled while the burst was read.
    let most = 20 + (20.0 * elapsed).ceil() as usize;
    assert!(
        (20..=most).contains(&attacker.full),
        "{attacker:?} (at most {most})"
    );
    let limited = 400 - attacker.full;
    assert!(
        attacker.slipped.abs_diff(limited / 2) <= 1,
        "every second limited response slips: {attacker:?}"
    );
    assert_eq!(attacker.slipped + attacker.dropped + attacker.full, 400);
    assert_eq!((other.full, other.dropped), (20, 0), "{other:?}");
    for _ in 0..30 {
        let reply = parse_reply(&query_tcp(
            authd.addr(),
            &QueryBuilder::new("www.example.org.", "A").wire(),
        ));
        assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
        assert_eq!(reply.answers.len(), 1, "TCP is never limited");
    }
    assert!(authd.wait_for_log(
        "rate limit: 127.0.0.0/24 exceeds 20 answer",
        Duration::from_secs(2)
    ));
    assert_eq!(
        authd.stderr().matches("rate limit: 127.0.0.0/24").count(),
        1,
        "logged once per limited prefix:\n{}",
        authd.stderr()
    );
}

/// Exempt prefixes are never limited; in log-only mode nothing is, but the
/// limited prefix is logged.
#[test]
fn rrl_exempt_prefixes_and_log_only() {
    let dir = tempdir();
    let authd = start(
        dir.path(),
        "[rrl]\nresponses_per_second = 5\nexempt = [\"127.2.0.0/16\"]\n",
    );
    let exempt = burst(ip("127.2.3.4"), authd.addr(), 100, "www.example.org.", None);
    assert_eq!((exempt.full, exempt.dropped), (100, 0), "{exempt:?}");
    let limited = burst(ip("127.3.0.1"), authd.addr(), 100, "www.example.org.", None);
    assert!(limited.full < 20, "{limited:?}");

    let dir = tempdir();
    let logging = start(
        dir.path(),
        "[rrl]\nresponses_per_second = 5\nlog_only = true\n",
    );
    let all = burst(
        ip("127.0.0.1"),
        logging.addr(),
        100,
        "www.example.org.",
        None,
    );
    assert_eq!((all.full, all.dropped), (100, 0), "{all:?}");
    assert!(logging.wait_for_log("(log only)", Duration::from_secs(2)));
}

/// `dig +cookie` gets a server cookie (RFC 9018: 16 bytes, version 1),
/// sending it back keeps it valid (echoed while fresh), a forged one is
/// replaced; `kdig +cookie` gets one too, and sending it back is accepted.
#[test]
fn cookies_with_dig_and_kdig() {
    let dir = tempdir();
    let authd = start(dir.path(), "");
    let port = authd.addr().port().to_string();
    let dig = |cookie: &str| {
        let out = run_with_timeout(
            Command::new("dig").args(["@127.0.0.1", "-p", &port, cookie, "www.example.org.", "A"]),
            Duration::from_secs(10),
        );
        assert!(
            out.status.success(),
            "dig: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    fn cookie_of(out: &str) -> Vec<String> {
        out.lines()
            .find_map(|l| l.strip_prefix("; COOKIE: "))
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .unwrap_or_else(|| panic!("no COOKIE line:\n{out}"))
    }
    let first = dig("+cookie");
    let fields = cookie_of(&first);
    assert_eq!(fields.get(1).map(String::as_str), Some("(good)"), "{first}");
    let full = fields[0].to_string();
    assert_eq!(full.len(), 48, "client 8 + server 16 bytes, hex: {full}");
    assert!(
        full[16..].starts_with("01000000"),
        "version 1, reserved 0: {full}"
    );
    // Sent back: valid, and echoed as it is (fresh).
    let again = dig(&format!("+cookie={full}"));
    assert_eq!(
        cookie_of(&again),
        [full.clone(), "(good)".to_string()],
        "{again}"
    );
    // A forged server cookie: answered normally, with a new one.
    let forged = format!("{}{}", &full[..16], "01000000ffffffffffffffffffffffff");
    let out = dig(&format!("+cookie={forged}"));
    assert!(out.contains("status: NOERROR"), "{out}");
    let renewed = cookie_of(&out)[0].to_string();
    assert_eq!(&renewed[..16], &full[..16]);
    assert_ne!(renewed, forged);

    let kdig = |cookie: &str| {
        let out = run_with_timeout(
            Command::new("kdig").args(["@127.0.0.1", "-p", &port, cookie, "www.example.org.", "A"]),
            Duration::from_secs(10),
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let line = text
            .lines()
            .find(|l| l.contains("COOKIE:"))
            .unwrap_or_else(|| panic!("kdig shows no cookie:\n{text}"));
        line.split("COOKIE:")
            .nth(1)
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    };
    let got = kdig("+cookie");
    assert_eq!(got.len(), 48, "kdig: {got}");
    // kdig sends it back: accepted, and echoed as it is (fresh).
    assert_eq!(kdig(&format!("+cookie={got}")), got);
}

/// A client presenting a valid server cookie is not rate limited; one
/// presenting only a client cookie is, and its slipped replies are
/// BADCOOKIE with a fresh server cookie (RFC 7873 §5.2.3) so it can retry
/// with it.
#[test]
fn cookies_pass_rate_limiting_and_badcookie_slips() {
    let dir = tempdir();
    let authd = start(dir.path(), "[rrl]\nresponses_per_second = 5\n");
    let client_cookie = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let without = burst(
        ip("127.0.0.1"),
        authd.addr(),
        100,
        "www.example.org.",
        Some(&client_cookie),
    );
    assert!((5..=10).contains(&without.full), "{without:?}");
    assert!(
        without.badcookie.abs_diff((100 - without.full) / 2) <= 1,
        "limited replies slip as BADCOOKIE: {without:?}"
    );
    assert_eq!(
        without.slipped, 0,
        "no TC slip for a cookie client: {without:?}"
    );
    let server = without.server_cookie.expect("a server cookie");
    assert_eq!(server.len(), 16);
    let mut full_cookie = client_cookie.to_vec();
    full_cookie.extend_from_slice(&server);
    let with = burst(
        ip("127.0.0.1"),
        authd.addr(),
        100,
        "www.example.org.",
        Some(&full_cookie),
    );
    assert_eq!(
        (with.full, with.dropped),
        (100, 0),
        "valid cookie, never limited: {with:?}"
    );
    // A malformed cookie (12 bytes) is FORMERR (RFC 7873 §5.2.2).
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    sock.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    sock.send_to(
        &query(7, "www.example.org.", 1, Some(&[9; 12])),
        authd.addr(),
    )
    .expect("send");
    let mut buf = [0u8; 512];
    let (n, _) = sock.recv_from(&mut buf).expect("reply");
    assert_eq!(buf[3] & 0x0F, 1, "FORMERR: {:?}", &buf[..n]);
}

/// ANY over UDP gets one RRset and no TC (RFC 8482 §4.1): a small reply; over
/// TCP every RRset. (A 40-byte ANY at the apex no longer fetches ~300 bytes.)
#[test]
fn any_over_udp_is_one_rrset() {
    let dir = tempdir();
    let authd = start(dir.path(), "[rrl]\nenabled = false\n");
    let q = query(1, "example.org.", 255, None);
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    sock.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    sock.send_to(&q, authd.addr()).expect("send");
    let mut buf = [0u8; 4096];
    let (n, _) = sock.recv_from(&mut buf).expect("reply");
    let udp = parse_reply(&buf[..n]);
    assert!(!udp.metadata.truncation);
    assert_eq!(udp.answers.len(), 1, "{udp:?}");
    assert_eq!(udp.answers[0].record_type().to_string(), "A");
    let tcp = parse_reply(&query_tcp(authd.addr(), &q));
    assert_eq!(tcp.answers.len(), 6, "A, NS×2, SOA, MX, TXT over TCP");
    assert!(n < 100, "{n} bytes over UDP");
}

/// 2,000 refused AXFRs from one address do not write 2,000 log lines: the
/// per-second log budget holds, with a count of the lines left out.
#[test]
fn refused_transfer_flood_does_not_flood_the_log() {
    let dir = tempdir();
    let authd = start(dir.path(), "");
    let mut stream = tcp_connect(authd.addr());
    let axfr = query(3, "example.org.", 252, None);
    let started = Instant::now();
    for _ in 0..2000 {
        tcp_send(&mut stream, &axfr);
        let reply = tcp_recv(&mut stream).expect("reply");
        assert_eq!(reply[3] & 0x0F, 5, "REFUSED");
    }
    let seconds = started.elapsed().as_secs() + 1;
    std::thread::sleep(Duration::from_millis(200));
    let log = authd.stderr();
    let lines = log.matches("refused for 127.0.0.1").count() as u64;
    assert!(
        lines <= 10 * (seconds + 1),
        "{lines} lines in {seconds} s:\n{}",
        log.lines().rev().take(5).collect::<Vec<_>>().join("\n")
    );
    assert!(lines >= 1);
}
