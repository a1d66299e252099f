//! Which GPUs a set of wheels really serves ([`audit_wheels`], `kpack
//! audit`). The set is installed into a scratch site directory as pip would
//! install all of it; then, for every target rocm-bootstrap packages, each
//! binary with a kpack marker is asked what the HIP runtime would load (the
//! loader's own resolution with CLR's two-name arch list: native code, the
//! one generic target, SPIR-V that only a runtime asking for it would take,
//! or nothing). Holes: a target a package's other binaries carry and one of
//! its binaries lacks, a target the host wheel's extras claim that a binary
//! cannot load, a device wheel requiring a parent the set lacks, and
//! archives holding only generic code no runtime asks for. [`Audit::text`]
//! and [`Audit::markdown`] render the result.

mod report;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kpack_split::{GpuOutcome, explain_gpu};
use serde::Serialize;

use crate::error::{Error, ErrorKind, Result};
use crate::{InstalledWheel, Limits, install_wheel};

/// What a binary gets on one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Load {
    /// Code for the target itself.
    Native,
    /// Its LLVM generic target's code.
    Generic,
    /// Only portable SPIR-V, which CLR's two-name list never asks for.
    Spirv,
    /// Nothing: launches fail.
    Nothing,
}

/// One binary of one package.
#[derive(Debug, Serialize)]
pub struct Binary {
    /// Path in the installed tree.
    pub path: String,
    /// Its answer per target.
    pub targets: BTreeMap<String, Load>,
}

/// One host package and what serves it.
#[derive(Debug, Serialize)]
pub struct Package {
    /// Distribution name.
    pub name: String,
    /// Version.
    pub version: String,
    /// Targets its extras name (`device-<target>`).
    pub claimed: Vec<String>,
    /// Its binaries with markers.
    pub binaries: Vec<Binary>,
}

/// A hole.
#[derive(Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Hole {
    /// A binary cannot load a target its package's other binaries carry
    /// or its extras claim.
    MissingTarget {
        /// The package.
        package: String,
        /// The binary.
        binary: String,
        /// The target.
        target: String,
    },
    /// A device wheel requires a parent device wheel the set lacks.
    MissingParent {
        /// The device wheel's distribution.
        device: String,
        /// The requirement.
        requires: String,
    },
    /// An archive holds only generic code no HIP runtime asks for.
    UnreachableArchive {
        /// The archive.
        archive: String,
        /// Its targets.
        targets: Vec<String>,
    },
}

/// A binary that carries its device code inside (a fat wheel, never
/// split): the HIP runtime loads its embedded code; no archive is involved.
#[derive(Debug, Serialize)]
pub struct FatBinary {
    /// The distribution that installs it.
    pub package: String,
    /// Its version.
    pub version: String,
    /// Path in the installed tree.
    pub path: String,
    /// The device targets its bundles carry, sorted.
    pub targets: Vec<String>,
}

/// The audit of a wheel set.
#[derive(Debug, Serialize)]
pub struct Audit {
    /// The wheels read.
    pub wheels: Vec<String>,
    /// The targets asked about.
    pub targets: Vec<String>,
    /// Host packages.
    pub packages: Vec<Package>,
    /// Binaries with their device code inside, by path.
    pub fat_binaries: Vec<FatBinary>,
    /// Holes, sorted.
    pub holes: Vec<Hole>,
    /// Problems that did not stop installing a wheel (`wheel: message`),
    /// not part of the JSON document.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

impl Audit {
    /// The readable report: per package, a table of binaries by target
    /// (one letter each), the fat binaries, then the holes.
    pub fn text(&self) -> String {
        report::text(self)
    }

    /// The same as a Markdown page, to publish beside the wheels.
    pub fn markdown(&self) -> String {
        report::markdown(self)
    }
}

/// The wheel files named in `inputs` or inside the directories named
/// (`*.whl`), sorted by file name, each once; the caller has checked that
/// the files named are regular files.
pub fn collect_wheels(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for i in inputs {
        if !i.is_dir() {
            out.push(i.clone());
            continue;
        }
        let rd = std::fs::read_dir(i).map_err(|e| Error::io(i, "cannot list", e))?;
        for e in rd.flatten() {
            if e.path().extension().is_some_and(|x| x == "whl") && e.path().is_file() {
                out.push(e.path());
            }
        }
    }
    out.sort_by_key(|p| p.file_name().map(|n| n.to_owned()));
    out.dedup();
    if out.is_empty() {
        let first = inputs
            .first()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        return Err(Error::new(
            ErrorKind::Invalid,
            None,
            format!("no wheel found in {first}"),
        ));
    }
    Ok(out)
}

/// Install `wheels` into a scratch site directory (removed on return) and
/// audit what they install. Problems that do not stop an install are in
/// [`Audit::warnings`].
pub fn audit_wheels(wheels: &[PathBuf]) -> Result<Audit> {
    let site = tempfile::Builder::new()
        .prefix("kpack-audit-")
        .tempdir()
        .map_err(|e| {
            Error::io(
                std::env::temp_dir(),
                "cannot create a scratch directory in",
                e,
            )
        })?;
    let limits = Limits::default();
    let mut installed = Vec::new();
    let mut warnings = Vec::new();
    for w in wheels {
        let i = install_wheel(w, site.path(), &limits)?;
        warnings.extend(i.warnings.iter().map(|m| format!("{}: {m}", w.display())));
        installed.push(i);
    }
    let mut audit = audit_site(site.path(), &installed)?;
    audit.warnings = warnings;
    Ok(audit)
}

/// Audit what `installed` put into `site`.
fn audit_site(site: &Path, installed: &[InstalledWheel]) -> Result<Audit> {
    let targets: Vec<String> = kpack_amdgpu::SUB_FAMILIES
        .iter()
        .flat_map(|s| s.members.iter().map(|m| m.to_string()))
        .collect();
    let owner: BTreeMap<&str, &InstalledWheel> = installed
        .iter()
        .flat_map(|w| w.files.iter().map(move |f| (f.as_str(), w)))
        .collect();
    // Shown under the directory given: keep the path inside it.
    let rel = |p: &str| {
        Path::new(p).strip_prefix(site).map_or_else(
            |_| p.to_string(),
            |r| r.to_string_lossy().replace('\\', "/"),
        )
    };
    let mut per_binary: BTreeMap<String, BTreeMap<String, Load>> = BTreeMap::new();
    let mut fat: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in &targets {
        let rep = explain_gpu(&[site.to_path_buf()], t).map_err(|e| {
            Error::new(
                ErrorKind::Invalid,
                Some(site.into()),
                format!("cannot resolve {t}"),
            )
            .with_source(e)
        })?;
        for f in rep.fat_binaries {
            fat.insert(rel(&f.path), f.targets);
        }
        for b in rep.binaries {
            let rel = rel(&b.path);
            per_binary
                .entry(rel)
                .or_default()
                .insert(t.clone(), load_of(&b.kernels, t));
        }
    }
    let mut packages: BTreeMap<String, Package> = BTreeMap::new();
    for (path, loads) in per_binary {
        let Some(w) = owner.get(path.as_str()) else {
            continue;
        };
        let p = packages.entry(w.name.clone()).or_insert_with(|| Package {
            name: w.name.clone(),
            version: w.version.clone(),
            claimed: claimed_targets(&w.metadata),
            binaries: Vec::new(),
        });
        p.binaries.push(Binary {
            path,
            targets: loads,
        });
    }
    let packages: Vec<Package> = packages.into_values().collect();
    let fat_binaries = fat_binaries(fat, &owner);
    let mut holes = target_holes(&packages);
    holes.extend(parent_holes(installed));
    holes.extend(unreachable_archives(site, installed)?);
    holes.sort();
    Ok(Audit {
        wheels: installed.iter().map(|w| w.file.clone()).collect(),
        targets,
        packages,
        fat_binaries,
        holes,
        warnings: Vec::new(),
    })
}

/// The fat binaries found (path → targets), each with the package that
/// installs it.
fn fat_binaries(
    fat: BTreeMap<String, Vec<String>>,
    owner: &BTreeMap<&str, &InstalledWheel>,
) -> Vec<FatBinary> {
    fat.into_iter()
        .filter_map(|(path, targets)| {
            let w = owner.get(path.as_str())?;
            Some(FatBinary {
                package: w.name.clone(),
                version: w.version.clone(),
                path,
                targets,
            })
        })
        .collect()
}

/// The worst answer over a binary's kernels for `target`.
fn load_of(kernels: &[kpack_split::GpuKernel], target: &str) -> Load {
    let mut worst = Load::Native;
    for k in kernels {
        let l = match &k.outcome {
            GpuOutcome::Loads { target: t, .. } => {
                if kpack_amdgpu::processor_of(t) == target {
                    Load::Native
                } else {
                    Load::Generic
                }
            }
            GpuOutcome::Missing { spirv: Some(_), .. } => Load::Spirv,
            GpuOutcome::Missing { .. } => Load::Nothing,
        };
        let rank = |l: Load| l as u8;
        if rank(l) > rank(worst) {
            worst = l;
        }
    }
    worst
}

/// The targets a host METADATA's `device-<target>` extras name.
fn claimed_targets(metadata: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in metadata.lines().take_while(|l| !l.is_empty()) {
        if let Some(e) = line.strip_prefix("Provides-Extra: ")
            && let Some(k) = e.trim().strip_prefix("device-")
            && kpack_amdgpu::key_level(k) == Some(kpack_amdgpu::Level::Target)
        {
            out.push(k.to_string());
        }
    }
    out
}

/// Targets a package's binaries or extras serve that one binary does not.
fn target_holes(packages: &[Package]) -> Vec<Hole> {
    let mut out = Vec::new();
    for p in packages {
        let mut served: BTreeSet<&str> = p.claimed.iter().map(String::as_str).collect();
        for b in &p.binaries {
            for (t, l) in &b.targets {
                if matches!(l, Load::Native | Load::Generic) {
                    served.insert(t);
                }
            }
        }
        for b in &p.binaries {
            for t in &served {
                if matches!(b.targets.get(*t), Some(Load::Nothing | Load::Spirv)) {
                    out.push(Hole::MissingTarget {
                        package: p.name.clone(),
                        binary: b.path.clone(),
                        target: t.to_string(),
                    });
                }
            }
        }
    }
    out
}

/// `(prefix, key)` of a device wheel name (`fatpkg-device-gfx9-4` →
/// `fatpkg-device`, `gfx9_4`): the shortest tail that is a bundle key, a
/// generic target or SPIR-V.
fn split_device_name(name: &str) -> Option<(String, String)> {
    let name = name.to_ascii_lowercase().replace(['_', '.'], "-");
    for (i, _) in name
        .match_indices('-')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        let tail = &name[i + 1..];
        let key = tail.replace('-', "_");
        let known = kpack_amdgpu::key_level(&key).is_some()
            || kpack_amdgpu::is_generic(tail)
            || kpack_amdgpu::is_spirv_target(tail)
            || kpack_amdgpu::mach_for_processor(tail).is_some();
        if known {
            return Some((name[..i].to_string(), key));
        }
    }
    None
}

/// Pinned requirements of device wheels on device wheels of the same
/// prefix that the set does not hold.
fn parent_holes(installed: &[InstalledWheel]) -> Vec<Hole> {
    let norm = |n: &str| n.to_ascii_lowercase().replace(['_', '.'], "-");
    let names: BTreeSet<String> = installed.iter().map(|w| norm(&w.name)).collect();
    let mut out = Vec::new();
    for w in installed {
        let Some((prefix, _)) = split_device_name(&w.name) else {
            continue;
        };
        for line in w.metadata.lines().take_while(|l| !l.is_empty()) {
            let Some(req) = line.strip_prefix("Requires-Dist: ") else {
                continue;
            };
            let req = req.split(';').next().unwrap_or_default().trim();
            let Some((dep, _)) = req.split_once("==") else {
                continue;
            };
            let dep = norm(dep.trim());
            if names.contains(&dep) {
                continue;
            }
            if split_device_name(&dep).is_some_and(|(p, _)| p == prefix) {
                out.push(Hole::MissingParent {
                    device: w.name.clone(),
                    requires: req.to_string(),
                });
            }
        }
    }
    out
}

/// The generic targets CLR's `TargetGenericMap` hands the loader for some
/// processor (ROCm/rocm-systems `hip_code_object.cpp`): none for gfx908,
/// gfx90a or gfx1250/gfx1251, so `gfx12-5-generic` is never asked for,
/// although LLVM's generic table lets it run on gfx1250.
const CLR_GENERICS: &[&str] = &[
    "gfx9-generic",
    "gfx9-4-generic",
    "gfx10-1-generic",
    "gfx10-3-generic",
    "gfx11-generic",
    "gfx12-generic",
];

/// Archives (`*.kpack`) of the set whose every target is a generic target
/// that CLR's map gives no processor: code never asked for.
fn unreachable_archives(site: &Path, installed: &[InstalledWheel]) -> Result<Vec<Hole>> {
    let asked: BTreeSet<&str> = CLR_GENERICS.iter().copied().collect();
    let mut out = Vec::new();
    let files: BTreeSet<&str> = installed
        .iter()
        .flat_map(|w| w.files.iter().map(String::as_str))
        .collect();
    for f in files.into_iter().filter(|f| f.ends_with(".kpack")) {
        let path = site.join(f);
        let a = kpack_format::Archive::open(&path).map_err(|e| {
            Error::new(
                ErrorKind::Invalid,
                Some(path.clone()),
                "not a kpack archive",
            )
            .with_source(e)
        })?;
        let targets: Vec<String> = a.arches().to_vec();
        let processor = |t: &str| kpack_amdgpu::processor_of(t).to_string();
        let dead = !targets.is_empty()
            && targets.iter().all(|t| {
                let p = processor(t);
                kpack_amdgpu::is_generic(&p) && !asked.contains(p.as_str())
            });
        if dead {
            out.push(Hole::UnreachableArchive {
                archive: f.to_string(),
                targets,
            });
        }
    }
    Ok(out)
}
