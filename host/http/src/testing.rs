//! A loopback HTTP/1.1 server for tests, of this crate and of the crates
//! that use it (the `test-server` feature, which only dev-dependencies
//! turn on, so no release build holds it).

use std::io::{BufRead, BufReader, Write};

/// Start a server on 127.0.0.1 answering every request with
/// `answer(path)` (a status line and any headers, then the body) and
/// return its base URL, `http://127.0.0.1:<port>/`. It answers one
/// connection at a time, each closed after one response, on a thread of
/// its own until the process ends.
pub fn serve(
    answer: impl Fn(&str) -> (String, Vec<u8>) + Send + 'static,
) -> std::io::Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/", listener.local_addr()?);
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let Ok(read_half) = stream.try_clone() else {
                continue;
            };
            let mut reader = BufReader::new(read_half);
            let mut request = String::new();
            let _ = reader.read_line(&mut request);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            let path = request.split(' ').nth(1).unwrap_or("/").to_string();
            let (head, body) = answer(&path);
            let _ = write!(
                stream,
                "HTTP/1.1 {head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(&body);
        }
    });
    Ok(url)
}
