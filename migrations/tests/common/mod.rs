//! Helpers shared by the integration tests. Test data lives in `tests/data/` (see its README);
//! every test works on copies in a temporary directory.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use tempfile::TempDir;

/// Every dbutil test file plus the two datasrc version files.
pub const ALL_FILES: [&str; 14] = [
    "no_schema",
    "empty_schema",
    "empty_version",
    "old_v1",
    "new_v1",
    "empty_v1",
    "invalid_v1",
    "corrupt",
    "v2_0",
    "v2_1",
    "v2_2",
    "too_many_version",
    "newschema",
    "new_minor_schema",
];

/// Path of a file in `tests/data/`, by its stem (`"v2_2"` → `tests/data/v2_2.sqlite3`).
pub fn data(stem: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(format!("{stem}.sqlite3"))
}

/// Copies a data file into a new temporary directory; returns the directory (keep it alive)
/// and the copy's path.
pub fn copy_to_temp(stem: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(format!("{stem}.sqlite3"));
    fs::copy(data(stem), &path).expect("copy test data");
    (dir, path)
}

/// Opens a file read-only for inspection (independent of the crate under test).
pub fn inspect(path: &Path) -> Connection {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("open for inspection")
}

/// (type, name) of every table and index, without SQLite's own (`sqlite_*`) objects.
pub fn schema_names(conn: &Connection) -> BTreeSet<(String, String)> {
    let mut stmt = conn
        .prepare(
            "SELECT type, name FROM sqlite_master \
             WHERE type IN ('table', 'index') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
        )
        .expect("prepare");
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

/// name → SQL text with whitespace removed and lowercased (as BIND's dbutil test compares
/// schemas), without SQLite's own objects.
pub fn normalized_schema(conn: &Connection) -> BTreeMap<String, String> {
    let mut stmt = conn
        .prepare(
            "SELECT name, sql FROM sqlite_master \
             WHERE type IN ('table', 'index') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
        )
        .expect("prepare");
    stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .expect("query")
        .map(|row| {
            let (name, sql) = row.expect("row");
            let sql: String = sql
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect::<String>()
                .to_lowercase();
            (name, sql)
        })
        .collect()
}

/// The four data tables a zone DB has.
pub const DATA_TABLES: [&str; 4] = ["zones", "records", "nsec3", "diffs"];

/// Every row of `table` ordered by id, each column as text (NULL stays None). V1 files store
/// STRING columns with NUMERIC affinity, so values are compared in their text form.
pub fn dump(conn: &Connection, table: &str) -> Option<Vec<Vec<Option<String>>>> {
    let exists: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [table],
            |r| r.get(0),
        )
        .expect("sqlite_master");
    if exists == 0 {
        return None;
    }
    let stmt = conn
        .prepare(&format!("SELECT * FROM {table} ORDER BY id"))
        .expect("prepare");
    let n = stmt.column_count();
    let columns: Vec<String> = stmt.column_names().map(|c| c.to_string()).collect();
    drop(stmt);
    let select = columns
        .iter()
        .map(|c| format!("CAST({c} AS TEXT)"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut stmt = conn
        .prepare(&format!("SELECT {select} FROM {table} ORDER BY id"))
        .expect("prepare");
    let rows = stmt
        .query_map([], |r| {
            (0..n).map(|i| r.get::<_, Option<String>>(i)).collect()
        })
        .expect("query")
        .collect::<Result<Vec<_>, _>>()
        .expect("rows");
    Some(rows)
}

/// Row count of a table.
pub fn count(conn: &Connection, table: &str) -> i64 {
    conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .expect("count")
}

/// Adds rows to every data table a (writable) zone DB has: numeric-looking text, NULL and
/// non-NULL sigtype, an uppercase NSEC3 hash, serials at the top of the 32-bit range.
pub fn seed(path: &Path) {
    let conn = Connection::open(path).expect("open for seeding");
    conn.execute_batch(
        "INSERT INTO zones (id, name, rdclass, dnssec) VALUES (7, 'example.org.', 'IN', 0);
         INSERT INTO zones (id, name, rdclass, dnssec) VALUES (8, '.', 'CH', 0);
         INSERT INTO records (zone_id, name, rname, ttl, rdtype, sigtype, rdata) VALUES
           (7, 'example.org.', 'org.example.', 3600, 'SOA', NULL,
            'ns1.example.org. admin.example.org. 4294967295 3600 1800 2419200 7200'),
           (7, 'www.example.org.', 'org.example.www.', 300, 'A', NULL, '192.0.2.1'),
           (7, 'www.example.org.', 'org.example.www.', 300, 'RRSIG', 'A',
            'A 8 3 300 20300101000000 20000101000000 12345 example.org. FAKEFAKEFAKE'),
           (7, '1234.example.org.', 'org.example.1234.', 60, 'TXT', NULL, '1234'),
           (7, 'x.example.org.', 'org.example.x.', 60, 'TYPE65534', NULL, '\\# 5 0846480001'),
           (8, 'version.bind.', 'bind.version.', 0, 'TXT', NULL, '\"authd\"');
         INSERT INTO nsec3 (zone_id, hash, owner, ttl, rdtype, rdata) VALUES
           (7, '1BB7SO0452U1QHL98UISNDD9218GELR5', '1BB7SO0452U1QHL98UISNDD9218GELR5.example.org.',
            3600, 'NSEC3', '1 0 12 AABBCCDD 2T7B4G4VSA5SMI47K61MV5BV1A22BOJR A RRSIG');",
    )
    .expect("seed zones/records/nsec3");
    if dump(&conn, "diffs").is_some() {
        conn.execute_batch(
            "INSERT INTO diffs (zone_id, version, operation, name, rrtype, ttl, rdata) VALUES
               (7, 4294967295, 1, 'example.org.', 'SOA', 3600,
                'ns1.example.org. admin.example.org. 4294967295 3600 1800 2419200 7200'),
               (7, 0, 0, 'example.org.', 'SOA', 3600,
                'ns1.example.org. admin.example.org. 0 3600 1800 2419200 7200'),
               (7, 0, 0, '007.example.org.', 'A', 300, '192.0.2.7');",
        )
        .expect("seed diffs");
    }
}
