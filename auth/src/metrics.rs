//! Metrics in the Prometheus text format (`[metrics] listen`), through
//! `prometheus-client`'s collector interface.
//!
//! Counting costs the query path no shared write: every thread that answers
//! gets its own block of counters on its first message ([`Metrics::worker`]),
//! written by that thread alone (a plain load and store, no locked
//! instruction), and a scrape sums the blocks of every thread. Events that
//! are not per query (reloads, TCP connections, transfers) use shared
//! atomics. Zone serials and cache counters are read from the data sources
//! at scrape time.
//!
//! Families (all prefixed `authd_`): `queries_total` {transport, opcode,
//! qtype, rcode}, `responses_total` {kind} (opcode QUERY only),
//! `responses_truncated_total`,
//! `rrl_limited_total` {action}, `cookies_total` {result},
//! `tcp_connections`, `tcp_connections_closed_total` {reason},
//! `proxy_rejected_total` {reason},
//! `transfers_out_total` {type, result}, `transfers_in_total` {result},
//! `updates_total` {result}, `reloads_total` {result},
//! `tsig_failures_total` {error}, `dnstap_dropped_total` (with dnstap on),
//! `zone_serial` {zone}, `zone_queries_total` {zone}, `cache_*` {source},
//! `build_info` {version}, `start_time_seconds`.
//!
//! Per-zone query counts: each thread keeps an open-addressed table of
//! [`ZONE_SLOTS`] (zone name key, count) pairs, written by that thread alone;
//! a scrape sums them for the zones served now, so the family has one series
//! per served zone, never one per name a client makes up. A thread that
//! answers for more zones than its table holds counts the rest in
//! `zone_queries_uncounted_total`. No rcode label: it would multiply the
//! series by every rcode for what `queries_total` already tells.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use authd_datasrc::{LookupOptions, Outcome, RType, SourceList};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use serde::Deserialize;

use crate::query::{ResponseKind, Transport};
use crate::settings::{Context, Invalid, Kind, Schema, Section, parse_listen};
use crate::wire::{Opcode, Rcode};

/// The qtypes counted by name; every other is `other`.
const QTYPES: [(RType, &str); 21] = [
    (RType::A, "A"),
    (RType::NS, "NS"),
    (RType::CNAME, "CNAME"),
    (RType::SOA, "SOA"),
    (RType::PTR, "PTR"),
    (RType::MX, "MX"),
    (RType::TXT, "TXT"),
    (RType::AAAA, "AAAA"),
    (RType::SRV, "SRV"),
    (RType(35), "NAPTR"),
    (RType::DNAME, "DNAME"),
    (RType::DS, "DS"),
    (RType::RRSIG, "RRSIG"),
    (RType::NSEC, "NSEC"),
    (RType::DNSKEY, "DNSKEY"),
    (RType(50), "NSEC3"),
    (RType(64), "SVCB"),
    (RType(65), "HTTPS"),
    (RType::IXFR, "IXFR"),
    (RType::AXFR, "AXFR"),
    (RType::ANY, "ANY"),
];
const QTYPE_SLOTS: usize = QTYPES.len() + 1;

/// The rcodes counted by name; then `other`, then `none` (no reply sent).
const RCODES: [(u16, &str); 13] = [
    (0, "NOERROR"),
    (1, "FORMERR"),
    (2, "SERVFAIL"),
    (3, "NXDOMAIN"),
    (4, "NOTIMP"),
    (5, "REFUSED"),
    (6, "YXDOMAIN"),
    (7, "YXRRSET"),
    (8, "NXRRSET"),
    (9, "NOTAUTH"),
    (10, "NOTZONE"),
    (16, "BADVERS"),
    (23, "BADCOOKIE"),
];
const RCODE_SLOTS: usize = RCODES.len() + 2;
const RCODE_OTHER: usize = RCODES.len();
const RCODE_NONE: usize = RCODES.len() + 1;

const OPCODES: [&str; 4] = ["QUERY", "NOTIFY", "UPDATE", "other"];
const TRANSPORTS: [&str; 3] = ["udp", "tcp", "tls"];
const KINDS: [&str; 5] = ["answer", "referral", "nxdomain", "nodata", "error"];

const QUERY_SLOTS: usize = TRANSPORTS.len() * OPCODES.len() * QTYPE_SLOTS * RCODE_SLOTS;

/// What a rate limiter did to a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limited {
    /// Sent as a minimal truncated reply (or BADCOOKIE).
    Slipped,
    /// Not sent.
    Dropped,
}

/// What a request's COOKIE option turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CookieSeen {
    /// A valid server cookie made here.
    Valid,
    /// A client cookie only, or a server cookie not valid here.
    New,
}

/// What a message turned out to be, noted on its way through the dispatcher
/// and its guards for [`Metrics::count`] (plain stores into a value on the
/// stack, written whether metrics are on or not).
#[derive(Default)]
pub struct Seen {
    /// Its opcode (`None`: shorter than a header, not counted).
    pub opcode: Option<Opcode>,
    /// Its qtype, when it parsed.
    pub qtype: Option<RType>,
    /// The kind of the one reply made for it, if any.
    pub kind: Option<ResponseKind>,
    /// What rate limiting did to the reply, if anything.
    pub limited: Option<Limited>,
    /// What its COOKIE option was, if it had one and cookies are on.
    pub cookie: Option<CookieSeen>,
    /// The name key of the zone that answered it ([`crate::query::Response::zone`]); 0: none.
    pub zone: u64,
}

/// What was sent back for one message, as the counters see it.
pub enum Sent<'a> {
    /// Nothing.
    Nothing,
    /// One reply.
    Message(&'a [u8]),
    /// A zone transfer's messages, by the rcode of the first.
    Stream(Option<crate::wire::Rcode>),
}

/// Zones one thread counts queries for (a power of two); see the module docs.
pub const ZONE_SLOTS: usize = 16_384;

/// Slots probed for a zone before it is counted as uncounted.
const ZONE_PROBES: usize = 16;

/// One thread's counters, written by that thread only.
struct Worker {
    queries: Box<[AtomicU64]>,
    kinds: [AtomicU64; KINDS.len()],
    truncated: AtomicU64,
    limited: [AtomicU64; 2],
    cookies: [AtomicU64; 2],
    /// (zone name key, queries): a key of 0 is a free slot. A slot's key is
    /// written once, before its count moves.
    zones: Box<[(AtomicU64, AtomicU64)]>,
    zones_uncounted: AtomicU64,
}

impl Worker {
    fn new() -> Worker {
        Worker {
            queries: (0..QUERY_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            kinds: Default::default(),
            truncated: AtomicU64::new(0),
            limited: Default::default(),
            cookies: Default::default(),
            zones: (0..ZONE_SLOTS)
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
            zones_uncounted: AtomicU64::new(0),
        }
    }

    /// The slots `key` may be in, in probe order.
    fn zone_slots(&self, key: u64) -> impl Iterator<Item = &(AtomicU64, AtomicU64)> {
        let start = (key as usize) & (ZONE_SLOTS - 1);
        (0..ZONE_PROBES).filter_map(move |i| self.zones.get((start + i) & (ZONE_SLOTS - 1)))
    }

    /// This thread's count for the zone of name key `key`.
    fn zone_count(&self, key: u64) -> u64 {
        for (k, n) in self.zone_slots(key) {
            match k.load(Ordering::Acquire) {
                0 => return 0,
                k if k == key => return n.load(Ordering::Relaxed),
                _ => {}
            }
        }
        0
    }
}

/// Adds one; only the owning thread writes, so no locked instruction.
#[inline]
fn bump(c: &AtomicU64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

/// A thread's handle on its counters in one [`Metrics`].
pub struct WorkerHandle<'a> {
    worker: &'a Worker,
}

impl WorkerHandle<'_> {
    /// Counts one message answered (or not: `rcode` `None`).
    pub fn query(
        &self,
        transport: Transport,
        opcode: Opcode,
        qtype: Option<RType>,
        rcode: Option<Rcode>,
    ) {
        let t = match transport {
            Transport::Udp => 0,
            Transport::Tcp => 1,
            Transport::Tls => 2,
        };
        let o = match opcode {
            Opcode::QUERY => 0,
            Opcode::NOTIFY => 1,
            Opcode::UPDATE => 2,
            _ => 3,
        };
        let q = qtype
            .and_then(|q| QTYPES.iter().position(|(t, _)| *t == q))
            .unwrap_or(QTYPES.len());
        let r = match rcode {
            None => RCODE_NONE,
            Some(rc) => RCODES
                .iter()
                .position(|(c, _)| *c == rc.0)
                .unwrap_or(RCODE_OTHER),
        };
        if let Some(c) = self
            .worker
            .queries
            .get(((t * OPCODES.len() + o) * QTYPE_SLOTS + q) * RCODE_SLOTS + r)
        {
            bump(c);
        }
    }

    /// Counts one response to a standard query, by kind; `truncated` when TC is set.
    pub fn response(&self, kind: ResponseKind, truncated: bool) {
        let k = match kind {
            ResponseKind::Answer => 0,
            ResponseKind::Referral => 1,
            ResponseKind::NxDomain => 2,
            ResponseKind::NoData => 3,
            ResponseKind::Error => 4,
        };
        bump(&self.worker.kinds[k]);
        if truncated {
            bump(&self.worker.truncated);
        }
    }

    /// Counts one response the rate limiter slipped or dropped.
    pub fn limited(&self, what: Limited) {
        bump(&self.worker.limited[what as usize]);
    }

    /// Counts one request with a COOKIE option.
    pub fn cookie(&self, seen: CookieSeen) {
        bump(&self.worker.cookies[seen as usize]);
    }

    /// Counts one query answered from the zone of name key `key` (not 0).
    #[inline]
    pub fn zone(&self, key: u64) {
        for (k, n) in self.worker.zone_slots(key) {
            let held = k.load(Ordering::Relaxed);
            if held == key {
                bump(n);
                return;
            }
            if held == 0 {
                // Only this thread writes keys: the slot is ours. The key is
                // published before the count moves, for a scrape's reads.
                k.store(key, Ordering::Release);
                bump(n);
                return;
            }
        }
        bump(&self.worker.zones_uncounted);
    }
}

/// Why a PROXY protocol header (`[server] proxy_allow`) was refused: the
/// UDP datagram dropped or the TCP connection closed
/// (`authd_proxy_rejected_total{reason}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyRejected {
    /// A header from a source not in `proxy_allow`.
    NotAllowed,
    /// No header from a source in it.
    Missing,
    /// A header that is cut short, of another version, or otherwise not one
    /// this server takes.
    Malformed,
    /// No complete header within the TCP first-query deadline.
    Timeout,
}

impl ProxyRejected {
    /// The `reason` label values, in the enum's order.
    const LABELS: [&'static str; 4] = ["not_allowed", "missing", "malformed", "timeout"];
}

/// How a DNS UPDATE ended (`authd_updates_total{result}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateResult {
    /// NOERROR: the change was made (or there was nothing to change).
    Applied,
    /// REFUSED or NOTAUTH: not allowed, or not a zone served here.
    Refused,
    /// Any other rcode: a prerequisite not met, a malformed update, a
    /// storage failure.
    Failed,
}

impl UpdateResult {
    /// The result an UPDATE answered with `rcode` had.
    pub fn of(rcode: crate::wire::Rcode) -> UpdateResult {
        use crate::wire::Rcode;
        if rcode == Rcode::NOERROR {
            UpdateResult::Applied
        } else if rcode == Rcode::REFUSED || rcode == Rcode::NOTAUTH {
            UpdateResult::Refused
        } else {
            UpdateResult::Failed
        }
    }
}

/// How one refresh of a secondary zone ended (`authd_transfers_in_total{result}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferInResult {
    /// A newer version was transferred (AXFR or IXFR) and stored.
    Applied,
    /// A primary answered with a serial not newer than ours: nothing to do.
    UpToDate,
    /// No primary answered, or every transfer failed.
    Failed,
}

/// Reads the data sources in force, at scrape time.
pub type SourcesNow = Box<dyn Fn() -> SourceList + Send + Sync>;

/// `[metrics]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    listen: Option<String>,
}

impl Section for RawMetrics {
    /// Where `/metrics` is served; `None`: metrics off.
    type Value = Option<SocketAddr>;

    const SCHEMA: Schema = &[("metrics", &[("listen", Kind::Text)])];

    /// An empty or absent `listen` turns metrics off.
    fn check(self, _: &Context<'_>) -> Result<Option<SocketAddr>, Invalid> {
        match self.listen.as_deref().map(str::trim) {
            None | Some("") => Ok(None),
            Some(a) => Ok(Some(
                parse_listen(a).map_err(|r| Invalid::new("metrics.listen", r))?,
            )),
        }
    }
}

/// Every counter of one authd process.
pub struct Metrics {
    id: u64,
    workers: Mutex<Vec<Arc<Worker>>>,
    started: u64,
    /// TCP connections open now.
    pub tcp_open: AtomicI64,
    /// TCP connections closed by the limits: per client prefix, table full
    /// (every connection busy), the longest idle one closed for a newcomer.
    pub tcp_closed: [AtomicU64; 3],
    /// PROXY headers refused, by [`ProxyRejected`].
    pub proxy_rejected: [AtomicU64; 4],
    /// Reloads that were applied, and that failed.
    pub reloads: [AtomicU64; 2],
    /// Signed requests rejected: malformed TSIG (FORMERR), unknown key or
    /// bad MAC (BADKEY, BADSIG), clock skew (BADTIME).
    pub tsig_failures: [AtomicU64; 3],
    /// Zone transfers out: (AXFR, IXFR) × (served, refused or failed).
    pub transfers: [[AtomicU64; 2]; 2],
    /// DNS UPDATEs, by [`UpdateResult`].
    pub updates: [AtomicU64; 3],
    /// Refreshes of secondary zones, by [`TransferInResult`].
    pub transfers_in: [AtomicU64; 3],
    sources: Mutex<Option<SourcesNow>>,
    /// The dnstap log, when on: its drop count is read at scrape time.
    dnstap: Mutex<Option<Arc<crate::dnstap::Dnstap>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Metrics {
    /// Counters for a process started now.
    pub fn new() -> Arc<Metrics> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Arc::new(Metrics {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            workers: Mutex::new(Vec::new()),
            started: crate::sys::unix_seconds(),
            tcp_open: AtomicI64::new(0),
            tcp_closed: Default::default(),
            proxy_rejected: Default::default(),
            reloads: Default::default(),
            tsig_failures: Default::default(),
            transfers: Default::default(),
            updates: Default::default(),
            transfers_in: Default::default(),
            sources: Mutex::new(None),
            dnstap: Mutex::new(None),
        })
    }

    /// Counts one PROXY header refused (a shared atomic: off the query path).
    pub fn count_proxy_rejected(&self, why: ProxyRejected) {
        self.proxy_rejected[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one DNS UPDATE (a shared atomic: an UPDATE is rare and
    /// written to disk, not on the query path).
    pub fn count_update(&self, result: UpdateResult) {
        self.updates[result as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one refresh of a secondary zone.
    pub fn count_transfer_in(&self, result: TransferInResult) {
        self.transfers_in[result as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Where a scrape reads the zones and caches in force from.
    pub fn set_sources(&self, sources: SourcesNow) {
        if let Ok(mut s) = self.sources.lock() {
            *s = Some(sources);
        }
    }

    /// The dnstap log whose dropped frames `authd_dnstap_dropped_total` shows.
    pub fn set_dnstap(&self, dnstap: Arc<crate::dnstap::Dnstap>) {
        if let Ok(mut d) = self.dnstap.lock() {
            *d = Some(dnstap);
        }
    }

    /// The metrics layer, around the dispatcher: counts one message received
    /// over `transport`, as `seen` noted it, and what was `sent` for it (a
    /// transfer's first message gives its rcode, and counts it served or
    /// refused).
    #[inline]
    pub fn count(&self, transport: Transport, seen: &Seen, sent: Sent<'_>) {
        let Some(opcode) = seen.opcode else {
            return;
        };
        let rcode = match sent {
            Sent::Nothing => None,
            Sent::Message(reply) => Some(crate::wire::reply_rcode(reply)),
            Sent::Stream(rcode) => {
                let kind = usize::from(seen.qtype == Some(RType::IXFR));
                let result = usize::from(rcode != Some(Rcode::NOERROR));
                self.transfers[kind][result].fetch_add(1, Ordering::Relaxed);
                rcode
            }
        };
        self.worker(|w| {
            w.query(transport, opcode, seen.qtype, rcode);
            // `responses_total` is about standard queries: the replies to
            // UPDATE and NOTIFY are counted by opcode and rcode only (and
            // UPDATEs by result, `updates_total`).
            if opcode == Opcode::QUERY
                && let Some(kind) = seen.kind
                && let Sent::Message(reply) = sent
            {
                let tc = reply.get(2).is_some_and(|b| b & 0x02 != 0);
                w.response(kind, tc);
            }
            if let Some(l) = seen.limited {
                w.limited(l);
            }
            if let Some(c) = seen.cookie {
                w.cookie(c);
            }
            if seen.zone != 0 {
                w.zone(seen.zone);
            }
        });
    }

    /// Runs `f` with this thread's counters (made on its first call).
    #[inline]
    pub fn worker<R>(&self, f: impl FnOnce(&WorkerHandle<'_>) -> R) -> R {
        thread_local! {
            static LOCAL: RefCell<Vec<(u64, Arc<Worker>)>> = const { RefCell::new(Vec::new()) };
        }
        LOCAL.with(|local| {
            // Borrowed, not cloned: no reference-count update per message.
            if let Some((_, w)) = local.borrow().iter().find(|(id, _)| *id == self.id) {
                return f(&WorkerHandle { worker: w });
            }
            let w = Arc::new(Worker::new());
            if let Ok(mut all) = self.workers.lock() {
                all.push(Arc::clone(&w));
            }
            local.borrow_mut().push((self.id, Arc::clone(&w)));
            f(&WorkerHandle { worker: &w })
        })
    }

    /// The whole text exposition (Prometheus text format 0.0.4, as
    /// `promtool check metrics` reads it).
    ///
    /// Errors: formatting failed (never for a `String`).
    pub fn render(self: &Arc<Self>) -> Result<String, std::fmt::Error> {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Scrape(Arc::clone(self))));
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)?;
        Ok(out)
    }

    /// The sums over every worker.
    fn sums(&self) -> Sums {
        let mut s = Sums {
            queries: vec![0; QUERY_SLOTS],
            ..Sums::default()
        };
        let workers = self.workers.lock().map(|w| w.clone()).unwrap_or_default();
        for w in &workers {
            for (sum, c) in s.queries.iter_mut().zip(w.queries.iter()) {
                *sum += c.load(Ordering::Relaxed);
            }
            for (sum, c) in s.kinds.iter_mut().zip(&w.kinds) {
                *sum += c.load(Ordering::Relaxed);
            }
            s.truncated += w.truncated.load(Ordering::Relaxed);
            s.zones_uncounted += w.zones_uncounted.load(Ordering::Relaxed);
            for (sum, c) in s.limited.iter_mut().zip(&w.limited) {
                *sum += c.load(Ordering::Relaxed);
            }
            for (sum, c) in s.cookies.iter_mut().zip(&w.cookies) {
                *sum += c.load(Ordering::Relaxed);
            }
        }
        s
    }
}

#[derive(Default)]
struct Sums {
    queries: Vec<u64>,
    zones_uncounted: u64,
    kinds: [u64; KINDS.len()],
    truncated: u64,
    limited: [u64; 2],
    cookies: [u64; 2],
}

/// The collector run at each scrape.
#[derive(Debug)]
struct Scrape(Arc<Metrics>);

fn counter<L: prometheus_client::encoding::EncodeLabelSet>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, u64)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in series {
        ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

fn gauge<L: prometheus_client::encoding::EncodeLabelSet>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, i64)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let m = &self.0;
        let s = m.sums();
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        gauge(
            &mut e,
            "authd_build_info",
            "authd's version (value 1).",
            [([("version", env!("CARGO_PKG_VERSION"))], 1)],
        )?;
        gauge(
            &mut e,
            "authd_start_time_seconds",
            "When authd started, seconds since the Unix epoch.",
            [([("", ""); 0], m.started as i64)],
        )?;
        let mut queries = Vec::new();
        for (t, transport) in TRANSPORTS.iter().enumerate() {
            for (o, opcode) in OPCODES.iter().enumerate() {
                for q in 0..QTYPE_SLOTS {
                    #[allow(clippy::needless_range_loop)]
                    for r in 0..RCODE_SLOTS {
                        let i = ((t * OPCODES.len() + o) * QTYPE_SLOTS + q) * RCODE_SLOTS + r;
                        let n = s.queries[i];
                        if n == 0 {
                            continue;
                        }
                        let qtype = QTYPES.get(q).map_or("other", |(_, name)| name);
                        let rcode = match r {
                            RCODE_NONE => "none",
                            _ => RCODES.get(r).map_or("other", |(_, name)| name),
                        };
                        queries.push((
                            [
                                ("transport", *transport),
                                ("opcode", *opcode),
                                ("qtype", qtype),
                                ("rcode", rcode),
                            ],
                            n,
                        ));
                    }
                }
            }
        }
        counter(
            &mut e,
            "authd_queries",
            "Messages received, by transport, opcode, qtype and the rcode sent (none: no reply).",
            queries,
        )?;
        counter(
            &mut e,
            "authd_responses",
            "Responses to standard queries (opcode QUERY), by kind.",
            KINDS.iter().zip(s.kinds).map(|(k, n)| ([("kind", *k)], n)),
        )?;
        counter(
            &mut e,
            "authd_responses_truncated",
            "Responses sent with TC set.",
            [([("", ""); 0], s.truncated)],
        )?;
        counter(
            &mut e,
            "authd_rrl_limited",
            "UDP responses over the rate limit, slipped (truncated or BADCOOKIE) or dropped.",
            [
                ([("action", "slipped")], s.limited[0]),
                ([("action", "dropped")], s.limited[1]),
            ],
        )?;
        counter(
            &mut e,
            "authd_cookies",
            "Requests with a DNS COOKIE option: a valid server cookie, or not (a new one was made).",
            [
                ([("result", "valid")], s.cookies[0]),
                ([("result", "new")], s.cookies[1]),
            ],
        )?;
        gauge(
            &mut e,
            "authd_tcp_connections",
            "TCP connections open.",
            [([("", ""); 0], m.tcp_open.load(Ordering::Relaxed))],
        )?;
        counter(
            &mut e,
            "authd_tcp_connections_closed",
            "TCP connections closed by the limits.",
            [
                ([("reason", "per_client")], load(&m.tcp_closed[0])),
                ([("reason", "all_busy")], load(&m.tcp_closed[1])),
                ([("reason", "idle_longest")], load(&m.tcp_closed[2])),
            ],
        )?;
        counter(
            &mut e,
            "authd_proxy_rejected",
            "PROXY protocol headers refused ([server] proxy_allow): UDP datagrams dropped, TCP connections closed.",
            ProxyRejected::LABELS
                .iter()
                .zip(&m.proxy_rejected)
                .map(|(reason, c)| ([("reason", *reason)], load(c))),
        )?;
        counter(
            &mut e,
            "authd_transfers_out",
            "Zone transfers asked for, by type and result.",
            [
                (
                    [("type", "AXFR"), ("result", "served")],
                    load(&m.transfers[0][0]),
                ),
                (
                    [("type", "AXFR"), ("result", "refused")],
                    load(&m.transfers[0][1]),
                ),
                (
                    [("type", "IXFR"), ("result", "served")],
                    load(&m.transfers[1][0]),
                ),
                (
                    [("type", "IXFR"), ("result", "refused")],
                    load(&m.transfers[1][1]),
                ),
            ],
        )?;
        counter(
            &mut e,
            "authd_transfers_in",
            "Refreshes of secondary zones, by result.",
            [
                ([("result", "applied")], load(&m.transfers_in[0])),
                ([("result", "up_to_date")], load(&m.transfers_in[1])),
                ([("result", "failed")], load(&m.transfers_in[2])),
            ],
        )?;
        counter(
            &mut e,
            "authd_updates",
            "DNS UPDATEs (RFC 2136), by result.",
            [
                ([("result", "applied")], load(&m.updates[0])),
                ([("result", "refused")], load(&m.updates[1])),
                ([("result", "failed")], load(&m.updates[2])),
            ],
        )?;
        counter(
            &mut e,
            "authd_tsig_failures",
            "Signed requests rejected (RFC 8945 §5.2), by what was wrong.",
            [
                ([("error", "formerr")], load(&m.tsig_failures[0])),
                ([("error", "badkey_or_badsig")], load(&m.tsig_failures[1])),
                ([("error", "badtime")], load(&m.tsig_failures[2])),
            ],
        )?;
        counter(
            &mut e,
            "authd_reloads",
            "Reloads (SIGHUP), applied or failed.",
            [
                ([("result", "ok")], load(&m.reloads[0])),
                ([("result", "failed")], load(&m.reloads[1])),
            ],
        )?;
        let dnstap = m
            .dnstap
            .lock()
            .ok()
            .and_then(|d| d.as_ref().map(|d| d.dropped()));
        if let Some(dropped) = dnstap {
            counter(
                &mut e,
                "authd_dnstap_dropped",
                "dnstap frames dropped: queue full, or no socket reader, or a failed write.",
                [([("", ""); 0], dropped)],
            )?;
        }
        let sources = m.sources.lock().ok().and_then(|s| s.as_ref().map(|f| f()));
        if let Some(sources) = sources {
            let mut serials = Vec::new();
            let mut zone_queries = Vec::new();
            let mut caches = Vec::new();
            let workers = m.workers.lock().map(|w| w.clone()).unwrap_or_default();
            for (source, zones) in sources.zones() {
                for zone in zones.unwrap_or_default() {
                    let key = crate::name_hash::name_key(zone.origin.as_wire(), 0);
                    zone_queries.push((
                        [("zone", zone.origin.to_string())],
                        workers.iter().map(|w| w.zone_count(key)).sum::<u64>(),
                    ));
                    let soa =
                        source.lookup(&zone, &zone.origin, RType::SOA, LookupOptions::default());
                    if let Ok(authd_datasrc::Lookup {
                        outcome: Outcome::Answer(soa),
                        ..
                    }) = soa
                        && let Some(serial) = soa.rdatas.first().and_then(|r| r.soa_serial())
                    {
                        serials.push(([("zone", zone.origin.to_string())], i64::from(serial)));
                    }
                }
                if let Some(c) = source.cache_stats() {
                    caches.push((source.describe(), c));
                }
            }
            gauge(
                &mut e,
                "authd_zone_serial",
                "The SOA serial served, per zone.",
                serials,
            )?;
            counter(
                &mut e,
                "authd_zone_queries",
                "Standard queries answered from each zone served now (rate limited or not).",
                zone_queries,
            )?;
            counter(
                &mut e,
                "authd_zone_queries_uncounted",
                "Standard queries answered from a zone a thread's per-zone table had no room for.",
                [([("", ""); 0], s.zones_uncounted)],
            )?;
            type Field = fn(&authd_datasrc::CacheStats) -> u64;
            let fields: [(&str, &str, Field); 5] = [
                (
                    "authd_cache_hits",
                    "Hot-spot cache probes answered from the cache.",
                    |c| c.hits,
                ),
                (
                    "authd_cache_misses",
                    "Hot-spot cache probes that went to the source.",
                    |c| c.misses,
                ),
                (
                    "authd_cache_evictions",
                    "Hot-spot cache entries evicted for room.",
                    |c| c.evictions,
                ),
                (
                    "authd_cache_rejections",
                    "Hot-spot cache misses not stored: the admission filter preferred the entry they would evict.",
                    |c| c.rejections,
                ),
                (
                    "authd_cache_flushes",
                    "Hot-spot cache flushes (the source changed).",
                    |c| c.flushes,
                ),
            ];
            for (name, help, field) in fields {
                counter(
                    &mut e,
                    name,
                    help,
                    caches
                        .iter()
                        .map(|(d, c)| ([("source", d.clone())], field(c))),
                )?;
            }
            gauge(
                &mut e,
                "authd_cache_entries",
                "Hot-spot cache entries held.",
                caches.iter().map(|(d, c)| {
                    (
                        [("source", d.clone())],
                        i64::try_from(c.entries).unwrap_or(i64::MAX),
                    )
                }),
            )?;
        }
        Ok(())
    }
}

/// Serves `GET /metrics` on `listen` until the runtime ends; any other path
/// gets 404.
///
/// Errors: the address cannot be bound.
pub async fn serve(listen: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<SocketAddr> {
    use http_body_util::Full;
    use hyper::body::Bytes;
    use hyper::{Request, Response, StatusCode};

    let listener = tokio::net::TcpListener::bind(listen).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            };
            let metrics = Arc::clone(&metrics);
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        let metrics = Arc::clone(&metrics);
                        async move {
                            let response =
                                if req.uri().path() == "/metrics" {
                                    match metrics.render() {
                                Ok(text) => Response::builder()
                                    .header(
                                        "content-type",
                                        prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                                    )
                                    .body(Full::new(Bytes::from(text))),
                                Err(_) => Response::builder()
                                    .status(StatusCode::INTERNAL_SERVER_ERROR)
                                    .body(Full::new(Bytes::new())),
                            }
                                } else {
                                    Response::builder().status(StatusCode::NOT_FOUND).body(
                                        Full::new(Bytes::from_static(b"not found; try /metrics\n")),
                                    )
                                };
                            response.map_err(std::io::Error::other)
                        }
                    });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    Ok(bound)
}
