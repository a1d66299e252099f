//! Turn a fat binary into a host-only binary, planning the layout once.
//!
//! The first page of `.hip_fatbin` becomes the *kpack page*: a new
//! read-only `PT_LOAD` holding the relocated program-header table and the
//! `.rocm_kpack_ref` marker. The whole pages after it leave the file; the
//! kpack segment's `p_memsz` zero-fills their addresses, so no virtual
//! address of anything else changes. Because the kpack page sits where the
//! device code was (not at the end of the file), the binary never grows,
//! the program headers keep `p_vaddr - p_offset` equal to the first
//! segment's (old kernels compute `AT_PHDR` from `e_phoff`), the table is at
//! the start of its own `PT_LOAD` (what BFD's strip/objcopy assume) and it
//! is not in a trailing segment (what patchelf ≤ 0.18 breaks).
//!
//! ```text
//! before:  [ .. rodata | .hip_fatbin (N pages)                 | eh_frame .. ] one R PT_LOAD
//! after:   [ .. rodata ][ PHDRs + marker ][ (zero-filled, no file bytes) ][ tail | eh_frame .. ]
//!            pre LOAD     kpack LOAD (filesz 1 page, memsz up to the tail)   post LOAD
//! ```

use std::path::Path;

use object::LittleEndian as LE;
use object::elf::{self, FileHeader64, ProgramHeader64, SectionHeader64};
use object::pod;

use crate::error::{Error, ErrorKind};
use crate::read::{FatBinary, HIPK, MARKER_SECTION, Magic, PointerVia};

const PAGE: u64 = 4096;
const PHDR_SIZE: u64 = 56;
const SHDR_SIZE: u64 = 64;
const R_X86_64_RELATIVE: u64 = 8;
/// Section kpack adds over the padding before the kpack page.
pub const PAD_SECTION: &str = ".kpack.pad";

/// What the transform did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TransformReport {
    /// Input size in bytes.
    pub input_size: u64,
    /// Output size in bytes.
    pub output_size: u64,
    /// Device-code bytes that left the file.
    pub bytes_removed: u64,
    /// Virtual address of the marker.
    pub marker_addr: u64,
    /// Wrappers rewritten to HIPK.
    pub wrappers: usize,
    /// Relocations redirected to the marker.
    pub relocations: usize,
}

/// One wrapper to redirect: where it is and which code-object index it gets.
struct WrapperPatch {
    file_offset: u64,
    co_index: u64,
    rela_entry: Option<u64>,
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
    use crate::read::ElfKind;
    if !matches!(fat.kind, ElfKind::Exec | ElfKind::Dyn) {
        return Err(fail(
            ErrorKind::Unsupported,
            "only executables and shared libraries can be offloaded".into(),
        ));
    }
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
    let fb = match fat.fatbin {
        Some(fb) if fb.in_file => fb,
        _ => {
            return Err(fail(
                ErrorKind::Offload,
                "no .hip_fatbin with file bytes: nothing to offload".into(),
            ));
        }
    };
    if fat.wrappers.is_empty() {
        return Err(fail(
            ErrorKind::Offload,
            ".hip_fatbin has no wrapper in .hipFatBinSegment pointing at it".into(),
        ));
    }
    let mut patches = Vec::new();
    for w in &fat.wrappers {
        if w.magic != Magic::Hipf {
            return Err(fail(
                ErrorKind::Offload,
                format!("wrapper {} has magic {:?}, expected HIPF", w.index, w.magic),
            ));
        }
        let Some(bundle) = w.bundle else {
            return Err(fail(
                ErrorKind::Offload,
                format!("wrapper {} does not point at a bundle", w.index),
            ));
        };
        let rela_entry = match &w.via {
            PointerVia::Inline => None,
            PointerVia::Relative { rela_entry } | PointerVia::Symbol { rela_entry, .. } => {
                Some(*rela_entry)
            }
        };
        patches.push(WrapperPatch {
            file_offset: w.file_offset,
            co_index: bundle as u64,
            rela_entry,
        });
    }

    let src = &fat.source;
    let file_len = kpack_bundle::ReadAt::size(src);
    let read = |off: u64, len: u64| -> Result<Vec<u8>, Error> {
        // Check the range before allocating: offsets and sizes come from the file.
        if off.checked_add(len).is_none_or(|e| e > file_len) {
            return Err(fail(
                ErrorKind::Malformed,
                format!("range {off:#x}+{len:#x} runs past the end of the file ({file_len:#x})"),
            ));
        }
        let mut buf = vec![
            0u8;
            usize::try_from(len)
                .map_err(|_| fail(ErrorKind::Malformed, "size overflow".into()))?
        ];
        kpack_bundle::ReadAt::read_exact_at(src, off, &mut buf)
            .map_err(|e| Error::io(input, &format!("read at {off:#x}"), e))?;
        Ok(buf)
    };
    let ehdr_bytes = read(0, 64)?;
    let ehdr: FileHeader64<LE> = *pod::from_bytes::<FileHeader64<LE>>(&ehdr_bytes)
        .map_err(|()| fail(ErrorKind::Malformed, "bad ELF header".into()))?
        .0;
    let phoff = ehdr.e_phoff.get(LE);
    let phnum = u64::from(ehdr.e_phnum.get(LE));
    let shoff = ehdr.e_shoff.get(LE);
    let shnum = u64::from(ehdr.e_shnum.get(LE));
    if u64::from(ehdr.e_phentsize.get(LE)) != PHDR_SIZE
        || u64::from(ehdr.e_shentsize.get(LE)) != SHDR_SIZE
    {
        return Err(fail(
            ErrorKind::Malformed,
            "unexpected program or section header entry size".into(),
        ));
    }
    if shnum == 0 || ehdr.e_shstrndx.get(LE) as u64 >= shnum {
        return Err(fail(
            ErrorKind::Malformed,
            "no usable section header table".into(),
        ));
    }
    let phdrs: Vec<ProgramHeader64<LE>> =
        pod::slice_from_all_bytes::<ProgramHeader64<LE>>(&read(phoff, phnum * PHDR_SIZE)?)
            .map_err(|()| fail(ErrorKind::Malformed, "bad program header table".into()))?
            .to_vec();
    let mut shdrs: Vec<SectionHeader64<LE>> =
        pod::slice_from_all_bytes::<SectionHeader64<LE>>(&read(shoff, shnum * SHDR_SIZE)?)
            .map_err(|()| fail(ErrorKind::Malformed, "bad section header table".into()))?
            .to_vec();

    // The PT_LOAD holding .hip_fatbin.
    let (v, z, o) = (fb.addr, fb.size, fb.offset);
    let ti = phdrs
        .iter()
        .position(|p| {
            p.p_type.get(LE) == elf::PT_LOAD
                && p.p_vaddr.get(LE) <= v
                && v.checked_add(z).is_some_and(|e| {
                    p.p_vaddr
                        .get(LE)
                        .checked_add(p.p_filesz.get(LE))
                        .is_some_and(|pe| e <= pe)
                })
                && p.p_offset.get(LE).checked_add(v - p.p_vaddr.get(LE)) == Some(o)
        })
        .ok_or_else(|| {
            fail(
                ErrorKind::Layout,
                format!(".hip_fatbin at {v:#x} is not inside one file-backed PT_LOAD"),
            )
        })?;
    let t = phdrs[ti];
    let (t_vaddr, t_off, t_filesz, t_memsz) = (
        t.p_vaddr.get(LE),
        t.p_offset.get(LE),
        t.p_filesz.get(LE),
        t.p_memsz.get(LE),
    );
    // Every sum below stays under these bounds once they hold.
    if t_filesz > t_memsz
        || t_off.checked_add(t_filesz).is_none_or(|e| e > file_len)
        || t_vaddr.checked_add(t_memsz).is_none()
    {
        return Err(fail(
            ErrorKind::Malformed,
            format!(
                "PT_LOAD {ti} (offset {t_off:#x}, vaddr {t_vaddr:#x}, filesz {t_filesz:#x}, memsz {t_memsz:#x}) is impossible"
            ),
        ));
    }
    let end = v + z;
    let a = v.checked_next_multiple_of(PAGE).unwrap_or(u64::MAX);
    if a.checked_add(PAGE).is_none_or(|ap| ap > end) {
        return Err(fail(
            ErrorKind::Layout,
            format!(
                ".hip_fatbin ({z} bytes at {v:#x}) holds no whole page for the program headers and marker"
            ),
        ));
    }
    let o_a = o + (a - v);
    // Shift must keep every later segment's (and the post piece's)
    // p_offset ≡ p_vaddr (mod p_align).
    let align = phdrs
        .iter()
        .filter(|p| p.p_type.get(LE) == elf::PT_LOAD && p.p_offset.get(LE) > o_a)
        .map(|p| p.p_align.get(LE))
        .fold(PAGE.max(t.p_align.get(LE)), u64::max);
    if !align.is_power_of_two() {
        return Err(fail(
            ErrorKind::Malformed,
            format!("PT_LOAD alignment {align:#x} is not a power of two"),
        ));
    }
    let fatbin_last = o + z >= t_off + t_filesz;
    let drop_start = o_a + PAGE; // old file offset of the first removed byte
    let droppable = if fatbin_last {
        t_off + t_filesz - drop_start
    } else {
        (end & !(PAGE - 1)).saturating_sub(a + PAGE)
    };
    let removed = droppable / align * align;
    let drop_end = drop_start + removed;
    let post_vaddr = a + PAGE + removed;

    // New program header table: T becomes pre, kpack, post.
    let mk = |ty: u32, flags: u32, off: u64, vaddr: u64, filesz: u64, memsz: u64, align: u64| {
        let mut p = t;
        p.p_type.set(LE, ty);
        p.p_flags.set(LE, flags);
        p.p_offset.set(LE, off);
        p.p_vaddr.set(LE, vaddr);
        p.p_paddr.set(LE, vaddr);
        p.p_filesz.set(LE, filesz);
        p.p_memsz.set(LE, memsz);
        p.p_align.set(LE, align);
        p
    };
    let shift = |off: u64| if off >= drop_end { off - removed } else { off };
    let mut pieces = Vec::new();
    if t_vaddr < a {
        pieces.push(mk(
            elf::PT_LOAD,
            t.p_flags.get(LE),
            t_off,
            t_vaddr,
            a - t_vaddr,
            a - t_vaddr,
            t.p_align.get(LE),
        ));
    }
    let kpack_memsz = if fatbin_last {
        t_vaddr + t_memsz - a
    } else {
        post_vaddr - a
    };
    // p_filesz is set below, once the table's length is known.
    let kpack_index = ti + pieces.len();
    pieces.push(mk(
        elf::PT_LOAD,
        elf::PF_R,
        o_a,
        a,
        0,
        kpack_memsz,
        t.p_align.get(LE).max(PAGE),
    ));
    if !fatbin_last {
        let post_off = o_a + PAGE; // == shift(drop_end)
        pieces.push(mk(
            elf::PT_LOAD,
            t.p_flags.get(LE),
            post_off,
            post_vaddr,
            t_off + t_filesz - drop_end,
            t_vaddr + t_memsz - post_vaddr,
            t.p_align.get(LE),
        ));
    }
    let mut new_phdrs = Vec::with_capacity(phdrs.len() + 2);
    for (i, p) in phdrs.iter().enumerate() {
        if i == ti {
            new_phdrs.extend(pieces.iter().copied());
            continue;
        }
        let mut p = *p;
        let off = p.p_offset.get(LE);
        if p.p_filesz.get(LE) > 0
            && off < drop_end
            && off.saturating_add(p.p_filesz.get(LE)) > drop_start
        {
            return Err(fail(
                ErrorKind::Layout,
                format!(
                    "segment {i} (type {:#x}) overlaps the device code being removed",
                    p.p_type.get(LE)
                ),
            ));
        }
        p.p_offset.set(LE, shift(off));
        new_phdrs.push(p);
    }
    let table_len = new_phdrs.len() as u64 * PHDR_SIZE;
    for p in new_phdrs
        .iter_mut()
        .filter(|p| p.p_type.get(LE) == elf::PT_PHDR)
    {
        p.p_offset.set(LE, o_a);
        p.p_vaddr.set(LE, a);
        p.p_paddr.set(LE, a);
        p.p_filesz.set(LE, table_len);
        p.p_memsz.set(LE, table_len);
    }
    // File bytes: exactly the table and the marker (BFD lays segments out by
    // their contents); the rest of the page and the removed pages zero-fill.
    new_phdrs[kpack_index]
        .p_filesz
        .set(LE, table_len + marker.len() as u64);
    let marker_off_in_page = table_len;
    if marker_off_in_page + marker.len() as u64 > PAGE {
        return Err(fail(
            ErrorKind::Layout,
            format!(
                "{} program headers and a {}-byte marker do not fit in one page",
                new_phdrs.len(),
                marker.len()
            ),
        ));
    }
    let marker_addr = a + marker_off_in_page;

    // Section headers: shift, .hip_fatbin becomes NOBITS over the removed
    // pages, .rocm_kpack_ref appended at the end (no index changes).
    let shstrndx = ehdr.e_shstrndx.get(LE) as usize;
    let old_shstr = shdrs[shstrndx];
    let (old_shstr_off, old_shstr_size) = (old_shstr.sh_offset.get(LE), old_shstr.sh_size.get(LE));
    let mut shstrtab = read(old_shstr_off, old_shstr_size)?;
    for (i, s) in shdrs.iter_mut().enumerate() {
        if i == fb.index {
            let nobits_end = if fatbin_last {
                end.min(t_vaddr + t_memsz)
            } else {
                post_vaddr
            };
            s.sh_type.set(LE, elf::SHT_NOBITS);
            s.sh_addr.set(LE, a + PAGE);
            s.sh_offset.set(LE, o_a + PAGE);
            s.sh_size.set(LE, nobits_end.saturating_sub(a + PAGE));
            s.sh_addralign.set(LE, PAGE);
            continue;
        }
        let off = s.sh_offset.get(LE);
        let in_file = s.sh_type.get(LE) != elf::SHT_NOBITS && s.sh_type.get(LE) != elf::SHT_NULL;
        if in_file
            && s.sh_size.get(LE) > 0
            && off < drop_end
            && off.saturating_add(s.sh_size.get(LE)) > drop_start
        {
            return Err(fail(
                ErrorKind::Layout,
                format!("section {i} overlaps the device code being removed"),
            ));
        }
        s.sh_offset.set(LE, shift(off));
    }
    // BFD (strip, objcopy) lays each segment out by its sections; a section
    // over the padding between the last section before the kpack page and
    // the page keeps the kpack segment at its offset after such a rewrite.
    let pre_end = shdrs
        .iter()
        .filter(|s| {
            s.sh_flags.get(LE) & u64::from(elf::SHF_ALLOC) != 0
                && s.sh_type.get(LE) != elf::SHT_NOBITS
        })
        .map(|s| {
            (
                s.sh_addr.get(LE),
                s.sh_addr.get(LE).saturating_add(s.sh_size.get(LE)),
            )
        })
        .filter(|&(lo, hi)| lo >= t_vaddr && hi <= a && hi > lo)
        .map(|(_, hi)| hi)
        .max();
    // Section 0 is the all-zero NULL header: a clean template.
    let null = shdrs[0];
    let mut extra_sections = Vec::new();
    if let Some(pe) = pre_end.filter(|&pe| pe < a) {
        extra_sections.push(alloc_section(
            null,
            &mut shstrtab,
            PAD_SECTION,
            pe,
            t_off + (pe - t_vaddr),
            a - pe,
        ));
    }
    let marker_sh = alloc_section(
        null,
        &mut shstrtab,
        MARKER_SECTION,
        marker_addr,
        o_a + marker_off_in_page,
        marker.len() as u64,
    );

    // File tail: drop the old section header table (and .shstrtab, when it
    // is the last thing before it) and write them again at the end.
    let mut content_end = file_len;
    if shoff + shnum * SHDR_SIZE == file_len {
        content_end = shoff;
    }
    let old_shstr_end = old_shstr_off + old_shstr_size; // read above, so inside the file
    if old_shstr_end <= content_end && content_end - old_shstr_end < 8 {
        content_end = old_shstr_off;
    }
    if content_end < drop_end {
        return Err(fail(
            ErrorKind::Layout,
            "section header table sits inside the device code".into(),
        ));
    }

    // Assemble: [0, o_a) + kpack page + [drop_end, content_end) + shstrtab + SHT.
    let mut out = read(0, o_a)?;
    let mut page = vec![0u8; PAGE as usize];
    for (i, p) in new_phdrs.iter().enumerate() {
        let at = i * PHDR_SIZE as usize;
        page[at..at + PHDR_SIZE as usize].copy_from_slice(pod::bytes_of(p));
    }
    let mo = marker_off_in_page as usize;
    page[mo..mo + marker.len()].copy_from_slice(marker);
    out.extend_from_slice(&page);
    if content_end > drop_end {
        out.extend_from_slice(&read(drop_end, content_end - drop_end)?);
    }
    let new_shstr_off = out.len() as u64;
    out.extend_from_slice(&shstrtab);
    shdrs[shstrndx].sh_offset.set(LE, new_shstr_off);
    shdrs[shstrndx].sh_size.set(LE, shstrtab.len() as u64);
    out.resize(out.len().next_multiple_of(8), 0);
    let new_shoff = out.len() as u64;
    shdrs.extend(extra_sections);
    shdrs.push(marker_sh);
    for s in &shdrs {
        out.extend_from_slice(pod::bytes_of(s));
    }

    // ELF header.
    let mut eh = ehdr;
    eh.e_phoff.set(LE, o_a);
    eh.e_phnum.set(
        LE,
        u16::try_from(new_phdrs.len())
            .map_err(|_| fail(ErrorKind::Layout, "too many program headers".into()))?,
    );
    eh.e_shoff.set(LE, new_shoff);
    eh.e_shnum.set(
        LE,
        u16::try_from(shdrs.len())
            .map_err(|_| fail(ErrorKind::Layout, "too many sections".into()))?,
    );
    out[..64].copy_from_slice(pod::bytes_of(&eh));

    // Wrappers and their relocations.
    let mut relocations = 0;
    // Patches land on bytes kept from the input; never on the kpack page or
    // the removed device code (old offsets [o_a, drop_end)).
    let kept = |off: u64, what: &str| {
        if off >= o_a && off < drop_end {
            Err(fail(
                ErrorKind::Layout,
                format!("{what} at file offset {off:#x} lies inside .hip_fatbin's first pages"),
            ))
        } else {
            Ok(shift(off) as usize)
        }
    };
    for wp in &patches {
        let at = kept(wp.file_offset, "wrapper")?;
        put(&mut out, at, &HIPK.to_le_bytes())
            .map_err(|m| fail(ErrorKind::Layout, format!("wrapper: {m}")))?;
        put(&mut out, at.saturating_add(8), &marker_addr.to_le_bytes())
            .map_err(|m| fail(ErrorKind::Layout, format!("wrapper: {m}")))?;
        put(&mut out, at.saturating_add(16), &wp.co_index.to_le_bytes())
            .map_err(|m| fail(ErrorKind::Layout, format!("wrapper: {m}")))?;
        if let Some(rela) = wp.rela_entry {
            let at = kept(rela, "relocation")?;
            // Elf64_Rela: r_offset stays; r_info = RELATIVE, no symbol; addend = marker.
            put(
                &mut out,
                at.saturating_add(8),
                &R_X86_64_RELATIVE.to_le_bytes(),
            )
            .map_err(|m| fail(ErrorKind::Layout, format!("relocation: {m}")))?;
            put(&mut out, at.saturating_add(16), &marker_addr.to_le_bytes())
                .map_err(|m| fail(ErrorKind::Layout, format!("relocation: {m}")))?;
            relocations += 1;
        }
    }
    let report = TransformReport {
        input_size: file_len,
        output_size: out.len() as u64,
        bytes_removed: removed,
        marker_addr,
        wrappers: patches.len(),
        relocations,
    };
    Ok((out, report))
}

/// A read-only `SHT_PROGBITS` section header named `name` (appended to
/// `shstrtab`), built from the all-zero `null` header.
fn alloc_section(
    null: SectionHeader64<LE>,
    shstrtab: &mut Vec<u8>,
    name: &str,
    addr: u64,
    offset: u64,
    size: u64,
) -> SectionHeader64<LE> {
    let mut sh = null;
    sh.sh_name.set(LE, shstrtab.len() as u32);
    shstrtab.extend_from_slice(name.as_bytes());
    shstrtab.push(0);
    sh.sh_type.set(LE, elf::SHT_PROGBITS);
    sh.sh_flags.set(LE, u64::from(elf::SHF_ALLOC));
    sh.sh_addr.set(LE, addr);
    sh.sh_offset.set(LE, offset);
    sh.sh_size.set(LE, size);
    sh.sh_addralign.set(LE, 1);
    sh
}

/// Overwrite `bytes` at `at`; a wrapper or relocation the rewrite moved
/// outside the output (it sat in the dropped tail) is an error, not a panic.
fn put(out: &mut [u8], at: usize, bytes: &[u8]) -> Result<(), String> {
    let len = out.len();
    let dst = at
        .checked_add(bytes.len())
        .and_then(|e| out.get_mut(at..e))
        .ok_or_else(|| {
            format!("patch at output offset {at:#x} is outside the {len:#x}-byte image")
        })?;
    dst.copy_from_slice(bytes);
    Ok(())
}
