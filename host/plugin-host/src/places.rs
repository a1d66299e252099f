//! Where the standard search path and the cache are: derived from facts
//! about the process (its environment variables, its executable's
//! directory) that the caller gathers once and hands in, so this crate
//! never reads the environment itself.

use std::ffi::OsString;
use std::path::PathBuf;

/// The environment variables the standard places are derived from.
pub const VARS: [&str; 4] = [
    "KPACK_PLUGIN_DIR",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "HOME",
];

/// The process facts behind kpack's standard handler places.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Places {
    /// `$KPACK_PLUGIN_DIR`: a list of directories in the platform's
    /// `PATH` syntax.
    pub plugin_dir: Option<OsString>,
    /// `$XDG_DATA_HOME`.
    pub data_home: Option<OsString>,
    /// `$XDG_CACHE_HOME`.
    pub cache_home: Option<OsString>,
    /// `$HOME`.
    pub home: Option<OsString>,
    /// The directory holding the running executable.
    pub exe_dir: Option<PathBuf>,
}

impl Places {
    /// The places from a variable lookup (the CLI passes
    /// `std::env::var_os`) and the executable's directory. Empty values
    /// count as unset.
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>, exe_dir: Option<PathBuf>) -> Places {
        let get = |name: &str| var(name).filter(|v| !v.is_empty());
        Places {
            plugin_dir: get(VARS[0]),
            data_home: get(VARS[1]),
            cache_home: get(VARS[2]),
            home: get(VARS[3]),
            exe_dir,
        }
    }

    /// Where `kpack plugins add` installs handlers: `$XDG_DATA_HOME/kpack/plugins`
    /// or `~/.local/share/kpack/plugins`.
    pub fn install_dir(&self) -> Option<PathBuf> {
        self.xdg(self.data_home.as_ref(), ".local/share")
            .map(|d| d.join("kpack/plugins"))
    }

    /// The compiled-component cache: `$XDG_CACHE_HOME/kpack` or
    /// `~/.cache/kpack`.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        self.xdg(self.cache_home.as_ref(), ".cache")
            .map(|d| d.join("kpack"))
    }

    /// An XDG base directory: its variable, else `$HOME/<fallback>`.
    fn xdg(&self, var: Option<&OsString>, fallback: &str) -> Option<PathBuf> {
        var.map(PathBuf::from)
            .or_else(|| self.home.as_ref().map(|h| PathBuf::from(h).join(fallback)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(vars: &[(&str, &str)]) -> Places {
        Places::from_vars(
            |k| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| OsString::from(v))
            },
            None,
        )
    }

    #[test]
    fn xdg_variables_win_over_home() {
        let p = places(&[
            ("HOME", "/h"),
            ("XDG_DATA_HOME", "/d"),
            ("XDG_CACHE_HOME", "/c"),
        ]);
        assert_eq!(p.install_dir(), Some(PathBuf::from("/d/kpack/plugins")));
        assert_eq!(p.cache_dir(), Some(PathBuf::from("/c/kpack")));
    }

    #[test]
    fn home_is_the_fallback_and_empty_values_are_unset() {
        let p = places(&[
            ("HOME", "/h"),
            ("XDG_DATA_HOME", ""),
            ("KPACK_PLUGIN_DIR", ""),
        ]);
        assert_eq!(
            p.install_dir(),
            Some(PathBuf::from("/h/.local/share/kpack/plugins"))
        );
        assert_eq!(p.cache_dir(), Some(PathBuf::from("/h/.cache/kpack")));
        assert_eq!(p.plugin_dir, None);
    }

    #[test]
    fn no_home_means_no_install_dir_and_no_cache() {
        let p = places(&[]);
        assert_eq!((p.install_dir(), p.cache_dir()), (None, None));
    }
}
