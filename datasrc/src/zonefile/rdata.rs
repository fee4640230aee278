//! The RDATA of every record of a master file read by authd's own reader
//! (`rdata_text`), which knows every type BIND 9 loads, and handed to the
//! `domain` scanner in RFC 3597 form (`TYPEnnn \# LENGTH HEX`, §5), which it
//! reads for any type. The scanner then does what it does well — owners,
//! `$ORIGIN`, `$INCLUDE`, TTL numbers and classes — and every RDATA error
//! names the record, type and field. Plain text (class IN, a TTL for every
//! record, no `$INCLUDE`: what large zones are) is read here whole, without
//! the scanner ([`read_plain`]).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use super::lex::Lexed;
use super::{SourcedRecord, ZoneFileError};
use crate::name::Name;
use crate::rdata_text::fields::Tok;
use crate::rdata_text::types;
use crate::rr::{Class, RType, Rdata, Record};

/// `data` with the RDATA of each record rewritten in RFC 3597 form, lines
/// and parentheses kept (so that lines still count as before); `None` when
/// there is no record. An entry whose type is not a type, or whose words are
/// not UTF-8, is left as written for the scanner.
///
/// Errors: the first RDATA that does not read, at its entry's line.
pub(super) fn rdata_to_generic(
    data: &[u8],
    lexed: &Lexed,
    origin: &Name,
    file: &Path,
) -> Result<Option<Vec<u8>>, ZoneFileError> {
    let mut current = origin.clone();
    let mut last_owner: Option<Name> = None;
    let mut out: Vec<u8> = Vec::with_capacity(data.len() + data.len() / 2);
    let mut toks: Vec<Tok<'_>> = Vec::new();
    let mut at = 0;
    for (entry, words) in lexed.iter() {
        let tok = |i: usize| words.get(i).map(|r| &data[r.clone()]);
        let Some(first) = tok(0) else { continue };
        if entry.directive.is_some() {
            if first.eq_ignore_ascii_case(b"$ORIGIN")
                && let Some(arg) = tok(1).and_then(|a| std::str::from_utf8(a).ok())
                && let Ok(o) = Name::parse(arg, Some(&current))
            {
                current = o;
            }
            continue;
        }
        if entry.owner {
            let text = String::from_utf8_lossy(first);
            last_owner = Name::parse(&text, Some(&current)).ok();
        }
        // [owner] [TTL] [class] type, or [owner] [class] [TTL] type (RFC 1035 §5.1).
        let mut i = usize::from(entry.owner);
        for _ in 0..2 {
            match tok(i) {
                Some(t) if super::is_class(t) || t.iter().all(u8::is_ascii_digit) => i += 1,
                _ => break,
            }
        }
        let Some(rtype) = tok(i)
            .and_then(|t| std::str::from_utf8(t).ok())
            .and_then(|t| RType::from_str(t).ok())
        else {
            continue;
        };
        let Some(wire) = read_rdata(rtype, &words[i + 1..], data, &current, &mut toks) else {
            continue;
        };
        let wire = wire.map_err(|reason| {
            let owner = last_owner
                .as_ref()
                .map_or_else(|| "(no owner)".to_string(), Name::to_string);
            ZoneFileError {
                file: file.to_path_buf(),
                line: entry.line,
                message: format!("{owner} {rtype}: {reason}"),
            }
        })?;
        let start = words[i].start;
        let end = words.last().map_or(words[i].end, |r| r.end);
        out.extend_from_slice(&data[at..start]);
        out.extend_from_slice(format!("TYPE{} \\# {}", rtype.0, wire.len()).as_bytes());
        if !wire.is_empty() {
            out.push(b' ');
            out.extend_from_slice(data_encoding::HEXUPPER.encode(&wire).as_bytes());
        }
        // The parentheses and line ends between the words, outside comments,
        // and the line ends inside quoted strings (the lexer counts those
        // too: without them every later record would be reported a line early).
        for (w, gap) in words[i..]
            .windows(2)
            .map(|w| (&data[w[1].clone()], &data[w[0].end..w[1].start]))
        {
            let mut in_comment = false;
            for &c in gap {
                match c {
                    b';' => in_comment = true,
                    b'\n' => {
                        in_comment = false;
                        out.push(b'\n');
                    }
                    b'(' | b')' if !in_comment => {
                        out.push(b' ');
                        out.push(c);
                    }
                    _ => {}
                }
            }
            if w.first() == Some(&b'"') {
                out.resize(out.len() + quoted_line_breaks(w), b'\n');
            }
        }
        at = end;
    }
    if at == 0 {
        return Ok(None);
    }
    out.extend_from_slice(&data[at..]);
    Ok(Some(out))
}

/// The line ends the lexer counts in a quoted string: those not escaped.
fn quoted_line_breaks(word: &[u8]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < word.len() {
        match word[i] {
            b'\\' => i += 1,
            b'\n' => n += 1,
            _ => {}
        }
        i += 1;
    }
    n
}

/// The wire form of RDATA `words` (the words after the type word) of type
/// `rtype`, names relative to `origin`: `None` when a word is not UTF-8
/// (left to the scanner), else what [`types::read`] says. `toks` is scratch
/// space, kept from one record to the next.
fn read_rdata<'a>(
    rtype: RType,
    words: &[Range<usize>],
    data: &'a [u8],
    origin: &Name,
    toks: &mut Vec<Tok<'a>>,
) -> Option<Result<crate::rdata_text::Buf, String>> {
    toks.clear();
    for r in words {
        toks.push(token(&data[r.clone()])?);
    }
    Some(types::read(rtype, toks, origin))
}

/// A word of the lexer as an RDATA token: quoted strings without their
/// quotes; `None` when not UTF-8.
fn token(word: &[u8]) -> Option<Tok<'_>> {
    let text = std::str::from_utf8(word).ok()?;
    match text.strip_prefix('"') {
        Some(inner) => Some(Tok {
            raw: inner.strip_suffix('"').unwrap_or(inner),
            quoted: true,
        }),
        None => Some(Tok {
            raw: text,
            quoted: false,
        }),
    }
}

/// The records of master-file text read here alone, without the `domain`
/// scanner, when the text is plain: records of class IN, each with a TTL of
/// its own or a `$TTL` in force (within [`super::MAX_TTL`]), `$ORIGIN` and
/// `$TTL` the only directives, every owner and RDATA readable. Those are
/// the records [`super::scan_into`]'s scanner path reads from the same text
/// (same owners, TTLs, RDATA and lines), at a third of its cost on a large
/// zone: no RFC 3597 rewrite, no second lexing, no scanner.
///
/// `data` has TTL units expanded and `lexed` is its lexing; the records
/// are appended to `out`, and `ttls` updated, only when the whole text is
/// read (else `out` is as it was). False at the first thing that is not
/// plain (an `$INCLUDE`, another class, a record without a TTL and no
/// `$TTL`, a TTL to be limited, anything that does not read): the caller
/// then takes the scanner path, which says exactly what is wrong and warns
/// where a warning is due, so nothing is said twice.
pub(super) fn read_plain(
    data: &[u8],
    lexed: &Lexed,
    origin: &Name,
    file: &Arc<PathBuf>,
    line_base: usize,
    ttls: &mut super::Ttls,
    out: &mut Vec<SourcedRecord>,
) -> bool {
    let had = out.len();
    let mut read = || -> Option<()> {
        let mut current = origin.clone();
        let mut default = ttls.default;
        let mut last_ttl = ttls.last;
        let mut last_owner: Option<Name> = None;
        out.reserve(lexed.entries.len());
        let mut toks: Vec<Tok<'_>> = Vec::new();
        for (entry, words) in lexed.iter() {
            let tok = |i: usize| words.get(i).map(|r| &data[r.clone()]);
            let first = tok(0)?;
            if entry.directive.is_some() {
                let arg = std::str::from_utf8(tok(1)?).ok()?;
                if words.len() != 2 {
                    return None;
                }
                if first.eq_ignore_ascii_case(b"$ORIGIN") {
                    current = Name::parse(arg, Some(&current)).ok()?;
                } else if first.eq_ignore_ascii_case(b"$TTL") {
                    default = Some(arg.parse().ok().filter(|t| *t <= super::MAX_TTL)?);
                } else {
                    return None; // $INCLUDE
                }
                continue;
            }
            if entry.owner {
                if first.first() == Some(&b'$') {
                    return None; // a directive not known here ($GENERATE)
                }
                last_owner =
                    Some(Name::parse(std::str::from_utf8(first).ok()?, Some(&current)).ok()?);
            }
            let owner = last_owner.clone()?;
            // [owner] [TTL] [class] type, or [owner] [class] [TTL] type (RFC 1035 §5.1).
            let mut i = usize::from(entry.owner);
            let mut ttl = None;
            for _ in 0..2 {
                match tok(i) {
                    Some(t) if t.eq_ignore_ascii_case(b"IN") => i += 1,
                    Some(t)
                        if !t.is_empty() && t.iter().all(u8::is_ascii_digit) && ttl.is_none() =>
                    {
                        let secs: u32 = std::str::from_utf8(t).ok()?.parse().ok()?;
                        ttl = Some(secs).filter(|t| *t <= super::MAX_TTL);
                        ttl?;
                        i += 1;
                    }
                    _ => break,
                }
            }
            // A class other than IN is not a type either: `None`.
            let rtype = RType::from_str(std::str::from_utf8(tok(i)?).ok()?).ok()?;
            let wire = read_rdata(rtype, &words[i + 1..], data, &current, &mut toks)?.ok()?;
            let ttl = match ttl {
                Some(t) => {
                    last_ttl = Some(t);
                    t
                }
                None => default?,
            };
            out.push(SourcedRecord {
                record: Record {
                    owner,
                    rtype,
                    class: Class::IN,
                    ttl,
                    rdata: Rdata::from_wire(&wire),
                },
                file: Arc::clone(file),
                line: entry.line + line_base,
            });
        }
        ttls.default = default;
        ttls.last = last_ttl;
        Some(())
    };
    if read().is_none() {
        out.truncate(had);
        return false;
    }
    true
}
