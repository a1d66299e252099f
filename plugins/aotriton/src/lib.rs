//! kpack database handler for AOTriton's kernel images.
//!
//! Two layouts: the current `.../aotriton.images/amd-<arch>/...`, where the
//! directory is a target or a family wildcard (`amd-gfx11xx` → key `gfx11`,
//! `amd-gfx120x` → `gfx12_0`, see [`kpack_sdk::family_key`]); and the older
//! `.../aotriton/kernels/<gfx...>/...` (kept so old trees still split).
//! Files directly in `aotriton.images` (not in an arch directory) are part of
//! the database for every GPU, so they are generic rather than unclaimed.

use kpack_sdk::{Classification, File, Handler, export_handler, family_key};

/// The AOTriton handler.
pub struct AoTriton;

impl Handler for AoTriton {
    const NAME: &'static str = "aotriton";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const PATH_HINTS: &'static [&'static str] = &["aotriton"];

    fn classify(file: &File<'_>) -> Classification {
        if let Some(rest) = file.below(&["aotriton.images"]) {
            return match rest.split_once('/') {
                Some((dir, _)) => match dir.strip_prefix("amd-").filter(|a| a.starts_with("gfx")) {
                    Some(arch) => Classification::Arch(family_key(arch)),
                    None => Classification::Generic,
                },
                None => Classification::Generic,
            };
        }
        match file
            .below_versioned(&["aotriton", "kernels"])
            .and_then(|r| r.split('/').next())
        {
            Some(first) if first.starts_with("gfx") => Classification::Arch(first.to_string()),
            Some(_) | None => Classification::NotMine,
        }
    }
}

export_handler!(AoTriton);

#[cfg(test)]
mod tests {
    use super::*;

    fn c(path: &str) -> Classification {
        AoTriton::classify(&File::new(path, 0, b""))
    }

    fn arch(a: &str) -> Classification {
        Classification::Arch(a.into())
    }

    #[test]
    fn reads_amd_image_directories() {
        assert_eq!(
            c("lib/aotriton.images/amd-gfx11xx/flash/attn_fwd/FONLY__^bf16@16.aks2"),
            arch("gfx11")
        );
        assert_eq!(
            c("lib/aotriton.images/amd-gfx120x/flash/attn_fwd/a.aks2"),
            arch("gfx12_0")
        );
        assert_eq!(
            c("lib/aotriton.images/amd-gfx110x/flash/a.aks2"),
            arch("gfx110x")
        );
        assert_eq!(
            c("lib/aotriton.images/amd-gfx942/flash/a.aks2"),
            arch("gfx942")
        );
        assert_eq!(
            c("lib/aotriton.images/manifest.json"),
            Classification::Generic
        );
        assert_eq!(
            c("lib/aotriton.images/common/x.aks2"),
            Classification::Generic
        );
    }

    #[test]
    fn keeps_amds_older_kernels_layout() {
        assert_eq!(
            c("lib/aotriton/kernels/gfx1100/kernel.hsaco"),
            arch("gfx1100")
        );
        assert_eq!(
            c("lib/foo/bar/aotriton/kernels/gfx942/kernel.dat"),
            arch("gfx942")
        );
        assert_eq!(
            c("lib/aotriton/kernels/gfx1100/subdir/deep/kernel.hsaco"),
            arch("gfx1100")
        );
        assert_eq!(
            c("lib/aotriton/other/gfx1100/k.co"),
            Classification::NotMine
        );
        assert_eq!(
            c("lib/aotriton/kernels/common/k.co"),
            Classification::NotMine
        );
        assert_eq!(c("lib/aotriton/gfx1100/k.co"), Classification::NotMine);
    }
}
