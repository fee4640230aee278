//! `authd`: the authoritative DNS server.
//!
//! ```text
//! authd --config PATH [--listen ADDR:PORT]... [--db PATH]... [--log-level FILTER]
//! authd --db PATH [--listen ADDR:PORT]...
//! authd                      # the bundled example zone on 127.0.0.1:5300
//! ```
//!
//! Settings come from the config file (see `authd::config`), then `AUTHD_*`
//! environment variables, then the command line: `--listen` replaces `listen`,
//! `--db` replaces the `[[datasource]]` list with one sqlite3 source per DB.
//! With neither `--config` nor `--db` it serves the bundled example zone from
//! `authd-example.sqlite3` in the current folder, creating it on first start.
//!
//! It logs to stderr (`--log-level`, else `RUST_LOG`, else `info`), one line
//! `listening on ADDR:PORT` per bound address. SIGTERM and SIGINT stop it
//! (exit 0); SIGHUP is logged (reload is not supported yet). A start-up error
//! prints one line `authd: <message>` and exits 1.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, anyhow};
use authd::config::{self, Config, DataSourceConfig};
use authd::query::QueryProcessor;
use authd::server::Server;
use authd_datasrc::sqlite::SqliteSource;
use authd_datasrc::{DataSource, Name};
use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};
use tracing_subscriber::EnvFilter;

/// The bundled example zone (see `auth/src/default/README.md`).
const EXAMPLE_ZONE: &str = include_str!("../default/example.com.zone");
/// Its origin.
const EXAMPLE_ORIGIN: &str = "example.com.";
/// The DB the example zone is served from, in the current folder.
const EXAMPLE_DB: &str = "authd-example.sqlite3";

/// Authoritative DNS server.
#[derive(Debug, Parser)]
#[command(name = "authd", version, about)]
struct Cli {
    /// TOML configuration file (keys can be overridden by AUTHD_* variables).
    #[arg(short, long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Serve every zone of this sqlite3 zone DB (repeatable; replaces the
    /// configured data sources).
    #[arg(long, value_name = "PATH")]
    db: Vec<PathBuf>,
    /// Address to serve UDP and TCP on, e.g. 127.0.0.1:53 or [::1]:53; port 0
    /// picks a free port (repeatable; replaces the configured `listen`).
    #[arg(short, long, value_name = "ADDR:PORT", value_parser = parse_listen)]
    listen: Vec<SocketAddr>,
    /// Log filter: a level (error, warn, info, debug, trace) or tracing
    /// directives such as `authd=debug`. Default: $RUST_LOG, else info.
    #[arg(long, value_name = "FILTER")]
    log_level: Option<String>,
}

fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    config::parse_listen(s)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = init_logging(cli.log_level.as_deref()) {
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

fn init_logging(level: Option<&str>) -> anyhow::Result<()> {
    let filter = match level {
        Some(l) => EnvFilter::try_new(l).map_err(|e| anyhow!("invalid --log-level {l:?}: {e}"))?,
        None => match std::env::var("RUST_LOG") {
            Ok(v) if !v.trim().is_empty() => {
                EnvFilter::try_new(&v).map_err(|e| anyhow!("invalid RUST_LOG {v:?}: {e}"))?
            }
            _ => EnvFilter::new("info"),
        },
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init()
        .map_err(|e| anyhow!("cannot set up logging: {e}"))
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    // Signals first, so a SIGTERM right after "listening on" is handled.
    let shutdown = shutdown_signal().context("cannot install signal handlers")?;

    let mut config = match &cli.config {
        Some(path) => Config::load(path)?,
        None => Config::from_env()?,
    };
    if !cli.listen.is_empty() {
        let mut listen = Vec::with_capacity(cli.listen.len());
        for addr in cli.listen {
            if !listen.contains(&addr) {
                listen.push(addr);
            }
        }
        config.listen = listen;
    }
    let example = cli.config.is_none() && cli.db.is_empty();
    if !cli.db.is_empty() {
        config.datasources = cli.db.iter().map(DataSourceConfig::sqlite3).collect();
    } else if example {
        let path = PathBuf::from(EXAMPLE_DB);
        prepare_example_db(&path)?;
        config.datasources = vec![DataSourceConfig::sqlite3(path)];
    }

    let sources = config.open_sources().map_err(|e| anyhow!("{e}"))?;
    let server = Server::bind(&config.server_settings()).await?;

    if sources.sources().is_empty() {
        tracing::warn!("no data source configured: every query will be refused");
    }
    for source in sources.sources() {
        match source.zones() {
            Ok(zones) => {
                tracing::info!("serving {} zone(s) from {}", zones.len(), source.describe())
            }
            Err(e) => tracing::warn!("{}: cannot list zones: {e}", source.describe()),
        }
    }
    let addrs = server.local_addrs();
    for addr in &addrs {
        tracing::info!("listening on {addr} (UDP and TCP)");
    }
    if example && let Some(addr) = addrs.first() {
        tracing::info!(
            "serving the bundled example zone; try: dig @{} -p {} www.example.com A",
            addr.ip(),
            addr.port()
        );
    }

    let processor = Arc::new(QueryProcessor::new(sources, config.chaos.options()));
    server.serve(processor, shutdown).await?;
    tracing::info!("stopped");
    Ok(())
}

/// A future that resolves on SIGTERM or SIGINT (after logging it); SIGHUP is
/// logged and otherwise ignored until reload is implemented.
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    Ok(async move {
        loop {
            tokio::select! {
                _ = term.recv() => {
                    tracing::info!("received SIGTERM, shutting down");
                    return;
                }
                _ = int.recv() => {
                    tracing::info!("received SIGINT, shutting down");
                    return;
                }
                _ = hup.recv() => {
                    tracing::warn!("received SIGHUP: reload not yet supported");
                }
            }
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
    let mut conn = authd_migrations::open_or_create(path).map_err(|e| anyhow!("{e}"))?;
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
    let report = authd_datasrc::sqlite_load::load_zone(&mut conn, &origin, &records, |_, _| {})
        .map_err(|e| anyhow!("{e}"))?;
    tracing::info!(
        "created {} with the bundled example zone ({} RRs)",
        path.display(),
        report.total()
    );
    Ok(())
}
