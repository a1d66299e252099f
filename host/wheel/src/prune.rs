//! [`prune_wheel`]: one fat wheel → one smaller fat wheel for chosen GPUs.
//! Same name, version and tags; every fat binary keeps only the chosen
//! targets inside it ([`kpack_prune`]), database files the handlers place
//! on other targets are left out, RECORD is regenerated. The result needs
//! no kpack runtime: any HIP runtime loads its binaries as they are.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kpack_bundle::WalkOptions;
use kpack_prune::{KeepList, Prunable};
use kpack_split::{Classification, Databases};
use rayon::prelude::*;
use serde::Serialize;

use crate::error::{Error, ErrorKind, Result};
use kpack_fsafe::{Order, Tree};
use kpack_job::Job;

use crate::job::{Entry, Source, WheelFile, WheelJob, entry_order};
use crate::pipeline::{self, Staged, refuse_device_wheel, refuse_input_dir};
use crate::progress;
use crate::reader::{Limits, Route, SPLIT_SCHEMES, Unpacked, list_files};
use crate::writer::{ZIP_EPOCH, zip_time};

/// How to prune a wheel. Build it with [`PruneOptions::new`].
#[derive(Clone)]
pub struct PruneOptions<'a> {
    /// The targets to keep (`--keep`).
    pub keep: KeepList,
    /// A `--keep` target that no binary or database file of the wheel has
    /// is an error (else a warning).
    pub strict: bool,
    /// Check the MD5 of compressed bundles.
    pub verify_hash: bool,
    /// Database classifier (the `--split-databases` handlers), if any:
    /// files it places on targets that are not kept are left out.
    pub databases: Option<&'a dyn Databases>,
    /// Timestamp of every zip entry, seconds since the Unix epoch (the CLI
    /// passes `SOURCE_DATE_EPOCH`); default 1980-01-01.
    pub mtime: u64,
    /// How much the input may inflate to (zip-bomb guards).
    pub limits: Limits,
}

impl PruneOptions<'_> {
    /// Keep `keep`; hashes checked, no databases, timestamps 1980-01-01.
    pub fn new(keep: KeepList) -> PruneOptions<'static> {
        PruneOptions {
            keep,
            strict: false,
            verify_hash: true,
            databases: None,
            mtime: ZIP_EPOCH,
            limits: Limits::default(),
        }
    }
}

/// One pruned file (a fat binary, object or static archive).
#[derive(Debug, Clone, Serialize)]
pub struct PrunedFile {
    /// Wheel path.
    pub path: String,
    /// Targets kept inside it.
    pub kept: Vec<String>,
    /// Targets dropped from it.
    pub dropped: Vec<String>,
    /// Size before.
    pub bytes_in: u64,
    /// Size after.
    pub bytes_out: u64,
    /// Layout taken (see `kpack prune`).
    pub layout: &'static str,
}

/// One database file left out.
#[derive(Debug, Clone, Serialize)]
pub struct DroppedFile {
    /// Wheel path.
    pub path: String,
    /// The handler that placed it.
    pub handler: String,
    /// The target it serves.
    pub target: String,
    /// Its size.
    pub bytes: u64,
}

/// What [`prune_wheel`] did.
#[derive(Debug, Clone, Serialize)]
pub struct PruneReport {
    /// The input wheel.
    pub input: WheelFile,
    /// The pruned wheel (the input's file name, in the output directory).
    pub output: WheelFile,
    /// Whether the wheel had device code; without any, it is copied
    /// unchanged.
    pub device_code: bool,
    /// Every target of its device code and database files, kept.
    pub kept: Vec<String>,
    /// Every target of its device code and database files, dropped.
    pub dropped: Vec<String>,
    /// `--keep` targets the wheel has nothing for.
    pub missing: Vec<String>,
    /// Pruned files, by wheel path.
    pub binaries: Vec<PrunedFile>,
    /// Database files left out, by wheel path.
    pub dropped_files: Vec<DroppedFile>,
    /// Problems that did not stop the prune.
    pub warnings: Vec<String>,
}

/// One file of a scheme tree and what happens to it.
enum Plan {
    /// Copied as it is.
    Keep,
    /// Pruned into the staging directory.
    Prune(Box<Prunable>),
    /// Left out: a database file of a target not kept.
    Drop { handler: String, target: String },
}

/// Prune `input` into `out_dir` (created if missing; must not be the
/// input's directory: the output has the input's file name).
///
/// Phases: read (unpack and check), plan (what happens to each file, and
/// which targets are kept: decided before anything is written, so keeping
/// nothing or, with `strict`, a missing target writes nothing), transform
/// (every fat file pruned), write and commit. On the job's threads, under
/// its memory budget, with its rule for a wheel that exists already.
pub fn prune_wheel(
    job: &Job,
    input: &Path,
    out_dir: &Path,
    opts: &PruneOptions<'_>,
) -> Result<PruneReport> {
    job.install(|| prune_on(job, input, out_dir, opts))
}

/// [`prune_wheel`], on the job's threads.
fn prune_on(
    job: &Job,
    input: &Path,
    out_dir: &Path,
    opts: &PruneOptions<'_>,
) -> Result<PruneReport> {
    refuse_input_dir(input, out_dir, "the pruned wheel")?;
    let progress = Some(job.progress());
    // Staged next to the output so the final rename stays on one file system.
    let mut outputs = job.outputs(out_dir, "wheel")?;
    let st = pipeline::read(input, &outputs.scratch()?, &opts.limits, progress)?;
    refuse_device_wheel(input, &st.un, "prune")?;
    let mut warnings = st.un.warnings.clone();
    let distribution = st
        .un
        .metadata
        .get("Name")
        .unwrap_or(&st.un.name.distribution)
        .to_string();
    let input_report = pipeline::input_report(input, &st.un, &distribution);
    progress::phase(progress, "reading binaries", 0);
    let plans = plan_files(input, &st, opts)?;
    let output_path = out_dir.join(&input_report.file);
    let Some(targets) = decide_targets(input, &plans, opts, &mut warnings)? else {
        // No device code: the wheel is its own pruned wheel.
        // An identical copy there already is left alone.
        let _identical = pipeline::copy_unchanged(input, Some(outputs), &input_report.file)?;
        return Ok(PruneReport {
            output: WheelFile {
                path: output_path,
                ..input_report.clone()
            },
            input: input_report,
            device_code: false,
            kept: Vec::new(),
            dropped: Vec::new(),
            missing: Vec::new(),
            binaries: Vec::new(),
            dropped_files: Vec::new(),
            warnings,
        });
    };
    outputs.plan(&input_report.file, Order::Last)?;
    outputs.check_existing()?;
    let pruned_root = st.path().join(PRUNED);
    let mut binaries = prune_files(job, input, &plans, st.path(), opts)?;
    for b in binaries.iter().filter(|b| b.kept.is_empty()) {
        warnings.push(format!(
            "{}: none of its targets ({}) is kept; its bundles now hold host code only",
            b.path,
            b.dropped.join(", ")
        ));
    }
    let (wheel, dropped_files) =
        pruned_job(&st, &plans, &pruned_root, &distribution, &mut warnings);
    let time = zip_time(opts.mtime);
    let jobs = std::slice::from_ref(&wheel);
    let written = pipeline::write_all(jobs, input, &outputs.tree(), time, progress)?;
    let (bytes, files) = written.first().copied().unwrap_or_default();
    outputs.commit()?;
    binaries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(PruneReport {
        output: WheelFile {
            path: output_path,
            bytes,
            files,
            ..input_report.clone()
        },
        input: input_report,
        device_code: true,
        kept: targets.kept,
        dropped: targets.dropped,
        missing: targets.missing,
        binaries,
        dropped_files,
        warnings,
    })
}

/// A planned file: its wheel path, where it was unpacked, and its plan.
type Planned = (String, PathBuf, Plan);

/// Plan phase: what happens to each file of the split schemes' trees.
fn plan_files(input: &Path, st: &Staged, opts: &PruneOptions<'_>) -> Result<Vec<Planned>> {
    let mut plans = Vec::new();
    for scheme in SPLIT_SCHEMES {
        plans.extend(plan_scheme(input, st, opts, scheme)?);
    }
    Ok(plans)
}

fn plan_scheme(
    input: &Path,
    st: &Staged,
    opts: &PruneOptions<'_>,
    scheme: &'static str,
) -> Result<Vec<Planned>> {
    let root = st.src().join(scheme);
    let files = list_files(&root)?;
    let sized = files
        .iter()
        .map(|(rel, p)| {
            let len = std::fs::metadata(p)
                .map_err(|e| Error::io(p, "cannot stat", e))?
                .len();
            Ok((rel.as_str(), len))
        })
        .collect::<Result<Vec<_>>>()?;
    let claims = kpack_split::classify_files(&root, &sized, opts.databases)
        .map_err(|e| Error::split(input, e))?;
    let walk = WalkOptions {
        verify_hash: opts.verify_hash,
    };
    files
        .par_iter()
        .zip(claims)
        .map(|((rel, p), claim)| {
            let path = Unpacked::wheel_path(&st.un.data_dir, scheme, rel);
            let plan = match claim {
                Some(c) => match c.classification {
                    Classification::Arch(target) if !opts.keep.filter().keeps(&target) => {
                        Plan::Drop {
                            handler: c.handler,
                            target,
                        }
                    }
                    _ => Plan::Keep,
                },
                None => match kpack_prune::open(p, walk) {
                    Ok(Some(prunable)) => Plan::Prune(Box::new(prunable)),
                    Ok(None) => Plan::Keep,
                    Err(e) => {
                        return Err(Error::new(
                            ErrorKind::Split,
                            Some(input.to_path_buf()),
                            format!("{path}: cannot read"),
                        )
                        .with_source(e));
                    }
                },
            };
            Ok((path, p.clone(), plan))
        })
        .collect()
}

/// The wheel's targets, split by `--keep`.
struct Targets {
    kept: Vec<String>,
    dropped: Vec<String>,
    missing: Vec<String>,
}

/// Plan phase: every target of the planned files, kept or dropped;
/// `None` without device code. Keeping nothing is an error, and so is a
/// missing `--keep` target with `strict` (else a warning).
fn decide_targets(
    input: &Path,
    plans: &[Planned],
    opts: &PruneOptions<'_>,
    warnings: &mut Vec<String>,
) -> Result<Option<Targets>> {
    let mut targets = BTreeSet::new();
    for (_, _, plan) in plans {
        match plan {
            Plan::Prune(p) => targets.extend(p.targets().iter().cloned()),
            Plan::Drop { target, .. } => {
                targets.insert(target.clone());
            }
            Plan::Keep => {}
        }
    }
    let targets: Vec<String> = targets.into_iter().collect();
    if targets.is_empty() {
        return Ok(None);
    }
    let (kept, dropped) = opts.keep.partition(&targets);
    let missing = opts.keep.missing(&targets);
    if opts.strict && !missing.is_empty() {
        return Err(Error::invalid(
            input,
            format!(
                "has no code object or database file for {} (it has {})",
                missing.join(", "),
                targets.join(", ")
            ),
        ));
    }
    if kept.is_empty() {
        return Err(Error::invalid(
            input,
            format!(
                "--keep {} matches none of its targets ({}): pruning would keep nothing",
                opts.keep.names().join(","),
                targets.join(", ")
            ),
        ));
    }
    for t in &missing {
        warnings.push(format!("has no code object or database file for {t}"));
    }
    Ok(Some(Targets {
        kept,
        dropped,
        missing,
    }))
}

/// Where the pruned files go, in the staging directory.
const PRUNED: &str = "pruned";

/// Transform phase: every fat file pruned into
/// `staging/pruned/<wheel path>`.
fn prune_files(
    job: &Job,
    input: &Path,
    plans: &[Planned],
    staging: &Path,
    opts: &PruneOptions<'_>,
) -> Result<Vec<PrunedFile>> {
    let keep = opts.keep.filter();
    let fat = |plan: &Plan| matches!(plan, Plan::Prune(_));
    let total = plans
        .iter()
        .filter(|(_, _, plan)| fat(plan))
        .map(|(_, p, _)| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    let progress = Some(job.progress());
    progress::phase(progress, "pruning device code", total);
    // The pruned tree's directories are made from the staging directory
    // down, never through a symlink.
    let tree = Tree::open(staging).map_err(|e| Error::io(staging, "cannot open", e))?;
    plans
        .par_iter()
        .filter_map(|(path, _, plan)| match plan {
            Plan::Prune(p) => Some((path, p)),
            _ => None,
        })
        .map(|(path, p)| {
            let rel = Path::new(PRUNED).join(path);
            if let Some(dir) = rel.parent() {
                tree.create_dir_all(dir)
                    .map_err(|e| Error::io(staging.join(dir), "cannot create", e))?;
            }
            let out = staging.join(&rel);
            let report = p.write(&out, keep, job.budget()).map_err(|e| {
                Error::new(
                    ErrorKind::Split,
                    Some(input.to_path_buf()),
                    format!("{path}: cannot prune"),
                )
                .with_source(e)
            })?;
            let (kept, dropped) = opts.keep.partition(p.targets());
            progress::advance(progress, report.input_size());
            Ok(PrunedFile {
                path: path.clone(),
                kept,
                dropped,
                bytes_in: report.input_size(),
                bytes_out: report.output_size(),
                layout: report.layout(),
            })
        })
        .collect()
}

/// Plan phase, the pruned wheel: pruned files from disk, the rest
/// raw-copied, dropped database files left out; the input's RECORD (and
/// any signature of it) replaced.
fn pruned_job(
    st: &Staged,
    plans: &[Planned],
    pruned_root: &Path,
    distribution: &str,
    warnings: &mut Vec<String>,
) -> (WheelJob, Vec<DroppedFile>) {
    let un = &st.un;
    let by_path: BTreeMap<&str, &Plan> = plans
        .iter()
        .map(|(p, _, plan)| (p.as_str(), plan))
        .collect();
    let mut entries = Vec::new();
    let mut dropped_files = Vec::new();
    for (path, meta) in pipeline::files_but_record(un, "the pruned wheel", warnings) {
        let plan = match un.route(path) {
            Route::Keep => &Plan::Keep,
            Route::Split(..) => by_path.get(path.as_str()).copied().unwrap_or(&Plan::Keep),
        };
        let src = match plan {
            Plan::Keep => pipeline::raw(meta),
            Plan::Prune(_) => Source::Disk(pruned_root.join(path)),
            Plan::Drop { handler, target } => {
                dropped_files.push(DroppedFile {
                    path: path.clone(),
                    handler: handler.clone(),
                    target: target.clone(),
                    bytes: meta.size,
                });
                continue;
            }
        };
        entries.push(Entry {
            path: path.clone(),
            src,
            mode: meta.mode,
        });
    }
    entries.sort_by_cached_key(|e| entry_order(&un.dist_info, &e.path));
    let job = WheelJob {
        file: un.name.to_string(),
        distribution: distribution.to_string(),
        arch: None,
        members: Vec::new(),
        dirs: un.dirs.iter().map(|(d, m)| (d.clone(), *m)).collect(),
        entries,
        generated: Vec::new(),
        record: format!("{}/RECORD", un.dist_info),
    };
    (job, dropped_files)
}
