//! A ceiling on inflated bytes held at once, shared by every worker thread.
//!
//! Streaming keeps one code object (or one run of overlapping ones) in
//! memory per worker; the budget makes "per worker" safe on a machine with
//! many cores and a library with large code objects: a worker whose next
//! buffer does not fit waits until others release theirs, and a buffer that
//! could never fit is an error instead of an OOM kill.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

/// The default ceiling of commands that write archives (`offload`,
/// `split`, `wheel split`): 256 MiB, room for two of the largest zstd
/// decoder windows we have seen (LLVM writes single-segment frames whose
/// window is the whole inflated bundle: up to 108 MB in the JAX plugin)
/// plus their code objects, so decompression of one bundle overlaps
/// compression of another's entries.
pub const DEFAULT_MEMORY_LIMIT: u64 = 256 << 20;

/// The default ceiling of commands that only read (`inspect`, `extract`):
/// 128 MiB. Their work per inflated byte is small (the MD5 runs beside the
/// decoder on a second thread anyway), so a second big window would buy
/// little time for a lot of memory.
pub const DEFAULT_READ_MEMORY_LIMIT: u64 = 128 << 20;

/// The ceiling [`MemoryBudget::process`] starts with; set once by the CLI.
static PROCESS_LIMIT: AtomicU64 = AtomicU64::new(DEFAULT_MEMORY_LIMIT);
static PROCESS: OnceLock<MemoryBudget> = OnceLock::new();

#[derive(Debug, Default)]
struct State {
    in_flight: u64,
    peak: u64,
}

#[derive(Debug)]
struct Shared {
    limit: u64,
    state: Mutex<State>,
    freed: Condvar,
}

/// A shared ceiling on in-flight inflated bytes; clones share the ceiling.
#[derive(Debug, Clone)]
pub struct MemoryBudget {
    shared: Arc<Shared>,
}

/// Bytes held against a [`MemoryBudget`]; released on drop.
#[derive(Debug)]
pub struct Reservation {
    budget: MemoryBudget,
    bytes: u64,
}

impl MemoryBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> MemoryBudget {
        MemoryBudget {
            shared: Arc::new(Shared {
                limit,
                state: Mutex::new(State::default()),
                freed: Condvar::new(),
            }),
        }
    }

    /// Set the ceiling of [`process`](Self::process) (`--max-memory`);
    /// only effective before its first use.
    pub fn set_process_limit(limit: u64) {
        PROCESS_LIMIT.store(limit, Ordering::Relaxed);
    }

    /// The budget every reader in this process shares by default, so one
    /// ceiling holds across commands that read several files at once.
    pub fn process() -> &'static MemoryBudget {
        PROCESS.get_or_init(|| MemoryBudget::new(PROCESS_LIMIT.load(Ordering::Relaxed)))
    }

    /// The ceiling in bytes.
    pub fn limit(&self) -> u64 {
        self.shared.limit
    }

    /// The most bytes ever held at once (the test hook for memory bounds).
    pub fn peak(&self) -> u64 {
        self.lock().peak
    }

    /// Bytes held right now.
    pub fn in_flight(&self) -> u64 {
        self.lock().in_flight
    }

    /// Hold `bytes`, waiting while other holders leave too little room;
    /// `None` when `bytes` exceeds the whole ceiling (it could never fit).
    pub fn acquire(&self, bytes: u64) -> Option<Reservation> {
        if bytes > self.shared.limit {
            return None;
        }
        let mut st = self.lock();
        while st.in_flight + bytes > self.shared.limit {
            st = self
                .shared
                .freed
                .wait(st)
                .unwrap_or_else(|poison| poison.into_inner());
        }
        st.in_flight += bytes;
        st.peak = st.peak.max(st.in_flight);
        Some(Reservation {
            budget: self.clone(),
            bytes,
        })
    }

    /// Hold `bytes` even when they exceed the ceiling: if they fit, as
    /// [`acquire`](Self::acquire); if not, wait until nothing else is held
    /// and hold them alone (one oversize holder at a time, everyone else
    /// waits for it).
    pub fn acquire_alone(&self, bytes: u64) -> Reservation {
        if let Some(r) = self.acquire(bytes) {
            return r;
        }
        let mut st = self.lock();
        while st.in_flight > 0 {
            st = self
                .shared
                .freed
                .wait(st)
                .unwrap_or_else(|poison| poison.into_inner());
        }
        st.in_flight = bytes;
        st.peak = st.peak.max(bytes);
        Reservation {
            budget: self.clone(),
            bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere cannot leave the counters inconsistent: every
        // update is a single statement.
        self.shared
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

impl Default for MemoryBudget {
    fn default() -> Self {
        MemoryBudget::new(DEFAULT_MEMORY_LIMIT)
    }
}

impl Reservation {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut st = self.budget.lock();
        st.in_flight -= self.bytes;
        drop(st);
        self.budget.shared.freed.notify_all();
    }
}

/// Parse a size such as `512M`, `2G`, `1.5GiB` or `1048576` (bytes);
/// suffixes are binary (K = 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => return Err(format!("unknown size unit {other:?} in {text:?}")),
    };
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a size (for example 512M, 2G or 1048576)"))?;
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes >= u64::MAX as f64 {
        return Err(format!("size {text:?} is out of range"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_the_peak_and_releases_on_drop() {
        let b = MemoryBudget::new(100);
        let r1 = b.acquire(60).unwrap();
        let r2 = b.acquire(40).unwrap();
        assert_eq!(b.in_flight(), 100);
        drop(r1);
        drop(r2);
        assert_eq!(b.in_flight(), 0);
        assert_eq!(b.peak(), 100);
        assert!(b.acquire(101).is_none());
    }

    #[test]
    fn a_waiting_holder_proceeds_once_room_is_freed() {
        let b = MemoryBudget::new(100);
        let r1 = b.acquire(80).unwrap();
        let b2 = b.clone();
        let t = std::thread::spawn(move || b2.acquire(50).map(|r| r.bytes()));
        drop(r1);
        assert_eq!(t.join().unwrap(), Some(50));
        assert_eq!(b.peak(), 80);
    }

    #[test]
    fn an_oversize_holder_waits_to_be_alone_and_blocks_others() {
        let b = MemoryBudget::new(100);
        let r1 = b.acquire(30).unwrap();
        let b2 = b.clone();
        let t = std::thread::spawn(move || b2.acquire_alone(150).bytes());
        // The oversize holder cannot start while r1 is held.
        std::thread::yield_now();
        assert_eq!(b.in_flight(), 30);
        drop(r1);
        assert_eq!(t.join().unwrap(), 150);
        assert_eq!(b.peak(), 150);
        assert_eq!(b.in_flight(), 0);
    }

    #[test]
    fn parses_sizes_with_binary_suffixes() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("").is_err());
    }
}
