//! Deterministic test data, for this crate's tests and its users' (the
//! `test-support` feature, which only dev-dependencies turn on, so no
//! release build holds it).

/// `len` pseudo-random bytes from `seed` (xorshift32), the same on every
/// machine: incompressible alone, so only a delta against a like
/// sequence makes them small.
pub fn noise(seed: u32, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761).max(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}
