//! The search path: which directories are searched for handlers given by
//! name, in what order, and what file names count as a handler in each.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use semver::{Version, VersionReq};

use crate::places::Places;
use crate::spec::{HandlerSpec, check_name};

/// How a directory on the search path was configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DirKind {
    /// `--plugin-dir`.
    Flag,
    /// `$KPACK_PLUGIN_DIR`.
    Env,
    /// Handlers installed by `kpack plugins add` (`NAME-VERSION.wasm`).
    Installed,
    /// Shipped with kpack: `<exe dir>/plugins`, or a cargo target dir's
    /// `wasm32-wasip2/plugin` next to the executable.
    Bundled,
}

/// One directory searched for handlers by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchDir {
    /// The directory.
    pub path: PathBuf,
    /// Why it is searched.
    pub kind: DirKind,
}

/// kpack's standard search path, in order: `flag_dirs` (`--plugin-dir`),
/// `$KPACK_PLUGIN_DIR` (a `:`-separated list), the install directory
/// ([`Places::install_dir`]), `<exe dir>/plugins`, and
/// `<exe dir>/../wasm32-wasip2/plugin` (where `scripts/build-plugins.sh`
/// puts them in a cargo target directory).
pub(crate) fn standard_dirs(flag_dirs: &[PathBuf], places: &Places) -> Vec<SearchDir> {
    let mut search: Vec<SearchDir> = flag_dirs
        .iter()
        .map(|p| SearchDir {
            path: p.clone(),
            kind: DirKind::Flag,
        })
        .collect();
    if let Some(v) = &places.plugin_dir {
        search.extend(
            std::env::split_paths(v)
                .filter(|p| !p.as_os_str().is_empty())
                .map(|path| SearchDir {
                    path,
                    kind: DirKind::Env,
                }),
        );
    }
    if let Some(path) = places.install_dir() {
        search.push(SearchDir {
            path,
            kind: DirKind::Installed,
        });
    }
    if let Some(exe_dir) = &places.exe_dir {
        search.push(SearchDir {
            path: exe_dir.join("plugins"),
            kind: DirKind::Bundled,
        });
        if let Some(target) = exe_dir.parent() {
            search.push(SearchDir {
                path: target.join("wasm32-wasip2/plugin"),
                kind: DirKind::Bundled,
            });
        }
    }
    search
}

/// The first handler file for `name` (matching `req`, where the directory
/// records versions) in `dirs`, in order, and the directory it was found in.
pub(crate) fn find(
    dirs: &[SearchDir],
    name: &str,
    req: Option<&VersionReq>,
) -> Option<(SearchDir, PathBuf)> {
    dirs.iter().find_map(|dir| {
        let found = if dir.kind == DirKind::Installed {
            installed_versions(&dir.path, name)
                .into_iter()
                .find(|(v, _)| req.is_none_or(|r| r.matches(v)))
                .map(|(_, p)| p)
        } else {
            handler_file_names(name)
                .iter()
                .map(|f| dir.path.join(f))
                .find(|p| p.is_file())
        };
        found.map(|path| (dir.clone(), path))
    })
}

/// Handlers findable by name in `dirs`: `(name, spec)` per name, the one
/// that would be used, sorted by name.
pub fn discover(dirs: &[SearchDir]) -> Vec<(String, HandlerSpec)> {
    let mut seen = BTreeMap::new();
    for dir in dirs {
        let Ok(rd) = std::fs::read_dir(&dir.path) else {
            continue;
        };
        let mut names: Vec<String> = rd
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        for file in names {
            let name = if dir.kind == DirKind::Installed {
                file.strip_suffix(".wasm")
                    .and_then(|s| s.rsplit_once('-'))
                    .map(|(n, _)| n.to_string())
            } else {
                file.strip_prefix("kpack_handler_")
                    .and_then(|s| s.strip_suffix(".wasm"))
                    .map(str::to_string)
            };
            if let Some(name) = name.filter(|n| check_name(n).is_ok()) {
                seen.entry(name.clone())
                    .or_insert(HandlerSpec::Name { name, req: None });
            }
        }
    }
    seen.into_iter().collect()
}

/// The file names a bundled or `--plugin-dir` handler may have.
fn handler_file_names(name: &str) -> [String; 2] {
    [format!("kpack_handler_{name}.wasm"), format!("{name}.wasm")]
}

/// Versions installed as `NAME-VERSION.wasm` in `dir`, newest first.
fn installed_versions(dir: &Path, name: &str) -> Vec<(Version, PathBuf)> {
    let mut out: Vec<(Version, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let file = e.file_name().into_string().ok()?;
            let vers = file
                .strip_prefix(name)?
                .strip_prefix('-')?
                .strip_suffix(".wasm")?;
            Some((Version::parse(vers).ok()?, e.path()))
        })
        .collect();
    out.sort_by(|a, b| b.0.cmp(&a.0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_installed_versions_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "demo-1.2.0.wasm",
            "demo-1.10.0.wasm",
            "demo-x.wasm",
            "demolition-9.0.0.wasm",
        ] {
            std::fs::write(dir.path().join(f), b"").unwrap();
        }
        let v: Vec<String> = installed_versions(dir.path(), "demo")
            .into_iter()
            .map(|(v, _)| v.to_string())
            .collect();
        assert_eq!(v, ["1.10.0", "1.2.0"]);
    }
}
