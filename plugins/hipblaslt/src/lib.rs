//! kpack database handler for hipBLASLt: Tensile kernel libraries under
//! `hipblaslt/library/`, flat or per-architecture, with content sniffing for
//! code objects whose name carries no target (see [`kpack_sdk::tensile`]).

use kpack_sdk::{Classification, File, Handler, SNIFF_BYTES, export_handler, tensile};

/// The hipBLASLt handler.
pub struct HipBLASLt;

impl Handler for HipBLASLt {
    const NAME: &'static str = "hipblaslt";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const PREFIX_BYTES: u32 = SNIFF_BYTES;
    const PATH_HINTS: &'static [&'static str] = &["hipblaslt/"];

    fn classify(file: &File<'_>) -> Classification {
        tensile::classify("hipblaslt", file)
    }
}

export_handler!(HipBLASLt);

#[cfg(test)]
mod tests {
    use super::*;

    fn c(path: &str) -> Classification {
        HipBLASLt::classify(&File::new(path, 0, b""))
    }

    #[test]
    fn classifies_the_seed_layout() {
        let lib = "lib/hipblaslt/library/";
        assert_eq!(
            c(&format!("{lib}hipblasltTransform.hsaco")),
            Classification::Generic
        );
        assert_eq!(
            c(&format!("{lib}hipblasltExtOpLibrary.dat")),
            Classification::Generic
        );
        for name in [
            "extop_gfx1100.co",
            "TensileLibrary_HH_gfx1100.co",
            "TensileLibrary_HH_gfx1100.dat",
        ] {
            assert_eq!(
                c(&format!("{lib}{name}")),
                Classification::Arch("gfx1100".into()),
                "{name}"
            );
        }
        assert_eq!(c(&format!("{lib}config.json")), Classification::NotMine);
        assert_eq!(
            c("lib/rocblas/library/extop_gfx1100.co"),
            Classification::NotMine
        );
    }
}
