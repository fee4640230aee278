//! The cache's write side: the wrapped source's, passed through, with each
//! zone a write changed noted for the cache to drop ([`Invalidations`])
//! before the write returns, so the next lookup misses that zone's entries
//! (and only that zone's) and reads what was written.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use authd_datasrc::sqlite_load::LoadReport;
use authd_datasrc::write::{
    Change, DiffRow, Difference, JournalPolicy, Scope, SecondaryState, SerialPolicy, UpdateReport,
};
use authd_datasrc::zonefile::SourcedRecord;
use authd_datasrc::{Name, Rdata, Record, WriteError, ZoneWriter};

/// Zones written and not yet dropped from the cache, and a stamp that moves
/// with each (read by every lookup: one atomic load).
#[derive(Default)]
pub(crate) struct Invalidations {
    /// Each zone noted, and whether the zone table must be read again too
    /// (a replacement may have created the zone).
    zones: Mutex<Vec<(Name, bool)>>,
    stamp: AtomicU64,
}

impl Invalidations {
    /// Notes that zone `origin` was written (`created`: perhaps created).
    fn note(&self, origin: &Name, created: bool) {
        let mut zones = self.zones.lock().unwrap_or_else(PoisonError::into_inner);
        match zones.iter_mut().find(|(z, _)| z == origin) {
            Some((_, c)) => *c |= created,
            None => zones.push((origin.clone(), created)),
        }
        // Moved while the list is held: a reader that sees the new stamp
        // takes a list that has the zone.
        self.stamp.fetch_add(1, Ordering::AcqRel);
    }

    /// The stamp now.
    pub(crate) fn stamp(&self) -> u64 {
        self.stamp.load(Ordering::Acquire)
    }

    /// The zones noted since the last call.
    pub(crate) fn take(&self) -> Vec<(Name, bool)> {
        std::mem::take(&mut *self.zones.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// See the module docs.
pub(crate) struct CacheWriter {
    inner: Arc<dyn ZoneWriter>,
    invalidations: Arc<Invalidations>,
}

impl CacheWriter {
    pub(crate) fn new(inner: Arc<dyn ZoneWriter>, invalidations: Arc<Invalidations>) -> Self {
        CacheWriter {
            inner,
            invalidations,
        }
    }

    /// Notes `origin` after a write that may have changed it: a failed
    /// write too (it changed nothing, but dropping costs only misses).
    fn written<T>(&self, origin: &Name, result: Result<T, WriteError>) -> Result<T, WriteError> {
        self.invalidations.note(origin, false);
        result
    }
}

impl ZoneWriter for CacheWriter {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn replace_zone(
        &self,
        origin: &Name,
        records: &[SourcedRecord],
        journal: JournalPolicy,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<LoadReport, WriteError> {
        let r = self.inner.replace_zone(origin, records, journal, progress);
        self.invalidations.note(origin, true);
        r
    }

    fn apply_differences(&self, origin: &Name, diffs: &[Difference]) -> Result<usize, WriteError> {
        let r = self.inner.apply_differences(origin, diffs);
        self.written(origin, r)
    }

    fn update(
        &self,
        origin: &Name,
        scope: Scope<'_>,
        serial: SerialPolicy,
        now: u64,
        plan: &mut dyn FnMut(&[Record]) -> Option<Change>,
    ) -> Result<Option<UpdateReport>, WriteError> {
        let r = self.inner.update(origin, scope, serial, now, plan);
        // A refused plan or an empty change wrote nothing.
        match &r {
            Ok(Some(report)) if report.journal_rows > 0 => self.written(origin, r),
            Err(_) => self.written(origin, r),
            _ => r,
        }
    }

    fn journal(
        &self,
        origin: &Name,
        begin: u32,
        end: u32,
    ) -> Result<Option<Vec<DiffRow>>, WriteError> {
        self.inner.journal(origin, begin, end)
    }

    fn change_mark(&self) -> Result<u64, WriteError> {
        self.inner.change_mark()
    }

    fn apex_soas(&self) -> Result<Vec<(Name, u32, Rdata)>, WriteError> {
        self.inner.apex_soas()
    }

    fn soa(&self, origin: &Name) -> Result<Option<Record>, WriteError> {
        self.inner.soa(origin)
    }

    fn secondary_state(&self, origin: &Name) -> Result<Option<SecondaryState>, WriteError> {
        self.inner.secondary_state(origin)
    }

    fn save_secondary_state(
        &self,
        origin: &Name,
        state: &SecondaryState,
    ) -> Result<(), WriteError> {
        // The zone's data is untouched.
        self.inner.save_secondary_state(origin, state)
    }
}
