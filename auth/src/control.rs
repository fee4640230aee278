//! The control socket (`[control] socket`, like knotc's and nsd-control's):
//! a unix stream socket, mode 0600, where `authc` sends one command line and
//! reads the answer until the connection closes. The first line of an answer
//! is `ok` or `error: WHY`; what follows is the command's output.
//!
//! Commands: `status`, `reload [ZONE]`, `flush-cache`, `stats`,
//! `zone-status [ZONE]`, `querylog on|off`, `dnssec status [ZONE]`,
//! `dnssec ds ZONE`, `dnssec rollover ZONE zsk|ksk`, `dnssec ds-published ZONE`,
//! `stop`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use authd_datasrc::write::KeyEvent;
use authd_datasrc::{LookupOptions, Name, Outcome, RType};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::dispatch::QUERY_LOG;
use crate::metrics::Metrics;
use crate::server::DispatcherHandle;

/// Longest command line read, bytes.
const MAX_LINE: usize = 1024;

/// One command, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Version, uptime, and every zone with its serial and source.
    Status,
    /// Reload the configuration and zones (as SIGHUP); with a zone, report
    /// that zone's serial after it.
    Reload(Option<Name>),
    /// Empty every hot-spot cache.
    FlushCache,
    /// The metrics, as JSON.
    Stats,
    /// One zone's (or every zone's) serial and source.
    ZoneStatus(Option<Name>),
    /// Log every query, or stop.
    QueryLog(bool),
    /// The keys of one zone signed online (or of every one), with their
    /// roles, states and tags.
    DnssecStatus(Option<Name>),
    /// The DS RRs (SHA-256) of a zone signed online, for its parent.
    DnssecDs(Name),
    /// Start a rollover of a zone's ZSK (`true`) or KSK/CSK now.
    DnssecRollover(Name, bool),
    /// The operator saw the new KSK/CSK's DS at the parent.
    DnssecDsPublished(Name),
    /// Stop authd (as SIGTERM).
    Stop,
}

/// Parses a command line.
///
/// Errors: an unknown command or bad argument, as one line naming it.
pub fn parse(line: &str) -> Result<Command, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let zone = |w: &str| {
        authd_datasrc::Name::parse(w, Some(&Name::root()))
            .map_err(|e| format!("{w:?} is not a zone name: {e}"))
    };
    match words[..] {
        ["status"] => Ok(Command::Status),
        ["reload"] => Ok(Command::Reload(None)),
        ["reload", z] => Ok(Command::Reload(Some(zone(z)?))),
        ["flush-cache"] => Ok(Command::FlushCache),
        ["stats"] => Ok(Command::Stats),
        ["zone-status"] => Ok(Command::ZoneStatus(None)),
        ["zone-status", z] => Ok(Command::ZoneStatus(Some(zone(z)?))),
        ["querylog", "on"] => Ok(Command::QueryLog(true)),
        ["querylog", "off"] => Ok(Command::QueryLog(false)),
        ["dnssec", "status"] => Ok(Command::DnssecStatus(None)),
        ["dnssec", "status", z] => Ok(Command::DnssecStatus(Some(zone(z)?))),
        ["dnssec", "ds", z] => Ok(Command::DnssecDs(zone(z)?)),
        ["dnssec", "rollover", z, "zsk"] => Ok(Command::DnssecRollover(zone(z)?, true)),
        ["dnssec", "rollover", z, "ksk" | "csk"] => Ok(Command::DnssecRollover(zone(z)?, false)),
        ["dnssec", "ds-published", z] => Ok(Command::DnssecDsPublished(zone(z)?)),
        ["stop"] => Ok(Command::Stop),
        [] => Err("empty command".into()),
        _ => Err(format!(
            "unknown command {:?} (status, reload [ZONE], flush-cache, stats, \
             zone-status [ZONE], querylog on|off, dnssec status [ZONE], dnssec ds ZONE, \
             dnssec rollover ZONE zsk|ksk, dnssec ds-published ZONE, stop)",
            line.trim()
        )),
    }
}

/// What the control socket acts on.
#[derive(Clone)]
pub struct Control {
    /// The dispatcher in force (sources, caches).
    pub handle: DispatcherHandle,
    /// Asks the reload loop for a reload; it answers with its summary line.
    pub reload: mpsc::Sender<oneshot::Sender<String>>,
    /// Notified to stop authd.
    pub stop: Arc<Notify>,
    /// The counters, when metrics are on.
    pub metrics: Option<Arc<Metrics>>,
    /// When authd started.
    pub started: Instant,
    /// The signer's settings (the zones signed, how serials move).
    pub signing: tokio::sync::watch::Receiver<crate::signing::SignerSettings>,
}

/// Binds the control socket at `path` (a stale socket file there is
/// replaced), mode 0600, and serves it until the runtime ends.
///
/// Errors: the socket cannot be bound or its mode set.
pub async fn serve(path: &Path, control: Control) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    // A stale socket from an earlier run is replaced; anything else at the
    // path is someone's file, left alone with an error that says so.
    if let Ok(m) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if m.file_type().is_socket() {
            std::fs::remove_file(path)?;
        } else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "a file that is not a socket is there; authd does not replace it",
            ));
        }
    }
    let listener = tokio::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            };
            let control = control.clone();
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut line = String::new();
                let mut reader = BufReader::new(read.take(MAX_LINE as u64));
                let answer = match reader.read_line(&mut line).await {
                    Ok(_) => match parse(&line) {
                        Ok(command) => run(&control, command).await,
                        Err(e) => Err(e),
                    },
                    Err(e) => Err(format!("cannot read the command: {e}")),
                };
                let text = match answer {
                    Ok(out) => format!("ok\n{out}"),
                    Err(e) => format!("error: {e}\n"),
                };
                let _ = write.write_all(text.as_bytes()).await;
                let _ = write.shutdown().await;
            });
        }
    });
    Ok(path.to_path_buf())
}

/// Runs one command; the output (without the `ok` line).
async fn run(control: &Control, command: Command) -> Result<String, String> {
    match command {
        Command::Status => {
            let mut out = String::new();
            let _ = writeln!(out, "version: authd {}", env!("CARGO_PKG_VERSION"));
            let _ = writeln!(out, "uptime: {} s", control.started.elapsed().as_secs());
            let _ = writeln!(
                out,
                "querylog: {}",
                if QUERY_LOG.load(Ordering::Relaxed) {
                    "on"
                } else {
                    "off"
                }
            );
            out.push_str(&zones(control, None)?);
            Ok(out)
        }
        Command::ZoneStatus(zone) => zones(control, zone.as_ref()),
        Command::Reload(zone) => {
            let (tx, rx) = oneshot::channel();
            control
                .reload
                .send(tx)
                .await
                .map_err(|_| "the reload loop is not running".to_string())?;
            let summary = rx
                .await
                .map_err(|_| "the reload did not finish".to_string())?;
            if summary.starts_with("reload failed") {
                return Err(summary);
            }
            let mut out = format!("{summary}\n");
            if let Some(z) = zone {
                out.push_str(&zones(control, Some(&z))?);
            }
            Ok(out)
        }
        Command::FlushCache => {
            let dispatcher = control.handle.load();
            let mut n = 0;
            for source in dispatcher.sources().sources() {
                if source.cache_stats().is_some() {
                    n += 1;
                }
                source.flush_cache();
            }
            Ok(format!("flushed {n} cache(s)\n"))
        }
        Command::Stats => {
            let Some(metrics) = &control.metrics else {
                return Err("metrics are off".into());
            };
            let text = metrics
                .render()
                .map_err(|e| format!("cannot render the metrics: {e}"))?;
            Ok(format!("{}\n", metrics_json(&text)))
        }
        Command::DnssecStatus(zone) => dnssec_status(control, zone.as_ref()),
        Command::DnssecRollover(zone, zsk) => key_event(control, &zone, KeyEvent::Rollover { zsk }),
        Command::DnssecDsPublished(zone) => {
            // The parent's DS TTL is not known here: the DNSKEY TTL stands
            // for it (a parent's is rarely longer; propagation_delay covers
            // the difference).
            let ttl = control
                .signing
                .borrow()
                .zones
                .iter()
                .find(|z| z.origin == zone)
                .map(|z| z.policy.dnskey_ttl)
                .ok_or_else(|| format!("zone {zone} is not in [[signing.zone]]"))?;
            key_event(control, &zone, KeyEvent::DsPublished { ttl })
        }
        Command::DnssecDs(zone) => {
            let keys = signing_keys(control, &zone)?;
            let ds: Vec<String> = keys
                .iter()
                // A retired key's DS is for the parent to drop.
                .filter(|k| k.state == "active")
                .filter_map(|k| k.ds.clone())
                .collect();
            if ds.is_empty() {
                return Err(format!(
                    "zone {zone} is not signed online by authd (no keys)"
                ));
            }
            Ok(ds.iter().map(|d| format!("{d}\n")).collect())
        }
        Command::QueryLog(on) => {
            QUERY_LOG.store(on, Ordering::Relaxed);
            Ok(format!("querylog {}\n", if on { "on" } else { "off" }))
        }
        Command::Stop => {
            control.stop.notify_one();
            Ok("stopping\n".into())
        }
    }
}

/// `ZONE SERIAL SOURCE` per zone served (or for `only`).
///
/// Errors: `only` is not served here.
fn zones(control: &Control, only: Option<&Name>) -> Result<String, String> {
    let dispatcher = control.handle.load();
    let mut out = String::new();
    let mut found = false;
    for (source, listed) in dispatcher.sources().zones() {
        let listed = match listed {
            Ok(z) => z,
            Err(e) => {
                let _ = writeln!(out, "source {}: cannot list zones: {e}", source.describe());
                continue;
            }
        };
        for zone in listed {
            if only.is_some_and(|o| *o != zone.origin) {
                continue;
            }
            found = true;
            let serial =
                match source.lookup(&zone, &zone.origin, RType::SOA, LookupOptions::default()) {
                    Ok(authd_datasrc::Lookup {
                        outcome: Outcome::Answer(soa),
                        ..
                    }) => soa
                        .rdatas
                        .first()
                        .and_then(|r| r.soa_serial())
                        .map_or("-".to_string(), |s| s.to_string()),
                    Ok(_) => "no SOA".to_string(),
                    Err(e) => format!("error ({e})"),
                };
            let _ = writeln!(
                out,
                "zone {} serial {serial} source {}",
                zone.origin,
                source.describe()
            );
        }
    }
    match only {
        Some(z) if !found => Err(format!("zone {z} is not served here")),
        _ => Ok(out),
    }
}

/// The Prometheus text exposition as a JSON array of
/// `{"name", "labels", "value"}` samples.
fn metrics_json(text: &str) -> String {
    let mut samples = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let mut map = serde_json::Map::new();
        for pair in labels.split("\",").filter(|p| !p.is_empty()) {
            if let Some((k, v)) = pair.split_once("=\"") {
                map.insert(
                    k.trim_start_matches(',').to_string(),
                    serde_json::Value::String(v.trim_end_matches('"').to_string()),
                );
            }
        }
        let value: f64 = value.parse().unwrap_or(0.0);
        samples.push(serde_json::json!({ "name": name, "labels": map, "value": value }));
    }
    serde_json::Value::Array(samples).to_string()
}

/// The write side of the source serving zone `zone`.
fn zone_writer(
    control: &Control,
    zone: &Name,
) -> Result<Arc<dyn authd_datasrc::ZoneWriter>, String> {
    control
        .handle
        .load()
        .sources()
        .writer(zone)
        .map_err(|e| format!("zone {zone}: {e}"))?
        .ok_or_else(|| format!("zone {zone} is not served"))
}

/// The keys of zone `zone` from the write side of the source serving it.
fn signing_keys(
    control: &Control,
    zone: &Name,
) -> Result<Vec<authd_datasrc::write::KeyStatus>, String> {
    zone_writer(control, zone)?
        .signing_keys(zone)
        .map_err(|e| format!("zone {zone}: {e}"))
}

/// `dnssec rollover` and `dnssec ds-published`: applied by the zone's
/// write side, which re-signs the zone with it before answering.
fn key_event(control: &Control, zone: &Name, event: KeyEvent) -> Result<String, String> {
    let serial = {
        let settings = control.signing.borrow();
        if settings.zones.iter().all(|z| z.origin != *zone) {
            return Err(format!("zone {zone} is not in [[signing.zone]]"));
        }
        settings.serial
    };
    let done = zone_writer(control, zone)?
        .key_event(zone, event, serial, crate::sys::unix_seconds())
        .map_err(|e| format!("{e}"))?;
    Ok(format!("{zone}: {done}\n"))
}

/// `dnssec status [ZONE]`: per zone signed online, when it was last signed
/// and whether SQL edits wait, then one line per key.
fn dnssec_status(control: &Control, zone: Option<&Name>) -> Result<String, String> {
    let dispatcher = control.handle.load();
    let mut out = String::new();
    let mut found = false;
    for w in dispatcher.sources().writers() {
        let zones = w
            .signed_zones()
            .map_err(|e| format!("{}: {e}", w.describe()))?;
        for z in zones.iter().filter(|z| zone.is_none_or(|o| *o == z.origin)) {
            found = true;
            let _ = writeln!(
                out,
                "{} signed: {} edits-pending: {} next-key-event: {}{}",
                z.origin,
                z.signed.map_or("never".to_string(), |t| t.to_string()),
                if z.edits { "yes" } else { "no" },
                z.next_key_event
                    .map_or("none".to_string(), |t| t.to_string()),
                if z.awaiting_ds.is_some() {
                    " awaiting-ds: yes"
                } else {
                    ""
                }
            );
            for k in w
                .signing_keys(&z.origin)
                .map_err(|e| format!("zone {}: {e}", z.origin))?
            {
                let _ = writeln!(
                    out,
                    "  key {} {} {} algorithm {} flags {} created {} changed {}",
                    k.tag, k.role, k.state, k.algorithm, k.flags, k.created, k.changed
                );
            }
        }
    }
    if !found {
        return Err(match zone {
            Some(z) => format!("zone {z} is not signed online by authd"),
            None => "no zone is signed online".to_string(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_or_say_what_is_known() {
        assert_eq!(parse("status\n"), Ok(Command::Status));
        assert_eq!(
            parse("reload example.com"),
            Ok(Command::Reload(Some("example.com.".parse().expect("name"))))
        );
        assert_eq!(parse("querylog on"), Ok(Command::QueryLog(true)));
        let zone: Name = "example.com.".parse().expect("name");
        assert_eq!(
            parse("dnssec rollover example.com zsk"),
            Ok(Command::DnssecRollover(zone.clone(), true))
        );
        assert_eq!(
            parse("dnssec rollover example.com. csk"),
            Ok(Command::DnssecRollover(zone.clone(), false))
        );
        assert_eq!(
            parse("dnssec ds-published example.com"),
            Ok(Command::DnssecDsPublished(zone))
        );
        assert!(parse("dnssec rollover example.com").is_err());
        assert!(parse("dnssec rollover example.com zone").is_err());
        let e = parse("querylog maybe").expect_err("bad");
        assert!(e.contains("unknown command \"querylog maybe\""), "{e}");
        assert!(parse("").is_err());
    }

    #[test]
    fn metrics_become_json_samples() {
        let text =
            "# HELP a_total x\n# TYPE a_total counter\na_total{kind=\"answer\",x=\"y\"} 3\nb 1.5\n";
        let json: serde_json::Value = serde_json::from_str(&metrics_json(text)).expect("json");
        assert_eq!(json[0]["name"], "a_total");
        assert_eq!(json[0]["labels"]["kind"], "answer");
        assert_eq!(json[0]["labels"]["x"], "y");
        assert_eq!(json[0]["value"], 3.0);
        assert_eq!(json[1]["value"], 1.5);
    }
}
