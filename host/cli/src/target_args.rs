//! `--gpu-targets` and `--exclude-arch`, shared by the commands that split
//! device code (`offload`, `split`, `wheel split`): raw flags into one
//! validated [`TargetFilter`] before any I/O.

use anyhow::Context;
use kpack_amdgpu::TargetFilter;

/// Which GPU targets to keep.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TargetArgs {
    /// Keep only these GPU targets, comma-separated (AMD's flag for
    /// sharded builds): `gfx90a` keeps every gfx90a variant,
    /// `gfx90a:xnack+` only that one; `gfx90a-xnack+` is accepted;
    /// `-strict` and generic targets are targets of their own; `auto`
    /// stands for this machine's GPUs (`kpack detect`).
    #[arg(long = "gpu-targets", value_name = "T,...", value_delimiter = ',')]
    gpu_targets: Vec<String>,
    /// Drop these GPU targets (same spelling; the inverse of --gpu-targets).
    #[arg(long = "exclude-arch", value_name = "ARCH", value_delimiter = ',')]
    exclude_arch: Vec<String>,
}

impl TargetArgs {
    /// The validated filter.
    pub fn filter(&self) -> anyhow::Result<TargetFilter> {
        // `--gpu-targets ''` would otherwise be no list, which keeps
        // every target: the opposite of what an empty list asks for.
        for (flag, list) in [
            ("--gpu-targets", &self.gpu_targets),
            ("--exclude-arch", &self.exclude_arch),
        ] {
            if list.iter().all(|t| t.trim().is_empty()) && !list.is_empty() {
                anyhow::bail!("{flag}: empty target list");
            }
            if list.iter().any(|t| t.trim().is_empty()) {
                anyhow::bail!("{flag} {:?}: an empty target name", list.join(","));
            }
        }
        let keep =
            kpack_detect::expand_auto(&self.gpu_targets, &crate::environment::detect_options(None))
                .context("--gpu-targets")?;
        let drop = kpack_detect::expand_auto(
            &self.exclude_arch,
            &crate::environment::detect_options(None),
        )
        .context("--exclude-arch")?;
        TargetFilter::from_lists(&keep, &drop).context("invalid --gpu-targets or --exclude-arch")
    }
}
