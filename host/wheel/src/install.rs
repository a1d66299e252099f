//! A wheel laid out as an installer lays it out, for tools that inspect
//! what a set of wheels installs (`kpack audit`): the root, purelib and
//! platlib schemes merged into one site directory, and the `.dist-info`
//! with METADATA and a RECORD of the files written. Every entry is read
//! and checked as [`crate::split_wheel`] reads its input (paths, RECORD
//! hashes and sizes, inflation limits).

use std::path::Path;

use kpack_fsafe::Tree;

use crate::error::{Error, Result};
use crate::reader::{Limits, SPLIT_SCHEMES, list_files, unpack};

/// What [`install_wheel`] installed.
#[derive(Debug, Clone)]
pub struct InstalledWheel {
    /// The wheel's file name.
    pub file: String,
    /// The distribution name, as in METADATA.
    pub name: String,
    /// The version, as in METADATA.
    pub version: String,
    /// METADATA as written.
    pub metadata: String,
    /// The files written, relative to the site directory, sorted.
    pub files: Vec<String>,
    /// Problems that did not stop the install (a stale RECORD row, as pip
    /// installs it).
    pub warnings: Vec<String>,
}

/// Install `wheel` into `site` (created if missing): a later wheel's file
/// replaces an earlier one's at the same path, as pip does. Every file is
/// moved into `site` from its root down, never through a symlink there.
pub fn install_wheel(wheel: &Path, site: &Path, limits: &Limits) -> Result<InstalledWheel> {
    let created = kpack_fsafe::CreatedDir::create(site)?;
    let stage = kpack_fsafe::temp_dir_in(site, "install")
        .map_err(|e| Error::io(site, "cannot create a temporary directory in", e))?;
    let un = unpack(wheel, stage.path(), limits, None)?;
    let tree = Tree::open(site).map_err(|e| Error::io(site, "cannot open", e))?;
    let mut files = Vec::new();
    for scheme in SPLIT_SCHEMES {
        for (rel, path) in list_files(&stage.path().join(scheme))? {
            tree.adopt_replacing(&path, Path::new(&rel))
                .map_err(|e| Error::io(site.join(&rel), "cannot write", e))?;
            files.push(rel);
        }
    }
    files.sort();
    files.dedup();
    let di = Path::new(&un.dist_info);
    put(&tree, stage.path(), &di.join("METADATA"), &un.metadata_text)?;
    let record: String = files
        .iter()
        .map(|f| format!("{f},,\n"))
        .chain([format!("{}/RECORD,,\n", un.dist_info)])
        .collect();
    put(&tree, stage.path(), &di.join("RECORD"), &record)?;
    created.keep();
    Ok(InstalledWheel {
        file: wheel
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        name: un.metadata.get("Name").unwrap_or_default().to_string(),
        version: un.metadata.get("Version").unwrap_or_default().to_string(),
        metadata: un.metadata_text,
        files,
        warnings: un.warnings,
    })
}

/// Write `text` as `rel` in `tree`, replacing a file there: written in the
/// private `stage` first, then moved in.
fn put(tree: &Tree, stage: &Path, rel: &Path, text: &str) -> Result<()> {
    let to = tree.path().join(rel);
    let tmp = stage.join(rel.file_name().unwrap_or(rel.as_os_str()));
    std::fs::write(&tmp, text).map_err(|e| Error::io(&tmp, "cannot write", e))?;
    tree.adopt_replacing(&tmp, rel)
        .map_err(|e| Error::io(&to, "cannot write", e))
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;
    use crate::reader::tests::wheel;

    #[test]
    fn never_installs_through_a_symlink_in_the_site() {
        let d = tempfile::tempdir().unwrap();
        let w = wheel(d.path(), &[("p/__init__.py", b"x", 0o644)], 0);
        let (site, victim) = (d.path().join("site"), d.path().join("victim"));
        std::fs::create_dir(&site).unwrap();
        std::fs::create_dir(&victim).unwrap();
        std::os::unix::fs::symlink(&victim, site.join("p")).unwrap();
        let e = install_wheel(&w, &site, &Limits::default()).expect_err("refused");
        assert!(e.to_string().contains("p/__init__.py"), "{e}");
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
    }

    #[test]
    fn a_later_wheels_files_replace_an_earlier_ones() {
        let d = tempfile::tempdir().unwrap();
        let site = d.path().join("new/site");
        let w = wheel(d.path(), &[("p/__init__.py", b"one", 0o644)], 0);
        install_wheel(&w, &site, &Limits::default()).unwrap();
        let w = wheel(d.path(), &[("p/__init__.py", b"two", 0o644)], 0);
        let i = install_wheel(&w, &site, &Limits::default()).unwrap();
        assert_eq!(i.files, ["p/__init__.py"]);
        assert_eq!(std::fs::read(site.join("p/__init__.py")).unwrap(), b"two");
        let record = std::fs::read_to_string(site.join("p-1.dist-info/RECORD")).unwrap();
        assert_eq!(record, "p/__init__.py,,\np-1.dist-info/RECORD,,\n");
    }
}
