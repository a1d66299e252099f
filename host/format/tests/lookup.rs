//! `Archive::entry` finds a key by binary search over the sorted binaries
//! (no index is built at open): on every scheme, on AMD's vectors and on a
//! map large enough for the sorted duplicate check, it must agree with a
//! linear scan of `entries()` for every present and absent (key, arch).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::PathBuf;

use kpack_format::{Archive, ArchiveWriter, Compression, WriterOptions};

fn check(archive: &Archive) {
    let mut keys: Vec<String> = archive.entries().map(|e| e.key().to_owned()).collect();
    let mut arches: Vec<String> = archive.entries().map(|e| e.arch().to_owned()).collect();
    // Absent keys sorting before, between and after the present ones.
    keys.extend(["", "#", "zzzz#0", "lib/a.so#1x", "lib/a.so"].map(String::from));
    arches.extend(["gfx000", "", "gfx90a:xnack"].map(String::from));
    for key in &keys {
        for arch in &arches {
            let scan = archive
                .entries()
                .find(|e| e.key() == key && e.arch() == arch);
            assert_eq!(archive.entry(key, arch), scan, "{key:?} {arch:?}");
        }
    }
    let n = archive.binary_count();
    for i in 0..n {
        let key = archive.binary(i).unwrap();
        assert!(archive.entries().any(|e| e.key() == key));
    }
}

#[test]
fn binary_search_lookup_equals_a_linear_scan_on_amd_vectors() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
    for name in ["amd_test_noop.kpack", "amd_test_zstd.kpack"] {
        let archive = Archive::open(dir.join(name)).unwrap();
        assert!(archive.entry_count() > 0, "{name}");
        check(&archive);
    }
}

#[test]
fn binary_search_lookup_equals_a_linear_scan_on_every_scheme() {
    let dir = tempfile::tempdir().unwrap();
    for (i, compression) in [
        Compression::None,
        Compression::Zstd { level: 3 },
        Compression::ZstdDelta { level: 3 },
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.path().join(format!("a{i}.kpack"));
        let options = WriterOptions {
            compression,
            ..Default::default()
        };
        let mut w = ArchiveWriter::create(&path, options).unwrap();
        // 150 keys (more than the 64 where duplicate keys are found by
        // sorting), shared prefixes, a non-ASCII one; not all arches per key.
        for k in 0..150u32 {
            let key = format!("lib/a{}.so#{}", k % 7, k);
            for (j, arch) in ["gfx1100", "gfx90a:xnack-", "gfx90a:xnack+"]
                .iter()
                .enumerate()
            {
                if (k as usize + j) % 3 != 2 {
                    let data = format!("{key}/{arch}").repeat(20);
                    w.add(&key, arch, data.as_bytes()).unwrap();
                }
            }
        }
        w.add("lib/é.so#0", "gfx1100", b"x").unwrap();
        w.finish().unwrap();
        let archive = Archive::open(&path).unwrap();
        check(&archive);
        assert_eq!(
            &*archive.get("lib/a3.so#10", "gfx1100").unwrap(),
            "lib/a3.so#10/gfx1100".repeat(20).as_bytes()
        );
    }
}
