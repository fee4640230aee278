//! TCP serving (RFC 1035 §4.2.2, RFC 7766): two-byte length framing, several
//! queries per connection answered in order, an idle timeout and a connection limit.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use super::{DispatcherHandle, MAX_TCP_MESSAGE, SHUTDOWN_GRACE, ServerError, handle_guarded};
use crate::dispatch::Reply;
use crate::query::Transport;

/// Per-connection settings.
#[derive(Debug, Clone)]
pub(super) struct TcpSettings {
    /// Longest wait for the next query (or the rest of one), or for a reply write.
    pub idle_timeout: Duration,
}

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
    limit: Arc<Semaphore>,
    settings: TcpSettings,
    mut stop: watch::Receiver<bool>,
) -> Result<(), ServerError> {
    let mut conns = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.changed() => break,
            // Reap finished connections so the set does not grow.
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
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
        let Ok(permit) = Arc::clone(&limit).try_acquire_owned() else {
            tracing::debug!("TCP connection limit reached; closing connection from {peer}");
            drop(stream);
            continue;
        };
        let dispatcher = dispatcher.clone();
        let stop = stop.clone();
        let settings = settings.clone();
        conns.spawn(async move {
            if let Err(e) = connection(stream, peer, &dispatcher, settings, stop).await {
                tracing::debug!("TCP connection from {peer}: {e}");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, async {
        while conns.join_next().await.is_some() {}
    })
    .await
    .is_err()
    {
        conns.abort_all();
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
/// go out in query order. Ends on EOF, an idle timeout, an I/O error, or stop.
async fn connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    dispatcher: &DispatcherHandle,
    settings: TcpSettings,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut msg = Vec::with_capacity(512);
    let mut out = Vec::with_capacity(4096);
    let mut frame = Vec::with_capacity(4096);
    loop {
        // Wait for the next message: the length prefix and the body must both
        // arrive within the idle timeout.
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
            r = tokio::time::timeout(settings.idle_timeout, read) => match r {
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
        // The current dispatcher for this message: a long-lived connection
        // sees reloaded data and policy from its next message on.
        let reply = handle_guarded(&dispatcher.load(), &msg, Transport::Tcp, peer, &mut out);
        match reply {
            Reply::Nothing => {}
            Reply::Message => write_frame(&mut stream, &mut frame, &out, peer, &settings).await?,
            // A zone transfer, in as many messages as needed.
            Reply::Stream(messages) => {
                for message in &messages {
                    write_frame(&mut stream, &mut frame, message, peer, &settings).await?;
                }
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
