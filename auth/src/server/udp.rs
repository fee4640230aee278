//! UDP serving: receive a datagram, process it, send the reply (RFC 1035 §4.2.1).
//!
//! Each UDP socket of an address (bound with `SO_REUSEPORT`, so the kernel
//! spreads queries over them by flow hash) is served by one worker: a dedicated
//! OS thread named `authd-udp-N` running a blocking receive loop, with its own
//! receive buffer and one reply buffer reused for every datagram. The query
//! path takes no lock: the processor is an `ArcSwap` load per query. Workers do
//! not run on the tokio runtime, so TCP (which does) cannot delay them, and
//! they cost no reactor round trip per datagram.
//!
//! Stopping: [`UdpWorker::stop`] sets the stop flag and shuts the socket down
//! for reading, which wakes a blocked receive at once; the receive timeout
//! ([`RECV_TIMEOUT`]) is a fallback should that wake-up not happen.

use std::io;
use std::net::{Shutdown, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::oneshot;

use super::{MAX_UDP_MESSAGE, ProcessorHandle, ServerError, process_guarded};
use crate::query::Transport;

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
    /// thread. The receiver gets a message when the thread ends normally (it
    /// is dropped unsent if the thread dies): pass it to [`finished`].
    ///
    /// Errors: the socket could not be set up or the thread created.
    pub fn spawn(
        sock: UdpSocket,
        local: SocketAddr,
        index: usize,
        processor: ProcessorHandle,
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
        std::thread::Builder::new()
            .name(format!("authd-udp-{index}"))
            .spawn(move || {
                serve(&thread_sock, local, &processor, &thread_stop);
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

/// The receive loop of one worker, until `stop` is set. Receive and send
/// failures (e.g. an ICMP error reported for an earlier send) are logged at
/// debug level and the loop goes on.
fn serve(sock: &UdpSocket, local: SocketAddr, processor: &ProcessorHandle, stop: &AtomicBool) {
    let mut buf = vec![0u8; MAX_UDP_MESSAGE];
    let mut out = Vec::with_capacity(4096);
    loop {
        let received = sock.recv_from(&mut buf);
        if stop.load(Ordering::Acquire) {
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
        // One processor per query (a reload may swap it in between queries).
        let reply = process_guarded(&processor.load(), msg, Transport::Udp, &mut out, peer);
        if !reply {
            continue;
        }
        if let Err(e) = sock.send_to(&out, peer) {
            tracing::debug!("UDP send from {local} to {peer}: {e}");
        }
    }
}
