//! End to end: outgoing AXFR/IXFR over TCP from a running authd (auth/src/xfr.rs).
//!
//! - access control: REFUSED for an address not in `[transfer] allow`, and
//!   AXFR over UDP; IXFR over UDP answered (RFC 1995 §2) with the difference
//!   when it fits, else the current SOA (checked with dig too);
//! - AXFR of the signed root zone equals the source record for record (parsed
//!   with hickory-proto, compared with `DataSource::zone_rrsets`), over many messages;
//! - IXFR from a journal written by `zone update`, from BIND 10's own journals
//!   (xfrout's test.sqlite3, datasrc's diffs.sqlite3 with a serial rollover), the
//!   fall-back to AXFR for a serial the journal lacks, and a single SOA for a
//!   current serial;
//! - a memory zone transfers through `zone_rrsets`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use authd_datasrc::sqlite::SqliteSource;
use authd_datasrc::{DataSource, Name as AName};
use authd_tests::hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use authd_tests::hickory_proto::rr::rdata::SOA;
use authd_tests::hickory_proto::rr::{Name, RData, Record, RecordType};
use authd_tests::hickory_proto::serialize::binary::{BinDecoder, Restrict};
use authd_tests::{
    AuthdProcess, QueryBuilder, binary, load_zone_text, parse_reply, query_udp, run_with_timeout,
    tcp_connect, tcp_recv, tcp_send, tempdir, write_file,
};

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data").join(rel)
}

/// Starts authd serving `db` with transfers allowed from `allow`.
fn start(dir: &Path, db: &Path, allow: &str) -> AuthdProcess {
    let config = write_file(
        dir,
        "authd.toml",
        &format!(
            "[[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n[transfer]\nallow = [{allow}]\n",
            db.display()
        ),
    );
    AuthdProcess::start(["--config".as_ref(), config.as_os_str()])
}

/// Copies a test DB into `dir` (authd opens read-only, but keep the data pristine).
fn copy_db(dir: &Path, rel: &str) -> PathBuf {
    let to = dir.join(Path::new(rel).file_name().expect("file name"));
    std::fs::copy(data(rel), &to).expect("copy DB");
    to
}

/// An AXFR or IXFR query (id 4242) for `zone`, with an SOA of `serial` in the
/// authority section when given (RFC 1995 §3).
fn transfer_query(zone: &str, qtype: RecordType, serial: Option<u32>) -> Message {
    let name = Name::from_ascii(zone).expect("zone name");
    let mut msg = Message::new(4242, MessageType::Query, OpCode::Query);
    msg.add_query(Query::query(name.clone(), qtype));
    if let Some(serial) = serial {
        let soa = SOA::new(
            Name::from_ascii("ns.invalid.").expect("name"),
            Name::from_ascii("hm.invalid.").expect("name"),
            serial,
            1,
            1,
            1,
            1,
        );
        msg.add_authority(Record::from_rdata(name, 0, RData::SOA(soa)));
    }
    msg
}

/// Runs the `zone` tool with `args`; panics with its stderr if it fails.
fn zone_tool(args: &[&str]) {
    let out = run_with_timeout(
        Command::new(binary("zone")).args(args),
        std::time::Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Sends an AXFR or IXFR (with `serial` in the authority section) over TCP and
/// reads messages until the answer is complete: the SOA has been seen twice (or
/// once for a one-SOA answer), or an error rcode. Returns every message.
fn transfer(addr: SocketAddr, zone: &str, qtype: RecordType, serial: Option<u32>) -> Vec<Message> {
    let msg = transfer_query(zone, qtype, serial);
    let mut stream = tcp_connect(addr);
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .expect("timeout");
    tcp_send(&mut stream, &msg.to_vec().expect("encode"));
    let mut out = Vec::new();
    let mut soas = 0;
    let mut first_serial = None;
    loop {
        let reply = parse_reply(&tcp_recv(&mut stream).expect("transfer message"));
        assert_eq!(reply.metadata.id, 4242);
        let rcode = reply.metadata.response_code;
        for r in &reply.answers {
            if let RData::SOA(s) = &r.data {
                soas += 1;
                first_serial.get_or_insert(s.serial);
            }
        }
        let n_answers: usize =
            out.iter().map(|m: &Message| m.answers.len()).sum::<usize>() + reply.answers.len();
        out.push(reply);
        if rcode != ResponseCode::NoError {
            return out;
        }
        // One SOA alone: "you are up to date" (IXFR) — the only record.
        if soas == 1 && n_answers == 1 && qtype == RecordType::IXFR {
            // Either a one-SOA answer or the start of a longer one; a one-SOA
            // answer is exactly one message with one record.
            if out.len() == 1 && out[0].answers.len() == 1 {
                return out;
            }
        }
        // The answer ends with the current SOA for the second time (AXFR) or,
        // for IXFR, the SOA with the first serial closing the sequence.
        let last = out.last().and_then(|m| m.answers.last()).map(|r| &r.data);
        if soas >= 2
            && let Some(RData::SOA(s)) = last
            && Some(s.serial) == first_serial
            && n_answers > 1
        {
            return out;
        }
    }
}

fn answers(msgs: &[Message]) -> Vec<Record> {
    msgs.iter()
        .flat_map(|m| m.answers.iter().cloned())
        .collect()
}

/// `name TYPE rdata` lines, lower-cased names, for readable comparisons.
fn lines(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| {
            format!(
                "{} {} {} {}",
                r.name.to_ascii().to_ascii_lowercase(),
                r.ttl,
                r.record_type(),
                r.data
            )
        })
        .collect()
}

/// The zone as the data source holds it, as hickory RData grouped by
/// (lower-case owner, type), RRSIGs under type RRSIG.
fn source_groups(db: &Path, zone: &str) -> BTreeMap<(String, RecordType), Vec<(u32, RData)>> {
    let src = SqliteSource::open(db).expect("open DB");
    let origin: AName = zone.parse().expect("origin");
    let zref = src
        .zones()
        .expect("zones")
        .into_iter()
        .find(|z| z.origin == origin)
        .expect("zone in DB");
    let mut out: BTreeMap<(String, RecordType), Vec<(u32, RData)>> = BTreeMap::new();
    for set in src.zone_rrsets(&zref).expect("zone_rrsets") {
        let owner = set.owner.to_string().to_ascii_lowercase();
        let mut put = |rtype: u16, ttl: u32, wire: &[u8]| {
            let rt = RecordType::from(rtype);
            let len = u16::try_from(wire.len()).expect("rdata length");
            let mut dec = BinDecoder::new(wire);
            let rdata = RData::read(&mut dec, rt, Restrict::new(len)).expect("rdata decodes");
            out.entry((owner.clone(), rt))
                .or_default()
                .push((ttl, rdata));
        };
        for r in &set.rdatas {
            put(set.rtype.0, set.ttl, r.as_wire());
        }
        for s in &set.sigs {
            put(46, set.sig_ttl, s.as_wire());
        }
    }
    out
}

fn received_groups(records: &[Record]) -> BTreeMap<(String, RecordType), Vec<(u32, RData)>> {
    let mut out: BTreeMap<(String, RecordType), Vec<(u32, RData)>> = BTreeMap::new();
    for r in records {
        out.entry((r.name.to_ascii().to_ascii_lowercase(), r.record_type()))
            .or_default()
            .push((r.ttl, r.data.clone()));
    }
    out
}

/// Asserts an AXFR answer is SOA, the zone, SOA and equals the source record for record.
fn assert_axfr_matches(records: &[Record], db: &Path, zone: &str) {
    assert!(records.len() >= 2);
    assert_eq!(records[0].record_type(), RecordType::SOA);
    assert_eq!(records[records.len() - 1].record_type(), RecordType::SOA);
    assert_eq!(records[0].data, records[records.len() - 1].data);
    let body = &records[1..records.len() - 1];
    assert!(
        body.iter().all(|r| r.record_type() != RecordType::SOA),
        "SOA inside the body"
    );
    let mut got = received_groups(body);
    // The opening SOA is the zone's SOA RR.
    got.entry((zone.to_ascii_lowercase(), RecordType::SOA))
        .or_default()
        .push((records[0].ttl, records[0].data.clone()));
    let want = source_groups(db, zone);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "owner/type sets differ"
    );
    for (key, want_rrs) in &want {
        let got_rrs = &got[key];
        assert_eq!(got_rrs.len(), want_rrs.len(), "{key:?}: RR count");
        for w in want_rrs {
            assert!(
                got_rrs.contains(w),
                "{key:?}: {w:?} missing from the transfer"
            );
        }
    }
}

#[test]
fn transfer_refused_for_unlisted_address_and_over_udp() {
    let dir = tempdir();
    let db = copy_db(dir.path(), "bind10/xfrout/test.sqlite3");
    let authd = start(dir.path(), &db, "\"127.0.0.2\"");
    for qtype in [RecordType::AXFR, RecordType::IXFR] {
        let serial = (qtype == RecordType::IXFR).then_some(2011111802);
        let msgs = transfer(authd.addr(), "example.com.", qtype, serial);
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0].metadata.response_code, ResponseCode::Refused);
        assert!(msgs[0].answers.is_empty());
    }
    assert!(authd.wait_for_log(
        "AXFR of example.com. refused for 127.0.0.1",
        std::time::Duration::from_secs(2)
    ));
    // Over UDP AXFR is refused, even from an allowed address (IXFR over UDP
    // is answered: `ixfr_over_udp`).
    let dir2 = tempdir();
    let db2 = copy_db(dir2.path(), "bind10/xfrout/test.sqlite3");
    let allowed = start(dir2.path(), &db2, "\"127.0.0.0/8\", \"::1\"");
    // (hickory parses no "AXFR" mnemonic: the type code 252.)
    let reply = parse_reply(&query_udp(
        allowed.addr(),
        &QueryBuilder::new("example.com.", "TYPE252").wire(),
    ));
    assert_eq!(reply.metadata.response_code, ResponseCode::Refused);
    // …and over TCP it works from the allowed block.
    let msgs = transfer(allowed.addr(), "example.com.", RecordType::AXFR, None);
    assert_eq!(msgs[0].metadata.response_code, ResponseCode::NoError);
    // A name that is not a zone apex: NOTAUTH.
    let msgs = transfer(allowed.addr(), "a.dns.example.com.", RecordType::AXFR, None);
    assert_eq!(msgs[0].metadata.response_code, ResponseCode::NotAuth);
}

#[test]
fn axfr_of_the_root_zone_equals_the_source() {
    let dir = tempdir();
    let db = dir.path().join("root.sqlite3");
    let out = run_with_timeout(
        Command::new(binary("loadzone"))
            .arg("--db")
            .arg(&db)
            .arg(".")
            .arg(data("root.zone")),
        std::time::Duration::from_secs(300),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let authd = start(dir.path(), &db, "\"127.0.0.1\"");
    let msgs = transfer(authd.addr(), ".", RecordType::AXFR, None);
    assert!(
        msgs.len() > 10,
        "the root zone needs many 64 KiB messages: {}",
        msgs.len()
    );
    for (i, m) in msgs.iter().enumerate() {
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
        assert!(m.metadata.authoritative);
        assert_eq!(
            m.queries.len(),
            usize::from(i == 0),
            "question only in the first"
        );
    }
    let records = answers(&msgs);
    assert_eq!(records.len(), 21_591 + 1, "every RR plus the closing SOA");
    assert_axfr_matches(&records, &db, ".");
    // IXFR with a serial but no journal: the full zone (AXFR-style, RFC 1995 §4).
    let msgs = transfer(authd.addr(), ".", RecordType::IXFR, Some(2020101901));
    assert_eq!(answers(&msgs).len(), 21_592);
}

#[test]
fn ixfr_from_zone_update_journal_and_fallbacks() {
    let dir = tempdir();
    let db = dir.path().join("zones.sqlite3");
    load_zone_text(
        &db,
        "example.org.",
        "$TTL 300\n@ SOA ns1 hostmaster 10 3600 900 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\n\
         www A 192.0.2.2\nold A 192.0.2.3\n",
    );
    let dbs = db.to_str().expect("utf-8 path");
    zone_tool(&[
        "update",
        "--db",
        dbs,
        "example.org",
        "--delete",
        "www A 192.0.2.2",
        "--add",
        "www 600 A 192.0.2.20",
    ]);
    zone_tool(&[
        "update",
        "--db",
        dbs,
        "example.org",
        "--delete",
        "old A 192.0.2.3",
        "--add",
        "new AAAA 2001:db8::1",
    ]);
    let authd = start(dir.path(), &db, "\"::1\", \"127.0.0.1/32\"");

    let ixfr = lines(&answers(&transfer(
        authd.addr(),
        "example.org.",
        RecordType::IXFR,
        Some(10),
    )));
    let soa = |n: u32| {
        format!(
            "example.org. 300 SOA ns1.example.org. hostmaster.example.org. {n} 3600 900 1209600 300"
        )
    };
    assert_eq!(
        ixfr,
        vec![
            soa(12),
            soa(10),
            "www.example.org. 300 A 192.0.2.2".to_string(),
            soa(11),
            "www.example.org. 600 A 192.0.2.20".to_string(),
            soa(11),
            "old.example.org. 300 A 192.0.2.3".to_string(),
            soa(12),
            // No TTL given to `zone update --add`: the default 3600.
            "new.example.org. 3600 AAAA 2001:db8::1".to_string(),
            soa(12),
        ]
    );
    // From 11: only the second change.
    let ixfr = lines(&answers(&transfer(
        authd.addr(),
        "example.org.",
        RecordType::IXFR,
        Some(11),
    )));
    assert_eq!(ixfr.len(), 6);
    assert_eq!(ixfr[1], soa(11));
    // Current or newer serial: one SOA.
    for s in [12, 13] {
        let msgs = transfer(authd.addr(), "example.org.", RecordType::IXFR, Some(s));
        assert_eq!(lines(&answers(&msgs)), vec![soa(12)], "client serial {s}");
    }
    // A serial the journal lacks: the full zone.
    let msgs = transfer(authd.addr(), "example.org.", RecordType::IXFR, Some(5));
    let records = answers(&msgs);
    assert_eq!(records.len(), 6, "{:?}", lines(&records));
    assert_axfr_matches(&records, &db, "example.org.");
    // IXFR without a SOA in the authority section: FORMERR.
    let reply = transfer(authd.addr(), "example.org.", RecordType::IXFR, None);
    assert_eq!(reply[0].metadata.response_code, ResponseCode::FormErr);
}

/// An IXFR query for `zone` with `serial` in the authority section, sent over
/// UDP (with EDNS, payload 1232, when `edns`); the reply.
fn ixfr_udp(addr: SocketAddr, zone: &str, serial: u32, edns: bool) -> Message {
    let mut msg = transfer_query(zone, RecordType::IXFR, Some(serial));
    if edns {
        let mut e = authd_tests::hickory_proto::op::Edns::new();
        e.set_max_payload(1232);
        msg.set_edns(e);
    }
    let wire = query_udp(addr, &msg.to_vec().expect("encode"));
    assert!(
        wire.len() <= if edns { 1232 } else { 512 },
        "{} bytes",
        wire.len()
    );
    parse_reply(&wire)
}

/// IXFR over UDP (RFC 1995 §2) from an allowed client: the difference when
/// it fits the client's UDP size, else the current SOA alone (the client then
/// asks over TCP); also when only a full zone would do. dig (+notcp) agrees.
#[test]
fn ixfr_over_udp() {
    let dir = tempdir();
    let db = dir.path().join("zones.sqlite3");
    load_zone_text(
        &db,
        "example.org.",
        "$TTL 300\n@ SOA ns1 hostmaster 10 3600 900 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\n\
         www A 192.0.2.2\n",
    );
    let dbs = db.to_str().expect("utf-8 path");
    let update =
        |args: &[&str]| zone_tool(&[&["update", "--db", dbs, "example.org"], args].concat());
    // 10 -> 11: four 150-byte TXT records (over 512 bytes, under 1232).
    let txt = format!("\"{}\"", "t".repeat(150));
    let adds: Vec<String> = (0..4).map(|i| format!("t{i} TXT {txt}")).collect();
    let mut args = Vec::new();
    for a in &adds {
        args.extend(["--add", a.as_str()]);
    }
    update(&args);
    // 11 -> 12 and 12 -> 13: one small change each.
    update(&["--delete", "www A 192.0.2.2", "--add", "www A 192.0.2.3"]);
    update(&["--delete", "www A 192.0.2.3", "--add", "www A 192.0.2.4"]);
    let authd = start(dir.path(), &db, "\"127.0.0.1\"");
    let serials = |m: &Message| -> Vec<String> {
        m.answers
            .iter()
            .map(|r| match &r.data {
                RData::SOA(s) => format!("SOA {}", s.serial),
                other => format!("{} {other}", r.record_type()),
            })
            .collect()
    };
    let soa_only = vec!["SOA 13".to_string()];
    for edns in [false, true] {
        // 12 -> 13 fits either way: the difference.
        let m = ixfr_udp(authd.addr(), "example.org.", 12, edns);
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
        assert!(m.metadata.authoritative && !m.metadata.truncation);
        assert_eq!(
            serials(&m),
            [
                "SOA 13",
                "SOA 12",
                "A 192.0.2.3",
                "SOA 13",
                "A 192.0.2.4",
                "SOA 13"
            ],
            "EDNS {edns}"
        );
        assert_eq!(m.edns.is_some(), edns, "an OPT when the query had one");
        // Up to date, or a serial the journal lacks: the current SOA.
        for serial in [13, 14, 5] {
            let m = ixfr_udp(authd.addr(), "example.org.", serial, edns);
            assert_eq!(serials(&m), soa_only, "serial {serial}, EDNS {edns}");
        }
    }
    // 10 -> 13 is about 1.1 KB: the difference in 1232 bytes, not in 512.
    // SOA 13; SOA 10, SOA 11, 4 TXT; SOA 11, A, SOA 12, A; SOA 12, A, SOA 13, A; SOA 13.
    let m = ixfr_udp(authd.addr(), "example.org.", 10, true);
    assert_eq!(m.answers.len(), 16, "{:?}", serials(&m));
    assert_eq!(
        serials(&ixfr_udp(authd.addr(), "example.org.", 10, false)),
        soa_only
    );
    // dig sends IXFR over UDP with +notcp and prints what came.
    let dig = |serial: u32| {
        let out = run_with_timeout(
            Command::new("dig")
                .args(["+notcp", "+noedns", "+norec", "+tries=1", "+time=2", "-p"])
                .arg(authd.addr().port().to_string())
                .arg("@127.0.0.1")
                .arg("example.org.")
                .arg(format!("IXFR={serial}")),
            std::time::Duration::from_secs(10),
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let records = |out: &str| out.lines().filter(|l| l.contains("\tIN\t")).count();
    let out = dig(12);
    assert_eq!(records(&out), 6, "{out}");
    assert!(
        out.contains("(UDP)") && out.contains("MSG SIZE  rcvd: 224"),
        "{out}"
    );
    let out = dig(10);
    assert_eq!(records(&out), 1, "{out}");
    assert!(
        out.contains("(UDP)") && out.contains("SOA\tns1.example.org. hostmaster.example.org. 13 "),
        "{out}"
    );
}

#[test]
fn ixfr_from_bind10_xfrout_journal() {
    let dir = tempdir();
    let db = copy_db(dir.path(), "bind10/xfrout/test.sqlite3");
    let authd = start(dir.path(), &db, "\"127.0.0.1\"");
    let soa = |n: u32| {
        format!(
            "example.com. 3600 SOA master.example.com. admin.example.com. {n} 3600 1800 2419200 7200"
        )
    };
    let got = lines(&answers(&transfer(
        authd.addr(),
        "example.com.",
        RecordType::IXFR,
        Some(2011111802),
    )));
    assert_eq!(
        got,
        vec![
            soa(2011112001),
            soa(2011111802),
            soa(2011111900),
            "a.dns.example.com. 7200 A 192.0.2.2".to_string(),
            soa(2011111900),
            "a.dns.example.com. 3600 A 192.0.2.53".to_string(),
            "a.dns.example.com. 3600 AAAA 2001:db8::1".to_string(),
            soa(2011112001),
            "a.dns.example.com. 3600 A 192.0.2.1".to_string(),
            soa(2011112001),
        ]
    );
    // AXFR of the same zone equals its records.
    let records = answers(&transfer(
        authd.addr(),
        "example.com.",
        RecordType::AXFR,
        None,
    ));
    assert_axfr_matches(&records, &db, "example.com.");
}

#[test]
fn ixfr_from_bind10_diffs_journal_across_serial_rollover() {
    let dir = tempdir();
    let db = copy_db(dir.path(), "bind10/diffs.sqlite3");
    let authd = start(dir.path(), &db, "\"127.0.0.1\"");
    let soa = |n: u32, ttl: u32| {
        format!(
            "example.org. {ttl} SOA ns1.example.org. admin.example.org. {n} 3600 1800 2419200 7200"
        )
    };
    // 4294967280 (0xfffffff0) -> 1230 -> 1231 -> 1232 -> 1233 -> 1234: 1234 is newer.
    let got = lines(&answers(&transfer(
        authd.addr(),
        "example.org.",
        RecordType::IXFR,
        Some(4294967280),
    )));
    assert_eq!(
        got,
        vec![
            soa(1234, 3600),
            soa(4294967280, 3600),
            "www.example.org. 3600 A 192.0.2.31".to_string(),
            soa(1230, 1800),
            "www.example.org. 3600 A 192.0.2.21".to_string(),
            soa(1230, 1800),
            soa(1231, 3600),
            soa(1231, 3600),
            "unused.example.org. 3600 A 192.0.2.102".to_string(),
            soa(1232, 3600),
            soa(1232, 3600),
            soa(1233, 3600),
            "sub.example.org. 3600 NS ns.sub.example.org.".to_string(),
            "ns.sub.example.org. 3600 A 192.0.2.101".to_string(),
            soa(1233, 3600),
            "www.example.org. 3600 A 192.0.2.21".to_string(),
            "mail.example.org. 3600 A 192.0.2.210".to_string(),
            soa(1234, 3600),
            "www.example.org. 3600 A 192.0.2.1".to_string(),
            "mail.example.org. 3600 A 192.0.2.10".to_string(),
            soa(1234, 3600),
        ]
    );
    // From the middle of the journal.
    let got = lines(&answers(&transfer(
        authd.addr(),
        "example.org.",
        RecordType::IXFR,
        Some(1232),
    )));
    assert_eq!(got.len(), 12);
    assert_eq!(got[1], soa(1232, 3600));
    assert_eq!(got[10], "mail.example.org. 3600 A 192.0.2.10");
    // A serial "before" the journal's start (older in RFC 1982 terms): full zone.
    let records = answers(&transfer(
        authd.addr(),
        "example.org.",
        RecordType::IXFR,
        Some(4294967000),
    ));
    assert_axfr_matches(&records, &db, "example.org.");
}

/// authd serving example.net. from memory out of `dir`/example.net.zone
/// (written with `zone`), transfers allowed to 127.0.0.1.
fn memory_zone_primary(dir: &Path, zone: &str) -> AuthdProcess {
    let zone_file = write_file(dir, "example.net.zone", zone);
    let config = write_file(
        dir,
        "authd.toml",
        &format!(
            "[[datasource]]\ntype = \"memory\"\nzones = [{{ origin = \"example.net.\", file = \"{}\" }}]\n\
             [transfer]\nallow = [\"127.0.0.1\"]\n",
            zone_file.display()
        ),
    );
    AuthdProcess::start(["--config".as_ref(), config.as_os_str()])
}

#[test]
fn memory_zone_transfers_via_zone_rrsets() {
    let dir = tempdir();
    let authd = memory_zone_primary(
        dir.path(),
        "$TTL 300\n@ SOA ns1 hm 7 3600 900 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\nwww CNAME ns1\n",
    );
    let got = lines(&answers(&transfer(
        authd.addr(),
        "example.net.",
        RecordType::AXFR,
        None,
    )));
    let soa =
        "example.net. 300 SOA ns1.example.net. hm.example.net. 7 3600 900 1209600 300".to_string();
    assert_eq!(got.first(), Some(&soa));
    assert_eq!(got.last(), Some(&soa));
    let mut body = got[1..got.len() - 1].to_vec();
    body.sort();
    assert_eq!(
        body,
        vec![
            "example.net. 300 NS ns1.example.net.",
            "ns1.example.net. 300 A 192.0.2.1",
            "www.example.net. 300 CNAME ns1.example.net.",
        ]
    );
    // No journal for a memory zone: IXFR falls back to the full zone.
    let got = answers(&transfer(
        authd.addr(),
        "example.net.",
        RecordType::IXFR,
        Some(6),
    ));
    assert_eq!(got.len(), 5);
}

/// A master-file zone reloaded (SIGHUP) with a greater serial keeps the
/// difference in memory, and IXFR out sends it (as NSD's `create-ixfr`,
/// BIND's `ixfr-from-differences`): from each earlier serial the chain of
/// differences, a TTL change as a deletion and an addition; after a reload
/// whose serial did not grow, the history is gone and IXFR sends the zone.
#[test]
fn memory_zone_reloaded_with_a_greater_serial_gives_ixfr() {
    let dir = tempdir();
    let zone = |serial: u32, body: &str| {
        format!(
            "$TTL 300\n@ SOA ns1 hm {serial} 3600 900 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\n{body}"
        )
    };
    let authd = memory_zone_primary(dir.path(), &zone(7, "www A 192.0.2.2\nold TXT \"x\"\n"));
    let soa = |n: u32| {
        format!("example.net. 300 SOA ns1.example.net. hm.example.net. {n} 3600 900 1209600 300")
    };
    let ixfr = |serial: u32| {
        lines(&answers(&transfer(
            authd.addr(),
            "example.net.",
            RecordType::IXFR,
            Some(serial),
        )))
    };
    // Before any reload: no history, the whole zone (SOA, 4 RRs, SOA).
    assert_eq!(ixfr(6).len(), 6);

    write_file(
        dir.path(),
        "example.net.zone",
        &zone(8, "www 600 A 192.0.2.2\nnew A 192.0.2.3\n"),
    );
    hup_and_wait(&authd, 1);
    write_file(
        dir.path(),
        "example.net.zone",
        &zone(9, "www 600 A 192.0.2.2\nnew A 192.0.2.4\n"),
    );
    hup_and_wait(&authd, 2);
    assert!(
        authd
            .stderr()
            .contains("serial 8 -> 9: 1 RRs deleted, 1 added, kept for IXFR"),
        "{}",
        authd.stderr()
    );
    let mut got = ixfr(7);
    // Within a difference the RRs' order is the journal's; sort each part.
    got[2..4].sort();
    got[5..7].sort();
    assert_eq!(
        got,
        vec![
            soa(9),
            soa(7),
            "old.example.net. 300 TXT x".to_string(),
            "www.example.net. 300 A 192.0.2.2".to_string(),
            soa(8),
            "new.example.net. 300 A 192.0.2.3".to_string(),
            "www.example.net. 600 A 192.0.2.2".to_string(),
            soa(8),
            "new.example.net. 300 A 192.0.2.3".to_string(),
            soa(9),
            "new.example.net. 300 A 192.0.2.4".to_string(),
            soa(9),
        ]
    );
    let from8 = ixfr(8);
    assert_eq!(
        from8,
        vec![
            soa(9),
            soa(8),
            "new.example.net. 300 A 192.0.2.3".to_string(),
            soa(9),
            "new.example.net. 300 A 192.0.2.4".to_string(),
            soa(9),
        ]
    );
    // The serial goes back: no difference can lead there; the whole zone.
    write_file(
        dir.path(),
        "example.net.zone",
        &zone(5, "www A 192.0.2.9\n"),
    );
    hup_and_wait(&authd, 3);
    assert!(
        authd.stderr().contains(
            "zone example.net.: the serial went back from 9 to 5; secondaries will not notice"
        ),
        "{}",
        authd.stderr()
    );
    assert_eq!(ixfr(4).len(), 5, "SOA, NS, ns1 A, www A, SOA");
}

#[test]
fn transfer_and_notify_configuration() {
    use authd::config::Config;
    use std::collections::HashMap;
    let text = "[[datasource]]\ntype = \"sqlite3\"\nfile = \"z.sqlite3\"\n\
                [transfer]\nallow = [\"127.0.0.1\", \"10.0.0.0/8\", \"::1\"]\n\
                [notify]\ntargets = [\"127.0.0.1:5353\", \"::1\"]\n\
                [[notify.zone]]\norigin = \"example.org\"\ntargets = [\"192.0.2.1:53\"]\n";
    let c = Config::from_parts(
        Some((text, Path::new("/etc/authd/a.toml"))),
        Some(HashMap::new()),
    )
    .expect("valid");
    let policy = c.transfer_policy();
    let zone: AName = "example.com.".parse().expect("name");
    assert!(policy.allows(&zone, "10.9.8.7".parse().expect("ip"), None, false));
    assert!(policy.allows(&zone, "::1".parse().expect("ip"), None, false));
    assert!(!policy.allows(&zone, "127.0.0.2".parse().expect("ip"), None, false));
    let org: AName = "example.org.".parse().expect("name");
    let targets: Vec<String> = c
        .notify
        .targets_for(&org)
        .iter()
        .map(|a| a.to_string())
        .collect();
    assert_eq!(targets, ["127.0.0.1:5353", "[::1]:53", "192.0.2.1:53"]);
    assert_eq!(
        c.notify
            .targets_for(&"example.com.".parse().expect("name"))
            .len(),
        2
    );
    // Default: nobody may transfer, nobody is notified.
    let d =
        Config::from_parts(Some(("", Path::new("a.toml"))), Some(HashMap::new())).expect("valid");
    assert!(d.transfer.allow.is_empty() && d.notify.is_empty());
    // Errors name the key.
    for (bad, key) in [
        ("[transfer]\nallow = [\"10.0.0.0/40\"]", "transfer.allow[0]"),
        ("[notify]\ntargets = [\"nowhere\"]", "notify.targets[0]"),
        ("[transfer]\ndeny = []", "deny"),
    ] {
        let e = Config::from_parts(Some((bad, Path::new("a.toml"))), Some(HashMap::new()))
            .expect_err(bad)
            .to_string();
        assert!(e.contains(key), "{bad}: {e}");
    }
    // From the environment.
    let env: HashMap<String, String> = [(
        "AUTHD_TRANSFER__ALLOW".to_string(),
        "127.0.0.1, ::1".to_string(),
    )]
    .into();
    let c = Config::from_parts(None, Some(env)).expect("valid");
    assert_eq!(c.transfer.allow.len(), 2);
}

/// Writes the config of [`start`] again, so a SIGHUP reads the new one.
fn rewrite_config(dir: &Path, text: &str) {
    // Write then rename: authd never reads a half-written file.
    let tmp = write_file(dir, "authd.toml.new", text);
    std::fs::rename(tmp, dir.join("authd.toml")).expect("replace config");
}

/// Sends SIGHUP and waits for reload summary number `n` (1-based).
fn hup_and_wait(authd: &AuthdProcess, n: usize) {
    authd.signal("HUP");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while authd.stderr().matches("zones reloaded, ").count() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "no reload summary {n}:\n{}",
            authd.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A changed `[transfer] allow` applies at the next SIGHUP, both ways: an
/// AXFR refused before is answered after, and refused again once the entry
/// is taken out — no restart.
#[test]
fn sighup_applies_a_changed_transfer_acl() {
    let dir = tempdir();
    let db = copy_db(dir.path(), "bind10/xfrout/test.sqlite3");
    let config = |allow: &str| {
        format!(
            "[[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n[transfer]\nallow = [{allow}]\n",
            db.display()
        )
    };
    let authd = start(dir.path(), &db, "\"127.0.0.2\"");
    let axfr_rcode = || {
        let msgs = transfer(authd.addr(), "example.com.", RecordType::AXFR, None);
        msgs[0].metadata.response_code
    };
    assert_eq!(axfr_rcode(), ResponseCode::Refused);

    rewrite_config(dir.path(), &config("\"127.0.0.1\""));
    hup_and_wait(&authd, 1);
    let msgs = transfer(authd.addr(), "example.com.", RecordType::AXFR, None);
    assert_eq!(msgs[0].metadata.response_code, ResponseCode::NoError);
    assert_axfr_matches(&answers(&msgs), &db, "example.com.");

    rewrite_config(dir.path(), &config(""));
    hup_and_wait(&authd, 2);
    assert_eq!(axfr_rcode(), ResponseCode::Refused);
    assert!(
        !authd.stderr().contains("restart authd"),
        "no restart asked for:\n{}",
        authd.stderr()
    );
}

/// NOTIFY targets and sqlite3 DBs added to the configuration are used from
/// the next SIGHUP: a serial change in a DB added by the reload is announced
/// to a target added by it (RFC 1996 §3.7: opcode NOTIFY, the zone's SOA).
#[test]
fn sighup_applies_new_notify_targets_and_dbs() {
    let dir = tempdir();
    let first = dir.path().join("first.sqlite3");
    let second = dir.path().join("second.sqlite3");
    let zone = |origin: &str, serial: u32| {
        format!(
            "$TTL 300\n@ SOA ns.{origin} hm.{origin} {serial} 60 60 600 60\n@ NS ns.{origin}\nns A 192.0.2.1\n"
        )
    };
    load_zone_text(&first, "example.com.", &zone("example.com.", 1));
    load_zone_text(&second, "example.net.", &zone("example.net.", 10));
    let target = std::net::UdpSocket::bind("127.0.0.1:0").expect("target socket");
    target
        .set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .expect("timeout");
    let authd = start(dir.path(), &first, "");

    let config = format!(
        "[[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n\
         [[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n\
         [notify]\ntargets = [\"{}\"]\n",
        first.display(),
        second.display(),
        target.local_addr().expect("addr")
    );
    rewrite_config(dir.path(), &config);
    hup_and_wait(&authd, 1);
    // The poller first learns the serials of the new DB (one poll, 1 s):
    // nothing is announced for what was there before.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    load_zone_text(&second, "example.net.", &zone("example.net.", 11));

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut buf = [0u8; 4096];
    let notify = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no NOTIFY for example.net.:\n{}",
            authd.stderr()
        );
        let Ok((n, _)) = target.recv_from(&mut buf) else {
            continue;
        };
        break parse_reply(&buf[..n]);
    };
    assert_eq!(notify.metadata.op_code, OpCode::Notify);
    assert_eq!(notify.metadata.message_type, MessageType::Query);
    assert!(notify.metadata.authoritative);
    assert_eq!(notify.queries[0].name().to_ascii(), "example.net.");
    assert_eq!(notify.queries[0].query_type(), RecordType::SOA);
    match &notify.answers[..] {
        [r] => match &r.data {
            RData::SOA(soa) => assert_eq!(soa.serial, 11),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

/// A secondary that answers the NOTIFY with REFUSED (it does not take
/// NOTIFY from us, or wants a key): authd stops retrying and warns, naming
/// the target, zone, rcode and the likely causes, with how to give the
/// target a key.
#[test]
fn notify_refused_by_the_secondary_is_a_warning_naming_the_likely_cause() {
    let dir = tempdir();
    let db = dir.path().join("zone.sqlite3");
    let zone = |serial: u32| {
        format!("$TTL 300\n@ SOA ns hm {serial} 60 60 600 60\n@ NS ns\nns A 192.0.2.1\n")
    };
    load_zone_text(&db, "example.org.", &zone(1));
    let target = std::net::UdpSocket::bind("127.0.0.1:0").expect("target socket");
    target
        .set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .expect("timeout");
    let at = target.local_addr().expect("addr");
    let config = write_file(
        dir.path(),
        "authd.toml",
        &format!(
            "[[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n[notify]\ntargets = [\"{at}\"]\n",
            db.display()
        ),
    );
    let authd = AuthdProcess::start(["--config".as_ref(), config.as_os_str()]);
    // Let the poller learn serial 1 (one poll, 1 s), then change it.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    load_zone_text(&db, "example.org.", &zone(2));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut buf = [0u8; 4096];
    let (n, from) = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no NOTIFY:\n{}",
            authd.stderr()
        );
        if let Ok(got) = target.recv_from(&mut buf) {
            break got;
        }
    };
    // The NOTIFY itself as the reply: QR set, rcode REFUSED.
    let mut reply = buf[..n].to_vec();
    reply[2] |= 0x80;
    reply[3] = (reply[3] & 0xF0) | 5;
    target.send_to(&reply, from).expect("reply");
    let want = format!(
        "WARN authd::notify: NOTIFY of example.org. serial 2 to {at}: the secondary refused it \
         (rcode 5 REFUSED): it may not serve example.org. as a secondary, not list this server \
         as a primary, or expect a TSIG key: give the target a key with \"{at} key NAME\" in \
         [notify]"
    );
    assert!(
        authd.wait_for_log(&want, std::time::Duration::from_secs(10)),
        "{}",
        authd.stderr()
    );
    // No retry after the refusal.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(target.recv_from(&mut buf).is_err(), "a NOTIFY sent again");
    assert!(!authd.stderr().contains("answered (rcode 5"));
}
