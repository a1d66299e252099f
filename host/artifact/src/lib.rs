//! TheRock build artifacts as files: an artifact is a directory (or a
//! `.tar.zst`/`.tar.xz`/`.tar.gz` archive of one) whose
//! `artifact_manifest.txt` lists the prefix directories it holds.
//!
//! Layers:
//! - names and manifests: [`MANIFEST`], [`read_manifest`],
//!   [`write_manifest`], [`artifact_archive_stem`];
//! - reading archives: [`Codec`] (by the front door's
//!   [`kpack_binary::Compression`]) under [`Limits`] (inflated size by
//!   ratio and total, the zstd window), and [`walk`], the one walk over an
//!   archive's members with the one rule for their names and links
//!   ([`MemberPath`]: nothing is created under or through a symlink
//!   member, hard links name earlier files, no name comes twice);
//! - unpacking and manifests: [`unpack_artifact`], [`unpack_archives`],
//!   [`archive_manifest`], [`directory_manifest`]
//!   ([`EquivalenceManifest`], TheRock's `artifact_equivalence` shape);
//! - writing archives: [`write_artifact_archive`] (reproducible bytes),
//!   with the plain files of a split kept in a [`Store`];
//! - [`Remover`]: scratch removed in the background.
//!
//! # Example
//! ```no_run
//! use kpack_artifact::{Event, Limits, walk};
//! use std::path::Path;
//!
//! let walked = walk(Path::new("blas_lib_gfx1100.tar.zst"), &Limits::default(), |e| {
//!     if let Event::Member(m) = e {
//!         println!("{} ({:?})", m.path, m.kind);
//!     }
//!     Ok::<(), kpack_artifact::Error>(())
//! })?;
//! for w in &walked.warnings {
//!     eprintln!("warning: {w}");
//! }
//! # Ok::<(), kpack_artifact::Error>(())
//! ```
#![forbid(unsafe_code)]

mod archive_output;
mod codec;
mod error;
mod manifest;
mod member;
mod remover;
mod store;
mod unpack;

pub use archive_output::{
    ARCHIVE_SUFFIX, EQUIVALENCE_SCHEMA, EQUIVALENCE_SUFFIX, EquivalenceFile, EquivalenceManifest,
    OutputFormat, directory_manifest, sorted_walk, write_archive_with, write_artifact_archive,
};
pub use codec::{Codec, Limits, OverLimit, artifact_archive_stem};
pub use error::{Error, ErrorKind, Parts, Result};
pub use manifest::{MANIFEST, parse_manifest, read_manifest, write_manifest};
pub use member::{Event, Member, MemberKind, MemberPath, Walked, walk};
pub use remover::Remover;
pub use store::{Store, StoreReader, StoreWriter, Stored, write_file};
pub use unpack::{Unpacked, archive_manifest, artifact_manifest, unpack_archives, unpack_artifact};
