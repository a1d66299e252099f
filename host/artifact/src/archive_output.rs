//! Output artifacts as TheRock artifact archives (`--output-format
//! tar.zst`): one `<component>_<arch>.tar.zst` per output, byte-identical
//! on every run and at any thread count (entries sorted, the manifest
//! first as TheRock's reader requires, one mtime, uid/gid 0, no owner
//! names, normalised modes, hard links kept), and beside it a sha256
//! manifest of its files in TheRock's `therock.artifact_equivalence.v1`
//! shape (`<name>.artifact_equivalence.json`).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::error::{Error, Result};
use crate::manifest::MANIFEST;
use crate::store::{Store, StoreReader, Stored};

/// How output artifacts are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// A directory per output artifact (the default).
    #[default]
    Dir,
    /// A `.tar.zst` artifact archive per output artifact, with its
    /// equivalence manifest.
    TarZst,
}

/// The schema of TheRock's artifact equivalence manifests.
pub const EQUIVALENCE_SCHEMA: &str = "therock.artifact_equivalence.v1";
/// The suffix of an output artifact archive.
pub const ARCHIVE_SUFFIX: &str = ".tar.zst";
/// The suffix of its equivalence manifest.
pub const EQUIVALENCE_SUFFIX: &str = ".artifact_equivalence.json";
/// The zstd level of output archives (TheRock's default).
const ARCHIVE_LEVEL: i32 = 3;

/// A sha256 manifest of an artifact's regular files (symlinks are not
/// listed), sorted by path component by component, as TheRock's
/// `artifact_equivalence_manifest.py` writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EquivalenceManifest {
    /// Every regular file.
    pub files: Vec<EquivalenceFile>,
    /// [`EQUIVALENCE_SCHEMA`].
    pub schema: String,
}

/// One file of an [`EquivalenceManifest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EquivalenceFile {
    /// Path inside the artifact, `/`-separated.
    pub path: String,
    /// Lower-case hex sha256 of the contents.
    pub sha256: String,
    /// Size in bytes.
    pub size_bytes: u64,
}

impl EquivalenceManifest {
    /// The JSON text (two-space indent, sorted keys, final newline: the
    /// bytes TheRock's writer produces for ASCII paths).
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// The first file that differs from `other` (path, then what differs),
    /// or `None` when both list the same files with the same contents.
    pub fn first_difference(&self, other: &EquivalenceManifest) -> Option<String> {
        let mut a = self.files.iter();
        let mut b = other.files.iter();
        loop {
            match (a.next(), b.next()) {
                (None, None) => return None,
                (Some(x), None) => return Some(format!("{}: only in the first", x.path)),
                (None, Some(y)) => return Some(format!("{}: only in the second", y.path)),
                (Some(x), Some(y)) if x.path != y.path => {
                    let first = x.path.as_str().min(y.path.as_str());
                    return Some(format!("{first}: only in one of them"));
                }
                (Some(x), Some(y)) if x != y => {
                    return Some(format!("{}: contents differ", x.path));
                }
                _ => {}
            }
        }
    }
}

/// One member of an output archive, in writing order.
enum Member {
    Dir(String),
    Link(String, PathBuf),
    File(String, PathBuf),
    /// A file of the store.
    Stored(String, Stored),
    HardLink(String, String),
}

impl Member {
    fn path(&self) -> &str {
        match self {
            Member::Dir(p)
            | Member::Link(p, _)
            | Member::File(p, _)
            | Member::Stored(p, _)
            | Member::HardLink(p, _) => p,
        }
    }
}

/// Write the staged artifact directory `dir` as the archive `dest` (a new
/// file) with `mtime` on every member; returns its equivalence manifest.
pub fn write_artifact_archive(dir: &Path, dest: &Path, mtime: u64) -> Result<EquivalenceManifest> {
    write_archive_with(dir, dest, mtime, None)
}

/// [`write_artifact_archive`] of `dir` with the files of `store` placed
/// in it.
pub fn write_archive_with(
    dir: &Path,
    dest: &Path,
    mtime: u64,
    store: Option<&Store>,
) -> Result<EquivalenceManifest> {
    let mut members = members(dir)?;
    let mut reader = None;
    if let Some(store) = store {
        add_stored(&mut members, store.placed_under(dir));
        reader = Some(
            store
                .reader()
                .map_err(|e| Error::io(dest, "cannot read the store", e))?,
        );
    }
    let file = std::fs::File::create_new(dest).map_err(|e| Error::io(dest, "cannot create", e))?;
    let mut enc = zstd::stream::write::Encoder::new(std::io::BufWriter::new(file), ARCHIVE_LEVEL)
        .map_err(|e| Error::io(dest, "cannot start compressing", e))?;
    enc.include_checksum(true)
        .map_err(|e| Error::io(dest, "cannot start compressing", e))?;
    let mut tar = tar::Builder::new(enc);
    tar.mode(tar::HeaderMode::Deterministic);
    let mut files = Vec::new();
    for m in &members {
        append(&mut tar, m, mtime, &mut files, reader.as_mut())
            .map_err(|e| Error::io(dest, "cannot write", e))?;
    }
    let enc = tar
        .into_inner()
        .map_err(|e| Error::io(dest, "cannot write", e))?;
    let mut out = enc
        .finish()
        .map_err(|e| Error::io(dest, "cannot write", e))?;
    out.flush()
        .map_err(|e| Error::io(dest, "cannot write", e))?;
    // The manifest lists files component by component, as TheRock's does.
    files.sort_by(|a, b| a.path.split('/').cmp(b.path.split('/')));
    Ok(EquivalenceManifest {
        files,
        schema: EQUIVALENCE_SCHEMA.into(),
    })
}

/// `dir`'s members: the manifest first, then everything else in path
/// order, component by component; a file seen again under another name
/// (same device and inode) becomes a hard link to the first.
fn members(dir: &Path) -> Result<Vec<Member>> {
    let mut out = Vec::new();
    if dir.join(MANIFEST).is_file() {
        out.push(Member::File(MANIFEST.into(), dir.join(MANIFEST)));
    }
    let mut seen: HashMap<(u64, u64), String> = HashMap::new();
    for e in sorted_walk(dir) {
        let (e, rel) = e?;
        if rel == MANIFEST {
            continue;
        }
        let ft = e.file_type();
        if ft.is_dir() {
            out.push(Member::Dir(rel));
        } else if ft.is_symlink() {
            let t = std::fs::read_link(e.path())
                .map_err(|err| Error::io(e.path(), "cannot read symlink", err))?;
            out.push(Member::Link(rel, t));
        } else {
            let key = inode(e.path());
            match key.and_then(|k| seen.get(&k).cloned()) {
                Some(first) => out.push(Member::HardLink(rel, first)),
                None => {
                    if let Some(k) = key {
                        seen.insert(k, rel.clone());
                    }
                    out.push(Member::File(rel, e.path().to_path_buf()));
                }
            }
        }
    }
    Ok(out)
}

/// Add the stored files `stored` to `members` (the manifest first, the
/// rest in path order), keeping that order: a stored file seen again (two
/// links to it) becomes a hard link to the first in path order.
fn add_stored(members: &mut Vec<Member>, mut stored: Vec<(String, Stored)>) {
    if stored.is_empty() {
        return;
    }
    stored.sort_by(|a, b| a.0.split('/').cmp(b.0.split('/')));
    let mut seen: HashMap<u64, String> = HashMap::new();
    members.extend(
        stored
            .into_iter()
            .map(|(rel, s)| match seen.get(&s.offset()) {
                Some(first) => Member::HardLink(rel, first.clone()),
                None => {
                    seen.insert(s.offset(), rel.clone());
                    Member::Stored(rel, s)
                }
            }),
    );
    let first = usize::from(matches!(members.first(), Some(Member::File(p, _)) if p == MANIFEST));
    members[first..].sort_by(|a, b| a.path().split('/').cmp(b.path().split('/')));
}

/// Everything below `dir` (not `dir` itself, symlinks not followed), in
/// file-name order, with its path relative to `dir`, `/`-separated.
pub fn sorted_walk(dir: &Path) -> impl Iterator<Item = Result<(walkdir::DirEntry, String)>> + '_ {
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .follow_links(false)
        .min_depth(1)
        .into_iter()
        .map(move |e| {
            let e = e.map_err(|e| {
                let p = e.path().unwrap_or(dir).to_path_buf();
                Error::new(crate::ErrorKind::Io, Some(p), "cannot walk").with_source(e)
            })?;
            let rel = e
                .path()
                .strip_prefix(dir)
                .unwrap_or(e.path())
                .to_string_lossy()
                .replace(std::path::MAIN_SEPARATOR, "/");
            Ok((e, rel))
        })
}

/// The (device, inode) of a file with more than one link.
#[cfg(unix)]
fn inode(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(p).ok()?;
    (m.nlink() > 1).then(|| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn inode(_: &Path) -> Option<(u64, u64)> {
    None
}

/// The permission bits of the regular file at `p` (0644 off Unix).
fn file_mode(p: &Path) -> u32 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(m) = std::fs::metadata(p) {
            return m.permissions().mode();
        }
    }
    #[cfg(not(unix))]
    let _ = p;
    0o644
}

/// The normalised mode of a regular file with permission bits `mode`:
/// 0755 when any execute bit is set, else 0644.
fn normalised(mode: u32) -> u32 {
    if mode & 0o111 != 0 { 0o755 } else { 0o644 }
}

fn header(kind: tar::EntryType, mode: u32, mtime: u64, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_mtime(mtime);
    h.set_uid(0);
    h.set_gid(0);
    h.set_size(size);
    h
}

fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    m: &Member,
    mtime: u64,
    files: &mut Vec<EquivalenceFile>,
    store: Option<&mut StoreReader>,
) -> std::io::Result<()> {
    match m {
        Member::Dir(rel) => {
            let mut h = header(tar::EntryType::Directory, 0o755, mtime, 0);
            tar.append_data(&mut h, format!("{rel}/"), std::io::empty())
        }
        Member::Link(rel, target) => {
            let mut h = header(tar::EntryType::Symlink, 0o777, mtime, 0);
            tar.append_link(&mut h, rel, target)
        }
        Member::HardLink(rel, first) => {
            let mut h = header(tar::EntryType::Link, 0o644, mtime, 0);
            tar.append_link(&mut h, rel, first)?;
            if let Some(f) = files.iter().find(|f| &f.path == first).cloned() {
                files.push(EquivalenceFile {
                    path: rel.clone(),
                    ..f
                });
            }
            Ok(())
        }
        Member::File(rel, path) => {
            let f = std::fs::File::open(path)?;
            let size = f.metadata()?.len();
            append_file(tar, rel, normalised(file_mode(path)), mtime, size, f, files)
        }
        Member::Stored(rel, s) => {
            let store =
                store.ok_or_else(|| std::io::Error::other("a stored file without its store"))?;
            append_file(
                tar,
                rel,
                normalised(s.mode),
                mtime,
                s.len,
                store.range(s)?,
                files,
            )
        }
    }
}

/// Append a regular file of `size` bytes read from `from`, and list it.
fn append_file<W: Write>(
    tar: &mut tar::Builder<W>,
    rel: &str,
    mode: u32,
    mtime: u64,
    size: u64,
    from: impl Read,
    files: &mut Vec<EquivalenceFile>,
) -> std::io::Result<()> {
    let mut h = header(tar::EntryType::Regular, mode, mtime, size);
    let mut hashing = HashingReader {
        inner: from,
        hash: sha2::Sha256::new(),
    };
    tar.append_data(&mut h, rel, &mut hashing)?;
    files.push(EquivalenceFile {
        path: rel.to_string(),
        sha256: hex::encode(hashing.hash.finalize()),
        size_bytes: size,
    });
    Ok(())
}

/// A reader that hashes what passes through it.
struct HashingReader<R> {
    inner: R,
    hash: sha2::Sha256,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

/// The equivalence manifest of an artifact directory (regular files, not
/// symlinks, component by component), as TheRock's script computes it.
pub fn directory_manifest(dir: &Path) -> Result<EquivalenceManifest> {
    let mut files = Vec::new();
    for e in sorted_walk(dir) {
        let (e, rel) = e?;
        if !e.file_type().is_file() {
            continue;
        }
        let mut f =
            std::fs::File::open(e.path()).map_err(|err| Error::io(e.path(), "cannot open", err))?;
        let mut h = sha2::Sha256::new();
        let n =
            std::io::copy(&mut f, &mut h).map_err(|err| Error::io(e.path(), "cannot read", err))?;
        files.push(EquivalenceFile {
            path: rel,
            sha256: hex::encode(h.finalize()),
            size_bytes: n,
        });
    }
    Ok(EquivalenceManifest {
        files,
        schema: EQUIVALENCE_SCHEMA.into(),
    })
}
