//! Memoised `zstd-delta` bases: a delta load decodes its base frame and
//! then the delta; keeping recently used decoded bases makes a warm delta
//! load one frame decode, like a `zstd-per-kernel` load.
//!
//! Bounded by bytes ([`MAX_BYTES`] of decoded bases in total; a base larger
//! than a quarter of that is never kept), evicting the least recently used.
//! Keyed by (archive path, base ordinal): the [`Cache`](crate::Cache) holds
//! each archive open for its own lifetime, so a path names one archive.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Decoded bases kept per cache, in bytes.
pub(crate) const MAX_BYTES: usize = 64 << 20;

/// (archive path, base ordinal).
type Key = (PathBuf, u64);
/// Decoded bytes and the tick of their last use.
type Slot = (Arc<Vec<u8>>, u64);

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<Key, Slot>,
    bytes: usize,
    tick: u64,
}

/// A bounded LRU of decoded base code objects.
#[derive(Debug, Default)]
pub(crate) struct Bases {
    inner: Mutex<Inner>,
}

impl Bases {
    /// The decoded base `ordinal` of `archive`, if kept (and marks it used).
    pub(crate) fn get(&self, archive: &Path, ordinal: u64) -> Option<Arc<Vec<u8>>> {
        let mut g = self.inner.lock().ok()?;
        g.tick += 1;
        let tick = g.tick;
        let slot = g.entries.get_mut(&(archive.to_path_buf(), ordinal))?;
        slot.1 = tick;
        Some(Arc::clone(&slot.0))
    }

    /// Keep `bytes` as base `ordinal` of `archive`, evicting the least
    /// recently used bases beyond [`MAX_BYTES`].
    pub(crate) fn insert(&self, archive: &Path, ordinal: u64, bytes: Arc<Vec<u8>>) {
        if bytes.len() > MAX_BYTES / 4 {
            return;
        }
        let Ok(mut g) = self.inner.lock() else {
            return;
        };
        g.tick += 1;
        let tick = g.tick;
        let len = bytes.len();
        if let Some(old) = g
            .entries
            .insert((archive.to_path_buf(), ordinal), (bytes, tick))
        {
            g.bytes -= old.0.len();
        }
        g.bytes += len;
        while g.bytes > MAX_BYTES {
            let Some(oldest) = g
                .entries
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((b, _)) = g.entries.remove(&oldest) {
                g.bytes -= b.len();
            }
        }
    }

    /// Bytes of decoded bases held.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.inner.lock().map(|g| g.bytes).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_at_most_max_bytes_evicting_the_least_recently_used() {
        let b = Bases::default();
        let chunk = MAX_BYTES / 4;
        let p = Path::new("a.kpack");
        for i in 0..4 {
            b.insert(p, i, Arc::new(vec![0; chunk]));
        }
        assert_eq!(b.held(), MAX_BYTES);
        assert!(b.get(p, 0).is_some()); // 0 is now the most recent
        b.insert(p, 4, Arc::new(vec![0; chunk]));
        assert_eq!(b.held(), MAX_BYTES);
        assert!(b.get(p, 1).is_none(), "1 was least recently used");
        assert!(b.get(p, 0).is_some());
        assert!(b.get(p, 4).is_some());
        // Too large to keep at all.
        b.insert(p, 9, Arc::new(vec![0; chunk + 1]));
        assert!(b.get(p, 9).is_none());
    }
}
