//! `loadzone`: loads a master file (RFC 1035 §5) into a BIND 10 sqlite3 zone DB,
//! replacing the zone's previous content in one transaction, like BIND 10's
//! `b10-loadzone`.
//!
//! ```text
//! loadzone --db PATH ORIGIN MASTERFILE
//! ```
//!
//! - PATH is created at the newest schema (2.2, WAL mode) if it does not exist;
//!   an existing file must be a 2.x zone DB.
//! - ORIGIN is taken as absolute whether or not it ends in a dot.
//! - The master file is read with `$ORIGIN`, `$TTL`, `$INCLUDE`, parentheses and
//!   comments, then checked (names inside the zone, one SOA at the apex, NS at the
//!   apex, no CNAME beside other data, ...).
//!
//! Replacing a zone that was there, the difference from the stored version is
//! journaled in the same transaction when the serial grew (IXFR from
//! differences, as NSD's `create-ixfr` and BIND's `ixfr-from-differences`), so
//! authd serves secondaries an incremental IXFR; when it did not grow, the
//! journal is cleared (secondaries then transfer the whole zone). With
//! `--keep-journal` the journal is left as it is (BIND 10's `b10-loadzone`).
//!
//! On success it prints `loaded N RRs for ORIGIN into PATH in X.XX s` and exits 0,
//! then what became of the journal on a second line when the zone was replaced:
//! `journaled the difference from serial 1 to 2 (6 RRs) for IXFR`, or
//! `serial 1 did not grow past the stored one: journal cleared; secondaries will
//! transfer the whole zone`.
//! On any error it prints one line, `loadzone: FILE:LINE: message` for problems in
//! the master file (`loadzone: FILE: message` when no line applies, e.g. a missing
//! file or no SOA), `loadzone: zone DB PATH ...` for DB problems, exits 1 and
//! leaves the zone's previous content intact. Progress is shown on stderr for
//! large zones when stderr is a terminal.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use authd_datasrc::ZoneWriter;
use authd_datasrc::sqlite::SqliteWriter;
use authd_datasrc::sqlite_load::{JournalOutcome, located};
use authd_datasrc::write::JournalPolicy;
use authd_datasrc::zonefile;
use clap::Parser;

/// Zones with at least this many RRs get a progress line on a terminal.
const PROGRESS_MIN_RRS: usize = 10_000;

/// Loads a master file into a BIND 10 sqlite3 zone DB, replacing the zone.
#[derive(Parser, Debug)]
#[command(name = "loadzone", version)]
struct Args {
    /// The zone DB file; created at the newest schema if missing.
    #[arg(long, value_name = "PATH")]
    db: PathBuf,
    /// The zone's origin, e.g. `example.org` (taken as absolute).
    #[arg(value_name = "ORIGIN")]
    origin: String,
    /// The master file to load.
    #[arg(value_name = "MASTERFILE")]
    masterfile: PathBuf,
    /// Leave the zone's journal as it is rather than journaling the
    /// difference from the stored version (BIND 10's b10-loadzone).
    #[arg(long)]
    keep_journal: bool,
}

fn main() -> ExitCode {
    let args: Args = authd::cli::parse_args("loadzone");
    authd::cli::warnings_to_stderr("loadzone");
    match run(&args) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("loadzone: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<String, String> {
    let start = Instant::now();
    let origin = authd::config::parse_origin(&args.origin)?;
    let records = zonefile::read_master_file(&args.masterfile, &origin).map_err(|e| located(&e))?;
    // Checked before the DB is opened, so a bad file never creates an empty DB.
    zonefile::check_zone(&origin, &records).map_err(|e| located(&e))?;
    let writer = SqliteWriter::create(&args.db).map_err(|e| e.to_string())?;
    let show = records.len() >= PROGRESS_MIN_RRS && std::io::stderr().is_terminal();
    let mut progress = |done: usize, total: usize| {
        if show {
            let pct = if total == 0 {
                100.0
            } else {
                done as f64 * 100.0 / total as f64
            };
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{done}/{total} RRs ({pct:.1}%)");
            if done == total {
                let _ = writeln!(err);
            }
            let _ = err.flush();
        }
    };
    let policy = if args.keep_journal {
        JournalPolicy::Keep
    } else {
        JournalPolicy::Difference
    };
    let report = writer
        .replace_zone(&origin, &records, policy, &mut progress)
        .map_err(|e| e.to_string())?;
    // The log folded into the main file: a plain `cp` of the quiet DB is whole.
    if let Err(e) = writer.checkpoint() {
        eprintln!("loadzone: warning: {}: checkpoint: {e}", args.db.display());
    }
    let journal = match report.journal {
        JournalOutcome::Journaled { from, to, rows } => {
            format!("\njournaled the difference from serial {from} to {to} ({rows} RRs) for IXFR")
        }
        JournalOutcome::Cleared => {
            let serial = records
                .iter()
                .find(|r| r.record.rtype == authd_datasrc::RType::SOA)
                .and_then(|r| r.record.rdata.soa_serial())
                .map_or_else(|| "?".to_string(), |s| s.to_string());
            format!(
                "\nserial {serial} did not grow past the stored one: journal cleared; secondaries \
                 will transfer the whole zone"
            )
        }
        JournalOutcome::Untouched => String::new(),
    };
    Ok(format!(
        "loaded {} RRs for {} into {} in {:.2} s{journal}",
        report.total(),
        origin,
        args.db.display(),
        start.elapsed().as_secs_f64()
    ))
}
