//! The catalog consumer (RFC 9432 §5): a `[[secondary]]` with `catalog =
//! true` is followed like any secondary zone; after each transfer that
//! changed it (and at start) [`Consumer::sync`] reads it from the served
//! sources and works out the member zones, which the server then serves as
//! secondary zones ([`Consumer::secondaries`]) with the catalog's
//! `primaries`, `file` and refresh bounds, or those of the
//! `[[catalog.group]]` named by the member's `group` property (§4.4.2).
//!
//! What each member is, and which catalog owns it, is kept in the catalog
//! zone's DB (`authd_catalog_member`, through [`ZoneWriter`]), so a restart
//! resumes where it was:
//! - a member no longer listed stops being served and its data is deleted
//!   (§5.3);
//! - a member whose unique label changed is reset (§5.5): its data deleted
//!   and transferred again;
//! - a zone listed by a second catalog is taken over only when its current
//!   catalog's `coo` property names the new one (§5.6), and reset when its
//!   label there differs;
//! - a member that is also configured locally (a `[[secondary]]`, a
//!   `[[datasource]]` zone) is ignored: the local configuration wins (§5.4);
//!   so is a zone listed twice (the label it is served under wins);
//! - a broken catalog (no or another `version`, two PTRs at one member node,
//!   …: [`super::Broken`]) is not processed: its members keep serving as
//!   they were.
//!
//! Each problem is logged once with the catalog, the label and the zone.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use authd_datasrc::write::CatalogMember;
use authd_datasrc::{Name, Record, SourceList, ZoneWriter};

use super::config::CatalogConfig;
use super::{Catalog, Member, parse};
use crate::secondary::SecondaryZone;

/// A member zone as served: its catalog, its label and its `group` values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// The catalog zone that owns it.
    pub catalog: Name,
    /// Its unique label there.
    pub label: String,
    /// Its `group` property's values.
    pub groups: Vec<String>,
}

/// What one [`Consumer::sync`] changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SyncReport {
    /// Members now served that were not.
    pub added: Vec<Name>,
    /// Members no longer served (their data is deleted by [`Consumer::finish`]).
    pub removed: Vec<Name>,
    /// Members reset (label changed, or moved with another label).
    pub reset: Vec<Name>,
    /// Members moved to another catalog.
    pub moved: Vec<Name>,
    /// Members whose group changed.
    pub regrouped: Vec<Name>,
}

impl SyncReport {
    /// True when the served member set (or a member's settings) changed.
    pub fn changed(&self) -> bool {
        !(self.added.is_empty()
            && self.removed.is_empty()
            && self.reset.is_empty()
            && self.moved.is_empty()
            && self.regrouped.is_empty())
    }
}

/// The member zones served, by zone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Members(BTreeMap<Name, Served>);

impl Members {
    /// How many members are served.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when no member is served.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The member zones to serve as secondary zones, built from their
    /// catalog's `[[secondary]]` (in `configured`) and the first of their
    /// groups `groups` has settings for.
    pub fn secondaries(
        &self,
        configured: &[SecondaryZone],
        groups: &CatalogConfig,
    ) -> Vec<SecondaryZone> {
        let mut out = Vec::with_capacity(self.0.len());
        for (zone, served) in &self.0 {
            let Some(catalog) = configured
                .iter()
                .find(|z| z.catalog && z.origin == served.catalog)
            else {
                continue;
            };
            let mut member = SecondaryZone {
                origin: zone.clone(),
                catalog: false,
                member_of: Some((served.catalog.clone(), served.label.clone())),
                ..catalog.clone()
            };
            if let Some(g) = served.groups.iter().find_map(|g| groups.group(g)) {
                if let Some(p) = &g.primaries {
                    member.primaries = p.clone();
                }
                if let Some(f) = &g.file {
                    member.file = f.clone();
                }
                member.memory = g.memory.unwrap_or(member.memory);
                member.min_refresh = g.min_refresh.unwrap_or(member.min_refresh);
                member.max_refresh = g.max_refresh.unwrap_or(member.max_refresh);
                if member.min_refresh > member.max_refresh {
                    member.max_refresh = member.min_refresh;
                }
            }
            out.push(member);
        }
        out
    }
}

/// The consumer's state: the members served, by zone, and the problems
/// already logged.
#[derive(Default)]
pub struct Consumer {
    /// `None` until the stored members were read (at the first sync).
    members: Option<BTreeMap<Name, Served>>,
    /// Problems logged, so each is logged once.
    logged: HashSet<String>,
    /// Data to delete once the members are no longer served: (zone, writer).
    pending_deletes: Vec<(Name, Arc<dyn ZoneWriter>)>,
}

impl Consumer {
    /// The members served now.
    pub fn members(&self) -> Members {
        Members(self.members.clone().unwrap_or_default())
    }

    /// Logs `message` (at warn) unless it was logged before.
    fn once(&mut self, message: String) {
        if self.logged.insert(message.clone()) {
            tracing::warn!("{message}");
        }
    }

    /// Reads every catalog zone of `configured` (the `catalog = true`
    /// secondaries) from `sources` and works out the members to serve.
    /// `local` tells whether a zone is configured or served otherwise (a
    /// member that is, is ignored). Resets delete the member's data at once,
    /// through its write side in `sources` (so its next refresh transfers it
    /// whole); the data of removed members is deleted by [`Self::finish`],
    /// after the server stopped serving them. The members are stored with
    /// each catalog zone (`authd_catalog_member`).
    ///
    /// Runs on a blocking thread (it reads and writes DBs).
    pub fn sync(
        &mut self,
        configured: &[SecondaryZone],
        sources: &SourceList,
        local: &dyn Fn(&Name) -> bool,
    ) -> SyncReport {
        let catalogs: Vec<&SecondaryZone> = configured.iter().filter(|z| z.catalog).collect();
        let first = self.members.is_none();
        let old = match self.members.take() {
            Some(m) => m,
            None => stored_members(&catalogs, sources),
        };
        // Members of catalogs no longer configured go.
        let mut report = SyncReport::default();
        // Each catalog parsed, or None when absent or broken (kept as is).
        let mut parsed: Vec<(Name, Option<Catalog>)> = Vec::new();
        for c in &catalogs {
            let result = match read_zone(sources, &c.origin) {
                Ok(Some(records)) => parse(&c.origin, &records)
                    .map(Some)
                    .map_err(|b| b.to_string()),
                Ok(None) => Ok(None),
                Err(e) => Err(format!("cannot read it: {e}")),
            };
            match result {
                Ok(Some(cat)) => {
                    for p in &cat.problems {
                        self.once(format!(
                            "catalog zone {}: member label {}: {}; ignored",
                            c.origin, p.label, p.reason
                        ));
                    }
                    parsed.push((c.origin.clone(), Some(cat)));
                }
                Ok(None) => parsed.push((c.origin.clone(), None)),
                Err(e) => {
                    let kept = old.values().filter(|s| s.catalog == c.origin).count();
                    self.once(format!(
                        "catalog zone {}: broken: {e}; not processed, its {kept} member(s) keep \
                         serving as they were",
                        c.origin
                    ));
                    parsed.push((c.origin.clone(), None));
                }
            }
        }
        let frozen: HashSet<&Name> = parsed
            .iter()
            .filter(|(_, c)| c.is_none())
            .map(|(o, _)| o)
            .collect();
        let coo_of = |catalog: &Name, zone: &Name| -> Option<Name> {
            parsed
                .iter()
                .find(|(o, _)| o == catalog)
                .and_then(|(_, c)| c.as_ref())
                .and_then(|c| c.by_zone(zone))
                .and_then(|m| m.coo.clone())
        };
        let mut new: BTreeMap<Name, Served> = BTreeMap::new();
        // Members of broken or not yet transferred catalogs stay as they were.
        for (zone, s) in &old {
            if frozen.contains(&s.catalog) {
                new.insert(zone.clone(), s.clone());
            }
        }
        let mut problems = Vec::new();
        for (origin, cat) in &parsed {
            let Some(cat) = cat else { continue };
            // A zone listed under two labels: the label it is served under
            // wins, else the first.
            let mut chosen: Vec<&Member> = Vec::new();
            for m in &cat.members {
                match chosen.iter().position(|c| c.zone == m.zone) {
                    None => chosen.push(m),
                    Some(i) => {
                        let keep_new = old
                            .get(&m.zone)
                            .is_some_and(|s| s.catalog == *origin && s.label == m.label);
                        let dropped = if keep_new {
                            std::mem::replace(&mut chosen[i], m)
                        } else {
                            m
                        };
                        problems.push(format!(
                            "catalog zone {origin}: member label {}: zone {} is listed under \
                             another label too; ignored",
                            dropped.label, dropped.zone
                        ));
                    }
                }
            }
            for m in chosen {
                // Handed over (coo) to a catalog we consume that lists it:
                // that one takes it (§5.6).
                if let Some(to) = &m.coo
                    && to != origin
                    && parsed
                        .iter()
                        .find(|(o, _)| o == to)
                        .and_then(|(_, c)| c.as_ref())
                        .is_some_and(|c| c.by_zone(&m.zone).is_some())
                {
                    continue;
                }
                if local(&m.zone) {
                    problems.push(format!(
                        "catalog zone {origin}: member label {}: zone {} is also configured \
                         locally; the local configuration wins",
                        m.label, m.zone
                    ));
                    continue;
                }
                if let Some(taken) = new.get(&m.zone) {
                    problems.push(format!(
                        "catalog zone {origin}: member label {}: zone {} belongs to catalog {} \
                         (no coo property naming {origin}); ignored",
                        m.label, m.zone, taken.catalog
                    ));
                    continue;
                }
                let served = Served {
                    catalog: origin.clone(),
                    label: m.label.clone(),
                    groups: m.groups.clone(),
                };
                match old.get(&m.zone) {
                    None => report.added.push(m.zone.clone()),
                    Some(s) if s.catalog == *origin => {
                        if s.label != m.label {
                            tracing::info!(
                                "catalog zone {origin}: member {}: label {} -> {}: resetting it \
                                 (RFC 9432 §5.5)",
                                m.zone,
                                s.label,
                                m.label
                            );
                            report.reset.push(m.zone.clone());
                        } else if s.groups != m.groups {
                            report.regrouped.push(m.zone.clone());
                        }
                    }
                    Some(s) => {
                        // Owned by another catalog: taken over only when
                        // that one says so (coo), or no longer lists it.
                        let still_listed = parsed
                            .iter()
                            .find(|(o, _)| *o == s.catalog)
                            .and_then(|(_, c)| c.as_ref())
                            .is_some_and(|c| c.by_zone(&m.zone).is_some());
                        let frozen_owner = frozen.contains(&s.catalog)
                            && catalogs.iter().any(|c| c.origin == s.catalog);
                        let coo = coo_of(&s.catalog, &m.zone);
                        if frozen_owner || (still_listed && coo.as_ref() != Some(origin)) {
                            problems.push(format!(
                                "catalog zone {origin}: member label {}: zone {} belongs to \
                                 catalog {} (no coo property naming {origin}); ignored",
                                m.label, m.zone, s.catalog
                            ));
                            continue;
                        }
                        tracing::info!(
                            "catalog zone {origin}: member {}: moved from catalog {} (RFC 9432 §5.6)",
                            m.zone,
                            s.catalog
                        );
                        report.moved.push(m.zone.clone());
                        if s.label != m.label {
                            report.reset.push(m.zone.clone());
                        }
                    }
                }
                new.insert(m.zone.clone(), served);
            }
        }
        for p in problems {
            self.once(p);
        }
        for (zone, s) in &old {
            if !new.contains_key(zone) {
                tracing::info!(
                    "catalog zone {}: member {zone} (label {}) removed; its data will be deleted",
                    s.catalog,
                    s.label
                );
                report.removed.push(zone.clone());
                // Not served (a removal found at start): it is in its
                // catalog's DB, where members go unless a group says otherwise.
                let writer = match sources.writer(zone) {
                    Ok(Some(w)) => Some(w),
                    _ => sources.writer(&s.catalog).ok().flatten(),
                };
                if let Some(w) = writer {
                    self.pending_deletes.push((zone.clone(), w));
                }
            }
        }
        for zone in &report.reset {
            match sources.writer(zone) {
                Ok(Some(w)) => match w.delete_zone(zone) {
                    Ok(_) => {}
                    Err(e) => tracing::error!("catalog member {zone}: cannot reset it: {e}"),
                },
                Ok(None) => {}
                Err(e) => tracing::error!("catalog member {zone}: cannot reset it: {e}"),
            }
        }
        for c in &catalogs {
            if frozen.contains(&c.origin) {
                continue;
            }
            let rows: Vec<CatalogMember> = new
                .iter()
                .filter(|(_, s)| s.catalog == c.origin)
                .map(|(z, s)| CatalogMember {
                    zone: z.clone(),
                    label: s.label.clone(),
                    groups: s.groups.clone(),
                })
                .collect();
            match sources.writer(&c.origin) {
                Ok(Some(w)) => {
                    if let Err(e) = w.save_catalog_members(&c.origin, &rows) {
                        tracing::error!("catalog zone {}: cannot store its members: {e}", c.origin);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::error!("catalog zone {}: cannot store its members: {e}", c.origin)
                }
            }
        }
        if report.changed() || first {
            let per: Vec<String> = catalogs
                .iter()
                .map(|c| {
                    let n = new.values().filter(|s| s.catalog == c.origin).count();
                    format!("{} {n}", c.origin)
                })
                .collect();
            tracing::info!(
                "catalog members: {} added, {} removed, {} reset, {} moved, {} regrouped; serving {}",
                report.added.len(),
                report.removed.len(),
                report.reset.len(),
                report.moved.len(),
                report.regrouped.len(),
                per.join(", ")
            );
        }
        self.members = Some(new);
        report
    }

    /// Deletes the data of the members [`Self::sync`] removed (call once
    /// the server no longer serves them).
    pub fn finish(&mut self) {
        for (zone, w) in self.pending_deletes.drain(..) {
            match w.delete_zone(&zone) {
                Ok(true) => tracing::info!("catalog member {zone}: data deleted"),
                Ok(false) => {}
                Err(e) => tracing::error!("catalog member {zone}: cannot delete its data: {e}"),
            }
        }
    }
}

/// The members stored with each catalog zone, by zone.
fn stored_members(catalogs: &[&SecondaryZone], sources: &SourceList) -> BTreeMap<Name, Served> {
    let mut out = BTreeMap::new();
    for c in catalogs {
        let rows = match sources.writer(&c.origin) {
            Ok(Some(w)) => w.catalog_members(&c.origin),
            _ => Ok(Vec::new()),
        };
        match rows {
            Ok(rows) => {
                for m in rows {
                    out.entry(m.zone).or_insert(Served {
                        catalog: c.origin.clone(),
                        label: m.label,
                        groups: m.groups,
                    });
                }
            }
            Err(e) => tracing::error!("catalog zone {}: cannot read its members: {e}", c.origin),
        }
    }
    out
}

/// Every RR of zone `origin` as served (`None`: not served, or no copy yet).
fn read_zone(sources: &SourceList, origin: &Name) -> Result<Option<Vec<Record>>, String> {
    let Some((source, zone)) = sources.find_zone(origin).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    if zone.origin != *origin {
        return Ok(None);
    }
    let rrsets = source.zone_rrsets(&zone).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for set in rrsets {
        for rdata in &set.rdatas {
            out.push(Record {
                owner: set.owner.clone(),
                rtype: set.rtype,
                class: set.class,
                ttl: set.ttl,
                rdata: rdata.clone(),
            });
        }
    }
    Ok(Some(out))
}

/// The zones `sources` serves that are not in `secondaries` (the
/// configured secondary zones and the catalog members): a member that is
/// one of them is ignored.
pub fn locally_served(sources: &SourceList, secondaries: &[SecondaryZone]) -> HashSet<Name> {
    let mut out = HashSet::new();
    for (_, zones) in sources.zones() {
        for z in zones.unwrap_or_default() {
            if !secondaries.iter().any(|s| s.origin == z.origin) {
                out.insert(z.origin);
            }
        }
    }
    out
}
