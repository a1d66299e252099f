//! The one walk over an artifact archive's members, and the one rule
//! every member name and link obeys. An artifact archive is untrusted
//! input: its names decide where the split, the unpacker and the
//! equivalence manifest put or read bytes. So every name is checked here,
//! once, before any caller sees it:
//!
//! - a member's path is a plain relative UTF-8 path ([`MemberPath`]);
//! - it lies inside a prefix of the artifact's manifest (or is a
//!   directory above one);
//! - no name comes twice (a directory listed again aside), and none lies
//!   under a member that is not a directory (a symlink or a file): nothing
//!   is ever created under a symlink member, or through one;
//! - a hard link names an earlier regular file of the same archive;
//! - a symlink's target is kept as it is, and one that leaves the artifact
//!   is named in a warning (callers create symlinks last, after every
//!   file, and never write through them).

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::codec::{Codec, Limits};
use crate::error::{Error, ErrorKind, Result};
use crate::manifest::{MANIFEST, parse_manifest};

/// The largest `artifact_manifest.txt` read.
const MANIFEST_LIMIT: u64 = 16 << 20;

/// A member name that is safe to join onto an output root: non-empty,
/// relative, `/`-separated, without `.`, `..` or empty components (`./`
/// and a trailing `/` are dropped when parsed).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemberPath(String);

impl MemberPath {
    /// `raw` as a member path: `Ok(None)` for the archive's root (`.`,
    /// `./`), an error message for anything unsafe.
    pub fn parse(raw: &[u8]) -> std::result::Result<Option<MemberPath>, String> {
        let text = std::str::from_utf8(raw).map_err(|_| "path is not UTF-8".to_string())?;
        let mut p = text;
        while let Some(rest) = p.strip_prefix("./") {
            p = rest;
        }
        let p = p.trim_end_matches('/');
        if p.is_empty() || p == "." {
            return Ok(None);
        }
        if !kpack_fsafe::is_plain_relative(p) {
            return Err(format!("{text:?} is not a plain relative path"));
        }
        Ok(Some(MemberPath(p.to_string())))
    }

    /// The path, `/`-separated.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path as a relative [`Path`].
    pub fn as_path(&self) -> &Path {
        Path::new(&self.0)
    }

    /// Its ancestors, nearest first (`a/b` and `a` for `a/b/c`).
    fn ancestors(&self) -> impl Iterator<Item = &str> {
        let s = self.0.as_str();
        s.rmatch_indices('/').map(move |(i, _)| &s[..i])
    }
}

impl std::fmt::Display for MemberPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a member is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberKind {
    /// A directory.
    Dir,
    /// A regular file with its permission bits; its bytes are read from
    /// the [`Member`].
    File {
        /// Permission bits (`0o777` at most).
        mode: u32,
        /// Its size as the header says.
        size: u64,
    },
    /// A symlink and its target, as the archive has it.
    Symlink(PathBuf),
    /// A hard link to the earlier regular file named.
    HardLink(MemberPath),
}

/// One member, checked: what the walk hands its visitor.
pub struct Member<'a> {
    /// Its path in the artifact.
    pub path: MemberPath,
    /// The manifest prefix it lies in.
    pub prefix: &'a str,
    /// Its path inside that prefix (empty for the prefix itself).
    pub rel: &'a str,
    /// The offset of its header in the uncompressed archive.
    pub offset: u64,
    /// What it is.
    pub kind: MemberKind,
    data: &'a mut dyn Read,
}

impl Member<'_> {
    /// The bytes of a regular file (empty for anything else).
    pub fn data(&mut self) -> &mut dyn Read {
        &mut *self.data
    }
}

/// What the walk hands its visitor, in archive order.
pub enum Event<'a> {
    /// The manifest's prefixes (first, once).
    Manifest(&'a [String]),
    /// A member after the manifest.
    Member(Member<'a>),
}

/// What a finished walk found besides its members.
#[derive(Debug, Default)]
pub struct Walked {
    /// The manifest's prefixes, in manifest order.
    pub prefixes: Vec<String>,
    /// The prefixes that held at least one member.
    pub seen: HashSet<String>,
    /// Symlinks whose target leaves the artifact, one line each.
    pub warnings: Vec<String>,
}

/// The manifest's prefixes, looked up by path in time linear in the
/// path's depth (an artifact may list tens of thousands).
struct Prefixes {
    list: Vec<String>,
    set: HashSet<String>,
    /// Every directory above a prefix.
    above: HashSet<String>,
}

impl Prefixes {
    fn new(list: Vec<String>) -> Prefixes {
        let set: HashSet<String> = list.iter().cloned().collect();
        let mut above = HashSet::new();
        for p in &list {
            for (i, _) in p.rmatch_indices('/') {
                above.insert(p[..i].to_string());
            }
        }
        Prefixes { list, set, above }
    }

    /// The longest prefix `path` lies in, and its length.
    fn of<'p>(&'p self, path: &MemberPath) -> Option<&'p str> {
        std::iter::once(path.as_str())
            .chain(path.ancestors())
            .find_map(|p| self.set.get(p).map(String::as_str))
    }
}

/// The walk's memory of the names it has seen.
#[derive(Default)]
struct Seen {
    kinds: HashMap<String, Kind>,
    /// Every directory holding a member, listed or not.
    holders: HashSet<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Symlink,
}

/// Walk the artifact archive at `archive` under `limits`: its manifest,
/// then every member, each checked by the module's rule before `visit`
/// sees it.
pub fn walk<E: From<Error>>(
    archive: &Path,
    limits: &Limits,
    mut visit: impl FnMut(Event<'_>) -> std::result::Result<(), E>,
) -> std::result::Result<Walked, E> {
    let mut tar = open(archive, limits)?;
    let mut entries = tar
        .entries()
        .map_err(|e| Error::io(archive, "cannot read the archive", e))?;
    let prefixes = Prefixes::new(read_manifest_member(archive, entries.next())?);
    visit(Event::Manifest(&prefixes.list))?;
    let mut seen = Seen::default();
    let mut walked = Walked::default();
    for entry in entries {
        let mut entry = entry.map_err(|e| Error::io(archive, "cannot read the archive", e))?;
        let Some((path, prefix, kind, at)) = check(archive, &entry, &prefixes, &mut seen)? else {
            continue;
        };
        if let MemberKind::Symlink(target) = &kind
            && leaves(&path, target)
        {
            walked.warnings.push(format!(
                "{}: symlink {path} -> {} points outside the artifact; kept as a link, never followed",
                archive.display(),
                target.display()
            ));
        }
        walked.seen.insert(prefix.to_string());
        let rel = path
            .as_str()
            .strip_prefix(prefix)
            .map_or("", |r| r.trim_start_matches('/'))
            .to_string();
        let member = Member {
            prefix,
            rel: &rel,
            offset: at,
            kind,
            data: &mut entry,
            path,
        };
        visit(Event::Member(member))?;
    }
    walked.prefixes = prefixes.list;
    Ok(walked)
}

/// The member `entry`, checked against the rule, or `None` for what the
/// walk passes over (global headers, the root, directories above a
/// prefix, a directory listed again).
fn check<'p, R: Read>(
    archive: &Path,
    entry: &tar::Entry<'_, R>,
    prefixes: &'p Prefixes,
    seen: &mut Seen,
) -> Result<Option<(MemberPath, &'p str, MemberKind, u64)>> {
    use tar::EntryType as T;
    let at = entry.raw_header_position();
    let kind = entry.header().entry_type();
    if matches!(kind, T::XGlobalHeader) {
        return Ok(None);
    }
    let raw = entry.path_bytes();
    let path = match MemberPath::parse(&raw) {
        Ok(Some(p)) => p,
        Ok(None) if kind.is_dir() => return Ok(None),
        Ok(None) => {
            return Err(bad(
                archive,
                at,
                ".",
                "the archive's root is not a directory",
            ));
        }
        Err(what) => {
            return Err(Error::invalid(
                archive,
                format!("member at offset {at:#x}: {what}"),
            ));
        }
    };
    let shown = path.as_str().to_string();
    let Some(prefix) = prefixes.of(&path) else {
        if kind.is_dir() && prefixes.above.contains(path.as_str()) {
            return Ok(None);
        }
        return Err(bad(
            archive,
            at,
            &shown,
            "not inside any prefix of the artifact manifest",
        ));
    };
    let member = member_kind(archive, entry, at, &shown, seen)?;
    if seen.remember(archive, at, &path, &member)? {
        Ok(Some((path, prefix, member, at)))
    } else {
        Ok(None)
    }
}

/// What the member `entry` (shown as `shown`, at `at`) is: its kind, mode,
/// symlink target or the earlier file a hard link names.
fn member_kind<R: Read>(
    archive: &Path,
    entry: &tar::Entry<'_, R>,
    at: u64,
    shown: &str,
    seen: &Seen,
) -> Result<MemberKind> {
    use tar::EntryType as T;
    let kind = entry.header().entry_type();
    Ok(match kind {
        T::Directory => MemberKind::Dir,
        T::Regular | T::Continuous => MemberKind::File {
            mode: entry.header().mode().unwrap_or(0o644) & 0o777,
            size: entry.header().size().unwrap_or(0),
        },
        T::Symlink => {
            let target = entry
                .link_name()
                .map_err(|e| Error::io(archive, "cannot read the archive", e))?
                .filter(|t| !t.as_os_str().is_empty())
                .ok_or_else(|| bad(archive, at, shown, "symlink without a target"))?;
            MemberKind::Symlink(target.into_owned())
        }
        T::Link => {
            let raw = entry
                .link_name_bytes()
                .ok_or_else(|| bad(archive, at, shown, "hard link without a target"))?;
            let target = match MemberPath::parse(&raw) {
                Ok(Some(t)) => t,
                _ => {
                    return Err(bad(
                        archive,
                        at,
                        shown,
                        "hard link whose target is not a plain relative path",
                    ));
                }
            };
            if seen.kinds.get(target.as_str()) != Some(&Kind::File) {
                return Err(bad(
                    archive,
                    at,
                    shown,
                    &format!(
                        "hard link to {target:?}, which is not an earlier regular file of the archive"
                    ),
                ));
            }
            MemberKind::HardLink(target)
        }
        _ => {
            return Err(bad(
                archive,
                at,
                shown,
                "not a regular file, directory, symlink or hard link",
            ));
        }
    })
}

impl Seen {
    /// Record `path`; `false` for a directory listed again, an error for
    /// any other repeat and for a name under (or holding) a member that is
    /// not a directory.
    fn remember(
        &mut self,
        archive: &Path,
        at: u64,
        path: &MemberPath,
        member: &MemberKind,
    ) -> Result<bool> {
        let kind = match member {
            MemberKind::Dir => Kind::Dir,
            MemberKind::File { .. } | MemberKind::HardLink(_) => Kind::File,
            MemberKind::Symlink(_) => Kind::Symlink,
        };
        let shown = path.as_str();
        if let Some(before) = self.kinds.get(shown) {
            if *before == Kind::Dir && kind == Kind::Dir {
                return Ok(false);
            }
            return Err(bad(
                archive,
                at,
                shown,
                "this name comes twice in the archive",
            ));
        }
        if let Some(a) = path
            .ancestors()
            .find(|a| matches!(self.kinds.get(*a), Some(Kind::File | Kind::Symlink)))
        {
            let what = if self.kinds.get(a) == Some(&Kind::Symlink) {
                "symlink"
            } else {
                "file"
            };
            return Err(bad(
                archive,
                at,
                shown,
                &format!(
                    "lies under the {what} member {a:?}; nothing is created under or through one"
                ),
            ));
        }
        if kind != Kind::Dir && self.holders.contains(shown) {
            return Err(bad(
                archive,
                at,
                shown,
                "is also the directory of earlier members",
            ));
        }
        for a in path.ancestors() {
            if !self.holders.insert(a.to_string()) {
                break;
            }
        }
        self.kinds.insert(shown.to_string(), kind);
        Ok(true)
    }
}

/// Whether the symlink `link -> target` points outside the artifact (an
/// absolute target, or more `..` than the link's depth).
fn leaves(link: &MemberPath, target: &Path) -> bool {
    if target.is_absolute() || target.has_root() {
        return true;
    }
    let mut depth = link.ancestors().count() as i64;
    for c in target.components() {
        match c {
            std::path::Component::ParentDir => depth -= 1,
            std::path::Component::Normal(_) => depth += 1,
            std::path::Component::CurDir => {}
            _ => return true,
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

/// The first member: the artifact's manifest, parsed.
fn read_manifest_member<R: Read>(
    archive: &Path,
    first: Option<std::io::Result<tar::Entry<'_, R>>>,
) -> Result<Vec<String>> {
    let missing = || {
        Error::invalid(
            archive,
            format!("an artifact archive must have {MANIFEST} as its first member"),
        )
    };
    let entry = first
        .ok_or_else(missing)?
        .map_err(|e| Error::io(archive, "cannot read the archive", e))?;
    let name = MemberPath::parse(&entry.path_bytes()).ok().flatten();
    if name.as_ref().map(MemberPath::as_str) != Some(MANIFEST)
        || !entry.header().entry_type().is_file()
    {
        return Err(missing());
    }
    let mut text = String::new();
    let read = entry
        .take(MANIFEST_LIMIT + 1)
        .read_to_string(&mut text)
        .map_err(|e| Error::io(archive.join(MANIFEST), "cannot read", e))?;
    if read as u64 > MANIFEST_LIMIT {
        return Err(Error::new(
            ErrorKind::TooLarge,
            Some(archive.join(MANIFEST)),
            format!("the manifest is larger than {MANIFEST_LIMIT} bytes"),
        ));
    }
    parse_manifest(&archive.join(MANIFEST), &text)
}

/// Open the artifact archive at `path` (its codec sniffed) as a tar
/// stream read under `limits`.
fn open(path: &Path, limits: &Limits) -> Result<tar::Archive<Box<dyn Read + Send>>> {
    let codec = Codec::sniff(path).ok_or_else(|| {
        Error::invalid(
            path,
            "not an artifact archive (.tar.zst, .tar.xz or .tar.gz)",
        )
    })?;
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, "cannot open", e))?;
    let decoder = codec
        .decoder(file, limits)
        .map_err(|e| Error::io(path, "cannot start decompressing", e))?;
    Ok(tar::Archive::new(decoder))
}

/// A problem with the member `path` of `archive` at offset `at`.
fn bad(archive: &Path, at: u64, path: &str, what: &str) -> Error {
    Error::invalid(
        archive,
        format!("member {path:?} at offset {at:#x}: {what}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> MemberPath {
        MemberPath::parse(s.as_bytes()).unwrap().unwrap()
    }

    #[test]
    fn member_paths_are_plain_and_relative() {
        assert_eq!(p("./a/b/").as_str(), "a/b");
        assert_eq!(MemberPath::parse(b"./").unwrap(), None);
        for bad in ["../x", "/etc/passwd", "a/../../b", "a//b", "a/./b"] {
            assert!(MemberPath::parse(bad.as_bytes()).is_err(), "{bad}");
        }
        assert!(MemberPath::parse(b"a\xff").is_err());
        assert_eq!(p("a/b/c").ancestors().collect::<Vec<_>>(), ["a/b", "a"]);
    }

    #[test]
    fn prefixes_are_found_longest_first() {
        let ps = Prefixes::new(vec!["a".into(), "a/b".into(), "c/d".into()]);
        assert_eq!(ps.of(&p("a/b/x")), Some("a/b"));
        assert_eq!(ps.of(&p("a/bx")), Some("a"));
        assert_eq!(ps.of(&p("c/d")), Some("c/d"));
        assert_eq!(ps.of(&p("c/x")), None);
        assert!(ps.above.contains("c") && ps.above.contains("a") && !ps.above.contains("c/d"));
    }

    #[test]
    fn names_under_a_symlink_or_twice_are_refused() {
        let a = Path::new("x.tar.zst");
        let mut s = Seen::default();
        let link = MemberKind::Symlink("/etc".into());
        let file = MemberKind::File {
            mode: 0o644,
            size: 1,
        };
        assert!(s.remember(a, 0, &p("p/etc"), &link).unwrap());
        let e = s.remember(a, 1, &p("p/etc/passwd"), &file).unwrap_err();
        assert!(e.to_string().contains("under the symlink member"), "{e}");
        let e = s.remember(a, 2, &p("p/etc"), &file).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
        assert!(s.remember(a, 3, &p("p/d"), &MemberKind::Dir).unwrap());
        assert!(!s.remember(a, 4, &p("p/d"), &MemberKind::Dir).unwrap());
        assert!(s.remember(a, 5, &p("p/q/f"), &file).unwrap());
        let e = s.remember(a, 6, &p("p/q"), &link).unwrap_err();
        assert!(e.to_string().contains("directory of earlier"), "{e}");
    }

    #[test]
    fn symlinks_leaving_the_artifact_are_recognised() {
        assert!(leaves(&p("a/l"), Path::new("/etc/passwd")));
        assert!(leaves(&p("a/l"), Path::new("../../x")));
        assert!(!leaves(&p("a/l"), Path::new("../b")));
        assert!(!leaves(&p("a/b/l"), Path::new("../../c/./d")));
        assert!(leaves(&p("l"), Path::new("..")));
    }
}
