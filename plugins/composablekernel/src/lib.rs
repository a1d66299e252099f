//! kpack database handler for Composable Kernel's per-target static
//! libraries: `libdevice_<kind>_operations_<token>.a` (`.lib` on Windows),
//! where `<token>` is the sanitized target id (`gfx950_xnackp`,
//! `gfx1250_strict`). AMD only knows `conv`; any `<kind>` is accepted here.
//! The unsuffixed library is generic.

use kpack_sdk::{Classification, File, Handler, export_handler, parse_sanitized_target};

/// The Composable Kernel handler.
pub struct ComposableKernel;

impl Handler for ComposableKernel {
    const NAME: &'static str = "composablekernel";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const PATH_HINTS: &'static [&'static str] = &["libdevice_"];

    fn classify(file: &File<'_>) -> Classification {
        let name = file.name();
        let Some(stem) = name
            .strip_suffix(".a")
            .or_else(|| name.strip_suffix(".lib"))
        else {
            return Classification::NotMine;
        };
        let Some((_, token)) = stem
            .strip_prefix("libdevice_")
            .and_then(|s| s.split_once("_operations"))
        else {
            return Classification::NotMine;
        };
        match token.strip_prefix('_').map(parse_sanitized_target) {
            None => Classification::Generic,
            Some(Some(t)) => Classification::Arch(t.to_string()),
            Some(None) => Classification::NotMine,
        }
    }
}

export_handler!(ComposableKernel);

#[cfg(test)]
mod tests {
    use super::*;

    fn c(path: &str) -> Classification {
        ComposableKernel::classify(&File::new(path, 0, b""))
    }

    #[test]
    fn reads_sanitized_targets() {
        assert_eq!(
            c("lib/libdevice_conv_operations_gfx950_xnackp.a"),
            Classification::Arch("gfx950:xnack+".into())
        );
        assert_eq!(
            c("lib/libdevice_conv_operations_gfx1250_strict.a"),
            Classification::Arch("gfx1250-strict".into())
        );
        assert_eq!(
            c("lib/libdevice_gemm_operations_gfx942.lib"),
            Classification::Arch("gfx942".into())
        );
        assert_eq!(
            c("lib/libdevice_conv_operations.a"),
            Classification::Generic
        );
        assert_eq!(
            c("lib/libdevice_conv_operations_weird.a"),
            Classification::NotMine
        );
        assert_eq!(c("lib/libfoo.a"), Classification::NotMine);
    }
}
