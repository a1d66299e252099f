//! `verify` (spec §9, all of its **[weak]** points fixed): manifests,
//! generic artifacts free of fat binaries, arch artifacts holding only
//! their arch, archives valid, and every marker resolving in the flattened
//! install with `kpack-runtime`'s loader.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kpack_binary::{FileKind, HostBinary};
use kpack_bundle::WalkOptions;
use kpack_format::{Archive, Marker};
use kpack_runtime::{Cache, Config};
use serde::Serialize;

use crate::error::{Error, Result, error_chain};
use crate::link::link_into_view;
use crate::manifest::{MANIFEST, prefix_link, read_manifest};
use crate::prefix::arch_dir_name;
use crate::recombine::{RECORD, parse_artifact_name, read_record};
use kpack_fsafe::Tree;

mod found;
mod text;

pub use found::{holds_artifact, stale_temps_under};

/// One problem found, and how bad it is: the type every checking command
/// shares (`check` is `manifest`, `generic`, `arch`, `archive` or `marker`
/// here; for marker misses the message lists every path searched).
pub use kpack_format::{Finding, Severity};

/// What [`verify`] checked and found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VerifyReport {
    /// Artifacts checked.
    pub artifacts: Vec<String>,
    /// Host binaries with a marker.
    pub binaries: u64,
    /// Archives opened and fully read.
    pub archives: u64,
    /// Marker lookups that resolved (binary × co_index × target).
    pub resolved: u64,
    /// Lookups for processors a generic target covers and no archive has a
    /// target of its own for (binary × co_index × processor), resolved as
    /// CLR asks: the processor first, then the generic target. A generic
    /// archive serves every processor of its generic target.
    pub generic_served: u64,
    /// Problems, sorted.
    pub findings: Vec<Finding>,
}

impl VerifyReport {
    /// Number of error findings.
    pub fn errors(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count()
    }
}

/// (arch, directory, prefixes, archive contents) of an arch artifact.
type ArchArtifact = (String, PathBuf, Vec<String>, ArchInfo);

pub(crate) struct Marked {
    pub(crate) rel: String,
    pub(crate) marker: Marker,
    pub(crate) indices: BTreeSet<u32>,
}

#[derive(Default)]
struct ArchInfo {
    /// key -> targets
    keys: BTreeMap<String, BTreeSet<String>>,
    targets: BTreeSet<String>,
}

/// Verify artifacts. Each of `dirs` is an artifact (has a manifest) or a
/// directory of artifacts (a split output, a shard, a recombined output);
/// a generic artifact and the arch artifacts of the same component in the
/// same directory are flattened together (prefixes stripped) to check
/// marker resolution. Errors are only for I/O on the inputs themselves.
pub fn verify(dirs: &[PathBuf]) -> Result<VerifyReport> {
    let mut rep = VerifyReport::default();
    for d in dirs {
        if verify_archives(d, &mut rep)? {
            continue;
        }
        if is_installed_tree(d) {
            verify_installed(d, &mut rep)?;
            continue;
        }
        // A recombine output says what its artifacts are: groups may have
        // any name (`blas_lib_rdna3`). A single artifact looks beside itself.
        let record_dir = if d.join(MANIFEST).is_file() {
            d.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            d.clone()
        };
        let record = match read_record(&record_dir) {
            Ok(r) => r,
            Err(e) => {
                finding(
                    &mut rep,
                    Severity::Error,
                    "manifest",
                    record_dir.join(RECORD),
                    format!(
                        "unreadable: {}; artifact names read as arches",
                        error_chain(&e)
                    ),
                );
                BTreeMap::new()
            }
        };
        let arts = if d.join(MANIFEST).is_file() {
            vec![d.clone()]
        } else {
            let mut v = Vec::new();
            for e in std::fs::read_dir(d).map_err(|e| Error::io(d, "cannot list", e))? {
                let e = e.map_err(|e| Error::io(d, "cannot list", e))?;
                if e.path().is_dir() && !e.file_name().to_string_lossy().starts_with('.') {
                    v.push(e.path());
                }
            }
            v.sort();
            v
        };
        verify_group(&arts, &record, &mut rep)?;
    }
    rep.findings.sort();
    Ok(rep)
}

/// Artifact archives (`d` itself, or those in the directory `d`, with the
/// artifact directories beside them): unpacked into a temporary directory
/// that is removed afterwards, verified together, and reported under the
/// archives' own paths. False when `d` is no archive and holds none.
fn verify_archives(d: &Path, rep: &mut VerifyReport) -> Result<bool> {
    let tmp = tempfile::Builder::new()
        .prefix(".kpack-verify-")
        .tempdir()
        .map_err(|e| {
            Error::io(
                std::env::temp_dir(),
                "cannot create a temporary directory",
                e,
            )
        })?;
    let unpacked =
        kpack_artifact::unpack_archives(d, tmp.path(), &kpack_artifact::Limits::default())?
            .artifacts;
    if unpacked.is_empty() {
        return Ok(false);
    }
    let record_dir = if d.is_dir() {
        d.to_path_buf()
    } else {
        d.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    let record = read_record(&record_dir).unwrap_or_default();
    let mut arts: Vec<PathBuf> = unpacked.iter().map(|(u, _)| u.clone()).collect();
    if d.is_dir() {
        for e in std::fs::read_dir(d).map_err(|e| Error::io(d, "cannot list", e))? {
            let e = e.map_err(|e| Error::io(d, "cannot list", e))?;
            if e.path().join(MANIFEST).is_file() {
                arts.push(e.path());
            }
        }
    }
    arts.sort();
    let mut part = VerifyReport::default();
    verify_group(&arts, &record, &mut part)?;
    // Name each archive, not its temporary unpacked copy.
    let shown = |p: &str| -> String {
        for (u, a) in &unpacked {
            let u = u.display().to_string();
            if let Some(rest) = p.strip_prefix(&u) {
                return format!("{}{rest}", a.display());
            }
        }
        p.to_string()
    };
    for mut f in part.findings {
        f.path = shown(&f.path);
        f.message = unpacked.iter().fold(f.message, |m, (u, a)| {
            m.replace(&u.display().to_string(), &a.display().to_string())
        });
        rep.findings.push(f);
    }
    rep.artifacts
        .extend(part.artifacts.iter().map(|a| shown(a)));
    rep.binaries += part.binaries;
    rep.archives += part.archives;
    rep.resolved += part.resolved;
    rep.generic_served += part.generic_served;
    Ok(true)
}

/// A directory that is neither an artifact nor holds artifacts: an install
/// prefix or site-packages tree.
pub(crate) fn is_installed_tree(d: &Path) -> bool {
    if d.join(MANIFEST).is_file() {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(d) else {
        return false;
    };
    !entries
        .filter_map(|e| e.ok())
        .any(|e| e.path().join(MANIFEST).is_file())
}

/// Verify an installed tree (host and device parts merged, no manifests):
/// every archive valid, no fat binary left, and every marker's key resolving
/// through the runtime, from the binary's real location, for every target
/// some archive in the tree holds for it. A key that no archive holds is an
/// error (its device package is missing).
fn verify_installed(root: &Path, rep: &mut VerifyReport) -> Result<()> {
    rep.artifacts.push(root.display().to_string());
    let marked = check_host_files(root, &[String::new()], true, rep)?;
    let mut info = ArchInfo::default();
    let mut scanned = BTreeSet::new();
    for (path, rel) in files_of(root) {
        if rel.ends_with(".kpack") {
            scanned.insert(std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone()));
            scan_archive(&path, None, &mut info, rep);
        }
    }
    // A package directory (`site-packages/torch`) has its archives beside
    // it (`site-packages/_torch_kpack/`): follow every marker from the
    // binary's real location, as the runtime does.
    for b in &marked {
        for path in archives_named_by(&b.marker, &root.join(&b.rel)) {
            if scanned.insert(path.clone()) {
                scan_archive(&path, None, &mut info, rep);
            }
        }
    }
    let cache = Cache::new(Config::default());
    for b in &marked {
        let bin = root.join(&b.rel);
        for &k in &b.indices {
            let key = format!("{}#{k}", b.marker.kernel_name);
            let Some(targets) = info.keys.get(&key) else {
                finding(
                    rep,
                    Severity::Error,
                    "marker",
                    &bin,
                    format!(
                        "{key}: no archive in {} holds it (device package missing?)",
                        root.display()
                    ),
                );
                continue;
            };
            for t in targets {
                match cache.load(&b.marker, &bin, k, &[t.as_str()]) {
                    Ok(_) => rep.resolved += 1,
                    Err(e) => finding(
                        rep,
                        Severity::Error,
                        "marker",
                        &bin,
                        format!("{key} for {t} does not resolve: {}", error_chain(&e)),
                    ),
                }
            }
            check_generic_coverage(&cache, b, &bin, &bin, k, targets, rep);
        }
    }
    Ok(())
}

/// Every existing archive a marker's search paths can name, resolved from
/// the binary's real directory (symlinks followed): a path with
/// `@GFXARCH@` in its file name matches every file in that directory with
/// the same text around it. Canonical paths, sorted.
fn archives_named_by(marker: &Marker, bin: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let Some(dir) = std::fs::canonicalize(bin)
        .ok()
        .and_then(|b| b.parent().map(Path::to_path_buf))
    else {
        return out;
    };
    for sp in &marker.search_paths {
        let path = dir.join(sp);
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            continue;
        };
        let Ok(parent) = std::fs::canonicalize(parent) else {
            continue;
        };
        let name = name.to_string_lossy();
        let Some((pre, post)) = name.split_once(kpack_format::GFXARCH) else {
            if let Ok(p) = std::fs::canonicalize(parent.join(&*name))
                && p.is_file()
            {
                out.insert(p);
            }
            continue;
        };
        for e in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
            let file = e.file_name();
            let file = file.to_string_lossy();
            let is_match = file
                .strip_prefix(pre)
                .and_then(|r| r.strip_suffix(post))
                .is_some_and(|t| !t.is_empty());
            if is_match && e.path().is_file() {
                out.insert(e.path());
            }
        }
    }
    out
}

fn finding(
    rep: &mut VerifyReport,
    severity: Severity,
    check: &'static str,
    path: impl AsRef<Path>,
    message: impl Into<String>,
) {
    rep.findings.push(Finding {
        severity,
        check,
        path: path.as_ref().display().to_string(),
        message: message.into(),
    });
}

fn verify_group(
    arts: &[PathBuf],
    record: &BTreeMap<String, (String, Option<String>)>,
    rep: &mut VerifyReport,
) -> Result<()> {
    let (generics, arches) = read_group(arts, record, rep)?;
    for (c, generic) in &generics {
        let Some(list) = arches.get(c) else {
            let (gdir, _, marked) = generic;
            if !marked.is_empty() {
                finding(
                    rep,
                    Severity::Error,
                    "marker",
                    gdir,
                    format!(
                        "{} binaries carry markers but no arch artifact of {c} is here",
                        marked.len()
                    ),
                );
            }
            continue;
        };
        check_component(c, generic, list, rep)?;
    }
    for (c, list) in &arches {
        if !generics.contains_key(c) {
            for (_, adir, _, _) in list {
                finding(
                    rep,
                    Severity::Warning,
                    "marker",
                    adir,
                    format!("no generic artifact of {c} next to it; markers not checked"),
                );
            }
        }
    }
    Ok(())
}

/// A generic artifact: its directory, prefixes and marked binaries.
type GenericArtifact = (PathBuf, Vec<String>, Vec<Marked>);

/// The artifacts of a group by component: generic ones and arch ones.
type ByComponent = (
    BTreeMap<String, GenericArtifact>,
    BTreeMap<String, Vec<ArchArtifact>>,
);

/// Check each artifact of `arts` on its own, by kind: component →
/// its generic artifact, component → its arch artifacts.
fn read_group(
    arts: &[PathBuf],
    record: &BTreeMap<String, (String, Option<String>)>,
    rep: &mut VerifyReport,
) -> Result<ByComponent> {
    let mut generics: BTreeMap<String, GenericArtifact> = BTreeMap::new();
    let mut arches: BTreeMap<String, Vec<ArchArtifact>> = BTreeMap::new();
    for a in arts {
        let name = a
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        rep.artifacts.push(a.display().to_string());
        let Some(prefixes) = artifact_prefixes(a, rep) else {
            continue;
        };
        let parsed = record
            .get(&name)
            .cloned()
            .or_else(|| parse_artifact_name(&name));
        match parsed {
            Some((c, None)) => {
                let marked = check_host_files(a, &prefixes, false, rep)?;
                generics.insert(c, (a.clone(), prefixes, marked));
            }
            Some((c, Some(arch))) => {
                let info = check_arch(a, &arch, &prefixes, rep)?;
                arches
                    .entry(c)
                    .or_default()
                    .push((arch, a.clone(), prefixes, info));
            }
            None => finding(
                rep,
                Severity::Warning,
                "manifest",
                a,
                "name is neither <component>_generic nor <component>_gfx…; not checked further",
            ),
        }
    }
    Ok((generics, arches))
}

/// The prefixes of artifact `a` that are directories of its own (`None`
/// when its manifest is unreadable); listed prefixes that do not exist
/// are findings.
fn artifact_prefixes(a: &Path, rep: &mut VerifyReport) -> Option<Vec<String>> {
    let prefixes = match read_manifest(a) {
        // What lies behind a link is not read (split keeps links as
        // links; the target may be outside the artifact).
        Ok(p) => p
            .into_iter()
            .filter(|p| prefix_link(a, p).is_none())
            .collect::<Vec<_>>(),
        Err(e) => {
            finding(rep, Severity::Error, "manifest", a, error_chain(&e));
            return None;
        }
    };
    for p in &prefixes {
        if !a.join(p).is_dir() {
            finding(
                rep,
                Severity::Error,
                "manifest",
                a.join(MANIFEST),
                format!("prefix {p} does not exist"),
            );
        }
    }
    Some(prefixes)
}

/// Component `c`'s markers against each of its arch artifacts `list`.
fn check_component(
    c: &str,
    (gdir, gprefixes, marked): &GenericArtifact,
    list: &[ArchArtifact],
    rep: &mut VerifyReport,
) -> Result<()> {
    for (arch, adir, aprefixes, info) in list {
        check_resolution(gdir, gprefixes, marked, arch, adir, aprefixes, info, rep)?;
    }
    // Every binary's own targets are the ones some arch artifact holds
    // for it; a binary that none holds lost all its device code.
    for b in marked {
        for &k in &b.indices {
            let key = format!("{}#{k}", b.marker.kernel_name);
            if !list
                .iter()
                .any(|(_, _, _, info)| info.keys.contains_key(&key))
            {
                let names: Vec<String> = list
                    .iter()
                    .map(|(_, adir, _, _)| adir.display().to_string())
                    .collect();
                finding(
                    rep,
                    Severity::Error,
                    "marker",
                    gdir.join(&b.rel),
                    format!(
                        "{key}: no arch artifact of {c} holds code for it (looked in {})",
                        names.join(", ")
                    ),
                );
            }
        }
    }
    Ok(())
}

pub(crate) fn files_of(root: &Path) -> Vec<(PathBuf, String)> {
    walkdir::WalkDir::new(root)
        .sort_by_file_name()
        .follow_links(false)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e
                .path()
                .strip_prefix(root)
                .unwrap_or(e.path())
                .to_string_lossy()
                .replace('\\', "/");
            (e.path().to_path_buf(), rel)
        })
        .collect()
}

/// What the file at `path` is (an unreadable file is nothing).
pub(crate) fn kind(path: &Path) -> FileKind {
    FileKind::of_path(path).unwrap_or(FileKind::Other)
}

/// Host binaries with markers under `a`'s prefixes; fat binaries left
/// behind are errors, and so are archives unless `archives_allowed`.
pub(crate) fn check_host_files(
    a: &Path,
    prefixes: &[String],
    archives_allowed: bool,
    rep: &mut VerifyReport,
) -> Result<Vec<Marked>> {
    let mut marked = Vec::new();
    for p in prefixes {
        for (path, rel) in files_of(&a.join(p)) {
            if rel.ends_with(".kpack") {
                if !archives_allowed {
                    generic_finding(rep, Severity::Error, &path, "archive in a generic artifact");
                }
                continue;
            }
            if let Some(m) = check_host_file(&path, rel, rep) {
                marked.push(m);
                rep.binaries += 1;
            }
        }
    }
    Ok(marked)
}

/// One file of a generic artifact: device code left in it is a finding;
/// an offloaded host binary gives its marker.
fn check_host_file(path: &Path, rel: String, rep: &mut VerifyReport) -> Option<Marked> {
    let kind = kind(path);
    if matches!(kind, FileKind::Bundle | FileKind::Ccob) {
        generic_finding(
            rep,
            Severity::Warning,
            path,
            "bundle file with device code in a generic artifact",
        );
        return None;
    }
    if !kind.is_host_binary() {
        return None;
    }
    let bin = match HostBinary::read(path, WalkOptions { verify_hash: false }) {
        Ok(b) => b,
        Err(e) if e.is_unsupported() => return None,
        Err(e) => {
            generic_finding(
                rep,
                Severity::Error,
                path,
                format!("unreadable host binary: {}", error_chain(&e)),
            );
            return None;
        }
    };
    if bin.is_link_input() && !bin.bundles().is_empty() {
        generic_finding(
            rep,
            Severity::Warning,
            path,
            "relocatable object with device code",
        );
        return None;
    }
    if bin.has_pending_wrappers() || (!bin.bundles().is_empty() && !bin.is_transformed()) {
        generic_finding(
            rep,
            Severity::Error,
            path,
            "fat binary left in a generic artifact (device code not offloaded)",
        );
        return None;
    }
    marked_binary(&bin, path, rel, rep)
}

/// The marker of offloaded host binary `bin`; a missing, unreadable or
/// invalid one is a finding.
fn marked_binary(
    bin: &HostBinary,
    path: &Path,
    rel: String,
    rep: &mut VerifyReport,
) -> Option<Marked> {
    let marker = bin.read_marker().filter(|_| bin.is_transformed());
    let Some(bytes) = marker else {
        if bin.is_transformed() {
            generic_finding(
                rep,
                Severity::Error,
                path,
                format!("HIPK wrappers but no {} marker", bin.marker_section()),
            );
        }
        return None;
    };
    let Ok(bytes) = bytes else {
        generic_finding(rep, Severity::Error, path, "cannot read the marker");
        return None;
    };
    match Marker::parse(&bytes) {
        Ok(marker) => Some(Marked {
            rel,
            marker,
            indices: bin.wrapper_indices().into_iter().collect(),
        }),
        Err(e) => {
            generic_finding(
                rep,
                Severity::Error,
                path,
                format!("invalid marker: {}", error_chain(&e)),
            );
            None
        }
    }
}

/// A finding of the `generic` check.
fn generic_finding(
    rep: &mut VerifyReport,
    severity: Severity,
    path: &Path,
    message: impl Into<String>,
) {
    finding(rep, severity, "generic", path, message);
}

/// Whether `arch` names one processor (`gfx90a`, `gfx11-generic`,
/// `gfx1250-strict`), not a group (`gfx90X`, `gfx110X-dgpu`).
fn is_processor_name(arch: &str) -> bool {
    if kpack_amdgpu::is_generic(arch) {
        return true;
    }
    let id = kpack_amdgpu::TargetId::bare(arch);
    id.base_processor().strip_prefix("gfx").is_some_and(|r| {
        !r.is_empty()
            && r.bytes()
                .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
    })
}

fn check_arch(
    a: &Path,
    arch: &str,
    prefixes: &[String],
    rep: &mut VerifyReport,
) -> Result<ArchInfo> {
    // An `--archive-group` tree (`blas_lib_gfx110x`) holds its members'
    // archives: every target must be a member; its file names are not
    // checked token by token.
    let group = kpack_amdgpu::archive_group_level(arch).is_some();
    let exact = !group && is_processor_name(arch);
    let mut info = ArchInfo::default();
    for p in prefixes {
        for (path, rel) in files_of(&a.join(p)) {
            if rel.ends_with(".kpack") {
                scan_archive(&path, (exact || group).then_some(arch), &mut info, rep);
                continue;
            }
            if kind(&path).is_host_binary() {
                finding(
                    rep,
                    Severity::Error,
                    "arch",
                    &path,
                    "host binary in an arch artifact",
                );
                continue;
            }
            if exact {
                for t in kpack_amdgpu::gfx_tokens(&rel) {
                    // MIOpen glues the CU count to the arch (gfx90878 = gfx908, 78 CUs).
                    let ok = t == arch
                        || t.strip_prefix(arch)
                            .is_some_and(|r| r.bytes().all(|c| c.is_ascii_digit()));
                    if !ok {
                        finding(
                            rep,
                            Severity::Error,
                            "arch",
                            &path,
                            format!("names {t} in the {arch} artifact"),
                        );
                    }
                }
            }
        }
    }
    Ok(info)
}

/// Open and fully read one archive into `info`; with `only`, every target
/// must belong to that processor or archive group.
fn scan_archive(path: &Path, only: Option<&str>, info: &mut ArchInfo, rep: &mut VerifyReport) {
    let archive = match Archive::open(path) {
        Ok(x) => x,
        Err(e) => {
            finding(rep, Severity::Error, "archive", path, error_chain(&e));
            return;
        }
    };
    rep.archives += 1;
    if let Some(arch) = only {
        for t in archive.arches() {
            if arch_dir_name(t) != arch && !kpack_amdgpu::archive_group_holds(arch, t) {
                finding(
                    rep,
                    Severity::Error,
                    "arch",
                    path,
                    format!("holds {t} code in the {arch} artifact"),
                );
            }
        }
    }
    // The archive rules are kpack-format's, the same `kpack archive verify`
    // applies; entries that do not decode are left out of `info`.
    let archive_findings = archive.verify();
    let undecodable: BTreeSet<(&str, &str)> = archive_findings
        .iter()
        .filter_map(|f| match f {
            kpack_format::ArchiveProblem::Entry { key, arch, .. } => {
                Some((key.as_str(), arch.as_str()))
            }
            _ => None,
        })
        .collect();
    for f in &archive_findings {
        rep.findings
            .push(f.finding().in_file(path.display().to_string()));
    }
    for e in archive.entries() {
        if undecodable.contains(&(e.key(), e.arch())) {
            continue;
        }
        info.keys
            .entry(e.key().to_string())
            .or_default()
            .insert(e.arch().to_string());
        info.targets.insert(e.arch().to_string());
    }
}

#[allow(
    clippy::too_many_arguments,
    reason = "one call site; a struct would only rename them"
)]
fn check_resolution(
    gdir: &Path,
    gprefixes: &[String],
    marked: &[Marked],
    arch: &str,
    adir: &Path,
    aprefixes: &[String],
    info: &ArchInfo,
    rep: &mut VerifyReport,
) -> Result<()> {
    let mut view = FlatInstall::new("kpack-verify-")?;
    for (root, prefixes) in [(gdir, gprefixes), (adir, aprefixes)] {
        for p in prefixes {
            for (path, first) in view.add(&root.join(p))? {
                finding(
                    rep,
                    Severity::Error,
                    "marker",
                    &path,
                    format!("collides with {} in the flattened install", first.display()),
                );
            }
        }
    }
    // An arch artifact need not hold every binary (a binary built for
    // gfx1030 only has nothing in the gfx90a artifact): check that what it
    // holds for each binary resolves; that each binary is held somewhere is
    // checked across all arch artifacts in `verify_group`.
    let cache = Cache::new(Config::default());
    for b in marked {
        let bin = view.path().join(&b.rel);
        let shown = gdir.join(&b.rel);
        for &k in &b.indices {
            let key = format!("{}#{k}", b.marker.kernel_name);
            let have = info.keys.get(&key);
            if let Some(targets) = have {
                check_generic_coverage(&cache, b, &bin, &shown, k, targets, rep);
            }
            for t in have.into_iter().flatten() {
                match cache.load(&b.marker, &bin, k, &[t.as_str()]) {
                    Ok(_) => rep.resolved += 1,
                    Err(e) => finding(
                        rep,
                        Severity::Error,
                        "marker",
                        &shown,
                        format!(
                            "{key} for {t} does not resolve with {} ({arch}): {}",
                            adir.display(),
                            error_chain(&e)
                        ),
                    ),
                }
            }
        }
    }
    Ok(())
}

/// A flattened install assembled from artifacts' prefixes, as installing
/// them gives (the one builder: `kpack verify` and `kpack verify --gpu`):
/// real directories, each file a symlink to the artifact's file. The first
/// file at a path is placed; a later one collides and is not placed.
pub(crate) struct FlatInstall {
    dir: tempfile::TempDir,
    placed: BTreeMap<String, PathBuf>,
}

impl FlatInstall {
    /// An empty install in a new temporary directory named `prefix…`.
    pub(crate) fn new(prefix: &str) -> Result<FlatInstall> {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .map_err(|e| Error::io(std::env::temp_dir(), "cannot create", e))?;
        Ok(FlatInstall {
            dir,
            placed: BTreeMap::new(),
        })
    }

    /// The install's root.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Place every file under `prefix` (an artifact's prefix directory);
    /// returns the collisions, each as (the file not placed, the file
    /// placed first at its path), in walk order.
    pub(crate) fn add(&mut self, prefix: &Path) -> Result<Vec<(PathBuf, PathBuf)>> {
        let mut collisions = Vec::new();
        let root = self.dir.path();
        let view = Tree::open(root).map_err(|e| Error::io(root, "cannot open", e))?;
        for (path, rel) in files_of(prefix) {
            if let Some(first) = self.placed.get(&rel) {
                collisions.push((path, first.clone()));
                continue;
            }
            let to = Path::new(&rel);
            if let Some(d) = to.parent() {
                view.create_dir_all(d)
                    .map_err(|e| Error::io(root.join(d), "cannot create", e))?;
            }
            link_into_view(&path, &view, to)?;
            self.placed.insert(rel, path);
        }
        Ok(collisions)
    }
}

/// Every processor whose HIP runtime asks for a generic target in
/// `targets` ([`kpack_runtime::CLR_GENERIC_MAP`], not LLVM's longer
/// table: the runtime never asks for the rest), with the generic target's
/// features: `(device, generic target)`, leaving out processors that some
/// target in `targets` names itself (the runtime picks those first, and
/// they are checked as they are).
fn generic_fallbacks(targets: &BTreeSet<String>) -> Vec<(String, String)> {
    let own: BTreeSet<&str> = targets
        .iter()
        .map(|t| kpack_amdgpu::processor_of(t))
        .collect();
    let mut out = Vec::new();
    for t in targets {
        let Ok(id) = kpack_amdgpu::TargetId::parse(t) else {
            continue;
        };
        let asking = kpack_runtime::runtime_devices_of(id.processor());
        for p in asking.iter().filter(|p| !own.contains(**p)) {
            let device = kpack_amdgpu::TargetId::new(*p, id.features().to_vec());
            out.push((device.to_string(), t.clone()));
        }
    }
    out
}

/// Resolve a marker's key for each processor a generic archive serves
/// (see [`generic_fallbacks`]) with the arch list CLR passes: the device's
/// own target, then its generic fallback.
fn check_generic_coverage(
    cache: &Cache,
    b: &Marked,
    bin: &Path,
    shown: &Path,
    k: u32,
    targets: &BTreeSet<String>,
    rep: &mut VerifyReport,
) {
    for (device, generic) in generic_fallbacks(targets) {
        match cache.load(&b.marker, bin, k, &[device.as_str(), generic.as_str()]) {
            Ok(_) => rep.generic_served += 1,
            Err(e) => finding(
                rep,
                Severity::Error,
                "marker",
                shown,
                format!(
                    "{}#{k} for a {device} device (fallback {generic}) does not resolve: {}",
                    b.marker.kernel_name,
                    error_chain(&e)
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_are_not_processors() {
        assert!(is_processor_name("gfx90a"));
        assert!(!is_processor_name("gfx90X"));
        assert!(!is_processor_name("gfx110X-dgpu"));
        assert!(is_processor_name("gfx11-generic"));
        assert!(is_processor_name("gfx1250-strict"));
        assert!(!is_processor_name("gfx11-dgpu"));
    }

    #[test]
    fn a_generic_target_serves_the_processors_it_covers() {
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let f = generic_fallbacks(&set(&["gfx12-generic", "gfx1201"]));
        assert_eq!(f, [("gfx1200".to_string(), "gfx12-generic".to_string())]);
        let f = generic_fallbacks(&set(&["gfx9-generic:xnack-"]));
        assert_eq!(f.len(), 6);
        assert_eq!(f[0], ("gfx900:xnack-".into(), "gfx9-generic:xnack-".into()));
        assert!(generic_fallbacks(&set(&["gfx1100", "gfx1250-strict"])).is_empty());
        // Only the processors whose runtime asks: not gfx940/941 (LLVM's
        // table has them), not gfx1251, nothing for gfx11-7-generic.
        let f = generic_fallbacks(&set(&["gfx9-4-generic"]));
        assert_eq!(
            f.iter().map(|(d, _)| d.as_str()).collect::<Vec<_>>(),
            ["gfx942", "gfx950"]
        );
        let f = generic_fallbacks(&set(&["gfx12-5-generic"]));
        assert_eq!(f, [("gfx1250".to_string(), "gfx12-5-generic".to_string())]);
        assert!(generic_fallbacks(&set(&["gfx11-7-generic"])).is_empty());
    }
}
