//! The memory backend's query path allocates nothing per query once warm
//! (issue: "no heap allocation per query in the steady state"): a counting
//! global allocator, per thread, over a mix of answer, referral, NXDOMAIN,
//! NODATA, wildcard, CNAME and DNSSEC queries.
#![allow(unsafe_code)] // a GlobalAlloc impl is unsafe by definition

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;
use std::sync::Arc;

use authd::dispatch::{Dispatcher, Reply};
use authd::query::Transport;
use authd_datasrc::memory::{MemorySource, MemoryZone};
use authd_datasrc::{Name, RType, SourceList};

/// The client address of every query (no access control applies to them).
const LOCAL: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; the counter is
// a const-initialized thread-local Cell, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn query(qname: &str, qtype: RType, dnssec: bool) -> Vec<u8> {
    let name: Name = qname.parse().expect("name");
    let mut w = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, u8::from(dnssec)];
    w.extend_from_slice(name.as_wire());
    w.extend_from_slice(&qtype.0.to_be_bytes());
    w.extend_from_slice(&[0, 1]);
    if dnssec {
        // OPT: root owner, payload 1232, DO set.
        w.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 0]);
    }
    w
}

fn processor(origin: &str, file: &str) -> Dispatcher {
    let origin: Name = origin.parse().expect("origin");
    let source = MemorySource::new("no-alloc");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    source.insert_zone(MemoryZone::from_master_file(&origin, &path).expect("zone loads"));
    Dispatcher::new(SourceList::new(vec![Arc::new(source)]))
}

#[test]
fn steady_state_queries_do_not_allocate() {
    let root = processor(".", "../tests/data/root.zone");
    let example = processor("example.com.", "tests/data/example-base-inc.zone");
    let cases: Vec<(&Dispatcher, Vec<u8>, &str)> = vec![
        (
            &root,
            query("foo123.com.", RType::A, false),
            "referral with glue",
        ),
        (
            &root,
            query("www.bamoli7.net.", RType::AAAA, false),
            "referral, UDP 512 limit",
        ),
        (&root, query("asdkjhqwe.", RType::A, false), "NXDOMAIN"),
        (&root, query(".", RType::SOA, false), "apex answer"),
        (
            &root,
            query(".", RType::NS, false),
            "answer with additional",
        ),
        (&root, query("com.", RType::DS, false), "DS from the parent"),
        (
            &root,
            query("com.", RType::TXT, false),
            "NODATA at a cut (parent side)",
        ),
        (
            &root,
            query("asdkjhqwe.", RType::A, true),
            "NXDOMAIN with NSEC proofs",
        ),
        (
            &root,
            query("foo123.com.", RType::A, true),
            "signed referral",
        ),
        (
            &example,
            query("www.wild.example.com.", RType::A, false),
            "wildcard answer",
        ),
        (
            &example,
            query("www.example.com.", RType::TXT, false),
            "NODATA",
        ),
        (
            &example,
            query("no.example.com.", RType::A, false),
            "empty non-terminal",
        ),
        (
            &example,
            query("cname.example.com.", RType::A, false),
            "CNAME chased in zone",
        ),
        (
            &example,
            query("mx.example.com.", RType::MX, false),
            "MX with additional",
        ),
    ];
    let mut out = Vec::with_capacity(65535);
    for _ in 0..3 {
        for (p, wire, _) in &cases {
            assert!(p.handle(wire, Transport::Udp, LOCAL, &mut out) == Reply::Message);
        }
    }
    for (p, wire, what) in &cases {
        let before = ALLOCS.with(Cell::get);
        assert!(p.handle(wire, Transport::Udp, LOCAL, &mut out) == Reply::Message);
        let allocs = ALLOCS.with(Cell::get) - before;
        assert_eq!(allocs, 0, "{what}: {allocs} allocations");
        assert!(out.len() > 12, "{what}: a real reply");
    }
}
