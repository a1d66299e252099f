//! `kpack prune` for link inputs: relocatable objects and static archives
//! keep only the chosen GPU targets.
//!
//! - In an object, every `SHT_LLVM_OFFLOADING` section loses the entries
//!   the caller does not keep (a binary left with none is dropped, an
//!   untouched one is copied byte for byte, the others are rewritten with
//!   [`write_binary`] in their own version and compression), and every
//!   `.hip_fatbin` bundle is rewritten by [`kpack_bundle::prune_item`] at
//!   its offset. The sections shrink: a relocatable object has no program
//!   headers, so the sections after them move down (each keeping its
//!   alignment) and the section header table follows.
//! - In an archive, every ELF member with device code is pruned that way,
//!   every other member is copied, and the symbol table (GNU, GNU 64-bit or
//!   BSD) gets the members' new header offsets: pruning changes no host
//!   symbol, so the table keeps its names and size. Thin archives are
//!   refused: their members are files of their own, to be pruned one by
//!   one.

use std::borrow::Cow;
use std::collections::BTreeMap;

use object::read::elf::{FileHeader, Rela as _, SectionHeader as _, Sym as _};
use object::{Endianness, FileKind};

use crate::archive::{AR_MAGIC, Archive, ArchiveFormat, MemberKind};
use crate::binary::{ALIGNMENT, CompressionFormat, ReadOptions, align_up};
use crate::elf::{DeviceCode, FATBIN_SECTION};
use crate::error::{Error, ErrorKind};
use crate::write::{Compression, WriteOptions, write_binary};

/// Triples whose entries are GPU code that `keep` decides on; entries for
/// any other triple (a host image, another vendor) are always kept.
const AMDGPU_TRIPLE_PREFIX: &str = "amdgcn";

/// Fixed levels for a recompressed v3 binary, so output is deterministic.
const ZSTD_LEVEL: i32 = 9;
const ZLIB_LEVEL: u32 = 9;

/// What one prune did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PruneReport {
    /// Input size in bytes.
    pub input_size: u64,
    /// Output size in bytes.
    pub output_size: u64,
    /// Sections rewritten (`.llvm.offloading` and `.hip_fatbin`).
    pub sections: usize,
    /// OffloadBinary entries and bundle entries dropped.
    pub entries_dropped: usize,
    /// Archive members rewritten (0 for an object).
    pub members: usize,
}

/// The GPU targets (`gfx942`, `gfx90a:xnack+`, ...) of an object's device
/// code, sorted and deduplicated: the `arch` of every AMDGPU OffloadBinary
/// entry and the target of every device entry of a `.hip_fatbin` bundle.
pub fn targets(code: &DeviceCode<'_>) -> Vec<String> {
    let mut out: Vec<String> = code
        .offloading
        .iter()
        .flat_map(|s| s.binaries.iter())
        .flat_map(|b| b.entries().iter())
        .filter(|e| is_gpu(e.triple()))
        .filter_map(|e| e.arch().map(str::to_owned))
        .collect();
    if let Some(f) = &code.fatbin {
        out.extend(
            f.bundles
                .iter()
                .flat_map(|b| b.entries.iter())
                .filter(|e| !e.id.is_host())
                .filter_map(|e| e.id.target().map(|t| t.to_string())),
        );
    }
    out.sort();
    out.dedup();
    out
}

fn is_gpu(triple: Option<&str>) -> bool {
    triple.is_some_and(|t| t.starts_with(AMDGPU_TRIPLE_PREFIX))
}

/// The GPU targets of an object or a static archive (every member), as
/// [`targets`] lists them; a thin archive's members are not read.
pub fn device_targets(data: &[u8]) -> Result<Vec<String>, Error> {
    if crate::archive::is_archive(data) {
        let archive = parse_not_thin(data)?;
        let mut out = Vec::new();
        for m in archive.members() {
            if MemberKind::of(m.data()) == MemberKind::Elf {
                let code = DeviceCode::parse(m.data(), &ReadOptions::default()).map_err(|e| {
                    e.context(format!(
                        "archive member `{}` at {:#x}",
                        m.name(),
                        m.header_offset()
                    ))
                })?;
                out.extend(targets(&code));
            }
        }
        out.sort();
        out.dedup();
        return Ok(out);
    }
    Ok(targets(&DeviceCode::parse(data, &ReadOptions::default())?))
}

/// The relocatable ELF object `data` with only the GPU targets `keep`
/// accepts (called with target ids such as `gfx90a:xnack+`).
pub fn prune_object(
    data: &[u8],
    keep: &dyn Fn(&str) -> bool,
    budget: &kpack_bundle::MemoryBudget,
) -> Result<(Vec<u8>, PruneReport), Error> {
    let code = DeviceCode::parse(data, &ReadOptions::default())?;
    if code.elf_type != object::elf::ET_REL {
        return Err(Error::new(
            ErrorKind::Malformed,
            format!(
                "ELF type {} is not a relocatable object (ET_REL); linked binaries are pruned by kpack-elf",
                code.elf_type
            ),
        ));
    }
    let mut report = PruneReport {
        input_size: data.len() as u64,
        ..PruneReport::default()
    };
    let mut replacements = BTreeMap::new();
    for section in &code.offloading {
        if let Some(out) = prune_section(data, section, keep, &mut report)? {
            replacements.insert(section.index, (section.name.clone(), out));
        }
    }
    if let Some(fatbin) = &code.fatbin
        && let Some(out) = prune_fatbin(fatbin, keep, budget, &mut report)?
    {
        replacements.insert(fatbin.index, (FATBIN_SECTION.to_string(), out));
    }
    report.sections = replacements.len();
    let out = if replacements.is_empty() {
        data.to_vec()
    } else {
        rewrite_sections(data, &replacements)?
    };
    report.output_size = out.len() as u64;
    Ok((out, report))
}

/// The new bytes of one `SHT_LLVM_OFFLOADING` section keeping the entries
/// `keep` accepts, or `None` when every binary is kept whole.
fn prune_section(
    data: &[u8],
    section: &crate::elf::OffloadingSection<'_>,
    keep: &dyn Fn(&str) -> bool,
    report: &mut PruneReport,
) -> Result<Option<Vec<u8>>, Error> {
    let bytes = usize::try_from(section.offset)
        .ok()
        .and_then(|o| data.get(o..o.checked_add(usize::try_from(section.size).ok()?)?))
        .unwrap_or_default();
    let mut out = Vec::with_capacity(bytes.len());
    let mut changed = false;
    for bin in &section.binaries {
        let kept: Vec<_> = bin
            .entries()
            .iter()
            .filter(|e| !is_gpu(e.triple()) || e.arch().is_some_and(keep))
            .collect();
        report.entries_dropped += bin.entries().len() - kept.len();
        if kept.len() == bin.entries().len() {
            // Untouched: the original bytes, so a kept binary is
            // byte-identical whatever writer produced it.
            let start = bin.offset() as usize;
            let end = bytes.len().min(start.saturating_add(bin.size() as usize));
            out.extend_from_slice(bytes.get(start..end).unwrap_or_default());
            out.resize(align_up(out.len() as u64) as usize, 0);
            continue;
        }
        changed = true;
        if !kept.is_empty() {
            out.extend(rewrite_binary(bin, &kept)?);
        }
    }
    Ok(changed.then_some(out))
}

/// `bin` written again with only the entries `kept`, in its own version
/// and compression.
fn rewrite_binary(
    bin: &crate::binary::Binary<'_>,
    kept: &[&crate::binary::Entry<'_>],
) -> Result<Vec<u8>, Error> {
    let images: Vec<_> = kept.iter().map(|e| e.to_image()).collect();
    let options = WriteOptions {
        version: bin.version(),
        compression: bin.compression().map(|c| match c {
            CompressionFormat::Zstd => Compression::Zstd(ZSTD_LEVEL),
            CompressionFormat::Zlib => Compression::Zlib(ZLIB_LEVEL),
        }),
    };
    let written = if bin.version() == 1 {
        // Version 1 holds one image, so a v1 binary with several
        // (not what LLVM writes, but readable) becomes several.
        let mut all = Vec::new();
        for img in images {
            all.extend(write_binary(&[img], &options)?);
        }
        all
    } else {
        write_binary(&images, &options)?
    };
    debug_assert_eq!(written.len() as u64 % ALIGNMENT, 0);
    Ok(written)
}

/// The new bytes of `.hip_fatbin` with every bundle keeping only the
/// device entries `keep` accepts, or `None` when no bundle changes.
fn prune_fatbin(
    fatbin: &crate::elf::FatbinSection<'_>,
    keep: &dyn Fn(&str) -> bool,
    budget: &kpack_bundle::MemoryBudget,
    report: &mut PruneReport,
) -> Result<Option<Vec<u8>>, Error> {
    let mut out = Vec::new();
    let mut changed = false;
    // Bundles are pruned one at a time, under the run's budget.
    for (i, item) in fatbin.bundles.iter().enumerate() {
        let device = item.entries.iter().filter(|e| !e.id.is_host()).count();
        let kept_device = item
            .entries
            .iter()
            .filter(|e| !e.id.is_host())
            .filter(|e| e.id.target().is_some_and(|t| keep(&t.to_string())))
            .count();
        let at = item.offset as usize;
        if out.len() < at {
            out.resize(at, 0);
        }
        out.truncate(at);
        if kept_device == device {
            let end = at.saturating_add(usize::try_from(item.len).unwrap_or(usize::MAX));
            out.extend_from_slice(fatbin.data.get(at..end).unwrap_or_default());
            continue;
        }
        changed = true;
        report.entries_dropped += device - kept_device;
        let bytes = kpack_bundle::prune_item(
            item,
            &crate::elf::Bytes(fatbin.data),
            &|id: &kpack_bundle::EntryId| id.target().is_some_and(|t| keep(&t.to_string())),
            budget,
        )
        .map_err(|e| {
            Error::with_source(
                ErrorKind::Bundle,
                format!(
                    "{FATBIN_SECTION} bundle {i} at file offset {:#x}",
                    fatbin.offset + item.offset
                ),
                e,
            )
        })?;
        out.extend(bytes);
    }
    Ok(changed.then_some(out))
}

/// The static archive `data` with every member's device code pruned as
/// [`prune_object`] does.
pub fn prune_archive(
    data: &[u8],
    keep: &dyn Fn(&str) -> bool,
    budget: &kpack_bundle::MemoryBudget,
) -> Result<(Vec<u8>, PruneReport), Error> {
    let archive = parse_not_thin(data)?;
    let format = archive.format();
    let members = archive.members();
    let mut report = PruneReport {
        input_size: data.len() as u64,
        ..PruneReport::default()
    };
    let Some(first) = members.first() else {
        report.output_size = data.len() as u64;
        return Ok((data.to_vec(), report));
    };
    let malformed = |m: String| Error::new(ErrorKind::Malformed, m);
    // Everything before the first member (magic, symbol table, long-name
    // table) is copied, then patched with the new member offsets.
    let prefix_len = usize::try_from(first.header_offset())
        .ok()
        .filter(|&p| p >= AR_MAGIC.len() && p <= data.len())
        .ok_or_else(|| malformed(format!("first member at {:#x}", first.header_offset())))?;
    let mut out = data[..prefix_len].to_vec();
    let mut moved = BTreeMap::new();
    for m in members {
        let header = m.header_offset() as usize;
        let data_at = m.data_offset() as usize;
        if header < prefix_len || data_at < header + 60 || data_at > data.len() {
            return Err(malformed(format!(
                "archive member `{}` at {header:#x}: header out of order",
                m.name()
            )));
        }
        moved.insert(m.header_offset(), out.len() as u64);
        let mut bytes = Cow::Borrowed(m.data());
        if MemberKind::of(m.data()) == MemberKind::Elf {
            let code = DeviceCode::parse(m.data(), &ReadOptions::default())
                .map_err(|e| e.context(format!("archive member `{}` at {header:#x}", m.name())))?;
            if !code.is_empty() {
                let (pruned, r) = prune_object(m.data(), keep, budget).map_err(|e| {
                    e.context(format!("archive member `{}` at {header:#x}", m.name()))
                })?;
                if r.sections > 0 {
                    report.members += 1;
                    report.sections += r.sections;
                    report.entries_dropped += r.entries_dropped;
                    bytes = Cow::Owned(pruned);
                }
            }
        }
        // The header and, for a BSD `#1/N` name, the name bytes before the
        // data, with the size field rewritten.
        let mut head = data[header..data_at].to_vec();
        let size = (data_at - header - 60) + bytes.len();
        let field = format!("{size:<10}");
        if field.len() != 10 {
            return Err(Error::new(
                ErrorKind::Unrepresentable,
                format!("archive member `{}`: {size} bytes", m.name()),
            ));
        }
        head[48..58].copy_from_slice(field.as_bytes());
        out.extend_from_slice(&head);
        out.extend_from_slice(&bytes);
        if out.len() % 2 == 1 {
            out.push(b'\n');
        }
    }
    patch_symbol_table(&mut out, format, &moved)?;
    report.output_size = out.len() as u64;
    Ok((out, report))
}

/// The archive `data`, refused when thin: a thin archive's members are
/// files of their own, which prune does not write through.
fn parse_not_thin(data: &[u8]) -> Result<Archive<'_>, Error> {
    let archive = Archive::parse(data)?;
    if archive.is_thin() {
        return Err(Error::new(
            ErrorKind::Unrepresentable,
            "thin archive: its members are separate files; prune each member object instead",
        ));
    }
    Ok(archive)
}

/// Rewrite the member offsets of the archive's symbol table (the first
/// special member) through `moved` (old header offset → new one).
fn patch_symbol_table(
    out: &mut [u8],
    format: ArchiveFormat,
    moved: &BTreeMap<u64, u64>,
) -> Result<(), Error> {
    let start = AR_MAGIC.len();
    let Some(header) = out.get(start..start + 60) else {
        return Ok(());
    };
    let name = header[..16].to_vec();
    let size: usize = std::str::from_utf8(&header[48..58])
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let body = start + 60;
    let table = SymbolTable {
        body,
        end: body.checked_add(size).filter(|&e| e <= out.len()),
        moved,
    };
    match format {
        ArchiveFormat::Gnu | ArchiveFormat::Gnu64
            if name.starts_with(b"/ ") || name.starts_with(b"/SYM64/") =>
        {
            table.patch_gnu(out, if name.starts_with(b"/SYM64/") { 8 } else { 4 })
        }
        ArchiveFormat::Bsd if name.starts_with(b"__.SYMDEF") || name.starts_with(b"#1/") => {
            // A `#1/N` name sits at the start of the body.
            let name_len: usize = if name.starts_with(b"#1/") {
                std::str::from_utf8(&name[3..])
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                    .ok_or_else(|| table.bad("bad name length"))?
            } else {
                0
            };
            table.patch_bsd(out, name_len)
        }
        ArchiveFormat::Unknown => Ok(()),
        ArchiveFormat::Gnu | ArchiveFormat::Gnu64 | ArchiveFormat::Bsd => Ok(()),
        other => Err(Error::new(
            ErrorKind::Unrepresentable,
            format!("{other:?} archives are not rewritten (GNU and BSD only)"),
        )),
    }
}

/// An archive's symbol table: where its body starts and ends, and where
/// each member moved.
struct SymbolTable<'a> {
    body: usize,
    /// The end of the body, if it lies within the archive.
    end: Option<usize>,
    moved: &'a BTreeMap<u64, u64>,
}

impl SymbolTable<'_> {
    fn bad(&self, what: &str) -> Error {
        Error::new(
            ErrorKind::Malformed,
            format!("archive symbol table at {:#x}: {what}", AR_MAGIC.len()),
        )
    }

    fn lookup(&self, old: u64) -> Result<u64, Error> {
        self.moved.get(&old).copied().ok_or_else(|| {
            Error::new(
                ErrorKind::Malformed,
                format!("archive symbol table names a member at {old:#x}, where none starts"),
            )
        })
    }

    /// GNU: a big-endian count, then that many member offsets of `width` bytes.
    fn patch_gnu(&self, out: &mut [u8], width: usize) -> Result<(), Error> {
        let end = self.end.ok_or_else(|| self.bad("runs past the archive"))?;
        let count = read_be(out, self.body, width).ok_or_else(|| self.bad("no count"))?;
        let table_end = (count as usize)
            .checked_add(1)
            .and_then(|n| n.checked_mul(width))
            .and_then(|n| n.checked_add(self.body))
            .filter(|&e| e <= end)
            .ok_or_else(|| self.bad("count runs past the table"))?;
        for at in (self.body + width..table_end).step_by(width) {
            let old = read_be(out, at, width).ok_or_else(|| self.bad("truncated"))?;
            write_be(out, at, width, self.lookup(old)?);
        }
        Ok(())
    }

    /// BSD: after `name_len` bytes of name, a little-endian byte count of
    /// the ranlib array, whose 8-byte records end in a member offset.
    fn patch_bsd(&self, out: &mut [u8], name_len: usize) -> Result<(), Error> {
        let end = self.end.ok_or_else(|| self.bad("runs past the archive"))?;
        let table = self.body + name_len;
        let ranlib_bytes = read_le32(out, table).ok_or_else(|| self.bad("no size"))? as usize;
        let ranlib_end = table
            .checked_add(4)
            .and_then(|t| t.checked_add(ranlib_bytes))
            .filter(|&e| e <= end)
            .ok_or_else(|| self.bad("ranlib array runs past the table"))?;
        for at in (table + 4..ranlib_end).step_by(8) {
            let old = read_le32(out, at + 4).ok_or_else(|| self.bad("truncated"))?;
            let new = u32::try_from(self.lookup(u64::from(old))?)
                .map_err(|_| self.bad("member offset over 4 GiB"))?;
            out[at + 4..at + 8].copy_from_slice(&new.to_le_bytes());
        }
        Ok(())
    }
}

fn read_be(b: &[u8], at: usize, width: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(width)?)?;
    Some(s.iter().fold(0u64, |v, &x| (v << 8) | u64::from(x)))
}

fn write_be(b: &mut [u8], at: usize, width: usize, v: u64) {
    for i in 0..width {
        b[at + i] = (v >> (8 * (width - 1 - i))) as u8;
    }
}

fn read_le32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Replace the contents of some sections of a relocatable object
/// (`index` → (name, new bytes)) and lay the file out again: bytes before
/// the first replaced section stay where they are, every later section and
/// the section header table move down to the next offset their alignment
/// allows, and the headers are patched to match.
pub(crate) fn rewrite_sections(
    data: &[u8],
    replacements: &BTreeMap<usize, (String, Vec<u8>)>,
) -> Result<Vec<u8>, Error> {
    // `object` reads ELF structures in place; parse an aligned copy when
    // the input (an archive member) is not aligned.
    let aligned: Cow<'_, [u8]> = if data.as_ptr().align_offset(8) == 0 {
        Cow::Borrowed(data)
    } else {
        Cow::Owned(data.to_vec())
    };
    match FileKind::parse(&*aligned) {
        Ok(FileKind::Elf64) => {
            rewrite::<object::elf::FileHeader64<Endianness>>(&aligned, replacements, 64)
        }
        Ok(FileKind::Elf32) => {
            rewrite::<object::elf::FileHeader32<Endianness>>(&aligned, replacements, 32)
        }
        _ => Err(Error::new(ErrorKind::Malformed, "not an ELF file")),
    }
}

/// One piece of the file that has to be placed: a section's bytes or the
/// section header table.
struct Block {
    /// Section index, or `None` for the section header table.
    section: Option<usize>,
    old: u64,
    old_len: u64,
    align: u64,
}

fn rewrite<Elf: FileHeader<Endian = Endianness>>(
    data: &[u8],
    replacements: &BTreeMap<usize, (String, Vec<u8>)>,
    bits: u32,
) -> Result<Vec<u8>, Error> {
    let header = Elf::parse(data).map_err(|e| obj_error("ELF header", e))?;
    let endian = header.endian().map_err(|e| obj_error("ELF header", e))?;
    if header.e_type(endian) != object::elf::ET_REL || header.e_phnum(endian) != 0 {
        return Err(malformed(
            "only relocatable objects without program headers can have sections resized".into(),
        ));
    }
    let table = header
        .sections(endian, data)
        .map_err(|e| obj_error("section header table", e))?;
    check_references::<Elf>(data, endian, &table, replacements)?;
    let blocks = blocks::<Elf>(data, header, endian, &table, bits)?;
    let ehsize = header.e_ehsize(endian) as usize;
    let (mut out, new_offsets, new_shoff) =
        lay_out(data, ehsize, table.len(), &blocks, replacements);
    let layout = HeaderLayout {
        big: matches!(endian, Endianness::Big),
        bits,
        shoff: new_shoff,
        shentsize: u64::from(header.e_shentsize(endian)),
    };
    for (i, sh) in table.iter().enumerate() {
        let old_size: u64 = sh.sh_size(endian).into();
        let size = replacements
            .get(&i)
            .map_or(old_size, |(_, bytes)| bytes.len() as u64);
        layout.patch(
            &mut out,
            i,
            new_offsets[i],
            (size != old_size).then_some(size),
        );
    }
    layout.patch_shoff(&mut out);
    Ok(out)
}

fn malformed(m: String) -> Error {
    Error::new(ErrorKind::Malformed, m)
}

fn obj_error(what: &str, e: object::read::Error) -> Error {
    Error::with_source(ErrorKind::Malformed, what.to_string(), e)
}

/// Nothing may point into bytes a replaced section no longer has: no
/// relocation section may apply to one, and no relocation or symbol may
/// point past its new size.
fn check_references<Elf: FileHeader<Endian = Endianness>>(
    data: &[u8],
    endian: Endianness,
    table: &object::read::elf::SectionTable<'_, Elf>,
    replacements: &BTreeMap<usize, (String, Vec<u8>)>,
) -> Result<(), Error> {
    let symbols = table
        .symbols(endian, data, object::elf::SHT_SYMTAB)
        .map_err(|e| obj_error("symbol table", e))?;
    for (i, sh) in table.iter().enumerate() {
        let rels = sh.sh_type(endian) == object::elf::SHT_REL
            || sh.sh_type(endian) == object::elf::SHT_RELA;
        if rels {
            let target = sh.sh_info(endian) as usize;
            if let Some((name, _)) = replacements.get(&target) {
                return Err(malformed(format!(
                    "section {name} (index {target}) has relocations (section {i}); it cannot be rewritten"
                )));
            }
        }
        let Some((relas, _)) = sh
            .rela(endian, data)
            .map_err(|e| obj_error("relocations", e))?
        else {
            continue;
        };
        for r in relas {
            let sym = r.r_sym(endian, false) as usize;
            let Ok(s) = symbols.symbol(object::SymbolIndex(sym)) else {
                continue;
            };
            let shndx = s.st_shndx(endian) as usize;
            if let Some((name, bytes)) = replacements.get(&shndx) {
                let value: u64 = s.st_value(endian).into();
                let addend: i64 = r.r_addend(endian).into();
                let at = i128::from(value) + i128::from(addend);
                if at < 0 || at > bytes.len() as i128 {
                    return Err(malformed(format!(
                        "a relocation in section {i} points at offset {at:#x} of {name}, past its new size {:#x}",
                        bytes.len()
                    )));
                }
            }
        }
    }
    for s in symbols.iter() {
        let shndx = s.st_shndx(endian) as usize;
        if let Some((name, bytes)) = replacements.get(&shndx) {
            let value: u64 = s.st_value(endian).into();
            if value > bytes.len() as u64 {
                return Err(malformed(format!(
                    "a symbol points at offset {value:#x} of {name}, past its new size {:#x}",
                    bytes.len()
                )));
            }
        }
    }
    Ok(())
}

/// Every section with file bytes and the section header table, in file
/// order, checked not to overlap and to lie within the file.
fn blocks<Elf: FileHeader<Endian = Endianness>>(
    data: &[u8],
    header: &Elf,
    endian: Endianness,
    table: &object::read::elf::SectionTable<'_, Elf>,
    bits: u32,
) -> Result<Vec<Block>, Error> {
    let mut blocks = Vec::new();
    for (i, sh) in table.iter().enumerate().skip(1) {
        if sh.sh_type(endian) == object::elf::SHT_NOBITS {
            continue;
        }
        let (off, size) = sh
            .file_range(endian)
            .unwrap_or((sh.sh_offset(endian).into(), 0));
        blocks.push(Block {
            section: Some(i),
            old: off,
            old_len: size,
            align: sh.sh_addralign(endian).into().max(1),
        });
    }
    blocks.push(Block {
        section: None,
        old: header.e_shoff(endian).into(),
        old_len: table.len() as u64 * u64::from(header.e_shentsize(endian)),
        align: u64::from(bits / 8),
    });
    blocks.sort_by_key(|b| (b.old, b.old_len, b.section));
    let mut end = u64::from(header.e_ehsize(endian));
    for b in &blocks {
        if b.old < end && b.old_len > 0 {
            return Err(malformed(format!(
                "section {} at {:#x} overlaps the bytes before it (up to {end:#x})",
                b.section.map_or("header table".into(), |i| i.to_string()),
                b.old
            )));
        }
        if !b.align.is_power_of_two() {
            return Err(malformed(format!(
                "section {} alignment {:#x} is not a power of two",
                b.section.unwrap_or(0),
                b.align
            )));
        }
        end = end.max(b.old + b.old_len);
    }
    if end > data.len() as u64 {
        return Err(malformed(format!(
            "sections run to {end:#x}, past the end of the file ({:#x})",
            data.len()
        )));
    }
    Ok(blocks)
}

/// The file with `blocks` placed: the bytes before the first replaced
/// section as they are, then every block at the next offset its alignment
/// allows. Returns the bytes, each section's new offset and the section
/// header table's.
fn lay_out(
    data: &[u8],
    ehsize: usize,
    sections: usize,
    blocks: &[Block],
    replacements: &BTreeMap<usize, (String, Vec<u8>)>,
) -> (Vec<u8>, Vec<Option<u64>>, u64) {
    let mut out = Vec::with_capacity(data.len());
    let mut new_offsets = vec![None; sections];
    let mut new_shoff = 0;
    let mut shifted = false;
    let mut cursor = ehsize;
    out.extend_from_slice(&data[..cursor]);
    for b in blocks {
        let old = b.old as usize;
        let new = if shifted {
            align_to(out.len() as u64, b.align) as usize
        } else {
            // Nothing has moved yet: keep the original bytes in between.
            if old > cursor {
                out.extend_from_slice(&data[cursor..old]);
            }
            old.max(out.len())
        };
        out.resize(new, 0);
        match b.section.and_then(|i| replacements.get(&i)) {
            Some((_, bytes)) => {
                out.extend_from_slice(bytes);
                shifted = true;
            }
            None => out.extend_from_slice(&data[old..old + b.old_len as usize]),
        }
        if new != old {
            shifted = true;
        }
        match b.section {
            Some(i) => new_offsets[i] = Some(new as u64),
            None => new_shoff = new as u64,
        }
        cursor = cursor.max(old + b.old_len as usize);
    }
    if !shifted && cursor < data.len() {
        out.extend_from_slice(&data[cursor..]);
    }
    (out, new_offsets, new_shoff)
}

/// Where the header fields to patch are, for one ELF class and byte order.
struct HeaderLayout {
    big: bool,
    bits: u32,
    shoff: u64,
    shentsize: u64,
}

impl HeaderLayout {
    /// (e_shoff's offset, sh_offset's and sh_size's offsets in a section
    /// header, field width).
    fn fields(&self) -> (usize, usize, usize, usize) {
        if self.bits == 64 {
            (0x28, 24, 32, 8)
        } else {
            (0x20, 16, 20, 4)
        }
    }

    fn patch_shoff(&self, out: &mut [u8]) {
        let (at, _, _, width) = self.fields();
        put(out, at, width, self.shoff, self.big);
    }

    /// Section `i`'s new offset and size, where they changed.
    fn patch(&self, out: &mut [u8], i: usize, offset: Option<u64>, size: Option<u64>) {
        let (_, off_field, size_field, width) = self.fields();
        let entry = (self.shoff + i as u64 * self.shentsize) as usize;
        if let Some(off) = offset {
            put(out, entry + off_field, width, off, self.big);
        }
        if let Some(size) = size {
            put(out, entry + size_field, width, size, self.big);
        }
    }
}

fn align_to(v: u64, align: u64) -> u64 {
    v.div_ceil(align) * align
}

fn put(out: &mut [u8], at: usize, width: usize, v: u64, big: bool) {
    let bytes = v.to_le_bytes();
    for i in 0..width {
        out[at + i] = if big { bytes[width - 1 - i] } else { bytes[i] };
    }
}
