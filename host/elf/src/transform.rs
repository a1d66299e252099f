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

//!
//! The work is done in layers, the way `object`'s ELF writer reserves every
//! offset before it writes a byte:
//! - [`Source`] reads the input's headers (`source.rs`);
//! - [`Plan`] is pure arithmetic on those headers: the kpack page, the cut
//!   range, the shift of everything after it, the new program and section
//!   header tables and the new ELF header (`plan.rs`);
//! - the writers copy the kept bytes around the kpack page and patch the
//!   wrappers and their relocations (`write.rs`).

mod plan;
mod prune_plan;
mod source;
mod write;

use std::io::{Cursor, Seek, Write};
use std::path::Path;

use kpack_bundle::HostLayout as _;

use crate::error::{Error, ErrorKind};
use crate::read::{ElfKind, FATBIN_SECTION, FatBinary, MARKER_SECTION, Magic, SectionInfo};

use plan::Plan;
use source::{Headers, Source};
use write::Out;

const PAGE: u64 = 4096;
const PHDR_SIZE: u64 = 56;
const SHDR_SIZE: u64 = 64;
const EHDR_SIZE: u64 = 64;
/// Section kpack adds over the padding before the kpack page.
pub const PAD_SECTION: &str = ".kpack.pad";
/// Section kpack adds over the program header table it moves to the kpack
/// page: `SHT_NULL` with `SHF_ALLOC`, so that libelf-based rewriters
/// (eu-strip, dwz, debugedit) keep those bytes where they are and BFD
/// (strip, objcopy), which drops `SHT_NULL` sections, does not lay it out
/// after the table. Nothing reads it.
pub const PHDR_SECTION: &str = ".kpack.phdr";

/// Where the transform put the program headers and the marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// On the first whole page of `.hip_fatbin`, which gets a `PT_LOAD` of
    /// its own; the whole pages after it leave the file.
    InPlace,
    /// `.hip_fatbin` holds no whole page (small, compressed bundles): the
    /// table and marker overwrite the section's own bytes, in a `PT_LOAD`
    /// that shares its first and last page with the segments around it.
    /// Nothing leaves the file and nothing is added to it but two section
    /// headers.
    SharedPage,
}

impl Layout {
    /// The name `offload` prints and puts in its JSON.
    pub fn name(self) -> &'static str {
        match self {
            Layout::InPlace => "in-place",
            Layout::SharedPage => "shared-page",
        }
    }
}

/// The layout `kpack prune` took when whole pages left the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PruneLayout {
    /// Only the pages after the last bundle left: [`Layout::InPlace`] with
    /// the bundles as a kept prefix of `.hip_fatbin`.
    InPlace,
    /// The bundles' runs of `.hip_fatbin` in `PT_LOAD`s of their own, the
    /// whole pages between and after them out of the file, the program
    /// header table on the first free page(s) (`prune_plan.rs`).
    Runs,
}

impl PruneLayout {
    /// The name `prune` prints and puts in its JSON.
    pub fn name(self) -> &'static str {
        match self {
            PruneLayout::InPlace => "in-place",
            PruneLayout::Runs => "runs",
        }
    }
}

/// What the transform did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TransformReport {
    /// The layout taken.
    pub layout: Layout,
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
    /// Why no (or less) device code left the file than `.hip_fatbin`
    /// holds: the layout refused and the reason. Empty when every whole
    /// page of device code after the program header table left.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub layout_notes: Vec<String>,
}

/// One wrapper to redirect: where it is and which code-object index it gets.
struct WrapperPatch {
    /// Input file offset of the 24-byte wrapper.
    file_offset: u64,
    /// The bundle the wrapper points at, which becomes its `co_index`.
    co_index: u64,
    /// Input file offset of the `Elf64_Rela` that sets its pointer, if any.
    rela_entry: Option<u64>,
}

/// Rewrite the fat binary at `input` (already read as `fat`) into a
/// host-only image carrying `marker` (msgpack bytes). Returns the new file
/// bytes; nothing is written. [`transform_to`] writes the same bytes into a
/// file without holding them.
pub fn transform(
    input: &Path,
    fat: &FatBinary,
    marker: &[u8],
) -> Result<(Vec<u8>, TransformReport), Error> {
    let (image, report) = transform_to(input, fat, marker, Cursor::new(Vec::new()))?;
    Ok((image.into_inner(), report))
}

/// [`transform`] into `out` (empty, positioned at its start; a temp file):
/// the kept input bytes are copied through a bounded buffer, then the
/// wrappers and relocations are patched with positioned writes, so memory
/// does not grow with the file. Returns `out` and the report.
pub fn transform_to<W: Write + Seek>(
    input: &Path,
    fat: &FatBinary,
    marker: &[u8],
    out: W,
) -> Result<(W, TransformReport), Error> {
    let (fatbin, patches) = offloadable(input, fat)?;
    let machine = fat.machine.ok_or_else(|| {
        Error::new(
            ErrorKind::Unsupported,
            input,
            "only x86-64 and aarch64 host binaries can be offloaded",
        )
    })?;
    let source = Source::new(input, &fat.source);
    let headers = Headers::read(&source)?;
    let plan = Plan::new(input, &headers, fatbin, marker.len() as u64, source.len())?;
    let mut out = Out::new(input, out);
    write::assemble(&source, &plan, marker, &mut out)?;
    let relocations = write::patch(&mut out, plan.output_size, &plan, machine, &patches)?;
    let layout_notes = offload_layout_notes(&plan, fatbin);
    let report = TransformReport {
        layout_notes,
        layout: plan.layout,
        input_size: source.len(),
        output_size: plan.output_size,
        bytes_removed: plan.bytes_removed(),
        marker_addr: plan.marker_addr,
        wrappers: patches.len(),
        relocations,
    };
    Ok((out.finish()?, report))
}

/// Why `plan` frees less than `.hip_fatbin`'s whole pages, in words for
/// the offload report.
fn offload_layout_notes(plan: &Plan, fatbin: crate::read::SectionInfo) -> Vec<String> {
    match plan.layout {
        Layout::SharedPage => vec![format!(
            "in-place refused: {FATBIN_SECTION} ({} bytes at {:#x}) holds no whole {PAGE}-byte page, so no page can leave the file; its device code stays in the file's pages (the program headers and marker are written over its first bytes, the rest is left as it was), and the archives hold it too",
            fatbin.size, fatbin.addr
        )],
        Layout::InPlace if plan.bytes_removed() == 0 => vec![format!(
            "{FATBIN_SECTION} ({} bytes at {:#x}): no whole p_align block of it after the program header table could leave the file, so its device code stays in the file's pages",
            fatbin.size, fatbin.addr
        )],
        Layout::InPlace => Vec::new(),
    }
}

/// What [`prune`] did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PruneReport {
    /// The layout taken: `runs` when whole pages between bundles left the
    /// file, `in-place` when only those after the last bundle did (the
    /// program header table then sits on the first free page of
    /// `.hip_fatbin`), `None` when the file kept its layout and only the
    /// section's bytes changed.
    pub layout: Option<PruneLayout>,
    /// Input size in bytes.
    pub input_size: u64,
    /// Output size in bytes.
    pub output_size: u64,
    /// Bytes that left the file.
    pub bytes_removed: u64,
    /// Bytes of `.hip_fatbin` the pruned bundles take, from its start.
    pub bundle_bytes: u64,
    /// Bundles rewritten.
    pub bundles: usize,
    /// Sections `.hip_fatbin` ends up split into (`.hip_fatbin`, then
    /// `.hip_fatbin.1`, ...): more than one in the `runs` layout.
    pub runs: usize,
    /// Why each layout not taken was refused (`runs: ...`, `in-place:
    /// ...`), and how the one taken was bent to the segments' alignment.
    pub layout_notes: Vec<String>,
}

/// Rewrite the fat binary at `input` (already read as `fat`) keeping, in
/// every bundle, the host entry and the device entries `keep` accepts.
///
/// Each bundle stays at its address (rewritten by
/// [`kpack_bundle::prune_item`], never longer), so no wrapper pointer or
/// relocation changes and any HIP runtime loads the result. The space the
/// bundles free is zeros; when it holds whole pages after the last bundle,
/// they leave the file as in [`transform`]'s in-place layout (the program
/// header table on the first free page, a zero-filling `PT_LOAD` over the
/// rest, no virtual address moves). Returns the new file bytes; nothing is
/// written. [`prune_to`] writes them into a file.
pub fn prune(
    input: &Path,
    fat: &FatBinary,
    keep: &dyn Fn(&kpack_bundle::EntryId) -> bool,
    budget: &kpack_bundle::MemoryBudget,
) -> Result<(Vec<u8>, PruneReport), Error> {
    let (image, report) = prune_to(input, fat, keep, Cursor::new(Vec::new()), budget)?;
    Ok((image.into_inner(), report))
}

/// [`prune`] into `out` (empty, positioned at its start; a temp file),
/// streaming: the input is copied through a bounded buffer, `.hip_fatbin`
/// written as zeros and pruned bundles, a plain bundle's code objects
/// copied straight from the input. Memory holds one recompressed bundle at
/// a time beyond a small budget, never the file or the section. Returns
/// `out` and the report.
pub fn prune_to<W: Write + Seek>(
    input: &Path,
    fat: &FatBinary,
    keep: &dyn Fn(&kpack_bundle::EntryId) -> bool,
    out: W,
    budget: &kpack_bundle::MemoryBudget,
) -> Result<(W, PruneReport), Error> {
    let (fatbin, _) = offloadable(input, fat)?;
    let source = Source::new(input, &fat.source);
    let headers = Headers::read(&source)?;
    // Bundles are pruned one at a time, under the run's budget.
    let prune_one = |index: usize| {
        let item = &fat.bundles[index];
        kpack_bundle::prune_item_streamed(item, &fat.source, keep, budget).map_err(|e| {
            Error::bundle(
                input,
                &format!(
                    "bundle {index} at {:#x} in {FATBIN_SECTION}",
                    fatbin.offset + item.offset
                ),
                e,
            )
        })
    };
    let slots = pruned_slots(input, fat, fatbin, &prune_one)?;
    let extents: Vec<_> = slots.iter().map(|(at, len, _)| *at..at + len).collect();
    let plan = prune_plan::plan(input, &headers, &source, fatbin, &extents)?;
    let mut out = Out::new(input, out);
    let rebuild = |index: usize| match prune_one(index)? {
        kpack_bundle::PrunedItem::Built(bytes) => Ok(bytes),
        kpack_bundle::PrunedItem::Plain(_) => Err(Error::new(
            ErrorKind::Malformed,
            input,
            format!("bundle {index} changed format between two reads"),
        )),
    };
    prune_plan::write(&source, &plan, fatbin, &slots, &rebuild, &mut out)?;
    let report = PruneReport {
        layout: plan.layout,
        input_size: source.len(),
        output_size: plan.output_size,
        bytes_removed: plan.bytes_removed,
        bundle_bytes: extents.iter().map(|r| r.end).max().unwrap_or(0),
        bundles: fat.bundles.len(),
        runs: plan.runs,
        layout_notes: plan.notes.clone(),
    };
    Ok((out.finish()?, report))
}

/// Every pruned bundle, sorted by offset, to go at its old offset in
/// `.hip_fatbin` (`fatbin`) with zeros around it: plain ones described,
/// compressed ones built and kept while they fit the budget, else built
/// again (by `prune_one`) when written.
fn pruned_slots(
    input: &Path,
    fat: &FatBinary,
    fatbin: SectionInfo,
    prune_one: &dyn Fn(usize) -> Result<kpack_bundle::PrunedItem, Error>,
) -> Result<Vec<(u64, u64, prune_plan::Slot)>, Error> {
    let mut slots = Vec::with_capacity(fat.bundles.len());
    let mut held = 0u64;
    for (index, item) in fat.bundles.iter().enumerate() {
        let pruned = prune_one(index)?;
        let len = pruned.len();
        // prune_item never returns more than the item's bytes, which the
        // walk found inside the section.
        if item
            .offset
            .checked_add(len)
            .is_none_or(|end| end > fatbin.size)
        {
            return Err(Error::new(
                ErrorKind::Malformed,
                input,
                format!("bundle {index} runs past the end of {FATBIN_SECTION}"),
            ));
        }
        let slot = match pruned {
            kpack_bundle::PrunedItem::Built(bytes) if held + len > HELD_BUNDLES => {
                drop(bytes);
                prune_plan::Slot::Again(index)
            }
            pruned => {
                if let kpack_bundle::PrunedItem::Built(_) = pruned {
                    held += len;
                }
                prune_plan::Slot::Ready(pruned)
            }
        };
        slots.push((item.offset, len, slot));
    }
    slots.sort_by_key(|(offset, _, _)| *offset);
    if slots.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0) {
        return Err(Error::new(
            ErrorKind::Malformed,
            input,
            format!("bundles in {FATBIN_SECTION} overlap"),
        ));
    }
    Ok(slots)
}

/// Bytes of recompressed bundles [`prune_to`] holds between planning and
/// writing; past it, each is compressed again when written.
const HELD_BUNDLES: u64 = 64 << 20;

/// The `.hip_fatbin` to remove and the wrappers to redirect, or why `fat`
/// cannot be offloaded.
fn offloadable(input: &Path, fat: &FatBinary) -> Result<(SectionInfo, Vec<WrapperPatch>), Error> {
    let fail = |kind, message: String| Error::new(kind, input, message);
    if !matches!(fat.kind, ElfKind::Exec | ElfKind::Dyn) {
        return Err(fail(
            ErrorKind::Unsupported,
            "only executables and shared libraries can be offloaded".into(),
        ));
    }
    if let Some(why) = fat.already_offloaded(MARKER_SECTION) {
        return Err(fail(ErrorKind::AlreadyTransformed, why));
    }
    let fatbin = match fat.fatbin {
        Some(fatbin) if fatbin.in_file => fatbin,
        _ => {
            return Err(fail(
                ErrorKind::Offload,
                "no .hip_fatbin with file bytes: nothing to offload".into(),
            ));
        }
    };
    if !fat.fatbin_runs.is_empty() {
        return Err(fail(
            ErrorKind::AlreadyTransformed,
            format!(
                "{FATBIN_SECTION} was split into {} runs by kpack prune: start from the unpruned file",
                fat.fatbin_runs.len() + 1
            ),
        ));
    }
    if fat.wrappers.is_empty() {
        return Err(fail(
            ErrorKind::Offload,
            ".hip_fatbin has no wrapper in .hipFatBinSegment pointing at it".into(),
        ));
    }
    let mut patches = Vec::with_capacity(fat.wrappers.len());
    for wrapper in &fat.wrappers {
        if wrapper.magic != Magic::Hipf {
            return Err(fail(
                ErrorKind::Offload,
                format!(
                    "wrapper {} has magic {:?}, expected HIPF",
                    wrapper.index, wrapper.magic
                ),
            ));
        }
        let Some(bundle) = wrapper.bundle else {
            return Err(fail(
                ErrorKind::Offload,
                format!("wrapper {} does not point at a bundle", wrapper.index),
            ));
        };
        patches.push(WrapperPatch {
            file_offset: wrapper.file_offset,
            co_index: bundle as u64,
            rela_entry: wrapper.via.rela_entry(),
        });
    }
    Ok((fatbin, patches))
}

/// Run `write` on a real file in the temp directory (so positioned writes
/// go through the OS), named for the test and `name`; returns what it
/// wrote and `write`'s result. The file is removed.
#[cfg(test)]
pub(crate) fn written_through_file<T>(
    test: &str,
    name: &Path,
    write: impl FnOnce(std::fs::File) -> T,
) -> (Vec<u8>, T) {
    let out_path = std::env::temp_dir().join(format!(
        "kpack-{test}-{}-{}",
        std::process::id(),
        name.file_name().unwrap_or_default().to_string_lossy()
    ));
    let file = std::fs::File::options()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&out_path)
        .unwrap();
    let result = write(file);
    let bytes = std::fs::read(&out_path).unwrap();
    std::fs::remove_file(&out_path).unwrap();
    (bytes, result)
}
