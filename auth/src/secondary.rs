//! The secondary role: zones followed from primaries (`[[secondary]]`).
//!
//! A [`Refresher`] task keeps each secondary zone's timers (RFC 1035 §4.3.5):
//! at each refresh it asks the primaries, in order, for the zone's SOA; when
//! a primary's serial is greater than ours (RFC 1982, [`serial_gt`]) or we
//! have no copy, the zone is transferred ([`crate::xfrin`]): by IXFR (RFC
//! 1995) when we have a copy — differences applied and appended to the
//! `diffs` journal, so downstream secondaries get IXFR from us, or the whole
//! zone when the primary answers AXFR-style — and by AXFR (RFC 5936) when we
//! have none or the IXFR fails; each transfer is written into its DB in one
//! transaction, which the served sqlite3 source
//! sees at once (and the NOTIFY poller announces downstream). Success sets
//! the next refresh after the SOA REFRESH, failure of every primary after
//! the SOA RETRY, both bounded by `min_refresh`/`max_refresh`. When no
//! primary has answered for the SOA EXPIRE since the last success, the zone
//! expires: its queries get SERVFAIL ([`ExpiredZones`]) until a refresh
//! succeeds again. A NOTIFY from a primary ([`SecondaryPolicy::notify`],
//! RFC 1996 §3.11) makes the refresh due at once.
//!
//! Zones are refreshed one at a time by one task; NOTIFYs that arrive
//! meanwhile are merged into one refresh per zone. The SOA query goes over
//! TCP, like the transfers.
//!
//! Every write goes through the zone's write side, found by origin in the
//! served [`SourceList`] ([`SourceList::writer`]): the transfers, and the
//! timer state, which survives a restart: the time of the last successful
//! refresh, whether the zone expired and whether a NOTIFY's refresh is
//! still to do ([`SecondaryState`]; sqlite3 keeps it in `authd_secondary`,
//! a table of `migrations/`, ignored by BIND 10). At start a zone refreshed
//! less than REFRESH ago waits for its timer instead of being transferred
//! again, an expired one stays unserved until a refresh succeeds, and one
//! whose NOTIFY-triggered refresh was interrupted (a crash mid-transfer; the
//! primary will not NOTIFY again) is refreshed at once. A copy with no
//! refresh on record (written by another tool) is refreshed at once, and its
//! expire clock starts at start-up.
//!
//! Every step is logged with the zone, the primary, the serials and the
//! outcome; the next event is logged after each refresh.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use authd_datasrc::sqlite::SqliteWriter;
use authd_datasrc::write::{SecondaryState, serial_gt};
use authd_datasrc::{Name, RType, SourceList, ZoneWriter};
use serde::Deserialize;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::acl::Acl;
use crate::keys::KeyRing;
use crate::metrics::{Metrics, TransferInResult};
use crate::notify::NotifyTarget;
use crate::settings::{
    Context, Invalid, Kind, Schema, Section, parse_origin, string_or_list, whole,
};
use crate::tls::{PrimaryTls, TlsClients};
use crate::xfrin::{self, Primary, XfrError};

/// The zones whose copies have expired (RFC 1035 §4.3.5): their queries get
/// SERVFAIL. Shared by the refresher (which writes it) and every dispatcher
/// snapshot (which reads it); reading costs one atomic load while no zone
/// is expired.
#[derive(Debug, Default)]
pub struct ExpiredZones {
    any: AtomicBool,
    zones: RwLock<Vec<Name>>,
}

impl ExpiredZones {
    /// True when `qname` is at or below an expired zone's apex (it may
    /// still belong to a zone below that one, served from elsewhere).
    pub fn covers(&self, qname: &Name) -> bool {
        if !self.any.load(Ordering::Relaxed) {
            return false;
        }
        self.zones
            .read()
            .map(|z| z.iter().any(|o| qname.is_subdomain_of(o)))
            .unwrap_or(false)
    }

    /// True when zone `origin` itself is expired.
    pub fn contains(&self, origin: &Name) -> bool {
        self.any.load(Ordering::Relaxed)
            && self
                .zones
                .read()
                .map(|z| z.contains(origin))
                .unwrap_or(false)
    }

    /// Marks zone `origin` expired (`true`) or served (`false`).
    pub fn set(&self, origin: &Name, expired: bool) {
        let Ok(mut zones) = self.zones.write() else {
            return;
        };
        zones.retain(|z| z != origin);
        if expired {
            zones.push(origin.clone());
        }
        self.any.store(!zones.is_empty(), Ordering::Relaxed);
    }
}

/// A primary as a NOTIFY sender: its address and the key it must sign with
/// (`None`: unsigned NOTIFYs accepted).
pub type NotifySender = (IpAddr, Option<Name>);

/// A copy's SOA: SERIAL and (REFRESH, RETRY, EXPIRE), seconds.
type SoaState = (u32, (u32, u32, u32));

/// What the dispatcher needs of the secondary role: which zones are
/// secondary and who may NOTIFY them, where to send a NOTIFY's wake-up, and
/// which zones have expired.
#[derive(Debug, Clone, Default)]
pub struct SecondaryPolicy {
    /// Each secondary zone and its primaries (address, key).
    pub zones: Vec<(Name, Vec<NotifySender>)>,
    /// Others allowed to NOTIFY (`[notify] allow`).
    pub allow: Acl,
    /// Wakes the refresher for a zone (`None`: no refresher running).
    pub wake: Option<mpsc::UnboundedSender<Name>>,
    /// The expired zones.
    pub expired: Arc<ExpiredZones>,
}

/// The answer to a NOTIFY ([`SecondaryPolicy::notify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotifyVerdict {
    /// Accepted: answer NOERROR with AA (RFC 1996 §4.7); a refresh is due.
    Accepted,
    /// Not a secondary zone of ours.
    NotSecondary,
    /// The sender is neither a primary of the zone nor allowed by `[notify] allow`.
    NotAllowed,
}

impl SecondaryPolicy {
    /// Whether `zone` is one of the secondary zones (its data is the
    /// primary's: an UPDATE for it is refused, as BIND 9 does without
    /// update forwarding).
    pub fn is_secondary(&self, zone: &Name) -> bool {
        self.zones.iter().any(|(o, _)| o == zone)
    }

    /// Handles a NOTIFY for `zone` from `peer`, signed with `key` (verified;
    /// `None`: unsigned). Accepted from a primary's address when the primary
    /// has no key; for a primary with a key, when signed with that key, from
    /// whatever address (RFC 1996 §3.10 asks for a known primary; the key
    /// identifies it better than the source address); or from `[notify]
    /// allow`. An accepted NOTIFY wakes the zone's refresh.
    pub fn notify(&self, zone: &Name, peer: IpAddr, key: Option<&Name>) -> NotifyVerdict {
        let Some((origin, primaries)) = self.zones.iter().find(|(o, _)| o == zone) else {
            return NotifyVerdict::NotSecondary;
        };
        // From a primary's address (with its key, when it has one), or signed
        // with a primary's key from any address: a multi-homed primary's
        // NOTIFY may leave from another address than the one we transfer
        // from, and the verified key already names it.
        let from_primary = primaries.iter().any(|(ip, k)| match k {
            None => *ip == peer,
            Some(k) => Some(k) == key,
        });
        // NOTIFY comes over UDP (RFC 1996): an entry requiring TLS admits none.
        if !from_primary && !self.allow.allows(peer, key, false) {
            return NotifyVerdict::NotAllowed;
        }
        if let Some(wake) = &self.wake {
            let _ = wake.send(origin.clone());
        }
        NotifyVerdict::Accepted
    }
}

/// Default lower bound of the SOA refresh and retry intervals, seconds.
pub const DEFAULT_MIN_REFRESH: u32 = 60;
/// Default upper bound of the SOA refresh and retry intervals, seconds.
pub const DEFAULT_MAX_REFRESH: u32 = 86_400;

/// One `[[secondary]]`: a zone authd follows from its primaries by zone
/// transfer (RFC 5936, RFC 1995) and serves from a BIND 10 sqlite3 DB.
///
/// ```toml
/// [[secondary]]
/// zone = "example.com."
/// primaries = ["192.0.2.1:53 key transfer-key.", "192.0.2.2"]   # in order
/// # over TLS (RFC 9103): "192.0.2.3:853 tls" (opportunistic),
/// # "192.0.2.3:853 tls ns1.example.net key transfer-key." (strict, `[tls] ca`)
/// file = "secondary.sqlite3"   # created if missing; may hold several zones
/// min_refresh = 60             # bounds on the SOA refresh/retry, seconds
/// max_refresh = 86400
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondaryZone {
    /// The zone apex.
    pub origin: Name,
    /// The primaries, tried in order: the address a NOTIFY may come from,
    /// whether to reach it over TLS, and the `[[key]]` to sign requests with.
    pub primaries: Vec<PrimaryConfig>,
    /// The zone DB the transferred zone is written to and served from (or,
    /// with `memory`, kept in for restarts).
    pub file: PathBuf,
    /// Served from memory (`memory = true`): each transfer is written to
    /// `file` and the zone's snapshot rebuilt from it.
    pub memory: bool,
    /// Lower bound of the refresh and retry intervals taken from the SOA, seconds.
    pub min_refresh: u32,
    /// Upper bound of the refresh and retry intervals taken from the SOA, seconds.
    pub max_refresh: u32,
    /// The zone is a catalog zone (`catalog = true`, RFC 9432): its
    /// members are served as secondary zones too ([`crate::catalog::consumer`]).
    pub catalog: bool,
    /// For a member of a catalog zone: that catalog and the member's unique
    /// label there (`None`: configured). A new label is a new zone to the
    /// refresher (RFC 9432 §5.5: reset).
    pub member_of: Option<(Name, String)>,
}

/// One primary of a `[[secondary]]`, as written `"ADDR[:PORT] [tls [NAME]]
/// [key NAME]"`: its address (port 53, or 853 over TLS, when none is
/// given), over TLS or not ([`crate::tls`]), and the key requests are
/// signed with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrimaryConfig {
    /// Where to connect; NOTIFYs from its address are accepted.
    pub addr: SocketAddr,
    /// Reached over TLS, opportunistic or strict; `None`: plain TCP.
    pub tls: Option<PrimaryTls>,
    /// The `[[key]]` to sign requests with; `None`: unsigned.
    pub key: Option<Name>,
}

impl std::fmt::Display for PrimaryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.addr)?;
        if let Some(tls) = &self.tls {
            write!(f, " {tls}")?;
        }
        if let Some(k) = &self.key {
            write!(f, " key {k}")?;
        }
        Ok(())
    }
}

impl PrimaryConfig {
    /// Parses `s` (`at` names it in messages): the address, then `tls` or
    /// `tls NAME`, then `key NAME`, each optional but the address; the key
    /// must be a `[[key]]` of `cx`.
    ///
    /// Errors: another form, a bad name to verify, an unknown key.
    pub fn parse(at: &str, s: &str, cx: &Context<'_>) -> Result<PrimaryConfig, Invalid> {
        let words: Vec<&str> = s.split_whitespace().collect();
        let bad = |why: String| {
            Invalid::new(
                at,
                format!(
                    "{s:?}: {why} (a primary is \"ADDR[:PORT] [tls [NAME]] [key NAME]\", e.g. \
                     \"192.0.2.1\", \"192.0.2.1:853 tls ns1.example.net key transfer-key.\")"
                ),
            )
        };
        let Some((&addr, rest)) = words.split_first() else {
            return Err(bad("empty".into()));
        };
        let (tls, used) = crate::tls::parse_primary_tls(rest).map_err(bad)?;
        let rest = rest.get(used..).unwrap_or_default();
        // Without a port: 853 over TLS (RFC 7858 §3.1), else 53.
        let addr = match (&tls, addr.parse::<IpAddr>()) {
            (Some(_), Ok(ip)) => SocketAddr::new(ip, 853).to_string(),
            _ => addr.to_string(),
        };
        let plain = std::iter::once(addr.as_str())
            .chain(rest.iter().copied())
            .collect::<Vec<_>>()
            .join(" ");
        let target = NotifyTarget::parse(at, &plain, cx)?;
        Ok(PrimaryConfig {
            addr: target.addr,
            tls,
            key: target.key,
        })
    }
}

/// One `[[secondary]]` table as written; the section is the list of them.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSecondary {
    zone: Option<String>,
    #[serde(default, deserialize_with = "string_or_list")]
    primaries: Option<Vec<String>>,
    file: Option<PathBuf>,
    memory: Option<bool>,
    #[serde(default, deserialize_with = "whole")]
    min_refresh: Option<u32>,
    #[serde(default, deserialize_with = "whole")]
    max_refresh: Option<u32>,
    catalog: Option<bool>,
}

impl Section for Vec<RawSecondary> {
    type Value = Vec<SecondaryZone>;

    const SCHEMA: Schema = &[(
        "secondary[]",
        &[
            ("zone", Kind::Text),
            ("primaries", Kind::List),
            ("file", Kind::Text),
            ("memory", Kind::Bool),
            ("min_refresh", Kind::Whole),
            ("max_refresh", Kind::Whole),
            ("catalog", Kind::Bool),
        ],
    )];

    /// Each zone once, at least one primary (parsed as NOTIFY targets are:
    /// `ADDR[:PORT] [key NAME]`), a DB file (relative to the file's folder),
    /// refresh bounds with `min_refresh <= max_refresh`.
    fn check(self, cx: &Context<'_>) -> Result<Vec<SecondaryZone>, Invalid> {
        let mut out: Vec<SecondaryZone> = Vec::new();
        for (i, z) in self.into_iter().enumerate() {
            let at = |k: &str| format!("secondary[{i}].{k}");
            let Some(text) = z.zone else {
                return Err(Invalid::new(at("zone"), "missing"));
            };
            let origin = parse_origin(&text).map_err(|r| Invalid::new(at("zone"), r))?;
            if out.iter().any(|s| s.origin == origin) {
                return Err(Invalid::new(
                    at("zone"),
                    format!("zone {origin} is listed twice in [[secondary]]"),
                ));
            }
            let list = z.primaries.unwrap_or_default();
            if list.is_empty() {
                return Err(Invalid::new(
                    at("primaries"),
                    "must name at least one primary (\"ADDR[:PORT] [tls [NAME]] [key NAME]\")",
                ));
            }
            let mut primaries = Vec::with_capacity(list.len());
            for (j, p) in list.iter().enumerate() {
                primaries.push(PrimaryConfig::parse(
                    &at(&format!("primaries[{j}]")),
                    p,
                    cx,
                )?);
            }
            let file = match z.file {
                None => return Err(Invalid::new(at("file"), "missing")),
                Some(f) if f.as_os_str().is_empty() => {
                    return Err(Invalid::new(at("file"), "is empty"));
                }
                Some(f) => cx.resolve(f),
            };
            let min_refresh = z.min_refresh.unwrap_or(DEFAULT_MIN_REFRESH);
            let max_refresh = z.max_refresh.unwrap_or(DEFAULT_MAX_REFRESH);
            if min_refresh == 0 || min_refresh > max_refresh {
                return Err(Invalid::new(
                    at("min_refresh"),
                    format!(
                        "{min_refresh} must be at least 1 and at most max_refresh ({max_refresh})"
                    ),
                ));
            }
            out.push(SecondaryZone {
                origin,
                primaries,
                file,
                memory: z.memory.unwrap_or(false),
                min_refresh,
                max_refresh,
                catalog: z.catalog.unwrap_or(false),
                member_of: None,
            });
        }
        Ok(out)
    }
}

/// The secondary zones, the keys their primaries use, and the sources
/// serving them (whose write sides take the transfers).
#[derive(Clone, Default)]
pub struct SecondarySettings {
    /// `[[secondary]]`.
    pub zones: Vec<SecondaryZone>,
    /// `[[key]]`.
    pub keys: KeyRing,
    /// The TLS client configurations (`[tls] ca`), for primaries over TLS.
    pub tls: TlsClients,
    /// The sources served (the zones' writers are found here by origin).
    pub sources: SourceList,
}

impl PartialEq for SecondarySettings {
    fn eq(&self, other: &SecondarySettings) -> bool {
        self.zones == other.zones
            && self.keys == other.keys
            && self.tls.same(&other.tls)
            && self.sources.same_sources(&other.sources)
    }
}

/// The running refresher: one task for every secondary zone. Its settings
/// can be replaced while it runs ([`Refresher::update`], on reload). Dropping
/// it stops the task.
pub struct Refresher {
    settings: watch::Sender<SecondarySettings>,
    wake: mpsc::UnboundedSender<Name>,
    expired: Arc<ExpiredZones>,
    task: tokio::task::JoinHandle<()>,
    /// Catalog zones (`catalog = true`) whose content a transfer changed,
    /// until taken by [`Refresher::catalog_changes`].
    catalogs: std::sync::Mutex<Option<mpsc::UnboundedReceiver<Name>>>,
}

impl Refresher {
    /// Starts refreshing the zones of `settings`. Must be called inside a
    /// tokio runtime. The zones stored as expired are marked so before it
    /// returns (a short read of each DB), so not one query is answered from
    /// them.
    /// Each refresh is counted in `metrics` when given.
    pub fn spawn(settings: SecondarySettings, metrics: Option<Arc<Metrics>>) -> Refresher {
        let expired = Arc::new(ExpiredZones::default());
        // Each zone's stored state, read once: it marks the expired zones
        // now and gives the task its first timers.
        let initial = settings
            .zones
            .iter()
            .map(|z| {
                let writer = writer_for(&settings.sources, &z.origin);
                (z.origin.clone(), timers_for(z.clone(), writer, &expired))
            })
            .collect();
        let (settings_tx, settings_rx) = watch::channel(settings);
        let (wake_tx, wake_rx) = mpsc::unbounded_channel();
        let (catalogs_tx, catalogs_rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(
            initial,
            settings_rx,
            wake_rx,
            Arc::clone(&expired),
            (metrics, catalogs_tx),
        ));
        Refresher {
            settings: settings_tx,
            wake: wake_tx,
            expired,
            task,
            catalogs: std::sync::Mutex::new(Some(catalogs_rx)),
        }
    }

    /// The origins of the catalog zones (`catalog = true`) whose content a
    /// transfer changed, one message per transfer; `None` after the first
    /// call.
    pub fn catalog_changes(&self) -> Option<mpsc::UnboundedReceiver<Name>> {
        self.catalogs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Replaces the zones and keys; zones kept keep their timers.
    pub fn update(&self, settings: SecondarySettings) {
        self.settings.send_if_modified(|current| {
            let changed = *current != settings;
            *current = settings;
            changed
        });
    }

    /// The dispatcher's view of `zones`, NOTIFYs also allowed from `allow`.
    pub fn policy(&self, zones: &[SecondaryZone], allow: &Acl) -> SecondaryPolicy {
        SecondaryPolicy {
            zones: zones
                .iter()
                .map(|z| {
                    let primaries = z
                        .primaries
                        .iter()
                        .map(|p| (p.addr.ip(), p.key.clone()))
                        .collect();
                    (z.origin.clone(), primaries)
                })
                .collect(),
            allow: allow.clone(),
            wake: Some(self.wake.clone()),
            expired: Arc::clone(&self.expired),
        }
    }
}

impl Drop for Refresher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One zone's timers.
struct ZoneTimers {
    config: SecondaryZone,
    /// The zone's write side (`None`: no source serves it; every refresh
    /// fails until a reload gives one).
    writer: Option<Arc<dyn ZoneWriter>>,
    /// A NOTIFY's refresh is still to do (stored: retried at start).
    pending: bool,
    /// Our serial (`None`: no copy).
    serial: Option<u32>,
    /// SOA REFRESH, RETRY, EXPIRE of our copy, seconds.
    soa_timers: Option<(u32, u32, u32)>,
    /// Unix time of the last successful refresh.
    last_ok: Option<u64>,
    expired: bool,
    next: Instant,
}

impl ZoneTimers {
    /// `secs` bounded by the zone's `min_refresh`/`max_refresh`.
    fn bounded(&self, secs: u32) -> Duration {
        Duration::from_secs(u64::from(
            secs.clamp(self.config.min_refresh, self.config.max_refresh),
        ))
    }

    fn refresh_interval(&self) -> Duration {
        self.bounded(self.soa_timers.map_or(0, |t| t.0))
    }

    fn retry_interval(&self) -> Duration {
        self.bounded(self.soa_timers.map_or(0, |t| t.1))
    }
}

/// The write side of secondary zone `origin` in `sources`.
fn writer_for(sources: &SourceList, origin: &Name) -> Option<Arc<dyn ZoneWriter>> {
    match sources.writer(origin) {
        Ok(Some(w)) => Some(w),
        Ok(None) => {
            tracing::warn!("secondary zone {origin}: no source that takes writes serves it");
            None
        }
        Err(e) => {
            tracing::warn!("secondary zone {origin}: {e}");
            None
        }
    }
}

/// Reads zone `origin`'s copy (the primary's serial of it, and its timers)
/// and stored state.
fn load_state(
    writer: &dyn ZoneWriter,
    origin: &Name,
) -> Result<(Option<SoaState>, SecondaryState), String> {
    // A zone authd signs is known to its primaries by the serial of the
    // unsigned version it was made from; re-signing moves the SOA's.
    let input = writer.input_serial(origin).map_err(|e| e.to_string())?;
    let soa = writer
        .soa(origin)
        .map_err(|e| e.to_string())?
        .and_then(|r| Some((input.or(r.rdata.soa_serial())?, r.rdata.soa_timers()?)));
    let state = writer
        .secondary_state(origin)
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    Ok((soa, state))
}

/// Creates every secondary zone's DB (2.2 schema) if missing, so the sqlite3
/// sources serving them can open it before the first transfer.
///
/// Errors: the first DB that cannot be created or opened, with its path.
pub fn prepare_dbs(zones: &[SecondaryZone]) -> Result<(), String> {
    for z in zones {
        SqliteWriter::create(&z.file).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Timers for zone `config`, from its stored copy and state.
fn timers_for(
    config: SecondaryZone,
    writer: Option<Arc<dyn ZoneWriter>>,
    expired_zones: &ExpiredZones,
) -> ZoneTimers {
    let now = Instant::now();
    let read = match &writer {
        Some(w) => load_state(w.as_ref(), &config.origin),
        None => Err("no write side".to_string()),
    };
    let (soa, state) = match read {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(
                "secondary zone {}: cannot read its state: {e}",
                config.origin
            );
            (None, SecondaryState::default())
        }
    };
    let mut t = ZoneTimers {
        serial: soa.map(|s| s.0),
        soa_timers: soa.map(|s| s.1),
        last_ok: state.last_ok,
        expired: state.expired,
        pending: state.pending,
        next: now,
        config,
        writer,
    };
    if t.pending {
        tracing::info!(
            "secondary zone {}: the refresh a NOTIFY asked for did not finish; refreshing now",
            t.config.origin
        );
    } else if let (Some(last), Some(_), false) = (t.last_ok, t.serial, t.expired) {
        // Due REFRESH after the last success (now, if that has passed).
        let since = Duration::from_secs(crate::sys::unix_seconds().saturating_sub(last));
        t.next = now + t.refresh_interval().saturating_sub(since);
    }
    if t.serial.is_some() && t.last_ok.is_none() {
        // A copy with no refresh on record (put there by another writer):
        // its expire clock starts now.
        t.last_ok = Some(crate::sys::unix_seconds());
    }
    expired_zones.set(&t.config.origin, t.expired);
    tracing::info!(
        "secondary zone {}: serial {}, {}, refresh in {}s",
        t.config.origin,
        t.serial.map_or("none".into(), |s| s.to_string()),
        if t.expired { "expired" } else { "not expired" },
        t.next.saturating_duration_since(now).as_secs()
    );
    t
}

/// The refresher task: `zones` starts with the timers read at spawn; a new
/// `settings` adds and drops zones (kept zones keep their timers).
async fn run(
    mut zones: HashMap<Name, ZoneTimers>,
    mut settings: watch::Receiver<SecondarySettings>,
    mut wake: mpsc::UnboundedReceiver<Name>,
    expired: Arc<ExpiredZones>,
    (metrics, catalogs): (Option<Arc<Metrics>>, mpsc::UnboundedSender<Name>),
) {
    let mut keys = KeyRing::default();
    let mut tls = TlsClients::default();
    let mut reread = true;
    loop {
        if reread {
            let s = settings.borrow_and_update().clone();
            keys = s.keys;
            tls = s.tls;
            let mut kept = HashMap::new();
            for z in s.zones {
                let writer = writer_for(&s.sources, &z.origin);
                let timers = match zones.remove(&z.origin) {
                    Some(mut t) if t.config.file == z.file && t.config.member_of == z.member_of => {
                        t.config = z;
                        t.writer = writer;
                        t
                    }
                    _ => {
                        let e = Arc::clone(&expired);
                        match tokio::task::spawn_blocking(move || timers_for(z, writer, &e)).await {
                            Ok(t) => t,
                            Err(_) => continue,
                        }
                    }
                };
                kept.insert(timers.config.origin.clone(), timers);
            }
            for gone in zones.keys() {
                expired.set(gone, false);
            }
            zones = kept;
            reread = false;
        }
        let next = zones.values().map(|t| t.next).min();
        let sleep = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = settings.changed() => {
                if changed.is_err() {
                    return;
                }
                reread = true;
            }
            Some(origin) = wake.recv() => {
                // NOTIFYs queued during a refresh make one refresh each zone.
                let mut woken = vec![origin];
                while let Ok(more) = wake.try_recv() {
                    if !woken.contains(&more) {
                        woken.push(more);
                    }
                }
                for origin in woken {
                    if let Some(t) = zones.get_mut(&origin) {
                        tracing::info!("secondary zone {origin}: NOTIFY received, refreshing now");
                        t.next = Instant::now();
                        if !t.pending {
                            // Stored first: a crash during the transfer
                            // retries it at start.
                            t.pending = true;
                            save(t).await;
                        }
                    }
                }
            }
            () = sleep => {
                let now = Instant::now();
                for t in zones.values_mut().filter(|t| t.next <= now) {
                    let before = t.serial;
                    refresh(t, (&keys, &tls), &expired, metrics.as_deref()).await;
                    if t.config.catalog && t.serial != before {
                        let _ = catalogs.send(t.config.origin.clone());
                    }
                }
            }
        }
    }
}

/// The primaries of `z` with their keys and TLS client configurations (a
/// strict-TLS primary without `[tls] ca`, which the configuration refuses,
/// is left out).
fn primaries(z: &SecondaryZone, (keys, tls): (&KeyRing, &TlsClients)) -> Vec<Primary> {
    z.primaries
        .iter()
        .filter_map(|p| {
            let tls = match &p.tls {
                None => None,
                Some(how) => Some((tls.for_primary(how)?, how.clone())),
            };
            Some(Primary {
                addr: p.addr,
                key: p.key.as_ref().and_then(|k| keys.get(k)).cloned(),
                tls,
            })
        })
        .collect()
}

/// One refresh of zone `t`: each primary in order until one answers.
async fn refresh(
    t: &mut ZoneTimers,
    creds: (&KeyRing, &TlsClients),
    expired_zones: &ExpiredZones,
    metrics: Option<&Metrics>,
) {
    let origin = t.config.origin.clone();
    let before = t.serial;
    let mut result = Err(String::from("no primary"));
    for primary in primaries(&t.config, creds) {
        match refresh_from(t, &primary).await {
            Ok(()) => {
                result = Ok(());
                break;
            }
            Err(e) => {
                if e.is_storage() {
                    tracing::error!("secondary zone {origin}: refresh from {primary} failed: {e}");
                } else {
                    tracing::warn!("secondary zone {origin}: refresh from {primary} failed: {e}");
                }
                result = Err(e.to_string());
            }
        }
    }
    if let Some(m) = metrics {
        m.count_transfer_in(match &result {
            Ok(()) if t.serial != before => TransferInResult::Applied,
            Ok(()) => TransferInResult::UpToDate,
            Err(_) => TransferInResult::Failed,
        });
    }
    let now = crate::sys::unix_seconds();
    match result {
        Ok(()) => {
            t.last_ok = Some(now);
            t.pending = false;
            if t.expired {
                tracing::info!(
                    "secondary zone {origin}: a primary answered again; serving it again"
                );
            }
            t.expired = false;
            t.next = Instant::now() + t.refresh_interval();
        }
        Err(_) => {
            t.next = Instant::now() + t.retry_interval();
            let expire = t.soa_timers.map_or(0, |s| s.2);
            let over = t
                .last_ok
                .is_none_or(|l| now.saturating_sub(l) >= u64::from(expire));
            if t.serial.is_some() && over && !t.expired {
                tracing::error!(
                    "secondary zone {origin}: no primary answered for the SOA EXPIRE ({expire}s); \
                     the zone has expired and its queries get SERVFAIL"
                );
                t.expired = true;
            }
        }
    }
    expired_zones.set(&origin, t.expired);
    save(t).await;
    tracing::info!(
        "secondary zone {origin}: serial {}, next refresh in {:.0}s{}",
        t.serial.map_or("none".into(), |s| s.to_string()),
        // Rounded, not truncated: a 2 s refresh read as 1.99 s is "2s".
        t.next
            .saturating_duration_since(Instant::now())
            .as_secs_f64(),
        if t.expired { ", expired" } else { "" }
    );
}

/// Stores zone `t`'s state through its write side (off the runtime).
async fn save(t: &ZoneTimers) {
    let origin = t.config.origin.clone();
    let Some(writer) = t.writer.clone() else {
        tracing::warn!("secondary zone {origin}: cannot store its state: no write side");
        return;
    };
    let state = SecondaryState {
        last_ok: t.last_ok,
        expired: t.expired,
        pending: t.pending,
    };
    let o = origin.clone();
    match tokio::task::spawn_blocking(move || writer.save_secondary_state(&o, &state)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) if e.is_busy() => {
            tracing::warn!("secondary zone {origin}: cannot store its state: {e}")
        }
        Ok(Err(e)) => tracing::error!("secondary zone {origin}: cannot store its state: {e}"),
        Err(e) => tracing::warn!("secondary zone {origin}: cannot store its state: {e}"),
    }
}

/// The write side of `t`, or why there is none.
fn writer_of(t: &ZoneTimers) -> Result<Arc<dyn ZoneWriter>, XfrError> {
    t.writer.clone().ok_or_else(|| {
        XfrError::Store(format!(
            "no source that takes writes serves {}",
            t.config.origin
        ))
    })
}

/// Checks `primary`'s serial and transfers the zone when it is newer than
/// ours (or we have none).
async fn refresh_from(t: &mut ZoneTimers, primary: &Primary) -> Result<(), XfrError> {
    let origin = t.config.origin.clone();
    let theirs = xfrin::query_soa(primary, &origin).await?;
    if let Some(ours) = t.serial
        && !serial_gt(theirs, ours)
    {
        tracing::debug!(
            "secondary zone {origin}: {primary} has serial {theirs}, ours {ours}: up to date"
        );
        return Ok(());
    }
    let started = std::time::Instant::now();
    if let Some(ours) = t.serial {
        match ixfr_from(t, primary, ours).await {
            Ok(()) => return Ok(()),
            Err(e) if e.is_storage() => tracing::error!(
                "secondary zone {origin}: IXFR from {primary} failed: {e}; trying AXFR"
            ),
            Err(e) => tracing::warn!(
                "secondary zone {origin}: IXFR from {primary} failed: {e}; trying AXFR"
            ),
        }
    }
    let zone = xfrin::axfr(primary, &origin).await?;
    store_full(t, primary, zone, "AXFR", started).await
}

/// Catches up from serial `ours` by IXFR: differences applied and journaled,
/// or a whole zone when the primary sends one (AXFR-style).
async fn ixfr_from(t: &mut ZoneTimers, primary: &Primary, ours: u32) -> Result<(), XfrError> {
    let origin = t.config.origin.clone();
    let started = std::time::Instant::now();
    match xfrin::ixfr(primary, &origin, ours).await? {
        xfrin::Ixfr::UpToDate(theirs) => {
            tracing::info!(
                "secondary zone {origin}: IXFR from {primary}: serial {theirs}, ours {ours}: up to date"
            );
            Ok(())
        }
        xfrin::Ixfr::Full(zone) => store_full(t, primary, zone, "IXFR (AXFR-style)", started).await,
        xfrin::Ixfr::Incremental {
            diffs,
            serial,
            messages,
        } => {
            let soa = diffs.last().and_then(|d| d.new_soa.rdata.soa_timers());
            let n = diffs.len();
            let (writer, o) = (writer_of(t)?, origin.clone());
            let rows =
                tokio::task::spawn_blocking(move || xfrin::store_ixfr(writer.as_ref(), &o, &diffs))
                    .await
                    .map_err(|e| XfrError::Store(e.to_string()))??;
            tracing::info!(
                "secondary zone {origin}: IXFR from {primary}: serial {ours} -> {serial}, \
                 {n} difference(s), {rows} journal rows, {messages} message(s), {} ms",
                started.elapsed().as_millis()
            );
            t.serial = Some(serial);
            t.soa_timers = soa.or(t.soa_timers);
            Ok(())
        }
    }
}

/// Stores a whole zone received by `how` from `primary` as the zone's content.
async fn store_full(
    t: &mut ZoneTimers,
    primary: &Primary,
    zone: xfrin::Transferred,
    how: &str,
    started: std::time::Instant,
) -> Result<(), XfrError> {
    let origin = t.config.origin.clone();
    let serial = zone.serial;
    let (writer, o, p) = (writer_of(t)?, origin.clone(), primary.clone());
    let zone = Arc::new(zone);
    let z = Arc::clone(&zone);
    let written =
        tokio::task::spawn_blocking(move || xfrin::store_axfr(writer.as_ref(), &o, &z, &p))
            .await
            .map_err(|e| XfrError::Store(e.to_string()))??;
    let soa = zone
        .records
        .first()
        .filter(|r| r.rtype == RType::SOA)
        .and_then(|r| r.rdata.soa_timers());
    tracing::info!(
        "secondary zone {origin}: {how} from {primary}: serial {} -> {serial}, {written} RRs in {} message(s), {} ms",
        t.serial.map_or("none".into(), |s| s.to_string()),
        zone.messages,
        started.elapsed().as_millis()
    );
    t.serial = Some(serial);
    t.soa_timers = soa.or(t.soa_timers);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone_config(file: &std::path::Path) -> SecondaryZone {
        SecondaryZone {
            origin: "example.com.".parse().expect("origin"),
            primaries: Vec::new(),
            file: file.to_path_buf(),
            memory: false,
            min_refresh: 60,
            max_refresh: 86400,
            catalog: false,
            member_of: None,
        }
    }

    /// A copy refreshed a moment ago waits for its REFRESH; the same copy
    /// whose NOTIFY-triggered refresh was interrupted (stored as pending) is
    /// refreshed at once after a restart, since the primary will not send
    /// that NOTIFY again. The state goes through the zone's write side.
    #[test]
    fn an_interrupted_notify_refresh_is_redone_at_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("s.sqlite3");
        let writer = SqliteWriter::create(&file).expect("db");
        let origin: Name = "example.com.".parse().expect("origin");
        let zone = authd_datasrc::zonefile::parse_master_text(
            "$TTL 300\n@ SOA ns1 hm 7 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n",
            std::path::Path::new("t"),
            &origin,
        )
        .expect("zone");
        writer
            .replace_zone(
                &origin,
                &zone,
                authd_datasrc::write::JournalPolicy::Keep,
                &mut |_, _| {},
            )
            .expect("load");
        let writer: Arc<dyn ZoneWriter> = Arc::new(writer);
        let now = crate::sys::unix_seconds();
        for (pending, due_now) in [(false, false), (true, true)] {
            let state = SecondaryState {
                last_ok: Some(now),
                expired: false,
                pending,
            };
            writer.save_secondary_state(&origin, &state).expect("save");
            assert_eq!(writer.secondary_state(&origin).expect("read"), Some(state));
            let t = timers_for(
                zone_config(&file),
                Some(Arc::clone(&writer)),
                &ExpiredZones::default(),
            );
            assert_eq!(t.serial, Some(7));
            assert_eq!(t.soa_timers, Some((3600, 600, 86400)));
            let wait = t.next.saturating_duration_since(Instant::now());
            assert_eq!(
                wait < Duration::from_secs(1),
                due_now,
                "pending {pending}: {wait:?}"
            );
            if !due_now {
                assert!(
                    wait > Duration::from_secs(3000),
                    "REFRESH after the last success: {wait:?}"
                );
            }
        }
    }

    #[test]
    fn expired_zones_cover_their_names() {
        let e = ExpiredZones::default();
        let name = |s: &str| -> Name { s.parse().expect("name") };
        assert!(!e.covers(&name("www.example.com.")));
        e.set(&name("example.com."), true);
        assert!(e.covers(&name("www.example.com.")));
        assert!(e.covers(&name("example.com.")));
        assert!(!e.covers(&name("example.org.")));
        assert!(e.contains(&name("example.com.")));
        assert!(!e.contains(&name("www.example.com.")));
        e.set(&name("example.com."), false);
        assert!(!e.covers(&name("www.example.com.")));
    }

    #[test]
    fn notify_is_accepted_from_primaries_and_the_acl() {
        let name = |s: &str| -> Name { s.parse().expect("name") };
        let ip = |s: &str| -> IpAddr { s.parse().expect("ip") };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let policy = SecondaryPolicy {
            zones: vec![
                (name("example.com."), vec![(ip("192.0.2.1"), None)]),
                (
                    name("example.org."),
                    vec![(ip("192.0.2.1"), Some(name("tk.")))],
                ),
            ],
            allow: Acl::new(vec!["198.51.100.0/24".parse().expect("acl")]),
            wake: Some(tx),
            expired: Arc::default(),
        };
        let com = name("example.com.");
        let org = name("example.org.");
        assert_eq!(
            policy.notify(&com, ip("192.0.2.1"), None),
            NotifyVerdict::Accepted
        );
        assert_eq!(rx.try_recv().ok(), Some(com.clone()));
        assert_eq!(
            policy.notify(&com, ip("198.51.100.9"), None),
            NotifyVerdict::Accepted
        );
        assert_eq!(
            policy.notify(&com, ip("203.0.113.1"), None),
            NotifyVerdict::NotAllowed
        );
        assert_eq!(
            policy.notify(&org, ip("192.0.2.1"), None),
            NotifyVerdict::NotAllowed
        );
        assert_eq!(
            policy.notify(&org, ip("192.0.2.1"), Some(&name("tk."))),
            NotifyVerdict::Accepted
        );
        // Signed with the primary's key from another address (a primary
        // whose NOTIFY leaves from another of its addresses): accepted.
        assert_eq!(
            policy.notify(&org, ip("127.0.0.1"), Some(&name("tk."))),
            NotifyVerdict::Accepted
        );
        // Another key, or none, from elsewhere: refused.
        assert_eq!(
            policy.notify(&org, ip("127.0.0.1"), Some(&name("other."))),
            NotifyVerdict::NotAllowed
        );
        assert_eq!(
            policy.notify(&name("example.net."), ip("192.0.2.1"), None),
            NotifyVerdict::NotSecondary
        );
    }
}
