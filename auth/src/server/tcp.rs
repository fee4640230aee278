//! TCP serving (RFC 1035 §4.2.2, RFC 7766): two-byte length framing, several
//! queries per connection answered in order, a first-query deadline, an idle
//! timeout, and the connection table's limits ([`super::conns`]).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::conns::{ConnTable, Refused, Slot};
use super::{DispatcherHandle, MAX_TCP_MESSAGE, SHUTDOWN_GRACE, ServerError, handle_guarded};
use crate::dispatch::Reply;
use crate::log_limit::LogLimit;
use crate::metrics::Metrics;
use crate::query::Transport;

/// Per-connection settings.
#[derive(Debug, Clone)]
pub(super) struct TcpSettings {
    /// Longest wait for the next query (or the rest of one), or for a reply write.
    pub idle_timeout: Duration,
    /// Longest wait for a new connection's first query.
    pub first_query_timeout: Duration,
}

/// Counts a connection open in `authd_tcp_connections` while it lives.
struct OpenConnection(Arc<Metrics>);

impl OpenConnection {
    fn new(metrics: &Arc<Metrics>) -> OpenConnection {
        metrics
            .tcp_open
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        OpenConnection(Arc::clone(metrics))
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0
            .tcp_open
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Connections refused or closed by the limits (a client can make many).
static LIMIT_LOG: LogLimit = LogLimit::new();

/// Pause after an accept error such as EMFILE, so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Accepts connections until `stop` turns true, then waits up to
/// [`SHUTDOWN_GRACE`] for open connections to finish.
///
/// Errors: none; accept errors are logged.
pub(super) async fn serve(
    listener: TcpListener,
    local: SocketAddr,
    dispatcher: DispatcherHandle,
    conns: Arc<ConnTable>,
    settings: TcpSettings,
    mut stop: watch::Receiver<bool>,
) -> Result<(), ServerError> {
    let mut tasks = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.changed() => break,
            // Reap finished connections so the set does not grow.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            r = listener.accept() => r,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!("TCP accept on {local}: {e}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let (transfer_client, metrics) = {
            let d = dispatcher.load();
            (
                d.transfer_policy().names_address(peer.ip()),
                d.metrics().cloned(),
            )
        };
        let slot = match conns.admit(peer.ip(), transfer_client) {
            Ok(slot) => slot,
            Err(why) => {
                if let Some(m) = &metrics {
                    let i = usize::from(why == Refused::Full);
                    m.tcp_closed[i].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                if let Some(suppressed) = LIMIT_LOG.allow() {
                    let why = match why {
                        Refused::PerClient => {
                            "its client prefix holds the most connections allowed"
                        }
                        Refused::Full => "every connection is busy",
                    };
                    tracing::info!(suppressed, "TCP connection from {peer} closed: {why}");
                }
                drop(stream);
                continue;
            }
        };
        let dispatcher = dispatcher.clone();
        let stop = stop.clone();
        let settings = settings.clone();
        tasks.spawn(async move {
            let _open = metrics.as_ref().map(OpenConnection::new);
            if let Err(e) = connection(stream, peer, &dispatcher, settings, &slot, stop).await {
                tracing::debug!("TCP connection from {peer}: {e}");
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, async {
        while tasks.join_next().await.is_some() {}
    })
    .await
    .is_err()
    {
        tasks.abort_all();
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes, or returns `Ok(false)` on a clean EOF
/// before the first byte when `eof_ok`.
async fn read_full(stream: &mut TcpStream, buf: &mut [u8], eof_ok: bool) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        let Some(rest) = buf.get_mut(got..) else {
            break;
        };
        let n = stream.read(rest).await?;
        if n == 0 {
            if got == 0 && eof_ok {
                return Ok(false);
            }
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        got += n;
    }
    Ok(true)
}

/// Serves one connection: messages are handled one after the other, so replies
/// go out in query order. Ends on EOF, a timeout (the first query within
/// `first_query_timeout`, each later one within `idle_timeout` of the
/// previous), an I/O error, stop, or the connection table taking its place.
async fn connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    dispatcher: &DispatcherHandle,
    settings: TcpSettings,
    slot: &Slot,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let _ = stream.set_nodelay(true);
    let local = stream.local_addr().ok();
    let mut msg = Vec::with_capacity(512);
    let mut out = Vec::with_capacity(4096);
    let mut frame = Vec::with_capacity(4096);
    let mut wait = settings.first_query_timeout;
    loop {
        // Wait for the next message: the length prefix and the body must both
        // arrive in time.
        let read = async {
            let mut len = [0u8; 2];
            if !read_full(&mut stream, &mut len, true).await? {
                return Ok(false);
            }
            let len = usize::from(u16::from_be_bytes(len));
            msg.resize(len, 0);
            read_full(&mut stream, &mut msg, false).await?;
            Ok::<bool, io::Error>(true)
        };
        let more = tokio::select! {
            biased;
            _ = stop.changed() => return Ok(()),
            () = slot.close.notified() => {
                if let Some(m) = dispatcher.load().metrics() {
                    m.tcp_closed[2].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                if let Some(suppressed) = LIMIT_LOG.allow() {
                    tracing::info!(suppressed, "TCP connection from {peer} closed: idle longest while the table was full");
                }
                return Ok(());
            }
            r = tokio::time::timeout(wait, read) => match r {
                Err(_) => {
                    tracing::debug!("TCP connection from {peer} idle; closing");
                    return Ok(());
                }
                Ok(r) => r?,
            },
        };
        if !more {
            return Ok(());
        }
        wait = settings.idle_timeout;
        // Busy only while the message is handled: a connection whose replies
        // wait on a client that does not read is idle, and gives way when
        // the table is full (else such clients could hold every place).
        slot.busy();
        // The current dispatcher for this message: a long-lived connection
        // sees reloaded data and policy from its next message on.
        let mut handle = || {
            handle_guarded(
                &dispatcher.load(),
                &msg,
                Transport::Tcp,
                peer,
                local,
                &mut out,
            )
        };
        // A write may wait on storage locks: off the runtime's worker, so
        // other connections are served meanwhile.
        let reply = if crate::dispatch::may_block(&msg)
            && tokio::runtime::Handle::current().runtime_flavor()
                == tokio::runtime::RuntimeFlavor::MultiThread
        {
            tokio::task::block_in_place(handle)
        } else {
            handle()
        };
        slot.idle();
        let write = async {
            match reply {
                Reply::Nothing => Ok(()),
                Reply::Message => write_frame(&mut stream, &mut frame, &out, peer, &settings).await,
                // A zone transfer, in as many messages as needed, each
                // rendered once the one before is written.
                Reply::Stream(messages) => {
                    for message in messages {
                        write_frame(&mut stream, &mut frame, &message, peer, &settings).await?;
                    }
                    Ok(())
                }
            }
        };
        tokio::select! {
            r = write => r?,
            () = slot.close.notified() => {
                if let Some(m) = dispatcher.load().metrics() {
                    m.tcp_closed[2].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                if let Some(suppressed) = LIMIT_LOG.allow() {
                    tracing::info!(suppressed, "TCP connection from {peer} closed: idle longest (its replies unread) while the table was full");
                }
                return Ok(());
            }
        }
    }
}

/// Writes `message` with its two-byte length prefix (RFC 1035 §4.2.2),
/// assembled in `frame` so it leaves in one write, within the idle timeout.
/// A message over [`MAX_TCP_MESSAGE`] bytes cannot be framed: it is logged
/// and skipped.
async fn write_frame(
    stream: &mut TcpStream,
    frame: &mut Vec<u8>,
    message: &[u8],
    peer: SocketAddr,
    settings: &TcpSettings,
) -> io::Result<()> {
    let Ok(len) = u16::try_from(message.len()) else {
        tracing::error!(
            "reply of {} bytes to {peer} exceeds {MAX_TCP_MESSAGE}; dropped",
            message.len()
        );
        return Ok(());
    };
    frame.clear();
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(message);
    match tokio::time::timeout(settings.idle_timeout, stream.write_all(frame)).await {
        Ok(r) => r,
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}
