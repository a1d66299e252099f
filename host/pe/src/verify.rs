//! Structural checks of a PE32+ image after (or without) the transform:
//! what the loader and the PE/COFF specification require of the layout,
//! and what kpack promises (marker parsable, wrappers redirected to it, no
//! base relocation into the removed device code).

use kpack_bundle::{HIPF, HIPK, WRAPPER_SIZE};
use kpack_format::Marker;
use object::pe;

use crate::image::{DEBUG_ENTRY_SIZE, DIR_DEBUG, DIR_SECURITY, Image, ParseError, checksum};
use crate::read::{FATBIN_SECTION, MARKER_CHARACTERISTICS, MARKER_SECTION, SEGMENT_SECTION};

/// Names of the data directories, for messages.
const DIR_NAMES: [&str; 16] = [
    "export",
    "import",
    "resource",
    "exception",
    "certificate",
    "base relocation",
    "debug",
    "architecture",
    "global pointer",
    "TLS",
    "load config",
    "bound import",
    "IAT",
    "delay import",
    "CLR runtime",
    "reserved",
];

/// Check the PE image `data` (the whole file). Returns one sentence per
/// problem, each naming the section or structure and the offset in hex;
/// empty means the image passed.
pub fn verify_image(data: &[u8]) -> Vec<String> {
    let mut f = Vec::new();
    let image = match Image::parse(data) {
        Ok(i) => i,
        Err(ParseError::Unsupported(m)) => return vec![m],
        Err(ParseError::Malformed(m, e)) => return vec![format!("{m}: {e}")],
    };
    let file_len = data.len() as u64;
    let fa = u64::from(image.file_alignment);
    let sa = u64::from(image.section_alignment);
    if !fa.is_power_of_two() || !sa.is_power_of_two() || fa > sa {
        f.push(format!(
            "FileAlignment {fa:#x} and SectionAlignment {sa:#x} must be powers of two with FileAlignment <= SectionAlignment"
        ));
        return f;
    }
    if !(0x200..=0x10000).contains(&fa) && fa != sa {
        f.push(format!("FileAlignment {fa:#x} is outside 0x200..0x10000"));
    }
    let headers = u64::from(image.size_of_headers);
    let table_end = image.section_table_offset + 40 * image.sections.len() as u64;
    if !headers.is_multiple_of(fa) {
        f.push(format!(
            "SizeOfHeaders {headers:#x} is not a multiple of FileAlignment {fa:#x}"
        ));
    }
    if table_end > headers {
        f.push(format!(
            "section table ends at {table_end:#x}, past SizeOfHeaders {headers:#x}"
        ));
    }
    if headers > file_len {
        f.push(format!(
            "SizeOfHeaders {headers:#x} is past the end of the file ({file_len:#x})"
        ));
    }

    // Raw data: aligned, inside the file, after the headers, no overlaps.
    let mut raw: Vec<(u64, u64, &str)> = Vec::new();
    for s in &image.sections {
        let (p, n) = (u64::from(s.raw_ptr), u64::from(s.raw_size));
        if n == 0 {
            continue;
        }
        if !p.is_multiple_of(fa) {
            f.push(format!(
                "section {}: PointerToRawData {p:#x} is not a multiple of FileAlignment {fa:#x}",
                s.name
            ));
        }
        if !n.is_multiple_of(fa) {
            f.push(format!(
                "section {}: SizeOfRawData {n:#x} is not a multiple of FileAlignment {fa:#x}",
                s.name
            ));
        }
        if p + n > file_len {
            f.push(format!(
                "section {}: raw data {p:#x}..{:#x} runs past the end of the file ({file_len:#x})",
                s.name,
                p + n
            ));
        }
        if p < headers {
            f.push(format!(
                "section {}: raw data at {p:#x} lies inside the headers ({headers:#x})",
                s.name
            ));
        }
        raw.push((p, p + n, &s.name));
    }
    raw.sort();
    for w in raw.windows(2) {
        if w[1].0 < w[0].1 {
            f.push(format!(
                "sections {} ({:#x}..{:#x}) and {} ({:#x}..{:#x}) overlap in the file",
                w[0].2, w[0].0, w[0].1, w[1].2, w[1].0, w[1].1
            ));
        }
    }

    // Memory: aligned, ascending, no overlaps, SizeOfImage covers all.
    let mut prev_end = headers.next_multiple_of(sa);
    for s in &image.sections {
        let va = u64::from(s.virtual_address);
        if !va.is_multiple_of(sa) {
            f.push(format!(
                "section {}: VirtualAddress {va:#x} is not a multiple of SectionAlignment {sa:#x}",
                s.name
            ));
        }
        if va < prev_end {
            f.push(format!(
                "section {}: VirtualAddress {va:#x} is below the end of what precedes it ({prev_end:#x})",
                s.name
            ));
        }
        prev_end = s.rva_end().next_multiple_of(sa);
    }
    let soi = u64::from(image.size_of_image);
    if soi != prev_end {
        f.push(format!(
            "SizeOfImage {soi:#x} is not the end of the last section rounded to SectionAlignment ({prev_end:#x})"
        ));
    }

    // Data directories inside one section (the certificate table: a file range).
    for (i, d) in image.dirs.iter().enumerate() {
        if d.rva == 0 && d.size == 0 {
            continue;
        }
        let name = DIR_NAMES.get(i).copied().unwrap_or("unknown");
        let (lo, hi) = (u64::from(d.rva), u64::from(d.rva) + u64::from(d.size));
        if i == DIR_SECURITY {
            if !lo.is_multiple_of(8) {
                f.push(format!(
                    "certificate table at file offset {lo:#x} is not 8-byte aligned"
                ));
            }
            if hi > file_len {
                f.push(format!(
                    "certificate table {lo:#x}..{hi:#x} runs past the end of the file ({file_len:#x})"
                ));
            }
            if lo < image.raw_end() {
                f.push(format!(
                    "certificate table at file offset {lo:#x} lies before the end of the section data ({:#x})",
                    image.raw_end()
                ));
            }
            continue;
        }
        match image.section_at(lo) {
            Some((_, s)) if hi <= s.rva_end() => {}
            Some((_, s)) => f.push(format!(
                "{name} directory {lo:#x}..{hi:#x} runs past the end of section {} ({:#x})",
                s.name,
                s.rva_end()
            )),
            None => f.push(format!(
                "{name} directory at RVA {lo:#x} is not inside any section"
            )),
        }
    }

    // Debug directory: each entry's file copy is the bytes its RVA maps.
    if let Some(d) = image.dir(DIR_DEBUG)
        && let Some(dir_off) = image.offset_of(u64::from(d.rva))
    {
        for k in 0..u64::from(d.size) / DEBUG_ENTRY_SIZE {
            let e = dir_off + k * DEBUG_ENTRY_SIZE;
            let (Some(size), Some(rva), Some(ptr)) = (
                u32_at(data, e + 16),
                u32_at(data, e + 20),
                u32_at(data, e + 24),
            ) else {
                f.push(format!(
                    "debug directory entry {k} at {e:#x} runs past the end of the file"
                ));
                // Every later entry does too; a 4 GiB directory size must
                // not become ~150 million findings (found by the
                // pe_offload fuzz target).
                break;
            };
            let (size, rva, ptr) = (u64::from(size), u64::from(rva), u64::from(ptr));
            if ptr == 0 {
                continue;
            }
            if ptr + size > file_len {
                f.push(format!(
                    "debug directory entry {k}: PointerToRawData {ptr:#x}+{size:#x} runs past the end of the file"
                ));
                continue;
            }
            if rva != 0
                && let Some(mem) = image.offset_of(rva)
                && data.get(mem as usize..(mem + size) as usize)
                    != data.get(ptr as usize..(ptr + size) as usize)
            {
                f.push(format!(
                    "debug directory entry {k}: PointerToRawData {ptr:#x} does not hold the bytes at AddressOfRawData {rva:#x} (file offset {mem:#x})"
                ));
            }
        }
    }

    // Base relocations: every site inside a section.
    for &(rva, typ) in &image.base_relocs {
        let width = if typ == pe::IMAGE_REL_BASED_DIR64 {
            8
        } else {
            4
        };
        match image.section_at(u64::from(rva)) {
            Some((_, s)) if u64::from(rva) + width <= s.rva_end() => {}
            _ => f.push(format!(
                "base relocation at RVA {rva:#x} (type {typ}) is not inside a section"
            )),
        }
    }

    if image.symtab_ptr != 0 {
        let end = u64::from(image.symtab_ptr) + 18 * u64::from(image.nsyms);
        if end > file_len {
            f.push(format!(
                "COFF symbol table at {:#x} ({} symbols) runs past the end of the file",
                image.symtab_ptr, image.nsyms
            ));
        }
    }
    if image.checksum != 0 {
        let c = checksum(data, image.checksum_offset());
        if c != image.checksum {
            f.push(format!(
                "CheckSum {:#x} does not match the image ({c:#x})",
                image.checksum
            ));
        }
    }
    kpack_checks(&image, data, &mut f);
    f
}

/// Marker and wrappers.
fn kpack_checks(image: &Image, data: &[u8], f: &mut Vec<String>) {
    let marker = image.section(MARKER_SECTION).map(|(_, s)| s);
    if let Some(m) = marker {
        if m.characteristics != MARKER_CHARACTERISTICS {
            f.push(format!(
                "section {MARKER_SECTION}: characteristics {:#x}, expected {MARKER_CHARACTERISTICS:#x}",
                m.characteristics
            ));
        }
        if m.raw_size < m.virtual_size {
            f.push(format!(
                "section {MARKER_SECTION}: only {:#x} of its {:#x} bytes are in the file",
                m.raw_size, m.virtual_size
            ));
        }
        let (off, len) = m.file_range();
        match data.get(off as usize..(off + len) as usize) {
            Some(bytes) => {
                if let Err(e) = Marker::parse(bytes) {
                    f.push(format!(
                        "section {MARKER_SECTION} at {off:#x}: marker does not parse: {e}"
                    ));
                }
            }
            None => f.push(format!(
                "section {MARKER_SECTION}: raw data {off:#x}+{len:#x} runs past the end of the file"
            )),
        }
    }
    let Some((_, seg)) = image.section(SEGMENT_SECTION) else {
        return;
    };
    let (off, len) = seg.file_range();
    let Some(bytes) = data.get(off as usize..(off + len) as usize) else {
        f.push(format!(
            "section {SEGMENT_SECTION}: raw data {off:#x}+{len:#x} runs past the end of the file"
        ));
        return;
    };
    if !len.is_multiple_of(WRAPPER_SIZE) {
        f.push(format!(
            "section {SEGMENT_SECTION} is {len:#x} bytes, not a multiple of {WRAPPER_SIZE}"
        ));
    }
    let mut hipk = 0;
    let n = bytes.len() / WRAPPER_SIZE as usize;
    for (i, w) in bytes.chunks_exact(WRAPPER_SIZE as usize).enumerate() {
        let at = off + i as u64 * WRAPPER_SIZE;
        let magic = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        let pointer = u64::from_le_bytes([w[8], w[9], w[10], w[11], w[12], w[13], w[14], w[15]]);
        match magic {
            HIPF => {}
            HIPK => {
                hipk += 1;
                match marker {
                    None => f.push(format!(
                        "wrapper {i} at {at:#x} is HIPK but there is no {MARKER_SECTION} section"
                    )),
                    Some(m) => {
                        let va = image.image_base.wrapping_add(u64::from(m.virtual_address));
                        if pointer != va {
                            f.push(format!(
                                "wrapper {i} at {at:#x} points at {pointer:#x}, not at the marker ({va:#x})"
                            ));
                        }
                    }
                }
            }
            other => f.push(format!(
                "wrapper {i} at {at:#x} has magic {other:#010x}, neither HIPF nor HIPK"
            )),
        }
    }
    if hipk > 0 && hipk < n {
        f.push(format!(
            "section {SEGMENT_SECTION}: {hipk} of {n} wrappers are HIPK; a transform rewrites all"
        ));
    }
    if hipk > 0
        && let Some((_, fat)) = image.section(FATBIN_SECTION)
    {
        let (lo, hi) = (u64::from(fat.virtual_address), fat.rva_end());
        for &(rva, typ) in &image.base_relocs {
            if typ != pe::IMAGE_REL_BASED_DIR64 {
                continue;
            }
            let Some(v) = image
                .offset_of(u64::from(rva))
                .and_then(|o| u64_at(data, o))
            else {
                continue;
            };
            let t = v.wrapping_sub(image.image_base);
            if t >= lo && t < hi {
                f.push(format!(
                    "base relocation at RVA {rva:#x} points into {FATBIN_SECTION} ({v:#x}), whose device code was removed"
                ));
            }
        }
    }
}

fn u32_at(data: &[u8], at: u64) -> Option<u32> {
    let at = usize::try_from(at).ok()?;
    Some(u32::from_le_bytes(
        data.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(data: &[u8], at: u64) -> Option<u64> {
    let at = usize::try_from(at).ok()?;
    Some(u64::from_le_bytes(
        data.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}
