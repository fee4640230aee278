//! `dbutil`: check or upgrade the schema version of a BIND 10 / authd sqlite3 zone DB.
//!
//! ```text
//! dbutil --check DB
//! dbutil --upgrade [--noconfirm] DB
//! ```
//!
//! Exit codes are b10-dbutil's: 0 ok / current, 1 needs upgrade (`--check`), 2 version too
//! high, 3 command-line error, 4 read error (missing file, not SQLite, corrupt, not a zone
//! DB, no usable version row), 5 upgrade error. Unlike b10-dbutil, `--upgrade` never
//! prompts (`--noconfirm` is accepted and ignored) and reports read errors found before
//! anything is changed with code 4.

use std::path::PathBuf;
use std::process::ExitCode;

use authd_migrations::{Error, LATEST, SchemaVersion};
use clap::{ArgGroup, Parser};

const EXIT_SUCCESS: u8 = 0;
const EXIT_NEED_UPDATE: u8 = 1;
const EXIT_VERSION_TOO_HIGH: u8 = 2;
const EXIT_COMMAND_ERROR: u8 = 3;
const EXIT_READ_ERROR: u8 = 4;
const EXIT_UPGRADE_ERROR: u8 = 5;

const USAGE: &str =
    "usage: dbutil --check DB | dbutil --upgrade [--noconfirm] DB | dbutil --backup DB DEST";

/// Check or upgrade the schema of an sqlite3 zone DB.
#[derive(Debug, Parser)]
#[command(
    name = "dbutil",
    version,
    about = "Check or upgrade the schema version of an sqlite3 zone DB (BIND 10 compatible)",
    group(ArgGroup::new("mode").required(true).args(["check", "upgrade", "backup"]))
)]
struct Cli {
    /// Print the DB's schema version and check it is intact (SQLite's
    /// integrity_check; exit 4 if corrupt); exit 1 if it needs an upgrade.
    #[arg(short = 'c', long)]
    check: bool,
    /// Copy the DB to DEST (a new file) with SQLite's online backup: a
    /// consistent copy even while authd serves it and others write (a plain
    /// `cp` of a live DB in WAL mode may miss the newest changes).
    #[arg(short = 'b', long)]
    backup: bool,
    /// Back up the DB to DB.backup[-N] and upgrade it to the newest schema in one transaction.
    #[arg(short = 'u', long)]
    upgrade: bool,
    /// Accepted for b10-dbutil compatibility; dbutil never asks for confirmation.
    #[arg(short = 'n', long, conflicts_with = "check")]
    noconfirm: bool,
    /// Print nothing on success.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// The zone DB file.
    db: PathBuf,
    /// With --backup: the copy to make; must not exist.
    dest: Option<PathBuf>,
}

/// The command line: [`Cli`] and `--man` (handled in `main`, alone), so
/// `--help` and the manual page list it.
fn command() -> clap::Command {
    use clap::{Arg, ArgAction, CommandFactory};
    Cli::command().arg(
        Arg::new("man")
            .long("man")
            .action(ArgAction::SetTrue)
            .help("Print the manual page (roff) and exit"),
    )
}

/// The arguments.
fn parse() -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    let mut command = command();
    let mut matches = command.try_get_matches_from_mut(std::env::args_os())?;
    Cli::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut command))
}

fn main() -> ExitCode {
    // `dbutil --man`: the manual page, from these definitions (as the authd tools do).
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == "--man") && args.next().is_none() {
        let mut out = Vec::new();
        if clap_mangen::Man::new(command()).render(&mut out).is_err() {
            return ExitCode::from(EXIT_COMMAND_ERROR);
        }
        use std::io::Write;
        let _ = std::io::stdout().write_all(&out);
        return ExitCode::from(EXIT_SUCCESS);
    }
    let cli = match parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::from(EXIT_SUCCESS);
            }
            // clap's message spans several lines (message, argument list, usage); keep the
            // part before the usage, on one line.
            let text = e.to_string();
            let message = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:"))
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            let message = message.trim_start_matches("error: ");
            eprintln!("dbutil: {message} ({USAGE})");
            return ExitCode::from(EXIT_COMMAND_ERROR);
        }
    };
    // clap counts an unset flag's default as present, so DEST's pairing
    // with --backup is checked here.
    match (cli.backup, &cli.dest) {
        (true, None) => {
            eprintln!("dbutil: --backup needs DEST, the copy to make ({USAGE})");
            return ExitCode::from(EXIT_COMMAND_ERROR);
        }
        (false, Some(dest)) => {
            eprintln!("dbutil: unexpected argument '{}' ({USAGE})", dest.display());
            return ExitCode::from(EXIT_COMMAND_ERROR);
        }
        _ => {}
    }
    let code = if cli.check {
        check(&cli)
    } else if let (true, Some(dest)) = (cli.backup, &cli.dest) {
        backup(&cli, dest)
    } else {
        upgrade(&cli)
    };
    ExitCode::from(code)
}

fn backup(cli: &Cli, dest: &std::path::Path) -> u8 {
    if dest.exists() {
        eprintln!(
            "dbutil: {} exists; give a new file to back up to",
            dest.display()
        );
        return EXIT_COMMAND_ERROR;
    }
    match authd_migrations::backup(&cli.db, dest) {
        Ok(()) => {
            if !cli.quiet {
                println!(
                    "backed up zone DB {} to {}",
                    cli.db.display(),
                    dest.display()
                );
            }
            EXIT_SUCCESS
        }
        Err(e) => {
            eprintln!("dbutil: {e}");
            EXIT_READ_ERROR
        }
    }
}

fn check(cli: &Cli) -> u8 {
    let path = cli.db.display();
    let version = authd_migrations::check(&cli.db);
    if version.is_ok()
        && let Err(e) = authd_migrations::integrity_check(&cli.db)
    {
        eprintln!("dbutil: {e}");
        return EXIT_READ_ERROR;
    }
    match version {
        Ok(v) if v == LATEST => {
            if !cli.quiet {
                println!("zone DB {path} has schema version {v}, the newest; no upgrade needed");
            }
            EXIT_SUCCESS
        }
        Ok(v) if v < LATEST => {
            eprintln!(
                "dbutil: zone DB {path} has schema version {v}, older than {LATEST}; \
                 upgrade it with 'dbutil --upgrade {path}'"
            );
            EXIT_NEED_UPDATE
        }
        Ok(v) => {
            eprintln!("dbutil: {}", too_high_message(cli, v));
            EXIT_VERSION_TOO_HIGH
        }
        Err(e) => {
            eprintln!("dbutil: {e}");
            EXIT_READ_ERROR
        }
    }
}

fn too_high_message(cli: &Cli, v: SchemaVersion) -> String {
    let path = cli.db.display();
    if v.major == LATEST.major {
        format!(
            "zone DB {path} has schema version {v}, newer than this dbutil knows ({LATEST}); \
             authd can serve it as it is"
        )
    } else {
        format!("zone DB {path} has schema version {v}, newer than this build supports ({LATEST})")
    }
}

fn upgrade(cli: &Cli) -> u8 {
    match authd_migrations::upgrade(&cli.db) {
        Ok(report) => {
            if !cli.quiet {
                match &report.backup {
                    Some(backup) if report.upgraded() => println!(
                        "upgraded zone DB {} from schema version {} to {}; backup of the \
                         original at {}",
                        cli.db.display(),
                        report.from,
                        report.to,
                        backup.display()
                    ),
                    _ => println!(
                        "zone DB {} already has schema version {}; nothing to do",
                        cli.db.display(),
                        report.to
                    ),
                }
            }
            EXIT_SUCCESS
        }
        Err(e) => {
            eprintln!("dbutil: {e}");
            match e {
                Error::TooNew { .. } | Error::NewerMinor { .. } => EXIT_VERSION_TOO_HIGH,
                ref e if e.is_read_error() => EXIT_READ_ERROR,
                _ => EXIT_UPGRADE_ERROR,
            }
        }
    }
}
