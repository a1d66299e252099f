//! Read the offload layout of a PE32+ image: `.hip_fat`, the wrappers in
//! `.hipFatB`, where each wrapper's pointer goes (an absolute VA, rebased by
//! an `IMAGE_REL_BASED_DIR64` base relocation when the image moves) and the
//! bundles it points at.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use kpack_bundle::{Item, ReadAt, SizedFile, WRAPPER_SIZE, WalkOptions, WrapperFields, walk};
pub use kpack_bundle::{Magic, PointerVia, SectionInfo, Wrapper};
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

/// Where section `s` (at `index` in the section table) is.
fn section_info(index: usize, s: &Section, image_base: u64) -> SectionInfo {
    SectionInfo {
        index,
        addr: image_base.wrapping_add(u64::from(s.virtual_address)),
        rva: Some(s.virtual_address),
        offset: u64::from(s.raw_ptr),
        size: u64::from(s.virtual_size),
        raw_size: Some(s.raw_size),
        in_file: s.raw_size >= s.virtual_size,
    }
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

kpack_bundle::impl_host_layout!(FatBinary);

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
            .map(|(i, s)| (section_info(i, s, base), s.clone()))
    };
    let fat = find(FATBIN_SECTION);
    let segment = find(SEGMENT_SECTION);
    let marker = find(MARKER_SECTION);
    let bundles = match &fat {
        Some((_, s)) => read_bundles(path, s, &source, opts)?,
        None => Vec::new(),
    };
    let wrappers = match &segment {
        Some((seg, s)) => {
            let wrappers = Wrappers {
                path,
                image,
                fat: fat.as_ref(),
                relocs: reloc_index(image),
                bundle_at: bundle_index(&bundles),
            };
            wrappers.read(data, seg, s)?
        }
        None => Vec::new(),
    };
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

/// Every bundle in `.hip_fat`'s raw data.
fn read_bundles(
    path: &Path,
    fat: &Section,
    source: &SizedFile,
    opts: WalkOptions,
) -> Result<Vec<Item>, Error> {
    let (off, len) = fat.file_range();
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
    walk(source, off, len, opts)
        .map(|item| {
            item.map_err(|e| {
                Error::bundle(
                    path,
                    format!("section {FATBIN_SECTION} (raw data at {off:#x})"),
                    e,
                )
            })
        })
        .collect()
}

/// What decoding the wrappers of `.hipFatB` needs to know.
struct Wrappers<'a> {
    path: &'a Path,
    image: &'a Image,
    /// `.hip_fat`, if present.
    fat: Option<&'a (SectionInfo, Section)>,
    /// The type of the first base relocation at each RVA ([`reloc_index`]).
    relocs: HashMap<u64, u16>,
    /// The first bundle at each offset of `.hip_fat` ([`bundle_index`]).
    bundle_at: HashMap<u64, usize>,
}

impl Wrappers<'_> {
    /// Decode every wrapper in `.hipFatB` (`seg`, section `s`).
    fn read<'d, R: object::ReadRef<'d>>(
        &self,
        data: R,
        seg: &SectionInfo,
        s: &Section,
    ) -> Result<Vec<Wrapper>, Error> {
        let (off, len) = s.file_range();
        let bytes = data.read_bytes_at(off, len).map_err(|()| {
            self.fail(
                ErrorKind::Malformed,
                format!(
                    "section {SEGMENT_SECTION}: raw data {off:#x}+{len:#x} runs past the end of the file"
                ),
            )
        })?;
        if u64::from(s.virtual_size) != len {
            return Err(self.fail(
                ErrorKind::Offload,
                format!(
                    "section {SEGMENT_SECTION}: VirtualSize {:#x} but only {len:#x} bytes in the file",
                    s.virtual_size
                ),
            ));
        }
        if !len.is_multiple_of(WRAPPER_SIZE) {
            return Err(self.fail(
                ErrorKind::Offload,
                format!(
                    "section {SEGMENT_SECTION} is {len:#x} bytes, not a multiple of {WRAPPER_SIZE}"
                ),
            ));
        }
        let rva = seg.rva.map_or(0, u64::from);
        bytes
            .chunks_exact(WRAPPER_SIZE as usize)
            .enumerate()
            .map(|(i, w)| {
                let at = i as u64 * WRAPPER_SIZE;
                self.wrapper(i, rva + at, off + at, WrapperFields::parse(w))
            })
            .collect()
    }

    /// Wrapper `i` at `rva` and `file_offset`: how its pointer is rebased
    /// and which bundle it lands on.
    fn wrapper(
        &self,
        i: usize,
        rva: u64,
        file_offset: u64,
        w: WrapperFields,
    ) -> Result<Wrapper, Error> {
        let slot = rva + 8;
        let via = match self.relocs.get(&slot) {
            None => PointerVia::Inline,
            Some(&pe::IMAGE_REL_BASED_DIR64) => PointerVia::BaseReloc,
            Some(t) => {
                return Err(self.fail(
                    ErrorKind::Unsupported,
                    format!(
                        "section {SEGMENT_SECTION}: wrapper {i} at file offset {file_offset:#x}: pointer slot RVA {slot:#x} has base relocation type {t}, expected DIR64 ({})",
                        pe::IMAGE_REL_BASED_DIR64
                    ),
                ));
            }
        };
        let pointer = w.pointer;
        let bundle = self.bundle_at(pointer);
        if w.magic == Magic::Hipf && bundle.is_none() {
            let range = self
                .fat
                .map(|(f, _)| format!("{:#x}..{:#x}", f.addr, f.addr.wrapping_add(f.size)))
                .unwrap_or_else(|| "absent".into());
            return Err(self.fail(
                ErrorKind::Offload,
                format!(
                    "section {SEGMENT_SECTION}: wrapper {i} at file offset {file_offset:#x} points at {pointer:#x}, which is not the start of a bundle in {FATBIN_SECTION} ({range})"
                ),
            ));
        }
        Ok(Wrapper {
            index: i,
            addr: self.image.image_base.wrapping_add(rva),
            file_offset,
            magic: w.magic,
            version: w.version,
            stored_pointer: pointer,
            pointer,
            via,
            reserved: w.reserved,
            bundle,
        })
    }

    /// Index of the bundle in `.hip_fat` that the VA `pointer` starts.
    fn bundle_at(&self, pointer: u64) -> Option<usize> {
        let (_, s) = self.fat?;
        let bundle_off = pointer
            .checked_sub(self.image.image_base)?
            .checked_sub(u64::from(s.virtual_address))?;
        if bundle_off >= s.file_range().1 {
            return None;
        }
        self.bundle_at.get(&bundle_off).copied()
    }

    fn fail(&self, kind: ErrorKind, message: String) -> Error {
        Error::new(kind, self.path, message)
    }
}
