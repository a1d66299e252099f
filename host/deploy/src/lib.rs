//! `kpack deploy`: copy an application (executables, shared libraries)
//! and the ROCm libraries it needs into one directory that works wherever
//! it is moved, with only the `.kpack` archives the chosen GPUs load.
//!
//! Layers: the dynamic section facts (`elf.rs`, read with `object`; the
//! copies' RUNPATH set with `patchelf`) and a Windows PE image's import
//! table (`pe.rs`, read with `object`; the DLLs go side by side, with
//! `rocm_kpack.dll`), the closure of needed libraries as the loader
//! resolves it minus the system's (`closure.rs`), the plan
//! and its staged, all-or-nothing write (`deploy.rs`, through
//! `kpack_fsafe::Outputs`), the record (`manifest.rs`), and the check
//! that nothing in a directory points outside it (`check.rs`).
//!
//! ```no_run
//! let options = kpack_deploy::Options {
//!     apps: vec!["build/bin/llama-cli".into()],
//!     gpus: vec!["gfx1100".into()],
//!     rocm_path: vec!["/opt/rocm".into()],
//!     ..Default::default()
//! };
//! let job = kpack_job::Job::builder(kpack_bundle::MemoryBudget::new(1 << 30)).build()?;
//! let done = kpack_deploy::deploy(&job, &options, std::path::Path::new("dist"))?;
//! assert!(kpack_deploy::check(&done.dir)?.problems.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod check;
mod closure;
mod databases;
mod deploy;
mod elf;
mod error;
mod manifest;
mod pe;
mod plan;

pub use check::{CheckReport, check};
pub use closure::DEFAULT_EXCLUDES;
pub use databases::{AUTO_DIRS, LoadDatabases};
pub use deploy::{Deployed, Options, deploy, deploy_with};
pub use error::{Error, Result};
pub use manifest::{FileRecord, GpuSize, LeftOutRecord, MANIFEST, Manifest, SCHEMA_VERSION};
pub use pe::DEFAULT_EXCLUDES as WINDOWS_DEFAULT_EXCLUDES;
