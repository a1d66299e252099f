//! Find and load GPU code objects from `.kpack` archives at run time, with
//! the semantics of AMD's `librocm_kpack` loader (spec §10–11).
//!
//! Layers:
//! - archives: [`Archive`] (re-exported from `kpack-format`): mmap, list,
//!   get one kernel;
//! - the marker: [`Marker`] (re-exported), parsed with AMD's rules;
//! - the loader: [`Cache`] turns (marker, binary path, co_index, device arch
//!   list) into a code object: search paths relative to the binary's
//!   directory, `@GFXARCH@` expanded per [`compatible_targets`] (most
//!   specific first), `ROCM_KPACK_PATH` / `ROCM_KPACK_PATH_PREFIX` /
//!   `ROCM_KPACK_DISABLE` / `ROCM_KPACK_DEBUG` read once into a [`Config`];
//!   archives stay open; warm loads take no global lock; every failure
//!   carries a diagnostic of what was tried ([`Cache::last_diagnostic`]);
//! - [`discover_binary_path`]: which file backs an address.
//!
//! Errors are [`Error`] with an [`ErrorKind`] whose [`ErrorKind::code`] is
//! AMD's `kpack_error_t` number; the C ABI (`kpack-capi`) is a thin layer
//! over this crate.
//!
//! ```
//! use kpack_format::{ArchiveWriter, WriterOptions};
//! use kpack_runtime::{Cache, Config, Marker};
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::create_dir(dir.path().join("lib"))?;
//! std::fs::create_dir(dir.path().join(".kpack"))?;
//! let mut w = ArchiveWriter::create(dir.path().join(".kpack/blas_gfx942.kpack"), WriterOptions::default())?;
//! w.add("lib/libblas.so#0", "gfx942", b"code object")?;
//! w.finish()?;
//!
//! let marker = Marker {
//!     kernel_name: "lib/libblas.so".into(),
//!     search_paths: vec!["../.kpack/blas_@GFXARCH@.kpack".into()],
//! };
//! let cache = Cache::new(Config::default());
//! let binary = dir.path().join("lib/libblas.so");
//! let code = cache.load(&marker, &binary, 0, &["amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"])?;
//! assert_eq!(code, b"code object");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

mod bases;
mod cache;
mod config;
mod discover;
mod error;
mod isa;
mod stats;

pub use cache::{Cache, Location, MarkerArchive};
pub use config::{Config, PATH_SEPARATOR};
pub use discover::{discover_binary_path, find_in_maps};
pub use error::{Error, ErrorKind, Result};
pub use isa::{
    CLR_GENERIC_MAP, compatible_targets, gpu_arch_list, runtime_devices_of, runtime_generic_for,
    unasked_generic,
};
pub use kpack_amdgpu::{TARGET_PREFIX, strip_target_prefix};
/// The placeholder expanded with each compatible target (kpack-format's).
pub use kpack_format::GFXARCH;
pub use kpack_format::{Archive, DecodeTarget, MARKER_MAX_LEN, Marker, MarkerProblem, WriteBuf};
pub use stats::StatsSnapshot;

/// Parse marker bytes with AMD's rules; failures are
/// [`ErrorKind::InvalidMetadata`].
pub fn parse_marker(bytes: &[u8]) -> Result<Marker> {
    Marker::parse(bytes).map_err(|e| Error::from_archive(ErrorKind::InvalidMetadata, e))
}
