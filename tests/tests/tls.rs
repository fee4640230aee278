//! End to end: DNS over TLS (RFC 7858) and zone transfers over TLS (XoT,
//! RFC 9103), `[tls]` in auth/src/tls.rs, served by auth/src/server/tcp.rs
//! and used by the secondary role (auth/src/xfrin.rs). Certificates are made
//! fresh in each test ([`make_pki`]); every socket is on 127.0.0.1.
//!
//! - `kdig +tls` queries with the certificate verified, an AXFR over TLS
//!   where the ACL requires TLS, the same AXFR over plain TCP refused;
//!   queries over TLS counted under `transport="tls"`;
//! - sessions resume (TLS 1.3 tickets), ALPN `dot` is chosen, a client
//!   offering only another ALPN protocol is refused;
//! - attackers: a connection that never starts its handshake, one that
//!   sends plain DNS to the TLS port, more held connections than a client
//!   may have — each closed as the `[tcp]` limits say, and DoT still served;
//! - authd as secondary of authd over TLS: opportunistic, strict with the
//!   right authority, strict with the wrong one (no transfer), plain TCP to a
//!   primary that requires TLS (refused); a change arrives by NOTIFY and
//!   IXFR over TLS;
//! - configuration errors name the key and the file.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use authd::config::{Config, ConfigError};
use authd_tests::hickory_proto::op::ResponseCode;
use authd_tests::hickory_proto::rr::RData;
use authd_tests::{
    AuthdProcess, QueryBuilder, TestPki, binary, eventually, free_port, http_get, load_zone_text,
    make_pki, parse_reply, require_tool, tempdir, try_query_udp, write_file,
};

const ZONE: &str = "$TTL 300\n@ SOA ns1 hostmaster 1 3600 1 86400 60\n@ NS ns1\n\
                    ns1 A 192.0.2.53\nwww A 192.0.2.1\nmail MX 10 ns1\n";

/// The name the server certificate is made for.
const SERVER_NAME: &str = "ns1.example.net";

/// `[tls]` serving `pki`'s certificate on `tls_listen`.
fn tls_section(pki: &TestPki, tls_listen: &str) -> String {
    format!(
        "[tls]\ncertificate = \"{}\"\nkey = \"{}\"\nlisten = [\"{tls_listen}\"]\n",
        pki.cert.display(),
        pki.key.display()
    )
}

/// Starts authd with config `text` on 127.0.0.1:`port` (0: any), waiting
/// for its `listening on` lines: 1, and 1 more with a TLS listener.
fn start(dir: &Path, name: &str, text: &str, port: u16, with_tls: bool) -> AuthdProcess {
    let config = write_file(dir, name, text);
    let mut cmd = Command::new(binary("authd"));
    cmd.arg("--config")
        .arg(&config)
        .args(["--listen", &format!("127.0.0.1:{port}")]);
    AuthdProcess::start_command(cmd, 1 + usize::from(with_tls))
}

/// A primary serving example.com. from `db`, TLS on `tls_port` (0: any),
/// transfers allowed from 127.0.0.1 over TLS only, NOTIFY to `notify`.
fn tls_primary(dir: &Path, pki: &TestPki, tls_port: u16, notify: Option<u16>) -> AuthdProcess {
    let db = dir.join("primary.sqlite3");
    load_zone_text(&db, "example.com.", ZONE);
    let mut text = format!(
        "[[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n\
         [transfer]\nallow = [\"127.0.0.1 tls\"]\n[metrics]\nlisten = \"127.0.0.1:0\"\n{}",
        db.display(),
        tls_section(pki, &format!("127.0.0.1:{tls_port}"))
    );
    if let Some(n) = notify {
        text.push_str(&format!("[notify]\ntargets = [\"127.0.0.1:{n}\"]\n"));
    }
    start(dir, "primary.toml", &text, 0, true)
}

/// kdig's output for `args` (after `@127.0.0.1 -p PORT`).
fn kdig(port: u16, args: &[&str]) -> String {
    let out = Command::new("kdig")
        .args([
            "@127.0.0.1",
            "-p",
            &port.to_string(),
            "+timeout=5",
            "+retry=0",
        ])
        .args(args)
        .output()
        .expect("kdig");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Lines of `text` that hold a record of type `rtype` (kdig's and dig's
/// tab-separated output).
fn records(text: &str, rtype: &str) -> usize {
    text.lines()
        .filter(|l| !l.starts_with(';') && l.split_whitespace().nth(3) == Some(rtype))
        .count()
}

/// A rustls client trusting `ca`, offering ALPN `alpn` (TLS 1.3).
fn client_config(ca: &Path, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).expect("ca file") {
        roots.add(cert.expect("ca cert")).expect("root");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS 1.3")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A TLS session with `addr` (handshake done), as `config` says.
///
/// Errors: the handshake's.
fn tls_connect(addr: SocketAddr, config: &Arc<rustls::ClientConfig>) -> std::io::Result<Tls> {
    let name = rustls::pki_types::ServerName::try_from(SERVER_NAME).expect("name");
    let conn = rustls::ClientConnection::new(Arc::clone(config), name).expect("client");
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock)?;
    }
    Ok(tls)
}

/// Sends `wire` framed (RFC 7858 §3.3: as over TCP) and reads one reply.
fn tls_query(tls: &mut Tls, wire: &[u8]) -> Vec<u8> {
    let mut framed = u16::try_from(wire.len())
        .expect("len")
        .to_be_bytes()
        .to_vec();
    framed.extend_from_slice(wire);
    tls.write_all(&framed).expect("send");
    tls.flush().expect("flush");
    let mut len = [0u8; 2];
    tls.read_exact(&mut len).expect("reply length");
    let mut reply = vec![0u8; usize::from(u16::from_be_bytes(len))];
    tls.read_exact(&mut reply).expect("reply");
    reply
}

/// www.example.com.'s A over a TLS session `tls`.
fn www_over(tls: &mut Tls) -> Vec<String> {
    let reply = parse_reply(&tls_query(
        tls,
        &QueryBuilder::new("www.example.com.", "A").wire(),
    ));
    assert_eq!(reply.response_code, ResponseCode::NoError, "{reply:?}");
    reply
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(a.to_string()),
            _ => None,
        })
        .collect()
}

/// True when `stream` is closed by the peer within `timeout` (whatever it
/// sends first, a TLS alert say, is read and dropped).
fn closed_within(stream: &mut TcpStream, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 512];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        stream.set_read_timeout(Some(left)).expect("timeout");
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => {
                return matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::ConnectionAborted
                        | std::io::ErrorKind::BrokenPipe
                );
            }
        }
    }
}

/// www.example.com.'s address as `addr` serves it over UDP.
fn www_udp(addr: SocketAddr) -> Option<String> {
    let wire = QueryBuilder::new("www.example.com.", "A").wire();
    let reply = parse_reply(&try_query_udp(addr, &wire, 2)?);
    reply.answers.iter().find_map(|r| match &r.data {
        RData::A(a) => Some(a.to_string()),
        _ => None,
    })
}

/// kdig over TLS with the certificate verified for its name against the
/// test authority; an AXFR over TLS; the same AXFR over plain TCP refused
/// (the ACL entry ends in `tls`), and said so in the log; the queries over
/// TLS counted as `transport="tls"`.
#[test]
fn kdig_queries_and_transfers_over_tls() {
    require_tool("kdig", "--version", "knot-dnsutils");
    let dir = tempdir();
    let pki = make_pki(dir.path(), &[SERVER_NAME, "127.0.0.1"]);
    let p = tls_primary(dir.path(), &pki, 0, None);
    let (port, tls_port) = (p.addrs()[0].port(), p.addrs()[1].port());
    let ca = format!("+tls-ca={}", pki.ca.display());
    let host = format!("+tls-hostname={SERVER_NAME}");

    let a = kdig(tls_port, &[&ca, &host, "www.example.com.", "A"]);
    assert!(a.contains("status: NOERROR"), "{a}");
    assert!(a.contains("192.0.2.1"), "{a}");
    assert_eq!(records(&a, "A"), 1, "{a}");
    // kdig says it verified the certificate and negotiated TLS 1.3.
    assert!(a.contains("TLS1.3"), "{a}");

    // With another authority, kdig refuses our certificate: it is the
    // test CA's, not self-signed or anybody's.
    let other = format!("+tls-ca={}", pki.other_ca.display());
    let bad = kdig(tls_port, &[&other, &host, "www.example.com.", "A"]);
    assert!(!bad.contains("status: NOERROR"), "{bad}");

    let axfr = kdig(tls_port, &[&ca, &host, "example.com.", "AXFR"]);
    assert_eq!(records(&axfr, "SOA"), 2, "{axfr}");
    assert_eq!(records(&axfr, "A"), 2, "{axfr}");
    assert_eq!(records(&axfr, "MX"), 1, "{axfr}");

    // Over plain TCP the ACL entry "127.0.0.1 tls" does not match.
    let plain = kdig(port, &["+tcp", "example.com.", "AXFR"]);
    assert!(plain.contains("REFUSED"), "{plain}");
    assert_eq!(records(&plain, "SOA"), 0, "{plain}");
    assert!(
        p.wait_for_log("over TLS only", Duration::from_secs(5)),
        "{}",
        p.stderr()
    );
    // A query over plain TCP is still answered.
    let tcp = kdig(port, &["+tcp", "www.example.com.", "A"]);
    assert!(
        tcp.contains("status: NOERROR") && tcp.contains("192.0.2.1"),
        "{tcp}"
    );

    let (_, metrics) = http_get(p.metrics_addr(), "/metrics");
    let tls_a =
        r#"authd_queries_total{transport="tls",opcode="QUERY",qtype="A",rcode="NOERROR"} 1"#;
    let tls_axfr =
        r#"authd_queries_total{transport="tls",opcode="QUERY",qtype="AXFR",rcode="NOERROR"} 1"#;
    let tcp_axfr =
        r#"authd_queries_total{transport="tcp",opcode="QUERY",qtype="AXFR",rcode="REFUSED"} 1"#;
    for series in [tls_a, tls_axfr, tcp_axfr] {
        assert!(
            metrics.lines().any(|l| l == series),
            "{series} not in:\n{metrics}"
        );
    }
}

/// Several queries on one session, answered in order; ALPN `dot` chosen;
/// the second session resumes the first (a TLS 1.3 ticket); a client that
/// offers ALPN without `dot` is refused (RFC 9103 §7.1), one that offers
/// none is served.
#[test]
fn sessions_resume_and_alpn_is_dot() {
    let dir = tempdir();
    let pki = make_pki(dir.path(), &[SERVER_NAME]);
    let p = tls_primary(dir.path(), &pki, 0, None);
    let tls_addr = p.addrs()[1];
    let config = client_config(&pki.ca, &[b"dot"]);

    let mut first = tls_connect(tls_addr, &config).expect("handshake");
    assert_eq!(first.conn.alpn_protocol(), Some(&b"dot"[..]));
    assert_eq!(
        first.conn.handshake_kind(),
        Some(rustls::HandshakeKind::Full)
    );
    for _ in 0..3 {
        assert_eq!(www_over(&mut first), ["192.0.2.1"]);
    }
    drop(first);

    let mut second = tls_connect(tls_addr, &config).expect("handshake");
    assert_eq!(
        second.conn.handshake_kind(),
        Some(rustls::HandshakeKind::Resumed),
        "the second session did not resume"
    );
    assert_eq!(www_over(&mut second), ["192.0.2.1"]);

    let h2 = client_config(&pki.ca, &[b"h2"]);
    let refused = tls_connect(tls_addr, &h2).map(|_| ());
    let e = refused.expect_err("a handshake offering only h2");
    assert!(
        e.to_string().contains("NoApplicationProtocol"),
        "unexpected handshake error: {e}"
    );

    let none = client_config(&pki.ca, &[]);
    let mut plain = tls_connect(tls_addr, &none).expect("handshake without ALPN");
    assert_eq!(plain.conn.alpn_protocol(), None);
    assert_eq!(www_over(&mut plain), ["192.0.2.1"]);
}

/// What an attacker can do to the TLS port, each with its outcome: a
/// connection that never sends its ClientHello is closed at the first-query
/// timeout (2 s), not before 1 s; plain DNS sent to the TLS port closes the
/// connection at once; with 3 connections per client allowed, a 4th held
/// one is closed at once; a session that finishes its handshake but sends
/// no query is closed within the same first-query budget. Through it all,
/// and after, DoT queries are answered.
#[test]
fn tls_connections_are_bounded_like_tcp_ones() {
    let dir = tempdir();
    let pki = make_pki(dir.path(), &[SERVER_NAME]);
    let db = dir.path().join("zone.sqlite3");
    load_zone_text(&db, "example.com.", ZONE);
    let text = format!(
        "[[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n\
         [tcp]\nfirst_query_timeout = 2\nidle_timeout = 3\nmax_connections_per_client = 3\n{}",
        db.display(),
        tls_section(&pki, "127.0.0.1:0")
    );
    let p = start(dir.path(), "authd.toml", &text, 0, true);
    let tls_addr = p.addrs()[1];
    let config = client_config(&pki.ca, &[b"dot"]);

    // Plain DNS over the TLS port: not a ClientHello, closed at once.
    let mut garbage = TcpStream::connect(tls_addr).expect("connect");
    let q = QueryBuilder::new("www.example.com.", "A").wire();
    let mut framed = u16::try_from(q.len()).expect("len").to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    garbage.write_all(&framed).expect("send");
    assert!(
        closed_within(&mut garbage, Duration::from_secs(1)),
        "plain DNS on the TLS port was not closed at once"
    );

    // A stalled handshake: open at 1 s, closed by 2 s (+1 s of slack).
    let started = Instant::now();
    let mut stalled = TcpStream::connect(tls_addr).expect("connect");
    assert!(
        !closed_within(&mut stalled, Duration::from_secs(1)),
        "a new connection was closed before its first-query timeout"
    );
    assert!(
        closed_within(&mut stalled, Duration::from_secs(2)),
        "a stalled handshake was still open after {:?}",
        started.elapsed()
    );

    // Three held connections are this client's share; the fourth is closed.
    let mut held: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(tls_addr).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut fourth = TcpStream::connect(tls_addr).expect("connect");
    assert!(
        closed_within(&mut fourth, Duration::from_millis(800)),
        "a 4th connection from one client was kept"
    );
    for h in &mut held {
        assert!(
            closed_within(h, Duration::from_secs(3)),
            "held connection kept"
        );
    }

    // A finished handshake, then silence: closed within the budget too,
    // with close_notify (rustls reads Ok(0); a bare TCP close would be
    // UnexpectedEof).
    let mut idle = tls_connect(tls_addr, &config).expect("handshake");
    let mut byte = [0u8; 1];
    let begun = Instant::now();
    let read = idle.read(&mut byte);
    assert!(matches!(read, Ok(0)), "silent session got {read:?}");
    assert!(
        begun.elapsed() < Duration::from_secs(3),
        "silent session kept {:?}",
        begun.elapsed()
    );

    let mut good = tls_connect(tls_addr, &config).expect("handshake");
    assert_eq!(www_over(&mut good), ["192.0.2.1"]);
    assert!(
        p.wait_for_log("handshake failed", Duration::from_secs(2)),
        "{}",
        p.stderr()
    );
}

/// authd secondaries of an authd primary whose transfers need TLS: one
/// opportunistic (`tls`), one strict with the authority that issued the
/// primary's certificate (`tls NAME`, `[tls] ca`) — both transfer, and the
/// opportunistic one follows a change by NOTIFY and IXFR over TLS; one
/// strict against another authority never transfers (the handshake fails
/// on the certificate); one over plain TCP is refused by the ACL.
#[test]
fn secondaries_transfer_over_tls_opportunistic_and_strict() {
    let dir = tempdir();
    let pki = make_pki(dir.path(), &[SERVER_NAME]);
    let tls_port = free_port();
    let follower_port = free_port();
    let p = tls_primary(dir.path(), &pki, tls_port, Some(follower_port));
    let plain_port = p.addrs()[0].port();
    let secondary = |name: &str, primary: &str, ca: Option<&Path>, port: u16| {
        let mut text = format!(
            "[[secondary]]\nzone = \"example.com.\"\nprimaries = [\"{primary}\"]\n\
             file = \"{}\"\nmin_refresh = 1\n",
            dir.path().join(format!("{name}.sqlite3")).display()
        );
        if let Some(ca) = ca {
            text.push_str(&format!("[tls]\nca = \"{}\"\n", ca.display()));
        }
        start(dir.path(), &format!("{name}.toml"), &text, port, false)
    };
    let opportunistic = secondary(
        "opportunistic",
        &format!("127.0.0.1:{tls_port} tls"),
        None,
        follower_port,
    );
    let strict = secondary(
        "strict",
        &format!("127.0.0.1:{tls_port} tls {SERVER_NAME}"),
        Some(&pki.ca),
        0,
    );
    let wrong = secondary(
        "wrong",
        &format!("127.0.0.1:{tls_port} tls {SERVER_NAME}"),
        Some(&pki.other_ca),
        0,
    );
    let cleartext = secondary("cleartext", &format!("127.0.0.1:{plain_port}"), None, 0);

    for s in [&opportunistic, &strict] {
        assert!(
            eventually(15, || www_udp(s.addr()).as_deref() == Some("192.0.2.1")),
            "no transfer over TLS:\n{}\nprimary:\n{}",
            s.stderr(),
            p.stderr()
        );
    }
    assert!(
        opportunistic.wait_for_log(
            &format!("AXFR from 127.0.0.1:{tls_port} tls"),
            Duration::from_secs(5)
        ),
        "{}",
        opportunistic.stderr()
    );
    assert!(
        wrong.wait_for_log("TLS handshake", Duration::from_secs(10)),
        "{}",
        wrong.stderr()
    );
    assert!(
        wrong.stderr().contains("invalid peer certificate"),
        "{}",
        wrong.stderr()
    );
    assert!(
        cleartext.wait_for_log("answered rcode 5", Duration::from_secs(10)),
        "{}",
        cleartext.stderr()
    );
    for s in [&wrong, &cleartext] {
        assert_eq!(www_udp(s.addr()), None, "{}", s.stderr());
    }

    // A change at the primary: NOTIFY to the opportunistic secondary, which
    // asks for it by IXFR over TLS.
    let db = dir.path().join("primary.sqlite3");
    let out = Command::new(binary("zone"))
        .args(["update", "--db"])
        .arg(&db)
        .args([
            "example.com",
            "--delete",
            "www A 192.0.2.1",
            "--add",
            "www A 192.0.2.2",
        ])
        .output()
        .expect("zone update");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        eventually(15, || www_udp(opportunistic.addr()).as_deref()
            == Some("192.0.2.2")),
        "the change never arrived:\n{}",
        opportunistic.stderr()
    );
    assert!(
        opportunistic.wait_for_log(
            &format!("IXFR from 127.0.0.1:{tls_port} tls"),
            Duration::from_secs(5)
        ),
        "{}",
        opportunistic.stderr()
    );
}

/// The configuration error for `text` (a file in `dir`).
fn config_error(dir: &Path, text: &str) -> String {
    let path = dir.join("authd.toml");
    match Config::from_parts(Some((text, &path)), Some(HashMap::new())) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e @ ConfigError::Invalid { .. }) => e.to_string(),
        Err(e) => panic!("not an Invalid error: {e}"),
    }
}

/// Every bad `[tls]` gets an error naming the key and the file; a good one
/// and the primary forms parse.
#[test]
fn tls_configuration_errors_name_key_and_file() {
    let dir = tempdir();
    let d = dir.path();
    let pki = make_pki(d, &[SERVER_NAME]);
    let other_dir = d.join("other");
    std::fs::create_dir_all(&other_dir).expect("mkdir");
    let other = make_pki(&other_dir, &[SERVER_NAME]);
    let empty = write_file(d, "empty.pem", "");
    let config = d.join("authd.toml").display().to_string();
    let cases = [
        (
            "[tls]\nlisten = [\"127.0.0.1:853\"]\n".to_string(),
            "tls.listen: needs tls.certificate and tls.key".to_string(),
        ),
        (
            format!("[tls]\ncertificate = \"{}\"\nlisten = \"127.0.0.1:853\"\n", pki.cert.display()),
            "tls.key: missing (certificate is set)".to_string(),
        ),
        (
            format!(
                "[tls]\ncertificate = \"{}\"\nkey = \"{}\"\n",
                pki.cert.display(),
                pki.key.display()
            ),
            "tls.listen: missing: certificate and key are set".to_string(),
        ),
        (
            format!(
                "[tls]\ncertificate = \"missing.crt\"\nkey = \"{}\"\nlisten = \"127.0.0.1:853\"\n",
                pki.key.display()
            ),
            format!(
                "tls.certificate: {}: No such file or directory",
                d.join("missing.crt").display()
            ),
        ),
        (
            format!(
                "[tls]\ncertificate = \"{}\"\nkey = \"{}\"\nlisten = \"127.0.0.1:853\"\n",
                pki.cert.display(),
                pki.cert.display()
            ),
            format!("tls.key: {}: no PEM private key in it", pki.cert.display()),
        ),
        (
            format!(
                "[tls]\ncertificate = \"{}\"\nkey = \"{}\"\nlisten = \"127.0.0.1:853\"\n",
                pki.cert.display(),
                other.key.display()
            ),
            format!(
                "tls.key: {} does not go with the certificate in {}",
                other.key.display(),
                pki.cert.display()
            ),
        ),
        (
            format!("[tls]\nca = \"{}\"\n", empty.display()),
            format!(
                "tls.ca: {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
                empty.display()
            ),
        ),
        (
            "[[secondary]]\nzone = \"example.com.\"\nprimaries = [\"127.0.0.1 tls ns1.example.net\"]\n\
             file = \"s.sqlite3\"\n"
                .to_string(),
            "secondary[0].primaries[0]: \"tls ns1.example.net\" verifies the primary's certificate \
             against [tls] ca, which is not set"
                .to_string(),
        ),
        (
            "[[secondary]]\nzone = \"example.com.\"\nprimaries = [\"127.0.0.1 tls bad..name\"]\n\
             file = \"s.sqlite3\"\n"
                .to_string(),
            "secondary[0].primaries[0]: \"127.0.0.1 tls bad..name\": \"bad..name\" is not a name \
             to verify a certificate for"
                .to_string(),
        ),
    ];
    for (text, want) in cases {
        let e = config_error(d, &text);
        assert!(
            e.starts_with(&format!("config {config}: {want}")),
            "for:\n{text}\nwant: {want}\ngot:  {e}"
        );
    }

    let text = format!(
        "[[key]]\nname = \"tk.\"\nalgorithm = \"hmac-sha256\"\nsecret = \"c2VjcmV0c2VjcmV0c2VjcmV0\"\n\
         [[secondary]]\nzone = \"example.com.\"\nfile = \"s.sqlite3\"\nprimaries = [\
         \"192.0.2.1 tls\", \"192.0.2.2:8853 tls ns1.example.net key tk.\", \"192.0.2.3 tls key tk.\", \
         \"192.0.2.4\"]\n[tls]\nca = \"{}\"\n",
        pki.ca.display()
    );
    let path = d.join("authd.toml");
    let c = Config::from_parts(Some((&text, &path)), Some(HashMap::new())).expect("valid");
    let shown: Vec<String> = c.secondary[0]
        .primaries
        .iter()
        .map(|p| p.to_string())
        .collect();
    assert_eq!(
        shown,
        [
            "192.0.2.1:853 tls",
            "192.0.2.2:8853 tls ns1.example.net key tk.",
            "192.0.2.3:853 tls key tk.",
            "192.0.2.4:53",
        ]
    );
}

/// A reload (SIGHUP) with a new certificate and key in the same files:
/// the next TLS connection is served with them (verified by the new
/// authority, refused by the old one), a session opened before keeps
/// answering; files that do not load fail the reload and keep the
/// certificate in force.
#[test]
fn a_reload_serves_a_new_certificate() {
    let dir = tempdir();
    let pki = make_pki(dir.path(), &[SERVER_NAME]);
    let p = tls_primary(dir.path(), &pki, 0, None);
    let tls_addr = p.addrs()[1];
    let old_ca = client_config(&pki.ca, &[b"dot"]);
    let mut before = tls_connect(tls_addr, &old_ca).expect("handshake");
    assert_eq!(www_over(&mut before), ["192.0.2.1"]);

    let fresh_dir = dir.path().join("fresh");
    std::fs::create_dir(&fresh_dir).expect("mkdir");
    let fresh = make_pki(&fresh_dir, &[SERVER_NAME]);
    std::fs::copy(&fresh.cert, &pki.cert).expect("new certificate");
    std::fs::copy(&fresh.key, &pki.key).expect("new key");
    p.signal("HUP");
    assert!(
        p.wait_for_log("reload: ", Duration::from_secs(10)),
        "{}",
        p.stderr()
    );
    let new_ca = client_config(&fresh.ca, &[b"dot"]);
    let mut after = tls_connect(tls_addr, &new_ca).expect("handshake with the new certificate");
    assert_eq!(www_over(&mut after), ["192.0.2.1"]);
    let refused = tls_connect(tls_addr, &old_ca).map(|_| ());
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("invalid peer certificate")),
        "{refused:?}"
    );
    assert_eq!(www_over(&mut before), ["192.0.2.1"]);

    // A key that does not go with the certificate: the reload fails and
    // the new certificate stays in force.
    std::fs::copy(&pki.other_ca, &pki.cert).expect("mismatched certificate");
    p.signal("HUP");
    assert!(
        p.wait_for_log("reload failed: ", Duration::from_secs(10)),
        "{}",
        p.stderr()
    );
    assert!(
        p.stderr().contains("does not go with the certificate"),
        "{}",
        p.stderr()
    );
    let mut still = tls_connect(tls_addr, &new_ca).expect("handshake after the failed reload");
    assert_eq!(www_over(&mut still), ["192.0.2.1"]);
}
