//! What a file-safety check or an atomic write refuses or fails with.

use std::path::PathBuf;

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A refused input or output.
///
/// Each message names the file; an underlying I/O error is the
/// [`std::error::Error::source`] and is not repeated in the message.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input that cannot be looked at.
    #[error("{}: cannot open", path.display())]
    Open {
        /// The input.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// An input that is not a regular file.
    #[error("{}: not a regular file ({kind})", path.display())]
    NotRegular {
        /// The input.
        path: PathBuf,
        /// What it is instead ([`crate::file_kind`]).
        kind: &'static str,
    },
    /// An output that is the input itself.
    #[error(
        "{}: is the input {}; kpack never modifies its input, choose another output",
        output.display(),
        input.display()
    )]
    SameFile {
        /// The input.
        input: PathBuf,
        /// The output.
        output: PathBuf,
    },
    /// An output file that is a directory.
    #[error("{}: is a directory; name the file to write", path.display())]
    OutputIsDir {
        /// The output.
        path: PathBuf,
    },
    /// An existing output without `--force`.
    #[error("{}: already exists; pass --force to overwrite", path.display())]
    Exists {
        /// The output.
        path: PathBuf,
    },
    /// An existing output with other contents than the staged one, where
    /// identical outputs are kept ([`crate::Existing::KeepIdentical`]), or
    /// where the rule is applied early ([`crate::Outputs::compare_staged`]).
    #[error("{}: already exists with other contents (first difference: {}); pass --force to overwrite", path.display(), first.display())]
    ExistsDiffering {
        /// The output.
        path: PathBuf,
        /// The first path inside it that differs (empty: the output itself).
        first: PathBuf,
    },
    /// A flag whose value must be a plain file name.
    #[error("{flag} {value:?}: must be a plain name (no '/', not '.' or '..')")]
    NotPlainName {
        /// The flag (`--name`).
        flag: String,
        /// Its value.
        value: String,
    },
    /// A flag whose value must be a relative path inside the output.
    #[error("{flag} {value:?}: must be a relative path inside the output (no '..', not absolute)")]
    NotInsideRoot {
        /// The flag (`--archive-dir`).
        flag: String,
        /// Its value.
        value: String,
    },
    /// A path that cannot be made absolute.
    #[error("{}", path.display())]
    Absolute {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// An output directory inside an input tree.
    #[error(
        "{}: is inside the input {}; choose an output outside it",
        output.display(),
        input.display()
    )]
    OutputInsideInput {
        /// The input.
        input: PathBuf,
        /// The output.
        output: PathBuf,
    },
    /// An input inside the output directory.
    #[error(
        "{}: the input {} is inside it; choose an output outside the input",
        output.display(),
        input.display()
    )]
    InputInsideOutput {
        /// The input.
        input: PathBuf,
        /// The output.
        output: PathBuf,
    },
    /// An output directory that exists and is not a directory.
    #[error("{}: is not a directory", path.display())]
    NotDir {
        /// The path.
        path: PathBuf,
    },
    /// An output directory that cannot be created.
    #[error("cannot create {}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A name taken from an input that cannot name an output.
    #[error(
        "{}: {field} {value:?} cannot name an output (it must be a plain name: not empty, no '/', '\\' or NUL, no drive, not '.' or '..')",
        origin.display()
    )]
    BadInputName {
        /// The file the name came from.
        origin: PathBuf,
        /// Where in it (`METADATA Name`, `architecture group`).
        field: String,
        /// The name.
        value: String,
    },
    /// One output planned twice, or inside another.
    #[error("{}: planned twice (overlaps {})", path.display(), other.display())]
    PlannedTwice {
        /// The output.
        path: PathBuf,
        /// The output it overlaps.
        other: PathBuf,
    },
    /// A planned output that was never staged.
    #[error("{}: planned but never written", path.display())]
    NotStaged {
        /// The output.
        path: PathBuf,
    },
    /// An output that cannot be moved into place.
    #[error("{}: cannot move into place", path.display())]
    Commit {
        /// The output.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A directory that cannot be opened or locked.
    #[error("{}: {what}", path.display())]
    Lock {
        /// The directory.
        path: PathBuf,
        /// `cannot open to lock` or `cannot lock`.
        what: &'static str,
        /// The cause.
        source: std::io::Error,
    },
}

/// Writing an output (or reading the input it is copied from) failed.
#[derive(Debug, thiserror::Error)]
#[error("{}: {what}", path.display())]
pub struct IoError {
    /// The file.
    pub path: PathBuf,
    /// What was being done (`cannot write`, `cannot read`).
    pub what: &'static str,
    /// The cause.
    pub source: std::io::Error,
}

impl IoError {
    /// `what` failed on `path` because of `source`.
    pub fn new(path: impl Into<PathBuf>, what: &'static str, source: std::io::Error) -> IoError {
        IoError {
            path: path.into(),
            what,
            source,
        }
    }
}

impl Error {
    /// The message and the I/O cause, for a caller that wraps this error
    /// in its own type (the message never repeats the cause).
    pub fn into_parts(self) -> (String, Option<std::io::Error>) {
        let message = self.to_string();
        let source = match self {
            Error::Open { source, .. }
            | Error::Absolute { source, .. }
            | Error::CreateDir { source, .. }
            | Error::Lock { source, .. }
            | Error::Commit { source, .. } => Some(source),
            _ => None,
        };
        (message, source)
    }

    /// An output that exists already (refused without `--force`).
    pub fn is_exists(&self) -> bool {
        matches!(self, Error::Exists { .. } | Error::ExistsDiffering { .. })
    }

    /// A name taken from an input that cannot name an output.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, Error::BadInputName { .. })
    }
}
