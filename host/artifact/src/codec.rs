//! Artifact archives' compressions: which one a file is (by its first
//! bytes), its streaming decoder with the limits every untrusted archive
//! is read under, and the names archives carry.

use std::io::Read;
use std::path::Path;

/// The compression of an artifact archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// `.tar.zst` (TheRock's default).
    Zstd,
    /// `.tar.xz`.
    Xz,
    /// `.tar.gz`.
    Gzip,
}

/// The file-name suffixes of artifact archives, longest first.
const SUFFIXES: [&str; 4] = [".tar.zst", ".tar.xz", ".tar.gz", ".tgz"];

/// An artifact archive's name without its suffix (`blas_lib_gfx1100` of
/// `blas_lib_gfx1100.tar.zst`), or `None` when it has none of them.
pub fn artifact_archive_stem(name: &str) -> Option<&str> {
    SUFFIXES.iter().find_map(|s| name.strip_suffix(s))
}

impl Codec {
    /// The codec of the regular file at `path`, from its first bytes (the
    /// front door's [`kpack_binary::Compression`]), or `None` for anything
    /// else (a directory, a plain file).
    pub fn sniff(path: &Path) -> Option<Codec> {
        let meta = std::fs::metadata(path).ok()?;
        if !meta.is_file() {
            return None;
        }
        let mut head = Vec::with_capacity(6);
        std::fs::File::open(path)
            .ok()?
            .take(6)
            .read_to_end(&mut head)
            .ok()?;
        Some(match kpack_binary::Compression::detect(&head)? {
            kpack_binary::Compression::Zstd => Codec::Zstd,
            kpack_binary::Compression::Xz => Codec::Xz,
            kpack_binary::Compression::Gzip => Codec::Gzip,
        })
    }

    /// A streaming decoder of `file`, decompressing on a thread of its own
    /// ahead of the reader (see [`ReadAhead`]), that stops with an
    /// [`OverLimit`] error once the archive inflates past `limits`.
    pub(crate) fn decoder(
        self,
        file: std::fs::File,
        limits: &Limits,
    ) -> std::io::Result<Box<dyn Read + Send>> {
        let size = file.metadata()?.len();
        let inner = self.decoder_here(file, limits)?;
        let capped = Capped {
            inner,
            left: limits.budget(size),
            limits: *limits,
            size,
        };
        Ok(Box::new(ReadAhead::start(Box::new(capped))?))
    }

    /// A streaming decoder of `file` on the reading thread.
    fn decoder_here(
        self,
        file: std::fs::File,
        limits: &Limits,
    ) -> std::io::Result<Box<dyn Read + Send>> {
        let file = std::io::BufReader::with_capacity(1 << 20, file);
        Ok(match self {
            Codec::Zstd => {
                let mut d = zstd::stream::read::Decoder::with_buffer(file)?;
                // A frame asking for a larger window fails to decode
                // rather than taking that much memory.
                d.window_log_max(limits.window_log_max)?;
                Box::new(d)
            }
            Codec::Xz => Box::new(liblzma::read::XzDecoder::new(file)),
            Codec::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(file)),
        })
    }
}

/// Limits on what reading an artifact archive may inflate and allocate,
/// so a small crafted archive cannot fill the disk or the memory: the
/// same shape as the wheel reader's (a ratio to the file's size with a
/// floor, and a total), plus the zstd window the memory budget allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes the archive may inflate to (default 64 GiB).
    pub max_unpacked_size: u64,
    /// Most the archive may inflate per byte of the file (default 50:
    /// TheRock's archives inflate 3 to 10 times; a kernel database's text
    /// somewhat more). Archives up to [`Limits::RATIO_FLOOR`] unpacked are
    /// never refused for it.
    pub max_ratio: u64,
    /// The largest zstd window accepted, as a power of two (default 27:
    /// 128 MiB, what `zstd --long` writes; TheRock's archives use 8 MiB).
    pub window_log_max: u32,
}

impl Limits {
    /// An archive may always inflate to this much, whatever its ratio.
    pub const RATIO_FLOOR: u64 = 64 << 20;

    /// The limits for a run whose memory budget is `budget` bytes: the
    /// decoder's window may take at most half of it (2^27 for the default
    /// 256 MiB budget), between 2^20 and zstd's own ceiling of 2^31.
    pub fn for_memory(budget: u64) -> Limits {
        let half = (budget / 2).max(1);
        let log = (63 - half.leading_zeros()).clamp(20, 31);
        Limits {
            window_log_max: log,
            ..Limits::default()
        }
    }

    /// Most bytes a file of `bytes` bytes may inflate to.
    pub fn budget(&self, bytes: u64) -> u64 {
        self.max_ratio
            .saturating_mul(bytes)
            .max(Self::RATIO_FLOOR)
            .min(self.max_unpacked_size)
    }

    /// The limits with the total raised to `max` and the ratio lifted:
    /// raising the total is how a user says "this archive is really that
    /// big" (`--max-unpacked-size`).
    pub fn with_max_unpacked_size(self, max: u64) -> Limits {
        Limits {
            max_unpacked_size: max,
            max_ratio: u64::MAX,
            ..self
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_unpacked_size: 64 << 30,
            max_ratio: 50,
            window_log_max: 27,
        }
    }
}

/// The error an archive's decoder stops with once it inflates past its
/// [`Limits`] (the cause of an I/O error, turned into
/// [`crate::ErrorKind::TooLarge`]).
#[derive(Debug, thiserror::Error)]
#[error(
    "the archive inflates past {budget} bytes ({what}); if it really is that big, pass --max-unpacked-size"
)]
pub struct OverLimit {
    budget: u64,
    what: String,
}

/// A decoder that counts what it gives out and fails past its budget.
struct Capped {
    inner: Box<dyn Read + Send>,
    left: u64,
    limits: Limits,
    size: u64,
}

impl Read for Capped {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > self.left {
            let budget = self.limits.budget(self.size);
            let what = if budget == self.limits.max_unpacked_size {
                "the most any archive may".to_string()
            } else {
                format!("{}x its {} bytes", self.limits.max_ratio, self.size)
            };
            return Err(std::io::Error::other(OverLimit { budget, what }));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Bytes read ahead per piece.
const PIECE: usize = 1 << 20;
/// Pieces read ahead at most.
const PIECES_AHEAD: usize = 4;

/// A reader that reads its source on a thread of its own, a few pieces
/// ahead: decompressing an archive overlaps what is done with its bytes
/// (on two cores, unpacking a large archive is limited by the one thread
/// decompressing it). The thread ends at the end of the source, at its
/// first error (handed on to the reader), or when the reader is dropped,
/// which waits for it (at most the piece it is reading): no thread
/// outlives its reader.
pub(crate) struct ReadAhead {
    pieces: Option<std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    piece: Vec<u8>,
    at: usize,
    done: bool,
}

impl ReadAhead {
    /// Start reading `source` ahead.
    pub fn start(mut source: Box<dyn Read + Send>) -> std::io::Result<ReadAhead> {
        let (tx, pieces) = std::sync::mpsc::sync_channel(PIECES_AHEAD);
        let thread = std::thread::Builder::new()
            .name("kpack-read-ahead".into())
            .spawn(move || {
                loop {
                    let mut piece = vec![0u8; PIECE];
                    let r = fill(&mut source, &mut piece).map(|n| {
                        piece.truncate(n);
                        piece
                    });
                    let last = !matches!(&r, Ok(p) if !p.is_empty());
                    if tx.send(r).is_err() || last {
                        break;
                    }
                }
            })?;
        Ok(ReadAhead {
            pieces: Some(pieces),
            thread: Some(thread),
            piece: Vec::new(),
            at: 0,
            done: false,
        })
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        // The thread's next send fails and it ends.
        self.pieces.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Read for ReadAhead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.piece.len() {
            if self.done {
                return Ok(0);
            }
            let Some(pieces) = &self.pieces else {
                return Ok(0);
            };
            match pieces.recv() {
                Ok(Ok(p)) if !p.is_empty() => {
                    self.piece = p;
                    self.at = 0;
                }
                Ok(Ok(_)) | Err(_) => self.done = true,
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
            }
        }
        let n = buf.len().min(self.piece.len() - self.at);
        buf[..n].copy_from_slice(&self.piece[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Read into `buf` until it is full or the source ends; returns the count.
fn fill(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_ahead_gives_every_byte_in_order() {
        let data: Vec<u8> = (0..(3 * PIECE + 12345)).map(|i| (i % 251) as u8).collect();
        let src: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(data.clone()));
        let mut r = ReadAhead::start(src).unwrap();
        let mut got = Vec::new();
        let mut small = [0u8; 777];
        loop {
            let n = r.read(&mut small).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&small[..n]);
        }
        assert_eq!(got, data);
    }

    #[test]
    fn stems_drop_the_archive_suffix() {
        assert_eq!(
            artifact_archive_stem("blas_lib_gfx1100.tar.zst"),
            Some("blas_lib_gfx1100")
        );
        assert_eq!(artifact_archive_stem("a_b_c.tar.xz"), Some("a_b_c"));
        assert_eq!(artifact_archive_stem("a_b.tgz"), Some("a_b"));
        assert_eq!(artifact_archive_stem("blas_lib_gfx1100"), None);
    }

    #[test]
    fn a_reader_dropped_early_ends_its_thread() {
        // An endless source: the thread stops only because the reader went.
        struct Counting(std::sync::Arc<std::sync::atomic::AtomicUsize>);
        impl Read for Counting {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                buf.fill(7);
                Ok(buf.len())
            }
        }
        let reads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut r = ReadAhead::start(Box::new(Counting(reads.clone()))).unwrap();
        let mut first = [0u8; 16];
        r.read_exact(&mut first).unwrap();
        drop(r);
        let after = reads.load(std::sync::atomic::Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(
            reads.load(std::sync::atomic::Ordering::SeqCst),
            after,
            "still reading"
        );
    }

    #[test]
    fn read_ahead_hands_on_the_error() {
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("bad block"))
            }
        }
        let mut r = ReadAhead::start(Box::new(Broken)).unwrap();
        let e = r.read(&mut [0u8; 8]).unwrap_err();
        assert_eq!(e.to_string(), "bad block");
        assert_eq!(r.read(&mut [0u8; 8]).unwrap(), 0);
    }
}
