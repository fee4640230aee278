//! Dynamic updates (RFC 2136) into zones held in sqlite3 sources.
//!
//! The dispatcher ([`crate::dispatch`]) hands every UPDATE message here
//! ([`update`]), with the key a signed request was verified with. Checks, in
//! RFC 2136 §3 order:
//!
//! 1. §3.1 zone section: exactly one RR (else FORMERR, [`crate::wire::parse_query`]),
//!    type SOA (else FORMERR); the zone must be served here as an exact match,
//!    class IN, from an sqlite3 source: a zone not served, or served from
//!    memory (a snapshot nothing here can write), is NOTAUTH, logged with why;
//! 2. who may update the zone at all (before the prerequisites, so nobody
//!    else can probe the zone through them): the client matches the zone's
//!    `allow` ACL ([`UpdatePolicy::acl_for`]), or its key is named by a
//!    `[[update.grant]]`; else REFUSED, logged with the client and key;
//! 3. §3.2 prerequisites, read inside the update's transaction: TTL not 0,
//!    or RDATA with class ANY/NONE, or another class: FORMERR; a name outside
//!    the zone: NOTZONE; "name in use" NXDOMAIN, "name not in use" YXDOMAIN,
//!    "RRset exists" (value-independent) NXRRSET, "RRset does not exist"
//!    YXRRSET, "RRset exists" (value-dependent, §3.2.3: the whole RRset
//!    equal) NXRRSET;
//! 4. §3.3 permission per update RR: full control from the zone's `allow`,
//!    else a grant whose key, name and types cover the RR; else REFUSED;
//! 5. §3.4.1 prescan: a name outside the zone NOTZONE; a meta type added,
//!    TTL or RDATA on a deletion, another class: FORMERR;
//! 6. a zone with a DNSKEY at the apex is REFUSED unless `dnssec = true`
//!    (the update would leave stale signatures);
//! 7. §3.4.2 the update, applied in order to the zone as read: additions
//!    (a duplicate replaces its twin's TTL; every RR of an RRset takes the
//!    TTL last added, RFC 2181 §5.2; a CNAME is not added beside other data,
//!    nor other data beside a CNAME, and a CNAME replaces a CNAME; an apex
//!    SOA replaces the SOA only with a greater serial, RFC 1982; other SOAs
//!    are ignored), RRset deletions, name deletions (at the apex the SOA and
//!    NS are kept), RR deletions (never the SOA nor the last apex NS).
//!
//! Only the apex and the names of the prerequisite and update sections are
//! read, so an update costs the same in a small zone and in the root zone.
//! The result is written in one transaction through the zone's write side
//! ([`authd_datasrc::ZoneWriter::update`], found by origin through the
//! [`SourceList`]): the RRs, the SOA serial moved per
//! `[update] serial` (or the SOA the update gave), the `diffs` journal rows in
//! BIND 10's layout, so IXFR and NOTIFY follow; the serving source sees the
//! commit as a new generation at once. A change that changes nothing writes
//! nothing. A busy DB gives SERVFAIL after [`BUSY_WAIT`], nothing written,
//! logged at WARN; a storage failure (a full disk, an I/O error at commit, a
//! DB not writable or served read-only, a corrupt or truncated file) gives
//! SERVFAIL logged at ERROR naming the file, and nothing of it is kept after
//! a crash either (the sqlite3 writer voids what a failed commit may have
//! left in the `-wal`); client refusals at INFO.
//!
//! The reply is the header and the zone section (§3.8), NOERROR or the rcode
//! of the first failing check.

use std::collections::HashSet;
use std::net::IpAddr;
use std::time::Duration;

use authd_datasrc::write::{Change, Scope, SerialPolicy, WRITE_LOCK_WAIT, serial_gt};
use authd_datasrc::{Class, Name, RType, Rdata, Record, SourceList, WriteError, ZoneWriter};
use serde::Deserialize;

use crate::acl::Acl;
use crate::edns::Ede;
use crate::log_limit::LogLimit;
use crate::settings::{
    Context, Invalid, Kind, Schema, Section, parse_origin, string_or_list, zone_origin,
};
use crate::wire::{self, ErrorOpt, Flags, HEADER_LEN, Header, Rcode, Request, u16_at};

/// How long an UPDATE waits for a DB another writer holds before SERVFAIL.
pub const BUSY_WAIT: Duration = WRITE_LOCK_WAIT;

/// Class NONE (RFC 2136 §1.3: "delete an RR" and "RRset does not exist").
const NONE: Class = Class(254);

/// Update log lines (refusals and changes; any client can send many).
static UPDATE_LOG: LogLimit = LogLimit::new();

/// One update log line at `$level` (`info`, `warn`, `error`), within the
/// budget.
macro_rules! update_log {
    ($level:ident, $($arg:tt)*) => {
        if let Some(suppressed) = UPDATE_LOG.allow() {
            tracing::$level!(suppressed, $($arg)*);
        }
    };
}

/// How a grant's `name` matches an owner name (as BIND 9's update-policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantMatch {
    /// The owner is `name` itself.
    Name,
    /// The owner is `name` or below it.
    Subdomain,
    /// `name` is a wildcard `*.X`; the owner is below `X` (not `X` itself).
    Wildcard,
}

/// One `[[update.grant]]`: what a key may change, wherever the zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The TSIG key the update must be signed with.
    pub key: Name,
    /// How `name` matches owners.
    pub kind: GrantMatch,
    /// The name (or wildcard) matched.
    pub name: Name,
    /// The types it may change; empty: every type except SOA, NS and the
    /// DNSSEC types (DS, RRSIG, NSEC, DNSKEY, NSEC3, NSEC3PARAM, CDS, CDNSKEY).
    pub types: Vec<RType>,
}

impl Grant {
    /// True when this grant lets `key` change `rtype` at `owner` (`rtype`
    /// ANY: some type there).
    pub fn covers(&self, key: &Name, owner: &Name, rtype: RType) -> bool {
        *key == self.key && self.matches_owner(owner) && (rtype == RType::ANY || self.allows(rtype))
    }

    fn matches_owner(&self, owner: &Name) -> bool {
        match self.kind {
            GrantMatch::Name => *owner == self.name,
            GrantMatch::Subdomain => owner.is_subdomain_of(&self.name),
            GrantMatch::Wildcard => self
                .name
                .parent()
                .is_some_and(|p| owner.is_subdomain_of(&p) && *owner != p),
        }
    }

    /// True when the grant's types include `rtype`.
    pub fn allows(&self, rtype: RType) -> bool {
        if self.types.is_empty() {
            !is_protected(rtype)
        } else {
            self.types.contains(&rtype)
        }
    }
}

/// SOA, NS and the DNSSEC types: left out of a grant without `types`.
fn is_protected(rtype: RType) -> bool {
    matches!(rtype.0, 2 | 6 | 43 | 46..=48 | 50 | 51 | 59 | 60)
}

/// Per-zone `[[update.zone]]` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneUpdate {
    /// The zone apex.
    pub origin: Name,
    /// Who has full control (replaces `[update] allow`), when given.
    pub allow: Option<Acl>,
    /// Updates of a signed zone allowed (replaces `[update] dnssec`), when given.
    pub dnssec: Option<bool>,
    /// How its serial moves (replaces `[update] serial`), when given.
    pub serial: Option<SerialPolicy>,
}

/// Dynamic updates (`[update]`, RFC 2136) of zones in sqlite3 sources.
///
/// ```toml
/// [update]
/// allow = ["key ddns-key."]      # full control; an address-only entry must be written out
/// serial = "increment"           # or "unixtime", "dateserial"
/// dnssec = false                 # refuse zones with a DNSKEY at the apex
/// [[update.grant]]
/// key = "acme-key."
/// match = "name"                 # "name", "subdomain" or "wildcard"
/// name = "_acme-challenge.www.example.com."
/// types = ["TXT"]                # default: all but SOA, NS and DNSSEC types
/// [[update.zone]]
/// origin = "example.org."
/// allow = ["key other-key."]     # replaces the global list for this zone
/// ```
///
/// The settings are the handler's policy as they stand: the two are one type.
pub type UpdateConfig = UpdatePolicy;

/// `[update]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpdate {
    #[serde(default, deserialize_with = "string_or_list")]
    allow: Option<Vec<String>>,
    serial: Option<String>,
    dnssec: Option<bool>,
    #[serde(default)]
    grant: Vec<RawGrant>,
    #[serde(default)]
    zone: Vec<RawUpdateZone>,
}

/// One `[[update.grant]]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGrant {
    key: Option<String>,
    #[serde(rename = "match")]
    kind: Option<String>,
    name: Option<String>,
    #[serde(default, deserialize_with = "string_or_list")]
    types: Option<Vec<String>>,
}

/// One `[[update.zone]]` table: settings replacing the global ones for one
/// zone.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUpdateZone {
    origin: Option<String>,
    #[serde(default, deserialize_with = "string_or_list")]
    allow: Option<Vec<String>>,
    dnssec: Option<bool>,
    serial: Option<String>,
}

impl Section for RawUpdate {
    type Value = UpdateConfig;

    const SCHEMA: Schema = &[
        (
            "update",
            &[
                ("allow", Kind::List),
                ("serial", Kind::Text),
                ("dnssec", Kind::Bool),
                ("grant", Kind::Tables),
                ("zone", Kind::Tables),
            ],
        ),
        (
            "update.grant[]",
            &[
                ("key", Kind::Text),
                ("match", Kind::Text),
                ("name", Kind::Text),
                ("types", Kind::List),
            ],
        ),
        (
            "update.zone[]",
            &[
                ("origin", Kind::Text),
                ("allow", Kind::List),
                ("dnssec", Kind::Bool),
                ("serial", Kind::Text),
            ],
        ),
    ];

    /// The global `allow` list, the serial policy, the grants and the
    /// per-zone settings.
    fn check(self, cx: &Context<'_>) -> Result<UpdateConfig, Invalid> {
        let allow = cx.acl("update.allow", self.allow)?;
        let serial = serial_policy("update.serial", self.serial)?.unwrap_or_default();
        let mut grants = Vec::new();
        for (i, g) in self.grant.into_iter().enumerate() {
            grants.push(grant(&format!("update.grant[{i}]"), g, cx)?);
        }
        let mut zones: Vec<ZoneUpdate> = Vec::new();
        for (i, z) in self.zone.into_iter().enumerate() {
            let at = format!("update.zone[{i}]");
            let origin = zone_origin(&at, z.origin)?;
            if zones.iter().any(|u| u.origin == origin) {
                return Err(Invalid::new(
                    format!("{at}.origin"),
                    format!("zone {origin} is listed twice in [[update.zone]]"),
                ));
            }
            let allow = match z.allow {
                Some(list) => Some(cx.acl(&format!("{at}.allow"), Some(list))?),
                None => None,
            };
            zones.push(ZoneUpdate {
                origin,
                allow,
                dnssec: z.dnssec,
                serial: serial_policy(&format!("{at}.serial"), z.serial)?,
            });
        }
        Ok(UpdateConfig {
            allow,
            grants,
            zones,
            serial,
            dnssec: self.dnssec.unwrap_or(false),
        })
    }
}

/// The `[[update.grant]]` table `g`, at `at` (`update.grant[0]`).
fn grant(at: &str, g: RawGrant, cx: &Context<'_>) -> Result<Grant, Invalid> {
    let Some(key_text) = g.key else {
        return Err(Invalid::new(format!("{at}.key"), "missing"));
    };
    let key = Name::parse(&key_text, Some(&Name::root())).map_err(|e| {
        Invalid::new(
            format!("{at}.key"),
            format!("bad key name {key_text:?}: {e}"),
        )
    })?;
    cx.known_key(&format!("{at}.key"), &key)?;
    let kind = match g.kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("name") => GrantMatch::Name,
        Some("subdomain") => GrantMatch::Subdomain,
        Some("wildcard") => GrantMatch::Wildcard,
        None => return Err(Invalid::new(format!("{at}.match"), "missing")),
        Some(other) => {
            return Err(Invalid::new(
                format!("{at}.match"),
                format!("{other:?} is not \"name\", \"subdomain\" or \"wildcard\""),
            ));
        }
    };
    let Some(name_text) = g.name else {
        return Err(Invalid::new(format!("{at}.name"), "missing"));
    };
    let name = parse_origin(&name_text).map_err(|r| Invalid::new(format!("{at}.name"), r))?;
    if kind == GrantMatch::Wildcard && !name.is_wildcard() {
        return Err(Invalid::new(
            format!("{at}.name"),
            format!("{name} is not a wildcard (*.NAME) as match = \"wildcard\" needs"),
        ));
    }
    let mut types = Vec::new();
    for (j, t) in g.types.unwrap_or_default().iter().enumerate() {
        let rtype: RType = t
            .parse()
            .map_err(|e| Invalid::new(format!("{at}.types[{j}]"), format!("{t:?}: {e}")))?;
        if rtype.is_meta() {
            return Err(Invalid::new(
                format!("{at}.types[{j}]"),
                format!("{t:?} is not a data type"),
            ));
        }
        types.push(rtype);
    }
    Ok(Grant {
        key,
        kind,
        name,
        types,
    })
}

/// The serial policy `text` of key `key` (`None` when unset).
fn serial_policy(key: &str, text: Option<String>) -> Result<Option<SerialPolicy>, Invalid> {
    match text.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None => Ok(None),
        Some("increment") => Ok(Some(SerialPolicy::Increment)),
        Some("unixtime") => Ok(Some(SerialPolicy::UnixTime)),
        Some("dateserial") => Ok(Some(SerialPolicy::DateSerial)),
        Some(other) => Err(Invalid::new(
            key,
            format!("{other:?} is not \"increment\", \"unixtime\" or \"dateserial\""),
        )),
    }
}

/// Who may update what, and where the zones are written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdatePolicy {
    /// Full control of every zone without its own list (`[update] allow`);
    /// empty: nobody.
    pub allow: Acl,
    /// Finer grants (`[[update.grant]]`).
    pub grants: Vec<Grant>,
    /// Per-zone overrides.
    pub zones: Vec<ZoneUpdate>,
    /// How the SOA serial moves.
    pub serial: SerialPolicy,
    /// Updates of zones with a DNSKEY at the apex allowed.
    pub dnssec: bool,
}

impl UpdatePolicy {
    fn zone(&self, origin: &Name) -> Option<&ZoneUpdate> {
        self.zones.iter().find(|z| z.origin == *origin)
    }

    /// The full-control ACL of zone `origin`.
    pub fn acl_for(&self, origin: &Name) -> &Acl {
        self.zone(origin)
            .and_then(|z| z.allow.as_ref())
            .unwrap_or(&self.allow)
    }

    fn serial_for(&self, origin: &Name) -> SerialPolicy {
        self.zone(origin)
            .and_then(|z| z.serial)
            .unwrap_or(self.serial)
    }

    fn dnssec_for(&self, origin: &Name) -> bool {
        self.zone(origin)
            .and_then(|z| z.dnssec)
            .unwrap_or(self.dnssec)
    }
}

/// Who sent the update.
#[derive(Debug, Clone, Copy)]
pub struct Client<'a> {
    /// The client's address.
    pub addr: IpAddr,
    /// The key the request was verified with, if signed.
    pub key: Option<&'a Name>,
    /// The request came over TLS (DNS over TLS, `[tls]`).
    pub tls: bool,
}

impl std::fmt::Display for Client<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.key {
            Some(k) => write!(f, "{} key {k}", self.addr),
            None => write!(f, "{} unsigned", self.addr),
        }
    }
}

/// One RR of the prerequisite or update section. `rdata` is `None` when
/// RDLENGTH is 0.
#[derive(Debug, Clone)]
struct Rr {
    owner: Name,
    rtype: RType,
    class: Class,
    ttl: u32,
    rdata: Option<Rdata>,
}

/// A failed check: the rcode, whose fault and, for the log, why.
struct Refusal {
    rcode: Rcode,
    fault: Fault,
    why: String,
}

/// Why an UPDATE was not applied, as the log level tells it: a client's
/// refusal is routine (INFO), a DB another writer holds passes (WARN), a
/// failing storage needs the operator (ERROR: a full disk, an I/O error, a
/// read-only or damaged DB).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Client,
    Busy,
    Storage,
}

/// A refusal of the client's update (its rights, its content, the zone).
fn refuse(rcode: Rcode, why: impl Into<String>) -> Refusal {
    Refusal {
        rcode,
        fault: Fault::Client,
        why: why.into(),
    }
}

/// SERVFAIL for a write that failed in the storage of `writer`: busy, or
/// a storage failure; the message names the DB.
fn failed(writer: &dyn ZoneWriter, e: &WriteError) -> Refusal {
    let (fault, what) = if e.is_busy() {
        (Fault::Busy, "busy")
    } else {
        (Fault::Storage, "storage failed")
    };
    Refusal {
        rcode: Rcode::SERVFAIL,
        fault,
        why: format!(
            "{what}: {}; nothing was changed",
            crate::xfrin::storage_text(writer, e)
        ),
    }
}

/// Answers UPDATE `msg` (parsed as `req`) from `client`: checks and applies
/// it (see the module documentation) and writes the reply into `out`.
/// Returns the reply's rcode.
pub fn update(
    sources: &SourceList,
    policy: &UpdatePolicy,
    msg: &[u8],
    req: &Request<'_>,
    client: &Client<'_>,
    out: &mut Vec<u8>,
) -> Rcode {
    let rcode = match run(sources, policy, msg, req, client) {
        Ok(summary) => {
            if let Some(s) = summary {
                update_log!(info, "UPDATE of {} from {client}: {s}", req.qname);
            }
            Rcode::NOERROR
        }
        Err(r) => {
            let (zone, why, rcode) = (&req.qname, &r.why, r.rcode.0);
            match r.fault {
                Fault::Client => {
                    update_log!(
                        info,
                        "UPDATE of {zone} from {client}: {why} (rcode {rcode})"
                    )
                }
                Fault::Busy => {
                    update_log!(
                        warn,
                        "UPDATE of {zone} from {client}: {why} (rcode {rcode})"
                    )
                }
                Fault::Storage => {
                    update_log!(
                        error,
                        "UPDATE of {zone} from {client}: {why} (rcode {rcode})"
                    )
                }
            }
            r.rcode
        }
    };
    // EDE 18 Prohibited for a client or change the policy refuses, 20 Not
    // Authoritative for a zone not served here (RFC 8914 §4.19, §4.21).
    let ede = match rcode {
        Rcode::REFUSED => Some(Ede::PROHIBITED),
        Rcode::NOTAUTH => Some(Ede::NOT_AUTHORITATIVE),
        _ => None,
    };
    wire::write_error(
        out,
        Header::reply_to(req, Flags::empty(), rcode),
        Some(req.question),
        ErrorOpt::to(req, ede),
    );
    rcode
}

/// The checks and the change; `Ok(None)` when nothing changed.
fn run(
    sources: &SourceList,
    policy: &UpdatePolicy,
    msg: &[u8],
    req: &Request<'_>,
    client: &Client<'_>,
) -> Result<Option<String>, Refusal> {
    let zone = &req.qname;
    // §3.1.1: ZTYPE must be SOA.
    if req.qtype != RType::SOA {
        return Err(refuse(Rcode::FORMERR, "zone section type is not SOA"));
    }
    if req.qclass != Class::IN {
        return Err(refuse(Rcode::NOTAUTH, "zone class is not IN"));
    }
    let (prereqs, updates) = parse_sections(msg, req)
        .ok_or_else(|| refuse(Rcode::FORMERR, "malformed prerequisite or update section"))?;
    // §3.1.2: a zone served here, from a source that takes writes.
    let writer = match sources.find_zone(zone) {
        Ok(Some((source, found))) if found.origin == *zone => match source.writer() {
            Some(w) => w,
            None => {
                return Err(refuse(
                    Rcode::NOTAUTH,
                    format!(
                        "zone served by {}, which takes no writes: only sqlite3 zones take updates",
                        source.describe()
                    ),
                ));
            }
        },
        Ok(_) => return Err(refuse(Rcode::NOTAUTH, "not a zone served here")),
        Err(e) => {
            return Err(Refusal {
                rcode: Rcode::SERVFAIL,
                fault: Fault::Storage,
                why: e.to_string(),
            });
        }
    };
    // Who may update the zone at all.
    let full = policy
        .acl_for(zone)
        .allows(client.addr, client.key, client.tls);
    let granted: Vec<&Grant> = match client.key {
        Some(key) if !full => policy.grants.iter().filter(|g| g.key == *key).collect(),
        _ => Vec::new(),
    };
    if !full && granted.is_empty() {
        return Err(refuse(Rcode::REFUSED, "not allowed to update the zone"));
    }
    let dnssec = policy.dnssec_for(zone);
    let plan = |records: &[Record]| -> Result<Change, Refusal> {
        check_prerequisites(zone, &prereqs, records)?;
        let permits = permissions(zone, &updates, full, &granted, client)?;
        prescan(zone, &updates)?;
        if !dnssec
            && records
                .iter()
                .any(|r| r.rtype == RType::DNSKEY && r.owner == *zone)
        {
            return Err(refuse(
                Rcode::REFUSED,
                "the zone is signed (DNSKEY at the apex) and [update] dnssec is off",
            ));
        }
        Ok(apply(zone, &updates, &permits, records))
    };
    let now = crate::sys::unix_seconds();
    // Only the names the update speaks of are read (the apex is added):
    // nothing else can change or decide anything.
    let names: Vec<Name> = prereqs
        .iter()
        .chain(&updates)
        .map(|rr| rr.owner.clone())
        .collect();
    let scope = Scope::Names(&names);
    let serial = policy.serial_for(zone);
    // The planner's refusal, kept here: the write side only learns that it
    // refused (nothing written).
    let mut refusal = None;
    let mut planner = |records: &[Record]| match plan(records) {
        Ok(change) => Some(change),
        Err(r) => {
            refusal = Some(r);
            None
        }
    };
    match writer.update(zone, scope, serial, now, &mut planner) {
        Ok(Some(report)) if report.journal_rows == 0 => Ok(None),
        Ok(Some(report)) => Ok(Some(format!(
            "serial {} -> {}, {} RRs added, {} deleted",
            report.old_serial, report.new_serial, report.added, report.deleted
        ))),
        Ok(None) => Err(refusal.unwrap_or_else(|| refuse(Rcode::SERVFAIL, "refused"))),
        Err(e @ (WriteError::Update(_) | WriteError::Check(_))) => {
            Err(refuse(Rcode::REFUSED, format!("{e}; nothing was changed")))
        }
        // A zone from a master file: its write side reads (the journal, for
        // IXFR) but takes no write (§3.1.2: not a zone updated here).
        Err(WriteError::NotSupported(why)) => Err(refuse(
            Rcode::NOTAUTH,
            format!("{why}; it takes no writes: only sqlite3 zones take updates"),
        )),
        Err(e) => Err(failed(writer.as_ref(), &e)),
    }
}

/// The prerequisite and update sections of `msg` (§2.4, §2.5); `None` when
/// an RR is malformed.
fn parse_sections(msg: &[u8], req: &Request<'_>) -> Option<(Vec<Rr>, Vec<Rr>)> {
    let prcount = u16_at(msg, 6)?;
    let upcount = u16_at(msg, 8)?;
    let read = |pos: usize, n: u16| -> Option<(Vec<Rr>, usize)> {
        let (section, end) = crate::sections::read_section(msg, pos, n)?;
        let mut rrs = Vec::with_capacity(section.len());
        for rr in section {
            // Unreadable RDATA for its type: FORMERR.
            if let Some(rdata) = &rr.rdata {
                rdata.to_text(rr.rtype).ok()?;
            }
            rrs.push(Rr {
                owner: rr.owner,
                rtype: rr.rtype,
                class: rr.class,
                // RFC 2181 §8: a TTL with the top bit set is read as 0.
                ttl: if rr.ttl > 0x7FFF_FFFF { 0 } else { rr.ttl },
                rdata: rr.rdata,
            });
        }
        Some((rrs, end))
    };
    let (prereqs, pos) = read(HEADER_LEN + req.question.len(), prcount)?;
    let (updates, _) = read(pos, upcount)?;
    Some((prereqs, updates))
}

/// §3.2: the prerequisites against the zone's `records`.
fn check_prerequisites(zone: &Name, prereqs: &[Rr], records: &[Record]) -> Result<(), Refusal> {
    let in_use = |owner: &Name| records.iter().any(|r| r.owner == *owner);
    fn rrset<'r>(
        records: &'r [Record],
        owner: &Name,
        rtype: RType,
    ) -> impl Iterator<Item = &'r Record> {
        records
            .iter()
            .filter(move |r| r.owner == *owner && r.rtype == rtype)
    }
    let mut temp: Vec<&Rr> = Vec::new();
    for rr in prereqs {
        if rr.ttl != 0 {
            return Err(refuse(Rcode::FORMERR, "prerequisite with a TTL"));
        }
        if !rr.owner.is_subdomain_of(zone) {
            return Err(refuse(
                Rcode::NOTZONE,
                format!("prerequisite name {} outside the zone", rr.owner),
            ));
        }
        let what = format!("prerequisite {} {}", rr.owner, rr.rtype);
        match rr.class {
            Class::ANY | NONE if rr.rdata.is_some() => {
                return Err(refuse(Rcode::FORMERR, format!("{what} with RDATA")));
            }
            Class::ANY if rr.rtype == RType::ANY => {
                if !in_use(&rr.owner) {
                    return Err(refuse(Rcode::NXDOMAIN, format!("{what}: name not in use")));
                }
            }
            Class::ANY => {
                if rrset(records, &rr.owner, rr.rtype).next().is_none() {
                    return Err(refuse(Rcode::NXRRSET, format!("{what}: no such RRset")));
                }
            }
            NONE if rr.rtype == RType::ANY => {
                if in_use(&rr.owner) {
                    return Err(refuse(Rcode::YXDOMAIN, format!("{what}: name in use")));
                }
            }
            NONE => {
                if rrset(records, &rr.owner, rr.rtype).next().is_some() {
                    return Err(refuse(Rcode::YXRRSET, format!("{what}: RRset exists")));
                }
            }
            Class::IN if !rr.rtype.is_meta() && rr.rdata.is_some() => temp.push(rr),
            _ => return Err(refuse(Rcode::FORMERR, format!("{what}: bad class or type"))),
        }
    }
    // §3.2.3: each RRset of the value-dependent prerequisites equals the
    // zone's, RR for RR.
    for rr in &temp {
        let wanted: Vec<&Rdata> = temp
            .iter()
            .filter(|t| t.owner == rr.owner && t.rtype == rr.rtype)
            .filter_map(|t| t.rdata.as_ref())
            .collect();
        let have: Vec<&Rdata> = rrset(records, &rr.owner, rr.rtype)
            .map(|r| &r.rdata)
            .collect();
        let equal =
            have.iter().all(|h| wanted.contains(h)) && wanted.iter().all(|w| have.contains(w));
        if !equal {
            return Err(refuse(
                Rcode::NXRRSET,
                format!("prerequisite RRset {} {} differs", rr.owner, rr.rtype),
            ));
        }
    }
    Ok(())
}

/// What an update RR may change: everything, or the types of a grant.
#[derive(Clone, Copy)]
enum Permit<'a> {
    Full,
    Grant(&'a Grant),
}

impl Permit<'_> {
    fn allows(&self, rtype: RType) -> bool {
        match self {
            Permit::Full => true,
            Permit::Grant(g) => g.allows(rtype),
        }
    }
}

/// §3.3: the permit of each update RR; REFUSED for one no grant covers.
fn permissions<'g>(
    zone: &Name,
    updates: &[Rr],
    full: bool,
    granted: &[&'g Grant],
    client: &Client<'_>,
) -> Result<Vec<Permit<'g>>, Refusal> {
    updates
        .iter()
        .map(|rr| {
            if full {
                return Ok(Permit::Full);
            }
            let key = client
                .key
                .ok_or_else(|| refuse(Rcode::REFUSED, "unsigned"))?;
            granted
                .iter()
                .find(|g| g.covers(key, &rr.owner, rr.rtype))
                .map(|g| Permit::Grant(g))
                .ok_or_else(|| {
                    refuse(
                        Rcode::REFUSED,
                        format!(
                            "no [[update.grant]] lets key {key} change {} {} in {zone}",
                            rr.owner, rr.rtype
                        ),
                    )
                })
        })
        .collect()
}

/// §3.4.1: the update section's prescan.
fn prescan(zone: &Name, updates: &[Rr]) -> Result<(), Refusal> {
    for rr in updates {
        if !rr.owner.is_subdomain_of(zone) {
            return Err(refuse(
                Rcode::NOTZONE,
                format!("update name {} outside the zone", rr.owner),
            ));
        }
        let what = format!("update {} {}", rr.owner, rr.rtype);
        let ok = match rr.class {
            Class::IN => !rr.rtype.is_meta() && rr.rdata.is_some(),
            Class::ANY => {
                rr.ttl == 0 && rr.rdata.is_none() && (rr.rtype == RType::ANY || !rr.rtype.is_meta())
            }
            NONE => rr.ttl == 0 && !rr.rtype.is_meta() && rr.rdata.is_some(),
            _ => false,
        };
        if !ok {
            return Err(refuse(
                Rcode::FORMERR,
                format!("{what}: bad class, type, TTL or RDATA"),
            ));
        }
    }
    Ok(())
}

/// Types that may sit beside a CNAME (RFC 4035 §2.5).
fn beside_cname(rtype: RType) -> bool {
    matches!(rtype, RType::CNAME | RType::RRSIG | RType::NSEC)
}

/// §3.4.2: the change `updates` (prescanned, with their permits) make to the
/// zone's `records`.
fn apply(zone: &Name, updates: &[Rr], permits: &[Permit<'_>], records: &[Record]) -> Change {
    let mut work: Vec<Record> = records.to_vec();
    let mut soa: Option<Rdata> = None;
    let current_serial = |work: &[Record], soa: &Option<Rdata>| {
        soa.as_ref()
            .or_else(|| {
                work.iter()
                    .find(|r| r.rtype == RType::SOA && r.owner == *zone)
                    .map(|r| &r.rdata)
            })
            .and_then(Rdata::soa_serial)
    };
    for (rr, permit) in updates.iter().zip(permits) {
        let at_apex = rr.owner == *zone;
        match (rr.class, &rr.rdata) {
            (Class::IN, Some(rdata)) => {
                if rr.rtype == RType::SOA {
                    let newer = rdata
                        .soa_serial()
                        .zip(current_serial(&work, &soa))
                        .is_some_and(|(new, old)| serial_gt(new, old));
                    if at_apex && newer {
                        soa = Some(rdata.clone());
                    }
                    continue;
                }
                let here = |r: &&Record| r.owner == rr.owner;
                let conflict = if rr.rtype == RType::CNAME {
                    work.iter().filter(here).any(|r| !beside_cname(r.rtype))
                } else {
                    !beside_cname(rr.rtype)
                        && work.iter().filter(here).any(|r| r.rtype == RType::CNAME)
                };
                if conflict {
                    continue;
                }
                if rr.rtype == RType::CNAME {
                    work.retain(|r| !(r.owner == rr.owner && r.rtype == RType::CNAME));
                }
                work.retain(|r| !(r.owner == rr.owner && r.rtype == rr.rtype && r.rdata == *rdata));
                for r in work.iter_mut() {
                    if r.owner == rr.owner && r.rtype == rr.rtype {
                        r.ttl = rr.ttl;
                    }
                }
                work.push(Record {
                    owner: rr.owner.clone(),
                    rtype: rr.rtype,
                    class: Class::IN,
                    ttl: rr.ttl,
                    rdata: rdata.clone(),
                });
            }
            (Class::ANY, _) => work.retain(|r| {
                let hit = r.owner == rr.owner
                    && (rr.rtype == RType::ANY || r.rtype == rr.rtype)
                    && permit.allows(r.rtype);
                let kept = at_apex && matches!(r.rtype, RType::SOA | RType::NS);
                !hit || kept
            }),
            (_, Some(rdata)) => {
                if rr.rtype == RType::SOA {
                    continue;
                }
                if at_apex && rr.rtype == RType::NS {
                    let ns = work
                        .iter()
                        .filter(|r| r.owner == *zone && r.rtype == RType::NS);
                    let mut others = ns.filter(|r| r.rdata != *rdata);
                    if others.next().is_none() {
                        continue;
                    }
                }
                work.retain(|r| !(r.owner == rr.owner && r.rtype == rr.rtype && r.rdata == *rdata));
            }
            _ => {}
        }
    }
    // The difference, by (owner, type, TTL, RDATA); hashed, as a zone may
    // hold the whole root zone.
    fn key(r: &Record) -> (&Name, RType, u32, &Rdata) {
        (&r.owner, r.rtype, r.ttl, &r.rdata)
    }
    let before: HashSet<_> = records.iter().map(key).collect();
    let after: HashSet<_> = work.iter().map(key).collect();
    let delete = records
        .iter()
        .filter(|r| !after.contains(&key(r)))
        .cloned()
        .collect();
    let add = work
        .iter()
        .filter(|w| !before.contains(&key(w)))
        .cloned()
        .collect();
    Change { add, delete, soa }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::read_rdata;

    fn name(s: &str) -> Name {
        s.parse().expect("name")
    }

    fn grant(kind: GrantMatch, n: &str, types: &[RType]) -> Grant {
        Grant {
            key: name("k."),
            kind,
            name: name(n),
            types: types.to_vec(),
        }
    }

    /// Each match kind, the default types (no SOA, NS or DNSSEC type) and
    /// the key.
    #[test]
    fn grants_cover_names_types_and_keys() {
        let k = name("k.");
        let by_name = grant(GrantMatch::Name, "a.example.", &[RType::TXT]);
        assert!(by_name.covers(&k, &name("A.example."), RType::TXT));
        assert!(!by_name.covers(&k, &name("b.a.example."), RType::TXT));
        assert!(!by_name.covers(&k, &name("a.example."), RType::A));
        assert!(!by_name.covers(&name("other."), &name("a.example."), RType::TXT));
        let sub = grant(GrantMatch::Subdomain, "a.example.", &[]);
        assert!(sub.covers(&k, &name("a.example."), RType::A));
        assert!(sub.covers(&k, &name("x.y.a.example."), RType::AAAA));
        assert!(!sub.covers(&k, &name("example."), RType::A));
        for t in [
            RType::SOA,
            RType::NS,
            RType::DNSKEY,
            RType::RRSIG,
            RType::DS,
            RType::NSEC3,
        ] {
            assert!(!sub.covers(&k, &name("a.example."), t), "{t}");
        }
        let wild = grant(GrantMatch::Wildcard, "*.dyn.example.", &[]);
        assert!(wild.covers(&k, &name("h.dyn.example."), RType::A));
        assert!(wild.covers(&k, &name("x.h.dyn.example."), RType::A));
        assert!(!wild.covers(&k, &name("dyn.example."), RType::A));
    }

    /// Compressed names in RDATA are decompressed (MX, SOA); other types are
    /// taken as they are; a pointer out of the RDATA's bounds is malformed.
    #[test]
    fn rdata_names_are_decompressed() {
        // 12 bytes of header, then "example." at 12.
        let mut msg = vec![0u8; 12];
        msg.extend_from_slice(b"\x07example\x00");
        let at = msg.len();
        msg.extend_from_slice(&[0, 10, 4, b'm', b'a', b'i', b'l', 0xC0, 12]);
        let mx = read_rdata(&msg, at, 9, RType::MX).expect("MX");
        assert_eq!(mx.as_wire(), b"\x00\x0a\x04mail\x07example\x00");
        let txt = read_rdata(&msg, at, 9, RType::TXT).expect("TXT");
        assert_eq!(txt.as_wire(), &msg[at..]);
        // The pointer cut off: malformed.
        assert!(read_rdata(&msg, at, 8, RType::MX).is_none());
        // SOA without its 20 bytes of numbers: malformed.
        assert!(read_rdata(&msg, 12, 9, RType::SOA).is_none());
    }
}
