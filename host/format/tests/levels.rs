//! Compression levels (1 to 19, the long window above the default) and
//! `zstd-delta` bases across kernel keys: every archive decodes back to
//! exactly what was added, and the bytes do not depend on the thread count.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

mod common;

use std::path::Path;

use kpack_format::testing::noise;
use kpack_format::{Archive, ArchiveWriter, Compression, ErrorKind, LEVELS, WriterOptions};

/// A compressible "code object": runs of a few instruction-like words.
fn code(seed: u32, len: usize) -> Vec<u8> {
    let n = noise(seed, len / 8 + 1);
    (0..len).map(|i| n[i / 8] & 0x3f ^ (i % 8) as u8).collect()
}

/// `base` with `len` bytes at `at` replaced: the same kernel edited.
fn edited(base: &[u8], at: usize, len: usize, seed: u32) -> Vec<u8> {
    let mut v = base.to_vec();
    v[at..at + len].copy_from_slice(&noise(seed, len));
    v
}

fn write(path: &Path, compression: Compression, items: &[(&str, &str, Vec<u8>)]) -> Vec<u8> {
    let items = items.iter().map(|(k, a, d)| (*k, *a, d.as_slice()));
    common::write(path, "gfx942", compression, items)
}

/// Every entry decodes to exactly the bytes added.
fn assert_round_trips(path: &Path, items: &[(&str, &str, Vec<u8>)]) {
    let a = Archive::open(path).unwrap();
    assert_eq!(a.entries().count(), items.len());
    for (key, arch, data) in items {
        assert_eq!(&*a.get(key, arch).unwrap(), &data[..], "{key} {arch}");
    }
}

#[test]
fn every_level_round_trips_in_both_schemes() {
    let dir = tempfile::tempdir().unwrap();
    let a = code(1, 50_000);
    let items = vec![
        ("lib/x.so#0", "gfx942", a.clone()),
        ("lib/x.so#1", "gfx942", edited(&a, 1000, 200, 7)),
        ("lib/x.so#2", "gfx942", code(2, 20_000)),
        ("lib/x.so#2", "gfx950", edited(&code(2, 20_000), 50, 30, 8)),
    ];
    for level in LEVELS {
        for compression in [
            Compression::Zstd { level },
            Compression::ZstdDelta { level },
        ] {
            let path = dir
                .path()
                .join(format!("{}-{level}.kpack", compression.scheme_name()));
            write(&path, compression, &items);
            assert_round_trips(&path, &items);
        }
    }
}

#[test]
fn levels_outside_the_range_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for level in [0, -1, 20, 22] {
        for compression in [
            Compression::Zstd { level },
            Compression::ZstdDelta { level },
        ] {
            let options = WriterOptions {
                compression,
                ..Default::default()
            };
            let e = ArchiveWriter::create(dir.path().join("a.kpack"), options).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{level}: {e}");
            assert!(e.to_string().contains(&format!("level {level}")), "{e}");
        }
    }
}

#[test]
fn above_the_default_level_a_kernel_matches_beyond_the_levels_own_window() {
    // 3 MiB of noise, then its first 1 MiB again: 3 MiB back, beyond level
    // 4's own 2 MiB window, within the long one.
    let mut k = noise(5, 3 << 20);
    k.extend_from_within(..1 << 20);
    let items = vec![("big.so#0", "gfx942", k)];
    let dir = tempfile::tempdir().unwrap();
    let size = |level| {
        let path = dir.path().join(format!("l{level}.kpack"));
        let len = write(&path, Compression::Zstd { level }, &items).len();
        assert_round_trips(&path, &items);
        len
    };
    let (l3, l4) = (size(3), size(4));
    assert!(l3 > 4 << 20, "{l3}");
    assert!(l4 < (3 << 20) + (64 << 10), "{l4}");
}

/// One target's kernels: two pairs of near-identical kernels under
/// different keys, and one unlike any other.
fn one_target() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let (a, b) = (noise(1, 40_000), noise(2, 30_000));
    vec![
        ("lib/x.so#0", "gfx942", a.clone()),
        ("lib/x.so#1", "gfx942", edited(&a, 5000, 100, 11)),
        ("lib/x.so#2", "gfx942", b.clone()),
        ("lib/x.so#3", "gfx942", edited(&b, 20_000, 100, 12)),
        ("lib/x.so#4", "gfx942", noise(3, 10_000)),
    ]
}

#[test]
fn a_kernel_is_stored_against_a_like_kernel_of_another_key() {
    let dir = tempfile::tempdir().unwrap();
    let items = one_target();
    let path = dir.path().join("x_gfx942.kpack");
    let bytes = write(&path, Compression::ZstdDelta { level: 3 }, &items);
    assert_round_trips(&path, &items);
    let a = Archive::open(&path).unwrap();
    let key_of = |ordinal: u64| {
        a.entries()
            .find(|e| e.ordinal() == ordinal)
            .map(|e| e.key().to_owned())
            .unwrap()
    };
    let mut across = Vec::new();
    for e in a.entries() {
        if let Some(b) = e.base() {
            let base = a.entries().find(|x| x.ordinal() == b).unwrap();
            assert!(base.base().is_none(), "{} has a delta as its base", e.key());
            across.push((e.key().to_owned(), key_of(b)));
        }
    }
    across.sort();
    assert_eq!(
        across.len(),
        2,
        "one delta per like pair, none for the stranger: {across:?}"
    );
    for (k, b) in &across {
        let pair = |s: &str| matches!(s.chars().last(), Some('0' | '1')) as u8;
        assert_eq!(pair(k), pair(b), "{k} against {b}");
    }
    // The two deltas are small: about the stranger plus one of each pair.
    let alone: usize = items.iter().map(|(_, _, d)| d.len()).sum();
    assert!(bytes.len() < alone * 7 / 10, "{} of {alone}", bytes.len());
}

#[test]
fn bases_across_keys_do_not_depend_on_the_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let items = one_target();
    common::assert_same_at_thread_counts(&[1, 3], |threads| {
        let path = dir.path().join(format!("t{threads}.kpack"));
        write(&path, Compression::ZstdDelta { level: 3 }, &items)
    });
}
