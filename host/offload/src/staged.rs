//! Outputs written through a temp file beside them and renamed into place.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::Error;

/// An output being written: a temp file in the output's directory, renamed
/// onto the output by [`Staged::persist`], deleted if dropped before.
pub struct Staged {
    path: PathBuf,
    tmp: tempfile::NamedTempFile,
}

impl Staged {
    /// A fresh temp file beside `path` (its directory is created).
    pub fn new(path: &Path) -> Result<Staged, Error> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            what: "cannot write",
            source,
        };
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io)?;
        let tmp = tempfile::Builder::new()
            .prefix(&kpack_format::temp_prefix("host"))
            .tempfile_in(dir)
            .map_err(io)?;
        Ok(Staged {
            path: path.to_path_buf(),
            tmp,
        })
    }

    /// The temp file, to write the output into.
    pub fn file_mut(&mut self) -> &mut std::fs::File {
        self.tmp.as_file_mut()
    }

    /// Give the file the permissions of `mode_from` and rename it onto the
    /// output.
    pub fn persist(self, mode_from: &Path) -> Result<(), Error> {
        let io = |source| Error::Io {
            path: self.path.clone(),
            what: "cannot write",
            source,
        };
        if let Ok(meta) = std::fs::metadata(mode_from) {
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
/// with the permissions of `mode_from`.
pub fn write_atomically(path: &Path, bytes: &[u8], mode_from: &Path) -> Result<(), Error> {
    let mut staged = Staged::new(path)?;
    staged.tmp.write_all(bytes).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        what: "cannot write",
        source,
    })?;
    staged.persist(mode_from)
}

/// Copy `input` to `output` through a temp file, streamed (the file is
/// never held in memory), with `input`'s permissions.
pub fn copy_atomically(input: &Path, output: &Path) -> Result<u64, Error> {
    let read = |source| Error::Io {
        path: input.to_path_buf(),
        what: "cannot read",
        source,
    };
    let mut from = std::fs::File::open(input).map_err(read)?;
    let mut staged = Staged::new(output)?;
    let len = std::io::copy(&mut from, staged.file_mut()).map_err(|source| Error::Io {
        path: output.to_path_buf(),
        what: "cannot write",
        source,
    })?;
    staged.persist(input)?;
    Ok(len)
}

/// `to` relative to `from` (both made absolute against the current dir).
pub fn relative_path(from: &Path, to: &Path) -> PathBuf {
    let abs = |p: &Path| {
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            std::env::current_dir().unwrap_or_default().join(p)
        };
        let mut out = PathBuf::new();
        for c in p.components() {
            match c {
                std::path::Component::ParentDir => {
                    out.pop();
                }
                std::path::Component::CurDir => {}
                other => out.push(other),
            }
        }
        out
    };
    let (from, to) = (abs(from), abs(to));
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut rel = PathBuf::new();
    for _ in from.components().skip(common) {
        rel.push("..");
    }
    for c in to.components().skip(common) {
        rel.push(c);
    }
    rel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_between_directories() {
        assert_eq!(
            relative_path(Path::new("/a/b/lib"), Path::new("/a/b/lib/.kpack")),
            PathBuf::from(".kpack")
        );
        assert_eq!(
            relative_path(Path::new("/a/b/bin"), Path::new("/a/b/lib/.kpack")),
            PathBuf::from("../lib/.kpack")
        );
        assert_eq!(
            relative_path(Path::new("/a/b"), Path::new("/a/b")),
            PathBuf::new()
        );
    }
}
