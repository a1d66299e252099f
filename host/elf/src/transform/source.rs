//! The input side of the transform: bounded reads from the fat binary and
//! its three header tables.

use std::io::Write;
#[cfg(unix)]
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use kpack_bundle::{ReadAt, SizedFile};
use object::LittleEndian as LE;
use object::elf::{FileHeader64, ProgramHeader64, SectionHeader64};
use object::pod;

use super::{EHDR_SIZE, PHDR_SIZE, SHDR_SIZE};
use crate::error::{Error, ErrorKind};

/// The input file, read only through range-checked copies.
pub(super) struct Source<'a> {
    path: &'a Path,
    file: &'a SizedFile,
    len: u64,
}

impl<'a> Source<'a> {
    pub(super) fn new(path: &'a Path, file: &'a SizedFile) -> Source<'a> {
        Source {
            path,
            file,
            len: ReadAt::size(file),
        }
    }

    /// The input's path, for errors.
    pub(super) fn path(&self) -> &'a Path {
        self.path
    }

    /// Size of the input in bytes.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Copy the `len` bytes at `offset` to `out` with [`std::io::copy`]
    /// from the file itself: when `out` is a file too this stays in the
    /// kernel (`copy_file_range` on Linux), no pass through a buffer here.
    /// Moves the input descriptor's position, which nothing else uses
    /// (every other read is positioned).
    #[cfg(unix)]
    pub(super) fn copy_to<W: Write + ?Sized>(
        &self,
        offset: u64,
        len: u64,
        out: &mut W,
    ) -> Result<(), Error> {
        check_range(self.path, offset, len, self.len)?;
        let what = format!("copy {len:#x} bytes from input offset {offset:#x}");
        let mut file = self.file.file();
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io(self.path, &what, e))?;
        let n =
            std::io::copy(&mut file.take(len), out).map_err(|e| Error::io(self.path, &what, e))?;
        if n != len {
            return Err(Error::new(
                ErrorKind::Malformed,
                self.path,
                format!("{what}: the input ended after {n:#x} bytes"),
            ));
        }
        Ok(())
    }

    /// Copy the `len` bytes at `offset` to `out` through a bounded buffer,
    /// with positioned reads only: on Windows a positioned read moves the
    /// shared descriptor's position, and other threads read this input
    /// (the code objects) while the host image is written, so a seek and a
    /// sequential copy would read from wherever they left it.
    #[cfg(not(unix))]
    pub(super) fn copy_to<W: Write + ?Sized>(
        &self,
        offset: u64,
        len: u64,
        out: &mut W,
    ) -> Result<(), Error> {
        const CHUNK: u64 = 4 << 20;
        check_range(self.path, offset, len, self.len)?;
        let what = format!("copy {len:#x} bytes from input offset {offset:#x}");
        let mut buf = vec![0u8; CHUNK.min(len) as usize];
        let mut done = 0;
        while done < len {
            let n = CHUNK.min(len - done) as usize;
            self.file
                .read_exact_at(offset + done, &mut buf[..n])
                .map_err(|e| Error::io(self.path, &what, e))?;
            out.write_all(&buf[..n])
                .map_err(|e| Error::io(self.path, &what, e))?;
            done += n as u64;
        }
        Ok(())
    }

    /// The `len` bytes at `offset`.
    pub(super) fn read(&self, offset: u64, len: u64) -> Result<Vec<u8>, Error> {
        // Check the range before allocating: offsets and sizes come from the file.
        check_range(self.path, offset, len, self.len)?;
        let mut buf = vec![
            0u8;
            usize::try_from(len).map_err(|_| Error::new(
                ErrorKind::Malformed,
                self.path,
                "size overflow"
            ))?
        ];
        self.file
            .read_exact_at(offset, &mut buf)
            .map_err(|e| Error::io(self.path, &format!("read at {offset:#x}"), e))?;
        Ok(buf)
    }
}

/// The error a read of `[offset, offset + len)` from a `file_len`-byte
/// file gets; the plan checks ranges it reads later with the same words.
pub(super) fn check_range(path: &Path, offset: u64, len: u64, file_len: u64) -> Result<(), Error> {
    if offset.checked_add(len).is_none_or(|end| end > file_len) {
        return Err(Error::new(
            ErrorKind::Malformed,
            path,
            format!("range {offset:#x}+{len:#x} runs past the end of the file ({file_len:#x})"),
        ));
    }
    Ok(())
}

/// The ELF header and both header tables of the input, as stored.
#[derive(Clone)]
pub(super) struct Headers {
    pub(super) file: FileHeader64<LE>,
    pub(super) program: Vec<ProgramHeader64<LE>>,
    pub(super) sections: Vec<SectionHeader64<LE>>,
}

impl Headers {
    /// Read and check the headers: 64-bit entry sizes, a section header
    /// table with a usable `.shstrtab` index.
    pub(super) fn read(source: &Source<'_>) -> Result<Headers, Error> {
        let malformed = |message: &str| Error::new(ErrorKind::Malformed, source.path, message);
        let file: FileHeader64<LE> =
            *pod::from_bytes::<FileHeader64<LE>>(&source.read(0, EHDR_SIZE)?)
                .map_err(|()| malformed("bad ELF header"))?
                .0;
        let phnum = u64::from(file.e_phnum.get(LE));
        let shnum = u64::from(file.e_shnum.get(LE));
        if u64::from(file.e_phentsize.get(LE)) != PHDR_SIZE
            || u64::from(file.e_shentsize.get(LE)) != SHDR_SIZE
        {
            return Err(malformed("unexpected program or section header entry size"));
        }
        if shnum == 0 || u64::from(file.e_shstrndx.get(LE)) >= shnum {
            return Err(malformed("no usable section header table"));
        }
        let program = pod::slice_from_all_bytes::<ProgramHeader64<LE>>(
            &source.read(file.e_phoff.get(LE), phnum * PHDR_SIZE)?,
        )
        .map_err(|()| malformed("bad program header table"))?
        .to_vec();
        let sections = pod::slice_from_all_bytes::<SectionHeader64<LE>>(
            &source.read(file.e_shoff.get(LE), shnum * SHDR_SIZE)?,
        )
        .map_err(|()| malformed("bad section header table"))?
        .to_vec();
        Ok(Headers {
            file,
            program,
            sections,
        })
    }

    /// Index of `.shstrtab` (checked against the table in [`Headers::read`]).
    pub(super) fn shstrndx(&self) -> usize {
        usize::from(self.file.e_shstrndx.get(LE))
    }
}
