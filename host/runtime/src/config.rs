//! Loader settings from the environment (spec §10.6), read once.

use std::ffi::OsString;
use std::path::PathBuf;

/// Settings a [`Cache`](crate::Cache) is created with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// `ROCM_KPACK_PATH`: archive files that replace the marker's paths
    /// entirely (used verbatim). `None` when unset or empty.
    pub path: Option<Vec<PathBuf>>,
    /// `ROCM_KPACK_PATH_PREFIX`: archive files tried before the marker's
    /// (ignored when `path` is set).
    pub path_prefix: Vec<PathBuf>,
    /// `ROCM_KPACK_DISABLE`: every load fails with `NotImplemented`.
    pub disabled: bool,
    /// `ROCM_KPACK_DEBUG`: print `kpack: …` lines to stderr.
    pub debug: bool,
    /// `ROCM_KPACK_VERIFY` (kpack's own): check every loaded code object
    /// against the sha256 its archive's TOC records, where it records one.
    pub verify: bool,
    /// `ROCM_KPACK_STATS`: print the cache's load statistics to stderr
    /// when it is dropped (`kpack_destroy`).
    pub stats: bool,
}

/// The list separator of `ROCM_KPACK_PATH` and `ROCM_KPACK_PATH_PREFIX`.
pub const PATH_SEPARATOR: char = if cfg!(windows) { ';' } else { ':' };

impl Config {
    /// Read the variables from the process environment.
    pub fn from_env() -> Config {
        Config::from_vars(|name| std::env::var_os(name))
    }

    /// Read the variables through `get` (for tests and embedders).
    pub fn from_vars(get: impl Fn(&str) -> Option<OsString>) -> Config {
        let list = |name: &str| -> Vec<PathBuf> {
            get(name)
                .map(|v| {
                    v.to_string_lossy()
                        .split(PATH_SEPARATOR)
                        .filter(|s| !s.is_empty())
                        .map(PathBuf::from)
                        .collect()
                })
                .unwrap_or_default()
        };
        let path = list("ROCM_KPACK_PATH");
        Config {
            path: if path.is_empty() { None } else { Some(path) },
            path_prefix: list("ROCM_KPACK_PATH_PREFIX"),
            disabled: truthy(get("ROCM_KPACK_DISABLE")),
            debug: truthy(get("ROCM_KPACK_DEBUG")),
            verify: truthy(get("ROCM_KPACK_VERIFY")),
            stats: truthy(get("ROCM_KPACK_STATS")),
        }
    }
}

/// AMD's truthiness: set, non-empty, and not starting with `0` (so
/// `false` and `no` are true; kept for compatibility).
fn truthy(v: Option<OsString>) -> bool {
    v.is_some_and(|v| v.as_encoded_bytes().first().is_some_and(|&b| b != b'0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(vars: &[(&str, &str)]) -> Config {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        Config::from_vars(|n| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.into()))
    }

    #[test]
    fn parses_lists_like_amd() {
        let c = cfg(&[
            ("ROCM_KPACK_PATH", "a::b:"),
            ("ROCM_KPACK_PATH_PREFIX", "p"),
        ]);
        assert_eq!(c.path, Some(vec![PathBuf::from("a"), PathBuf::from("b")]));
        assert_eq!(c.path_prefix, [PathBuf::from("p")]);
        assert_eq!(cfg(&[("ROCM_KPACK_PATH", ":")]).path, None);
    }

    #[test]
    fn truthiness_is_first_char_not_zero() {
        for (v, want) in [
            ("1", true),
            ("false", true),
            ("no", true),
            ("0", false),
            ("0foo", false),
            ("", false),
        ] {
            assert_eq!(cfg(&[("ROCM_KPACK_DISABLE", v)]).disabled, want, "{v:?}");
            assert_eq!(cfg(&[("ROCM_KPACK_DEBUG", v)]).debug, want, "{v:?}");
        }
        assert!(!cfg(&[]).disabled);
    }
}
