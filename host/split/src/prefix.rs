//! Splitting one prefix tree: the reusable core ([`split_prefix`]).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use kpack_amdgpu::{Level, TargetFilter, TargetId};
use kpack_binary::{FileKind, HostBinary};
use kpack_bundle::WalkOptions;
use kpack_elf::read_fat_binary;
use kpack_format::{Compression, WriterOptions};
use kpack_job::Job;
use kpack_offload::{ArchiveSet, OffloadOptions, Outcome, offload_binary};
use rayon::prelude::*;
use serde::Serialize;

use crate::databases::{Claim, Classification, Databases, FileInfo};
use crate::error::{Error, ErrorKind, Result, error_chain};
use crate::link::symlink;
use kpack_artifact::{Store, Stored};
use kpack_fsafe::Tree;

/// A progress event, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'p> {
    /// A prefix was walked: this many files and bytes are coming.
    Walked {
        /// The prefix.
        prefix: &'p str,
        /// Regular files in it.
        files: u64,
        /// Their total size.
        bytes: u64,
    },
    /// One file is done.
    File {
        /// Its path relative to the prefix.
        path: &'p str,
        /// Its size.
        bytes: u64,
    },
}

/// How to split. Build it with [`SplitOptions::new`] and adjust fields.
#[derive(Clone)]
pub struct SplitOptions<'a> {
    /// The component (TheRock's artifact prefix, `blas_lib`): first part of
    /// every archive name, so archives of different components never
    /// collide when installs are flattened.
    pub component: String,
    /// Where archives go, relative to the prefix root, `/`-separated
    /// (default `lib/.kpack`: the flattened install's `lib/.kpack/`).
    pub archive_dir: String,
    /// Archive storage (default zstd level 3; AMD writes uncompressed).
    pub compression: Compression,
    /// Which targets to keep (`--gpu-targets`, `--exclude-arch`): device
    /// code and database files of other targets are dropped and reported;
    /// a fat binary that would keep no code object is an error.
    pub targets: TargetFilter,
    /// Check the MD5 of compressed bundles.
    pub verify_hash: bool,
    /// Database classifier (the `--split-databases` handlers), if any.
    pub databases: Option<&'a dyn Databases>,
    /// Progress callback, if any (called from worker threads).
    pub progress: Option<&'a (dyn Fn(Progress<'_>) + Sync)>,
    /// One archive per processor ([`Level::Target`], the default), or per
    /// sub-family or family (`--archive-group`): the group's archive
    /// (`<stem>_gfx110x.kpack`) goes into the arch tree named for the
    /// group, and markers list it explicitly.
    pub archive_group: Level,
    /// AMD's wheel layout: every binary's marker names
    /// `<archive_dir>/<name>_@GFXARCH@.kpack`, one archive per target id
    /// for the whole tree, which the caller assembles from the per-binary
    /// archives (still written as usual, into each arch tree). `None`:
    /// markers name the binary's own archives.
    pub shared_archive: Option<String>,
    /// Output artifacts as directories (the default) or as `.tar.zst`
    /// artifact archives with equivalence manifests.
    pub output_format: crate::OutputFormat,
    /// One archive per artifact and target (`<component>_<target id>.kpack`
    /// in each prefix's archive directory, AMD's naming) instead of one per
    /// binary; markers name `<component>_@GFXARCH@.kpack`.
    pub archive_per_artifact: bool,
    /// The mtime of every member of an output archive
    /// (`SOURCE_DATE_EPOCH`, else 0).
    pub mtime: u64,
    /// The run's job: every binary of the run read in parallel inflates
    /// under its memory budget (`--max-memory`); its rule for existing
    /// outputs is the rule for the artifacts `split_artifact` writes
    /// (`Existing::keeping_identical` for shards that write alike).
    pub job: &'a Job,
    /// What an artifact archive may inflate to and the zstd window it may
    /// ask for (`--max-unpacked-size`, `--max-memory`).
    pub archive_limits: kpack_artifact::Limits,
}

impl std::fmt::Debug for SplitOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SplitOptions")
            .field("component", &self.component)
            .field("archive_dir", &self.archive_dir)
            .field("compression", &self.compression)
            .field("targets", &self.targets)
            .field("databases", &self.databases.is_some())
            .field("job", &self.job)
            .finish()
    }
}

impl<'a> SplitOptions<'a> {
    /// Defaults for `component`, reading under `job`'s memory budget:
    /// archives in `lib/.kpack`, zstd, hashes checked, no databases, no
    /// exclusions.
    pub fn new(component: impl Into<String>, job: &'a Job) -> SplitOptions<'a> {
        SplitOptions {
            component: component.into(),
            archive_dir: "lib/.kpack".into(),
            compression: Compression::default(),
            targets: TargetFilter::default(),
            verify_hash: true,
            databases: None,
            progress: None,
            archive_group: Level::Target,
            shared_archive: None,
            output_format: crate::OutputFormat::Dir,
            archive_per_artifact: false,
            mtime: 0,
            archive_limits: kpack_artifact::Limits::for_memory(job.budget().limit()),
            job,
        }
    }

    /// Whether `target` (a target id or bundle key) is dropped by
    /// [`targets`](Self::targets).
    pub fn is_excluded(&self, target: &str) -> bool {
        !self.targets.keeps(target)
    }
}

/// Where one prefix is read from and written to.
pub struct PrefixLayout<'a> {
    /// The prefix directory to read (never modified).
    pub source: &'a Path,
    /// The prefix's name in TOC keys (`math-libs/BLAS/rocBLAS/stage`); a
    /// binary's key is `<prefix>/<path in prefix>#<co_index>`, or
    /// `<path in prefix>#<co_index>` when this is empty.
    pub prefix: &'a str,
    /// Root of the generic output, mirroring `source`.
    pub generic: &'a Path,
    /// Root of the output for an arch (given in its file-name spelling,
    /// see [`arch_dir_name`]), mirroring `source`.
    pub arch: &'a (dyn Fn(&str) -> PathBuf + Sync),
}

/// One offloaded binary.
#[derive(Debug, Clone, Serialize)]
pub struct BinaryReport {
    /// Path relative to the prefix.
    pub path: String,
    /// The marker's `kernel_name`.
    pub kernel_name: String,
    /// The marker's search path.
    pub search_path: String,
    /// Code objects moved into archives.
    pub code_objects: usize,
    /// Target ids moved.
    pub targets: Vec<String>,
    /// Size before and after.
    pub bytes_in: u64,
    /// Size of the host-only binary.
    pub bytes_out: u64,
}

/// One archive written.
#[derive(Debug, Clone, Serialize)]
pub struct ArchiveReport {
    /// Arch (file-name spelling) of the artifact it went to.
    pub arch: String,
    /// Path relative to the prefix root.
    pub path: String,
    /// Entries.
    pub entries: usize,
    /// File size.
    pub bytes: u64,
}

/// What [`split_prefix`] did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PrefixReport {
    /// The prefix.
    pub prefix: String,
    /// Regular files read.
    pub files: u64,
    /// Symlinks recreated.
    pub symlinks: u64,
    /// Bytes read.
    pub bytes_in: u64,
    /// Bytes written to the generic output.
    pub bytes_out_generic: u64,
    /// Bytes written per arch.
    pub bytes_out_arch: BTreeMap<String, u64>,
    /// Offloaded binaries, sorted by path.
    pub binaries: Vec<BinaryReport>,
    /// Host ELF files without device code.
    pub host_only: u64,
    /// Binaries that were already offloaded. Always 0 now: a tree holding
    /// one is split output and refused ([`crate::ErrorKind::AlreadySplit`]);
    /// kept so the JSON report keeps its fields.
    pub already_offloaded: u64,
    /// Archives written, sorted.
    pub archives: Vec<ArchiveReport>,
    /// Database files per handler, per verdict (arch key or `generic`).
    pub databases: BTreeMap<String, BTreeMap<String, u64>>,
    /// Bare bundle / code-object files moved whole to an arch artifact, per arch.
    pub device_files: BTreeMap<String, u64>,
    /// Code objects and database files dropped by `exclude_arches`, per target.
    pub excluded: BTreeMap<String, u64>,
    /// Things kept as they were that still carry device code, and the like.
    pub warnings: Vec<String>,
    /// Files that could not be processed (the caller must not publish the output).
    pub errors: Vec<String>,
}

/// The directory-name spelling of an arch or bundle key: a target id's
/// processor (`gfx90a:xnack+` → `gfx90a`: one artifact per processor,
/// feature variants stay distinct *inside* its archives), anything else
/// with `:` replaced by `_`. Never contains `:`.
pub fn arch_dir_name(key: &str) -> String {
    match TargetId::parse(key) {
        Ok(t) => t.processor().to_string(),
        Err(_) => key.replace(':', "_"),
    }
}

/// The archive file stem of a binary: `<component>.<path in prefix, '/' → '.'>`
/// (`blas_lib.lib.librocblas.so.4`); the archive of processor P is
/// `<stem>_<P>.kpack`. One archive set per binary means names never collide
/// across the modules of a component or across components in a flattened
/// install, and a device never picks an archive that lists its target for
/// another binary only.
pub fn archive_stem(component: &str, rel: &str) -> String {
    format!("{component}.{}", rel.replace('/', "."))
}

#[derive(Default)]
struct FileResult {
    bytes_in: u64,
    generic_bytes: u64,
    arch_bytes: Vec<(String, u64)>,
    binary: Option<BinaryReport>,
    archives: Vec<ArchiveReport>,
    host_only: bool,
    /// Already offloaded: the marker section of its format
    /// (`.rocm_kpack_ref`, `.kpackrf`).
    already: Option<&'static str>,
    database: Option<(String, String)>,
    device_file: Option<String>,
    excluded: Vec<String>,
    warning: Option<String>,
    /// The target a file's name carries, when database handlers were asked
    /// for and none claimed it (it went to the generic output).
    unclaimed_target: Option<String>,
}

/// One entry of a prefix, by path in the prefix (`/`-separated).
pub(crate) enum Node {
    /// A directory.
    Dir(String),
    /// A symlink and its target, recreated as it is.
    Link(String, PathBuf),
    /// A regular file and its size.
    File(String, u64),
    /// A regular file of an artifact archive kept in the [`Store`], not
    /// under the prefix's directory: a plain file (no binary, bundle or
    /// static archive).
    Stored(String, Stored),
}

/// A regular file of a prefix, as [`process_file`] takes it.
#[derive(Clone, Copy)]
struct SourceFile<'n> {
    /// Its path in the prefix.
    rel: &'n str,
    size: u64,
    /// Where it is in the store, when it is not under the prefix's
    /// directory.
    stored: Option<&'n Stored>,
}

/// Split one prefix tree: fat binaries are offloaded (host-only binary to
/// the generic output, code objects to per-binary archives under
/// `archive_dir` in each arch's output), database files claimed for an
/// arch go to that arch's output, bare single-processor bundle files too,
/// everything else is copied to the generic output (symlinks recreated,
/// modes kept). Runs on the current rayon pool; output bytes do not depend
/// on its size. Per-file failures are collected in
/// [`PrefixReport::errors`] (the walk goes on); only failures that make the
/// whole prefix impossible are an `Err`.
pub fn split_prefix(layout: &PrefixLayout<'_>, opts: &SplitOptions<'_>) -> Result<PrefixReport> {
    let nodes = walk(layout.source)?;
    refuse_archives(layout.source, layout.source, &nodes)?;
    let mut report = PrefixReport::new(layout.prefix);
    let input = Input {
        owned: false,
        shown: layout.source,
        store: None,
        trees: Trees::default(),
    };
    split_nodes(layout, opts, &nodes, &input, &mut report)?;
    Ok(report.finish())
}

/// Where a prefix's files come from, for [`split_nodes`].
pub(crate) struct Input<'a> {
    /// The files under `layout.source` belong to the split (a spool of an
    /// archive's entries): moved into the output instead of copied.
    pub owned: bool,
    /// The prefix's name in messages (the directory, or the archive and
    /// the prefix inside it).
    pub shown: &'a Path,
    /// The store holding the [`Node::Stored`] files, if any.
    pub store: Option<&'a Store>,
    /// The output roots files are placed into, each opened once.
    pub trees: Trees,
}

/// Output roots opened once each: placing a file walks from its root's
/// handle, and from the last directory used when it is the same.
#[derive(Default)]
pub(crate) struct Trees(std::sync::Mutex<BTreeMap<PathBuf, std::sync::Arc<Tree>>>);

impl Trees {
    /// The tree rooted at `root`, created (with its parents) on first use.
    fn get(&self, root: &Path) -> std::io::Result<std::sync::Arc<Tree>> {
        let mut trees = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = trees.get(root) {
            return Ok(t.clone());
        }
        let t = std::sync::Arc::new(Tree::create(root)?);
        trees.insert(root.to_path_buf(), t.clone());
        Ok(t)
    }
}

/// Split `nodes` (entries of the prefix at `layout.source`, in path order)
/// into the outputs, counting into `report`: the part of [`split_prefix`]
/// after the walk, which an archive's reader runs on each batch of entries.
pub(crate) fn split_nodes(
    layout: &PrefixLayout<'_>,
    opts: &SplitOptions<'_>,
    nodes: &[Node],
    input: &Input<'_>,
    report: &mut PrefixReport,
) -> Result<()> {
    let files = write_skeleton(layout, nodes, report)?;
    if let Some(p) = opts.progress {
        p(Progress::Walked {
            prefix: layout.prefix,
            files: files.len() as u64,
            bytes: files.iter().map(|f| f.size).sum(),
        });
    }
    let claims = classify(
        layout.source,
        input.shown,
        &files,
        opts.databases,
        input.store,
    )?;
    let results = process_files(layout, opts, &files, &claims, input);
    refuse_offloaded(input.shown, &results)?;
    let mut unclaimed = Vec::new();
    for (rel, r) in results {
        if let Ok(FileResult {
            unclaimed_target: Some(t),
            ..
        }) = &r
        {
            unclaimed.push((rel.clone(), t.clone()));
        }
        report.add_file(input.shown, &rel, r);
    }
    if let Some((first, target)) = unclaimed.first() {
        report.warnings.push(format!(
            "{}: {} file(s) whose names carry a GPU target (first: {first}, {target}) were claimed by no database handler asked for and stay in the generic artifact; is this a layout the handlers do not know?",
            input.shown.display(),
            unclaimed.len()
        ));
    }
    Ok(())
}

/// The outcome of [`process_file`] for each file, by path in the prefix.
type FileResults = Vec<(String, std::result::Result<FileResult, FileError>)>;

/// Why one file of a prefix could not be processed: reported in the
/// prefix's `errors` as `path: message: cause…`, the other files still done.
#[derive(Debug, thiserror::Error)]
enum FileError {
    /// Reading, copying or creating failed.
    #[error("{what}")]
    Io {
        /// What was being done (`cannot read`, `cannot copy to <path>`).
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The host binary could not be read.
    #[error(transparent)]
    Binary(#[from] kpack_binary::Error),
    /// The bundle file could not be read.
    #[error(transparent)]
    Bundle(#[from] kpack_elf::Error),
    /// The offload failed.
    #[error(transparent)]
    Offload(#[from] kpack_offload::Error),
    /// The offload ended without offloading.
    #[error("binary not offloaded: {0}")]
    NotOffloaded(String),
}

impl FileError {
    fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> FileError {
        let what = what.into();
        move |source| FileError::Io { what, source }
    }
}

/// Create the generic output's directories and symlinks of `nodes`;
/// returns the regular files.
fn write_skeleton<'n>(
    layout: &PrefixLayout<'_>,
    nodes: &'n [Node],
    report: &mut PrefixReport,
) -> Result<Vec<SourceFile<'n>>> {
    let tree =
        Tree::create(layout.generic).map_err(|e| Error::io(layout.generic, "cannot create", e))?;
    let mut files = Vec::new();
    for node in nodes {
        match node {
            Node::Dir(rel) => {
                let d = layout.generic.join(rel);
                tree.create_dir_all(Path::new(rel))
                    .map_err(|e| Error::io(&d, "cannot create", e))?;
            }
            Node::Link(rel, target) => {
                let l = layout.generic.join(rel);
                symlink(&tree, target, Path::new(rel))
                    .map_err(|e| Error::io(&l, "cannot create symlink", e))?;
                report.symlinks += 1;
            }
            Node::File(rel, size) => files.push(SourceFile {
                rel,
                size: *size,
                stored: None,
            }),
            Node::Stored(rel, s) => files.push(SourceFile {
                rel,
                size: s.len,
                stored: Some(s),
            }),
        }
    }
    Ok(files)
}

/// [`process_file`] over every file, in parallel, in the order of `files`.
fn process_files(
    layout: &PrefixLayout<'_>,
    opts: &SplitOptions<'_>,
    files: &[SourceFile<'_>],
    claims: &[Option<Claim>],
    input: &Input<'_>,
) -> FileResults {
    files
        .par_iter()
        .zip(claims.par_iter())
        .map(|(file, claim)| {
            let r = process_file(layout, opts, file, claim.as_ref(), input);
            if let Some(p) = opts.progress {
                p(Progress::File {
                    path: file.rel,
                    bytes: file.size,
                });
            }
            (file.rel.to_string(), r)
        })
        .collect()
}

/// A binary kpack already offloaded means this tree is split output:
/// its archives are elsewhere, and a second split would only copy it
/// under new artifact names, so say so instead (nothing is kept).
fn refuse_offloaded(shown: &Path, results: &FileResults) -> Result<()> {
    if let Some((rel, marker)) = results
        .iter()
        .find_map(|(rel, r)| Some((rel, r.as_ref().ok()?.already?)))
    {
        return Err(Error::new(
            ErrorKind::AlreadySplit,
            Some(shown.join(rel)),
            format!("already offloaded by kpack (HIPK wrappers, {marker} marker): {SPLIT_OUTPUT}"),
        ));
    }
    Ok(())
}

impl PrefixReport {
    /// The empty report of `prefix`.
    pub(crate) fn new(prefix: &str) -> PrefixReport {
        PrefixReport {
            prefix: prefix.to_string(),
            ..Default::default()
        }
    }

    /// After the last file: refuse archives two binaries share, sort, and
    /// warn of archives of generic code the HIP runtime asks for on fewer
    /// GPUs than LLVM builds it for ([`kpack_runtime::unasked_generic`]).
    pub(crate) fn finish(mut self) -> PrefixReport {
        self.refuse_shared_archives();
        self.archives
            .sort_by(|a, b| (&a.arch, &a.path).cmp(&(&b.arch, &b.path)));
        let archs: std::collections::BTreeSet<&str> =
            self.archives.iter().map(|a| a.arch.as_str()).collect();
        for arch in &archs {
            if let Some(w) = kpack_runtime::unasked_generic(arch) {
                self.warnings.push(format!("{arch} archives: {w}"));
            }
        }
        // Over the prefix's archives: a gfx1250 archive beside a
        // gfx12-5-generic one serves the A0 steppings that reject it.
        for w in kpack_amdgpu::generic_only_warnings(archs) {
            self.warnings.push(format!("archives: {w}"));
        }
        self
    }

    /// Count one file of the prefix read from `source`.
    fn add_file(
        &mut self,
        source: &Path,
        rel: &str,
        r: std::result::Result<FileResult, FileError>,
    ) {
        self.files += 1;
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                self.errors.push(format!(
                    "{}: {}",
                    source.join(rel).display(),
                    error_chain(&e)
                ));
                return;
            }
        };
        self.bytes_in += r.bytes_in;
        self.bytes_out_generic += r.generic_bytes;
        for (a, b) in r.arch_bytes {
            *self.bytes_out_arch.entry(a).or_default() += b;
        }
        self.binaries.extend(r.binary);
        self.archives.extend(r.archives);
        self.host_only += u64::from(r.host_only);
        self.already_offloaded += u64::from(r.already.is_some());
        if let Some((h, v)) = r.database {
            *self.databases.entry(h).or_default().entry(v).or_default() += 1;
        }
        if let Some(a) = r.device_file {
            *self.device_files.entry(a).or_default() += 1;
        }
        for t in r.excluded {
            *self.excluded.entry(t).or_default() += 1;
        }
        self.warnings.extend(
            r.warning
                .map(|w| format!("{}: {w}", source.join(rel).display())),
        );
    }

    /// Per-binary stems are injective unless paths contain '.' where another
    /// has '/': refuse rather than let two binaries share an archive.
    fn refuse_shared_archives(&mut self) {
        let mut seen = std::collections::BTreeSet::new();
        let mut clashes = Vec::new();
        for a in &self.archives {
            if !seen.insert(a.path.as_str()) {
                clashes.push(format!(
                    "two binaries map to the archive {}; rename one",
                    a.path
                ));
            }
        }
        self.errors.extend(clashes);
    }
}

/// The end of the message refusing split output.
const SPLIT_OUTPUT: &str =
    "this is the output of a split; split the original tree (or wheel) instead";

/// Refuse a tree holding a kpack archive (KPAK magic, whatever its name):
/// it is split output, and a second split would file the archive as
/// generic content. Reads 4 bytes of each file, before anything is written.
pub(crate) fn refuse_split_output(root: &Path) -> Result<()> {
    match walk(root) {
        Ok(nodes) => refuse_archives(root, root, &nodes),
        // Unreadable trees are reported by the split itself.
        Err(_) => Ok(()),
    }
}

/// [`refuse_split_output`] over an already walked tree.
/// Refuse a tree holding a kpack archive: split output split again. Files
/// are read under `root`, and named under `shown` (an archive input's
/// members are named inside the archive, never by their spool path).
pub(crate) fn refuse_archives(root: &Path, shown: &Path, nodes: &[Node]) -> Result<()> {
    for node in nodes {
        let Node::File(rel, size) = node else {
            continue;
        };
        if *size < kpack_format::MAGIC.len() as u64 {
            continue;
        }
        let p = root.join(rel);
        let mut head = [0u8; 4];
        std::fs::File::open(&p)
            .and_then(|mut f| f.read_exact(&mut head))
            .map_err(|e| Error::io(&p, "cannot read", e))?;
        if FileKind::detect(&head) == FileKind::Kpack {
            return Err(Error::new(
                ErrorKind::AlreadySplit,
                Some(shown.join(rel)),
                format!("a kpack archive: {SPLIT_OUTPUT}"),
            ));
        }
    }
    Ok(())
}

fn walk(root: &Path) -> Result<Vec<Node>> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(root)
        .sort_by_file_name()
        .follow_links(false)
        .min_depth(1)
    {
        let entry = entry.map_err(|e| {
            let path = e.path().unwrap_or(root).to_path_buf();
            Error::new(ErrorKind::Io, Some(path), "cannot walk").with_source(e)
        })?;
        let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
        let rel = rel
            .to_str()
            .ok_or_else(|| Error::invalid(entry.path(), "path is not UTF-8"))?
            .replace(std::path::MAIN_SEPARATOR, "/");
        let ft = entry.file_type();
        if ft.is_symlink() {
            let target = std::fs::read_link(entry.path())
                .map_err(|e| Error::io(entry.path(), "cannot read symlink", e))?;
            out.push(Node::Link(rel, target));
        } else if ft.is_dir() {
            out.push(Node::Dir(rel));
        } else if ft.is_file() {
            let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
            out.push(Node::File(rel, len));
        } else {
            return Err(Error::invalid(
                entry.path(),
                "not a regular file, directory or symlink",
            ));
        }
    }
    Ok(out)
}

/// What the database handlers `databases` say of each of `files` (paths
/// relative to `root`, with their sizes): each file's leading bytes, as
/// many as its handler asks for, are read and handed over. `None` for a
/// file no handler claims, and for every file without handlers.
pub fn classify_files(
    root: &Path,
    files: &[(&str, u64)],
    databases: Option<&dyn Databases>,
) -> Result<Vec<Option<Claim>>> {
    let files: Vec<SourceFile<'_>> = files
        .iter()
        .map(|&(rel, size)| SourceFile {
            rel,
            size,
            stored: None,
        })
        .collect();
    classify(root, root, &files, databases, None)
}

/// [`classify_files`] of files some of which are in `store`.
fn classify(
    root: &Path,
    shown: &Path,
    files: &[SourceFile<'_>],
    databases: Option<&dyn Databases>,
    store: Option<&Store>,
) -> Result<Vec<Option<Claim>>> {
    let Some(db) = databases else {
        return Ok(vec![None; files.len()]);
    };
    let infos = files
        .par_iter()
        .map(|f| {
            let want = db.prefix_bytes_for(f.rel);
            let mut info = FileInfo::new(f.rel, f.size);
            if want > 0 {
                let p = root.join(f.rel);
                let read = match (f.stored, store) {
                    (Some(s), Some(store)) => store.reader().and_then(|mut r| r.prefix(s, want)),
                    _ => std::fs::File::open(&p).and_then(|f| {
                        let mut v = Vec::new();
                        f.take(want as u64).read_to_end(&mut v).map(|_| v)
                    }),
                };
                info.prefix = read.map_err(|e| Error::io(shown.join(f.rel), "cannot read", e))?;
            }
            Ok(info)
        })
        .collect::<Result<Vec<_>>>()?;
    db.classify(&infos).map_err(|e| {
        Error::new(
            ErrorKind::Invalid,
            Some(shown.to_path_buf()),
            "database handlers",
        )
        .with_source(e)
    })
}

/// Put the file `src` at `rel` in the output tree `root` (created when
/// missing; its directories made never through a symlink): copied
/// (std::fs::copy keeps the permission bits), or moved when the split owns
/// `src` (a spooled archive entry, on the same file system as the output;
/// never replacing). Returns its size.
fn place(
    src: &Path,
    root: &Path,
    rel: &str,
    input: &Input<'_>,
) -> std::result::Result<u64, FileError> {
    let (dst, rel) = (root.join(rel), Path::new(rel));
    let tree = (input.trees.get(root))
        .map_err(FileError::io(format!("cannot create {}", root.display())))?;
    if let Some(d) = rel.parent() {
        let shown = root.join(d);
        tree.create_dir_all(d)
            .map_err(FileError::io(format!("cannot create {}", shown.display())))?;
    }
    if !input.owned {
        return std::fs::copy(src, &dst)
            .map_err(FileError::io(format!("cannot copy to {}", dst.display())));
    }
    let len = std::fs::symlink_metadata(src)
        .map_err(FileError::io("cannot read"))?
        .len();
    tree.adopt(src, rel)
        .map_err(FileError::io(format!("cannot move to {}", dst.display())))?;
    Ok(len)
}

fn process_file(
    layout: &PrefixLayout<'_>,
    opts: &SplitOptions<'_>,
    file: &SourceFile<'_>,
    claim: Option<&Claim>,
    input: &Input<'_>,
) -> std::result::Result<FileResult, FileError> {
    let rel = file.rel;
    let src = layout.source.join(rel);
    // A file kept as it is: moved or copied from the prefix, or placed
    // from the store.
    let keep = |root: &Path| match (file.stored, input.store) {
        (Some(s), Some(store)) => {
            let dst = root.join(rel);
            store
                .place(s, &dst)
                .map_err(FileError::io(format!("cannot write {}", dst.display())))
        }
        _ => place(&src, root, rel, input),
    };
    let mut r = FileResult {
        bytes_in: file.size,
        ..Default::default()
    };
    if let Some(c) = claim {
        match &c.classification {
            // Dropped, and counted under `excluded`, not as placed.
            Classification::Arch(key) if opts.is_excluded(key) => {
                r.excluded.push(key.clone());
                return Ok(r);
            }
            Classification::Arch(key) => {
                let arch = arch_dir_name(key);
                let n = keep(&(layout.arch)(&arch))?;
                r.arch_bytes.push((arch, n));
            }
            Classification::Generic => {
                r.generic_bytes = keep(layout.generic)?;
            }
        }
        r.database = Some((c.handler.clone(), c.classification.to_string()));
        return Ok(r);
    }
    // Only plain files are stored.
    let kind = match file.stored {
        Some(_) => FileKind::Other,
        None => FileKind::of_path(&src).map_err(FileError::io("cannot read"))?,
    };
    if kind.is_host_binary() {
        return host_binary(layout, opts, rel, &src, input, r);
    }
    if kind.is_device_file() {
        return bundle_file(layout, opts, rel, &src, input, r);
    }
    if kind == FileKind::StaticArchive && static_archive_has_device_code(&src)? {
        r.warning = Some(
            "static archive with device code kept in the generic artifact as is (link it into a binary to split it)".into(),
        );
    } else if opts.databases.is_some() {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        r.unclaimed_target = kpack_amdgpu::find_target(name).map(|t| t.to_string());
    }
    r.generic_bytes = keep(layout.generic)?;
    Ok(r)
}

fn read_up_to(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

fn static_archive_has_device_code(src: &Path) -> std::result::Result<bool, FileError> {
    let magics: [&[u8]; 2] = [kpack_bundle::BUNDLE_MAGIC, kpack_bundle::CCOB_MAGIC];
    // Scanned in windows, each starting with the previous window's last
    // bytes so a magic across a boundary is found; the archive is never
    // held whole.
    let overlap = magics.iter().map(|m| m.len()).max().unwrap_or(1) - 1;
    let mut f = std::fs::File::open(src).map_err(FileError::io("cannot read"))?;
    let mut buf = vec![0u8; (1 << 20) + overlap];
    let mut kept = 0;
    loop {
        let n = read_up_to(&mut f, &mut buf[kept..]).map_err(FileError::io("cannot read"))?;
        let window = &buf[..kept + n];
        if magics
            .iter()
            .any(|m| window.windows(m.len()).any(|w| w == *m))
        {
            return Ok(true);
        }
        if n == 0 {
            return Ok(false);
        }
        kept = window.len().min(overlap);
        let from = window.len() - kept;
        buf.copy_within(from..from + kept, 0);
    }
}

/// A host binary (ELF for a known machine, or PE): offloaded into the
/// generic artifact with its archives in each arch's tree; without device
/// code, already offloaded, or a link input, copied as it is.
fn host_binary(
    layout: &PrefixLayout<'_>,
    opts: &SplitOptions<'_>,
    rel: &str,
    src: &Path,
    input: &Input<'_>,
    mut r: FileResult,
) -> std::result::Result<FileResult, FileError> {
    let walk = WalkOptions {
        verify_hash: opts.verify_hash,
    };
    let bin = match HostBinary::read(src, walk) {
        Ok(b) => b,
        // A file kpack cannot rewrite (32-bit, big-endian, another
        // machine) has no HIP device code it could move: shipped as is.
        Err(e) if e.is_unsupported() => {
            r.generic_bytes = place(src, layout.generic, rel, input)?;
            return Ok(r);
        }
        Err(e) => return Err(e.into()),
    };
    if bin.is_transformed() {
        r.already = Some(bin.marker_section());
    } else if bin.bundles().is_empty() {
        r.host_only = true;
    } else if bin.is_link_input() {
        r.warning = Some(format!(
            "relocatable object with device code ({}) kept in the generic artifact as is (link it into a binary to split it)",
            bin.targets().join(", ")
        ));
    }
    if r.already.is_some() || r.host_only || r.warning.is_some() {
        drop(bin);
        r.generic_bytes = place(src, layout.generic, rel, input)?;
        return Ok(r);
    }
    let Planned {
        archives,
        kernel_name,
        stem,
        search_path,
        oo,
    } = plan_archives(layout, opts, rel, bin.bundles());
    let out = layout.generic.join(rel);
    let done = offload_binary(src, &bin, &out, &oo, &opts.targets, archives)?;
    let Outcome::Offloaded {
        transform,
        code_objects,
        targets,
        excluded,
        ..
    } = done.outcome
    else {
        return Err(FileError::NotOffloaded(format!("{:?}", done.outcome)));
    };
    r.excluded.extend(excluded);
    report_archives(opts, &stem, done.archives, &mut r);
    r.generic_bytes = transform.output_size();
    r.binary = Some(BinaryReport {
        path: rel.to_string(),
        kernel_name,
        search_path,
        code_objects,
        targets,
        bytes_in: r.bytes_in,
        bytes_out: r.generic_bytes,
    });
    Ok(r)
}

/// Where one binary's device code goes: its archive set (one archive per
/// processor, in that processor's arch tree) and its marker.
struct Planned {
    archives: ArchiveSet,
    kernel_name: String,
    stem: String,
    search_path: String,
    oo: OffloadOptions,
}

/// Plan the archives and marker of the binary at `rel` holding `bundles`
/// (ELF and PE alike).
fn plan_archives(
    layout: &PrefixLayout<'_>,
    opts: &SplitOptions<'_>,
    rel: &str,
    bundles: &[kpack_bundle::Item],
) -> Planned {
    let kernel_name = if layout.prefix.is_empty() {
        rel.to_string()
    } else {
        format!("{}/{rel}", layout.prefix)
    };
    let stem = archive_stem(&opts.component, rel);
    let options = WriterOptions {
        group_name: opts.component.clone(),
        gfx_arch_family: String::new(),
        gfx_arches: None,
        compression: opts.compression,
        ..Default::default()
    };
    // Each processor's (or group's) archives go into its own arch output tree.
    let mut dirs = BTreeMap::new();
    for t in bundles
        .iter()
        .flat_map(|b| &b.entries)
        .filter_map(|e| e.id.target().filter(|_| !e.id.is_host()))
    {
        let p = kpack_amdgpu::archive_group(t.processor(), opts.archive_group);
        let dir = (layout.arch)(&p).join(&opts.archive_dir);
        dirs.entry(p).or_insert(dir);
    }
    let mut archives =
        ArchiveSet::per_processor(stem.clone(), options, opts.job.budget().clone(), move |p| {
            dirs.get(p).cloned().unwrap_or_default()
        });
    archives.set_group(opts.archive_group);
    // Marker search path: in the install, from the binary's directory to the archive directory.
    let root = Path::new("/kpack-prefix-root");
    let bin_dir = root
        .join(rel)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root.to_path_buf());
    let search_path = match &opts.shared_archive {
        Some(name) => {
            let rel = kpack_fsafe::relative_path(&bin_dir, &root.join(&opts.archive_dir));
            let dir = rel.to_string_lossy().replace('\\', "/");
            let file = kpack_format::archive_file_name(name, kpack_format::GFXARCH);
            if dir.is_empty() {
                file
            } else {
                format!("{dir}/{file}")
            }
        }
        None => archives.search_path(&bin_dir, &root.join(&opts.archive_dir)),
    };
    let oo = OffloadOptions {
        kernel_name: kernel_name.clone(),
        // Expanded for archive groups by the offload itself.
        search_paths: vec![search_path.clone()],
        verify_hash: opts.verify_hash,
    };
    Planned {
        archives,
        kernel_name,
        stem,
        search_path,
        oo,
    }
}

/// Report the archives written for one binary.
fn report_archives(
    opts: &SplitOptions<'_>,
    stem: &str,
    written: Vec<(String, kpack_format::Written)>,
    r: &mut FileResult,
) {
    for (processor, written) in written {
        r.arch_bytes.push((processor.clone(), written.file_size));
        r.archives.push(ArchiveReport {
            arch: processor.clone(),
            path: format!(
                "{}/{}",
                opts.archive_dir,
                kpack_format::archive_file_name(stem, &processor)
            ),
            entries: written.entries,
            bytes: written.file_size,
        });
    }
}

fn bundle_file(
    layout: &PrefixLayout<'_>,
    opts: &SplitOptions<'_>,
    rel: &str,
    src: &Path,
    input: &Input<'_>,
    mut r: FileResult,
) -> std::result::Result<FileResult, FileError> {
    let fat = read_fat_binary(
        src,
        WalkOptions {
            verify_hash: opts.verify_hash,
        },
    )?;
    let targets = fat.targets();
    let kept: Vec<&String> = targets.iter().filter(|t| !opts.is_excluded(t)).collect();
    let mut processors: Vec<String> = kept.iter().map(|t| arch_dir_name(t)).collect();
    processors.dedup();
    match processors.as_slice() {
        [] if !targets.is_empty() => r.excluded.extend(targets),
        [p] => {
            let n = place(src, &(layout.arch)(p), rel, input)?;
            r.arch_bytes.push((p.clone(), n));
            r.device_file = Some(p.clone());
            r.excluded
                .extend(targets.iter().filter(|t| opts.is_excluded(t)).cloned());
        }
        _ => {
            if !targets.is_empty() {
                r.warning = Some(format!(
                    "bundle file for several processors ({}) kept in the generic artifact as is: one path cannot hold per-arch variants",
                    targets.join(", ")
                ));
            }
            r.generic_bytes = place(src, layout.generic, rel, input)?;
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_bundle_magic_across_the_scan_window_boundary() {
        let dir = std::env::temp_dir().join(format!("kpack-split-scan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lib.a");
        // The CCOB magic straddles the first 1 MiB window.
        let mut bytes = vec![0u8; (1 << 20) - 2];
        bytes.extend_from_slice(kpack_bundle::CCOB_MAGIC);
        bytes.extend_from_slice(&[0; 100]);
        std::fs::write(&path, &bytes).unwrap();
        assert!(static_archive_has_device_code(&path).unwrap());
        bytes[(1 << 20) - 2] = b'X';
        std::fs::write(&path, &bytes).unwrap();
        assert!(!static_archive_has_device_code(&path).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    #[cfg(unix)]
    fn placed_files_never_go_through_a_symlink_nor_replace() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        let root = d.path().join("out");
        std::fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink(&victim, root.join("lib")).unwrap();
        let src = d.path().join("spooled");
        std::fs::write(&src, "bytes").unwrap();
        let input = |owned| Input {
            owned,
            shown: &root,
            store: None,
            trees: Trees::default(),
        };
        for owned in [true, false] {
            assert!(place(&src, &root, "lib/x.so", &input(owned)).is_err());
        }
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
        let owned = input(true);
        assert_eq!(place(&src, &root, "real/x.so", &owned).unwrap(), 5);
        assert!(!src.exists(), "moved, not copied");
        std::fs::write(&src, "other").unwrap();
        assert!(place(&src, &root, "real/x.so", &owned).is_err());
        assert_eq!(std::fs::read(root.join("real/x.so")).unwrap(), b"bytes");
    }

    #[test]
    fn arch_dir_names_never_contain_colons() {
        assert_eq!(arch_dir_name("gfx90a:xnack+"), "gfx90a");
        assert_eq!(arch_dir_name("gfx1100"), "gfx1100");
        assert!(!arch_dir_name("weird:key").contains(':'));
    }

    #[test]
    fn exclusion_matches_processor_and_exact_id() {
        let job = Job::builder(kpack_bundle::MemoryBudget::new(256 << 20))
            .threads(1)
            .build()
            .unwrap();
        let mut o = SplitOptions::new("c", &job);
        o.targets = TargetFilter::new("", "gfx906,gfx90a:xnack+").unwrap();
        assert!(o.is_excluded("gfx906"));
        assert!(o.is_excluded("gfx906:xnack-"));
        assert!(o.is_excluded("gfx90a:xnack+"));
        assert!(!o.is_excluded("gfx90a:xnack-"));
        assert!(!o.is_excluded("gfx90"));
    }

    #[test]
    fn stems_are_per_binary() {
        assert_eq!(
            archive_stem("blas_lib", "lib/librocblas.so.4"),
            "blas_lib.lib.librocblas.so.4"
        );
    }
}
