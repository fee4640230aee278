//! Zone-level checks every loader applies before a zone may replace a served
//! one or be stored (the checks of BIND 10's loader).

use super::{SourcedRecord, ZoneFileError};
use crate::name::Name;
use crate::rr::{Class, RType, Rdata};

/// Checks a zone's records before it may be served or stored (the checks of
/// BIND 10's loader and RFC 1034 §3.6.2 / RFC 6672 §2.4):
/// every owner at or below `origin`; exactly one SOA, at the apex; NS at the
/// apex; no CNAME beside other data (RRSIG and NSEC excepted) and at most one
/// CNAME or DNAME per owner.
///
/// Errors: the first problem found, with the file and line of the offending record.
pub fn check_zone(origin: &Name, records: &[SourcedRecord]) -> Result<(), ZoneFileError> {
    check_in(origin, &[records])
}

/// [`check_zone`] of records in pieces, as
/// [`super::read_master_file_pieces`] reads them (file order across pieces).
///
/// Errors: as [`check_zone`].
pub fn check_pieces(origin: &Name, pieces: &[Vec<SourcedRecord>]) -> Result<(), ZoneFileError> {
    let pieces: Vec<&[SourcedRecord]> = pieces.iter().map(Vec::as_slice).collect();
    check_in(origin, &pieces)
}

fn check_in(origin: &Name, pieces: &[&[SourcedRecord]]) -> Result<(), ZoneFileError> {
    use std::collections::HashMap;
    let records = || pieces.iter().flat_map(|p| p.iter());
    let count: usize = pieces.iter().map(|p| p.len()).sum();
    let fail = |r: &SourcedRecord, message: String| ZoneFileError {
        file: r.file.as_ref().clone(),
        line: r.line,
        message,
    };
    let mut soa_count = 0;
    let mut apex_ns = false;
    /// Per owner: first CNAME record, first other record, distinct CNAME rdata, DNAME count.
    #[derive(Default)]
    struct OwnerFacts<'a> {
        cname: Option<&'a SourcedRecord>,
        other: Option<&'a SourcedRecord>,
        cnames: Vec<&'a Rdata>,
        dnames: usize,
    }
    // foldhash: several times faster than SipHash on names, which come from
    // the zone file being checked, not from clients.
    let mut owners: HashMap<&Name, OwnerFacts<'_>, foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(count / 2, Default::default());
    for r in records() {
        let rec = &r.record;
        if !rec.owner.is_subdomain_of(origin) {
            return Err(fail(
                r,
                format!("name {} is outside the zone {origin}", rec.owner),
            ));
        }
        if rec.class != Class::IN {
            return Err(fail(
                r,
                format!("{} has class {}; only IN is served", rec.owner, rec.class),
            ));
        }
        if rec.rtype.is_meta() {
            return Err(fail(
                r,
                format!("{} has meta type {}", rec.owner, rec.rtype),
            ));
        }
        if rec.rtype == RType::SOA {
            if rec.owner != *origin {
                return Err(fail(
                    r,
                    format!("SOA at {} is not at the zone apex {origin}", rec.owner),
                ));
            }
            soa_count += 1;
            if soa_count > 1 {
                return Err(fail(r, format!("more than one SOA at {origin}")));
            }
        }
        if rec.rtype == RType::NS && rec.owner == *origin {
            apex_ns = true;
        }
        let entry = owners.entry(&rec.owner).or_default();
        match rec.rtype {
            RType::CNAME => {
                entry.cname.get_or_insert(r);
                if !entry.cnames.contains(&&rec.rdata) {
                    entry.cnames.push(&rec.rdata);
                }
            }
            RType::RRSIG | RType::NSEC => {}
            RType::DNAME => {
                entry.dnames += 1;
                entry.other.get_or_insert(r);
            }
            _ => {
                entry.other.get_or_insert(r);
            }
        }
    }
    // Report in file order: a second pass over the records (a probe each),
    // only when some owner has a problem to report.
    let problem = |f: &OwnerFacts<'_>| {
        f.cname.is_some() && f.other.is_some() || f.cnames.len() > 1 || f.dnames > 1
    };
    let any_problem = owners.values().any(problem);
    for r in records().filter(|_| any_problem) {
        if let Some(OwnerFacts {
            cname,
            other,
            cnames,
            dnames,
        }) = owners.get(&r.record.owner)
        {
            if let (Some(c), Some(o)) = (cname, other) {
                let later = if c.line >= o.line { c } else { o };
                return Err(fail(
                    later,
                    format!("CNAME and other data at {}", r.record.owner),
                ));
            }
            if cnames.len() > 1 {
                return Err(fail(
                    r,
                    format!("more than one CNAME at {}", r.record.owner),
                ));
            }
            if *dnames > 1 {
                return Err(fail(
                    r,
                    format!("more than one DNAME at {}", r.record.owner),
                ));
            }
        }
    }
    let whole = |message: String| ZoneFileError {
        file: records()
            .next()
            .map(|r| r.file.as_ref().clone())
            .unwrap_or_default(),
        line: 0,
        message,
    };
    if soa_count == 0 {
        return Err(whole(format!("no SOA at the zone apex {origin}")));
    }
    if !apex_ns {
        return Err(whole(format!("no NS at the zone apex {origin}")));
    }
    Ok(())
}
