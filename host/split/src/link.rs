//! Symbolic links, which only a Unix host makes here: the one place that
//! says what happens elsewhere.

use std::path::Path;

use kpack_fsafe::Tree;

use crate::error::{Error, Result};

/// Create the symlink `rel` of `tree` pointing at `target` (its missing
/// directories made; nothing on the way followed).
#[cfg(unix)]
pub(crate) fn symlink(tree: &Tree, target: &Path, rel: &Path) -> std::io::Result<()> {
    tree.symlink(target, rel)
}

/// Off Unix there are no symlinks to keep: an `Unsupported` error.
#[cfg(not(unix))]
pub(crate) fn symlink(tree: &Tree, target: &Path, rel: &Path) -> std::io::Result<()> {
    let _ = (tree, target, rel);
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "symlinks need a Unix host",
    ))
}

/// Put the file `path` at `rel` in `view`, a view of an install assembled
/// from several artifacts: a symlink to `path`'s canonical path (its
/// missing directories made; nothing in the view followed).
#[cfg(unix)]
pub(crate) fn link_into_view(path: &Path, view: &Tree, rel: &Path) -> Result<()> {
    let abs = std::fs::canonicalize(path).map_err(|e| Error::io(path, "cannot resolve", e))?;
    view.symlink(&abs, rel)
        .map_err(|e| Error::io(view.path().join(rel), "cannot link", e))
}

/// Off Unix the file is only resolved (a missing one is still an error)
/// and the view stays without it.
#[cfg(not(unix))]
pub(crate) fn link_into_view(path: &Path, view: &Tree, rel: &Path) -> Result<()> {
    let _ = (view, rel);
    std::fs::canonicalize(path)
        .map(drop)
        .map_err(|e| Error::io(path, "cannot resolve", e))
}
