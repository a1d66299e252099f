//! kpack database handler for MIOpen.
//!
//! Claims (a) per-arch CK solver libraries `libMIOpenCK<name>_<arch>.so`
//! (`.dll`, versioned `.so.N` too) anywhere, and (b) under `miopen/db`, the
//! databases `*.kdb`, `*.model`, `*.db.txt`, `*.fdb.txt`.
//!
//! MIOpen glues the CU count to the processor (`gfx90878` = gfx908 with 78
//! CUs). AMD matches against a hard-coded GPU list; this handler instead
//! uses the processor grammar ([`kpack_sdk::split_processor`]: `gfx` +
//! major + minor + hex stepping), so a new GPU needs no edit. Databases
//! without a processor in their name are not claimed (AMD's behaviour).

use kpack_sdk::{
    Classification, File, Handler, export_handler, parse_sanitized_target, parse_target,
    split_processor,
};

/// The MIOpen handler.
pub struct MiOpen;

const DB_SUFFIXES: [&str; 4] = [".kdb", ".model", ".db.txt", ".fdb.txt"];

impl Handler for MiOpen {
    const NAME: &'static str = "miopen";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const PATH_HINTS: &'static [&'static str] = &["miopen/", "libMIOpenCK"];

    fn classify(file: &File<'_>) -> Classification {
        let name = file.name();
        if let Some(rest) = name.strip_prefix("libMIOpenCK") {
            let stem = rest
                .split_once(".so")
                .or_else(|| rest.split_once(".dll"))
                .map(|(s, _)| s);
            return match stem
                .and_then(|s| s.split_once("_gfx"))
                .map(|(_, t)| format!("gfx{t}"))
            {
                Some(t) => match parse_target(&t).or_else(|| parse_sanitized_target(&t)) {
                    Some(t) => Classification::Arch(t.to_string()),
                    None => Classification::NotMine,
                },
                None => Classification::NotMine,
            };
        }
        if file.below_versioned(&["miopen", "db"]).is_none()
            || !DB_SUFFIXES.iter().any(|s| name.ends_with(s))
        {
            return Classification::NotMine;
        }
        match split_processor(name) {
            Some((processor, _)) => Classification::Arch(processor.to_string()),
            None => Classification::NotMine,
        }
    }
}

export_handler!(MiOpen);

#[cfg(test)]
mod tests {
    use super::*;

    fn c(path: &str) -> Classification {
        MiOpen::classify(&File::new(path, 0, b""))
    }

    fn arch(a: &str) -> Classification {
        Classification::Arch(a.into())
    }

    #[test]
    fn splits_glued_cu_counts_without_a_gpu_list() {
        let db = "share/miopen/db/";
        assert_eq!(c(&format!("{db}gfx90878.HIP.fdb.txt")), arch("gfx908"));
        assert_eq!(c(&format!("{db}gfx942130.db.txt")), arch("gfx942"));
        assert_eq!(c(&format!("{db}gfx1030_36.db.txt")), arch("gfx1030"));
        assert_eq!(c(&format!("{db}gfx908.tn.model")), arch("gfx908"));
        assert_eq!(c(&format!("{db}gfx90a_metadata.tn.model")), arch("gfx90a"));
        assert_eq!(
            c(&format!(
                "{db}gfx942_ConvHipIgemmGroupFwdXdlops_decoder.ktn.model"
            )),
            arch("gfx942")
        );
        // A GPU no list knew about when this was written.
        assert_eq!(c(&format!("{db}gfx131064.kdb")), arch("gfx1310"));
        assert_eq!(c(&format!("{db}gfx90a6e.OpenCL.fdb.txt")), arch("gfx90a"));
    }

    #[test]
    fn leaves_other_files_alone() {
        assert_eq!(c("share/other/db/gfx908.tn.model"), Classification::NotMine);
        assert_eq!(c("share/miopen/db/gfx908.txt"), Classification::NotMine);
        assert_eq!(
            c("share/miopen/db/generic.tn.model"),
            Classification::NotMine
        );
    }

    #[test]
    fn reads_ck_solver_libraries() {
        assert_eq!(c("lib/libMIOpenCKGroupConv_gfx942.so"), arch("gfx942"));
        assert_eq!(
            c("lib/libMIOpenCKGroupConv_gfx950_xnackp.so.1"),
            arch("gfx950:xnack+")
        );
        assert_eq!(c("bin/libMIOpenCKGroupConv_gfx1100.dll"), arch("gfx1100"));
        assert_eq!(c("lib/libMIOpenCKGroupConv.so"), Classification::NotMine);
    }
}
