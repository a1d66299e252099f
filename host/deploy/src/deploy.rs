//! `deploy`: plan what goes into the directory, then stage and commit it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kpack_binary::HostBinary;
use kpack_format::Marker;
use kpack_fsafe::{Order, Tree};
use kpack_job::Job;
use kpack_runtime::{Cache, Config, compatible_targets, gpu_arch_list};
use serde::Serialize;

use crate::closure::{self, Excludes, SearchDirs};
use crate::error::{Error, Result};
use crate::manifest::{FileRecord, LeftOutRecord, Manifest};
use crate::plan::{Item, Plan};

/// What to deploy and how.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Executables, shared libraries, or directories of them: ELF files,
    /// or Windows PE images (`.exe`, DLLs; all of one system).
    pub apps: Vec<PathBuf>,
    /// The GPUs (target ids) the directory is for.
    pub gpus: Vec<String>,
    /// Directories searched for needed libraries after each object's own
    /// RUNPATH/RPATH.
    pub library_path: Vec<PathBuf>,
    /// Install prefixes: their `lib` and `lib64` are searched (Windows
    /// images: their `bin`).
    pub rocm_path: Vec<PathBuf>,
    /// Libraries loaded by name at run time (`dlopen`), deployed too.
    pub also: Vec<String>,
    /// Globs of library names left out, beside the default list.
    pub exclude: Vec<String>,
    /// Prune fat libraries to the listed GPUs (else they stay fat).
    pub prune: bool,
    /// Offload fat libraries in the copy: their listed GPUs' code goes
    /// into `.kpack` archives beside them, loaded through the kpack
    /// runtime (which comes along).
    pub offload: bool,
    /// Database directories to deploy (e.g. `<rocm>/lib/rocblas/library`),
    /// beside those found next to the closure's libraries
    /// ([`AUTO_DIRS`](crate::AUTO_DIRS)).
    pub databases: Vec<PathBuf>,
    /// Do not search the system's library directories.
    pub no_system_dirs: bool,
}

/// What [`deploy`] wrote.
#[derive(Debug, Clone, Serialize)]
pub struct Deployed {
    /// The directory.
    pub dir: PathBuf,
    /// The record written as `kpack-deploy.json`.
    pub manifest: Manifest,
}

/// What a binary of the closure carries.
enum Device {
    None,
    Offloaded { marker: Marker, indices: Vec<u32> },
    Fat { targets: Vec<String> },
}

/// Copy `options.apps` and what they need into `out`, with only the
/// archives `options.gpus` load; record it in `kpack-deploy.json`.
/// Database files are copied whole (no handlers classify them): see
/// [`deploy_with`]. Pruning and offloading inflate bundles under the
/// job's memory budget; an existing `out` follows the job's rule.
pub fn deploy(job: &Job, options: &Options, out: &Path) -> Result<Deployed> {
    deploy_with(job, options, out, None)
}

/// [`deploy`], with database files classified by the handlers `load`
/// returns (called once, only when there are database files).
pub fn deploy_with(
    job: &Job,
    options: &Options,
    out: &Path,
    load: Option<crate::databases::LoadDatabases<'_>>,
) -> Result<Deployed> {
    let excludes = Excludes::new(&options.exclude)?;
    let roots = roots(&options.apps)?;
    let windows = is_windows(&roots)?;
    let search = search_dirs(options, windows);
    let root_names: Vec<(String, PathBuf)> = roots
        .iter()
        .map(|(n, p, _)| (n.clone(), p.clone()))
        .collect();
    let closure = closure::resolve(&root_names, &options.also, &search, &excludes)?;
    let mut plan = Plan::default();
    // (name, path as found, directory in the output, kind, needed by)
    // Windows: everything side by side (the loader looks beside the exe).
    let (bin, lib) = if windows { ("", "") } else { ("bin", "lib") };
    let mut binaries: Vec<(String, PathBuf, &'static str, &'static str, Vec<String>)> = roots
        .iter()
        .map(|(n, p, exe)| {
            let (dir, kind) = if *exe {
                (bin, "executable")
            } else {
                (lib, "library")
            };
            (n.clone(), p.clone(), dir, kind, vec!["given".to_owned()])
        })
        .collect();
    for (n, l) in &closure.libraries {
        binaries.push((
            n.clone(),
            l.path.clone(),
            lib,
            "library",
            l.needed_by.clone(),
        ));
    }
    for (name, l) in &closure.left_out {
        plan.left_out.push(LeftOutRecord {
            name: name.clone(),
            needed_by: l.needed_by.clone(),
            reason: l.reason.clone(),
        });
    }
    let devices: Vec<Device> = binaries.iter().map(|b| device_of(&b.1)).collect();
    let needs_runtime = binaries.iter().zip(&devices).find(|(_, d)| match d {
        Device::Offloaded { .. } => true,
        Device::Fat { .. } => options.offload,
        Device::None => false,
    });
    let has_runtime = binaries.iter().any(|b| is_runtime(&b.0, windows));
    if let Some((first, _)) = needs_runtime.filter(|_| !has_runtime) {
        let first = first.1.clone();
        add_runtime(&mut binaries, &first, &search.extra, windows)?;
    }
    let served = place_all(&mut plan, &binaries, &devices, options)?;
    if let Some((gpu, _)) = served.iter().find(|(_, s)| !**s) {
        return Err(Error::NoCode {
            gpu: gpu.clone(),
            arch_list: gpu_arch_list(gpu).join(", "),
        });
    }
    let lib_dirs: BTreeSet<PathBuf> = binaries
        .iter()
        .filter(|b| b.3 != "executable")
        .filter_map(|b| b.1.parent().map(Path::to_path_buf))
        .collect();
    let lib_dirs: Vec<PathBuf> = lib_dirs.into_iter().collect();
    let dirs = crate::databases::dirs(&options.databases, &lib_dirs, &options.rocm_path)?;
    crate::databases::place_all(&mut plan, &dirs, &options.gpus, load)?;
    write(job, plan, options, out)
}

/// Where needed libraries are searched beside each object's own: the
/// `--library-path` directories, then each `--rocm-path`'s `lib` and
/// `lib64` (Windows: `bin`, where its DLLs are), then the system's (never
/// for Windows images: system DLLs are left out by name).
fn search_dirs(options: &Options, windows: bool) -> SearchDirs {
    let mut extra = options.library_path.clone();
    for p in &options.rocm_path {
        if windows {
            extra.push(p.join("bin"));
        } else {
            // A prefix laid out by Debian or Ubuntu packages keeps its
            // libraries in the multiarch directory.
            extra.extend(
                [
                    "lib",
                    "lib64",
                    "lib/x86_64-linux-gnu",
                    "lib/aarch64-linux-gnu",
                ]
                .map(|d| p.join(d)),
            );
        }
    }
    SearchDirs {
        extra,
        system: !options.no_system_dirs && !windows,
    }
}

/// A binary of the closure: (name, path as found, directory in the
/// output, kind, needed by).
type Binary = (String, PathBuf, &'static str, &'static str, Vec<String>);

/// Plan every binary and its archives; says which GPUs some input has
/// code for.
fn place_all(
    plan: &mut Plan,
    binaries: &[Binary],
    devices: &[Device],
    options: &Options,
) -> Result<BTreeMap<String, bool>> {
    let mut served: BTreeMap<String, bool> =
        options.gpus.iter().map(|g| (g.clone(), false)).collect();
    let cache = Cache::new(Config::default());
    for (i, (name, path, dir, kind, needed_by)) in binaries.iter().enumerate() {
        plan.fat_bytes += size_of(path);
        let device = devices.get(i).unwrap_or(&Device::None);
        let rel = place_binary(plan, name, path, dir, kind, needed_by)?;
        match device {
            Device::None => {}
            Device::Offloaded { marker, indices } => {
                place_archives(
                    plan,
                    &cache,
                    name,
                    path,
                    dir,
                    marker,
                    indices,
                    options,
                    &mut served,
                )?;
            }
            Device::Fat { targets } => {
                let keep = fat_serves(targets, &options.gpus, &mut served);
                if let Some(item) = plan.items.get_mut(&rel) {
                    item.serves.extend(keep.iter().map(|(g, _)| g.clone()));
                    if options.offload && !keep.is_empty() {
                        item.offload = Some(keep);
                    } else if options.prune && !keep.is_empty() {
                        let mut t: Vec<String> = keep.into_iter().map(|(_, t)| t).collect();
                        t.sort();
                        t.dedup();
                        item.keep = Some(t);
                    }
                }
            }
        }
    }
    Ok(served)
}

/// The inputs as (name, path, is an executable), directories walked in
/// name order.
fn roots(apps: &[PathBuf]) -> Result<Vec<(String, PathBuf, bool)>> {
    let mut out = Vec::new();
    for app in apps {
        let files: Vec<PathBuf> = if app.is_dir() {
            walkdir::WalkDir::new(app)
                .sort_by_file_name()
                .into_iter()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_file())
                .map(|e| e.into_path())
                .collect()
        } else {
            vec![app.clone()]
        };
        for f in files {
            let executable = match crate::elf::read(&f)? {
                Some(info) => Some(info.executable),
                None => crate::pe::read(&f)?.map(|i| i.executable),
            };
            let Some(executable) = executable else {
                if app.is_dir() {
                    continue;
                }
                return Err(Error::NotAnApp { path: f });
            };
            let name = f
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push((name, f, executable));
        }
    }
    Ok(out)
}

/// Whether the inputs are Windows PE images (all of them: one deploy is
/// for one system).
fn is_windows(roots: &[(String, PathBuf, bool)]) -> Result<bool> {
    let mut kinds = roots.iter().map(|(_, p, _)| (crate::pe::is_pe(p), p));
    let Some((first, _)) = kinds.next() else {
        return Ok(false);
    };
    match kinds.find(|(pe, _)| *pe != first) {
        Some((_, p)) => Err(Error::Mixed { path: p.clone() }),
        None => Ok(first),
    }
}

/// The kpack runtime's names: `librocm_kpack.so*`, or `rocm_kpack.dll`
/// (any case) on Windows.
fn is_runtime(name: &str, windows: bool) -> bool {
    if windows {
        name.eq_ignore_ascii_case("rocm_kpack.dll")
    } else {
        name.starts_with("librocm_kpack.so")
    }
}

fn device_of(path: &Path) -> Device {
    let Ok(bin) = HostBinary::read(path, Default::default()) else {
        return Device::None;
    };
    if bin.is_link_input() {
        return Device::None;
    }
    if bin.is_transformed() {
        let marker = bin
            .read_marker()
            .and_then(|r| r.ok())
            .and_then(|b| Marker::parse(&b).ok());
        return match marker {
            Some(marker) => Device::Offloaded {
                marker,
                indices: bin.wrapper_indices(),
            },
            None => Device::None,
        };
    }
    if bin.bundles().is_empty() {
        return Device::None;
    }
    Device::Fat {
        targets: bin.targets(),
    }
}

/// The kpack runtime (`librocm_kpack.so*`), from beside the first
/// offloaded binary or the extra directories, under every name found.
fn add_runtime(
    binaries: &mut Vec<(String, PathBuf, &'static str, &'static str, Vec<String>)>,
    beside: &Path,
    extra: &[PathBuf],
    windows: bool,
) -> Result<()> {
    let dirs = beside
        .parent()
        .map(Path::to_path_buf)
        .into_iter()
        .chain(extra.iter().cloned());
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| is_runtime(n, windows))
            .collect();
        if names.is_empty() {
            continue;
        }
        names.sort();
        for n in names {
            if binaries.iter().any(|b| b.0 == n) {
                continue;
            }
            let path = d.join(&n);
            binaries.push((
                n,
                path,
                if windows { "" } else { "lib" },
                "runtime",
                vec!["the kpack runtime".to_owned()],
            ));
        }
        return Ok(());
    }
    Err(Error::NoRuntime {
        beside: beside.to_path_buf(),
    })
}

/// Plan the binary's copy (its real file under its real name, a link for
/// the name it is needed by); returns the real file's output path.
fn place_binary(
    plan: &mut Plan,
    name: &str,
    path: &Path,
    dir: &str,
    kind: &'static str,
    needed_by: &[String],
) -> Result<String> {
    let real = std::fs::canonicalize(path).map_err(|e| Error::io(path, "cannot resolve", e))?;
    let real_name = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| name.to_owned());
    // Windows (`dir` empty): every file side by side under the name it is
    // imported by, no link, no RUNPATH. Else an executable keeps the name
    // it was given.
    let windows = dir.is_empty();
    let file_name = if dir == "bin" || windows {
        name
    } else {
        &real_name
    };
    let rel = if windows {
        file_name.to_owned()
    } else {
        format!("{dir}/{file_name}")
    };
    let mut item = Item::new(rel.clone(), real, kind);
    item.runpath = match dir {
        "" => None,
        "bin" => Some("$ORIGIN/../lib"),
        _ => Some("$ORIGIN"),
    };
    let it = plan.add(item)?;
    for n in needed_by {
        if !it.needed_by.contains(n) {
            it.needed_by.push(n.clone());
        }
    }
    if file_name != name {
        let mut link = Item::new(format!("{dir}/{name}"), path.to_path_buf(), "symlink");
        link.link = Some(file_name.to_owned());
        link.needed_by = needed_by.to_vec();
        plan.add(link)?;
    }
    Ok(rel)
}

/// For each listed GPU, the archive each code object of an offloaded
/// binary loads from, placed at the same path relative to the copy.
#[allow(clippy::too_many_arguments, reason = "one call site; the plan's parts")]
fn place_archives(
    plan: &mut Plan,
    cache: &Cache,
    name: &str,
    path: &Path,
    dir: &str,
    marker: &Marker,
    indices: &[u32],
    options: &Options,
    served: &mut BTreeMap<String, bool>,
) -> Result<()> {
    let src_dir = path.parent().unwrap_or(Path::new("."));
    let mut used = BTreeSet::new();
    for gpu in &options.gpus {
        let arch_list = gpu_arch_list(gpu);
        let arches: Vec<&str> = arch_list.iter().map(String::as_str).collect();
        for &k in indices {
            let Ok(loc) = cache.locate(marker, path, k, &arches) else {
                continue;
            };
            served.insert(gpu.clone(), true);
            let rel = archive_rel(src_dir, &loc.archive, dir).ok_or_else(|| Error::Escapes {
                binary: path.to_path_buf(),
                archive: loc.archive.clone(),
            })?;
            used.insert(normal(&loc.archive));
            let it = plan.add(Item::new(rel, loc.archive.clone(), "archive"))?;
            it.serves.insert(gpu.clone());
            if !it.needed_by.iter().any(|n| n == name) {
                it.needed_by.push(name.to_owned());
            }
        }
    }
    for a in cache.marker_archives(marker, path) {
        let Ok(ar) = &a.archive else { continue };
        if used.insert(normal(&a.path)) {
            plan.fat_bytes += size_of(&a.path);
            plan.left_out.push(LeftOutRecord {
                name: a
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                needed_by: vec![name.to_owned()],
                reason: format!(
                    "an archive for {} only: no listed GPU loads from it",
                    ar.arches().join(", ")
                ),
            });
        } else {
            plan.fat_bytes += size_of(&a.path);
        }
    }
    Ok(())
}

fn normal(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| kpack_fsafe::normalize(p))
}

/// `archive`'s path in the output: where it is relative to the binary's
/// directory, from the binary's output directory; `None` when that leaves
/// the output.
fn archive_rel(src_dir: &Path, archive: &Path, dir: &str) -> Option<String> {
    let rel = kpack_fsafe::relative_path(src_dir, archive);
    let dest = kpack_fsafe::normalize(&Path::new(dir).join(&rel));
    let escapes = Path::new(dir)
        .join(&rel)
        .components()
        .scan(0i64, |depth, c| {
            *depth += match c {
                std::path::Component::ParentDir => -1,
                std::path::Component::Normal(_) => 1,
                _ => 0,
            };
            Some(*depth)
        })
        .any(|d| d < 0);
    if escapes || dest.is_absolute() || dest.as_os_str().is_empty() {
        return None;
    }
    let parts: Vec<String> = dest
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    Some(parts.join("/"))
}

/// For each listed GPU a fat binary serves, the embedded target the HIP
/// runtime would pick (the arch list's names, most specific first).
fn fat_serves(
    targets: &[String],
    gpus: &[String],
    served: &mut BTreeMap<String, bool>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for g in gpus {
        let pick = gpu_arch_list(g)
            .iter()
            .flat_map(|a| compatible_targets(a))
            .find(|t| targets.contains(t));
        if let Some(t) = pick {
            served.insert(g.clone(), true);
            out.push((g.clone(), t));
        }
    }
    out
}

fn size_of(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// Stage every planned item under one output (the directory, replaced
/// whole under the job's `--force` rule) and commit.
fn write(job: &Job, plan: Plan, options: &Options, out: &Path) -> Result<Deployed> {
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir_name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| Error::NotAnApp {
            path: out.to_path_buf(),
        })?;
    let mut outputs = job.outputs(parent, "deploy")?;
    let staged_root = outputs.plan(&dir_name, Order::Last)?;
    outputs.check_existing()?;
    // Every item is written from the staged directory down, never through
    // a symlink in it.
    let tree = Tree::open(&outputs.tree())
        .and_then(|t| t.create_dir_all(Path::new(&dir_name)))
        .and_then(|()| Tree::open(&staged_root))
        .map_err(|e| Error::io(&staged_root, "cannot create", e))?;
    let mut files = Vec::new();
    for item in plan.items.values() {
        files.extend(stage(item, &tree, job.budget())?);
    }
    let manifest = Manifest::new(&options.gpus, files, plan.left_out, plan.fat_bytes);
    let json = serde_json::to_vec_pretty(&manifest).unwrap_or_default();
    let mpath = staged_root.join(crate::manifest::MANIFEST);
    let bytes = [json, b"\n".to_vec()].concat();
    kpack_fsafe::write_atomically(&mpath, "deploy", &bytes, None)?;
    outputs.commit()?;
    Ok(Deployed {
        dir: out.to_path_buf(),
        manifest,
    })
}

/// Stage one item in `tree` and say what was written (an offloaded copy:
/// with its archives).
fn stage(item: &Item, tree: &Tree, budget: &kpack_bundle::MemoryBudget) -> Result<Vec<FileRecord>> {
    let rel = Path::new(&item.rel);
    let dest = tree.path().join(rel);
    if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
        tree.create_dir_all(parent)
            .map_err(|e| Error::io(&tree.path().join(parent), "cannot create", e))?;
    }
    let mut pruned = None;
    let mut archives = Vec::new();
    if let Some(pairs) = &item.offload {
        archives = offload_copy(item, pairs, &dest, budget)?;
    } else if let Some(target) = &item.link {
        tree.symlink(Path::new(target), rel)
            .map_err(|e| Error::io(&dest, "cannot link", e))?;
    } else if let Some(keep) = &item.keep {
        let prunable = kpack_prune::open(&item.source, Default::default())?;
        match prunable {
            Some(p) => {
                let list = kpack_prune::KeepList::parse(keep)?;
                p.write(&dest, list.filter(), budget)?;
                pruned = Some(keep.clone());
            }
            None => copy(&item.source, tree, rel)?,
        }
    } else {
        copy(&item.source, tree, rel)?;
    }
    if let Some(rp) = item.runpath {
        crate::elf::set_runpath(&dest, rp)?;
    }
    let (size, sha256) = if item.link.is_some() {
        (0, String::new())
    } else {
        let bytes = std::fs::read(&dest).map_err(|e| Error::io(&dest, "cannot read", e))?;
        (bytes.len() as u64, crate::manifest::sha256_hex(&bytes))
    };
    let mut out = vec![FileRecord {
        path: item.rel.clone(),
        kind: item.kind.to_owned(),
        size,
        sha256,
        link: item.link.clone(),
        needed_by: item.needed_by.clone(),
        serves: item.serves.iter().cloned().collect(),
        pruned_to: pruned,
        offloaded: item.offload.is_some(),
        database: item.database.clone(),
    }];
    out.extend(archives);
    Ok(out)
}

/// Offload a fat library into its copy at `dest`, the code of the
/// (GPU, target) `pairs` into `.kpack` archives beside it; the archives'
/// records. Bundles inflate under the run's `budget`.
fn offload_copy(
    item: &Item,
    pairs: &[(String, String)],
    dest: &Path,
    budget: &kpack_bundle::MemoryBudget,
) -> Result<Vec<FileRecord>> {
    let dir = dest.parent().unwrap_or(Path::new("."));
    let (rel_dir, file_name) = item.rel.rsplit_once('/').unwrap_or(("", &item.rel));
    let name = file_name.split('.').next().unwrap_or(file_name).to_owned();
    let mut targets: Vec<String> = pairs.iter().map(|(_, t)| t.clone()).collect();
    targets.sort();
    targets.dedup();
    let keep = kpack_prune::KeepList::parse(&targets)?;
    let set = kpack_offload::ArchiveSet::new(
        dir.join(".kpack"),
        name,
        Default::default(),
        budget.clone(),
    );
    let opts = kpack_offload::OffloadOptions {
        kernel_name: item.rel.clone(),
        search_paths: vec![set.search_path_from(dir)],
        verify_hash: true,
    };
    let done = kpack_offload::offload(&item.source, dest, &opts, keep.filter(), set)?;
    let mut out = Vec::new();
    for (group, written) in done.archives {
        let bytes =
            std::fs::read(&written.path).map_err(|e| Error::io(&written.path, "cannot read", e))?;
        let archive_name = written
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        out.push(FileRecord {
            path: format!("{rel_dir}/.kpack/{archive_name}"),
            kind: "archive".to_owned(),
            size: bytes.len() as u64,
            sha256: crate::manifest::sha256_hex(&bytes),
            link: None,
            needed_by: vec![file_name.to_owned()],
            serves: pairs
                .iter()
                .filter(|(_, t)| kpack_amdgpu::processor_of(t) == group)
                .map(|(g, _)| g.clone())
                .collect(),
            pruned_to: None,
            offloaded: false,
            database: None,
        });
    }
    Ok(out)
}

/// Copy `from` as the new file `rel` of `tree` with its permission bits,
/// owner-writable whatever the source's (patchelf edits the copy).
fn copy(from: &Path, tree: &Tree, rel: &Path) -> Result<()> {
    let mut src = std::fs::File::open(from).map_err(|e| Error::io(from, "cannot copy", e))?;
    let mode = source_mode(&src).map_err(|e| Error::io(from, "cannot stat", e))?;
    let to = tree.path().join(rel);
    let mut dst = tree
        .create_file(rel, mode | 0o200)
        .map_err(|e| Error::io(&to, "cannot create", e))?;
    std::io::copy(&mut src, &mut dst).map_err(|e| Error::io(from, "cannot copy", e))?;
    Ok(())
}

/// The permission bits of the open file `f`.
#[cfg(unix)]
fn source_mode(f: &std::fs::File) -> std::io::Result<u32> {
    use std::os::unix::fs::PermissionsExt;
    Ok(f.metadata()?.permissions().mode() & 0o777)
}

#[cfg(not(unix))]
fn source_mode(_: &std::fs::File) -> std::io::Result<u32> {
    Ok(0o644)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(unix)]
    fn copies_and_links_are_never_written_through_a_symlink_in_the_staged_tree() {
        let d = tempfile::tempdir().unwrap();
        let (root, victim) = (d.path().join("root"), d.path().join("victim"));
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(&victim).unwrap();
        std::os::unix::fs::symlink(&victim, root.join("lib")).unwrap();
        let src = d.path().join("libx.so");
        std::fs::write(&src, "x").unwrap();
        let tree = Tree::open(&root).unwrap();
        let budget = kpack_bundle::MemoryBudget::default();
        let copy = Item::new("lib/libx.so".into(), src.clone(), "library");
        let e = stage(&copy, &tree, &budget).unwrap_err();
        assert!(e.to_string().contains("root/lib"), "{e}");
        let mut link = Item::new("lib/libx.so.1".into(), src, "library");
        link.link = Some("libx.so".into());
        assert!(stage(&link, &tree, &budget).is_err());
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
    }

    #[test]
    fn archive_paths_keep_their_place_relative_to_the_copy() {
        let src = Path::new("/opt/rocm/lib");
        assert_eq!(
            archive_rel(
                src,
                Path::new("/opt/rocm/lib/.kpack/a_gfx1100.kpack"),
                "lib"
            )
            .as_deref(),
            Some("lib/.kpack/a_gfx1100.kpack")
        );
        assert_eq!(
            archive_rel(src, Path::new("/opt/rocm/.kpack/a_gfx942.kpack"), "lib").as_deref(),
            Some(".kpack/a_gfx942.kpack")
        );
    }

    #[test]
    fn a_rocm_prefix_is_searched_in_its_multiarch_directories_too() {
        let options = Options {
            rocm_path: vec![PathBuf::from("/p")],
            ..Default::default()
        };
        let dirs = search_dirs(&options, false).extra;
        for d in [
            "lib",
            "lib64",
            "lib/x86_64-linux-gnu",
            "lib/aarch64-linux-gnu",
        ] {
            assert!(dirs.contains(&Path::new("/p").join(d)), "{d} in {dirs:?}");
        }
        assert_eq!(search_dirs(&options, true).extra, [Path::new("/p/bin")]);
    }

    #[test]
    fn pe_images_and_elf_files_together_are_refused() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/pe");
        let dll = fixtures.join("dll_1tu.dll");
        let elf = std::env::current_exe().unwrap();
        let roots = |ps: &[&Path]| -> Vec<(String, PathBuf, bool)> {
            ps.iter()
                .map(|p| (String::new(), p.to_path_buf(), false))
                .collect()
        };
        assert!(is_windows(&roots(&[&dll, &fixtures.join("exe_1tu.exe")])).unwrap());
        assert!(!is_windows(&roots(&[&elf])).unwrap());
        let err = is_windows(&roots(&[&dll, &elf])).unwrap_err();
        assert!(matches!(err, Error::Mixed { path } if path == elf));
    }

    #[test]
    fn archive_paths_leaving_the_directory_are_refused() {
        let src = Path::new("/opt/rocm/lib");
        assert_eq!(
            archive_rel(src, Path::new("/opt/share/kpack/a_gfx1100.kpack"), "lib"),
            None
        );
        assert_eq!(
            archive_rel(src, Path::new("/srv/archives/a_gfx1100.kpack"), "lib"),
            None
        );
    }
}
