//! Strict archive checks: what `kpack archive verify` and the split tools'
//! `verify` report about a `.kpack` file, beyond what [`Archive::open`]
//! already refuses. One set of rules, so the two commands cannot disagree.

use std::fmt;
use std::path::Path;

use crate::error::{Error, ErrorKind, Result};
use crate::read::Archive;

/// One problem [`verify`] or [`Archive::verify`] found in an archive.
#[derive(Debug)]
#[non_exhaustive]
pub enum Finding {
    /// The archive does not open: its header or TOC is invalid.
    Invalid(Error),
    /// An entry's stored bytes do not decode to its code object.
    Entry {
        /// The entry's binary key.
        key: String,
        /// The entry's architecture.
        arch: String,
        /// Why it does not decode.
        error: Error,
    },
    /// An architecture with TOC entries is missing from `gfx_arches`:
    /// AMD's loader decides from that list alone, so it never finds them.
    ArchNotListed {
        /// The architecture.
        arch: String,
    },
    /// A binary key without the `#<co_index>` suffix the loader looks up.
    KeyWithoutIndex {
        /// The key.
        key: String,
    },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Invalid(error) => write!(f, "{error}"),
            Finding::Entry { key, arch, error } => write!(f, "entry {key:?} {arch:?}: {error}"),
            Finding::ArchNotListed { arch } => write!(
                f,
                "TOC arch {arch:?} is missing from gfx_arches, so AMD's loader never finds it"
            ),
            Finding::KeyWithoutIndex { key } => write!(
                f,
                "key {key:?} has no #<co_index> suffix; the current loader cannot look it up"
            ),
        }
    }
}

/// Open the archive at `path` and check it with [`Archive::verify`].
///
/// An archive that does not open is a [`Finding::Invalid`]; only a file
/// that cannot be read at all ([`ErrorKind::FileNotFound`],
/// [`ErrorKind::Io`], which includes an empty file) is an error.
pub fn verify(path: impl AsRef<Path>) -> Result<Vec<Finding>> {
    match Archive::open(path) {
        Ok(archive) => Ok(archive.verify()),
        Err(e) if matches!(e.kind(), ErrorKind::FileNotFound | ErrorKind::Io) => Err(e),
        Err(e) => Ok(vec![Finding::Invalid(e)]),
    }
}

impl Archive {
    /// Check what opening does not: decode every entry (zstd frames to
    /// their `original_size`), every TOC architecture listed in
    /// `gfx_arches`, every key ending in `#<co_index>`. Findings come in
    /// that order; entries and keys in sorted order, architectures sorted.
    pub fn verify(&self) -> Vec<Finding> {
        let mut findings = Vec::new();
        let mut toc_arches: Vec<&str> = Vec::new();
        for entry in self.entries() {
            toc_arches.push(entry.arch());
            if let Err(error) = self.read(entry) {
                findings.push(Finding::Entry {
                    key: entry.key().to_owned(),
                    arch: entry.arch().to_owned(),
                    error,
                });
            }
        }
        toc_arches.sort_unstable();
        toc_arches.dedup();
        for arch in toc_arches {
            if !self.has_arch(arch) {
                findings.push(Finding::ArchNotListed {
                    arch: arch.to_owned(),
                });
            }
        }
        for key in self.binaries() {
            let indexed = key
                .rsplit_once('#')
                .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if !indexed {
                findings.push(Finding::KeyWithoutIndex {
                    key: key.to_owned(),
                });
            }
        }
        findings
    }
}
