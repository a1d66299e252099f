//! The runtime's error type, whose kinds are AMD's `kpack_error_t` values.
//!
//! [`ErrorKind::code`] is the one table of AMD's error numbers in kpack: the
//! archive reader's kinds map onto these, and the C ABI maps these onto its
//! `kpack_error_t` declaration, both with exhaustive matches.

use std::sync::Arc;

/// What went wrong; [`ErrorKind::code`] is AMD's numeric `kpack_error_t`.
///
/// Not `#[non_exhaustive]`: the variants are AMD's ABI, and the C ABI crate
/// matches on them exhaustively so that a new kind cannot silently fall
/// through to some other number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// 1: a NULL, an empty arch list, a bad index, a too-small buffer.
    InvalidArgument,
    /// 2: the archive file does not exist.
    FileNotFound,
    /// 3: the archive is malformed.
    InvalidFormat,
    /// 4: header or TOC version is not 1.
    UnsupportedVersion,
    /// 5: the chosen archive has no entry for the key and target.
    KernelNotFound,
    /// 6: a zstd frame failed to decode or had the wrong size.
    DecompressionFailed,
    /// 7: an allocation failed.
    OutOfMemory,
    /// 8: the loader is disabled (`ROCM_KPACK_DISABLE`) or the platform lacks a feature.
    NotImplemented,
    /// 9: reading a file failed.
    Io,
    /// 10: the archive's TOC is not msgpack.
    MsgpackParseFailed,
    /// 11: no mapping contains the address.
    PathDiscoveryFailed,
    /// 12: the marker is malformed.
    InvalidMetadata,
    /// 13: no candidate archive exists or opens.
    ArchiveNotFound,
    /// 14: no found archive lists any target compatible with the device.
    ArchNotFound,
}

impl ErrorKind {
    /// AMD's numeric `kpack_error_t` value.
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
            ErrorKind::PathDiscoveryFailed => 11,
            ErrorKind::InvalidMetadata => 12,
            ErrorKind::ArchiveNotFound => 13,
            ErrorKind::ArchNotFound => 14,
        }
    }
}

impl From<kpack_format::ErrorKind> for ErrorKind {
    fn from(k: kpack_format::ErrorKind) -> Self {
        use kpack_format::ErrorKind as F;
        match k {
            F::InvalidArgument => ErrorKind::InvalidArgument,
            F::FileNotFound => ErrorKind::FileNotFound,
            F::InvalidFormat => ErrorKind::InvalidFormat,
            F::UnsupportedVersion => ErrorKind::UnsupportedVersion,
            F::KernelNotFound => ErrorKind::KernelNotFound,
            F::DecompressionFailed => ErrorKind::DecompressionFailed,
            F::OutOfMemory => ErrorKind::OutOfMemory,
            F::NotImplemented => ErrorKind::NotImplemented,
            F::Io => ErrorKind::Io,
            F::MsgpackParseFailed => ErrorKind::MsgpackParseFailed,
        }
    }
}

/// A loader failure: a kind and a message naming what was tried.
///
/// An archive error is kept whole: `Display` is the archive error's message
/// and `source()` its cause, as if the archive error were returned directly.
#[derive(Debug, Clone)]
pub struct Error {
    kind: ErrorKind,
    repr: Repr,
}

#[derive(Debug, Clone)]
enum Repr {
    Message(String),
    // Arc because loader errors are cloned into per-cache diagnostics and
    // kpack_format::Error (holding an io::Error) is not Clone.
    Archive(Arc<kpack_format::Error>),
}

impl Error {
    /// A new error (public so the C ABI can report argument errors alike).
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            repr: Repr::Message(message.into()),
        }
    }
    /// `e`, kept whole (message and cause), as a failure of `kind`.
    pub(crate) fn from_archive(kind: ErrorKind, e: kpack_format::Error) -> Error {
        Error {
            kind,
            repr: Repr::Archive(Arc::new(e)),
        }
    }

    /// The category.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.repr {
            Repr::Message(m) => f.write_str(m),
            Repr::Archive(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.repr {
            Repr::Message(_) => None,
            // Transparent: the archive error's own cause, so no message repeats.
            Repr::Archive(e) => e.source(),
        }
    }
}

impl From<kpack_format::Error> for Error {
    fn from(e: kpack_format::Error) -> Self {
        Error {
            kind: e.kind().into(),
            repr: Repr::Archive(Arc::new(e)),
        }
    }
}

pub(crate) use kpack_format::error_chain;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_marker_is_invalid_metadata_with_the_format_errors_message() {
        let bytes = b"\x93\x01";
        let format = kpack_format::Marker::parse(bytes).unwrap_err();
        let e = crate::parse_marker(bytes).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidMetadata);
        assert_eq!(e.to_string(), format.to_string());
        assert_eq!(error_chain(&e), error_chain(&format));
    }

    /// AMD's numbers, copied from the spec's `kpack_error_t` table
    /// (rocm-kpack.md §10.2), not from the code under test.
    const SPEC: [(ErrorKind, u32); 14] = [
        (ErrorKind::InvalidArgument, 1),
        (ErrorKind::FileNotFound, 2),
        (ErrorKind::InvalidFormat, 3),
        (ErrorKind::UnsupportedVersion, 4),
        (ErrorKind::KernelNotFound, 5),
        (ErrorKind::DecompressionFailed, 6),
        (ErrorKind::OutOfMemory, 7),
        (ErrorKind::NotImplemented, 8),
        (ErrorKind::Io, 9),
        (ErrorKind::MsgpackParseFailed, 10),
        (ErrorKind::PathDiscoveryFailed, 11),
        (ErrorKind::InvalidMetadata, 12),
        (ErrorKind::ArchiveNotFound, 13),
        (ErrorKind::ArchNotFound, 14),
    ];

    #[test]
    fn codes_are_the_spec_table() {
        for (kind, number) in SPEC {
            assert_eq!(kind.code(), number, "{kind:?}");
        }
    }

    #[test]
    fn archive_kinds_map_to_the_same_named_kind() {
        use kpack_format::ErrorKind as F;
        let pairs = [
            (F::InvalidArgument, ErrorKind::InvalidArgument),
            (F::FileNotFound, ErrorKind::FileNotFound),
            (F::InvalidFormat, ErrorKind::InvalidFormat),
            (F::UnsupportedVersion, ErrorKind::UnsupportedVersion),
            (F::KernelNotFound, ErrorKind::KernelNotFound),
            (F::DecompressionFailed, ErrorKind::DecompressionFailed),
            (F::OutOfMemory, ErrorKind::OutOfMemory),
            (F::NotImplemented, ErrorKind::NotImplemented),
            (F::Io, ErrorKind::Io),
            (F::MsgpackParseFailed, ErrorKind::MsgpackParseFailed),
        ];
        for (f, k) in pairs {
            assert_eq!(ErrorKind::from(f), k);
        }
    }

    #[test]
    fn archive_error_says_its_cause_once() {
        use std::error::Error as _;
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.kpack");
        let e = Error::from(kpack_format::Archive::open(&missing).unwrap_err());
        assert_eq!(e.kind(), ErrorKind::FileNotFound);
        let os = e.source().expect("the OS error is the source").to_string();
        assert!(!e.to_string().contains(&os), "{e} repeats {os}");
        assert_eq!(
            error_chain(&e).matches(&os).count(),
            1,
            "{}",
            error_chain(&e)
        );
    }
}
