//! Deterministic mutation sweeps: truncations, bit flips, hostile field
//! values and random byte edits (xorshift, fixed seeds) of real
//! `.llvm.offloading` sections, of v2/v3/compressed rewrites of them, of
//! the objects and of the archives. Nothing may panic, and every
//! OffloadBinary error must name an offset. This keeps the fuzzers'
//! guarantee in CI without a fuzzer.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use kpack_llvm_offload::{
    Archive, Compression, DeviceCode, MemberKind, ReadOptions, Reader, WriteOptions, Writer,
};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/clang19")
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

/// Small limits so that a mutated size cannot make a test slow.
fn options() -> ReadOptions {
    ReadOptions {
        max_inflated_size: 1 << 20,
        verify_hash: true,
    }
}

/// xorshift64*: the same sequence on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Read every binary and touch everything an entry exposes; returns how
/// many entries were read. Errors must name an offset in hex.
fn read_section(data: &[u8], what: &str) -> usize {
    let mut n = 0;
    for b in Reader::with_options(data, options()).binaries() {
        match b {
            Ok(b) => {
                for e in b.entries() {
                    n += 1;
                    let _ = (e.arch(), e.triple(), e.image().len(), e.image_kind().name());
                    let _ = e.strings().count();
                    if let Some(r) = e.image_range() {
                        assert!(r.end <= data.len() as u64, "{what}: image range past input");
                    }
                }
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("at 0x"),
                    "{what}: error without an offset: {msg}"
                );
            }
        }
    }
    n
}

/// Run `f`, turning a panic into a failure that names the mutation.
fn no_panic(what: impl Fn() -> String, f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        panic!("panicked on {}", what());
    }
}

/// The section bytes of an object's `.llvm.offloading`.
fn section(name: &str) -> Vec<u8> {
    let data = read(name);
    let code = DeviceCode::parse(&data, &options()).unwrap();
    let s = &code.offloading[0];
    data[s.offset as usize..(s.offset + s.size) as usize].to_vec()
}

/// The clang sections and rewrites of their images as v2, v3 and
/// compressed v3 (two images per binary).
fn sections() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for name in ["nd_kern_axpy.o", "nd_kern_reduce.o"] {
        let s = section(name);
        let images: Vec<_> = Reader::new(&s)
            .read_all()
            .unwrap()
            .iter()
            .flat_map(|b| b.entries().iter().map(|e| e.to_image()))
            .collect();
        for (version, compression) in [
            (2, None),
            (3, None),
            (3, Some(Compression::Zstd(3))),
            (3, Some(Compression::Zlib(6))),
        ] {
            let mut w = Writer::new();
            let opts = WriteOptions {
                version,
                compression,
            };
            w.push(&images, &opts).unwrap();
            out.push((format!("{name} v{version} {compression:?}"), w.finish()));
        }
        out.push((name.to_string(), s));
    }
    out
}

#[test]
fn every_truncation_of_a_section_is_an_error_or_a_prefix() {
    for (what, data) in sections() {
        let full = read_section(&data, &what);
        assert!(full >= 2, "{what}");
        for len in 0..data.len() {
            let cut = &data[..len];
            no_panic(
                || format!("{what} cut to {len:#x}"),
                || {
                    let n = read_section(cut, &what);
                    assert!(n <= full, "{what} cut to {len:#x}: more entries than whole");
                },
            );
        }
    }
}

#[test]
fn every_bit_flip_in_the_headers_is_survived() {
    for (what, data) in sections() {
        // Header, entries, string map and table of the first binary (the
        // compressed ones: the header and the start of the frame).
        for at in 0..data.len().min(200) {
            for bit in 0..8 {
                let mut m = data.clone();
                m[at] ^= 1 << bit;
                no_panic(
                    || format!("{what} bit {bit} of byte {at:#x}"),
                    || {
                        read_section(&m, &what);
                    },
                );
            }
        }
    }
}

/// Values that break sizes and offsets.
const HOSTILE: [u64; 10] = [
    0,
    1,
    7,
    8,
    40,
    0x7fff_ffff,
    0xffff_ffff,
    1 << 63,
    u64::MAX - 7,
    u64::MAX,
];

#[test]
fn hostile_u64_fields_are_survived() {
    for (what, data) in sections() {
        for field in (0..data.len().min(256)).step_by(8) {
            for v in HOSTILE
                .iter()
                .chain([&(data.len() as u64), &(data.len() as u64 + 1)])
            {
                let mut m = data.clone();
                m[field..field + 8].copy_from_slice(&v.to_le_bytes());
                no_panic(
                    || format!("{what} u64 at {field:#x} = {v:#x}"),
                    || {
                        read_section(&m, &what);
                    },
                );
            }
        }
    }
}

#[test]
fn random_edits_of_sections_are_survived() {
    let mut rng = Rng(0x5eed_0ff1_0ad0_0016);
    for (what, data) in sections() {
        for round in 0..600 {
            let mut m = data.clone();
            for _ in 0..1 + rng.below(4) {
                // Mostly the metadata at the front, sometimes anywhere.
                let span = if rng.below(4) == 0 {
                    m.len()
                } else {
                    m.len().min(256)
                };
                let at = rng.below(span);
                m[at] = rng.next() as u8;
            }
            if rng.below(8) == 0 {
                let len = rng.below(m.len());
                m.truncate(len);
            }
            no_panic(
                || format!("{what} random round {round}"),
                || {
                    read_section(&m, &what);
                },
            );
        }
    }
}

/// Parse an archive and every member's device code, as `kpack inspect` does.
fn read_archive(data: &[u8]) {
    let Ok(ar) = Archive::parse(data) else {
        return;
    };
    let _ = ar.symbols();
    for m in ar.members() {
        let _ = (m.name(), m.size(), m.header_offset());
        if m.is_thin() {
            continue;
        }
        if MemberKind::of(m.data()) == MemberKind::Elf
            && let Ok(code) = DeviceCode::parse(m.data(), &options())
        {
            let _ = code.is_empty();
            if let Some(fb) = &code.fatbin {
                for (b, item) in fb.bundles.iter().enumerate() {
                    for i in 0..item.entries.len() {
                        let _ = fb.read_entry(b, i);
                    }
                }
            }
        }
    }
}

#[test]
fn random_edits_of_archives_and_objects_are_survived() {
    let mut rng = Rng(0xa5c1_7e50_0000_0016);
    for name in [
        "libnd_kernels.a",
        "libnd_bsd.a",
        "libmixed.a",
        "libnd_thin.a",
        "nd_kern_axpy.o",
        "kern_axpy_old_ccob.o",
    ] {
        let data = read(name);
        for round in 0..500 {
            let mut m = data.clone();
            for _ in 0..1 + rng.below(8) {
                let at = rng.below(m.len());
                m[at] = match rng.below(3) {
                    0 => rng.next() as u8,
                    1 => b'0' + rng.below(10) as u8,
                    _ => 0xff,
                };
            }
            if rng.below(6) == 0 {
                let len = rng.below(m.len());
                m.truncate(len);
            }
            no_panic(
                || format!("{name} random round {round}"),
                || {
                    if name.ends_with(".a") {
                        read_archive(&m);
                    } else {
                        let _ = DeviceCode::parse(&m, &options());
                    }
                },
            );
        }
        for len in (0..data.len()).step_by(97).chain(0..200) {
            no_panic(
                || format!("{name} cut to {len:#x}"),
                || {
                    if name.ends_with(".a") {
                        read_archive(&data[..len]);
                    } else {
                        let _ = DeviceCode::parse(&data[..len], &options());
                    }
                },
            );
        }
    }
}

#[test]
fn a_compressed_size_over_the_limit_is_refused_before_inflating() {
    let (_, data) = sections()
        .into_iter()
        .find(|(w, _)| w.contains("Zstd"))
        .unwrap();
    let mut m = data.clone();
    // inflated_size, the 5th header field.
    m[32..40].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let e = Reader::with_options(&m, options()).read_all().unwrap_err();
    assert_eq!(e.kind(), kpack_llvm_offload::ErrorKind::Decompress);
    assert!(e.to_string().contains("over the limit"), "{e}");
}

/// Seeds of the `offloading` fuzz target: the clang sections and their
/// rewrites, each of which must read. `KPACK_FUZZ_SEEDS=<dir>` keeps them
/// there (see `fuzz/seed.sh`); otherwise they go to a temporary directory.
#[test]
fn writes_fuzz_seeds() {
    let tmp = tempfile::tempdir().unwrap();
    let out = std::env::var_os("KPACK_FUZZ_SEEDS")
        .map(PathBuf::from)
        .unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&out).unwrap();
    for (what, data) in sections() {
        assert!(read_section(&data, &what) >= 2, "{what}");
        let name: String = format!("section-{what}")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        std::fs::write(out.join(name), &data).unwrap();
    }
}
