//! The query-semantics battery: RFC 1034 §4.3.2, RFC 2308, RFC 4592 and RFC 6672
//! cases on BIND 10's query-test zone (`example-base-inc.zone`, the zone behind
//! its `query_unittest.cc`), checked section by section on the wire.
//!
//! Each case runs against every backend (`for_each_backend`), so the backends can
//! never drift apart. Replies are decoded with hickory-proto, an independent
//! implementation, not with our own parser.

use std::path::Path;
use std::sync::Arc;

use authd::chaos::ChaosOptions;
use authd::dispatch::{self, Dispatcher};
use authd::query::Transport;
use authd_datasrc::{DataSource, LookupOptions, Name, Outcome, RType, SourceList};
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Record, RecordType};

/// The client address of every query (no access control applies to them).
const LOCAL: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

const ZONE: &str = "tests/data/example-base-inc.zone";

mod common;
use common::{COMPOSITIONS, Composition};

fn server(sources: SourceList) -> Server {
    Server {
        p: Dispatcher::new(sources).with_chaos(ChaosOptions {
            version: Some("authd test".into()),
            hostname: None,
        }),
    }
}

/// Runs `check` on every composition serving zone `origin` from `file`.
fn for_each_backend(origin: &str, file: &str, check: impl Fn(&str, &Server)) {
    for composition in COMPOSITIONS {
        let dir = tempfile::tempdir().expect("tempdir");
        let sources = composition.build(dir.path(), origin, Path::new(file));
        check(&composition.to_string(), &server(sources));
    }
}

struct Server {
    p: Dispatcher,
}

/// A decoded reply, sections as `owner ttl TYPE rdata` strings.
#[derive(Debug)]
struct Reply {
    msg: Message,
    wire_len: usize,
}

impl Reply {
    fn rcode(&self) -> ResponseCode {
        self.msg.metadata.response_code
    }
    fn aa(&self) -> bool {
        self.msg.metadata.authoritative
    }
    fn tc(&self) -> bool {
        self.msg.metadata.truncation
    }
    fn answer(&self) -> Vec<String> {
        self.msg.answers.iter().map(show).collect()
    }
    fn authority(&self) -> Vec<String> {
        self.msg.authorities.iter().map(show).collect()
    }
    fn additional(&self) -> Vec<String> {
        self.msg.additionals.iter().map(show).collect()
    }
}

fn show(r: &Record) -> String {
    let data = match r.record_type() {
        // hickory-proto (no dnssec feature) has no DNAME type: decode its target here.
        RecordType::DNAME => {
            let mut wire = Vec::new();
            let mut enc = hickory_proto::serialize::binary::BinEncoder::new(&mut wire);
            hickory_proto::serialize::binary::BinEncodable::emit(&r.data, &mut enc).expect("emit");
            format!(" {}", Name::from_wire(&wire).expect("DNAME target"))
        }
        // NSEC: the next owner name (RFC 4034 §4.1.1), the first field.
        RecordType::NSEC => {
            let mut wire = Vec::new();
            let mut enc = hickory_proto::serialize::binary::BinEncoder::new(&mut wire);
            hickory_proto::serialize::binary::BinEncodable::emit(&r.data, &mut enc).expect("emit");
            let mut end = 0;
            while wire[end] != 0 {
                end += usize::from(wire[end]) + 1;
            }
            format!(" {}", Name::from_wire(&wire[..=end]).expect("NSEC next"))
        }
        RecordType::RRSIG | RecordType::DS | RecordType::Unknown(_) => String::new(),
        _ => format!(" {}", r.data),
    };
    format!("{} {} {}{}", r.name, r.ttl, r.record_type(), data)
}

struct Ask<'a> {
    qname: &'a str,
    qtype: RecordType,
    class: DNSClass,
    edns: Option<(u16, bool, u8)>,
    transport: Transport,
}

impl<'a> Ask<'a> {
    fn new(qname: &'a str, qtype: RecordType) -> Self {
        Ask {
            qname,
            qtype,
            class: DNSClass::IN,
            edns: None,
            transport: Transport::Udp,
        }
    }
    fn dnssec(mut self) -> Self {
        self.edns = Some((1232, true, 0));
        self
    }
    fn edns(mut self, size: u16, version: u8) -> Self {
        self.edns = Some((size, false, version));
        self
    }
    fn class(mut self, class: DNSClass) -> Self {
        self.class = class;
        self
    }
    fn wire(&self) -> Vec<u8> {
        let mut m = Message::new(0x4242, MessageType::Query, OpCode::Query);
        // Labels built as raw bytes: hickory's text parser rejects names such
        // as `!.no.example.com.` that are valid in DNS.
        let ours: Name = self.qname.parse().expect("qname");
        let mut name =
            hickory_proto::rr::Name::from_labels(ours.labels().map(<[u8]>::to_vec)).expect("qname");
        name.set_fqdn(true);
        let mut q = Query::query(name, self.qtype);
        q.query_class = self.class;
        m.add_query(q);
        if let Some((size, dnssec_ok, version)) = self.edns {
            let mut e = Edns::new();
            e.set_max_payload(size);
            e.set_dnssec_ok(dnssec_ok);
            e.set_version(version);
            m.set_edns(e);
        }
        m.to_vec().expect("encodes")
    }
}

impl Server {
    fn ask(&self, q: Ask<'_>) -> Reply {
        self.raw(&q.wire(), q.transport).expect("a reply")
    }
    fn q(&self, qname: &str, qtype: RecordType) -> Reply {
        self.ask(Ask::new(qname, qtype))
    }
    fn raw(&self, wire: &[u8], transport: Transport) -> Option<Reply> {
        let mut out = Vec::new();
        if self.p.handle(wire, transport, LOCAL, &mut out) != dispatch::Reply::Message {
            return None;
        }
        let msg = Message::from_vec(&out).expect("reply decodes");
        assert_eq!(msg.metadata.id, u16::from_be_bytes([wire[0], wire[1]]));
        assert_eq!(msg.metadata.message_type, MessageType::Response);
        Some(Reply {
            msg,
            wire_len: out.len(),
        })
    }
}

const SOA_NEG: &str = "example.com. 0 SOA . . 1 0 0 0 0";
const DELEG_NS: [&str; 4] = [
    "delegation.example.com. 3600 NS glue.delegation.example.com.",
    "delegation.example.com. 3600 NS noglue.example.com.",
    "delegation.example.com. 3600 NS cname.example.com.",
    "delegation.example.com. 3600 NS example.org.",
];
const ADDRS: [&str; 3] = [
    "glue.delegation.example.com. 3600 A 192.0.2.153",
    "glue.delegation.example.com. 3600 AAAA 2001:db8::53",
    "noglue.example.com. 3600 A 192.0.2.53",
];

fn check_positive(r: &Reply, answer: &[&str]) {
    assert_eq!(r.rcode(), ResponseCode::NoError);
    assert!(r.aa());
    assert_eq!(r.answer(), answer);
}

#[test]
fn positive_answers() {
    for_each_backend("example.com.", ZONE, |backend, s| {
        let r = s.q("www.example.com.", RecordType::A);
        check_positive(&r, &["www.example.com. 3600 A 192.0.2.80"]);
        assert!(r.authority().is_empty(), "{backend}");
        assert!(r.additional().is_empty(), "{backend}");

        // With DO: the RRSIG travels with the RRset (RFC 4035 §3.1.1).
        let r = s.ask(Ask::new("www.example.com.", RecordType::A).dnssec());
        check_positive(
            &r,
            &[
                "www.example.com. 3600 A 192.0.2.80",
                "www.example.com. 3600 RRSIG",
            ],
        );

        // Apex NS: additional A/AAAA for in-zone names, found below the cut too.
        let r = s.q("example.com.", RecordType::NS);
        check_positive(
            &r,
            &[
                "example.com. 3600 NS glue.delegation.example.com.",
                "example.com. 3600 NS noglue.example.com.",
                "example.com. 3600 NS example.net.",
            ],
        );
        assert_eq!(r.additional(), ADDRS, "{backend}");

        // MX: in-zone exchange gets its address; out-of-zone and below-cut do not.
        let r = s.q("mx.example.com.", RecordType::MX);
        check_positive(
            &r,
            &[
                "mx.example.com. 3600 MX 10 www.example.com.",
                "mx.example.com. 3600 MX 20 mailer.example.org.",
                "mx.example.com. 3600 MX 30 mx.delegation.example.com.",
            ],
        );
        assert_eq!(r.additional(), ["www.example.com. 3600 A 192.0.2.80"]);

        // MX whose exchange is a CNAME: no additional data.
        let r = s.q("cnamemx.example.com.", RecordType::MX);
        check_positive(
            &r,
            &["cnamemx.example.com. 3600 MX 10 cnamemailer.example.com."],
        );
        assert!(r.additional().is_empty());

        // DNAME owner keeps its own data (RFC 6672 §2.3).
        check_positive(
            &s.q("dname.example.com.", RecordType::A),
            &["dname.example.com. 3600 A 192.0.2.5"],
        );
        check_positive(
            &s.q("dname.example.com.", RecordType::DNAME),
            &["dname.example.com. 3600 DNAME somethinglong.dnametarget.example.com."],
        );

        // ANY over TCP: every RRset at the name; over UDP one RRset, the one
        // of the lowest type (RFC 8482 §4.1), TC clear.
        let r = s.ask(Ask {
            transport: Transport::Tcp,
            ..Ask::new("noglue.example.com.", RecordType::ANY)
        });
        check_positive(
            &r,
            &[
                "noglue.example.com. 3600 A 192.0.2.53",
                "noglue.example.com. 3600 NSEC nonsec.example.com.",
            ],
        );
        let r = s.q("noglue.example.com.", RecordType::ANY);
        check_positive(&r, &["noglue.example.com. 3600 A 192.0.2.53"]);
        assert!(!r.tc());

        // DS at a delegation point is answered from the parent (RFC 4035 §3.1.4.1).
        let r = s.q("delegation.example.com.", RecordType::DS);
        check_positive(&r, &["delegation.example.com. 3600 DS"]);
    });
}

#[test]
fn referrals() {
    for_each_backend("example.com.", ZONE, |_, s| {
        for qname in [
            "delegation.example.com.",
            "www.delegation.example.com.",
            "a.b.glue.delegation.example.com.",
        ] {
            let r = s.q(qname, RecordType::A);
            assert_eq!(r.rcode(), ResponseCode::NoError, "{qname}");
            assert!(!r.aa(), "referral clears AA: {qname}");
            assert!(r.answer().is_empty());
            assert_eq!(r.authority(), DELEG_NS);
            assert_eq!(r.additional(), ADDRS, "{qname}");
        }
        // Glue is not authoritative data: a query for it is a referral.
        let r = s.q("glue.delegation.example.com.", RecordType::A);
        assert!(!r.aa());
        assert_eq!(r.authority(), DELEG_NS);
        // With DO the signed DS set joins the NS set (RFC 4035 §3.1.4).
        let r = s.ask(Ask::new("www.delegation.example.com.", RecordType::A).dnssec());
        assert_eq!(
            r.authority(),
            [
                DELEG_NS[0],
                DELEG_NS[1],
                DELEG_NS[2],
                DELEG_NS[3],
                "delegation.example.com. 3600 DS",
                "delegation.example.com. 3600 RRSIG"
            ]
        );
    });
}

#[test]
fn negative_answers() {
    for_each_backend("example.com.", ZONE, |_, s| {
        // NXDOMAIN: SOA with TTL min(SOA TTL, MINIMUM) = 0 (RFC 2308 §3).
        for qtype in [RecordType::A, RecordType::ANY] {
            let r = s.q("nxdomain.example.com.", qtype);
            assert_eq!(r.rcode(), ResponseCode::NXDomain);
            assert!(r.aa());
            assert!(r.answer().is_empty());
            assert_eq!(r.authority(), [SOA_NEG]);
            assert!(r.additional().is_empty());
        }
        // NODATA at an existing name.
        for (qname, qtype) in [
            ("www.example.com.", RecordType::TXT),
            ("dname.example.com.", RecordType::TXT),
            ("www.uwild.example.com.", RecordType::TXT),
        ] {
            let r = s.q(qname, qtype);
            assert_eq!(r.rcode(), ResponseCode::NoError, "{qname}");
            assert!(r.aa());
            assert!(r.answer().is_empty(), "{qname}");
            assert_eq!(r.authority(), [SOA_NEG], "{qname}");
        }
        // Empty non-terminals are NODATA, not NXDOMAIN (RFC 4592 §2.2.2).
        for qname in [
            "no.example.com.",
            "t.example.com.",
            "*.t.example.com.",
            "wild.example.com.",
        ] {
            let r = s.q(qname, RecordType::TXT);
            assert_eq!(r.rcode(), ResponseCode::NoError, "{qname}");
            assert_eq!(r.authority(), [SOA_NEG], "{qname}");
        }
        // Outside every zone: REFUSED, AA clear.
        let r = s.q("example.org.", RecordType::A);
        assert_eq!(r.rcode(), ResponseCode::Refused);
        assert!(!r.aa());
        assert!(r.answer().is_empty() && r.authority().is_empty());
    });
}

#[test]
fn wildcards() {
    for_each_backend("example.com.", ZONE, |_, s| {
        // The owner is the qname, in the query's case (RFC 4592 §3.4.3).
        let r = s.q("WWW.wild.example.com.", RecordType::A);
        check_positive(&r, &["WWW.wild.example.com. 3600 A 192.0.2.7"]);
        let r = s.q("a.b.wild.example.com.", RecordType::A);
        check_positive(&r, &["a.b.wild.example.com. 3600 A 192.0.2.7"]);
        let r = s.ask(Ask::new("x.wild.example.com.", RecordType::A).dnssec());
        check_positive(
            &r,
            &[
                "x.wild.example.com. 3600 A 192.0.2.7",
                "x.wild.example.com. 3600 RRSIG",
            ],
        );
        // The wildcard itself, queried directly.
        check_positive(
            &s.q("*.wild.example.com.", RecordType::A),
            &["*.wild.example.com. 3600 A 192.0.2.7"],
        );
        // Wildcard NODATA.
        let r = s.q("x.wild.example.com.", RecordType::TXT);
        assert_eq!(r.rcode(), ResponseCode::NoError);
        assert_eq!(r.authority(), [SOA_NEG]);
        // An existing name blocks the wildcard for itself only.
        check_positive(
            &s.q("www.uwild.example.com.", RecordType::A),
            &["www.uwild.example.com. 3600 A 192.0.2.11"],
        );
        check_positive(
            &s.q("x.uwild.example.com.", RecordType::A),
            &["x.uwild.example.com. 3600 A 192.0.2.9"],
        );
        // Below an existing name the wildcard does not apply (closest encloser is www.uwild).
        let r = s.q("x.www.uwild.example.com.", RecordType::A);
        assert_eq!(r.rcode(), ResponseCode::NXDomain);
        // `*.t` is an empty non-terminal wildcard (b.*.t exists): NODATA.
        let r = s.q("a.t.example.com.", RecordType::A);
        assert_eq!(r.rcode(), ResponseCode::NoError);
        assert!(r.answer().is_empty());
        assert_eq!(r.authority(), [SOA_NEG]);
        // A wildcard CNAME leading out of the zone: the CNAME only.
        let r = s.q("www.cnamewild.example.com.", RecordType::A);
        check_positive(
            &r,
            &["www.cnamewild.example.com. 3600 CNAME www.example.org."],
        );
        assert!(r.authority().is_empty());
    });
}

#[test]
fn cname_and_dname() {
    for_each_backend("example.com.", ZONE, |_, s| {
        // CNAME chains are followed inside the zone (RFC 1034 §4.3.2 step 3a).
        let r = s.q("cname.example.com.", RecordType::A);
        check_positive(
            &r,
            &[
                "cname.example.com. 3600 CNAME www.example.com.",
                "www.example.com. 3600 A 192.0.2.80",
            ],
        );
        // The chain ends in NXDOMAIN: that rcode, SOA in authority (RFC 6604 §2.1).
        let r = s.q("cnamenxdom.example.com.", RecordType::A);
        assert_eq!(r.rcode(), ResponseCode::NXDomain);
        assert!(r.aa());
        assert_eq!(
            r.answer(),
            ["cnamenxdom.example.com. 3600 CNAME nxdomain.example.com."]
        );
        assert_eq!(r.authority(), [SOA_NEG]);
        // Out of zone: the CNAME alone.
        let r = s.q("cnameout.example.com.", RecordType::A);
        check_positive(&r, &["cnameout.example.com. 3600 CNAME www.example.org."]);
        assert!(r.authority().is_empty());
        // qtype CNAME is not chased.
        check_positive(
            &s.q("cname.example.com.", RecordType::CNAME),
            &["cname.example.com. 3600 CNAME www.example.com."],
        );
        // DNAME: the DNAME plus a synthesized CNAME (RFC 6672 §3.1), then the
        // target, which does not exist here.
        let r = s.q("www.dname.example.com.", RecordType::A);
        assert_eq!(r.rcode(), ResponseCode::NXDomain);
        assert_eq!(
            r.answer(),
            [
                "dname.example.com. 3600 DNAME somethinglong.dnametarget.example.com.",
                "www.dname.example.com. 3600 CNAME www.somethinglong.dnametarget.example.com."
            ]
        );
        assert_eq!(r.authority(), [SOA_NEG]);
        // A substituted name over 255 octets: YXDOMAIN with the DNAME only (RFC 6672 §2.2).
        let long = format!("{}.dname.example.com.", vec!["a".repeat(55); 4].join("."));
        let r = s.q(&long, RecordType::A);
        assert_eq!(r.rcode(), ResponseCode::YXDomain);
        assert_eq!(
            r.answer(),
            ["dname.example.com. 3600 DNAME somethinglong.dnametarget.example.com."]
        );
    });
}

#[test]
fn message_level_rules() {
    for_each_backend("example.com.", ZONE, |_, s| {
        // qname case is preserved in the question and the answer.
        let r = s.q("WwW.ExAmPlE.cOm.", RecordType::A);
        assert_eq!(r.msg.queries[0].name().to_string(), "WwW.ExAmPlE.cOm.");
        assert_eq!(r.answer(), ["WwW.ExAmPlE.cOm. 3600 A 192.0.2.80"]);
        // RD is copied, RA never set.
        let mut q = Ask::new("www.example.com.", RecordType::A).wire();
        q[2] |= 0x01;
        let r = s.raw(&q, Transport::Udp).expect("reply");
        assert!(r.msg.metadata.recursion_desired && !r.msg.metadata.recursion_available);

        // EDNS: OPT in the reply with our size and DO echoed (RFC 6891 §6.1.1).
        let r = s.ask(Ask::new("www.example.com.", RecordType::A).dnssec());
        let edns = r.msg.edns.as_ref().expect("OPT");
        assert_eq!(edns.max_payload(), 1232);
        assert!(edns.flags().dnssec_ok);
        assert!(s.q("www.example.com.", RecordType::A).msg.edns.is_none());
        // EDNS version 1: BADVERS with an OPT (RFC 6891 §6.1.3).
        let r = s.ask(Ask::new("www.example.com.", RecordType::A).edns(1232, 1));
        // Code 16 is BADVERS in an EDNS context (hickory names it BADSIG).
        assert_eq!(u16::from(r.rcode()), 16);
        assert!(r.msg.edns.is_some());
        assert!(r.answer().is_empty());

        // Opcodes other than QUERY, NOTIFY and UPDATE: NOTIMP.
        for opcode in [1u8, 2, 3, 6, 15] {
            let mut q = Ask::new("example.com.", RecordType::SOA).wire();
            q[2] = (q[2] & 0x87) | (opcode << 3);
            let r = s.raw(&q, Transport::Udp).expect("reply");
            assert_eq!(r.rcode(), ResponseCode::NotImp, "opcode {opcode}");
        }
        // NOTIFY for a zone that is not a secondary zone here: REFUSED.
        let mut q = Ask::new("example.com.", RecordType::SOA).wire();
        q[2] = (q[2] & 0x87) | (4 << 3);
        let r = s.raw(&q, Transport::Udp).expect("reply");
        assert_eq!(r.rcode(), ResponseCode::Refused, "NOTIFY");
        // QDCOUNT 0 and 2: FORMERR.
        for qd in [0u8, 2] {
            let mut q = Ask::new("example.com.", RecordType::SOA).wire();
            q[5] = qd;
            let r = s.raw(&q, Transport::Udp).expect("reply");
            assert_eq!(r.rcode(), ResponseCode::FormErr, "qdcount {qd}");
        }
        // Responses and runts are dropped.
        let mut resp = Ask::new("example.com.", RecordType::SOA).wire();
        resp[2] |= 0x80;
        assert!(s.raw(&resp, Transport::Udp).is_none());
        assert!(s.raw(&resp[..11], Transport::Udp).is_none());
        // Truncated question: FORMERR; every prefix of a valid query is handled.
        let q = Ask::new("www.example.com.", RecordType::A).dnssec().wire();
        for len in 12..q.len() {
            let mut out = Vec::new();
            assert!(
                s.p.handle(&q[..len], Transport::Udp, LOCAL, &mut out) == dispatch::Reply::Message
            );
            assert_eq!(out[3] & 0x0F, 1, "prefix {len}: FORMERR");
        }

        // Zone transfers are refused (no transfer allow-list is configured).
        assert_eq!(
            s.q("example.com.", RecordType::AXFR).rcode(),
            ResponseCode::Refused
        );
        // Classes other than IN and CH: REFUSED.
        let r = s.ask(Ask::new("example.com.", RecordType::SOA).class(DNSClass::HS));
        assert_eq!(r.rcode(), ResponseCode::Refused);
    });
}

#[test]
fn rrsig_and_chaos_queries() {
    for_each_backend("example.com.", ZONE, |_, s| {
        // qtype RRSIG: the signatures at the name.
        let r = s.q("www.example.com.", RecordType::RRSIG);
        check_positive(
            &r,
            &["www.example.com. 3600 RRSIG", "www.example.com. 3600 RRSIG"],
        );
        // CH TXT version.bind answered as configured; hostname.bind refused.
        let r = s.ask(Ask::new("version.bind.", RecordType::TXT).class(DNSClass::CH));
        assert_eq!(r.rcode(), ResponseCode::NoError);
        assert_eq!(r.answer(), ["version.bind. 0 TXT authd test"]);
        let r = s.ask(Ask::new("hostname.bind.", RecordType::TXT).class(DNSClass::CH));
        assert_eq!(r.rcode(), ResponseCode::Refused);
    });
}

#[test]
fn truncation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("big.zone");
    let mut text = String::from("$TTL 300\n@ SOA ns hm 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n");
    for i in 0..60 {
        text.push_str(&format!("big A 10.0.0.{i}\n"));
    }
    std::fs::write(&file, text).expect("write");
    for composition in COMPOSITIONS {
        let sub = tempfile::tempdir().expect("tempdir");
        let s = server(composition.build(sub.path(), "example.", &file));
        // 60 A records need 60 × 16 bytes: over 512, TC set and nothing partial.
        let r = s.q("big.example.", RecordType::A);
        assert!(r.tc());
        assert!(r.answer().is_empty());
        assert!(r.wire_len <= 512);
        // With EDNS 1232 it fits.
        let r = s.ask(Ask::new("big.example.", RecordType::A).edns(4096, 0));
        assert!(!r.tc());
        assert_eq!(r.answer().len(), 60);
        assert!(r.wire_len <= 1232);
        // Over TCP there is no 512-byte limit.
        let r = s.ask(Ask {
            transport: Transport::Tcp,
            ..Ask::new("big.example.", RecordType::A)
        });
        assert!(!r.tc());
        assert_eq!(r.answer().len(), 60);
    }
}

/// DNSSEC denial (RFC 4035 §3.1.3) on BIND 10's NSEC-signed query zone: the
/// cases of its `query_unittest.cc` with the DO bit (numbers from
/// research/bind10.md §b.5), with authd's minimal authority section (no apex NS
/// beside positive answers).
#[test]
fn nsec_proofs() {
    const SOA: &str = "example.com. 0 SOA . . 1 0 0 0 0";
    const SIG: &str = "example.com. 0 RRSIG";
    for_each_backend("example.com.", ZONE, |backend, s| {
        let ask = |q: &str, t: RecordType| s.ask(Ask::new(q, t).dnssec());
        // #16: NXDOMAIN: the NSEC covering qname and the one denying *.example.com.
        let r = ask("nxdomain.example.com.", RecordType::A);
        assert_eq!(r.rcode(), ResponseCode::NXDomain, "{backend}");
        assert_eq!(
            r.authority(),
            [
                SOA,
                SIG,
                "noglue.example.com. 3600 NSEC nonsec.example.com.",
                "noglue.example.com. 3600 RRSIG",
                "example.com. 3600 NSEC cname.example.com.",
                "example.com. 3600 RRSIG"
            ],
            "{backend}"
        );
        // #17: the closest encloser is the empty non-terminal no.example.com.
        let r = ask("!.no.example.com.", RecordType::A);
        assert_eq!(
            r.authority(),
            [
                SOA,
                SIG,
                "mx.example.com. 3600 NSEC &.no.example.com.",
                "mx.example.com. 3600 RRSIG",
                "\\&.no.example.com. 3600 NSEC nz.no.example.com.",
                "\\&.no.example.com. 3600 RRSIG"
            ],
            "{backend}"
        );
        // #18: one NSEC proves both the name and the wildcard absent.
        let r = ask("nx.no.example.com.", RecordType::A);
        assert_eq!(
            r.authority(),
            [
                SOA,
                SIG,
                "\\&.no.example.com. 3600 NSEC nz.no.example.com.",
                "\\&.no.example.com. 3600 RRSIG"
            ],
            "{backend}"
        );
        // #20: NODATA: the name's own NSEC.
        let r = ask("www.example.com.", RecordType::TXT);
        assert_eq!(
            r.authority(),
            [
                SOA,
                SIG,
                "www.example.com. 3600 NSEC example.com.",
                "www.example.com. 3600 RRSIG"
            ]
        );
        // #21: empty non-terminal: the NSEC whose span covers it.
        let r = ask("no.example.com.", RecordType::A);
        assert_eq!(
            r.authority(),
            [
                SOA,
                SIG,
                "mx.example.com. 3600 NSEC &.no.example.com.",
                "mx.example.com. 3600 RRSIG"
            ]
        );
        // #22: a name without an NSEC: nothing to prove with.
        assert_eq!(
            ask("nonsec.example.com.", RecordType::TXT).authority(),
            [SOA, SIG]
        );
        // #23: wildcard answer: the NSEC proving qname itself absent.
        let r = ask("www.wild.example.com.", RecordType::A);
        assert_eq!(
            r.answer(),
            [
                "www.wild.example.com. 3600 A 192.0.2.7",
                "www.wild.example.com. 3600 RRSIG"
            ]
        );
        assert_eq!(
            r.authority(),
            [
                "*.wild.example.com. 3600 NSEC www.example.com.",
                "*.wild.example.com. 3600 RRSIG"
            ]
        );
        // #24: wildcard CNAME.
        let r = ask("www.cnamewild.example.com.", RecordType::A);
        assert_eq!(
            r.answer(),
            [
                "www.cnamewild.example.com. 3600 CNAME www.example.org.",
                "www.cnamewild.example.com. 3600 RRSIG"
            ]
        );
        assert_eq!(
            r.authority(),
            [
                "*.cnamewild.example.com. 3600 NSEC delegation.example.com.",
                "*.cnamewild.example.com. 3600 RRSIG"
            ]
        );
        // #25: wildcard NODATA, one NSEC for both facts.
        let r = ask("www.wild.example.com.", RecordType::TXT);
        assert_eq!(
            r.authority(),
            [
                SOA,
                SIG,
                "*.wild.example.com. 3600 NSEC www.example.com.",
                "*.wild.example.com. 3600 RRSIG"
            ]
        );
        // #26: wildcard NODATA with two NSECs.
        let r = ask("www1.uwild.example.com.", RecordType::TXT);
        assert_eq!(
            r.authority(),
            [
                SOA,
                SIG,
                "www.uwild.example.com. 3600 NSEC *.wild.example.com.",
                "www.uwild.example.com. 3600 RRSIG",
                "*.uwild.example.com. 3600 NSEC www.uwild.example.com.",
                "*.uwild.example.com. 3600 RRSIG"
            ]
        );
        // #27: `*.t` is an empty non-terminal wildcard.
        let r = ask("a.t.example.com.", RecordType::A);
        assert_eq!(
            r.authority(),
            [
                SOA,
                SIG,
                "b.*.t.example.com. 3600 NSEC *.uwild.example.com.",
                "b.*.t.example.com. 3600 RRSIG",
                "t.example.com. 3600 NSEC b.*.t.example.com.",
                "t.example.com. 3600 RRSIG"
            ]
        );
        // #12-#14: referrals: no DS and no NSEC; signed DS; NSEC at the cut.
        let r = ask("www.nosec-delegation.example.com.", RecordType::A);
        assert!(!r.aa());
        assert_eq!(
            r.authority(),
            ["nosec-delegation.example.com. 3600 NS ns.nosec.example.net."]
        );
        let r = ask("foo.signed-delegation.example.com.", RecordType::A);
        assert_eq!(
            r.authority(),
            [
                "signed-delegation.example.com. 3600 NS ns.example.net.",
                "signed-delegation.example.com. 3600 DS",
                "signed-delegation.example.com. 3600 RRSIG"
            ]
        );
        let r = ask("foo.unsigned-delegation.example.com.", RecordType::A);
        assert_eq!(
            r.authority(),
            [
                "unsigned-delegation.example.com. 3600 NS ns.example.net.",
                "unsigned-delegation.example.com. 3600 NSEC unsigned-delegation-optout.example.com.",
                "unsigned-delegation.example.com. 3600 RRSIG"
            ]
        );
        // #39: DS at an unsigned delegation, parent side: NODATA with the cut's NSEC.
        let r = ask("unsigned-delegation.example.com.", RecordType::DS);
        assert!(r.aa());
        assert_eq!(
            r.authority(),
            [
                SOA,
                SIG,
                "unsigned-delegation.example.com. 3600 NSEC unsigned-delegation-optout.example.com.",
                "unsigned-delegation.example.com. 3600 RRSIG"
            ]
        );
        // #40: DS at the apex with no parent served: the apex NSEC.
        let r = ask("example.com.", RecordType::DS);
        assert_eq!(
            r.authority(),
            [
                SOA,
                SIG,
                "example.com. 3600 NSEC cname.example.com.",
                "example.com. 3600 RRSIG"
            ]
        );
        // Without DO: no proofs at all.
        assert_eq!(
            s.q("nxdomain.example.com.", RecordType::A).authority(),
            [SOA_NEG]
        );
    });
}

const RFC5155_ZONE: &str = "tests/data/rfc5155-example.zone.signed";

/// `owner TYPE` for a record, `owner RRSIG COVERED labels=N` for a signature and
/// `owner TYPE rdata` for address and name records: enough to tell the RFC 5155
/// Appendix B sections apart by owner hash and type.
fn rr_key(r: &Record) -> String {
    let mut wire = Vec::new();
    let mut enc = hickory_proto::serialize::binary::BinEncoder::new(&mut wire);
    hickory_proto::serialize::binary::BinEncodable::emit(&r.data, &mut enc).expect("emit");
    let owner = r.name.to_string().to_ascii_lowercase();
    match r.record_type() {
        RecordType::RRSIG => {
            let covered = RecordType::from(u16::from_be_bytes([wire[0], wire[1]]));
            format!("{owner} RRSIG {covered} labels={}", wire[3])
        }
        RecordType::A | RecordType::AAAA | RecordType::NS | RecordType::MX => {
            format!("{owner} {} {}", r.record_type(), r.data)
        }
        t => format!("{owner} {t}"),
    }
}

fn keys(records: &[Record]) -> Vec<String> {
    let mut v: Vec<String> = records.iter().map(rr_key).collect();
    v.sort();
    v
}

fn sorted(items: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = items.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

const H_APEX: &str = "0p9mhaveqvm6t7vbl5lop2u3t2rp3tom.example.";
const H_NS1: &str = "2t7b4g4vsa5smi47k61mv5bv1a22bojr.example.";
const H_A: &str = "35mthgpgcu1qg68fab165klnsnk3dpvl.example.";
const H_XW: &str = "b4um86eghhds6nea196smvmlo4ors995.example.";
const H_YW: &str = "ji6neoaepv8b5o6k4ev33abha8ht9fgc.example.";
const H_W: &str = "k8udemvp1j2f7eg6jebps17vp3n8i58h.example.";
const H_XXW: &str = "q04jkcevqvmu85r014c7dkba38o0ji5r.example.";
const H_STAR_W: &str = "r53bq7cc2uvmubfu5ocmm6pers9tk9en.example.";

/// An NSEC3 RR and its signature, as [`rr_key`] shows them.
fn nsec3(owner: &str) -> [String; 2] {
    [
        format!("{owner} NSEC3"),
        format!("{owner} RRSIG NSEC3 labels=2"),
    ]
}

fn with_soa(mut v: Vec<String>) -> Vec<String> {
    v.push("example. SOA".into());
    v.push("example. RRSIG SOA labels=1".into());
    v.sort();
    v
}

fn nsec3s(owners: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = owners.iter().flat_map(|o| nsec3(o)).collect();
    v.sort();
    v
}

/// RFC 5155 Appendix B on its Appendix A zone (real SHA-1 hashes, opt-out set on
/// every NSEC3): each response's authority section holds exactly the NSEC3 RRs
/// the RFC lists (compared as sets: the RFC does not fix their order), with
/// their RRSIGs. authd's one policy difference from the RFC's responses: no
/// apex NS RRset beside a positive answer (B.4).
#[test]
fn nsec3_rfc5155_appendix_b() {
    for_each_backend("example.", RFC5155_ZONE, |backend, s| {
        let ask = |q: &str, t: RecordType| s.ask(Ask::new(q, t).dnssec());

        // B.1 Name Error: a.c.x.w.example. Closest encloser x.w.example (match
        // b4um…), next closer c.x.w.example (covered by 0p9m…), wildcard
        // *.x.w.example (covered by 35mt…).
        let r = ask("a.c.x.w.example.", RecordType::A);
        assert_eq!(r.rcode(), ResponseCode::NXDomain, "{backend}");
        assert!(r.aa(), "{backend}");
        assert!(r.answer().is_empty(), "{backend}");
        assert_eq!(
            keys(&r.msg.authorities),
            with_soa(nsec3s(&[H_APEX, H_XW, H_A])),
            "B.1 {backend}"
        );

        // B.2 No Data: ns1.example. MX; the NSEC3 matching ns1.example.
        let r = ask("ns1.example.", RecordType::MX);
        assert_eq!(r.rcode(), ResponseCode::NoError, "{backend}");
        assert!(r.answer().is_empty(), "{backend}");
        assert_eq!(
            keys(&r.msg.authorities),
            with_soa(nsec3s(&[H_NS1])),
            "B.2 {backend}"
        );

        // B.2.1 No Data, empty non-terminal y.w.example: its own NSEC3 (empty
        // type bitmap).
        let r = ask("y.w.example.", RecordType::A);
        assert_eq!(r.rcode(), ResponseCode::NoError, "{backend}");
        assert_eq!(
            keys(&r.msg.authorities),
            with_soa(nsec3s(&[H_YW])),
            "B.2.1 {backend}"
        );

        // B.3 Referral to the opt-out unsigned zone c.example: NS, the NSEC3
        // matching the closest provable encloser (example.) and the opt-out
        // NSEC3 covering the next closer c.example; glue in additional.
        let r = ask("mc.c.example.", RecordType::MX);
        assert_eq!(r.rcode(), ResponseCode::NoError, "{backend}");
        assert!(!r.aa(), "{backend}");
        assert!(r.answer().is_empty(), "{backend}");
        let mut want = nsec3s(&[H_APEX, H_A]);
        want.push("c.example. NS ns1.c.example.".into());
        want.push("c.example. NS ns2.c.example.".into());
        want.sort();
        assert_eq!(keys(&r.msg.authorities), want, "B.3 {backend}");
        assert_eq!(
            keys(&r.msg.additionals),
            sorted(&["ns1.c.example. A 192.0.2.7", "ns2.c.example. A 192.0.2.8"]),
            "B.3 {backend}"
        );

        // B.4 Wildcard expansion: a.z.w.example. MX from *.w.example; the RRSIG
        // keeps labels=2 (the wildcard's), and the NSEC3 covering the next
        // closer z.w.example proves no closer match.
        let r = ask("a.z.w.example.", RecordType::MX);
        assert_eq!(r.rcode(), ResponseCode::NoError, "{backend}");
        assert!(r.aa(), "{backend}");
        assert_eq!(
            keys(&r.msg.answers),
            sorted(&[
                "a.z.w.example. MX 1 ai.example.",
                "a.z.w.example. RRSIG MX labels=2"
            ]),
            "B.4 {backend}"
        );
        assert_eq!(keys(&r.msg.authorities), nsec3s(&[H_XXW]), "B.4 {backend}");
        assert_eq!(
            keys(&r.msg.additionals),
            sorted(&[
                "ai.example. A 192.0.2.9",
                "ai.example. RRSIG A labels=2",
                "ai.example. AAAA 2001:db8::f00:baa9",
                "ai.example. RRSIG AAAA labels=2"
            ]),
            "B.4 {backend}"
        );

        // B.5 Wildcard No Data: a.z.w.example. AAAA: closest encloser w.example
        // (match k8ud…), next closer z.w.example (cover q04j…), the wildcard
        // *.w.example (match r53b…, no AAAA in its bitmap).
        let r = ask("a.z.w.example.", RecordType::AAAA);
        assert_eq!(r.rcode(), ResponseCode::NoError, "{backend}");
        assert!(r.answer().is_empty(), "{backend}");
        assert_eq!(
            keys(&r.msg.authorities),
            with_soa(nsec3s(&[H_W, H_XXW, H_STAR_W])),
            "B.5 {backend}"
        );

        // B.6 DS Child Zone No Data: example. DS (no parent served): the apex
        // NSEC3, whose bitmap has SOA and no DS.
        let r = ask("example.", RecordType::DS);
        assert_eq!(r.rcode(), ResponseCode::NoError, "{backend}");
        assert!(r.aa(), "{backend}");
        assert_eq!(
            keys(&r.msg.authorities),
            with_soa(nsec3s(&[H_APEX])),
            "B.6 {backend}"
        );
    });
}

/// More NSEC3 cases on the RFC 5155 zone: a signed referral (DS), DS at a cut
/// answered from the parent, an ordinary name that looks like a hash, and a
/// query for an NSEC3 owner name (RFC 5155 §7.2.9: as if it did not exist).
#[test]
fn nsec3_referrals_and_owner_names() {
    for_each_backend("example.", RFC5155_ZONE, |backend, s| {
        let ask = |q: &str, t: RecordType| s.ask(Ask::new(q, t).dnssec());

        // Referral to the signed child a.example: NS plus DS and its RRSIG.
        let r = ask("ns1.a.example.", RecordType::A);
        assert!(!r.aa(), "{backend}");
        assert_eq!(
            keys(&r.msg.authorities),
            sorted(&[
                "a.example. NS ns1.a.example.",
                "a.example. NS ns2.a.example.",
                "a.example. DS",
                "a.example. RRSIG DS labels=2"
            ]),
            "{backend}"
        );

        // DS at the cut: an authoritative answer from the parent side.
        let r = ask("a.example.", RecordType::DS);
        assert!(r.aa(), "{backend}");
        assert_eq!(
            keys(&r.msg.answers),
            sorted(&["a.example. DS", "a.example. RRSIG DS labels=2"]),
            "{backend}"
        );

        // DS at the opt-out unsigned cut c.example: NODATA with the closest
        // provable encloser proof (RFC 5155 §7.2.4).
        let r = ask("c.example.", RecordType::DS);
        assert!(r.aa(), "{backend}");
        assert_eq!(r.rcode(), ResponseCode::NoError, "{backend}");
        assert_eq!(
            keys(&r.msg.authorities),
            with_soa(nsec3s(&[H_APEX, H_A])),
            "{backend}"
        );

        // An ordinary A record whose owner label looks like an NSEC3 hash.
        let r = ask(H_NS1, RecordType::A);
        assert_eq!(r.rcode(), ResponseCode::NoError, "{backend}");
        assert_eq!(
            keys(&r.msg.answers),
            sorted(&[
                &format!("{H_NS1} A 192.0.2.127"),
                &format!("{H_NS1} RRSIG A labels=2")
            ]),
            "{backend}"
        );

        // The NSEC3 owner of the apex: no such name (§7.2.9), proven like any
        // other name error.
        let r = ask(H_APEX, RecordType::NSEC3);
        assert_eq!(r.rcode(), ResponseCode::NXDomain, "{backend}");
        assert!(r.answer().is_empty(), "{backend}");
        assert!(
            keys(&r.msg.authorities).contains(&"example. SOA".to_string()),
            "{backend}"
        );
        assert!(
            r.msg
                .authorities
                .iter()
                .all(|a| !a.name.to_string().eq_ignore_ascii_case(H_APEX)
                    || a.record_type() != RecordType::A),
            "{backend}"
        );
    });
}

/// A tiny signed-looking root zone (fake signatures: only the proofs' shape is
/// checked here): RRsets whose RRSIGs have different TTLs, and an NSEC chain
/// `.` → `aaa.` → `zz.` → `.`.
const TINY_ROOT: &str = "\
. 86400 IN SOA a.root-servers.net. nstld.verisign-grs.com. 1 1800 900 604800 86400
. 86400 IN RRSIG SOA 8 0 86400 20201101190000 20201019180000 26116 . AAAA
. 518400 IN NS a.root-servers.net.
. 518400 IN RRSIG NS 8 0 518400 20201101190000 20201019180000 26116 . AAAA
. 86400 IN NSEC aaa. NS SOA RRSIG NSEC
. 86400 IN RRSIG NSEC 8 0 86400 20201101190000 20201019180000 26116 . AAAA
aaa. 3600 IN TXT \"a\"
aaa. 3600 IN RRSIG TXT 8 1 3600 20201101190000 20201019180000 26116 . AAAA
aaa. 86400 IN NSEC zz. TXT RRSIG NSEC
aaa. 86400 IN RRSIG NSEC 8 1 86400 20201101190000 20201019180000 26116 . AAAA
zz. 3600 IN TXT \"z\"
zz. 3600 IN RRSIG TXT 8 1 3600 20201101190000 20201019180000 26116 . AAAA
zz. 86400 IN NSEC . TXT RRSIG NSEC
zz. 86400 IN RRSIG NSEC 8 1 86400 20201101190000 20201019180000 26116 . AAAA
";

/// Regression (found against Knot DNS and Unbound on the IANA root zone): the
/// sqlite3 backend's reversed-name order puts "*." before ".", so the NSEC
/// denying the wildcard `*.` of an NXDOMAIN at the root was the last NSEC of
/// the zone (`zz.`, which does not cover `*.`) instead of the apex NSEC, and
/// validators rejected the name error as bogus.
#[test]
fn root_wildcard_nsec_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("root.zone");
    std::fs::write(&file, TINY_ROOT).expect("write");
    let path = file.to_str().expect("utf-8 path");
    for_each_backend(".", path, |backend, s| {
        let r = s.ask(Ask::new("nx.", RecordType::A).dnssec());
        assert_eq!(r.rcode(), ResponseCode::NXDomain, "{backend}");
        assert_eq!(
            r.authority(),
            [
                ". 86400 SOA a.root-servers.net. nstld.verisign-grs.com. 1 1800 900 604800 86400",
                ". 86400 RRSIG",
                "aaa. 86400 NSEC zz.",
                "aaa. 86400 RRSIG",
                ". 86400 NSEC aaa.",
                ". 86400 RRSIG"
            ],
            "{backend}"
        );
        // After the last name: zz.'s NSEC (wrapping to the apex) covers it,
        // the apex NSEC covers `*.`.
        let r = s.ask(Ask::new("zzz.", RecordType::A).dnssec());
        assert_eq!(
            r.authority()[2..],
            [
                "zz. 86400 NSEC .",
                "zz. 86400 RRSIG",
                ". 86400 NSEC aaa.",
                ". 86400 RRSIG"
            ],
            "{backend}"
        );
    });
}

/// Regression (found against Knot DNS): a qtype RRSIG answer gave every RRSIG
/// at the name one TTL, the first covered set's; each RRSIG keeps the TTL of
/// the RRset it covers (RFC 4034 §3).
#[test]
fn rrsig_query_keeps_each_signature_ttl() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("root.zone");
    std::fs::write(&file, TINY_ROOT).expect("write");
    let path = file.to_str().expect("utf-8 path");
    for_each_backend(".", path, |backend, s| {
        let r = s.ask(Ask::new(".", RecordType::RRSIG).dnssec());
        assert_eq!(r.rcode(), ResponseCode::NoError, "{backend}");
        let mut got: Vec<(String, u32)> =
            r.msg.answers.iter().map(|a| (rr_key(a), a.ttl)).collect();
        got.sort();
        assert_eq!(
            got,
            [
                (". RRSIG NS labels=0".to_string(), 518400),
                (". RRSIG NSEC labels=0".to_string(), 86400),
                (". RRSIG SOA labels=0".to_string(), 86400),
            ],
            "{backend}"
        );
    });
}

/// The DNSSEC cases above through authd's hot-spot cache (`authd-cache`, which
/// runs the shared lookup and proof code over its cached node view): every
/// reply, cold and warm, is the same message as the uncached backend's.
#[test]
fn dnssec_through_hot_spot_cache() {
    use authd_cache::{HotSpotCache, Slots};
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("root.zone");
    std::fs::write(&root, TINY_ROOT).expect("write");
    let root = root.to_str().expect("utf-8 path").to_string();
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, RecordType)]);
    let cases: [Case<'_>; 3] = [
        (
            "example.",
            RFC5155_ZONE,
            &[
                ("a.c.x.w.example.", RecordType::A),
                ("ns1.example.", RecordType::MX),
                ("y.w.example.", RecordType::A),
                ("mc.c.example.", RecordType::MX),
                ("a.z.w.example.", RecordType::MX),
                ("a.z.w.example.", RecordType::AAAA),
                ("example.", RecordType::DS),
                ("a.example.", RecordType::DS),
                ("c.example.", RecordType::DS),
                ("ns1.a.example.", RecordType::A),
                ("ai.example.", RecordType::RRSIG),
                (H_APEX, RecordType::NSEC3),
            ],
        ),
        (
            "example.com.",
            ZONE,
            &[
                ("nxdomain.example.com.", RecordType::A),
                ("!.no.example.com.", RecordType::A),
                ("no.example.com.", RecordType::A),
                ("www.wild.example.com.", RecordType::A),
                ("www1.uwild.example.com.", RecordType::TXT),
                ("a.t.example.com.", RecordType::A),
                ("foo.unsigned-delegation.example.com.", RecordType::A),
                ("unsigned-delegation.example.com.", RecordType::DS),
            ],
        ),
        (
            ".",
            &root,
            &[
                ("nx.", RecordType::A),
                ("zzz.", RecordType::A),
                (".", RecordType::RRSIG),
            ],
        ),
    ];
    for (origin, file, queries) in cases {
        for name in ["sqlite3", "memory", "memory-from-sqlite3"] {
            let composition = COMPOSITIONS
                .iter()
                .find(|c| c.to_string() == name)
                .expect("composition");
            let sub = tempfile::tempdir().expect("tempdir");
            let list = composition.build(sub.path(), origin, Path::new(file));
            let plain = Arc::clone(&list.sources()[0]);
            let cached: Arc<dyn DataSource> =
                Arc::new(HotSpotCache::new(plain.clone(), Slots::from_count(64)));
            let server = |s: Arc<dyn DataSource>| server(SourceList::new(vec![s]));
            let (plain, cached) = (server(plain), server(cached));
            for round in ["cold", "warm"] {
                for &(qname, qtype) in queries {
                    let wire = Ask::new(qname, qtype).dnssec().wire();
                    let (mut a, mut b) = (Vec::new(), Vec::new());
                    assert!(
                        plain.p.handle(&wire, Transport::Udp, LOCAL, &mut a)
                            == dispatch::Reply::Message
                    );
                    assert!(
                        cached.p.handle(&wire, Transport::Udp, LOCAL, &mut b)
                            == dispatch::Reply::Message
                    );
                    // The same message; name compression may differ (cached
                    // replies are rendered from templates).
                    assert_eq!(
                        Message::from_vec(&a).expect("decodes"),
                        Message::from_vec(&b).expect("decodes"),
                        "{qname} {qtype} {name} {round}"
                    );
                }
            }
        }
    }
}

/// Replies rendered from templates (memory backend) stay right when different
/// queries place the same RRsets: NODATA and NXDOMAIN share the SOA, names of
/// different lengths and cases share a referral or a negative answer.
#[test]
fn reused_renderings_keep_rcode_case_and_names() {
    // Three rounds: a template is built on a reply's first sighting, or its
    // second where a thread's hit rate is low (the admission doorkeeper),
    // and used from the third at the latest.
    for_each_backend("example.com.", ZONE, |backend, s| {
        for _ in 0..3 {
            let r = s.q("www.example.com.", RecordType::TXT);
            assert_eq!(r.rcode(), ResponseCode::NoError, "{backend}: NODATA");
            assert_eq!(r.authority(), [SOA_NEG]);
            let r = s.q("nothere.example.com.", RecordType::TXT);
            assert_eq!(
                r.rcode(),
                ResponseCode::NXDomain,
                "{backend}: NXDOMAIN after NODATA"
            );
            assert_eq!(r.authority(), [SOA_NEG]);
            let r = s.q(
                "A.Much.Longer.Name.That.Is.Not.Here.example.com.",
                RecordType::TXT,
            );
            assert_eq!(r.rcode(), ResponseCode::NXDomain);
            assert_eq!(r.authority(), [SOA_NEG]);
            assert_eq!(
                r.msg.queries[0].name().to_string(),
                "A.Much.Longer.Name.That.Is.Not.Here.example.com."
            );
        }
        for qname in [
            "x.delegation.example.com.",
            "A.VERY.long.name.below.the.cut.Delegation.example.com.",
            "delegation.example.com.",
        ]
        .repeat(3)
        {
            let r = s.q(qname, RecordType::A);
            assert!(!r.aa(), "{backend} {qname}");
            assert_eq!(r.authority().len(), 4, "{qname}");
            assert!(
                r.msg.authorities.iter().all(|a| a
                    .name
                    .to_string()
                    .eq_ignore_ascii_case("delegation.example.com.")),
                "{qname}: {:?}",
                r.authority()
            );
            // Compression against the question may carry its case into glue names.
            let additional: Vec<String> = r
                .additional()
                .iter()
                .map(|a| a.to_ascii_lowercase())
                .collect();
            assert_eq!(additional, ADDRS.map(str::to_ascii_lowercase), "{qname}");
        }
        // The same answer for different cases of the qname.
        for qname in ["www.example.com.", "WWW.EXAMPLE.COM.", "wWw.ExAmPlE.cOm."].repeat(2) {
            let r = s.q(qname, RecordType::A);
            assert_eq!(r.answer(), [format!("{qname} 3600 A 192.0.2.80")]);
        }
        // The apex SOA as the answer to SOA and as the authority of a NODATA at
        // the apex: the same RRset in two sections, never one rendering for both.
        for _ in 0..3 {
            let r = s.q("example.com.", RecordType::SOA);
            assert_eq!(r.rcode(), ResponseCode::NoError, "{backend}: SOA");
            assert_eq!(
                r.answer().len(),
                1,
                "{backend}: SOA answer {:?}",
                r.answer()
            );
            assert!(r.answer()[0].contains(" SOA "), "{:?}", r.answer());
            let r = s.q("example.com.", RecordType::SRV);
            assert_eq!(r.rcode(), ResponseCode::NoError, "{backend}: apex NODATA");
            assert_eq!(
                r.answer(),
                Vec::<String>::new(),
                "{backend}: apex NODATA answer"
            );
            assert_eq!(r.authority(), [SOA_NEG], "{backend}: apex NODATA authority");
        }
    });
}

/// A `zones = [...]` restriction changes which zones are served, never how:
/// the source answering a restricted zone has every capability of the same
/// source unrestricted (node view, immutable RRsets), and where RRsets are
/// immutable, two referrals under one cut share the cut's NS RRset — what
/// reply templates and the cache's node-level entries rely on. (A filtering
/// wrapper that dropped `with_node_store` once made the cache fall back to
/// per-qname entries, and a restricted root zone ran at 0.46x.)
#[test]
fn zone_restriction_keeps_capabilities() {
    let origin: Name = "example.com.".parse().expect("origin");
    let capabilities = |c: &Composition| {
        let dir = tempfile::tempdir().expect("tempdir");
        let list = c.build(dir.path(), "example.com.", Path::new(ZONE));
        let served: Vec<Name> = list
            .zones()
            .into_iter()
            .flat_map(|(_, zones)| zones.expect("zones"))
            .map(|z| z.origin)
            .collect();
        assert_eq!(served, std::slice::from_ref(&origin), "{c}: zones served");
        let (source, zone) = list
            .find_zone(&"a.delegation.example.com.".parse().expect("name"))
            .expect("find")
            .expect("zone");
        assert_eq!(zone.origin, origin, "{c}");
        let immutable = source.immutable_rrsets();
        let node_view = source
            .with_node_store(&zone, &mut |_| {
                Ok(authd_datasrc::Lookup::plain(Outcome::NxDomain))
            })
            .is_some();
        let referral = |qname: &str| {
            let qname: Name = qname.parse().expect("qname");
            match source
                .lookup(&zone, &qname, RType::A, LookupOptions::default())
                .expect("lookup")
                .outcome
            {
                Outcome::Delegation(ns) => ns,
                other => panic!("{c}: {qname}: {other:?}"),
            }
        };
        // Twice each, so a cache has seen the cut.
        let _ = (
            referral("x.delegation.example.com."),
            referral("y.delegation.example.com."),
        );
        let (a, b) = (
            referral("a.delegation.example.com."),
            referral("b.delegation.example.com."),
        );
        if immutable {
            assert!(Arc::ptr_eq(&a, &b), "{c}: one NS RRset for one cut");
        }
        (immutable, node_view)
    };
    for c in COMPOSITIONS.iter().filter(|c| c.restricted) {
        let whole = Composition {
            restricted: false,
            ..*c
        };
        assert_eq!(capabilities(c), capabilities(&whole), "{c} vs {whole}");
    }
}

/// A name in the zone a restriction leaves out is answered from the zone
/// around it (here NXDOMAIN from example.com.), not from the DB's other zone.
#[test]
fn zone_left_out_is_answered_by_the_enclosing_zone() {
    for c in COMPOSITIONS {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = server(c.build(dir.path(), "example.com.", Path::new(ZONE)));
        for qname in ["decoy.example.com.", "www.decoy.example.com."] {
            let r = s.q(qname, RecordType::TXT);
            assert_eq!(r.rcode(), ResponseCode::NXDomain, "{c}: {qname}");
            assert!(r.aa(), "{c}: {qname}");
            assert_eq!(r.answer(), Vec::<String>::new(), "{c}: {qname}");
            assert_eq!(r.authority(), [SOA_NEG], "{c}: {qname}");
        }
    }
}
