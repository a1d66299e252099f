//! A wheel-variant provider for AMD GPUs (PEP 825/826 drafts), written
//! against `std` alone so that an installer can vendor this one file, the
//! way uv vendors NVIDIA's provider: a namespace, the identity of the
//! Python plugin it stands in for, and a function returning the ordered
//! properties of this machine.
//!
//! The properties are values of `amd :: gfx_arch`, most specific first
//! along the chain device wheels are grouped by: every detected GPU's
//! target (`gfx1100`; `gfx1250-strict` is packaged with `gfx1250`, xnack
//! and sramecc features are dropped), then their sub-families (`gfx110x`),
//! then their families (`gfx11`), each level in detection order. A machine
//! with a gfx1100 prefers the `gfx1100` variant, then a `gfx110x` one, then
//! a `gfx11` one; a GPU no variant names gets none.
//!
//! Detection is rocm-bootstrap's: `ROCM_BOOTSTRAP_DISABLE_DETECTION=1`
//! means no GPU, `ROCM_BOOTSTRAP_FORCE_GFX_ARCH=gfx942,gfx1100` names the
//! GPUs, else the KFD topology under `KPACK_SYSFS_ROOT` (default `/sys`).
//! The Python package `kpack-variant-provider` (in this repository's
//! `python/variant-provider`) gives the same answers; a test holds the two
//! and kpack's own detection together.

use std::path::Path;
use std::sync::OnceLock;

/// The variant namespace.
pub const NAMESPACE: &str = "amd";
/// The one feature of the namespace.
pub const FEATURE: &str = "gfx_arch";
/// The Python package this provider stands in for.
pub const PACKAGE_NAME: &str = "kpack-variant-provider";
/// Its version.
pub const PACKAGE_VERSION: &str = "0.1.0";
/// Its plugin API (`module:object`), as `variant.json` names it.
pub const PLUGIN_API: &str = "kpack_variant_provider.plugin:AmdVariantPlugin";
/// The requirement `variant.json` states for it.
pub const REQUIREMENT: &str = "kpack-variant-provider >= 0.1";

/// Sub-family key, family key, member processors (rocm-bootstrap 0.3.0's
/// packaging hierarchy, as `kpack_amdgpu::SUB_FAMILIES` has it).
const CHAINS: &[(&str, &str, &[&str])] = &[
    (
        "gfx9_0",
        "gfx9",
        &[
            "gfx900", "gfx902", "gfx904", "gfx906", "gfx908", "gfx909", "gfx90a", "gfx90c",
        ],
    ),
    ("gfx9_4", "gfx9", &["gfx942"]),
    ("gfx9_5", "gfx9", &["gfx950"]),
    (
        "gfx10_1",
        "gfx10",
        &["gfx1010", "gfx1011", "gfx1012", "gfx1013"],
    ),
    (
        "gfx10_3",
        "gfx10",
        &[
            "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036",
        ],
    ),
    (
        "gfx110x",
        "gfx11",
        &["gfx1100", "gfx1101", "gfx1102", "gfx1103"],
    ),
    (
        "gfx115x",
        "gfx11",
        &["gfx1150", "gfx1151", "gfx1152", "gfx1153"],
    ),
    ("gfx12_0", "gfx12", &["gfx1200", "gfx1201"]),
    (
        "gfx12_5",
        "gfx12",
        &["gfx1250", "gfx1250-strict", "gfx1251"],
    ),
];

/// Targets packaged with another processor.
const OWNERS: &[(&str, &str)] = &[("gfx1250-strict", "gfx1250")];

/// One supported feature: its name and its values, most preferred first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupportedFeature {
    /// The feature name (`gfx_arch`).
    pub name: &'static str,
    /// The values, most preferred first.
    pub values: Vec<String>,
}

/// The vendorable provider.
#[derive(Debug, Default)]
pub struct AmdVariantProvider {
    detected: OnceLock<Option<Vec<SupportedFeature>>>,
}

impl AmdVariantProvider {
    /// A provider that detects on first use.
    pub const fn new() -> Self {
        AmdVariantProvider {
            detected: OnceLock::new(),
        }
    }

    /// The namespace of its properties.
    pub fn namespace(&self) -> &'static str {
        NAMESPACE
    }

    /// The plugin API of the Python provider it stands in for.
    pub fn plugin_api(&self) -> &'static str {
        PLUGIN_API
    }

    /// The Python package it stands in for.
    pub fn package_name(&self) -> &'static str {
        PACKAGE_NAME
    }

    /// That package's version.
    pub fn package_version(&self) -> &'static str {
        PACKAGE_VERSION
    }

    /// The properties this machine supports, in order; `None` when no
    /// AMD GPU is seen. Detected once, from the environment.
    pub fn properties(&self) -> Option<&[SupportedFeature]> {
        self.detected
            .get_or_init(|| {
                let values = properties_for(&detect_targets(&|k| std::env::var(k).ok()));
                (!values.is_empty()).then(|| {
                    vec![SupportedFeature {
                        name: FEATURE,
                        values,
                    }]
                })
            })
            .as_deref()
    }
}

/// The processor of a target id: features and the `amdgcn-amd-amdhsa--`
/// prefix dropped.
fn processor(target: &str) -> &str {
    let t = target.trim();
    let t = t.strip_prefix("amdgcn-amd-amdhsa--").unwrap_or(t);
    t.split(':').next().unwrap_or(t)
}

/// `(target, sub-family, family)` keys of a target; sub-family and family
/// are `None` for a processor rocm-bootstrap does not package.
pub fn chain(target: &str) -> (String, Option<&'static str>, Option<&'static str>) {
    let p = processor(target);
    let owner = OWNERS.iter().find(|(t, _)| *t == p).map_or(p, |(_, o)| o);
    match CHAINS.iter().find(|(_, _, m)| m.contains(&p)) {
        Some((sub, fam, _)) => (owner.to_string(), Some(sub), Some(fam)),
        None => (owner.to_string(), None, None),
    }
}

/// The ordered `gfx_arch` values for GPUs of these targets: all targets,
/// then all sub-families, then all families, each in the given order,
/// duplicates dropped.
pub fn properties_for(targets: &[String]) -> Vec<String> {
    let chains: Vec<_> = targets.iter().map(|t| chain(t)).collect();
    let mut out: Vec<String> = Vec::new();
    let mut add = |v: &str| {
        if !v.is_empty() && !out.iter().any(|o| o == v) {
            out.push(v.to_string());
        }
    };
    for (t, _, _) in &chains {
        add(t);
    }
    for (_, s, _) in &chains {
        add(s.unwrap_or_default());
    }
    for (_, _, f) in &chains {
        add(f.unwrap_or_default());
    }
    out
}

/// Every value the feature can take: all targets, sub-families and
/// families rocm-bootstrap packages.
pub fn all_values() -> Vec<String> {
    let all: Vec<String> = CHAINS
        .iter()
        .flat_map(|(_, _, m)| m.iter().map(|p| p.to_string()))
        .collect();
    properties_for(&all)
}

/// The GPUs' distinct targets, from the environment `var`: disabled,
/// forced, or the KFD topology (nodes sorted by name as strings, GPU nodes
/// only), first occurrence first.
pub fn detect_targets(var: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in all_targets(var) {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

fn all_targets(var: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    if var("ROCM_BOOTSTRAP_DISABLE_DETECTION").as_deref() == Some("1") {
        return Vec::new();
    }
    if let Some(force) = var("ROCM_BOOTSTRAP_FORCE_GFX_ARCH").filter(|f| !f.trim().is_empty()) {
        return force
            .split(',')
            .map(processor)
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect();
    }
    let root = var("KPACK_SYSFS_ROOT").unwrap_or_else(|| "/sys".to_string());
    kfd_targets(&Path::new(&root).join("class/kfd/kfd/topology/nodes"))
}

fn kfd_targets(nodes: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(nodes) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    names.sort();
    let mut out = Vec::new();
    for n in names {
        let Ok(text) = std::fs::read_to_string(nodes.join(&n).join("properties")) else {
            continue;
        };
        let get = |key: &str| {
            text.lines().rev().find_map(|l| {
                let mut w = l.split_whitespace();
                match (w.next(), w.next(), w.next()) {
                    (Some(k), Some(v), None) if k == key => v.parse::<u64>().ok(),
                    _ => None,
                }
            })
        };
        let (Some(simds), Some(v)) = (get("simd_count"), get("gfx_target_version")) else {
            continue;
        };
        let (major, minor, step) = (v / 10000, (v % 10000) / 100, v % 100);
        if simds == 0 || major == 0 || minor > 0xf || step > 0xf {
            continue;
        }
        out.push(format!("gfx{major}{minor:x}{step:x}"));
    }
    out
}
