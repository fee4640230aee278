//! The node view of one zone ([`NodeStore`], walked by [`finder::find`]):
//! nodes read by owner name, the empty-non-terminal and absent-name range
//! tests, and the NSEC/NSEC3 that cover a name, all answered from SQL.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

use rusqlite::Connection;

use super::rows::{RowNode, RowsBuilder, bytes, int, lazy, text, text_cow};
use super::{SqliteSource, storage};
use crate::finder;
use crate::lookup::{DataSourceError, Lookup, LookupOptions, ZoneRef};
use crate::name::Name;
use crate::node::{self, AbsentRange, LazyNode, NodeRef, NodeStore};
use crate::rr::{RRset, RType};

/// The query path's statements. `+zone_id` keeps the planner off authd's
/// indexes that lead with `zone_id` (`authd_records_byzone`,
/// `authd_records_canonical`, `authd_nsec3_byzone`, made when authd first
/// writes a DB): without table statistics it takes them for selective and
/// reads the whole zone for each lookup, where BIND 10's name, rname and
/// hash indexes need one seek (`tests::no_statement_reads_the_whole_zone`).
const NODE_SQL: &str = "SELECT rdtype, ttl, rdata FROM records WHERE +zone_id=?1 AND name=?2";
const BELOW_SQL: &str =
    "SELECT 1 FROM records WHERE +zone_id=?1 AND rname > ?2 AND rname < ?3 LIMIT 1";
const BEFORE_SQL: &str =
    "SELECT rname FROM records WHERE +zone_id=?1 AND rname < ?2 ORDER BY rname DESC LIMIT 1";
const AFTER_SQL: &str =
    "SELECT rname FROM records WHERE +zone_id=?1 AND rname > ?2 ORDER BY rname LIMIT 1";
const NSEC_OWNERS_SQL: &str = "SELECT name FROM records WHERE +zone_id=?1 AND rdtype='NSEC'";
const NSEC_AT_OR_BEFORE_SQL: &str = "SELECT name FROM records WHERE +zone_id=?1 AND rdtype='NSEC' AND rname <= ?2 ORDER BY rname DESC LIMIT 1";
const NSEC_LAST_SQL: &str = "SELECT name FROM records WHERE +zone_id=?1 AND rdtype='NSEC' AND ?2 <> '' ORDER BY rname DESC LIMIT 1";
const NSEC3_AT_OR_BEFORE_SQL: &str =
    "SELECT DISTINCT hash FROM nsec3 WHERE +zone_id=?1 AND hash <= ?2 ORDER BY hash DESC LIMIT 1";
const NSEC3_LAST_SQL: &str =
    "SELECT DISTINCT hash FROM nsec3 WHERE +zone_id=?1 AND ?2 <> '' ORDER BY hash DESC LIMIT 1";
const NSEC3_AT_SQL: &str =
    "SELECT rdtype, ttl, rdata, owner FROM nsec3 WHERE +zone_id=?1 AND hash=?2";

/// Every statement above, for the plan test.
#[cfg(test)]
const QUERY_PATH: [&str; 10] = [
    NODE_SQL,
    BELOW_SQL,
    BEFORE_SQL,
    AFTER_SQL,
    NSEC_OWNERS_SQL,
    NSEC_AT_OR_BEFORE_SQL,
    NSEC_LAST_SQL,
    NSEC3_AT_OR_BEFORE_SQL,
    NSEC3_LAST_SQL,
    NSEC3_AT_SQL,
];

/// Nodes already read by the lookups of one query, with the zone id: a
/// referral's glue lookups all pass through the apex and the same few cuts,
/// which are then read once instead of once per target. Keyed by the exact
/// name (case too), since RRsets take their owner from the name asked for.
pub(super) type Memo = RefCell<Vec<(i64, Name, Option<Arc<RowNode>>)>>;

/// The zone-scoped view [`finder::find`] walks.
pub(super) struct ZoneView<'a> {
    pub(super) conn: &'a Connection,
    pub(super) zone: &'a ZoneRef,
    pub(super) path: &'a Path,
    pub(super) memo: &'a Memo,
}

impl NodeStore for ZoneView<'_> {
    fn node(&self, name: &Name, dnssec: bool) -> Result<Option<NodeRef<'_>>, DataSourceError> {
        if let Some((_, _, node)) = self
            .memo
            .borrow()
            .iter()
            .find(|(z, n, _)| *z == self.zone.id && n.eq_case(name))
        {
            return Ok(node.clone().map(|node| lazy(node, dnssec)));
        }
        let mut stmt = self
            .conn
            .prepare_cached(NODE_SQL)
            .map_err(|e| storage(self.path, e))?;
        let mut rows = stmt
            .query(rusqlite::params![self.zone.id, name.to_string()])
            .map_err(|e| storage(self.path, e))?;
        let mut builder = RowsBuilder::new(self.zone, name.clone());
        let mut any = false;
        while let Some(row) = rows.next().map_err(|e| storage(self.path, e))? {
            any = true;
            let (Some(rdtype), Some(rdata)) = (
                row.get_ref(0).ok().and_then(text_cow),
                row.get_ref(2).ok().and_then(text_cow),
            ) else {
                return Err(builder.bad("row with a NULL or unreadable column".into()));
            };
            let ttl = row.get_ref(1).ok().and_then(int);
            builder.add_row(&rdtype, ttl, &rdata)?;
        }
        let node = if any {
            Some(Arc::new(builder.finish()?))
        } else {
            None
        };
        self.memo
            .borrow_mut()
            .push((self.zone.id, name.clone(), node.clone()));
        Ok(node.map(|node| lazy(node, dnssec)))
    }

    fn has_descendants(&self, name: &Name) -> Result<bool, DataSourceError> {
        // Names below X have an rname that starts with X's rname ("com.example.");
        // a range scan on the NOCASE index finds them without LIKE's `_`/`%` quirks.
        let (sql, lower, upper) = if name.is_root() {
            (
                "SELECT 1 FROM records WHERE zone_id=?1 AND rname <> ?2 AND ?3 <> '' LIMIT 1",
                ".".to_string(),
                "x".to_string(),
            )
        } else {
            let r = name.reversed_text();
            let upper = format!("{}/", &r[..r.len() - 1]);
            (BELOW_SQL, r, upper)
        };
        let mut stmt = self
            .conn
            .prepare_cached(sql)
            .map_err(|e| storage(self.path, e))?;
        stmt.exists(rusqlite::params![self.zone.id, lower, upper])
            .map_err(|e| storage(self.path, e))
    }

    fn absent_range(&self, name: &Name) -> Result<Option<AbsentRange>, DataSourceError> {
        if name.is_root() {
            return Ok(None);
        }
        let r = name.reversed_text();
        let neighbour = |sql: &str| -> Result<Option<Vec<u8>>, DataSourceError> {
            let mut stmt = self
                .conn
                .prepare_cached(sql)
                .map_err(|e| storage(self.path, e))?;
            let mut rows = stmt
                .query(rusqlite::params![self.zone.id, r])
                .map_err(|e| storage(self.path, e))?;
            let Some(row) = rows.next().map_err(|e| storage(self.path, e))? else {
                return Ok(None);
            };
            let Some(mut key) = row.get_ref(0).ok().and_then(bytes) else {
                return Err(storage(self.path, "rname NULL or unreadable"));
            };
            key.make_ascii_lowercase();
            Ok(Some(key))
        };
        let below = neighbour(BEFORE_SQL)?;
        let above = neighbour(AFTER_SQL)?;
        let range = AbsentRange { below, above };
        // The name itself, or a name below it, is stored after all (an rname
        // spelled unlike ours): no range.
        Ok(range.covers(&node::absent_key(name)).then_some(range))
    }

    fn covering_nsec(&self, name: &Name) -> Result<Option<Arc<RRset>>, DataSourceError> {
        // BIND 10's FIND_PREVIOUS over the reversed names is only an
        // approximation of canonical order: bytes below `.` (`*`, `-`, `!`)
        // sort before the label separator, and in the root zone "." sorts
        // after "*." (regression: `root_wildcard_nsec_sqlite`). So the NSEC
        // found that way is checked against its next-name field and, when it
        // does not cover `name`, the exact one is found in canonical order.
        if let Some(nsec) = self.nsec_by_rname(name)?
            && nsec_covers(&nsec, name)
        {
            return Ok(Some(nsec));
        }
        let mut stmt = self
            .conn
            .prepare_cached(NSEC_OWNERS_SQL)
            .map_err(|e| storage(self.path, e))?;
        let mut rows = stmt
            .query(rusqlite::params![self.zone.id])
            .map_err(|e| storage(self.path, e))?;
        let (mut below, mut last): (Option<Name>, Option<Name>) = (None, None);
        while let Some(row) = rows.next().map_err(|e| storage(self.path, e))? {
            let Some(owner) = row
                .get_ref(0)
                .ok()
                .and_then(text)
                .and_then(|t| Name::parse(&t, Some(&self.zone.origin)).ok())
            else {
                continue;
            };
            if owner <= *name && below.as_ref().is_none_or(|b| owner > *b) {
                below = Some(owner.clone());
            }
            if last.as_ref().is_none_or(|l| owner > *l) {
                last = Some(owner);
            }
        }
        let Some(owner) = below.or(last) else {
            return Ok(None);
        };
        match self.node(&owner, true)? {
            Some(n) => Ok(n.get(RType::NSEC)?.cloned()),
            None => Ok(None),
        }
    }

    fn covering_nsec3(&self, hash: &[u8]) -> Result<Option<(Arc<RRset>, bool)>, DataSourceError> {
        self.covering_nsec3_impl(hash)
    }
}

/// True when `nsec` matches or covers `name` (RFC 4035 §3.1.3): owner ≤ name <
/// next name, or the last NSEC of the chain (next ≤ owner) and owner ≤ name.
/// An unreadable next name counts as covering (nothing better to check with).
fn nsec_covers(nsec: &RRset, name: &Name) -> bool {
    let Some(next) = nsec.rdatas.first().and_then(|r| {
        let wire = r.as_wire();
        let len = crate::name::wire_name_len(wire)?;
        Name::from_wire(wire.get(..len)?).ok()
    }) else {
        return true;
    };
    let owner = &nsec.owner;
    if owner > name {
        return false;
    }
    next <= *owner || *name < next
}

impl ZoneView<'_> {
    /// The first column of the first row of the first of `statements` that
    /// returns a row (`?1` = zone id, `?2` = `key`): a "previous" lookup and its
    /// wrap-round fallback.
    fn first_text(
        &self,
        statements: [&str; 2],
        key: &str,
    ) -> Result<Option<String>, DataSourceError> {
        for sql in statements {
            let mut stmt = self
                .conn
                .prepare_cached(sql)
                .map_err(|e| storage(self.path, e))?;
            let mut rows = stmt
                .query(rusqlite::params![self.zone.id, key])
                .map_err(|e| storage(self.path, e))?;
            if let Some(row) = rows.next().map_err(|e| storage(self.path, e))? {
                return Ok(row.get_ref(0).ok().and_then(text));
            }
        }
        Ok(None)
    }

    /// The NSEC of the greatest owner ≤ `name` in `rname` (text) order, wrapping round.
    fn nsec_by_rname(&self, name: &Name) -> Result<Option<Arc<RRset>>, DataSourceError> {
        let owner = self.first_text(
            [NSEC_AT_OR_BEFORE_SQL, NSEC_LAST_SQL],
            &name.reversed_text(),
        )?;
        let Some(owner) = owner else {
            return Ok(None);
        };
        let owner =
            Name::parse(&owner, Some(&self.zone.origin)).map_err(|e| DataSourceError::BadData {
                zone: self.zone.origin.to_string(),
                name: owner.clone(),
                reason: e.to_string(),
            })?;
        match self.node(&owner, true)? {
            Some(n) => Ok(n.get(RType::NSEC)?.cloned()),
            None => Ok(None),
        }
    }

    fn covering_nsec3_impl(
        &self,
        hash: &[u8],
    ) -> Result<Option<(Arc<RRset>, bool)>, DataSourceError> {
        let hash = String::from_utf8_lossy(hash).into_owned();
        let found = self.first_text([NSEC3_AT_OR_BEFORE_SQL, NSEC3_LAST_SQL], &hash)?;
        let Some(found) = found else {
            return Ok(None);
        };
        let mut stmt = self
            .conn
            .prepare_cached(NSEC3_AT_SQL)
            .map_err(|e| storage(self.path, e))?;
        let mut rows = stmt
            .query(rusqlite::params![self.zone.id, found])
            .map_err(|e| storage(self.path, e))?;
        let mut builder: Option<RowsBuilder<'_>> = None;
        while let Some(row) = rows.next().map_err(|e| storage(self.path, e))? {
            let (Some(rdtype), Some(ttl), Some(rdata), Some(owner)) = (
                row.get_ref(0).ok().and_then(text),
                row.get_ref(1).ok().and_then(int),
                row.get_ref(2).ok().and_then(text),
                row.get_ref(3).ok().and_then(text),
            ) else {
                return Err(storage(self.path, "nsec3 row with a NULL column"));
            };
            if builder.is_none() {
                let owner = Name::parse(&owner, Some(&self.zone.origin)).map_err(|e| {
                    DataSourceError::BadData {
                        zone: self.zone.origin.to_string(),
                        name: owner.clone(),
                        reason: e.to_string(),
                    }
                })?;
                builder = Some(RowsBuilder::new(self.zone, owner));
            }
            if let Some(b) = builder.as_mut() {
                b.add_row(&rdtype, Some(ttl), &rdata)?;
            }
        }
        let Some(builder) = builder else {
            return Ok(None);
        };
        let exact = found.eq_ignore_ascii_case(&hash);
        Ok(builder
            .finish()?
            .get(RType::NSEC3, true)?
            .map(|s| (s.clone(), exact)))
    }
}

impl SqliteSource {
    /// Runs [`finder::find`] over `conn`, reading nodes through `memo`.
    pub(super) fn find(
        &self,
        conn: &Connection,
        memo: &Memo,
        zone: &ZoneRef,
        qname: &Name,
        qtype: RType,
        opts: LookupOptions,
    ) -> Result<Lookup, DataSourceError> {
        let view = ZoneView {
            conn,
            zone,
            path: &self.path,
            memo,
        };
        finder::find(&view, &zone.origin, qname, qtype, opts)
    }
}

#[cfg(test)]
mod tests {
    /// On a DB authd has written (its indexes made), no query-path
    /// statement is planned over a `zone_id` index: each seeks BIND 10's
    /// own index (the root's descendant test aside, which stops at its first
    /// row anyway).
    #[test]
    fn no_statement_reads_the_whole_zone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let conn = authd_migrations::open_or_create(&dir.path().join("z.sqlite3")).expect("db");
        authd_migrations::ensure_authd_indexes(&conn).expect("indexes");
        authd_migrations::ensure_signing_indexes(&conn).expect("signing indexes");
        for sql in super::QUERY_PATH {
            let params = sql.matches('?').count();
            let mut stmt = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .expect("plans");
            let values: Vec<String> = (0..params).map(|i| format!("x{i}")).collect();
            let plan: Vec<String> = stmt
                .query_map(rusqlite::params_from_iter(values.iter()), |r| {
                    r.get::<_, String>(3)
                })
                .expect("rows")
                .collect::<Result<_, _>>()
                .expect("plan rows");
            let plan = plan.join("; ");
            assert!(!plan.contains("authd_"), "{sql}: {plan}");
            assert!(
                plan.contains("USING INDEX records_by")
                    || plan.contains("USING INDEX nsec3_by")
                    || plan.contains("USING COVERING INDEX"),
                "{sql}: {plan}"
            );
        }
    }
}
