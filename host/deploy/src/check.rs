//! `deploy --check`: nothing in a directory names a path outside it.

use std::path::{Path, PathBuf};

use kpack_binary::HostBinary;
use kpack_format::Marker;
use kpack_runtime::{Cache, Config};
use serde::Serialize;

use crate::closure::{Excludes, SearchDirs, find, join_dirs};
use crate::error::Result;

/// What [`check`] found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CheckReport {
    /// ELF files and PE images checked.
    pub binaries: usize,
    /// Offloaded binaries whose marker was resolved.
    pub markers: usize,
    /// Each problem, naming the file (relative to the directory).
    pub problems: Vec<String>,
}

/// Check that every ELF file and PE image under `dir` finds what it needs
/// inside `dir`: RUNPATH/RPATH entries all `$ORIGIN`-relative, every needed
/// library not on the default exclude list found through them inside
/// `dir` (a PE image's imports: beside it), and every marker resolving to
/// archives inside `dir` only, through relative search paths.
pub fn check(dir: &Path) -> Result<CheckReport> {
    let root = std::fs::canonicalize(dir).map_err(|e| crate::Error::io(dir, "cannot open", e))?;
    let excludes = Excludes::new(&[])?;
    let none = SearchDirs {
        extra: Vec::new(),
        system: false,
    };
    let cache = Cache::new(Config::default());
    let mut rep = CheckReport::default();
    let files: Vec<PathBuf> = walkdir::WalkDir::new(&root)
        .sort_by_file_name()
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect();
    for path in files {
        let shown = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .display()
            .to_string();
        let Some(info) = crate::elf::read(&path)? else {
            if let Some(pe) = crate::pe::read(&path)? {
                rep.binaries += 1;
                check_imports(&root, &path, &shown, &pe.imports, &excludes, &mut rep);
                check_marker(&root, &path, &shown, &cache, &mut rep);
            }
            continue;
        };
        rep.binaries += 1;
        for e in info.runpath.iter().chain(&info.rpath) {
            if !crate::elf::is_origin_relative(e) {
                rep.problems.push(format!(
                    "{shown}: RUNPATH/RPATH entry {e:?} is not relative to $ORIGIN"
                ));
            }
        }
        let origin = path.parent().unwrap_or(&root);
        let dirs: Vec<PathBuf> = none
            .for_object(Some(&info), origin)
            .into_iter()
            .filter(|d| inside(&root, d))
            .collect();
        for n in &info.needed {
            if excludes.reason(n).is_some() {
                continue;
            }
            if find(n, &dirs).is_none() {
                rep.problems.push(format!(
                    "{shown}: needs {n}, not found inside the directory (searched {})",
                    join_dirs(&dirs)
                ));
            }
        }
        check_marker(&root, &path, &shown, &cache, &mut rep);
    }
    Ok(rep)
}

/// A PE image's imports not on the default exclude list, each found
/// beside it (the Windows loader's application directory).
fn check_imports(
    root: &Path,
    path: &Path,
    shown: &str,
    imports: &[String],
    excludes: &Excludes,
    rep: &mut CheckReport,
) {
    let dir = path.parent().unwrap_or(root).to_path_buf();
    for n in imports {
        if excludes.reason(n).is_some() {
            continue;
        }
        if crate::pe::find(n, std::slice::from_ref(&dir)).is_none() {
            rep.problems.push(format!(
                "{shown}: imports {n}, not found beside it inside the directory"
            ));
        }
    }
}

fn check_marker(root: &Path, path: &Path, shown: &str, cache: &Cache, rep: &mut CheckReport) {
    let Ok(bin) = HostBinary::read(path, Default::default()) else {
        return;
    };
    if !bin.is_transformed() {
        return;
    }
    let marker = bin
        .read_marker()
        .and_then(|r| r.ok())
        .and_then(|b| Marker::parse(&b).ok());
    let Some(marker) = marker else {
        rep.problems
            .push(format!("{shown}: offloaded, and its marker does not read"));
        return;
    };
    rep.markers += 1;
    for s in &marker.search_paths {
        if Path::new(s).is_absolute() {
            rep.problems
                .push(format!("{shown}: marker search path {s:?} is absolute"));
        }
    }
    let mut opened = 0;
    for a in cache.marker_archives(&marker, path) {
        if a.archive.is_err() {
            continue;
        }
        if inside(root, &a.path) {
            opened += 1;
        } else {
            rep.problems.push(format!(
                "{shown}: marker resolves to {} outside the directory",
                a.path.display()
            ));
        }
    }
    if opened == 0 {
        rep.problems.push(format!(
            "{shown}: marker resolves to no archive inside the directory"
        ));
    }
}

/// `p` (lexically, then through symlinks when it exists) under `root`.
fn inside(root: &Path, p: &Path) -> bool {
    let real = std::fs::canonicalize(p).unwrap_or_else(|_| kpack_fsafe::normalize(p));
    real.starts_with(root)
}
