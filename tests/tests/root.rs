//! End to end on the real root zone: `loadzone` loads `tests/data/root.zone`
//! (IANA, serial 2020101902, signed) into an sqlite3 DB, `authd` serves it on an
//! ephemeral loopback port, and queries go over real UDP and TCP sockets.
//!
//! Expected RRsets are read from the zone file with a plain line split (IANA
//! publishes one RR per line), independently of authd's own parser.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use authd_tests::{
    AuthdProcess, QueryBuilder, binary, parse_reply, query_tcp, query_udp, run_with_timeout,
};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::Record;

/// `owner ttl TYPE rdata` for every line of the zone file with `owner` and `rtype`.
fn expected(owner: &str, rtype: &str) -> BTreeSet<String> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("data/root.zone"))
            .expect("root.zone");
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').filter(|s| !s.is_empty()).collect();
            if f.len() < 5 || !f[0].eq_ignore_ascii_case(owner) || f[3] != rtype {
                return None;
            }
            // hickory prints IPv6 addresses in their short form.
            let rdata = match f[4].parse::<std::net::Ipv6Addr>() {
                Ok(a) => a.to_string(),
                Err(_) => f[4].to_ascii_lowercase(),
            };
            Some(format!(
                "{} {} {} {}",
                f[0].to_ascii_lowercase(),
                f[1],
                f[3],
                rdata
            ))
        })
        .collect()
}

fn shown(records: &[Record]) -> BTreeSet<String> {
    records
        .iter()
        .map(|r| {
            format!("{} {} {} {}", r.name, r.ttl, r.record_type(), r.data)
                .to_ascii_lowercase()
                .replace(" ds ", " DS ")
        })
        .map(|s| {
            // Back to the zone file's upper-case mnemonics.
            let mut parts: Vec<String> = s.splitn(4, ' ').map(str::to_string).collect();
            parts[2] = parts[2].to_ascii_uppercase();
            parts.join(" ")
        })
        .collect()
}

struct Root {
    _dir: tempfile::TempDir,
    authd: AuthdProcess,
}

fn serve_root() -> Root {
    let dir = authd_tests::tempdir();
    let db = dir.path().join("root.sqlite3");
    let zone = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/root.zone");
    let out = run_with_timeout(
        Command::new(binary("loadzone"))
            .arg("--db")
            .arg(&db)
            .arg(".")
            .arg(&zone),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "loadzone: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("loaded 21591 RRs for . into "));
    let authd = AuthdProcess::start([std::ffi::OsStr::new("--db"), db.as_os_str()]);
    Root { _dir: dir, authd }
}

fn ask(addr: SocketAddr, tcp: bool, q: QueryBuilder) -> Message {
    let wire = q.wire();
    let reply = if tcp {
        query_tcp(addr, &wire)
    } else {
        query_udp(addr, &wire)
    };
    let msg = parse_reply(&reply);
    assert_eq!(msg.metadata.id, q.message().metadata.id);
    if !tcp {
        let limit = q
            .message()
            .edns
            .as_ref()
            .map_or(512, |e| e.max_payload().min(1232));
        assert!(
            reply.len() <= usize::from(limit),
            "{} > {limit}",
            reply.len()
        );
    }
    msg
}

/// The root zone from memory (`--zone`): referrals come from per-cut templates there.
fn serve_root_from_memory() -> Root {
    let dir = authd_tests::tempdir();
    let zone = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/root.zone");
    let authd = AuthdProcess::start([
        std::ffi::OsString::from("--zone"),
        std::ffi::OsString::from(format!(".={}", zone.display())),
    ]);
    Root { _dir: dir, authd }
}

#[test]
fn root_zone_over_udp_and_tcp() {
    check_root(serve_root());
}

#[test]
fn root_zone_from_memory_over_udp_and_tcp() {
    check_root(serve_root_from_memory());
}

fn check_root(root: Root) {
    let addr = root.authd.addr();
    for tcp in [false, true] {
        let t = if tcp { "tcp" } else { "udp" };

        // . SOA: authoritative, exactly the one SOA.
        let r = ask(addr, tcp, QueryBuilder::new(".", "SOA"));
        assert_eq!(r.metadata.response_code, ResponseCode::NoError, "{t}");
        assert!(r.metadata.authoritative, "{t}");
        assert_eq!(shown(&r.answers), expected(".", "SOA"), "{t}");
        assert!(r.authorities.is_empty(), "{t}");

        // com. NS: a referral with the 13 NS in authority and their addresses
        // (sibling glue under net.) in additional; AA clear; nothing in answer.
        let r = ask(addr, tcp, QueryBuilder::new("com.", "NS").edns(1232, false));
        assert_eq!(r.metadata.response_code, ResponseCode::NoError, "{t}");
        assert!(!r.metadata.authoritative, "{t}");
        assert!(!r.metadata.truncation, "{t}");
        assert!(r.answers.is_empty(), "{t}");
        assert_eq!(r.authorities.len(), 13, "{t}");
        assert_eq!(shown(&r.authorities), expected("com.", "NS"), "{t}");
        let mut glue = BTreeSet::new();
        for letter in 'a'..='m' {
            glue.extend(expected(&format!("{letter}.gtld-servers.net."), "A"));
            glue.extend(expected(&format!("{letter}.gtld-servers.net."), "AAAA"));
        }
        assert_eq!(glue.len(), 26);
        assert_eq!(shown(&r.additionals), glue, "{t}");

        // Without EDNS over UDP only part of the glue fits in 512 bytes; it is
        // sibling glue (not under com.), so no TC (RFC 9471 §3).
        let r = ask(addr, tcp, QueryBuilder::new("com.", "NS"));
        assert_eq!(shown(&r.authorities), expected("com.", "NS"), "{t}");
        assert!(!r.metadata.truncation, "{t}");
        if tcp {
            assert_eq!(r.additionals.len(), 26);
        } else {
            assert!(
                !r.additionals.is_empty() && r.additionals.len() < 26,
                "{}",
                r.additionals.len()
            );
        }

        // A name under a TLD: the same referral.
        let r = ask(
            addr,
            tcp,
            QueryBuilder::new("www.example.com.", "A").edns(1232, false),
        );
        assert!(!r.metadata.authoritative);
        assert_eq!(shown(&r.authorities), expected("com.", "NS"), "{t}");

        // NXDOMAIN with the SOA in authority, TTL = min(SOA TTL, MINIMUM) = 86400.
        let r = ask(
            addr,
            tcp,
            QueryBuilder::new("a-name-that-does-not-exist.", "A"),
        );
        assert_eq!(r.metadata.response_code, ResponseCode::NXDomain, "{t}");
        assert!(r.metadata.authoritative);
        assert!(r.answers.is_empty());
        assert_eq!(shown(&r.authorities), expected(".", "SOA"), "{t}");

        // . NS: the 13 root servers, their addresses in additional.
        let r = ask(addr, tcp, QueryBuilder::new(".", "NS").edns(1232, false));
        assert!(r.metadata.authoritative);
        assert_eq!(shown(&r.answers), expected(".", "NS"), "{t}");
        assert_eq!(r.additionals.len(), 26, "{t}");

        // . DNSKEY: both keys; no RRSIG without DO; with DO the RRSIG too.
        let r = ask(
            addr,
            tcp,
            QueryBuilder::new(".", "DNSKEY").edns(1232, false),
        );
        assert!(r.metadata.authoritative);
        assert_eq!(r.answers.len(), 2, "{t}");
        assert!(
            r.answers
                .iter()
                .all(|a| a.record_type().to_string() == "DNSKEY")
        );
        let r = ask(addr, tcp, QueryBuilder::new(".", "DNSKEY").edns(1232, true));
        assert_eq!(r.answers.len(), 3, "{t}");
        assert_eq!(r.answers[2].record_type().to_string(), "RRSIG");

        // DS for a TLD comes from the root (the parent side), authoritatively.
        let r = ask(addr, tcp, QueryBuilder::new("com.", "DS"));
        assert!(r.metadata.authoritative, "{t}");
        assert_eq!(r.answers.len(), 1, "{t}");
        assert_eq!(r.answers[0].record_type().to_string(), "DS");
        assert_eq!(r.answers[0].ttl, 86400);

        // Mixed-case qname: case preserved in the question and owner names.
        let r = ask(addr, tcp, QueryBuilder::new("CoM.", "NS").edns(1232, false));
        assert_eq!(r.queries[0].name().to_string(), "CoM.");
        assert!(!r.metadata.authoritative);
        assert_eq!(r.authorities.len(), 13);
        assert!(r.authorities.iter().all(|a| a.name.to_string() == "CoM."));
        let r = ask(
            addr,
            tcp,
            QueryBuilder::new("A-Name-That-Does-Not-Exist.", "AAAA"),
        );
        assert_eq!(
            r.queries[0].name().to_string(),
            "A-Name-That-Does-Not-Exist."
        );
        assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    }
}

/// The same through `dig`, the tool operators use.
#[test]
fn dig_against_the_root_zone() {
    assert!(
        Command::new("dig").arg("-v").output().is_ok(),
        "dig is required for this test: apt-get install dnsutils"
    );
    let root = serve_root();
    let addr = root.authd.addr();
    let dig = |args: &[&str]| -> String {
        let out = run_with_timeout(
            Command::new("dig")
                .args(["+tries=1", "+time=2", "+norec"])
                .arg(format!("@{}", addr.ip()))
                .args(["-p", &addr.port().to_string()])
                .args(args),
            Duration::from_secs(20),
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = dig(&[".", "SOA"]);
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(out.contains("flags: qr aa;"), "{out}");
    assert!(
        out.contains(
            "a.root-servers.net. nstld.verisign-grs.com. 2020101902 1800 900 604800 86400"
        ),
        "{out}"
    );
    let out = dig(&["+tcp", "com.", "NS"]);
    assert!(out.contains("flags: qr;"), "referral without aa: {out}");
    assert!(
        out.contains("ANSWER: 0, AUTHORITY: 13, ADDITIONAL: 27"),
        "{out}"
    );
    let out = dig(&["nonexistent-tld-xyz.", "A"]);
    assert!(out.contains("status: NXDOMAIN"), "{out}");
    let out = dig(&["+short", "com.", "DS"]);
    assert_eq!(
        out.trim(),
        "30909 8 2 E2D3C916F6DEEAC73294E8268FB5885044A833FC5459588F4A9184CF C41A5766"
    );
}
