//! kpack's one HTTP(S) client, used by `kpack fetch` and the handler
//! registry: blocking, rustls with webpki roots (no OpenSSL), a user agent
//! naming kpack, timeouts, bodies read up to a limit, and redirects
//! followed only within the origin (scheme, host and port) asked for, so
//! what an index names is what is read.
//!
//! ```no_run
//! let response = kpack_http::get("https://example.com/kpack-index.json", kpack_http::Deadline::Whole)?;
//! let bytes = response.ok()?.read_to_vec(16 << 20)?;
//! # Ok::<(), kpack_http::Error>(())
//! ```

#[cfg(feature = "test-server")]
#[doc(hidden)]
pub mod testing;
mod url;

use std::io::Read;
use std::time::{Duration, Instant};

pub use url::{join_url, origin};

/// Connecting, and waiting for a response (or, for [`Deadline::Whole`],
/// the whole request).
pub const TIMEOUT: Duration = Duration::from_secs(60);
/// Redirects followed for one request (each within the requested origin).
pub const MAX_REDIRECTS: usize = 5;
/// The largest JSON document (an index listing, a registry index file)
/// read whole.
pub const MAX_DOCUMENT_BYTES: u64 = 16 << 20;
/// The `User-Agent` of every request.
pub const USER_AGENT: &str = concat!("kpack/", env!("CARGO_PKG_VERSION"));

/// How long a request may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// [`TIMEOUT`] for the whole request, body included: for small
    /// documents (listings, registry indexes, handlers).
    Whole,
    /// [`TIMEOUT`] to connect and to get the response's head; the body may
    /// take as long as it needs (large archives on a slow link) as long as
    /// it keeps the [`Pace`].
    Start(Pace),
}

/// How slowly a body read through [`Response::into_reader`] may arrive:
/// no read may wait longer than `idle` for a byte, and each stretch of
/// `idle` must bring at least `min_rate` bytes a second on average (so one
/// byte a second never passes for progress).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// The longest wait for any byte of the body.
    pub idle: Duration,
    /// The slowest average rate, in bytes a second, over each `idle`.
    pub min_rate: u64,
}

impl Pace {
    /// [`TIMEOUT`] without a byte, or less than 1 KiB/s over [`TIMEOUT`].
    pub const DEFAULT: Pace = Pace {
        idle: TIMEOUT,
        min_rate: 1 << 10,
    };
}

impl Default for Pace {
    fn default() -> Pace {
        Pace::DEFAULT
    }
}

/// What went wrong; each message names the URL.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request could not be made or answered.
    #[error("{url}: request failed")]
    Request {
        /// The URL requested (after any redirects).
        url: String,
        /// The cause.
        source: Box<ureq::Error>,
    },
    /// A redirect without a `Location`.
    #[error("{url}: HTTP status {status} without a Location")]
    NoLocation {
        /// The URL asked for.
        url: String,
        /// The redirect's status.
        status: u16,
    },
    /// A redirect to another origin, not followed.
    #[error("{url}: redirected to {to}, on another origin; refusing to follow it")]
    CrossOrigin {
        /// The URL asked for.
        url: String,
        /// Where it redirected to (at most 64 characters of it).
        to: String,
    },
    /// More than [`MAX_REDIRECTS`] redirects.
    #[error("{url}: more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects {
        /// The URL asked for.
        url: String,
    },
    /// A status other than 200 where only 200 will do ([`Response::ok`]).
    #[error("{url}: HTTP status {status}")]
    Status {
        /// The URL asked for.
        url: String,
        /// The status.
        status: u16,
    },
    /// The body is longer than the limit.
    #[error("{url}: the body is longer than {limit} bytes")]
    TooLong {
        /// The URL asked for.
        url: String,
        /// The limit.
        limit: u64,
    },
    /// The body could not be read whole (a timeout, a dropped connection).
    #[error("{url}: cannot read the body")]
    Body {
        /// The URL asked for.
        url: String,
        /// The cause.
        source: Box<ureq::Error>,
    },
}

/// A response: its status, and its body to read.
pub struct Response {
    url: String,
    inner: ureq::http::Response<ureq::Body>,
    pace: Option<Pace>,
}

impl Response {
    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.inner.status().as_u16()
    }

    /// The response when its status is 200, else [`Error::Status`].
    pub fn ok(self) -> Result<Response, Error> {
        match self.status() {
            200 => Ok(self),
            status => Err(Error::Status {
                url: self.url,
                status,
            }),
        }
    }

    /// The whole body, at most `limit` bytes (more is an error).
    pub fn read_to_vec(mut self, limit: u64) -> Result<Vec<u8>, Error> {
        let url = self.url;
        self.inner
            .body_mut()
            .with_config()
            .limit(limit)
            .read_to_vec()
            .map_err(|e| match e {
                ureq::Error::BodyExceedsLimit(_) => Error::TooLong { url, limit },
                e => Error::Body {
                    url,
                    source: Box::new(e),
                },
            })
    }

    /// A reader of the body that fails after `limit` bytes, and (for a
    /// [`Deadline::Start`] request) when the body falls below its
    /// [`Pace`].
    pub fn into_reader(self, limit: u64) -> impl Read + Send + 'static {
        Paced {
            inner: self
                .inner
                .into_body()
                .into_with_config()
                .limit(limit)
                .reader(),
            pace: self.pace,
            since: Instant::now(),
            bytes: 0,
        }
    }
}

/// A body reader that fails when a [`Pace`] window brings too few bytes.
/// (A read that waits too long is failed by the agent's per-read timeout.)
struct Paced<R> {
    inner: R,
    pace: Option<Pace>,
    /// When the current window began.
    since: Instant,
    /// Bytes read in the current window.
    bytes: u64,
}

impl<R: Read> Read for Paced<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let Some(pace) = self.pace else {
            return Ok(n);
        };
        self.bytes = self.bytes.saturating_add(n as u64);
        let elapsed = self.since.elapsed();
        if n > 0 && elapsed >= pace.idle {
            let needed = (pace.min_rate as f64 * elapsed.as_secs_f64()) as u64;
            if self.bytes < needed {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "the body arrived at {} bytes/s over {:.0} s, below the minimum of {} bytes/s",
                        (self.bytes as f64 / elapsed.as_secs_f64()) as u64,
                        elapsed.as_secs_f64(),
                        pace.min_rate
                    ),
                ));
            }
            self.since = Instant::now();
            self.bytes = 0;
        }
        Ok(n)
    }
}

/// GET `url`, following redirects within its origin; the response of any
/// status is returned (see [`Response::ok`]).
pub fn get(url: &str, deadline: Deadline) -> Result<Response, Error> {
    let agent = agent(deadline);
    let mut current = url.to_string();
    for _ in 0..=MAX_REDIRECTS {
        let response = agent.get(&current).call().map_err(|e| Error::Request {
            url: current.clone(),
            source: Box::new(e),
        })?;
        if !response.status().is_redirection() {
            return Ok(Response {
                url: url.to_string(),
                inner: response,
                pace: match deadline {
                    Deadline::Whole => None,
                    Deadline::Start(pace) => Some(pace),
                },
            });
        }
        current = next_hop(url, &current, &response)?;
    }
    Err(Error::TooManyRedirects {
        url: url.to_string(),
    })
}

/// Where the redirect `response` to a request for `current` (first asked
/// as `url`) leads, refused when that is on another origin than `url`.
fn next_hop(
    url: &str,
    current: &str,
    response: &ureq::http::Response<ureq::Body>,
) -> Result<String, Error> {
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| Error::NoLocation {
            url: url.to_string(),
            status: response.status().as_u16(),
        })?;
    let next = join_url(current, location);
    if origin(&next) != origin(url) {
        return Err(Error::CrossOrigin {
            url: url.to_string(),
            to: cut(&next).to_string(),
        });
    }
    Ok(next)
}

/// The agent: rustls, no automatic redirects (followed by [`get`]),
/// statuses as responses, kpack's user agent, the timeouts of `deadline`.
fn agent(deadline: Deadline) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .user_agent(USER_AGENT);
    let config = match deadline {
        Deadline::Whole => config.timeout_global(Some(TIMEOUT)),
        Deadline::Start(pace) => config
            .timeout_connect(Some(TIMEOUT))
            .timeout_recv_response(Some(TIMEOUT))
            .timeout_per_read(Some(pace.idle)),
    };
    config.build().into()
}

/// At most the first 64 characters of an untrusted string, for messages.
fn cut(s: &str) -> &str {
    s.char_indices().nth(64).map_or(s, |(i, _)| &s[..i])
}
