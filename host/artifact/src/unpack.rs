//! Unpacking artifact archives (verify's and recombine's input) and their
//! equivalence manifests, both through the one member walk. Unpacking
//! writes through a no-follow [`kpack_fsafe::Tree`]: several archives
//! merge into one directory, and a symlink one of them left there is
//! never written through by the next.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use kpack_fsafe::{Entry, Tree};
use sha2::Digest;

use crate::archive_output::{EQUIVALENCE_SCHEMA, EquivalenceFile, EquivalenceManifest};
use crate::codec::{Codec, Limits, artifact_archive_stem};
use crate::error::{Error, Result};
use crate::manifest::write_manifest;
use crate::member::{Event, MemberKind, walk};

/// Unpack the artifact archive `archive` into the directory `dst`, merging
/// with what is there (recombine's merge of arch artifacts): directories
/// merge, a file or symlink already there must be the same, modes and
/// hard links are kept, symlinks are made after every file. The archive's
/// manifest is not written. Returns the manifest's prefixes that held
/// members, in manifest order, and the walk's warnings.
pub fn unpack_artifact(
    archive: &Path,
    dst: &Path,
    limits: &Limits,
) -> Result<(Vec<String>, Vec<String>)> {
    let tree = Tree::create(dst).map_err(|e| Error::io(dst, "cannot create", e))?;
    let mut symlinks: Vec<(PathBuf, PathBuf)> = Vec::new();
    let walked = walk(archive, limits, |event| {
        let Event::Member(mut m) = event else {
            return Ok::<(), Error>(());
        };
        let rel = m.path.as_path().to_path_buf();
        let at = dst.join(&rel);
        match m.kind.clone() {
            MemberKind::Dir => tree
                .create_dir_all(&rel)
                .map_err(|e| Error::io(&at, "cannot create", e)),
            MemberKind::Symlink(target) => {
                symlinks.push((rel, target));
                Ok(())
            }
            MemberKind::HardLink(target) => {
                if tree.entry(&rel).is_none() {
                    tree.hard_link(target.as_path(), &rel)
                        .map_err(|e| Error::io(&at, "cannot create a hard link", e))?;
                }
                Ok(())
            }
            MemberKind::File { mode, .. } => place_file(&tree, &rel, mode, m.data(), &at, archive),
        }
    })?;
    for (rel, target) in symlinks {
        let at = dst.join(&rel);
        match tree.read_link(&rel) {
            Ok(t) if t == target => {}
            Ok(t) => {
                return Err(Error::invalid(
                    &at,
                    format!(
                        "two artifacts disagree: symlink to {} and to {}",
                        t.display(),
                        target.display()
                    ),
                ));
            }
            Err(_) => tree
                .symlink(&target, &rel)
                .map_err(|e| Error::io(&at, "cannot create symlink", e))?,
        }
    }
    let prefixes = walked
        .prefixes
        .iter()
        .filter(|p| walked.seen.contains(*p))
        .cloned()
        .collect();
    Ok((prefixes, walked.warnings))
}

/// Write the member file `rel` into `tree`, or check that the file there
/// already has the same bytes.
fn place_file(
    tree: &Tree,
    rel: &Path,
    mode: u32,
    data: &mut dyn Read,
    at: &Path,
    archive: &Path,
) -> Result<()> {
    match tree.entry(rel) {
        None => {
            let f = tree
                .create_file(rel, mode)
                .map_err(|e| Error::io(at, "cannot create", e))?;
            let mut out = std::io::BufWriter::with_capacity(1 << 20, f);
            std::io::copy(data, &mut out).map_err(|e| Error::io(at, "cannot write", e))?;
            std::io::Write::flush(&mut out).map_err(|e| Error::io(at, "cannot write", e))
        }
        Some(Entry::File) => {
            let mut f = tree
                .open_file(rel)
                .map_err(|e| Error::io(at, "cannot open", e))?;
            if same_contents(data, &mut f).map_err(|e| Error::io(at, "cannot compare", e))? {
                Ok(())
            } else {
                Err(Error::invalid(
                    at,
                    format!(
                        "two artifacts provide different files here (second: {})",
                        archive.display()
                    ),
                ))
            }
        }
        Some(_) => Err(Error::invalid(
            at,
            format!(
                "two artifacts disagree: a file in {} and something else before it",
                archive.display()
            ),
        )),
    }
}

/// Whether the rest of `a` equals the rest of `b`, read side by side.
fn same_contents(a: &mut dyn Read, b: &mut impl Read) -> std::io::Result<bool> {
    let mut b = std::io::BufReader::new(b);
    let (mut x, mut y) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = read_full(a, &mut x)?;
        let m = read_full(&mut b, &mut y[..n.max(1)])?;
        if n != m || x[..n] != y[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

fn read_full(r: &mut (impl Read + ?Sized), buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The equivalence manifest of the artifact archive at `path`, computed
/// from the stream (regular files and hard links, not symlinks), as
/// TheRock's script computes it from the unpacked directory.
pub fn archive_manifest(path: &Path, limits: &Limits) -> Result<EquivalenceManifest> {
    let mut files: Vec<EquivalenceFile> = Vec::new();
    let mut by_path: HashMap<String, usize> = HashMap::new();
    walk(path, limits, |event| {
        let Event::Member(mut m) = event else {
            return Ok::<(), Error>(());
        };
        match m.kind.clone() {
            MemberKind::File { .. } => {
                let mut h = sha2::Sha256::new();
                let shown = path.join(m.path.as_path());
                let n = std::io::copy(m.data(), &mut h)
                    .map_err(|e| Error::io(shown, "cannot read", e))?;
                by_path.insert(m.path.as_str().to_string(), files.len());
                files.push(EquivalenceFile {
                    path: m.path.as_str().to_string(),
                    sha256: hex::encode(h.finalize()),
                    size_bytes: n,
                });
            }
            MemberKind::HardLink(target) => {
                if let Some(f) = by_path.get(target.as_str()).map(|&i| files[i].clone()) {
                    by_path.insert(m.path.as_str().to_string(), files.len());
                    files.push(EquivalenceFile {
                        path: m.path.as_str().to_string(),
                        ..f
                    });
                }
            }
            MemberKind::Dir | MemberKind::Symlink(_) => {}
        }
        Ok(())
    })?;
    files.sort_by(|a, b| a.path.split('/').cmp(b.path.split('/')));
    Ok(EquivalenceManifest {
        files,
        schema: EQUIVALENCE_SCHEMA.into(),
    })
}

/// The equivalence manifest of an artifact: a directory or an archive.
pub fn artifact_manifest(path: &Path, limits: &Limits) -> Result<EquivalenceManifest> {
    if Codec::sniff(path).is_some() {
        archive_manifest(path, limits)
    } else {
        crate::directory_manifest(path)
    }
}

/// Every artifact archive of `dir` (or `dir` itself when it is one),
/// unpacked into `into/<name without suffix>` with its manifest.
#[derive(Debug, Default)]
pub struct Unpacked {
    /// (unpacked directory, archive) pairs, sorted.
    pub artifacts: Vec<(PathBuf, PathBuf)>,
    /// The walks' warnings.
    pub warnings: Vec<String>,
}

/// Unpack every artifact archive of `dir` (or `dir` itself when it is
/// one) into `into/<name without suffix>`.
pub fn unpack_archives(dir: &Path, into: &Path, limits: &Limits) -> Result<Unpacked> {
    let archives: Vec<PathBuf> = if Codec::sniff(dir).is_some() {
        vec![dir.to_path_buf()]
    } else {
        let mut v = Vec::new();
        for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, "cannot list", e))? {
            let e = e.map_err(|e| Error::io(dir, "cannot list", e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if artifact_archive_stem(&name).is_some() && Codec::sniff(&e.path()).is_some() {
                v.push(e.path());
            }
        }
        v.sort();
        v
    };
    let mut out = Unpacked::default();
    for a in archives {
        let name = a
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem = artifact_archive_stem(&name).unwrap_or(&name);
        let d = into.join(stem);
        let (prefixes, warnings) = unpack_artifact(&a, &d, limits)?;
        write_manifest(&d, &prefixes)?;
        out.warnings.extend(warnings);
        out.artifacts.push((d, a));
    }
    Ok(out)
}
