//! `kpack prune`'s layouts and their streaming writer.
//!
//! Pruning keeps every bundle at its address, so the bytes it frees lie
//! *between* bundles as well as after the last one. When whole pages are
//! free in two or more gaps, the *runs* layout takes them all out:
//!
//! ```text
//! before: [ rodata | b0 ....... | b1 ....... | b2 ....... | eh_frame ] one R PT_LOAD
//! after:  [ rodata | b0' ][PHDRs][ b1' ] ... [ b2' ...      eh_frame ] R PT_LOADs
//!          .hip_fatbin    kpack  .hip_fatbin.1   .hip_fatbin.2
//! ```
//!
//! The segment holding `.hip_fatbin` is split into `PT_LOAD`s around the
//! free pages (no virtual address moves; `p_offset ≡ p_vaddr` mod the page,
//! the holes between them unmapped); the program header table moves to the
//! first free gap large enough, at the start of its own `PT_LOAD` and
//! before any removed byte, so it keeps the first segment's
//! `p_vaddr - p_offset` (old kernels compute `AT_PHDR` from `e_phoff`) and
//! is not in a trailing segment (patchelf ≤ 0.18). Gaps before that one
//! stay in the file as zeros. `.hip_fatbin` keeps its index and shrinks to
//! the first run; each later run is a section `.hip_fatbin.N` (what strip
//! and objcopy lay each segment out by). With one gap, or a `p_align`
//! above a page, prune falls back to [`Plan::prune`]'s single cut, or to
//! the unchanged layout.
//!
//! Either way the output is a list of [`Piece`]s written in order, the
//! bytes of `.hip_fatbin` synthesized on the way: zeros, and each pruned
//! bundle streamed from the input (a plain bundle's new header, then its
//! kept code objects copied through the bounded buffer).

use std::ops::Range;
use std::path::Path;

use kpack_bundle::PrunedItem;
use object::LittleEndian as LE;
use object::elf::{self, FileHeader64, ProgramHeader64, SectionHeader64};
use object::pod;

use super::plan::{Plan, alloc_section, fatbin_segment, kept_tail_end};
use super::source::{Headers, Source, check_range};
use super::write::{Out, kpack_page, shstrtab};
use super::{Layout, PAGE, PHDR_SECTION, PHDR_SIZE, PruneLayout, SHDR_SIZE};
use crate::error::{Error, ErrorKind};
use crate::read::{FATBIN_SECTION, SectionInfo};

/// One stretch of the output, in order.
#[derive(Debug)]
pub(super) enum Piece {
    /// Input bytes, copied; those of `.hip_fatbin` are synthesized
    /// (zeros and the pruned bundles).
    Input(Range<u64>),
    /// New bytes: a program header table page, `.shstrtab`, the section
    /// header table.
    Bytes(Vec<u8>),
    /// Zeros.
    Zeros(u64),
}

/// The whole output of a prune, before a byte is written.
#[derive(Debug)]
pub(super) struct PrunePlan {
    /// `None` when the file keeps its layout.
    pub(super) layout: Option<PruneLayout>,
    pub(super) pieces: Vec<Piece>,
    /// The new ELF header, written over the first bytes last.
    pub(super) file_header: Option<FileHeader64<LE>>,
    pub(super) output_size: u64,
    pub(super) bytes_removed: u64,
    /// Sections `.hip_fatbin` is split into.
    pub(super) runs: usize,
    /// Why each layout not taken was refused (`runs: ...`,
    /// `in-place: ...`), and how the one taken was bent.
    pub(super) notes: Vec<String>,
}

/// Plan the output of a prune whose bundles keep `extents` (offsets into
/// `fatbin`, sorted, inside it): of the runs layout and [`Plan::prune`]'s
/// single cut, the one that frees more (the single cut on a tie), else the
/// unchanged layout. Why each layout not taken was refused goes into
/// [`PrunePlan::notes`].
pub(super) fn plan(
    path: &Path,
    headers: &Headers,
    source: &Source<'_>,
    fatbin: SectionInfo,
    extents: &[Range<u64>],
) -> Result<PrunePlan, Error> {
    let file_len = source.len();
    let runs = plan_runs(path, headers, source, fatbin, extents)?;
    let kept_len = extents.iter().map(|r| r.end).max().unwrap_or(0);
    let single = Plan::prune(path, headers, fatbin, kept_len, file_len)?;
    let single_removes = single.as_ref().map_or(0, Plan::bytes_removed);
    let mut refused = Vec::new();
    match runs {
        Ok(runs) if runs.bytes_removed > single_removes => {
            let mut runs = runs;
            if single.is_some() {
                runs.notes.push(format!(
                    "in-place: frees {single_removes} bytes, the runs layout {}",
                    runs.bytes_removed
                ));
            }
            return Ok(runs);
        }
        Ok(runs) => refused.push(format!(
            "runs: frees {} bytes, no more than the single cut after the last bundle ({single_removes})",
            runs.bytes_removed
        )),
        Err(why) => refused.push(format!("runs: {why}")),
    }
    let Some(plan) = single else {
        refused.push(
            "in-place: no whole page (or whole p_align block) after the last bundle can leave the file"
                .to_owned(),
        );
        return Ok(PrunePlan {
            layout: None,
            pieces: vec![Piece::Input(0..file_len)],
            file_header: None,
            output_size: file_len,
            bytes_removed: 0,
            runs: 1,
            notes: refused,
        });
    };
    single_cut(source, plan, refused)
}

/// The pieces of [`Plan::prune`]'s single cut.
fn single_cut(source: &Source<'_>, plan: Plan, refused: Vec<String>) -> Result<PrunePlan, Error> {
    let old = &plan.old_shstrtab;
    let old = source.read(old.start, old.end - old.start)?;
    let shstrtab = shstrtab(&plan, old);
    let shstrtab_len = shstrtab.len() as u64;
    let mut pieces = vec![
        Piece::Input(0..plan.kpack_page_offset),
        Piece::Bytes(kpack_page(&plan, &[])),
        Piece::Input(plan.kept_tail.clone()),
        Piece::Bytes(shstrtab),
    ];
    let shstrtab_end = plan.kpack_page_offset
        + plan.kpack_page_len
        + (plan.kept_tail.end - plan.kept_tail.start)
        + shstrtab_len;
    pieces.push(Piece::Zeros(
        plan.section_table_offset.saturating_sub(shstrtab_end),
    ));
    pieces.push(Piece::Bytes(section_table(&plan.section_headers)));
    Ok(PrunePlan {
        layout: match plan.layout {
            Layout::InPlace => Some(PruneLayout::InPlace),
            Layout::SharedPage => None,
        },
        pieces,
        file_header: Some(plan.file_header),
        output_size: plan.output_size,
        bytes_removed: plan.bytes_removed(),
        runs: 1,
        notes: refused,
    })
}

fn section_table(headers: &[SectionHeader64<LE>]) -> Vec<u8> {
    headers
        .iter()
        .flat_map(|h| pod::bytes_of(h).iter().copied())
        .collect()
}

/// The segment holding `.hip_fatbin`, as the runs layout splits it.
struct RunsSegment {
    /// Its index in the program header table.
    index: usize,
    header: ProgramHeader64<LE>,
    vaddr: u64,
    offset: u64,
    filesz: u64,
    memsz: u64,
    /// What every cut's length is a multiple of: a page, or the largest
    /// `p_align` of this and every later `PT_LOAD`, so that each keeps
    /// `p_offset ≡ p_vaddr (mod p_align)` when the cuts before it leave.
    block: u64,
}

impl RunsSegment {
    /// Input file offset of an address in the segment.
    fn file_offset(&self, addr: u64) -> u64 {
        self.offset + (addr - self.vaddr)
    }
}

/// Phase 1: the segment and the block its cuts are made of, or why the
/// runs layout cannot split it.
fn runs_segment(
    path: &Path,
    headers: &Headers,
    fatbin: SectionInfo,
    file_len: u64,
) -> Result<Result<RunsSegment, RunsRefused>, Error> {
    let program = &headers.program;
    let index = fatbin_segment(path, program, fatbin)?;
    let header = program[index];
    let seg = RunsSegment {
        index,
        header,
        vaddr: header.p_vaddr.get(LE),
        offset: header.p_offset.get(LE),
        filesz: header.p_filesz.get(LE),
        memsz: header.p_memsz.get(LE),
        block: program
            .iter()
            .filter(|p| p.p_type.get(LE) == elf::PT_LOAD && p.p_offset.get(LE) > fatbin.offset)
            .map(|p| p.p_align.get(LE))
            .fold(PAGE.max(header.p_align.get(LE)), u64::max),
    };
    // The single-cut plan reports an impossible segment.
    if seg.filesz > seg.memsz
        || seg
            .offset
            .checked_add(seg.filesz)
            .is_none_or(|e| e > file_len)
        || seg.vaddr.checked_add(seg.memsz).is_none()
    {
        return Ok(Err(RunsRefused::SegmentOutsideFile));
    }
    if !seg.block.is_power_of_two() {
        return Ok(Err(RunsRefused::Align { block: seg.block }));
    }
    if !(seg.vaddr ^ seg.offset).is_multiple_of(seg.block) {
        return Ok(Err(RunsRefused::Congruence { block: seg.block }));
    }
    Ok(Ok(seg))
}

/// Why the runs layout cannot be made for a binary: a note of the prune
/// report (`runs: <why>`), not a failure (the single cut is tried next).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum RunsRefused {
    /// The segment holding `.hip_fatbin` is not inside the file.
    #[error("the segment holding .hip_fatbin does not fit the file")]
    SegmentOutsideFile,
    /// The largest `p_align` after `.hip_fatbin` is no power of two.
    #[error("p_align {block:#x} is not a power of two")]
    Align {
        /// The block (largest `p_align`).
        block: u64,
    },
    /// The segment's address and offset disagree modulo the block.
    #[error(
        "the segment's p_vaddr - p_offset is not a multiple of the {block:#x} block its cuts need"
    )]
    Congruence {
        /// The block (largest `p_align`).
        block: u64,
    },
    /// No hole holds the program header table.
    #[error("no free page(s) of .hip_fatbin hold the program header table")]
    NoTablePage,
    /// Nothing is left to cut after the table.
    #[error("no whole page is free after the program header table")]
    NoPage,
    /// No hole holds a whole block.
    #[error("no free stretch of .hip_fatbin holds a whole {block:#x} block (the largest p_align)")]
    NoBlock {
        /// The block (largest `p_align`).
        block: u64,
    },
}

/// Phase 2: the whole free pages of `.hip_fatbin` (addresses), before,
/// between and after the bundles' `extents`. A hole never takes the
/// segment's last file byte: the last piece keeps file bytes and the
/// segment's zero-fill.
fn free_pages(seg: &RunsSegment, fatbin: SectionInfo, extents: &[Range<u64>]) -> Vec<Range<u64>> {
    let fatbin_end = fatbin.addr + fatbin.size;
    let limit = fatbin_end.min((seg.vaddr + seg.filesz).saturating_sub(1));
    let mut holes = Vec::new();
    let mut cursor = fatbin.addr;
    for r in extents
        .iter()
        .chain(std::iter::once(&(fatbin.size..fatbin.size)))
    {
        let start = fatbin.addr + r.start;
        let g0 = cursor.checked_next_multiple_of(PAGE).unwrap_or(u64::MAX);
        let g1 = start.min(limit) & !(PAGE - 1);
        if g1 > g0 {
            holes.push(g0..g1);
        }
        cursor = cursor.max(fatbin.addr + r.end);
    }
    holes
}

/// Phase 3: where the program header table goes, its pages, and the cuts
/// (address ranges leaving the file, each a whole number of blocks), or
/// why none can be made. The table goes at the start of the first hole
/// that holds it; the holes before stay.
fn place_cuts(
    headers: &Headers,
    seg: &RunsSegment,
    holes: &[Range<u64>],
) -> Result<(u64, u64, Vec<Range<u64>>), RunsRefused> {
    let program = &headers.program;
    // The kernel reads an executable's table into one page on some
    // versions; ld.so reads a library's whatever its size.
    let kernel_loaded = headers.file.e_type.get(LE) == elf::ET_EXEC
        || program.iter().any(|p| p.p_type.get(LE) == elf::PT_INTERP);
    let others = program.len() - 1;
    // At most: the piece before, the table, and one piece after each
    // remaining hole plus the last.
    let (first, table_pages) = (0..holes.len())
        .find_map(|j| {
            let phnum = (others + holes.len() - j + 3) as u64;
            let pages = (phnum * PHDR_SIZE).div_ceil(PAGE);
            let fits = holes[j].end - holes[j].start >= pages * PAGE;
            (fits && !(kernel_loaded && pages > 1)).then_some((j, pages))
        })
        .ok_or(RunsRefused::NoTablePage)?;
    let table_addr = holes[first].start;
    let table_end = table_addr + table_pages * PAGE;
    let block = seg.block;
    let cuts: Vec<Range<u64>> = holes[first..]
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let start = if i == 0 { table_end } else { h.start };
            start..start + (h.end.saturating_sub(start)) / block * block
        })
        .filter(|c| c.end > c.start)
        .collect();
    if cuts.is_empty() {
        return Err(if block == PAGE {
            RunsRefused::NoPage
        } else {
            RunsRefused::NoBlock { block }
        });
    }
    Ok((table_addr, table_pages, cuts))
}

/// The runs layout, or why it cannot be made (no free page holds the
/// program header table, no hole a whole block, a segment that does not
/// fit the file).
fn plan_runs(
    path: &Path,
    headers: &Headers,
    source: &Source<'_>,
    fatbin: SectionInfo,
    extents: &[Range<u64>],
) -> Result<Result<PrunePlan, RunsRefused>, Error> {
    let seg = match runs_segment(path, headers, fatbin, source.len())? {
        Ok(seg) => seg,
        Err(why) => return Ok(Err(why)),
    };
    let holes = free_pages(&seg, fatbin, extents);
    let (table_addr, table_pages, cuts) = match place_cuts(headers, &seg, &holes) {
        Ok(placed) => placed,
        Err(why) => return Ok(Err(why)),
    };
    let runs = Runs::new(&seg, table_addr, table_pages, &cuts);
    let table = runs.program_headers(path, headers)?;
    let table_len = table.len() as u64 * PHDR_SIZE;
    let (sections, names) = runs.section_headers(path, headers, fatbin, table_len, source.len())?;
    runs.assemble(path, headers, source, table, sections, names)
        .map(Ok)
}

/// The runs layout's geometry: the table's place and the cuts, in
/// addresses and input file offsets.
struct Runs<'s> {
    seg: &'s RunsSegment,
    table_addr: u64,
    table_pages: u64,
    /// Input file offsets of the table's page(s).
    table_file: Range<u64>,
    /// Input file offsets of the cuts.
    cut_files: Vec<Range<u64>>,
    /// Address ranges of the segment's pieces after the table.
    runs: Vec<Range<u64>>,
    bytes_removed: u64,
}

impl<'s> Runs<'s> {
    fn new(seg: &'s RunsSegment, table_addr: u64, table_pages: u64, cuts: &[Range<u64>]) -> Self {
        let table_end = table_addr + table_pages * PAGE;
        let mut runs = Vec::new();
        let mut start = table_end;
        for cut in cuts {
            if cut.start > start {
                runs.push(start..cut.start);
            }
            start = cut.end;
        }
        runs.push(start..seg.vaddr + seg.filesz);
        Runs {
            seg,
            table_addr,
            table_pages,
            table_file: seg.file_offset(table_addr)..seg.file_offset(table_end),
            cut_files: cuts
                .iter()
                .map(|c| seg.file_offset(c.start)..seg.file_offset(c.end))
                .collect(),
            runs,
            bytes_removed: cuts.iter().map(|c| c.end - c.start).sum(),
        }
    }

    /// Output offset of input offset `o` outside every cut.
    fn shift(&self, o: u64) -> u64 {
        o - self
            .cut_files
            .iter()
            .filter(|c| c.end <= o)
            .map(|c| c.end - c.start)
            .sum::<u64>()
    }

    /// Whether `[o, o + size)` touches a cut or the table's pages.
    fn overlaps(&self, o: u64, size: u64) -> bool {
        overlaps(o, size, &self.cut_files, &self.table_file)
    }

    /// Phase 4: the program header table, the segment split into the
    /// piece before the table, the table's `PT_LOAD` and the runs.
    fn program_headers(
        &self,
        path: &Path,
        headers: &Headers,
    ) -> Result<Vec<ProgramHeader64<LE>>, Error> {
        let layout_error = |m: String| Error::new(ErrorKind::Layout, path, m);
        let seg = self.seg;
        let seg_align = seg.header.p_align.get(LE);
        let load = |flags: u32, start: u64, filesz: u64, memsz: u64, align: u64| {
            let mut h = seg.header;
            h.p_flags.set(LE, flags);
            h.p_offset.set(LE, self.shift(seg.file_offset(start)));
            h.p_vaddr.set(LE, start);
            h.p_paddr.set(LE, start);
            h.p_filesz.set(LE, filesz);
            h.p_memsz.set(LE, memsz);
            h.p_align.set(LE, align);
            h
        };
        let flags = seg.header.p_flags.get(LE);
        let mut pieces = Vec::new();
        let before = self.table_addr - seg.vaddr;
        if before > 0 {
            pieces.push(load(flags, seg.vaddr, before, before, seg_align));
        }
        let table_at = pieces.len();
        // p_filesz/p_memsz set once the table's length is known.
        pieces.push(load(elf::PF_R, self.table_addr, 0, 0, PAGE.max(seg_align)));
        for (i, run) in self.runs.iter().enumerate() {
            let len = run.end - run.start;
            let mem = if i + 1 == self.runs.len() {
                seg.vaddr + seg.memsz - run.start
            } else {
                len
            };
            pieces.push(load(flags, run.start, len, mem, seg_align));
        }
        let mut table = Vec::with_capacity(headers.program.len() + pieces.len());
        for (index, header) in headers.program.iter().enumerate() {
            if index == seg.index {
                table.extend(pieces.iter().copied());
                continue;
            }
            let mut header = *header;
            let o = header.p_offset.get(LE);
            let size = header.p_filesz.get(LE);
            if size > 0 && self.overlaps(o, size) {
                return Err(layout_error(format!(
                    "segment {index} (type {:#x}) overlaps the device code being removed",
                    header.p_type.get(LE)
                )));
            }
            header.p_offset.set(LE, self.shift(o));
            table.push(header);
        }
        let table_len = table.len() as u64 * PHDR_SIZE;
        if table_len > self.table_pages * PAGE {
            return Err(layout_error(format!(
                "{} program headers do not fit in {} page(s)",
                table.len(),
                self.table_pages
            )));
        }
        let table_index = seg.index + table_at;
        table[table_index].p_filesz.set(LE, table_len);
        table[table_index].p_memsz.set(LE, table_len);
        for h in table
            .iter_mut()
            .filter(|p| p.p_type.get(LE) == elf::PT_PHDR)
        {
            h.p_offset.set(LE, self.table_file.start);
            h.p_vaddr.set(LE, self.table_addr);
            h.p_paddr.set(LE, self.table_addr);
            h.p_filesz.set(LE, table_len);
            h.p_memsz.set(LE, table_len);
        }
        Ok(table)
    }

    /// Phase 5: the section headers. `.hip_fatbin` shrinks to the first
    /// run, the others move with the cuts; then the table's cover and the
    /// later runs (`.hip_fatbin.N`), whose names are returned.
    fn section_headers(
        &self,
        path: &Path,
        headers: &Headers,
        fatbin: SectionInfo,
        table_len: u64,
        file_len: u64,
    ) -> Result<(Vec<SectionHeader64<LE>>, Vec<String>), Error> {
        let shstrndx = headers.shstrndx();
        let old_shstr = headers.sections[shstrndx];
        check_range(
            path,
            old_shstr.sh_offset.get(LE),
            old_shstr.sh_size.get(LE),
            file_len,
        )?;
        let mut shstrtab_len = old_shstr.sh_size.get(LE);
        let mut sections = self.moved_sections(path, headers, fatbin)?;
        let template = sections[0];
        let mut names: Vec<String> = Vec::new();
        let mut name = |n: String| {
            let at = shstrtab_len;
            shstrtab_len += n.len() as u64 + 1;
            names.push(n);
            at
        };
        // The offload layout's cover (`plan.rs`): allocated, so eu-strip
        // keeps it over the table (it moves every non-allocated section it
        // keeps, and libelf zero-fills bytes no section covers);
        // `SHT_NULL`, so BFD drops it rather than lay it out after the
        // table it takes for the segment's header.
        let mut cover = alloc_section(
            template,
            name(PHDR_SECTION.to_owned()),
            self.table_addr,
            self.table_file.start,
            table_len,
        );
        cover.sh_type.set(LE, elf::SHT_NULL);
        sections.push(cover);
        let fatbin_header = headers.sections[fatbin.index];
        let fatbin_align = fatbin_header.sh_addralign.get(LE);
        let fatbin_end = fatbin.addr + fatbin.size;
        for (n, run) in self
            .runs
            .iter()
            .filter(|r| r.start < fatbin_end)
            .enumerate()
        {
            let mut h = fatbin_header;
            h.sh_name
                .set(LE, name(format!("{FATBIN_SECTION}.{}", n + 1)) as u32);
            h.sh_addr.set(LE, run.start);
            h.sh_offset
                .set(LE, self.shift(self.seg.file_offset(run.start)));
            h.sh_size.set(LE, run.end.min(fatbin_end) - run.start);
            if fatbin_align > 1 && !run.start.is_multiple_of(fatbin_align) {
                h.sh_addralign.set(LE, PAGE);
            }
            sections.push(h);
        }
        Ok((sections, names))
    }

    /// The input's section headers, `.hip_fatbin` shrunk to the first
    /// run, the others moved with the cuts (`.shstrtab` is placed later).
    fn moved_sections(
        &self,
        path: &Path,
        headers: &Headers,
        fatbin: SectionInfo,
    ) -> Result<Vec<SectionHeader64<LE>>, Error> {
        let shstrndx = headers.shstrndx();
        let mut sections = headers.sections.clone();
        for (index, header) in sections.iter_mut().enumerate() {
            if index == fatbin.index {
                header.sh_size.set(LE, self.table_addr - fatbin.addr);
                continue;
            }
            if index == shstrndx {
                continue;
            }
            let o = header.sh_offset.get(LE);
            let size = header.sh_size.get(LE);
            let sh_type = header.sh_type.get(LE);
            let in_file = sh_type != elf::SHT_NOBITS && sh_type != elf::SHT_NULL;
            if in_file && size > 0 && self.overlaps(o, size) {
                return Err(Error::new(
                    ErrorKind::Layout,
                    path,
                    format!("section {index} overlaps the device code being removed"),
                ));
            }
            header.sh_offset.set(LE, self.shift(o));
        }
        Ok(sections)
    }

    /// The new ELF header: the table at its page(s), the new section
    /// header table.
    fn file_header(
        &self,
        path: &Path,
        headers: &Headers,
        phnum: usize,
        shoff: u64,
        shnum: usize,
    ) -> Result<FileHeader64<LE>, Error> {
        let layout_error = |m: &str| Error::new(ErrorKind::Layout, path, m);
        let mut file_header = headers.file;
        file_header.e_phoff.set(LE, self.table_file.start);
        file_header.e_phnum.set(
            LE,
            u16::try_from(phnum).map_err(|_| layout_error("too many program headers"))?,
        );
        file_header.e_shoff.set(LE, shoff);
        file_header.e_shnum.set(
            LE,
            u16::try_from(shnum).map_err(|_| layout_error("too many sections"))?,
        );
        Ok(file_header)
    }

    /// Phase 6: the output pieces (input up to the table, the table
    /// page(s), the input between the cuts up to the old `.shstrtab` /
    /// section table, then those anew) and the new ELF header.
    fn assemble(
        &self,
        path: &Path,
        headers: &Headers,
        source: &Source<'_>,
        table: Vec<ProgramHeader64<LE>>,
        mut sections: Vec<SectionHeader64<LE>>,
        names: Vec<String>,
    ) -> Result<PrunePlan, Error> {
        let layout_error = |m: String| Error::new(ErrorKind::Layout, path, m);
        let shstrndx = headers.shstrndx();
        let old_shstr = headers.sections[shstrndx];
        let old_shstrtab =
            old_shstr.sh_offset.get(LE)..old_shstr.sh_offset.get(LE) + old_shstr.sh_size.get(LE);
        let tail_end = kept_tail_end(&headers.file, &old_shstrtab, source.len());
        let mut out = vec![Piece::Input(0..self.table_file.start)];
        let mut page = vec![0u8; (self.table_pages * PAGE) as usize];
        for (i, h) in table.iter().enumerate() {
            let at = i * PHDR_SIZE as usize;
            page[at..at + PHDR_SIZE as usize].copy_from_slice(pod::bytes_of(h));
        }
        out.push(Piece::Bytes(page));
        let mut from = self.table_file.end;
        for cut in &self.cut_files {
            if cut.start > from {
                out.push(Piece::Input(from..cut.start));
            }
            from = cut.end;
        }
        if tail_end < from {
            return Err(layout_error(
                "section header table sits inside the device code".into(),
            ));
        }
        out.push(Piece::Input(from..tail_end));
        let shstrtab_offset = self.shift(tail_end);
        let mut strtab = source.read(old_shstrtab.start, old_shstrtab.end - old_shstrtab.start)?;
        for n in &names {
            strtab.extend_from_slice(n.as_bytes());
            strtab.push(0);
        }
        let shstrtab_len = strtab.len() as u64;
        let section_table_offset = (shstrtab_offset + shstrtab_len).next_multiple_of(8);
        sections[shstrndx].sh_offset.set(LE, shstrtab_offset);
        sections[shstrndx].sh_size.set(LE, shstrtab_len);
        out.push(Piece::Bytes(strtab));
        out.push(Piece::Zeros(
            section_table_offset - shstrtab_offset - shstrtab_len,
        ));
        out.push(Piece::Bytes(section_table(&sections)));
        let output_size = section_table_offset + sections.len() as u64 * SHDR_SIZE;

        let file_header = self.file_header(
            path,
            headers,
            table.len(),
            section_table_offset,
            sections.len(),
        )?;
        let mut refused = Vec::new();
        if self.seg.block > PAGE {
            refused.push(format!(
                "runs: cuts rounded to the {:#x} block of the largest p_align",
                self.seg.block
            ));
        }
        Ok(PrunePlan {
            layout: Some(PruneLayout::Runs),
            pieces: out,
            file_header: Some(file_header),
            output_size,
            bytes_removed: self.bytes_removed,
            // .hip_fatbin and its .hip_fatbin.N (the cover is not a run).
            runs: names.len(),
            notes: refused,
        })
    }
}

/// Whether `[o, o + size)` touches a cut or the table's pages.
fn overlaps(o: u64, size: u64, cuts: &[Range<u64>], table: &Range<u64>) -> bool {
    let end = o.saturating_add(size);
    cuts.iter()
        .chain(std::iter::once(table))
        .any(|c| o < c.end && end > c.start)
}

/// A pruned bundle waiting to be written at `offset` in `.hip_fatbin`.
pub(super) enum Slot {
    /// Built or described.
    Ready(PrunedItem),
    /// Built once to learn its length and dropped (memory): built again
    /// when written, the same bytes (compression is deterministic).
    Again(usize),
}

/// Write `plan` into `out`, the bytes of `.hip_fatbin` (`fatbin`)
/// synthesized from `bundles` (`(offset in the section, length, slot)`,
/// sorted); `rebuild(i)` builds bundle `i` of the input again.
pub(super) fn write<W: std::io::Write + std::io::Seek>(
    source: &Source<'_>,
    plan: &PrunePlan,
    fatbin: SectionInfo,
    bundles: &[(u64, u64, Slot)],
    rebuild: &dyn Fn(usize) -> Result<Vec<u8>, Error>,
    out: &mut Out<'_, W>,
) -> Result<(), Error> {
    let path = source.path();
    let mut fatbin_writer = FatbinWriter {
        source,
        zone: fatbin.offset..fatbin.offset + fatbin.size,
        bundles,
        rebuild,
        next: 0,
    };
    for piece in &plan.pieces {
        match piece {
            Piece::Bytes(bytes) => out.write(bytes)?,
            Piece::Zeros(n) => out.zeros(*n)?,
            Piece::Input(range) => fatbin_writer.input(range.clone(), out)?,
        }
    }
    if fatbin_writer.next != bundles.len() {
        return Err(region_error(
            path,
            format!(
                "{} pruned bundle(s) fell outside the kept runs",
                bundles.len() - fatbin_writer.next
            ),
        ));
    }
    if out.pos() != plan.output_size {
        return Err(region_error(
            path,
            format!(
                "wrote {:#x} bytes, planned {:#x}",
                out.pos(),
                plan.output_size
            ),
        ));
    }
    if let Some(header) = &plan.file_header {
        out.put_at(plan.output_size, 0, pod::bytes_of(header))
            .map_err(|e| e.into_error(path, "ELF header"))?;
    }
    Ok(())
}

fn region_error(path: &Path, m: String) -> Error {
    Error::new(ErrorKind::Layout, path, format!("{FATBIN_SECTION}: {m}"))
}

/// Copies input pieces, synthesizing `.hip_fatbin`'s bytes (`zone`, input
/// offsets) from the pruned bundles in order.
struct FatbinWriter<'a, 's> {
    source: &'a Source<'s>,
    zone: Range<u64>,
    bundles: &'a [(u64, u64, Slot)],
    rebuild: &'a dyn Fn(usize) -> Result<Vec<u8>, Error>,
    /// The next bundle to write.
    next: usize,
}

impl FatbinWriter<'_, '_> {
    /// Write the input bytes `range`: outside the zone copied, inside it
    /// zeros around the pruned bundles that fall in it.
    fn input<W: std::io::Write + std::io::Seek>(
        &mut self,
        range: Range<u64>,
        out: &mut Out<'_, W>,
    ) -> Result<(), Error> {
        let zone = self.zone.clone();
        let mut pos = range.start;
        while pos < range.end {
            if pos < zone.start || pos >= zone.end {
                let stop = if pos < zone.start {
                    range.end.min(zone.start)
                } else {
                    range.end
                };
                out.copy(self.source, pos, stop - pos)?;
                pos = stop;
                continue;
            }
            let stop = range.end.min(zone.end);
            let Some((at, len, slot)) = self
                .bundles
                .get(self.next)
                .filter(|(at, _, _)| zone.start + at < stop)
            else {
                out.zeros(stop - pos)?;
                pos = stop;
                continue;
            };
            let start = zone.start + at;
            if start < pos || start + len > stop {
                return Err(region_error(
                    self.source.path(),
                    format!("pruned bundle at {at:#x} does not lie whole in a kept run"),
                ));
            }
            out.zeros(start - pos)?;
            self.bundle(*at, *len, slot, out)?;
            pos = start + len;
            self.next += 1;
        }
        Ok(())
    }

    /// Write one pruned bundle (`len` bytes, at `at` in the section).
    fn bundle<W: std::io::Write + std::io::Seek>(
        &self,
        at: u64,
        len: u64,
        slot: &Slot,
        out: &mut Out<'_, W>,
    ) -> Result<(), Error> {
        let before = out.pos();
        match slot {
            Slot::Ready(PrunedItem::Built(bytes)) => out.write(bytes)?,
            Slot::Again(i) => out.write(&(self.rebuild)(*i)?)?,
            Slot::Ready(PrunedItem::Plain(plain)) => {
                out.write(&plain.header)?;
                for &(offset, abs, size) in &plain.objects {
                    out.zeros((before + offset).saturating_sub(out.pos()))?;
                    out.copy(self.source, abs, size)?;
                }
                out.zeros((before + plain.len).saturating_sub(out.pos()))?;
            }
        }
        if out.pos() - before != len {
            return Err(region_error(
                self.source.path(),
                format!(
                    "pruned bundle at {at:#x} came out {} bytes long, planned {len}",
                    out.pos() - before
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

    #[test]
    fn runs_refusals_read_as_the_report_notes_them() {
        use super::RunsRefused;
        assert_eq!(
            RunsRefused::NoBlock { block: 0x10000 }.to_string(),
            "no free stretch of .hip_fatbin holds a whole 0x10000 block (the largest p_align)"
        );
        assert_eq!(
            RunsRefused::Align { block: 0x3000 }.to_string(),
            "p_align 0x3000 is not a power of two"
        );
    }

    use std::path::PathBuf;

    use kpack_bundle::ReadAt;
    use object::read::elf::{ElfFile64, ProgramHeader as _};
    use object::{Object, ObjectSection};

    use super::*;
    use crate::read::read_fat_binary;

    fn fixture(path: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures")
            .join(path)
    }

    /// The budget the tests prune under.
    fn budget() -> kpack_bundle::MemoryBudget {
        kpack_bundle::MemoryBudget::new(256 << 20)
    }

    /// Prune `path` keeping `target` into a real file; the output bytes
    /// and the report.
    fn prune(path: &Path, target: &str) -> (Vec<u8>, crate::PruneReport) {
        let fat = read_fat_binary(path, Default::default()).unwrap();
        let keep = |id: &kpack_bundle::EntryId| id.raw().ends_with(target);
        let (bytes, result) =
            crate::transform::written_through_file("prune-plan-test", path, |file| {
                crate::prune_to(path, &fat, &keep, file, &budget())
            });
        let (_, report) = result.unwrap();
        (bytes, report)
    }

    #[test]
    fn two_bundles_with_free_pages_between_take_the_runs_layout() {
        for (name, target) in [
            ("corpus/lib2tu_2arch.so", "gfx1030"),
            ("corpus/exe_2tu_wide", "gfx1010"),
            ("clang19/lib2tu_plain.so", "gfx1100"),
        ] {
            let input = fixture(name);
            let original = std::fs::read(&input).unwrap();
            let (image, report) = prune(&input, target);
            assert_eq!(report.layout, Some(PruneLayout::Runs), "{name}");
            assert!(report.runs >= 2, "{name}: {report:?}");
            // Whole pages left the file, between the bundles too.
            assert!(report.bytes_removed >= 2 * PAGE, "{name}: {report:?}");
            assert_eq!(report.output_size, image.len() as u64, "{name}");
            assert!(
                (image.len() as u64) + report.bytes_removed <= original.len() as u64 + PAGE,
                "{name}"
            );
            assert!(
                crate::verify_pruned_image(&*image).unwrap().is_empty(),
                "{name}"
            );

            let obj = ElfFile64::<LE, _>::parse(&*image).unwrap();
            let before = ElfFile64::<LE, _>::parse(&*original).unwrap();
            // No allocated section moved in memory.
            for s in before.sections() {
                if s.elf_section_header().sh_flags.get(LE) & u64::from(elf::SHF_ALLOC) != 0 {
                    let name = s.name().unwrap();
                    let after = obj.section_by_name(name).unwrap();
                    assert_eq!(after.address(), s.address(), "{name}");
                }
            }
            let loads: Vec<_> = obj
                .elf_program_headers()
                .iter()
                .filter(|p| p.p_type(LE) == elf::PT_LOAD)
                .collect();
            // Sorted, disjoint, congruent; the table starts its own PT_LOAD
            // with the first one's p_vaddr - p_offset.
            for w in loads.windows(2) {
                assert!(
                    w[0].p_vaddr(LE) + w[0].p_memsz(LE) <= w[1].p_vaddr(LE),
                    "{name}"
                );
            }
            for p in &loads {
                assert_eq!(p.p_vaddr(LE) % PAGE, p.p_offset(LE) % PAGE, "{name}");
            }
            let phoff = obj.elf_header().e_phoff.get(LE);
            let table = loads.iter().find(|p| p.p_offset(LE) == phoff).unwrap();
            assert_eq!(
                table.p_vaddr(LE) - table.p_offset(LE),
                loads[0].p_vaddr(LE) - loads[0].p_offset(LE),
                "{name}"
            );
            assert!(loads.last().unwrap().p_offset(LE) > phoff, "{name}");
            assert!(obj.section_by_name(".hip_fatbin.1").is_some(), "{name}");
            // The table's cover, as the offload layout's: allocated (eu-strip
            // keeps it over the table), SHT_NULL (BFD drops it), at the
            // table's address and offset.
            let cover = obj.section_by_name(PHDR_SECTION).unwrap();
            let sh = cover.elf_section_header();
            assert_eq!(sh.sh_type.get(LE), elf::SHT_NULL, "{name}");
            assert_eq!(sh.sh_flags.get(LE), u64::from(elf::SHF_ALLOC), "{name}");
            assert_eq!(sh.sh_offset.get(LE), phoff, "{name}");
            assert_eq!(cover.address(), table.p_vaddr(LE), "{name}");

            // Every bundle, read back through the runs, is what prune_item
            // builds in memory: streaming changed no byte.
            let out_path = std::env::temp_dir().join(format!(
                "kpack-prune-plan-reread-{}-{}",
                std::process::id(),
                input.file_name().unwrap().to_string_lossy()
            ));
            std::fs::write(&out_path, &image).unwrap();
            let back = read_fat_binary(&out_path, Default::default()).unwrap();
            let fat = read_fat_binary(&input, Default::default()).unwrap();
            assert_eq!(back.bundles.len(), fat.bundles.len(), "{name}");
            assert!(!back.fatbin_runs.is_empty(), "{name}");
            let keep = |id: &kpack_bundle::EntryId| id.raw().ends_with(target);
            for (old, new) in fat.bundles.iter().zip(&back.bundles) {
                assert_eq!(old.offset, new.offset, "{name}");
                let built =
                    kpack_bundle::prune_item(old, &fat.source, &keep, &Default::default()).unwrap();
                let mut got = vec![0u8; built.len()];
                back.source
                    .read_exact_at(new.abs_offset(), &mut got)
                    .unwrap();
                assert!(got == built, "{name}: bundle at {:#x}", old.offset);
            }
            assert_eq!(back.targets(), vec![target.to_owned()], "{name}");
            // A runs file is not pruned or offloaded again.
            let again = crate::prune(&out_path, &back, &keep, &budget()).unwrap_err();
            assert_eq!(again.kind(), ErrorKind::AlreadyTransformed, "{name}");
            std::fs::remove_file(&out_path).unwrap();
        }
    }

    #[test]
    fn segments_aligned_wider_than_a_page_are_cut_in_whole_blocks() {
        // lld with max-page-size 0x8000: every PT_LOAD aligned to 32 KiB,
        // two bundles of eight targets. Only the runs layout frees the
        // pages between the bundles; each cut is whole 32 KiB blocks.
        let input = fixture("clang22/libaxpy_align32k.so");
        let original = std::fs::read(&input).unwrap();
        let (image, report) = prune(&input, "gfx942");
        assert_eq!(report.layout, Some(PruneLayout::Runs), "{report:?}");
        assert_eq!(report.bytes_removed, 3 * 0x8000, "{report:?}");
        assert_eq!(report.bytes_removed % 0x8000, 0);
        assert_eq!(report.output_size, image.len() as u64);
        assert!(image.len() as u64 + report.bytes_removed <= original.len() as u64 + 0x1000);
        assert_eq!(
            report.layout_notes,
            [
                "runs: cuts rounded to the 0x8000 block of the largest p_align",
                "in-place: frees 65536 bytes, the runs layout 98304",
            ]
        );
        assert!(crate::verify_pruned_image(&*image).unwrap().is_empty());
        let obj = ElfFile64::<LE, _>::parse(&*image).unwrap();
        for p in obj.elf_program_headers() {
            if p.p_type(LE) == elf::PT_LOAD {
                let align = p.p_align(LE);
                assert_eq!(align, 0x8000);
                assert_eq!(p.p_vaddr(LE) % align, p.p_offset(LE) % align, "{p:?}");
            }
        }
    }

    #[test]
    fn one_gap_keeps_the_single_cut_layout() {
        // One bundle: only the pages after it are free.
        let input = fixture("corpus/libaxpy_wide.so");
        let fat = read_fat_binary(&input, Default::default()).unwrap();
        assert_eq!(fat.bundles.len(), 1);
        let (_, report) = prune(&input, "gfx1030");
        assert_eq!(report.layout, Some(PruneLayout::InPlace));
        assert_eq!(report.runs, 1);
        // The runs layout, refused, says why.
        assert_eq!(report.layout_notes.len(), 1, "{report:?}");
        assert!(report.layout_notes[0].starts_with("runs: "), "{report:?}");
    }
}
