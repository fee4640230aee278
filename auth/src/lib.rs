//! authd: an authoritative DNS server.
//!
//! The pipeline, one module per arrow: socket ([`server`]) → wire query
//! ([`wire`]) → query processing ([`query`], RFC 1034 §4.3.2) over the data
//! sources of `authd-datasrc` → rendered reply ([`wire`]) → socket.

pub mod acl;
pub mod allocator;
pub mod catalog;
pub mod chaos;
pub mod cli;
pub mod config;
pub mod control;
pub mod cookies;
pub mod dispatch;
pub mod dnstap;
pub mod edns;
pub mod keys;
mod log_limit;
pub mod metrics;
pub mod name_hash;
pub mod notify;
pub mod notify_in;
pub mod query;
pub mod rrl;
pub mod secondary;
pub mod sections;
pub mod server;
pub mod settings;
pub mod signing;
pub mod sys;
pub mod tls;
pub mod tsig;
pub mod update;
pub mod wire;
pub mod xfr;
pub mod xfrin;
