//! The store of an artifact archive's split: the plain files of the archive
//! (no binary, bundle or static archive: nothing kpack needs to read at
//! random) kept as byte ranges of one temp file instead of a file each.
//! Creating thousands of small files is what costs most when an archive of
//! a kernel database is split (a file system allocates an inode for each);
//! appending to one file does not. The split places a stored file by
//! recording where it goes, and the archive writer reads it from the store;
//! only directory output writes it out as a file of its own.

use std::collections::HashMap;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One stored file: its bytes in the store, and its permission bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    offset: u64,
    /// Its size in bytes.
    pub len: u64,
    /// The member's permission bits (`0o777` at most).
    pub mode: u32,
}

impl Stored {
    /// Where its bytes start in the store (two links to one file share it).
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

/// The store: appended to by the archive's reader, read by the split and
/// the archive writer through handles of their own.
pub struct Store {
    file: tempfile::NamedTempFile,
    /// The output tree: stored files are placed inside it only, their
    /// directories made never through a symlink.
    tree: kpack_fsafe::Tree,
    /// Stored files are written out where they are placed (directory
    /// output) rather than recorded: the first path each was written to,
    /// by offset (a second link to it becomes a hard link).
    materialize: Option<Mutex<HashMap<u64, PathBuf>>>,
    placed: Mutex<Vec<(PathBuf, Stored)>>,
}

/// The appending side of a [`Store`].
pub struct StoreWriter {
    out: BufWriter<std::fs::File>,
    at: u64,
}

impl Store {
    /// A new, empty store in `dir` for the files of the output tree `out`
    /// (an existing directory: every file is placed inside it); with
    /// `materialize` (directory output), stored files are written out
    /// where they are placed.
    pub fn create(dir: &Path, out: &Path, materialize: bool) -> std::io::Result<Store> {
        Ok(Store {
            tree: kpack_fsafe::Tree::open(out)?,
            materialize: materialize.then(Mutex::default),
            file: kpack_fsafe::temp_file_in(dir, "store")?,
            placed: Mutex::new(Vec::new()),
        })
    }

    /// Its appending side (one at a time).
    pub fn writer(&self) -> std::io::Result<StoreWriter> {
        let mut f = self.file.reopen()?;
        let at = f.seek(SeekFrom::End(0))?;
        Ok(StoreWriter {
            out: BufWriter::with_capacity(1 << 20, f),
            at,
        })
    }

    /// A reading handle of its own.
    pub fn reader(&self) -> std::io::Result<StoreReader> {
        Ok(StoreReader {
            file: self.file.reopen()?,
        })
    }

    /// Put the stored file `s` at `dst`: written out there (directory
    /// output, never through a symlink; a link to a file written already
    /// is hard-linked to it), or recorded for the archive writer, its
    /// directory created either way. Returns its size.
    pub fn place(&self, s: &Stored, dst: &Path) -> std::io::Result<u64> {
        let tree = &self.tree;
        let rel = dst.strip_prefix(tree.path()).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{} is outside the output", dst.display()),
            )
        })?;
        let Some(written) = &self.materialize else {
            if let Some(d) = rel.parent() {
                tree.create_dir_all(d)?;
            }
            self.placed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((dst.to_path_buf(), *s));
            return Ok(s.len);
        };
        let mut written = written.lock().unwrap_or_else(|e| e.into_inner());
        match written.get(&s.offset) {
            Some(first) => tree.hard_link(first, rel)?,
            None => {
                let f = tree.create_file(rel, s.mode)?;
                let mut out = BufWriter::with_capacity(1 << 20, f);
                std::io::copy(&mut self.reader()?.range(s)?, &mut out)?;
                out.flush()?;
                written.insert(s.offset, rel.to_path_buf());
            }
        }
        Ok(s.len)
    }

    /// Whether `s` was placed at `path`.
    pub fn is_placed(&self, s: &Stored, path: &Path) -> bool {
        match &self.materialize {
            // Written out: a hard link to the file there is as good.
            Some(_) => path
                .strip_prefix(self.tree.path())
                .is_ok_and(|rel| self.tree.entry(rel) == Some(kpack_fsafe::Entry::File)),
            None => self
                .placed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .any(|(p, x)| p == path && x == s),
        }
    }

    /// The stored files placed under `root`, by path relative to it
    /// (`/`-separated), in no particular order.
    pub fn placed_under(&self, root: &Path) -> Vec<(String, Stored)> {
        let placed = self.placed.lock().unwrap_or_else(|e| e.into_inner());
        placed
            .iter()
            .filter_map(|(p, s)| {
                let rel = p.strip_prefix(root).ok()?;
                let rel = rel.to_str()?.replace(std::path::MAIN_SEPARATOR, "/");
                Some((rel, *s))
            })
            .collect()
    }
}

impl StoreWriter {
    /// Append a file with permission bits `mode`: `head` (its first
    /// bytes, already read) then the rest of `rest`.
    pub fn append(
        &mut self,
        head: &[u8],
        rest: &mut impl Read,
        mode: u32,
    ) -> std::io::Result<Stored> {
        self.out.write_all(head)?;
        let n = head.len() as u64 + std::io::copy(rest, &mut self.out)?;
        let s = Stored {
            offset: self.at,
            len: n,
            mode: mode & 0o777,
        };
        self.at += n;
        Ok(s)
    }

    /// Make everything appended so far readable through other handles.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// A reading handle of a [`Store`].
pub struct StoreReader {
    file: std::fs::File,
}

impl StoreReader {
    /// The bytes of `s`.
    pub fn range(&mut self, s: &Stored) -> std::io::Result<impl Read + '_> {
        self.file.seek(SeekFrom::Start(s.offset))?;
        Ok((&mut self.file).take(s.len))
    }

    /// The first `n` bytes of `s` (fewer when it is shorter).
    pub fn prefix(&mut self, s: &Stored, n: usize) -> std::io::Result<Vec<u8>> {
        let mut v = Vec::new();
        self.range(s)?.take(n as u64).read_to_end(&mut v)?;
        Ok(v)
    }
}

/// Write a new file of its own at `rel` in `tree` (its missing
/// directories made; an existing name, a symlink included, is an error,
/// and no symlink on the way is followed: nothing is written through
/// one): `head`, then the rest of `rest`, with the permission bits of
/// `mode`; returns its size. Large writes (and, through `io::copy`'s use
/// of the buffer, large reads): a spooled binary is often a gigabyte.
pub fn write_file(
    head: &[u8],
    rest: &mut impl Read,
    tree: &kpack_fsafe::Tree,
    rel: &Path,
    mode: u32,
) -> std::io::Result<u64> {
    let mut out = BufWriter::with_capacity(1 << 20, tree.create_file(rel, mode)?);
    out.write_all(head)?;
    let n = head.len() as u64 + std::io::copy(rest, &mut out)?;
    out.flush()?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_files_read_back_whole_and_by_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), dir.path(), false).unwrap();
        let mut w = store.writer().unwrap();
        let a = w.append(b"he", &mut &b"llo"[..], 0o644).unwrap();
        let b = w.append(b"", &mut &b"#!/bin/sh\n"[..], 0o100750).unwrap();
        w.flush().unwrap();
        let mut r = store.reader().unwrap();
        let mut got = String::new();
        r.range(&b).unwrap().read_to_string(&mut got).unwrap();
        assert_eq!(got, "#!/bin/sh\n");
        assert_eq!(r.prefix(&a, 3).unwrap(), b"hel");
        assert_eq!((a.mode, b.mode), (0o644, 0o750));
        assert_ne!(a.offset(), b.offset());
    }

    #[test]
    fn placing_records_or_writes_out() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("out");
        std::fs::create_dir(&root).unwrap();
        let recorded = Store::create(dir.path(), &root, false).unwrap();
        let mut w = recorded.writer().unwrap();
        let s = w.append(b"abc", &mut std::io::empty(), 0o644).unwrap();
        w.flush().unwrap();
        recorded.place(&s, &root.join("x/y.dat")).unwrap();
        assert!(!root.join("x/y.dat").exists());
        assert!(root.join("x").is_dir());
        assert_eq!(
            recorded.placed_under(&root),
            vec![("x/y.dat".to_string(), s)]
        );

        assert!(recorded.place(&s, &dir.path().join("x.dat")).is_err());
        #[cfg(unix)]
        {
            // A directory of the output that is a symlink is never made
            // through, even for a file only recorded.
            let elsewhere = dir.path().join("elsewhere");
            std::fs::create_dir(&elsewhere).unwrap();
            std::os::unix::fs::symlink(&elsewhere, root.join("l")).unwrap();
            assert!(recorded.place(&s, &root.join("l/sub/y.dat")).is_err());
            assert!(!elsewhere.join("sub").exists());
        }
        let written = Store::create(dir.path(), &root, true).unwrap();
        let mut w = written.writer().unwrap();
        let s = w.append(b"abc", &mut std::io::empty(), 0o600).unwrap();
        w.flush().unwrap();
        written.place(&s, &root.join("z.dat")).unwrap();
        assert_eq!(std::fs::read(root.join("z.dat")).unwrap(), b"abc");
        #[cfg(unix)]
        {
            // Written out with the member's own permission bits.
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(root.join("z.dat"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(written.placed_under(&root).is_empty());
    }

    #[test]
    #[cfg(unix)]
    fn spooled_files_keep_their_mode_and_never_follow_a_symlink() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let spool = dir.path().join("spool");
        let tree = kpack_fsafe::Tree::create(&spool).unwrap();
        let n = write_file(b"ab", &mut &b"cd"[..], &tree, Path::new("1/p/f"), 0o750).unwrap();
        assert_eq!(n, 4);
        assert_eq!(std::fs::read(spool.join("1/p/f")).unwrap(), b"abcd");
        let mode = std::fs::metadata(spool.join("1/p/f"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o750);
        assert!(write_file(b"", &mut std::io::empty(), &tree, Path::new("1/p/f"), 0o644).is_err());
        std::os::unix::fs::symlink(&elsewhere, spool.join("2")).unwrap();
        assert!(write_file(b"x", &mut std::io::empty(), &tree, Path::new("2/f"), 0o644).is_err());
        assert!(!elsewhere.join("f").exists());
    }
}
