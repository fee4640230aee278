//! Administering zones in BIND 10 sqlite3 zone DBs (schema 2.x): listing,
//! creating, deleting, dumping and checking zones, incremental updates with an
//! IXFR journal, and reading that journal back for outgoing IXFR.
//!
//! Everything here follows BIND 10's own writers (research/bind10.md §a.3, §a.6):
//!
//! - rows use the stored conventions of [`crate::sqlite_load`] (`name` with its
//!   loaded case, `rname` reversed, `rdtype` mnemonic, `sigtype` only for RRSIG,
//!   `rdata` in presentation form);
//! - [`update_zone`] writes the `diffs` journal in BIND 10's layout: per change,
//!   delete the old SOA (version = old serial, operation 1), the deletions
//!   (version = old serial, operation 1), add the new SOA (version = new serial,
//!   operation 0), the additions (version = new serial, operation 0);
//! - [`read_journal`] reads it as BIND 10's `SQLite3Accessor::DiffContext` did:
//!   from the first row with version = begin and operation DELETE to the last
//!   row with version = end and operation ADD, in `id` order.
//!
//! Serial numbers are compared with RFC 1982 serial arithmetic ([`serial_gt`]).

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use crate::sqlite::{int, text};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::name::{Name, wire_name_len};
use crate::rr::{Class, RType, Rdata, Record};
use crate::sqlite_load::{LoadReport, load_zone};
use crate::zonefile::{SourcedRecord, check_zone};

pub use crate::write::{
    Change, DiffRow, Difference, Scope, SerialPolicy, UpdateReport, WriteError as AdminError,
    serial_gt,
};

/// `diffs.operation` of an added RR (BIND 10's `DIFF_ADD`).
pub const DIFF_ADD: i64 = 0;
/// `diffs.operation` of a deleted RR (BIND 10's `DIFF_DELETE`).
pub const DIFF_DELETE: i64 = 1;

fn sql(action: &'static str) -> impl Fn(rusqlite::Error) -> AdminError {
    move |source| AdminError::Sqlite { action, source }
}

/// One zone of a DB, as `zone list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneSummary {
    /// `zones.id`.
    pub id: i64,
    /// The zone name as stored (`example.org.`).
    pub origin: String,
    /// The SOA serial, or `None` when the zone has no (readable) SOA.
    pub serial: Option<u32>,
    /// Rows in `records` plus `nsec3` (one per RR).
    pub records: u64,
    /// Rows in the `diffs` journal.
    pub journal: u64,
}

/// Every class-IN zone of the DB, ordered by name.
///
/// Errors: [`AdminError::Sqlite`].
pub fn list_zones(conn: &Connection) -> Result<Vec<ZoneSummary>, AdminError> {
    let action = "listing zones";
    let mut stmt = conn
        .prepare(
            "SELECT z.id, z.name, \
               (SELECT rdata FROM records r WHERE r.zone_id=z.id AND r.rdtype='SOA' LIMIT 1), \
               (SELECT count(*) FROM records r WHERE r.zone_id=z.id) + \
               (SELECT count(*) FROM nsec3 n WHERE n.zone_id=z.id), \
               (SELECT count(*) FROM diffs d WHERE d.zone_id=z.id) \
             FROM zones z WHERE z.rdclass='IN' ORDER BY z.name",
        )
        .map_err(sql(action))?;
    let mut rows = stmt.query([]).map_err(sql(action))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(sql(action))? {
        let id = row.get_ref(0).ok().and_then(int).unwrap_or(-1);
        let origin = row.get_ref(1).ok().and_then(text).unwrap_or_default();
        let serial = row
            .get_ref(2)
            .ok()
            .and_then(text)
            .and_then(|t| Rdata::from_text(RType::SOA, &t, &Name::root()).ok())
            .and_then(|r| r.soa_serial());
        let count = |i| {
            row.get_ref(i)
                .ok()
                .and_then(int)
                .and_then(|n| u64::try_from(n).ok())
                .unwrap_or(0)
        };
        out.push(ZoneSummary {
            id,
            origin,
            serial,
            records: count(3),
            journal: count(4),
        });
    }
    Ok(out)
}

/// `zones.id` of zone `origin` (class IN, name compared without case), if present.
///
/// Errors: [`AdminError::Sqlite`].
pub fn find_zone_id(conn: &Connection, origin: &Name) -> Result<Option<i64>, AdminError> {
    conn.query_row(
        "SELECT id FROM zones WHERE name=?1 AND rdclass='IN' ORDER BY id LIMIT 1",
        [origin.to_string()],
        |r| Ok(r.get_ref(0).ok().and_then(int)),
    )
    .optional()
    .map_err(sql("looking up the zone"))
    .map(Option::flatten)
}

fn require_zone(conn: &Connection, origin: &Name) -> Result<i64, AdminError> {
    if let Some(id) = find_zone_id(conn, origin)? {
        return Ok(id);
    }
    // BIND 10 stores zone names absolute; a row written by hand without the
    // final dot is not found by that name (nor served): say so.
    let text = origin.to_string();
    let undotted: Option<i64> = conn
        .query_row(
            "SELECT id FROM zones WHERE name=?1 AND rdclass='IN' ORDER BY id LIMIT 1",
            [text.trim_end_matches('.')],
            |r| Ok(r.get_ref(0).ok().and_then(int)),
        )
        .optional()
        .map_err(sql("looking up the zone"))?
        .flatten();
    match undotted {
        Some(id) if text != "." => Err(AdminError::Check(format!(
            "zone {text} is not in the DB: zones row {id} names it without the final dot \
             (UPDATE zones SET name='{text}' WHERE id={id})"
        ))),
        _ => Err(AdminError::NoZone(text)),
    }
}

/// Creates zone `origin` with `records` (checked first, see
/// [`crate::zonefile::check_zone`]) in one transaction.
///
/// Errors: [`AdminError::ZoneExists`] when the zone is already in the DB,
/// [`AdminError::Load`] when the records fail the checks or cannot be written.
pub fn create_zone(
    conn: &mut Connection,
    origin: &Name,
    records: &[SourcedRecord],
) -> Result<LoadReport, AdminError> {
    if find_zone_id(conn, origin)?.is_some() {
        return Err(AdminError::ZoneExists(origin.to_string()));
    }
    let report = load_zone(conn, origin, records, |_, _| {})?;
    if !report.created {
        // Another writer created it between our check and the load's lock.
        return Err(AdminError::ZoneExists(origin.to_string()));
    }
    Ok(report)
}

/// Deletes zone `origin`: its `records`, `nsec3` and `diffs` rows and its
/// `zones` row, in one transaction. Returns the number of rows deleted.
///
/// Errors: [`AdminError::NoZone`], [`AdminError::Sqlite`].
pub fn delete_zone(conn: &mut Connection, origin: &Name) -> Result<usize, AdminError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql("starting the transaction"))?;
    let id = require_zone(&tx, origin)?;
    let mut n = 0;
    for stmt in [
        "DELETE FROM records WHERE zone_id=?1",
        "DELETE FROM nsec3 WHERE zone_id=?1",
        "DELETE FROM diffs WHERE zone_id=?1",
        "DELETE FROM zones WHERE id=?1",
    ] {
        n += tx.execute(stmt, [id]).map_err(sql("deleting the zone"))?;
    }
    tx.commit().map_err(sql("committing"))?;
    Ok(n)
}

/// One stored RR and where it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// `records` or `nsec3`.
    pub table: &'static str,
    /// The row's `id`.
    pub id: i64,
    /// The RR (class IN; TTL in seconds).
    pub record: Record,
}

pub(crate) fn parse_row(
    table: &'static str,
    id: i64,
    origin: &Name,
    name: &str,
    rdtype: &str,
    ttl: i64,
    rdata: &str,
) -> Result<Record, AdminError> {
    let bad = |reason: String| AdminError::BadRow {
        table,
        id,
        name: name.to_string(),
        reason,
    };
    let owner = Name::parse(name, Some(origin)).map_err(|e| bad(e.to_string()))?;
    let rtype: RType = rdtype.parse().map_err(|e| bad(format!("{e}")))?;
    let ttl = u32::try_from(ttl)
        .ok()
        .filter(|t| *t <= i32::MAX as u32)
        .ok_or_else(|| bad(format!("bad TTL {ttl} (RFC 2181 §8: 0 to 2147483647)")))?;
    let rdata = Rdata::from_text(rtype, rdata, origin).map_err(|e| bad(e.to_string()))?;
    Ok(Record {
        owner,
        rtype,
        class: Class::IN,
        ttl,
        rdata,
    })
}

pub(crate) fn zone_rows(
    conn: &Connection,
    origin: &Name,
    zone_id: i64,
) -> Result<Vec<StoredRecord>, AdminError> {
    let mut out = Vec::new();
    for (table, query) in [
        (
            "records",
            "SELECT id, name, rdtype, ttl, rdata FROM records WHERE zone_id=?1 ORDER BY rname, rdtype, id",
        ),
        (
            "nsec3",
            "SELECT id, owner, rdtype, ttl, rdata FROM nsec3 WHERE zone_id=?1 ORDER BY hash, rdtype, id",
        ),
    ] {
        read_rows(conn, origin, table, query, [zone_id], &mut out)?;
    }
    Ok(out)
}

/// BIND 10's `rname` as an RFC 4034 §6.1 canonical-order key, in SQL: the
/// labels most significant first, lower-cased, the separator (0x01) below
/// every byte a label's presentation text holds. Exact for names without
/// escapes (`\`), which signing an update (`sqlite_signing::sign_names_in_tx`) leaves to the whole-zone
/// signing. `authd_records_canonical` (made with a signing policy) indexes
/// it (the same text).
pub(crate) const CANON: &str = "replace(lower(rname), '.', char(1))";

/// [`CANON`] of `name`.
pub(crate) fn canon_key(name: &Name) -> String {
    name.reversed_text()
        .to_ascii_lowercase()
        .replace('.', "\u{1}")
}

/// The `records` rows of zone `zone_id` owned by `names` (each once).
pub(crate) fn records_at(
    conn: &Connection,
    origin: &Name,
    zone_id: i64,
    names: &[Name],
) -> Result<Vec<StoredRecord>, AdminError> {
    let mut out = Vec::new();
    // `+zone_id`: by BIND 10's `name` index (any case), not authd's
    // zone_id ones, which the planner would take and read the whole zone.
    let query = "SELECT id, name, rdtype, ttl, rdata FROM records WHERE +zone_id=?1 AND name=?2 \
                 ORDER BY rdtype, id";
    for (i, name) in names.iter().enumerate() {
        if !names[..i].contains(name) {
            let params = params![zone_id, name.to_string()];
            read_rows(conn, origin, "records", query, params, &mut out)?;
        }
    }
    Ok(out)
}

/// Appends the rows `query` (columns id, name, rdtype, ttl, rdata of
/// `table`) selects with `params`, parsed, to `out`.
pub(crate) fn read_rows(
    conn: &Connection,
    origin: &Name,
    table: &'static str,
    query: &str,
    params: impl rusqlite::Params,
    out: &mut Vec<StoredRecord>,
) -> Result<(), AdminError> {
    let action = "reading the zone";
    let mut stmt = conn.prepare_cached(query).map_err(sql(action))?;
    let mut rows = stmt.query(params).map_err(sql(action))?;
    while let Some(row) = rows.next().map_err(sql(action))? {
        let id = row.get_ref(0).ok().and_then(int).unwrap_or(-1);
        let name = row.get_ref(1).ok().and_then(text);
        let bad = |column: &str| AdminError::BadRow {
            table,
            id,
            name: name.clone().unwrap_or_default(),
            reason: format!("{column} is NULL or unreadable"),
        };
        let Some(name) = name.clone() else {
            return Err(bad("the name"));
        };
        let rdtype = row
            .get_ref(2)
            .ok()
            .and_then(text)
            .ok_or_else(|| bad("the type"))?;
        let ttl = row
            .get_ref(3)
            .ok()
            .and_then(int)
            .ok_or_else(|| bad("the TTL (not a whole number)"))?;
        let rdata = row
            .get_ref(4)
            .ok()
            .and_then(text)
            .ok_or_else(|| bad("the rdata"))?;
        let record = parse_row(table, id, origin, &name, &rdtype, ttl, &rdata)?;
        out.push(StoredRecord { table, id, record });
    }
    Ok(())
}

/// Every RR of zone `origin`: `records` rows in `rname, rdtype` order (BIND 10's
/// iterator order), then `nsec3` rows in hash order.
///
/// Errors: [`AdminError::NoZone`], [`AdminError::Sqlite`], [`AdminError::BadRow`]
/// for the first row that does not parse.
pub fn zone_records(conn: &Connection, origin: &Name) -> Result<Vec<StoredRecord>, AdminError> {
    let id = require_zone(conn, origin)?;
    zone_rows(conn, origin, id)
}

/// How [`dump_zone`] writes RDATA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpStyle {
    /// Every type in its own presentation form, as BIND 9 writes it.
    Bind,
    /// As [`DumpStyle::Bind`], but types outside [`RType::is_widely_read`]
    /// as `TYPEnnn` with RFC 3597 `\#` data (§5), which any RFC 3597 reader
    /// loads (Knot DNS 3.2 reads no A6, WKS, X25, ... of its own).
    Portable,
}

/// Writes zone `origin` as a master file (RFC 1035 §5): a comment header, then
/// one RR per line, `OWNER TTL IN TYPE RDATA` with absolute names, in
/// [`zone_records`] order with the SOA first. `loadzone` reads it back to the
/// same content. Returns the number of RRs written.
///
/// Errors: as [`zone_records`], plus [`AdminError::Update`] wrapping an I/O
/// error of `out`, and [`AdminError::BadRow`] for RDATA that cannot be rendered.
pub fn dump_zone(
    conn: &Connection,
    origin: &Name,
    out: &mut dyn Write,
    style: DumpStyle,
) -> Result<usize, AdminError> {
    let mut records = zone_records(conn, origin)?;
    // SOA first, as master files conventionally start (RFC 1035 §5.2).
    records.sort_by_key(|r| r.record.rtype != RType::SOA);
    let io = |e: std::io::Error| AdminError::Update(format!("writing the dump: {e}"));
    writeln!(out, "; zone {origin}, {} RRs", records.len()).map_err(io)?;
    writeln!(out, "$ORIGIN {origin}").map_err(io)?;
    for r in &records {
        let rec = &r.record;
        let rdata = rec
            .rdata
            .to_text(rec.rtype)
            .map_err(|e| AdminError::BadRow {
                table: r.table,
                id: r.id,
                name: rec.owner.to_string(),
                reason: e.to_string(),
            })?;
        if style == DumpStyle::Portable && !rec.rtype.is_widely_read() {
            writeln!(
                out,
                "{}\t{}\tIN\tTYPE{}\t{}",
                rec.owner,
                rec.ttl,
                rec.rtype.0,
                rec.rdata.to_generic_text()
            )
        } else {
            writeln!(
                out,
                "{}\t{}\tIN\t{}\t{}",
                rec.owner, rec.ttl, rec.rtype, rdata
            )
        }
        .map_err(io)?;
    }
    Ok(records.len())
}

fn sourced(db: &str, records: &[StoredRecord]) -> Vec<SourcedRecord> {
    records
        .iter()
        .map(|r| SourcedRecord {
            record: r.record.clone(),
            file: Arc::new(PathBuf::from(format!("{db}:{}", r.table))),
            line: usize::try_from(r.id).unwrap_or(0),
        })
        .collect()
}

fn check_loaded(origin: &Name, records: &[StoredRecord]) -> Result<(), AdminError> {
    check_zone(origin, &sourced("zone", records)).map_err(loaded_error)
}

/// A zone check failure on stored rows ([`sourced`]: the "line" is the row id)
/// as `TABLE row ID: problem`, or the bare problem for the zone as a whole.
fn loaded_error(e: crate::zonefile::ZoneFileError) -> AdminError {
    if e.line == 0 {
        AdminError::Check(e.message)
    } else {
        AdminError::Check(format!(
            "{} row {}: {}",
            table_of(&e.file),
            e.line,
            e.message
        ))
    }
}

fn table_of(file: &std::path::Path) -> String {
    let s = file.display().to_string();
    s.rsplit(':').next().unwrap_or("records").to_string()
}

/// Checks zone `origin` as stored: every row parses, then the zone checks of
/// [`crate::zonefile::check_zone`] (one SOA at the apex, NS at the apex, no
/// CNAME beside other data, at most one CNAME/DNAME per name, names inside the
/// zone). Returns the number of RRs checked.
///
/// Errors: [`AdminError::BadRow`] for an unreadable row,
/// [`AdminError::Check`] naming the first problem, its owner name and row id
/// (e.g. `records row 17: CNAME and other data at www.example.org.`),
/// [`AdminError::NoZone`], [`AdminError::Sqlite`].
pub fn check_stored_zone(conn: &Connection, origin: &Name) -> Result<usize, AdminError> {
    check_one_zone_row(conn, origin)?;
    let records = zone_records(conn, origin)?;
    check_rnames(conn, origin)?;
    check_loaded(origin, &records)?;
    Ok(records.len())
}

/// The zone has one `zones` row: plain SQL can add a second with the same
/// name, and only the first (lowest id, as BIND 10 took) is served.
fn check_one_zone_row(conn: &Connection, origin: &Name) -> Result<(), AdminError> {
    let action = "reading the zone table";
    let mut stmt = conn
        .prepare("SELECT id FROM zones WHERE name=?1 AND rdclass='IN' ORDER BY id")
        .map_err(sql(action))?;
    let ids: Vec<i64> = stmt
        .query_map([origin.to_string()], |r| r.get(0))
        .map_err(sql(action))?
        .collect::<Result<_, _>>()
        .map_err(sql(action))?;
    if let [first, rest @ ..] = &ids[..]
        && !rest.is_empty()
    {
        let others: Vec<String> = rest.iter().map(i64::to_string).collect();
        return Err(AdminError::Check(format!(
            "zone {origin} has {} rows in the zones table: id {first} is served, id {} ignored; \
             delete the extra rows and their records",
            ids.len(),
            others.join(", ")
        )));
    }
    Ok(())
}

/// Every `records` row's `rname` is its `name` reversed (any case): the
/// empty-non-terminal test, NSEC lookups and the hot-spot cache's absent-name
/// ranges read `rname`, so a row whose `rname` is wrong would be missed by them.
fn check_rnames(conn: &Connection, origin: &Name) -> Result<(), AdminError> {
    let action = "reading the zone";
    let id = require_zone(conn, origin)?;
    let mut stmt = conn
        .prepare("SELECT id, name, rname FROM records WHERE zone_id=?1 ORDER BY id")
        .map_err(sql(action))?;
    let mut rows = stmt.query([id]).map_err(sql(action))?;
    while let Some(row) = rows.next().map_err(sql(action))? {
        let id = row.get_ref(0).ok().and_then(int).unwrap_or(-1);
        let name = row.get_ref(1).ok().and_then(text).unwrap_or_default();
        let rname = row.get_ref(2).ok().and_then(text).unwrap_or_default();
        if !name.ends_with('.') {
            // Read relative to the apex it would be another name; authd, which
            // matches the text, never finds it.
            return Err(AdminError::BadRow {
                table: "records",
                id,
                name: name.clone(),
                reason: format!("name without its final dot (stored names are absolute: {name}.)"),
            });
        }
        let Ok(owner) = Name::parse(&name, Some(origin)) else {
            continue; // reported by the record checks
        };
        let want = owner.reversed_text();
        if !rname.eq_ignore_ascii_case(&want) {
            return Err(AdminError::BadRow {
                table: "records",
                id,
                name,
                reason: format!(
                    "rname {rname:?} is not the name reversed ({want:?}); lookups of \
                     names below it and of absent names read rname"
                ),
            });
        }
    }
    Ok(())
}

/// A copy of SOA RDATA (wire form) with SERIAL replaced.
pub(crate) fn with_serial(soa: &Rdata, serial: u32) -> Option<Rdata> {
    let d = soa.as_wire();
    let m = wire_name_len(d)?;
    let r = wire_name_len(d.get(m..)?)?;
    let at = m + r;
    if d.len() != at + 20 {
        return None;
    }
    let mut v = d.to_vec();
    v[at..at + 4].copy_from_slice(&serial.to_be_bytes());
    Some(Rdata::from_wire(&v))
}

pub(crate) fn rdata_text(rec: &Record) -> Result<String, AdminError> {
    rec.rdata
        .to_text(rec.rtype)
        .map_err(|e| AdminError::Update(format!("{} {}: {e}", rec.owner, rec.rtype)))
}

/// Applies one incremental change to zone `origin` in one transaction: deletes
/// the RRs of `delete` (matched on owner, type and RDATA; TTL ignored), adds
/// those of `add`, increments the SOA serial by one and appends the change to
/// the `diffs` journal in BIND 10's layout (see the module doc). The resulting
/// zone must pass [`check_stored_zone`]'s checks.
///
/// Errors: [`AdminError::Update`] for an RR to delete that is absent, an RR to
/// add that is present, an RR outside the zone, a SOA, NSEC3 or RRSIG-over-NSEC3
/// RR (the serial is managed here; NSEC3 chains are replaced with `loadzone`), or
/// an empty change; [`AdminError::Check`] when the result fails the zone checks;
/// [`AdminError::NoZone`], [`AdminError::Sqlite`], [`AdminError::BadRow`].
pub fn update_zone(
    conn: &mut Connection,
    origin: &Name,
    add: &[Record],
    delete: &[Record],
) -> Result<UpdateReport, AdminError> {
    if add.is_empty() && delete.is_empty() {
        return Err(AdminError::Update("nothing to add or delete".into()));
    }
    let change = Change {
        add: add.to_vec(),
        delete: delete.to_vec(),
        soa: None,
    };
    update_zone_with(
        conn,
        origin,
        Scope::Zone,
        SerialPolicy::Increment,
        crate::sqlite_signing::unix_now(),
        |_| Ok::<_, AdminError>(change),
    )?
}

/// Applies the change `plan` works out from the zone's RRs (the `records`
/// table in `scope`, as read inside the transaction) to zone `origin`, in one
/// `BEGIN IMMEDIATE` transaction: the RRs deleted and added, the SOA serial
/// moved per `serial` at Unix time `now` (or the SOA replaced by
/// [`Change::soa`]), the change appended to the `diffs` journal in BIND 10's
/// layout (see the module doc), the result checked as [`check_stored_zone`]
/// checks. An empty change writes nothing (the serial stays).
///
/// Returns `Ok(Err(e))` when `plan` refused with `e` (nothing written).
///
/// Errors: as [`update_zone`]; a busy DB is [`AdminError::Sqlite`] after the
/// connection's busy timeout.
pub fn update_zone_with<E>(
    conn: &mut Connection,
    origin: &Name,
    scope: Scope<'_>,
    serial: SerialPolicy,
    now: u64,
    plan: impl FnOnce(&[Record]) -> Result<Change, E>,
) -> Result<Result<UpdateReport, E>, AdminError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql("starting the transaction"))?;
    let report = update_in(&tx, origin, scope, serial, now, plan)?;
    if report.is_ok() {
        tx.commit().map_err(sql("committing"))?;
    }
    Ok(report)
}

/// [`update_zone_with`] inside transaction `tx`, not committed.
fn update_in<E>(
    tx: &Connection,
    origin: &Name,
    scope: Scope<'_>,
    serial: SerialPolicy,
    now: u64,
    plan: impl FnOnce(&[Record]) -> Result<Change, E>,
) -> Result<Result<UpdateReport, E>, AdminError> {
    let zone_id = require_zone(tx, origin)?;
    // A signed zone is read at the changed names, as an unsigned one: the
    // signer reads the names around them (sign_names_in_tx), or the whole
    // zone where its chain cannot be followed from them.
    let policy = crate::sqlite_signing::policy_of(tx, origin)?;
    // Plain SQL edits the signer has not reached yet are signed (and
    // journaled, as their own version) first: this write clears the log.
    if policy.is_some() && crate::sqlite_signing::has_edits(tx, zone_id)? {
        crate::sqlite_signing::sign_pending_in(tx, origin, serial, now)?;
    }
    let around = matches!(scope, Scope::Names(_)) && policy.is_some();
    let read_scope = if policy.is_some() && !around {
        Scope::Zone
    } else {
        scope
    };
    let read = |tx: &Connection| match read_scope {
        Scope::Zone => zone_rows(tx, origin, zone_id),
        Scope::Names(names) => {
            let mut all = vec![origin.clone()];
            all.extend_from_slice(names);
            records_at(tx, origin, zone_id, &all)
        }
    };
    let before = read(tx)?;
    let soas: Vec<&StoredRecord> = before
        .iter()
        .filter(|r| r.record.rtype == RType::SOA && r.record.owner == *origin)
        .collect();
    let [soa] = soas[..] else {
        return Err(AdminError::Check(format!(
            "zone {origin} has {} SOA records; exactly one is needed",
            soas.len()
        )));
    };
    let old_serial = soa
        .record
        .rdata
        .soa_serial()
        .ok_or_else(|| AdminError::Check(format!("zone {origin}: unreadable SOA")))?;
    let stored: Vec<Record> = before
        .iter()
        .filter(|r| r.table == "records")
        .map(|r| r.record.clone())
        .collect();
    let mut change = match plan(&stored) {
        Ok(c) => c,
        Err(e) => return Ok(Err(e)),
    };
    let signing = match policy {
        Some(policy) => {
            crate::sqlite_signing::unsigned_change(origin, &change.add, &mut change.delete)?;
            let stored = before.iter().map(|r| &r.record);
            Some(crate::sqlite_signing::signing_for(
                tx, origin, policy, stored, now,
            )?)
        }
        None => None,
    };
    if change.is_empty() {
        return Ok(Ok(UpdateReport {
            old_serial,
            new_serial: old_serial,
            added: 0,
            deleted: 0,
            journal_rows: 0,
        }));
    }
    let (add, delete) = (&change.add[..], &change.delete[..]);
    for rec in add.iter().chain(delete) {
        if !rec.owner.is_subdomain_of(origin) {
            return Err(AdminError::Update(format!(
                "{} is outside the zone {origin}",
                rec.owner
            )));
        }
        let nsec3 = rec.rtype == RType::NSEC3
            || (rec.rtype == RType::RRSIG && rec.rdata.rrsig_type_covered() == Some(RType::NSEC3));
        if rec.rtype == RType::SOA || nsec3 || rec.rtype.is_meta() {
            return Err(AdminError::Update(format!(
                "{} {}: cannot be updated here (the SOA serial is bumped automatically; \
                 NSEC3 chains are replaced with loadzone)",
                rec.owner, rec.rtype
            )));
        }
    }
    let new_soa_rdata = match &change.soa {
        Some(rdata) => rdata.clone(),
        None => with_serial(&soa.record.rdata, serial.next(old_serial, now))
            .ok_or_else(|| AdminError::Check(format!("zone {origin}: unreadable SOA")))?,
    };
    let new_serial = new_soa_rdata
        .soa_serial()
        .filter(|s| serial_gt(*s, old_serial))
        .ok_or_else(|| {
            AdminError::Update(format!(
                "zone {origin}: the new SOA serial must be greater than {old_serial}"
            ))
        })?;
    let soa_id = soa.id;
    let old_soa = soa.record.clone();
    let new_soa = Record {
        rdata: new_soa_rdata,
        ..old_soa.clone()
    };

    let same =
        |a: &Record, b: &Record| a.owner == b.owner && a.rtype == b.rtype && a.rdata == b.rdata;
    // Deletions, resolved to stored rows (their stored TTL goes to the journal).
    let mut deleted: Vec<(i64, Record)> = Vec::new();
    for rec in delete {
        let Some(row) = before.iter().find(|r| {
            r.table == "records"
                && same(&r.record, rec)
                && !deleted.iter().any(|(id, _)| *id == r.id)
        }) else {
            return Err(AdminError::Update(format!(
                "cannot delete {} {} {}: not in the zone",
                rec.owner,
                rec.rtype,
                rdata_text(rec)?
            )));
        };
        deleted.push((row.id, row.record.clone()));
    }
    for (i, rec) in add.iter().enumerate() {
        let present = before
            .iter()
            .any(|r| same(&r.record, rec) && !deleted.iter().any(|(id, _)| *id == r.id));
        if present || add[..i].iter().any(|a| same(a, rec)) {
            return Err(AdminError::Update(format!(
                "cannot add {} {} {}: already in the zone",
                rec.owner,
                rec.rtype,
                rdata_text(rec)?
            )));
        }
    }

    let action = "writing the update";
    {
        let mut del = tx
            .prepare_cached("DELETE FROM records WHERE id=?1")
            .map_err(sql(action))?;
        for (id, _) in &deleted {
            del.execute([id]).map_err(sql(action))?;
        }
        insert_records(tx, zone_id, add)?;
        tx.execute(
            "UPDATE records SET rdata=?2 WHERE id=?1",
            params![soa_id, rdata_text(&new_soa)?],
        )
        .map_err(sql(action))?;
        let mut deleted_records: Vec<Record> = deleted.iter().map(|(_, r)| r.clone()).collect();
        let mut added_records: Vec<Record> = add.to_vec();
        // A signed zone's new version is made here from the rows read
        // before (the whole zone, or the changed names and the apex: a
        // second read would double the cost of an update): rows deleted
        // out, the new SOA, rows added (with ids no stored row has, for the
        // check's messages; the signer deletes only its own rows).
        let after = if signing.is_some() {
            let gone: std::collections::HashSet<i64> = deleted.iter().map(|(id, _)| *id).collect();
            let mut rows: Vec<StoredRecord> = before
                .iter()
                .filter(|r| !(r.table == "records" && gone.contains(&r.id)))
                .cloned()
                .collect();
            if let Some(r) = rows
                .iter_mut()
                .find(|r| r.table == "records" && r.id == soa_id)
            {
                r.record = new_soa.clone();
            }
            rows.extend(add.iter().zip(0i64..).map(|(rec, k)| StoredRecord {
                table: "records",
                id: i64::MAX - k,
                record: rec.clone(),
            }));
            rows
        } else {
            read(tx)?
        };
        // A row this update inserted is rolled back with it: name the problem,
        // not that row's id.
        check_zone(origin, &sourced("zone", &after)).map_err(|e| {
            let new_row = e.line != 0
                && table_of(&e.file) == "records"
                && !before
                    .iter()
                    .any(|r| r.table == "records" && usize::try_from(r.id) == Ok(e.line));
            if new_row {
                AdminError::Update(format!(
                    "the update would leave {}; nothing was changed",
                    e.message
                ))
            } else {
                loaded_error(e)
            }
        })?;
        if let Scope::Zone = scope {
            check_rnames(tx, origin)?;
        }
        if let Some(signing) = &signing {
            let mut dirty: std::collections::HashSet<(Name, RType)> = add
                .iter()
                .chain(&deleted_records)
                .map(|r| (r.owner.clone(), r.rtype))
                .collect();
            dirty.insert((origin.clone(), RType::SOA));
            // A new SOA that differs in its serial only (a signed transfer's)
            // changes no TTL the chain takes (RFC 4035 §2.3).
            let same_soa = change
                .soa
                .as_ref()
                .is_none_or(|s| with_serial(s, old_serial).is_some_and(|s| s == old_soa.rdata));
            let scoped = if let (true, true, Scope::Names(names)) = (around, same_soa, scope) {
                let known = (&after[..], std::iter::once(origin).chain(names));
                crate::sqlite_signing::sign_names_in_tx(
                    tx, origin, zone_id, signing, &dirty, known, now,
                )?
            } else {
                None
            };
            let signed = match scoped {
                Some(signed) => signed,
                None => {
                    // The whole zone, as it now is (read again only when
                    // it was read at the changed names).
                    let whole = if around {
                        zone_rows(tx, origin, zone_id)?
                    } else {
                        after
                    };
                    let dirty = crate::signer::zone::Dirty::Rrsets(dirty);
                    crate::sqlite_signing::sign_in_tx(
                        tx, origin, zone_id, &whole, signing, &dirty, now,
                    )?
                }
            };
            deleted_records.extend(signed.delete);
            added_records.extend(signed.add);
        }
        let rows = journal(
            tx,
            zone_id,
            (&old_soa, &deleted_records),
            (&new_soa, &added_records),
        )?;
        let report = UpdateReport {
            old_serial,
            new_serial,
            added: add.len(),
            deleted: deleted.len(),
            journal_rows: rows,
        };
        Ok(Ok(report))
    }
}

/// Inserts `add` into the `records` table of zone `zone_id`.
pub(crate) fn insert_records(
    conn: &Connection,
    zone_id: i64,
    add: &[Record],
) -> Result<(), AdminError> {
    let action = "writing the update";
    let mut ins = conn
        .prepare_cached(
            "INSERT INTO records (zone_id, name, rname, ttl, rdtype, sigtype, rdata) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .map_err(sql(action))?;
    for rec in add {
        let covered = if rec.rtype == RType::RRSIG {
            rec.rdata.rrsig_type_covered().map(|t| t.to_string())
        } else {
            None
        };
        ins.execute(params![
            zone_id,
            rec.owner.to_string(),
            rec.owner.reversed_text(),
            rec.ttl,
            rec.rtype.to_string(),
            covered,
            rdata_text(rec)?
        ])
        .map_err(sql(action))?;
    }
    Ok(())
}

/// Appends one change to the `diffs` journal of zone `zone_id` in BIND 10's
/// layout: the old SOA and the deletions under the old serial (DELETE), the
/// new SOA and the additions under the new serial (ADD). Returns the rows
/// written.
pub(crate) fn journal(
    conn: &Connection,
    zone_id: i64,
    (old_soa, deleted): (&Record, &[Record]),
    (new_soa, added): (&Record, &[Record]),
) -> Result<usize, AdminError> {
    let action = "writing the journal";
    let serial = |soa: &Record| {
        soa.rdata
            .soa_serial()
            .ok_or_else(|| AdminError::Check(format!("{}: unreadable SOA", soa.owner)))
    };
    let (old_serial, new_serial) = (serial(old_soa)?, serial(new_soa)?);
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO diffs (zone_id, version, operation, name, rrtype, ttl, rdata) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .map_err(sql(action))?;
    let old = std::iter::once(old_soa)
        .chain(deleted)
        .map(|r| (old_serial, DIFF_DELETE, r));
    let new = std::iter::once(new_soa)
        .chain(added)
        .map(|r| (new_serial, DIFF_ADD, r));
    let mut rows = 0;
    for (version, op, rec) in old.chain(new) {
        stmt.execute(params![
            zone_id,
            i64::from(version),
            op,
            rec.owner.to_string(),
            rec.rtype.to_string(),
            rec.ttl,
            rdata_text(rec)?
        ])
        .map_err(sql(action))?;
        rows += 1;
    }
    Ok(rows)
}

/// Replaces the content of zone `origin` with `records` as
/// [`crate::sqlite_load::load_zone`] does, and in the same transaction
/// journals the difference from the stored version (RFC 1995; as NSD's
/// `create-ixfr`, BIND's `ixfr-from-differences`, Knot's `zonefile-load:
/// difference`), so secondaries get an incremental transfer: when the zone
/// existed and the new SOA serial is greater (RFC 1982). When it is not,
/// the journal is cleared (a difference could not chain to it; secondaries
/// transfer the whole zone). A new zone gets no journal.
///
/// Errors: as `load_zone`, and [`AdminError::BadRow`] for a stored row that
/// does not parse (the stored version must be read to compare). The zone is
/// unchanged in every case.
pub fn replace_zone_journaled(
    conn: &mut Connection,
    origin: &Name,
    records: &[SourcedRecord],
    progress: &mut dyn FnMut(usize, usize),
) -> Result<LoadReport, AdminError> {
    check_zone(origin, records).map_err(crate::sqlite_load::LoadError::from)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql("starting the transaction"))?;
    let old = match find_zone_id(&tx, origin)? {
        Some(id) => Some(zone_rows(&tx, origin, id)?),
        None => None,
    };
    let signed = match crate::sqlite_signing::policy_of(&tx, origin)? {
        Some(policy) => Some(crate::sqlite_signing::signed_load(
            &tx,
            origin,
            policy,
            records,
            old.as_deref(),
            crate::sqlite_signing::unix_now(),
        )?),
        None => None,
    };
    let records = signed.as_deref().unwrap_or(records);
    let mut report = crate::sqlite_load::load_zone_in(&tx, origin, records, false, progress)?;
    if signed.is_some() {
        crate::sqlite_signing::clear_log(&tx, report.zone_id)?;
    }
    if let Some(old) = old {
        let before = old.iter().map(|s| &s.record);
        let diff = Difference::between(before, records.iter().map(|s| &s.record));
        match diff.as_ref().and_then(|d| Some((d, d.serials()?))) {
            Some((d, (from, to))) if crate::write::serial_gt(to, from) => {
                let rows = journal(
                    &tx,
                    report.zone_id,
                    (&d.old_soa, &d.deleted),
                    (&d.new_soa, &d.added),
                )?;
                report.journal = crate::sqlite_load::JournalOutcome::Journaled { from, to, rows };
            }
            // The same version again: the journal still leads to it.
            Some((d, (from, to)))
                if from == to
                    && d.old_soa == d.new_soa
                    && d.deleted.is_empty()
                    && d.added.is_empty() =>
            {
                report.journal = crate::sqlite_load::JournalOutcome::Untouched;
            }
            _ => {
                tx.execute("DELETE FROM diffs WHERE zone_id=?1", [report.zone_id])
                    .map_err(sql("clearing the journal"))?;
                report.journal = crate::sqlite_load::JournalOutcome::Cleared;
            }
        }
    }
    tx.commit().map_err(sql("committing"))?;
    progress(records.len(), records.len());
    Ok(report)
}

/// Applies the differences of an incremental transfer (RFC 1995) to zone
/// `origin`, in order and in one transaction, appending each to the `diffs`
/// journal as [`update_zone`] does, so the zone can be transferred on by
/// IXFR. The first difference must start at the stored SOA serial, each
/// next one where the previous ended; the result must pass the zone checks.
/// Returns the journal rows written.
///
/// Errors: [`AdminError::Update`] for a difference that does not start at
/// the zone's serial, an RR to delete that is absent, an RR to add that is
/// present, a SOA among the RRs, an NSEC3 or RRSIG-over-NSEC3 RR (kept in
/// another table: transfer the zone whole instead); [`AdminError::Check`]
/// when the result fails the zone checks; [`AdminError::NoZone`],
/// [`AdminError::Sqlite`], [`AdminError::BadRow`]. The zone is unchanged in
/// every case.
pub fn apply_differences(
    conn: &mut Connection,
    origin: &Name,
    diffs: &[Difference],
) -> Result<usize, AdminError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql("starting the transaction"))?;
    let zone_id = require_zone(&tx, origin)?;
    if crate::sqlite_signing::policy_of(&tx, origin)?.is_some() {
        let rows = apply_signed_differences(&tx, origin, diffs)?;
        tx.commit().map_err(sql("committing"))?;
        return Ok(rows);
    }
    let same =
        |a: &Record, b: &Record| a.owner == b.owner && a.rtype == b.rtype && a.rdata == b.rdata;
    let mut rows = 0;
    for d in diffs {
        for rec in d.deleted.iter().chain(&d.added) {
            let nsec3 = rec.rtype == RType::NSEC3
                || (rec.rtype == RType::RRSIG
                    && rec.rdata.rrsig_type_covered() == Some(RType::NSEC3));
            if rec.rtype == RType::SOA || nsec3 || !rec.owner.is_subdomain_of(origin) {
                return Err(AdminError::Update(format!(
                    "{} {}: not applicable as a difference here",
                    rec.owner, rec.rtype
                )));
            }
        }
        // Only the names this difference touches (and the apex, for the
        // SOA): the whole zone is read and checked once, at the end.
        let mut names: Vec<Name> = std::iter::once(origin)
            .chain(d.deleted.iter().chain(&d.added).map(|r| &r.owner))
            .cloned()
            .collect();
        names.sort();
        names.dedup();
        let before = records_at(&tx, origin, zone_id, &names)?;
        let Some(soa) = before
            .iter()
            .find(|r| r.record.rtype == RType::SOA && r.record.owner == *origin)
        else {
            return Err(AdminError::Check(format!("zone {origin} has no SOA")));
        };
        let (ours, from) = (soa.record.rdata.soa_serial(), d.old_soa.rdata.soa_serial());
        if ours.is_none() || ours != from {
            return Err(AdminError::Update(format!(
                "a difference from serial {} does not apply to serial {}",
                serial_text(from),
                serial_text(ours)
            )));
        }
        let soa_id = soa.id;
        let mut gone: Vec<i64> = Vec::with_capacity(d.deleted.len());
        for rec in &d.deleted {
            let Some(row) = before
                .iter()
                .find(|r| r.table == "records" && same(&r.record, rec) && !gone.contains(&r.id))
            else {
                return Err(AdminError::Update(format!(
                    "cannot delete {} {}: not in the zone",
                    rec.owner, rec.rtype
                )));
            };
            gone.push(row.id);
        }
        for (i, rec) in d.added.iter().enumerate() {
            let present = before
                .iter()
                .any(|r| same(&r.record, rec) && !gone.contains(&r.id));
            if present || d.added[..i].iter().any(|a| same(a, rec)) {
                return Err(AdminError::Update(format!(
                    "cannot add {} {}: already in the zone",
                    rec.owner, rec.rtype
                )));
            }
        }
        {
            let action = "applying a difference";
            let mut del = tx
                .prepare("DELETE FROM records WHERE id=?1")
                .map_err(sql(action))?;
            for id in &gone {
                del.execute([id]).map_err(sql(action))?;
            }
        }
        insert_records(&tx, zone_id, &d.added)?;
        tx.execute(
            "UPDATE records SET rdata=?2, ttl=?3 WHERE id=?1",
            params![soa_id, rdata_text(&d.new_soa)?, d.new_soa.ttl],
        )
        .map_err(sql("applying a difference"))?;
        rows += journal(
            &tx,
            zone_id,
            (&d.old_soa, &d.deleted),
            (&d.new_soa, &d.added),
        )?;
    }
    let after = zone_rows(&tx, origin, zone_id)?;
    check_zone(origin, &sourced("zone", &after)).map_err(loaded_error)?;
    check_rnames(&tx, origin)?;
    tx.commit().map_err(sql("committing"))?;
    Ok(rows)
}

/// [`apply_differences`] for a zone signed online (a bump-in-the-wire
/// signer: the unsigned zone in from a hidden primary, the signed zone out),
/// in `tx`: the differences must chain from the zone's
/// [`crate::sqlite_signing::input_serial`] (the primary's serial of our
/// copy, which the signed SOA's may have passed); their net change is
/// applied and signed as one UPDATE at the changed names is, and journaled
/// as one signed difference; the SOA takes the primary's last one with the
/// serial [`crate::sqlite_signing::output_serial`] picks.
///
/// Errors: as [`apply_differences`], and [`AdminError::Update`] for DNSSEC
/// records among the RRs (the primary must serve the zone unsigned) or no
/// input serial recorded (the zone must be transferred whole first).
fn apply_signed_differences(
    tx: &Connection,
    origin: &Name,
    diffs: &[Difference],
) -> Result<usize, AdminError> {
    let Some(last) = diffs.last() else {
        return Ok(0);
    };
    let Some(mut at) = crate::sqlite_signing::input_serial(tx, origin)? else {
        return Err(AdminError::Update(format!(
            "zone {origin} is signed online and records no primary serial yet; \
             it must be transferred whole"
        )));
    };
    for d in diffs {
        let from = d.old_soa.rdata.soa_serial();
        if from != Some(at) {
            return Err(AdminError::Update(format!(
                "a difference from serial {} does not apply to serial {at} (the primary's \
                 serial of the signed copy)",
                serial_text(from)
            )));
        }
        at = d
            .new_soa
            .rdata
            .soa_serial()
            .ok_or_else(|| AdminError::Update("a difference with an unreadable SOA".into()))?;
        for rec in d.deleted.iter().chain(&d.added) {
            if rec.rtype == RType::SOA || !rec.owner.is_subdomain_of(origin) {
                return Err(AdminError::Update(format!(
                    "{} {}: not applicable as a difference here",
                    rec.owner, rec.rtype
                )));
            }
            if crate::signer::zone::is_signer_type(rec.rtype) {
                return Err(AdminError::Update(format!(
                    "{} {}: zone {origin} is signed by authd, so its primary must serve it \
                     unsigned",
                    rec.owner, rec.rtype
                )));
            }
        }
    }
    // The net change: (the stored RR deleted, the RR added) per owner, type
    // and RDATA, in the order first seen.
    type Key = (Name, RType, Rdata);
    let mut order: Vec<Key> = Vec::new();
    let mut net: HashMap<Key, (Option<Record>, Option<Record>)> = HashMap::new();
    for d in diffs {
        for (r, added) in d
            .deleted
            .iter()
            .map(|r| (r, false))
            .chain(d.added.iter().map(|r| (r, true)))
        {
            let k = (r.owner.to_lowercase(), r.rtype, r.rdata.clone());
            if !net.contains_key(&k) {
                order.push(k.clone());
            }
            let e = net.entry(k).or_default();
            if added {
                e.1 = Some(r.clone());
            } else if e.1.take().is_none() {
                e.0 = Some(r.clone());
            }
        }
    }
    let (mut add, mut delete) = (Vec::new(), Vec::new());
    for k in &order {
        match net.remove(k) {
            Some((Some(d), Some(a))) if d.ttl == a.ttl => {}
            Some((d, a)) => {
                delete.extend(d);
                add.extend(a);
            }
            None => {}
        }
    }
    let mut names: Vec<Name> = add.iter().chain(&delete).map(|r| r.owner.clone()).collect();
    names.sort();
    names.dedup();
    let input = at;
    let new_soa = &last.new_soa.rdata;
    let report = update_in(
        tx,
        origin,
        Scope::Names(&names),
        SerialPolicy::Increment,
        crate::sqlite_signing::unix_now(),
        |stored| {
            let old_soa = stored
                .iter()
                .find(|r| r.rtype == RType::SOA && r.owner == *origin)
                .map(|r| &r.rdata);
            let stored_serial = old_soa.and_then(Rdata::soa_serial);
            let same_soa = old_soa
                .zip(stored_serial)
                .is_some_and(|(o, s)| with_serial(new_soa, s).as_ref() == Some(o));
            let changed = !(add.is_empty() && delete.is_empty() && same_soa);
            let serial = crate::sqlite_signing::output_serial(input, stored_serial, changed);
            let soa = if stored_serial == Some(serial) {
                None
            } else {
                with_serial(new_soa, serial)
            };
            Ok::<_, std::convert::Infallible>(Change { add, delete, soa })
        },
    )?;
    crate::sqlite_signing::record_input_serial(tx, origin, input)?;
    Ok(match report {
        Ok(r) => r.journal_rows,
        Err(never) => match never {},
    })
}

/// The journal of zone `zone_id` (apex `origin`) from serial `begin` to serial
/// `end`, read as BIND 10's journal reader did: from the first row with
/// version = `begin` and operation DELETE to the last row with version = `end`
/// and operation ADD, ordered by `id`. `None` when the journal cannot bridge the
/// two serials (no such rows, or they are in the wrong order): the caller falls
/// back to a full transfer (RFC 1995 §4).
///
/// Errors: [`AdminError::Sqlite`]; [`AdminError::BadRow`] for a row that does
/// not parse.
pub fn read_journal(
    conn: &Connection,
    zone_id: i64,
    origin: &Name,
    begin: u32,
    end: u32,
) -> Result<Option<Vec<DiffRow>>, AdminError> {
    let action = "reading the journal";
    let edge = |order: &str, version: u32, op: i64| -> Result<Option<i64>, AdminError> {
        conn.query_row(
            &format!(
                "SELECT id FROM diffs WHERE zone_id=?1 AND version=?2 AND operation=?3 \
                 ORDER BY id {order} LIMIT 1"
            ),
            params![zone_id, i64::from(version), op],
            |r| Ok(r.get_ref(0).ok().and_then(int)),
        )
        .optional()
        .map_err(sql(action))
        .map(Option::flatten)
    };
    let (Some(low), Some(high)) = (
        edge("ASC", begin, DIFF_DELETE)?,
        edge("DESC", end, DIFF_ADD)?,
    ) else {
        return Ok(None);
    };
    if low > high {
        return Ok(None);
    }
    let mut stmt = conn
        .prepare(
            "SELECT rrtype, ttl, id, rdata, name, operation, version FROM diffs \
             WHERE +zone_id=?1 AND id>=?2 AND id<=?3 ORDER BY id ASC",
        )
        .map_err(sql(action))?;
    let mut rows = stmt
        .query(params![zone_id, low, high])
        .map_err(sql(action))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(sql(action))? {
        let id = row.get_ref(2).ok().and_then(int).unwrap_or(-1);
        let cols = (
            row.get_ref(0).ok().and_then(text),
            row.get_ref(1).ok().and_then(int),
            row.get_ref(3).ok().and_then(text),
            row.get_ref(4).ok().and_then(text),
            row.get_ref(5).ok().and_then(int),
            row.get_ref(6).ok().and_then(int),
        );
        let (Some(rrtype), Some(ttl), Some(rdata), Some(name), Some(op), Some(version)) = cols
        else {
            return Err(AdminError::BadRow {
                table: "diffs",
                id,
                name: String::new(),
                reason: "a NULL or unreadable column".into(),
            });
        };
        let record = parse_row("diffs", id, origin, &name, &rrtype, ttl, &rdata)?;
        let version = u32::try_from(version).map_err(|_| AdminError::BadRow {
            table: "diffs",
            id,
            name: name.clone(),
            reason: format!("version {version} is not a 32-bit serial"),
        })?;
        out.push(DiffRow {
            id,
            version,
            add: op == DIFF_ADD,
            record,
        });
    }
    Ok(Some(out))
}

/// A serial for a message: the number, or "none" (an unreadable SOA).
fn serial_text(serial: Option<u32>) -> String {
    serial.map_or_else(|| "none".to_string(), |s| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zonefile::parse_master_text;
    use std::path::Path;

    fn db() -> Connection {
        let conn = Connection::open_in_memory().expect("open");
        conn.execute_batch(authd_migrations::CREATE_LATEST_SQL)
            .expect("schema");
        conn
    }

    fn origin() -> Name {
        "example.org.".parse().expect("name")
    }

    fn rr(text: &str) -> Record {
        parse_master_text(&format!("{text}\n"), Path::new("t"), &origin()).expect("rr")[0]
            .record
            .clone()
    }

    const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 4294967295 3600 900 1209600 300\n\
        @ NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\n";

    #[test]
    fn serial_arithmetic() {
        assert!(serial_gt(1, 0));
        assert!(serial_gt(0, 0xFFFF_FFFF));
        assert!(!serial_gt(5, 5));
        assert!(!serial_gt(0xFFFF_FFF0, 1230));
    }

    /// Increment wraps; unixtime and dateserial take the clock when it is
    /// ahead of the old serial, else old + 1.
    #[test]
    fn serial_policies() {
        // 2026-12-01T00:00:00Z
        let now = 1_796_083_200;
        assert_eq!(SerialPolicy::Increment.next(u32::MAX, now), 0);
        assert_eq!(SerialPolicy::UnixTime.next(7, now), 1_796_083_200);
        assert_eq!(
            SerialPolicy::UnixTime.next(1_796_083_200, now),
            1_796_083_201
        );
        assert_eq!(SerialPolicy::DateSerial.next(2024060101, now), 2026120100);
        assert_eq!(SerialPolicy::DateSerial.next(2026120100, now), 2026120101);
        assert_eq!(SerialPolicy::DateSerial.next(2026120199, now), 2026120200);
    }

    /// A planner's refusal and an empty change write nothing; a SOA given by
    /// the change replaces the serial policy's.
    #[test]
    fn update_with_planner() {
        let mut conn = db();
        let recs = parse_master_text(ZONE, Path::new("t"), &origin()).expect("zone");
        create_zone(&mut conn, &origin(), &recs).expect("create");
        let journal = |conn: &Connection| -> i64 {
            conn.query_row("SELECT COUNT(*) FROM diffs", [], |r| r.get(0))
                .expect("count")
        };
        let refused = update_zone_with(
            &mut conn,
            &origin(),
            Scope::Zone,
            SerialPolicy::Increment,
            0,
            |rs| {
                assert_eq!(rs.len(), 4, "SOA, NS, two A");
                Err::<Change, _>("no")
            },
        )
        .expect("no SQL error");
        assert_eq!(refused, Err("no"));
        let empty = update_zone_with(
            &mut conn,
            &origin(),
            Scope::Zone,
            SerialPolicy::Increment,
            0,
            |_| Ok::<_, ()>(Change::default()),
        )
        .expect("sql")
        .expect("planned");
        assert_eq!((empty.new_serial, empty.journal_rows), (4294967295, 0));
        assert_eq!(journal(&conn), 0);
        let soa = rr("@ 300 SOA ns hostmaster 5 3600 900 1209600 300").rdata;
        let rep = update_zone_with(
            &mut conn,
            &origin(),
            Scope::Zone,
            SerialPolicy::Increment,
            0,
            |_| {
                Ok::<_, ()>(Change {
                    add: vec![rr("new 300 A 192.0.2.9")],
                    delete: vec![],
                    soa: Some(soa.clone()),
                })
            },
        )
        .expect("sql")
        .expect("planned");
        assert_eq!(
            (rep.old_serial, rep.new_serial, rep.journal_rows),
            (4294967295, 5, 3)
        );
        // A SOA whose serial is not greater: refused, nothing written.
        let stale = update_zone_with(
            &mut conn,
            &origin(),
            Scope::Zone,
            SerialPolicy::Increment,
            0,
            |_| {
                Ok::<_, ()>(Change {
                    soa: Some(soa.clone()),
                    ..Change::default()
                })
            },
        );
        assert!(matches!(stale, Err(AdminError::Update(_))), "{stale:?}");
        assert_eq!(journal(&conn), 3);
    }

    /// `Scope::Names`: the planner sees the apex and those names only (any
    /// case), and the result is still checked there.
    #[test]
    fn update_with_names_scope() {
        let mut conn = db();
        let recs = parse_master_text(ZONE, Path::new("t"), &origin()).expect("zone");
        create_zone(&mut conn, &origin(), &recs).expect("create");
        let names = ["WWW.example.org.".parse().expect("name")];
        let seen = update_zone_with(
            &mut conn,
            &origin(),
            Scope::Names(&names),
            SerialPolicy::Increment,
            0,
            |rs| {
                let types: Vec<RType> = rs.iter().map(|r| r.rtype).collect();
                Err::<Change, _>(types)
            },
        )
        .expect("sql");
        assert_eq!(seen, Err(vec![RType::NS, RType::SOA, RType::A]));
        let broken = update_zone_with(
            &mut conn,
            &origin(),
            Scope::Names(&names),
            SerialPolicy::Increment,
            0,
            |_| {
                Ok::<_, ()>(Change {
                    add: vec![rr("www 300 CNAME ns")],
                    ..Change::default()
                })
            },
        );
        assert!(matches!(broken, Err(AdminError::Update(_))), "{broken:?}");
    }

    #[test]
    fn update_journals_in_bind10_layout_and_wraps() {
        let mut conn = db();
        let recs = parse_master_text(ZONE, Path::new("t"), &origin()).expect("zone");
        create_zone(&mut conn, &origin(), &recs).expect("create");
        assert!(matches!(
            create_zone(&mut conn, &origin(), &recs),
            Err(AdminError::ZoneExists(_))
        ));
        let rep = update_zone(
            &mut conn,
            &origin(),
            &[rr("www 600 A 192.0.2.3")],
            &[rr("www 1 A 192.0.2.2")],
        )
        .expect("update");
        assert_eq!((rep.old_serial, rep.new_serial), (4294967295, 0));
        let rows: Vec<(i64, i64, String, i64, String)> = conn
            .prepare("SELECT version, operation, rrtype, ttl, rdata FROM diffs ORDER BY id")
            .expect("prep")
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .expect("q")
            .collect::<Result<_, _>>()
            .expect("rows");
        let ops: Vec<(i64, i64, &str, i64)> =
            rows.iter().map(|r| (r.0, r.1, r.2.as_str(), r.3)).collect();
        assert_eq!(
            ops,
            vec![
                (4294967295, 1, "SOA", 300),
                (4294967295, 1, "A", 300),
                (0, 0, "SOA", 300),
                (0, 0, "A", 600)
            ]
        );
        let j = read_journal(&conn, 1, &origin(), 4294967295, 0)
            .expect("read")
            .expect("bridges");
        assert_eq!(j.len(), 4);
        assert!(
            read_journal(&conn, 1, &origin(), 7, 0)
                .expect("read")
                .is_none()
        );
        let e =
            update_zone(&mut conn, &origin(), &[], &[rr("www 1 A 192.0.2.2")]).expect_err("absent");
        assert!(e.to_string().contains("not in the zone"), "{e}");
        let e = update_zone(&mut conn, &origin(), &[rr("www 1 CNAME ns")], &[]).expect_err("cname");
        assert!(
            e.to_string()
                .contains("CNAME and other data at www.example.org."),
            "{e}"
        );
        let z = list_zones(&conn).expect("list");
        assert_eq!(z[0].serial, Some(0));
        assert_eq!(z[0].records, 4);
        assert_eq!(z[0].journal, 4);
        assert_eq!(delete_zone(&mut conn, &origin()).expect("delete"), 9);
        assert!(list_zones(&conn).expect("list").is_empty());
    }
}
