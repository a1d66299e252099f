//! Read the offload layout of an ELF file: `.hip_fatbin`, the wrappers in
//! `.hipFatBinSegment`, where each wrapper's pointer really goes (through
//! the dynamic or section relocations), and the bundles it points at.

use std::fs::File;
use std::path::Path;

pub use kpack_bundle::{HIPF, HIPK, Magic, PointerVia, SectionInfo, WRAPPER_SIZE, Wrapper};
use kpack_bundle::{Item, ReadAt, SizedFile, WalkOptions, walk};
use object::elf;
use object::read::elf::{ElfFile64, FileHeader as _};
use object::{
    LittleEndian as LE, Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, ReadCache,
};

use crate::error::{Error, ErrorKind};
use crate::machine::Machine;

/// Name of the section holding the device code.
pub const FATBIN_SECTION: &str = ".hip_fatbin";
/// Name of the section holding the wrappers.
pub const SEGMENT_SECTION: &str = ".hipFatBinSegment";
/// Name of the section kpack adds: the msgpack marker.
pub const MARKER_SECTION: &str = ".rocm_kpack_ref";

/// What kind of file holds the device code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ElfKind {
    /// `ET_EXEC`: a position-dependent executable.
    Exec,
    /// `ET_DYN`: a PIE executable or a shared library.
    Dyn,
    /// `ET_REL`: a relocatable object.
    Rel,
    /// Not a host ELF: a bare offload bundle, CCOB or AMDGPU code object
    /// file (`.co`, `.hsaco`), walked as a whole.
    BundleFile,
}

/// The offload layout of an ELF file.
pub struct FatBinary {
    /// Type of ELF.
    pub kind: ElfKind,
    /// Host architecture (`None` for a bundle file or a bare code object).
    pub machine: Option<Machine>,
    /// `.hip_fatbin`, if present.
    pub fatbin: Option<SectionInfo>,
    /// `.hip_fatbin.1`, `.hip_fatbin.2`, ...: the later runs of a file
    /// `kpack prune` laid out in runs, in address order. Their bundles
    /// follow `.hip_fatbin`'s in `bundles`, with offsets from its address.
    pub fatbin_runs: Vec<SectionInfo>,
    /// `.hipFatBinSegment`, if present.
    pub segment: Option<SectionInfo>,
    /// `.rocm_kpack_ref`, if present.
    pub marker: Option<SectionInfo>,
    /// Wrappers in section order.
    pub wrappers: Vec<Wrapper>,
    /// Bundles (or bare code objects) in `.hip_fatbin`, in section order;
    /// a bundle's index is its co_index.
    pub bundles: Vec<Item>,
    /// The file, for reading entries of `bundles`.
    pub source: SizedFile,
}

kpack_bundle::impl_host_layout!(FatBinary);

/// `true` if the first bytes are an x86-64 (or any) ELF header.
pub fn looks_like_elf(head: &[u8]) -> bool {
    head.starts_with(b"\x7fELF")
}

/// Read the device code of `path`: a host ELF (executable, shared library,
/// object) or a bare bundle / code-object file, told apart by content.
pub fn read_fat_binary(path: &Path, opts: WalkOptions) -> Result<FatBinary, Error> {
    let source = SizedFile::open(path).map_err(|e| Error::io(path, "cannot open", e))?;
    let mut head = [0u8; 24];
    let n = (source.size() as usize).min(24);
    source
        .read_exact_at(0, &mut head[..n])
        .map_err(|e| Error::io(path, "cannot read", e))?;
    let head = &head[..n];
    if head.starts_with(kpack_bundle::BUNDLE_MAGIC)
        || head.starts_with(kpack_bundle::CCOB_MAGIC)
        || kpack_amdgpu::is_amdgpu_elf(head)
    {
        let mut bundles = Vec::new();
        for item in walk(&source, 0, source.size(), opts) {
            bundles.push(item.map_err(|e| Error::bundle(path, "bundle file", e))?);
        }
        return Ok(FatBinary {
            kind: ElfKind::BundleFile,
            machine: None,
            fatbin: None,
            fatbin_runs: Vec::new(),
            segment: None,
            marker: None,
            wrappers: Vec::new(),
            bundles,
            source,
        });
    }
    if !looks_like_elf(head) {
        return Err(Error::new(
            ErrorKind::Unsupported,
            path,
            "not an ELF file, offload bundle or code object",
        ));
    }
    read_elf(path, source, opts)
}

fn read_elf(path: &Path, source: SizedFile, opts: WalkOptions) -> Result<FatBinary, Error> {
    let file = File::open(path).map_err(|e| Error::io(path, "cannot open", e))?;
    let cache = ReadCache::new(file);
    let obj = ElfFile64::<LE, _>::parse(&cache).map_err(|e| {
        Error::new(
            ErrorKind::Unsupported,
            path,
            "not a 64-bit little-endian ELF",
        )
        .with_source(e)
    })?;
    let (machine, kind) = machine_and_kind(path, &obj)?;
    let fatbin = section_info(&obj, FATBIN_SECTION);
    let segment = section_info(&obj, SEGMENT_SECTION);
    let marker = section_info(&obj, MARKER_SECTION);
    let (bundles, fatbin_runs) = match fatbin.filter(|f| f.in_file) {
        Some(fb) => walk_fatbin(path, &obj, &source, fb, opts)?,
        None => (Vec::new(), Vec::new()),
    };
    let wrappers = match segment {
        Some(seg) => read_wrappers(path, &obj, machine, kind, seg, fatbin, &bundles)?,
        None => Vec::new(),
    };
    Ok(FatBinary {
        kind,
        machine: Some(machine),
        fatbin,
        fatbin_runs,
        segment,
        marker,
        wrappers,
        bundles,
        source,
    })
}

/// The host machine and ELF type, or why the file holds no device code
/// kpack can handle.
fn machine_and_kind<'d, R: object::ReadRef<'d>>(
    path: &Path,
    obj: &ElfFile64<'d, LE, R>,
) -> Result<(Machine, ElfKind), Error> {
    let hdr = obj.elf_header();
    let Some(machine) = Machine::from_e_machine(hdr.e_machine(LE)) else {
        return Err(Error::new(
            ErrorKind::Unsupported,
            path,
            format!(
                "e_machine {} is neither x86-64 nor aarch64; only those host binaries are supported",
                hdr.e_machine(LE)
            ),
        ));
    };
    let kind = match hdr.e_type(LE) {
        elf::ET_EXEC => ElfKind::Exec,
        elf::ET_DYN => ElfKind::Dyn,
        elf::ET_REL => ElfKind::Rel,
        other => {
            return Err(Error::new(
                ErrorKind::Unsupported,
                path,
                format!("ELF type {other} has no device code"),
            ));
        }
    };
    Ok((machine, kind))
}

/// Where section `name` is (the first of that name), `in_file` when all
/// its bytes are in the file (not `SHT_NOBITS`, as in a separated debug
/// file).
fn section_info<'d, R: object::ReadRef<'d>>(
    obj: &ElfFile64<'d, LE, R>,
    name: &str,
) -> Option<SectionInfo> {
    obj.section_by_name(name).map(|s| {
        let (offset, size) = s
            .file_range()
            .unwrap_or((s.elf_section_header().sh_offset.get(LE), 0));
        SectionInfo {
            index: s.index().0,
            addr: s.address(),
            offset,
            size: s.size(),
            in_file: s.elf_section_header().sh_type.get(LE) != elf::SHT_NOBITS && size == s.size(),
            rva: None,
            raw_size: None,
        }
    })
}

/// The bundles of `.hip_fatbin` (`fb`), then of the later runs of a pruned
/// file in address order, and those runs. A run's bundles get offsets
/// from `.hip_fatbin`'s address, which is what a wrapper pointer minus
/// that address gives.
fn walk_fatbin<'d, R: object::ReadRef<'d>>(
    path: &Path,
    obj: &ElfFile64<'d, LE, R>,
    source: &SizedFile,
    fb: SectionInfo,
    opts: WalkOptions,
) -> Result<(Vec<Item>, Vec<SectionInfo>), Error> {
    let mut bundles = Vec::new();
    let mut fatbin_runs = Vec::new();
    for s in obj.sections() {
        let name = s.name().unwrap_or_default();
        if name == FATBIN_SECTION || !is_fatbin_run(name) {
            continue;
        }
        if let Some(run) = section_info(obj, name).filter(|r| r.in_file && r.addr >= fb.addr) {
            fatbin_runs.push(run);
        }
    }
    fatbin_runs.sort_by_key(|r: &SectionInfo| r.addr);
    let runs = std::iter::once((&fb, FATBIN_SECTION.to_string())).chain(
        fatbin_runs
            .iter()
            .map(|r| (r, format!("{FATBIN_SECTION} run at {:#x}", r.addr))),
    );
    for (run, what) in runs {
        if run
            .offset
            .checked_add(run.size)
            .is_none_or(|e| e > source.size())
        {
            return Err(Error::new(
                ErrorKind::Malformed,
                path,
                format!("{what} runs past the end of the file"),
            ));
        }
        for item in walk(source, run.offset, run.size, opts) {
            let mut item = item.map_err(|e| Error::bundle(path, FATBIN_SECTION, e))?;
            item.offset = item.offset.saturating_add(run.addr - fb.addr);
            bundles.push(item);
        }
    }
    Ok((bundles, fatbin_runs))
}

/// The wrappers of `.hipFatBinSegment` (`seg`), each pointer resolved
/// through its relocation and matched to a bundle of `fatbin`.
fn read_wrappers<'d, R: object::ReadRef<'d>>(
    path: &Path,
    obj: &ElfFile64<'d, LE, R>,
    machine: Machine,
    kind: ElfKind,
    seg: SectionInfo,
    fatbin: Option<SectionInfo>,
    bundles: &[Item],
) -> Result<Vec<Wrapper>, Error> {
    let mut wrappers = Vec::new();
    let data = obj
        .section_by_index(object::SectionIndex(seg.index))
        .and_then(|s| s.data())
        .map_err(|e| {
            Error::new(
                ErrorKind::Malformed,
                path,
                format!("cannot read {SEGMENT_SECTION}"),
            )
            .with_source(e)
        })?;
    if !(data.len() as u64).is_multiple_of(WRAPPER_SIZE) {
        return Err(Error::new(
            ErrorKind::Offload,
            path,
            format!(
                "{SEGMENT_SECTION} is {} bytes, not a multiple of {WRAPPER_SIZE}",
                data.len()
            ),
        ));
    }
    let relocs = pointer_relocations(obj, machine, kind, seg, path)?;
    for (i, w) in data.chunks_exact(WRAPPER_SIZE as usize).enumerate() {
        let u32_at = |k: usize| u32::from_le_bytes(w[k..k + 4].try_into().unwrap_or_default());
        let u64_at = |k: usize| u64::from_le_bytes(w[k..k + 8].try_into().unwrap_or_default());
        let magic = match u32_at(0) {
            HIPF => Magic::Hipf,
            HIPK => Magic::Hipk,
            other => Magic::Other(other),
        };
        // Addresses are untrusted: wrap as the loader would, never overflow.
        let addr = seg.addr.wrapping_add(i as u64 * WRAPPER_SIZE);
        let slot = addr.wrapping_add(8);
        let stored = u64_at(8);
        let (pointer, via) = match relocs.iter().find(|r| r.slot == slot) {
            Some(r) => (r.value, r.via.clone()),
            None => (stored, PointerVia::Inline),
        };
        let bundle = fatbin.and_then(|fb| {
            let off = pointer.checked_sub(fb.addr)?;
            bundles.iter().position(|b: &Item| b.offset == off)
        });
        if magic == Magic::Hipf && bundle.is_none() {
            let range = fatbin
                .map(|f| format!("{:#x}..{:#x}", f.addr, f.addr.wrapping_add(f.size)))
                .unwrap_or_else(|| "absent".into());
            return Err(Error::new(
                ErrorKind::Offload,
                path,
                format!(
                    "wrapper {i} at {addr:#x} points at {pointer:#x}, which is not the start of a bundle in {FATBIN_SECTION} ({range})"
                ),
            ));
        }
        wrappers.push(Wrapper {
            index: i,
            addr,
            file_offset: seg.offset + i as u64 * WRAPPER_SIZE,
            magic,
            version: u32_at(4),
            stored_pointer: stored,
            pointer,
            via,
            reserved: u64_at(16),
            bundle,
        });
    }
    Ok(wrappers)
}

/// A relocation that fills a wrapper pointer slot.
struct SlotReloc {
    slot: u64,
    value: u64,
    via: PointerVia,
}

fn pointer_relocations<'d, R: object::ReadRef<'d>>(
    obj: &ElfFile64<'d, LE, R>,
    machine: Machine,
    kind: ElfKind,
    seg: SectionInfo,
    path: &Path,
) -> Result<Vec<SlotReloc>, Error> {
    let mut out = Vec::new();
    if kind == ElfKind::Exec {
        return Ok(out);
    }
    for rela in rela_entries(obj, path)? {
        // Dynamic tables (sh_info 0) apply to virtual addresses; in an
        // object file only the table for .hipFatBinSegment applies.
        let applies = match kind {
            ElfKind::Dyn => rela.target_section == 0,
            _ => rela.target_section == seg.index,
        };
        let slot = if kind == ElfKind::Rel {
            seg.addr.wrapping_add(rela.r_offset)
        } else {
            rela.r_offset
        };
        if !applies || slot < seg.addr || slot >= seg.addr.saturating_add(seg.size) {
            continue;
        }
        match rela.r_type {
            t if t == machine.relative() => out.push(SlotReloc {
                slot,
                value: rela.addend as u64,
                via: PointerVia::Relative {
                    rela_entry: rela.file_offset,
                },
            }),
            t if t == machine.abs64() => {
                let (base, symbol) = symbol_value(obj, rela.symtab, rela.r_sym);
                out.push(SlotReloc {
                    slot,
                    value: base.wrapping_add(rela.addend as u64),
                    via: PointerVia::Symbol {
                        rela_entry: rela.file_offset,
                        symbol,
                        addend: rela.addend,
                    },
                });
            }
            other => {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    path,
                    format!(
                        "wrapper pointer at {slot:#x} uses relocation type {other}, expected RELATIVE or 64"
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// One `Elf64_Rela` entry and where it is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RelaEntry {
    /// File offset of the 24-byte entry.
    pub file_offset: u64,
    /// `sh_info` of its table: the section it applies to (0 = dynamic).
    pub target_section: usize,
    /// `sh_link` of its table: the symbol table.
    pub symtab: usize,
    pub r_offset: u64,
    pub r_type: u32,
    pub r_sym: u32,
    pub addend: i64,
}

/// Every entry of every `SHT_RELA` section.
pub(crate) fn rela_entries<'d, R: object::ReadRef<'d>>(
    obj: &ElfFile64<'d, LE, R>,
    path: &Path,
) -> Result<Vec<RelaEntry>, Error> {
    let mut out = Vec::new();
    for section in obj.sections() {
        let sh = section.elf_section_header();
        if sh.sh_type.get(LE) != elf::SHT_RELA {
            continue;
        }
        let data = section.data().map_err(|e| {
            Error::new(
                ErrorKind::Malformed,
                path,
                format!("cannot read relocation section {}", section.index().0),
            )
            .with_source(e)
        })?;
        let entries: &[elf::Rela64<LE>] =
            object::pod::slice_from_all_bytes(data).map_err(|()| {
                Error::new(
                    ErrorKind::Malformed,
                    path,
                    format!(
                        "relocation section {} has a partial entry",
                        section.index().0
                    ),
                )
            })?;
        let base = sh.sh_offset.get(LE);
        for (i, r) in entries.iter().enumerate() {
            let info = r.r_info.get(LE);
            out.push(RelaEntry {
                file_offset: base + i as u64 * 24,
                target_section: sh.sh_info.get(LE) as usize,
                symtab: sh.sh_link.get(LE) as usize,
                r_offset: r.r_offset.get(LE),
                r_type: (info & 0xffff_ffff) as u32,
                r_sym: (info >> 32) as u32,
                addend: r.r_addend.get(LE),
            });
        }
    }
    Ok(out)
}

/// Value and name of symbol `index` of the symbol table in section `symtab`;
/// a section symbol is named after its section.
fn symbol_value<'d, R: object::ReadRef<'d>>(
    obj: &ElfFile64<'d, LE, R>,
    symtab: usize,
    index: u32,
) -> (u64, String) {
    let dynamic = obj.dynamic_symbol_table();
    let is_dyn = obj
        .section_by_index(object::SectionIndex(symtab))
        .is_ok_and(|s| s.elf_section_header().sh_type.get(LE) == elf::SHT_DYNSYM);
    let table = if is_dyn { dynamic } else { obj.symbol_table() };
    let Some(sym) = table.and_then(|t| t.symbol_by_index(object::SymbolIndex(index as usize)).ok())
    else {
        return (0, String::new());
    };
    let name = sym.name().unwrap_or("").to_string();
    if (sym.kind() == object::SymbolKind::Section || name.is_empty())
        && let Some(s) = sym
            .section_index()
            .and_then(|i| obj.section_by_index(i).ok())
    {
        return (s.address(), s.name().unwrap_or("").to_string());
    }
    (sym.address(), name)
}

/// `.hip_fatbin`, or `.hip_fatbin.N`: a later run of it in a file
/// `kpack prune` laid out in runs.
pub(crate) fn is_fatbin_run(name: &str) -> bool {
    name.strip_prefix(FATBIN_SECTION).is_some_and(|rest| {
        rest.is_empty()
            || rest
                .strip_prefix('.')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}
