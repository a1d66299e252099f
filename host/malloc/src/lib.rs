//! The one allocator setting the `kpack` CLI makes at start, and the only
//! `unsafe` outside the C ABI crate (`kpack-capi`) and `kpack-format`'s
//! `mmap` module.
//!
//! glibc's malloc serves a request of 128 KiB or more with its own `mmap`
//! and gives it back on `free`, but by default it then *raises* that
//! threshold to the size just freed (up to 32 MiB, the trim threshold with
//! it up to 64 MiB). Streaming compressed bundles allocates many such
//! buffers of varying size: zstd's decoder windows (allocated by zstd's C
//! code, so a Rust global allocator would not see them), pipe chunks,
//! code-object buffers. Once the threshold has risen they come from the
//! arenas instead, and each arena may keep tens of MB of freed memory: on
//! JAX's plugin library `kpack inspect` peaked at 170–179 MB while the
//! bytes it holds (budgeted by `kpack_bundle::MemoryBudget`) stay under
//! 128 MiB. Fixing the threshold at 4 MiB keeps RSS close to
//! what is held (138 MB there).
//!
//! ```
//! // At the start of `main`, before other threads exist.
//! kpack_malloc::return_large_frees_to_the_os();
//! ```
#![deny(unsafe_code)]

/// The fixed threshold, 4 MiB: zstd's decoder windows of big bundles (up to
/// the whole bundle, 100+ MiB) go back to the OS when freed; the 512 KiB
/// pipe chunks and per-kernel buffers stay in the arenas and are reused.
/// At glibc's own 128 KiB every chunk was a fresh mapping, page-faulted
/// in: 8.9 GB streamed through 512 KiB chunks cost ~5 s of system time
/// (measured on bench/torch-scale's library), while RSS was no better
/// than at 4 MiB (JAX's plugin: 135 vs 138 MB for `inspect`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 4 << 20;

/// Fix glibc's mmap threshold (`M_MMAP_THRESHOLD`, which also turns off
/// its dynamic adjustment), so every allocation of 4 MiB or more is
/// returned to the OS when freed. `true` if the setting was made; on
/// other platforms (musl, macOS, Windows) it does nothing and returns
/// `false`.
pub fn return_large_frees_to_the_os() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        #[allow(
            unsafe_code,
            reason = "mallopt is a C function; this is the crate's one call"
        )]
        // SAFETY: mallopt takes two integers by value and changes only
        // malloc's own tunables under malloc's lock (glibc documents it
        // MT-safe); it reads or writes no memory of ours, and 4 MiB is
        // within the range glibc accepts (0 to 32 MiB on 64-bit).
        let done = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
        done == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_is_accepted_on_glibc() {
        let accepted = return_large_frees_to_the_os();
        assert_eq!(
            accepted,
            cfg!(all(target_os = "linux", target_env = "gnu")),
            "mallopt(M_MMAP_THRESHOLD) was refused"
        );
        // Allocating and freeing after it works as before.
        let big = vec![1u8; 4 << 20];
        assert_eq!(big.iter().map(|&b| usize::from(b)).sum::<usize>(), 4 << 20);
    }
}
