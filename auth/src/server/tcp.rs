//! TCP serving (RFC 1035 §4.2.2, RFC 7766): two-byte length framing, several
//! queries per connection answered in order, a first-query deadline, an idle
//! timeout, and the connection table's limits ([`super::conns`]).
//!
//! PROXY protocol (`[server] proxy_allow`, [`super::proxy`]): a connection
//! from a proxy must start with a header, read before the connection takes
//! its place in the table (so the per-client limit counts the client it
//! names) and within the first-query deadline, which the header and the
//! first query share; from then on the client is the connection's peer. A
//! connection from another source that starts with a header is closed.
//!
//! TLS (`[tls] listen`, RFC 7858, RFC 9103): the same serving over a TLS
//! session, the handshake after the PROXY header (if any) and within the
//! first-query deadline it shares with the first query; a failed handshake
//! closes the connection. Messages are then [`Transport::Tls`].

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::conns::{ConnTable, Refused, Slot};
use super::proxy::{self, Malformed, ProxyPolicy};
use super::{DispatcherHandle, MAX_TCP_MESSAGE, SHUTDOWN_GRACE, ServerError, handle_guarded};
use crate::dispatch::Reply;
use crate::log_limit::LogLimit;
use crate::metrics::{Metrics, ProxyRejected};
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

/// Failed TLS handshakes (a client can make many).
static HANDSHAKE_LOG: LogLimit = LogLimit::new();

/// Accepts connections until `stop` turns true, then waits up to
/// [`SHUTDOWN_GRACE`] for open connections to finish. With `tls`, each
/// connection is a TLS session ([`Transport::Tls`]) with the certificate
/// of the dispatcher in force when it is accepted.
///
/// Errors: none; accept errors are logged.
#[allow(clippy::too_many_arguments)]
pub(super) async fn serve(
    listener: TcpListener,
    local: SocketAddr,
    dispatcher: DispatcherHandle,
    conns: Arc<ConnTable>,
    proxy: Arc<ProxyPolicy>,
    settings: TcpSettings,
    tls: bool,
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
        let current = dispatcher.load();
        let metrics = current.metrics().cloned();
        // The certificate of the configuration in force: a reload's new
        // one serves from the next connection on.
        let acceptor = match (tls, current.tls_server()) {
            (false, _) => None,
            (true, Some(server)) => Some(tokio_rustls::TlsAcceptor::from(Arc::clone(server))),
            (true, None) => {
                if let Some(suppressed) = HANDSHAKE_LOG.allow() {
                    tracing::warn!(
                        suppressed,
                        "TLS connection from {peer} on {local} closed: [tls] has no certificate \
                         since the last reload (restart to close the listener)"
                    );
                }
                continue;
            }
        };
        drop(current);
        let conn = Connection {
            dispatcher: dispatcher.clone(),
            settings: settings.clone(),
            stop: stop.clone(),
            tls: acceptor,
        };
        if !proxy.is_off() && proxy.is_proxy(peer.ip()) {
            let conns = Arc::clone(&conns);
            tasks.spawn(async move {
                let _open = metrics.as_ref().map(OpenConnection::new);
                conn.proxied(stream, peer, &conns, metrics.as_deref()).await;
            });
            continue;
        }
        let Some(slot) = admit(&conns, &dispatcher, peer, metrics.as_deref()) else {
            drop(stream);
            continue;
        };
        let refuse_header = !proxy.is_off();
        tasks.spawn(async move {
            let _open = metrics.as_ref().map(OpenConnection::new);
            let local = stream.local_addr().ok();
            conn.serve(stream, (peer, local), &slot, refuse_header)
                .await;
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

/// A place in the table for a connection from `client`, or `None` when the
/// limits refuse it (counted and logged).
fn admit(
    conns: &Arc<ConnTable>,
    dispatcher: &DispatcherHandle,
    client: SocketAddr,
    metrics: Option<&Metrics>,
) -> Option<Slot> {
    let ip = client.ip();
    let transfer_client = dispatcher.load().transfer_policy().names_address(ip);
    let why = match conns.admit(ip, transfer_client) {
        Ok(slot) => return Some(slot),
        Err(why) => why,
    };
    if let Some(m) = metrics {
        let i = usize::from(why == Refused::Full);
        m.tcp_closed[i].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    if let Some(suppressed) = LIMIT_LOG.allow() {
        let why = match why {
            Refused::PerClient => "its client prefix holds the most connections allowed",
            Refused::Full => "every connection is busy",
        };
        tracing::info!(suppressed, "TCP connection from {client} closed: {why}");
    }
    None
}

/// What serving one connection needs.
struct Connection {
    dispatcher: DispatcherHandle,
    settings: TcpSettings,
    stop: watch::Receiver<bool>,
    /// A TLS listener's acceptor: the connection is a TLS session.
    tls: Option<tokio_rustls::TlsAcceptor>,
}

/// Why no PROXY header was read.
enum HeaderError {
    /// The connection closed before its first byte.
    Closed,
    /// Not a header this server takes (a close inside it: cut short).
    Malformed(Malformed),
    /// Another I/O error.
    Io(io::Error),
}

impl From<io::Error> for HeaderError {
    fn from(e: io::Error) -> HeaderError {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            HeaderError::Malformed(Malformed::Truncated)
        } else {
            HeaderError::Io(e)
        }
    }
}

/// Reads the PROXY header a connection starts with into `buf`.
async fn read_proxy_header(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Result<proxy::Header, HeaderError> {
    buf.resize(proxy::FIXED_LEN, 0);
    if !read_full(stream, buf, true).await? {
        return Err(HeaderError::Closed);
    }
    let len = proxy::header_len(buf).map_err(HeaderError::Malformed)?;
    buf.resize(len, 0);
    if let Some(rest) = buf.get_mut(proxy::FIXED_LEN..) {
        read_full(stream, rest, false).await?;
    }
    proxy::parse(buf, Transport::Tcp).map_err(HeaderError::Malformed)
}

impl Connection {
    /// Serves a connection from proxy `peer`: its PROXY header first (within
    /// the first-query deadline), then a place in the table for the client
    /// it names, then the client's queries.
    async fn proxied(
        mut self,
        mut stream: TcpStream,
        peer: SocketAddr,
        conns: &Arc<ConnTable>,
        metrics: Option<&Metrics>,
    ) {
        let started = tokio::time::Instant::now();
        let mut buf = Vec::with_capacity(proxy::FIXED_LEN + 36);
        let read = tokio::select! {
            biased;
            _ = self.stop.changed() => return,
            r = tokio::time::timeout(
                self.settings.first_query_timeout,
                read_proxy_header(&mut stream, &mut buf),
            ) => r,
        };
        let header = match read {
            Ok(Ok(header)) => header,
            Err(_) => {
                return proxy::rejected(
                    metrics,
                    Transport::Tcp,
                    peer,
                    ProxyRejected::Timeout,
                    None,
                );
            }
            Ok(Err(HeaderError::Closed)) => return,
            Ok(Err(HeaderError::Io(e))) => {
                return tracing::debug!("TCP connection from {peer}: {e}");
            }
            Ok(Err(HeaderError::Malformed(m))) => {
                return proxy::rejected(metrics, Transport::Tcp, peer, proxy::reason(m), Some(m));
            }
        };
        let (client, local) = match header.addrs {
            Some((client, local)) => (client, Some(local)),
            None => (peer, stream.local_addr().ok()),
        };
        let Some(slot) = admit(conns, &self.dispatcher, client, metrics) else {
            return;
        };
        // The header and the first query share the first-query deadline.
        self.settings.first_query_timeout = self
            .settings
            .first_query_timeout
            .saturating_sub(started.elapsed());
        self.serve(stream, (client, local), &slot, false).await;
    }

    /// Serves the queries of a connection from `client` to `local` (see
    /// [`connection`]); `refuse_header`: one that starts with a PROXY
    /// header is closed. On a TLS listener, the handshake first.
    async fn serve(
        mut self,
        stream: TcpStream,
        (client, local): (SocketAddr, Option<SocketAddr>),
        slot: &Slot,
        refuse_header: bool,
    ) {
        let _ = stream.set_nodelay(true);
        let Some(acceptor) = self.tls.take() else {
            let mut stream = stream;
            let ends = connection(
                &mut stream,
                Transport::Tcp,
                (client, local),
                &self.dispatcher,
                self.settings,
                slot,
                self.stop,
                refuse_header,
            );
            if let Err(e) = ends.await {
                tracing::debug!("TCP connection from {client}: {e}");
            }
            return;
        };
        let started = tokio::time::Instant::now();
        let handshake = tokio::select! {
            biased;
            _ = self.stop.changed() => return,
            () = slot.close.notified() => return,
            r = tokio::time::timeout(self.settings.first_query_timeout, acceptor.accept(stream)) => r,
        };
        let session = match handshake {
            Ok(Ok(session)) => session,
            Ok(Err(e)) => return handshake_failed(client, &e.to_string()),
            Err(_) => {
                return handshake_failed(client, "not completed within the first-query timeout");
            }
        };
        // The handshake and the first query share the first-query deadline.
        self.settings.first_query_timeout = self
            .settings
            .first_query_timeout
            .saturating_sub(started.elapsed());
        let mut session = session;
        let ends = connection(
            &mut session,
            Transport::Tls,
            (client, local),
            &self.dispatcher,
            self.settings,
            slot,
            self.stop,
            false,
        );
        match ends.await {
            // Closed by us (idle, stop, the table full) or by the client's
            // EOF: end the session with close_notify (RFC 8446 §6.1), so the
            // client can tell the end from a truncation; bounded, for a
            // client that reads nothing.
            Ok(()) => {
                let _ = tokio::time::timeout(CLOSE_NOTIFY_WAIT, session.shutdown()).await;
            }
            Err(e) => tracing::debug!("TLS connection from {client}: {e}"),
        }
    }
}

/// How long closing a TLS session may wait to send its close_notify alert.
const CLOSE_NOTIFY_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Logs (within [`HANDSHAKE_LOG`]'s budget) a TLS handshake from `client`
/// that failed: the connection is closed.
fn handshake_failed(client: SocketAddr, why: &str) {
    if let Some(suppressed) = HANDSHAKE_LOG.allow() {
        tracing::info!(
            suppressed,
            "TLS connection from {client} closed: handshake failed: {why}"
        );
    }
}

/// Reads exactly `buf.len()` bytes, or returns `Ok(false)` on a clean EOF
/// before the first byte when `eof_ok`.
async fn read_full<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut [u8],
    eof_ok: bool,
) -> io::Result<bool> {
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

/// What a connection's next bytes were.
enum Frame {
    /// A message, in the buffer.
    Message,
    /// The connection closed (between messages).
    Closed,
    /// A PROXY header, refused.
    ProxyHeader,
}

/// Serves one connection from `peer` (the client) to `local`: messages are
/// handled one after the other, so replies go out in query order. Ends on
/// EOF, a timeout (the first query within `first_query_timeout`, each later
/// one within `idle_timeout` of the previous), an I/O error, stop, the
/// connection table taking its place, or (`refuse_header`) a PROXY header
/// where the first message should be. `transport`: TCP, or TLS for a TLS
/// session `stream`.
#[allow(clippy::too_many_arguments)]
async fn connection<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    transport: Transport,
    (peer, local): (SocketAddr, Option<SocketAddr>),
    dispatcher: &DispatcherHandle,
    settings: TcpSettings,
    slot: &Slot,
    mut stop: watch::Receiver<bool>,
    mut refuse_header: bool,
) -> io::Result<()> {
    let mut msg = Vec::with_capacity(512);
    let mut out = Vec::with_capacity(4096);
    let mut frame = Vec::with_capacity(4096);
    let mut wait = settings.first_query_timeout;
    loop {
        // Wait for the next message: the length prefix and the body must both
        // arrive in time.
        let read = async {
            let mut len = [0u8; 2];
            if !read_full(stream, &mut len, true).await? {
                return Ok(Frame::Closed);
            }
            msg.resize(usize::from(u16::from_be_bytes(len)), 0);
            let mut rest = &mut msg[..];
            // A header's first two bytes make a length of 3338: its next
            // ten are read first, and compared.
            let signature = proxy::SIGNATURE.split_at(2);
            if refuse_header && len == signature.0 {
                let (head, tail) = rest.split_at_mut(signature.1.len());
                read_full(stream, head, false).await?;
                if head == signature.1 {
                    return Ok(Frame::ProxyHeader);
                }
                rest = tail;
            }
            read_full(stream, rest, false).await?;
            Ok::<Frame, io::Error>(Frame::Message)
        };
        let next = tokio::select! {
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
        match next {
            Frame::Message => {}
            Frame::Closed => return Ok(()),
            Frame::ProxyHeader => {
                let metrics = dispatcher.load().metrics().cloned();
                let why = ProxyRejected::NotAllowed;
                proxy::rejected(metrics.as_deref(), Transport::Tcp, peer, why, None);
                return Ok(());
            }
        }
        refuse_header = false;
        wait = settings.idle_timeout;
        // Busy only while the message is handled: a connection whose replies
        // wait on a client that does not read is idle, and gives way when
        // the table is full (else such clients could hold every place).
        slot.busy();
        // The current dispatcher for this message: a long-lived connection
        // sees reloaded data and policy from its next message on.
        let mut handle =
            || handle_guarded(&dispatcher.load(), &msg, transport, peer, local, &mut out);
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
                Reply::Message => write_frame(stream, &mut frame, &out, peer, &settings).await,
                // A zone transfer, in as many messages as needed, each
                // rendered once the one before is written.
                Reply::Stream(messages) => {
                    for message in messages {
                        write_frame(stream, &mut frame, &message, peer, &settings).await?;
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
/// and skipped. Flushed, so a TLS session sends it at once.
async fn write_frame<S: AsyncWrite + Unpin>(
    stream: &mut S,
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
    let write = async {
        stream.write_all(frame).await?;
        stream.flush().await
    };
    match tokio::time::timeout(settings.idle_timeout, write).await {
        Ok(r) => r,
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}
