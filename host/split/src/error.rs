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
    /// An artifact archive inflates past its limits.
    TooLarge,
    /// The input is already kpack split output (it holds a kpack archive
    /// or a binary kpack offloaded): splitting it again is refused.
    AlreadySplit,
}

/// A failure of split, recombine or verify, naming the file involved.
///
/// `Display` is `path: message`; the underlying error (an I/O error, ...)
/// is the [`std::error::Error::source`] and is not repeated in the message.
#[derive(Debug, thiserror::Error)]
#[error("{}{message}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
pub struct Error {
    kind: ErrorKind,
    path: Option<PathBuf>,
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl From<kpack_fsafe::Error> for Error {
    fn from(e: kpack_fsafe::Error) -> Error {
        let kind = match (e.is_exists(), e.is_bad_input()) {
            (true, _) => ErrorKind::Exists,
            (_, true) => ErrorKind::Invalid,
            _ => ErrorKind::Io,
        };
        let (message, source) = e.into_parts();
        match source {
            Some(s) => Error::new(kind, None, message).with_source(s),
            None => Error::new(kind, None, message),
        }
    }
}

impl From<kpack_artifact::Error> for Error {
    fn from(e: kpack_artifact::Error) -> Error {
        let (kind, path, message, source) = e.into_parts();
        let kind = match kind {
            kpack_artifact::ErrorKind::Io => ErrorKind::Io,
            kpack_artifact::ErrorKind::Invalid => ErrorKind::Invalid,
            kpack_artifact::ErrorKind::TooLarge => ErrorKind::TooLarge,
        };
        let e = Error::new(kind, path, message);
        match source {
            Some(s) => e.with_source(s),
            None => e,
        }
    }
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, path: Option<PathBuf>, message: impl Into<String>) -> Error {
        Error {
            kind,
            path,
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, what: &str, e: std::io::Error) -> Error {
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
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) use kpack_format::error_chain;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn io_message_names_the_file_and_leaves_the_cause_to_source() {
        let e = Error::io("a/b", "cannot read", std::io::Error::other("disk on fire"));
        assert_eq!(e.to_string(), "a/b: cannot read");
        assert_eq!(
            e.source().map(|s| s.to_string()).as_deref(),
            Some("disk on fire")
        );
        assert_eq!(error_chain(&e), "a/b: cannot read: disk on fire");
    }
}
