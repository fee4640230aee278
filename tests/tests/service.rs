//! Service integration: systemd's readiness protocol (Type=notify), the unit
//! in dist/ as `systemd-analyze verify` sees it, and manual pages generated
//! from every binary's argument definitions.

use std::os::unix::net::UnixDatagram;
use std::process::Command;
use std::time::Duration;

use authd_tests::{AuthdProcess, binary, run_with_timeout, tempdir, workspace_dir, write_file};

/// The next datagram on `sock`, as text (within 10 s).
fn next(sock: &UnixDatagram) -> String {
    let mut buf = [0u8; 1024];
    let n = sock.recv(&mut buf).expect("a notification within 10 s");
    String::from_utf8_lossy(&buf[..n]).to_string()
}

/// READY=1 once serving; RELOADING=1 with MONOTONIC_USEC then READY=1 around
/// a SIGHUP reload; STOPPING=1 on SIGTERM (sd_notify(3)).
#[test]
fn systemd_is_told_ready_reloading_and_stopping() {
    let dir = tempdir();
    let path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&path).expect("bind notify socket");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let zone = workspace_dir().join("examples/example.com.zone");
    let mut cmd = Command::new(binary("authd"));
    cmd.arg("--zone")
        .arg(format!("example.com.={}", zone.display()))
        .args(["--listen", "127.0.0.1:0"])
        .env("NOTIFY_SOCKET", &path);
    let mut authd = AuthdProcess::start_command(cmd, 1);
    assert_eq!(next(&sock).trim(), "READY=1");
    authd.signal("HUP");
    let reloading = next(&sock);
    assert!(
        reloading.starts_with("RELOADING=1\nMONOTONIC_USEC="),
        "{reloading:?}"
    );
    let usec: u64 = reloading
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("MONOTONIC_USEC="))
        .and_then(|v| v.parse().ok())
        .expect("MONOTONIC_USEC value");
    assert!(usec > 0);
    assert_eq!(next(&sock).trim(), "READY=1");
    authd.signal("TERM");
    assert_eq!(next(&sock).trim(), "STOPPING=1");
    assert!(
        authd
            .wait_timeout(Duration::from_secs(10))
            .expect("stops")
            .success()
    );
}

/// Every binary prints its manual page with `--man` (roff, section 1, from
/// the same definitions as `--help`), and `man -l` renders it.
#[test]
fn every_binary_has_a_manual_page() {
    let dir = tempdir();
    for name in [
        "authd",
        "authc",
        "loadzone",
        "zone",
        "query-bench",
        "dbutil",
    ] {
        let out = run_with_timeout(
            Command::new(binary(name)).arg("--man"),
            Duration::from_secs(10),
        );
        assert!(out.status.success(), "{name} --man");
        let page = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            page.contains(&format!(".TH {name} 1")),
            "{name}: {}",
            &page[..page.len().min(300)]
        );
        assert!(page.contains(".SH NAME"), "{name}");
        let file = write_file(dir.path(), &format!("{name}.1"), &page);
        let rendered = run_with_timeout(
            Command::new("man")
                .arg("-l")
                .arg(&file)
                .env("MANPAGER", "cat")
                .env("COLUMNS", "100"),
            Duration::from_secs(10),
        );
        let text = String::from_utf8_lossy(&rendered.stdout);
        assert!(
            rendered.status.success() && text.contains("NAME"),
            "{name}: man -l: {text}"
        );
    }
}

/// `systemd-analyze verify` accepts dist/authd.service (with ExecStart
/// pointing at the built binary and the manual pages on MANPATH).
/// Every binary lists `--man` in its `--help`, and its manual page names
/// only pages that `dist/install.sh` installs (one per binary, and
/// authd.toml(5)): no `authd-keygen(1)` for a command (issue 27).
#[test]
fn manual_pages_are_listed_and_name_only_installed_pages() {
    let install =
        std::fs::read_to_string(workspace_dir().join("dist/install.sh")).expect("dist/install.sh");
    let binaries: Vec<&str> = install
        .lines()
        .find_map(|l| l.strip_prefix("BINARIES=("))
        .and_then(|l| l.strip_suffix(')'))
        .expect("BINARIES=(...) in install.sh")
        .split_whitespace()
        .collect();
    let mut installed: Vec<String> = binaries.iter().map(|b| format!("{b}(1)")).collect();
    installed.push("authd.toml(5)".to_string());
    let mut listed: Vec<String> = authd::cli::MANUAL_PAGES
        .iter()
        .map(|p| p.to_string())
        .collect();
    listed.sort();
    installed.sort();
    assert_eq!(listed, installed, "cli::MANUAL_PAGES and install.sh");
    for name in &binaries {
        let help = run_with_timeout(
            Command::new(binary(name)).arg("--help"),
            Duration::from_secs(10),
        );
        let help = String::from_utf8_lossy(&help.stdout);
        assert!(help.contains("--man"), "{name} --help: {help}");
        let out = run_with_timeout(
            Command::new(binary(name)).arg("--man"),
            Duration::from_secs(10),
        );
        let page = String::from_utf8_lossy(&out.stdout)
            .replace("\\-", "-")
            .replace("\\fR", "")
            .replace("\\fB", "");
        // Every `word(N)` is a page reference.
        for word in page.split(|c: char| c.is_whitespace() || c == ',') {
            let Some((stem, rest)) = word.split_once('(') else {
                continue;
            };
            let rest = rest.as_bytes();
            if stem.is_empty() || rest.len() < 2 || !rest[0].is_ascii_digit() || rest[1] != b')' {
                continue;
            }
            let reference = format!("{stem}({})", char::from(rest[0]));
            assert!(
                installed.contains(&reference),
                "{name}(1) names {reference}, which is not installed"
            );
        }
    }
}

#[test]
fn systemd_accepts_the_unit() {
    let dir = tempdir();
    let man1 = dir.path().join("man/man1");
    std::fs::create_dir_all(&man1).expect("man dir");
    for name in ["authd", "authc"] {
        let out = run_with_timeout(
            Command::new(binary(name)).arg("--man"),
            Duration::from_secs(10),
        );
        std::fs::write(man1.join(format!("{name}.1")), &out.stdout).expect("man page");
    }
    let unit = std::fs::read_to_string(workspace_dir().join("dist/authd.service")).expect("unit");
    let unit = unit.replace(
        "/usr/local/bin/authd",
        &binary("authd").display().to_string(),
    );
    let path = write_file(dir.path(), "authd.service", &unit);
    let out = run_with_timeout(
        Command::new("systemd-analyze")
            .arg("verify")
            .arg(&path)
            .env("MANPATH", dir.path().join("man")),
        Duration::from_secs(30),
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && text.trim().is_empty(), "{text}");
}
