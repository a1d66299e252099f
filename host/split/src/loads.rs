//! What a host-only binary loads, read through its marker exactly as the
//! loader resolves it (`kpack-runtime`'s [`Cache`]: its candidate paths,
//! its open checks, its loader order), for `kpack inspect` and `kpack
//! extract` of an offloaded binary.
//!
//! Without a GPU every archive the marker's search paths name is listed
//! (a `@GFXARCH@` pattern expanded to the files beside it) and, per code
//! object index, every target those archives hold for its key, each read
//! as the loader would read it for a GPU asking for that target. With a
//! GPU, the two names CLR asks for ([`gpu_arch_list`]) and, per index,
//! the one code object the loader would return.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kpack_bundle::CodeObjectInfo;
use kpack_format::{Finding, Marker};
use kpack_runtime::{Cache, Config};
use serde::Serialize;
use sha2::{Digest, Sha256};

use kpack_runtime::gpu_arch_list;

mod text;

pub use text::MarkerLoadsText;

/// What a host-only binary's marker leads to.
#[derive(Debug, Clone, Serialize)]
pub struct MarkerLoads {
    /// The marker's TOC key prefix.
    pub kernel_name: String,
    /// The marker's search paths, as written.
    pub search_paths: Vec<String>,
    /// The GPU asked about, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// The arch list handed to the loader for `gpu`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arch_list: Option<Vec<String>>,
    /// Every archive looked for, in candidate order.
    pub archives: Vec<ArchiveSeen>,
    /// Every code object found, by index then target.
    pub code_objects: Vec<LoadedCodeObject>,
    /// Missing archives, keys no archive holds, entries that do not read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
}

/// One candidate archive.
#[derive(Debug, Clone, Serialize)]
pub struct ArchiveSeen {
    /// The path the loader forms.
    pub path: PathBuf,
    /// The search path (or variable) it came from.
    pub origin: String,
    /// `opened`, `missing` or `unreadable`.
    pub status: &'static str,
    /// Its `gfx_arches`, when it opened.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub arches: Vec<String>,
    /// Why it did not open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One code object the loader would return.
#[derive(Debug, Clone, Serialize)]
pub struct LoadedCodeObject {
    /// The code-object index (the wrapper's reserved word: the bundle
    /// index of the fat original).
    pub bundle: u32,
    /// The TOC key, `<kernel_name>#<bundle>`.
    pub key: String,
    /// The TOC target it is stored under.
    pub target: String,
    /// The archive it loads from.
    pub archive: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// sha256 of its bytes.
    pub sha256: String,
    /// Its headers and metadata, when it is a code object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_object: Option<CodeObjectInfo>,
    /// Kernels in it.
    pub kernel_count: usize,
}

/// Resolve `marker` of the host-only binary at `binary` (whose wrappers
/// name `indices`) as the loader does; `gpu` narrows to what that GPU
/// would load. Kernel names are kept only with `kernels`.
pub fn marker_loads(
    binary: &Path,
    marker: &Marker,
    indices: &[u32],
    gpu: Option<&str>,
    kernels: bool,
) -> MarkerLoads {
    marker_loads_with(binary, marker, indices, gpu, kernels, &mut |_, _| {})
}

/// [`marker_loads`], handing each code object's bytes to `on_bytes` as
/// they are read (`kpack extract` writes them).
pub fn marker_loads_with(
    binary: &Path,
    marker: &Marker,
    indices: &[u32],
    gpu: Option<&str>,
    kernels: bool,
    on_bytes: &mut dyn FnMut(&LoadedCodeObject, &[u8]),
) -> MarkerLoads {
    // One cache, as one process has; the environment is not read so the
    // answer is the installed layout's (as `kpack verify --gpu`).
    let cache = Cache::new(Config::default());
    let found = cache.marker_archives(marker, binary);
    let mut loads = MarkerLoads {
        kernel_name: marker.kernel_name.clone(),
        search_paths: marker.search_paths.clone(),
        gpu: gpu.map(str::to_owned),
        arch_list: gpu.map(gpu_arch_list),
        archives: Vec::new(),
        code_objects: Vec::new(),
        findings: Vec::new(),
    };
    for a in &found {
        let (status, arches, error) = match &a.archive {
            Ok(ar) => ("opened", ar.arches().to_vec(), None),
            Err(e) if e == "does not exist" => ("missing", Vec::new(), Some(e.clone())),
            Err(e) => ("unreadable", Vec::new(), Some(e.clone())),
        };
        if let Some(e) = &error {
            let what = if a.target.as_deref() == Some("") {
                "no archive matches".to_owned()
            } else {
                e.clone()
            };
            loads.findings.push(
                Finding::error(
                    "archive",
                    format!("{} ({}): {what}", a.path.display(), a.origin),
                )
                .in_file(binary.display().to_string()),
            );
        }
        loads.archives.push(ArchiveSeen {
            path: a.path.clone(),
            origin: a.origin.clone(),
            status,
            arches,
            error,
        });
    }
    for &k in indices {
        let key = format!("{}#{k}", marker.kernel_name);
        let asks: Vec<Vec<String>> = match &loads.arch_list {
            Some(list) => vec![list.clone()],
            None => stored_targets(&found, &key)
                .into_iter()
                .map(|t| vec![t])
                .collect(),
        };
        if asks.is_empty() {
            loads.findings.push(
                Finding::error("archive", format!("no archive holds {key:?}"))
                    .in_file(binary.display().to_string()),
            );
        }
        for arches in asks {
            let arches: Vec<&str> = arches.iter().map(String::as_str).collect();
            match load_one(&cache, binary, marker, k, &arches, kernels) {
                Ok((co, bytes)) => {
                    on_bytes(&co, &bytes);
                    loads.code_objects.push(co);
                }
                Err(e) => loads.findings.push(
                    Finding::error("archive", first_line(&e.to_string()))
                        .in_file(binary.display().to_string()),
                ),
            }
        }
    }
    loads
}

/// Every target an opened archive holds `key` under, sorted.
fn stored_targets(found: &[kpack_runtime::MarkerArchive], key: &str) -> BTreeSet<String> {
    found
        .iter()
        .filter_map(|a| a.archive.as_ref().ok())
        .flat_map(|a| {
            a.arches()
                .iter()
                .filter(|t| a.entry(key, t).is_some())
                .cloned()
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Where the loader takes code object `k` from for `arches`, its bytes
/// read through the loader, and what they are.
fn load_one(
    cache: &Cache,
    binary: &Path,
    marker: &Marker,
    k: u32,
    arches: &[&str],
    kernels: bool,
) -> kpack_runtime::Result<(LoadedCodeObject, Vec<u8>)> {
    let loc = cache.locate(marker, binary, k, arches)?;
    let bytes = cache.load(marker, binary, k, arches)?;
    let (code_object, kernel_count) = describe(&bytes, &loc.target, kernels);
    let co = LoadedCodeObject {
        bundle: k,
        key: loc.key,
        target: loc.target,
        archive: loc.archive,
        size: bytes.len() as u64,
        sha256: sha256_hex(&bytes),
        code_object,
        kernel_count,
    };
    Ok((co, bytes))
}

/// A code object's headers and kernel count (names kept with `kernels`);
/// nothing for portable SPIR-V or bytes that do not decode.
fn describe(bytes: &[u8], target: &str, kernels: bool) -> (Option<CodeObjectInfo>, usize) {
    if kpack_amdgpu::is_spirv_target(target) {
        return (None, 0);
    }
    match kpack_bundle::inspect_code_object(&bytes, 0, bytes.len() as u64) {
        Ok(mut info) => {
            let n = info.kernels.len();
            if !kernels {
                info.kernels = Vec::new();
            }
            (Some(info), n)
        }
        Err(_) => (None, 0),
    }
}

/// Lower-case hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The first line of a loader message (the rest is its diagnostic, which
/// `ROCM_KPACK_DEBUG=1` or `kpack verify --gpu --json` show whole).
fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or(s);
    line.trim_end_matches(':')
        .trim_end_matches("; tried")
        .trim_end_matches("; tried in order")
        .to_owned()
}
