//! UDP serving: receive a datagram, process it, send the reply (RFC 1035 §4.2.1).
//!
//! Each UDP socket of an address (bound with `SO_REUSEPORT`, so the kernel
//! spreads queries over them by flow hash) is served by one worker: a dedicated
//! OS thread named `authd-udp-N` running a blocking receive loop, with its own
//! receive and reply buffers reused for every datagram (on Linux a batch of
//! each: `recvmmsg` and `sendmmsg` share a system call among queries). The query
//! path takes no lock: the dispatcher is an `ArcSwap` load per batch. Workers do
//! not run on the tokio runtime, so TCP (which does) cannot delay them, and
//! they cost no reactor round trip per datagram.
//!
//! A message that may write to a zone ([`crate::dispatch::may_block`]: it can
//! wait on storage locks) is not answered by the worker: it is handed to the
//! worker's writer thread (`authd-udp-write-N`, a queue of [`WRITE_QUEUE`]
//! messages; one arriving when the queue is full is dropped, the client
//! retries), which answers it through the same socket, so a write waiting
//! for a lock delays no query.
//!
//! PROXY protocol (`[server] proxy_allow`, [`super::proxy`]): one header per
//! datagram from a proxy, taken off before the message is handled; the
//! client it names is the peer the dispatcher sees, and the reply goes back
//! to the proxy (without a header). A refused datagram is dropped.
//!
//! Stopping: [`UdpWorker::stop`] sets the stop flag and shuts the socket down
//! for reading, which wakes a blocked receive at once; the receive timeout
//! ([`RECV_TIMEOUT`]) is a fallback should that wake-up not happen. The
//! writer thread ends when its worker does.

use std::io;
use std::net::{Shutdown, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::oneshot;

use super::proxy::{self, ProxyPolicy};
use super::{DispatcherHandle, MAX_UDP_MESSAGE, ServerError, handle_guarded};
use crate::dispatch::Reply;
use crate::log_limit::LogLimit;
use crate::query::Transport;

/// Writes waiting for a worker's writer thread; more are dropped.
pub const WRITE_QUEUE: usize = 64;

/// Log lines for writes dropped with the queue full (a client can send many).
static DROP_LOG: LogLimit = LogLimit::new();

/// A message for the writer thread.
struct Write {
    msg: Vec<u8>,
    /// The client (named by a PROXY header, else the sender).
    client: SocketAddr,
    /// Where the reply goes: the sender.
    reply_to: SocketAddr,
    /// The server address the client sent it to.
    local: SocketAddr,
}

/// Starts worker `index`'s writer thread, answering each message queued on
/// `sock`.
fn spawn_writer(
    sock: Arc<UdpSocket>,
    index: usize,
    dispatcher: DispatcherHandle,
) -> io::Result<(
    std::sync::mpsc::SyncSender<Write>,
    std::thread::JoinHandle<()>,
)> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Write>(WRITE_QUEUE);
    let thread = std::thread::Builder::new()
        .name(format!("authd-udp-write-{index}"))
        .spawn(move || {
            let mut out = Vec::with_capacity(512);
            while let Ok(w) = rx.recv() {
                let reply = handle_guarded(
                    &dispatcher.load(),
                    &w.msg,
                    Transport::Udp,
                    w.client,
                    Some(w.local),
                    &mut out,
                );
                if reply == Reply::Message
                    && let Err(e) = sock.send_to(&out, w.reply_to)
                {
                    tracing::debug!("UDP send to {}: {e}", w.reply_to);
                }
            }
        })?;
    Ok((tx, thread))
}

/// Queues `msg` from `client` (sent by `reply_to` to `local`) for the writer
/// thread, or drops it (logged) when the queue is full.
fn queue_write(
    writes: &std::sync::mpsc::SyncSender<Write>,
    msg: &[u8],
    (client, reply_to, local): (SocketAddr, SocketAddr, SocketAddr),
) {
    let write = Write {
        msg: msg.to_vec(),
        client,
        reply_to,
        local,
    };
    if writes.try_send(write).is_err()
        && let Some(suppressed) = DROP_LOG.allow()
    {
        tracing::info!(
            suppressed,
            "UDP write from {client} dropped: {WRITE_QUEUE} writes already waiting"
        );
    }
}

/// Longest a worker blocks in one receive before it looks at the stop flag again.
pub(super) const RECV_TIMEOUT: Duration = Duration::from_millis(500);

/// A running UDP worker thread.
pub(super) struct UdpWorker {
    sock: Arc<UdpSocket>,
    stop: Arc<AtomicBool>,
}

/// Resolves when a worker thread has ended (its socket closed); an error if
/// the thread died.
pub(super) async fn finished(
    done: oneshot::Receiver<()>,
    local: SocketAddr,
) -> Result<(), ServerError> {
    done.await.map_err(|_| ServerError::Io {
        what: "UDP worker",
        addr: local,
        reason: "the worker thread panicked".to_string(),
    })
}

impl UdpWorker {
    /// Starts worker `index` serving `sock` (a blocking socket) on its own
    /// thread, taking PROXY headers off as `proxy` says. The receiver gets a message when the thread ends normally (it
    /// is dropped unsent if the thread dies): pass it to [`finished`].
    ///
    /// Errors: the socket could not be set up or the thread created.
    pub fn spawn(
        sock: UdpSocket,
        local: SocketAddr,
        index: usize,
        dispatcher: DispatcherHandle,
        proxy: Arc<ProxyPolicy>,
    ) -> Result<(UdpWorker, oneshot::Receiver<()>), ServerError> {
        let io_error = |what, e: &io::Error| ServerError::Io {
            what,
            addr: local,
            reason: super::io_reason(e),
        };
        sock.set_nonblocking(false)
            .map_err(|e| io_error("UDP socket set-up", &e))?;
        sock.set_read_timeout(Some(RECV_TIMEOUT))
            .map_err(|e| io_error("UDP socket set-up", &e))?;
        let sock = Arc::new(sock);
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, done) = oneshot::channel();
        let (thread_sock, thread_stop) = (Arc::clone(&sock), Arc::clone(&stop));
        let (writes, writer) = spawn_writer(Arc::clone(&sock), index, dispatcher.clone())
            .map_err(|e| io_error("UDP writer thread start", &e))?;
        std::thread::Builder::new()
            .name(format!("authd-udp-{index}"))
            .spawn(move || {
                let serving = Serving {
                    local,
                    dispatcher: &dispatcher,
                    proxy: &proxy,
                    stop: &thread_stop,
                    writes: &writes,
                };
                serve(&thread_sock, &serving);
                // The writer thread holds the socket too: the worker ends
                // (and the port is free) only once it has finished its queue.
                drop(writes);
                let _ = writer.join();
                drop(thread_sock);
                let _ = tx.send(());
            })
            .map_err(|e| io_error("UDP worker thread start", &e))?;
        Ok((UdpWorker { sock, stop }, done))
    }

    /// Asks the worker to stop: it ends within [`RECV_TIMEOUT`], usually at once.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        // Wakes a receive blocked on this socket (Linux answers ENOTCONN for an
        // unconnected UDP socket but still marks it shut and wakes waiters).
        let _ = socket2::SockRef::from(&*self.sock).shutdown(Shutdown::Read);
    }
}

impl Drop for UdpWorker {
    /// A server future dropped before it stopped its workers still stops them.
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a worker's receive loop serves with.
struct Serving<'a> {
    /// The socket's address.
    local: SocketAddr,
    dispatcher: &'a DispatcherHandle,
    proxy: &'a ProxyPolicy,
    /// Set when the worker is to end.
    stop: &'a AtomicBool,
    /// The writer thread's queue.
    writes: &'a std::sync::mpsc::SyncSender<Write>,
}

impl Serving<'_> {
    /// Handles datagram `msg` from `peer`: its PROXY header taken off (or
    /// the datagram dropped), a message that may write handed to the writer
    /// thread, any other answered into `out`. Over UDP the dispatcher
    /// answers with one message or nothing: true when `out` holds a reply,
    /// which goes to `peer` (a proxy takes it back as it is).
    #[inline]
    fn handle(
        &self,
        dispatcher: &crate::dispatch::Dispatcher,
        msg: &[u8],
        peer: SocketAddr,
        out: &mut Vec<u8>,
    ) -> bool {
        let (mut msg, mut client, mut local) = (msg, peer, self.local);
        // With PROXY off, one branch; on, a look at the source and the
        // first bytes before a client's plain DNS goes on as it is.
        if !self.proxy.is_off() && self.proxy.is_framed(msg, peer.ip()) {
            match self.proxy.datagram(msg, peer, local) {
                Ok(unwrapped) => (msg, client, local) = unwrapped,
                Err((why, fault)) => {
                    let metrics = dispatcher.metrics().map(|m| &**m);
                    proxy::rejected(metrics, Transport::Udp, peer, why, fault);
                    return false;
                }
            }
        }
        if crate::dispatch::may_block(msg) {
            queue_write(self.writes, msg, (client, peer, local));
            return false;
        }
        let reply = handle_guarded(dispatcher, msg, Transport::Udp, client, Some(local), out);
        reply == Reply::Message
    }
}

/// Datagrams taken per `recvmmsg` and answered per `sendmmsg`. Under load a
/// batch fills and the per-call kernel cost is shared; at low rates
/// `MSG_WAITFORONE` returns with whatever one wake-up found, so no query waits
/// for others. A reply waits at most for the rest of its batch to be answered.
pub const BATCH: usize = 32;

/// The receive loop of one worker, until `stop` is set: up to [`BATCH`]
/// queries per `recvmmsg`, their replies sent with one `sendmmsg`. Receive and
/// send failures (e.g. an ICMP error reported for an earlier send) are logged
/// at debug level and the loop goes on. Allocates only at start-up.
#[cfg(target_os = "linux")]
fn serve(sock: &UdpSocket, serving: &Serving<'_>) {
    use nix::errno::Errno;
    use nix::sys::socket::{MsgFlags, MultiHeaders, SockaddrStorage, recvmmsg};
    use std::io::IoSliceMut;
    use std::os::fd::AsRawFd;

    let fd = sock.as_raw_fd();
    // One receive buffer per batch slot, each large enough for any datagram.
    let mut bufs = vec![0u8; BATCH * MAX_UDP_MESSAGE];
    let mut outs: Vec<Vec<u8>> = (0..BATCH).map(|_| Vec::with_capacity(4096)).collect();
    // The kernel sets each header's address length on receive and nix does not
    // reset it; a socket has one address family, so the length stays right.
    let mut recv_headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
    let mut send_headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
    // Per received datagram: its length and sender.
    let mut received: [(usize, Option<SockaddrStorage>); BATCH] = [(0, None); BATCH];
    // Per reply in `outs`: where it goes.
    let mut reply_to: [Option<SockaddrStorage>; BATCH] = [None; BATCH];
    loop {
        let batch = {
            let mut chunks = bufs.chunks_exact_mut(MAX_UDP_MESSAGE);
            let mut iovs: [[IoSliceMut<'_>; 1]; BATCH] =
                std::array::from_fn(|_| [IoSliceMut::new(chunks.next().unwrap_or_default())]);
            recvmmsg(
                fd,
                &mut recv_headers,
                iovs.iter_mut(),
                MsgFlags::MSG_WAITFORONE,
                None,
            )
            .map(|msgs| {
                let mut n = 0;
                for (slot, msg) in received.iter_mut().zip(msgs) {
                    *slot = (msg.bytes, msg.address);
                    n += 1;
                }
                n
            })
        };
        if serving.stop.load(Ordering::Acquire) {
            return;
        }
        let local = serving.local;
        let n = match batch {
            Ok(n) => n,
            Err(Errno::EAGAIN | Errno::EINTR | Errno::ETIMEDOUT) => continue,
            Err(e) => {
                tracing::debug!("UDP receive on {local}: {e}");
                continue;
            }
        };
        // One dispatcher per batch (a reload may swap it in between batches).
        let dispatcher = serving.dispatcher.load();
        // One batch for the data sources too: sqlite3 answers it from one read
        // transaction, ended before the replies go out.
        let batch = dispatcher.sources().batch();
        let mut replies = 0;
        for (i, &(len, addr)) in received.iter().take(n).enumerate() {
            let start = i * MAX_UDP_MESSAGE;
            let (Some(addr), Some(msg)) = (addr, bufs.get(start..start + len)) else {
                continue;
            };
            let Some(peer) = socket_addr(&addr) else {
                continue;
            };
            let (Some(out), Some(to)) = (outs.get_mut(replies), reply_to.get_mut(replies)) else {
                break;
            };
            if serving.handle(&dispatcher, msg, peer, out) {
                *to = Some(addr);
                replies += 1;
            }
        }
        drop(batch);
        send_batch(
            fd,
            &mut send_headers,
            &outs[..replies],
            &reply_to[..replies],
            local,
        );
    }
}

/// Sends `replies[i]` to `to[i]` with as few `sendmmsg` calls as the kernel
/// allows. A reply the kernel refuses is logged at debug level and skipped.
#[cfg(target_os = "linux")]
fn send_batch(
    fd: std::os::fd::RawFd,
    headers: &mut nix::sys::socket::MultiHeaders<nix::sys::socket::SockaddrStorage>,
    replies: &[Vec<u8>],
    to: &[Option<nix::sys::socket::SockaddrStorage>],
    local: SocketAddr,
) {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmmsg};
    use std::io::IoSlice;

    let mut start = 0;
    while start < replies.len() {
        let rest = replies.get(start..).unwrap_or_default();
        let iovs: [[IoSlice<'_>; 1]; BATCH] =
            std::array::from_fn(|i| [IoSlice::new(rest.get(i).map_or(&[][..], Vec::as_slice))]);
        let no_cmsgs: [ControlMessage<'_>; 0] = [];
        let sent = sendmmsg(
            fd,
            headers,
            iovs.iter().take(rest.len()),
            to.get(start..).unwrap_or_default(),
            no_cmsgs,
            MsgFlags::empty(),
        )
        .map(Iterator::count);
        match sent {
            // The kernel stopped before the next reply: it reports that
            // reply's error on the next call, which skips it.
            Ok(sent) if sent > 0 => start += sent,
            Ok(_) => start += 1,
            Err(e) => {
                let peer = to
                    .get(start)
                    .copied()
                    .flatten()
                    .and_then(|a| socket_addr(&a));
                let peer = peer.map_or_else(|| "an unknown address".to_string(), |p| p.to_string());
                tracing::debug!("UDP send from {local} to {peer}: {e}");
                start += 1;
            }
        }
    }
}

/// The IP address and port of a sender, if it is one.
#[cfg(target_os = "linux")]
fn socket_addr(addr: &nix::sys::socket::SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = addr.as_sockaddr_in() {
        return Some(SocketAddr::from(*v4));
    }
    addr.as_sockaddr_in6().map(|v6| SocketAddr::from(*v6))
}

/// The receive loop of one worker, one datagram per system call (systems
/// without `recvmmsg`), until `stop` is set. Receive and send
/// failures (e.g. an ICMP error reported for an earlier send) are logged at
/// debug level and the loop goes on.
#[cfg(not(target_os = "linux"))]
fn serve(sock: &UdpSocket, serving: &Serving<'_>) {
    let local = serving.local;
    let mut buf = vec![0u8; MAX_UDP_MESSAGE];
    let mut out = Vec::with_capacity(4096);
    loop {
        let received = sock.recv_from(&mut buf);
        if serving.stop.load(Ordering::Acquire) {
            return;
        }
        let (len, peer) = match received {
            Ok(r) => r,
            Err(e) => {
                if !matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) {
                    tracing::debug!("UDP receive on {local}: {e}");
                }
                continue;
            }
        };
        let Some(msg) = buf.get(..len) else {
            continue;
        };
        // One dispatcher per query (a reload may swap it in between queries).
        let dispatcher = serving.dispatcher.load();
        if !serving.handle(&dispatcher, msg, peer, &mut out) {
            continue;
        }
        if let Err(e) = sock.send_to(&out, peer) {
            tracing::debug!("UDP send from {local} to {peer}: {e}");
        }
    }
}
