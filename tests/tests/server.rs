//! End-to-end tests of the `authd` binary at the server level: start-up, the
//! command line and configuration, signals, UDP and TCP handling and limits.
//! Query semantics are tested in `auth/tests/semantics.rs`.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use authd_datasrc::{Name, sqlite_load, zonefile};
use authd_tests::hickory_proto::op::{Message, MessageType, ResponseCode};
use authd_tests::hickory_proto::rr::{DNSClass, RData, RecordType};
use authd_tests::{
    AuthdProcess, QueryBuilder, binary, parse_reply, query_tcp, query_udp, run_authd,
    tcp_closed_within, tcp_connect, tcp_recv, tcp_send, tempdir, try_query_udp, write_file,
};

const ZONE: &str = "\
$ORIGIN example.org.
$TTL 3600
@    IN SOA ns1 hostmaster 1 7200 3600 1209600 300
     IN NS  ns1
ns1  IN A   192.0.2.1
www  IN A   192.0.2.10
     IN A   192.0.2.11
h1   IN A   192.0.2.21
h2   IN A   192.0.2.22
h3   IN A   192.0.2.23
h4   IN A   192.0.2.24
h5   IN A   192.0.2.25
";

/// A zone DB holding example.org (from [`ZONE`]) in `dir`.
fn zone_db(dir: &Path) -> PathBuf {
    let db = dir.join("zone.sqlite3");
    let origin: Name = "example.org.".parse().expect("origin");
    let records =
        zonefile::parse_master_text(ZONE, Path::new("example.org.zone"), &origin).expect("parses");
    let mut conn = authd_migrations::open_or_create(&db).expect("create DB");
    sqlite_load::load_zone(&mut conn, &origin, &records, |_, _| {}).expect("loads");
    db
}

/// A config file in `dir` serving [`zone_db`] with `extra` TOML appended.
fn config_file(dir: &Path, extra: &str) -> PathBuf {
    zone_db(dir);
    write_file(
        dir,
        "authd.toml",
        &format!("[[datasource]]\ntype = \"sqlite3\"\nfile = \"zone.sqlite3\"\n{extra}"),
    )
}

fn start_with_config(dir: &Path, extra: &str) -> AuthdProcess {
    let cfg = config_file(dir, extra);
    AuthdProcess::start([PathBuf::from("--config"), cfg])
}

fn a_addrs(reply: &Message) -> Vec<String> {
    let mut v: Vec<String> = reply
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(a.0.to_string()),
            _ => None,
        })
        .collect();
    v.sort();
    v
}

fn assert_www_answer(reply: &Message, id: u16) {
    assert_eq!(reply.metadata.id, id);
    assert_eq!(reply.metadata.message_type, MessageType::Response);
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert!(reply.metadata.authoritative);
    assert_eq!(a_addrs(reply), vec!["192.0.2.10", "192.0.2.11"]);
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs authd expecting a start-up failure; returns its whole stderr.
fn start_failure(args: &[&std::ffi::OsStr]) -> String {
    let out = run_authd(args);
    assert!(
        !out.status.success(),
        "authd {args:?} should fail to start; stderr:\n{}",
        stderr_of(&out)
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    stderr_of(&out)
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

// ---------------------------------------------------------------- answering

#[test]
fn answers_over_udp_and_tcp() {
    let dir = tempdir();
    let db = zone_db(dir.path());
    let authd = AuthdProcess::start([os("--db"), db.as_os_str()]);
    let q = QueryBuilder::new("www.example.org", "A").id(0x1234);
    assert_www_answer(&parse_reply(&query_udp(authd.addr(), &q.wire())), 0x1234);
    assert_www_answer(&parse_reply(&query_tcp(authd.addr(), &q.wire())), 0x1234);
    let q = QueryBuilder::new("nope.example.org", "A")
        .edns(1232, true)
        .id(9);
    let reply = parse_reply(&query_udp(authd.addr(), &q.wire()));
    assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
    assert!(reply.edns.is_some(), "EDNS query gets an EDNS reply");
}

#[test]
fn tcp_queries_on_one_connection_are_answered_in_order() {
    let dir = tempdir();
    let db = zone_db(dir.path());
    let authd = AuthdProcess::start([os("--db"), db.as_os_str()]);
    let mut stream = tcp_connect(authd.addr());
    // Pipelined: all queries are written before any reply is read.
    let names = ["h1", "h2", "h3", "h4", "h5", "www"];
    let mut batch = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let wire = QueryBuilder::new(&format!("{n}.example.org"), "A")
            .id(100 + i as u16)
            .wire();
        batch.extend_from_slice(&(wire.len() as u16).to_be_bytes());
        batch.extend_from_slice(&wire);
    }
    stream.write_all(&batch).expect("write batch");
    for (i, n) in names.iter().enumerate() {
        let reply = parse_reply(&tcp_recv(&mut stream).expect("reply"));
        assert_eq!(reply.metadata.id, 100 + i as u16, "reply {i} out of order");
        assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
        let q = reply.queries.first().expect("question echoed");
        assert_eq!(q.name().to_ascii(), format!("{n}.example.org."));
    }
    // The connection stays usable for one more query after the batch.
    let q = QueryBuilder::new("www.example.org", "A").id(7);
    tcp_send(&mut stream, &q.wire());
    assert_www_answer(&parse_reply(&tcp_recv(&mut stream).expect("reply")), 7);
}

#[test]
fn tcp_message_split_across_writes_is_reassembled() {
    let dir = tempdir();
    let db = zone_db(dir.path());
    let authd = AuthdProcess::start([os("--db"), db.as_os_str()]);
    let mut stream = tcp_connect(authd.addr());
    let wire = QueryBuilder::new("www.example.org", "A").id(55).wire();
    let mut frame = (wire.len() as u16).to_be_bytes().to_vec();
    frame.extend_from_slice(&wire);
    for chunk in frame.chunks(5) {
        stream.write_all(chunk).expect("write");
        stream.flush().expect("flush");
        std::thread::sleep(Duration::from_millis(30));
    }
    assert_www_answer(&parse_reply(&tcp_recv(&mut stream).expect("reply")), 55);
}

#[test]
fn chaos_version_and_hostname_come_from_config() {
    let dir = tempdir();
    let authd = start_with_config(
        dir.path(),
        "[chaos]\nversion = \"test-version\"\nhostname = \"test-host\"\n",
    );
    for (qname, text) in [
        ("version.bind", "test-version"),
        ("hostname.bind", "test-host"),
    ] {
        let q = QueryBuilder::new(qname, "TXT").class(DNSClass::CH).id(3);
        let reply = parse_reply(&query_udp(authd.addr(), &q.wire()));
        assert_eq!(
            reply.metadata.response_code,
            ResponseCode::NoError,
            "{qname}"
        );
        let txt: Vec<String> = reply
            .answers
            .iter()
            .filter_map(|r| match &r.data {
                RData::TXT(t) => Some(t.to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(txt, vec![text.to_string()], "{qname}");
    }
}

#[test]
fn ipv6_listen_address() {
    if UdpSocket::bind("[::1]:0").is_err() {
        eprintln!("skipped: no IPv6 loopback");
        return;
    }
    let dir = tempdir();
    let db = zone_db(dir.path());
    let mut cmd = Command::new(binary("authd"));
    cmd.arg("--db")
        .arg(&db)
        .args(["--listen", "[::1]:0", "--listen", "127.0.0.1:0"]);
    let authd = AuthdProcess::start_command(cmd, 2);
    let v6 = authd.addrs()[0];
    assert!(v6.is_ipv6(), "{v6}");
    assert!(authd.addrs()[1].is_ipv4());
    let q = QueryBuilder::new("www.example.org", "A").id(66);
    assert_www_answer(&parse_reply(&query_udp(v6, &q.wire())), 66);
    assert_www_answer(&parse_reply(&query_tcp(v6, &q.wire())), 66);
}

// ---------------------------------------------------------------- limits

#[test]
fn idle_tcp_connection_is_closed_after_the_timeout() {
    let dir = tempdir();
    let authd = start_with_config(dir.path(), "[tcp]\nidle_timeout = 1\n");
    let mut stream = tcp_connect(authd.addr());
    let opened = Instant::now();
    assert!(
        !tcp_closed_within(&mut stream, Duration::from_millis(500)),
        "closed before the idle timeout"
    );
    assert!(
        tcp_closed_within(&mut stream, Duration::from_secs(3)),
        "not closed within 3 s of a 1 s idle timeout"
    );
    let elapsed = opened.elapsed();
    assert!(
        elapsed >= Duration::from_millis(900),
        "closed after {elapsed:?}"
    );
    // A half-sent message counts as idle too.
    let mut stream = tcp_connect(authd.addr());
    stream.write_all(&[0, 40, 1, 2]).expect("partial write");
    assert!(tcp_closed_within(&mut stream, Duration::from_secs(3)));
    // And the server still accepts new connections.
    let mut stream = tcp_connect(authd.addr());
    assert!(!tcp_closed_within(&mut stream, Duration::from_millis(300)));
}

/// A TCP connection from `from` (any 127.x.y.z stands for another client).
fn tcp_connect_from(from: std::net::IpAddr, addr: SocketAddr) -> std::net::TcpStream {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .expect("socket");
    sock.bind(&SocketAddr::new(from, 0).into())
        .expect("bind source");
    sock.connect_timeout(&addr.into(), Duration::from_secs(5))
        .expect("connect");
    let stream: std::net::TcpStream = sock.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    stream
}

/// When every connection is taken, the one idle longest is closed for the
/// newcomer (RFC 7766 §6.2.3 leaves the choice; a hoarder cannot lock others
/// out), and a busy table still takes new clients as old ones leave.
#[test]
fn full_tcp_table_closes_the_longest_idle_connection() {
    let dir = tempdir();
    let authd = start_with_config(
        dir.path(),
        "[tcp]\nmax_connections = 2\nidle_timeout = 30\nfirst_query_timeout = 30\n",
    );
    let mut first = tcp_connect(authd.addr());
    std::thread::sleep(Duration::from_millis(200));
    let mut second = tcp_connect(authd.addr());
    std::thread::sleep(Duration::from_millis(200));
    let mut third = tcp_connect(authd.addr());
    assert!(
        tcp_closed_within(&mut first, Duration::from_secs(2)),
        "the longest idle connection was not closed"
    );
    assert!(!tcp_closed_within(&mut second, Duration::from_millis(200)));
    assert!(!tcp_closed_within(&mut third, Duration::from_millis(200)));
    // A connection that just asked is not the longest idle any more.
    let q = QueryBuilder::new("www.example.org.", "A").wire();
    tcp_send(&mut second, &q);
    tcp_recv(&mut second).expect("answer on the second connection");
    let mut fourth = tcp_connect(authd.addr());
    assert!(
        tcp_closed_within(&mut third, Duration::from_secs(2)),
        "third was idle longest"
    );
    assert!(!tcp_closed_within(&mut second, Duration::from_millis(200)));
    tcp_send(&mut fourth, &q);
    assert!(tcp_recv(&mut fourth).is_ok(), "the newcomer is served");
}

/// One client prefix holds at most `max_connections_per_client`
/// connections: an attacker at one address cannot take the whole table,
/// and a client in another /24 still connects and is answered.
#[test]
fn tcp_connections_over_the_per_client_limit_are_closed_at_once() {
    let dir = tempdir();
    let authd = start_with_config(
        dir.path(),
        "[tcp]\nmax_connections_per_client = 3\nidle_timeout = 30\nfirst_query_timeout = 30\n",
    );
    let attacker: std::net::IpAddr = "127.0.0.1".parse().expect("ip");
    let same_prefix: std::net::IpAddr = "127.0.0.77".parse().expect("ip");
    let mut held: Vec<_> = (0..3)
        .map(|_| tcp_connect_from(attacker, authd.addr()))
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut over = tcp_connect_from(same_prefix, authd.addr());
    assert!(
        tcp_closed_within(&mut over, Duration::from_secs(2)),
        "a fourth connection from the same /24 was not closed"
    );
    for s in &mut held {
        assert!(!tcp_closed_within(s, Duration::from_millis(100)));
    }
    let mut other = tcp_connect_from("127.1.0.1".parse().expect("ip"), authd.addr());
    tcp_send(
        &mut other,
        &QueryBuilder::new("www.example.org.", "A").wire(),
    );
    let reply = parse_reply(&tcp_recv(&mut other).expect("answer from another /24"));
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    // Closing one frees a place for that prefix.
    held.pop();
    std::thread::sleep(Duration::from_millis(300));
    let mut again = tcp_connect_from(same_prefix, authd.addr());
    assert!(!tcp_closed_within(&mut again, Duration::from_millis(300)));
}

/// Clients that pipeline queries and never read the replies (their replies
/// wait, the connections stuck writing) do not lock others out: a newcomer
/// takes the place of the one idle longest at once.
#[test]
fn clients_that_never_read_do_not_hold_the_tcp_table() {
    let dir = tempdir();
    let authd = start_with_config(
        dir.path(),
        "[tcp]\nmax_connections = 4\nmax_connections_per_client = 4\nidle_timeout = 30\n",
    );
    let q = QueryBuilder::new("www.example.org.", "A").wire();
    let mut frame = (q.len() as u16).to_be_bytes().to_vec();
    frame.extend_from_slice(&q);
    let burst: Vec<u8> = frame.repeat(20_000);
    let mut hoarders = Vec::new();
    for i in 0..4u8 {
        let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("socket");
        sock.set_recv_buffer_size(4096)
            .expect("small receive buffer");
        sock.bind(&SocketAddr::from(([127, 0, 80, i + 1], 0)).into())
            .expect("bind");
        sock.connect(&authd.addr().into()).expect("connect");
        let mut stream: std::net::TcpStream = sock.into();
        stream
            .set_write_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        // Writes until the server stops reading (its replies unread); never reads.
        let _ = stream.write_all(&burst);
        hoarders.push(stream);
    }
    let started = Instant::now();
    let mut newcomer = tcp_connect_from("127.0.81.1".parse().expect("ip"), authd.addr());
    tcp_send(&mut newcomer, &q);
    let reply = parse_reply(&tcp_recv(&mut newcomer).expect("the newcomer is answered"));
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    drop(hoarders);
}

/// A connection that sends nothing is closed after `first_query_timeout`,
/// long before the idle timeout.
#[test]
fn tcp_connection_without_a_first_query_is_closed_early() {
    let dir = tempdir();
    let authd = start_with_config(
        dir.path(),
        "[tcp]\nidle_timeout = 30\nfirst_query_timeout = 1\n",
    );
    let mut silent = tcp_connect(authd.addr());
    let opened = Instant::now();
    assert!(tcp_closed_within(&mut silent, Duration::from_secs(3)));
    let elapsed = opened.elapsed();
    assert!(
        (Duration::from_millis(900)..Duration::from_secs(3)).contains(&elapsed),
        "{elapsed:?}"
    );
    // After a first query the idle timeout applies: still open 1.5 s later.
    let mut talker = tcp_connect(authd.addr());
    tcp_send(
        &mut talker,
        &QueryBuilder::new("www.example.org.", "A").wire(),
    );
    tcp_recv(&mut talker).expect("answer");
    assert!(!tcp_closed_within(&mut talker, Duration::from_millis(1500)));
}

// ---------------------------------------------------------------- robustness

/// A small deterministic generator (xorshift) for reproducible junk packets.
fn junk(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.max(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn malformed_packets_do_not_stop_the_server() {
    let dir = tempdir();
    let db = zone_db(dir.path());
    let mut authd = AuthdProcess::start([os("--db"), db.as_os_str()]);
    let addr = authd.addr();
    let mut packets: Vec<Vec<u8>> = vec![vec![], vec![0x12], vec![1, 2, 3], vec![0; 12]];
    for seed in 1..200u64 {
        packets.push(junk(seed, (seed as usize * 7) % 600 + 1));
    }
    // A valid header with a question that runs past the end, and a name pointer loop.
    packets.push(vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, b'w', b'w']);
    packets.push(vec![
        0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1,
    ]);
    let client = UdpSocket::bind("127.0.0.1:0").expect("bind");
    for p in &packets {
        client.send_to(p, addr).expect("send junk");
    }
    let mut stream = tcp_connect(addr);
    for p in packets.iter().take(50) {
        tcp_send(&mut stream, p);
    }
    drop(stream);
    // A frame claiming 65535 bytes, then the connection closes half-way.
    let mut stream = tcp_connect(addr);
    stream.write_all(&[0xff, 0xff, 1, 2, 3]).expect("write");
    drop(stream);

    let q = QueryBuilder::new("www.example.org", "A").id(4242);
    assert_www_answer(&parse_reply(&query_udp(addr, &q.wire())), 4242);
    assert_www_answer(&parse_reply(&query_tcp(addr, &q.wire())), 4242);
    assert!(
        authd.wait_timeout(Duration::from_millis(10)).is_none(),
        "authd died"
    );
    assert!(!authd.stderr().contains("panicked"), "{}", authd.stderr());
    assert!(authd.terminate().success());
}

/// Bytes after the last counted record (here right after the question, with
/// ARCOUNT 0) make a malformed message: FORMERR with the question echoed, as
/// Knot DNS 3.2 and BIND 9 answer (NSD 4.6 ignores them), over UDP and TCP.
#[test]
fn trailing_bytes_after_the_question_get_formerr() {
    let dir = tempdir();
    let db = zone_db(dir.path());
    let authd = AuthdProcess::start([os("--db"), db.as_os_str()]);
    let q = QueryBuilder::new("www.example.org", "A").id(4343);
    let mut wire = q.wire();
    wire.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    for reply in [
        query_udp(authd.addr(), &wire),
        query_tcp(authd.addr(), &wire),
    ] {
        let reply = parse_reply(&reply);
        assert_eq!(reply.metadata.id, 4343);
        assert_eq!(reply.metadata.message_type, MessageType::Response);
        assert_eq!(reply.metadata.response_code, ResponseCode::FormErr);
        assert!(!reply.metadata.authoritative);
        assert_eq!(reply.queries.len(), 1);
        assert_eq!(reply.queries[0].name().to_ascii(), "www.example.org.");
        assert_eq!(reply.queries[0].query_type(), RecordType::A);
        assert!(reply.answers.is_empty());
    }
    // The same query without them is answered.
    assert_www_answer(&parse_reply(&query_udp(authd.addr(), &q.wire())), 4343);
}

#[test]
fn a_response_is_not_answered() {
    let dir = tempdir();
    let db = zone_db(dir.path());
    let authd = AuthdProcess::start([os("--db"), db.as_os_str()]);
    let mut wire = QueryBuilder::new("www.example.org", "A").id(77).wire();
    wire[2] |= 0x80; // QR=1
    assert_eq!(try_query_udp(authd.addr(), &wire, 1), None);
}

/// UDP workers take queries in batches (`recvmmsg`) and send the replies
/// together (`sendmmsg`): a burst from several clients, with a response and junk
/// in between (no reply), must still get every reply, each to its own sender
/// and with its own answer.
#[test]
fn udp_burst_from_several_clients_gets_every_reply_to_its_sender() {
    let dir = tempdir();
    let db = zone_db(dir.path());
    let authd = AuthdProcess::start([os("--db"), db.as_os_str(), os("--udp-workers"), os("1")]);
    let addr = authd.addr();
    let hosts = ["h1", "h2", "h3", "h4", "h5"];
    let clients: Vec<UdpSocket> = (0..4)
        .map(|_| {
            let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
            s.set_read_timeout(Some(Duration::from_secs(2)))
                .expect("timeout");
            s
        })
        .collect();
    const PER_CLIENT: u16 = 60;
    for i in 0..PER_CLIENT {
        for (c, sock) in clients.iter().enumerate() {
            let id = (c as u16) << 8 | i;
            let host = hosts[(usize::from(i) + c) % hosts.len()];
            let q = QueryBuilder::new(&format!("{host}.example.org"), "A").id(id);
            sock.send_to(&q.wire(), addr).expect("send");
            if i % 16 == 0 {
                // Neither is answered; the rest of the batch must be.
                let mut response = q.wire();
                response[2] |= 0x80;
                sock.send_to(&response, addr).expect("send response");
                sock.send_to(&[0x12], addr).expect("send junk");
            }
        }
    }
    let mut buf = vec![0u8; 65_535];
    for (c, sock) in clients.iter().enumerate() {
        let mut seen = vec![false; usize::from(PER_CLIENT)];
        for _ in 0..PER_CLIENT {
            let (n, from) = sock.recv_from(&mut buf).unwrap_or_else(|e| {
                panic!(
                    "client {c}: {} of {PER_CLIENT} replies, then {e}",
                    seen.iter().filter(|s| **s).count()
                )
            });
            assert_eq!(from, addr);
            let reply = parse_reply(&buf[..n]);
            let id = reply.metadata.id;
            assert_eq!(
                usize::from(id >> 8),
                c,
                "reply {id:#06x} reached client {c}"
            );
            let i = usize::from(id & 0xff);
            assert!(!seen[i], "client {c}: reply {i} twice");
            seen[i] = true;
            let host = hosts[(i + c) % hosts.len()];
            assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
            assert_eq!(
                reply.queries[0].name().to_string(),
                format!("{host}.example.org.")
            );
            let last: u8 = host[1..].parse().expect("host number");
            assert_eq!(a_addrs(&reply), vec![format!("192.0.2.{}", 20 + last)]);
        }
        // Nothing more: the responses and the junk got no reply.
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        assert!(
            sock.recv_from(&mut buf).is_err(),
            "client {c}: an extra reply"
        );
    }
}

// ---------------------------------------------------------------- signals

#[test]
fn sigterm_stops_with_exit_code_0() {
    let dir = tempdir();
    let db = zone_db(dir.path());
    let mut authd = AuthdProcess::start([os("--db"), db.as_os_str()]);
    let status = authd.terminate();
    assert_eq!(status.code(), Some(0), "{}", authd.stderr());
    let log = authd.stderr();
    assert!(log.contains("received SIGTERM, shutting down"), "{log}");
    assert!(log.contains("stopped"), "{log}");
}

#[test]
fn sigint_stops_with_exit_code_0() {
    let dir = tempdir();
    let db = zone_db(dir.path());
    let mut authd = AuthdProcess::start([os("--db"), db.as_os_str()]);
    authd.signal("INT");
    let status = authd
        .wait_timeout(Duration::from_secs(10))
        .expect("exits after SIGINT");
    assert_eq!(status.code(), Some(0), "{}", authd.stderr());
}

#[test]
fn sigterm_with_an_open_tcp_connection_still_stops() {
    let dir = tempdir();
    let authd_dir = dir.path();
    let mut authd = start_with_config(authd_dir, "[tcp]\nidle_timeout = 60\n");
    let mut stream = tcp_connect(authd.addr());
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    assert_eq!(authd.terminate().code(), Some(0));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(tcp_closed_within(&mut stream, Duration::from_secs(2)));
}

#[test]
fn sighup_is_logged_and_serving_goes_on() {
    let dir = tempdir();
    let db = zone_db(dir.path());
    let mut authd = AuthdProcess::start([os("--db"), db.as_os_str()]);
    authd.signal("HUP");
    assert!(
        authd.wait_for_log("reload: 0 zones reloaded", Duration::from_secs(5)),
        "no SIGHUP log line:\n{}",
        authd.stderr()
    );
    assert!(authd.wait_timeout(Duration::from_millis(100)).is_none());
    assert_eq!(authd.terminate().code(), Some(0));
}

// ---------------------------------------------------------------- start-up

#[test]
fn listening_line_names_the_real_port() {
    let dir = tempdir();
    let db = zone_db(dir.path());
    let authd = AuthdProcess::start([os("--db"), db.as_os_str()]);
    let addr = authd.addr();
    assert_ne!(addr.port(), 0);
    let lines: Vec<String> = authd
        .stderr()
        .lines()
        .filter(|l| l.contains("listening on"))
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains(&format!("listening on {addr}")),
        "{lines:?}"
    );
    // UDP and TCP share the port.
    assert!(
        TcpListener::bind(addr).is_err(),
        "TCP port {addr} not bound"
    );
}

#[test]
fn missing_db_is_one_line() {
    let dir = tempdir();
    let db = dir.path().join("missing.sqlite3");
    let err = start_failure(&[
        os("--db"),
        db.as_os_str(),
        os("--listen"),
        os("127.0.0.1:0"),
    ]);
    assert_eq!(
        err,
        format!("authd: zone DB {} does not exist\n", db.display())
    );
    assert!(!db.exists(), "serving must not create a DB");
}

#[test]
fn newer_schema_db_is_one_line() {
    let dir = tempdir();
    let db = dir.path().join("newschema.sqlite3");
    authd_tests::make_db_with_schema_version(&db, 1000, 0);
    let err = start_failure(&[
        os("--db"),
        db.as_os_str(),
        os("--listen"),
        os("127.0.0.1:0"),
    ]);
    assert_eq!(
        err,
        format!(
            "authd: zone DB {} has schema version 1000.0, newer than this build supports (2.2)\n",
            db.display()
        )
    );
}

/// A text file given as the DB is not an SQLite database (SQLITE_NOTADB,
/// not "corrupt"), and an SQLite DB without the zone schema is not a zone
/// DB: one line each, saying how to make one.
#[test]
fn a_db_not_sqlite_or_without_zones_is_one_line_saying_how_to_make_one() {
    let dir = tempdir();
    let db = write_file(
        dir.path(),
        "corrupt.sqlite3",
        &"not a database ".repeat(100),
    );
    let start = |db: &Path| {
        start_failure(&[
            os("--db"),
            db.as_os_str(),
            os("--listen"),
            os("127.0.0.1:0"),
        ])
    };
    assert_eq!(
        start(&db),
        format!(
            "authd: {} is not an SQLite database (SQLITE_NOTADB), so not a zone DB; make one in a \
             new file with `loadzone --db FILE ORIGIN MASTERFILE` or `zone create --db FILE \
             ORIGIN`, or, if it was a zone DB, restore it from a backup (docs/ZONE-ADMIN.md, \
             Backups)\n",
            db.display()
        )
    );
    let other = dir.path().join("other.sqlite3");
    rusqlite::Connection::open(&other)
        .and_then(|c| c.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);"))
        .expect("an SQLite DB");
    assert_eq!(
        start(&other),
        format!(
            "authd: {} is not a zone DB: no schema_version table (an SQLite database without the \
             zone schema); make one in a new file with `loadzone --db FILE ORIGIN MASTERFILE` or \
             `zone create --db FILE ORIGIN`\n",
            other.display()
        )
    );
}

/// A `[control] socket` path holding someone's file: authd refuses to start
/// with a line that says why, and the file is left as it was.
#[test]
fn control_socket_over_a_file_is_refused_and_the_file_kept() {
    let dir = tempdir();
    let precious = write_file(dir.path(), "precious.txt", "keep me\n");
    let config = write_file(
        dir.path(),
        "authd.toml",
        &format!(
            "listen = [\"127.0.0.1:0\"]\n[control]\nsocket = \"{}\"\n",
            precious.display()
        ),
    );
    let err = start_failure(&[os("--config"), config.as_os_str()]);
    assert_eq!(
        err.lines().last(),
        Some(
            format!(
                "authd: cannot open the control socket {}: a file that is not a socket is \
                 there; authd does not replace it",
                precious.display()
            )
            .as_str()
        ),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&precious).expect("read"),
        "keep me\n"
    );
}

#[test]
fn port_in_use_is_one_line() {
    let dir = tempdir();
    let db = zone_db(dir.path());
    // Hold both the UDP and the TCP port.
    let udp = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let addr: SocketAddr = udp.local_addr().expect("addr");
    let _tcp = TcpListener::bind(addr).ok();
    let err = start_failure(&[
        os("--db"),
        db.as_os_str(),
        os("--listen"),
        os(&addr.to_string()),
    ]);
    assert_eq!(
        err,
        format!("authd: cannot bind {addr}: Address already in use\n")
    );
    // Only the TCP port taken.
    let tcp = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = tcp.local_addr().expect("addr");
    if UdpSocket::bind(addr).is_ok() {
        let err = start_failure(&[
            os("--db"),
            db.as_os_str(),
            os("--listen"),
            os(&addr.to_string()),
        ]);
        assert_eq!(
            err,
            format!("authd: cannot bind {addr}: Address already in use\n")
        );
    }
}

#[test]
fn unknown_config_key_is_one_line() {
    let dir = tempdir();
    zone_db(dir.path());
    let cfg = write_file(
        dir.path(),
        "authd.toml",
        "colour = \"blue\"\n[[datasource]]\ntype = \"sqlite3\"\nfile = \"zone.sqlite3\"\n",
    );
    let err = start_failure(&[os("--config"), cfg.as_os_str()]);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "authd: config {}: unknown field `colour`",
            cfg.display()
        )),
        "{err}"
    );
    // In a section, too.
    let cfg = write_file(dir.path(), "authd2.toml", "[tcp]\nidle = 3\n");
    let err = start_failure(&[os("--config"), cfg.as_os_str()]);
    assert!(err.contains("unknown field `idle`"), "{err}");
}

#[test]
fn unreadable_config_is_one_line() {
    let dir = tempdir();
    let cfg = dir.path().join("nope.toml");
    let err = start_failure(&[os("--config"), cfg.as_os_str()]);
    assert_eq!(
        err,
        format!(
            "authd: cannot read config {}: No such file or directory\n",
            cfg.display()
        )
    );
}

#[test]
fn bad_listen_address_is_refused() {
    let out = run_authd(["--listen", "localhost:53"]);
    assert_eq!(out.status.code(), Some(2), "clap usage error");
    assert!(
        stderr_of(&out).contains("localhost:53"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn environment_overrides_config() {
    let dir = tempdir();
    let cfg = config_file(dir.path(), "[tcp]\nidle_timeout = 30\n");
    let mut cmd = Command::new(binary("authd"));
    // No data source configured: the bundled example DB is made in the working
    // folder, which must be the test's own.
    cmd.current_dir(dir.path())
        .arg("--config")
        .arg(&cfg)
        .env("AUTHD_LISTEN", "127.0.0.1:0")
        .env("AUTHD_TCP__IDLE_TIMEOUT", "1");
    let authd = AuthdProcess::start_command(cmd, 1);
    let mut stream = tcp_connect(authd.addr());
    assert!(
        tcp_closed_within(&mut stream, Duration::from_secs(3)),
        "AUTHD_TCP__IDLE_TIMEOUT=1 not applied"
    );
    // An unknown AUTHD_ variable is an error naming it.
    let out = authd_tests::run_with_timeout(
        Command::new(binary("authd"))
            .current_dir(dir.path())
            .arg("--config")
            .arg(&cfg)
            .env("AUTHD_TCP__IDEL_TIMEOUT", "1"),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr_of(&out),
        "authd: unknown setting AUTHD_TCP__IDEL_TIMEOUT (from the environment): tcp has no key \
         idel_timeout\n"
    );
    // Unknown keys in the file and the environment are all named at once.
    let bad = write_file(dir.path(), "bad.toml", "[server]\nlistne = 1\n");
    let out = authd_tests::run_with_timeout(
        Command::new(binary("authd"))
            .current_dir(dir.path())
            .arg("--config")
            .arg(&bad)
            .env("AUTHD_TCP__IDLE_TIMEOUT", "1")
            .env("AUTHD_TCP__IDLE_TIMOUT", "1")
            .env("AUTHD_RRL__SLIPP", "1"),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr_of(&out),
        format!(
            "authd: unknown keys: server.listne (file {}), rrl.slipp (AUTHD_RRL__SLIPP), \
             tcp.idle_timout (AUTHD_TCP__IDLE_TIMOUT)\n",
            bad.display()
        )
    );
}

/// `--log-format json` writes every log line as one JSON object.
#[test]
fn json_log_lines() {
    let dir = tempdir();
    let db = zone_db(dir.path());
    let authd = AuthdProcess::start([os("--log-format"), os("json"), os("--db"), db.as_os_str()]);
    let log = authd.stderr();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let messages: Vec<&str> = lines
        .iter()
        .filter_map(|v| v["fields"]["message"].as_str())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| *m == format!("listening on {} (UDP and TCP)", authd.addr())),
        "{log}"
    );
    assert!(
        messages.iter().any(|m| m
            .starts_with("serving 1 zone from cache 65536 slots over sqlite3:")
            && m.ends_with(": example.org.")),
        "{log}"
    );
    assert!(lines.iter().all(|v| v["level"].is_string()), "{log}");
    drop(authd);
    // A format not known is a usage error.
    let out = run_authd(["--log-format", "xml"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
}

/// A log filter that would log nothing (`--log-level verbose`,
/// `RUST_LOG=debgu`) stops authd with exit status 1 and says why, as
/// docs/CONFIG.md says, instead of running without a log (issue 27).
#[test]
fn bad_log_filter_exits_1_with_a_message() {
    let out = run_authd(["--log-level", "verbose", "--listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(
        stderr_of(&out),
        "authd: invalid --log-level \"verbose\": \"verbose\" is neither a level (off, error, \
         warn, info, debug, trace) nor TARGET=LEVEL\n"
    );
    let out = authd_tests::run_with_timeout(
        Command::new(binary("authd"))
            .args(["--listen", "127.0.0.1:0"])
            .env("RUST_LOG", "debgu"),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(
        stderr_of(&out),
        "authd: invalid RUST_LOG \"debgu\": \"debgu\" is neither a level (off, error, warn, \
         info, debug, trace) nor TARGET=LEVEL\n"
    );
}

// ---------------------------------------------------------------- defaults

#[test]
fn example_config_serves_with_relative_db_path() {
    let dir = tempdir();
    zone_db(dir.path());
    let text = std::fs::read_to_string(authd_tests::workspace_dir().join("examples/authd.toml"))
        .expect("examples/authd.toml");
    let cfg = write_file(dir.path(), "authd.toml", &text);
    // Its memory source's master file, also relative to the config file.
    std::fs::copy(
        authd_tests::workspace_dir().join("examples/example.com.zone"),
        dir.path().join("example.com.zone"),
    )
    .expect("copy examples/example.com.zone");
    // Started from another folder: the DB path is relative to the config file.
    let mut cmd = Command::new(binary("authd"));
    cmd.arg("--config")
        .arg(&cfg)
        .args(["--listen", "127.0.0.1:0"])
        .current_dir(std::env::temp_dir());
    let authd = AuthdProcess::start_command(cmd, 1);
    let q = QueryBuilder::new("www.example.org", "A").id(31);
    assert_www_answer(&parse_reply(&query_udp(authd.addr(), &q.wire())), 31);
}

#[test]
fn no_arguments_serve_the_bundled_example_zone() {
    let dir = tempdir();
    let start = || {
        let mut cmd = Command::new(binary("authd"));
        cmd.args(["--listen", "127.0.0.1:0"])
            .current_dir(dir.path());
        AuthdProcess::start_command(cmd, 1)
    };
    let mut authd = start();
    let db = dir.path().join("authd-example.sqlite3");
    assert!(db.is_file(), "authd-example.sqlite3 not created");
    let port = authd.addr().port();
    let hint = format!("try: dig @127.0.0.1 -p {port} www.example.com A");
    assert!(
        authd.wait_for_log(&hint, Duration::from_secs(5)),
        "{}",
        authd.stderr()
    );
    let log = authd.stderr();
    assert!(log.contains("created authd-example.sqlite3"), "{log}");
    let q = QueryBuilder::new("www.example.com", "A").id(11);
    let reply = parse_reply(&query_udp(authd.addr(), &q.wire()));
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert_eq!(a_addrs(&reply), vec!["192.0.2.10", "192.0.2.11"]);
    let q = QueryBuilder::new("www.lab.example.com", "A").id(12);
    let reply = parse_reply(&query_udp(authd.addr(), &q.wire()));
    assert!(
        reply
            .authorities
            .iter()
            .any(|r| r.record_type() == RecordType::NS),
        "referral expected: {reply:?}"
    );
    assert_eq!(authd.terminate().code(), Some(0));
    // A second start reuses the DB.
    let authd = start();
    assert!(!authd.stderr().contains("created"), "{}", authd.stderr());
}

#[test]
fn zone_loaded_by_loadzone_is_served() {
    let dir = tempdir();
    let db = dir.path().join("lz.sqlite3");
    authd_tests::load_zone_text(&db, "example.org.", ZONE);
    let authd = AuthdProcess::start([os("--db"), db.as_os_str()]);
    let q = QueryBuilder::new("www.example.org", "A").id(21);
    assert_www_answer(&parse_reply(&query_udp(authd.addr(), &q.wire())), 21);
}

/// The README's `try: dig …` line works with the real dig (skipped without dig).
#[test]
fn dig_gets_answers_over_udp_and_tcp() {
    assert!(
        Command::new("dig").arg("-v").output().is_ok(),
        "dig is required for this test: apt-get install dnsutils"
    );
    let dir = tempdir();
    let db = zone_db(dir.path());
    let authd = AuthdProcess::start([os("--db"), db.as_os_str()]);
    let addr = authd.addr();
    for transport in ["+notcp", "+tcp"] {
        let out = authd_tests::run_with_timeout(
            Command::new("dig")
                .args(["+short", "+tries=2", "+time=2", transport])
                .arg(format!("@{}", addr.ip()))
                .args(["-p", &addr.port().to_string(), "www.example.org", "A"]),
            Duration::from_secs(20),
        );
        let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        lines.sort();
        assert_eq!(lines, vec!["192.0.2.10", "192.0.2.11"], "dig {transport}");
    }
}

/// A bad command-line argument: one line naming it, exit status 2.
#[test]
fn bad_argument_is_one_line_exit_2() {
    let out = authd_tests::run_authd(["--listen", "localhost:5300"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("authd: invalid value 'localhost:5300' for '--listen <ADDR:PORT>'"),
        "{err}"
    );
    // A negative number is a bad value, not an unknown option.
    for (args, start) in [
        (
            ["--udp-workers", "-3"],
            "authd: invalid value '-3' for '--udp-workers <N>': \"-3\" is not a worker count",
        ),
        (
            ["--cache-slots", "-1"],
            "authd: invalid value '-1' for '--cache-slots <N|unlimited>'",
        ),
    ] {
        let out = authd_tests::run_authd(args);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with(start), "{err}");
    }
}

/// A UDP port held by another process's SO_REUSEPORT socket is "in use": a
/// reuse-port bind would otherwise succeed and the two would split the queries.
#[test]
fn udp_port_shared_by_reuseport_socket_is_in_use() {
    use socket2::{Domain, Protocol, Socket, Type};
    let other = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).expect("socket");
    other.set_reuse_port(true).expect("SO_REUSEPORT");
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().expect("addr");
    other.bind(&any.into()).expect("bind");
    let port = other
        .local_addr()
        .expect("addr")
        .as_socket()
        .expect("inet")
        .port();
    // Without a data source authd makes its example DB in the working folder.
    let dir = tempdir();
    let out = authd_tests::run_with_timeout(
        Command::new(binary("authd"))
            .current_dir(dir.path())
            .args(["--listen".to_string(), format!("127.0.0.1:{port}")]),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "authd: cannot bind 127.0.0.1:{port}: Address already in use"
        )),
        "{err}"
    );
}
