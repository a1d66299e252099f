//! The phases `wheel split` and `wheel prune` share: **read** (unpack and
//! check the input into a staging directory, [`read`]), then each command's
//! own plan and transform, then **write** (every planned wheel zipped in
//! the staging directory, [`write_all`]) and **commit** (through
//! [`kpack_fsafe::Outputs`]: existing outputs refused unless forced, device
//! wheels moved into place before the host wheel, all or nothing,
//! [`commit`]). A wheel without device code is copied unchanged
//! ([`copy_unchanged`]).

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use zip::DateTime;

use kpack_fsafe::{Order, Outputs, Tree};
use kpack_job::Job;

use crate::amd::AMD_GENERATOR;
use crate::error::{Error, ErrorKind, Result};
use crate::job::{Source, WheelFile, WheelJob};
use crate::progress::{Progress, phase};
use crate::reader::{FileMeta, Limits, Unpacked, unpack};

/// A wheel read into a staging directory: `dir/src/<scheme>/…` holds the
/// split schemes' trees; the rest of `dir` is the command's.
pub(crate) struct Staged {
    pub dir: tempfile::TempDir,
    pub un: Unpacked,
}

impl Staged {
    /// The staging directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Where the split schemes' trees were unpacked.
    pub fn src(&self) -> PathBuf {
        self.dir.path().join("src")
    }
}

/// Read phase: a staging directory in `staging_in`, and `input` unpacked
/// and checked into it.
pub(crate) fn read(
    input: &Path,
    staging_in: &Path,
    limits: &Limits,
    progress: Option<&dyn Progress>,
) -> Result<Staged> {
    let dir = kpack_fsafe::temp_dir_in(staging_in, "wheel")
        .map_err(|e| Error::io(staging_in, "cannot create a staging directory", e))?;
    let src = create_dir_in(dir.path(), "src")?;
    let un = unpack(input, &src, limits, progress)?;
    Ok(Staged { dir, un })
}

/// Write the new private file `rel` under `root` (a staging directory)
/// from `bytes`, never through a symlink and never onto an existing file;
/// returns its path.
pub(crate) fn write_new(root: &Path, rel: &str, bytes: &[u8]) -> Result<PathBuf> {
    use std::io::Write;
    let path = root.join(rel);
    Tree::open(root)
        .and_then(|t| t.create_file(Path::new(rel), 0o600))
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| Error::io(&path, "cannot write", e))?;
    Ok(path)
}

/// Create the directory `rel` (and its missing parents) under `root`,
/// never through a symlink; returns its path.
pub(crate) fn create_dir_in(root: &Path, rel: &str) -> Result<PathBuf> {
    let path = root.join(rel);
    Tree::open(root)
        .and_then(|t| t.create_dir_all(Path::new(rel)))
        .map_err(|e| Error::io(&path, "cannot create", e))?;
    Ok(path)
}

/// The report of the input wheel.
pub(crate) fn input_report(input: &Path, un: &Unpacked, distribution: &str) -> WheelFile {
    WheelFile {
        file: un.name.to_string(),
        path: input.to_path_buf(),
        distribution: distribution.to_string(),
        bytes: un.bytes,
        files: un.files.len(),
    }
}

/// An input entry copied as it is.
pub(crate) fn raw(meta: &FileMeta) -> Source {
    Source::Raw {
        index: meta.index,
        hash: meta.hash.clone(),
        size: meta.size,
    }
}

/// The input's files without its RECORD and the signatures of it, which
/// `what` (the output wheel) replaces: each signature dropped with a
/// warning.
pub(crate) fn files_but_record<'a>(
    un: &'a Unpacked,
    what: &str,
    warnings: &mut Vec<String>,
) -> Vec<(&'a String, &'a FileMeta)> {
    let record = format!("{}/RECORD", un.dist_info);
    let mut out = Vec::new();
    for (path, meta) in &un.files {
        if path.starts_with(&record) {
            if path != &record {
                warnings.push(format!(
                    "{path} dropped: it signs the input's RECORD, which {what} replaces"
                ));
            }
            continue;
        }
        out.push((path, meta));
    }
    out
}

/// Write phase: every job into `out_stage/<file>`, in parallel (a wheel's
/// bytes do not depend on scheduling: its entries are written in order).
/// Returns each wheel's size and file count, in job order.
pub(crate) fn write_all(
    jobs: &[WheelJob],
    input: &Path,
    out_stage: &Path,
    time: DateTime,
    progress: Option<&dyn Progress>,
) -> Result<Vec<(u64, usize)>> {
    let total = jobs.iter().map(WheelJob::bytes).sum();
    let what = match jobs {
        [one] => format!("writing {}", one.file),
        _ => format!("writing {} wheels", jobs.len()),
    };
    phase(progress, &what, total);
    // On the caller's pool: `-j` bounds the wheels written at once and the
    // chunks deflated inside each.
    jobs.par_iter()
        .map(|j| j.write(input, &out_stage.join(&j.file), time, progress))
        .collect()
}

/// The outputs of a wheel command in `out_dir` ([`kpack_fsafe::Outputs`]:
/// an existing wheel refused unless `force`), or `None` for a dry run.
pub(crate) fn outputs(job: &Job, out_dir: &Path, dry_run: bool) -> Result<Option<Outputs>> {
    if dry_run {
        return Ok(None);
    }
    Ok(Some(job.outputs(out_dir, "wheel")?))
}

/// Where a command reads its input into: the outputs' scratch space (on
/// the output's file system), or for a dry run the system's temp directory.
pub(crate) fn scratch(outputs: Option<&Outputs>) -> Result<PathBuf> {
    match outputs {
        Some(o) => Ok(o.scratch()?),
        None => Ok(std::env::temp_dir()),
    }
}

/// Commit phase: the wheels `files` written in `out_stage` planned as
/// outputs (each with its [`Order`]: device wheels before the host wheel
/// that installs them) and committed all or nothing. A wheel that exists
/// already with the same bytes is left alone (a rerun, or a rerun after a
/// kill that the journal finished): returned, not planned. One that
/// differs is refused unless forced.
pub(crate) fn commit(
    outputs: Outputs,
    files: &[(&str, Order)],
    out_stage: &Path,
) -> Result<Vec<String>> {
    let mut outputs = outputs;
    let mut identical = Vec::new();
    // Wheels move into the staging tree from its root down, never through
    // a symlink and never onto a file there.
    let staging = outputs.tree();
    let tree = Tree::open(&staging).map_err(|e| Error::io(&staging, "cannot open", e))?;
    for (f, order) in files {
        if is_identical(&out_stage.join(f), &outputs.dest(f)) {
            identical.push(f.to_string());
            continue;
        }
        outputs.plan(f, *order)?;
        tree.adopt(&out_stage.join(f), Path::new(f))
            .map_err(|e| Error::io(out_stage.join(f), "cannot stage", e))?;
    }
    outputs.commit()?;
    Ok(identical)
}

/// Whether the output `dest` exists with what `staged` holds (a wheel, or
/// a wheel unpacked into a directory).
fn is_identical(staged: &Path, dest: &Path) -> bool {
    std::fs::symlink_metadata(dest).is_ok() && kpack_fsafe::first_difference(staged, dest).is_none()
}

/// A wheel without device code is its own output: copied unchanged as
/// `file` into `outputs` (nothing for a dry run) and committed. Returns
/// whether an identical copy was there already (left alone).
pub(crate) fn copy_unchanged(input: &Path, outputs: Option<Outputs>, file: &str) -> Result<bool> {
    let Some(mut outputs) = outputs else {
        return Ok(false);
    };
    if is_identical(input, &outputs.dest(file)) {
        return Ok(true);
    }
    let staged = outputs.plan(file, Order::Last)?;
    kpack_fsafe::copy_atomically(input, &staged, "wheel")
        .map_err(|e| Error::io(e.path, e.what, e.source))?;
    outputs.commit()?;
    Ok(false)
}

/// The output directory must not hold the input: `what` has the input's
/// file name.
pub(crate) fn refuse_input_dir(input: &Path, out_dir: &Path, what: &str) -> Result<()> {
    let input_dir = input
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same(input_dir, out_dir) {
        return Err(Error::new(
            ErrorKind::Exists,
            Some(out_dir.to_path_buf()),
            format!(
                "the output directory holds the input, and {what} has the input's name: choose another"
            ),
        ));
    }
    Ok(())
}

/// A device wheel is marked by the WHEEL file wheel split (or AMD's
/// splitter, whose layout `--overlay-root` writes) writes for it;
/// refused before anything is done to it (it may hold no archive at all,
/// only database files). `verb` is the refused command (`split`, `prune`).
pub(crate) fn refuse_device_wheel(input: &Path, un: &Unpacked, verb: &str) -> Result<()> {
    if let Some(g) = un
        .wheel
        .get("Generator")
        .filter(|g| g.starts_with("kpack-wheel ") || *g == AMD_GENERATOR)
    {
        let by = if g == AMD_GENERATOR {
            "AMD's wheel splitter (or kpack in its layout)"
        } else {
            "kpack wheel split"
        };
        return Err(Error::new(
            ErrorKind::AlreadySplit,
            Some(input.to_path_buf()),
            format!(
                "a device wheel written by {by} (WHEEL Generator: {g}): {verb} the original fat wheel instead"
            ),
        ));
    }
    Ok(())
}
