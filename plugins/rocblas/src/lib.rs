//! kpack database handler for rocBLAS: Tensile kernel libraries under
//! `rocblas/library/`, flat or per-architecture, with content sniffing for
//! code objects whose name carries no target (see [`kpack_sdk::tensile`]).

use kpack_sdk::{Classification, File, Handler, SNIFF_BYTES, export_handler, tensile};

/// The rocBLAS handler.
pub struct RocBLAS;

impl Handler for RocBLAS {
    const NAME: &'static str = "rocblas";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const PREFIX_BYTES: u32 = SNIFF_BYTES;
    const PATH_HINTS: &'static [&'static str] = &["rocblas/"];

    fn classify(file: &File<'_>) -> Classification {
        tensile::classify("rocblas", file)
    }
}

export_handler!(RocBLAS);

#[cfg(test)]
mod tests {
    use super::*;

    fn c(path: &str) -> Classification {
        RocBLAS::classify(&File::new(path, 0, b""))
    }

    fn arch(a: &str) -> Classification {
        Classification::Arch(a.into())
    }

    #[test]
    fn classifies_the_seed_layout() {
        let lib = "lib/rocblas/library/";
        for name in [
            "TensileLibrary_Type_HH_gfx1100.co",
            "TensileLibrary_Type_HH_gfx1100.dat",
            "TensileLibrary_Type_HH_gfx1100.hsaco",
            "Kernels.so-000-gfx1100.hsaco",
            "TensileLibrary_lazy_gfx1100.dat",
        ] {
            assert_eq!(c(&format!("{lib}{name}")), arch("gfx1100"), "{name}");
        }
        assert_eq!(
            c(&format!("{lib}TensileLibrary_Type_HH_fallback.dat")),
            Classification::Generic
        );
        assert_eq!(
            c(&format!("{lib}TensileLibrary.dat")),
            Classification::Generic
        );
        assert_eq!(c(&format!("{lib}notes.txt")), Classification::NotMine);
        assert_eq!(
            c("lib/other/library/TensileLibrary_gfx1100.co"),
            Classification::NotMine
        );
    }

    #[test]
    fn reads_a_distribution_s_versioned_layout() {
        let lib = "lib/x86_64-linux-gnu/rocblas/4.3.0/library/";
        assert_eq!(
            c(&format!(
                "{lib}TensileLibrary_Type_HH_Contraction_gfx1100.dat"
            )),
            arch("gfx1100")
        );
        assert_eq!(
            c(&format!("{lib}gfx942/TensileManifest.txt")),
            arch("gfx942")
        );
        assert_eq!(
            c(&format!("{lib}TensileLibrary.dat")),
            Classification::Generic
        );
        assert_eq!(
            c("lib/rocblas/not-a-version/library/TensileLibrary_gfx1100.dat"),
            Classification::NotMine
        );
        // The host only asks about paths that hold a hint.
        assert!(RocBLAS::PATH_HINTS.iter().any(|h| lib.contains(h)));
    }

    #[test]
    fn keeps_xnack_and_reads_per_arch_dirs() {
        assert_eq!(
            c("lib/rocblas/library/Kernels.so-000-gfx90a-xnack+.hsaco"),
            arch("gfx90a:xnack+")
        );
        assert_eq!(
            c("lib/rocblas/library/gfx942/TensileManifest.txt"),
            arch("gfx942")
        );
    }

    #[test]
    fn sniffs_a_code_object_without_target_in_its_name() {
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[8] = 3;
        elf[18] = 224;
        elf[48] = 0x41;
        let f = File::new("lib/rocblas/library/Kernels.co", 64, &elf);
        assert_eq!(RocBLAS::classify(&f), arch("gfx1100"));
    }
}
