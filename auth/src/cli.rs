//! Command-line parsing shared by the binaries: usage errors as one line.

use clap::Parser;
use clap::error::ErrorKind;

/// Parses the process arguments into `T`. `--help` and `--version` print as
/// usual and exit 0; any usage error prints one line, `PROG: message (see
/// PROG --help)`, on stderr and exits with status 2.
pub fn parse_args<T: Parser>(prog: &str) -> T {
    match T::try_parse() {
        Ok(args) => args,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            e.exit()
        }
        Err(e) => {
            let text = e.to_string();
            let first = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("bad arguments")
                .trim_start_matches("error: ");
            eprintln!("{prog}: {first} (see {prog} --help)");
            std::process::exit(2);
        }
    }
}
