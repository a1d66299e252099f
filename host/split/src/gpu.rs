//! `kpack verify --gpu`: for one GPU, where every kernel of every offloaded
//! binary would load from, answered by `kpack-runtime`'s own resolution
//! ([`Cache::locate`]), or what is missing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_amdgpu::{
    Level, SPIRV_TARGET, bundle_key, dist_name, is_spirv_target, processor_of, strip_target_prefix,
};
use kpack_runtime::{Cache, Config};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::manifest::{MANIFEST, prefix_link, read_manifest};
use crate::recombine::{parse_artifact_name, read_record};
use crate::verify::{FlatInstall, Marked, VerifyReport, check_host_files, is_installed_tree};

mod machine;
mod text;

pub use machine::{MachineReport, explain_machine};

/// What [`explain_gpu`] found.
#[derive(Debug, Clone, Serialize)]
pub struct GpuReport {
    /// The GPU as given.
    pub gpu: String,
    /// The arch list handed to the loader, as CLR builds it: the device's
    /// target, then its LLVM generic target with the same features.
    pub arch_list: Vec<String>,
    /// Every binary with a marker, sorted by path.
    pub binaries: Vec<GpuBinary>,
    /// Every fat binary (device code never offloaded) in an installed tree,
    /// sorted by path: the HIP runtime loads its embedded code, if it has
    /// some for this GPU.
    pub fat_binaries: Vec<GpuFatBinary>,
}

/// A fat binary found where offloaded ones were expected.
#[derive(Debug, Clone, Serialize)]
pub struct GpuFatBinary {
    /// The binary, as found under the directory given.
    pub path: String,
    /// The device targets its bundles carry, sorted.
    pub targets: Vec<String>,
    /// The embedded target the HIP runtime would load for this GPU
    /// (the arch list's names, most specific first); `None`: none, the
    /// runtime fails with `hipErrorNoBinaryForGpu`.
    pub serves: Option<String>,
}

impl GpuReport {
    /// Kernels that would not load, and fat binaries with no code for the
    /// GPU.
    pub fn missing(&self) -> usize {
        self.binaries
            .iter()
            .flat_map(|b| &b.kernels)
            .filter(|k| matches!(k.outcome, GpuOutcome::Missing { .. }))
            .count()
            + self
                .fat_binaries
                .iter()
                .filter(|f| f.serves.is_none())
                .count()
    }

    /// Warnings for a GPU whose code would come only from a generic target
    /// some of its steppings reject
    /// ([`kpack_amdgpu::generic_only_warning`]: gfx1250 A0 and
    /// `gfx12-5-generic`), one per binary, naming it.
    pub fn stepping_warnings(&self) -> Vec<String> {
        let processor = kpack_amdgpu::processor_of(strip_target_prefix(&self.gpu));
        let offloaded = self.binaries.iter().filter_map(|b| {
            b.kernels.iter().find_map(|k| match &k.outcome {
                GpuOutcome::Loads { target, .. } => {
                    kpack_amdgpu::generic_only_warning(processor, target)
                        .map(|w| format!("{}: {w}", b.path))
                }
                GpuOutcome::Missing { .. } => None,
            })
        });
        let fat = self.fat_binaries.iter().filter_map(|f| {
            let served = f.serves.as_deref()?;
            kpack_amdgpu::generic_only_warning(processor, served)
                .map(|w| format!("{}: {w}", f.path))
        });
        offloaded.chain(fat).collect()
    }

    /// What would provide the missing kernels (device wheels to install,
    /// arch artifacts), each said once, in the order first needed.
    pub fn providers(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for k in self.binaries.iter().flat_map(|b| &b.kernels) {
            if let GpuOutcome::Missing {
                provider: Some(p), ..
            } = &k.outcome
                && !out.contains(&p.as_str())
            {
                out.push(p);
            }
        }
        out
    }
}

/// One offloaded binary.
#[derive(Debug, Clone, Serialize)]
pub struct GpuBinary {
    /// The binary, as found under the directory given.
    pub path: String,
    /// One entry per code object index its wrappers name.
    pub kernels: Vec<GpuKernel>,
    /// What would provide its missing kernels (said once for the binary,
    /// however many of its kernels miss), when something is missing and
    /// that can be told.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// One kernel lookup (`<kernel_name>#<co_index>`).
#[derive(Debug, Clone, Serialize)]
pub struct GpuKernel {
    /// The TOC key.
    pub key: String,
    /// Where it loads from, or why not.
    #[serde(flatten)]
    pub outcome: GpuOutcome,
}

/// The loader's answer for one kernel.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum GpuOutcome {
    /// It loads.
    Loads {
        /// The archive, relative to the directory given when inside it.
        archive: String,
        /// The TOC target it is stored under.
        target: String,
        /// Compatible (archive, target) pairs tried first that lack it.
        lacking: Vec<(String, String)>,
    },
    /// It does not load.
    Missing {
        /// AMD's `kpack_error_t` name of the loader's answer.
        error: String,
        /// AMD's number.
        code: u32,
        /// The loader's diagnostic: every path tried and why it failed.
        diagnostic: String,
        /// Which device wheel or arch artifact would provide it (or that
        /// none was built), when that can be told.
        #[serde(skip_serializing_if = "Option::is_none")]
        provider: Option<String>,
        /// Where portable SPIR-V (`amdgcnspirv`) for it is, when only that
        /// would serve: the loader tries it only when the caller's arch
        /// list names it.
        #[serde(skip_serializing_if = "Option::is_none")]
        spirv: Option<String>,
    },
}

/// For each of `dirs` (an installed tree, an artifact, or a directory of
/// artifacts: a component's generic artifact and all its arch artifacts
/// are flattened together, as installed), where every kernel of every
/// binary with a marker would load from on `gpu`.
pub fn explain_gpu(dirs: &[PathBuf], gpu: &str) -> Result<GpuReport> {
    let arch_list = kpack_runtime::gpu_arch_list(gpu);
    let mut report = GpuReport {
        gpu: gpu.to_owned(),
        arch_list: arch_list.clone(),
        binaries: Vec::new(),
        fat_binaries: Vec::new(),
    };
    // Layout problems are `kpack verify`'s job; here only the answers count.
    let mut ignored = VerifyReport::default();
    for d in dirs {
        if is_installed_tree(d) {
            let marked = check_host_files(d, &[String::new()], true, &mut ignored)?;
            let hint = |bin: &Path| wheel_hint(bin, gpu);
            explain(d, d, &marked, &arch_list, &hint, &mut report);
            report.fat_binaries.extend(fat_binaries(d, &arch_list));
            continue;
        }
        let arts = artifacts_in(d)?;
        // Recombined groups of any name (`blas_lib_rdna3`) are known from
        // recombine's record; an unreadable one is `verify`'s to report.
        let record_dir = if d.join(MANIFEST).is_file() {
            d.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            d.clone()
        };
        let record = read_record(&record_dir).unwrap_or_default();
        for (component, (generic, members)) in &component_groups(&arts, &record) {
            let Some(generic) = generic else { continue };
            let mut view = FlatInstall::new("kpack-verify-gpu-")?;
            for a in members {
                let prefixes = read_manifest(a)?;
                for p in prefixes.iter().filter(|p| prefix_link(a, p).is_none()) {
                    // Collisions are `kpack verify`'s findings; here the
                    // first file placed is the one the loader would meet.
                    let _collisions = view.add(&a.join(p))?;
                }
            }
            let mut prefixes = read_manifest(generic)?;
            prefixes.retain(|p| prefix_link(generic, p).is_none());
            let marked = check_host_files(generic, &prefixes, false, &mut ignored)?;
            let hint = |_: &Path| Some(artifact_hint(&record_dir, component, members, gpu));
            explain(
                view.path(),
                generic,
                &marked,
                &arch_list,
                &hint,
                &mut report,
            );
        }
    }
    report.binaries.sort_by(|a, b| a.path.cmp(&b.path));
    report.fat_binaries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(report)
}

/// The artifacts `d` names: itself when it is one, else the artifacts in
/// it, sorted.
fn artifacts_in(d: &Path) -> Result<Vec<PathBuf>> {
    if d.join(MANIFEST).is_file() {
        return Ok(vec![d.to_path_buf()]);
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(d)
        .map_err(|e| Error::io(d, "cannot list", e))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join(MANIFEST).is_file())
        .collect();
    v.sort();
    Ok(v)
}

/// Artifacts by component: its generic artifact and every artifact of the
/// component, names read from recombine's `record` or else parsed.
fn component_groups(
    arts: &[PathBuf],
    record: &BTreeMap<String, (String, Option<String>)>,
) -> BTreeMap<String, (Option<PathBuf>, Vec<PathBuf>)> {
    let mut groups: BTreeMap<String, (Option<PathBuf>, Vec<PathBuf>)> = BTreeMap::new();
    for a in arts {
        let name = a
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let parsed = record
            .get(&name)
            .cloned()
            .or_else(|| parse_artifact_name(&name));
        let Some((component, arch)) = parsed else {
            continue;
        };
        let g = groups.entry(component).or_default();
        if arch.is_none() {
            g.0 = Some(a.clone());
        }
        g.1.push(a.clone());
    }
    groups
}

/// The fat binaries under `root` (device code in bundles, wrappers never
/// rewritten; relocatable objects aside), each with its targets and the
/// one the HIP runtime would pick for `arch_list` (each name's compatible
/// targets, most specific first, as for archives).
fn fat_binaries(root: &Path, arch_list: &[String]) -> Vec<GpuFatBinary> {
    let mut out = Vec::new();
    for (path, rel) in crate::verify::files_of(root) {
        if !crate::verify::kind(&path).is_host_binary() {
            continue;
        }
        let Ok(bin) = kpack_binary::HostBinary::read(&path, Default::default()) else {
            continue;
        };
        if bin.is_link_input() || bin.is_transformed() || bin.bundles().is_empty() {
            continue;
        }
        let mut targets: Vec<String> = bin
            .bundles()
            .iter()
            .flat_map(|b| &b.entries)
            .filter(|e| !e.id.is_host())
            .filter_map(|e| e.id.target().map(|t| t.to_string()))
            .collect();
        targets.sort();
        targets.dedup();
        let serves = arch_list
            .iter()
            .flat_map(|a| kpack_runtime::compatible_targets(a))
            .find(|t| targets.contains(t));
        out.push(GpuFatBinary {
            path: root.join(rel).display().to_string(),
            targets,
            serves,
        });
    }
    out
}

/// Ask the loader about every kernel of `marked` (binaries under `root`);
/// paths are shown relative to `root` and binaries under `shown_root`.
fn explain(
    root: &Path,
    shown_root: &Path,
    marked: &[Marked],
    arch_list: &[String],
    hint: &dyn Fn(&Path) -> Option<String>,
    report: &mut GpuReport,
) {
    let arches: Vec<&str> = arch_list.iter().map(String::as_str).collect();
    let canon_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let shown = |p: &Path| -> String {
        p.strip_prefix(&canon_root)
            .or_else(|_| p.strip_prefix(root))
            .map(|r| r.display().to_string())
            .unwrap_or_else(|_| p.display().to_string())
    };
    // One cache per tree, as one process would have.
    let cache = Cache::new(Config::default());
    for b in marked {
        let bin = root.join(&b.rel);
        let mut kernels = Vec::new();
        // Asked once per binary, and only when something is missing.
        let mut provider: Option<Option<String>> = None;
        for &k in &b.indices {
            let key = format!("{}#{k}", b.marker.kernel_name);
            let outcome = match cache.locate(&b.marker, &bin, k, &arches) {
                Ok(loc) => GpuOutcome::Loads {
                    archive: shown(&loc.archive),
                    target: loc.target,
                    lacking: loc
                        .lacking
                        .iter()
                        .map(|(p, t)| (shown(p), t.clone()))
                        .collect(),
                },
                Err(e) => GpuOutcome::Missing {
                    error: format!("{:?}", e.kind()),
                    code: e.kind().code(),
                    diagnostic: unview(&e.to_string(), root, &canon_root, shown_root),
                    provider: provider.get_or_insert_with(|| hint(&bin)).clone(),
                    spirv: (!arches.iter().any(|a| is_spirv_target(a)))
                        .then(|| cache.locate(&b.marker, &bin, k, &[SPIRV_TARGET]).ok())
                        .flatten()
                        .map(|loc| {
                            format!(
                                "only portable SPIR-V would serve: {} as {SPIRV_TARGET}, loaded when the arch list names {SPIRV_TARGET}",
                                shown(&loc.archive)
                            )
                        }),
                },
            };
            kernels.push(GpuKernel { key, outcome });
        }
        report.binaries.push(GpuBinary {
            path: shown_root.join(&b.rel).display().to_string(),
            kernels,
            provider: provider.flatten(),
        });
    }
}

/// The loader's diagnostic with the paths under the flattened view of a
/// component's artifacts (`root`, a temporary tree gone when the command
/// ends) shown under `shown_root` (the component's generic artifact),
/// where an installed tree would have them.
fn unview(diagnostic: &str, root: &Path, canon_root: &Path, shown_root: &Path) -> String {
    if root == shown_root {
        return diagnostic.to_owned();
    }
    let shown = shown_root.display().to_string();
    diagnostic
        .replace(&canon_root.display().to_string(), &shown)
        .replace(&root.display().to_string(), &shown)
}

/// Which arch artifact of `component` holds `gpu`'s code: a recombined
/// group listing the processor (from recombine's record in `record_dir`),
/// else split's own name, `<component>_<processor>`; and whether it is
/// among `members` (the artifacts given).
fn artifact_hint(record_dir: &Path, component: &str, members: &[PathBuf], gpu: &str) -> String {
    let proc = processor_of(strip_target_prefix(gpu.trim()));
    let name = group_for(record_dir, component, proc).unwrap_or(format!("{component}_{proc}"));
    let here = members
        .iter()
        .any(|m| m.file_name().is_some_and(|n| n.to_string_lossy() == name));
    if here {
        format!("the arch artifact {name} is here but lacks it (rebuild it with {gpu} code)")
    } else {
        format!("the arch artifact {name} would provide it; it is not among the artifacts given")
    }
}

/// The recombined artifact of `component` whose group lists `proc`.
fn group_for(record_dir: &Path, component: &str, proc: &str) -> Option<String> {
    let text = std::fs::read_to_string(record_dir.join(crate::recombine::RECORD)).ok()?;
    let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
    let arts = doc.get("artifacts")?.as_object()?;
    arts.iter()
        .find(|(_, a)| {
            a.get("component").and_then(|c| c.as_str()) == Some(component)
                && a.get("architectures")
                    .and_then(|v| v.as_array())
                    .is_some_and(|v| {
                        v.iter()
                            .filter_map(|x| x.as_str())
                            .any(|x| processor_of(x) == proc)
                    })
        })
        .map(|(n, _)| n.clone())
}

/// The installed distribution owning a binary: name, version, its
/// METADATA's `device-*` extras as (extra, device dist), and its
/// site directory.
struct Owner {
    name: String,
    version: String,
    devices: Vec<(String, String)>,
    site: PathBuf,
}

/// Find the `.dist-info` whose RECORD lists `bin` (from its real
/// location, as pip installed it), a few directories up.
fn owner_of(bin: &Path) -> Option<Owner> {
    let real = std::fs::canonicalize(bin).ok()?;
    for site in real.ancestors().skip(1).take(8) {
        let Ok(rel) = real.strip_prefix(site) else {
            continue;
        };
        let rel = rel
            .to_string_lossy()
            .replace(std::path::MAIN_SEPARATOR, "/");
        let Ok(entries) = std::fs::read_dir(site) else {
            continue;
        };
        let mut infos: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "dist-info"))
            .collect();
        infos.sort();
        for di in infos {
            let Ok(record) = std::fs::read_to_string(di.join("RECORD")) else {
                continue;
            };
            if !record
                .lines()
                .any(|l| l.split(',').next() == Some(rel.as_str()))
            {
                continue;
            }
            let meta = std::fs::read_to_string(di.join("METADATA")).ok()?;
            return Some(parse_owner(&meta, site));
        }
    }
    None
}

/// Name, version and `device-*` extras of a METADATA (headers only).
fn parse_owner(meta: &str, site: &Path) -> Owner {
    let mut o = Owner {
        name: String::new(),
        version: String::new(),
        devices: Vec::new(),
        site: site.to_path_buf(),
    };
    for line in meta.lines().take_while(|l| !l.is_empty()) {
        if let Some(v) = line.strip_prefix("Name: ") {
            o.name = v.trim().to_owned();
        } else if let Some(v) = line.strip_prefix("Version: ") {
            o.version = v.trim().to_owned();
        } else if let Some(v) = line.strip_prefix("Requires-Dist: ")
            && let Some((req, marker)) = v.split_once(';')
            && let Some(extra) = marker
                .trim()
                .strip_prefix("extra == \"")
                .and_then(|e| e.strip_suffix('"'))
            && extra.starts_with("device-")
            && extra != "device-all"
        {
            let dist = req.split_whitespace().next().unwrap_or_default();
            o.devices.push((extra.to_owned(), dist.to_owned()));
        }
    }
    o
}

/// PEP 503 normalisation, for comparing distribution names.
fn normalize(name: &str) -> String {
    name.to_ascii_lowercase().replace(['_', '.'], "-")
}

/// Which device wheel would provide `gpu`'s code for the installed binary
/// `bin`: read from the owning distribution's `device-*` extras (the
/// wheel at the narrowest level of the packaging hierarchy that has one
/// for `gpu`'s processor), or the default name of an ungrouped split.
fn wheel_hint(bin: &Path, gpu: &str) -> Option<String> {
    let o = owner_of(bin)?;
    let proc = processor_of(strip_target_prefix(gpu.trim()));
    let levels = [Level::Target, Level::SubFamily, Level::Family];
    let keys: Vec<String> = levels
        .iter()
        .filter_map(|l| bundle_key(proc, *l))
        .map(|k| dist_name(&k))
        .collect();
    if o.devices.is_empty() {
        return Some(ungrouped_hint(&o, proc, &keys));
    }
    let found = keys.iter().find_map(|k| {
        o.devices
            .iter()
            .find(|(_, d)| normalize(d).ends_with(&format!("-{k}")))
    });
    let Some((extra, dist)) = found else {
        let mut built: Vec<&str> = Vec::new();
        for (e, _) in &o.devices {
            let k = e.strip_prefix("device-").unwrap_or(e);
            if !built.contains(&k) {
                built.push(k);
            }
        }
        return Some(format!(
            "{} {} was not built for {proc} (built: {}); no device wheel or extra provides it",
            o.name,
            o.version,
            built.join(", ")
        ));
    };
    let installed = std::fs::read_dir(&o.site).ok().is_some_and(|rd| {
        rd.filter_map(|e| e.ok()).any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_suffix(".dist-info")
                .and_then(|s| s.rsplit_once('-'))
                .is_some_and(|(d, _)| normalize(d) == normalize(dist))
        })
    });
    Some(if installed {
        format!("the device wheel {dist} is installed but lacks it")
    } else {
        format!(
            "the device wheel {dist} provides it: pip install '{}[{extra}]'",
            o.name
        )
    })
}

/// The hint for a package split without `--group` (one wheel per
/// processor, `<name>-device-<processor>`, and no extras naming them): the
/// device wheels installed beside it are all that tells what was built.
/// Their processors are the ones named as built; a wheel for `proc` is
/// named only as one that would exist if it was built, never proposed as
/// if it did.
fn ungrouped_hint(o: &Owner, proc: &str, keys: &[String]) -> String {
    let prefix = format!("{}-device-", normalize(&o.name));
    let mut installed: Vec<String> = std::fs::read_dir(&o.site)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let (dist, _) = n.strip_suffix(".dist-info")?.rsplit_once('-')?;
            normalize(dist).strip_prefix(&prefix).map(str::to_owned)
        })
        .collect();
    installed.sort();
    let key = keys.first().cloned().unwrap_or_else(|| proc.to_owned());
    if installed.contains(&key) {
        return format!("the device wheel {prefix}{key} is installed but lacks it");
    }
    let (name, version) = (&o.name, &o.version);
    if installed.is_empty() {
        return format!(
            "{name} {version} names no device wheels (split without --group) and none is installed, \
             so whether it was built for {proc} cannot be told here: only a device wheel {prefix}{key}, if one was built, would provide it"
        );
    }
    format!(
        "{name} {version} was not built for {proc} as far as this install tells (device wheels installed: {}; \
         split without --group, it names no others): only a device wheel {prefix}{key}, if one was built, would provide it",
        installed.join(", ")
    )
}
