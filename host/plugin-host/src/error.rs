//! The one error type of this crate, with a [`ErrorKind`] callers branch on.

use std::fmt;

/// What went wrong, for callers that react differently (exit codes, retries).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Reading or writing a file failed.
    Io,
    /// No handler with that name (or no version matching the requirement).
    NotFound,
    /// The component was built against a WIT version this kpack cannot run.
    IncompatibleVersion,
    /// Not a handler component, or its `info` is malformed.
    Invalid,
    /// The handler trapped (panic, `unreachable`, bad memory access).
    Trap,
    /// The handler used up its time budget for one call.
    Timeout,
    /// The handler tried to grow its memory past the cap.
    OutOfMemory,
    /// The handler called something the sandbox does not provide
    /// (filesystem, network, environment, clock, stdio).
    SandboxViolation,
    /// The handler returned an error (`handler-error` in the WIT).
    Handler,
    /// A registry index is malformed, a blob does not match its checksum,
    /// or a publish conflicts with an existing version.
    Registry,
    /// Bad arguments (a handler spec, a version requirement, options).
    Usage,
}

/// An error from loading, running or publishing handlers. The message names
/// the handler (name, version, WIT version) or the file involved; an I/O
/// cause is the [`std::error::Error::source`], not part of the message.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn io(what: impl fmt::Display, e: std::io::Error) -> Self {
        Error {
            kind: ErrorKind::Io,
            message: what.to_string(),
            source: Some(Box::new(e)),
        }
    }

    /// An error of `kind` whose cause (a network failure, say) is `source`.
    pub(crate) fn with_source(
        kind: ErrorKind,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error {
            kind,
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn io_message_names_the_file_and_leaves_the_cause_to_source() {
        let e = Error::io(
            "registry index idx.json",
            std::io::Error::other("disk on fire"),
        );
        assert_eq!(e.to_string(), "registry index idx.json");
        assert_eq!(
            e.source().map(|s| s.to_string()).as_deref(),
            Some("disk on fire")
        );
    }
}
