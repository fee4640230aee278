//! Writing zones into BIND 10 sqlite3 zone DBs (schema 2.x), as `b10-loadzone` did.
//!
//! [`load_zone`] replaces one zone's content inside a single transaction, the way
//! BIND 10's updater did with `replace=true` (research/bind10.md §a.6): the zone row
//! is created if absent, the zone's `records` and `nsec3` rows are deleted, every
//! record is inserted with prepared statements, and the transaction commits. Any
//! error rolls the transaction back, so readers keep seeing the previous content
//! until the new one is complete. The `diffs` table (the IXFR journal) is never
//! touched.
//!
//! Stored conventions (research/bind10.md §a.3): `name` is the absolute owner in
//! presentation form with its loaded case; `rname` is [`Name::reversed_text`];
//! `rdtype` is the type mnemonic (`TYPEnnn` for unknown types, RFC 3597 §5);
//! `sigtype` is the covered type for RRSIG rows and NULL otherwise; `rdata` is
//! [`Rdata::to_text`](crate::Rdata::to_text). NSEC3 RRs (RFC 5155) and the RRSIGs covering them go to
//! the `nsec3` table, keyed by the first label of the owner (the hash).

use std::path::PathBuf;

use rusqlite::{Connection, TransactionBehavior, params};

use crate::name::Name;
use crate::rr::{RType, RrError};
use crate::zonefile::{SourcedRecord, ZoneFileError, check_zone};

/// How many records are written between two calls of the progress callback.
pub const PROGRESS_EVERY: usize = 1000;

/// Why a zone could not be loaded. In every case the DB is left as it was before
/// the call (the transaction is rolled back).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The records failed [`check_zone`] (name outside the zone, no SOA at the
    /// apex, CNAME beside other data, ...). Shown as `FILE:LINE: message`, or
    /// `FILE: message` when the problem concerns the whole zone (line 0).
    #[error("{}", located(.0))]
    Zone(#[from] ZoneFileError),
    /// A record's RDATA could not be turned into presentation text.
    #[error("{}:{line}: {source}", file.display())]
    Rdata {
        /// The master file the record came from.
        file: PathBuf,
        /// 1-based line of the record.
        line: usize,
        /// What went wrong.
        source: RrError,
    },
    /// An SQLite statement failed (locked DB, full disk, not a 2.x schema, ...).
    #[error("zone DB {}: {action} failed: {source}", path.display())]
    Sqlite {
        /// The zone DB file (`:memory:` for an in-memory DB).
        path: PathBuf,
        /// What was being done, e.g. "inserting records".
        action: &'static str,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// The zone is under a signing policy and cannot be signed (see
    /// [`crate::write::WriteError::Signing`]); nothing is written.
    #[error("{0}")]
    Signing(String),
}

/// Formats a [`ZoneFileError`] as `FILE:LINE: message`, leaving out line 0 (an
/// error about the whole zone or file, e.g. "no SOA at the zone apex").
pub fn located(e: &ZoneFileError) -> String {
    if e.line == 0 {
        format!("{}: {}", e.file.display(), e.message)
    } else {
        format!("{}:{}: {}", e.file.display(), e.line, e.message)
    }
}

/// What [`load_zone`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadReport {
    /// `zones.id` of the zone.
    pub zone_id: i64,
    /// True when the `zones` row did not exist and was created.
    pub created: bool,
    /// Rows written to `records`.
    pub records: usize,
    /// Rows written to `nsec3` (NSEC3 RRs and the RRSIGs covering them).
    pub nsec3: usize,
    /// Rows of the previous content deleted from `records` and `nsec3`.
    pub replaced: usize,
    /// What became of the zone's `diffs` journal.
    pub journal: JournalOutcome,
}

/// What a replacement did to the zone's `diffs` journal
/// ([`crate::write::JournalPolicy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalOutcome {
    /// Left as it was.
    Untouched,
    /// Deleted (an AXFR in; or a difference asked for but the serial did
    /// not grow, so no difference could chain to the journal).
    Cleared,
    /// The difference from the stored version appended: serials and the
    /// journal rows written (both SOAs included).
    Journaled {
        /// The serial before.
        from: u32,
        /// The serial after.
        to: u32,
        /// `diffs` rows written.
        rows: usize,
    },
}

impl LoadReport {
    /// Total RRs written (`records` plus `nsec3` rows).
    pub fn total(&self) -> usize {
        self.records + self.nsec3
    }
}

/// Replaces the content of zone `origin` (class IN) in the zone DB behind `conn`
/// with `records`, in one transaction.
///
/// [`check_zone`] runs first, inside this function, so callers need not (and a
/// zone that fails it never reaches the DB). The transaction is taken with
/// `BEGIN IMMEDIATE`, so a concurrent writer makes this fail early (after the
/// connection's busy timeout) rather than at commit. Readers on other
/// connections see the old content until the commit. `progress(done, total)` is
/// called with the number of records written so far every [`PROGRESS_EVERY`]
/// records and once at the end.
///
/// The DB must already have the 2.x schema (see
/// `authd_migrations::open_or_create`). The `diffs` table is not touched.
///
/// Errors: [`LoadError::Zone`] when the check fails, [`LoadError::Rdata`] for
/// RDATA that cannot be rendered as text, [`LoadError::Sqlite`] for any SQL
/// failure. In every case the transaction is rolled back and the zone's previous
/// content stays as it was.
pub fn load_zone(
    conn: &mut Connection,
    origin: &Name,
    records: &[SourcedRecord],
    progress: impl FnMut(usize, usize),
) -> Result<LoadReport, LoadError> {
    load_zone_with(conn, origin, records, false, progress)
}

/// [`load_zone`], also deleting the zone's `diffs` journal in the same
/// transaction when `clear_journal` (an incoming AXFR: the journal no longer
/// leads to the new content).
///
/// Errors: as [`load_zone`].
pub(crate) fn load_zone_with(
    conn: &mut Connection,
    origin: &Name,
    records: &[SourcedRecord],
    clear_journal: bool,
    mut progress: impl FnMut(usize, usize),
) -> Result<LoadReport, LoadError> {
    check_zone(origin, records)?;
    let err = SqlError::of(conn);
    let sql = |action| err.at(action);
    // Dropping `tx` without commit (any `?` below) rolls back.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql("starting the transaction"))?;
    let signed = crate::sqlite_signing::signed_records(&tx, origin, records)
        .map_err(|e| LoadError::Signing(e.to_string()))?;
    let records = signed.as_deref().unwrap_or(records);
    let report = load_zone_in(&tx, origin, records, clear_journal, &mut progress)?;
    if signed.is_some() {
        crate::sqlite_signing::clear_log(&tx, report.zone_id)
            .map_err(|e| LoadError::Signing(e.to_string()))?;
    }
    tx.commit().map_err(sql("committing"))?;
    progress(records.len(), records.len());
    Ok(report)
}

/// Names the DB of SQL failures on a connection: `sql.at("action")` maps a
/// rusqlite error to [`LoadError::Sqlite`] naming the file (the path is
/// copied only when an error is made, not per statement).
pub(crate) struct SqlError(PathBuf);

impl SqlError {
    /// For the DB behind `conn` (`:memory:` when it has no file).
    pub(crate) fn of(conn: &Connection) -> SqlError {
        SqlError(PathBuf::from(match conn.path() {
            Some(p) if !p.is_empty() => p,
            _ => ":memory:",
        }))
    }

    /// The mapping of a failure while doing `action`.
    pub(crate) fn at(&self, action: &'static str) -> impl Fn(rusqlite::Error) -> LoadError + '_ {
        move |source| LoadError::Sqlite {
            path: self.0.clone(),
            action,
            source,
        }
    }
}

/// The work of [`load_zone_with`] inside the caller's transaction `tx`
/// (`records` checked already; nothing committed, the final progress call
/// left to the caller), for writers that do more in the same transaction.
///
/// Errors: as [`load_zone`].
pub(crate) fn load_zone_in(
    tx: &rusqlite::Transaction<'_>,
    origin: &Name,
    records: &[SourcedRecord],
    clear_journal: bool,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<LoadReport, LoadError> {
    let err = SqlError::of(tx);
    let sql = |action| err.at(action);
    let origin_text = origin.to_string();
    let existing: Option<i64> = {
        let mut stmt = tx
            .prepare("SELECT id FROM zones WHERE name=?1 AND rdclass='IN' ORDER BY id LIMIT 1")
            .map_err(sql("looking up the zone"))?;
        let mut rows = stmt
            .query([&origin_text])
            .map_err(sql("looking up the zone"))?;
        match rows.next().map_err(sql("looking up the zone"))? {
            Some(row) => Some(row.get(0).map_err(sql("looking up the zone"))?),
            None => None,
        }
    };
    let (zone_id, created) = match existing {
        Some(id) => (id, false),
        None => {
            tx.execute(
                "INSERT INTO zones (name, rdclass) VALUES (?1,'IN')",
                [&origin_text],
            )
            .map_err(sql("creating the zone"))?;
            (tx.last_insert_rowid(), true)
        }
    };
    if clear_journal {
        tx.execute("DELETE FROM diffs WHERE zone_id=?1", [zone_id])
            .map_err(sql("clearing the journal"))?;
    }
    let mut replaced = tx
        .execute("DELETE FROM records WHERE zone_id=?1", [zone_id])
        .map_err(sql("deleting the old records"))?;
    replaced += tx
        .execute("DELETE FROM nsec3 WHERE zone_id=?1", [zone_id])
        .map_err(sql("deleting the old NSEC3 records"))?;

    let total = records.len();
    let (mut n_records, mut n_nsec3) = (0usize, 0usize);
    {
        let mut ins_record = tx
            .prepare(
                "INSERT INTO records (zone_id, name, rname, ttl, rdtype, sigtype, rdata) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(sql("preparing the records insert"))?;
        let mut ins_nsec3 = tx
            .prepare(
                "INSERT INTO nsec3 (zone_id, hash, owner, ttl, rdtype, rdata) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .map_err(sql("preparing the nsec3 insert"))?;
        for (i, sr) in records.iter().enumerate() {
            let rec = &sr.record;
            let rdata = rec
                .rdata
                .to_text(rec.rtype)
                .map_err(|source| LoadError::Rdata {
                    file: sr.file.as_ref().clone(),
                    line: sr.line,
                    source,
                })?;
            let covered = if rec.rtype == RType::RRSIG {
                rec.rdata.rrsig_type_covered()
            } else {
                None
            };
            let owner = rec.owner.to_string();
            let rdtype = rec.rtype.to_string();
            if rec.rtype == RType::NSEC3 || covered == Some(RType::NSEC3) {
                ins_nsec3
                    .execute(params![
                        zone_id,
                        first_label(&rec.owner),
                        owner,
                        rec.ttl,
                        rdtype,
                        rdata
                    ])
                    .map_err(sql("inserting NSEC3 records"))?;
                n_nsec3 += 1;
            } else {
                ins_record
                    .execute(params![
                        zone_id,
                        owner,
                        rec.owner.reversed_text(),
                        rec.ttl,
                        rdtype,
                        covered.map(|t| t.to_string()),
                        rdata
                    ])
                    .map_err(sql("inserting records"))?;
                n_records += 1;
            }
            if (i + 1) % PROGRESS_EVERY == 0 {
                progress(i + 1, total);
            }
        }
    }
    Ok(LoadReport {
        zone_id,
        created,
        records: n_records,
        nsec3: n_nsec3,
        replaced,
        journal: if clear_journal {
            JournalOutcome::Cleared
        } else {
            JournalOutcome::Untouched
        },
    })
}

/// The leftmost label of `name` in presentation form (the NSEC3 hash of an NSEC3
/// owner, RFC 5155 §3), or `.` for the root.
pub(crate) fn first_label(name: &Name) -> String {
    match name.labels().next() {
        Some(label) => {
            let mut wire = Vec::with_capacity(label.len() + 2);
            wire.push(label.len() as u8);
            wire.extend_from_slice(label);
            wire.push(0);
            match Name::from_wire(&wire) {
                Ok(n) => {
                    let mut text = n.to_string();
                    text.pop(); // the trailing dot
                    text
                }
                // Cannot happen: a label of a valid name is a valid one-label name.
                Err(_) => String::from_utf8_lossy(label).into_owned(),
            }
        }
        None => ".".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    use crate::zonefile::parse_master_text;

    fn db() -> Connection {
        let conn = Connection::open_in_memory().expect("open");
        conn.execute_batch(authd_migrations::CREATE_LATEST_SQL)
            .expect("schema");
        conn
    }

    fn origin() -> Name {
        "Example.org.".parse().expect("name")
    }

    const ZONE: &str = "$TTL 300\n\
        @ IN SOA ns hostmaster 1 3600 1800 1814400 3600\n\
        @ NS ns\n\
        ns A 192.0.2.1\n\
        Mixed A 192.0.2.2\n\
        Mixed RRSIG A 8 3 300 20201020000000 20201010000000 1 example.org. AAAA\n\
        0P9MHAVEQVM6T7VBL5LOP2U3T2RP3TOM NSEC3 1 1 12 aabbccdd 2T7B4G4VSA5SMI47K61MV5BV1A22BOJR A RRSIG\n\
        0P9MHAVEQVM6T7VBL5LOP2U3T2RP3TOM RRSIG NSEC3 8 3 300 20201020000000 20201010000000 1 example.org. AAAA\n";

    #[test]
    fn writes_rows_in_bind10_form() {
        let mut conn = db();
        let recs = parse_master_text(ZONE, Path::new("t.zone"), &origin()).expect("parses");
        let mut calls = Vec::new();
        let report =
            load_zone(&mut conn, &origin(), &recs, |d, t| calls.push((d, t))).expect("loads");
        assert_eq!(report.records, 5);
        assert_eq!(report.nsec3, 2);
        assert!(report.created);
        assert_eq!(calls, vec![(7, 7)]);
        let row: (String, String, String, Option<String>, String) = conn
            .query_row(
                "SELECT name, rname, rdtype, sigtype, rdata FROM records WHERE rdtype='RRSIG'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .expect("row");
        assert_eq!(row.0, "Mixed.Example.org.");
        assert_eq!(row.1, "org.Example.Mixed.");
        assert_eq!(row.2, "RRSIG");
        assert_eq!(row.3.as_deref(), Some("A"));
        let hashes: Vec<(String, String)> = conn
            .prepare("SELECT hash, rdtype FROM nsec3 ORDER BY id")
            .expect("prep")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        assert_eq!(
            hashes,
            vec![
                ("0P9MHAVEQVM6T7VBL5LOP2U3T2RP3TOM".into(), "NSEC3".into()),
                ("0P9MHAVEQVM6T7VBL5LOP2U3T2RP3TOM".into(), "RRSIG".into())
            ]
        );
        let zone: String = conn
            .query_row("SELECT name FROM zones", [], |r| r.get(0))
            .expect("zone");
        assert_eq!(zone, "Example.org.");
        let nulls: i64 = conn
            .query_row(
                "SELECT count(*) FROM records WHERE sigtype IS NULL",
                [],
                |r| r.get(0),
            )
            .expect("count");
        assert_eq!(nulls, 4);
    }

    #[test]
    fn failed_check_leaves_db_alone() {
        let mut conn = db();
        let recs = parse_master_text(ZONE, Path::new("t.zone"), &origin()).expect("parses");
        load_zone(&mut conn, &origin(), &recs, |_, _| {}).expect("loads");
        let bad = parse_master_text(
            "@ 300 IN SOA ns hm 1 2 3 4 5\n@ NS ns\nw CNAME x\nw A 192.0.2.1\n",
            Path::new("bad.zone"),
            &origin(),
        )
        .expect("parses");
        let e = load_zone(&mut conn, &origin(), &bad, |_, _| {}).expect_err("cname");
        assert_eq!(
            e.to_string(),
            "bad.zone:4: CNAME and other data at w.Example.org."
        );
        let n: i64 = conn
            .query_row("SELECT count(*) FROM records", [], |r| r.get(0))
            .expect("count");
        assert_eq!(n, 5);
        let nosoa =
            parse_master_text("@ 300 IN NS ns\n", Path::new("z"), &origin()).expect("parses");
        let e = load_zone(&mut conn, &origin(), &nosoa, |_, _| {}).expect_err("no soa");
        assert_eq!(e.to_string(), "z: no SOA at the zone apex Example.org.");
    }

    #[test]
    fn first_label_of_names() {
        assert_eq!(first_label(&Name::root()), ".");
        let n: Name = "a\\.b.example.".parse().expect("name");
        assert_eq!(first_label(&n), "a\\.b");
    }
}
