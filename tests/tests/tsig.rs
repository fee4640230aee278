//! End to end: TSIG (RFC 8945) on a running authd, with real clients.
//!
//! - `dig -y` and `kdig -y` verify signed answers under every algorithm, and a
//!   signed AXFR of the root zone (many messages, each signed);
//! - an unknown key is BADKEY and a wrong secret BADSIG, as both tools report
//!   them; a client whose clock is skewed (dnspython, its clock moved) gets
//!   BADTIME, whose MAC a separate HMAC computation verifies;
//! - messages an attacker makes, over real sockets: TSIG not last, two TSIGs,
//!   MACs truncated too far, a tampered question — each with its exact rcode;
//! - transfers allowed by key, refused without it or with another key, and
//!   SIGHUP applying changed keys and ACLs;
//! - NOTIFY signed for a keyed target: a dnspython secondary verifies it and
//!   answers signed, and authd verifies that answer.
//!
//! Needs `dig` (dnsutils), `kdig` (knot-dnsutils) and Python 3 with
//! dnspython (`.ci/run` installs them).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use authd::keys::{Algorithm, Key, Secret};
use authd::tsig;
use authd_tests::{
    AuthdProcess, QueryBuilder, load_zone_text, query_tcp, query_udp, run_with_timeout, tempdir,
    workspace_dir, write_file,
};

/// `tk.`: the key transfers are allowed with.
const TK: &str = "8SAbJ0JpR9OwJgRTLHX8YMi1jUUT/gzPPRd6Wp44Dg4=";

/// The `[[key]]` blocks of every test: one key per algorithm, `tk.` the one
/// in the transfer ACL.
fn key_blocks() -> String {
    [
        ("tk.", "hmac-sha256", TK),
        ("md5.", "hmac-md5", "c2VjcmV0LW1kNS1rZXk="),
        ("sha1.", "hmac-sha1", "c2VjcmV0LXNoYTEta2V5"),
        ("sha224.", "hmac-sha224", "c2VjcmV0LXNoYTIyNC1rZXk="),
        ("sha384.", "hmac-sha384", "c2VjcmV0LXNoYTM4NC1rZXk="),
        (
            "sha512.",
            "hmac-sha512",
            "c2VjcmV0LXNoYTUxMi1rZXktYmVpbmctbG9uZ2VyLXRoYW4tdGhlLWJsb2Nr",
        ),
    ]
    .iter()
    .map(|(n, a, s)| format!("[[key]]\nname = \"{n}\"\nalgorithm = \"{a}\"\nsecret = \"{s}\"\n"))
    .collect()
}

/// `dig -y`'s argument for key `name` of the blocks above.
fn y(name: &str) -> String {
    let blocks = key_blocks();
    let mut lines = blocks.lines();
    while let Some(l) = lines.next() {
        if l == format!("name = \"{name}\"") {
            let alg = lines.next().and_then(|l| l.split('"').nth(1)).expect("alg");
            let secret = lines
                .next()
                .and_then(|l| l.split('"').nth(1))
                .expect("secret");
            return format!("{alg}:{name}:{secret}");
        }
    }
    panic!("no key {name}")
}

fn example_zone() -> PathBuf {
    workspace_dir().join("examples/example.com.zone")
}

/// Starts authd with `config` (written to `dir/authd.toml`).
fn start(dir: &Path, config: &str) -> AuthdProcess {
    let path = write_file(dir, "authd.toml", config);
    AuthdProcess::start(["--config".as_ref(), path.as_os_str()])
}

/// Serves example.com. from memory (and the root zone with `root`), every
/// key known, transfers allowed with `tk.` only.
fn config(root: bool) -> String {
    let mut zones = format!(
        "{{ origin = \"example.com.\", file = \"{}\" }}",
        example_zone().display()
    );
    if root {
        zones.push_str(&format!(
            ", {{ origin = \".\", file = \"{}\" }}",
            workspace_dir().join("tests/data/root.zone").display()
        ));
    }
    format!(
        "{}[[datasource]]\ntype = \"memory\"\nzones = [{zones}]\n[transfer]\nallow = [\"key tk.\"]\n",
        key_blocks()
    )
}

/// Runs `tool ARGS @127.0.0.1 -p PORT`; stdout and stderr together.
fn run(tool: &str, addr: SocketAddr, args: &[&str]) -> String {
    let mut cmd = Command::new(tool);
    cmd.args(args)
        .arg(format!("@{}", addr.ip()))
        .args(["-p", &addr.port().to_string()]);
    let out: Output = run_with_timeout(&mut cmd, Duration::from_secs(60));
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// What dig and kdig print when a reply fails TSIG verification.
fn unverified(out: &str) -> bool {
    out.contains("Couldn't verify")
        || out.contains("could not be validated")
        || out.contains("failed to verify")
        || out.contains("expected a TSIG")
}

/// dig and kdig verify signed answers under every algorithm; an unsigned
/// query gets an unsigned answer.
#[test]
fn dig_and_kdig_verify_signed_answers() {
    let dir = tempdir();
    let authd = start(dir.path(), &config(true));
    let a = authd.addr();
    for key in ["tk.", "md5.", "sha1.", "sha224.", "sha384.", "sha512."] {
        let y = y(key);
        let out = run("dig", a, &["+norec", "-y", &y, "www.example.com", "A"]);
        assert!(
            out.contains("status: NOERROR") && out.contains("ANSWER: 2,"),
            "{key}: {out}"
        );
        assert!(
            out.contains("TSIG PSEUDOSECTION") && !unverified(&out),
            "{key}: {out}"
        );
        assert!(
            out.contains(&format!("{key}\t\t\t0\tANY\tTSIG\t")),
            "{key}: {out}"
        );
        let out = run("kdig", a, &["+norec", "-y", &y, "www.example.com", "A"]);
        assert!(
            out.contains("status: NOERROR") && out.contains("ANSWER: 2;"),
            "{key}: {out}"
        );
        assert!(
            out.contains(" NOERROR 0") && !unverified(&out),
            "kdig {key}: {out}"
        );
        // Over TCP too.
        let out = run("kdig", a, &["+tcp", "-y", &y, "example.com", "ANY"]);
        assert!(
            out.contains("status: NOERROR") && !unverified(&out),
            "kdig +tcp {key}: {out}"
        );
    }
    let out = run("dig", a, &["+norec", "www.example.com", "A"]);
    assert!(
        out.contains("status: NOERROR") && !out.contains("TSIG"),
        "{out}"
    );
    // A signed reply too big for 512 bytes (the referral to com., 501 bytes
    // unsigned without EDNS): TC (the question and the TSIG only), which dig
    // verifies, then it asks again over TCP. (ANY over UDP is one RRset
    // now, RFC 8482, so it no longer makes a big reply.)
    let out = run(
        "dig",
        a,
        &[
            "+noedns",
            "+notcp",
            "+ignore",
            "-y",
            &y("tk."),
            "www.com.",
            "A",
        ],
    );
    assert!(
        out.contains("flags: qr tc rd; QUERY: 1, ANSWER: 0, AUTHORITY: 0, ADDITIONAL: 1"),
        "{out}"
    );
    assert!(out.contains("(UDP)") && !unverified(&out), "{out}");
    let out = run(
        "dig",
        a,
        &["+noedns", "+notcp", "-y", &y("tk."), "www.com.", "A"],
    );
    assert!(
        out.contains("AUTHORITY: 13,") && out.contains("(TCP)") && !unverified(&out),
        "{out}"
    );
}

/// A signed AXFR of the root zone (21,592 RRs, many 64 KiB messages) verifies
/// message by message in dig and kdig; without the key, or with a key the
/// ACL does not name, the transfer is refused (and the refusal is signed).
#[test]
fn dig_and_kdig_verify_a_signed_multi_message_axfr() {
    let dir = tempdir();
    let authd = start(dir.path(), &config(true));
    let a = authd.addr();
    let out = run("dig", a, &["-y", &y("tk."), ".", "AXFR"]);
    assert!(
        !unverified(&out),
        "{}",
        &out[out.len().saturating_sub(2000)..]
    );
    let size = out
        .lines()
        .find_map(|l| l.strip_prefix(";; XFR size: "))
        .unwrap_or_else(|| panic!("{}", &out[out.len().saturating_sub(2000)..]));
    assert!(size.starts_with("21592 records (messages "), "{size}");
    let messages: usize = size
        .split("messages ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.parse().ok())
        .expect("message count");
    assert!(messages > 10, "{size}");
    let tsigs = out.lines().filter(|l| l.contains("\tANY\tTSIG\t")).count();
    assert_eq!(tsigs, messages, "one TSIG per message");
    let out = run("kdig", a, &["-y", &y("tk."), ".", "AXFR"]);
    assert!(
        !unverified(&out),
        "{}",
        &out[out.len().saturating_sub(2000)..]
    );
    assert!(
        out.contains(&format!("({messages} messages, 21592 records)")),
        "{}",
        &out[out.len().saturating_sub(2000)..]
    );
    // Unsigned, or signed with a key the ACL does not name: REFUSED.
    let out = run("dig", a, &["example.com", "AXFR"]);
    assert!(out.contains("; Transfer failed."), "{out}");
    let out = run("dig", a, &["-y", &y("sha1."), "example.com", "AXFR"]);
    assert!(
        out.contains("; Transfer failed.") && !unverified(&out),
        "{out}"
    );
    let out = run("kdig", a, &["-y", &y("sha1."), "example.com", "AXFR"]);
    assert!(out.contains("REFUSED") && !unverified(&out), "{out}");
    assert!(authd.wait_for_log(
        "AXFR of example.com. refused for 127.0.0.1 signed with key sha1. (not in [transfer] allow)",
        Duration::from_secs(2)
    ));
}

/// An unknown key is BADKEY and a wrong secret BADSIG (NOTAUTH, an unsigned
/// TSIG), as dig and kdig report them, for a query and for a transfer.
#[test]
fn unknown_key_and_wrong_secret_as_dig_and_kdig_report_them() {
    let dir = tempdir();
    let authd = start(dir.path(), &config(false));
    let a = authd.addr();
    let unknown = format!("hmac-sha256:nobody.:{TK}");
    let wrong = "hmac-sha256:tk.:AAAbJ0JpR9OwJgRTLHX8YMi1jUUT/gzPPRd6Wp44Dg4=";
    let wrong_alg = format!("hmac-sha512:tk.:{TK}");
    for (y, error) in [
        (unknown.as_str(), "BADKEY"),
        (wrong_alg.as_str(), "BADKEY"),
        (wrong, "BADSIG"),
    ] {
        let out = run("dig", a, &["-y", y, "www.example.com", "A"]);
        assert!(
            out.contains("status: NOTAUTH") && out.contains("ANSWER: 0,"),
            "{y}: {out}"
        );
        assert!(
            out.contains(" 300 0 ") && out.contains(&format!(" {error} 0")),
            "{y}: {out}"
        );
        assert!(out.contains("tsig indicates error"), "{y}: {out}");
        let out = run("kdig", a, &["-y", y, "www.example.com", "A"]);
        assert!(out.contains(&format!("status: {error}")), "{y}: {out}");
        let out = run("dig", a, &["-y", y, "example.com", "AXFR"]);
        assert!(
            out.contains(&format!(" {error} 0")) && out.contains("Transfer failed."),
            "{y}: {out}"
        );
        let out = run("kdig", a, &["-y", y, "example.com", "AXFR"]);
        assert!(
            out.contains(&format!("server replied with error '{error}'")),
            "{y}: {out}"
        );
    }
    assert!(authd.wait_for_log(
        "TSIG: request from 127.0.0.1 rejected: key nobody. (hmac-sha256.): BADKEY",
        Duration::from_secs(2)
    ));
    assert!(!authd.stderr().contains(TK), "no secret in the log");
}

/// `authd keygen NAME` prints a `[[key]]` block (a fresh 32-byte secret for
/// HMAC-SHA256, 64 for SHA512) that authd accepts and dig signs with; a bad
/// algorithm or name is a usage error (exit 2).
#[test]
fn keygen_prints_a_working_key_block() {
    let keygen = |args: &[&str]| {
        let out = run_with_timeout(
            Command::new(authd_tests::binary("authd"))
                .arg("keygen")
                .args(args),
            Duration::from_secs(10),
        );
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, block, _) = keygen(&["xfr-key"]);
    assert_eq!(code, Some(0));
    let lines: Vec<&str> = block.lines().collect();
    assert_eq!(
        lines[..3],
        [
            "[[key]]",
            "name = \"xfr-key.\"",
            "algorithm = \"hmac-sha256\""
        ]
    );
    let secret = lines[3]
        .strip_prefix("secret = \"")
        .and_then(|s| s.strip_suffix('"'))
        .expect("secret line");
    assert_eq!(Secret::from_base64(secret).map(|s| s.len()), Ok(32));
    assert_ne!(keygen(&["xfr-key"]).1, block, "a fresh secret each time");
    let (_, sha512, _) = keygen(&["-a", "hmac-sha512", "k2."]);
    assert!(
        sha512.contains("algorithm = \"hmac-sha512\"\nsecret = \""),
        "{sha512}"
    );
    for bad in [&["-a", "hmac-sha3", "k."][..], &["a..b"], &[]] {
        let (code, out, err) = keygen(bad);
        assert_eq!((code, out.as_str()), (Some(2), ""), "{bad:?}: {err}");
        assert!(
            err.starts_with("authd: ") && err.ends_with("(see authd --help)\n"),
            "{err}"
        );
    }
    // The block, pasted into a configuration, works with dig -y.
    let dir = tempdir();
    let authd = start(
        dir.path(),
        &format!(
            "{block}[[datasource]]\ntype = \"memory\"\nzones = [{{ origin = \"example.com.\", file = \"{}\" }}]\n",
            example_zone().display()
        ),
    );
    let out = run(
        "dig",
        authd.addr(),
        &[
            "-y",
            &format!("hmac-sha256:xfr-key.:{secret}"),
            "www.example.com",
        ],
    );
    assert!(
        out.contains("status: NOERROR") && out.contains(" NOERROR 0") && !unverified(&out),
        "{out}"
    );
}

/// The dnspython client of [`badtime_for_a_client_with_a_skewed_clock`]:
/// signs with its clock moved by argv[2] seconds, then checks the reply
/// itself (dnspython reports BADTIME before looking at the MAC, so the MAC of
/// the BADTIME reply is checked here with Python's hmac, per RFC 8945 §4.3).
const SKEWED_CLIENT: &str = r#"
import hashlib, hmac, socket, struct, sys, time
import dns.message, dns.rcode, dns.tsig, dns.tsigkeyring
port, skew = int(sys.argv[1]), int(sys.argv[2])
secret = '8SAbJ0JpR9OwJgRTLHX8YMi1jUUT/gzPPRd6Wp44Dg4='
kr = dns.tsigkeyring.from_text({'tk.': ('hmac-sha256', secret)})
real = time.time
time.time = lambda: real() + skew
q = dns.message.make_query('www.example.com.', 'A')
q.use_tsig(kr, keyname='tk.')
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
s.sendto(q.to_wire(), ('127.0.0.1', port))
reply, _ = s.recvfrom(65535)
try:
    r = dns.message.from_wire(reply, keyring=kr, request_mac=q.mac)
    print('verified', dns.rcode.to_text(r.rcode()), len(r.answer))
    sys.exit(0)
except dns.tsig.PeerBadTime:
    print('PeerBadTime')
# By hand: the TSIG record ends the message (key name uncompressed).
at = reply.rindex(b'\x02tk\x00\x00\xfa\x00\xff')
rd = at + 4 + 10
alg_end = reply.index(b'\x00', rd) + 1
alg = reply[rd:alg_end]
time_signed = int.from_bytes(reply[alg_end:alg_end + 6], 'big')
fudge, mac_len = struct.unpack('!HH', reply[alg_end + 6:alg_end + 10])
mac = reply[alg_end + 10:alg_end + 10 + mac_len]
orig_id, error, other_len = struct.unpack('!HHH', reply[alg_end + 10 + mac_len:alg_end + 16 + mac_len])
other = reply[alg_end + 16 + mac_len:]
head = bytearray(reply[:at])
head[0:2] = struct.pack('!H', orig_id)
head[10:12] = struct.pack('!H', struct.unpack('!H', reply[10:12])[0] - 1)
import base64
h = hmac.new(base64.b64decode(secret), digestmod=hashlib.sha256)
h.update(struct.pack('!H', len(q.mac)) + q.mac + bytes(head))
h.update(b'\x02tk\x00' + b'\x00\xff\x00\x00\x00\x00' + alg.lower())
h.update(time_signed.to_bytes(6, 'big') + struct.pack('!HHH', fudge, error, other_len) + other)
print('rcode', reply[3] & 0xF, 'error', error, 'mac', hmac.compare_digest(h.digest(), mac),
      'echoed', time_signed == int(time.time()), 'server', int.from_bytes(other, 'big'), 'now', int(real()))
"#;

/// A client whose clock is an hour off gets NOTAUTH, TSIG error BADTIME,
/// signed over its request MAC, its own time echoed and ours in Other Data;
/// within the fudge (290 s off) it is answered.
#[test]
fn badtime_for_a_client_with_a_skewed_clock() {
    let dir = tempdir();
    let authd = start(dir.path(), &config(false));
    let port = authd.addr().port().to_string();
    let python = |skew: &str| {
        let out = run_with_timeout(
            Command::new("python3").args(["-c", SKEWED_CLIENT, &port, skew]),
            Duration::from_secs(30),
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "python3 with dnspython: {}{text}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    assert_eq!(python("290"), "verified NOERROR 1\n");
    assert_eq!(python("-290"), "verified NOERROR 1\n");
    for skew in ["-3600", "3600"] {
        let out = python(skew);
        let words: Vec<&str> = out.split_whitespace().collect();
        assert_eq!(
            words[..9],
            [
                "PeerBadTime",
                "rcode",
                "9",
                "error",
                "18",
                "mac",
                "True",
                "echoed",
                "True"
            ],
            "skew {skew}: {out}"
        );
        let server: i64 = words[10].parse().expect("server time");
        let now: i64 = words[12].parse().expect("now");
        assert!((server - now).abs() <= 2, "skew {skew}: {out}");
    }
}

/// A query for www.example.com. A signed with `tk.`.
fn signed_query() -> Vec<u8> {
    let key = Key {
        name: "tk.".parse().expect("name"),
        algorithm: Algorithm::HmacSha256,
        secret: Secret::from_base64(TK).expect("secret"),
    };
    let mut msg = QueryBuilder::new("www.example.com.", "A").id(0x4242).wire();
    tsig::sign_request(&key, &mut msg, tsig::now());
    msg
}

/// (rcode, ANCOUNT, ARCOUNT, the TSIG error if the reply has a TSIG).
fn outcome(reply: &[u8]) -> (u8, u16, u16, Option<u16>) {
    let count = |at: usize| u16::from_be_bytes([reply[at], reply[at + 1]]);
    let error = tsig::find(reply)
        .and_then(|at| tsig::read_record(reply, at))
        .map(|r| r.error.0);
    (reply[3] & 0xF, count(6), count(10), error)
}

/// Messages an attacker makes, sent over real UDP and TCP sockets.
#[test]
fn attacker_messages_get_exact_answers() {
    let dir = tempdir();
    let authd = start(dir.path(), &config(false));
    let a = authd.addr();
    let good = signed_query();
    let tsig_at = tsig::find(&good).expect("signed");
    let record = good[tsig_at..].to_vec();
    assert_eq!(outcome(&query_udp(a, &good)), (0, 2, 1, Some(0)));
    assert_eq!(outcome(&query_tcp(a, &good)), (0, 2, 1, Some(0)));
    // A replayed copy within the fudge is answered (RFC 8945 keeps no replay
    // cache as a MUST); a tampered question is BADSIG.
    let mut tampered = good.clone();
    tampered[13] = b'W';
    assert_eq!(outcome(&query_udp(a, &tampered)), (9, 0, 1, Some(16)));
    // Not last: an OPT after the TSIG. Twice: the record repeated.
    let mut not_last = good.clone();
    not_last.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
    not_last[11] = 2;
    assert_eq!(outcome(&query_udp(a, &not_last)), (1, 0, 0, None));
    let mut twice = good.clone();
    twice.extend_from_slice(&record);
    twice[11] = 2;
    assert_eq!(outcome(&query_udp(a, &twice)), (1, 0, 0, None));
    // The TSIG in the authority section, as the only record.
    let mut authority = good.clone();
    authority[9] = 1;
    authority[11] = 0;
    assert_eq!(outcome(&query_udp(a, &authority)), (1, 0, 0, None));
    // MACs cut to 16 bytes (half of 32: allowed), 15 and 1 (FORMERR), and
    // a record cut short (FORMERR).
    for (size, want) in [
        (16usize, (0, 2, 1, Some(0))),
        (15, (1, 0, 0, None)),
        (1, (1, 0, 0, None)),
    ] {
        let msg = cut_mac(&good, tsig_at, size);
        assert_eq!(outcome(&query_udp(a, &msg)), want, "MAC of {size} bytes");
    }
    assert_eq!(
        outcome(&query_udp(a, &good[..good.len() - 3])),
        (1, 0, 0, None)
    );
}

/// `msg` with the MAC of its TSIG record (at `at`, owner `tk.`) cut to `size`.
fn cut_mac(msg: &[u8], at: usize, size: usize) -> Vec<u8> {
    let rec = tsig::read_record(msg, at).expect("record");
    let mac_at = msg.len() - 6 - rec.mac.len();
    let mut out = msg[..mac_at - 2].to_vec();
    out.extend_from_slice(&(size as u16).to_be_bytes());
    out.extend_from_slice(&rec.mac[..size]);
    out.extend_from_slice(&msg[msg.len() - 6..]);
    let rdlen_at = at + 4 + 8;
    let rdlen =
        usize::from(u16::from_be_bytes([out[rdlen_at], out[rdlen_at + 1]])) - rec.mac.len() + size;
    out[rdlen_at..rdlen_at + 2].copy_from_slice(&(rdlen as u16).to_be_bytes());
    out
}

/// Writes the config again (atomically) and sends SIGHUP; waits for reload `n`.
fn reload(authd: &AuthdProcess, dir: &Path, text: &str, n: usize) {
    let tmp = write_file(dir, "authd.toml.new", text);
    std::fs::rename(tmp, dir.join("authd.toml")).expect("replace config");
    authd.signal("HUP");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while authd.stderr().matches("zones reloaded, ").count() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "no reload {n}:\n{}",
            authd.stderr()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGHUP applies a changed secret, a new key, a removed key and changed
/// ACLs (global and per zone), both ways, without a restart.
#[test]
fn sighup_applies_changed_keys_and_acls() {
    let dir = tempdir();
    let zone = example_zone();
    let cfg = |keys: &[(&str, &str)], allow: &str, zone_allow: Option<&str>| {
        let mut text: String = keys
            .iter()
            .map(|(n, s)| {
                format!("[[key]]\nname = \"{n}\"\nalgorithm = \"hmac-sha256\"\nsecret = \"{s}\"\n")
            })
            .collect();
        text.push_str(&format!(
            "[[datasource]]\ntype = \"memory\"\nzones = [{{ origin = \"example.com.\", file = \"{}\" }}]\n\
             [transfer]\nallow = [{allow}]\n",
            zone.display()
        ));
        if let Some(z) = zone_allow {
            text.push_str(&format!(
                "[[transfer.zone]]\norigin = \"example.com.\"\nallow = [{z}]\n"
            ));
        }
        text
    };
    const NEW: &str = "bmV3LXNlY3JldC1mb3ItdGs=";
    const TK2: &str = "dGsyLXNlY3JldA==";
    let authd = start(dir.path(), &cfg(&[("tk.", TK)], "\"key tk.\"", None));
    let a = authd.addr();
    let axfr = |y: &str| run("dig", a, &["-y", y, "example.com", "AXFR"]);
    let ok = |out: &str| out.contains("XFR size: 79 records") && !unverified(out);
    let old_tk = format!("hmac-sha256:tk.:{TK}");
    let new_tk = format!("hmac-sha256:tk.:{NEW}");
    let tk2 = format!("hmac-sha256:tk2.:{TK2}");
    assert!(ok(&axfr(&old_tk)));
    assert!(axfr(&tk2).contains(" BADKEY 0"));
    // New secret for tk., a new key tk2. allowed instead of tk.
    reload(
        &authd,
        dir.path(),
        &cfg(&[("tk.", NEW), ("tk2.", TK2)], "\"key tk2.\"", None),
        1,
    );
    assert!(axfr(&old_tk).contains(" BADSIG 0"), "old secret");
    let out = axfr(&new_tk);
    assert!(
        out.contains("Transfer failed.") && !unverified(&out),
        "tk. no longer allowed: {out}"
    );
    assert!(ok(&axfr(&tk2)));
    // A per-zone list takes over: tk. for example.com., whatever the global says.
    reload(
        &authd,
        dir.path(),
        &cfg(
            &[("tk.", NEW), ("tk2.", TK2)],
            "\"key tk2.\"",
            Some("\"key tk.\""),
        ),
        2,
    );
    assert!(ok(&axfr(&new_tk)));
    assert!(axfr(&tk2).contains("Transfer failed."));
    // tk2. removed (and out of every list): BADKEY again; the address form.
    reload(
        &authd,
        dir.path(),
        &cfg(&[("tk.", NEW)], "\"127.0.0.1\"", None),
        3,
    );
    assert!(axfr(&tk2).contains(" BADKEY 0"));
    assert!(
        ok(&run("dig", a, &["example.com", "AXFR"])),
        "unsigned from 127.0.0.1"
    );
    assert!(ok(&axfr(&new_tk)), "signed from 127.0.0.1");
    // Both: address and key.
    reload(
        &authd,
        dir.path(),
        &cfg(&[("tk.", NEW)], "\"127.0.0.0/8 key tk.\"", None),
        4,
    );
    assert!(run("dig", a, &["example.com", "AXFR"]).contains("Transfer failed."));
    assert!(ok(&axfr(&new_tk)));
    reload(
        &authd,
        dir.path(),
        &cfg(&[("tk.", NEW)], "\"10.0.0.0/8 key tk.\"", None),
        5,
    );
    assert!(axfr(&new_tk).contains("Transfer failed."));
    // A reload naming an undefined key is rejected whole: the previous
    // configuration keeps serving.
    let bad = cfg(&[("tk.", NEW)], "\"key missing.\"", None);
    let tmp = write_file(dir.path(), "authd.toml.new", &bad);
    std::fs::rename(tmp, dir.path().join("authd.toml")).expect("replace config");
    authd.signal("HUP");
    assert!(authd.wait_for_log(
        "transfer.allow[0]: no [[key]] named missing. is defined",
        Duration::from_secs(10)
    ));
    assert!(axfr(&new_tk).contains("Transfer failed."));
    assert!(
        !authd.stderr().contains(NEW) && !authd.stderr().contains(TK),
        "no secret in the log"
    );
}

/// A dnspython secondary on argv[1]: for each of two NOTIFYs, verifies its
/// TSIG (from_wire raises otherwise) and answers, signed; prints what it saw.
const SECONDARY: &str = r#"
import socket, sys
import dns.message, dns.opcode, dns.tsigkeyring
kr = dns.tsigkeyring.from_text({'tk.': ('hmac-sha256', '8SAbJ0JpR9OwJgRTLHX8YMi1jUUT/gzPPRd6Wp44Dg4=')})
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('127.0.0.1', 0))
print(s.getsockname()[1], flush=True)
s.settimeout(30)
wire, peer = s.recvfrom(65535)
q = dns.message.from_wire(wire, keyring=kr)
print(dns.opcode.to_text(q.opcode()), q.question[0].name, q.had_tsig, q.keyname, q.keyalgorithm, flush=True)
s.sendto(dns.message.make_response(q).to_wire(), peer)
"#;

/// A keyed NOTIFY target gets the NOTIFY signed; the dnspython secondary
/// verifies it and answers signed, and authd verifies that answer.
#[test]
fn notify_is_signed_for_a_keyed_target() {
    use std::io::{BufRead, BufReader};
    let dir = tempdir();
    let db = dir.path().join("zones.sqlite3");
    let zone = |serial: u32| {
        format!("$TTL 300\n@ SOA ns hm {serial} 60 60 600 60\n@ NS ns\nns A 192.0.2.1\n")
    };
    load_zone_text(&db, "example.org.", &zone(1));
    let mut secondary = Command::new("python3")
        .args(["-c", SECONDARY])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("python3");
    let mut lines = BufReader::new(secondary.stdout.take().expect("stdout")).lines();
    let port = lines.next().expect("port line").expect("read");
    let authd = start(
        dir.path(),
        &format!(
            "{}[[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n[notify]\ntargets = [\"127.0.0.1:{port} key tk.\"]\n",
            key_blocks(),
            db.display()
        ),
    );
    // Let the poller learn serial 1, then change it.
    std::thread::sleep(Duration::from_millis(1500));
    load_zone_text(&db, "example.org.", &zone(2));
    let seen = lines.next().expect("NOTIFY line").expect("read");
    assert_eq!(seen, "NOTIFY example.org. True tk. hmac-sha256.");
    assert!(
        authd.wait_for_log(
            &format!("NOTIFY of example.org. serial 2 to 127.0.0.1:{port}: answered (rcode 0, try 1, signed with key tk.)"),
            Duration::from_secs(10)
        ),
        "{}",
        authd.stderr()
    );
    let _ = secondary.wait();
}
