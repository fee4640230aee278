//! The write battery: the same cases on every composition the configuration
//! can build (`common::COMPOSITIONS`), through the write side reached by zone
//! origin (`SourceList::writer`), read back through the same sources a query
//! uses: sqlite3 (written live) and memory copied from sqlite3 (written to the
//! DB, the snapshot rebuilt), each with and without the cache and a `zones`
//! restriction. Memory zones from master files take no write (their write
//! side says so, and reads their serials and journal) and keep serving what
//! they loaded.
//!
//! Cases: a difference applied and journaled (RFC 1995), visible to the very
//! next lookup (no poll interval in between); journal ranges; a difference
//! that does not start at the zone's serial refused with nothing written; a
//! planned update moving the serial (RFC 1982 arithmetic, across the wrap);
//! a planner's refusal writing nothing; a whole-zone replacement clearing the
//! journal; a failed replacement leaving the old data; readers running
//! while differences commit see an RRset wholly old or wholly new, and the
//! writer sees each difference at once.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use authd_datasrc::write::{Change, Difference, JournalPolicy, Scope, SerialPolicy, serial_gt};
use authd_datasrc::{
    LookupOptions, Name, Outcome, RType, Record, SourceList, WriteError, ZoneWriter, zonefile,
};

mod common;
use common::{Backend, COMPOSITIONS, decoy};

const ZONE: &str = "$ORIGIN example.org.\n$TTL 300\n\
    @ SOA ns1 hostmaster 1 3600 900 1209600 300\n\
    @ NS ns1\n\
    ns1 A 192.0.2.1\n\
    www A 192.0.2.10\n\
    pair TXT \"v0-a\"\n\
    pair TXT \"v0-b\"\n";

fn origin() -> Name {
    "example.org.".parse().expect("origin")
}

/// One RR from master-file text (relative to the zone, `$TTL 300`).
fn rr(text: &str) -> Record {
    let recs =
        zonefile::parse_master_text(&format!("$TTL 300\n{text}\n"), Path::new("test"), &origin())
            .expect("rr parses");
    recs[0].record.clone()
}

fn soa(serial: u32) -> Record {
    rr(&format!(
        "@ SOA ns1 hostmaster {serial} 3600 900 1209600 300"
    ))
}

/// What a lookup of (`qname`, `qtype`) finds: the RDATA texts of the answer,
/// sorted, or `NXDOMAIN` / `NODATA` / `other`.
fn answer(sources: &SourceList, qname: &str, qtype: RType) -> Vec<String> {
    let qname = Name::parse(qname, Some(&origin())).expect("qname");
    let (source, zone) = sources
        .find_zone(&qname)
        .expect("find_zone")
        .expect("a zone");
    let found = source
        .lookup(&zone, &qname, qtype, LookupOptions::default())
        .expect("lookup");
    match found.outcome {
        Outcome::Answer(set) => {
            let mut v: Vec<String> = set
                .rdatas
                .iter()
                .map(|r| r.to_text(set.rtype).expect("text"))
                .collect();
            v.sort();
            v
        }
        Outcome::NxDomain => vec!["NXDOMAIN".into()],
        Outcome::NoData => vec!["NODATA".into()],
        _ => vec!["other".into()],
    }
}

fn serial(sources: &SourceList) -> u32 {
    let text = answer(sources, "@", RType::SOA);
    text[0]
        .split_whitespace()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .expect("serial")
}

fn zone_file(dir: &Path) -> PathBuf {
    let file = dir.join("example.org.zone");
    std::fs::write(&file, ZONE).expect("write zone");
    file
}

#[test]
fn every_composition_with_a_write_side_writes_alike() {
    let mut written = 0;
    for composition in COMPOSITIONS {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = zone_file(dir.path());
        let sources = composition.build(dir.path(), "example.org.", &file);
        let found = sources.writer(&origin()).expect("writer lookup");
        if composition.restricted {
            assert!(
                sources.writer(&decoy(&origin())).expect("lookup").is_none(),
                "{composition}: the zone left out of `zones` has no writer here"
            );
        }
        let writer = match (composition.backend, found) {
            (Backend::Sqlite3 | Backend::MemoryFromDb, Some(w)) => w,
            (Backend::Sqlite3 | Backend::MemoryFromDb, None) => {
                panic!("{composition}: no write side")
            }
            (Backend::MemoryFile, None) => {
                panic!("{composition}: no write side (its journal is read through it)")
            }
            (Backend::MemoryFile, Some(w)) => {
                // It reads (serials, a journal: none before a reload) but
                // takes no write; what was loaded is served.
                let refused = |r: Result<(), WriteError>, what: &str| match r {
                    Err(WriteError::NotSupported(m)) => {
                        assert!(m.contains("master file"), "{composition}: {what}: {m}")
                    }
                    other => panic!("{composition}: {what}: {other:?}"),
                };
                refused(
                    w.apply_differences(&origin(), &[]).map(drop),
                    "a difference",
                );
                refused(
                    w.update(
                        &origin(),
                        Scope::Zone,
                        SerialPolicy::Increment,
                        0,
                        &mut |_| None,
                    )
                    .map(drop),
                    "an update",
                );
                let soas = w.apex_soas().expect("apex SOAs");
                assert!(
                    soas.iter()
                        .any(|(o, _, soa)| *o == origin() && soa.soa_serial() == Some(1)),
                    "{composition}: {soas:?}"
                );
                assert_eq!(w.journal(&origin(), 1, 1).expect("journal"), None);
                assert_eq!(
                    answer(&sources, "www", RType::A),
                    ["192.0.2.10"],
                    "{composition}"
                );
                continue;
            }
        };
        check_writes(&composition.to_string(), &sources, writer.as_ref());
        written += 1;
    }
    assert_eq!(
        written, 8,
        "the sqlite3 and memory-from-sqlite3 compositions take writes"
    );
}

fn check_writes(c: &str, sources: &SourceList, writer: &dyn ZoneWriter) {
    let o = origin();
    // Warm whatever caches: the old answer is now held.
    assert_eq!(answer(sources, "www", RType::A), ["192.0.2.10"], "{c}");
    assert_eq!(serial(sources), 1, "{c}");

    // A difference, visible to the next lookup at once.
    let d12 = Difference {
        old_soa: soa(1),
        deleted: vec![rr("www A 192.0.2.10")],
        new_soa: soa(2),
        added: vec![rr("www A 192.0.2.20")],
    };
    assert_eq!(
        writer.apply_differences(&o, &[d12]).expect("applies"),
        4,
        "{c}"
    );
    assert_eq!(
        answer(sources, "www", RType::A),
        ["192.0.2.20"],
        "{c}: seen at once"
    );
    assert_eq!(serial(sources), 2, "{c}");

    // Journal ranges.
    let rows = writer
        .journal(&o, 1, 2)
        .expect("journal")
        .expect("1..2 kept");
    let shape: Vec<(bool, RType, String)> = rows
        .iter()
        .map(|d| {
            (
                d.add,
                d.record.rtype,
                d.record.rdata.to_text(d.record.rtype).expect("text"),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            (
                false,
                RType::SOA,
                "ns1.example.org. hostmaster.example.org. 1 3600 900 1209600 300".into()
            ),
            (false, RType::A, "192.0.2.10".into()),
            (
                true,
                RType::SOA,
                "ns1.example.org. hostmaster.example.org. 2 3600 900 1209600 300".into()
            ),
            (true, RType::A, "192.0.2.20".into()),
        ],
        "{c}"
    );
    assert!(
        writer.journal(&o, 2, 3).expect("journal").is_none(),
        "{c}: no 2..3 yet"
    );
    assert!(
        writer.journal(&o, 0, 2).expect("journal").is_none(),
        "{c}: no 0..2"
    );

    // A difference from another serial: refused, nothing written.
    let stale = Difference {
        old_soa: soa(1),
        deleted: vec![],
        new_soa: soa(5),
        added: vec![rr("new A 192.0.2.99")],
    };
    assert!(
        matches!(
            writer.apply_differences(&o, &[stale]),
            Err(WriteError::Update(_))
        ),
        "{c}"
    );
    assert_eq!(serial(sources), 2, "{c}");
    assert_eq!(answer(sources, "new", RType::A), ["NXDOMAIN"], "{c}");

    // A planned update: the serial moves by one, the change is journaled.
    let mut plan = |records: &[Record]| {
        assert!(
            records.iter().any(|r| r.rtype == RType::SOA),
            "the planner sees the apex"
        );
        Some(Change {
            add: vec![rr("txt TXT \"planned\"")],
            delete: vec![],
            soa: None,
        })
    };
    let report = writer
        .update(&o, Scope::Zone, SerialPolicy::Increment, 0, &mut plan)
        .expect("update")
        .expect("applied");
    assert_eq!(
        (report.old_serial, report.new_serial, report.added),
        (2, 3, 1),
        "{c}"
    );
    assert_eq!(answer(sources, "txt", RType::TXT), ["\"planned\""], "{c}");
    assert_eq!(
        writer.journal(&o, 1, 3).expect("journal").map(|r| r.len()),
        Some(7),
        "{c}"
    );

    // A planner's refusal writes nothing.
    let mut refuse = |_: &[Record]| None;
    assert!(
        writer
            .update(&o, Scope::Zone, SerialPolicy::Increment, 0, &mut refuse)
            .expect("update")
            .is_none(),
        "{c}"
    );
    assert_eq!(serial(sources), 3, "{c}");

    // A whole-zone replacement clears the journal; the serial wraps (RFC 1982).
    let replaced = zonefile::parse_master_text(
        &ZONE.replace(" 1 3600", " 4294967295 3600"),
        Path::new("replacement"),
        &o,
    )
    .expect("parses");
    writer
        .replace_zone(&o, &replaced, JournalPolicy::Clear, &mut |_, _| {})
        .expect("replaces");
    assert_eq!(serial(sources), 4294967295, "{c}");
    assert_eq!(answer(sources, "www", RType::A), ["192.0.2.10"], "{c}");
    assert!(
        writer.journal(&o, 1, 3).expect("journal").is_none(),
        "{c}: cleared"
    );
    let mut add = |_: &[Record]| {
        Some(Change {
            add: vec![rr("wrap A 192.0.2.30")],
            delete: vec![],
            soa: None,
        })
    };
    let report = writer
        .update(&o, Scope::Zone, SerialPolicy::Increment, 0, &mut add)
        .expect("update")
        .expect("applied");
    assert_eq!(report.new_serial, 0, "{c}");
    assert!(serial_gt(0, 4294967295), "{c}");
    assert_eq!(serial(sources), 0, "{c}");

    // A failed replacement (CNAME beside other data) leaves the old data.
    let broken =
        zonefile::parse_master_text(&format!("{ZONE}www CNAME ns1\n"), Path::new("broken"), &o)
            .expect("parses");
    assert!(
        matches!(
            writer.replace_zone(&o, &broken, JournalPolicy::Clear, &mut |_, _| {}),
            Err(WriteError::Load(_))
        ),
        "{c}"
    );
    assert_eq!(answer(sources, "www", RType::A), ["192.0.2.10"], "{c}");
    assert_eq!(serial(sources), 0, "{c}");

    // Readers while differences commit: each answer wholly one version.
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (sources, done) = (sources.clone(), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut seen = 0;
                while !done.load(Ordering::Acquire) || seen == 0 {
                    let txt = answer(&sources, "pair", RType::TXT);
                    let version =
                        |t: &str| t.trim_matches('"').split('-').next().map(str::to_owned);
                    assert_eq!(txt.len(), 2, "{txt:?}");
                    assert_eq!(version(&txt[0]), version(&txt[1]), "a mix: {txt:?}");
                    seen += 1;
                }
                seen
            })
        })
        .collect();
    for v in 0..20u32 {
        let s = v; // serial 0 at v = 0
        let d = Difference {
            old_soa: soa(s),
            deleted: vec![
                rr(&format!("pair TXT \"v{v}-a\"")),
                rr(&format!("pair TXT \"v{v}-b\"")),
            ],
            new_soa: soa(s + 1),
            added: vec![
                rr(&format!("pair TXT \"v{}-a\"", v + 1)),
                rr(&format!("pair TXT \"v{}-b\"", v + 1)),
            ],
        };
        writer.apply_differences(&o, &[d]).expect("applies");
        // Seen at once, though readers fill the cache meanwhile (one that
        // read before the write must not store what it read after it).
        assert_eq!(
            answer(sources, "pair", RType::TXT),
            [format!("\"v{}-a\"", v + 1), format!("\"v{}-b\"", v + 1)],
            "{c}: difference {v}"
        );
    }
    done.store(true, Ordering::Release);
    for r in readers {
        assert!(r.join().expect("reader") > 0, "{c}");
    }
    assert_eq!(
        answer(sources, "pair", RType::TXT),
        ["\"v20-a\"", "\"v20-b\""],
        "{c}"
    );
}
