//! Artifact archives' compressions: which one a file is (by its first
//! bytes), its streaming decoder, and the names archives carry.

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
    /// The codec of the regular file at `path`, from its first bytes, or
    /// `None` for anything else (a directory, a plain file).
    pub fn sniff(path: &Path) -> Option<Codec> {
        let meta = std::fs::metadata(path).ok()?;
        if !meta.is_file() {
            return None;
        }
        let mut head = [0u8; 6];
        let mut f = std::fs::File::open(path).ok()?;
        f.read_exact(&mut head).ok()?;
        if head[..4] == [0x28, 0xb5, 0x2f, 0xfd] {
            Some(Codec::Zstd)
        } else if head == [0xfd, b'7', b'z', b'X', b'Z', 0] {
            Some(Codec::Xz)
        } else if head[..2] == [0x1f, 0x8b] {
            Some(Codec::Gzip)
        } else {
            None
        }
    }

    /// A streaming decoder of `file`, decompressing on a thread of its own
    /// ahead of the reader (see [`ReadAhead`]).
    pub(crate) fn decoder(self, file: std::fs::File) -> std::io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(ReadAhead::start(self.decoder_here(file)?)?))
    }

    /// A streaming decoder of `file` on the reading thread.
    fn decoder_here(self, file: std::fs::File) -> std::io::Result<Box<dyn Read + Send>> {
        let file = std::io::BufReader::with_capacity(1 << 20, file);
        Ok(match self {
            Codec::Zstd => {
                let mut d = zstd::stream::read::Decoder::with_buffer(file)?;
                // TheRock's level-19 archives may use long windows.
                d.window_log_max(31)?;
                Box::new(d)
            }
            Codec::Xz => Box::new(liblzma::read::XzDecoder::new(file)),
            Codec::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(file)),
        })
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
/// first error (handed on to the reader), or when the reader is dropped.
pub(crate) struct ReadAhead {
    pieces: std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>,
    piece: Vec<u8>,
    at: usize,
    done: bool,
}

impl ReadAhead {
    /// Start reading `source` ahead.
    pub fn start(mut source: Box<dyn Read + Send>) -> std::io::Result<ReadAhead> {
        let (tx, pieces) = std::sync::mpsc::sync_channel(PIECES_AHEAD);
        std::thread::Builder::new()
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
            pieces,
            piece: Vec::new(),
            at: 0,
            done: false,
        })
    }
}

impl Read for ReadAhead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.piece.len() {
            if self.done {
                return Ok(0);
            }
            match self.pieces.recv() {
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
