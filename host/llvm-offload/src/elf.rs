//! Device code in an ELF file (normally a relocatable object): every
//! `SHT_LLVM_OFFLOADING` section (new offload driver) and the `.hip_fatbin`
//! section's clang offload bundles (old driver).
//!
//! Like LLVM's `extractFromObject`, a section is an offloading section by
//! its type, whatever its name; a `PROGBITS` section that is merely named
//! `.llvm.offloading` is not one (the offload linker would ignore it).

use object::read::elf::{ElfFile, FileHeader, SectionHeader as _};
use object::{Endianness, FileKind, Object, ObjectSection};

use crate::binary::{Binary, ReadOptions, Reader, SHT_LLVM_OFFLOADING};
use crate::error::{Error, ErrorKind};

/// Name of the old driver's bundle section.
pub const FATBIN_SECTION: &str = ".hip_fatbin";

/// An `SHT_LLVM_OFFLOADING` section and its binaries.
#[derive(Debug)]
pub struct OffloadingSection<'data> {
    /// Section name.
    pub name: String,
    /// Index in the section header table.
    pub index: usize,
    /// File offset of the section's bytes.
    pub offset: u64,
    /// Section size.
    pub size: u64,
    /// The binaries; image ranges are relative to the section start.
    pub binaries: Vec<Binary<'data>>,
}

/// The `.hip_fatbin` section and its bundles.
#[derive(Debug)]
pub struct FatbinSection<'data> {
    /// Index in the section header table.
    pub index: usize,
    /// File offset of the section's bytes.
    pub offset: u64,
    /// The section bytes.
    pub data: &'data [u8],
    /// Bundles (or bare code objects) in section order; item offsets are
    /// relative to the section start.
    pub bundles: Vec<kpack_bundle::Item>,
}

impl FatbinSection<'_> {
    /// The bytes of entry `entry` of bundle `bundle` (inflated for CCOB).
    pub fn read_entry(&self, bundle: usize, entry: usize) -> Result<Vec<u8>, Error> {
        let item = self.bundles.get(bundle).ok_or_else(|| {
            Error::new(
                ErrorKind::BadRange,
                format!("{FATBIN_SECTION} has no bundle {bundle}"),
            )
        })?;
        item.read_entry(&Bytes(self.data), entry).map_err(|e| {
            Error::with_source(
                ErrorKind::Bundle,
                format!(
                    "{FATBIN_SECTION} (file offset {:#x}) bundle {bundle} entry {entry}",
                    self.offset
                ),
                e,
            )
        })
    }
}

/// The device code of one ELF file.
#[derive(Debug)]
pub struct DeviceCode<'data> {
    /// `e_type` (`ET_REL` = 1 for objects).
    pub elf_type: u16,
    /// `e_machine`.
    pub machine: u16,
    /// Every `SHT_LLVM_OFFLOADING` section, in section order.
    pub offloading: Vec<OffloadingSection<'data>>,
    /// `.hip_fatbin`, when present with file bytes.
    pub fatbin: Option<FatbinSection<'data>>,
}

impl<'data> DeviceCode<'data> {
    /// Read the device code of the ELF file `data` (32 or 64 bit, either
    /// byte order).
    /// The data need not be aligned (archive members are only 2-aligned).
    pub fn parse(data: &'data [u8], options: &ReadOptions) -> Result<DeviceCode<'data>, Error> {
        // `object` reads ELF structures in place and needs them aligned;
        // a misaligned input is parsed from an aligned copy, while the
        // section contents are still borrowed from `data`.
        let copy;
        let headers = if data.as_ptr().align_offset(8) == 0 {
            data
        } else {
            let mut buf = vec![0u8; data.len() + 8];
            let pad = buf.as_ptr().align_offset(8).min(8);
            buf[pad..pad + data.len()].copy_from_slice(data);
            copy = buf;
            &copy[pad..pad + data.len()]
        };
        match FileKind::parse(headers) {
            Ok(FileKind::Elf64) => {
                parse_elf::<object::elf::FileHeader64<Endianness>>(headers, data, options)
            }
            Ok(FileKind::Elf32) => {
                parse_elf::<object::elf::FileHeader32<Endianness>>(headers, data, options)
            }
            _ => Err(Error::new(ErrorKind::Malformed, "not an ELF file")),
        }
    }

    /// `true` when the file has neither offloading binaries nor bundles.
    pub fn is_empty(&self) -> bool {
        self.offloading.iter().all(|s| s.binaries.is_empty())
            && self.fatbin.as_ref().is_none_or(|f| f.bundles.is_empty())
    }
}

/// `true` if `data` is an ELF file with an `SHT_LLVM_OFFLOADING` section.
/// Reads only the ELF and section headers, so `data` may be a
/// [`object::ReadCache`] over a large file.
pub fn has_offloading_section<'data, R: object::ReadRef<'data>>(data: R) -> bool {
    fn any<'data, Elf: FileHeader<Endian = Endianness>, R: object::ReadRef<'data>>(
        data: R,
    ) -> bool {
        let Ok(header) = Elf::parse(data) else {
            return false;
        };
        let Ok(endian) = header.endian() else {
            return false;
        };
        header.sections(endian, data).is_ok_and(|table| {
            table
                .iter()
                .any(|sh| sh.sh_type(endian) == SHT_LLVM_OFFLOADING)
        })
    }
    match FileKind::parse(data) {
        Ok(FileKind::Elf64) => any::<object::elf::FileHeader64<Endianness>, R>(data),
        Ok(FileKind::Elf32) => any::<object::elf::FileHeader32<Endianness>, R>(data),
        _ => false,
    }
}

/// `ReadAt` over a byte slice, for the bundle walker.
pub(crate) struct Bytes<'a>(pub(crate) &'a [u8]);

impl kpack_bundle::ReadAt for Bytes<'_> {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        usize::try_from(offset)
            .ok()
            .and_then(|start| self.0.get(start..start.checked_add(buf.len())?))
            .map(|src| buf.copy_from_slice(src))
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))
    }
}

/// The bundles of `.hip_fatbin`'s `bytes` (`where_` names the section),
/// each compressed one's MD5 checked when `options` ask for it.
fn read_bundles(
    bytes: &[u8],
    options: &ReadOptions,
    where_: &str,
) -> Result<Vec<kpack_bundle::Item>, Error> {
    let walk_options = kpack_bundle::WalkOptions {
        verify_hash: options.verify_hash,
    };
    let bundles = kpack_bundle::walk(&Bytes(bytes), 0, bytes.len() as u64, walk_options)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::with_source(ErrorKind::Bundle, where_.to_string(), e))?;
    // Walking reads headers only: check each compressed bundle's
    // MD5 here, as the walk itself used to (one streaming pass).
    if options.verify_hash {
        // One bundle at a time, from bytes already in memory, none
        // inflating past the reader's own ceiling.
        let budget = kpack_bundle::MemoryBudget::new(options.max_inflated_size);
        for item in &bundles {
            if let kpack_bundle::Format::Compressed(_) = item.format {
                item.stream_entries(&Bytes(bytes), &budget, |_, _, _| {
                    Ok::<(), kpack_bundle::Error>(())
                })
                .map_err(|e| Error::with_source(ErrorKind::Bundle, where_.to_string(), e))?;
            }
        }
    }
    Ok(bundles)
}

/// Parse the ELF structures in `headers` (an aligned view of `data`) and
/// borrow section contents from `data`.
fn parse_elf<'data, Elf: FileHeader<Endian = Endianness>>(
    headers: &[u8],
    data: &'data [u8],
    options: &ReadOptions,
) -> Result<DeviceCode<'data>, Error> {
    let malformed =
        |what: String, e: object::read::Error| Error::with_source(ErrorKind::Malformed, what, e);
    let file =
        ElfFile::<Elf>::parse(headers).map_err(|e| malformed("malformed ELF file".into(), e))?;
    let endian = file.endian();
    let header = file.elf_header();
    let mut offloading = Vec::new();
    let mut fatbin = None;
    // One inflation budget for every section of the file.
    let mut options = *options;
    for section in file.sections() {
        let sh = section.elf_section_header();
        let name = section.name().unwrap_or("");
        let index = section.index().0;
        let is_offloading = sh.sh_type(endian) == SHT_LLVM_OFFLOADING;
        let is_fatbin = name == FATBIN_SECTION && sh.sh_type(endian) != object::elf::SHT_NOBITS;
        if !is_offloading && !is_fatbin {
            continue;
        }
        let where_ = format!(
            "section {name} (index {index}, file offset {:#x})",
            sh.sh_offset(endian).into()
        );
        let offset: u64 = sh.sh_offset(endian).into();
        let size: u64 = sh.sh_size(endian).into();
        let bytes = usize::try_from(offset)
            .ok()
            .zip(usize::try_from(size).ok())
            .and_then(|(o, s)| data.get(o..o.checked_add(s)?))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Malformed,
                    format!(
                        "{where_}: {size:#x} bytes run past the end of the file ({:#x})",
                        data.len()
                    ),
                )
            })?;
        if is_offloading {
            let binaries = Reader::with_options(bytes, options)
                .read_all()
                .map_err(|e| e.context(where_))?;
            let inflated: u64 = binaries.iter().map(Binary::inflated_size).sum();
            options.max_inflated_size = options.max_inflated_size.saturating_sub(inflated);
            offloading.push(OffloadingSection {
                name: name.to_string(),
                index,
                offset,
                size: bytes.len() as u64,
                binaries,
            });
        } else if fatbin.is_none() {
            fatbin = Some(FatbinSection {
                index,
                offset,
                data: bytes,
                bundles: read_bundles(bytes, &options, &where_)?,
            });
        }
    }
    Ok(DeviceCode {
        elf_type: header.e_type(endian),
        machine: header.e_machine(endian),
        offloading,
        fatbin,
    })
}
