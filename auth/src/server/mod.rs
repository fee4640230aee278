//! The network server: UDP and TCP sockets, framing and limits (no DNS semantics:
//! every message goes to [`Dispatcher::handle`]).
//!
//! ```no_run
//! # async fn demo(dispatcher: std::sync::Arc<authd::dispatch::Dispatcher>) -> Result<(), authd::server::ServerError> {
//! use authd::server::{Server, ServerSettings};
//! let settings = ServerSettings { listen: vec!["127.0.0.1:0".parse().unwrap()], ..Default::default() };
//! let server = Server::bind(&settings).await?;          // errors: address in use, …
//! println!("bound to {:?}", server.local_addrs());      // the real ports
//! server.serve(dispatcher, std::future::pending()).await // until the future resolves
//! # }
//! ```
//!
//! - UDP: per address, [`ServerSettings::udp_workers`] sockets bound with
//!   `SO_REUSEPORT` (the kernel spreads queries over them), each served by one
//!   worker: a dedicated OS thread with a blocking receive loop and its own
//!   receive and reply buffers, off the tokio runtime (see `udp`); on Linux up
//!   to 32 queries per `recvmmsg`, their replies sent with one `sendmmsg`.
//! - TCP (RFC 1035 §4.2.2, RFC 7766): one listener per address, two-byte length
//!   framing, any number of queries per connection answered in order, a short
//!   deadline for the first query and an idle timeout after each, a limit per
//!   client prefix, and a total limit at which the longest idle connection
//!   gives way to a newcomer (transfer clients last; see `conns`).
//! - PROXY protocol v2 (`[server] proxy_allow`, see `proxy`): from a proxy,
//!   a header before each UDP datagram and at the start of each TCP
//!   connection; the client it names is the peer address from then on.
//!
//! Reload: the server answers with the dispatcher held by a [`DispatcherHandle`];
//! [`DispatcherHandle::store`] swaps in a new one (built off the query path, see
//! [`reload`] for the sources and [`build`] for the rest) atomically: sources, transfer policy and every other setting a
//! reload may change. Each message is handled by one dispatcher from start to
//! end, old or new; no lock is taken on the query path (an `ArcSwap` load).
//!
//! Shutdown: when the `shutdown` future resolves, sockets stop receiving and the
//! listeners close; open TCP connections get [`SHUTDOWN_GRACE`] to finish the
//! query they are on, then are dropped.

pub mod build;
mod conns;
pub mod limits;
mod proxy;
pub mod reload;
mod tcp;
mod udp;

pub use udp::BATCH as UDP_BATCH;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::acl::Cidr;
use crate::config::Config;
use crate::dispatch::{Dispatcher, Reply};
use crate::query::Transport;
use crate::sys::{default_udp_workers, io_reason};

/// How long open TCP connections may take to finish after shutdown is asked.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Requested size of each UDP socket's kernel receive and send buffers, in bytes
/// (the kernel caps it at `net.core.rmem_max` / `wmem_max`; see `size_buffer`).
pub const UDP_SOCKET_BUFFER: usize = 2 * 1024 * 1024;

/// Largest DNS message over TCP (the two-byte length prefix), in bytes.
pub const MAX_TCP_MESSAGE: usize = 65_535;

/// Largest UDP datagram received, in bytes.
pub const MAX_UDP_MESSAGE: usize = 65_535;

/// How many times a free port is picked again when a `:0` address got a UDP port
/// whose TCP twin is taken.
const PORT_ZERO_ATTEMPTS: usize = 16;

/// TCP listen backlog.
const TCP_BACKLOG: i32 = 1024;

/// The dispatcher the server answers with, shared by every serving task and
/// replaceable while serving (reload). Cloning it clones the handle.
#[derive(Clone)]
pub struct DispatcherHandle(Arc<ArcSwap<Dispatcher>>);

impl DispatcherHandle {
    /// A handle holding `dispatcher`.
    pub fn new(dispatcher: Arc<Dispatcher>) -> DispatcherHandle {
        DispatcherHandle(Arc::new(ArcSwap::new(dispatcher)))
    }

    /// Replaces the dispatcher: messages already being handled finish with
    /// the old one (which is dropped after them), later ones use `dispatcher`.
    pub fn store(&self, dispatcher: Arc<Dispatcher>) {
        self.0.store(dispatcher);
    }

    /// The current dispatcher, for one message or one UDP batch (lock-free;
    /// do not hold it across an `.await`).
    pub fn load(&self) -> arc_swap::Guard<Arc<Dispatcher>> {
        self.0.load()
    }
}

impl From<Arc<Dispatcher>> for DispatcherHandle {
    fn from(dispatcher: Arc<Dispatcher>) -> DispatcherHandle {
        DispatcherHandle::new(dispatcher)
    }
}

/// Socket-level settings of the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSettings {
    /// Addresses to serve UDP and TCP on. Port 0: a free port, the same for UDP and TCP.
    pub listen: Vec<SocketAddr>,
    /// How long a TCP connection may wait for (the rest of) its next query, and
    /// for a reply to be written, before it is closed.
    pub tcp_idle_timeout: Duration,
    /// Most concurrent TCP connections over all addresses; when all are
    /// taken, the one idle longest gives way (see `conns`).
    pub tcp_max_connections: usize,
    /// Most concurrent TCP connections per client prefix.
    pub tcp_max_connections_per_client: usize,
    /// How long a new TCP connection has to deliver its first query.
    pub tcp_first_query_timeout: Duration,
    /// Client prefix lengths for per-client limits (IPv4, IPv6), bits.
    pub client_prefixes: (u8, u8),
    /// UDP workers per address, each with its own `SO_REUSEPORT` socket and
    /// thread; at least 1 (0 is taken as 1).
    pub udp_workers: usize,
    /// Sources (proxies) whose UDP datagrams and TCP connections must start
    /// with a PROXY protocol v2 header naming the client (see `proxy`);
    /// empty: PROXY is off and costs one branch per datagram.
    pub proxy_allow: Vec<Cidr>,
    /// `[tls]`: its `listen` addresses take TLS connections (DoT, XoT),
    /// served as TCP ones are, with its server configuration.
    pub tls: crate::tls::TlsConfig,
}

impl Default for ServerSettings {
    /// `127.0.0.1:5300`, a 10 s idle timeout, 512 TCP connections (32 per
    /// /24 or /56), 3 s for a first query, and one UDP worker per available
    /// CPU ([`default_udp_workers`]).
    fn default() -> Self {
        ServerSettings {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 5300))],
            tcp_idle_timeout: Duration::from_secs(10),
            tcp_max_connections: 512,
            tcp_max_connections_per_client: 32,
            tcp_first_query_timeout: Duration::from_secs(3),
            client_prefixes: (24, 56),
            udp_workers: default_udp_workers(),
            proxy_allow: Vec::new(),
            tls: crate::tls::TlsConfig::default(),
        }
    }
}

impl From<&Config> for ServerSettings {
    /// The socket-level settings of `config`: its listen addresses, `[tcp]`
    /// limits, `[server]` UDP workers and proxies (what a reload cannot change).
    fn from(config: &Config) -> ServerSettings {
        ServerSettings {
            listen: config.listen.clone(),
            tcp_idle_timeout: config.tcp.idle_timeout,
            tcp_max_connections: config.tcp.max_connections,
            tcp_max_connections_per_client: config.tcp.max_connections_per_client,
            tcp_first_query_timeout: config.tcp.first_query_timeout,
            client_prefixes: (
                config.rrl.settings.ipv4_prefix,
                config.rrl.settings.ipv6_prefix,
            ),
            udp_workers: config.server.udp_workers,
            proxy_allow: config.server.proxy_allow.clone(),
            tls: config.tls.clone(),
        }
    }
}

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A socket could not be created or bound to `addr`.
    #[error("cannot bind {addr}: {reason}")]
    Bind {
        /// The address (with the port asked for, or the one tried for port 0).
        addr: SocketAddr,
        /// The OS error text, e.g. "Address already in use".
        reason: String,
        /// The error kind, e.g. [`io::ErrorKind::AddrInUse`].
        kind: io::ErrorKind,
    },
    /// No listen address was given.
    #[error("no listen address configured")]
    NoAddress,
    /// A socket failed while serving, e.g. the TCP listener hit an unrecoverable error.
    #[error("{what} on {addr}: {reason}")]
    Io {
        /// What was being done ("accept", "receive").
        what: &'static str,
        /// The local address.
        addr: SocketAddr,
        /// The OS error text.
        reason: String,
    },
}

fn bind_error(addr: SocketAddr, e: &io::Error) -> ServerError {
    ServerError::Bind {
        addr,
        reason: io_reason(e),
        kind: e.kind(),
    }
}

/// Bound sockets for one listen address.
struct Endpoint {
    addr: SocketAddr,
    /// Blocking sockets, one per UDP worker.
    udp: Vec<std::net::UdpSocket>,
    tcp: tokio::net::TcpListener,
}

/// A server whose sockets are bound (so the real ports are known) but which
/// does not serve yet.
pub struct Server {
    endpoints: Vec<Endpoint>,
    /// The TLS listeners (`[tls] listen`), with their real addresses.
    tls: Vec<(SocketAddr, tokio::net::TcpListener)>,
    settings: ServerSettings,
}

impl Server {
    /// Binds UDP and TCP sockets on every address of `settings.listen`.
    ///
    /// Must run inside a tokio runtime (the sockets register with its reactor).
    /// For port 0 the TCP listener picks a free port and the UDP sockets take
    /// the same port, trying again with a new port a few times if that UDP
    /// port is taken. (TCP goes first because a port-0 UDP bind with
    /// `SO_REUSEPORT` may be handed a port another reuse-port socket of the
    /// same user is using, e.g. a second authd; a TCP listener never shares.)
    ///
    /// Errors: [`ServerError::NoAddress`]; [`ServerError::Bind`] naming the
    /// address (in use, not local, permission denied).
    pub async fn bind(settings: &ServerSettings) -> Result<Server, ServerError> {
        if settings.listen.is_empty() {
            return Err(ServerError::NoAddress);
        }
        let mut endpoints = Vec::with_capacity(settings.listen.len());
        for &addr in &settings.listen {
            endpoints.push(bind_endpoint(addr, settings.udp_workers.max(1))?);
        }
        let mut tls = Vec::new();
        if settings.tls.server.is_some() {
            for &addr in &settings.tls.listen {
                let listener = bind_tcp(addr).map_err(|e| bind_error(addr, &e))?;
                let bound = listener.local_addr().map_err(|e| bind_error(addr, &e))?;
                tls.push((bound, listener));
            }
        }
        Ok(Server {
            endpoints,
            tls,
            settings: settings.clone(),
        })
    }

    /// The bound addresses, one per listen address, in order, with the real
    /// port (UDP and TCP share it).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.endpoints.iter().map(|e| e.addr).collect()
    }

    /// The bound TLS addresses (`[tls] listen`), in order, with the real port.
    pub fn tls_addrs(&self) -> Vec<SocketAddr> {
        self.tls.iter().map(|(a, _)| *a).collect()
    }

    /// Serves until `shutdown` resolves, then stops receiving, closes the
    /// listeners, and gives open TCP connections [`SHUTDOWN_GRACE`] to finish.
    /// `dispatcher` is an `Arc<Dispatcher>` or a [`DispatcherHandle`] (keep a
    /// clone of the handle to swap the dispatcher while serving).
    ///
    /// Errors: none today (per-packet and per-connection errors are logged and
    /// do not stop the server); reserved for fatal socket failures.
    pub async fn serve(
        self,
        dispatcher: impl Into<DispatcherHandle>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ServerError> {
        let dispatcher: DispatcherHandle = dispatcher.into();
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let conns = conns::ConnTable::new(conns::ConnLimits {
            max: self.settings.tcp_max_connections.max(1),
            per_client: self.settings.tcp_max_connections_per_client.max(1),
            ipv4_prefix: self.settings.client_prefixes.0,
            ipv6_prefix: self.settings.client_prefixes.1,
        });
        let tcp_settings = tcp::TcpSettings {
            idle_timeout: self.settings.tcp_idle_timeout,
            // Never longer than the idle timeout.
            first_query_timeout: self
                .settings
                .tcp_first_query_timeout
                .min(self.settings.tcp_idle_timeout),
        };
        let proxy = Arc::new(proxy::ProxyPolicy::new(&self.settings.proxy_allow));
        let mut workers: Vec<udp::UdpWorker> = Vec::new();
        for ep in self.endpoints {
            for sock in ep.udp {
                // On an error the workers already started stop when dropped.
                let (worker, done) = udp::UdpWorker::spawn(
                    sock,
                    ep.addr,
                    workers.len(),
                    dispatcher.clone(),
                    Arc::clone(&proxy),
                )?;
                tasks.spawn(udp::finished(done, ep.addr));
                workers.push(worker);
            }
            tasks.spawn(tcp::serve(
                ep.tcp,
                ep.addr,
                dispatcher.clone(),
                Arc::clone(&conns),
                Arc::clone(&proxy),
                tcp_settings.clone(),
                false,
                stop_rx.clone(),
            ));
        }
        for (addr, listener) in self.tls {
            tasks.spawn(tcp::serve(
                listener,
                addr,
                dispatcher.clone(),
                Arc::clone(&conns),
                Arc::clone(&proxy),
                tcp_settings.clone(),
                true,
                stop_rx.clone(),
            ));
        }
        drop(stop_rx);

        let mut result = Ok(());
        tokio::select! {
            () = shutdown => {}
            Some(joined) = tasks.join_next() => {
                // A serving task ended on its own: only a fatal error does that.
                result = task_result(joined);
            }
        }
        let _ = stop_tx.send(true);
        for worker in &workers {
            worker.stop();
        }
        let drain = async {
            while let Some(joined) = tasks.join_next().await {
                if let Err(e) = task_result(joined) {
                    tracing::warn!("{e}");
                }
            }
        };
        if tokio::time::timeout(SHUTDOWN_GRACE + Duration::from_millis(500), drain)
            .await
            .is_err()
        {
            tasks.abort_all();
        }
        result
    }
}

fn task_result(
    joined: Result<Result<(), ServerError>, tokio::task::JoinError>,
) -> Result<(), ServerError> {
    match joined {
        Ok(r) => r,
        Err(e) if e.is_cancelled() => Ok(()),
        Err(e) => {
            tracing::error!("server task failed: {e}");
            Ok(())
        }
    }
}

/// Binds and serves until `shutdown` resolves: [`Server::bind`] then [`Server::serve`].
///
/// Errors: those of [`Server::bind`] and [`Server::serve`].
pub async fn run(
    dispatcher: impl Into<DispatcherHandle>,
    settings: ServerSettings,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    Server::bind(&settings)
        .await?
        .serve(dispatcher, shutdown)
        .await
}

fn bind_endpoint(addr: SocketAddr, udp_sockets: usize) -> Result<Endpoint, ServerError> {
    if addr.port() != 0 {
        let udp = bind_udp_group(addr, udp_sockets).map_err(|e| bind_error(addr, &e))?;
        let tcp = bind_tcp(addr).map_err(|e| bind_error(addr, &e))?;
        return Ok(Endpoint { addr, udp, tcp });
    }
    let mut last = None;
    for _ in 0..PORT_ZERO_ATTEMPTS {
        let tcp = bind_tcp(addr).map_err(|e| bind_error(addr, &e))?;
        let bound = tcp.local_addr().map_err(|e| bind_error(addr, &e))?;
        match bind_udp_group(bound, udp_sockets) {
            Ok(udp) => {
                return Ok(Endpoint {
                    addr: bound,
                    udp,
                    tcp,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                tracing::debug!("UDP port {} taken, trying another", bound.port());
                last = Some(e);
            }
            Err(e) => return Err(bind_error(bound, &e)),
        }
    }
    let e = last.unwrap_or_else(|| io::Error::from(io::ErrorKind::AddrInUse));
    Err(bind_error(addr, &e))
}

/// Binds `n` reuse-port UDP sockets on `addr` (its port must not be 0 when n > 1).
fn bind_udp_group(addr: SocketAddr, n: usize) -> io::Result<Vec<std::net::UdpSocket>> {
    // A reuse-port bind succeeds on a port another process's reuse-port socket
    // holds, and the two would then split the traffic: probe with a plain bind
    // first, which fails on any taken port.
    if addr.port() != 0 {
        let probe = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        if addr.is_ipv6() {
            probe.set_only_v6(true)?;
        }
        probe.bind(&SockAddr::from(addr))?;
    }
    let mut socks = Vec::with_capacity(n);
    let mut short = [None, None];
    for _ in 0..n {
        let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        for (i, buffer) in [Buffer::Recv, Buffer::Send].into_iter().enumerate() {
            let (requested, granted) = size_buffer(&sock, buffer, UDP_SOCKET_BUFFER);
            if granted < requested {
                short[i] = Some((buffer, requested, granted));
            }
        }
        socks.push(bind_udp(sock, addr)?);
    }
    // Once per address: the workers' sockets all get the same size.
    for (buffer, requested, granted) in short.into_iter().flatten() {
        tracing::warn!(
            "UDP {addr}: {} is {granted} bytes, not the {requested} requested; \
             bursts may be dropped: raise sysctl {} (or run with CAP_NET_ADMIN)",
            buffer.option(),
            buffer.sysctl()
        );
    }
    Ok(socks)
}

fn bind_udp(sock: Socket, addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    if addr.is_ipv6() {
        sock.set_only_v6(true)?;
    }
    sock.set_reuse_port(true)?;
    sock.bind(&SockAddr::from(addr))?;
    Ok(sock.into())
}

/// A socket's kernel buffer, sized by [`size_buffer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Buffer {
    Recv,
    Send,
}

impl Buffer {
    fn option(self) -> &'static str {
        match self {
            Buffer::Recv => "SO_RCVBUF",
            Buffer::Send => "SO_SNDBUF",
        }
    }

    /// The sysctl that caps the size an unprivileged process may set.
    fn sysctl(self) -> &'static str {
        match self {
            Buffer::Recv => "net.core.rmem_max",
            Buffer::Send => "net.core.wmem_max",
        }
    }

    fn set(self, sock: &Socket, size: usize) -> io::Result<()> {
        match self {
            Buffer::Recv => sock.set_recv_buffer_size(size),
            Buffer::Send => sock.set_send_buffer_size(size),
        }
    }

    /// Sets the size above the sysctl cap; needs `CAP_NET_ADMIN` (Linux).
    #[cfg(target_os = "linux")]
    fn force(self, sock: &Socket, size: usize) -> nix::Result<()> {
        use nix::sys::socket::{setsockopt, sockopt};
        match self {
            Buffer::Recv => setsockopt(sock, sockopt::RcvBufForce, &size),
            Buffer::Send => setsockopt(sock, sockopt::SndBufForce, &size),
        }
    }

    /// The size in effect, bytes (0 if it cannot be read). Linux reports
    /// double the size granted, the other half being its bookkeeping (socket(7)).
    fn granted(self, sock: &Socket) -> usize {
        let reported = match self {
            Buffer::Recv => sock.recv_buffer_size(),
            Buffer::Send => sock.send_buffer_size(),
        };
        let reported = reported.unwrap_or(0);
        if cfg!(target_os = "linux") {
            reported / 2
        } else {
            reported
        }
    }
}

/// Asks for a `requested`-byte buffer and returns `(requested, granted)`, bytes.
/// The kernel silently caps SO_RCVBUF/SO_SNDBUF at a sysctl, so the size is read
/// back and, when short, SO_RCVBUFFORCE/SO_SNDBUFFORCE tried (as Unbound and
/// Knot DNS do), which succeeds only with `CAP_NET_ADMIN`.
fn size_buffer(sock: &Socket, buffer: Buffer, requested: usize) -> (usize, usize) {
    if let Err(e) = buffer.set(sock, requested) {
        tracing::debug!("{}: {e}", buffer.option());
    }
    let granted = buffer.granted(sock);
    #[cfg(target_os = "linux")]
    if granted < requested {
        // EPERM without CAP_NET_ADMIN: keep what the plain option granted.
        if buffer.force(sock, requested).is_ok() {
            return (requested, buffer.granted(sock));
        }
    }
    (requested, granted)
}

fn bind_tcp(addr: SocketAddr) -> io::Result<tokio::net::TcpListener> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        sock.set_only_v6(true)?;
    }
    // Rebind at once after a restart despite connections in TIME_WAIT.
    sock.set_reuse_address(true)?;
    sock.set_nonblocking(true)?;
    sock.bind(&SockAddr::from(addr))?;
    sock.listen(TCP_BACKLOG)?;
    tokio::net::TcpListener::from_std(sock.into())
}

/// Runs [`Dispatcher::handle`], turning a panic into "no reply" so that one
/// bad packet cannot take a serving task down; with dnstap on, logs the
/// message and its reply (one branch when off). `local` is the server's
/// address the message came to, when known (dnstap's response address).
#[inline]
fn handle_guarded(
    dispatcher: &Dispatcher,
    msg: &[u8],
    transport: Transport,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    out: &mut Vec<u8>,
) -> Reply {
    match dispatcher.dnstap() {
        None => handle_caught(dispatcher, msg, transport, peer, out),
        Some(tap) => handle_tapped(tap, dispatcher, msg, transport, (peer, local), out),
    }
}

/// [`handle_guarded`] with dnstap on: the query and its reply go to `tap`
/// ([`crate::dnstap::Dnstap::exchange`]).
#[inline(never)]
fn handle_tapped(
    tap: &crate::dnstap::Dnstap,
    dispatcher: &Dispatcher,
    msg: &[u8],
    transport: Transport,
    (peer, local): (SocketAddr, Option<SocketAddr>),
    out: &mut Vec<u8>,
) -> Reply {
    let qtime = std::time::SystemTime::now();
    let reply = handle_caught(dispatcher, msg, transport, peer, out);
    let sent = (reply == Reply::Message).then_some(out.as_slice());
    tap.exchange(transport, (peer, local), msg, qtime, sent);
    reply
}

/// Runs [`Dispatcher::handle`], turning a panic into "no reply".
#[inline]
fn handle_caught(
    dispatcher: &Dispatcher,
    msg: &[u8],
    transport: Transport,
    peer: SocketAddr,
    out: &mut Vec<u8>,
) -> Reply {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        dispatcher.handle(msg, transport, peer.ip(), out)
    })) {
        Ok(reply) => reply,
        Err(_) => {
            tracing::error!(
                "handling a {}-byte message from {peer} panicked; dropped",
                msg.len()
            );
            out.clear();
            Reply::Nothing
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sysctl value capping `buffer` for processes without CAP_NET_ADMIN.
    #[cfg(target_os = "linux")]
    fn sysctl_max(buffer: Buffer) -> usize {
        let file = match buffer {
            Buffer::Recv => "/proc/sys/net/core/rmem_max",
            Buffer::Send => "/proc/sys/net/core/wmem_max",
        };
        let text = std::fs::read_to_string(file).expect(file);
        text.trim().parse().expect(file)
    }

    /// Whether this process has CAP_NET_ADMIN (bit 12 of `CapEff`, capabilities(7)).
    #[cfg(target_os = "linux")]
    fn net_admin() -> bool {
        let status = std::fs::read_to_string("/proc/self/status").expect("status");
        let caps = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .expect("CapEff");
        u64::from_str_radix(caps.trim(), 16).expect("CapEff hex") & (1 << 12) != 0
    }

    /// A size within the cap is granted as asked (not the doubled figure Linux
    /// reports); one above it is granted in full with CAP_NET_ADMIN
    /// (SO_RCVBUFFORCE), else capped at the sysctl, and reported as such.
    #[cfg(target_os = "linux")]
    #[test]
    fn buffer_size_granted_is_read_back() {
        for buffer in [Buffer::Recv, Buffer::Send] {
            let sock = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).expect("socket");
            assert_eq!(
                size_buffer(&sock, buffer, 65_536),
                (65_536, 65_536),
                "{buffer:?}"
            );
            let max = sysctl_max(buffer);
            let requested = max + 65_536;
            let granted = if net_admin() { requested } else { max };
            assert_eq!(
                size_buffer(&sock, buffer, requested),
                (requested, granted),
                "{buffer:?}"
            );
        }
    }

    #[tokio::test]
    async fn port_zero_gets_same_port_for_udp_and_tcp() {
        let settings = ServerSettings {
            listen: vec!["127.0.0.1:0".parse().expect("addr")],
            udp_workers: 2,
            ..Default::default()
        };
        let server = Server::bind(&settings).await.expect("bind");
        let addrs = server.local_addrs();
        assert_eq!(addrs.len(), 1);
        assert_ne!(addrs[0].port(), 0);
        let ep = &server.endpoints[0];
        assert_eq!(ep.tcp.local_addr().expect("tcp addr"), addrs[0]);
        for u in &ep.udp {
            assert_eq!(u.local_addr().expect("udp addr"), addrs[0]);
        }
    }

    /// A CH TXT `version.bind` query with ID `id` (answered without any data source).
    fn version_query(id: u16) -> Vec<u8> {
        let mut q = id.to_be_bytes().to_vec();
        q.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        q.extend_from_slice(b"\x07version\x04bind\x00");
        q.extend_from_slice(&[0, 16, 0, 3]);
        q
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn several_udp_workers_answer_and_stop() {
        let settings = ServerSettings {
            listen: vec!["127.0.0.1:0".parse().expect("addr")],
            udp_workers: 3,
            ..Default::default()
        };
        let server = Server::bind(&settings).await.expect("bind");
        let addr = server.local_addrs()[0];
        assert_eq!(server.endpoints[0].udp.len(), 3);
        let dispatcher = Arc::new(
            Dispatcher::new(authd_datasrc::SourceList::new(Vec::new())).with_chaos(
                crate::chaos::ChaosOptions {
                    version: Some("test".into()),
                    hostname: None,
                },
            ),
        );
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(server.serve(dispatcher, async {
            let _ = stop_rx.await;
        }));
        // Many source ports, so SO_REUSEPORT spreads them over the workers.
        let answered = tokio::task::spawn_blocking(move || {
            let mut answered = 0;
            for id in 0..16u16 {
                let client = std::net::UdpSocket::bind("127.0.0.1:0").expect("client");
                client
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .expect("timeout");
                client.send_to(&version_query(id), addr).expect("send");
                let mut buf = [0u8; 512];
                let (n, _) = client.recv_from(&mut buf).expect("reply");
                assert!(n > 12, "short reply");
                assert_eq!(buf[..2], id.to_be_bytes());
                answered += 1;
            }
            answered
        })
        .await
        .expect("client");
        assert_eq!(answered, 16);
        let started = std::time::Instant::now();
        stop_tx.send(()).expect("stop");
        tokio::time::timeout(Duration::from_secs(2), serving)
            .await
            .expect("stops in time")
            .expect("join")
            .expect("serve");
        assert!(
            started.elapsed() < udp::RECV_TIMEOUT,
            "{:?}",
            started.elapsed()
        );
        // Every socket is closed: the port can be bound again without SO_REUSEPORT.
        std::net::UdpSocket::bind(addr).expect("port free again");
    }

    #[tokio::test]
    async fn port_in_use_is_reported() {
        let holder = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let addr = holder.local_addr().expect("addr");
        let settings = ServerSettings {
            listen: vec![addr],
            ..Default::default()
        };
        let e = Server::bind(&settings).await.err().expect("in use");
        assert_eq!(
            e.to_string(),
            format!("cannot bind {addr}: Address already in use")
        );
    }
}
