//! Deterministic mutation sweep: every single-byte flip and every truncation
//! of a real offload bundle and of compressed bundles made from it goes
//! through `walk` + `read_entry` + `code_object`. Nothing may panic, and
//! every error must name an offset inside the input. This keeps the
//! fuzzers' guarantee in CI without a fuzzer.
//!
//! The `bundle` fuzz target's seed corpus is written by a tool,
//! `cargo run -p kpack-bundle --example fuzz_seeds -- DIR` (see `fuzz/seed.sh`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::{Path, PathBuf};

use kpack_bundle::{Method, WalkOptions, deflate, walk};
use object::{Object, ObjectSection};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/corpus")
}

/// The real two-architecture bundle clang wrote (`kern_axpy_2arch.co`).
fn real_bundle() -> Vec<u8> {
    std::fs::read(corpus().join("kern_axpy_2arch.co")).expect("fixture kern_axpy_2arch.co")
}

/// Walk all of `data` the way a reader does; panics only on an error that
/// does not say where in `data` it happened.
#[allow(
    clippy::ptr_arg,
    reason = "`ReadAt` is implemented for `Vec<u8>`, and `&[u8]` is unsized as `&dyn ReadAt`"
)]
fn walk_checked(data: &Vec<u8>, what: &str) {
    let len = data.len() as u64;
    for verify_hash in [false, true] {
        for item in walk(data, 0, len, WalkOptions { verify_hash }) {
            let item = match item {
                Ok(item) => item,
                Err(e) => {
                    let off = e
                        .offset()
                        .unwrap_or_else(|| panic!("{what}: walk error without an offset: {e}"));
                    assert!(
                        off <= len,
                        "{what}: walk error offset {off:#x} past the input ({len:#x}): {e}"
                    );
                    break;
                }
            };
            for i in 0..item.entries.len() {
                if let Err(e) = item.read_entry(data, i) {
                    assert!(
                        e.offset().is_some(),
                        "{what}: read_entry({i}) error without an offset: {e}"
                    );
                }
                if let Err(e) = item.code_object(data, i) {
                    assert!(
                        e.offset().is_some(),
                        "{what}: code_object({i}) error without an offset: {e}"
                    );
                }
            }
            // The one-pass streaming read, under a small ceiling.
            let budget = kpack_bundle::MemoryBudget::new(1 << 20);
            let streamed = item.stream_entries(data, &budget, |_, e, bytes| {
                assert_eq!(bytes.len() as u64, e.size, "{what}");
                Ok::<(), kpack_bundle::Error>(())
            });
            if let Err(e) = streamed {
                assert!(
                    e.offset().is_some(),
                    "{what}: stream_entries error without an offset: {e}"
                );
            }
            assert_eq!(budget.in_flight(), 0, "{what}: a reservation leaked");
        }
    }
}

/// Every byte XOR 0xff, the first `head` bytes also set to each of a few
/// boundary values, and every truncation.
fn sweep(data: &[u8], head: usize, what: &str) {
    let mut m = data.to_vec();
    for i in 0..data.len() {
        let orig = m[i];
        let values: &[u8] = if i < head {
            &[0x00, 0x01, 0x7f, 0x80, 0xff]
        } else {
            &[]
        };
        for v in std::iter::once(orig ^ 0xff).chain(values.iter().copied()) {
            m[i] = v;
            walk_checked(&m, &format!("{what} with byte {i:#x} = {v:#04x}"));
        }
        m[i] = orig;
    }
    for cut in 0..data.len() {
        walk_checked(
            &data[..cut].to_vec(),
            &format!("{what} cut to {cut:#x} bytes"),
        );
    }
}

#[test]
fn real_bundle_survives_every_flip_and_truncation() {
    let b = real_bundle();
    walk_checked(&b, "unmutated");
    // The header and entry descriptors are in the first 0x200 bytes; the
    // code objects' ELF headers start at 0x1000-aligned offsets.
    sweep(&b, 0x200, "kern_axpy_2arch.co");
}

#[test]
fn ccob_v3_survives_every_flip_and_truncation() {
    let c = deflate(&real_bundle(), 3, Method::Zstd, 3).expect("deflate");
    sweep(&c, 32, "CCOB v3 zstd");
}

#[test]
fn ccob_v1_zlib_survives_every_flip_and_truncation() {
    // v1 has no size field: its end is found by the zlib stream itself.
    let c = deflate(&real_bundle(), 1, Method::Zlib, 6).expect("deflate");
    sweep(&c, 20, "CCOB v1 zlib");
}

/// A CCOB v2 zstd bundle as clang-19's bundler wrote it (not our writer):
/// `libaxpy_small.so`'s `.hip_fatbin`.
#[test]
fn clang19_ccob_v2_survives_every_flip_and_truncation() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/clang19/libaxpy_small.so");
    let bytes = std::fs::read(&path).expect("fixture libaxpy_small.so");
    let obj = object::File::parse(&*bytes).expect("ELF");
    let data = obj
        .section_by_name(".hip_fatbin")
        .expect(".hip_fatbin")
        .data()
        .expect("section data")
        .to_vec();
    assert_eq!(&data[..4], b"CCOB", "not a compressed bundle");
    walk_checked(&data, "unmutated");
    sweep(&data, 32, "clang-19 CCOB v2 zstd");
}
