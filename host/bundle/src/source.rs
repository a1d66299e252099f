//! Positioned reads, so a 1 GB section is never loaded whole.

use std::fs::File;
use std::io;

/// Bytes that can be read at any offset: a file, or memory.
pub trait ReadAt: Sync {
    /// Total length in bytes.
    fn size(&self) -> u64;
    /// Fill `buf` from `offset`; a short read is an `UnexpectedEof` error.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
}

impl ReadAt for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| eof())?;
        let end = start.checked_add(buf.len()).ok_or_else(eof)?;
        let src = self.get(start..end).ok_or_else(eof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// A borrowed buffer (an entry handed on by [`crate::Item::stream_entries`]).
impl ReadAt for &[u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (**self).read_exact_at(offset, buf)
    }
}

impl ReadAt for Vec<u8> {
    fn size(&self) -> u64 {
        self.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.as_slice().read_exact_at(offset, buf)
    }
}

impl ReadAt for File {
    fn size(&self) -> u64 {
        self.metadata().map(|m| m.len()).unwrap_or(0)
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        file_read_exact_at(self, offset, buf)
    }
}

/// A file together with its length, read once.
pub struct SizedFile {
    file: File,
    len: u64,
}

impl SizedFile {
    /// Open `path` read-only.
    pub fn open(path: &std::path::Path) -> io::Result<SizedFile> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(SizedFile { file, len })
    }

    /// The underlying file. Reads through [`ReadAt`] are positioned (on
    /// Windows they also move its position), so a single-threaded caller
    /// may seek it and read on from there (the ELF transform does, to copy
    /// ranges file to file).
    pub fn file(&self) -> &File {
        &self.file
    }
}

impl ReadAt for SizedFile {
    fn size(&self) -> u64 {
        self.len
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|end| end > self.len)
        {
            return Err(eof());
        }
        file_read_exact_at(&self.file, offset, buf)
    }
}

/// `buf.len()` bytes of `file` at `offset`: `pread` on Unix; on Windows
/// `ReadFile` at an offset, which also moves the file's position.
#[cfg(unix)]
fn file_read_exact_at(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// `buf.len()` bytes of `file` at `offset`: `pread` on Unix; on Windows
/// `ReadFile` at an offset, which also moves the file's position.
#[cfg(windows)]
fn file_read_exact_at(file: &File, mut offset: u64, mut buf: &mut [u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset) {
            Ok(0) => return Err(eof()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn eof() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "past the end of the input")
}

/// Read `len` bytes at `offset` into a new buffer.
pub(crate) fn read_vec(src: &dyn ReadAt, offset: u64, len: u64) -> Result<Vec<u8>, crate::Error> {
    let end = offset.checked_add(len);
    if end.is_none_or(|e| e > src.size()) {
        return Err(crate::Error::at(
            crate::ErrorKind::Truncated,
            offset,
            format!("{len} bytes needed, input is {} bytes long", src.size()),
        ));
    }
    let n = usize::try_from(len).map_err(|_| {
        crate::Error::at(
            crate::ErrorKind::BadRange,
            offset,
            "size does not fit in memory",
        )
    })?;
    let mut buf = vec![0u8; n];
    src.read_exact_at(offset, &mut buf)
        .map_err(|e| crate::Error::io(offset, e))?;
    Ok(buf)
}

/// Copy `len` bytes at `offset` to `out` in bounded chunks.
pub(crate) fn copy_range(
    src: &dyn ReadAt,
    offset: u64,
    len: u64,
    out: &mut dyn io::Write,
) -> Result<(), crate::Error> {
    const CHUNK: u64 = 4 << 20;
    let mut buf = vec![0u8; CHUNK.min(len) as usize];
    let mut done = 0;
    while done < len {
        let n = CHUNK.min(len - done) as usize;
        src.read_exact_at(offset + done, &mut buf[..n])
            .map_err(|e| crate::Error::io(offset + done, e))?;
        out.write_all(&buf[..n])
            .map_err(|e| crate::Error::io(offset + done, e))?;
        done += n as u64;
    }
    Ok(())
}
