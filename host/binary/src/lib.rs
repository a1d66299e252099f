//! The front door: who decides what a file is, and the one host-binary
//! type every command takes.
//!
//! Layers:
//! - [`FileKind`]: what a file is, by content (ELF by machine and type,
//!   PE, bundle, CCOB, code object, OffloadBinary, static archive, KPAK,
//!   zip), decided once; no other crate tests magic numbers to route a
//!   file;
//! - [`HostBinary`]: an ELF (x86-64, aarch64) or PE host binary's device
//!   code, read by its format's reader (`kpack-elf`, `kpack-pe`), with the
//!   questions every command asks (bundles, targets, offloaded or not,
//!   marker) and one [`HostBinary::transform_into`] that rewrites it
//!   host-only and checks the result. A new host format is one more
//!   variant here, never a branch in each command.
//! - [`verify_file`]: `kpack verify-elf`'s structural checks of one host
//!   binary, by its format.
//!
//! ```no_run
//! use kpack_binary::{FileKind, HostBinary};
//! let path = std::path::Path::new("libfoo.so");
//! if FileKind::of_path(path)?.is_host_binary() {
//!     let bin = HostBinary::read(path, Default::default())?;
//!     println!("{} bundles for {}", bin.bundles().len(), bin.targets().join(", "));
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

mod extract;
mod extract_write;
mod host;
pub mod inspect;
mod kind;
mod verify;

pub use extract::{ExtractFile, ExtractPlan};
pub use extract_write::ExtractEvent;
pub use host::{Error, HostBinary, HostFormat, HostOnly, TransformReport};
pub use inspect::{Inspected, inspect};
pub use kind::{Compression, FileKind, HEAD_LEN};
pub use verify::{Checked, VerifyOptions, verify_file};
