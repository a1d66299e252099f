//! sha256 of two messages at once, for the writer's uncompressed path.
//!
//! SHA-NI's rounds form one dependent chain per message, and a core
//! hashing one message leaves some of its SHA unit's throughput unused
//! waiting on them. Two independent messages hashed in the same
//! instruction stream fill those gaps: measured from the cache on this
//! project's development machine (a Xeon with SHA-NI), 2.3 GB per
//! CPU-second against 1.85 for one message (this module's or `sha2`'s);
//! four at once gain nothing more. This module keeps its own state for
//! that ([`Sha256`], streaming like `sha2::Sha256`) and [`update2`] feeds
//! two of them at once.
//!
//! The `unsafe` is the x86-64 intrinsics, reached only after the CPU was
//! seen to have SHA-NI, SSSE3 and SSE4.1 at run time; without them (or on
//! another architecture) every call goes to the `sha2` crate, one message
//! after the other. Either way the digests are sha256's (tested against
//! `sha2` on random lengths and splits).
#![allow(
    unsafe_code,
    reason = "SHA-NI intrinsics for two-message sha256, behind run-time CPU detection; confined to this module"
)]

use sha2::Digest;

/// A sha256 in progress. Fed alone with [`update`](Self::update), or two
/// at a time with [`update2`]; the digest does not depend on how the
/// message was split.
#[derive(Clone)]
pub(crate) struct Sha256(Engine);

#[derive(Clone)]
enum Engine {
    /// This module's SHA-NI code.
    #[cfg(target_arch = "x86_64")]
    Ni(Lane),
    /// The `sha2` crate's.
    Portable(sha2::Sha256),
}

/// The state of one message hashed with SHA-NI: the eight words, the bytes
/// of an incomplete block and the message length so far.
#[derive(Clone)]
#[cfg(target_arch = "x86_64")]
struct Lane {
    state: [u32; 8],
    tail: [u8; 64],
    tail_len: usize,
    len: u64,
}

/// sha256's initial state (FIPS 180-4, 5.3.3).
#[cfg(target_arch = "x86_64")]
const H0: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

impl Sha256 {
    /// A new hash: SHA-NI when this CPU has it, else the `sha2` crate.
    pub(crate) fn new() -> Sha256 {
        #[cfg(target_arch = "x86_64")]
        if ni::available() {
            return Sha256(Engine::Ni(Lane {
                state: H0,
                tail: [0; 64],
                tail_len: 0,
                len: 0,
            }));
        }
        Sha256(Engine::Portable(sha2::Sha256::new()))
    }

    /// Hash `data` next.
    #[cfg(test)]
    pub(crate) fn update(&mut self, data: &[u8]) {
        update2(
            self,
            data,
            &mut Sha256(Engine::Portable(sha2::Sha256::new())),
            &[],
        );
    }

    /// The digest of everything fed.
    pub(crate) fn finalize(self) -> [u8; 32] {
        match self.0 {
            #[cfg(target_arch = "x86_64")]
            Engine::Ni(lane) => lane.finalize(),
            Engine::Portable(h) => h.finalize().into(),
        }
    }
}

/// Feed `da` to `a` and `db` to `b`: with SHA-NI, the blocks the two have
/// in common are hashed interleaved, the rest one message at a time.
pub(crate) fn update2(a: &mut Sha256, da: &[u8], b: &mut Sha256, db: &[u8]) {
    match (&mut a.0, &mut b.0) {
        #[cfg(target_arch = "x86_64")]
        (Engine::Ni(la), Engine::Ni(lb)) => {
            let da = la.fill_tail(da);
            let db = lb.fill_tail(db);
            // A lane whose tail is still partial took all of its data.
            let both = (da.len() / 64).min(db.len() / 64) * 64;
            // SAFETY: both lanes are `Ni`, made only once `ni::available()`
            // found every feature `ni::compress2` is compiled for.
            unsafe { ni::compress2(&mut la.state, &da[..both], &mut lb.state, &db[..both]) };
            la.blocks_then_tail(&da[both..]);
            lb.blocks_then_tail(&db[both..]);
        }
        (a, b) => {
            for (h, d) in [(a, da), (b, db)] {
                match h {
                    #[cfg(target_arch = "x86_64")]
                    Engine::Ni(lane) => {
                        let d = lane.fill_tail(d);
                        lane.blocks_then_tail(d);
                    }
                    Engine::Portable(h) => h.update(d),
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Lane {
    /// Count `data` and complete the pending partial block from it (hashing
    /// it once full); returns what is left of `data`.
    fn fill_tail<'d>(&mut self, data: &'d [u8]) -> &'d [u8] {
        self.len = self.len.wrapping_add(data.len() as u64);
        if self.tail_len == 0 {
            return data;
        }
        let take = (64 - self.tail_len).min(data.len());
        self.tail[self.tail_len..self.tail_len + take].copy_from_slice(&data[..take]);
        self.tail_len += take;
        if self.tail_len == 64 {
            self.compress(&self.tail.clone());
            self.tail_len = 0;
        }
        &data[take..]
    }

    /// Hash the whole blocks of `data` (its length already counted, no
    /// partial block pending) and keep the rest as the partial block.
    fn blocks_then_tail(&mut self, data: &[u8]) {
        if data.is_empty() {
            // Nothing left: a partial block stays as it is.
            return;
        }
        let whole = data.len() / 64 * 64;
        self.compress(&data[..whole]);
        let rest = &data[whole..];
        self.tail[..rest.len()].copy_from_slice(rest);
        self.tail_len = rest.len();
    }

    /// Hash `blocks` (a multiple of 64 bytes) alone.
    fn compress(&mut self, blocks: &[u8]) {
        // SAFETY: a `Lane` exists only once `ni::available()` found every
        // feature `ni::compress1` is compiled for.
        unsafe { ni::compress1(&mut self.state, blocks) };
    }

    /// Pad (0x80, zeros, the bit length big-endian) and return the digest.
    fn finalize(mut self) -> [u8; 32] {
        let bits = self.len.wrapping_mul(8);
        let mut last = [0u8; 128];
        last[..self.tail_len].copy_from_slice(&self.tail[..self.tail_len]);
        last[self.tail_len] = 0x80;
        let n = if self.tail_len < 56 { 64 } else { 128 };
        last[n - 8..n].copy_from_slice(&bits.to_be_bytes());
        self.compress(&last[..n]);
        let mut out = [0u8; 32];
        for (o, w) in out.chunks_exact_mut(4).zip(self.state) {
            o.copy_from_slice(&w.to_be_bytes());
        }
        out
    }
}

/// The SHA-NI block function, for one message or two interleaved.
#[cfg(target_arch = "x86_64")]
mod ni {
    use std::arch::x86_64::*;

    /// Whether this CPU runs [`compress1`] and [`compress2`].
    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("sha")
            && std::arch::is_x86_feature_detected!("ssse3")
            && std::arch::is_x86_feature_detected!("sse4.1")
    }

    /// sha256's round constants (FIPS 180-4, 4.2.2).
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];

    /// Hash the 64-byte blocks of `data` into `state`.
    ///
    /// # Safety
    /// The CPU has SHA, SSSE3 and SSE4.1 ([`available`]).
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    pub(super) unsafe fn compress1(state: &mut [u32; 8], data: &[u8]) {
        let mut s = [load(state)];
        for block in data.chunks_exact(64) {
            blocks(&mut s, [block]);
        }
        store(s[0], state);
    }

    /// Hash the 64-byte blocks of `da` into `sa` and those of `db` (as
    /// many) into `sb`, the two messages' rounds interleaved.
    ///
    /// # Safety
    /// The CPU has SHA, SSSE3 and SSE4.1 ([`available`]).
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    pub(super) unsafe fn compress2(sa: &mut [u32; 8], da: &[u8], sb: &mut [u32; 8], db: &[u8]) {
        let mut s = [load(sa), load(sb)];
        for (a, b) in da.chunks_exact(64).zip(db.chunks_exact(64)) {
            blocks(&mut s, [a, b]);
        }
        store(s[0], sa);
        store(s[1], sb);
    }

    /// The state as SHA-NI holds it: (ABEF, CDGH), `a` in the top lane.
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    fn load(s: &[u32; 8]) -> (__m128i, __m128i) {
        let w = |i: usize| s[i] as i32;
        (
            _mm_set_epi32(w(0), w(1), w(4), w(5)),
            _mm_set_epi32(w(2), w(3), w(6), w(7)),
        )
    }

    /// [`load`]'s inverse.
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    fn store((abef, cdgh): (__m128i, __m128i), s: &mut [u32; 8]) {
        let lanes = |v: __m128i| {
            let mut out = [0u32; 4];
            // SAFETY: `out` is 16 writable bytes; storeu needs no alignment.
            unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), v) };
            out
        };
        let [f, e, b, a] = lanes(abef);
        let [h, g, d, c] = lanes(cdgh);
        *s = [a, b, c, d, e, f, g, h];
    }

    /// One 64-byte block of each of `L` messages (`L` states, one block
    /// each), their rounds interleaved four at a time.
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    #[inline]
    fn blocks<const L: usize>(s: &mut [(__m128i, __m128i); L], block: [&[u8]; L]) {
        // Big-endian words: reverse the bytes of each 32-bit lane.
        let swap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
        let saved = *s;
        // w[l][i % 4]: message words 4i..4i+4 of lane l, word 4i lowest.
        let mut w = [[_mm_setzero_si128(); 4]; L];
        for (wl, bl) in w.iter_mut().zip(block) {
            for (j, wj) in wl.iter_mut().enumerate() {
                // SAFETY: `bl` is 64 bytes (chunks_exact), so 16 bytes at
                // 16 * j (j < 4) are in it; loadu needs no alignment.
                *wj = _mm_shuffle_epi8(
                    unsafe { _mm_loadu_si128(bl.as_ptr().add(16 * j).cast()) },
                    swap,
                );
            }
        }
        macro_rules! group {
            ($i:literal) => {
                // SAFETY: K has 64 words, 4 * $i + 4 <= 64.
                let k = unsafe { _mm_loadu_si128(K.as_ptr().add(4 * $i).cast()) };
                for l in 0..L {
                    let wl = &mut w[l];
                    if $i >= 4 {
                        // W[t] = σ1(W[t-2]) + W[t-7] + σ0(W[t-15]) + W[t-16],
                        // four at a time from the previous four groups.
                        let (w0, w1, w2, w3) = (
                            wl[$i % 4],
                            wl[($i + 1) % 4],
                            wl[($i + 2) % 4],
                            wl[($i + 3) % 4],
                        );
                        let t =
                            _mm_add_epi32(_mm_sha256msg1_epu32(w0, w1), _mm_alignr_epi8(w3, w2, 4));
                        wl[$i % 4] = _mm_sha256msg2_epu32(t, w3);
                    }
                    let m = _mm_add_epi32(wl[$i % 4], k);
                    let (abef, cdgh) = &mut s[l];
                    // Two rounds each: the new ABEF lands in `cdgh`, and the
                    // old ABEF is the new CDGH; the second call swaps back.
                    *cdgh = _mm_sha256rnds2_epu32(*cdgh, *abef, m);
                    *abef = _mm_sha256rnds2_epu32(*abef, *cdgh, _mm_shuffle_epi32(m, 0x0E));
                }
            };
        }
        group!(0);
        group!(1);
        group!(2);
        group!(3);
        group!(4);
        group!(5);
        group!(6);
        group!(7);
        group!(8);
        group!(9);
        group!(10);
        group!(11);
        group!(12);
        group!(13);
        group!(14);
        group!(15);
        for (st, sv) in s.iter_mut().zip(saved) {
            st.0 = _mm_add_epi32(st.0, sv.0);
            st.1 = _mm_add_epi32(st.1, sv.1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sha2`'s digest of `data`: the oracle.
    fn oracle(data: &[u8]) -> [u8; 32] {
        sha2::Sha256::digest(data).into()
    }

    /// Deterministic pseudo-random bytes (xorshift), `seed` picking them.
    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn one_message_matches_sha2_at_every_padding_boundary() {
        for n in [
            0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 4096, 100_003,
        ] {
            let data = bytes(n as u64 + 7, n);
            let mut h = Sha256::new();
            h.update(&data);
            assert_eq!(h.finalize(), oracle(&data), "length {n}");
        }
    }

    #[test]
    fn two_messages_fed_together_match_sha2_whatever_the_split() {
        let mut seed = 1u64;
        let mut next = |m: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % m
        };
        let lens = [0, 55, 56, 63, 64, 65, 200, 4095, 70_000, 1 << 20];
        for (i, &na) in lens.iter().enumerate() {
            for &nb in &lens[i..] {
                let (da, db) = (bytes(na as u64 + 11, na), bytes(nb as u64 + 3, nb));
                let (mut a, mut b) = (Sha256::new(), Sha256::new());
                let (mut ra, mut rb) = (&da[..], &db[..]);
                while !ra.is_empty() || !rb.is_empty() {
                    // Pieces of random sizes, often equal, often block-sized.
                    let step = [1, 63, 64, 65, 128, 4096, 65_536][next(7)];
                    let ta = step.min(ra.len());
                    let tb = if next(2) == 0 { ta } else { next(step + 1) }.min(rb.len());
                    update2(&mut a, &ra[..ta], &mut b, &rb[..tb]);
                    ra = &ra[ta..];
                    rb = &rb[tb..];
                }
                assert_eq!(a.finalize(), oracle(&da), "a: {na} bytes beside {nb}");
                assert_eq!(b.finalize(), oracle(&db), "b: {nb} bytes beside {na}");
            }
        }
    }

    #[test]
    fn random_lengths_in_random_pieces_match_sha2() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % m as u64) as usize
        };
        for round in 0..300 {
            let (na, nb) = (next(3000), next(3000));
            let (da, db) = (bytes(round * 2 + 1, na), bytes(round * 2 + 2, nb));
            let (mut a, mut b) = (Sha256::new(), Sha256::new());
            let (mut ra, mut rb) = (&da[..], &db[..]);
            while !ra.is_empty() || !rb.is_empty() {
                let ta = next(300).min(ra.len());
                let tb = next(300).min(rb.len());
                update2(&mut a, &ra[..ta], &mut b, &rb[..tb]);
                ra = &ra[ta..];
                rb = &rb[tb..];
            }
            assert_eq!(a.finalize(), oracle(&da), "round {round}: {na} bytes");
            assert_eq!(b.finalize(), oracle(&db), "round {round}: {nb} bytes");
        }
    }

    #[test]
    fn the_portable_engine_and_a_mix_of_engines_match_sha2() {
        let (da, db) = (bytes(5, 3000), bytes(9, 5000));
        let (mut a, mut b) = (Sha256(Engine::Portable(sha2::Sha256::new())), Sha256::new());
        update2(&mut a, &da[..1000], &mut b, &db[..1000]);
        update2(&mut a, &da[1000..], &mut b, &db[1000..]);
        assert_eq!(a.finalize(), oracle(&da));
        assert_eq!(b.finalize(), oracle(&db));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn sha_ni_is_used_where_the_cpu_has_it() {
        let h = Sha256::new();
        assert_eq!(matches!(h.0, Engine::Ni(_)), ni::available());
    }
}
