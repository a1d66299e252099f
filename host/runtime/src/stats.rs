//! Load statistics (`ROCM_KPACK_STATS=1`): what a cache opened, read and
//! decoded, and the time its loads took, counted with relaxed atomics on
//! every load and printed once, when the cache is dropped
//! (`kpack_destroy`). The figures a reviewer of a loader asks for: does
//! loading from archives cost start-up time, and where.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The counters of one cache.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    archives_opened: AtomicU64,
    bytes_mapped: AtomicU64,
    loads: AtomicU64,
    failed_loads: AtomicU64,
    resolutions: AtomicU64,
    memo_hits: AtomicU64,
    frames_decoded: AtomicU64,
    bases_decoded: AtomicU64,
    base_hits: AtomicU64,
    bytes_read: AtomicU64,
    bytes_inflated: AtomicU64,
    load_nanos: AtomicU64,
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Stats {
    pub(crate) fn archive_opened(&self, bytes: u64) {
        add(&self.archives_opened, 1);
        add(&self.bytes_mapped, bytes);
    }

    /// A resolution: fresh (`memo == false`) or served from the memo.
    pub(crate) fn resolved(&self, memo: bool) {
        add(
            if memo {
                &self.memo_hits
            } else {
                &self.resolutions
            },
            1,
        );
    }

    /// A delta's base: decoded now, or served from the base memo.
    pub(crate) fn base(&self, decoded: bool) {
        add(
            if decoded {
                &self.bases_decoded
            } else {
                &self.base_hits
            },
            1,
        );
    }

    /// One load done: `read` stored bytes of its archive, `inflated` bytes
    /// decoded from a frame (0 for a stored entry), in `took`.
    pub(crate) fn loaded(&self, ok: Option<(u64, u64)>, took: Duration) {
        add(&self.loads, 1);
        add(
            &self.load_nanos,
            u64::try_from(took.as_nanos()).unwrap_or(u64::MAX),
        );
        match ok {
            None => add(&self.failed_loads, 1),
            Some((read, inflated)) => {
                add(&self.bytes_read, read);
                if inflated > 0 {
                    add(&self.frames_decoded, 1);
                    add(&self.bytes_inflated, inflated);
                }
            }
        }
    }

    /// The counters now.
    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StatsSnapshot {
            archives_opened: get(&self.archives_opened),
            bytes_mapped: get(&self.bytes_mapped),
            loads: get(&self.loads),
            failed_loads: get(&self.failed_loads),
            resolutions: get(&self.resolutions),
            memo_hits: get(&self.memo_hits),
            frames_decoded: get(&self.frames_decoded),
            bases_decoded: get(&self.bases_decoded),
            base_hits: get(&self.base_hits),
            bytes_read: get(&self.bytes_read),
            bytes_inflated: get(&self.bytes_inflated),
            load_time: Duration::from_nanos(get(&self.load_nanos)),
        }
    }
}

/// What a cache did so far ([`crate::Cache::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Archives opened (each once; later loads reuse the open one).
    pub archives_opened: u64,
    /// Bytes of those archives mapped.
    pub bytes_mapped: u64,
    /// Loads asked for (`kpack_load_code_object`), failed ones included.
    pub loads: u64,
    /// Loads that failed.
    pub failed_loads: u64,
    /// Fresh resolutions (search paths tried, archives opened).
    pub resolutions: u64,
    /// Loads whose resolution came from the memo (the same binary, search
    /// paths and arch list as an earlier load).
    pub memo_hits: u64,
    /// zstd frames decoded for the code objects handed out.
    pub frames_decoded: u64,
    /// Delta bases decoded (`zstd-delta` archives).
    pub bases_decoded: u64,
    /// Delta bases served from the base memo.
    pub base_hits: u64,
    /// Stored bytes read from archives for the code objects handed out.
    pub bytes_read: u64,
    /// Bytes inflated from zstd frames for them.
    pub bytes_inflated: u64,
    /// Time spent in loads, resolution and decoding included.
    pub load_time: Duration,
}

impl std::fmt::Display for StatsSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kpack stats: {} archives opened ({} bytes mapped); {} loads ({} failed), \
             {} resolutions, {} from the memo; {} frames decoded, {} bytes read, \
             {} bytes inflated; {} delta bases decoded, {} from the memo; {:.3} ms in loads",
            self.archives_opened,
            self.bytes_mapped,
            self.loads,
            self.failed_loads,
            self.resolutions,
            self.memo_hits,
            self.frames_decoded,
            self.bytes_read,
            self.bytes_inflated,
            self.bases_decoded,
            self.base_hits,
            self.load_time.as_secs_f64() * 1e3
        )
    }
}
