//! The `zstd-delta` scheme's two primitives and its base choice:
//! zstd frames compressed against a base entry's raw bytes as a
//! raw-content "ref prefix" (what `zstd --patch-from` does), and the greedy
//! rule that picks which targets of a kernel key are bases.
//!
//! C zstd (through `zstd-safe`) is required: ruzstd cannot decode frames
//! that reference a prefix.

use rayon::prelude::*;
use zstd::zstd_safe::{self, CCtx, CParameter};

pub(crate) mod across;
mod error;

pub(crate) use error::Error;
use error::Step;

pub(crate) use crate::frame::MAX_WINDOW_LOG;

/// The window log that lets a frame of `src_len` bytes reach back over the
/// whole of a `prefix_len`-byte prefix (capped at [`MAX_WINDOW_LOG`]).
fn window_log(prefix_len: usize, src_len: usize) -> u32 {
    let total = (prefix_len as u64)
        .saturating_add(src_len as u64)
        .max(1 << 10);
    let log = 64 - (total - 1).leading_zeros();
    log.clamp(10, MAX_WINDOW_LOG)
}

/// Compress `src` as one zstd frame at `level`, against `prefix` when given.
/// Deterministic: fixed parameters, single-threaded context.
pub(crate) fn compress(level: i32, src: &[u8], prefix: Option<&[u8]>) -> Result<Vec<u8>, Error> {
    Frames::new().compress(level, src, prefix)
}

/// One thread's zstd context for [`compress`], reused frame after frame:
/// its tables (with long-distance matching, megabytes) are allocated once
/// instead of page-faulted in afresh for every frame. Every frame starts
/// from a full reset, so it is the frame a fresh context writes.
pub(crate) struct Frames<'m> {
    cctx: CCtx<'m>,
}

impl<'m> Frames<'m> {
    pub(crate) fn new() -> Frames<'m> {
        Frames {
            cctx: CCtx::create(),
        }
    }

    /// [`compress`] with this context.
    pub(crate) fn compress(
        &mut self,
        level: i32,
        src: &[u8],
        prefix: Option<&'m [u8]>,
    ) -> Result<Vec<u8>, Error> {
        self.cctx
            .reset(zstd_safe::ResetDirective::SessionAndParameters)
            .map_err(Error::zstd(Step::Reset))?;
        self.set(CParameter::CompressionLevel(level))?;
        self.set(CParameter::ContentSizeFlag(true))?;
        self.set(CParameter::ChecksumFlag(false))?;
        if let Some(log) = crate::frame::long_window(level).filter(|_| prefix.is_none()) {
            self.set(CParameter::WindowLog(log))?;
        }
        if let Some(prefix) = prefix {
            // Without a window covering the prefix, matches further back than
            // the level's default window (2 MiB at level 3) are never found.
            self.set(CParameter::WindowLog(window_log(prefix.len(), src.len())))?;
            // What `zstd --patch-from` switches on once the window outgrows the
            // level's match finder: without long-distance matching, level 3's
            // 2^17-entry hash table forgets most of a multi-megabyte base, and
            // sibling deltas on JAX's plugin came out 4-150x larger.
            self.set(CParameter::EnableLongDistanceMatching(true))?;
            self.cctx
                .ref_prefix(prefix)
                .map_err(Error::zstd(Step::Prefix))?;
        }
        let mut out = Vec::with_capacity(zstd_safe::compress_bound(src.len()));
        self.cctx
            .compress2(&mut out, src)
            .map_err(Error::zstd(Step::Compress))?;
        Ok(out)
    }

    /// Set one parameter of the next frame.
    fn set(&mut self, param: CParameter) -> Result<(), Error> {
        self.cctx
            .set_parameter(param)
            .map(drop)
            .map_err(Error::zstd(Step::Parameter(param)))
    }
}

/// Decode the single frame `frame` into `out` against `prefix` (the
/// reader's per-thread context).
#[cfg(test)]
pub(crate) fn decompress_with_prefix(
    frame: &[u8],
    prefix: &[u8],
    out: &mut Vec<u8>,
) -> Result<usize, crate::frame::ZstdError> {
    crate::frame::zstd_decode(frame, Some(prefix), out)
}

/// Which entry of one kernel key is stored how: `base[i] == None` for a
/// base, `Some(j)` for a delta against member `j` (itself a base).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) base: Vec<Option<usize>>,
    /// Per member, the delta frame size from which [`encode_key`] also
    /// compresses the member alone and keeps the smaller frame: its frame
    /// alone when the plan measured it, else [`CHECK_SHARE`] of its bytes
    /// (`u64::MAX`: never).
    check_from: Vec<u64>,
}

impl Plan {
    /// Whether member `t`'s real delta frame of `delta_len` bytes may lose
    /// to the member alone, so it is worth compressing alone to compare
    /// (a member stored alone is a base no other member depends on, since
    /// only chosen bases serve deltas).
    pub(crate) fn check_alone(&self, t: usize, delta_len: usize) -> bool {
        self.check_from
            .get(t)
            .is_some_and(|&a| delta_len as u64 >= a)
    }
}

/// How a `zstd-delta` writer chooses each entry's base.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeltaPlan {
    /// From estimates ([`plan`]): what every writer does.
    #[default]
    Estimated,
    /// From every pair compressed at the archive's level
    /// ([`plan_exhaustive`]): n² compressions per key of n targets, kept
    /// for `bench/family.sh` to price the estimate; not for use.
    Exhaustive,
}

/// A delta frame of at least `1 / CHECK_SHARE` of its member's bytes is
/// compared with the member compressed alone ([`Plan::check_alone`]): a
/// good delta is far smaller (code objects compress 10-50x alone here, and
/// a sibling's delta is a fraction of that), so the check costs nothing
/// where the choice was right and catches it where it was not.
const CHECK_SHARE: u64 = 32;

/// What a delta costs beyond the bytes it does not find in its base
/// (larger frame header and window), so a member that shares nothing is
/// estimated cheaper alone.
const DELTA_OVERHEAD: u64 = 32;

/// Bytes per sampled shingle of the similarity sketch: long enough that a
/// shared shingle is a match zstd takes, short enough to survive the
/// scattered register and encoding differences between sibling targets.
const SHINGLE: usize = 16;

/// One position in `1 << SAMPLE_BITS` (chosen by content, so the same
/// bytes are sampled wherever they sit) enters the sketch.
const SAMPLE_BITS: u32 = 5;

/// The gear hash's byte table: 256 fixed pseudo-random words (SplitMix64
/// from seed 0), so sketches are the same on every build and machine.
const GEAR: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut state = 0u64;
    let mut i = 0;
    while i < 256 {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        table[i] = z ^ (z >> 31);
        i += 1;
    }
    table
};

/// How far each byte's gear word moves per step: after [`SHINGLE`] steps
/// it has left the 64-bit hash, so the hash is a function of exactly the
/// last [`SHINGLE`] bytes.
const GEAR_SHIFT: u32 = 64 / SHINGLE as u32;

/// Independent hash chains [`sketch`] runs side by side.
const LANES: usize = 4;

/// Steps of every chain between two flushes of [`sketch`]'s sample buffer.
const BLOCK: usize = 64;

/// A content-defined sample of `data`'s shingles: the sorted, deduplicated
/// gear hashes (`h = (h << 4) + GEAR[byte]`, as zstd's long-distance
/// matcher and content-defined chunkers roll them) of every
/// [`SHINGLE`]-byte window whose top [`SAMPLE_BITS`] bits are zero (the
/// top bits are the ones every byte of the window reaches). Shared sample
/// hashes between two members estimate how much of one zstd finds in the
/// other as a prefix.
///
/// A shift and an add per byte. The windows are cut into [`LANES`] runs,
/// each hashed by a chain of its own (primed with the bytes before its
/// first window, so every window is hashed exactly once, as on its own),
/// and the chains step together, which the CPU runs in parallel; samples
/// are stored without a branch and kept by advancing a count, then
/// deduplicated in a hash set (code repeats itself: most samples of a code
/// object are duplicates, which sorting first would pay for).
fn sketch(data: &[u8]) -> Vec<u64> {
    if data.len() < SHINGLE {
        return Vec::new();
    }
    let roll = |h: u64, b: u8| (h << GEAR_SHIFT).wrapping_add(GEAR[usize::from(b)]);
    let sampled = |h: u64| h >> (64 - SAMPLE_BITS) == 0;
    // Window `w` is data[w..w + SHINGLE]; lane `l` takes windows
    // l*per..(l+1)*per, and the last few (fewer than LANES) go one by one.
    let windows = data.len() - (SHINGLE - 1);
    let per = windows / LANES;
    let prime = |w: usize| {
        data[w..w + SHINGLE - 1]
            .iter()
            .fold(0u64, |h, &b| roll(h, b))
    };
    let mut set: SampleSet = SampleSet::default();
    set.reserve(data.len() >> (SAMPLE_BITS + 3));
    if per > 0 {
        let lanes: [&[u8]; LANES] =
            std::array::from_fn(|l| &data[l * per + SHINGLE - 1..(l + 1) * per + SHINGLE - 1]);
        let mut h: [u64; LANES] = std::array::from_fn(|l| prime(l * per));
        // A buffer and a count per lane: one shared count would chain
        // every lane's store to the previous lane's test.
        let mut buf = [[0u64; BLOCK]; LANES];
        for start in (0..per).step_by(BLOCK) {
            let end = (start + BLOCK).min(per);
            let mut n = [0usize; LANES];
            #[allow(
                clippy::needless_range_loop,
                reason = "one index steps every lane in lockstep"
            )]
            for s in start..end {
                for l in 0..LANES {
                    h[l] = roll(h[l], lanes[l][s]);
                    buf[l][n[l] % BLOCK] = h[l];
                    n[l] += usize::from(sampled(h[l]));
                }
            }
            for l in 0..LANES {
                set.extend(&buf[l][..n[l]]);
            }
        }
    }
    let tail = LANES * per;
    let mut h = prime(tail);
    for &b in &data[tail + SHINGLE - 1..] {
        h = roll(h, b);
        if sampled(h) {
            set.insert(h);
        }
    }
    let mut out: Vec<u64> = set.into_iter().collect();
    out.sort_unstable();
    out
}

/// The distinct samples of one sketch.
type SampleSet = std::collections::HashSet<u64, std::hash::BuildHasherDefault<SampleHasher>>;

/// A sample is already a hash, but a weak one at both ends (its top bits
/// are zero by selection, its low bits come from the last byte alone):
/// one xor-shift and one multiply spread it for the set.
#[derive(Default)]
struct SampleHasher(u64);

impl std::hash::Hasher for SampleHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0 ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ (v >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// `|a ∩ b|` of two sorted, deduplicated sketches.
fn shared(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// Choose bases among `members` (one key's code objects, in TOC order)
/// without compressing every pair (which made a 27-target library's
/// offload several times slower than per-kernel zstd):
///
/// 1. Sketch every member ([`sketch`]) and price it alone at its length
///    (`alone[t]`: siblings of one kernel compress alike, so their raw
///    sizes rank them as their compressed sizes would; a level-1 trial
///    frame of every member cost 0.75 core-seconds on JAX's plugin and
///    changed the archives by 0.07%).
/// 2. Estimate `delta[t][b] = alone[t] × (1 − shared(t, b) / |sketch t|)`
///    `+ DELTA_OVERHEAD`: the part of `t` not found in `b` costs what it
///    costs alone.
/// 3. Pick bases greedily on those estimates ([`choose`]).
///
/// The caller compresses only the final frames, and compares a delta that
/// comes out large with its member alone ([`Plan::check_alone`]).
/// Deterministic at any thread count: sizes and sketches do not depend on
/// scheduling.
pub(crate) fn plan(members: &[&[u8]], spread: Spread) -> Result<Plan, Error> {
    let alone: Vec<u64> = members.iter().map(|m| m.len() as u64).collect();
    plan_priced(members, &alone, spread)
}

/// [`plan`] with each member priced alone at `alone[i]` (its length, or
/// its real frame's size when the caller has one).
pub(crate) fn plan_priced(members: &[&[u8]], alone: &[u64], spread: Spread) -> Result<Plan, Error> {
    let n = members.len();
    if n <= 1 {
        return Ok(Plan {
            base: vec![None; n],
            check_from: vec![u64::MAX; n],
        });
    }
    let sketches: Vec<Vec<u64>> = map_all(spread, n, |_, i| Ok(sketch(members[i])))?;
    let mut delta = vec![vec![u64::MAX; n]; n];
    for t in 0..n {
        let st = &sketches[t];
        for b in (0..n).filter(|&b| b != t) {
            let found = if st.is_empty() {
                0
            } else {
                shared(st, &sketches[b]) as u128 * 1_000_000 / st.len() as u128
            };
            // Fixed-point, so the estimate is exact integer arithmetic.
            let missing = 1_000_000 - found.min(1_000_000);
            delta[t][b] = (u128::from(alone[t]) * missing / 1_000_000) as u64 + DELTA_OVERHEAD;
        }
    }
    Ok(Plan {
        base: choose(alone, &delta),
        check_from: alone.iter().map(|a| a / CHECK_SHARE).collect(),
    })
}

/// Every pair compressed at `level`: the exact sizes [`plan`] estimates,
/// kept to measure the estimate against (tests, and `bench/family.sh`
/// through [`DeltaPlan::Exhaustive`]).
pub(crate) fn plan_exhaustive(
    level: i32,
    members: &[&[u8]],
    spread: Spread,
) -> Result<Plan, Error> {
    let n = members.len();
    let alone: Vec<u64> = map_all(spread, n, |frames, i| {
        frames
            .compress(level, members[i], None)
            .map(|f| f.len() as u64)
            .map_err(|e| e.on(i, None))
    })?;
    let pairs: Vec<(usize, usize)> = (0..n)
        .flat_map(|t| (0..n).filter(move |&b| b != t).map(move |b| (t, b)))
        .collect();
    let sizes: Vec<u64> = map_all(spread, pairs.len(), |frames, i| {
        let (t, b) = pairs[i];
        frames
            .compress(level, members[t], Some(members[b]))
            .map(|f| f.len() as u64)
            .map_err(|e| e.on(t, Some(b)))
    })?;
    let mut delta = vec![vec![u64::MAX; n]; n];
    for (&(t, b), &s) in pairs.iter().zip(&sizes) {
        delta[t][b] = s;
    }
    Ok(Plan {
        base: choose(&alone, &delta),
        check_from: alone,
    })
}

/// How [`encode_key`] spreads one key's members over threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spread {
    /// The current rayon pool (the writer's `finish`).
    Rayon,
    /// This many plain scoped threads, this one included (1: this thread
    /// only). For callers inside a rayon worker that hold memory-budget
    /// reservations: a worker waiting on nested rayon jobs may steal
    /// another bundle's job, which could then wait forever for the memory
    /// its own stack holds; scoped threads never run anything else.
    Threads(usize),
}

/// `f(0..n)`, results in order (the first error by index wins), each
/// thread with a [`Frames`] of its own.
fn map_all<'m, T: Send>(
    spread: Spread,
    n: usize,
    f: impl Fn(&mut Frames<'m>, usize) -> Result<T, Error> + Sync + Send,
) -> Result<Vec<T>, Error> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    match spread {
        Spread::Rayon => (0..n).into_par_iter().map_init(Frames::new, f).collect(),
        Spread::Threads(k) if k <= 1 || n <= 1 => {
            let mut frames = Frames::new();
            (0..n).map(|i| f(&mut frames, i)).collect()
        }
        Spread::Threads(k) => {
            let next = AtomicUsize::new(0);
            let slots: Vec<Mutex<Option<Result<T, Error>>>> =
                (0..n).map(|_| Mutex::new(None)).collect();
            let work = || {
                let mut frames = Frames::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let r = f(&mut frames, i);
                    *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                }
            };
            std::thread::scope(|s| {
                for _ in 1..k.min(n) {
                    s.spawn(work);
                }
                work();
            });
            slots
                .into_iter()
                .map(|m| {
                    m.into_inner()
                        .unwrap_or_else(|p| p.into_inner())
                        .unwrap_or(Err(Error::Worker))
                })
                .collect()
        }
    }
}

/// One kernel key's stored frames: `frames[i]` is member `i`'s zstd frame,
/// `base[i]` the member it is a delta against (`None`: stored alone).
#[derive(Debug)]
pub(crate) struct Encoded {
    pub(crate) frames: Vec<Vec<u8>>,
    pub(crate) base: Vec<Option<usize>>,
}

/// Choose bases among `members` (one key's code objects, in TOC order:
/// sorted by arch) and compress every frame at `level`: the whole of the
/// scheme's per-key work, the same bytes whether the writer runs it at
/// `finish` or a worker runs it as soon as the key's members are in hand.
/// A delta whose frame came out large is compared with its member
/// compressed alone, and the smaller frame is kept ([`Plan::check_alone`]).
pub(crate) fn encode_key(
    level: i32,
    members: &[&[u8]],
    spread: Spread,
    how: DeltaPlan,
) -> Result<Encoded, Error> {
    let plan = match how {
        DeltaPlan::Estimated => plan(members, spread),
        DeltaPlan::Exhaustive => plan_exhaustive(level, members, spread),
    }?;
    encode_planned(level, members, plan, spread)
}

/// [`encode_key`]'s frames for a chosen `plan`.
fn encode_planned(
    level: i32,
    members: &[&[u8]],
    mut plan: Plan,
    spread: Spread,
) -> Result<Encoded, Error> {
    let mut frames = map_all(spread, members.len(), |frames, i| {
        let base = plan.base[i];
        frames
            .compress(level, members[i], base.map(|b| members[b]))
            .map_err(|e| e.on(i, base))
    })?;
    // The plan's sizes are estimates: a delta that came out no smaller
    // than its member alone is stored alone instead.
    for i in 0..members.len() {
        if plan.base[i].is_some() && plan.check_alone(i, frames[i].len()) {
            let alone = compress(level, members[i], None).map_err(|e| e.on(i, None))?;
            if alone.len() <= frames[i].len() {
                frames[i] = alone;
                plan.base[i] = None;
            }
        }
    }
    Ok(Encoded {
        frames,
        base: plan.base,
    })
}

/// Decode one frame of `size` bytes, against `prefix` when it is a delta.
pub(crate) fn decompress(
    frame: &[u8],
    prefix: Option<&[u8]>,
    size: usize,
) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(size);
    let got = crate::frame::zstd_decode(frame, prefix, &mut out).map_err(|source| Error::Zstd {
        step: Step::Decode,
        source,
    })?;
    if got != size {
        return Err(Error::Size {
            got,
            expected: size,
        });
    }
    Ok(out)
}

/// The greedy base choice on measured or estimated sizes:
///
/// 1. The first base is the member `b` that minimises the total when every
///    other member is a delta against `b` (ties: the earlier member).
/// 2. Then repeatedly add as a further base the member whose promotion
///    lowers the total most (a member is cheaper alone than against every
///    chosen base, or it serves others better); stop when nothing lowers it.
/// 3. Every non-base is a delta against its cheapest base (ties: earlier).
///
/// The total for a base set `B` is `Σ_{b∈B} alone[b] + Σ_{t∉B} min_{b∈B}
/// delta[t][b]`.
fn choose(alone: &[u64], delta: &[Vec<u64>]) -> Vec<Option<usize>> {
    let n = alone.len();
    // `cost[t]`: what member `t` costs with the bases chosen so far (alone
    // for a base, its cheapest delta otherwise), kept up to date so that a
    // candidate's total is one pass over the members: O(n²) per promotion,
    // where recomputing every total was O(n³).
    let promoted = |cost: &[u64], bases: &[bool], c: usize| -> u64 {
        (0..n)
            .map(|t| match t {
                _ if t == c => alone[c],
                _ if bases[t] => cost[t],
                _ => cost[t].min(delta[t][c]),
            })
            .fold(0u64, u64::saturating_add)
    };
    let mut bases = vec![false; n];
    let mut cost = vec![u64::MAX; n];
    let mut best = u64::MAX;
    let mut pick = None;
    for c in 0..n {
        let t = promoted(&cost, &bases, c);
        if pick.is_none() || t < best {
            best = t;
            pick = Some(c);
        }
    }
    while let Some(c) = pick {
        bases[c] = true;
        for t in 0..n {
            if t == c {
                cost[t] = alone[c];
            } else if !bases[t] {
                cost[t] = cost[t].min(delta[t][c]);
            }
        }
        pick = None;
        for c in (0..n).filter(|&c| !bases[c]) {
            let t = promoted(&cost, &bases, c);
            if t < best {
                best = t;
                pick = Some(c);
            }
        }
    }
    (0..n)
        .map(|t| {
            if bases[t] {
                None
            } else {
                (0..n)
                    .filter(|&b| bases[b])
                    .min_by_key(|&b| (delta[t][b], b))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::noise as object;

    #[test]
    fn the_laned_sketch_samples_every_window_once() {
        // Each window hashed on its own, from its 16 bytes.
        let naive = |data: &[u8]| -> Vec<u64> {
            let mut out: Vec<u64> = data
                .windows(SHINGLE)
                .map(|w| {
                    w.iter().fold(0u64, |h, &b| {
                        (h << GEAR_SHIFT).wrapping_add(GEAR[usize::from(b)])
                    })
                })
                .filter(|h| h >> (64 - SAMPLE_BITS) == 0)
                .collect();
            out.sort_unstable();
            out.dedup();
            out
        };
        let data = object(5, 20_000);
        for len in [
            0, 15, 16, 17, 18, 19, 20, 31, 32, 33, 270, 271, 272, 273, 1000, 1001, 19_999, 20_000,
        ] {
            assert_eq!(sketch(&data[..len]), naive(&data[..len]), "{len} bytes");
        }
        // About one window in 32 is sampled.
        let n = sketch(&data).len();
        assert!((400..900).contains(&n), "{n}");
    }

    #[test]
    fn a_reused_context_writes_the_frames_a_fresh_one_does() {
        let a = object(1, 300_000);
        let mut b = a.clone();
        b[1000..1100].copy_from_slice(&[3; 100]);
        let c = object(2, 5_000);
        let calls = [
            (3, &b[..], Some(&a[..])),
            (1, &c, None),
            (3, &a, None),
            (19, &c, Some(&b)),
            (3, &b, Some(&a)),
        ];
        let mut frames = Frames::new();
        for (level, src, prefix) in calls {
            assert_eq!(
                frames.compress(level, src, prefix).unwrap(),
                compress(level, src, prefix).unwrap(),
                "level {level}, {} bytes",
                src.len()
            );
        }
    }

    #[test]
    fn a_large_delta_is_stored_alone_when_that_is_smaller() {
        let base = object(1, 50_000);
        let stranger = object(2, 50_000);
        let members: Vec<&[u8]> = vec![&base, &stranger];
        // A plan that got it wrong: the stranger as a delta against base.
        let wrong = |check_from| Plan {
            base: vec![None, Some(0)],
            check_from: vec![u64::MAX, check_from],
        };
        let alone = compress(3, &stranger, None).unwrap();
        let e = encode_planned(3, &members, wrong(0), Spread::Threads(1)).unwrap();
        assert_eq!(e.base, vec![None, None]);
        assert_eq!(e.frames[1], alone);
        // Below the check's size, the delta is kept as planned.
        let e = encode_planned(3, &members, wrong(u64::MAX), Spread::Threads(1)).unwrap();
        assert_eq!(e.base, vec![None, Some(0)]);
        assert!(e.frames[1].len() >= alone.len());
    }

    #[test]
    fn a_delta_decodes_only_with_its_prefix() {
        let base = object(1, 50_000);
        let mut sibling = base.clone();
        sibling[100..140].copy_from_slice(&[7; 40]);
        let frame = compress(3, &sibling, Some(&base)).unwrap();
        assert!(frame.len() < 1000, "{}", frame.len());
        let mut out = Vec::with_capacity(sibling.len());
        decompress_with_prefix(&frame, &base, &mut out).unwrap();
        assert_eq!(out, sibling);
        let mut out = Vec::with_capacity(sibling.len());
        let wrong = object(2, 50_000);
        let decoded = decompress_with_prefix(&frame, &wrong, &mut out);
        assert!(decoded.is_err() || out != sibling);
    }

    #[test]
    fn siblings_share_one_base_and_a_stranger_is_its_own() {
        let a = object(1, 40_000);
        let mut b = a.clone();
        b[10..20].copy_from_slice(&[1; 10]);
        let mut c = a.clone();
        c[30_000..30_010].copy_from_slice(&[2; 10]);
        let stranger = object(9, 40_000);
        let members: Vec<&[u8]> = vec![&a, &b, &c, &stranger];
        let p = plan(&members, Spread::Rayon).unwrap();
        // The three siblings: one base, two deltas against it.
        let sibling_bases: Vec<usize> = (0..3).filter(|&i| p.base[i].is_none()).collect();
        assert_eq!(sibling_bases.len(), 1, "{p:?}");
        for i in (0..3).filter(|i| !sibling_bases.contains(i)) {
            assert_eq!(p.base[i], Some(sibling_bases[0]), "{p:?}");
        }
        for b in p.base.iter().flatten() {
            assert_eq!(p.base[*b], None, "a base is a delta: {p:?}");
        }
    }

    /// The greedy choice as first written, recomputing every total: what
    /// the incremental [`choose`] must agree with.
    fn choose_by_totals(alone: &[u64], delta: &[Vec<u64>]) -> Vec<Option<usize>> {
        let n = alone.len();
        let total = |bases: &[bool]| -> u64 {
            (0..n)
                .map(|t| match bases[t] {
                    true => alone[t],
                    false => (0..n)
                        .filter(|&b| bases[b])
                        .map(|b| delta[t][b])
                        .min()
                        .unwrap_or(u64::MAX),
                })
                .fold(0u64, u64::saturating_add)
        };
        let mut bases = vec![false; n];
        let mut best = u64::MAX;
        let mut pick = Some(0);
        for b in 0..n {
            let mut set = vec![false; n];
            set[b] = true;
            if total(&set) < best {
                best = total(&set);
                pick = Some(b);
            }
        }
        while let Some(c) = pick {
            bases[c] = true;
            pick = None;
            for c in 0..n {
                if bases[c] {
                    continue;
                }
                bases[c] = true;
                let t = total(&bases);
                bases[c] = false;
                if t < best {
                    best = t;
                    pick = Some(c);
                }
            }
        }
        (0..n)
            .map(|t| match bases[t] {
                true => None,
                false => (0..n)
                    .filter(|&b| bases[b])
                    .min_by_key(|&b| (delta[t][b], b)),
            })
            .collect()
    }

    #[test]
    fn the_incremental_choice_is_the_choice_by_totals() {
        for seed in 1..200u8 {
            let n = usize::from(seed % 9) + 1;
            let r = object(u32::from(seed), 2 * n * n + n);
            // Small values, so ties are common.
            let alone: Vec<u64> = (0..n).map(|i| 50 + u64::from(r[i] % 50)).collect();
            let delta: Vec<Vec<u64>> = (0..n)
                .map(|t| {
                    (0..n)
                        .map(|b| match t == b {
                            true => u64::MAX,
                            false => u64::from(r[n + t * n + b] % 80),
                        })
                        .collect()
                })
                .collect();
            assert_eq!(
                choose(&alone, &delta),
                choose_by_totals(&alone, &delta),
                "seed {seed}: {alone:?} {delta:?}"
            );
        }
    }

    /// The bytes every frame of `plan` takes at level 3.
    fn stored(plan: &Plan, members: &[&[u8]]) -> usize {
        (0..members.len())
            .map(|i| {
                compress(3, members[i], plan.base[i].map(|b| members[b]))
                    .unwrap()
                    .len()
            })
            .sum()
    }

    #[test]
    fn sketched_choice_stays_close_to_measuring_every_pair() {
        // A family: siblings edited at different rates (sparse byte edits
        // like different encodings), one rewritten in half, one stranger.
        let a = object(3, 120_000);
        let edit = |every: usize, seed: u8| {
            let mut m = a.clone();
            let noise = object(u32::from(seed), m.len());
            for i in (0..m.len()).step_by(every) {
                m[i] = noise[i];
            }
            m
        };
        let (b, c, d) = (edit(97, 4), edit(13, 5), edit(3, 6));
        let mut half = a.clone();
        half[..60_000].copy_from_slice(&object(7, 60_000));
        let stranger = object(8, 120_000);
        let members: Vec<&[u8]> = vec![&a, &b, &c, &d, &half, &stranger];
        let fast = plan(&members, Spread::Rayon).unwrap();
        let full = plan_exhaustive(3, &members, Spread::Rayon).unwrap();
        let (f, x) = (stored(&fast, &members), stored(&full, &members));
        assert!(
            f * 100 <= x * 105,
            "sketched {f} vs exhaustive {x}: {fast:?} {full:?}"
        );
        // The stranger shares nothing: it is a base of its own.
        assert_eq!(fast.base[5], None, "{fast:?}");
        assert_eq!(
            plan(&members, Spread::Rayon).unwrap(),
            fast,
            "deterministic"
        );
    }
}
