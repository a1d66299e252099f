//! The error type of this crate: one opaque [`Error`] with a
//! [`kind`](Error::kind) to branch on. Context is layered the thiserror way: an
//! outer error ("archive member `a.o`") has the inner one ("offload binary
//! at 0x0: ...") as its `source`, and no message repeats its source.

/// What went wrong, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Reading a file failed (thin-archive members).
    Io,
    /// The input ends before a structure it declares.
    Truncated,
    /// A magic number is not the one the format requires.
    BadMagic,
    /// An OffloadBinary version this crate does not know.
    UnsupportedVersion,
    /// An offset, size or count is impossible for the data around it.
    BadRange,
    /// A compressed OffloadBinary did not inflate to its declared size.
    Decompress,
    /// The container (ELF object, static archive) is malformed.
    Malformed,
    /// A clang offload bundle in `.hip_fatbin` is malformed.
    Bundle,
    /// Something the writer cannot represent in the requested version.
    Unrepresentable,
}

/// An error with what failed and where (offset in hex, section, member).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    kind: ErrorKind,
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn with_source(
        kind: ErrorKind,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error {
            kind,
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// `self` with `source` as its cause.
    pub(crate) fn caused_by(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        self.source = Some(Box::new(source));
        self
    }

    /// Wrap `self` in an outer context (the kind is kept).
    pub(crate) fn context(self, message: impl Into<String>) -> Error {
        Error {
            kind: self.kind,
            message: message.into(),
            source: Some(Box::new(self)),
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn context_keeps_kind_and_does_not_repeat_source() {
        let inner = Error::new(
            ErrorKind::Truncated,
            "offload binary at 0x8: header needs 32 bytes",
        );
        let outer = inner.context("section .llvm.offloading");
        assert_eq!(outer.kind(), ErrorKind::Truncated);
        assert_eq!(outer.to_string(), "section .llvm.offloading");
        assert_eq!(
            outer.source().map(|s| s.to_string()).as_deref(),
            Some("offload binary at 0x8: header needs 32 bytes")
        );
    }
}
