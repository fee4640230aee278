//! The `loadzone` binary: summary line, exit codes, one-line errors with
//! `FILE:LINE`, and that a failed load leaves the zone's previous content intact.
//!
//! The loader itself is tested against the real root zone and BIND 10's inputs
//! in `tests/tests/loadzone.rs`. Data comes from `tests/data/` (provenance in
//! its README).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rusqlite::Connection;

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data").join(rel)
}

/// Runs `loadzone --db DB ORIGIN FILE` in `dir`, so paths in messages are the
/// relative ones given.
fn loadzone(dir: &Path, db: &str, origin: &str, file: &str) -> Output {
    Command::new(authd_tests::binary("loadzone"))
        .current_dir(dir)
        .args(["--db", db, origin, file])
        .output()
        .expect("run loadzone")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every row of the tables a load may touch, as text, in id order.
fn snapshot(db: &Path) -> Vec<String> {
    let conn = Connection::open(db).expect("open DB");
    let mut out = Vec::new();
    for sql in [
        "SELECT id, name, rdclass FROM zones ORDER BY id",
        "SELECT id, zone_id, name, rname, ttl, rdtype, sigtype, rdata FROM records ORDER BY id",
        "SELECT id, zone_id, hash, owner, ttl, rdtype, rdata FROM nsec3 ORDER BY id",
        "SELECT id, zone_id, version, operation, name, rrtype, ttl, rdata FROM diffs ORDER BY id",
    ] {
        let mut stmt = conn.prepare(sql).expect("prepare");
        let cols = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                let mut line = String::new();
                for i in 0..cols {
                    let v: rusqlite::types::Value = r.get(i)?;
                    line.push_str(&format!("{v:?}|"));
                }
                Ok(line)
            })
            .expect("query");
        for row in rows {
            out.push(row.expect("row"));
        }
    }
    out
}

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for f in [
        "example.org.zone",
        "broken-example.org.zone",
        "example-nosoa.org.zone",
        "example-nons.org.zone",
    ] {
        std::fs::copy(
            data(&format!("bind10/loadzone/testdata/{f}")),
            dir.path().join(f),
        )
        .expect("copy test data");
    }
    dir
}

const HEAD: &str = "$TTL 300\n@ SOA ns hm 2 3600 1800 1814400 300\n@ NS ns\nns A 192.0.2.1\n";

#[test]
fn loads_creates_db_and_prints_summary() {
    let dir = setup();
    let out = loadzone(dir.path(), "z.db", "example.org", "example.org.zone");
    assert!(out.status.success(), "{}", stderr(&out));
    let line = stdout(&out);
    assert!(
        line.starts_with("loaded 3 RRs for example.org. into z.db in ") && line.ends_with(" s\n"),
        "{line:?}"
    );
    assert_eq!(stderr(&out), "");
    let conn = Connection::open(dir.path().join("z.db")).expect("open");
    let v: (i64, i64) = conn
        .query_row("SELECT version, minor FROM schema_version", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .expect("version");
    assert_eq!(v, (2, 2));
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("mode");
    assert_eq!(mode, "wal");
    let zone: String = conn
        .query_row("SELECT name FROM zones", [], |r| r.get(0))
        .expect("zone");
    assert_eq!(zone, "example.org.");
    // The same origin with a trailing dot is the same zone.
    let again = loadzone(dir.path(), "z.db", "example.org.", "example.org.zone");
    assert!(again.status.success(), "{}", stderr(&again));
    let zones: i64 = conn
        .query_row("SELECT count(*) FROM zones", [], |r| r.get(0))
        .expect("count");
    assert_eq!(zones, 1);
}

/// A file with no `$TTL` loads as BIND 9 loads it, with one warning naming
/// the line: from a SOA without a TTL on, records without one get the SOA
/// minimum; after a stated TTL and no such SOA, the TTL last stated (RFC 1035
/// §5.1). A TTL over 2^31 - 1 is 0 (RFC 2181 §8), with a warning.
#[test]
fn a_file_without_ttl_loads_with_a_warning_naming_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = |db: &str| -> Vec<(String, String, i64)> {
        let conn = Connection::open(dir.path().join(db)).expect("open");
        let mut stmt = conn
            .prepare("SELECT name, rdtype, ttl FROM records ORDER BY id")
            .expect("prepare");
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .expect("query")
            .map(|r| r.expect("row"))
            .collect()
    };
    let owned = |want: &[(&str, &str, i64)]| -> Vec<(String, String, i64)> {
        want.iter()
            .map(|&(n, t, ttl)| (n.to_string(), t.to_string(), ttl))
            .collect()
    };
    let text = "; no $TTL\n@ SOA ns hm 2 3600 1800 1814400 300\n@ NS ns\nns 60 A 192.0.2.1\nmail A 192.0.2.2\n";
    std::fs::write(dir.path().join("nottl.zone"), text).expect("write");
    let out = loadzone(dir.path(), "z.db", "example.org", "nottl.zone");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "loadzone: warning: nottl.zone:2: no $TTL and no TTL before the SOA: it and the records \
         without a TTL after it get the SOA minimum, 300 s (as BIND 9); add a $TTL line\n"
    );
    assert_eq!(
        rows("z.db"),
        owned(&[
            ("example.org.", "SOA", 300),
            ("example.org.", "NS", 300),
            ("ns.example.org.", "A", 60),
            ("mail.example.org.", "A", 300),
        ])
    );
    let text = "@ 60 SOA ns hm 2 3600 1800 1814400 300\n@ NS ns\nns 2147483648 A 192.0.2.1\nmail A 192.0.2.2\n";
    std::fs::write(dir.path().join("last.zone"), text).expect("write");
    let out = loadzone(dir.path(), "y.db", "example.org", "last.zone");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "loadzone: warning: last.zone:2: no $TTL: this record and the next without a TTL get \
         the TTL last stated, 60 s (RFC 1035 §5.1); add a $TTL line\n\
         loadzone: warning: last.zone:3: ns.example.org. A: TTL 2147483648 is over 2147483647: \
         0 used (RFC 2181 §8)\n"
    );
    assert_eq!(
        rows("y.db"),
        owned(&[
            ("example.org.", "SOA", 60),
            ("example.org.", "NS", 60),
            ("ns.example.org.", "A", 0),
            ("mail.example.org.", "A", 0),
        ])
    );
    // With a $TTL line, nothing is said.
    let text = text.replace(" 2147483648 ", " ");
    std::fs::write(dir.path().join("ttl.zone"), format!("$TTL 300\n{text}")).expect("write");
    let out = loadzone(dir.path(), "z.db", "example.org", "ttl.zone");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
}

#[test]
fn bad_inputs_fail_with_one_line_and_keep_the_zone() {
    let dir = setup();
    let d = dir.path();
    let write = |name: &str, text: &str| std::fs::write(d.join(name), text).expect("write");
    write(
        "syntax.zone",
        &format!("{HEAD}\n; a comment\nw A 999.1.1.1\n"),
    );
    write(
        "outside.zone",
        &format!("{HEAD}www.example.com. A 192.0.2.2\n"),
    );
    write("cname.zone", &format!("{HEAD}w CNAME ns\nw A 192.0.2.2\n"));
    write("unknown.zone", &format!("{HEAD}w 300 IN FOO bar\n"));
    write(
        "include.zone",
        &format!("{HEAD}$INCLUDE nothere.inc\nx A 192.0.2.3\n"),
    );

    let good = loadzone(d, "z.db", "example.org", "example.org.zone");
    assert!(good.status.success(), "{}", stderr(&good));
    let before = snapshot(&d.join("z.db"));
    assert_eq!(before.len(), 4, "{before:?}");

    let cases = [
        (
            "syntax.zone",
            "syntax.zone:7: w.example.org. A: bad address \"999.1.1.1\": not an IPv4 address",
        ),
        (
            "broken-example.org.zone",
            "broken-example.org.zone:11: bad owner name: malformed name in wire form",
        ),
        (
            "outside.zone",
            "outside.zone:5: name www.example.com. is outside the zone example.org.",
        ),
        (
            "example-nosoa.org.zone",
            "example-nosoa.org.zone: no SOA at the zone apex example.org.",
        ),
        (
            "example-nons.org.zone",
            "example-nons.org.zone: no NS at the zone apex example.org.",
        ),
        (
            "cname.zone",
            "cname.zone:6: CNAME and other data at w.example.org.",
        ),
        (
            "unknown.zone",
            "unknown.zone:5: unknown type FOO; write a type without a name here as TYPEnnn \
             with \\# RDATA (RFC 3597 §5), e.g. TYPE65280 \\# 2 abcd",
        ),
        (
            "missing.zone",
            "missing.zone: cannot read: No such file or directory (os error 2)",
        ),
        (
            "include.zone",
            "include.zone:5: $INCLUDE nothere.inc: cannot read: No such file or directory (os error 2)",
        ),
    ];
    for (file, want) in cases {
        let out = loadzone(d, "z.db", "example.org", file);
        assert_eq!(out.status.code(), Some(1), "{file}: {}", stderr(&out));
        assert_eq!(stdout(&out), "", "{file}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{file}: {err:?}");
        let line = err.trim_end();
        let want = format!("loadzone: {want}");
        if want.ends_with(": ") {
            assert!(line.starts_with(&want), "{file}: {line:?}");
        } else {
            assert_eq!(line, want, "{file}");
        }
        assert_eq!(snapshot(&d.join("z.db")), before, "{file} changed the DB");
    }
}

#[test]
fn db_errors_name_the_file() {
    let dir = setup();
    let d = dir.path();
    std::fs::write(
        d.join("notdb"),
        "this is not sqlite, just long enough text\n",
    )
    .expect("write");
    let out = loadzone(d, "notdb", "example.org", "example.org.zone");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "loadzone: notdb is not an SQLite database (SQLITE_NOTADB), so not a zone DB; make one \
         in a new file with `loadzone --db FILE ORIGIN MASTERFILE` or `zone create --db FILE \
         ORIGIN`, or, if it was a zone DB, restore it from a backup (docs/ZONE-ADMIN.md, \
         Backups)\n"
    );
    let out = loadzone(d, "no/such/dir/z.db", "example.org", "example.org.zone");
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with("loadzone: cannot create zone DB no/such/dir/z.db: ")
            && err.lines().count() == 1,
        "{err:?}"
    );
    let out = loadzone(d, "z.db", "bad..origin", "example.org.zone");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("loadzone: bad origin \"bad..origin\": "),
        "{}",
        stderr(&out)
    );
    assert!(
        !d.join("z.db").exists(),
        "a failed load must not create the DB"
    );
}

#[test]
fn reload_replaces_only_that_zone() {
    let dir = setup();
    let d = dir.path();
    std::fs::write(d.join("v1.zone"), format!("{HEAD}old A 192.0.2.10\n")).expect("write");
    std::fs::write(d.join("v2.zone"), format!("{HEAD}new A 192.0.2.11\n")).expect("write");
    std::fs::write(d.join("other.zone"), format!("{HEAD}old A 198.51.100.1\n")).expect("write");
    for (origin, file) in [
        ("example.org", "v1.zone"),
        ("example.net", "other.zone"),
        ("example.org", "v2.zone"),
    ] {
        let out = loadzone(d, "z.db", origin, file);
        assert!(out.status.success(), "{file}: {}", stderr(&out));
    }
    let conn = Connection::open(d.join("z.db")).expect("open");
    let names: Vec<String> = conn
        .prepare("SELECT r.name FROM records r JOIN zones z ON z.id=r.zone_id ORDER BY r.name")
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert!(names.contains(&"new.example.org.".to_string()), "{names:?}");
    assert!(
        !names.contains(&"old.example.org.".to_string()),
        "{names:?}"
    );
    assert!(names.contains(&"old.example.net.".to_string()), "{names:?}");
    assert_eq!(names.len(), 8);
}

/// Replacing a zone journals the difference from the stored version when the
/// serial grew (IXFR from differences), in BIND 10's `diffs` layout: the old
/// SOA and deletions under the old serial, the new SOA and additions under
/// the new; a serial that did not grow clears the journal; `--keep-journal`
/// leaves it alone.
#[test]
fn a_replacement_journals_its_difference() {
    let dir = setup();
    let d = dir.path();
    let version = |serial: u32, body: &str| {
        format!(
            "$TTL 300\n@ SOA ns hm {serial} 3600 1800 1814400 300\n@ NS ns\nns A 192.0.2.1\n{body}"
        )
    };
    let write = |name: &str, text: String| std::fs::write(d.join(name), text).expect("write");
    write("v1.zone", version(1, "www A 192.0.2.10\nold TXT gone\n"));
    write("v2.zone", version(2, "www 60 A 192.0.2.10\nnew TXT here\n"));
    write("v2b.zone", version(2, "www 60 A 192.0.2.10\n"));
    let load = |file: &str, extra: &[&str]| {
        let out = Command::new(authd_tests::binary("loadzone"))
            .current_dir(d)
            .args(["--db", "z.db", "example.org", file])
            .args(extra)
            .output()
            .expect("run loadzone");
        assert!(out.status.success(), "{file}: {}", stderr(&out));
        stdout(&out)
    };
    let journal = || -> Vec<(i64, i64, String, String, i64, String)> {
        let conn = Connection::open(d.join("z.db")).expect("open");
        conn.prepare("SELECT version, operation, name, rrtype, ttl, rdata FROM diffs ORDER BY id")
            .expect("prepare")
            .query_map([], |r| r.try_into())
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows")
    };
    assert_eq!(
        load("v1.zone", &[]).lines().count(),
        1,
        "a new zone: no journal line"
    );
    let out = load("v2.zone", &[]);
    assert_eq!(
        out.lines().nth(1),
        Some("journaled the difference from serial 1 to 2 (6 RRs) for IXFR"),
        "{out}"
    );
    let mut rows = journal();
    // Within a part the order is the comparison's: sort the RRs between SOAs.
    rows[1..3].sort();
    rows[4..6].sort();
    let soa = |n: i64| {
        (
            n,
            if n == 1 { 1 } else { 0 },
            "example.org.".to_string(),
            "SOA".to_string(),
            300,
            format!("ns.example.org. hm.example.org. {n} 3600 1800 1814400 300"),
        )
    };
    let rr = |v: i64, op: i64, name: &str, t: &str, ttl: i64, rdata: &str| {
        (
            v,
            op,
            name.to_string(),
            t.to_string(),
            ttl,
            rdata.to_string(),
        )
    };
    assert_eq!(
        rows,
        [
            soa(1),
            rr(1, 1, "old.example.org.", "TXT", 300, "\"gone\""),
            rr(1, 1, "www.example.org.", "A", 300, "192.0.2.10"),
            soa(2),
            rr(2, 0, "new.example.org.", "TXT", 300, "\"here\""),
            rr(2, 0, "www.example.org.", "A", 60, "192.0.2.10"),
        ]
    );
    // The same serial again, other content: no difference can chain on.
    let out = load("v2b.zone", &[]);
    assert_eq!(
        out.lines().nth(1),
        Some(
            "serial 2 did not grow past the stored one: journal cleared; secondaries will transfer the whole zone"
        ),
        "{out}"
    );
    assert_eq!(journal(), []);
    // --keep-journal: untouched, as b10-loadzone did.
    load("v1.zone", &[]);
    load("v2.zone", &[]);
    assert_eq!(journal().len(), 6);
    let out = load("v2b.zone", &["--keep-journal"]);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert_eq!(journal().len(), 6);
}

/// The real root zone through the binary (timing is printed, not asserted: a
/// debug build is several times slower than release).
#[test]
fn loads_the_root_zone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = data("root.zone");
    let out = loadzone(
        dir.path(),
        "root.db",
        ".",
        root.to_str().expect("utf-8 path"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let line = stdout(&out);
    assert!(
        line.starts_with("loaded 21591 RRs for . into root.db in "),
        "{line}"
    );
    eprintln!("{line}");
}

/// When loadzone is done, the DB's write-ahead log is folded into the main
/// file, even while another process holds the DB open (as authd does, so
/// SQLite's own checkpoint at the last close never comes): a plain copy of
/// the quiet DB holds the zone.
#[test]
fn a_plain_copy_after_loadzone_is_whole() {
    let dir = setup();
    let out = loadzone(dir.path(), "z.db", "example.org", "example.org.zone");
    assert!(out.status.success(), "{}", stderr(&out));
    // A reader like authd, open across the next load.
    let reader = Connection::open(dir.path().join("z.db")).expect("open");
    let mode: String = reader
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("mode");
    assert_eq!(mode, "wal");
    let file = dir.path().join("more.zone");
    std::fs::write(&file, format!("{HEAD}www A 192.0.2.80\n")).expect("zone");
    let out = loadzone(dir.path(), "z.db", "example.net", "more.zone");
    assert!(out.status.success(), "{}", stderr(&out));
    let wal = dir.path().join("z.db-wal");
    assert_eq!(
        std::fs::metadata(&wal).map_or(0, |m| m.len()),
        0,
        "the log is folded in"
    );
    std::fs::copy(dir.path().join("z.db"), dir.path().join("copy.db")).expect("cp");
    let rows: i64 = Connection::open(dir.path().join("copy.db"))
        .expect("open copy")
        .query_row("SELECT count(*) FROM records", [], |r| r.get(0))
        .expect("count");
    assert_eq!(rows, 3 + 4);
    drop(reader);
}
