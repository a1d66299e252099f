//! Outputs written through a temp file beside them and renamed into place:
//! a reader sees the old file or the whole new one, never a part.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::IoError;

/// `Result` of a write.
type Result<T> = std::result::Result<T, IoError>;

/// An output being written: a temp file in the output's directory, renamed
/// onto the output by [`Staged::commit`], deleted if dropped before.
pub struct Staged {
    path: PathBuf,
    tmp: tempfile::NamedTempFile,
}

impl Staged {
    /// A fresh temp file beside `path` (its directory is created), named
    /// for `what` ([`crate::temp_file_in`]).
    pub fn new(path: &Path, what: &str) -> Result<Staged> {
        Staged::beside(path, what, crate::temp_file_in)
    }

    /// [`Staged::new`] for a file only its owner may read (`0600`, kept
    /// when persisted without `mode_from`): keys and caches.
    pub fn private(path: &Path, what: &str) -> Result<Staged> {
        Staged::beside(path, what, crate::private_temp_file_in)
    }

    /// A temp file made by `make` in `path`'s directory (created).
    fn beside(
        path: &Path,
        what: &str,
        make: fn(&Path, &str) -> std::io::Result<tempfile::NamedTempFile>,
    ) -> Result<Staged> {
        let io = |source| IoError::new(path, "cannot write", source);
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io)?;
        let tmp = make(dir, what).map_err(io)?;
        Ok(Staged {
            path: path.to_path_buf(),
            tmp,
        })
    }

    /// The temp file, to write the output into.
    pub fn file_mut(&mut self) -> &mut std::fs::File {
        self.tmp.as_file_mut()
    }

    /// The temp file, to read back or set permissions on.
    pub fn file(&self) -> &std::fs::File {
        self.tmp.as_file()
    }

    /// Give the file the permissions of `mode_from` (when it exists; the
    /// temp file's own are owner-only) and rename it onto the output.
    pub fn commit(self, mode_from: Option<&Path>) -> Result<()> {
        let io = |source| IoError::new(&self.path, "cannot write", source);
        if let Some(meta) = mode_from.and_then(|p| std::fs::metadata(p).ok()) {
            self.tmp
                .as_file()
                .set_permissions(meta.permissions())
                .map_err(io)?;
        }
        self.tmp.persist(&self.path).map_err(|e| io(e.error))?;
        Ok(())
    }
}

/// Write `bytes` to `path` through a temp file in the same directory,
/// with the permissions of `mode_from` ([`Staged::commit`]).
pub fn write_atomically(
    path: &Path,
    what: &str,
    bytes: &[u8],
    mode_from: Option<&Path>,
) -> Result<()> {
    let mut staged = Staged::new(path, what)?;
    staged
        .tmp
        .write_all(bytes)
        .map_err(|source| IoError::new(path, "cannot write", source))?;
    staged.commit(mode_from)
}

/// Copy `input` to `output` through a temp file, streamed (the file is
/// never held in memory), with `input`'s permissions.
pub fn copy_atomically(input: &Path, output: &Path, what: &str) -> Result<u64> {
    let mut from =
        std::fs::File::open(input).map_err(|source| IoError::new(input, "cannot read", source))?;
    let mut staged = Staged::new(output, what)?;
    let len = std::io::copy(&mut from, staged.file_mut())
        .map_err(|source| IoError::new(output, "cannot write", source))?;
    staged.commit(Some(input))?;
    Ok(len)
}

#[cfg(all(test, unix))]
pub(crate) mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// This process's umask (read from /proc).
    pub(crate) fn umask() -> u32 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let umask = status.lines().find_map(|l| l.strip_prefix("Umask:"));
        umask
            .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            .unwrap_or(0o022)
    }

    #[test]
    fn writes_replace_the_output_whole_with_the_mode_asked_for() {
        let d = tempfile::tempdir().unwrap();
        let input = d.path().join("in");
        std::fs::write(&input, b"old").unwrap();
        std::fs::set_permissions(&input, std::fs::Permissions::from_mode(0o751)).unwrap();
        let out = d.path().join("sub/out");
        write_atomically(&out, "host", b"new", Some(&input)).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"new");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&out), 0o751);
        let copy = d.path().join("copy");
        assert_eq!(copy_atomically(&input, &copy, "host").unwrap(), 3);
        assert_eq!(
            (std::fs::read(&copy).unwrap(), mode(&copy)),
            (b"old".to_vec(), 0o751)
        );
        // Without a file to take the mode from, the output gets a new
        // file's mode (0666 & !umask), never the temp file's 0600.
        let public = d.path().join("public");
        write_atomically(&public, "index", b"x", None).unwrap();
        assert_eq!(mode(&public), 0o666 & !umask());
        let mut private = Staged::private(&d.path().join("private"), "cache").unwrap();
        private.file_mut().write_all(b"k").unwrap();
        private.commit(None).unwrap();
        assert_eq!(mode(&d.path().join("private")), 0o600);
        let left: Vec<_> = std::fs::read_dir(d.path().join("sub")).unwrap().collect();
        assert_eq!(left.len(), 1, "no temp file is left behind");
    }

    #[test]
    fn a_dropped_output_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let mut staged = Staged::new(&d.path().join("out"), "host").unwrap();
        staged.file_mut().write_all(b"half").unwrap();
        drop(staged);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }
}
