//! `upgrade`: data preservation, resulting schema, backups, atomicity, refusals.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use authd_migrations::{
    Error, LATEST, SchemaVersion, UpgradeReport, check, open_for_serving, upgrade,
};
use common::{DATA_TABLES, copy_to_temp, data, dump, inspect, normalized_schema, schema_names};

type Dump = BTreeMap<&'static str, Option<Vec<Vec<Option<String>>>>>;

fn dump_all(path: &Path) -> Dump {
    let conn = inspect(path);
    DATA_TABLES.iter().map(|t| (*t, dump(&conn, t))).collect()
}

fn backup_path(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Upgrades `path` and checks everything the upgrade promises.
fn upgrade_and_verify(label: &str, path: &Path, from: SchemaVersion) {
    let original = fs::read(path).expect("read original");
    let before = dump_all(path);

    let report = upgrade(path).unwrap_or_else(|e| panic!("{label}: {e}"));
    let backup = backup_path(path, ".backup");
    assert_eq!(
        report,
        UpgradeReport {
            from,
            to: LATEST,
            backup: Some(backup.clone())
        },
        "{label}"
    );
    assert!(report.upgraded());

    // The backup is the original, byte for byte.
    assert_eq!(
        fs::read(&backup).expect("read backup"),
        original,
        "{label}: backup differs"
    );

    // Every row survived, in text form; a missing diffs table (old V1) became an empty one.
    let after = dump_all(path);
    for table in DATA_TABLES {
        let want = before[table].clone().unwrap_or_default();
        let have = after[table]
            .clone()
            .unwrap_or_else(|| panic!("{label}: {table} missing after upgrade"));
        assert_eq!(have.len(), want.len(), "{label}: {table} row count");
        assert_eq!(have, want, "{label}: {table} contents");
    }

    let conn = inspect(path);
    // Same tables and indexes as a fresh 2.2 DB (and as BIND's v2_2.sqlite3), with the same
    // definitions modulo whitespace and case.
    let reference = inspect(&data("v2_2"));
    assert_eq!(
        schema_names(&conn),
        schema_names(&reference),
        "{label}: schema names"
    );
    assert_eq!(
        normalized_schema(&conn),
        normalized_schema(&reference),
        "{label}: schema SQL"
    );
    let fresh_dir = tempfile::tempdir().expect("tempdir");
    let fresh_path = fresh_dir.path().join("fresh.sqlite3");
    drop(authd_migrations::open_or_create(&fresh_path).expect("fresh"));
    let fresh = inspect(&fresh_path);
    assert_eq!(
        schema_names(&conn),
        schema_names(&fresh),
        "{label}: vs fresh"
    );
    assert_eq!(
        normalized_schema(&conn),
        normalized_schema(&fresh),
        "{label}: vs fresh SQL"
    );

    // Exactly one version row, at LATEST; WAL mode; text columns hold text.
    let rows: Vec<(i64, i64)> = conn
        .prepare("SELECT version, minor FROM schema_version")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(rows, vec![(2, 2)], "{label}");
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("journal_mode");
    assert_eq!(mode, "wal", "{label}");
    let non_text: i64 = conn
        .query_row(
            "SELECT count(*) FROM records WHERE typeof(rdata) <> 'text' OR typeof(name) <> 'text'",
            [],
            |r| r.get(0),
        )
        .expect("typeof");
    assert_eq!(non_text, 0, "{label}: non-text values in TEXT columns");
    drop(conn);

    // And it serves.
    let (_conn, v) = open_for_serving(path).expect("serve after upgrade");
    assert_eq!(v, LATEST);
}

#[test]
fn upgrade_bind_files_as_shipped() {
    for (stem, from) in [
        ("old_v1", SchemaVersion { major: 1, minor: 0 }),
        ("new_v1", SchemaVersion { major: 1, minor: 0 }),
        ("empty_v1", SchemaVersion { major: 1, minor: 0 }),
        ("v2_0", SchemaVersion { major: 2, minor: 0 }),
        ("v2_1", SchemaVersion { major: 2, minor: 1 }),
    ] {
        let (_dir, path) = copy_to_temp(stem);
        upgrade_and_verify(stem, &path, from);
    }
}

#[test]
fn new_v1_keeps_its_1542_records() {
    let (_dir, path) = copy_to_temp("new_v1");
    upgrade(&path).expect("upgrade");
    let conn = inspect(&path);
    assert_eq!(common::count(&conn, "zones"), 1);
    assert_eq!(common::count(&conn, "records"), 1542);
    assert_eq!(common::count(&conn, "nsec3"), 1);
    assert_eq!(common::count(&conn, "diffs"), 1);
}

#[test]
fn upgrade_seeded_files() {
    // The shipped old_v1, v2_0 and v2_1 are empty; add rows first so that every table's
    // contents are really carried over (including numeric-looking text in STRING columns).
    for (stem, from) in [
        ("old_v1", SchemaVersion { major: 1, minor: 0 }),
        ("new_v1", SchemaVersion { major: 1, minor: 0 }),
        ("v2_0", SchemaVersion { major: 2, minor: 0 }),
        ("v2_1", SchemaVersion { major: 2, minor: 1 }),
    ] {
        let (_dir, path) = copy_to_temp(stem);
        common::seed(&path);
        upgrade_and_verify(&format!("seeded {stem}"), &path, from);
    }
}

#[test]
fn already_latest_is_a_no_op() {
    let (dir, path) = copy_to_temp("v2_2");
    let before = fs::read(&path).expect("read");
    let report = upgrade(&path).expect("upgrade");
    assert_eq!(
        report,
        UpgradeReport {
            from: LATEST,
            to: LATEST,
            backup: None
        }
    );
    assert!(!report.upgraded());
    assert_eq!(fs::read(&path).expect("read"), before);
    assert_eq!(
        fs::read_dir(dir.path()).expect("read_dir").count(),
        1,
        "no backup expected"
    );
}

#[test]
fn backup_names_are_not_reused() {
    let (_dir, path) = copy_to_temp("v2_0");
    fs::write(backup_path(&path, ".backup"), "taken").expect("write");
    fs::write(backup_path(&path, ".backup-1"), "taken too").expect("write");
    let original = fs::read(&path).expect("read");
    let report = upgrade(&path).expect("upgrade");
    let want = backup_path(&path, ".backup-2");
    assert_eq!(report.backup.as_deref(), Some(want.as_path()));
    assert_eq!(fs::read(&want).expect("read"), original);
    assert_eq!(
        fs::read(backup_path(&path, ".backup")).expect("read"),
        b"taken"
    );
    assert_eq!(
        fs::read(backup_path(&path, ".backup-1")).expect("read"),
        b"taken too"
    );
}

#[test]
fn failed_upgrade_leaves_the_original_unchanged() {
    // invalid_v1 has 1542 records but no nsec3 table: the 1.0 -> 2.0 step rebuilds zones and
    // records, then fails on nsec3. The whole transaction must roll back.
    let (_dir, path) = copy_to_temp("invalid_v1");
    let original = fs::read(&path).expect("read");
    let err = upgrade(&path).expect_err("must fail");
    let backup = backup_path(&path, ".backup");
    match &err {
        Error::Upgrade {
            path: p,
            from,
            to,
            backup: b,
            ..
        } => {
            assert_eq!(p, &path);
            assert_eq!(*from, SchemaVersion { major: 1, minor: 0 });
            assert_eq!(*to, SchemaVersion { major: 2, minor: 0 });
            assert_eq!(b.as_deref(), Some(backup.as_path()));
        }
        other => panic!("unexpected error {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("the file is unchanged"), "{msg}");
    assert!(!err.is_read_error());
    assert_eq!(fs::read(&path).expect("read"), original, "original changed");
    assert_eq!(fs::read(&backup).expect("read"), original, "backup differs");
    assert_eq!(
        check(&path).expect("check"),
        SchemaVersion { major: 1, minor: 0 }
    );
    // No half-renamed tables survived.
    let conn = inspect(&path);
    assert_eq!(
        schema_names(&conn),
        schema_names(&inspect(&data("invalid_v1")))
    );
}

#[test]
fn refusals_change_nothing() {
    for stem in [
        "newschema",
        "new_minor_schema",
        "no_schema",
        "empty_schema",
        "empty_version",
        "corrupt",
        "too_many_version",
    ] {
        let (dir, path) = copy_to_temp(stem);
        let original = fs::read(&path).expect("read");
        let err = upgrade(&path).expect_err(stem);
        match stem {
            "newschema" => assert!(
                matches!(err, Error::TooNew { found, .. } if found == SchemaVersion { major: 1000, minor: 0 }),
                "{err:?}"
            ),
            "new_minor_schema" => assert!(
                matches!(err, Error::NewerMinor { found, .. } if found == SchemaVersion { major: 2, minor: 100 }),
                "{err:?}"
            ),
            _ => assert!(err.is_read_error(), "{stem}: {err:?}"),
        }
        assert_eq!(err.path(), path);
        assert_eq!(fs::read(&path).expect("read"), original, "{stem} changed");
        assert_eq!(
            fs::read_dir(dir.path()).expect("read_dir").count(),
            1,
            "{stem}: backup or journal left behind"
        );
    }
}

#[test]
fn missing_file_is_not_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("absent.sqlite3");
    assert!(matches!(upgrade(&path), Err(Error::Missing { .. })));
    assert!(!path.exists());
}

#[test]
fn upgrade_twice() {
    let (_dir, path) = copy_to_temp("old_v1");
    upgrade(&path).expect("first");
    let report = upgrade(&path).expect("second");
    assert_eq!(report.backup, None);
    assert_eq!(report.from, LATEST);
}
