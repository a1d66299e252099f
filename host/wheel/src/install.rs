//! A wheel laid out as an installer lays it out, for tools that inspect
//! what a set of wheels installs (`kpack audit`): the root, purelib and
//! platlib schemes merged into one site directory, and the `.dist-info`
//! with METADATA and a RECORD of the files written. Every entry is read
//! and checked as [`crate::split_wheel`] reads its input (paths, RECORD
//! hashes and sizes, inflation limits).

use std::path::Path;

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
/// replaces an earlier one's at the same path, as pip does.
pub fn install_wheel(wheel: &Path, site: &Path, limits: &Limits) -> Result<InstalledWheel> {
    std::fs::create_dir_all(site).map_err(|e| Error::io(site, "cannot create", e))?;
    let stage = kpack_fsafe::temp_dir_in(site, "install")
        .map_err(|e| Error::io(site, "cannot create a temporary directory in", e))?;
    let un = unpack(wheel, stage.path(), limits, None)?;
    let mut files = Vec::new();
    for scheme in SPLIT_SCHEMES {
        for (rel, path) in list_files(&stage.path().join(scheme))? {
            let to = site.join(&rel);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| Error::io(parent, "cannot create", e))?;
            }
            std::fs::rename(&path, &to).map_err(|e| Error::io(&to, "cannot write", e))?;
            files.push(rel);
        }
    }
    files.sort();
    files.dedup();
    let di = site.join(&un.dist_info);
    std::fs::create_dir_all(&di).map_err(|e| Error::io(&di, "cannot create", e))?;
    let meta = di.join("METADATA");
    std::fs::write(&meta, &un.metadata_text).map_err(|e| Error::io(&meta, "cannot write", e))?;
    let record: String = files
        .iter()
        .map(|f| format!("{f},,\n"))
        .chain([format!("{}/RECORD,,\n", un.dist_info)])
        .collect();
    let rec = di.join("RECORD");
    std::fs::write(&rec, record).map_err(|e| Error::io(&rec, "cannot write", e))?;
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
