//! Checks on a command's inputs and outputs before anything is written,
//! and the output directories a failed run removes again.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::path::{is_plain_name, is_plain_relative, resolved};
use crate::{Error, Result};

/// Refuse anything but a regular file as an input, before it is opened:
/// opening a FIFO blocks until a writer comes.
pub fn regular_file(path: &Path) -> Result<()> {
    let meta = std::fs::metadata(path).map_err(|source| Error::Open {
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.is_file() {
        return Err(Error::NotRegular {
            path: path.to_path_buf(),
            kind: file_kind(&meta),
        });
    }
    Ok(())
}

/// What a file that is not a regular file is, for messages (`a FIFO`,
/// `a directory`, ...).
pub fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_block_device() || t.is_char_device() {
            return "a device";
        }
    }
    if meta.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// Refuse when `output` is `input` itself, through any path or hard link
/// (device and inode compared). An output that does not exist yet cannot be.
pub fn not_same_file(input: &Path, output: &Path) -> Result<()> {
    if same_file::is_same_file(input, output).unwrap_or(false) {
        return Err(Error::SameFile {
            input: input.to_path_buf(),
            output: output.to_path_buf(),
        });
    }
    Ok(())
}

/// Refuse an existing `path` unless `force`.
pub fn not_existing(path: &Path, force: bool) -> Result<()> {
    // --force replaces a file, never a directory: say so instead of suggesting it.
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(Error::OutputIsDir {
            path: path.to_path_buf(),
        });
    }
    if !force && std::fs::symlink_metadata(path).is_ok() {
        return Err(Error::Exists {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// `flag`'s value must be a plain file name ([`is_plain_name`]).
pub fn plain_name(flag: &str, value: &str) -> Result<()> {
    if !is_plain_name(value) {
        return Err(Error::NotPlainName {
            flag: flag.to_owned(),
            value: value.to_owned(),
        });
    }
    Ok(())
}

/// A name taken from an input (a wheel's `Name`, a recombine group, an
/// archive key's stem, an index entry) that will name an output file or
/// directory must be a plain name ([`is_plain_name`]); the error names
/// `field` and the file `origin` it came from.
pub fn input_name(origin: &Path, field: &str, value: &str) -> Result<()> {
    if !is_plain_name(value) {
        return Err(Error::BadInputName {
            origin: origin.to_path_buf(),
            field: field.to_owned(),
            value: value.to_owned(),
        });
    }
    Ok(())
}

/// `flag`'s value must be a relative path that stays inside its root
/// ([`is_plain_relative`]).
pub fn inside_root(flag: &str, value: &str) -> Result<()> {
    if !is_plain_relative(value) {
        return Err(Error::NotInsideRoot {
            flag: flag.to_owned(),
            value: value.to_owned(),
        });
    }
    Ok(())
}

/// Refuse an output directory inside an input tree, or an input inside the
/// output: either way a run would read what it writes.
pub fn not_nested(input: &Path, output: &Path) -> Result<()> {
    let (i, o) = (resolved(input)?, resolved(output)?);
    let (input, output) = (input.to_path_buf(), output.to_path_buf());
    if o.starts_with(&i) {
        return Err(Error::OutputInsideInput { input, output });
    }
    if i.starts_with(&o) {
        return Err(Error::InputInsideOutput { input, output });
    }
    Ok(())
}

/// Directories this run created, removed again (if empty) unless
/// [`CreatedDir::keep`] is called: a failed run leaves no empty output folders.
#[must_use]
pub struct CreatedDir {
    /// The created directories, deepest first.
    created: Vec<PathBuf>,
}

impl CreatedDir {
    /// Create `dir` and its missing parents, remembering which were missing.
    pub fn create(dir: &Path) -> Result<CreatedDir> {
        if std::fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
            return Err(Error::NotDir {
                path: dir.to_path_buf(),
            });
        }
        let mut created = Vec::new();
        let mut p = Some(dir);
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
            if std::fs::symlink_metadata(d).is_ok() {
                break;
            }
            created.push(d.to_path_buf());
            p = d.parent();
        }
        std::fs::create_dir_all(dir).map_err(|source| Error::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(CreatedDir { created })
    }

    /// The run succeeded: keep the directories.
    pub fn keep(mut self) {
        self.created.clear();
    }
}

impl Drop for CreatedDir {
    fn drop(&mut self) {
        // remove_dir, not remove_dir_all: anything someone else put there stays.
        for d in &self.created {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Take the advisory lock on the directory `dir`, calling `on_wait` first
/// when another process holds it and waiting for it. Held until the
/// returned file is dropped.
pub fn lock_dir(dir: &Path, on_wait: impl FnOnce()) -> Result<File> {
    let err = |what, source| Error::Lock {
        path: dir.to_path_buf(),
        what,
        source,
    };
    let f = open_dir(dir).map_err(|e| err("cannot open to lock", e))?;
    match f.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            on_wait();
            f.lock().map_err(|e| err("cannot lock", e))?;
        }
        // Windows locks byte ranges of files, not directories: there the
        // handle is held without a lock, and runs into one directory are
        // not serialised.
        Err(std::fs::TryLockError::Error(_)) if cfg!(windows) => {}
        Err(std::fs::TryLockError::Error(e)) => return Err(err("cannot lock", e)),
    }
    Ok(f)
}

/// A handle on the directory `dir` itself.
#[cfg(not(windows))]
fn open_dir(dir: &Path) -> std::io::Result<File> {
    File::open(dir)
}

/// A handle on the directory `dir` itself: Windows opens a directory only
/// with `FILE_FLAG_BACKUP_SEMANTICS`.
#[cfg(windows)]
fn open_dir(dir: &Path) -> std::io::Result<File> {
    use std::os::windows::fs::OpenOptionsExt;
    const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
        .open(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_relative_paths_stay_inside() {
        assert!(plain_name("--name", "libfoo").is_ok());
        for bad in ["", ".", "..", "../x", "a/b", "/x"] {
            assert!(plain_name("--name", bad).is_err(), "{bad}");
        }
        assert!(inside_root("--archive-dir", "lib/.kpack").is_ok());
        for bad in ["", "../x", "a/../../x", "/abs", "a/./b/..", "a/./b"] {
            assert!(inside_root("--archive-dir", bad).is_err(), "{bad}");
        }
        let e = inside_root("--archive-dir", "../x").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--archive-dir \"../x\": must be a relative path inside the output (no '..', not absolute)"
        );
    }

    #[test]
    fn nesting_is_seen_through_dot_dot_and_missing_tails() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        std::fs::create_dir(&a).unwrap();
        assert!(not_nested(&a, &a).is_err());
        assert!(not_nested(&a, &a.join("x/y")).is_err());
        assert!(not_nested(&a.join("sub"), &d.path().join("a/../a")).is_err());
        assert!(not_nested(&a, &d.path().join("b")).is_ok());
    }

    #[test]
    fn created_dirs_go_away_unless_kept() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("x/y/z");
        drop(CreatedDir::create(&deep).unwrap());
        assert!(!d.path().join("x").exists());
        CreatedDir::create(&deep).unwrap().keep();
        assert!(deep.is_dir());
    }

    #[test]
    fn inputs_are_regular_files_and_outputs_new() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        assert!(regular_file(&f).is_ok());
        let e = regular_file(d.path()).unwrap_err();
        assert!(
            e.to_string().ends_with("not a regular file (a directory)"),
            "{e}"
        );
        assert!(regular_file(&d.path().join("missing")).is_err());
        assert!(not_existing(&f, false).is_err());
        assert!(not_existing(&f, true).is_ok());
        assert!(not_existing(d.path(), true).is_err());
        assert!(not_existing(&d.path().join("new"), false).is_ok());
        assert!(not_same_file(&f, &d.path().join("./f")).is_err());
        assert!(not_same_file(&f, &d.path().join("g")).is_ok());
    }

    #[test]
    fn a_held_lock_is_waited_for() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let d = tempfile::tempdir().unwrap();
        let held = lock_dir(d.path(), || panic!("the lock is free")).unwrap();
        let waited = AtomicBool::new(false);
        std::thread::scope(|s| {
            let t = s.spawn(|| lock_dir(d.path(), || waited.store(true, Ordering::SeqCst)));
            while !waited.load(Ordering::SeqCst) && !t.is_finished() {
                std::thread::yield_now();
            }
            assert!(
                waited.load(Ordering::SeqCst),
                "the second lock did not wait"
            );
            drop(held);
            assert!(t.join().unwrap().is_ok());
        });
    }
}
