//! The one tokenizer this crate runs over master-file text, ahead of the
//! `domain` scanner: where each entry (a record or a directive, possibly
//! spanning lines in parentheses) starts, and its words.
//!
//! Its rules are the scanner's (comments, quoted strings, backslash escapes,
//! parentheses across lines, lines counted as the scanner counts them, so not
//! after a backslash), so that what it finds lines up with what the scanner
//! reads. Everything the reader does to the text on its own is built on it:
//! the TTL-unit rewrite, the `$ORIGIN` check, the TTL of each record, the naming of
//! oversized TTLs and the line each record or scanner error is reported at.

use std::ops::Range;

/// A master file cut into entries and words.
pub(super) struct Lexed {
    /// The entries, in file order.
    pub(super) entries: Vec<EntryStart>,
    /// Byte ranges of the words of every entry, in file order; a quoted
    /// string is one word with its quotes (its text is data, never a TTL,
    /// class, type or directive, which never start with `"`).
    words: Vec<Range<usize>>,
    /// The line of the outermost `(` still open at the end of the file.
    pub(super) unclosed: Option<usize>,
}

/// One entry of a master file.
pub(super) struct EntryStart {
    /// 1-based line where the entry starts: where its records and errors are
    /// reported.
    pub(super) line: usize,
    /// The entry starts at the beginning of a line: its first word is the owner.
    pub(super) owner: bool,
    /// What the entry is when it is a directive.
    pub(super) directive: Option<Directive>,
    /// Index in [`Lexed::words`] of its first word.
    first_word: usize,
}

/// A directive entry (RFC 1035 §5.1).
#[derive(PartialEq)]
pub(super) enum Directive {
    /// `$ORIGIN` or `$TTL`, consumed inside the scanner.
    Internal,
    /// `$INCLUDE`, handed back as an entry.
    Include,
}

impl Lexed {
    /// Each entry with the byte ranges of its words.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&EntryStart, &[Range<usize>])> {
        self.entries.iter().enumerate().map(|(i, e)| {
            let end = self
                .entries
                .get(i + 1)
                .map_or(self.words.len(), |next| next.first_word);
            (e, self.words.get(e.first_word..end).unwrap_or(&[]))
        })
    }

    /// The entries alone: the words, as large as the text, are freed.
    pub(super) fn into_entries(self) -> Vec<EntryStart> {
        self.entries
    }
}

/// Cuts master-file text into entries and words.
pub(super) fn lex(data: &[u8]) -> Lexed {
    let mut entries = Vec::new();
    let mut words = Vec::new();
    let unclosed = scan(data, |event| {
        match event {
            Event::Entry {
                at, line, owner, ..
            } => entries.push(EntryStart {
                line,
                owner,
                directive: directive(&data[at..]),
                first_word: words.len(),
            }),
            Event::Word(range) => words.push(range),
        }
        true
    })
    .unclosed;
    Lexed {
        entries,
        words,
        unclosed,
    }
}

/// What [`scan`] meets, in text order.
enum Event {
    /// An entry starts at byte `at`, on 1-based line `line` (which starts at
    /// byte `line_at`); `owner` when at the start of that line.
    Entry {
        at: usize,
        line: usize,
        owner: bool,
        line_at: usize,
    },
    /// A word (a quoted string with its quotes is one).
    Word(Range<usize>),
}

/// How a [`scan`] ended.
struct Scanned {
    /// The line of the outermost `(` still open at the end of the text.
    unclosed: Option<usize>,
    /// The callback stopped it.
    stopped: bool,
}

/// The tokenizer's one loop: walks `data` by the rules in the module docs
/// and hands each entry start and word to `event`, which returns false to
/// stop.
fn scan(data: &[u8], mut event: impl FnMut(Event) -> bool) -> Scanned {
    let (mut line, mut parens, mut opened) = (1usize, 0usize, 0usize);
    let (mut in_entry, mut line_start, mut line_at) = (false, true, 0usize);
    let mut i = 0;
    while i < data.len() {
        let c = data[i];
        match c {
            b'\n' => {
                line += 1;
                if parens == 0 {
                    in_entry = false;
                }
                line_start = true;
                i += 1;
                line_at = i;
                continue;
            }
            b';' => {
                while i < data.len() && data[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                line_start = false;
                i += 1;
                continue;
            }
            _ => {}
        }
        if !in_entry {
            in_entry = true;
            let entry = Event::Entry {
                at: i,
                line,
                owner: line_start,
                line_at,
            };
            if !event(entry) {
                return Scanned {
                    unclosed: None,
                    stopped: true,
                };
            }
        }
        line_start = false;
        match c {
            b'(' => {
                if parens == 0 {
                    opened = line;
                }
                parens += 1;
                i += 1;
            }
            b')' => {
                parens = parens.saturating_sub(1);
                i += 1;
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < data.len() && data[i] != b'"' {
                    match data[i] {
                        b'\\' => i += 1,
                        b'\n' => line += 1,
                        _ => {}
                    }
                    i += 1;
                }
                i += 1;
                event(Event::Word(start..i.min(data.len())));
            }
            _ => {
                let start = i;
                while i < data.len()
                    && !matches!(
                        data[i],
                        b' ' | b'\t' | b'\r' | b'\n' | b'(' | b')' | b';' | b'"'
                    )
                {
                    i += if data[i] == b'\\' { 2 } else { 1 };
                }
                event(Event::Word(start..i.min(data.len())));
            }
        }
    }
    Scanned {
        unclosed: (parens > 0).then_some(opened),
        stopped: false,
    }
}

/// The directive an entry starting at `rest` is, if it is one: `$` and a
/// word up to white space.
fn directive(rest: &[u8]) -> Option<Directive> {
    if rest.first() != Some(&b'$') {
        return None;
    }
    let word = rest
        .iter()
        .position(u8::is_ascii_whitespace)
        .map_or(rest, |end| &rest[..end]);
    Some(if word.eq_ignore_ascii_case(b"$INCLUDE") {
        Directive::Include
    } else {
        Directive::Internal
    })
}

/// Where master-file text can be cut into pieces that read alone as they
/// read in place: see [`split`].
pub(super) struct Split {
    /// End of the leading directives (`$ORIGIN`, `$TTL`): the start of the
    /// line of the first record.
    pub(super) header_end: usize,
    /// Each piece's first byte and 1-based first line, in file order; the
    /// first piece starts at 0 (directives included), each later one at the
    /// start of a line whose record names its owner, outside parentheses.
    pub(super) starts: Vec<(usize, usize)>,
}

/// Cuts `data` into pieces of about `piece` bytes at owner boundaries, by the
/// rules of [`lex`] (comments, quotes, escapes, parentheses, line counting).
///
/// `None` when a piece could not be read on its own: a directive after the
/// first record or an `$INCLUDE` (the state they change would have to follow
/// from piece to piece), a first record with a blank owner, or a `(` left open.
pub(super) fn split(data: &[u8], piece: usize) -> Option<Split> {
    let mut starts = vec![(0usize, 1usize)];
    let mut header_end = None;
    let scanned = scan(data, |event| {
        let Event::Entry {
            at,
            line,
            owner,
            line_at,
        } = event
        else {
            return true;
        };
        match directive(&data[at..]) {
            Some(Directive::Internal) if header_end.is_none() => {}
            Some(_) => return false,
            None => {
                if header_end.is_none() {
                    if !owner {
                        return false;
                    }
                    header_end = Some(line_at);
                } else if owner && starts.last().is_some_and(|&(at, _)| line_at - at >= piece) {
                    starts.push((line_at, line));
                }
            }
        }
        true
    });
    if scanned.stopped || scanned.unclosed.is_some() {
        return None;
    }
    Some(Split {
        header_end: header_end?,
        starts,
    })
}
