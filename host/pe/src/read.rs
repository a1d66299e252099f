//! Read the offload layout of a PE32+ image: `.hip_fat`, the wrappers in
//! `.hipFatB`, where each wrapper's pointer goes (an absolute VA, rebased by
//! an `IMAGE_REL_BASED_DIR64` base relocation when the image moves) and the
//! bundles it points at.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use kpack_bundle::{Item, ReadAt, SizedFile, WalkOptions, walk};
use kpack_elf::{HIPF, HIPK, Magic, WRAPPER_SIZE};
use object::ReadCache;
use object::pe;

use crate::error::{Error, ErrorKind};
use crate::image::{DIR_SECURITY, Image, ParseError, Section};

/// Name of the section holding the device code (`.hip_fatbin` cut to 8).
pub const FATBIN_SECTION: &str = ".hip_fat";
/// Name of the section holding the wrappers (`.hipFatBinSegment` cut to 8).
pub const SEGMENT_SECTION: &str = ".hipFatB";
/// Name of the section kpack adds: the msgpack marker.
pub const MARKER_SECTION: &str = ".kpackrf";
/// Characteristics of the marker section: initialised data, read-only.
pub const MARKER_CHARACTERISTICS: u32 = pe::IMAGE_SCN_CNT_INITIALIZED_DATA | pe::IMAGE_SCN_MEM_READ;

/// What kind of image holds the device code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PeKind {
    /// A DLL (`IMAGE_FILE_DLL`).
    Dll,
    /// An executable.
    Exe,
}

/// Where a section is.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SectionInfo {
    /// Index in the section table.
    pub index: usize,
    /// Virtual address at the preferred image base (`ImageBase + RVA`).
    pub addr: u64,
    /// `VirtualAddress` (RVA).
    pub rva: u32,
    /// `PointerToRawData`.
    pub offset: u64,
    /// `VirtualSize`.
    pub size: u64,
    /// `SizeOfRawData`.
    pub raw_size: u64,
    /// `false` when part of the section is zero-filled by the loader
    /// (`SizeOfRawData < VirtualSize`): its bytes are not all in the file.
    pub in_file: bool,
}

impl SectionInfo {
    fn new(index: usize, s: &Section, image_base: u64) -> SectionInfo {
        SectionInfo {
            index,
            addr: image_base.wrapping_add(u64::from(s.virtual_address)),
            rva: s.virtual_address,
            offset: u64::from(s.raw_ptr),
            size: u64::from(s.virtual_size),
            raw_size: u64::from(s.raw_size),
            in_file: s.raw_size >= s.virtual_size,
        }
    }
}

/// How a wrapper's pointer gets its run-time value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "via", rename_all = "snake_case")]
pub enum PointerVia {
    /// The stored VA is used as is (`/fixed` image, or no base relocation).
    Inline,
    /// An `IMAGE_REL_BASED_DIR64` base relocation adds the load delta.
    BaseReloc,
}

/// One 24-byte `__CudaFatBinaryWrapper`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Wrapper {
    /// Position in `.hipFatB`.
    pub index: usize,
    /// Virtual address of the wrapper at the preferred image base.
    pub addr: u64,
    /// File offset of the wrapper.
    pub file_offset: u64,
    /// Magic.
    pub magic: Magic,
    /// Version (1 for HIP).
    pub version: u32,
    /// The VA stored in the pointer slot.
    pub stored_pointer: u64,
    /// The VA the pointer has at the preferred image base (the stored one:
    /// base relocations only add the load delta).
    pub pointer: u64,
    /// How the pointer gets its run-time value.
    pub via: PointerVia,
    /// The `reserved1` field (kpack's co_index once transformed).
    pub reserved: u64,
    /// Index of the bundle in `.hip_fat` the pointer lands on.
    pub bundle: Option<usize>,
}

/// The offload layout of a PE32+ image.
pub struct FatBinary {
    /// DLL or EXE.
    pub kind: PeKind,
    /// `ImageBase`.
    pub image_base: u64,
    /// `.hip_fat`, if present.
    pub fatbin: Option<SectionInfo>,
    /// `.hipFatB`, if present.
    pub segment: Option<SectionInfo>,
    /// `.kpackrf`, if present.
    pub marker: Option<SectionInfo>,
    /// Wrappers in section order.
    pub wrappers: Vec<Wrapper>,
    /// Bundles in `.hip_fat`, in section order; a bundle's index is its co_index.
    pub bundles: Vec<Item>,
    /// `true` when the image carries a certificate table (Authenticode):
    /// any rewrite invalidates the signature.
    pub signed: bool,
    /// The file, for reading entries of `bundles`.
    pub source: SizedFile,
}

impl FatBinary {
    /// `true` when there is no device code and no marker.
    pub fn is_host_only(&self) -> bool {
        self.fatbin.is_none() && self.wrappers.is_empty() && self.marker.is_none()
    }

    /// The device target ids present, sorted, each once.
    pub fn targets(&self) -> Vec<String> {
        let mut t: Vec<String> = self
            .bundles
            .iter()
            .flat_map(|b| b.entries.iter())
            .filter(|e| !e.id.is_host())
            .filter_map(|e| e.id.target().map(|t| t.to_string()))
            .collect();
        t.sort();
        t.dedup();
        t
    }

    /// `true` when every wrapper is HIPK (the file was transformed).
    pub fn is_transformed(&self) -> bool {
        !self.wrappers.is_empty() && self.wrappers.iter().all(|w| w.magic == Magic::Hipk)
    }
}

/// `true` if the file at `path` is a PE image (by its magic: `MZ`, then
/// `PE\0\0` at `e_lfanew`), never by its extension.
pub fn is_pe_file(path: &Path) -> Result<bool, Error> {
    let source = SizedFile::open(path).map_err(|e| Error::io(path, "cannot open", e))?;
    let mut head = [0u8; 0x40];
    if source.size() < head.len() as u64 {
        return Ok(false);
    }
    source
        .read_exact_at(0, &mut head)
        .map_err(|e| Error::io(path, "cannot read the DOS header", e))?;
    if !head.starts_with(b"MZ") {
        return Ok(false);
    }
    let lfanew = u64::from(u32::from_le_bytes([
        head[0x3c], head[0x3d], head[0x3e], head[0x3f],
    ]));
    let mut sig = [0u8; 4];
    if lfanew.checked_add(4).is_none_or(|e| e > source.size()) {
        return Ok(false);
    }
    source.read_exact_at(lfanew, &mut sig).map_err(|e| {
        Error::io(
            path,
            format!("cannot read the PE signature at {lfanew:#x}"),
            e,
        )
    })?;
    Ok(&sig == b"PE\0\0")
}

pub(crate) fn parse_error(path: &Path, e: ParseError) -> Error {
    match e {
        ParseError::Unsupported(m) => Error::new(ErrorKind::Unsupported, path, m),
        ParseError::Malformed(m, e) => Error::object(ErrorKind::Malformed, path, m, e),
    }
}

/// Read the device code of the PE32+ image at `path`.
pub fn read_fat_binary(path: &Path, opts: WalkOptions) -> Result<FatBinary, Error> {
    let source = SizedFile::open(path).map_err(|e| Error::io(path, "cannot open", e))?;
    let file = File::open(path).map_err(|e| Error::io(path, "cannot open", e))?;
    let cache = ReadCache::new(file);
    let image = Image::parse(&cache).map_err(|e| parse_error(path, e))?;
    read_image(path, &image, &cache, source, opts)
}

/// The type of the first base relocation at each RVA, indexed once: every
/// wrapper looks its pointer slot up, and large DLLs have many of both.
fn reloc_index(image: &Image) -> HashMap<u64, u16> {
    let mut out = HashMap::with_capacity(image.base_relocs.len());
    for &(rva, typ) in &image.base_relocs {
        out.entry(u64::from(rva)).or_insert(typ);
    }
    out
}

/// The first bundle at each offset of `.hip_fat`, indexed once.
fn bundle_index(bundles: &[Item]) -> HashMap<u64, usize> {
    let mut out = HashMap::with_capacity(bundles.len());
    for (k, b) in bundles.iter().enumerate() {
        out.entry(b.offset).or_insert(k);
    }
    out
}

fn read_image<'d, R: object::ReadRef<'d>>(
    path: &Path,
    image: &Image,
    data: R,
    source: SizedFile,
    opts: WalkOptions,
) -> Result<FatBinary, Error> {
    let kind = if image.characteristics & pe::IMAGE_FILE_DLL != 0 {
        PeKind::Dll
    } else {
        PeKind::Exe
    };
    let base = image.image_base;
    let find = |name: &str| {
        image
            .section(name)
            .map(|(i, s)| (SectionInfo::new(i, s, base), s.clone()))
    };
    let fat = find(FATBIN_SECTION);
    let segment = find(SEGMENT_SECTION);
    let marker = find(MARKER_SECTION);

    let mut bundles = Vec::new();
    if let Some((_, s)) = &fat {
        let (off, len) = s.file_range();
        if off.checked_add(len).is_none_or(|e| e > source.size()) {
            return Err(Error::new(
                ErrorKind::Malformed,
                path,
                format!(
                    "section {FATBIN_SECTION}: raw data {off:#x}+{len:#x} runs past the end of the file ({:#x})",
                    source.size()
                ),
            ));
        }
        for item in walk(&source, off, len, opts) {
            bundles.push(item.map_err(|e| {
                Error::bundle(
                    path,
                    format!("section {FATBIN_SECTION} (raw data at {off:#x})"),
                    e,
                )
            })?);
        }
    }

    let mut wrappers = Vec::new();
    let (relocs, bundle_at) = (reloc_index(image), bundle_index(&bundles));
    if let Some((seg, s)) = &segment {
        let (off, len) = s.file_range();
        let bytes = data.read_bytes_at(off, len).map_err(|()| {
            Error::new(
                ErrorKind::Malformed,
                path,
                format!(
                    "section {SEGMENT_SECTION}: raw data {off:#x}+{len:#x} runs past the end of the file"
                ),
            )
        })?;
        if u64::from(s.virtual_size) != len {
            return Err(Error::new(
                ErrorKind::Offload,
                path,
                format!(
                    "section {SEGMENT_SECTION}: VirtualSize {:#x} but only {len:#x} bytes in the file",
                    s.virtual_size
                ),
            ));
        }
        if !len.is_multiple_of(WRAPPER_SIZE) {
            return Err(Error::new(
                ErrorKind::Offload,
                path,
                format!(
                    "section {SEGMENT_SECTION} is {len:#x} bytes, not a multiple of {WRAPPER_SIZE}"
                ),
            ));
        }
        for (i, w) in bytes.chunks_exact(WRAPPER_SIZE as usize).enumerate() {
            let u32_at = |k: usize| u32::from_le_bytes(w[k..k + 4].try_into().unwrap_or_default());
            let u64_at = |k: usize| u64::from_le_bytes(w[k..k + 8].try_into().unwrap_or_default());
            let magic = match u32_at(0) {
                HIPF => Magic::Hipf,
                HIPK => Magic::Hipk,
                other => Magic::Other(other),
            };
            let rva = u64::from(seg.rva) + i as u64 * WRAPPER_SIZE;
            let file_offset = off + i as u64 * WRAPPER_SIZE;
            let slot = rva + 8;
            let via = match relocs.get(&slot) {
                None => PointerVia::Inline,
                Some(&pe::IMAGE_REL_BASED_DIR64) => PointerVia::BaseReloc,
                Some(t) => {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        path,
                        format!(
                            "section {SEGMENT_SECTION}: wrapper {i} at file offset {file_offset:#x}: pointer slot RVA {slot:#x} has base relocation type {t}, expected DIR64 ({})",
                            pe::IMAGE_REL_BASED_DIR64
                        ),
                    ));
                }
            };
            let pointer = u64_at(8);
            let bundle = fat.as_ref().and_then(|(fb, s)| {
                let bundle_off = pointer.checked_sub(base)?.checked_sub(u64::from(fb.rva))?;
                if bundle_off >= s.file_range().1 {
                    return None;
                }
                bundle_at.get(&bundle_off).copied()
            });
            if magic == Magic::Hipf && bundle.is_none() {
                let range = fat
                    .as_ref()
                    .map(|(f, _)| format!("{:#x}..{:#x}", f.addr, f.addr.wrapping_add(f.size)))
                    .unwrap_or_else(|| "absent".into());
                return Err(Error::new(
                    ErrorKind::Offload,
                    path,
                    format!(
                        "section {SEGMENT_SECTION}: wrapper {i} at file offset {file_offset:#x} points at {pointer:#x}, which is not the start of a bundle in {FATBIN_SECTION} ({range})"
                    ),
                ));
            }
            wrappers.push(Wrapper {
                index: i,
                addr: base.wrapping_add(rva),
                file_offset,
                magic,
                version: u32_at(4),
                stored_pointer: pointer,
                pointer,
                via,
                reserved: u64_at(16),
                bundle,
            });
        }
    }
    Ok(FatBinary {
        kind,
        image_base: base,
        fatbin: fat.map(|f| f.0),
        segment: segment.map(|f| f.0),
        marker: marker.map(|f| f.0),
        wrappers,
        bundles,
        signed: image.dir(DIR_SECURITY).is_some(),
        source,
    })
}
