//! `artifact_manifest.txt`: one prefix directory per line, relative to the
//! artifact; blank lines ignored, lines trimmed (AMD's rules, spec §6.1).

use std::path::Path;

use kpack_fsafe::Tree;

use crate::error::{Error, Result};
use crate::link::symlink;

pub use kpack_artifact::{MANIFEST, read_manifest, write_manifest};

/// The first component of `prefix` (relative to `artifact`) that is a
/// symlink, as a relative path (`stage` for `stage/lib` when `stage` is a
/// link), or `None` when the prefix is reached through real directories.
///
/// Split keeps such a link as a link in its output and never reads
/// through it (the link may lead out of the artifact: its files would be
/// read, offloaded and copied from elsewhere); verify and recombine skip
/// what lies behind it for the same reason.
pub fn prefix_link(artifact: &Path, prefix: &str) -> Option<String> {
    let mut at = artifact.to_path_buf();
    let mut rel = Vec::new();
    for part in prefix.split('/') {
        at.push(part);
        rel.push(part);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return Some(rel.join("/"));
        }
    }
    None
}

/// Recreate the symlink `link` (relative to `from`) under `to` (created
/// when missing; nothing in it followed), once.
pub(crate) fn keep_link(from: &Path, to: &Path, link: &str) -> Result<()> {
    let src = from.join(link);
    let dst = to.join(link);
    let tree = Tree::create(to).map_err(|e| Error::io(to, "cannot create", e))?;
    let rel = Path::new(link);
    if tree.entry(rel).is_some() {
        return Ok(());
    }
    let target = std::fs::read_link(&src).map_err(|e| Error::io(&src, "cannot read symlink", e))?;
    if let Some(parent) = rel.parent() {
        tree.create_dir_all(parent)
            .map_err(|e| Error::io(to.join(parent), "cannot create", e))?;
    }
    symlink(&tree, &target, rel).map_err(|e| Error::io(&dst, "cannot create symlink", e))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn prefix_link_finds_the_first_link_on_the_way() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("art");
        std::fs::create_dir_all(a.join("real/lib")).unwrap();
        std::os::unix::fs::symlink(d.path(), a.join("out")).unwrap();
        assert_eq!(prefix_link(&a, "real/lib"), None);
        assert_eq!(prefix_link(&a, "out").as_deref(), Some("out"));
        assert_eq!(prefix_link(&a, "out/lib/x").as_deref(), Some("out"));
        std::fs::write(a.join(MANIFEST), "out/lib\nreal/lib\n").unwrap();
        // Listed, not refused: split keeps the link, verify skips it.
        assert_eq!(read_manifest(&a).unwrap(), ["out/lib", "real/lib"]);

        let to = d.path().join("to");
        keep_link(&a, &to, "out").unwrap();
        keep_link(&a, &to, "out").unwrap();
        assert_eq!(std::fs::read_link(to.join("out")).unwrap(), d.path());
    }
}

/// The names of the artifacts in `dir` (its subdirectories holding a
/// manifest), sorted.
/// The artifacts in `dir`, sorted: subdirectories with a manifest and
/// artifact archives.
pub(crate) fn artifact_dirs(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, "cannot list", e))? {
        let e = e.map_err(|e| Error::io(dir, "cannot list", e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let archive = kpack_artifact::artifact_archive_stem(&name).is_some()
            && kpack_artifact::Codec::sniff(&e.path()).is_some();
        if archive || e.path().join(MANIFEST).is_file() {
            names.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}
