//! Offload fat binaries: every code object goes into per-arch KPAK archives
//! (an [`ArchiveSet`]), and the binary is rewritten host-only with a
//! `.rocm_kpack_ref` marker ([`offload_binary`]).
//!
//! Archive naming: one archive per GPU *processor*, `<name>_<processor>.kpack`
//! (`libfoo_gfx90a.kpack`); target ids with features (`gfx90a:xnack+`,
//! `gfx90a:xnack-`) stay distinct inside it, as TOC arches. File names never
//! contain `:`, and AMD's runtime still finds them: it expands `@GFXARCH@`
//! from the most specific target down to the bare processor.
//!
//! With [`ArchiveSet::set_group`] (`--archive-group sub-family|family`)
//! one archive holds a whole group of ROCm's packaging hierarchy
//! (`libfoo_gfx110x.kpack`: gfx1100..gfx1103 and their variants as TOC
//! arches, `gfx_arch_family` = the group), and markers list the group
//! files explicitly ([`ArchiveSet::marker_search_paths`]) because
//! `@GFXARCH@` expands to targets only.
//!
//! TOC keys are `<kernel_name>#<co_index>`, where co_index is the index of
//! the bundle a wrapper's pointer resolves to (not the wrapper's position).
//!
//! Modules by job: [`ArchiveSet`] (where each target's code goes, and the
//! marker's search paths), the offload flow ([`offload`]: read through the
//! front door, stage the host image, add code objects, commit), adding
//! code objects from bundles ([`add_code_objects`]: streamed, parallel,
//! under the memory budget); outputs are staged through `kpack-fsafe`. The host
//! binary's format is `kpack-binary`'s business: this crate never asks
//! whether a file is ELF or PE.
//!
//! ```no_run
//! use kpack_offload::{ArchiveSet, OffloadOptions, offload};
//! let budget = kpack_bundle::MemoryBudget::new(4 << 30);
//! let archives = ArchiveSet::new("out/.kpack".into(), "libfoo".into(), Default::default(), budget);
//! let opts = OffloadOptions {
//!     kernel_name: "lib/libfoo.so".into(),
//!     search_paths: vec![".kpack/libfoo_@GFXARCH@.kpack".into()],
//!     verify_hash: true,
//! };
//! let done = offload("libfoo.so".as_ref(), "out/libfoo.so".as_ref(), &opts, &Default::default(), archives).unwrap();
//! println!("{} archives", done.archives.len());
//! ```
#![forbid(unsafe_code)]

mod add;
mod archive_set;
mod flow;
mod report;

pub use add::{Added, add_code_objects};
pub use archive_set::ArchiveSet;
pub use flow::{Offload, check_filter, offload, offload_binary, stage_host};
pub use report::{OffloadReport, WrittenArchive};

use std::path::PathBuf;

use kpack_binary::TransformReport;

/// What went wrong while offloading.
///
/// Each message names the file; the underlying error is the
/// [`std::error::Error::source`] and is not repeated in the message.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading, transforming or checking the host binary failed.
    #[error(transparent)]
    Binary(#[from] kpack_binary::Error),
    /// Writing an archive failed.
    #[error(transparent)]
    Archive(#[from] kpack_format::Error),
    /// A kept entry that is portable SPIR-V is no whole SPIR-V module.
    #[error(
        "{path}: bundle {bundle}: entry {entry} is no valid SPIR-V module; nothing is archived"
    )]
    BrokenSpirv {
        /// The input.
        path: PathBuf,
        /// The bundle's index.
        bundle: usize,
        /// The entry id.
        entry: String,
        /// What is wrong with its header.
        #[source]
        source: Box<kpack_bundle::Error>,
    },
    /// Reading a code object failed.
    #[error("{path}: bundle {bundle}")]
    Bundle {
        /// The binary.
        path: PathBuf,
        /// Bundle index.
        bundle: usize,
        /// The cause.
        source: kpack_bundle::Error,
    },
    /// The target filter (`--gpu-targets`, `--exclude-arch`) removes
    /// every code object: refused rather than writing a binary with no
    /// device code (AMD since #7957).
    #[error(
        "{path}: the target filter removes every code object (targets {}); nothing written",
        targets.join(", ")
    )]
    AllTargetsFiltered {
        /// The binary.
        path: PathBuf,
        /// The targets the binary carries, sorted, each once.
        targets: Vec<String>,
    },
    /// Every wrapper is HIPK, as kpack leaves them, but the marker they
    /// point at is missing: a damaged binary, not an offloaded one.
    #[error(
        "{path}: its wrappers are HIPK (offloaded by kpack) but it has no {section} marker section, so no runtime can find its device code; offload the original fat binary instead"
    )]
    NoMarker {
        /// The binary.
        path: PathBuf,
        /// The marker section's name (`.rocm_kpack_ref`, `.kpackrf`).
        section: &'static str,
    },
    /// An archive would be written onto an input or onto another output
    /// of the same command (checked with or without `--force`).
    #[error(
        "{}: this archive would replace {}; choose another archive directory or name",
        path.display(),
        other.display()
    )]
    OutputClash {
        /// The archive.
        path: PathBuf,
        /// The input or output it would replace.
        other: PathBuf,
    },
    /// Writing the output failed.
    #[error(transparent)]
    Io(#[from] kpack_fsafe::IoError),
    /// Placing an output failed (an archive directory that cannot be
    /// made, or is a file).
    #[error(transparent)]
    Output(#[from] kpack_fsafe::Error),
}

impl Error {
    /// `what` (`cannot write`, ...) failed on `path` because of `source`.
    pub(crate) fn io(
        path: impl Into<PathBuf>,
        what: &'static str,
        source: std::io::Error,
    ) -> Error {
        Error::Io(kpack_fsafe::IoError::new(path, what, source))
    }
}

/// How to name and fill the marker.
#[derive(Debug, Clone)]
pub struct OffloadOptions {
    /// TOC key prefix written into the marker (`kernel_name`).
    pub kernel_name: String,
    /// Marker search paths, relative to the output binary's directory.
    pub search_paths: Vec<String>,
    /// Check the MD5 of compressed bundles.
    pub verify_hash: bool,
}

/// What happened to one binary.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Outcome {
    /// Device code moved to archives, binary rewritten.
    Offloaded {
        /// `"pe"` for a PE image; absent for ELF.
        #[serde(skip_serializing_if = "Option::is_none")]
        format: Option<&'static str>,
        /// The format's transform report.
        transform: TransformReport,
        /// Code objects added to archives.
        code_objects: usize,
        /// Target ids found.
        targets: Vec<String>,
        /// Target ids the filter left out, one per code object left out.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        excluded: Vec<String>,
    },
    /// No device code: copied unchanged.
    HostOnly,
    /// Already transformed by kpack: copied unchanged.
    AlreadyOffloaded,
}
