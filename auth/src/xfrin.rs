//! Zone transfers in: the client side of the secondary role.
//!
//! [`query_soa`] asks a primary for the zone's SOA (RFC 1035 §4.3.5: the
//! refresh check); [`ixfr`] asks for the differences (RFC 1995) and [`axfr`]
//! fetches the whole zone (RFC 5936). All go
//! over TCP ([`connect`], one request, length-prefixed messages, RFC 1035
//! §4.2.2), or over TLS for a primary written with `tls` (RFC 9103: the SOA
//! query too, so nothing about the zone crosses in clear; the handshake
//! within the connect's bound), each step bounded by [`TIMEOUT`]. A primary given with a key gets
//! the request signed and every reply verified (RFC 8945 §5.1, §5.4; in a
//! transfer, unsigned messages between signed ones are allowed as §5.3.1
//! says, and the last message must be signed).
//!
//! A reply is checked before anything of it is kept: the message id, QR,
//! opcode, NOERROR, no TC, the question (when present) naming the zone; the
//! records must be class IN. An AXFR must start with the zone's SOA and end
//! with the same SOA, with no record after it (RFC 5936 §2.2); anything else
//! is [`XfrError::Inconsistent`]. Names in the RDATA of the RFC 1035 types
//! (NS, CNAME, PTR, MX, SOA, …) are decompressed (RFC 3597 §4).
//!
//! [`store_axfr`] and [`store_ixfr`] write a transfer through the zone's
//! write side ([`ZoneWriter`]) in one transaction, which runs the zone
//! checks (records outside the zone, CNAME beside other data, …), so a
//! failed transfer never replaces the previous version.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use authd_datasrc::zonefile::SourcedRecord;
use authd_datasrc::{Class, Name, RType, Record};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::keys::Key;
use crate::tls::PrimaryTls;
use crate::tsig::{self, ReplyProblem, ReplyVerifier};
use crate::wire::{
    Flags, HEADER_LEN, Header, MAX_TCP_MESSAGE, MessageWriter, Opcode, Rcode, RecordMeta, Section,
};
use authd_datasrc::sqlite_load::LoadError;
use authd_datasrc::write::{Difference, JournalPolicy, serial_gt};
use authd_datasrc::{WriteError, ZoneWriter};

/// Bound on connecting, sending the request and reading each message.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// A primary as a transfer client sees it: where to connect, over TLS or
/// not, and the TSIG key to sign requests with (`None`: unsigned).
#[derive(Debug, Clone)]
pub struct Primary {
    /// The primary's address and port.
    pub addr: SocketAddr,
    /// The `[[key]]` requests are signed with.
    pub key: Option<Key>,
    /// Over TLS: the client configuration (its verifier and session cache)
    /// and how the certificate is checked; `None`: plain TCP.
    pub tls: Option<(Arc<rustls::ClientConfig>, PrimaryTls)>,
}

impl std::fmt::Display for Primary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.addr)?;
        if let Some((_, how)) = &self.tls {
            write!(f, " {how}")?;
        }
        if let Some(k) = &self.key {
            write!(f, " key {}", k.name)?;
        }
        Ok(())
    }
}

/// A connection to a primary: TCP, or TLS over TCP.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Stream for S {}

/// Connects to `primary`, and over TLS completes the handshake, within
/// [`TIMEOUT`] in all.
///
/// Errors: [`XfrError::Io`] naming the step: connect, or the TLS handshake
/// (a certificate that fails verification, no common protocol or ALPN).
async fn open(primary: &Primary) -> Result<Box<dyn Stream>, XfrError> {
    let io = |what: &str, e: &dyn std::fmt::Display| XfrError::Io(format!("{what}: {e}"));
    let steps = async {
        let tcp = TcpStream::connect(primary.addr)
            .await
            .map_err(|e| io("connect", &e))?;
        let _ = tcp.set_nodelay(true);
        let Some((config, how)) = &primary.tls else {
            return Ok(Box::new(tcp) as Box<dyn Stream>);
        };
        let name = match how {
            PrimaryTls::Strict(name) => name.clone(),
            // No SNI for an address; the certificate is not checked.
            PrimaryTls::Opportunistic => {
                rustls::pki_types::ServerName::IpAddress(primary.addr.ip().into())
            }
        };
        let tls = tokio_rustls::TlsConnector::from(Arc::clone(config))
            .connect(name, tcp)
            .await
            .map_err(|e| io("TLS handshake", &e))?;
        Ok(Box::new(tls) as Box<dyn Stream>)
    };
    tokio::time::timeout(TIMEOUT, steps)
        .await
        .map_err(|e| io("connect", &e))?
}

/// Why a refresh check or transfer failed. In every case nothing was stored.
#[derive(Debug, thiserror::Error)]
pub enum XfrError {
    /// Connecting, sending or reading failed or timed out.
    #[error("{0}")]
    Io(String),
    /// The primary answered with this RCODE.
    #[error("the primary answered rcode {}", .0.0)]
    Rcode(Rcode),
    /// The reply's TSIG did not verify (RFC 8945 §5.4).
    #[error("TSIG: {0}")]
    Tsig(ReplyProblem),
    /// A message that is not a well-formed reply to our request.
    #[error("malformed reply: {0}")]
    Malformed(String),
    /// Well-formed messages that do not make up a transfer of the zone (bad
    /// SOA sequence, records after the end, a zone that fails the checks).
    #[error("inconsistent transfer: {0}")]
    Inconsistent(String),
    /// The zone DB could not be written: the storage failed (a full disk, an
    /// I/O error, a read-only or damaged DB), or no source can write it.
    #[error("storage: {0}")]
    Store(String),
    /// The zone DB was busy: another writer held its lock past the wait.
    #[error("busy: {0}")]
    StoreBusy(String),
}

impl XfrError {
    /// True when the zone DB failed, not the primary or the transfer: the
    /// operator's business, logged at ERROR (busy: WARN).
    pub fn is_storage(&self) -> bool {
        matches!(self, XfrError::Store(_))
    }
}

/// A request for `origin` of type `qtype`, with message id `id`; an IXFR
/// carries a SOA with our serial `ixfr_from` in the authority section (RFC
/// 1995 §3; primaries read only its serial, so its names are the root and
/// its timers 0).
pub fn request(id: u16, origin: &Name, qtype: RType, ixfr_from: Option<u32>) -> Vec<u8> {
    let mut buf = Vec::new();
    let header = Header {
        id,
        opcode: Opcode::QUERY,
        flags: Flags::empty(),
        rcode: Rcode::NOERROR,
    };
    let mut w = MessageWriter::new(&mut buf, header, MAX_TCP_MESSAGE);
    let mut question = origin.as_wire().to_vec();
    question.extend_from_slice(&qtype.0.to_be_bytes());
    question.extend_from_slice(&Class::IN.0.to_be_bytes());
    w.push_question(&question);
    if let Some(serial) = ixfr_from {
        let mut soa = vec![0u8, 0];
        soa.extend_from_slice(&serial.to_be_bytes());
        soa.extend_from_slice(&[0; 16]);
        w.push_record(
            Section::Authority,
            origin,
            RecordMeta {
                rtype: RType::SOA,
                class: Class::IN,
                ttl: 0,
            },
            &soa,
            std::iter::empty(),
        );
    }
    w.finish();
    buf
}

/// One TCP exchange with a primary: the request sent, then the messages read
/// one at a time with [`Exchange::next`], each checked and TSIG-verified.
pub struct Exchange {
    stream: Box<dyn Stream>,
    id: u16,
    origin: Name,
    qtype: RType,
    key: Option<Key>,
    mac: Option<tsig::RequestMac>,
    messages: usize,
    /// Whether the last message read was signed (or no key is in use).
    last_signed: bool,
}

/// Connects to `primary` and sends a `qtype` request for `origin` (signed
/// when the primary has a key).
///
/// Errors: [`XfrError::Io`] for a failed or timed-out connect or write.
pub async fn connect(
    primary: &Primary,
    origin: &Name,
    qtype: RType,
    ixfr_from: Option<u32>,
) -> Result<Exchange, XfrError> {
    let id = crate::notify::random_id();
    let mut msg = request(id, origin, qtype, ixfr_from);
    let mac = primary
        .key
        .as_ref()
        .map(|k| tsig::sign_request(k, &mut msg, tsig::now()));
    let io = |what: &str, e: &dyn std::fmt::Display| XfrError::Io(format!("{what}: {e}"));
    let mut stream = open(primary).await?;
    let len = u16::try_from(msg.len()).map_err(|e| io("request", &e))?;
    let mut framed = len.to_be_bytes().to_vec();
    framed.extend_from_slice(&msg);
    // Flushed: TLS holds written bytes until then.
    let send = async {
        stream.write_all(&framed).await?;
        stream.flush().await
    };
    tokio::time::timeout(TIMEOUT, send)
        .await
        .map_err(|e| io("send", &e))?
        .map_err(|e| io("send", &e))?;
    Ok(Exchange {
        stream,
        id,
        origin: origin.clone(),
        qtype,
        key: primary.key.clone(),
        mac,
        messages: 0,
        last_signed: true,
    })
}

impl Exchange {
    /// Reads the next message and returns its answer-section records.
    ///
    /// Errors: [`XfrError::Io`] (closed, timed out), [`XfrError::Malformed`],
    /// [`XfrError::Rcode`], [`XfrError::Tsig`].
    pub async fn next(
        &mut self,
        verifier: &mut Option<ReplyVerifier<'_>>,
    ) -> Result<Vec<Record>, XfrError> {
        let io = |e: &dyn std::fmt::Display| XfrError::Io(format!("reading the reply: {e}"));
        let mut len = [0u8; 2];
        tokio::time::timeout(TIMEOUT, self.stream.read_exact(&mut len))
            .await
            .map_err(|e| io(&e))?
            .map_err(|e| io(&e))?;
        let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
        tokio::time::timeout(TIMEOUT, self.stream.read_exact(&mut msg))
            .await
            .map_err(|e| io(&e))?
            .map_err(|e| io(&e))?;
        self.messages += 1;
        if let Some(v) = verifier {
            self.last_signed = v.verify_next(&msg, tsig::now()).map_err(XfrError::Tsig)?;
        }
        parse_reply(&msg, self.id, &self.origin, self.qtype, self.messages == 1)
    }
}

/// A verifier for the replies to a request signed with `key` (MAC `mac`);
/// `None` for an unsigned request.
fn verifier<'k>(key: &'k Option<Key>, mac: Option<tsig::RequestMac>) -> Option<ReplyVerifier<'k>> {
    match (key, mac) {
        (Some(k), Some(m)) => Some(ReplyVerifier::new(k, &m)),
        _ => None,
    }
}

/// The records of the answer section of reply `msg` to request `id` for
/// `origin`/`qtype`; `first` when it is the first message (whose question
/// must be present).
///
/// Errors: [`XfrError::Malformed`], [`XfrError::Rcode`].
pub fn parse_reply(
    msg: &[u8],
    id: u16,
    origin: &Name,
    qtype: RType,
    first: bool,
) -> Result<Vec<Record>, XfrError> {
    let bad = |what: &str| XfrError::Malformed(what.to_string());
    let head = crate::sections::read_reply_head(msg, id, Opcode::QUERY)
        .map_err(|e| XfrError::Malformed(e.to_string()))?;
    if head.rcode != Rcode::NOERROR {
        return Err(XfrError::Rcode(head.rcode));
    }
    if head.flags.contains(Flags::TC) {
        return Err(bad("truncated (TC) over TCP"));
    }
    let [qd, an, _, _] = head.counts;
    let mut pos = HEADER_LEN;
    match qd {
        0 if !first => {}
        1 => {
            let (qname, after) =
                crate::wire::read_name(msg, pos).ok_or_else(|| bad("question name"))?;
            if qname != *origin || crate::wire::u16_at(msg, after) != Some(qtype.0) {
                return Err(bad("the question is not ours"));
            }
            pos = after + 4;
        }
        _ => return Err(bad("question count")),
    }
    let (rrs, _) = crate::sections::read_section(msg, pos, an)
        .ok_or_else(|| bad("a record cut short, or with a bad name or RDATA"))?;
    let mut records = Vec::with_capacity(rrs.len());
    for rr in rrs {
        if rr.class != Class::IN {
            return Err(bad("a record not of class IN"));
        }
        let rdata = match rr.rdata {
            Some(r) => r,
            // RDLENGTH 0: valid only for a type whose RDATA may be empty.
            None => crate::wire::read_rdata(&[], 0, 0, rr.rtype).ok_or_else(|| {
                XfrError::Malformed(format!("bad RDATA of {} {}", rr.owner, rr.rtype))
            })?,
        };
        records.push(Record {
            owner: rr.owner,
            rtype: rr.rtype,
            class: Class::IN,
            ttl: rr.ttl,
            rdata,
        });
    }
    Ok(records)
}

/// Asks `primary` for the SOA serial of `origin`.
///
/// Errors: as [`Exchange::next`]; [`XfrError::Inconsistent`] when the answer
/// holds no SOA of the zone.
pub async fn query_soa(primary: &Primary, origin: &Name) -> Result<u32, XfrError> {
    let mut ex = connect(primary, origin, RType::SOA, None).await?;
    let key = ex.key.clone();
    let records = ex.next(&mut verifier(&key, ex.mac)).await?;
    if !ex.last_signed {
        return Err(XfrError::Tsig(ReplyProblem::Unsigned));
    }
    records
        .iter()
        .find(|r| r.rtype == RType::SOA && r.owner == *origin)
        .and_then(|r| r.rdata.soa_serial())
        .ok_or_else(|| XfrError::Inconsistent(format!("no SOA of {origin} in the answer")))
}

/// A zone transferred by AXFR: its records (the SOA first, the closing SOA
/// left out) and the serial.
#[derive(Debug, Clone)]
pub struct Transferred {
    /// The zone's records in the order received.
    pub records: Vec<Record>,
    /// The SOA serial.
    pub serial: u32,
    /// Messages read.
    pub messages: usize,
}

/// Transfers `origin` from `primary` by AXFR (RFC 5936).
///
/// Errors: as [`Exchange::next`]; [`XfrError::Inconsistent`] when the first
/// record is not the zone's SOA, the stream ends (closes) before the closing
/// SOA, the closing SOA differs from the first, or records follow it.
pub async fn axfr(primary: &Primary, origin: &Name) -> Result<Transferred, XfrError> {
    let mut ex = connect(primary, origin, RType::AXFR, None).await?;
    let key = ex.key.clone();
    let mut verifier = verifier(&key, ex.mac);
    let mut records: Vec<Record> = Vec::new();
    let inconsistent = |what: String| XfrError::Inconsistent(what);
    loop {
        let batch = ex.next(&mut verifier).await?;
        let n = batch.len();
        for (i, rec) in batch.into_iter().enumerate() {
            if let Some(first) = records.first() {
                if rec.rtype == RType::SOA && rec.owner == *origin {
                    if i + 1 != n {
                        return Err(inconsistent(format!(
                            "{} record(s) follow the closing SOA",
                            n - i - 1
                        )));
                    }
                    if rec.rdata != first.rdata {
                        return Err(inconsistent(format!(
                            "the closing SOA (serial {}) differs from the first (serial {})",
                            rec.rdata.soa_serial().unwrap_or_default(),
                            first.rdata.soa_serial().unwrap_or_default()
                        )));
                    }
                    return finish(ex, records);
                }
            } else if rec.rtype != RType::SOA || rec.owner != *origin {
                return Err(inconsistent(format!(
                    "the transfer starts with {} {}, not the SOA of {origin}",
                    rec.owner, rec.rtype
                )));
            }
            records.push(rec);
        }
    }
}

/// Ends an AXFR at the closing SOA: the message that carried it must be
/// signed (when a key is used).
fn finish(ex: Exchange, records: Vec<Record>) -> Result<Transferred, XfrError> {
    if !ex.last_signed {
        return Err(XfrError::Tsig(ReplyProblem::Unsigned));
    }
    let serial = records
        .first()
        .and_then(|r| r.rdata.soa_serial())
        .ok_or_else(|| XfrError::Inconsistent("unreadable SOA".into()))?;
    Ok(Transferred {
        records,
        serial,
        messages: ex.messages,
    })
}

/// What an IXFR (RFC 1995) brought.
#[derive(Debug, Clone)]
pub enum Ixfr {
    /// The reply was one SOA whose serial is not newer than ours (§4).
    UpToDate(u32),
    /// An AXFR-style reply: the whole zone (§4).
    Full(Transferred),
    /// Difference sequences from our serial to `serial`, in order.
    Incremental {
        /// The differences.
        diffs: Vec<Difference>,
        /// The serial they end at.
        serial: u32,
        /// Messages read.
        messages: usize,
    },
}

/// Where an IXFR reply's record stream is.
enum IxfrState {
    /// Only the first (newest) SOA seen.
    First,
    /// The whole zone, after the first SOA.
    Full(Vec<Record>),
    /// In a difference: deletions (`adding` false) or additions.
    Diff { current: Difference, adding: bool },
}

impl IxfrState {
    /// The deletions of a difference from `old_soa`, in a reply ending at
    /// `newest` (its SOA after is set when the deletions end).
    fn starting(old_soa: Record, newest: &Record) -> IxfrState {
        IxfrState::Diff {
            current: Difference {
                old_soa,
                deleted: Vec::new(),
                new_soa: newest.clone(),
                added: Vec::new(),
            },
            adding: false,
        }
    }
}

/// Asks `primary` for the changes to `origin` since serial `ours` by IXFR
/// (RFC 1995) over TCP.
///
/// Errors: as [`Exchange::next`]; [`XfrError::Inconsistent`] for a reply
/// that breaks §4's shape (the SOA sequence, differences not starting at
/// our serial nor ending at the first SOA, records after the end), or a
/// single SOA newer than ours (which only UDP may send).
pub async fn ixfr(primary: &Primary, origin: &Name, ours: u32) -> Result<Ixfr, XfrError> {
    let mut ex = connect(primary, origin, RType::IXFR, Some(ours)).await?;
    let key = ex.key.clone();
    let mut verifier = verifier(&key, ex.mac);
    let inconsistent = |what: String| XfrError::Inconsistent(what);
    let is_soa = |r: &Record| r.rtype == RType::SOA && r.owner == *origin;
    let mut newest: Option<Record> = None;
    let mut state = IxfrState::First;
    let mut diffs: Vec<Difference> = Vec::new();
    loop {
        let batch = ex.next(&mut verifier).await?;
        let n = batch.len();
        for (i, rec) in batch.into_iter().enumerate() {
            let Some(first) = &newest else {
                if !is_soa(&rec) {
                    return Err(inconsistent(format!(
                        "the reply starts with {} {}, not the SOA of {origin}",
                        rec.owner, rec.rtype
                    )));
                }
                newest = Some(rec);
                continue;
            };
            let ends = is_soa(&rec) && rec.rdata == first.rdata;
            state = match state {
                IxfrState::First if !is_soa(&rec) => IxfrState::Full(vec![first.clone(), rec]),
                IxfrState::First => {
                    if rec.rdata.soa_serial() != Some(ours) {
                        return Err(inconsistent(format!(
                            "the differences start at serial {}, ours is {ours}",
                            rec.rdata.soa_serial().unwrap_or_default()
                        )));
                    }
                    IxfrState::starting(rec, first)
                }
                IxfrState::Full(mut records) => {
                    if ends {
                        if i + 1 != n {
                            return Err(inconsistent("records follow the closing SOA".into()));
                        }
                        let mut t = finish(ex, records)?;
                        t.records.shrink_to_fit();
                        return Ok(Ixfr::Full(t));
                    }
                    if is_soa(&rec) {
                        return Err(inconsistent("a second SOA inside the zone".into()));
                    }
                    records.push(rec);
                    IxfrState::Full(records)
                }
                IxfrState::Diff {
                    mut current,
                    adding: false,
                } => {
                    if is_soa(&rec) {
                        current.new_soa = rec;
                        IxfrState::Diff {
                            current,
                            adding: true,
                        }
                    } else {
                        current.deleted.push(rec);
                        IxfrState::Diff {
                            current,
                            adding: false,
                        }
                    }
                }
                IxfrState::Diff {
                    mut current,
                    adding: true,
                } => {
                    if !is_soa(&rec) {
                        current.added.push(rec);
                        IxfrState::Diff {
                            current,
                            adding: true,
                        }
                    } else {
                        let from = current.new_soa.rdata.soa_serial();
                        if rec.rdata.soa_serial() != from && !ends {
                            let serial = |s: Option<u32>| {
                                s.map_or_else(|| "(none)".to_string(), |s| s.to_string())
                            };
                            return Err(inconsistent(format!(
                                "a difference from serial {} follows one ending at serial {}",
                                serial(rec.rdata.soa_serial()),
                                serial(from)
                            )));
                        }
                        diffs.push(current);
                        if ends {
                            if i + 1 != n {
                                return Err(inconsistent("records follow the closing SOA".into()));
                            }
                            if !ex.last_signed {
                                return Err(XfrError::Tsig(ReplyProblem::Unsigned));
                            }
                            let serial = first.rdata.soa_serial().unwrap_or_default();
                            return Ok(Ixfr::Incremental {
                                diffs,
                                serial,
                                messages: ex.messages,
                            });
                        }
                        IxfrState::starting(rec, first)
                    }
                }
            };
        }
        // A message holding the first SOA alone: "up to date" (§4).
        if let (IxfrState::First, Some(first)) = (&state, &newest) {
            let theirs = first.rdata.soa_serial().unwrap_or_default();
            if !ex.last_signed {
                return Err(XfrError::Tsig(ReplyProblem::Unsigned));
            }
            if serial_gt(theirs, ours) {
                return Err(inconsistent(format!(
                    "a single SOA with the newer serial {theirs} (over TCP)"
                )));
            }
            return Ok(Ixfr::UpToDate(theirs));
        }
    }
}

/// Applies IXFR differences to `origin` through its write side in one
/// transaction, journaled (so downstream secondaries get IXFR from us).
/// Returns the journal rows written.
///
/// Errors: [`XfrError::Inconsistent`] when a difference does not apply (an
/// RR to delete that is absent, …) or the result fails the zone checks;
/// [`XfrError::Store`] when the storage fails. The previous content stays in
/// both cases.
pub fn store_ixfr(
    writer: &dyn ZoneWriter,
    origin: &Name,
    diffs: &[Difference],
) -> Result<usize, XfrError> {
    writer
        .apply_differences(origin, diffs)
        .map_err(|e| store_error(writer, e))
}

/// Writes `zone` (transferred from `from`) as the whole content of `origin`
/// through its write side, clearing the zone's journal (which no longer
/// leads to this content) in the same transaction. Returns the number of RRs
/// written.
///
/// Errors: [`XfrError::Inconsistent`] when the zone fails the zone checks
/// (records outside the zone, …); [`XfrError::Store`] when the storage
/// fails. The previous content stays in both cases.
pub fn store_axfr(
    writer: &dyn ZoneWriter,
    origin: &Name,
    zone: &Transferred,
    from: &Primary,
) -> Result<usize, XfrError> {
    let source = Arc::new(PathBuf::from(format!(
        "AXFR of {origin} from {}",
        from.addr
    )));
    let sourced: Vec<SourcedRecord> = zone
        .records
        .iter()
        .enumerate()
        .map(|(i, r)| SourcedRecord {
            record: r.clone(),
            file: Arc::clone(&source),
            line: i + 1,
        })
        .collect();
    writer
        .replace_zone(origin, &sourced, JournalPolicy::Clear, &mut |_, _| {})
        .map(|report| report.total())
        .map_err(|e| store_error(writer, e))
}

/// A failed write to `writer` as a transfer error: busy, storage, or content
/// that does not apply.
fn store_error(writer: &dyn ZoneWriter, e: WriteError) -> XfrError {
    if e.is_busy() {
        return XfrError::StoreBusy(storage_text(writer, &e));
    }
    match e {
        WriteError::Sqlite { .. }
        | WriteError::Load(LoadError::Sqlite { .. })
        | WriteError::Storage(_)
        | WriteError::Busy(_)
        | WriteError::Open(_)
        | WriteError::Gone(_)
        | WriteError::NotSupported(_) => XfrError::Store(storage_text(writer, &e)),
        other => XfrError::Inconsistent(other.to_string()),
    }
}

/// A storage failure of `writer` for the log, naming the DB: an SQL
/// statement's error (`committing failed: database or disk is full`) does
/// not, the others do.
pub(crate) fn storage_text(writer: &dyn ZoneWriter, e: &WriteError) -> String {
    match e {
        WriteError::Sqlite { .. } => format!("{}: {e}", writer.describe()),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        s.parse().expect("name")
    }

    /// A reply to `req` carrying `answer` (already wire records).
    fn reply(req: &[u8], answer: &[u8], an: u16) -> Vec<u8> {
        let mut m = req.to_vec();
        m[2] |= 0x84; // QR, AA
        m[6..8].copy_from_slice(&an.to_be_bytes());
        m.extend_from_slice(answer);
        m
    }

    #[test]
    fn compressed_soa_and_mx_are_decompressed() {
        let origin = name("example.com.");
        let req = request(7, &origin, RType::AXFR, None);
        // SOA: owner pointer to the question (offset 12), mname ns1+ptr, rname ptr.
        let mut soa = vec![0xC0, 12, 0, 6, 0, 1, 0, 0, 0x0E, 0x10];
        let mut rd = vec![3, b'n', b's', b'1', 0xC0, 12, 0xC0, 12];
        rd.extend_from_slice(&[0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4]);
        soa.extend_from_slice(&(rd.len() as u16).to_be_bytes());
        soa.extend_from_slice(&rd);
        // MX 10 ns1.example.com. (pointer to the SOA's mname).
        let mname_at = (req.len() + 12) as u8;
        soa.extend_from_slice(&[
            0xC0, 12, 0, 15, 0, 1, 0, 0, 0, 60, 0, 4, 0, 10, 0xC0, mname_at,
        ]);
        let msg = reply(&req, &soa, 2);
        let recs = parse_reply(&msg, 7, &origin, RType::AXFR, true).expect("parses");
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].rdata.soa_serial(), Some(5));
        assert_eq!(recs[0].ttl, 3600);
        assert_eq!(
            recs[1].rdata.additional_target(RType::MX),
            Some(name("ns1.example.com."))
        );
        // Wrong id, wrong question, an error rcode.
        assert!(matches!(
            parse_reply(&msg, 8, &origin, RType::AXFR, true),
            Err(XfrError::Malformed(_))
        ));
        assert!(matches!(
            parse_reply(&msg, 7, &name("example.org."), RType::AXFR, true),
            Err(XfrError::Malformed(_))
        ));
        let mut refused = reply(&req, &[], 0);
        refused[3] |= 5;
        assert!(matches!(
            parse_reply(&refused, 7, &origin, RType::AXFR, true),
            Err(XfrError::Rcode(Rcode::REFUSED))
        ));
        // A pointer past the end of the RDATA is refused.
        let mut cut = msg.clone();
        let n = cut.len();
        cut[n - 1] = 0xFF;
        assert!(parse_reply(&cut, 7, &origin, RType::AXFR, true).is_err());
    }
}
