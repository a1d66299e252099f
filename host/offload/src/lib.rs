//! Offload fat binaries: every code object goes into per-arch KPAK archives
//! (an [`ArchiveSet`]), and the binary is rewritten host-only with a
//! `.rocm_kpack_ref` marker ([`offload_binary`]).
//!
//! Archive naming: one archive per GPU *processor*, `<name>_<processor>.kpack`
//! (`libfoo_gfx90a.kpack`); target ids with features (`gfx90a:xnack+`,
//! `gfx90a:xnack-`) stay distinct inside it, as TOC arches. File names never
//! contain `:`, and AMD's runtime still finds them: it expands `@GFXARCH@`
//! from the most specific target down to the bare processor.
//!
//! With [`ArchiveSet::set_group`] (`--archive-group sub-family|family`)
//! one archive holds a whole group of ROCm's packaging hierarchy
//! (`libfoo_gfx110x.kpack`: gfx1100..gfx1103 and their variants as TOC
//! arches, `gfx_arch_family` = the group), and markers list the group
//! files explicitly ([`ArchiveSet::marker_search_paths`]) because
//! `@GFXARCH@` expands to targets only.
//!
//! TOC keys are `<kernel_name>#<co_index>`, where co_index is the index of
//! the bundle a wrapper's pointer resolves to (not the wrapper's position).
//!
//! ```no_run
//! use kpack_offload::{ArchiveSet, OffloadOptions, offload_binary};
//! let mut archives = ArchiveSet::new("out/.kpack".into(), "libfoo".into(), Default::default());
//! let opts = OffloadOptions {
//!     kernel_name: "lib/libfoo.so".into(),
//!     search_paths: vec![".kpack/libfoo_@GFXARCH@.kpack".into()],
//!     verify_hash: true,
//! };
//! let report = offload_binary("libfoo.so".as_ref(), "out/libfoo.so".as_ref(), &opts, &mut archives).unwrap();
//! archives.finish().unwrap();
//! ```
#![forbid(unsafe_code)]

mod pe;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use kpack_amdgpu::{Level, TargetFilter, TargetId, archive_group, archive_group_level};
use kpack_bundle::{MemoryBudget, WalkOptions};
use kpack_elf::{FatBinary, TransformReport, read_fat_binary, transform_to, verify_image};
use kpack_format::{
    ArchiveWriter, DeltaCompressor, EntryOrder, KernelCompressor, Marker, WriterOptions, Written,
};
use rayon::prelude::*;

/// AMD's marker placeholder for a target id (spec §3.2).
const GFXARCH: &str = "@GFXARCH@";

/// What went wrong while offloading.
///
/// Each message names the file; the underlying error is the
/// [`std::error::Error::source`] and is not repeated in the message.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or transforming the binary failed.
    #[error(transparent)]
    Elf(#[from] kpack_elf::Error),
    /// Reading or transforming a PE image (DLL, EXE) failed.
    #[error(transparent)]
    Pe(#[from] kpack_pe::Error),
    /// Writing an archive failed.
    #[error(transparent)]
    Archive(#[from] kpack_format::Error),
    /// Reading a code object failed.
    #[error("{path}: bundle {bundle}")]
    Bundle {
        /// The binary.
        path: PathBuf,
        /// Bundle index.
        bundle: usize,
        /// The cause.
        source: kpack_bundle::Error,
    },
    /// The transformed image failed its own checks (a kpack bug: nothing written).
    #[error("{path}: the transformed binary failed verification: {}", findings.join("; "))]
    Verify {
        /// The binary.
        path: PathBuf,
        /// The findings.
        findings: Vec<String>,
    },
    /// The target filter (`--gpu-targets`, `--exclude-arch`) removes
    /// every code object: refused rather than writing a binary with no
    /// device code (AMD since #7957).
    #[error(
        "{path}: the target filter removes every code object (targets {}); nothing written",
        targets.join(", ")
    )]
    AllTargetsFiltered {
        /// The binary.
        path: PathBuf,
        /// The targets the binary carries, sorted, each once.
        targets: Vec<String>,
    },
    /// Every wrapper is HIPK, as kpack leaves them, but the marker they
    /// point at is missing: a damaged binary, not an offloaded one.
    #[error(
        "{path}: its wrappers are HIPK (offloaded by kpack) but it has no {section} marker section, so no runtime can find its device code; offload the original fat binary instead"
    )]
    NoMarker {
        /// The binary.
        path: PathBuf,
        /// The marker section's name (`.rocm_kpack_ref`, `.kpackrf`).
        section: &'static str,
    },
    /// Writing the output failed.
    #[error("{path}: {what}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done (`cannot write`, ...).
        what: &'static str,
        /// The cause.
        source: std::io::Error,
    },
}

/// How to name and fill the marker.
#[derive(Debug, Clone)]
pub struct OffloadOptions {
    /// TOC key prefix written into the marker (`kernel_name`).
    pub kernel_name: String,
    /// Marker search paths, relative to the output binary's directory.
    pub search_paths: Vec<String>,
    /// Check the MD5 of compressed bundles.
    pub verify_hash: bool,
}

/// What happened to one binary.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Outcome {
    /// Device code moved to archives, binary rewritten.
    Offloaded {
        /// The ELF transform's report.
        transform: TransformReport,
        /// Code objects added to archives.
        code_objects: usize,
        /// Target ids found.
        targets: Vec<String>,
        /// Target ids the filter left out, one per code object left out.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        excluded: Vec<String>,
    },
    /// A PE image (DLL, EXE): device code moved to archives, image rewritten.
    #[serde(rename = "offloaded")]
    OffloadedPe {
        /// Always `"pe"`.
        format: &'static str,
        /// The PE transform's report.
        transform: kpack_pe::TransformReport,
        /// Code objects added to archives.
        code_objects: usize,
        /// Target ids found.
        targets: Vec<String>,
        /// Target ids the filter left out, one per code object left out.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        excluded: Vec<String>,
    },
    /// No device code: copied unchanged.
    HostOnly,
    /// Already transformed by kpack: copied unchanged.
    AlreadyOffloaded,
}

/// Where the archives of each processor go.
type DirFor = Box<dyn Fn(&str) -> PathBuf + Send + Sync>;

/// One archive per processor, written on [`ArchiveSet::finish`].
pub struct ArchiveSet {
    dir: PathBuf,
    dir_for: Option<DirFor>,
    name: String,
    options: WriterOptions,
    writers: BTreeMap<String, ArchiveWriter>,
    no_clobber: bool,
    group: Level,
    /// `None`: the process-wide budget, looked up when bundles are read
    /// (after the CLI has applied `--max-memory`).
    budget: Option<MemoryBudget>,
}

impl ArchiveSet {
    /// Archives `<dir>/<name>_<processor>.kpack`; `options.group_name`
    /// defaults to `name`, `gfx_arch_family` to the processor.
    pub fn new(dir: PathBuf, name: String, options: WriterOptions) -> ArchiveSet {
        ArchiveSet {
            dir,
            dir_for: None,
            name,
            options,
            writers: BTreeMap::new(),
            no_clobber: false,
            group: Level::Target,
            budget: None,
        }
    }

    /// Like [`new`](Self::new), but each processor's archive goes into its
    /// own directory `dir_for(processor)` (per-arch output trees).
    pub fn per_processor(
        name: String,
        options: WriterOptions,
        dir_for: impl Fn(&str) -> PathBuf + Send + Sync + 'static,
    ) -> ArchiveSet {
        ArchiveSet {
            dir: PathBuf::new(),
            dir_for: Some(Box::new(dir_for)),
            name,
            options,
            writers: BTreeMap::new(),
            no_clobber: false,
            group: Level::Target,
            budget: None,
        }
    }

    /// Bound the inflated bytes held while reading bundles by `budget`
    /// instead of the process-wide [`MemoryBudget::process`] (`--max-memory`).
    pub fn set_memory_budget(&mut self, budget: MemoryBudget) {
        self.budget = Some(budget);
    }

    /// Refuse (instead of replacing) an archive that already exists.
    pub fn set_no_clobber(&mut self, yes: bool) {
        self.no_clobber = yes;
    }

    /// Group archives by `level` of ROCm's packaging hierarchy: one
    /// archive per [`kpack_amdgpu::archive_group`] instead of per
    /// processor. [`Level::Target`] (the default) is per processor.
    pub fn set_group(&mut self, level: Level) {
        self.group = level;
    }

    /// The archive (group) name that holds `target`'s code: its processor,
    /// or its sub-family or family under [`set_group`](Self::set_group).
    pub fn group_of(&self, target: &TargetId) -> String {
        archive_group(target.processor(), self.group)
    }

    /// The marker search paths for a binary whose kept targets are
    /// `targets`: `search_paths` unchanged when archives are per processor;
    /// else each path holding `@GFXARCH@` followed by one copy per group
    /// archive the binary has (placeholder replaced by the group name,
    /// groups sorted). `@GFXARCH@` expands to targets only, so this is how
    /// a `gfx1101` device reaches `<name>_gfx110x.kpack`; a path without
    /// the placeholder is opened as is by AMD's loader too (spec §10.5
    /// step 5), and the `@GFXARCH@` path stays first so per-target
    /// archives (overlays, or family archives converted back) still win.
    pub fn marker_search_paths<'t>(
        &self,
        search_paths: &[String],
        targets: impl IntoIterator<Item = &'t str>,
    ) -> Vec<String> {
        if self.group == Level::Target {
            return search_paths.to_vec();
        }
        let groups: std::collections::BTreeSet<String> = targets
            .into_iter()
            .filter(|t| archive_group_level(&archive_group(t, self.group)).is_some())
            .map(|t| archive_group(t, self.group))
            .collect();
        let mut out = Vec::new();
        for sp in search_paths {
            out.push(sp.clone());
            if sp.contains(GFXARCH) {
                out.extend(groups.iter().map(|g| sp.replacen(GFXARCH, g, 1)));
            }
        }
        out
    }

    /// [`marker_search_paths`](Self::marker_search_paths) for the device
    /// code of `bundles` that `keep` keeps.
    pub fn marker_search_paths_for(
        &self,
        search_paths: &[String],
        bundles: &[kpack_bundle::Item],
        keep: &dyn Fn(&str) -> bool,
    ) -> Vec<String> {
        let targets: Vec<String> = bundles
            .iter()
            .flat_map(|b| &b.entries)
            .filter(|e| !e.id.is_host())
            .filter_map(|e| e.id.target())
            .map(|t| t.to_string())
            .filter(|t| keep(t))
            .collect();
        self.marker_search_paths(search_paths, targets.iter().map(String::as_str))
    }

    /// The archive directory for a processor.
    fn dir(&self, processor: &str) -> PathBuf {
        match &self.dir_for {
            Some(f) => f(processor),
            None => self.dir.clone(),
        }
    }

    /// The archive path for a processor.
    pub fn path_for(&self, processor: &str) -> PathBuf {
        self.dir(processor)
            .join(format!("{}_{processor}.kpack", self.name))
    }

    /// The marker search path pattern for binaries in `from_dir` when the
    /// archives are installed in `archive_dir`.
    pub fn search_path(&self, from_dir: &Path, archive_dir: &Path) -> String {
        let rel = relative_path(from_dir, archive_dir);
        let file = format!("{}_@GFXARCH@.kpack", self.name);
        if rel.as_os_str().is_empty() {
            file
        } else {
            format!("{}/{file}", rel.to_string_lossy().replace('\\', "/"))
        }
    }

    /// The marker search path pattern for binaries in `from_dir`, for
    /// archives installed where this set writes them (see [`new`](Self::new)).
    pub fn search_path_from(&self, from_dir: &Path) -> String {
        self.search_path(from_dir, &self.dir)
    }

    /// Add one code object.
    pub fn add(&mut self, key: &str, target: &TargetId, data: &[u8]) -> Result<(), Error> {
        let group = self.group_of(target);
        self.writer(&group)?.add(key, &target.to_string(), data)?;
        Ok(())
    }

    /// The writer for `processor`, created on first use.
    fn writer(&mut self, processor: &str) -> Result<&mut ArchiveWriter, Error> {
        if !self.writers.contains_key(processor) {
            let dir = self.dir(processor);
            std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
                path: dir,
                what: "cannot create",
                source,
            })?;
            let mut options = self.options.clone();
            if options.group_name.is_empty() {
                options.group_name = self.name.clone();
            }
            if options.gfx_arch_family.is_empty() {
                options.gfx_arch_family = processor.to_string();
            }
            let path = self.path_for(processor);
            if self.no_clobber && std::fs::symlink_metadata(&path).is_ok() {
                return Err(Error::Io {
                    path,
                    what: "already exists; pass --force to overwrite",
                    source: std::io::ErrorKind::AlreadyExists.into(),
                });
            }
            let w = ArchiveWriter::create(path, options)?;
            self.writers.insert(processor.to_string(), w);
        }
        self.writers.get_mut(processor).ok_or_else(|| Error::Io {
            path: self.dir.clone(),
            what: "internal error",
            source: std::io::Error::other("archive writer vanished"),
        })
    }

    /// `true` when nothing was added.
    pub fn is_empty(&self) -> bool {
        self.writers.is_empty()
    }

    /// Write every archive (each to a temp file, then renamed); returns
    /// (processor, what was written), sorted by processor.
    pub fn finish(self) -> Result<Vec<(String, Written)>, Error> {
        let mut out = Vec::new();
        for (processor, w) in self.writers {
            out.push((processor, w.finish()?));
        }
        Ok(out)
    }
}

/// Offload `input` into `output` (written via a temp file and rename; the
/// input is only read), adding its code objects to `archives`. Host-only
/// and already-offloaded inputs are copied unchanged and reported.
pub fn offload_binary(
    input: &Path,
    output: &Path,
    opts: &OffloadOptions,
    archives: &mut ArchiveSet,
) -> Result<Outcome, Error> {
    offload_binary_filtered(input, output, opts, &TargetFilter::default(), archives)
}

/// [`offload_binary`] keeping only the code objects whose target `filter`
/// keeps ([`Error::AllTargetsFiltered`], nothing written, when it keeps
/// none of a fat binary's).
pub fn offload_binary_filtered(
    input: &Path,
    output: &Path,
    opts: &OffloadOptions,
    filter: &TargetFilter,
    archives: &mut ArchiveSet,
) -> Result<Outcome, Error> {
    // By magic, never by extension.
    if kpack_pe::is_pe_file(input)? {
        return pe::offload_binary(input, output, opts, filter, archives);
    }
    let fat = read_fat_binary(
        input,
        WalkOptions {
            verify_hash: opts.verify_hash,
        },
    )?;
    if fat.is_transformed() {
        if fat.marker.is_none() {
            return Err(Error::NoMarker {
                path: input.to_path_buf(),
                section: kpack_elf::MARKER_SECTION,
            });
        }
        copy_atomically(input, output)?;
        return Ok(Outcome::AlreadyOffloaded);
    }
    if fat.bundles.is_empty() {
        copy_atomically(input, output)?;
        return Ok(Outcome::HostOnly);
    }
    check_filter(input, &fat.bundles, filter)?;
    let opts = &OffloadOptions {
        search_paths: archives
            .marker_search_paths_for(&opts.search_paths, &fat.bundles, &|t| filter.keeps(t)),
        ..opts.clone()
    };
    // The host image (mostly a copy of the input, done by the kernel) is
    // written beside the bundles' streaming, which keeps every core busy
    // on its own: one after the other, the copy was a serial stretch.
    let keep = |t: &str| filter.keeps(t);
    let (transformed, added) = std::thread::scope(|scope| {
        let host = scope.spawn(|| transform_checked(input, &fat, opts, output));
        let added = add_code_objects(input, &fat, &opts.kernel_name, &keep, archives);
        let transformed = host
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (transformed, added)
    });
    let (staged, transform) = transformed?;
    let added = added?;
    staged.persist(input)?;
    Ok(Outcome::Offloaded {
        transform,
        code_objects: added.count,
        targets: added.targets,
        excluded: added.excluded,
    })
}

/// [`Error::AllTargetsFiltered`] when `bundles` hold device code and
/// `filter` keeps none of it. Checked before anything is written.
pub fn check_filter(
    input: &Path,
    bundles: &[kpack_bundle::Item],
    filter: &TargetFilter,
) -> Result<(), Error> {
    if filter.is_empty() {
        return Ok(());
    }
    let mut targets: Vec<String> = bundles
        .iter()
        .flat_map(|b| &b.entries)
        .filter(|e| !e.id.is_host())
        .filter_map(|e| e.id.target())
        .map(|t| t.to_string())
        .collect();
    targets.sort();
    targets.dedup();
    if targets.is_empty() || targets.iter().any(|t| filter.keeps(t)) {
        return Ok(());
    }
    Err(Error::AllTargetsFiltered {
        path: input.to_path_buf(),
        targets,
    })
}

/// Transform into a temp file beside `output` and run the structural
/// checks on that file (read back through a cache of the pages the checks
/// touch, never the whole image). The caller [`Staged::persist`]s it once
/// the archives are written; dropped, it is deleted.
pub fn transform_checked(
    input: &Path,
    fat: &FatBinary,
    opts: &OffloadOptions,
    output: &Path,
) -> Result<(Staged, TransformReport), Error> {
    let marker = Marker {
        kernel_name: opts.kernel_name.clone(),
        search_paths: opts.search_paths.clone(),
    }
    .to_bytes();
    let mut staged = Staged::new(output)?;
    let (_, report) = transform_to(input, fat, &marker, staged.tmp.as_file_mut())?;
    let findings =
        verify_image(&object::ReadCache::new(staged.tmp.as_file())).unwrap_or_else(|e| vec![e]);
    if !findings.is_empty() {
        return Err(Error::Verify {
            path: input.to_path_buf(),
            findings,
        });
    }
    Ok((staged, report))
}

/// An output being written: a temp file in the output's directory, renamed
/// onto the output by [`Staged::persist`], deleted if dropped before.
pub struct Staged {
    path: PathBuf,
    tmp: tempfile::NamedTempFile,
}

impl Staged {
    /// A fresh temp file beside `path` (its directory is created).
    pub fn new(path: &Path) -> Result<Staged, Error> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            what: "cannot write",
            source,
        };
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io)?;
        let tmp = tempfile::Builder::new()
            .prefix(&kpack_format::temp_prefix("host"))
            .tempfile_in(dir)
            .map_err(io)?;
        Ok(Staged {
            path: path.to_path_buf(),
            tmp,
        })
    }

    /// The temp file, to write the output into.
    pub fn file_mut(&mut self) -> &mut std::fs::File {
        self.tmp.as_file_mut()
    }

    /// Give the file the permissions of `mode_from` and rename it onto the
    /// output.
    pub fn persist(self, mode_from: &Path) -> Result<(), Error> {
        let io = |source| Error::Io {
            path: self.path.clone(),
            what: "cannot write",
            source,
        };
        if let Ok(meta) = std::fs::metadata(mode_from) {
            self.tmp
                .as_file()
                .set_permissions(meta.permissions())
                .map_err(io)?;
        }
        self.tmp.persist(&self.path).map_err(|e| io(e.error))?;
        Ok(())
    }
}

/// What [`add_code_objects`] added.
#[derive(Debug, Clone, Default)]
pub struct Added {
    /// Code objects added.
    pub count: usize,
    /// Target ids added, sorted, each once.
    pub targets: Vec<String>,
    /// Target ids left out by the filter, one per code object left out.
    pub excluded: Vec<String>,
}

/// Where one entry goes: (key, target id text, archive group: the processor
/// unless `--archive-group` is coarser).
type Dest = (String, String, String);

/// Add every device code object of `fat` whose target id passes `keep` to
/// `archives` under `<kernel_name>#<bundle index>`. See [`add_items`] for
/// how bundles are read.
pub fn add_code_objects(
    input: &Path,
    fat: &FatBinary,
    kernel_name: &str,
    keep: &(dyn Fn(&str) -> bool + Sync),
    archives: &mut ArchiveSet,
) -> Result<Added, Error> {
    add_items(
        input,
        &fat.bundles,
        &fat.source,
        kernel_name,
        keep,
        archives,
    )
}

/// A failure inside one bundle's stream: the bundle's own, or the archive's.
enum StreamError {
    Bundle(kpack_bundle::Error),
    Other(Error),
}

impl From<kpack_bundle::Error> for StreamError {
    fn from(e: kpack_bundle::Error) -> Self {
        StreamError::Bundle(e)
    }
}

impl From<kpack_format::Error> for StreamError {
    fn from(e: kpack_format::Error) -> Self {
        StreamError::Other(Error::Archive(e))
    }
}

/// [`add_code_objects`] for the bundles of any host binary format.
///
/// Bundles are processed in parallel (the current rayon pool), each read
/// once by [`kpack_bundle::Item::stream_entries`] under the set's memory
/// budget: a worker inflates one bundle, compresses each kept code object
/// itself and hands the finished frame to its processor's writer, so
/// inflating one bundle overlaps with compressing another's entries. The
/// writers lay entries out in sorted (key, arch) order on `finish`, so the
/// archives do not depend on the order frames arrive in (nor on `-j`).
/// Without compression the writers first reserve every kernel's final
/// place ([`ArchiveWriter::reserve`]), so each one is written once, where
/// it stays. A bundle none of whose entries is kept is not inflated.
fn add_items(
    input: &Path,
    bundles: &[kpack_bundle::Item],
    source: &kpack_bundle::SizedFile,
    kernel_name: &str,
    keep: &(dyn Fn(&str) -> bool + Sync),
    archives: &mut ArchiveSet,
) -> Result<Added, Error> {
    let mut dests: Vec<Vec<Option<Dest>>> = Vec::with_capacity(bundles.len());
    let mut targets = Vec::new();
    let mut excluded = Vec::new();
    let mut count = 0;
    for (b, item) in bundles.iter().enumerate() {
        let mut row = Vec::with_capacity(item.entries.len());
        for entry in &item.entries {
            let mut dest = None;
            if let Some(target) = entry.id.target().filter(|_| !entry.id.is_host()) {
                let name = target.to_string();
                if keep(&name) {
                    targets.push(name.clone());
                    dest = Some((
                        format!("{kernel_name}#{b}"),
                        name,
                        archives.group_of(target),
                    ));
                    count += 1;
                } else {
                    excluded.push(name);
                }
            }
            row.push(dest);
        }
        dests.push(row);
    }
    for processor in dests.iter().flatten().flatten().map(|d| d.2.as_str()) {
        archives.writer(processor)?;
    }
    targets.sort();
    targets.dedup();
    let added = Added {
        count,
        targets,
        excluded,
    };
    let compression = archives.options.compression;
    let budget = archives
        .budget
        .clone()
        .unwrap_or_else(|| MemoryBudget::process().clone());
    // Checked in order first, so the error names the first bundle that
    // cannot fit whatever the thread timing.
    for (b, (item, row)) in bundles.iter().zip(&dests).enumerate() {
        if row.iter().any(Option::is_some) {
            item.check_fits(&budget).map_err(|source| Error::Bundle {
                path: input.to_path_buf(),
                bundle: b,
                source,
            })?;
        }
    }
    if let Some(delta) = DeltaCompressor::new(compression)?
        && archives.options.order == EntryOrder::Sorted
    {
        let writers = writer_locks(archives);
        add_delta(input, bundles, source, &dests, &writers, &budget, delta)?;
        return Ok(added);
    }
    if !bundles
        .iter()
        .any(|b| matches!(b.format, kpack_bundle::Format::Compressed(_)))
    {
        add_plain(input, bundles, source, &dests, archives)?;
        return Ok(added);
    }
    if compression == kpack_format::Compression::None {
        reserve(bundles, &dests, archives)?;
    }
    let writers = writer_locks(archives);
    largest_first(bundles, &dests)
        .into_par_iter()
        .try_for_each_init(
            || KernelCompressor::new(compression),
            |compressor, (b, (item, row))| -> Result<(), Error> {
                if row.iter().all(Option::is_none) {
                    return Ok(());
                }
                let compressor = match compressor {
                    Ok(c) => c,
                    Err(e) => {
                        return Err(Error::Io {
                            path: input.to_path_buf(),
                            what: "cannot start compressing",
                            source: std::io::Error::other(e.to_string()),
                        });
                    }
                };
                item.stream_entries(source, &budget, |i, _, bytes| -> Result<(), StreamError> {
                    let Some(Some((key, name, processor))) = row.get(i) else {
                        return Ok(());
                    };
                    let stored = match compressor {
                        Some(c) => c.compress(bytes, key, name)?,
                        None => bytes,
                    };
                    let Some(writer) = writers.get(processor.as_str()) else {
                        return Err(StreamError::Other(Error::Io {
                            path: input.to_path_buf(),
                            what: "internal error",
                            source: std::io::Error::other("no archive writer for a processor"),
                        }));
                    };
                    writer
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .add_precompressed(key, name, stored, bytes.len() as u64)?;
                    Ok(())
                })
                .map_err(|e| match e {
                    StreamError::Bundle(source) => Error::Bundle {
                        path: input.to_path_buf(),
                        bundle: b,
                        source,
                    },
                    StreamError::Other(e) => e,
                })
            },
        )?;
    Ok(added)
}

/// `bundles` with their `rows` and indices, largest inflated size first
/// (ties: file order): each worker takes them in that order, so a decoder
/// (and arena) kept from one bundle is big enough for the next and zstd
/// reuses its window instead of allocating a larger one. The archives do
/// not depend on the order.
fn largest_first<'a, R>(
    bundles: &'a [kpack_bundle::Item],
    rows: &'a [R],
) -> Vec<(usize, (&'a kpack_bundle::Item, &'a R))> {
    let inflated = |item: &kpack_bundle::Item| match &item.format {
        kpack_bundle::Format::Compressed(header) => header.uncompressed_size,
        _ => item.len,
    };
    let mut order: Vec<_> = bundles.iter().zip(rows).enumerate().collect();
    order.sort_by_key(|(b, (item, _))| (std::cmp::Reverse(inflated(item)), *b));
    order
}

/// Each archive's writer behind a lock of its own, for the bundle workers.
fn writer_locks(archives: &mut ArchiveSet) -> BTreeMap<&str, Mutex<&mut ArchiveWriter>> {
    archives
        .writers
        .iter_mut()
        .map(|(p, w)| (p.as_str(), Mutex::new(w)))
        .collect()
}

/// Give every archive its whole layout before any bundle is read (see
/// [`ArchiveWriter::reserve`]): without compression a stored kernel is its
/// code object, whose size the bundle header gives, so each kernel can be
/// written once, into its final place, whatever order bundles finish in.
fn reserve(
    bundles: &[kpack_bundle::Item],
    dests: &[Vec<Option<Dest>>],
    archives: &mut ArchiveSet,
) -> Result<(), Error> {
    let mut per_group: BTreeMap<&str, Vec<(&str, &str, u64)>> = BTreeMap::new();
    for (item, row) in bundles.iter().zip(dests) {
        for (entry, dest) in item.entries.iter().zip(row) {
            if let Some((key, name, group)) = dest {
                per_group.entry(group.as_str()).or_default().push((
                    key.as_str(),
                    name.as_str(),
                    entry.size,
                ));
            }
        }
    }
    for (group, entries) in per_group {
        archives.writer(group)?.reserve(entries)?;
    }
    Ok(())
}

/// [`add_items`] for `zstd-delta`: the bundles are streamed in parallel as
/// for `zstd`, and each worker encodes whole kernel keys itself. A key is
/// `<kernel_name>#<bundle>`, so one bundle holds every target of its key;
/// the worker keeps a copy of each kept entry (in its stream's arena) until
/// the last entry of its archive group in this bundle has arrived, then
/// chooses the bases and
/// compresses the frames ([`DeltaCompressor::compress_key`], on plain
/// threads, `-j` of them: see there) and hands them to the writer
/// ([`ArchiveWriter::add_delta_key`]). Nothing raw is spooled, and the
/// archive is the one the writer's `finish` would encode from raw kernels,
/// at any `-j`. (Should another binary of the same set reuse a key, the
/// writer falls back to encoding that key at `finish`.)
///
/// Memory: a worker takes from `budget`, before reading, what
/// [`kpack_bundle::Item::stream_entries`] needs plus an arena for the
/// copies it will hold ([`arena_peak`]), all at once
/// ([`kpack_bundle::Item::stream_entries_with_arena`]); the arena is
/// emptied whenever no copy is held, and kept for the next bundle.
fn add_delta(
    input: &Path,
    bundles: &[kpack_bundle::Item],
    source: &kpack_bundle::SizedFile,
    dests: &[Vec<Option<Dest>>],
    writers: &BTreeMap<&str, Mutex<&mut ArchiveWriter>>,
    budget: &MemoryBudget,
    delta: DeltaCompressor,
) -> Result<(), Error> {
    largest_first(bundles, dests).into_par_iter().try_for_each(
        |(b, (item, row))| -> Result<(), Error> {
            if row.iter().all(Option::is_none) {
                return Ok(());
            }
            let bundle_error = |source| Error::Bundle {
                path: input.to_path_buf(),
                bundle: b,
                source,
            };
            let mut left = kept_per_group(row);
            // Each held copy: its target and where it lies in the arena.
            let mut held: BTreeMap<&str, Vec<(&str, std::ops::Range<usize>)>> = BTreeMap::new();
            // A big bundle's memory often keeps it alone in the budget: its
            // keys then use every thread of `-j`, not just this worker.
            let threads = rayon::current_num_threads();
            item.stream_entries_with_arena(
                source,
                budget,
                arena_peak(item, row),
                |arena, i, _, bytes| -> Result<(), StreamError> {
                    let Some(Some((key, name, group))) = row.get(i) else {
                        return Ok(());
                    };
                    let group = group.as_str();
                    let left = left.entry(group).or_default();
                    *left = left.saturating_sub(1);
                    if *left > 0 {
                        let at = arena.len();
                        arena.extend_from_slice(bytes);
                        held.entry(group).or_default().push((name, at..arena.len()));
                        arena.extend_from_slice(&[0; ARENA_GAP]);
                        return Ok(());
                    }
                    let copies = held.remove(group).unwrap_or_default();
                    let mut members: Vec<(&str, &[u8])> = copies
                        .iter()
                        .map(|(a, at)| (*a, &arena[at.clone()]))
                        .collect();
                    members.push((name, bytes));
                    let dk = delta.compress_key(key, &members, threads)?;
                    drop(members);
                    if held.is_empty() {
                        arena.clear();
                    }
                    let Some(writer) = writers.get(group) else {
                        return Err(StreamError::Other(Error::Io {
                            path: input.to_path_buf(),
                            what: "internal error",
                            source: std::io::Error::other("no archive writer for a group"),
                        }));
                    };
                    writer
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .add_delta_key(dk)?;
                    Ok(())
                },
            )
            .map_err(|e| match e {
                StreamError::Bundle(source) => bundle_error(source),
                StreamError::Other(e) => e,
            })
        },
    )
}

/// Bytes left between two copies in [`add_delta`]'s arena. zstd treats a
/// prefix that ends exactly where the data starts as one contiguous
/// stream, and then finds other matches than against a prefix elsewhere:
/// with a gap, a frame is the same wherever its members lie in memory
/// (as the writer's own encoding at `finish` and `archive convert` place
/// them).
const ARENA_GAP: usize = 1;

/// The arena [`add_delta`] needs for `item`'s copies: it replays the order
/// [`kpack_bundle::Item::stream_entries`] hands entries in (by offset, then
/// size, then index), appending each kept entry that is not its group's
/// last in the bundle, releasing a group's copies when its last entry
/// arrives (that one is read in place) and emptying the arena when no
/// copy is held; the arena's longest stretch is the answer. (With every
/// group's entries together, as bundles list targets in order, that is
/// the largest group's copies.)
fn arena_peak(item: &kpack_bundle::Item, row: &[Option<Dest>]) -> u64 {
    let mut left = kept_per_group(row);
    let mut order: Vec<usize> = (0..item.entries.len()).collect();
    order.sort_by_key(|&i| (item.entries[i].offset, item.entries[i].size, i));
    let mut holding: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    let (mut len, mut peak) = (0u64, 0u64);
    for i in order {
        let Some(Some((_, _, group))) = row.get(i) else {
            continue;
        };
        let group = group.as_str();
        let left = left.entry(group).or_default();
        *left = left.saturating_sub(1);
        if *left > 0 {
            holding.insert(group);
            len += item.entries[i].size + ARENA_GAP as u64;
            peak = peak.max(len);
        } else {
            holding.remove(group);
            if holding.is_empty() {
                len = 0;
            }
        }
    }
    peak
}

/// How many of a bundle's entries (`row`) each archive group keeps.
fn kept_per_group(row: &[Option<Dest>]) -> BTreeMap<&str, usize> {
    let mut kept: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, _, group) in row.iter().flatten() {
        *kept.entry(group.as_str()).or_default() += 1;
    }
    kept
}

/// [`add_items`] for inputs without compressed bundles: nothing to
/// inflate, so each archive is filled by its own thread in its final
/// (key, arch) order straight from the file, and the writer's spool
/// becomes the archive without a reordering copy (what keeps a plain
/// 1.3 GB library close to `cp`).
fn add_plain(
    input: &Path,
    bundles: &[kpack_bundle::Item],
    source: &kpack_bundle::SizedFile,
    dests: &[Vec<Option<Dest>>],
    archives: &mut ArchiveSet,
) -> Result<(), Error> {
    let mut jobs: BTreeMap<&str, Vec<(&str, &str, usize, usize)>> = BTreeMap::new();
    for (b, row) in dests.iter().enumerate() {
        for (i, dest) in row.iter().enumerate() {
            if let Some((key, name, group)) = dest {
                jobs.entry(group.as_str())
                    .or_default()
                    .push((key.as_str(), name.as_str(), b, i));
            }
        }
    }
    for list in jobs.values_mut() {
        list.sort_by(|x, y| (x.0, x.1).cmp(&(y.0, y.1)));
    }
    archives
        .writers
        .par_iter_mut()
        .try_for_each(|(group, writer)| -> Result<(), Error> {
            // Each thread its own descriptor: the copies move its position
            // (a `try_clone` would share one position between threads).
            let mut file = std::fs::File::open(input).map_err(|source| Error::Io {
                path: input.to_path_buf(),
                what: "cannot open",
                source,
            })?;
            for &(key, name, b, i) in jobs
                .get(group.as_str())
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                let bundle = |source| Error::Bundle {
                    path: input.to_path_buf(),
                    bundle: b,
                    source,
                };
                match bundles[b].stored_range(source, i).map_err(bundle)? {
                    Some((offset, len)) => {
                        writer.add_file_range(key, name, &mut file, offset, len)?;
                    }
                    None => {
                        let data = bundles[b].read_entry(source, i).map_err(bundle)?;
                        writer.add(key, name, &data)?;
                    }
                }
            }
            Ok(())
        })
}

/// Write `bytes` to `path` through a temp file in the same directory,
/// with the permissions of `mode_from`.
pub fn write_atomically(path: &Path, bytes: &[u8], mode_from: &Path) -> Result<(), Error> {
    let mut staged = Staged::new(path)?;
    staged.tmp.write_all(bytes).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        what: "cannot write",
        source,
    })?;
    staged.persist(mode_from)
}

/// Copy `input` to `output` through a temp file, streamed (the file is
/// never held in memory), with `input`'s permissions.
pub fn copy_atomically(input: &Path, output: &Path) -> Result<u64, Error> {
    let read = |source| Error::Io {
        path: input.to_path_buf(),
        what: "cannot read",
        source,
    };
    let mut from = std::fs::File::open(input).map_err(read)?;
    let mut staged = Staged::new(output)?;
    let len = std::io::copy(&mut from, staged.file_mut()).map_err(|source| Error::Io {
        path: output.to_path_buf(),
        what: "cannot write",
        source,
    })?;
    staged.persist(input)?;
    Ok(len)
}

/// `to` relative to `from` (both made absolute against the current dir).
pub fn relative_path(from: &Path, to: &Path) -> PathBuf {
    let abs = |p: &Path| {
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            std::env::current_dir().unwrap_or_default().join(p)
        };
        let mut out = PathBuf::new();
        for c in p.components() {
            match c {
                std::path::Component::ParentDir => {
                    out.pop();
                }
                std::path::Component::CurDir => {}
                other => out.push(other),
            }
        }
        out
    };
    let (from, to) = (abs(from), abs(to));
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut rel = PathBuf::new();
    for _ in from.components().skip(common) {
        rel.push("..");
    }
    for c in to.components().skip(common) {
        rel.push(c);
    }
    rel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_between_directories() {
        assert_eq!(
            relative_path(Path::new("/a/b/lib"), Path::new("/a/b/lib/.kpack")),
            PathBuf::from(".kpack")
        );
        assert_eq!(
            relative_path(Path::new("/a/b/bin"), Path::new("/a/b/lib/.kpack")),
            PathBuf::from("../lib/.kpack")
        );
        assert_eq!(
            relative_path(Path::new("/a/b"), Path::new("/a/b")),
            PathBuf::new()
        );
    }
}
