//! `kpack fetch`: install only the `.kpack` archives that chosen GPUs need
//! into a tree of offloaded binaries (a TheRock tarball, an install
//! prefix), from a plain index.
//!
//! For each binary with a marker under the tree and each GPU, the
//! candidates are the loader's own ([`kpack_runtime::Cache`]): every
//! marker search path relative to the binary, `@GFXARCH@` expanded over
//! CLR's arch list (the GPU, then its generic target) and each target's
//! compatible spellings, most specific first. Candidates are fetched in
//! that order until the runtime resolves every kernel of the binary, so a
//! generic archive is fetched only when no native one serves the GPU.
//!
//! Every download is checked against the listing's size and SHA-256 in a
//! temp file beside its destination and renamed into place: a truncated
//! or tampered download is refused and leaves nothing. An interrupted run
//! leaves only complete archives; the next run checks their hashes, keeps
//! them, and fetches the rest whole (no partial files are kept, so there
//! is nothing to resume mid-file).

#![forbid(unsafe_code)]

mod index;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use kpack_binary::{FileKind, HostBinary};
use kpack_bundle::WalkOptions;
use kpack_format::Marker;
use kpack_fsafe::{Existing, Order, Outputs};
use kpack_runtime::{Cache, Config, GFXARCH, compatible_targets};
use serde::Serialize;
use sha2::{Digest, Sha256};

pub use index::{IndexFile, LISTING, Listing, Source, build_listing, hash_file, write_listing};

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file operation failed.
    #[error(transparent)]
    Io(#[from] kpack_fsafe::IoError),
    /// An output that cannot be staged or committed.
    #[error(transparent)]
    Output(#[from] kpack_fsafe::Error),
    /// An HTTP request failed, or was answered with another status than 200.
    #[error(transparent)]
    Request(#[from] kpack_http::Error),
    /// A download failed.
    #[error("{url}: {message}")]
    Http {
        /// The URL.
        url: String,
        /// What went wrong.
        message: String,
        /// The cause (the HTTP client's or the reader's error), if any.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// A listing is not valid JSON of the expected shape.
    #[error("{what}: not a kpack index listing")]
    Json {
        /// The listing's path or URL.
        what: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A listing of another schema version.
    #[error("{what}: listing schema_version {version}, expected 1")]
    Schema {
        /// The listing's path or URL.
        what: String,
        /// Its version.
        version: u32,
    },
    /// A listed name that is not a relative path to a `.kpack`.
    #[error("index lists {0:?}: not a relative path to a .kpack file")]
    BadName(String),
    /// A listed archive larger than [`Options::max_archive_size`].
    #[error(
        "{location}: listed as {size} bytes, more than the {max} bytes an archive may have (--max-archive-size); nothing downloaded"
    )]
    TooLarge {
        /// Where it would come from.
        location: String,
        /// The listed size.
        size: u64,
        /// The cap.
        max: u64,
    },
    /// Not enough free space for a listed archive.
    #[error("{}: {size} bytes needed for {name}, {free} bytes free; nothing downloaded", dir.display())]
    NoSpace {
        /// The directory it would go to.
        dir: PathBuf,
        /// Its index name.
        name: String,
        /// The listed size.
        size: u64,
        /// Free bytes there.
        free: u64,
    },
    /// A local index entry that is not a regular file (a FIFO, a device,
    /// a symlink to one).
    #[error("{}: not a regular file; refused", path.display())]
    NotRegular {
        /// The entry.
        path: PathBuf,
    },
    /// A download whose size or SHA-256 is not the listing's.
    #[error("{location}: {what} (expected {expected}, got {got}); refused, nothing installed")]
    Mismatch {
        /// Where it came from.
        location: String,
        /// `size` or `sha256`.
        what: &'static str,
        /// The listing's value.
        expected: String,
        /// The download's.
        got: String,
    },
}

impl Error {
    /// `what` failed on `path` because of `source`.
    pub(crate) fn io(
        path: impl Into<PathBuf>,
        what: &'static str,
        source: std::io::Error,
    ) -> Error {
        Error::Io(kpack_fsafe::IoError::new(path, what, source))
    }
}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// What happened to one archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Downloaded and installed.
    Fetched,
    /// Already there with the listed hash.
    Present,
    /// There with another hash; replaced by the listed one.
    Replaced,
}

/// One archive installed or found.
#[derive(Debug, Clone, Serialize)]
pub struct Installed {
    /// Where it is installed.
    pub path: PathBuf,
    /// Its index name.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// What was done.
    pub action: Action,
}

/// What [`fetch`] did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Binaries with markers under the tree.
    pub binaries: usize,
    /// Archives needed, in the order first needed.
    pub archives: Vec<Installed>,
    /// Search-path candidates outside the tree, never written.
    pub outside: Vec<PathBuf>,
    /// Host binaries that could not be read (skipped), with why.
    pub unreadable: Vec<String>,
    /// Temp files and staging directories of dead kpack runs in the tree's
    /// root (a fetch killed mid-commit), removed before anything else.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed_temps: Vec<PathBuf>,
}

impl Report {
    /// One line per archive needed: what was done with it, where it is,
    /// its size.
    pub fn archive_lines(&self) -> Vec<String> {
        self.archives
            .iter()
            .map(|a| {
                let what = match a.action {
                    Action::Fetched => "fetched",
                    Action::Replaced => "replaced",
                    Action::Present => "present",
                };
                format!(
                    "{what} {} -> {} ({} bytes)",
                    a.name,
                    a.path.display(),
                    a.size
                )
            })
            .collect()
    }

    /// What the caller should warn about: the binaries skipped, and each
    /// directory outside the tree a search path names (once: a marker's
    /// search path names one archive per GPU target there).
    pub fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .unreadable
            .iter()
            .map(|u| format!("{u} (skipped)"))
            .collect();
        let mut outside: Vec<&Path> = Vec::new();
        for p in &self.outside {
            let dir = p.parent().unwrap_or(p);
            if !outside.contains(&dir) {
                outside.push(dir);
            }
        }
        out.extend(outside.iter().map(|d| {
            format!(
                "{}: a search path outside the tree; nothing written there",
                d.display()
            )
        }));
        out
    }

    /// Bytes downloaded.
    pub fn downloaded(&self) -> u64 {
        self.archives
            .iter()
            .filter(|a| a.action != Action::Present)
            .map(|a| a.size)
            .sum()
    }
}

/// Limits of [`fetch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// The largest archive downloaded, whatever the listing says; the read
    /// stops one byte past the smaller of this and the listed size.
    pub max_archive_size: u64,
    /// How slowly an archive's body may arrive over HTTP.
    pub pace: kpack_http::Pace,
}

/// [`Options::max_archive_size`] by default: 8 GiB, larger than any one
/// GPU's archive of a ROCm release.
pub const DEFAULT_MAX_ARCHIVE_SIZE: u64 = 8 << 30;

impl Default for Options {
    fn default() -> Options {
        Options {
            max_archive_size: DEFAULT_MAX_ARCHIVE_SIZE,
            pace: kpack_http::Pace::DEFAULT,
        }
    }
}

/// A binary with a marker.
struct Marked {
    path: PathBuf,
    marker: Marker,
    indices: Vec<u32>,
}

/// Fetch into `tree` what `gpus` need from `source`.
pub fn fetch(tree: &Path, source: &Source, gpus: &[String], options: &Options) -> Result<Report> {
    let listing = source.listing()?;
    let mut by_name: BTreeMap<&str, &IndexFile> = BTreeMap::new();
    for f in &listing.files {
        by_name.entry(f.file_name()).or_insert(f);
    }
    let root = std::fs::canonicalize(tree)
        .map_err(|source| Error::io(tree, "cannot open the tree", source))?;
    // Every download is staged in the root: a fetch killed there leaves
    // its staging directory, which the next run removes even when it has
    // nothing to download (finishing a commit the kill interrupted).
    let removed_temps = kpack_fsafe::remove_stale_temps(&root);
    let mut unreadable = Vec::new();
    let marked = marked_binaries(&root, &mut unreadable)?;
    let mut report = Report {
        binaries: marked.len(),
        unreadable,
        removed_temps,
        ..Report::default()
    };
    for b in &marked {
        for gpu in gpus {
            let arches = kpack_runtime::gpu_arch_list(gpu);
            if let Some(serving) = serving(b, &arches) {
                note_present(&mut report, serving);
                continue;
            }
            for cand in candidates(&b.marker, &b.path, &arches) {
                if serving(b, &arches).is_some() {
                    break;
                }
                if !inside(&root, &cand) {
                    if !report.outside.contains(&cand) {
                        report.outside.push(cand);
                    }
                    continue;
                }
                let name = cand.file_name().map(|n| n.to_string_lossy().into_owned());
                let Some(f) = name.and_then(|n| by_name.get(n.as_str()).copied()) else {
                    continue;
                };
                if report.archives.iter().any(|a| a.path == cand) {
                    continue;
                }
                let action = install(source, f, &root, &cand, options)?;
                report.archives.push(Installed {
                    path: cand,
                    name: f.name.clone(),
                    size: f.size,
                    action,
                });
            }
        }
    }
    Ok(report)
}

/// Whether `path` is under `root` (canonical) once symlinks are followed:
/// its nearest existing ancestor is, and nothing below that is `..`.
fn inside(root: &Path, path: &Path) -> bool {
    if !path.starts_with(root) {
        return false;
    }
    path.ancestors()
        .find(|a| a.exists())
        .and_then(|a| std::fs::canonicalize(a).ok())
        .is_some_and(|a| a.starts_with(root))
        && !path.is_symlink()
}

/// The archives the loader takes every kernel of `b` from on `arches`
/// now, or `None` while one is missing.
fn serving(b: &Marked, arches: &[String]) -> Option<Vec<PathBuf>> {
    let arches: Vec<&str> = arches.iter().map(String::as_str).collect();
    // A fresh cache: archives installed since are seen.
    let cache = Cache::new(Config::default());
    let mut out: Vec<PathBuf> = Vec::new();
    for &k in &b.indices {
        let loc = cache.locate(&b.marker, &b.path, k, &arches).ok()?;
        if !out.contains(&loc.archive) {
            out.push(loc.archive);
        }
    }
    Some(out)
}

/// Record archives that already serve a GPU, once each.
fn note_present(report: &mut Report, archives: Vec<PathBuf>) {
    for path in archives {
        if report.archives.iter().any(|a| a.path == path) {
            continue;
        }
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        report.archives.push(Installed {
            path,
            name,
            size,
            action: Action::Present,
        });
    }
}

/// Every host binary with a marker under `root`, sorted by path; those
/// that cannot be read are named in `unreadable` and skipped.
fn marked_binaries(root: &Path, unreadable: &mut Vec<String>) -> Result<Vec<Marked>> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(root).sort_by_file_name() {
        let Ok(e) = e else { continue };
        let path = e.path();
        let skip = !e.file_type().is_file()
            || path.extension().is_some_and(|x| x == "kpack")
            || e.file_name()
                .to_string_lossy()
                .starts_with(kpack_fsafe::TEMP_PREFIX);
        if skip || !FileKind::of_path(path).is_ok_and(|k| k.is_host_binary()) {
            continue;
        }
        let bin = match HostBinary::read(path, WalkOptions { verify_hash: false }) {
            Ok(b) => b,
            Err(e) if e.is_unsupported() => continue,
            Err(e) => {
                unreadable.push(format!(
                    "{}: cannot read the host binary: {e}",
                    path.display()
                ));
                continue;
            }
        };
        if !bin.is_transformed() {
            continue;
        }
        let Some(Ok(bytes)) = bin.read_marker() else {
            continue;
        };
        let Ok(marker) = Marker::parse(&bytes) else {
            continue;
        };
        out.push(Marked {
            path: path.to_path_buf(),
            marker,
            indices: bin.wrapper_indices(),
        });
    }
    Ok(out)
}

/// The loader's candidate archive paths for `marker` of `binary` on
/// `arches`, most specific target first (as `kpack_runtime::Cache` builds
/// them, without the `ROCM_KPACK_PATH*` overrides, which name no place to
/// install into). A search path without `@GFXARCH@` is a grouped archive
/// (`axpy_gfx110x.kpack`): it takes the place of the first target its
/// group holds, and is left out when its group holds none; a name that is
/// no group comes last.
fn candidates(marker: &Marker, binary: &Path, arches: &[String]) -> Vec<PathBuf> {
    let targets: Vec<String> = arches.iter().flat_map(|a| compatible_targets(a)).collect();
    let dir = binary.parent().unwrap_or(Path::new(""));
    let mut ranked: Vec<(usize, PathBuf)> = Vec::new();
    for sp in &marker.search_paths {
        let resolved = kpack_fsafe::normalize(&dir.join(sp));
        let text = resolved.to_string_lossy();
        if text.contains(GFXARCH) {
            for (rank, t) in targets.iter().enumerate() {
                ranked.push((rank * 3, PathBuf::from(text.replacen(GFXARCH, t, 1))));
            }
            continue;
        }
        let group = resolved
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .and_then(|n| kpack_format::archive_file_target(&n).map(str::to_owned));
        let held = group.as_deref().map(|g| {
            let known = kpack_amdgpu::archive_group_level(g).is_some()
                || kpack_amdgpu::TargetId::parse(g).is_ok_and(|t| t.processor().starts_with("gfx"));
            (known, group_rank(g, &targets))
        });
        match held {
            Some((_, Some(rank))) => ranked.push((rank, resolved.clone())),
            Some((true, None)) => {}
            _ => ranked.push((usize::MAX, resolved.clone())),
        }
    }
    // Stable: equal ranks keep the marker's order.
    ranked.sort_by_key(|(rank, _)| *rank);
    ranked.into_iter().map(|(_, p)| p).collect()
}

/// Where the archive group `g` ranks among `targets`: the first target it
/// holds, and among the groups holding that one, the narrowest level first
/// (`gfx110x` before `gfx11` for `gfx1100`).
fn group_rank(g: &str, targets: &[String]) -> Option<usize> {
    use kpack_amdgpu::{Level, archive_group};
    let levels = [Level::Target, Level::SubFamily, Level::Family];
    targets.iter().enumerate().find_map(|(ti, t)| {
        let li = levels.iter().position(|l| archive_group(t, *l) == g)?;
        Some(ti * 3 + li)
    })
}

/// Make `dest` (inside the tree `root`) hold `f`: kept when its hash is
/// the listed one, else downloaded into a staged file in the tree, checked,
/// and committed ([`kpack_fsafe::Outputs`]: reached from the tree's root
/// without following a symlink, so a directory swapped during the download
/// cannot send the archive outside the tree).
fn install(
    source: &Source,
    f: &IndexFile,
    root: &Path,
    dest: &Path,
    options: &Options,
) -> Result<Action> {
    let existed = dest.is_file();
    if existed && hash_file(dest).is_ok_and(|(size, h)| size == f.size && h == f.sha256) {
        return Ok(Action::Present);
    }
    let location = source.location(f);
    if f.size > options.max_archive_size {
        return Err(Error::TooLarge {
            location,
            size: f.size,
            max: options.max_archive_size,
        });
    }
    let io = |what, source| Error::io(dest, what, source);
    if let Some(free) = free_space(root)
        && free < f.size
    {
        return Err(Error::NoSpace {
            dir: dest.parent().unwrap_or(root).to_path_buf(),
            name: f.name.clone(),
            size: f.size,
            free,
        });
    }
    let rel = dest
        .strip_prefix(root)
        .ok()
        .and_then(|r| r.to_str())
        .map(|r| r.replace(std::path::MAIN_SEPARATOR, "/"))
        .ok_or_else(|| Error::BadName(dest.display().to_string()))?;
    let mut outputs = Outputs::create(root, "fetch", Existing::Replace)?;
    let staged = outputs.plan(&rel, Order::First)?;
    let mut tmp = std::fs::File::create(&staged).map_err(|e| io("cannot stage", e))?;
    download(source.open(f, options)?, &mut tmp, f, location, dest)?;
    tmp.sync_all().map_err(|e| io("cannot write", e))?;
    drop(tmp);
    outputs.commit()?;
    Ok(if existed {
        Action::Replaced
    } else {
        Action::Fetched
    })
}

/// Copy `reader` into `tmp` (the staged `dest`), checking the size and
/// SHA-256 that `f` lists.
fn download(
    mut reader: Box<dyn Read>,
    tmp: &mut std::fs::File,
    f: &IndexFile,
    location: String,
    dest: &Path,
) -> Result<()> {
    let io = |what, source| Error::io(dest, what, source);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size: u64 = 0;
    loop {
        let n = reader.read(&mut buf).map_err(|e| Error::Http {
            url: location.clone(),
            message: format!("download interrupted after {size} bytes"),
            source: Some(Box::new(e)),
        })?;
        if n == 0 {
            break;
        }
        let chunk = buf.get(..n).unwrap_or_default();
        hasher.update(chunk);
        tmp.write_all(chunk).map_err(|e| io("cannot write", e))?;
        size += n as u64;
    }
    let got = hex::encode(hasher.finalize());
    let mismatch = if size != f.size {
        Some(("size", f.size.to_string(), size.to_string()))
    } else if got != f.sha256 {
        Some(("sha256", f.sha256.clone(), got))
    } else {
        None
    };
    if let Some((what, expected, got)) = mismatch {
        return Err(Error::Mismatch {
            location,
            what,
            expected,
            got,
        });
    }
    Ok(())
}

/// Bytes free to an unprivileged writer in `dir`, where the system says.
#[cfg(unix)]
fn free_space(dir: &Path) -> Option<u64> {
    let s = rustix::fs::statvfs(dir).ok()?;
    Some(s.f_bavail.saturating_mul(s.f_frsize))
}

/// Bytes free in `dir`: not asked off Unix.
#[cfg(not(unix))]
fn free_space(_dir: &Path) -> Option<u64> {
    None
}

#[cfg(test)]
mod report_tests {
    use super::*;

    #[test]
    fn warnings_name_each_outside_directory_once() {
        let report = Report {
            unreadable: vec!["lib/libx.so: truncated".into()],
            outside: vec![
                PathBuf::from("/opt/a/x_gfx942.kpack"),
                PathBuf::from("/opt/a/x_gfx1100.kpack"),
                PathBuf::from("/opt/b/y_gfx942.kpack"),
            ],
            ..Report::default()
        };
        assert_eq!(
            report.warnings(),
            [
                "lib/libx.so: truncated (skipped)",
                "/opt/a: a search path outside the tree; nothing written there",
                "/opt/b: a search path outside the tree; nothing written there",
            ]
        );
        assert!(report.archive_lines().is_empty());
    }
}
