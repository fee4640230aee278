//! Outgoing zone transfers: AXFR (RFC 5936) and IXFR (RFC 1995).
//!
//! The dispatcher ([`crate::dispatch`]) hands AXFR and IXFR queries received
//! over TCP, and IXFR queries received over UDP, to [`transfer`]; AXFR over
//! UDP it answers REFUSED (RFC 5936 §4.2).
//!
//! Checks, in BIND 10 xfrout's order (research/bind10.md §f):
//! 1. the client must match the zone's ACL ([`TransferPolicy::acl_for`]: its
//!    `[[transfer.zone]]` list, else `[transfer] allow`; default: nobody) by
//!    address, by the TSIG key the request was signed with, or both; else
//!    REFUSED. A request whose TSIG failed verification never gets here;
//! 2. the question must name a zone served as an exact match, class IN, else
//!    NOTAUTH;
//! 3. the zone must have exactly one SOA RR at the apex, else SERVFAIL;
//! 4. an IXFR must carry exactly one SOA in its authority section, else FORMERR.
//!
//! AXFR answers SOA, every other RR of the zone (RRSIGs after the RRset they
//! cover, the SOA's own RRSIGs included), SOA, packed into as many messages of
//! at most 65535 bytes as needed, names compressed within each message; only
//! the first message carries the question (RFC 5936 §2.2).
//!
//! IXFR answers a single SOA when the client's serial is not older than ours
//! (RFC 1982 arithmetic). Otherwise it reads the journal of the zone's source
//! through its write side ([`authd_datasrc::ZoneWriter::journal`]; sqlite3
//! reads the `diffs` table as BIND 10 did), and answers: current SOA, the
//! journal rows in order (old SOA, deletions, new SOA, additions, repeated),
//! current SOA. When the journal cannot bridge the client's serial to ours, or
//! the zone comes from a source without a journal (memory), the answer is a
//! full zone between two SOAs (RFC 1995 §4, "AXFR-style IXFR").
//!
//! Over UDP (RFC 1995 §2) the answer is one message within the client's UDP
//! size ([`crate::query::reply_limit`]), with an OPT when the query had one: the
//! difference when it fits, else (it does not fit, or only a full zone would
//! do) the current SOA alone, which tells the client to ask again over TCP.
//!
//! Every message leaves [`Client::reserve`] bytes free, for the TSIG record
//! the dispatcher appends to each (RFC 8945 §5.3.1).

use std::net::IpAddr;
use std::sync::Arc;

use authd_datasrc::write::{DiffRow, serial_gt};
use authd_datasrc::{Class, DataSource, Name, RRset, RType, Rdata, SourceList, ZoneRef};
use serde::Deserialize;

use crate::acl::Acl;
use crate::edns::Ede;
use crate::log_limit::LogLimit;
use crate::query::{EDNS_UDP_PAYLOAD, Transport, reply_limit};
use crate::sections;
use crate::settings::{self, Context, Invalid, Kind, Schema, string_or_list, zone_origin};
use crate::wire::{
    self, ErrorOpt, Flags, Header, MAX_TCP_MESSAGE, MessageWriter, OPT_LEN, Rcode, RecordMeta,
    Request, Section, skip_name, u16_at,
};

pub use crate::acl::Cidr;

/// Outgoing zone transfers (`[transfer]`, RFC 5936 §6: access must be controlled).
///
/// ```toml
/// [transfer]
/// allow = ["127.0.0.1", "key transfer-key.", "192.0.2.0/24 key transfer-key."]
/// [[transfer.zone]]
/// origin = "example.org."
/// allow = ["key other-key."]      # replaces the global list for this zone
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransferConfig {
    /// Who may AXFR/IXFR (address blocks, TSIG keys, or both: see
    /// [`crate::acl`]); empty: nobody.
    pub allow: Acl,
    /// Per-zone lists, each replacing [`Self::allow`] for its zone.
    pub zones: Vec<TransferZone>,
}

/// One `[[transfer.zone]]`: who may transfer one zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferZone {
    /// The zone apex.
    pub origin: Name,
    /// Who may transfer it (instead of `[transfer] allow`).
    pub allow: Acl,
}

impl TransferConfig {
    /// Who may transfer zones, as the handler asks it.
    pub fn policy(&self) -> TransferPolicy {
        TransferPolicy {
            allow: self.allow.clone(),
            zones: self
                .zones
                .iter()
                .map(|z| (z.origin.clone(), z.allow.clone()))
                .collect(),
        }
    }
}

/// `[transfer]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTransfer {
    #[serde(default, deserialize_with = "string_or_list")]
    allow: Option<Vec<String>>,
    #[serde(default)]
    zone: Vec<RawTransferZone>,
}

/// One `[[transfer.zone]]` table: an `allow` list replacing the global one
/// for one zone.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTransferZone {
    origin: Option<String>,
    #[serde(default, deserialize_with = "string_or_list")]
    allow: Option<Vec<String>>,
}

impl settings::Section for RawTransfer {
    type Value = TransferConfig;

    const SCHEMA: Schema = &[
        ("transfer", &[("allow", Kind::List), ("zone", Kind::Tables)]),
        (
            "transfer.zone[]",
            &[("origin", Kind::Text), ("allow", Kind::List)],
        ),
    ];

    /// The global `allow` list and the per-zone ones (each zone once).
    fn check(self, cx: &Context<'_>) -> Result<TransferConfig, Invalid> {
        let allow = cx.acl("transfer.allow", self.allow)?;
        let mut zones: Vec<TransferZone> = Vec::new();
        for (i, z) in self.zone.into_iter().enumerate() {
            let key = format!("transfer.zone[{i}]");
            let origin = zone_origin(&key, z.origin)?;
            if zones.iter().any(|t| t.origin == origin) {
                return Err(Invalid::new(
                    format!("{key}.origin"),
                    format!("zone {origin} is listed twice in [[transfer.zone]]"),
                ));
            }
            let Some(list) = z.allow else {
                return Err(Invalid::new(
                    format!("{key}.allow"),
                    "missing (an empty list [] refuses every transfer of the zone)",
                ));
            };
            let allow = cx.acl(&format!("{key}.allow"), Some(list))?;
            zones.push(TransferZone { origin, allow });
        }
        Ok(TransferConfig { allow, zones })
    }
}

/// Who may transfer zones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransferPolicy {
    /// Who may AXFR/IXFR a zone without its own list (`[transfer] allow`);
    /// empty: nobody (every transfer is REFUSED).
    pub allow: Acl,
    /// Zones with their own list (`[[transfer.zone]]`), replacing `allow`.
    pub zones: Vec<(Name, Acl)>,
}

impl TransferPolicy {
    /// The ACL for transfers of `zone`: its own list when it has one, else
    /// the global one.
    pub fn acl_for(&self, zone: &Name) -> &Acl {
        self.zones
            .iter()
            .find(|(z, _)| z == zone)
            .map_or(&self.allow, |(_, acl)| acl)
    }

    /// True when a client at `ip` whose request was signed with `key`
    /// (`None`: unsigned), received over TLS when `tls`, may transfer `zone`.
    pub fn allows(&self, zone: &Name, ip: IpAddr, key: Option<&Name>, tls: bool) -> bool {
        self.acl_for(zone).allows(ip, key, tls)
    }

    /// True when an entry with an address block, in any transfer ACL, names
    /// `ip`: a client that may be a secondary, known before it asks anything
    /// (the TCP connection table keeps such connections last). Key-only
    /// entries match every address and so tell nothing here.
    pub fn names_address(&self, ip: IpAddr) -> bool {
        std::iter::once(&self.allow)
            .chain(self.zones.iter().map(|(_, acl)| acl))
            .flat_map(|acl| acl.entries())
            .any(|e| e.addr.is_some_and(|c| c.contains(ip)))
    }
}

/// Who asks for a transfer, and how the answer travels.
#[derive(Debug, Clone, Copy)]
pub struct Client<'a> {
    /// The client's address.
    pub addr: IpAddr,
    /// The TSIG key its request was signed with and verified under.
    pub key: Option<&'a Name>,
    /// TCP: as many messages as needed; UDP: one (IXFR only).
    pub transport: Transport,
    /// Bytes each message must leave free, for the TSIG record the
    /// dispatcher appends (0 for an unsigned request).
    pub reserve: usize,
}

/// One RR to write.
#[derive(Clone, Copy)]
struct Rr<'a> {
    owner: &'a Name,
    rtype: RType,
    class: Class,
    ttl: u32,
    rdata: &'a Rdata,
}

/// Log lines a client's transfer requests cause (refused, answered): a
/// client can ask thousands a second, the log gets a budget.
static XFR_LOG: LogLimit = LogLimit::new();

/// Logs a line a client's request caused, within [`XFR_LOG`]'s budget (the
/// lines dropped are counted in the next one, as `suppressed`).
macro_rules! client_log {
    ($($arg:tt)*) => {
        if let Some(suppressed) = XFR_LOG.allow() {
            tracing::info!(suppressed, $($arg)*);
        }
    };
}

/// The header of every reply to transfer request `req`.
fn reply_header(req: &Request<'_>, rcode: Rcode) -> Header {
    let aa = if rcode == Rcode::NOERROR {
        Flags::AA
    } else {
        Flags::empty()
    };
    Header::reply_to(req, aa, rcode)
}

/// An error reply to transfer request `req`: the question echoed, an OPT
/// when the request had one, with EDE 18 Prohibited for REFUSED (a client
/// the transfer ACL refuses, as NSD and BIND 9 send) and 20 Not
/// Authoritative for NOTAUTH (a name that is no zone apex served here).
fn error_reply(req: &Request<'_>, rcode: Rcode) -> Vec<u8> {
    let ede = match rcode {
        Rcode::REFUSED => Some(Ede::PROHIBITED),
        Rcode::NOTAUTH => Some(Ede::NOT_AUTHORITATIVE),
        _ => None,
    };
    let mut buf = Vec::new();
    wire::write_error(
        &mut buf,
        reply_header(req, rcode),
        Some(req.question),
        ErrorOpt::to(req, ede),
    );
    buf
}

/// The messages of a reply to a transfer request, each without the TCP
/// length prefix, in order: rendered one at a time as the connection takes
/// them (a whole zone is never held rendered: a client that does not read
/// holds one message of at most 64 KiB, plus what the socket buffers), and
/// each signed as it is rendered when the request was signed (RFC 8945
/// §5.3.1). The first message is rendered at once, for its rcode.
pub struct Messages {
    ready: std::collections::VecDeque<Vec<u8>>,
    zone: Option<ZonePack>,
    signer: Option<crate::tsig::Signer<'static>>,
    first_rcode: Option<Rcode>,
}

impl std::fmt::Debug for Messages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Messages")
            .field("ready", &self.ready.len())
            .field("more", &self.zone.is_some())
            .field("first_rcode", &self.first_rcode)
            .finish()
    }
}

impl Messages {
    /// Messages already rendered.
    pub fn from_vec(messages: Vec<Vec<u8>>) -> Messages {
        let first_rcode = messages.first().map(|m| wire::reply_rcode(m));
        Messages {
            ready: messages.into(),
            zone: None,
            signer: None,
            first_rcode,
        }
    }

    fn zone(mut pack: ZonePack) -> Messages {
        let mut ready = std::collections::VecDeque::new();
        let first = pack.next_message();
        let first_rcode = first.as_deref().map(wire::reply_rcode);
        ready.extend(first);
        Messages {
            ready,
            zone: Some(pack),
            signer: None,
            first_rcode,
        }
    }

    /// The rcode of the first message (what a transfer counts as its result).
    pub fn first_rcode(&self) -> Option<Rcode> {
        self.first_rcode
    }

    /// Signs every message with `signer` as it is taken (RFC 8945 §5.3.1).
    pub fn sign_with(&mut self, signer: crate::tsig::Signer<'static>) {
        self.signer = Some(signer);
    }
}

impl Iterator for Messages {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        let mut m = match self.ready.pop_front() {
            Some(m) => m,
            None => {
                let m = self.zone.as_mut()?.next_message();
                if m.is_none() {
                    self.zone = None;
                }
                m?
            }
        };
        if let Some(s) = &mut self.signer {
            s.sign_next(&mut m);
        }
        Some(m)
    }
}

/// A whole zone between two SOAs (AXFR, or AXFR-style IXFR), packed into
/// messages of at most `limit` bytes one at a time: the SOA, every RRset but
/// the apex SOA with its RRSIGs after it (the SOA's own RRSIGs included),
/// the SOA again (RFC 5936 §2.2). Only the first message carries the question.
struct ZonePack {
    header: Header,
    /// SERVFAIL, should an RR not fit a message.
    error_header: Header,
    question: Vec<u8>,
    qtype: RType,
    limit: usize,
    rrsets: Vec<Arc<RRset>>,
    /// The apex SOA RRset's index.
    soa: usize,
    at: Cursor,
    first: bool,
}

/// Where a [`ZonePack`] is: the opening SOA, record `pos` of RRset `set`
/// (its RDATAs, then its RRSIGs), the closing SOA, the end.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cursor {
    Open,
    At { set: usize, pos: usize },
    Close,
    Done,
}

impl ZonePack {
    fn soa_rr(&self) -> Option<Rr<'_>> {
        let set = self.rrsets.get(self.soa)?;
        Some(Rr {
            owner: &set.owner,
            rtype: RType::SOA,
            class: set.class,
            ttl: set.ttl,
            rdata: set.rdatas.first()?,
        })
    }

    /// Record `pos` of RRset `i` in transfer order, if it has one.
    fn rr_at(&self, i: usize, pos: usize) -> Option<Rr<'_>> {
        let set = self.rrsets.get(i)?;
        let own = if i == self.soa { 0 } else { set.rdatas.len() };
        if pos < own {
            return Some(Rr {
                owner: &set.owner,
                rtype: set.rtype,
                class: set.class,
                ttl: set.ttl,
                rdata: &set.rdatas[pos],
            });
        }
        set.sigs.get(pos - own).map(|rdata| Rr {
            owner: &set.owner,
            rtype: RType::RRSIG,
            class: set.class,
            ttl: set.sig_ttl,
            rdata,
        })
    }

    /// `at` moved to the next record that exists.
    fn settle(&self, mut at: Cursor) -> Cursor {
        while let Cursor::At { set, pos } = at {
            if set >= self.rrsets.len() {
                return Cursor::Close;
            }
            if self.rr_at(set, pos).is_some() {
                return at;
            }
            at = Cursor::At {
                set: set + 1,
                pos: 0,
            };
        }
        at
    }

    fn current(&self) -> Option<Rr<'_>> {
        match self.at {
            Cursor::Open | Cursor::Close => self.soa_rr(),
            Cursor::At { set, pos } => self.rr_at(set, pos),
            Cursor::Done => None,
        }
    }

    fn advance(&mut self) {
        self.at = match self.at {
            Cursor::Open => self.settle(Cursor::At { set: 0, pos: 0 }),
            Cursor::At { set, pos } => self.settle(Cursor::At { set, pos: pos + 1 }),
            Cursor::Close | Cursor::Done => Cursor::Done,
        };
    }

    /// The next message, `None` after the closing SOA went out.
    fn next_message(&mut self) -> Option<Vec<u8>> {
        if self.at == Cursor::Done {
            return None;
        }
        let mut buf = Vec::with_capacity(16 * 1024);
        let mut w = MessageWriter::new(&mut buf, self.header, self.limit);
        if std::mem::take(&mut self.first) {
            w.push_question(&self.question);
        }
        let mut pushed = false;
        while let Some(rr) = self.current() {
            if !push_rr(&mut w, &rr) {
                break;
            }
            pushed = true;
            self.advance();
        }
        if !pushed {
            // Cannot happen for valid RDATA (≤ 65535 - header - name bytes).
            tracing::error!("{}: an RR does not fit a message", self.qtype);
            self.at = Cursor::Done;
            drop(w);
            let mut error = Vec::new();
            wire::write_error(&mut error, self.error_header, None, None);
            return Some(error);
        }
        w.finish();
        Some(buf)
    }
}

/// Answers AXFR or IXFR query `req` (the message `msg`) from `client`: the
/// reply messages in order, each without the TCP length prefix (over UDP,
/// exactly one). The dispatcher routes AXFR/IXFR over TCP and IXFR over UDP
/// here, whatever the class; the checks are this module's (see the module
/// documentation).
pub fn transfer(
    sources: &SourceList,
    policy: &TransferPolicy,
    msg: &[u8],
    req: &Request<'_>,
    client: &Client<'_>,
) -> Messages {
    let kind = req.qtype;
    let peer = client.addr;
    let tls = client.transport == Transport::Tls;
    if !policy.allows(&req.qname, peer, client.key, tls) {
        let list = if policy.zones.iter().any(|(z, _)| *z == req.qname) {
            "[[transfer.zone]] allow"
        } else {
            "[transfer] allow"
        };
        // An entry that would match over TLS: say so (RFC 9103 §9.3).
        let over = if !tls && policy.allows(&req.qname, peer, client.key, true) {
            " over TLS only"
        } else {
            ""
        };
        match client.key {
            Some(key) => client_log!(
                "{kind} of {} refused for {peer} signed with key {key} (not in {list}{over})",
                req.qname
            ),
            None => client_log!(
                "{kind} of {} refused for {peer}, unsigned (not in {list}{over})",
                req.qname
            ),
        }
        return Messages::from_vec(vec![error_reply(req, Rcode::REFUSED)]);
    }
    if req.qclass != Class::IN {
        return Messages::from_vec(vec![error_reply(req, Rcode::NOTAUTH)]);
    }
    let (source, zone) = match sources.find_zone(&req.qname) {
        Ok(Some((s, z))) if z.origin == req.qname => (s, z),
        Ok(_) => {
            client_log!("{kind} of {} for {peer}: not a zone served here", req.qname);
            return Messages::from_vec(vec![error_reply(req, Rcode::NOTAUTH)]);
        }
        Err(e) => {
            client_log!("{kind} of {} for {peer}: {e}", req.qname);
            return Messages::from_vec(vec![error_reply(req, Rcode::SERVFAIL)]);
        }
    };
    let client_serial = if kind == RType::IXFR {
        match ixfr_client_serial(msg) {
            Some(s) => Some(s),
            None => return Messages::from_vec(vec![error_reply(req, Rcode::FORMERR)]),
        }
    } else {
        None
    };
    let rrsets = match source.zone_rrsets(&zone) {
        Ok(r) => r,
        Err(e) => {
            client_log!("{kind} of {} for {peer}: {e}", zone.origin);
            return Messages::from_vec(vec![error_reply(req, Rcode::SERVFAIL)]);
        }
    };
    let soa = rrsets
        .iter()
        .filter(|s| s.rtype == RType::SOA && s.owner == zone.origin)
        .collect::<Vec<_>>();
    let (soa, serial) = match soa[..] {
        [s] if s.rdatas.len() == 1 => match s.rdatas[0].soa_serial() {
            Some(serial) => (s, serial),
            None => return Messages::from_vec(vec![error_reply(req, Rcode::SERVFAIL)]),
        },
        _ => {
            client_log!(
                "{kind} of {}: the zone does not have exactly one SOA",
                zone.origin
            );
            return Messages::from_vec(vec![error_reply(req, Rcode::SERVFAIL)]);
        }
    };
    let soa_rr = Rr {
        owner: &soa.owner,
        rtype: RType::SOA,
        class: soa.class,
        ttl: soa.ttl,
        rdata: &soa.rdatas[0],
    };
    let pack = |rrs: Vec<Rr<'_>>| match client.transport {
        Transport::Tcp | Transport::Tls => {
            pack(req, rrs, MAX_TCP_MESSAGE.saturating_sub(client.reserve))
        }
        Transport::Udp => {
            let limit = reply_limit(req, Transport::Udp).saturating_sub(client.reserve);
            let one = pack_udp(req, &rrs, limit).or_else(|| {
                client_log!(
                    "IXFR of {} for {peer} over UDP: {} RRs do not fit {limit} bytes; current SOA only",
                    zone.origin,
                    rrs.len()
                );
                pack_udp(req, &[soa_rr], limit)
            });
            match one {
                Some(m) => vec![m],
                None => vec![error_reply(req, Rcode::SERVFAIL)],
            }
        }
    };
    if let Some(theirs) = client_serial {
        if !serial_gt(serial, theirs) {
            client_log!(
                "IXFR of {} for {peer}: client serial {theirs} is current (ours {serial})",
                zone.origin
            );
            return Messages::from_vec(pack(vec![soa_rr]));
        }
        match journal(source.as_ref(), &zone, theirs, serial) {
            Some(rows) => {
                let mut rrs = Vec::with_capacity(rows.len() + 2);
                rrs.push(soa_rr);
                rrs.extend(rows.iter().map(|d| Rr {
                    owner: &d.record.owner,
                    rtype: d.record.rtype,
                    class: d.record.class,
                    ttl: d.record.ttl,
                    rdata: &d.record.rdata,
                }));
                rrs.push(soa_rr);
                client_log!(
                    "IXFR of {} for {peer}: serial {theirs} -> {serial}, {} journal RRs",
                    zone.origin,
                    rows.len()
                );
                return Messages::from_vec(pack(rrs));
            }
            None if client.transport == Transport::Udp => {
                tracing::info!(
                    "IXFR of {} for {peer} over UDP: journal cannot bridge {theirs} -> {serial}; current SOA only",
                    zone.origin
                );
                return Messages::from_vec(pack(vec![soa_rr]));
            }
            None => client_log!(
                "IXFR of {} for {peer}: journal cannot bridge {theirs} -> {serial}; full transfer",
                zone.origin
            ),
        }
    }
    if client.transport == Transport::Udp {
        return Messages::from_vec(pack(zone_rrs(&rrsets, &zone.origin, soa_rr)));
    }
    let records: usize = rrsets.iter().map(|s| s.rdatas.len() + s.sigs.len()).sum();
    client_log!(
        "{kind} of {} serial {serial} for {peer}: full zone, {} RRs",
        zone.origin,
        records + 1
    );
    let Some(soa) = rrsets
        .iter()
        .position(|s| s.rtype == RType::SOA && s.owner == zone.origin)
    else {
        return Messages::from_vec(vec![error_reply(req, Rcode::SERVFAIL)]);
    };
    Messages::zone(ZonePack {
        header: reply_header(req, Rcode::NOERROR),
        error_header: reply_header(req, Rcode::SERVFAIL),
        question: req.question.to_vec(),
        qtype: kind,
        limit: MAX_TCP_MESSAGE.saturating_sub(client.reserve),
        rrsets,
        soa,
        at: Cursor::Open,
        first: true,
    })
}

/// A whole zone's RRs in transfer order, all at once (what [`ZonePack`]
/// renders one message at a time): the SOA, every RRset but the apex SOA
/// with its RRSIGs after it, the SOA again.
fn zone_rrs<'a>(rrsets: &'a [Arc<RRset>], origin: &Name, soa: Rr<'a>) -> Vec<Rr<'a>> {
    let mut rrs = vec![soa];
    for set in rrsets {
        if set.rtype != RType::SOA || set.owner != *origin {
            push_set(&mut rrs, set);
        }
        push_sigs(&mut rrs, set);
    }
    rrs.push(soa);
    rrs
}

fn push_set<'a>(rrs: &mut Vec<Rr<'a>>, set: &'a RRset) {
    rrs.extend(set.rdatas.iter().map(|rdata| Rr {
        owner: &set.owner,
        rtype: set.rtype,
        class: set.class,
        ttl: set.ttl,
        rdata,
    }));
}

fn push_sigs<'a>(rrs: &mut Vec<Rr<'a>>, set: &'a RRset) {
    rrs.extend(set.sigs.iter().map(|rdata| Rr {
        owner: &set.owner,
        rtype: RType::RRSIG,
        class: set.class,
        ttl: set.sig_ttl,
        rdata,
    }));
}

/// The journal from `begin` to `end` for `zone`, from its source's write
/// side (checked there to start with the deletion of SOA `begin` and end
/// with the addition of SOA `end`); `None`: no journal bridges them.
fn journal(source: &dyn DataSource, zone: &ZoneRef, begin: u32, end: u32) -> Option<Vec<DiffRow>> {
    let Some(writer) = source.writer() else {
        tracing::debug!("no journal for {} ({})", zone.origin, source.describe());
        return None;
    };
    match writer.journal(&zone.origin, begin, end) {
        Ok(rows) => rows,
        Err(e) => {
            tracing::warn!("journal of {} in {}: {e}", zone.origin, writer.describe());
            None
        }
    }
}

/// Writes one answer RR; false when it does not fit the writer's limit.
fn push_rr(w: &mut MessageWriter<'_>, rr: &Rr<'_>) -> bool {
    let meta = RecordMeta {
        rtype: rr.rtype,
        class: rr.class,
        ttl: rr.ttl,
    };
    let names = rr.rdata.compressible_names(rr.rtype);
    w.push_record(Section::Answer, rr.owner, meta, rr.rdata.as_wire(), names)
}

/// One UDP answer message of at most `limit` bytes holding the question,
/// every RR of `rrs` and, when the query had EDNS, an OPT; `None` when they
/// do not all fit.
fn pack_udp(req: &Request<'_>, rrs: &[Rr<'_>], limit: usize) -> Option<Vec<u8>> {
    let mut buf = Vec::with_capacity(limit.min(4096));
    let mut w = MessageWriter::new(&mut buf, reply_header(req, Rcode::NOERROR), limit);
    if req.edns.is_some() {
        w.reserve(OPT_LEN);
    }
    if !w.push_question(req.question) || !rrs.iter().all(|rr| push_rr(&mut w, rr)) {
        return None;
    }
    if let Some(e) = req.edns {
        w.unreserve(OPT_LEN);
        w.push_opt(EDNS_UDP_PAYLOAD, Rcode::NOERROR, e.dnssec_ok, None);
    }
    w.finish();
    Some(buf)
}

/// Packs `rrs` into answer messages of at most `limit` bytes; the first
/// carries the question.
fn pack(req: &Request<'_>, rrs: Vec<Rr<'_>>, limit: usize) -> Vec<Vec<u8>> {
    let header = reply_header(req, Rcode::NOERROR);
    let mut out = Vec::new();
    let mut rest = rrs.iter().peekable();
    loop {
        let mut buf = Vec::with_capacity(16 * 1024);
        {
            let mut w = MessageWriter::new(&mut buf, header, limit);
            if out.is_empty() {
                w.push_question(req.question);
            }
            while let Some(rr) = rest.peek() {
                if !push_rr(&mut w, rr) {
                    break;
                }
                rest.next();
            }
            if w.count(Section::Answer) == 0 && rest.peek().is_some() {
                // Cannot happen for valid RDATA (≤ 65535 - header - name bytes).
                tracing::error!(
                    "{} of {}: an RR does not fit a message",
                    req.qtype,
                    req.qname
                );
                return vec![error_reply(req, Rcode::SERVFAIL)];
            }
            w.finish();
        }
        out.push(buf);
        if rest.peek().is_none() {
            return out;
        }
    }
}

/// The SERIAL of the one SOA in an IXFR query's authority section (RFC 1995
/// §3), or `None` when there is none, more than one, or the message is malformed.
pub fn ixfr_client_serial(msg: &[u8]) -> Option<u32> {
    let an = usize::from(u16_at(msg, 6)?);
    let ns = usize::from(u16_at(msg, 8)?);
    let pos = sections::skip_questions(msg, 1)?;
    let mut serial = None;
    let mut soas = 0;
    let mut malformed = false;
    sections::each_rr(msg, pos, an + ns, |i, rr| {
        if i < an || rr.rtype != RType::SOA {
            return;
        }
        soas += 1;
        // MNAME and RNAME, then five 32-bit fields, SERIAL first.
        let fixed = skip_name(msg, rr.rdata).and_then(|p| skip_name(msg, p));
        match fixed.and_then(|p| msg.get(p..p + 4).filter(|_| p + 20 == rr.end)) {
            Some(b) => serial = Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
            None => malformed = true,
        }
    })?;
    if soas == 1 && !malformed {
        serial
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zone of 20,000 names (several 64 KiB messages) sent by AXFR: the
    /// transfer holds one message rendered when it starts (a client that
    /// does not read holds no more), and the messages, rendered one at a
    /// time, are byte for byte what packing the whole list at once gives:
    /// the SOA, every RRset but the apex SOA with its RRSIGs, the SOA.
    #[test]
    fn a_zone_transfer_is_rendered_one_message_at_a_time() {
        use authd_datasrc::memory::{MemorySource, MemoryZone};
        use std::sync::Arc;
        let origin: Name = "example.".parse().expect("origin");
        let mut text =
            String::from("$TTL 300\n@ SOA ns hm 7 60 60 600 60\n@ NS ns\nns A 192.0.2.1\n");
        for i in 0..20_000 {
            text.push_str(&format!("h{i} A 192.0.2.{}\n", i % 250));
        }
        let records =
            authd_datasrc::zonefile::parse_master_text(&text, std::path::Path::new("t"), &origin)
                .expect("zone");
        let zone = MemoryZone::from_sourced_records(origin.clone(), records);
        let source: Arc<dyn DataSource> = Arc::new(MemorySource::with_zones("t", [Arc::new(zone)]));
        let sources = SourceList::new(vec![Arc::clone(&source)]);
        let mut q = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        q.extend_from_slice(origin.as_wire());
        q.extend_from_slice(&RType::AXFR.0.to_be_bytes());
        q.extend_from_slice(&1u16.to_be_bytes());
        let req = wire::parse_query(&q).expect("query");
        let policy = TransferPolicy {
            allow: Acl::new(vec!["127.0.0.1".parse().expect("acl entry")]),
            zones: Vec::new(),
        };
        let client = Client {
            addr: "127.0.0.1".parse().expect("ip"),
            key: None,
            transport: Transport::Tcp,
            reserve: 0,
        };
        let messages = transfer(&sources, &policy, &q, &req, &client);
        assert_eq!(messages.ready.len(), 1, "one message rendered up front");
        assert!(messages.zone.is_some(), "the rest rendered as taken");
        assert_eq!(messages.first_rcode(), Some(Rcode::NOERROR));
        let lazy: Vec<Vec<u8>> = messages.collect();
        assert!(lazy.len() >= 5, "{} messages", lazy.len());
        // The same RRs packed at once, as transfers were before.
        let zone = sources.find_zone(&origin).expect("find").expect("zone").1;
        let rrsets = source.zone_rrsets(&zone).expect("rrsets");
        let soa = rrsets.iter().find(|s| s.rtype == RType::SOA).expect("soa");
        let soa_rr = Rr {
            owner: &soa.owner,
            rtype: RType::SOA,
            class: soa.class,
            ttl: soa.ttl,
            rdata: &soa.rdatas[0],
        };
        let rrs = zone_rrs(&rrsets, &origin, soa_rr);
        assert_eq!(lazy, pack(&req, rrs, MAX_TCP_MESSAGE));
    }

    #[test]
    fn cidr_parsing_and_matching() {
        let c: Cidr = "10.1.2.3/8".parse().expect("cidr");
        assert_eq!(c.to_string(), "10.0.0.0/8");
        assert!(c.contains("10.200.0.1".parse().expect("ip")));
        assert!(c.contains("::ffff:10.0.0.9".parse().expect("ip")));
        assert!(!c.contains("11.0.0.1".parse().expect("ip")));
        let one: Cidr = "::1".parse().expect("cidr");
        assert!(one.contains("::1".parse().expect("ip")));
        assert!(!one.contains("127.0.0.1".parse().expect("ip")));
        let all: Cidr = "0.0.0.0/0".parse().expect("cidr");
        assert!(all.contains("192.0.2.1".parse().expect("ip")));
        assert!("10.0.0.0/33".parse::<Cidr>().is_err());
        assert!("host.example".parse::<Cidr>().is_err());
        let p = TransferPolicy::default();
        assert!(!p.allows(&Name::root(), "127.0.0.1".parse().expect("ip"), None, false));
    }

    #[test]
    fn reads_ixfr_serial_with_compression() {
        // Question example. IXFR, authority: example. SOA (owner and names compressed).
        let mut m = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0];
        m.extend_from_slice(b"\x07example\x00\x00\xfb\x00\x01");
        m.extend_from_slice(&[0xC0, 12, 0, 6, 0, 1, 0, 0, 0, 0]);
        let rdata: Vec<u8> = [
            &[2, b'n', b's', 0xC0, 12, 0xC0, 12][..],
            &7u32.to_be_bytes(),
            &[0; 16],
        ]
        .concat();
        m.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        m.extend_from_slice(&rdata);
        assert_eq!(ixfr_client_serial(&m), Some(7));
        m[9] = 0;
        assert_eq!(ixfr_client_serial(&m[..m.len()]), None);
    }
}
