//! The write side of the data-source seam: one path for every writer.
//!
//! Reads go `DataSource` → `NodeStore` → [`crate::finder`]; writes go
//! [`DataSource::writer`](crate::DataSource::writer) (or
//! [`SourceList::writer`](crate::SourceList::writer), by zone origin) → a
//! [`ZoneWriter`] → one transaction per change, with the SOA serial moved and
//! the difference journaled (RFC 1995), as BIND 10's
//! `DataSourceClient::getUpdater(zone, replace, journaling)` and
//! `getJournalReader(zone, begin, end)` did. UPDATE (RFC 2136), incoming
//! AXFR/IXFR, the secondary timers, NOTIFY out, IXFR out, `zone` and
//! `loadzone` all use it; a commit is visible to the serving source's next
//! query at once (the source bumps its own generation).
//!
//! This module holds the backend-neutral vocabulary of writes (a change, a
//! difference, a journal row, serial arithmetic) and the trait; the sqlite3
//! implementation is [`crate::sqlite::SqliteWriter`].

use crate::name::Name;
use crate::rr::{RType, Rdata, Record};
use crate::sqlite_load::{LoadError, LoadReport};
use crate::zonefile::SourcedRecord;

/// Why an administrative operation failed. In every case a transaction that was
/// open is rolled back, so the DB is as it was before the call.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The zone is not in the DB (class IN).
    #[error("zone {0} is not in the DB")]
    NoZone(String),
    /// `create` of a zone that already exists.
    #[error("zone {0} already exists (use loadzone to replace its content)")]
    ZoneExists(String),
    /// An SQL statement failed (locked DB, not a 2.x schema, ...).
    #[error("{action} failed: {source}")]
    Sqlite {
        /// What was being done.
        action: &'static str,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// A stored row cannot be read (bad name, type, TTL or rdata text).
    #[error("{table} row {id} ({name}): {reason}")]
    BadRow {
        /// `records`, `nsec3` or `diffs`.
        table: &'static str,
        /// The row's `id`.
        id: i64,
        /// The row's owner name as stored.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The zone content fails the zone checks (no SOA, no apex NS, CNAME beside
    /// other data, ...); the message names the offending owner and the row.
    #[error("{0}")]
    Check(String),
    /// An update that cannot be applied (deleting an absent RR, adding a
    /// present one, touching the SOA or NSEC3 chain, ...).
    #[error("{0}")]
    Update(String),
    /// Loading records (zone creation) failed.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The source cannot do this kind of write (a memory zone loaded from a
    /// master file, say).
    #[error("{0}")]
    NotSupported(String),
    /// The DB cannot be opened for writing (missing, not writable, locked,
    /// not a zone DB); the message names the file. Tried again at the next
    /// write, except for a DB served immutable or a handle opened
    /// read-only, which refuse every write.
    #[error("{0}")]
    Open(String),
    /// The storage failed: the DB is corrupt (SQLite's `SQLITE_CORRUPT`,
    /// `SQLITE_NOTADB`, or a file shortened that fails `quick_check`),
    /// read-only, or an I/O error (`SQLITE_IOERR`, `SQLITE_FULL`) ended the transaction;
    /// the message names the file. Nothing of the change is kept, after a
    /// crash too ([`crate::sqlite::SqliteWriter`] voids what a failed commit
    /// may have left in the write-ahead log).
    #[error("{0}")]
    Storage(String),
    /// Another writer held the DB past the lock wait ([`WRITE_LOCK_WAIT`];
    /// `SQLITE_BUSY`, `SQLITE_LOCKED`): nothing written, worth retrying; the
    /// message names the file.
    #[error("{0}")]
    Busy(String),
    /// The zone is under a signing policy and cannot be signed (keys in the
    /// zone that authd does not hold, the clock behind the last signing, a
    /// corrupt key row); nothing is written, the signed version stays.
    #[error("{0}")]
    Signing(String),
    /// The storage behind the writer changed under it (the DB file was
    /// deleted or replaced while served): nothing is written until a reload
    /// opens the new one.
    #[error("{0}")]
    Gone(String),
}

impl WriteError {
    /// True when another writer held the DB's lock past the wait (SQLite's
    /// `SQLITE_BUSY` or `SQLITE_LOCKED` on the write): nothing was written,
    /// and a later try may succeed.
    pub fn is_busy(&self) -> bool {
        let source = match self {
            WriteError::Busy(_) => return true,
            WriteError::Sqlite { source, .. }
            | WriteError::Load(LoadError::Sqlite { source, .. }) => source,
            _ => return false,
        };
        matches!(
            source.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    }
}

/// RFC 1982 §3.2: `a` is greater than `b` in 32-bit serial number arithmetic.
pub fn serial_gt(a: u32, b: u32) -> bool {
    a != b && a.wrapping_sub(b) < 0x8000_0000
}

/// What [`update_zone`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpdateReport {
    /// The SOA serial before.
    pub old_serial: u32,
    /// The SOA serial after (per the [`SerialPolicy`], or the SOA the change
    /// gave; equal to the old one when nothing changed).
    pub new_serial: u32,
    /// RRs added.
    pub added: usize,
    /// RRs deleted.
    pub deleted: usize,
    /// Rows appended to `diffs`.
    pub journal_rows: usize,
}

/// How the SOA serial moves when a change is applied (RFC 1982 arithmetic:
/// the new serial is always greater than the old one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SerialPolicy {
    /// Old serial + 1 (wrapping).
    #[default]
    Increment,
    /// The current Unix time in seconds, or old + 1 when that is not greater.
    UnixTime,
    /// `YYYYMMDDnn` of the current UTC date with `nn` = 00, or old + 1 when
    /// that is not greater.
    DateSerial,
}

impl SerialPolicy {
    /// The serial after `old` at Unix time `now` (seconds).
    pub fn next(self, old: u32, now: u64) -> u32 {
        let candidate = match self {
            SerialPolicy::Increment => None,
            SerialPolicy::UnixTime => u32::try_from(now).ok(),
            SerialPolicy::DateSerial => {
                let days = i64::try_from(now / 86_400).unwrap_or(0);
                let (y, m, d) = crate::rdata_text::types::civil_from_days(days);
                u32::try_from(y * 1_000_000 + m * 10_000 + d * 100).ok()
            }
        };
        candidate
            .filter(|c| serial_gt(*c, old))
            .unwrap_or_else(|| old.wrapping_add(1))
    }
}

/// A change to a zone, worked out by [`update_zone_with`]'s planner from the
/// zone's content read inside the update's transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Change {
    /// RRs to add (absent from the zone).
    pub add: Vec<Record>,
    /// RRs to delete (matched on owner, type and RDATA; TTL ignored).
    pub delete: Vec<Record>,
    /// A replacement apex SOA RDATA whose serial is greater than the current
    /// one (RFC 2136 §3.4.2.2); `None`: the serial moves per the
    /// [`SerialPolicy`].
    pub soa: Option<Rdata>,
}

impl Change {
    /// True when the change changes nothing.
    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.delete.is_empty() && self.soa.is_none()
    }
}

/// What [`update_zone_with`] reads, gives its planner and checks after.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// The whole zone (`records` and `nsec3`): the result gets every check
    /// of [`check_stored_zone`].
    Zone,
    /// The RRs at these owner names and at the apex only (a dynamic update
    /// into a large zone): the change must touch no other name, and the
    /// zone checks (one SOA, apex NS, CNAME exclusivity, names in the zone)
    /// run over those names, which is where a change can break them.
    Names(&'a [Name]),
}

/// One difference sequence of an incremental transfer (RFC 1995 §4): the
/// zone at `old_soa`'s serial becomes the zone at `new_soa`'s by deleting
/// `deleted` and adding `added` (neither holds a SOA).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The SOA before.
    pub old_soa: Record,
    /// RRs deleted (matched on owner, type and RDATA; TTL ignored).
    pub deleted: Vec<Record>,
    /// The SOA after.
    pub new_soa: Record,
    /// RRs added.
    pub added: Vec<Record>,
}

impl Difference {
    /// The difference from `old` to `new`, two versions of one zone's RRs
    /// (each with its apex SOA): the RRs only in `old` deleted, those only in
    /// `new` added; an RR whose TTL changed is deleted and added (RFC 1995
    /// has no change of TTL alone, as BIND's `ixfr-from-differences` does).
    /// `None` when either version has no SOA. Matching is on owner (case
    /// ignored), type, class and RDATA.
    pub fn between<'a>(
        old: impl IntoIterator<Item = &'a Record>,
        new: impl IntoIterator<Item = &'a Record>,
    ) -> Option<Difference> {
        let mut old_soa = None;
        let mut before: std::collections::HashMap<
            (&Name, RType, crate::rr::Class, &Rdata),
            (u32, usize),
        > = std::collections::HashMap::new();
        for r in old {
            if r.rtype == RType::SOA {
                old_soa = Some(r.clone());
                continue;
            }
            before
                .entry((&r.owner, r.rtype, r.class, &r.rdata))
                .or_insert((r.ttl, 0))
                .1 += 1;
        }
        let mut new_soa = None;
        let mut added = Vec::new();
        for r in new {
            if r.rtype == RType::SOA {
                new_soa = Some(r.clone());
                continue;
            }
            match before.get_mut(&(&r.owner, r.rtype, r.class, &r.rdata)) {
                Some((ttl, n)) if *ttl == r.ttl && *n > 0 => *n -= 1,
                _ => added.push(r.clone()),
            }
        }
        let mut deleted: Vec<Record> = Vec::new();
        for ((owner, rtype, class, rdata), (ttl, n)) in before {
            for _ in 0..n {
                deleted.push(Record {
                    owner: owner.clone(),
                    rtype,
                    class,
                    ttl,
                    rdata: rdata.clone(),
                });
            }
        }
        // TTL changes: the old RR with its old TTL goes (it was matched above
        // only when the TTL agreed).
        Some(Difference {
            old_soa: old_soa?,
            deleted,
            new_soa: new_soa?,
            added,
        })
    }

    /// The SOA serials before and after (`None`: an SOA RDATA unreadable).
    pub fn serials(&self) -> Option<(u32, u32)> {
        Some((
            self.old_soa.rdata.soa_serial()?,
            self.new_soa.rdata.soa_serial()?,
        ))
    }

    /// RRs in the difference, both SOAs included (what a journal row count is).
    pub fn len(&self) -> usize {
        self.deleted.len() + self.added.len() + 2
    }

    /// Never: a difference holds two SOAs.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// The journal rows from serial `begin` to serial `end` in `history` (the
/// zone's differences, oldest first, each starting where the previous one
/// ended), as [`ZoneWriter::journal`] gives them: each difference's old SOA
/// and deletions, then its new SOA and additions. `None` when no run of
/// differences leads from `begin` to `end`.
pub fn journal_rows(history: &[Difference], begin: u32, end: u32) -> Option<Vec<DiffRow>> {
    let first = history
        .iter()
        .position(|d| d.serials().is_some_and(|(old, _)| old == begin))?;
    let mut rows = Vec::new();
    let mut id = 0i64;
    let mut row = |version: u32, add: bool, record: &Record, rows: &mut Vec<DiffRow>| {
        id += 1;
        rows.push(DiffRow {
            id,
            version,
            add,
            record: record.clone(),
        });
    };
    let mut at = begin;
    for d in &history[first..] {
        let (old, new) = d.serials()?;
        if old != at {
            return None;
        }
        row(old, false, &d.old_soa, &mut rows);
        for r in &d.deleted {
            row(old, false, r, &mut rows);
        }
        row(new, true, &d.new_soa, &mut rows);
        for r in &d.added {
            row(new, true, r, &mut rows);
        }
        at = new;
        if at == end {
            return Some(rows);
        }
    }
    None
}

/// One journal row (`diffs`), parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffRow {
    /// `diffs.id` (journal order).
    pub id: i64,
    /// The serial the row belongs to.
    pub version: u32,
    /// True for an addition (operation 0), false for a deletion (operation 1).
    pub add: bool,
    /// The RR.
    pub record: Record,
}

/// What happens to a zone's journal when its whole content is replaced
/// ([`ZoneWriter::replace_zone`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalPolicy {
    /// Left as it is (`loadzone`, as BIND 10's `b10-loadzone`).
    Keep,
    /// Cleared in the same transaction (an incoming AXFR: the journal no
    /// longer leads to the new content, and a difference kept from before
    /// would be chained to later ones across the gap).
    Clear,
    /// The difference from the stored version computed and journaled in the
    /// same transaction when the serial grew, else cleared (`loadzone`: IXFR
    /// from differences; see [`crate::sqlite_admin::replace_zone_journaled`]).
    Difference,
}

/// The secondary role's state of one zone, kept with the zone so that its
/// timers survive a restart (RFC 1035 §4.3.5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SecondaryState {
    /// Unix time (seconds) of the last successful refresh, if any.
    pub last_ok: Option<u64>,
    /// The copy expired (no primary answered for the SOA EXPIRE).
    pub expired: bool,
    /// A transfer was started and has not ended (a NOTIFY-triggered one
    /// interrupted by a crash is retried at start, not after REFRESH).
    pub pending: bool,
}

/// A member zone a catalog consumer serves (RFC 9432 §4.3.1), as kept with
/// its catalog zone so that a restart resumes where it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogMember {
    /// The member zone's apex.
    pub zone: Name,
    /// Its unique label in the catalog.
    pub label: String,
    /// Its `group` property's values (§4.4.2).
    pub groups: Vec<String>,
}

/// A zone under a signing policy, as its storage records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedZone {
    /// The zone's apex.
    pub origin: Name,
    /// Plain SQL edits are waiting to be signed.
    pub edits: bool,
    /// When it was last signed (Unix seconds), `None`: not yet.
    pub signed: Option<u64>,
    /// When the next key rollover step falls due (Unix seconds); `None`:
    /// nothing timed.
    pub next_key_event: Option<u64>,
    /// A KSK/CSK rollover waits for this DS RDATA (wire form, SHA-256
    /// digest) at the parent.
    pub awaiting_ds: Option<Vec<u8>>,
}

/// A key event of a zone signed online ([`ZoneWriter::key_event`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyEvent {
    /// Start a rollover now: of the ZSK (`zsk`), else of the KSK or CSK.
    Rollover {
        /// The ZSK, not the KSK/CSK.
        zsk: bool,
    },
    /// The new KSK/CSK's DS is at the parent with this TTL (seconds): seen
    /// at every `parent_agents` entry, or confirmed by the operator.
    DsPublished {
        /// The DS RRset's TTL.
        ttl: u32,
    },
}

/// One key of a zone signed online, without its private material
/// (`authc dnssec status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyStatus {
    /// `csk`, `ksk` or `zsk`.
    pub role: &'static str,
    /// `published`, `active`, `retired` or `removed`.
    pub state: &'static str,
    /// The DNSSEC algorithm number (RFC 8624 §3.1).
    pub algorithm: u8,
    /// The key tag (RFC 4034 Appendix B).
    pub tag: u16,
    /// The DNSKEY flags (256 or 257).
    pub flags: u16,
    /// When it was made or imported (Unix seconds).
    pub created: u64,
    /// When it entered its state (Unix seconds).
    pub changed: u64,
    /// Its DS RR (SHA-256, RFC 4509) in master-file form, for a KSK or CSK.
    pub ds: Option<String>,
}

/// The write side of a data source: every change to a zone goes through it,
/// each in one transaction (all of it or nothing, for a crash too).
///
/// No method has a default: a wrapper (the hot-spot cache) must pass each
/// through, answer it itself or decline it. A source that cannot do one says
/// [`WriteError::NotSupported`].
pub trait ZoneWriter: Send + Sync {
    /// A short label for logs (`sqlite3:/path/zone.sqlite3`).
    fn describe(&self) -> String;

    /// Replaces the whole content of zone `origin` with `records` (checked
    /// first, [`crate::zonefile::check_zone`]), creating the zone if absent.
    /// `progress(done, total)` is called every
    /// [`crate::sqlite_load::PROGRESS_EVERY`] records and at the end.
    ///
    /// Errors: [`WriteError::Load`] (the check failed, or storage); the zone
    /// is unchanged in every case.
    fn replace_zone(
        &self,
        origin: &Name,
        records: &[SourcedRecord],
        journal: JournalPolicy,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<LoadReport, WriteError>;

    /// Applies the differences of an incremental transfer (RFC 1995 §4) in
    /// order, in one transaction, each journaled; the first must start at the
    /// stored serial. Returns the journal rows written.
    ///
    /// Errors: [`WriteError::Update`] for a difference that does not apply,
    /// [`WriteError::Check`] for a result that fails the zone checks, or
    /// storage; the zone is unchanged in every case.
    fn apply_differences(&self, origin: &Name, diffs: &[Difference]) -> Result<usize, WriteError>;

    /// Applies the change `plan` works out from the zone's RRs in `scope`
    /// (read inside the transaction, so the read and the write are one
    /// snapshot), moving the serial per `serial` at Unix time `now` (seconds)
    /// and journaling the change. `plan` returns `None` to refuse (nothing is
    /// written; the caller keeps its own reason); the result is then
    /// `Ok(None)`. An empty change writes nothing (a report with no journal
    /// rows).
    ///
    /// Errors: [`WriteError::Update`], [`WriteError::Check`] (the change is not
    /// applicable, or the result fails the zone checks), [`WriteError::NoZone`],
    /// storage (after at most [`WRITE_LOCK_WAIT`] for another writer's lock);
    /// nothing is written in every case.
    fn update(
        &self,
        origin: &Name,
        scope: Scope<'_>,
        serial: SerialPolicy,
        now: u64,
        plan: &mut dyn FnMut(&[Record]) -> Option<Change>,
    ) -> Result<Option<UpdateReport>, WriteError>;

    /// The journal of zone `origin` from serial `begin` to serial `end`
    /// (IXFR out), checked to start with the deletion of SOA `begin` and end
    /// with the addition of SOA `end`; `None` when it cannot bridge the two
    /// (the caller falls back to a full transfer, RFC 1995 §4).
    ///
    /// Errors: storage, or a journal row that does not parse.
    fn journal(
        &self,
        origin: &Name,
        begin: u32,
        end: u32,
    ) -> Result<Option<Vec<DiffRow>>, WriteError>;

    /// A number that changes whenever anyone (this process or another, SQL
    /// included) commits a change to the storage behind this writer; cheap
    /// enough to poll (NOTIFY out reads [`ZoneWriter::apex_soas`] only when
    /// it moved).
    ///
    /// Errors: storage.
    fn change_mark(&self) -> Result<u64, WriteError>;

    /// Every zone's apex SOA: (apex, TTL in seconds, RDATA); zones whose SOA
    /// does not parse are left out.
    ///
    /// Errors: storage.
    fn apex_soas(&self) -> Result<Vec<(Name, u32, Rdata)>, WriteError>;

    /// The apex SOA of zone `origin`, `None` when the zone or its SOA is absent.
    ///
    /// Errors: storage.
    fn soa(&self, origin: &Name) -> Result<Option<Record>, WriteError>;

    /// For zone `origin` signed online: the SOA serial of the unsigned
    /// version it was last written from whole or by differences (a load, a
    /// transfer), which re-signing moves the served SOA's past; a secondary
    /// asks its primary for changes from this one. `None`: not signed
    /// online, or nothing recorded (the SOA's serial is the content's).
    ///
    /// Errors: storage.
    fn input_serial(&self, origin: &Name) -> Result<Option<u32>, WriteError>;

    /// The secondary role's stored state of zone `origin` (`None`: nothing
    /// stored).
    ///
    /// Errors: storage.
    fn secondary_state(&self, origin: &Name) -> Result<Option<SecondaryState>, WriteError>;

    /// Stores the secondary role's state of zone `origin`.
    ///
    /// Errors: storage.
    fn save_secondary_state(&self, origin: &Name, state: &SecondaryState)
    -> Result<(), WriteError>;

    /// Deletes zone `origin` and everything stored with it (records, NSEC3,
    /// journal, secondary state), in one transaction: a catalog consumer's
    /// member removed from its catalog (RFC 9432 §5.3) or reset (§5.5).
    /// Returns whether the zone was there.
    ///
    /// Errors: storage.
    fn delete_zone(&self, origin: &Name) -> Result<bool, WriteError>;

    /// The member zones catalog consumer state records for catalog zone
    /// `catalog`, by member name.
    ///
    /// Errors: storage.
    fn catalog_members(&self, catalog: &Name) -> Result<Vec<CatalogMember>, WriteError>;

    /// Replaces the recorded members of catalog zone `catalog` with
    /// `members`, in one transaction.
    ///
    /// Errors: storage.
    fn save_catalog_members(
        &self,
        catalog: &Name,
        members: &[CatalogMember],
    ) -> Result<(), WriteError>;

    /// Puts zone `origin` under signing `policy` (online DNSSEC: every
    /// later write of it is signed in its own transaction), or with `None`
    /// takes it out (its signatures stay until they expire). Returns
    /// whether the stored policy changed. The zone is signed at its next
    /// write or [`ZoneWriter::sign_pending`].
    ///
    /// Errors: [`WriteError::NotSupported`] where zones cannot be signed
    /// (a zone from a master file); storage.
    fn set_signing(
        &self,
        origin: &Name,
        policy: Option<&crate::signer::policy::Policy>,
    ) -> Result<bool, WriteError>;

    /// Signs what zone `origin` needs now: its first signing, plain SQL
    /// edits not yet signed, signatures due for refresh (a bounded batch),
    /// moving the serial per `serial` at Unix time `now` (seconds) and
    /// journaling the signed difference. `None`: nothing needed it, or the
    /// zone has no policy.
    ///
    /// Errors: [`WriteError::Signing`], [`WriteError::NoZone`], storage;
    /// nothing is written then.
    fn sign_pending(
        &self,
        origin: &Name,
        serial: SerialPolicy,
        now: u64,
    ) -> Result<Option<UpdateReport>, WriteError>;

    /// The zones of this storage under a signing policy.
    ///
    /// Errors: storage.
    fn signed_zones(&self) -> Result<Vec<SignedZone>, WriteError>;

    /// The keys of zone `origin` (none when it is not signed online).
    ///
    /// Errors: storage, a corrupt key row ([`WriteError::Signing`]).
    fn signing_keys(&self, origin: &Name) -> Result<Vec<KeyStatus>, WriteError>;

    /// Applies key event `event` to zone `origin` at `now` (Unix seconds)
    /// and re-signs the zone with it in one transaction, the serial moved
    /// per `serial`; returns what was done, for the operator.
    ///
    /// Errors: [`WriteError::Signing`] (not signed online, the event does
    /// not apply now), [`WriteError::NotSupported`], storage.
    fn key_event(
        &self,
        origin: &Name,
        event: KeyEvent,
        serial: SerialPolicy,
        now: u64,
    ) -> Result<String, WriteError>;
}

/// How long a write waits for another writer's lock before failing
/// (UPDATE then answers SERVFAIL, a transfer is retried later).
pub const WRITE_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(text: &str) -> Vec<Record> {
        let origin: Name = "example.org.".parse().expect("origin");
        crate::zonefile::parse_master_text(
            &format!("$TTL 300\n{text}"),
            std::path::Path::new("t"),
            &origin,
        )
        .expect("parses")
        .into_iter()
        .map(|s| s.record)
        .collect()
    }

    fn texts(rrs: &[Record]) -> Vec<String> {
        let mut v: Vec<String> = rrs
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} {}",
                    r.owner,
                    r.ttl,
                    r.rtype,
                    r.rdata.to_text(r.rtype).expect("text")
                )
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_difference_of_two_versions() {
        let v1 = zone(
            "@ SOA ns hm 1 1 1 1 1\n@ NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\nWWW A 192.0.2.3\nold TXT x\n",
        );
        let v2 = zone(
            "@ SOA ns hm 2 1 1 1 1\n@ NS ns\nNS A 192.0.2.1\nwww 60 A 192.0.2.2\nwww A 192.0.2.3\nnew TXT y\n",
        );
        let d = Difference::between(&v1, &v2).expect("both have a SOA");
        assert_eq!(d.serials(), Some((1, 2)));
        // Owner case is ignored; a TTL change is a deletion and an addition.
        assert_eq!(
            texts(&d.deleted),
            [
                "old.example.org. 300 TXT \"x\"",
                "www.example.org. 300 A 192.0.2.2"
            ]
        );
        assert_eq!(
            texts(&d.added),
            [
                "new.example.org. 300 TXT \"y\"",
                "www.example.org. 60 A 192.0.2.2"
            ]
        );
        assert_eq!(d.len(), 6);
        assert!(Difference::between(&v1, &v1[1..]).is_none(), "no SOA after");
    }

    #[test]
    fn journal_rows_follow_a_chain_of_differences() {
        let v = |n: u32, extra: &str| {
            zone(&format!(
                "@ SOA ns hm {n} 1 1 1 1\n@ NS ns\nns A 192.0.2.1\n{extra}"
            ))
        };
        let (v1, v2, v3) = (v(1, ""), v(2, "a A 192.0.2.9\n"), v(3, "b A 192.0.2.9\n"));
        let history = [
            Difference::between(&v1, &v2).expect("1-2"),
            Difference::between(&v2, &v3).expect("2-3"),
        ];
        let rows = journal_rows(&history, 1, 3).expect("1 to 3");
        let shape: Vec<(u32, bool, String)> = rows
            .iter()
            .map(|r| {
                (
                    r.version,
                    r.add,
                    format!("{} {}", r.record.owner, r.record.rtype),
                )
            })
            .collect();
        let soa = "example.org. SOA".to_string();
        assert_eq!(
            shape,
            [
                (1, false, soa.clone()),
                (2, true, soa.clone()),
                (2, true, "a.example.org. A".into()),
                (2, false, soa.clone()),
                (2, false, "a.example.org. A".into()),
                (3, true, soa.clone()),
                (3, true, "b.example.org. A".into()),
            ]
        );
        assert!(rows.windows(2).all(|w| w[0].id < w[1].id), "journal order");
        assert_eq!(journal_rows(&history, 2, 3).map(|r| r.len()), Some(4));
        assert_eq!(journal_rows(&history, 1, 2).map(|r| r.len()), Some(3));
        assert!(
            journal_rows(&history, 0, 3).is_none(),
            "no difference from 0"
        );
        assert!(journal_rows(&history, 1, 4).is_none(), "none to 4");
        assert!(journal_rows(&[], 1, 1).is_none());
    }
}
