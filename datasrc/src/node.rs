//! The storage primitives the shared lookup algorithm ([`crate::finder`]) and
//! the denial proofs ([`crate::dnssec`]) walk: nodes (all RRsets at one owner
//! name) and the [`NodeStore`] a backend implements to serve them.

use std::sync::Arc;

use crate::lookup::DataSourceError;
use crate::name::Name;
use crate::rr::{RRset, RType};

/// All RRsets at one owner name, each with its RRSIGs attached.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    /// The RRsets; at most one per type. Never contains a bare RRSIG set.
    /// Two inline (as small as a `Vec`): most nodes of a large zone (a
    /// delegation's NS and DS, a host's A and AAAA) need no heap block, and
    /// a lookup reads one cold line fewer.
    pub rrsets: smallvec::SmallVec<[Arc<RRset>; 2]>,
    /// The additional-section A and AAAA RRsets prepared for this node's NS,
    /// MX and SRV RRsets, by type (memory snapshots fill it when built;
    /// empty elsewhere). Kept in the node a lookup has just read, the first
    /// inline (a node rarely has two of those types), so placing a
    /// referral's glue costs no further probe into a cold table.
    pub additional: smallvec::SmallVec<[(RType, Additional); 1]>,
}

/// Additional-section RRsets prepared for one RRset, in placing order.
pub type Additional = Arc<[Arc<RRset>]>;

impl Node {
    /// The RRset of type `rtype`, if any.
    pub fn get(&self, rtype: RType) -> Option<&Arc<RRset>> {
        self.rrsets.iter().find(|r| r.rtype == rtype)
    }
}

/// A node whose RRsets are built from stored rows on first use, each type on
/// its own (the sqlite3 backend): a lookup parses only the types it needs, and
/// a row that does not parse fails only the lookups that need its type (as
/// BIND 10's `DatabaseClient` did, converting only the types a find wanted).
pub trait LazyNode: Send + Sync {
    /// True when the node owns records of `rtype` (never RRSIG); parses nothing.
    fn has(&self, rtype: RType) -> bool;

    /// The RRset of `rtype` (never RRSIG); its RRSIGs are attached when
    /// `dnssec` is true (they may be anyway).
    ///
    /// Errors: [`DataSourceError::BadData`] naming the owner when a row of
    /// that type (or, with `dnssec`, an RRSIG row) does not parse.
    fn get(&self, rtype: RType, dnssec: bool) -> Result<Option<&Arc<RRset>>, DataSourceError>;

    /// Every RRset, RRSIGs attached, in type order.
    ///
    /// Errors: as [`LazyNode::get`], for any row of the node.
    fn all(&self) -> Result<Vec<Arc<RRset>>, DataSourceError>;
}

/// A node handed out by a [`NodeStore`]: borrowed from a snapshot, shared
/// (held by a cache) without copying it, or built type by type on first use.
pub enum NodeRef<'a> {
    /// Borrowed from the store.
    Borrowed(&'a Node),
    /// Owned jointly with the store.
    Shared(Arc<Node>),
    /// Parsed per type on first use.
    Lazy {
        /// The node.
        node: Arc<dyn LazyNode>,
        /// Whether the lookup wants RRSIGs attached.
        dnssec: bool,
    },
}

impl NodeRef<'_> {
    /// True when the node owns records of `rtype` (never RRSIG), without
    /// building the RRset.
    pub fn has(&self, rtype: RType) -> bool {
        match self {
            NodeRef::Borrowed(n) => n.get(rtype).is_some(),
            NodeRef::Shared(n) => n.get(rtype).is_some(),
            NodeRef::Lazy { node, .. } => node.has(rtype),
        }
    }

    /// The RRset of type `rtype`, if any.
    ///
    /// Errors: a lazy node's rows of that type do not parse ([`LazyNode::get`]).
    pub fn get(&self, rtype: RType) -> Result<Option<&Arc<RRset>>, DataSourceError> {
        match self {
            NodeRef::Borrowed(n) => Ok(n.get(rtype)),
            NodeRef::Shared(n) => Ok(n.get(rtype)),
            NodeRef::Lazy { node, dnssec } => node.get(rtype, *dnssec),
        }
    }

    /// Every RRset of the node, RRSIGs attached, in the node's order.
    ///
    /// Errors: a lazy node has a row that does not parse.
    pub fn all(&self) -> Result<Vec<Arc<RRset>>, DataSourceError> {
        match self {
            NodeRef::Borrowed(n) => Ok(n.rrsets.to_vec()),
            NodeRef::Shared(n) => Ok(n.rrsets.to_vec()),
            NodeRef::Lazy { node, .. } => node.all(),
        }
    }

    /// A shared, fully built handle to the node (a copy only when borrowed).
    ///
    /// Errors: a lazy node has a row that does not parse.
    pub fn to_shared(&self) -> Result<Arc<Node>, DataSourceError> {
        match self {
            NodeRef::Borrowed(n) => Ok(Arc::new((*n).clone())),
            NodeRef::Shared(n) => Ok(n.clone()),
            NodeRef::Lazy { node, .. } => Ok(Arc::new(Node {
                rrsets: node.all()?.into(),
                additional: smallvec::SmallVec::new(),
            })),
        }
    }
}

/// The two stored names around an absent one, as reversed names in lower case
/// (`com.example.` for `Example.COM.`, [`Name::reversed_text`]) compared as bytes,
/// which is the order of BIND 10's `rname` index (NOCASE folds ASCII only).
/// No name of the zone lies strictly between `below` and `above`; `None` is
/// past that end of the zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbsentRange {
    /// The greatest stored reversed name below the absent one.
    pub below: Option<Vec<u8>>,
    /// The least stored reversed name above it.
    pub above: Option<Vec<u8>>,
}

impl AbsentRange {
    /// True when `name` owns no records and none below it, by this range:
    /// its reversed name lies strictly inside, and `above` is not below it.
    pub fn covers(&self, reversed: &[u8]) -> bool {
        self.below.as_deref().is_none_or(|b| b < reversed)
            && self
                .above
                .as_deref()
                .is_none_or(|a| reversed < a && !a.starts_with(reversed))
    }
}

/// The key [`AbsentRange`]s compare: the reversed name in ASCII lower case.
pub fn absent_key(name: &Name) -> Vec<u8> {
    let mut key = name.reversed_text().into_bytes();
    key.make_ascii_lowercase();
    key
}

/// What a backend must provide for [`crate::finder::find`].
pub trait NodeStore {
    /// The data at exactly `name` in the zone, or `None` when it owns no records.
    /// RRSIGs must be attached when `dnssec` is true (they may always be).
    fn node(&self, name: &Name, dnssec: bool) -> Result<Option<NodeRef<'_>>, DataSourceError>;

    /// True when some name strictly below `name` owns records.
    fn has_descendants(&self, name: &Name) -> Result<bool, DataSourceError>;

    /// For a name that owns no records and has none below it, the stored
    /// names next to it in the order of reversed names ([`AbsentRange`]).
    /// `None` when the backend keeps no such order (or the name exists).
    /// Caches use it to remember one range instead of one entry per absent
    /// name (a flood of random names under one parent hits the same few).
    ///
    /// Errors: storage failure.
    fn absent_range(&self, name: &Name) -> Result<Option<AbsentRange>, DataSourceError> {
        let _ = name;
        Ok(None)
    }

    /// The NSEC RRset (RRSIGs attached) of the greatest owner name ≤ `name` in
    /// canonical order (RFC 4034 §6.1) that owns an NSEC, wrapping round to the
    /// last one: the NSEC that matches or covers `name` (RFC 4035 §3.1.3).
    /// `None` when the zone has no NSEC.
    fn covering_nsec(&self, name: &Name) -> Result<Option<Arc<RRset>>, DataSourceError>;

    /// The NSEC3 RRset (RRSIGs attached) whose owner hash is the greatest ≤
    /// `hash` (base32hex, lower-case ASCII, RFC 5155 §3.3), wrapping round to the
    /// last one, and whether it matches `hash` exactly. `None` without NSEC3.
    fn covering_nsec3(&self, hash: &[u8]) -> Result<Option<(Arc<RRset>, bool)>, DataSourceError>;
}
