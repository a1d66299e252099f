//! The error type of this crate.

use std::fmt;
use std::path::PathBuf;

/// What went wrong, for callers that branch on it: the kinds every host
/// format shares.
pub use kpack_bundle::HostErrorKind as ErrorKind;

/// An error naming the file and, where known, the offset.
///
/// `Display` is `path: message`; the underlying I/O or bundle error is the
/// [`std::error::Error::source`] and is not repeated in the message.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    path: PathBuf,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl Error {
    pub(crate) fn new(
        kind: ErrorKind,
        path: &std::path::Path,
        message: impl Into<String>,
    ) -> Error {
        Error {
            kind,
            path: path.to_path_buf(),
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn with_source(
        mut self,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        self.source = Some(Box::new(e));
        self
    }

    pub(crate) fn io(path: &std::path::Path, what: &str, e: std::io::Error) -> Error {
        Error::new(ErrorKind::Io, path, what.to_string()).with_source(e)
    }

    pub(crate) fn bundle(path: &std::path::Path, what: &str, e: kpack_bundle::Error) -> Error {
        Error::new(ErrorKind::Offload, path, what.to_string()).with_source(e)
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The file it concerns.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as _)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn message_names_the_file_and_leaves_the_cause_to_source() {
        let e = Error::io(
            std::path::Path::new("libx.so"),
            "cannot open",
            std::io::Error::other("disk on fire"),
        );
        assert_eq!(e.to_string(), "libx.so: cannot open");
        assert_eq!(
            e.source().map(|s| s.to_string()).as_deref(),
            Some("disk on fire")
        );
    }
}
