//! Command-line parsing shared by the binaries: usage errors as one line;
//! library warnings as `PROG: warning: …` lines for the tools.

use std::fmt;

use clap::Parser;
use clap::error::ErrorKind;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::fmt::format::{self, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Parses the process arguments into `T`. `--help` and `--version` print as
/// usual and exit 0; `--man` (listed in `--help`) prints the manual page
/// (roff, generated from the same definitions) and exits 0; any usage error
/// prints one line, `PROG: message (see PROG --help)`, on stderr and exits
/// with status 2.
pub fn parse_args<T: Parser>(prog: &str) -> T {
    let mut command = with_man(T::command());
    // `--man` alone, before clap: a command that requires a subcommand or an
    // argument would refuse it.
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == "--man") && args.next().is_none() {
        print_man(command);
        std::process::exit(0);
    }
    let parsed = command
        .try_get_matches_from_mut(std::env::args_os())
        .and_then(|mut m| {
            if m.get_flag(MAN) {
                print_man(command.clone());
                std::process::exit(0);
            }
            T::from_arg_matches_mut(&mut m).map_err(|e| e.format(&mut command))
        });
    match parsed {
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

/// The id of the `--man` flag [`with_man`] adds.
const MAN: &str = "man";

/// `command` with a `--man` flag, so `--help` and the manual page list it.
fn with_man(command: clap::Command) -> clap::Command {
    command.arg(
        clap::Arg::new(MAN)
            .long(MAN)
            .action(clap::ArgAction::SetTrue)
            .help("Print the manual page (roff) and exit"),
    )
}

/// The manual pages `dist/install.sh` installs: one per binary, and the
/// configuration's. A page names no other.
pub const MANUAL_PAGES: &[&str] = &[
    "authd(1)",
    "authc(1)",
    "loadzone(1)",
    "zone(1)",
    "dbutil(1)",
    "query-bench(1)",
    "authd.toml(5)",
];

/// Prints the manual page of `command` (section 1, roff) on stdout: clap's
/// sections, but the commands listed as `PROG COMMAND` (there is no page
/// per command), then SEE ALSO naming the other pages of [`MANUAL_PAGES`].
fn print_man(command: clap::Command) {
    let mut out = Vec::new();
    match render_man(command, &mut out) {
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

/// Writes the manual page of `command` to `out` (see [`print_man`]).
fn render_man(command: clap::Command, out: &mut Vec<u8>) -> std::io::Result<()> {
    use std::io::Write;
    let name = command.get_name().to_string();
    let man = clap_mangen::Man::new(command.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    let subcommands: Vec<&clap::Command> = command
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .collect();
    if !subcommands.is_empty() {
        writeln!(out, ".SH COMMANDS")?;
        for sub in subcommands {
            writeln!(out, ".TP")?;
            writeln!(out, "\\fB{} {}\\fR", roff(&name), roff(sub.get_name()))?;
            if let Some(about) = sub.get_about() {
                writeln!(out, "{}", roff(&about.to_string()))?;
            }
        }
        writeln!(out, ".PP")?;
        writeln!(
            out,
            "The options of a command: \\fB{} \\fICOMMAND\\fB \\-\\-help\\fR.",
            roff(&name)
        )?;
    }
    if command.get_after_help().is_some() {
        man.render_extra_section(out)?;
    }
    man.render_version_section(out)?;
    let own = format!("{name}(1)");
    let others: Vec<String> = MANUAL_PAGES
        .iter()
        .filter(|p| **p != own)
        .map(|p| match p.split_once('(') {
            Some((page, section)) => format!("\\fB{}\\fR({section}", roff(page)),
            None => roff(p),
        })
        .collect();
    writeln!(out, ".SH \"SEE ALSO\"")?;
    writeln!(out, "{}", others.join(", "))
}

/// `text` as roff text: backslashes and dashes escaped, a line starting
/// with a control character made plain.
fn roff(text: &str) -> String {
    text.lines()
        .map(|line| {
            let line = line.replace('\\', "\\e").replace('-', "\\-");
            if line.starts_with(['.', '\'']) {
                format!("\\&{line}")
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The log filter `text` (a `--log-level` value or `RUST_LOG`, named by
/// `origin` in the message): comma-separated directives, each a level,
/// `TARGET=LEVEL`, or one of authd's own targets (all its events). A bare
/// word that is none of these (`verbose`, `debgu`) would filter everything
/// out, so it is refused.
///
/// Errors: a word that is no level nor authd target, or what
/// `tracing-subscriber` refuses, as one line.
pub fn log_filter(text: &str, origin: &str) -> Result<EnvFilter, String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    // tracing's level numbers: 0 = off … 5 = trace.
    let number = |d: &str| matches!(d, "0" | "1" | "2" | "3" | "4" | "5");
    for directive in text.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let bare = !directive.contains(['=', '[', '{']);
        let target = directive.split("::").next().unwrap_or(directive);
        let ours = matches!(
            target,
            "authd" | "authd_datasrc" | "authd_cache" | "authd_migrations"
        );
        let level = number(directive) || LEVELS.iter().any(|l| directive.eq_ignore_ascii_case(l));
        if bare && !ours && !level {
            return Err(format!(
                "invalid {origin} {text:?}: {directive:?} is neither a level ({}) nor TARGET=LEVEL",
                LEVELS.join(", ")
            ));
        }
    }
    EnvFilter::try_new(text).map_err(|e| format!("invalid {origin} {text:?}: {e}"))
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

    /// A log filter that would filter everything out is an error, not a
    /// silent log (issue 27); levels, authd's targets and directives pass.
    #[test]
    fn bad_log_filters_are_refused() {
        for ok in [
            "info",
            "DEBUG",
            "3",
            "info,authd=debug",
            "authd",
            "authd_datasrc::sqlite",
        ] {
            assert!(log_filter(ok, "--log-level").is_ok(), "{ok}");
        }
        let e = log_filter("verbose", "--log-level").expect_err("bare word");
        assert_eq!(
            e,
            "invalid --log-level \"verbose\": \"verbose\" is neither a level (off, error, warn, \
             info, debug, trace) nor TARGET=LEVEL"
        );
        let e = log_filter("info,debgu", "RUST_LOG").expect_err("typo");
        assert_eq!(
            e,
            "invalid RUST_LOG \"info,debgu\": \"debgu\" is neither a level (off, error, warn, \
             info, debug, trace) nor TARGET=LEVEL"
        );
        let e = log_filter("authd=verbose", "--log-level").expect_err("bad level");
        assert!(
            e.starts_with("invalid --log-level \"authd=verbose\": "),
            "{e}"
        );
    }

    /// A manual page names only pages that are installed: the commands are
    /// `PROG COMMAND`, not pages of their own.
    #[test]
    fn manual_page_names_only_installed_pages() {
        #[derive(Parser, Debug)]
        #[command(name = "t", version, about = "A tool")]
        struct Tool {
            #[command(subcommand)]
            command: Sub,
        }
        #[derive(clap::Subcommand, Debug)]
        enum Sub {
            /// Does one thing.
            One,
        }
        let mut out = Vec::new();
        use clap::CommandFactory;
        render_man(with_man(Tool::command()), &mut out).expect("render");
        let page = String::from_utf8(out).expect("utf-8");
        assert!(page.contains("\\fBt one\\fR\nDoes one thing\n"), "{page}");
        assert!(page.contains("\\fB\\-\\-man\\fR"), "{page}");
        assert!(!page.contains("t\\-one("), "{page}");
        assert!(
            page.ends_with(
                ".SH \"SEE ALSO\"\n\\fBauthd\\fR(1), \\fBauthc\\fR(1), \\fBloadzone\\fR(1), \\fBzone\\fR(1), \
                 \\fBdbutil\\fR(1), \\fBquery\\-bench\\fR(1), \\fBauthd.toml\\fR(5)\n"
            ),
            "{page}"
        );
    }
}
