//! `artifact_manifest.txt`: one prefix directory per line, relative to the
//! artifact; blank lines ignored, lines trimmed (AMD's rules, spec §6.1).

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// The manifest's file name inside an artifact directory.
pub const MANIFEST: &str = "artifact_manifest.txt";

/// Read and validate an artifact directory's manifest: every prefix
/// relative, without `..`, `\`, or repeats.
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
pub fn parse_manifest(path: &Path, text: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
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
        if p == MANIFEST {
            return Err(Error::invalid(
                path,
                format!("line {}: prefix {p:?} is the manifest itself", n + 1),
            ));
        }
        if !seen.insert(p) {
            return Err(Error::invalid(
                path,
                format!("line {}: prefix {p:?} is listed twice", n + 1),
            ));
        }
        out.push(p.to_string());
    }
    Ok(out)
}

/// Write a manifest (one prefix per line, in the given order) into the
/// artifact directory `artifact`, replacing a manifest file there; a
/// symlink in its place is an error, never written through.
pub fn write_manifest(artifact: &Path, prefixes: &[String]) -> Result<()> {
    let path = artifact.join(MANIFEST);
    let tree = kpack_fsafe::Tree::create(artifact)
        .map_err(|e| Error::io(artifact, "cannot create the artifact directory", e))?;
    match tree.entry(Path::new(MANIFEST)) {
        None => {}
        Some(kpack_fsafe::Entry::File) => std::fs::remove_file(&path)
            .map_err(|e| Error::io(&path, "cannot replace the artifact manifest", e))?,
        Some(_) => {
            return Err(Error::invalid(
                &path,
                "is not a regular file; the artifact manifest is never written through a link",
            ));
        }
    }
    let mut text = String::new();
    for p in prefixes {
        text.push_str(p);
        text.push('\n');
    }
    tree.create_file(Path::new(MANIFEST), 0o644)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| Error::io(&path, "cannot write the artifact manifest", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_refuse_repeats_escapes_and_themselves() {
        let p = Path::new("m");
        assert_eq!(parse_manifest(p, "a\n\n b/ \n").unwrap(), ["a", "b"]);
        for bad in ["a\na\n", "../x\n", "/abs\n", "artifact_manifest.txt\n"] {
            assert!(parse_manifest(p, bad).is_err(), "{bad:?}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_manifest_symlink_is_never_written_through() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let art = d.path().join("art");
        std::fs::create_dir(&art).unwrap();
        std::os::unix::fs::symlink(&victim, art.join(MANIFEST)).unwrap();
        assert!(write_manifest(&art, &["a".into()]).is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        std::fs::remove_file(art.join(MANIFEST)).unwrap();
        write_manifest(&art, &["a".into()]).unwrap();
        write_manifest(&art, &["b".into()]).unwrap();
        assert_eq!(read_manifest(&art).unwrap(), ["b"]);
    }
}
