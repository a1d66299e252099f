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
//!   per handler (see [`Places::cache_dir`]).
//! * [`Places`]: the process facts (environment variables, executable
//!   directory) the standard search path and cache derive from, gathered
//!   by the caller: this crate reads no environment variable.
//! * `spec`, `search`: how a handler is asked for ([`HandlerSpec`]: name,
//!   `NAME@REQ`, file) and where names are looked up ([`SearchDir`]s, then
//!   the [`EmbeddedHandler`]s the executable carries).
//! * `load`: [`HandlerSet::load`] resolves specs through [`LoadOptions`]
//!   (search path, [`Registry`]), compiles or fetches from the cache, links
//!   by WIT version and checks the handler's `info` ([`HandlerMeta`]).
//! * `run`: [`HandlerSet::classify`], batched and sized to the memory cap.
//!   [`HandlerSet`] implements `kpack_split::Databases`, the trait through
//!   which split asks for classifications; the values it passes
//!   ([`FileInfo`](kpack_split::FileInfo), [`Claim`](kpack_split::Claim),
//!   [`Classification`](kpack_split::Classification)) are split's.
//! * [`Registry`]: a cargo-style sparse index of published handlers.
//! * [`scaffold`]: a new handler crate on `kpack-sdk` (`kpack plugins new`).
//!
//! # Example
//!
//! ```no_run
//! use kpack_plugin_host::{HandlerSet, HandlerSpec, LoadOptions, Places};
//! use kpack_split::FileInfo;
//!
//! # fn main() -> Result<(), kpack_plugin_host::Error> {
//! let specs = ["rocblas", "hipblaslt@^0.1"].map(HandlerSpec::parse).into_iter().collect::<Result<Vec<_>, _>>()?;
//! let places = Places::from_vars(|k| std::env::var_os(k), None);
//! let set = HandlerSet::load(&specs, &LoadOptions::standard(&[], &places))?;
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
//! [`HandlerSet::prefix_bytes_for`] bytes in
//! [`FileInfo::prefix`](kpack_split::FileInfo::prefix);
//! [`HandlerSet::classify_tree`] walks a directory and does it all.

mod cache;
mod error;
mod load;
mod places;
mod registry;
mod report;
mod run;
mod sandbox;
mod scaffold;
mod search;
mod spec;
mod types;
mod wit;

pub use error::{Error, ErrorKind, Result};
pub use load::LoadOptions;
pub use places::Places;
pub use registry::{IndexEntry, Registry};
pub use report::{Claimed, Listed, TreeClassification};
pub use run::HandlerSet;
pub use sandbox::{Limits, LogLevel, LogLine};
pub use scaffold::{Scaffold, scaffold};
pub use search::{DirKind, SearchDir, discover};
pub use spec::HandlerSpec;
pub use types::{EmbeddedHandler, HandlerMeta, Origin};
pub use wit::{RELEASED_WIT, SUPPORTED_WIT};
