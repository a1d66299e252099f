//! kpack database handler for hipKernelProvider: engine content below
//! `engines/arch_content/` or `engines/test_arch_content/`; the first
//! component below that container that is a target gives the key; other
//! files in the container are generic.

use kpack_sdk::{Classification, File, Handler, export_handler, parse_target};

/// The hipKernelProvider handler.
pub struct HipKernelProvider;

impl Handler for HipKernelProvider {
    const NAME: &'static str = "hipkernelprovider";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const PATH_HINTS: &'static [&'static str] = &["engines/"];

    fn classify(file: &File<'_>) -> Classification {
        let rest = file
            .below(&["engines", "arch_content"])
            .or_else(|| file.below(&["engines", "test_arch_content"]));
        let Some(rest) = rest else {
            return Classification::NotMine;
        };
        let mut dirs = rest.split('/').rev().skip(1).collect::<Vec<_>>();
        dirs.reverse();
        match dirs.into_iter().find_map(parse_target) {
            Some(t) => Classification::Arch(t.to_string()),
            None => Classification::Generic,
        }
    }
}

export_handler!(HipKernelProvider);

#[cfg(test)]
mod tests {
    use super::*;

    fn c(path: &str) -> Classification {
        HipKernelProvider::classify(&File::new(path, 0, b""))
    }

    #[test]
    fn finds_the_arch_directory() {
        assert_eq!(
            c("share/hkp/engines/arch_content/gemm/gfx942/k.co"),
            Classification::Arch("gfx942".into())
        );
        assert_eq!(
            c("x/engines/test_arch_content/gfx90a-xnack+/k.co"),
            Classification::Arch("gfx90a:xnack+".into())
        );
        assert_eq!(
            c("x/engines/arch_content/index.json"),
            Classification::Generic
        );
        assert_eq!(c("x/engines/other/gfx942/k.co"), Classification::NotMine);
    }
}
