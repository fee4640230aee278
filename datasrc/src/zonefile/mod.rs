//! Master files (RFC 1035 §5): reading records with their file and line, and
//! ([`check_zone`], in `check.rs`) the zone checks every loader applies before
//! a zone may replace a served one.
//!
//! Scanning is NLnet Labs' `domain` zonefile scanner (decimal `\DDD` escapes,
//! case-preserving names, `$ORIGIN`); this module adds `$INCLUDE`
//! resolution, line tracking, TTLs with units (`1h30m`, as BIND, NSD and Knot
//! DNS read them) and the RDATA of every type, read by `rdata_text` and handed
//! to the scanner in RFC 3597 form (`rdata.rs`), all over the one
//! tokenization of `lex.rs`.
//!
//! The TTL of a record that states none is BIND 9's: the `$TTL` in force,
//! across `$INCLUDE` both ways (RFC 2308 §4); without one, the MINIMUM of a
//! SOA that states no TTL and comes before any, from that SOA on; else the TTL
//! last stated (RFC 1035 §5.1); a record with none of these is refused. A TTL
//! over 2^31 - 1 is taken as 0 (RFC 2181 §8), one over 32 bits refused.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use domain::base::ToName;
use domain::base::iana::Class as DClass;
use domain::base::rdata::ComposeRecordData;
use domain::zonefile::inplace::{Entry, Zonefile};

use rayon::prelude::*;

use crate::name::Name;
use crate::rdata_text::to_domain_name;
use crate::rdata_text::types::{ttl_with_units, units_total};
use crate::rr::{Class, RType, Rdata, Record};

mod check;
mod lex;
mod rdata;

pub use check::{check_pieces, check_zone};
use lex::{Directive, EntryStart, Lexed, lex};

/// Largest TTL, seconds (RFC 2181 §8: the top bit must be clear).
pub const MAX_TTL: u32 = i32::MAX as u32;

/// Deepest `$INCLUDE` nesting accepted; deeper is taken as a loop.
const MAX_INCLUDE_DEPTH: usize = 16;

/// A record together with where it was read.
#[derive(Clone, Debug)]
pub struct SourcedRecord {
    /// The record.
    pub record: Record,
    /// The file it came from.
    pub file: Arc<PathBuf>,
    /// 1-based line where its entry starts.
    pub line: usize,
}

/// A master-file or zone-content error, located by file and line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}: {message}", file.display())]
pub struct ZoneFileError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line, 0 when the error concerns the whole zone.
    pub line: usize,
    /// What is wrong, naming the offending owner name where there is one.
    pub message: String,
}

/// Reads the master file at `path` for the zone `origin`, following `$INCLUDE`
/// (paths relative to the including file's folder).
///
/// Errors: I/O errors and syntax errors, each with file and line. Zone-level
/// checks are separate: see [`check_zone`].
pub fn read_master_file(path: &Path, origin: &Name) -> Result<Vec<SourcedRecord>, ZoneFileError> {
    let mut pieces = read_master_file_in(path, origin, PIECE)?;
    if pieces.len() == 1 {
        return Ok(pieces.pop().unwrap_or_default());
    }
    Ok(pieces.into_iter().flatten().collect())
}

/// [`read_master_file`]'s records as the pieces they were read in, in file
/// order, each piece's records in its own block: a consumer that takes them
/// piece by piece ([`crate::memory::MemoryZone::from_sourced_pieces`]) frees
/// each block once used, so the records of a large zone and the zone built
/// from them are never held whole at once. Check them with [`check_pieces`].
///
/// Errors: as [`read_master_file`].
pub fn read_master_file_pieces(
    path: &Path,
    origin: &Name,
) -> Result<Vec<Vec<SourcedRecord>>, ZoneFileError> {
    read_master_file_in(path, origin, PIECE)
}

/// Master files larger than this are read in pieces of about this size,
/// bytes, in parallel (see [`parse_pieces`]); 1 MiB is some 20,000 records,
/// so each piece's scratch memory is small and the pieces spread evenly.
const PIECE: usize = 1 << 20;

/// [`read_master_file_pieces`] with pieces of about `piece` bytes (tests use
/// small ones); never an empty list.
fn read_master_file_in(
    path: &Path,
    origin: &Name,
    piece: usize,
) -> Result<Vec<Vec<SourcedRecord>>, ZoneFileError> {
    let data = read_file(path)?;
    let out = match parse_pieces(&data, path, origin, piece) {
        Some(out) => out,
        None => {
            let mut out = Vec::new();
            parse_into(&data, path, origin, 0, 0, &mut Ttls::default(), &mut out)?;
            vec![out]
        }
    };
    if out.iter().all(Vec::is_empty) {
        return Err(ZoneFileError {
            file: path.to_path_buf(),
            line: 0,
            message: format!("no SOA at the zone apex {origin} (the file holds no records)"),
        });
    }
    Ok(out)
}

/// Parses master-file text as if read from `file` (used for in-memory text and tests).
///
/// Errors: as [`read_master_file`].
pub fn parse_master_text(
    text: &str,
    file: &Path,
    origin: &Name,
) -> Result<Vec<SourcedRecord>, ZoneFileError> {
    let mut out = Vec::new();
    parse_into(
        text.as_bytes(),
        file,
        origin,
        0,
        0,
        &mut Ttls::default(),
        &mut out,
    )?;
    Ok(out)
}

/// The TTL state of one load, shared by a file and every file it includes,
/// in both directions, as BIND 9 shares it: a `$TTL` applies to all the
/// records after it in the text the server reads (RFC 2308 §4), included
/// ones too, and so does the last TTL stated (RFC 1035 §5.1).
#[derive(Default)]
struct Ttls {
    /// The `$TTL` in force, or the SOA MINIMUM when the SOA came with no TTL
    /// of its own and none before it (BIND 9's fallback).
    default: Option<u32>,
    /// The TTL last stated on a record (RFC 1035 §5.1: "Omitted class and
    /// TTL values are default to the last explicitly stated values").
    last: Option<u32>,
    /// A record took the last stated TTL and that was said (once a load, as
    /// BIND 9 says "using RFC1035 TTL semantics" once).
    said_last: bool,
}

/// What an entry of a master file says about TTLs.
enum TtlWord {
    /// A record, with a TTL of its own or not.
    Record {
        /// It states its TTL.
        explicit: bool,
    },
    /// `$TTL` and its value in seconds (`None` when not a 32-bit number,
    /// which the scanner rejects).
    Default(Option<u32>),
    /// Another directive.
    Other,
}

/// Over [`MAX_TTL`]: 0, as RFC 2181 §8 says such a TTL is to be taken and as
/// BIND 9 does, with a warning naming `what` at `file`:`line`.
fn limit_ttl(ttl: u32, file: &Path, line: usize, what: &str) -> u32 {
    if ttl <= MAX_TTL {
        return ttl;
    }
    tracing::warn!(
        "{}:{line}: {what}{ttl} is over {MAX_TTL}: 0 used (RFC 2181 §8)",
        file.display()
    );
    0
}

fn read_into(
    path: &Path,
    origin: &Name,
    depth: usize,
    ttls: &mut Ttls,
    out: &mut Vec<SourcedRecord>,
) -> Result<(), ZoneFileError> {
    let data = read_file(path)?;
    parse_into(&data, path, origin, depth, 0, ttls, out)
}

/// The bytes of the regular file at `path`.
///
/// Errors: at line 0 of `path`, when it cannot be read or is not a regular file.
fn read_file(path: &Path) -> Result<Vec<u8>, ZoneFileError> {
    let fail = |message: String| ZoneFileError {
        file: path.to_path_buf(),
        line: 0,
        message,
    };
    // A device or pipe (`$INCLUDE /dev/zero`) could be read without end.
    let meta = std::fs::metadata(path).map_err(|e| fail(format!("cannot read: {e}")))?;
    if !meta.is_file() {
        return Err(fail("cannot read: not a regular file".into()));
    }
    std::fs::read(path).map_err(|e| fail(format!("cannot read: {e}")))
}

/// Reads master-file text in pieces cut at owner boundaries ([`lex::split`]),
/// in parallel, each piece starting from the `$ORIGIN` and `$TTL` the leading
/// directives set. The records, lines and warnings are those of one serial
/// read: `None` when the text does not split (see [`lex::split`]), has no
/// `$TTL` before its first record, is at most two pieces long, or when a piece
/// fails: the caller then reads it serially, which reports the error exactly
/// as ever (the first one in file order).
fn parse_pieces(
    data: &[u8],
    file: &Path,
    origin: &Name,
    piece: usize,
) -> Option<Vec<Vec<SourcedRecord>>> {
    if data.len() <= 2 * piece {
        return None;
    }
    let split = lex::split(data, piece)?;
    let (later_origin, default) = header_state(&data[..split.header_end], origin)?;
    let mut pieces: Vec<(std::ops::Range<usize>, usize)> = Vec::new();
    for (i, &(start, line)) in split.starts.iter().enumerate() {
        let end = split
            .starts
            .get(i + 1)
            .map_or(data.len(), |&(next, _)| next);
        pieces.push((start..end, line));
    }
    let mut out = Vec::with_capacity(pieces.len());
    // A few pieces per thread at a time: only their scratch memory and
    // records exist besides `out`.
    let wave = 2 * rayon::current_num_threads().max(1);
    for group in pieces.chunks(wave) {
        let parsed: Vec<Result<Vec<SourcedRecord>, ZoneFileError>> = group
            .par_iter()
            .map(|(range, line)| {
                let first = range.start == 0;
                // With a `$TTL` in force the TTL last stated is never used.
                let mut ttls = Ttls {
                    default: (!first).then_some(default),
                    ..Ttls::default()
                };
                let here = if first { origin } else { &later_origin };
                let mut recs = Vec::new();
                let data = data.get(range.clone()).unwrap_or_default();
                parse_into(data, file, here, 0, line - 1, &mut ttls, &mut recs)?;
                Ok(recs)
            })
            .collect();
        for recs in parsed {
            out.push(recs.ok()?);
        }
    }
    Some(out)
}

/// The origin and default TTL that the leading directives `header` (only
/// `$ORIGIN` and `$TTL`, one argument each) leave in force; `None` for
/// anything else, or when no `$TTL` is among them.
fn header_state(header: &[u8], origin: &Name) -> Option<(Name, u32)> {
    let lexed = lex(header);
    let mut current = origin.clone();
    let mut default = None;
    for (_, words) in lexed.iter() {
        let [word, arg] = words else { return None };
        let (word, arg) = (&header[word.clone()], &header[arg.clone()]);
        if word.eq_ignore_ascii_case(b"$ORIGIN") {
            current = Name::parse(std::str::from_utf8(arg).ok()?, Some(&current)).ok()?;
        } else if word.eq_ignore_ascii_case(b"$TTL") {
            let ttl = std::str::from_utf8(arg)
                .ok()
                .and_then(|t| t.parse::<u32>().ok())
                .or_else(|| ttl_with_units(arg))?;
            // As `limit_ttl`, whose warning the first piece gives.
            default = Some(if ttl <= MAX_TTL { ttl } else { 0 });
        } else {
            return None;
        }
    }
    Some((current, default?))
}

fn name_from_domain(n: &impl ToName) -> Result<Name, String> {
    let mut wire = Vec::with_capacity(64);
    for label in n.iter_labels() {
        wire.push(label.len() as u8);
        wire.extend_from_slice(label.as_slice());
    }
    Name::from_wire(&wire).map_err(|e| e.to_string())
}

/// Master-file text with every TTL written with units (`1h30m`, `2D`, `1w`:
/// s, m, h, d, w, any case, each number followed by its unit) rewritten as
/// decimal seconds, which is all the RFC 1035 scanner reads. BIND, NSD and Knot
/// DNS accept units, so zone files use them. Rewritten: the TTL of a record
/// (before or after its class), the value of `$TTL`, and the four timers of an
/// SOA (refresh, retry, expire, minimum). Nothing else is touched (a TXT string
/// "1h" stays), and lines are kept, so errors still name the right line. A
/// value over 32 bits is left as written, for the scanner to reject.
///
/// Returns the text and its [`Lexed`] form.
fn expand_ttl_units(data: &[u8]) -> (std::borrow::Cow<'_, [u8]>, Lexed) {
    let lexed = lex(data);
    let mut edits: Vec<(std::ops::Range<usize>, u32)> = Vec::new();
    for (entry, words) in lexed.iter() {
        let tok = |i: usize| words.get(i).map(|r| &data[r.clone()]);
        let mut edit = |i: usize| {
            if let (Some(r), Some(secs)) = (words.get(i), tok(i).and_then(ttl_with_units)) {
                edits.push((r.clone(), secs));
            }
        };
        let Some(first) = tok(0) else {
            continue;
        };
        if first.first() == Some(&b'$') {
            if first.eq_ignore_ascii_case(b"$TTL") {
                edit(1);
            }
            continue;
        }
        // [owner] [TTL] [class] type, or [owner] [class] [TTL] type (RFC 1035 §5.1).
        let mut i = usize::from(entry.owner);
        for _ in 0..2 {
            let Some(t) = tok(i) else { break };
            if is_class(t) || t.iter().all(u8::is_ascii_digit) {
                i += 1;
            } else if ttl_with_units(t).is_some() {
                edit(i);
                i += 1;
            } else {
                break;
            }
        }
        // SOA rdata: mname rname serial refresh retry expire minimum.
        if tok(i).is_some_and(|t| t.eq_ignore_ascii_case(b"SOA")) {
            for timer in i + 4..=i + 7 {
                edit(timer);
            }
        }
    }
    if edits.is_empty() {
        return (std::borrow::Cow::Borrowed(data), lexed);
    }
    let mut out = Vec::with_capacity(data.len());
    let mut at = 0;
    for (range, secs) in edits {
        out.extend_from_slice(&data[at..range.start]);
        out.extend_from_slice(secs.to_string().as_bytes());
        at = range.end;
    }
    out.extend_from_slice(&data[at..]);
    // The same entries and lines, but the words after each edit have moved:
    // lexed again, the old words freed first.
    drop(lexed);
    let lexed = lex(&out);
    (std::borrow::Cow::Owned(out), lexed)
}

/// A class mnemonic (RFC 1035 §5.1, RFC 3597 `CLASSnn`).
fn is_class(t: &[u8]) -> bool {
    [&b"IN"[..], b"CH", b"HS", b"CS"]
        .iter()
        .any(|c| t.eq_ignore_ascii_case(c))
        || t.len() > 5 && t[..5].eq_ignore_ascii_case(b"CLASS")
}

/// The start line of the entry a scanner error at `err_line`/`err_col` belongs
/// to, among `candidates` (the entries after the last one returned).
fn error_line(candidates: &[EntryStart], err_line: usize, err_col: usize) -> usize {
    let Some(i) = candidates.iter().rposition(|e| e.line <= err_line) else {
        return candidates.first().map_or(err_line, |e| e.line);
    };
    // The scanner reports an error found at an entry's end on the next line.
    if i > 0 && err_col <= 1 && candidates[i].line == err_line {
        candidates[i - 1].line
    } else {
        candidates[i].line
    }
}

/// Reads master-file text into `out`; `line_base` is added to the lines of
/// the records and warnings (the text's first line is line `line_base + 1`
/// of `file`).
fn parse_into(
    data: &[u8],
    file: &Path,
    origin: &Name,
    depth: usize,
    line_base: usize,
    ttls: &mut Ttls,
    out: &mut Vec<SourcedRecord>,
) -> Result<(), ZoneFileError> {
    // A panic in the third-party scanner on input the checks here do not
    // foresee fails this file only, not the tool or the whole reload.
    let scanned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        scan_into(data, file, origin, depth, line_base, ttls, out, true)
    }));
    scanned.unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(ZoneFileError {
            file: file.to_path_buf(),
            line: 0,
            message: format!("the zone file scanner failed on this file (a bug: {what})"),
        })
    })
}

/// [`parse_into`] without its guard; `plain`: plain text is read without
/// the scanner ([`rdata::read_plain`]; tests compare the two paths).
#[allow(clippy::too_many_arguments)]
fn scan_into(
    data: &[u8],
    file: &Path,
    origin: &Name,
    depth: usize,
    line_base: usize,
    ttls: &mut Ttls,
    out: &mut Vec<SourcedRecord>,
    plain: bool,
) -> Result<(), ZoneFileError> {
    let (data, lexed) = expand_ttl_units(data);
    let data = &*data;
    let err = |line: usize, message: String| ZoneFileError {
        file: file.to_path_buf(),
        line,
        message,
    };
    if depth > MAX_INCLUDE_DEPTH {
        return Err(err(0, "$INCLUDE nested too deeply (a loop?)".into()));
    }
    // The scanner (domain 0.12) panics on a file that ends inside parentheses.
    if let Some(line) = lexed.unclosed {
        return Err(err(
            line,
            "syntax error: '(' not closed before the end of the file".into(),
        ));
    }
    // The scanner takes any `$ORIGIN` and fails only at the next relative
    // owner, a line later and without saying why.
    if let Some((line, message)) = bad_origin_directive(data, &lexed, origin) {
        return Err(err(line, message));
    }
    let file_arc = Arc::new(file.to_path_buf());
    if plain && rdata::read_plain(data, &lexed, origin, &file_arc, line_base, ttls, out) {
        return Ok(());
    }
    // Every RDATA read here, handed to the scanner in RFC 3597 form.
    let rewritten = rdata::rdata_to_generic(data, &lexed, origin, file)?;
    let (data, lexed) = match &rewritten {
        Some(text) => {
            drop(lexed);
            (&text[..], lex(text))
        }
        None => (data, lexed),
    };
    // The scanner's own TTL defaults stop at the file's end: TTLs are taken
    // here, from what each entry says and the state shared with includes.
    let ttl_words = ttl_words(data, &lexed);
    // The scan needs only where entries start: the words are freed first.
    let starts = lexed.into_entries();
    let mut zf = Zonefile::with_capacity(data.len()).allow_invalid();
    zf.extend_from_slice(data);
    zf.set_origin(to_domain_name(origin).map_err(|e| err(0, e.to_string()))?);
    zf.set_default_class(DClass::IN);
    // Index in `starts` just past the last entry the scanner handed back.
    let mut next = 0usize;
    loop {
        let entry = match zf.next_entry() {
            Ok(Some(e)) => e,
            Ok(None) => break,
            Err(e) => {
                // The scanner's error text is "line:col: message".
                let text = e.to_string();
                let mut parts = text.splitn(3, ':');
                let l = parts
                    .next()
                    .and_then(|p| p.trim().parse().ok())
                    .unwrap_or(0);
                let c = parts
                    .next()
                    .and_then(|p| p.trim().parse().ok())
                    .unwrap_or(0);
                let msg = parts.next().map_or(text.as_str(), str::trim);
                let line = error_line(starts.get(next..).unwrap_or(&[]), l, c);
                if let Some((owner, ttl)) = oversized_ttl(data, line) {
                    let what = match owner {
                        Some(o) if o.eq_ignore_ascii_case("$TTL") => "$TTL ".to_string(),
                        Some(o) => {
                            let current = zf.origin().ok().and_then(|o| name_from_domain(&o).ok());
                            match Name::parse(&o, Some(current.as_ref().unwrap_or(origin))) {
                                Ok(name) => format!("{name}: TTL "),
                                Err(_) => format!("{o}: TTL "),
                            }
                        }
                        // A blank owner repeats the last one of this file.
                        None => out
                            .iter()
                            .rev()
                            .find(|r| *r.file == file)
                            .map_or("TTL ".into(), |r| format!("{}: TTL ", r.record.owner)),
                    };
                    return Err(err(
                        line,
                        format!("{what}{ttl} does not fit in 32 bits (RFC 1035 §3.2.1)"),
                    ));
                }
                if msg == "expected rtype"
                    && let Some(word) = unknown_type(data, line)
                {
                    return Err(err(line, unknown_type_message(&word)));
                }
                return Err(err(line, format!("syntax error: {msg}")));
            }
        };
        // Directives the scanner consumed itself do not come back as entries.
        next = consumed_directives(&starts, &ttl_words, next, ttls, file);
        let start_line = starts.get(next).map_or(0, |e| e.line + line_base);
        let explicit = matches!(
            ttl_words.get(next),
            Some(TtlWord::Record { explicit: true })
        );
        next += 1;
        match entry {
            Entry::Record(rec) => {
                let owner = name_from_domain(rec.owner())
                    .map_err(|e| err(start_line, format!("bad owner name: {e}")))?;
                let rtype = RType(rec.rtype().to_int());
                let mut wire = Vec::with_capacity(64);
                rec.data()
                    .compose_rdata(&mut wire)
                    .map_err(|_| err(start_line, format!("{owner} {rtype}: rdata too long")))?;
                if wire.len() > u16::MAX as usize {
                    return Err(err(start_line, format!("{owner} {rtype}: rdata too long")));
                }
                let rdata = Rdata::from_wire(&wire);
                let ttl = if explicit {
                    let what = format!("{owner} {rtype}: TTL ");
                    let ttl = limit_ttl(rec.ttl().as_secs(), file, start_line, &what);
                    ttls.last = Some(ttl);
                    ttl
                } else if let Some(ttl) = ttls.default {
                    ttl
                } else if let Some(ttl) = ttls.last {
                    if !ttls.said_last {
                        ttls.said_last = true;
                        tracing::warn!(
                            "{}:{start_line}: no $TTL: this record and the next without a TTL \
                             get the TTL last stated, {ttl} s (RFC 1035 §5.1); add a $TTL line",
                            file.display()
                        );
                    }
                    ttl
                } else if let Some(minimum) = rdata.soa_minimum().filter(|_| rtype == RType::SOA) {
                    tracing::warn!(
                        "{}:{start_line}: no $TTL and no TTL before the SOA: it and the records \
                         without a TTL after it get the SOA minimum, {minimum} s (as BIND 9); \
                         add a $TTL line",
                        file.display()
                    );
                    let ttl = limit_ttl(minimum, file, start_line, "SOA minimum ");
                    ttls.default = Some(ttl);
                    ttl
                } else {
                    return Err(err(
                        start_line,
                        format!(
                            "{owner} {rtype}: no TTL, and no $TTL, earlier TTL or SOA before it \
                             to take one from (BIND 9 refuses it too); add a $TTL line"
                        ),
                    ));
                };
                out.push(SourcedRecord {
                    record: Record {
                        owner,
                        rtype,
                        class: Class(rec.class().to_int()),
                        ttl,
                        rdata,
                    },
                    file: file_arc.clone(),
                    line: start_line,
                });
            }
            Entry::Include {
                path,
                origin: inc_origin,
            } => {
                let inc_path = {
                    let p = PathBuf::from(path.to_string());
                    if p.is_absolute() {
                        p
                    } else {
                        file.parent().unwrap_or(Path::new(".")).join(p)
                    }
                };
                let inc_origin = match inc_origin {
                    Some(o) => name_from_domain(&o).map_err(|e| err(start_line, e))?,
                    None => match zf.origin() {
                        Ok(o) => name_from_domain(&o).map_err(|e| err(start_line, e))?,
                        Err(_) => origin.clone(),
                    },
                };
                read_into(&inc_path, &inc_origin, depth + 1, ttls, out).map_err(|e| {
                    if e.line == 0 && e.file == inc_path {
                        err(
                            start_line,
                            format!("$INCLUDE {}: {}", inc_path.display(), e.message),
                        )
                    } else {
                        e
                    }
                })?;
            }
        }
    }
    // A `$TTL` after the last record still holds for the including file.
    consumed_directives(&starts, &ttl_words, next, ttls, file);
    Ok(())
}

/// The line and message of the first `$ORIGIN` whose name does not parse
/// (an empty label, a label over 63 bytes, a name over 255), if any.
fn bad_origin_directive(data: &[u8], lexed: &Lexed, origin: &Name) -> Option<(usize, String)> {
    lexed.iter().find_map(|(entry, words)| {
        let first = words.first()?;
        if !data[first.clone()].eq_ignore_ascii_case(b"$ORIGIN") {
            return None;
        }
        let line = entry.line;
        let Some(arg) = words.get(1) else {
            return Some((line, "$ORIGIN without a name".to_string()));
        };
        let text = String::from_utf8_lossy(&data[arg.clone()]);
        Name::parse(&text, Some(origin))
            .err()
            .map(|e| (line, format!("$ORIGIN {text}: {e}")))
    })
}

/// Applies the `$TTL` directives among the entries from `next` on that the
/// scanner consumed itself (`$ORIGIN`, `$TTL`) and returns the index of the
/// first entry that is not one.
fn consumed_directives(
    starts: &[EntryStart],
    ttl_words: &[TtlWord],
    mut next: usize,
    ttls: &mut Ttls,
    file: &Path,
) -> usize {
    while let Some(e) = starts
        .get(next)
        .filter(|e| e.directive == Some(Directive::Internal))
    {
        if let Some(TtlWord::Default(Some(ttl))) = ttl_words.get(next) {
            ttls.default = Some(limit_ttl(*ttl, file, e.line, "$TTL "));
        }
        next += 1;
    }
    next
}

/// What each entry of `lexed` says about TTLs, in entry order. `data` has
/// TTL units already expanded.
fn ttl_words(data: &[u8], lexed: &Lexed) -> Vec<TtlWord> {
    lexed
        .iter()
        .map(|(entry, words)| {
            let tok = |i: usize| words.get(i).map(|r| &data[r.clone()]);
            let Some(first) = tok(0) else {
                return TtlWord::Other;
            };
            if entry.directive.is_some() {
                if !first.eq_ignore_ascii_case(b"$TTL") {
                    return TtlWord::Other;
                }
                let value = tok(1)
                    .and_then(|t| std::str::from_utf8(t).ok())
                    .and_then(|t| t.parse().ok());
                return TtlWord::Default(value);
            }
            // [owner] [TTL] [class] type, or [owner] [class] [TTL] type (RFC 1035 §5.1).
            let at = usize::from(entry.owner);
            let mut explicit = false;
            for t in (at..at + 2).map_while(tok) {
                if !t.is_empty() && t.iter().all(u8::is_ascii_digit) {
                    explicit = true;
                } else if !is_class(t) {
                    break; // the type
                }
            }
            TtlWord::Record { explicit }
        })
        .collect()
}

/// The word where the record entry starting at `line` of `data` names its
/// type, when it is not a type the scanner knows (`AX`): the first word after
/// the owner that is neither a class nor a number. `None` for a directive, or
/// when that word starts with a digit (a malformed TTL such as `1x`, which the
/// scanner also reports as "expected rtype").
fn unknown_type(data: &[u8], line: usize) -> Option<String> {
    let lexed = lex(data);
    let (entry, words) = lexed.iter().find(|(e, _)| e.line == line)?;
    let mut words = words.iter().map(|r| &data[r.clone()]);
    if entry.owner && words.next()?.starts_with(b"$") {
        return None;
    }
    let word = words
        .take(3)
        .find(|t| !is_class(t) && !t.iter().all(u8::is_ascii_digit))?;
    if word.first().is_none_or(u8::is_ascii_digit) {
        return None;
    }
    Some(String::from_utf8_lossy(word).into_owned())
}

/// The error for type name `word` that is not known here: the RFC 3597 form
/// any type can be written in.
fn unknown_type_message(word: &str) -> String {
    format!(
        "unknown type {word}; write a type without a name here as TYPEnnn with \\# RDATA \
         (RFC 3597 §5), e.g. TYPE65280 \\# 2 abcd"
    )
}

/// A TTL too large for the 32-bit field at all (units included), in the
/// entry starting at `line` of `data`: the scanner takes it for a type
/// ("expected rtype") or, after `$TTL`, reports an overflow, neither of which
/// names the real problem.
/// Returns the owner as written (`None` when blank; `$TTL` for the directive)
/// and the TTL as written.
fn oversized_ttl(data: &[u8], line: usize) -> Option<(Option<String>, String)> {
    // An error path: lexing the file again costs less than keeping every word
    // of it while the scanner runs.
    let lexed = lex(data);
    let (entry, words) = lexed.iter().find(|(e, _)| e.line == line)?;
    let mut words = words.iter().map(|r| &data[r.clone()]);
    let owner = if entry.owner {
        Some(words.next()?)
    } else {
        None
    };
    let candidates = match owner {
        Some(o) if o.eq_ignore_ascii_case(b"$TTL") => 1,
        Some(o) if o.starts_with(b"$") => return None,
        // [<TTL>] [<class>] <type> or [<class>] [<TTL>] <type> (RFC 1035 §5.1).
        _ => 2,
    };
    let ttl = words.take(candidates).find(|t| {
        !t.is_empty()
            && t.iter().all(u8::is_ascii_digit)
            && std::str::from_utf8(t).is_ok_and(|t| t.parse::<u32>().is_err())
            || units_total(t).is_some_and(|total| total > u64::from(u32::MAX))
    })?;
    let text = |w: &[u8]| String::from_utf8_lossy(w).into_owned();
    Some((owner.map(text), text(ttl)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` read by the plain reader (`None` when it declines) and by the
    /// scanner path, each from a fresh TTL state.
    fn both_paths(
        text: &[u8],
        origin: &Name,
    ) -> (
        Option<Vec<SourcedRecord>>,
        Result<Vec<SourcedRecord>, ZoneFileError>,
    ) {
        let file = Path::new("z");
        let (data, lexed) = expand_ttl_units(text);
        let mut plain = Vec::new();
        let took = rdata::read_plain(
            &data,
            &lexed,
            origin,
            &Arc::new(file.to_path_buf()),
            0,
            &mut Ttls::default(),
            &mut plain,
        );
        let mut scanned = Vec::new();
        let res = scan_into(
            text,
            file,
            origin,
            0,
            0,
            &mut Ttls::default(),
            &mut scanned,
            false,
        );
        (took.then_some(plain), res.map(|()| scanned))
    }

    fn same_records(a: &[SourcedRecord], b: &[SourcedRecord]) -> Result<(), String> {
        if a.len() != b.len() {
            return Err(format!("{} records against {}", a.len(), b.len()));
        }
        for (x, y) in a.iter().zip(b) {
            let (r, s) = (&x.record, &y.record);
            if !r.owner.eq_case(&s.owner)
                || (r.rtype, r.class, r.ttl, x.line) != (s.rtype, s.class, s.ttl, y.line)
                || r.rdata.as_wire() != s.rdata.as_wire()
            {
                return Err(format!(
                    "line {}: {} {} {} {:?} against line {}: {} {} {} {:?}",
                    x.line,
                    r.owner,
                    r.ttl,
                    r.rtype,
                    r.rdata.as_wire(),
                    y.line,
                    s.owner,
                    s.ttl,
                    s.rtype,
                    s.rdata.as_wire()
                ));
            }
        }
        Ok(())
    }

    /// The plain reader gives exactly the scanner path's records (owner case,
    /// TTL, type, class, RDATA, line) on every plain zone file of the
    /// repository and on text using what master files use: escapes, `@`,
    /// relative names, `$ORIGIN`, TTL units, the class before or after the
    /// TTL, blank owners, parentheses across lines, quoted strings with
    /// spaces and line breaks, RFC 3597 RDATA and `TYPEnnn`.
    #[test]
    fn the_plain_reader_reads_what_the_scanner_reads() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data");
        let files: [(&str, &str); 6] = [
            ("root.zone", "."),
            ("rrtypes/every-type.zone", "example."),
            ("bind10/example.org.nsec3-signed", "example.org."),
            ("bind10/rfc5155-example.zone.signed", "example."),
            ("bind10/loadzone/normal/example.com.signed", "example.com."),
            ("bind10/loadzone/testdata/example.org.zone", "example.org."),
        ];
        let synthetic = "$TTL 1h30m\n\
            @ IN SOA ns.example.org. host\\.master.example.org. ( 2026 1h 15m\n 1w 5m )\n\
            \t NS ns\n\
            ns 300 IN A 192.0.2.1\n\
            \t IN 60 AAAA 2001:db8::1\n\
            W\\065W.Sub 2d TXT \"two words\" \"a\\\"quote\" (\n \"spans\nlines\" )\n\
            @ MX 10 mail\n\
            mail A 192.0.2.2\n\
            *.wild CNAME @\n\
            $ORIGIN sub.example.org.\n\
            x TYPE65280 \\# 2 ABCD\n\
            y TYPE1 \\# 4 C0000201\n\
            z 1W SRV 0 5 5060 sip.example.org.\n\
            $TTL 42\n\
            last A 192.0.2.3 ; comment\n";
        let mut cases: Vec<(String, Vec<u8>, Name)> = files
            .iter()
            .map(|(f, o)| {
                let text = std::fs::read(data.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
                (f.to_string(), text, o.parse().expect("origin"))
            })
            .collect();
        cases.push(("synthetic".into(), synthetic.as_bytes().to_vec(), origin()));
        for (what, text, origin) in &cases {
            let (plain, scanned) = both_paths(text, origin);
            let plain = plain.unwrap_or_else(|| panic!("{what}: the plain reader declined"));
            let scanned = scanned.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(!plain.is_empty(), "{what}");
            if let Err(e) = same_records(&plain, &scanned) {
                panic!("{what}: {e}");
            }
        }
    }

    /// What the plain reader declines, left to the scanner path (which
    /// reads it, or says what is wrong, and warns where BIND 9 would).
    #[test]
    fn the_plain_reader_declines_what_is_not_plain() {
        let soa = "@ 60 SOA ns hm 1 2 3 4 5\n";
        for text in [
            // no $TTL: the SOA's TTL is taken, with a warning
            format!("{soa}@ NS ns\n"),
            format!("$TTL 60\n{soa}$INCLUDE other.zone\n"),
            format!("$TTL 60\n{soa}x CH TXT hi\n"),
            format!("$TTL 60\n{soa}x 4294967296 A 192.0.2.1\n"),
            format!("$TTL 60\n{soa}x 2147483648 A 192.0.2.1\n"),
            format!("$TTL 2147483648\n{soa}"),
            format!("$TTL 60\n{soa}x A 192.0.2.300\n"),
            format!("$TTL 60\n{soa}x AX 192.0.2.1\n"),
            format!("$TTL 60\n{soa}$GENERATE 1-2 h$ A 192.0.2.$\n"),
            format!("$TTL 60\n\tA 192.0.2.1\n{soa}"),
        ] {
            let (plain, _) = both_paths(text.as_bytes(), &origin());
            assert!(plain.is_none(), "{text:?} read plain");
        }
    }

    fn origin() -> Name {
        "example.org.".parse().expect("name")
    }

    fn ttls(text: &str) -> Vec<u32> {
        parse_master_text(text, Path::new("z"), &origin())
            .unwrap_or_else(|e| panic!("{text:?}: {e}"))
            .iter()
            .map(|r| r.record.ttl)
            .collect()
    }

    /// The TTL of a record that states none, as BIND 9 gives it (each case
    /// measured with `named-checkzone -D`, BIND 9.18): the `$TTL` in force;
    /// with none, from a SOA that states no TTL and has none before it, its
    /// MINIMUM, for it and every record without a TTL after it, as if it
    /// were a `$TTL`; otherwise the TTL last stated (RFC 1035 §5.1), the
    /// class before or after it.
    #[test]
    fn a_record_without_ttl_gets_bind9s() {
        let soa = "@ SOA ns hm 1 2 3 4 5\n";
        let cases: [(String, &[u32]); 8] = [
            (
                format!("{soa}www 60 A 192.0.2.1\n@ NS ns\nns A 192.0.2.9\n"),
                &[5, 60, 5, 5],
            ),
            (
                format!("{soa}$TTL 7\n@ NS ns\nns 8 A 192.0.2.9\nx A 192.0.2.8\n"),
                &[5, 7, 8, 7],
            ),
            (
                "@ 10 SOA ns hm 1 2 3 4 5\n@ NS ns\nwww IN 60 A 192.0.2.1\nns A 192.0.2.9\n"
                    .into(),
                &[10, 10, 60, 60],
            ),
            (
                "www 60 IN A 192.0.2.1\n@ IN SOA ns hm 1 2 3 4 5\n@ NS ns.example.net.\n".into(),
                &[60, 60, 60],
            ),
            (format!("$TTL 7\n{soa}@ 60 NS ns\nns A 192.0.2.9\n"), &[7, 60, 7]),
            // Not TTLs: an owner `1`, an MX preference with no owner.
            (
                format!("$TTL 7\n{soa}@ NS ns.example.net.\n1 IN PTR host.example.\n MX 10 mail\n"),
                &[7, 7, 7, 7],
            ),
            // Over 2^31 - 1: 0 (RFC 2181 §8), also as the TTL last stated.
            (
                "@ 2147483648 SOA ns hm 1 2 3 4 5\n@ NS ns.example.net.\n".into(),
                &[0, 0],
            ),
            (
                "$TTL 4294967295\n@ SOA ns hm 1 2 3 4 3000000000\n@ 2147483647 NS ns.example.net.\n"
                    .into(),
                &[0, 2_147_483_647],
            ),
        ];
        for (text, want) in cases {
            assert_eq!(ttls(&text), want, "{text:?}");
        }
        // The SOA minimum over 2^31 - 1: 0 as well.
        assert_eq!(
            ttls("@ SOA ns hm 1 2 3 4 2147483648\n@ NS ns.example.net.\n"),
            [0, 0]
        );
    }

    /// No TTL, no `$TTL`, nothing stated before and no SOA before: refused
    /// (BIND 9: "no TTL specified; zone rejected").
    #[test]
    fn a_record_with_no_ttl_to_take_is_refused() {
        for (text, message) in [
            (
                "www A 192.0.2.1\n@ SOA ns hm 1 2 3 4 5\n",
                "z:1: www.example.org. A: no TTL, and no $TTL, earlier TTL or SOA before it to \
                 take one from (BIND 9 refuses it too); add a $TTL line",
            ),
            (
                "; c\n$ORIGIN sub\nns A 192.0.2.1\n@ SOA ns hm 1 2 3 4 5\n",
                "z:3: ns.sub.example.org. A: no TTL, and no $TTL, earlier TTL or SOA before it to \
                 take one from (BIND 9 refuses it too); add a $TTL line",
            ),
        ] {
            let e = parse_master_text(text, Path::new("z"), &origin()).expect_err(text);
            assert_eq!(e.to_string(), message, "{text:?}");
        }
    }

    /// `$TTL` and the TTL last stated hold across `$INCLUDE` both ways, as
    /// one text (BIND 9); `$ORIGIN` does not come back (RFC 1035 §5.1).
    #[test]
    fn ttls_carry_across_include() {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("write");
        };
        write(
            "main.zone",
            "@ SOA ns hm 1 2 3 4 5\n@ NS ns\n$INCLUDE a.inc\nafter TXT x\n\
             $INCLUDE b.inc sub\nlast TXT z\n",
        );
        write("a.inc", "$ORIGIN in.example.org.\ninc TXT y\n$TTL 7\n");
        write("b.inc", "b 20 TXT y\nc TXT y\n");
        let recs = read_master_file(&dir.path().join("main.zone"), &origin()).expect("reads");
        let got: Vec<(String, u32, String, usize)> = recs
            .iter()
            .map(|r| {
                let file = r.file.file_name().map(|f| f.to_string_lossy().into_owned());
                (
                    r.record.owner.to_string(),
                    r.record.ttl,
                    file.unwrap_or_default(),
                    r.line,
                )
            })
            .collect();
        let want = [
            ("example.org.", 5, "main.zone", 1),
            ("example.org.", 5, "main.zone", 2),
            ("inc.in.example.org.", 5, "a.inc", 2),
            ("after.example.org.", 7, "main.zone", 4),
            ("b.sub.example.org.", 20, "b.inc", 1),
            ("c.sub.example.org.", 7, "b.inc", 2),
            ("last.example.org.", 7, "main.zone", 6),
        ];
        let want: Vec<(String, u32, String, usize)> = want
            .iter()
            .map(|&(o, t, f, l)| (o.to_string(), t, f.to_string(), l))
            .collect();
        assert_eq!(got, want);
        // With no default, the TTL last stated in an included file holds after it.
        write(
            "main.zone",
            "@ 10 SOA ns hm 1 2 3 4 5\n$INCLUDE b.inc\nafter TXT x\n",
        );
        let recs = read_master_file(&dir.path().join("main.zone"), &origin()).expect("reads");
        let ttls: Vec<u32> = recs.iter().map(|r| r.record.ttl).collect();
        assert_eq!(ttls, [10, 20, 20, 20]);
    }

    #[test]
    fn parses_dnssec_types_escapes_and_case() {
        let text = "$TTL 300\n\
            @ IN SOA ns hostmaster 1 3600 1800 1814400 3600\n\
            @ NS ns\n\
            Ns A 192.0.2.1\n\
            a\\065b TXT \"x\\065\"\n\
            d DNAME target.example.\n\
            @ DNSKEY 257 3 8 AwEAAcOU NGV7WcTD\n\
            @ NSEC a.example.org. A NS SOA RRSIG NSEC DNSKEY\n\
            x 60 TYPE65534 \\# 5 0846480001\n\
            y A \\# 4 c0000202\n";
        let recs = parse_master_text(text, Path::new("t.zone"), &origin()).expect("parses");
        assert_eq!(recs.len(), 9);
        assert_eq!(recs[2].record.owner.to_string(), "Ns.example.org.");
        assert_eq!(recs[2].line, 4);
        assert_eq!(recs[3].record.owner.as_wire()[..4], *b"\x03aAb");
        assert_eq!(recs[3].record.rdata.as_wire(), b"\x02xA");
        assert_eq!(recs[4].record.rtype, RType::DNAME);
        assert_eq!(
            recs[4].record.rdata.to_text(RType::DNAME).expect("text"),
            "target.example."
        );
        assert_eq!(recs[7].record.ttl, 60);
        assert_eq!(recs[7].record.rdata.as_wire(), [8, 0x46, 0x48, 0, 1]);
        assert_eq!(recs[8].record.rdata.as_wire(), [192, 0, 2, 2]);
        check_zone(&origin(), &recs).expect("valid zone");
    }

    /// TTLs with units, as BIND, NSD and Knot DNS read them: in the TTL
    /// position (before or after the class, owner blank or not), in `$TTL`
    /// and in the SOA timers, across lines in parentheses; nothing else.
    #[test]
    fn ttl_units_are_read_as_seconds() {
        let text = "$TTL 1h\n\
            @ IN SOA ns hostmaster ( 1 ; serial\n\
                2h 30M 1w1d ; refresh retry expire\n\
                1D )\n\
            @ NS ns\n\
            ns 1H30m A 192.0.2.1\n\
            www IN 2d A 192.0.2.2\n\
            \t 1w IN TXT \"1h\" 5m\n\
            5m 300 A 192.0.2.3\n\
            txt TXT \"a \\\" 1h\" 1h\n";
        let recs = parse_master_text(text, Path::new("u.zone"), &origin()).expect("parses");
        let soa = &recs[0].record;
        assert_eq!(soa.ttl, 3600, "$TTL 1h");
        assert_eq!(
            soa.rdata.to_text(RType::SOA).expect("text"),
            "ns.example.org. hostmaster.example.org. 1 7200 1800 691200 86400"
        );
        let ttls: Vec<(String, u32, usize)> = recs
            .iter()
            .map(|r| (r.record.owner.to_string(), r.record.ttl, r.line))
            .collect();
        assert_eq!(
            ttls,
            [
                ("example.org.".to_string(), 3600, 2),
                ("example.org.".to_string(), 3600, 5),
                ("ns.example.org.".to_string(), 5400, 6),
                ("www.example.org.".to_string(), 172_800, 7),
                ("www.example.org.".to_string(), 604_800, 8),
                ("5m.example.org.".to_string(), 300, 9),
                ("txt.example.org.".to_string(), 3600, 10),
            ]
        );
        // Strings are data, never TTLs.
        assert_eq!(
            recs[4].record.rdata.to_text(RType::TXT).expect("text"),
            "\"1h\" \"5m\""
        );
        assert_eq!(
            recs[6].record.rdata.to_text(RType::TXT).expect("text"),
            "\"a \\\" 1h\" \"1h\""
        );
        for (token, secs) in [
            ("1s", Some(1)),
            ("1h30m", Some(5400)),
            ("2W", Some(1_209_600)),
            ("1d1h1m1s", Some(90_061)),
            ("3600", None),
            ("1h30", None),
            ("1h1h", Some(7200)),
            // BIND 9 takes a last number without a unit when all before it is 0.
            ("0h30", Some(30)),
            ("0h", Some(0)),
            ("1hh", None),
            ("h", None),
            ("1x", None),
            ("7102w", None),
            ("", None),
        ] {
            assert_eq!(ttl_with_units(token.as_bytes()), secs, "{token}");
        }
        // Over 32 bits: left for the scanner, and refused naming the TTL
        // (`rejects_with_file_and_line`).
        // An unterminated string does not upset the pre-pass.
        assert!(parse_master_text("x TXT \"1h", Path::new("z"), &origin()).is_err());
    }

    /// A `$ORIGIN` that is not a domain name is an error at its own line,
    /// also when no record follows it.
    #[test]
    fn bad_origin_is_an_error_at_its_line() {
        let head = "$TTL 300\n@ SOA ns hm 1 2 3 4 5\n@ NS ns\n";
        let long = "a".repeat(64);
        for (tail, message) in [
            ("$ORIGIN a..b.\nwww A 192.0.2.2\n", "z:4: $ORIGIN a..b.: "),
            ("$ORIGIN a..b.\n", "z:4: $ORIGIN a..b.: "),
            (
                "x A 192.0.2.1\n$origin sub\n$ORIGIN \n",
                "z:6: $ORIGIN without a name",
            ),
        ] {
            let text = format!("{head}{tail}");
            let e = parse_master_text(&text, Path::new("z"), &origin()).expect_err(tail);
            assert!(e.to_string().starts_with(message), "{tail:?}: {e}");
        }
        let text = format!("{head}$ORIGIN {long}.org.\n");
        let e = parse_master_text(&text, Path::new("z"), &origin()).expect_err("long label");
        assert!(
            e.to_string()
                .starts_with(&format!("z:4: $ORIGIN {long}.org.: ")),
            "{e}"
        );
        // Relative and absolute origins that are names are fine.
        let ok = format!("{head}$ORIGIN sub\nwww A 192.0.2.1\n$ORIGIN example.org.\n");
        let recs = parse_master_text(&ok, Path::new("z"), &origin()).expect("parses");
        assert_eq!(
            recs.last().map(|r| r.record.owner.to_string()),
            Some("www.sub.example.org.".into())
        );
    }

    /// A file that ends inside parentheses is an error at the line of the
    /// `(` (the scanner itself would panic), also when a `(` in a comment, a
    /// quoted string or after a backslash is not one.
    #[test]
    fn unclosed_parenthesis_is_an_error_at_its_line() {
        let head = "$TTL 300\n@ SOA ns hm 1 2 3 4 5\n@ NS ns\n";
        for (tail, line) in [
            ("www IN TXT ( \"a\"\n", 4),
            ("www IN TXT \"a\" (", 4),
            ("www IN TXT ( \"a\"\n ( \"b\" )\n\n", 4),
            ("x A 192.0.2.1\nwww IN TXT \"(\" ; (\nmx MX ( 10\n", 6),
        ] {
            let text = format!("{head}{tail}");
            let e = parse_master_text(&text, Path::new("z"), &origin()).expect_err(tail);
            assert_eq!(
                e.to_string(),
                format!("z:{line}: syntax error: '(' not closed before the end of the file"),
                "{tail:?}"
            );
        }
        for closed in [
            "www TXT \"(\" ; (\n",
            "www TXT a\\(b\n",
            "www TXT ( \"a\"\n )\n",
        ] {
            let text = format!("{head}{closed}");
            assert!(
                parse_master_text(&text, Path::new("z"), &origin()).is_ok(),
                "{closed:?}"
            );
        }
    }

    #[test]
    fn rejects_with_file_and_line() {
        let bad = "@ 300 IN SOA ns hm 1 2 3 4 5\n@ NS ns\nwww.example.com. A 192.0.2.1\n";
        let recs = parse_master_text(bad, Path::new("z"), &origin()).expect("parses");
        let e = check_zone(&origin(), &recs).expect_err("outside");
        assert_eq!(
            e.to_string(),
            "z:3: name www.example.com. is outside the zone example.org."
        );

        let cname = "@ 300 IN SOA ns hm 1 2 3 4 5\n@ NS ns\nw CNAME x\nw A 192.0.2.1\n";
        let recs = parse_master_text(cname, Path::new("z"), &origin()).expect("parses");
        let e = check_zone(&origin(), &recs).expect_err("cname");
        assert_eq!(e.to_string(), "z:4: CNAME and other data at w.example.org.");

        let nosoa = "@ 300 IN NS ns\n";
        let recs = parse_master_text(nosoa, Path::new("z"), &origin()).expect("parses");
        let e = check_zone(&origin(), &recs).expect_err("no soa");
        assert_eq!(e.to_string(), "z:0: no SOA at the zone apex example.org.");

        // Over 2^31 - 1 but within 32 bits: 0, as BIND 9 and RFC 2181 §8 take it.
        let big = "@ 300 IN SOA ns hm 1 2 3 4 5\n@ NS ns\nbig 2147483648 A 192.0.2.9\n";
        let recs = parse_master_text(big, Path::new("z"), &origin()).expect("reads");
        assert_eq!(recs[2].record.ttl, 0);
        // Too large for the TTL field at all (the scanner would say "expected
        // rtype", BIND 9 "unknown RR type" or "bad ttl"): refused, in either
        // position, owner blank or not, with units, and after $TTL.
        // The form the message suggests reads.
        let suggested = "@ 300 IN SOA ns hm 1 2 3 4 5\nx 300 TYPE65280 \\# 2 abcd\n";
        let recs = parse_master_text(suggested, Path::new("z"), &origin()).expect("reads");
        assert_eq!(recs[1].record.rtype, RType(65280));
        const UNKNOWN_AX_1: &str = "z:1: unknown type AX; write a type without a name here as \
            TYPEnnn with \\# RDATA (RFC 3597 §5), e.g. TYPE65280 \\# 2 abcd";
        for (text, message) in [
            (
                "@ 300 IN SOA ns hm 1 2 3 4 5\nfoo 4294967296 IN A 192.0.2.1\n",
                "z:2: foo.example.org.: TTL 4294967296 does not fit in 32 bits (RFC 1035 §3.2.1)",
            ),
            (
                "$ORIGIN sub.example.org.\nfoo IN 99999999999999999999 A 192.0.2.1\n",
                "z:2: foo.sub.example.org.: TTL 99999999999999999999 does not fit in 32 bits \
                 (RFC 1035 §3.2.1)",
            ),
            (
                "foo 300 A 192.0.2.1\n\n  4294967296 A 192.0.2.2\n",
                "z:3: foo.example.org.: TTL 4294967296 does not fit in 32 bits (RFC 1035 §3.2.1)",
            ),
            (
                "foo 300 A 192.0.2.1\nbar 7102w A 192.0.2.2\n",
                "z:2: bar.example.org.: TTL 7102w does not fit in 32 bits (RFC 1035 §3.2.1)",
            ),
            (
                "$TTL 4294967296\nfoo A 192.0.2.1\n",
                "z:1: $TTL 4294967296 does not fit in 32 bits (RFC 1035 §3.2.1)",
            ),
            (
                "$TTL 7102W\nfoo A 192.0.2.1\n",
                "z:1: $TTL 7102W does not fit in 32 bits (RFC 1035 §3.2.1)",
            ),
            ("foo 1x A 192.0.2.1\n", "z:1: syntax error: expected rtype"),
            ("www IN AX 1.2.3.4\n", UNKNOWN_AX_1),
            ("www 300 IN AX 1.2.3.4\n", UNKNOWN_AX_1),
            (
                "foo 300 A 192.0.2.1\n AX 1.2.3.4\n",
                "z:2: unknown type AX; write a type without a name here as TYPEnnn with \\# \
                 RDATA (RFC 3597 §5), e.g. TYPE65280 \\# 2 abcd",
            ),
            (
                "foo 1h30 A 192.0.2.1\n",
                "z:1: syntax error: expected rtype",
            ),
        ] {
            let e = parse_master_text(text, Path::new("z"), &origin()).expect_err(text);
            assert_eq!(e.to_string(), message, "{text}");
        }
        let dir = std::env::temp_dir().join(format!("authd-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let empty = dir.join("empty.zone");
        std::fs::write(&empty, "; only a comment\n").expect("write");
        let e = read_master_file(&empty, &origin()).expect_err("empty");
        assert_eq!(e.file, empty);
        assert!(
            e.message
                .starts_with("no SOA at the zone apex example.org."),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).ok();

        let syntax = "@ 300 IN SOA ns hm 1 2 3 4 5\n\n; c\nw A 999.1.1.1\n";
        let e = parse_master_text(syntax, Path::new("z"), &origin()).expect_err("syntax");
        assert_eq!(
            e.to_string(),
            "z:4: w.example.org. A: bad address \"999.1.1.1\": not an IPv4 address"
        );
    }

    /// Everything a record says, where it was read, and its owner's case.
    fn seen(recs: &[SourcedRecord]) -> Vec<(Vec<u8>, Record, PathBuf, usize)> {
        recs.iter()
            .map(|r| {
                let wire = r.record.owner.as_wire().to_vec();
                (wire, r.record.clone(), r.file.to_path_buf(), r.line)
            })
            .collect()
    }

    /// A quoted string across lines (an escaped line end is not one) moves
    /// the records after it down as many lines, as the file has them.
    #[test]
    fn lines_count_after_a_quoted_string_across_lines() {
        let text = "$TTL 1\n@ SOA ns hm 1 2 3 4 5\nt TXT \"a\nb\\\nc\"\nx TXT ( \"1\n2\"\n\"3\" )\nw A 192.0.2.1\n";
        let lines: Vec<usize> = parse_master_text(text, Path::new("z"), &origin())
            .expect("parses")
            .iter()
            .map(|r| r.line)
            .collect();
        assert_eq!(lines, [2, 3, 5, 8]);
    }

    /// The first difference, not the whole of both.
    fn same(got: &[SourcedRecord], want: &[SourcedRecord], piece: usize) {
        let (got, want) = (seen(got), seen(want));
        if let Some(i) = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
            panic!(
                "piece {piece}: record {i}: {:?} != {:?}",
                got.get(i),
                want.get(i)
            );
        }
    }

    /// A file read in pieces gives the records, TTLs, files and lines of a
    /// serial read: blank owners, parentheses across lines, comments and
    /// quoted strings with newlines, escapes, TTL units, `$ORIGIN` and
    /// `$TTL` in the leading directives, pieces of a few records each.
    #[test]
    fn pieces_read_as_one_text() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("big.zone");
        let mut text = String::from(
            "; head\n$ORIGIN example.org.\n$TTL 1h\n$ORIGIN sub\n\
             @ IN SOA ns hm ( 1 2h\n 3 4 5 ) ; soa\n@ 300 NS ns\n",
        );
        for i in 0..400 {
            text.push_str(&format!(
                "n{i} 60 IN NS ns1.n{i}\n NS ns.other.\nns1.n{i} A 192.0.2.{}\n\
                 \t AAAA 2001:db8::{i:x}\nT{i} TXT ( \"a;b\" \"multi\nline\"\n  \"x\\\"y\" )\n\
                 ; a comment ( not open\nw\\{:03} 2d MX 10 mail\n\n",
                i % 250,
                i % 200 + 40
            ));
        }
        std::fs::write(&path, &text).expect("write");
        let serial = parse_master_text(&text, &path, &origin()).expect("serial");
        assert_eq!(serial.len(), 2 + 400 * 6);
        for piece in [64, 300, 5000] {
            let data = std::fs::read(&path).expect("read");
            let split = lex::split(&data, piece).expect("splits");
            assert!(split.starts.len() > 10, "{piece}: {}", split.starts.len());
            let pieces = parse_pieces(&data, &path, &origin(), piece).expect("in pieces");
            assert!(pieces.len() > 10, "{piece}: {} pieces", pieces.len());
            same(&pieces.concat(), &serial, piece);
        }
        let read = read_master_file_in(&path, &origin(), 300)
            .expect("reads")
            .concat();
        same(&read, &serial, 300);
        assert_eq!(read[1].record.owner.to_string(), "sub.example.org.");
        assert_eq!((read[1].record.ttl, read[1].line), (300, 7));
        assert_eq!((read[3].record.ttl, read[3].line), (3600, 9));
        // After a quoted string across lines, lines still count from the file.
        assert_eq!((read[6].record.rtype, read[6].line), (RType::TXT, 12));
        assert_eq!((read[7].record.rtype, read[7].line), (RType::MX, 16));
        assert_eq!((read[8].record.ttl, read[8].line), (60, 18));
    }

    /// What pieces cannot follow is read serially: a directive after the
    /// first record, `$INCLUDE`, no `$TTL`, a `(` left open; and an error in
    /// any piece is reported as a serial read reports it (an RDATA error late
    /// in the file before a syntax error early in it, as ever).
    #[test]
    fn pieces_fall_back_to_a_serial_read() {
        let body: String = (0..200)
            .map(|i| format!("n{i} NS ns.other.\nx{i} 60 A 192.0.2.1\n"))
            .collect();
        let head = "$TTL 300\n@ SOA ns hm 1 2 3 4 5\n@ NS ns\n";
        let cut = |text: &str| lex::split(text.as_bytes(), 100).map(|s| s.starts.len());
        assert!(cut(&format!("{head}{body}")).is_some_and(|n| n > 10));
        for text in [
            format!("{head}{body}$TTL 60\n{body}"),
            format!("{head}{body}$ORIGIN sub\n{body}"),
            format!("{head}$INCLUDE x\n{body}"),
            format!("{head}{body}w TXT ( a\n"),
            format!("$TTL 1\n $ORIGIN x\n \tSOA ns hm 1 2 3 4 5\n{body}"),
        ] {
            assert_eq!(cut(&text), None, "{text:.60}");
        }
        let no_ttl = format!("@ 300 SOA ns hm 1 2 3 4 5\n{body}");
        assert!(cut(&no_ttl).is_some());
        assert!(parse_pieces(no_ttl.as_bytes(), Path::new("z"), &origin(), 100).is_none());
        // Read serially, the RDATA error at line 405 comes before the
        // unknown type at line 4.
        let bad = format!("{head}zz AX 1\n{body}w A 999.1.1.1\n{body}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("bad.zone");
        std::fs::write(&path, &bad).expect("write");
        let want = parse_master_text(&bad, &path, &origin()).expect_err("serial");
        let got = read_master_file_in(&path, &origin(), 100).expect_err("pieces");
        assert_eq!(got, want);
        assert_eq!(got.line, 405, "{got}");
    }

    #[test]
    fn include_of_a_device_is_refused_not_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let zone = dir.path().join("z.zone");
        std::fs::write(
            &zone,
            "@ 300 IN SOA ns hm 1 2 3 4 5\n@ 300 IN NS ns\nns 300 IN A 192.0.2.1\n$INCLUDE /dev/zero\n",
        )
        .expect("write");
        let e = read_master_file(&zone, &origin()).expect_err("device");
        assert_eq!(
            e.to_string(),
            format!(
                "{}:4: $INCLUDE /dev/zero: cannot read: not a regular file",
                zone.display()
            )
        );
        let e = read_master_file(dir.path(), &origin()).expect_err("directory");
        assert!(
            e.to_string().ends_with("cannot read: not a regular file"),
            "{e}"
        );
    }
}
