//! Names of the temp files and staging directories every kpack command
//! creates beside its outputs: `.kpack-tmp-<pid>-<what>-<random>`.
//!
//! The process id is in the name so that a later run (and `kpack verify`)
//! can tell a temp file left by a process that died (`kill -9`, power loss)
//! from one that a concurrent run is still writing, and remove or flag only
//! the stale ones.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Every kpack temp file or staging directory name starts with this.
pub const TEMP_PREFIX: &str = ".kpack-tmp-";

/// The name prefix for a temp file or staging directory of this process:
/// `.kpack-tmp-<pid>-<what>-` (`tempfile` appends random characters).
pub fn temp_prefix(what: &str) -> String {
    format!("{TEMP_PREFIX}{}-{what}-", std::process::id())
}

/// A new temp file in `dir` named for this process and `what`
/// (`.kpack-tmp-<pid>-<what>-<random>`), deleted when dropped unless
/// persisted.
///
/// The file is created `0666 & !umask`, the mode of any other new file, so
/// an output renamed from it is readable as every other output is (a temp
/// file's usual `0600` would make archives installed by root unreadable to
/// everyone else). [`private_temp_file_in`] keeps `0600`.
pub fn temp_file_in(dir: &Path, what: &str) -> std::io::Result<tempfile::NamedTempFile> {
    let prefix = temp_prefix(what);
    let mut b = tempfile::Builder::new();
    b.prefix(&prefix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(std::fs::Permissions::from_mode(0o666));
    }
    b.tempfile_in(dir)
}

/// [`temp_file_in`] for a file only its owner may read (`0600`): keys and
/// caches.
pub fn private_temp_file_in(dir: &Path, what: &str) -> std::io::Result<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .prefix(&temp_prefix(what))
        .tempfile_in(dir)
}

/// A new staging directory in `dir` named like [`temp_file_in`]'s files,
/// removed with its contents when dropped.
pub fn temp_dir_in(dir: &Path, what: &str) -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&temp_prefix(what))
        .tempdir_in(dir)
}

/// The process id in a kpack temp name, or `None` for any other name.
pub fn temp_owner(name: &OsStr) -> Option<u32> {
    let rest = name.to_str()?.strip_prefix(TEMP_PREFIX)?;
    rest.split('-').next()?.parse().ok()
}

/// `true` when `name` is a kpack temp name whose process is gone. Only
/// decided where `/proc` shows processes (Linux); elsewhere nothing is stale,
/// so a live run's files are never taken for stale ones.
pub fn is_stale_temp(name: &OsStr) -> bool {
    let Some(pid) = temp_owner(name) else {
        return false;
    };
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return false;
    }
    pid != std::process::id() && !proc.join(pid.to_string()).exists()
}

/// Stale kpack temp files and directories directly in `dir`, sorted.
/// An unreadable `dir` has none.
pub fn stale_temps(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| is_stale_temp(&e.file_name()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_names_of_dead_and_live_processes() {
        let own = temp_prefix("x");
        assert_eq!(temp_owner(OsStr::new(&own)), Some(std::process::id()));
        assert!(!is_stale_temp(OsStr::new(&format!("{own}abc"))));
        assert_eq!(temp_owner(OsStr::new(".kpack-abc.tmp")), None);
        // pid_max is at most 2^22 on Linux, so this process cannot exist.
        assert!(is_stale_temp(OsStr::new(".kpack-tmp-99999999-archive-abc")));
    }

    #[test]
    fn removes_only_stale_temps() {
        let dir = tempfile::tempdir().unwrap();
        let stale = dir.path().join(".kpack-tmp-99999999-split-abc");
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("f"), b"x").unwrap();
        let live = dir.path().join(format!("{}abc", temp_prefix("x")));
        std::fs::write(&live, b"x").unwrap();
        let other = dir.path().join("keep.kpack");
        std::fs::write(&other, b"x").unwrap();
        assert_eq!(crate::remove_stale_temps(dir.path()), vec![stale.clone()]);
        assert!(!stale.exists() && live.exists() && other.exists());
    }

    #[test]
    fn temp_files_and_dirs_carry_the_process_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let f = temp_file_in(dir.path(), "host").unwrap();
        let d = temp_dir_in(dir.path(), "split").unwrap();
        for (p, what) in [(f.path(), "host"), (d.path(), "split")] {
            let name = p.file_name().unwrap();
            assert_eq!(temp_owner(name), Some(std::process::id()));
            let prefix = temp_prefix(what);
            assert!(name.to_str().unwrap().starts_with(&prefix), "{name:?}");
        }
    }
}
