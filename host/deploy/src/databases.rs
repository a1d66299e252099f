//! Database files (rocBLAS and hipBLASLt Tensile libraries, MIOpen's
//! `share/miopen/db`, AOTriton's images): which directories come along,
//! where they go in the output, and which of their files the listed GPUs
//! use, as the database handlers (`kpack_split::Databases`) classify them.
//! Generic and unclaimed files always come along; a file for other GPUs
//! only is left out and recorded.

use std::io::Read;
use std::path::{Path, PathBuf};

use kpack_split::{Claim, Classification, ClassifyError, Databases, FileInfo};

use crate::error::{Error, Result};
use crate::manifest::LeftOutRecord;
use crate::plan::{Item, Plan};

/// Loads the database handlers, asked only when a database directory is
/// deployed; `Ok(None)`: no handlers, every file copied.
pub type LoadDatabases<'a> =
    &'a dyn Fn() -> std::result::Result<Option<Box<dyn Databases>>, ClassifyError>;

/// Database directories looked for beside each library directory of the
/// closure (`..` is the install prefix), as the libraries find them.
pub const AUTO_DIRS: &[&str] = &[
    "rocblas/library",
    "hipblaslt/library",
    "aotriton.images",
    "../share/miopen/db",
];

/// One database file to place.
struct DbFile {
    source: PathBuf,
    /// Its path in the output, `/`-separated (what the handlers classify:
    /// a path relative to an install prefix).
    rel: String,
    size: u64,
}

/// The database directories: `given` and those found beside `lib_dirs`,
/// each with its place in the output; `prefixes` are `--rocm-path`s.
pub(crate) fn dirs(
    given: &[PathBuf],
    lib_dirs: &[PathBuf],
    prefixes: &[PathBuf],
) -> Result<Vec<(PathBuf, String)>> {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut libs: Vec<PathBuf> = lib_dirs.iter().map(|d| canon(d)).collect();
    for p in prefixes {
        libs.extend([canon(&p.join("lib")), canon(&p.join("lib64"))]);
    }
    let mut tops: Vec<PathBuf> = libs
        .iter()
        .filter_map(|l| l.parent().map(Path::to_path_buf))
        .collect();
    tops.extend(prefixes.iter().map(|p| canon(p)));
    let mut wanted: Vec<PathBuf> = Vec::new();
    for d in given {
        if !d.is_dir() {
            return Err(Error::NotADatabaseDir { dir: d.clone() });
        }
        wanted.push(canon(d));
    }
    for l in lib_dirs {
        for a in AUTO_DIRS {
            let d = l.join(a);
            if d.is_dir() {
                wanted.push(canon(&d));
            }
        }
    }
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    for d in wanted {
        if out.iter().any(|(o, _)| *o == d) {
            continue;
        }
        let rel =
            place(&d, &libs, &tops).ok_or_else(|| Error::DatabaseOutside { dir: d.clone() })?;
        out.push((d, rel));
    }
    Ok(out)
}

/// `dir`'s path in the output: under a library directory, the same path
/// under `lib`; else under an install prefix, the same path under the
/// output.
fn place(dir: &Path, libs: &[PathBuf], tops: &[PathBuf]) -> Option<String> {
    let join = |rest: &Path| {
        rest.components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/")
    };
    if let Some(rest) = libs.iter().find_map(|l| dir.strip_prefix(l).ok()) {
        let rest = join(rest);
        return Some(if rest.is_empty() {
            "lib".to_owned()
        } else {
            format!("lib/{rest}")
        });
    }
    tops.iter()
        .find_map(|t| dir.strip_prefix(t).ok())
        .map(join)
        .filter(|r| !r.is_empty())
}

/// Plan the files of each database directory: generic and unclaimed ones
/// for every GPU, per-GPU ones for the listed GPUs they serve, the rest
/// left out.
pub(crate) fn place_all(
    plan: &mut Plan,
    dirs: &[(PathBuf, String)],
    gpus: &[String],
    load: Option<LoadDatabases<'_>>,
) -> Result<()> {
    if dirs.is_empty() {
        return Ok(());
    }
    let handlers = match load {
        Some(load) => load().map_err(|source| Error::Handlers { source })?,
        None => None,
    };
    for (dir, base) in dirs {
        let files = walk(dir, base)?;
        let claims = classify(dir, &files, handlers.as_deref())?;
        for (f, claim) in files.into_iter().zip(claims) {
            plan.fat_bytes += f.size;
            place_file(plan, f, claim, gpus)?;
        }
    }
    Ok(())
}

fn place_file(plan: &mut Plan, f: DbFile, claim: Option<Claim>, gpus: &[String]) -> Result<()> {
    let (label, serves): (String, Vec<String>) = match &claim {
        None => ("unclaimed".to_owned(), gpus.to_vec()),
        Some(c) => match &c.classification {
            Classification::Generic => (format!("{} generic", c.handler), gpus.to_vec()),
            Classification::Arch(key) => (
                format!("{} {key}", c.handler),
                gpus.iter()
                    .filter(|g| key_serves(key, g))
                    .cloned()
                    .collect(),
            ),
        },
    };
    if serves.is_empty() {
        let (handler, key) = match &claim {
            Some(c) => (c.handler.clone(), c.classification.to_string()),
            None => (String::new(), String::new()),
        };
        plan.left_out.push(LeftOutRecord {
            name: f.rel,
            needed_by: vec![handler.clone()],
            reason: format!("a {handler} database file for {key} only: no listed GPU uses it"),
        });
        return Ok(());
    }
    let mut item = Item::new(f.rel, f.source, "database");
    item.database = Some(label);
    item.needed_by.push("databases".to_owned());
    item.serves.extend(serves);
    plan.add(item)?;
    Ok(())
}

/// Whether a database file classified for `key` (a target, a generic
/// target, a sub-family or family key) holds code `gpu` runs.
fn key_serves(key: &str, gpu: &str) -> bool {
    let g = kpack_amdgpu::strip_target_prefix(gpu);
    let by_pattern =
        kpack_amdgpu::TargetFilter::new(key, "").is_ok_and(|f| !f.is_empty() && f.keeps(g));
    by_pattern
        || kpack_runtime::gpu_arch_list(g)
            .iter()
            .flat_map(|a| kpack_runtime::compatible_targets(a))
            .any(|t| t == key)
        || kpack_amdgpu::archive_group_holds(&kpack_amdgpu::dist_name(key), g)
}

/// The files under `dir` (symlinks followed), in name order.
fn walk(dir: &Path, base: &str) -> Result<Vec<DbFile>> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir)
        .follow_links(true)
        .sort_by_file_name()
    {
        let e = e.map_err(|e| {
            let path = e.path().unwrap_or(dir).to_path_buf();
            Error::io(&path, "cannot walk", e.into())
        })?;
        if !e.file_type().is_file() {
            continue;
        }
        let sub = e.path().strip_prefix(dir).unwrap_or(e.path());
        let sub: Vec<String> = sub
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let size = e
            .metadata()
            .map_err(|err| Error::io(e.path(), "cannot stat", err.into()))?
            .len();
        out.push(DbFile {
            source: e.into_path(),
            rel: format!("{base}/{}", sub.join("/")),
            size,
        });
    }
    Ok(out)
}

/// Each file's claim, its leading bytes read as its handler asks.
fn classify(
    dir: &Path,
    files: &[DbFile],
    handlers: Option<&dyn Databases>,
) -> Result<Vec<Option<Claim>>> {
    let Some(db) = handlers else {
        return Ok(vec![None; files.len()]);
    };
    let mut infos = Vec::with_capacity(files.len());
    for f in files {
        let mut info = FileInfo::new(f.rel.clone(), f.size);
        let want = db.prefix_bytes_for(&f.rel);
        if want > 0 {
            std::fs::File::open(&f.source)
                .and_then(|h| h.take(want as u64).read_to_end(&mut info.prefix))
                .map_err(|e| Error::io(&f.source, "cannot read", e))?;
        }
        infos.push(info);
    }
    db.classify(&infos).map_err(|source| Error::Classify {
        dir: dir.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_serve_their_targets_generics_and_families() {
        assert!(key_serves("gfx1100", "gfx1100"));
        assert!(!key_serves("gfx1100", "gfx942"));
        assert!(key_serves("gfx11-generic", "gfx1101"));
        assert!(key_serves("gfx11", "gfx1100"));
        assert!(!key_serves("gfx12", "gfx1100"));
        assert!(key_serves("gfx90a:xnack+", "gfx90a:xnack+"));
    }

    #[test]
    fn directories_keep_their_place_under_lib_or_the_prefix() {
        let libs = [PathBuf::from("/opt/rocm/lib")];
        let tops = [PathBuf::from("/opt/rocm")];
        assert_eq!(
            place(Path::new("/opt/rocm/lib/rocblas/library"), &libs, &tops).as_deref(),
            Some("lib/rocblas/library")
        );
        assert_eq!(
            place(Path::new("/opt/rocm/share/miopen/db"), &libs, &tops).as_deref(),
            Some("share/miopen/db")
        );
        assert_eq!(place(Path::new("/srv/db"), &libs, &tops), None);
    }
}
