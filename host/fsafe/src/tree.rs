//! Writing inside a tree whose paths come from untrusted input (the
//! members of an archive): every path is reached from the tree's root
//! handle one component at a time, never through a symlink, and files are
//! created exclusively, so no name an archive supplies can send a write,
//! a link or a permission change outside the tree, or onto a file that a
//! symlink planted earlier points at.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::dir::{Dir, Entry};

/// A directory tree written through no-follow directory handles.
pub struct Tree {
    root: Dir,
    /// The directory the last file was created in (or the last one
    /// created), and its components: files come mostly one directory at a
    /// time, so the walk from the root is skipped while they do. Moves
    /// forget it.
    last: Mutex<Option<(Vec<OsString>, Dir)>>,
}

impl Tree {
    /// The tree rooted at the directory `root` (a symlink naming the root
    /// itself is followed: the root is the caller's choice).
    pub fn open(root: &Path) -> io::Result<Tree> {
        Ok(Tree {
            last: Mutex::new(None),
            root: Dir::open(root)?,
        })
    }

    /// [`Tree::open`] on the directory `root`, created first with its
    /// missing parents (the root's path is the caller's choice: a staging
    /// directory, an output named on the command line).
    pub fn create(root: &Path) -> io::Result<Tree> {
        std::fs::create_dir_all(root)?;
        Tree::open(root)
    }

    /// The root's path.
    pub fn path(&self) -> &Path {
        self.root.path()
    }

    /// Create the directory `rel` and its missing parents; a symlink on
    /// the way (or at `rel`) is an error.
    pub fn create_dir_all(&self, rel: &Path) -> io::Result<()> {
        let parts = crate::dir::components(rel)?;
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, dir)) = last.as_ref()
            && *at == parts
            && dir.is_linked()
        {
            return Ok(());
        }
        let mut dir = self.root.reopen()?;
        for part in &parts {
            dir = dir.child(part, true)?.0;
        }
        *last = Some((parts, dir));
        Ok(())
    }

    /// Create the file `rel` (its missing parents too) with the permission
    /// bits `mode` (`0o777` at most; ignored where there are none); an
    /// existing file, a symlink at `rel` or on the way is an error.
    pub fn create_file(&self, rel: &Path, mode: u32) -> io::Result<File> {
        let mut parent = crate::dir::components(rel)?;
        let Some(name) = parent.pop() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty path"));
        };
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, dir)) = last.as_ref()
            && *at == parent
        {
            match dir.create_file(&name, mode & 0o777) {
                // Removed behind the tree's back: walk to it again.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                done => return done,
            }
        }
        let (dir, name) = self.root.walk_to_parent(rel, &mut Vec::new())?;
        let file = dir.create_file(&name, mode & 0o777)?;
        *last = Some((parent, dir));
        Ok(file)
    }

    /// Forget the directory of the last file (a move may take it away).
    fn forget_last(&self) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Open the existing regular file `rel` for reading, never through a
    /// symlink.
    pub fn open_file(&self, rel: &Path) -> io::Result<File> {
        let (dir, name) = self.parent(rel)?;
        dir.open_file(&name)
    }

    /// What is at `rel`, or `None` when nothing is (or a symlink is on the
    /// way: nothing inside the tree is there).
    pub fn entry(&self, rel: &Path) -> Option<Entry> {
        let (dir, name) = self.parent(rel).ok()?;
        dir.entry(&name)
    }

    /// The target of the symlink `rel`.
    pub fn read_link(&self, rel: &Path) -> io::Result<PathBuf> {
        let (dir, name) = self.parent(rel)?;
        dir.read_link(&name)
    }

    /// Create the symlink `rel` pointing at `target` (its missing parents
    /// too); the link is made, never followed.
    pub fn symlink(&self, target: &Path, rel: &Path) -> io::Result<()> {
        let (dir, name) = self.root.walk_to_parent(rel, &mut Vec::new())?;
        dir.symlink(target, &name)
    }

    /// Make `rel` a hard link to the regular file `existing` of this tree
    /// (its missing parents too); neither is reached through a symlink,
    /// and a symlink at `existing` is refused, not linked.
    pub fn hard_link(&self, existing: &Path, rel: &Path) -> io::Result<()> {
        let (from, old) = self.parent(existing)?;
        if from.entry(&old) != Some(Entry::File) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a regular file", existing.display()),
            ));
        }
        let (to, new) = self.root.walk_to_parent(rel, &mut Vec::new())?;
        Dir::hard_link(&from, &old, &to, &new)
    }

    /// Move `from` to `to`, both inside the tree (`to`'s missing parents
    /// created; neither reached through a symlink); an existing `to` is an
    /// error, never replaced.
    pub fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.forget_last();
        let (src, old) = self.parent(from)?;
        let (dst, new) = self.root.walk_to_parent(to, &mut Vec::new())?;
        Dir::rename_noreplace(&src, &old, &dst, &new)
    }

    /// Move the file or directory `outside` (a path of the caller's,
    /// typically a temp beside the tree) into the tree as `rel` (missing
    /// parents created, never through a symlink); an existing `rel` is an
    /// error.
    pub fn adopt(&self, outside: &Path, rel: &Path) -> io::Result<()> {
        self.forget_last();
        let (src, name) = outside_parent(outside)?;
        let (dst, new) = self.root.walk_to_parent(rel, &mut Vec::new())?;
        Dir::rename_noreplace(&src, &name, &dst, &new)
    }

    /// [`Tree::adopt`], replacing a file at `rel` in one rename, as an
    /// installer lets a later file win (a symlink at `rel` is replaced,
    /// never followed; a directory there is an error).
    pub fn adopt_replacing(&self, outside: &Path, rel: &Path) -> io::Result<()> {
        self.forget_last();
        let (src, name) = outside_parent(outside)?;
        let (dst, new) = self.root.walk_to_parent(rel, &mut Vec::new())?;
        Dir::rename(&src, &name, &dst, &new)
    }

    /// The directory holding `rel` (existing, reached without following a
    /// symlink) and `rel`'s last component.
    fn parent(&self, rel: &Path) -> io::Result<(Dir, std::ffi::OsString)> {
        let mut parts = crate::dir::components(rel)?;
        let Some(last) = parts.pop() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty path"));
        };
        let mut dir = self.root.reopen()?;
        for p in parts {
            dir = dir.child(&p, false)?.0;
        }
        Ok((dir, last))
    }
}

/// The directory holding the caller's path `outside` (followed as the
/// caller gives it) and its last component.
fn outside_parent(outside: &Path) -> io::Result<(Dir, std::ffi::OsString)> {
    let (Some(parent), Some(name)) = (outside.parent(), outside.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", outside.display()),
        ));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    Ok((Dir::open(parent)?, name.to_os_string()))
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;
    use std::io::Write;

    fn tree() -> (tempfile::TempDir, Tree, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let victim = d.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::fs::write(victim.join("passwd"), "keep").unwrap();
        let t = Tree::open(&root).unwrap();
        (d, t, victim)
    }

    #[test]
    fn files_are_never_written_through_a_symlink() {
        let (_d, t, victim) = tree();
        t.symlink(&victim, Path::new("etc")).unwrap();
        t.symlink(&victim.join("passwd"), Path::new("pw")).unwrap();
        assert!(t.create_file(Path::new("etc/passwd"), 0o644).is_err());
        assert!(t.create_file(Path::new("etc/new"), 0o644).is_err());
        assert!(t.create_file(Path::new("pw"), 0o777).is_err());
        assert!(t.create_dir_all(Path::new("etc/sub")).is_err());
        assert!(t.hard_link(Path::new("pw"), Path::new("copy")).is_err());
        assert_eq!(std::fs::read(victim.join("passwd")).unwrap(), b"keep");
        assert!(!victim.join("new").exists() && !victim.join("sub").exists());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(victim.join("passwd"))
            .unwrap()
            .permissions()
            .mode();
        assert_ne!(mode & 0o777, 0o777);
    }

    #[test]
    fn a_created_tree_has_its_root_and_parents_made() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("a/b/root");
        let t = Tree::create(&root).unwrap();
        assert_eq!(t.path(), root);
        t.create_file(Path::new("x/f"), 0o644).unwrap();
        assert!(root.join("x/f").is_file());
        assert!(Tree::create(&root).is_ok(), "an existing root is opened");
        std::fs::write(d.path().join("file"), "").unwrap();
        assert!(Tree::create(&d.path().join("file")).is_err());
    }

    #[test]
    fn files_links_and_entries_inside_the_tree() {
        let (_d, t, _victim) = tree();
        let mut f = t.create_file(Path::new("a/b/c.txt"), 0o640).unwrap();
        f.write_all(b"hi").unwrap();
        assert!(
            t.create_file(Path::new("a/b/c.txt"), 0o640).is_err(),
            "exclusive"
        );
        t.hard_link(Path::new("a/b/c.txt"), Path::new("x/d.txt"))
            .unwrap();
        t.symlink(Path::new("b/c.txt"), Path::new("a/l")).unwrap();
        assert_eq!(t.entry(Path::new("a/b/c.txt")), Some(Entry::File));
        assert_eq!(t.entry(Path::new("a/b")), Some(Entry::Dir));
        assert_eq!(t.entry(Path::new("a/l")), Some(Entry::Symlink));
        assert_eq!(t.entry(Path::new("a/nothing")), None);
        assert_eq!(t.read_link(Path::new("a/l")).unwrap(), Path::new("b/c.txt"));
        let mut s = String::new();
        std::io::Read::read_to_string(&mut t.open_file(Path::new("x/d.txt")).unwrap(), &mut s)
            .unwrap();
        assert_eq!(s, "hi");
        assert!(
            t.open_file(Path::new("a/l")).is_err(),
            "never opened through a link"
        );
        assert!(t.create_file(Path::new("../out"), 0o644).is_err());
        assert!(t.create_file(Path::new("/abs"), 0o644).is_err());
    }

    #[test]
    fn moves_stay_inside_the_tree_and_never_replace() {
        let (d, t, victim) = tree();
        t.create_file(Path::new("a/one"), 0o644).unwrap();
        t.symlink(&victim, Path::new("etc")).unwrap();
        assert!(t.rename(Path::new("a/one"), Path::new("etc/one")).is_err());
        t.rename(Path::new("a/one"), Path::new("b/c/one")).unwrap();
        assert_eq!(t.entry(Path::new("b/c/one")), Some(Entry::File));
        t.create_file(Path::new("a/two"), 0o644).unwrap();
        assert!(t.rename(Path::new("a/two"), Path::new("b/c/one")).is_err());
        let outside = d.path().join("made");
        std::fs::write(&outside, "new").unwrap();
        assert!(t.adopt(&outside, Path::new("etc/passwd")).is_err());
        assert!(t.adopt(&outside, Path::new("a/two")).is_err());
        t.adopt(&outside, Path::new("d/made")).unwrap();
        assert!(!outside.exists());
        assert_eq!(std::fs::read(victim.join("passwd")).unwrap(), b"keep");
        assert!(!victim.join("one").exists());
    }

    #[test]
    fn adopting_replaces_a_file_or_a_link_but_never_writes_through_it() {
        let (d, t, victim) = tree();
        t.create_file(Path::new("lib/a.so"), 0o644).unwrap();
        t.symlink(&victim.join("passwd"), Path::new("lib/b.so"))
            .unwrap();
        t.symlink(&victim, Path::new("etc")).unwrap();
        for (i, rel) in ["lib/a.so", "lib/b.so", "etc/passwd"].iter().enumerate() {
            let outside = d.path().join(format!("new{i}"));
            std::fs::write(&outside, format!("new{i}")).unwrap();
            let r = t.adopt_replacing(&outside, Path::new(rel));
            assert_eq!(r.is_ok(), i < 2, "{rel}");
        }
        assert_eq!(t.entry(Path::new("lib/b.so")), Some(Entry::File));
        let mut s = String::new();
        std::io::Read::read_to_string(&mut t.open_file(Path::new("lib/b.so")).unwrap(), &mut s)
            .unwrap();
        assert_eq!(s, "new1");
        assert_eq!(std::fs::read(victim.join("passwd")).unwrap(), b"keep");
        t.create_dir_all(Path::new("dir")).unwrap();
        std::fs::write(d.path().join("new3"), "x").unwrap();
        assert!(
            t.adopt_replacing(&d.path().join("new3"), Path::new("dir"))
                .is_err()
        );
    }

    #[test]
    fn a_directory_moved_or_removed_after_a_file_is_walked_to_again() {
        let (d, t, _victim) = tree();
        t.create_file(Path::new("a/x"), 0o644).unwrap();
        t.rename(Path::new("a"), Path::new("b")).unwrap();
        t.create_file(Path::new("a/y"), 0o644).unwrap();
        let names = |p: &str| {
            let mut v: Vec<String> = std::fs::read_dir(d.path().join("root").join(p))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(
            (names("a"), names("b")),
            (vec!["y".into()], vec!["x".into()])
        );
        std::fs::remove_dir_all(d.path().join("root/a")).unwrap();
        t.create_file(Path::new("a/z"), 0o644).unwrap();
        assert_eq!(names("a"), ["z"]);
        t.create_dir_all(Path::new("c/d")).unwrap();
        std::fs::remove_dir_all(d.path().join("root/c")).unwrap();
        t.create_dir_all(Path::new("c/d")).unwrap();
        assert!(d.path().join("root/c/d").is_dir(), "made again");
    }
}
