//! The AMD wheel-variant provider (PEP 850 draft) as an installer can
//! vendor it, the way uv vendors NVIDIA's: a namespace, the identity of the
//! Python plugin it stands in for, and the values this machine supports.
//!
//! The answer is AMD's (rocm-bootstrap 0.3.0,
//! `rocm_bootstrap.variant_provider:AMDVariantPlugin`): one feature,
//! `amd :: gfx_arch`, `multi_value`, whose values are the **target-level**
//! package owners of the GPUs present, in detection order (`gfx1100`;
//! `gfx1250-strict` is packaged with `gfx1250`; xnack and sramecc features
//! dropped). A variant built for a sub-family or a family lists every
//! processor its code serves (`gfx110x` → `gfx1100`, `gfx1101`, …,
//! [`variant_values`]), so the one answer selects variants of any grouping.
//!
//! Detection is this crate's [`detect`](crate::detect) without the HIP
//! fallback: the overrides, then the KFD topology with its bounds (regular
//! files only, a size cap, UTF-8), forced names checked. The Python package
//! `kpack-variant-provider` (`python/variant-provider`) gives the same
//! answers; a test holds the two together, and both against rocm-bootstrap.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;

use crate::{Detection, Options, detect};

/// The variant namespace.
pub const NAMESPACE: &str = "amd";
/// The one feature of the namespace.
pub const FEATURE: &str = "gfx_arch";
/// A variant may list several values of the feature (rocm-bootstrap's
/// `multi_value=True`): it is selected when any one is supported.
pub const MULTI_VALUE: bool = true;
/// The Python package this provider stands in for.
pub const PACKAGE_NAME: &str = "kpack-variant-provider";
/// Its version.
pub const PACKAGE_VERSION: &str = "0.2.0";
/// Its plugin API (`module:object`), as `variant.json` names it.
pub const PLUGIN_API: &str = "kpack_variant_provider.plugin:AmdVariantPlugin";
/// The requirement `variant.json` states for it.
pub const REQUIREMENT: &str = "kpack-variant-provider >= 0.2";
/// AMD's provider: the plugin API of rocm-bootstrap's.
pub const ROCM_BOOTSTRAP_PLUGIN_API: &str = "rocm_bootstrap.variant_provider:AMDVariantPlugin";
/// AMD's provider: the requirement for it.
pub const ROCM_BOOTSTRAP_REQUIREMENT: &str = "rocm-bootstrap >= 0.3.0";

/// Targets packaged with another processor (rocm-bootstrap's
/// `_OVERRIDE_PACKAGE_OWNERS`).
const OWNERS: &[(&str, &str)] = &[("gfx1250-strict", "gfx1250")];

/// One supported feature: its name and its values, most preferred first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupportedFeature {
    /// The feature name (`gfx_arch`).
    pub name: &'static str,
    /// The values, most preferred first.
    pub values: Vec<String>,
    /// Whether a variant may carry several values ([`MULTI_VALUE`]).
    pub multi_value: bool,
}

/// The vendorable provider.
#[derive(Debug)]
pub struct AmdVariantProvider {
    options: Options,
    detected: OnceLock<Result<Vec<SupportedFeature>, String>>,
}

impl AmdVariantProvider {
    /// A provider that detects with `options` (normally
    /// [`provider_options`] of the installer's environment) on first use.
    pub const fn new(options: Options) -> Self {
        AmdVariantProvider {
            options,
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

    /// The features this machine supports: empty when no AMD GPU is seen,
    /// an error when a forced name is not a GPU target. Detected once.
    pub fn properties(&self) -> Result<&[SupportedFeature], &str> {
        self.detected
            .get_or_init(|| {
                let det = detect(&self.options).map_err(|e| e.to_string())?;
                let values = supported(&det);
                Ok(if values.is_empty() {
                    Vec::new()
                } else {
                    vec![SupportedFeature {
                        name: FEATURE,
                        values,
                        multi_value: MULTI_VALUE,
                    }]
                })
            })
            .as_deref()
            .map_err(String::as_str)
    }
}

/// The detection options of the provider: those of the variables `var`
/// looks up (the installer's environment), without the HIP fallback
/// (rocm-bootstrap reads only the KFD topology on Linux).
pub fn provider_options(
    sysfs_root: Option<PathBuf>,
    var: impl Fn(&str) -> Option<OsString>,
) -> Options {
    Options {
        hip_fallback: false,
        ..Options::from_vars(sysfs_root, var)
    }
}

/// The target-level package of a target id (`gfx90a:xnack+` → `gfx90a`,
/// `gfx1250-strict` → `gfx1250`; rocm-bootstrap's `package_owner`).
pub fn owner(target: &str) -> String {
    let p = kpack_amdgpu::strip_target_prefix(target.trim());
    let p = p.split(':').next().unwrap_or(p);
    OWNERS
        .iter()
        .find(|(t, _)| *t == p)
        .map_or(p, |(_, o)| o)
        .to_string()
}

/// The `gfx_arch` values for GPUs of these targets: their package owners
/// in the given order, duplicates dropped.
pub fn properties_for(targets: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in targets {
        let v = owner(t);
        if !v.is_empty() && !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// The values this detection supports ([`properties_for`] its targets).
pub fn supported(det: &Detection) -> Vec<String> {
    properties_for(&det.targets())
}

/// Every value the feature can take: the target-level packages of every
/// processor rocm-bootstrap packages, in its hierarchy's order.
pub fn all_values() -> Vec<String> {
    let all: Vec<String> = kpack_amdgpu::SUB_FAMILIES
        .iter()
        .flat_map(|s| s.members.iter().map(|p| p.to_string()))
        .collect();
    properties_for(&all)
}

/// The `gfx_arch` values a variant of device wheel `key` carries: the
/// processors its code serves, at target level. A target is itself; a
/// sub-family or family its members (`gfx110x` → `gfx1100` … `gfx1103`);
/// a generic target the processors it covers. Empty for a key that names
/// no GPU (SPIR-V, an unknown name).
pub fn variant_values(key: &str) -> Vec<String> {
    let key = kpack_amdgpu::archive_group_level(key).map_or(key, |(_, k)| k);
    let members: Vec<String> = match kpack_amdgpu::key_level(key) {
        Some(kpack_amdgpu::Level::Family | kpack_amdgpu::Level::SubFamily) => {
            kpack_amdgpu::SUB_FAMILIES
                .iter()
                .filter(|s| s.key == key || s.family == key)
                .flat_map(|s| s.members.iter().map(|p| p.to_string()))
                .collect()
        }
        _ => match kpack_amdgpu::covered_by(key) {
            Some(c) => c.iter().map(|p| p.to_string()).collect(),
            None if kpack_amdgpu::mach_for_processor(kpack_amdgpu::processor_of(key)).is_some()
                || key.ends_with("-strict") =>
            {
                vec![key.to_string()]
            }
            None => Vec::new(),
        },
    };
    properties_for(&members)
}
