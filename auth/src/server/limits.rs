//! `[tcp]`: the limits TCP serving keeps to (`tcp.rs`: the first-query and
//! idle timeouts; `conns.rs`: the connection counts), with its raw shape and
//! checks. A leaf (it imports nothing of the server), so the configuration
//! composes it while the server reads the configuration.

use std::time::Duration;

use serde::Deserialize;

use crate::settings::{Context, Invalid, Kind, Schema, Section, in_range, whole};

/// Default `[tcp] idle_timeout`, in seconds.
pub const DEFAULT_TCP_IDLE_TIMEOUT_SECS: u64 = 10;

/// Default `[tcp] max_connections`.
pub const DEFAULT_TCP_MAX_CONNECTIONS: usize = 512;

/// Default most concurrent TCP connections per client prefix.
pub const DEFAULT_TCP_MAX_CONNECTIONS_PER_CLIENT: usize = 32;

/// Default time for a new TCP connection's first query, seconds.
pub const DEFAULT_TCP_FIRST_QUERY_TIMEOUT_SECS: u64 = 3;

/// Largest accepted `[tcp] idle_timeout` (and `first_query_timeout`), in
/// seconds (one day).
const MAX_TCP_IDLE_TIMEOUT_SECS: u64 = 86_400;

/// Largest accepted `[tcp] max_connections` (and per client).
const MAX_TCP_MAX_CONNECTIONS: usize = 1_000_000;

/// TCP limits (`[tcp]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpConfig {
    /// How long a connection may stay without a complete query (counted from
    /// its last one) before it is closed.
    pub idle_timeout: Duration,
    /// Most concurrent connections; when all are taken, the connection idle
    /// longest is closed to make room.
    pub max_connections: usize,
    /// Most concurrent connections from one client prefix (the `[rrl]`
    /// prefix lengths); further ones from it are closed at once.
    pub max_connections_per_client: usize,
    /// How long a new connection has to deliver its first complete query.
    pub first_query_timeout: Duration,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            idle_timeout: Duration::from_secs(DEFAULT_TCP_IDLE_TIMEOUT_SECS),
            max_connections: DEFAULT_TCP_MAX_CONNECTIONS,
            max_connections_per_client: DEFAULT_TCP_MAX_CONNECTIONS_PER_CLIENT,
            first_query_timeout: Duration::from_secs(DEFAULT_TCP_FIRST_QUERY_TIMEOUT_SECS),
        }
    }
}

/// `[tcp]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTcp {
    #[serde(default, deserialize_with = "whole")]
    idle_timeout: Option<u64>,
    #[serde(default, deserialize_with = "whole")]
    max_connections: Option<usize>,
    #[serde(default, deserialize_with = "whole")]
    max_connections_per_client: Option<usize>,
    #[serde(default, deserialize_with = "whole")]
    first_query_timeout: Option<u64>,
}

impl Section for RawTcp {
    type Value = TcpConfig;

    const SCHEMA: Schema = &[(
        "tcp",
        &[
            ("idle_timeout", Kind::Whole),
            ("max_connections", Kind::Whole),
            ("max_connections_per_client", Kind::Whole),
            ("first_query_timeout", Kind::Whole),
        ],
    )];

    /// Every limit in its range.
    fn check(self, _: &Context<'_>) -> Result<TcpConfig, Invalid> {
        let idle = in_range(
            "tcp.idle_timeout",
            self.idle_timeout,
            DEFAULT_TCP_IDLE_TIMEOUT_SECS,
            1..=MAX_TCP_IDLE_TIMEOUT_SECS,
            " seconds",
        )?;
        let max_connections = in_range(
            "tcp.max_connections",
            self.max_connections,
            DEFAULT_TCP_MAX_CONNECTIONS,
            1..=MAX_TCP_MAX_CONNECTIONS,
            "",
        )?;
        let max_connections_per_client = in_range(
            "tcp.max_connections_per_client",
            self.max_connections_per_client,
            DEFAULT_TCP_MAX_CONNECTIONS_PER_CLIENT,
            1..=MAX_TCP_MAX_CONNECTIONS,
            "",
        )?;
        let first = in_range(
            "tcp.first_query_timeout",
            self.first_query_timeout,
            DEFAULT_TCP_FIRST_QUERY_TIMEOUT_SECS,
            1..=MAX_TCP_IDLE_TIMEOUT_SECS,
            " seconds",
        )?;
        Ok(TcpConfig {
            idle_timeout: Duration::from_secs(idle),
            max_connections,
            max_connections_per_client,
            first_query_timeout: Duration::from_secs(first),
        })
    }
}
