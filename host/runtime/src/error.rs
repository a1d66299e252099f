//! The runtime's error type, whose kinds are AMD's `kpack_error_t` values.

/// What went wrong; [`ErrorKind::code`] is AMD's numeric `kpack_error_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
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
            _ => ErrorKind::InvalidFormat,
        }
    }
}

/// A loader failure: a kind and a message naming what was tried.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// A new error (public so the C ABI can report argument errors alike).
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }
    /// The category.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl From<kpack_format::Error> for Error {
    fn from(e: kpack_format::Error) -> Self {
        Error {
            kind: e.kind().into(),
            message: e.to_string(),
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_amds() {
        assert_eq!(ErrorKind::ArchiveNotFound.code(), 13);
        assert_eq!(ErrorKind::ArchNotFound.code(), 14);
        assert_eq!(ErrorKind::InvalidMetadata.code(), 12);
        for k in [
            kpack_format::ErrorKind::KernelNotFound,
            kpack_format::ErrorKind::Io,
            kpack_format::ErrorKind::MsgpackParseFailed,
        ] {
            assert_eq!(ErrorKind::from(k).code(), k.code());
        }
    }
}
