//! Whole artifacts: [`split_artifacts`] runs [`split_prefix`] over every
//! prefix of each artifact's manifest, stages the outputs, writes the
//! manifests and renames complete artifacts into place.

pub(crate) mod archive_input;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kpack_fsafe::{Order, Outputs};
use serde::Serialize;

use crate::error::{Error, ErrorKind, Result, error_chain};
use crate::manifest::{artifact_dirs, keep_link, prefix_link, read_manifest, write_manifest};
use crate::prefix::{PrefixLayout, PrefixReport, SplitOptions, refuse_split_output, split_prefix};
use archive_input::split_archive;
use kpack_artifact::Codec;
use kpack_artifact::Remover;
use kpack_artifact::Store;
use kpack_artifact::{
    ARCHIVE_SUFFIX, EQUIVALENCE_SUFFIX, EquivalenceManifest, OutputFormat, write_archive_with,
};

/// One artifact to split.
#[derive(Debug, Clone)]
pub struct ArtifactInput {
    /// The artifact directory (with `artifact_manifest.txt`), or a TheRock
    /// artifact archive (`.tar.zst`, `.tar.xz`, `.tar.gz`) holding one.
    pub dir: PathBuf,
    /// Its component name (`blas_lib`): outputs are `<component>_generic`
    /// and `<component>_<arch>`.
    pub component: String,
}

/// The component of a TheRock artifact directory name, AMD's batch rule:
/// drop the last `_`-separated part (the target family): `blas_lib_gfx110X-dgpu`
/// → `blas_lib`. `None` for fewer than two parts or a `generic` family.
/// An artifact archive's name counts without its suffix
/// (`blas_lib_gfx1100.tar.zst`).
pub fn component_from_dir_name(name: &str) -> Option<String> {
    let name = kpack_artifact::artifact_archive_stem(name).unwrap_or(name);
    let (component, family) = name.rsplit_once('_')?;
    if component.is_empty() || family == "generic" {
        return None;
    }
    Some(component.to_string())
}

/// The artifacts of a shard directory (`--batch`): every direct
/// subdirectory with a manifest whose name gives a component, sorted.
/// The second list names the subdirectories skipped, with the reason.
pub fn batch_inputs(shard: &Path) -> Result<(Vec<ArtifactInput>, Vec<String>)> {
    let names = artifact_dirs(shard)?;
    let mut inputs = Vec::new();
    let mut skipped = Vec::new();
    for n in names {
        match component_from_dir_name(&n) {
            Some(component) => inputs.push(ArtifactInput {
                dir: shard.join(&n),
                component,
            }),
            None => skipped.push(format!(
                "{n}: name has no <component>_<family> form (or is generic)"
            )),
        }
    }
    Ok((inputs, skipped))
}

/// What happened to one artifact.
#[derive(Debug, Clone, Serialize)]
pub struct ArtifactReport {
    /// The input directory.
    pub input: PathBuf,
    /// The component.
    pub component: String,
    /// Output artifact directory names, sorted (empty when it failed).
    pub outputs: Vec<String>,
    /// Arches (directory spelling) that received content.
    pub arches: Vec<String>,
    /// Only a generic artifact was produced.
    pub generic_only: bool,
    /// Regular files read.
    pub files: u64,
    /// Bytes read.
    pub bytes_in: u64,
    /// Bytes written (generic plus every arch).
    pub bytes_out: u64,
    /// Binaries offloaded.
    pub binaries_offloaded: usize,
    /// Code objects moved into archives.
    pub code_objects: usize,
    /// Database files per handler and verdict.
    pub databases: BTreeMap<String, BTreeMap<String, u64>>,
    /// What the target filter dropped, per target.
    pub excluded: BTreeMap<String, u64>,
    /// Warnings (device code kept as is, missing prefixes).
    pub warnings: Vec<String>,
    /// Why the artifact was not written (empty on success).
    pub errors: Vec<String>,
    /// Output artifacts that existed already with the same contents and
    /// were left alone (a parallel shard wrote them).
    pub identical: Vec<String>,
    /// Per-prefix details.
    pub prefixes: Vec<PrefixReport>,
}

/// Split `inputs` into `out` (created if needed). Each artifact is staged
/// in a temp directory inside `out` and renamed into place only when every
/// file of it was processed; a failed artifact leaves nothing behind and is
/// reported with its errors while the others go on. Existing output
/// directories are never overwritten. Errors are only returned for problems
/// before any work (duplicate components, unusable `out`).
pub fn split_artifacts(
    inputs: &[ArtifactInput],
    out: &Path,
    opts: &SplitOptions<'_>,
) -> Result<Vec<ArtifactReport>> {
    // Split output (arch artifacts hold archives) is refused before
    // anything is written, and before the duplicate-component check a
    // directory of split output would otherwise fail with.
    for i in inputs {
        for prefix in read_manifest(&i.dir).unwrap_or_default() {
            // Never read behind a link: it may leave the artifact.
            if prefix_link(&i.dir, &prefix).is_none() {
                refuse_split_output(&i.dir.join(prefix))?;
            }
        }
    }
    let mut seen = BTreeSet::new();
    for i in inputs {
        if !seen.insert(i.component.as_str()) {
            return Err(Error::new(
                ErrorKind::Invalid,
                Some(i.dir.clone()),
                format!(
                    "a second artifact for component {:?}: their outputs would merge",
                    i.component
                ),
            ));
        }
    }
    kpack_fsafe::Tree::create(out).map_err(|e| Error::io(out, "cannot create", e))?;
    let mut reports = Vec::new();
    for input in inputs {
        reports.push(split_one(input, out, opts)?);
    }
    Ok(reports)
}

/// Where an artifact's entries come from.
enum Source {
    /// A directory: its manifest's prefixes.
    Dir(Vec<String>),
    /// An artifact archive: read streaming.
    Archive,
}

fn split_one(input: &ArtifactInput, out: &Path, opts: &SplitOptions<'_>) -> Result<ArtifactReport> {
    let c = &input.component;
    let mut rep = ArtifactReport::empty(input);
    let prefixes = match Codec::sniff(&input.dir) {
        Some(_) => Ok(Source::Archive),
        None => read_manifest(&input.dir).map(Source::Dir),
    };
    let prefixes = match prefixes {
        Ok(p) => p,
        Err(e) => {
            rep.errors.push(error_chain(&e));
            return Ok(rep);
        }
    };
    // Shards writing one location: an output another shard committed
    // with the same contents is kept, even when it appears between the
    // check below and the commit.
    let mut staged = opts.job.outputs(out, "split")?;
    let stage = staged.tree();
    let mut opts = opts.clone();
    opts.component = c.clone();
    if opts.archive_per_artifact {
        opts.shared_archive = Some(c.clone());
    }
    let mut store = None;
    // Declared after `staged`, so dropped (its removals waited for) first.
    let mut remover = None;
    let processed = match prefixes {
        Source::Archive => {
            let scratch = staged.scratch()?;
            let materialize = opts.output_format == OutputFormat::Dir;
            let s = Store::create(&scratch, &stage, materialize)
                .map_err(|e| Error::io(&scratch, "cannot create a store", e))?;
            let r = remover.insert(Remover::start());
            split_archive(input, &stage, &opts, store.insert(s), r, &mut rep)
        }
        Source::Dir(prefixes) => split_prefixes(input, &prefixes, &stage, &opts, &mut rep),
    };
    if !rep.errors.is_empty() {
        return Ok(rep);
    }
    if opts.archive_per_artifact {
        merge_per_artifact(c, &stage, &opts, &mut rep)?;
    }
    let (outputs, arches) = write_manifests(c, &stage, &processed, &rep)?;
    let names = output_names(&outputs, opts.output_format);
    if opts.output_format == OutputFormat::TarZst {
        let r = remover.get_or_insert_with(Remover::start);
        pack_outputs(&stage, &outputs, opts.mtime, store.as_ref(), Some(r))?;
    }
    for o in &names {
        match existing_output(&staged, o) {
            Ok(true) => rep.identical.push(o.clone()),
            Ok(false) => {
                staged.plan(o, Order::First)?;
            }
            Err(e) => rep.errors.push(error_chain(&e)),
        }
    }
    if !rep.errors.is_empty() {
        return Ok(rep);
    }
    // Removals inside the staging directory end before it moves.
    drop(remover.take());
    let committed = staged.commit_report()?;
    let kept: Vec<String> = committed
        .identical
        .iter()
        .filter_map(|p| Some(p.strip_prefix(out).ok()?.to_str()?.to_string()))
        .collect();
    rep.identical.extend(kept);
    rep.generic_only = arches.is_empty();
    rep.arches = arches.into_iter().collect();
    rep.outputs = names;
    Ok(rep)
}

/// What an output artifact `rel` that may exist already means for the
/// staged one ([`Outputs::compare_staged`]: `true` when identical, left
/// alone), the first difference of an archive output read from the
/// equivalence manifests.
pub(crate) fn existing_output(staged: &Outputs, rel: &str) -> Result<bool> {
    match staged.compare_staged(rel) {
        Err(kpack_fsafe::Error::ExistsDiffering { path, first })
            if first.as_os_str().is_empty() =>
        {
            let first = archive_difference(&staged.tree().join(rel), &path)
                .unwrap_or_else(|| ".".into())
                .into();
            Err(kpack_fsafe::Error::ExistsDiffering { path, first }.into())
        }
        other => Ok(other?),
    }
}

/// For an output archive or its equivalence manifest: the first file in
/// which the staged artifact and the existing one differ, from their
/// manifests.
fn archive_difference(staged: &Path, dest: &Path) -> Option<String> {
    let name = staged.file_name()?.to_str()?;
    let stem = name
        .strip_suffix(ARCHIVE_SUFFIX)
        .or_else(|| name.strip_suffix(EQUIVALENCE_SUFFIX))?;
    let manifest = |beside: &Path| -> Option<EquivalenceManifest> {
        let p = beside.with_file_name(format!("{stem}{EQUIVALENCE_SUFFIX}"));
        serde_json::from_slice(&std::fs::read(p).ok()?).ok()
    };
    manifest(staged)?.first_difference(&manifest(dest)?)
}

/// `--archive-per artifact`: every per-binary archive of the artifact, all
/// prefixes together, merged into one `<component>_<target id>.kpack` per
/// target in the first prefix's archive directory of each arch tree (the
/// prefixes share one archive directory once installed, flattened), and
/// the reports listing those instead. Archive directories left empty go.
fn merge_per_artifact(
    c: &str,
    stage: &Path,
    opts: &SplitOptions<'_>,
    rep: &mut ArtifactReport,
) -> Result<()> {
    let tree = |arch: &str, prefix: &str| stage.join(format!("{c}_{arch}")).join(prefix);
    let parts: Vec<(String, PathBuf)> = rep
        .prefixes
        .iter()
        .flat_map(|p| {
            p.archives
                .iter()
                .map(|a| (a.arch.clone(), tree(&a.arch, &p.prefix).join(&a.path)))
        })
        .collect();
    crate::merge::merge_archives(&parts, c, opts.compression, &stage.join(".merge"))?;
    let _ = std::fs::remove_dir_all(stage.join(".merge"));
    for p in &mut rep.prefixes {
        let arches: BTreeSet<String> = p.archives.iter().map(|a| a.arch.clone()).collect();
        let mut merged = Vec::new();
        for arch in arches {
            let dir = tree(&arch, &p.prefix).join(&opts.archive_dir);
            let mut names: Vec<String> = std::fs::read_dir(&dir)
                .map_err(|e| Error::io(&dir, "cannot list", e))?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".kpack"))
                .collect();
            if names.is_empty() {
                remove_empty_dirs(&dir, &tree(&arch, ""));
                continue;
            }
            names.sort();
            for n in names {
                let path = dir.join(&n);
                let archive = kpack_format::Archive::open(&path).map_err(|e| {
                    Error::invalid(&path, "cannot read a merged archive").with_source(e)
                })?;
                merged.push(crate::prefix::ArchiveReport {
                    arch: arch.clone(),
                    path: format!("{}/{n}", opts.archive_dir),
                    entries: archive.entries().count(),
                    bytes: std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
                });
            }
        }
        p.archives = merged;
    }
    Ok(())
}

/// Remove `dir` and its parents up to (not including) `root` while empty.
fn remove_empty_dirs(dir: &Path, root: &Path) {
    let mut at = dir.to_path_buf();
    while at.starts_with(root) && at != root && std::fs::remove_dir(&at).is_ok() {
        if !at.pop() {
            break;
        }
    }
}

/// The files or directories each output artifact is written as.
pub(crate) fn output_names(outputs: &[String], format: OutputFormat) -> Vec<String> {
    match format {
        OutputFormat::Dir => outputs.to_vec(),
        OutputFormat::TarZst => outputs
            .iter()
            .flat_map(|o| {
                [
                    format!("{o}{ARCHIVE_SUFFIX}"),
                    format!("{o}{EQUIVALENCE_SUFFIX}"),
                ]
            })
            .collect(),
    }
}

/// Pack each staged output directory, with the files of `store` placed in
/// it, into its archive and manifest, in the staging directory, in
/// parallel (each archive compressed on one thread, so its bytes do not
/// depend on the pool). A packed directory is handed to `remover`, if any.
pub(crate) fn pack_outputs(
    stage: &Path,
    outputs: &[String],
    mtime: u64,
    store: Option<&Store>,
    remover: Option<&Remover>,
) -> Result<()> {
    use rayon::prelude::*;
    outputs.par_iter().try_for_each(|o| {
        let dest = stage.join(format!("{o}{ARCHIVE_SUFFIX}"));
        let manifest = write_archive_with(&stage.join(o), &dest, mtime, store)?;
        if let Some(r) = remover {
            r.remove(stage.join(o));
        }
        let m = stage.join(format!("{o}{EQUIVALENCE_SUFFIX}"));
        std::fs::write(&m, manifest.to_json()).map_err(|e| Error::io(&m, "cannot write", e))
    })
}

impl ArtifactReport {
    /// The report of `input` before any work.
    fn empty(input: &ArtifactInput) -> ArtifactReport {
        ArtifactReport {
            input: input.dir.clone(),
            component: input.component.clone(),
            outputs: Vec::new(),
            arches: Vec::new(),
            generic_only: true,
            files: 0,
            bytes_in: 0,
            bytes_out: 0,
            binaries_offloaded: 0,
            code_objects: 0,
            databases: BTreeMap::new(),
            excluded: BTreeMap::new(),
            warnings: Vec::new(),
            errors: Vec::new(),
            identical: Vec::new(),
            prefixes: Vec::new(),
        }
    }

    /// Add one prefix's figures, findings and details.
    pub(crate) fn absorb(&mut self, p: PrefixReport) {
        self.errors.extend(p.errors.iter().cloned());
        self.warnings.extend(p.warnings.iter().cloned());
        self.files += p.files;
        self.bytes_in += p.bytes_in;
        self.bytes_out += p.bytes_out_generic + p.bytes_out_arch.values().sum::<u64>();
        self.binaries_offloaded += p.binaries.len();
        self.code_objects += p.binaries.iter().map(|b| b.code_objects).sum::<usize>();
        crate::add_verdict_counts(&mut self.databases, &p.databases);
        for (t, n) in &p.excluded {
            *self.excluded.entry(t.clone()).or_default() += n;
        }
        self.prefixes.push(p);
    }
}

/// Split every prefix of `input` into `stage` (`<component>_generic` and
/// `<component>_<arch>`), into `rep`. Returns the prefixes processed.
fn split_prefixes(
    input: &ArtifactInput,
    prefixes: &[String],
    stage: &Path,
    opts: &SplitOptions<'_>,
    rep: &mut ArtifactReport,
) -> Vec<String> {
    let c = &input.component;
    let generic_root = stage.join(format!("{c}_generic"));
    let mut processed = Vec::new();
    for prefix in prefixes {
        // A prefix reached through a symlink: the link is kept as a link
        // (like links inside a prefix) and nothing behind it is read, as
        // it may lead out of the artifact.
        if let Some(link) = prefix_link(&input.dir, prefix) {
            if let Err(e) = keep_link(&input.dir, &generic_root, &link) {
                rep.errors.push(error_chain(&e));
            }
            processed.push(prefix.clone());
            continue;
        }
        let source = input.dir.join(prefix);
        if !source.is_dir() {
            rep.warnings.push(format!(
                "{}: prefix listed in the manifest does not exist; skipped",
                source.display()
            ));
            continue;
        }
        let generic = generic_root.join(prefix);
        let arch = |a: &str| stage.join(format!("{c}_{a}")).join(prefix);
        let layout = PrefixLayout {
            source: &source,
            prefix,
            generic: &generic,
            arch: &arch,
        };
        match split_prefix(&layout, opts) {
            Ok(p) => rep.absorb(p),
            Err(e) => rep.errors.push(error_chain(&e)),
        }
        processed.push(prefix.clone());
    }
    processed
}

/// Write the manifests of the staged generic artifact (every processed
/// prefix) and of each arch artifact (the prefixes it received). Returns
/// the output names, sorted, and the arches.
fn write_manifests(
    c: &str,
    stage: &Path,
    processed: &[String],
    rep: &ArtifactReport,
) -> Result<(Vec<String>, BTreeSet<String>)> {
    let generic_name = format!("{c}_generic");
    write_manifest(&stage.join(&generic_name), processed)?;
    let mut outputs = vec![generic_name];
    let mut arches: BTreeSet<String> = BTreeSet::new();
    for p in &rep.prefixes {
        arches.extend(p.bytes_out_arch.keys().cloned());
    }
    for a in &arches {
        let root = stage.join(format!("{c}_{a}"));
        let mut contributed: Vec<String> = processed
            .iter()
            .filter(|p| root.join(p).is_dir())
            .cloned()
            .collect();
        contributed.sort();
        write_manifest(&root, &contributed)?;
        outputs.push(format!("{c}_{a}"));
    }
    outputs.sort();
    Ok((outputs, arches))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kpack_fsafe::Existing;

    #[test]
    fn an_existing_output_that_differs_is_a_typed_exists_error_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        std::fs::create_dir_all(out.join("art")).unwrap();
        std::fs::write(out.join("art/f"), "old").unwrap();
        let staged = |force: bool| {
            let o = Outputs::create(&out, "test", Existing::keeping_identical(force)).unwrap();
            std::fs::create_dir_all(o.tree().join("art")).unwrap();
            std::fs::write(o.tree().join("art/f"), "new").unwrap();
            o
        };
        assert!(!existing_output(&staged(true), "art").unwrap());
        let e = existing_output(&staged(false), "art").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Exists);
        assert_eq!(
            error_chain(&e),
            format!(
                "{}: already exists with other contents (first difference: f); pass --force to overwrite",
                out.join("art").display()
            )
        );
    }

    #[test]
    fn component_names_follow_amds_batch_rule() {
        assert_eq!(
            component_from_dir_name("blas_lib_gfx110X-dgpu").as_deref(),
            Some("blas_lib")
        );
        assert_eq!(
            component_from_dir_name("rand_test_gfx1030").as_deref(),
            Some("rand_test")
        );
        assert_eq!(component_from_dir_name("blas_generic"), None);
        assert_eq!(component_from_dir_name("single"), None);
    }
}
