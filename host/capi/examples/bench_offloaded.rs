//! Runtime benchmark on a real `kpack offload` output, driven by
//! `bench/runtime.sh`: what the first kernel load of a freshly started
//! application costs (new cache, archive not yet open), page cache warm
//! and with the archive's pages evicted, through the C ABI exactly as CLR
//! calls it.
//!
//! Usage: `bench_offloaded BINARY ARCH [ROUNDS]`, where BINARY was written
//! by `kpack offload` and ARCH is a device arch (e.g. `gfx90a`).
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

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rocm_kpack::*;

/// New cache + one `kpack_load_code_object`; returns (time, size).
fn cold_load(marker: &[u8], binary: &CString, arch: &CString, co: u32) -> (Duration, usize) {
    let t = Instant::now();
    let cache = new_cache();
    let (_, size) = timed_load(cache, marker, binary, co, arch);
    let dt = t.elapsed();
    // SAFETY: the cache has no other users.
    unsafe { kpack_cache_destroy(cache) };
    (dt, size)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let binary = PathBuf::from(args.get(1).expect("BINARY"));
    let arch = args.get(2).expect("ARCH");
    let rounds: usize = args.get(3).map(|s| s.parse().unwrap()).unwrap_or(5);
    let binary = std::fs::canonicalize(&binary).unwrap();

    let elf = std::fs::read(&binary).unwrap();
    let marker_bytes = elf_section(&elf, ".rocm_kpack_ref").expect("no .rocm_kpack_ref section");
    drop(elf);
    let marker = kpack_runtime::Marker::parse(&marker_bytes).unwrap();
    let dir = binary.parent().unwrap();
    // The archive and target the loader will choose: first existing
    // candidate, most specific target first (spec §10.5).
    let targets = kpack_runtime::compatible_targets(arch);
    let archive_path = marker
        .search_paths
        .iter()
        .flat_map(|p| {
            targets
                .iter()
                .map(|t| dir.join(p.replacen("@GFXARCH@", t, 1)))
        })
        .find(|p| p.exists())
        .expect("no archive for ARCH next to BINARY");
    let archive = kpack_format::Archive::open(&archive_path).unwrap();
    let target = targets
        .iter()
        .find(|t| archive.has_arch(t))
        .expect("the archive serves no target compatible with ARCH")
        .clone();
    // The entries the bench loads: the median-size and the largest code
    // object for the target.
    let mut sized: Vec<(usize, u32)> = archive
        .entries()
        .filter(|e| e.arch() == target)
        .map(|e| {
            let co = e.key().rsplit_once('#').unwrap().1.parse().unwrap();
            (archive.read(e).unwrap().len(), co)
        })
        .collect();
    sized.sort();
    assert!(!sized.is_empty(), "target has no entries");
    let picks = [
        ("median", sized[sized.len() / 2]),
        ("largest", sized[sized.len() - 1]),
    ];
    let (entries, scheme) = (archive.entries().count(), format!("{:?}", archive.scheme()));
    drop(archive);
    let archive_size = std::fs::metadata(&archive_path).unwrap().len();
    println!(
        "archive {} ({:.1} MB, {scheme}, {entries} entries); device {arch} -> target {target}",
        archive_path.file_name().unwrap().to_string_lossy(),
        archive_size as f64 / 1e6,
    );

    let (binary_c, arch_c) = (
        CString::new(binary.to_str().unwrap()).unwrap(),
        CString::new(arch.as_str()).unwrap(),
    );
    let path_c = CString::new(archive_path.to_str().unwrap()).unwrap();
    for (label, (size, co)) in picks {
        for evicted in [false, true] {
            let (mut times, mut opens) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                if evicted {
                    evict(&archive_path);
                } else {
                    cold_load(&marker_bytes, &binary_c, &arch_c, co); // warm the page cache
                }
                let mut a: kpack_archive_t = std::ptr::null_mut();
                let t = Instant::now();
                // SAFETY: valid path and out pointer.
                assert_eq!(
                    unsafe { kpack_open(path_c.as_ptr(), &mut a) },
                    kpack_error_t::KPACK_SUCCESS
                );
                opens.push(t.elapsed());
                // SAFETY: handle from kpack_open.
                unsafe { kpack_close(a) };
                if evicted {
                    evict(&archive_path);
                }
                let (dt, n) = cold_load(&marker_bytes, &binary_c, &arch_c, co);
                assert_eq!(n, size);
                times.push(dt);
            }
            times.sort();
            opens.sort();
            println!(
                "{label} kernel #{co} ({:.1} KB), {}: new cache + open + first load median {:.2?} (min {:.2?}, max {:.2?}); kpack_open alone median {:.2?}",
                size as f64 / 1e3,
                if evicted {
                    "archive pages evicted"
                } else {
                    "page cache warm"
                },
                times[times.len() / 2],
                times[0],
                times[times.len() - 1],
                opens[opens.len() / 2],
            );
        }
    }
}
