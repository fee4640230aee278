//! The TCP connection table: who holds a connection, since when it is idle,
//! and which connection gives way when the table is full.
//!
//! Fairness rules (RFC 7766 §6.2.3 leaves the policy to the server; these
//! follow what NSD and Knot DNS do against connection hoarding):
//! - a client prefix (the `[rrl]` prefix lengths) holds at most
//!   `per_client` connections; a newcomer over that is closed at once;
//! - when all `max` connections are taken, the one idle longest (time since
//!   its last complete query, or since it was accepted) is closed to make
//!   room, unless it is busy handling a message (microseconds; a connection
//!   waiting for its client to read its replies is idle); connections of
//!   clients the transfer ACL names are taken last, so query clients cannot
//!   starve secondaries;
//! - only when every connection is busy is the newcomer closed.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Notify;

use crate::acl::Cidr;

/// Limits of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ConnLimits {
    /// Most connections in all.
    pub max: usize,
    /// Most connections per client prefix.
    pub per_client: usize,
    /// IPv4 client prefix length, bits.
    pub ipv4_prefix: u8,
    /// IPv6 client prefix length, bits.
    pub ipv6_prefix: u8,
}

struct Entry {
    prefix: Cidr,
    /// What the connection's task moves per message, without the lock.
    state: Arc<ConnState>,
    /// A client the transfer ACL allows.
    transfer_client: bool,
    /// Wakes the connection's task to close it.
    close: Arc<Notify>,
}

/// The per-message state of one connection: written by its task with plain
/// atomic stores (no lock per message), read under the table's lock when a
/// full table picks the connection to close.
#[derive(Default)]
struct ConnState {
    /// When its last complete query arrived (or it was accepted):
    /// nanoseconds since the table's `epoch`.
    last_query: AtomicU64,
    /// Handling a message or writing its replies: never taken away.
    busy: AtomicBool,
}

/// Why a new connection is not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// Its client prefix holds `per_client` connections already.
    PerClient,
    /// Every connection is busy.
    Full,
}

/// The table, shared by every listener of the server.
pub(super) struct ConnTable {
    limits: ConnLimits,
    /// The zero of [`ConnState::last_query`].
    epoch: Instant,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    entries: HashMap<u64, Entry>,
    per_prefix: HashMap<Cidr, usize>,
}

/// A connection's place in the table; dropping it frees the place.
pub(super) struct Slot {
    table: Arc<ConnTable>,
    id: u64,
    state: Arc<ConnState>,
    /// Notified when the table takes the connection away.
    pub close: Arc<Notify>,
}

impl ConnTable {
    pub(super) fn new(limits: ConnLimits) -> Arc<ConnTable> {
        Arc::new(ConnTable {
            limits,
            epoch: Instant::now(),
            inner: Mutex::new(Inner::default()),
        })
    }

    /// Now, as a [`ConnState::last_query`] value.
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn prefix(&self, ip: IpAddr) -> Cidr {
        Cidr::client_block(ip, self.limits.ipv4_prefix, self.limits.ipv6_prefix)
    }

    /// Takes a place for a connection from `ip` (`transfer_client`: the
    /// transfer ACL allows it), closing the longest idle connection when the
    /// table is full.
    ///
    /// Errors: [`Refused`] when the newcomer must be closed instead.
    pub(super) fn admit(
        self: &Arc<Self>,
        ip: IpAddr,
        transfer_client: bool,
    ) -> Result<Slot, Refused> {
        let prefix = self.prefix(ip);
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.per_prefix.get(&prefix).copied().unwrap_or(0) >= self.limits.per_client {
            return Err(Refused::PerClient);
        }
        if inner.entries.len() >= self.limits.max.max(1) {
            // The longest idle, query clients before transfer clients; a
            // query client never evicts a transfer client.
            let victim = inner
                .entries
                .iter()
                .filter(|(_, e)| {
                    !e.state.busy.load(Ordering::Relaxed) && (transfer_client || !e.transfer_client)
                })
                .min_by_key(|(_, e)| {
                    (
                        e.transfer_client,
                        e.state.last_query.load(Ordering::Relaxed),
                    )
                })
                .map(|(id, _)| *id);
            let Some(victim) = victim else {
                return Err(Refused::Full);
            };
            if let Some(e) = inner.remove(victim) {
                e.close.notify_one();
            }
        }
        inner.next_id += 1;
        let id = inner.next_id;
        let close = Arc::new(Notify::new());
        let state = Arc::new(ConnState {
            last_query: AtomicU64::new(self.now()),
            busy: AtomicBool::new(false),
        });
        inner.entries.insert(
            id,
            Entry {
                prefix,
                state: Arc::clone(&state),
                transfer_client,
                close: Arc::clone(&close),
            },
        );
        *inner.per_prefix.entry(prefix).or_insert(0) += 1;
        Ok(Slot {
            table: Arc::clone(self),
            id,
            state,
            close,
        })
    }

    /// Connections open now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().map_or(0, |i| i.entries.len())
    }
}

impl Inner {
    fn remove(&mut self, id: u64) -> Option<Entry> {
        let e = self.entries.remove(&id)?;
        if let Some(n) = self.per_prefix.get_mut(&e.prefix) {
            *n -= 1;
            if *n == 0 {
                self.per_prefix.remove(&e.prefix);
            }
        }
        Some(e)
    }
}

impl Slot {
    /// A complete query arrived: the connection is busy until [`Self::idle`],
    /// and its idle time counts from now.
    /// Two atomic stores, no lock: per message, the table is not touched.
    pub(super) fn busy(&self) {
        self.state
            .last_query
            .store(self.table.now(), Ordering::Relaxed);
        self.state.busy.store(true, Ordering::Relaxed);
    }

    /// The replies are written: the connection may be taken away again.
    pub(super) fn idle(&self) {
        self.state.busy.store(false, Ordering::Relaxed);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut inner = self.table.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.remove(self.id);
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn table(max: usize, per_client: usize) -> Arc<ConnTable> {
        ConnTable::new(ConnLimits {
            max,
            per_client,
            ipv4_prefix: 24,
            ipv6_prefix: 56,
        })
    }

    fn ip(c: u8, d: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(192, 0, c, d))
    }

    #[test]
    fn per_client_prefix_limit() {
        let t = table(100, 2);
        let _a = t.admit(ip(2, 1), false).expect("first");
        let _b = t.admit(ip(2, 2), false).expect("second, same /24");
        assert_eq!(t.admit(ip(2, 3), false).err(), Some(Refused::PerClient));
        let c = t.admit(ip(3, 1), false).expect("another /24");
        drop(c);
        drop(_a);
        assert!(t.admit(ip(2, 3), false).is_ok(), "a place freed");
    }

    /// A full table closes the longest idle connection, never a busy one,
    /// and a query client never takes a transfer client's place.
    #[test]
    fn full_table_evicts_the_longest_idle() {
        let t = table(3, 10);
        let oldest = t.admit(ip(2, 1), false).expect("1");
        std::thread::sleep(std::time::Duration::from_millis(5));
        let busy = t.admit(ip(3, 1), false).expect("2");
        let xfr = t.admit(ip(4, 1), true).expect("3");
        busy.busy();
        // The newcomer gets the oldest idle query connection's place.
        let newcomer = t.admit(ip(5, 1), false).expect("evicts");
        assert_eq!(t.len(), 3);
        let closed = oldest.close.clone();
        assert!(
            tokio_test_notified(&closed),
            "the evicted connection is told to close"
        );
        drop(oldest); // its task ends; the table already let it go
        assert_eq!(t.len(), 3);
        // Now: busy (busy), transfer client, newcomer (idle). A query client
        // evicts the newcomer, not the transfer client.
        let second = t.admit(ip(6, 1), false).expect("evicts the newcomer");
        assert!(tokio_test_notified(&newcomer.close));
        // All busy or transfer: a query client is refused…
        second.busy();
        assert_eq!(t.admit(ip(7, 1), false).err(), Some(Refused::Full));
        // …a transfer client may take the idle transfer client's place.
        assert!(t.admit(ip(4, 2), true).is_ok());
        drop((busy, xfr));
    }

    /// True when `notify` holds a permit (notified with no waiter).
    fn tokio_test_notified(notify: &Notify) -> bool {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        rt.block_on(async {
            tokio::time::timeout(std::time::Duration::from_millis(50), notify.notified())
                .await
                .is_ok()
        })
    }
}
