//! Read and write KPAK v1 archives (`.kpack`), byte-compatible with AMD's
//! rocm-kpack (see `shared/spec/rocm-kpack.md` §2).
//!
//! A KPAK file is a 16-byte header (`"KPAK"`, version 1, `toc_offset`)
//! zero-padded to 64 bytes, a blob area, and a msgpack table of contents
//! mapping `"<binary path>#<co_index>"` → arch → `{type, ordinal,
//! original_size[, metadata]}`. Kernels are stored raw (scheme `"none"`) or
//! as one zstd frame each (`"zstd-per-kernel"`).
//!
//! Layers:
//! - [`Archive`] (reader): memory-maps a file, validates *everything* once at
//!   open (every inconsistency is an [`Error`] naming the offset, never a
//!   panic), then serves [`Archive::get`] without locks: raw kernels are
//!   borrowed from the mapping, zstd kernels decoded with a per-thread
//!   context and checked against `original_size`.
//! - [`ArchiveWriter`] (writer): streams kernels to a spool file as they are
//!   added, and on [`ArchiveWriter::finish`] writes the archive to a temp
//!   file beside the destination and renames it into place. Output is
//!   deterministic: entries sorted by (key, arch), ordinals in that order,
//!   fixed zstd level ([`EntryOrder::Insertion`] reproduces AMD's Python
//!   writer's order instead).
//! - [`Error`] with [`ErrorKind`], AMD's `kpack_error_t` categories (the
//!   numbers are `kpack_runtime::ErrorKind::code`).
//!
//! API at a glance:
//! - `Archive::open(path)` / `from_bytes(Vec<u8>)` / `from_reader(impl Read)`;
//!   `scheme()`, `group_name()`, `gfx_arch_family()`, `arches()` (file order),
//!   `has_arch(a)`, `binaries()` / `binary(i)` / `binary_count()` (byte-wise
//!   sorted keys), `entries()` (sorted by key, arch), `entry(key, arch)`,
//!   `get(key, arch) -> Result<Cow<[u8]>>`, `read(&Entry)`, `dump() -> String`.
//! - `verify(path) -> Result<Vec<ArchiveProblem>>` / `Archive::verify()`: the strict
//!   checks of `kpack archive verify` and `kpack verify` (every kernel
//!   decodes, every TOC arch listed in `gfx_arches`, every key indexed).
//! - `ArchiveWriter::create(path, WriterOptions)`; `add(key, arch, &[u8])`,
//!   `add_with_metadata(.., &[(k, v)])`, `add_from_reader(..)`;
//!   `finish() -> Written`.
//! - `WriterOptions { group_name, gfx_arch_family, gfx_arches: Option<Vec>,
//!   compression: Compression::{None, Zstd { level }} (default level 3),
//!   order: EntryOrder::{Sorted (default), Insertion} }`.
//! - [`edit::replace`] / [`edit::merge`]: archive surgery (`kpack archive
//!   replace|merge`), one entry in memory at a time, staged outputs.
//! - [`convert::convert`]: re-encode archives into another scheme and
//!   grouping (`kpack archive convert`), every code object kept.
//! - `Marker::parse(&[u8])` / `Marker::to_bytes()`: the `.rocm_kpack_ref`
//!   marker (`kernel_name`, `search_paths`), AMD's parsing rules.
//! - `Error::kind() -> ErrorKind` (AMD's categories), `offset()`, `path()`.
//!
//! ```
//! use kpack_format::{Archive, ArchiveWriter, Compression, WriterOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("blas_gfx1100.kpack");
//! let options = WriterOptions {
//!     group_name: "blas".into(),
//!     gfx_arch_family: "gfx1100".into(),
//!     compression: Compression::Zstd { level: 3 },
//!     ..Default::default()
//! };
//! let mut writer = ArchiveWriter::create(&path, options)?;
//! writer.add("lib/libblas.so#0", "gfx1100", b"\x7fELF code object")?;
//! writer.finish()?;
//!
//! let archive = Archive::open(&path)?;
//! assert_eq!(archive.arches(), ["gfx1100"]);
//! assert_eq!(&*archive.get("lib/libblas.so#0", "gfx1100")?, b"\x7fELF code object");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod convert;
mod decode;
mod delta;
pub mod digest;
pub mod edit;
mod error;
mod finding;
mod frame;
pub mod listing;
mod marker;
mod mmap;
mod mode;
pub mod pack;
mod read;
mod sha256x2;
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod testing;
mod verify;
mod verify_report;
mod write;

pub use delta::DeltaPlan;
pub use error::{Error, ErrorKind, Result, error_chain};
pub use finding::{Finding, Severity};
pub use marker::{
    GFXARCH, MARKER_MAX_LEN, Marker, MarkerProblem, archive_file_name, archive_file_target,
};
pub use mode::{CompressionMode, Readers, SIZE_LEVEL, describe_archives};
pub use read::{Archive, DecodeTarget, Entry, Scheme};
pub use verify::{ArchiveProblem, verify};
pub use verify_report::{Verification, VerifiedArchive};
pub use write::{
    ArchiveWriter, Compression, DEFAULT_LEVEL, DeltaCompressor, DeltaKey, EntryOrder, FileRange,
    KernelCompressor, LEVELS, WriterOptions, Written, check_level, sha256,
};
/// zstd's output-buffer trait, the supertrait of [`DecodeTarget`].
pub use zstd::zstd_safe::WriteBuf;

/// The four magic bytes at offset 0: `"KPAK"`.
pub const MAGIC: [u8; 4] = *b"KPAK";
/// Header version of AMD's format (schemes `none`, `zstd-per-kernel`).
pub const VERSION: u32 = 1;
/// Header version of the `zstd-delta` scheme (`docs/kpak-v2-zstd-delta.md`);
/// AMD's loader refuses it with `UNSUPPORTED_VERSION` instead of misreading.
pub const VERSION_DELTA: u32 = 2;
/// The v1 TOC key holding each `zstd-per-kernel` frame's absolute offset
/// (after its size word); AMD's parser ignores keys it does not know.
pub const FRAME_INDEX_KEY: &str = "zstd_frame_offsets";
/// Size of the fixed header (magic, version, toc_offset).
pub const HEADER_SIZE: usize = 16;
/// Offset of the blob area (the header is zero-padded to it).
pub const BLOB_START: u64 = 64;

impl Archive {
    /// Validate an archive read from `reader` to its end (for pipes and
    /// tests; files should use [`Archive::open`], which maps instead).
    pub fn from_reader(mut reader: impl std::io::Read) -> Result<Archive> {
        let mut bytes = Vec::new();
        reader
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io("cannot read archive", e))?;
        Archive::from_bytes(bytes)
    }
}
