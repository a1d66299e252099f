//! Family-archive runtime benchmark, driven by `bench/family.sh`: the same
//! kernel loaded warm through `kpack_load_code_object` from a per-target
//! `zstd-per-kernel` offload and from a family `zstd-delta` offload, and a
//! cold `kpack_open` of the delta archive, counting the pages it brought in.
//!
//! Usage: `bench_family PER_TARGET_BINARY DELTA_BINARY ARCH [ROUNDS
//! [COLD_ARCHIVE]]`: both
//! binaries were written by `kpack offload` from the same input (the first
//! with `--compression zstd`, the second with `--archive-group family
//! --compression zstd-delta`); ARCH is a device arch whose entry in the
//! delta archive should be a delta (e.g. `gfx1101`). The cold open is of
//! COLD_ARCHIVE if given (a large one: the kernel reads ahead around every
//! fault, `read_ahead_kb`), else of the device's delta archive.
#![allow(unsafe_code, reason = "calls the C ABI exactly as a C caller would")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "benchmark driver"
)]

#[path = "support/bench.rs"]
mod bench;

use bench::{elf_section, evict, new_cache, timed_load};

use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rocm_kpack::*;

/// An offloaded binary: its canonical path, marker, and the archive and
/// target the loader picks for `arch` (first existing candidate, most
/// specific target first, spec §10.5).
struct Offloaded {
    binary: CString,
    marker: Vec<u8>,
    archive: PathBuf,
    target: String,
}

fn offloaded(binary: &str, arch: &str) -> Offloaded {
    let binary = std::fs::canonicalize(binary).unwrap();
    let marker = elf_section(&std::fs::read(&binary).unwrap(), ".rocm_kpack_ref")
        .expect("no .rocm_kpack_ref section");
    let m = kpack_runtime::Marker::parse(&marker).unwrap();
    let dir = binary.parent().unwrap();
    let targets = kpack_runtime::compatible_targets(arch);
    let (archive, target) = m
        .search_paths
        .iter()
        .flat_map(|p| {
            targets
                .iter()
                .map(move |t| (dir.join(p.replacen("@GFXARCH@", t, 1)), t))
        })
        .filter(|(p, _)| p.exists())
        .find_map(|(p, _)| {
            let a = kpack_format::Archive::open(&p).unwrap();
            let t = targets.iter().find(|t| a.has_arch(t))?.clone();
            Some((p, t))
        })
        .expect("no archive for ARCH next to BINARY");
    Offloaded {
        binary: CString::new(binary.to_str().unwrap()).unwrap(),
        marker,
        archive,
        target,
    }
}

/// p50 of `rounds` warm `kpack_load_code_object` calls of entry `co` on
/// one cache (after one untimed load fills its memos), and the size.
fn warm_p50(o: &Offloaded, arch: &CString, co: u32, rounds: usize) -> (Duration, usize) {
    let cache = new_cache();
    let mut times = Vec::with_capacity(rounds);
    let mut size = 0usize;
    for i in 0..=rounds {
        let (dt, n) = timed_load(cache, &o.marker, &o.binary, co, arch);
        size = n;
        if i > 0 {
            times.push(dt);
        }
    }
    // SAFETY: the cache has no other users.
    unsafe { kpack_cache_destroy(cache) };
    times.sort();
    (times[times.len() / 2], size)
}

/// Bytes of `path` resident in the page cache (mincore over a fresh map).
fn resident(path: &Path) -> u64 {
    let f = std::fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    // SAFETY: page size query.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    // SAFETY: a read-only shared map of an open file, unmapped below; its
    // pages are never touched (mincore only reports residency).
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: `vec` has one byte per page of the mapping.
    assert_eq!(unsafe { libc::mincore(p, len, vec.as_mut_ptr()) }, 0);
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(p, len) };
    vec.iter().filter(|&&b| b & 1 == 1).count() as u64 * page as u64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (per, delta, arch) = (
        args.get(1).expect("PER_TARGET_BINARY"),
        args.get(2).expect("DELTA_BINARY"),
        args.get(3).expect("ARCH"),
    );
    let rounds: usize = args.get(4).map(|s| s.parse().unwrap()).unwrap_or(21);
    let (per, delta) = (offloaded(per, arch), offloaded(delta, arch));

    // The kernel: the largest delta entry of the target in the delta archive.
    let a = kpack_format::Archive::open(&delta.archive).unwrap();
    let (size, co, base_arch) = a
        .entries()
        .filter(|e| e.arch() == delta.target && e.base().is_some())
        .map(|e| {
            let co: u32 = e.key().rsplit_once('#').unwrap().1.parse().unwrap();
            let base = a.entry_by_ordinal(e.base().unwrap()).unwrap();
            (e.original_size(), co, base.arch().to_owned())
        })
        .max()
        .expect("the target's entries in the delta archive are all bases");
    drop(a);
    let arch_c = CString::new(arch.as_str()).unwrap();
    let (tp, np) = warm_p50(&per, &arch_c, co, rounds);
    let (td, nd) = warm_p50(&delta, &arch_c, co, rounds);
    assert_eq!((np, nd), (size as usize, size as usize));
    println!(
        "warm kpack_load_code_object #{co} ({:.1} MB, {} -> {}), p50 of {rounds}: \
         per-kernel {:.2?} ({}), delta {:.2?} ({}, base {base_arch}); ratio {:.2}",
        size as f64 / 1e6,
        arch,
        delta.target,
        tp,
        per.archive.file_name().unwrap().to_string_lossy(),
        td,
        delta.archive.file_name().unwrap().to_string_lossy(),
        td.as_secs_f64() / tp.as_secs_f64(),
    );

    // Cold open: pages the open brought in (readahead included).
    let cold = args.get(5).map_or(delta.archive.clone(), PathBuf::from);
    let path_c = CString::new(cold.to_str().unwrap()).unwrap();
    let file_size = std::fs::metadata(&cold).unwrap().len();
    evict(&cold);
    let before = resident(&cold);
    let mut h: kpack_archive_t = std::ptr::null_mut();
    let t = Instant::now();
    // SAFETY: valid path and out pointer.
    assert_eq!(
        unsafe { kpack_open(path_c.as_ptr(), &mut h) },
        kpack_error_t::KPACK_SUCCESS
    );
    let dt = t.elapsed();
    // SAFETY: handle from kpack_open.
    unsafe { kpack_close(h) };
    let after = resident(&cold);
    println!(
        "cold kpack_open {} ({:.1} MB): {:.2?}, page cache {} -> {} bytes resident ({:.3}% of the file)",
        cold.file_name().unwrap().to_string_lossy(),
        file_size as f64 / 1e6,
        dt,
        before,
        after,
        after as f64 * 100.0 / file_size as f64,
    );
}
