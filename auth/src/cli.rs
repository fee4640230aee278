//! Command-line parsing shared by the binaries: usage errors as one line;
//! library warnings as `PROG: warning: …` lines for the tools.

use std::fmt;

use clap::Parser;
use clap::error::ErrorKind;
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::fmt::format::{self, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Parses the process arguments into `T`. `--help` and `--version` print as
/// usual and exit 0; `--man` alone prints the manual page (roff, generated
/// from the same definitions) and exits 0; any usage error prints one line,
/// `PROG: message (see PROG --help)`, on stderr and exits with status 2.
pub fn parse_args<T: Parser>(prog: &str) -> T {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == "--man") && args.next().is_none() {
        print_man(T::command());
        std::process::exit(0);
    }
    match T::try_parse() {
        Ok(args) => args,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            e.exit()
        }
        Err(e) => {
            eprintln!("{prog}: {} (see {prog} --help)", one_line(&e.to_string()));
            std::process::exit(2);
        }
    }
}

/// Prints the manual page of `command` (section 1, roff) on stdout.
fn print_man(command: clap::Command) {
    let mut out = Vec::new();
    match clap_mangen::Man::new(command).render(&mut out) {
        Ok(()) => {
            use std::io::Write;
            let _ = std::io::stdout().write_all(&out);
        }
        Err(e) => {
            eprintln!("cannot render the manual page: {e}");
            std::process::exit(1);
        }
    }
}

/// Prints the warnings and errors the libraries log (a master file without
/// `$TTL`, a skipped `zones` row) on stderr as `PROG: warning: message`, one
/// line each, for the command-line tools (`authd` itself logs with
/// timestamps). Does nothing if a subscriber is already set.
pub fn warnings_to_stderr(prog: &'static str) {
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(std::io::stderr)
        .event_format(ToolFormat(prog))
        .try_init();
}

/// `PROG: warning: message fields`, without time, level padding or target.
struct ToolFormat(&'static str);

impl<S, N> FormatEvent<S, N> for ToolFormat
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> fmt::Result {
        let level = if *event.metadata().level() == tracing::Level::ERROR {
            "error"
        } else {
            "warning"
        };
        write!(writer, "{}: {level}: ", self.0)?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// clap's error text as one line: its message and the lines it lists under
/// it (the missing arguments, say), without the usage and tip that follow.
fn one_line(text: &str) -> String {
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty() && !l.starts_with("tip:"))
        .collect();
    if parts.is_empty() {
        return "bad arguments".to_string();
    }
    parts.join(" ").trim_start_matches("error: ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Parser, Debug)]
    #[command(name = "t")]
    struct Args {
        /// The zone.
        origin: String,
        #[arg(long)]
        ns: Vec<String>,
    }

    #[test]
    fn usage_errors_name_what_is_wrong_in_one_line() {
        let e = Args::try_parse_from(["t"]).expect_err("missing origin");
        assert_eq!(
            one_line(&e.to_string()),
            "the following required arguments were not provided: <ORIGIN>"
        );
        let e = Args::try_parse_from(["t", "x", "--bogus"]).expect_err("unknown flag");
        let line = one_line(&e.to_string());
        assert!(
            line.starts_with("unexpected argument '--bogus' found"),
            "{line}"
        );
        assert!(!line.contains('\n') && !line.contains("Usage"), "{line}");
    }
}
