//! The AMD GPUs of this machine, read from the KFD topology
//! (`/sys/class/kfd/kfd/topology/nodes/*/properties`) as AMD's
//! `rocm-bootstrap` 0.3.0 reads it (`detect.py`), with its two overrides:
//!
//! - `ROCM_BOOTSTRAP_DISABLE_DETECTION=1`: no GPUs;
//! - `ROCM_BOOTSTRAP_FORCE_GFX_ARCH=gfx942,gfx1100`: these targets instead
//!   of the topology.
//!
//! Each GPU comes with its packaging chain (target → sub-family → family,
//! [`kpack_amdgpu::bundle_key`]), which names the device packages that
//! hold its code. `--gpu auto` on the command line is [`expand_auto`].

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use kpack_amdgpu::{Level, TargetId, bundle_key, generic_for, strip_target_prefix};
use serde::Serialize;

/// rocm-bootstrap's override: set to `1`, detection finds no GPUs.
pub const DISABLE_ENV: &str = "ROCM_BOOTSTRAP_DISABLE_DETECTION";
/// rocm-bootstrap's override: comma-separated targets used instead of the
/// topology (`gfx942,gfx942` for two MI300X).
pub const FORCE_ENV: &str = "ROCM_BOOTSTRAP_FORCE_GFX_ARCH";
/// Where sysfs is mounted, for containers and tests (default `/sys`).
pub const SYSFS_ENV: &str = "KPACK_SYSFS_ROOT";
/// The KFD topology's nodes under the sysfs root.
pub const TOPOLOGY: &str = "class/kfd/kfd/topology/nodes";
/// The word that stands for the detected targets in target lists.
pub const AUTO: &str = "auto";

/// What can go wrong while detecting.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A topology file or directory exists but cannot be read.
    #[error(transparent)]
    Io(#[from] kpack_fsafe::IoError),
    /// A name in `ROCM_BOOTSTRAP_FORCE_GFX_ARCH` is not a target id.
    #[error("{FORCE_ENV}: {name:?} is not a GPU target")]
    Forced {
        /// The name as given.
        name: String,
        /// The cause.
        #[source]
        source: kpack_amdgpu::TargetIdError,
    },
    /// A name in `ROCM_BOOTSTRAP_FORCE_GFX_ARCH` is a well-formed target
    /// id of a processor LLVM does not know.
    #[error("{FORCE_ENV}: {0:?} is not a GPU target (unknown processor)")]
    UnknownProcessor(String),
    /// `auto` was asked for and no GPU was found.
    #[error(
        "`auto`: no AMD GPU detected on this machine ({0}); name the GPU instead (`--gpu gfx1100`), or set {FORCE_ENV}=gfx1100"
    )]
    NoGpu(String),
}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Where the answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// `ROCM_BOOTSTRAP_DISABLE_DETECTION=1`.
    Disabled,
    /// `ROCM_BOOTSTRAP_FORCE_GFX_ARCH`.
    Forced,
    /// The KFD topology.
    Kfd,
    /// No KFD topology on this machine (no amdgpu driver, or a container
    /// without `/sys/class/kfd`), and no HIP runtime that sees a GPU.
    NoKfd,
    /// No GPU in a KFD topology (WSL, Windows, a container without
    /// `/sys/class/kfd`): the HIP runtime's devices.
    Hip,
}

impl Source {
    /// Why the list is what it is, for a note on stderr.
    pub fn describe(self) -> &'static str {
        match self {
            Source::Disabled => "detection disabled by ROCM_BOOTSTRAP_DISABLE_DETECTION=1",
            Source::Forced => "targets forced by ROCM_BOOTSTRAP_FORCE_GFX_ARCH",
            Source::Kfd => "read from the KFD topology",
            Source::NoKfd => {
                "no KFD topology (or no GPU in it) and no GPU through a HIP runtime: no amdgpu driver loaded, /sys not mounted, or no ROCm installed; name the GPU with ROCM_BOOTSTRAP_FORCE_GFX_ARCH=gfx1100"
            }
            Source::Hip => "read from the HIP runtime (no GPU in a KFD topology)",
        }
    }
}

/// The packaging chain of a target: the device packages that can hold its
/// code, narrowest first (rocm-bootstrap's `packaging_chain`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Chain {
    /// Target-level bundle key (`gfx1151`; `gfx1250-strict` → `gfx1250`).
    pub target: String,
    /// Sub-family bundle key (`gfx115x`).
    pub sub_family: String,
    /// Family bundle key (`gfx11`).
    pub family: String,
}

impl Chain {
    /// The chain of `target`, or `None` for a processor ROCm does not
    /// package (`gfx803`).
    pub fn of(target: &str) -> Option<Chain> {
        Some(Chain {
            target: bundle_key(target, Level::Target)?,
            sub_family: kpack_amdgpu::sub_family(target)?.key.to_owned(),
            family: bundle_key(target, Level::Family)?,
        })
    }
}

/// One GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gpu {
    /// KFD node number (the position in the list when forced).
    pub node: u32,
    /// The target (`gfx90a`).
    pub target: String,
    /// The raw `gfx_target_version` (KFD only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gfx_target_version: Option<u64>,
    /// KFD `gpu_id` (KFD only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_id: Option<u64>,
    /// PCI device id, `0x7550` (KFD only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci_id: Option<String>,
    /// The LLVM generic target whose code also runs here, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generic: Option<String>,
    /// Its packaging chain; `None` for a processor ROCm does not package.
    pub chain: Option<Chain>,
    /// Compute units, `simd_count / simd_per_cu` of the KFD node (what
    /// conda's `__amdgpu_arch` ranks GPUs by); `None` when unknown.
    pub compute_units: Option<u32>,
    /// An integrated GPU: an APU's (LLVM's processor table marks the
    /// processor as one, or the KFD node also has CPU cores).
    pub integrated: bool,
    /// The marketing name (HIP runtime only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Gpu {
    fn new(node: u32, target: String) -> Gpu {
        let processor = kpack_amdgpu::processor_of(&target).to_owned();
        Gpu {
            node,
            gfx_target_version: None,
            gpu_id: None,
            pci_id: None,
            generic: generic_for(&processor).map(str::to_owned),
            chain: Chain::of(&target),
            compute_units: None,
            integrated: mixed::is_apu_processor(&processor),
            name: None,
            target,
        }
    }
}

/// What [`detect`] found.
#[derive(Debug, Clone, Serialize)]
pub struct Detection {
    /// Where the answer came from.
    pub source: Source,
    /// Every GPU, in rocm-bootstrap's order.
    pub gpus: Vec<Gpu>,
    /// Nodes skipped for a reason worth saying (an unknown
    /// `gfx_target_version`), for stderr.
    pub notes: Vec<String>,
}

impl Detection {
    /// The distinct targets, first occurrence first (rocm-bootstrap's
    /// `--unique`, its default output).
    pub fn targets(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for g in &self.gpus {
            if !out.contains(&g.target) {
                out.push(g.target.clone());
            }
        }
        out
    }
}

/// Where and how to detect.
#[derive(Debug, Clone)]
pub struct Options {
    /// The sysfs mount (`/sys`).
    pub sysfs_root: PathBuf,
    /// `ROCM_BOOTSTRAP_FORCE_GFX_ARCH`, if set and not empty.
    pub force: Option<String>,
    /// `ROCM_BOOTSTRAP_DISABLE_DETECTION` is `1`.
    pub disable: bool,
    /// When the KFD topology lists no GPU, ask the HIP runtime (loaded at
    /// run time; see [`hip`]).
    pub hip_fallback: bool,
}

impl Options {
    /// From a variable lookup (the CLI passes `std::env::var_os`): the
    /// overrides, and the sysfs root from `sysfs_root`, else
    /// `KPACK_SYSFS_ROOT`, else `/sys`. This crate reads no environment
    /// itself: its callers decide whose variables count.
    pub fn from_vars(
        sysfs_root: Option<PathBuf>,
        var: impl Fn(&str) -> Option<OsString>,
    ) -> Options {
        let text = |k: &str| var(k).and_then(|v| v.into_string().ok());
        Options {
            sysfs_root: sysfs_root
                .or_else(|| var(SYSFS_ENV).map(PathBuf::from))
                .unwrap_or_else(|| PathBuf::from("/sys")),
            force: text(FORCE_ENV).filter(|v| !v.is_empty()),
            disable: text(DISABLE_ENV).as_deref() == Some("1"),
            hip_fallback: true,
        }
    }
}

/// The GPUs of this machine: disabled, else forced, else the KFD topology
/// (rocm-bootstrap's chain, without its Windows `clinfo` fallback).
pub fn detect(opts: &Options) -> Result<Detection> {
    if opts.disable {
        return Ok(Detection {
            source: Source::Disabled,
            gpus: Vec::new(),
            notes: Vec::new(),
        });
    }
    if let Some(force) = &opts.force {
        return forced(force);
    }
    let det = kfd(&opts.sysfs_root.join(TOPOLOGY))?;
    if det.gpus.is_empty() && opts.hip_fallback {
        return Ok(from_hip(det));
    }
    Ok(det)
}

/// The HIP runtime's devices, when it can be loaded and sees any; else
/// `det` as it is, with a note on why the runtime said nothing.
fn from_hip(mut det: Detection) -> Detection {
    let devices = match hip::devices() {
        Ok((_, d)) if !d.is_empty() => d,
        Ok((lib, _)) => {
            det.notes
                .push(format!("{lib}: the HIP runtime sees no GPU"));
            return det;
        }
        Err(_) => return det,
    };
    let mut gpus = Vec::new();
    for (i, d) in devices.into_iter().enumerate() {
        let Ok(id) = TargetId::parse(strip_target_prefix(&d.arch)) else {
            det.notes.push(format!(
                "HIP device {i}: gcnArchName {:?} names no GPU target; skipped",
                d.arch
            ));
            continue;
        };
        let mut gpu = Gpu::new(u32::try_from(i).unwrap_or(u32::MAX), id.to_string());
        gpu.compute_units = d.compute_units;
        gpu.name = d.name;
        gpus.push(gpu);
    }
    Detection {
        source: Source::Hip,
        gpus,
        notes: det.notes,
    }
}

/// `ROCM_BOOTSTRAP_FORCE_GFX_ARCH`: comma-separated, blanks skipped,
/// duplicates kept (one GPU each). rocm-bootstrap takes only its known
/// processor names; target ids with features (`gfx90a:xnack+`) and the
/// `amdgcn-amd-amdhsa--` prefix are accepted here too, generic targets
/// (`gfx11-generic`, code rather than a GPU) are not.
fn forced(force: &str) -> Result<Detection> {
    let mut gpus = Vec::new();
    for name in force.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let id = TargetId::parse(strip_target_prefix(name)).map_err(|source| Error::Forced {
            name: name.to_owned(),
            source,
        })?;
        let p = id.base_processor();
        // A forced name stands for a GPU: a generic target names code.
        if kpack_amdgpu::mach_for_processor(p).is_none() || kpack_amdgpu::is_generic(p) {
            return Err(Error::UnknownProcessor(name.to_owned()));
        }
        let node = u32::try_from(gpus.len()).unwrap_or(u32::MAX);
        gpus.push(Gpu::new(node, id.to_string()));
    }
    Ok(Detection {
        source: Source::Forced,
        gpus,
        notes: Vec::new(),
    })
}

/// The nodes of the topology at `nodes`, in rocm-bootstrap's order: the
/// directories whose names are all digits, sorted as strings (`10` before
/// `2`, as Python sorts the paths).
fn node_dirs(nodes: &Path) -> Result<Option<Vec<(String, PathBuf)>>> {
    let io = |source| {
        Error::Io(kpack_fsafe::IoError::new(
            nodes,
            "cannot read the KFD topology",
            source,
        ))
    };
    let entries = match std::fs::read_dir(nodes) {
        Ok(e) => e,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound) => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e.map_err(io)?;
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) && e.path().is_dir() {
            out.push((name, e.path()));
        }
    }
    out.sort();
    Ok(Some(out))
}

/// The GPUs of the topology at `nodes`.
fn kfd(nodes: &Path) -> Result<Detection> {
    let mut det = Detection {
        source: Source::Kfd,
        gpus: Vec::new(),
        notes: Vec::new(),
    };
    let Some(dirs) = node_dirs(nodes)? else {
        det.source = Source::NoKfd;
        return Ok(det);
    };
    for (name, dir) in dirs {
        let file = dir.join("properties");
        let text = match read_properties(&file) {
            Ok(Some(t)) => t,
            Ok(None) => continue,
            Err(why) => {
                let why =
                    std::iter::successors(Some(&why as &dyn std::error::Error), |e| e.source())
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(": ");
                det.notes
                    .push(format!("{}: {why}; node skipped", file.display()));
                continue;
            }
        };
        let props = Properties::parse(&text);
        // CPU-only nodes have no SIMDs.
        let (Some(simds), Some(gtv)) = (props.get("simd_count"), props.get("gfx_target_version"))
        else {
            continue;
        };
        if simds == 0 || gtv == 0 {
            continue;
        }
        let Some(target) = decode_gfx_target_version(gtv) else {
            det.notes.push(format!(
                "{}: gfx_target_version {gtv} names no GPU target; node skipped",
                file.display()
            ));
            continue;
        };
        let node = name.parse().unwrap_or(u32::MAX);
        let mut gpu = Gpu::new(node, target);
        gpu.gfx_target_version = Some(gtv);
        gpu.gpu_id = props.get("gpu_id");
        gpu.pci_id = props.get("device_id").map(|d| format!("{d:#x}"));
        gpu.compute_units = match props.get("simd_per_cu") {
            Some(per) if per > 0 => u32::try_from(simds / per).ok(),
            _ => None,
        };
        gpu.integrated |= props.get("cpu_cores_count").is_some_and(|c| c > 0);
        det.gpus.push(gpu);
    }
    Ok(det)
}

/// The most bytes read of a KFD `properties` file (real ones are under
/// 1 KiB; sysfs shows at most a 4 KiB page).
pub const MAX_PROPERTIES: u64 = 16 << 10;

/// The text of the `properties` file at `path`; `None` when there is none.
/// Only a regular file is read (a FIFO would block, a device never end),
/// and at most [`MAX_PROPERTIES`] bytes of it; the error says why not.
fn read_properties(path: &Path) -> std::result::Result<Option<String>, Unread> {
    use std::io::Read;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound) => return Ok(None),
        Err(e) => return Err(Unread::Io(e)),
    };
    if !meta.is_file() {
        return Err(Unread::NotAFile);
    }
    let file = std::fs::File::open(path).map_err(Unread::Io)?;
    let mut bytes = Vec::new();
    file.take(MAX_PROPERTIES + 1)
        .read_to_end(&mut bytes)
        .map_err(Unread::Io)?;
    if bytes.len() as u64 > MAX_PROPERTIES {
        return Err(PropertiesError::TooLong.into());
    }
    Ok(Some(parse_properties_text(bytes)?))
}

/// Why a node's `properties` file is skipped.
#[derive(Debug, thiserror::Error)]
enum Unread {
    /// Reading it failed.
    #[error("cannot read")]
    Io(#[source] std::io::Error),
    /// A directory, FIFO or device.
    #[error("not a regular file")]
    NotAFile,
    /// Its bytes are no properties file.
    #[error(transparent)]
    Properties(#[from] PropertiesError),
}

/// Why bytes are no KFD `properties` file of a GPU node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PropertiesError {
    /// Longer than [`MAX_PROPERTIES`] bytes.
    #[error("longer than {MAX_PROPERTIES} bytes")]
    TooLong,
    /// Not UTF-8 from offset `at` (the byte there, if any).
    #[error(
        "not UTF-8 text ({}at offset {at:#x})",
        byte.map(|b| format!("byte {b:#04x} ")).unwrap_or_default()
    )]
    NotUtf8 {
        /// The first byte that is not UTF-8, if the text does not just end
        /// inside a character.
        byte: Option<u8>,
        /// Its offset.
        at: usize,
    },
    /// A `gfx_target_version` that decodes to no target.
    #[error("gfx_target_version {version} names no GPU target")]
    NoTarget {
        /// The number as the file gives it.
        version: u64,
    },
}

/// A `properties` file's bytes as text: UTF-8, or the error that says
/// where it is not.
fn parse_properties_text(bytes: Vec<u8>) -> std::result::Result<String, PropertiesError> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        PropertiesError::NotUtf8 {
            byte: e.as_bytes().get(at).copied(),
            at,
        }
    })
}

/// The GPU target a KFD `properties` file's bytes describe: `Ok(None)` for
/// a CPU node, an error for text that is not a properties file's. For
/// fuzzing and tools; detection reads the files itself.
pub fn target_of_properties(bytes: &[u8]) -> std::result::Result<Option<String>, PropertiesError> {
    if bytes.len() as u64 > MAX_PROPERTIES {
        return Err(PropertiesError::TooLong);
    }
    let text = parse_properties_text(bytes.to_vec())?;
    let props = Properties::parse(&text);
    match (props.get("simd_count"), props.get("gfx_target_version")) {
        (Some(s), Some(g)) if s > 0 && g > 0 => decode_gfx_target_version(g)
            .map(Some)
            .ok_or(PropertiesError::NoTarget { version: g }),
        _ => Ok(None),
    }
}

/// A KFD `properties` file: `key value` lines; lines that are not exactly
/// two words with an integer value are skipped, as rocm-bootstrap does.
struct Properties(Vec<(String, u64)>);

impl Properties {
    fn parse(text: &str) -> Properties {
        let mut v = Vec::new();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            if let (Some(k), Some(val), None) = (words.next(), words.next(), words.next())
                && let Ok(n) = val.parse::<u64>()
            {
                v.push((k.to_owned(), n));
            }
        }
        Properties(v)
    }

    /// The value of `key` (the last one when repeated, as a dict keeps).
    fn get(&self, key: &str) -> Option<u64> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}

/// The target of a KFD `gfx_target_version`: major·10000 + minor·100 +
/// stepping, minor and stepping written in hex as LLVM names processors
/// (`90010` → `gfx90a`, `110001` → `gfx1101`, `90402` → `gfx942`).
/// `None` when a part does not fit one hex digit or the major is 0.
///
/// ```
/// assert_eq!(kpack_detect::decode_gfx_target_version(90010).as_deref(), Some("gfx90a"));
/// assert_eq!(kpack_detect::decode_gfx_target_version(120001).as_deref(), Some("gfx1201"));
/// ```
pub fn decode_gfx_target_version(v: u64) -> Option<String> {
    let (major, minor, stepping) = (v / 10000, (v % 10000) / 100, v % 100);
    if major == 0 || minor > 0xf || stepping > 0xf {
        return None;
    }
    Some(format!("gfx{major}{minor:x}{stepping:x}"))
}

/// `list` with every `auto` replaced by the targets detected with `opts`,
/// duplicates dropped; an error when `auto` finds no GPU. A list without
/// `auto` is returned as is (nothing is detected).
pub fn expand_auto(list: &[String], opts: &Options) -> Result<Vec<String>> {
    if !list.iter().any(|t| t.trim() == AUTO) {
        return Ok(list.to_vec());
    }
    let det = detect(opts)?;
    let found = det.targets();
    if found.is_empty() {
        return Err(Error::NoGpu(det.source.describe().to_owned()));
    }
    let mut out: Vec<String> = Vec::new();
    for t in list {
        let add = if t.trim() == AUTO {
            found.clone()
        } else {
            vec![t.clone()]
        };
        for a in add {
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    Ok(out)
}

pub mod conda;
pub mod hip;
pub mod mixed;
pub mod provider;
mod report;

pub use report::{Human, Report};

#[cfg(test)]
mod tests;
