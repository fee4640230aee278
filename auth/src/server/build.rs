//! Building the [`Dispatcher`] a [`Config`] asks for: at start-up
//! ([`dispatcher`]) and on each reload, from the one it replaces
//! ([`reloaded`]). A reload builds a whole new snapshot (sources, CH
//! answers, transfer and update policy, keys, secondary zones, guards), but
//! some state outlives the snapshot that made it:
//!
//! | state | on reload |
//! |---|---|
//! | the counters, the dnstap log | kept: one of each for the process (`[metrics]` and `[dnstap]` changes need a restart) |
//! | a random cookie key (no `[cookies] secret`) | kept: it is not configuration |
//! | a configured cookie secret | replaced; a changed one keeps the old one accepted for [`crate::cookies::PREVIOUS_SECRET_GRACE`] ([`Cookies::reloaded`]); one taken out of the file (say, leaked) is not kept: a new random key |
//! | the rate limiter's buckets | kept when the `[rrl]` settings are unchanged, so a reload forgives no one; new settings start an empty table |
//!
//! The sources come from [`super::reload::load`], the secondary zones'
//! policy (who may NOTIFY, which zones expired) from the running
//! [`Refresher`].
//!
//! A [`Reloader`] runs one whole reload (SIGHUP, `authc reload`) on a
//! running server: the configuration read again, the zones loaded off the
//! query path, the new dispatcher swapped in, the background tasks (NOTIFY
//! out, the secondary zones' refresher) given their new settings, and one
//! summary line. Only listen addresses, `[server] udp_workers`, `[tcp]`,
//! `[metrics]`, `[dnstap]` and `[control]` need a restart; a reload that
//! changes them says so in a warning, which `authc reload` also prints after
//! the summary.

use std::collections::HashSet;
use std::fmt::Display;
use std::net::SocketAddr;
use std::sync::Arc;

use authd_datasrc::{Name, SourceList};

use super::DispatcherHandle;
use super::reload::{self, LoadState, Loaded};
use crate::catalog::consumer::{Consumer, locally_served};
use crate::catalog::producer::{ProducerSettings, Producers};
use crate::config::{Config, ServerConfig};
use crate::cookies::{CookieError, Cookies};
use crate::dispatch::Dispatcher;
use crate::dnstap::Dnstap;
use crate::metrics::Metrics;
use crate::notify::{Notifier, NotifySettings, NotifyWake};
use crate::rrl::RateLimiter;
use crate::secondary::{Refresher, SecondarySettings};
use crate::signing::{Signer, SignerSettings};

/// The dispatcher `config` asks for at start-up, answering from `sources`,
/// counting into `metrics` and logging to `dnstap` (`None`: off; one of each
/// for the process, carried by every reload), waking `notify` (the NOTIFY
/// poller) after each successful UPDATE.
///
/// Errors: no random bytes for a cookie secret.
pub fn dispatcher(
    config: &Config,
    sources: SourceList,
    refresher: &Refresher,
    (metrics, dnstap): (Option<Arc<Metrics>>, Option<Arc<Dnstap>>),
    notify: Option<NotifyWake>,
) -> Result<Dispatcher, CookieError> {
    Ok(build(config, sources, refresher, None, metrics, dnstap)?.with_notify_wake(notify))
}

/// The dispatcher a reload to `config` swaps in for `previous`, answering
/// from `sources`: what carries over is in the module documentation.
///
/// Errors: no random bytes for a cookie secret.
pub fn reloaded(
    config: &Config,
    sources: SourceList,
    refresher: &Refresher,
    previous: &Dispatcher,
) -> Result<Dispatcher, CookieError> {
    let metrics = previous.metrics().cloned();
    let dnstap = previous.dnstap().cloned();
    Ok(
        build(config, sources, refresher, Some(previous), metrics, dnstap)?
            .with_notify_wake(previous.notify_wake().cloned()),
    )
}

/// Everything `config` says about answering, over `sources`, with the state
/// of `previous` carried over (when there is one).
fn build(
    config: &Config,
    sources: SourceList,
    refresher: &Refresher,
    previous: Option<&Dispatcher>,
    metrics: Option<Arc<Metrics>>,
    dnstap: Option<Arc<Dnstap>>,
) -> Result<Dispatcher, CookieError> {
    let cookies = if config.cookies.enabled {
        let fresh = match config.cookies.secret {
            Some(secret) => Cookies::with_secret(secret),
            // Keep a random key across reloads; a configured secret taken
            // out of the file (say, leaked) is not kept: a new random one.
            None => match previous.and_then(Dispatcher::cookies) {
                Some(c) if c.is_random() => c.clone(),
                _ => Cookies::random()?,
            },
        };
        Some(match previous.and_then(Dispatcher::cookies) {
            Some(old) => old.reloaded(fresh, crate::sys::unix_seconds()),
            None => fresh,
        })
    } else {
        None
    };
    let rrl = config.rrl.enabled.then(|| {
        match previous.and_then(Dispatcher::rrl) {
            // Same settings: keep the buckets, so a reload forgives no one.
            Some(old) if *old.settings() == config.rrl.settings => Arc::clone(old),
            _ => Arc::new(RateLimiter::new(config.rrl.settings.clone())),
        }
    });
    // [tcp] applies at start only: a reload keeps telling clients the idle
    // timeout the TCP server runs with.
    let keepalive = previous.map_or_else(
        || crate::edns::keepalive_units(config.tcp.idle_timeout.as_secs()),
        Dispatcher::tcp_keepalive,
    );
    Ok(Dispatcher::new(sources)
        .with_nsid(config.server.nsid.as_deref().map(str::as_bytes))
        .with_tcp_keepalive(keepalive)
        .with_chaos(config.chaos.options())
        .with_transfer(config.transfer_policy())
        .with_update(config.update_policy())
        .with_keys(config.key_ring())
        .with_cookies(cookies)
        .with_rrl(rrl)
        .with_metrics(metrics)
        .with_secondary(refresher.policy(&config.secondary, &config.notify.allow))
        .with_tls_server(config.tls.server.clone())
        .with_dnstap(dnstap))
}

/// The secondary zones of `config` and the keys their primaries use, over
/// `sources` (the refresher's settings).
pub fn secondary_settings(config: &Config, sources: &SourceList) -> SecondarySettings {
    SecondarySettings {
        zones: config.secondary.clone(),
        keys: config.key_ring(),
        tls: config.tls.clients.clone(),
        sources: sources.clone(),
    }
}

/// The write sides of `sources` to watch for serial changes, the NOTIFY
/// targets of `config` and the keys they sign with (the notifier's settings).
pub fn notify_settings(config: &Config, sources: &SourceList) -> NotifySettings {
    NotifySettings {
        writers: sources.writers(),
        config: config.notify.clone(),
        keys: config.key_ring(),
    }
}

/// The catalog zones of `config` to produce (`[[catalog]]`), written
/// through the write sides of `sources` (the producers' settings).
pub fn producer_settings(config: &Config, sources: &SourceList) -> ProducerSettings {
    ProducerSettings {
        producers: config.catalog.producers.clone(),
        sources: sources.clone(),
    }
}

/// The zones of `config` signed online (`[[signing.zone]]`), signed
/// through the write sides of `sources` (the signer's settings).
pub fn signer_settings(config: &Config, sources: &SourceList) -> SignerSettings {
    SignerSettings {
        zones: config.signing.zones.clone(),
        sources: sources.clone(),
        serial: config.update_policy().serial,
    }
}

/// Most zone names a "serving" line lists before it says how many more.
const ZONES_LISTED: usize = 20;

/// Logs one line per data source: how many zones it serves and their names
/// (`serving 2 zones from sqlite3:/var/lib/authd/zones.sqlite3: example.com.,
/// example.org.`), the first 20 of them (`ZONES_LISTED`) and a count of the
/// rest, each line after `prefix`.
pub fn log_serving(sources: &SourceList, prefix: &str) {
    for (source, zones) in sources.zones() {
        match zones {
            Ok(zones) => {
                let mut names: Vec<String> = zones
                    .iter()
                    .take(ZONES_LISTED)
                    .map(|z| z.origin.to_string())
                    .collect();
                if zones.len() > ZONES_LISTED {
                    names.push(format!("and {} more", zones.len() - ZONES_LISTED));
                }
                let noun = if zones.len() == 1 { "zone" } else { "zones" };
                let list = if names.is_empty() {
                    String::new()
                } else {
                    format!(": {}", names.join(", "))
                };
                tracing::info!(
                    "{prefix}serving {} {noun} from {}{list}",
                    zones.len(),
                    source.describe()
                );
            }
            Err(e) => tracing::warn!("{prefix}{}: cannot list zones: {e}", source.describe()),
        }
    }
}

/// What a reload changes on a running server: the configuration in force,
/// the state of the last load (what the next compares zones against), the
/// handle the server answers through, and the background tasks given new
/// settings (NOTIFY out, the secondary zones' refresher, the catalog
/// producers).
pub struct Reloader {
    running: Config,
    /// The configuration as read, without catalog members (what a catalog
    /// change re-applies).
    base: Config,
    /// The catalog consumer's members (RFC 9432).
    consumer: Consumer,
    state: Option<LoadState>,
    handle: DispatcherHandle,
    notifier: Notifier,
    refresher: Refresher,
    producers: Producers,
    signer: Signer,
    /// The TCP connection table counts clients by these from start to stop.
    tcp_prefixes: (u8, u8),
}

impl Reloader {
    /// The reloader of a server started with `running`, whose sources the
    /// load that left `state` built, answering through `handle`, announcing
    /// serial changes with `notifier`, following its secondary zones with
    /// `refresher`, keeping its catalog zones with `producers` and signing
    /// its signed zones' SQL edits with `signer`.
    pub fn new(
        running: Config,
        state: LoadState,
        handle: DispatcherHandle,
        notifier: Notifier,
        refresher: Refresher,
        (producers, signer): (Producers, Signer),
    ) -> Reloader {
        let tcp_prefixes = (
            running.rrl.settings.ipv4_prefix,
            running.rrl.settings.ipv6_prefix,
        );
        Reloader {
            base: running.clone(),
            consumer: Consumer::default(),
            running,
            state: Some(state),
            handle,
            notifier,
            refresher,
            producers,
            signer,
            tcp_prefixes,
        }
    }

    /// One reload. `read` reads the configuration again (the caller's way:
    /// file, environment, command line); it, the secondary zones' DBs and
    /// the zones are loaded on a blocking thread while the current
    /// dispatcher keeps answering; then a new dispatcher ([`reloaded`]) is
    /// swapped in, the notifier given the new DBs, targets and keys, the
    /// refresher the new secondary zones and the producers the new
    /// `[[catalog]]` entries and sources. A reload whose configuration or
    /// sources cannot be read (a bad file, a DB, two sources claiming one
    /// zone) changes nothing; a zone that fails keeps its previous version.
    /// Returns the summary line, also logged: `reload: N zones reloaded, M
    /// unchanged, K failed, S served from sqlite3`, then a line `warning:
    /// …` for each setting that needs a restart (logged as warnings), or
    /// `reload failed: …; still serving the previous configuration and
    /// zones`. Counted in the metrics when they are on.
    pub async fn reload<F, E>(&mut self, read: F) -> String
    where
        F: FnOnce() -> Result<Config, E> + Send + 'static,
        E: Display,
    {
        let line = self.reload_once(read).await;
        // A new configuration may change what the catalogs' members are
        // (groups, catalogs added or removed).
        if !line.starts_with("reload failed") {
            self.sync_catalogs().await;
        }
        line
    }

    /// [`Self::reload`] without the catalog step: the configuration read,
    /// the catalog members known so far added, the zones loaded, applied.
    async fn reload_once<F, E>(&mut self, read: F) -> String
    where
        F: FnOnce() -> Result<Config, E> + Send + 'static,
        E: Display,
    {
        let prev = self.state.take().unwrap_or_default();
        let members = self.consumer.members();
        let joined = tokio::task::spawn_blocking(move || {
            let result = read().map_err(|e| e.to_string()).and_then(|base| {
                let config =
                    base.with_catalog_members(members.secondaries(&base.secondary, &base.catalog));
                crate::secondary::prepare_dbs(&config.secondary).map_err(|e| e.to_string())?;
                let loaded = reload::load(&config, Some(&prev)).map_err(|e| e.to_string())?;
                Ok((base, config, loaded))
            });
            (prev, result)
        })
        .await;
        match joined {
            Err(e) => {
                // The previous state went down with the task: the next
                // reload rebuilds every zone.
                self.state = Some(LoadState::default());
                self.failed(&e)
            }
            Ok((prev, Err(e))) => {
                self.state = Some(prev);
                self.failed(&e)
            }
            Ok((_, Ok((base, config, loaded)))) => {
                self.base = base;
                self.apply(config, loaded)
            }
        }
    }

    /// Reads the catalog zones (`[[secondary]]` with `catalog = true`) from
    /// the served sources and, when their members changed, serves the new
    /// set: the zones loaded again with the configuration in force, then
    /// the data of removed members deleted ([`Consumer`]). Called at start,
    /// after each transfer that changed a catalog zone, and after a reload.
    /// Returns the reload's summary line when the members changed.
    pub async fn sync_catalogs(&mut self) -> Option<String> {
        if !self.base.secondary.iter().any(|z| z.catalog) && self.consumer.members().is_empty() {
            return None;
        }
        let sources = self.handle.load().sources().clone();
        let base = self.base.clone();
        let served = self.running.secondary.clone();
        // At start the members come from the catalogs' DBs: they are new
        // to the running configuration even when no catalog changed.
        let had_none = self.consumer.members().is_empty();
        let mut consumer = std::mem::take(&mut self.consumer);
        let joined = tokio::task::spawn_blocking(move || {
            let mut local: HashSet<Name> = base.configured_zones().into_iter().collect();
            local.extend(locally_served(&sources, &served));
            let report = consumer.sync(&base.secondary, &sources, &|z| local.contains(z));
            (consumer, report)
        })
        .await;
        let Ok((consumer, report)) = joined else {
            tracing::error!("catalog zones: the sync task failed; members unchanged");
            return None;
        };
        self.consumer = consumer;
        if !report.changed() && (!had_none || self.consumer.members().is_empty()) {
            return None;
        }
        let base = self.base.clone();
        let line = self
            .reload_once(move || Ok::<Config, std::convert::Infallible>(base))
            .await;
        let mut consumer = std::mem::take(&mut self.consumer);
        if let Ok(c) = tokio::task::spawn_blocking(move || {
            consumer.finish();
            consumer
        })
        .await
        {
            self.consumer = c;
        }
        Some(line)
    }

    /// The second half of [`Self::reload`], once `config` is read and its
    /// zones `loaded`.
    fn apply(&mut self, config: Config, loaded: Loaded) -> String {
        for f in &loaded.report.failed {
            tracing::error!("reload: {f}");
        }
        self.refresher
            .update(secondary_settings(&config, &loaded.sources));
        let notify = notify_settings(&config, &loaded.sources);
        let producers = producer_settings(&config, &loaded.sources);
        let signer = signer_settings(&config, &loaded.sources);
        log_serving(&loaded.sources, "reload: ");
        let next = reloaded(
            &config,
            loaded.sources,
            &self.refresher,
            &self.handle.load(),
        );
        let next = match next {
            Ok(next) => next,
            Err(e) => {
                self.state = Some(loaded.state);
                return self.failed(&e);
            }
        };
        self.handle.store(Arc::new(next));
        self.count(true);
        self.notifier.update(notify);
        self.producers.update(producers);
        self.signer.update(signer);
        let mut warnings = restart_only(&self.running, &config);
        if (
            config.rrl.settings.ipv4_prefix,
            config.rrl.settings.ipv6_prefix,
        ) != self.tcp_prefixes
        {
            warnings.push(
                "reload: [rrl] prefix lengths changed; rate limiting uses them now, \
                 the TCP per-client limit after a restart"
                    .to_string(),
            );
        }
        for w in &warnings {
            tracing::warn!("{w}");
        }
        let line = format!("reload: {}", loaded.report);
        tracing::info!("{line}");
        // `authc reload` shows the warnings too, after the summary.
        let mut answer = line;
        for w in &warnings {
            answer.push_str("\nwarning: ");
            answer.push_str(w);
        }
        // Sockets and threads stay those running.
        let running = std::mem::take(&mut self.running);
        self.running = Config {
            listen: running.listen,
            // The NSID is the dispatcher's, applied; the threads and the
            // proxies (the sockets') stay.
            server: ServerConfig {
                udp_workers: running.server.udp_workers,
                nsid: config.server.nsid.clone(),
                proxy_allow: running.server.proxy_allow,
            },
            tcp: running.tcp,
            metrics_listen: running.metrics_listen,
            control_socket: running.control_socket,
            dnstap: running.dnstap,
            // The TLS sockets stay; certificate, key and ca are applied.
            tls: crate::tls::TlsConfig {
                listen: running.tls.listen,
                ..config.tls
            },
            ..config
        };
        self.state = Some(loaded.state);
        answer
    }

    /// Logs and counts a failed reload; its summary line.
    fn failed(&self, e: &dyn Display) -> String {
        let line =
            format!("reload failed: {e}; still serving the previous configuration and zones");
        tracing::error!("{line}");
        self.count(false);
        line
    }

    /// Counts a reload, applied (`ok`) or failed, when metrics are on.
    fn count(&self, ok: bool) {
        if let Some(m) = self.handle.load().metrics() {
            m.reloads[usize::from(!ok)].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The warnings about settings a reload read but cannot apply (sockets,
/// threads), one line each.
fn restart_only(running: &Config, config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    if config.listen != running.listen {
        out.push(format!(
            "reload: listen addresses changed ({} -> {}); restart authd to apply the change",
            addr_list(&running.listen),
            addr_list(&config.listen)
        ));
    }
    if config.server.udp_workers != running.server.udp_workers {
        out.push(format!(
            "reload: [server] udp_workers changed ({} -> {}); restart authd to apply it",
            running.server.udp_workers, config.server.udp_workers
        ));
    }
    if config.server.proxy_allow != running.server.proxy_allow {
        out.push("reload: [server] proxy_allow changed; restart authd to apply it".to_string());
    }
    for (changed, what) in [
        (
            config.tcp != running.tcp,
            "[tcp] settings changed; restart authd to apply them",
        ),
        (
            config.metrics_listen != running.metrics_listen,
            "[metrics] listen changed; restart authd to apply it",
        ),
        (
            config.dnstap != running.dnstap,
            "[dnstap] settings changed; restart authd to apply them",
        ),
        (
            config.control_socket != running.control_socket,
            "[control] socket changed; restart authd to apply it",
        ),
        (
            config.tls.listen != running.tls.listen,
            "[tls] listen changed; restart authd to apply it (certificate and key are applied)",
        ),
    ] {
        if changed {
            out.push(format!("reload: {what}"));
        }
    }
    out
}

fn addr_list(addrs: &[SocketAddr]) -> String {
    addrs
        .iter()
        .map(SocketAddr::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use crate::config::{DataSourceConfig, MemoryZoneConfig};
    use crate::query::Transport;
    use crate::rrl::{Action, ResponseKind};
    use crate::wire::Cookie;

    const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));

    fn sources() -> SourceList {
        SourceList::new(Vec::new())
    }

    /// What `d`'s rate limiter does with one more answer to [`CLIENT`].
    fn one_more(d: &Dispatcher, now: u64) -> Action {
        let rrl = d.rrl().expect("rate limiting on");
        rrl.account(CLIENT, ResponseKind::Answer, 1, now)
    }

    /// The server cookie `d` makes for client cookie `client` at `now`.
    fn server_cookie(d: &Dispatcher, client: [u8; 8], now: u64) -> Vec<u8> {
        let cookies = d.cookies().expect("cookies on");
        let checked = cookies.answer(
            &Cookie {
                client,
                server: &[],
            },
            CLIENT,
            now,
        );
        checked.reply[8..].to_vec()
    }

    /// Whether `d` takes `server` back from the client of cookie `client`.
    fn takes(d: &Dispatcher, client: [u8; 8], server: &[u8], now: u64) -> bool {
        let cookies = d.cookies().expect("cookies on");
        cookies
            .answer(&Cookie { client, server }, CLIENT, now)
            .valid
    }

    /// Built twice (a reload) with the same settings: the random cookie key
    /// (its cookies still valid), the rate limiter's buckets (a limited
    /// client still limited), the counters and the dnstap log are the same;
    /// a changed `[rrl]` setting starts a new table (the client forgiven),
    /// the cookies still carried over.
    #[tokio::test]
    async fn a_reload_keeps_the_random_cookie_key_and_unchanged_rate_limits() {
        let refresher = Refresher::spawn(SecondarySettings::default(), None);
        let mut config = Config::default();
        config.cookies.enabled = true;
        config.cookies.secret = None;
        config.rrl.enabled = true;
        config.rrl.settings.responses_per_second = 1;
        config.rrl.settings.slip = 0;
        let metrics = Metrics::new();
        let dir = tempfile::tempdir().expect("tempdir");
        let tap = Dnstap::start(&crate::dnstap::Settings {
            output: crate::dnstap::Output::File(dir.path().join("tap")),
            identity: None,
            version: None,
        })
        .expect("dnstap");
        let now = crate::sys::unix_seconds();
        let client = *b"clientck";

        let first = dispatcher(
            &config,
            sources(),
            &refresher,
            (Some(Arc::clone(&metrics)), Some(Arc::clone(&tap))),
            None,
        )
        .expect("first");
        let cookies = first.cookies().expect("cookies on").clone();
        assert!(cookies.is_random());
        let made = server_cookie(&first, client, now);
        assert_eq!(one_more(&first, now), Action::Send);
        assert_eq!(one_more(&first, now), Action::Drop, "over 1/s");

        let second = reloaded(&config, sources(), &refresher, &first).expect("reload");
        assert_eq!(second.cookies(), Some(&cookies));
        assert!(takes(&second, client, &made, now));
        let rrl = first.rrl().expect("rate limiting on");
        assert!(Arc::ptr_eq(second.rrl().expect("rate limiting on"), rrl));
        assert_eq!(one_more(&second, now), Action::Drop, "still limited");
        assert!(Arc::ptr_eq(second.metrics().expect("metrics"), &metrics));
        assert!(Arc::ptr_eq(second.dnstap().expect("dnstap"), &tap));

        // Another start draws another key: the first one's cookies fail.
        let other = dispatcher(&config, sources(), &refresher, (None, None), None).expect("other");
        assert_ne!(other.cookies(), Some(&cookies));
        assert!(!takes(&other, client, &made, now));

        config.rrl.settings.responses_per_second = 2;
        let third = reloaded(&config, sources(), &refresher, &second).expect("reload");
        let new = third.rrl().expect("rate limiting on");
        assert!(!Arc::ptr_eq(new, rrl));
        assert_eq!(*new.settings(), config.rrl.settings);
        assert_eq!(one_more(&third, now), Action::Send, "a new table");
        assert_eq!(third.cookies(), Some(&cookies));
        assert!(Arc::ptr_eq(third.metrics().expect("metrics"), &metrics));

        // Rate limiting or cookies turned off: gone.
        config.rrl.enabled = false;
        config.cookies.enabled = false;
        let fourth = reloaded(&config, sources(), &refresher, &third).expect("reload");
        assert!(fourth.rrl().is_none() && fourth.cookies().is_none());
        tap.shutdown();
    }

    /// A changed configured secret keeps the old one's cookies valid; a
    /// secret taken out of the configuration is not kept (a new random key).
    #[tokio::test]
    async fn a_reload_keeps_a_replaced_cookie_secret_accepted() {
        let refresher = Refresher::spawn(SecondarySettings::default(), None);
        let mut config = Config::default();
        config.cookies.enabled = true;
        config.cookies.secret = Some([1; 16]);
        let now = crate::sys::unix_seconds();
        let client = *b"clientck";
        let first = dispatcher(&config, sources(), &refresher, (None, None), None).expect("first");
        let made = server_cookie(&first, client, now);
        config.cookies.secret = Some([2; 16]);
        let second = reloaded(&config, sources(), &refresher, &first).expect("reload");
        assert!(takes(&second, client, &made, now), "the previous secret");
        assert_ne!(
            server_cookie(&second, client, now),
            made,
            "made with the new one"
        );
        config.cookies.secret = None;
        let third = reloaded(&config, sources(), &refresher, &second).expect("reload");
        assert!(third.cookies().expect("cookies on").is_random());
        assert!(!takes(&third, client, &made, now));
    }

    /// `example.com.` with `www` at 192.0.2.`v`, serial `v`.
    fn zone(v: u8) -> String {
        format!(
            "$ORIGIN example.com.\n$TTL 300\n@ SOA ns hm {v} 3600 900 604800 300\n\
             @ NS ns\nns A 192.0.2.53\nwww A 192.0.2.{v}\n"
        )
    }

    /// The last byte of the address `handle`'s dispatcher answers for
    /// `www.example.com. A`.
    fn www(handle: &DispatcherHandle) -> u8 {
        let mut q = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        q.extend_from_slice(b"\x03www\x07example\x03com\x00\x00\x01\x00\x01");
        let mut out = Vec::new();
        handle.load().handle(&q, Transport::Tcp, CLIENT, &mut out);
        let reply = hickory_proto::op::Message::from_vec(&out).expect("a message");
        match &reply.answers[..] {
            [a] => match &a.data {
                hickory_proto::rr::RData::A(a) => a.0.octets()[3],
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    /// A reload swaps in the changed zone and carries the rate limiter over;
    /// one whose configuration cannot be read, or whose zone fails, keeps
    /// what is served; an unchanged zone is not rebuilt. Each says so in
    /// its summary line.
    #[tokio::test]
    async fn a_reload_swaps_in_new_zones_and_a_failed_one_changes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("example.com.zone");
        std::fs::write(&file, zone(1)).expect("write zone");
        let mut config = Config {
            datasources: vec![DataSourceConfig::memory(
                vec![MemoryZoneConfig {
                    origin: "example.com.".parse().expect("origin"),
                    file: Some(file.clone()),
                }],
                None,
            )],
            ..Config::default()
        };
        config.rrl.enabled = true;
        let loaded = reload::load(&config, None).expect("load");
        let refresher = Refresher::spawn(secondary_settings(&config, &loaded.sources), None);
        let notifier =
            Notifier::spawn(notify_settings(&config, &loaded.sources)).expect("notifier");
        let metrics = Metrics::new();
        let first = dispatcher(
            &config,
            loaded.sources,
            &refresher,
            (Some(Arc::clone(&metrics)), None),
            Some(notifier.waker()),
        )
        .expect("dispatcher");
        let handle = DispatcherHandle::new(Arc::new(first));
        let rrl = Arc::clone(handle.load().rrl().expect("rate limiting on"));
        let mut reloader = Reloader::new(
            config.clone(),
            loaded.state,
            handle.clone(),
            notifier,
            refresher,
            (
                Producers::spawn(producer_settings(&config, &handle.load().sources().clone()))
                    .expect("producers"),
                Signer::spawn(signer_settings(&config, &handle.load().sources().clone()))
                    .expect("signer"),
            ),
        );
        assert_eq!(www(&handle), 1);

        std::fs::write(&file, zone(2)).expect("write zone");
        let again = config.clone();
        let line = reloader.reload(move || Ok::<_, String>(again)).await;
        assert_eq!(
            line,
            "reload: 1 zones reloaded, 0 unchanged, 0 failed, 0 served from sqlite3"
        );
        assert_eq!(www(&handle), 2);
        assert!(Arc::ptr_eq(
            handle.load().rrl().expect("rate limiting on"),
            &rrl
        ));

        let serving = Arc::clone(&handle.load());
        let line = reloader.reload(|| Err::<Config, _>("no such file")).await;
        assert_eq!(
            line,
            "reload failed: no such file; still serving the previous configuration and zones"
        );
        assert!(Arc::ptr_eq(&handle.load(), &serving));

        let again = config.clone();
        let line = reloader.reload(move || Ok::<_, String>(again)).await;
        assert_eq!(
            line,
            "reload: 0 zones reloaded, 1 unchanged, 0 failed, 0 served from sqlite3"
        );
        std::fs::write(&file, "@ SOA broken").expect("write zone");
        let again = config.clone();
        let line = reloader.reload(move || Ok::<_, String>(again)).await;
        assert_eq!(
            line,
            "reload: 0 zones reloaded, 0 unchanged, 1 failed, 0 served from sqlite3"
        );
        assert_eq!(www(&handle), 2, "the previous version still served");
        let counted = |i: usize| metrics.reloads[i].load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!((counted(0), counted(1)), (3, 1), "applied, failed");

        // Settings that need a restart: the summary, then one warning line
        // each (what `authc reload` prints).
        let mut changed = config.clone();
        changed.server.udp_workers = config.server.udp_workers + 1;
        changed.listen = vec!["127.0.0.1:5399".parse().expect("addr")];
        let line = reloader.reload(move || Ok::<_, String>(changed)).await;
        assert_eq!(
            line,
            format!(
                "reload: 0 zones reloaded, 0 unchanged, 1 failed, 0 served from sqlite3\n\
                 warning: reload: listen addresses changed ({} -> 127.0.0.1:5399); restart authd \
                 to apply the change\n\
                 warning: reload: [server] udp_workers changed ({} -> {}); restart authd to \
                 apply it",
                addr_list(&config.listen),
                config.server.udp_workers,
                config.server.udp_workers + 1
            )
        );
    }
}
