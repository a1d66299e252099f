//! Static archives (`.a`): members and the symbol table, read with
//! `object`'s archive reader (GNU and BSD formats, 64-bit symbol tables,
//! thin archives).
//!
//! **Thin archives** hold only headers; a member's name is the path of its
//! file, relative to the directory of the archive (absolute if the archive
//! was made from absolute paths). [`Member::thin_path`] resolves it the way
//! `ld` and `llvm-ar` do: relative to the archive's directory, `..` allowed
//! (`llvm-ar rcT lib/x.a obj/y.o` legitimately stores `../obj/y.o`). Reading
//! is not confined to the archive's directory: a thin archive is a list of
//! the caller's own build outputs, and confining it would refuse archives
//! that linkers accept. Nothing here ever writes through such a path.
//! A member file whose size differs from its header is an error (a stale
//! thin archive), as are nested archives, which are not followed.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use object::read::archive::{ArchiveFile, ArchiveKind};

use crate::error::{Error, ErrorKind};

/// GNU / BSD archive magic.
pub const AR_MAGIC: &[u8; 8] = b"!<arch>\n";
/// Thin archive magic.
pub const THIN_MAGIC: &[u8; 8] = b"!<thin>\n";

/// The archive's dialect, as told by its special members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArchiveFormat {
    /// No symbol table or name table to tell.
    Unknown,
    /// GNU / System V, 32-bit symbol table.
    Gnu,
    /// GNU with a 64-bit symbol table (`/SYM64/`).
    Gnu64,
    /// BSD (`__.SYMDEF`, `#1/` names).
    Bsd,
    /// BSD with a 64-bit symbol table (Darwin).
    Bsd64,
    /// Windows COFF import/static library.
    Coff,
    /// AIX big archive.
    AixBig,
}

/// A symbol-table entry: a global symbol and the member defining it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Symbol {
    /// Symbol name (lossy UTF-8).
    pub name: String,
    /// Archive offset of the member's header.
    pub header_offset: u64,
    /// Position of that member in [`Archive::members`], if one starts there.
    pub member: Option<usize>,
}

/// One member of an archive.
#[derive(Debug, Clone)]
pub struct Member<'data> {
    name: &'data [u8],
    header_offset: u64,
    data_offset: u64,
    size: u64,
    thin: bool,
    data: &'data [u8],
}

impl<'data> Member<'data> {
    /// The name as stored (for thin archives, a path).
    pub fn name_bytes(&self) -> &'data [u8] {
        self.name
    }

    /// The name, lossy UTF-8.
    pub fn name(&self) -> Cow<'data, str> {
        String::from_utf8_lossy(self.name)
    }

    /// Archive offset of the member's header.
    pub fn header_offset(&self) -> u64 {
        self.header_offset
    }

    /// Archive offset of the member's bytes (0 for a thin member).
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Size from the member header.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// `true` when the bytes live in a separate file.
    pub fn is_thin(&self) -> bool {
        self.thin
    }

    /// The member's bytes in the archive (empty for a thin member).
    pub fn data(&self) -> &'data [u8] {
        self.data
    }

    /// Where a thin member's file is, for an archive in `archive_dir`.
    pub fn thin_path(&self, archive_dir: &Path) -> PathBuf {
        archive_dir.join(path_from_bytes(self.name))
    }

    /// The member's bytes: borrowed from the archive, or read from the
    /// thin member's file beside an archive in `archive_dir`.
    pub fn contents(&self, archive_dir: &Path) -> Result<Cow<'data, [u8]>, Error> {
        if !self.thin {
            return Ok(Cow::Borrowed(self.data));
        }
        let path = self.thin_path(archive_dir);
        let bytes = read_regular(&path, self.size).map_err(|e| {
            Error::with_source(
                ErrorKind::Io,
                format!(
                    "thin archive member `{}`: cannot read {}",
                    self.name(),
                    path.display()
                ),
                e,
            )
        })?;
        if bytes.len() as u64 != self.size {
            return Err(Error::new(
                ErrorKind::Malformed,
                format!(
                    "thin archive member `{}`: {} is {:#x} bytes, the archive header says {:#x} (stale archive?)",
                    self.name(),
                    path.display(),
                    bytes.len(),
                    self.size
                ),
            ));
        }
        Ok(Cow::Owned(bytes))
    }
}

/// The bytes of the regular file at `path`, at most one more than
/// `expected` (enough to tell that it is longer). Anything else (a FIFO,
/// which would block; a device such as `/dev/zero`, which never ends; a
/// directory) is refused before a byte is read.
fn read_regular(path: &Path, expected: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len().min(expected)).unwrap_or(0));
    file.take(expected.saturating_add(1))
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(unix)]
fn path_from_bytes(b: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(b))
}

#[cfg(not(unix))]
fn path_from_bytes(b: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(b).into_owned())
}

/// A parsed static archive.
#[derive(Debug)]
pub struct Archive<'data> {
    data: &'data [u8],
    file: ArchiveFile<'data>,
    members: Vec<Member<'data>>,
}

/// `true` if `head` starts with a (thin) archive magic.
pub fn is_archive(head: &[u8]) -> bool {
    head.starts_with(AR_MAGIC) || head.starts_with(THIN_MAGIC)
}

impl<'data> Archive<'data> {
    /// Parse the archive and its member headers.
    pub fn parse(data: &'data [u8]) -> Result<Archive<'data>, Error> {
        let file = ArchiveFile::parse(data).map_err(|e| {
            Error::with_source(ErrorKind::Malformed, "not a readable static archive", e)
        })?;
        let mut members = Vec::new();
        let base = data.as_ptr() as usize;
        for (i, m) in file.members().enumerate() {
            let m = m.map_err(|e| {
                let after = members
                    .last()
                    .map(|p: &Member<'_>| {
                        format!(" (after `{}` at {:#x})", p.name(), p.header_offset)
                    })
                    .unwrap_or_default();
                Error::with_source(
                    ErrorKind::Malformed,
                    format!("archive member {i}{after} is malformed"),
                    e,
                )
            })?;
            // The header is a reference into `data`; its address gives the
            // offset the symbol table uses.
            let header_offset = match (m.header(), m.aix_header()) {
                (Some(h), _) => (h as *const _ as usize).wrapping_sub(base) as u64,
                (None, Some(h)) => (h as *const _ as usize).wrapping_sub(base) as u64,
                (None, None) => 0,
            };
            let (data_offset, size) = m.file_range();
            let member_data = m.data(data).map_err(|e| {
                Error::with_source(
                    ErrorKind::Truncated,
                    format!(
                        "archive member `{}` at {header_offset:#x}: {size:#x} bytes at {data_offset:#x} run past the archive's {:#x}",
                        String::from_utf8_lossy(m.name()),
                        data.len()
                    ),
                    e,
                )
            })?;
            members.push(Member {
                name: m.name(),
                header_offset,
                data_offset: if m.is_thin() { 0 } else { data_offset },
                size,
                thin: m.is_thin(),
                data: member_data,
            });
        }
        Ok(Archive {
            data,
            file,
            members,
        })
    }

    /// The dialect.
    pub fn format(&self) -> ArchiveFormat {
        match self.file.kind() {
            ArchiveKind::Gnu => ArchiveFormat::Gnu,
            ArchiveKind::Gnu64 => ArchiveFormat::Gnu64,
            ArchiveKind::Bsd => ArchiveFormat::Bsd,
            ArchiveKind::Bsd64 => ArchiveFormat::Bsd64,
            ArchiveKind::Coff => ArchiveFormat::Coff,
            ArchiveKind::AixBig => ArchiveFormat::AixBig,
            _ => ArchiveFormat::Unknown,
        }
    }

    /// `true` for a thin archive (`!<thin>`).
    pub fn is_thin(&self) -> bool {
        self.file.is_thin()
    }

    /// The members in archive order (special members excluded).
    pub fn members(&self) -> &[Member<'data>] {
        &self.members
    }

    /// The symbol table in its order; empty when the archive has none.
    pub fn symbols(&self) -> Result<Vec<Symbol>, Error> {
        let bad = |e| Error::with_source(ErrorKind::Malformed, "archive symbol table", e);
        let Some(iter) = self.file.symbols().map_err(bad)? else {
            return Ok(Vec::new());
        };
        // Members by header offset, built once: a symbol table names a
        // member per symbol, and archives have many of both.
        let mut by_offset = std::collections::HashMap::with_capacity(self.members.len());
        for (i, m) in self.members.iter().enumerate() {
            by_offset.entry(m.header_offset).or_insert(i);
        }
        let mut out = Vec::new();
        for s in iter {
            let s = s.map_err(bad)?;
            let header_offset = s.offset().0;
            out.push(Symbol {
                name: String::from_utf8_lossy(s.name()).into_owned(),
                header_offset,
                member: by_offset.get(&header_offset).copied(),
            });
        }
        Ok(out)
    }

    /// The archive bytes.
    pub fn data(&self) -> &'data [u8] {
        self.data
    }
}

/// What a member's first bytes say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemberKind {
    /// An ELF file (its device code: [`DeviceCode`](crate::DeviceCode)).
    Elf,
    /// LLVM bitcode (`-flto` host objects; embedded offloading in
    /// bitcode is not read).
    Bitcode,
    /// A bare OffloadBinary.
    OffloadBinary,
    /// A nested archive (not followed).
    Archive,
    /// Anything else.
    Other,
}

impl MemberKind {
    /// Classify by magic.
    pub fn of(head: &[u8]) -> MemberKind {
        if head.starts_with(b"\x7fELF") {
            MemberKind::Elf
        } else if head.starts_with(b"BC\xc0\xde") || head.starts_with(&[0xde, 0xc0, 0x17, 0x0b]) {
            MemberKind::Bitcode
        } else if head.starts_with(&crate::MAGIC) {
            MemberKind::OffloadBinary
        } else if is_archive(head) {
            MemberKind::Archive
        } else {
            MemberKind::Other
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An archive member header (60 bytes).
    fn header(name: &str, size: usize) -> String {
        format!("{name:<16}{:<12}{:<6}{:<6}{:<8}{size:<10}`\n", 0, 0, 0, 644)
    }

    /// A thin archive with one member, the file at `path`, `size` bytes.
    fn thin_archive(path: &str, size: usize) -> Vec<u8> {
        let names = format!("{path}/\n");
        let mut out = String::from("!<thin>\n");
        out += &header("//", names.len());
        out += &names;
        if out.len() % 2 == 1 {
            out.push('\n');
        }
        out += &header("/0", size);
        out.into_bytes()
    }

    fn read_thin(path: &Path, size: usize) -> Result<Vec<u8>, Error> {
        let data = thin_archive(path.to_str().unwrap(), size);
        let archive = Archive::parse(&data).unwrap();
        assert!(archive.is_thin());
        let m = &archive.members()[0];
        m.contents(Path::new("/")).map(Cow::into_owned)
    }

    #[test]
    fn thin_members_are_read_only_from_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.o");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(read_thin(&file, 10).unwrap(), b"0123456789");
        let stale = read_thin(&file, 4).unwrap_err();
        assert_eq!(stale.kind(), ErrorKind::Malformed);
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        for path in [
            Path::new("/dev/null"),
            Path::new("/dev/zero"),
            dir.path(),
            &fifo,
        ] {
            let e = read_thin(path, 10).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Io, "{}", path.display());
            let chain = format!("{e}: {}", std::error::Error::source(&e).unwrap());
            assert!(chain.contains("not a regular file"), "{chain}");
        }
    }

    #[test]
    fn symbols_of_a_large_archive_find_their_members_through_one_index() {
        // 200,000 members and as many symbols: looking each symbol's member
        // up by scanning the members would take 2e10 comparisons (minutes).
        let n = 200_000usize;
        let names: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
        let table_len = 4 + 4 * n + names.iter().map(|s| s.len() + 1).sum::<usize>();
        let table_len = table_len + table_len % 2;
        let first = 8 + 60 + table_len;
        let offsets: Vec<usize> = (0..n).map(|i| first + i * 62).collect();
        let mut out = b"!<arch>\n".to_vec();
        out.extend(header("/", table_len).as_bytes());
        out.extend((n as u32).to_be_bytes());
        for &o in offsets.iter().rev() {
            out.extend((o as u32).to_be_bytes());
        }
        for s in &names {
            out.extend(s.as_bytes());
            out.push(0);
        }
        out.resize(first, 0);
        for i in 0..n {
            out.extend(header(&format!("m{i}.o/"), 2).as_bytes());
            out.extend(b"xx");
        }
        let archive = Archive::parse(&out).unwrap();
        let symbols = archive.symbols().unwrap();
        assert_eq!((archive.members().len(), symbols.len()), (n, n));
        assert_eq!(symbols[0].member, Some(n - 1));
        assert_eq!(symbols[n - 1].member, Some(0));
        assert_eq!(symbols[7].header_offset, offsets[n - 8] as u64);
    }
}
