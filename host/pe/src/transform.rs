//! Turn a PE32+ fat binary into a host-only image: plan every offset first,
//! then assemble the bytes, then patch the fields the plan named.
//!
//! The device code leaves the file but not the address space: `.hip_fat`
//! keeps its `VirtualAddress` and `VirtualSize` and gets `SizeOfRawData` 0
//! (the loader zero-fills it, as for `.bss`-like `.data`), so no RVA of
//! anything changes and no base relocation needs editing. The marker is a
//! new `.kpackrf` section after the last one in memory; its raw data goes
//! after the last section's raw data, before anything that trails the
//! sections (COFF symbol table, certificate table, overlay), which moves
//! with the file offsets. Every field that holds a *file offset* is
//! rewritten through one mapping: section raw pointers, the COFF symbol
//! table pointer, debug directory entries' `PointerToRawData` and the
//! certificate table's directory entry (AMD's tool misses the last three).
//!
//! ```text
//! before: [hdrs|room][.text][.rdata]..[.hipFatB][.hip_fat (device code)][.reloc]..[symtab|cert|overlay]
//! after:  [hdrs+.kpackrf hdr][.text][.rdata]..[.hipFatB][.reloc]..[.kpackrf marker][symtab|cert|overlay]
//! ```
//!
//! When the section table has no room for one more 40-byte header (a linker
//! that fills `SizeOfHeaders` exactly, e.g. lld with long section names),
//! `SizeOfHeaders` grows by whole `FileAlignment` units and every raw offset
//! moves up by as much; this is allowed as long as the headers still end
//! before the first section's RVA. The device bytes removed are always at
//! least one `FileAlignment` unit, so the output is never larger than the
//! input by more than the marker's own alignment unit.

use std::path::Path;

use kpack_bundle::{HIPK, HostLayout as _, Magic};
use kpack_format::MARKER_MAX_LEN;
use object::pe;

use crate::error::{Error, ErrorKind};
use crate::image::{
    DEBUG_ENTRY_SIZE, DIR_DEBUG, DIR_SECURITY, Image, SECTION_HEADER_SIZE, Section, checksum, opt,
    u32_at, u64_at,
};
use crate::read::{
    FATBIN_SECTION, FatBinary, MARKER_CHARACTERISTICS, MARKER_SECTION, PointerVia, SectionInfo,
    Wrapper, parse_error,
};

/// What the transform did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TransformReport {
    /// Input size in bytes.
    pub input_size: u64,
    /// Output size in bytes.
    pub output_size: u64,
    /// Device-code bytes that left the file (`.hip_fat`'s `SizeOfRawData`).
    pub bytes_removed: u64,
    /// Virtual address of the marker at the preferred image base.
    pub marker_addr: u64,
    /// RVA of the marker section.
    pub marker_rva: u32,
    /// Wrappers rewritten to HIPK.
    pub wrappers: usize,
    /// Wrapper pointer slots rebased by a DIR64 base relocation (kept as is:
    /// it now rebases the marker's VA).
    pub relocations: usize,
    /// Base relocations checked not to point into `.hip_fat`.
    pub base_relocations_audited: usize,
    /// Bytes `SizeOfHeaders` grew by to make room for the marker's header.
    pub headers_grown: u64,
    /// Debug directory entries whose `PointerToRawData` moved.
    pub debug_entries_moved: usize,
    /// `true` when the image had a nonzero `CheckSum`, now recomputed.
    pub checksum_recomputed: bool,
    /// `true` when the image carried a certificate table (Authenticode
    /// signature): it is kept byte for byte, but no longer valid for the
    /// rewritten image.
    pub signature_invalidated: bool,
}

/// Where each old file offset goes in the output; see the module docs.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// Old `SizeOfHeaders`; offsets below it stay.
    old_headers: u64,
    /// Bytes inserted at `old_headers`.
    growth: u64,
    /// Old file range that leaves (the device code).
    removed: (u64, u64),
    /// Old offset where the marker's raw data is inserted.
    insert_at: u64,
    /// Raw size of the marker section (`FileAlignment` multiple).
    marker_raw: u64,
}

impl Plan {
    /// The new offset of old offset `x`, or `None` if its byte leaves.
    fn map(&self, x: u64) -> Option<u64> {
        let (rs, re) = self.removed;
        if x < self.old_headers {
            return Some(x);
        }
        if x >= rs && x < re {
            return None;
        }
        let mut y = x + self.growth;
        if x >= re {
            y -= re - rs;
        }
        if x >= self.insert_at {
            y += self.marker_raw;
        }
        Some(y)
    }
}

/// Rewrite the fat binary at `input` (already read as `fat`) into a
/// host-only image carrying `marker` (msgpack bytes). Returns the new file
/// bytes; nothing is written.
pub fn transform(
    input: &Path,
    fat: &FatBinary,
    marker: &[u8],
) -> Result<(Vec<u8>, TransformReport), Error> {
    let (fb, patches) = offloadable(input, fat, marker)?;
    let data = read_whole(input, fat)?;
    let image = Image::parse(&data[..]).map_err(|e| parse_error(input, e))?;
    let (fat_index, fat_sec) = image
        .section(FATBIN_SECTION)
        .filter(|(i, _)| *i == fb.index)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::Malformed,
                input,
                format!("{FATBIN_SECTION} changed since it was read"),
            )
        })?;
    let plan = plan(input, &image, &data, fat_index, marker.len() as u64)?;
    let placed = MarkerPlace::after_every_section(input, &image, marker.len() as u64)?;
    let (out, marker_offset) = assemble(&data, &plan, marker);
    let mut w = Patcher {
        input,
        image: &image,
        data: &data,
        plan,
        out,
    };
    w.headers(fat_index, fat_sec, &placed)?;
    w.marker_header(marker.len(), marker_offset, &placed)?;
    let signed = w.certificate_table()?;
    let debug_entries_moved = w.debug_entries()?;
    let relocations = w.wrappers(&patches, placed.addr)?;
    let audited = w.audit_base_relocations(fat_sec)?;
    let mut out = w.out;
    let checksum_recomputed = image.checksum != 0;
    if checksum_recomputed {
        let c = checksum(&out, image.checksum_offset());
        put(&mut out, image.checksum_offset(), &c.to_le_bytes());
    }
    let report = TransformReport {
        input_size: data.len() as u64,
        output_size: out.len() as u64,
        bytes_removed: plan.removed.1 - plan.removed.0,
        marker_addr: placed.addr,
        marker_rva: placed.rva,
        wrappers: patches.len(),
        relocations,
        base_relocations_audited: audited,
        headers_grown: plan.growth,
        debug_entries_moved,
        checksum_recomputed,
        signature_invalidated: signed,
    };
    Ok((out, report))
}

/// One wrapper to redirect: its file offset, its co_index and whether a
/// DIR64 base relocation rebases its pointer slot.
struct WrapperPatch {
    file_offset: u64,
    co_index: u64,
    rebased: bool,
}

/// `.hip_fat` and the wrappers to redirect, or why `fat` cannot be
/// offloaded with `marker`.
fn offloadable<'f>(
    input: &Path,
    fat: &'f FatBinary,
    marker: &[u8],
) -> Result<(&'f SectionInfo, Vec<WrapperPatch>), Error> {
    let fail = |kind, msg: String| Error::new(kind, input, msg);
    if let Some(why) = fat.already_offloaded(MARKER_SECTION) {
        return Err(fail(ErrorKind::AlreadyTransformed, why));
    }
    let Some(fb) = fat.fatbin.as_ref() else {
        return Err(fail(
            ErrorKind::Offload,
            format!("no {FATBIN_SECTION} section: nothing to offload"),
        ));
    };
    if fat.wrappers.is_empty() {
        return Err(fail(
            ErrorKind::Offload,
            format!("{FATBIN_SECTION} has no wrapper in .hipFatB pointing at it"),
        ));
    }
    if marker.is_empty() || marker.len() > MARKER_MAX_LEN {
        return Err(fail(
            ErrorKind::Layout,
            format!(
                "marker is {} bytes; it must be 1..={MARKER_MAX_LEN}",
                marker.len()
            ),
        ));
    }
    let patches = fat
        .wrappers
        .iter()
        .map(|w| wrapper_patch(input, w))
        .collect::<Result<_, _>>()?;
    Ok((fb, patches))
}

/// How wrapper `w` is redirected, or why it cannot be.
fn wrapper_patch(input: &Path, w: &Wrapper) -> Result<WrapperPatch, Error> {
    if w.magic != Magic::Hipf {
        return Err(Error::new(
            ErrorKind::Offload,
            input,
            format!(
                "wrapper {} at file offset {:#x} has magic {:?}, expected HIPF",
                w.index, w.file_offset, w.magic
            ),
        ));
    }
    let Some(bundle) = w.bundle else {
        return Err(Error::new(
            ErrorKind::Offload,
            input,
            format!(
                "wrapper {} at file offset {:#x} does not point at a bundle",
                w.index, w.file_offset
            ),
        ));
    };
    Ok(WrapperPatch {
        file_offset: w.file_offset,
        co_index: bundle as u64,
        rebased: w.via == PointerVia::BaseReloc,
    })
}

/// The whole file: everything but the device code is copied anyway.
fn read_whole(input: &Path, fat: &FatBinary) -> Result<Vec<u8>, Error> {
    let src = &fat.source;
    let len = usize::try_from(kpack_bundle::ReadAt::size(src))
        .map_err(|_| Error::new(ErrorKind::Layout, input, "file too large"))?;
    let mut data = vec![0u8; len];
    kpack_bundle::ReadAt::read_exact_at(src, 0, &mut data)
        .map_err(|e| Error::io(input, "cannot read the image", e))?;
    Ok(data)
}

/// Where the marker section goes in memory: after every section.
struct MarkerPlace {
    /// Its RVA.
    rva: u32,
    /// Its VA at the preferred image base.
    addr: u64,
    /// `SizeOfImage` with it.
    size_of_image: u32,
}

impl MarkerPlace {
    fn after_every_section(
        input: &Path,
        image: &Image,
        marker_len: u64,
    ) -> Result<MarkerPlace, Error> {
        let sa = u64::from(image.section_alignment);
        let mem_end = image
            .sections
            .iter()
            .map(|s| s.rva_end())
            .fold(u64::from(image.size_of_image), u64::max);
        let marker_rva = mem_end.next_multiple_of(sa);
        let size_of_image = marker_rva + marker_len.next_multiple_of(sa);
        let fits = |x: u64| u32::try_from(x).ok();
        match (fits(marker_rva), fits(size_of_image)) {
            (Some(rva), Some(size_of_image)) => Ok(MarkerPlace {
                rva,
                addr: image.image_base.wrapping_add(marker_rva),
                size_of_image,
            }),
            _ => Err(Error::new(
                ErrorKind::Layout,
                input,
                format!("no RVA left for {MARKER_SECTION} after {mem_end:#x}"),
            )),
        }
    }
}

/// The output bytes: headers (+growth), sections before the device code,
/// after it, the marker, then whatever trails the sections. Returns them
/// and the marker's file offset.
fn assemble(data: &[u8], plan: &Plan, marker: &[u8]) -> (Vec<u8>, u64) {
    let (rs, re) = plan.removed;
    let file_len = data.len() as u64;
    let at = |a: u64, b: u64| &data[a as usize..b as usize];
    let mut out = Vec::with_capacity(data.len() + plan.growth as usize + plan.marker_raw as usize);
    out.extend_from_slice(at(0, plan.old_headers));
    out.resize(out.len() + plan.growth as usize, 0);
    out.extend_from_slice(at(plan.old_headers, rs));
    out.extend_from_slice(at(re, plan.insert_at));
    let marker_offset = out.len() as u64;
    out.extend_from_slice(marker);
    out.resize(out.len() + (plan.marker_raw as usize - marker.len()), 0);
    out.extend_from_slice(at(plan.insert_at, file_len));
    debug_assert_eq!(
        plan.map(plan.insert_at),
        Some(marker_offset + plan.marker_raw)
    );
    (out, marker_offset)
}

/// Patches the assembled image: every field the plan moved.
struct Patcher<'a> {
    input: &'a Path,
    image: &'a Image,
    /// The input bytes.
    data: &'a [u8],
    plan: Plan,
    out: Vec<u8>,
}

impl Patcher<'_> {
    fn fail(&self, kind: ErrorKind, msg: String) -> Error {
        Error::new(kind, self.input, msg)
    }

    /// The new offset of old file offset `x` (the position of `what`).
    fn mapped(&self, x: u64, what: &str) -> Result<u64, Error> {
        self.plan.map(x).ok_or_else(|| {
            self.fail(
                ErrorKind::Layout,
                format!("{what} at file offset {x:#x} lies inside {FATBIN_SECTION}'s raw data"),
            )
        })
    }

    fn u32_of(&self, x: u64, what: &str) -> Result<u32, Error> {
        u32::try_from(x).map_err(|_| {
            self.fail(
                ErrorKind::Layout,
                format!("{what} {x:#x} does not fit 32 bits"),
            )
        })
    }

    fn put(&mut self, at: u64, bytes: &[u8]) {
        put(&mut self.out, at, bytes);
    }

    /// The COFF header, the optional header and the section headers.
    fn headers(
        &mut self,
        fat_index: usize,
        fat_sec: &Section,
        placed: &MarkerPlace,
    ) -> Result<(), Error> {
        let image = self.image;
        let nsec = u16::try_from(image.sections.len() + 1)
            .map_err(|_| self.fail(ErrorKind::Layout, "too many sections".into()))?;
        self.put(image.coff_offset + 2, &nsec.to_le_bytes());
        if image.symtab_ptr != 0 {
            let p = self.mapped(u64::from(image.symtab_ptr), "COFF symbol table")?;
            let p = self.u32_of(p, "symbol table offset")?;
            self.put(image.coff_offset + 8, &p.to_le_bytes());
        }
        let init = u64::from(image.size_of_initialized_data)
            .saturating_sub(u64::from(fat_sec.raw_size))
            + self.plan.marker_raw;
        let init = self.u32_of(init, "SizeOfInitializedData")?;
        self.put(
            image.opt_offset + opt::SIZE_OF_INITIALIZED_DATA,
            &init.to_le_bytes(),
        );
        self.put(
            image.opt_offset + opt::SIZE_OF_IMAGE,
            &placed.size_of_image.to_le_bytes(),
        );
        let headers = self.u32_of(self.plan.old_headers + self.plan.growth, "SizeOfHeaders")?;
        self.put(
            image.opt_offset + opt::SIZE_OF_HEADERS,
            &headers.to_le_bytes(),
        );
        for (i, s) in image.sections.iter().enumerate() {
            self.section_header(s, i == fat_index)?;
        }
        Ok(())
    }

    /// Section `s`'s header: `.hip_fat` loses its raw data; every other
    /// section's file offsets move.
    fn section_header(&mut self, s: &Section, is_fatbin: bool) -> Result<(), Error> {
        let h = s.header_offset;
        if is_fatbin {
            self.put(h + 16, &0u32.to_le_bytes());
            self.put(h + 20, &0u32.to_le_bytes());
            return Ok(());
        }
        for (field, value, what) in [
            (20, s.raw_ptr, "PointerToRawData"),
            (24, s.ptr_relocs, "PointerToRelocations"),
            (28, s.ptr_lines, "PointerToLinenumbers"),
        ] {
            if value != 0 && (field != 20 || s.raw_size != 0) {
                let what = format!("section {}: {what}", s.name);
                let p = self.mapped(u64::from(value), &what)?;
                let p = self.u32_of(p, &what)?;
                self.put(h + field, &p.to_le_bytes());
            }
        }
        Ok(())
    }

    /// The new `.kpackrf` section header, after the last one.
    fn marker_header(
        &mut self,
        marker_len: usize,
        marker_offset: u64,
        placed: &MarkerPlace,
    ) -> Result<(), Error> {
        let image = self.image;
        let h = image.section_table_offset + image.sections.len() as u64 * SECTION_HEADER_SIZE;
        let mut header = [0u8; SECTION_HEADER_SIZE as usize];
        header[..8].copy_from_slice(MARKER_SECTION.as_bytes());
        header[8..12].copy_from_slice(&(marker_len as u32).to_le_bytes());
        header[12..16].copy_from_slice(&placed.rva.to_le_bytes());
        let raw = self.u32_of(self.plan.marker_raw, "marker raw size")?;
        header[16..20].copy_from_slice(&raw.to_le_bytes());
        let offset = self.u32_of(marker_offset, "marker offset")?;
        header[20..24].copy_from_slice(&offset.to_le_bytes());
        header[36..40].copy_from_slice(&MARKER_CHARACTERISTICS.to_le_bytes());
        self.put(h, &header);
        Ok(())
    }

    /// The certificate table's directory entry holds a file offset.
    /// Returns `true` when there is one (the image was signed).
    fn certificate_table(&mut self) -> Result<bool, Error> {
        let Some(d) = self.image.dir(DIR_SECURITY) else {
            return Ok(false);
        };
        let p = self.mapped(u64::from(d.rva), "certificate table")?;
        let p = self.u32_of(p, "certificate table offset")?;
        self.put(self.image.dir_offset(DIR_SECURITY), &p.to_le_bytes());
        Ok(true)
    }

    /// Debug directory entries: `PointerToRawData` is a file offset.
    /// Returns how many moved.
    fn debug_entries(&mut self) -> Result<usize, Error> {
        let Some(d) = self.image.dir(DIR_DEBUG) else {
            return Ok(0);
        };
        let dir_off = self.image.offset_of(u64::from(d.rva)).ok_or_else(|| {
            self.fail(
                ErrorKind::Malformed,
                format!("debug directory at RVA {:#x} has no file bytes", d.rva),
            )
        })?;
        let mut moved = 0;
        for k in 0..u64::from(d.size) / DEBUG_ENTRY_SIZE {
            let old = dir_off + k * DEBUG_ENTRY_SIZE;
            let ptr = u32_at(self.data, old + 24).ok_or_else(|| {
                self.fail(
                    ErrorKind::Malformed,
                    format!("debug directory entry {k} at {old:#x} runs past the end of the file"),
                )
            })?;
            if ptr == 0 {
                continue;
            }
            let what = format!("debug directory entry {k}: PointerToRawData");
            let p = self.u32_of(self.mapped(u64::from(ptr), &what)?, &what)?;
            if p != ptr {
                moved += 1;
            }
            let entry = self.mapped(old, "debug directory")?;
            self.put(entry + 24, &p.to_le_bytes());
        }
        Ok(moved)
    }

    /// Wrappers: HIPK, the marker's VA (the DIR64 base relocation of the
    /// slot, if any, rebases it like it rebased the bundle's), co_index.
    /// Returns how many slots a base relocation rebases.
    fn wrappers(&mut self, patches: &[WrapperPatch], marker_addr: u64) -> Result<usize, Error> {
        let mut relocations = 0;
        for patch in patches {
            let p = self.mapped(patch.file_offset, "wrapper")?;
            self.put(p, &HIPK.to_le_bytes());
            self.put(p + 8, &marker_addr.to_le_bytes());
            self.put(p + 16, &patch.co_index.to_le_bytes());
            relocations += usize::from(patch.rebased);
        }
        Ok(relocations)
    }

    /// No base relocation may patch, or point into, `.hip_fat`. Returns
    /// how many DIR64 relocations were checked.
    fn audit_base_relocations(&self, fat_sec: &Section) -> Result<usize, Error> {
        let image = self.image;
        let fat_lo = u64::from(fat_sec.virtual_address);
        let fat_hi = fat_sec.rva_end();
        let mut audited = 0;
        for &(rva, typ) in &image.base_relocs {
            let rva = u64::from(rva);
            if rva >= fat_lo && rva < fat_hi {
                return Err(self.fail(
                    ErrorKind::Layout,
                    format!(
                        "base relocation at RVA {rva:#x} patches {FATBIN_SECTION}, whose bytes leave the file"
                    ),
                ));
            }
            if typ != pe::IMAGE_REL_BASED_DIR64 {
                continue;
            }
            let Some(value) = image
                .offset_of(rva)
                .and_then(|old| self.plan.map(old))
                .and_then(|p| u64_at(&self.out, p))
            else {
                continue;
            };
            audited += 1;
            let target = value.wrapping_sub(image.image_base);
            if target >= fat_lo && target < fat_hi {
                return Err(self.fail(
                    ErrorKind::Offload,
                    format!(
                        "base relocation at RVA {rva:#x} still points into {FATBIN_SECTION} (VA {value:#x}): not every pointer to the device code was redirected"
                    ),
                ));
            }
        }
        Ok(audited)
    }
}

/// Decide where everything goes, checking the layout allows it.
fn plan(
    input: &Path,
    image: &Image,
    data: &[u8],
    fat_index: usize,
    marker_len: u64,
) -> Result<Plan, Error> {
    let fail = |kind, msg: String| Error::new(kind, input, msg);
    let fa = u64::from(image.file_alignment);
    let sa = u64::from(image.section_alignment);
    if !fa.is_power_of_two() || !sa.is_power_of_two() || fa > sa {
        return Err(fail(
            ErrorKind::Malformed,
            format!(
                "FileAlignment {fa:#x} / SectionAlignment {sa:#x} are not powers of two with FileAlignment <= SectionAlignment"
            ),
        ));
    }
    let file_len = image.file_len;
    let raw_end = image.raw_end();
    if raw_end > file_len {
        return Err(fail(
            ErrorKind::Malformed,
            format!(
                "section raw data ends at {raw_end:#x}, past the end of the file ({file_len:#x})"
            ),
        ));
    }
    if !raw_end.is_multiple_of(fa) {
        return Err(fail(
            ErrorKind::Layout,
            format!(
                "section raw data ends at {raw_end:#x}, not a multiple of FileAlignment {fa:#x}"
            ),
        ));
    }
    let removed = removed_range(input, image, fat_index, raw_end)?;
    Ok(Plan {
        old_headers: u64::from(image.size_of_headers),
        growth: header_growth(input, image, data)?,
        removed,
        insert_at: raw_end,
        marker_raw: marker_len.next_multiple_of(fa),
    })
}

/// The file range `.hip_fat`'s raw data leaves (empty at `raw_end` when it
/// has none), checked to be aligned and shared with no other section.
fn removed_range(
    input: &Path,
    image: &Image,
    fat_index: usize,
    raw_end: u64,
) -> Result<(u64, u64), Error> {
    let fail = |msg: String| Error::new(ErrorKind::Layout, input, msg);
    let fa = u64::from(image.file_alignment);
    let old_headers = u64::from(image.size_of_headers);
    let fat = &image.sections[fat_index];
    let removed = if fat.raw_size == 0 {
        (raw_end, raw_end)
    } else {
        let (s, e) = (
            u64::from(fat.raw_ptr),
            u64::from(fat.raw_ptr) + u64::from(fat.raw_size),
        );
        if s < old_headers || !s.is_multiple_of(fa) || !e.is_multiple_of(fa) {
            return Err(fail(format!(
                "section {FATBIN_SECTION}: raw data {s:#x}..{e:#x} is not FileAlignment-aligned ({fa:#x}) after the headers ({old_headers:#x})"
            )));
        }
        (s, e)
    };
    for (i, s) in image.sections.iter().enumerate() {
        let (a, b) = (
            u64::from(s.raw_ptr),
            u64::from(s.raw_ptr) + u64::from(s.raw_size),
        );
        if i != fat_index && s.raw_size > 0 && a < removed.1 && b > removed.0 {
            return Err(fail(format!(
                "section {}: raw data {a:#x}..{b:#x} overlaps {FATBIN_SECTION}'s",
                s.name
            )));
        }
        if s.raw_size > 0 && a < old_headers {
            return Err(fail(format!(
                "section {}: raw data at {a:#x} lies inside the headers ({old_headers:#x})",
                s.name
            )));
        }
    }
    Ok(removed)
}

/// Bytes `SizeOfHeaders` grows by to make room for one more section
/// header; the bytes the header takes must be unused.
fn header_growth(input: &Path, image: &Image, data: &[u8]) -> Result<u64, Error> {
    let fail = |kind, msg: String| Error::new(kind, input, msg);
    let fa = u64::from(image.file_alignment);
    let sa = u64::from(image.section_alignment);
    let file_len = image.file_len;
    let old_headers = u64::from(image.size_of_headers);
    let table_end = image.section_table_offset + image.sections.len() as u64 * SECTION_HEADER_SIZE;
    let need = table_end + SECTION_HEADER_SIZE;
    if table_end > old_headers || table_end > file_len {
        return Err(fail(
            ErrorKind::Malformed,
            format!("section table ends at {table_end:#x}, past SizeOfHeaders {old_headers:#x}"),
        ));
    }
    // The new header overwrites the bytes after the table: they must be
    // unused (some linkers keep bound imports there).
    let used = need.min(old_headers).min(file_len);
    if let Some(at) = data[table_end as usize..used as usize]
        .iter()
        .position(|&b| b != 0)
    {
        return Err(fail(
            ErrorKind::Layout,
            format!(
                "no room for a {MARKER_SECTION} section header: byte {:#x} after the section table is in use",
                table_end + at as u64
            ),
        ));
    }
    if need <= old_headers {
        return Ok(0);
    }
    let new_headers = need.next_multiple_of(fa);
    let first_rva = image
        .sections
        .iter()
        .map(|s| u64::from(s.virtual_address))
        .min()
        .unwrap_or(u64::MAX);
    if new_headers.next_multiple_of(sa) > first_rva {
        return Err(fail(
            ErrorKind::Layout,
            format!(
                "no room for a {MARKER_SECTION} section header: the section table ends at {table_end:#x}, SizeOfHeaders is {old_headers:#x} and the first section starts at RVA {first_rva:#x}"
            ),
        ));
    }
    Ok(new_headers - old_headers)
}

fn put(out: &mut [u8], at: u64, bytes: &[u8]) {
    // Every offset patched comes from the plan, inside the assembled image.
    let at = at as usize;
    if let Some(dst) = out.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_maps_offsets_around_the_removed_range_and_the_marker() {
        let p = Plan {
            old_headers: 0x400,
            growth: 0x200,
            removed: (0x1000, 0x3000),
            insert_at: 0x4000,
            marker_raw: 0x200,
        };
        assert_eq!(p.map(0x10), Some(0x10));
        assert_eq!(p.map(0x400), Some(0x600));
        assert_eq!(p.map(0xfff), Some(0x11ff));
        assert_eq!(p.map(0x1000), None);
        assert_eq!(p.map(0x2fff), None);
        assert_eq!(p.map(0x3000), Some(0x1200));
        assert_eq!(p.map(0x4000), Some(0x2400));
    }
}
