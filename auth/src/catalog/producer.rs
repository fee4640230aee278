//! The catalog producer (RFC 9432 §4): for each `[[catalog]]`, a catalog
//! zone listing every other zone of one DB, kept up to date as zones are
//! created and deleted there.
//!
//! One thread (`catalog-producer`, off the query path) polls each
//! producer's DB every [`POLL_INTERVAL`]: its change mark
//! ([`ZoneWriter::change_mark`], sqlite3's `PRAGMA data_version`, which moves
//! on any commit: `zone create`, `loadzone`, an `sqlite3` shell, this
//! producer's own commits). When it moved, the DB's zones are read
//! ([`ZoneWriter::apex_soas`]) and the member set is every one of them but
//! the catalog zone and the other `[[catalog]]` zones of the same DB. The
//! catalog is then changed through its write side
//! ([`authd_datasrc::SourceList::writer`]) by [`ZoneWriter::update`], whose
//! planner ([`plan`]) reads the catalog's RRs inside the transaction: a new
//! member gets `<label>.zones.$CATZ 0 PTR zone.`, a member gone loses its PTR
//! and everything under its label (`group`, `coo`, custom properties). The
//! serial moves by one and the change is journaled (IXFR out); NOTIFY out
//! sees the serial move at its next poll. A change that changes nothing
//! writes nothing, so the poll after the producer's own commit is a no-op.
//!
//! Labels are the operator's: a member keeps the label the stored catalog
//! gives it (one changed by UPDATE, `zone update` or SQL stays), and its
//! properties stay; a new member gets [`super::stable_label`], with `-1`,
//! `-2`, ... appended when that label is taken.
//!
//! A catalog zone absent from its DB is created ([`super::skeleton`]: SOA,
//! NS `invalid.`, version "2", serial the Unix time) with its members, by
//! [`ZoneWriter::replace_zone`] on a writer opened on the file. A catalog
//! that is broken (RFC 9432 §4: no version, two PTRs at one label, ...) is
//! not touched: an error says why, and the producer tries again after the
//! next change. Storage errors are logged with the DB's path and retried at
//! the next poll.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use authd_datasrc::sqlite::SqliteWriter;
use authd_datasrc::write::{Change, JournalPolicy, Scope, SerialPolicy, WriteError};
use authd_datasrc::zonefile::SourcedRecord;
use authd_datasrc::{Name, Record, SourceList, ZoneWriter};
use tokio::sync::watch;

use super::config::ProducerConfig;
use super::{Broken, label_text, member_name, member_record, skeleton, stable_label, zones_name};

/// How often each producer's DB is polled for changes.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// What the producers work on: the `[[catalog]]` entries and the sources
/// served (whose write sides the catalog zones are changed through).
#[derive(Clone, Default)]
pub struct ProducerSettings {
    /// The catalog zones produced.
    pub producers: Vec<ProducerConfig>,
    /// The sources served.
    pub sources: SourceList,
}

/// A change a producer works out: what to write and what it means.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The RRs to add and delete.
    pub change: Change,
    /// Members added: (zone, label).
    pub added: Vec<(Name, String)>,
    /// Members removed: (zone, label).
    pub removed: Vec<(Name, String)>,
}

/// The change that makes the catalog `catalog`, whose RRs are `records`,
/// list exactly the zones `members` (lower case): a PTR added for each
/// member it lacks, under a label no node of the catalog uses yet
/// ([`free_label`]); the PTR and every RR under the label of each member
/// not in `members` deleted. Members kept keep their labels and
/// properties; names the schema does not define are left as they are.
///
/// Errors: [`Broken`] when the catalog must not be processed (it is then
/// left as it is).
pub fn plan(catalog: &Name, records: &[Record], members: &BTreeSet<Name>) -> Result<Plan, Broken> {
    let parsed = super::parse(catalog, records)?;
    let mut out = Plan::default();
    // Every label in use under zones.$CATZ (members, members left out,
    // properties of no member): a new member takes none of them.
    let mut taken: BTreeSet<String> = BTreeSet::new();
    if let Some(zones) = zones_name(catalog) {
        let depth = zones.label_count();
        for r in records {
            if r.owner.is_subdomain_of(&zones) && r.owner.label_count() > depth {
                let labels: Vec<&[u8]> = r.owner.labels().collect();
                let at = r.owner.label_count() - depth - 1;
                if let Some(label) = labels.get(at) {
                    taken.insert(label_text(label));
                }
            }
        }
    }
    for m in &parsed.members {
        if members.contains(&m.zone) {
            continue;
        }
        let Some(node) = member_name(catalog, &m.label) else {
            continue;
        };
        out.change.delete.extend(
            records
                .iter()
                .filter(|r| r.owner.is_subdomain_of(&node))
                .cloned(),
        );
        out.removed.push((m.zone.clone(), m.label.clone()));
    }
    for zone in members {
        if parsed.by_zone(zone).is_some() || zone == catalog {
            continue;
        }
        let label = free_label(&stable_label(zone), &taken);
        let Some(record) = member_record(catalog, &label, zone) else {
            continue;
        };
        taken.insert(label.clone());
        out.change.add.push(record);
        out.added.push((zone.clone(), label));
    }
    Ok(out)
}

/// `label`, or the first of `label-1`, `label-2`, ... not in `taken`.
pub fn free_label(label: &str, taken: &BTreeSet<String>) -> String {
    if !taken.contains(label) {
        return label.to_string();
    }
    (1u64..)
        .map(|n| format!("{label}-{n}"))
        .find(|l| !taken.contains(l))
        .unwrap_or_else(|| label.to_string())
}

/// The log line of a change of catalog `catalog` from serial `old` to
/// `new`: `catalog catalog.example.: serial 5 -> 6, added example.org.
/// (label 1a2b3c4d5e6f7a8b), removed example.net.`.
pub fn change_line(catalog: &Name, old: u32, new: u32, plan: &Plan) -> String {
    let mut parts = Vec::new();
    if !plan.added.is_empty() {
        let list: Vec<String> = plan
            .added
            .iter()
            .map(|(z, l)| format!("{z} (label {l})"))
            .collect();
        parts.push(format!("added {}", list.join(", ")));
    }
    if !plan.removed.is_empty() {
        let list: Vec<String> = plan.removed.iter().map(|(z, _)| z.to_string()).collect();
        parts.push(format!("removed {}", list.join(", ")));
    }
    format!(
        "catalog {catalog}: serial {old} -> {new}, {}",
        parts.join(", ")
    )
}

/// The catalog producers, running: one poller thread for every
/// `[[catalog]]`. Its settings can be replaced while it runs
/// ([`Producers::update`], on reload). Dropping it stops the thread (at its
/// next poll).
pub struct Producers {
    settings: watch::Sender<ProducerSettings>,
    stop: Arc<AtomicBool>,
}

impl Producers {
    /// Starts the producers of `settings` (with none, the thread only
    /// sleeps until an update brings some).
    ///
    /// Errors: the thread cannot be started.
    pub fn spawn(settings: ProducerSettings) -> std::io::Result<Producers> {
        let (tx, rx) = watch::channel(settings);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("catalog-producer".into())
            .spawn(move || poll_loop(&rx, &stopped))?;
        Ok(Producers { settings: tx, stop })
    }

    /// Replaces the catalogs produced and the sources written through;
    /// applies from the next poll. A catalog kept keeps its state.
    pub fn update(&self, settings: ProducerSettings) {
        self.settings.send_replace(settings);
    }
}

impl Drop for Producers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One producer's state between polls.
struct Producer {
    config: ProducerConfig,
    /// The writer opened on the file (for the change mark and the zone
    /// list, and to create the catalog zone), opened at the first poll and
    /// again after a failure.
    file_writer: Option<Arc<SqliteWriter>>,
    /// The change mark last acted on, and of which writer (marks of two
    /// connections are not comparable).
    mark: Option<(usize, u64)>,
    /// The last error logged (the same one is not logged at every poll).
    last_error: Option<String>,
}

impl Producer {
    fn new(config: ProducerConfig) -> Producer {
        Producer {
            config,
            file_writer: None,
            mark: None,
            last_error: None,
        }
    }

    /// Logs `e` (naming the DB), once until another error or a success.
    fn failed(&mut self, e: &str) {
        let line = format!(
            "catalog {} ({}): {e}; trying again at the next poll",
            self.config.origin,
            self.config.file.display()
        );
        if self.last_error.as_deref() != Some(line.as_str()) {
            tracing::error!("{line}");
            self.last_error = Some(line);
        }
    }
}

/// Polls every producer of the current settings every [`POLL_INTERVAL`]
/// until `stop` is set.
fn poll_loop(settings: &watch::Receiver<ProducerSettings>, stop: &AtomicBool) {
    let mut producers: Vec<Producer> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let current = settings.borrow().clone();
        if producers.len() != current.producers.len()
            || producers
                .iter()
                .zip(&current.producers)
                .any(|(p, c)| p.config != *c)
        {
            let mut old = std::mem::take(&mut producers);
            for c in &current.producers {
                match old.iter().position(|p| p.config == *c) {
                    Some(i) => producers.push(old.swap_remove(i)),
                    None => producers.push(Producer::new(c.clone())),
                }
            }
        }
        let catalogs: Vec<(Name, PathBuf)> = current
            .producers
            .iter()
            .map(|p| (p.origin.clone(), p.file.clone()))
            .collect();
        for p in &mut producers {
            poll(p, &current.sources, &catalogs);
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// The address of `w`'s object, to tell writers apart.
fn writer_id(w: &Arc<dyn ZoneWriter>) -> usize {
    Arc::as_ptr(w).cast::<()>() as usize
}

/// One poll of one producer.
fn poll(p: &mut Producer, sources: &SourceList, catalogs: &[(Name, PathBuf)]) {
    let origin = p.config.origin.clone();
    // The catalog's write side once it is served; before, the file's.
    let served = match sources.writer(&origin) {
        Ok(w) => w,
        Err(e) => {
            p.failed(&format!("cannot find the catalog zone's write side: {e}"));
            return;
        }
    };
    let file_writer = match &p.file_writer {
        Some(w) => Arc::clone(w),
        None => match SqliteWriter::open(&p.config.file) {
            Ok(w) => {
                let w = Arc::new(w);
                p.file_writer = Some(Arc::clone(&w));
                w
            }
            Err(e) => {
                p.failed(&format!("cannot open the DB: {e}"));
                return;
            }
        },
    };
    let file_dyn: Arc<dyn ZoneWriter> = Arc::clone(&file_writer) as Arc<dyn ZoneWriter>;
    let watch = served.clone().unwrap_or_else(|| Arc::clone(&file_dyn));
    let mark = match watch.change_mark() {
        Ok(m) => (writer_id(&watch), m),
        Err(e) => {
            p.failed(&e.to_string());
            p.file_writer = None;
            return;
        }
    };
    if p.mark == Some(mark) {
        return;
    }
    let soas = match watch.apex_soas() {
        Ok(s) => s,
        Err(e) => {
            p.failed(&e.to_string());
            p.file_writer = None;
            return;
        }
    };
    let others: Vec<&Name> = catalogs
        .iter()
        .filter(|(_, f)| same_file(f, &p.config.file))
        .map(|(o, _)| o)
        .collect();
    let exists = soas.iter().any(|(apex, _, _)| *apex == origin);
    let members: BTreeSet<Name> = soas
        .into_iter()
        .map(|(apex, _, _)| apex.to_lowercase())
        .filter(|apex| *apex != origin && !others.contains(&apex))
        .collect();
    let result = if exists {
        let writer = served.unwrap_or(file_dyn);
        update(&origin, writer.as_ref(), &members)
    } else {
        create(&origin, &p.config.file, &file_writer, &members)
    };
    match result {
        Ok(()) => {
            p.mark = Some(mark);
            p.last_error = None;
        }
        Err(e) => p.failed(&e),
    }
}

/// True when `a` and `b` name one file (the same path, or the same file
/// through another path).
fn same_file(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(x), Ok(y)) if x == y
        )
}

/// Brings catalog `origin` to list `members` through `writer` (one
/// transaction, serial + 1, journaled); logs the change.
fn update(origin: &Name, writer: &dyn ZoneWriter, members: &BTreeSet<Name>) -> Result<(), String> {
    let mut planned: Option<Result<Plan, Broken>> = None;
    let mut planner = |records: &[Record]| {
        let result = plan(origin, records, members);
        let change = result.as_ref().ok().map(|p| p.change.clone());
        planned = Some(result);
        change
    };
    let now = crate::sys::unix_seconds();
    let report = writer
        .update(
            origin,
            Scope::Zone,
            SerialPolicy::Increment,
            now,
            &mut planner,
        )
        .map_err(|e| format!("{}: {e}", writer.describe()))?;
    match (planned, report) {
        (Some(Err(broken)), _) => Err(format!(
            "the catalog zone is broken ({broken}); not changed until it is fixed"
        )),
        (Some(Ok(plan)), Some(report)) if !plan.change.is_empty() => {
            tracing::info!(
                "{}",
                change_line(origin, report.old_serial, report.new_serial, &plan)
            );
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Creates catalog `origin` in `file` through `writer`: the skeleton (serial
/// the Unix time) and `members`.
fn create(
    origin: &Name,
    file: &Path,
    writer: &SqliteWriter,
    members: &BTreeSet<Name>,
) -> Result<(), String> {
    // A zone of that name without a readable SOA is not replaced.
    let zones = writer.list_zones().map_err(|e| e.to_string())?;
    if zones
        .iter()
        .any(|z| Name::parse(&z.origin, None).is_ok_and(|o| o == *origin))
    {
        return Err(
            "the catalog zone is in the DB without a readable SOA; not changed until it is fixed"
                .to_string(),
        );
    }
    let serial = SerialPolicy::UnixTime.next(0, crate::sys::unix_seconds());
    let mut records = skeleton(origin, serial);
    let planned = plan(origin, &records, members).map_err(|e| e.to_string())?;
    records.extend(planned.change.add.iter().cloned());
    let source = Arc::new(PathBuf::from(format!("catalog {origin}")));
    let sourced: Vec<SourcedRecord> = records
        .into_iter()
        .enumerate()
        .map(|(i, record)| SourcedRecord {
            record,
            file: Arc::clone(&source),
            line: i + 1,
        })
        .collect();
    writer
        .replace_zone(origin, &sourced, JournalPolicy::Clear, &mut |_, _| {})
        .map_err(|e: WriteError| format!("creating the catalog zone: {e}"))?;
    let list: Vec<String> = planned
        .added
        .iter()
        .map(|(z, l)| format!("{z} (label {l})"))
        .collect();
    tracing::info!(
        "catalog {origin}: created in {} with serial {serial}, {} member(s){}{}",
        file.display(),
        list.len(),
        if list.is_empty() { "" } else { ": " },
        list.join(", ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use authd_datasrc::RType;
    use std::collections::BTreeMap;

    fn n(s: &str) -> Name {
        Name::parse(s, None).expect("test value")
    }

    fn cat() -> Name {
        n("catalog.example.")
    }

    fn records(text: &str) -> Vec<Record> {
        authd_datasrc::zonefile::parse_master_text(text, Path::new("t"), &cat())
            .expect("test value")
            .into_iter()
            .map(|r| r.record)
            .collect()
    }

    const HEAD: &str = "@ 0 SOA invalid. invalid. 1 3600 600 2419200 0\n@ 0 NS invalid.\n\
                        version 0 TXT \"2\"\n";

    fn set(zones: &[&str]) -> BTreeSet<Name> {
        zones.iter().map(|z| n(z)).collect()
    }

    fn labels_by_zone(plan: &Plan) -> BTreeMap<Name, String> {
        plan.added.iter().cloned().collect()
    }

    fn owners(rrs: &[Record]) -> Vec<String> {
        let mut v: Vec<String> = rrs
            .iter()
            .map(|r| format!("{} {}", r.owner, r.rtype))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_new_member_gets_its_stable_label() {
        let p = plan(&cat(), &records(HEAD), &set(&["example.org."])).expect("test value");
        let label = stable_label(&n("example.org."));
        assert_eq!(p.added, vec![(n("example.org."), label.clone())]);
        assert!(p.removed.is_empty() && p.change.delete.is_empty());
        assert_eq!(
            p.change.add,
            vec![member_record(&cat(), &label, &n("example.org.")).expect("test value")]
        );
        assert_eq!(p.change.add[0].rtype, RType::PTR);
        assert_eq!(p.change.add[0].ttl, 0);
        assert_eq!(
            change_line(&cat(), 5, 6, &p),
            format!("catalog catalog.example.: serial 5 -> 6, added example.org. (label {label})")
        );
    }

    #[test]
    fn a_removed_member_goes_with_its_properties() {
        let text = format!(
            "{HEAD}a1.zones 0 PTR example.net.\ngroup.a1.zones 0 TXT \"signed\"\n\
             coo.a1.zones 0 PTR other.catalog.\nx.y.a1.zones 0 TXT \"custom\"\n\
             b2.zones 0 PTR example.com.\ngroup.b2.zones 0 TXT \"kept\"\n"
        );
        let p = plan(&cat(), &records(&text), &set(&["example.com."])).expect("test value");
        assert!(p.change.add.is_empty());
        assert_eq!(
            owners(&p.change.delete),
            [
                "a1.zones.catalog.example. PTR",
                "coo.a1.zones.catalog.example. PTR",
                "group.a1.zones.catalog.example. TXT",
                "x.y.a1.zones.catalog.example. TXT",
            ]
        );
        assert_eq!(p.removed, vec![(n("example.net."), "a1".to_string())]);
        assert_eq!(
            change_line(&cat(), 6, 7, &p),
            "catalog catalog.example.: serial 6 -> 7, removed example.net."
        );
    }

    #[test]
    fn members_keep_their_labels_and_properties() {
        // An operator's label (a reset, RFC 9432 §5.5) and a group stay.
        let text =
            format!("{HEAD}reset2.zones 0 PTR Example.COM.\ngroup.reset2.zones 0 TXT \"signed\"\n");
        let p = plan(
            &cat(),
            &records(&text),
            &set(&["example.com.", "example.org."]),
        )
        .expect("test value");
        assert!(p.change.delete.is_empty());
        assert_eq!(p.added.len(), 1);
        assert_eq!(p.added[0].0, n("example.org."));
        assert_eq!(owners(&p.change.add).len(), 1);
    }

    #[test]
    fn a_clashing_label_gets_a_suffix() {
        let org = stable_label(&n("example.org."));
        // The stable label is taken by another member, and its "-1" by a
        // property of no member.
        let text =
            format!("{HEAD}{org}.zones 0 PTR other.example.\ngroup.{org}-1.zones 0 TXT \"x\"\n");
        let p = plan(
            &cat(),
            &records(&text),
            &set(&["other.example.", "example.org."]),
        )
        .expect("test value");
        assert_eq!(p.added, vec![(n("example.org."), format!("{org}-2"))]);
        let taken: BTreeSet<String> = ["a".to_string(), "a-1".to_string()].into();
        assert_eq!(free_label("a", &taken), "a-2");
        assert_eq!(free_label("b", &taken), "b");
    }

    #[test]
    fn nothing_to_do_is_an_empty_change() {
        let com = stable_label(&n("example.com."));
        let text = format!("{HEAD}{com}.zones 0 PTR example.com.\n");
        let p = plan(&cat(), &records(&text), &set(&["example.com."])).expect("test value");
        assert!(p.change.is_empty());
        assert_eq!(p, Plan::default());
        // The catalog itself is never its own member.
        let p = plan(&cat(), &records(HEAD), &set(&["catalog.example."])).expect("test value");
        assert!(p.change.is_empty());
    }

    #[test]
    fn a_broken_catalog_is_left_alone() {
        let text = "@ 0 SOA invalid. invalid. 1 3600 600 2419200 0\n@ 0 NS invalid.\n";
        assert_eq!(
            plan(&cat(), &records(text), &set(&["example.com."])),
            Err(Broken::NoVersion(cat()))
        );
    }

    #[test]
    fn the_skeleton_with_members_is_created_with_stable_labels() {
        let sk = skeleton(&cat(), 100);
        let p = plan(&cat(), &sk, &set(&["b.example.", "a.example."])).expect("test value");
        let labels = labels_by_zone(&p);
        assert_eq!(labels[&n("a.example.")], stable_label(&n("a.example.")));
        assert_eq!(labels[&n("b.example.")], stable_label(&n("b.example.")));
    }
}
