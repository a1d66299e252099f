//! The format-independent part: a package's unpacked payload split by
//! [`kpack_split::split_prefix`] (the offload and database-handler code
//! `kpack split` and `kpack wheel split` use), the arch trees grouped into
//! device packages as `kpack wheel split --group` groups device wheels.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kpack_amdgpu::Level;
use kpack_job::Job;
use kpack_split::{BinaryReport, PrefixLayout, SplitOptions, split_prefix};

use crate::PackageOptions;
use crate::error::{Error, Result};

/// What splitting one payload tree gave.
#[derive(Debug)]
pub(crate) struct TreeSplit {
    /// The host tree.
    pub host: PathBuf,
    /// Device packages: group key → (processors, their arch trees).
    pub groups: BTreeMap<String, (Vec<String>, Vec<PathBuf>)>,
    /// Offloaded binaries (kept as they were with `databases_only`).
    pub binaries: Vec<BinaryReport>,
    /// Database files per handler, per verdict.
    pub databases: BTreeMap<String, BTreeMap<String, u64>>,
    /// Problems that did not stop the split.
    pub warnings: Vec<String>,
}

/// Split the payload tree `src` into `work/host` and `work/dev/<arch>`;
/// `None` when there is nothing to split (no device code, or with
/// `databases_only` no database file a handler claimed for a GPU).
pub(crate) fn split_tree(
    job: &Job,
    input: &Path,
    src: &Path,
    work: &Path,
    name: &str,
    opts: &PackageOptions<'_>,
) -> Result<Option<TreeSplit>> {
    let mut so = SplitOptions::new(name.replace(['-', '.', '+'], "_"), job);
    so.archive_dir = archive_dir(name, opts);
    so.compression = opts.compression;
    so.databases = opts.databases;
    so.targets = opts.targets.clone();
    so.mtime = opts.mtime;
    let dev_root = work.join("dev");
    let arch = move |a: &str| dev_root.join(a);
    let host = work.join("host");
    let layout = PrefixLayout {
        source: src,
        prefix: "",
        generic: &host,
        arch: &arch,
    };
    let report = split_prefix(&layout, &so).map_err(|e| Error::Split {
        path: input.to_path_buf(),
        why: e.to_string().replace(&format!("{}/", src.display()), ""),
    })?;
    if !report.errors.is_empty() {
        return Err(Error::Split {
            path: input.to_path_buf(),
            why: format!(
                "{} file(s) could not be split:\n  {}",
                report.errors.len(),
                report.errors.join("\n  ")
            ),
        });
    }
    let mut warnings: Vec<String> = report
        .warnings
        .iter()
        .map(|w| w.replace(&format!("{}/", src.display()), ""))
        .collect();
    if opts.databases_only {
        keep_binaries(src, work, &report)?;
    }
    let mut archs = BTreeSet::new();
    for a in report.bytes_out_arch.keys() {
        if has_files(&work.join("dev").join(a)) {
            archs.insert(a.clone());
        }
    }
    let offloaded: BTreeSet<&str> = report.binaries.iter().map(|b| b.path.as_str()).collect();
    warnings.extend(unclaimed(&host, &offloaded)?);
    if archs.is_empty() {
        return Ok(None);
    }
    let groups = group_archs(&archs, opts.group, &mut warnings)
        .into_iter()
        .map(|(k, ms)| {
            let dirs = ms.iter().map(|m| work.join("dev").join(m)).collect();
            (k, (ms, dirs))
        })
        .collect();
    Ok(Some(TreeSplit {
        host,
        groups,
        binaries: report.binaries,
        databases: report.databases,
        warnings,
    }))
}

/// Where the archives go in the package's tree: `--archive-dir`, else
/// `usr/lib/kpack/<name>` (a directory no other package writes to).
pub(crate) fn archive_dir(name: &str, opts: &PackageOptions<'_>) -> String {
    opts.archive_dir
        .clone()
        .unwrap_or_else(|| format!("usr/lib/kpack/{name}"))
}

/// `--databases-only`: the host keeps every binary as it was and the arch
/// trees lose the archives.
fn keep_binaries(src: &Path, work: &Path, report: &kpack_split::PrefixReport) -> Result<()> {
    for b in &report.binaries {
        let (from, to) = (src.join(&b.path), work.join("host").join(&b.path));
        std::fs::copy(&from, &to).map_err(|e| Error::io(&to, "cannot copy", e))?;
    }
    for a in &report.archives {
        let p = work.join("dev").join(&a.arch).join(&a.path);
        std::fs::remove_file(&p).map_err(|e| Error::io(&p, "cannot remove", e))?;
    }
    Ok(())
}

fn has_files(dir: &Path) -> bool {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(std::result::Result::ok)
        .any(|e| !e.file_type().is_dir())
}

/// Files left in the host tree whose names carry a GPU processor
/// (`TensileLibrary_gfx942.co`): a database layout no handler claimed.
fn unclaimed(host: &Path, offloaded: &BTreeSet<&str>) -> Result<Vec<String>> {
    let mut left = Vec::new();
    for e in walkdir::WalkDir::new(host).sort_by_file_name() {
        let e = e.map_err(|e| Error::io(host, "cannot walk", e.into()))?;
        let Some(rel) = e.path().strip_prefix(host).ok().and_then(Path::to_str) else {
            continue;
        };
        let name = e.file_name().to_string_lossy();
        if e.file_type().is_file() && !offloaded.contains(rel) && names_gpu(&name) {
            left.push(rel.to_string());
        }
    }
    if left.is_empty() {
        return Ok(Vec::new());
    }
    let shown: Vec<&str> = left.iter().take(10).map(String::as_str).collect();
    let more = left.len().saturating_sub(shown.len());
    Ok(vec![format!(
        "{} file(s) name a GPU target but no database handler claimed them (try --split-databases); they stay in the host package: {}{}",
        left.len(),
        shown.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )])
}

/// Whether a file name carries `gfx` and a processor number.
fn names_gpu(name: &str) -> bool {
    name.match_indices("gfx").any(|(i, _)| {
        let rest = &name[i + 3..];
        rest.chars().take_while(char::is_ascii_alphanumeric).count() >= 3
            && rest.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// Device packages: bundle key → processors, as `kpack wheel split
/// --group` makes device wheels (a processor ROCm's packaging hierarchy
/// does not place keeps a package of its own, with a warning).
pub(crate) fn group_archs(
    archs: &BTreeSet<String>,
    level: Level,
    warnings: &mut Vec<String>,
) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for arch in archs {
        let key = archive_group_key(arch, level)
            .or_else(|| kpack_amdgpu::bundle_key(arch, level))
            .unwrap_or_else(|| {
                if level != Level::Target {
                    warnings.push(format!(
                        "{arch} is in no {} of ROCm's packaging hierarchy: it gets a device package of its own",
                        level.as_str()
                    ));
                }
                arch.clone()
            });
        groups.entry(key).or_default().push(arch.clone());
    }
    groups
}

/// The group an archive-group arch tree (`gfx110x`) belongs to at `level`.
fn archive_group_key(arch: &str, level: Level) -> Option<String> {
    let (gl, key) = kpack_amdgpu::archive_group_level(arch)?;
    let sub = kpack_amdgpu::SUB_FAMILIES.iter().find(|s| s.key == key);
    Some(match (gl, level, sub) {
        (Level::SubFamily, Level::Family, Some(s)) => s.family.to_string(),
        _ => key.to_string(),
    })
}

/// The device package of group `key`: `<name>-<key>`, Debian's spelling
/// (lower case, `_` → `-`).
pub(crate) fn device_name(name: &str, key: &str) -> String {
    format!("{name}-{}", kpack_amdgpu::dist_name(key)).to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_like_wheel_split() {
        let archs: BTreeSet<String> = ["gfx1100", "gfx1101", "gfx942"].map(String::from).into();
        let mut w = Vec::new();
        let g = group_archs(&archs, Level::SubFamily, &mut w);
        assert_eq!(g.keys().collect::<Vec<_>>(), ["gfx110x", "gfx9_4"]);
        assert_eq!(device_name("librocblas0", "gfx12_5"), "librocblas0-gfx12-5");
    }

    #[test]
    fn names_gpu_finds_tensile_files_only() {
        assert!(names_gpu("TensileLibrary_Type_gfx942.dat"));
        assert!(!names_gpu("TensileLibrary.dat"));
        assert!(!names_gpu("gfxinfo.txt"));
    }
}
