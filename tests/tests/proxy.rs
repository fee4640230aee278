//! End to end: PROXY protocol v2 (`[server] proxy_allow`).
//!
//! - real proxies: dnsdist 1.7 (`useProxyProtocol=true`, UDP and TCP) and
//!   haproxy 2.6 (`mode tcp`, `send-proxy-v2`) in front of authd; an ACL
//!   that names only the client behind the proxy (`[update] allow`,
//!   `[transfer] allow`) admits its requests and refuses another client's,
//!   so the address in the header is the one authd uses;
//! - hand-made headers: the LOCAL command, the TCP per-client limit counted
//!   for the client a header names, and the attacker's cases, each with its
//!   counter in `authd_proxy_rejected_total`: a header from a source not
//!   allowed, none from an allowed one, a bad signature, another version, a
//!   length past the datagram, a truncated one, and a TCP connection held
//!   without its header until the first-query deadline.
//!
//! Every address is on loopback: the proxies (and the hand-made proxy) send
//! from 127.0.0.1, the only source in `proxy_allow`; clients and attackers
//! send from 127.0.0.2 to 127.0.0.4. Needs `dnsdist` and `haproxy` (Debian
//! packages of those names).

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use authd_tests::hickory_proto::op::ResponseCode;
use authd_tests::{
    AuthdProcess, QueryBuilder, free_port, http_get, load_zone_text, metric_value, parse_reply,
    require_tool, tcp_closed_within, tcp_recv, tcp_send, tempdir, write_file,
};

const ZONE: &str = "$TTL 300
@    IN SOA ns1 hostmaster 7 3600 900 604800 300
     IN NS  ns1
ns1  IN A   192.0.2.53
www  IN A   192.0.2.80
";

/// The only client the ACLs admit.
const CLIENT: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
/// Another client, refused by the ACLs.
const OTHER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 4);
/// A source not in `proxy_allow` that sends headers anyway.
const ATTACKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
/// The proxies' source, the only one in `proxy_allow`.
const PROXY: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// The PROXY v2 signature.
const SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// authd serving example.com. from sqlite3, proxies allowed from
/// 127.0.0.1, updates and transfers from [`CLIENT`] only, a 2 s first-query
/// deadline, metrics on; `extra` is appended to the configuration.
fn start(dir: &Path, extra: &str) -> (AuthdProcess, SocketAddr) {
    let db = dir.join("zone.sqlite3");
    load_zone_text(&db, "example.com.", ZONE);
    let config = write_file(
        dir,
        "authd.toml",
        &format!(
            "[server]\nproxy_allow = [\"127.0.0.1/32\"]\n\
             [metrics]\nlisten = \"127.0.0.1:0\"\n\
             [transfer]\nallow = [\"{CLIENT}\"]\n\
             [update]\nallow = [\"{CLIENT}\"]\n\
             {extra}\n\
             [[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n",
            db.display()
        ),
    );
    let authd = AuthdProcess::start([
        "--config".as_ref(),
        config.as_os_str(),
        "--udp-workers".as_ref(),
        "1".as_ref(),
    ]);
    let metrics = authd.metrics_addr();
    (authd, metrics)
}

/// `authd_proxy_rejected_total{reason=REASON}` once it has reached `want`
/// (polled up to 5 s: a refused datagram has no reply to wait for), and
/// still after 200 ms more.
fn rejected(metrics: SocketAddr, reason: &str, want: u64) -> u64 {
    let series = format!("authd_proxy_rejected_total{{reason=\"{reason}\"}}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let got = metric_value(&http_get(metrics, "/metrics").1, &series);
        if got >= want || Instant::now() >= deadline {
            std::thread::sleep(Duration::from_millis(200));
            return metric_value(&http_get(metrics, "/metrics").1, &series);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A PROXY v2 header: version/command byte `ver_cmd` (0x21 PROXY, 0x20
/// LOCAL), family/transport byte `fam` (0x11 IPv4 STREAM, 0x12 IPv4
/// DGRAM), the client `src` and the address it reached `dst`.
fn header(ver_cmd: u8, fam: u8, src: SocketAddrV4, dst: SocketAddrV4) -> Vec<u8> {
    let mut h = SIGNATURE.to_vec();
    h.extend_from_slice(&[ver_cmd, fam, 0, 12]);
    h.extend_from_slice(&src.ip().octets());
    h.extend_from_slice(&dst.ip().octets());
    h.extend_from_slice(&src.port().to_be_bytes());
    h.extend_from_slice(&dst.port().to_be_bytes());
    h
}

/// A UDP header for client `src` (port 5353) to `authd`.
fn udp_header(src: Ipv4Addr, authd: SocketAddr) -> Vec<u8> {
    header(0x21, 0x12, SocketAddrV4::new(src, 5353), v4(authd))
}

fn v4(addr: SocketAddr) -> SocketAddrV4 {
    match addr {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(_) => panic!("{addr} is not IPv4"),
    }
}

/// An UPDATE of example.com. with nothing in it (id `id`): NOERROR from a
/// client `[update] allow` admits, REFUSED from any other.
fn empty_update(id: u16) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(&[0x28, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    m.extend_from_slice(b"\x07example\x03com\x00\x00\x06\x00\x01");
    m
}

fn soa_query(id: u16) -> Vec<u8> {
    QueryBuilder::new("example.com.", "SOA").id(id).wire()
}

/// A UDP socket on `ip`, waiting `wait` for a reply.
fn udp_from(ip: Ipv4Addr, wait: Duration) -> UdpSocket {
    let s = UdpSocket::bind((ip, 0)).expect("bind");
    s.set_read_timeout(Some(wait)).expect("timeout");
    s
}

/// Sends `datagram` from `sock` to `to`; the reply's rcode, or `None` when
/// none comes within the socket's timeout.
fn exchange(sock: &UdpSocket, to: SocketAddr, datagram: &[u8]) -> Option<ResponseCode> {
    sock.send_to(datagram, to).expect("send");
    let mut buf = [0u8; 4096];
    let (n, _) = sock.recv_from(&mut buf).ok()?;
    Some(parse_reply(&buf[..n]).metadata.response_code)
}

/// A TCP connection from `ip` to `to`, 5 s timeouts.
fn tcp_from(ip: Ipv4Addr, to: SocketAddr) -> TcpStream {
    let sock =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    sock.bind(&SocketAddr::from((ip, 0)).into()).expect("bind");
    sock.connect_timeout(&to.into(), Duration::from_secs(5))
        .expect("connect");
    let s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let _ = s.set_nodelay(true);
    s
}

/// The rcode of the reply to `wire` on `stream`.
fn tcp_rcode(stream: &mut TcpStream, wire: &[u8]) -> ResponseCode {
    tcp_send(stream, wire);
    parse_reply(&tcp_recv(stream).expect("TCP reply"))
        .metadata
        .response_code
}

/// A proxy process (dnsdist, haproxy), killed by PID when dropped.
struct Proxy(Child);

impl Proxy {
    /// Starts `program ARGS CONF` and waits (up to 20 s) until `ready`.
    ///
    /// Panics if it exits or is not ready in time.
    fn start(program: &str, args: &[&str], conf: &Path, ready: impl Fn() -> bool) -> Proxy {
        let child = Command::new(program)
            .args(args)
            .arg(conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {program}: {e}"));
        let mut proxy = Proxy(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ready() {
            if let Ok(Some(status)) = proxy.0.try_wait() {
                panic!("{program} exited: {status}");
            }
            assert!(Instant::now() < deadline, "{program} not ready in time");
            std::thread::sleep(Duration::from_millis(50));
        }
        proxy
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Through the proxy on `listen`, over TCP: a query from [`CLIENT`] is
/// answered and its AXFR served (on the same connection); [`OTHER`]'s AXFR
/// is REFUSED.
fn only_the_client_transfers(listen: SocketAddr) {
    let axfr = QueryBuilder::new("example.com.", "AXFR").id(4).wire();
    let mut tcp = tcp_from(CLIENT, listen);
    assert_eq!(tcp_rcode(&mut tcp, &soa_query(5)), ResponseCode::NoError);
    assert_eq!(tcp_rcode(&mut tcp, &axfr), ResponseCode::NoError);
    let mut tcp = tcp_from(OTHER, listen);
    assert_eq!(tcp_rcode(&mut tcp, &axfr), ResponseCode::Refused);
}

/// Every `authd_proxy_rejected_total` series is 0.
fn nothing_rejected(metrics: SocketAddr) {
    let (_, text) = http_get(metrics, "/metrics");
    for reason in ["not_allowed", "missing", "malformed", "timeout"] {
        let series = format!("authd_proxy_rejected_total{{reason=\"{reason}\"}}");
        assert_eq!(metric_value(&text, &series), 0, "{reason}: {text}");
    }
}

/// dnsdist in front of authd: an UPDATE (UDP) and an AXFR (TCP) that only
/// [`CLIENT`] may make succeed from it through dnsdist and are REFUSED
/// from [`OTHER`]. Nothing is refused at the PROXY layer (dnsdist's health
/// checks included).
#[test]
fn dnsdist_forwards_the_client_address_over_udp_and_tcp() {
    require_tool("dnsdist", "--version", "dnsdist");
    let dir = tempdir();
    let (authd, metrics) = start(dir.path(), "");
    let listen = SocketAddr::from((PROXY, free_port()));
    let conf = write_file(
        dir.path(),
        "dnsdist.conf",
        &format!(
            "setLocal(\"{listen}\")\n\
             setSecurityPollSuffix(\"\")\n\
             newServer{{address=\"{}\", useProxyProtocol=true, checkName=\"example.com.\", checkType=\"SOA\", checkInterval=1}}\n",
            authd.addr()
        ),
    );
    let probe = udp_from(CLIENT, Duration::from_millis(300));
    let args = ["--supervised", "--disable-syslog", "-C"];
    let dnsdist = Proxy::start("dnsdist", &args, &conf, || {
        exchange(&probe, listen, &soa_query(1)) == Some(ResponseCode::NoError)
    });
    let wait = Duration::from_secs(3);
    let client = udp_from(CLIENT, wait);
    let other = udp_from(OTHER, wait);
    assert_eq!(
        exchange(&client, listen, &empty_update(2)),
        Some(ResponseCode::NoError)
    );
    assert_eq!(
        exchange(&other, listen, &empty_update(3)),
        Some(ResponseCode::Refused)
    );
    only_the_client_transfers(listen);
    nothing_rejected(metrics);
    drop(dnsdist);
    drop(authd);
}

/// haproxy (`mode tcp`, `send-proxy-v2`) in front of authd: an AXFR only
/// [`CLIENT`] may make is served to it through haproxy and REFUSED to
/// [`OTHER`].
#[test]
fn haproxy_send_proxy_v2_forwards_the_client_address() {
    require_tool("haproxy", "-v", "haproxy");
    let dir = tempdir();
    let (authd, metrics) = start(dir.path(), "");
    let listen = SocketAddr::from((PROXY, free_port()));
    let conf = write_file(
        dir.path(),
        "haproxy.cfg",
        &format!(
            "defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 10s\n  timeout server 10s\n\
             frontend dns\n  bind {listen}\n  default_backend authd\n\
             backend authd\n  server authd {} send-proxy-v2\n",
            authd.addr()
        ),
    );
    let haproxy = Proxy::start("haproxy", &["-db", "-f"], &conf, || {
        TcpStream::connect(listen).is_ok()
    });
    only_the_client_transfers(listen);
    nothing_rejected(metrics);
    drop(haproxy);
    drop(authd);
}

/// Hand-made headers from the proxy: the client they name is the one the
/// update ACL sees; a LOCAL header (a health check) leaves the proxy as the
/// client; a source outside `proxy_allow` is served plain DNS.
#[test]
fn hand_made_headers_name_the_client() {
    let dir = tempdir();
    let (authd, metrics) = start(dir.path(), "");
    let addr = authd.addr();
    let proxy = udp_from(PROXY, Duration::from_secs(3));
    let with = |h: Vec<u8>, msg: Vec<u8>| [h, msg].concat();
    assert_eq!(
        exchange(
            &proxy,
            addr,
            &with(udp_header(CLIENT, addr), empty_update(1))
        ),
        Some(ResponseCode::NoError)
    );
    assert_eq!(
        exchange(
            &proxy,
            addr,
            &with(udp_header(OTHER, addr), empty_update(2))
        ),
        Some(ResponseCode::Refused)
    );
    let local = header(0x20, 0x00, SocketAddrV4::new(OTHER, 1), v4(addr));
    assert_eq!(
        exchange(&proxy, addr, &with(local, soa_query(3))),
        Some(ResponseCode::NoError)
    );
    let plain = udp_from(CLIENT, Duration::from_secs(3));
    assert_eq!(
        exchange(&plain, addr, &empty_update(4)),
        Some(ResponseCode::NoError)
    );
    // TCP: the header once, then any number of queries.
    let mut tcp = tcp_from(PROXY, addr);
    let h = header(0x21, 0x11, SocketAddrV4::new(CLIENT, 5353), v4(addr));
    tcp.write_all(&h).expect("header");
    assert_eq!(tcp_rcode(&mut tcp, &soa_query(5)), ResponseCode::NoError);
    let axfr = QueryBuilder::new("example.com.", "AXFR").id(6).wire();
    assert_eq!(tcp_rcode(&mut tcp, &axfr), ResponseCode::NoError);
    assert_eq!(rejected(metrics, "malformed", 0), 0);
    drop(authd);
}

/// The TCP per-client limit counts the client a header names: with one
/// connection per /24, two clients of other /24s behind the same proxy
/// each get one, and a second of the first client's /24 is closed.
#[test]
fn tcp_per_client_limit_counts_the_proxied_client() {
    let dir = tempdir();
    let (authd, metrics) = start(dir.path(), "[tcp]\nmax_connections_per_client = 1");
    let addr = authd.addr();
    let open = |client: [u8; 4]| {
        let mut tcp = tcp_from(PROXY, addr);
        let src = SocketAddrV4::new(Ipv4Addr::from(client), 4000);
        tcp.write_all(&header(0x21, 0x11, src, v4(addr)))
            .expect("header");
        tcp
    };
    let mut a = open([192, 0, 2, 1]);
    assert_eq!(tcp_rcode(&mut a, &soa_query(1)), ResponseCode::NoError);
    let mut b = open([198, 51, 100, 1]);
    assert_eq!(tcp_rcode(&mut b, &soa_query(2)), ResponseCode::NoError);
    let mut c = open([192, 0, 2, 2]);
    assert!(tcp_closed_within(&mut c, Duration::from_secs(2)));
    let (_, text) = http_get(metrics, "/metrics");
    assert_eq!(
        metric_value(
            &text,
            r#"authd_tcp_connections_closed_total{reason="per_client"}"#
        ),
        1,
        "{text}"
    );
    assert_eq!(tcp_rcode(&mut a, &soa_query(3)), ResponseCode::NoError);
    drop(authd);
}

/// A header from a source not in `proxy_allow` (claiming the client the
/// ACL admits): the datagram is dropped and the TCP connection closed, each
/// counted `not_allowed`; the same source's plain DNS is answered.
#[test]
fn spoofed_header_from_a_source_not_allowed_is_refused() {
    let dir = tempdir();
    let (authd, metrics) = start(dir.path(), "");
    let addr = authd.addr();
    let attacker = udp_from(ATTACKER, Duration::from_millis(500));
    let spoofed = [udp_header(CLIENT, addr), empty_update(1)].concat();
    assert_eq!(exchange(&attacker, addr, &spoofed), None);
    assert_eq!(rejected(metrics, "not_allowed", 1), 1);
    assert_eq!(
        exchange(&attacker, addr, &empty_update(2)),
        Some(ResponseCode::Refused)
    );
    let mut tcp = tcp_from(ATTACKER, addr);
    let h = header(0x21, 0x11, SocketAddrV4::new(CLIENT, 5353), v4(addr));
    tcp.write_all(&h).expect("header");
    tcp_send(&mut tcp, &empty_update(3));
    assert!(tcp_closed_within(&mut tcp, Duration::from_secs(1)));
    assert_eq!(rejected(metrics, "not_allowed", 2), 2);
    assert!(authd.wait_for_log("from 127.0.0.2:", Duration::from_secs(1)));
    assert!(
        authd
            .stderr()
            .contains("a PROXY header from a source not in [server] proxy_allow"),
        "{}",
        authd.stderr()
    );
    drop(authd);
}

/// From the proxy: plain DNS (no header), a bad signature, version 1, a
/// length past the end of the datagram and a datagram shorter than the
/// fixed part are each dropped; over TCP a malformed header (the wrong
/// transport) or none (a plain query) closes the connection at once.
/// Counted: `missing` 3, `malformed` 4.
#[test]
fn missing_and_malformed_headers_are_dropped() {
    let dir = tempdir();
    let (authd, metrics) = start(dir.path(), "");
    let addr = authd.addr();
    let proxy = udp_from(PROXY, Duration::from_millis(300));
    let good = udp_header(CLIENT, addr);
    assert_eq!(exchange(&proxy, addr, &soa_query(1)), None);
    let mut bad_signature = good.clone();
    bad_signature[7] = b'q';
    let mut v1 = good.clone();
    v1[12] = 0x11;
    let mut too_long = good.clone();
    too_long[15] = 200;
    for bad in [bad_signature, v1, too_long] {
        assert_eq!(exchange(&proxy, addr, &[bad, soa_query(2)].concat()), None);
    }
    assert_eq!(exchange(&proxy, addr, &good[..14]), None, "truncated");
    // Over TCP, a DGRAM header, and plain DNS.
    let mut dgram = tcp_from(PROXY, addr);
    dgram
        .write_all(&header(0x21, 0x12, SocketAddrV4::new(CLIENT, 1), v4(addr)))
        .expect("header");
    let mut plain = tcp_from(PROXY, addr);
    tcp_send(&mut plain, &soa_query(3));
    let started = Instant::now();
    assert!(tcp_closed_within(&mut dgram, Duration::from_secs(1)));
    assert!(tcp_closed_within(&mut plain, Duration::from_secs(1)));
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(rejected(metrics, "missing", 3), 3);
    assert_eq!(rejected(metrics, "malformed", 4), 4);
    // The proxy still gets answers with a good header.
    assert_eq!(
        exchange(&proxy, addr, &[good, soa_query(3)].concat()),
        Some(ResponseCode::NoError)
    );
    drop(authd);
}

/// A TCP connection from the proxy that sends no header, or half of one, is
/// closed at the first-query deadline (2 s here) and counted `timeout`.
#[test]
fn held_connection_without_a_header_is_closed_at_the_deadline() {
    let dir = tempdir();
    let (authd, metrics) = start(dir.path(), "[tcp]\nfirst_query_timeout = 2");
    let addr = authd.addr();
    let started = Instant::now();
    let mut silent = tcp_from(PROXY, addr);
    let mut half = tcp_from(PROXY, addr);
    half.write_all(&SIGNATURE[..8]).expect("half a header");
    assert!(tcp_closed_within(&mut silent, Duration::from_secs(4)));
    assert!(tcp_closed_within(&mut half, Duration::from_secs(4)));
    let held = started.elapsed();
    assert!(
        held >= Duration::from_millis(1900) && held < Duration::from_secs(4),
        "{held:?}"
    );
    assert_eq!(rejected(metrics, "timeout", 2), 2);
    drop(authd);
}
