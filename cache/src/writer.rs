//! The cache's write side: the wrapped source's, passed through, with what
//! each write changed ([`Changed`]: the owner names, or the whole zone)
//! noted for the cache ([`Invalidations`]) before the write returns, so the
//! next lookup misses the entries the write reached (and only those) and
//! reads what was written.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use authd_datasrc::sqlite_load::LoadReport;
use authd_datasrc::write::{
    CatalogMember, Change, DiffRow, Difference, JournalPolicy, Scope, SecondaryState, SerialPolicy,
    UpdateReport,
};
use authd_datasrc::zonefile::SourcedRecord;
use authd_datasrc::{Name, RType, Rdata, Record, WriteError, ZoneWriter};

/// Changes of more RRs than this drop the whole zone: listing them would
/// cost more than the misses they spare.
const MAX_LISTED: usize = 4096;

/// What one write changed in a zone, as far as the cache's entries go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Changed {
    /// Anything: the zone was replaced, the change was too large to list, or
    /// a write failed before its change was known.
    All,
    /// The RRs of some owner names (a dynamic update, an IXFR).
    Names(Box<NamesChanged>),
}

/// The owner names a change touched and what it reaches beyond them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NamesChanged {
    /// Each owner name changed and each of its ancestors up to the apex
    /// (whether names exist below a name, or an empty non-terminal, may have
    /// changed there); the apex always (its SOA serial moved).
    pub(crate) names: HashSet<Name>,
    /// NSEC or RRSIG RRs changed: any covering-NSEC answer may be stale.
    pub(crate) nsec: bool,
    /// NSEC3, NSEC3PARAM or RRSIG RRs changed: any covering-NSEC3 answer.
    pub(crate) nsec3: bool,
    /// A zone cut (NS below the apex), a DNAME or a wildcard changed: which
    /// additional-section addresses a name has (glue, synthesis) may have
    /// changed for names the change does not list.
    pub(crate) additional: bool,
}

impl Changed {
    /// The change of `records` (added or deleted) in the zone at `origin`.
    pub(crate) fn of_records<'r>(
        origin: &Name,
        records: impl IntoIterator<Item = &'r Record>,
    ) -> Changed {
        let mut c = NamesChanged::default();
        c.names.insert(origin.clone());
        for (i, r) in records.into_iter().enumerate() {
            if i == MAX_LISTED {
                return Changed::All;
            }
            match r.rtype {
                RType::NSEC => c.nsec = true,
                RType::NSEC3 | RType::NSEC3PARAM => c.nsec3 = true,
                RType::RRSIG => (c.nsec, c.nsec3) = (true, true),
                RType::DNAME => c.additional = true,
                RType::NS if r.owner != *origin => c.additional = true,
                _ => {}
            }
            c.additional |= r.owner.is_wildcard();
            let mut name = Some(r.owner.clone());
            while let Some(n) = name {
                if n == *origin || !n.is_subdomain_of(origin) || c.names.contains(&n) {
                    // Its ancestors are listed already (or it is outside the
                    // zone, where nothing is cached for this zone).
                    c.names.insert(n);
                    break;
                }
                name = n.parent();
                c.names.insert(n);
            }
        }
        Changed::Names(Box::new(c))
    }

    /// Both changes, as one.
    pub(crate) fn merge(&mut self, other: Changed) {
        match (&mut *self, other) {
            (Changed::All, _) => {}
            (_, Changed::All) => *self = Changed::All,
            (Changed::Names(a), Changed::Names(b)) => {
                a.names.extend(b.names);
                a.nsec |= b.nsec;
                a.nsec3 |= b.nsec3;
                a.additional |= b.additional;
            }
        }
    }
}

/// What a write changed in one zone, noted for the cache.
#[derive(Debug)]
pub(crate) struct Noted {
    /// The zone's apex.
    pub(crate) zone: Name,
    /// Whether the zone table must be read again too (a replacement may have
    /// created the zone).
    pub(crate) created: bool,
    pub(crate) changed: Changed,
}

/// Zones written and not yet dropped from the cache, and a stamp that moves
/// with each (read by every lookup: one atomic load).
#[derive(Default)]
pub(crate) struct Invalidations {
    zones: Mutex<Vec<Noted>>,
    stamp: AtomicU64,
}

impl Invalidations {
    /// Notes that zone `origin` was written (`created`: perhaps created).
    fn note(&self, origin: &Name, created: bool, changed: Changed) {
        let mut zones = self.zones.lock().unwrap_or_else(PoisonError::into_inner);
        match zones.iter_mut().find(|n| n.zone == *origin) {
            Some(n) => {
                n.created |= created;
                n.changed.merge(changed);
            }
            None => zones.push(Noted {
                zone: origin.clone(),
                created,
                changed,
            }),
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
    pub(crate) fn take(&self) -> Vec<Noted> {
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

    /// Notes `changed` of `origin` after a write that may have made it: a
    /// failed write too (it changed nothing, but dropping costs only misses).
    fn written<T>(
        &self,
        origin: &Name,
        changed: Changed,
        result: Result<T, WriteError>,
    ) -> Result<T, WriteError> {
        self.invalidations.note(origin, false, changed);
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
        self.invalidations.note(origin, true, Changed::All);
        r
    }

    fn apply_differences(&self, origin: &Name, diffs: &[Difference]) -> Result<usize, WriteError> {
        let r = self.inner.apply_differences(origin, diffs);
        let changed = Changed::of_records(
            origin,
            diffs.iter().flat_map(|d| {
                [&d.old_soa, &d.new_soa]
                    .into_iter()
                    .chain(&d.deleted)
                    .chain(&d.added)
            }),
        );
        self.written(origin, changed, r)
    }

    fn update(
        &self,
        origin: &Name,
        scope: Scope<'_>,
        serial: SerialPolicy,
        now: u64,
        plan: &mut dyn FnMut(&[Record]) -> Option<Change>,
    ) -> Result<Option<UpdateReport>, WriteError> {
        // The change the plan gave (the last, if the write side planned twice).
        let mut planned = None;
        let mut noting = |rrs: &[Record]| {
            let change = plan(rrs);
            planned = change
                .as_ref()
                .map(|c| Changed::of_records(origin, c.add.iter().chain(&c.delete)));
            change
        };
        let r = self.inner.update(origin, scope, serial, now, &mut noting);
        // A refused plan or an empty change wrote nothing.
        match &r {
            Ok(Some(report)) if report.journal_rows > 0 => {
                self.written(origin, planned.unwrap_or(Changed::All), r)
            }
            Err(_) => self.written(origin, planned.unwrap_or(Changed::All), r),
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

    fn input_serial(&self, origin: &Name) -> Result<Option<u32>, WriteError> {
        self.inner.input_serial(origin)
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

    fn delete_zone(&self, origin: &Name) -> Result<bool, WriteError> {
        let r = self.inner.delete_zone(origin);
        self.invalidations.note(origin, true, Changed::All);
        r
    }

    fn catalog_members(&self, catalog: &Name) -> Result<Vec<CatalogMember>, WriteError> {
        self.inner.catalog_members(catalog)
    }

    fn save_catalog_members(
        &self,
        catalog: &Name,
        members: &[CatalogMember],
    ) -> Result<(), WriteError> {
        // No zone's data changes.
        self.inner.save_catalog_members(catalog, members)
    }

    fn set_signing(
        &self,
        origin: &Name,
        policy: Option<&authd_datasrc::signer::policy::Policy>,
    ) -> Result<bool, WriteError> {
        // Nothing served changes until the zone is signed.
        self.inner.set_signing(origin, policy)
    }

    fn sign_pending(
        &self,
        origin: &Name,
        serial: SerialPolicy,
        now: u64,
    ) -> Result<Option<UpdateReport>, WriteError> {
        let r = self.inner.sign_pending(origin, serial, now);
        // SQL edits and new signatures: anything of the zone may differ.
        match &r {
            Ok(None) => r,
            _ => self.written(origin, Changed::All, r),
        }
    }

    fn signed_zones(&self) -> Result<Vec<authd_datasrc::write::SignedZone>, WriteError> {
        self.inner.signed_zones()
    }

    fn signing_keys(
        &self,
        origin: &Name,
    ) -> Result<Vec<authd_datasrc::write::KeyStatus>, WriteError> {
        self.inner.signing_keys(origin)
    }

    fn key_event(
        &self,
        origin: &Name,
        event: authd_datasrc::write::KeyEvent,
        serial: SerialPolicy,
        now: u64,
    ) -> Result<String, WriteError> {
        // New keys and signatures anywhere in the zone.
        let r = self.inner.key_event(origin, event, serial, now);
        self.written(origin, Changed::All, r)
    }
}
