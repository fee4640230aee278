//! `open_or_create`: fresh files get exactly the 2.2 schema in WAL mode; existing files are
//! checked like for serving.

mod common;

use std::fs;

use authd_migrations::{CREATE_LATEST_SQL, Error, LATEST, SchemaVersion, detect, open_or_create};
use common::{copy_to_temp, data, inspect, normalized_schema, schema_names};

#[test]
fn fresh_db_has_exactly_the_2_2_schema_in_wal_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("new.sqlite3");
    let conn = open_or_create(&path).expect("create");
    assert_eq!(detect(&conn).expect("detect"), LATEST);
    assert!(!conn.is_readonly("main").expect("is_readonly"));
    drop(conn);

    let fresh = inspect(&path);
    let reference = inspect(&data("v2_2"));
    assert_eq!(schema_names(&fresh), schema_names(&reference));
    assert_eq!(normalized_schema(&fresh), normalized_schema(&reference));
    let expected_indexes = [
        "zones_byname",
        "records_byname",
        "records_byrname",
        "records_bytype_and_rname",
        "records_byrname_and_rdtype",
        "nsec3_byhash",
        "nsec3_byhash_and_rdtype",
    ];
    let indexes: Vec<String> = schema_names(&fresh)
        .into_iter()
        .filter(|(t, _)| t == "index")
        .map(|(_, n)| n)
        .collect();
    let mut want: Vec<String> = expected_indexes.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(indexes, want);
    // No sqlite_* extras either (v2_2.sqlite3 has sqlite_stat1 from ANALYZE; we do not).
    let all: i64 = fresh
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .expect("count");
    assert_eq!(all, 5 + 7);

    let mode: String = fresh
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("journal_mode");
    assert_eq!(mode, "wal");
    let rows: Vec<(i64, i64)> = fresh
        .prepare("SELECT version, minor FROM schema_version")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(rows, vec![(2, 2)]);
}

#[test]
fn reopening_keeps_data_and_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("zones.sqlite3");
    {
        let conn = open_or_create(&path).expect("create");
        conn.execute(
            "INSERT INTO zones (name, rdclass) VALUES ('example.org.', 'IN')",
            [],
        )
        .expect("insert");
    }
    let conn = open_or_create(&path).expect("reopen");
    let n: i64 = conn
        .query_row("SELECT count(*) FROM zones", [], |r| r.get(0))
        .expect("count");
    assert_eq!(n, 1);
    let versions: i64 = conn
        .query_row("SELECT count(*) FROM schema_version", [], |r| r.get(0))
        .expect("count");
    assert_eq!(versions, 1);
}

#[test]
fn zero_length_file_is_initialised() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("empty.sqlite3");
    fs::write(&path, "").expect("write");
    let conn = open_or_create(&path).expect("create");
    assert_eq!(detect(&conn).expect("detect"), LATEST);
}

#[test]
fn existing_files_get_the_serving_checks() {
    for (stem, want) in [
        ("v2_0", SchemaVersion { major: 2, minor: 0 }),
        ("v2_1", SchemaVersion { major: 2, minor: 1 }),
        ("v2_2", SchemaVersion { major: 2, minor: 2 }),
        (
            "new_minor_schema",
            SchemaVersion {
                major: 2,
                minor: 100,
            },
        ),
    ] {
        let (_dir, path) = copy_to_temp(stem);
        let conn = open_or_create(&path).expect(stem);
        assert_eq!(detect(&conn).expect("detect"), want, "{stem}");
        assert!(!conn.is_readonly("main").expect("is_readonly"));
    }
    for stem in ["old_v1", "new_v1"] {
        let (_dir, path) = copy_to_temp(stem);
        let before = fs::read(&path).expect("read");
        assert!(
            matches!(open_or_create(&path), Err(Error::NeedsUpgrade { .. })),
            "{stem}"
        );
        assert_eq!(fs::read(&path).expect("read"), before, "{stem} changed");
    }
    let (_dir, path) = copy_to_temp("newschema");
    assert!(matches!(open_or_create(&path), Err(Error::TooNew { .. })));
    for stem in ["no_schema", "corrupt", "empty_version", "too_many_version"] {
        let (_dir, path) = copy_to_temp(stem);
        let before = fs::read(&path).expect("read");
        let err = open_or_create(&path).map(|_| ()).expect_err(stem);
        assert!(err.is_read_error(), "{stem}: {err:?}");
        assert_eq!(fs::read(&path).expect("read"), before, "{stem} changed");
    }
}

#[test]
fn create_sql_is_the_bind_ddl() {
    // Applying the embedded DDL in memory gives the same objects as BIND's v2_2.sqlite3.
    let conn = rusqlite::Connection::open_in_memory().expect("memory");
    conn.execute_batch(CREATE_LATEST_SQL).expect("ddl");
    assert_eq!(schema_names(&conn), schema_names(&inspect(&data("v2_2"))));
    assert_eq!(
        normalized_schema(&conn),
        normalized_schema(&inspect(&data("v2_2")))
    );
}
