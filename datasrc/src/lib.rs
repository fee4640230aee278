//! authd's data sources: DNS data types, the [`DataSource`] trait every backend
//! implements, the shared lookup algorithm ([`finder`]), master-file reading
//! ([`zonefile`]) and the backends ([`sqlite`]).

pub mod dnssec;
pub mod finder;
pub mod lookup;
pub mod memory;
mod memory_writer;
pub mod name;
pub mod node;
mod node_map;
mod rdata_text;
pub mod rr;
pub mod signer;
pub mod source;
pub mod sqlite;
pub mod sqlite_admin;
pub mod sqlite_load;
pub mod sqlite_rollover;
pub mod sqlite_signing;
pub mod write;
pub mod zonefile;

pub use lookup::{DataSourceError, Lookup, LookupOptions, Outcome, ZoneRef};
pub use name::{Name, NameError};
pub use rr::{Class, RRset, RType, Rdata, Record, RrError};
pub use source::{CacheStats, DataSource, SourceList, ZoneSelection};
pub use write::{WriteError, ZoneWriter};
