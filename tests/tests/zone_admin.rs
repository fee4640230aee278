//! docs/ZONE-ADMIN.md, executed: every block marked `<!-- test:NAME -->` is run
//! in order (`sh` blocks with bash, `sql` blocks with the `sqlite3` shell) in an
//! empty folder, against a running authd serving the DB, and after each one the
//! test checks what the page says: the change is served within 1 s without a
//! restart, IXFR follows the journal, `zone` prints and exits as described,
//! breakage is SERVFAIL plus a log line, `zone dump` reads back to the same content.
//!
//! Needs the `sqlite3` shell (`apt-get install sqlite3`; `.ci/run` installs it).

use std::collections::BTreeSet;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use authd_tests::hickory_proto::op::{Message, ResponseCode};
use authd_tests::hickory_proto::rr::RData;
use authd_tests::{
    AuthdProcess, QueryBuilder, binary, parse_reply, query_tcp, query_udp, run_with_timeout,
    target_profile_dir, tempdir, workspace_dir, write_file,
};

/// How soon a committed change must be served (docs/ZONE-ADMIN.md).
const SERVED_WITHIN: Duration = Duration::from_secs(1);

/// The `<!-- test:NAME -->` blocks of the page: (name, language, body).
fn doc_blocks() -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(workspace_dir().join("docs/ZONE-ADMIN.md"))
        .expect("docs/ZONE-ADMIN.md");
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line
            .strip_prefix("<!-- test:")
            .and_then(|r| r.strip_suffix(" -->"))
        else {
            continue;
        };
        let fence = lines.next().expect("a fence after the marker");
        let lang = fence.strip_prefix("```").expect("fenced block").to_string();
        let mut body = String::new();
        for l in lines.by_ref() {
            if l == "```" {
                break;
            }
            body.push_str(l);
            body.push('\n');
        }
        out.push((name.to_string(), lang, body));
    }
    out
}

fn require_sqlite3() {
    let ok = Command::new("sqlite3")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "the sqlite3 shell is needed: apt-get install sqlite3 (.ci/run installs it)"
    );
}

/// Runs one doc block in `dir`; returns its output (asserting success unless `may_fail`).
fn run_block(dir: &Path, lang: &str, body: &str) -> Output {
    // The page assumes loadzone, zone and authd on PATH.
    binary("zone");
    let path = format!(
        "{}:{}",
        target_profile_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = match lang {
        "sh" => {
            let mut c = Command::new("bash");
            c.args(["-euo", "pipefail", "-c", body]);
            c
        }
        "sql" => {
            let mut c = Command::new("sqlite3");
            c.args(["-bail", "zones.sqlite3"]);
            c
        }
        other => panic!("unknown block language {other}"),
    };
    cmd.current_dir(dir).env("PATH", path);
    if lang == "sql" {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run sqlite3");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(body.as_bytes())
            .expect("write SQL");
        child.wait_with_output().expect("sqlite3 output")
    } else {
        run_with_timeout(&mut cmd, Duration::from_secs(60))
    }
}

fn run_ok(dir: &Path, lang: &str, body: &str) -> String {
    let out = run_block(dir, lang, body);
    assert!(
        out.status.success(),
        "block failed:\n{body}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ask(addr: SocketAddr, name: &str, qtype: &str) -> Message {
    parse_reply(&query_udp(addr, &QueryBuilder::new(name, qtype).wire()))
}

/// `rcode` and the answer rdata as text.
fn answer(addr: SocketAddr, name: &str, qtype: &str) -> (ResponseCode, BTreeSet<String>) {
    let m = ask(addr, name, qtype);
    (
        m.metadata.response_code,
        m.answers.iter().map(|r| r.data.to_string()).collect(),
    )
}

fn serial(addr: SocketAddr, zone: &str) -> Option<u32> {
    ask(addr, zone, "SOA")
        .answers
        .iter()
        .find_map(|r| match &r.data {
            RData::SOA(s) => Some(s.serial),
            _ => None,
        })
}

/// Waits up to [`SERVED_WITHIN`] (from `since`) for `check` to hold.
fn served_within(since: Instant, what: &str, mut check: impl FnMut() -> bool) {
    loop {
        if check() {
            return;
        }
        assert!(
            since.elapsed() < SERVED_WITHIN,
            "{what}: not served within {SERVED_WITHIN:?} of the commit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A TCP IXFR from `serial`; the answer records as `name TYPE rdata` lines.
fn ixfr(addr: SocketAddr, zone: &str, serial: u32) -> Vec<String> {
    use authd_tests::hickory_proto::op::{MessageType, OpCode, Query};
    use authd_tests::hickory_proto::rr::rdata::SOA;
    use authd_tests::hickory_proto::rr::{Name, Record, RecordType};
    let name = Name::from_ascii(zone).expect("name");
    let mut msg = Message::new(7, MessageType::Query, OpCode::Query);
    msg.add_query(Query::query(name.clone(), RecordType::IXFR));
    let soa = SOA::new(name.clone(), name.clone(), serial, 0, 0, 0, 0);
    msg.add_authority(Record::from_rdata(name, 0, RData::SOA(soa)));
    let reply = parse_reply(&query_tcp(addr, &msg.to_vec().expect("encode")));
    reply
        .answers
        .iter()
        .map(|r| format!("{} {} {}", r.name, r.record_type(), r.data))
        .collect()
}

fn block<'a>(blocks: &'a [(String, String, String)], name: &str) -> (&'a str, &'a str) {
    let b = blocks
        .iter()
        .find(|b| b.0 == name)
        .unwrap_or_else(|| panic!("docs/ZONE-ADMIN.md has no test:{name} block"));
    (&b.1, &b.2)
}

#[test]
fn zone_admin_page_works_as_written() {
    require_sqlite3();
    let blocks = doc_blocks();
    let names: Vec<&str> = blocks.iter().map(|b| b.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "create-loadzone",
            "create-sql",
            "add",
            "change",
            "delete",
            "journaled-change",
            "tool",
            "break",
            "fix"
        ],
        "every block of the page is covered below, in order"
    );
    let dir = tempdir();
    let d = dir.path();

    let (lang, body) = block(&blocks, "create-loadzone");
    run_ok(d, lang, body);
    let config = write_file(
        d,
        "authd.toml",
        "[[datasource]]\ntype = \"sqlite3\"\nfile = \"zones.sqlite3\"\n\
         [transfer]\nallow = [\"127.0.0.1\"]\n",
    );
    let authd = AuthdProcess::start(["--config".as_ref(), config.as_os_str()]);
    let a = authd.addr();
    assert_eq!(
        answer(a, "www.example.org.", "A"),
        (ResponseCode::NoError, set(&["192.0.2.1"]))
    );

    // A zone made in SQL is served at once.
    let (lang, body) = block(&blocks, "create-sql");
    run_ok(d, lang, body);
    let t = Instant::now();
    served_within(t, "example.net", || {
        answer(a, "www.example.net.", "A") == (ResponseCode::NoError, set(&["192.0.2.80"]))
    });
    assert_eq!(serial(a, "example.net."), Some(1));

    let (lang, body) = block(&blocks, "add");
    run_ok(d, lang, body);
    let t = Instant::now();
    served_within(t, "add", || {
        answer(a, "mail.example.org.", "A").1 == set(&["192.0.2.25"])
            && serial(a, "example.org.") == Some(2)
    });

    let (lang, body) = block(&blocks, "change");
    run_ok(d, lang, body);
    let t = Instant::now();
    served_within(t, "change", || {
        answer(a, "www.example.org.", "A").1 == set(&["192.0.2.2"])
            && serial(a, "example.org.") == Some(3)
    });

    let (lang, body) = block(&blocks, "delete");
    run_ok(d, lang, body);
    let t = Instant::now();
    served_within(t, "delete", || {
        answer(a, "mail.example.org.", "A").0 == ResponseCode::NXDomain
            && serial(a, "example.org.") == Some(4)
    });

    let (lang, body) = block(&blocks, "journaled-change");
    run_ok(d, lang, body);
    let t = Instant::now();
    served_within(t, "journaled change", || {
        answer(a, "www.example.org.", "A").1 == set(&["192.0.2.5"])
            && serial(a, "example.org.") == Some(5)
    });
    let soa = |n: u32| {
        format!(
            "example.org. SOA ns1.example.org. hostmaster.example.org. {n} 3600 900 1209600 300"
        )
    };
    assert_eq!(
        ixfr(a, "example.org.", 4),
        vec![
            soa(5),
            soa(4),
            "www.example.org. A 192.0.2.2".to_string(),
            soa(5),
            "www.example.org. A 192.0.2.5".to_string(),
            soa(5)
        ],
        "IXFR from the journal rows the page writes"
    );
    // Serial 3 has no journal rows: the full zone (SOA, 3 RRs, SOA).
    assert_eq!(ixfr(a, "example.org.", 3).len(), 5);

    // The zone tool block: list, update, check, dump, delete.
    let (lang, body) = block(&blocks, "tool");
    let out = run_ok(d, lang, body);
    let page = std::fs::read_to_string(workspace_dir().join("docs/ZONE-ADMIN.md")).expect("page");
    let listed: Vec<&str> = out.lines().take(3).collect();
    for l in &listed {
        assert!(
            page.contains(&format!("    {l}\n")),
            "`zone list` printed {l:?}, which the page does not show"
        );
    }
    assert!(
        out.contains("updated zone example.org.: serial 5 -> 6"),
        "{out}"
    );
    assert!(out.contains("zone example.org.: 5 RRs, OK"), "{out}");
    assert!(out.contains("deleted zone example.net."), "{out}");
    let t = Instant::now();
    served_within(t, "zone update", || {
        answer(a, "www.example.org.", "A").1 == set(&["192.0.2.6"])
            && answer(a, "example.net.", "SOA").0 == ResponseCode::Refused
    });
    assert_eq!(ixfr(a, "example.org.", 5).len(), 7, "zone update journals");
    // The dump reads back (loadzone) to the same content.
    let back = d.join("back.sqlite3");
    let out = run_with_timeout(
        Command::new(binary("loadzone"))
            .arg("--db")
            .arg(&back)
            .arg("example.org.")
            .arg(d.join("example.org.dump")),
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        rows(&d.join("zones.sqlite3"), "example.org."),
        rows(&back, "example.org.")
    );

    // Breakage: SERVFAIL for the name, a log line, `zone check` names it.
    let (lang, body) = block(&blocks, "break");
    run_ok(d, lang, body);
    let t = Instant::now();
    served_within(t, "break", || {
        answer(a, "www.example.org.", "A").0 == ResponseCode::ServFail
    });
    assert!(answer(a, "ns1.example.org.", "A").0 == ResponseCode::NoError);
    let logged = "SERVFAIL: zone example.org.: bad data at www.example.org.: CNAME and other data";
    assert!(
        authd.wait_for_log(logged, Duration::from_secs(2)),
        "{}",
        authd.stderr()
    );
    assert!(page.contains(logged));
    let check = run_block(d, "sh", "zone check --db zones.sqlite3 example.org");
    assert_eq!(check.status.code(), Some(1));
    let message = String::from_utf8_lossy(&check.stderr).trim().to_string();
    assert!(
        page.contains(&format!("`{message}`")),
        "zone check printed {message:?}, which the page does not quote"
    );
    let (lang, body) = block(&blocks, "fix");
    run_ok(d, lang, body);
    let t = Instant::now();
    served_within(t, "fix", || {
        answer(a, "www.example.org.", "A") == (ResponseCode::NoError, set(&["192.0.2.6"]))
    });
}

/// (name, rname, ttl, rdtype, sigtype, rdata) of every row of `zone`.
fn rows(
    db: &PathBuf,
    zone: &str,
) -> BTreeSet<(String, String, i64, String, Option<String>, String)> {
    let conn = rusqlite::Connection::open(db).expect("open");
    let mut stmt = conn
        .prepare(
            "SELECT r.name, r.rname, r.ttl, r.rdtype, r.sigtype, r.rdata FROM records r \
             JOIN zones z ON z.id = r.zone_id WHERE z.name = ?1",
        )
        .expect("prepare");
    stmt.query_map([zone], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
        ))
    })
    .expect("query")
    .collect::<Result<_, _>>()
    .expect("rows")
}

#[test]
fn zone_tool_dump_of_the_root_zone_reads_back_the_same() {
    let dir = tempdir();
    let d = dir.path();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/root.zone");
    let db = d.join("a.sqlite3");
    let zone = |args: &[&std::ffi::OsStr]| {
        let out = run_with_timeout(
            Command::new(binary("zone")).args(args),
            Duration::from_secs(300),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    zone(&[
        "create".as_ref(),
        "--db".as_ref(),
        db.as_os_str(),
        ".".as_ref(),
        "--file".as_ref(),
        root.as_os_str(),
    ]);
    let dump = d.join("root.dump");
    zone(&[
        "dump".as_ref(),
        "--db".as_ref(),
        db.as_os_str(),
        ".".as_ref(),
        dump.as_os_str(),
    ]);
    let back = d.join("b.sqlite3");
    let out = run_with_timeout(
        Command::new(binary("loadzone"))
            .arg("--db")
            .arg(&back)
            .arg(".")
            .arg(&dump),
        Duration::from_secs(300),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let a = rows(&db, ".");
    assert_eq!(a.len(), 21_591, "every RR of the root zone");
    assert_eq!(a, rows(&back, "."));
    let list = zone(&["list".as_ref(), "--db".as_ref(), back.as_os_str()]);
    assert!(list.contains("2020101902"), "{list}");
    let check = zone(&[
        "check".as_ref(),
        "--db".as_ref(),
        back.as_os_str(),
        ".".as_ref(),
    ]);
    assert_eq!(check.trim(), "zone .: 21591 RRs, OK");
}

#[test]
fn zone_tool_errors_are_one_line_and_change_nothing() {
    let dir = tempdir();
    let d = dir.path();
    let run = |args: &str| {
        let mut c = Command::new(binary("zone"));
        c.args(args.split(' ')).current_dir(d);
        run_with_timeout(&mut c, Duration::from_secs(30))
    };
    assert!(
        run("create --db z.sqlite3 example.org --ns ns1.example.org.")
            .status
            .success()
    );
    let long = "a".repeat(300);
    let too_long = format!("update --db z.sqlite3 example.org --add t|TXT|\"{long}\"");
    for (args, want) in [
        (
            "create --db z.sqlite3 example.org --ns ns1.example.org.",
            "already exists",
        ),
        // The master-file reader's rules (docs/ZONE-ADMIN.md, Master files).
        (
            too_long.as_str(),
            "t.example.org. TXT: text is 300 bytes long, over the 255 of a character-string \
             (RFC 1035 §3.3): write it as several quoted strings of at most 255 bytes each",
        ),
        (
            "update --db z.sqlite3 example.org --add big|4294967296|A|192.0.2.1",
            "big.example.org.: TTL 4294967296 does not fit in 32 bits (RFC 1035 §3.2.1)",
        ),
        (
            "update --db z.sqlite3 example.org --delete www.example.org.|A|192.0.2.1",
            "not in the zone",
        ),
        (
            "delete --db z.sqlite3 example.com",
            "zone example.com. is not in the DB",
        ),
        ("list --db missing.sqlite3", "missing.sqlite3"),
        ("check --db z.sqlite3 example.org", "no NS"),
    ] {
        if want == "no NS" {
            // Break the zone behind the tool's back, then check it.
            let conn = rusqlite::Connection::open(d.join("z.sqlite3")).expect("open");
            conn.execute("DELETE FROM records WHERE rdtype='NS'", [])
                .expect("delete NS");
        }
        let args = args.replace('|', " ");
        let mut c = Command::new(binary("zone"));
        let mut v: Vec<String> = Vec::new();
        // Keep the quoted RR of --add or --delete as one argument.
        let mut parts = args.splitn(6, ' ');
        while let Some(p) = parts.next() {
            if p == "--delete" || p == "--add" {
                v.push(p.to_string());
                v.push(parts.collect::<Vec<_>>().join(" "));
                break;
            }
            v.push(p.to_string());
        }
        c.args(&v).current_dir(d);
        let out = run_with_timeout(&mut c, Duration::from_secs(30));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args}: {err}");
        assert!(
            err.starts_with("zone: ") && err.contains(want),
            "{args}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{args}: {err}");
    }
}

/// `zone check` names a row whose `rname` is not its name reversed: lookups
/// below a name, NSEC and the cache's absent-name ranges read `rname`, so such
/// a row (easy to write by hand in SQL) would be missed by them.
#[test]
fn zone_check_names_a_row_with_a_wrong_rname() {
    let dir = tempdir();
    let d = dir.path();
    let run = |args: &[&str]| {
        let mut c = Command::new(binary("zone"));
        c.args(args).current_dir(d);
        run_with_timeout(&mut c, Duration::from_secs(30))
    };
    let ok = |args: &[&str]| {
        let out = run(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    ok(&[
        "create",
        "--db",
        "z.sqlite3",
        "example.org",
        "--ns",
        "ns1.example.org.",
    ]);
    ok(&[
        "update",
        "--db",
        "z.sqlite3",
        "example.org",
        "--add",
        "www 300 IN A 192.0.2.1",
    ]);
    // Any case is fine.
    let conn = rusqlite::Connection::open(d.join("z.sqlite3")).expect("open");
    conn.execute(
        "UPDATE records SET rname='ORG.Example.WWW.' WHERE name='www.example.org.'",
        [],
    )
    .expect("update");
    let check = ok(&["check", "--db", "z.sqlite3", "example.org"]);
    assert!(check.trim().ends_with("OK"), "{check}");
    conn.execute(
        "UPDATE records SET rname='www.example.org.' WHERE name='www.example.org.'",
        [],
    )
    .expect("update");
    let out = run(&["check", "--db", "z.sqlite3", "example.org"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("www.example.org.")
            && err.contains(
                r#"rname "www.example.org." is not the name reversed ("org.example.www.")"#
            ),
        "{err}"
    );
    // An update must leave a zone that passes `zone check`: refused while the
    // bad row is there, nothing changed.
    let update = [
        "update",
        "--db",
        "z.sqlite3",
        "example.org",
        "--add",
        "mail 300 IN A 192.0.2.25",
    ];
    let out = run(&update);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not the name reversed"), "{err}");
    let rows: i64 = conn
        .query_row(
            "SELECT count(*) FROM records WHERE name='mail.example.org.'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(rows, 0);
    conn.execute(
        "UPDATE records SET rname='org.example.www.' WHERE name='www.example.org.'",
        [],
    )
    .expect("fix");
    ok(&update);
    // A problem only the update's own rows make is named, not their row ids
    // (they are rolled back).
    let out = run(&[
        "update",
        "--db",
        "z.sqlite3",
        "example.org",
        "--add",
        "www 300 IN CNAME mail",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "the update would leave CNAME and other data at www.example.org.; nothing was changed"
        ) && !err.contains("row"),
        "{err}"
    );
}
