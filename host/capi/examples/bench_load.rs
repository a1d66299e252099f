//! Runtime benchmark driven by `bench/runtime.sh`: warm
//! `kpack_load_code_object` latency (one and two threads) for a 100 KB
//! kernel, and cold open + first load on a large archive.
//!
//! Usage: `bench_load WORKDIR [BIG_MB]` (BIG_MB default 1100).
#![allow(unsafe_code, reason = "calls the C ABI exactly as a C caller would")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "benchmark driver"
)]

#[path = "support/bench.rs"]
mod bench;

use bench::{evict, new_cache, timed_load};

use std::ffi::CString;
use std::path::Path;
use std::time::{Duration, Instant};

use kpack_format::{ArchiveWriter, Compression, WriterOptions};
use kpack_runtime::Marker;
use rocm_kpack::*;

fn kernel(seed: u32, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            if i % 4 == 0 { 0 } else { x as u8 }
        })
        .collect()
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p) as usize]
}

struct Loader {
    cache: kpack_cache_t,
    marker: Vec<u8>,
    binary: CString,
    arch: CString,
}
// SAFETY: kpack_cache_t is documented thread-safe for loads.
unsafe impl Send for Loader {}
// SAFETY: as above.
unsafe impl Sync for Loader {}

impl Loader {
    fn load(&self, co: u32) -> (Duration, usize) {
        timed_load(self.cache, &self.marker, &self.binary, co, &self.arch)
    }
}

fn new_loader(root: &Path, kernel_name: &str, arch: &str) -> Loader {
    let cache = new_cache();
    let marker = Marker {
        kernel_name: kernel_name.into(),
        search_paths: vec!["../.kpack/bench_@GFXARCH@.kpack".into()],
    };
    Loader {
        cache,
        marker: marker.to_bytes(),
        binary: CString::new(root.join("lib/libbench.so").to_str().unwrap()).unwrap(),
        arch: CString::new(arch).unwrap(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let root = Path::new(args.get(1).expect("WORKDIR"));
    let big_mb: usize = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(1100);
    std::fs::create_dir_all(root.join("lib")).unwrap();
    std::fs::create_dir_all(root.join(".kpack")).unwrap();

    // Warm path: 100 KB kernels, NoOp and zstd archives.
    for (arch, compression) in [
        ("gfx942", Compression::None),
        ("gfx90a", Compression::Zstd { level: 3 }),
    ] {
        let path = root.join(format!(".kpack/bench_{arch}.kpack"));
        let mut w = ArchiveWriter::create(
            &path,
            WriterOptions {
                compression,
                ..Default::default()
            },
        )
        .unwrap();
        for co in 0..16 {
            w.add(
                &format!("lib/libbench.so#{co}"),
                arch,
                &kernel(co, 100 * 1024),
            )
            .unwrap();
        }
        w.finish().unwrap();
        let loader = new_loader(root, "lib/libbench.so", arch);
        let (first, size) = loader.load(0);
        assert_eq!(size, 100 * 1024);
        let mut v: Vec<Duration> = (0..20_000).map(|i| loader.load(i % 16).0).collect();
        let (p50, p99) = (percentile(&mut v, 0.5), percentile(&mut v, 0.99));
        println!(
            "warm 1 thread  {:>5} 100KB: first {:>8.1?}  p50 {:>7.2?}  p99 {:>7.2?}",
            scheme(compression),
            first,
            p50,
            p99
        );
        let loader = std::sync::Arc::new(loader);
        let threads: Vec<_> = (0..2)
            .map(|t| {
                let l = std::sync::Arc::clone(&loader);
                std::thread::spawn(move || {
                    (0..20_000u32)
                        .map(|i| l.load((i + t) % 16).0)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<Duration> = threads
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        let (p50, p99) = (percentile(&mut all, 0.5), percentile(&mut all, 0.99));
        println!(
            "warm 2 threads {:>5} 100KB: p50 {:>7.2?}  p99 {:>7.2?}",
            scheme(compression),
            p50,
            p99
        );
        // SAFETY: no other users remain.
        unsafe { kpack_cache_destroy(loader.cache) };
    }

    // Cold: a >= 1 GB NoOp archive of 1 MiB kernels; page cache evicted.
    let big = root.join(".kpack/bench_gfx1100.kpack");
    let t = Instant::now();
    let mut w = ArchiveWriter::create(
        &big,
        WriterOptions {
            compression: Compression::None,
            ..Default::default()
        },
    )
    .unwrap();
    let block = kernel(7, 1 << 20);
    for co in 0..big_mb {
        w.add(&format!("lib/libbench.so#{co}"), "gfx1100", &block)
            .unwrap();
    }
    let written = w.finish().unwrap();
    println!(
        "wrote {} ({} entries, {:.2} GB) in {:.1?}",
        big.display(),
        written.entries,
        written.file_size as f64 / 1e9,
        t.elapsed()
    );
    for round in 0..6 {
        let evicted = round < 3;
        if evicted {
            evict(&big);
        }
        let cpath = CString::new(big.to_str().unwrap()).unwrap();
        let mut a: kpack_archive_t = std::ptr::null_mut();
        let t = Instant::now();
        // SAFETY: valid path and out pointer.
        assert_eq!(
            unsafe { kpack_open(cpath.as_ptr(), &mut a) },
            kpack_error_t::KPACK_SUCCESS
        );
        let open = t.elapsed();
        // SAFETY: handle from kpack_open.
        unsafe { kpack_close(a) };
        if evicted {
            evict(&big);
        }
        let loader = new_loader(root, "lib/libbench.so", "gfx1100");
        let (dt, size) = loader.load((big_mb / 2) as u32);
        assert_eq!(size, 1 << 20);
        let (warm, _) = loader.load((big_mb / 2) as u32);
        let how = if evicted {
            "page cache evicted"
        } else {
            "page cache warm"
        };
        println!(
            "new cache, open + first 1 MiB load ({how}): {dt:.2?} (kpack_open alone {open:.2?}); then warm {warm:.2?}"
        );
        // SAFETY: no other users remain.
        unsafe { kpack_cache_destroy(loader.cache) };
    }
    if std::env::var_os("BENCH_KEEP").is_none() {
        std::fs::remove_file(&big).unwrap();
    }
}

fn scheme(c: Compression) -> &'static str {
    match c {
        Compression::None => "none",
        Compression::Zstd { .. } => "zstd",
        Compression::ZstdDelta { .. } => "zstd-delta",
    }
}
