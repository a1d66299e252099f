//! Deterministic mutation sweep through prune: single-byte changes and
//! truncations of the clang-19 link inputs (new-driver and old-driver
//! objects, GNU and BSD archives) go through `device_targets` and
//! `prune_object` / `prune_archive`. Nothing may panic, and whatever prune
//! writes reads back holding only the kept target. The `prune` fuzz target
//! (`fuzz/fuzz_targets/prune.rs`) does the same with random mutations;
//! its crashers become tests here.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::{Path, PathBuf};

use kpack_llvm_offload::{device_targets, is_archive, prune_archive, prune_object};

fn clang19(name: &str) -> Vec<u8> {
    let p: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/clang19")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Prune `data` keeping gfx942; if it succeeds, the output must read back
/// with gfx942 at most.
fn prune_checked(data: &[u8], what: &str) {
    let _ = device_targets(data);
    let keep = |t: &str| t == "gfx942";
    let pruned = if is_archive(data) {
        prune_archive(data, &keep, &budget())
    } else {
        prune_object(data, &keep, &budget())
    };
    if let Ok((out, _)) = pruned
        && let Ok(after) = device_targets(&out)
    {
        assert!(
            after.iter().all(|t| t == "gfx942"),
            "{what}: kept {after:?}"
        );
    }
}

/// Every byte of the first `head` bytes set to a few boundary values, every
/// `stride`-th byte after it XOR 0xff, and truncations at the same points.
fn sweep(name: &str, head: usize, stride: usize) {
    let data = clang19(name);
    let mut m = data.clone();
    let mut i = 0;
    while i < data.len() {
        let orig = m[i];
        let values: &[u8] = if i < head {
            &[0x00, 0x01, 0x7f, 0xff]
        } else {
            &[orig ^ 0xff]
        };
        for &v in values {
            m[i] = v;
            prune_checked(&m, &format!("{name}: byte {i:#x} = {v:#x}"));
        }
        m[i] = orig;
        prune_checked(&data[..i], &format!("{name}: truncated to {i:#x}"));
        i += if i < head { 1 } else { stride };
    }
}

#[test]
fn unmutated_inputs_prune_to_gfx942() {
    for name in [
        "nd_kern_axpy.o",
        "kern_axpy_old.o",
        "kern_axpy_old_ccob.o",
        "libnd_kernels.a",
        "libnd_bsd.a",
        "libnd_nosym.a",
        "libmixed.a",
    ] {
        let data = clang19(name);
        let keep = |t: &str| t == "gfx942";
        let (out, report) = if is_archive(&data) {
            prune_archive(&data, &keep, &budget())
        } else {
            prune_object(&data, &keep, &budget())
        }
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(report.entries_dropped > 0, "{name}: {report:?}");
        assert!(out.len() < data.len(), "{name}: did not shrink");
        assert_eq!(device_targets(&out).unwrap(), ["gfx942"], "{name}");
    }
}

#[test]
fn mutated_objects_never_panic() {
    // ELF header and the first section bytes byte by byte, the rest
    // (section contents, symbol and section header tables) sampled.
    sweep("nd_kern_axpy.o", 0x80, 7);
    sweep("kern_axpy_old_ccob.o", 0x80, 13);
}

#[test]
fn mutated_archives_never_panic() {
    // The archive magic, symbol table and first member header byte by byte.
    sweep("libnd_kernels.a", 0x140, 11);
    sweep("libnd_bsd.a", 0x140, 29);
}

#[test]
fn thin_archives_are_refused() {
    let data = clang19("libnd_thin.a");
    let err = prune_archive(&data, &|t| t == "gfx942", &budget()).unwrap_err();
    assert!(err.to_string().contains("thin archive"), "{err}");
}

/// The budget pruning runs under here.
fn budget() -> kpack_bundle::MemoryBudget {
    kpack_bundle::MemoryBudget::new(256 << 20)
}
