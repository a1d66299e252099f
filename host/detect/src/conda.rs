//! conda's AMD virtual packages (conda/ceps #189, as rattler implements
//! them): `__amdgpu` (version and build `0`) when an AMD GPU is present,
//! and `__amdgpu_arch`, the `major.minor.stepping` ISA version of the GPU
//! with the most compute units, ties (and unknown counts, which rank
//! lowest) going to the higher ISA version. `CONDA_OVERRIDE_AMDGPU` (`0`:
//! present, empty: absent) and `CONDA_OVERRIDE_AMDGPU_ARCH`
//! (`major.minor.stepping`, empty: absent) win over detection; without
//! `__amdgpu` there is no `__amdgpu_arch`.

use serde::Serialize;

use crate::{Detection, Gpu};

/// conda's override of `__amdgpu`.
pub const OVERRIDE_AMDGPU: &str = "CONDA_OVERRIDE_AMDGPU";
/// conda's override of `__amdgpu_arch`.
pub const OVERRIDE_AMDGPU_ARCH: &str = "CONDA_OVERRIDE_AMDGPU_ARCH";

/// An ISA version, ordered as `(major, minor, stepping)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IsaVersion(pub u32, pub u32, pub u32);

impl std::fmt::Display for IsaVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

impl IsaVersion {
    /// From a KFD `gfx_target_version` (`90010` → `9.0.10`); `None` for 0.
    pub fn from_gfx_target_version(v: u64) -> Option<IsaVersion> {
        let v = u32::try_from(v).ok().filter(|v| *v != 0)?;
        Some(IsaVersion((v / 10000) % 100, (v / 100) % 100, v % 100))
    }

    /// From a target id (`gfx90a:xnack-` → `9.0.10`): after `gfx`, the last
    /// two characters are hex minor and stepping, the rest the decimal
    /// major.
    pub fn from_target(target: &str) -> Option<IsaVersion> {
        let name = target.split(':').next()?;
        let digits = name.strip_prefix("gfx")?;
        if digits.len() < 3 || !digits.is_ascii() {
            return None;
        }
        let (major, rest) = digits.split_at(digits.len() - 2);
        let mut rest = rest.chars();
        let minor = rest.next()?.to_digit(16)?;
        let stepping = rest.next()?.to_digit(16)?;
        if !major.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(IsaVersion(major.parse().ok()?, minor, stepping))
    }

    /// A GPU's: from its `gfx_target_version` when KFD gave one, else from
    /// its target name.
    pub fn of(gpu: &Gpu) -> Option<IsaVersion> {
        match gpu.gfx_target_version {
            Some(v) => IsaVersion::from_gfx_target_version(v),
            None => IsaVersion::from_target(&gpu.target),
        }
    }

    /// Parse `major.minor.stepping`, three decimal numbers.
    pub fn parse(s: &str) -> Option<IsaVersion> {
        let mut it = s.split('.');
        let mut part = || {
            let p = it.next()?;
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            p.parse::<u32>().ok()
        };
        let v = IsaVersion(part()?, part()?, part()?);
        it.next().is_none().then_some(v)
    }
}

/// The two virtual packages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conda {
    /// `__amdgpu` is present.
    pub amdgpu: bool,
    /// `__amdgpu_arch`'s version, if any.
    pub amdgpu_arch: Option<String>,
    /// The index in [`Detection::gpus`] of the GPU it describes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selected: Option<usize>,
}

impl Conda {
    /// The lines `conda info` shows for them: `__amdgpu=0=0`,
    /// `__amdgpu_arch=11.0.0=0`.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.amdgpu {
            out.push("__amdgpu=0=0".to_string());
            if let Some(a) = &self.amdgpu_arch {
                out.push(format!("__amdgpu_arch={a}=0"));
            }
        }
        out
    }
}

/// The GPU `__amdgpu_arch` describes: most compute units, then highest
/// ISA version (rattler's `select_device`). GPUs whose ISA version cannot
/// be read are not candidates.
pub fn select(gpus: &[Gpu]) -> Option<usize> {
    gpus.iter()
        .enumerate()
        .filter_map(|(i, g)| Some((i, (g.compute_units, IsaVersion::of(g)?))))
        .max_by_key(|(_, k)| *k)
        .map(|(i, _)| i)
}

/// A bad override.
#[derive(Debug, thiserror::Error)]
#[error("{var}={value:?}: {why}")]
pub struct OverrideError {
    /// The variable.
    pub var: &'static str,
    /// Its value.
    pub value: String,
    /// What is wrong.
    pub why: &'static str,
}

/// The virtual packages of `det`, with the overrides read through `var`.
pub fn conda(
    det: &Detection,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Conda, OverrideError> {
    let selected = select(&det.gpus);
    let detected_arch = selected.and_then(|i| IsaVersion::of(&det.gpus[i]));
    let amdgpu = match var(OVERRIDE_AMDGPU) {
        None => selected.is_some(),
        Some(v) if v.is_empty() => false,
        Some(v) if v == "0" => true,
        Some(value) => {
            return Err(OverrideError {
                var: OVERRIDE_AMDGPU,
                value,
                why: "`__amdgpu`'s version is always 0: set it to 0 (present) or empty (absent)",
            });
        }
    };
    let arch = match var(OVERRIDE_AMDGPU_ARCH) {
        None => detected_arch,
        Some(v) if v.is_empty() => None,
        Some(value) => Some(IsaVersion::parse(&value).ok_or(OverrideError {
            var: OVERRIDE_AMDGPU_ARCH,
            value,
            why: "expected major.minor.stepping, three decimal numbers (11.0.0)",
        })?),
    };
    Ok(Conda {
        amdgpu,
        amdgpu_arch: arch.filter(|_| amdgpu).map(|a| a.to_string()),
        selected: selected.filter(|_| amdgpu),
    })
}
