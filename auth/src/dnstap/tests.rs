use std::os::unix::net::UnixListener;

use super::*;

fn settings(output: Output) -> Settings {
    Settings {
        output,
        identity: Some("ns1".to_string()),
        version: Some("authd test".to_string()),
    }
}

fn peer() -> SocketAddr {
    SocketAddr::from(([192, 0, 2, 1], 5353))
}

/// Splits a Frame Streams file into (control type or None, payload) frames.
fn frames(mut bytes: &[u8]) -> Vec<(Option<u32>, Vec<u8>)> {
    let mut out = Vec::new();
    let word = |b: &[u8]| u32::from_be_bytes(b[..4].try_into().expect("4 bytes"));
    while !bytes.is_empty() {
        let len = word(bytes) as usize;
        if len == 0 {
            let clen = word(&bytes[4..]) as usize;
            out.push((Some(word(&bytes[8..])), bytes[8..8 + clen].to_vec()));
            bytes = &bytes[8 + clen..];
        } else {
            out.push((None, bytes[4..4 + len].to_vec()));
            bytes = &bytes[4 + len..];
        }
    }
    out
}

#[test]
fn varints_and_fields() {
    let mut v = Vec::new();
    pb_varint(&mut v, 300);
    assert_eq!(v, [0xac, 0x02]);
    let mut v = Vec::new();
    pb_fixed32_field(&mut v, 9, 1);
    assert_eq!(v, [0x4d, 1, 0, 0, 0]);
    let mut v = Vec::new();
    pb_bytes_field(&mut v, 14, b"ab");
    assert_eq!(v, [0x72, 2, b'a', b'b']);
}

#[test]
fn file_holds_start_frames_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tap.fstrm");
    let tap = Dnstap::start(&settings(Output::File(path.clone()))).expect("start");
    let now = SystemTime::now();
    tap.log(
        Transport::Udp,
        (peer(), None),
        b"query",
        now,
        Some((b"reply", now)),
    );
    tap.log(Transport::Tcp, (peer(), None), b"query", now, None);
    tap.shutdown();
    tap.shutdown();
    let bytes = std::fs::read(&path).expect("read");
    let f = frames(&bytes);
    assert_eq!(f.len(), 5, "{f:?}");
    assert_eq!(f[0].0, Some(CONTROL_START));
    assert!(f[0].1.ends_with(CONTENT_TYPE));
    assert_eq!(f[4].0, Some(CONTROL_STOP));
    // identity, version, then the message; type MESSAGE last.
    let q = &f[1].1;
    assert!(q.starts_with(b"\x0a\x03ns1\x12\x0aauthd test\x72"), "{q:?}");
    assert!(q.ends_with(&[0x78, 1]));
    // AUTH_QUERY, INET, UDP, 192.0.2.1, port 5353 … query_message "query".
    assert!(
        q.windows(14)
            .any(|w| w == b"\x08\x01\x10\x01\x18\x01\x22\x04\xc0\x00\x02\x01\x30\xe9")
    );
    assert!(q.windows(7).any(|w| w == b"\x52\x05query"));
    let r = &f[2].1;
    assert!(r.windows(2).any(|w| w == b"\x08\x02"));
    assert!(r.windows(7).any(|w| w == b"\x72\x05reply"));
    assert!(f[3].1.windows(2).any(|w| w == b"\x18\x02"), "TCP");
    assert_eq!(tap.dropped(), 0);
}

/// A reader that never answers the handshake holds the writer; a full
/// queue drops and counts instead of blocking the caller.
#[test]
fn full_queue_drops_and_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tap.sock");
    let _listener = UnixListener::bind(&path).expect("bind");
    let tap = Dnstap::start_with(&settings(Output::Socket(path)), 1).expect("start");
    let n = 1000;
    // Logging from another thread: a `log` that waited for the reader (which
    // never answers the handshake) would never finish; a bound far above any
    // machine's time for 1000 drops tells that apart without timing anything.
    let (done, finished) = std::sync::mpsc::channel();
    let logger = Arc::clone(&tap);
    std::thread::spawn(move || {
        for _ in 0..n {
            logger.log(
                Transport::Udp,
                (peer(), None),
                b"query",
                SystemTime::now(),
                None,
            );
        }
        let _ = done.send(());
    });
    finished
        .recv_timeout(Duration::from_secs(60))
        .expect("log never waits for the reader");
    assert!(tap.dropped() >= n - 2, "{}", tap.dropped());
    tap.shutdown();
}

#[test]
fn socket_handshake_and_frames() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tap.sock");
    let listener = UnixListener::bind(&path).expect("bind");
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        assert_eq!(read_control(&mut s).expect("READY"), CONTROL_READY);
        s.write_all(&control(CONTROL_ACCEPT)).expect("ACCEPT");
        assert_eq!(read_control(&mut s).expect("START"), CONTROL_START);
        let mut rest = Vec::new();
        let mut data = 0;
        loop {
            let mut len = [0u8; 4];
            s.read_exact(&mut len).expect("frame");
            let len = u32::from_be_bytes(len) as usize;
            if len == 0 {
                let mut clen = [0u8; 4];
                s.read_exact(&mut clen).expect("control");
                rest.resize(u32::from_be_bytes(clen) as usize, 0);
                s.read_exact(&mut rest).expect("control body");
                assert_eq!(rest[..4], CONTROL_STOP.to_be_bytes());
                s.write_all(&control(CONTROL_FINISH)).expect("FINISH");
                return data;
            }
            rest.resize(len, 0);
            s.read_exact(&mut rest).expect("data");
            data += 1;
        }
    });
    let tap = Dnstap::start(&settings(Output::Socket(path))).expect("start");
    let now = SystemTime::now();
    tap.log(
        Transport::Udp,
        (peer(), None),
        b"query",
        now,
        Some((b"reply", now)),
    );
    tap.shutdown();
    assert_eq!(reader.join().expect("reader"), 2);
    assert_eq!(tap.dropped(), 0);
}

#[test]
fn metrics_show_the_drop_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tap = Dnstap::start(&settings(Output::File(dir.path().join("t")))).expect("start");
    let metrics = crate::metrics::Metrics::new();
    assert!(!metrics.render().expect("render").contains("dnstap"));
    metrics.set_dnstap(Arc::clone(&tap));
    let text = metrics.render().expect("render");
    assert!(text.contains("\nauthd_dnstap_dropped_total 0\n"), "{text}");
    tap.shutdown();
}
