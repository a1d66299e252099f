//! The crate's error type: one opaque [`Error`] with a [`ErrorKind`] that
//! callers (and the C ABI) branch on.

use std::fmt;
use std::path::{Path, PathBuf};

/// What went wrong, in the categories of AMD's `kpack_error_t`.
///
/// The C ABI maps each kind to AMD's numeric code with [`ErrorKind::code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A caller passed something unusable (writer misuse, empty key, duplicate
    /// entry). AMD code 1.
    InvalidArgument,
    /// The archive file does not exist. AMD code 2.
    FileNotFound,
    /// The archive's bytes are inconsistent (header, TOC shape, ranges). AMD code 3.
    InvalidFormat,
    /// Header version or TOC `format_version` is not 1. AMD code 4.
    UnsupportedVersion,
    /// No entry for the requested binary key and architecture. AMD code 5.
    KernelNotFound,
    /// A zstd frame failed to decode or decoded to the wrong size. AMD code 6.
    DecompressionFailed,
    /// An allocation for a kernel's bytes failed. AMD code 7.
    OutOfMemory,
    /// The archive uses a feature this reader does not implement. AMD code 8.
    NotImplemented,
    /// Reading or writing the file failed (including an empty file, as AMD). AMD code 9.
    Io,
    /// The TOC is not valid msgpack, or its root is not a map. AMD code 10.
    MsgpackParseFailed,
}

impl ErrorKind {
    /// AMD's numeric `kpack_error_t` value for this kind.
    pub fn code(self) -> u32 {
        match self {
            ErrorKind::InvalidArgument => 1,
            ErrorKind::FileNotFound => 2,
            ErrorKind::InvalidFormat => 3,
            ErrorKind::UnsupportedVersion => 4,
            ErrorKind::KernelNotFound => 5,
            ErrorKind::DecompressionFailed => 6,
            ErrorKind::OutOfMemory => 7,
            ErrorKind::NotImplemented => 8,
            ErrorKind::Io => 9,
            ErrorKind::MsgpackParseFailed => 10,
        }
    }
}

/// An error reading or writing a KPAK archive.
///
/// The message names what failed and where: the file (when known) and the
/// byte offset in hex (when the failure is tied to one).
#[derive(Debug, thiserror::Error)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    offset: Option<u64>,
    path: Option<PathBuf>,
    #[source]
    source: Option<std::io::Error>,
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
        Error {
            source: Some(source),
            ..Error::new(kind, message)
        }
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
        f.write_str(&self.message)?;
        if let Some(source) = &self.source {
            write!(f, ": {source}")?;
        }
        Ok(())
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_path_and_offset_in_hex() {
        let e = Error::format(0x23a, "bad thing").with_path(Path::new("a.kpack"));
        assert_eq!(e.to_string(), "a.kpack: at offset 0x23a: bad thing");
        assert_eq!(e.kind(), ErrorKind::InvalidFormat);
        assert_eq!(e.kind().code(), 3);
    }

    #[test]
    fn missing_file_maps_to_file_not_found() {
        let e = Error::io("open", std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(e.kind(), ErrorKind::FileNotFound);
        assert_eq!(e.kind().code(), 2);
    }
}
