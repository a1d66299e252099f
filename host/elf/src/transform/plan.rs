//! The plan: every offset, size and header of the output, computed from the
//! input's headers before a byte is written. Pure arithmetic, so each rule
//! is testable on headers alone.

use std::ops::Range;
use std::path::Path;

use object::LittleEndian as LE;
use object::elf::{self, FileHeader64, ProgramHeader64, SectionHeader64};

use super::source::{Headers, check_range};
use super::{Layout, PAD_SECTION, PAGE, PHDR_SECTION, PHDR_SIZE, SHDR_SIZE};
use crate::error::{Error, ErrorKind};
use crate::read::{MARKER_SECTION, SectionInfo};

/// Where everything of the output goes.
///
/// Input offsets below the kpack page keep their place; input offsets from
/// `cut.end` on move down by `cut.end - cut.start` ([`Plan::shift`]).
#[derive(Debug)]
pub(super) struct Plan {
    /// Which layout the plan took.
    pub(super) layout: Layout,
    /// File offset of the kpack page, the same in input and output.
    pub(super) kpack_page_offset: u64,
    /// Length of the kpack page: one page in place, the rest of
    /// `.hip_fatbin` when it shares its page with its neighbours.
    pub(super) kpack_page_len: u64,
    /// Input bytes that leave the file: whole pages of device code after
    /// the kpack page, a multiple of every later segment's alignment.
    pub(super) cut: Range<u64>,
    /// Input bytes copied after the kpack page: from the cut to the old
    /// `.shstrtab` and section header table, which are written anew.
    pub(super) kept_tail: Range<u64>,
    /// The new program header table, first thing in the kpack page.
    pub(super) program_headers: Vec<ProgramHeader64<LE>>,
    /// Offset of the marker in the kpack page: right after the table.
    pub(super) marker_offset_in_page: u64,
    /// Virtual address of the marker, what every wrapper will point at.
    pub(super) marker_addr: u64,
    /// Input range of the old `.shstrtab`; its bytes start the new one.
    pub(super) old_shstrtab: Range<u64>,
    /// Section names appended to `.shstrtab`, in order.
    pub(super) added_names: Vec<&'static str>,
    /// The new section header table: the old sections shifted (the fat
    /// binary turned `SHT_NOBITS`), then the padding and marker sections.
    pub(super) section_headers: Vec<SectionHeader64<LE>>,
    /// Output offset of the new section header table (8-aligned).
    pub(super) section_table_offset: u64,
    /// The new ELF header.
    pub(super) file_header: FileHeader64<LE>,
    /// Size of the output in bytes.
    pub(super) output_size: u64,
}

/// What a plan is for.
#[derive(Debug, Clone, Copy)]
enum Purpose {
    /// `offload`: all of `.hip_fatbin` goes, a marker of `marker_len`
    /// bytes comes after the program header table.
    Offload { marker_len: u64 },
    /// `prune`: the first `kept_len` bytes of `.hip_fatbin` stay; no marker.
    Prune { kept_len: u64 },
}

/// Where the device code is cut out of the `PT_LOAD` that holds it.
struct Cut {
    /// Index of that `PT_LOAD` in the input table.
    segment_index: usize,
    /// That `PT_LOAD`, the template of the pieces that replace it.
    segment: ProgramHeader64<LE>,
    layout: Layout,
    kpack_page_addr: u64,
    kpack_page_offset: u64,
    /// Bytes of the kpack page (see [`Plan::kpack_page_len`]).
    kpack_page_len: u64,
    /// Whether `.hip_fatbin` runs to the end of the segment's file bytes
    /// (then the segment has no piece after the kpack page).
    fatbin_is_last: bool,
    /// Input bytes removed.
    range: Range<u64>,
    /// Virtual address of the segment piece after the cut.
    post_addr: u64,
}

impl Cut {
    fn removed(&self) -> u64 {
        self.range.end - self.range.start
    }

    /// Output offset of input offset `offset` (outside the cut).
    fn shift(&self, offset: u64) -> u64 {
        if offset >= self.range.end {
            offset - self.removed()
        } else {
            offset
        }
    }

    fn segment_vaddr(&self) -> u64 {
        self.segment.p_vaddr.get(LE)
    }

    fn segment_offset(&self) -> u64 {
        self.segment.p_offset.get(LE)
    }

    fn segment_mem_end(&self) -> u64 {
        self.segment_vaddr() + self.segment.p_memsz.get(LE)
    }

    fn segment_file_end(&self) -> u64 {
        self.segment_offset() + self.segment.p_filesz.get(LE)
    }
}

impl Plan {
    /// Plan the output for removing `fatbin` from a file of `file_len`
    /// bytes with `headers`, adding a `marker_len`-byte marker. `path`
    /// only names the file in errors.
    pub(super) fn new(
        path: &Path,
        headers: &Headers,
        fatbin: SectionInfo,
        marker_len: u64,
        file_len: u64,
    ) -> Result<Plan, Error> {
        Plan::build(
            path,
            headers,
            fatbin,
            Purpose::Offload { marker_len },
            file_len,
        )
    }

    /// Plan the output of `kpack prune`: the first `kept_len` bytes of
    /// `fatbin` (the pruned bundles, each at its old address) stay, and the
    /// rest of the section is laid out as `offload` lays out a whole one:
    /// its first whole page holds the new program header table, the whole
    /// pages after it leave the file. `None` when no page can leave (the
    /// shared-page case, or a cut that `p_align` rounds to nothing): then
    /// the file keeps its layout and only the section's bytes change.
    pub(super) fn prune(
        path: &Path,
        headers: &Headers,
        fatbin: SectionInfo,
        kept_len: u64,
        file_len: u64,
    ) -> Result<Option<Plan>, Error> {
        let kept_len = kept_len.min(fatbin.size);
        let free_addr = fatbin.addr.saturating_add(kept_len);
        let fatbin_end = fatbin.addr.saturating_add(fatbin.size);
        if free_addr
            .checked_next_multiple_of(PAGE)
            .and_then(|page| page.checked_add(PAGE))
            .is_none_or(|page_end| page_end > fatbin_end)
        {
            return Ok(None);
        }
        let plan = Plan::build(path, headers, fatbin, Purpose::Prune { kept_len }, file_len)?;
        Ok((plan.layout == Layout::InPlace && plan.bytes_removed() > 0).then_some(plan))
    }

    fn build(
        path: &Path,
        headers: &Headers,
        fatbin: SectionInfo,
        purpose: Purpose,
        file_len: u64,
    ) -> Result<Plan, Error> {
        let (region, marker_len, kept_len) = purpose.region(fatbin);
        let cut = plan_cut(path, &headers.program, region, file_len)?;
        let (mut program_headers, kpack_segment) =
            plan_program_headers(path, &headers.program, &cut)?;
        let marker_offset_in_page =
            fill_kpack_segment(path, &mut program_headers, kpack_segment, &cut, marker_len)?;
        let marker_addr = cut.kpack_page_addr + marker_offset_in_page;

        let shstrndx = headers.shstrndx();
        let old_shstr = headers.sections[shstrndx];
        let old_shstrtab_offset = old_shstr.sh_offset.get(LE);
        let old_shstrtab_size = old_shstr.sh_size.get(LE);
        check_range(path, old_shstrtab_offset, old_shstrtab_size, file_len)?;
        let old_shstrtab = old_shstrtab_offset..old_shstrtab_offset + old_shstrtab_size;

        let mut section_headers =
            plan_moved_sections(path, &headers.sections, fatbin, kept_len, &cut)?;
        let marker =
            matches!(purpose, Purpose::Offload { .. }).then_some((marker_addr, marker_len));
        let added = AddedSections::plan(
            &section_headers,
            &cut,
            old_shstrtab_size,
            marker_offset_in_page,
            marker,
        );

        let tail_end = kept_tail_end(&headers.file, &old_shstrtab, file_len);
        if tail_end < cut.range.end {
            return Err(Error::new(
                ErrorKind::Layout,
                path,
                "section header table sits inside the device code",
            ));
        }
        let kept_tail = cut.range.end..tail_end;
        // Output: [0, kpack page) + kpack page + kept tail + .shstrtab + SHT.
        let shstrtab_offset =
            cut.kpack_page_offset + cut.kpack_page_len + (kept_tail.end - kept_tail.start);
        let section_table_offset = (shstrtab_offset + added.shstrtab_len).next_multiple_of(8);
        section_headers[shstrndx].sh_offset.set(LE, shstrtab_offset);
        section_headers[shstrndx]
            .sh_size
            .set(LE, added.shstrtab_len);
        section_headers.extend(added.headers);
        let output_size = section_table_offset + section_headers.len() as u64 * SHDR_SIZE;
        let file_header = plan_file_header(
            path,
            &headers.file,
            &cut,
            program_headers.len(),
            section_table_offset,
            section_headers.len(),
        )?;

        Ok(Plan {
            layout: cut.layout,
            kpack_page_offset: cut.kpack_page_offset,
            kpack_page_len: cut.kpack_page_len,
            cut: cut.range,
            kept_tail,
            program_headers,
            marker_offset_in_page,
            marker_addr,
            old_shstrtab,
            added_names: added.names,
            section_headers,
            section_table_offset,
            file_header,
            output_size,
        })
    }

    /// Device-code bytes that leave the file.
    pub(super) fn bytes_removed(&self) -> u64 {
        self.cut.end - self.cut.start
    }

    /// Output offset of the kept input byte at `offset`; `None` when that
    /// byte is on the kpack page or in the cut (nothing there is kept).
    pub(super) fn kept(&self, offset: u64) -> Option<u64> {
        if (self.kpack_page_offset..self.cut.end).contains(&offset) {
            None
        } else if offset >= self.cut.end {
            Some(offset - self.bytes_removed())
        } else {
            Some(offset)
        }
    }
}

impl Purpose {
    /// The region the kpack page and the cut come from (all of
    /// `.hip_fatbin`, or what the pruned bundles left of it), the marker's
    /// length and the bytes of bundles kept.
    fn region(self, fatbin: SectionInfo) -> (SectionInfo, u64, Option<u64>) {
        match self {
            Purpose::Offload { marker_len } => (fatbin, marker_len, None),
            Purpose::Prune { kept_len } => (
                SectionInfo {
                    addr: fatbin.addr + kept_len,
                    offset: fatbin.offset + kept_len,
                    size: fatbin.size - kept_len,
                    ..fatbin
                },
                0,
                Some(kept_len),
            ),
        }
    }
}

/// Size the kpack segment (`program_headers[kpack_segment]`) for the
/// table and a `marker_len`-byte marker, checking both fit in the kpack
/// page. Returns the marker's offset in the page (right after the table).
fn fill_kpack_segment(
    path: &Path,
    program_headers: &mut [ProgramHeader64<LE>],
    kpack_segment: usize,
    cut: &Cut,
    marker_len: u64,
) -> Result<u64, Error> {
    let count = program_headers.len();
    let table_len = count as u64 * PHDR_SIZE;
    let kpack = &mut program_headers[kpack_segment];
    // File bytes: exactly the table and the marker (BFD lays segments
    // out by their contents); the rest of the page and the cut pages
    // zero-fill.
    kpack.p_filesz.set(LE, table_len + marker_len);
    if cut.layout == Layout::SharedPage {
        // Nothing to zero-fill: the rest of the section's bytes stay in
        // the file (as zeros) and no address depends on them. Without
        // a zero-fill the loader never writes into a page it shares
        // with the next segment.
        kpack.p_memsz.set(LE, table_len + marker_len);
    }
    if table_len + marker_len > cut.kpack_page_len {
        return Err(Error::new(
            ErrorKind::Layout,
            path,
            match cut.layout {
                Layout::InPlace => format!(
                    "{count} program headers and a {marker_len}-byte marker do not fit in one page",
                ),
                Layout::SharedPage => format!(
                    "{count} program headers and a {marker_len}-byte marker do not fit in the {} bytes of .hip_fatbin at {:#x}",
                    cut.kpack_page_len, cut.kpack_page_offset,
                ),
            },
        ));
    }
    Ok(table_len)
}

/// The sections kpack adds after the old ones, and their names appended
/// to the old `.shstrtab`.
struct AddedSections {
    headers: Vec<SectionHeader64<LE>>,
    names: Vec<&'static str>,
    /// Length of the new `.shstrtab`.
    shstrtab_len: u64,
}

impl AddedSections {
    /// The padding section (if the kpack page leaves a gap), the cover of
    /// the program header table (`table_len` bytes) and, offloading, the
    /// marker section (`marker`: its address and length).
    fn plan(
        moved: &[SectionHeader64<LE>],
        cut: &Cut,
        old_shstrtab_len: u64,
        table_len: u64,
        marker: Option<(u64, u64)>,
    ) -> AddedSections {
        let mut added = AddedSections {
            headers: Vec::new(),
            names: Vec::new(),
            shstrtab_len: old_shstrtab_len,
        };
        // Section 0 is the all-zero NULL header: a clean template.
        let template = moved[0];
        if let Some(pad_start) = padding_start(moved, cut) {
            added.push(
                template,
                PAD_SECTION,
                pad_start,
                cut.segment_offset() + (pad_start - cut.segment_vaddr()),
                cut.kpack_page_addr - pad_start,
            );
        }
        // The table lies in what was .hip_fatbin (now NOBITS), in no
        // section: elfutils' libelf (eu-strip, dwz, debugedit) zero-fills
        // bytes between sections when it writes a file, so a section must
        // cover the table, and keep its offset through every rewriter:
        // - eu-strip resets the offset of every non-allocated section and
        //   lays them out after the last allocated one (strip.c), whatever
        //   their index: the cover must be SHF_ALLOC, which it keeps where
        //   it is;
        // - BFD (strip, objcopy) would lay an allocated PROGBITS section
        //   out after the table it treats as the segment's header ("lma
        //   adjusted"), but it drops SHT_NULL sections ("inactive") and
        //   writes the table itself.
        // An allocated SHT_NULL section over the table satisfies both; it
        // is mapped from its own bytes, which verify-elf checks.
        added.push(
            template,
            PHDR_SECTION,
            cut.kpack_page_addr,
            cut.kpack_page_offset,
            table_len,
        );
        if let Some(cover) = added.headers.last_mut() {
            cover.sh_type.set(LE, elf::SHT_NULL);
        }
        if let Some((marker_addr, marker_len)) = marker {
            added.push(
                template,
                MARKER_SECTION,
                marker_addr,
                cut.kpack_page_offset + table_len,
                marker_len,
            );
        }
        added
    }

    /// Add section `name`; names are appended to the old `.shstrtab` in
    /// the order the sections are.
    fn push(
        &mut self,
        template: SectionHeader64<LE>,
        name: &'static str,
        addr: u64,
        offset: u64,
        size: u64,
    ) {
        let header = alloc_section(template, self.shstrtab_len, addr, offset, size);
        self.shstrtab_len += name.len() as u64 + 1;
        self.names.push(name);
        self.headers.push(header);
    }
}

/// The new ELF header: the program header table on the kpack page, the
/// section header table at `section_table_offset`.
fn plan_file_header(
    path: &Path,
    file: &FileHeader64<LE>,
    cut: &Cut,
    phnum: usize,
    section_table_offset: u64,
    shnum: usize,
) -> Result<FileHeader64<LE>, Error> {
    let layout = |message: &str| Error::new(ErrorKind::Layout, path, message);
    let mut file_header = *file;
    file_header.e_phoff.set(LE, cut.kpack_page_offset);
    file_header.e_phnum.set(
        LE,
        u16::try_from(phnum).map_err(|_| layout("too many program headers"))?,
    );
    file_header.e_shoff.set(LE, section_table_offset);
    file_header.e_shnum.set(
        LE,
        u16::try_from(shnum).map_err(|_| layout("too many sections"))?,
    );
    Ok(file_header)
}

/// Index of the file-backed `PT_LOAD` that holds all of `fatbin`; its
/// `p_align` must be 0, 1 or a power of two (ELF's rule, which every
/// layout's arithmetic relies on).
pub(super) fn fatbin_segment(
    path: &Path,
    program: &[ProgramHeader64<LE>],
    fatbin: SectionInfo,
) -> Result<usize, Error> {
    let index = fatbin_segment_index(path, program, fatbin)?;
    let align = program[index].p_align.get(LE);
    if align > 1 && !align.is_power_of_two() {
        return Err(Error::new(
            ErrorKind::Malformed,
            path,
            format!(
                "PT_LOAD {index} (holding .hip_fatbin): p_align {align:#x} is not a power of two"
            ),
        ));
    }
    Ok(index)
}

fn fatbin_segment_index(
    path: &Path,
    program: &[ProgramHeader64<LE>],
    fatbin: SectionInfo,
) -> Result<usize, Error> {
    let (fatbin_addr, fatbin_size, fatbin_offset) = (fatbin.addr, fatbin.size, fatbin.offset);
    program
        .iter()
        .position(|p| {
            p.p_type.get(LE) == elf::PT_LOAD
                && p.p_vaddr.get(LE) <= fatbin_addr
                && fatbin_addr
                    .checked_add(fatbin_size)
                    .is_some_and(|fatbin_end| {
                        p.p_vaddr
                            .get(LE)
                            .checked_add(p.p_filesz.get(LE))
                            .is_some_and(|segment_end| fatbin_end <= segment_end)
                    })
                && p.p_offset
                    .get(LE)
                    .checked_add(fatbin_addr - p.p_vaddr.get(LE))
                    == Some(fatbin_offset)
        })
        .ok_or_else(|| {
            Error::new(
                ErrorKind::Layout,
                path,
                format!(".hip_fatbin at {fatbin_addr:#x} is not inside one file-backed PT_LOAD"),
            )
        })
}

/// The `PT_LOAD` holding `.hip_fatbin` (at `index`) is possible: every
/// sum the plan makes over it stays in bounds once this holds.
fn check_segment(
    path: &Path,
    index: usize,
    segment: &ProgramHeader64<LE>,
    file_len: u64,
) -> Result<(), Error> {
    let (seg_vaddr, seg_offset, seg_filesz, seg_memsz) = (
        segment.p_vaddr.get(LE),
        segment.p_offset.get(LE),
        segment.p_filesz.get(LE),
        segment.p_memsz.get(LE),
    );
    if seg_filesz > seg_memsz
        || seg_offset
            .checked_add(seg_filesz)
            .is_none_or(|e| e > file_len)
        || seg_vaddr.checked_add(seg_memsz).is_none()
    {
        return Err(Error::new(
            ErrorKind::Malformed,
            path,
            format!(
                "PT_LOAD {index} (offset {seg_offset:#x}, vaddr {seg_vaddr:#x}, filesz {seg_filesz:#x}, memsz {seg_memsz:#x}) is impossible"
            ),
        ));
    }
    Ok(())
}

/// Where the program header table and marker go: the first whole page of
/// `fatbin`, or, without one, its own bytes. Returns the layout, the
/// kpack page's address and its length.
fn kpack_page(path: &Path, fatbin: SectionInfo) -> Result<(Layout, u64, u64), Error> {
    let (fatbin_addr, fatbin_size) = (fatbin.addr, fatbin.size);
    let fatbin_end = fatbin_addr + fatbin_size;
    let page_addr = fatbin_addr
        .checked_next_multiple_of(PAGE)
        .unwrap_or(u64::MAX);
    if page_addr
        .checked_add(PAGE)
        .is_some_and(|page_end| page_end <= fatbin_end)
    {
        return Ok((Layout::InPlace, page_addr, PAGE));
    }
    // No whole page of device code: the table and marker take the
    // section's own bytes (8-aligned for Elf64_Phdr), and the kpack
    // segment shares its first and last page with its neighbours.
    // They all keep the segment's p_vaddr - p_offset, so the shared
    // pages map the same file bytes whichever segment maps them last.
    let start = fatbin_addr.checked_next_multiple_of(8).unwrap_or(u64::MAX);
    if start >= fatbin_end {
        return Err(Error::new(
            ErrorKind::Layout,
            path,
            format!(
                ".hip_fatbin ({fatbin_size} bytes at {fatbin_addr:#x}) has no room for the program headers and marker"
            ),
        ));
    }
    Ok((Layout::SharedPage, start, fatbin_end - start))
}

/// Find the `PT_LOAD` holding `fatbin`, put the kpack page on the first
/// whole page of it and cut the whole pages after that.
fn plan_cut(
    path: &Path,
    program: &[ProgramHeader64<LE>],
    fatbin: SectionInfo,
    file_len: u64,
) -> Result<Cut, Error> {
    let (fatbin_addr, fatbin_size, fatbin_offset) = (fatbin.addr, fatbin.size, fatbin.offset);
    let segment_index = fatbin_segment(path, program, fatbin)?;
    let segment = program[segment_index];
    let (seg_offset, seg_filesz) = (segment.p_offset.get(LE), segment.p_filesz.get(LE));
    check_segment(path, segment_index, &segment, file_len)?;
    let fatbin_end = fatbin_addr + fatbin_size;
    let (layout, kpack_page_addr, kpack_page_len) = kpack_page(path, fatbin)?;
    let kpack_page_offset = fatbin_offset + (kpack_page_addr - fatbin_addr);
    // The cut must keep every later segment's (and the post piece's)
    // p_offset ≡ p_vaddr (mod p_align).
    let align = program
        .iter()
        .filter(|p| p.p_type.get(LE) == elf::PT_LOAD && p.p_offset.get(LE) > kpack_page_offset)
        .map(|p| p.p_align.get(LE))
        .fold(PAGE.max(segment.p_align.get(LE)), u64::max);
    if !align.is_power_of_two() {
        return Err(Error::new(
            ErrorKind::Malformed,
            path,
            format!("PT_LOAD alignment {align:#x} is not a power of two"),
        ));
    }
    let fatbin_is_last = fatbin_offset + fatbin_size >= seg_offset + seg_filesz;
    let cut_start = kpack_page_offset + kpack_page_len;
    let cuttable = match layout {
        Layout::SharedPage => 0,
        Layout::InPlace if fatbin_is_last => seg_offset + seg_filesz - cut_start,
        Layout::InPlace => (fatbin_end & !(PAGE - 1)).saturating_sub(kpack_page_addr + PAGE),
    };
    let removed = cuttable / align * align;
    Ok(Cut {
        segment_index,
        segment,
        layout,
        kpack_page_addr,
        kpack_page_offset,
        kpack_page_len,
        fatbin_is_last,
        range: cut_start..cut_start + removed,
        post_addr: kpack_page_addr + kpack_page_len + removed,
    })
}

/// The new program header table: the fat binary's `PT_LOAD` becomes the
/// pieces before, at and after the kpack page; every other segment moves
/// with the cut. Returns the table and the kpack segment's index.
fn plan_program_headers(
    path: &Path,
    program: &[ProgramHeader64<LE>],
    cut: &Cut,
) -> Result<(Vec<ProgramHeader64<LE>>, usize), Error> {
    let (pieces, kpack_in_pieces) = segment_pieces(cut);
    let mut table = Vec::with_capacity(program.len() + 2);
    for (index, header) in program.iter().enumerate() {
        if index == cut.segment_index {
            table.extend(pieces.iter().copied());
            continue;
        }
        let mut header = *header;
        let offset = header.p_offset.get(LE);
        let filesz = header.p_filesz.get(LE);
        if filesz > 0 && offset < cut.range.end && offset.saturating_add(filesz) > cut.range.start {
            return Err(Error::new(
                ErrorKind::Layout,
                path,
                format!(
                    "segment {index} (type {:#x}) overlaps the device code being removed",
                    header.p_type.get(LE)
                ),
            ));
        }
        header.p_offset.set(LE, cut.shift(offset));
        table.push(header);
    }
    let table_len = table.len() as u64 * PHDR_SIZE;
    for header in table
        .iter_mut()
        .filter(|p| p.p_type.get(LE) == elf::PT_PHDR)
    {
        header.p_offset.set(LE, cut.kpack_page_offset);
        header.p_vaddr.set(LE, cut.kpack_page_addr);
        header.p_paddr.set(LE, cut.kpack_page_addr);
        header.p_filesz.set(LE, table_len);
        header.p_memsz.set(LE, table_len);
    }
    Ok((table, cut.segment_index + kpack_in_pieces))
}

/// The pieces that replace the fat binary's `PT_LOAD`: before the kpack
/// page (if any), the kpack segment, after the cut (if any). Returns them
/// and the kpack segment's index among them.
fn segment_pieces(cut: &Cut) -> (Vec<ProgramHeader64<LE>>, usize) {
    let segment = cut.segment;
    let piece = |flags: u32, offset: u64, vaddr: u64, filesz: u64, memsz: u64, align: u64| {
        let mut header = segment;
        header.p_type.set(LE, elf::PT_LOAD);
        header.p_flags.set(LE, flags);
        header.p_offset.set(LE, offset);
        header.p_vaddr.set(LE, vaddr);
        header.p_paddr.set(LE, vaddr);
        header.p_filesz.set(LE, filesz);
        header.p_memsz.set(LE, memsz);
        header.p_align.set(LE, align);
        header
    };
    let (seg_vaddr, seg_flags, seg_align) = (
        cut.segment_vaddr(),
        segment.p_flags.get(LE),
        segment.p_align.get(LE),
    );
    let mut pieces = Vec::with_capacity(3);
    if seg_vaddr < cut.kpack_page_addr {
        let pre_size = cut.kpack_page_addr - seg_vaddr;
        pieces.push(piece(
            seg_flags,
            cut.segment_offset(),
            seg_vaddr,
            pre_size,
            pre_size,
            seg_align,
        ));
    }
    // The kpack segment's addresses run over the cut pages, which
    // zero-fill, so nothing after it changes address.
    let kpack_memsz = if cut.fatbin_is_last {
        cut.segment_mem_end() - cut.kpack_page_addr
    } else {
        cut.post_addr - cut.kpack_page_addr
    };
    let kpack_in_pieces = pieces.len();
    // p_filesz is set below, once the table's length is known.
    pieces.push(piece(
        elf::PF_R,
        cut.kpack_page_offset,
        cut.kpack_page_addr,
        0,
        kpack_memsz,
        seg_align.max(PAGE),
    ));
    if !cut.fatbin_is_last {
        pieces.push(piece(
            seg_flags,
            // Right after the kpack page: where the cut ends, shifted.
            cut.range.start,
            cut.post_addr,
            cut.segment_file_end() - cut.range.end,
            cut.segment_mem_end() - cut.post_addr,
            seg_align,
        ));
    }
    (pieces, kpack_in_pieces)
}

/// The old section headers in the output: `.hip_fatbin` becomes
/// `SHT_NOBITS` over the cut pages (or, pruned, shrinks to its `kept_len`
/// bytes of bundles), every other section moves with the cut (no index
/// changes).
fn plan_moved_sections(
    path: &Path,
    sections: &[SectionHeader64<LE>],
    fatbin: SectionInfo,
    kept_len: Option<u64>,
    cut: &Cut,
) -> Result<Vec<SectionHeader64<LE>>, Error> {
    let mut moved = sections.to_vec();
    let nobits_start = cut.kpack_page_addr + cut.kpack_page_len;
    for (index, header) in moved.iter_mut().enumerate() {
        if let (true, Some(kept_len)) = (index == fatbin.index, kept_len) {
            // The bundles stay where they were; the section ends with
            // them, before the kpack page (`.kpack.pad` covers the rest).
            header.sh_size.set(LE, kept_len);
            continue;
        }
        if index == fatbin.index {
            let nobits_end = if cut.fatbin_is_last {
                (fatbin.addr + fatbin.size).min(cut.segment_mem_end())
            } else {
                cut.post_addr
            };
            header.sh_type.set(LE, elf::SHT_NOBITS);
            header.sh_addr.set(LE, nobits_start);
            header.sh_offset.set(LE, cut.range.start);
            header
                .sh_size
                .set(LE, nobits_end.saturating_sub(nobits_start));
            header.sh_addralign.set(
                LE,
                match cut.layout {
                    Layout::InPlace => PAGE,
                    Layout::SharedPage => 1,
                },
            );
            continue;
        }
        let offset = header.sh_offset.get(LE);
        let size = header.sh_size.get(LE);
        let sh_type = header.sh_type.get(LE);
        let in_file = sh_type != elf::SHT_NOBITS && sh_type != elf::SHT_NULL;
        if in_file
            && size > 0
            && offset < cut.range.end
            && offset.saturating_add(size) > cut.range.start
        {
            return Err(Error::new(
                ErrorKind::Layout,
                path,
                format!("section {index} overlaps the device code being removed"),
            ));
        }
        header.sh_offset.set(LE, cut.shift(offset));
    }
    Ok(moved)
}

/// Where a `.kpack.pad` section starts, if the sections of the fat
/// binary's segment end short of the kpack page, or none is before it.
///
/// BFD (strip, objcopy) lays each segment out by its sections; a section
/// over the padding between the last section before the kpack page and
/// the page keeps the kpack segment at its offset after such a rewrite.
/// When `.hip_fatbin` has a `PT_LOAD` of its own that starts before the
/// kpack page, no other section is there: the padding then starts with
/// the segment, or the piece before the kpack page would hold no section
/// and BFD would leave the kpack segment's first bytes outside it.
fn padding_start(sections: &[SectionHeader64<LE>], cut: &Cut) -> Option<u64> {
    let last_end = sections
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
        .filter(|&(start, end)| {
            start >= cut.segment_vaddr() && end <= cut.kpack_page_addr && end > start
        })
        .map(|(_, end)| end)
        .max();
    let start = last_end.unwrap_or(cut.segment_vaddr());
    (start < cut.kpack_page_addr).then_some(start)
}

/// End of the input bytes kept after the cut: the old section header table
/// (and `.shstrtab`, when it is the last thing before it) are dropped from
/// the end of the file, to be written again.
pub(super) fn kept_tail_end(
    file: &FileHeader64<LE>,
    old_shstrtab: &Range<u64>,
    file_len: u64,
) -> u64 {
    let shoff = file.e_shoff.get(LE);
    let shnum = u64::from(file.e_shnum.get(LE));
    let mut end = file_len;
    // The table was read, so this sum stays inside the file.
    if shoff + shnum * SHDR_SIZE == file_len {
        end = shoff;
    }
    if old_shstrtab.end <= end && end - old_shstrtab.end < 8 {
        end = old_shstrtab.start;
    }
    end
}

/// A read-only `SHT_PROGBITS` section header whose name is at `name` in
/// `.shstrtab`, built from `template` (the NULL header).
pub(super) fn alloc_section(
    template: SectionHeader64<LE>,
    name: u64,
    addr: u64,
    offset: u64,
    size: u64,
) -> SectionHeader64<LE> {
    let mut header = template;
    // .shstrtab offsets are 32-bit in ELF; the old table's size came from
    // the file, so a name past 4 GiB wraps as it did when this was a push.
    header.sh_name.set(LE, name as u32);
    header.sh_type.set(LE, elf::SHT_PROGBITS);
    header.sh_flags.set(LE, u64::from(elf::SHF_ALLOC));
    header.sh_addr.set(LE, addr);
    header.sh_offset.set(LE, offset);
    header.sh_size.set(LE, size);
    header.sh_addralign.set(LE, 1);
    header
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

    use std::path::PathBuf;

    use object::elf;

    use super::super::source::Source;
    use super::*;
    use crate::read::{FatBinary, read_fat_binary};

    const MARKER_LEN: u64 = 116;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/corpus")
            .join(name)
    }

    /// The fixture's fat binary, headers and file size.
    fn open(name: &str) -> (PathBuf, FatBinary, Headers, u64) {
        let path = fixture(name);
        let fat = read_fat_binary(&path, Default::default()).unwrap();
        let source = Source::new(&path, &fat.source);
        let headers = Headers::read(&source).unwrap();
        let len = source.len();
        (path, fat, headers, len)
    }

    /// Virtual address of the kpack page, from where the marker is.
    fn kpack_page_addr(plan: &Plan) -> u64 {
        plan.marker_addr - plan.marker_offset_in_page
    }

    fn plan(name: &str) -> (FatBinary, Headers, Plan) {
        let (path, fat, headers, len) = open(name);
        let plan = Plan::new(&path, &headers, fat.fatbin.unwrap(), MARKER_LEN, len).unwrap();
        (fat, headers, plan)
    }

    #[test]
    fn kpack_page_is_the_first_whole_page_of_the_fat_binary() {
        let (fat, _, plan) = plan("libaxpy_2arch.so");
        let fatbin = fat.fatbin.unwrap();
        assert_eq!(kpack_page_addr(&plan) % PAGE, 0);
        assert!(kpack_page_addr(&plan) >= fatbin.addr);
        assert!(kpack_page_addr(&plan) - fatbin.addr < PAGE);
        assert!(kpack_page_addr(&plan) + PAGE <= fatbin.addr + fatbin.size);
        assert_eq!(
            plan.kpack_page_offset - fatbin.offset,
            kpack_page_addr(&plan) - fatbin.addr
        );
    }

    #[test]
    fn cut_is_whole_pages_of_device_code_after_the_kpack_page() {
        for name in [
            "libaxpy_2arch.so",
            "exe_axpy_2arch",
            "libaxpy_2arch_align64k.so",
        ] {
            let (fat, _, plan) = plan(name);
            let fatbin = fat.fatbin.unwrap();
            assert_eq!(plan.cut.start, plan.kpack_page_offset + PAGE, "{name}");
            // With 64 KiB segments the 0x4611-byte fat binary has no
            // removable run: the cut is empty rather than misaligned.
            assert_eq!(plan.bytes_removed() > 0, !name.contains("64k"), "{name}");
            assert_eq!(plan.bytes_removed() % PAGE, 0, "{name}");
            assert!(plan.cut.end <= fatbin.offset + fatbin.size, "{name}");
            assert_eq!(plan.kept_tail.start, plan.cut.end, "{name}");
        }
    }

    #[test]
    fn cut_keeps_a_64k_aligned_segment_aligned() {
        let (_, headers, plan) = plan("libaxpy_2arch_align64k.so");
        assert!(
            headers
                .program
                .iter()
                .any(|p| p.p_type.get(LE) == elf::PT_LOAD && p.p_align.get(LE) == 0x10000),
            "the fixture has 64 KiB segments"
        );
        assert_eq!(plan.bytes_removed() % 0x10000, 0);
        for p in plan
            .program_headers
            .iter()
            .filter(|p| p.p_type.get(LE) == elf::PT_LOAD)
        {
            let align = p.p_align.get(LE);
            assert_eq!(p.p_offset.get(LE) % align, p.p_vaddr.get(LE) % align);
        }
    }

    #[test]
    fn kpack_page_holds_the_program_headers_then_the_marker() {
        // An executable: it has a PT_PHDR to move.
        let (_, headers, plan) = plan("exe_axpy_2arch");
        let table_len = plan.program_headers.len() as u64 * PHDR_SIZE;
        // The fat binary's PT_LOAD becomes two or three pieces.
        assert!(plan.program_headers.len() > headers.program.len());
        assert_eq!(plan.marker_offset_in_page, table_len);
        assert_eq!(plan.marker_addr, kpack_page_addr(&plan) + table_len);
        let kpack = *plan
            .program_headers
            .iter()
            .find(|p| {
                p.p_type.get(LE) == elf::PT_LOAD && p.p_offset.get(LE) == plan.kpack_page_offset
            })
            .unwrap();
        assert_eq!(kpack.p_flags.get(LE), elf::PF_R);
        assert_eq!(kpack.p_offset.get(LE), plan.kpack_page_offset);
        assert_eq!(kpack.p_vaddr.get(LE), kpack_page_addr(&plan));
        assert_eq!(kpack.p_filesz.get(LE), table_len + MARKER_LEN);
        // Its memory runs over the cut pages, so later addresses stay put.
        assert!(kpack.p_memsz.get(LE) >= PAGE + plan.bytes_removed());
        let phdr = plan
            .program_headers
            .iter()
            .find(|p| p.p_type.get(LE) == elf::PT_PHDR)
            .unwrap();
        assert_eq!(phdr.p_offset.get(LE), plan.kpack_page_offset);
        assert_eq!(phdr.p_filesz.get(LE), table_len);
        assert_eq!(plan.file_header.e_phoff.get(LE), plan.kpack_page_offset);
        assert_eq!(
            usize::from(plan.file_header.e_phnum.get(LE)),
            plan.program_headers.len()
        );
        // An allocated SHT_NULL section covers exactly the table, for
        // libelf (eu-strip keeps allocated offsets; BFD drops SHT_NULL).
        let cover_index = headers.sections.len()
            + plan
                .added_names
                .iter()
                .position(|n| *n == PHDR_SECTION)
                .unwrap();
        let cover = plan.section_headers[cover_index];
        assert_eq!(cover.sh_type.get(LE), elf::SHT_NULL);
        assert_eq!(cover.sh_flags.get(LE), u64::from(elf::SHF_ALLOC));
        assert_eq!(cover.sh_addr.get(LE), kpack_page_addr(&plan));
        assert_eq!(cover.sh_offset.get(LE), plan.kpack_page_offset);
        assert_eq!(cover.sh_size.get(LE), table_len);
    }

    #[test]
    fn segments_and_sections_after_the_cut_move_down_by_it() {
        let (fat, headers, plan) = plan("libaxpy_2arch.so");
        let removed = plan.bytes_removed();
        let old_loads = headers
            .program
            .iter()
            .filter(|p| p.p_type.get(LE) == elf::PT_LOAD && p.p_offset.get(LE) >= plan.cut.end);
        for old in old_loads {
            let new = plan
                .program_headers
                .iter()
                .find(|p| p.p_vaddr.get(LE) == old.p_vaddr.get(LE))
                .unwrap();
            assert_eq!(new.p_offset.get(LE), old.p_offset.get(LE) - removed);
        }
        let fatbin_index = fat.fatbin.unwrap().index;
        for (index, old) in headers.sections.iter().enumerate() {
            let new = plan.section_headers[index];
            if index == fatbin_index {
                assert_eq!(new.sh_type.get(LE), elf::SHT_NOBITS);
                assert_eq!(new.sh_addr.get(LE), kpack_page_addr(&plan) + PAGE);
            } else if index != headers.shstrndx() && old.sh_offset.get(LE) >= plan.cut.end {
                assert_eq!(new.sh_offset.get(LE), old.sh_offset.get(LE) - removed);
            }
        }
    }

    #[test]
    fn marker_section_comes_last_with_its_name_appended() {
        let (_, headers, plan) = plan("libaxpy_2arch.so");
        assert_eq!(plan.added_names.last(), Some(&MARKER_SECTION));
        let marker = plan.section_headers.last().unwrap();
        assert_eq!(marker.sh_addr.get(LE), plan.marker_addr);
        assert_eq!(
            marker.sh_offset.get(LE),
            plan.kpack_page_offset + plan.marker_offset_in_page
        );
        assert_eq!(marker.sh_size.get(LE), MARKER_LEN);
        let old_shstrtab_len = plan.old_shstrtab.end - plan.old_shstrtab.start;
        let name_offsets: u64 = plan.added_names[..plan.added_names.len() - 1]
            .iter()
            .map(|n| n.len() as u64 + 1)
            .sum();
        assert_eq!(
            u64::from(marker.sh_name.get(LE)),
            old_shstrtab_len + name_offsets
        );
        assert_eq!(
            plan.section_headers.len(),
            headers.sections.len() + plan.added_names.len()
        );
        let shstrtab = plan.section_headers[headers.shstrndx()];
        assert_eq!(
            shstrtab.sh_offset.get(LE),
            plan.kpack_page_offset + PAGE + (plan.kept_tail.end - plan.kept_tail.start)
        );
        assert!(plan.section_table_offset >= shstrtab.sh_offset.get(LE) + shstrtab.sh_size.get(LE));
        assert_eq!(plan.section_table_offset % 8, 0);
        assert_eq!(
            plan.output_size,
            plan.section_table_offset + plan.section_headers.len() as u64 * SHDR_SIZE
        );
    }

    #[test]
    fn kept_maps_input_offsets_around_the_cut() {
        let (_, _, plan) = plan("libaxpy_2arch.so");
        assert_eq!(plan.kept(0), Some(0));
        assert_eq!(
            plan.kept(plan.kpack_page_offset - 1),
            Some(plan.kpack_page_offset - 1)
        );
        assert_eq!(plan.kept(plan.kpack_page_offset), None);
        assert_eq!(plan.kept(plan.cut.end - 1), None);
        assert_eq!(plan.kept(plan.cut.end), Some(plan.cut.start));
    }

    /// A clang-19 fixture (`tests/fixtures/clang19`).
    fn clang19(name: &str) -> (PathBuf, FatBinary, Headers, u64) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/clang19")
            .join(name);
        let fat = read_fat_binary(&path, Default::default()).unwrap();
        let source = Source::new(&path, &fat.source);
        let headers = Headers::read(&source).unwrap();
        let len = source.len();
        (path, fat, headers, len)
    }

    #[test]
    fn corpus_fixtures_take_the_in_place_layout() {
        for name in [
            "libaxpy_2arch.so",
            "exe_axpy_2arch",
            "libaxpy_2arch_align64k.so",
        ] {
            assert_eq!(plan(name).2.layout, Layout::InPlace, "{name}");
        }
    }

    #[test]
    fn fat_binary_smaller_than_a_page_shares_its_page() {
        // 1578 bytes of CCOB at 0x3000: no whole page of device code.
        let (path, fat, headers, len) = clang19("libaxpy_small.so");
        let fatbin = fat.fatbin.unwrap();
        let plan = Plan::new(&path, &headers, fatbin, MARKER_LEN, len).unwrap();
        assert_eq!(plan.layout, Layout::SharedPage);
        assert_eq!(plan.bytes_removed(), 0);
        assert_eq!(plan.kpack_page_offset, fatbin.offset.next_multiple_of(8));
        assert_eq!(
            plan.kpack_page_offset + plan.kpack_page_len,
            fatbin.offset + fatbin.size
        );
        // Growth: only the new .shstrtab names and two section headers.
        assert!(plan.output_size > len && plan.output_size - len < PAGE);
        // The table's cover, as in place: allocated SHT_NULL over it.
        let cover = plan.section_headers[headers.sections.len()
            + plan
                .added_names
                .iter()
                .position(|n| *n == PHDR_SECTION)
                .unwrap()];
        assert_eq!(cover.sh_type.get(LE), elf::SHT_NULL);
        assert_eq!(cover.sh_flags.get(LE), u64::from(elf::SHF_ALLOC));
        assert_eq!(cover.sh_addr.get(LE), kpack_page_addr(&plan));
        assert_eq!(cover.sh_offset.get(LE), plan.kpack_page_offset);
        assert_eq!(
            cover.sh_size.get(LE),
            plan.program_headers.len() as u64 * PHDR_SIZE
        );
        let table_len = plan.program_headers.len() as u64 * PHDR_SIZE;
        let kpack = plan
            .program_headers
            .iter()
            .find(|p| p.p_offset.get(LE) == plan.kpack_page_offset)
            .unwrap();
        // Its own PT_LOAD, starting with the table, same p_vaddr - p_offset
        // as the segment it came from, no zero-fill.
        assert_eq!(kpack.p_type.get(LE), elf::PT_LOAD);
        assert_eq!(
            kpack.p_vaddr.get(LE) - kpack.p_offset.get(LE),
            fatbin.addr - fatbin.offset
        );
        assert_eq!(kpack.p_filesz.get(LE), table_len + MARKER_LEN);
        assert_eq!(kpack.p_memsz.get(LE), kpack.p_filesz.get(LE));
        // Every address after it is unchanged: the next PT_LOAD starts
        // where the section ended.
        let loads: Vec<_> = plan
            .program_headers
            .iter()
            .filter(|p| p.p_type.get(LE) == elf::PT_LOAD)
            .collect();
        let at = loads
            .iter()
            .position(|p| p.p_offset.get(LE) == plan.kpack_page_offset)
            .unwrap();
        assert_eq!(loads[at + 1].p_vaddr.get(LE), fatbin.addr + fatbin.size);
        assert_eq!(loads[at + 1].p_offset.get(LE), fatbin.offset + fatbin.size);
    }

    #[test]
    fn unaligned_small_fat_binary_shares_its_first_page_with_the_piece_before() {
        // As if .hip_fatbin started 0x14 bytes into its page (the new
        // driver aligns it to 16 only): the table starts at the next
        // 8-aligned byte and the piece before ends there.
        let (path, fat, headers, len) = clang19("libaxpy_small.so");
        let mut fatbin = fat.fatbin.unwrap();
        fatbin.addr += 0x14;
        fatbin.offset += 0x14;
        fatbin.size -= 0x14;
        let plan = Plan::new(&path, &headers, fatbin, MARKER_LEN, len).unwrap();
        assert_eq!(plan.layout, Layout::SharedPage);
        assert_eq!(plan.kpack_page_offset, fatbin.offset + 4);
        let loads: Vec<_> = plan
            .program_headers
            .iter()
            .filter(|p| p.p_type.get(LE) == elf::PT_LOAD)
            .collect();
        let at = loads
            .iter()
            .position(|p| p.p_offset.get(LE) == plan.kpack_page_offset)
            .unwrap();
        let (pre, kpack) = (loads[at - 1], loads[at]);
        assert_eq!(
            pre.p_vaddr.get(LE) + pre.p_memsz.get(LE),
            kpack.p_vaddr.get(LE)
        );
        assert_eq!(
            pre.p_vaddr.get(LE) - pre.p_offset.get(LE),
            kpack.p_vaddr.get(LE) - kpack.p_offset.get(LE)
        );
        assert_eq!(plan.file_header.e_phoff.get(LE) % 8, 0);
    }

    #[test]
    fn fat_binary_too_small_for_table_and_marker_is_a_layout_error() {
        let (path, fat, headers, len) = clang19("libaxpy_small.so");
        let mut fatbin = fat.fatbin.unwrap();
        fatbin.size = 64;
        let error = Plan::new(&path, &headers, fatbin, MARKER_LEN, len).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Layout);
        assert!(
            error.to_string().contains("do not fit in the 64 bytes"),
            "{error}"
        );
    }

    #[test]
    fn marker_too_big_for_the_page_is_a_layout_error() {
        let (path, fat, headers, len) = open("libaxpy_2arch.so");
        let error = Plan::new(&path, &headers, fat.fatbin.unwrap(), PAGE, len).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Layout);
        assert!(
            error.to_string().contains("do not fit in one page"),
            "{error}"
        );
    }
}
