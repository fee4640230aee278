//! DNSSEC end to end, against reference implementations:
//!
//! 1. **Knot DNS** serves the same pre-signed zone files (its own signing off)
//!    and every DO query below goes to Knot and to authd (memory backend via
//!    `--zone`, sqlite3 backend via `loadzone` + `--db`); the replies must hold
//!    the same RRs, section by section, compared as sets (RRsets, RRSIGs and
//!    denial proofs), except for the differences listed at [`compare`].
//! 2. **Unbound**, a validating resolver, resolves the in-zone queries through
//!    each server (a `stub-zone` per zone, the zone's trust anchor, the clock set
//!    inside the signatures' validity period) and must never SERVFAIL: authd's
//!    replies validate exactly as Knot's do (same rcode and AD bit), and AD is
//!    set wherever the zone's data allows a secure proof.
//! 3. A DO query whose signed answer does not fit the client's UDP size gets
//!    TC=1 and never a partial RRset or signature set.
//!
//! Zones: the signed IANA root zone of 2020-10-19 (NSEC), BIND 10's
//! `example.com.signed` (NSEC, real dnssec-signzone output of 2010) and the
//! RFC 5155 Appendix A zone `example.` (NSEC3, opt-out).
//!
//! `knotd` (`apt-get install knot`) and `unbound` (`apt-get install unbound`)
//! are required: the tests fail, not skip, without them. `.ci/run` installs
//! both. Every process listens on 127.0.0.1 only and is stopped by PID.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use authd_tests::{
    AuthdProcess, Daemon, QueryBuilder, READY_TIMEOUT, binary, free_port, parse_reply, query_tcp,
    query_udp, require_tool, run_with_timeout, spawn_daemon as spawn, start_unbound,
};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{Record, RecordType};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data").join(rel)
}

/// (origin, file) of every zone served.
fn zones() -> Vec<(&'static str, PathBuf)> {
    vec![
        (".", data("root.zone")),
        ("example.", data("bind10/rfc5155-example.zone.signed")),
        (
            "example.com.",
            data("bind10/loadzone/normal/example.com.signed"),
        ),
    ]
}

/// Knot DNS serving the zone files as they are: no signing, no semantic
/// checks, never writing the files back, journal off; all state in a temp dir.
fn start_knot() -> Daemon {
    require_tool("knotd", "--version", "knot");
    let dir = authd_tests::tempdir();
    let port = free_port();
    let d = dir.path().display();
    let mut conf = format!(
        "server:\n    listen: 127.0.0.1@{port}\n    rundir: {d}\n    pidfile: {d}/knot.pid\n\
         database:\n    storage: {d}\n\
         log:\n  - target: stderr\n    any: info\n\
         template:\n  - id: default\n    storage: {d}\n    semantic-checks: off\n    \
         dnssec-signing: off\n    zonefile-sync: -1\n    zonefile-load: whole\n    \
         journal-content: none\n\
         zone:\n"
    );
    for (origin, file) in zones() {
        conf.push_str(&format!(
            "  - domain: \"{origin}\"\n    file: \"{}\"\n",
            file.display()
        ));
    }
    let conf_path = authd_tests::write_file(dir.path(), "knot.conf", &conf);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut knot = spawn(
        "knotd",
        Command::new("knotd").arg("-c").arg(&conf_path),
        dir,
        addr,
    );
    // Ready when every zone is loaded: its SOA is answered authoritatively.
    for (origin, _) in zones() {
        knot.wait_ready(&QueryBuilder::new(origin, "SOA"));
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let r = parse_reply(&query_tcp(addr, &QueryBuilder::new(origin, "SOA").wire()));
            if r.metadata.authoritative && r.metadata.response_code == ResponseCode::NoError {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "knotd did not load {origin}:\n{}",
                knot.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    knot
}

/// The authd backends: memory (`--zone ORIGIN=FILE`, cache off by default, on
/// with `+cache`) and sqlite3 (`loadzone` into a DB, then `--db`; the hot-spot
/// cache is on by default, off with `-nocache`).
fn start_authd(backend: &str, dir: &Path) -> AuthdProcess {
    let cache: &[&str] = match backend {
        "memory+cache" => &["--cache-slots", "unlimited"],
        "sqlite3-nocache" => &["--cache-slots", "0"],
        _ => &[],
    };
    match backend.split(['+', '-']).next().unwrap_or(backend) {
        "memory" => {
            let mut args: Vec<std::ffi::OsString> = cache.iter().map(|&a| a.into()).collect();
            for (origin, file) in zones() {
                args.push("--zone".into());
                args.push(format!("{origin}={}", file.display()).into());
            }
            AuthdProcess::start(args)
        }
        "sqlite3" => {
            let db = dir.join("zones.sqlite3");
            for (origin, file) in zones() {
                let out = run_with_timeout(
                    Command::new(binary("loadzone"))
                        .arg("--db")
                        .arg(&db)
                        .arg(origin)
                        .arg(&file),
                    Duration::from_secs(120),
                );
                assert!(
                    out.status.success(),
                    "loadzone {origin}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let mut args: Vec<std::ffi::OsString> = cache.iter().map(|&a| a.into()).collect();
            args.push("--db".into());
            args.push(db.into_os_string());
            AuthdProcess::start(args)
        }
        other => panic!("unknown backend {other}"),
    }
}

const BACKENDS: [&str; 4] = ["memory", "memory+cache", "sqlite3", "sqlite3-nocache"];

/// The DO queries sent to Knot and authd: (qname, qtype, what it exercises).
const QUERIES: &[(&str, &str, &str)] = &[
    // Root zone (NSEC).
    (".", "SOA", "positive at the apex"),
    (".", "DNSKEY", "positive, KSK-signed"),
    (".", "NS", "apex NS"),
    (".", "TXT", "NODATA at the apex"),
    ("com.", "NS", "signed referral (DS)"),
    ("www.example.org.", "A", "signed referral below a TLD"),
    ("www.ye.", "A", "unsigned referral (NSEC without DS)"),
    ("com.", "DS", "DS at a cut, parent side"),
    ("ye.", "DS", "no DS at an unsigned cut"),
    ("nonexistent-tld-xyz.", "A", "NXDOMAIN"),
    ("zzzzzz.", "AAAA", "NXDOMAIN after the last name"),
    (".", "RRSIG", "qtype RRSIG"),
    // BIND 10 example.com (NSEC).
    (
        "www.example.com.",
        "A",
        "positive (served by the child zone)",
    ),
    ("www.example.com.", "TXT", "NODATA"),
    ("nx.example.com.", "A", "NXDOMAIN"),
    ("foo.wild.example.com.", "A", "wildcard answer"),
    ("foo.wild.example.com.", "TXT", "wildcard NODATA"),
    ("a.b.wild.example.com.", "A", "wildcard two labels down"),
    ("x.wild2.example.com.", "A", "wildcard CNAME chased in zone"),
    ("cname-int.example.com.", "A", "CNAME chased in zone"),
    ("www.subzone.example.com.", "A", "signed referral (DS)"),
    ("www.insec.example.com.", "A", "unsigned referral (NSEC)"),
    ("subzone.example.com.", "DS", "DS at a cut"),
    ("insec.example.com.", "DS", "no DS at an unsigned cut"),
    ("example.com.", "DNSKEY", "DNSKEY"),
    ("www.example.com.", "RRSIG", "qtype RRSIG"),
    ("mail.example.com.", "MX", "NODATA"),
    // RFC 5155 example. (NSEC3, opt-out): Appendix B and more.
    ("a.c.x.w.example.", "A", "B.1 NXDOMAIN"),
    ("ns1.example.", "MX", "B.2 NODATA"),
    ("y.w.example.", "A", "B.2.1 NODATA at an empty non-terminal"),
    (
        "mc.c.example.",
        "MX",
        "B.3 referral to an opt-out unsigned zone",
    ),
    ("a.z.w.example.", "MX", "B.4 wildcard answer"),
    ("a.z.w.example.", "AAAA", "B.5 wildcard NODATA"),
    ("example.", "DS", "B.6 DS NODATA at the apex"),
    ("ns1.a.example.", "A", "signed referral (DS)"),
    ("a.example.", "DS", "DS at a cut"),
    ("c.example.", "DS", "no DS at an opt-out cut"),
    ("x.w.example.", "MX", "positive"),
    ("example.", "DNSKEY", "DNSKEY"),
    ("ai.example.", "RRSIG", "qtype RRSIG"),
    (
        "0p9mhaveqvm6t7vbl5lop2u3t2rp3tom.example.",
        "NSEC3",
        "an NSEC3 owner name (RFC 5155 §7.2.9)",
    ),
    (
        "2t7b4g4vsa5smi47k61mv5bv1a22bojr.example.",
        "A",
        "an ordinary name that looks like a hash",
    ),
];

/// One RR as a comparable key: lower-cased owner, type, TTL, RDATA bytes.
/// (RRSIGs keep their covered type in the RDATA.)
type Rr = (String, u16, u32, Vec<u8>);

fn rr(r: &Record) -> Rr {
    let mut wire = Vec::new();
    let mut enc = BinEncoder::new(&mut wire);
    r.data.emit(&mut enc).expect("rdata encodes");
    (
        r.name.to_string().to_ascii_lowercase(),
        u16::from(r.record_type()),
        r.ttl,
        wire,
    )
}

fn set(records: &[Record]) -> BTreeSet<Rr> {
    records.iter().map(rr).collect()
}

fn show(s: &BTreeSet<Rr>) -> String {
    s.iter()
        .map(|(o, t, ttl, d)| format!("  {o} {ttl} {} {}B", RecordType::from(*t), d.len()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// An RRset key: owner, type, and for RRSIG the covered type.
fn rrset_key(r: &Rr) -> (String, u16, u16) {
    let covered = if r.1 == u16::from(RecordType::RRSIG) && r.3.len() >= 2 {
        u16::from_be_bytes([r.3[0], r.3[1]])
    } else {
        0
    };
    (r.0.clone(), r.1, covered)
}

fn ask_tcp(addr: SocketAddr, qname: &str, qtype: &str) -> Message {
    let q = QueryBuilder::new(qname, qtype).edns(4096, true);
    parse_reply(&query_tcp(addr, &q.wire()))
}

/// Compares authd's reply with Knot's for one query, section by section as
/// sets of RRs. Allowed differences (policy, not correctness):
///
/// - **qtype RRSIG**: Knot answers with one RRSIG of the name (its
///   anti-amplification policy); authd with all of them (RFC 4035 §3.1.5 leaves
///   the content open). Required: Knot's RRSIGs ⊆ authd's, and authd's are
///   exactly the RRSIGs at the name, checked against the zone by asking each
///   covered type with DO.
/// - **additional section**: Knot adds addresses for more names (e.g. the
///   targets of MX in wildcard answers) and signs glue differently; additional
///   data is optional (RFC 1034 §4.3.2 step 6, RFC 9471 makes only in-domain
///   glue mandatory). Required: every RR authd puts there is also in Knot's,
///   and in-domain glue of a referral is identical.
///
/// Everything else must be equal: rcode, AA, TC, the answer section and the
/// authority section (NS, SOA, DS, NSEC/NSEC3 proofs, every RRSIG and TTL).
fn compare(backend: &str, authd: SocketAddr, knot: SocketAddr) {
    let mut failures = Vec::new();
    for &(qname, qtype, what) in QUERIES {
        let a = ask_tcp(authd, qname, qtype);
        let k = ask_tcp(knot, qname, qtype);
        let tag = format!("{qname} {qtype} ({what}) [{backend}]");
        let (am, km) = (&a.metadata, &k.metadata);
        if (am.response_code, am.authoritative, am.truncation)
            != (km.response_code, km.authoritative, km.truncation)
        {
            failures.push(format!(
                "{tag}: header authd {:?} aa={} tc={} / knot {:?} aa={} tc={}",
                am.response_code,
                am.authoritative,
                am.truncation,
                km.response_code,
                km.authoritative,
                km.truncation
            ));
        }
        let (aa, ka) = (set(&a.answers), set(&k.answers));
        if qtype == "RRSIG" {
            if !ka.is_subset(&aa) || aa.is_empty() {
                failures.push(format!(
                    "{tag}: knot's RRSIGs not among authd's\nauthd:\n{}\nknot:\n{}",
                    show(&aa),
                    show(&ka)
                ));
            }
            // authd's RRSIGs are those of every RRset at the name.
            let mut expect = BTreeSet::new();
            for (_, _, _, rdata) in &aa {
                let covered = RecordType::from(u16::from_be_bytes([rdata[0], rdata[1]]));
                let r = ask_tcp(knot, qname, &covered.to_string());
                expect.extend(
                    set(&r.answers)
                        .into_iter()
                        .filter(|x| x.1 == u16::from(RecordType::RRSIG)),
                );
            }
            if aa != expect {
                failures.push(format!(
                    "{tag}: RRSIGs differ from those at the name\nauthd:\n{}\nexpected:\n{}",
                    show(&aa),
                    show(&expect)
                ));
            }
        } else if aa != ka {
            failures.push(format!(
                "{tag}: answer differs\nauthd:\n{}\nknot:\n{}",
                show(&aa),
                show(&ka)
            ));
        }
        let (an, kn) = (set(&a.authorities), set(&k.authorities));
        if an != kn {
            failures.push(format!(
                "{tag}: authority differs\nauthd only:\n{}\nknot only:\n{}",
                show(&an.difference(&kn).cloned().collect()),
                show(&kn.difference(&an).cloned().collect())
            ));
        }
        let (ad, kd) = (set(&a.additionals), set(&k.additionals));
        if !ad.is_subset(&kd) {
            failures.push(format!(
                "{tag}: additional RRs knot does not send:\n{}",
                show(&ad.difference(&kd).cloned().collect())
            ));
        }
        // In-domain glue (addresses under the cut) of a referral: identical.
        if !am.authoritative {
            let cuts: BTreeSet<String> = a
                .authorities
                .iter()
                .filter(|r| r.record_type() == RecordType::NS)
                .map(|r| r.name.to_string().to_ascii_lowercase())
                .collect();
            let in_domain = |s: &BTreeSet<Rr>| -> BTreeSet<Rr> {
                s.iter()
                    .filter(|r| {
                        cuts.iter()
                            .any(|c| r.0 == *c || r.0.ends_with(&format!(".{c}")))
                    })
                    .cloned()
                    .collect()
            };
            if in_domain(&ad) != in_domain(&kd) {
                failures.push(format!(
                    "{tag}: in-domain glue differs\nauthd:\n{}\nknot:\n{}",
                    show(&in_domain(&ad)),
                    show(&in_domain(&kd))
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} queries differ from Knot DNS:\n\n{}",
        failures.len(),
        QUERIES.len(),
        failures.join("\n\n")
    );
}

#[test]
fn signed_zones_match_knot() {
    let knot = start_knot();
    for backend in BACKENDS {
        let dir = authd_tests::tempdir();
        let authd = start_authd(backend, dir.path());
        compare(backend, authd.addr(), knot.addr);
    }
}

// ---------------------------------------------------------------------------
// Validation with Unbound.

/// KSK-2017, the root trust anchor (IANA root-anchors.xml).
const ROOT_DS: &str =
    ". DS 20326 8 2 E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D";
/// DS of the RFC 5155 zone's KSK (tag 12708), made with
/// `ldns-key2ds -n -2` from the zone file's DNSKEY 257.
const EXAMPLE_DS: &str =
    "example. DS 12708 7 2 E91B0008A43024435DE9C7F2C0DD88D29270368D8BD8EB1EE7D41B67139A988D";
/// DS of BIND 10 example.com's KSK (tag 4456), made the same way.
const EXAMPLE_COM_DS: &str =
    "example.com. DS 4456 5 2 930B44A6D1B590479FBCAC25ABCE1F52FDED1D65C076136F293BB81C7462ABDD";

/// In-zone queries for the validator (none below a zone cut, which would send
/// it to the child's servers), with whether the answer must be secure (AD).
/// Not secure by the data itself: the RFC 5155 zone sets opt-out on every
/// NSEC3, so a proof that needs a covering NSEC3 of a "next closer" name
/// (NXDOMAIN, wildcard, no DS at an opt-out cut) is insecure, never bogus
/// (RFC 5155 §9.2); Knot's replies get the very same verdict.
const VALIDATE_2010: &[(&str, &str, ResponseCode, bool)] = &[
    ("www.example.com.", "A", ResponseCode::NoError, true),
    ("www.example.com.", "TXT", ResponseCode::NoError, true),
    ("nx.example.com.", "A", ResponseCode::NXDomain, true),
    ("foo.wild.example.com.", "A", ResponseCode::NoError, true),
    ("foo.wild.example.com.", "TXT", ResponseCode::NoError, true),
    ("a.b.wild.example.com.", "A", ResponseCode::NoError, true),
    ("x.wild2.example.com.", "A", ResponseCode::NoError, true),
    ("cname-int.example.com.", "A", ResponseCode::NoError, true),
    ("subzone.example.com.", "DS", ResponseCode::NoError, true),
    ("insec.example.com.", "DS", ResponseCode::NoError, true),
    ("example.com.", "DNSKEY", ResponseCode::NoError, true),
    ("mail.example.com.", "MX", ResponseCode::NoError, true),
    ("a.c.x.w.example.", "A", ResponseCode::NXDomain, false),
    ("ns1.example.", "MX", ResponseCode::NoError, true),
    ("y.w.example.", "A", ResponseCode::NoError, true),
    ("a.z.w.example.", "MX", ResponseCode::NoError, false),
    ("a.z.w.example.", "AAAA", ResponseCode::NoError, false),
    ("a.example.", "DS", ResponseCode::NoError, true),
    ("c.example.", "DS", ResponseCode::NoError, false),
    ("x.w.example.", "MX", ResponseCode::NoError, true),
    ("example.", "DNSKEY", ResponseCode::NoError, true),
    (
        "2t7b4g4vsa5smi47k61mv5bv1a22bojr.example.",
        "A",
        ResponseCode::NoError,
        true,
    ),
    (
        "0p9mhaveqvm6t7vbl5lop2u3t2rp3tom.example.",
        "NSEC3",
        ResponseCode::NXDomain,
        false,
    ),
];

const VALIDATE_2020: &[(&str, &str, ResponseCode, bool)] = &[
    (".", "SOA", ResponseCode::NoError, true),
    (".", "DNSKEY", ResponseCode::NoError, true),
    (".", "NS", ResponseCode::NoError, true),
    (".", "TXT", ResponseCode::NoError, true),
    ("com.", "DS", ResponseCode::NoError, true),
    ("ye.", "DS", ResponseCode::NoError, true),
    ("nonexistent-tld-xyz.", "A", ResponseCode::NXDomain, true),
    ("zzzzzz.", "AAAA", ResponseCode::NXDomain, true),
    ("aaa.", "DS", ResponseCode::NoError, true),
];

/// (rcode, AD) of each query resolved through `resolver`.
fn verdicts(
    resolver: &Daemon,
    queries: &[(&str, &str, ResponseCode, bool)],
) -> BTreeMap<String, (ResponseCode, bool)> {
    queries
        .iter()
        .map(|&(qname, qtype, _, _)| {
            let q = QueryBuilder::new(qname, qtype).rd(true).edns(4096, true);
            let r = parse_reply(&query_tcp(resolver.addr, &q.wire()));
            (
                format!("{qname} {qtype}"),
                (r.metadata.response_code, r.metadata.authentic_data),
            )
        })
        .collect()
}

fn check_validation(
    upstream: &str,
    resolver: &Daemon,
    queries: &[(&str, &str, ResponseCode, bool)],
    reference: &BTreeMap<String, (ResponseCode, bool)>,
) {
    let got = verdicts(resolver, queries);
    let mut failures = Vec::new();
    for &(qname, qtype, rcode, secure) in queries {
        let key = format!("{qname} {qtype}");
        let v = got[&key];
        if v.0 == ResponseCode::ServFail || v.0 != rcode || (secure && !v.1) {
            failures.push(format!(
                "{key}: {:?} ad={} (want {rcode:?}{})",
                v.0,
                v.1,
                if secure { " ad=1" } else { "" }
            ));
        }
        if reference.get(&key) != Some(&v) {
            failures.push(format!(
                "{key}: {v:?} through {upstream}, {:?} through Knot",
                reference.get(&key)
            ));
        }
    }
    let log = resolver.log();
    for line in log.lines() {
        if line.contains("validation failure") || line.contains("sec_status_bogus") {
            failures.push(format!("unbound: {line}"));
        }
    }
    assert!(
        failures.is_empty(),
        "validation through {upstream}:\n{}\n\nunbound log:\n{log}",
        failures.join("\n")
    );
}

#[test]
fn responses_validate_with_unbound() {
    let knot = start_knot();
    let stubs_2010 = [("example.", EXAMPLE_DS), ("example.com.", EXAMPLE_COM_DS)];
    let stubs_2020 = [(".", ROOT_DS)];
    // The reference verdicts: Knot's replies through the same validator.
    let ref_2010 = {
        let ub = start_unbound(knot.addr, &stubs_2010, Some("20100401000000"));
        let v = verdicts(&ub, VALIDATE_2010);
        check_validation("knot", &ub, VALIDATE_2010, &v);
        v
    };
    let ref_2020 = {
        let ub = start_unbound(knot.addr, &stubs_2020, Some("20201020000000"));
        let v = verdicts(&ub, VALIDATE_2020);
        check_validation("knot", &ub, VALIDATE_2020, &v);
        v
    };
    for backend in BACKENDS {
        let dir = authd_tests::tempdir();
        let authd = start_authd(backend, dir.path());
        let name = format!("authd ({backend})");
        let ub = start_unbound(authd.addr(), &stubs_2010, Some("20100401000000"));
        check_validation(&name, &ub, VALIDATE_2010, &ref_2010);
        drop(ub);
        let ub = start_unbound(authd.addr(), &stubs_2020, Some("20201020000000"));
        check_validation(&name, &ub, VALIDATE_2020, &ref_2020);
    }
}

// ---------------------------------------------------------------------------
// Truncation.

/// A DO query over UDP whose signed reply does not fit the client's EDNS size:
/// TC=1, and whatever the reply holds is whole RRsets, each with all its
/// RRSIGs (compared with the same query over TCP).
#[test]
fn dnssec_truncation_never_strips_signatures() {
    for backend in BACKENDS {
        let dir = authd_tests::tempdir();
        let authd = start_authd(backend, dir.path());
        for (qname, qtype) in [
            (".", "DNSKEY"),
            ("com.", "NS"),
            ("a.c.x.w.example.", "A"),
            ("a.z.w.example.", "AAAA"),
            ("nx.example.com.", "A"),
        ] {
            let tag = format!("{qname} {qtype} [{backend}]");
            let full = ask_tcp(authd.addr(), qname, qtype);
            assert!(!full.metadata.truncation, "{tag}");
            let q = QueryBuilder::new(qname, qtype).edns(512, true);
            let wire = query_udp(authd.addr(), &q.wire());
            assert!(wire.len() <= 512, "{tag}: {} bytes", wire.len());
            let small = parse_reply(&wire);
            assert!(small.metadata.truncation, "{tag}: TC not set");
            for (part, whole) in [
                (&small.answers, &full.answers),
                (&small.authorities, &full.authorities),
            ] {
                let whole = set(whole);
                let part = set(part);
                assert!(part.is_subset(&whole), "{tag}: RRs not in the full reply");
                let group = |s: &BTreeSet<Rr>| {
                    let mut m: BTreeMap<(String, u16, u16), usize> = BTreeMap::new();
                    for r in s {
                        *m.entry(rrset_key(r)).or_default() += 1;
                    }
                    m
                };
                let (gp, gw) = (group(&part), group(&whole));
                for (k, n) in &gp {
                    assert_eq!(Some(n), gw.get(k), "{tag}: partial RRset {k:?}");
                    // Data present ⇔ its signatures present.
                    if k.1 != u16::from(RecordType::RRSIG) {
                        let sig = (k.0.clone(), u16::from(RecordType::RRSIG), k.1);
                        assert_eq!(
                            gp.contains_key(&sig),
                            gw.contains_key(&sig),
                            "{tag}: {k:?} without its RRSIGs"
                        );
                    } else {
                        assert!(
                            gp.contains_key(&(k.0.clone(), k.2, 0)),
                            "{tag}: RRSIG without its RRset {k:?}"
                        );
                    }
                }
            }
        }
    }
}
