//! Helpers for end-to-end tests against a running `authd` over loopback sockets.
//!
//! - [`binary`] finds a workspace binary (`authd`, `loadzone`) in the target
//!   folder of the running test, building it once per test process;
//! - [`AuthdProcess`] starts `authd` on a free port of 127.0.0.1 and stops it on drop;
//! - [`query_udp`] / [`query_tcp`] send one wire message and return the reply;
//! - [`QueryBuilder`] and [`parse_reply`] make and read messages with hickory-proto.
//!
//! These are test helpers: they panic with a clear message when something is wrong.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use hickory_proto;
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::{DNSClass, Name, RecordType};

/// How long a query waits for its reply, per attempt.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// How many times [`query_udp`] sends a query before giving up.
pub const UDP_ATTEMPTS: usize = 3;

/// How long [`AuthdProcess::start`] waits for the `listening on` line.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a reference server or resolver ([`Daemon`]) may take to
/// answer its first query.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long [`run_authd`] lets a process run before killing it.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(30);

/// The target folder of the running test executable (`…/target/<profile>`).
///
/// Test executables live in `…/target/<profile>/deps/`.
pub fn target_profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test executable has a folder");
    if deps.file_name().is_some_and(|n| n == "deps") {
        deps.parent().unwrap_or(deps).to_path_buf()
    } else {
        deps.to_path_buf()
    }
}

/// Runs `cargo build -p authd -p authd-migrations --bins` (every binary) for the running test's profile and target
/// folder, once per test process, so binaries are never stale. Returns the build
/// failure message if cargo failed (the caller may still find an older binary).
fn build_bins_once() -> Result<(), String> {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if std::env::var_os("AUTHD_TESTS_NO_BUILD").is_some() {
                return Ok(());
            }
            let profile_dir = target_profile_dir();
            let profile = profile_dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("debug")
                .to_string();
            let Some(target_dir) = profile_dir.parent() else {
                return Err("cannot tell the target folder".into());
            };
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut cmd = Command::new(cargo);
            cmd.args([
                "build",
                "--quiet",
                "-p",
                "authd",
                "-p",
                "authd-migrations",
                "--bins",
                "--target-dir",
            ])
            .arg(target_dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"));
            match profile.as_str() {
                "debug" => {}
                "release" => {
                    cmd.arg("--release");
                }
                other => {
                    cmd.args(["--profile", other]);
                }
            }
            match cmd.output() {
                Ok(out) if out.status.success() => Ok(()),
                Ok(out) => Err(format!(
                    "cargo build -p authd --bins failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                )),
                Err(e) => Err(format!("cannot run cargo: {e}")),
            }
        })
        .clone()
}

/// The path of workspace binary `name` (e.g. `"authd"`, `"loadzone"`) in the
/// running test's target folder. Builds the `authd` package's binaries once per
/// test process first (set `AUTHD_TESTS_NO_BUILD` to skip that).
///
/// Panics if the binary is missing and cannot be built.
pub fn binary(name: &str) -> PathBuf {
    let built = build_bins_once();
    let path = target_profile_dir().join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    match built {
        Ok(()) if path.is_file() => path,
        Ok(()) => panic!("binary {} not found after building", path.display()),
        Err(e) if path.is_file() => {
            eprintln!("warning: {e}; using the existing {}", path.display());
            path
        }
        Err(e) => panic!("binary {} not found: {e}", path.display()),
    }
}

/// A running `authd`, killed (by PID) when dropped.
pub struct AuthdProcess {
    child: Child,
    addrs: Vec<SocketAddr>,
    stderr: Arc<Mutex<String>>,
}

/// The address in a `listening on ADDR:PORT` log line.
pub fn parse_listening_line(line: &str) -> Option<SocketAddr> {
    let rest = line.split("listening on ").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

impl AuthdProcess {
    /// Starts `authd ARGS --listen 127.0.0.1:0` and waits for its `listening on` line.
    ///
    /// Panics if it exits or does not report an address within [`START_TIMEOUT`];
    /// the message holds its stderr.
    pub fn start<I, S>(args: I) -> AuthdProcess
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cmd = Command::new(binary("authd"));
        cmd.args(args).args(["--listen", "127.0.0.1:0"]);
        AuthdProcess::start_command(cmd, 1)
    }

    /// Spawns `cmd` (an `authd` command line with every `--listen` it needs)
    /// and waits until it has logged `expected_addrs` `listening on` lines.
    ///
    /// Panics as [`AuthdProcess::start`].
    pub fn start_command(mut cmd: Command, expected_addrs: usize) -> AuthdProcess {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        // Tests send many queries from one address: rate limiting (on by
        // default) is turned off unless the test sets it itself.
        if !cmd.get_envs().any(|(k, _)| k == "AUTHD_RRL__ENABLED") {
            cmd.env("AUTHD_RRL__ENABLED", "false");
        }
        let mut child = cmd.spawn().expect("spawn authd");
        let stderr_pipe = child.stderr.take().expect("piped stderr");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel::<SocketAddr>();
        let log = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr_pipe).lines() {
                let Ok(line) = line else { break };
                let addr = parse_listening_line(&line);
                if let Ok(mut s) = log.lock() {
                    s.push_str(&line);
                    s.push('\n');
                }
                if let Some(addr) = addr {
                    let _ = tx.send(addr);
                }
            }
        });
        let mut proc = AuthdProcess {
            child,
            addrs: Vec::new(),
            stderr,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        while proc.addrs.len() < expected_addrs {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left.min(Duration::from_millis(100))) {
                Ok(addr) => proc.addrs.push(addr),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Ok(Some(status)) = proc.child.try_wait() {
                        std::thread::sleep(Duration::from_millis(100));
                        panic!(
                            "authd exited ({status}) before listening:\n{}",
                            proc.stderr()
                        );
                    }
                    if left.is_zero() {
                        panic!("authd did not report listening in time:\n{}", proc.stderr());
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = proc.child.wait().ok();
                    panic!(
                        "authd exited ({status:?}) before listening:\n{}",
                        proc.stderr()
                    );
                }
            }
        }
        proc
    }

    /// The first bound address (UDP and TCP share it).
    pub fn addr(&self) -> SocketAddr {
        self.addrs[0]
    }

    /// Every bound address, in `listening on` order.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything it wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The address of its `[metrics]` endpoint, from its `metrics on
    /// http://ADDR/metrics` log line.
    ///
    /// Panics if that line does not come within 5 s.
    pub fn metrics_addr(&self) -> SocketAddr {
        assert!(self.wait_for_log("metrics on http://", Duration::from_secs(5)));
        let log = self.stderr();
        log.split("metrics on http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no metrics address in:\n{log}"))
    }

    /// Waits up to `timeout` until its stderr contains `needle`; returns whether it did.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.stderr().contains(needle) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `signal` (e.g. `"TERM"`, `"HUP"`) to the process with `kill -s`.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args(["-s", signal, &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -s {signal} {} failed", self.pid());
    }

    /// Waits up to `timeout` for the process to exit; `None` if it is still running.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                // Let the reader thread take the last lines.
                std::thread::sleep(Duration::from_millis(50));
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and waits (up to 10 s) for the exit status.
    ///
    /// Panics if it does not exit in time.
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal("TERM");
        match self.wait_timeout(Duration::from_secs(10)) {
            Some(status) => status,
            None => panic!("authd did not exit after SIGTERM:\n{}", self.stderr()),
        }
    }
}

impl Drop for AuthdProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Runs `authd ARGS` to completion (killed after [`RUN_TIMEOUT`]), for
/// start-up error tests.
pub fn run_authd<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    run_with_timeout(Command::new(binary("authd")).args(args), RUN_TIMEOUT)
}

/// Runs `cmd` with stdout/stderr captured; kills it (by PID) after `timeout`.
///
/// Panics if it cannot be spawned or does not exit in time.
pub fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out_pipe = child.stdout.take().expect("stdout");
    let mut err_pipe = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out_pipe.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err_pipe.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    }
}

/// Sends `wire` over UDP to `addr` and returns the reply with the same message
/// id (first two bytes). Tries [`UDP_ATTEMPTS`] times, waiting [`QUERY_TIMEOUT`]
/// each time.
///
/// Panics when no reply comes.
pub fn query_udp(addr: SocketAddr, wire: &[u8]) -> Vec<u8> {
    try_query_udp(addr, wire, UDP_ATTEMPTS)
        .unwrap_or_else(|| panic!("no UDP reply from {addr} after {UDP_ATTEMPTS} attempts"))
}

/// As [`query_udp`] with `attempts` tries, returning `None` when no reply comes
/// (for tests where silence is the expected answer).
pub fn try_query_udp(addr: SocketAddr, wire: &[u8], attempts: usize) -> Option<Vec<u8>> {
    let local: SocketAddr = if addr.is_ipv6() {
        "[::1]:0".parse().ok()?
    } else {
        "127.0.0.1:0".parse().ok()?
    };
    let sock = UdpSocket::bind(local).expect("bind UDP client socket");
    sock.connect(addr).expect("connect UDP client socket");
    sock.set_read_timeout(Some(QUERY_TIMEOUT))
        .expect("set timeout");
    let mut buf = vec![0u8; 65_535];
    for _ in 0..attempts {
        sock.send(wire).expect("send UDP query");
        let deadline = Instant::now() + QUERY_TIMEOUT;
        while Instant::now() < deadline {
            match sock.recv(&mut buf) {
                Ok(n) => {
                    let reply = &buf[..n];
                    if wire.len() < 2 || reply.get(..2) == wire.get(..2) {
                        return Some(reply.to_vec());
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    std::thread::sleep(Duration::from_millis(50));
                    break;
                }
                Err(e) => panic!("UDP receive from {addr}: {e}"),
            }
        }
    }
    None
}

/// Opens a TCP connection to `addr` with [`QUERY_TIMEOUT`] for connecting,
/// reading and writing.
///
/// Panics if it cannot connect.
pub fn tcp_connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&addr, QUERY_TIMEOUT)
        .unwrap_or_else(|e| panic!("TCP connect to {addr}: {e}"));
    stream
        .set_read_timeout(Some(QUERY_TIMEOUT))
        .expect("timeout");
    stream
        .set_write_timeout(Some(QUERY_TIMEOUT))
        .expect("timeout");
    let _ = stream.set_nodelay(true);
    stream
}

/// Writes `wire` with its two-byte length prefix (RFC 1035 §4.2.2).
///
/// Panics on a write error or a message over 65535 bytes.
pub fn tcp_send(stream: &mut TcpStream, wire: &[u8]) {
    let len = u16::try_from(wire.len()).expect("message fits a TCP frame");
    let mut frame = Vec::with_capacity(wire.len() + 2);
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(wire);
    stream.write_all(&frame).expect("TCP write");
}

/// Reads one length-prefixed message; `Err` on EOF, timeout or reset.
pub fn tcp_recv(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 2];
    stream.read_exact(&mut len)?;
    let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut msg)?;
    Ok(msg)
}

/// Sends `wire` over a new TCP connection to `addr` and returns the reply.
/// Connecting is retried a few times (the listener may be busy).
///
/// Panics when no reply comes within [`QUERY_TIMEOUT`].
pub fn query_tcp(addr: SocketAddr, wire: &[u8]) -> Vec<u8> {
    let mut last = None;
    for _ in 0..3 {
        let mut stream = tcp_connect(addr);
        tcp_send(&mut stream, wire);
        match tcp_recv(&mut stream) {
            Ok(reply) => return reply,
            Err(e) => {
                last = Some(e);
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    panic!("no TCP reply from {addr}: {last:?}");
}

/// True when the peer closed `stream` (EOF or reset) within `timeout`;
/// false if it is still open (a read timed out) or sent data.
pub fn tcp_closed_within(stream: &mut TcpStream, timeout: Duration) -> bool {
    stream.set_read_timeout(Some(timeout)).expect("timeout");
    let mut b = [0u8; 1];
    match stream.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => matches!(
            e.kind(),
            std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::BrokenPipe
        ),
    }
}

/// Builds a query message.
///
/// ```
/// use authd_tests::QueryBuilder;
/// let wire = QueryBuilder::new("www.example.com.", "A").edns(1232, true).id(7).wire();
/// assert_eq!(&wire[..2], &[0, 7]);
/// ```
#[derive(Debug, Clone)]
pub struct QueryBuilder {
    msg: Message,
}

impl QueryBuilder {
    /// A query (RD clear, class IN, no EDNS, random id) for `qname` (absolute or
    /// not: a dot is added) and `qtype` (a mnemonic such as `"AAAA"` or `"TYPE65"`).
    ///
    /// Panics on an invalid name or type.
    pub fn new(qname: &str, qtype: &str) -> QueryBuilder {
        let name = if qname.ends_with('.') {
            Name::from_ascii(qname)
        } else {
            Name::from_ascii(format!("{qname}."))
        }
        .unwrap_or_else(|e| panic!("bad qname {qname:?}: {e}"));
        let rtype = parse_rtype(qtype);
        let mut msg = Message::new(rand_id(), MessageType::Query, OpCode::Query);
        msg.add_query(Query::query(name, rtype));
        QueryBuilder { msg }
    }

    /// Sets the message id.
    pub fn id(mut self, id: u16) -> QueryBuilder {
        self.msg.metadata.id = id;
        self
    }

    /// Sets the query class (e.g. [`DNSClass::CH`]).
    pub fn class(mut self, class: DNSClass) -> QueryBuilder {
        for q in &mut self.msg.queries {
            q.set_query_class(class);
        }
        self
    }

    /// Sets RD (recursion desired).
    pub fn rd(mut self, rd: bool) -> QueryBuilder {
        self.msg.metadata.recursion_desired = rd;
        self
    }

    /// Adds EDNS (RFC 6891) with UDP payload size `payload` and the DO bit.
    pub fn edns(mut self, payload: u16, dnssec_ok: bool) -> QueryBuilder {
        let mut edns = Edns::new();
        edns.set_max_payload(payload);
        edns.set_dnssec_ok(dnssec_ok);
        self.msg.set_edns(edns);
        self
    }

    /// The message.
    pub fn message(&self) -> &Message {
        &self.msg
    }

    /// The message in wire form.
    pub fn wire(&self) -> Vec<u8> {
        self.msg.to_vec().expect("query encodes")
    }
}

/// Parses a record type mnemonic (`"A"`, `"SOA"`, `"TYPE65"`).
///
/// Panics on an unknown mnemonic.
pub fn parse_rtype(s: &str) -> RecordType {
    if let Some(n) = s.strip_prefix("TYPE").and_then(|n| n.parse::<u16>().ok()) {
        return RecordType::from(n);
    }
    s.parse::<RecordType>()
        .unwrap_or_else(|e| panic!("bad type {s:?}: {e}"))
}

fn rand_id() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish() as u16
}

/// Parses a reply.
///
/// Panics if it is not a valid DNS message.
pub fn parse_reply(wire: &[u8]) -> Message {
    Message::from_vec(wire).unwrap_or_else(|e| panic!("reply does not parse ({e}): {wire:02x?}"))
}

/// A fresh temporary folder (removed on drop).
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// True when the tests run as root (`id -u` is 0).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs `cmd`; why it failed (cannot run, or its stderr), if it did.
fn succeeds(cmd: &mut Command) -> Result<(), String> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd.output().map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} refused: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A tmpfs of a few KiB on a folder of its own: a disk that can be filled
/// up (SQLite's `SQLITE_FULL`), for storage-failure tests. Only root can
/// mount one; unmounted (lazily) when dropped.
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Mounts a tmpfs of `kib` KiB.
    ///
    /// Errors: why it cannot be had (not root, `mount` refused): the
    /// caller skips its test, saying so.
    pub fn mount(kib: u32) -> Result<SmallDisk, String> {
        if !is_root() {
            return Err("mounting a small tmpfs needs root".into());
        }
        let dir = tempdir();
        succeeds(
            Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
                .arg(dir.path()),
        )?;
        Ok(SmallDisk { dir })
    }

    /// The mounted folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Takes every free block with a file (`filler`), so the next write
    /// that needs a new block fails with ENOSPC.
    pub fn fill(&self) {
        let mut f = std::fs::File::create(self.path().join("filler")).expect("filler");
        let block = [0u8; 4096];
        while f.write_all(&block).is_ok() {}
        let _ = f.write_all(&[0]);
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A file made read-only for everyone, root included, while it lives:
/// immutable (`chattr +i`) for root, mode 0444 for other users (whom the
/// mode binds). Restored when dropped.
pub struct ReadOnlyFile {
    path: PathBuf,
    immutable: bool,
}

impl ReadOnlyFile {
    /// Makes `path` read-only.
    ///
    /// Errors: why it cannot be done (no `chattr`, a file system without
    /// the immutable flag): the caller skips its test, saying so.
    pub fn make(path: &Path) -> Result<ReadOnlyFile, String> {
        use std::os::unix::fs::PermissionsExt;
        if !is_root() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o444))
                .map_err(|e| format!("chmod 0444: {e}"))?;
            return Ok(ReadOnlyFile {
                path: path.to_path_buf(),
                immutable: false,
            });
        }
        succeeds(Command::new("chattr").arg("+i").arg(path))?;
        Ok(ReadOnlyFile {
            path: path.to_path_buf(),
            immutable: true,
        })
    }
}

impl Drop for ReadOnlyFile {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        if self.immutable {
            let _ = Command::new("chattr").arg("-i").arg(&self.path).status();
        } else {
            let _ = std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o644));
        }
    }
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}

/// The workspace root folder.
pub fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new(env!("CARGO_MANIFEST_DIR")))
        .to_path_buf()
}

/// Creates an sqlite3 zone DB at `db` (if needed) holding zone `origin` from
/// master-file text `zone`, using the `loadzone` binary.
///
/// Panics (with loadzone's output) if loading fails.
pub fn load_zone_text(db: &Path, origin: &str, zone: &str) {
    load_zone_text_with(db, origin, zone, &[]);
}

/// [`load_zone_text`] with more `loadzone` arguments (`--keep-journal`).
pub fn load_zone_text_with(db: &Path, origin: &str, zone: &str, args: &[&str]) {
    let dir = db.parent().unwrap_or(Path::new("."));
    let file = write_file(dir, &format!("{origin}zone"), zone);
    let out = run_with_timeout(
        Command::new(binary("loadzone"))
            .arg("--db")
            .arg(db)
            .arg(origin)
            .arg(&file)
            .args(args),
        RUN_TIMEOUT,
    );
    assert!(
        out.status.success(),
        "loadzone failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Creates a file at `db` that looks like a zone DB of schema `major.minor`
/// (e.g. 1000.0, written by a "newer" program) with the 2.x tables.
pub fn make_db_with_schema_version(db: &Path, major: i64, minor: i64) {
    let conn = rusqlite::Connection::open(db).expect("create DB");
    conn.execute_batch(authd_migrations_free_schema())
        .expect("create tables");
    conn.execute(
        "INSERT INTO schema_version (version, minor) VALUES (?1, ?2)",
        rusqlite::params![major, minor],
    )
    .expect("insert version");
}

/// A minimal copy of the 2.x tables (without the crate, so the file can claim
/// any version).
fn authd_migrations_free_schema() -> &'static str {
    "CREATE TABLE schema_version (version INTEGER NOT NULL, minor INTEGER NOT NULL DEFAULT 0);
     CREATE TABLE zones (id INTEGER PRIMARY KEY, name TEXT NOT NULL COLLATE NOCASE,
        rdclass TEXT NOT NULL COLLATE NOCASE DEFAULT 'IN', dnssec BOOLEAN NOT NULL DEFAULT 0);
     CREATE TABLE records (id INTEGER PRIMARY KEY, zone_id INTEGER NOT NULL, name TEXT NOT NULL
        COLLATE NOCASE, rname TEXT NOT NULL COLLATE NOCASE, ttl INTEGER NOT NULL,
        rdtype TEXT NOT NULL COLLATE NOCASE, sigtype TEXT COLLATE NOCASE, rdata TEXT NOT NULL);"
}

/// Panics, naming the Debian package to install, unless `program arg` runs.
pub fn require_tool(program: &str, arg: &str, package: &str) {
    let ok = Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    assert!(
        ok,
        "`{program}` is required for the reference tests: apt-get install {package}"
    );
}

/// A port free on 127.0.0.1 for both UDP and TCP (for servers that cannot
/// report an ephemeral port).
pub fn free_port() -> u16 {
    for _ in 0..50 {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind UDP");
        let port = udp.local_addr().expect("addr").port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port on 127.0.0.1");
}

/// `GET path` over HTTP/1.1 (a metrics or stats endpoint); (status line, body).
///
/// Panics if it cannot connect or read the response within 5 s.
pub fn http_get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("response");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or("").to_string();
    // Chunked bodies: keep the chunks' data only.
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            out.push_str(&tail[..n]);
            rest = &tail[n + 2..];
        }
        out
    } else {
        body.to_string()
    };
    (status, body)
}

/// The value of the Prometheus sample `series` in `text` (name and labels
/// exactly as written, e.g. `authd_reloads_total{result="applied"}`), or 0.
pub fn metric_value(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap_or(0.0) as u64)
}

/// A certificate authority and a server certificate it issued, written as
/// PEM files for the TLS tests: `ca.pem`, `server.crt`, `server.key` (and
/// `other-ca.pem`, an unrelated authority, for the wrong-certificate cases).
pub struct TestPki {
    /// The authority's certificate (what `[tls] ca` and `kdig +tls-ca` take).
    pub ca: PathBuf,
    /// The server's certificate chain.
    pub cert: PathBuf,
    /// The server's private key.
    pub key: PathBuf,
    /// Another authority's certificate, which did not issue `cert`.
    pub other_ca: PathBuf,
}

/// A fresh [`TestPki`] in `dir`: the server certificate names each of
/// `names` (DNS names, or IP addresses such as `127.0.0.1`).
///
/// Panics if a certificate cannot be made.
pub fn make_pki(dir: &Path, names: &[&str]) -> TestPki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let authority = |cn: &str| {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        (Issuer::new(params, key), cert)
    };
    let (issuer, ca_cert) = authority("authd test CA");
    let (_, other_cert) = authority("another CA");
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(names).expect("server params");
    params
        .distinguished_name
        .push(DnType::CommonName, "authd test server");
    let key = KeyPair::generate().expect("server key");
    let cert = params.signed_by(&key, &issuer).expect("server certificate");
    TestPki {
        ca: write_file(dir, "ca.pem", &ca_cert.pem()),
        cert: write_file(dir, "server.crt", &cert.pem()),
        key: write_file(dir, "server.key", &key.serialize_pem()),
        other_ca: write_file(dir, "other-ca.pem", &other_cert.pem()),
    }
}

/// Waits up to `secs` for `check` to hold, trying every 200 ms; the last
/// try's result.
pub fn eventually(secs: u64, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    check()
}

/// A reference server or resolver process, killed by PID on drop.
pub struct Daemon {
    child: Child,
    name: &'static str,
    log: PathBuf,
    /// Where it answers.
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Daemon {
    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until `probe` gets a reply over TCP (bounded by [`READY_TIMEOUT`]).
    pub fn wait_ready(&mut self, probe: &QueryBuilder) {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{} exited ({status}):\n{}", self.name, self.log());
            }
            if let Ok(mut s) =
                std::net::TcpStream::connect_timeout(&self.addr, Duration::from_millis(500))
            {
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                tcp_send(&mut s, &probe.wire());
                if tcp_recv(&mut s).is_ok() {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{} did not answer within {READY_TIMEOUT:?}:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Starts `cmd` as the reference process `name` answering on `addr`, its
/// output in a log in `dir` (kept until it is dropped).
pub fn spawn_daemon(
    name: &'static str,
    cmd: &mut Command,
    dir: tempfile::TempDir,
    addr: SocketAddr,
) -> Daemon {
    let log = dir.path().join(format!("{name}.log"));
    let file = std::fs::File::create(&log).expect("log file");
    let child = cmd
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("log file"))
        .stderr(file)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
    Daemon {
        child,
        name,
        log,
        addr,
        _dir: dir,
    }
}

/// A validating Unbound on 127.0.0.1 whose only upstream is `upstream`, for
/// `stubs` (zones with their trust anchors, or "" for a zone validated from
/// its parent's DS), with its clock at `date`
/// (YYYYMMDDHHMMSS, inside the signatures' validity; `None`: the real clock). It sends from 127.0.0.1
/// only, so it can never reach an address off this machine (delegations in
/// the test zones point at documentation addresses).
pub fn start_unbound(upstream: SocketAddr, stubs: &[(&str, &str)], date: Option<&str>) -> Daemon {
    require_tool("unbound", "-V", "unbound");
    let dir = tempdir();
    let port = free_port();
    let d = dir.path().display();
    let mut conf = format!(
        "server:\n    interface: 127.0.0.1@{port}\n    port: {port}\n    do-daemonize: no\n    \
         username: \"\"\n    chroot: \"\"\n    directory: \"{d}\"\n    pidfile: \"\"\n    \
         use-syslog: no\n    logfile: \"\"\n    verbosity: 1\n    val-log-level: 2\n    \
         do-ip6: no\n    do-not-query-localhost: no\n    outgoing-interface: 127.0.0.1\n    \
         target-fetch-policy: \"0 0 0 0 0\"\n    qname-minimisation: no\n    \
         harden-referral-path: no\n    prefetch: no\n    \
         module-config: \"validator iterator\"\n    \
         access-control: 127.0.0.0/8 allow\n"
    );
    if let Some(date) = date {
        conf.push_str(&format!("    val-override-date: \"{date}\"\n"));
    }
    // An empty anchor: a stub zone validated from its parent's DS.
    for (_, anchor) in stubs.iter().filter(|(_, a)| !a.is_empty()) {
        conf.push_str(&format!("    trust-anchor: \"{anchor}\"\n"));
    }
    conf.push_str("remote-control:\n    control-enable: no\n");
    for (zone, _) in stubs {
        conf.push_str(&format!(
            "stub-zone:\n    name: \"{zone}\"\n    stub-addr: {}@{}\n",
            upstream.ip(),
            upstream.port()
        ));
    }
    let conf_path = write_file(dir.path(), "unbound.conf", &conf);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut ub = spawn_daemon(
        "unbound",
        Command::new("unbound").arg("-d").arg("-c").arg(&conf_path),
        dir,
        addr,
    );
    ub.wait_ready(&QueryBuilder::new(stubs[0].0, "SOA").rd(true));
    ub
}
