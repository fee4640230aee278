//! End to end: `[metrics] listen` serves the Prometheus text format; counters
//! grow by exactly what was sent; `promtool check metrics` (Debian package
//! `prometheus`) accepts the output.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use authd_tests::{
    AuthdProcess, QueryBuilder, http_get, load_zone_text, metric_value, query_tcp, query_udp,
    tempdir, write_file,
};

const ZONE: &str = "$TTL 300
@    IN SOA ns1 hostmaster 7 3600 900 604800 300
     IN NS  ns1
ns1  IN A   192.0.2.53
www  IN A   192.0.2.80
";

/// authd serving example.org from sqlite3 (cache on), metrics on a free port;
/// returns it and the metrics address (from its log line).
fn start(dir: &Path) -> (AuthdProcess, SocketAddr) {
    start_with(dir, "")
}

/// [`start`] with `extra` TOML appended to the configuration.
fn start_with(dir: &Path, extra: &str) -> (AuthdProcess, SocketAddr) {
    let db = dir.join("zone.sqlite3");
    load_zone_text(&db, "example.org.", ZONE);
    let config = write_file(
        dir,
        "authd.toml",
        &format!(
            "[metrics]\nlisten = \"127.0.0.1:0\"\n[[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n{extra}",
            db.display()
        ),
    );
    let authd = AuthdProcess::start(["--config".as_ref(), config.as_os_str()]);
    let addr = authd.metrics_addr();
    (authd, addr)
}

/// N queries make `authd_queries_total` for their labels grow by exactly N,
/// and the answers count as answers; TCP is counted apart; other paths 404.
#[test]
fn counters_grow_by_what_was_sent() {
    let dir = tempdir();
    let (authd, metrics) = start(dir.path());
    let (status, before) = http_get(metrics, "/metrics");
    assert!(status.contains("200"), "{status}");
    let udp_a = r#"authd_queries_total{transport="udp",opcode="QUERY",qtype="A",rcode="NOERROR"}"#;
    let tcp_a = r#"authd_queries_total{transport="tcp",opcode="QUERY",qtype="A",rcode="NOERROR"}"#;
    let nx = r#"authd_queries_total{transport="udp",opcode="QUERY",qtype="TXT",rcode="NXDOMAIN"}"#;
    let answers = r#"authd_responses_total{kind="answer"}"#;
    const N: u64 = 37;
    for _ in 0..N {
        query_udp(
            authd.addr(),
            &QueryBuilder::new("www.example.org.", "A").wire(),
        );
    }
    for _ in 0..3 {
        query_tcp(
            authd.addr(),
            &QueryBuilder::new("www.example.org.", "A").wire(),
        );
        query_udp(
            authd.addr(),
            &QueryBuilder::new("nx.example.org.", "TXT").wire(),
        );
    }
    let (_, after) = http_get(metrics, "/metrics");
    assert_eq!(
        metric_value(&after, udp_a) - metric_value(&before, udp_a),
        N,
        "{after}"
    );
    assert_eq!(
        metric_value(&after, tcp_a) - metric_value(&before, tcp_a),
        3
    );
    assert_eq!(metric_value(&after, nx) - metric_value(&before, nx), 3);
    assert_eq!(
        metric_value(&after, answers) - metric_value(&before, answers),
        N + 3
    );
    assert_eq!(
        metric_value(&after, r#"authd_zone_serial{zone="example.org."}"#),
        7
    );
    assert!(
        after.contains("authd_cache_hits_total{source=\"cache "),
        "{after}"
    );
    assert!(after.contains(&format!(
        "authd_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    )));
    let (status, _) = http_get(metrics, "/nothing");
    assert!(status.contains("404"), "{status}");

    // A request signed with a key authd does not know: BADKEY, counted.
    let badkey = r#"authd_tsig_failures_total{error="badkey_or_badsig"}"#;
    let mut q = QueryBuilder::new("www.example.org.", "A").wire();
    q[11] = 1; // ARCOUNT
    q.extend_from_slice(b"\x05nokey\x00\x00\xfa\x00\xff\x00\x00\x00\x00");
    let mut rdata = b"\x0bhmac-sha256\x00".to_vec();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    rdata.extend_from_slice(&now.to_be_bytes()[2..]);
    rdata.extend_from_slice(&300u16.to_be_bytes());
    rdata.extend_from_slice(&32u16.to_be_bytes());
    rdata.extend_from_slice(&[0u8; 32]);
    rdata.extend_from_slice(&q[..2]);
    rdata.extend_from_slice(&[0, 0, 0, 0]);
    q.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    q.extend_from_slice(&rdata);
    let reply = query_udp(authd.addr(), &q);
    assert_eq!(reply[3] & 0x0F, 9, "NOTAUTH");
    let (_, last) = http_get(metrics, "/metrics");
    assert_eq!(metric_value(&last, badkey), 1, "{last}");
}

/// `promtool check metrics` accepts the exposition.
#[test]
fn promtool_accepts_the_output() {
    let dir = tempdir();
    let (authd, metrics) = start(dir.path());
    query_udp(
        authd.addr(),
        &QueryBuilder::new("www.example.org.", "A").wire(),
    );
    let (_, text) = http_get(metrics, "/metrics");
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool is required: apt-get install prometheus");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("promtool");
    assert!(
        out.status.success(),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `nsupdate` on `commands` against authd at `addr`; its output.
fn nsupdate(addr: SocketAddr, commands: &str) -> String {
    let script = format!("server {} {}\n{commands}\nsend\n", addr.ip(), addr.port());
    let mut cmd = Command::new("nsupdate");
    cmd.arg("-t").arg("5").stdin(Stdio::piped());
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nsupdate is required: apt-get install bind9-dnsutils");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("nsupdate");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// One applied, one refused and one failed UPDATE are counted as such, and
/// a secondary zone whose primary does not answer counts a failed refresh.
/// An UPDATE's reply is not a response to a standard query: it is counted
/// in `authd_queries_total` by opcode and rcode, never as
/// `authd_responses_total{kind="error"}` (a successful one was, before).
#[test]
fn updates_and_transfers_in_are_counted_by_result() {
    let dir = tempdir();
    let (authd, metrics) = start_with(
        dir.path(),
        &format!(
            "[update]\nallow = [\"127.0.0.1\"]\n\
             [[secondary]]\nzone = \"sec.test.\"\nprimaries = [\"127.0.0.1:9\"]\nfile = \"{}\"\n",
            dir.path().join("sec.sqlite3").display()
        ),
    );
    let applied = r#"authd_updates_total{result="applied"}"#;
    let refused = r#"authd_updates_total{result="refused"}"#;
    let failed = r#"authd_updates_total{result="failed"}"#;
    let (_, before) = http_get(metrics, "/metrics");
    assert_eq!(
        (
            metric_value(&before, applied),
            metric_value(&before, refused),
            metric_value(&before, failed)
        ),
        (0, 0, 0),
        "{before}"
    );
    // Applied: an A record added.
    let out = nsupdate(
        authd.addr(),
        "zone example.org.\nupdate add new.example.org. 300 A 192.0.2.7",
    );
    assert!(!out.contains("failed"), "{out}");
    // Refused: a zone not served here (NOTAUTH).
    let out = nsupdate(
        authd.addr(),
        "zone elsewhere.test.\nupdate add x.elsewhere.test. 300 A 192.0.2.7",
    );
    assert!(out.contains("update failed"), "{out}");
    // Failed: a prerequisite not met (YXDOMAIN).
    let out = nsupdate(
        authd.addr(),
        "zone example.org.\nprereq nxdomain www.example.org.\nupdate add y.example.org. 300 A 192.0.2.8",
    );
    assert!(out.contains("YXDOMAIN"), "{out}");
    let (_, after) = http_get(metrics, "/metrics");
    assert_eq!(
        (
            metric_value(&after, applied),
            metric_value(&after, refused),
            metric_value(&after, failed)
        ),
        (1, 1, 1),
        "{after}"
    );
    let updates = |rcode: &str| -> u64 {
        after
            .lines()
            .filter(|l| {
                l.starts_with("authd_queries_total{")
                    && l.contains(r#"opcode="UPDATE""#)
                    && l.contains(&format!("rcode=\"{rcode}\""))
            })
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    assert_eq!(
        (updates("NOERROR"), updates("NOTAUTH"), updates("YXDOMAIN")),
        (1, 1, 1),
        "{after}"
    );
    let errors = r#"authd_responses_total{kind="error"}"#;
    assert_eq!(
        (metric_value(&before, errors), metric_value(&after, errors)),
        (0, 0),
        "{after}"
    );

    // The secondary zone's first refresh fails (nothing listens on port 9).
    let failed_in = r#"authd_transfers_in_total{result="failed"}"#;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut text = after;
    while metric_value(&text, failed_in) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        text = http_get(metrics, "/metrics").1;
    }
    assert_eq!(metric_value(&text, failed_in), 1, "{text}");
    assert_eq!(
        metric_value(&text, r#"authd_transfers_in_total{result="applied"}"#),
        0
    );
}

/// `authd_zone_queries_total{zone}`: one series per zone served, growing by
/// exactly the queries each zone answered, over UDP and TCP, answers and
/// NXDOMAIN alike; a query for a name in no served zone (REFUSED) and a
/// child zone's queries are not counted for the parent. A zone added with
/// SQL while authd runs is counted from its first query.
#[test]
fn queries_are_counted_per_zone() {
    let dir = tempdir();
    let db = dir.path().join("zone.sqlite3");
    load_zone_text(&db, "sub.example.org.", ZONE);
    let (authd, metrics) = start(dir.path());
    let org = r#"authd_zone_queries_total{zone="example.org."}"#;
    let sub = r#"authd_zone_queries_total{zone="sub.example.org."}"#;
    let (_, before) = http_get(metrics, "/metrics");
    assert!(before.contains(org) && before.contains(sub), "{before}");
    for _ in 0..5 {
        query_udp(
            authd.addr(),
            &QueryBuilder::new("www.example.org.", "A").wire(),
        );
        query_udp(
            authd.addr(),
            &QueryBuilder::new("nx.example.org.", "A").wire(),
        );
    }
    query_tcp(
        authd.addr(),
        &QueryBuilder::new("www.example.org.", "A").wire(),
    );
    for _ in 0..4 {
        query_udp(
            authd.addr(),
            &QueryBuilder::new("www.sub.example.org.", "A").wire(),
        );
    }
    for i in 0..20 {
        query_udp(
            authd.addr(),
            &QueryBuilder::new(&format!("q{i}.example.net."), "A").wire(),
        );
    }
    let (_, after) = http_get(metrics, "/metrics");
    assert_eq!(
        metric_value(&after, org) - metric_value(&before, org),
        11,
        "{after}"
    );
    assert_eq!(metric_value(&after, sub) - metric_value(&before, sub), 4);
    assert_eq!(
        after.matches("authd_zone_queries_total{").count(),
        2,
        "one series per served zone: {after}"
    );
    assert_eq!(
        metric_value(&after, "authd_zone_queries_uncounted_total"),
        0
    );

    // A zone created by SQL while serving (seen within the 200 ms poll).
    load_zone_text(&db, "example.com.", ZONE);
    let com = r#"authd_zone_queries_total{zone="example.com."}"#;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while query_udp(
        authd.addr(),
        &QueryBuilder::new("example.com.", "SOA").wire(),
    )
    .get(3)
    .is_some_and(|b| b & 0x0F == 5)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "example.com. never served"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, before) = http_get(metrics, "/metrics");
    for _ in 0..3 {
        query_udp(
            authd.addr(),
            &QueryBuilder::new("www.example.com.", "A").wire(),
        );
    }
    let (_, after) = http_get(metrics, "/metrics");
    assert_eq!(
        metric_value(&after, com) - metric_value(&before, com),
        3,
        "{after}"
    );
}
