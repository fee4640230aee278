//! `authc`: authd's control tool (like knotc and nsd-control).
//!
//! ```text
//! authc [--socket PATH] status
//! authc [--socket PATH] reload [ZONE]
//! authc [--socket PATH] flush-cache
//! authc [--socket PATH] stats
//! authc [--socket PATH] zone-status [ZONE]
//! authc [--socket PATH] querylog on|off
//! authc [--socket PATH] dnssec status [ZONE]
//! authc [--socket PATH] dnssec ds ZONE
//! authc [--socket PATH] dnssec rollover ZONE zsk|ksk
//! authc [--socket PATH] dnssec ds-published ZONE
//! authc [--socket PATH] stop
//! ```
//!
//! It talks to the unix socket authd opens when `[control] socket` is set
//! (mode 0600: run authc as the user authd runs as). It prints the command's
//! output and exits 0, or prints one line `authc: WHY` and exits 1.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

/// Where authd's control socket is when `--socket` is not given.
const DEFAULT_SOCKET: &str = "/run/authd/control.sock";

/// How long authc waits for an answer (a reload of large zones takes a while).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// Control a running authd over its control socket (`[control] socket`).
#[derive(Debug, Parser)]
#[command(
    name = "authc",
    version,
    after_help = "Commands: status, reload [ZONE], flush-cache, stats (the metrics as JSON), \
                  zone-status [ZONE], querylog on|off, dnssec status [ZONE], dnssec ds ZONE, \
                  dnssec rollover ZONE zsk|ksk, dnssec ds-published ZONE, stop. \
                  See docs/CONFIG.md, [control]."
)]
struct Cli {
    /// authd's control socket (`[control] socket` in its configuration).
    #[arg(short, long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The command and its arguments.
    #[arg(required = true, num_args = 1.., value_name = "COMMAND")]
    command: Vec<String>,
}

fn main() -> ExitCode {
    let cli: Cli = authd::cli::parse_args("authc");
    match run(&cli) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("authc: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Sends the command; its output, or the one-line reason it failed.
fn run(cli: &Cli) -> Result<String, String> {
    let line = cli.command.join(" ");
    // Checked here too, so a typo is reported without a running authd.
    authd::control::parse(&line)?;
    let path = cli.socket.display();
    let mut stream = UnixStream::connect(&cli.socket).map_err(|e| {
        format!(
            "cannot connect to {path}: {} (is authd running with [control] socket = \"{path}\"? \
             use --socket to name another)",
            authd::sys::io_reason(&e)
        )
    })?;
    stream
        .set_read_timeout(Some(ANSWER_TIMEOUT))
        .map_err(|e| format!("{path}: {e}"))?;
    stream
        .write_all(format!("{line}\n").as_bytes())
        .map_err(|e| format!("cannot send to {path}: {}", authd::sys::io_reason(&e)))?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|e| format!("no answer from {path}: {}", authd::sys::io_reason(&e)))?;
    match answer.split_once('\n') {
        Some(("ok", rest)) => Ok(rest.to_string()),
        Some((first, _)) => Err(first.strip_prefix("error: ").unwrap_or(first).to_string()),
        None if answer.is_empty() => Err(format!("{path} closed without an answer")),
        None => Err(answer),
    }
}
