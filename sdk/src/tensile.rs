//! The rules shared by Tensile-based libraries (rocBLAS, hipBLASLt,
//! hipSPARSELt): kernel databases under `<library>/library/`, laid out flat
//! (`TensileLibrary_..._gfx942.co`) or per architecture (`library/gfx942/...`).

use crate::{Classification, Content, File, find_target, parse_target, sniff};

/// Classify `file` for the Tensile library whose install directory is named
/// `library` (e.g. `"rocblas"`).
///
/// * The path must contain the components `<library>/library` (whole
///   components: `xrocblas/library_old` is not a match, unlike AMD's
///   substring test), or `<library>/<version>/library` as distributions
///   install them ([`File::below_versioned`]).
/// * Per-arch layout: the first component below `library/` is a target
///   (`library/gfx942/...`, `library/gfx90a-xnack+/...`) → every file below
///   it is for that target, manifests included.
/// * Flat layout: `.co`, `.hsaco` and `.dat` files with a target in the name
///   are for that target. When the name has none, the first bytes decide: an
///   AMDGPU code object or bundle for a single target is for that target
///   (AMD leaves those generic); anything else is generic (`TensileLibrary.dat`,
///   `*_fallback.dat`).
/// * Other files (`.txt`, `.yaml`) are not claimed.
pub fn classify(library: &str, file: &File<'_>) -> Classification {
    let Some(rest) = file.below_versioned(&[library, "library"]) else {
        return Classification::NotMine;
    };
    let mut parts = rest.split('/');
    if let (Some(first), Some(_)) = (parts.next(), parts.next())
        && let Some(target) = parse_target(first)
    {
        return Classification::Arch(target.to_string());
    }
    let name = file.name();
    let suffix = name.rsplit_once('.').map_or("", |(_, s)| s);
    if !matches!(suffix, "co" | "hsaco" | "dat") {
        return Classification::NotMine;
    }
    if let Some(target) = find_target(name) {
        return Classification::Arch(target.to_string());
    }
    match sniff(file.prefix) {
        c @ (Content::AmdgpuElf(_) | Content::OffloadBundle(_)) => match c.single_target() {
            Some(t) => Classification::Arch(t.to_string()),
            None => Classification::Generic,
        },
        _ => Classification::Generic,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(path: &str) -> Classification {
        classify("rocblas", &File::new(path, 0, &[]))
    }

    #[test]
    fn flat_layout() {
        assert_eq!(
            c("lib/rocblas/library/TensileLibrary_gfx1100.co"),
            Classification::Arch("gfx1100".into())
        );
        assert_eq!(
            c("lib/rocblas/library/TensileLibrary.dat"),
            Classification::Generic
        );
        assert_eq!(c("lib/rocblas/library/readme.txt"), Classification::NotMine);
        assert_eq!(
            c("lib/xrocblas/library_old/TensileLibrary_gfx1100.co"),
            Classification::NotMine
        );
    }

    #[test]
    fn per_arch_layout_claims_everything_below() {
        assert_eq!(
            c("lib/rocblas/library/gfx942/TensileManifest.txt"),
            Classification::Arch("gfx942".into())
        );
        assert_eq!(
            c("lib/rocblas/library/gfx90a-xnack+/x.dat"),
            Classification::Arch("gfx90a:xnack+".into())
        );
        assert_eq!(
            c("lib/rocblas/library/gfx942_notadir.dat"),
            Classification::Arch("gfx942".into())
        );
    }
}
