//! UDP serving: receive a datagram, process it, send the reply (RFC 1035 §4.2.1).

use std::net::SocketAddr;

use tokio::net::UdpSocket;
use tokio::sync::watch;

use super::{MAX_UDP_MESSAGE, ProcessorHandle, ServerError, process_guarded};
use crate::query::Transport;

/// Serves one UDP socket until `stop` turns true. One receive buffer and one
/// reply buffer, reused for every datagram.
///
/// Errors: none; receive and send failures (e.g. an ICMP error reported for an
/// earlier send) are logged and the loop goes on.
pub(super) async fn serve(
    sock: UdpSocket,
    local: SocketAddr,
    processor: ProcessorHandle,
    mut stop: watch::Receiver<bool>,
) -> Result<(), ServerError> {
    let mut buf = vec![0u8; MAX_UDP_MESSAGE];
    let mut out = Vec::with_capacity(4096);
    loop {
        let (len, peer) = tokio::select! {
            biased;
            _ = stop.changed() => return Ok(()),
            r = sock.recv_from(&mut buf) => match r {
                Ok(r) => r,
                Err(e) => {
                    tracing::debug!("UDP receive on {local}: {e}");
                    continue;
                }
            },
        };
        let Some(msg) = buf.get(..len) else {
            continue;
        };
        // One processor per query (a reload may swap it in between queries).
        let reply = process_guarded(&processor.load(), msg, Transport::Udp, &mut out, peer);
        if !reply {
            continue;
        }
        if let Err(e) = sock.send_to(&out, peer).await {
            tracing::debug!("UDP send from {local} to {peer}: {e}");
        }
    }
}
