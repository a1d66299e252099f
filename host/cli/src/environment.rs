//! What the CLI takes from its process environment, in one place: the
//! libraries read no environment variable themselves, so every variable
//! that changes what a command does is read here and handed in.

/// Detection options from the environment (the `ROCM_BOOTSTRAP_*`
/// overrides, `KPACK_SYSFS_ROOT`), `sysfs_root` (`--sysfs-root`) first.
pub fn detect_options(sysfs_root: Option<std::path::PathBuf>) -> kpack_detect::Options {
    kpack_detect::Options::from_vars(sysfs_root, |k| std::env::var_os(k))
}

/// Where database handlers are searched and cached: `KPACK_PLUGIN_DIR`,
/// `XDG_DATA_HOME`, `XDG_CACHE_HOME`, `HOME` and the directory of this
/// executable.
#[cfg(feature = "handlers")]
pub fn handler_places() -> kpack_plugin_host::Places {
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(std::path::Path::to_path_buf));
    kpack_plugin_host::Places::from_vars(|k| std::env::var_os(k), exe_dir)
}
