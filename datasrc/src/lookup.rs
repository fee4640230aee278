//! What a lookup asks and answers: the zone, the options, the outcome and
//! the failure types shared by the [`crate::DataSource`] seam, the shared
//! lookup algorithm ([`crate::finder`]) and the denial proofs
//! ([`crate::dnssec`]). A DNS outcome (NXDOMAIN, NODATA, a referral, …) is
//! never an `Err`: `Err` means the source itself failed and becomes SERVFAIL.

use std::sync::Arc;

use crate::name::Name;
use crate::rr::RRset;

/// A zone held by one data source.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ZoneRef {
    /// The zone apex.
    pub origin: Name,
    /// The backend's own id for the zone (BIND 10's `zones.id` for sqlite3).
    pub id: i64,
}

/// Options of one lookup, after BIND 10's `FIND_GLUE_OK`, `FIND_DNSSEC`, `NO_WILDCARD`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LookupOptions {
    /// Look below zone cuts (for glue, RFC 1034 §4.3.2 step 3b additional data).
    pub glue_ok: bool,
    /// Attach RRSIGs to returned RRsets (RFC 4035 §3.1).
    pub dnssec: bool,
    /// Do not apply wildcards (RFC 4592).
    pub no_wildcard: bool,
}

/// What a lookup of (qname, qtype) in a zone found (RFC 1034 §4.3.2 step 3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The RRset of the asked type at qname.
    Answer(Arc<RRset>),
    /// For qtype ANY: every RRset at qname.
    AnyAnswer(Vec<Arc<RRset>>),
    /// qname is at or below a zone cut: the NS RRset at the cut (owner = the cut).
    Delegation(Arc<RRset>),
    /// qname owns a CNAME and qtype is not CNAME.
    Cname(Arc<RRset>),
    /// An ancestor of qname owns a DNAME (RFC 6672 §2.3): that DNAME RRset.
    Dname(Arc<RRset>),
    /// No such name (and no wildcard matched).
    NxDomain,
    /// The name exists but has no data of that type (RFC 2308 §2.2 NODATA).
    NoData,
}

/// Denial-of-existence RRsets of one lookup: at most a handful (RFC 5155 §7.2
/// needs three NSEC3s), kept inline so a lookup allocates nothing for them.
pub type Proof = smallvec::SmallVec<[Arc<RRset>; 4]>;

/// The result of one lookup: the outcome plus facts the query processor needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lookup {
    /// What was found.
    pub outcome: Outcome,
    /// A wildcard produced the outcome (RFC 4592 §3.3); returned RRsets keep the
    /// wildcard owner (`*.…`) and the renderer writes qname in its place.
    pub wildcard: bool,
    /// qname is an empty non-terminal (RFC 4592 §2.2.2): NODATA.
    pub empty_nonterminal: bool,
    /// With [`LookupOptions::dnssec`] on a signed zone: the NSEC or NSEC3 RRsets
    /// (RRSIGs attached) that prove the outcome (RFC 4035 §3.1.3, RFC 5155 §7.2),
    /// for the authority section. Empty otherwise.
    pub proof: Proof,
}

impl Lookup {
    /// A plain (non-wildcard, not an empty non-terminal) lookup result.
    pub fn plain(outcome: Outcome) -> Lookup {
        Lookup {
            outcome,
            wildcard: false,
            empty_nonterminal: false,
            proof: Proof::new(),
        }
    }
}

/// Why a data source failed (not a DNS outcome).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataSourceError {
    /// The storage failed (I/O, SQL, a corrupt file); the text names the file.
    #[error("{0}")]
    Storage(String),
    /// Stored data is invalid, e.g. unparsable rdata or a CNAME beside other data.
    #[error("zone {zone}: bad data at {name}: {reason}")]
    BadData {
        /// Zone apex.
        zone: String,
        /// Owner name of the bad data.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A lookup named a zone this source does not hold (any more).
    #[error("zone {0} is not held by this data source")]
    NoSuchZone(String),
}
