//! NOTIFY to secondaries (RFC 1996) when a served zone's SOA serial changes.
//!
//! A poller thread opens every served sqlite3 DB read-only and, every
//! [`POLL_INTERVAL`], reads `PRAGMA data_version` (which changes when another
//! connection commits: `loadzone`, `zone update`, an `sqlite3` shell). On a
//! change it reads every zone's SOA; a zone whose serial differs from the one
//! seen before is announced to its targets ([`crate::config::NotifyConfig`]).
//! The first poll only records the serials: starting authd sends nothing.
//!
//! Each (zone, target) gets its own task: a UDP socket bound to loopback when
//! the target is a loopback address (else to the unspecified address of the
//! target's family), a NOTIFY message (opcode 4, AA, random id, question
//! `ZONE SOA IN`, the new SOA in the answer section, RFC 1996 §3.7), and
//! retransmission per §3.6 in BIND 10's way: first timeout [`FIRST_TIMEOUT`],
//! doubled after each try, at most [`MAX_TRIES`] tries. A reply is accepted when
//! its id, QR bit, opcode and question name match (§3.8; its rcode is logged).
//!
//! A target given with a key (`"192.0.2.2 key NAME"`) gets the NOTIFY signed
//! with that `[[key]]` (RFC 8945 §5.1), and its reply must verify (§5.4): a
//! reply carrying a TSIG error (the peer does not know the key, say) ends the
//! tries with a warning naming the error; an unsigned or badly signed reply is
//! ignored, as a forged one would be.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use authd_datasrc::{Class, Name, RType, Rdata};
use rusqlite::Connection;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};

use crate::config::NotifyConfig;
use crate::keys::{Key, KeyRing};
use crate::tsig::{self, ReplyProblem};
use crate::wire::{
    Flags, Header, MAX_TCP_MESSAGE, MessageWriter, Opcode, Rcode, RecordMeta, Section,
};

/// How often the served DBs are polled for changes.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);
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
    if reply.len() < 12 || reply[0..2] != id.to_be_bytes() {
        return false;
    }
    let word = u16::from_be_bytes([reply[2], reply[3]]);
    if !Flags::from_word(word).contains(Flags::QR) || Opcode::from_word(word) != Opcode::NOTIFY {
        return false;
    }
    let want = origin.as_wire();
    reply
        .get(12..12 + want.len())
        .is_some_and(|q| q.eq_ignore_ascii_case(want))
}

/// What to watch and whom to tell: the sqlite3 DBs served and the targets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotifySettings {
    /// The sqlite3 zone DBs whose zones are announced, in data-source order.
    pub dbs: Vec<PathBuf>,
    /// The targets (`[notify]`).
    pub config: NotifyConfig,
    /// The TSIG keys the targets name (`[[key]]`).
    pub keys: KeyRing,
}

/// NOTIFY to secondaries, running: a poller thread and a sender task. Its
/// settings can be replaced while it runs ([`Notifier::update`], on reload).
/// Dropping it stops both.
pub struct Notifier {
    settings: watch::Sender<NotifySettings>,
    sender: tokio::task::JoinHandle<()>,
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
        std::thread::Builder::new()
            .name("notify-poll".into())
            .spawn(move || poll_loop(poll_settings, tx))?;
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
        })
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
    path: PathBuf,
    conn: Option<Connection>,
    data_version: Option<i64>,
    serials: HashMap<Name, u32>,
    primed: bool,
}

impl Watched {
    fn new(path: PathBuf) -> Watched {
        Watched {
            path,
            conn: None,
            data_version: None,
            serials: HashMap::new(),
            primed: false,
        }
    }
}

/// Polls the DBs of the current settings every [`POLL_INTERVAL`] until the
/// sender task is gone. A DB that stays in the settings keeps its state; one
/// that leaves them is forgotten; with no target nothing is polled.
fn poll_loop(settings: watch::Receiver<NotifySettings>, tx: mpsc::Sender<SerialChange>) {
    let mut watched: Vec<Watched> = Vec::new();
    loop {
        let (dbs, active) = {
            let s = settings.borrow();
            (s.dbs.clone(), !s.config.is_empty())
        };
        if !active {
            watched.clear();
        } else if watched.len() != dbs.len() || watched.iter().zip(&dbs).any(|(w, d)| w.path != *d)
        {
            let mut old = std::mem::take(&mut watched);
            for path in dbs {
                match old.iter().position(|w| w.path == path) {
                    Some(i) => watched.push(old.swap_remove(i)),
                    None => watched.push(Watched::new(path)),
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
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// One poll of one DB: the zones whose serial changed since the last poll.
fn poll(w: &mut Watched) -> Vec<SerialChange> {
    if w.conn.is_none() {
        match authd_migrations::open_for_serving(&w.path) {
            Ok((c, _)) => w.conn = Some(c),
            Err(e) => {
                tracing::debug!("NOTIFY poll of {}: {e}", w.path.display());
                return Vec::new();
            }
        }
    }
    let Some(conn) = &w.conn else {
        return Vec::new();
    };
    let version: Option<i64> = conn.query_row("PRAGMA data_version", [], |r| r.get(0)).ok();
    if version.is_some() && version == w.data_version {
        return Vec::new();
    }
    w.data_version = version;
    let soas = match read_soas(conn) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("NOTIFY poll of {}: {e}", w.path.display());
            w.conn = None;
            return Vec::new();
        }
    };
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

/// Every class-IN zone's apex SOA in the DB: (apex, TTL, RDATA). Rows that do
/// not parse are skipped.
fn read_soas(conn: &Connection) -> rusqlite::Result<Vec<(Name, u32, Rdata)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT z.name, r.ttl, r.rdata FROM zones z JOIN records r ON r.zone_id = z.id \
         WHERE z.rdclass = 'IN' AND r.rdtype = 'SOA' AND r.name = z.name",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, String>(2)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (name, ttl, rdata) = row?;
        let Ok(origin) = Name::parse(&name, Some(&Name::root())) else {
            continue;
        };
        let Ok(soa) = Rdata::from_text(RType::SOA, &rdata, &origin) else {
            continue;
        };
        out.push((origin, u32::try_from(ttl).unwrap_or(0), soa));
    }
    Ok(out)
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
}
