//! The write sides of memory sources.
//!
//! Zones copied from a DB ([`MemorySource::backed_by`], `MemoryWriter`):
//! each write goes into the DB through its sqlite3 writer (one transaction,
//! journaled), then the zone's snapshot is rebuilt from the DB and swapped
//! in, so the next query sees it and a restart serves it from the DB. Reads
//! of the write side (journal, serials, the secondary role's state) are the
//! DB's.
//!
//! Zones loaded from master files ([`MemorySource::from_master_files`],
//! `HistoryWriter`): no write is taken (edit the file and reload), but the
//! read side is there: the journal is the differences each reload with a
//! greater serial computed ([`MemoryZone::history`]), so secondaries get an
//! IXFR (as NSD's `create-ixfr`, BIND's `ixfr-from-differences` and Knot's
//! `zonefile-load: difference` give them); the change mark and apex SOAs
//! are the source's, for NOTIFY.

use std::collections::HashSet;
use std::sync::{Arc, Weak};

use crate::DataSource;
use crate::memory::{MemorySource, MemoryZone};
use crate::name::Name;
use crate::rr::{Rdata, Record};
use crate::sqlite::SqliteSource;
use crate::sqlite_load::LoadReport;
use crate::write::{
    CatalogMember, Change, DiffRow, Difference, JournalPolicy, Scope, SecondaryState, SerialPolicy,
    UpdateReport, WriteError, ZoneWriter,
};
use crate::zonefile::SourcedRecord;

/// The journal of zone `origin` of `source` from its in-memory history.
fn history_journal(
    source: &Weak<MemorySource>,
    origin: &Name,
    begin: u32,
    end: u32,
) -> Option<Vec<DiffRow>> {
    let zone = source.upgrade()?.zone(origin)?;
    crate::write::journal_rows(zone.history(), begin, end)
}

impl MemorySource {
    /// A source holding `zones` loaded from master files: its write side
    /// takes no write, and reads each zone's journal from its history
    /// (see the module docs).
    pub fn from_master_files(
        label: &str,
        zones: impl IntoIterator<Item = Arc<MemoryZone>>,
    ) -> Arc<MemorySource> {
        MemorySource::with_writer(label, zones, |me| {
            Arc::new(HistoryWriter {
                label: label.to_string(),
                source: me,
            }) as Arc<dyn ZoneWriter>
        })
    }

    /// A source holding `zones`, copied from the DB `db`, whose write side
    /// writes zones `writable` into `db` (journaled, as the sqlite3 source
    /// writes) and then rebuilds the zone's snapshot from it and swaps it in:
    /// a zone served from memory and kept in its DB across restarts (a
    /// `[[secondary]]` with `memory = true`, or UPDATE into a zone copied from
    /// a DB). A write rebuilds the whole zone: cheap for a transfer, dear for
    /// a stream of small updates into a large zone.
    pub fn backed_by(
        label: &str,
        zones: impl IntoIterator<Item = Arc<MemoryZone>>,
        db: Arc<SqliteSource>,
        writable: HashSet<Name>,
    ) -> Arc<MemorySource> {
        MemorySource::with_writer(label, zones, |me| {
            Arc::new(MemoryWriter::new(label, db, writable, me)) as Arc<dyn ZoneWriter>
        })
    }
}

/// See the module docs.
pub struct MemoryWriter {
    label: String,
    db: Arc<SqliteSource>,
    db_writer: Arc<dyn ZoneWriter>,
    writable: HashSet<Name>,
    source: Weak<MemorySource>,
}

impl MemoryWriter {
    pub(crate) fn new(
        label: &str,
        db: Arc<SqliteSource>,
        writable: HashSet<Name>,
        source: Weak<MemorySource>,
    ) -> MemoryWriter {
        let db_writer = db.sqlite_writer() as Arc<dyn ZoneWriter>;
        MemoryWriter {
            label: label.to_string(),
            db,
            db_writer,
            writable,
            source,
        }
    }

    fn allowed(&self, origin: &Name) -> Result<(), WriteError> {
        if self.writable.contains(origin) {
            Ok(())
        } else {
            Err(WriteError::NotSupported(format!(
                "zone {origin} is not written through memory:{}",
                self.label
            )))
        }
    }

    /// Rebuilds zone `origin` from the DB and swaps it in. The write is
    /// committed already: a failure here leaves the previous snapshot
    /// served (until a reload) and is logged and returned.
    fn rebuild(&self, origin: &Name) -> Result<(), WriteError> {
        let Some(source) = self.source.upgrade() else {
            // The source was replaced by a reload, which copied the DB anew.
            return Ok(());
        };
        let stale = |e: String| {
            let text = format!(
                "zone {origin}: written to {} but not rebuilt in memory ({e}); the previous \
                 version is served until a reload",
                self.db.describe()
            );
            tracing::error!("{text}");
            WriteError::Gone(text)
        };
        let zone = match self.db.find_zone(origin) {
            Ok(Some(z)) if z.origin == *origin => z,
            Ok(_) => return Err(stale("the zone is not in the DB".into())),
            Err(e) => return Err(stale(e.to_string())),
        };
        let built =
            MemoryZone::from_source(self.db.as_ref(), &zone).map_err(|e| stale(e.to_string()))?;
        source.insert_zone(built);
        Ok(())
    }
}

impl ZoneWriter for MemoryWriter {
    fn describe(&self) -> String {
        format!("memory:{} (kept in {})", self.label, self.db.describe())
    }

    fn replace_zone(
        &self,
        origin: &Name,
        records: &[SourcedRecord],
        journal: JournalPolicy,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<LoadReport, WriteError> {
        self.allowed(origin)?;
        let report = self
            .db_writer
            .replace_zone(origin, records, journal, progress)?;
        self.rebuild(origin)?;
        Ok(report)
    }

    fn apply_differences(&self, origin: &Name, diffs: &[Difference]) -> Result<usize, WriteError> {
        self.allowed(origin)?;
        let rows = self.db_writer.apply_differences(origin, diffs)?;
        self.rebuild(origin)?;
        Ok(rows)
    }

    fn update(
        &self,
        origin: &Name,
        scope: Scope<'_>,
        serial: SerialPolicy,
        now: u64,
        plan: &mut dyn FnMut(&[Record]) -> Option<Change>,
    ) -> Result<Option<UpdateReport>, WriteError> {
        self.allowed(origin)?;
        let report = self.db_writer.update(origin, scope, serial, now, plan)?;
        if report.is_some_and(|r| r.journal_rows > 0) {
            self.rebuild(origin)?;
        }
        Ok(report)
    }

    fn journal(
        &self,
        origin: &Name,
        begin: u32,
        end: u32,
    ) -> Result<Option<Vec<DiffRow>>, WriteError> {
        if !self.writable.contains(origin) {
            // A zone of a master file in the same source.
            return Ok(history_journal(&self.source, origin, begin, end));
        }
        self.db_writer.journal(origin, begin, end)
    }

    fn change_mark(&self) -> Result<u64, WriteError> {
        self.db_writer.change_mark()
    }

    fn apex_soas(&self) -> Result<Vec<(Name, u32, Rdata)>, WriteError> {
        // Only the zones served from here: another source may serve the
        // DB's other zones (and announce them).
        let Some(source) = self.source.upgrade() else {
            return Ok(Vec::new());
        };
        let mut all = self.db_writer.apex_soas()?;
        all.retain(|(origin, _, _)| source.zone(origin).is_some());
        Ok(all)
    }

    fn soa(&self, origin: &Name) -> Result<Option<Record>, WriteError> {
        self.db_writer.soa(origin)
    }

    fn input_serial(&self, origin: &Name) -> Result<Option<u32>, WriteError> {
        self.db_writer.input_serial(origin)
    }

    fn secondary_state(&self, origin: &Name) -> Result<Option<SecondaryState>, WriteError> {
        self.db_writer.secondary_state(origin)
    }

    fn save_secondary_state(
        &self,
        origin: &Name,
        state: &SecondaryState,
    ) -> Result<(), WriteError> {
        self.allowed(origin)?;
        self.db_writer.save_secondary_state(origin, state)
    }

    /// Deletes the zone from the DB; the served snapshot goes with the next
    /// reload of the source, whose zone list no longer names it.
    fn delete_zone(&self, origin: &Name) -> Result<bool, WriteError> {
        self.allowed(origin)?;
        self.db_writer.delete_zone(origin)
    }

    fn catalog_members(&self, catalog: &Name) -> Result<Vec<CatalogMember>, WriteError> {
        self.db_writer.catalog_members(catalog)
    }

    fn save_catalog_members(
        &self,
        catalog: &Name,
        members: &[CatalogMember],
    ) -> Result<(), WriteError> {
        self.allowed(catalog)?;
        self.db_writer.save_catalog_members(catalog, members)
    }

    fn set_signing(
        &self,
        origin: &Name,
        policy: Option<&crate::signer::policy::Policy>,
    ) -> Result<bool, WriteError> {
        self.allowed(origin)?;
        self.db_writer.set_signing(origin, policy)
    }

    fn sign_pending(
        &self,
        origin: &Name,
        serial: SerialPolicy,
        now: u64,
    ) -> Result<Option<UpdateReport>, WriteError> {
        self.allowed(origin)?;
        let report = self.db_writer.sign_pending(origin, serial, now)?;
        if report.is_some() {
            self.rebuild(origin)?;
        }
        Ok(report)
    }

    fn signed_zones(&self) -> Result<Vec<crate::write::SignedZone>, WriteError> {
        let mut all = self.db_writer.signed_zones()?;
        all.retain(|z| self.writable.contains(&z.origin));
        Ok(all)
    }

    fn signing_keys(&self, origin: &Name) -> Result<Vec<crate::write::KeyStatus>, WriteError> {
        self.db_writer.signing_keys(origin)
    }

    fn key_event(
        &self,
        origin: &Name,
        event: crate::write::KeyEvent,
        serial: SerialPolicy,
        now: u64,
    ) -> Result<String, WriteError> {
        self.allowed(origin)?;
        let done = self.db_writer.key_event(origin, event, serial, now)?;
        self.rebuild(origin)?;
        Ok(done)
    }
}

/// The write side of a source of master-file zones (see the module docs).
struct HistoryWriter {
    label: String,
    source: Weak<MemorySource>,
}

impl HistoryWriter {
    fn refused(&self, origin: &Name) -> WriteError {
        WriteError::NotSupported(format!(
            "zone {origin} is loaded from a master file by memory:{}: edit the file and reload",
            self.label
        ))
    }
}

impl ZoneWriter for HistoryWriter {
    fn describe(&self) -> String {
        format!("memory:{}", self.label)
    }

    fn replace_zone(
        &self,
        origin: &Name,
        _records: &[SourcedRecord],
        _journal: JournalPolicy,
        _progress: &mut dyn FnMut(usize, usize),
    ) -> Result<LoadReport, WriteError> {
        Err(self.refused(origin))
    }

    fn apply_differences(&self, origin: &Name, _diffs: &[Difference]) -> Result<usize, WriteError> {
        Err(self.refused(origin))
    }

    fn update(
        &self,
        origin: &Name,
        _scope: Scope<'_>,
        _serial: SerialPolicy,
        _now: u64,
        _plan: &mut dyn FnMut(&[Record]) -> Option<Change>,
    ) -> Result<Option<UpdateReport>, WriteError> {
        Err(self.refused(origin))
    }

    fn journal(
        &self,
        origin: &Name,
        begin: u32,
        end: u32,
    ) -> Result<Option<Vec<DiffRow>>, WriteError> {
        Ok(history_journal(&self.source, origin, begin, end))
    }

    fn change_mark(&self) -> Result<u64, WriteError> {
        let source = self.source.upgrade().ok_or_else(|| {
            WriteError::Gone(format!("memory:{} was replaced by a reload", self.label))
        })?;
        Ok(source.generation())
    }

    fn apex_soas(&self) -> Result<Vec<(Name, u32, Rdata)>, WriteError> {
        let Some(source) = self.source.upgrade() else {
            return Ok(Vec::new());
        };
        let zones = source
            .zones()
            .map_err(|e| WriteError::Gone(e.to_string()))?;
        Ok(zones
            .iter()
            .filter_map(|z| source.zone(&z.origin)?.soa())
            .map(|soa| (soa.owner, soa.ttl, soa.rdata))
            .collect())
    }

    fn soa(&self, origin: &Name) -> Result<Option<Record>, WriteError> {
        Ok(self
            .source
            .upgrade()
            .and_then(|s| s.zone(origin))
            .and_then(|z| z.soa()))
    }

    /// Master-file zones are not signed online.
    fn input_serial(&self, _origin: &Name) -> Result<Option<u32>, WriteError> {
        Ok(None)
    }

    fn secondary_state(&self, _origin: &Name) -> Result<Option<SecondaryState>, WriteError> {
        // No zone here is a secondary's.
        Ok(None)
    }

    fn save_secondary_state(
        &self,
        origin: &Name,
        _state: &SecondaryState,
    ) -> Result<(), WriteError> {
        Err(self.refused(origin))
    }

    fn delete_zone(&self, origin: &Name) -> Result<bool, WriteError> {
        Err(self.refused(origin))
    }

    fn catalog_members(&self, _catalog: &Name) -> Result<Vec<CatalogMember>, WriteError> {
        // No zone here is a catalog consumer's.
        Ok(Vec::new())
    }

    fn save_catalog_members(
        &self,
        catalog: &Name,
        _members: &[CatalogMember],
    ) -> Result<(), WriteError> {
        Err(self.refused(catalog))
    }
    fn set_signing(
        &self,
        origin: &Name,
        _policy: Option<&crate::signer::policy::Policy>,
    ) -> Result<bool, WriteError> {
        Err(self.refused(origin))
    }

    fn sign_pending(
        &self,
        origin: &Name,
        _serial: SerialPolicy,
        _now: u64,
    ) -> Result<Option<UpdateReport>, WriteError> {
        Err(self.refused(origin))
    }

    fn signed_zones(&self) -> Result<Vec<crate::write::SignedZone>, WriteError> {
        Ok(Vec::new())
    }

    fn signing_keys(&self, _origin: &Name) -> Result<Vec<crate::write::KeyStatus>, WriteError> {
        Ok(Vec::new())
    }

    fn key_event(
        &self,
        origin: &Name,
        _event: crate::write::KeyEvent,
        _serial: SerialPolicy,
        _now: u64,
    ) -> Result<String, WriteError> {
        Err(self.refused(origin))
    }
}
