//! Serving the zone DBs BIND 10 itself made, unmodified.
//!
//! The DBs under `tests/data/bind10/` are byte-for-byte copies of BIND 10's own
//! sqlite3 test DBs (schema 2.x; origins in `tests/data/README.md`). For every
//! one: open it read-only, walk every RRset of every zone through the query
//! processor, check the reply against the data (an independent oracle written
//! from RFC 1034 §4.3.2, not the finder), check that the memory backend loaded
//! from the same DB gives the same replies (decoded: name compression may differ),
//! and check that the file did
//! not change. Then hand-checked answers with values read from the files, and
//! broken rows (SERVFAIL for that name only).
//!
//! Replies are decoded with hickory-proto, an independent implementation.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use authd::dispatch::{self, Dispatcher};
use authd::query::Transport;
use authd_cache::{HotSpotCache, Slots};
use authd_datasrc::memory::MemorySource;
use authd_datasrc::sqlite::SqliteSource;
use authd_datasrc::{DataSource, DataSourceError, Name, RRset, RType, Rdata, SourceList, ZoneRef};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, Restrict};

/// The client address of every query (no access control applies to them).
const LOCAL: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// BIND 10's DBs, below this package (`tests/data/bind10/`).
fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/bind10")
}

/// One copied DB and the zones (apex, `zones.id`) it must list.
struct Db {
    path: &'static str,
    zones: &'static [(&'static str, i64)],
}

/// The DBs whose every zone loads without error (the generic walk).
const DBS: &[Db] = &[
    Db {
        path: "datasrc/test.sqlite3",
        zones: &[
            ("example.com.", 1),
            ("sql1.example.com.", 2),
            ("sql2.example.com.", 3),
        ],
    },
    Db {
        path: "datasrc/example.org.sqlite3",
        zones: &[("example.org.", 5)],
    },
    Db {
        path: "datasrc/example2.com.sqlite3",
        zones: &[("example2.com.", 1)],
    },
    Db {
        path: "datasrc/test-root.sqlite3",
        zones: &[(".", 1)],
    },
    Db {
        path: "testutils/rwtest.sqlite3",
        zones: &[("example.org.", 6)],
    },
    Db {
        path: "xfrout/test.sqlite3",
        zones: &[("example.com.", 3)],
    },
    Db {
        path: "xfrin/example.com.sqlite3",
        zones: &[("example.com.", 1)],
    },
    Db {
        path: "notify/test.sqlite3",
        zones: &[("example.com.", 1), ("example.net.", 2)],
    },
    Db {
        // Its nsec3 rows carry zone_id 3, which has no zones row.
        path: "python-datasrc/example.com.source.sqlite3",
        zones: &[("example.com.", 1)],
    },
    Db {
        path: "lettuce/example.org.sqlite3",
        zones: &[("example.org.", 5)],
    },
    Db {
        path: "lettuce/glue.sqlite3",
        zones: &[(".", 1), ("com.", 3), ("net.", 4), ("root-servers.nil.", 2)],
    },
    Db {
        path: "lettuce/ixfr-out/zones.sqlite3",
        zones: &[("example.com.", 1), ("tjeb.nl.", 2)],
    },
];

fn db_path(rel: &str) -> PathBuf {
    data_dir().join(rel)
}

/// A copy of the DB at `rel` in a new temporary directory (kept alive by the
/// returned guard), for tests that change it.
fn scratch_copy(rel: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("scratch.sqlite3");
    std::fs::copy(db_path(rel), &path).expect("copy");
    (dir, path)
}

fn name(text: &str) -> Name {
    text.parse().expect("name")
}

/// The DB at `rel`, opened for serving, with its bytes before any query.
struct Opened {
    path: PathBuf,
    before: Vec<u8>,
    sqlite: Arc<SqliteSource>,
}

impl Opened {
    fn new(rel: &str) -> Opened {
        let path = db_path(rel);
        let before = std::fs::read(&path).expect("DB copy present");
        let sqlite = Arc::new(SqliteSource::open(&path).expect("BIND 10 DB opens"));
        Opened {
            path,
            before,
            sqlite,
        }
    }

    /// The file is byte-identical to what it was before serving, and no
    /// journal, WAL or shared-memory file was left beside it.
    fn assert_unmodified(self) {
        let Opened {
            path,
            before,
            sqlite,
        } = self;
        drop(sqlite);
        let after = std::fs::read(&path).expect("DB still there");
        assert!(
            after == before,
            "{} was modified by serving it",
            path.display()
        );
        for suffix in ["-journal", "-wal", "-shm"] {
            let mut side = path.clone().into_os_string();
            side.push(suffix);
            assert!(
                !Path::new(&side).exists(),
                "{} left {suffix}",
                path.display()
            );
        }
    }
}

/// `sqlite` as it is and behind a hot-spot cache, by label: a case that must
/// hold on both paths.
fn uncached_and_cached(sqlite: Arc<SqliteSource>) -> [(&'static str, Arc<dyn DataSource>); 2] {
    let cached: Arc<dyn DataSource> =
        Arc::new(HotSpotCache::new(sqlite.clone(), Slots::from_count(1000)));
    [
        ("sqlite3", sqlite as Arc<dyn DataSource>),
        ("cached", cached),
    ]
}

fn processor(source: Arc<dyn DataSource>) -> Dispatcher {
    Dispatcher::new(SourceList::new(vec![source]))
}

/// A query message built by hand from our own name wire form (so any owner
/// name in a DB can be asked, whatever its bytes), EDNS with DO when `dnssec`.
fn query(id: u16, qname: &Name, qtype: RType, dnssec: bool) -> Vec<u8> {
    let mut q = Vec::new();
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, u8::from(dnssec)]);
    q.extend_from_slice(qname.as_wire());
    q.extend_from_slice(&qtype.0.to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes());
    if dnssec {
        // OPT: root owner, type 41, payload 4096, ext-rcode 0, version 0, DO, no options.
        q.extend_from_slice(&[0, 0, 41, 0x10, 0, 0, 0, 0x80, 0, 0, 0]);
    }
    q
}

fn ask_raw(p: &Dispatcher, q: &[u8], transport: Transport) -> Vec<u8> {
    let mut out = Vec::new();
    assert!(
        p.handle(q, transport, LOCAL, &mut out) == dispatch::Reply::Message,
        "a reply is sent"
    );
    out
}

fn decode(wire: &[u8]) -> Message {
    let msg = Message::from_vec(wire).expect("reply decodes");
    assert_eq!(&wire[..2], &msg.metadata.id.to_be_bytes());
    msg
}

/// Our RDATA decoded by hickory, for comparing with a decoded reply record.
fn hickory_rdata(rtype: RType, rdata: &Rdata) -> RData {
    let wire = rdata.as_wire();
    let mut dec = BinDecoder::new(wire);
    let len = u16::try_from(wire.len()).expect("rdata length");
    RData::read(&mut dec, RecordType::from(rtype.0), Restrict::new(len)).expect("rdata decodes")
}

fn hname(n: &Name) -> hickory_proto::rr::Name {
    let mut dec = BinDecoder::new(n.as_wire());
    hickory_proto::rr::Name::read(&mut dec).expect("name decodes")
}

/// `owner ttl TYPE rdata` for a reply record; rdata of types hickory decodes as
/// opaque (DS, RRSIG, NSEC, DNAME, …) is shown with our presentation form.
fn show(r: &Record) -> String {
    let data = match &r.data {
        RData::Unknown { code, rdata } => Rdata::from_wire(&rdata.anything)
            .to_text(RType(u16::from(*code)))
            .unwrap_or_else(|_| format!("\\# {}", rdata.anything.len())),
        other => other.to_string(),
    };
    format!("{} {} {} {}", r.name, r.ttl, r.record_type(), data)
}

fn shows(records: &[Record]) -> Vec<String> {
    records.iter().map(show).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// `records` are exactly the RRset `set` (owner `owner`): same owner, type,
/// class, TTL and RDATA, in the set's order.
fn assert_is_set(records: &[Record], set: &RRset, owner: &Name, what: &str) {
    assert_eq!(
        records.len(),
        set.rdatas.len(),
        "{what}: {:?}",
        shows(records)
    );
    let owner = hname(owner);
    for (r, rdata) in records.iter().zip(&set.rdatas) {
        assert_eq!(r.name, owner, "{what}");
        assert_eq!(u16::from(r.record_type()), set.rtype.0, "{what}");
        assert_eq!(u16::from(r.dns_class), 1, "{what}");
        assert_eq!(r.ttl, set.ttl, "{what}");
        assert_eq!(
            r.data,
            hickory_rdata(set.rtype, rdata),
            "{what}: {}",
            show(r)
        );
    }
}

/// The zone content as `zone_rrsets` gives it, indexed by owner.
struct ZoneData {
    origin: Name,
    sets: Vec<RRset>,
    by_owner: HashMap<Name, Vec<usize>>,
}

impl ZoneData {
    fn new(origin: Name, sets: Vec<RRset>) -> ZoneData {
        let mut by_owner: HashMap<Name, Vec<usize>> = HashMap::new();
        for (i, s) in sets.iter().enumerate() {
            if s.rtype != RType::NSEC3 {
                by_owner.entry(s.owner.clone()).or_default().push(i);
            }
        }
        ZoneData {
            origin,
            sets,
            by_owner,
        }
    }

    /// The RRset of `rtype` at `owner` (NSEC3 sets are not in the name tree,
    /// RFC 5155 §7.2.9).
    fn get(&self, owner: &Name, rtype: RType) -> Option<&RRset> {
        self.by_owner
            .get(owner)?
            .iter()
            .map(|&i| &self.sets[i])
            .find(|s| s.rtype == rtype)
    }

    fn exists(&self, owner: &Name) -> bool {
        self.by_owner.contains_key(owner)
    }

    fn has_descendants(&self, owner: &Name) -> bool {
        self.by_owner
            .keys()
            .any(|n| n != owner && n.is_subdomain_of(owner))
    }
}

/// What the reply to (owner, type) of one RRset must be, derived from the data.
enum Expect<'a> {
    /// AA, NOERROR, the answer is exactly the set.
    Answer(&'a RRset),
    /// AA clear, no answer, the NS set of the cut first in authority.
    Referral(&'a RRset),
    /// AA, answer starts with this CNAME.
    CnameFirst(&'a RRset),
    /// AA, answer starts with this DNAME and a CNAME synthesized for qname.
    Dname(&'a RRset),
    /// NXDOMAIN with the apex SOA (an NSEC3 owner, RFC 5155 §7.2.9).
    NxDomain,
}

fn expectation<'a>(z: &'a ZoneData, set: &'a RRset) -> Option<Expect<'a>> {
    let owner = &set.owner;
    if set.rtype == RType::NSEC3 {
        // Only the plain case: nothing else at or below the hashed name and no
        // wildcard that could match it.
        let wild = owner.parent().and_then(|p| p.wildcard_child().ok());
        if z.exists(owner) || z.has_descendants(owner) || wild.is_some_and(|w| z.exists(&w)) {
            return None;
        }
        return Some(Expect::NxDomain);
    }
    let olabels = z.origin.label_count();
    let qlabels = owner.label_count();
    for labels in olabels + 1..qlabels {
        let ancestor = owner.strip_left(qlabels - labels).expect("ancestor");
        if let Some(ns) = z.get(&ancestor, RType::NS) {
            return Some(Expect::Referral(ns));
        }
        if let Some(dname) = z.get(&ancestor, RType::DNAME) {
            return Some(Expect::Dname(dname));
        }
    }
    if *owner != z.origin
        && set.rtype != RType::DS
        && let Some(ns) = z.get(owner, RType::NS)
    {
        return Some(Expect::Referral(ns));
    }
    if set.rtype != RType::CNAME
        && let Some(cname) = z.get(owner, RType::CNAME)
    {
        return Some(Expect::CnameFirst(cname));
    }
    Some(Expect::Answer(set))
}

fn soa_negative_ttl(z: &ZoneData) -> u32 {
    let soa = z.get(&z.origin, RType::SOA).expect("apex SOA");
    let minimum = soa.rdatas[0].soa_minimum().expect("SOA rdata");
    soa.ttl.min(minimum)
}

#[derive(Default, Debug)]
struct Tally {
    answers: usize,
    referrals: usize,
    cnames: usize,
    dnames: usize,
    nxdomains: usize,
    /// Sets owned by a name another zone of the same DB serves (a child zone's
    /// apex, or rows outside the zone apex), or NSEC3 sets not in the plain case.
    skipped: usize,
}

/// Walks every RRset of every zone of `opened` through the sqlite3 backend and
/// through memory loaded from it; returns what was checked.
fn walk(opened: &Opened, db: &Db) -> Tally {
    let sqlite: Arc<dyn DataSource> = opened.sqlite.clone();
    let memory = Arc::new(MemorySource::new(db.path));
    let loaded = memory
        .load_from_source(sqlite.as_ref())
        .expect("memory loads");
    let zones = sqlite.zones().expect("zones");
    let listed: Vec<(String, i64)> = zones.iter().map(|z| (z.origin.to_string(), z.id)).collect();
    let want: Vec<(String, i64)> = db.zones.iter().map(|(n, i)| (n.to_string(), *i)).collect();
    assert_eq!(listed, want, "{}: zones", db.path);
    assert_eq!(
        loaded.len(),
        zones.len(),
        "{}: every zone copied to memory",
        db.path
    );

    let by_sqlite = processor(sqlite.clone());
    let by_memory = processor(memory);
    let mut tally = Tally::default();
    let mut id = 0u16;
    for zone in &zones {
        let data = ZoneData::new(
            zone.origin.clone(),
            sqlite
                .zone_rrsets(zone)
                .expect("zone reads")
                .into_iter()
                .map(Arc::unwrap_or_clone)
                .collect(),
        );
        assert!(
            data.get(&zone.origin, RType::SOA).is_some(),
            "{}: apex SOA",
            db.path
        );
        for set in &data.sets {
            // Which zone of this DB answers for the owner (DS from the parent side).
            let serving = sqlite.find_zone(&set.owner).expect("find_zone");
            let ours = match &serving {
                Some(z) if z.origin == zone.origin => true,
                Some(z) if set.rtype == RType::DS && z.origin == set.owner => {
                    set.owner.parent().is_some_and(|p| {
                        sqlite.find_zone(&p).expect("find_zone").map(|z| z.origin)
                            == Some(zone.origin.clone())
                    })
                }
                _ => false,
            };
            let expect = if ours { expectation(&data, set) } else { None };
            let what = format!(
                "{}: {} {} in {}",
                db.path, set.owner, set.rtype, zone.origin
            );
            for dnssec in [false, true] {
                id = id.wrapping_add(1);
                let q = query(id, &set.owner, set.rtype, dnssec);
                let a = ask_raw(&by_sqlite, &q, Transport::Tcp);
                let b = ask_raw(&by_memory, &q, Transport::Tcp);
                // The same message; the bytes may differ in name compression
                // (memory renders referrals from per-cut templates).
                assert_eq!(
                    decode(&a),
                    decode(&b),
                    "{what} (DO={dnssec}): sqlite3 and memory replies differ"
                );
                let Some(expect) = &expect else {
                    continue;
                };
                let msg = decode(&a);
                check(&msg, expect, set, &data, dnssec, &what);
                if !dnssec {
                    match expect {
                        Expect::Answer(_) => tally.answers += 1,
                        Expect::Referral(_) => tally.referrals += 1,
                        Expect::CnameFirst(_) => tally.cnames += 1,
                        Expect::Dname(_) => tally.dnames += 1,
                        Expect::NxDomain => tally.nxdomains += 1,
                    }
                }
            }
            if expect.is_none() {
                tally.skipped += 1;
            }
        }
    }
    tally
}

/// Removes the RRSIGs from a section (they are checked by count).
fn split_sigs(records: &[Record]) -> (Vec<Record>, usize) {
    let sigs = records
        .iter()
        .filter(|r| r.record_type() == RecordType::RRSIG)
        .count();
    let rest = records
        .iter()
        .filter(|r| r.record_type() != RecordType::RRSIG)
        .cloned()
        .collect();
    (rest, sigs)
}

fn check(msg: &Message, expect: &Expect<'_>, set: &RRset, z: &ZoneData, dnssec: bool, what: &str) {
    let m = &msg.metadata;
    match expect {
        Expect::Answer(s) => {
            assert_eq!(m.response_code, ResponseCode::NoError, "{what}");
            assert!(m.authoritative, "{what}: AA");
            let (answer, sigs) = split_sigs(&msg.answers);
            assert_is_set(&answer, s, &s.owner, what);
            assert_eq!(
                sigs,
                if dnssec { s.sigs.len() } else { 0 },
                "{what}: RRSIGs"
            );
            assert!(
                msg.authorities.is_empty(),
                "{what}: {:?}",
                shows(&msg.authorities)
            );
            // Additional data are addresses from the zone.
            for r in &msg.additionals {
                assert!(
                    matches!(
                        r.record_type(),
                        RecordType::A | RecordType::AAAA | RecordType::RRSIG
                    ),
                    "{what}: additional {}",
                    show(r)
                );
            }
        }
        Expect::Referral(ns) => {
            assert_eq!(m.response_code, ResponseCode::NoError, "{what}");
            assert!(!m.authoritative, "{what}: a referral clears AA");
            assert!(msg.answers.is_empty(), "{what}: {:?}", shows(&msg.answers));
            let n = ns.rdatas.len();
            assert!(msg.authorities.len() >= n, "{what}");
            assert_is_set(&msg.authorities[..n], ns, &ns.owner, what);
            // In-domain glue (RFC 9471): addresses of NS hosts below the cut.
            let additional = shows(&msg.additionals);
            for rdata in &ns.rdatas {
                let host = rdata.additional_target(RType::NS).expect("NS target");
                if !host.is_subdomain_of(&ns.owner) {
                    continue;
                }
                for rtype in [RType::A, RType::AAAA] {
                    if let Some(glue) = z.get(&host, rtype) {
                        for rd in &glue.rdatas {
                            let line = format!(
                                "{} {} {} {}",
                                hname(&host),
                                glue.ttl,
                                rtype,
                                rd.to_text(rtype).expect("text")
                            );
                            assert!(
                                additional.contains(&line),
                                "{what}: glue {line} in {additional:?}"
                            );
                        }
                    }
                }
            }
        }
        Expect::CnameFirst(cname) => {
            assert!(m.authoritative, "{what}: AA");
            assert_ne!(m.response_code, ResponseCode::ServFail, "{what}");
            let (answer, _) = split_sigs(&msg.answers);
            assert!(!answer.is_empty(), "{what}");
            assert_is_set(&answer[..1], cname, &set.owner, what);
        }
        Expect::Dname(dname) => {
            assert!(m.authoritative, "{what}: AA");
            let (answer, _) = split_sigs(&msg.answers);
            assert!(answer.len() >= 2, "{what}: {:?}", shows(&answer));
            assert_is_set(&answer[..1], dname, &dname.owner, what);
            let target = dname.rdatas[0].target_name().expect("DNAME target");
            let synth = set
                .owner
                .replace_suffix(&dname.owner, &target)
                .expect("below")
                .expect("fits");
            assert_eq!(answer[1].name, hname(&set.owner), "{what}");
            assert_eq!(answer[1].ttl, dname.ttl, "{what}");
            assert_eq!(
                answer[1].data,
                RData::CNAME(hickory_proto::rr::rdata::CNAME(hname(&synth))),
                "{what}"
            );
        }
        Expect::NxDomain => {
            assert_eq!(m.response_code, ResponseCode::NXDomain, "{what}");
            assert!(m.authoritative, "{what}: AA");
            assert!(msg.answers.is_empty(), "{what}");
            // Denial proofs (NSEC/NSEC3 with DO) are checked by the DNSSEC tests.
            let (auth, _) = split_sigs(&msg.authorities);
            let auth: Vec<Record> = auth
                .into_iter()
                .filter(|r| !matches!(r.record_type(), RecordType::NSEC | RecordType::NSEC3))
                .collect();
            let soa = z.get(&z.origin, RType::SOA).expect("SOA");
            assert_eq!(auth.len(), 1, "{what}");
            assert_eq!(auth[0].name, hname(&z.origin), "{what}");
            assert_eq!(auth[0].ttl, soa_negative_ttl(z), "{what}");
            assert_eq!(
                auth[0].data,
                hickory_rdata(RType::SOA, &soa.rdatas[0]),
                "{what}"
            );
        }
    }
}

/// Every RRset of every zone in every DB answers as the data says, through
/// sqlite3 and through memory alike, and no DB changes.
#[test]
fn every_rrset_of_every_bind10_db_answers_as_stored() {
    let mut total = Tally::default();
    for db in DBS {
        let opened = Opened::new(db.path);
        let t = walk(&opened, db);
        assert!(t.answers > 0, "{}: {t:?}", db.path);
        total.answers += t.answers;
        total.referrals += t.referrals;
        total.cnames += t.cnames;
        total.dnames += t.dnames;
        total.nxdomains += t.nxdomains;
        total.skipped += t.skipped;
        opened.assert_unmodified();
    }
    // Every kind of expectation but DNAME was exercised on real BIND 10 data (no
    // BIND 10 DB has data occluded by a DNAME, so `dnames` stays 0).
    assert!(
        total.referrals > 0 && total.cnames > 0 && total.nxdomains > 0,
        "{total:?}"
    );
    eprintln!("checked: {total:?}");
}

/// A decoded reply in `owner ttl TYPE rdata` strings, answer/authority/additional.
struct Reply {
    rcode: ResponseCode,
    aa: bool,
    tc: bool,
    answer: Vec<String>,
    authority: Vec<String>,
    additional: Vec<String>,
}

fn ask(p: &Dispatcher, qname: &str, qtype: RType, dnssec: bool, transport: Transport) -> Reply {
    let wire = ask_raw(p, &query(0x0b10, &name(qname), qtype, dnssec), transport);
    let msg = decode(&wire);
    Reply {
        rcode: msg.metadata.response_code,
        aa: msg.metadata.authoritative,
        tc: msg.metadata.truncation,
        answer: shows(&msg.answers),
        authority: shows(&msg.authorities),
        additional: shows(&msg.additionals),
    }
}

fn q(p: &Dispatcher, qname: &str, qtype: RType) -> Reply {
    ask(p, qname, qtype, false, Transport::Tcp)
}

/// The sqlite3 backend over `opened` and memory loaded from it, by label.
fn both(opened: &Opened) -> Vec<(&'static str, Dispatcher)> {
    let memory = Arc::new(MemorySource::new("bind10"));
    memory
        .load_from_source(opened.sqlite.as_ref())
        .expect("memory loads");
    vec![
        ("sqlite3", processor(opened.sqlite.clone())),
        ("memory", processor(memory)),
    ]
}

fn assert_answer(r: &Reply, answer: &[&str], what: &str) {
    assert_eq!(r.rcode, ResponseCode::NoError, "{what}");
    assert!(r.aa, "{what}: AA");
    assert_eq!(r.answer, answer, "{what}");
}

fn assert_negative(r: &Reply, rcode: ResponseCode, soa: &str, what: &str) {
    assert_eq!(r.rcode, rcode, "{what}");
    assert!(r.aa, "{what}: AA");
    assert!(r.answer.is_empty(), "{what}: {:?}", r.answer);
    assert_eq!(r.authority, [soa], "{what}");
}

/// datasrc `test.sqlite3`, zone example.com (zone_id 1) and its children.
#[test]
fn datasrc_test_sqlite3_hand_checked() {
    let opened = Opened::new("datasrc/test.sqlite3");
    // records: example.com. 3600 SOA "master.example.com. admin.example.com. 1234 3600 1800 2419200 7200";
    // negative TTL = min(SOA TTL 3600, MINIMUM 7200) = 3600 (RFC 2308 §3).
    const SOA: &str =
        "example.com. 3600 SOA master.example.com. admin.example.com. 1234 3600 1800 2419200 7200";
    for (backend, p) in both(&opened) {
        // Wildcard: row `*.wild.example.com. 3600 A 192.0.2.255`; owner becomes the qname.
        let r = q(&p, "foo.wild.example.com.", RType::A);
        assert_answer(&r, &["foo.wild.example.com. 3600 A 192.0.2.255"], backend);
        // CNAME: `cname-int.example.com. 3600 CNAME www.example.com.`, then
        // `www.example.com. 3600 A 192.0.2.1` from the same zone.
        let r = q(&p, "cname-int.example.com.", RType::A);
        assert_answer(
            &r,
            &[
                "cname-int.example.com. 3600 CNAME www.example.com.",
                "www.example.com. 3600 A 192.0.2.1",
            ],
            backend,
        );
        // Referral with glue: `subzone.example.com. 3600 NS ns1/ns2.subzone.example.com.`,
        // glue `ns1.subzone.example.com. 3600 A 192.0.2.1`, `ns2… 3600 A 192.0.2.2`.
        let r = q(&p, "www.subzone.example.com.", RType::A);
        assert_eq!(r.rcode, ResponseCode::NoError, "{backend}");
        assert!(!r.aa && r.answer.is_empty(), "{backend}");
        let ns = [
            "subzone.example.com. 3600 NS ns1.subzone.example.com.",
            "subzone.example.com. 3600 NS ns2.subzone.example.com.",
        ];
        assert_eq!(sorted(r.authority.clone()), ns, "{backend}");
        assert_eq!(
            sorted(r.additional.clone()),
            [
                "ns1.subzone.example.com. 3600 A 192.0.2.1",
                "ns2.subzone.example.com. 3600 A 192.0.2.2"
            ],
            "{backend}"
        );
        // With DO the signed DS set of the cut joins (rows `subzone.example.com. 3600 DS 40633 5 1/2 …`).
        let r = ask(
            &p,
            "www.subzone.example.com.",
            RType::A,
            true,
            Transport::Tcp,
        );
        let unsigned: Vec<String> = r
            .authority
            .iter()
            .filter(|l| !l.contains(" RRSIG "))
            .cloned()
            .collect();
        assert_eq!(
            sorted(unsigned),
            [
                "subzone.example.com. 3600 DS 40633 5 1 3E56C0EA92CF529E005A4B62979533350492F105",
                "subzone.example.com. 3600 DS 40633 5 2 AA8D4BD330C68BFB4D785894DDCF6B689CE9873C4A3801F57A5AA3FE 17925B8C",
                ns[0],
                ns[1],
            ],
            "{backend}"
        );
        // One RRSIG row covers that DS set (sigtype DS); the NS set at a cut is unsigned.
        assert_eq!(r.authority.len(), 5, "{backend}: {:?}", r.authority);
        assert_eq!(
            r.authority
                .iter()
                .filter(|l| l.contains(" RRSIG DS "))
                .count(),
            1,
            "{backend}"
        );
        // DNAME: `dname.example.com. 3600 DNAME sql1.example.com.` plus the synthesized
        // CNAME (RFC 6672 §3.1, TTL of the DNAME); its target is below the sql1 cut,
        // so the chase stops there.
        let r = q(&p, "www.dname.example.com.", RType::A);
        assert_answer(
            &r,
            &[
                "dname.example.com. 3600 DNAME sql1.example.com.",
                "www.dname.example.com. 3600 CNAME www.sql1.example.com.",
            ],
            backend,
        );
        // NXDOMAIN and NODATA (`www.example.com.` has A and NSEC only; `bar.example.com.`
        // is an empty non-terminal above `foo.bar.example.com. A 192.0.2.1`).
        assert_negative(
            &q(&p, "nosuch.example.com.", RType::A),
            ResponseCode::NXDomain,
            SOA,
            backend,
        );
        assert_negative(
            &q(&p, "www.example.com.", RType::TXT),
            ResponseCode::NoError,
            SOA,
            backend,
        );
        assert_negative(
            &q(&p, "bar.example.com.", RType::A),
            ResponseCode::NoError,
            SOA,
            backend,
        );
        // Apex NS rows have TTLs 1200, 3600, 1800: the set's TTL is the smallest (as BIND 10).
        let r = q(&p, "example.com.", RType::NS);
        assert_eq!(
            sorted(r.answer.clone()),
            [
                "example.com. 1200 NS dns01.example.com.",
                "example.com. 1200 NS dns02.example.com.",
                "example.com. 1200 NS dns03.example.com.",
            ],
            "{backend}"
        );
        // DS of the child zone sql1.example.com (also in this DB) comes from the parent.
        let r = q(&p, "sql1.example.com.", RType::DS);
        assert!(r.aa, "{backend}");
        assert_eq!(
            sorted(r.answer.clone()),
            [
                "sql1.example.com. 3600 DS 33313 5 1 FDD7A2C11AA7F55D50FBF9B7EDDA2322C541A8DE",
                "sql1.example.com. 3600 DS 33313 5 2 0B99B7006F496D135B01AB17EDB469B4BE9E1973884DEA757BC4E301 5A8C3AB3",
            ],
            "{backend}"
        );
        // The child zone answers for its own names: `www.sql1.example.com. 3600 A 192.0.2.100`.
        assert_answer(
            &q(&p, "www.sql1.example.com.", RType::A),
            &["www.sql1.example.com. 3600 A 192.0.2.100"],
            backend,
        );
        // NSEC3 zone sql2: `g.h.i.sql2.example.com.` is an empty non-terminal above
        // `e.f.g.h.i.sql2.example.com. A 192.0.2.6`; SOA serial 678.
        assert_negative(
            &q(&p, "g.h.i.sql2.example.com.", RType::A),
            ResponseCode::NoError,
            "sql2.example.com. 3600 SOA master.example.com. admin.example.com. 678 3600 1800 2419200 7200",
            backend,
        );
    }
    opened.assert_unmodified();
}

/// lettuce `ixfr-out/zones.sqlite3`: the real tjeb.nl zone (zone_id 2).
#[test]
fn tjeb_nl_apex_soa_ns_mx() {
    let opened = Opened::new("lettuce/ixfr-out/zones.sqlite3");
    for (backend, p) in both(&opened) {
        // Row `tjeb.nl. 7200 SOA ns.tjeb.nl. jelte.tjeb.nl. 1154 28800 7200 604800 3600`.
        const SOA: &str =
            "tjeb.nl. 7200 SOA ns.tjeb.nl. jelte.tjeb.nl. 1154 28800 7200 604800 3600";
        assert_answer(&q(&p, "tjeb.nl.", RType::SOA), &[SOA], backend);
        // Four NS rows, TTL 3600; additional: A/AAAA of the two in-zone hosts.
        let r = q(&p, "tjeb.nl.", RType::NS);
        assert!(r.aa && r.rcode == ResponseCode::NoError, "{backend}");
        assert_eq!(
            sorted(r.answer.clone()),
            [
                "tjeb.nl. 3600 NS ext.ns.whyscream.net.",
                "tjeb.nl. 3600 NS ns-ext.nlnetlabs.nl.",
                "tjeb.nl. 3600 NS ns.tjeb.nl.",
                "tjeb.nl. 3600 NS ns2.tjeb.nl.",
            ],
            "{backend}"
        );
        assert_eq!(
            sorted(r.additional.clone()),
            [
                "ns.tjeb.nl. 3600 A 178.18.82.80",
                "ns.tjeb.nl. 3600 AAAA 2a02:348:55:5250::53",
                "ns2.tjeb.nl. 3600 A 195.169.221.157",
                "ns2.tjeb.nl. 3600 AAAA 2001:470:1f14:17ba::53",
            ],
            "{backend}"
        );
        // MX rows `10 mx.tjeb.nl.`, `50 tjeb.atoom.net.`; mx.tjeb.nl's addresses follow.
        let r = q(&p, "tjeb.nl.", RType::MX);
        assert_eq!(
            sorted(r.answer.clone()),
            [
                "tjeb.nl. 3600 MX 10 mx.tjeb.nl.",
                "tjeb.nl. 3600 MX 50 tjeb.atoom.net."
            ],
            "{backend}"
        );
        assert_eq!(
            sorted(r.additional.clone()),
            [
                "mx.tjeb.nl. 3600 A 178.18.82.80",
                "mx.tjeb.nl. 3600 AAAA 2a02:348:55:5250::25"
            ],
            "{backend}"
        );
        // NXDOMAIN: the SOA with TTL min(7200, MINIMUM 3600) = 3600 (RFC 2308 §3).
        assert_negative(
            &q(&p, "nosuch.tjeb.nl.", RType::A),
            ResponseCode::NXDomain,
            "tjeb.nl. 3600 SOA ns.tjeb.nl. jelte.tjeb.nl. 1154 28800 7200 604800 3600",
            backend,
        );
        // Wildcard `*.wildcard.tjeb.nl. 60 TXT "Hello, world!"`.
        let r = q(&p, "foo.wildcard.tjeb.nl.", RType::TXT);
        assert_answer(&r, &["foo.wildcard.tjeb.nl. 60 TXT Hello, world!"], backend);
        // The apex DNSKEY with DO: one key, its RRSIGs attached.
        let r = ask(&p, "tjeb.nl.", RType::DNSKEY, true, Transport::Tcp);
        assert!(r.aa, "{backend}");
        assert_eq!(
            r.answer
                .iter()
                .filter(|l| l.contains(" DNSKEY 257 3 8 "))
                .count(),
            1,
            "{backend}: {:?}",
            r.answer
        );
        assert!(
            r.answer
                .iter()
                .any(|l| l.contains(" RRSIG DNSKEY 8 2 3600 ")),
            "{backend}: {:?}",
            r.answer
        );
        // bigtxt: 81 TXT rows do not fit in 512 bytes over UDP: TC, nothing partial.
        let r = ask(&p, "bigtxt.tjeb.nl.", RType::TXT, false, Transport::Udp);
        assert!(r.tc && r.answer.is_empty(), "{backend}");
        assert_eq!(
            q(&p, "bigtxt.tjeb.nl.", RType::TXT).answer.len(),
            81,
            "{backend}"
        );
    }
    opened.assert_unmodified();
}

/// The root zone DBs: datasrc `test-root.sqlite3` (a 2010 root snippet) and
/// lettuce `glue.sqlite3`.
#[test]
fn root_zone_soa_and_ns() {
    let opened = Opened::new("datasrc/test-root.sqlite3");
    for (backend, p) in both(&opened) {
        // Row `. 86400 SOA a.root-servers.net. nstld.verisign-grs.com. 2010030802 1800 900 604800 86400`.
        assert_answer(
            &q(&p, ".", RType::SOA),
            &[
                ". 86400 SOA a.root-servers.net. nstld.verisign-grs.com. 2010030802 1800 900 604800 86400",
            ],
            backend,
        );
        // 13 NS rows `. 518400 NS [a-m].root-servers.net.`; all hosts are in the
        // zone: 13 A and 7 AAAA rows, TTL 3600000.
        let r = q(&p, ".", RType::NS);
        let want: Vec<String> = ('a'..='m')
            .map(|c| format!(". 518400 NS {c}.root-servers.net."))
            .collect();
        assert!(r.aa, "{backend}");
        assert_eq!(sorted(r.answer.clone()), want, "{backend}");
        assert_eq!(r.additional.len(), 20, "{backend}: {:?}", r.additional);
        assert!(
            r.additional
                .contains(&"a.root-servers.net. 3600000 A 198.41.0.4".to_string()),
            "{backend}"
        );
        assert!(
            r.additional
                .contains(&"m.root-servers.net. 3600000 AAAA 2001:dc3::35".to_string()),
            "{backend}"
        );
        assert_negative(
            &q(&p, "nosuch.", RType::A),
            ResponseCode::NXDomain,
            ". 86400 SOA a.root-servers.net. nstld.verisign-grs.com. 2010030802 1800 900 604800 86400",
            backend,
        );
    }
    opened.assert_unmodified();

    let opened = Opened::new("lettuce/glue.sqlite3");
    for (backend, p) in both(&opened) {
        // Zone `.` (id 1): `. 300 SOA postmaster.example. a.root.servers.nil. 2000042100 600 600 1200 600`.
        assert_answer(
            &q(&p, ".", RType::SOA),
            &[". 300 SOA postmaster.example. a.root.servers.nil. 2000042100 600 600 1200 600"],
            backend,
        );
        assert_answer(
            &q(&p, ".", RType::NS),
            &[". 300 NS a.root-servers.nil."],
            backend,
        );
        // Referral to `example.` (NS `NS.example.`, `NS1.example.COM.`): the in-domain glue
        // `NS.example. 172800 A 192.0.2.1/.2` is required.
        let r = q(&p, "www.example.", RType::A);
        assert!(!r.aa && r.answer.is_empty(), "{backend}");
        assert_eq!(
            sorted(r.authority.clone()),
            [
                "example. 172800 NS NS.example.",
                "example. 172800 NS NS1.example.COM."
            ],
            "{backend}"
        );
        assert!(
            r.additional
                .contains(&"NS.example. 172800 A 192.0.2.1".to_string()),
            "{backend}: {:?}",
            r.additional
        );
        assert!(
            r.additional
                .contains(&"NS.example. 172800 A 192.0.2.2".to_string()),
            "{backend}: {:?}",
            r.additional
        );
        // `com.` is both a delegation in `.` and a zone of its own (id 3): the zone answers.
        assert_answer(
            &q(&p, "com.", RType::SOA),
            &["com. 300 SOA root.example.com. a.root.servers.nil. 2000042100 600 600 1200 600"],
            backend,
        );
    }
    opened.assert_unmodified();
}

/// A writable copy of a DB in a temporary directory, changed by `sql`.
fn broken_copy(rel: &str, sql: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("broken.sqlite3");
    std::fs::copy(db_path(rel), &path).expect("copy");
    let conn = rusqlite::Connection::open(&path).expect("open copy");
    let changed = conn.execute(sql, []).expect("update");
    assert_eq!(changed, 1, "{sql}");
    drop(conn);
    (dir, path)
}

fn bad_data_name(e: DataSourceError) -> String {
    match e {
        DataSourceError::BadData { name, .. } => name,
        other => panic!("expected bad data, got {other}"),
    }
}

/// Names unaffected by a broken row in datasrc `test.sqlite3` keep answering.
fn assert_rest_of_test_sqlite3_answers(p: &Dispatcher) {
    assert_answer(
        &q(p, "mail.example.com.", RType::A),
        &["mail.example.com. 3600 A 192.0.2.10"],
        "mail",
    );
    assert_answer(
        &q(p, "ip6.example.com.", RType::AAAA),
        &["ip6.example.com. 3600 AAAA 2001:db8::1234"],
        "ip6",
    );
    assert_eq!(
        q(p, "nosuch.example.com.", RType::A).rcode,
        ResponseCode::NXDomain
    );
    assert_answer(
        &q(p, "www.sql1.example.com.", RType::A),
        &["www.sql1.example.com. 3600 A 192.0.2.100"],
        "sql1",
    );
}

/// A row whose rdata does not parse fails the lookups that need its type (and
/// qtype ANY, and RRSIG, which is answered from ANY) at its name, and nothing
/// else: other types at that name answer as if the row were not there. This
/// follows BIND 10's `DatabaseClient` (database.cc `getRRsets`), which
/// converted only the rdata of the types a find wanted.
#[test]
fn unparsable_rdata_row_is_servfail_for_its_type_only() {
    // `www.example.com. 3600 A 192.0.2.1` becomes an address that does not parse.
    let (_dir, path) = broken_copy(
        "datasrc/test.sqlite3",
        "UPDATE records SET rdata='192.0.2.300' WHERE name='www.example.com.' AND rdtype='A'",
    );
    let sqlite = Arc::new(SqliteSource::open(&path).expect("opens"));
    let p = processor(sqlite.clone());
    for qtype in [RType::A, RType::ANY, RType::RRSIG] {
        let r = q(&p, "www.example.com.", qtype);
        assert_eq!(r.rcode, ResponseCode::ServFail, "{qtype}");
        assert!(
            !r.aa && r.answer.is_empty() && r.authority.is_empty(),
            "{qtype}"
        );
    }
    // `www.example.com.` has A and NSEC only: TXT is NODATA, NSEC answers.
    assert_negative(
        &q(&p, "www.example.com.", RType::TXT),
        ResponseCode::NoError,
        "example.com. 3600 SOA master.example.com. admin.example.com. 1234 3600 1800 2419200 7200",
        "TXT",
    );
    let r = ask(&p, "www.example.com.", RType::NSEC, true, Transport::Tcp);
    assert_eq!(r.rcode, ResponseCode::NoError, "NSEC");
    assert!(r.aa, "NSEC: AA");
    assert_eq!(r.answer.len(), 2, "NSEC and its RRSIG: {:?}", r.answer);
    assert_eq!(
        r.answer[0], "www.example.com. 7200 NSEC example.com. A RRSIG NSEC",
        "NSEC"
    );
    assert!(
        r.answer[1].starts_with("www.example.com. 7200 RRSIG NSEC "),
        "{:?}",
        r.answer
    );
    // A CNAME leading to it fails too; everything else answers.
    assert_eq!(
        q(&p, "cname-int.example.com.", RType::A).rcode,
        ResponseCode::ServFail
    );
    assert_rest_of_test_sqlite3_answers(&p);
    // The whole zone cannot be read (for transfers or loading into memory); the
    // error names the bad owner. The other zones of the DB read fine.
    let zones = sqlite.zones().expect("zones");
    let e = sqlite.zone_rrsets(&zones[0]).expect_err("bad row");
    assert_eq!(bad_data_name(e), "www.example.com.");
    // sql1.example.com: apex DNSKEY, NS, NSEC, SOA; www A, NSEC.
    assert_eq!(sqlite.zone_rrsets(&zones[1]).expect("sql1 reads").len(), 6);
    let e = MemorySource::new("broken")
        .load_from_source(sqlite.as_ref())
        .expect_err("bad zone");
    assert_eq!(bad_data_name(e), "www.example.com.");
}

/// Additional-section data is optional: an unparsable address row of an MX
/// target or of an NS host leaves that address RRset out of the replies that
/// would carry it as additional data, logged, and fails only the lookups that
/// ask for it directly. Also through the hot-spot cache, whose prepared
/// address list for the MX set fails as a whole.
#[test]
fn unparsable_additional_address_row_is_omitted_not_servfail() {
    // `mail.example.com. 3600 A 192.0.2.10` (target of `example.com. MX 10`)
    // and the glue `ns1.subzone.example.com. 3600 A 192.0.2.1` stop parsing;
    // `example.com. MX 20` points to `mix.example.com.` (two A, two AAAA).
    let (_dir, path) = broken_copy(
        "datasrc/test.sqlite3",
        "UPDATE records SET rdata='192.0.2.300' WHERE name='mail.example.com.' AND rdtype='A'",
    );
    let conn = rusqlite::Connection::open(&path).expect("open copy");
    for sql in [
        "UPDATE records SET rdata='192.0.2.300' WHERE name='ns1.subzone.example.com.' AND rdtype='A'",
        "UPDATE records SET rdata='20 mix.example.com.' WHERE rdata='20 mail.subzone.example.com.'",
    ] {
        assert_eq!(conn.execute(sql, []).expect("update"), 1, "{sql}");
    }
    drop(conn);
    let sqlite: Arc<dyn DataSource> = Arc::new(SqliteSource::open(&path).expect("opens"));
    let cached: Arc<dyn DataSource> =
        Arc::new(HotSpotCache::new(sqlite.clone(), Slots::from_count(64)));
    for (backend, source) in [("sqlite3", sqlite), ("cache", cached)] {
        let p = processor(source);
        for round in ["cold", "warm"] {
            let what = format!("{backend} {round}");
            let r = q(&p, "example.com.", RType::MX);
            assert_eq!(r.rcode, ResponseCode::NoError, "{what}");
            assert!(r.aa && !r.tc, "{what}");
            assert_eq!(
                sorted(r.answer.clone()),
                [
                    "example.com. 3600 MX 10 mail.example.com.",
                    "example.com. 3600 MX 20 mix.example.com.",
                ],
                "{what}"
            );
            assert_eq!(
                sorted(r.additional.clone()),
                [
                    "mix.example.com. 3600 A 192.0.2.1",
                    "mix.example.com. 3600 A 192.0.2.2",
                    "mix.example.com. 3600 AAAA 2001:db8::1",
                    "mix.example.com. 3600 AAAA 2001:db8::2",
                ],
                "{what}"
            );
            // The referral keeps both NS and the glue that parses.
            let r = q(&p, "www.subzone.example.com.", RType::A);
            assert_eq!(r.rcode, ResponseCode::NoError, "{what}");
            assert!(!r.aa && r.answer.is_empty(), "{what}");
            assert_eq!(
                sorted(r.authority.clone()),
                [
                    "subzone.example.com. 3600 NS ns1.subzone.example.com.",
                    "subzone.example.com. 3600 NS ns2.subzone.example.com.",
                ],
                "{what}"
            );
            assert_eq!(
                r.additional,
                ["ns2.subzone.example.com. 3600 A 192.0.2.2"],
                "{what}"
            );
            // Asked for directly, the bad RRset is still SERVFAIL.
            let r = q(&p, "mail.example.com.", RType::A);
            assert_eq!(r.rcode, ResponseCode::ServFail, "{what}");
            assert!(r.answer.is_empty() && r.additional.is_empty(), "{what}");
        }
    }
}

/// An RRSIG row that does not parse fails only the lookups that want the
/// RRSIGs of the type it covers (with DO) at its name; the RRset itself, and
/// other types with their RRSIGs, answer.
#[test]
fn unparsable_rrsig_row_is_servfail_for_signed_lookups_of_its_type_only() {
    // The RRSIG covering `www.example.com. 7200 NSEC` loses its signature.
    let (_dir, path) = broken_copy(
        "datasrc/test.sqlite3",
        "UPDATE records SET rdata='NSEC 5 3 7200 not-a-signature' \
         WHERE name='www.example.com.' AND rdtype='RRSIG' AND rdata LIKE 'NSEC %'",
    );
    let sqlite = Arc::new(SqliteSource::open(&path).expect("opens"));
    let p = processor(sqlite.clone());
    let r = ask(&p, "www.example.com.", RType::NSEC, true, Transport::Tcp);
    assert_eq!(r.rcode, ResponseCode::ServFail, "NSEC with DO");
    assert!(r.answer.is_empty(), "NSEC with DO");
    assert_answer(
        &q(&p, "www.example.com.", RType::NSEC),
        &["www.example.com. 7200 NSEC example.com. A RRSIG NSEC"],
        "NSEC without DO",
    );
    let r = ask(&p, "www.example.com.", RType::A, true, Transport::Tcp);
    assert_eq!(r.rcode, ResponseCode::NoError, "A with DO");
    assert_eq!(r.answer.len(), 2, "A and its RRSIG: {:?}", r.answer);
    assert_eq!(
        r.answer[0], "www.example.com. 3600 A 192.0.2.1",
        "A with DO"
    );
    let e = sqlite
        .zone_rrsets(&sqlite.zones().expect("zones")[0])
        .expect_err("bad row");
    assert_eq!(bad_data_name(e), "www.example.com.");
}

#[test]
fn cname_beside_other_data_is_servfail_for_that_name_only() {
    // `ip46.example.com. 3600 AAAA 2001:db8::1234` becomes a CNAME beside its A row.
    let (_dir, path) = broken_copy(
        "datasrc/test.sqlite3",
        "UPDATE records SET rdtype='CNAME', rdata='www.example.com.' \
         WHERE name='ip46.example.com.' AND rdtype='AAAA'",
    );
    let sqlite = Arc::new(SqliteSource::open(&path).expect("opens"));
    let p = processor(sqlite.clone());
    for qtype in [RType::A, RType::CNAME, RType::AAAA] {
        let r = q(&p, "ip46.example.com.", qtype);
        assert_eq!(r.rcode, ResponseCode::ServFail, "{qtype}");
        assert!(r.answer.is_empty(), "{qtype}");
    }
    assert_rest_of_test_sqlite3_answers(&p);
    assert_answer(
        &q(&p, "www.example.com.", RType::A),
        &["www.example.com. 3600 A 192.0.2.1"],
        "www",
    );
    let e = sqlite
        .zone_rrsets(&sqlite.zones().expect("zones")[0])
        .expect_err("bad node");
    assert_eq!(bad_data_name(e), "ip46.example.com.");
}

/// BIND 10's own broken DBs: auth `example.sqlite3` and testutils `example.sqlite3`
/// hold `broken.example.com. CNAME` whose target has a 70-octet label (BIND 10's
/// auth tests expect a lookup of it to fail). Served unmodified: SERVFAIL for
/// that name, the rest of the root zone answers.
#[test]
fn bind10_broken_cname_target_is_servfail_for_that_name_only() {
    for (rel, id) in [
        ("auth/example.sqlite3", 3),
        ("testutils/example.sqlite3", 4),
    ] {
        let opened = Opened::new(rel);
        let zones = opened.sqlite.zones().expect("zones");
        assert_eq!(
            zones,
            [ZoneRef {
                origin: Name::root(),
                id
            }],
            "{rel}"
        );
        let p = processor(opened.sqlite.clone());
        let r = q(&p, "broken.example.com.", RType::A);
        assert_eq!(r.rcode, ResponseCode::ServFail, "{rel}");
        // Rows `. 3600 SOA ns.example.com. admin.example.com. 1234 3600 1800 2419200 7200`,
        // `. 3600 NS ns.example.com.`, `ns.example.com. 3600 A 192.0.2.1`.
        assert_answer(
            &q(&p, ".", RType::SOA),
            &[". 3600 SOA ns.example.com. admin.example.com. 1234 3600 1800 2419200 7200"],
            rel,
        );
        let r = q(&p, ".", RType::NS);
        assert_answer(&r, &[". 3600 NS ns.example.com."], rel);
        assert_eq!(r.additional, ["ns.example.com. 3600 A 192.0.2.1"], "{rel}");
        assert_answer(
            &q(&p, "ns.example.com.", RType::A),
            &["ns.example.com. 3600 A 192.0.2.1"],
            rel,
        );
        assert_eq!(
            q(&p, "nosuch.example.com.", RType::A).rcode,
            ResponseCode::NXDomain,
            "{rel}"
        );
        let e = opened.sqlite.zone_rrsets(&zones[0]).expect_err("bad CNAME");
        assert_eq!(bad_data_name(e), "broken.example.com.", "{rel}");
        opened.assert_unmodified();
    }
    // testutils also has six 103-octet TXT rows at `large-rdata.example.com.`:
    // over UDP without EDNS they do not fit in 512 octets (TC); over TCP they do.
    let opened = Opened::new("testutils/example.sqlite3");
    let p = processor(opened.sqlite.clone());
    let r = ask(
        &p,
        "large-rdata.example.com.",
        RType::TXT,
        false,
        Transport::Udp,
    );
    assert!(r.tc && r.answer.is_empty());
    let r = q(&p, "large-rdata.example.com.", RType::TXT);
    assert_eq!(r.answer.len(), 6);
    assert!(
        r.answer[0].starts_with("large-rdata.example.com. 3600 TXT 0-12345678901234567890"),
        "{:?}",
        r.answer
    );
    opened.assert_unmodified();
}

/// Regression: the memory backend put NSEC3 RRsets in its name tree, so a
/// query for an NSEC3 owner name got a positive answer (or NODATA) from memory
/// while sqlite3 (and BIND 10) answer NXDOMAIN: RFC 5155 §7.2.9.
#[test]
fn memory_nsec3_owner_names_are_not_zone_names() {
    let opened = Opened::new("datasrc/test.sqlite3");
    for (backend, p) in both(&opened) {
        // nsec3 row `1BB7SO0452U1QHL98UISNDD9218GELR5.sql2.example.com. NSEC3 1 0 10 FEEDABEE …` (zone_id 3).
        for qtype in [RType::NSEC3, RType::A] {
            assert_negative(
                &q(
                    &p,
                    "1BB7SO0452U1QHL98UISNDD9218GELR5.sql2.example.com.",
                    qtype,
                ),
                ResponseCode::NXDomain,
                "sql2.example.com. 3600 SOA master.example.com. admin.example.com. 678 3600 1800 2419200 7200",
                backend,
            );
        }
    }
    // The NSEC3 sets still travel with the zone (transfers): 11 of them.
    let memory = MemorySource::new("m");
    memory
        .load_from_source(opened.sqlite.as_ref())
        .expect("loads");
    let sql2 = ZoneRef {
        origin: name("sql2.example.com."),
        id: 0,
    };
    let sets = memory.zone_rrsets(&sql2).expect("sql2");
    assert_eq!(sets.iter().filter(|s| s.rtype == RType::NSEC3).count(), 11);
    assert!(
        sets.iter()
            .filter(|s| s.rtype == RType::NSEC3)
            .all(|s| s.sigs.len() == 1)
    );
    // datasrc `example.org.sqlite3`: nsec3 row owned by `ns3.example.org.`, which owns
    // no records: NXDOMAIN from both backends, not NODATA.
    let opened2 = Opened::new("datasrc/example.org.sqlite3");
    for (backend, p) in both(&opened2) {
        assert_negative(
            &q(&p, "ns3.example.org.", RType::A),
            ResponseCode::NXDomain,
            "example.org. 3600 SOA ns1.example.org. admin.example.org. 1234 3600 1800 2419200 7200",
            backend,
        );
    }
    opened.assert_unmodified();
    opened2.assert_unmodified();
}

/// The zone is the longest suffix of qname in the `zones` table however many
/// labels qname has (the sqlite3 backend asks for eight suffixes per
/// statement; these names need one and two statements).
#[test]
fn zone_found_for_names_of_any_length() {
    let sqlite = Arc::new(SqliteSource::open(&db_path("datasrc/test.sqlite3")).expect("opens"));
    let p = processor(sqlite);
    let sql1 = "sql1.example.com. 3600 SOA master.example.com. admin.example.com. 678 3600 1800 2419200 7200";
    let example =
        "example.com. 3600 SOA master.example.com. admin.example.com. 1234 3600 1800 2419200 7200";
    for (qname, soa) in [
        ("nx.sql1.example.com.", sql1),
        ("a.b.c.d.e.sql1.example.com.", sql1),
        ("a.b.c.d.e.f.sql1.example.com.", sql1),
        ("a.b.c.d.e.f.g.h.i.j.k.l.m.sql1.example.com.", sql1),
        ("a.b.c.d.e.f.g.h.i.j.k.l.m.nx1.example.com.", example),
        ("a.b.c.d.e.f.g.h.example.com.", example),
    ] {
        assert_negative(&q(&p, qname, RType::A), ResponseCode::NXDomain, soa, qname);
    }
    assert_answer(
        &q(&p, "www.SQL1.example.com.", RType::A),
        &["www.SQL1.example.com. 3600 A 192.0.2.100"],
        "mixed case",
    );
    let r = q(&p, "a.b.c.d.e.f.g.h.i.example.net.", RType::A);
    assert_eq!(r.rcode, ResponseCode::Refused, "no zone");
    assert!(!r.aa && r.authority.is_empty(), "no zone");
}

/// A batch of queries (one `recvmmsg` batch of a UDP worker) is answered from
/// one read transaction: a writer cannot commit in the middle of it (the DB
/// is in rollback-journal mode, as BIND 10 made it), and once the batch ends
/// the lock is gone and the next query sees the change.
#[test]
fn batch_reads_one_snapshot_and_releases_it() {
    let (_dir, path) = scratch_copy("datasrc/test.sqlite3");
    let sqlite = Arc::new(SqliteSource::open(&path).expect("opens"));
    let p = processor(sqlite);
    let writer = rusqlite::Connection::open(&path).expect("open");
    writer
        .busy_timeout(std::time::Duration::ZERO)
        .expect("busy timeout");
    let mode: String = writer
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("journal mode");
    assert_eq!(mode, "delete");
    let update =
        "UPDATE records SET rdata='192.0.2.99' WHERE name='www.example.com.' AND rdtype='A'";
    let www = |p: &Dispatcher| q(p, "www.example.com.", RType::A);

    let batch = p.sources().batch();
    assert_answer(&www(&p), &["www.example.com. 3600 A 192.0.2.1"], "first");
    let e = writer
        .execute(update, [])
        .expect_err("the batch holds its snapshot");
    assert_eq!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy),
        "{e}"
    );
    assert_answer(
        &www(&p),
        &["www.example.com. 3600 A 192.0.2.1"],
        "same batch",
    );
    drop(batch);

    assert_eq!(
        writer.execute(update, []).expect("no lock after the batch"),
        1
    );
    assert_answer(&www(&p), &["www.example.com. 3600 A 192.0.2.99"], "after");
    // Batches nest; the outer one keeps the transaction.
    let outer = p.sources().batch();
    drop(p.sources().batch());
    assert_answer(&www(&p), &["www.example.com. 3600 A 192.0.2.99"], "nested");
    let e = writer
        .execute(update, [])
        .expect_err("outer batch still open");
    assert_eq!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy)
    );
    drop(outer);
    assert_eq!(writer.execute(update, []).expect("released"), 1);
}

/// A row whose TTL is not a 32-bit number fails the lookups of its type only,
/// as a row with bad rdata does (BIND 10's database.cc read the TTL of the
/// wanted types only); a bad type column still fails the whole name, since
/// its row cannot be told apart.
#[test]
fn bad_ttl_row_is_servfail_for_its_type_only() {
    for ttl in [
        "-1",
        "2147483648",
        "4294967296",
        "'one hour'",
        "1.5",
        "NULL",
    ] {
        let (_dir, path) = scratch_copy("datasrc/test.sqlite3");
        let conn = rusqlite::Connection::open(&path).expect("open copy");
        // The schema says NOT NULL; a table rebuilt without it (as plain SQL
        // administration may do) holds one.
        if ttl == "NULL" {
            conn.execute_batch(
                "PRAGMA writable_schema=ON; \
                 UPDATE sqlite_master SET sql=replace(sql, 'ttl INTEGER NOT NULL', 'ttl INTEGER') \
                 WHERE name='records'; PRAGMA writable_schema=OFF;",
            )
            .expect("drop NOT NULL");
        }
        drop(conn);
        let conn = rusqlite::Connection::open(&path).expect("reopen copy");
        let changed = conn
            .execute(
                &format!(
                    "UPDATE records SET ttl={ttl} WHERE name='www.example.com.' AND rdtype='A'"
                ),
                [],
            )
            .expect("update");
        assert_eq!(changed, 1, "{ttl}");
        drop(conn);
        let sqlite = Arc::new(SqliteSource::open(&path).expect("opens"));
        let p = processor(sqlite.clone());
        for qtype in [RType::A, RType::ANY] {
            let r = q(&p, "www.example.com.", qtype);
            assert_eq!(r.rcode, ResponseCode::ServFail, "{ttl} {qtype}");
        }
        assert_negative(
            &q(&p, "www.example.com.", RType::TXT),
            ResponseCode::NoError,
            "example.com. 3600 SOA master.example.com. admin.example.com. 1234 3600 1800 2419200 7200",
            ttl,
        );
        let r = ask(&p, "www.example.com.", RType::NSEC, true, Transport::Tcp);
        assert_eq!(r.rcode, ResponseCode::NoError, "{ttl}: NSEC");
        assert_eq!(
            r.answer[0], "www.example.com. 7200 NSEC example.com. A RRSIG NSEC",
            "{ttl}"
        );
        assert_rest_of_test_sqlite3_answers(&p);
        let zones = sqlite.zones().expect("zones");
        let e = sqlite.zone_rrsets(&zones[0]).expect_err("bad row");
        assert_eq!(bad_data_name(e), "www.example.com.", "{ttl}");
    }
    // A type column that names no type fails every lookup at its name.
    let (_dir, path) = broken_copy(
        "datasrc/test.sqlite3",
        "UPDATE records SET rdtype='NOTATYPE' WHERE name='www.example.com.' AND rdtype='A'",
    );
    let p = processor(Arc::new(SqliteSource::open(&path).expect("opens")));
    for qtype in [RType::A, RType::TXT, RType::NSEC] {
        assert_eq!(
            q(&p, "www.example.com.", qtype).rcode,
            ResponseCode::ServFail,
            "{qtype}"
        );
    }
    assert_rest_of_test_sqlite3_answers(&p);
}

/// A second SOA row at the apex (plain SQL allows it) fails the zone's lookups
/// with SERVFAIL, as a missing SOA does, instead of serving both SOAs; with and
/// without the hot-spot cache.
#[test]
fn two_soa_rows_are_servfail_not_served() {
    let (_dir, path) = scratch_copy("datasrc/test.sqlite3");
    let conn = rusqlite::Connection::open(&path).expect("open copy");
    conn.execute(
        "INSERT INTO records (zone_id, name, rname, ttl, rdtype, sigtype, rdata) \
         SELECT zone_id, name, rname, ttl, rdtype, sigtype, \
                'master.example.com. admin.example.com. 5 3600 1800 2419200 7200' \
         FROM records WHERE name='example.com.' AND rdtype='SOA'",
        [],
    )
    .expect("second SOA");
    drop(conn);
    let sqlite = Arc::new(SqliteSource::open(&path).expect("opens"));
    for (label, source) in uncached_and_cached(sqlite) {
        let p = processor(source);
        for (qname, qtype) in [
            ("example.com.", RType::SOA),
            ("nonexistent.example.com.", RType::A),
            ("www.example.com.", RType::A),
        ] {
            let r = q(&p, qname, qtype);
            assert_eq!(r.rcode, ResponseCode::ServFail, "{label} {qname} {qtype}");
            assert!(r.answer.is_empty(), "{label} {qname} {qtype}");
        }
    }
}

/// A second `zones` row with the name of a served zone (plain SQL allows it):
/// the first row (lowest id, as BIND 10 took) keeps being served, with and
/// without the hot-spot cache, and `zone check` names the duplicate.
#[test]
fn duplicate_zones_row_serves_the_first_and_check_names_it() {
    let (_dir, path) = scratch_copy("datasrc/test.sqlite3");
    let conn = rusqlite::Connection::open(&path).expect("open copy");
    let first: i64 = conn
        .query_row("SELECT id FROM zones WHERE name='example.com.'", [], |r| {
            r.get(0)
        })
        .expect("zone id");
    conn.execute(
        "INSERT INTO zones (name, rdclass) VALUES ('example.com.', 'IN')",
        [],
    )
    .expect("second zones row");
    let second = conn.last_insert_rowid();
    let e = authd_datasrc::sqlite_admin::check_stored_zone(&conn, &name("example.com."))
        .expect_err("duplicate");
    assert_eq!(
        e.to_string(),
        format!(
            "zone example.com. has 2 rows in the zones table: id {first} is served, id {second} \
             ignored; delete the extra rows and their records"
        )
    );
    drop(conn);
    let sqlite = Arc::new(SqliteSource::open(&path).expect("opens"));
    let zones = sqlite.zones().expect("zones");
    assert_eq!(
        zones
            .iter()
            .filter(|z| z.origin == name("example.com."))
            .map(|z| z.id)
            .collect::<Vec<_>>(),
        vec![first]
    );
    for (label, source) in uncached_and_cached(sqlite) {
        let p = processor(source);
        let r = q(&p, "www.example.com.", RType::A);
        assert_eq!(r.rcode, ResponseCode::NoError, "{label}");
        assert_eq!(
            r.answer,
            vec!["www.example.com. 3600 A 192.0.2.1".to_string()],
            "{label}"
        );
    }
}

/// A writer holding a rollback-journal DB's lock (a long `BEGIN EXCLUSIVE` in
/// the sqlite3 shell) makes queries SERVFAIL after a bounded wait, and a batch
/// shares one wait instead of paying it per query (which stalled a UDP worker
/// for seconds); once the writer is done, answers come back.
#[test]
fn locked_db_fails_a_batch_after_one_bounded_wait() {
    let (_dir, path) = scratch_copy("datasrc/test.sqlite3");
    let sqlite = Arc::new(SqliteSource::open(&path).expect("opens"));
    let p = processor(sqlite);
    let writer = rusqlite::Connection::open(&path).expect("open");
    writer.execute_batch("BEGIN EXCLUSIVE").expect("lock");
    let start = std::time::Instant::now();
    let batch = p.sources().batch();
    for i in 0..20 {
        let r = q(&p, "www.example.com.", RType::A);
        assert_eq!(r.rcode, ResponseCode::ServFail, "query {i}");
    }
    drop(batch);
    let waited = start.elapsed();
    // 20 queries, 250 ms each, would be 5 s; one shared wait is 250 ms.
    assert!(
        waited < std::time::Duration::from_millis(2500),
        "{waited:?}"
    );
    writer.execute_batch("COMMIT").expect("unlock");
    assert_answer(
        &q(&p, "www.example.com.", RType::A),
        &["www.example.com. 3600 A 192.0.2.1"],
        "after the writer",
    );
}

/// A `zones` row whose name is not a domain name (an empty label, a label
/// over 63 bytes) is left out with a warning; the DB's other zones are still
/// listed and answered, cached or not (they were all SERVFAIL).
#[test]
fn an_unreadable_zones_row_leaves_the_other_zones_served() {
    let (_dir, path) = scratch_copy("datasrc/test.sqlite3");
    let conn = rusqlite::Connection::open(&path).expect("open copy");
    let long = format!("{}.test.", "a".repeat(64));
    for bad in ["bad..name.", long.as_str()] {
        conn.execute(
            "INSERT INTO zones (name, rdclass, dnssec) VALUES (?1, 'IN', 0)",
            [bad],
        )
        .expect("insert a bad zones row");
    }
    drop(conn);
    let sqlite = Arc::new(SqliteSource::open(&path).expect("opens"));
    let listed: Vec<String> = sqlite
        .zones()
        .expect("zones")
        .iter()
        .map(|z| z.origin.to_string())
        .collect();
    assert!(listed.contains(&"example.com.".to_string()), "{listed:?}");
    assert!(
        !listed
            .iter()
            .any(|z| z.contains("bad") || z.contains("aaaa")),
        "{listed:?}"
    );
    for (label, source) in uncached_and_cached(sqlite) {
        assert_answer(
            &q(&processor(source), "www.example.com.", RType::A),
            &["www.example.com. 3600 A 192.0.2.1"],
            label,
        );
    }
}

/// A name whose only row is an RRSIG (here one with unreadable rdata, which
/// `zone check` names) has no RRset to give: ANY gets NODATA with the SOA,
/// cached or not, not an empty NOERROR without one.
#[test]
fn any_at_a_name_with_only_an_rrsig_row_is_nodata() {
    let (_dir, path) = scratch_copy("datasrc/test.sqlite3");
    let conn = rusqlite::Connection::open(&path).expect("open copy");
    conn.execute(
        "INSERT INTO records (zone_id, name, rname, ttl, rdtype, sigtype, rdata) \
         SELECT id, 'sigonly.example.com.', 'com.example.sigonly.', 300, 'RRSIG', NULL, 'garbage' \
         FROM zones WHERE name='example.com.'",
        [],
    )
    .expect("insert an RRSIG-only name");
    drop(conn);
    const SOA: &str =
        "example.com. 3600 SOA master.example.com. admin.example.com. 1234 3600 1800 2419200 7200";
    let sqlite = Arc::new(SqliteSource::open(&path).expect("opens"));
    for (label, source) in uncached_and_cached(sqlite) {
        let p = processor(source);
        let r = q(&p, "sigonly.example.com.", RType::ANY);
        assert_negative(&r, ResponseCode::NoError, SOA, label);
        let r = q(&p, "sigonly.example.com.", RType::A);
        assert_negative(&r, ResponseCode::NoError, SOA, label);
    }
}

/// Names written by hand without their final dot: a `zones` row is served by
/// neither the cached nor the uncached path (both match BIND 10's absolute
/// text), and `zone check` says what is wrong instead of "not in the DB"; a
/// `records` row is named by `zone check`.
#[test]
fn names_without_the_final_dot_are_named_by_zone_check() {
    let (_dir, path) = scratch_copy("datasrc/test.sqlite3");
    let conn = rusqlite::Connection::open(&path).expect("open copy");
    let id: i64 = conn
        .query_row("SELECT id FROM zones WHERE name='example.com.'", [], |r| {
            r.get(0)
        })
        .expect("zone id");
    conn.execute(
        "UPDATE records SET name='www.example.com' WHERE name='www.example.com.' AND rdtype='A'",
        [],
    )
    .expect("undot a record");
    let e = authd_datasrc::sqlite_admin::check_stored_zone(&conn, &name("example.com."))
        .expect_err("undotted record");
    assert!(
        e.to_string().ends_with(
            "(www.example.com): name without its final dot (stored names are absolute: \
             www.example.com.)"
        ),
        "{e}"
    );
    conn.execute("UPDATE zones SET name='example.com' WHERE id=?1", [id])
        .expect("undot the zone");
    let e = authd_datasrc::sqlite_admin::check_stored_zone(&conn, &name("example.com."))
        .expect_err("undotted zone");
    assert_eq!(
        e.to_string(),
        format!(
            "zone example.com. is not in the DB: zones row {id} names it without the final dot \
             (UPDATE zones SET name='example.com.' WHERE id={id})"
        )
    );
    drop(conn);
    let sqlite = Arc::new(SqliteSource::open(&path).expect("opens"));
    assert!(
        !sqlite.zones().expect("zones").iter().any(|z| z.id == id),
        "undotted zone listed"
    );
    for (label, source) in uncached_and_cached(sqlite) {
        let r = q(&processor(source), "mail.example.com.", RType::A);
        assert_eq!(r.rcode, ResponseCode::Refused, "{label}");
    }
}
