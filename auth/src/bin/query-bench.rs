//! `query-bench`: in-process query throughput, after BIND 10's `query_bench`.
//!
//! Every query of a dnsperf-format file (`name type` per line, `#` comments)
//! is rendered to wire form once (id 0, no RD, no EDNS, as BIND 10 did) and run
//! through the real path — wire query → dispatcher → query processing → wire response — with
//! no sockets, for each hot-spot cache variant: unlimited slots, 10 × #queries,
//! #queries / 2, and disabled, or the slot counts given with `--slots` (as
//! numbers, or as percentages of the distinct qnames: a curve of throughput
//! against cache size). Each variant starts cold. Before timing, every
//! variant's responses are checked to be identical: byte for byte, or, where
//! only name compression differs (a reply rendered from a template compresses
//! against the zone cut, a direct rendering against the qname), equal once
//! decoded.

/// mimalloc instead of glibc's malloc: the sqlite3 path builds a few small
/// objects per row read, and glibc's allocator was a fifth of its time
/// (docs/performance-log.md, "Allocator"). The memory path allocates nothing.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use authd::cookies::Cookies;
use authd::dispatch::Dispatcher;
use authd::query::Transport;
use authd::rrl::{RateLimiter, RrlSettings};
use authd::server::UDP_BATCH;
use authd_cache::{HotSpotCache, Slots};
use authd_datasrc::memory::{MemorySource, MemoryZone};
use authd_datasrc::sqlite::SqliteSource;
use authd_datasrc::{DataSource, Name, RType, SourceList, ZoneSelection};
use clap::{Parser, ValueEnum};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Backend {
    Sqlite3,
    Memory,
}

impl Backend {
    fn label(self) -> &'static str {
        match self {
            Backend::Sqlite3 => "sqlite3",
            Backend::Memory => "memory",
        }
    }
}

/// Measure query processing throughput in process, with and without the hot-spot cache.
#[derive(Parser, Debug)]
#[command(name = "query-bench", version)]
struct Args {
    /// Iterations over the whole query file per variant.
    #[arg(short = 'n', default_value_t = 1, allow_negative_numbers = true)]
    iterations: usize,
    /// Data source type.
    #[arg(short = 't', value_enum, default_value = "sqlite3")]
    backend: Backend,
    /// Zone origin (required for memory: the master file's zone).
    #[arg(short = 'o')]
    origin: Option<String>,
    /// Print one JSON array instead of the table.
    #[arg(long)]
    json: bool,
    /// Only these variants (comma-separated: unlimited,10x,half,disabled).
    /// With `--slots`, these run first; without, `--slots` alone runs.
    #[arg(long, value_delimiter = ',')]
    variants: Option<Vec<String>>,
    /// Variants of these slot counts (comma-separated), each a number of
    /// slots or a percentage of the distinct qnames of the query file
    /// (`1%,50%,200%`, rounded up; `0` disables the cache).
    #[arg(long, value_delimiter = ',', value_name = "N|P%,...", value_parser = parse_slots)]
    slots: Option<Vec<SlotCount>>,
    /// Serve only these zones of the source (comma-separated origins), as a
    /// `[[datasource]]` with `zones = [...]` does; default: every zone.
    #[arg(long, value_delimiter = ',', value_name = "ORIGIN,...", value_parser = parse_origin)]
    zones: Option<Vec<Name>>,
    /// Turn the internet-facing guards on: rate limiting (at 1,000,000
    /// responses/s, so nothing is limited) and cookies.
    #[arg(long)]
    guards: bool,
    /// Count every query into metrics (as `[metrics] listen` does).
    #[arg(long)]
    metrics: bool,
    /// Send a client cookie (an OPT with a COOKIE option) in every query.
    /// Needs a single `--variants`: server cookies carry the time, so
    /// replies are not compared across variants.
    #[arg(long)]
    cookie_queries: bool,
    /// The sqlite3 zone DB, or the master file for memory.
    datasource: PathBuf,
    /// Queries in dnsperf format.
    queryfile: PathBuf,
}

struct Variant {
    name: String,
    slots: Slots,
    slot_count: Option<usize>,
}

/// A `--slots` item.
#[derive(Clone, Copy, Debug, PartialEq)]
enum SlotCount {
    /// This many slots.
    Absolute(usize),
    /// This percentage of the distinct qnames.
    Percent(f64),
}

impl SlotCount {
    /// The slot count, for a query file of `distinct` distinct qnames: a
    /// percentage rounded up, and at least 1 (a percentage never disables).
    fn count(self, distinct: usize) -> usize {
        match self {
            SlotCount::Absolute(n) => n,
            SlotCount::Percent(p) => ((distinct as f64 * p / 100.0).ceil() as usize).max(1),
        }
    }

    /// The variant's name: `1%` or `5000`, as given.
    fn label(self) -> String {
        match self {
            SlotCount::Absolute(n) => n.to_string(),
            SlotCount::Percent(p) => format!("{p}%"),
        }
    }
}

fn parse_slots(s: &str) -> Result<SlotCount, String> {
    match s.strip_suffix('%') {
        Some(p) => match p.parse::<f64>() {
            Ok(p) if p.is_finite() && p > 0.0 => Ok(SlotCount::Percent(p)),
            _ => Err(format!(
                "{s:?}: expected a positive percentage, such as 50%"
            )),
        },
        None => s
            .parse::<usize>()
            .map(SlotCount::Absolute)
            .map_err(|_| format!("{s:?}: expected a slot count or a percentage, such as 50%")),
    }
}

/// How many different qnames `queries` (wire queries) ask about, ASCII case
/// folded as DNS compares names.
fn distinct_qnames(queries: &[Vec<u8>]) -> usize {
    let names: std::collections::HashSet<Vec<u8>> = queries
        .iter()
        .map(|wire| {
            // The qname runs from the header to the type and class (4 bytes).
            let end = wire.len().saturating_sub(4).max(12);
            wire.get(12..end).unwrap_or_default().to_ascii_lowercase()
        })
        .collect();
    names.len()
}

struct Row {
    variant: String,
    slots: Option<usize>,
    queries: usize,
    seconds: f64,
    /// CPU time of the timing loop's thread, seconds: unlike `seconds`, not
    /// inflated when other processes take the core.
    cpu_seconds: f64,
    hit_rate: f64,
}

/// CPU time this thread has used, seconds (`CLOCK_THREAD_CPUTIME_ID`); 0
/// where that clock cannot be read.
fn thread_cpu_seconds() -> f64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map_or(0.0, |t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
}

/// The client address every query comes from (no access control applies to
/// plain queries; transfers are not benchmarked).
const CLIENT: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// Skipped lines named on stderr (with why); the rest are only counted.
const SKIPPED_SHOWN: usize = 5;

/// One query per line: `qname qtype`; returns the wire queries and the number of
/// lines skipped as unparsable. The first skipped lines are reported on stderr,
/// so that a mistyped query file does not go unnoticed behind a mere count
/// (to `notes`: stderr, or a buffer in tests).
fn read_queries(path: &PathBuf, notes: &mut impl Write) -> Result<(Vec<Vec<u8>>, usize)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = Vec::new();
    let mut skipped = 0;
    for (i, line) in text.lines().enumerate() {
        match query_line(line) {
            Ok(Some(wire)) => out.push(wire),
            Ok(None) => {}
            Err(reason) => {
                skipped += 1;
                if skipped <= SKIPPED_SHOWN {
                    writeln!(
                        notes,
                        "{}:{}: skipped: {reason} ({})",
                        path.display(),
                        i + 1,
                        line.trim()
                    )?;
                }
            }
        }
    }
    if skipped > SKIPPED_SHOWN {
        writeln!(
            notes,
            "... and {} more skipped lines",
            skipped - SKIPPED_SHOWN
        )?;
    }
    Ok((out, skipped))
}

/// The wire query for one query-file line; `None` for a blank or `#` comment
/// line. Errors: why the line cannot be a query.
fn query_line(line: &str) -> Result<Option<Vec<u8>>, String> {
    let line = line.trim();
    // `;` starts a comment in dnsperf's format, `#` in BIND 10's query_bench.
    if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
        return Ok(None);
    }
    let mut fields = fields(line);
    let (Some(qname), Some(qtype)) = (fields.next(), fields.next()) else {
        return Err("expected `qname qtype`".into());
    };
    let name = Name::parse(qname, Some(&Name::root())).map_err(|e| format!("bad qname: {e}"))?;
    let rtype = qtype.parse::<RType>().map_err(|e| e.to_string())?;
    if let Some(extra) = fields.next() {
        return Err(format!("expected `qname qtype`, not also {extra:?}"));
    }
    let mut wire = vec![0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    wire.extend_from_slice(name.as_wire());
    wire.extend_from_slice(&rtype.0.to_be_bytes());
    wire.extend_from_slice(&1u16.to_be_bytes());
    Ok(Some(wire))
}

/// The whitespace-separated fields of `line`; a backslash keeps the next
/// character (an escaped space inside a qname) in its field, as in master files.
fn fields(line: &str) -> impl Iterator<Item = &str> {
    let mut rest = line;
    std::iter::from_fn(move || {
        rest = rest.trim_start();
        if rest.is_empty() {
            return None;
        }
        let mut end = rest.len();
        let mut escaped = false;
        for (i, c) in rest.char_indices() {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c.is_whitespace() {
                end = i;
                break;
            }
        }
        let (field, tail) = rest.split_at(end);
        rest = tail;
        Some(field)
    })
}

fn open_source(args: &Args) -> Result<Arc<dyn DataSource>> {
    Ok(match args.backend {
        Backend::Sqlite3 => Arc::new(SqliteSource::open(&args.datasource)?),
        Backend::Memory => {
            let Some(origin) = &args.origin else {
                bail!("-o ORIGIN is required with -t memory");
            };
            let origin: Name = Name::parse(origin, Some(&Name::root()))
                .map_err(|e| anyhow::anyhow!("bad origin {origin:?}: {e}"))?;
            let source = MemorySource::new("query-bench");
            source.insert_zone(MemoryZone::from_master_file(&origin, &args.datasource)?);
            Arc::new(source)
        }
    })
}

fn parse_origin(s: &str) -> Result<Name, String> {
    authd::config::parse_origin(s)
}

/// A dispatcher over `source`, behind a cache of `slots` (none when disabled),
/// serving the zones `selection` allows, built as authd builds a `[[datasource]]`.
fn dispatcher(
    source: Arc<dyn DataSource>,
    slots: Slots,
    selection: &ZoneSelection,
    guards: bool,
    metrics: bool,
) -> Result<(Dispatcher, Option<Arc<HotSpotCache>>)> {
    let (source, cache) = if slots == Slots::Disabled {
        (source, None)
    } else {
        let cache = Arc::new(HotSpotCache::new(source, slots));
        (cache.clone() as Arc<dyn DataSource>, Some(cache))
    };
    let list = SourceList::with_selections(vec![(source, selection.clone())]);
    let mut d = Dispatcher::new(list);
    if guards {
        let rrl = RateLimiter::new(RrlSettings {
            responses_per_second: 1_000_000,
            ..RrlSettings::default()
        });
        d = d
            .with_rrl(Some(Arc::new(rrl)))
            .with_cookies(Some(Cookies::random()?));
    }
    if metrics {
        d = d.with_metrics(Some(authd::metrics::Metrics::new()));
    }
    Ok((d, cache))
}

/// `wire` with an OPT record holding a client cookie (RFC 7873 §4).
fn with_client_cookie(wire: &[u8]) -> Vec<u8> {
    let mut q = wire.to_vec();
    q[11] = 1; // ARCOUNT
    q.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 12, 0, 10, 0, 8]);
    q.extend_from_slice(&[0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]);
    q
}

fn run() -> Result<()> {
    let args: Args = authd::cli::parse_args("query-bench");
    if args.iterations == 0 {
        bail!("-n must be at least 1");
    }
    let (mut queries, skipped) = read_queries(&args.queryfile, &mut std::io::stderr())?;
    // Before the cookie goes in: `distinct_qnames` reads the qname up to
    // the last 4 bytes.
    let distinct = distinct_qnames(&queries);
    if args.cookie_queries {
        queries = queries.iter().map(|q| with_client_cookie(q)).collect();
        let picked =
            args.variants.as_ref().map_or(0, Vec::len) + args.slots.as_ref().map_or(0, Vec::len);
        if picked != 1 {
            bail!(
                "--cookie-queries needs one --variants or --slots (server cookies carry the time)"
            );
        }
    }
    if queries.is_empty() {
        bail!("no queries in {}", args.queryfile.display());
    }
    let q = queries.len();
    let all = [
        Variant {
            name: "unlimited".into(),
            slots: Slots::Unlimited,
            slot_count: None,
        },
        Variant {
            name: "10x".into(),
            slots: Slots::from_count(10 * q),
            slot_count: Some(10 * q),
        },
        Variant {
            name: "half".into(),
            slots: Slots::from_count((q / 2).max(1)),
            slot_count: Some((q / 2).max(1)),
        },
        Variant {
            name: "disabled".into(),
            slots: Slots::Disabled,
            slot_count: Some(0),
        },
    ];
    let slot_variants: Vec<Variant> = args
        .slots
        .iter()
        .flatten()
        .map(|s| {
            let n = s.count(distinct);
            Variant {
                name: s.label(),
                slots: Slots::from_count(n),
                slot_count: Some(n),
            }
        })
        .collect();
    let mut variants: Vec<&Variant> = match &args.variants {
        None if !slot_variants.is_empty() => Vec::new(),
        None => all.iter().collect(),
        Some(names) => {
            let picked: Vec<&Variant> = all.iter().filter(|v| names.contains(&v.name)).collect();
            if picked.len() != names.len() {
                bail!("unknown variant in {names:?} (unlimited, 10x, half, disabled)");
            }
            picked
        }
    };
    variants.extend(&slot_variants);
    let source = open_source(&args)?;
    let selection = match &args.zones {
        None => ZoneSelection::All,
        Some(zones) => {
            let held = source.zones()?;
            if let Some(z) = zones.iter().find(|z| !held.iter().any(|h| h.origin == **z)) {
                bail!("--zones: zone {z} is not in {}", args.datasource.display());
            }
            ZoneSelection::Only(zones.iter().cloned().collect())
        }
    };

    // Every variant must answer every query identically.
    let mut reference: Option<Vec<Vec<u8>>> = None;
    for v in &variants {
        let (p, _) = dispatcher(
            source.clone(),
            v.slots,
            &selection,
            args.guards,
            args.metrics,
        )?;
        let mut out = Vec::with_capacity(4096);
        let replies: Vec<Vec<u8>> = queries
            .iter()
            .map(|wire| {
                p.handle(wire, Transport::Udp, CLIENT, &mut out);
                out.clone()
            })
            .collect();
        match &reference {
            None => reference = Some(replies),
            Some(r) => {
                if let Some(i) = r
                    .iter()
                    .zip(&replies)
                    .position(|(a, b)| a != b && !same_message(a, b))
                {
                    bail!(
                        "variant {} answers query #{} differently from {}",
                        v.name,
                        i + 1,
                        variants[0].name
                    );
                }
            }
        }
    }

    let mut rows = Vec::new();
    for v in &variants {
        let (p, cache) = dispatcher(
            source.clone(),
            v.slots,
            &selection,
            args.guards,
            args.metrics,
        )?;
        let mut out = Vec::with_capacity(4096);
        let start = Instant::now();
        let cpu_start = thread_cpu_seconds();
        for _ in 0..args.iterations {
            // In batches, as a UDP worker answers each `recvmmsg` batch.
            for batch in queries.chunks(UDP_BATCH) {
                let _batch = p.sources().batch();
                for wire in batch {
                    p.handle(wire, Transport::Udp, CLIENT, &mut out);
                }
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        let cpu_seconds = thread_cpu_seconds() - cpu_start;
        rows.push(Row {
            variant: v.name.clone(),
            slots: v.slot_count,
            queries: q * args.iterations,
            seconds,
            cpu_seconds,
            hit_rate: cache.map_or(0.0, |c| c.stats().hit_rate()),
        });
    }

    let backend = args.backend.label();
    if args.json {
        let items: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{{\"backend\":\"{backend}\",\"variant\":\"{}\",\"slots\":{},\"distinct_qnames\":{distinct},\"queries\":{},\"seconds\":{:.6},\"qps\":{:.2},\"cpu_seconds\":{:.6},\"hit_rate\":{:.4}}}",
                    r.variant,
                    r.slots.map_or("null".to_string(), |s| s.to_string()),
                    r.queries,
                    r.seconds,
                    r.queries as f64 / r.seconds,
                    r.cpu_seconds,
                    r.hit_rate
                )
            })
            .collect();
        println!("[{}]", items.join(","));
    } else {
        println!("Parameters:");
        println!("  Iterations: {}", args.iterations);
        println!(
            "  Data source: type={backend}, file={}",
            args.datasource.display()
        );
        if let Some(o) = &args.origin {
            println!("  Origin: {o}");
        }
        println!(
            "  Query data: file={} ({q} queries, {distinct} distinct qnames, {skipped} lines skipped)",
            args.queryfile.display()
        );
        println!();
        println!(
            "{:<8} {:<10} {:>10} {:>12} {:>10} {:>14} {:>9} {:>14}",
            "backend",
            "variant",
            "slots",
            "queries",
            "seconds",
            "queries/s",
            "hit rate",
            "queries/CPU-s"
        );
        for r in &rows {
            println!(
                "{:<8} {:<10} {:>10} {:>12} {:>10.3} {:>14.0} {:>8.1}% {:>14.0}",
                backend,
                r.variant,
                r.slots.map_or("unlimited".to_string(), |s| s.to_string()),
                r.queries,
                r.seconds,
                r.queries as f64 / r.seconds,
                r.hit_rate * 100.0,
                r.queries as f64 / r.cpu_seconds
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    authd::allocator::tune();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("query-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether two replies decode to the same message (names expanded).
fn same_message(a: &[u8], b: &[u8]) -> bool {
    use hickory_proto::op::Message;
    match (Message::from_vec(a), Message::from_vec(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_line_parses_or_says_why() {
        assert_eq!(query_line("  # comment"), Ok(None));
        assert_eq!(query_line("; dnsperf comment"), Ok(None));
        assert_eq!(query_line(";x"), Ok(None));
        assert_eq!(query_line(""), Ok(None));
        let wire = query_line("www.example. aaaa")
            .expect("parses")
            .expect("a query");
        assert_eq!(
            wire,
            [
                &[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0][..],
                b"\x03www\x07example\x00",
                &[0, 28, 0, 1],
            ]
            .concat()
        );
        assert_eq!(
            query_line("www.example."),
            Err("expected `qname qtype`".into())
        );
        assert_eq!(
            query_line("www..example. A"),
            Err("bad qname: empty label in \"www..example.\"".into())
        );
        assert_eq!(
            query_line("www.example. AAA"),
            Err("unknown record type \"AAA\"".into())
        );
        assert_eq!(
            query_line("www.example. A IN"),
            Err("expected `qname qtype`, not also \"IN\"".into())
        );
        // An escaped space stays inside the qname: label "a b", then "example".
        let wire = query_line("a\\ b.example. TXT")
            .expect("parses")
            .expect("query");
        assert_eq!(&wire[12..25], b"\x03a b\x07example\x00");
        assert_eq!(&wire[25..27], &16u16.to_be_bytes());
    }

    #[test]
    fn slot_counts_parse_and_scale() {
        assert_eq!(parse_slots("5000"), Ok(SlotCount::Absolute(5000)));
        assert_eq!(parse_slots("0"), Ok(SlotCount::Absolute(0)));
        assert_eq!(parse_slots("12.5%"), Ok(SlotCount::Percent(12.5)));
        assert_eq!(
            parse_slots("0%"),
            Err("\"0%\": expected a positive percentage, such as 50%".into())
        );
        assert_eq!(
            parse_slots("half"),
            Err("\"half\": expected a slot count or a percentage, such as 50%".into())
        );
        // 1% of 176,906 is 1,769.06: rounded up. Never below one slot.
        assert_eq!(SlotCount::Percent(1.0).count(176_906), 1_770);
        assert_eq!(SlotCount::Percent(200.0).count(176_906), 353_812);
        assert_eq!(SlotCount::Percent(1.0).count(3), 1);
        assert_eq!(SlotCount::Absolute(7).count(176_906), 7);
        assert_eq!(SlotCount::Percent(12.5).label(), "12.5%");
        assert_eq!(SlotCount::Absolute(7).label(), "7");
    }

    #[test]
    fn distinct_qnames_fold_case() {
        let queries: Vec<Vec<u8>> = [
            "a.example. A",
            "A.Example. AAAA",
            "b.example. A",
            "a.example. MX",
        ]
        .iter()
        .map(|l| query_line(l).expect("parses").expect("a query"))
        .collect();
        assert_eq!(distinct_qnames(&queries), 2);
    }

    /// The first five skipped lines are named with line number and reason,
    /// the rest counted; the queries around them are kept.
    #[test]
    fn read_queries_names_first_skipped_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("queries.txt");
        let text = "# queries\na.example. A\nbad\nb..example. A\n\nc.example. XYZ\nd e f\n\
                    e.example. MX\nf\ng\nh\n";
        std::fs::write(&path, text).expect("write");
        let mut notes = Vec::new();
        let (queries, skipped) = read_queries(&path, &mut notes).expect("reads");
        assert_eq!(queries.len(), 2);
        assert_eq!(skipped, 7);
        let p = path.display();
        assert_eq!(
            String::from_utf8(notes).expect("utf-8"),
            format!(
                "{p}:3: skipped: expected `qname qtype` (bad)\n\
                 {p}:4: skipped: bad qname: empty label in \"b..example.\" (b..example. A)\n\
                 {p}:6: skipped: unknown record type \"XYZ\" (c.example. XYZ)\n\
                 {p}:7: skipped: unknown record type \"e\" (d e f)\n\
                 {p}:9: skipped: expected `qname qtype` (f)\n\
                 ... and 2 more skipped lines\n"
            )
        );
    }
}
