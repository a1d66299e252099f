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
        let bytes = std::fs::read(&path).map_err(|e| {
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
        let mut out = Vec::new();
        for s in iter {
            let s = s.map_err(bad)?;
            let header_offset = s.offset().0;
            out.push(Symbol {
                name: String::from_utf8_lossy(s.name()).into_owned(),
                header_offset,
                member: self
                    .members
                    .iter()
                    .position(|m| m.header_offset == header_offset),
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
