//! Temp files removed when the process is interrupted (SIGINT, SIGTERM):
//! a writer registers each temp it creates while it streams into it, and
//! the binary's signal handler calls [`remove_registered`] before it dies.
//! A temp that outlives an interrupted run is otherwise removed only by
//! the next run in that directory ([`crate::remove_stale_temps`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The temps registered now, by registration number.
static LIVE: Mutex<BTreeMap<u64, PathBuf>> = Mutex::new(BTreeMap::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

/// A registration made by [`remove_on_interrupt`]; dropping it forgets
/// the path (the writer renamed or removed the temp itself).
#[derive(Debug)]
#[must_use = "the path is forgotten when this is dropped"]
pub struct Registered(u64);

impl Drop for Registered {
    fn drop(&mut self) {
        if let Ok(mut live) = LIVE.lock() {
            live.remove(&self.0);
        }
    }
}

/// Have `path` (a temp file or directory) removed by
/// [`remove_registered`] until the returned registration is dropped.
pub fn remove_on_interrupt(path: &Path) -> Registered {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut live) = LIVE.lock() {
        live.insert(id, path.to_path_buf());
    }
    Registered(id)
}

/// Remove every registered temp (files and directories), for a signal
/// handler about to end the process; returns the paths removed.
pub fn remove_registered() -> Vec<PathBuf> {
    let paths: Vec<PathBuf> = match LIVE.lock() {
        Ok(mut live) => std::mem::take(&mut *live).into_values().collect(),
        Err(_) => return Vec::new(),
    };
    paths
        .into_iter()
        .filter(|p| {
            let removed = match std::fs::symlink_metadata(p) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
                Ok(_) => std::fs::remove_file(p),
                Err(e) => Err(e),
            };
            removed.is_ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_registered_temps_and_forgets_dropped_ones() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::write(&a, b"a").unwrap();
        std::fs::create_dir(&b).unwrap();
        std::fs::write(b.join("x"), b"x").unwrap();
        let kept = d.path().join("kept");
        std::fs::write(&kept, b"k").unwrap();
        let _ra = remove_on_interrupt(&a);
        let _rb = remove_on_interrupt(&b);
        drop(remove_on_interrupt(&kept));
        let removed = remove_registered();
        assert!(removed.contains(&a) && removed.contains(&b), "{removed:?}");
        assert!(!a.exists() && !b.exists() && kept.exists());
    }
}
