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

use kpack_bundle::{HIPK, Magic};
use kpack_format::MARKER_MAX_LEN;
use object::pe;

use crate::error::{Error, ErrorKind};
use crate::image::{
    DEBUG_ENTRY_SIZE, DIR_DEBUG, DIR_SECURITY, Image, SECTION_HEADER_SIZE, checksum, opt,
};
use crate::read::{
    FATBIN_SECTION, FatBinary, MARKER_CHARACTERISTICS, MARKER_SECTION, PointerVia, parse_error,
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
    let fail = |kind, msg: String| Error::new(kind, input, msg);
    if fat.is_transformed() {
        return Err(fail(
            ErrorKind::AlreadyTransformed,
            "already transformed by kpack (every wrapper is HIPK)".into(),
        ));
    }
    if fat.marker.is_some() {
        return Err(fail(
            ErrorKind::AlreadyTransformed,
            format!("already has a {MARKER_SECTION} section"),
        ));
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
    let mut patches = Vec::new();
    for w in &fat.wrappers {
        if w.magic != Magic::Hipf {
            return Err(fail(
                ErrorKind::Offload,
                format!(
                    "wrapper {} at file offset {:#x} has magic {:?}, expected HIPF",
                    w.index, w.file_offset, w.magic
                ),
            ));
        }
        let Some(bundle) = w.bundle else {
            return Err(fail(
                ErrorKind::Offload,
                format!(
                    "wrapper {} at file offset {:#x} does not point at a bundle",
                    w.index, w.file_offset
                ),
            ));
        };
        patches.push((w.file_offset, bundle as u64, w.via == PointerVia::BaseReloc));
    }

    // The whole file: everything but the device code is copied anyway.
    let src = &fat.source;
    let file_len = kpack_bundle::ReadAt::size(src);
    let mut data = vec![
        0u8;
        usize::try_from(file_len)
            .map_err(|_| fail(ErrorKind::Layout, "file too large".into()))?
    ];
    kpack_bundle::ReadAt::read_exact_at(src, 0, &mut data)
        .map_err(|e| Error::io(input, "cannot read the image", e))?;
    let image = Image::parse(&data[..]).map_err(|e| parse_error(input, e))?;
    let (fat_index, fat_sec) = image
        .section(FATBIN_SECTION)
        .filter(|(i, _)| *i == fb.index)
        .ok_or_else(|| {
            fail(
                ErrorKind::Malformed,
                format!("{FATBIN_SECTION} changed since it was read"),
            )
        })?;
    let plan = plan(input, &image, &data, fat_index, marker.len() as u64)?;
    let sa = u64::from(image.section_alignment);

    // The marker section goes after every section in memory.
    let mem_end = image
        .sections
        .iter()
        .map(|s| s.rva_end())
        .fold(u64::from(image.size_of_image), u64::max);
    let marker_rva = mem_end.next_multiple_of(sa);
    let new_size_of_image = marker_rva + (marker.len() as u64).next_multiple_of(sa);
    let marker_rva32 = u32::try_from(marker_rva)
        .ok()
        .filter(|_| new_size_of_image <= u64::from(u32::MAX))
        .ok_or_else(|| {
            fail(
                ErrorKind::Layout,
                format!("no RVA left for {MARKER_SECTION} after {mem_end:#x}"),
            )
        })?;
    let marker_addr = image.image_base.wrapping_add(marker_rva);

    // Assemble: headers (+growth), sections before the device code, after
    // it, the marker, then whatever trails the sections.
    let (rs, re) = plan.removed;
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

    let mapped = |x: u64, what: &str| {
        plan.map(x).ok_or_else(|| {
            fail(
                ErrorKind::Layout,
                format!("{what} at file offset {x:#x} lies inside {FATBIN_SECTION}'s raw data"),
            )
        })
    };
    let u32_of = |x: u64, what: &str| {
        u32::try_from(x).map_err(|_| {
            fail(
                ErrorKind::Layout,
                format!("{what} {x:#x} does not fit 32 bits"),
            )
        })
    };

    // COFF header.
    let nsec = u16::try_from(image.sections.len() + 1)
        .map_err(|_| fail(ErrorKind::Layout, "too many sections".into()))?;
    put(&mut out, image.coff_offset + 2, &nsec.to_le_bytes());
    if image.symtab_ptr != 0 {
        let p = mapped(u64::from(image.symtab_ptr), "COFF symbol table")?;
        put(
            &mut out,
            image.coff_offset + 8,
            &u32_of(p, "symbol table offset")?.to_le_bytes(),
        );
    }
    // Optional header.
    let init = u64::from(image.size_of_initialized_data)
        .saturating_sub(u64::from(fat_sec.raw_size))
        + plan.marker_raw;
    put(
        &mut out,
        image.opt_offset + opt::SIZE_OF_INITIALIZED_DATA,
        &u32_of(init, "SizeOfInitializedData")?.to_le_bytes(),
    );
    put(
        &mut out,
        image.opt_offset + opt::SIZE_OF_IMAGE,
        &(new_size_of_image as u32).to_le_bytes(),
    );
    put(
        &mut out,
        image.opt_offset + opt::SIZE_OF_HEADERS,
        &u32_of(plan.old_headers + plan.growth, "SizeOfHeaders")?.to_le_bytes(),
    );
    // Section headers.
    for (i, s) in image.sections.iter().enumerate() {
        let h = s.header_offset;
        if i == fat_index {
            put(&mut out, h + 16, &0u32.to_le_bytes());
            put(&mut out, h + 20, &0u32.to_le_bytes());
            continue;
        }
        for (field, value, what) in [
            (20, s.raw_ptr, "PointerToRawData"),
            (24, s.ptr_relocs, "PointerToRelocations"),
            (28, s.ptr_lines, "PointerToLinenumbers"),
        ] {
            if value != 0 && (field != 20 || s.raw_size != 0) {
                let what = format!("section {}: {what}", s.name);
                let p = mapped(u64::from(value), &what)?;
                put(&mut out, h + field, &u32_of(p, &what)?.to_le_bytes());
            }
        }
    }
    let h = image.section_table_offset + image.sections.len() as u64 * SECTION_HEADER_SIZE;
    let mut header = [0u8; SECTION_HEADER_SIZE as usize];
    header[..8].copy_from_slice(MARKER_SECTION.as_bytes());
    header[8..12].copy_from_slice(&(marker.len() as u32).to_le_bytes());
    header[12..16].copy_from_slice(&marker_rva32.to_le_bytes());
    header[16..20].copy_from_slice(&u32_of(plan.marker_raw, "marker raw size")?.to_le_bytes());
    header[20..24].copy_from_slice(&u32_of(marker_offset, "marker offset")?.to_le_bytes());
    header[36..40].copy_from_slice(&MARKER_CHARACTERISTICS.to_le_bytes());
    put(&mut out, h, &header);

    // Certificate table: its directory entry holds a file offset.
    let signed = image.dir(DIR_SECURITY);
    if let Some(d) = signed {
        let p = mapped(u64::from(d.rva), "certificate table")?;
        put(
            &mut out,
            image.dir_offset(DIR_SECURITY),
            &u32_of(p, "certificate table offset")?.to_le_bytes(),
        );
    }
    // Debug directory entries: PointerToRawData is a file offset.
    let mut debug_entries_moved = 0;
    if let Some(d) = image.dir(DIR_DEBUG) {
        let dir_off = image.offset_of(u64::from(d.rva)).ok_or_else(|| {
            fail(
                ErrorKind::Malformed,
                format!("debug directory at RVA {:#x} has no file bytes", d.rva),
            )
        })?;
        let n = u64::from(d.size) / DEBUG_ENTRY_SIZE;
        for k in 0..n {
            let old = dir_off + k * DEBUG_ENTRY_SIZE;
            let ptr = get_u32(&data, old + 24).ok_or_else(|| {
                fail(
                    ErrorKind::Malformed,
                    format!("debug directory entry {k} at {old:#x} runs past the end of the file"),
                )
            })?;
            if ptr == 0 {
                continue;
            }
            let what = format!("debug directory entry {k}: PointerToRawData");
            let p = u32_of(mapped(u64::from(ptr), &what)?, &what)?;
            if p != ptr {
                debug_entries_moved += 1;
            }
            put(
                &mut out,
                mapped(old, "debug directory")? + 24,
                &p.to_le_bytes(),
            );
        }
    }
    // Wrappers: HIPK, the marker's VA (the DIR64 base relocation of the slot,
    // if any, rebases it like it rebased the bundle's), co_index.
    let mut relocations = 0;
    for &(off, co_index, rebased) in &patches {
        let p = mapped(off, "wrapper")?;
        put(&mut out, p, &HIPK.to_le_bytes());
        put(&mut out, p + 8, &marker_addr.to_le_bytes());
        put(&mut out, p + 16, &co_index.to_le_bytes());
        relocations += usize::from(rebased);
    }
    // Audit: no base relocation may patch, or point into, .hip_fat.
    let fat_lo = u64::from(fat_sec.virtual_address);
    let fat_hi = fat_sec.rva_end();
    let mut audited = 0;
    for &(rva, typ) in &image.base_relocs {
        let rva = u64::from(rva);
        if rva >= fat_lo && rva < fat_hi {
            return Err(fail(
                ErrorKind::Layout,
                format!(
                    "base relocation at RVA {rva:#x} patches {FATBIN_SECTION}, whose bytes leave the file"
                ),
            ));
        }
        if typ != pe::IMAGE_REL_BASED_DIR64 {
            continue;
        }
        let Some(old) = image.offset_of(rva) else {
            continue;
        };
        let Some(value) = plan.map(old).and_then(|p| get_u64(&out, p)) else {
            continue;
        };
        audited += 1;
        let target = value.wrapping_sub(image.image_base);
        if target >= fat_lo && target < fat_hi {
            return Err(fail(
                ErrorKind::Offload,
                format!(
                    "base relocation at RVA {rva:#x} still points into {FATBIN_SECTION} (VA {value:#x}): not every pointer to the device code was redirected"
                ),
            ));
        }
    }
    let checksum_recomputed = image.checksum != 0;
    if checksum_recomputed {
        let c = checksum(&out, image.checksum_offset());
        put(&mut out, image.checksum_offset(), &c.to_le_bytes());
    }
    let report = TransformReport {
        input_size: file_len,
        output_size: out.len() as u64,
        bytes_removed: re - rs,
        marker_addr,
        marker_rva: marker_rva32,
        wrappers: patches.len(),
        relocations,
        base_relocations_audited: audited,
        headers_grown: plan.growth,
        debug_entries_moved,
        checksum_recomputed,
        signature_invalidated: signed.is_some(),
    };
    Ok((out, report))
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
    let old_headers = u64::from(image.size_of_headers);
    let fat = &image.sections[fat_index];
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
    let removed = if fat.raw_size == 0 {
        (raw_end, raw_end)
    } else {
        let (s, e) = (
            u64::from(fat.raw_ptr),
            u64::from(fat.raw_ptr) + u64::from(fat.raw_size),
        );
        if s < old_headers || !s.is_multiple_of(fa) || !e.is_multiple_of(fa) {
            return Err(fail(
                ErrorKind::Layout,
                format!(
                    "section {FATBIN_SECTION}: raw data {s:#x}..{e:#x} is not FileAlignment-aligned ({fa:#x}) after the headers ({old_headers:#x})"
                ),
            ));
        }
        (s, e)
    };
    for (i, s) in image.sections.iter().enumerate() {
        let (a, b) = (
            u64::from(s.raw_ptr),
            u64::from(s.raw_ptr) + u64::from(s.raw_size),
        );
        if i != fat_index && s.raw_size > 0 && a < removed.1 && b > removed.0 {
            return Err(fail(
                ErrorKind::Layout,
                format!(
                    "section {}: raw data {a:#x}..{b:#x} overlaps {FATBIN_SECTION}'s",
                    s.name
                ),
            ));
        }
        if s.raw_size > 0 && a < old_headers {
            return Err(fail(
                ErrorKind::Layout,
                format!(
                    "section {}: raw data at {a:#x} lies inside the headers ({old_headers:#x})",
                    s.name
                ),
            ));
        }
    }
    // Room for one more section header.
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
    let growth = if need <= old_headers {
        0
    } else {
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
        new_headers - old_headers
    };
    Ok(Plan {
        old_headers,
        growth,
        removed,
        insert_at: raw_end,
        marker_raw: marker_len.next_multiple_of(fa),
    })
}

fn put(out: &mut [u8], at: u64, bytes: &[u8]) {
    // Every offset patched comes from the plan, inside the assembled image.
    let at = at as usize;
    if let Some(dst) = out.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

fn get_u32(data: &[u8], at: u64) -> Option<u32> {
    let at = usize::try_from(at).ok()?;
    let b = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(b.try_into().ok()?))
}

fn get_u64(data: &[u8], at: u64) -> Option<u64> {
    let at = usize::try_from(at).ok()?;
    let b = data.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
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
