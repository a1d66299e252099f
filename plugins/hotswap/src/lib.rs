//! kpack database handler for rocJITsu hot-swap translation caches:
//! exactly `share/rocjitsu/translations/<domain>/v1/<64 hex>.{man,obj}`.
//! AMD maps domains through a table (`gfx1250-b0-a0` → `gfx1250`); here the
//! processor grammar reads any `gfx…` domain, so new GPUs need no edit.
//! Domains that are not a processor stay generic.

use kpack_sdk::{Classification, File, Handler, export_handler, split_processor};

/// The hot-swap cache handler.
pub struct HotSwap;

impl Handler for HotSwap {
    const NAME: &'static str = "hotswap";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const PATH_HINTS: &'static [&'static str] = &["share/rocjitsu/translations/"];

    fn classify(file: &File<'_>) -> Classification {
        let Some(rest) = file.path.strip_prefix("share/rocjitsu/translations/") else {
            return Classification::NotMine;
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let [domain, "v1", name] = parts.as_slice() else {
            return Classification::NotMine;
        };
        let Some((hash, "man" | "obj")) = name.split_once('.') else {
            return Classification::NotMine;
        };
        if hash.len() != 64 || !hash.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Classification::NotMine;
        }
        match split_processor(domain) {
            Some((p, rest)) if rest.is_empty() || rest.starts_with('-') => {
                Classification::Arch(p.to_string())
            }
            _ => Classification::Generic,
        }
    }
}

export_handler!(HotSwap);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_domains_by_grammar() {
        let h = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let c = |p: String| HotSwap::classify(&File::new(&p, 0, b""));
        assert_eq!(
            c(format!(
                "share/rocjitsu/translations/gfx1250-b0-a0/v1/{h}.man"
            )),
            Classification::Arch("gfx1250".into())
        );
        assert_eq!(
            c(format!("share/rocjitsu/translations/gfx942/v1/{h}.obj")),
            Classification::Arch("gfx942".into())
        );
        assert_eq!(
            c(format!("share/rocjitsu/translations/other/v1/{h}.obj")),
            Classification::Generic
        );
        assert_eq!(
            c(format!("share/rocjitsu/translations/gfx942/v2/{h}.obj")),
            Classification::NotMine
        );
        assert_eq!(
            c("share/rocjitsu/translations/gfx942/v1/abc.obj".into()),
            Classification::NotMine
        );
    }
}
