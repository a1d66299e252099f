//! kpack database handler for hipSPARSELt: Tensile kernel libraries under
//! `hipsparselt/library/`, flat or per-architecture, with content sniffing for
//! code objects whose name carries no target (see [`kpack_sdk::tensile`]).

use kpack_sdk::{Classification, File, Handler, SNIFF_BYTES, export_handler, tensile};

/// The hipSPARSELt handler.
pub struct HipSPARSELt;

impl Handler for HipSPARSELt {
    const NAME: &'static str = "hipsparselt";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const PREFIX_BYTES: u32 = SNIFF_BYTES;
    const PATH_HINTS: &'static [&'static str] = &["hipsparselt/"];

    fn classify(file: &File<'_>) -> Classification {
        tensile::classify("hipsparselt", file)
    }
}

export_handler!(HipSPARSELt);

#[cfg(test)]
mod tests {
    use super::*;

    fn c(path: &str) -> Classification {
        HipSPARSELt::classify(&File::new(path, 0, b""))
    }

    #[test]
    fn gfx942_files_are_not_generic() {
        let lib = "lib/hipsparselt/library/";
        for name in [
            "TensileLibrary_gfx942.co",
            "TensileLibrary_gfx942.dat",
            "Kernels.so-000-gfx942.hsaco",
        ] {
            assert_eq!(
                c(&format!("{lib}{name}")),
                Classification::Arch("gfx942".into()),
                "{name}"
            );
        }
        assert_eq!(
            c(&format!("{lib}gfx942/TensileLibrary_fallback.dat")),
            Classification::Arch("gfx942".into())
        );
        assert_eq!(
            c(&format!("{lib}TensileLibrary.dat")),
            Classification::Generic
        );
    }
}
