//! End to end: `authc` over authd's control socket, every command, and its
//! errors (one line, exit status 1).

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use authd_tests::{
    AuthdProcess, QueryBuilder, binary, load_zone_text, query_udp, run_with_timeout, tempdir,
    write_file,
};

fn zone(serial: u32) -> String {
    format!(
        "$TTL 300\n@ IN SOA ns1 hostmaster {serial} 3600 900 604800 300\n  IN NS ns1\nns1 IN A 192.0.2.53\nwww IN A 192.0.2.80\n"
    )
}

/// authd serving example.org (sqlite3, cache on) and example.net (memory,
/// from a master file), control socket in `dir`.
fn start(dir: &Path) -> (AuthdProcess, std::path::PathBuf) {
    let db = dir.join("zone.sqlite3");
    load_zone_text(&db, "example.org.", &zone(7));
    let net = write_file(dir, "example.net.zone", &zone(1));
    let socket = dir.join("control.sock");
    let config = write_file(
        dir,
        "authd.toml",
        &format!(
            "[control]\nsocket = \"{}\"\n[server]\nudp_workers = 1\n\
             [[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n\
             [[datasource]]\ntype = \"memory\"\nzones = [{{ origin = \"example.net.\", file = \"{}\" }}]\n",
            socket.display(),
            db.display(),
            net.display()
        ),
    );
    let authd = AuthdProcess::start(["--config".as_ref(), config.as_os_str()]);
    assert!(authd.wait_for_log("control socket", Duration::from_secs(5)));
    (authd, socket)
}

fn authc(socket: &Path, args: &[&str]) -> Output {
    run_with_timeout(
        Command::new(binary("authc"))
            .arg("--socket")
            .arg(socket)
            .args(args),
        Duration::from_secs(30),
    )
}

fn ok(socket: &Path, args: &[&str]) -> String {
    let out = authc(socket, args);
    assert!(
        out.status.success(),
        "authc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn fails(socket: &Path, args: &[&str]) -> String {
    let out = authc(socket, args);
    assert_eq!(out.status.code(), Some(1), "authc {args:?}");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(err.starts_with("authc: "), "{err}");
    err
}

#[test]
fn every_command_end_to_end() {
    let dir = tempdir();
    let (mut authd, socket) = start(dir.path());
    // The socket is the owner's only (mode 0600).
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&socket)
        .expect("socket")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    let status = ok(&socket, &["status"]);
    assert!(
        status.starts_with(&format!("version: authd {}\n", env!("CARGO_PKG_VERSION"))),
        "{status}"
    );
    assert!(status.contains("uptime: "), "{status}");
    assert!(status.contains("querylog: off"), "{status}");
    assert!(
        status.contains("zone example.org. serial 7 source cache "),
        "{status}"
    );
    assert!(
        status.contains("zone example.net. serial 1 source memory:"),
        "{status}"
    );

    let one = ok(&socket, &["zone-status", "example.org"]);
    assert_eq!(one.lines().count(), 1, "{one}");
    assert!(one.starts_with("zone example.org. serial 7 "), "{one}");
    let e = fails(&socket, &["zone-status", "nosuch.org"]);
    assert_eq!(e.trim(), "authc: zone nosuch.org. is not served here");

    // A reload picks up the changed master file; with a zone, its new serial.
    write_file(dir.path(), "example.net.zone", &zone(2));
    let out = ok(&socket, &["reload", "example.net."]);
    assert!(
        out.starts_with("reload: 1 zones reloaded, 0 unchanged, 0 failed, 1 served from sqlite3\n"),
        "{out}"
    );
    assert!(
        out.contains("zone example.net. serial 2 source memory:"),
        "{out}"
    );

    // Stats: JSON samples, the queries sent counted.
    for _ in 0..5 {
        query_udp(
            authd.addr(),
            &QueryBuilder::new("www.example.org.", "A").wire(),
        );
    }
    let stats = ok(&socket, &["stats"]);
    assert!(stats.starts_with('['), "{stats}");
    assert!(
        stats.contains(r#"{"labels":{"opcode":"QUERY","qtype":"A","rcode":"NOERROR","transport":"udp"},"name":"authd_queries_total","value":5.0}"#),
        "{stats}"
    );
    let flushes = |stats: &str| {
        stats
            .matches(r#""name":"authd_cache_flushes_total","value":"#)
            .count()
    };
    assert_eq!(flushes(&stats), 1);
    let out = ok(&socket, &["flush-cache"]);
    assert_eq!(out, "flushed 1 cache(s)\n");
    let stats = ok(&socket, &["stats"]);
    assert!(
        stats.contains(r#""name":"authd_cache_flushes_total","value":1.0"#),
        "{stats}"
    );

    // Query log on: one line per query; off: none.
    assert_eq!(ok(&socket, &["querylog", "on"]), "querylog on\n");
    query_udp(
        authd.addr(),
        &QueryBuilder::new("www.example.org.", "A").wire(),
    );
    assert!(authd.wait_for_log(
        "client 127.0.0.1 UDP: www.example.org. IN A",
        Duration::from_secs(2)
    ));
    assert_eq!(ok(&socket, &["querylog", "off"]), "querylog off\n");
    query_udp(
        authd.addr(),
        &QueryBuilder::new("ns1.example.org.", "A").wire(),
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !authd.stderr().contains("ns1.example.org. IN A"),
        "logged while off"
    );

    // A reload of a setting that needs a restart: the warning it logs is
    // shown after the summary.
    let config = std::fs::read_to_string(dir.path().join("authd.toml")).expect("config");
    write_file(
        dir.path(),
        "authd.toml",
        &config.replace("udp_workers = 1", "udp_workers = 2"),
    );
    assert_eq!(
        ok(&socket, &["reload"]),
        "reload: 0 zones reloaded, 1 unchanged, 0 failed, 1 served from sqlite3\n\
         warning: reload: [server] udp_workers changed (1 -> 2); restart authd to apply it\n"
    );
    assert!(authd.wait_for_log(
        "WARN authd::server::build: reload: [server] udp_workers changed (1 -> 2); restart \
         authd to apply it",
        Duration::from_secs(2)
    ));

    // Errors: one line, exit status 1.
    let e = fails(&socket, &["frobnicate"]);
    assert!(e.contains("unknown command \"frobnicate\""), "{e}");
    let e = fails(&dir.path().join("nowhere.sock"), &["status"]);
    assert!(e.contains("cannot connect to "), "{e}");

    assert_eq!(ok(&socket, &["stop"]), "stopping\n");
    let status = authd
        .wait_timeout(Duration::from_secs(10))
        .expect("authd stopped");
    assert!(status.success());
}
