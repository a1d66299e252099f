//! The error type of `kpack-wheel`.

use std::path::PathBuf;

/// What kind of failure an [`Error`] is, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Reading or writing a file failed.
    Io,
    /// The input is not a valid wheel (zip, file name, WHEEL, METADATA,
    /// RECORD, hashes, paths).
    Invalid,
    /// Splitting the unpacked tree failed, or some files in it could not be
    /// processed; nothing was written.
    Split,
    /// The output would replace the input.
    Exists,
}

/// A failure of reading, splitting or writing a wheel, naming the file (and
/// wheel entry) involved.
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

    pub(crate) fn zip(path: impl Into<PathBuf>, what: &str, e: zip::result::ZipError) -> Error {
        let kind = match e {
            zip::result::ZipError::Io(_) => ErrorKind::Io,
            _ => ErrorKind::Invalid,
        };
        Error::new(kind, Some(path.into()), format!("{what}: {e}"))
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The file involved, if any.
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
