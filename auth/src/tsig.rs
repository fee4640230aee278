//! TSIG (RFC 8945): verifying signed requests, signing replies and transfer
//! streams, signing outgoing requests (NOTIFY) and checking their replies.
//!
//! Server side, for a request whose TSIG record [`crate::wire::parse_query`]
//! located (the last record, and only one, else FORMERR):
//!
//! | check (RFC 8945 §5.2, in this order) | outcome |
//! |---|---|
//! | the record does not parse, its class is not ANY | FORMERR, no TSIG |
//! | no key of that name and algorithm (§5.2.1) | NOTAUTH, unsigned TSIG with error BADKEY |
//! | MAC longer than the hash, or shorter than max(10, half the hash) (§5.2.2.1) | FORMERR, no TSIG |
//! | MAC does not match (§5.2.2) | NOTAUTH, unsigned TSIG with error BADSIG |
//! | time signed more than fudge seconds from ours (§5.2.3) | NOTAUTH, TSIG with error BADTIME, signed, our time in Other Data |
//! | otherwise | the request is answered and the reply signed ([`Signer`]) |
//!
//! The dispatcher's TSIG guard is here too: [`check_request`] before the
//! table (the checks above, the rejection's reply, its log line and counter)
//! and, last of all, [`Signer::sign_reply`] or [`Signer::sign_next`].
//!
//! Truncated MACs (§5.2.2.1) are accepted down to the RFC's minimum; that is
//! also the local policy, so BADTRUNC (§5.2.4) is never sent. Replies carry the
//! full MAC. Every message of a multi-message reply is signed (§5.3.1): the
//! first over the request MAC, the message and the TSIG variables, each later
//! one over the previous MAC, the message and the timers only.
//!
//! Client side ([`sign_request`], [`verify_reply`]): outgoing NOTIFY is
//! signed (§5.1) and its reply verified (§5.4).
//!
//! MACs are compared in constant time ([`crate::keys::MacState::verify_truncated`]).
//! Nothing here allocates for a message without TSIG: the dispatcher calls in
//! only when [`crate::wire::Request::tsig`] is set.

use std::fmt;
use std::net::IpAddr;

use authd_datasrc::Name;
use authd_datasrc::name::MAX_NAME_LEN;

use crate::keys::{Algorithm, Key, KeyRing, MAX_MAC_LEN, MacState};
use crate::log_limit::LogLimit;
use crate::metrics::Metrics;
use crate::query::{Answer, EDNS_UDP_PAYLOAD, Transport, render, reply_limit};
use crate::sections;
use crate::wire::{
    Flags, HEADER_LEN, Header, MessageWriter, Rcode, Request, TSIG, read_name, u16_at,
};

/// The fudge (seconds of clock difference allowed) written in what authd
/// signs; RFC 8945 §10 recommends 300.
pub const FUDGE: u16 = 300;

/// Class ANY, the class of every TSIG record (RFC 8945 §4.2).
const CLASS_ANY: u16 = 255;

/// A TSIG error code (RFC 8945 §3, sharing the extended RCODE registry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TsigError(pub u16);

impl TsigError {
    /// No error.
    pub const NOERROR: TsigError = TsigError(0);
    /// The MAC does not verify.
    pub const BADSIG: TsigError = TsigError(16);
    /// Unknown key or algorithm.
    pub const BADKEY: TsigError = TsigError(17);
    /// The time signed is outside the fudge window.
    pub const BADTIME: TsigError = TsigError(18);
    /// The MAC is truncated below the local policy.
    pub const BADTRUNC: TsigError = TsigError(22);
}

impl fmt::Display for TsigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TsigError::NOERROR => f.write_str("NOERROR"),
            TsigError::BADSIG => f.write_str("BADSIG"),
            TsigError::BADKEY => f.write_str("BADKEY"),
            TsigError::BADTIME => f.write_str("BADTIME"),
            TsigError::BADTRUNC => f.write_str("BADTRUNC"),
            TsigError(n) => write!(f, "TSIG error {n}"),
        }
    }
}

/// Seconds since the Unix epoch: the clock TSIG times are read against (the
/// same one the cookies and rate limiting read).
pub use crate::sys::unix_seconds as now;

/// The fields of a TSIG record (RFC 8945 §4.2), borrowing the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// The key name (owner of the record; decompressed).
    pub key_name: Name,
    /// The algorithm name, as received.
    pub algorithm: Name,
    /// Time signed, seconds since the epoch (48 bits).
    pub time_signed: u64,
    /// Seconds of difference allowed.
    pub fudge: u16,
    /// The MAC (possibly truncated, or empty in an error reply).
    pub mac: &'a [u8],
    /// The message id the MAC was computed with.
    pub original_id: u16,
    /// The TSIG error.
    pub error: TsigError,
    /// Other Data (the server's time in a BADTIME reply).
    pub other: &'a [u8],
}

impl Record<'_> {
    /// The fields a MAC covers besides the message (RFC 8945 §4.3.3).
    fn fields(&self) -> Fields<'_> {
        Fields {
            key_name: self.key_name.as_wire(),
            algorithm: self.algorithm.as_wire(),
            time: self.time_signed,
            fudge: self.fudge,
            error: self.error,
            other: self.other,
        }
    }
}

fn u48_at(msg: &[u8], at: usize) -> Option<u64> {
    let b = msg.get(at..at + 6)?;
    Some(b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
}

/// Reads the TSIG record at `at`, which must end the message.
///
/// `None` when it is not a TSIG record, its class is not ANY, its RDATA is
/// malformed or bytes follow it.
pub fn read_record(msg: &[u8], at: usize) -> Option<Record<'_>> {
    let (key_name, _) = read_name(msg, at)?;
    let rr = sections::rr_at(msg, at)?;
    if rr.rtype != TSIG || rr.class.0 != CLASS_ANY || rr.end != msg.len() {
        return None;
    }
    let (rdata, end) = (rr.rdata, rr.end);
    let (algorithm, p) = read_name(msg, rdata)?;
    let time_signed = u48_at(msg, p)?;
    let fudge = u16_at(msg, p + 6)?;
    let mac_len = usize::from(u16_at(msg, p + 8)?);
    let mac = msg.get(p + 10..p + 10 + mac_len)?;
    let p = p + 10 + mac_len;
    let original_id = u16_at(msg, p)?;
    let error = TsigError(u16_at(msg, p + 2)?);
    let other_len = usize::from(u16_at(msg, p + 4)?);
    let other = msg.get(p + 6..p + 6 + other_len)?;
    if p + 6 + other_len != end {
        return None;
    }
    Some(Record {
        key_name,
        algorithm,
        time_signed,
        fudge,
        mac,
        original_id,
        error,
        other,
    })
}

/// The offset of the last record of `msg` when it is a TSIG record in the
/// additional section (for replies, which [`crate::wire::parse_query`] does
/// not read); `None` when the message is unsigned or malformed.
pub fn find(msg: &[u8]) -> Option<usize> {
    let rrs: usize = [6, 8, 10]
        .iter()
        .map(|&at| u16_at(msg, at).map(usize::from))
        .sum::<Option<usize>>()?;
    if u16_at(msg, 10)? == 0 {
        return None;
    }
    let pos = sections::skip_questions(msg, u16_at(msg, 4)?)?;
    let mut last = None;
    let end = sections::each_rr(msg, pos, rrs, |_, rr| last = Some(*rr))?;
    let last = last?;
    (end == msg.len() && last.rtype == TSIG).then_some(last.start)
}

/// Feeds the canonical (lower-case) form of uncompressed name `wire`.
fn update_lower(mac: &mut MacState, wire: &[u8]) {
    let mut buf = [0u8; MAX_NAME_LEN];
    let n = wire.len().min(MAX_NAME_LEN);
    for (d, s) in buf.iter_mut().zip(&wire[..n]) {
        *d = s.to_ascii_lowercase();
    }
    mac.update(&buf[..n]);
}

/// The time fields as sent: 48-bit time signed, then the fudge.
fn timers(time: u64, fudge: u16) -> [u8; 8] {
    let t = time.to_be_bytes();
    [
        t[2],
        t[3],
        t[4],
        t[5],
        t[6],
        t[7],
        (fudge >> 8) as u8,
        fudge as u8,
    ]
}

/// What a TSIG record says besides its MAC and id.
#[derive(Clone, Copy)]
struct Fields<'a> {
    key_name: &'a [u8],
    algorithm: &'a [u8],
    time: u64,
    fudge: u16,
    error: TsigError,
    other: &'a [u8],
}

impl Fields<'_> {
    /// Feeds the TSIG variables (RFC 8945 §4.3.3): key name and algorithm in
    /// canonical form, class ANY, TTL 0, timers, error, other data.
    fn digest(&self, mac: &mut MacState) {
        update_lower(mac, self.key_name);
        mac.update(&[0, CLASS_ANY as u8, 0, 0, 0, 0]);
        update_lower(mac, self.algorithm);
        mac.update(&timers(self.time, self.fudge));
        mac.update(&self.error.0.to_be_bytes());
        mac.update(&(self.other.len() as u16).to_be_bytes());
        mac.update(self.other);
    }

    /// Bytes the record takes with a MAC of `mac_len` bytes.
    fn record_len(&self, mac_len: usize) -> usize {
        self.key_name.len() + 10 + self.algorithm.len() + 16 + mac_len + self.other.len()
    }

    /// Appends the record with `mac` and `original_id` to `msg` and counts
    /// it in ARCOUNT.
    fn append(&self, msg: &mut Vec<u8>, mac: &[u8], original_id: u16) {
        let rdlen = self.algorithm.len() + 16 + mac.len() + self.other.len();
        msg.extend_from_slice(self.key_name);
        msg.extend_from_slice(&TSIG.0.to_be_bytes());
        msg.extend_from_slice(&CLASS_ANY.to_be_bytes());
        msg.extend_from_slice(&[0, 0, 0, 0]);
        msg.extend_from_slice(&(rdlen as u16).to_be_bytes());
        msg.extend_from_slice(self.algorithm);
        msg.extend_from_slice(&timers(self.time, self.fudge));
        msg.extend_from_slice(&(mac.len() as u16).to_be_bytes());
        msg.extend_from_slice(mac);
        msg.extend_from_slice(&original_id.to_be_bytes());
        msg.extend_from_slice(&self.error.0.to_be_bytes());
        msg.extend_from_slice(&(self.other.len() as u16).to_be_bytes());
        msg.extend_from_slice(self.other);
        if let Some(ar) = u16_at(msg, 10) {
            msg[10..12].copy_from_slice(&ar.wrapping_add(1).to_be_bytes());
        }
    }
}

/// Feeds the part of signed message `msg` a MAC covers (RFC 8945 §4.3.2):
/// the message without its TSIG record (at `at`), ARCOUNT one less, the
/// original id in the header.
fn digest_unsigned(mac: &mut MacState, msg: &[u8], at: usize, original_id: u16) {
    let mut header = [0u8; HEADER_LEN];
    header.copy_from_slice(&msg[..HEADER_LEN]);
    header[0..2].copy_from_slice(&original_id.to_be_bytes());
    let ar = u16::from_be_bytes([header[10], header[11]]).wrapping_sub(1);
    header[10..12].copy_from_slice(&ar.to_be_bytes());
    mac.update(&header);
    mac.update(&msg[HEADER_LEN..at]);
}

/// A signer's key: borrowed from the key ring, or (a transfer's signer,
/// which outlives the message that asked for it, [`Signer::into_owned`])
/// its own copy. Two words either way: a signer stays small on the stack of
/// every signed query.
enum SignerKey<'k> {
    Ring(&'k Key),
    Own(Box<Key>),
}

impl std::ops::Deref for SignerKey<'_> {
    type Target = Key;
    fn deref(&self) -> &Key {
        match self {
            SignerKey::Ring(k) => k,
            SignerKey::Own(k) => k,
        }
    }
}

/// Signs replies to one verified request: the reply, or each message of a
/// transfer in order (RFC 8945 §5.3, §5.3.1). Holds the request MAC, then the
/// MAC of the last message signed, on the stack.
pub struct Signer<'k> {
    key: SignerKey<'k>,
    prior: [u8; MAX_MAC_LEN],
    prior_len: usize,
    signed: usize,
    fudge: u16,
    error: TsigError,
    /// BADTIME (RFC 8945 §5.2.3): the client's time signed is echoed, ours
    /// goes in Other Data.
    badtime: Option<(u64, [u8; 6])>,
}

impl<'k> Signer<'k> {
    fn new(key: &'k Key, request_mac: &[u8], fudge: u16) -> Signer<'k> {
        let mut prior = [0u8; MAX_MAC_LEN];
        let prior_len = request_mac.len().min(MAX_MAC_LEN);
        prior[..prior_len].copy_from_slice(&request_mac[..prior_len]);
        Signer {
            key: SignerKey::Ring(key),
            prior,
            prior_len,
            signed: 0,
            fudge,
            error: TsigError::NOERROR,
            badtime: None,
        }
    }

    /// The key the request was signed with.
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// This signer with its own copy of the key, for the messages of a
    /// transfer rendered after the request is gone.
    pub fn into_owned(self) -> Signer<'static> {
        Signer {
            key: SignerKey::Own(Box::new(self.key.clone())),
            prior: self.prior,
            prior_len: self.prior_len,
            signed: self.signed,
            fudge: self.fudge,
            error: self.error,
            badtime: self.badtime,
        }
    }

    /// The TSIG error the next message carries (NOERROR, or BADTIME).
    pub fn error(&self) -> TsigError {
        self.error
    }

    fn fields(&self, now: u64) -> Fields<'_> {
        Fields {
            key_name: self.key.name.as_wire(),
            algorithm: self.key.algorithm.wire_name(),
            time: self.badtime.map_or(now, |(t, _)| t),
            fudge: self.fudge,
            error: self.error,
            other: self.badtime.as_ref().map_or(&[], |(_, o)| &o[..]),
        }
    }

    /// Bytes [`Signer::sign`] adds to a message.
    pub fn record_len(&self) -> usize {
        self.fields(0).record_len(self.key.algorithm.mac_len())
    }

    /// Signs `msg` (a reply, or the next message of a transfer), appending
    /// the TSIG record with the full MAC, time signed `now`.
    pub fn sign(&mut self, msg: &mut Vec<u8>, now: u64) {
        if msg.len() < HEADER_LEN {
            return;
        }
        let fields = self.fields(now);
        let mut mac = self.key.mac();
        mac.update(&(self.prior_len as u16).to_be_bytes());
        mac.update(&self.prior[..self.prior_len]);
        mac.update(msg);
        if self.signed == 0 {
            fields.digest(&mut mac);
        } else {
            mac.update(&timers(fields.time, fields.fudge));
        }
        let mut out = [0u8; MAX_MAC_LEN];
        let n = mac.finalize_into(&mut out);
        let id = u16::from_be_bytes([msg[0], msg[1]]);
        fields.append(msg, &out[..n], id);
        self.prior = out;
        self.prior_len = n;
        self.signed += 1;
    }
}

/// An error reply's TSIG that carries no MAC (RFC 8945 §5.3.2: BADKEY and
/// BADSIG replies are unsigned), with the request's key name, algorithm,
/// time signed and fudge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsigned {
    /// BADKEY or BADSIG.
    pub error: TsigError,
    /// The key name as received.
    pub key_name: Name,
    /// The algorithm name as received.
    pub algorithm: Name,
    time_signed: u64,
    fudge: u16,
}

impl Unsigned {
    /// Appends the TSIG record (MAC size 0) to reply `msg`.
    pub fn append_to(&self, msg: &mut Vec<u8>) {
        if msg.len() < HEADER_LEN {
            return;
        }
        let id = u16::from_be_bytes([msg[0], msg[1]]);
        Fields {
            key_name: self.key_name.as_wire(),
            algorithm: self.algorithm.as_wire(),
            time: self.time_signed,
            fudge: self.fudge,
            error: self.error,
            other: &[],
        }
        .append(msg, &[], id);
    }
}

/// Why a signed request is not answered as asked (RFC 8945 §5.2), and what
/// the reply carries.
pub enum Rejection<'k> {
    /// FORMERR without TSIG: the record is malformed, or its MAC size is out
    /// of bounds (§5.2.2.1).
    FormErr,
    /// NOTAUTH with an unsigned TSIG: BADKEY or BADSIG.
    Unsigned(Unsigned),
    /// NOTAUTH with a signed TSIG carrying BADTIME: sign the reply with it.
    BadTime(Box<Signer<'k>>),
}

/// Verifies the TSIG record at `at` of request `msg` against `keys` at time
/// `now` (RFC 8945 §5.2, checks in the order of the module table).
///
/// Returns the [`Signer`] for the reply, or the [`Rejection`] to answer with.
pub fn verify<'k>(
    keys: &'k KeyRing,
    msg: &[u8],
    at: usize,
    now: u64,
) -> Result<Signer<'k>, Rejection<'k>> {
    let Some(rec) = read_record(msg, at).filter(|_| at >= HEADER_LEN) else {
        return Err(Rejection::FormErr);
    };
    let algorithm = Algorithm::from_wire_name(rec.algorithm.as_wire());
    let unsigned = |error| {
        Rejection::Unsigned(Unsigned {
            error,
            key_name: rec.key_name.clone(),
            algorithm: rec.algorithm.clone(),
            time_signed: rec.time_signed,
            fudge: rec.fudge,
        })
    };
    let Some(key) = keys
        .get(&rec.key_name)
        .filter(|k| Some(k.algorithm) == algorithm)
    else {
        return Err(unsigned(TsigError::BADKEY));
    };
    let n = rec.mac.len();
    if n > key.algorithm.mac_len() || n < key.algorithm.min_mac_len() {
        return Err(Rejection::FormErr);
    }
    let mut mac = key.mac();
    digest_unsigned(&mut mac, msg, at, rec.original_id);
    rec.fields().digest(&mut mac);
    if !mac.verify_truncated(rec.mac) {
        return Err(unsigned(TsigError::BADSIG));
    }
    let mut signer = Signer::new(key, rec.mac, rec.fudge);
    if now.abs_diff(rec.time_signed) > u64::from(rec.fudge) {
        let t = now.to_be_bytes();
        signer.error = TsigError::BADTIME;
        signer.badtime = Some((rec.time_signed, [t[2], t[3], t[4], t[5], t[6], t[7]]));
        return Err(Rejection::BadTime(Box::new(signer)));
    }
    Ok(signer)
}

/// TSIG failures logged (RFC 8945 §5.2 asks for a log line; any client can
/// send many).
static TSIG_LOG: LogLimit = LogLimit::new();

/// The server's TSIG guard, before the table (RFC 8945 §5.2): verifies the
/// TSIG record at `at` of request `req` (the parsed `msg`) from `peer` over
/// `transport` against `keys`, and returns the [`Signer`] of its replies.
/// A request that fails gets its reply written into `out` — FORMERR, or
/// NOTAUTH with the TSIG error (unsigned for BADKEY and BADSIG, signed for
/// BADTIME) — logged within a per-second budget and counted in `metrics`,
/// and `None` is returned: it goes no further. Out of line, so the unsigned
/// path stays small.
#[inline(never)]
pub fn check_request<'k>(
    keys: &'k KeyRing,
    metrics: Option<&Metrics>,
    msg: &[u8],
    req: &Request<'_>,
    at: usize,
    (transport, peer): (Transport, IpAddr),
    out: &mut Vec<u8>,
) -> Option<Signer<'k>> {
    match verify(keys, msg, at, now()) {
        Ok(signer) => Some(signer),
        Err(rejection) => {
            if let Some(m) = metrics {
                let i = match rejection {
                    Rejection::FormErr => 0,
                    Rejection::Unsigned(_) => 1,
                    Rejection::BadTime(_) => 2,
                };
                m.tsig_failures[i].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            rejected(req, rejection, transport, peer, out);
            None
        }
    }
}

/// The reply to a signed request that failed verification (RFC 8945 §5.2):
/// FORMERR, or NOTAUTH with the TSIG error (unsigned for BADKEY and BADSIG,
/// signed for BADTIME). Logged, within [`TSIG_LOG`]'s budget.
fn rejected(
    req: &Request<'_>,
    rejection: Rejection<'_>,
    transport: Transport,
    peer: IpAddr,
    out: &mut Vec<u8>,
) {
    let what = match &rejection {
        Rejection::FormErr => "malformed TSIG record or MAC size: FORMERR".to_string(),
        Rejection::Unsigned(u) => format!("key {} ({}): {}", u.key_name, u.algorithm, u.error),
        Rejection::BadTime(s) => format!("key {}: {}", s.key().name, s.error()),
    };
    if let Some(suppressed) = TSIG_LOG.allow() {
        tracing::info!(
            qname = %req.qname,
            qtype = %req.qtype,
            suppressed,
            "TSIG: request from {peer} rejected: {what}"
        );
    }
    let error = |rcode, out: &mut Vec<u8>| render(req, &Answer::new(rcode, false), transport, out);
    match rejection {
        Rejection::FormErr => {
            error(Rcode::FORMERR, out);
        }
        Rejection::Unsigned(u) => {
            error(Rcode::NOTAUTH, out);
            u.append_to(out);
        }
        Rejection::BadTime(mut s) => {
            error(Rcode::NOTAUTH, out);
            s.sign(out, now());
        }
    }
}

impl Signer<'_> {
    /// The server's TSIG guard, last (RFC 8945 §5.3: the signature covers
    /// everything before it): signs the one reply in `out` to the verified
    /// request `req` over `transport`. A reply that the TSIG record would
    /// push over its size limit is first cut to the question (and OPT) with
    /// TC set and NOERROR, as §5.3 says.
    pub fn sign_reply(&mut self, req: &Request<'_>, transport: Transport, out: &mut Vec<u8>) {
        let now = now();
        let limit = reply_limit(req, transport);
        if out.len() + self.record_len() > limit {
            let aa = u16_at(out, 2).map_or(Flags::empty(), |w| {
                let f = Flags::from_word(w);
                if f.contains(Flags::AA) {
                    Flags::AA
                } else {
                    Flags::empty()
                }
            });
            let mut w = MessageWriter::new(
                out,
                Header::reply_to(req, aa | Flags::TC, Rcode::NOERROR),
                limit,
            );
            w.push_question(req.question);
            if let Some(e) = req.edns {
                w.push_opt(EDNS_UDP_PAYLOAD, Rcode::NOERROR, e.dnssec_ok, None);
            }
            w.finish();
        }
        self.sign(out, now);
    }

    /// The same for the next message of a transfer, in order (RFC 8945
    /// §5.3.1).
    pub fn sign_next(&mut self, message: &mut Vec<u8>) {
        self.sign(message, now());
    }
}

/// The MAC of a request signed by [`sign_request`], to verify its reply with.
#[derive(Clone, Copy)]
pub struct RequestMac {
    mac: [u8; MAX_MAC_LEN],
    len: usize,
}

impl RequestMac {
    /// The MAC bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.mac[..self.len]
    }
}

/// Signs request `msg` (a NOTIFY) with `key` at time `now` (RFC 8945 §5.1):
/// appends the TSIG record (fudge [`FUDGE`], full MAC) and returns the MAC.
pub fn sign_request(key: &Key, msg: &mut Vec<u8>, now: u64) -> RequestMac {
    let fields = Fields {
        key_name: key.name.as_wire(),
        algorithm: key.algorithm.wire_name(),
        time: now,
        fudge: FUDGE,
        error: TsigError::NOERROR,
        other: &[],
    };
    let mut mac = key.mac();
    mac.update(msg);
    fields.digest(&mut mac);
    let mut out = [0u8; MAX_MAC_LEN];
    let len = mac.finalize_into(&mut out);
    let id = u16_at(msg, 0).unwrap_or(0);
    fields.append(msg, &out[..len], id);
    RequestMac { mac: out, len }
}

/// Why the reply to a signed request is not trusted (RFC 8945 §5.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplyProblem {
    /// The reply carries no TSIG record (or a malformed one).
    Unsigned,
    /// The reply reports a TSIG error (BADKEY, BADSIG, BADTIME, …): the peer
    /// did not accept our request.
    Error(TsigError),
    /// The reply is signed with another key or algorithm.
    OtherKey,
    /// The MAC does not verify.
    BadMac,
    /// The reply's time signed is outside its fudge from ours.
    BadTime,
}

impl fmt::Display for ReplyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplyProblem::Unsigned => f.write_str("the reply is not signed"),
            ReplyProblem::Error(e) => write!(f, "the peer answered TSIG error {e}"),
            ReplyProblem::OtherKey => f.write_str("the reply is signed with another key"),
            ReplyProblem::BadMac => f.write_str("the reply's MAC does not verify"),
            ReplyProblem::BadTime => f.write_str("the reply's time is outside its fudge"),
        }
    }
}

/// Checks `reply` to a request signed with `key` whose MAC was
/// `request_mac`, at time `now` (RFC 8945 §5.4.1): the first (or only)
/// message of a reply, through a [`ReplyVerifier`].
///
/// Errors: see [`ReplyVerifier::verify`].
pub fn verify_reply(
    key: &Key,
    request_mac: &RequestMac,
    reply: &[u8],
    now: u64,
) -> Result<(), ReplyProblem> {
    ReplyVerifier::new(key, request_mac).verify(reply, now)
}

/// Most unsigned messages allowed in a row between two signed ones of a
/// transfer (RFC 8945 §5.3.1: at least every 100th message is signed).
pub const MAX_UNSIGNED_RUN: usize = 99;

/// Verifies the messages of a reply to a signed request in order: the first
/// over the request MAC, each later one over the previous MAC, the unsigned
/// messages since it and its timers (RFC 8945 §5.3.1). [`Self::verify`]
/// wants every message signed (as authd signs them); [`Self::verify_next`]
/// also takes unsigned messages within a transfer, as other primaries may
/// send them.
pub struct ReplyVerifier<'k> {
    key: &'k Key,
    prior: [u8; MAX_MAC_LEN],
    prior_len: usize,
    verified: usize,
    /// Unsigned messages since the last signed one, whole and in order.
    pending: Vec<u8>,
    /// How many messages `pending` holds.
    unsigned_run: usize,
}

impl<'k> ReplyVerifier<'k> {
    /// A verifier for the reply to the request signed with `key` whose MAC
    /// was `request_mac`.
    pub fn new(key: &'k Key, request_mac: &RequestMac) -> ReplyVerifier<'k> {
        ReplyVerifier {
            key,
            prior: request_mac.mac,
            prior_len: request_mac.len,
            verified: 0,
            pending: Vec::new(),
            unsigned_run: 0,
        }
    }

    /// Checks the next message `reply` of a transfer at time `now`: `Ok(true)`
    /// when it is signed and verifies (over the unsigned messages before it),
    /// `Ok(false)` when it is an unsigned message after the first, kept for
    /// the next signed one (RFC 8945 §5.3.1). The caller must see `Ok(true)`
    /// for the last message of the transfer.
    ///
    /// Errors: as [`Self::verify`]; [`ReplyProblem::Unsigned`] for an
    /// unsigned first message or more than [`MAX_UNSIGNED_RUN`] in a row.
    pub fn verify_next(&mut self, reply: &[u8], now: u64) -> Result<bool, ReplyProblem> {
        if self.verified > 0 && find(reply).is_none() {
            if self.unsigned_run >= MAX_UNSIGNED_RUN {
                return Err(ReplyProblem::Unsigned);
            }
            self.pending.extend_from_slice(reply);
            self.unsigned_run += 1;
            return Ok(false);
        }
        self.verify(reply, now).map(|()| true)
    }

    /// Checks the next message `reply` at time `now`.
    ///
    /// Errors: see [`ReplyProblem`]. A peer's TSIG error without a MAC
    /// (BADKEY, BADSIG) is reported as such; one with a MAC (BADTIME) only
    /// once the MAC verifies (its time signed is ours, echoed), else as
    /// [`ReplyProblem::BadMac`].
    pub fn verify(&mut self, reply: &[u8], now: u64) -> Result<(), ReplyProblem> {
        let key = self.key;
        let rec = find(reply)
            .and_then(|at| Some((at, read_record(reply, at)?)))
            .filter(|(at, _)| *at >= HEADER_LEN);
        let Some((at, rec)) = rec else {
            return Err(ReplyProblem::Unsigned);
        };
        if rec.error != TsigError::NOERROR && rec.mac.is_empty() {
            return Err(ReplyProblem::Error(rec.error));
        }
        if rec.key_name != key.name
            || Algorithm::from_wire_name(rec.algorithm.as_wire()) != Some(key.algorithm)
        {
            return Err(ReplyProblem::OtherKey);
        }
        let n = rec.mac.len();
        if n > key.algorithm.mac_len() || n < key.algorithm.min_mac_len() {
            return Err(ReplyProblem::BadMac);
        }
        let mut mac = key.mac();
        mac.update(&(self.prior_len as u16).to_be_bytes());
        mac.update(&self.prior[..self.prior_len]);
        mac.update(&self.pending);
        digest_unsigned(&mut mac, reply, at, rec.original_id);
        if self.verified == 0 {
            rec.fields().digest(&mut mac);
        } else {
            mac.update(&timers(rec.time_signed, rec.fudge));
        }
        if !mac.verify_truncated(rec.mac) {
            return Err(ReplyProblem::BadMac);
        }
        self.prior[..n].copy_from_slice(rec.mac);
        self.prior_len = n;
        self.verified += 1;
        self.pending.clear();
        self.unsigned_run = 0;
        if rec.error != TsigError::NOERROR {
            return Err(ReplyProblem::Error(rec.error));
        }
        if now.abs_diff(rec.time_signed) > u64::from(rec.fudge) {
            return Err(ReplyProblem::BadTime);
        }
        Ok(())
    }
}

/// The server time a BADTIME reply carries in its Other Data (RFC 8945
/// §5.2.3), or `None` when `reply` has no such TSIG record.
pub fn reply_server_time(reply: &[u8]) -> Option<u64> {
    let rec = read_record(reply, find(reply)?)?;
    (rec.other.len() == 6)
        .then(|| u48_at(rec.other, 0))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Secret;

    fn key(name: &str, algorithm: Algorithm, secret: &str) -> Key {
        Key {
            name: name.parse().expect("name"),
            algorithm,
            secret: Secret::from_base64(secret).expect("secret"),
        }
    }

    /// A query for `example.com. SOA` with id 0x1234 and no records.
    fn query() -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(b"\x07example\x03com\x00\x00\x06\x00\x01");
        m
    }

    const SECRET: &str = "8SAbJ0JpR9OwJgRTLHX8YMi1jUUT/gzPPRd6Wp44Dg4=";

    /// Requests signed by dig (BIND 9.18, HMAC-SHA256, with an OPT and a
    /// cookie) and kdig (Knot 3.2, HMAC-SHA512), captured off the wire
    /// (`dig -y hmac-sha256:tk.:SECRET example.com SOA`): they verify at their
    /// time; a flipped bit anywhere before the TSIG record is BADSIG; more
    /// than the fudge (300 s) away, BADTIME.
    #[test]
    fn verifies_requests_signed_by_dig_and_kdig() {
        let hex = |s: &str| data_encoding::HEXLOWER.decode(s.as_bytes()).expect("hex");
        let dig = hex(
            "3d6b01200001000000000002076578616d706c6503636f6d000006000100002904d0000000\
             00000c000a00089015e188c51856d302746b0000fa00ff00000000003d0b686d61632d7368\
             613235360000006b0edef0012c0020f4c8184e580c3007fe9c13696562c17f3951207798da\
             4288a8ba2f2b4d733a863d6b00000000",
        );
        let kdig = hex(
            "9c4c01200001000000000001076578616d706c6503636f6d000006000102746b0000fa00ff\
             00000000005d0b686d61632d7368613531320000006b0edef8012c0040ff8b40cb55c094d8\
             33c3e755bfd193fd8ddc5d66a2c8d3dd9b963b2c5d6b20d0a82101fc28bc4f02eddbfc3281\
             1813e48b14cda2968903cfbecad587d302fb8c9c4c00000000",
        );
        for (msg, algorithm, time) in [
            (dig, Algorithm::HmacSha256, 0x6b0e_def0),
            (kdig, Algorithm::HmacSha512, 0x6b0e_def8),
        ] {
            let keys = KeyRing::new(vec![key("tk.", algorithm, SECRET)]);
            let req = crate::wire::parse_query(&msg).expect("parses");
            let at = req.tsig.expect("signed");
            assert_eq!(find(&msg), Some(at));
            let signer = verify(&keys, &msg, at, time).ok().expect("verifies");
            assert_eq!(signer.key().name.to_string(), "tk.");
            assert!(verify(&keys, &msg, at, time + 300).is_ok());
            assert!(verify(&keys, &msg, at, time - 300).is_ok());
            match verify(&keys, &msg, at, time + 301) {
                Err(Rejection::BadTime(s)) => assert_eq!(s.error(), TsigError::BADTIME),
                _ => panic!("{algorithm}: BADTIME expected"),
            }
            // The header id (bytes 0-1) is not covered: the Original ID is.
            for i in 2..at {
                let mut bad = msg.clone();
                bad[i] ^= 0x01;
                assert!(
                    matches!(
                        verify(&keys, &bad, at, time),
                        Err(Rejection::Unsigned(Unsigned {
                            error: TsigError::BADSIG,
                            ..
                        }))
                    ),
                    "{algorithm}: byte {i}"
                );
            }
        }
    }

    #[test]
    fn unknown_keys_algorithms_and_mac_sizes() {
        let keys = KeyRing::new(vec![key("tk.", Algorithm::HmacSha256, SECRET)]);
        let other_name = key("other.", Algorithm::HmacSha256, SECRET);
        let other_alg = key("tk.", Algorithm::HmacSha512, SECRET);
        for k in [other_name, other_alg] {
            let mut msg = query();
            sign_request(&k, &mut msg, 1_700_000_000);
            match verify(&keys, &msg, query().len(), 1_700_000_000) {
                Err(Rejection::Unsigned(u)) => {
                    assert_eq!(u.error, TsigError::BADKEY);
                    assert_eq!(u.key_name, k.name);
                }
                _ => panic!("BADKEY expected for {}", k.name),
            }
        }
        // MAC sizes: 16..=32 verify (truncated from the left), others FORMERR.
        let k = &keys.keys()[0];
        for size in [0usize, 1, 10, 15, 16, 20, 31, 32, 33] {
            let msg = truncated(k, size);
            let got = verify(&keys, &msg, query().len(), 1_700_000_000);
            let want_ok = (16..=32).contains(&size);
            match got {
                Ok(_) => assert!(want_ok, "size {size}"),
                Err(Rejection::FormErr) => assert!(!want_ok, "size {size}"),
                Err(_) => panic!("size {size}: FORMERR or OK expected"),
            }
        }
    }

    /// A request signed with `k` whose MAC is cut (or padded) to `size`.
    fn truncated(k: &Key, size: usize) -> Vec<u8> {
        let mut msg = query();
        let full = sign_request(k, &mut msg, 1_700_000_000);
        let mut base = query();
        base[11] = 1;
        let mac: Vec<u8> = (0..size)
            .map(|i| full.as_bytes().get(i).copied().unwrap_or(0))
            .collect();
        base.extend_from_slice(k.name.as_wire());
        base.extend_from_slice(&[0, 250, 0, 255, 0, 0, 0, 0]);
        let rdlen = k.algorithm.wire_name().len() + 16 + size;
        base.extend_from_slice(&(rdlen as u16).to_be_bytes());
        base.extend_from_slice(k.algorithm.wire_name());
        base.extend_from_slice(&timers(1_700_000_000, FUDGE));
        base.extend_from_slice(&(size as u16).to_be_bytes());
        base.extend_from_slice(&mac);
        base.extend_from_slice(&[0x12, 0x34, 0, 0, 0, 0]);
        base
    }

    /// A reply signed by a server verifies at the client; a stream's later
    /// messages chain on the previous MAC.
    #[test]
    fn replies_and_streams_verify_at_the_client() {
        let keys = KeyRing::new(vec![key("tk.", Algorithm::HmacSha1, "c2VjcmV0IQ==")]);
        let k = &keys.keys()[0];
        let mut req = query();
        let req_mac = sign_request(k, &mut req, 1_700_000_000);
        let mut signer = verify(&keys, &req, query().len(), 1_700_000_010)
            .ok()
            .expect("verifies");
        let mut reply = query();
        reply[2] |= 0x80;
        let before = reply.len();
        signer.sign(&mut reply, 1_700_000_010);
        assert_eq!(reply.len() - before, signer.record_len());
        assert_eq!(u16_at(&reply, 10), Some(1));
        assert_eq!(verify_reply(k, &req_mac, &reply, 1_700_000_020), Ok(()));
        // Tampered: BADMAC; another request's MAC: BADMAC; late: BADTIME.
        let mut bad = reply.clone();
        bad[3] ^= 1;
        assert_eq!(
            verify_reply(k, &req_mac, &bad, 1_700_000_020),
            Err(ReplyProblem::BadMac)
        );
        let mut other = query();
        other[0] = 9;
        let other_mac = sign_request(k, &mut other, 1_700_000_000);
        assert_eq!(
            verify_reply(k, &other_mac, &reply, 1_700_000_020),
            Err(ReplyProblem::BadMac)
        );
        assert_eq!(
            verify_reply(k, &req_mac, &reply, 1_700_001_000),
            Err(ReplyProblem::BadTime)
        );
        assert_eq!(
            verify_reply(k, &req_mac, &query(), 1_700_000_020),
            Err(ReplyProblem::Unsigned)
        );
        // A second message: MAC over the first message's MAC, the message and
        // the timers only; the verifier follows the chain.
        let mut second = query();
        second[2] |= 0x80;
        signer.sign(&mut second, 1_700_000_011);
        let rec = read_record(&second, before).expect("record");
        // By hand: the first MAC, the second message as it was before its
        // TSIG (ARCOUNT 0), the timers.
        let first_mac = read_record(&reply, before).expect("record").mac;
        let mut m = k.mac();
        m.update(&(first_mac.len() as u16).to_be_bytes());
        m.update(first_mac);
        let mut unsigned = second[..before].to_vec();
        unsigned[11] = 0;
        m.update(&unsigned);
        m.update(&[0, 0, 0x65, 0x53, 0xf1, 0x0b, 0x01, 0x2c]);
        let mut want = [0u8; MAX_MAC_LEN];
        let n = m.finalize_into(&mut want);
        assert_eq!(rec.mac, &want[..n]);
        let mut chain = ReplyVerifier::new(k, &req_mac);
        assert_eq!(chain.verify(&reply, 1_700_000_011), Ok(()));
        assert_eq!(chain.verify(&second, 1_700_000_011), Ok(()));
        // Out of order (the second first) it fails.
        assert_eq!(
            ReplyVerifier::new(k, &req_mac).verify(&second, 1_700_000_011),
            Err(ReplyProblem::BadMac)
        );
        assert_eq!(rec.time_signed, 1_700_000_011);
        assert_eq!(rec.original_id, 0x1234);
    }

    /// Unsigned error TSIGs carry the request's names and times and no MAC;
    /// the client reads the error before any MAC.
    #[test]
    fn error_records() {
        let k = key("tk.", Algorithm::HmacSha256, SECRET);
        let mut req = query();
        let req_mac = sign_request(&k, &mut req, 1_700_000_000);
        let Err(Rejection::Unsigned(u)) = verify(&KeyRing::default(), &req, query().len(), 0)
        else {
            panic!("BADKEY expected");
        };
        let mut reply = query();
        reply[2] |= 0x80;
        u.append_to(&mut reply);
        let rec = read_record(&reply, query().len()).expect("record");
        assert_eq!(
            (rec.error, rec.mac.len(), rec.time_signed, rec.fudge),
            (TsigError::BADKEY, 0, 1_700_000_000, FUDGE)
        );
        assert_eq!(
            verify_reply(&k, &req_mac, &reply, 1_700_000_000),
            Err(ReplyProblem::Error(TsigError::BADKEY))
        );
        // BADTIME: signed, the client's time echoed, ours in Other Data.
        let keys = KeyRing::new(vec![k.clone()]);
        let Err(Rejection::BadTime(mut s)) = verify(&keys, &req, query().len(), 1_700_001_000)
        else {
            panic!("BADTIME expected");
        };
        let mut reply = query();
        reply[2] |= 0x80;
        s.sign(&mut reply, 1_700_001_000);
        let rec = read_record(&reply, query().len()).expect("record");
        assert_eq!(rec.error, TsigError::BADTIME);
        assert_eq!(rec.time_signed, 1_700_000_000);
        assert_eq!(reply_server_time(&reply), Some(1_700_001_000));
        assert_eq!(rec.mac.len(), 32);
        // The client verifies it (its own time echoed), then reads the error.
        assert_eq!(
            verify_reply(&k, &req_mac, &reply, 1_700_000_001),
            Err(ReplyProblem::Error(TsigError::BADTIME))
        );
        let last = reply.len() - 1;
        reply[last - 12] ^= 1; // the MAC's last byte
        assert_eq!(
            verify_reply(&k, &req_mac, &reply, 1_700_000_001),
            Err(ReplyProblem::BadMac)
        );
    }

    #[test]
    fn compressed_and_malformed_names() {
        // A key name given as a pointer to the question's "com.".
        let msg = b"\x00\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00";
        assert_eq!(
            read_name(msg, 12).map(|(n, e)| (n.to_string(), e)),
            Some(("example.com.".into(), 25))
        );
        let mut m = msg.to_vec();
        m.extend_from_slice(&[0xC0, 20]);
        assert_eq!(
            read_name(&m, 25).map(|(n, e)| (n.to_string(), e)),
            Some(("com.".into(), 27))
        );
        // A pointer to itself or forwards: refused.
        let mut loop_ = msg.to_vec();
        loop_.extend_from_slice(&[0xC0, 25]);
        assert_eq!(read_name(&loop_, 25), None);
        assert_eq!(read_name(&[0x40], 0), None);
        assert_eq!(read_name(&[3, b'a'], 0), None);
    }

    /// RFC 8945 §5.3.1: a transfer may leave messages unsigned between
    /// signed ones; the next signed message's MAC covers them. The verifier
    /// takes them in order and refuses the stream when one is left out, when
    /// the first message is unsigned, or after 99 unsigned in a row.
    #[test]
    fn unsigned_messages_between_signed_ones_verify() {
        let k = key("tk.", Algorithm::HmacSha256, "c2VjcmV0c2VjcmV0");
        let ring = crate::keys::KeyRing::new(vec![k.clone()]);
        let now = 1_700_000_000;
        // An AXFR for the root: header, root name, type 252, class IN.
        let mut req = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 252, 0, 1];
        let base = req.clone();
        let request_mac = sign_request(&k, &mut req, now);
        let at = find(&req).expect("signed");
        let mut signer = verify(&ring, &req, at, now).ok().expect("verifies");
        let message = |n: u8| {
            let mut m = base.clone();
            m[2] = 0x84;
            m[3] = n << 4; // the messages differ in the AD/CD bits
            m
        };
        let mut m1 = message(1);
        signer.sign(&mut m1, now);
        let m2 = message(2);
        // m3's MAC: m1's MAC, m2 whole, m3, the timers.
        let mut m3 = message(3);
        let prior = read_record(&m1, find(&m1).expect("signed"))
            .expect("record")
            .mac
            .to_vec();
        let mut mac = k.mac();
        mac.update(&(prior.len() as u16).to_be_bytes());
        mac.update(&prior);
        mac.update(&m2);
        mac.update(&m3);
        mac.update(&timers(now, FUDGE));
        let mut out = [0u8; MAX_MAC_LEN];
        let n = mac.finalize_into(&mut out);
        let fields = Fields {
            key_name: k.name.as_wire(),
            algorithm: k.algorithm.wire_name(),
            time: now,
            fudge: FUDGE,
            error: TsigError::NOERROR,
            other: &[],
        };
        fields.append(&mut m3, &out[..n], 0x1234);
        let mut v = ReplyVerifier::new(&k, &request_mac);
        assert_eq!(v.verify_next(&m1, now), Ok(true));
        assert_eq!(v.verify_next(&m2, now), Ok(false));
        assert_eq!(v.verify_next(&m3, now), Ok(true));
        // m2 left out: m3 does not verify.
        let mut v = ReplyVerifier::new(&k, &request_mac);
        assert_eq!(v.verify_next(&m1, now), Ok(true));
        assert_eq!(v.verify_next(&m3, now), Err(ReplyProblem::BadMac));
        // The first message must be signed.
        let mut v = ReplyVerifier::new(&k, &request_mac);
        assert_eq!(v.verify_next(&m2, now), Err(ReplyProblem::Unsigned));
        // At most 99 unsigned in a row.
        let mut v = ReplyVerifier::new(&k, &request_mac);
        assert_eq!(v.verify_next(&m1, now), Ok(true));
        for _ in 0..MAX_UNSIGNED_RUN {
            assert_eq!(v.verify_next(&m2, now), Ok(false));
        }
        assert_eq!(v.verify_next(&m2, now), Err(ReplyProblem::Unsigned));
    }
}
