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
    /// Splitting the unpacked tree failed (the [`kpack_split::Error`] is the
    /// source), or some files in it could not be processed; nothing was
    /// written.
    Split,
    /// The input is kpack's own output (a host wheel with offloaded
    /// binaries, or a device wheel): splitting it again is refused.
    AlreadySplit,
    /// The output would replace the input.
    Exists,
}

/// A failure of reading, splitting or writing a wheel, naming the file (and
/// wheel entry) involved.
///
/// `Display` is `path: message`; the underlying error (I/O, zip, or
/// `kpack-split`'s own [`kpack_split::Error`]) is the
/// [`std::error::Error::source`], typed, and not repeated in the message.
#[derive(Debug, thiserror::Error)]
#[error("{}{message}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
pub struct Error {
    kind: ErrorKind,
    path: Option<PathBuf>,
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
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

    pub(crate) fn with_source(
        mut self,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        self.source = Some(Box::new(e));
        self
    }

    pub(crate) fn io(path: impl Into<PathBuf>, what: &str, e: std::io::Error) -> Error {
        Error::new(ErrorKind::Io, Some(path.into()), what).with_source(e)
    }

    pub(crate) fn invalid(path: impl Into<PathBuf>, message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Invalid, Some(path.into()), message)
    }

    pub(crate) fn zip(path: impl Into<PathBuf>, what: &str, e: zip::result::ZipError) -> Error {
        let kind = match e {
            zip::result::ZipError::Io(_) => ErrorKind::Io,
            _ => ErrorKind::Invalid,
        };
        Error::new(kind, Some(path.into()), what).with_source(e)
    }

    /// Splitting the unpacked `input` failed with `e`.
    pub(crate) fn split(input: impl Into<PathBuf>, e: kpack_split::Error) -> Error {
        Error::new(
            ErrorKind::Split,
            Some(input.into()),
            "cannot split the unpacked wheel",
        )
        .with_source(e)
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

impl From<kpack_fsafe::Error> for Error {
    fn from(e: kpack_fsafe::Error) -> Error {
        let kind = if e.is_exists() {
            ErrorKind::Exists
        } else if e.is_bad_input() {
            ErrorKind::Invalid
        } else {
            ErrorKind::Io
        };
        let (message, source) = e.into_parts();
        let mut err = Error::new(kind, None, message);
        if let Some(s) = source {
            err = err.with_source(s);
        }
        err
    }
}

/// How much of a quoted input a message shows.
const QUOTE_CHARS: usize = 60;

/// `s` quoted for a message (as `{:?}` does), cut to its first
/// [`QUOTE_CHARS`] characters: an input's line can be gigabytes long.
pub(crate) fn quote(s: &str) -> String {
    match s.char_indices().nth(QUOTE_CHARS) {
        None => format!("{s:?}"),
        Some((i, _)) => format!("{:?}… ({} bytes)", &s[..i], s.len()),
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn zip_io_failure_keeps_the_os_error_as_a_typed_source() {
        let os = std::io::Error::other("disk on fire");
        let e = Error::zip("a.whl", "entry #3", zip::result::ZipError::Io(os));
        assert_eq!(e.kind(), ErrorKind::Io);
        assert_eq!(e.to_string(), "a.whl: entry #3");
        let zip = e.source().expect("the zip error is the source");
        assert!(zip.downcast_ref::<zip::result::ZipError>().is_some());
        assert_eq!(
            zip.source().map(|s| s.to_string()).as_deref(),
            Some("disk on fire")
        );
    }
}
