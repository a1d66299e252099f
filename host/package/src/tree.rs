//! Package payloads as trees on disk: a tar stream unpacked with one rule
//! for names and links (plain relative paths, nothing under or through a
//! symlink, hard links to earlier files, no name twice), and trees written
//! back as reproducible tar streams (sorted, root-owned, one mtime).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use kpack_fsafe::Tree;

use crate::error::{Error, Result};

/// What a payload member is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A symlink to the target given.
    Symlink(String),
}

/// One member of a payload, as read: its kind and permission bits.
#[derive(Debug, Clone)]
pub struct Member {
    /// What it is.
    pub kind: Kind,
    /// Permission bits (`0o7777`).
    pub mode: u32,
}

/// A payload read into a directory: the members by plain relative path.
#[derive(Debug, Default)]
pub struct Payload {
    /// Every member, by path (`usr/lib/x.so`, no `./`).
    pub members: BTreeMap<String, Member>,
}

/// A member name as a plain relative path (`./usr/lib/` → `usr/lib`), or
/// `None` for the root itself.
pub fn plain_name(raw: &str) -> std::result::Result<Option<String>, String> {
    let trimmed = raw.trim_start_matches("./").trim_start_matches('/');
    let trimmed = trimmed.trim_end_matches('/');
    if trimmed.is_empty() || trimmed == "." {
        return Ok(None);
    }
    if !kpack_fsafe::is_plain_relative(trimmed)
        || trimmed
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(format!("member {raw:?} is not a plain relative path"));
    }
    Ok(Some(trimmed.to_string()))
}

/// Unpack the tar stream `tar` into `dst` (created in its existing
/// parent), naming `input` and `format` in errors; at most `limit` bytes of
/// file data. Every member is written from `dst` down, never through a
/// symlink.
pub fn unpack(
    tar: impl Read,
    dst: &Path,
    input: &Path,
    format: &'static str,
    limit: u64,
) -> Result<Payload> {
    let tree = create_tree(dst)?;
    let bad = |why: String| Error::invalid(input, format, why);
    let mut archive = tar::Archive::new(tar);
    let mut payload = Payload::default();
    let mut links: Vec<(String, String)> = Vec::new();
    let mut total = 0u64;
    let entries = archive
        .entries()
        .map_err(|e| bad(format!("cannot read the payload: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| bad(format!("cannot read the payload: {e}")))?;
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let Some(path) = plain_name(&raw).map_err(&bad)? else {
            continue;
        };
        check_new(&payload, &path).map_err(|e| bad(e.to_string()))?;
        let mode = entry.header().mode().unwrap_or(0o644) & 0o7777;
        let kind = match entry.header().entry_type() {
            tar::EntryType::Directory => {
                make_dir(&tree, &path)?;
                Kind::Dir
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                total = total.saturating_add(entry.header().size().unwrap_or(0));
                if total > limit {
                    return Err(bad(format!("payload inflates past {limit} bytes")));
                }
                write_file(&mut entry, &tree, &path, mode)?;
                Kind::File
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .ok_or_else(|| bad(format!("symlink {path} has no target")))?;
                Kind::Symlink(target)
            }
            tar::EntryType::Link => {
                let target = entry
                    .link_name_bytes()
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .unwrap_or_default();
                let target = plain_name(&target).map_err(&bad)?.unwrap_or_default();
                if !payload
                    .members
                    .get(&target)
                    .is_some_and(|m| m.kind == Kind::File)
                {
                    return Err(bad(format!(
                        "hard link {path} names no earlier file ({target})"
                    )));
                }
                links.push((path.clone(), target));
                Kind::File
            }
            other => {
                return Err(bad(format!(
                    "member {path} is a {other:?}, which kpack does not split"
                )));
            }
        };
        payload.members.insert(path, Member { kind, mode });
    }
    make_links(&tree, &payload, links)?;
    Ok(payload)
}

/// Why a payload path cannot be added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Clash {
    /// The path is there already.
    #[error("{what} {path} comes twice")]
    Twice {
        /// `member` (a `.deb`'s tar) or `file` (an `.rpm`'s header).
        what: &'static str,
        /// The path.
        path: String,
    },
    /// A parent of the path is no directory.
    #[error("{what} {path} lies under {ancestor}, which is not a directory")]
    Under {
        /// `member` or `file`.
        what: &'static str,
        /// The path.
        path: String,
        /// The parent that is not a directory.
        ancestor: String,
    },
}

/// A member's path may be added: not there yet, and under no member
/// that is not a directory.
fn check_new(payload: &Payload, path: &str) -> std::result::Result<(), Clash> {
    if payload.members.contains_key(path) {
        return Err(Clash::Twice {
            what: "member",
            path: path.into(),
        });
    }
    let not_dir = |a: &&str| {
        payload
            .members
            .get(*a)
            .is_some_and(|m| !matches!(m.kind, Kind::Dir))
    };
    match ancestors(path).find(not_dir) {
        Some(anc) => Err(Clash::Under {
            what: "member",
            path: path.into(),
            ancestor: anc.into(),
        }),
        None => Ok(()),
    }
}

/// Hard links as copies of their file (with its mode), symlinks last:
/// nothing is ever written through a link.
fn make_links(tree: &Tree, payload: &Payload, links: Vec<(String, String)>) -> Result<()> {
    for (path, target) in links {
        let from = tree.path().join(&target);
        let mut src = tree
            .open_file(Path::new(&target))
            .map_err(|e| Error::io(&from, "cannot open", e))?;
        let mode = payload.members.get(&target).map_or(0o644, |m| m.mode);
        write_file(&mut src, tree, &path, mode)?;
    }
    symlinks(tree, payload)
}

/// The payload's symlinks, made (never followed) after every file.
pub(crate) fn symlinks(tree: &Tree, payload: &Payload) -> Result<()> {
    for (path, m) in &payload.members {
        if let Kind::Symlink(target) = &m.kind {
            tree.symlink(Path::new(target), Path::new(path))
                .map_err(|e| Error::io(tree.path().join(path), "cannot create a symlink", e))?;
        }
    }
    Ok(())
}

/// Create the directory `dst` (and its missing parents) and open it as
/// the [`Tree`] a payload is written through.
pub(crate) fn create_tree(dst: &Path) -> Result<Tree> {
    Tree::create(dst).map_err(|e| Error::io(dst, "cannot create", e))
}

/// Create the directory `rel` of `tree` and its missing parents.
pub(crate) fn make_dir(tree: &Tree, rel: &str) -> Result<()> {
    tree.create_dir_all(Path::new(rel))
        .map_err(|e| Error::io(tree.path().join(rel), "cannot create", e))
}

/// `a/b/c` → `a/b`, `a`.
pub fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.rmatch_indices('/').map(move |(i, _)| &path[..i])
}

/// Write the new file `rel` of `tree` (never through an existing name or
/// a symlink) from `data`, with the permission bits `mode` where there are
/// any, owner-writable while kpack works on it (the tar writer takes the
/// package's own mode from the member list).
pub(crate) fn write_file(data: &mut impl Read, tree: &Tree, rel: &str, mode: u32) -> Result<()> {
    let at = tree.path().join(rel);
    let mut f = tree
        .create_file(Path::new(rel), (mode | 0o600) & 0o777)
        .map_err(|e| Error::io(&at, "cannot create", e))?;
    std::io::copy(data, &mut f).map_err(|e| Error::io(&at, "cannot write", e))?;
    Ok(())
}

/// One member to write: its path in the tree and its mode.
#[derive(Debug, Clone)]
pub struct OutMember {
    /// Plain relative path.
    pub path: String,
    /// What it is.
    pub kind: Kind,
    /// Permission bits.
    pub mode: u32,
    /// For a file, where its bytes are.
    pub source: Option<PathBuf>,
}

/// The members of the tree `root` (files and symlinks; directories only as
/// the parents of those, plus `extra_dirs`), with modes from `known` when
/// the input had the path, else 0o755 for directories and executables'
/// bits as on disk.
pub fn members_of(
    root: &Path,
    known: &BTreeMap<String, Member>,
    extra_dirs: &BTreeSet<String>,
) -> Result<Vec<OutMember>> {
    let mut out = Vec::new();
    let mut dirs: BTreeSet<String> = extra_dirs.clone();
    if root.is_dir() {
        for e in walkdir::WalkDir::new(root).min_depth(1).sort_by_file_name() {
            let e = e.map_err(|e| Error::io(root, "cannot walk", e.into()))?;
            let rel = e
                .path()
                .strip_prefix(root)
                .ok()
                .and_then(Path::to_str)
                .map(str::to_string)
                .ok_or_else(|| {
                    Error::io(
                        e.path(),
                        "not UTF-8",
                        std::io::ErrorKind::InvalidData.into(),
                    )
                })?;
            let ft = e.file_type();
            if ft.is_dir() {
                continue;
            }
            dirs.extend(ancestors(&rel).map(str::to_string));
            let kind = if ft.is_symlink() {
                let t = std::fs::read_link(e.path())
                    .map_err(|er| Error::io(e.path(), "cannot read", er))?;
                Kind::Symlink(t.to_string_lossy().into_owned())
            } else {
                Kind::File
            };
            let mode = match known.get(&rel) {
                Some(m) if m.kind != Kind::Dir => m.mode,
                _ => default_mode(e.path()),
            };
            let source = (kind == Kind::File).then(|| e.path().to_path_buf());
            out.push(OutMember {
                path: rel,
                kind,
                mode,
                source,
            });
        }
    }
    for d in dirs {
        let mode = known.get(&d).map_or(0o755, |m| m.mode);
        out.push(OutMember {
            path: d,
            kind: Kind::Dir,
            mode,
            source: None,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

#[cfg(unix)]
fn default_mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(p) {
        Ok(m) if m.permissions().mode() & 0o111 != 0 => 0o755,
        _ => 0o644,
    }
}

#[cfg(not(unix))]
fn default_mode(_: &Path) -> u32 {
    0o644
}

/// Write `members` as a tar stream (`./`-prefixed names, GNU headers,
/// owner root:root, every mtime `mtime`) into `w`.
pub fn write_tar(w: impl Write, members: &[OutMember], mtime: u64) -> std::io::Result<()> {
    let mut b = tar::Builder::new(w);
    b.mode(tar::HeaderMode::Deterministic);
    let header = |kind: tar::EntryType, mode: u32, size: u64| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_mtime(mtime);
        h.set_uid(0);
        h.set_gid(0);
        let _ = h.set_username("root");
        let _ = h.set_groupname("root");
        h
    };
    let mut root = header(tar::EntryType::Directory, 0o755, 0);
    b.append_data(&mut root, "./", std::io::empty())?;
    for m in members {
        let name = format!("./{}", m.path);
        match &m.kind {
            Kind::Dir => {
                let mut h = header(tar::EntryType::Directory, m.mode, 0);
                b.append_data(&mut h, format!("{name}/"), std::io::empty())?;
            }
            Kind::Symlink(t) => {
                let mut h = header(tar::EntryType::Symlink, 0o777, 0);
                b.append_link(&mut h, &name, t)?;
            }
            Kind::File => {
                let src = m.source.as_deref().unwrap_or(Path::new("/dev/null"));
                let f = std::fs::File::open(src)?;
                let size = f.metadata()?.len();
                let mut h = header(tar::EntryType::Regular, m.mode, size);
                b.append_data(&mut h, &name, f)?;
            }
        }
    }
    b.into_inner()?.flush()
}

/// A tar stream built in memory from `(name, mode, bytes)` files (a
/// control archive).
pub fn write_tar_files(files: &[(String, u32, Vec<u8>)], mtime: u64) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    let mk = |kind: tar::EntryType, mode: u32, size: u64| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_mtime(mtime);
        let _ = h.set_username("root");
        let _ = h.set_groupname("root");
        h
    };
    b.append_data(
        &mut mk(tar::EntryType::Directory, 0o755, 0),
        "./",
        std::io::empty(),
    )?;
    let mut sorted: Vec<&(String, u32, Vec<u8>)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, mode, bytes) in sorted {
        let mut h = mk(tar::EntryType::Regular, *mode, bytes.len() as u64);
        b.append_data(&mut h, format!("./{name}"), bytes.as_slice())?;
    }
    b.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_name_strips_dot_slash_and_refuses_dotdot() {
        assert_eq!(
            plain_name("./usr/lib/").unwrap().as_deref(),
            Some("usr/lib")
        );
        assert_eq!(plain_name("./").unwrap(), None);
        assert!(plain_name("./usr/../etc/passwd").is_err());
    }

    #[test]
    #[cfg(unix)]
    fn never_writes_a_member_through_a_symlink_planted_in_the_tree() {
        let mut t = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(1);
        h.set_mode(0o644);
        t.append_data(&mut h, "./usr/lib/x", &b"x"[..]).unwrap();
        let bytes = t.into_inner().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (dst, victim) = (dir.path().join("t"), dir.path().join("victim"));
        std::fs::create_dir(&dst).unwrap();
        std::fs::create_dir(&victim).unwrap();
        std::os::unix::fs::symlink(&victim, dst.join("usr")).unwrap();
        let e = unpack(bytes.as_slice(), &dst, Path::new("p.deb"), "deb", 1 << 20).unwrap_err();
        assert!(e.to_string().contains("t/usr/lib"), "{e}");
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
    }

    #[test]
    fn refuses_member_under_a_symlink() {
        let mut t = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        t.append_link(&mut h, "./usr/lib", "/etc").unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_size(1);
        h.set_mode(0o644);
        t.append_data(&mut h, "./usr/lib/x", &b"x"[..]).unwrap();
        let bytes = t.into_inner().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let e = unpack(
            bytes.as_slice(),
            &dir.path().join("t"),
            Path::new("p.deb"),
            "deb",
            1 << 20,
        )
        .unwrap_err();
        assert!(e.to_string().contains("lies under usr/lib"), "{e}");
    }
}
