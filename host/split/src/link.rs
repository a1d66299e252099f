//! Symbolic links, which only a Unix host makes here: the one place that
//! says what happens elsewhere.

use std::path::Path;

use crate::error::{Error, Result};

/// Create `link` pointing at `target`.
#[cfg(unix)]
pub(crate) fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

/// Off Unix there are no symlinks to keep: an `Unsupported` error.
#[cfg(not(unix))]
pub(crate) fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    let _ = (target, link);
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "symlinks need a Unix host",
    ))
}

/// Put the file `path` at `to` in a view of an install assembled from
/// several artifacts: a symlink to `path`'s canonical path.
#[cfg(unix)]
pub(crate) fn link_into_view(path: &Path, to: &Path) -> Result<()> {
    let abs = std::fs::canonicalize(path).map_err(|e| Error::io(path, "cannot resolve", e))?;
    symlink(&abs, to).map_err(|e| Error::io(to, "cannot link", e))
}

/// Off Unix the file is only resolved (a missing one is still an error)
/// and the view stays without it.
#[cfg(not(unix))]
pub(crate) fn link_into_view(path: &Path, to: &Path) -> Result<()> {
    let _ = to;
    std::fs::canonicalize(path)
        .map(drop)
        .map_err(|e| Error::io(path, "cannot resolve", e))
}
