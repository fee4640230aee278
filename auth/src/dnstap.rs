//! dnstap: auth query and response messages logged in Frame Streams format.
//!
//! Schema: dnstap.proto (<https://dnstap.info>, `github.com/dnstap/dnstap.pb`);
//! the few fields written (`Dnstap` and `Message`, types `AUTH_QUERY` and
//! `AUTH_RESPONSE`) are encoded here by hand (protobuf wire format: varints,
//! length-delimited bytes, `fixed32`). Transport: Frame Streams
//! (`github.com/farsightsec/fstrm`, content type `protobuf:dnstap.Dnstap`),
//! unidirectional to a file (START … STOP), bidirectional to a unix socket
//! (READY → ACCEPT → START … STOP → FINISH), as `fstrm_capture` expects.
//!
//! Answering never waits for the log: a worker encodes its frame and hands
//! it to a bounded channel with `try_send`; one writer thread drains it. When
//! the channel is full (a slow or absent reader) the frame is dropped and
//! counted ([`Dnstap::dropped`]). When dnstap is off the dispatcher holds no
//! [`Dnstap`] and the server pays one branch per message.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use crate::query::Transport;
use crate::settings::{Context, Invalid, Kind, Schema, Section};

/// The Frame Streams content type of dnstap.
pub const CONTENT_TYPE: &[u8] = b"protobuf:dnstap.Dnstap";

/// Frames held between the workers and the writer; more are dropped.
pub const QUEUE_FRAMES: usize = 16 * 1024;

/// How long the writer waits between attempts to reach an absent socket reader.
const RECONNECT: Duration = Duration::from_secs(1);

/// Where frames go (`[dnstap] file` or `[dnstap] socket`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// A file, created (truncated) at start: unidirectional Frame Streams.
    File(PathBuf),
    /// A unix stream socket a reader (e.g. `fstrm_capture -u`) listens on:
    /// bidirectional Frame Streams, reconnected every second while absent.
    Socket(PathBuf),
}

impl std::fmt::Display for Output {
    /// `file PATH` or `socket PATH`, for log lines and errors.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Output::File(p) => write!(f, "file {}", p.display()),
            Output::Socket(p) => write!(f, "socket {}", p.display()),
        }
    }
}

/// The `[dnstap]` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Where frames go.
    pub output: Output,
    /// `Dnstap.identity` (the server's name), if any.
    pub identity: Option<String>,
    /// `Dnstap.version` (the software's version), if any.
    pub version: Option<String>,
}

/// `[dnstap]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDnstap {
    file: Option<PathBuf>,
    socket: Option<PathBuf>,
    identity: Option<String>,
    version: Option<String>,
}

impl Section for RawDnstap {
    /// `None`: dnstap off.
    type Value = Option<Settings>;

    const SCHEMA: Schema = &[(
        "dnstap",
        &[
            ("file", Kind::Text),
            ("socket", Kind::Text),
            ("identity", Kind::Text),
            ("version", Kind::Text),
        ],
    )];

    /// Off unless `file` or `socket` is set (not both); relative paths
    /// resolved against the file's folder; empty strings mean unset.
    fn check(self, cx: &Context<'_>) -> Result<Option<Settings>, Invalid> {
        let output = match (cx.optional_path(self.file), cx.optional_path(self.socket)) {
            (None, None) => {
                if self.identity.is_some() || self.version.is_some() {
                    return Err(Invalid::new(
                        "dnstap",
                        "identity or version set without file or socket",
                    ));
                }
                return Ok(None);
            }
            (Some(f), None) => Output::File(f),
            (None, Some(s)) => Output::Socket(s),
            (Some(_), Some(_)) => {
                return Err(Invalid::new("dnstap", "set file or socket, not both"));
            }
        };
        let text = |t: Option<String>| t.filter(|t| !t.is_empty());
        Ok(Some(Settings {
            output,
            identity: text(self.identity),
            version: text(self.version),
        }))
    }
}

/// One message for the writer thread.
enum Item {
    /// One encoded `Dnstap` protobuf (a data frame's payload).
    Frame(Vec<u8>),
    /// Flush, write STOP and end.
    Stop,
}

/// A running dnstap log: the channel to its writer thread and the drop count.
#[derive(Debug)]
pub struct Dnstap {
    tx: SyncSender<Item>,
    dropped: Arc<AtomicU64>,
    identity: Option<Vec<u8>>,
    version: Option<Vec<u8>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Item::Frame(b) => write!(f, "Frame({} bytes)", b.len()),
            Item::Stop => f.write_str("Stop"),
        }
    }
}

impl Dnstap {
    /// Starts the writer thread for `settings`, with a queue of
    /// [`QUEUE_FRAMES`] frames.
    ///
    /// Errors: the file cannot be created, or the thread not started. An
    /// absent socket reader is not an error: frames are dropped (and
    /// counted) until one listens.
    pub fn start(settings: &Settings) -> io::Result<Arc<Dnstap>> {
        Dnstap::start_with(settings, QUEUE_FRAMES)
    }

    /// [`Dnstap::start`] with a queue of `frames` frames.
    ///
    /// Errors: as [`Dnstap::start`].
    pub fn start_with(settings: &Settings, frames: usize) -> io::Result<Arc<Dnstap>> {
        let (tx, rx) = sync_channel(frames);
        let sink = match &settings.output {
            Output::File(path) => {
                let mut w = BufWriter::new(File::create(path)?);
                w.write_all(&control(CONTROL_START))?;
                w.flush()?;
                Sink::File(w)
            }
            Output::Socket(path) => Sink::Socket {
                path: path.clone(),
                conn: None,
                last_try: None,
            },
        };
        let dropped = Arc::new(AtomicU64::new(0));
        let writer_dropped = Arc::clone(&dropped);
        let tap = Arc::new(Dnstap {
            tx,
            dropped,
            identity: settings.identity.clone().map(String::into_bytes),
            version: settings.version.clone().map(String::into_bytes),
            writer: Mutex::new(None),
        });
        let writer = std::thread::Builder::new()
            .name("authd-dnstap".to_string())
            .spawn(move || write_loop(rx, sink, &writer_dropped))?;
        if let Ok(mut w) = tap.writer.lock() {
            *w = Some(writer);
        }
        Ok(tap)
    }

    /// Frames dropped so far: the queue was full, the writer had ended, or
    /// no socket reader was connected.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The dnstap layer, outermost (the server calls it around its panic
    /// guard and the dispatcher): logs `query`, received at `qtime` from
    /// `peer` over `transport`, and `reply`, the one message sent for it if
    /// there is one (sent now; a transfer stream's messages are not logged).
    /// `local` is the server address the query came to, when known; a
    /// wildcard address is left out, as it says nothing about that.
    #[inline]
    pub fn exchange(
        &self,
        transport: Transport,
        (peer, local): (SocketAddr, Option<SocketAddr>),
        query: &[u8],
        qtime: SystemTime,
        reply: Option<&[u8]>,
    ) {
        let sent = reply.map(|r| (r, SystemTime::now()));
        let local = local.filter(|l| !l.ip().is_unspecified());
        self.log(transport, (peer, local), query, qtime, sent);
    }

    /// Logs one exchange: an `AUTH_QUERY` for `query` received at `qtime`
    /// from `peer` (at the server's address `local`, if known), and an
    /// `AUTH_RESPONSE` for `reply` sent at `rtime` if there is one. Never
    /// blocks: a frame that does not fit is dropped.
    pub fn log(
        &self,
        transport: Transport,
        (peer, local): (SocketAddr, Option<SocketAddr>),
        query: &[u8],
        qtime: SystemTime,
        reply: Option<(&[u8], SystemTime)>,
    ) {
        let ends = Ends {
            transport,
            peer,
            local,
            qtime,
        };
        self.send(self.encode(&ends, MESSAGE_AUTH_QUERY, query, None));
        if let Some((reply, rtime)) = reply {
            self.send(self.encode(&ends, MESSAGE_AUTH_RESPONSE, query, Some((reply, rtime))));
        }
    }

    fn send(&self, frame: Vec<u8>) {
        match self.tx.try_send(Item::Frame(frame)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Flushes what is queued, writes the STOP frame (and, on a socket,
    /// waits for FINISH briefly) and ends the writer. Blocks until then;
    /// later frames are dropped. Called once at shutdown; later calls do
    /// nothing.
    pub fn shutdown(&self) {
        let writer = self.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(writer) = writer {
            let _ = self.tx.send(Item::Stop);
            let _ = writer.join();
        }
    }

    /// One `Dnstap` protobuf: a `Message` of `kind`, with the response when
    /// `reply` is set (the query message only in an `AUTH_QUERY`).
    fn encode(
        &self,
        ends: &Ends,
        kind: u64,
        query: &[u8],
        reply: Option<(&[u8], SystemTime)>,
    ) -> Vec<u8> {
        let mut m = Vec::with_capacity(64 + query.len() + reply.map_or(0, |r| r.0.len()));
        pb_varint_field(&mut m, 1, kind);
        let family = if ends.peer.is_ipv4() { 1 } else { 2 };
        pb_varint_field(&mut m, 2, family);
        let protocol = match ends.transport {
            Transport::Udp => 1,
            Transport::Tcp => 2,
            // SocketProtocol DOT (dnstap.proto).
            Transport::Tls => 3,
        };
        pb_varint_field(&mut m, 3, protocol);
        pb_address_field(&mut m, 4, ends.peer);
        if let Some(local) = ends.local {
            pb_address_field(&mut m, 5, local);
        }
        pb_varint_field(&mut m, 6, u64::from(ends.peer.port()));
        if let Some(local) = ends.local {
            pb_varint_field(&mut m, 7, u64::from(local.port()));
        }
        let (sec, nsec) = split_time(ends.qtime);
        pb_varint_field(&mut m, 8, sec);
        pb_fixed32_field(&mut m, 9, nsec);
        match reply {
            None => pb_bytes_field(&mut m, 10, query),
            Some((reply, rtime)) => {
                let (sec, nsec) = split_time(rtime);
                pb_varint_field(&mut m, 12, sec);
                pb_fixed32_field(&mut m, 13, nsec);
                pb_bytes_field(&mut m, 14, reply);
            }
        }
        let mut d = Vec::with_capacity(m.len() + 64);
        if let Some(id) = &self.identity {
            pb_bytes_field(&mut d, 1, id);
        }
        if let Some(v) = &self.version {
            pb_bytes_field(&mut d, 2, v);
        }
        pb_bytes_field(&mut d, 14, &m);
        pb_varint_field(&mut d, 15, DNSTAP_MESSAGE);
        d
    }
}

/// The addresses and times an exchange's two messages share.
struct Ends {
    transport: Transport,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    qtime: SystemTime,
}

/// Seconds and nanoseconds since the Unix epoch (0 before it).
fn split_time(t: SystemTime) -> (u64, u32) {
    t.duration_since(UNIX_EPOCH)
        .map_or((0, 0), |d| (d.as_secs(), d.subsec_nanos()))
}

/// `Dnstap.Type` MESSAGE.
const DNSTAP_MESSAGE: u64 = 1;
/// `Message.Type` AUTH_QUERY.
const MESSAGE_AUTH_QUERY: u64 = 1;
/// `Message.Type` AUTH_RESPONSE.
const MESSAGE_AUTH_RESPONSE: u64 = 2;

fn pb_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A varint field (wire type 0).
fn pb_varint_field(out: &mut Vec<u8>, field: u64, v: u64) {
    pb_varint(out, field << 3);
    pb_varint(out, v);
}

/// A length-delimited field (wire type 2).
fn pb_bytes_field(out: &mut Vec<u8>, field: u64, v: &[u8]) {
    pb_varint(out, (field << 3) | 2);
    pb_varint(out, v.len() as u64);
    out.extend_from_slice(v);
}

/// An address field: 4 or 16 bytes, network order.
fn pb_address_field(out: &mut Vec<u8>, field: u64, addr: SocketAddr) {
    match addr {
        SocketAddr::V4(a) => pb_bytes_field(out, field, &a.ip().octets()),
        SocketAddr::V6(a) => pb_bytes_field(out, field, &a.ip().octets()),
    }
}

/// A `fixed32` field (wire type 5, little-endian).
fn pb_fixed32_field(out: &mut Vec<u8>, field: u64, v: u32) {
    pb_varint(out, (field << 3) | 5);
    out.extend_from_slice(&v.to_le_bytes());
}

/// Frame Streams control frame types.
const CONTROL_ACCEPT: u32 = 1;
const CONTROL_START: u32 = 2;
const CONTROL_STOP: u32 = 3;
const CONTROL_READY: u32 = 4;
const CONTROL_FINISH: u32 = 5;
/// The control field carrying a content type.
const FIELD_CONTENT_TYPE: u32 = 1;

/// A whole control frame (escape, length, type, and for READY, ACCEPT and
/// START the content type field).
fn control(kind: u32) -> Vec<u8> {
    let mut body = kind.to_be_bytes().to_vec();
    if matches!(kind, CONTROL_READY | CONTROL_ACCEPT | CONTROL_START) {
        body.extend_from_slice(&FIELD_CONTENT_TYPE.to_be_bytes());
        body.extend_from_slice(&(CONTENT_TYPE.len() as u32).to_be_bytes());
        body.extend_from_slice(CONTENT_TYPE);
    }
    let mut frame = 0u32.to_be_bytes().to_vec();
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    frame
}

/// Reads one control frame; its type.
///
/// Errors: the stream ended or held a data frame.
fn read_control(r: &mut impl Read) -> io::Result<u32> {
    let mut word = [0u8; 4];
    r.read_exact(&mut word)?;
    if word != [0; 4] {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "data frame where a control frame was expected",
        ));
    }
    r.read_exact(&mut word)?;
    let len = u32::from_be_bytes(word) as usize;
    if !(4..=512).contains(&len) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "control frame length out of range",
        ));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    let kind = body
        .first_chunk::<4>()
        .map_or(0, |k| u32::from_be_bytes(*k));
    Ok(kind)
}

/// Where the writer thread writes.
enum Sink {
    File(BufWriter<File>),
    Socket {
        path: PathBuf,
        conn: Option<BufWriter<UnixStream>>,
        last_try: Option<std::time::Instant>,
    },
}

/// Connects to a reader and runs the handshake (READY → ACCEPT, START).
fn connect(path: &Path) -> io::Result<BufWriter<UnixStream>> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(&control(CONTROL_READY))?;
    if read_control(&mut s)? != CONTROL_ACCEPT {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the reader did not ACCEPT",
        ));
    }
    s.write_all(&control(CONTROL_START))?;
    Ok(BufWriter::new(s))
}

impl Sink {
    /// Writes one data frame; false when it was lost.
    fn frame(&mut self, payload: &[u8]) -> bool {
        let len = (payload.len() as u32).to_be_bytes();
        match self {
            Sink::File(w) => match w.write_all(&len).and_then(|()| w.write_all(payload)) {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!("dnstap: write failed: {e}");
                    false
                }
            },
            Sink::Socket {
                path,
                conn,
                last_try,
            } => {
                if conn.is_none() && last_try.is_none_or(|t| t.elapsed() >= RECONNECT) {
                    *last_try = Some(std::time::Instant::now());
                    match connect(path) {
                        Ok(c) => {
                            tracing::info!("dnstap: connected to {}", path.display());
                            *conn = Some(c);
                        }
                        Err(e) => tracing::debug!("dnstap: {}: {e}", path.display()),
                    }
                }
                let Some(c) = conn else {
                    return false;
                };
                match c.write_all(&len).and_then(|()| c.write_all(payload)) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!("dnstap: {}: {e}; reconnecting", path.display());
                        *conn = None;
                        false
                    }
                }
            }
        }
    }

    /// Flushes buffered frames (the channel ran dry).
    fn flush(&mut self) {
        let r = match self {
            Sink::File(w) => w.flush(),
            Sink::Socket { conn: Some(c), .. } => c.flush(),
            Sink::Socket { conn: None, .. } => Ok(()),
        };
        if let Err(e) = r {
            tracing::warn!("dnstap: flush failed: {e}");
            if let Sink::Socket { conn, .. } = self {
                *conn = None;
            }
        }
    }

    /// Writes STOP and flushes; on a socket, waits for FINISH (2 s at most).
    fn stop(self) {
        let stop = control(CONTROL_STOP);
        let r = match self {
            Sink::File(mut w) => w.write_all(&stop).and_then(|()| w.flush()),
            Sink::Socket {
                conn: Some(mut c), ..
            } => c.write_all(&stop).and_then(|()| c.flush()).and_then(|()| {
                let mut s = c.into_inner().map_err(|e| e.into_error())?;
                match read_control(&mut s)? {
                    CONTROL_FINISH => Ok(()),
                    _ => Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "no FINISH after STOP",
                    )),
                }
            }),
            Sink::Socket { conn: None, .. } => Ok(()),
        };
        if let Err(e) = r {
            tracing::warn!("dnstap: stopping: {e}");
        }
    }
}

/// The writer thread: frames until [`Item::Stop`] (or every sender gone),
/// flushing whenever the channel runs dry.
/// Frames the sink lost (no socket reader, a failed write) are counted in
/// `dropped`.
fn write_loop(rx: Receiver<Item>, mut sink: Sink, dropped: &AtomicU64) {
    let mut pending = false;
    loop {
        let item = if pending {
            match rx.try_recv() {
                Ok(item) => Some(item),
                Err(_) => {
                    sink.flush();
                    pending = false;
                    continue;
                }
            }
        } else {
            match rx.recv_timeout(RECONNECT) {
                Ok(item) => Some(item),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => Some(Item::Stop),
            }
        };
        match item {
            Some(Item::Frame(f)) => {
                if !sink.frame(&f) {
                    dropped.fetch_add(1, Ordering::Relaxed);
                }
                pending = true;
            }
            Some(Item::Stop) => break,
            None => {}
        }
    }
    sink.stop();
}

#[cfg(test)]
mod tests;
