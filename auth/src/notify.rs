//! NOTIFY to secondaries (RFC 1996) when a served zone's SOA serial changes.
//!
//! A poller thread watches the write side of every served source
//! ([`authd_datasrc::SourceList::writers`]): every [`POLL_INTERVAL`] it reads
//! its change mark ([`ZoneWriter::change_mark`]; sqlite3's `PRAGMA
//! data_version`, which moves on any commit: UPDATE, a transfer in,
//! `loadzone`, `zone update`, an `sqlite3` shell). On a change it reads every
//! zone's SOA; a zone whose serial differs from the one seen before is
//! announced to its targets ([`NotifyConfig`], `[notify]`).
//! The first poll only records the serials: starting authd sends nothing.
//!
//! Each (zone, target) gets its own task: a UDP socket bound to loopback when
//! the target is a loopback address (else to the unspecified address of the
//! target's family), a NOTIFY message (opcode 4, AA, random id, question
//! `ZONE SOA IN`, the new SOA in the answer section, RFC 1996 §3.7), and
//! retransmission per §3.6 in BIND 10's way: first timeout [`FIRST_TIMEOUT`],
//! doubled after each try, at most [`MAX_TRIES`] tries. A reply is accepted when
//! its id, QR bit, opcode and question name match (§3.8; its rcode is logged,
//! REFUSED and NOTAUTH as a warning naming the likely causes).
//!
//! A target given with a key (`"192.0.2.2 key NAME"`) gets the NOTIFY signed
//! with that `[[key]]` (RFC 8945 §5.1), and its reply must verify (§5.4): a
//! reply carrying a TSIG error (the peer does not know the key, say) ends the
//! tries with a warning naming the error; an unsigned or badly signed reply is
//! ignored, as a forged one would be.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use authd_datasrc::{Class, Name, RType, Rdata, ZoneWriter};
use serde::Deserialize;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};

use crate::acl::Acl;
use crate::keys::{Key, KeyRing};
use crate::settings::{self, Context, Invalid, Kind, Schema, string_or_list, zone_origin};
use crate::tsig::{self, ReplyProblem};
use crate::wire::{
    Flags, Header, MAX_TCP_MESSAGE, MessageWriter, Opcode, Rcode, RecordMeta, Section,
};

/// How often the served DBs are polled for changes (a poll reads `PRAGMA
/// data_version` only, unless it moved): 250 ms, so a change a catalog
/// producer makes (`crate::catalog::producer`, which polls every 200 ms)
/// is announced within about half a second of the commit that caused it.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// Wait for the first reply (RFC 1996 §3.6 leaves it to the implementation;
/// BIND 10 used 1 s).
pub const FIRST_TIMEOUT: Duration = Duration::from_secs(1);
/// Most transmissions of one NOTIFY to one target.
pub const MAX_TRIES: u32 = 5;

/// A zone whose serial changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SerialChange {
    /// The zone apex.
    pub origin: Name,
    /// The SOA TTL, seconds.
    pub ttl: u32,
    /// The new SOA RDATA.
    pub soa: Rdata,
    /// The serial before.
    pub old_serial: u32,
}

/// Builds a NOTIFY message (RFC 1996 §3.7) for `origin` with message id `id`,
/// carrying the SOA (`ttl` seconds, `soa` RDATA) in the answer section.
pub fn notify_message(id: u16, origin: &Name, ttl: u32, soa: &Rdata) -> Vec<u8> {
    let mut buf = Vec::new();
    let header = Header {
        id,
        opcode: Opcode::NOTIFY,
        flags: Flags::AA,
        rcode: Rcode::NOERROR,
    };
    let mut w = MessageWriter::new(&mut buf, header, MAX_TCP_MESSAGE);
    let mut question = origin.as_wire().to_vec();
    question.extend_from_slice(&RType::SOA.0.to_be_bytes());
    question.extend_from_slice(&Class::IN.0.to_be_bytes());
    w.push_question(&question);
    w.push_record(
        Section::Answer,
        origin,
        RecordMeta {
            rtype: RType::SOA,
            class: Class::IN,
            ttl,
        },
        soa.as_wire(),
        soa.compressible_names(RType::SOA),
    );
    w.finish();
    buf
}

/// True when `reply` answers the NOTIFY `id` for `origin`: same id, QR set,
/// opcode NOTIFY, and the question names `origin` (RFC 1996 §3.8).
pub fn is_reply_to(reply: &[u8], id: u16, origin: &Name) -> bool {
    if crate::sections::read_reply_head(reply, id, Opcode::NOTIFY).is_err() {
        return false;
    }
    crate::wire::read_name(reply, crate::wire::HEADER_LEN)
        .is_some_and(|(qname, _)| qname == *origin)
}

/// A NOTIFY target: an address, and the TSIG key to sign with, if any
/// (`"192.0.2.2"`, `"192.0.2.2:5353 key transfer-key."`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyTarget {
    /// Where to send (port 53 when the entry gave none).
    pub addr: SocketAddr,
    /// Sign with this `[[key]]` (RFC 8945 §5.1); `None`: unsigned.
    pub key: Option<Name>,
}

impl fmt::Display for NotifyTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(k) => write!(f, "{} key {k}", self.addr),
            None => write!(f, "{}", self.addr),
        }
    }
}

impl NotifyTarget {
    /// Parses `ADDR:PORT` or a bare address (port 53), optionally followed
    /// by `key NAME`; the key, when there is one, must be a `[[key]]` of `cx`.
    /// `at` names the entry in messages (`notify.targets[0]`).
    ///
    /// Errors: a text of another form, or an unknown key.
    pub fn parse(at: &str, s: &str, cx: &Context<'_>) -> Result<NotifyTarget, Invalid> {
        let target = parse_target(s).map_err(|r| Invalid::new(at, r))?;
        if let Some(name) = &target.key {
            cx.known_key(at, name)?;
        }
        Ok(target)
    }
}

/// The target `s`, as [`NotifyTarget::parse`] reads it, before its key is
/// looked up.
fn parse_target(s: &str) -> Result<NotifyTarget, String> {
    let words: Vec<&str> = s.split_whitespace().collect();
    let (addr, key) = match words[..] {
        [addr] => (addr, None),
        [addr, k, name] if k.eq_ignore_ascii_case("key") => (addr, Some(name)),
        _ => {
            return Err(format!(
                "{s:?} is not ADDR[:PORT] or \"ADDR[:PORT] key NAME\" (e.g. 127.0.0.1:5353, \"192.0.2.2 key transfer-key.\")"
            ));
        }
    };
    let addr = match addr.parse::<SocketAddr>() {
        Ok(a) => a,
        Err(_) => addr
            .parse::<IpAddr>()
            .map(|ip| SocketAddr::new(ip, 53))
            .map_err(|_| {
                format!("{s:?} is not ADDR:PORT or ADDR (e.g. 127.0.0.1:5353, [::1]:53)")
            })?,
    };
    let key = match key {
        Some(k) => Some(
            Name::parse(k, Some(&Name::root()))
                .map_err(|e| format!("{s:?}: bad key name {k:?}: {e}"))?,
        ),
        None => None,
    };
    Ok(NotifyTarget { addr, key })
}

/// NOTIFY to secondaries when a zone's SOA serial changes (`[notify]`, RFC 1996).
///
/// ```toml
/// [notify]
/// targets = ["127.0.0.1:5353"]      # every zone; a missing port is 53
/// [[notify.zone]]
/// origin = "example.com."
/// targets = ["[::1]:5354 key transfer-key."]   # this zone, in addition; signed
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotifyConfig {
    /// Targets notified for every zone.
    pub targets: Vec<NotifyTarget>,
    /// Extra targets for single zones (apex, targets).
    pub zones: Vec<(Name, Vec<NotifyTarget>)>,
    /// Who else may send NOTIFY for a secondary zone, besides its primaries
    /// (`allow`, an [`crate::acl::Acl`]: addresses, keys or both).
    pub allow: Acl,
}

impl NotifyConfig {
    /// The targets for zone `origin`: the global ones, then the zone's own,
    /// without duplicates.
    pub fn targets_for(&self, origin: &Name) -> Vec<NotifyTarget> {
        let mut out = self.targets.clone();
        for (zone, targets) in &self.zones {
            if zone == origin {
                for t in targets {
                    if !out.contains(t) {
                        out.push(t.clone());
                    }
                }
            }
        }
        out
    }

    /// True when no target is configured at all (NOTIFY is off).
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty() && self.zones.iter().all(|(_, t)| t.is_empty())
    }
}

/// `[notify]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNotify {
    #[serde(default, deserialize_with = "string_or_list")]
    targets: Option<Vec<String>>,
    #[serde(default, deserialize_with = "string_or_list")]
    allow: Option<Vec<String>>,
    #[serde(default)]
    zone: Vec<RawNotifyZone>,
}

/// One `[[notify.zone]]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNotifyZone {
    origin: Option<String>,
    #[serde(default, deserialize_with = "string_or_list")]
    targets: Option<Vec<String>>,
}

impl settings::Section for RawNotify {
    type Value = NotifyConfig;

    const SCHEMA: Schema = &[
        (
            "notify",
            &[
                ("targets", Kind::List),
                ("allow", Kind::List),
                ("zone", Kind::Tables),
            ],
        ),
        (
            "notify.zone[]",
            &[("origin", Kind::Text), ("targets", Kind::List)],
        ),
    ];

    /// The global targets and the per-zone ones, each list without
    /// duplicates, every key named defined.
    fn check(self, cx: &Context<'_>) -> Result<NotifyConfig, Invalid> {
        let list = |key: &str, v: Option<Vec<String>>| -> Result<Vec<NotifyTarget>, Invalid> {
            let mut out = Vec::new();
            for (i, t) in v.unwrap_or_default().iter().enumerate() {
                let target = NotifyTarget::parse(&format!("{key}[{i}]"), t, cx)?;
                if !out.contains(&target) {
                    out.push(target);
                }
            }
            Ok(out)
        };
        let targets = list("notify.targets", self.targets)?;
        let mut zones = Vec::new();
        for (i, z) in self.zone.into_iter().enumerate() {
            let key = format!("notify.zone[{i}]");
            let origin = zone_origin(&key, z.origin)?;
            zones.push((origin, list(&format!("{key}.targets"), z.targets)?));
        }
        let allow = cx.acl("notify.allow", self.allow)?;
        Ok(NotifyConfig {
            targets,
            zones,
            allow,
        })
    }
}

/// What to watch and whom to tell: the write sides of the sources served
/// and the targets.
#[derive(Clone, Default)]
pub struct NotifySettings {
    /// The write sides whose zones are announced, in data-source order.
    pub writers: Vec<Arc<dyn ZoneWriter>>,
    /// The targets (`[notify]`).
    pub config: NotifyConfig,
    /// The TSIG keys the targets name (`[[key]]`).
    pub keys: KeyRing,
}

impl PartialEq for NotifySettings {
    fn eq(&self, other: &NotifySettings) -> bool {
        self.config == other.config
            && self.keys == other.keys
            && self.writers.len() == other.writers.len()
            && self
                .writers
                .iter()
                .zip(&other.writers)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

/// Wakes the NOTIFY poller before its next [`POLL_INTERVAL`] is up: a
/// change this process has just committed (a DNS UPDATE) is announced at
/// once rather than up to one interval later. Clones wake the same poller.
#[derive(Clone, Default)]
pub struct NotifyWake(Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

impl NotifyWake {
    /// Makes the poller poll now (or as soon as it finishes a poll).
    pub fn wake(&self) {
        let (woken, cond) = &*self.0;
        let mut w = woken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *w = true;
        cond.notify_one();
    }

    /// Waits until woken or `timeout` has passed.
    fn wait(&self, timeout: Duration) {
        let (woken, cond) = &*self.0;
        let w = woken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (mut w, _) = cond
            .wait_timeout_while(w, timeout, |w| !*w)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *w = false;
    }
}

/// NOTIFY to secondaries, running: a poller thread and a sender task. Its
/// settings can be replaced while it runs ([`Notifier::update`], on reload).
/// Dropping it stops both.
pub struct Notifier {
    settings: watch::Sender<NotifySettings>,
    sender: tokio::task::JoinHandle<()>,
    wake: NotifyWake,
}

impl Notifier {
    /// Starts NOTIFY with `settings`. With no target configured the poller
    /// only sleeps, and starts watching once an update adds targets (a DB
    /// added then is first read to learn its serials: nothing is sent for
    /// what changed before). Must be called inside a tokio runtime.
    ///
    /// Errors: the poller thread cannot be started.
    pub fn spawn(settings: NotifySettings) -> std::io::Result<Notifier> {
        let (settings_tx, settings_rx) = watch::channel(settings);
        let (tx, mut rx) = mpsc::channel::<SerialChange>(64);
        let poll_settings = settings_rx.clone();
        let wake = NotifyWake::default();
        let poll_wake = wake.clone();
        std::thread::Builder::new()
            .name("notify-poll".into())
            .spawn(move || poll_loop(poll_settings, tx, &poll_wake))?;
        let sender = tokio::spawn(async move {
            while let Some(change) = rx.recv().await {
                // The targets and keys in force when the change is seen.
                let (targets, keys) = {
                    let s = settings_rx.borrow();
                    (s.config.targets_for(&change.origin), s.keys.clone())
                };
                tracing::info!(
                    "zone {} serial {} -> {}: notifying {} target(s)",
                    change.origin,
                    change.old_serial,
                    change.soa.soa_serial().unwrap_or_default(),
                    targets.len()
                );
                for target in targets {
                    let c = change.clone();
                    // Configuration checks that every key named exists.
                    let key = target.key.as_ref().and_then(|k| keys.get(k)).cloned();
                    tokio::spawn(async move { notify_one(c, target.addr, key).await });
                }
            }
        });
        Ok(Notifier {
            settings: settings_tx,
            sender,
            wake,
        })
    }

    /// A handle that makes the poller poll now (after a commit).
    pub fn waker(&self) -> NotifyWake {
        self.wake.clone()
    }

    /// Replaces the DBs watched and the targets; applies from the next poll.
    pub fn update(&self, settings: NotifySettings) {
        self.settings.send_if_modified(|current| {
            let changed = *current != settings;
            *current = settings;
            changed
        });
    }
}

impl Drop for Notifier {
    /// Stops the sender task; the poller thread ends at its next send or poll.
    fn drop(&mut self) {
        self.sender.abort();
    }
}

struct Watched {
    writer: Arc<dyn ZoneWriter>,
    mark: Option<u64>,
    serials: HashMap<Name, u32>,
    primed: bool,
}

impl Watched {
    fn new(writer: Arc<dyn ZoneWriter>) -> Watched {
        Watched {
            writer,
            mark: None,
            serials: HashMap::new(),
            primed: false,
        }
    }
}

/// Polls the write sides of the current settings every [`POLL_INTERVAL`]
/// until the sender task is gone. One that stays in the settings keeps its
/// state; one that leaves them is forgotten; with no target nothing is polled.
fn poll_loop(
    settings: watch::Receiver<NotifySettings>,
    tx: mpsc::Sender<SerialChange>,
    wake: &NotifyWake,
) {
    let mut watched: Vec<Watched> = Vec::new();
    loop {
        let (writers, active) = {
            let s = settings.borrow();
            (s.writers.clone(), !s.config.is_empty())
        };
        if !active {
            watched.clear();
        } else if watched.len() != writers.len()
            || watched
                .iter()
                .zip(&writers)
                .any(|(w, d)| !Arc::ptr_eq(&w.writer, d))
        {
            let mut old = std::mem::take(&mut watched);
            for writer in writers {
                match old.iter().position(|w| Arc::ptr_eq(&w.writer, &writer)) {
                    Some(i) => watched.push(old.swap_remove(i)),
                    None => watched.push(Watched::new(writer)),
                }
            }
            // A write side a reload made anew for the same storage (a
            // memory source rebuilt from its master files, a DB reopened)
            // takes over the serials its predecessor saw: a zone the reload
            // moved to a new serial is announced.
            for w in watched.iter_mut().filter(|w| !w.primed) {
                let name = w.writer.describe();
                if let Some(i) = old
                    .iter()
                    .position(|o| o.primed && o.writer.describe() == name)
                {
                    let o = old.swap_remove(i);
                    w.serials = o.serials;
                    w.primed = true;
                }
            }
        }
        for w in &mut watched {
            for change in poll(w) {
                if tx.blocking_send(change).is_err() {
                    return;
                }
            }
        }
        if tx.is_closed() {
            return;
        }
        wake.wait(POLL_INTERVAL);
    }
}

/// One poll of one write side: the zones whose serial changed since the
/// last poll.
fn poll(w: &mut Watched) -> Vec<SerialChange> {
    let mark = match w.writer.change_mark() {
        Ok(m) => m,
        Err(e) => {
            tracing::debug!("NOTIFY poll of {}: {e}", w.writer.describe());
            return Vec::new();
        }
    };
    if w.mark == Some(mark) {
        return Vec::new();
    }
    let soas = match w.writer.apex_soas() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("NOTIFY poll of {}: {e}", w.writer.describe());
            return Vec::new();
        }
    };
    w.mark = Some(mark);
    let mut changes = Vec::new();
    for (origin, ttl, soa) in soas {
        let Some(serial) = soa.soa_serial() else {
            continue;
        };
        let old = w.serials.insert(origin.clone(), serial);
        if let Some(old) = old
            && old != serial
            && w.primed
        {
            changes.push(SerialChange {
                origin,
                ttl,
                soa,
                old_serial: old,
            });
        }
    }
    w.primed = true;
    changes
}

/// A message id that is hard to guess (RFC 5452 §9.2 spirit).
pub(crate) fn random_id() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish() as u16
}

/// The local address a NOTIFY to `target` is sent from: loopback for a
/// loopback target, else the unspecified address of its family.
fn source_for(target: SocketAddr) -> SocketAddr {
    let ip = match target.ip() {
        IpAddr::V4(a) if a.is_loopback() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(a) if a.is_loopback() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    SocketAddr::new(ip, 0)
}

/// Sends one NOTIFY to `target`, signed with `key` if given, with retries;
/// logs the outcome.
async fn notify_one(change: SerialChange, target: SocketAddr, key: Option<Key>) {
    let serial = change.soa.soa_serial().unwrap_or_default();
    let sock = match UdpSocket::bind(source_for(target)).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("NOTIFY of {} to {target}: cannot bind: {e}", change.origin);
            return;
        }
    };
    let id = random_id();
    let mut msg = notify_message(id, &change.origin, change.ttl, &change.soa);
    let signed = key
        .as_ref()
        .map(|k| (k, tsig::sign_request(k, &mut msg, tsig::now())));
    let mut timeout = FIRST_TIMEOUT;
    let mut buf = vec![0u8; 4096];
    for attempt in 1..=MAX_TRIES {
        if let Err(e) = sock.send_to(&msg, target).await {
            tracing::debug!("NOTIFY of {} to {target}: send: {e}", change.origin);
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, sock.recv_from(&mut buf)).await {
                Err(_) => break,
                Ok(Err(e)) => {
                    // E.g. ICMP port unreachable from an earlier send.
                    tracing::debug!("NOTIFY of {} to {target}: {e}", change.origin);
                    tokio::time::sleep_until(deadline).await;
                    break;
                }
                Ok(Ok((n, from))) => {
                    let reply = buf.get(..n).unwrap_or_default();
                    if from == target && is_reply_to(reply, id, &change.origin) {
                        let rcode = reply.get(3).map_or(0, |b| b & 0xF);
                        if let Some((k, mac)) = &signed {
                            match tsig::verify_reply(k, mac, reply, tsig::now()) {
                                Ok(()) => {}
                                Err(ReplyProblem::Error(e)) => {
                                    tracing::warn!(
                                        "NOTIFY of {} serial {serial} to {target}: refused with TSIG error {e} for key {} (rcode {rcode})",
                                        change.origin,
                                        k.name
                                    );
                                    return;
                                }
                                Err(problem) => {
                                    tracing::debug!(
                                        "NOTIFY of {} to {target}: reply ignored: {problem}",
                                        change.origin
                                    );
                                    continue;
                                }
                            }
                        }
                        if let Some(why) = refused(
                            &change.origin,
                            serial,
                            target,
                            rcode,
                            key.as_ref().map(|k| &k.name),
                        ) {
                            tracing::warn!("{why}");
                            return;
                        }
                        let how = match &signed {
                            Some((k, _)) => format!(", signed with key {}", k.name),
                            None => String::new(),
                        };
                        tracing::info!(
                            "NOTIFY of {} serial {serial} to {target}: answered (rcode {rcode}, try {attempt}{how})",
                            change.origin
                        );
                        return;
                    }
                }
            }
        }
        timeout *= 2;
    }
    tracing::warn!(
        "NOTIFY of {} serial {serial} to {target}: no answer after {MAX_TRIES} tries",
        change.origin
    );
}

/// The warning for a reply to the NOTIFY of `origin` at `serial` sent to
/// `target` (signed with `key`, if any) that refuses it (rcode REFUSED or
/// NOTAUTH), naming the likely causes; `None` for another rcode.
fn refused(
    origin: &Name,
    serial: u32,
    target: SocketAddr,
    rcode: u8,
    key: Option<&Name>,
) -> Option<String> {
    let name = match Rcode(u16::from(rcode)) {
        Rcode::REFUSED => "REFUSED",
        Rcode::NOTAUTH => "NOTAUTH",
        _ => return None,
    };
    let keyed = match key {
        Some(k) => format!("or expect another key than {k}"),
        None => format!(
            "or expect a TSIG key: give the target a key with \"{target} key NAME\" in [notify]"
        ),
    };
    Some(format!(
        "NOTIFY of {origin} serial {serial} to {target}: the secondary refused it (rcode {rcode} \
         {name}): it may not serve {origin} as a secondary, not list this server as a primary, \
         {keyed}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_shape() {
        let origin: Name = "example.org.".parse().expect("name");
        let soa = Rdata::from_text(RType::SOA, "ns hm 7 1 2 3 4", &origin).expect("soa");
        let m = notify_message(0x1234, &origin, 300, &soa);
        assert_eq!(&m[0..2], &[0x12, 0x34]);
        // opcode 4, AA, QR clear; one question, one answer.
        assert_eq!(m[2], 0x24);
        assert_eq!(&m[4..8], &[0, 1, 0, 1]);
        let mut reply = m.clone();
        reply[2] |= 0x80;
        assert!(is_reply_to(&reply, 0x1234, &origin));
        assert!(!is_reply_to(&m, 0x1234, &origin));
        assert!(!is_reply_to(&reply, 0x1235, &origin));
        assert_eq!(
            source_for("127.0.0.1:53".parse().expect("a")).ip(),
            Ipv4Addr::LOCALHOST
        );
    }

    /// A REFUSED or NOTAUTH reply is a warning naming the causes; the hint
    /// for an unsigned NOTIFY is a key, for a signed one another key.
    #[test]
    fn refusals_name_the_likely_cause() {
        let origin: Name = "example.org.".parse().expect("name");
        let target: SocketAddr = "192.0.2.2:53".parse().expect("addr");
        assert_eq!(
            refused(&origin, 5, target, 5, None).as_deref(),
            Some(
                "NOTIFY of example.org. serial 5 to 192.0.2.2:53: the secondary refused it \
                 (rcode 5 REFUSED): it may not serve example.org. as a secondary, not list this \
                 server as a primary, or expect a TSIG key: give the target a key with \
                 \"192.0.2.2:53 key NAME\" in [notify]"
            )
        );
        let key: Name = "tk.".parse().expect("name");
        let signed = refused(&origin, 5, target, 9, Some(&key)).expect("NOTAUTH");
        assert!(
            signed.ends_with(
                "(rcode 9 NOTAUTH): it may not serve example.org. as a secondary, not list this \
                 server as a primary, or expect another key than tk."
            ),
            "{signed}"
        );
        assert_eq!(refused(&origin, 5, target, 0, None), None);
        assert_eq!(refused(&origin, 5, target, 2, None), None);
    }
}
