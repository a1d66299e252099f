//! The `zstd-delta` encoder's error: which step failed, on which member,
//! with zstd's own error name as the cause. The writer turns it into the
//! crate's [`crate::Error`], naming the kernel key and arches it knows.

use std::fmt;

use zstd::zstd_safe::CParameter;

pub(crate) use crate::frame::ZstdError;

/// The zstd call that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Resetting a reused context.
    Reset,
    /// Setting one compression parameter.
    Parameter(CParameter),
    /// Referencing the base's bytes as the frame's prefix.
    Prefix,
    /// Compressing the frame.
    Compress,
    /// Decoding a frame.
    Decode,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Reset => f.write_str("zstd cannot reset its context"),
            Step::Parameter(p) => write!(f, "zstd cannot set {p:?}"),
            Step::Prefix => f.write_str("zstd cannot reference the base as a prefix"),
            Step::Compress => f.write_str("zstd cannot compress the frame"),
            Step::Decode => f.write_str("zstd cannot decode the frame"),
        }
    }
}

/// The frame a failure belongs to: a member (an index into the members a
/// function was given, or an ordinal across keys) and, for a delta, the
/// member it is compressed against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Member {
    pub(crate) index: usize,
    pub(crate) base: Option<usize>,
}

/// A failure of the `zstd-delta` encoder.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// A zstd call failed.
    #[error("{step}")]
    Zstd {
        step: Step,
        #[source]
        source: ZstdError,
    },
    /// A frame decoded to a different number of bytes than its entry's.
    #[error("the frame decoded to {got} bytes, expected {expected}")]
    Size { got: usize, expected: usize },
    /// An entry's decoded size does not fit in this machine's address space.
    #[error("a kernel of {0} bytes does not fit in memory")]
    TooLarge(u64),
    /// A worker thread stopped without leaving its result.
    #[error("a worker thread stopped")]
    Worker,
    /// `source` happened on `member`'s frame; [`Error::into_parts`] takes
    /// the member off for the writer, which names it by key and arch.
    #[error("member {}{}", .member.index, match .member.base {
        Some(b) => format!(" (a delta against member {b})"),
        None => String::new(),
    })]
    On {
        member: Member,
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    /// zstd's `code` from the call at `step`.
    pub(crate) fn zstd(step: Step) -> impl Fn(usize) -> Error {
        move |code| Error::Zstd {
            step,
            source: ZstdError::code(code),
        }
    }

    /// This failure, tied to member `index` (a delta against `base`)
    /// unless it already names a member.
    pub(crate) fn on(self, index: usize, base: Option<usize>) -> Error {
        match self {
            Error::On { .. } => self,
            e => Error::On {
                member: Member { index, base },
                source: Box::new(e),
            },
        }
    }

    /// The member the failure is tied to, if any, and the failure itself.
    fn into_parts(self) -> (Option<Member>, Error) {
        match self {
            Error::On { member, source } => (Some(member), *source),
            e => (None, e),
        }
    }

    /// The crate's error for this failure while doing `what` ("cannot
    /// compress kernel \"k\""), its member named by `name` (an arch, or
    /// an arch and key): an I/O-kind error, as a failing writer's is,
    /// caused by the failure itself.
    pub(crate) fn named(self, what: &str, name: impl Fn(usize) -> String) -> crate::Error {
        let (member, cause) = self.into_parts();
        let message = match member {
            Some(Member {
                index,
                base: Some(b),
            }) => format!("{what} for {} (a delta against {})", name(index), name(b)),
            Some(Member { index, base: None }) => format!("{what} for {}", name(index)),
            None => what.to_owned(),
        };
        crate::Error::new(crate::ErrorKind::Io, message).with_source(cause)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::error_chain;

    #[test]
    fn a_zstd_failure_names_the_step_and_then_zstds_error() {
        let e = super::super::decompress(b"not a zstd frame", None, 4).unwrap_err();
        assert_eq!(
            error_chain(&e),
            "zstd cannot decode the frame: Unknown frame descriptor"
        );
        assert_eq!(
            Step::Parameter(CParameter::WindowLog(99)).to_string(),
            "zstd cannot set WindowLog(99)"
        );
    }

    #[test]
    fn the_member_is_tied_once_and_taken_off_whole() {
        let e = Error::Worker.on(3, Some(1)).on(5, None);
        assert_eq!(
            error_chain(&e),
            "member 3 (a delta against member 1): a worker thread stopped"
        );
        let named = Error::Worker
            .on(3, Some(1))
            .named("cannot compress kernel \"k\"", |i| format!("gfx{i}"));
        assert_eq!(named.kind(), crate::ErrorKind::Io);
        assert_eq!(
            error_chain(&named),
            "cannot compress kernel \"k\" for gfx3 (a delta against gfx1): \
             a worker thread stopped"
        );
        let (member, e) = e.into_parts();
        assert_eq!(
            member,
            Some(Member {
                index: 3,
                base: Some(1)
            })
        );
        assert!(matches!(e, Error::Worker));
    }
}
