//! Archive surgery: [`replace`] some entries of an archive by another's,
//! or [`merge`] archives with disjoint entries into one.
//!
//! The output keeps the first input's TOC header (group, family, arches
//! with any new ones appended, scheme) and is written in sorted order at
//! the given zstd level, so it depends only on the entries: replacing and
//! replacing back gives the original bytes of an archive kpack wrote at
//! that level.
//!
//! Entries pass through one at a time: an entry whose code object fits the
//! memory budget is decoded, checked against its recorded sha256 and
//! re-encoded; a larger one is copied as the zstd frame it is stored in
//! (after a streaming decode checks its size and sha256) when the output
//! stores zstd frames too, and refused otherwise. So memory stays within
//! the budget plus one frame, whatever the archives claim.
//!
//! Every key and arch written is one `verify` accepts (an edit never makes
//! an archive `kpack archive verify` rejects), and the output goes through
//! [`kpack_fsafe::Outputs`]: staged beside the destination, committed
//! whole, nothing left behind on failure or interruption.
//!
//! ```
//! use kpack_format::edit::{EditOptions, merge};
//! use kpack_format::{ArchiveWriter, WriterOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let mut inputs = Vec::new();
//! for arch in ["gfx1100", "gfx942"] {
//!     let path = dir.path().join(format!("blas_{arch}.kpack"));
//!     let options = WriterOptions { group_name: "blas".into(), ..Default::default() };
//!     let mut w = ArchiveWriter::create(&path, options)?;
//!     w.add("lib/libblas.so#0", arch, b"\x7fELF code object")?;
//!     w.finish()?;
//!     inputs.push(path);
//! }
//! let options = EditOptions::new(dir.path().join("out/blas.kpack"));
//! let report = merge(&inputs, &options)?;
//! assert_eq!(report.entries, 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use kpack_fsafe::{Existing, Order, Outputs};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{Error, ErrorKind, Result};
use crate::read::{Archive, Entry, Scheme};
use crate::write::{ArchiveWriter, Compression, WriterOptions};

/// The memory budget of [`EditOptions::new`]: 256 MiB of decoded code
/// object at once, the default of the commands that write archives.
pub const DEFAULT_MAX_MEMORY: u64 = 256 << 20;

/// Where and how an edit writes its output.
#[derive(Debug, Clone)]
pub struct EditOptions {
    /// The archive to write (never one of the inputs).
    pub output: PathBuf,
    /// zstd level of the entries re-encoded.
    pub level: i32,
    /// What an existing output means: refused, or replaced (`--force`).
    pub existing: Existing,
    /// Most bytes of one decoded code object held in memory; a larger
    /// entry is copied as its stored frame, or refused where it cannot be.
    pub max_memory: u64,
}

impl EditOptions {
    /// Options writing `output` at the default level, refusing an existing
    /// output, with [`DEFAULT_MAX_MEMORY`].
    pub fn new(output: impl Into<PathBuf>) -> EditOptions {
        EditOptions {
            output: output.into(),
            level: crate::DEFAULT_LEVEL,
            existing: Existing::Refuse,
            max_memory: DEFAULT_MAX_MEMORY,
        }
    }
}

/// What [`replace`] puts where.
#[derive(Debug, Clone, Copy)]
pub struct Replace<'a> {
    /// The archive to start from.
    pub base: &'a Path,
    /// The archive whose matching entries go in.
    pub from: &'a Path,
    /// Globs over `from`'s keys (`*` also matches `/`); each must match.
    pub keys: &'a [String],
    /// Allow entries `base` does not have (their arch must be one it lists).
    pub add: bool,
}

/// What an edit wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EditReport {
    /// The archive written.
    pub path: PathBuf,
    /// Its number of entries.
    pub entries: usize,
    /// Its size in bytes.
    pub file_size: u64,
    /// Entries taken from [`Replace::from`] ([`replace`]; 0 for [`merge`]).
    pub replaced: usize,
    /// Entries over the memory budget copied as their stored zstd frame
    /// instead of decoded and re-encoded.
    pub copied_frames: usize,
}

/// One input archive.
struct Input {
    path: PathBuf,
    archive: Archive,
}

/// Where one output entry comes from: an input (by index) and its entry.
type Plan<'a> = BTreeMap<(String, String), (usize, &'a Entry)>;

/// Write `options.output`: `r.base` with the entries of `r.from` whose keys
/// match a glob in place of its own. Every matching entry's arch must be
/// one `base` lists, and its (key, arch) one `base` has unless `r.add`.
pub fn replace(r: &Replace<'_>, options: &EditOptions) -> Result<EditReport> {
    let patterns = r
        .keys
        .iter()
        .map(|k| {
            glob::Pattern::new(k).map_err(|e| {
                Error::new(ErrorKind::InvalidArgument, format!("key glob {k:?}")).with_source(e)
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let inputs = open_inputs(&[r.base, r.from], &options.output)?;
    let [base, new] = &inputs[..] else {
        return Err(Error::new(ErrorKind::InvalidArgument, "two inputs"));
    };
    let mut plan = Plan::new();
    for e in base.archive.entries() {
        plan.insert((e.key().to_owned(), e.arch().to_owned()), (0, e));
    }
    let mut used = vec![false; patterns.len()];
    let mut replaced = 0usize;
    for e in new.archive.entries() {
        let mut hit = false;
        for (p, u) in patterns.iter().zip(used.iter_mut()) {
            if p.matches(e.key()) {
                *u = true;
                hit = true;
            }
        }
        if !hit {
            continue;
        }
        let refuse =
            |m: String| Err(Error::new(ErrorKind::InvalidArgument, m).with_path(&new.path));
        if !base.archive.has_arch(e.arch()) {
            return refuse(format!(
                "entry {:?} is for arch {:?}, which {} does not list (its arches: {})",
                e.key(),
                e.arch(),
                base.path.display(),
                base.archive.arches().join(", ")
            ));
        }
        let slot = (e.key().to_owned(), e.arch().to_owned());
        if !plan.contains_key(&slot) && !r.add {
            return refuse(format!(
                "entry {:?} {:?} is not in {}; pass --add to add it",
                e.key(),
                e.arch(),
                base.path.display()
            ));
        }
        plan.insert(slot, (1, e));
        replaced += 1;
    }
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("key glob {:?} matches no entry", r.keys[i]),
        )
        .with_path(&new.path));
    }
    let arches = base.archive.arches().to_vec();
    let report = write(&inputs, &plan, arches, options)?;
    Ok(EditReport { replaced, ..report })
}

/// Write `options.output`: every entry of every archive of `files`, whose
/// (key, arch) entries must be disjoint, with the first one's header.
pub fn merge(files: &[PathBuf], options: &EditOptions) -> Result<EditReport> {
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let inputs = open_inputs(&paths, &options.output)?;
    let mut plan = Plan::new();
    let mut arches: Vec<String> = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        for e in input.archive.entries() {
            let slot = (e.key().to_owned(), e.arch().to_owned());
            if let Some((there, _)) = plan.get(&slot) {
                let there = inputs.get(*there).map_or(Path::new(""), |t| &t.path);
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "entry {:?} {:?} is also in {}; merge needs disjoint entries",
                        e.key(),
                        e.arch(),
                        there.display()
                    ),
                )
                .with_path(&input.path));
            }
            plan.insert(slot, (i, e));
        }
        for arch in input.archive.arches() {
            if !arches.contains(arch) {
                arches.push(arch.clone());
            }
        }
    }
    write(&inputs, &plan, arches, options)
}

/// Open every input: a regular file, not the output, a valid archive.
fn open_inputs(paths: &[&Path], output: &Path) -> Result<Vec<Input>> {
    if paths.is_empty() {
        return Err(Error::new(ErrorKind::InvalidArgument, "no input archive"));
    }
    let fsafe = |p: &Path, e: kpack_fsafe::Error| {
        Error::new(ErrorKind::InvalidArgument, "cannot use this input")
            .with_path(p)
            .with_source(e)
    };
    paths
        .iter()
        .map(|p| {
            kpack_fsafe::regular_file(p).map_err(|e| fsafe(p, e))?;
            kpack_fsafe::not_same_file(p, output).map_err(|e| fsafe(p, e))?;
            Ok(Input {
                path: p.to_path_buf(),
                archive: Archive::open(p)?,
            })
        })
        .collect()
}

/// Refuse a name `verify` would reject: every arch of `arches` and every
/// (key, arch) of `plan` (named with the input it comes from).
fn check_names(inputs: &[Input], plan: &Plan<'_>, arches: &[String]) -> Result<()> {
    let refuse = |path: &Path, problem: &crate::ArchiveProblem| {
        Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("{problem}; `archive verify` rejects it, so it is not written"),
        )
        .with_path(path))
    };
    let first = inputs.first().map_or(Path::new(""), |i| &i.path);
    for arch in arches {
        if let Some(p) = crate::verify::name_problems(None, arch).first() {
            return refuse(first, p);
        }
    }
    for ((key, arch), (i, _)) in plan {
        if let Some(p) = crate::verify::name_problems(Some(key), arch).first() {
            let from = inputs.get(*i).map_or(first, |input| &input.path);
            return refuse(from, p);
        }
    }
    Ok(())
}

/// Write `plan`'s entries with the first input's header and `arches`,
/// staged and committed through [`Outputs`].
fn write(
    inputs: &[Input],
    plan: &Plan<'_>,
    arches: Vec<String>,
    options: &EditOptions,
) -> Result<EditReport> {
    check_names(inputs, plan, &arches)?;
    let first = &inputs
        .first()
        .ok_or_else(|| Error::new(ErrorKind::InvalidArgument, "no input archive"))?
        .archive;
    let level = options.level;
    let compression = match first.scheme() {
        Scheme::None => Compression::None,
        Scheme::ZstdPerKernel => Compression::Zstd { level },
        Scheme::ZstdDelta => Compression::ZstdDelta { level },
    };
    let writer_options = WriterOptions {
        group_name: first.group_name().to_owned(),
        gfx_arch_family: first.gfx_arch_family().to_owned(),
        gfx_arches: Some(arches),
        compression,
        ..Default::default()
    };
    let output = &options.output;
    let (mut outputs, name) = stage(output, options.existing)?;
    let staged = outputs
        .plan(name, Order::First)
        .map_err(fsafe_error(output))?;
    outputs.check_existing().map_err(fsafe_error(output))?;
    let mut w = ArchiveWriter::create(&staged, writer_options).map_err(writing(output))?;
    let mut copied_frames = 0;
    for &(input, entry) in plan.values() {
        let Some(input) = inputs.get(input) else {
            continue;
        };
        copied_frames += usize::from(add_entry(&mut w, input, entry, compression, options)?);
    }
    let written = w.finish().map_err(writing(output))?;
    outputs.commit().map_err(fsafe_error(output))?;
    Ok(EditReport {
        path: output.clone(),
        entries: written.entries,
        file_size: written.file_size,
        replaced: 0,
        copied_frames,
    })
}

/// The staged outputs for `output` (a file, in its directory) and the
/// file's name.
fn stage(output: &Path, existing: Existing) -> Result<(Outputs, &str)> {
    let name = output
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| kpack_fsafe::is_plain_name(n))
        .ok_or_else(|| {
            Error::new(ErrorKind::InvalidArgument, "the output is not a file name")
                .with_path(output)
        })?;
    let root = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let outputs = Outputs::create(root, "archive-edit", existing).map_err(fsafe_error(output))?;
    Ok((outputs, name))
}

/// A failure of the staged outputs of `output`, naming it.
fn fsafe_error(output: &Path) -> impl Fn(kpack_fsafe::Error) -> Error + '_ {
    move |e| {
        let kind = match e {
            kpack_fsafe::Error::Exists { .. } | kpack_fsafe::Error::OutputIsDir { .. } => {
                ErrorKind::InvalidArgument
            }
            _ => ErrorKind::Io,
        };
        Error::new(kind, "cannot write the archive")
            .with_path(output)
            .with_source(e)
    }
}

/// A writer failure, naming the output (the staged file it was written to
/// is in the cause).
fn writing(output: &Path) -> impl Fn(Error) -> Error + '_ {
    move |e| {
        Error::new(e.kind(), "cannot write the archive")
            .with_path(output)
            .with_source(e)
    }
}

/// Add `entry` of `input` to `w`; whether it was copied as its frame.
fn add_entry(
    w: &mut ArchiveWriter,
    input: &Input,
    entry: &Entry,
    out: Compression,
    options: &EditOptions,
) -> Result<bool> {
    let a = &input.archive;
    let in_input = |e: Error| e.with_path(&input.path);
    let metadata: Vec<(&str, &str)> = entry
        .metadata()
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let (key, arch) = (entry.key(), entry.arch());
    let size = a.decoded_size(entry).map_err(in_input)? as u64;
    // Stored bytes are borrowed from the input's mapping: no decoding.
    let borrowed = a.scheme() == Scheme::None && out == Compression::None;
    if size <= options.max_memory || borrowed {
        let bytes = a.read(entry).map_err(in_input)?;
        check_digest(entry, crate::sha256(&bytes)).map_err(in_input)?;
        w.add_with_metadata(key, arch, &bytes, &metadata)
            .map_err(writing(&options.output))?;
        return Ok(false);
    }
    let own_frame = match a.scheme() {
        Scheme::ZstdPerKernel => true,
        Scheme::ZstdDelta => entry.base().is_none(),
        Scheme::None => false,
    };
    if !(own_frame && matches!(out, Compression::Zstd { .. })) {
        return Err(in_input(Error::new(
            ErrorKind::OutOfMemory,
            format!(
                "entry {key:?} {arch:?} decodes to {size} bytes, over the memory budget of {} bytes; \
                 only an entry stored as its own zstd frame, written into a zstd-per-kernel archive, \
                 is copied without decoding",
                options.max_memory
            ),
        )));
    }
    let frame = a.stored(entry).map_err(in_input)?;
    let sha256 = stream_check(frame, entry).map_err(in_input)?;
    w.add_precompressed_with_metadata(key, arch, (frame, size, sha256), &metadata)
        .map_err(writing(&options.output))?;
    Ok(true)
}

/// `verify`'s digest rule: an entry that records a sha256 decodes to it.
fn check_digest(entry: &Entry, actual: [u8; 32]) -> Result<()> {
    match entry.sha256() {
        Some(recorded) if *recorded != actual => Err(Error::at(
            ErrorKind::DecompressionFailed,
            entry.stored_offset(),
            format!(
                "entry {:?} {:?}: its bytes have sha256 {}, the TOC records {}",
                entry.key(),
                entry.arch(),
                crate::digest::to_hex(&actual),
                crate::digest::to_hex(recorded)
            ),
        )),
        _ => Ok(()),
    }
}

/// Decode `frame` (exactly one zstd frame, `entry`'s) a buffer at a time:
/// it must yield `original_size` bytes and the recorded sha256; returns
/// the sha256.
fn stream_check(frame: &[u8], entry: &Entry) -> Result<[u8; 32]> {
    let at = entry.stored_offset();
    let fail = |m: String| Error::at(ErrorKind::DecompressionFailed, at, m);
    let whole = zstd::zstd_safe::find_frame_compressed_size(frame).map_err(|c| {
        fail(format!(
            "not a zstd frame: {}",
            zstd::zstd_safe::get_error_name(c)
        ))
    })?;
    if whole != frame.len() {
        return Err(fail(format!(
            "{whole} bytes of zstd data in a {}-byte slot",
            frame.len()
        )));
    }
    let io = |e: std::io::Error| {
        fail(format!("frame {} failed to decode", entry.ordinal())).with_source(e)
    };
    let mut decoder = zstd::stream::read::Decoder::with_buffer(frame)
        .map_err(io)?
        .single_frame();
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 17];
    let mut got: u64 = 0;
    loop {
        let n = decoder.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        got += n as u64;
        if got > entry.original_size() {
            break;
        }
        hasher.update(buf.get(..n).unwrap_or_default());
    }
    if got != entry.original_size() {
        let more = if got > entry.original_size() {
            "more than "
        } else {
            ""
        };
        return Err(fail(format!(
            "frame {} decodes to {more}{} bytes, TOC original_size is {}",
            entry.ordinal(),
            got.min(entry.original_size().saturating_add(1)),
            entry.original_size()
        )));
    }
    let sha256: [u8; 32] = hasher.finalize().into();
    check_digest(entry, sha256)?;
    Ok(sha256)
}
