//! The error type of `kpack-artifact`.

use std::path::PathBuf;

/// What kind of failure an [`Error`] is, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Reading or writing a file failed.
    Io,
    /// An artifact or one of its members is not what it should be.
    Invalid,
    /// An archive inflates past a limit (its ratio, the total, or a
    /// decoder window larger than the memory budget allows).
    TooLarge,
}

/// A failure reading or writing an artifact, naming the file involved.
///
/// `Display` is `path: message`; the underlying error is the
/// [`std::error::Error::source`] and is not repeated in the message.
#[derive(Debug, thiserror::Error)]
#[error("{}{message}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
pub struct Error {
    kind: ErrorKind,
    path: Option<PathBuf>,
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// The parts of an [`Error`], for a caller's own error type.
pub type Parts = (
    ErrorKind,
    Option<PathBuf>,
    String,
    Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
);

impl Error {
    pub(crate) fn new(kind: ErrorKind, path: Option<PathBuf>, message: impl Into<String>) -> Error {
        Error {
            kind,
            path,
            message: message.into(),
            source: None,
        }
    }

    /// An I/O failure at `path`: `what` was being done.
    pub(crate) fn io(path: impl Into<PathBuf>, what: &str, e: std::io::Error) -> Error {
        if let Some(limit) = e
            .get_ref()
            .and_then(|s| s.downcast_ref::<crate::codec::OverLimit>())
        {
            return Error::new(ErrorKind::TooLarge, Some(path.into()), limit.to_string());
        }
        Error {
            source: Some(Box::new(e)),
            ..Error::new(ErrorKind::Io, Some(path.into()), what)
        }
    }

    /// The same error with `source` as its cause.
    pub(crate) fn with_source(
        mut self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Error {
        self.source = Some(source.into());
        self
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

    /// Its kind, path, message and cause.
    pub fn into_parts(self) -> Parts {
        (self.kind, self.path, self.message, self.source)
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
