//! A body that stops, or trickles, fails the read instead of hanging it:
//! the per-read idle timeout and the minimum rate of [`Pace`].
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_docs,
    reason = "test code: failing loudly is the point"
)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use kpack_http::{Deadline, Error, Pace, get};

/// Serve one connection: a 200 head promising `len` bytes, then `body`
/// called with the stream until it returns; the connection stays open
/// until the client closes it.
fn serve_once(len: u64, body: impl FnOnce(&mut std::net::TcpStream) + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/a.kpack", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut req = Vec::new();
        let mut buf = [0u8; 1024];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = conn.read(&mut buf).unwrap();
            if n == 0 {
                return;
            }
            req.extend_from_slice(&buf[..n]);
        }
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n");
        conn.write_all(head.as_bytes()).unwrap();
        body(&mut conn);
        // Hold the connection until the client goes away.
        let _ = conn.read(&mut buf);
    });
    url
}

const QUICK: Pace = Pace {
    idle: Duration::from_millis(300),
    min_rate: 1 << 10,
};

#[test]
fn a_body_that_stops_fails_after_the_idle_timeout() {
    let url = serve_once(1000, |c| {
        let _ = c.write_all(b"abc");
    });
    let response = get(&url, Deadline::Start(QUICK)).unwrap().ok().unwrap();
    let mut got = Vec::new();
    let err = response
        .into_reader(1001)
        .read_to_end(&mut got)
        .unwrap_err();
    assert_eq!(got, b"abc");
    assert!(err.to_string().contains("timeout"), "{err}");
}

#[test]
fn a_body_that_trickles_fails_below_the_minimum_rate() {
    // One byte every 20 ms: never idle for 300 ms, but 50 bytes/s.
    let url = serve_once(1 << 20, |c| {
        for _ in 0..1000 {
            if c.write_all(b"x").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let response = get(&url, Deadline::Start(QUICK)).unwrap().ok().unwrap();
    let mut got = Vec::new();
    let err = response
        .into_reader(1 << 21)
        .read_to_end(&mut got)
        .unwrap_err();
    assert!(err.to_string().contains("below the minimum"), "{err}");
    assert!(got.len() < 1000, "read {} bytes", got.len());
}

#[test]
fn a_long_body_names_its_limit() {
    let url = serve_once(8, |c| {
        let _ = c.write_all(b"abcdefgh");
    });
    let response = get(&url, Deadline::Whole).unwrap();
    let err = response.read_to_vec(3).unwrap_err();
    assert!(matches!(err, Error::TooLong { limit: 3, .. }), "{err}");
    assert!(err.to_string().ends_with("longer than 3 bytes"), "{err}");
}
