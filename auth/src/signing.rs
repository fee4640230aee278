//! Online DNSSEC signing (`[signing]`, `[[signing.zone]]`): the policy of
//! each zone signed, kept in sync with the zone's DB, and the signer thread
//! that signs what no writer of authd signed itself.
//!
//! ```toml
//! [signing]                        # defaults for every signed zone; each key optional
//! algorithm = "ecdsap256sha256"    # also "ed25519", "rsasha256" (2048-bit)
//! keys = "csk"                     # or "ksk+zsk"
//! denial = "nsec3"                 # or "nsec"; NSEC3 with 0 extra iterations, no salt (RFC 9276)
//! nsec3_opt_out = false
//! signature_validity = 1209600     # seconds
//! signature_refresh = 432000       # re-sign when less validity than this is left
//! dnskey_ttl = 3600
//! zsk_lifetime = 7776000           # seconds; 0 = never roll
//! ksk_lifetime = 0                 # KSK or CSK
//! propagation_delay = 3600         # seconds added to TTLs before a rollover step
//! parent_agents = []               # ADDR[:PORT] asked for the DS before a KSK/CSK is retired
//! [[signing.zone]]
//! origin = "example.com."          # any [signing] key may be overridden here
//! ```
//!
//! The policy is stored in the zone's DB ([`ZoneWriter::set_signing`]), so
//! every writer of the file signs alike in its own transaction: DNS UPDATE,
//! `zone update`, `zone create`, `loadzone`, incoming transfers. What no
//! writer of authd made, plain SQL edits of `records`, is logged by
//! triggers in the DB; the signer thread (`signer`, off the query path)
//! polls each DB's change mark every [`POLL_INTERVAL`] and signs those
//! edits ([`ZoneWriter::sign_pending`]: serial moved, journaled for IXFR,
//! NOTIFY sent by the notifier's poll), and every [`REFRESH_INTERVAL`]
//! re-signs a bounded batch of the signatures due for refresh in each zone.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use authd_datasrc::rr::RType;
use authd_datasrc::signer::policy::Policy;
use authd_datasrc::write::{KeyEvent, SerialPolicy};
use authd_datasrc::{Name, SourceList, ZoneWriter};
use serde::Deserialize;
use tokio::sync::watch;

use crate::settings::{
    Context, Invalid, Kind, Schema, Section, parse_origin, string_or_list, whole,
};

/// How often the signer looks for plain SQL edits (each DB's change mark).
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// How often each signed zone's signatures are checked for refresh.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(60);

/// How often a KSK/CSK rollover waiting for its DS asks the
/// `parent_agents` for it.
pub const DS_CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// How long one parent agent has to answer a DS query (TCP).
const DS_QUERY_TIMEOUT: Duration = Duration::from_secs(3);

/// One `[[signing.zone]]`: a zone and its policy (`[signing]` with the
/// zone's own keys over it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedZoneConfig {
    /// The zone's apex.
    pub origin: Name,
    /// Its policy.
    pub policy: Policy,
}

/// The `[signing]` section: the zones signed online.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SigningConfig {
    /// `[[signing.zone]]`, origins unique.
    pub zones: Vec<SignedZoneConfig>,
}

impl SigningConfig {
    /// The policy of zone `origin`, if it is signed online.
    pub fn zone(&self, origin: &Name) -> Option<&SignedZoneConfig> {
        self.zones.iter().find(|z| z.origin == *origin)
    }
}

/// A raw table with the policy keys (each optional) and `$extra` fields,
/// and its `pairs`: the keys set, as `Policy::set` takes them, in a fixed
/// order (`denial` before `nsec3_opt_out`).
macro_rules! policy_table {
    ($(#[$meta:meta])* $name:ident { $($field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $($field: $ty,)*
            algorithm: Option<String>,
            keys: Option<String>,
            denial: Option<String>,
            nsec3_opt_out: Option<bool>,
            #[serde(default, deserialize_with = "whole")]
            signature_validity: Option<u32>,
            #[serde(default, deserialize_with = "whole")]
            signature_refresh: Option<u32>,
            #[serde(default, deserialize_with = "whole")]
            dnskey_ttl: Option<u32>,
            #[serde(default, deserialize_with = "whole")]
            zsk_lifetime: Option<u32>,
            #[serde(default, deserialize_with = "whole")]
            ksk_lifetime: Option<u32>,
            #[serde(default, deserialize_with = "whole")]
            propagation_delay: Option<u32>,
            #[serde(default, deserialize_with = "string_or_list")]
            parent_agents: Option<Vec<String>>,
        }

        impl $name {
            fn pairs(&self) -> Vec<(&'static str, String)> {
                let mut out = Vec::new();
                for (k, v) in [
                    ("algorithm", &self.algorithm),
                    ("keys", &self.keys),
                    ("denial", &self.denial),
                ] {
                    if let Some(v) = v {
                        out.push((k, v.clone()));
                    }
                }
                if let Some(b) = self.nsec3_opt_out {
                    out.push(("nsec3_opt_out", b.to_string()));
                }
                for (k, v) in [
                    ("signature_validity", self.signature_validity),
                    ("signature_refresh", self.signature_refresh),
                    ("dnskey_ttl", self.dnskey_ttl),
                    ("zsk_lifetime", self.zsk_lifetime),
                    ("ksk_lifetime", self.ksk_lifetime),
                    ("propagation_delay", self.propagation_delay),
                ] {
                    if let Some(v) = v {
                        out.push((k, v.to_string()));
                    }
                }
                if let Some(list) = &self.parent_agents {
                    out.push(("parent_agents", list.join(",")));
                }
                out
            }
        }
    };
}

policy_table! {
    /// The `[signing]` table as written: the defaults and the zones.
    RawSigning {
        zone: Option<Vec<RawSigningZone>>,
    }
}

policy_table! {
    /// One `[[signing.zone]]` as written.
    RawSigningZone {
        origin: Option<String>,
    }
}

/// The policy keys and their kinds (both tables take them all).
const POLICY_KEYS: [(&str, Kind); 11] = [
    ("algorithm", Kind::Text),
    ("keys", Kind::Text),
    ("denial", Kind::Text),
    ("nsec3_opt_out", Kind::Bool),
    ("signature_validity", Kind::Whole),
    ("signature_refresh", Kind::Whole),
    ("dnskey_ttl", Kind::Whole),
    ("zsk_lifetime", Kind::Whole),
    ("ksk_lifetime", Kind::Whole),
    ("propagation_delay", Kind::Whole),
    ("parent_agents", Kind::List),
];

const fn with(extra: (&'static str, Kind)) -> [(&'static str, Kind); 12] {
    let mut out = [extra; 12];
    let mut i = 0;
    while i < POLICY_KEYS.len() {
        out[i + 1] = POLICY_KEYS[i];
        i += 1;
    }
    out
}

const SIGNING_KEYS: [(&str, Kind); 12] = with(("zone", Kind::Tables));
const ZONE_KEYS: [(&str, Kind); 12] = with(("origin", Kind::Text));

/// `policy` with the `pairs` of the table at `table` (`signing`,
/// `signing.zone[0]`) applied and checked.
fn apply(mut policy: Policy, table: &str, set: &[(&str, String)]) -> Result<Policy, Invalid> {
    let at = |e: authd_datasrc::signer::policy::PolicyError| {
        Invalid::new(format!("{table}.{}", e.key), e.reason)
    };
    for (k, v) in set {
        if *k == "parent_agents" {
            for (i, a) in v.split(',').filter(|a| !a.trim().is_empty()).enumerate() {
                check_agent(a.trim())
                    .map_err(|r| Invalid::new(format!("{table}.parent_agents[{i}]"), r))?;
            }
        }
        policy.set(k, v).map_err(at)?;
    }
    policy.validate().map_err(at)?;
    Ok(policy)
}

/// `ADDR[:PORT]` of a parent agent (port 53 when left out).
fn check_agent(text: &str) -> Result<(), String> {
    if text.parse::<std::net::SocketAddr>().is_ok() || text.parse::<std::net::IpAddr>().is_ok() {
        Ok(())
    } else {
        Err(format!("{text:?} is not ADDR or ADDR:PORT"))
    }
}

impl Section for RawSigning {
    type Value = SigningConfig;

    const SCHEMA: Schema = &[("signing", &SIGNING_KEYS), ("signing.zone[]", &ZONE_KEYS)];

    /// `[signing]` over the defaults, each zone's keys over that; every
    /// policy checked (known algorithm, layout and denial; refresh below
    /// validity); origins present and unique.
    fn check(self, _cx: &Context<'_>) -> Result<SigningConfig, Invalid> {
        let base = apply(Policy::default(), "signing", &self.pairs())?;
        let mut out = SigningConfig::default();
        for (i, z) in self.zone.unwrap_or_default().into_iter().enumerate() {
            let table = format!("signing.zone[{i}]");
            let origin = match &z.origin {
                Some(o) => {
                    parse_origin(o).map_err(|r| Invalid::new(format!("{table}.origin"), r))?
                }
                None => return Err(Invalid::new(format!("{table}.origin"), "missing")),
            };
            if out.zone(&origin).is_some() {
                return Err(Invalid::new(
                    format!("{table}.origin"),
                    format!("zone {origin} is listed twice in [[signing.zone]]"),
                ));
            }
            let policy = apply(base.clone(), &table, &z.pairs())?;
            out.zones.push(SignedZoneConfig { origin, policy });
        }
        Ok(out)
    }
}

/// What the signer works on: the zones signed and the sources served
/// (whose write sides sign them).
#[derive(Clone, Default)]
pub struct SignerSettings {
    /// `[[signing.zone]]`.
    pub zones: Vec<SignedZoneConfig>,
    /// The sources served.
    pub sources: SourceList,
    /// How the serial moves when the signer signs SQL edits or refreshes
    /// (`[update] serial`).
    pub serial: SerialPolicy,
}

/// The signer thread: stops when dropped.
pub struct Signer {
    settings: watch::Sender<SignerSettings>,
    stop: Arc<AtomicBool>,
}

impl Signer {
    /// Starts the signer on `settings` (with no zones, it only sleeps until
    /// an update brings some), the policies stored first
    /// ([`store_policies`]).
    ///
    /// Errors: the thread cannot be started.
    pub fn spawn(settings: SignerSettings) -> std::io::Result<Signer> {
        store_policies(&settings);
        let (tx, rx) = watch::channel(settings);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("signer".into())
            .spawn(move || poll_loop(&rx, &stopped))?;
        Ok(Signer { settings: tx, stop })
    }

    /// The settings in force, for key events asked over the control socket.
    pub fn settings(&self) -> watch::Receiver<SignerSettings> {
        self.settings.subscribe()
    }

    /// Replaces the zones signed and the sources; applies from the next
    /// poll. A zone no longer listed is taken out of signing (its
    /// signatures stay until they expire).
    pub fn update(&self, settings: SignerSettings) {
        store_policies(&settings);
        self.settings.send_replace(settings);
    }
}

/// Stores each zone's policy in its DB now, so that a write coming before
/// the signer's first poll (a secondary zone's first transfer, at start)
/// is signed; what fails here the poll retries and logs.
fn store_policies(settings: &SignerSettings) {
    for z in &settings.zones {
        if let Ok(Some(w)) = settings.sources.writer(&z.origin)
            && let Ok(true) = w.set_signing(&z.origin, Some(&z.policy))
        {
            tracing::info!("signing {}: policy stored in {}", z.origin, w.describe());
        }
    }
}

impl Drop for Signer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One signed zone between polls.
struct Zone {
    config: SignedZoneConfig,
    writer: Option<Arc<dyn ZoneWriter>>,
    /// The policy is stored in the zone's DB.
    stored: bool,
    /// Sign at this poll (first signing, edits seen, refresh due).
    due: bool,
    last_refresh: Instant,
    last_error: Option<String>,
    /// When the next key rollover step falls due (Unix seconds).
    next_key_event: Option<u64>,
    /// The DS RDATA a KSK/CSK rollover waits for at the parent.
    awaiting_ds: Option<Vec<u8>>,
    last_ds_check: Option<Instant>,
}

impl Zone {
    /// Logs `e` once until another error or a success.
    fn failed(&mut self, e: &str) {
        let line = format!("signing {}: {e}; trying again", self.config.origin);
        if self.last_error.as_deref() != Some(line.as_str()) {
            tracing::error!("{line}");
            self.last_error = Some(line);
        }
    }
}

fn writer_key(w: &Arc<dyn ZoneWriter>) -> usize {
    Arc::as_ptr(w) as *const () as usize
}

/// Polls until `stop` is set: see the module docs.
fn poll_loop(settings: &watch::Receiver<SignerSettings>, stop: &AtomicBool) {
    let mut zones: Vec<Zone> = Vec::new();
    let mut current = SignerSettings::default();
    let mut marks: HashMap<usize, u64> = HashMap::new();
    while !stop.load(Ordering::Relaxed) {
        let next = settings.borrow().clone();
        if next.zones != current.zones || !next.sources.same_sources(&current.sources) {
            // Zones no longer listed leave signing.
            for z in &zones {
                if next.zones.iter().all(|n| n.origin != z.config.origin)
                    && let Some(w) = &z.writer
                    && let Err(e) = w.set_signing(&z.config.origin, None)
                {
                    tracing::error!("signing {}: taking it out: {e}", z.config.origin);
                }
            }
            // Zones whose DB holds a policy that the configuration no
            // longer names (authd restarted without them): out of signing
            // too, so no writer of the file signs them any more.
            for w in next.sources.writers() {
                let Ok(stored) = w.signed_zones() else {
                    continue;
                };
                for z in stored {
                    if next.zones.iter().all(|n| n.origin != z.origin) {
                        match w.set_signing(&z.origin, None) {
                            Ok(true) => tracing::info!(
                                "signing {}: not in [[signing.zone]] any more; no longer signed \
                                 (its signatures stay until they expire)",
                                z.origin
                            ),
                            Ok(false) => {}
                            Err(e) => tracing::error!("signing {}: taking it out: {e}", z.origin),
                        }
                    }
                }
            }
            zones = next
                .zones
                .iter()
                .map(|c| Zone {
                    config: c.clone(),
                    writer: None,
                    stored: false,
                    due: true,
                    last_refresh: Instant::now(),
                    last_error: None,
                    next_key_event: None,
                    awaiting_ds: None,
                    last_ds_check: None,
                })
                .collect();
            marks.clear();
            current = next;
        }
        poll(&mut zones, &current, &mut marks);
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// One poll: policies stored where missing, edits found, due zones signed.
fn poll(zones: &mut [Zone], settings: &SignerSettings, marks: &mut HashMap<usize, u64>) {
    let mut writers: Vec<Arc<dyn ZoneWriter>> = Vec::new();
    for z in zones.iter_mut() {
        if z.writer.is_none() {
            match settings.sources.writer(&z.config.origin) {
                Ok(Some(w)) => z.writer = Some(w),
                Ok(None) => {
                    z.failed("no data source serves the zone (yet)");
                    continue;
                }
                Err(e) => {
                    z.failed(&e.to_string());
                    continue;
                }
            }
        }
        let Some(w) = z.writer.clone() else { continue };
        if !z.stored {
            match w.set_signing(&z.config.origin, Some(&z.config.policy)) {
                Ok(changed) => {
                    if changed {
                        tracing::info!(
                            "signing {}: policy stored in {}",
                            z.config.origin,
                            w.describe()
                        );
                    }
                    z.stored = true;
                    z.due = true;
                }
                Err(e) => {
                    z.failed(&e.to_string());
                    continue;
                }
            }
        }
        if z.last_refresh.elapsed() >= REFRESH_INTERVAL {
            z.due = true;
        }
        if !writers.iter().any(|o| Arc::ptr_eq(o, &w)) {
            writers.push(w);
        }
    }
    // Plain SQL edits: looked for when a DB's change mark moved.
    for w in &writers {
        let Ok(mark) = w.change_mark() else { continue };
        if marks.insert(writer_key(w), mark) == Some(mark) {
            continue;
        }
        match w.signed_zones() {
            Ok(states) => {
                for s in &states {
                    if let Some(z) = zones.iter_mut().find(|z| z.config.origin == s.origin) {
                        z.due |= s.edits;
                        z.next_key_event = s.next_key_event;
                        z.awaiting_ds = s.awaiting_ds.clone();
                    }
                }
            }
            Err(e) => tracing::error!("signing: reading {}: {e}", w.describe()),
        }
    }
    let now = crate::sys::unix_seconds();
    for z in zones.iter_mut().filter(|z| z.stored) {
        if z.next_key_event.is_some_and(|t| t <= now) {
            z.next_key_event = None;
            z.due = true;
        }
        check_parent(z, settings);
    }
    for z in zones.iter_mut().filter(|z| z.due && z.stored) {
        let Some(w) = z.writer.clone() else { continue };
        let now = crate::sys::unix_seconds();
        let started = Instant::now();
        match w.sign_pending(&z.config.origin, settings.serial, now) {
            Ok(Some(r)) => {
                tracing::info!(
                    "signing {}: serial {} -> {} signed in {:.3} s, {} journal rows \
                     ({} RRs added and {} deleted by SQL)",
                    z.config.origin,
                    r.old_serial,
                    r.new_serial,
                    started.elapsed().as_secs_f64(),
                    r.journal_rows,
                    r.added,
                    r.deleted
                );
                z.due = false;
                z.last_refresh = Instant::now();
                z.last_error = None;
            }
            Ok(None) => {
                z.due = false;
                z.last_refresh = Instant::now();
                z.last_error = None;
            }
            // A secondary zone before its first transfer: signed as it is
            // written.
            Err(authd_datasrc::WriteError::NoZone(_)) => {
                if z.last_error.is_none() {
                    tracing::info!(
                        "signing {}: not in its DB yet; signed when it is written",
                        z.config.origin
                    );
                    z.last_error = Some(String::new());
                }
                z.due = false;
                z.last_refresh = Instant::now();
            }
            Err(e) => z.failed(&e.to_string()),
        }
    }
}

/// Asks every `parent_agents` entry for the DS RRset of a zone whose
/// KSK/CSK rollover waits for its new DS; when all of them hold it, tells
/// the zone's writer ([`KeyEvent::DsPublished`], the largest TTL seen), so
/// the old key is retired once that TTL and the propagation delay pass.
fn check_parent(z: &mut Zone, settings: &SignerSettings) {
    let agents = &z.config.policy.parent_agents;
    let Some(want) = z.awaiting_ds.clone() else {
        return;
    };
    if agents.is_empty()
        || z.last_ds_check
            .is_some_and(|t| t.elapsed() < DS_CHECK_INTERVAL)
    {
        return;
    }
    z.last_ds_check = Some(Instant::now());
    let Some(w) = z.writer.clone() else { return };
    let origin = z.config.origin.clone();
    let mut ttl = 0;
    for agent in agents {
        match parent_ds(agent, &origin) {
            Ok(found) => match found.iter().find(|(rdata, _)| *rdata == want) {
                Some((_, t)) => ttl = ttl.max(*t),
                None => {
                    tracing::debug!("signing {origin}: the new DS is not at {agent} yet");
                    return;
                }
            },
            Err(e) => {
                z.failed(&format!("asking parent agent {agent} for the DS: {e}"));
                return;
            }
        }
    }
    let now = crate::sys::unix_seconds();
    match w.key_event(&origin, KeyEvent::DsPublished { ttl }, settings.serial, now) {
        Ok(done) => {
            tracing::info!("signing {origin}: seen at every parent agent: {done}");
            z.awaiting_ds = None;
        }
        Err(e) => z.failed(&e.to_string()),
    }
}

/// The DS RRset of `origin` at parent agent `agent` (`ADDR[:PORT]`, port
/// 53 by default) over TCP: each RDATA (wire form) with its TTL.
fn parent_ds(agent: &str, origin: &Name) -> Result<Vec<(Vec<u8>, u32)>, String> {
    use std::io::{Read, Write};
    let addr: std::net::SocketAddr = agent
        .parse()
        .or_else(|_| agent.parse::<std::net::IpAddr>().map(|ip| (ip, 53).into()))
        .map_err(|_| format!("{agent:?} is not ADDR or ADDR:PORT"))?;
    let io = |e: std::io::Error| e.to_string();
    let mut tcp = std::net::TcpStream::connect_timeout(&addr, DS_QUERY_TIMEOUT).map_err(io)?;
    tcp.set_read_timeout(Some(DS_QUERY_TIMEOUT)).map_err(io)?;
    tcp.set_write_timeout(Some(DS_QUERY_TIMEOUT)).map_err(io)?;
    let id = (crate::sys::unix_seconds() as u16) ^ 0x5a5a;
    let query = crate::xfrin::request(id, origin, RType::DS, None);
    let mut framed = (query.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&query);
    tcp.write_all(&framed).map_err(io)?;
    let mut len = [0u8; 2];
    tcp.read_exact(&mut len).map_err(io)?;
    let mut reply = vec![0u8; usize::from(u16::from_be_bytes(len))];
    tcp.read_exact(&mut reply).map_err(io)?;
    let records = crate::xfrin::parse_reply(&reply, id, origin, RType::DS, true)
        .map_err(|e| e.to_string())?;
    Ok(records
        .into_iter()
        .filter(|r| r.rtype == RType::DS && r.owner == *origin)
        .map(|r| (r.rdata.as_wire().to_vec(), r.ttl))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use authd_datasrc::signer::keys::Algorithm;
    use authd_datasrc::signer::policy::{Denial, KeyLayout};

    fn read(text: &str) -> Result<SigningConfig, Invalid> {
        #[derive(Deserialize)]
        struct File {
            signing: RawSigning,
        }
        let f: File = toml::from_str(text).expect("toml");
        f.signing.check(&Context::default())
    }

    #[test]
    fn zone_keys_override_the_defaults() {
        let c = read(
            "[signing]\nalgorithm = \"ed25519\"\ndenial = \"nsec\"\n\
             [[signing.zone]]\norigin = \"a.example\"\n\
             [[signing.zone]]\norigin = \"b.example.\"\nkeys = \"ksk+zsk\"\ndenial = \"nsec3\"\n\
             nsec3_opt_out = true\nsignature_validity = 86400\nsignature_refresh = 3600\n",
        )
        .expect("valid");
        assert_eq!(c.zones.len(), 2);
        let a = &c.zones[0].policy;
        assert_eq!(
            (a.algorithm, a.keys, a.denial),
            (Algorithm::Ed25519, KeyLayout::Csk, Denial::Nsec)
        );
        let b = &c.zones[1].policy;
        assert_eq!(c.zones[1].origin.to_string(), "b.example.");
        assert_eq!(
            (
                b.algorithm,
                b.keys,
                b.denial,
                b.signature_validity,
                b.signature_refresh
            ),
            (
                Algorithm::Ed25519,
                KeyLayout::KskZsk,
                Denial::Nsec3 { opt_out: true },
                86400,
                3600
            )
        );
    }

    #[test]
    fn bad_settings_name_their_key() {
        let e = read("[signing]\nalgorithm = \"dsa\"\n").expect_err("algorithm");
        assert_eq!(e.key, "signing.algorithm");
        let e = read("[signing]\n[[signing.zone]]\norigin = \"x.\"\nsignature_refresh = 2000000\n")
            .expect_err("refresh");
        assert_eq!(e.key, "signing.zone[0].signature_refresh");
        let e = read("[signing]\n[[signing.zone]]\nkeys = \"csk\"\n").expect_err("origin");
        assert_eq!(
            (e.key.as_str(), e.reason.as_str()),
            ("signing.zone[0].origin", "missing")
        );
        let e = read(
            "[signing]\n[[signing.zone]]\norigin = \"x.\"\n[[signing.zone]]\norigin = \"X\"\n",
        )
        .expect_err("twice");
        assert_eq!(e.key, "signing.zone[1].origin");
        let e = read("[signing]\nparent_agents = [\"ns.example\"]\n").expect_err("agent");
        assert_eq!(e.key, "signing.parent_agents[0]");
    }
}
