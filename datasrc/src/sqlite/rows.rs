//! Row decoding: columns read whatever their storage class, and the rows at
//! one owner checked (type, TTL, BIND 10's per-node rules) and parsed into
//! RRsets type by type, on first use.

use std::sync::{Arc, OnceLock};

use rusqlite::types::ValueRef;

use crate::lookup::{DataSourceError, ZoneRef};
use crate::name::Name;
use crate::node::{LazyNode, NodeRef};
use crate::rr::{Class, RRset, RType, Rdata};

/// Reads a column as text whatever its storage class (V1 DBs declared `STRING`,
/// which has NUMERIC affinity).
pub(crate) fn text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(match std::str::from_utf8(t) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(t).into_owned(),
        }),
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Null => None,
    }
}

/// [`text`], borrowing the column when it holds valid UTF-8.
pub(super) fn text_cow(v: ValueRef<'_>) -> Option<std::borrow::Cow<'_, str>> {
    match v {
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(match std::str::from_utf8(t) {
            Ok(s) => std::borrow::Cow::Borrowed(s),
            Err(_) => String::from_utf8_lossy(t),
        }),
        other => text(other).map(std::borrow::Cow::Owned),
    }
}

/// A text column's bytes as stored.
pub(super) fn bytes(v: ValueRef<'_>) -> Option<Vec<u8>> {
    match v {
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(t.to_vec()),
        _ => None,
    }
}

/// Reads a column as an integer whatever its storage class; a REAL with a
/// fraction (a TTL of 1.5, say) is not one.
pub(crate) fn int(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(i) => Some(i),
        ValueRef::Text(t) => std::str::from_utf8(t).ok()?.trim().parse().ok(),
        ValueRef::Real(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => Some(f as i64),
        _ => None,
    }
}

/// One row of a node: its type and TTL checked, its rdata text kept unparsed.
struct Row {
    rtype: RType,
    /// As stored; checked when the row's type is built ([`RowNode::ttl`]).
    ttl: Option<i64>,
    /// The rdata text: a range of [`RowNode::text`].
    text: std::ops::Range<usize>,
    /// For an RRSIG row, the type covered as its text names it (the first
    /// field); `None` when that does not read as a type (`\#` data, say).
    covers: Option<RType>,
}

/// The RRset of one type at a node, each form built on first use.
struct Slot {
    rtype: RType,
    /// The set without RRSIGs.
    plain: OnceLock<Result<Arc<RRset>, DataSourceError>>,
    /// The set with its RRSIGs attached.
    signed: OnceLock<Result<Arc<RRset>, DataSourceError>>,
}

/// Collects the rows at one owner for a [`RowNode`], checking the cheap
/// columns (type, TTL) as they come.
pub(super) struct RowsBuilder<'a> {
    zone: &'a ZoneRef,
    pub(super) owner: Name,
    text: String,
    rows: Vec<Row>,
}

impl<'a> RowsBuilder<'a> {
    pub(super) fn new(zone: &'a ZoneRef, owner: Name) -> Self {
        RowsBuilder {
            zone,
            owner,
            text: String::new(),
            rows: Vec::new(),
        }
    }

    pub(super) fn bad(&self, reason: String) -> DataSourceError {
        bad_data(&self.zone.origin, &self.owner, reason)
    }

    /// Adds one row; `ttl` is `None` when the column is NULL or not a whole number.
    /// A bad type fails the node (its rows cannot be told apart); a bad TTL,
    /// like bad rdata, only the lookups that need its type (as BIND 10's
    /// database.cc, which read the TTL of the wanted types only).
    pub(super) fn add_row(
        &mut self,
        rdtype: &str,
        ttl: Option<i64>,
        rdata: &str,
    ) -> Result<(), DataSourceError> {
        let rtype: RType = rdtype.parse().map_err(|e| self.bad(format!("{e}")))?;
        let covers = if rtype == RType::RRSIG {
            rdata
                .split_ascii_whitespace()
                .next()
                .and_then(|t| t.parse::<RType>().ok())
        } else {
            None
        };
        if self.rows.is_empty() {
            // Room for a typical node at once instead of growing by doubling.
            self.rows.reserve(16);
            self.text.reserve(512);
        }
        let start = self.text.len();
        self.text.push_str(rdata);
        self.rows.push(Row {
            rtype,
            ttl,
            text: start..self.text.len(),
            covers,
        });
        Ok(())
    }

    /// The node, after BIND 10's per-node rules (one CNAME, nothing beside it
    /// but RRSIG/NSEC; one DNAME). A type with several CNAME or DNAME rows is
    /// built here to count its distinct records.
    pub(super) fn finish(self) -> Result<RowNode, DataSourceError> {
        let mut types: Vec<RType> = self
            .rows
            .iter()
            .map(|r| r.rtype)
            .filter(|t| *t != RType::RRSIG)
            .collect();
        types.sort_unstable();
        types.dedup();
        let node = RowNode {
            origin: self.zone.origin.clone(),
            owner: self.owner,
            text: self.text,
            rows: self.rows,
            slots: types
                .into_iter()
                .map(|rtype| Slot {
                    rtype,
                    plain: OnceLock::new(),
                    signed: OnceLock::new(),
                })
                .collect(),
        };
        let several = |t: RType| node.rows.iter().filter(|r| r.rtype == t).count() > 1;
        if several(RType::CNAME)
            && node
                .get(RType::CNAME, false)?
                .is_some_and(|c| c.rdatas.len() > 1)
        {
            return Err(node.bad("more than one CNAME".into()));
        }
        if node.has(RType::CNAME)
            && node
                .slots
                .iter()
                .any(|s| s.rtype != RType::CNAME && s.rtype != RType::NSEC)
        {
            return Err(node.bad("CNAME and other data".into()));
        }
        if several(RType::DNAME)
            && node
                .get(RType::DNAME, false)?
                .is_some_and(|d| d.rdatas.len() > 1)
        {
            return Err(node.bad("more than one DNAME".into()));
        }
        // Two SOAs would both be served as the zone's (RFC 1035 §5.2: exactly
        // one per zone); loadzone, memory zones and transfers refuse them too.
        if several(RType::SOA)
            && node
                .get(RType::SOA, false)?
                .is_some_and(|d| d.rdatas.len() > 1)
        {
            return Err(node.bad("more than one SOA".into()));
        }
        Ok(node)
    }
}

fn bad_data(origin: &Name, owner: &Name, reason: String) -> DataSourceError {
    DataSourceError::BadData {
        zone: origin.to_string(),
        name: owner.to_string(),
        reason,
    }
}

/// The records at one owner as stored, each type parsed on first use
/// ([`LazyNode`]): a lookup at the apex that wants the SOA parses neither the
/// NS nor the DNSKEY rows, and RRSIG rows are parsed only for a lookup that
/// wants DNSSEC records, and then only those covering the type asked for.
pub(super) struct RowNode {
    origin: Name,
    owner: Name,
    text: String,
    /// In the order read.
    rows: Vec<Row>,
    /// One per type other than RRSIG, in type order.
    slots: Vec<Slot>,
}

impl RowNode {
    fn bad(&self, reason: String) -> DataSourceError {
        bad_data(&self.origin, &self.owner, reason)
    }

    fn ttl(&self, row: &Row) -> Result<u32, DataSourceError> {
        // RFC 2181 §8: 0..=2^31-1 (loadzone writes none larger: a master file's
        // larger TTL is read as 0, as BIND 9 reads it).
        row.ttl
            .and_then(|t| u32::try_from(t).ok())
            .filter(|t| *t <= i32::MAX as u32)
            .ok_or_else(|| match row.ttl {
                Some(t) => self.bad(format!(
                    "{} row: bad TTL {t} (RFC 2181 §8: 0 to 2147483647)",
                    row.rtype
                )),
                None => self.bad(format!("{} row: TTL not a whole number", row.rtype)),
            })
    }

    fn parse(&self, row: &Row) -> Result<Rdata, DataSourceError> {
        let text = self.text.get(row.text.clone()).unwrap_or_default();
        Rdata::from_text(row.rtype, text, &self.origin).map_err(|e| self.bad(e.to_string()))
    }

    fn plain<'a>(&'a self, slot: &'a Slot) -> Result<&'a Arc<RRset>, DataSourceError> {
        let built = slot.plain.get_or_init(|| {
            let mut set: Option<RRset> = None;
            for row in self.rows.iter().filter(|r| r.rtype == slot.rtype) {
                let ttl = self.ttl(row)?;
                let rdata = self.parse(row)?;
                set.get_or_insert_with(|| {
                    RRset::new(self.owner.clone(), slot.rtype, Class::IN, ttl)
                })
                .push(ttl, rdata);
            }
            set.map(Arc::new)
                .ok_or_else(|| self.bad(format!("no {} rows", slot.rtype)))
        });
        built.as_ref().map_err(Clone::clone)
    }

    fn signed<'a>(&'a self, slot: &'a Slot) -> Result<&'a Arc<RRset>, DataSourceError> {
        let built = slot.signed.get_or_init(|| {
            let plain = self.plain(slot)?;
            let mut set: Option<RRset> = None;
            // In row order, as they were always attached; an RRSIG whose text
            // does not name its covered type up front is parsed to find it.
            for row in self
                .rows
                .iter()
                .filter(|r| r.rtype == RType::RRSIG && r.covers.is_none_or(|t| t == slot.rtype))
            {
                let sig = self.parse(row)?;
                if sig.rrsig_type_covered() == Some(slot.rtype) {
                    let ttl = self.ttl(row)?;
                    set.get_or_insert_with(|| RRset::clone(plain))
                        .push_sig(ttl, sig);
                }
            }
            Ok(set.map_or_else(|| plain.clone(), Arc::new))
        });
        built.as_ref().map_err(Clone::clone)
    }
}

impl LazyNode for RowNode {
    fn has(&self, rtype: RType) -> bool {
        self.slots.iter().any(|s| s.rtype == rtype)
    }

    fn get(&self, rtype: RType, dnssec: bool) -> Result<Option<&Arc<RRset>>, DataSourceError> {
        let Some(slot) = self.slots.iter().find(|s| s.rtype == rtype) else {
            return Ok(None);
        };
        if dnssec {
            return self.signed(slot).map(Some);
        }
        // Built with its RRSIGs already by an earlier lookup of the query.
        if let Some(Ok(set)) = slot.signed.get() {
            return Ok(Some(set));
        }
        self.plain(slot).map(Some)
    }

    fn all(&self) -> Result<Vec<Arc<RRset>>, DataSourceError> {
        self.slots.iter().map(|s| self.signed(s).cloned()).collect()
    }
}

/// The node handed to [`crate::finder::find`].
pub(super) fn lazy(node: Arc<RowNode>, dnssec: bool) -> NodeRef<'static> {
    NodeRef::Lazy { node, dnssec }
}

/// Every RRset of a node, all rows parsed (transfers, loading into memory).
pub(super) fn all_rrsets(rows: RowsBuilder<'_>) -> Result<Vec<RRset>, DataSourceError> {
    let node = rows.finish()?;
    let sets = node.all()?;
    drop(node);
    Ok(sets.into_iter().map(Arc::unwrap_or_clone).collect())
}
