//! Compatibility with AMD's own test archives (spec §2.7): read them exactly,
//! and write the same content back byte for byte.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::PathBuf;

use kpack_format::{
    Archive, ArchiveWriter, Compression, EntryOrder, ErrorKind, Scheme, WriterOptions,
};

fn vector(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors")
        .join(name)
}

fn padded(prefix: &str, fill: u8, n: usize) -> Vec<u8> {
    let mut v = prefix.as_bytes().to_vec();
    v.extend(std::iter::repeat_n(fill, n));
    v
}

fn two_runs(prefix: &str, a: u8, na: usize, b: u8, nb: usize) -> Vec<u8> {
    let mut v = padded(prefix, a, na);
    v.extend(std::iter::repeat_n(b, nb));
    v
}

/// (key, arch, bytes) of test_noop.kpack in AMD's `add_kernel` order.
fn noop_content() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    vec![
        (
            "lib/libtest.so#0",
            "gfx900",
            padded("KERNEL1_GFX900_DATA", 0, 100),
        ),
        (
            "lib/libtest.so#0",
            "gfx906",
            padded("KERNEL2_GFX906_DATA", 0, 200),
        ),
        (
            "bin/testapp#0",
            "gfx900",
            padded("KERNEL3_APP_GFX900", 0xff, 150),
        ),
    ]
}

/// (key, arch, bytes) of test_zstd.kpack in AMD's `add_kernel` order.
fn zstd_content() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    vec![
        (
            "lib/libhip.so#0",
            "gfx1100",
            two_runs("HIP_KERNEL_GFX1100_", b'A', 500, b'B', 500),
        ),
        (
            "lib/libhip.so#0",
            "gfx1101",
            two_runs("HIP_KERNEL_GFX1101_", b'X', 300, b'Y', 300),
        ),
        (
            "bin/hiptest#0",
            "gfx1100",
            padded("TEST_APP_KERNEL___", 0x42, 1000),
        ),
    ]
}

#[test]
fn reads_amd_noop_vector_exactly() {
    let a = Archive::open(vector("amd_test_noop.kpack")).unwrap();
    assert_eq!(a.scheme(), Scheme::None);
    assert_eq!(a.group_name(), "test");
    assert_eq!(a.gfx_arch_family(), "gfx900X");
    assert_eq!(a.arches(), ["gfx900", "gfx906"]);
    assert_eq!(
        a.binaries().collect::<Vec<_>>(),
        ["bin/testapp#0", "lib/libtest.so#0"]
    );
    assert_eq!(a.toc_offset(), 0x23a);
    assert_eq!(a.file_size(), 903);
    let sizes: Vec<_> = noop_content()
        .iter()
        .map(|(k, ar, _)| a.get(k, ar).unwrap().len())
        .collect();
    assert_eq!(sizes, [119, 219, 168]);
    for (ordinal, (key, arch, bytes)) in noop_content().into_iter().enumerate() {
        let e = a.entry(key, arch).unwrap();
        assert_eq!(e.ordinal(), ordinal as u64);
        assert_eq!(
            &*a.get(key, arch).unwrap(),
            bytes.as_slice(),
            "{key} {arch}"
        );
    }
    assert_eq!(
        a.entry("lib/libtest.so#0", "gfx900")
            .unwrap()
            .stored_offset(),
        64
    );
    assert_eq!(
        a.entry("lib/libtest.so#0", "gfx906")
            .unwrap()
            .stored_offset(),
        183
    );
    assert_eq!(
        a.entry("bin/testapp#0", "gfx900").unwrap().stored_offset(),
        402
    );
    assert_eq!(
        a.get("bin/testapp#0", "gfx906").unwrap_err().kind(),
        ErrorKind::KernelNotFound
    );
    assert_eq!(
        a.get("lib/libtest.so", "gfx900").unwrap_err().kind(),
        ErrorKind::KernelNotFound
    );
}

#[test]
fn reads_amd_zstd_vector_exactly() {
    let a = Archive::open(vector("amd_test_zstd.kpack")).unwrap();
    assert_eq!(a.scheme(), Scheme::ZstdPerKernel);
    assert_eq!(a.gfx_arch_family(), "gfx110X");
    assert_eq!(a.arches(), ["gfx1100", "gfx1101"]);
    assert_eq!(
        a.binaries().collect::<Vec<_>>(),
        ["bin/hiptest#0", "lib/libhip.so#0"]
    );
    assert_eq!(a.toc_offset(), 198);
    let frames: Vec<_> = zstd_content()
        .iter()
        .map(|(k, ar, _)| a.entry(k, ar).unwrap().stored_size())
        .collect();
    assert_eq!(frames, [41, 41, 36]);
    for (ordinal, (key, arch, bytes)) in zstd_content().into_iter().enumerate() {
        let e = a.entry(key, arch).unwrap();
        assert_eq!(e.ordinal(), ordinal as u64);
        assert_eq!(e.original_size(), bytes.len() as u64);
        assert_eq!(
            &*a.get(key, arch).unwrap(),
            bytes.as_slice(),
            "{key} {arch}"
        );
    }
    assert_eq!(
        a.get("bin/hiptest#0", "gfx1101").unwrap_err().kind(),
        ErrorKind::KernelNotFound
    );
}

fn rewrite(content: Vec<(&str, &str, Vec<u8>)>, options: WriterOptions) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.kpack");
    let mut w = ArchiveWriter::create(&path, options).unwrap();
    for (k, a, d) in &content {
        w.add(k, a, d).unwrap();
    }
    w.finish().unwrap();
    std::fs::read(&path).unwrap()
}

fn amd_options(family: &str, compression: Compression) -> WriterOptions {
    WriterOptions {
        group_name: "test".into(),
        gfx_arch_family: family.into(),
        gfx_arches: None,
        compression,
        order: EntryOrder::Insertion,
        ..Default::default()
    }
}

#[test]
fn rewrites_amd_noop_vector_byte_identically() {
    let ours = rewrite(noop_content(), amd_options("gfx900X", Compression::None));
    assert_eq!(ours, std::fs::read(vector("amd_test_noop.kpack")).unwrap());
}

#[test]
fn rewrites_amd_zstd_vector_byte_identically_at_level_3() {
    let ours = rewrite(
        zstd_content(),
        amd_options("gfx110X", Compression::Zstd { level: 3 }),
    );
    assert_eq!(ours, std::fs::read(vector("amd_test_zstd.kpack")).unwrap());
}

/// Our default (sorted) order renumbers AMD's entries; the content read
/// back must be the same, only ordinals and placement differ.
#[test]
fn sorted_rewrite_of_amd_vectors_reads_back_the_same_content() {
    for (name, content, family, compression) in [
        (
            "amd_test_noop.kpack",
            noop_content(),
            "gfx900X",
            Compression::None,
        ),
        (
            "amd_test_zstd.kpack",
            zstd_content(),
            "gfx110X",
            Compression::default(),
        ),
    ] {
        let amd = Archive::open(vector(name)).unwrap();
        let options = WriterOptions {
            order: EntryOrder::Sorted,
            ..amd_options(family, compression)
        };
        let ours = Archive::from_bytes(rewrite(content, options)).unwrap();
        assert_eq!(ours.arches(), amd.arches());
        assert_eq!(
            ours.binaries().collect::<Vec<_>>(),
            amd.binaries().collect::<Vec<_>>()
        );
        for e in amd.entries() {
            assert_eq!(
                ours.get(e.key(), e.arch()).unwrap(),
                amd.read(e).unwrap(),
                "{name} {}",
                e.key()
            );
        }
        let ordinals: Vec<_> = ours.entries().map(|e| e.ordinal()).collect();
        assert_eq!(
            ordinals,
            [0, 1, 2],
            "sorted order numbers entries in (key, arch) order"
        );
    }
}
