//! What `kpack detect` prints of a [`Detection`]: the `--format json`
//! document ([`Report`]), the readable listing ([`Detection::human`]),
//! the packaging chains and the pip extras of the GPUs found.

use std::fmt;

use serde::Serialize;

use crate::conda::{Conda, OverrideError, conda};
use crate::mixed::{VisibleDevices, hip_order, visible_devices};
use crate::{Chain, Detection};

/// `kpack detect --format json`: the detection and everything derived
/// from it.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    /// The distinct targets, first occurrence first.
    pub targets: Vec<String>,
    /// The detection itself.
    pub detection: &'a Detection,
    /// The GPUs' indices in the HIP runtime's device order.
    pub hip_order: Vec<usize>,
    /// The `HIP_VISIBLE_DEVICES` that keeps the discrete GPUs, when an
    /// integrated one comes first.
    pub hip_visible_devices: Option<VisibleDevices>,
    /// conda's virtual packages.
    pub conda: Conda,
    /// The `amd :: gfx_arch` values, most preferred first.
    pub variant_properties: Vec<String>,
    /// The pip extras of the GPUs' device wheels.
    pub extras: Vec<String>,
}

impl<'a> Report<'a> {
    /// The report of `det`; `var` reads conda's overrides.
    pub fn new(
        det: &'a Detection,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Report<'a>, OverrideError> {
        Ok(Report {
            targets: det.targets(),
            detection: det,
            hip_order: hip_order(det),
            hip_visible_devices: visible_devices(det),
            conda: conda(det, var)?,
            variant_properties: crate::provider::supported(det),
            extras: det.extras(),
        })
    }
}

impl Detection {
    /// The pip extras that install the GPUs' device wheels (kpack's and
    /// AMD's splitters both write `device-<target>` per target), each once.
    pub fn extras(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for g in &self.gpus {
            let key = g.chain.as_ref().map_or(g.target.as_str(), |c| &c.target);
            let e = format!("device-{}", kpack_amdgpu::dist_name(key));
            if !out.contains(&e) {
                out.push(e);
            }
        }
        out
    }

    /// One line per target: target, sub-family, family (or the target
    /// alone, for one ROCm does not package).
    pub fn chain_lines(&self) -> Vec<String> {
        self.targets()
            .into_iter()
            .map(|t| match Chain::of(&t) {
                Some(c) => format!("{} {} {}", c.target, c.sub_family, c.family),
                None => t,
            })
            .collect()
    }

    /// One line per GPU with its packaging chain, then the
    /// `HIP_VISIBLE_DEVICES` advice when an integrated GPU comes first
    /// (the head of `kpack verify --gpu auto`).
    pub fn machine_lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .gpus
            .iter()
            .map(|g| {
                let chain = g.chain.as_ref().map_or_else(
                    || "no ROCm package".to_owned(),
                    |c| format!("packages {} -> {} -> {}", c.target, c.sub_family, c.family),
                );
                let kind = if g.integrated { "integrated; " } else { "" };
                format!(
                    "This machine: node {} is {} ({kind}{chain})",
                    g.node, g.target
                )
            })
            .collect();
        if let Some(v) = visible_devices(self) {
            out.push(format!(
                "HIP device {} is the integrated {}; to keep the discrete GPUs: export HIP_VISIBLE_DEVICES={}",
                v.first_index, v.first_target, v.value
            ));
        }
        out
    }

    /// The readable listing: one block per GPU, in the HIP runtime's order.
    pub fn human(&self) -> Human<'_> {
        Human(self)
    }
}

/// [`Detection::human`].
pub struct Human<'a>(&'a Detection);

impl fmt::Display for Human<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let det = self.0;
        if det.gpus.is_empty() {
            writeln!(f, "No AMD GPUs detected.")?;
            return writeln!(
                f,
                "Name one with ROCM_BOOTSTRAP_FORCE_GFX_ARCH=gfx1100 (or --gpu gfx1100 where targets are taken)."
            );
        }
        for (hip, &i) in hip_order(det).iter().enumerate() {
            let g = &det.gpus[i];
            write!(f, "node {}: {}", g.node, g.target)?;
            if let Some(p) = &g.pci_id {
                write!(f, "  PCI {p}")?;
            }
            if let Some(id) = g.gpu_id {
                write!(f, "  gpu_id {id}")?;
            }
            writeln!(f)?;
            let cus = g
                .compute_units
                .map_or_else(|| "unknown".to_string(), |c| c.to_string());
            let kind = if g.integrated {
                "integrated"
            } else {
                "discrete"
            };
            writeln!(f, "  HIP device {hip}, {kind}, compute units: {cus}")?;
            if let Some(gen_) = &g.generic {
                writeln!(f, "  generic target: {gen_}")?;
            }
            match &g.chain {
                Some(c) => writeln!(
                    f,
                    "  packages: {} -> {} -> {}",
                    c.target, c.sub_family, c.family
                )?,
                None => writeln!(f, "  packages: none (ROCm does not package {})", g.target)?,
            }
        }
        if let Some(v) = visible_devices(det) {
            writeln!(
                f,
                "HIP device {} is the integrated {}: programs that use the first device run there.",
                v.first_index, v.first_target
            )?;
            writeln!(
                f,
                "To keep the discrete GPUs: export HIP_VISIBLE_DEVICES={}",
                v.value
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Options, detect};

    /// The detection of `targets` forced (`None`: detection disabled).
    fn forced(targets: Option<&str>) -> crate::Detection {
        let dir = tempfile::tempdir().unwrap();
        detect(&Options {
            sysfs_root: dir.path().to_path_buf(),
            force: targets.map(str::to_owned),
            disable: targets.is_none(),
            hip_fallback: false,
        })
        .unwrap()
    }

    #[test]
    fn extras_and_chains_name_each_target_once() {
        let det = forced(Some("gfx942,gfx1100,gfx942"));
        assert_eq!(det.extras(), ["device-gfx942", "device-gfx1100"]);
        assert_eq!(
            det.chain_lines(),
            ["gfx942 gfx9_4 gfx9", "gfx1100 gfx110x gfx11"]
        );
        let text = det.human().to_string();
        assert!(
            text.contains("  packages: gfx1100 -> gfx110x -> gfx11\n"),
            "{text}"
        );
    }

    #[test]
    fn no_gpu_says_how_to_name_one() {
        let det = forced(None);
        assert!(det.extras().is_empty());
        assert!(
            det.human()
                .to_string()
                .starts_with("No AMD GPUs detected.\n"),
            "{}",
            det.human()
        );
    }
}
