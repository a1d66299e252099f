//! `kpack-plugin-host`: runs kpack's database handlers, sandboxed
//! WebAssembly components implementing `wit/handler@1.x`.
//!
//! A database handler decides which files below a ROCm install prefix
//! belong to its library's kernel database, and for which GPU target
//! (`gfx942`, `gfx90a:xnack+`) or family key (`gfx11`). kpack's split asks
//! the handlers chosen with `--split-databases`, in order; the first that
//! claims a file wins.
//!
//! Layers, bottom up:
//! * `sandbox`: wasmtime engine with fuel metering, a memory cap per store,
//!   no WASI (every import kpack does not provide is a trapping stub);
//!   traps, timeouts and memory exhaustion become typed [`Error`]s naming the
//!   handler and its version.
//! * `wit`: one small module per released WIT version behind one internal
//!   trait; the guest's version is read from its export name and checked
//!   with semver (older minors run; a newer major or minor is refused with
//!   "built against kpack:handler@X.Y.Z; this kpack supports up to A.B.C").
//! * `cache`: compiled components cached on disk by wasm sha256 and engine
//!   compatibility hash, so a warm start costs well under a millisecond
//!   per handler (see [`default_cache_dir`]).
//! * [`HandlerSet`]: resolution of [`HandlerSpec`]s (name, `NAME@REQ`,
//!   file) through [`LoadOptions`] (search path, [`Registry`]), loading,
//!   and batched classification sized to the memory cap.
//! * [`Registry`]: a cargo-style sparse index of published handlers.
//!
//! # Example
//!
//! ```no_run
//! use kpack_plugin_host::{Classification, FileInfo, HandlerSet, HandlerSpec, LoadOptions};
//!
//! # fn main() -> Result<(), kpack_plugin_host::Error> {
//! let specs = ["rocblas", "hipblaslt@^0.1"].map(HandlerSpec::parse).into_iter().collect::<Result<Vec<_>, _>>()?;
//! let set = HandlerSet::load(&specs, &LoadOptions::standard(&[]))?;
//! let files = vec![FileInfo::new("lib/rocblas/library/TensileLibrary_gfx942.co", 1024)];
//! for (file, claim) in files.iter().zip(set.classify(&files)?) {
//!     match claim {
//!         Some(c) => println!("{} -> {} ({})", file.path, c.classification, c.handler),
//!         None => println!("{} -> not a database file", file.path),
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Files whose name may not tell the target should carry their first
//! [`HandlerSet::prefix_bytes_for`] bytes in [`FileInfo::prefix`]
//! ([`FileInfo::read`] does that); [`HandlerSet::classify_tree`] walks a
//! directory and does it all.

mod cache;
mod error;
mod registry;
mod sandbox;
mod set;
mod wit;

pub use cache::default_cache_dir;
pub use error::{Error, ErrorKind, Result};
pub use registry::{IndexEntry, Registry};
pub use sandbox::{Limits, LogLevel, LogLine};
pub use set::{
    Claim, Classification, DirKind, FileInfo, HandlerMeta, HandlerSet, HandlerSpec, LoadOptions,
    Origin, SearchDir, default_install_dir, discover,
};
pub use wit::{RELEASED_WIT, SUPPORTED_WIT};
