//! Split fat native packages into a host package and per-GPU device
//! packages, the way `kpack wheel split` splits wheels: the payload is
//! unpacked, split by [`kpack_split::split_prefix`] (binaries offloaded,
//! database files sorted by the `--split-databases` handlers), the arch
//! trees grouped by target, sub-family or family as device wheels are, and
//! each output written reproducibly (sorted members, root-owned, one mtime)
//! through [`kpack_fsafe::Outputs`] (all or nothing).
//!
//! - [`split_deb`]: a `.deb` → the host `.deb` (same name, version and
//!   architecture; control fields kept, `Installed-Size` and `md5sums`
//!   recomputed, maintainer scripts and conffiles as they were, a
//!   dependency on the loader's package), `<name>-<group>` device packages
//!   each depending on `<name> (= version)`, and `<name>-gfx-all`.
//! - [`split_rpm`]: an `.rpm` → the same three kinds of package (host with
//!   the input's Requires, Provides, Obsoletes, scriptlets and file flags,
//!   per-file digests recomputed; devices with `Requires: <name> = EVR`).
//!
//! Outputs are unsigned.
#![forbid(unsafe_code)]

mod control;
mod deb;
mod error;
mod report;
mod rpm;
mod split;
mod tree;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_amdgpu::Level;
use serde::Serialize;

pub use control::{Control, ControlError, is_valid_package_name};
pub use deb::split_deb;
pub use error::{Error, Result};
pub use rpm::split_rpm;

/// How to split a package. Build it with [`PackageOptions::new`].
#[derive(Clone)]
pub struct PackageOptions<'a> {
    /// Group device packages by target, sub-family or family (`--group`).
    pub group: Level,
    /// Database classifier (the `--split-databases` handlers), if any.
    pub databases: Option<&'a dyn kpack_split::Databases>,
    /// Keep the host binaries as they are and move only the database
    /// files the handlers assign to GPUs (`--databases-only`).
    pub databases_only: bool,
    /// The package that ships `librocm_kpack`, which the host package then
    /// depends on (not with `databases_only`).
    pub loader_package: String,
    /// Where archives go in the package tree; default `usr/lib/kpack/<name>`.
    pub archive_dir: Option<String>,
    /// Archive storage.
    pub compression: kpack_format::Compression,
    /// Which GPU targets to keep.
    pub targets: kpack_amdgpu::TargetFilter,
    /// Timestamp of every member (`SOURCE_DATE_EPOCH`).
    pub mtime: u64,
}

impl PackageOptions<'_> {
    /// Defaults: one device package per target, binaries offloaded, the
    /// loader in `loader_package`.
    pub fn new(loader_package: impl Into<String>) -> PackageOptions<'static> {
        PackageOptions {
            group: Level::Target,
            databases: None,
            databases_only: false,
            loader_package: loader_package.into(),
            archive_dir: None,
            compression: kpack_format::Compression::default(),
            targets: kpack_amdgpu::TargetFilter::default(),
            mtime: 0,
        }
    }
}

/// One package file written (or read).
#[derive(Debug, Clone, Serialize)]
pub struct PackageFile {
    /// The package name.
    pub package: String,
    /// Its file name.
    pub file: String,
    /// Where it is.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
}

/// One device package.
#[derive(Debug, Clone, Serialize)]
pub struct DevicePackage {
    /// The package.
    #[serde(flatten)]
    pub package: PackageFile,
    /// Its group key (`gfx1100`, `gfx110x`, `gfx11`).
    pub key: String,
    /// The processors whose code and databases it holds.
    pub targets: Vec<String>,
}

/// What one GPU's user downloads.
#[derive(Debug, Clone, Serialize)]
pub struct GpuDownload {
    /// The processor.
    pub gpu: String,
    /// The packages it needs: the host and its device packages.
    pub packages: Vec<String>,
    /// Their bytes.
    pub bytes: u64,
    /// The fat package's bytes.
    pub fat_bytes: u64,
}

/// What a split did.
#[derive(Debug, Clone, Serialize)]
pub struct PackageReport {
    /// The input.
    pub input: PackageFile,
    /// `deb` or `rpm`.
    pub format: &'static str,
    /// Version as the package has it.
    pub version: String,
    /// Architecture.
    pub architecture: String,
    /// Whether anything was split (false: nothing written).
    pub split: bool,
    /// `--databases-only`.
    pub databases_only: bool,
    /// The host package.
    pub host: Option<PackageFile>,
    /// The device packages.
    pub devices: Vec<DevicePackage>,
    /// The metapackage depending on every device package.
    pub all: Option<PackageFile>,
    /// Per GPU: what its user downloads against the fat package.
    pub per_gpu: Vec<GpuDownload>,
    /// Offloaded binaries (paths in the package).
    pub binaries: Vec<kpack_split::BinaryReport>,
    /// Database files per handler, per verdict.
    pub databases: BTreeMap<String, BTreeMap<String, u64>>,
    /// Problems that did not stop the split.
    pub warnings: Vec<String>,
}

impl PackageReport {
    /// The per-GPU download sums from the host and device packages.
    pub(crate) fn sum_per_gpu(&mut self) {
        let Some(host) = &self.host else { return };
        let mut gpus: Vec<&str> = self
            .devices
            .iter()
            .flat_map(|d| d.targets.iter().map(String::as_str))
            .filter(|t| !kpack_amdgpu::is_generic(t))
            .collect();
        gpus.sort_unstable();
        gpus.dedup();
        self.per_gpu = gpus
            .into_iter()
            .map(|gpu| {
                let mut packages = vec![host.package.clone()];
                let mut bytes = host.bytes;
                for d in &self.devices {
                    let serves = d.targets.iter().any(|t| {
                        t == gpu || kpack_amdgpu::covered_by(t).is_some_and(|c| c.contains(&gpu))
                    });
                    if serves {
                        packages.push(d.package.package.clone());
                        bytes += d.package.bytes;
                    }
                }
                GpuDownload {
                    gpu: gpu.to_string(),
                    packages,
                    bytes,
                    fat_bytes: self.input.bytes,
                }
            })
            .collect();
    }
}

/// The output directory must not be the input's: the host package has the
/// input's file name.
pub(crate) fn refuse_input_dir(input: &Path, out_dir: &Path) -> Result<()> {
    let dir = input
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let same = match (dir.canonicalize(), out_dir.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same {
        return Err(Error::Split {
            path: input.to_path_buf(),
            why: "the output directory is the input's: the host package would replace it; choose another -o".into(),
        });
    }
    Ok(())
}
