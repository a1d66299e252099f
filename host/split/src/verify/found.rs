//! What `kpack verify` says beside its report: temp files dead runs left
//! in the trees, and whether a directory holds an artifact at all.

use std::path::{Path, PathBuf};

use crate::manifest::MANIFEST;

/// Temp files and staging directories of dead kpack runs anywhere under
/// `dirs` (not descending into them), sorted. Verify only reads: they are
/// flagged, not removed.
pub fn stale_temps_under(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo: Vec<PathBuf> = dirs.to_vec();
    while let Some(d) = todo.pop() {
        out.extend(kpack_fsafe::stale_temps(&d));
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && !kpack_fsafe::is_stale_temp(&e.file_name()) {
                todo.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Whether `dir` is an artifact or holds one (a generic artifact without
/// device code is something checked, even with no marker or archive).
pub fn holds_artifact(dir: &Path) -> bool {
    dir.join(MANIFEST).is_file()
        || std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.path().join(MANIFEST).is_file())
}
