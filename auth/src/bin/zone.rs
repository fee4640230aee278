//! `zone`: administers zones in a BIND 10 sqlite3 zone DB (see docs/ZONE-ADMIN.md).
//!
//! ```text
//! zone list   --db DB
//! zone create --db DB ORIGIN --ns NAME [--ns NAME]... [--email MAILBOX] [--serial N] [--ttl SECONDS]
//! zone create --db DB ORIGIN --file MASTERFILE
//! zone delete --db DB ORIGIN
//! zone dump   --db DB ORIGIN [FILE] [--portable]
//! zone check  --db DB ORIGIN
//! zone update --db DB ORIGIN [--add RR]... [--delete RR]... [--ttl SECONDS]
//! zone key-import --db DB ORIGIN KFILE.key [--role ksk|zsk|csk]
//! zone ds     --db DB ORIGIN [--ttl SECONDS]
//! ```
//!
//! ORIGIN is taken as absolute whether or not it ends in a dot. Every change is
//! one transaction: on error nothing is changed. Output goes to stdout; errors
//! are one line `zone: message` on stderr with exit status 1 (for `check`: the
//! first problem found, with the offending name and row).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use authd_datasrc::sqlite::SqliteWriter;
use authd_datasrc::sqlite_admin::{self, AdminError};
use authd_datasrc::sqlite_load::located;
use authd_datasrc::zonefile::{self, SourcedRecord};
use authd_datasrc::{Name, Record};
use clap::{Parser, Subcommand};

/// Largest `--ttl`, as an `i64` for clap's range (RFC 2181 §8).
const MAX_TTL: i64 = zonefile::MAX_TTL as i64;

/// Administers zones in a BIND 10 sqlite3 zone DB.
#[derive(Parser, Debug)]
#[command(name = "zone", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Lists the zones with their SOA serial, RR count and journal rows.
    List {
        /// The zone DB.
        #[arg(long, value_name = "DB")]
        db: PathBuf,
    },
    /// Creates a zone: a minimal SOA and NS from flags, or a master file.
    Create {
        /// The zone DB (created at the newest schema if missing).
        #[arg(long, value_name = "DB")]
        db: PathBuf,
        /// The zone apex, e.g. example.org.
        origin: String,
        /// Name server(s) for the apex NS RRset; the first is the SOA MNAME.
        #[arg(long, value_name = "NAME", required_unless_present = "file")]
        ns: Vec<String>,
        /// SOA RNAME, the zone contact: a domain name (relative to the zone) or a
        /// mail address (`admin@example.org` is stored as `admin.example.org.`).
        #[arg(long, value_name = "MAILBOX", default_value = "hostmaster")]
        email: String,
        /// First SOA serial.
        #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
        serial: u32,
        /// TTL of the SOA and NS records, seconds (0 to 2147483647, RFC 2181 §8).
        #[arg(long, default_value_t = 3600, allow_negative_numbers = true,
              value_parser = clap::value_parser!(u32).range(..=MAX_TTL))]
        ttl: u32,
        /// A master file with the zone's content instead of --ns.
        #[arg(long, value_name = "MASTERFILE", conflicts_with = "ns")]
        file: Option<PathBuf>,
    },
    /// Deletes a zone with its records and journal.
    Delete {
        /// The zone DB.
        #[arg(long, value_name = "DB")]
        db: PathBuf,
        /// The zone apex.
        origin: String,
    },
    /// Writes a zone as a master file (stdout when FILE is not given).
    Dump {
        /// The zone DB.
        #[arg(long, value_name = "DB")]
        db: PathBuf,
        /// The zone apex.
        origin: String,
        /// The output file.
        file: Option<PathBuf>,
        /// Write types that Knot DNS 3.2 cannot read in their own form (A6,
        /// WKS, X25, DOA, ...) as `TYPEnnn \# LENGTH HEX` (RFC 3597 §5), so
        /// that any server loads the dump.
        #[arg(long)]
        portable: bool,
    },
    /// Checks a zone's stored content (SOA, apex NS, CNAME rules, readable rows).
    Check {
        /// The zone DB.
        #[arg(long, value_name = "DB")]
        db: PathBuf,
        /// The zone apex.
        origin: String,
    },
    /// Adds and deletes RRs, bumps the SOA serial and journals the change for IXFR.
    Update {
        /// The zone DB.
        #[arg(long, value_name = "DB")]
        db: PathBuf,
        /// The zone apex.
        origin: String,
        /// An RR to add, in master-file form relative to ORIGIN: "www 300 IN A 192.0.2.1".
        #[arg(long, value_name = "RR")]
        add: Vec<String>,
        /// An RR to delete (matched on name, type and data; the TTL is ignored).
        #[arg(long, value_name = "RR")]
        delete: Vec<String>,
        /// TTL for RRs given without one, seconds (0 to 2147483647, RFC 2181 §8).
        #[arg(long, default_value_t = 3600, allow_negative_numbers = true,
              value_parser = clap::value_parser!(u32).range(..=MAX_TTL))]
        ttl: u32,
    },
    /// Imports a DNSSEC key made by BIND 9 (`K<zone>.+<alg>+<tag>.key` and
    /// the `.private` file beside it) into the zone's key store, so a zone
    /// signed by BIND moves to authd's online signing without a rollover.
    KeyImport {
        /// The zone DB.
        #[arg(long, value_name = "DB")]
        db: PathBuf,
        /// The zone apex.
        origin: String,
        /// The `.key` file; its `.private` file is read from beside it.
        key: PathBuf,
        /// The key's role; by default a SEP key (flags 257) is a KSK, else a ZSK.
        #[arg(long, value_parser = ["ksk", "zsk", "csk"])]
        role: Option<String>,
    },
    /// Prints the DS RRs (SHA-256, RFC 4509) of the zone's KSK or CSK, for
    /// the parent zone.
    Ds {
        /// The zone DB.
        #[arg(long, value_name = "DB")]
        db: PathBuf,
        /// The zone apex.
        origin: String,
        /// The DS TTL, seconds.
        #[arg(long, default_value_t = 3600,
              value_parser = clap::value_parser!(u32).range(..=MAX_TTL))]
        ttl: u32,
    },
}

fn main() -> ExitCode {
    let cli: Cli = authd::cli::parse_args("zone");
    authd::cli::warnings_to_stderr("zone");
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("zone: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Opens an existing zone DB read-write (its write-ahead log is folded into
/// the main file when the writer is dropped, so a plain `cp` of the quiet DB
/// is whole).
fn open_existing(db: &Path) -> Result<SqliteWriter, String> {
    if !db.exists() {
        return Err(format!("zone DB {}: no such file", db.display()));
    }
    SqliteWriter::open(db).map_err(|e| e.to_string())
}

fn open_read(db: &Path) -> Result<SqliteWriter, String> {
    SqliteWriter::open_read_only(db).map_err(|e| e.to_string())
}

fn admin(db: &Path) -> impl Fn(AdminError) -> String + '_ {
    move |e| format!("zone DB {}: {e}", db.display())
}

/// Parses RRs given on the command line (one master-file entry each).
fn parse_rrs(origin: &Name, what: &str, rrs: &[String], ttl: u32) -> Result<Vec<Record>, String> {
    let mut out = Vec::with_capacity(rrs.len());
    for text in rrs {
        let recs =
            zonefile::parse_master_text(&format!("$TTL {ttl}\n{text}\n"), Path::new(what), origin)
                .map_err(|e| format!("{what} {text:?}: {}", e.message))?;
        match &recs[..] {
            [one] => out.push(one.record.clone()),
            _ => return Err(format!("{what} {text:?}: give exactly one RR")),
        }
    }
    Ok(out)
}

fn run(command: Command) -> Result<(), String> {
    match command {
        Command::List { db } => {
            let zones = open_read(&db)?.list_zones().map_err(admin(&db))?;
            println!(
                "{:<40} {:>10} {:>8} {:>8}",
                "ZONE", "SERIAL", "RRS", "JOURNAL"
            );
            for z in zones {
                let serial = z.serial.map_or_else(|| "-".to_string(), |s| s.to_string());
                println!(
                    "{:<40} {:>10} {:>8} {:>8}",
                    z.origin, serial, z.records, z.journal
                );
            }
            Ok(())
        }
        Command::Create {
            db,
            origin,
            ns,
            email,
            serial,
            ttl,
            file,
        } => {
            let origin = authd::config::parse_origin(&origin)?;
            let records: Vec<SourcedRecord> = match &file {
                Some(path) => {
                    let recs =
                        zonefile::read_master_file(path, &origin).map_err(|e| located(&e))?;
                    zonefile::check_zone(&origin, &recs).map_err(|e| located(&e))?;
                    recs
                }
                None => {
                    // Each flag checked as a name here, so that a bad one is
                    // named (and cannot shift the fields of the text below).
                    let ns: Vec<Name> = ns
                        .iter()
                        .map(|n| {
                            if n.contains(char::is_whitespace) {
                                return Err(format!("--ns {n:?}: contains white space"));
                            }
                            Name::parse(n, Some(&origin)).map_err(|e| format!("--ns {n:?}: {e}"))
                        })
                        .collect::<Result<_, _>>()?;
                    let email = mailbox_name(&email, &origin)?;
                    let mname = ns.first().ok_or("--ns or --file is required")?;
                    let mut text = format!(
                        "$TTL {ttl}\n@ IN SOA {mname} {email} {serial} 3600 900 1209600 300\n"
                    );
                    for n in &ns {
                        text.push_str(&format!("@ IN NS {n}\n"));
                    }
                    zonefile::parse_master_text(&text, Path::new("command line"), &origin)
                        .map_err(|e| e.message)?
                }
            };
            let writer = SqliteWriter::create(&db).map_err(|e| e.to_string())?;
            let report = writer.create_zone(&origin, &records).map_err(admin(&db))?;
            println!(
                "created zone {origin} in {} ({} RRs)",
                db.display(),
                report.total()
            );
            Ok(())
        }
        Command::Delete { db, origin } => {
            let origin = authd::config::parse_origin(&origin)?;
            let rows = open_existing(&db)?
                .delete_zone(&origin)
                .map_err(admin(&db))?;
            println!("deleted zone {origin} from {} ({rows} rows)", db.display());
            Ok(())
        }
        Command::Dump {
            db,
            origin,
            file,
            portable,
        } => {
            let style = if portable {
                sqlite_admin::DumpStyle::Portable
            } else {
                sqlite_admin::DumpStyle::Bind
            };
            let origin = authd::config::parse_origin(&origin)?;
            let reader = open_read(&db)?;
            match file {
                Some(path) => {
                    // Written to a temporary file first, so a failed dump leaves no half file.
                    let tmp = path.with_extension("zone-dump-tmp");
                    let f = std::fs::File::create(&tmp)
                        .map_err(|e| format!("{}: {e}", tmp.display()))?;
                    let mut w = std::io::BufWriter::new(f);
                    let result = reader
                        .dump_zone(&origin, &mut w, style)
                        .map_err(admin(&db))
                        .and_then(|n| {
                            w.flush().map_err(|e| format!("{}: {e}", tmp.display()))?;
                            Ok(n)
                        });
                    drop(w);
                    match result {
                        Ok(n) => {
                            std::fs::rename(&tmp, &path)
                                .map_err(|e| format!("{}: {e}", path.display()))?;
                            eprintln!("dumped {n} RRs of {origin} to {}", path.display());
                            Ok(())
                        }
                        Err(e) => {
                            let _ = std::fs::remove_file(&tmp);
                            Err(e)
                        }
                    }
                }
                None => {
                    let stdout = std::io::stdout();
                    let mut w = std::io::BufWriter::new(stdout.lock());
                    reader
                        .dump_zone(&origin, &mut w, style)
                        .map_err(admin(&db))?;
                    w.flush().map_err(|e| format!("stdout: {e}"))
                }
            }
        }
        Command::Check { db, origin } => {
            let origin = authd::config::parse_origin(&origin)?;
            let n = open_read(&db)?
                .check_zone(&origin)
                .map_err(|e| format!("zone {origin} in {}: {e}", db.display()))?;
            println!("zone {origin}: {n} RRs, OK");
            Ok(())
        }
        Command::Update {
            db,
            origin,
            add,
            delete,
            ttl,
        } => {
            let origin = authd::config::parse_origin(&origin)?;
            let adds = parse_rrs(&origin, "--add", &add, ttl)?;
            let deletes = parse_rrs(&origin, "--delete", &delete, ttl)?;
            let r = open_existing(&db)?
                .update_records(&origin, &adds, &deletes)
                .map_err(admin(&db))?;
            println!(
                "updated zone {origin}: serial {} -> {}, {} added, {} deleted, {} journal rows",
                r.old_serial, r.new_serial, r.added, r.deleted, r.journal_rows
            );
            Ok(())
        }
        Command::KeyImport {
            db,
            origin,
            key,
            role,
        } => {
            let origin = authd::config::parse_origin(&origin)?;
            let private = key.with_extension("private");
            let read =
                |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
            let (key_text, private_text) = (read(&key)?, read(&private)?);
            let role = role.as_deref().map(|r| match r {
                "ksk" => authd_datasrc::sqlite_signing::KeyRole::Ksk,
                "zsk" => authd_datasrc::sqlite_signing::KeyRole::Zsk,
                _ => authd_datasrc::sqlite_signing::KeyRole::Csk,
            });
            let tag = open_existing(&db)?
                .import_key(&origin, &key_text, &private_text, role)
                .map_err(|e| format!("{}: {e}", key.display()))?;
            println!("zone {origin}: key {tag} imported from {}", key.display());
            Ok(())
        }
        Command::Ds { db, origin, ttl } => {
            let origin = authd::config::parse_origin(&origin)?;
            let ds = open_read(&db)?
                .ds_records(&origin, ttl)
                .map_err(admin(&db))?;
            if ds.is_empty() {
                return Err(format!(
                    "zone {origin} in {} has no KSK or CSK (it is not signed online)",
                    db.display()
                ));
            }
            for line in ds {
                println!("{line}");
            }
            Ok(())
        }
    }
}

/// The SOA RNAME for `--email`: a domain name (`hostmaster`, relative to the
/// zone), or a mail address, `user@example.org` becoming
/// `user.example.org.` (dots in `user` escaped, RFC 1035 §8).
fn mailbox_name(email: &str, origin: &Name) -> Result<Name, String> {
    if email.contains(char::is_whitespace) {
        return Err(format!("--email {email:?}: contains white space"));
    }
    let text = match email.rsplit_once('@') {
        Some((local, domain)) if !local.is_empty() && !domain.is_empty() => {
            let domain = domain.trim_end_matches('.');
            format!("{}.{domain}.", local.replace('.', "\\."))
        }
        _ => email.to_string(),
    };
    Name::parse(&text, Some(origin)).map_err(|e| format!("--email {email:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn email_flag_reads_names_and_mail_addresses() {
        let origin: Name = "example.org.".parse().expect("origin");
        let rname = |e: &str| mailbox_name(e, &origin).map(|n| n.to_string());
        assert_eq!(rname("hostmaster"), Ok("hostmaster.example.org.".into()));
        assert_eq!(rname("admin.example.net."), Ok("admin.example.net.".into()));
        assert_eq!(rname("admin@example.net"), Ok("admin.example.net.".into()));
        assert_eq!(
            rname("john.doe@example.net"),
            Ok("john\\.doe.example.net.".into())
        );
        assert_eq!(
            rname("bad email@x"),
            Err("--email \"bad email@x\": contains white space".into())
        );
        let e = rname("a..b").expect_err("empty label");
        assert!(e.starts_with("--email \"a..b\": "), "{e}");
    }
}
