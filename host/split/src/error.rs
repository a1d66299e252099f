//! The error type of `kpack-split`.

use std::path::PathBuf;

/// What kind of failure an [`Error`] is, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Reading or writing a file failed.
    Io,
    /// An input is not what it should be (manifest, config, layout).
    Invalid,
    /// Some files of an artifact could not be processed; nothing was
    /// written for it.
    Files,
    /// A destination already exists.
    Exists,
}

/// A failure of split, recombine or verify, naming the file involved.
#[derive(Debug, thiserror::Error)]
#[error("{}{message}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
pub struct Error {
    kind: ErrorKind,
    path: Option<PathBuf>,
    message: String,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, path: Option<PathBuf>, message: impl Into<String>) -> Error {
        Error {
            kind,
            path,
            message: message.into(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, what: &str, e: std::io::Error) -> Error {
        Error::new(ErrorKind::Io, Some(path.into()), format!("{what}: {e}"))
    }

    pub(crate) fn invalid(path: impl Into<PathBuf>, message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Invalid, Some(path.into()), message)
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The file or directory involved, if any.
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
