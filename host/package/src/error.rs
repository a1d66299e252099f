//! The errors of a package split, each naming the package.

use std::path::PathBuf;

/// What went wrong splitting a package.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input is not a package of the format asked for, or breaks its rules.
    #[error("{}: not a valid {format} package: {why}", path.display())]
    Invalid {
        /// The input.
        path: PathBuf,
        /// `.deb` or `.rpm`.
        format: &'static str,
        /// What is wrong, naming the member or field.
        why: String,
    },
    /// A file could not be read or written.
    #[error(transparent)]
    Io(#[from] kpack_fsafe::IoError),
    /// The package's tree could not be split.
    #[error("{}: {why}", path.display())]
    Split {
        /// The input.
        path: PathBuf,
        /// What failed.
        why: String,
    },
    /// The outputs could not be staged or committed.
    #[error(transparent)]
    Outputs(#[from] kpack_fsafe::Error),
}

impl Error {
    /// An I/O error on `path`.
    pub(crate) fn io(
        path: impl Into<PathBuf>,
        what: &'static str,
        source: std::io::Error,
    ) -> Error {
        Error::Io(kpack_fsafe::IoError::new(path, what, source))
    }

    /// An invalid `.deb` (`format` `"deb"`) or `.rpm` input.
    pub(crate) fn invalid(
        path: impl Into<PathBuf>,
        format: &'static str,
        why: impl Into<String>,
    ) -> Error {
        Error::Invalid {
            path: path.into(),
            format,
            why: why.into(),
        }
    }
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_error_names_the_file_and_keeps_the_os_error_as_its_source() {
        let e = Error::io(
            std::path::Path::new("a/b"),
            "cannot read",
            std::io::Error::other("disk on fire"),
        );
        assert!(matches!(e, Error::Io(_)));
        assert_eq!(e.to_string(), "a/b: cannot read");
        let cause = std::error::Error::source(&e).expect("the I/O error is the source");
        assert_eq!(cause.to_string(), "disk on fire");
    }
}
