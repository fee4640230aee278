//! `authd`: the authoritative DNS server.
//!
//! ```text
//! authd --config PATH [--listen ADDR:PORT]... [--db PATH]... [--zone ORIGIN=FILE]... [--udp-workers N] [--log-level FILTER]
//! authd --zone ORIGIN=MASTERFILE... [--db PATH]... [--listen ADDR:PORT]...
//! authd --db PATH [--listen ADDR:PORT]...
//! authd                      # the bundled example zone on 127.0.0.1:5300
//! authd keygen NAME [--algorithm hmac-sha256]   # print a fresh [[key]] block
//! ```
//!
//! Settings come from the config file (see `authd::config` and
//! `docs/CONFIG.md`), then `AUTHD_*` environment variables, then the command
//! line: `--listen` replaces `listen`; `--zone` and `--db` replace the
//! `[[datasource]]` list with one memory source holding every `--zone` master
//! file and one sqlite3 source per `--db`. With none of `--config`, `--db`,
//! `--zone` it serves the bundled example zone from `authd-example.sqlite3` in
//! the current folder, creating it on first start.
//!
//! It logs to stderr (`--log-level`, else `RUST_LOG`, else `info`; JSON lines
//! with `--log-format json`), one line
//! `listening on ADDR:PORT` per bound address. SIGTERM and SIGINT stop it
//! (exit 0). SIGHUP reloads: the configuration is read again (file,
//! environment, then the same command line) and the zones are reloaded off the
//! query path, then swapped in atomically; a zone that fails keeps its previous
//! version; one line `reload: N zones reloaded, M unchanged, K failed, S served
//! from sqlite3` follows.
//! Everything else the configuration says applies at once too (`[transfer]`,
//! `[notify]`, `[chaos]`, the TSIG `[[key]]`s, the data sources, the `[[secondary]]` zones, the
//! `[[catalog]]` zones produced); only listen-address, `[server]
//! udp_workers`, `[tcp]`, `[metrics]`, `[dnstap]` and `[control]` changes need
//! a restart (a warning says so, and `authc reload` shows it). A
//! start-up error (including a zone that fails to load) prints one line
//! `authd: <message>` and exits 1.
//!
//! `authd keygen NAME` prints a TSIG key (RFC 8945) with a fresh random
//! secret as a `[[key]]` block ready to paste into the configuration, like
//! BIND's `tsig-keygen`, and exits 0 (1 if the system's random source fails).

/// mimalloc instead of glibc's malloc: the sqlite3 path builds a few small
/// objects per row read, and glibc's allocator was a fifth of its time
/// (docs/performance-log.md, "Allocator"). The memory path allocates nothing.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, anyhow, bail};
use authd::catalog::producer::Producers;
use authd::config::{self, Config, DataSourceConfig, MemoryZoneConfig};
use authd::keys::{self, Algorithm};
use authd::metrics::Metrics;
use authd::notify::Notifier;
use authd::secondary::Refresher;
use authd::server::build::{
    self, Reloader, log_serving, notify_settings, producer_settings, secondary_settings,
    signer_settings,
};
use authd::server::reload;
use authd::server::{DispatcherHandle, Server, ServerSettings};
use authd_datasrc::ZoneWriter;
use authd_datasrc::sqlite::{SqliteSource, SqliteWriter};
use authd_datasrc::write::JournalPolicy;
use authd_datasrc::{DataSource, Name};
use clap::{Parser, Subcommand, ValueEnum};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::{Notify, mpsc, oneshot};
use tracing_subscriber::EnvFilter;

/// The bundled example zone (see `auth/src/default/README.md`).
const EXAMPLE_ZONE: &str = include_str!("../default/example.com.zone");
/// Its origin.
const EXAMPLE_ORIGIN: &str = "example.com.";
/// The DB the example zone is served from, in the current folder.
const EXAMPLE_DB: &str = "authd-example.sqlite3";

/// Authoritative DNS server.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "authd",
    version,
    about,
    args_conflicts_with_subcommands = true,
    after_help = "Configuration: docs/CONFIG.md (every key, AUTHD_* variables). Signals: SIGHUP \
                  reloads the configuration and zones; SIGTERM and SIGINT stop. Control: authc \
                  (with [control] socket)."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// TOML configuration file (keys can be overridden by AUTHD_* variables).
    #[arg(short, long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Serve every zone of this sqlite3 zone DB (repeatable; replaces the
    /// configured data sources).
    #[arg(long, value_name = "PATH")]
    db: Vec<PathBuf>,
    /// Serve zone ORIGIN from the master file FILE, in memory, e.g.
    /// `--zone example.com.=example.com.zone` or `--zone .=root.zone`
    /// (repeatable; with --db, replaces the configured data sources).
    #[arg(long, value_name = "ORIGIN=FILE", value_parser = parse_zone_arg)]
    zone: Vec<(Name, PathBuf)>,
    /// Address to serve UDP and TCP on, e.g. 127.0.0.1:53 or [::1]:53; port 0
    /// picks a free port (repeatable; replaces the configured `listen`).
    #[arg(short, long, value_name = "ADDR:PORT", value_parser = parse_listen)]
    listen: Vec<SocketAddr>,
    /// Hot-spot cache slots for the --db and --zone sources: a count, 0 to
    /// disable, or `unlimited` (default: 65536 for sqlite3, off for memory).
    #[arg(long, value_name = "N|unlimited", value_parser = parse_cache_slots, allow_negative_numbers = true)]
    cache_slots: Option<authd_cache::Slots>,
    /// UDP worker threads per listen address, each with its own SO_REUSEPORT
    /// socket (replaces `[server] udp_workers`; default: one per CPU).
    #[arg(long, value_name = "N", value_parser = parse_udp_workers, allow_negative_numbers = true)]
    udp_workers: Option<usize>,
    /// Log filter: a level (error, warn, info, debug, trace) or tracing
    /// directives such as `authd=debug`. Default: $RUST_LOG, else info.
    #[arg(long, value_name = "FILTER")]
    log_level: Option<String>,
    /// Log line format: `text` (default) or `json` (one JSON object a line,
    /// with `timestamp`, `level`, `target` and `fields.message`).
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Commands besides serving.
#[derive(Debug, Clone, Subcommand)]
enum Command {
    /// Print a fresh TSIG key as a [[key]] block to paste into the
    /// configuration (like BIND's tsig-keygen).
    Keygen {
        /// The key name, e.g. transfer-key. (a domain name; the final dot is added).
        #[arg(value_parser = parse_key_name)]
        name: Name,
        /// hmac-sha256, hmac-sha224, hmac-sha384, hmac-sha512, hmac-sha1 or
        /// hmac-md5 (for old peers only).
        #[arg(short, long, default_value = "hmac-sha256", value_parser = parse_algorithm)]
        algorithm: Algorithm,
    },
}

fn parse_key_name(s: &str) -> Result<Name, String> {
    Name::parse(s.trim(), Some(&Name::root())).map_err(|e| format!("bad key name {s:?}: {e}"))
}

fn parse_algorithm(s: &str) -> Result<Algorithm, String> {
    s.parse()
}

fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    config::parse_listen(s)
}

fn parse_udp_workers(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=config::MAX_UDP_WORKERS).contains(&n) => Ok(n),
        _ => Err(format!(
            "{s:?} is not a worker count (1..={})",
            config::MAX_UDP_WORKERS
        )),
    }
}

/// Parses a `--cache-slots` value: a count (0 = off) or `unlimited`.
fn parse_cache_slots(s: &str) -> Result<authd_cache::Slots, String> {
    if s == "unlimited" {
        return Ok(authd_cache::Slots::Unlimited);
    }
    s.parse::<usize>()
        .map(authd_cache::Slots::from_count)
        .map_err(|_| format!("{s:?} is neither a count nor \"unlimited\""))
}

fn parse_zone_arg(s: &str) -> Result<(Name, PathBuf), String> {
    let Some((origin, file)) = s.split_once('=') else {
        return Err(format!(
            "{s:?} is not ORIGIN=FILE (e.g. example.com.=example.com.zone)"
        ));
    };
    if file.is_empty() {
        return Err(format!("{s:?}: the master file is missing"));
    }
    Ok((config::parse_origin(origin)?, PathBuf::from(file)))
}

fn main() -> ExitCode {
    authd::allocator::tune();
    let cli: Cli = authd::cli::parse_args("authd");
    if let Some(Command::Keygen { name, algorithm }) = &cli.command {
        return match keys::key_block(name, *algorithm) {
            Ok(block) => {
                print!("{block}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("authd: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if let Err(e) = init_logging(cli.log_level.as_deref(), cli.log_format) {
        eprintln!("authd: {e}");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("authd: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("authd: {e}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(level: Option<&str>, format: LogFormat) -> anyhow::Result<()> {
    let filter = match level {
        Some(l) => authd::cli::log_filter(l, "--log-level").map_err(|e| anyhow!(e))?,
        None => match std::env::var("RUST_LOG") {
            Ok(v) if !v.trim().is_empty() => {
                authd::cli::log_filter(&v, "RUST_LOG").map_err(|e| anyhow!(e))?
            }
            _ => EnvFilter::new("info"),
        },
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().with_ansi(false).try_init(),
    }
    .map_err(|e| anyhow!("cannot set up logging: {e}"))
}

/// True when authd serves the bundled example zone (no data source given).
fn example_mode(cli: &Cli) -> bool {
    cli.config.is_none() && cli.db.is_empty() && cli.zone.is_empty()
}

/// The configuration: the file (if any), `AUTHD_*` variables, then `cli`.
fn effective_config(cli: &Cli) -> anyhow::Result<Config> {
    let mut config = match &cli.config {
        Some(path) => Config::load(path)?,
        None => Config::from_env()?,
    };
    if !cli.listen.is_empty() {
        let mut listen = Vec::with_capacity(cli.listen.len());
        for addr in &cli.listen {
            if !listen.contains(addr) {
                listen.push(*addr);
            }
        }
        config.listen = listen;
    }
    if let Some(n) = cli.udp_workers {
        config.server.udp_workers = n;
    }
    if !cli.zone.is_empty() || !cli.db.is_empty() {
        let mut datasources = Vec::with_capacity(cli.db.len() + 1);
        if !cli.zone.is_empty() {
            let mut zones: Vec<MemoryZoneConfig> = Vec::with_capacity(cli.zone.len());
            for (origin, file) in &cli.zone {
                if zones.iter().any(|z| z.origin == *origin) {
                    bail!("--zone {origin} is given twice");
                }
                zones.push(MemoryZoneConfig {
                    origin: origin.clone(),
                    file: Some(file.clone()),
                });
            }
            datasources.push(DataSourceConfig::memory(zones, None));
        }
        datasources.extend(cli.db.iter().map(DataSourceConfig::sqlite3));
        // The secondary zones stay served from their DBs.
        datasources.extend(config.secondary_datasources());
        if let Some(slots) = cli.cache_slots {
            for ds in &mut datasources {
                ds.cache.enabled = slots != authd_cache::Slots::Disabled;
                ds.cache.slots = slots;
            }
        }
        config.datasources = datasources;
    } else if example_mode(cli) {
        config.datasources = vec![DataSourceConfig::sqlite3(EXAMPLE_DB)];
    }
    Ok(config)
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    // Signals first, so a SIGTERM or SIGHUP right after "listening on" is handled.
    let shutdown = shutdown_signal().context("cannot install signal handlers")?;
    let hup = signal(SignalKind::hangup()).context("cannot install signal handlers")?;

    let config = effective_config(&cli)?;
    let example = example_mode(&cli);
    if example {
        prepare_example_db(Path::new(EXAMPLE_DB))?;
    }

    let load_config = config.clone();
    let loaded = tokio::task::spawn_blocking(move || {
        authd::secondary::prepare_dbs(&load_config.secondary).map_err(|e| anyhow!("{e}"))?;
        reload::load(&load_config, None).map_err(anyhow::Error::from)
    })
    .await
    .map_err(|e| anyhow!("loading zones failed: {e}"))??;
    if let Some(first) = loaded.report.failed.first() {
        for f in loaded.report.failed.iter().skip(1) {
            tracing::error!("zone {} ({}): {}", f.zone, f.source, f.error);
        }
        bail!("zone {} ({}): {}", first.zone, first.source, first.error);
    }
    let server = Server::bind(&ServerSettings::from(&config)).await?;
    let sources = loaded.sources;

    if sources.sources().is_empty() {
        tracing::warn!("no data source configured: every query will be refused");
    }
    log_serving(&sources, "");
    let addrs = server.local_addrs();
    for addr in &addrs {
        tracing::info!("listening on {addr} (UDP and TCP)");
    }
    for addr in server.tls_addrs() {
        tracing::info!("listening on {addr} (TLS: DNS over TLS and zone transfers)");
    }
    if example && let Some(addr) = addrs.first() {
        tracing::info!(
            "serving the bundled example zone; try: dig @{} -p {} www.example.com A",
            addr.ip(),
            addr.port()
        );
    }

    // Metrics: one set of counters for the process, handed to every snapshot
    // (also for `authc stats` when only the control socket is on).
    let metrics =
        (config.metrics_listen.is_some() || config.control_socket.is_some()).then(Metrics::new);
    // dnstap: one log for the process, carried over by every reload.
    let dnstap = match &config.dnstap {
        Some(settings) => {
            let tap = authd::dnstap::Dnstap::start(settings)
                .map_err(|e| anyhow!("cannot write dnstap to {}: {e}", settings.output))?;
            tracing::info!("dnstap to {}", settings.output);
            Some(tap)
        }
        None => None,
    };
    if let (Some(m), Some(tap)) = (&metrics, &dnstap) {
        m.set_dnstap(Arc::clone(tap));
    }
    // Sign the [[signing.zone]]s: their first signing, plain SQL edits,
    // refreshes (every other write signs itself). Started first: it stores
    // the policies, so a secondary zone's first transfer is signed.
    let signer = authd::signing::Signer::spawn(signer_settings(&config, &sources))
        .context("cannot start the signer")?;
    // Follow the secondary zones' primaries (RFC 1035 §4.3.5, RFC 1996).
    let refresher = Refresher::spawn(secondary_settings(&config, &sources), metrics.clone());
    let notify = notify_settings(&config, &sources);
    let catalogs = producer_settings(&config, &sources);
    // NOTIFY secondaries when a served sqlite3 zone's serial changes (RFC
    // 1996); a successful UPDATE wakes it at once.
    let notifier = Notifier::spawn(notify).context("cannot start the NOTIFY poller")?;
    let handle = DispatcherHandle::new(Arc::new(build::dispatcher(
        &config,
        sources,
        &refresher,
        (metrics.clone(), dnstap.clone()),
        Some(notifier.waker()),
    )?));
    if let Some(m) = &metrics {
        let h = handle.clone();
        m.set_sources(Box::new(move || h.load().sources().clone()));
    }
    if let (Some(m), Some(listen)) = (&metrics, config.metrics_listen) {
        let bound = authd::metrics::serve(listen, Arc::clone(m))
            .await
            .map_err(|e| anyhow!("cannot serve metrics on {listen}: {e}"))?;
        tracing::info!("metrics on http://{bound}/metrics");
    }
    // Keep the [[catalog]] zones listing their DBs' zones (RFC 9432).
    let producers = Producers::spawn(catalogs).context("cannot start the catalog producers")?;
    let (ask_reload, asked) = mpsc::channel(4);
    let stop = Arc::new(Notify::new());
    if let Some(path) = &config.control_socket {
        let control = authd::control::Control {
            handle: handle.clone(),
            reload: ask_reload,
            stop: Arc::clone(&stop),
            metrics: metrics.clone(),
            started: std::time::Instant::now(),
            signing: signer.settings(),
        };
        authd::control::serve(path, control)
            .await
            .map_err(|e| anyhow!("cannot open the control socket {}: {e}", path.display()))?;
        tracing::info!("control socket {}", path.display());
    }
    let catalog_changes = refresher.catalog_changes();
    let mut reloader = Reloader::new(
        config,
        loaded.state,
        handle.clone(),
        notifier,
        refresher,
        (producers, signer),
    );
    // Serve the catalog zones' members (RFC 9432) from the first query on.
    reloader.sync_catalogs().await;
    let reloader = tokio::spawn(reload_loop(cli, reloader, (hup, catalog_changes), asked));
    let stopped = async move {
        tokio::select! {
            () = shutdown => {}
            () = stop.notified() => tracing::info!("stop asked on the control socket, shutting down"),
        }
    };
    // systemd (Type=notify): serving from here on.
    systemd_notify(&[sd_notify::NotifyState::Ready]);
    let served = server.serve(handle, stopped).await;
    systemd_notify(&[sd_notify::NotifyState::Stopping]);
    reloader.abort();
    if let Some(tap) = &dnstap {
        // Flush what is queued and write the STOP frame.
        tap.shutdown();
    }
    served?;
    tracing::info!("stopped");
    Ok(())
}

/// Tells systemd (when it started authd with Type=notify, i.e. set
/// `NOTIFY_SOCKET`) how authd stands; does nothing otherwise.
fn systemd_notify(states: &[sd_notify::NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::warn!("cannot notify systemd: {e}");
    }
}

/// CLOCK_MONOTONIC in microseconds, as systemd wants with RELOADING=1.
fn monotonic_usec() -> i128 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        i128::from(t.tv_sec()) * 1_000_000 + i128::from(t.tv_nsec()) / 1_000
    })
}

/// Reloads on every SIGHUP or `authc reload`, one reload at a time
/// (signals arriving during a reload are merged into one more reload): the
/// configuration read again as at start ([`effective_config`]), the rest in
/// [`Reloader::reload`]. systemd is told (RELOADING=1, then READY=1), and
/// `authc reload` gets the summary line.
async fn reload_loop(
    cli: Cli,
    mut reloader: Reloader,
    (mut hup, mut catalogs): (Signal, Option<mpsc::UnboundedReceiver<Name>>),
    mut asked: mpsc::Receiver<oneshot::Sender<String>>,
) {
    let cli = Arc::new(cli);
    loop {
        let catalog_changed = async {
            match catalogs.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        // A SIGHUP, or `authc reload` waiting for the summary line.
        let reply = tokio::select! {
            Some(origin) = catalog_changed => {
                // Transfers of several catalogs queued meanwhile: one sync.
                if let Some(rx) = catalogs.as_mut() {
                    while rx.try_recv().is_ok() {}
                }
                tracing::debug!("catalog zone {origin} changed; reading its members");
                reloader.sync_catalogs().await;
                continue;
            }
            signal = hup.recv() => {
                if signal.is_none() {
                    return;
                }
                tracing::info!("received SIGHUP, reloading the configuration and zones");
                None
            }
            Some(reply) = asked.recv() => {
                tracing::info!("reload asked on the control socket");
                Some(reply)
            }
        };
        systemd_notify(&[
            sd_notify::NotifyState::Reloading,
            sd_notify::NotifyState::MonotonicUsec(monotonic_usec()),
        ]);
        let cli = Arc::clone(&cli);
        let summary = reloader.reload(move || effective_config(&cli)).await;
        systemd_notify(&[sd_notify::NotifyState::Ready]);
        if let Some(reply) = reply {
            let _ = reply.send(summary);
        }
    }
}

/// A future that resolves on SIGTERM or SIGINT (after logging it).
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("received SIGTERM, shutting down"),
            _ = int.recv() => tracing::info!("received SIGINT, shutting down"),
        }
    })
}

/// Creates the example DB at `path` (schema 2.2) and loads the bundled zone into
/// it, unless it already holds the zone. Loading is one transaction, so an
/// interrupted first start leaves no half zone behind.
fn prepare_example_db(path: &Path) -> anyhow::Result<()> {
    let origin: Name = EXAMPLE_ORIGIN
        .parse()
        .map_err(|e| anyhow!("bad example origin: {e}"))?;
    let writer = SqliteWriter::create(path).map_err(|e| anyhow!("{e}"))?;
    let have = SqliteSource::open(path)
        .and_then(|s| s.zones())
        .map_err(|e| anyhow!("{e}"))?
        .iter()
        .any(|z| z.origin == origin);
    if have {
        return Ok(());
    }
    let records = authd_datasrc::zonefile::parse_master_text(
        EXAMPLE_ZONE,
        Path::new("example.com.zone"),
        &origin,
    )
    .map_err(|e| {
        anyhow!(
            "bundled example zone: {}",
            authd_datasrc::sqlite_load::located(&e)
        )
    })?;
    let report = writer
        .replace_zone(&origin, &records, JournalPolicy::Keep, &mut |_, _| {})
        .map_err(|e| anyhow!("{e}"))?;
    tracing::info!(
        "created {} with the bundled example zone ({} RRs)",
        path.display(),
        report.total()
    );
    Ok(())
}
