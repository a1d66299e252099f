//! The header facts of a PE32+ image, read with `object::read::pe`, and
//! where each patchable field sits in the file. Reading, the transform and
//! the verifier share this one view.

use object::LittleEndian as LE;
use object::pe;
use object::read::pe::{ImageNtHeaders as _, ImageOptionalHeader as _, PeFile64};
use object::{Object, ObjectSection, ReadRef};

/// Data directory: certificate table (its "RVA" is a file offset).
pub(crate) const DIR_SECURITY: usize = pe::IMAGE_DIRECTORY_ENTRY_SECURITY;
/// Data directory: debug directory.
pub(crate) const DIR_DEBUG: usize = pe::IMAGE_DIRECTORY_ENTRY_DEBUG;
/// Size of one section header.
pub(crate) const SECTION_HEADER_SIZE: u64 = 40;
/// Size of one `IMAGE_DEBUG_DIRECTORY` entry.
pub(crate) const DEBUG_ENTRY_SIZE: u64 = 28;

/// Offsets of fields inside the PE32+ optional header.
pub(crate) mod opt {
    pub const SIZE_OF_INITIALIZED_DATA: u64 = 8;
    pub const SIZE_OF_IMAGE: u64 = 56;
    pub const SIZE_OF_HEADERS: u64 = 60;
    pub const CHECKSUM: u64 = 64;
    pub const DATA_DIRECTORIES: u64 = 112;
}

/// One section header.
#[derive(Debug, Clone)]
pub(crate) struct Section {
    pub name: String,
    pub header_offset: u64,
    pub virtual_size: u32,
    pub virtual_address: u32,
    pub raw_size: u32,
    pub raw_ptr: u32,
    pub ptr_relocs: u32,
    pub ptr_lines: u32,
    pub characteristics: u32,
}

impl Section {
    /// The file range holding initialised bytes: `min(VirtualSize,
    /// SizeOfRawData)` as the loader maps them (object's `pe_file_range`).
    pub fn file_range(&self) -> (u64, u64) {
        let n = if self.virtual_size == 0 {
            self.raw_size
        } else {
            self.virtual_size.min(self.raw_size)
        };
        (u64::from(self.raw_ptr), u64::from(n))
    }

    /// The RVA range the section occupies in memory (unrounded).
    pub fn rva_end(&self) -> u64 {
        u64::from(self.virtual_address) + u64::from(self.virtual_size.max(self.raw_size))
    }

    /// File offset of an RVA inside this section's file bytes.
    pub fn offset_of(&self, rva: u64) -> Option<u64> {
        let d = rva.checked_sub(u64::from(self.virtual_address))?;
        let (off, len) = self.file_range();
        (d < len).then_some(off + d)
    }

    /// `true` if the RVA is inside the section's memory range.
    pub fn contains_rva(&self, rva: u64) -> bool {
        rva >= u64::from(self.virtual_address) && rva < self.rva_end()
    }
}

/// A data directory entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Dir {
    pub rva: u32,
    pub size: u32,
}

/// The header facts of a PE32+ image.
#[derive(Debug, Clone)]
pub(crate) struct Image {
    pub file_len: u64,
    pub opt_offset: u64,
    pub section_table_offset: u64,
    pub coff_offset: u64,
    pub characteristics: u16,
    pub symtab_ptr: u32,
    pub nsyms: u32,
    pub image_base: u64,
    pub section_alignment: u32,
    pub file_alignment: u32,
    pub size_of_image: u32,
    pub size_of_headers: u32,
    pub size_of_initialized_data: u32,
    pub checksum: u32,
    pub dirs: Vec<Dir>,
    pub sections: Vec<Section>,
    /// Base relocations (RVA, type), `IMAGE_REL_BASED_ABSOLUTE` padding left out.
    pub base_relocs: Vec<(u32, u16)>,
}

/// Why a file is not an image this crate reads.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ParseError {
    /// Not a PE32+ at all or the wrong flavour.
    #[error("{0}")]
    Unsupported(String),
    /// A PE32+ whose headers `object` rejects.
    #[error("{0}")]
    Malformed(String, #[source] object::read::Error),
}

/// `true` if `data` starts like a PE image: `MZ`, and `PE\0\0` at `e_lfanew`.
/// Never decided by a file name.
pub fn looks_like_pe(data: &[u8]) -> bool {
    if !data.starts_with(b"MZ") {
        return false;
    }
    let Some(lfanew) = data.get(0x3c..0x40) else {
        return false;
    };
    let at = u32::from_le_bytes([lfanew[0], lfanew[1], lfanew[2], lfanew[3]]) as usize;
    at.checked_add(4)
        .and_then(|e| data.get(at..e))
        .is_some_and(|sig| sig == b"PE\0\0")
}

impl Image {
    /// Parse the headers, sections and base relocations of `data`.
    pub fn parse<'d, R: ReadRef<'d>>(data: R) -> Result<Image, ParseError> {
        check_pe32_plus(data)?;
        let file = PeFile64::<R>::parse(data)
            .map_err(|e| ParseError::Malformed("cannot parse the PE headers".into(), e))?;
        let nt = file.nt_headers();
        let fh = nt.file_header();
        if fh.machine.get(LE) != pe::IMAGE_FILE_MACHINE_AMD64 {
            return Err(ParseError::Unsupported(format!(
                "machine {:#x} is not x86-64 (0x8664)",
                fh.machine.get(LE)
            )));
        }
        let oh = nt.optional_header();
        let nt_offset = u64::from(file.dos_header().nt_headers_offset());
        let coff_offset = nt_offset + 4;
        let opt_offset = coff_offset + 20;
        let section_table_offset = opt_offset + u64::from(fh.size_of_optional_header.get(LE));
        let dirs = file
            .data_directories()
            .iter()
            .map(|d| Dir {
                rva: d.virtual_address.get(LE),
                size: d.size.get(LE),
            })
            .collect();
        let sections = file
            .sections()
            .enumerate()
            .map(|(i, s)| Section::of(&s, section_table_offset + i as u64 * SECTION_HEADER_SIZE))
            .collect();
        let base_relocs = base_relocations(&file, data)?;
        Ok(Image {
            file_len: data.len().unwrap_or(0),
            opt_offset,
            section_table_offset,
            coff_offset,
            characteristics: fh.characteristics.get(LE),
            symtab_ptr: fh.pointer_to_symbol_table.get(LE),
            nsyms: fh.number_of_symbols.get(LE),
            image_base: oh.image_base(),
            section_alignment: oh.section_alignment(),
            file_alignment: oh.file_alignment(),
            size_of_image: oh.size_of_image(),
            size_of_headers: oh.size_of_headers(),
            size_of_initialized_data: oh.size_of_initialized_data(),
            checksum: oh.check_sum(),
            dirs,
            sections,
            base_relocs,
        })
    }

    /// The section called `name` (the first, as the loader would not care
    /// and AMD's tools take the first).
    pub fn section(&self, name: &str) -> Option<(usize, &Section)> {
        self.sections
            .iter()
            .enumerate()
            .find(|(_, s)| s.name == name)
    }

    /// Data directory `i`, if present and nonzero.
    pub fn dir(&self, i: usize) -> Option<Dir> {
        self.dirs
            .get(i)
            .copied()
            .filter(|d| d.rva != 0 || d.size != 0)
    }

    /// File offset of an RVA that has file bytes.
    pub fn offset_of(&self, rva: u64) -> Option<u64> {
        if rva < u64::from(self.size_of_headers) {
            return Some(rva);
        }
        self.sections.iter().find_map(|s| s.offset_of(rva))
    }

    /// The section whose memory range holds `rva`.
    pub fn section_at(&self, rva: u64) -> Option<(usize, &Section)> {
        self.sections
            .iter()
            .enumerate()
            .find(|(_, s)| s.contains_rva(rva))
    }

    /// End of the last section's raw data (start of any overlay).
    pub fn raw_end(&self) -> u64 {
        self.sections
            .iter()
            .filter(|s| s.raw_size > 0)
            .map(|s| u64::from(s.raw_ptr) + u64::from(s.raw_size))
            .fold(u64::from(self.size_of_headers), u64::max)
    }

    /// File offset of the CheckSum field.
    pub fn checksum_offset(&self) -> u64 {
        self.opt_offset + opt::CHECKSUM
    }

    /// File offset of data directory `i`.
    pub fn dir_offset(&self, i: usize) -> u64 {
        self.opt_offset + opt::DATA_DIRECTORIES + 8 * i as u64
    }
}

/// `data`'s optional header says PE32+.
fn check_pe32_plus<'d, R: ReadRef<'d>>(data: R) -> Result<(), ParseError> {
    match object::read::pe::optional_header_magic(data) {
        Ok(pe::IMAGE_NT_OPTIONAL_HDR64_MAGIC) => Ok(()),
        Ok(pe::IMAGE_NT_OPTIONAL_HDR32_MAGIC) => Err(ParseError::Unsupported(
            "PE32 (32-bit) images are not supported, only PE32+".into(),
        )),
        Ok(m) => Err(ParseError::Unsupported(format!(
            "optional header magic {m:#x} is not PE32+ (0x20b)"
        ))),
        Err(e) => Err(ParseError::Malformed("not a PE image".into(), e)),
    }
}

impl Section {
    /// Section `s`, whose header is at file offset `header_offset`.
    fn of<'d, R: ReadRef<'d>>(
        s: &object::read::pe::PeSection<'d, '_, pe::ImageNtHeaders64, R>,
        header_offset: u64,
    ) -> Section {
        let h = s.pe_section();
        let name = match s.name() {
            Ok(n) => n.to_string(),
            Err(_) => String::from_utf8_lossy(h.raw_name()).into_owned(),
        };
        Section {
            name,
            header_offset,
            virtual_size: h.virtual_size.get(LE),
            virtual_address: h.virtual_address.get(LE),
            raw_size: h.size_of_raw_data.get(LE),
            raw_ptr: h.pointer_to_raw_data.get(LE),
            ptr_relocs: h.pointer_to_relocations.get(LE),
            ptr_lines: h.pointer_to_linenumbers.get(LE),
            characteristics: h.characteristics.get(LE),
        }
    }
}

/// Every base relocation (RVA, type), `IMAGE_REL_BASED_ABSOLUTE` padding
/// left out.
fn base_relocations<'d, R: ReadRef<'d>>(
    file: &PeFile64<'d, R>,
    data: R,
) -> Result<Vec<(u32, u16)>, ParseError> {
    let mut base_relocs = Vec::new();
    let blocks = file
        .data_directories()
        .relocation_blocks(data, &file.section_table())
        .map_err(|e| ParseError::Malformed("cannot read the base relocations".into(), e))?;
    let Some(mut blocks) = blocks else {
        return Ok(base_relocs);
    };
    while let Some(block) = blocks
        .next()
        .map_err(|e| ParseError::Malformed("cannot read a base relocation block".into(), e))?
    {
        for r in block {
            if r.typ != pe::IMAGE_REL_BASED_ABSOLUTE {
                base_relocs.push((r.virtual_address, r.typ));
            }
        }
    }
    Ok(base_relocs)
}

/// The PE image checksum (`CheckSumMappedFile`): a 16-bit end-around-carry
/// sum of the file's little-endian 16-bit words, with the 4 bytes of the
/// CheckSum field at `checksum_offset` read as zero, plus the file length.
pub fn checksum(data: &[u8], checksum_offset: u64) -> u32 {
    let skip = usize::try_from(checksum_offset).unwrap_or(usize::MAX);
    let mut sum: u64 = 0;
    for (i, pair) in data.chunks(2).enumerate() {
        let at = 2 * i;
        let lo = if (skip..skip.saturating_add(4)).contains(&at) {
            0
        } else {
            pair[0]
        };
        let hi = match pair.get(1) {
            Some(&b) if !(skip..skip.saturating_add(4)).contains(&(at + 1)) => b,
            _ => 0,
        };
        sum += u64::from(u16::from_le_bytes([lo, hi]));
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum = (sum & 0xffff) + (sum >> 16);
    (sum as u32).wrapping_add(data.len() as u32)
}

/// The little-endian `u32` at `at` in `data`, if all of it is there.
pub(crate) fn u32_at(data: &[u8], at: u64) -> Option<u32> {
    let at = usize::try_from(at).ok()?;
    Some(u32::from_le_bytes(
        data.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// The little-endian `u64` at `at` in `data`, if all of it is there.
pub(crate) fn u64_at(data: &[u8], at: u64) -> Option<u64> {
    let at = usize::try_from(at).ok()?;
    Some(u64::from_le_bytes(
        data.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_pe_by_magic_not_name() {
        let mut b = vec![0u8; 0x100];
        b[..2].copy_from_slice(b"MZ");
        b[0x3c] = 0x80;
        assert!(!looks_like_pe(&b));
        b[0x80..0x84].copy_from_slice(b"PE\0\0");
        assert!(looks_like_pe(&b));
        b[0x3c..0x40].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(!looks_like_pe(&b));
        assert!(!looks_like_pe(b"MZ"));
        assert!(!looks_like_pe(b"\x7fELF"));
    }

    #[test]
    fn checksum_skips_its_own_field_and_adds_the_length() {
        // Words 0x0201 + 0x0403 (field at 4..8 ignored) + odd byte 0x09.
        let data = [1, 2, 3, 4, 0xff, 0xff, 0xff, 0xff, 9];
        assert_eq!(checksum(&data, 4), 0x0201 + 0x0403 + 0x0009 + 9);
        // End-around carry.
        let data = [0xff, 0xff, 0x02, 0x00];
        assert_eq!(checksum(&data, 100), 0x0002 + 4);
    }
}
