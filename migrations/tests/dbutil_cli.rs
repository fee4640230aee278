//! The `dbutil` binary: b10-dbutil's exit codes and one-line error messages.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use common::{ALL_FILES, copy_to_temp};

fn dbutil(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dbutil"))
        .args(args)
        .output()
        .expect("run dbutil")
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exit code")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn run_on(flag: &str, path: &Path) -> Output {
    dbutil(&[flag, path.to_str().expect("utf-8 path")])
}

#[test]
fn check_exit_codes() {
    for stem in ALL_FILES {
        let want = match stem {
            "v2_2" => 0,
            "old_v1" | "new_v1" | "empty_v1" | "invalid_v1" | "v2_0" | "v2_1" => 1,
            "newschema" | "new_minor_schema" => 2,
            "no_schema" | "empty_schema" | "empty_version" | "corrupt" | "too_many_version" => 4,
            other => panic!("unexpected {other}"),
        };
        let (_dir, path) = copy_to_temp(stem);
        let before = fs::read(&path).expect("read");
        let out = run_on("--check", &path);
        assert_eq!(code(&out), want, "{stem}: {}", stderr(&out));
        if want == 0 {
            assert!(stderr(&out).is_empty());
        } else {
            let err = stderr(&out);
            assert_eq!(err.lines().count(), 1, "{stem}: {err}");
            assert!(err.contains(&path.display().to_string()), "{stem}: {err}");
        }
        assert_eq!(
            fs::read(&path).expect("read"),
            before,
            "{stem} changed by --check"
        );
    }
}

#[test]
fn check_missing_and_not_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.sqlite3");
    let out = run_on("--check", &missing);
    assert_eq!(code(&out), 4);
    assert!(stderr(&out).contains("does not exist"));
    let text = dir.path().join("text.sqlite3");
    fs::write(&text, "This is not an sqlite3 database\n").expect("write");
    assert_eq!(code(&run_on("--check", &text)), 4);
    assert_eq!(code(&run_on("--upgrade", &text)), 4);
    assert_eq!(
        fs::read_dir(dir.path()).expect("read_dir").count(),
        1,
        "no backup expected"
    );
}

#[test]
fn upgrade_exit_codes() {
    for (stem, want) in [
        ("old_v1", 0),
        ("new_v1", 0),
        ("v2_0", 0),
        ("v2_1", 0),
        ("v2_2", 0),
        ("invalid_v1", 5),
        ("newschema", 2),
        ("new_minor_schema", 2),
        ("no_schema", 4),
        ("corrupt", 4),
        ("empty_version", 4),
        ("too_many_version", 4),
    ] {
        let (_dir, path) = copy_to_temp(stem);
        let before = fs::read(&path).expect("read");
        let out = dbutil(&["--upgrade", "--noconfirm", path.to_str().expect("utf-8")]);
        assert_eq!(code(&out), want, "{stem}: {}", stderr(&out));
        if want == 0 {
            // Afterwards the file checks as current.
            assert_eq!(code(&run_on("--check", &path)), 0, "{stem}");
        } else {
            assert_eq!(stderr(&out).lines().count(), 1, "{stem}");
            assert_eq!(fs::read(&path).expect("read"), before, "{stem} changed");
        }
    }
}

#[test]
fn upgrade_missing_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.sqlite3");
    assert_eq!(code(&run_on("--upgrade", &missing)), 4);
    assert!(!missing.exists());
}

#[test]
fn command_errors() {
    let (_dir, path) = copy_to_temp("old_v1");
    let p = path.to_str().expect("utf-8");
    for args in [
        vec![],
        vec![p],
        vec!["--upgrade", "--check", p],
        vec!["--noconfirm", "--check", p],
        vec!["--check"],
        vec!["--upgrade", "--noconfirm"],
        vec!["--check", p, "extra"],
        vec!["--upgrade", p, "extra"],
        vec!["--frobnicate", p],
    ] {
        let out = dbutil(&args);
        assert_eq!(code(&out), 3, "{args:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out).lines().count(),
            1,
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // Nothing was upgraded.
    assert_eq!(
        fs::read(&path).expect("read"),
        fs::read(common::data("old_v1")).expect("read")
    );
}

#[test]
fn help_exits_zero() {
    let out = dbutil(&["--help"]);
    assert_eq!(code(&out), 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("--upgrade"));
}

/// A zone DB with a page overwritten: the schema still reads, but
/// `dbutil --check` runs SQLite's integrity_check and says it is corrupt
/// (exit 4) in one line: how many problems, in which tables and indexes,
/// the first; a truncated one is named corrupt too, a random file not an
/// SQLite database.
#[test]
fn check_finds_corruption() {
    let (dir, good) = copy_to_temp("v2_2");
    let bytes = fs::read(&good).expect("read");
    assert!(bytes.len() > 3 * 4096, "{} bytes", bytes.len());
    let mangled = dir.path().join("mangled.sqlite3");
    let mut m = bytes.clone();
    // The second page (a table's b-tree page): garbage over its header.
    let page = usize::from(u16::from_be_bytes([bytes[16], bytes[17]]));
    for b in &mut m[page..page + 64] {
        *b = 0x5a;
    }
    fs::write(&mangled, &m).expect("write");
    let out = run_on("--check", &mangled);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(stderr(&out).contains("is corrupt ("), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("restore it from a backup"),
        "{}",
        stderr(&out)
    );

    let truncated = dir.path().join("truncated.sqlite3");
    fs::write(&truncated, &bytes[..bytes.len() / 2]).expect("write");
    let out = run_on("--check", &truncated);
    assert_eq!(code(&out), 4);
    assert!(stderr(&out).contains("is corrupt ("), "{}", stderr(&out));

    let random = dir.path().join("random.sqlite3");
    fs::write(
        &random,
        (0..8192u32)
            .map(|i| (i * 7919 % 251) as u8)
            .collect::<Vec<_>>(),
    )
    .expect("write");
    let out = run_on("--check", &random);
    assert_eq!(code(&out), 4);
    assert_eq!(
        stderr(&out),
        format!(
            "dbutil: {} is not an SQLite database (SQLITE_NOTADB), so not a zone DB; make one in \
             a new file with `loadzone --db FILE ORIGIN MASTERFILE` or `zone create --db FILE \
             ORIGIN`, or, if it was a zone DB, restore it from a backup (docs/ZONE-ADMIN.md, \
             Backups)\n",
            random.display()
        )
    );

    // The records table's root page: its cells point past the page. The
    // schema reads; integrity_check reports the table and every index
    // missing the rows, summed up in one line.
    let conn = rusqlite::Connection::open(&good).expect("open");
    let root: u32 = conn
        .query_row(
            "SELECT rootpage FROM sqlite_master WHERE name = 'records'",
            [],
            |r| r.get(0),
        )
        .expect("rootpage");
    conn.execute_batch(
        "INSERT INTO zones (name, rdclass) VALUES ('example.org.', 'IN');
         INSERT INTO records (zone_id, name, rname, ttl, rdtype, rdata)
           VALUES (1, 'example.org.', 'org.example.', 300, 'NS', 'ns.example.org.'),
                  (1, 'ns.example.org.', 'org.example.ns.', 300, 'A', '192.0.2.1');",
    )
    .expect("rows");
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
    drop(conn);
    let bytes = fs::read(&good).expect("read");
    let page = usize::from(u16::from_be_bytes([bytes[16], bytes[17]]));
    let mut m = bytes.clone();
    // The cell pointer array after the 8-byte leaf header: out of range.
    let at = (root as usize - 1) * page + 8;
    for b in &mut m[at..at + 4] {
        *b = 0x33;
    }
    let records = dir.path().join("records.sqlite3");
    fs::write(&records, &m).expect("write");
    let out = run_on("--check", &records);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "dbutil: zone DB {} is corrupt (integrity_check found ",
            records.display()
        )) && err.contains(" problems in table records, index records_")
            && err.contains("; the first: Tree ")
            && err.ends_with("); restore it from a backup (docs/ZONE-ADMIN.md, Backups)\n"),
        "{err}"
    );
}

/// `dbutil --backup DB DEST` copies a live WAL-mode DB, its newest commit
/// included (still in the log, not yet in the main file), and refuses to
/// overwrite an existing DEST.
#[test]
fn backup_copies_a_live_db_whole() {
    let (dir, path) = copy_to_temp("v2_2");
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))
        .expect("wal");
    conn.execute_batch("PRAGMA wal_autocheckpoint=0; INSERT INTO zones (name, rdclass) VALUES ('backup-test.', 'IN');")
        .expect("insert");
    // The commit is in the -wal file: a copy of the main file alone lacks it.
    let copied = dir.path().join("copied.sqlite3");
    fs::copy(&path, &copied).expect("cp");
    let count = |p: &Path| -> i64 {
        rusqlite::Connection::open(p)
            .expect("open copy")
            .query_row(
                "SELECT count(*) FROM zones WHERE name = 'backup-test.'",
                [],
                |r| r.get(0),
            )
            .expect("count")
    };
    assert_eq!(count(&copied), 0, "cp misses the log");
    let dest = dir.path().join("backup.sqlite3");
    let out = dbutil(&[
        "--backup",
        path.to_str().expect("utf-8"),
        dest.to_str().expect("utf-8"),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(count(&dest), 1, "the backup has the newest commit");
    let out = dbutil(&[
        "--backup",
        path.to_str().expect("utf-8"),
        dest.to_str().expect("utf-8"),
    ]);
    assert_eq!(code(&out), 3);
    assert!(stderr(&out).contains("exists"), "{}", stderr(&out));
    // Without DEST: a usage error, nothing written.
    let out = dbutil(&["--backup", path.to_str().expect("utf-8")]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(stderr(&out).contains("usage"), "{}", stderr(&out));
    // DEST without --backup: a usage error too.
    let out = dbutil(&["--check", path.to_str().expect("utf-8"), "x.sqlite3"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    drop(conn);
}
