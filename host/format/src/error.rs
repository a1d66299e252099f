//! The crate's error type: one opaque [`Error`] with a [`ErrorKind`] that
//! callers (and the C ABI) branch on.

use std::fmt;
use std::path::{Path, PathBuf};

/// What went wrong, in the categories of AMD's `kpack_error_t`.
///
/// AMD's numbers live in one place, `kpack_runtime::ErrorKind::code`; the
/// runtime maps each of these kinds to its own with an exhaustive `match`.
/// That is why this enum is not `#[non_exhaustive]`: a new kind must break
/// that mapping at compile time instead of falling through to a default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A caller passed something unusable (writer misuse, empty key, duplicate
    /// entry). `KPACK_ERROR_INVALID_ARGUMENT`.
    InvalidArgument,
    /// The archive file does not exist. `KPACK_ERROR_FILE_NOT_FOUND`.
    FileNotFound,
    /// The archive's bytes are inconsistent (header, TOC shape, ranges).
    /// `KPACK_ERROR_INVALID_FORMAT`.
    InvalidFormat,
    /// Header version or TOC `format_version` is not 1.
    /// `KPACK_ERROR_UNSUPPORTED_VERSION`.
    UnsupportedVersion,
    /// No entry for the requested binary key and architecture.
    /// `KPACK_ERROR_KERNEL_NOT_FOUND`.
    KernelNotFound,
    /// A zstd frame failed to decode or decoded to the wrong size.
    /// `KPACK_ERROR_DECOMPRESSION_FAILED`.
    DecompressionFailed,
    /// An allocation for a kernel's bytes failed. `KPACK_ERROR_OUT_OF_MEMORY`.
    OutOfMemory,
    /// The archive uses a feature this reader does not implement.
    /// `KPACK_ERROR_NOT_IMPLEMENTED`.
    NotImplemented,
    /// Reading or writing the file failed (including an empty file, as AMD).
    /// `KPACK_ERROR_IO_ERROR`.
    Io,
    /// The TOC is not valid msgpack, or its root is not a map.
    /// `KPACK_ERROR_MSGPACK_PARSE_FAILED`.
    MsgpackParseFailed,
}

/// What caused an [`Error`], when something did.
type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error reading or writing a KPAK archive.
///
/// The message names what failed and where: the file (when known) and the
/// byte offset in hex (when the failure is tied to one). An underlying
/// cause (an I/O error, zstd's) is the [`std::error::Error::source`], not
/// part of the message.
#[derive(Debug, thiserror::Error)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    offset: Option<u64>,
    path: Option<PathBuf>,
    #[source]
    source: Option<Cause>,
    /// Set by the marker parser when more bytes might parse.
    pub(crate) truncated: bool,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            offset: None,
            path: None,
            source: None,
            truncated: false,
        }
    }

    pub(crate) fn at(kind: ErrorKind, offset: u64, message: impl Into<String>) -> Self {
        Error {
            offset: Some(offset),
            ..Error::new(kind, message)
        }
    }

    pub(crate) fn format(offset: u64, message: impl Into<String>) -> Self {
        Error::at(ErrorKind::InvalidFormat, offset, message)
    }

    pub(crate) fn io(message: impl Into<String>, source: std::io::Error) -> Self {
        let kind = match source.kind() {
            std::io::ErrorKind::NotFound => ErrorKind::FileNotFound,
            std::io::ErrorKind::OutOfMemory => ErrorKind::OutOfMemory,
            _ => ErrorKind::Io,
        };
        Error::new(kind, message).with_source(source)
    }

    /// This error, caused by `source` (which its message does not repeat).
    pub(crate) fn with_source(mut self, source: impl Into<Cause>) -> Self {
        self.source = Some(source.into());
        self
    }

    pub(crate) fn with_path(mut self, path: &Path) -> Self {
        if self.path.is_none() {
            self.path = Some(path.to_path_buf());
        }
        self
    }

    /// The category of the failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The byte offset in the archive the failure is tied to, if any.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }

    /// The archive file, if the error came from one on disk.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = &self.path {
            write!(f, "{}: ", path.display())?;
        }
        if let Some(offset) = self.offset {
            write!(f, "at offset {offset:#x}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `e` and every cause under it on one line, joined by `": "`: for reports
/// that hold a problem as text (split and verify findings, runtime
/// diagnostics, archive checks), where no caller walks `source()` later.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_path_and_offset_in_hex() {
        let e = Error::format(0x23a, "bad thing").with_path(Path::new("a.kpack"));
        assert_eq!(e.to_string(), "a.kpack: at offset 0x23a: bad thing");
        assert_eq!(e.kind(), ErrorKind::InvalidFormat);
    }

    #[test]
    fn missing_file_maps_to_file_not_found() {
        let e = Error::io("open", std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(e.kind(), ErrorKind::FileNotFound);
    }

    #[test]
    fn io_cause_is_the_source_and_not_in_the_message() {
        use std::error::Error as _;
        let e = Error::io("cannot open archive", std::io::Error::other("disk on fire"))
            .with_path(Path::new("a.kpack"));
        assert_eq!(e.to_string(), "a.kpack: cannot open archive");
        assert_eq!(
            e.source().map(|s| s.to_string()).as_deref(),
            Some("disk on fire")
        );
    }

    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a: cannot read")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn error_chain_joins_each_cause_once_with_colons() {
        let e = Outer(std::io::Error::other("disk on fire"));
        assert_eq!(error_chain(&e), "a: cannot read: disk on fire");
    }
}
