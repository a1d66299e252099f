//! `artifact_manifest.txt`: one prefix directory per line, relative to the
//! artifact; blank lines ignored, lines trimmed (AMD's rules, spec §6.1).

use std::path::Path;

use crate::error::{Error, Result};
use crate::link::symlink;

/// The manifest's file name inside an artifact directory.
pub const MANIFEST: &str = "artifact_manifest.txt";

/// Read and validate an artifact's manifest: every prefix relative, without
/// `..`, `\`, or repeats.
pub fn read_manifest(artifact: &Path) -> Result<Vec<String>> {
    let path = artifact.join(MANIFEST);
    // A manifest that is a symlink (to /etc/passwd, say) is not read through.
    let meta = std::fs::symlink_metadata(&path)
        .map_err(|e| Error::io(&path, "cannot read the artifact manifest", e))?;
    if !meta.is_file() {
        return Err(Error::invalid(
            &path,
            "the artifact manifest is not a regular file (a symlink is not followed)",
        ));
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::io(&path, "cannot read the artifact manifest", e))?;
    parse_manifest(&path, &text)
}

/// Parse and validate a manifest's text (read from `path`, for messages).
pub(crate) fn parse_manifest(path: &Path, text: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let p = line.trim();
        if p.is_empty() {
            continue;
        }
        let p = p.trim_end_matches('/');
        if !kpack_fsafe::is_plain_relative(p) {
            return Err(Error::invalid(
                path,
                format!("line {}: prefix {p:?} is not a plain relative path", n + 1),
            ));
        }
        if out.iter().any(|q| q == p) {
            return Err(Error::invalid(
                path,
                format!("line {}: prefix {p:?} is listed twice", n + 1),
            ));
        }
        out.push(p.to_string());
    }
    Ok(out)
}

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

/// Recreate the symlink `link` (relative to `from`) under `to`, once.
pub(crate) fn keep_link(from: &Path, to: &Path, link: &str) -> Result<()> {
    let src = from.join(link);
    let dst = to.join(link);
    if dst.symlink_metadata().is_ok() {
        return Ok(());
    }
    let target = std::fs::read_link(&src).map_err(|e| Error::io(&src, "cannot read symlink", e))?;
    if let Some(parent) = dst.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, "cannot create", e))?;
    }
    symlink(&target, &dst).map_err(|e| Error::io(&dst, "cannot create symlink", e))
}

/// Write a manifest (one prefix per line, in the given order).
pub fn write_manifest(artifact: &Path, prefixes: &[String]) -> Result<()> {
    let path = artifact.join(MANIFEST);
    std::fs::create_dir_all(artifact)
        .map_err(|e| Error::io(artifact, "cannot create the artifact directory", e))?;
    let mut text = String::new();
    for p in prefixes {
        text.push_str(p);
        text.push('\n');
    }
    std::fs::write(&path, text)
        .map_err(|e| Error::io(&path, "cannot write the artifact manifest", e))
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
        let archive = crate::codec::artifact_archive_stem(&name).is_some()
            && crate::codec::Codec::sniff(&e.path()).is_some();
        if archive || e.path().join(MANIFEST).is_file() {
            names.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}
