//! The error type of this crate.

use std::fmt;

/// What went wrong, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Reading the input failed.
    Io,
    /// The input ends before a structure it declares.
    Truncated,
    /// A magic number or header is not what the format requires.
    BadHeader,
    /// A size, offset or count is impossible for the data around it.
    BadRange,
    /// A bundle-entry id does not follow the grammar.
    BadEntryId,
    /// A target id does not follow the grammar.
    BadTargetId,
    /// Decompression failed or produced the wrong size.
    Decompress,
    /// The CCOB hash does not match the decompressed payload.
    HashMismatch,
    /// A compression method this crate does not know.
    UnknownMethod,
    /// The bytes are not an AMDGPU code object.
    NotCodeObject,
    /// A code object is larger than the memory ceiling (`--max-memory`).
    MemoryLimit,
}

/// An error with the offset (in the input being parsed) where it was found.
///
/// `Display` is the message and offset only; an underlying error (I/O,
/// decompression, an ELF or note parse, a nested bundle's error) is
/// reported by [`std::error::Error::source`], never repeated in the message.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    offset: Option<u64>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            offset: None,
            source: None,
        }
    }

    pub(crate) fn at(kind: ErrorKind, offset: u64, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            offset: Some(offset),
            source: None,
        }
    }

    pub(crate) fn io(offset: u64, e: std::io::Error) -> Error {
        let kind = if e.kind() == std::io::ErrorKind::UnexpectedEof {
            ErrorKind::Truncated
        } else {
            ErrorKind::Io
        };
        Error {
            kind,
            message: "read failed".into(),
            offset: Some(offset),
            source: Some(Box::new(e)),
        }
    }

    /// The same error with `source` as its cause.
    pub(crate) fn with_source(
        mut self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Error {
        self.source = Some(source.into());
        self
    }

    /// Shift the reported offset by `base` (when a nested structure was
    /// parsed relative to its container).
    pub fn offset_by(mut self, base: u64) -> Error {
        self.offset = Some(self.offset.unwrap_or(0) + base);
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Where, as a byte offset into the input, if known.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }

    /// The message without the offset.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(off) => write!(f, "at offset {off:#x}: {}", self.message)?,
            None => f.write_str(&self.message)?,
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as _)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn read_failure_names_offset_and_leaves_cause_to_source() {
        let e = Error::io(0x40, std::io::Error::other("disk on fire"));
        assert_eq!(e.to_string(), "at offset 0x40: read failed");
        assert_eq!(
            e.source().map(|s| s.to_string()).as_deref(),
            Some("disk on fire")
        );
    }
}
