//! A ceiling on inflated bytes held at once, shared by every worker thread.
//!
//! Streaming keeps one code object (or one run of overlapping ones) in
//! memory per worker; the budget makes "per worker" safe on a machine with
//! many cores and a library with large code objects: a worker whose next
//! buffer does not fit waits until others release theirs, and a buffer that
//! could never fit is an error instead of an OOM kill.

use std::sync::{Arc, Condvar, Mutex};

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

/// A zstd decoder, kept between bundles in a [`StreamKit`].
pub type ZstdDecoder = zstd::zstd_safe::DCtx<'static>;

/// What a stream keeps from one bundle to the next
/// ([`MemoryBudget::acquire_kit`]): its zstd decoder, whose window buffer
/// is most of what it holds, or the buffer a whole bundle was inflated
/// into, and a scratch buffer for the caller (empty, its capacity kept).
/// Reusing them spares the page faults and zeroing of fresh memory, which
/// cost as much as the decoding.
#[derive(Default)]
pub struct StreamKit {
    /// The decoder, if the last stream was zstd.
    pub decoder: Option<ZstdDecoder>,
    /// The last bundle inflated whole (its length kept: the bytes stay
    /// initialised for the next one).
    pub inflated: Vec<u8>,
    /// The caller's scratch buffer.
    pub arena: Vec<u8>,
}

/// What a stream uses of a kept [`StreamKit`] (the rest is dropped when
/// the kit is handed over, and not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KitUse {
    /// Neither the decoder nor the whole-bundle buffer (zlib, plain bundles).
    ArenaOnly,
    /// The zstd decoder and its window (a zstd stream).
    Decoder,
    /// The whole-bundle buffer and a decoder context without a streaming
    /// window (a zstd bundle inflated in one call).
    Whole,
}

/// What a zstd context holds at most without a streaming window.
const CONTEXT_ONLY: u64 = 640 << 10;

impl StreamKit {
    /// Drop what `usage` does not use; the bytes the decoder and the
    /// whole-bundle buffer still hold.
    fn keep_for(&mut self, usage: KitUse) -> u64 {
        let context = |d: &ZstdDecoder| d.sizeof() as u64;
        match usage {
            KitUse::ArenaOnly => {
                self.decoder = None;
                self.inflated = Vec::new();
            }
            KitUse::Decoder => self.inflated = Vec::new(),
            KitUse::Whole => {
                if self
                    .decoder
                    .as_ref()
                    .is_some_and(|d| context(d) > CONTEXT_ONLY)
                {
                    self.decoder = None;
                }
            }
        }
        self.decoder.as_ref().map_or(0, context) + self.inflated.capacity() as u64
    }
}

/// A kept kit and what its decoder (with the whole-bundle buffer) and its
/// arena hold, in bytes.
struct Spare {
    kit: StreamKit,
    decoder: u64,
    arena: u64,
}

impl Spare {
    fn bytes(&self) -> u64 {
        self.decoder + self.arena
    }
}

#[derive(Default)]
struct State {
    /// Bytes held by reservations.
    in_flight: u64,
    /// The most bytes ever held at once, spare kits included.
    peak: u64,
    /// Kits kept for reuse.
    spares: Vec<Spare>,
    /// Their bytes together.
    spare_bytes: u64,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("in_flight", &self.in_flight)
            .field("peak", &self.peak)
            .field("spares", &self.spares.len())
            .field("spare_bytes", &self.spare_bytes)
            .finish()
    }
}

impl State {
    /// Whether `bytes` more fit under `limit`, dropping spare kits
    /// (largest first) until they do or none is left.
    fn make_room(&mut self, bytes: u64, limit: u64) -> bool {
        while self.in_flight + self.spare_bytes + bytes > limit {
            if self.take_spare(|_| true, true).is_none() {
                return false;
            }
            // The kit taken is dropped here, freeing its buffers.
        }
        true
    }

    /// Remove the spare that `fits` and is the smallest (or the largest,
    /// with `largest`), and stop counting it.
    fn take_spare(&mut self, fits: impl Fn(&Spare) -> bool, largest: bool) -> Option<Spare> {
        let pick = self
            .spares
            .iter()
            .enumerate()
            .filter(|(_, s)| fits(s))
            .min_by_key(|(_, s)| {
                if largest {
                    u64::MAX - s.bytes()
                } else {
                    s.bytes()
                }
            })
            .map(|(i, _)| i)?;
        let spare = self.spares.swap_remove(pick);
        self.spare_bytes -= spare.bytes();
        Some(spare)
    }

    fn hold(&mut self, bytes: u64) {
        self.in_flight += bytes;
        self.peak = self.peak.max(self.in_flight + self.spare_bytes);
    }
}

#[derive(Debug)]
struct Shared {
    limit: u64,
    state: Mutex<State>,
    freed: Condvar,
}

/// A shared ceiling on in-flight inflated bytes; clones share the ceiling.
///
/// There is no process-wide budget: each job (a command, or a library
/// caller's call) makes its own and passes it down, to the readers that
/// inflate bundles and to every archive set of the job
/// (`kpack_offload::ArchiveSet::set_memory_budget`), so two jobs in one process keep separate ceilings and the
/// parallel readers of one job share one.
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

    /// The ceiling in bytes.
    pub fn limit(&self) -> u64 {
        self.shared.limit
    }

    /// The most bytes ever held at once, spare kits included.(the
    /// test hook for memory bounds).
    pub fn peak(&self) -> u64 {
        self.lock().peak
    }

    /// Bytes held by reservations right now (spare kits not counted).
    pub fn in_flight(&self) -> u64 {
        self.lock().in_flight
    }

    /// Bytes held by spare kits right now.
    pub fn spare_bytes(&self) -> u64 {
        self.lock().spare_bytes
    }

    /// Drop every spare kit.
    pub fn drop_spares(&self) {
        let spares = {
            let mut st = self.lock();
            st.spare_bytes = 0;
            std::mem::take(&mut st.spares)
        };
        drop(spares);
        self.shared.freed.notify_all();
    }

    /// Hold `bytes`, waiting while other holders leave too little room;
    /// `None` when `bytes` exceeds the whole ceiling (it could never fit).
    pub fn acquire(&self, bytes: u64) -> Option<Reservation> {
        if bytes > self.shared.limit {
            return None;
        }
        let mut st = self.lock();
        while !st.make_room(bytes, self.shared.limit) {
            st = self
                .shared
                .freed
                .wait(st)
                .unwrap_or_else(|poison| poison.into_inner());
        }
        st.hold(bytes);
        Some(Reservation {
            budget: self.clone(),
            bytes,
        })
    }

    /// Hold what a stream needs: its decoder's `window` (the bytes a zstd
    /// decoder allocates, or the buffer a bundle is inflated into whole; 0
    /// for none), an `arena` of that many bytes for
    /// the caller, and `other` bytes beside them, as
    /// [`acquire_alone`](Self::acquire_alone) would. When a kit was kept
    /// ([`recycle_kit`](Self::recycle_kit)) it comes with the reservation,
    /// which then counts the larger of its decoder's buffers and `window`
    /// (zstd reuses a buffer that is large enough and replaces one that is
    /// not) and of its arena's capacity and `arena`. Kits are taken
    /// smallest-adequate first, else the largest; one that would not fit
    /// beside the others is dropped and the stream starts afresh (an
    /// empty kit: the caller creates the decoder and sizes the arena).
    pub fn acquire_kit(
        &self,
        usage: KitUse,
        window: u64,
        arena: u64,
        other: u64,
    ) -> (StreamKit, Reservation) {
        {
            let mut st = self.lock();
            let spare = st
                .take_spare(|s| s.decoder >= window && s.arena >= arena, false)
                .or_else(|| st.take_spare(|_| true, true));
            if let Some(mut spare) = spare {
                let kept = spare.kit.keep_for(usage);
                let bytes = kept.max(window) + spare.arena.max(arena) + other;
                if st.make_room(bytes, self.shared.limit) {
                    st.hold(bytes);
                    let reservation = Reservation {
                        budget: self.clone(),
                        bytes,
                    };
                    return (spare.kit, reservation);
                }
            }
        }
        (
            StreamKit::default(),
            self.acquire_alone(window + arena + other),
        )
    }

    /// Keep `kit` for the next [`acquire_kit`](Self::acquire_kit) and
    /// release `reservation`, which held it: the kit goes on holding the
    /// bytes its decoder and arena take (when they are within the
    /// reservation; otherwise it is dropped).
    pub fn recycle_kit(&self, mut kit: StreamKit, mut reservation: Reservation) {
        let reset = kit
            .decoder
            .as_mut()
            .map(|d| d.reset(zstd::zstd_safe::ResetDirective::SessionOnly));
        if matches!(reset, Some(Err(_))) {
            kit.decoder = None;
        }
        let decoder =
            kit.decoder.as_ref().map_or(0, |d| d.sizeof() as u64) + kit.inflated.capacity() as u64;
        kit.arena.clear();
        let spare = Spare {
            arena: kit.arena.capacity() as u64,
            decoder,
            kit,
        };
        if spare.bytes() == 0 || spare.bytes() > reservation.bytes {
            return;
        }
        let mut st = self.lock();
        st.in_flight -= reservation.bytes;
        reservation.bytes = 0;
        st.spare_bytes += spare.bytes();
        st.spares.push(spare);
        drop(st);
        self.shared.freed.notify_all();
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
        loop {
            // Every spare goes: the holder is to be alone.
            let held = st.in_flight;
            st.make_room(0, held);
            if st.in_flight == 0 {
                break;
            }
            st = self
                .shared
                .freed
                .wait(st)
                .unwrap_or_else(|poison| poison.into_inner());
        }
        st.hold(bytes);
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

/// A size a flag cannot take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizeError {
    /// A suffix other than B, K, M, G, T (with or without `B`/`iB`).
    Unit {
        /// The size as given.
        text: String,
        /// Its unit.
        unit: String,
    },
    /// No number before the unit.
    NotANumber(String),
    /// Below one byte or beyond `u64`.
    OutOfRange(String),
}

// By hand, as the crate's `Error`: kpack-bundle keeps its dependencies few.
impl std::fmt::Display for SizeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SizeError::Unit { text, unit } => write!(f, "unknown size unit {unit:?} in {text:?}"),
            SizeError::NotANumber(text) => {
                write!(
                    f,
                    "{text:?} is not a size (for example 512M, 2G or 1048576)"
                )
            }
            SizeError::OutOfRange(text) => write!(f, "size {text:?} is out of range"),
        }
    }
}

impl std::error::Error for SizeError {}

/// Parse a size such as `512M`, `2G`, `1.5GiB` or `1048576` (bytes);
/// suffixes are binary (K = 1024).
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
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
        other => {
            return Err(SizeError::Unit {
                text: text.to_string(),
                unit: other.to_string(),
            });
        }
    };
    let value: f64 = num
        .parse()
        .map_err(|_| SizeError::NotANumber(text.to_string()))?;
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes >= u64::MAX as f64 {
        return Err(SizeError::OutOfRange(text.to_string()));
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

    /// A kit whose decoder has decoded something, so its buffers hold
    /// bytes.
    fn used_kit() -> StreamKit {
        let frame = zstd::bulk::compress(&[7u8; 300_000], 3).unwrap();
        let mut dctx = ZstdDecoder::create();
        // In small pieces, as the pipe reads: a frame decoded whole into
        // a buffer large enough needs no window buffer.
        let mut out = vec![0u8; 16 << 10];
        let mut src = zstd::zstd_safe::InBuffer::around(&frame);
        loop {
            let mut sink = zstd::zstd_safe::OutBuffer::around(&mut out[..]);
            if dctx.decompress_stream(&mut sink, &mut src).unwrap() == 0 {
                return StreamKit {
                    decoder: Some(dctx),
                    ..StreamKit::default()
                };
            }
        }
    }

    #[test]
    fn a_recycled_decoder_is_kept_counted_and_handed_to_the_next_stream() {
        let b = MemoryBudget::new(4 << 20);
        let (kit, r) = b.acquire_kit(KitUse::Decoder, 1 << 20, 0, 100);
        assert!(kit.decoder.is_none());
        assert_eq!(r.bytes(), (1 << 20) + 100);
        b.recycle_kit(used_kit(), r);
        let kept = b.spare_bytes();
        assert!(kept > 300_000, "{kept}");
        assert_eq!(b.in_flight(), 0);
        // The next stream gets it, and holds the larger of its buffers and
        // the window asked for.
        let (kit, r) = b.acquire_kit(KitUse::Decoder, 1000, 0, 100);
        assert!(kit.decoder.is_some());
        assert_eq!(r.bytes(), kept + 100);
        assert_eq!(b.spare_bytes(), 0);
        drop(r);
        assert!(b.peak() <= (1 << 20) + 100 + kept);
    }

    #[test]
    fn spares_are_dropped_to_make_room_and_for_a_holder_alone() {
        let b = MemoryBudget::new(1 << 20);
        let (_, r) = b.acquire_kit(KitUse::Decoder, 600_000, 0, 0);
        b.recycle_kit(used_kit(), r);
        let kept = b.spare_bytes();
        assert!(kept > 0);
        // Room for this only without the spare: it goes, nothing waits.
        let r = b.acquire((1 << 20) - kept / 2).unwrap();
        assert_eq!(b.spare_bytes(), 0);
        assert!(b.peak() <= 1 << 20, "{}", b.peak());
        drop(r);
        let (_, r) = b.acquire_kit(KitUse::Decoder, 600_000, 0, 0);
        b.recycle_kit(used_kit(), r);
        assert!(b.spare_bytes() > 0);
        let r = b.acquire_alone(2 << 20);
        assert_eq!(b.spare_bytes(), 0);
        drop(r);
        let (_, r) = b.acquire_kit(KitUse::Decoder, 600_000, 0, 0);
        b.recycle_kit(used_kit(), r);
        b.drop_spares();
        assert_eq!((b.spare_bytes(), b.in_flight()), (0, 0));
    }

    #[test]
    fn a_kept_arena_comes_back_with_its_capacity_and_is_counted() {
        let b = MemoryBudget::new(1 << 20);
        let (mut kit, r) = b.acquire_kit(KitUse::Decoder, 0, 1000, 10);
        assert_eq!((kit.arena.capacity(), r.bytes()), (0, 1010));
        kit.arena.reserve_exact(1000);
        kit.arena.extend_from_slice(&[1; 700]);
        b.recycle_kit(kit, r);
        let kept = b.spare_bytes();
        assert!(kept >= 1000, "{kept}");
        // Asked for less, the reservation counts the whole arena.
        let (kit, r) = b.acquire_kit(KitUse::Decoder, 0, 500, 10);
        assert!(kit.arena.capacity() >= 1000 && kit.arena.is_empty());
        assert_eq!(r.bytes(), kept + 10);
        b.recycle_kit(kit, r);
        // Asked for more, the reservation counts what was asked.
        let (kit, r) = b.acquire_kit(KitUse::Decoder, 0, 5000, 10);
        assert!(kit.arena.capacity() >= 1000);
        assert_eq!(r.bytes(), 5010);
        drop((kit, r));
        assert_eq!((b.spare_bytes(), b.in_flight()), (0, 0));
    }

    #[test]
    fn a_decoder_larger_than_its_reservation_is_not_kept() {
        let b = MemoryBudget::new(1 << 20);
        let r = b.acquire(1000).unwrap();
        b.recycle_kit(used_kit(), r);
        assert_eq!((b.spare_bytes(), b.in_flight()), (0, 0));
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
