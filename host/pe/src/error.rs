//! The error type of this crate.

use std::path::{Path, PathBuf};

/// What went wrong, for callers that branch on it: the kinds every host
/// format shares.
pub use kpack_bundle::HostErrorKind as ErrorKind;

/// An error naming the file and what failed there (section, offset in hex).
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct Error {
    kind: ErrorKind,
    path: PathBuf,
    message: String,
    #[source]
    source: Option<Cause>,
}

/// The underlying error, shown by the caller as the next link of the chain.
#[derive(Debug, thiserror::Error)]
enum Cause {
    #[error(transparent)]
    Io(std::io::Error),
    #[error(transparent)]
    Bundle(kpack_bundle::Error),
    #[error(transparent)]
    Object(object::read::Error),
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, path: &Path, message: impl Into<String>) -> Error {
        Error {
            kind,
            path: path.to_path_buf(),
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn io(path: &Path, what: impl Into<String>, e: std::io::Error) -> Error {
        Error {
            source: Some(Cause::Io(e)),
            ..Error::new(ErrorKind::Io, path, what)
        }
    }

    pub(crate) fn bundle(path: &Path, what: impl Into<String>, e: kpack_bundle::Error) -> Error {
        Error {
            source: Some(Cause::Bundle(e)),
            ..Error::new(ErrorKind::Offload, path, what)
        }
    }

    pub(crate) fn object(
        kind: ErrorKind,
        path: &Path,
        what: impl Into<String>,
        e: object::read::Error,
    ) -> Error {
        Error {
            source: Some(Cause::Object(e)),
            ..Error::new(kind, path, what)
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The file it concerns.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_does_not_repeat_the_source() {
        let e = Error::io(
            Path::new("a.dll"),
            "cannot open",
            std::io::Error::other("disk on fire"),
        );
        assert_eq!(e.to_string(), "a.dll: cannot open");
        let src = std::error::Error::source(&e).map(|s| s.to_string());
        assert_eq!(src.as_deref(), Some("disk on fire"));
    }
}
