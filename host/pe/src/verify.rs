//! Structural checks of a PE32+ image after (or without) the transform:
//! what the loader and the PE/COFF specification require of the layout,
//! and what kpack promises (marker parsable, wrappers redirected to it, no
//! base relocation into the removed device code).

use kpack_bundle::{Magic, WRAPPER_SIZE, WrapperFields};
use kpack_format::{Finding, Marker, error_chain};
use object::pe;

use crate::image::{DEBUG_ENTRY_SIZE, DIR_DEBUG, DIR_SECURITY, Image, checksum, u32_at, u64_at};
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

/// Check the PE image `data` (the whole file). Returns one finding (check
/// `pe`, an error, its path left to the caller) per problem, each naming
/// the section or structure and the offset in hex; empty means the image
/// passed.
pub fn verify_image(data: &[u8]) -> Vec<Finding> {
    check_image(data)
        .into_iter()
        .map(|m| Finding::error("pe", m))
        .collect()
}

fn check_image(data: &[u8]) -> Vec<String> {
    let image = match Image::parse(data) {
        Ok(i) => i,
        Err(e) => return vec![error_chain(&e)],
    };
    let mut c = Checks {
        image: &image,
        data,
        file_len: data.len() as u64,
        f: Vec::new(),
    };
    if !c.alignments() {
        return c.f;
    }
    c.headers();
    c.raw_data();
    c.memory();
    c.directories();
    c.debug_entries();
    c.base_relocations();
    c.symbols_and_checksum();
    c.marker();
    c.wrappers();
    c.f
}

/// The image under check and the findings so far.
struct Checks<'a> {
    image: &'a Image,
    data: &'a [u8],
    file_len: u64,
    f: Vec<String>,
}

impl Checks<'_> {
    fn fa(&self) -> u64 {
        u64::from(self.image.file_alignment)
    }

    fn sa(&self) -> u64 {
        u64::from(self.image.section_alignment)
    }

    /// FileAlignment and SectionAlignment; `false` when nothing else can
    /// be checked.
    fn alignments(&mut self) -> bool {
        let (fa, sa) = (self.fa(), self.sa());
        if !fa.is_power_of_two() || !sa.is_power_of_two() || fa > sa {
            self.f.push(format!(
                "FileAlignment {fa:#x} and SectionAlignment {sa:#x} must be powers of two with FileAlignment <= SectionAlignment"
            ));
            return false;
        }
        if !(0x200..=0x10000).contains(&fa) && fa != sa {
            self.f
                .push(format!("FileAlignment {fa:#x} is outside 0x200..0x10000"));
        }
        true
    }

    /// `SizeOfHeaders`: aligned, holding the section table, in the file.
    fn headers(&mut self) {
        let (fa, file_len) = (self.fa(), self.file_len);
        let headers = u64::from(self.image.size_of_headers);
        let table_end = self.image.section_table_offset + 40 * self.image.sections.len() as u64;
        if !headers.is_multiple_of(fa) {
            self.f.push(format!(
                "SizeOfHeaders {headers:#x} is not a multiple of FileAlignment {fa:#x}"
            ));
        }
        if table_end > headers {
            self.f.push(format!(
                "section table ends at {table_end:#x}, past SizeOfHeaders {headers:#x}"
            ));
        }
        if headers > file_len {
            self.f.push(format!(
                "SizeOfHeaders {headers:#x} is past the end of the file ({file_len:#x})"
            ));
        }
    }

    /// Raw data: aligned, inside the file, after the headers, no overlaps.
    fn raw_data(&mut self) {
        let (fa, file_len) = (self.fa(), self.file_len);
        let headers = u64::from(self.image.size_of_headers);
        let mut raw: Vec<(u64, u64, &str)> = Vec::new();
        for s in &self.image.sections {
            let (p, n) = (u64::from(s.raw_ptr), u64::from(s.raw_size));
            if n == 0 {
                continue;
            }
            let name = &s.name;
            if !p.is_multiple_of(fa) {
                self.f.push(format!(
                    "section {name}: PointerToRawData {p:#x} is not a multiple of FileAlignment {fa:#x}"
                ));
            }
            if !n.is_multiple_of(fa) {
                self.f.push(format!(
                    "section {name}: SizeOfRawData {n:#x} is not a multiple of FileAlignment {fa:#x}"
                ));
            }
            if p + n > file_len {
                self.f.push(format!(
                    "section {name}: raw data {p:#x}..{:#x} runs past the end of the file ({file_len:#x})",
                    p + n
                ));
            }
            if p < headers {
                self.f.push(format!(
                    "section {name}: raw data at {p:#x} lies inside the headers ({headers:#x})"
                ));
            }
            raw.push((p, p + n, name));
        }
        raw.sort();
        for w in raw.windows(2) {
            if w[1].0 < w[0].1 {
                self.f.push(format!(
                    "sections {} ({:#x}..{:#x}) and {} ({:#x}..{:#x}) overlap in the file",
                    w[0].2, w[0].0, w[0].1, w[1].2, w[1].0, w[1].1
                ));
            }
        }
    }

    /// Memory: aligned, ascending, no overlaps, SizeOfImage covers all.
    fn memory(&mut self) {
        let sa = self.sa();
        let mut prev_end = u64::from(self.image.size_of_headers).next_multiple_of(sa);
        for s in &self.image.sections {
            let va = u64::from(s.virtual_address);
            if !va.is_multiple_of(sa) {
                self.f.push(format!(
                    "section {}: VirtualAddress {va:#x} is not a multiple of SectionAlignment {sa:#x}",
                    s.name
                ));
            }
            if va < prev_end {
                self.f.push(format!(
                    "section {}: VirtualAddress {va:#x} is below the end of what precedes it ({prev_end:#x})",
                    s.name
                ));
            }
            prev_end = s.rva_end().next_multiple_of(sa);
        }
        let soi = u64::from(self.image.size_of_image);
        if soi != prev_end {
            self.f.push(format!(
                "SizeOfImage {soi:#x} is not the end of the last section rounded to SectionAlignment ({prev_end:#x})"
            ));
        }
    }

    /// Data directories inside one section (the certificate table: a
    /// file range).
    fn directories(&mut self) {
        let image = self.image;
        for (i, d) in image.dirs.iter().enumerate() {
            if d.rva == 0 && d.size == 0 {
                continue;
            }
            let name = DIR_NAMES.get(i).copied().unwrap_or("unknown");
            let (lo, hi) = (u64::from(d.rva), u64::from(d.rva) + u64::from(d.size));
            if i == DIR_SECURITY {
                self.certificate_table(lo, hi);
                continue;
            }
            match image.section_at(lo) {
                Some((_, s)) if hi <= s.rva_end() => {}
                Some((_, s)) => self.f.push(format!(
                    "{name} directory {lo:#x}..{hi:#x} runs past the end of section {} ({:#x})",
                    s.name,
                    s.rva_end()
                )),
                None => self.f.push(format!(
                    "{name} directory at RVA {lo:#x} is not inside any section"
                )),
            }
        }
    }

    /// The certificate table at file range `lo..hi`: aligned, in the file,
    /// after the section data.
    fn certificate_table(&mut self, lo: u64, hi: u64) {
        let file_len = self.file_len;
        if !lo.is_multiple_of(8) {
            self.f.push(format!(
                "certificate table at file offset {lo:#x} is not 8-byte aligned"
            ));
        }
        if hi > file_len {
            self.f.push(format!(
                "certificate table {lo:#x}..{hi:#x} runs past the end of the file ({file_len:#x})"
            ));
        }
        let raw_end = self.image.raw_end();
        if lo < raw_end {
            self.f.push(format!(
                "certificate table at file offset {lo:#x} lies before the end of the section data ({raw_end:#x})"
            ));
        }
    }

    /// Debug directory: each entry's file copy is the bytes its RVA maps.
    fn debug_entries(&mut self) {
        let (image, data) = (self.image, self.data);
        let Some(d) = image.dir(DIR_DEBUG) else {
            return;
        };
        let Some(dir_off) = image.offset_of(u64::from(d.rva)) else {
            return;
        };
        for k in 0..u64::from(d.size) / DEBUG_ENTRY_SIZE {
            let e = dir_off + k * DEBUG_ENTRY_SIZE;
            let (Some(size), Some(rva), Some(ptr)) = (
                u32_at(data, e + 16),
                u32_at(data, e + 20),
                u32_at(data, e + 24),
            ) else {
                self.f.push(format!(
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
            if ptr + size > self.file_len {
                self.f.push(format!(
                    "debug directory entry {k}: PointerToRawData {ptr:#x}+{size:#x} runs past the end of the file"
                ));
                continue;
            }
            if rva != 0
                && let Some(mem) = image.offset_of(rva)
                && data.get(mem as usize..(mem + size) as usize)
                    != data.get(ptr as usize..(ptr + size) as usize)
            {
                self.f.push(format!(
                    "debug directory entry {k}: PointerToRawData {ptr:#x} does not hold the bytes at AddressOfRawData {rva:#x} (file offset {mem:#x})"
                ));
            }
        }
    }

    /// Base relocations: every site inside a section.
    fn base_relocations(&mut self) {
        for &(rva, typ) in &self.image.base_relocs {
            let width = if typ == pe::IMAGE_REL_BASED_DIR64 {
                8
            } else {
                4
            };
            match self.image.section_at(u64::from(rva)) {
                Some((_, s)) if u64::from(rva) + width <= s.rva_end() => {}
                _ => self.f.push(format!(
                    "base relocation at RVA {rva:#x} (type {typ}) is not inside a section"
                )),
            }
        }
    }

    /// The COFF symbol table in the file; `CheckSum`, when set, right.
    fn symbols_and_checksum(&mut self) {
        let image = self.image;
        if image.symtab_ptr != 0 {
            let end = u64::from(image.symtab_ptr) + 18 * u64::from(image.nsyms);
            if end > self.file_len {
                self.f.push(format!(
                    "COFF symbol table at {:#x} ({} symbols) runs past the end of the file",
                    image.symtab_ptr, image.nsyms
                ));
            }
        }
        if image.checksum != 0 {
            let c = checksum(self.data, image.checksum_offset());
            if c != image.checksum {
                self.f.push(format!(
                    "CheckSum {:#x} does not match the image ({c:#x})",
                    image.checksum
                ));
            }
        }
    }

    /// The marker section: read-only data, all in the file, parsable.
    fn marker(&mut self) {
        let Some((_, m)) = self.image.section(MARKER_SECTION) else {
            return;
        };
        if m.characteristics != MARKER_CHARACTERISTICS {
            self.f.push(format!(
                "section {MARKER_SECTION}: characteristics {:#x}, expected {MARKER_CHARACTERISTICS:#x}",
                m.characteristics
            ));
        }
        if m.raw_size < m.virtual_size {
            self.f.push(format!(
                "section {MARKER_SECTION}: only {:#x} of its {:#x} bytes are in the file",
                m.raw_size, m.virtual_size
            ));
        }
        let (off, len) = m.file_range();
        match self.data.get(off as usize..(off + len) as usize) {
            Some(bytes) => {
                if let Err(e) = Marker::parse(bytes) {
                    self.f.push(format!(
                        "section {MARKER_SECTION} at {off:#x}: marker does not parse: {e}"
                    ));
                }
            }
            None => self.f.push(format!(
                "section {MARKER_SECTION}: raw data {off:#x}+{len:#x} runs past the end of the file"
            )),
        }
    }

    /// The wrappers: HIPF, or HIPK pointing at the marker, all or none;
    /// once HIPK, no base relocation into `.hip_fat`.
    fn wrappers(&mut self) {
        let Some((_, seg)) = self.image.section(SEGMENT_SECTION) else {
            return;
        };
        let (off, len) = seg.file_range();
        let Some(bytes) = self.data.get(off as usize..(off + len) as usize) else {
            self.f.push(format!(
                "section {SEGMENT_SECTION}: raw data {off:#x}+{len:#x} runs past the end of the file"
            ));
            return;
        };
        if !len.is_multiple_of(WRAPPER_SIZE) {
            self.f.push(format!(
                "section {SEGMENT_SECTION} is {len:#x} bytes, not a multiple of {WRAPPER_SIZE}"
            ));
        }
        let n = bytes.len() / WRAPPER_SIZE as usize;
        let mut hipk = 0;
        for (i, w) in bytes.chunks_exact(WRAPPER_SIZE as usize).enumerate() {
            let at = off + i as u64 * WRAPPER_SIZE;
            hipk += usize::from(self.wrapper(i, at, WrapperFields::parse(w)));
        }
        if hipk > 0 && hipk < n {
            self.f.push(format!(
                "section {SEGMENT_SECTION}: {hipk} of {n} wrappers are HIPK; a transform rewrites all"
            ));
        }
        if hipk > 0 {
            self.no_base_relocation_into_fatbin();
        }
    }

    /// Wrapper `i` at file offset `at`; `true` when it is HIPK.
    fn wrapper(&mut self, i: usize, at: u64, w: WrapperFields) -> bool {
        match w.magic {
            Magic::Hipf => false,
            Magic::Hipk => {
                match self.image.section(MARKER_SECTION) {
                    None => self.f.push(format!(
                        "wrapper {i} at {at:#x} is HIPK but there is no {MARKER_SECTION} section"
                    )),
                    Some((_, m)) => {
                        let va = self
                            .image
                            .image_base
                            .wrapping_add(u64::from(m.virtual_address));
                        let pointer = w.pointer;
                        if pointer != va {
                            self.f.push(format!(
                                "wrapper {i} at {at:#x} points at {pointer:#x}, not at the marker ({va:#x})"
                            ));
                        }
                    }
                }
                true
            }
            Magic::Other(other) => {
                self.f.push(format!(
                    "wrapper {i} at {at:#x} has magic {other:#010x}, neither HIPF nor HIPK"
                ));
                false
            }
        }
    }

    /// No DIR64 base relocation may hold a VA inside `.hip_fat`.
    fn no_base_relocation_into_fatbin(&mut self) {
        let image = self.image;
        let Some((_, fat)) = image.section(FATBIN_SECTION) else {
            return;
        };
        let (lo, hi) = (u64::from(fat.virtual_address), fat.rva_end());
        for &(rva, typ) in &image.base_relocs {
            if typ != pe::IMAGE_REL_BASED_DIR64 {
                continue;
            }
            let Some(v) = image
                .offset_of(u64::from(rva))
                .and_then(|o| u64_at(self.data, o))
            else {
                continue;
            };
            let t = v.wrapping_sub(image.image_base);
            if t >= lo && t < hi {
                self.f.push(format!(
                    "base relocation at RVA {rva:#x} points into {FATBIN_SECTION} ({v:#x}), whose device code was removed"
                ));
            }
        }
    }
}
